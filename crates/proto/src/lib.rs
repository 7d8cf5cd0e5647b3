//! The client <-> gateway protocol (docs/PROTOCOL.md), sans-IO, the way quinn-proto sits
//! under quinn: state machines fed bytes and a clock, polled for bytes to send, events and
//! their next deadline. They own no socket, timer or thread; the gateway's tokio shell and
//! the browser's wasm shell do the I/O, and one implementation serves both ends.
//!
//! - [`ws`]: the WebSocket codec (the upgrade, frames streamed through unmasked in place).
//! - [`connect`]: connect strings, `ws[s]://host:port#<node id>`.
//! - [`compact`]: `headers_compact` expanded and its hash chain rebuilt, four lanes at once.
//! - [`initiator`]: a client's connection to a gateway ([`Link`] for raw BOLT 8 messages,
//!   [`Initiator`] for the protocol with its keepalive).
//! - [`responder`]: a gateway's connection from a client: upgrade, acts, then the
//!   [`Session`] that answers requests from a [`Served`] chain.
//! - [`feed`]: a session's mempool digest subscription (its salt, its place in the served
//!   mempool's changes, the transactions asked for).
//! - [`bulk`]: a mirror's bulk files, read into the same events as a gateway's answers.
//! - [`time`]: [`Millis`], the caller's clock.
//!
//! With the `test-util` feature (and in this crate's tests), `testing` holds a served chain
//! in memory and `pair` runs an initiator against a responder on a virtual clock.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(all(test, target_arch = "wasm32"))]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

mod acts;
pub mod bulk;
pub mod compact;
pub mod connect;
pub mod feed;
pub mod initiator;
#[cfg(any(test, feature = "test-util"))]
pub mod pair;
pub mod responder;
pub mod session;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;
pub mod time;
pub mod ws;

pub use connect::{ConnectString, ConnectStringError};
pub use initiator::{DataRequest, Initiator, Link, PeerError, PeerEvent};
pub use responder::{BufferKind, BufferMode, Close, Responder, Transmit};
pub use session::{Served, ServedTip, Session, Violation};
pub use time::Millis;

/// The headers of a `headers` event, decoded (80 bytes each; a short tail is ignored).
pub fn decode_headers(bytes: &[u8]) -> impl Iterator<Item = lightwire_chain::Header> + '_ {
    bytes
        .chunks_exact(lightwire_chain::HEADER_LEN)
        .filter_map(lightwire_chain::Header::from_slice)
}
