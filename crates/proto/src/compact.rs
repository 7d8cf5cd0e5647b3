//! The receiving half of `headers_compact`: the headers expanded to their 80-byte form and
//! their previous-block hashes filled in from the block hashes, which are kept for
//! validation, so each header is hashed once.
//!
//! The message's segments (lightwire-wire's `compact` module) are linked side by side by
//! [`lightwire_chain::link_segments`]: step `j` hashes header `j` of each of the four
//! segments at once (the four SIMD128 lanes in wasm), and header `j + 1` of each takes its
//! previous-block hash from that. Whether the segments join up (each anchor is
//! the hash of the header before it) is not checked here: validation compares every
//! header's previous-block hash with its parent's hash anyway.

use lightwire_chain::{BlockHash, HEADER_LEN, link_filter_headers, link_segments};
use lightwire_primitives::{FilterHash, FilterHeader};
use lightwire_wire::filters::MAX_FILTER_HASHES_PER_MESSAGE;
use lightwire_wire::{DecodeError, FilterHeaders, HeadersCompact, MAX_COMPACT_HEADERS_PER_MESSAGE};

/// A receiver's buffers for one expanded message: its headers and their block hashes, or
/// the filter headers of a `filter_headers`.
pub struct Expanded {
    headers: Box<[u8]>,
    hashes: Box<[BlockHash]>,
    filter_hashes: Box<[FilterHash]>,
    filter_anchors: [FilterHeader; 4],
    filter_headers: Box<[FilterHeader]>,
}

impl Default for Expanded {
    fn default() -> Self {
        Self::new()
    }
}

impl Expanded {
    /// Buffers for the largest message (about 190 KB, allocated once).
    pub fn new() -> Expanded {
        Expanded {
            headers: vec![0; MAX_COMPACT_HEADERS_PER_MESSAGE * HEADER_LEN].into_boxed_slice(),
            hashes: vec![BlockHash::ZERO; MAX_COMPACT_HEADERS_PER_MESSAGE].into_boxed_slice(),
            filter_hashes: vec![FilterHash::ZERO; MAX_FILTER_HASHES_PER_MESSAGE].into_boxed_slice(),
            filter_anchors: [FilterHeader::ZERO; 4],
            filter_headers: vec![FilterHeader::ZERO; MAX_FILTER_HASHES_PER_MESSAGE]
                .into_boxed_slice(),
        }
    }

    /// The filter headers of `m`, rebuilt from its filter hashes four segments at a time,
    /// with the header before the first, and the hashes; `None` when its segments do not
    /// join.
    pub fn link_filter_headers(
        &mut self,
        m: &FilterHeaders<'_>,
    ) -> Option<(FilterHeader, &[FilterHeader], &[FilterHash])> {
        let count = m.count().min(self.filter_hashes.len());
        for (dst, src) in self.filter_hashes.iter_mut().zip(m.hashes.chunks_exact(32)) {
            dst.0.copy_from_slice(src);
        }
        let (starts, segments) = m.segment_starts();
        for (dst, src) in self
            .filter_anchors
            .iter_mut()
            .zip(m.anchors.chunks_exact(32))
        {
            dst.0.copy_from_slice(src);
        }
        let joined = link_filter_headers(
            &self.filter_hashes[..count],
            &self.filter_anchors[..segments],
            &starts[..segments],
            &mut self.filter_headers[..count],
        );
        let before = if segments > 0 {
            self.filter_anchors[0]
        } else {
            FilterHeader::ZERO
        };
        joined.then_some((
            before,
            &self.filter_headers[..count],
            &self.filter_hashes[..count],
        ))
    }

    /// Expand `m` and link its headers: returns the headers (80 bytes each) and their
    /// block hashes.
    pub fn expand(&mut self, m: &HeadersCompact<'_>) -> Result<(&[u8], &[BlockHash]), DecodeError> {
        m.expand(&mut self.headers)?;
        let count = usize::from(m.count);
        let (starts, segments) = m.segment_starts();
        link_segments(
            &mut self.headers[..count * HEADER_LEN],
            &starts[..segments],
            &mut self.hashes[..count],
        );
        Ok((&self.headers[..count * HEADER_LEN], &self.hashes[..count]))
    }

