//! Test-only: the `crypto-bigint` references that our own [`U256`] and the compact (`nBits`)
//! encoding are checked against, and a seeded generator of values shaped to find carry and
//! boundary bugs. Shared by the differential tests in `uint.rs`, `target.rs` and
//! `validate.rs`.

use crypto_bigint::{NonZero, U256 as Cb, U512, U4096};

use crate::params::Network;
use crate::target::CompactError;
use crate::uint::U256;

/// crypto-bigint's value of 32 big-endian bytes.
pub(crate) fn cb(bytes: &[u8; 32]) -> Cb {
    Cb::from_be_slice(bytes)
}

/// crypto-bigint's value of ours, through our big-endian bytes (themselves checked against
/// crypto-bigint's decoding in `uint.rs`).
pub(crate) fn to_cb(x: &U256) -> Cb {
    cb(&x.to_be_bytes())
}

/// The 32 big-endian bytes of a crypto-bigint value.
pub(crate) fn be(x: &Cb) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(x.to_be_bytes().as_ref());
    out
}

/// Ours, from a crypto-bigint value.
pub(crate) fn from_cb(x: &Cb) -> U256 {
    U256::from_be_bytes(&be(x))
}

/// `Some(x / d)`, or `None` when `d` is zero.
pub(crate) fn div(x: &Cb, d: &Cb) -> Option<Cb> {
    NonZero::new(*d)
        .into_option()
        .map(|d| x.div_rem_vartime(&d).0)
}

/// Bitcoin Core's `SetCompact` with `CheckProofOfWork`'s refusals, computed exactly: the
/// value `mantissa * 256^(exponent - 3)` in 4096 bits (the largest exponent shifts by 2016),
/// refused when the sign bit is set on a non-zero value, when the value needs more than
/// 256 bits, or when it is zero.
pub(crate) fn set_compact(bits: u32) -> Result<Cb, CompactError> {
    let exponent = bits >> 24;
    let mantissa = U4096::from_u32(bits & 0x007f_ffff);
    let value = if exponent >= 3 {
        mantissa.shl_vartime(8 * (exponent - 3))
    } else {
        mantissa.shr_vartime(8 * (3 - exponent))
    };
    if bits & 0x0080_0000 != 0 && !value.is_zero_vartime() {
        Err(CompactError::Negative)
    } else if value.bits_vartime() > 256 {
        Err(CompactError::Overflow)
    } else if value.is_zero_vartime() {
        Err(CompactError::Zero)
    } else {
        Ok(value.resize())
    }
}

/// Bitcoin Core's `GetCompact` for a non-negative value: its length in bytes as the exponent
/// and its top three bytes as the mantissa (rounding down); if the mantissa would set the
/// sign bit, one byte fewer and the exponent one more.
pub(crate) fn get_compact(x: &Cb) -> u32 {
    let mut size = x.bits_vartime().div_ceil(8);
    let wide: U512 = x.resize();
    let scaled = if size >= 3 {
        let divisor = NonZero::new(U512::ONE.shl_vartime(8 * (size - 3)));
        wide.div_rem_vartime(&divisor.expect("a power of two is not zero"))
            .0
    } else {
        wide.wrapping_mul(&U512::from_u32(1 << (8 * (3 - size))))
    };
    let scaled = be(&scaled.resize());
    assert_eq!(
        scaled[..28],
        [0; 28],
        "{x:x}: the mantissa has at most 3 bytes"
    );
    let mut mantissa = u32::from_be_bytes([scaled[28], scaled[29], scaled[30], scaled[31]]);
    if mantissa & 0x0080_0000 != 0 {
        mantissa /= 256;
        size += 1;
    }
    size << 24 | mantissa
}

/// The work of a target: `2^256 / (target + 1)`, exactly, in 512 bits.
pub(crate) fn work(target: &Cb) -> Cb {
    let wide: U512 = target.resize();
    let denominator = NonZero::new(wide.wrapping_add(&U512::ONE));
    let quotient = U512::ONE
        .shl_vartime(256)
        .div_rem_vartime(&denominator.expect("target + 1 is not zero in 512 bits"))
        .0;
    quotient.resize()
}

