//! The gateway in-process on 127.0.0.1 with a generated chain, and native clients: a full
//! sync validated with lightwire-chain, then hostile clients, each closed with its reason
//! while a well-behaved client keeps being served.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use lightwire_chain::{Chain, Header, Outcome, REGTEST};
use lightwire_gateway::client::{Client, ClientError, Framing};
use lightwire_gateway::served::ServedChain;
use lightwire_gateway::server::{Buffers, Caps, Limits};
use lightwire_proto::ws;
use lightwire_wire::{GetHeaders, Message};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const NOW: u64 = 2_000_000_000;

mod common;
use common::Gateway;

/// A generated chain of `count` headers.
fn generated(count: u32) -> ServedChain {
    ServedChain::generate(count, NOW).expect("generated chain")
}

trait Start {
    async fn serving(count: u32, limits: Limits) -> Gateway;
    async fn start_with(count: u32, limits: Limits, buffers: Buffers) -> Gateway;
    async fn closed_for(&self, reason: &str, handshake: bool);
}

impl Start for Gateway {
    async fn serving(count: u32, limits: Limits) -> Gateway {
        Gateway::start_with(count, limits, Buffers::pooled(4)).await
    }

    async fn start_with(count: u32, limits: Limits, buffers: Buffers) -> Gateway {
        common::start(generated(count), limits, buffers).await
    }

