//! A cursor over consensus-encoded bytes, checking every length against what is left, and
//! the error it gives: a hostile block, transaction or filter is a [`DecodeError`] naming
//! the field, never a panic or an allocation.

use crate::compact_size::{CompactSizeError, read_compact_size};

/// Bytes that do not decode as what they should be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// They end inside a field.
    #[error("the bytes end inside {field}")]
    Truncated {
        /// The field.
        field: &'static str,
    },
    /// A CompactSize longer than its value needs (Bitcoin Core refuses it).
    #[error("{field} {value} is not minimally encoded")]
    NonCanonical {
        /// The field.
        field: &'static str,
        /// The value read.
        value: u64,
    },
    /// A count or length says more than the bytes left could hold.
    #[error("{field} of {len} is more than the bytes hold")]
    TooLong {
        /// The field.
        field: &'static str,
        /// The value.
        len: u64,
    },
    /// Bytes after the end (the last transaction of a block, or a lone transaction).
    #[error("{0} bytes after the end")]
    TrailingBytes(usize),
    /// A witness marker without the flag BIP144 requires (0x01).
    #[error("a witness marker with flag {0}")]
    BadWitnessFlag(u8),
}

/// A cursor over borrowed bytes: each read takes from the front, or fails naming the field
/// and leaves the cursor where the field began.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A cursor at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let (head, tail) = self
            .rest
            .split_at_checked(n)
            .ok_or(DecodeError::Truncated { field })?;
        self.rest = tail;
        Ok(head)
    }

    /// The next `N` bytes, as an array.
    pub fn array<const N: usize>(
        &mut self,
        field: &'static str,
    ) -> Result<&'a [u8; N], DecodeError> {
        let (head, tail) = self
            .rest
            .split_first_chunk::<N>()
            .ok_or(DecodeError::Truncated { field })?;
        self.rest = tail;
        Ok(head)
    }

    /// The next byte.
    pub fn byte(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(field)?[0])
    }

    /// A little-endian `u32`.
    pub fn u32_le(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(*self.array(field)?))
    }

    /// A little-endian `u64`.
    pub fn u64_le(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(*self.array(field)?))
    }

    /// A CompactSize (refused when not minimally encoded, as Bitcoin Core does).
    pub fn compact_size(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        let (n, len) = read_compact_size(self.rest).map_err(|e| match e {
            CompactSizeError::Truncated => DecodeError::Truncated { field },
            CompactSizeError::NonCanonical { value } => DecodeError::NonCanonical { field, value },
        })?;
        self.rest = &self.rest[len..];
        Ok(n)
    }

    /// A count of items each at least `min` bytes long: refused when the bytes left cannot
    /// hold that many (so that no loop runs long on a lie).
    pub fn count(&mut self, min: usize, field: &'static str) -> Result<u64, DecodeError> {
        let n = self.compact_size(field)?;
        if n.saturating_mul(min as u64) > self.rest.len() as u64 {
            return Err(DecodeError::TooLong { field, len: n });
        }
        Ok(n)
    }

    /// A CompactSize length, then that many bytes.
    pub fn var_bytes(&mut self, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let n = self.compact_size(field)?;
        let n = usize::try_from(n)
            .ok()
            .filter(|n| *n <= self.rest.len())
            .ok_or(DecodeError::TooLong { field, len: n })?;
        self.take(n, field)
    }

    /// What is left.
    pub fn rest(&self) -> &'a [u8] {
        self.rest
    }

    /// Nothing may be left: the end of a block, a transaction or a message.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.rest.len() {
            0 => Ok(()),
            n => Err(DecodeError::TrailingBytes(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn reads_name_the_field_and_check_every_length() {
        let mut r = Reader::new(&[3, 0xaa, 0xbb, 0xcc, 1, 0, 0, 0, 9]);
        assert_eq!(r.var_bytes("a script"), Ok(&[0xaa, 0xbb, 0xcc][..]));
        assert_eq!(r.u32_le("a version"), Ok(1));
        assert_eq!(
            r.u32_le("a lock time"),
            Err(DecodeError::Truncated {
                field: "a lock time"
            })
        );
        // A failed read leaves the cursor where it was.
        assert_eq!(r.rest(), &[9]);
        assert_eq!(r.finish(), Err(DecodeError::TrailingBytes(1)));
        assert_eq!(r.byte("x"), Ok(9));
        assert_eq!(r.finish(), Ok(()));
        // A length beyond the bytes, a count whose items cannot fit, a non-minimal size.
        assert_eq!(
            Reader::new(&[4, 1, 2, 3]).var_bytes("a script"),
            Err(DecodeError::TooLong {
                field: "a script",
                len: 4
            })
        );
        assert_eq!(
            Reader::new(&[2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).count(10, "a count"),
            Err(DecodeError::TooLong {
                field: "a count",
                len: 2
            })
        );
        assert_eq!(
            Reader::new(&[0xfd, 3, 0, 1, 2, 3]).var_bytes("a script"),
            Err(DecodeError::NonCanonical {
                field: "a script",
                value: 3
            })
        );
        assert_eq!(
            Reader::new(&[0xfe, 3, 0]).compact_size("a count"),
            Err(DecodeError::Truncated { field: "a count" })
        );
    }
}
