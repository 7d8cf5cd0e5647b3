//! Block messages: a client asks a gateway for one block by hash and gets it back in
//! pieces, in BOLT 1's custom range (docs/PROTOCOL.md gives the layout byte by byte and the
//! rules for each side). A gateway offers them with the odd feature bit [`BLOCKS_FEATURE`].
//!
//! - `get_block` (32789): `u32 id, [32] block_hash`.
//! - `block` (32791): `u32 id, u8 flags, u32 block_len, u32 offset`, then the piece: the
//!   rest of the message, `block[offset..offset + len]`. Pieces come in order, each
//!   starting where the last ended; the one that reaches `block_len` has the `last` flag.
//!   A block the gateway cannot give (not on its best chain, or its node does not have it)
//!   is one message with `last` and `not_found`, `block_len` 0 and no piece.
//!
//! A block of at most [`MAX_BLOCK_LEN`] bytes (the consensus weight limit: a byte weighs at
//! least one unit) takes at most 62 messages. Block bytes stay opaque here (this crate
//! knows framing; lightwire-filter reads blocks).
//!
//! The same two layouts carry a second kind of per-block data ([`BlockKind::SpentFrom`]),
//! under their own types: the evidence that settles a dispute over a block's
//! silent-payment tweaks (`crate::tweaks`).
//!
//! - `get_spent_from` (32821): `u32 id, [32] block_hash`.
//! - `spent_from` (32823): pieces, as `block`, of a CompactSize count followed by that many
//!   transactions, serialized without witness data: those outside the block that created
//!   the outputs the block's transactions with a taproot output spend. At most
//!   [`MAX_SPENT_FROM_LEN`] bytes.

use crate::cursor::{Reader, Writer};
use crate::error::{BlocksError, DecodeError, EncodeError};
use crate::message::{MAX_MESSAGE_LEN, TYPE_LEN};
use crate::sync::HASH_LEN;

/// The feature bit (odd: optional) by which a gateway says it serves blocks, and a client
/// that it may ask for them.
pub const BLOCKS_FEATURE: usize = 261;
/// The longest block a receiver takes: 4,000,000 bytes (a block weighs at most 4,000,000
/// units and each serialized byte at least one).
pub const MAX_BLOCK_LEN: u32 = 4_000_000;
/// The longest `spent_from` a receiver takes: 32 MiB. Bounded by memory, not consensus (a
/// block's inputs may spend from transactions of up to a block's size each): a block whose
/// evidence is longer cannot have its tweaks proven by it (docs/PROTOCOL.md).
pub const MAX_SPENT_FROM_LEN: u32 = 32 << 20;

/// Which per-block data a message of the `get_block` family carries: one layout, one
/// sender and one receiver for both, the kind picking the types and the length limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockKind {
    /// The block itself: `get_block` (32789) and `block` (32791), feature 261.
    Block,
    /// The transactions the block spends from that its tweaks need: `get_spent_from`
    /// (32821) and `spent_from` (32823), feature 269 (with the tweaks).
    SpentFrom,
}

impl BlockKind {
    /// The longest answer of this kind a receiver takes.
    pub const fn max_len(self) -> u32 {
        match self {
            BlockKind::Block => MAX_BLOCK_LEN,
            BlockKind::SpentFrom => MAX_SPENT_FROM_LEN,
        }
    }
}

/// Bytes of a `block` payload before its piece.
const BLOCK_FIXED: usize = 4 + 1 + 4 + 4;
/// The most block bytes one `block` message carries.
pub const MAX_BLOCK_PIECE: usize = MAX_MESSAGE_LEN - TYPE_LEN - BLOCK_FIXED;

const LAST: u8 = 1;
const NOT_FOUND: u8 = 2;

/// `get_block` (32789): the block whose hash is `block_hash`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GetBlock {
    /// Chosen by the client, echoed in every message answering it.
    pub id: u32,
    /// The block wanted (internal byte order).
    pub block_hash: [u8; HASH_LEN],
}

impl GetBlock {
    /// The message type.
    pub const TYPE: u16 = 32789;

    /// Decodes a payload (the bytes after the type).
    pub fn decode_payload(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        Ok(GetBlock {
            id: r.read_u32("id")?,
            block_hash: *r.read_array::<HASH_LEN>("block_hash")?,
        })
    }

    /// Payload length.
    pub const fn payload_len(&self) -> usize {
        4 + HASH_LEN
    }

    /// Writes the payload.
    pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.write_u32(self.id)?;
        w.write_bytes(&self.block_hash)
    }
}

