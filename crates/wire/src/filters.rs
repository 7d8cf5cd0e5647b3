//! Compact block filter messages (BIP157's `getcfheaders`, `getcfcheckpt` and `getcfilters`
//! for the basic filter type, in BOLT 1's custom range; docs/PROTOCOL.md gives the layout
//! byte by byte and the rules for each side). A gateway offers them with the odd feature
//! bit [`FILTERS_FEATURE`].
//!
//! - `get_filter_headers` (32777) / `filter_headers` (32779): the filter-header chain as
//!   filter hashes, split into up to four segments each carrying the filter header before
//!   its first block (its *anchor*), so the receiver rebuilds four runs of the chain side
//!   by side, as `headers_compact` does for block hashes.
//! - `get_filter_checkpoints` (32781) / `filter_checkpoints` (32783): the filter header at
//!   every 1,000th height, for comparing gateways cheaply.
//! - `get_filters` (32785) / `filters` (32787): the filters themselves, as pieces: a
//!   message holds as many as fit, and a filter longer than what is left of a message is
//!   continued in the next one at the offset where it stopped.
//!
//! Filter bytes stay opaque here (this crate knows framing; lightwire-filter knows BIP158).

use crate::compact::{MAX_SEGMENTS, segment_start, segments_for};
use crate::cursor::{Reader, Writer};
use crate::error::{DecodeError, EncodeError, FiltersError};
use crate::message::{MAX_MESSAGE_LEN, TYPE_LEN, encode_message};
use crate::sync::HASH_LEN;

/// The feature bit (odd: optional) by which a gateway says it serves filters, and a client
/// that it may ask for them.
pub const FILTERS_FEATURE: usize = 259;
/// Heights between filter checkpoints (BIP157's `getcfcheckpt` interval).
pub const FILTER_CHECKPOINT_INTERVAL: u32 = 1000;
/// Most filter headers one `get_filter_headers` may ask for.
pub const MAX_REQUEST_FILTER_HEADERS: u32 = 100_000;
/// Most filters one `get_filters` may ask for (BIP157's limit for `getcfilters`).
pub const MAX_REQUEST_FILTERS: u32 = 1000;
/// The longest filter a receiver takes. A block's outputs are non-witness bytes, at most
/// 1,000,000 of them, and an output with a non-empty script takes at least 10, so a block
/// has at most about 100,000 output elements (plus its inputs', 41 bytes each at least)
/// at about 21.5 bits each: under 300 KB. 1 MiB leaves room and still bounds the buffer a
/// hostile gateway can make a client fill.
pub const MAX_FILTER_LEN: u32 = 1 << 20;

const LAST: u8 = 1;
const STOP_UNKNOWN: u8 = 2;
/// Bytes of a `filter_headers` payload before its anchors.
const FILTER_HEADERS_FIXED: usize = 4 + 4 + 1 + 2 + 1;
/// Most filter hashes in one `filter_headers` (with four anchors): 2,043.
pub const MAX_FILTER_HASHES_PER_MESSAGE: usize =
    (MAX_MESSAGE_LEN - TYPE_LEN - FILTER_HEADERS_FIXED - MAX_SEGMENTS * HASH_LEN) / HASH_LEN;
/// Bytes of a `filter_checkpoints` payload before its headers.
const CHECKPOINTS_FIXED: usize = 4 + 4 + 1 + 2;
/// Most checkpoints in one `filter_checkpoints`: 2,047.
pub const MAX_CHECKPOINTS_PER_MESSAGE: usize =
    (MAX_MESSAGE_LEN - TYPE_LEN - CHECKPOINTS_FIXED) / HASH_LEN;
/// Bytes of a `filters` payload before its pieces.
const FILTERS_FIXED: usize = 4 + 1 + 2;
/// Bytes of a piece before its data: height, filter_len, offset, piece_len.
pub const PIECE_FIXED: usize = 4 + 4 + 4 + 2;

/// How an answer ends: flags shared by the three answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AnswerFlags {
    /// The last message answering the request.
    pub last: bool,
    /// The request's `stop_hash` is not on the gateway's best chain (a last, empty answer):
    /// the chains differ, or the gateway has not reached it yet.
    pub stop_unknown: bool,
}

impl AnswerFlags {
    fn decode(b: u8) -> Self {
        AnswerFlags {
            last: b & LAST != 0,
            stop_unknown: b & STOP_UNKNOWN != 0,
        }
    }

    fn encode(self) -> u8 {
        (if self.last { LAST } else { 0 }) | (if self.stop_unknown { STOP_UNKNOWN } else { 0 })
    }
}

/// Which per-block data a message of this family carries. The two chains have one shape
/// (a header chain over per-block hashes, checkpoints every 1,000 blocks, the data in
/// pieces) and differ only in their message types, their feature bit and what the data is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FilterKind {
    /// BIP158 basic filters: feature 259, types 32777 to 32787.
    Basic,
    /// Silent-payment tweaks (BIP352), one list a block: feature 269, types 32809 to 32819
    /// (see [`crate::tweaks`]).
    Tweaks,
}

