//! `ping` (type 18) and `pong` (type 19): keep-alives that also let a peer ask for
//! padding traffic.
//!
//! `ping`: `u16 num_pong_bytes, u16 byteslen, byteslen*byte ignored`.
//! `pong`: `u16 byteslen, byteslen*byte ignored`.
//! Bytes after these fields (a future extension) are ignored.

use crate::cursor::{Reader, Writer};
use crate::error::{DecodeError, EncodeError};
use crate::message::{encode_message, msg_type};

/// A `ping` whose `num_pong_bytes` is at least this gets no reply: a `pong` that long
/// would not fit in a 65,535-byte message.
pub const NO_PONG_THRESHOLD: u16 = 65532;

/// The `ping` message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ping<'a> {
    /// How many `ignored` bytes the `pong` reply must carry.
    pub num_pong_bytes: u16,
    /// Padding; senders set it to zeros, receivers ignore it.
    pub ignored: &'a [u8],
}

impl<'a> Ping<'a> {
    /// The message type.
    pub const TYPE: u16 = msg_type::PING;

    /// A ping asking for `num_pong_bytes` in reply, without padding.
    pub const fn new(num_pong_bytes: u16) -> Self {
        Self {
            num_pong_bytes,
            ignored: &[],
        }
    }

    /// The `byteslen` of the `pong` to send back, or `None` when BOLT 1 says not to
    /// reply (`num_pong_bytes` of 65532 or more).
    pub const fn pong_len(&self) -> Option<u16> {
        if self.num_pong_bytes < NO_PONG_THRESHOLD {
            Some(self.num_pong_bytes)
        } else {
            None
        }
    }

    /// Encodes the whole `pong` reply (type, `byteslen`, zeros) at the start of `out`.
    /// Returns `Ok(None)`, writing nothing, when no reply must be sent.
    pub fn encode_pong(&self, out: &mut [u8]) -> Result<Option<usize>, EncodeError> {
        self.pong_len()
            .map(|len| Pong::encode_zeroed(len, out))
            .transpose()
    }

    /// Encodes a whole `ping` with `byteslen` zero bytes of padding at the start of `out`.
    pub fn encode_zeroed(
        num_pong_bytes: u16,
        byteslen: u16,
        out: &mut [u8],
    ) -> Result<usize, EncodeError> {
        let len = usize::from(byteslen);
        encode_message(out, Self::TYPE, 4 + len, |w| {
            w.write_u16(num_pong_bytes)?;
            w.write_u16(byteslen)?;
            w.write_zeros(len)
        })
    }

    /// Decodes a `ping` payload (the bytes after the message type).
    pub fn decode_payload(payload: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let num_pong_bytes = r.read_u16("num_pong_bytes")?;
        let ignored = r.read_u16_prefixed("byteslen", "ignored")?;
        Ok(Self {
            num_pong_bytes,
            ignored,
        })
    }

    /// Length of the payload (without the message type).
    pub const fn payload_len(&self) -> usize {
        4 + self.ignored.len()
    }

    /// Writes the payload (without the message type).
    pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.write_u16(self.num_pong_bytes)?;
        w.write_u16_prefixed("ignored", self.ignored)
    }

    /// Length of the whole message, type included.
    pub const fn encoded_len(&self) -> usize {
        2 + self.payload_len()
    }

    /// Encodes the whole message (type and payload) at the start of `out`, returning the
    /// bytes written.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        encode_message(out, Self::TYPE, self.payload_len(), |w| {
            self.write_payload(w)
        })
    }
}

/// The `pong` message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pong<'a> {
    /// Padding of the length the `ping` asked for; receivers ignore its contents.
    pub ignored: &'a [u8],
}

impl<'a> Pong<'a> {
    /// The message type.
    pub const TYPE: u16 = msg_type::PONG;

    /// `byteslen`: compare it with the `num_pong_bytes` of the pings sent.
    pub const fn byteslen(&self) -> usize {
        self.ignored.len()
    }

    /// Encodes a whole `pong` with `byteslen` zero bytes at the start of `out`.
    pub fn encode_zeroed(byteslen: u16, out: &mut [u8]) -> Result<usize, EncodeError> {
        let len = usize::from(byteslen);
        encode_message(out, Self::TYPE, 2 + len, |w| {
            w.write_u16(byteslen)?;
            w.write_zeros(len)
        })
    }

    /// Decodes a `pong` payload (the bytes after the message type).
    pub fn decode_payload(payload: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let ignored = r.read_u16_prefixed("byteslen", "ignored")?;
        Ok(Self { ignored })
    }

    /// Length of the payload (without the message type).
    pub const fn payload_len(&self) -> usize {
        2 + self.ignored.len()
    }

