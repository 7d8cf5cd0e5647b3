//! `error` (type 17) and `warning` (type 1): `channel_id, u16 len, len*byte data`.
//!
//! An all-zero `channel_id` means all channels (for our client: the connection itself).
//! `data` is free text; print it only if it is printable ASCII. Bytes after `data` (a
//! future extension) are ignored.

use crate::cursor::{Reader, Writer};
use crate::error::{DecodeError, EncodeError};
use crate::message::{encode_message, msg_type};

/// A 32-byte channel id.
pub type ChannelId = [u8; 32];

/// The all-zero channel id: "all channels", i.e. the whole connection.
pub const ALL_CHANNELS: ChannelId = [0; 32];

/// The `error` message: the sender gives up on the channel, or on all of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorMessage<'a> {
    /// The channel concerned, or [`ALL_CHANNELS`].
    pub channel_id: ChannelId,
    /// Diagnostic text (not necessarily printable).
    pub data: &'a [u8],
}

/// The `warning` message: something is wrong, but the sender does not give up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Warning<'a> {
    /// The channel concerned, or [`ALL_CHANNELS`].
    pub channel_id: ChannelId,
    /// Diagnostic text (not necessarily printable).
    pub data: &'a [u8],
}

/// `data` as text if every byte is printable ASCII (32..=126), as BOLT 1 asks before
/// printing it.
pub fn printable(data: &[u8]) -> Option<&str> {
    if data.iter().all(|b| (32..=126).contains(b)) {
        core::str::from_utf8(data).ok()
    } else {
        None
    }
}

fn decode_fields(payload: &[u8]) -> Result<(ChannelId, &[u8]), DecodeError> {
    let mut r = Reader::new(payload);
    let channel_id = *r.read_array::<32>("channel_id")?;
    let data = r.read_u16_prefixed("len", "data")?;
    Ok((channel_id, data))
}

fn write_fields(
    w: &mut Writer<'_>,
    channel_id: &ChannelId,
    data: &[u8],
) -> Result<(), EncodeError> {
    w.write_bytes(channel_id)?;
    w.write_u16_prefixed("data", data)
}

macro_rules! channel_message {
    ($name:ident, $ty:expr, $what:literal) => {
        impl<'a> $name<'a> {
            /// The message type.
            pub const TYPE: u16 = $ty;

            #[doc = concat!("A connection-level ", $what, " (all-zero `channel_id`).")]
            pub const fn connection(data: &'a [u8]) -> Self {
                Self {
                    channel_id: ALL_CHANNELS,
                    data,
                }
            }

            /// Whether `channel_id` is all zero: it concerns all channels (the connection).
            pub fn is_all_channels(&self) -> bool {
                self.channel_id == ALL_CHANNELS
            }

            /// `data` as text if it is printable ASCII, else `None`.
            pub fn data_utf8(&self) -> Option<&'a str> {
                printable(self.data)
            }

            /// Decodes the payload (the bytes after the message type).
            pub fn decode_payload(payload: &'a [u8]) -> Result<Self, DecodeError> {
                let (channel_id, data) = decode_fields(payload)?;
                Ok(Self { channel_id, data })
            }

            /// Length of the payload (without the message type).
            pub const fn payload_len(&self) -> usize {
                32 + 2 + self.data.len()
            }

            /// Writes the payload (without the message type).
            pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
                write_fields(w, &self.channel_id, self.data)
            }

            /// Length of the whole message, type included.
            pub const fn encoded_len(&self) -> usize {
                2 + self.payload_len()
            }

            /// Encodes the whole message (type and payload) at the start of `out`,
            /// returning the bytes written.
            pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
                encode_message(out, Self::TYPE, self.payload_len(), |w| {
                    self.write_payload(w)
                })
            }
        }
    };
}