impl FilterKind {
    /// The feature bit (odd: optional) by which a gateway says it serves this data.
    pub const fn feature(self) -> usize {
        match self {
            FilterKind::Basic => FILTERS_FEATURE,
            FilterKind::Tweaks => crate::tweaks::TWEAKS_FEATURE,
        }
    }

    /// The type of the first message of the family (`get_..._headers`); the others follow
    /// at odd steps of 2, in the order of [`crate::msg_type`].
    const fn base(self) -> u16 {
        match self {
            FilterKind::Basic => crate::msg_type::GET_FILTER_HEADERS,
            FilterKind::Tweaks => crate::msg_type::GET_TWEAK_HEADERS,
        }
    }

    /// The type of `get_filter_headers` / `get_tweak_headers`.
    pub const fn get_headers_type(self) -> u16 {
        self.base()
    }

    /// The type of `filter_headers` / `tweak_headers`.
    pub const fn headers_type(self) -> u16 {
        self.base() + 2
    }

    /// The type of `get_filter_checkpoints` / `get_tweak_checkpoints`.
    pub const fn get_checkpoints_type(self) -> u16 {
        self.base() + 4
    }

    /// The type of `filter_checkpoints` / `tweak_checkpoints`.
    pub const fn checkpoints_type(self) -> u16 {
        self.base() + 6
    }

    /// The type of `get_filters` / `get_tweaks`.
    pub const fn get_data_type(self) -> u16 {
        self.base() + 8
    }

    /// The type of `filters` / `tweaks`.
    pub const fn data_type(self) -> u16 {
        self.base() + 10
    }

    /// The name of the data, for messages and logs.
    pub const fn name(self) -> &'static str {
        match self {
            FilterKind::Basic => "filters",
            FilterKind::Tweaks => "tweaks",
        }
    }
}

/// A request for a range of heights ending at a block: `get_filter_headers` and
/// `get_filters` (`u32 id, u32 start_height, [32] stop_hash`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FilterRange {
    /// Chosen by the client, echoed in every message answering it.
    pub id: u32,
    /// Height of the first block wanted.
    pub start_height: u32,
    /// The last block wanted: it fixes the chain the heights are on.
    pub stop_hash: [u8; HASH_LEN],
}

impl FilterRange {
    const LEN: usize = 4 + 4 + HASH_LEN;

    fn decode_payload(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        Ok(FilterRange {
            id: r.read_u32("id")?,
            start_height: r.read_u32("start_height")?,
            stop_hash: *r.read_array::<HASH_LEN>("stop_hash")?,
        })
    }

    fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.write_u32(self.id)?;
        w.write_u32(self.start_height)?;
        w.write_bytes(&self.stop_hash)
    }
}

/// `get_filter_headers` (32777): the filter hashes of `start_height` up to the height of
/// `stop_hash`, at most [`MAX_REQUEST_FILTER_HEADERS`] of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GetFilterHeaders(pub FilterRange);

/// `get_filters` (32785): the filters of `start_height` up to the height of `stop_hash`,
/// at most [`MAX_REQUEST_FILTERS`] of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GetFilters(pub FilterRange);

macro_rules! range_message {
    ($name:ident, $ty:expr, $kind_ty:path) => {
        impl $name {
            /// The message type.
            pub const TYPE: u16 = $ty;

            /// Decodes a payload (the bytes after the type).
            pub fn decode_payload(payload: &[u8]) -> Result<Self, DecodeError> {
                FilterRange::decode_payload(payload).map($name)
            }

            /// Payload length.
            pub const fn payload_len(&self) -> usize {
                FilterRange::LEN
            }

            /// Writes the payload.
            pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
                self.0.write_payload(w)
            }

            /// Encodes the whole message at the start of `out`.
            pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
                self.encode_as(FilterKind::Basic, out)
            }

            /// Encodes the whole message, as the request for `kind`'s data, at the start
            /// of `out`.
            pub fn encode_as(
                &self,
                kind: FilterKind,
                out: &mut [u8],
            ) -> Result<usize, EncodeError> {
                encode_message(out, $kind_ty(kind), FilterRange::LEN, |w| {
                    self.write_payload(w)
                })
            }
        }
    };
}

range_message!(GetFilterHeaders, 32777, FilterKind::get_headers_type);
range_message!(GetFilters, 32785, FilterKind::get_data_type);

/// `get_filter_checkpoints` (32781): the filter headers at every 1,000th height up to the
/// height of `stop_hash`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GetFilterCheckpoints {
    /// Chosen by the client, echoed in every message answering it.
    pub id: u32,
    /// The block the checkpoints end at (or below).
    pub stop_hash: [u8; HASH_LEN],
}

