//! The upstream follower against fake nodes: one that completes the handshake and then
//! goes silent (the gateway pings it, and reconnects when the ping is not answered), and
//! several serving chains of their own (the gateway serves the valid one with the most
//! work, and drops a liar).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use lightwire_chain::generate::headers_after;
use lightwire_chain::{Header, Network, REGTEST};
use lightwire_gateway::p2p;
use lightwire_gateway::served::ServedChain;
use lightwire_gateway::server::{Buffers, Limits};
use lightwire_gateway::upstream::{follow_all_with, follow_with};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

mod common;

/// Read messages until `command` arrives; false if the connection ends first.
async fn wait_for(s: &mut TcpStream, command: &[u8]) -> bool {
    let magic = p2p::magic(Network::Regtest);
    let mut buf = vec![0u8; 1 << 16];
    let mut end = 0;
    loop {
        while let Ok(Some((frame, n))) = p2p::decode(&buf[..end], magic) {
            if frame.command == command {
                return true;
            }
            buf.copy_within(n..end, 0);
            end -= n;
        }
        match s.read(&mut buf[end..]).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => end += n,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_node_is_pinged_then_dropped_and_reconnected() {
    let node = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = node.local_addr().unwrap();
    let (served, chain) = ServedChain::genesis_only(&REGTEST);
    let gw = common::start(served, Limits::default(), Buffers::pooled(2)).await;
    let idle = Duration::from_millis(300);
    tokio::spawn(follow_with(
        addr,
        Network::Regtest,
        gw.shared.clone(),
        chain,
        gw.stopped(),
        idle,
    ));

    let magic = p2p::magic(Network::Regtest);
    let (mut s, _) = tokio::time::timeout(Duration::from_secs(5), node.accept())
        .await
        .expect("the gateway connects")
        .unwrap();
    assert!(wait_for(&mut s, b"version").await);
    let mut out = Vec::new();
    p2p::encode(&mut out, magic, "version", |p| {
        p2p::write_version(p, 0, 1, 0, false)
    });
    p2p::encode(&mut out, magic, "verack", |_| {});
    s.write_all(&out).await.unwrap();
    // Then silence: the gateway pings after `idle`...
    assert!(wait_for(&mut s, b"ping").await, "pinged after silence");
    // ...and, unanswered, drops the connection and dials again.
    let (_again, _) = tokio::time::timeout(Duration::from_secs(5), node.accept())
        .await
        .expect("reconnects after an unanswered ping")
        .unwrap();
    assert!(
        !wait_for(&mut s, b"never").await,
        "the silent connection was closed"
    );
}

/// A fake node on 127.0.0.1 serving the headers of `chain` (after genesis; it may grow
/// while it runs: new headers are announced to each open connection, BIP 130 style). It
/// answers the handshake, `getheaders` (up to 2,000 after the first locator hash it has)
/// and pings, and nothing else: asked for filter headers (`cf_asked` counts them), it
/// does not answer. `accepted` counts connections; dropping the task stops it.
struct FakeNode {
    addr: std::net::SocketAddr,
    chain: tokio::sync::watch::Sender<Vec<Header>>,
    accepted: Arc<AtomicUsize>,
    cf_asked: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeNode {
    async fn start(headers: Vec<Header>) -> FakeNode {
        FakeNode::with_services(headers, 0).await
    }

    /// A node that also says it has `services` (NODE_COMPACT_FILTERS, say).
    async fn with_services(headers: Vec<Header>, services: u64) -> FakeNode {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (chain, _) = tokio::sync::watch::channel(headers);
        let accepted = Arc::new(AtomicUsize::new(0));
        let cf_asked = Arc::new(AtomicUsize::new(0));
        let (tx, count, asked) = (chain.clone(), accepted.clone(), cf_asked.clone());
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((s, _)) = listener.accept().await {
                count.fetch_add(1, Relaxed);
                conns.spawn(serve_node(s, tx.subscribe(), services, asked.clone()));
            }
        });
        FakeNode {
            addr,
            chain,
            accepted,
            cf_asked,
            task,
        }
    }

    fn extend(&self, more: &[Header]) {
        self.chain.send_modify(|c| c.extend_from_slice(more));
    }
}

impl Drop for FakeNode {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `headers` message of `headers`.
fn headers_message(out: &mut Vec<u8>, headers: &[Header]) {
    p2p::encode(out, p2p::magic(Network::Regtest), "headers", |p| {
        p2p::write_compact(p, headers.len() as u64);
        for h in headers {
            p.extend_from_slice(&h.encode());
            p.push(0);
        }
    });
}

async fn serve_node(
    mut s: TcpStream,
    mut chain: tokio::sync::watch::Receiver<Vec<Header>>,
    services: u64,
    cf_asked: Arc<AtomicUsize>,
) {
    let magic = p2p::magic(Network::Regtest);
    let mut buf = vec![0u8; 1 << 16];
    let mut end = 0;
    let mut announced = chain.borrow_and_update().len();
    loop {
        let mut out = Vec::new();
        while let Ok(Some((frame, n))) = p2p::decode(&buf[..end], magic) {
            match frame.command {
                b"version" => {
                    p2p::encode(&mut out, magic, "version", |p| {
                        let at = p.len();
                        p2p::write_version(p, 0, 7, 0, false);
                        p[at + 4..at + 12].copy_from_slice(&services.to_le_bytes());
                    });
                    p2p::encode(&mut out, magic, "verack", |_| {});
                }
                b"ping" => {
                    let payload = frame.payload.to_vec();
                    p2p::encode(&mut out, magic, "pong", |p| p.extend_from_slice(&payload));
                }
                b"getcfheaders" => {
                    cf_asked.fetch_add(1, Relaxed);
                }
                b"getheaders" => {
                    let p = frame.payload;
                    let mut at = 4;
                    let count = p2p::read_compact(p, &mut at, "count").unwrap() as usize;
                    let headers = chain.borrow().clone();
                    let hashes: Vec<_> = std::iter::once(REGTEST.genesis.block_hash())
                        .chain(headers.iter().map(Header::block_hash))
                        .collect();
                    let start = (0..count)
                        .map(|i| &p[at + 32 * i..at + 32 * (i + 1)])
                        .find_map(|h| hashes.iter().position(|x| x.as_bytes() == h))
                        .unwrap_or(0);
                    let after = &headers[start.min(headers.len())..];
                    headers_message(&mut out, &after[..after.len().min(2000)]);
                }
                _ => {}
            }
            buf.copy_within(n..end, 0);
            end -= n;
        }
        if !out.is_empty() && s.write_all(&out).await.is_err() {
            return;
        }
        tokio::select! {
            read = s.read(&mut buf[end..]) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => end += n,
            },
            changed = chain.changed() => {
                if changed.is_err() {
                    return;
                }
                let headers = chain.borrow_and_update().clone();
                let mut out = Vec::new();
                headers_message(&mut out, &headers[announced.min(headers.len())..]);
                announced = headers.len();
                if s.write_all(&out).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Three nodes, one on the chain, one on a heavier branch, one lying (a header
/// with the wrong nBits on a branch that would be heavier still). The gateway serves the
/// heavier valid branch, drops the liar and does not dial it again, keeps serving when the
/// node it follows goes away, and moves to the first node's chain once that one overtakes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_most_work_valid_chain_among_several_nodes_is_served() {
    let main = headers_after(&REGTEST, &REGTEST.genesis, 0, 3000, 0);
    let mut heavier = main[..2500].to_vec();
    heavier.extend(headers_after(&REGTEST, &main[2499], 2500, 1000, 1));
    let mut lie = main[..2000].to_vec();
    lie.extend(headers_after(&REGTEST, &main[1999], 2000, 3000, 2));
    lie[2100].bits = lightwire_chain::CompactTarget(0x1d00_ffff);

    let (a, b, liar) = (
        FakeNode::start(main.clone()).await,
        FakeNode::start(heavier.clone()).await,
        FakeNode::start(lie).await,
    );
    let gw = following(&[a.addr, b.addr, liar.addr], Duration::from_secs(60), false).await;
    let tip = |gw: &common::Gateway| {
        let c = gw.shared.chain.read().unwrap();
        (
            c.tip().height,
            lightwire_chain::hash_header_bytes(&c.tip().header),
        )
    };
    let served_at = |gw: &common::Gateway, h: &Header| {
        gw.shared.chain.read().unwrap().height_of(&h.block_hash())
    };
    wait(
        || tip(&gw) == (3500, heavier[3499].block_hash()),
        "the heavier branch served",
    )
    .await;
    assert_eq!(
        served_at(&gw, &main[2999]),
        None,
        "the lighter branch is not served"
    );
    assert_eq!(served_at(&gw, &main[2400]), Some(2401));

    // The liar was dropped at the rule and is not dialled again (for 10 minutes).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(liar.accepted.load(Relaxed), 1, "the liar was dialled again");
    assert_eq!(tip(&gw).0, 3500);

    // The node with the served chain goes away: the chain is still served.
    drop(b);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(tip(&gw), (3500, heavier[3499].block_hash()));
    let mut client = common::client(&gw, lightwire_gateway::client::Framing::OnePerFrame).await;
    client.recv(|_| ()).await.expect("init");
    client.recv(|_| ()).await.expect("tip");

    // The first node's chain grows past it: the gateway reorgs onto it.
    let more = headers_after(&REGTEST, &main[2999], 3000, 1000, 0);
    a.extend(&more);
    wait(
        || tip(&gw) == (4000, more[999].block_hash()),
        "the first node's chain, now heavier",
    )
    .await;
    assert_eq!(served_at(&gw, &heavier[3000]), None);
    assert_eq!(
        a.accepted.load(Relaxed),
        1,
        "the first node stayed connected"
    );
}

async fn wait(mut ok: impl FnMut() -> bool, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A lead that answers headers and pings but leaves its filter headers unanswered (as
/// Bitcoin Core does for filters its index has not reached) is not dropped: after half
/// the idle time (30 s by default; 0.5 s here) it rests from the filters and is asked
/// again after the rest, on the same connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lead_that_leaves_filter_requests_unanswered_is_asked_again_not_dropped() {
    let node = FakeNode::with_services(
        headers_after(&REGTEST, &REGTEST.genesis, 0, 100, 0),
        p2p::NODE_COMPACT_FILTERS,
    )
    .await;
    let gw = following(&[node.addr], Duration::from_secs(1), true).await;
    wait(|| gw.shared.tip_height() == 100, "the node's chain served").await;
    wait(
        || node.cf_asked.load(Relaxed) >= 2,
        "the silent lead asked for filter headers again after its rest",
    )
    .await;
    assert_eq!(node.accepted.load(Relaxed), 1, "the same connection");
}

/// A gateway following `nodes` from genesis (pinging after `idle`), serving their filters
/// when `filters`.
async fn following(
    nodes: &[std::net::SocketAddr],
    idle: Duration,
    filters: bool,
) -> common::Gateway {
    let (served, chain) = ServedChain::genesis_only(&REGTEST);
    let gw = common::start(served, Limits::default(), Buffers::pooled(2)).await;
    let shared = gw.shared.clone();
    if filters {
        let notify = shared.filter_notify.clone();
        shared
            .chain
            .write()
            .unwrap()
            .serve_upstream_filters(1 << 20, notify);
    }
    let (nodes, stopped) = (nodes.to_vec(), gw.stopped());
    tokio::spawn(async move {
        follow_all_with(&nodes, Network::Regtest, shared, chain, stopped, idle).await
    });
    gw
}

/// A session that asks for a block and goes away leaves nothing to fetch: the server ends
/// its wait when its connection ends, so that clients connecting, asking for a block and
/// disconnecting, again and again, have the node asked for nothing more (here the node
/// never sends the block, and the session never gets it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_asked_by_a_session_that_left_is_no_longer_wanted() {
    use lightwire_gateway::client::Framing;
    use lightwire_wire::{GetBlock, Message};

    let chain = headers_after(&REGTEST, &REGTEST.genesis, 0, 100, 0);
    let node = FakeNode::start(chain.clone()).await;
    let gw = following(&[node.addr], Duration::from_secs(60), false).await;
    let notify = gw.shared.filter_notify.clone();
    gw.shared
        .chain
        .write()
        .unwrap()
        .serve_upstream_blocks(notify);
    wait(|| gw.shared.tip_height() == 100, "the node's chain served").await;
    let wanted = || {
        let chain = gw.shared.chain.read().unwrap();
        chain.blocks().and_then(|b| b.wanted())
    };
    for height in [50, 60, 70] {
        let hash = chain[height - 1].block_hash();
        let mut client = common::client(&gw, Framing::OnePerFrame).await;
        let ask = GetBlock {
            id: 1,
            block_hash: hash.0,
        };
        client.send(&Message::GetBlock(ask)).await.unwrap();
        wait(|| wanted() == Some(hash), "the session waits for the block").await;
        drop(client);
        wait(
            || wanted().is_none(),
            "nothing wanted once the session left",
        )
        .await;
    }
}
