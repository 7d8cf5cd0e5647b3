//! For this crate's tests: the engine in front of several in-memory gateways (the proto
//! crate's responders serving test chains) and a store, all on a virtual clock, driven the
//! way the wasm shell drives them: actions carried out, bytes moved, requests scheduled,
//! the store's work done through the [`Pipeline`], events collected.

use core::future::Future;
use core::pin::pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use lightwire_primitives::FilterHeader;
use std::collections::VecDeque;

use lightwire_chain::{BlockHash, Entry, Header, REGTEST, Work};
use lightwire_noise::SecretKey;
use lightwire_proto::pair::Gateway;
use lightwire_proto::testing::TestChain;
use lightwire_proto::{BufferMode, ConnectString, Millis};
use lightwire_store::{Batch, HeaderStore, MemoryStore, RecordKey, StoreError, Tip};

use crate::driver::{self, Host};
use crate::engine::mirror::{FileEntry, Manifest};
use crate::engine::{Action, Engine, Event, FetchError};
use crate::ids::GatewayId;
use crate::pipeline::{self, Committed, Pipeline};

/// Unix time of the tests (after every generated header, before their two-hour limit).
pub const NOW: Millis = Millis(2_000_000_000_000);

/// Run a future whose waits end by themselves (a memory store's, or a test store's that
/// yields a few times to let input in): polled again until it is ready.
pub fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..1_000_000 {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
    panic!("a test future that never ends")
}

/// Test keys: the client's 0x01, ephemeral 0x02, gateway `g`'s 0x40 + g.
pub fn key(b: u8) -> SecretKey {
    SecretKey::from_bytes(&[b; 32]).expect("a valid test key")
}

/// A `MemoryStore` whose commits fail from the `fail_at`-th on (counting from 1).
pub struct FailingStore {
    /// The store underneath.
    pub inner: MemoryStore,
    /// Commits made (failed ones included).
    pub commits: usize,
    /// Which commit fails first.
    pub fail_at: usize,
    /// The tip after the last commit that succeeded.
    pub last_ok: Option<Tip>,
    /// Index lookups made (one per hash, as a batch lookup costs a shard read per hash
    /// in the worst case).
    pub lookups: core::cell::Cell<usize>,
    /// How many times each commit waits before it runs (as IndexedDB's takes a while, and
    /// the driver takes input meanwhile).
    pub yields: u32,
    /// The records saved (scan and wallet states), in order, one refused included.
    pub records: Vec<RecordKey>,
    /// From which saved record on (counted from 1) saving fails, as with the quota reached.
    pub refuse_records_from: usize,
}

impl FailingStore {
    /// A store over `inner` whose commit number `fail_at` fails (`usize::MAX`: none).
    pub fn new(inner: MemoryStore, fail_at: usize) -> FailingStore {
        FailingStore {
            inner,
            commits: 0,
            fail_at,
            last_ok: None,
            lookups: core::cell::Cell::new(0),
            yields: 0,
            records: Vec::new(),
            refuse_records_from: usize::MAX,
        }
    }
}

impl HeaderStore for FailingStore {
    fn params(&self) -> &'static lightwire_chain::Params {
        self.inner.params()
    }
    async fn tip(&self) -> Result<Tip, StoreError> {
        self.inner.tip().await
    }
    async fn commit(&mut self, batch: Batch<'_>) -> Result<Tip, StoreError> {
        Yield(self.yields).await;
        self.commits += 1;
        if self.commits >= self.fail_at {
            return Err(StoreError::QuotaExceeded);
        }
        let tip = self.inner.commit(batch).await?;
        self.last_ok = Some(tip);
        Ok(tip)
    }
    async fn header(&self, height: u32) -> Result<Option<Header>, StoreError> {
        self.inner.header(height).await
    }
    async fn record(&self, key: RecordKey) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.record(key).await
    }
    async fn put_record(
        &mut self,
        key: RecordKey,
        record: Option<&[u8]>,
    ) -> Result<(), StoreError> {
        self.records.push(key);
        if self.records.len() >= self.refuse_records_from {
            return Err(StoreError::QuotaExceeded);
        }
        self.inner.put_record(key, record).await
    }
    async fn filter_tip(&self) -> Result<Option<lightwire_store::FilterTip>, StoreError> {
        self.inner.filter_tip().await
    }
    async fn filter_headers(
        &self,
        from: u32,
        to: u32,
        out: &mut Vec<FilterHeader>,
    ) -> Result<(), StoreError> {
        self.inner.filter_headers(from, to, out).await
    }
    async fn headers(&self, from: u32, to: u32, out: &mut Vec<Header>) -> Result<(), StoreError> {
        self.inner.headers(from, to, out).await
    }
    async fn height_of(&self, hash: &BlockHash) -> Result<Option<u32>, StoreError> {
        self.lookups.set(self.lookups.get() + 1);
        self.inner.height_of(hash).await
    }
    async fn chainwork_at_period_start(&self, height: u32) -> Result<Work, StoreError> {
        self.inner.chainwork_at_period_start(height).await
    }
    async fn entries(&self, from: u32, to: u32) -> Result<Vec<Entry>, StoreError> {
        self.inner.entries(from, to).await
    }
}

