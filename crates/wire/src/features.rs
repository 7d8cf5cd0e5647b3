//! Feature bit fields (BOLT 1 `init`, BOLT 9).
//!
//! A feature field is big-endian: bit 0 is the least significant bit of the *last* byte.
//! Features come in pairs: the even bit says the sender requires the feature, the odd bit
//! says it supports it. A receiver ignores unknown odd bits and must fail the connection
//! on an unknown even bit ("it's ok to be odd").

use crate::error::EncodeError;

/// A borrowed feature bit field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features<'a> {
    bytes: &'a [u8],
}

impl<'a> Features<'a> {
    /// A view of `bytes` as a big-endian feature field.
    pub const fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    /// The empty field (no bits set).
    pub const fn empty() -> Self {
        Self { bytes: &[] }
    }

    /// The raw bytes.
    pub const fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Whether `bit` is set. Bits beyond the field are unset.
    pub fn is_set(&self, bit: usize) -> bool {
        bit_of(byte_from_end(self.bytes, bit / 8), bit)
    }

    /// Whether no bit is set (an all-zero field counts as empty).
    pub fn is_empty(&self) -> bool {
        self.bytes.iter().all(|&b| b == 0)
    }

    /// The set bits, lowest first.
    pub fn iter(&self) -> SetBits<'a> {
        SetBits::new(self.bytes, &[])
    }

    /// The lowest set even (required) bit that is not known, or `None` if every required
    /// bit is known. See [`is_known`] for what `known` means.
    pub fn first_unknown_required(&self, known: &[usize]) -> Option<usize> {
        first_unknown_required(self.iter(), known)
    }

    /// Writes a minimal-length field with exactly `bits` set at the start of `out`, and
    /// returns a view of it. Writes nothing if `bits` is empty.
    pub fn write_bits(bits: &[usize], out: &'a mut [u8]) -> Result<Features<'a>, EncodeError> {
        let len = bits_len(bits);
        let available = out.len();
        let field = out.get_mut(..len).ok_or(EncodeError::BufferTooSmall {
            needed: len,
            available,
        })?;
        field.fill(0);
        for &bit in bits {
            let index = len - 1 - bit / 8;
            if let Some(byte) = field.get_mut(index) {
                *byte |= 1 << (bit % 8);
            }
        }
        Ok(Features::new(field))
    }
}

impl<'a> IntoIterator for Features<'a> {
    type Item = usize;
    type IntoIter = SetBits<'a>;

    fn into_iter(self) -> SetBits<'a> {
        self.iter()
    }
}

/// Bytes a minimal field with `bits` set takes: one past the highest bit's byte.
pub fn bits_len(bits: &[usize]) -> usize {
    bits.iter().max().map_or(0, |&b| b / 8 + 1)
}

/// The union (logical OR) of `init`'s two fields, `globalfeatures` and `features`, which
/// BOLT 1 says the receiver treats as one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CombinedFeatures<'a> {
    /// `globalfeatures`.
    pub global: Features<'a>,
    /// `features`.
    pub local: Features<'a>,
}

impl<'a> CombinedFeatures<'a> {
    /// Whether `bit` is set in either field.
    pub fn is_set(&self, bit: usize) -> bool {
        self.global.is_set(bit) || self.local.is_set(bit)
    }

    /// The bits set in either field, lowest first, each once.
    pub fn iter(&self) -> SetBits<'a> {
        SetBits::new(self.global.bytes, self.local.bytes)
    }

    /// The lowest even (required) bit set in either field that is not known, or `None`.
    /// See [`is_known`] for what `known` means.
    pub fn first_unknown_required(&self, known: &[usize]) -> Option<usize> {
        first_unknown_required(self.iter(), known)
    }
}

impl<'a> IntoIterator for CombinedFeatures<'a> {
    type Item = usize;
    type IntoIter = SetBits<'a>;

    fn into_iter(self) -> SetBits<'a> {
        self.iter()
    }
}

/// Whether `bit` belongs to a feature we know: `known` lists bits we understand, and
/// knowing either bit of a pair (`2k`, `2k + 1`) means knowing the feature, so both bits.
pub fn is_known(bit: usize, known: &[usize]) -> bool {
    known.iter().any(|&k| k / 2 == bit / 2)
}

fn first_unknown_required(bits: SetBits<'_>, known: &[usize]) -> Option<usize> {
    bits.filter(|b| b % 2 == 0).find(|&b| !is_known(b, known))
}

