//! Silent payments per tweak in the browser (release wasm): `bash scripts/bench-wasm.sh
//! wasm_silent` (LIGHTWIRE_BENCH_ENGINE for Firefox or WebKit).
#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen_test]
fn silent_payments_benchmark() {
    let clock = lightwire_benches::PerformanceNow::new();
    let engine = lightwire_benches::browser();
    for line in lightwire_benches::silent::report(&clock, &engine, 1e9) {
        web_sys::console::log_1(&line.into());
    }
}
