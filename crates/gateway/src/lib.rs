//! The lightwire gateway: serves a validated header chain to browsers over BOLT 8 carried
//! in WebSocket binary messages (docs/PROTOCOL.md).
//!
//! Sans-IO parts: [`ws`] (the WebSocket codec), [`session`] (one connection's protocol
//! state), [`served`] (the chain, validated before it is served). The I/O is in
//! [`server`] (tokio), [`metrics`] (`/metrics`) and [`client`] (a native client, for
//! tests and the load generator).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cli;
pub mod client;
pub mod metrics;
pub mod p2p;
pub mod pool;
pub mod served;
pub mod server;
pub mod session;
pub mod upstream;
pub mod ws;

/// A fresh random secret key (static or ephemeral), from the operating system's RNG.
pub fn random_key() -> Result<lightwire_noise::SecretKey, getrandom::Error> {
    loop {
        let mut b = [0u8; 32];
        getrandom::fill(&mut b)?;
        // Out of range (about 2^-128 of the time): draw again.
        if let Ok(k) = lightwire_noise::SecretKey::from_bytes(&b) {
            return Ok(k);
        }
    }
}
