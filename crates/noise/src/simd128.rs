//! ChaCha20-Poly1305 (RFC 8439, 96-bit nonce) for wasm32 with SIMD128, without `unsafe`.
//!
//! Our own rather than RustCrypto's in wasm because it is measured faster there: 64 KB
//! write+read 2.35x faster in headless Chromium (90 -> 212 MB/s, benches/README.md); the
//! native build keeps RustCrypto's `chacha20poly1305`, whose AVX2 backend is faster still.
//!
//! RustCrypto's `chacha20` has SIMD backends for x86 and ARM only; in wasm it runs its
//! portable one block at a time, and `poly1305`'s portable backend runs one long serial
//! multiply-and-carry chain. Measured in headless Chromium over 65,535 bytes, the keystream
//! took about two thirds of a seal and the MAC the rest, so both are replaced here:
//!
//! * ChaCha20 computes four blocks at once in the "vertical" layout: sixteen `u32x4`
//!   vectors, vector `i` holding state word `i` of four consecutive blocks. The rotation by
//!   16 is a byte shuffle; the others are shift pairs (a byte shuffle for 8 measured no
//!   faster in V8). The keystream is transposed back into block order and XORed
//!   into the buffer 8 bytes at a time (vectors are built from lanes, never loaded through a
//!   pointer, so no `unsafe` is needed).
//! * Poly1305 keeps 26-bit limbs in 64-bit integers and hashes 64 bytes per step as four
//!   independent Horner chains (`h = h*r^4 + m`), so the CPU overlaps their multiplies and
//!   carries instead of waiting on one chain; the chains are folded with r^4, r^3, r^2, r.
//!
//! The AEAD is composed exactly as RFC 8439 section 2.8: the Poly1305 key is the first 32
//! bytes of block 0, the message is encrypted from block 1, and the MAC covers
//! `aad || pad16 || ciphertext || pad16 || le64(aad len) || le64(ciphertext len)`. `open`
//! verifies the tag (in constant time) before it decrypts, so a forged message leaves the
//! buffer untouched. Key words, Poly1305 state and keystream bytes kept in memory are
//! zeroized; values held only in SIMD registers cannot be, and are not kept.

use core::arch::wasm32::{
    i8x16_shuffle, i32x4_shuffle, i64x2_extract_lane, i64x2_shuffle, u32x4, u32x4_add, u32x4_shl,
    u32x4_shr, u32x4_splat, v128, v128_or, v128_xor,
};

use zeroize::Zeroize;

use crate::MAC_LEN;
use crate::cipher::MacMismatch;

/// "expand 32-byte k", the first four words of every ChaCha20 state.
const SIGMA: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

/// Bytes produced by one call of [`ChaCha20::blocks4`].
const BATCH: usize = 256;

fn le32(b: &[u8]) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[..4]);
    u32::from_le_bytes(w)
}

fn le64(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[..8]);
    u64::from_le_bytes(w)
}

/// The key and nonce words of a ChaCha20 state (the counter is passed per call).
struct ChaCha20 {
    /// Words 0..16 of the state; word 12 (the block counter) is unused here.
    state: [u32; 16],
}

impl Drop for ChaCha20 {
    fn drop(&mut self) {
        self.state.zeroize();
    }
}

#[inline(always)]
fn rotl16(v: v128) -> v128 {
    i8x16_shuffle::<2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13>(v, v)
}

#[inline(always)]
fn rotl<const L: u32, const R: u32>(v: v128) -> v128 {
    v128_or(u32x4_shl(v, L), u32x4_shr(v, R))
}

#[inline(always)]
fn quarter_round(x: &mut [v128; 16], a: usize, b: usize, c: usize, d: usize) {
    x[a] = u32x4_add(x[a], x[b]);
    x[d] = rotl16(v128_xor(x[d], x[a]));
    x[c] = u32x4_add(x[c], x[d]);
    x[b] = rotl::<12, 20>(v128_xor(x[b], x[c]));
    x[a] = u32x4_add(x[a], x[b]);
    x[d] = rotl::<8, 24>(v128_xor(x[d], x[a]));
    x[c] = u32x4_add(x[c], x[d]);
    x[b] = rotl::<7, 25>(v128_xor(x[b], x[c]));
}

