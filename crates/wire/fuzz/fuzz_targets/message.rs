//! `Message::decode` on arbitrary bytes: a whole message (type, then payload), as it comes
//! out of a decrypted transport frame.
//!
//! Input: the message bytes, as they are.
//!
//! Checks:
//! * The result is exactly what `reference` says: a decoder written here from the message
//!   layouts (BOLT 1 and docs/PROTOCOL.md), with the same field names in `Truncated`
//!   (`needed` = the field's size, `available` = the bytes left), `UnknownEvenType` for an
//!   even type nobody knows, and for `init` the first broken TLV rule (`ref_tlv`, then a
//!   `networks` record that is not whole chain hashes, then an unknown even record), in
//!   stream order. Every borrowed field is a slice of the input at the offsets the
//!   reference gives (so no length read ever reaches past the input). That covers every
//!   variant of `Message`, the filter, block, relay, mempool and fee messages with their
//!   typed errors: `filter_headers` (`TooMany` over 2,043, `Segments`), `filter_checkpoints`
//!   (`CheckpointHeight` off a multiple of 1,000), `filters` (each piece read whole, then
//!   `FilterTooLong` over 1 MiB, `PieceOutOfRange` past its filter or empty of a longer one,
//!   then `TrailingBytes`; `pieces()` gives the reference's pieces), the six silent-payment
//!   tweak messages (the filter messages' layouts and rules under types 32809 to 32819,
//!   decoded to their own variants: a tweak type read as a filter variant, or the other way
//!   round, is a wrong answer), `block` and `spent_from` (`NotFoundWithBlock` unless
//!   `not_found` comes alone with `last`, else `BlockTooLong` over 4,000,000 bytes for
//!   `block` and over 33,554,432 (32 MiB) for `spent_from`, `PieceOutOfRange`,
//!   `LastMisplaced`), `get_spent_from` and `spent_from` (a tweak dispute's evidence: the
//!   layouts and rules of `get_block` and `block`, but for that limit, under types 32821
//!   and 32823, decoded to their own variants: a block type read as `spent_from`, or the
//!   other way round, is a wrong answer), `mempool_digest` (entries read to the end of the
//!   message: `Truncated` within one, `UnknownKind`, then `CountMismatch`; `entries()` gives
//!   the reference's), `mempool_tx` (`BadAnswer`), and the codes that read as a default
//!   (`tx_result`'s unknown status as `busy`, an unknown removal reason as `evicted`,
//!   `fee_rates`' `u64::MAX` as no estimate). Where docs/PROTOCOL.md names a field otherwise
//!   than the crate's `Truncated` does, the crate's name is expected: a piece's `data` is
//!   `piece`, `filter_checkpoints`' `headers` is `checkpoints`, each of `rates` is `rate`.
//! * Round trip (messages of at most 65,535 bytes, as a frame carries): encoding the
//!   decoded value gives its canonical bytes (the input up to the fields' end: trailing
//!   bytes are dropped; for `init`, the input without its unknown odd TLV records; flag
//!   bits the layouts do not define are not kept, `spent_from`'s as `block`'s; an unknown
//!   `tx_result` status is written as `busy`), of `encoded_len()` bytes, the per-type
//!   `encode` (where there is one; for a tweak message `encode_as(FilterKind::Tweaks)`)
//!   agrees, and they decode to the same value. Every shorter buffer is refused with
//!   `BufferTooSmall { needed, available }`.
//!   Two kinds decode but are not encoded, as the layer above is stricter than the decoder:
//!   a `get_headers` with more than 101 locator hashes (`FieldTooLong` "locator"), and a
//!   `filter_headers` whose `segments` is not the one a gateway uses (4, or `count` when
//!   fewer: `FieldTooLong` "anchors").
//! * Helpers agree with references: feature bits and the first unknown required bit
//!   (`ref_bits`), `pong_len`/`encode_pong` (a zeroed pong of `num_pong_bytes` below
//!   65532, else nothing), `data_utf8` (printable ASCII only), `networks()`,
//!   `accepts_chain`/`require_chain`, `mirror_urls` and `encode_mirrors` (`bulk_mirrors`:
//!   u16-prefixed URLs, non-UTF-8 ones skipped, a length past the end ends the list),
//!   `Headers::count`/`iter`, `locator_hashes`, `FilterHeaders::count`/`segments`/
//!   `segment_starts`, `FilterCheckpoints::count`/`iter` (heights 1,000 apart),
//!   `FilterPiece::ends_filter` (for the tweak messages as for the filter ones),
//!   `BlockPiece::ends_block` and `not_found` (for `spent_from` as for `block`),
//!   `MempoolTx::not_found`, the status, removal and fee source codes against the tables
//!   of docs/PROTOCOL.md.
//! * `BlockPiece::decode_payload_as` with either `BlockKind`, on the bytes after the type
//!   whatever the type, gives exactly the reference's piece of that kind or its error
//!   (`decode_payload` the `Block` kind's), and `BlockKind::max_len` the layouts' limits.
//! * `headers_compact`: its expansion fails with a typed error, or holds each segment's
//!   anchor and codes back (shortest forms) to the same headers.
//! * Every error's `Display` is non-empty.
#![no_main]

use core::ops::Range;

use libfuzzer_sys::fuzz_target;
use lightwire_wire::compact::{MAX_CODED_LEN, segment_start};
use lightwire_wire::sync::{HEADER_LEN, MAX_LOCATOR};
use lightwire_wire::{
    BlockKind, BlockPiece, BlocksError, CompactError, DecodeError, DigestEntry, EncodeError,
    FeeSource, FilterKind, FiltersError, HeadersCompact, Init, InitRefusal,
    MAX_COMPACT_HEADERS_PER_MESSAGE, MAX_MESSAGE_LEN, MempoolError, MempoolTx, Message,
    NO_PONG_THRESHOLD, Pong, TlvError,
};
use lightwire_wire_fuzz::{
    KNOWN_TYPES, MAX_FILTER_HASHES, MAX_FILTER_LEN, MAX_SEGMENTS, TWEAK_TYPES, ref_bits,
    ref_block_limit, ref_first_unknown_required, ref_relay_code, ref_removal_code, ref_tlv, within,
};

