//! Keeping a mirror up to date from the chain a running gateway follows (`--export-dir`):
//! the bulk files of [`crate::export`], appended as the chain grows, with the filters of
//! each newly sealed range fetched from the node the way a client session's are.
//!
//! An operator runs one process beside the node: the gateway follows it, serves the live
//! edge to tabs, and writes the history below `confirmations` blocks as files a static host
//! serves (deploy/nginx/bulk.conf). Nothing here is trusted more than a file from anywhere
//! else: clients validate the files as they validate a gateway's answers.
//!
//! The export runs on a blocking thread, never holding the chain's lock for longer than one
//! file's headers or filter headers take to copy ([`Following::read`]), and waits for a
//! filter outside it ([`Following::filter`]): the node's task that fetches filters takes
//! the same lock to hand them over. It runs when the tip moves (at most once every
//! [`SETTLE`]: a node's first sync moves it thousands of times a minute), one run at a
//! time; a run that fails (a node that does not send a filter within [`PATIENCE`], a full
//! disk, a sealed file changed on disk) is logged with its typed reason, writes no
//! manifest that names a file it did not finish, and the next tip tries again.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use lightwire_chain::HEADER_LEN;
use lightwire_proto::session::FilterLookup;
use tokio::runtime::Handle;
use tokio::sync::watch;

use crate::export::{self, ExportError, ExportSource, Exported};
use crate::metrics::ExportMetrics;
use crate::served::ServedChain;
use crate::server::Shared;
use crate::wants::SessionId;

/// How long a run waits for one filter from the node before it gives up (the next tip
/// tries again): Bitcoin Core answers nothing while its filter index is still building.
pub const PATIENCE: Duration = Duration::from_secs(60);
/// The least time between two runs.
pub const SETTLE: Duration = Duration::from_secs(2);

/// A running gateway's chain, as an export reads it (see the module's documentation).
pub struct Following<'a> {
    shared: &'a Shared,
    /// Filters are asked for as this session: the node's task fetches what it waits for
    /// (and the filters after it, in one request).
    session: SessionId,
    filters: RefCell<watch::Receiver<u64>>,
    stop: RefCell<watch::Receiver<bool>>,
    runtime: Handle,
    patience: Duration,
}

impl<'a> Following<'a> {
    /// Read `shared`'s chain from a blocking thread of `runtime`, waiting at most
    /// `patience` for each filter, and not at all once `stop` is true (or its sender is
    /// gone: the gateway with it).
    pub fn new(
        shared: &'a Shared,
        runtime: Handle,
        stop: watch::Receiver<bool>,
        patience: Duration,
    ) -> Following<'a> {
        Following {
            shared,
            session: shared.next_session(),
            filters: RefCell::new(shared.filter_version.subscribe()),
            stop: RefCell::new(stop),
            runtime,
            patience,
        }
    }
}

impl Drop for Following<'_> {
    fn drop(&mut self) {
        // What it waited for is no longer fetched for it.
        let chain = self
            .shared
            .chain
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        chain.session_ended(self.session);
    }
}

impl ExportSource for Following<'_> {
    fn read<R>(&self, read: impl FnOnce(&ServedChain) -> R) -> R {
        // A panic elsewhere while the lock was held leaves the chain as it was between
        // two whole updates (each is made under the lock, and validated before).
        let chain = self
            .shared
            .chain
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        read(&chain)
    }

    fn filter(&self, height: u32, header: [u8; HEADER_LEN], out: &mut Vec<u8>) -> bool {
        let mut filters = self.filters.borrow_mut();
        let mut stop = self.stop.borrow_mut();
        loop {
            // Seen before asking: a filter that arrives between the asking and the
            // waiting wakes the wait.
            filters.borrow_and_update();
            let asked = self.read(|c| match c.filters() {
                Some(f) => f.with_filter_for(self.session, height, Some(header), |b| {
                    out.extend_from_slice(b)
                }),
                None => FilterLookup::Missing,
            });
            match asked {
                FilterLookup::Ready(()) => return true,
                FilterLookup::Missing => return false,
                FilterLookup::Pending => {}
            }
            if *stop.borrow() {
                return false;
            }
            let arrived = self.runtime.block_on(async {
                tokio::select! {
                    changed = tokio::time::timeout(self.patience, filters.changed()) => {
                        matches!(changed, Ok(Ok(())))
                    }
                    _ = stop.changed() => false,
                }
            });
            if !arrived {
                return false;
            }
        }
    }
}

