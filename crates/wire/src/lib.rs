//! The BOLT 1 message layer: framing by a `u16` message type, TLV streams, the setup and
//! control messages `init`, `error`, `warning`, `ping` and `pong`, and lightwire's
//! header-sync messages `get_headers`, `headers` and `tip` ([`sync`]), and the negotiated
//! `headers_compact` ([`compact`]), the compact block filter messages ([`filters`]), the
//! block messages ([`blocks`]), transaction relay ([`relay`]) and the mempool digest
//! ([`mempool`]).
//!
//! Sans-IO and allocation-free: [`Message::decode`] borrows every variable-length field
//! from the input (the decrypted body in the transport's receive buffer), and
//! [`Message::encode`] writes straight into a caller's buffer (the body region of a frame
//! buffer) and returns the length written. Nothing here panics on bytes from a peer: all
//! reads go through the checked [`Reader`], all writes through the checked [`Writer`],
//! and every broken rule is its own error variant ([`DecodeError`], [`TlvError`],
//! [`EncodeError`]).
//!
//! What BOLT 1 asks of a receiver, and where it lives:
//! * unknown odd message types are [`Message::Unknown`] (ignore them); unknown even ones
//!   are [`DecodeError::UnknownEvenType`] (close the connection);
//! * unknown even feature bits: [`Init::first_unknown_required_feature`] over the union of
//!   both feature fields (close the connection if it returns `Some`);
//! * `networks`: [`Init::accepts_chain`];
//! * `ping`: [`Ping::pong_len`] and [`Ping::encode_pong`] (no reply at 65532 and above);
//! * `error`/`warning` text: [`ErrorMessage::data_utf8`], printable ASCII only.
//!
//! The crate is `no_std`; its one dependency is thiserror, whose derive writes the error
//! types' `Display` and `Error` impls.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(all(test, target_arch = "wasm32"))]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

pub mod bigsize;
pub mod blocks;
pub mod compact;
mod cursor;
mod error;
mod error_message;
pub mod features;
pub mod fees;
pub mod filters;
mod init;
pub mod mempool;
mod message;
mod ping;
pub mod relay;
pub mod sync;
pub mod tlv;
pub mod tweaks;

#[cfg(test)]
mod test_util;

pub use bigsize::BigSizeError;
pub use blocks::{
    BLOCKS_FEATURE, BlockKind, BlockPiece, GetBlock, MAX_BLOCK_LEN, MAX_BLOCK_PIECE,
    MAX_SPENT_FROM_LEN,
};
pub use compact::{COMPACT_HEADERS_FEATURE, HeadersCompact, MAX_COMPACT_HEADERS_PER_MESSAGE};
pub use cursor::{Reader, Truncated, Writer};
pub use error::{
    BlocksError, CompactError, DecodeError, EncodeError, FiltersError, MempoolError, TlvError,
};
pub use error_message::{ALL_CHANNELS, ChannelId, ErrorMessage, Warning, printable};
pub use features::{CombinedFeatures, Features, SetBits};
pub use fees::{FEE_TARGETS, FEES_FEATURE, FeeRates, FeeSource, GetFeeRates};
pub use filters::{
    AnswerFlags, FILTERS_FEATURE, FilterCheckpoints, FilterHeaders, FilterKind, FilterPiece,
    FilterRange, Filters, FiltersWriter, GetFilterCheckpoints, GetFilterHeaders, GetFilters,
};
pub use init::{
    CHAIN_HASH_LEN, ChainHash, ChainHashes, Init, InitRefusal, NETWORKS_TLV, Networks,
    REMOTE_ADDR_TLV,
};
pub use mempool::{
    DigestEntry, DigestWriter, GetMempoolTx, MEMPOOL_FEATURE, MempoolDigest, MempoolSubscribe,
    MempoolTx, Removal, SALT_LEN,
};
pub use message::{MAX_MESSAGE_LEN, Message, TYPE_LEN, msg_type};
pub use ping::{NO_PONG_THRESHOLD, Ping, Pong};
pub use relay::{MAX_TX_LEN, RELAY_FEATURE, RelayStatus, SendTx, TxResult};
pub use sync::{GetHeaders, Headers, Tip};
pub use tlv::{TlvRecord, TlvStream, TlvWriter};
pub use tweaks::{TWEAK_LEN, TWEAKS_FEATURE};