// Limits as docs/PROTOCOL.md states them (not the crate's constants, which they check).
/// `filter_checkpoints`: a checkpoint every 1,000 heights.
const CHECKPOINT_INTERVAL: u32 = 1000;
/// `mempool_tx` (and `send_tx`): a transaction of at most 65,529 bytes.
const MAX_TX_LEN: usize = 65_529;
/// `tx_result` status names by code (docs/PROTOCOL.md).
const RELAY_NAMES: [&str; 7] = [
    "relayed",
    "malformed",
    "oversized",
    "not-standard",
    "no-node",
    "busy",
    "invalid",
];
/// `tx_result`: an unknown status code reads as `busy`.
const BUSY: u8 = 5;
/// `mempool_digest`: an unknown removal reason reads as `evicted`.
const EVICTED: u8 = 2;

fuzz_target!(|data: &[u8]| {
    let got = Message::decode(data);
    let want = reference(data);
    assert_eq!(
        got.map(|m| as_ref(&m, data)),
        want.clone().map(|(r, _)| r),
        "decode of {data:02x?}"
    );
    block_kinds(data);
    match got {
        Err(e) => assert!(!e.to_string().is_empty()),
        Ok(m) => {
            helpers(&m);
            if data.len() <= MAX_MESSAGE_LEN
                && let Ok((r, end)) = &want
            {
                round_trip(&m, &canonical(data, r, *end));
            }
        }
    }
});

/// The answer flags of `filter_headers`, `filter_checkpoints` and `filters`: `last`,
/// `stop_unknown`.
type Flags = (bool, bool);

/// A piece of a `filters` message: height, filter_len, offset, data.
type RefPiece = (u32, u32, u32, Range<usize>);

/// A `mempool_digest` entry: txid, tweak (kind 2) and set, or txid and the reason's code.
#[derive(Clone, Debug, PartialEq, Eq)]
enum RefEntry {
    Added(Range<usize>, Option<Range<usize>>, Range<usize>),
    Removed(Range<usize>, u8),
}

/// Which chain a message of the filter family serves: the filter messages (32777 to
/// 32787), or the silent-payment tweak messages (32809 to 32819), which have their layouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Filters,
    Tweaks,
}

/// The kind of a filter-family type.
fn kind(ty: u16) -> Kind {
    if TWEAK_TYPES.contains(&ty) {
        Kind::Tweaks
    } else {
        Kind::Filters
    }
}

/// The data a message of the `get_block` family carries, by its type: a block (32789,
/// 32791), or a tweak dispute's evidence (`get_spent_from` 32821, `spent_from` 32823),
/// which has the block messages' layouts. The crate's `BlockKind` only names the kind
/// here; the types and limits are the layouts'.
fn block_kind(ty: u16) -> BlockKind {
    if ty == 32821 || ty == 32823 {
        BlockKind::SpentFrom
    } else {
        BlockKind::Block
    }
}

/// A decoded message: borrowed fields as offsets into the input (empty ones as `0..0`,
/// wherever they point), copied fields by value. The filter messages' entries also stand
/// for the tweak messages, told apart by their `Kind`, and the block messages' for
/// `get_spent_from` and `spent_from`, told apart by their `BlockKind`.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ref {
    Init {
        global: Range<usize>,
        local: Range<usize>,
        networks: Option<Range<usize>>,
        remote_addr: Option<Range<usize>>,
        mirrors: Option<Range<usize>>,
    },
    Error([u8; 32], Range<usize>),
    Warning([u8; 32], Range<usize>),
    Ping(u16, Range<usize>),
    Pong(Range<usize>),
    GetHeaders(u32, u32, [u8; 32], Range<usize>),
    Headers(u32, u32, bool, Range<usize>),
    Tip(u32, Range<usize>, Range<usize>),
    /// id, first_height, last, count, anchors, body.
    HeadersCompact(u32, u32, bool, u16, Range<usize>, Range<usize>),
    /// kind, id, start_height, stop_hash.
    GetFilterHeaders(Kind, u32, u32, [u8; 32]),
    /// kind, id, first_height, flags, anchors, filter hashes.
    FilterHeaders(Kind, u32, u32, Flags, Range<usize>, Range<usize>),
    /// kind, id, stop_hash.
    GetFilterCheckpoints(Kind, u32, [u8; 32]),
    /// kind, id, first_height, flags, headers.
    FilterCheckpoints(Kind, u32, u32, Flags, Range<usize>),
    /// kind, id, start_height, stop_hash.
    GetFilters(Kind, u32, u32, [u8; 32]),
    /// kind, id, flags, count, body, and the pieces in it.
    Filters(Kind, u32, Flags, u16, Range<usize>, Vec<RefPiece>),
    /// kind, id, block_hash.
    GetBlock(BlockKind, u32, [u8; 32]),
    Block {
        kind: BlockKind,
        id: u32,
        last: bool,
        not_found: bool,
        block_len: u32,
        offset: u32,
        data: Range<usize>,
    },
    /// id, tx.
    SendTx(u32, Range<usize>),
    /// id, the status as its code (unknown ones read as `busy`), txid.
    TxResult(u32, u8, [u8; 32]),
    /// salt, snapshot.
    MempoolSubscribe([u8; 16], bool, bool),
    /// reset, snapshot_end, count, the entries.
    MempoolDigest(bool, bool, u16, Vec<RefEntry>),
    /// id, txid.
    GetMempoolTx(u32, [u8; 32]),
    /// id, not_found, tx.
    MempoolTx(u32, bool, Range<usize>),
    GetFeeRates(u32),
    /// id, source code, rates (`None` for "no estimate").
    FeeRates(u32, u8, [Option<u64>; 3]),
    Unknown(u16, Range<usize>),
}

/// Offsets of `part` in `whole`; `part` must be a slice of it.
fn offsets(whole: &[u8], part: &[u8]) -> Range<usize> {
    assert!(
        within(whole, part),
        "a borrowed field is not a slice of the input"
    );
    if part.is_empty() {
        return 0..0;
    }
    let start = part.as_ptr() as usize - whole.as_ptr() as usize;
    start..start + part.len()
}

fn norm(r: Range<usize>) -> Range<usize> {
    if r.is_empty() { 0..0 } else { r }
}

