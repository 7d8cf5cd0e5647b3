//! `headers_compact` (32775): the `headers` answer in about half the bytes, sent instead of
//! `headers` when both sides set [`COMPACT_HEADERS_FEATURE`] in `init` (docs/PROTOCOL.md
//! gives the layout byte by byte).
//!
//! A block header is 80 bytes; 32 of them are the previous block's hash, which a client
//! that checks the chain computes anyway, and version, time and nBits mostly repeat or
//! change by a little. So each header is coded without its previous-block hash, and with
//! version, time and nBits against the header before it:
//!
//! ```text
//! flags u8          bit 0: version follows; bit 1: nBits follows;
//!                   bits 2-3: time form (0: +u8 delta, 1: i16 delta, 2: u32 absolute);
//!                   bits 4-7 and time form 3 are reserved (refused)
//! [version] 4       little-endian, as in the header; absent: the previous header's
//! merkle_root 32
//! time 1, 2 or 4    delta from the previous header's time (big-endian i16), or absolute
//!                   (little-endian, as in the header)
//! [nBits] 4         little-endian; absent: the previous header's
//! nonce 4           little-endian
//! ```
//!
//! A message decodes on its own: its first header carries version, nBits and its time in
//! full. Its headers are split into up to four *segments* of consecutive headers, and the
//! message carries the previous-block hash of each segment's first header (its *anchor*):
//! the receiver then rebuilds the hash chain of the four segments side by side, four
//! headers per SHA-256d in the four lanes of a SIMD vector, instead of one long serial
//! chain. That costs 128 bytes per message (0.1 bytes per header).
//!
//! This crate only expands the coding back into 80-byte headers (each segment's first
//! header with its anchor, the other previous-block hashes zero): filling those in needs
//! the block hashes, which is consensus code (lightwire-proto does it with
//! lightwire-chain's four-lane hash).

use crate::cursor::Reader;
use crate::error::{CompactError, DecodeError, EncodeError};
use crate::message::{MAX_MESSAGE_LEN, TYPE_LEN};
use crate::sync::{HASH_LEN, HEADER_LEN};

/// The feature bit (odd: optional) by which a side says it takes and sends
/// `headers_compact`. A gateway sends `headers_compact` only to a client that set it; a
/// client that set it accepts both `headers` and `headers_compact`.
pub const COMPACT_HEADERS_FEATURE: usize = 257;

/// Most segments in one message.
pub const MAX_SEGMENTS: usize = 4;
/// Bytes of the payload before the anchors: id, first_height, flags, count, segments.
const FIXED: usize = 4 + 4 + 1 + 2 + 1;
/// The shortest coded header: flags, a one-byte time delta, the Merkle root and the nonce.
pub const MIN_CODED_LEN: usize = 1 + 1 + 32 + 4;
/// The longest coded header: every optional field present, the time absolute.
pub const MAX_CODED_LEN: usize = 1 + 4 + 32 + 4 + 4 + 4;
/// Most headers one `headers_compact` can hold (one segment, every header shortest):
/// a receiver's expansion buffer needs this many times 80 bytes.
pub const MAX_COMPACT_HEADERS_PER_MESSAGE: usize =
    (MAX_MESSAGE_LEN - TYPE_LEN - FIXED - HASH_LEN) / MIN_CODED_LEN;

const VERSION: u8 = 1;
const BITS: u8 = 2;
const TIME_SHIFT: u32 = 2;
const TIME_U8: u8 = 0;
const TIME_I16: u8 = 1;
const TIME_ABSOLUTE: u8 = 2;
const RESERVED: u8 = 0xf0;

/// The first header of segment `k` of `segments` over `count` headers (segment `k` holds
/// headers `segment_start(k)..segment_start(k + 1)`).
pub const fn segment_start(count: usize, segments: usize, k: usize) -> usize {
    match (count * k).checked_div(segments) {
        Some(start) => start,
        None => 0,
    }
}

