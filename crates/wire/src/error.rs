//! Error types. Each variant names the BOLT 1 rule that was broken.

use crate::cursor::Truncated;

/// A message could not be decoded. Per BOLT 1 each of these means the receiver must close
/// the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A known message is too short for one of its fields.
    #[error("message truncated: field `{field}` needs {needed} bytes but {available} remain")]
    Truncated {
        /// The field that did not fit.
        field: &'static str,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes that were left.
        available: usize,
    },
    /// A message of an even type this crate does not know ("it's ok to be odd" does not
    /// cover it).
    #[error("unknown even message type {ty} (unknown even types must close the connection)")]
    UnknownEvenType {
        /// The message type.
        ty: u16,
    },
    /// A message's TLV stream broke a TLV rule.
    #[error("invalid TLV stream in message type {msg_type}: {error}")]
    InvalidTlvStream {
        /// The type of the message carrying the stream.
        msg_type: u16,
        /// The rule that was broken.
        #[source]
        error: TlvError,
    },
    /// A `headers_compact` message broke its coding.
    #[error("invalid headers_compact: {0}")]
    Compact(#[source] CompactError),
    /// A filter message broke its coding.
    #[error("invalid filter message: {0}")]
    Filters(#[source] FiltersError),
    /// A `block` message broke its coding.
    #[error("invalid block message: {0}")]
    Blocks(#[source] BlocksError),
    /// A mempool message broke its coding.
    #[error("invalid mempool message: {0}")]
    Mempool(#[source] MempoolError),
}

/// A mempool message broke a rule of its coding (docs/PROTOCOL.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MempoolError {
    /// A digest entry ends early.
    #[error("a digest entry is cut short")]
    Truncated,
    /// A digest entry of a kind this client does not know.
    #[error("a digest entry of unknown kind {kind}")]
    UnknownKind {
        /// The kind given.
        kind: u8,
    },
    /// A digest whose entries are not as many as it says, or with bytes after the last.
    #[error("a digest that says {count} entries holds another number")]
    CountMismatch {
        /// The count given.
        count: u16,
    },
    /// A digest entry's tweak that does not start as a compressed point (`02` or `03`).
    #[error("a digest entry's tweak is not a compressed point's coding")]
    BadTweak,
    /// A `mempool_tx` found without a transaction, not found with one, or over the limit.
    #[error("mempool_tx answering {id} is neither a transaction nor not_found")]
    BadAnswer {
        /// The request answered.
        id: u32,
    },
}

/// A `block` message broke a rule of its coding (docs/PROTOCOL.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BlocksError {
    /// A block longer than a receiver takes.
    #[error("a block of {len} bytes, over the limit")]
    BlockTooLong {
        /// The length given.
        len: u32,
    },
    /// A piece past the block's end, or empty.
    #[error("a piece of {len} bytes at {offset} does not lie within its block")]
    PieceOutOfRange {
        /// Where it starts.
        offset: u32,
        /// Its length.
        len: usize,
    },
    /// `last` on a piece that does not reach the block's end, or missing on one that does.
    #[error(
        "the piece at {offset}: the last flag must be set exactly on the piece that ends the block"
    )]
    LastMisplaced {
        /// Where the piece starts.
        offset: u32,
    },
    /// `not_found` must come alone: with `last`, no length and no piece.
    #[error("not_found with a block, or without last")]
    NotFoundWithBlock,
}

/// A filter message (`filter_headers`, `filter_checkpoints`, `filters`) broke a rule of its
/// coding (docs/PROTOCOL.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FiltersError {
    /// More filter hashes than one message can hold.
    #[error("{count} filter hashes: more than one message can hold")]
    TooMany {
        /// The count given.
        count: u16,
    },
    /// `segments` must be 1 to 4 and at most `count`, and 0 exactly when `count` is.
    #[error("{segments} segments for {count} filter hashes")]
    Segments {
        /// The segments given.
        segments: u8,
        /// The count given.
        count: u16,
    },
    /// Checkpoints are at multiples of 1,000.
    #[error("a filter checkpoint at height {height}, not a multiple of 1,000")]
    CheckpointHeight {
        /// The height given.
        height: u32,
    },
    /// A filter longer than a receiver takes.
    #[error("the filter of height {height} is {len} bytes, over the limit")]
    FilterTooLong {
        /// The block's height.
        height: u32,
        /// The length given.
        len: u32,
    },
    /// A piece past its filter's end, or empty while its filter is not.
    #[error("piece {index} does not lie within its filter")]
    PieceOutOfRange {
        /// The piece's index in the message.
        index: u16,
    },
    /// Bytes after the last piece.
    #[error("{len} bytes after the last piece")]
    TrailingBytes {
        /// How many.
        len: usize,
    },
}