impl GetFilterCheckpoints {
    /// The message type.
    pub const TYPE: u16 = 32781;

    /// Decodes a payload (the bytes after the type).
    pub fn decode_payload(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        Ok(GetFilterCheckpoints {
            id: r.read_u32("id")?,
            stop_hash: *r.read_array::<HASH_LEN>("stop_hash")?,
        })
    }

    /// Payload length.
    pub const fn payload_len(&self) -> usize {
        4 + HASH_LEN
    }

    /// Writes the payload.
    pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.write_u32(self.id)?;
        w.write_bytes(&self.stop_hash)
    }

    /// Encodes the whole message at the start of `out`.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        self.encode_as(FilterKind::Basic, out)
    }

    /// Encodes the whole message, as the request for `kind`'s checkpoints, at the start of
    /// `out`.
    pub fn encode_as(&self, kind: FilterKind, out: &mut [u8]) -> Result<usize, EncodeError> {
        encode_message(out, kind.get_checkpoints_type(), self.payload_len(), |w| {
            self.write_payload(w)
        })
    }
}

/// `filter_headers` (32779): consecutive filter hashes, with the filter header before each
/// segment's first (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FilterHeaders<'a> {
    /// The request answered.
    pub id: u32,
    /// Height of the first filter hash (of the next one, when there are none).
    pub first_height: u32,
    /// How the answer ends.
    pub flags: AnswerFlags,
    /// `segments * 32` bytes: for each segment, the filter header of the block before its
    /// first (32 zero bytes before genesis).
    pub anchors: &'a [u8],
    /// `count * 32` bytes: the filter hashes (double SHA-256 of each filter).
    pub hashes: &'a [u8],
}

impl<'a> FilterHeaders<'a> {
    /// The message type.
    pub const TYPE: u16 = 32779;

    /// Filter hashes carried.
    pub const fn count(&self) -> usize {
        self.hashes.len() / HASH_LEN
    }

    /// Segments in this message.
    pub const fn segments(&self) -> usize {
        self.anchors.len() / HASH_LEN
    }

    /// The index of each segment's first hash, and how many segments there are.
    pub fn segment_starts(&self) -> ([usize; MAX_SEGMENTS], usize) {
        crate::compact::segment_starts(self.count(), self.segments())
    }

    /// Decodes a payload (the bytes after the type).
    pub fn decode_payload(payload: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let id = r.read_u32("id")?;
        let first_height = r.read_u32("first_height")?;
        let flags = AnswerFlags::decode(r.read_u8("flags")?);
        let count = r.read_u16("count")?;
        let segments = r.read_u8("segments")?;
        let n = usize::from(count);
        if n > MAX_FILTER_HASHES_PER_MESSAGE {
            return Err(DecodeError::Filters(FiltersError::TooMany { count }));
        }
        let s = usize::from(segments);
        if s > MAX_SEGMENTS || s > n || (s == 0) != (n == 0) {
            return Err(DecodeError::Filters(FiltersError::Segments {
                segments,
                count,
            }));
        }
        let anchors = r.read_bytes(s * HASH_LEN, "anchors")?;
        let hashes = r.read_bytes(n * HASH_LEN, "filter_hashes")?;
        Ok(FilterHeaders {
            id,
            first_height,
            flags,
            anchors,
            hashes,
        })
    }

    /// Payload length.
    pub const fn payload_len(&self) -> usize {
        FILTER_HEADERS_FIXED + self.anchors.len() + self.hashes.len()
    }

