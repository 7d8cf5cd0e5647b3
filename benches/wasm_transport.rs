//! The transport benchmark inside a headless browser, as wasm: `bash scripts/bench-wasm.sh`
//! (`LIGHTWIRE_BENCH_ENGINE=firefox` or `webkit` for the other engines).
//! Natively this file holds nothing: the native benchmark is `transport.rs`.
#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

#[cfg(feature = "count-alloc")]
#[global_allocator]
static ALLOC: lightwire_alloc::CountingAllocator = lightwire_alloc::CountingAllocator::system();

#[wasm_bindgen_test]
fn transport_benchmark() {
    let rows = lightwire_benches::suite(&lightwire_benches::PerformanceNow::new(), 1e9);
    let table = lightwire_benches::table(&rows);
    web_sys::console::log_1(
        &format!(
            "lightwire transport benchmark (wasm32, {})\n{table}",
            lightwire_benches::browser()
        )
        .into(),
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
