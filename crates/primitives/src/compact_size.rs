//! CompactSize, Bitcoin's variable-length integer: one byte below 0xfd, else a marker byte
//! (0xfd, 0xfe, 0xff) and the value in 2, 4 or 8 little-endian bytes. Counts and lengths in
//! blocks, transactions, BIP158 filters and P2P messages are coded this way.

use alloc::vec::Vec;

/// A CompactSize that could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompactSizeError {
    /// The bytes end inside it (no marker byte, or fewer bytes than the marker says).
    #[error("the bytes end inside a CompactSize")]
    Truncated,
    /// A longer encoding than the value needs (0xfd then a value below 0xfd, and so on).
    /// Bitcoin Core refuses these ("non-canonical ReadCompactSize()"), so a value has one
    /// encoding and the bytes of a block or a message one meaning.
    #[error("CompactSize {value} is not minimally encoded")]
    NonCanonical {
        /// The value read.
        value: u64,
    },
}

/// Read a CompactSize at the start of `bytes`: the value and how many bytes it took.
/// No allocation.
pub fn read_compact_size(bytes: &[u8]) -> Result<(u64, usize), CompactSizeError> {
    let (&first, rest) = bytes.split_first().ok_or(CompactSizeError::Truncated)?;
    // The width after the marker, and the smallest value that needs it.
    let (width, least) = match first {
        0xfd => (2, 0xfd),
        0xfe => (4, 0x1_0000),
        0xff => (8, 0x1_0000_0000),
        n => return Ok((u64::from(n), 1)),
    };
    let le = rest.get(..width).ok_or(CompactSizeError::Truncated)?;
    let value = le.iter().rev().fold(0u64, |v, b| (v << 8) | u64::from(*b));
    if value < least {
        return Err(CompactSizeError::NonCanonical { value });
    }
    Ok((value, 1 + width))
}

/// How many bytes the CompactSize of `n` takes (1, 3, 5 or 9).
pub const fn compact_size_len(n: u64) -> usize {
    match n {
        0..=0xfc => 1,
        0xfd..=0xffff => 3,
        0x1_0000..=0xffff_ffff => 5,
        _ => 9,
    }
}

/// `n` as a CompactSize (the minimal encoding, the only one read back), in the first
/// [`compact_size_len`] bytes of the array: for a hasher or a slice, with no allocation.
pub fn compact_size(n: u64) -> ([u8; 9], usize) {
    let mut out = [0u8; 9];
    let len = compact_size_len(n);
    match len {
        1 => out[0] = n as u8,
        3 => {
            out[0] = 0xfd;
            out[1..3].copy_from_slice(&(n as u16).to_le_bytes());
        }
        5 => {
            out[0] = 0xfe;
            out[1..5].copy_from_slice(&(n as u32).to_le_bytes());
        }
        _ => {
            out[0] = 0xff;
            out[1..].copy_from_slice(&n.to_le_bytes());
        }
    }
    (out, len)
}

/// Append `n` as a CompactSize (see [`compact_size`]).
pub fn write_compact_size(out: &mut Vec<u8>, n: u64) {
    let (bytes, len) = compact_size(n);
    out.extend_from_slice(&bytes[..len]);
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    /// Every width's edges round-trip, in exactly the bytes Bitcoin writes.
    #[test]
    fn values_round_trip_at_every_width_edge() {
        let cases: [(u64, &str); 9] = [
            (0, "00"),
            (0xfc, "fc"),
            (0xfd, "fdfd00"),
            (0xffff, "fdffff"),
            (0x1_0000, "fe00000100"),
            (0xffff_ffff, "feffffffff"),
            (0x1_0000_0000, "ff0000000001000000"),
            (0x0102_0304_0506_0708, "ff0807060504030201"),
            (u64::MAX, "ffffffffffffffffff"),
        ];
        for (n, bytes) in cases {
            let mut out = vec![0xee];
            write_compact_size(&mut out, n);
            assert_eq!(hex::encode(&out[1..]), bytes, "{n}");
            assert_eq!(compact_size_len(n), out.len() - 1);
            // Read back with a byte after it that must be left alone.
            out.push(0xaa);
            assert_eq!(read_compact_size(&out[1..]), Ok((n, out.len() - 2)), "{n}");
        }
    }

    /// Cut anywhere before its end, a CompactSize is truncated, never a short value.
    #[test]
    fn a_truncated_compact_size_is_refused() {
        for full in ["fdfd00", "fe00000100", "ff0000000001000000"] {
            let full = hex::decode(full).unwrap();
            for cut in 0..full.len() {
                assert_eq!(
                    read_compact_size(&full[..cut]),
                    Err(CompactSizeError::Truncated),
                    "{full:02x?} cut at {cut}"
                );
            }
        }
    }

    /// A longer encoding than the value needs is refused, as Bitcoin Core refuses it; the
    /// smallest value of each width is accepted.
    #[test]
    fn a_non_canonical_compact_size_is_refused() {
        for (bytes, value) in [
            ("fd0000", 0),
            ("fdfc00", 0xfc),
            ("fe00000000", 0),
            ("feffff0000", 0xffff),
            ("ff0000000000000000", 0),
            ("ffffffffff00000000", 0xffff_ffff),
        ] {
            let bytes = hex::decode(bytes).unwrap();
            assert_eq!(
                read_compact_size(&bytes),
                Err(CompactSizeError::NonCanonical { value }),
                "{bytes:02x?}"
            );
        }
        assert_eq!(read_compact_size(&[0xfd, 0xfd, 0]), Ok((0xfd, 3)));
        assert_eq!(read_compact_size(&[0xfe, 0, 0, 1, 0]), Ok((0x1_0000, 5)));
    }
}