/// The test's edges: in-memory gateways on a virtual clock, and the events collected.
pub struct TestHost<S> {
    /// The engine.
    pub engine: Engine,
    /// The virtual clock.
    pub now: Millis,
    /// Gateway `g`'s end, while connected.
    pub gateways: Vec<Option<Gateway>>,
    /// What each gateway serves (moved into its end while connected).
    chains: Vec<Option<TestChain>>,
    /// Every event, in order.
    pub events: Vec<Event>,
    /// The last commit that completed, as the shell reports it.
    pub committed: Option<Committed>,
    /// Inputs taken while a commit was in flight.
    pub during_commits: usize,
    /// The most headers validated and not yet committed, seen at an input.
    pub most_uncommitted: usize,
    /// Whether the wallet was settled (synced and saved) at a pump: when a shell answers
    /// `watch`.
    pub settled_seen: bool,
    /// The mirrors, as the engine lists them.
    pub mirrors: Vec<TestMirror>,
    /// Fetches that stall: started, never ending (while the engine waits).
    pub stalled: Vec<u32>,
    /// When set (with [`Engine::offload_silent`]), the receiver's filter checks are run
    /// here, as the tab's workers run them, and answered as later inputs.
    pub scan_helper: Option<(
        lightwire_wallet::silent_block::BlockScanner,
        lightwire_wallet::silent::Receiver,
    )>,
    /// Messages from the gateways, not yet handed to the engine.
    queue: VecDeque<TestInput>,
    /// Per gateway: from which of its WebSocket messages on each connection (0: act two)
    /// the last byte is flipped on the way, as a miscomputing engine or a tampering
    /// gateway makes a MAC fail (see [`Net::corrupt`]).
    corrupt_from: Vec<Option<usize>>,
    /// Per gateway: its WebSocket messages delivered on the current connection.
    delivered: Vec<usize>,
    /// Per gateway: its messages held back (a slow network), while `Some` (see
    /// [`Net::hold`]).
    held: Vec<Option<Vec<Vec<u8>>>>,
    _store: core::marker::PhantomData<fn() -> S>,
}

/// An input of the tests' host.
pub enum TestInput {
    /// A WebSocket message from a gateway.
    Message(GatewayId, Vec<u8>),
    /// A gateway hung up.
    Closed(GatewayId),
    /// A mirror's manifest, as the shell parsed it.
    Manifest(u32, Result<Manifest, FetchError>),
    /// A piece of a fetch's body.
    MirrorData(u32, Vec<u8>),
    /// A fetch's body ended (or the fetch failed).
    MirrorEnd(u32, Result<(), FetchError>),
    /// A silent-payment filter check's answer, as the tab's workers give it.
    Scanned(u32, u32, crate::silent_scan::Scanned),
}

/// How a test mirror serves its files.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Serve {
    /// As they are.
    Honest,
    /// Every file answers this HTTP status.
    Status(u16),
    /// Each file's body ends after this many bytes (the fetch "succeeds").
    Truncate(usize),
    /// Each file's byte at this offset is flipped.
    Flip(usize),
    /// Each file's body stops after this many bytes and never ends.
    Stall(usize),
    /// Each file's body goes on after its own bytes with this many more, in a piece of
    /// their own (so that the engine has ended the file before they come).
    Append(usize),
}

/// A mirror of bulk files in memory (docs/PROTOCOL.md, "Bulk files").
#[derive(Clone, Debug)]
pub struct TestMirror {
    /// Its manifest (or what fetching it gives).
    pub manifest: Result<Manifest, FetchError>,
    /// Its files, by name.
    pub files: Vec<(String, Vec<u8>)>,
    /// How it serves them.
    pub serve: Serve,
    /// Bytes of a body per piece handed to the engine.
    pub chunk: usize,
    /// Whether its filters files' entries list their parts (as exports write them now:
    /// true), made by [`Self::with_filters`].
    pub parts: bool,
}

