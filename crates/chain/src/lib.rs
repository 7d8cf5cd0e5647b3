//! Bitcoin block headers for a light client, sans-IO: the consensus encoding and block
//! hash, compact targets and work, per-network parameters, validation of each header in its
//! parent's context, and fork choice by most cumulative work.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

// Without this, wasm-bindgen-test skips the unit tests in a browser run with only a notice.
#[cfg(all(test, target_arch = "wasm32"))]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

mod chain;
pub mod generate;
mod header;
pub mod merkle;
mod params;
#[cfg(test)]
mod reference;
mod sha256x4;
pub mod synthetic;
mod target;
mod uint;
mod validate;

pub use chain::{Chain, ConnectError, MAX_SIDE_BRANCH, Outcome};
pub use header::{BlockHash, HEADER_LEN, Header, hash_header_bytes};
pub use params::{MAINNET, Network, Params, REGTEST, SIGNET, TESTNET3, TESTNET4, UnknownNetwork};
pub use sha256x4::{
    hash_header_list, hash_headers, hash4, hash64x4, link_filter_headers, link_segments,
};
pub use target::{CompactError, CompactTarget, Target, Work};
pub use uint::U256;
pub use validate::{
    BitsCheck, Entry, MAX_BATCH, MAX_FUTURE_BLOCK_TIME, MAX_TIMEWARP, MEDIAN_TIME_SPAN, Rule,
    Validated, ValidationError, WINDOW_LEN, Window, rebuild_entries, retarget, validate,
    validate_hashed,
};