/// A `headers_compact` message broke a rule of its coding (docs/PROTOCOL.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompactError {
    /// More headers than one message can hold.
    #[error("{count} headers: more than one message can hold")]
    TooMany {
        /// The count given.
        count: u16,
    },
    /// `segments` must be 1 to 4 and at most `count`, and 0 exactly when `count` is.
    #[error("{segments} segments for {count} headers")]
    Segments {
        /// The segments given.
        segments: u8,
        /// The count given.
        count: u16,
    },
    /// A header's flags set a reserved bit or the reserved time form.
    #[error("header {index} sets a reserved flag")]
    ReservedBits {
        /// The header's index in the message.
        index: u16,
    },
    /// The first header must carry version, nBits and an absolute time.
    #[error("the first header is not coded in full")]
    FirstNotInFull,
    /// A time delta carries past the range of `u32`.
    #[error("header {index}'s time is out of range")]
    TimeOutOfRange {
        /// The header's index in the message.
        index: u16,
    },
    /// Bytes after the last header.
    #[error("{len} bytes after the last header")]
    TrailingBytes {
        /// How many.
        len: usize,
    },
}

impl From<Truncated> for DecodeError {
    fn from(t: Truncated) -> Self {
        DecodeError::Truncated {
            field: t.field,
            needed: t.needed,
            available: t.available,
        }
    }
}

/// A TLV stream broke one of BOLT 1's TLV rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TlvError {
    /// A record's BigSize `type` or `length` is cut off by the end of the stream.
    #[error("TLV record {field} truncated: BigSize needs {needed} bytes but {available} remain")]
    Truncated {
        /// `"type"` or `"length"`.
        field: &'static str,
        /// Bytes the BigSize needs.
        needed: usize,
        /// Bytes that were left.
        available: usize,
    },
    /// A BigSize `type` or `length` was not minimally encoded.
    #[error("TLV record {field} is not a minimally encoded BigSize")]
    NonMinimalBigSize {
        /// `"type"` or `"length"`.
        field: &'static str,
    },
    /// Record types must strictly increase (which also forbids repeats).
    #[error("TLV type {ty} follows type {prev}: types must be strictly increasing")]
    NotStrictlyIncreasing {
        /// The previous record's type.
        prev: u64,
        /// This record's type.
        ty: u64,
    },
    /// A record of an even type the reader does not know.
    #[error("unknown even TLV type {ty} (unknown even types must fail the stream)")]
    UnknownEvenType {
        /// The record type.
        ty: u64,
    },
    /// A record's `length` runs past the end of the stream.
    #[error("TLV type {ty} declares length {len} but only {remaining} bytes remain")]
    LengthExceedsStream {
        /// The record type.
        ty: u64,
        /// The declared length.
        len: u64,
        /// Bytes left in the stream after the length.
        remaining: usize,
    },
    /// A known record's value has a length its encoding does not allow.
    #[error("TLV type {ty} has a value of {len} bytes; its length must be {expected}")]
    InvalidLength {
        /// The record type.
        ty: u64,
        /// The value's length.
        len: usize,
        /// What the encoding requires, e.g. `"a multiple of 32"`.
        expected: &'static str,
    },
}

