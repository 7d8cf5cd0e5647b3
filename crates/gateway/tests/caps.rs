//! The connection caps, on real sockets: the gateway in-process on 127.0.0.1 with tiny
//! caps, clients from 127.0.0.1 and 127.0.0.2 (the whole of 127/8 is loopback). A
//! connection over a cap is answered `503 Service Unavailable` and closed before any
//! handshake, and counted by reason, while the connections already open keep being served.
//! Behind a trusted proxy, the caps count the clients it names in `X-Forwarded-For`.

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use lightwire_chain::REGTEST;
use lightwire_gateway::admission::{Refusal, TrustedProxies};
use lightwire_gateway::client::{Client, ClientError, Framing};
use lightwire_gateway::served::ServedChain;
use lightwire_gateway::server::{Buffers, Caps, Limits, Shared};
use lightwire_noise::SecretKey;
use lightwire_proto::ws;
use lightwire_wire::{GetHeaders, Message};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

mod common;
use common::Gateway;

async fn capped(max_connections: usize, max_per_address: usize) -> Gateway {
    let chain = ServedChain::generate(1_000, 2_000_000_000).expect("generated chain");
    common::start_capped(
        chain,
        Limits::default(),
        Buffers::pooled(4),
        Caps {
            max_connections,
            max_per_address,
            // The rate of new connections is another test's (admission.rs, cli.rs).
            max_new_per_second: u32::MAX,
        },
    )
    .await
}

/// A socket to the gateway from `source` (127.0.0.1 or 127.0.0.2).
async fn from(source: &str, gw: &Gateway) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    let local: SocketAddr = format!("{source}:0").parse().unwrap();
    socket.bind(local).unwrap();
    socket.connect(gw.addr).await.unwrap()
}

/// A client from `source` that completed the handshake and got the gateway's init and tip.
async fn served_from(source: &str, gw: &Gateway) -> Client {
    let stream = from(source, gw).await;
    let mut c = Client::over(
        stream,
        &gw.node_id,
        REGTEST.genesis.block_hash().0,
        Framing::OnePerFrame,
    )
    .await
    .unwrap_or_else(|e| panic!("a client from {source} was not served: {e}"));
    c.recv(|_| ()).await.expect("init");
    c.recv(|_| ()).await.expect("tip");
    c
}

/// Whether `c` is still served: ten headers asked for, ten received.
async fn still_served(c: &mut Client, id: u32) {
    let req = GetHeaders {
        id,
        max_count: 10,
        stop_hash: [0; 32],
        locator: &[],
    };
    c.send(&Message::GetHeaders(req)).await.expect("sent");
    let got = tokio::time::timeout(
        Duration::from_secs(10),
        c.recv(|m| match Message::decode(m) {
            Ok(Message::Headers(h)) => (h.id, h.count(), h.last),
            other => panic!("expected headers, got {other:?}"),
        }),
    )
    .await
    .expect("answered in time")
    .expect("still connected");
    assert_eq!(got, (id, 10, true));
}

/// Read what the gateway sends on `s` until it closes it (an error, a reset included,
/// ends it too).
async fn read_to_close(s: &mut TcpStream) -> String {
    let mut all = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        match tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return String::from_utf8_lossy(&all).into_owned(),
            Ok(Ok(n)) => all.extend_from_slice(&buf[..n]),
            Err(_) => panic!("not closed; got {:?}", String::from_utf8_lossy(&all)),
        }
    }
}

/// Open a connection from `source` as a browser would (the upgrade request at once), and
/// return what the gateway answered before closing it.
async fn refused_from(source: &str, gw: &Gateway) -> String {
    let mut s = from(source, gw).await;
    let mut req = [0u8; 512];
    let n = ws::client_request("127.0.0.1", "/", b"dGhlIHNhbXBsZSBub25jZQ==", &mut req);
    // The gateway may have answered and closed already.
    let _ = s.write_all(&req[..n]).await;
    read_to_close(&mut s).await
}

fn assert_503(answer: &str, body: &str) {
    assert!(
        answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n")
            && answer.contains("\r\nRetry-After: 10\r\n")
            && answer.ends_with(&format!("\r\n\r\n{body}\n")),
        "{answer:?}"
    );
}

