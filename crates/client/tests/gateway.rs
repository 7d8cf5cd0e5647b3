//! The client's sans-IO engine (Peer + Syncer) against the real gateway, in-process on
//! 127.0.0.1, over TCP and WebSocket, storing into a MemoryStore: a sync from empty, a
//! resume, a reorg announced by the gateway, and the refusals (wrong network, wrong key).
#![cfg(not(target_arch = "wasm32"))]

use std::net::SocketAddr;

use lightwire::peer::{Peer, PeerError, PeerEvent};
use lightwire::sync::{SyncError, Syncer};
use lightwire_chain::generate::headers_after;
use lightwire_chain::{BlockHash, Chain, Header, MAINNET, Params, REGTEST, WINDOW_LEN};
use lightwire_gateway::served::ServedChain;
use lightwire_gateway::server::{Buffers, Limits, Running, spawn};
use lightwire_gateway::ws;
use lightwire_noise::{PublicKey, SecretKey};
use lightwire_store::{HeaderStore, MemoryStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const NOW: u64 = 2_000_000_000;

type Gateway = Running;

async fn gateway(chain: ServedChain) -> Gateway {
    spawn(
        "127.0.0.1:0".parse().unwrap(),
        chain,
        key(0x44),
        Limits::default(),
        Buffers::pooled(4),
    )
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
        let mask = [7, 1, 2, 9];
        let (h, n) = ws::client_binary_header(payload.len(), mask);
        let mut frame = h[..n].to_vec();
        let at = frame.len();
        frame.extend_from_slice(payload);
        ws::apply_mask(&mut frame[at..], mask, 0);
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

/// Resume from `store`, connect to `gw`, sync until synced (and, if `until` is given,
/// until the store's tip reaches it). The gateway is pinned with `pinned`.
async fn sync(
    params: &'static Params,
    gw: &Gateway,
    pinned: PublicKey,
    store: &mut MemoryStore,
    until: Option<u32>,
) -> Result<Run, String> {
    let stored = store.tip().await.unwrap();
    let from = stored.height.saturating_sub(WINDOW_LEN as u32 - 1);
    let chain = Chain::resume(params, &store.entries(from, stored.height).await.unwrap()).unwrap();
    let mut syncer = Syncer::new(chain, &stored);
    syncer.commit_every = 7_000;
    syncer.request_size = 5_000;
    let mut socket = Socket::open(gw.addr).await;
    let mut peer = Peer::new(params, key(0x55), pinned, key(0x66));
    let mut locator: Vec<BlockHash> = Vec::new();
    let mut run = Run::default();
    let mut saw_tip = false;
    loop {
        if let Some(bytes) = peer.transmit() {
            let bytes = bytes.to_vec();
            socket.send(&bytes).await;
            peer.sent();
        }
        if peer.is_ready()
            && let Some((id, n)) = syncer.next_request(&mut locator)
        {
            peer.request(id, n, &locator).map_err(|e| e.to_string())?;
            continue;
        }
        if syncer.commit_due() {
            let tip = store
                .commit(syncer.batch())
                .await
                .map_err(|e| e.to_string())?;
            syncer.committed(&tip);
            run.commits += 1;
        }
        let stored = store.tip().await.unwrap().height;
        let done = saw_tip
            && syncer.is_synced()
            && syncer.uncommitted() == 0
            && until.is_none_or(|u| stored >= u);
        if done {
            run.validated = syncer.validated;
            return Ok(run);
        }
        let mut failure: Option<String> = None;
        let open = socket
            .read(|data| {
                if failure.is_some() {
                    return;
                }
                let mut on_event = |event: PeerEvent<'_>| match event {
                    PeerEvent::Tip {
                        height,
                        header,
                        chainwork,
                    } => {
                        saw_tip = true;
                        syncer.on_tip(height, &header, chainwork);
                    }
                    PeerEvent::Headers {
                        id, headers, last, ..
                    } => match syncer.on_headers(id, headers, last, NOW) {
                        Ok(step) => {
                            if let Some((old, fork)) = step.reorg {
                                run.reorgs.push((old.height, fork));
                            }
                            assert!(step.need_ancestors.is_none());
                        }
                        Err(SyncError::Invalid(e)) => failure = Some(format!("invalid: {e}")),
                        Err(e) => failure = Some(e.to_string()),
                    },
                    _ => {}
                };
                if let Err(e) = peer.receive(data, &mut on_event) {
                    failure = Some(format!("peer: {e}"));
                }
            })
            .await;
        if let Some(f) = failure {
            return Err(f);
        }
        if !open {
            return Err("the gateway closed the connection".into());
        }
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
    assert!(run.commits >= 4, "commits of 7,000: {run:?}");
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
    {
        let (_, mut validation) = ServedChain::genesis_only(&REGTEST);
        for piece in main.chunks(1_000) {
            validation.connect(piece, NOW).unwrap();
        }
        let outcome = validation.connect(&branch, NOW).unwrap();
        gw.shared
            .chain
            .write()
            .unwrap()
            .apply(&outcome, validation.staged());
        gw.shared.tip_version.send_modify(|v| *v += 1);
    }
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
    assert_eq!(err, format!("peer: {}", PeerError::WrongNetwork));
    // The pinned key is not the gateway's: the handshake fails.
    let mut store = MemoryStore::new(&REGTEST);
    let wrong = key(0x77).public_key();
    let err = sync(&REGTEST, &gw, wrong, &mut store, None)
        .await
        .unwrap_err();
    assert!(
        err.starts_with("peer: handshake with the gateway failed") || err.contains("closed"),
        "{err}"
    );
    assert_eq!(store.tip().await.unwrap().height, 0);
}
