//! lightwire, the browser light client: brings a verified header chain from a gateway
//! into IndexedDB and keeps it current (issue 5).
//!
//! Written so far: the sans-IO core, which runs natively too and is tested against a real
//! gateway: [`peer`] (one gateway connection: handshake, init, header-sync messages) and
//! [`sync`] (requests, validation, gathering commits). Not written yet: the wasm shell
//! (web-sys WebSocket, timers, reconnects, several gateways, the IndexedDB store wiring,
//! the static key kept in IndexedDB, events and metrics for JavaScript), the Web Worker
//! and the npm package.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(all(test, target_arch = "wasm32"))]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

pub mod peer;
pub mod sync;
