//! BigSize: BOLT 1's variable-length unsigned integer (Bitcoin's CompactSize, but
//! big-endian), 1, 3, 5 or 9 bytes long. Decoding requires the minimal encoding.

use crate::cursor::{Reader, Writer};
use crate::error::EncodeError;

/// Why a BigSize could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BigSizeError {
    /// The input ends inside the BigSize.
    #[error("BigSize truncated: needs {needed} bytes but {available} remain")]
    Truncated {
        /// Bytes the encoding needs (the prefix byte included).
        needed: usize,
        /// Bytes that were there.
        available: usize,
    },
    /// The value fits a shorter encoding.
    #[error("BigSize is not minimally encoded")]
    NonMinimal,
}

/// Bytes the minimal BigSize encoding of `value` takes: 1, 3, 5 or 9.
pub const fn encoded_len(value: u64) -> usize {
    if value < 0xfd {
        1
    } else if value <= 0xffff {
        3
    } else if value <= 0xffff_ffff {
        5
    } else {
        9
    }
}

/// Decodes a BigSize from the front of `bytes`, returning the value and the bytes used.
pub fn decode(bytes: &[u8]) -> Result<(u64, usize), BigSizeError> {
    let mut r = Reader::new(bytes);
    let value = read(&mut r)?;
    Ok((value, bytes.len() - r.remaining()))
}

/// Reads a minimally encoded BigSize from `r`. On error `r` may have advanced.
pub fn read(r: &mut Reader<'_>) -> Result<u64, BigSizeError> {
    let total = r.remaining();
    let trunc = |needed| BigSizeError::Truncated {
        needed,
        available: total,
    };
    let (value, min) = match r.read_u8("bigsize").map_err(|_| trunc(1))? {
        0xfd => (
            u64::from(r.read_u16("bigsize").map_err(|_| trunc(3))?),
            0xfd,
        ),
        0xfe => (
            u64::from(r.read_u32("bigsize").map_err(|_| trunc(5))?),
            0x1_0000,
        ),
        0xff => (r.read_u64("bigsize").map_err(|_| trunc(9))?, 0x1_0000_0000),
        b => return Ok(u64::from(b)),
    };
    if value < min {
        return Err(BigSizeError::NonMinimal);
    }
    Ok(value)
}

/// Writes the minimal BigSize encoding of `value`.
pub fn write(w: &mut Writer<'_>, value: u64) -> Result<(), EncodeError> {
    w.reserve(encoded_len(value))?;
    // The casts below are lossless: each arm's range is checked by `encoded_len`.
    match encoded_len(value) {
        1 => w.write_u8(value as u8),
        3 => {
            w.write_u8(0xfd)?;
            w.write_u16(value as u16)
        }
        5 => {
            w.write_u8(0xfe)?;
            w.write_u32(value as u32)
        }
        _ => {
            w.write_u8(0xff)?;
            w.write_u64(value)
        }
    }
}

/// Encodes `value` at the start of `out`, returning the bytes written.
pub fn encode(value: u64, out: &mut [u8]) -> Result<usize, EncodeError> {
    let mut w = Writer::new(out);
    write(&mut w, value)?;
    Ok(w.written())
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::test_util::hex;

    /// BOLT 1 appendix A, decoding and encoding vectors that succeed.
    const VALID: [(&str, u64, &str); 8] = [
        ("zero", 0, "00"),
        ("one byte high", 252, "fc"),
        ("two byte low", 253, "fd00fd"),
        ("two byte high", 65535, "fdffff"),
        ("four byte low", 65536, "fe00010000"),
        ("four byte high", 4294967295, "feffffffff"),
        ("eight byte low", 4294967296, "ff0000000100000000"),
        (
            "eight byte high",
            18446744073709551615,
            "ffffffffffffffffff",
        ),
    ];

    #[test]
    fn appendix_a_decoding_valid() {
        for (name, value, bytes) in VALID {
            let bytes = hex(bytes);
            assert_eq!(decode(&bytes), Ok((value, bytes.len())), "{name}");
        }
    }

    #[test]
    fn appendix_a_encoding() {
        for (name, value, bytes) in VALID {
            let bytes = hex(bytes);
            let mut out = [0u8; 9];
            let n = encode(value, &mut out).unwrap();
            assert_eq!(&out[..n], &bytes[..], "{name}");
            assert_eq!(encoded_len(value), n, "{name}");
        }
    }

    #[test]
    fn appendix_a_decoding_failures() {
        let non_minimal = [
            ("two byte not canonical", "fd00fc"),
            ("four byte not canonical", "fe0000ffff"),
            ("eight byte not canonical", "ff00000000ffffffff"),
        ];
        for (name, bytes) in non_minimal {
            assert_eq!(decode(&hex(bytes)), Err(BigSizeError::NonMinimal), "{name}");
        }
        // (name, bytes, length the encoding needs)
        let short = [
            ("two byte short read", "fd00", 3),
            ("four byte short read", "feffff", 5),
            ("eight byte short read", "ffffffffff", 9),
            ("one byte no read", "", 1),
            ("two byte no read", "fd", 3),
            ("four byte no read", "fe", 5),
            ("eight byte no read", "ff", 9),
        ];
        for (name, bytes, needed) in short {
            let bytes = hex(bytes);
            assert_eq!(
                decode(&bytes),
                Err(BigSizeError::Truncated {
                    needed,
                    available: bytes.len()
                }),
                "{name}"
            );
        }
    }

    #[test]
    fn error_text_is_pinned_and_has_no_source() {
        use core::error::Error;
        let cases = [
            (
                BigSizeError::Truncated {
                    needed: 9,
                    available: 2,
                },
                "BigSize truncated: needs 9 bytes but 2 remain",
            ),
            (BigSizeError::NonMinimal, "BigSize is not minimally encoded"),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), text);
            assert!(e.source().is_none(), "{e:?}");
        }
    }

    #[test]
    fn decode_stops_after_the_value() {
        assert_eq!(decode(&[0xfd, 0x01, 0x00, 0xaa]), Ok((256, 3)));
    }

    #[test]
    fn encode_into_small_buffer_fails() {
        let mut out = [0u8; 4];
        assert_eq!(
            encode(1 << 32, &mut out),
            Err(EncodeError::BufferTooSmall {
                needed: 9,
                available: 4
            })
        );
        // Nothing was written.
        assert_eq!(out, [0; 4]);
    }
}