/// Wait until `f` holds (the gateway notices closed connections on its own tasks).
async fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "not in time: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_connection_cap_a_client_gets_a_503_and_those_open_are_still_served() {
    let gw = capped(3, 100).await;
    let m = &gw.shared.metrics;
    let mut open = vec![
        served_from("127.0.0.1", &gw).await,
        served_from("127.0.0.1", &gw).await,
        served_from("127.0.0.2", &gw).await,
    ];
    // The fourth, from either address, is refused before any handshake.
    assert_503(
        &refused_from("127.0.0.1", &gw).await,
        "too many connections to this gateway",
    );
    assert_503(
        &refused_from("127.0.0.2", &gw).await,
        "too many connections to this gateway",
    );
    // The native client fails at the upgrade, as a browser's WebSocket fails to open.
    let c = Client::connect(
        gw.addr,
        &gw.node_id,
        REGTEST.genesis.block_hash().0,
        Framing::OnePerFrame,
    )
    .await;
    assert!(
        matches!(c, Err(ClientError::Ws(ws::WsError::BadResponse(_)))),
        "{:?}",
        c.err()
    );
    assert_eq!(m.refusals(Refusal::MaxConnections), 3);
    assert_eq!(m.refusals(Refusal::MaxPerAddress), 0);
    // Refused sockets took no slot, no task, no handshake.
    assert_eq!(gw.shared.admission.open(), 3);
    assert_eq!(m.connections_total.load(Relaxed), 3);
    assert_eq!(m.connections_open.load(Relaxed), 3);
    assert_eq!(m.handshakes_completed.load(Relaxed), 3);
    let text = gw.shared.render_metrics();
    for line in [
        "lightwire_refused_connections_total{reason=\"max_connections\"} 3",
        "lightwire_refused_connections_total{reason=\"max_per_address\"} 0",
    ] {
        assert!(text.contains(line), "no {line:?} in\n{text}");
    }
    // Those open were served throughout.
    for (i, c) in open.iter_mut().enumerate() {
        still_served(c, i as u32 + 1).await;
    }
    // One closes: a new connection is accepted again.
    drop(open.pop());
    eventually("the closed connection's slot given back", || {
        gw.shared.admission.open() == 2
    })
    .await;
    let mut again = served_from("127.0.0.2", &gw).await;
    still_served(&mut again, 9).await;
    assert_eq!(m.refusals(Refusal::MaxConnections), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_at_its_cap_does_not_block_another() {
    let gw = capped(100, 2).await;
    let m = &gw.shared.metrics;
    let mut first = vec![
        served_from("127.0.0.1", &gw).await,
        served_from("127.0.0.1", &gw).await,
    ];
    assert_503(
        &refused_from("127.0.0.1", &gw).await,
        "too many connections from this address",
    );
    assert_eq!(m.refusals(Refusal::MaxPerAddress), 1);
    // 127.0.0.1 is at its cap; 127.0.0.2 is served up to its own.
    let mut second = [
        served_from("127.0.0.2", &gw).await,
        served_from("127.0.0.2", &gw).await,
    ];
    assert_503(
        &refused_from("127.0.0.2", &gw).await,
        "too many connections from this address",
    );
    assert_eq!(m.refusals(Refusal::MaxPerAddress), 2);
    assert_eq!(m.refusals(Refusal::MaxConnections), 0);
    for (i, c) in first.iter_mut().chain(second.iter_mut()).enumerate() {
        still_served(c, i as u32 + 1).await;
    }
    // 127.0.0.1 closes one: it may open one again, and only one.
    drop(first.pop());
    eventually("127.0.0.1's slot given back", || {
        gw.shared.admission.open_from("127.0.0.1".parse().unwrap()) == 1
    })
    .await;
    let mut again = served_from("127.0.0.1", &gw).await;
    still_served(&mut again, 9).await;
    assert_503(
        &refused_from("127.0.0.1", &gw).await,
        "too many connections from this address",
    );
    assert_eq!(m.refusals(Refusal::MaxPerAddress), 3);
    assert_eq!(m.connections_total.load(Relaxed), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_refused_connections_is_closed_at_once_and_holds_nothing() {
    let gw = capped(1, 1).await;
    let m = &gw.shared.metrics;
    let mut held = served_from("127.0.0.1", &gw).await;
    // 300 sockets that send nothing and are not closed by the client: more than the
    // gateway answers at leisure at once (256), so both ways of refusing are taken.
    let mut flood = Vec::new();
    for _ in 0..300 {
        flood.push(from("127.0.0.1", &gw).await);
    }
    let started = Instant::now();
    for s in &mut flood {
        assert_503(
            &read_to_close(s).await,
            "too many connections to this gateway",
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?} to close them all",
        started.elapsed()
    );
    assert_eq!(m.refusals(Refusal::MaxConnections), 300);
    assert_eq!(gw.shared.admission.open(), 1);
    assert_eq!(m.connections_total.load(Relaxed), 1);
    let Buffers::Pooled { read, write } = &gw.shared.buffers else {
        unreachable!("pooled")
    };
    assert_eq!((read.lent(), write.lent()), (0, 0));
    still_served(&mut held, 1).await;
}

/// A gateway that trusts 127.0.0.1 as a proxy (as behind nginx on the same host), at most
/// one connection per client.
async fn behind_a_proxy() -> Gateway {
    let chain = ServedChain::generate(1_000, 2_000_000_000).expect("generated chain");
    Shared::builder(chain, SecretKey::from_bytes(&[0x11; 32]).unwrap())
        .buffers(Buffers::pooled(4))
        .caps(Caps {
            max_connections: 10,
            max_per_address: 1,
            max_new_per_second: u32::MAX,
        })
        .trusted_proxies(TrustedProxies::new(vec!["127.0.0.1".parse().unwrap()]))
        .spawn("127.0.0.1:0".parse().unwrap())
        .await
        .expect("listens")
}

/// A connection from `source` whose upgrade request says `X-Forwarded-For: <xff>`.
async fn forwarded(source: &str, xff: &str, gw: &Gateway) -> Result<Client, ClientError> {
    let stream = from(source, gw).await;
    let extra = format!("X-Forwarded-For: {xff}\r\n");
    let genesis = REGTEST.genesis.block_hash().0;
    let framing = Framing::OnePerFrame;
    let mut c = Client::upgrade(stream, "gw", &extra, &gw.node_id, genesis, framing, false).await?;
    c.recv(|_| ()).await?;
    c.recv(|_| ()).await?;
    Ok(c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_proxys_connections_count_against_the_clients_it_names() {
    let gw = behind_a_proxy().await;
    let (m, a) = (&gw.shared.metrics, &gw.shared.admission);
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    // What the client claimed comes first; the proxy's own entry is the last.
    let mut first = forwarded("127.0.0.1", "10.6.6.6, 203.0.113.7", &gw)
        .await
        .expect("served");
    assert_eq!(a.open_from(ip("203.0.113.7")), 1);
    assert_eq!(a.open_from(ip("127.0.0.1")), 0);
    assert_eq!(a.open_from(ip("10.6.6.6")), 0);
    // The same client again, through the proxy: over its cap, answered 503 before any
    // handshake.
    let mut s = from("127.0.0.1", &gw).await;
    let mut req = [0u8; 512];
    let n = ws::client_request("gw", "/", b"dGhlIHNhbXBsZSBub25jZQ==", &mut req);
    s.write_all(&req[..n - 2]).await.unwrap();
    s.write_all(b"X-Forwarded-For: 203.0.113.7\r\n\r\n")
        .await
        .unwrap();
    assert_503(
        &read_to_close(&mut s).await,
        "too many connections from this address",
    );
    assert_eq!(m.refusals(Refusal::MaxPerAddress), 1);
    assert_eq!(m.handshakes_completed.load(Relaxed), 1);
    // Another client through the same proxy gets in.
    let mut second = forwarded("127.0.0.1", "198.51.100.1", &gw)
        .await
        .expect("served");
    // From an address that is not a trusted proxy, the header is the client's own claim:
    // ignored, and the connection counts as its address.
    let mut direct = forwarded("127.0.0.2", "203.0.113.7", &gw)
        .await
        .expect("served");
    assert_eq!(a.open_from(ip("127.0.0.2")), 1);
    assert_eq!(a.open_from(ip("203.0.113.7")), 1);
    // A proxy request that names no client is refused as a bad upgrade.
    let nameless = forwarded("127.0.0.1", "unknown", &gw).await;
    assert!(nameless.is_err());
    eventually("the nameless request counted", || {
        m.handshake_failures("websocket") == 1
    })
    .await;
    for (i, c) in [&mut first, &mut second, &mut direct]
        .into_iter()
        .enumerate()
    {
        still_served(c, i as u32 + 1).await;
    }
    // The first client goes: its address may connect again.
    drop(first);
    eventually("203.0.113.7's slot given back", || {
        a.open_from(ip("203.0.113.7")) == 0
    })
    .await;
    let _again = forwarded("127.0.0.1", "203.0.113.7", &gw)
        .await
        .expect("served again");
    assert_eq!(a.open_from(ip("203.0.113.7")), 1);
    // Open now: the second, the direct one and this one (the refused and the nameless
    // ones are closed, once their tasks have ended).
    eventually("only the three served connections open", || a.open() == 3).await;
}