    /// Writes the payload as it is.
    pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        let count = self.count();
        if self.hashes.len() % HASH_LEN != 0 || count > MAX_FILTER_HASHES_PER_MESSAGE {
            return Err(EncodeError::FieldTooLong {
                field: "filter_hashes",
                len: self.hashes.len(),
                max: MAX_FILTER_HASHES_PER_MESSAGE * HASH_LEN,
            });
        }
        if self.anchors.len() != segments_for(count) * HASH_LEN {
            return Err(EncodeError::FieldTooLong {
                field: "anchors",
                len: self.anchors.len(),
                max: segments_for(count) * HASH_LEN,
            });
        }
        w.write_u32(self.id)?;
        w.write_u32(self.first_height)?;
        w.write_u8(self.flags.encode())?;
        w.write_u16(count as u16)?;
        w.write_u8(self.segments() as u8)?;
        w.write_bytes(self.anchors)?;
        w.write_bytes(self.hashes)
    }

    /// Encodes a whole answer message at the start of `out` for `count` filter hashes
    /// (at most [`MAX_FILTER_HASHES_PER_MESSAGE`]): `entry(i)` gives the filter header and
    /// the filter hash of the `i`-th block, and `before` the filter header of the block
    /// before the first. Each value is written once, straight into `out`; returns the length.
    pub fn encode_answer(
        out: &mut [u8],
        id: u32,
        first_height: u32,
        flags: AnswerFlags,
        count: usize,
        before: [u8; HASH_LEN],
        entry: impl FnMut(usize) -> ([u8; HASH_LEN], [u8; HASH_LEN]),
    ) -> Result<usize, EncodeError> {
        Self::encode_answer_as(
            FilterKind::Basic,
            out,
            id,
            first_height,
            flags,
            count,
            before,
            entry,
        )
    }

    /// [`Self::encode_answer`] for `kind`'s header chain.
    #[allow(clippy::too_many_arguments)]
    pub fn encode_answer_as(
        kind: FilterKind,
        out: &mut [u8],
        id: u32,
        first_height: u32,
        flags: AnswerFlags,
        count: usize,
        before: [u8; HASH_LEN],
        mut entry: impl FnMut(usize) -> ([u8; HASH_LEN], [u8; HASH_LEN]),
    ) -> Result<usize, EncodeError> {
        if count > MAX_FILTER_HASHES_PER_MESSAGE {
            return Err(EncodeError::FieldTooLong {
                field: "filter_hashes",
                len: count * HASH_LEN,
                max: MAX_FILTER_HASHES_PER_MESSAGE * HASH_LEN,
            });
        }
        let segments = segments_for(count);
        let body = (segments + count) * HASH_LEN;
        encode_message(out, kind.headers_type(), FILTER_HEADERS_FIXED + body, |w| {
            w.write_u32(id)?;
            w.write_u32(first_height)?;
            w.write_u8(flags.encode())?;
            w.write_u16(count as u16)?;
            w.write_u8(segments as u8)?;
            w.write_zeros(body)
        })?;
        let anchors = TYPE_LEN + FILTER_HEADERS_FIXED;
        let hashes = anchors + segments * HASH_LEN;
        let mut k = 0;
        let mut prev_header = before;
        for i in 0..count {
            if k < segments && i == segment_start(count, segments, k) {
                let at = anchors + k * HASH_LEN;
                out[at..at + HASH_LEN].copy_from_slice(&prev_header);
                k += 1;
            }
            let (header, hash) = entry(i);
            let at = hashes + i * HASH_LEN;
            out[at..at + HASH_LEN].copy_from_slice(&hash);
            prev_header = header;
        }
        Ok(hashes + count * HASH_LEN)
    }
}

/// `filter_checkpoints` (32783): the filter header at every 1,000th height from
/// `first_height` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FilterCheckpoints<'a> {
    /// The request answered.
    pub id: u32,
    /// Height of the first checkpoint carried, a multiple of 1,000 (of the next one, when
    /// there are none).
    pub first_height: u32,
    /// How the answer ends.
    pub flags: AnswerFlags,
    /// `count * 32` bytes: the filter headers.
    pub headers: &'a [u8],
}

impl<'a> FilterCheckpoints<'a> {
    /// The message type.
    pub const TYPE: u16 = 32783;

    /// Checkpoints carried.
    pub const fn count(&self) -> usize {
        self.headers.len() / HASH_LEN
    }

    /// The checkpoints, with their heights.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &'a [u8; HASH_LEN])> {
        let first = self.first_height;
        self.headers
            .chunks_exact(HASH_LEN)
            .filter_map(|h| h.try_into().ok())
            .enumerate()
            .map(move |(i, h)| {
                let height =
                    first.saturating_add((i as u32).saturating_mul(FILTER_CHECKPOINT_INTERVAL));
                (height, h)
            })
    }

    /// Decodes a payload (the bytes after the type).
    pub fn decode_payload(payload: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let id = r.read_u32("id")?;
        let first_height = r.read_u32("first_height")?;
        let flags = AnswerFlags::decode(r.read_u8("flags")?);
        let count = r.read_u16("count")?;
        if first_height % FILTER_CHECKPOINT_INTERVAL != 0 {
            return Err(DecodeError::Filters(FiltersError::CheckpointHeight {
                height: first_height,
            }));
        }
        let headers = r.read_bytes(usize::from(count) * HASH_LEN, "checkpoints")?;
        Ok(FilterCheckpoints {
            id,
            first_height,
            flags,
            headers,
        })
    }

    /// Payload length.
    pub const fn payload_len(&self) -> usize {
        CHECKPOINTS_FIXED + self.headers.len()
    }

    /// Writes the payload.
    pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        if self.headers.len() % HASH_LEN != 0 || self.count() > MAX_CHECKPOINTS_PER_MESSAGE {
            return Err(EncodeError::FieldTooLong {
                field: "checkpoints",
                len: self.headers.len(),
                max: MAX_CHECKPOINTS_PER_MESSAGE * HASH_LEN,
            });
        }
        w.write_u32(self.id)?;
        w.write_u32(self.first_height)?;
        w.write_u8(self.flags.encode())?;
        w.write_u16(self.count() as u16)?;
        w.write_bytes(self.headers)
    }

    /// Encodes the whole message at the start of `out`.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        self.encode_as(FilterKind::Basic, out)
    }

    /// Encodes the whole message, as `kind`'s checkpoints, at the start of `out`.
    pub fn encode_as(&self, kind: FilterKind, out: &mut [u8]) -> Result<usize, EncodeError> {
        encode_message(out, kind.checkpoints_type(), self.payload_len(), |w| {
            self.write_payload(w)
        })
    }
}