/// Transpose four vectors `a, b, c, d` (one word each of four blocks) into four vectors of
/// four consecutive words of one block each.
#[inline(always)]
fn transpose(a: v128, b: v128, c: v128, d: v128) -> [v128; 4] {
    let ab01 = i32x4_shuffle::<0, 4, 1, 5>(a, b);
    let cd01 = i32x4_shuffle::<0, 4, 1, 5>(c, d);
    let ab23 = i32x4_shuffle::<2, 6, 3, 7>(a, b);
    let cd23 = i32x4_shuffle::<2, 6, 3, 7>(c, d);
    [
        i64x2_shuffle::<0, 2>(ab01, cd01),
        i64x2_shuffle::<1, 3>(ab01, cd01),
        i64x2_shuffle::<0, 2>(ab23, cd23),
        i64x2_shuffle::<1, 3>(ab23, cd23),
    ]
}

/// XOR 16 keystream bytes (one vector) into `out[..16]`.
#[inline(always)]
fn xor16(out: &mut [u8], ks: v128) {
    let lo = le64(&out[..8]) ^ i64x2_extract_lane::<0>(ks) as u64;
    let hi = le64(&out[8..16]) ^ i64x2_extract_lane::<1>(ks) as u64;
    out[..8].copy_from_slice(&lo.to_le_bytes());
    out[8..16].copy_from_slice(&hi.to_le_bytes());
}

impl ChaCha20 {
    fn new(key: &[u8; 32], nonce: &[u8; 12]) -> Self {
        let mut state = [0u32; 16];
        state[..4].copy_from_slice(&SIGMA);
        for (word, bytes) in state[4..12].iter_mut().zip(key.chunks_exact(4)) {
            *word = le32(bytes);
        }
        for (word, bytes) in state[13..].iter_mut().zip(nonce.chunks_exact(4)) {
            *word = le32(bytes);
        }
        ChaCha20 { state }
    }

    /// Blocks `counter..counter + 4`, each as four vectors of four words in block order:
    /// element `4 * j + g` holds words `4g..4g + 4` of block `counter + j`.
    #[inline(always)]
    fn blocks4(&self, counter: u32) -> [v128; 16] {
        let s = &self.state;
        let mut init = [u32x4_splat(0); 16];
        for (v, &w) in init.iter_mut().zip(s.iter()) {
            *v = u32x4_splat(w);
        }
        init[12] = u32x4(
            counter,
            counter.wrapping_add(1),
            counter.wrapping_add(2),
            counter.wrapping_add(3),
        );
        let mut x = init;
        for _ in 0..10 {
            quarter_round(&mut x, 0, 4, 8, 12);
            quarter_round(&mut x, 1, 5, 9, 13);
            quarter_round(&mut x, 2, 6, 10, 14);
            quarter_round(&mut x, 3, 7, 11, 15);
            quarter_round(&mut x, 0, 5, 10, 15);
            quarter_round(&mut x, 1, 6, 11, 12);
            quarter_round(&mut x, 2, 7, 8, 13);
            quarter_round(&mut x, 3, 4, 9, 14);
        }
        for (v, i) in x.iter_mut().zip(init.iter()) {
            *v = u32x4_add(*v, *i);
        }
        let mut out = [u32x4_splat(0); 16];
        for g in 0..4 {
            let t = transpose(x[4 * g], x[4 * g + 1], x[4 * g + 2], x[4 * g + 3]);
            for (j, v) in t.into_iter().enumerate() {
                out[4 * j + g] = v;
            }
        }
        out
    }

