//! The engine allocates nothing per message once warm: a sync from an in-memory gateway,
//! run by the shipped driver over a memory store, with every allocation counted inside
//! the engine's handling of each WebSocket message (headers, compact headers and filter
//! headers, validation, the router and its effects). The host's own copies and the store
//! are outside what is counted. Its own test binary: counts are process-wide.
#![cfg(not(target_arch = "wasm32"))]

use core::future::Future;
use core::pin::pin;
use core::task::{Context, Poll, Waker};
use lightwire::ids::GatewayId;
use std::collections::VecDeque;

use lightwire::driver::{self, Host};
use lightwire::engine::{Action, Engine};
use lightwire::pipeline::{self, Committed, Pipeline};
use lightwire_alloc::{CountingAllocator, snapshot};
use lightwire_chain::REGTEST;
use lightwire_noise::SecretKey;
use lightwire_proto::pair::Gateway;
use lightwire_proto::testing::TestChain;
use lightwire_proto::{BufferMode, ConnectString, Millis};
use lightwire_store::MemoryStore;

#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator::system();

const NOW: Millis = Millis(2_000_000_000_000);

fn key(b: u8) -> SecretKey {
    SecretKey::from_bytes(&[b; 32]).expect("a valid test key")
}

fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// One in-memory gateway; counts the allocations inside `Engine::receive` once the
/// stored tip is past `warm`.
struct Counting {
    engine: Engine,
    gateway: Option<Gateway>,
    chain: Option<TestChain>,
    queue: VecDeque<Vec<u8>>,
    stored: u32,
    warm: u32,
    messages: u64,
    allocations: u64,
    bytes: u64,
}

impl Host for Counting {
    type Store = MemoryStore;
    type Input = Vec<u8>;
    type Call = core::convert::Infallible;

    fn engine(&mut self) -> &mut Engine {
        &mut self.engine
    }

    fn now(&self) -> Millis {
        NOW
    }

    fn pump(&mut self) {
        self.engine.schedule();
        while let Some(action) = self.engine.poll_action() {
            if let Action::Connect { .. } = action {
                self.engine.connecting(GatewayId(0), NOW);
                let chain = self.chain.take().expect("one connection");
                self.gateway = Some(Gateway::new(NOW, key(0x40), chain, BufferMode::Pooled, 2));
                self.engine.opened(GatewayId(0), key(2), NOW);
            }
        }
        if let (Some(gw), Some(out)) = (
            self.gateway.as_mut(),
            self.engine.poll_transmit(GatewayId(0)),
        ) {
            gw.send(out);
            self.engine.sent(GatewayId(0));
        }
        while self.engine.poll_event().is_some() {}
    }

    async fn next(&mut self) -> Option<Vec<u8>> {
        let gw = self.gateway.as_mut()?;
        while self.queue.is_empty() {
            let queue = &mut self.queue;
            if !gw.exchange(NOW, |m| queue.push_back(m.to_vec())) && queue.is_empty() {
                return None;
            }
        }
        self.queue.pop_front()
    }

    fn handle(&mut self, input: Vec<u8>) -> Option<Self::Call> {
        let before = snapshot();
        self.engine.receive(GatewayId(0), &input, NOW);
        if self.stored >= self.warm {
            let d = snapshot().since(&before);
            self.messages += 1;
            self.allocations += d.allocations;
            self.bytes += d.bytes_allocated;
        }
        None
    }

    async fn serve(&mut self, _: &mut MemoryStore, call: Self::Call) {
        match call {}
    }

    fn unanswered(&mut self, call: Self::Call) {
        match call {}
    }

    fn committed(&mut self, _: &MemoryStore, c: Committed) {
        self.stored = c.tip.height;
    }
}

#[test]
fn a_warm_sync_allocates_nothing_per_message() {
    let mut store = MemoryStore::new(&REGTEST);
    let list = vec![ConnectString {
        url: "ws://127.0.0.1:9000".into(),
        node_id: key(0x40).public_key(),
    }];
    let (mut engine, _) =
        block_on(pipeline::open(&store, list, key(1), 7, NOW)).expect("the store opens");
    engine.syncer_mut().request_size = 2_000;
    engine.syncer_mut().commit_every = 4_000;
    let mut host = Counting {
        engine,
        gateway: None,
        chain: Some(TestChain::generate(40_000)),
        queue: VecDeque::new(),
        stored: 0,
        // Two commits' buffers (the one committed and the one gathered meanwhile) have
        // grown to their size by then.
        warm: 8_000,
        messages: 0,
        allocations: 0,
        bytes: 0,
    };
    let mut pipeline = Pipeline::default();
    block_on(driver::run(&mut host, &mut store, &mut pipeline)).expect("the store works");
    assert_eq!(host.stored, 40_000);
    assert!(host.engine.is_synced());
    assert!(host.messages > 40, "{} messages counted", host.messages);
    assert_eq!(
        (host.allocations, host.bytes),
        (0, 0),
        "allocations in {} warm messages",
        host.messages
    );
}
