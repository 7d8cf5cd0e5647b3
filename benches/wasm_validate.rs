//! Header validation in headless Chromium: the 925,000-header generated regtest chain
//! through `Chain::connect` in batches of 2016, no storage: `bash scripts/bench-wasm.sh wasm_validate`.
#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

#[cfg(feature = "count-alloc")]
#[global_allocator]
static ALLOC: lightwire_alloc::CountingAllocator = lightwire_alloc::CountingAllocator::system();

#[wasm_bindgen_test]
fn validation_benchmark() {
    let clock = lightwire_benches::PerformanceNow::new();
    let runs = [lightwire_benches::chain::validate_generated(
        &clock, 925_000, 2016,
    )];
    let pages = core::arch::wasm32::memory_size(0);
    web_sys::console::log_1(
        &format!(
            "lightwire header validation (wasm32, headless Chromium)\n{}\nwasm memory at the end: {} MiB",
            lightwire_benches::chain::table(&runs),
            pages * 64 / 1024
        )
        .into(),
    );
    assert_eq!(
        runs[0].allocations, 0,
        "validation allocates nothing once warm"
    );
}
