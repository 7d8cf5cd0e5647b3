//! BIP158 compact block filters, sans-IO: the Golomb-coded set (P = 19, M = 784,931), the
//! basic filter built from a block and the output scripts its inputs spend, matching many
//! scripts against a filter in one pass over its values, the filter hash and the filter-header
//! chain (BIP157); and the set of one unconfirmed transaction in a gateway's mempool
//! digest ([`txset`]).
//!
//! `no_std` with `alloc` (building a filter makes a buffer; decoding and matching use only
//! what the caller lends, so a scan allocates nothing per filter once its buffers are warm).
//! Every read of a filter or a block is checked: bad input is a typed [`FilterError`] or
//! [`DecodeError`], never a panic. Blocks are read with `lightwire-primitives` (the
//! consensus encoding in one place); [`Block`] and [`DecodeError`] are re-exported because
//! this crate's functions take and return them.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

#[cfg(all(test, target_arch = "wasm32"))]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

mod bits;
mod gcs;
pub mod txset;

pub use gcs::{
    BASIC_M, BASIC_P, Filter, FilterError, Matcher, Values, basic_filter, build_filter,
    filter_hash, filter_header, first_absent, known_items, output_scripts,
};
pub use lightwire_primitives::{Block, DecodeError, FilterHash, FilterHeader};