fn as_ref(m: &Message<'_>, data: &[u8]) -> Ref {
    let o = |p: &[u8]| offsets(data, p);
    let flags = |f: lightwire_wire::AnswerFlags| (f.last, f.stop_unknown);
    let kind = match *m {
        Message::GetTweakHeaders(_)
        | Message::TweakHeaders(_)
        | Message::GetTweakCheckpoints(_)
        | Message::TweakCheckpoints(_)
        | Message::GetTweaks(_)
        | Message::Tweaks(_) => Kind::Tweaks,
        _ => Kind::Filters,
    };
    let blocks = match *m {
        Message::GetSpentFrom(_) | Message::SpentFrom(_) => BlockKind::SpentFrom,
        _ => BlockKind::Block,
    };
    match *m {
        Message::Init(i) => Ref::Init {
            global: o(i.global_features.as_bytes()),
            local: o(i.features.as_bytes()),
            networks: i.networks.map(|n| o(n.as_bytes())),
            remote_addr: i.remote_addr.map(o),
            mirrors: i.mirrors.map(o),
        },
        Message::Error(e) => Ref::Error(e.channel_id, o(e.data)),
        Message::Warning(w) => Ref::Warning(w.channel_id, o(w.data)),
        Message::Ping(p) => Ref::Ping(p.num_pong_bytes, o(p.ignored)),
        Message::Pong(p) => Ref::Pong(o(p.ignored)),
        Message::GetHeaders(g) => Ref::GetHeaders(g.id, g.max_count, g.stop_hash, o(g.locator)),
        Message::Headers(h) => Ref::Headers(h.id, h.first_height, h.last, o(h.headers)),
        Message::Tip(t) => Ref::Tip(t.height, o(t.header), o(t.chainwork)),
        Message::HeadersCompact(h) => Ref::HeadersCompact(
            h.id,
            h.first_height,
            h.last,
            h.count,
            o(h.anchors),
            o(h.body),
        ),
        Message::GetFilterHeaders(g) | Message::GetTweakHeaders(g) => {
            Ref::GetFilterHeaders(kind, g.0.id, g.0.start_height, g.0.stop_hash)
        }
        Message::FilterHeaders(f) | Message::TweakHeaders(f) => Ref::FilterHeaders(
            kind,
            f.id,
            f.first_height,
            flags(f.flags),
            o(f.anchors),
            o(f.hashes),
        ),
        Message::GetFilterCheckpoints(g) | Message::GetTweakCheckpoints(g) => {
            Ref::GetFilterCheckpoints(kind, g.id, g.stop_hash)
        }
        Message::FilterCheckpoints(c) | Message::TweakCheckpoints(c) => {
            Ref::FilterCheckpoints(kind, c.id, c.first_height, flags(c.flags), o(c.headers))
        }
        Message::GetFilters(g) | Message::GetTweaks(g) => {
            Ref::GetFilters(kind, g.0.id, g.0.start_height, g.0.stop_hash)
        }
        Message::Filters(f) | Message::Tweaks(f) => Ref::Filters(
            kind,
            f.id,
            flags(f.flags),
            f.count,
            o(f.body),
            f.pieces()
                .map(|p| (p.height, p.filter_len, p.offset, o(p.data)))
                .collect(),
        ),
        Message::GetBlock(g) | Message::GetSpentFrom(g) => {
            Ref::GetBlock(blocks, g.id, g.block_hash)
        }
        Message::Block(b) | Message::SpentFrom(b) => piece_ref(blocks, &b, data),
        Message::SendTx(s) => Ref::SendTx(s.id, o(s.tx)),
        Message::TxResult(t) => Ref::TxResult(t.id, t.status.code(), t.txid),
        Message::MempoolSubscribe(s) => Ref::MempoolSubscribe(s.salt, s.snapshot, s.tweaks),
        Message::MempoolDigest(d) => Ref::MempoolDigest(
            d.reset,
            d.snapshot_end,
            d.count,
            d.entries()
                .map(|e| match e {
                    DigestEntry::Added { txid, set, tweak } => {
                        RefEntry::Added(o(txid), tweak.map(|t| o(t)), o(set))
                    }
                    DigestEntry::Removed { txid, reason } => {
                        RefEntry::Removed(o(txid), reason.code())
                    }
                })
                .collect(),
        ),
        Message::GetMempoolTx(g) => Ref::GetMempoolTx(g.id, g.txid),
        Message::MempoolTx(t) => Ref::MempoolTx(t.id, t.not_found, o(t.tx)),
        Message::GetFeeRates(g) => Ref::GetFeeRates(g.id),
        Message::FeeRates(f) => Ref::FeeRates(f.id, f.source.code(), f.rates),
        Message::Unknown { ty, payload } => Ref::Unknown(ty, o(payload)),
    }
}

/// A piece of `kind`'s data as the reference gives it.
fn piece_ref(kind: BlockKind, b: &BlockPiece<'_>, data: &[u8]) -> Ref {
    Ref::Block {
        kind,
        id: b.id,
        last: b.last,
        not_found: b.not_found,
        block_len: b.block_len,
        offset: b.offset,
        data: offsets(data, b.data),
    }
}

/// Reads fields like the decoders must: a missing field is `Truncated` with its name, its
/// size, and the bytes that were left.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn left(&self) -> usize {
        self.data.len() - self.at
    }

    fn take(&mut self, n: usize, field: &'static str) -> Result<Range<usize>, DecodeError> {
        let available = self.left();
        if n > available {
            return Err(DecodeError::Truncated {
                field,
                needed: n,
                available,
            });
        }
        self.at += n;
        Ok(norm(self.at - n..self.at))
    }

    /// Every byte left (a field that runs to the end of the message).
    fn rest(&mut self) -> Range<usize> {
        let start = self.at;
        self.at = self.data.len();
        norm(start..self.at)
    }

    fn uint(&mut self, n: usize, field: &'static str) -> Result<u64, DecodeError> {
        let r = self.take(n, field)?;
        Ok(self.data[r]
            .iter()
            .fold(0u64, |v, &b| (v << 8) | u64::from(b)))
    }

    fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.uint(1, field)? as u8)
    }

    fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        Ok(self.uint(2, field)? as u16)
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        Ok(self.uint(4, field)? as u32)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let r = self.take(N, field)?;
        let mut a = [0u8; N];
        a.copy_from_slice(&self.data[r]);
        Ok(a)
    }

    fn prefixed(
        &mut self,
        len: &'static str,
        field: &'static str,
    ) -> Result<Range<usize>, DecodeError> {
        let n = self.uint(2, len)? as usize;
        self.take(n, field)
    }
}

/// The shared `flags` byte of the filter answers: bit 0 `last`, bit 1 `stop_unknown`,
/// other bits ignored.
fn answer_flags(b: u8) -> Flags {
    (b & 1 != 0, b & 2 != 0)
}

