//! Our own 256-bit unsigned integer rather than `crypto-bigint`'s (which the workspace
//! already has, under k256), because consensus needs few operations, with Bitcoin Core's
//! `arith_uint256` semantics, on public values: comparison, shifts that drop bits, addition,
//! multiplication by a u64 that wraps, division by a u64, and one full division for the
//! work of a target (`GetBlockProof`). These two hundred lines read side by side with
//! `arith_uint256`, `SetCompact` and `GetCompact`. crypto-bigint is built for secrets:
//! constant-time by default, checked operations that return `CtOption`, divisors wrapped in
//! `NonZero`; none of that buys anything for targets and chainwork. Keeping it out also
//! leaves `sha2` the only dependency the library uses and spares it crypto-bigint's pre-1.0
//! breaking releases. Not the reasons: constness (crypto-bigint's operations are `const fn`
//! too) and wasm size (the browser client links crypto-bigint through k256 anyway; no size
//! difference has been measured). The tests at the bottom check every operation here
//! against crypto-bigint.
//!
//! Limbs are little-endian u64s.

use core::cmp::Ordering;
use core::fmt;

/// An unsigned 256-bit integer.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct U256([u64; 4]);

impl U256 {
    /// Zero.
    pub const ZERO: U256 = U256([0; 4]);
    /// One.
    pub const ONE: U256 = U256([1, 0, 0, 0]);
    /// 2^256 - 1.
    pub const MAX: U256 = U256([u64::MAX; 4]);

    /// From a u64.
    pub const fn from_u64(v: u64) -> Self {
        U256([v, 0, 0, 0])
    }

    /// From 32 big-endian bytes.
    pub fn from_be_bytes(b: &[u8; 32]) -> Self {
        let mut limbs = [0u64; 4];
        for (i, limb) in limbs.iter_mut().enumerate() {
            let start = 32 - 8 * (i + 1);
            *limb = u64::from_be_bytes(b[start..start + 8].try_into().unwrap_or([0; 8]));
        }
        U256(limbs)
    }

