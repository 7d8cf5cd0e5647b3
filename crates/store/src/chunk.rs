//! The coding of the headers in a chunk record: each header without its previous-block
//! hash, and with version, time and nBits against the header before it, in *pieces* of at
//! most [`MAX_PIECE_LEN`] bytes. The store owns this coding: it is part of the stored
//! layout, and changes only with a layout version and a migration, whatever the protocol
//! between client and gateway does.
//!
//! The coding is the one the wire protocol's `headers_compact` message uses
//! (docs/PROTOCOL.md), and layouts 2 and 3 wrote each piece as such a message (through
//! `lightwire-wire`). This module writes and reads the very same bytes, so the chunks those
//! layouts stored read as they are: no data migration is needed for chunks (the tests
//! check a chunk written by that code, byte for byte).
//!
//! A piece:
//!
//! ```text
//! tag u16           32775, big-endian (it was the message type of `headers_compact`)
//! reserved u32      0 (it was the request id); not read
//! first_height u32  big-endian: the height of the piece's first header
//! flags u8          bit 0: the chunk's last piece (it was the answer's `last`); not read
//! count u16         big-endian: headers in the piece, at most MAX_PIECE_HEADERS
//! segments u8       1 to 4 (0 only for no headers): see below
//! anchors           segments * 32 bytes: each segment's previous-block hash
//! body              the coded headers, back to back
//! ```
//!
//! A coded header:
//!
//! ```text
//! flags u8          bit 0: version follows; bit 1: nBits follows;
//!                   bits 2-3: time form (0: +u8 delta, 1: i16 delta, 2: u32 absolute);
//!                   bits 4-7 and time form 3 are refused
//! [version] 4       little-endian, as in the header; absent: the previous header's
//! merkle_root 32
//! time 1, 2 or 4    delta from the previous header's time (big-endian i16), or absolute
//!                   (little-endian, as in the header)
//! [nBits] 4         little-endian; absent: the previous header's
//! nonce 4           little-endian
//! ```
//!
//! A piece's first header is coded in full. Its headers are split into up to four
//! *segments* of consecutive headers (segment `k` of `s` over `n` headers starts at
//! `n * k / s`); the piece keeps each segment's first previous-block hash (its anchor), so
//! that a reader rebuilds the four hash chains side by side
//! (`lightwire_chain::link_segments`).

use lightwire_chain::HEADER_LEN;

/// Longest piece: the wire protocol's message limit when layout 2 was made, and part of the
/// layout since (where one piece ends and the next starts depends on it).
pub const MAX_PIECE_LEN: usize = 65535;
/// The tag every piece starts with.
const TAG: u16 = 32775;
/// Bytes before the anchors: tag, reserved, first height, flags, count, segments.
const FIXED: usize = 2 + 4 + 4 + 1 + 2 + 1;
/// Most segments in a piece.
const MAX_SEGMENTS: usize = 4;
const HASH_LEN: usize = 32;
/// The shortest coded header: flags, a one-byte time delta, the Merkle root and the nonce.
const MIN_CODED_LEN: usize = 1 + 1 + 32 + 4;
/// The longest coded header: every optional field present, the time absolute.
pub const MAX_CODED_LEN: usize = 1 + 4 + 32 + 4 + 4 + 4;
/// Most headers in a piece (one segment, every header shortest).
pub const MAX_PIECE_HEADERS: usize = (MAX_PIECE_LEN - FIXED - HASH_LEN) / MIN_CODED_LEN;
/// The flags byte of a chunk's last piece.
const LAST: u8 = 1;

const VERSION: u8 = 1;
const BITS: u8 = 2;
const TIME_SHIFT: u32 = 2;
const TIME_I16: u8 = 1;
const TIME_ABSOLUTE: u8 = 2;
const RESERVED: u8 = 0xf0;

/// The first header of segment `k` of `segments` over `count` headers.
fn segment_start(count: usize, segments: usize, k: usize) -> usize {
    (count * k).checked_div(segments).unwrap_or(0)
}

