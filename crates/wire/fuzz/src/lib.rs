//! Shared pieces of the lightwire-wire fuzz targets: the cursor that reads structure out of
//! fuzz input (re-exported from lightwire-fuzz-support), and reference models written from BOLT 1 and BOLT 9 (not from the crate's
//! code) for BigSize, TLV streams and feature fields, against which the crate's answers
//! are compared.
#![forbid(unsafe_code)]

use core::ops::Range;

use lightwire_wire::{BigSizeError, BlockKind, RelayStatus, Removal, TlvError};

/// The input reader shared by every fuzz project (`crates/fuzz-support`), re-exported so
/// that the targets take everything from this crate.
pub use lightwire_fuzz_support::Cursor;

/// Whether `part` lies inside `whole` (same memory): a decoder that borrows must hand out
/// slices of its input, never past its end.
pub fn within(whole: &[u8], part: &[u8]) -> bool {
    let (w, p) = (whole.as_ptr() as usize, part.as_ptr() as usize);
    part.is_empty() || (p >= w && p + part.len() <= w + whole.len())
}

/// BigSize (BOLT 1): a first byte below 0xfd is the value; 0xfd, 0xfe, 0xff announce a
/// big-endian u16, u32, u64, which must not fit a shorter form. Returns the value and the
/// bytes it took.
pub fn ref_bigsize(b: &[u8]) -> Result<(u64, usize), BigSizeError> {
    let truncated = |needed| BigSizeError::Truncated {
        needed,
        available: b.len(),
    };
    let first = *b.first().ok_or(truncated(1))?;
    let (len, min) = match first {
        0xfd => (2, 0xfd),
        0xfe => (4, 0x1_0000),
        0xff => (8, 0x1_0000_0000),
        v => return Ok((u64::from(v), 1)),
    };
    let body = b.get(1..1 + len).ok_or(truncated(1 + len))?;
    let value = body.iter().fold(0u64, |v, &x| (v << 8) | u64::from(x));
    if value < min {
        return Err(BigSizeError::NonMinimal);
    }
    Ok((value, 1 + len))
}

/// The minimal BigSize encoding of `v`.
pub fn ref_bigsize_encode(v: u64) -> Vec<u8> {
    match v {
        0..=0xfc => vec![v as u8],
        0xfd..=0xffff => [&[0xfd][..], &(v as u16).to_be_bytes()].concat(),
        0x1_0000..=0xffff_ffff => [&[0xfe][..], &(v as u32).to_be_bytes()].concat(),
        _ => [&[0xff][..], &v.to_be_bytes()].concat(),
    }
}

/// One record of a TLV stream, as offsets into the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefRecord {
    /// The record type.
    pub ty: u64,
    /// The whole record (type, length, value).
    pub record: Range<usize>,
    /// The value.
    pub value: Range<usize>,
}

/// A TLV stream read by BOLT 1's rules: records to the end, each a BigSize type (strictly
/// above the previous one), a BigSize length, then that many bytes. Returns the records
/// before the first broken rule, and that rule. Types are not judged (the caller knows
/// which it understands).
pub fn ref_tlv(stream: &[u8]) -> (Vec<RefRecord>, Option<TlvError>) {
    let mut records = Vec::new();
    let mut at = 0;
    let mut prev: Option<u64> = None;
    let field_err = |field, e| match e {
        BigSizeError::Truncated { needed, available } => TlvError::Truncated {
            field,
            needed,
            available,
        },
        BigSizeError::NonMinimal => TlvError::NonMinimalBigSize { field },
    };
    while at < stream.len() {
        let start = at;
        let (ty, n) = match ref_bigsize(&stream[at..]) {
            Ok(v) => v,
            Err(e) => return (records, Some(field_err("type", e))),
        };
        at += n;
        if let Some(p) = prev
            && ty <= p
        {
            return (
                records,
                Some(TlvError::NotStrictlyIncreasing { prev: p, ty }),
            );
        }
        prev = Some(ty);
        let (len, n) = match ref_bigsize(&stream[at..]) {
            Ok(v) => v,
            Err(e) => return (records, Some(field_err("length", e))),
        };
        at += n;
        let remaining = stream.len() - at;
        if len > remaining as u64 {
            return (
                records,
                Some(TlvError::LengthExceedsStream { ty, len, remaining }),
            );
        }
        let value = at..at + len as usize;
        at = value.end;
        records.push(RefRecord {
            ty,
            record: start..at,
            value,
        });
    }
    (records, None)
}