    /// From 32 little-endian bytes (how Bitcoin reads a hash as a number).
    pub fn from_le_bytes(b: &[u8; 32]) -> Self {
        let mut limbs = [0u64; 4];
        for (i, limb) in limbs.iter_mut().enumerate() {
            *limb = u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().unwrap_or([0; 8]));
        }
        U256(limbs)
    }

    /// To 32 big-endian bytes.
    pub fn to_be_bytes(&self) -> [u8; 32] {
        let mut out = [0u8; 32];
        for (i, limb) in self.0.iter().enumerate() {
            let start = 32 - 8 * (i + 1);
            out[start..start + 8].copy_from_slice(&limb.to_be_bytes());
        }
        out
    }

    /// Whether zero.
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 4]
    }

    /// The lowest 64 bits.
    pub fn low_u64(&self) -> u64 {
        self.0[0]
    }

    /// Number of significant bits (0 for zero).
    pub fn bits(&self) -> u32 {
        for i in (0..4).rev() {
            if self.0[i] != 0 {
                return 64 * i as u32 + (64 - self.0[i].leading_zeros());
            }
        }
        0
    }

    /// `self << shift`; bits shifted past 2^256 are lost, as in Core.
    pub fn shl(&self, shift: u32) -> U256 {
        if shift >= 256 {
            return U256::ZERO;
        }
        let (words, bits) = ((shift / 64) as usize, shift % 64);
        let mut out = [0u64; 4];
        for i in (words..4).rev() {
            out[i] = self.0[i - words] << bits;
            if bits > 0 && i > words {
                out[i] |= self.0[i - words - 1] >> (64 - bits);
            }
        }
        U256(out)
    }

    /// `self >> shift`.
    pub fn shr(&self, shift: u32) -> U256 {
        if shift >= 256 {
            return U256::ZERO;
        }
        let (words, bits) = ((shift / 64) as usize, shift % 64);
        let mut out = [0u64; 4];
        for (i, limb) in out.iter_mut().enumerate().take(4 - words) {
            *limb = self.0[i + words] >> bits;
            if bits > 0 && i + words + 1 < 4 {
                *limb |= self.0[i + words + 1] << (64 - bits);
            }
        }
        U256(out)
    }

    /// `self + other`, or `None` on overflow.
    pub fn checked_add(&self, other: &U256) -> Option<U256> {
        let mut out = [0u64; 4];
        let mut carry = false;
        for (i, limb) in out.iter_mut().enumerate() {
            let (s1, c1) = self.0[i].overflowing_add(other.0[i]);
            let (s2, c2) = s1.overflowing_add(u64::from(carry));
            *limb = s2;
            carry = c1 || c2;
        }
        (!carry).then_some(U256(out))
    }

    /// `self + other`, saturating at 2^256 - 1 (chainwork cannot get near it).
    pub fn saturating_add(&self, other: &U256) -> U256 {
        self.checked_add(other).unwrap_or(U256::MAX)
    }

    /// `self - other`, or `None` if `other > self`.
    pub fn checked_sub(&self, other: &U256) -> Option<U256> {
        let mut out = [0u64; 4];
        let mut borrow = false;
        for (i, limb) in out.iter_mut().enumerate() {
            let (d1, b1) = self.0[i].overflowing_sub(other.0[i]);
            let (d2, b2) = d1.overflowing_sub(u64::from(borrow));
            *limb = d2;
            borrow = b1 || b2;
        }
        (!borrow).then_some(U256(out))
    }

    /// `self * m`, keeping the low 256 bits (Core's `arith_uint256 *= uint32` wraps too).
    pub fn wrapping_mul_u64(&self, m: u64) -> U256 {
        let mut out = [0u64; 4];
        let mut carry = 0u128;
        for (i, limb) in out.iter_mut().enumerate() {
            let p = u128::from(self.0[i]) * u128::from(m) + carry;
            *limb = p as u64;
            carry = p >> 64;
        }
        U256(out)
    }

    /// `self / d`, or `None` when `d` is zero.
    pub fn checked_div_u64(&self, d: u64) -> Option<U256> {
        if d == 0 {
            return None;
        }
        let mut out = [0u64; 4];
        let mut rem = 0u128;
        for i in (0..4).rev() {
            let cur = (rem << 64) | u128::from(self.0[i]);
            out[i] = (cur / u128::from(d)) as u64;
            rem = cur % u128::from(d);
        }
        Some(U256(out))
    }

    /// `self / d` by shift-and-subtract, or `None` when `d` is zero.
    pub fn checked_div(&self, d: &U256) -> Option<U256> {
        if d.is_zero() {
            return None;
        }
        if d.bits() <= 64 {
            return self.checked_div_u64(d.low_u64());
        }
        let mut quotient = U256::ZERO;
        let mut rem = *self;
        let shift = self.bits().saturating_sub(d.bits());
        let mut div = d.shl(shift);
        for s in (0..=shift).rev() {
            if let Some(r) = rem.checked_sub(&div) {
                rem = r;
                quotient.0[(s / 64) as usize] |= 1 << (s % 64);
            }
            div = div.shr(1);
        }
        Some(quotient)
    }

    /// Bitwise not.
    pub fn not(&self) -> U256 {
        U256([!self.0[0], !self.0[1], !self.0[2], !self.0[3]])
    }
}

impl Ord for U256 {
    fn cmp(&self, other: &Self) -> Ordering {
        for i in (0..4).rev() {
            match self.0[i].cmp(&other.0[i]) {
                Ordering::Equal => continue,
                o => return o,
            }
        }
        Ordering::Equal
    }
}

impl PartialOrd for U256 {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for U256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "U256({self:x})")
    }
}

/// 64 hex digits, big-endian.
impl fmt::LowerHex for U256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.to_be_bytes() {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn u(hex: &str) -> U256 {
        let mut b = [0u8; 32];
        let raw = hex::decode(format!("{hex:0>64}")).unwrap();
        b.copy_from_slice(&raw);
        U256::from_be_bytes(&b)
    }

    #[test]
    fn byte_orders_round_trip() {
        let x = u("0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20");
        assert_eq!(
            hex::encode(x.to_be_bytes()),
            "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"
        );
        let mut le = x.to_be_bytes();
        le.reverse();
        assert_eq!(U256::from_le_bytes(&le), x);
        assert_eq!(x.bits(), 249);
        assert_eq!(U256::ZERO.bits(), 0);
    }

