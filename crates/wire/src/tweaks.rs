//! Silent-payment tweak messages (BIP352): per block, the sorted list of the tweaks of its
//! eligible transactions, and a header chain over those lists as BIP157 chains filters,
//! in BOLT 1's custom range. A gateway offers them with the odd feature bit
//! [`TWEAKS_FEATURE`]; docs/PROTOCOL.md ("Silent-payment tweaks") gives the rules.
//!
//! The six messages have the layouts of the filter messages (`crate::filters`), byte for
//! byte, under their own types: the payload types are shared and a
//! [`FilterKind::Tweaks`](crate::filters::FilterKind) picks the type numbers, so one
//! decoder, one writer and one client task serve both chains.
//!
//! - `get_tweak_headers` (32809) / `tweak_headers` (32811): tweak hashes (SHA-256 of a
//!   block's list) with an anchor per segment.
//! - `get_tweak_checkpoints` (32813) / `tweak_checkpoints` (32815): the tweak header at
//!   every 1,000th height.
//! - `get_tweaks` (32817) / `tweaks` (32819): the lists, in pieces.
//!
//! A list's bytes stay opaque here (lightwire-wallet's `silent` module reads them): a
//! CompactSize count, then that many 33-byte compressed points, ascending.

/// The feature bit (odd: optional) by which a gateway says it serves tweaks, and a client
/// that it may ask for them.
pub const TWEAKS_FEATURE: usize = 269;

/// Bytes of one tweak: a compressed secp256k1 point.
pub const TWEAK_LEN: usize = 33;
