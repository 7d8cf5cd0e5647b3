//! A gateway in-process on 127.0.0.1 (stopped when dropped), with a regtest client.
// Each test binary uses part of this.
#![allow(dead_code)]

use lightwire_chain::REGTEST;
use lightwire_gateway::client::{Client, Framing};
use lightwire_gateway::served::ServedChain;
use lightwire_gateway::server::{Buffers, Caps, Limits, Running, Shared};
use lightwire_noise::SecretKey;

/// The running gateway.
pub type Gateway = Running;

/// Serve `chain` on 127.0.0.1 with a fixed test key, under the default caps.
pub async fn start(chain: ServedChain, limits: Limits, buffers: Buffers) -> Gateway {
    start_capped(chain, limits, buffers, Caps::default()).await
}

/// Serve `chain` on 127.0.0.1 with a fixed test key, at most `caps` connections open.
pub async fn start_capped(
    chain: ServedChain,
    limits: Limits,
    buffers: Buffers,
    caps: Caps,
) -> Gateway {
    let key = SecretKey::from_bytes(&[0x11; 32]).unwrap();
    Shared::builder(chain, key)
        .limits(limits)
        .buffers(buffers)
        .caps(caps)
        .spawn("127.0.0.1:0".parse().unwrap())
        .await
        .expect("listens")
}

/// A connected client for the regtest chain.
pub async fn client(gw: &Gateway, framing: Framing) -> Client {
    Client::connect(
        gw.addr,
        &gw.node_id,
        REGTEST.genesis.block_hash().0,
        framing,
    )
    .await
    .expect("connects")
}

/// A connected client for the regtest chain that offers `headers_compact`.
pub async fn compact_client(gw: &Gateway, framing: Framing) -> Client {
    let stream = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    Client::over_offering(
        stream,
        &gw.node_id,
        REGTEST.genesis.block_hash().0,
        framing,
        true,
    )
    .await
    .expect("connects")
}
