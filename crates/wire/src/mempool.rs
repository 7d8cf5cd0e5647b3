//! Mempool messages: a gateway streams to a subscribed client a private digest of the
//! transactions that enter and leave its node's mempool, and hands over one transaction
//! when asked, in BOLT 1's custom range (docs/PROTOCOL.md gives the layout byte by byte,
//! the digest's set and the rules for each side). A gateway offers them with the odd
//! feature bit [`MEMPOOL_FEATURE`].
//!
//! - `mempool_subscribe` (32797): `[16] salt, u8 flags` (bit 0: `snapshot`, every
//!   transaction held now first; bit 1: `tweaks`, each transaction's BIP352 tweak too,
//!   from a gateway that serves tweaks).
//! - `mempool_digest` (32799): `u8 flags` (bit 0: `reset`, forget every transaction this
//!   gateway said it holds; bit 1: `snapshot_end`, the snapshot asked for is whole with
//!   these entries), `u16 count`, then `count` entries: `u8 kind, [32] txid`, and
//!   for kind 0 (`added`) `u16 len` and the transaction's set (`len` bytes: a BIP158
//!   Golomb-coded set keyed by the salt), for kind 1 (`removed`) `u8 reason` (0 mined, 1
//!   replaced, 2 evicted, 3 conflicted), for kind 2 (`added` with its tweak) `[33] tweak`
//!   (a compressed point's coding: `02` or `03` first), then as kind 0.
//! - `get_mempool_tx` (32801): `u32 id, [32] txid`.
//! - `mempool_tx` (32803): `u32 id, u8 flags` (bit 0: `not_found`), then the transaction
//!   (with its witness data), at most [`crate::MAX_TX_LEN`] bytes; nothing when not found.
//!
//! The set's bytes stay opaque here (lightwire-filter codes and matches it).

use crate::cursor::{Reader, Writer};
use crate::error::{DecodeError, EncodeError, MempoolError};
use crate::message::{MAX_MESSAGE_LEN, TYPE_LEN};
use crate::relay::MAX_TX_LEN;
use crate::sync::HASH_LEN;
use crate::tweaks::TWEAK_LEN;

/// The feature bit (odd: optional) by which a gateway says it serves the mempool digest,
/// and a client that it may subscribe.
pub const MEMPOOL_FEATURE: usize = 265;
/// Bytes of a salt.
pub const SALT_LEN: usize = 16;
/// Bytes of a `mempool_digest` payload before its entries.
const DIGEST_FIXED: usize = 1 + 2;
/// Bytes of an entry before its set (kind, txid, set length).
const ADDED_FIXED: usize = 1 + HASH_LEN + 2;
/// Bytes of a removal.
const REMOVED_LEN: usize = 1 + HASH_LEN + 1;

const SNAPSHOT: u8 = 1;
const TWEAKS: u8 = 2;
const RESET: u8 = 1;
const SNAPSHOT_END: u8 = 2;
const NOT_FOUND: u8 = 1;
const ADDED: u8 = 0;
const REMOVED: u8 = 1;
const ADDED_TWEAKED: u8 = 2;

/// `mempool_subscribe` (32797): stream the digest to me, with this salt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MempoolSubscribe {
    /// The key of every set the gateway sends this connection (chosen at random by the
    /// client, once per connection).
    pub salt: [u8; SALT_LEN],
    /// Send every transaction held now first.
    pub snapshot: bool,
    /// Send each transaction's BIP352 tweak with it, where it has one (a gateway that does
    /// not serve tweaks sends none).
    pub tweaks: bool,
}

impl MempoolSubscribe {
    /// The message type.
    pub const TYPE: u16 = 32797;

    /// Decodes a payload.
    pub fn decode_payload(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let salt = *r.read_array::<SALT_LEN>("salt")?;
        let flags = r.read_u8("flags")?;
        Ok(MempoolSubscribe {
            salt,
            snapshot: flags & SNAPSHOT != 0,
            tweaks: flags & TWEAKS != 0,
        })
    }

    /// Payload length.
    pub const fn payload_len(&self) -> usize {
        SALT_LEN + 1
    }

