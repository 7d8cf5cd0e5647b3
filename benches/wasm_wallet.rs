//! The wallet's work on a matched 1 MB block in the browser (release wasm):
//! `bash scripts/bench-wasm.sh wasm_wallet` (LIGHTWIRE_BENCH_ENGINE for Firefox or WebKit).
#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen_test]
fn block_extraction_benchmark() {
    let clock = lightwire_benches::PerformanceNow::new();
    let (len, ns, found, iterations) = lightwire_benches::wallet::extract(&clock, 2e9);
    web_sys::console::log_1(
        &format!(
            "lightwire wallet ({}): a {len}-byte block parsed, checked against its header (hash, Merkle root, not mutated, one coinbase first) and its {found} transactions of ours picked out: {:.2} ms per block ({iterations} timed)",
            lightwire_benches::browser(),
            ns / 1e6
        )
        .into(),
    );
}

#[wasm_bindgen_test]
fn derivation_benchmark() {
    let clock = lightwire_benches::PerformanceNow::new();
    let (ns, scripts, iterations) = lightwire_benches::wallet::derive(&clock, 2e9);
    web_sys::console::log_1(
        &format!(
            "lightwire wallet ({}): a BIP84 descriptor's {scripts} scripts derived by both routes: {:.2} ms ({:.1} us a script; {iterations} timed)",
            lightwire_benches::browser(),
            ns / 1e6,
            ns / 1e3 / scripts as f64
        )
        .into(),
    );
}