/// SplitMix64: a seeded generator, enough to spread test inputs.
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator whose sequence is fixed by `seed`.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (slightly biased; `n` must not be zero).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// A u64 of random length whose limbs are sometimes all ones, zero or a single bit.
    pub(crate) fn u64(&mut self) -> u64 {
        let v = match self.below(6) {
            0 => 0,
            1 => u64::MAX,
            2 => 1 << self.below(64),
            _ => self.next_u64(),
        };
        v >> self.below(64)
    }

    /// 32 big-endian bytes: each 64-bit limb random, zero, all ones, a single bit or all
    /// ones below a bit (carry and borrow chains), then cut to a random bit length so that
    /// quotients, shifts and compact exponents see every size.
    pub(crate) fn value(&mut self) -> [u8; 32] {
        let mut b = [0u8; 32];
        for chunk in b.chunks_exact_mut(8) {
            let limb = match self.below(8) {
                0 => 0,
                1 => u64::MAX,
                2 => 1 << self.below(64),
                3 => u64::MAX >> self.below(64),
                _ => self.next_u64(),
            };
            chunk.copy_from_slice(&limb.to_be_bytes());
        }
        let keep = self.below(257) as u32;
        for (i, byte) in b.iter_mut().enumerate() {
            // The bit index of this byte's lowest bit.
            let low = 8 * (31 - i as u32);
            if low >= keep {
                *byte = 0;
            } else if keep - low < 8 {
                *byte &= (1u8 << (keep - low)) - 1;
            }
        }
        b
    }
}

/// Edge values: 0, 1, 2, 3, MAX and its neighbours, every power of two with its neighbours
/// (limb and byte boundaries, the values near 2^255), every value with one bit clear, bit
/// patterns, and each network's proof-of-work limit with its neighbours.
pub(crate) fn edges() -> Vec<[u8; 32]> {
    let mut out: Vec<Cb> = vec![
        Cb::ZERO,
        Cb::ONE,
        Cb::from_u8(2),
        Cb::from_u8(3),
        Cb::MAX,
        Cb::MAX.wrapping_sub(&Cb::ONE),
        Cb::from_be_hex("5555555555555555555555555555555555555555555555555555555555555555"),
        Cb::from_be_hex("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
        Cb::from_be_hex("0123456789abcdeffedcba98765432100123456789abcdeffedcba9876543210"),
    ];
    for k in 0..256 {
        let p = Cb::ONE.shl_vartime(k);
        out.extend([
            p,
            p.wrapping_sub(&Cb::ONE),
            p.wrapping_add(&Cb::ONE),
            Cb::MAX.wrapping_sub(&p),
        ]);
    }
    for network in Network::ALL {
        let limit = cb(&network.params().pow_limit);
        out.extend([
            limit,
            limit.wrapping_sub(&Cb::ONE),
            limit.wrapping_add(&Cb::ONE),
        ]);
    }
    out.sort();
    out.dedup();
    out.iter().map(be).collect()
}

/// A few dozen of [`edges`] for the pairwise checks: small values, MAX, values around the
/// limb boundaries and 2^255, and the mainnet limit.
pub(crate) fn pair_edges() -> Vec<[u8; 32]> {
    let mut out: Vec<Cb> = vec![
        Cb::ZERO,
        Cb::ONE,
        Cb::from_u8(2),
        Cb::from_u8(3),
        Cb::MAX,
        Cb::MAX.wrapping_sub(&Cb::ONE),
        Cb::from_be_hex("0123456789abcdeffedcba98765432100123456789abcdeffedcba9876543210"),
    ];
    for k in [
        31, 32, 63, 64, 65, 127, 128, 129, 191, 192, 193, 224, 254, 255,
    ] {
        let p = Cb::ONE.shl_vartime(k);
        out.extend([p, p.wrapping_sub(&Cb::ONE), p.wrapping_add(&Cb::ONE)]);
    }
    let limit = cb(&Network::Mainnet.params().pow_limit);
    out.extend([limit, limit.wrapping_add(&Cb::ONE)]);
    out.sort();
    out.dedup();
    out.iter().map(be).collect()
}