    /// Writes the payload.
    pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.write_bytes(&self.salt)?;
        w.write_u8(if self.snapshot { SNAPSHOT } else { 0 } | if self.tweaks { TWEAKS } else { 0 })
    }
}

/// Why a transaction left a gateway's mempool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// A block mined it.
    Mined,
    /// Another spending one of the same outputs replaced it in the mempool.
    Replaced,
    /// The gateway or its node let it go (the mempool full, or too old).
    Evicted,
    /// A block holds a transaction spending one of the outputs it spends.
    Conflicted,
}

impl Removal {
    /// Its code on the wire.
    pub const fn code(self) -> u8 {
        match self {
            Removal::Mined => 0,
            Removal::Replaced => 1,
            Removal::Evicted => 2,
            Removal::Conflicted => 3,
        }
    }

    /// From its code; an unknown code reads as [`Removal::Evicted`] (gone, for a reason
    /// this client does not know).
    pub const fn from_code(c: u8) -> Removal {
        match c {
            0 => Removal::Mined,
            1 => Removal::Replaced,
            3 => Removal::Conflicted,
            _ => Removal::Evicted,
        }
    }
}

/// One entry of a digest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DigestEntry<'a> {
    /// A transaction entered the mempool: its set (output scripts and spent outpoints).
    Added {
        /// Its txid (internal byte order).
        txid: &'a [u8; HASH_LEN],
        /// Its set, keyed by the connection's salt.
        set: &'a [u8],
        /// Its BIP352 tweak, when the subscription asked for tweaks and it has one (`02`
        /// or `03` first; whether it is a point is not checked here).
        tweak: Option<&'a [u8; TWEAK_LEN]>,
    },
    /// A transaction left it.
    Removed {
        /// Its txid.
        txid: &'a [u8; HASH_LEN],
        /// Why.
        reason: Removal,
    },
}

/// `mempool_digest` (32799): entries, checked whole when decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MempoolDigest<'a> {
    /// Forget every transaction this gateway said it holds (before these entries).
    pub reset: bool,
    /// The snapshot asked for is whole with these entries: what it did not list, the
    /// gateway does not hold.
    pub snapshot_end: bool,
    /// How many entries.
    pub count: u16,
    /// The entries, coded.
    entries: &'a [u8],
}

impl<'a> MempoolDigest<'a> {
    /// The message type.
    pub const TYPE: u16 = 32799;

    /// Decodes a payload: every entry must be whole and of a known kind, and nothing may
    /// follow the last.
    pub fn decode_payload(payload: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let flags = r.read_u8("flags")?;
        let count = r.read_u16("count")?;
        let entries = r.take_rest();
        let digest = MempoolDigest {
            reset: flags & RESET != 0,
            snapshot_end: flags & SNAPSHOT_END != 0,
            count,
            entries,
        };
        // Counted wide: a payload longer than a frame (a caller's, not a peer's) may hold
        // more than 65,535 entries, which must be a mismatch, not an overflow.
        let mut n = 0u32;
        let mut it = digest.walk();
        while let Some(entry) = it.next_entry() {
            entry.map_err(DecodeError::Mempool)?;
            n += 1;
        }
        if n != u32::from(count) || !it.0.is_empty() {
            return Err(DecodeError::Mempool(MempoolError::CountMismatch { count }));
        }
        Ok(digest)
    }

    /// The entries, in order.
    pub fn entries(&self) -> impl Iterator<Item = DigestEntry<'a>> + use<'a> {
        let mut it = self.walk();
        core::iter::from_fn(move || it.next_entry()?.ok())
    }

    fn walk(&self) -> Walk<'a> {
        Walk(self.entries)
    }

    /// Payload length.
    pub const fn payload_len(&self) -> usize {
        DIGEST_FIXED + self.entries.len()
    }

    /// Writes the payload.
    pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        let flags =
            if self.reset { RESET } else { 0 } | if self.snapshot_end { SNAPSHOT_END } else { 0 };
        w.write_u8(flags)?;
        w.write_u16(self.count)?;
        w.write_bytes(self.entries)
    }
}