channel_message!(ErrorMessage, msg_type::ERROR, "error");
channel_message!(Warning, msg_type::WARNING, "warning");

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::message::{MAX_MESSAGE_LEN, Message};

    fn channel(b: u8) -> ChannelId {
        let mut id = [0; 32];
        id[31] = b;
        id
    }

    #[test]
    fn error_round_trip_and_layout() {
        let err = ErrorMessage {
            channel_id: channel(7),
            data: b"bad",
        };
        let mut out = [0u8; 64];
        let n = err.encode(&mut out).unwrap();
        let mut expected = vec![0x00, 0x11];
        expected.extend_from_slice(&channel(7));
        expected.extend_from_slice(&[0x00, 0x03, b'b', b'a', b'd']);
        assert_eq!(&out[..n], &expected[..]);
        assert_eq!(n, err.encoded_len());
        assert_eq!(Message::decode(&out[..n]), Ok(Message::Error(err)));
        assert!(!err.is_all_channels());
    }

    #[test]
    fn warning_round_trip_and_layout() {
        let warning = Warning::connection(b"");
        let mut out = [0u8; 64];
        let n = warning.encode(&mut out).unwrap();
        let mut expected = vec![0x00, 0x01];
        expected.extend_from_slice(&[0; 32]);
        expected.extend_from_slice(&[0x00, 0x00]);
        assert_eq!(&out[..n], &expected[..]);
        assert_eq!(Message::decode(&out[..n]), Ok(Message::Warning(warning)));
        assert!(warning.is_all_channels());
        assert_eq!(warning.data_utf8(), Some(""));
    }

    #[test]
    fn data_utf8_only_when_printable() {
        assert_eq!(
            ErrorMessage::connection(b"unknown chain ~ok").data_utf8(),
            Some("unknown chain ~ok")
        );
        assert_eq!(ErrorMessage::connection(b"line\n").data_utf8(), None);
        assert_eq!(ErrorMessage::connection(&[0x7f]).data_utf8(), None);
        assert_eq!(Warning::connection("é".as_bytes()).data_utf8(), None);
        assert_eq!(Warning::connection(&[0xff, 0xfe]).data_utf8(), None);
    }

    #[test]
    fn trailing_bytes_are_ignored() {
        let mut bytes = vec![0x00, 0x11];
        bytes.extend_from_slice(&[0; 32]);
        bytes.extend_from_slice(&[0x00, 0x01, b'x', 0xee, 0xee]);
        assert_eq!(
            Message::decode(&bytes),
            Ok(Message::Error(ErrorMessage::connection(b"x")))
        );
    }

    #[test]
    fn truncated_at_every_byte() {
        for msg in [
            Message::Error(ErrorMessage {
                channel_id: channel(1),
                data: b"abc",
            }),
            Message::Warning(Warning {
                channel_id: channel(2),
                data: b"de",
            }),
        ] {
            let mut out = [0u8; 64];
            let n = msg.encode(&mut out).unwrap();
            for len in 2..n {
                let got = Message::decode(&out[..len]);
                assert!(
                    matches!(got, Err(DecodeError::Truncated { .. })),
                    "{msg:?} prefix {len}: {got:?}"
                );
            }
            assert_eq!(
                Message::decode(&out[..33]),
                Err(DecodeError::Truncated {
                    field: "channel_id",
                    needed: 32,
                    available: 31
                })
            );
            assert_eq!(
                Message::decode(&out[..35]),
                Err(DecodeError::Truncated {
                    field: "len",
                    needed: 2,
                    available: 1
                })
            );
            assert!(matches!(
                Message::decode(&out[..n - 1]),
                Err(DecodeError::Truncated { field: "data", .. })
            ));
        }
    }

    #[test]
    fn encode_errors() {
        let err = ErrorMessage::connection(b"abc");
        let mut out = [0u8; 38];
        assert_eq!(
            err.encode(&mut out),
            Err(EncodeError::BufferTooSmall {
                needed: 39,
                available: 38
            })
        );
        // The largest data that fits a message: 65535 - 2 - 32 - 2.
        let data = vec![b'a'; MAX_MESSAGE_LEN - 36];
        let mut frame = vec![0u8; MAX_MESSAGE_LEN];
        assert_eq!(
            Warning::connection(&data).encode(&mut frame),
            Ok(MAX_MESSAGE_LEN)
        );
        let data = vec![b'a'; 70_000];
        let mut big = vec![0u8; 80_000];
        let mut w = Writer::new(&mut big);
        assert_eq!(
            Warning::connection(&data).write_payload(&mut w),
            Err(EncodeError::FieldTooLong {
                field: "data",
                len: 70_000,
                max: 65535
            })
        );
    }
}
