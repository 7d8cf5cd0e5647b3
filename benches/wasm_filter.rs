//! BIP158 matching in the browser (release wasm, SIMD128 build):
//! `bash scripts/bench-wasm.sh wasm_filter` (LIGHTWIRE_BENCH_ENGINE for Firefox or WebKit).
#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

#[cfg(feature = "count-alloc")]
#[global_allocator]
static ALLOC: lightwire_alloc::CountingAllocator = lightwire_alloc::CountingAllocator::system();

#[wasm_bindgen_test]
fn filter_matching_benchmark() {
    let clock = lightwire_benches::PerformanceNow::new();
    let rows = lightwire_benches::filter::ours(&clock, 300e6);
    web_sys::console::log_1(
        &format!(
            "lightwire BIP158 matching ({})\n{}",
            lightwire_benches::browser(),
            lightwire_benches::filter::table(&rows)
        )
        .into(),
    );
}
