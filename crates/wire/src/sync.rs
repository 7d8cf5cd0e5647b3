//! Header-sync messages, in BOLT 1's custom range (odd types: a peer that does not know
//! them ignores them). docs/PROTOCOL.md gives the rules for each side.
//!
//! - `get_headers` (32769): `u32 id, u32 max_count, [32] stop_hash, u16 num_locator,
//!   num_locator * [32] locator`. Hashes in internal byte order (as in block headers).
//! - `headers` (32771): `u32 id, u32 first_height, u8 flags, u16 count, count * [80] header`.
//!   Flag bit 0: the last `headers` message answering request `id`.
//! - `tip` (32773): `u32 height, [80] header, [32] chainwork` (chainwork big-endian).
//!
//! Headers stay as raw 80-byte slices here: this crate knows framing, not consensus.

use crate::cursor::{Reader, Writer};
use crate::error::{DecodeError, EncodeError};
use crate::message::{MAX_MESSAGE_LEN, TYPE_LEN, encode_message};

/// Bytes of a block header.
pub const HEADER_LEN: usize = 80;
/// Bytes of a block hash.
pub const HASH_LEN: usize = 32;
/// Most locator hashes in one `get_headers` (Bitcoin Core's limit for `getheaders`).
pub const MAX_LOCATOR: usize = 101;
/// Most headers one `get_headers` may ask for.
pub const MAX_REQUEST_HEADERS: u32 = 100_000;
/// Most `get_headers` a client may have unanswered (their last `headers` not received).
pub const MAX_PENDING_REQUESTS: usize = 8;
/// Bytes of a `headers` payload before its headers.
const HEADERS_FIXED: usize = 4 + 4 + 1 + 2;
/// Most headers in one `headers` message: as many as fit in 65,535 bytes (819).
pub const MAX_HEADERS_PER_MESSAGE: usize =
    (MAX_MESSAGE_LEN - TYPE_LEN - HEADERS_FIXED) / HEADER_LEN;

/// `get_headers`: headers after the first locator hash on the responder's best chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GetHeaders<'a> {
    /// Chosen by the requester, echoed in every `headers` answering it.
    pub id: u32,
    /// Most headers wanted, 1 to [`MAX_REQUEST_HEADERS`].
    pub max_count: u32,
    /// Stop after this header (all zeros: no stop).
    pub stop_hash: [u8; HASH_LEN],
    /// Block hashes, newest first, `num_locator * 32` bytes (at most [`MAX_LOCATOR`]).
    pub locator: &'a [u8],
}

impl<'a> GetHeaders<'a> {
    /// The message type.
    pub const TYPE: u16 = 32769;

    /// The locator's hashes.
    pub fn locator_hashes(&self) -> impl Iterator<Item = &'a [u8; HASH_LEN]> {
        self.locator
            .chunks_exact(HASH_LEN)
            .filter_map(|h| h.try_into().ok())
    }

    /// Decodes a payload (the bytes after the type).
    pub fn decode_payload(payload: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let id = r.read_u32("id")?;
        let max_count = r.read_u32("max_count")?;
        let stop_hash = r.read_array::<HASH_LEN>("stop_hash")?;
        let n = usize::from(r.read_u16("num_locator")?);
        let locator = r.read_bytes(n * HASH_LEN, "locator")?;
        Ok(GetHeaders {
            id,
            max_count,
            stop_hash: *stop_hash,
            locator,
        })
    }

    /// Payload length.
    pub const fn payload_len(&self) -> usize {
        4 + 4 + HASH_LEN + 2 + self.locator.len()
    }

    /// Writes the payload. The locator must be whole hashes, at most [`MAX_LOCATOR`].
    pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        let n = self.locator.len() / HASH_LEN;
        if self.locator.len() % HASH_LEN != 0 || n > MAX_LOCATOR {
            return Err(EncodeError::FieldTooLong {
                field: "locator",
                len: self.locator.len(),
                max: MAX_LOCATOR * HASH_LEN,
            });
        }
        w.write_u32(self.id)?;
        w.write_u32(self.max_count)?;
        w.write_bytes(&self.stop_hash)?;
        w.write_u16(n as u16)?;
        w.write_bytes(self.locator)
    }

    /// Encodes the whole message at the start of `out`.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        encode_message(out, Self::TYPE, self.payload_len(), |w| {
            self.write_payload(w)
        })
    }
}

