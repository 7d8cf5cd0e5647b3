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

use crate::export::{self, ExportSource, Exported};
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
    /// `patience` for each filter, and not at all once `stop` is true.
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
                checked = Some(done.manifest);
            }
            Ok(Err(e)) => {
                tracing::warn!("export to {} stopped: {e}", out.display());
                // Check everything again next time: the directory may have changed.
                checked = None;
            }
            Err(e) => {
                tracing::error!("the export task failed: {e}");
                checked = None;
            }
        }
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