    /// XOR four blocks of keystream into `out`, which is at most [`BATCH`] bytes.
    #[inline(always)]
    fn xor_blocks4(&self, counter: u32, out: &mut [u8]) {
        let ks = self.blocks4(counter);
        if out.len() == BATCH {
            for (chunk, v) in out.chunks_exact_mut(16).zip(ks) {
                xor16(chunk, v);
            }
        } else {
            let mut bytes = [0u8; BATCH];
            for (chunk, v) in bytes.chunks_exact_mut(16).zip(ks) {
                chunk[..8].copy_from_slice(&i64x2_extract_lane::<0>(v).to_le_bytes());
                chunk[8..].copy_from_slice(&i64x2_extract_lane::<1>(v).to_le_bytes());
            }
            for (o, k) in out.iter_mut().zip(bytes.iter()) {
                *o ^= k;
            }
            bytes.zeroize();
        }
    }

    /// XOR the keystream from block `counter` on into `buf`.
    fn apply(&self, mut counter: u32, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(BATCH) {
            self.xor_blocks4(counter, chunk);
            counter = counter.wrapping_add(4);
        }
    }

    /// The 64-byte block `counter` (for the RFC test vectors).
    #[cfg(test)]
    fn block(&self, counter: u32) -> [u8; 64] {
        let mut out = [0u8; 64];
        self.xor_blocks4(counter, &mut out);
        out
    }
}

const MASK26: u64 = 0x3ff_ffff;

/// A number modulo 2^130 - 5 in five 26-bit limbs (each held in a u64 so the products and
/// their sums need no widening).
type Limbs = [u64; 5];

/// `a * b` mod 2^130 - 5, partially reduced: limbs below 2^26 except limb 1, which may
/// exceed it by a little. `a`'s limbs must be below 2^27 and `b`'s below 2^26 + 2^6.
#[inline(always)]
fn mul(a: &Limbs, b: &Limbs) -> Limbs {
    carry(products(a, b))
}

/// The unreduced limb products of `a * b` mod 2^130 - 5 (each sum below 2^60).
#[inline(always)]
fn products(a: &Limbs, b: &Limbs) -> Limbs {
    let (s1, s2, s3, s4) = (b[1] * 5, b[2] * 5, b[3] * 5, b[4] * 5);
    [
        a[0] * b[0] + a[1] * s4 + a[2] * s3 + a[3] * s2 + a[4] * s1,
        a[0] * b[1] + a[1] * b[0] + a[2] * s4 + a[3] * s3 + a[4] * s2,
        a[0] * b[2] + a[1] * b[1] + a[2] * b[0] + a[3] * s4 + a[4] * s3,
        a[0] * b[3] + a[1] * b[2] + a[2] * b[1] + a[3] * b[0] + a[4] * s4,
        a[0] * b[4] + a[1] * b[3] + a[2] * b[2] + a[3] * b[1] + a[4] * b[0],
    ]
}

#[inline(always)]
fn add(a: &Limbs, b: &Limbs) -> Limbs {
    [
        a[0] + b[0],
        a[1] + b[1],
        a[2] + b[2],
        a[3] + b[3],
        a[4] + b[4],
    ]
}

/// One carry pass over product sums (as poly1305-donna).
#[inline(always)]
fn carry(mut d: Limbs) -> Limbs {
    d[1] += d[0] >> 26;
    d[0] &= MASK26;
    d[2] += d[1] >> 26;
    d[1] &= MASK26;
    d[3] += d[2] >> 26;
    d[2] &= MASK26;
    d[4] += d[3] >> 26;
    d[3] &= MASK26;
    d[0] += (d[4] >> 26) * 5;
    d[4] &= MASK26;
    d[1] += d[0] >> 26;
    d[0] &= MASK26;
    d
}

/// A 16-byte block as limbs, with 2^128 added when `full` (as RFC 8439 section 2.5).
#[inline(always)]
fn block_limbs(b: &[u8], full: bool) -> Limbs {
    let lo = le64(&b[..8]);
    let hi = le64(&b[8..16]);
    [
        lo & MASK26,
        (lo >> 26) & MASK26,
        ((lo >> 52) | (hi << 12)) & MASK26,
        (hi >> 14) & MASK26,
        (hi >> 40) | (u64::from(full) << 24),
    ]
}