/// The `i`th byte counting from the end (0 is the last byte), or 0 past the start.
fn byte_from_end(bytes: &[u8], i: usize) -> u8 {
    bytes
        .len()
        .checked_sub(1 + i)
        .and_then(|at| bytes.get(at))
        .copied()
        .unwrap_or(0)
}

fn bit_of(byte: u8, bit: usize) -> bool {
    byte & (1 << (bit % 8)) != 0
}

/// Iterator over the set bits of one or two (ORed) feature fields, lowest first.
#[derive(Clone, Debug)]
pub struct SetBits<'a> {
    a: &'a [u8],
    b: &'a [u8],
    next: usize,
    end: usize,
}

impl<'a> SetBits<'a> {
    fn new(a: &'a [u8], b: &'a [u8]) -> Self {
        let bytes = a.len().max(b.len());
        Self {
            a,
            b,
            next: 0,
            end: bytes.saturating_mul(8),
        }
    }
}

impl Iterator for SetBits<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        while self.next < self.end {
            let bit = self.next;
            let byte = byte_from_end(self.a, bit / 8) | byte_from_end(self.b, bit / 8);
            if byte == 0 {
                // Skip the rest of an empty byte.
                self.next = (bit / 8 + 1).saturating_mul(8);
                continue;
            }
            self.next += 1;
            if bit_of(byte, bit) {
                return Some(bit);
            }
        }
        None
    }
}

impl core::iter::FusedIterator for SetBits<'_> {}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn bit_zero_is_lsb_of_last_byte() {
        let f = Features::new(&[0x80, 0x00, 0x01]);
        assert!(f.is_set(0));
        assert!(!f.is_set(1));
        assert!(f.is_set(23));
        assert!(!f.is_set(24));
        assert!(!f.is_set(usize::MAX));
        assert_eq!(f.iter().collect::<Vec<_>>(), [0, 23]);
        assert!(!f.is_empty());
        assert!(Features::new(&[0, 0]).is_empty());
        assert!(Features::empty().is_empty());
        assert_eq!(Features::empty().iter().next(), None);
    }

    #[test]
    fn unknown_odd_bits_are_ignored_unknown_even_fail() {
        // Bits 1 (odd), 12 and 14 (even), 17 (odd).
        let f = Features::new(&[0x02, 0x50, 0x02]);
        assert_eq!(f.iter().collect::<Vec<_>>(), [1, 12, 14, 17]);
        assert_eq!(f.first_unknown_required(&[]), Some(12));
        // Knowing bit 13 (the odd half of 12/13) means knowing the feature.
        assert_eq!(f.first_unknown_required(&[13]), Some(14));
        assert_eq!(f.first_unknown_required(&[12, 14]), None);
        assert_eq!(f.first_unknown_required(&[13, 15]), None);
        // Odd bits alone never fail.
        assert_eq!(
            Features::new(&[0xaa, 0xaa]).first_unknown_required(&[]),
            None
        );
    }

    #[test]
    fn combined_is_the_union() {
        let global = Features::new(&[0x01]); // bit 0
        let local = Features::new(&[0x02, 0x00, 0x08]); // bits 3, 17
        let c = CombinedFeatures { global, local };
        assert_eq!(c.iter().collect::<Vec<_>>(), [0, 3, 17]);
        assert!(c.is_set(0) && c.is_set(3) && c.is_set(17) && !c.is_set(1));
        assert_eq!(c.first_unknown_required(&[]), Some(0));
        assert_eq!(c.first_unknown_required(&[1]), None);
        // A bit set in both fields is reported once.
        let both = CombinedFeatures {
            global: Features::new(&[0x04]),
            local: Features::new(&[0x04]),
        };
        assert_eq!(both.into_iter().collect::<Vec<_>>(), [2]);
    }

    #[test]
    fn write_bits_is_minimal() {
        let mut buf = [0xffu8; 4];
        let f = Features::write_bits(&[0, 9, 13], &mut buf).unwrap();
        assert_eq!(f.as_bytes(), &[0x22, 0x01]);
        assert_eq!(f.into_iter().collect::<Vec<_>>(), [0, 9, 13]);
        let mut buf = [0xffu8; 4];
        let f = Features::write_bits(&[], &mut buf).unwrap();
        assert_eq!(f.as_bytes(), &[] as &[u8]);
        assert_eq!(bits_len(&[31]), 4);
        let mut small = [0u8; 1];
        assert_eq!(
            Features::write_bits(&[8], &mut small),
            Err(EncodeError::BufferTooSmall {
                needed: 2,
                available: 1
            })
        );
    }
}
