//! The transport benchmark inside headless Chromium, as wasm. Run it with the console
//! shown (scripts/bench-wasm.sh does this):
//! `cargo test -p lightwire-benches --release --target wasm32-unknown-unknown --test wasm_transport -- --nocapture`
//! with `CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner`.
//! Natively this file holds nothing: the native benchmark is `transport.rs`.
#![cfg(target_arch = "wasm32")]

use wasm_bindgen::JsCast;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

#[cfg(feature = "count-alloc")]
#[global_allocator]
static ALLOC: lightwire_alloc::CountingAllocator = lightwire_alloc::CountingAllocator::system();

/// `performance.now()`, from a window or a worker.
struct PerformanceNow(web_sys::Performance);

impl PerformanceNow {
    fn new() -> Self {
        let global = js_sys::global();
        let performance = match global.dyn_ref::<web_sys::Window>() {
            Some(window) => window.performance(),
            None => global
                .unchecked_ref::<web_sys::WorkerGlobalScope>()
                .performance(),
        };
        PerformanceNow(performance.expect("performance.now() available"))
    }
}

impl lightwire_benches::Clock for PerformanceNow {
    fn now_ns(&self) -> f64 {
        self.0.now() * 1e6
    }
}

#[wasm_bindgen_test]
fn transport_benchmark() {
    let rows = lightwire_benches::suite(&PerformanceNow::new(), 1e9);
    let table = lightwire_benches::table(&rows);
    web_sys::console::log_1(
        &format!("lightwire transport benchmark (wasm32, headless Chromium)\n{table}").into(),
    );
    // The steady-state allocation count is deterministic, so it is asserted as well as shown.
    for r in rows.iter().filter(|r| r.name != "handshake (both sides)") {
        assert_eq!(
            r.allocations, 0,
            "{} {} bytes allocated {} times",
            r.name, r.message_len, r.allocations
        );
    }
}