    /// Wait until the gateway has counted a close (or failed handshake) for `reason`.
    async fn closed_for(&self, reason: &str, handshake: bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let m = &self.shared.metrics;
            let n = if handshake {
                m.handshake_failures(reason)
            } else {
                m.closes(reason)
            };
            if n > 0 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no close for {reason}:\n{}",
                m.render(0, "")
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn quick() -> Limits {
    Limits {
        handshake: Duration::from_secs(5),
        idle_ping: Duration::from_secs(30),
        ping_timeout: Duration::from_secs(30),
        write_timeout: Duration::from_secs(2),
        frame_timeout: Duration::from_secs(1),
    }
}

/// Sync the whole chain over `client`, validating every header; returns the tip height.
async fn sync(client: &mut Client, per_request: u32) -> u32 {
    // The gateway's init, then its tip.
    let first = client
        .recv(|m| u16::from_be_bytes([m[0], m[1]]))
        .await
        .unwrap();
    assert_eq!(first, 16, "init first");
    let announced = client
        .recv(|m| match Message::decode(m) {
            Ok(Message::Tip(t)) => t.height,
            other => panic!("expected tip, got {other:?}"),
        })
        .await
        .unwrap();
    let mut chain = Chain::new(&REGTEST);
    let mut batch: Vec<Header> = Vec::with_capacity(819);
    let mut id = 0;
    while chain.tip().height < announced {
        id += 1;
        let locator = chain.tip().hash.0;
        let req = GetHeaders {
            id,
            max_count: per_request,
            stop_hash: [0; 32],
            locator: &locator,
        };
        client.send(&Message::GetHeaders(req)).await.unwrap();
        loop {
            batch.clear();
            let last = client
                .recv(|m| match Message::decode(m) {
                    Ok(Message::Headers(h)) => {
                        assert_eq!(h.id, id);
                        batch.extend(h.iter().map(Header::decode));
                        h.last
                    }
                    other => panic!("expected headers, got {other:?}"),
                })
                .await
                .unwrap();
            if !batch.is_empty() {
                let outcome = chain.connect(&batch, NOW).expect("valid headers");
                assert!(matches!(outcome, Outcome::Extended { .. }));
            }
            if last {
                break;
            }
        }
    }
    chain.tip().height
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_syncs_and_validates_the_whole_chain() {
    for buffers in [Buffers::Fixed, Buffers::pooled(1)] {
        a_client_syncs_with(buffers).await;
    }
}

async fn a_client_syncs_with(buffers: Buffers) {
    let gw = Gateway::start_with(20_000, quick(), buffers).await;
    let mut client = common::client(&gw, Framing::OnePerFrame).await;
    assert_eq!(sync(&mut client, 5_000).await, 20_000);
    // Frames cut into 7-byte WebSocket messages arrive all the same.
    let mut split = common::client(&gw, Framing::Split(7)).await;
    assert_eq!(sync(&mut split, 100_000).await, 20_000);
    let m = &gw.shared.metrics;
    assert_eq!(
        m.handshakes_completed
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
    assert_eq!(
        m.headers_served.load(std::sync::atomic::Ordering::Relaxed),
        40_000
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_frames_in_one_websocket_message_are_all_read() {
    let gw = Gateway::serving(3_000, quick()).await;
    let mut client = common::client(&gw, Framing::OnePerFrame).await;
    client.recv(|_| ()).await.unwrap(); // init
    client.recv(|_| ()).await.unwrap(); // tip
    // Three requests sealed into one WebSocket message.
    let mut packed = Vec::new();
    for id in 1..=3u32 {
        let req = GetHeaders {
            id,
            max_count: 10,
            stop_hash: [0; 32],
            locator: &[],
        };
        packed.extend(client.seal(&Message::GetHeaders(req)).unwrap());
    }
    client.send_ws(&packed).await.unwrap();
    for id in 1..=3u32 {
        let (got, count, last) = client
            .recv(|m| match Message::decode(m) {
                Ok(Message::Headers(h)) => (h.id, h.count(), h.last),
                other => panic!("{other:?}"),
            })
            .await
            .unwrap();
        assert_eq!((got, count, last), (id, 10, true));
    }
}

/// Read until the gateway closes; returns what it sent as WebSocket payload, roughly.
async fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return all,
            Ok(Ok(n)) => all.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the gateway did not close the connection"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_handshakes_are_closed_with_their_reason() {
    // Thousands of connections from 127.0.0.1 below: no per-address cap (tests/caps.rs
    // has those).
    let gw =
        common::start_capped(generated(100), quick(), Buffers::pooled(4), Caps::UNLIMITED).await;

    // Garbage instead of an HTTP upgrade.
    let mut s = TcpStream::connect(gw.addr).await.unwrap();
    s.write_all(b"\x16\x03\x01 not http at all\r\n\r\n")
        .await
        .unwrap();
    read_to_close(&mut s).await;
    gw.closed_for("websocket", true).await;

    // A handshake never finished, though bytes of act one keep trickling in: closed at
    // the 5 s limit counted from the connection, not from the last byte.
    let started = Instant::now();
    let mut s = TcpStream::connect(gw.addr).await.unwrap();
    upgrade(&mut s).await;
    let trickle = async {
        let mut b = [0u8; 64];
        for _ in 0..40 {
            if try_send_masked(&mut s, &[0]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            // The gateway sends nothing during act one: a readable socket means closed.
            if matches!(s.try_read(&mut b), Ok(0) | Err(_))
                && s.peek(&mut b).await.is_ok_and(|n| n == 0)
            {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(8), trickle).await;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(4900) && waited < Duration::from_secs(8),
        "closed after {waited:?}"
    );
    gw.closed_for("handshake_timeout", true).await;

    // A bad act one (wrong version byte), after a proper upgrade.
    let mut s = TcpStream::connect(gw.addr).await.unwrap();
    upgrade(&mut s).await;
    let mut act = [0u8; 50];
    act[0] = 1;
    send_masked(&mut s, &act).await;
    read_to_close(&mut s).await;
    gw.closed_for("noise_handshake", true).await;

    // A text frame.
    let mut s = TcpStream::connect(gw.addr).await.unwrap();
    upgrade(&mut s).await;
    s.write_all(&[0x81, 0x80, 0, 0, 0, 0]).await.unwrap();
    read_to_close(&mut s).await;

    // Thousands of connections opened and dropped, some mid-upgrade.
    for i in 0..2_000 {
        let mut s = TcpStream::connect(gw.addr).await.unwrap();
        if i % 4 == 0 {
            let _ = s.write_all(b"GET / HTTP/1.1\r\nUpgr").await;
        }
        drop(s);
    }
    // Meanwhile and after, a good client is served.
    let mut client = common::client(&gw, Framing::OnePerFrame).await;
    assert_eq!(sync(&mut client, 1_000).await, 100);
    let deadline = Instant::now() + Duration::from_secs(10);
    while gw
        .shared
        .metrics
        .connections_open
        .load(std::sync::atomic::Ordering::Relaxed)
        > 1
    {
        assert!(
            Instant::now() < deadline,
            "dropped connections were not all closed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn upgrade(s: &mut TcpStream) {
    let key = *b"dGhlIHNhbXBsZSBub25jZQ==";
    let mut req = [0u8; 512];
    let n = ws::client_request("127.0.0.1", "/", &key, &mut req);
    s.write_all(&req[..n]).await.unwrap();
    let mut buf = [0u8; 512];
    let mut have = 0;
    loop {
        have += s.read(&mut buf[have..]).await.unwrap();
        if ws::client_response(&buf[..have], &key).unwrap().is_some() {
            return;
        }
    }
}

async fn send_masked(s: &mut TcpStream, payload: &[u8]) {
    let _ = try_send_masked(s, payload).await;
}

async fn try_send_masked(s: &mut TcpStream, payload: &[u8]) -> std::io::Result<()> {
    let mask = [1, 2, 3, 4];
    let (h, n) = ws::client_binary_header(payload.len(), mask);
    let mut frame = h[..n].to_vec();
    let mut body = payload.to_vec();
    ws::apply_mask(&mut body, mask, 0);
    frame.extend(body);
    s.write_all(&frame).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transport_and_protocol_violations_close_only_that_connection() {
    let gw = Gateway::serving(2_000, quick()).await;
    let mut good = common::client(&gw, Framing::OnePerFrame).await;

    // A frame whose MAC fails (garbage after the handshake).
    let mut bad = common::client(&gw, Framing::OnePerFrame).await;
    bad.send_ws(&[0x55; 100]).await.unwrap();
    assert!(drain_until_closed(&mut bad).await);
    gw.closed_for("bad_frame", false).await;

    // A WebSocket frame claiming 2^40 bytes, then garbage: the first transport frame in it
    // fails its MAC; nothing waits for the rest.
    let mut huge = common::client(&gw, Framing::OnePerFrame).await;
    let mut h = vec![0x82, 0xff];
    h.extend_from_slice(&(1u64 << 40).to_be_bytes());
    h.extend_from_slice(&[0, 0, 0, 0]);
    h.extend_from_slice(&[0x42; 200]);
    huge.stream().write_all(&h).await.unwrap();
    assert!(drain_until_closed(&mut huge).await);

    // A huge count: a warning naming the rule, then close.
    let mut greedy = common::client(&gw, Framing::OnePerFrame).await;
    let req = GetHeaders {
        id: 1,
        max_count: 10_000_000,
        stop_hash: [0; 32],
        locator: &[],
    };
    greedy.send(&Message::GetHeaders(req)).await.unwrap();
    let warning = warning_then_close(&mut greedy).await;
    assert!(warning.contains("max_count 10000000"), "{warning}");
    gw.closed_for("max_count", false).await;

    // A locator of 102 hashes (encoded by hand: our encoder refuses it).
    let mut bogus = common::client(&gw, Framing::OnePerFrame).await;
    let mut m = vec![0x80, 0x01, 0, 0, 0, 1, 0, 0, 0, 10];
    m.extend_from_slice(&[0; 32]);
    m.extend_from_slice(&102u16.to_be_bytes());
    m.extend(std::iter::repeat_n(0xab, 102 * 32));
    let frame = bogus
        .seal(&Message::Unknown {
            ty: 0x8001,
            payload: &m[2..],
        })
        .unwrap();
    bogus.send_ws(&frame).await.unwrap();
    let warning = warning_then_close(&mut bogus).await;
    assert!(warning.contains("locator of 102 hashes"), "{warning}");

    // A locator of unknown hashes is not an error: the answer starts after genesis.
    let mut lost = common::client(&gw, Framing::OnePerFrame).await;
    lost.recv(|_| ()).await.unwrap();
    lost.recv(|_| ()).await.unwrap();
    let unknown = [0xcd; 64];
    let req = GetHeaders {
        id: 5,
        max_count: 3,
        stop_hash: [0; 32],
        locator: &unknown,
    };
    lost.send(&Message::GetHeaders(req)).await.unwrap();
    let first = lost
        .recv(|m| match Message::decode(m) {
            Ok(Message::Headers(h)) => h.first_height,
            other => panic!("{other:?}"),
        })
        .await
        .unwrap();
    assert_eq!(first, 1);

    // The first client was served throughout.
    assert_eq!(sync(&mut good, 500).await, 2_000);
}

/// Receive until the gateway closes; true if it did (any error ends it).
async fn drain_until_closed(client: &mut Client) -> bool {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), client.recv(|_| ())).await {
            Ok(Ok(())) => continue,
            Ok(Err(_)) => return true,
            Err(_) => return false,
        }
    }
}

/// The text of the warning the gateway sends before it closes.
async fn warning_then_close(client: &mut Client) -> String {
    let mut text = None;
    loop {
        let r = tokio::time::timeout(
            Duration::from_secs(10),
            client.recv(|m| match Message::decode(m) {
                Ok(Message::Warning(w)) => w.data_utf8().map(str::to_owned),
                _ => None,
            }),
        )
        .await
        .expect("closed in time");
        match r {
            Ok(Some(t)) => text = Some(t),
            Ok(None) => {}
            Err(ClientError::Closed | ClientError::Io(_)) => {
                return text.expect("a warning before the close");
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_dropped_not_buffered() {
    let gw = Gateway::serving(200_000, quick()).await;
    let mut sleeper = common::client(&gw, Framing::OnePerFrame).await;
    // Ask for everything, eight times over, and never read.
    for id in 1..=8u32 {
        let req = GetHeaders {
            id,
            max_count: 100_000,
            stop_hash: [0; 32],
            locator: &[],
        };
        sleeper.send(&Message::GetHeaders(req)).await.unwrap();
    }
    // The socket buffers fill, the gateway's write waits, then times out (2 s here).
    gw.closed_for("write_timeout", false).await;
    let served = gw
        .shared
        .metrics
        .headers_served
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        served < 200_000,
        "the gateway wrote {served} headers ahead of the client"
    );
    // Others are served.
    let mut good = common::client(&gw, Framing::OnePerFrame).await;
    assert_eq!(sync(&mut good, 100_000).await, 200_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_read_keeps_a_pooled_write_buffer_no_longer_than_others_wait() {
    // One write buffer. Others wait for it 2 s at most (the frame timeout); a write may
    // take 20 s (the write timeout), which a frame in a pooled buffer must not.
    let limits = Limits {
        write_timeout: Duration::from_secs(20),
        frame_timeout: Duration::from_secs(2),
        ..quick()
    };
    let gw = Gateway::start_with(200_000, limits, Buffers::pooled(1)).await;
    let Buffers::Pooled { write, .. } = &gw.shared.buffers else {
        unreachable!("pooled")
    };
    let m = &gw.shared.metrics;
    let mut sleeper = common::client(&gw, Framing::OnePerFrame).await;
    for id in 1..=8u32 {
        let req = GetHeaders {
            id,
            max_count: 100_000,
            stop_hash: [0; 32],
            locator: &[],
        };
        sleeper.send(&Message::GetHeaders(req)).await.unwrap();
    }
    // Its socket buffers fill; then the write buffer stays lent while nothing is written.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut out, mut since) = (m.bytes_out.load(Relaxed), Instant::now());
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now_out = m.bytes_out.load(Relaxed);
        if now_out != out {
            (out, since) = (now_out, Instant::now());
        } else if write.lent() == 1 && since.elapsed() >= Duration::from_millis(500) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the sleeper's writes never stalled"
        );
    }
    // Another client needs the buffer for its first message, and waits: the stalled write
    // is cut at 2 s, before that wait runs out, and the buffer goes to the waiting client.
    let mut good = common::client(&gw, Framing::OnePerFrame).await;
    assert_eq!(sync(&mut good, 100_000).await, 200_000);
    gw.closed_for("write_timeout", false).await;
    let stalled_for = since.elapsed();
    assert_eq!(m.closes("pool_exhausted"), 0, "{}", m.render(0, ""));
    assert!(
        stalled_for < Duration::from_secs(20),
        "the stalled write was cut after {stalled_for:?}"
    );
    assert_eq!(write.lent(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_clients_are_pinged_and_dropped_when_silent() {
    let limits = Limits {
        idle_ping: Duration::from_millis(300),
        ping_timeout: Duration::from_millis(300),
        ..quick()
    };
    let gw = Gateway::serving(10, limits).await;
    // One answers pings, one does not.
    let mut alive = common::client(&gw, Framing::OnePerFrame).await;
    let mut silent = common::client(&gw, Framing::OnePerFrame).await;
    let mut pings = 0;
    while pings < 3 {
        let ping = alive
            .recv(|m| matches!(Message::decode(m), Ok(Message::Ping(_))))
            .await
            .expect("still connected");
        if ping {
            pings += 1;
            alive
                .send(&Message::Pong(lightwire_wire::Pong { ignored: &[] }))
                .await
                .unwrap();
        }
    }
    gw.closed_for("keepalive_timeout", false).await;
    assert!(drain_until_closed(&mut silent).await);
    // The one that answered is still served.
    let req = GetHeaders {
        id: 9,
        max_count: 10,
        stop_hash: [0; 32],
        locator: &[],
    };
    alive.send(&Message::GetHeaders(req)).await.unwrap();
    loop {
        let got = alive
            .recv(|m| match Message::decode(m) {
                Ok(Message::Headers(h)) => Some((h.id, h.count())),
                _ => None,
            })
            .await
            .expect("still connected");
        if let Some(got) = got {
            assert_eq!(got, (9, 10));
            break;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_trickled_too_slowly_is_dropped() {
    // One pool buffer for reading: a trickling client must not keep it.
    let gw = Gateway::start_with(10, quick(), Buffers::pooled(1)).await;
    let mut slow = common::client(&gw, Framing::OnePerFrame).await;
    let frame = slow
        .seal(&Message::Ping(lightwire_wire::Ping::new(4)))
        .unwrap();
    // A byte at a time, every 300 ms: active, but the frame never completes in 1 s.
    let started = Instant::now();
    for b in &frame[..6] {
        // The gateway closes part-way through: later sends may fail.
        let _ = slow.send_ws(std::slice::from_ref(b)).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    gw.closed_for("slow_frame", false).await;
    assert!(started.elapsed() >= Duration::from_millis(900));
    // The buffer went back: another client is served.
    let mut good = common::client(&gw, Framing::OnePerFrame).await;
    assert_eq!(sync(&mut good, 10).await, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_handshake_holds_no_pooled_buffer() {
    // One buffer in each pool. A client that sends act one and one byte of act three,
    // then stalls, must not hold it: another client syncs meanwhile.
    let gw = Gateway::start_with(500, quick(), Buffers::pooled(1)).await;
    let mut stalled = TcpStream::connect(gw.addr).await.unwrap();
    upgrade(&mut stalled).await;
    let (_, act_one) = lightwire_noise::Initiator::start(
        lightwire_noise::SecretKey::from_bytes(&[5; 32]).unwrap(),
        gw.node_id,
        lightwire_noise::SecretKey::from_bytes(&[6; 32]).unwrap(),
    );
    send_masked(&mut stalled, &act_one).await;
    let mut buf = [0u8; 64];
    let _ = stalled.read(&mut buf).await; // act two
    send_masked(&mut stalled, &[0]).await;
    let started = Instant::now();
    let mut good = common::client(&gw, Framing::OnePerFrame).await;
    assert_eq!(sync(&mut good, 500).await, 500);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "waited for the stalled one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_websocket_pings_in_one_read_leave_the_stream_intact() {
    let gw = Gateway::serving(100, quick()).await;
    let mut c = common::client(&gw, Framing::OnePerFrame).await;
    c.recv(|_| ()).await.unwrap(); // init
    c.recv(|_| ()).await.unwrap(); // tip
    // Three pings of 125 bytes and a request, in one write: the pongs do not all fit
    // the gateway's small queue, and must be dropped whole, not cut.
    let mut wire = Vec::new();
    for i in 0..3u8 {
        let mask = [i, 1, 2, 3];
        wire.extend_from_slice(&[0x89, 0x80 | 125]);
        wire.extend_from_slice(&mask);
        let mut body = [0x41u8; 125];
        ws::apply_mask(&mut body, mask, 0);
        wire.extend_from_slice(&body);
    }
    let req = GetHeaders {
        id: 3,
        max_count: 5,
        stop_hash: [0; 32],
        locator: &[],
    };
    let frame = c.seal(&Message::GetHeaders(req)).unwrap();
    let mask = [9, 9, 9, 9];
    let (h, n) = ws::client_binary_header(frame.len(), mask);
    wire.extend_from_slice(&h[..n]);
    let mut body = frame.clone();
    ws::apply_mask(&mut body, mask, 0);
    wire.extend_from_slice(&body);
    c.stream().write_all(&wire).await.unwrap();
    let (id, count) = c
        .recv(|m| match Message::decode(m) {
            Ok(Message::Headers(h)) => (h.id, h.count()),
            other => panic!("{other:?}"),
        })
        .await
        .expect("the stream is intact");
    assert_eq!((id, count), (3, 5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mirrors_given_are_advertised_in_init() {
    let mut chain = generated(100);
    let urls = [
        "https://cdn.example.com/bulk/regtest/",
        "http://127.0.0.1:8080/bulk/regtest/",
    ];
    let mut value = [0u8; 128];
    let n = lightwire_wire::Init::encode_mirrors(&urls, &mut value).unwrap();
    chain.advertise_mirrors(value[..n].to_vec());
    let gw = common::start(chain, quick(), Buffers::pooled(4)).await;
    let mut client = common::client(&gw, Framing::OnePerFrame).await;
    let said = client
        .recv(|m| match lightwire_wire::Message::decode(m) {
            Ok(lightwire_wire::Message::Init(init)) => {
                init.mirror_urls().map(str::to_string).collect::<Vec<_>>()
            }
            other => panic!("not an init first: {other:?}"),
        })
        .await
        .unwrap();
    assert_eq!(said, urls);
}
