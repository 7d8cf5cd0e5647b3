//! Matching a mempool digest message in the browser (release wasm), before and after:
//! `bash scripts/bench-wasm.sh wasm_digest` (LIGHTWIRE_BENCH_ENGINE for Firefox or WebKit).
#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen_test]
fn digest_matching_benchmark() {
    let clock = lightwire_benches::PerformanceNow::new();
    let scale = lightwire_benches::digest::Scale::Full;
    let (rows, bytes) = lightwire_benches::digest::run(&clock, 2e9, scale);
    web_sys::console::log_1(
        &format!(
            "lightwire mempool digest matching ({})\n{}",
            lightwire_benches::browser(),
            lightwire_benches::digest::table(&rows, bytes, scale)
        )
        .into(),
    );
}