    /// Writes the payload (without the message type).
    pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.write_u16_prefixed("ignored", self.ignored)
    }

    /// Length of the whole message, type included.
    pub const fn encoded_len(&self) -> usize {
        2 + self.payload_len()
    }

    /// Encodes the whole message (type and payload) at the start of `out`, returning the
    /// bytes written.
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
    use crate::message::{MAX_MESSAGE_LEN, Message};

    #[test]
    fn ping_round_trip_and_layout() {
        let pad = [0u8; 3];
        let ping = Ping {
            num_pong_bytes: 0x0102,
            ignored: &pad,
        };
        let mut out = [0xffu8; 16];
        let n = ping.encode(&mut out).unwrap();
        assert_eq!(&out[..n], &[0, 18, 1, 2, 0, 3, 0, 0, 0]);
        assert_eq!(n, ping.encoded_len());
        assert_eq!(Message::decode(&out[..n]), Ok(Message::Ping(ping)));

        let mut zeroed = [0xffu8; 16];
        let m = Ping::encode_zeroed(0x0102, 3, &mut zeroed).unwrap();
        assert_eq!(&zeroed[..m], &out[..n]);
    }

    #[test]
    fn pong_round_trip_and_layout() {
        let pad = [0u8; 2];
        let pong = Pong { ignored: &pad };
        let mut out = [0xffu8; 16];
        let n = pong.encode(&mut out).unwrap();
        assert_eq!(&out[..n], &[0, 19, 0, 2, 0, 0]);
        assert_eq!(n, pong.encoded_len());
        assert_eq!(Message::decode(&out[..n]), Ok(Message::Pong(pong)));
        assert_eq!(pong.byteslen(), 2);
    }

    #[test]
    fn ping_gets_a_zeroed_pong_of_the_requested_length() {
        let ping = Ping::new(5);
        let mut out = [0xffu8; 16];
        let n = ping.encode_pong(&mut out).unwrap().unwrap();
        assert_eq!(&out[..n], &[0, 19, 0, 5, 0, 0, 0, 0, 0]);
        let Ok(Message::Pong(pong)) = Message::decode(&out[..n]) else {
            panic!("not a pong")
        };
        assert_eq!(pong.byteslen(), usize::from(ping.num_pong_bytes));
    }

    #[test]
    fn largest_pong_fits_a_message_and_65532_gets_no_reply() {
        assert_eq!(Ping::new(65531).pong_len(), Some(65531));
        let mut frame = vec![0xffu8; MAX_MESSAGE_LEN];
        let n = Ping::new(65531).encode_pong(&mut frame).unwrap();
        assert_eq!(n, Some(MAX_MESSAGE_LEN));
        assert!(frame[4..].iter().all(|&b| b == 0));

        for num_pong_bytes in [65532, 65533, 65535] {
            let ping = Ping::new(num_pong_bytes);
            assert_eq!(ping.pong_len(), None);
            let mut out = [0xffu8; 8];
            assert_eq!(ping.encode_pong(&mut out), Ok(None));
            assert_eq!(out, [0xff; 8]);
        }
    }

    #[test]
    fn trailing_bytes_are_ignored() {
        let bytes = [0, 18, 0, 4, 0, 1, 0, 0xee, 0xee];
        assert_eq!(
            Message::decode(&bytes),
            Ok(Message::Ping(Ping {
                num_pong_bytes: 4,
                ignored: &[0]
            }))
        );
        let bytes = [0, 19, 0, 0, 0xee];
        assert_eq!(
            Message::decode(&bytes),
            Ok(Message::Pong(Pong { ignored: &[] }))
        );
    }

    #[test]
    fn truncated_at_every_byte() {
        let mut out = [0u8; 16];
        let n = Ping::encode_zeroed(7, 3, &mut out).unwrap();
        for len in 2..n {
            let got = Message::decode(&out[..len]);
            assert!(
                matches!(got, Err(DecodeError::Truncated { .. })),
                "ping prefix {len}: {got:?}"
            );
        }
        assert_eq!(
            Message::decode(&out[..3]),
            Err(DecodeError::Truncated {
                field: "num_pong_bytes",
                needed: 2,
                available: 1
            })
        );
        assert_eq!(
            Message::decode(&out[..5]),
            Err(DecodeError::Truncated {
                field: "byteslen",
                needed: 2,
                available: 1
            })
        );
        assert_eq!(
            Message::decode(&out[..n - 1]),
            Err(DecodeError::Truncated {
                field: "ignored",
                needed: 3,
                available: 2
            })
        );

        let n = Pong::encode_zeroed(3, &mut out).unwrap();
        for len in 2..n {
            let got = Message::decode(&out[..len]);
            assert!(
                matches!(got, Err(DecodeError::Truncated { .. })),
                "pong prefix {len}: {got:?}"
            );
        }
    }

    #[test]
    fn encode_errors() {
        let mut out = [0u8; 5];
        assert_eq!(
            Ping::new(0).encode(&mut out),
            Err(EncodeError::BufferTooSmall {
                needed: 6,
                available: 5
            })
        );
        assert_eq!(
            Pong::encode_zeroed(4, &mut out),
            Err(EncodeError::BufferTooSmall {
                needed: 8,
                available: 5
            })
        );
        assert_eq!(
            Ping::new(1).encode_pong(&mut out[..3]),
            Err(EncodeError::BufferTooSmall {
                needed: 5,
                available: 3
            })
        );
        // 2 + 4 + 65535 does not fit in one message, whatever the buffer.
        let mut big = vec![0u8; 70_000];
        assert_eq!(
            Ping::encode_zeroed(0, u16::MAX, &mut big),
            Err(EncodeError::MessageTooLong {
                len: 65541,
                max: MAX_MESSAGE_LEN
            })
        );
    }
}
