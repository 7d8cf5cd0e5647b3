//! Bit streams, most significant bit first (BIP158's Golomb-Rice coding).

use alloc::vec::Vec;

/// Appends bits to a byte vector, most significant bit of each byte first.
pub(crate) struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    /// Bits used in the last byte (0 when a new byte starts).
    used: u32,
}

impl<'a> BitWriter<'a> {
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Self {
        BitWriter { out, used: 0 }
    }

    /// Write the low `n` bits of `v` (n <= 64), most significant first.
    pub(crate) fn write(&mut self, v: u64, n: u32) {
        for i in (0..n).rev() {
            if self.used == 0 {
                self.out.push(0);
            }
            if (v >> i) & 1 == 1 {
                if let Some(last) = self.out.last_mut() {
                    *last |= 0x80 >> self.used;
                }
            }
            self.used = (self.used + 1) % 8;
        }
    }

    /// Write `q` one bits then a zero (unary).
    pub(crate) fn unary(&mut self, q: u64) {
        for _ in 0..q {
            self.write(1, 1);
        }
        self.write(0, 1);
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
        let mut r = BitReader::new(&out);
        assert_eq!(r.read(3), Some(0b101));
        for _ in 0..3 {
            assert_eq!(r.bit(), Some(true));
        }
        assert_eq!(r.bit(), Some(false));
        assert_eq!(r.read(19), Some(0x7_ffff));
        assert_eq!(r.read(64), Some(u64::MAX));
        assert_eq!(r.bit(), Some(false));
        // Padding to the byte, then nothing.
        let left = r.remaining();
        assert!(left < 8);
        assert_eq!(r.read(left as u32 + 1), None);
        assert_eq!(r.read(left as u32), Some(0));
        assert_eq!(r.bit(), None);
    }
}
