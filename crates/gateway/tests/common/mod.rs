//! A gateway in-process on 127.0.0.1, stopped when dropped, and a client for it.
// Each test binary uses part of this.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;

use lightwire_chain::REGTEST;
use lightwire_gateway::client::{Client, Framing};
use lightwire_gateway::served::ServedChain;
use lightwire_gateway::server::{Buffers, Limits, Shared, serve};
use lightwire_noise::{PublicKey, SecretKey};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// A gateway serving on 127.0.0.1.
pub struct Gateway {
    pub addr: SocketAddr,
    pub shared: Arc<Shared>,
    pub node_id: PublicKey,
    stop: watch::Sender<bool>,
}

impl Gateway {
    /// Serve `chain` with a fixed test key.
    pub async fn start(chain: ServedChain, limits: Limits, buffers: Buffers) -> Gateway {
        let key = SecretKey::from_bytes(&[0x11; 32]).unwrap();
        let node_id = key.public_key();
        let shared = Shared::new(chain, key, limits, buffers);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(serve(listener, shared.clone(), stopped));
        Gateway {
            addr,
            shared,
            node_id,
            stop,
        }
    }

    /// Turns true when the gateway stops (for tasks started beside it).
    pub fn stopped(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }

    /// A connected client for the regtest chain.
    pub async fn client(&self, framing: Framing) -> Client {
        Client::connect(
            self.addr,
            &self.node_id,
            REGTEST.genesis.block_hash().0,
            framing,
        )
        .await
        .expect("connects")
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}