/// Keep `out` exported from `shared`'s chain until `stop` (see the module's
/// documentation). Returns when stopped.
pub async fn keep(
    shared: Arc<Shared>,
    out: PathBuf,
    confirmations: u32,
    mut stop: watch::Receiver<bool>,
) {
    let mut tips = shared.tip_version.subscribe();
    // The manifest this process last wrote or checked: its files are not hashed again.
    let mut checked: Option<String> = None;
    let mut shown = ExportMetrics::default();
    shared.metrics.set_export(shown);
    loop {
        tips.borrow_and_update();
        let run = {
            let (shared, out, stop) = (shared.clone(), out.clone(), stop.clone());
            let (checked, runtime) = (checked.clone(), Handle::current());
            tokio::task::spawn_blocking(move || {
                let src = Following::new(&shared, runtime, stop, PATIENCE);
                export::export_after(&src, &out, confirmations, checked.as_deref())
            })
        };
        match run.await {
            Ok(Ok(done)) => {
                log_run(&done);
                (shown.headers_to, shown.filters_to) = (done.headers_to, done.filters_to);
                checked = Some(done.manifest);
            }
            Ok(Err(e)) => {
                tracing::warn!("export to {} stopped: {e}", out.display());
                shown.failures += 1;
                // A chain or a node not ready changed nothing listed (no manifest is
                // written by a failed run): the files stay checked, or a node whose filter
                // index builds for hours would have every file hashed again at each block.
                // Anything else may be the directory: check it all again.
                let untouched = matches!(
                    e,
                    ExportError::FilterUnavailable { .. }
                        | ExportError::ChainMoved { .. }
                        | ExportError::ChainBehind { .. }
                );
                if !untouched {
                    checked = None;
                }
            }
            Err(e) => {
                tracing::error!("the export task failed: {e}");
                shown.failures += 1;
                checked = None;
            }
        }
        shared.metrics.set_export(shown);
        tokio::select! {
            _ = tokio::time::sleep(SETTLE) => {}
            _ = stop.changed() => return,
        }
        tokio::select! {
            _ = tips.changed() => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
    }
}

fn log_run(done: &Exported) {
    if done.new_files > 0 {
        tracing::info!(
            new_files = done.new_files,
            headers_to = done.headers_to,
            filters_to = done.filters_to,
            "{done}"
        );
    } else {
        tracing::debug!("{done}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lightwire_chain::REGTEST;
    use lightwire_filter::{FilterHeader, filter_hash};
    use lightwire_noise::SecretKey;
    use std::time::Instant;

    /// A gateway's shared state for a genesis-only regtest chain whose genesis filter
    /// hash is `filter`'s and whose filters come from a node (none has come).
    fn waiting_for(filter: &[u8]) -> Arc<Shared> {
        let (chain, _) = ServedChain::genesis_only(&REGTEST);
        let shared = Shared::builder(chain, SecretKey::from_bytes(&[7; 32]).unwrap()).build();
        let mut c = shared.chain.write().unwrap();
        c.serve_upstream_filters(1 << 20, shared.filter_notify.clone());
        let filters = c.filters_mut().unwrap();
        filters
            .extend(0, FilterHeader::ZERO, &[filter_hash(filter)])
            .unwrap();
        drop(c);
        shared
    }

    fn genesis_header() -> [u8; HEADER_LEN] {
        REGTEST.genesis.encode()
    }

    /// A node that never sends the filter costs a run `PATIENCE`, not a hang; a stop
    /// ends the wait at once; a filter that arrives while it waits is taken.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_filter_the_node_withholds_ends_the_wait_and_one_it_sends_is_taken() {
        let filter = vec![1u8, 2, 3];
        let shared = waiting_for(&filter);
        let (stop_tx, stop) = watch::channel(false);

        let (s, st) = (shared.clone(), stop.clone());
        let runtime = Handle::current();
        let started = Instant::now();
        let got = tokio::task::spawn_blocking(move || {
            let src = Following::new(&s, runtime, st, Duration::from_millis(300));
            let mut out = Vec::new();
            src.filter(0, genesis_header(), &mut out)
        })
        .await
        .unwrap();
        assert!(!got, "withheld");
        assert!(started.elapsed() >= Duration::from_millis(300));

        // Stopped while it waits: it returns without the patience running out.
        let (s, st) = (shared.clone(), stop.clone());
        let runtime = Handle::current();
        let started = Instant::now();
        let waiting = tokio::task::spawn_blocking(move || {
            let src = Following::new(&s, runtime, st, Duration::from_secs(600));
            src.filter(0, genesis_header(), &mut Vec::new())
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop_tx.send(true).unwrap();
        assert!(!waiting.await.unwrap());
        assert!(started.elapsed() < Duration::from_secs(60));

        // The node sends it while the export waits: taken. (A stop sender dropped is a
        // stop too: the gateway is gone.)
        let (_keep, stop) = watch::channel(false);
        let s = shared.clone();
        let runtime = Handle::current();
        let waiting = tokio::task::spawn_blocking(move || {
            let src = Following::new(&s, runtime, stop, Duration::from_secs(600));
            let mut out = Vec::new();
            src.filter(0, genesis_header(), &mut out).then_some(out)
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        {
            let c = shared.chain.read().unwrap();
            assert!(c.filters().unwrap().insert(0, &filter));
        }
        shared.filter_version.send_modify(|v| *v += 1);
        assert_eq!(waiting.await.unwrap(), Some(filter));
    }
}