/// A reader over coded entries, one at a time.
struct Walk<'a>(&'a [u8]);

impl<'a> Walk<'a> {
    fn next_entry(&mut self) -> Option<Result<DigestEntry<'a>, MempoolError>> {
        if self.0.is_empty() {
            return None;
        }
        let mut r = Reader::new(self.0);
        let entry = (|| {
            let truncated = |_| MempoolError::Truncated;
            let kind = r.read_u8("kind").map_err(truncated)?;
            let txid = r.read_array::<HASH_LEN>("txid").map_err(truncated)?;
            match kind {
                ADDED | ADDED_TWEAKED => {
                    let tweak = if kind == ADDED_TWEAKED {
                        let t = r.read_array::<TWEAK_LEN>("tweak").map_err(truncated)?;
                        if t[0] != 2 && t[0] != 3 {
                            return Err(MempoolError::BadTweak);
                        }
                        Some(t)
                    } else {
                        None
                    };
                    let len = r.read_u16("len").map_err(truncated)?;
                    let set = r.read_bytes(len.into(), "set").map_err(truncated)?;
                    Ok(DigestEntry::Added { txid, set, tweak })
                }
                REMOVED => {
                    let reason = Removal::from_code(r.read_u8("reason").map_err(truncated)?);
                    Ok(DigestEntry::Removed { txid, reason })
                }
                kind => Err(MempoolError::UnknownKind { kind }),
            }
        })();
        self.0 = match entry {
            Ok(_) => r.take_rest(),
            Err(_) => &[],
        };
        Some(entry)
    }
}

/// Writes a `mempool_digest` straight into a frame buffer's body, entry by entry, as many
/// as fit.
pub struct DigestWriter<'o> {
    out: &'o mut [u8],
    pos: usize,
    count: u16,
}

impl<'o> DigestWriter<'o> {
    /// Starts a digest at the start of `out` (at most 65,535 bytes of it are used).
    pub fn new(out: &'o mut [u8], reset: bool) -> Result<Self, EncodeError> {
        let limit = out.len().min(MAX_MESSAGE_LEN);
        let start = TYPE_LEN + DIGEST_FIXED;
        if limit < start + REMOVED_LEN.max(ADDED_FIXED) {
            return Err(EncodeError::BufferTooSmall {
                needed: start + ADDED_FIXED,
                available: out.len(),
            });
        }
        out[..2].copy_from_slice(&MempoolDigest::TYPE.to_be_bytes());
        out[2] = if reset { RESET } else { 0 };
        Ok(DigestWriter {
            out: &mut out[..limit],
            pos: start,
            count: 0,
        })
    }

    /// Adds an `added` entry, with the transaction's tweak when given (kind 2); `false`
    /// (nothing written) when it does not fit.
    pub fn added(
        &mut self,
        txid: &[u8; HASH_LEN],
        set: &[u8],
        tweak: Option<&[u8; TWEAK_LEN]>,
    ) -> bool {
        let extra = if tweak.is_some() { TWEAK_LEN } else { 0 };
        let len = ADDED_FIXED + extra + set.len();
        if set.len() > usize::from(u16::MAX) || !self.room(len) {
            return false;
        }
        let o = &mut self.out[self.pos..self.pos + len];
        o[0] = if tweak.is_some() {
            ADDED_TWEAKED
        } else {
            ADDED
        };
        o[1..33].copy_from_slice(txid);
        if let Some(t) = tweak {
            o[33..33 + TWEAK_LEN].copy_from_slice(t);
        }
        let o = &mut o[33 + extra..];
        o[..2].copy_from_slice(&(set.len() as u16).to_be_bytes());
        o[2..].copy_from_slice(set);
        self.pos += len;
        self.count += 1;
        true
    }

    /// Adds a `removed` entry; `false` (nothing written) when it does not fit.
    pub fn removed(&mut self, txid: &[u8; HASH_LEN], reason: Removal) -> bool {
        if !self.room(REMOVED_LEN) {
            return false;
        }
        let o = &mut self.out[self.pos..self.pos + REMOVED_LEN];
        o[0] = REMOVED;
        o[1..33].copy_from_slice(txid);
        o[33] = reason.code();
        self.pos += REMOVED_LEN;
        self.count += 1;
        true
    }