/// The reference decoder: the message, and where its fields end.
fn reference(data: &[u8]) -> Result<(Ref, usize), DecodeError> {
    let mut r = Reader { data, at: 0 };
    let ty = r.u16("type")?;
    let m = match ty {
        16 => {
            let global = r.prefixed("gflen", "globalfeatures")?;
            let local = r.prefixed("flen", "features")?;
            let (networks, remote_addr, mirrors) = init_records(data, r.at)?;
            r.at = data.len();
            Ref::Init {
                global,
                local,
                networks,
                remote_addr,
                mirrors,
            }
        }
        17 | 1 => {
            let c = r.array("channel_id")?;
            let d = r.prefixed("len", "data")?;
            if ty == 17 {
                Ref::Error(c, d)
            } else {
                Ref::Warning(c, d)
            }
        }
        18 => {
            let n = r.u16("num_pong_bytes")?;
            Ref::Ping(n, r.prefixed("byteslen", "ignored")?)
        }
        19 => Ref::Pong(r.prefixed("byteslen", "ignored")?),
        32769 => {
            let id = r.u32("id")?;
            let max = r.u32("max_count")?;
            let stop = r.array("stop_hash")?;
            let n = usize::from(r.u16("num_locator")?);
            Ref::GetHeaders(id, max, stop, r.take(n * 32, "locator")?)
        }
        32771 => {
            let id = r.u32("id")?;
            let first = r.u32("first_height")?;
            let flags = r.u8("flags")?;
            let n = usize::from(r.u16("count")?);
            Ref::Headers(id, first, flags & 1 == 1, r.take(n * 80, "headers")?)
        }
        32773 => {
            let h = r.u32("height")?;
            let header = r.take(80, "header")?;
            Ref::Tip(h, header, r.take(32, "chainwork")?)
        }
        32775 => {
            let id = r.u32("id")?;
            let first = r.u32("first_height")?;
            let flags = r.u8("flags")?;
            let count = r.u16("count")?;
            let segments = r.u8("segments")?;
            let n = usize::from(count);
            if n > MAX_COMPACT_HEADERS_PER_MESSAGE {
                return Err(DecodeError::Compact(CompactError::TooMany { count }));
            }
            if segments > 4 || usize::from(segments) > n || (segments == 0) != (n == 0) {
                return Err(DecodeError::Compact(CompactError::Segments {
                    segments,
                    count,
                }));
            }
            let anchors = r.take(usize::from(segments) * 32, "anchors")?;
            let body = r.rest();
            Ref::HeadersCompact(id, first, flags & 1 == 1, count, anchors, body)
        }
        // The filter messages and the tweak messages (same layouts, same rules).
        32777 | 32809 | 32785 | 32817 => {
            let id = r.u32("id")?;
            let start = r.u32("start_height")?;
            let stop = r.array("stop_hash")?;
            if ty == 32777 || ty == 32809 {
                Ref::GetFilterHeaders(kind(ty), id, start, stop)
            } else {
                Ref::GetFilters(kind(ty), id, start, stop)
            }
        }
        32779 | 32811 => {
            let id = r.u32("id")?;
            let first = r.u32("first_height")?;
            let flags = answer_flags(r.u8("flags")?);
            let count = r.u16("count")?;
            let segments = r.u8("segments")?;
            let (n, s) = (usize::from(count), usize::from(segments));
            if n > MAX_FILTER_HASHES {
                return Err(DecodeError::Filters(FiltersError::TooMany { count }));
            }
            // As in `headers_compact`: 0 exactly when `count` is, else 1 to 4 and at most `count`.
            if s > MAX_SEGMENTS || s > n || (s == 0) != (n == 0) {
                return Err(DecodeError::Filters(FiltersError::Segments {
                    segments,
                    count,
                }));
            }
            let anchors = r.take(s * 32, "anchors")?;
            let hashes = r.take(n * 32, "filter_hashes")?;
            Ref::FilterHeaders(kind(ty), id, first, flags, anchors, hashes)
        }
        32781 | 32813 => {
            let id = r.u32("id")?;
            Ref::GetFilterCheckpoints(kind(ty), id, r.array("stop_hash")?)
        }
        32783 | 32815 => {
            let id = r.u32("id")?;
            let first = r.u32("first_height")?;
            let flags = answer_flags(r.u8("flags")?);
            let n = usize::from(r.u16("count")?);
            // "a multiple of 1,000 (else the message does not decode)". No count limit:
            // 2,047 is as many as a 65,535-byte frame holds.
            if first % CHECKPOINT_INTERVAL != 0 {
                return Err(DecodeError::Filters(FiltersError::CheckpointHeight {
                    height: first,
                }));
            }
            let headers = r.take(n * 32, "checkpoints")?;
            Ref::FilterCheckpoints(kind(ty), id, first, flags, headers)
        }
        32787 | 32819 => filters(&mut r, kind(ty))?,
        // The block messages and the dispute's evidence (same layouts, same rules, each
        // answer its own limit).
        32789 | 32821 => {
            let id = r.u32("id")?;
            Ref::GetBlock(block_kind(ty), id, r.array("block_hash")?)
        }
        32791 | 32823 => block(&mut r, block_kind(ty))?,
        32793 => {
            // The 65,529-byte limit is the sender's: a frame cannot carry more.
            let id = r.u32("id")?;
            Ref::SendTx(id, r.rest())
        }
        32795 => {
            let id = r.u32("id")?;
            let status = r.u8("status")?;
            let txid = r.array("txid")?;
            let code = if usize::from(status) < RELAY_NAMES.len() {
                status
            } else {
                BUSY
            };
            Ref::TxResult(id, code, txid)
        }
        32797 => {
            let salt = r.array("salt")?;
            let flags = r.u8("flags")?;
            Ref::MempoolSubscribe(salt, flags & 1 != 0, flags & 2 != 0)
        }
        32799 => digest(&mut r)?,
        32801 => {
            let id = r.u32("id")?;
            Ref::GetMempoolTx(id, r.array("txid")?)
        }
        32803 => {
            let id = r.u32("id")?;
            let not_found = r.u8("flags")? & 1 != 0;
            let tx = r.rest();
            // Found without a transaction, not found with one, or one over the limit.
            if not_found != tx.is_empty() || tx.len() > MAX_TX_LEN {
                return Err(DecodeError::Mempool(MempoolError::BadAnswer { id }));
            }
            Ref::MempoolTx(id, not_found, tx)
        }
        32805 => Ref::GetFeeRates(r.u32("id")?),
        32807 => {
            let id = r.u32("id")?;
            let source = r.u8("source")?;
            let mut rates = [None; 3];
            for rate in &mut rates {
                let v = r.uint(8, "rate")?;
                *rate = (v != u64::MAX).then_some(v);
            }
            Ref::FeeRates(id, source, rates)
        }
        t if t % 2 == 1 => Ref::Unknown(t, r.rest()),
        t => return Err(DecodeError::UnknownEvenType { ty: t }),
    };
    Ok((m, r.at))
}

