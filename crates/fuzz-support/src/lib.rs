//! The input reader shared by the fuzz targets under `crates/*/fuzz`: a [`Cursor`] that
//! reads fields out of fuzz input front to back.
//!
//! It is a crate of its own because each cargo-fuzz project is its own workspace (built
//! with nightly, sanitizer flags and its own target directory, and excluded from the root
//! workspace), so the projects cannot share a module; each used to hold a copy. As a path
//! crate with no dependencies it adds nothing to a fuzz build, and as a member of the root
//! workspace it is tested and linted on stable with the rest.
//!
//! Every stored corpus and regression input means what this reader makes of it: changing
//! how a method consumes bytes (their order, their count, what it returns past the end)
//! changes what every target is fed by those inputs, so existing methods stay as they are
//! and new readings are added as new methods.
#![forbid(unsafe_code)]

/// Reads fields from fuzz input front to back; past the end every number is 0 and every
/// byte string empty, so any input is a complete description.
pub struct Cursor<'a> {
    data: &'a [u8],
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Cursor { data }
    }

    /// Whether the input is used up.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The next byte, or 0.
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    /// The next two bytes, little-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    /// The next four bytes, little-endian.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// The next eight bytes, little-endian.
    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }

    /// Up to `n` next bytes.
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }

    /// All remaining bytes.
    pub fn rest(&mut self) -> &'a [u8] {
        self.bytes(self.data.len())
    }
}

#[cfg(test)]
mod tests {
    use super::Cursor;

    #[test]
    fn numbers_are_little_endian_in_input_order() {
        let data = [
            0x01, // u8
            0x02, 0x03, // u16
            0x04, 0x05, 0x06, 0x07, // u32
            0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, // u64
        ];
        let mut c = Cursor::new(&data);
        assert_eq!(c.u8(), 0x01);
        assert_eq!(c.u16(), 0x0302);
        assert_eq!(c.u32(), 0x0706_0504);
        assert_eq!(c.u64(), 0x0f0e_0d0c_0b0a_0908);
        assert!(c.is_empty());
    }

    #[test]
    fn past_the_end_numbers_are_zero_padded_and_byte_strings_empty() {
        let mut c = Cursor::new(&[]);
        assert!(c.is_empty());
        assert_eq!((c.u8(), c.u16(), c.u32(), c.u64()), (0, 0, 0, 0));
        assert_eq!(c.bytes(5), &[] as &[u8]);
        assert_eq!(c.rest(), &[] as &[u8]);

        // A number cut short by the end takes the bytes there are, low first, then zeros.
        let mut c = Cursor::new(&[0xab, 0xcd, 0xef]);
        assert_eq!(c.u32(), 0x00ef_cdab);
        assert!(c.is_empty());
        let mut c = Cursor::new(&[0xab]);
        assert_eq!(c.u16(), 0x00ab);
        assert_eq!(c.u8(), 0);
    }

    #[test]
    fn bytes_take_at_most_what_is_left() {
        let data = [1, 2, 3, 4, 5];
        let mut c = Cursor::new(&data);
        assert_eq!(c.bytes(0), &[] as &[u8]);
        assert_eq!(c.bytes(2), &[1, 2]);
        assert!(!c.is_empty());
        assert_eq!(c.bytes(10), &[3, 4, 5]);
        assert!(c.is_empty());
        assert_eq!(c.bytes(1), &[] as &[u8]);
    }

    #[test]
    fn rest_takes_everything_left_and_borrows_the_input() {
        let data = [9, 8, 7];
        let mut c = Cursor::new(&data);
        c.u8();
        let rest = c.rest();
        assert_eq!(rest, &[8, 7]);
        // The slice is the input's own memory, not a copy.
        assert!(core::ptr::eq(rest, &data[1..]));
        assert!(c.is_empty());
        assert_eq!(c.rest(), &[] as &[u8]);
    }
}
