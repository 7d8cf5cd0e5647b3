//! For this crate's tests: the engine in front of several in-memory gateways (the proto
//! crate's responders serving test chains) and a store, all on a virtual clock, driven the
//! way the wasm shell drives them: actions carried out, bytes moved, requests scheduled,
//! the store's work done through the [`Pipeline`], events collected.

use core::future::Future;
use core::pin::pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;

use lightwire_chain::{BlockHash, Entry, Header, REGTEST, Work};
use lightwire_noise::SecretKey;
use lightwire_proto::pair::Gateway;
use lightwire_proto::testing::TestChain;
use lightwire_proto::{BufferMode, ConnectString, Millis};
use lightwire_store::{Batch, HeaderStore, MemoryStore, RecordKey, StoreError, Tip};

use crate::engine::{Action, Engine, Event};
use crate::pipeline::{self, Pipeline};

/// Unix time of the tests (after every generated header, before their two-hour limit).
pub const NOW: Millis = Millis(2_000_000_000_000);

/// Run a future that never waits (a memory store's).
pub fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the test store never waits"),
    }
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
        self.inner.put_record(key, record).await
    }
    async fn filter_tip(&self) -> Result<Option<lightwire_store::FilterTip>, StoreError> {
        self.inner.filter_tip().await
    }
    async fn filter_headers(
        &self,
        from: u32,
        to: u32,
        out: &mut Vec<[u8; 32]>,
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

/// The engine, its gateways and its store.
pub struct Net<S: HeaderStore> {
    /// The virtual clock.
    pub now: Millis,
    /// The engine.
    pub engine: Engine,
    /// Gateway `g`'s end, while connected.
    pub gateways: Vec<Option<Gateway>>,
    /// What each gateway serves (moved into its end while connected).
    chains: Vec<Option<TestChain>>,
    /// The store.
    pub store: S,
    /// Every event, in order.
    pub events: Vec<Event>,
    /// The store failure that stopped the sync, if any.
    pub store_error: Option<StoreError>,
    pipeline: Pipeline,
}

impl<S: HeaderStore> Net<S> {
    /// An engine opened on `store`, with one gateway per chain (connected by the first
    /// [`Self::drive`]); `tune` sets the syncer's sizes.
    pub fn new(store: S, chains: Vec<TestChain>, tune: impl FnOnce(&mut Engine)) -> Net<S> {
        let list = (0..chains.len())
            .map(|g| ConnectString {
                url: format!("ws://127.0.0.1:{}", 9000 + g),
                node_id: key(0x40 + g as u8).public_key(),
            })
            .collect();
        let (mut engine, _) =
            block_on(pipeline::open(&store, list, key(1), 7, NOW)).expect("the store opens");
        tune(&mut engine);
        Net {
            now: NOW,
            engine,
            gateways: chains.iter().map(|_| None).collect(),
            chains: chains.into_iter().map(Some).collect(),
            store,
            events: Vec::new(),
            store_error: None,
            pipeline: Pipeline::default(),
        }
    }

    /// Move everything until nothing moves.
    pub fn drive(&mut self) {
        loop {
            let mut moved = false;
            while let Some(action) = self.engine.poll_action() {
                moved = true;
                match action {
                    Action::Connect { gateway: g } => {
                        self.engine.connecting(g, self.now);
                        let chain = self.chains[g].take().expect("not connected");
                        self.gateways[g] = Some(Gateway::new(
                            self.now,
                            key(0x40 + g as u8),
                            chain,
                            BufferMode::Pooled,
                            2,
                        ));
                        self.engine.opened(g, key(2), self.now);
                    }
                    Action::Close { gateway: g } => self.disconnect(g),
                }
            }
            self.engine.schedule();
            for g in 0..self.gateways.len() {
                let Some(gw) = self.gateways[g].as_mut() else {
                    continue;
                };
                if let Some(out) = self.engine.poll_transmit(g) {
                    gw.send(out);
                    self.engine.sent(g);
                    moved = true;
                }
                let (engine, now) = (&mut self.engine, self.now);
                moved |= gw.exchange(now, |payload| engine.receive(g, payload, now));
                if gw.close().is_some() {
                    // The gateway hung up: the socket closes.
                    self.disconnect(g);
                    self.engine
                        .closed(g, crate::reason::TransportError::Closed, self.now);
                    moved = true;
                }
            }
            if self.store_error.is_none() {
                match block_on(
                    self.pipeline
                        .run(&mut self.engine, &mut self.store, self.now),
                ) {
                    Ok(Some(_)) => moved = true,
                    Ok(None) => moved |= self.pipeline.take_moved(),
                    Err(e) => {
                        self.store_error = Some(e);
                        moved = true;
                    }
                }
            }
            self.events
                .extend(core::iter::from_fn(|| self.engine.poll_event()));
            if !moved {
                return;
            }
        }
    }

    fn disconnect(&mut self, g: usize) {
        if let Some(gw) = self.gateways[g].take() {
            self.chains[g] = Some(gw.chain);
        }
    }

    /// Let `d` pass, running every deadline as it falls due, and drive.
    pub fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        loop {
            let next = self
                .gateways
                .iter()
                .flatten()
                .filter_map(Gateway::poll_timeout)
                .chain(self.engine.poll_timeout())
                .filter(|t| *t <= end)
                .min();
            let Some(t) = next else { break };
            self.now = t.max(self.now);
            self.engine.handle_timeout(self.now);
            for gw in self.gateways.iter_mut().flatten() {
                gw.handle_timeout(self.now);
            }
            self.drive();
        }
        self.now = end;
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