    #[test]
    fn shifts() {
        let one = U256::ONE;
        for s in 0..256 {
            assert_eq!(one.shl(s).bits(), s + 1);
            assert_eq!(one.shl(s).shr(s), one);
        }
        assert_eq!(one.shl(256), U256::ZERO);
        assert_eq!(u("ff").shl(60), u("ff000000000000000"));
        assert_eq!(u("ff000000000000000").shr(60), u("ff"));
    }

    #[test]
    fn arithmetic() {
        assert_eq!(U256::MAX.checked_add(&U256::ONE), None);
        assert_eq!(
            u("ffffffffffffffff").checked_add(&U256::ONE),
            Some(u("10000000000000000"))
        );
        assert_eq!(U256::ZERO.checked_sub(&U256::ONE), None);
        assert_eq!(
            u("10000000000000000").checked_sub(&U256::ONE),
            Some(u("ffffffffffffffff"))
        );
        assert_eq!(
            u("ffffffffffffffff").wrapping_mul_u64(0x10),
            u("ffffffffffffffff0")
        );
        assert_eq!(
            u("ffffffffffffffff0").checked_div_u64(0x10),
            Some(u("ffffffffffffffff"))
        );
        assert_eq!(U256::ONE.checked_div_u64(0), None);
        let a = u("123456789abcdef0123456789abcdef0123456789abcdef");
        let b = u("fedcba9876543210fedcba98");
        // The quotient, computed independently (Python's integer division).
        assert_eq!(a.checked_div(&b), Some(u("1249249249249237ec687d6")));
        assert_eq!(a.checked_div(&U256::from_u64(7)), a.checked_div_u64(7));
        assert_eq!(U256::MAX.checked_div(&U256::MAX), Some(U256::ONE));
        assert_eq!(U256::ONE.checked_div(&U256::MAX), Some(U256::ZERO));
        assert_eq!(
            u("100000000000000000000000000000000").checked_div(&u("10000000000000000")),
            Some(u("10000000000000000"))
        );
    }

    /// Against crypto-bigint: every operation above on edge values and on seeded random
    /// values of every length.
    mod differential {
        #[cfg(target_arch = "wasm32")]
        use wasm_bindgen_test::wasm_bindgen_test as test;

        use crypto_bigint::U256 as Cb;

        use super::super::U256;
        use crate::reference::{Rng, be, cb, div, edges, from_cb, pair_edges, to_cb};

        /// Unary operations, the byte orders and formatting of `b`, read both ways.
        fn check_one(b: &[u8; 32]) {
            let x = U256::from_be_bytes(b);
            let r = cb(b);
            assert_eq!(x.to_be_bytes(), *b);
            assert_eq!(x.to_be_bytes(), be(&r));
            let mut le = *b;
            le.reverse();
            assert_eq!(U256::from_le_bytes(&le), x);
            assert_eq!(be(&Cb::from_le_slice(&le)), *b);
            assert_eq!(x.bits(), r.bits_vartime(), "{x:?}");
            assert_eq!(x.is_zero(), r.is_zero_vartime(), "{x:?}");
            let low: [u8; 8] = b[24..].try_into().unwrap();
            assert_eq!(x.low_u64(), u64::from_be_bytes(low), "{x:?}");
            assert_eq!(to_cb(&x.not()), r.not(), "{x:?}");
            assert_eq!(format!("{x:x}"), format!("{r:x}"));
            assert_eq!(format!("{x:?}"), format!("U256({r:x})"));
        }

        /// Shifts by every amount from 0 to 256, and a few beyond.
        fn check_shifts(b: &[u8; 32]) {
            let x = U256::from_be_bytes(b);
            let r = cb(b);
            for s in (0..=256).chain([257, 300, 511, 512, 1024, u32::MAX]) {
                assert_eq!(to_cb(&x.shl(s)), r.unbounded_shl_vartime(s), "{x:?} << {s}");
                assert_eq!(to_cb(&x.shr(s)), r.unbounded_shr_vartime(s), "{x:?} >> {s}");
            }
        }

