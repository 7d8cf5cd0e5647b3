//! TLV streams (BOLT 1): records of BigSize `type`, BigSize `length` and `length` bytes
//! of value, in strictly increasing type order.
//!
//! [`TlvStream`] checks the rules that hold for every stream (minimal BigSizes, strictly
//! increasing types, lengths within the stream) and yields every record, borrowed. The
//! caller knows which types it understands, so it matches on [`TlvRecord::ty`] and sends
//! the rest to [`TlvRecord::skip_unknown`], which fails on even types and skips odd ones:
//!
//! ```
//! use lightwire_wire::{TlvError, TlvStream};
//!
//! fn read(stream: &[u8]) -> Result<Option<&[u8]>, TlvError> {
//!     let mut known = None;
//!     for record in TlvStream::new(stream) {
//!         let record = record?;
//!         match record.ty {
//!             1 => known = Some(record.value),
//!             _ => record.skip_unknown()?,
//!         }
//!     }
//!     Ok(known)
//! }
//! assert_eq!(read(&[0x01, 0x01, 0xaa, 0x03, 0x00]), Ok(Some(&[0xaa][..])));
//! assert_eq!(read(&[0x02, 0x00]), Err(TlvError::UnknownEvenType { ty: 2 }));
//! ```
//!
//! [`TlvWriter`] writes records and refuses to write them out of order.

use crate::bigsize::{self, BigSizeError};
use crate::cursor::{Reader, Writer};
use crate::error::{EncodeError, TlvError};

/// One TLV record, its value borrowed from the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlvRecord<'a> {
    /// The record type.
    pub ty: u64,
    /// The value bytes.
    pub value: &'a [u8],
}

impl TlvRecord<'_> {
    /// Handles a record whose type the caller does not know: BOLT 1 says to skip an odd
    /// type and to fail the stream on an even one.
    pub const fn skip_unknown(&self) -> Result<(), TlvError> {
        if self.ty % 2 == 0 {
            Err(TlvError::UnknownEvenType { ty: self.ty })
        } else {
            Ok(())
        }
    }

    /// Bytes this record takes on the wire.
    pub const fn encoded_len(&self) -> usize {
        record_len(self.ty, self.value.len())
    }
}

/// A borrowing iterator over the records of a TLV stream.
///
/// Yields `Err` at the first broken rule and then stops. An empty stream is valid.
#[derive(Clone, Debug)]
pub struct TlvStream<'a> {
    reader: Reader<'a>,
    prev: Option<u64>,
    failed: bool,
}

impl<'a> TlvStream<'a> {
    /// A stream over `bytes`, which must hold whole records to the end.
    pub const fn new(bytes: &'a [u8]) -> Self {
        Self {
            reader: Reader::new(bytes),
            prev: None,
            failed: false,
        }
    }

    /// Checks the whole stream, treating every type as unknown (so any even type fails).
    pub fn validate_all_unknown(self) -> Result<(), TlvError> {
        for record in self {
            record?.skip_unknown()?;
        }
        Ok(())
    }

    fn next_record(&mut self) -> Result<TlvRecord<'a>, TlvError> {
        let ty = read_bigsize(&mut self.reader, "type")?;
        if let Some(prev) = self.prev {
            if ty <= prev {
                return Err(TlvError::NotStrictlyIncreasing { prev, ty });
            }
        }
        self.prev = Some(ty);
        let len = read_bigsize(&mut self.reader, "length")?;
        let remaining = self.reader.remaining();
        let value = usize::try_from(len)
            .ok()
            .and_then(|n| self.reader.read_bytes(n, "value").ok())
            .ok_or(TlvError::LengthExceedsStream { ty, len, remaining })?;
        Ok(TlvRecord { ty, value })
    }
}

impl<'a> Iterator for TlvStream<'a> {
    type Item = Result<TlvRecord<'a>, TlvError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.reader.is_empty() {
            return None;
        }
        let record = self.next_record();
        self.failed = record.is_err();
        Some(record)
    }
}

impl core::iter::FusedIterator for TlvStream<'_> {}

fn read_bigsize(r: &mut Reader<'_>, field: &'static str) -> Result<u64, TlvError> {
    bigsize::read(r).map_err(|e| match e {
        BigSizeError::Truncated { needed, available } => TlvError::Truncated {
            field,
            needed,
            available,
        },
        BigSizeError::NonMinimal => TlvError::NonMinimalBigSize { field },
    })
}