/// `headers`: consecutive headers of the responder's best chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Headers<'a> {
    /// The request answered.
    pub id: u32,
    /// Height of the first header (of the next one, when there are none).
    pub first_height: u32,
    /// Whether this is the last `headers` message answering `id`.
    pub last: bool,
    /// `count * 80` bytes of headers, at most [`MAX_HEADERS_PER_MESSAGE`].
    pub headers: &'a [u8],
}

impl<'a> Headers<'a> {
    /// The message type.
    pub const TYPE: u16 = 32771;
    const LAST: u8 = 1;

    /// Headers carried.
    pub const fn count(&self) -> usize {
        self.headers.len() / HEADER_LEN
    }

    /// The headers, 80 bytes each.
    pub fn iter(&self) -> impl Iterator<Item = &'a [u8; HEADER_LEN]> {
        self.headers
            .chunks_exact(HEADER_LEN)
            .filter_map(|h| h.try_into().ok())
    }

    /// Decodes a payload (the bytes after the type).
    pub fn decode_payload(payload: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let id = r.read_u32("id")?;
        let first_height = r.read_u32("first_height")?;
        let flags = r.read_u8("flags")?;
        let count = usize::from(r.read_u16("count")?);
        let headers = r.read_bytes(count * HEADER_LEN, "headers")?;
        Ok(Headers {
            id,
            first_height,
            last: flags & Self::LAST != 0,
            headers,
        })
    }

    /// Payload length.
    pub const fn payload_len(&self) -> usize {
        HEADERS_FIXED + self.headers.len()
    }

    /// Writes the payload.
    pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        check_headers(self.headers)?;
        self.write_fields(w, self.headers.len() / HEADER_LEN)?;
        w.write_bytes(self.headers)
    }

    fn write_fields(&self, w: &mut Writer<'_>, count: usize) -> Result<(), EncodeError> {
        w.write_u32(self.id)?;
        w.write_u32(self.first_height)?;
        w.write_u8(if self.last { Self::LAST } else { 0 })?;
        w.write_u16(count as u16)
    }

    /// Encodes the whole message at the start of `out`.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        encode_message(out, Self::TYPE, self.payload_len(), |w| {
            self.write_payload(w)
        })
    }

    /// Encodes a `headers` message for `count` headers whose bytes the caller then writes
    /// at `out[start..start + count * 80]` (returned with the total length), so that a
    /// server copies each header once, straight into the frame. `self.headers` is ignored.
    pub fn encode_in_place(
        &self,
        count: usize,
        out: &mut [u8],
    ) -> Result<(usize, usize), EncodeError> {
        if count > MAX_HEADERS_PER_MESSAGE {
            return Err(EncodeError::FieldTooLong {
                field: "headers",
                len: count * HEADER_LEN,
                max: MAX_HEADERS_PER_MESSAGE * HEADER_LEN,
            });
        }
        let body = count * HEADER_LEN;
        let n = encode_message(out, Self::TYPE, HEADERS_FIXED + body, |w| {
            self.write_fields(w, count)?;
            w.write_zeros(body)
        })?;
        Ok((n - body, n))
    }
}

fn check_headers(headers: &[u8]) -> Result<(), EncodeError> {
    if headers.len() % HEADER_LEN != 0 || headers.len() / HEADER_LEN > MAX_HEADERS_PER_MESSAGE {
        return Err(EncodeError::FieldTooLong {
            field: "headers",
            len: headers.len(),
            max: MAX_HEADERS_PER_MESSAGE * HEADER_LEN,
        });
    }
    Ok(())
}

/// `tip`: the responder's best chain changed (or the connection just started).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tip<'a> {
    /// Height of the tip.
    pub height: u32,
    /// The tip's header.
    pub header: &'a [u8; HEADER_LEN],
    /// Cumulative work of the chain up to the tip, big-endian.
    pub chainwork: &'a [u8; 32],
}

