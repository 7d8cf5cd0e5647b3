//! The one loop that runs the engine, for every shell: the browser's (over IndexedDB,
//! WebSockets and the page's timers) and the native tests' (over a memory store, in-memory
//! gateways and a virtual clock) run this same function, so the ordering that ships is the
//! ordering that is tested. Like LDK's `process_events_async`, it is generic over its
//! edges: a [`Host`] brings inputs and carries outputs, a [`HeaderStore`] stores.
//!
//! Each round: the host sends what is due and passes events on ([`Host::pump`]); calls
//! that waited for the store are answered; the store's reads the engine waits for are
//! done (ancestors, filter data), its states saved (a wallet saved goes round again, so
//! that the host answers what waited for it); then a commit, if one is due, runs
//! while the host keeps feeding input (the engine validates the next batch meanwhile, and
//! calls that need the store wait for the commit); else the loop waits for one input.
//! What is in flight stays bounded: one commit, and the next one's gathering (the engine
//! asks for no more headers while a whole commit waits).

use core::pin::pin;

use futures_util::future::{Either, select};
use lightwire_proto::Millis;
use lightwire_store::{HeaderStore, StoreError};

use crate::engine::Engine;
use crate::pipeline::{Committed, Pipeline};

/// A shell's edges: where inputs come from and where outputs go.
#[allow(async_fn_in_trait)] // Single-threaded shells; no Send bound is wanted.
pub trait Host {
    /// Its store.
    type Store: HeaderStore;
    /// An input: a gateway's bytes, a close, a timer, an application's call.
    type Input;
    /// An application's call that needs the store.
    type Call;

    /// The engine it feeds.
    fn engine(&mut self) -> &mut Engine;

    /// The time now (Unix time: validation checks header times against it).
    fn now(&self) -> Millis;

    /// After every input: send what is due, carry out the engine's actions, pass its events
    /// on, arm the timer.
    fn pump(&mut self);

    /// The next input; `None` when the host has nothing more (a test's gateways are idle:
    /// the loop returns).
    async fn next(&mut self) -> Option<Self::Input>;

    /// Hand `input` to the engine; a call that needs the store comes back (while a commit
    /// is in flight it waits for the commit).
    fn handle(&mut self, input: Self::Input) -> Option<Self::Call>;

    /// Answer `call` from the store.
    async fn serve(&mut self, store: &mut Self::Store, call: Self::Call);

    /// The loop ended (stopped, or the store failed) before `call` was answered.
    fn unanswered(&mut self, call: Self::Call);

    /// A commit completed (the engine already knows).
    fn committed(&mut self, store: &Self::Store, commit: Committed);

    /// A commit started (`true`) or ended (`false`): what the host waits for meanwhile
    /// is input or the commit, which a host timing its waits tells apart.
    fn committing(&mut self, _on: bool) {}
}

/// Why [`run`] returned.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Ended {
    /// The engine was stopped.
    Stopped,
    /// The host had no more input (tests).
    Idle,
}

/// Run `host`'s engine over `store` between the host's inputs and outputs until it is
/// stopped, the host runs dry, or the store fails (what the store holds is then the last
/// whole commit; open it again to resume).
pub async fn run<H: Host>(
    host: &mut H,
    store: &mut H::Store,
    pipeline: &mut Pipeline,
) -> Result<Ended, StoreError> {
    let mut waiting: Vec<H::Call> = Vec::new();
    let ended = rounds(host, store, pipeline, &mut waiting).await;
    for call in waiting {
        host.unanswered(call);
    }
    ended
}

