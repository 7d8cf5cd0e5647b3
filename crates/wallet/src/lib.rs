//! What a watch-only wallet watches, sans-IO: output scripts, from addresses of every
//! standard kind (base58check P2PKH and P2SH, bech32 P2WPKH and P2WSH, bech32m P2TR; BIP173,
//! BIP350) checked for the network, and from extended public keys as simple descriptors
//! (`pkh`, `sh(wpkh)`, `wpkh`, `tr` with a key path only; BIP380-386), derived on their
//! receive and change branches with a gap limit that grows as addresses are used
//! ([`Watchlist`]); the [`Ledger`] of what checked blocks did to them: transactions,
//! coins, the balance by depth, undone on a reorganisation; and the [`Unconfirmed`]
//! transactions kept apart from it.
//!
//! `no_std` with `alloc`. Crates: `bech32` for segwit addresses (base58 is written here, see
//! [`address`]), `bip32` on
//! `k256` for derivation (the curve crate the handshake uses), `ripemd` for HASH160.
//! Malformed input of any kind is a typed error naming what is wrong, never a panic.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

#[cfg(all(test, target_arch = "wasm32"))]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

pub mod address;
pub mod descriptor;
mod hash;
pub mod labels;
pub mod ledger;
pub mod sighash;
pub mod silent;
pub mod silent_block;
pub mod silent_evidence;
pub mod spend;
pub mod unconfirmed;
pub mod watch;

pub use address::{AddressError, address_of, script_of_address};
pub use descriptor::{Descriptor, DescriptorError, Kind};
pub use ledger::{Balance, Coin, Ledger, Outpoint, WalletTx};
pub use unconfirmed::{Unconfirmed, UnconfirmedTx};
pub use watch::{Origin, Used, Watchlist};