/// Bytes a record of type `ty` with a `value_len`-byte value takes on the wire.
pub const fn record_len(ty: u64, value_len: usize) -> usize {
    (bigsize::encoded_len(ty) + bigsize::encoded_len(value_len as u64)).saturating_add(value_len)
}

/// Writes TLV records in strictly increasing type order into a [`Writer`].
#[derive(Debug)]
pub struct TlvWriter<'w, 'b> {
    w: &'w mut Writer<'b>,
    prev: Option<u64>,
}

impl<'w, 'b> TlvWriter<'w, 'b> {
    /// A TLV writer appending to `w`.
    pub fn new(w: &'w mut Writer<'b>) -> Self {
        Self { w, prev: None }
    }

    /// Writes one record. Fails without writing if `ty` does not follow the previous
    /// record's type or the record does not fit.
    pub fn write(&mut self, ty: u64, value: &[u8]) -> Result<(), EncodeError> {
        self.write_header(ty, value.len())?;
        self.w.write_bytes(value)
    }

    /// Writes a record's type and length; the caller then writes exactly `len` bytes of
    /// value through [`TlvWriter::writer`]. Fails without writing if `ty` does not follow
    /// the previous record's type or the whole record does not fit.
    pub fn write_header(&mut self, ty: u64, len: usize) -> Result<(), EncodeError> {
        if let Some(prev) = self.prev {
            if ty <= prev {
                return Err(EncodeError::TlvNotStrictlyIncreasing { prev, ty });
            }
        }
        self.w.reserve(record_len(ty, len))?;
        bigsize::write(self.w, ty)?;
        bigsize::write(self.w, len as u64)?;
        self.prev = Some(ty);
        Ok(())
    }

    /// The underlying writer, to write a value after [`TlvWriter::write_header`].
    pub fn writer(&mut self) -> &mut Writer<'b> {
        self.w
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::test_util::hex;

    /// Reads a stream in which no type is known.
    fn read_unknown(stream: &[u8]) -> Result<Vec<(u64, Vec<u8>)>, TlvError> {
        let mut out = Vec::new();
        for r in TlvStream::new(stream) {
            let r = r?;
            r.skip_unknown()?;
            out.push((r.ty, r.value.to_vec()));
        }
        Ok(out)
    }

    #[test]
    fn empty_stream_is_valid() {
        assert_eq!(TlvStream::new(&[]).next(), None);
        assert_eq!(TlvStream::new(&[]).validate_all_unknown(), Ok(()));
    }

    /// BOLT 1 appendix B: streams that fail in any namespace because of the framing.
    #[test]
    fn appendix_b_framing_failures() {
        use TlvError::*;
        let cases = [
            (
                "fd",
                Truncated {
                    field: "type",
                    needed: 3,
                    available: 1,
                },
            ),
            (
                "fd01",
                Truncated {
                    field: "type",
                    needed: 3,
                    available: 2,
                },
            ),
            ("fd0001 00", NonMinimalBigSize { field: "type" }),
            (
                "fd0101",
                Truncated {
                    field: "length",
                    needed: 1,
                    available: 0,
                },
            ),
            (
                "0f fd",
                Truncated {
                    field: "length",
                    needed: 3,
                    available: 1,
                },
            ),
            (
                "0f fd26",
                Truncated {
                    field: "length",
                    needed: 3,
                    available: 2,
                },
            ),
            (
                "0f fd2602",
                LengthExceedsStream {
                    ty: 15,
                    len: 0x2602,
                    remaining: 0,
                },
            ),
            ("0f fd0001 00", NonMinimalBigSize { field: "length" }),
        ];
        for (stream, err) in cases {
            assert_eq!(read_unknown(&hex(stream)), Err(err), "{stream}");
        }
        // "value truncated": length 0x0201 with 0x0200 bytes of value.
        let mut stream = hex("0f fd0201");
        stream.extend_from_slice(&[0; 0x200]);
        assert_eq!(
            read_unknown(&stream),
            Err(LengthExceedsStream {
                ty: 15,
                len: 0x201,
                remaining: 0x200
            })
        );
    }

    #[test]
    fn appendix_b_unknown_even_types_fail() {
        let cases = [
            ("12 00", 0x12),
            ("fd0102 00", 0x102),
            ("fe01000002 00", 0x0100_0002),
            ("ff0100000000000002 00", 0x0100_0000_0000_0002),
            ("00 00", 0),
        ];
        for (stream, ty) in cases {
            assert_eq!(
                read_unknown(&hex(stream)),
                Err(TlvError::UnknownEvenType { ty }),
                "{stream}"
            );
        }
    }

