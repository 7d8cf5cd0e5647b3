//! Block hashes four at a time: SHA-256d of 80-byte headers in the four 32-bit lanes of a
//! WebAssembly SIMD128 vector.
//!
//! Why our own: validation in wasm spent nearly all its time in `sha2`'s portable code, one
//! header at a time (1.23 s of the 925,000-header chain, benches/README.md). SHA-256 has no
//! parallelism inside one message, but headers are independent messages: computing four in
//! the "vertical" layout (vector `i` holds word `i` of four headers) does four hashes for
//! the instructions of one. `sha2` stays for everything else, and for native builds, where
//! it uses the CPU's SHA extensions.
//!
//! The rounds are written once, generic over [`Lanes`]: `v128` in wasm with SIMD128, and a
//! plain `[u32; 4]` in tests, so the native tests run the same round code that the browser
//! runs and the browser tests check the vector type; both are differential-tested against
//! `sha2`. Only the two shapes headers need are hashed: an 80-byte message (two blocks, the
//! second mostly padding) and then its 32-byte digest (one block). Vectors are built from
//! lanes and read back lane by lane, never through a pointer, so no `unsafe` is needed.

use crate::header::{BlockHash, HEADER_LEN, Header};
use lightwire_primitives::{FilterHash, FilterHeader};

/// The four-lane SHA-256d, built where it is used: in wasm with SIMD128, and in tests.
#[cfg(any(test, all(target_arch = "wasm32", target_feature = "simd128")))]
mod lanes {
    use crate::header::{BlockHash, HEADER_LEN};