/// Append one piece to `out`: the first of `headers` (80 bytes each, at heights from
/// `first_height`), as many as fit. Returns how many it holds (at least one, if there is
/// one). Their previous-block hashes are not kept (but for the anchors): the caller checks
/// that they link before calling.
pub fn push_piece(headers: &[u8], first_height: u32, out: &mut Vec<u8>) -> usize {
    let left = headers.len() / HEADER_LEN;
    let header = |i: usize| -> &[u8; HEADER_LEN] {
        // In bounds: i < left. A fixed-size view, so that the fields are plain indexes.
        headers[i * HEADER_LEN..(i + 1) * HEADER_LEN]
            .try_into()
            .unwrap_or(&[0; HEADER_LEN])
    };
    let start = out.len();
    out.extend_from_slice(&TAG.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&first_height.to_be_bytes());
    out.extend_from_slice(&[0; 4]); // flags, count, segments: below
    // Room for four anchors while coding: a piece ends where a longest header might not
    // fit, reckoned with four (the stored bytes depend on this rule).
    let anchors_at = out.len();
    out.resize(anchors_at + MAX_SEGMENTS * HASH_LEN, 0);
    let mut count = 0;
    while count < left.min(MAX_PIECE_HEADERS) && out.len() - start + MAX_CODED_LEN <= MAX_PIECE_LEN
    {
        let prev = count.checked_sub(1).map(header);
        code_header(header(count), prev, out);
        count += 1;
    }
    let segments = count.min(MAX_SEGMENTS);
    // Fewer than four segments: the body moves up over the unused anchors.
    out.drain(anchors_at + segments * HASH_LEN..anchors_at + MAX_SEGMENTS * HASH_LEN);
    for k in 0..segments {
        let h = header(segment_start(count, segments, k));
        let at = anchors_at + k * HASH_LEN;
        out[at..at + HASH_LEN].copy_from_slice(&h[4..36]);
    }
    let fixed = &mut out[start..anchors_at];
    fixed[10] = if count == left { LAST } else { 0 };
    fixed[11..13].copy_from_slice(&(count as u16).to_be_bytes());
    fixed[13] = segments as u8;
    count
}

/// Version, time and nBits of an 80-byte header.
fn fields(h: &[u8; HEADER_LEN]) -> (u32, u32, u32) {
    let at = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    (at(0), at(68), at(72))
}

/// Append the coding of `h` against the header before it in the piece (`None` for the
/// first).
fn code_header(h: &[u8; HEADER_LEN], prev: Option<&[u8; HEADER_LEN]>, out: &mut Vec<u8>) {
    let (version, time, bits) = fields(h);
    let prev = prev.map(fields);
    let flags_at = out.len();
    out.push(0);
    let mut flags = 0u8;
    if prev.is_none_or(|p| p.0 != version) {
        flags |= VERSION;
        out.extend_from_slice(&h[0..4]);
    }
    out.extend_from_slice(&h[36..68]);
    match prev.map(|p| i64::from(time) - i64::from(p.1)) {
        Some(d @ 0..=255) => out.push(d as u8),
        Some(d) if i16::try_from(d).is_ok() => {
            flags |= TIME_I16 << TIME_SHIFT;
            out.extend_from_slice(&(d as i16).to_be_bytes());
        }
        _ => {
            flags |= TIME_ABSOLUTE << TIME_SHIFT;
            out.extend_from_slice(&h[68..72]);
        }
    }
    if prev.is_none_or(|p| p.2 != bits) {
        flags |= BITS;
        out.extend_from_slice(&h[72..76]);
    }
    out.extend_from_slice(&h[76..80]);
    out[flags_at] = flags;
}

/// A stored piece, read by borrowing; its body is checked by [`Piece::expand`].
#[derive(Clone, Copy, Debug)]
pub struct Piece<'a> {
    /// Height of its first header.
    pub first_height: u32,
    /// Headers it holds.
    pub count: usize,
    anchors: &'a [u8],
    body: &'a [u8],
}

