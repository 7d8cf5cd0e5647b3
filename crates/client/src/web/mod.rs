//! The browser shell (wasm only): the [`Client`] JavaScript class and the sync loop that
//! drives the sans-IO engine with WebSockets, one timer and the IndexedDB store.
//!
//! - [`options`]: what `Client.open` takes, checked.
//! - [`client`]: the `Client` class; [`status`]: what its getters read.
//! - [`run`]: the loop: inputs from one queue ([`inbox`]), sockets ([`socket`]), the
//!   engine, the store through `crate::pipeline`, events to JavaScript; [`mirror`]: a
//!   mirror's manifest and files through `fetch()`.
//! - [`queries`]: the calls that read the store; [`labels`]: BIP329 label files read.
//! - [`identity`]: the client's static key (IndexedDB) and randomness; [`js`]: bridges.
//! - `scan_pool` (with silent payments): the receiver's filter checks in the package's
//!   workers.

mod client;
mod identity;
mod inbox;
mod js;
mod labels;
mod mirror;
mod options;
mod queries;
mod run;
#[cfg(feature = "silent-payments")]
mod scan_pool;
mod socket;
mod status;

pub use client::Client;
#[cfg(feature = "silent-payments")]
pub use scan_pool::ScanHelper;
