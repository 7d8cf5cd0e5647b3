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

/// Reads bits from a byte slice, most significant bit of each byte first.
pub(crate) struct BitReader<'a> {
    bytes: &'a [u8],
    /// Position in bits.
    pos: usize,
}

impl<'a> BitReader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        BitReader { bytes, pos: 0 }
    }

    /// Bits left.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() * 8 - self.pos
    }

    /// Read one bit, `None` past the end.
    pub(crate) fn bit(&mut self) -> Option<bool> {
        let byte = *self.bytes.get(self.pos / 8)?;
        let bit = (byte >> (7 - self.pos % 8)) & 1 == 1;
        self.pos += 1;
        Some(bit)
    }

    /// Read `n` bits (n <= 64) as a number, `None` if fewer remain.
    pub(crate) fn read(&mut self, n: u32) -> Option<u64> {
        if (n as usize) > self.remaining() {
            return None;
        }
        let mut v = 0u64;
        let mut left = n;
        while left > 0 {
            let byte = self.bytes[self.pos / 8];
            let offset = (self.pos % 8) as u32;
            let take = (8 - offset).min(left);
            let chunk = (u64::from(byte) >> (8 - offset - take)) & ((1u64 << take) - 1);
            v = (v << take) | chunk;
            self.pos += take as usize;
            left -= take;
        }
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

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