/// Poly1305 over whole 16-byte blocks (all the AEAD ever feeds it), with a single-block
/// entry for a final partial block.
struct Poly1305 {
    /// r, r^2, r^3, r^4 (r^2..r^4 computed only when a 64-byte run comes along).
    r: [Limbs; 4],
    powers: bool,
    h: Limbs,
    s: [u32; 4],
}

impl Drop for Poly1305 {
    fn drop(&mut self) {
        for p in self.r.iter_mut() {
            p.zeroize();
        }
        self.h.zeroize();
        self.s.zeroize();
    }
}

impl Poly1305 {
    fn new(key: &[u8; 32]) -> Self {
        let lo = le64(&key[..8]) & 0x0fff_fffc_0fff_ffff;
        let hi = le64(&key[8..16]) & 0x0fff_fffc_0fff_fffc;
        let r = [
            lo & MASK26,
            (lo >> 26) & MASK26,
            ((lo >> 52) | (hi << 12)) & MASK26,
            (hi >> 14) & MASK26,
            hi >> 40,
        ];
        let mut s = [0u32; 4];
        for (w, b) in s.iter_mut().zip(key[16..].chunks_exact(4)) {
            *w = le32(b);
        }
        Poly1305 {
            r: [r, [0; 5], [0; 5], [0; 5]],
            powers: false,
            h: [0; 5],
            s,
        }
    }

    /// Absorb one 16-byte block (`full`: add 2^128; false only for a short final block
    /// that the caller has already padded with 0x01 and zeros).
    fn block(&mut self, b: &[u8], full: bool) {
        self.h = mul(&add(&self.h, &block_limbs(b, full)), &self.r[0]);
    }

    /// Absorb `data`, a whole number of 16-byte blocks.
    fn blocks(&mut self, data: &[u8]) {
        let mut quads = data.chunks_exact(64);
        if data.len() >= 64 {
            if !self.powers {
                let r2 = mul(&self.r[0], &self.r[0]);
                let r3 = mul(&r2, &self.r[0]);
                let r4 = mul(&r2, &r2);
                self.r[1] = r2;
                self.r[2] = r3;
                self.r[3] = r4;
                self.powers = true;
            }
            self.quads(&mut quads);
        }
        for b in quads.remainder().chunks_exact(16) {
            self.block(b, true);
        }
    }

    /// Four Horner chains over 64-byte steps: chain `i` takes blocks `i, i + 4, ...` and
    /// multiplies by r^4 per step; at the end chain `i` is multiplied by r^(4 - i).
    #[inline(always)]
    fn quads(&mut self, quads: &mut core::slice::ChunksExact<'_, u8>) {
        let [r1, r2, r3, r4] = self.r;
        let Some(first) = quads.next() else {
            return;
        };
        let mut a = add(&self.h, &block_limbs(&first[..16], true));
        let mut b = block_limbs(&first[16..32], true);
        let mut c = block_limbs(&first[32..48], true);
        let mut d = block_limbs(&first[48..64], true);
        for q in quads {
            a = add(&mul(&a, &r4), &block_limbs(&q[..16], true));
            b = add(&mul(&b, &r4), &block_limbs(&q[16..32], true));
            c = add(&mul(&c, &r4), &block_limbs(&q[32..48], true));
            d = add(&mul(&d, &r4), &block_limbs(&q[48..64], true));
        }
        let sum = add(
            &add(&products(&a, &r4), &products(&b, &r3)),
            &add(&products(&c, &r2), &products(&d, &r1)),
        );
        self.h = carry(sum);
    }