/// A file of `kind` (its name's prefix) holding `first..=last`: its manifest entry, named
/// by its range and SHA-256 as the export names it, and its name and bytes to serve.
fn named(kind: &str, (first, last): (u32, u32), bytes: Vec<u8>) -> (FileEntry, (String, Vec<u8>)) {
    let check = lightwire_proto::bulk::file_check(&bytes);
    let name = format!("{kind}-{first}-{last}-{}.bin", hex::encode(check.sha256));
    let entry = FileEntry {
        first,
        last,
        check,
        name: name.clone(),
        parts: Vec::new(),
    };
    (entry, (name, bytes))
}

impl TestMirror {
    /// The headers of `chain` from 0 to `last`, in files of `per_file` headers (the last
    /// file whole: `last + 1` a multiple of `per_file`).
    pub fn of(chain: &TestChain, last: u32, per_file: u32) -> TestMirror {
        TestMirror::of_headers(chain.headers(), last, per_file)
    }

    /// [`Self::of`] over these headers (genesis first), as they are (a forger's too).
    pub fn of_headers(chain: &[Header], last: u32, per_file: u32) -> TestMirror {
        let mut files = Vec::new();
        let mut headers = Vec::new();
        let mut first = 0;
        while first + per_file <= last + 1 {
            let end = first + per_file - 1;
            let mut bytes = Vec::new();
            lightwire_proto::bulk::write_headers(&mut bytes, first, per_file as usize, |i| {
                chain[(first + i as u32) as usize].encode()
            });
            let (entry, file) = named("headers", (first, end), bytes);
            headers.push(entry);
            files.push(file);
            first = end + 1;
        }
        let top = first.saturating_sub(1);
        TestMirror {
            manifest: Ok(Manifest {
                genesis: chain[0].block_hash(),
                height: top,
                hash: chain[top as usize].block_hash(),
                headers,
                filter_headers: Vec::new(),
                filters: Vec::new(),
            }),
            files,
            serve: Serve::Honest,
            chunk: 16 * 1024,
            parts: true,
        }
    }

    /// With `chain`'s filter headers too, in files from checkpoint to checkpoint up to
    /// `last` (a multiple of 1,000); `rewrite(height, header, hash)` may change what a
    /// file says (a lying mirror), the chain linked from what it gives.
    pub fn with_filter_headers(
        mut self,
        chain: &TestChain,
        last: u32,
        rewrite: impl Fn(u32, &mut [u8; 32]),
    ) -> TestMirror {
        let mut first = 0;
        let mut before = [0u8; 32];
        while first < last {
            let end = (first / 1_000 + 1) * 1_000;
            let anchor = before;
            let entries: Vec<([u8; 32], [u8; 32])> = (first..=end)
                .map(|h| {
                    let e = lightwire_proto::Served::filter_entry(chain, h).expect("a filter");
                    let mut hash = e.hash.0;
                    rewrite(h, &mut hash);
                    // Linked from what the file itself says (BIP157).
                    let mut both = [0u8; 64];
                    both[..32].copy_from_slice(&hash);
                    both[32..].copy_from_slice(&before);
                    before = lightwire_primitives::sha256d(&both);
                    (before, hash)
                })
                .collect();
            let mut bytes = Vec::new();
            lightwire_proto::bulk::write_filter_headers(&mut bytes, first, anchor, &entries);
            let (entry, file) = named("filter-headers", (first, end), bytes);
            self.files.push(file);
            if let Ok(m) = self.manifest.as_mut() {
                m.filter_headers.push(entry);
            }
            first = end + 1;
        }
        self
    }

    /// With `chain`'s filters too, in files ending on multiples of `per_file` (a multiple
    /// of 1,000, as the export's small and large files) up to `last`; `rewrite(height,
    /// filter)` may change what a file says (a lying mirror).
    pub fn with_filters(
        mut self,
        chain: &TestChain,
        (last, per_file): (u32, u32),
        rewrite: impl Fn(u32, &mut Vec<u8>),
    ) -> TestMirror {
        let mut first = 0;
        while first < last {
            let end = ((first / per_file + 1) * per_file).min(last);
            let mut bytes = Vec::new();
            // A part at every 1,000 blocks inside the file, as the export writes them.
            let starts: Vec<u32> = (first / 1_000 + 1..=end / 1_000)
                .map(|k| k * 1_000 + 1)
                .filter(|&h| h > first && h <= end)
                .collect();
            let written = lightwire_proto::bulk::write_filters(
                &mut bytes,
                (first, end),
                &starts,
                |h, out| {
                    out.extend_from_slice(chain.filter(h));
                    rewrite(h, out);
                    Ok::<(), ()>(())
                },
            )
            .expect("written");
            let (mut entry, file) = named("filters", (first, end), bytes);
            if self.parts {
                entry.parts = written.starts;
            }
            self.files.push(file);
            if let Ok(m) = self.manifest.as_mut() {
                m.filters.push(entry);
            }
            first = end + 1;
        }
        self
    }