/// A message could not be encoded into the buffer given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The output buffer is too small.
    #[error("output buffer too small: need {needed} bytes, have {available}")]
    BufferTooSmall {
        /// Bytes the encoding needs (from the start of the buffer).
        needed: usize,
        /// Size of the buffer.
        available: usize,
    },
    /// A field is longer than its `u16` length prefix can say.
    #[error("field `{field}` is {len} bytes, longer than its limit of {max}")]
    FieldTooLong {
        /// The field.
        field: &'static str,
        /// Its length.
        len: usize,
        /// The longest it may be.
        max: usize,
    },
    /// The message would be longer than the 65,535 bytes a transport frame can carry.
    #[error("message is {len} bytes, longer than the {max} a transport frame can carry")]
    MessageTooLong {
        /// Its length, type included.
        len: usize,
        /// The longest a message may be.
        max: usize,
    },
    /// TLV records were written out of order or repeated.
    #[error("TLV type {ty} written after type {prev}: types must be strictly increasing")]
    TlvNotStrictlyIncreasing {
        /// The previous record's type.
        prev: u64,
        /// The record being written.
        ty: u64,
    },
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use core::error::Error;

    #[test]
    fn display_names_the_rule() {
        let cases: [(&dyn Error, &str); 10] = [
            (
                &DecodeError::Truncated {
                    field: "gflen",
                    needed: 2,
                    available: 1,
                },
                "message truncated: field `gflen` needs 2 bytes but 1 remain",
            ),
            (
                &DecodeError::UnknownEvenType { ty: 32 },
                "unknown even message type 32 (unknown even types must close the connection)",
            ),
            (
                &DecodeError::InvalidTlvStream {
                    msg_type: 16,
                    error: TlvError::UnknownEvenType { ty: 2 },
                },
                "invalid TLV stream in message type 16: unknown even TLV type 2 \
                 (unknown even types must fail the stream)",
            ),
            (
                &TlvError::Truncated {
                    field: "type",
                    needed: 3,
                    available: 2,
                },
                "TLV record type truncated: BigSize needs 3 bytes but 2 remain",
            ),
            (
                &TlvError::NonMinimalBigSize { field: "length" },
                "TLV record length is not a minimally encoded BigSize",
            ),
            (
                &TlvError::NotStrictlyIncreasing { prev: 3, ty: 1 },
                "TLV type 1 follows type 3: types must be strictly increasing",
            ),
            (
                &TlvError::LengthExceedsStream {
                    ty: 1,
                    len: 32,
                    remaining: 4,
                },
                "TLV type 1 declares length 32 but only 4 bytes remain",
            ),
            (
                &TlvError::InvalidLength {
                    ty: 1,
                    len: 33,
                    expected: "a multiple of 32",
                },
                "TLV type 1 has a value of 33 bytes; its length must be a multiple of 32",
            ),
            (
                &EncodeError::BufferTooSmall {
                    needed: 10,
                    available: 4,
                },
                "output buffer too small: need 10 bytes, have 4",
            ),
            (
                &EncodeError::TlvNotStrictlyIncreasing { prev: 3, ty: 3 },
                "TLV type 3 written after type 3: types must be strictly increasing",
            ),
        ];
        for (err, text) in cases {
            assert_eq!(err.to_string(), text);
        }
        assert_eq!(
            EncodeError::FieldTooLong {
                field: "data",
                len: 70000,
                max: 65535
            }
            .to_string(),
            "field `data` is 70000 bytes, longer than its limit of 65535"
        );
        assert_eq!(
            EncodeError::MessageTooLong {
                len: 70000,
                max: 65535
            }
            .to_string(),
            "message is 70000 bytes, longer than the 65535 a transport frame can carry"
        );
    }

    #[test]
    fn tlv_error_is_the_source() {
        let tlv = TlvError::NonMinimalBigSize { field: "type" };
        let err = DecodeError::InvalidTlvStream {
            msg_type: 16,
            error: tlv,
        };
        let source = err.source().expect("the TLV error is the source");
        assert_eq!(source.downcast_ref::<TlvError>(), Some(&tlv));
        assert_eq!(source.to_string(), tlv.to_string());
        // The chain ends there.
        assert!(source.source().is_none());

        let leaves: [&dyn Error; 4] = [
            &DecodeError::UnknownEvenType { ty: 2 },
            &DecodeError::Truncated {
                field: "gflen",
                needed: 2,
                available: 1,
            },
            &TlvError::UnknownEvenType { ty: 2 },
            &EncodeError::BufferTooSmall {
                needed: 10,
                available: 4,
            },
        ];
        for e in leaves {
            assert!(e.source().is_none(), "{e}");
        }
    }
}