/// The first index of each of `segments` segments over `count` items, and `segments`
/// (the first entries of the array count): what a receiver links a message by.
pub fn segment_starts(count: usize, segments: usize) -> ([usize; MAX_SEGMENTS], usize) {
    (
        core::array::from_fn(|k| segment_start(count, segments, k)),
        segments,
    )
}

/// How many segments an encoder uses for `count` headers: four, or one per header when
/// fewer.
pub const fn segments_for(count: usize) -> usize {
    if count < MAX_SEGMENTS {
        count
    } else {
        MAX_SEGMENTS
    }
}

/// `headers_compact`: consecutive headers of the responder's best chain, coded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadersCompact<'a> {
    /// The request answered.
    pub id: u32,
    /// Height of the first header (of the next one, when there are none).
    pub first_height: u32,
    /// Whether this is the last message answering `id`.
    pub last: bool,
    /// Headers coded in `body`.
    pub count: u16,
    /// `segments * 32` bytes: each segment's anchor (see the module documentation).
    pub anchors: &'a [u8],
    /// The coded headers, back to back.
    pub body: &'a [u8],
}

impl<'a> HeadersCompact<'a> {
    /// The message type.
    pub const TYPE: u16 = 32775;
    const LAST: u8 = 1;

    /// Segments in this message.
    pub const fn segments(&self) -> usize {
        self.anchors.len() / HASH_LEN
    }

    /// The index of each segment's first header, and how many segments there are (the
    /// first entries of the array): what a receiver links the headers by.
    pub fn segment_starts(&self) -> ([usize; MAX_SEGMENTS], usize) {
        segment_starts(usize::from(self.count), self.segments())
    }

    /// Decodes a payload (the bytes after the type). The body is checked by
    /// [`Self::expand`].
    pub fn decode_payload(payload: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let id = r.read_u32("id")?;
        let first_height = r.read_u32("first_height")?;
        let flags = r.read_u8("flags")?;
        let count = r.read_u16("count")?;
        let segments = usize::from(r.read_u8("segments")?);
        let n = usize::from(count);
        if n > MAX_COMPACT_HEADERS_PER_MESSAGE {
            return Err(DecodeError::Compact(CompactError::TooMany { count }));
        }
        if segments > MAX_SEGMENTS || segments > n || (segments == 0) != (n == 0) {
            return Err(DecodeError::Compact(CompactError::Segments {
                segments: segments as u8,
                count,
            }));
        }
        let anchors = r.read_bytes(segments * HASH_LEN, "anchors")?;
        Ok(HeadersCompact {
            id,
            first_height,
            last: flags & Self::LAST != 0,
            count,
            anchors,
            body: r.take_rest(),
        })
    }

    /// Payload length.
    pub const fn payload_len(&self) -> usize {
        FIXED + self.anchors.len() + self.body.len()
    }

    /// Writes the payload as it is (the body unchecked; [`Self::encode_answer`] codes headers).
    pub fn write_payload(&self, w: &mut crate::cursor::Writer<'_>) -> Result<(), EncodeError> {
        let segments = self.segments();
        if self.anchors.len() % HASH_LEN != 0 || segments > MAX_SEGMENTS {
            return Err(EncodeError::FieldTooLong {
                field: "anchors",
                len: self.anchors.len(),
                max: MAX_SEGMENTS * HASH_LEN,
            });
        }
        w.write_u32(self.id)?;
        w.write_u32(self.first_height)?;
        w.write_u8(if self.last { Self::LAST } else { 0 })?;
        w.write_u16(self.count)?;
        w.write_u8(segments as u8)?;
        w.write_bytes(self.anchors)?;
        w.write_bytes(self.body)
    }