    /// The inputs fetching `name` from byte `from` on (an HTTP `Range`) as fetch `fetch`
    /// gives, and whether it stalls.
    fn fetched(
        &self,
        name: &str,
        (fetch, from): (u32, Option<u64>),
        out: &mut VecDeque<TestInput>,
    ) -> bool {
        let Some((_, bytes)) = self.files.iter().find(|(n, _)| n == name) else {
            out.push_back(TestInput::MirrorEnd(fetch, Err(FetchError::Status(404))));
            return false;
        };
        let from = usize::try_from(from.unwrap_or(0)).unwrap_or(usize::MAX);
        let mut bytes = bytes.get(from..).unwrap_or_default().to_vec();
        let mut stall = false;
        match self.serve {
            Serve::Honest | Serve::Append(_) => {}
            Serve::Status(code) => {
                out.push_back(TestInput::MirrorEnd(fetch, Err(FetchError::Status(code))));
                return false;
            }
            Serve::Truncate(n) => bytes.truncate(n),
            Serve::Flip(at) => {
                if let Some(b) = bytes.get_mut(at) {
                    *b ^= 1;
                }
            }
            Serve::Stall(n) => {
                bytes.truncate(n);
                stall = true;
            }
        }
        for piece in bytes.chunks(self.chunk.max(1)) {
            out.push_back(TestInput::MirrorData(fetch, piece.to_vec()));
        }
        if let Serve::Append(n) = self.serve {
            out.push_back(TestInput::MirrorData(fetch, vec![0; n]));
        }
        if !stall {
            out.push_back(TestInput::MirrorEnd(fetch, Ok(())));
        }
        stall
    }
}

impl<S> TestHost<S> {
    fn disconnect(&mut self, g: GatewayId) {
        if let Some(gw) = self.gateways[g.index()].take() {
            self.chains[g.index()] = Some(gw.chain);
        }
    }
}

impl<S: HeaderStore> Host for TestHost<S> {
    type Store = S;
    type Input = TestInput;
    type Call = core::convert::Infallible;

    fn engine(&mut self) -> &mut Engine {
        &mut self.engine
    }

    fn now(&self) -> Millis {
        self.now
    }

    fn pump(&mut self) {
        let h = self;
        let engine = &mut h.engine;
        engine.schedule();
        if let Some((scanner, receiver)) = h.scan_helper.as_mut() {
            while let Some(j) = engine.next_silent_job() {
                let r =
                    crate::silent_scan::scan_filter(scanner, receiver, j.list, j.filter, &j.hash);
                h.queue.push_back(TestInput::Scanned(j.tag, j.height, r));
            }
        }
        while let Some(action) = engine.poll_action() {
            match action {
                Action::Connect { gateway: g } => {
                    engine.connecting(g, h.now);
                    let chain = h.chains[g.index()].take().expect("not connected");
                    let end = Gateway::new(
                        h.now,
                        key(0x40 + g.index() as u8),
                        chain,
                        BufferMode::Pooled,
                        2,
                    );
                    h.gateways[g.index()] = Some(end);
                    h.delivered[g.index()] = 0;
                    engine.opened(g, key(2), h.now);
                }
                Action::Close { gateway: g } => {
                    if let Some(gw) = h.gateways[g.index()].take() {
                        h.chains[g.index()] = Some(gw.chain);
                    }
                }
                Action::FetchManifest { mirror } => {
                    let manifest = h.mirrors[mirror as usize].manifest.clone();
                    h.queue.push_back(TestInput::Manifest(mirror, manifest));
                }
                Action::Fetch { mirror, fetch } => {
                    let url = engine.mirror_url(mirror, Some(fetch)).expect("a url");
                    let name = url.rsplit('/').next().unwrap_or_default();
                    let from = engine.mirror_range(fetch);
                    if h.mirrors[mirror as usize].fetched(name, (fetch, from), &mut h.queue) {
                        h.stalled.push(fetch);
                    }
                }
                Action::CancelFetch { fetch } => {
                    h.queue.retain(|i| match i {
                        TestInput::MirrorData(f, _) | TestInput::MirrorEnd(f, _) => *f != fetch,
                        _ => true,
                    });
                }
            }
        }
        for g in (0..h.gateways.len()).map(GatewayId) {
            if let (Some(gw), Some(out)) = (h.gateways[g.index()].as_mut(), engine.poll_transmit(g))
            {
                gw.send(out);
                engine.sent(g);
            }
        }
        h.events.extend(core::iter::from_fn(|| engine.poll_event()));
        h.settled_seen |= engine.wallet_settled();
    }

