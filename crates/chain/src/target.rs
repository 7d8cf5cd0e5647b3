//! Proof-of-work targets: the compact `nBits` encoding, the 256-bit target, and the work a
//! target represents, all with Bitcoin Core's exact semantics (`arith_uint256`'s
//! `SetCompact`/`GetCompact` and `GetBlockProof`).

use core::fmt;

use crate::header::BlockHash;
use crate::uint::U256;

/// A target in compact form (`nBits`): one exponent byte and a 23-bit mantissa with a sign bit.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CompactTarget(pub u32);

impl fmt::Debug for CompactTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CompactTarget({:#010x})", self.0)
    }
}

impl fmt::Display for CompactTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#010x}", self.0)
    }
}

/// A compact value that no valid header can carry.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum CompactError {
    /// The sign bit is set on a non-zero mantissa.
    #[error("compact target is negative (sign bit set on a non-zero mantissa)")]
    Negative,
    /// The value does not fit in 256 bits.
    #[error("compact target does not fit in 256 bits")]
    Overflow,
    /// The target is zero.
    #[error("compact target is zero")]
    Zero,
}

impl CompactTarget {
    /// Decode as Core's `SetCompact` does, refusing what `CheckProofOfWork` refuses:
    /// negative, overflowing and zero targets.
    pub fn to_target(self) -> Result<Target, CompactError> {
        let size = self.0 >> 24;
        let mut word = self.0 & 0x007f_ffff;
        let value = if size <= 3 {
            word >>= 8 * (3 - size);
            U256::from_u64(u64::from(word))
        } else {
            U256::from_u64(u64::from(word)).shl(8 * (size - 3))
        };
        if word != 0 && self.0 & 0x0080_0000 != 0 {
            return Err(CompactError::Negative);
        }
        if word != 0 && (size > 34 || (word > 0xff && size > 33) || (word > 0xffff && size > 32)) {
            return Err(CompactError::Overflow);
        }
        if value.is_zero() {
            return Err(CompactError::Zero);
        }
        Ok(Target(value))
    }
}

/// A 256-bit proof-of-work target: a header is valid when its hash, read as a little-endian
/// number, is at most the target.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub struct Target(pub U256);

impl Target {
    /// Encode as Core's `GetCompact` does (rounding the mantissa down to 23 bits).
    pub fn to_compact(&self) -> CompactTarget {
        let mut size = self.0.bits().div_ceil(8);
        let mut compact = if size <= 3 {
            self.0.low_u64() << (8 * (3 - size))
        } else {
            self.0.shr(8 * (size - 3)).low_u64()
        } as u32;
        // The mantissa's top bit is the sign: move one byte into the exponent instead.
        if compact & 0x0080_0000 != 0 {
            compact >>= 8;
            size += 1;
        }
        CompactTarget(compact | (size << 24))
    }

    /// Whether `hash` meets this target.
    pub fn is_met_by(&self, hash: &BlockHash) -> bool {
        U256::from_le_bytes(&hash.0) <= self.0
    }

    /// The expected number of hashes to meet this target: `2^256 / (target + 1)`, computed
    /// as Core does, `~target / (target + 1) + 1`, which cannot overflow.
    pub fn work(&self) -> Work {
        let denominator = self.0.saturating_add(&U256::ONE);
        let quotient = self.0.not().checked_div(&denominator).unwrap_or(U256::ZERO);
        Work(quotient.saturating_add(&U256::ONE))
    }
}

/// Amount of work: per header, or cumulative (chainwork).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Default, Hash)]
pub struct Work(pub U256);

impl Work {
    /// No work.
    pub const ZERO: Work = Work(U256::ZERO);

    /// Cumulative work (saturating: real chainwork is far below 2^256).
    pub fn add(&self, other: &Work) -> Work {
        Work(self.0.saturating_add(&other.0))
    }
}

/// 64 hex digits, as Core prints chainwork.
impl fmt::Display for Work {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn compact_round_trips_like_core() {
        // Cases from Bitcoin Core's arith_uint256 tests (SetCompact/GetCompact), as values.
        let cases: &[(u32, Result<u64, CompactError>, u32)] = &[
            (0x01003456, Err(CompactError::Zero), 0),
            (0x01123456, Ok(0x12), 0x01120000),
            (0x02123456, Ok(0x1234), 0x02123400),
            (0x03123456, Ok(0x123456), 0x03123456),
            (0x04123456, Ok(0x12345600), 0x04123456),
            (0x05009234, Ok(0x92340000), 0x05009234),
            (0x04923456, Err(CompactError::Negative), 0),
            (0x01fedcba, Err(CompactError::Negative), 0),
        ];
        for &(bits, expected, back) in cases {
            let got = CompactTarget(bits).to_target();
            match expected {
                Ok(v) => {
                    let t = got.unwrap();
                    assert_eq!(t.0, U256::from_u64(v), "{bits:#x}");
                    assert_eq!(t.to_compact(), CompactTarget(back), "{bits:#x}");
                }
                Err(e) => assert_eq!(got, Err(e), "{bits:#x}"),
            }
        }
        assert_eq!(
            CompactTarget(0xff123456).to_target(),
            Err(CompactError::Overflow)
        );
        let big = CompactTarget(0x20123456).to_target().unwrap();
        assert_eq!(big.to_compact(), CompactTarget(0x20123456));
    }