/// One piece of a filter in a `filters` message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FilterPiece<'a> {
    /// The block's height.
    pub height: u32,
    /// The whole filter's length (at most [`MAX_FILTER_LEN`]).
    pub filter_len: u32,
    /// Where this piece starts in the filter.
    pub offset: u32,
    /// The piece: `filter[offset..offset + data.len()]`.
    pub data: &'a [u8],
}

impl FilterPiece<'_> {
    /// Whether this piece ends its filter.
    pub const fn ends_filter(&self) -> bool {
        self.offset as usize + self.data.len() == self.filter_len as usize
    }
}

/// `filters` (32787): pieces of consecutive filters (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Filters<'a> {
    /// The request answered.
    pub id: u32,
    /// How the answer ends.
    pub flags: AnswerFlags,
    /// Pieces carried.
    pub count: u16,
    /// The pieces, back to back (checked when decoded).
    pub body: &'a [u8],
}

impl<'a> Filters<'a> {
    /// The message type.
    pub const TYPE: u16 = 32787;

    /// Decodes a payload (the bytes after the type), checking every piece's fields: a
    /// filter length over [`MAX_FILTER_LEN`], a piece past its filter's end, an empty
    /// piece of a non-empty filter, and bytes after the last piece are refused. (That
    /// pieces come in order and whole is the receiver's to check: it holds the state.)
    pub fn decode_payload(payload: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let id = r.read_u32("id")?;
        let flags = AnswerFlags::decode(r.read_u8("flags")?);
        let count = r.read_u16("count")?;
        let body = r.take_rest();
        let mut pieces = Reader::new(body);
        for index in 0..count {
            read_piece(&mut pieces, index)?;
        }
        if !pieces.is_empty() {
            return Err(DecodeError::Filters(FiltersError::TrailingBytes {
                len: pieces.remaining(),
            }));
        }
        Ok(Filters {
            id,
            flags,
            count,
            body,
        })
    }

    /// The pieces, in order.
    pub fn pieces(&self) -> impl Iterator<Item = FilterPiece<'a>> {
        let mut r = Reader::new(self.body);
        (0..self.count).map_while(move |i| read_piece(&mut r, i).ok())
    }

    /// Payload length.
    pub const fn payload_len(&self) -> usize {
        FILTERS_FIXED + self.body.len()
    }

    /// Writes the payload as it is (the pieces unchecked; [`FiltersWriter`] codes them).
    pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.write_u32(self.id)?;
        w.write_u8(self.flags.encode())?;
        w.write_u16(self.count)?;
        w.write_bytes(self.body)
    }
}

fn read_piece<'a>(r: &mut Reader<'a>, index: u16) -> Result<FilterPiece<'a>, DecodeError> {
    let height = r.read_u32("height")?;
    let filter_len = r.read_u32("filter_len")?;
    let offset = r.read_u32("offset")?;
    let len = r.read_u16("piece_len")?;
    let data = r.read_bytes(usize::from(len), "piece")?;
    if filter_len > MAX_FILTER_LEN {
        return Err(DecodeError::Filters(FiltersError::FilterTooLong {
            height,
            len: filter_len,
        }));
    }
    if u64::from(offset) + u64::from(len) > u64::from(filter_len) || (len == 0 && filter_len != 0) {
        return Err(DecodeError::Filters(FiltersError::PieceOutOfRange {
            index,
        }));
    }
    Ok(FilterPiece {
        height,
        filter_len,
        offset,
        data,
    })
}

/// Writes a `filters` message piece by piece into a frame body, each byte once.
#[derive(Debug)]
pub struct FiltersWriter<'o> {
    out: &'o mut [u8],
    pos: usize,
    count: u16,
}

impl<'o> FiltersWriter<'o> {
    /// Starts a message answering `id` at the start of `out` (at most 65,535 bytes of it
    /// are used).
    pub fn new(out: &'o mut [u8], id: u32) -> Result<Self, EncodeError> {
        Self::new_as(FilterKind::Basic, out, id)
    }