    async fn next(&mut self) -> Option<TestInput> {
        let h = self;
        while h.queue.is_empty() {
            let mut moved = false;
            for g in (0..h.gateways.len()).map(GatewayId) {
                let Some(gw) = h.gateways[g.index()].as_mut() else {
                    continue;
                };
                let queue = &mut h.queue;
                let corrupt_from = h.corrupt_from[g.index()];
                let delivered = &mut h.delivered[g.index()];
                let held = &mut h.held[g.index()];
                moved |= gw.exchange(h.now, |m| {
                    let mut m = m.to_vec();
                    if corrupt_from.is_some_and(|from| *delivered >= from) {
                        if let Some(last) = m.last_mut() {
                            *last ^= 0x01;
                        }
                    }
                    *delivered += 1;
                    match held {
                        Some(held) => held.push(m),
                        None => queue.push_back(TestInput::Message(g, m)),
                    }
                });
                if gw.close().is_some() {
                    // The gateway hung up: the socket closes.
                    h.disconnect(g);
                    h.queue.push_back(TestInput::Closed(g));
                }
            }
            if !moved && h.queue.is_empty() {
                return None;
            }
        }
        h.queue.pop_front()
    }

    fn handle(&mut self, input: TestInput) -> Option<Self::Call> {
        let now = self.now;
        let engine = &mut self.engine;
        if engine.is_committing() {
            self.during_commits += 1;
        }
        let uncommitted = engine.syncer().uncommitted();
        self.most_uncommitted = self.most_uncommitted.max(uncommitted);

        match input {
            TestInput::Message(g, bytes) => engine.receive(g, &bytes, now),
            TestInput::Closed(g) => engine.closed(g, crate::reason::TransportError::Closed, now),
            TestInput::Manifest(m, manifest) => engine.on_manifest(m, manifest, now),
            TestInput::MirrorData(f, bytes) => engine.mirror_data(f, &bytes, now),
            TestInput::MirrorEnd(f, result) => engine.mirror_end(f, result, now),
            TestInput::Scanned(tag, height, r) => engine.silent_scanned(tag, height, r),
        }
        None
    }

    async fn serve(&mut self, _: &mut S, call: Self::Call) {
        match call {}
    }

    fn unanswered(&mut self, call: Self::Call) {
        match call {}
    }

    fn committed(&mut self, _: &S, commit: Committed) {
        self.committed = Some(commit);
    }
}

/// A future pending `n` times (waking itself each time) before it is ready.
struct Yield(u32);

