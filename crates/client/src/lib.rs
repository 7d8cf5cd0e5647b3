//! lightwire, the browser light client: brings a verified header chain from a gateway
//! into IndexedDB and keeps it current (issue 5).
//!
//! The sans-IO core runs natively too and is tested against a real gateway: [`peer`] (one
//! gateway connection: handshake, init, header-sync messages), [`sync`] (requests,
//! validation, gathering commits) and [`engine`] (several gateways: targets, bad gateways,
//! reconnects, keepalive). In wasm, `web` is the shell: the `Client` class JavaScript
//! uses, with WebSockets, timers and the IndexedDB store. The Web Worker wiring and the
//! TypeScript layer are in `pkg/`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(all(test, target_arch = "wasm32"))]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

pub mod engine;
pub mod peer;
pub mod sync;
#[cfg(target_arch = "wasm32")]
pub mod web;

/// Allocations in wasm are counted for the metrics snapshot (`Client.metrics()`).
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOC: lightwire_alloc::CountingAllocator = lightwire_alloc::CountingAllocator::system();