/// `block` (32791): one piece of a block (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockPiece<'a> {
    /// The request answered.
    pub id: u32,
    /// The last message answering it.
    pub last: bool,
    /// The gateway cannot give the block (a last, empty answer).
    pub not_found: bool,
    /// The whole block's length.
    pub block_len: u32,
    /// Where this piece starts in the block.
    pub offset: u32,
    /// The piece.
    pub data: &'a [u8],
}

impl<'a> BlockPiece<'a> {
    /// The message type.
    pub const TYPE: u16 = 32791;

    /// Decodes a payload, checking what one message can: a block over [`MAX_BLOCK_LEN`], a
    /// piece past the block's end or empty, `last` on a piece that does not reach the end
    /// (or missing on one that does), and `not_found` with a length or a piece are refused.
    /// (That pieces come in order is the receiver's to check: it holds the state.)
    pub fn decode_payload(payload: &'a [u8]) -> Result<Self, DecodeError> {
        Self::decode_payload_as(BlockKind::Block, payload)
    }

    /// [`Self::decode_payload`] for an answer of `kind` (its own length limit).
    pub fn decode_payload_as(kind: BlockKind, payload: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let id = r.read_u32("id")?;
        let flags = r.read_u8("flags")?;
        let block_len = r.read_u32("block_len")?;
        let offset = r.read_u32("offset")?;
        let data = r.take_rest();
        let piece = BlockPiece {
            id,
            last: flags & LAST != 0,
            not_found: flags & NOT_FOUND != 0,
            block_len,
            offset,
            data,
        };
        piece.check(kind).map_err(DecodeError::Blocks)?;
        Ok(piece)
    }

    fn check(&self, kind: BlockKind) -> Result<(), BlocksError> {
        if self.not_found {
            if !self.last || self.block_len != 0 || self.offset != 0 || !self.data.is_empty() {
                return Err(BlocksError::NotFoundWithBlock);
            }
            return Ok(());
        }
        if self.block_len > kind.max_len() {
            return Err(BlocksError::BlockTooLong {
                len: self.block_len,
            });
        }
        let end = u64::from(self.offset) + self.data.len() as u64;
        if self.data.is_empty() || end > u64::from(self.block_len) {
            return Err(BlocksError::PieceOutOfRange {
                offset: self.offset,
                len: self.data.len(),
            });
        }
        if self.last != (end == u64::from(self.block_len)) {
            return Err(BlocksError::LastMisplaced {
                offset: self.offset,
            });
        }
        Ok(())
    }