    fn room(&self, len: usize) -> bool {
        self.out.len() - self.pos >= len && self.count < u16::MAX
    }

    /// Say the snapshot asked for is whole with this message.
    pub fn end_snapshot(&mut self) {
        self.out[2] |= SNAPSHOT_END;
    }

    /// Entries written so far.
    pub const fn count(&self) -> u16 {
        self.count
    }

    /// Ends the message: its length.
    pub fn finish(self) -> usize {
        self.out[3..5].copy_from_slice(&self.count.to_be_bytes());
        self.pos
    }
}

/// `get_mempool_tx` (32801): the transaction whose txid is `txid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GetMempoolTx {
    /// Chosen by the client, echoed in the answer.
    pub id: u32,
    /// The transaction wanted (internal byte order).
    pub txid: [u8; HASH_LEN],
}

impl GetMempoolTx {
    /// The message type.
    pub const TYPE: u16 = 32801;

    /// Decodes a payload.
    pub fn decode_payload(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        Ok(GetMempoolTx {
            id: r.read_u32("id")?,
            txid: *r.read_array::<HASH_LEN>("txid")?,
        })
    }

    /// Payload length.
    pub const fn payload_len(&self) -> usize {
        4 + HASH_LEN
    }

    /// Writes the payload.
    pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.write_u32(self.id)?;
        w.write_bytes(&self.txid)
    }
}

/// `mempool_tx` (32803): the answer to `get_mempool_tx`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MempoolTx<'a> {
    /// The request answered.
    pub id: u32,
    /// The gateway does not hold it (the transaction is empty).
    pub not_found: bool,
    /// The transaction, with its witness data.
    pub tx: &'a [u8],
}

impl<'a> MempoolTx<'a> {
    /// The message type.
    pub const TYPE: u16 = 32803;

    /// Decodes a payload: `not_found` with a transaction, an empty one without it, and
    /// one over [`MAX_TX_LEN`] are refused.
    pub fn decode_payload(payload: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let id = r.read_u32("id")?;
        let not_found = r.read_u8("flags")? & NOT_FOUND != 0;
        let tx = r.take_rest();
        if not_found != tx.is_empty() || tx.len() > MAX_TX_LEN {
            return Err(DecodeError::Mempool(MempoolError::BadAnswer { id }));
        }
        Ok(MempoolTx { id, not_found, tx })
    }