    /// The block hashes of `headers` (80 bytes each, consecutive, already whole: a plain
    /// `headers` message), four at a time, into the hash buffer.
    pub fn hash(&mut self, headers: &[u8]) -> &[BlockHash] {
        let n = lightwire_chain::hash_headers(headers, &mut self.hashes);
        &self.hashes[..n]
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use lightwire_chain::{Header, REGTEST};
    use lightwire_wire::{MAX_MESSAGE_LEN, Message};

    use super::*;

    fn chain(n: u32) -> Vec<[u8; HEADER_LEN]> {
        lightwire_chain::generate::headers_after(&REGTEST, &REGTEST.genesis, 0, n, 0)
            .iter()
            .map(Header::encode)
            .collect()
    }

    #[test]
    fn expanded_headers_and_hashes_equal_the_originals_for_every_count() {
        let hs = chain(1500);
        let mut e = Expanded::new();
        let mut out = vec![0u8; MAX_MESSAGE_LEN];
        for n in (0..12).chain([63, 64, 65, 1000, 1500]) {
            let (len, count) =
                HeadersCompact::encode_answer(&mut out, 1, 1, n, |i| hs.get(i).copied()).unwrap();
            assert_eq!(count, n);
            let Ok(Message::HeadersCompact(m)) = Message::decode(&out[..len]) else {
                panic!("{n}");
            };
            let (headers, hashes) = e.expand(&m).unwrap();
            assert_eq!(headers, hs[..n].concat(), "{n} headers");
            let want: Vec<BlockHash> = hs[..n]
                .iter()
                .map(lightwire_chain::hash_header_bytes)
                .collect();
            assert_eq!(hashes, want, "{n} hashes");
        }
    }

    /// A gateway that forges an anchor (so that a segment hangs off a header that is not
    /// the one before it) gets its headers expanded as sent, and refused by validation:
    /// the segment's first header names another parent.
    #[test]
    fn a_forged_anchor_is_refused_by_validation() {
        let hs = chain(400);
        let mut out = vec![0u8; MAX_MESSAGE_LEN];
        let (len, _) =
            HeadersCompact::encode_answer(&mut out, 1, 1, 400, |i| hs.get(i).copied()).unwrap();
        // The third anchor (segment 2 starts at header 200): point it at header 150.
        let at = 2 + 12 + 2 * 32;
        out[at..at + 32].copy_from_slice(&lightwire_chain::hash_header_bytes(&hs[150]).0);
        let Ok(Message::HeadersCompact(m)) = Message::decode(&out[..len]) else {
            panic!()
        };
        let mut e = Expanded::new();
        let (headers, hashes) = e.expand(&m).unwrap();
        let decoded: Vec<Header> = crate::decode_headers(headers).collect();
        let mut chain = lightwire_chain::Chain::new(&REGTEST);
        let refused = chain
            .connect_hashed(&decoded, hashes, 2_000_000_000)
            .unwrap_err();
        assert!(
            matches!(
                refused,
                lightwire_chain::ConnectError::Invalid(lightwire_chain::ValidationError {
                    height: 201,
                    rule: lightwire_chain::Rule::PrevHashMismatch { .. },
                })
            ),
            "{refused:?}"
        );
        assert_eq!(chain.tip().height, 0, "nothing of the batch kept");
    }

    /// Bytes on the wire per header (message fields included, transport framing not) over
    /// a whole answer of `hs`, checking that every message expands to the originals.
    fn bytes_per_header(hs: &[[u8; HEADER_LEN]]) -> f64 {
        let mut e = Expanded::new();
        let mut out = vec![0u8; MAX_MESSAGE_LEN];
        let (mut at, mut wire) = (0, 0);
        while at < hs.len() {
            let (len, count) =
                HeadersCompact::encode_answer(&mut out, 1, at as u32, hs.len() - at, |i| {
                    hs.get(at + i).copied()
                })
                .unwrap();
            let Ok(Message::HeadersCompact(m)) = Message::decode(&out[..len]) else {
                panic!()
            };
            let (headers, _) = e.expand(&m).unwrap();
            assert_eq!(headers, hs[at..at + count].concat());
            at += count;
            wire += len;
        }
        wire as f64 / hs.len() as f64
    }

    /// The figures docs/PROTOCOL.md gives (`--nocapture` prints them).
    #[test]
    fn real_and_generated_headers_take_about_39_bytes_each_and_expand_exactly() {
        let bytes = include_bytes!(concat!(
            env!("LIGHTWIRE_SHARED"),
            "/data/headers/mainnet_0-39999.bin"
        ));
        let real: Vec<[u8; HEADER_LEN]> = bytes
            .chunks_exact(HEADER_LEN)
            .map(|c| c.try_into().unwrap())
            .collect();
        let real = bytes_per_header(&real);
        let generated = bytes_per_header(&chain(40_000));
        println!("bytes per header: mainnet 0-39,999 {real:.2}, generated {generated:.2}");
        assert!((38.0..40.0).contains(&real), "{real}");
        assert!((38.0..40.0).contains(&generated), "{generated}");
    }
}
