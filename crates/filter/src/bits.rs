//! Bit streams, most significant bit first (BIP158's Golomb-Rice coding).

use alloc::vec::Vec;

/// Appends bits to a byte vector, most significant bit of each byte first. Bits gather in
/// a 64-bit word and go out a byte at a time; [`Self::finish`] writes the last, partial
/// byte (zero-padded).
pub(crate) struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    /// Pending bits, in the low `pending` bits.
    acc: u64,
    pending: u32,
}

impl<'a> BitWriter<'a> {
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Self {
        BitWriter {
            out,
            acc: 0,
            pending: 0,
        }
    }

    /// Write the low `n` bits of `v` (n <= 64), most significant first.
    pub(crate) fn write(&mut self, v: u64, n: u32) {
        if n > 32 {
            self.write(v >> 32, n - 32);
            self.write(v & 0xffff_ffff, 32);
            return;
        }
        if n == 0 {
            return;
        }
        // At most 7 bits pend between calls, so 7 + 32 fit in the word.
        self.acc = (self.acc << n) | (v & ((1u64 << n) - 1));
        self.pending += n;
        while self.pending >= 8 {
            self.pending -= 8;
            self.out.push((self.acc >> self.pending) as u8);
        }
        self.acc &= (1u64 << self.pending) - 1;
    }

    /// Write `q` one bits then a zero (unary).
    pub(crate) fn unary(&mut self, mut q: u64) {
        while q >= 32 {
            self.write(0xffff_ffff, 32);
            q -= 32;
        }
        // q ones, then the zero: q + 1 <= 32 bits.
        self.write(((1u64 << q) - 1) << 1, q as u32 + 1);
    }

    /// Write the last partial byte, its low bits zero.
    pub(crate) fn finish(self) {
        if self.pending > 0 {
            self.out.push((self.acc << (8 - self.pending)) as u8);
        }
    }
}

/// Reads bits from a byte slice, most significant bit of each byte first, through a 64-bit
/// word refilled a byte at a time (a unary run is counted with one `leading_zeros`).
pub(crate) struct BitReader<'a> {
    bytes: &'a [u8],
    /// The next byte to load.
    next: usize,
    /// Loaded bits, left-aligned; the bits below `have` are zero.
    buf: u64,
    have: u32,
}

impl<'a> BitReader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        BitReader {
            bytes,
            next: 0,
            buf: 0,
            have: 0,
        }
    }

    /// Bits left.
    pub(crate) fn remaining(&self) -> usize {
        (self.bytes.len() - self.next) * 8 + self.have as usize
    }

    fn refill(&mut self) {
        while self.have <= 56 {
            let Some(&b) = self.bytes.get(self.next) else {
                break;
            };
            self.buf |= u64::from(b) << (56 - self.have);
            self.have += 8;
            self.next += 1;
        }
    }

    /// Read one bit, `None` past the end.
    #[cfg(test)]
    pub(crate) fn bit(&mut self) -> Option<bool> {
        self.read(1).map(|b| b == 1)
    }

    /// Read `n` bits (n <= 64) as a number, `None` if fewer remain.
    pub(crate) fn read(&mut self, n: u32) -> Option<u64> {
        if n == 0 {
            return Some(0);
        }
        if n > 57 {
            if (n as usize) > self.remaining() {
                return None;
            }
            let hi = self.read(n - 32)?;
            let lo = self.read(32)?;
            return Some((hi << 32) | lo);
        }
        if self.have < n {
            self.refill();
            if self.have < n {
                return None;
            }
        }
        let v = self.buf >> (64 - n);
        self.buf <<= n;
        self.have -= n;
        Some(v)
    }

    /// Read a unary number: one bits up to a zero, which is consumed too; `None` if the
    /// bits end first. Stops counting once past `limit` (returning more than `limit`), so a
    /// hostile run of ones costs no more than the range allows.
    pub(crate) fn unary(&mut self, limit: u64) -> Option<u64> {
        let mut q = 0u64;
        loop {
            if self.have == 0 {
                self.refill();
                if self.have == 0 {
                    return None;
                }
            }
            // Bits past `have` are zero: they end a run of ones as a zero would, and the
            // count is cut to the bits loaded.
            let ones = (!self.buf).leading_zeros().min(self.have);
            if ones < self.have {
                self.buf = self.buf.checked_shl(ones + 1).unwrap_or(0);
                self.have -= ones + 1;
                return Some(q + u64::from(ones));
            }
            q += u64::from(ones);
            self.buf = 0;
            self.have = 0;
            if q > limit {
                return Some(q);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn word_reads_equal_bit_reads_at_every_offset() {
        let bytes: Vec<u8> = (0..64u32).map(|i| (i * 73 + 5) as u8).collect();
        for start in 0..40 {
            for n in [0u32, 1, 7, 19, 33, 57, 64] {
                let mut a = BitReader::new(&bytes);
                let mut b = BitReader::new(&bytes);
                a.read(start);
                b.read(start);
                let want = (0..n).try_fold(0u64, |v, _| b.bit().map(|x| (v << 1) | u64::from(x)));
                assert_eq!(a.read(n), want, "{start} {n}");
                assert_eq!(a.remaining(), b.remaining());
            }
        }
        // Unary: ones up to a zero, across words; the end of the bits is not a zero.
        let mut ones = vec![0xffu8; 20];
        ones.push(0x7f);
        let mut r = BitReader::new(&ones);
        assert_eq!(r.unary(1000), Some(160));
        assert_eq!(r.remaining(), 7);
        let mut r = BitReader::new(&[0xff, 0xff]);
        assert_eq!(r.unary(1000), None, "no zero before the end");
        let mut r = BitReader::new(&[0xff; 64]);
        assert!(r.unary(10).unwrap() > 10, "stops past the limit");
    }

    #[test]
    fn bits_round_trip() {
        let mut out = Vec::new();
        let mut w = BitWriter::new(&mut out);
        w.write(0b101, 3);
        w.unary(3);
        w.write(0x7_ffff, 19);
        w.write(u64::MAX, 64);
        w.unary(0);
        w.unary(70);
        w.finish();
        let mut r = BitReader::new(&out);
        assert_eq!(r.read(3), Some(0b101));
        for _ in 0..3 {
            assert_eq!(r.bit(), Some(true));
        }
        assert_eq!(r.bit(), Some(false));
        assert_eq!(r.read(19), Some(0x7_ffff));
        assert_eq!(r.read(64), Some(u64::MAX));
        assert_eq!(r.bit(), Some(false));
        for _ in 0..70 {
            assert_eq!(r.bit(), Some(true));
        }
        assert_eq!(r.bit(), Some(false));
        // Padding to the byte, then nothing.
        let left = r.remaining();
        assert!(left < 8);
        assert_eq!(r.read(left as u32 + 1), None);
        assert_eq!(r.read(left as u32), Some(0));
        assert_eq!(r.bit(), None);
    }
}