    /// Starts a message of `kind`'s data (`filters` or `tweaks`) answering `id`.
    pub fn new_as(kind: FilterKind, out: &'o mut [u8], id: u32) -> Result<Self, EncodeError> {
        let limit = out.len().min(MAX_MESSAGE_LEN);
        let start = TYPE_LEN + FILTERS_FIXED;
        if limit < start + PIECE_FIXED + 1 {
            return Err(EncodeError::BufferTooSmall {
                needed: start + PIECE_FIXED + 1,
                available: out.len(),
            });
        }
        out[..2].copy_from_slice(&kind.data_type().to_be_bytes());
        out[2..6].copy_from_slice(&id.to_be_bytes());
        Ok(FiltersWriter {
            out: &mut out[..limit],
            pos: start,
            count: 0,
        })
    }

    /// Adds as much of `filter[offset..]` (the filter of block `height`) as fits, and
    /// returns how many bytes that was; `None` when not even a one-byte piece fits (the
    /// message is full). An empty filter takes a piece of no data.
    pub fn push(&mut self, height: u32, filter: &[u8], offset: usize) -> Option<usize> {
        let rest = filter.get(offset..).unwrap_or_default();
        let room = self.out.len() - self.pos;
        if room < PIECE_FIXED + usize::from(!rest.is_empty()) || self.count == u16::MAX {
            return None;
        }
        let n = rest
            .len()
            .min(room - PIECE_FIXED)
            .min(usize::from(u16::MAX));
        let o = &mut self.out[self.pos..];
        o[0..4].copy_from_slice(&height.to_be_bytes());
        o[4..8].copy_from_slice(&(filter.len() as u32).to_be_bytes());
        o[8..12].copy_from_slice(&(offset as u32).to_be_bytes());
        o[12..14].copy_from_slice(&(n as u16).to_be_bytes());
        o[PIECE_FIXED..PIECE_FIXED + n].copy_from_slice(&rest[..n]);
        self.pos += PIECE_FIXED + n;
        self.count += 1;
        Some(n)
    }

    /// Whether another piece (of at least one byte) fits.
    pub fn has_room(&self) -> bool {
        self.out.len() - self.pos > PIECE_FIXED && self.count < u16::MAX
    }

    /// Pieces written so far.
    pub const fn pieces(&self) -> u16 {
        self.count
    }