/// The loop itself; calls left in `waiting` when it ends are the caller's to settle.
async fn rounds<H: Host>(
    host: &mut H,
    store: &mut H::Store,
    pipeline: &mut Pipeline,
    waiting: &mut Vec<H::Call>,
) -> Result<Ended, StoreError> {
    loop {
        host.pump();
        for call in waiting.drain(..) {
            host.serve(store, call).await;
        }
        if host.engine().is_stopped() {
            return Ok(Ended::Stopped);
        }
        let now = host.now();
        if pipeline.read_ancestors(host.engine(), store, now).await? {
            continue;
        }
        if pipeline.read_filter_data(host.engine(), store).await? {
            continue;
        }
        if pipeline.save_scan(host.engine(), store).await? {
            // The host answers what waited for the wallet to be saved.
            continue;
        }
        if let Some(c) = commit(host, store, pipeline, waiting).await? {
            pipeline.after_commit(host.engine(), store).await?;
            host.committed(store, c);
            continue;
        }
        let Some(input) = host.next().await else {
            return Ok(Ended::Idle);
        };
        if let Some(call) = host.handle(input) {
            host.serve(store, call).await;
        }
    }
}

/// The commit due, if any, with input handled while it is in flight; calls that need the
/// store wait in `waiting`. A failed commit stops the engine.
async fn commit<H: Host>(
    host: &mut H,
    store: &mut H::Store,
    pipeline: &mut Pipeline,
    waiting: &mut Vec<H::Call>,
) -> Result<Option<Committed>, StoreError> {
    let Some(batch) = pipeline.take_commit(host.engine()) else {
        return Ok(None);
    };
    host.committing(true);
    let result = {
        let mut commit = pin!(store.commit(batch));
        loop {
            let input = {
                let next = pin!(host.next());
                match select(commit.as_mut(), next).await {
                    Either::Left((result, _)) => break result,
                    Either::Right((input, _)) => input,
                }
            };
            let Some(input) = input else {
                // Nothing else will come: the commit alone.
                break commit.as_mut().await;
            };
            if let Some(call) = host.handle(input) {
                waiting.push(call);
            }
            host.pump();
        }
    };
    host.committing(false);
    let now = host.now();
    pipeline.finish(host.engine(), result, now).map(Some)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use lightwire_proto::testing::TestChain;

    use crate::sync::FOLLOW_ROOM;
    use crate::testnet::{FailingStore, Net, memory};

    #[test]
    fn a_commit_in_flight_takes_input_and_what_is_gathered_stays_bounded() {
        // A store whose commits take a while (each waits 20 times, as IndexedDB's do):
        // the driver goes on taking the gateway's answers and validating meanwhile.
        let mut store = FailingStore::new(memory(), usize::MAX);
        store.yields = 20;
        let (request, every) = (500, 1_000);
        let mut net = Net::new(store, vec![TestChain::generate(6_000)], |e| {
            e.syncer_mut().request_size = request;
            e.syncer_mut().commit_every = every;
        });
        net.drive();
        assert_eq!(net.stored().height, 6_000);
        assert!(net.host.engine.is_synced());
        assert!(
            net.host.during_commits > 0,
            "no input was taken while a commit was in flight"
        );
        // While a whole commit waits behind the one in flight nothing more is asked: what
        // is gathered is at most a commit's worth and the answer already on its way.
        let most = net.host.most_uncommitted;
        assert!(
            most <= every + request as usize,
            "{most} headers gathered while committing"
        );
        // Every commit went through the one store, in order, and nothing was lost.
        assert!(net.store.commits >= 6, "{} commits", net.store.commits);
    }

    #[test]
    fn a_client_caught_up_keeps_no_bulk_sync_room() {
        // A bulk sync's two buffers (the one gathering, the one committed) each take room
        // for a whole commit; a client then following the tip commits a block at a time
        // and must not hold that room for hours (about 20 MB at the default sizes).
        let (request, every) = (2_500, 3_000);
        let mut net = Net::new(memory(), vec![TestChain::generate(9_000)], |e| {
            e.syncer_mut().request_size = request;
            e.syncer_mut().commit_every = every;
        });
        net.drive();
        assert_eq!(net.stored().height, 9_000);
        assert!(net.host.engine.is_synced());
        let (gathering, committing) = (
            net.host.engine.syncer().gathering_room(),
            net.pipeline.commit_room(),
        );
        assert!(
            gathering <= FOLLOW_ROOM && committing <= FOLLOW_ROOM,
            "caught up with room for {gathering} and {committing} entries"
        );
    }
}