/// `filters`: `count` pieces, each read whole, then judged (a filter over 1 MiB; a piece
/// past its filter's end, or empty of a non-empty filter), in order; nothing may follow the
/// last. The same for `tweaks`, of kind `Tweaks`.
fn filters(r: &mut Reader<'_>, kind: Kind) -> Result<Ref, DecodeError> {
    let id = r.u32("id")?;
    let flags = answer_flags(r.u8("flags")?);
    let count = r.u16("count")?;
    let body = norm(r.at..r.data.len());
    let mut pieces = Vec::new();
    for index in 0..count {
        let height = r.u32("height")?;
        let filter_len = r.u32("filter_len")?;
        let offset = r.u32("offset")?;
        let len = r.u16("piece_len")?;
        let data = r.take(usize::from(len), "piece")?;
        if filter_len > MAX_FILTER_LEN {
            return Err(DecodeError::Filters(FiltersError::FilterTooLong {
                height,
                len: filter_len,
            }));
        }
        if u64::from(offset) + u64::from(len) > u64::from(filter_len)
            || (len == 0 && filter_len != 0)
        {
            return Err(DecodeError::Filters(FiltersError::PieceOutOfRange {
                index,
            }));
        }
        pieces.push((height, filter_len, offset, data));
    }
    if r.left() != 0 {
        return Err(DecodeError::Filters(FiltersError::TrailingBytes {
            len: r.left(),
        }));
    }
    Ok(Ref::Filters(kind, id, flags, count, body, pieces))
}

/// `block`: `not_found` is an answer of its own (with `last`, `block_len` 0, `offset` 0 and
/// no data) and nothing else may carry it; a piece is of a block of at most 4,000,000
/// bytes, holds at least one byte and lies within it, and has `last` exactly when it
/// reaches the end. The same for `spent_from` (of kind `SpentFrom`), whose answer may be
/// 33,554,432 bytes long (32 MiB).
fn block(r: &mut Reader<'_>, kind: BlockKind) -> Result<Ref, DecodeError> {
    let id = r.u32("id")?;
    let flags = r.u8("flags")?;
    let block_len = r.u32("block_len")?;
    let offset = r.u32("offset")?;
    let data = r.rest();
    let (last, not_found) = (flags & 1 != 0, flags & 2 != 0);
    let end = u64::from(offset) + data.len() as u64;
    let fail = |e| Err(DecodeError::Blocks(e));
    if not_found {
        if !last || block_len != 0 || offset != 0 || !data.is_empty() {
            return fail(BlocksError::NotFoundWithBlock);
        }
    } else if block_len > ref_block_limit(kind) {
        return fail(BlocksError::BlockTooLong { len: block_len });
    } else if data.is_empty() || end > u64::from(block_len) {
        return fail(BlocksError::PieceOutOfRange {
            offset,
            len: data.len(),
        });
    } else if last != (end == u64::from(block_len)) {
        return fail(BlocksError::LastMisplaced { offset });
    }
    Ok(Ref::Block {
        kind,
        id,
        last,
        not_found,
        block_len,
        offset,
        data,
    })
}

/// `mempool_digest`: the entries run to the end of the message. Each is `kind`, `txid`
/// (an entry cut short of these is cut short, whatever its kind), then for `added` a
/// u16-prefixed set, for `added` with a tweak 33 bytes starting `02` or `03` then as
/// `added`, for `removed` a reason; the first entry cut short or of an unknown
/// kind fails the message; then their number must be `count` (which also refuses bytes
/// after the last entry counted).
fn digest(r: &mut Reader<'_>) -> Result<Ref, DecodeError> {
    let flags = r.u8("flags")?;
    let count = r.u16("count")?;
    let mut entries = Vec::new();
    let cut = |_| DecodeError::Mempool(MempoolError::Truncated);
    while r.left() > 0 {
        let kind = r.u8("kind").map_err(cut)?;
        let txid = r.take(32, "txid").map_err(cut)?;
        match kind {
            0 | 2 => {
                let tweak = if kind == 2 {
                    let t = r.take(33, "tweak").map_err(cut)?;
                    if !matches!(r.data[t.start], 2 | 3) {
                        return Err(DecodeError::Mempool(MempoolError::BadTweak));
                    }
                    Some(t)
                } else {
                    None
                };
                let set = r.prefixed("len", "set").map_err(cut)?;
                entries.push(RefEntry::Added(txid, tweak, set));
            }
            1 => {
                let reason = r.u8("reason").map_err(cut)?;
                let reason = if reason <= 3 { reason } else { EVICTED };
                entries.push(RefEntry::Removed(txid, reason));
            }
            kind => return Err(DecodeError::Mempool(MempoolError::UnknownKind { kind })),
        }
    }
    if entries.len() != usize::from(count) {
        return Err(DecodeError::Mempool(MempoolError::CountMismatch { count }));
    }
    Ok(Ref::MempoolDigest(
        flags & 1 != 0,
        flags & 2 != 0,
        count,
        entries,
    ))
}

/// `networks`, `remote_addr` and `bulk_mirrors` value ranges.
type InitRecords = (
    Option<Range<usize>>,
    Option<Range<usize>>,
    Option<Range<usize>>,
);