    /// Ends the message with `flags`, returning its length.
    pub fn finish(self, flags: AnswerFlags) -> usize {
        self.out[6] = flags.encode();
        self.out[7..9].copy_from_slice(&self.count.to_be_bytes());
        self.pos
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::message::Message;

    fn roundtrip(m: Message<'_>) {
        let mut out = [0u8; MAX_MESSAGE_LEN];
        let n = m.encode(&mut out).unwrap();
        assert_eq!(n, m.encoded_len());
        assert_eq!(Message::decode(&out[..n]), Ok(m));
    }

    #[test]
    fn requests_roundtrip() {
        let range = FilterRange {
            id: 7,
            start_height: 1000,
            stop_hash: [3; 32],
        };
        let checkpoints = GetFilterCheckpoints {
            id: 9,
            stop_hash: [4; 32],
        };
        roundtrip(Message::GetFilterHeaders(GetFilterHeaders(range)));
        roundtrip(Message::GetFilters(GetFilters(range)));
        roundtrip(Message::GetFilterCheckpoints(checkpoints));
        roundtrip(Message::GetTweakHeaders(GetFilterHeaders(range)));
        roundtrip(Message::GetTweaks(GetFilters(range)));
        roundtrip(Message::GetTweakCheckpoints(checkpoints));
    }

    #[test]
    fn tweak_messages_are_the_filter_layouts_under_their_own_types() {
        use crate::msg_type;
        let kinds = [FilterKind::Basic, FilterKind::Tweaks];
        let types = |k: FilterKind| {
            [
                k.get_headers_type(),
                k.headers_type(),
                k.get_checkpoints_type(),
                k.checkpoints_type(),
                k.get_data_type(),
                k.data_type(),
            ]
        };
        assert_eq!(
            types(kinds[0]),
            [
                msg_type::GET_FILTER_HEADERS,
                msg_type::FILTER_HEADERS,
                msg_type::GET_FILTER_CHECKPOINTS,
                msg_type::FILTER_CHECKPOINTS,
                msg_type::GET_FILTERS,
                msg_type::FILTERS
            ]
        );
        assert_eq!(
            types(kinds[1]),
            [
                msg_type::GET_TWEAK_HEADERS,
                msg_type::TWEAK_HEADERS,
                msg_type::GET_TWEAK_CHECKPOINTS,
                msg_type::TWEAK_CHECKPOINTS,
                msg_type::GET_TWEAKS,
                msg_type::TWEAKS
            ]
        );
        assert_eq!(FilterKind::Tweaks.feature(), crate::TWEAKS_FEATURE);
        let range = FilterRange {
            id: 7,
            start_height: 1000,
            stop_hash: [3; 32],
        };
        // Each writer, given the tweak kind, writes a message that decodes as the tweak
        // variant with the same fields; given the basic kind, as the filter variant.
        let mut out = [0u8; MAX_MESSAGE_LEN];
        let n = GetFilters(range)
            .encode_as(FilterKind::Tweaks, &mut out)
            .unwrap();
        assert_eq!(
            Message::decode(&out[..n]),
            Ok(Message::GetTweaks(GetFilters(range)))
        );
        let n = GetFilterHeaders(range)
            .encode_as(FilterKind::Tweaks, &mut out)
            .unwrap();
        assert_eq!(
            Message::decode(&out[..n]),
            Ok(Message::GetTweakHeaders(GetFilterHeaders(range)))
        );
        let flags = AnswerFlags {
            last: true,
            stop_unknown: false,
        };
        let n = FilterHeaders::encode_answer_as(
            FilterKind::Tweaks,
            &mut out,
            5,
            10,
            flags,
            3,
            [1; 32],
            |i| ([i as u8; 32], [9 + i as u8; 32]),
        )
        .unwrap();
        let Ok(Message::TweakHeaders(m)) = Message::decode(&out[..n]) else {
            panic!("not tweak_headers: {:?}", Message::decode(&out[..n]));
        };
        assert_eq!((m.id, m.first_height, m.count()), (5, 10, 3));
        let headers = [7u8; 64];
        let cp = FilterCheckpoints {
            id: 2,
            first_height: 2000,
            flags,
            headers: &headers,
        };
        let n = cp.encode_as(FilterKind::Tweaks, &mut out).unwrap();
        assert_eq!(
            Message::decode(&out[..n]),
            Ok(Message::TweakCheckpoints(cp))
        );
        let mut w = FiltersWriter::new_as(FilterKind::Tweaks, &mut out, 4).unwrap();
        assert_eq!(w.push(12, &[1, 2, 3], 0), Some(3));
        let n = w.finish(flags);
        let Ok(Message::Tweaks(m)) = Message::decode(&out[..n]) else {
            panic!("not tweaks");
        };
        let pieces: Vec<_> = m.pieces().collect();
        assert_eq!(
            (pieces.len(), pieces[0].height, pieces[0].data),
            (1, 12, &[1u8, 2, 3][..])
        );
        let n = FiltersWriter::new(&mut out, 4).unwrap().finish(flags);
        assert!(matches!(
            Message::decode(&out[..n]),
            Ok(Message::Filters(_))
        ));
    }

    #[test]
    fn filter_headers_carry_an_anchor_per_segment() {
        assert_eq!(MAX_FILTER_HASHES_PER_MESSAGE, 2043);
        let mut out = [0u8; MAX_MESSAGE_LEN];
        // Block i's filter header is [i + 1; 32], its filter hash [100 + i; 32].
        let count = MAX_FILTER_HASHES_PER_MESSAGE;
        let flags = AnswerFlags {
            last: true,
            stop_unknown: false,
        };
        let n = FilterHeaders::encode_answer(&mut out, 5, 10, flags, count, [0; 32], |i| {
            ([(i + 1) as u8; 32], [(100 + i) as u8; 32])
        })
        .unwrap();
        assert!(n <= MAX_MESSAGE_LEN);
        let Ok(Message::FilterHeaders(m)) = Message::decode(&out[..n]) else {
            panic!("not filter_headers");
        };
        assert_eq!(
            (m.id, m.first_height, m.flags, m.count()),
            (5, 10, flags, count)
        );
        let (starts, segments) = m.segment_starts();
        assert_eq!(segments, 4);
        for (k, a) in m.anchors.chunks_exact(32).enumerate() {
            // The anchor is the header of the block before the segment's first.
            let before = starts[k].checked_sub(1).map_or(0, |i| (i + 1) as u8);
            assert_eq!(a, &[before; 32]);
        }
        assert_eq!(&m.hashes[32 * 7..32 * 8], &[107; 32]);
        roundtrip(Message::FilterHeaders(m));
        // One more than fits is refused.
        assert!(
            FilterHeaders::encode_answer(&mut out, 5, 10, flags, count + 1, [0; 32], |_| {
                ([0; 32], [0; 32])
            })
            .is_err()
        );
    }

    #[test]
    fn filter_headers_segments_must_match_the_count() {
        let mut payload = vec![0u8; 12];
        payload[9..11].copy_from_slice(&3u16.to_be_bytes());
        payload.extend_from_slice(&[0; 32 * 7]);
        for (segments, ok) in [(0, false), (1, true), (3, true), (4, false)] {
            payload[11] = segments;
            let mut p = payload.clone();
            p.truncate(12 + 32 * (usize::from(segments) + 3));
            assert_eq!(
                FilterHeaders::decode_payload(&p).is_ok(),
                ok,
                "{segments} segments"
            );
        }
        // An empty answer has no segments.
        let empty = [0u8; 12];
        assert!(FilterHeaders::decode_payload(&empty).is_ok());
        let mut too_many = [0u8; 12];
        too_many[9..11].copy_from_slice(&2044u16.to_be_bytes());
        assert_eq!(
            FilterHeaders::decode_payload(&too_many),
            Err(DecodeError::Filters(FiltersError::TooMany { count: 2044 }))
        );
    }

    #[test]
    fn checkpoints_are_at_thousands() {
        let headers = [9u8; 32 * 3];
        let m = FilterCheckpoints {
            id: 1,
            first_height: 2000,
            flags: AnswerFlags::default(),
            headers: &headers,
        };
        roundtrip(Message::FilterCheckpoints(m));
        let heights: Vec<u32> = m.iter().map(|(h, _)| h).collect();
        assert_eq!(heights, [2000, 3000, 4000]);
        let mut out = [0u8; 200];
        let n = FilterCheckpoints {
            first_height: 2500,
            ..m
        }
        .encode(&mut out)
        .unwrap();
        assert_eq!(
            Message::decode(&out[..n]),
            Err(DecodeError::Filters(FiltersError::CheckpointHeight {
                height: 2500
            }))
        );
    }

    #[test]
    fn a_long_filter_is_carried_in_pieces_across_messages() {
        let filter: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let small = [1u8, 2, 3];
        let mut out = vec![0u8; MAX_MESSAGE_LEN];
        let mut got = Vec::new();
        let (mut offset, mut messages) = (0, 0);
        while offset < filter.len() {
            let mut w = FiltersWriter::new(&mut out, 3).unwrap();
            let n = w.push(7, &filter, offset).unwrap();
            assert!(n > 0);
            offset += n;
            let mut small_done = false;
            if offset == filter.len() {
                small_done = w.push(8, &small, 0) == Some(3);
                // An empty filter takes a piece too.
                assert_eq!(w.push(9, &[], 0), Some(0));
            } else {
                assert_eq!(w.push(8, &small, 0), None, "the message is full");
            }
            let len = w.finish(AnswerFlags {
                last: small_done,
                stop_unknown: false,
            });
            assert!(len <= MAX_MESSAGE_LEN);
            let Ok(Message::Filters(m)) = Message::decode(&out[..len]) else {
                panic!("not filters");
            };
            messages += 1;
            for p in m.pieces() {
                assert_eq!(p.offset as usize, if p.height == 7 { got.len() } else { 0 });
                if p.height == 7 {
                    got.extend_from_slice(p.data);
                    assert_eq!(p.ends_filter(), got.len() == filter.len());
                } else if p.height == 8 {
                    assert_eq!(p.data, small);
                } else {
                    assert_eq!((p.height, p.filter_len, p.data.len()), (9, 0, 0));
                    assert!(p.ends_filter());
                }
            }
            assert_eq!(m.flags.last, small_done);
            roundtrip(Message::Filters(m));
        }
        assert_eq!(got, filter);
        assert_eq!(messages, 2);
    }

    #[test]
    fn bad_pieces_are_refused() {
        fn message(
            height: u32,
            filter_len: u32,
            offset: u32,
            data: &[u8],
            extra: &[u8],
        ) -> Vec<u8> {
            let mut p = vec![0, 0, 0, 1, 0, 0, 1];
            p.extend_from_slice(&height.to_be_bytes());
            p.extend_from_slice(&filter_len.to_be_bytes());
            p.extend_from_slice(&offset.to_be_bytes());
            p.extend_from_slice(&(data.len() as u16).to_be_bytes());
            p.extend_from_slice(data);
            p.extend_from_slice(extra);
            p
        }
        assert!(Filters::decode_payload(&message(1, 4, 1, &[1, 2, 3], &[])).is_ok());
        assert_eq!(
            Filters::decode_payload(&message(1, 4, 2, &[1, 2, 3], &[])),
            Err(DecodeError::Filters(FiltersError::PieceOutOfRange {
                index: 0
            }))
        );
        assert_eq!(
            Filters::decode_payload(&message(1, 4, 0, &[], &[])),
            Err(DecodeError::Filters(FiltersError::PieceOutOfRange {
                index: 0
            }))
        );
        assert_eq!(
            Filters::decode_payload(&message(1, u32::MAX, u32::MAX, &[1], &[])),
            Err(DecodeError::Filters(FiltersError::FilterTooLong {
                height: 1,
                len: u32::MAX
            }))
        );
        assert_eq!(
            Filters::decode_payload(&message(1, 3, 0, &[1, 2, 3], &[0])),
            Err(DecodeError::Filters(FiltersError::TrailingBytes { len: 1 }))
        );
        assert!(matches!(
            Filters::decode_payload(&message(1, 3, 0, &[1, 2, 3], &[])[..10]),
            Err(DecodeError::Truncated { .. })
        ));
    }
}
