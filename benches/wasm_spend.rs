//! `createPsbt` for a wallet of 1,000 coins in the browser (release wasm):
//! `bash scripts/bench-wasm.sh wasm_spend` (LIGHTWIRE_BENCH_ENGINE for Firefox or WebKit).
#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen_test]
fn create_psbt_benchmark() {
    let clock = lightwire_benches::PerformanceNow::new();
    let engine = lightwire_benches::browser();
    for line in lightwire_benches::spend::report(&clock, &engine, 2e9) {
        web_sys::console::log_1(&line.into());
    }
}
