//! Checked reading from a borrowed slice and checked writing into a lent one.
//!
//! Every read and write here returns an error instead of panicking, so the message
//! decoders never index into bytes that came from a peer.

use crate::error::EncodeError;

/// A read ran past the end of its input.
///
/// The decoders turn this into [`DecodeError::Truncated`](crate::DecodeError::Truncated)
/// or [`TlvError::Truncated`](crate::TlvError::Truncated) with the same fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truncated {
    /// The field being read.
    pub field: &'static str,
    /// Bytes the field needs.
    pub needed: usize,
    /// Bytes that were left.
    pub available: usize,
}

/// A cursor over borrowed bytes with checked, big-endian reads.
///
/// Slices it hands out borrow from the input, never copy it.
#[derive(Clone, Copy, Debug)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    pub const fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    /// Bytes not read yet.
    pub const fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// Whether every byte has been read.
    pub const fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The unread bytes, without consuming them.
    pub const fn rest(&self) -> &'a [u8] {
        self.rest
    }

    /// Consumes and returns every unread byte.
    pub fn take_rest(&mut self) -> &'a [u8] {
        core::mem::take(&mut self.rest)
    }

    /// Reads the next `n` bytes.
    pub fn read_bytes(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], Truncated> {
        match self.rest.split_at_checked(n) {
            Some((head, tail)) => {
                self.rest = tail;
                Ok(head)
            }
            None => Err(self.truncated(n, field)),
        }
    }

    /// Reads the next `N` bytes as an array reference.
    pub fn read_array<const N: usize>(
        &mut self,
        field: &'static str,
    ) -> Result<&'a [u8; N], Truncated> {
        match self.rest.split_first_chunk::<N>() {
            Some((head, tail)) => {
                self.rest = tail;
                Ok(head)
            }
            None => Err(self.truncated(N, field)),
        }
    }

    /// Reads one byte.
    pub fn read_u8(&mut self, field: &'static str) -> Result<u8, Truncated> {
        self.read_array(field).map(|b| u8::from_be_bytes(*b))
    }

    /// Reads a big-endian `u16`.
    pub fn read_u16(&mut self, field: &'static str) -> Result<u16, Truncated> {
        self.read_array(field).map(|b| u16::from_be_bytes(*b))
    }

    /// Reads a big-endian `u32`.
    pub fn read_u32(&mut self, field: &'static str) -> Result<u32, Truncated> {
        self.read_array(field).map(|b| u32::from_be_bytes(*b))
    }

    /// Reads a big-endian `u64`.
    pub fn read_u64(&mut self, field: &'static str) -> Result<u64, Truncated> {
        self.read_array(field).map(|b| u64::from_be_bytes(*b))
    }

    /// Reads a big-endian `u16` length, then that many bytes.
    pub fn read_u16_prefixed(
        &mut self,
        len_field: &'static str,
        field: &'static str,
    ) -> Result<&'a [u8], Truncated> {
        let len = self.read_u16(len_field)?;
        self.read_bytes(usize::from(len), field)
    }

    fn truncated(&self, needed: usize, field: &'static str) -> Truncated {
        Truncated {
            field,
            needed,
            available: self.rest.len(),
        }
    }
}

/// A cursor that writes into a lent buffer, failing instead of overrunning it.
#[derive(Debug)]
pub struct Writer<'b> {
    buf: &'b mut [u8],
    pos: usize,
}