/// The `init_tlvs` stream starting at `at`: the `networks` (type 1, whole chain hashes),
/// `remote_addr` (type 3) and `bulk_mirrors` (type 65537) values, or the first broken rule
/// in stream order.
fn init_records(data: &[u8], at: usize) -> Result<InitRecords, DecodeError> {
    let tlv_err = |error| DecodeError::InvalidTlvStream {
        msg_type: 16,
        error,
    };
    let (records, error) = ref_tlv(&data[at..]);
    let (mut networks, mut remote_addr, mut mirrors) = (None, None, None);
    for rec in records {
        let value = norm(rec.value.start + at..rec.value.end + at);
        match rec.ty {
            1 if rec.value.len() % 32 != 0 => {
                return Err(tlv_err(TlvError::InvalidLength {
                    ty: 1,
                    len: rec.value.len(),
                    expected: "a multiple of 32",
                }));
            }
            1 => networks = Some(value),
            3 => remote_addr = Some(value),
            65_537 => mirrors = Some(value),
            t if t % 2 == 0 => return Err(tlv_err(TlvError::UnknownEvenType { ty: t })),
            _ => {}
        }
    }
    match error {
        Some(e) => Err(tlv_err(e)),
        None => Ok((networks, remote_addr, mirrors)),
    }
}

/// The canonical encoding of a valid `init`: its fields, then only its `networks`,
/// `remote_addr` and `bulk_mirrors` records (minimal BigSizes are the only ones accepted,
/// so those records are the input's own bytes).
fn init_canonical(data: &[u8]) -> Vec<u8> {
    let g = usize::from(u16::from_be_bytes([data[2], data[3]]));
    let f_at = 4 + g;
    let f = usize::from(u16::from_be_bytes([data[f_at], data[f_at + 1]]));
    let fields_end = f_at + 2 + f;
    let mut out = data[..fields_end].to_vec();
    let (records, _) = ref_tlv(&data[fields_end..]);
    for rec in records.iter().filter(|r| matches!(r.ty, 1 | 3 | 65_537)) {
        out.extend_from_slice(&data[fields_end + rec.record.start..fields_end + rec.record.end]);
    }
    out
}

/// The canonical encoding of a decoded message: the input up to the end of its fields,
/// without the flag bits its layout does not define ("other bits 0, ignored"), with a
/// `tx_result` status nobody knows as the one it reads as (`busy`).
fn canonical(data: &[u8], want: &Ref, end: usize) -> Vec<u8> {
    if let Ref::Init { .. } = want {
        return init_canonical(data);
    }
    let mut c = data[..end].to_vec();
    // Offsets of the flags byte: type (2), then the fields before it.
    match *want {
        Ref::Headers(..) | Ref::HeadersCompact(..) => c[10] &= 1,
        Ref::FilterHeaders(..) | Ref::FilterCheckpoints(..) => c[10] &= 3,
        Ref::Filters(..) | Ref::Block { .. } => c[6] &= 3,
        Ref::MempoolTx(..) => c[6] &= 1,
        Ref::TxResult(_, code, _) => c[6] = code,
        Ref::MempoolSubscribe(..) => c[18] &= 3,
        Ref::MempoolDigest(..) => c[2] &= 3,
        _ => {}
    }
    c
}

/// Encode the decoded value: its canonical bytes, or `FieldTooLong` for what the encoder
/// refuses; the per-type encoder agrees; the bytes decode to the same value; every shorter
/// buffer is refused.
fn round_trip(m: &Message<'_>, canonical: &[u8]) {
    let n = m.encoded_len();
    let mut out = vec![0xa5u8; n + 8];
    if let Some(refusal) = refused(m) {
        assert_eq!(m.encode(&mut out), Err(refusal), "encode {m:?}");
        return;
    }
    assert_eq!(m.encode(&mut out), Ok(n), "encode {m:?}");
    assert_eq!(&out[..n], canonical, "canonical bytes of {m:?}");
    let mut own = vec![0u8; n];
    let k = match m {
        Message::Init(x) => x.encode(&mut own),
        Message::Error(x) => x.encode(&mut own),
        Message::Warning(x) => x.encode(&mut own),
        Message::Ping(x) => x.encode(&mut own),
        Message::Pong(x) => x.encode(&mut own),
        Message::GetHeaders(x) => x.encode(&mut own),
        Message::Headers(x) => x.encode(&mut own),
        Message::Tip(x) => x.encode(&mut own),
        Message::GetFilterHeaders(x) => x.encode(&mut own),
        Message::GetFilterCheckpoints(x) => x.encode(&mut own),
        Message::FilterCheckpoints(x) => x.encode(&mut own),
        Message::GetFilters(x) => x.encode(&mut own),
        Message::GetTweakHeaders(x) => x.encode_as(FilterKind::Tweaks, &mut own),
        Message::GetTweakCheckpoints(x) => x.encode_as(FilterKind::Tweaks, &mut own),
        Message::TweakCheckpoints(x) => x.encode_as(FilterKind::Tweaks, &mut own),
        Message::GetTweaks(x) => x.encode_as(FilterKind::Tweaks, &mut own),
        // No encoder of their own: only `Message::encode`.
        Message::HeadersCompact(_)
        | Message::FilterHeaders(_)
        | Message::TweakHeaders(_)
        | Message::Filters(_)
        | Message::Tweaks(_)
        | Message::GetBlock(_)
        | Message::Block(_)
        | Message::GetSpentFrom(_)
        | Message::SpentFrom(_)
        | Message::SendTx(_)
        | Message::TxResult(_)
        | Message::MempoolSubscribe(_)
        | Message::MempoolDigest(_)
        | Message::GetMempoolTx(_)
        | Message::MempoolTx(_)
        | Message::GetFeeRates(_)
        | Message::FeeRates(_)
        | Message::Unknown { .. } => m.encode(&mut own),
    };
    assert_eq!(k, Ok(n), "per-type encode of {m:?}");
    assert_eq!(&own[..], canonical, "per-type encoding");
    assert_eq!(Message::decode(&out[..n]), Ok(*m), "decode of the encoding");
    for size in [0, n / 2, n.saturating_sub(1)] {
        if size < n {
            let mut short = vec![0u8; size];
            assert_eq!(
                m.encode(&mut short),
                Err(EncodeError::BufferTooSmall {
                    needed: n,
                    available: size
                }),
                "encode into {size} bytes"
            );
        }
    }
}

/// What the encoder refuses of a decoded message: it writes only what the sending side may
/// send, where the decoder leaves the rule to the layer above.
fn refused(m: &Message<'_>) -> Option<EncodeError> {
    match m {
        // "num_locator: 0 to 101".
        Message::GetHeaders(g) if g.locator.len() / 32 > MAX_LOCATOR => {
            Some(EncodeError::FieldTooLong {
                field: "locator",
                len: g.locator.len(),
                max: MAX_LOCATOR * 32,
            })
        }
        // "a gateway uses 4, or `count` when fewer".
        Message::FilterHeaders(f) | Message::TweakHeaders(f) => {
            let segments = (f.hashes.len() / 32).min(MAX_SEGMENTS);
            (f.anchors.len() != segments * 32).then_some(EncodeError::FieldTooLong {
                field: "anchors",
                len: f.anchors.len(),
                max: segments * 32,
            })
        }
        _ => None,
    }
}