    #[test]
    fn appendix_b_unknown_odd_types_are_skipped() {
        let cases = [
            ("21 00", 0x21),
            ("fd0201 00", 0x201),
            ("fd00fd 00", 0xfd),
            ("fd00ff 00", 0xff),
            ("fe02000001 00", 0x0200_0001),
            ("ff0200000000000001 00", 0x0200_0000_0000_0001),
        ];
        for (stream, ty) in cases {
            assert_eq!(
                read_unknown(&hex(stream)),
                Ok(vec![(ty, vec![])]),
                "{stream}"
            );
        }
    }

    #[test]
    fn appendix_b_ordering_failures() {
        use TlvError::NotStrictlyIncreasing;
        let cases = [
            (
                "02 08 0000000000000226 01 01 2a",
                NotStrictlyIncreasing { prev: 2, ty: 1 },
            ),
            (
                "02 08 0000000000000231 02 08 0000000000000451",
                NotStrictlyIncreasing { prev: 2, ty: 2 },
            ),
            ("1f 00 0f 01 2a", NotStrictlyIncreasing { prev: 31, ty: 15 }),
            ("1f 00 1f 01 2a", NotStrictlyIncreasing { prev: 31, ty: 31 }),
            (
                "ffffffffffffffffff 00 00 00",
                NotStrictlyIncreasing {
                    prev: u64::MAX,
                    ty: 0,
                },
            ),
        ];
        for (stream, err) in cases {
            // Ordering is checked before the type's parity, so every case fails on order.
            let bytes = hex(stream);
            let got: Result<Vec<_>, _> = TlvStream::new(&bytes).collect();
            assert_eq!(got, Err(err), "{stream}");
        }
    }

    #[test]
    fn iterator_stops_after_an_error() {
        let stream = hex("03 00 01 00 05 00");
        let mut it = TlvStream::new(&stream);
        assert_eq!(it.next(), Some(Ok(TlvRecord { ty: 3, value: &[] })));
        assert!(matches!(it.next(), Some(Err(_))));
        assert_eq!(it.next(), None);
    }

    #[test]
    fn huge_length_is_an_overrun_not_a_panic() {
        let stream = hex("01 ffffffffffffffffff");
        assert_eq!(
            read_unknown(&stream),
            Err(TlvError::LengthExceedsStream {
                ty: 1,
                len: u64::MAX,
                remaining: 0
            })
        );
    }

    #[test]
    fn writer_round_trips_and_orders() {
        let mut buf = [0u8; 600];
        let mut w = Writer::new(&mut buf);
        let big = [7u8; 300];
        {
            let mut tlv = TlvWriter::new(&mut w);
            tlv.write(1, &[0xaa]).unwrap();
            tlv.write(0xfd, &big).unwrap();
            assert_eq!(
                tlv.write(0xfd, &[]),
                Err(EncodeError::TlvNotStrictlyIncreasing {
                    prev: 0xfd,
                    ty: 0xfd
                })
            );
            tlv.write_header(0x1_0001, 2).unwrap();
            tlv.writer().write_u16(0x0102).unwrap();
        }
        let n = w.written();
        assert_eq!(
            n,
            record_len(1, 1) + record_len(0xfd, 300) + record_len(0x1_0001, 2)
        );
        let records: Vec<_> = TlvStream::new(&buf[..n]).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            records,
            [
                TlvRecord {
                    ty: 1,
                    value: &[0xaa]
                },
                TlvRecord {
                    ty: 0xfd,
                    value: &big
                },
                TlvRecord {
                    ty: 0x1_0001,
                    value: &[1, 2]
                },
            ]
        );
        assert_eq!(&buf[..8], &[0x01, 0x01, 0xaa, 0xfd, 0x00, 0xfd, 0xfd, 0x01]);
        // 0xfd needs the 3-byte form for both type and length (300).
        assert_eq!(records[1].encoded_len(), 3 + 3 + 300);
    }

    #[test]
    fn writer_fails_before_writing_a_record_that_does_not_fit() {
        let mut buf = [0u8; 4];
        let mut w = Writer::new(&mut buf);
        let mut tlv = TlvWriter::new(&mut w);
        assert_eq!(
            tlv.write(1, &[1, 2, 3]),
            Err(EncodeError::BufferTooSmall {
                needed: 5,
                available: 4
            })
        );
        assert_eq!(tlv.writer().written(), 0);
        // The failed record does not count for ordering.
        assert_eq!(tlv.write(1, &[1, 2]), Ok(()));
    }
}