/// Why a piece does not read (the `what` of a [`crate::StoreError::Corrupt`]).
pub type PieceError = &'static str;

/// Take `n` bytes from the front of `rest`.
fn take<'a>(rest: &mut &'a [u8], n: usize) -> Result<&'a [u8], PieceError> {
    let (head, tail) = rest
        .split_at_checked(n)
        .ok_or("chunk record piece cut short")?;
    *rest = tail;
    Ok(head)
}

fn take_array<const N: usize>(rest: &mut &[u8]) -> Result<[u8; N], PieceError> {
    take(rest, N)?
        .try_into()
        .map_err(|_| "chunk record piece cut short")
}

impl<'a> Piece<'a> {
    /// Read a piece's fixed part and anchors.
    pub fn decode(piece: &'a [u8]) -> Result<Piece<'a>, PieceError> {
        let mut rest = piece;
        if u16::from_be_bytes(take_array(&mut rest)?) != TAG {
            return Err("chunk record piece tag");
        }
        take(&mut rest, 4)?; // reserved
        let first_height = u32::from_be_bytes(take_array(&mut rest)?);
        take(&mut rest, 1)?; // flags
        let count = usize::from(u16::from_be_bytes(take_array(&mut rest)?));
        let [segments] = take_array::<1>(&mut rest)?;
        let segments = usize::from(segments);
        if count > MAX_PIECE_HEADERS
            || segments > MAX_SEGMENTS
            || segments > count
            || (segments == 0) != (count == 0)
        {
            return Err("chunk record piece segments");
        }
        let anchors = take(&mut rest, segments * HASH_LEN)?;
        Ok(Piece {
            first_height,
            count,
            anchors,
            body: rest,
        })
    }

    /// The index of each segment's first header, and how many segments there are (the
    /// first entries of the array): what the headers are linked by.
    pub fn segment_starts(&self) -> ([usize; MAX_SEGMENTS], usize) {
        let segments = self.anchors.len() / HASH_LEN;
        (
            core::array::from_fn(|k| segment_start(self.count, segments, k)),
            segments,
        )
    }

    /// Expand the headers into `out`, 80 bytes each (`count * 80` bytes, which `out` must
    /// hold): each segment's first header gets its anchor as previous-block hash, the
    /// others zeros, for the caller to fill in from the block hashes.
    pub fn expand(&self, out: &mut [u8]) -> Result<(), PieceError> {
        let out = out
            .get_mut(..self.count * HEADER_LEN)
            .ok_or("chunk record piece too long")?;
        let (starts, segments) = self.segment_starts();
        let mut rest = self.body;
        let mut prev = (0u32, 0u32, 0u32);
        let mut next_anchor = 0;
        for (i, h) in out.chunks_exact_mut(HEADER_LEN).enumerate() {
            let [flags] = take_array::<1>(&mut rest)?;
            let time_form = (flags >> TIME_SHIFT) & 3;
            if flags & RESERVED != 0 || time_form > TIME_ABSOLUTE {
                return Err("chunk record piece reserved bits");
            }
            if i == 0 && (flags & (VERSION | BITS) != VERSION | BITS || time_form != TIME_ABSOLUTE)
            {
                return Err("chunk record piece first header not in full");
            }
            let version = match flags & VERSION {
                0 => prev.0,
                _ => u32::from_le_bytes(take_array(&mut rest)?),
            };
            let merkle = take(&mut rest, 32)?;
            let time = match time_form {
                0 => prev
                    .1
                    .checked_add(u32::from(take_array::<1>(&mut rest)?[0])),
                TIME_I16 => {
                    let d = i16::from_be_bytes(take_array(&mut rest)?);
                    prev.1.checked_add_signed(i32::from(d))
                }
                _ => Some(u32::from_le_bytes(take_array(&mut rest)?)),
            }
            .ok_or("chunk record piece time out of range")?;
            let bits = match flags & BITS {
                0 => prev.2,
                _ => u32::from_le_bytes(take_array(&mut rest)?),
            };
            let nonce = take(&mut rest, 4)?;
            h[0..4].copy_from_slice(&version.to_le_bytes());
            if next_anchor < segments && i == starts[next_anchor] {
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
        if !rest.is_empty() {
            return Err("chunk record piece has bytes left over");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use lightwire_chain::{BlockHash, REGTEST, hash_header_bytes};
    use sha2::{Digest, Sha256};

    use super::*;
    use crate::layout::{encode_chunk, expand_chunk};

    /// A chunk as layout 3 wrote it (through `lightwire-wire`'s `headers_compact`): no
    /// work, then regtest's genesis header and the first four generated after it
    /// (`generate::headers_after(&REGTEST, &REGTEST.genesis, 0, 4, 0)`), in one piece.
    const LAYOUT_3_CHUNK: &str = "\
        0000000000000000000000000000000000000000000000000000000000000000015f800700000000\
        0000000001000504000000000000000000000000000000000000000000000000000000000000000006\
        226e46111a0b59caaf126043eb5bbf28c34f3a5e332a1fc7b2b73cf188910f90c8daaf9e6690bfbfb2\
        839cef922eae9850f8ef5d7ff62b400c79f1010cdc712d158536148d617fcda93e4c0a6708c0c9fbd1\
        ef67293cbde03166e2bcb4c77b0b010000003ba3edfd7a7b12b27ac72c3e67768f617fc81bc3888a51\
        323a9fb8aa4b1e5e4adae5494dffff7f20020000000500000020894f33e8d76fb97f9bdf22cb580260\
        56529e85c9e3305046e14071f17043fd0c012c05000000046c1ad2b69480f2f50bd5caade74c8e5726\
        3a27f4ffa86dba6a4c591ce3daabaa012c0200000004c29462d11bfcb683e5c069e7e2b527d57679f9\
        5ed7a76f1d5a99efed0d33d6db012c000000000426967bb990fc542d33e0ce46be86f1da375129f6d2\
        6a7f0143b278e774b6b280012c00000000";

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn hex_digest(b: &[u8]) -> String {
        Sha256::digest(b)
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect()
    }

    /// `n` regtest headers from genesis held as a chunk (no work, then 80-byte headers),
    /// with their hashes.
    fn regtest(n: u32) -> (Vec<u8>, Vec<BlockHash>) {
        let after =
            lightwire_chain::generate::headers_after(&REGTEST, &REGTEST.genesis, 0, n - 1, 0);
        let mut held = vec![0u8; 32];
        let mut hashes = Vec::new();
        for h in [REGTEST.genesis].iter().chain(&after) {
            held.extend_from_slice(&h.encode());
            hashes.push(h.block_hash());
        }
        (held, hashes)
    }

    /// `n` linked headers with every coded form: versions that change or not, times
    /// forward and back by small and large steps, nBits that change at times (no proof of
    /// work: the coding does not look at it).
    fn varied(n: usize) -> (Vec<u8>, Vec<BlockHash>) {
        let mut held = vec![7u8; 32];
        let mut hashes = Vec::new();
        let (mut time, mut prev) = (1_231_006_505u32, [0u8; 32]);
        for i in 0..n {
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
            h[4..36].copy_from_slice(&prev);
            h[36..68].fill((i * 7) as u8);
            h[68..72].copy_from_slice(&time.to_le_bytes());
            h[72..76].copy_from_slice(&bits.to_le_bytes());
            h[76..80].copy_from_slice(&(i as u32).wrapping_mul(2_654_435_761).to_le_bytes());
            let hash = hash_header_bytes(&h);
            prev = hash.0;
            hashes.push(hash);
            held.extend_from_slice(&h);
        }
        (held, hashes)
    }

    /// Code `held` (at `first_height`), check the stored bytes against `digest` (SHA-256
    /// of what layout 3 wrote for the same chunk) and `len`, and read them back.
    fn same_as_layout_3(
        (held, hashes): (Vec<u8>, Vec<BlockHash>),
        first_height: u32,
        len: usize,
        digest: &str,
    ) {
        let mut stored = Vec::new();
        encode_chunk(&held, first_height, |i| hashes[i], &mut stored).unwrap();
        assert_eq!((stored.len(), hex_digest(&stored).as_str()), (len, digest));
        let (mut back, mut back_hashes) = (Vec::new(), Vec::new());
        expand_chunk(&stored, first_height, 2016, &mut back, &mut back_hashes).unwrap();
        assert_eq!((back, back_hashes), (held, hashes));
    }

    #[test]
    fn a_chunk_written_by_layout_3_reads_back_and_is_written_the_same() {
        let stored = unhex(LAYOUT_3_CHUNK);
        let (held, hashes) = regtest(5);
        let (mut back, mut back_hashes) = (Vec::new(), Vec::new());
        expand_chunk(&stored, 0, 2016, &mut back, &mut back_hashes).unwrap();
        assert_eq!((back, back_hashes), (held.clone(), hashes.clone()));
        let mut again = Vec::new();
        encode_chunk(&held, 0, |i| hashes[i], &mut again).unwrap();
        assert_eq!(again, stored);
    }

    /// Whole chunks of two pieces (where the first ends depends on the piece rules), and
    /// every coded form, give the bytes layout 3 gave.
    #[test]
    fn chunks_are_written_as_layout_3_wrote_them() {
        same_as_layout_3(
            regtest(2016),
            0,
            78968,
            "f4c304579ca7db2f96812c848bda59799411e5845f09c076e8d3991d603ca672",
        );
        same_as_layout_3(
            regtest(1724),
            0,
            67580,
            "4bd53994da23b6638308405457dc4587e4576c0a7b3bdf2aefb5753283fe8902",
        );
        same_as_layout_3(
            varied(2016),
            4032,
            82733,
            "8505aa2fad8134a07dd13ed55857ce6f6bde0568c0300b0f74f7c6f07a7fd283",
        );
        same_as_layout_3(
            varied(40),
            4032,
            1822,
            "7fa0807e289937cf85562aa909b4f7befbb28b30be8baa9056f3945b28402820",
        );
        same_as_layout_3(
            varied(2),
            4032,
            203,
            "1d3724bec6c878877e58556b646716a41780bfd5a493225d5133457a3a5bc453",
        );
    }

    #[test]
    fn a_piece_that_breaks_the_coding_is_refused() {
        let (held, hashes) = varied(10);
        let mut stored = Vec::new();
        encode_chunk(&held, 0, |i| hashes[i], &mut stored).unwrap();
        let piece = &stored[32 + 2..];
        assert_eq!(Piece::decode(piece).unwrap().count, 10);
        let body_at = FIXED + MAX_SEGMENTS * HASH_LEN;
        let expand = |p: &[u8]| Piece::decode(p)?.expand(&mut [0u8; 10 * HEADER_LEN]);
        assert_eq!(expand(piece), Ok(()));
        let broken = |at: usize, f: fn(&mut u8)| {
            let mut p = piece.to_vec();
            f(&mut p[at]);
            expand(&p)
        };
        assert_eq!(broken(0, |b| *b ^= 1), Err("chunk record piece tag"));
        assert_eq!(broken(13, |b| *b = 5), Err("chunk record piece segments"));
        assert_eq!(
            broken(body_at, |b| *b |= 0x10),
            Err("chunk record piece reserved bits")
        );
        assert_eq!(
            broken(body_at, |b| *b &= !BITS),
            Err("chunk record piece first header not in full")
        );
        let mut longer = piece.to_vec();
        longer.push(0);
        assert_eq!(
            expand(&longer),
            Err("chunk record piece has bytes left over")
        );
        for cut in 0..piece.len() {
            assert!(expand(&piece[..cut]).is_err(), "cut at {cut}");
        }
    }
}