/// The set bits of a big-endian feature field (bit 0 is the low bit of the last byte),
/// lowest first; with `other`, of the two fields ORed.
pub fn ref_bits(a: &[u8], other: &[u8]) -> Vec<usize> {
    let byte = |f: &[u8], i: usize| if i < f.len() { f[f.len() - 1 - i] } else { 0 };
    let mut out = Vec::new();
    for i in 0..a.len().max(other.len()) {
        let b = byte(a, i) | byte(other, i);
        for bit in 0..8 {
            if b & (1 << bit) != 0 {
                out.push(i * 8 + bit);
            }
        }
    }
    out
}

/// The lowest set even bit whose feature (the pair `2k`, `2k + 1`) is not in `known`.
pub fn ref_first_unknown_required(bits: &[usize], known: &[usize]) -> Option<usize> {
    bits.iter()
        .copied()
        .find(|&b| b % 2 == 0 && !known.iter().any(|&k| k / 2 == b / 2))
}

// Limits and types as docs/PROTOCOL.md states them (not the crate's constants, which the
// targets check against them), shared by `message` and `roundtrip`.
/// `filter_headers`: `count` 0 to 2,043.
pub const MAX_FILTER_HASHES: usize = 2043;
/// `filter_headers`, `headers_compact`: at most four segments (a gateway uses 4, or
/// `count` when fewer).
pub const MAX_SEGMENTS: usize = 4;
/// `filters`: a filter of at most 1,048,576 bytes.
pub const MAX_FILTER_LEN: u32 = 1 << 20;
/// `block`: a block of at most 4,000,000 bytes.
pub const MAX_BLOCK_LEN: u32 = 4_000_000;
/// `spent_from` (a tweak dispute's evidence, `block`'s layout and rules): at most
/// 33,554,432 bytes (32 MiB).
pub const MAX_SPENT_FROM_LEN: u32 = 33_554_432;
/// Every type docs/PROTOCOL.md and BOLT 1 give a layout: none decodes as `Unknown`, and
/// an unknown message built by a target takes none of them.
pub const KNOWN_TYPES: [u16; 33] = [
    1, 16, 17, 18, 19, 32769, 32771, 32773, 32775, 32777, 32779, 32781, 32783, 32785, 32787, 32789,
    32791, 32793, 32795, 32797, 32799, 32801, 32803, 32805, 32807, 32809, 32811, 32813, 32815,
    32817, 32819, 32821, 32823,
];
/// The filter messages, in order: `get_filter_headers`, `filter_headers`,
/// `get_filter_checkpoints`, `filter_checkpoints`, `get_filters`, `filters`.
pub const FILTER_TYPES: [u16; 6] = [32777, 32779, 32781, 32783, 32785, 32787];
/// The silent-payment tweak messages (docs/PROTOCOL.md, "Silent-payment tweaks"), in the
/// same order: `get_tweak_headers`, `tweak_headers`, `get_tweak_checkpoints`,
/// `tweak_checkpoints`, `get_tweaks`, `tweaks`. Each has the layout of the filter message
/// at the same place in [`FILTER_TYPES`], byte for byte, with the same decoding rules and
/// errors; only the type differs.
pub const TWEAK_TYPES: [u16; 6] = [32809, 32811, 32813, 32815, 32817, 32819];

/// The longest data of `kind` a receiver takes, by the layouts: [`MAX_BLOCK_LEN`] for a
/// block (`block`), [`MAX_SPENT_FROM_LEN`] for a dispute's evidence (`spent_from`). The
/// crate's enum only names the kind here; the limit is the reference's.
pub fn ref_block_limit(kind: BlockKind) -> u32 {
    match kind {
        BlockKind::Block => MAX_BLOCK_LEN,
        BlockKind::SpentFrom => MAX_SPENT_FROM_LEN,
    }
}

/// `tx_result` status codes, the table of docs/PROTOCOL.md variant by variant.
pub fn ref_relay_code(s: RelayStatus) -> u8 {
    match s {
        RelayStatus::Relayed => 0,
        RelayStatus::Malformed => 1,
        RelayStatus::Oversized => 2,
        RelayStatus::NotStandard => 3,
        RelayStatus::NoNode => 4,
        RelayStatus::Busy => 5,
        RelayStatus::Invalid => 6,
    }
}

/// `mempool_digest` removal reasons (docs/PROTOCOL.md).
pub fn ref_removal_code(r: Removal) -> u8 {
    match r {
        Removal::Mined => 0,
        Removal::Replaced => 1,
        Removal::Evicted => 2,
        Removal::Conflicted => 3,
    }
}
