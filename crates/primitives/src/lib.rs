//! Bitcoin's consensus encoding in one place, in the shape of rust-bitcoin's `primitives`
//! crate: CompactSize ([`read_compact_size`], [`write_compact_size`]), the hash newtypes
//! ([`BlockHash`], [`Txid`], [`FilterHash`], [`FilterHeader`]) shown in Bitcoin's byte-reversed hex, transactions
//! read by borrowing ([`Tx`]), and a block checked once against its header
//! ([`UncheckedBlock::validate`] gives a [`CheckedBlock`] or a [`BlockError`] naming the
//! rule).
//!
//! A crate of its own, not a module of `lightwire-chain`: the BIP158 crate
//! (`lightwire-filter`) is `no_std` and does not depend on the header chain (which is
//! `std`, and carries a command-line tool), yet it reads the same blocks and CompactSizes
//! as the chain's synthetic blocks, the wallet, the client and the gateway's P2P codec.
//! Below all of them, the encoding is written once.
//!
//! `no_std` with `alloc` (only [`write_compact_size`] and [`Tx::write_without_witness`] append to a `Vec`). Reading borrows:
//! decoding a block or a transaction, computing its txids and its Merkle root allocate
//! nothing. Every read is checked: bad input is a typed error, never a panic.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

#[cfg(all(test, target_arch = "wasm32"))]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

pub mod block;
mod compact_size;
mod hash;
pub mod merkle;
mod reader;
pub mod transaction;
pub mod tweaks;

pub use block::{
    Block, BlockError, Checked, CheckedBlock, Unchecked, UncheckedBlock, WitnessError,
};
pub use compact_size::{
    CompactSizeError, compact_size, compact_size_len, read_compact_size, write_compact_size,
};
pub use hash::{BlockHash, FilterHash, FilterHeader, HEADER_LEN, Txid, sha256d};
pub use reader::{DecodeError, Reader};
pub use transaction::{Input, Output, Tx, Witness};
pub use tweaks::{TWEAK_LEN, TweakList, TweakListError, tweak_list_hash, write_tweak_list};