    /// The answer for a block the gateway cannot give.
    pub const fn not_found(id: u32) -> BlockPiece<'static> {
        BlockPiece {
            id,
            last: true,
            not_found: true,
            block_len: 0,
            offset: 0,
            data: &[],
        }
    }

    /// The next piece of `block` from `offset`: as much as one message carries, `last`
    /// when it reaches the end. `None` when `offset` is at or past the end.
    pub fn next(id: u32, block: &'a [u8], offset: usize) -> Option<BlockPiece<'a>> {
        let rest = block.get(offset..).filter(|r| !r.is_empty())?;
        let data = &rest[..rest.len().min(MAX_BLOCK_PIECE)];
        Some(BlockPiece {
            id,
            last: data.len() == rest.len(),
            not_found: false,
            block_len: block.len() as u32,
            offset: offset as u32,
            data,
        })
    }

    /// Whether this piece ends the block.
    pub const fn ends_block(&self) -> bool {
        self.offset as usize + self.data.len() == self.block_len as usize
    }

    /// Payload length.
    pub const fn payload_len(&self) -> usize {
        BLOCK_FIXED + self.data.len()
    }

    /// Writes the payload.
    pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.write_u32(self.id)?;
        let flags =
            (if self.last { LAST } else { 0 }) | (if self.not_found { NOT_FOUND } else { 0 });
        w.write_u8(flags)?;
        w.write_u32(self.block_len)?;
        w.write_u32(self.offset)?;
        w.write_bytes(self.data)
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::message::Message;

    fn encode(m: Message<'_>) -> std::vec::Vec<u8> {
        let mut out = std::vec![0u8; MAX_MESSAGE_LEN];
        let n = m.encode(&mut out).unwrap();
        assert_eq!(n, m.encoded_len());
        out.truncate(n);
        out
    }

    #[test]
    fn a_block_goes_in_full_pieces_then_a_last_one() {
        let get = GetBlock {
            id: 9,
            block_hash: [3; 32],
        };
        let bytes = encode(Message::GetBlock(get));
        assert_eq!(&bytes[..2], &[0x80, 0x15]);
        assert_eq!(Message::decode(&bytes), Ok(Message::GetBlock(get)));

        let block: std::vec::Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let mut offset = 0;
        let mut rebuilt = std::vec::Vec::new();
        let mut messages = 0;
        while let Some(p) = BlockPiece::next(9, &block, offset) {
            let bytes = encode(Message::Block(p));
            assert!(bytes.len() <= MAX_MESSAGE_LEN);
            let Ok(Message::Block(back)) = Message::decode(&bytes) else {
                panic!("block");
            };
            assert_eq!(back, p);
            assert_eq!(back.offset as usize, rebuilt.len());
            rebuilt.extend_from_slice(back.data);
            offset += back.data.len();
            messages += 1;
            assert_eq!(back.last, back.ends_block());
        }
        assert_eq!(rebuilt, block);
        assert_eq!(messages, block.len().div_ceil(MAX_BLOCK_PIECE));
        // A block of the largest size fits in 62 messages.
        assert_eq!((MAX_BLOCK_LEN as usize).div_ceil(MAX_BLOCK_PIECE), 62);
        let none = encode(Message::Block(BlockPiece::not_found(4)));
        assert_eq!(
            Message::decode(&none),
            Ok(Message::Block(BlockPiece::not_found(4)))
        );
    }

    #[test]
    fn pieces_that_break_a_rule_are_typed_errors() {
        let piece = |flags: u8, block_len: u32, offset: u32, data: &[u8]| {
            let mut m = std::vec![0x80, 0x17, 0, 0, 0, 1, flags];
            m.extend_from_slice(&block_len.to_be_bytes());
            m.extend_from_slice(&offset.to_be_bytes());
            m.extend_from_slice(data);
            Message::decode(&m).map(|_| ())
        };
        let err = |e| Err::<(), _>(DecodeError::Blocks(e));
        assert!(piece(0, 10, 0, &[1, 2]).is_ok());
        assert!(piece(1, 2, 0, &[1, 2]).is_ok());
        assert_eq!(
            piece(0, MAX_BLOCK_LEN + 1, 0, &[1]),
            err(BlocksError::BlockTooLong {
                len: MAX_BLOCK_LEN + 1
            })
        );
        assert_eq!(
            piece(1, 10, 9, &[1, 2]),
            err(BlocksError::PieceOutOfRange { offset: 9, len: 2 })
        );
        assert_eq!(
            piece(0, 10, 3, &[]),
            err(BlocksError::PieceOutOfRange { offset: 3, len: 0 })
        );
        assert_eq!(
            piece(1, 10, 0, &[1]),
            err(BlocksError::LastMisplaced { offset: 0 })
        );
        assert_eq!(
            piece(0, 1, 0, &[1]),
            err(BlocksError::LastMisplaced { offset: 0 })
        );
        assert_eq!(piece(3, 1, 0, &[1]), err(BlocksError::NotFoundWithBlock));
        assert_eq!(piece(2, 0, 0, &[]), err(BlocksError::NotFoundWithBlock));
        assert!(matches!(
            Message::decode(&[0x80, 0x17, 0, 0, 0, 1, 0, 0, 0]),
            Err(DecodeError::Truncated { .. })
        ));
    }

    /// `get_spent_from` and `spent_from` have the block messages' layouts under their own
    /// types, and `spent_from` takes up to 32 MiB where `block` stops at 4,000,000.
    #[test]
    fn spent_from_is_a_block_message_of_its_own_kind() {
        let get = GetBlock {
            id: 5,
            block_hash: [8; 32],
        };
        let bytes = encode(Message::GetSpentFrom(get));
        assert_eq!(&bytes[..2], &32821u16.to_be_bytes());
        assert_eq!(Message::decode(&bytes), Ok(Message::GetSpentFrom(get)));
        let data = [7u8; 100];
        let p = BlockPiece {
            id: 5,
            last: false,
            not_found: false,
            block_len: MAX_BLOCK_LEN + 1,
            offset: 0,
            data: &data,
        };
        let bytes = encode(Message::SpentFrom(p));
        assert_eq!(&bytes[..2], &32823u16.to_be_bytes());
        assert_eq!(Message::decode(&bytes), Ok(Message::SpentFrom(p)));
        let block = encode(Message::Block(p));
        assert_eq!(
            Message::decode(&block),
            Err(DecodeError::Blocks(BlocksError::BlockTooLong {
                len: MAX_BLOCK_LEN + 1
            }))
        );
        let over = BlockPiece {
            block_len: MAX_SPENT_FROM_LEN + 1,
            ..p
        };
        assert_eq!(
            Message::decode(&encode(Message::SpentFrom(over))),
            Err(DecodeError::Blocks(BlocksError::BlockTooLong {
                len: MAX_SPENT_FROM_LEN + 1
            }))
        );
        let none = encode(Message::SpentFrom(BlockPiece::not_found(5)));
        assert_eq!(
            Message::decode(&none),
            Ok(Message::SpentFrom(BlockPiece::not_found(5)))
        );
    }
}