impl<'a> Tip<'a> {
    /// The message type.
    pub const TYPE: u16 = 32773;

    /// Decodes a payload (the bytes after the type).
    pub fn decode_payload(payload: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let height = r.read_u32("height")?;
        let header = r.read_array::<HEADER_LEN>("header")?;
        let chainwork = r.read_array::<32>("chainwork")?;
        Ok(Tip {
            height,
            header,
            chainwork,
        })
    }

    /// Payload length.
    pub const fn payload_len(&self) -> usize {
        4 + HEADER_LEN + 32
    }

    /// Writes the payload.
    pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.write_u32(self.height)?;
        w.write_bytes(self.header)?;
        w.write_bytes(self.chainwork)
    }

    /// Encodes the whole message at the start of `out`.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        encode_message(out, Self::TYPE, self.payload_len(), |w| {
            self.write_payload(w)
        })
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::message::Message;

    #[test]
    fn a_full_headers_message_fits_one_frame() {
        assert_eq!(MAX_HEADERS_PER_MESSAGE, 819);
        let headers = [7u8; MAX_HEADERS_PER_MESSAGE * HEADER_LEN];
        let m = Headers {
            id: 1,
            first_height: 100,
            last: false,
            headers: &headers,
        };
        let mut out = [0u8; MAX_MESSAGE_LEN];
        let n = m.encode(&mut out).unwrap();
        assert!(n <= MAX_MESSAGE_LEN);
        assert_eq!(Message::decode(&out[..n]), Ok(Message::Headers(m)));
        let one_more = [7u8; (MAX_HEADERS_PER_MESSAGE + 1) * HEADER_LEN];
        assert!(
            Headers {
                headers: &one_more,
                ..m
            }
            .encode(&mut [0u8; 70_000])
            .is_err()
        );
    }

    #[test]
    fn headers_encoded_in_place_equal_the_copied_form() {
        let headers: [u8; 3 * HEADER_LEN] = core::array::from_fn(|i| i as u8);
        let m = Headers {
            id: 9,
            first_height: 5,
            last: true,
            headers: &headers,
        };
        let mut a = [0u8; 512];
        let n = m.encode(&mut a).unwrap();
        let mut b = [0u8; 512];
        let (start, len) = m.encode_in_place(3, &mut b).unwrap();
        b[start..len].copy_from_slice(&headers);
        assert_eq!(a[..n], b[..len]);
        assert!(
            m.encode_in_place(MAX_HEADERS_PER_MESSAGE + 1, &mut b)
                .is_err()
        );
    }

    #[test]
    fn round_trips_and_truncations() {
        let locator = [3u8; 2 * HASH_LEN];
        let header = [4u8; HEADER_LEN];
        let work = [5u8; 32];
        let messages = [
            Message::GetHeaders(GetHeaders {
                id: 7,
                max_count: 2000,
                stop_hash: [0; 32],
                locator: &locator,
            }),
            Message::Headers(Headers {
                id: 7,
                first_height: 1,
                last: true,
                headers: &[],
            }),
            Message::Tip(Tip {
                height: 900_000,
                header: &header,
                chainwork: &work,
            }),
        ];
        for m in messages {
            let mut out = [0u8; 512];
            let n = m.encode(&mut out).unwrap();
            assert_eq!(n, m.encoded_len());
            assert_eq!(Message::decode(&out[..n]), Ok(m));
            for cut in TYPE_LEN..n {
                assert!(
                    matches!(
                        Message::decode(&out[..cut]),
                        Err(DecodeError::Truncated { .. })
                    ),
                    "{m:?} cut at {cut}"
                );
            }
        }
    }

    #[test]
    fn a_locator_over_the_limit_is_not_encoded() {
        let locator = [0u8; (MAX_LOCATOR + 1) * HASH_LEN];
        let m = GetHeaders {
            id: 1,
            max_count: 1,
            stop_hash: [0; 32],
            locator: &locator,
        };
        assert!(m.encode(&mut [0u8; 8192]).is_err());
        let ragged = GetHeaders {
            locator: &locator[..33],
            ..m
        };
        assert!(ragged.encode(&mut [0u8; 8192]).is_err());
    }
}
