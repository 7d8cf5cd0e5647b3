//! lightwire, the browser light client: brings a verified header chain from a gateway
//! into IndexedDB and keeps it current.
//!
//! The sans-IO core runs natively too: [`sync`] (requests, validation, gathering commits),
//! [`filters`] (the filter-header chain beside it), [`dispute`] (which gateway's filter
//! is wrong, settled from the block), [`scan`] (matching filters against scripts),
//! [`wallet`] (the watch-only wallet: matched blocks fetched, checked and applied),
//! [`spend`] (PSBTs spending its coins), [`silent_scan`] (a silent-payment receiver's scan
//! over the tweak chain gateways vouch for: [`tweaks`], [`tweak_dispute`]; the keys it is
//! given: [`receiver`]),
//! [`engine`] (several gateways over `lightwire-proto` connections: targets, bad gateways,
//! reconnects, deadlines; typed [`reason`]s for every drop) and [`pipeline`] (resume,
//! locator seeding, ancestor reads and commits over any `HeaderStore`). In wasm, `web` is
//! the shell: the `Client` class JavaScript uses, with WebSockets, one timer and the
//! IndexedDB store. The Web Worker wiring and the TypeScript layer are in `pkg/`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(all(test, target_arch = "wasm32"))]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

pub mod dispute;
pub mod driver;
pub mod engine;
pub mod events;
pub mod filters;
pub mod ids;
pub mod pipeline;
pub mod reason;
pub mod receiver;
pub mod scan;
#[cfg(test)]
mod scenarios;
pub mod silent_mempool;
pub mod silent_scan;
pub mod spend;
pub mod start;
pub mod sync;
/// The engine, a store and in-memory gateways on a virtual clock, driven as the shell
/// drives them: for this crate's tests and for fuzz targets (feature `test-util`).
#[cfg(any(test, feature = "test-util"))]
pub mod testnet;
pub mod tweak_dispute;
pub mod tweaks;
pub mod wallet;
#[cfg(target_arch = "wasm32")]
pub mod web;

/// Allocations in wasm are counted for the metrics snapshot (`Client.metrics()`).
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOC: lightwire_alloc::CountingAllocator = lightwire_alloc::CountingAllocator::system();