    /// `h + s` mod 2^128, with h fully reduced mod 2^130 - 5 first.
    fn finish(mut self) -> [u8; MAC_LEN] {
        let mut h = carry(self.h);
        // Second pass: now every limb is below 2^26 (limb 1 below 2^26 + 1).
        h[2] += h[1] >> 26;
        h[1] &= MASK26;
        h[3] += h[2] >> 26;
        h[2] &= MASK26;
        h[4] += h[3] >> 26;
        h[3] &= MASK26;
        h[0] += (h[4] >> 26) * 5;
        h[4] &= MASK26;
        h[1] += h[0] >> 26;
        h[0] &= MASK26;
        // g = h + 5 - 2^130; take g if it does not underflow (h >= p), in constant time.
        let mut g = [0u64; 5];
        g[0] = h[0] + 5;
        g[1] = h[1] + (g[0] >> 26);
        g[0] &= MASK26;
        g[2] = h[2] + (g[1] >> 26);
        g[1] &= MASK26;
        g[3] = h[3] + (g[2] >> 26);
        g[2] &= MASK26;
        g[4] = (h[4] + (g[3] >> 26)).wrapping_sub(1 << 26);
        g[3] &= MASK26;
        // Top bit of g[4] set: g underflowed, keep h.
        let keep_h = (g[4] >> 63).wrapping_neg();
        for (hi, gi) in h.iter_mut().zip(g.iter()) {
            *hi = (*hi & keep_h) | (*gi & !keep_h & MASK26);
        }
        // h + s mod 2^128 (sums rather than ORs, so a limb at exactly 2^26 is still right).
        let value = h.iter().enumerate().fold(0u128, |acc, (i, &l)| {
            acc.wrapping_add(u128::from(l) << (26 * i))
        });
        let s = self
            .s
            .iter()
            .enumerate()
            .fold(0u128, |acc, (i, &w)| acc | (u128::from(w) << (32 * i)));
        let tag = value.wrapping_add(s).to_le_bytes();
        h.zeroize();
        g.zeroize();
        self.h.zeroize();
        tag
    }

    /// Absorb `data` padded with zeros to a multiple of 16 bytes (RFC 8439 `pad16`).
    fn padded(&mut self, data: &[u8]) {
        let whole = data.len() - data.len() % 16;
        self.blocks(&data[..whole]);
        let rest = &data[whole..];
        if !rest.is_empty() {
            let mut last = [0u8; 16];
            last[..rest.len()].copy_from_slice(rest);
            self.block(&last, true);
            last.zeroize();
        }
    }
}

/// RFC 8439 section 2.5: Poly1305 of an arbitrary message (for the test vectors).
#[cfg(test)]
fn poly1305(key: &[u8; 32], msg: &[u8]) -> [u8; MAC_LEN] {
    let mut p = Poly1305::new(key);
    let whole = msg.len() - msg.len() % 16;
    p.blocks(&msg[..whole]);
    let rest = &msg[whole..];
    if !rest.is_empty() {
        let mut last = [0u8; 16];
        last[..rest.len()].copy_from_slice(rest);
        last[rest.len()] = 1;
        p.block(&last, false);
    }
    p.finish()
}

/// The keystream of block 0 to 3: the Poly1305 key, then the first 192 bytes for the
/// message. Messages up to 192 bytes (every BOLT 8 length prefix) need no other blocks.
struct Start {
    cipher: ChaCha20,
    first: [u8; BATCH],
}

impl Drop for Start {
    fn drop(&mut self) {
        self.first.zeroize();
    }
}

impl Start {
    fn new(key: &[u8; 32], nonce: &[u8; 12]) -> Self {
        let cipher = ChaCha20::new(key, nonce);
        let mut first = [0u8; BATCH];
        cipher.xor_blocks4(0, &mut first);
        Start { cipher, first }
    }

    fn mac(&self, ad: &[u8], ciphertext: &[u8]) -> [u8; MAC_LEN] {
        let mut poly_key = [0u8; 32];
        poly_key.copy_from_slice(&self.first[..32]);
        let mut poly = Poly1305::new(&poly_key);
        poly_key.zeroize();
        poly.padded(ad);
        poly.padded(ciphertext);
        let mut lengths = [0u8; 16];
        lengths[..8].copy_from_slice(&(ad.len() as u64).to_le_bytes());
        lengths[8..].copy_from_slice(&(ciphertext.len() as u64).to_le_bytes());
        poly.block(&lengths, true);
        poly.finish()
    }