    #[test]
    fn work_of_difficulty_one() {
        // 0x1d00ffff: 2^256 / (0xffff * 2^208 + 1) = 0x100010001.
        let t = CompactTarget(0x1d00ffff).to_target().unwrap();
        assert_eq!(t.work(), Work(U256::from_u64(0x1_0001_0001)));
        // Regtest's limit 0x207fffff: work 2.
        let t = CompactTarget(0x207fffff).to_target().unwrap();
        assert_eq!(t.work(), Work(U256::from_u64(2)));
    }

    /// Against crypto-bigint: `SetCompact` and `GetCompact` computed exactly (see
    /// `crate::reference`), the work of a target, and the round trips between them.
    mod differential {
        #[cfg(target_arch = "wasm32")]
        use wasm_bindgen_test::wasm_bindgen_test as test;

        use crypto_bigint::U256 as Cb;

        use super::super::*;
        use crate::reference::{Rng, be, cb, edges, get_compact, set_compact, to_cb, work};

        /// Decoding `bits`, and for a valid target the encoding back and the round trip.
        fn check_compact(bits: u32) {
            let got = CompactTarget(bits).to_target();
            let expected = set_compact(bits);
            assert_eq!(got.map(|t| to_cb(&t.0)), expected, "{bits:#010x}");
            if let Ok(target) = got {
                let back = target.to_compact();
                // A decoded value has at most three significant bytes: it survives the
                // round trip exactly, and its encoding is the canonical one.
                assert_eq!(back.0, get_compact(&to_cb(&target.0)), "{bits:#010x}");
                assert_eq!(back.to_target(), Ok(target), "{bits:#010x} -> {back}");
            }
        }

        /// Encoding the value `b`, its work, and whether hashes meet it.
        fn check_target(b: &[u8; 32], hash: &[u8; 32]) {
            let target = Target(U256::from_be_bytes(b));
            let r = cb(b);
            let compact = target.to_compact();
            assert_eq!(compact.0, get_compact(&r), "{target:?}");
            assert_eq!(
                target.is_met_by(&BlockHash(*hash)),
                Cb::from_le_slice(hash) <= r,
                "{target:?}"
            );
            // A hash is a little-endian number: equal to the target meets it, one more not.
            let hash_of = |v: &Cb| {
                let mut le = be(v);
                le.reverse();
                BlockHash(le)
            };
            assert!(target.is_met_by(&hash_of(&r)), "{target:?}");
            if r != Cb::MAX {
                let above = hash_of(&r.wrapping_add(&Cb::ONE));
                assert!(!target.is_met_by(&above), "{target:?}");
            }
            if r == Cb::ZERO {
                // No header carries a zero target (`to_target` refuses it).
                assert_eq!(compact, CompactTarget(0));
                return;
            }
            assert_eq!(to_cb(&target.work().0), work(&r), "{target:?}");
            // The encoding keeps the top bytes and drops the rest (rounding down), and
            // decodes to a valid target again.
            let size = compact.0 >> 24;
            let decoded = compact.to_target().map(|t| to_cb(&t.0));
            let kept = if size > 3 {
                r.unbounded_shr_vartime(8 * (size - 3))
                    .unbounded_shl_vartime(8 * (size - 3))
            } else {
                r
            };
            assert_eq!(decoded, Ok(kept), "{target:?} -> {compact}");
            assert_eq!(compact.0 & 0x0080_0000, 0, "{target:?} -> {compact}");
        }

        #[test]
        fn every_exponent_with_edge_mantissas() {
            let mantissas = [
                0x00_0000, 0x00_0001, 0x00_007f, 0x00_0080, 0x00_00ff, 0x00_0100, 0x00_7fff,
                0x00_8000, 0x00_ffff, 0x01_0000, 0x12_3456, 0x7f_ffff,
            ];
            for exponent in 0..=255u32 {
                for mantissa in mantissas {
                    for sign in [0, 0x0080_0000] {
                        check_compact(exponent << 24 | sign | mantissa);
                    }
                }
            }
        }

        #[test]
        fn random_compacts() {
            let mut rng = Rng::new(0x6e62_6974_7304);
            for _ in 0..20_000 {
                // Mostly the exponents of real targets, near the overflow edge at 32..=35.
                let exponent = match rng.below(4) {
                    0 => rng.below(256),
                    1 => 30 + rng.below(7),
                    _ => rng.below(36),
                } as u32;
                let mantissa = (rng.next_u64() as u32 & 0x00ff_ffff) >> rng.below(24);
                check_compact(exponent << 24 | mantissa);
            }
        }

        #[test]
        fn targets_of_edge_values() {
            let mut rng = Rng::new(0x7461_7267_7405);
            for b in edges() {
                check_target(&b, &rng.value());
            }
        }

        #[test]
        fn targets_of_random_values() {
            let mut rng = Rng::new(0x7461_7267_7406);
            for _ in 0..5000 {
                let (b, hash) = (rng.value(), rng.value());
                check_target(&b, &hash);
            }
        }

        #[test]
        fn network_limits() {
            for network in crate::Network::ALL {
                let params = network.params();
                let limit = cb(&params.pow_limit);
                assert_eq!(to_cb(&params.pow_limit().0), limit, "{network}");
                assert_eq!(
                    params.pow_limit_compact().0,
                    get_compact(&limit),
                    "{network}"
                );
            }
        }
    }
}