    /// SHA-256 round constants (FIPS 180-4, 4.2.2).
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];

    /// SHA-256 initial state (FIPS 180-4, 5.3.3).
    const IV: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];

    /// Four 32-bit lanes and the operations SHA-256 needs on them.
    pub(crate) trait Lanes: Copy {
        /// The same word in every lane.
        fn splat(x: u32) -> Self;
        /// Lane `i` from `x[i]`.
        fn from_lanes(x: [u32; 4]) -> Self;
        /// The lanes, first to last.
        fn to_lanes(self) -> [u32; 4];
        /// Lane-wise wrapping addition.
        fn add(self, o: Self) -> Self;
        /// Lane-wise XOR.
        fn xor(self, o: Self) -> Self;
        /// Lane-wise bit select: bits of `a` where `self` has ones, of `b` where it has zeros.
        fn select(self, a: Self, b: Self) -> Self;
        /// Lane-wise logical right shift.
        fn shr(self, n: u32) -> Self;
        /// Lane-wise rotate right by `n` (0 < n < 32).
        fn rotr(self, n: u32) -> Self;
    }

    /// Plain integer lanes: the tests run the round code on them natively too.
    #[cfg(test)]
    #[derive(Clone, Copy)]
    pub(crate) struct Portable([u32; 4]);

    #[cfg(test)]
    impl Lanes for Portable {
        #[inline(always)]
        fn splat(x: u32) -> Self {
            Portable([x; 4])
        }
        #[inline(always)]
        fn from_lanes(x: [u32; 4]) -> Self {
            Portable(x)
        }
        #[inline(always)]
        fn to_lanes(self) -> [u32; 4] {
            self.0
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            Portable(core::array::from_fn(|i| self.0[i].wrapping_add(o.0[i])))
        }
        #[inline(always)]
        fn xor(self, o: Self) -> Self {
            Portable(core::array::from_fn(|i| self.0[i] ^ o.0[i]))
        }
        #[inline(always)]
        fn select(self, a: Self, b: Self) -> Self {
            Portable(core::array::from_fn(|i| {
                (self.0[i] & a.0[i]) | (!self.0[i] & b.0[i])
            }))
        }
        #[inline(always)]
        fn shr(self, n: u32) -> Self {
            Portable(core::array::from_fn(|i| self.0[i] >> n))
        }
        #[inline(always)]
        fn rotr(self, n: u32) -> Self {
            Portable(core::array::from_fn(|i| self.0[i].rotate_right(n)))
        }
    }

    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    mod simd {
        use core::arch::wasm32::{
            u32x4, u32x4_add, u32x4_extract_lane, u32x4_shl, u32x4_shr, u32x4_splat, v128,
            v128_bitselect, v128_or, v128_xor,
        };

        use super::Lanes;

        impl Lanes for v128 {
            #[inline(always)]
            fn splat(x: u32) -> Self {
                u32x4_splat(x)
            }
            #[inline(always)]
            fn from_lanes(x: [u32; 4]) -> Self {
                u32x4(x[0], x[1], x[2], x[3])
            }
            #[inline(always)]
            fn to_lanes(self) -> [u32; 4] {
                [
                    u32x4_extract_lane::<0>(self),
                    u32x4_extract_lane::<1>(self),
                    u32x4_extract_lane::<2>(self),
                    u32x4_extract_lane::<3>(self),
                ]
            }
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                u32x4_add(self, o)
            }
            #[inline(always)]
            fn xor(self, o: Self) -> Self {
                v128_xor(self, o)
            }
            #[inline(always)]
            fn select(self, a: Self, b: Self) -> Self {
                v128_bitselect(a, b, self)
            }
            #[inline(always)]
            fn shr(self, n: u32) -> Self {
                u32x4_shr(self, n)
            }
            #[inline(always)]
            fn rotr(self, n: u32) -> Self {
                v128_or(u32x4_shr(self, n), u32x4_shl(self, 32 - n))
            }
        }
    }

    /// One SHA-256 compression of four blocks, `w` being their sixteen message words.
    #[inline(always)]
    fn compress<L: Lanes>(state: &mut [L; 8], mut w: [L; 16]) {
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = *state;
        for (i, k) in K.iter().enumerate() {
            let wi = if i < 16 {
                w[i]
            } else {
                // The schedule in a ring of sixteen: w[i] = s1(w[i-2]) + w[i-7] + s0(w[i-15]) + w[i-16].
                let w15 = w[(i + 1) % 16];
                let w2 = w[(i + 14) % 16];
                let s0 = w15.rotr(7).xor(w15.rotr(18)).xor(w15.shr(3));
                let s1 = w2.rotr(17).xor(w2.rotr(19)).xor(w2.shr(10));
                let x = w[i % 16].add(s0).add(w[(i + 9) % 16]).add(s1);
                w[i % 16] = x;
                x
            };
            let s1 = e.rotr(6).xor(e.rotr(11)).xor(e.rotr(25));
            // Ch: f where e is set, else g. Maj: a where a and b agree, else c.
            let ch = e.select(f, g);
            let t1 = h.add(s1).add(ch).add(L::splat(*k)).add(wi);
            let s0 = a.rotr(2).xor(a.rotr(13)).xor(a.rotr(22));
            let maj = a.xor(b).select(c, a);
            let t2 = s0.add(maj);
            h = g;
            g = f;
            f = e;
            e = d.add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.add(t2);
        }
        for (s, x) in state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
            *s = s.add(x);
        }
    }

    /// Big-endian word `i` of each of four headers.
    #[inline(always)]
    fn word<L: Lanes>(h: &[&[u8; HEADER_LEN]; 4], i: usize) -> L {
        L::from_lanes(core::array::from_fn(|l| {
            let b = &h[l][4 * i..4 * i + 4];
            u32::from_be_bytes([b[0], b[1], b[2], b[3]])
        }))
    }

    /// SHA-256d of four 80-byte headers.
    #[inline(always)]
    pub(crate) fn hash4_with<L: Lanes>(h: [&[u8; HEADER_LEN]; 4]) -> [BlockHash; 4] {
        let mut state = IV.map(L::splat);
        // First block: bytes 0..64.
        compress(&mut state, core::array::from_fn(|i| word(&h, i)));
        // Second block: bytes 64..80, then the padding: 0x80, zeros, and the length, 640 bits.
        let mut w = [L::splat(0); 16];
        for (i, x) in w.iter_mut().take(4).enumerate() {
            *x = word(&h, 16 + i);
        }
        w[4] = L::splat(0x8000_0000);
        w[15] = L::splat(640);
        compress(&mut state, w);
        second_hash(&state).map(BlockHash)
    }

    /// The second SHA-256 of SHA-256d: each lane's 32-byte digest in `state`, padded to one
    /// block (length 256 bits), hashed; the four results as bytes.
    #[inline(always)]
    fn second_hash<L: Lanes>(state: &[L; 8]) -> [[u8; 32]; 4] {
        let mut w = [L::splat(0); 16];
        w[..8].copy_from_slice(state);
        w[8] = L::splat(0x8000_0000);
        w[15] = L::splat(256);
        let mut second = IV.map(L::splat);
        compress(&mut second, w);
        let words = second.map(L::to_lanes);
        core::array::from_fn(|lane| {
            let mut out = [0u8; 32];
            for (chunk, word) in out.chunks_exact_mut(4).zip(&words) {
                chunk.copy_from_slice(&word[lane].to_be_bytes());
            }
            out
        })
    }

    /// SHA-256d of four 64-byte messages (BIP157 filter headers: a filter hash and the
    /// previous filter header).
    #[inline(always)]
    pub(crate) fn hash64x4_with<L: Lanes>(m: [&[u8; 64]; 4]) -> [[u8; 32]; 4] {
        let mut state = IV.map(L::splat);
        compress(
            &mut state,
            core::array::from_fn(|i| {
                L::from_lanes(core::array::from_fn(|l| {
                    let b = &m[l][4 * i..4 * i + 4];
                    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
                }))
            }),
        );
        // Second block: padding only, the length 512 bits.
        let mut w = [L::splat(0); 16];
        w[0] = L::splat(0x8000_0000);
        w[15] = L::splat(512);
        compress(&mut state, w);
        second_hash(&state)
    }
}