    /// Expands the headers into `out`, 80 bytes each (`count * 80` bytes are written):
    /// each segment's first header gets its anchor as previous-block hash, the others
    /// zeros, for the caller to fill in from the block hashes. Fails on a reserved bit, a
    /// first header not coded in full, a time past `u32`, a body that ends early or has
    /// bytes left over, or an `out` too small.
    pub fn expand(&self, out: &mut [u8]) -> Result<(), DecodeError> {
        let n = usize::from(self.count);
        let out =
            out.get_mut(..n * HEADER_LEN)
                .ok_or(DecodeError::Compact(CompactError::TooMany {
                    count: self.count,
                }))?;
        let mut r = Reader::new(self.body);
        let mut prev = (0u32, 0u32, 0u32);
        let segments = self.segments();
        let mut next_anchor = 0;
        for (i, h) in out.chunks_exact_mut(HEADER_LEN).enumerate() {
            let fail = |problem| DecodeError::Compact(problem);
            let flags = r.read_u8("header flags")?;
            let time_form = (flags >> TIME_SHIFT) & 3;
            if flags & RESERVED != 0 || time_form > TIME_ABSOLUTE {
                return Err(fail(CompactError::ReservedBits { index: i as u16 }));
            }
            if i == 0 && (flags & (VERSION | BITS) != VERSION | BITS || time_form != TIME_ABSOLUTE)
            {
                return Err(fail(CompactError::FirstNotInFull));
            }
            let version = if flags & VERSION != 0 {
                le32(r.read_array::<4>("version")?)
            } else {
                prev.0
            };
            let merkle = r.read_array::<32>("merkle_root")?;
            let time = match time_form {
                TIME_U8 => prev.1.checked_add(u32::from(r.read_u8("time")?)),
                TIME_I16 => {
                    let d = r.read_u16("time")? as i16;
                    prev.1.checked_add_signed(i32::from(d))
                }
                _ => Some(le32(r.read_array::<4>("time")?)),
            }
            .ok_or(fail(CompactError::TimeOutOfRange { index: i as u16 }))?;
            let bits = if flags & BITS != 0 {
                le32(r.read_array::<4>("nBits")?)
            } else {
                prev.2
            };
            let nonce = r.read_array::<4>("nonce")?;
            h[0..4].copy_from_slice(&version.to_le_bytes());
            if next_anchor < segments && i == segment_start(n, segments, next_anchor) {
                let a = next_anchor * HASH_LEN;
                h[4..36].copy_from_slice(&self.anchors[a..a + HASH_LEN]);
                next_anchor += 1;
            } else {
                h[4..36].fill(0);
            }
            h[36..68].copy_from_slice(merkle);
            h[68..72].copy_from_slice(&time.to_le_bytes());
            h[72..76].copy_from_slice(&bits.to_le_bytes());
            h[76..80].copy_from_slice(nonce);
            prev = (version, time, bits);
        }
        if !r.is_empty() {
            return Err(DecodeError::Compact(CompactError::TrailingBytes {
                len: r.remaining(),
            }));
        }
        Ok(())
    }

    /// Encodes a whole `headers_compact` message at the start of `out` (a frame body):
    /// the headers `header(0)`, `header(1)`, ... up to `left` of them, as many as fit in
    /// one message (and in `out`); `last` is set when all `left` fit. `header(i)` returns
    /// the 80-byte encoding of the `i`-th, or `None` past the end (the message then ends
    /// there, not last). Returns the message length and how many headers it holds.
    pub fn encode_answer(
        out: &mut [u8],
        id: u32,
        first_height: u32,
        left: usize,
        mut header: impl FnMut(usize) -> Option<[u8; HEADER_LEN]>,
    ) -> Result<(usize, usize), EncodeError> {
        let limit = out.len().min(MAX_MESSAGE_LEN);
        let body_start = TYPE_LEN + FIXED + MAX_SEGMENTS * HASH_LEN;
        if limit < body_start {
            return Err(EncodeError::BufferTooSmall {
                needed: body_start,
                available: out.len(),
            });
        }
        let mut pos = body_start;
        let mut count = 0;
        let mut prev = None;
        let mut ended = false;
        while count < left.min(MAX_COMPACT_HEADERS_PER_MESSAGE) && pos + MAX_CODED_LEN <= limit {
            let Some(h) = header(count) else {
                ended = true;
                break;
            };
            pos += encode_one(&h, prev, &mut out[pos..pos + MAX_CODED_LEN]);
            prev = Some(fields(&h));
            count += 1;
        }
        let segments = segments_for(count);
        // Fewer than four segments: the body moves up over the unused anchors.
        let unused = (MAX_SEGMENTS - segments) * HASH_LEN;
        out.copy_within(body_start..pos, body_start - unused);
        let len = pos - unused;
        let last = count == left && !ended;
        out[..2].copy_from_slice(&Self::TYPE.to_be_bytes());
        out[2..6].copy_from_slice(&id.to_be_bytes());
        out[6..10].copy_from_slice(&first_height.to_be_bytes());
        out[10] = if last { Self::LAST } else { 0 };
        out[11..13].copy_from_slice(&(count as u16).to_be_bytes());
        out[13] = segments as u8;
        for k in 0..segments {
            let h = header(segment_start(count, segments, k)).unwrap_or([0; HEADER_LEN]);
            let at = TYPE_LEN + FIXED + k * HASH_LEN;
            out[at..at + HASH_LEN].copy_from_slice(&h[4..36]);
        }
        Ok((len, count))
    }
}