    /// XOR the keystream from block 1 on into `buf`.
    fn apply(&self, buf: &mut [u8]) {
        let split = buf.len().min(BATCH - 64);
        let (head, tail) = buf.split_at_mut(split);
        for (b, k) in head.iter_mut().zip(self.first[64..].iter()) {
            *b ^= k;
        }
        self.cipher.apply(4, tail);
    }
}

/// Encrypt `buf` in place; return its tag (RFC 8439 section 2.8).
pub(crate) fn seal(key: &[u8; 32], nonce: &[u8; 12], ad: &[u8], buf: &mut [u8]) -> [u8; MAC_LEN] {
    let start = Start::new(key, nonce);
    start.apply(buf);
    start.mac(ad, buf)
}

/// Check `tag` in constant time, then decrypt `buf` in place. On failure `buf` is unchanged.
pub(crate) fn open(
    key: &[u8; 32],
    nonce: &[u8; 12],
    ad: &[u8],
    buf: &mut [u8],
    tag: &[u8; MAC_LEN],
) -> Result<(), MacMismatch> {
    let start = Start::new(key, nonce);
    let expected = start.mac(ad, buf);
    let diff = expected
        .iter()
        .zip(tag.iter())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    if core::hint::black_box(diff) != 0 {
        return Err(MacMismatch);
    }
    start.apply(buf);
    Ok(())
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use chacha20poly1305::aead::{AeadInOut, KeyInit};
    use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce, Tag};

    use super::*;

    fn unhex<const N: usize>(s: &str) -> [u8; N] {
        let v = hex::decode(s.split_whitespace().collect::<String>()).expect("test hex");
        v.try_into().expect("test vector length")
    }

    fn unhex_vec(s: &str) -> Vec<u8> {
        hex::decode(s.split_whitespace().collect::<String>()).expect("test hex")
    }

    const KEY_0_TO_31: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    /// RFC 8439 section 2.3.2 and Appendix A.1 test vectors 1 and 2.
    #[test]
    fn chacha20_block_function() {
        let cases: [(&str, &str, u32, &str); 3] = [
            (
                KEY_0_TO_31,
                "000000090000004a00000000",
                1,
                "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e
                 d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e",
            ),
            (
                &"00".repeat(32),
                "000000000000000000000000",
                0,
                "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7
                 da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586",
            ),
            (
                &"00".repeat(32),
                "000000000000000000000000",
                1,
                "9f07e7be5551387a98ba977c732d080dcb0f29a048e3656912c6533e32ee7aed
                 29b721769ce64e43d57133b074d839d531ed1f28510afb45ace10a1f4b794d6f",
            ),
        ];
        for (key, nonce, counter, block) in cases {
            let cipher = ChaCha20::new(&unhex(key), &unhex(nonce));
            assert_eq!(
                cipher.block(counter),
                unhex::<64>(block),
                "counter {counter}"
            );
        }
    }

    const SUNSCREEN: &[u8] = b"Ladies and Gentlemen of the class of '99: If I could offer you \
        only one tip for the future, sunscreen would be it.";

    /// RFC 8439 section 2.4.2: encryption from block counter 1.
    #[test]
    fn chacha20_encryption() {
        let cipher = ChaCha20::new(&unhex(KEY_0_TO_31), &unhex("000000000000004a00000000"));
        let mut buf = SUNSCREEN.to_vec();
        cipher.apply(1, &mut buf);
        let expected = unhex_vec(
            "6e2e359a2568f98041ba0728dd0d6981e97e7aec1d4360c20a27afccfd9fae0b
             f91b65c5524733ab8f593dabcd62b3571639d624e65152ab8f530c359f0861d8
             07ca0dbf500d6a6156a38e088a22b65e52bc514d16ccf806818ce91ab7793736
             5af90bbf74a35be6b40b8eedf2785e42874d",
        );
        assert_eq!(buf, expected);
    }

    /// RFC 8439 section 2.5.2, Appendix A.3 vector 1, and the NaCl, TLS draft and
    /// poly1305-donna self tests (as RustCrypto's poly1305 tests carry them).
    #[test]
    fn poly1305_vectors() {
        let cases: [(&str, Vec<u8>, &str); 5] = [
            (
                "85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b",
                b"Cryptographic Forum Research Group".to_vec(),
                "a8061dc1305136c6c22b8baf0c0127a9",
            ),
            (
                &"00".repeat(32),
                vec![0; 64],
                "00000000000000000000000000000000",
            ),
            (
                "eea6a7251c1e72916d11c2cb214d3c252539121d8e234e652d651fa4c8cff880",
                unhex_vec(
                    "8e993b9f48681273c29650ba32fc76ce48332ea7164d96a4476fb8c531a1186a
                     c0dfc17c98dce87b4da7f011ec48c97271d2c20f9b928fe2270d6fb863d51738
                     b48eeee314a7cc8ab932164548e526ae90224368517acfeabd6bb3732bc0e9da
                     99832b61ca01b6de56244a9e88d5f9b37973f622a43d14a6599b1f654cb45a74
                     e355a5",
                ),
                "f3ffc7703f9400e52a7dfb4b3d3305d9",
            ),
            (
                &hex::encode(b"this is 32-byte key for Poly1305"),
                vec![0; 32],
                "49ec78090e481ec6c26b33b91ccc0307",
            ),
            // r = 2, s = 0, m = 2^129 - 1: ((2^130 - 2) mod p) = 3.
            (
                "0200000000000000000000000000000000000000000000000000000000000000",
                vec![0xff; 16],
                "03000000000000000000000000000000",
            ),
        ];
        for (key, msg, tag) in cases {
            assert_eq!(poly1305(&unhex(key), &msg), unhex::<16>(tag), "key {key}");
        }
    }

    /// poly1305-donna's second self test: tags of 0..256-byte messages, MACed together.
    #[test]
    fn poly1305_donna_lengths() {
        let mut tags = Vec::new();
        for i in 0..256usize {
            tags.extend_from_slice(&poly1305(&[i as u8; 32], &vec![i as u8; i]));
        }
        let total_key = unhex("01020304050607fffefdfcfbfaf9ffffffffffffffffffffffffffff00000000");
        assert_eq!(
            poly1305(&total_key, &tags),
            unhex::<16>("64afe2e8d6ad7bbdd287f97c44623d39")
        );
    }

    /// RFC 8439 section 2.6.2 and Appendix A.4 vector 1: the one-time Poly1305 key.
    #[test]
    fn poly1305_key_generation() {
        let start = Start::new(
            &unhex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"),
            &unhex("000000000001020304050607"),
        );
        assert_eq!(
            start.first[..32],
            unhex::<32>("8ad5a08b905f81cc815040274ab29471a833b637e3fd0da508dbb8e2fdd1a646")
        );
        let start = Start::new(&[0; 32], &[0; 12]);
        assert_eq!(
            start.first[..32],
            unhex::<32>("76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7")
        );
    }

    /// RFC 8439 section 2.8.2: the AEAD, both ways, and a tampered tag and ciphertext.
    #[test]
    fn aead_vector() {
        let key = unhex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f");
        let nonce = unhex("070000004041424344454647");
        let aad = unhex::<12>("50515253c0c1c2c3c4c5c6c7");
        let ciphertext = unhex_vec(
            "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d6
             3dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b36
             92ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc
             3ff4def08e4b7a9de576d26586cec64b6116",
        );
        let tag = unhex::<16>("1ae10b594f09e26a7e902ecbd0600691");

        let mut buf = SUNSCREEN.to_vec();
        assert_eq!(seal(&key, &nonce, &aad, &mut buf), tag);
        assert_eq!(buf, ciphertext);

        assert_eq!(open(&key, &nonce, &aad, &mut buf, &tag), Ok(()));
        assert_eq!(buf, SUNSCREEN);

        let mut buf = ciphertext.clone();
        let mut bad = tag;
        bad[15] ^= 0x01;
        assert_eq!(open(&key, &nonce, &aad, &mut buf, &bad), Err(MacMismatch));
        assert_eq!(buf, ciphertext, "a failed open leaves the buffer as it was");
        buf[0] ^= 0xaa;
        assert_eq!(open(&key, &nonce, &aad, &mut buf, &tag), Err(MacMismatch));
        assert_eq!(
            open(&key, &nonce, &aad[..11], &mut ciphertext.clone(), &tag),
            Err(MacMismatch)
        );
    }

    /// splitmix64: deterministic test data without a rand crate.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        fn fill(&mut self, buf: &mut [u8]) {
            for b in buf {
                *b = self.next() as u8;
            }
        }

        fn bytes<const N: usize>(&mut self) -> [u8; N] {
            let mut out = [0u8; N];
            self.fill(&mut out);
            out
        }
    }

    /// Seal and open one message with both implementations and compare every byte.
    fn differential(rng: &mut Rng, len: usize) {
        let key: [u8; 32] = rng.bytes();
        let nonce: [u8; 12] = rng.bytes();
        let mut aad = vec![0u8; (rng.next() % 70) as usize];
        rng.fill(&mut aad);
        let mut plaintext = vec![0u8; len];
        rng.fill(&mut plaintext);

        let reference = ChaCha20Poly1305::new(&Key::from(key));
        let mut expected = plaintext.clone();
        let expected_tag: [u8; 16] = reference
            .encrypt_inout_detached(&Nonce::from(nonce), &aad, expected.as_mut_slice().into())
            .expect("reference seal")
            .into();

        let mut buf = plaintext.clone();
        let tag = seal(&key, &nonce, &aad, &mut buf);
        assert_eq!(buf, expected, "ciphertext, len {len}, aad {}", aad.len());
        assert_eq!(tag, expected_tag, "tag, len {len}, aad {}", aad.len());

        // Tampered: a flipped tag bit, a flipped ciphertext bit; the buffer stays as it was.
        let mut bad_tag = tag;
        bad_tag[(rng.next() % 16) as usize] ^= 1 << (rng.next() % 8);
        assert_eq!(
            open(&key, &nonce, &aad, &mut buf, &bad_tag),
            Err(MacMismatch)
        );
        assert_eq!(buf, expected, "failed open changed the buffer, len {len}");
        if len > 0 {
            let i = (rng.next() as usize) % len;
            buf[i] ^= 0x80;
            assert_eq!(open(&key, &nonce, &aad, &mut buf, &tag), Err(MacMismatch));
            buf[i] ^= 0x80;
        }

        // Open what the reference sealed; and the reference opens what we sealed.
        assert_eq!(open(&key, &nonce, &aad, &mut buf, &expected_tag), Ok(()));
        assert_eq!(buf, plaintext, "plaintext, len {len}");
        let mut theirs = expected.clone();
        reference
            .decrypt_inout_detached(
                &Nonce::from(nonce),
                &aad,
                theirs.as_mut_slice().into(),
                &Tag::from(tag),
            )
            .expect("reference opens our seal");
        assert_eq!(theirs, plaintext);
    }

    #[test]
    fn matches_rustcrypto_short_lengths() {
        let mut rng = Rng(0x6c69_6768_7477_6972);
        for len in 0..=300 {
            differential(&mut rng, len);
        }
    }

    #[test]
    fn matches_rustcrypto_long_lengths() {
        let mut rng = Rng(0x0bad_5eed);
        for len in [
            319, 320, 321, 511, 512, 513, 1000, 1024, 4095, 4096, 4097, 16_384, 40_000, 65_534,
            65_535,
        ] {
            differential(&mut rng, len);
        }
    }
}