#[cfg(test)]
use lanes::{Lanes, Portable, hash4_with, hash64x4_with};

/// Block hashes of four headers at once: in the four SIMD128 lanes in wasm, one after
/// another with `sha2` natively (where it uses the CPU's SHA extensions).
pub fn hash4(headers: [&[u8; HEADER_LEN]; 4]) -> [BlockHash; 4] {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        lanes::hash4_with::<core::arch::wasm32::v128>(headers)
    }
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    {
        headers.map(crate::header::hash_header_bytes)
    }
}

/// Block hashes of `headers` (back-to-back 80-byte encodings; a ragged tail is ignored) into
/// `out`, as many as both hold: four at a time in wasm with SIMD128, one at a time with
/// `sha2` natively (which uses the CPU's SHA extensions where it has them). Returns how many
/// were written.
pub fn hash_headers(headers: &[u8], out: &mut [BlockHash]) -> usize {
    let n = (headers.len() / HEADER_LEN).min(out.len());
    let header = |j: usize| -> &[u8; HEADER_LEN] {
        headers
            .get(j * HEADER_LEN..(j + 1) * HEADER_LEN)
            .and_then(|c| c.try_into().ok())
            .unwrap_or(&[0; HEADER_LEN])
    };
    if cfg!(all(target_arch = "wasm32", target_feature = "simd128")) {
        for i in (0..n).step_by(4) {
            // Past the end a lane hashes zeros; its hash is not written.
            let hashes = hash4(core::array::from_fn(|l| {
                header(if i + l < n { i + l } else { n })
            }));
            let take = (n - i).min(4);
            out[i..i + take].copy_from_slice(&hashes[..take]);
        }
    } else {
        for (j, o) in out.iter_mut().enumerate().take(n) {
            *o = crate::header::hash_header_bytes(header(j));
        }
    }
    n
}