impl Future for Yield {
    type Output = ();
    fn poll(mut self: core::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 == 0 {
            return Poll::Ready(());
        }
        self.0 -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// The engine, its gateways and its store, run by the shipped driver.
pub struct Net<S: HeaderStore> {
    /// The store.
    pub store: S,
    /// The store failure that stopped the sync, if any.
    pub store_error: Option<StoreError>,
    /// The host: the engine, the gateways, the events, the last commit.
    pub host: TestHost<S>,
    /// The driver's commit side.
    pub pipeline: Pipeline,
}

impl<S: HeaderStore> Net<S> {
    /// An engine opened on `store`, with one gateway per chain (connected by the first
    /// [`Self::drive`]); `tune` sets the syncer's sizes.
    pub fn new(store: S, chains: Vec<TestChain>, tune: impl FnOnce(&mut Engine)) -> Net<S> {
        Net::seeded(store, chains, 7, tune)
    }

    /// [`Self::new`], with the engine's random numbers from `seed`.
    pub fn seeded(
        store: S,
        chains: Vec<TestChain>,
        seed: u64,
        tune: impl FnOnce(&mut Engine),
    ) -> Net<S> {
        let list = (0..chains.len())
            .map(|g| ConnectString {
                url: format!("ws://127.0.0.1:{}", 9000 + g),
                node_id: key(0x40 + g as u8).public_key(),
            })
            .collect();
        let (mut engine, stored) =
            block_on(pipeline::open(&store, list, key(1), seed, NOW)).expect("the store opens");
        let tip_time = block_on(store.header(stored.height))
            .expect("the store reads")
            .map_or(0, |h| h.time);
        tune(&mut engine);
        let gateways = chains.len();
        let host = TestHost {
            engine,
            now: NOW,
            gateways: chains.iter().map(|_| None).collect(),
            chains: chains.into_iter().map(Some).collect(),
            events: Vec::new(),
            committed: None,
            during_commits: 0,
            settled_seen: false,
            most_uncommitted: 0,
            mirrors: Vec::new(),
            stalled: Vec::new(),
            scan_helper: None,
            queue: VecDeque::new(),
            corrupt_from: vec![None; gateways],
            held: vec![None; gateways],
            delivered: vec![0; gateways],
            _store: core::marker::PhantomData,
        };
        Net {
            store,
            store_error: None,
            host,
            pipeline: Pipeline::resumed(tip_time),
        }
    }

    /// From now on, the last byte of gateway `g`'s WebSocket messages is flipped on the
    /// way, from its message `from` on each connection: 0 fails act two's MAC (a failed
    /// handshake), 1 the MAC of a frame after it.
    pub fn corrupt(&mut self, g: GatewayId, from: usize) {
        self.host.corrupt_from[g.index()] = Some(from);
    }

    /// From now on, gateway `g`'s messages are held back on the way (a slow network)
    /// until [`Self::release`].
    pub fn hold(&mut self, g: GatewayId) {
        self.host.held[g.index()].get_or_insert_with(Vec::new);
    }

    /// Gateway `g`'s messages held back so far arrive, in order; those it sends from now
    /// on are held still.
    pub fn deliver_held(&mut self, g: GatewayId) {
        let held = self.host.held[g.index()]
            .replace(Vec::new())
            .unwrap_or_default();
        for m in held.into_iter().rev() {
            self.host.queue.push_front(TestInput::Message(g, m));
        }
        self.drive();
    }

    /// Gateway `g`'s messages held back arrive, in order, and pass from now on.
    pub fn release(&mut self, g: GatewayId) {
        let held = self.host.held[g.index()].take().unwrap_or_default();
        for m in held.into_iter().rev() {
            self.host.queue.push_front(TestInput::Message(g, m));
        }
        self.drive();
    }

    /// Gateway `g`'s messages pass unchanged again (see [`Self::corrupt`]).
    pub fn mend(&mut self, g: GatewayId) {
        self.host.corrupt_from[g.index()] = None;
    }

    /// Add these mirrors (their manifests are fetched at the next drive).
    pub fn mirrors(&mut self, mirrors: Vec<TestMirror>) {
        let urls = (0..mirrors.len())
            .map(|m| format!("http://127.0.0.{}/bulk", m + 1))
            .collect();
        self.host.mirrors = mirrors;
        self.host.engine.set_mirrors(Some(urls));
    }

    /// Run the driver until nothing moves (or the store fails: then nothing more runs).
    pub fn drive(&mut self) {
        if self.store_error.is_some() {
            return;
        }
        let run = driver::run(&mut self.host, &mut self.store, &mut self.pipeline);
        if let Err(e) = block_on(run) {
            self.store_error = Some(e);
        }
    }

    /// Let `d` pass, running every deadline as it falls due, and drive.
    pub fn advance(&mut self, d: Duration) {
        let end = self.host.now + d;
        loop {
            let next = self
                .host
                .gateways
                .iter()
                .flatten()
                .filter_map(Gateway::poll_timeout)
                .chain(self.host.engine.poll_timeout())
                .filter(|t| *t <= end)
                .min();
            let Some(t) = next else { break };
            let h = &mut self.host;
            h.now = t.max(h.now);
            h.engine.handle_timeout(h.now);
            for gw in h.gateways.iter_mut().flatten() {
                gw.handle_timeout(h.now);
            }
            self.drive();
        }
        self.host.now = end;
        self.drive();
    }

    /// The stored tip.
    pub fn stored(&self) -> Tip {
        block_on(self.store.tip()).expect("the store reads")
    }
}

/// A memory store for regtest.
pub fn memory() -> MemoryStore {
    MemoryStore::new(&REGTEST)
}