        /// Binary operations on `a` and `b`, and those taking a u64 with `m`.
        fn check_pair(a: &[u8; 32], b: &[u8; 32], m: u64) {
            let (x, y) = (U256::from_be_bytes(a), U256::from_be_bytes(b));
            let (p, q) = (cb(a), cb(b));
            assert_eq!(x.cmp(&y), p.cmp(&q), "{x:?} vs {y:?}");
            assert_eq!(x.partial_cmp(&y), Some(p.cmp(&q)));
            assert_eq!(x == y, p == q);
            assert_eq!(x.max(y), from_cb(&p.max(q)));

            let (sum, carry) = p.carrying_add(&q, crypto_bigint::Limb::ZERO);
            let overflow = carry != crypto_bigint::Limb::ZERO;
            assert_eq!(
                x.checked_add(&y),
                (!overflow).then(|| from_cb(&sum)),
                "{x:?} + {y:?}"
            );
            assert_eq!(
                x.saturating_add(&y),
                from_cb(&p.saturating_add(&q)),
                "{x:?} + {y:?}"
            );
            let difference = (p >= q).then(|| from_cb(&p.wrapping_sub(&q)));
            assert_eq!(x.checked_sub(&y), difference, "{x:?} - {y:?}");
            assert_eq!(
                x.checked_div(&y),
                div(&p, &q).map(|d| from_cb(&d)),
                "{x:?} / {y:?}"
            );

            let mr = Cb::from_u64(m);
            assert_eq!(
                to_cb(&x.wrapping_mul_u64(m)),
                p.wrapping_mul(&mr),
                "{x:?} * {m:#x}"
            );
            let quotient = div(&p, &mr).map(|d| from_cb(&d));
            assert_eq!(x.checked_div_u64(m), quotient, "{x:?} / {m:#x}");
            // The same divisor as a U256 takes the single-limb path.
            assert_eq!(
                x.checked_div(&U256::from_u64(m)),
                quotient,
                "{x:?} / {m:#x}"
            );
        }

        /// Multipliers and divisors: 0, 1, small ones, the retarget timespans, limb edges.
        const U64_EDGES: [u64; 14] = [
            0,
            1,
            2,
            3,
            4,
            600,
            1_209_600,
            4 * 1_209_600,
            u32::MAX as u64,
            1 << 32,
            1 << 63,
            (1 << 63) + 1,
            u64::MAX - 1,
            u64::MAX,
        ];

        #[test]
        fn constants_match() {
            assert_eq!(to_cb(&U256::ZERO), Cb::ZERO);
            assert_eq!(to_cb(&U256::ONE), Cb::ONE);
            assert_eq!(to_cb(&U256::MAX), Cb::MAX);
            assert_eq!(U256::default(), U256::ZERO);
            for m in U64_EDGES {
                assert_eq!(to_cb(&U256::from_u64(m)), Cb::from_u64(m));
            }
        }

        #[test]
        fn unary_operations_and_shifts_on_edge_values() {
            let edges = edges();
            assert!(edges.len() > 1000, "{}", edges.len());
            for b in &edges {
                check_one(b);
                check_shifts(b);
            }
        }

        #[test]
        fn unary_operations_and_shifts_on_random_values() {
            let mut rng = Rng::new(0x756e_6172_7901);
            for _ in 0..2000 {
                let b = rng.value();
                check_one(&b);
                check_shifts(&b);
            }
        }

        #[test]
        fn binary_operations_on_edge_pairs() {
            let edges = pair_edges();
            let mut rng = Rng::new(0x6564_6765_7302);
            for a in &edges {
                for b in &edges {
                    check_pair(a, b, rng.u64());
                }
                for m in U64_EDGES {
                    check_pair(a, &rng.value(), m);
                }
            }
        }

        #[test]
        fn binary_operations_on_random_pairs() {
            let mut rng = Rng::new(0x7061_6972_7303);
            let edges = edges();
            for _ in 0..5000 {
                let (a, b, m) = (rng.value(), rng.value(), rng.u64());
                check_pair(&a, &b, m);
                // Equal operands, and edge values against random ones.
                check_pair(&a, &a, m);
                let e = edges[rng.below(edges.len() as u64) as usize];
                check_pair(&e, &b, m);
                check_pair(&a, &e, m);
            }
        }
    }
}