/// Block hashes of decoded `headers`, replacing what `out` held (its capacity is reused):
/// four at a time in wasm with SIMD128, with `sha2` natively.
pub fn hash_header_list(headers: &[Header], out: &mut Vec<BlockHash>) {
    out.clear();
    if cfg!(all(target_arch = "wasm32", target_feature = "simd128")) {
        for group in headers.chunks(4) {
            let encoded: [[u8; HEADER_LEN]; 4] =
                core::array::from_fn(|l| group.get(l).map_or([0; HEADER_LEN], Header::encode));
            let hashes = hash4(core::array::from_fn(|l| &encoded[l]));
            out.extend_from_slice(&hashes[..group.len()]);
        }
    } else {
        out.extend(headers.iter().map(Header::block_hash));
    }
}

/// Rebuild the hash chain of consecutive headers (80 bytes each) whose previous-block hash
/// fields are to be filled in, all but each segment's first, which `starts` lists (in
/// ascending order, the first 0): header `i` takes the block hash of header `i - 1`. Every
/// block hash is written to `hashes`. Four segments are linked side by side, one header of
/// each per [`hash4`] call (the four SIMD128 lanes in wasm), so rebuilding costs one hash
/// per header and no serial chain longer than the longest segment.
pub fn link_segments(headers: &mut [u8], starts: &[usize], hashes: &mut [BlockHash]) {
    let count = hashes.len().min(headers.len() / HEADER_LEN);
    for (g, group) in starts.chunks(4).enumerate() {
        // The segments of this group, as (first, end) pairs.
        let bounds: [(usize, usize); 4] = core::array::from_fn(|k| match group.get(k) {
            Some(&a) => {
                let end = starts.get(g * 4 + k + 1).copied().unwrap_or(count);
                (a.min(count), end.clamp(a.min(count), count))
            }
            None => (0, 0),
        });
        let longest = bounds.iter().map(|(a, b)| b - a).max().unwrap_or(0);
        const UNUSED: [u8; HEADER_LEN] = [0; HEADER_LEN];
        for j in 0..longest {
            let index: [Option<usize>; 4] = bounds.map(|(a, b)| (a + j < b).then_some(a + j));
            if j > 0 {
                for i in index.into_iter().flatten() {
                    headers[i * HEADER_LEN + 4..i * HEADER_LEN + 36]
                        .copy_from_slice(&hashes[i - 1].0);
                }
            }
            let lane = |k: usize| -> &[u8; HEADER_LEN] {
                index[k]
                    .and_then(|i| headers.get(i * HEADER_LEN..(i + 1) * HEADER_LEN))
                    .and_then(|h| h.try_into().ok())
                    .unwrap_or(&UNUSED)
            };
            let got = hash4([lane(0), lane(1), lane(2), lane(3)]);
            for (i, h) in index.into_iter().zip(got) {
                if let Some(i) = i {
                    hashes[i] = h;
                }
            }
        }
    }
}

/// SHA-256d of four 64-byte messages at once (four SIMD128 lanes in wasm; `sha2` natively).
pub fn hash64x4(m: [&[u8; 64]; 4]) -> [[u8; 32]; 4] {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        lanes::hash64x4_with::<core::arch::wasm32::v128>(m)
    }
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    {
        use sha2::{Digest, Sha256};
        m.map(|x| Sha256::digest(Sha256::digest(x)).into())
    }
}