fn le32(b: &[u8; 4]) -> u32 {
    u32::from_le_bytes(*b)
}

/// Version, time and nBits of an encoded header.
fn fields(h: &[u8; HEADER_LEN]) -> (u32, u32, u32) {
    let at = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    (at(0), at(68), at(72))
}

/// Codes one header against the one before it (`None` for a message's first) into `out`
/// ([`MAX_CODED_LEN`] bytes), returning the length.
fn encode_one(h: &[u8; HEADER_LEN], prev: Option<(u32, u32, u32)>, out: &mut [u8]) -> usize {
    let (version, time, bits) = fields(h);
    let mut flags = 0u8;
    let mut pos = 1;
    if prev.is_none_or(|p| p.0 != version) {
        flags |= VERSION;
        out[pos..pos + 4].copy_from_slice(&h[0..4]);
        pos += 4;
    }
    out[pos..pos + 32].copy_from_slice(&h[36..68]);
    pos += 32;
    let delta = prev.map(|p| i64::from(time) - i64::from(p.1));
    match delta {
        Some(d @ 0..=255) => {
            out[pos] = d as u8;
            pos += 1;
        }
        Some(d) if i16::try_from(d).is_ok() => {
            flags |= TIME_I16 << TIME_SHIFT;
            out[pos..pos + 2].copy_from_slice(&(d as i16).to_be_bytes());
            pos += 2;
        }
        _ => {
            flags |= TIME_ABSOLUTE << TIME_SHIFT;
            out[pos..pos + 4].copy_from_slice(&h[68..72]);
            pos += 4;
        }
    }
    if prev.is_none_or(|p| p.2 != bits) {
        flags |= BITS;
        out[pos..pos + 4].copy_from_slice(&h[72..76]);
        pos += 4;
    }
    out[pos..pos + 4].copy_from_slice(&h[76..80]);
    pos += 4;
    out[0] = flags;
    pos
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::message::Message;

    /// Headers with every kind of change: versions that change or not, times forward and
    /// back by small and large steps, nBits that change at times.
    fn headers(n: usize) -> std::vec::Vec<[u8; HEADER_LEN]> {
        let mut time = 1_231_006_505u32;
        (0..n)
            .map(|i| {
                let mut h = [0u8; HEADER_LEN];
                let version: u32 = if i % 7 == 3 {
                    0x2000_0000 | i as u32
                } else {
                    4
                };
                time = match i % 5 {
                    0 => time.wrapping_add(600),
                    1 => time.wrapping_add(17),
                    2 => time.wrapping_sub(3000),
                    3 => time.wrapping_add(100_000),
                    _ => time,
                };
                let bits: u32 = if i % 11 == 0 {
                    0x1d00_ffff
                } else {
                    0x1c00_ffff
                };
                h[0..4].copy_from_slice(&version.to_le_bytes());
                h[4..36].fill(i as u8); // a previous-block hash: not sent
                h[36..68].fill((i * 7) as u8);
                h[68..72].copy_from_slice(&time.to_le_bytes());
                h[72..76].copy_from_slice(&bits.to_le_bytes());
                h[76..80].copy_from_slice(&(i as u32).wrapping_mul(2_654_435_761).to_le_bytes());
                h
            })
            .collect()
    }

    fn encode(hs: &[[u8; HEADER_LEN]], left: usize) -> (std::vec::Vec<u8>, usize) {
        let mut out = std::vec![0u8; MAX_MESSAGE_LEN];
        let (len, count) =
            HeadersCompact::encode_answer(&mut out, 9, 100, left, |i| hs.get(i).copied()).unwrap();
        out.truncate(len);
        (out, count)
    }

    /// `hs` as the receiver sees them: each segment's first previous-block hash kept.
    fn expected(hs: &[[u8; HEADER_LEN]]) -> std::vec::Vec<u8> {
        let segments = segments_for(hs.len());
        let starts: std::vec::Vec<usize> = (0..segments)
            .map(|k| segment_start(hs.len(), segments, k))
            .collect();
        hs.iter()
            .enumerate()
            .flat_map(|(i, h)| {
                let mut h = *h;
                if !starts.contains(&i) {
                    h[4..36].fill(0);
                }
                h
            })
            .collect()
    }

    #[test]
    fn headers_round_trip_for_every_count_up_to_a_few_segments() {
        let hs = headers(40);
        for n in 0..=hs.len() {
            let (bytes, count) = encode(&hs[..n], n);
            assert_eq!(count, n);
            let Ok(Message::HeadersCompact(m)) = Message::decode(&bytes) else {
                panic!("{n} headers do not decode");
            };
            assert!(m.last && m.id == 9 && m.first_height == 100);
            assert_eq!(m.segments(), segments_for(n));
            let mut out = std::vec![0u8; n * HEADER_LEN];
            m.expand(&mut out).unwrap();
            assert_eq!(out, expected(&hs[..n]), "{n} headers");
            // Re-encoding the decoded message gives the same bytes.
            let mut again = std::vec![0u8; bytes.len()];
            assert_eq!(
                Message::HeadersCompact(m).encode(&mut again),
                Ok(bytes.len())
            );
            assert_eq!(again, bytes);
        }
    }

    #[test]
    fn a_full_message_stops_where_the_next_header_might_not_fit_and_is_not_last() {
        let hs = headers(3000);
        let (bytes, count) = encode(&hs, hs.len());
        assert!(bytes.len() <= MAX_MESSAGE_LEN);
        assert!(
            bytes.len() + MAX_CODED_LEN > MAX_MESSAGE_LEN,
            "{} bytes",
            bytes.len()
        );
        assert!(
            count > 1200 && count <= MAX_COMPACT_HEADERS_PER_MESSAGE,
            "{count}"
        );
        let Ok(Message::HeadersCompact(m)) = Message::decode(&bytes) else {
            panic!()
        };
        assert!(!m.last);
        let mut out = std::vec![0u8; MAX_COMPACT_HEADERS_PER_MESSAGE * HEADER_LEN];
        m.expand(&mut out).unwrap();
        assert_eq!(out[..count * HEADER_LEN], expected(&hs[..count])[..]);
        // A source that runs out early ends the message there, not last.
        let mut buf = std::vec![0u8; MAX_MESSAGE_LEN];
        let (_, n) =
            HeadersCompact::encode_answer(&mut buf, 1, 0, 10, |i| hs[..4].get(i).copied()).unwrap();
        assert_eq!(n, 4);
        assert_eq!(buf[10], 0, "not last");
    }

    /// Coded sizes: 38 bytes for a header whose version and nBits repeat and whose time
    /// moved forward by under 256 s, 39 within 9 hours, 4 more for each field that changed
    /// or a time past that, 49 in full.
    #[test]
    fn coded_sizes() {
        let mut out = [0u8; MAX_CODED_LEN];
        let hs = headers(8);
        let size = |i: usize, out: &mut [u8]| encode_one(&hs[i], Some(fields(&hs[i - 1])), out);
        assert_eq!(encode_one(&hs[0], None, &mut out), MAX_CODED_LEN);
        assert_eq!(size(6, &mut out), 38, "+17 s");
        assert_eq!(size(2, &mut out), 39, "-3000 s");
        assert_eq!(size(1, &mut out), 42, "+17 s, new nBits");
        assert_eq!(size(3, &mut out), 45, "+100,000 s, new version");
    }

    #[test]
    fn broken_bodies_are_typed_errors() {
        let hs = headers(8);
        let (bytes, _) = encode(&hs, 8);
        let body_at = TYPE_LEN + FIXED + 4 * HASH_LEN;
        let decode_expand = |b: &[u8]| -> Result<(), DecodeError> {
            match Message::decode(b)? {
                Message::HeadersCompact(m) => m.expand(&mut [0u8; 8 * HEADER_LEN]),
                other => panic!("{other:?}"),
            }
        };
        let mut b = bytes.clone();
        b[body_at] |= 0x10;
        assert_eq!(
            decode_expand(&b),
            Err(DecodeError::Compact(CompactError::ReservedBits {
                index: 0
            }))
        );
        let mut b = bytes.clone();
        b[body_at] |= 3 << TIME_SHIFT;
        assert_eq!(
            decode_expand(&b),
            Err(DecodeError::Compact(CompactError::ReservedBits {
                index: 0
            }))
        );
        let mut b = bytes.clone();
        b[body_at] &= !BITS;
        assert_eq!(
            decode_expand(&b),
            Err(DecodeError::Compact(CompactError::FirstNotInFull))
        );
        let mut b = bytes.clone();
        b.push(0);
        assert_eq!(
            decode_expand(&b),
            Err(DecodeError::Compact(CompactError::TrailingBytes { len: 1 }))
        );
        for cut in body_at..bytes.len() {
            assert!(
                matches!(
                    decode_expand(&bytes[..cut]),
                    Err(DecodeError::Truncated { .. })
                ),
                "cut at {cut}"
            );
        }
        // Segments: more than four, more than headers, or none for some headers.
        for (segments, count) in [(5u8, 8u16), (3, 2), (0, 1), (1, 0)] {
            let mut b = bytes[..body_at].to_vec();
            b[11..13].copy_from_slice(&count.to_be_bytes());
            b[13] = segments;
            assert_eq!(
                Message::decode(&b),
                Err(DecodeError::Compact(CompactError::Segments {
                    segments,
                    count
                }))
            );
        }
        let mut b = bytes[..body_at].to_vec();
        let too_many = MAX_COMPACT_HEADERS_PER_MESSAGE as u16 + 1;
        b[11..13].copy_from_slice(&too_many.to_be_bytes());
        assert_eq!(
            Message::decode(&b),
            Err(DecodeError::Compact(CompactError::TooMany {
                count: too_many
            }))
        );
        // A time delta that carries past u32: the second header is coded +5 s after a first
        // at u32::MAX - 10, then its delta byte is made 255.
        let mut late = [hs[0], hs[0]];
        late[0][68..72].copy_from_slice(&(u32::MAX - 10).to_le_bytes());
        late[1][68..72].copy_from_slice(&(u32::MAX - 5).to_le_bytes());
        let (b, _) = encode(&late, 2);
        let second = body_at - 2 * HASH_LEN + MAX_CODED_LEN;
        assert_eq!(
            b[second],
            TIME_U8 << TIME_SHIFT,
            "second header: +5 s, all else repeated"
        );
        let expand = |b: &[u8]| match Message::decode(b) {
            Ok(Message::HeadersCompact(m)) => m.expand(&mut [0u8; 2 * HEADER_LEN]),
            other => panic!("{other:?}"),
        };
        assert_eq!(expand(&b), Ok(()));
        let mut over = b.clone();
        over[second + 1 + 32] = 255;
        assert_eq!(
            expand(&over),
            Err(DecodeError::Compact(CompactError::TimeOutOfRange {
                index: 1
            }))
        );
    }
}