/// `headers_compact`: expanding either fails with a typed error or gives `count` headers
/// whose segment starts carry the anchors; coding those again (shortest forms) and expanding
/// gives the same headers, previous-block hashes aside (the segments may differ).
fn compact(h: &HeadersCompact<'_>) {
    let n = usize::from(h.count);
    let mut expanded = vec![0xa5u8; n * HEADER_LEN];
    match h.expand(&mut expanded) {
        Err(e) => assert!(!e.to_string().is_empty()),
        Ok(()) => {
            let segments = h.segments();
            for i in 0..n {
                let prev = &expanded[i * HEADER_LEN + 4..i * HEADER_LEN + 36];
                match (0..segments).find(|k| segment_start(n, segments, *k) == i) {
                    Some(k) => assert_eq!(prev, &h.anchors[k * 32..k * 32 + 32]),
                    None => assert_eq!(prev, [0u8; 32]),
                }
            }
            let mut out = vec![0u8; MAX_MESSAGE_LEN];
            let header = |i: usize| -> Option<[u8; HEADER_LEN]> {
                expanded
                    .get(i * HEADER_LEN..(i + 1) * HEADER_LEN)?
                    .try_into()
                    .ok()
            };
            let (len, count) =
                HeadersCompact::encode_answer(&mut out, h.id, h.first_height, n, header)
                    .expect("codes");
            // Shortest forms take no more room, but the encoder stops while a longest header
            // might not fit, and may use more segments: only a nearly full message ends short.
            assert!(
                count == n || len + MAX_CODED_LEN + 3 * 32 > MAX_MESSAGE_LEN,
                "{count} of {n} headers coded in {len} bytes"
            );
            let Ok(Message::HeadersCompact(again)) = Message::decode(&out[..len]) else {
                panic!("the coding does not decode");
            };
            let want = (h.id, h.first_height, count == n);
            assert_eq!((again.id, again.first_height, again.last), want);
            let mut back = vec![0u8; count * HEADER_LEN];
            again.expand(&mut back).expect("the coding expands");
            for (a, b) in expanded
                .chunks_exact(HEADER_LEN)
                .zip(back.chunks_exact(HEADER_LEN))
            {
                assert_eq!((&a[..4], &a[36..]), (&b[..4], &b[36..]));
            }
        }
    }
}

/// The helpers on decoded messages, against references.
fn helpers(m: &Message<'_>) {
    match *m {
        Message::Init(i) => {
            let (g, f) = (i.global_features.as_bytes(), i.features.as_bytes());
            assert_eq!(i.features.iter().collect::<Vec<_>>(), ref_bits(f, &[]));
            let both = ref_bits(g, f);
            assert_eq!(i.combined_features().iter().collect::<Vec<_>>(), both);
            for &bit in both.iter().take(64) {
                assert!(i.combined_features().is_set(bit));
            }
            let unknown = ref_first_unknown_required(&both, &[]);
            assert_eq!(i.first_unknown_required_feature(&[]), unknown);
            let known: Vec<usize> = both.iter().copied().filter(|b| b % 4 == 0).collect();
            assert_eq!(
                i.first_unknown_required_feature(&known),
                ref_first_unknown_required(&both, &known)
            );
            let chains: Vec<&[u8; 32]> = i.networks().collect();
            let bytes = i.networks.map_or(&[][..], |n| n.as_bytes());
            assert_eq!(chains.len(), bytes.len() / 32);
            let other = [0x5au8; 32];
            let listed = chains.contains(&&other);
            assert_eq!(i.accepts_chain(&other), i.networks.is_none() || listed);
            let want = match (unknown, i.networks) {
                (Some(bit), _) => Err(InitRefusal::UnknownRequiredFeature(bit)),
                (None, None) => Err(InitRefusal::MissingNetworks),
                (None, Some(_)) if !listed => Err(InitRefusal::WrongNetwork),
                _ => Ok(()),
            };
            assert_eq!(i.require_chain(&other), want);
            if let Some(first) = chains.first() {
                assert!(i.accepts_chain(first));
            }
            mirrors(&i);
        }
        Message::Error(e) => printable(e.data, e.data_utf8()),
        Message::Warning(w) => printable(w.data, w.data_utf8()),
        Message::Ping(p) => {
            let mut out = vec![0xa5u8; MAX_MESSAGE_LEN];
            let reply = p.encode_pong(&mut out);
            if p.num_pong_bytes < NO_PONG_THRESHOLD {
                let len = usize::from(p.num_pong_bytes);
                assert_eq!(p.pong_len(), Some(p.num_pong_bytes));
                assert_eq!(reply, Ok(Some(4 + len)));
                let zeros = vec![0u8; len];
                assert_eq!(
                    Message::decode(&out[..4 + len]),
                    Ok(Message::Pong(Pong { ignored: &zeros }))
                );
            } else {
                assert_eq!(p.pong_len(), None);
                assert_eq!(reply, Ok(None));
            }
        }
        Message::GetHeaders(g) => {
            assert_eq!(g.locator.len() % 32, 0);
            let hashes: Vec<_> = g.locator_hashes().collect();
            assert_eq!(hashes.len(), g.locator.len() / 32);
            assert!(
                hashes
                    .iter()
                    .zip(g.locator.chunks(32))
                    .all(|(h, c)| &h[..] == c)
            );
        }
        Message::Headers(h) => {
            assert_eq!(h.headers.len() % HEADER_LEN, 0);
            assert_eq!(h.count(), h.headers.len() / HEADER_LEN);
            assert_eq!(h.iter().count(), h.count());
        }
        Message::HeadersCompact(h) => compact(&h),
        Message::FilterHeaders(f) | Message::TweakHeaders(f) => {
            let (n, s) = (f.hashes.len() / 32, f.anchors.len() / 32);
            assert_eq!((f.count(), f.segments()), (n, s));
            // Segment k holds hashes floor(count * k / segments) up to the next one's.
            let (starts, k) = f.segment_starts();
            assert_eq!(k, s);
            for (j, &start) in starts.iter().enumerate().take(s) {
                assert_eq!(start, n * j / s, "segment {j} of {s} over {n}");
            }
        }
        Message::FilterCheckpoints(c) | Message::TweakCheckpoints(c) => {
            assert_eq!(c.count(), c.headers.len() / 32);
            let got: Vec<(u32, &[u8; 32])> = c.iter().collect();
            assert_eq!(got.len(), c.count());
            for (i, ((height, header), want)) in got.iter().zip(c.headers.chunks(32)).enumerate() {
                assert_eq!(&header[..], want);
                // At first_height, first_height + 1000, ...; a height past u32 names no
                // block, so what is said of it is not judged.
                let h = u64::from(c.first_height) + u64::from(CHECKPOINT_INTERVAL) * i as u64;
                if let Ok(h) = u32::try_from(h) {
                    assert_eq!(*height, h, "checkpoint {i}");
                }
            }
        }
        Message::Filters(f) | Message::Tweaks(f) => {
            for p in f.pieces() {
                let end = u64::from(p.offset) + p.data.len() as u64;
                assert_eq!(p.ends_filter(), end == u64::from(p.filter_len));
            }
        }
        Message::Block(b) | Message::SpentFrom(b) => {
            let end = u64::from(b.offset) + b.data.len() as u64;
            assert_eq!(b.ends_block(), end == u64::from(b.block_len));
            if b.not_found {
                assert_eq!(b, BlockPiece::not_found(b.id));
            }
        }
        Message::TxResult(t) => {
            let code = ref_relay_code(t.status);
            assert_eq!(t.status.code(), code);
            assert_eq!(
                Some(t.status.name()),
                RELAY_NAMES.get(usize::from(code)).copied()
            );
        }
        Message::MempoolDigest(d) => {
            for e in d.entries() {
                if let DigestEntry::Removed { reason, .. } = e {
                    let code = ref_removal_code(reason);
                    assert_eq!(reason.code(), code);
                }
            }
        }
        Message::MempoolTx(t) => {
            if t.not_found {
                assert_eq!(t, MempoolTx::not_found(t.id));
            }
        }
        Message::FeeRates(f) => {
            let code = f.source.code();
            let want = match code {
                0 => FeeSource::None,
                1 => FeeSource::SmartFee,
                2 => FeeSource::EstimateFee,
                c => FeeSource::Other(c),
            };
            assert_eq!(f.source, want);
        }
        Message::Pong(_)
        | Message::Tip(_)
        | Message::GetFilterHeaders(_)
        | Message::GetFilterCheckpoints(_)
        | Message::GetFilters(_)
        | Message::GetTweakHeaders(_)
        | Message::GetTweakCheckpoints(_)
        | Message::GetTweaks(_)
        | Message::GetBlock(_)
        | Message::GetSpentFrom(_)
        | Message::SendTx(_)
        | Message::MempoolSubscribe(_)
        | Message::GetMempoolTx(_)
        | Message::GetFeeRates(_) => {}
        Message::Unknown { ty, .. } => {
            assert!(ty % 2 == 1, "unknown type {ty} is even");
            assert!(
                !KNOWN_TYPES.contains(&ty),
                "known type {ty} decoded as unknown"
            );
        }
    }
}

