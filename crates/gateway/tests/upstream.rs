//! The upstream follower against a fake node that completes the handshake and then goes
//! silent: the gateway pings it, and reconnects when the ping is not answered.

use std::time::Duration;

use lightwire_chain::{Network, REGTEST};
use lightwire_gateway::p2p;
use lightwire_gateway::served::ServedChain;
use lightwire_gateway::server::{Buffers, Limits};
use lightwire_gateway::upstream::follow_with;
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
        p2p::write_version(p, 0, 1, 0)
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