impl<'b> Writer<'b> {
    /// A writer at the start of `buf`.
    pub fn new(buf: &'b mut [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes written so far.
    pub const fn written(&self) -> usize {
        self.pos
    }

    /// Room left in the buffer.
    pub const fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// Checks that `n` more bytes fit, reporting the whole size needed if not.
    pub fn reserve(&self, n: usize) -> Result<(), EncodeError> {
        self.slot_end(n).map(|_| ())
    }

    /// Writes `bytes`.
    pub fn write_bytes(&mut self, bytes: &[u8]) -> Result<(), EncodeError> {
        self.slot(bytes.len())?.copy_from_slice(bytes);
        Ok(())
    }

    /// Writes `n` zero bytes.
    pub fn write_zeros(&mut self, n: usize) -> Result<(), EncodeError> {
        self.slot(n)?.fill(0);
        Ok(())
    }

    /// Writes one byte.
    pub fn write_u8(&mut self, v: u8) -> Result<(), EncodeError> {
        self.write_bytes(&[v])
    }

    /// Writes a big-endian `u16`.
    pub fn write_u16(&mut self, v: u16) -> Result<(), EncodeError> {
        self.write_bytes(&v.to_be_bytes())
    }

    /// Writes a big-endian `u32`.
    pub fn write_u32(&mut self, v: u32) -> Result<(), EncodeError> {
        self.write_bytes(&v.to_be_bytes())
    }

    /// Writes a big-endian `u64`.
    pub fn write_u64(&mut self, v: u64) -> Result<(), EncodeError> {
        self.write_bytes(&v.to_be_bytes())
    }

    /// Writes a big-endian `u16` length, then `bytes`.
    ///
    /// Fails with [`EncodeError::FieldTooLong`] if `bytes` is longer than 65,535 bytes.
    pub fn write_u16_prefixed(
        &mut self,
        field: &'static str,
        bytes: &[u8],
    ) -> Result<(), EncodeError> {
        let len = u16_len(field, bytes.len())?;
        self.write_u16(len)?;
        self.write_bytes(bytes)
    }

    /// Claims the next `n` bytes of the buffer.
    fn slot(&mut self, n: usize) -> Result<&mut [u8], EncodeError> {
        let end = self.slot_end(n)?;
        let start = self.pos;
        let available = self.buf.len();
        let slot = self
            .buf
            .get_mut(start..end)
            .ok_or(EncodeError::BufferTooSmall {
                needed: end,
                available,
            })?;
        self.pos = end;
        Ok(slot)
    }

    fn slot_end(&self, n: usize) -> Result<usize, EncodeError> {
        let available = self.buf.len();
        match self.pos.checked_add(n) {
            Some(end) if end <= available => Ok(end),
            Some(end) => Err(EncodeError::BufferTooSmall {
                needed: end,
                available,
            }),
            None => Err(EncodeError::BufferTooSmall {
                needed: usize::MAX,
                available,
            }),
        }
    }
}

/// `len` as a `u16` length prefix, or [`EncodeError::FieldTooLong`].
pub(crate) fn u16_len(field: &'static str, len: usize) -> Result<u16, EncodeError> {
    u16::try_from(len).map_err(|_| EncodeError::FieldTooLong {
        field,
        len,
        max: usize::from(u16::MAX),
    })
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn reads_are_checked_and_big_endian() {
        let bytes = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
        let mut r = Reader::new(&bytes);
        assert_eq!(r.read_u8("a"), Ok(1));
        assert_eq!(r.read_u16("b"), Ok(0x0203));
        assert_eq!(r.read_u32("c"), Ok(0x0405_0607));
        assert_eq!(r.read_u64("d"), Ok(0x0809_0a0b_0c0d_0e0f));
        assert!(r.is_empty());
        assert_eq!(
            r.read_u8("e"),
            Err(Truncated {
                field: "e",
                needed: 1,
                available: 0
            })
        );

        let mut r = Reader::new(&[0, 1, 3]);
        assert_eq!(
            r.read_bytes(4, "x"),
            Err(Truncated {
                field: "x",
                needed: 4,
                available: 3
            })
        );
        // A failed read consumes nothing.
        assert_eq!(r.remaining(), 3);
        assert_eq!(r.read_u16_prefixed("len", "data"), Ok(&[3u8][..]));
        assert_eq!(r.take_rest(), &[] as &[u8]);
    }

    #[test]
    fn writes_are_checked() {
        let mut buf = [0xaa; 5];
        let mut w = Writer::new(&mut buf);
        assert_eq!(w.write_u16(0x0102), Ok(()));
        assert_eq!(
            w.write_u32(7),
            Err(EncodeError::BufferTooSmall {
                needed: 6,
                available: 5
            })
        );
        assert_eq!(w.written(), 2);
        assert_eq!(w.write_zeros(2), Ok(()));
        assert_eq!(w.write_u8(9), Ok(()));
        assert_eq!(w.remaining(), 0);
        assert_eq!(
            w.reserve(usize::MAX),
            Err(EncodeError::BufferTooSmall {
                needed: usize::MAX,
                available: 5
            })
        );
        assert_eq!(buf, [1, 2, 0, 0, 9]);
    }

    #[test]
    fn u16_prefix_rejects_long_fields() {
        assert_eq!(u16_len("data", 65535), Ok(65535));
        assert_eq!(
            u16_len("data", 65536),
            Err(EncodeError::FieldTooLong {
                field: "data",
                len: 65536,
                max: 65535
            })
        );
    }
}