/// `BlockPiece::decode_payload_as` with either kind on the bytes after the type, whatever
/// the type: exactly the reference's piece of that kind (so each kind's limit is checked
/// on every payload, not only under its own type), `decode_payload` being the `Block`
/// kind's; and `BlockKind::max_len` is the layouts' limit.
fn block_kinds(data: &[u8]) {
    let Some(payload) = data.get(2..) else {
        return;
    };
    for kind in [BlockKind::Block, BlockKind::SpentFrom] {
        assert_eq!(kind.max_len(), ref_block_limit(kind), "max_len of {kind:?}");
        let got = BlockPiece::decode_payload_as(kind, payload);
        if kind == BlockKind::Block {
            assert_eq!(BlockPiece::decode_payload(payload), got, "decode_payload");
        }
        let want = block(&mut Reader { data, at: 2 }, kind);
        assert_eq!(
            got.map(|b| piece_ref(kind, &b, data)),
            want,
            "decode_payload_as({kind:?}) of {payload:02x?}"
        );
    }
}

/// `bulk_mirrors`' URLs as the record's reader must give them: each a big-endian u16
/// length and its bytes, one that is not UTF-8 skipped, a length past the value's end (or
/// a lone last byte) ending the list. Returns the URLs, the entries read and the bytes
/// they took.
fn ref_mirror_urls(v: &[u8]) -> (Vec<&str>, usize, usize) {
    let (mut urls, mut entries, mut at) = (Vec::new(), 0, 0);
    while v.len() - at >= 2 {
        let len = usize::from(u16::from_be_bytes([v[at], v[at + 1]]));
        if len > v.len() - at - 2 {
            break;
        }
        if let Ok(url) = core::str::from_utf8(&v[at + 2..at + 2 + len]) {
            urls.push(url);
        }
        entries += 1;
        at += 2 + len;
    }
    (urls, entries, at)
}

/// `mirror_urls` and `encode_mirrors` against the layout: the URLs read, written back, give
/// the value itself when every entry was whole UTF-8.
fn mirrors(i: &Init<'_>) {
    let value = i.mirrors.unwrap_or_default();
    let (urls, entries, used) = ref_mirror_urls(value);
    assert_eq!(i.mirror_urls().collect::<Vec<_>>(), urls, "mirror_urls");
    let mut want = Vec::new();
    for url in &urls {
        want.extend_from_slice(&(url.len() as u16).to_be_bytes());
        want.extend_from_slice(url.as_bytes());
    }
    let mut out = vec![0xa5u8; want.len() + 3];
    assert_eq!(Init::encode_mirrors(&urls, &mut out), Some(want.len()));
    assert_eq!(&out[..want.len()], &want[..]);
    if let Some(short) = want.len().checked_sub(1) {
        assert_eq!(Init::encode_mirrors(&urls, &mut out[..short]), None);
    }
    if entries == urls.len() && used == value.len() {
        assert_eq!(want, value, "whole UTF-8 URLs are the value");
    }
}

/// `data_utf8` is the text exactly when every byte is printable ASCII (32..=126).
fn printable(data: &[u8], text: Option<&str>) {
    if data.iter().all(|b| (32..=126).contains(b)) {
        assert_eq!(text.map(str::as_bytes), Some(data));
    } else {
        assert_eq!(text, None);
    }
}
