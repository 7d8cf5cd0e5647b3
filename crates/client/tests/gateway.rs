//! The client's sans-IO engine, run by the shipped driver, against the real gateway,
//! in-process on 127.0.0.1, over TCP and WebSocket (a small native host here plays the
//! browser), storing into a MemoryStore: a sync from empty, a resume, a reorg announced by the gateway, and
//! the refusals (wrong network, wrong key).
#![cfg(not(target_arch = "wasm32"))]

use lightwire::ids::GatewayId;
use std::net::SocketAddr;

use std::time::{SystemTime, UNIX_EPOCH};

use std::collections::VecDeque;

use lightwire::driver::{self, Host};
use lightwire::engine::{Action, Engine, Event};
use lightwire::pipeline::{self, Committed, Pipeline};
use lightwire::reason::{DropReason, TransportError};
use lightwire_chain::generate::headers_after;
use lightwire_chain::{Header, MAINNET, Params, REGTEST};
use lightwire_gateway::served::ServedChain;
use lightwire_gateway::server::{Buffers, Limits, Running, Shared};
use lightwire_noise::{PublicKey, SecretKey};
use lightwire_proto::ws;
use lightwire_proto::{ConnectString, Millis, PeerError};
use lightwire_store::{HeaderStore, MemoryStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const NOW: u64 = 2_000_000_000;

type Gateway = Running;

async fn gateway(chain: ServedChain) -> Gateway {
    Shared::builder(chain, key(0x44))
        .limits(Limits::default())
        .buffers(Buffers::pooled(4))
        .spawn("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

fn key(b: u8) -> SecretKey {
    SecretKey::from_bytes(&[b; 32]).unwrap()
}

/// The WebSocket side of the test client (what the browser does for the wasm client).
struct Socket {
    stream: TcpStream,
    decoder: ws::Decoder,
    buf: Vec<u8>,
}

impl Socket {
    async fn open(addr: SocketAddr) -> Socket {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let key = *b"dGhlIHNhbXBsZSBub25jZQ==";
        let mut req = [0u8; 512];
        let n = ws::client_request(&addr.to_string(), "/", &key, &mut req);
        stream.write_all(&req[..n]).await.unwrap();
        let mut buf = vec![0u8; 1 << 17];
        let mut have = 0;
        loop {
            have += stream.read(&mut buf[have..]).await.unwrap();
            if let Some(used) = ws::client_response(&buf[..have], &key).unwrap() {
                assert_eq!(used, have, "no frames before the handshake's first act");
                break;
            }
        }
        Socket {
            stream,
            decoder: ws::Decoder::client(),
            buf,
        }
    }

    async fn send(&mut self, payload: &[u8]) {
        let mut frame = Vec::with_capacity(payload.len() + ws::MAX_HEADER_LEN);
        ws::push_client_frame(&mut frame, payload, [7, 1, 2, 9]);
        self.stream.write_all(&frame).await.unwrap();
    }

    /// Read once; hand every payload byte range to `f`. False when the gateway closed.
    async fn read(&mut self, mut f: impl FnMut(&[u8])) -> bool {
        let n = self.stream.read(&mut self.buf).await.unwrap_or(0);
        if n == 0 {
            return false;
        }
        let mut at = 0;
        while at < n {
            let Ok((taken, event)) = self.decoder.decode(&mut self.buf[at..n]) else {
                return false;
            };
            if let Some(ws::Event::Data(r)) = event {
                f(&self.buf[at + r.start..at + r.end]);
            }
            at += taken;
        }
        true
    }
}

/// What a sync run saw.
#[derive(Debug, Default)]
struct Run {
    validated: u64,
    reorgs: Vec<(u32, u32)>,
    commits: u32,
}

fn now() -> Millis {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    Millis(ms as u64)
}

/// The test's edges for the shipped driver: one gateway over TCP, the clock, and what the
/// run saw.
struct TcpHost {
    engine: Engine,
    addr: SocketAddr,
    socket: Option<Socket>,
    /// A connect asked for (the socket opens when the driver next waits for input).
    connect: bool,
    /// What the engine sent, to write when the driver next waits for input.
    outbox: Vec<Vec<u8>>,
    inbox: VecDeque<Vec<u8>>,
    run: Run,
    stored: u32,
    until: Option<u32>,
    error: Option<String>,
}

/// An input of the TCP host.
enum TcpInput {
    Opened,
    Message(Vec<u8>),
    Closed,
}

impl Host for TcpHost {
    type Store = MemoryStore;
    type Input = TcpInput;
    type Call = core::convert::Infallible;

    fn engine(&mut self) -> &mut Engine {
        &mut self.engine
    }

    fn now(&self) -> Millis {
        now()
    }

    fn pump(&mut self) {
        self.engine.schedule();
        while let Some(action) = self.engine.poll_action() {
            match action {
                Action::Connect { .. } => self.connect = true,
                Action::Close { .. } => self.socket = None,
                // This host lists no mirrors: the engine asks for no fetch.
                Action::FetchManifest { .. }
                | Action::Fetch { .. }
                | Action::CancelFetch { .. } => {}
            }
        }
        while let Some(event) = self.engine.poll_event() {
            match event {
                Event::Reorg { old_tip, depth, .. } => {
                    self.run
                        .reorgs
                        .push((old_tip.height, old_tip.height - depth));
                }
                Event::Rejected { reason, .. }
                | Event::Gateway {
                    reason: Some(reason),
                    ..
                } => self.error = Some(reason.to_string()),
                _ => {}
            }
        }
        if let Some(bytes) = self.engine.poll_transmit(GatewayId(0)) {
            self.outbox.push(bytes.to_vec());
            self.engine.sent(GatewayId(0));
        }
    }

    async fn next(&mut self) -> Option<TcpInput> {
        if self.error.is_some() {
            return None;
        }
        if core::mem::take(&mut self.connect) {
            self.engine.connecting(GatewayId(0), now());
            self.socket = Some(Socket::open(self.addr).await);
            self.engine.opened(GatewayId(0), key(0x66), now());
            return Some(TcpInput::Opened);
        }
        let socket = self.socket.as_mut()?;
        for bytes in self.outbox.drain(..) {
            socket.send(&bytes).await;
        }
        if let Some(m) = self.inbox.pop_front() {
            return Some(TcpInput::Message(m));
        }
        if self.engine.is_synced() && self.until.is_none_or(|u| self.stored >= u) {
            self.run.validated = self.engine.syncer().validated;
            return None;
        }
        let inbox = &mut self.inbox;
        if !socket.read(|data| inbox.push_back(data.to_vec())).await {
            return Some(TcpInput::Closed);
        }
        self.inbox
            .pop_front()
            .map(TcpInput::Message)
            .or(Some(TcpInput::Opened))
    }

    fn handle(&mut self, input: TcpInput) -> Option<Self::Call> {
        match input {
            TcpInput::Opened => {}
            TcpInput::Message(m) => self.engine.receive(GatewayId(0), &m, now()),
            TcpInput::Closed => self
                .engine
                .closed(GatewayId(0), TransportError::Closed, now()),
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
        self.run.commits += 1;
        self.stored = c.tip.height;
    }
}

/// Open an engine on `store`, connect it to `gw` (pinned with `pinned`), and sync with the
/// shipped driver until synced (and, if `until` is given, until the store's tip reaches
/// it). A dropped or rejected gateway ends the run with its reason.
async fn sync(
    params: &'static Params,
    gw: &Gateway,
    pinned: PublicKey,
    store: &mut MemoryStore,
    until: Option<u32>,
) -> Result<Run, String> {
    assert_eq!(store.params().network, params.network);
    let list = vec![ConnectString {
        url: format!("ws://{}", gw.addr),
        node_id: pinned,
    }];
    let (mut engine, stored) = pipeline::open(&*store, list, key(0x55), 1, now())
        .await
        .map_err(|e| e.to_string())?;
    engine.syncer_mut().commit_every = 7_000;
    engine.syncer_mut().request_size = 5_000;
    let mut host = TcpHost {
        engine,
        addr: gw.addr,
        socket: None,
        connect: false,
        outbox: Vec::new(),
        inbox: VecDeque::new(),
        run: Run::default(),
        stored: stored.height,
        until,
        error: None,
    };
    let mut pipeline = Pipeline::default();
    driver::run(&mut host, store, &mut pipeline)
        .await
        .map_err(|e| e.to_string())?;
    match host.error {
        Some(e) => Err(e),
        None if host.socket.is_none() => Err("no connection".into()),
        None => Ok(host.run),
    }
}

async fn stored_headers(store: &MemoryStore) -> Vec<Header> {
    let tip = store.tip().await.unwrap().height;
    let mut out = Vec::new();
    store.headers(1, tip, &mut out).await.unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syncs_from_empty_then_resumes() {
    let small = gateway(ServedChain::generate(30_000, NOW).unwrap()).await;
    let mut store = MemoryStore::new(&REGTEST);
    let run = sync(&REGTEST, &small, small.node_id, &mut store, None)
        .await
        .unwrap();
    assert_eq!(store.tip().await.unwrap().height, 30_000);
    assert_eq!(run.validated, 30_000);
    // Bulk commits of at least 7,000 (whole messages of up to 1,676 compact headers, and
    // what arrived while the last commit was in flight), then the rest once caught up.
    assert!(run.commits >= 3, "commits of 7,000: {run:?}");
    assert_eq!(
        stored_headers(&store).await,
        headers_after(&REGTEST, &REGTEST.genesis, 0, 30_000, 0)
    );

    // A longer chain (the same first 30,000): the sync resumes from the store.
    let big = gateway(ServedChain::generate(45_000, NOW).unwrap()).await;
    let run = sync(&REGTEST, &big, big.node_id, &mut store, None)
        .await
        .unwrap();
    assert_eq!(run.validated, 15_000, "only what the store lacked");
    assert_eq!(store.tip().await.unwrap().height, 45_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_reorg_the_gateway_announces() {
    let gw = gateway(ServedChain::generate(3_000, NOW).unwrap()).await;
    let mut store = MemoryStore::new(&REGTEST);
    sync(&REGTEST, &gw, gw.node_id, &mut store, None)
        .await
        .unwrap();

    // The gateway's chain switches to a heavier branch from 2,900.
    let main = headers_after(&REGTEST, &REGTEST.genesis, 0, 3_000, 0);
    let branch = headers_after(&REGTEST, &main[2_899], 2_900, 150, 7);
    switch_to_branch(&gw, &main, &branch);
    let run = sync(&REGTEST, &gw, gw.node_id, &mut store, Some(3_050))
        .await
        .unwrap();
    assert_eq!(run.reorgs, vec![(3_000, 2_900)]);
    let stored = stored_headers(&store).await;
    assert_eq!(stored[..2_900], main[..2_900]);
    assert_eq!(stored[2_900..], branch[..]);
    let tip = store.tip().await.unwrap();
    assert_eq!((tip.height, tip.hash), (3_050, branch[149].block_hash()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_another_network_and_a_wrong_key() {
    let gw = gateway(ServedChain::generate(10, NOW).unwrap()).await;
    // The client wants mainnet; the gateway serves regtest.
    let mut store = MemoryStore::new(&MAINNET);
    let err = sync(&MAINNET, &gw, gw.node_id, &mut store, None)
        .await
        .unwrap_err();
    assert_eq!(err, PeerError::WrongNetwork.to_string());
    // The pinned key is not the gateway's: the handshake fails.
    let mut store = MemoryStore::new(&REGTEST);
    let wrong = key(0x77).public_key();
    let err = sync(&REGTEST, &gw, wrong, &mut store, None)
        .await
        .unwrap_err();
    assert!(
        err.starts_with("handshake with the gateway failed") || err.contains("closed"),
        "{err}"
    );
    assert_eq!(store.tip().await.unwrap().height, 0);
}

/// The gateway, serving `main` (after genesis), switches to the heavier `branch` off it and
/// announces the new tip, as when its node reorgs.
fn switch_to_branch(gw: &Gateway, main: &[Header], branch: &[Header]) {
    let (_, mut validation) = ServedChain::genesis_only(&REGTEST);
    for piece in main.chunks(1_000) {
        validation.connect(piece, NOW).unwrap();
    }
    let outcome = validation.connect(branch, NOW).unwrap();
    gw.shared
        .chain
        .write()
        .unwrap()
        .apply(&outcome, validation.staged());
    gw.shared.tip_version.send_modify(|v| *v += 1);
}

/// A served chain of exactly `headers` after genesis (validated as the gateway would).
fn served(headers: &[Header]) -> ServedChain {
    let (mut chain, mut validation) = ServedChain::genesis_only(&REGTEST);
    for piece in headers.chunks(1_000) {
        let outcome = validation.connect(piece, NOW).unwrap();
        chain.apply(&outcome, validation.staged());
    }
    chain
}

/// A store started from a checkpoint (an app's: the generated chain's
/// header at 4,032 with its chainwork) syncs forward from it and fetches nothing below it,
/// resumes, follows a reorg the gateway announces above it; a gateway whose chain does not
/// contain the checkpoint is dropped, `off-checkpoint`, and nothing is stored from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_started_from_a_checkpoint_syncs_forward_resumes_and_reorgs() {
    let main = headers_after(&REGTEST, &REGTEST.genesis, 0, 12_000, 0); // main[i]: height i + 1
    let checkpoint = main[4_031];
    // Regtest's work per header is 2: the chain up to 4,032 (genesis included) has 8,066.
    let start = lightwire::start::parse(
        &REGTEST,
        4_032,
        &hex::encode(checkpoint.encode()),
        &format!("{:x}", 2 * 4_033),
        Some(checkpoint.block_hash()),
    )
    .unwrap();
    let mut store = MemoryStore::starting_at(&REGTEST, &start).unwrap();

    // A gateway on another chain (no header at 4,032 is the checkpoint): dropped.
    let other = gateway(served(&headers_after(
        &REGTEST,
        &REGTEST.genesis,
        0,
        6_000,
        3,
    )))
    .await;
    let err = sync(&REGTEST, &other, other.node_id, &mut store, None)
        .await
        .unwrap_err();
    assert_eq!(err, DropReason::OffCheckpoint(4_032).to_string());
    assert_eq!(
        store.tip().await.unwrap().height,
        4_032,
        "nothing stored from it"
    );

    let gw = gateway(served(&main[..8_000])).await;
    let run = sync(&REGTEST, &gw, gw.node_id, &mut store, None)
        .await
        .unwrap();
    assert_eq!(
        run.validated,
        8_000 - 4_032,
        "only what follows the checkpoint"
    );
    assert_eq!(store.header(4_031).await.unwrap(), None, "nothing below it");
    let mut stored = Vec::new();
    store.headers(4_032, 8_000, &mut stored).await.unwrap();
    assert_eq!(stored, main[4_031..8_000]);
    assert_eq!(store.base(), 4_032);

    // Resumed on a longer chain (a new engine on the same store), then a heavier branch
    // from 9,900 replaces the tip.
    let gw = gateway(served(&main[..10_000])).await;
    let run = sync(&REGTEST, &gw, gw.node_id, &mut store, None)
        .await
        .unwrap();
    assert_eq!(run.validated, 2_000);
    let branch = headers_after(&REGTEST, &main[9_899], 9_900, 150, 7);
    switch_to_branch(&gw, &main[..10_000], &branch);
    let run = sync(&REGTEST, &gw, gw.node_id, &mut store, Some(10_050))
        .await
        .unwrap();
    assert_eq!(run.reorgs, vec![(10_000, 9_900)]);
    let tip = store.tip().await.unwrap();
    assert_eq!((tip.height, tip.hash), (10_050, branch[149].block_hash()));
    assert_eq!(store.header(4_032).await.unwrap(), Some(checkpoint));
}