/// Rebuild BIP157 filter headers from filter hashes: `headers[i]` = SHA-256d(`hashes[i]` ||
/// `headers[i - 1]`), where each segment (its first index in `starts`, ascending, the first
/// 0) starts from its anchor in `anchors` instead. Four segments side by side, as
/// [`link_segments`] does for block hashes. Returns whether the segments join up: each
/// segment's last header equals the next segment's anchor.
pub fn link_filter_headers(
    hashes: &[FilterHash],
    anchors: &[FilterHeader],
    starts: &[usize],
    headers: &mut [FilterHeader],
) -> bool {
    let count = hashes.len().min(headers.len());
    let segments = starts.len().min(anchors.len());
    for g in (0..segments).step_by(4) {
        let bounds: [(usize, usize); 4] = core::array::from_fn(|k| {
            let s = g + k;
            if s < segments {
                let a = starts[s].min(count);
                let end = starts.get(s + 1).copied().unwrap_or(count);
                (a, end.clamp(a, count))
            } else {
                (0, 0)
            }
        });
        let longest = bounds.iter().map(|(a, b)| b - a).max().unwrap_or(0);
        let mut msgs = [[0u8; 64]; 4];
        for j in 0..longest {
            for (k, &(a, b)) in bounds.iter().enumerate() {
                if a + j < b {
                    let prev = if j == 0 {
                        &anchors[g + k]
                    } else {
                        &headers[a + j - 1]
                    };
                    msgs[k][..32].copy_from_slice(&hashes[a + j].0);
                    msgs[k][32..].copy_from_slice(&prev.0);
                }
            }
            let got = hash64x4([&msgs[0], &msgs[1], &msgs[2], &msgs[3]]);
            for (k, &(a, b)) in bounds.iter().enumerate() {
                if a + j < b {
                    headers[a + j] = FilterHeader(got[k]);
                }
            }
        }
    }
    // Each segment's last header must be the next one's anchor.
    (1..segments).all(|s| {
        let last = starts[s].checked_sub(1).and_then(|i| headers.get(i));
        last == Some(&anchors[s])
    })
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::header::hash_header_bytes;

    /// A xorshift stream for random headers (deterministic, no dependency).
    fn random_headers(n: usize, mut seed: u64) -> Vec<u8> {
        (0..n * HEADER_LEN)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect()
    }

    /// The first 4,000 real mainnet headers (compiled in, so the browser run has them too).
    const MAINNET: &[u8] = include_bytes!(concat!(
        env!("LIGHTWIRE_SHARED"),
        "/data/headers/mainnet_0-39999.bin"
    ));

    fn check_lanes<L: Lanes>(bytes: &[u8]) {
        let headers: Vec<&[u8; HEADER_LEN]> = bytes
            .chunks_exact(HEADER_LEN)
            .map(|c| c.try_into().unwrap())
            .collect();
        for group in headers.chunks_exact(4) {
            let got = hash4_with::<L>([group[0], group[1], group[2], group[3]]);
            for (h, g) in group.iter().zip(got) {
                assert_eq!(g, hash_header_bytes(h));
            }
        }
    }

    #[test]
    fn portable_lanes_equal_sha2_on_random_headers() {
        check_lanes::<Portable>(&random_headers(400, 0x9e37_79b9_7f4a_7c15));
    }

    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    #[test]
    fn simd_lanes_equal_sha2_on_random_headers() {
        check_lanes::<core::arch::wasm32::v128>(&random_headers(400, 0x9e37_79b9_7f4a_7c15));
    }

    #[test]
    fn filter_headers_link_four_segments_as_sha2_chains_them() {
        use sha2::{Digest, Sha256};
        let bytes = random_headers(40, 3);
        let hashes: Vec<FilterHash> = bytes
            .chunks_exact(32)
            .map(|c| FilterHash(c.try_into().unwrap()))
            .collect();
        let n = hashes.len();
        let mut want = vec![FilterHeader::ZERO; n];
        let mut prev = FilterHeader([7u8; 32]);
        for (i, h) in hashes.iter().enumerate() {
            let mut m = [0u8; 64];
            m[..32].copy_from_slice(&h.0);
            m[32..].copy_from_slice(&prev.0);
            want[i] = FilterHeader(Sha256::digest(Sha256::digest(m)).into());
            prev = want[i];
        }
        for starts in [&[0][..], &[0, 25, 50, 75], &[0, 1, 2, 99], &[0, 33, 34]] {
            let anchors: Vec<FilterHeader> = starts
                .iter()
                .map(|&s| {
                    if s == 0 {
                        FilterHeader([7u8; 32])
                    } else {
                        want[s - 1]
                    }
                })
                .collect();
            let mut got = vec![FilterHeader::ZERO; n];
            assert!(
                link_filter_headers(&hashes, &anchors, starts, &mut got),
                "{starts:?}"
            );
            assert_eq!(got, want, "{starts:?}");
            if starts.len() > 1 {
                let mut bad = anchors.clone();
                bad[1].0[0] ^= 1;
                assert!(!link_filter_headers(&hashes, &bad, starts, &mut got));
            }
        }
        let m: [[u8; 64]; 4] = core::array::from_fn(|l| core::array::from_fn(|i| (i * l) as u8));
        let portable = hash64x4_with::<Portable>([&m[0], &m[1], &m[2], &m[3]]);
        assert_eq!(portable, hash64x4([&m[0], &m[1], &m[2], &m[3]]));
        assert_eq!(
            portable[2],
            <[u8; 32]>::from(Sha256::digest(Sha256::digest(m[2])))
        );
    }

    #[test]
    fn linking_segments_rebuilds_every_previous_hash() {
        let real = &MAINNET[..1000 * HEADER_LEN];
        let want: Vec<BlockHash> = real
            .chunks_exact(HEADER_LEN)
            .map(|h| hash_header_bytes(h.try_into().unwrap()))
            .collect();
        for starts in [
            &[0][..],
            &[0, 250, 500, 750],
            &[0, 1, 2, 3, 4, 5, 6, 999],
            &[0, 333, 334],
        ] {
            let mut headers = real.to_vec();
            for i in 0..1000 {
                if !starts.contains(&i) {
                    headers[i * HEADER_LEN + 4..i * HEADER_LEN + 36].fill(0);
                }
            }
            let mut hashes = vec![BlockHash::ZERO; 1000];
            link_segments(&mut headers, starts, &mut hashes);
            assert_eq!(headers, real, "{starts:?}");
            assert_eq!(hashes, want, "{starts:?}");
        }
    }

    #[test]
    fn hash_headers_equals_sha2_for_every_length_and_on_real_headers() {
        let bytes = random_headers(11, 7);
        for n in 0..=11 {
            let mut out = [BlockHash::ZERO; 12];
            assert_eq!(hash_headers(&bytes[..n * HEADER_LEN], &mut out), n);
            for i in 0..12 {
                let want = if i < n {
                    hash_header_bytes(bytes[i * 80..i * 80 + 80].try_into().unwrap())
                } else {
                    BlockHash::ZERO
                };
                assert_eq!(out[i], want, "{n} headers, hash {i}");
            }
        }
        // Fewer outputs than headers: only as many as fit.
        let mut two = [BlockHash::ZERO; 2];
        assert_eq!(hash_headers(&bytes, &mut two), 2);
        // Decoded headers, every length up to 11.
        let decoded: Vec<Header> = bytes
            .chunks_exact(HEADER_LEN)
            .map(|c| Header::decode(c.try_into().unwrap()))
            .collect();
        let mut list = vec![BlockHash::ZERO; 3];
        for n in 0..=11 {
            hash_header_list(&decoded[..n], &mut list);
            let want: Vec<BlockHash> = decoded[..n].iter().map(Header::block_hash).collect();
            assert_eq!(list, want);
        }
    }

    #[test]
    fn the_lanes_hash_the_real_mainnet_headers_and_they_link() {
        let bytes = MAINNET;
        check_lanes::<Portable>(&bytes[..4000 * HEADER_LEN]);
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        check_lanes::<core::arch::wasm32::v128>(&bytes[..4000 * HEADER_LEN]);
        let mut out = vec![BlockHash::ZERO; 4000];
        hash_headers(&bytes[..4000 * HEADER_LEN], &mut out);
        for i in 1..4000 {
            assert_eq!(
                &bytes[i * 80 + 4..i * 80 + 36],
                &out[i - 1].0,
                "header {i} links"
            );
        }
    }
}