    /// The answer for a transaction the gateway does not hold.
    pub const fn not_found(id: u32) -> MempoolTx<'static> {
        MempoolTx {
            id,
            not_found: true,
            tx: &[],
        }
    }

    /// Payload length.
    pub const fn payload_len(&self) -> usize {
        4 + 1 + self.tx.len()
    }

    /// Writes the payload.
    pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.write_u32(self.id)?;
        w.write_u8(if self.not_found { NOT_FOUND } else { 0 })?;
        w.write_bytes(self.tx)
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::message::Message;

    #[test]
    fn mempool_messages_round_trip() {
        let mut out = [0u8; 70_000];
        for (snapshot, tweaks) in [(true, false), (false, true), (true, true)] {
            let m = Message::MempoolSubscribe(MempoolSubscribe {
                salt: [7; 16],
                snapshot,
                tweaks,
            });
            let n = m.encode(&mut out).unwrap();
            assert_eq!(&out[..2], &[0x80, 0x1d]);
            assert_eq!(out[n - 1], u8::from(snapshot) | u8::from(tweaks) << 1);
            assert_eq!(Message::decode(&out[..n]), Ok(m));
        }
        let m = Message::GetMempoolTx(GetMempoolTx {
            id: 3,
            txid: [1; 32],
        });
        let n = m.encode(&mut out).unwrap();
        assert_eq!(Message::decode(&out[..n]), Ok(m));
        for m in [
            MempoolTx {
                id: 4,
                not_found: false,
                tx: &[9; 300],
            },
            MempoolTx::not_found(5),
        ] {
            let n = Message::MempoolTx(m).encode(&mut out).unwrap();
            assert_eq!(Message::decode(&out[..n]), Ok(Message::MempoolTx(m)));
        }
        // Found without a transaction, or not found with one: refused.
        assert!(Message::decode(&[0x80, 0x23, 0, 0, 0, 1, 0]).is_err());
        assert!(Message::decode(&[0x80, 0x23, 0, 0, 0, 1, 1, 5]).is_err());
    }

    /// A payload longer than any frame (a caller's) with 65,536 entries and a count of
    /// 0: a mismatch, where a 16-bit tally overflowed (a panic with overflow checks on,
    /// count 0 taken for 65,536 entries without). Found by the `message` fuzz target's
    /// reference decoder.
    #[test]
    fn more_entries_than_a_count_can_say_are_a_mismatch() {
        let mut payload = vec![0u8, 0, 0];
        for _ in 0..65_536 {
            payload.push(REMOVED);
            payload.extend_from_slice(&[3; HASH_LEN]);
            payload.push(0);
        }
        assert_eq!(
            MempoolDigest::decode_payload(&payload),
            Err(DecodeError::Mempool(MempoolError::CountMismatch {
                count: 0
            }))
        );
    }

    #[test]
    fn a_digest_is_written_entry_by_entry_and_checked_whole() {
        let mut out = [0u8; 65_535];
        let mut w = DigestWriter::new(&mut out, true).unwrap();
        let mut tweak = [9u8; 33];
        tweak[0] = 3;
        assert!(w.added(&[1; 32], &[4, 0xaa, 0xbb], None));
        assert!(w.removed(&[2; 32], Removal::Replaced));
        assert!(w.added(&[3; 32], &[], None));
        assert!(w.added(&[4; 32], &[1, 0x11], Some(&tweak)));
        w.end_snapshot();
        let n = w.finish();
        let Ok(Message::MempoolDigest(d)) = Message::decode(&out[..n]) else {
            panic!("a digest")
        };
        assert!(d.reset && d.snapshot_end);
        let entries: Vec<_> = d.entries().collect();
        assert_eq!(
            entries,
            [
                DigestEntry::Added {
                    txid: &[1; 32],
                    set: &[4, 0xaa, 0xbb],
                    tweak: None,
                },
                DigestEntry::Removed {
                    txid: &[2; 32],
                    reason: Removal::Replaced
                },
                DigestEntry::Added {
                    txid: &[3; 32],
                    set: &[],
                    tweak: None,
                },
                DigestEntry::Added {
                    txid: &[4; 32],
                    set: &[1, 0x11],
                    tweak: Some(&tweak),
                },
            ]
        );
        let mut again = [0u8; 65_535];
        let m = Message::MempoolDigest(d).encode(&mut again).unwrap();
        assert_eq!(again[..m], out[..n]);
        // Cut anywhere inside an entry, a count that lies, an unknown kind, bytes after
        // the last: refused.
        for cut in 6..n {
            assert!(Message::decode(&out[..cut]).is_err(), "cut at {cut}");
        }
        let mut lie = out;
        lie[4] = 5;
        assert!(Message::decode(&lie[..n]).is_err());
        let mut kind = out;
        kind[5] = 9;
        assert!(Message::decode(&kind[..n]).is_err());
        assert!(Message::decode(&out[..n + 1]).is_err());
        // A tweak that does not start as a compressed point: refused.
        let at = n - 2 - 2 - 33;
        assert_eq!(out[at], 3);
        for first in [0u8, 4, 0xff] {
            let mut bad = out;
            bad[at] = first;
            assert_eq!(
                Message::decode(&bad[..n]),
                Err(DecodeError::Mempool(MempoolError::BadTweak))
            );
        }
        // Full: an entry that does not fit is not written.
        let mut w = DigestWriter::new(&mut out[..200], false).unwrap();
        assert!(w.added(&[1; 32], &[0; 100], None));
        assert!(!w.added(&[1; 32], &[0; 100], None));
        assert!(w.removed(&[2; 32], Removal::Evicted));
        assert_eq!(w.count(), 2);
        assert_eq!(Removal::from_code(77), Removal::Evicted);
    }
}
