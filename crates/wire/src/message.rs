//! The BOLT 1 message: a big-endian `u16` type, then the payload.
//!
//! [`Message::decode`] is one `match` on the type. A new message (like the header-sync
//! messages in the custom range at or above [`msg_type::CUSTOM_START`]) is a new type
//! constant, a new variant and a new arm in [`Message::decode`], [`Message::ty`],
//! [`Message::payload_len`] and [`Message::encode`].

use crate::blocks::{BlockKind, BlockPiece, GetBlock};
use crate::compact::HeadersCompact;
use crate::cursor::{Reader, Writer};
use crate::error::{DecodeError, EncodeError};
use crate::error_message::{ErrorMessage, Warning};
use crate::fees::{FeeRates, GetFeeRates};
use crate::filters::{
    FilterCheckpoints, FilterHeaders, Filters, GetFilterCheckpoints, GetFilterHeaders, GetFilters,
};
use crate::init::Init;
use crate::mempool::{GetMempoolTx, MempoolDigest, MempoolSubscribe, MempoolTx};
use crate::ping::{Ping, Pong};
use crate::relay::{SendTx, TxResult};
use crate::sync::{GetHeaders, Headers, Tip};

/// Message type numbers.
pub mod msg_type {
    /// `warning`.
    pub const WARNING: u16 = 1;
    /// `init`.
    pub const INIT: u16 = 16;
    /// `error`.
    pub const ERROR: u16 = 17;
    /// `ping`.
    pub const PING: u16 = 18;
    /// `pong`.
    pub const PONG: u16 = 19;
    /// First type of the custom range (32768..=65535), for experimental and
    /// application-specific messages.
    pub const CUSTOM_START: u16 = 32768;
    /// `get_headers` (lightwire header sync).
    pub const GET_HEADERS: u16 = 32769;
    /// `headers` (lightwire header sync).
    pub const HEADERS: u16 = 32771;
    /// `tip` (lightwire header sync).
    pub const TIP: u16 = 32773;
    /// `headers_compact` (lightwire header sync, negotiated).
    pub const HEADERS_COMPACT: u16 = 32775;
    /// `get_filter_headers` (compact block filters).
    pub const GET_FILTER_HEADERS: u16 = 32777;
    /// `filter_headers` (compact block filters).
    pub const FILTER_HEADERS: u16 = 32779;
    /// `get_filter_checkpoints` (compact block filters).
    pub const GET_FILTER_CHECKPOINTS: u16 = 32781;
    /// `filter_checkpoints` (compact block filters).
    pub const FILTER_CHECKPOINTS: u16 = 32783;
    /// `get_filters` (compact block filters).
    pub const GET_FILTERS: u16 = 32785;
    /// `filters` (compact block filters).
    pub const FILTERS: u16 = 32787;
    /// `get_block` (blocks).
    pub const GET_BLOCK: u16 = 32789;
    /// `block` (blocks).
    pub const BLOCK: u16 = 32791;
    /// `send_tx` (relay).
    pub const SEND_TX: u16 = 32793;
    /// `tx_result` (relay).
    pub const TX_RESULT: u16 = 32795;
    /// `mempool_subscribe` (mempool digest).
    pub const MEMPOOL_SUBSCRIBE: u16 = 32797;
    /// `mempool_digest` (mempool digest).
    pub const MEMPOOL_DIGEST: u16 = 32799;
    /// `get_mempool_tx` (mempool digest).
    pub const GET_MEMPOOL_TX: u16 = 32801;
    /// `mempool_tx` (mempool digest).
    pub const MEMPOOL_TX: u16 = 32803;
    /// `get_fee_rates`: the gateway's node's fee estimates, asked.
    pub const GET_FEE_RATES: u16 = 32805;
    /// `fee_rates`: the answer.
    pub const FEE_RATES: u16 = 32807;
    /// `get_tweak_headers` (silent-payment tweaks).
    pub const GET_TWEAK_HEADERS: u16 = 32809;
    /// `tweak_headers` (silent-payment tweaks).
    pub const TWEAK_HEADERS: u16 = 32811;
    /// `get_tweak_checkpoints` (silent-payment tweaks).
    pub const GET_TWEAK_CHECKPOINTS: u16 = 32813;
    /// `tweak_checkpoints` (silent-payment tweaks).
    pub const TWEAK_CHECKPOINTS: u16 = 32815;
    /// `get_tweaks` (silent-payment tweaks).
    pub const GET_TWEAKS: u16 = 32817;
    /// `tweaks` (silent-payment tweaks).
    pub const TWEAKS: u16 = 32819;
    /// `get_spent_from` (silent-payment tweaks: a dispute's evidence).
    pub const GET_SPENT_FROM: u16 = 32821;
    /// `spent_from` (silent-payment tweaks: a dispute's evidence).
    pub const SPENT_FROM: u16 = 32823;

    /// Whether a receiver that does not know `ty` may ignore it ("it's ok to be odd").
    pub const fn is_odd(ty: u16) -> bool {
        ty % 2 == 1
    }
}

/// Length of the message type field.
pub const TYPE_LEN: usize = 2;

/// The longest message, type included: a transport frame's length is a `u16`.
pub const MAX_MESSAGE_LEN: usize = 65535;

/// A decoded message, borrowing from the bytes it was decoded from.
///
/// Deliberately not `#[non_exhaustive]`: when a variant is added, every `match` on
/// messages in the workspace should fail to compile until it handles it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// `init` (16).
    Init(Init<'a>),
    /// `error` (17).
    Error(ErrorMessage<'a>),
    /// `warning` (1).
    Warning(Warning<'a>),
    /// `ping` (18).
    Ping(Ping<'a>),
    /// `pong` (19).
    Pong(Pong<'a>),
    /// `get_headers` (32769).
    GetHeaders(GetHeaders<'a>),
    /// `headers` (32771).
    Headers(Headers<'a>),
    /// `tip` (32773).
    Tip(Tip<'a>),
    /// `headers_compact` (32775).
    HeadersCompact(HeadersCompact<'a>),
    /// `get_filter_headers` (32777).
    GetFilterHeaders(GetFilterHeaders),
    /// `filter_headers` (32779).
    FilterHeaders(FilterHeaders<'a>),
    /// `get_filter_checkpoints` (32781).
    GetFilterCheckpoints(GetFilterCheckpoints),
    /// `filter_checkpoints` (32783).
    FilterCheckpoints(FilterCheckpoints<'a>),
    /// `get_filters` (32785).
    GetFilters(GetFilters),
    /// `filters` (32787).
    Filters(Filters<'a>),
    /// `get_block` (32789).
    GetBlock(GetBlock),
    /// `block` (32791).
    Block(BlockPiece<'a>),
    /// `send_tx` (32793).
    SendTx(SendTx<'a>),
    /// `tx_result` (32795).
    TxResult(TxResult),
    /// `mempool_subscribe` (32797).
    MempoolSubscribe(MempoolSubscribe),
    /// `mempool_digest` (32799).
    MempoolDigest(MempoolDigest<'a>),
    /// `get_mempool_tx` (32801).
    GetMempoolTx(GetMempoolTx),
    /// `mempool_tx` (32803).
    MempoolTx(MempoolTx<'a>),
    /// `get_fee_rates` (32805).
    GetFeeRates(GetFeeRates),
    /// `fee_rates` (32807).
    FeeRates(FeeRates),
    /// `get_tweak_headers` (32809): a `get_filter_headers` for the tweak chain.
    GetTweakHeaders(GetFilterHeaders),
    /// `tweak_headers` (32811).
    TweakHeaders(FilterHeaders<'a>),
    /// `get_tweak_checkpoints` (32813).
    GetTweakCheckpoints(GetFilterCheckpoints),
    /// `tweak_checkpoints` (32815).
    TweakCheckpoints(FilterCheckpoints<'a>),
    /// `get_tweaks` (32817).
    GetTweaks(GetFilters),
    /// `tweaks` (32819): a block's tweak list in pieces, as `filters` carries filters.
    Tweaks(Filters<'a>),
    /// `get_spent_from` (32821): a `get_block` for the transactions a block spends from.
    GetSpentFrom(GetBlock),
    /// `spent_from` (32823): those transactions in pieces, as `block` carries a block.
    SpentFrom(BlockPiece<'a>),
    /// A message of an odd type this crate does not know. BOLT 1: the receiver must
    /// ignore it. (Unknown even types are [`DecodeError::UnknownEvenType`].)
    Unknown {
        /// The message type (always odd when decoded).
        ty: u16,
        /// The payload, undecoded.
        payload: &'a [u8],
    },
}

impl<'a> Message<'a> {
    /// Decodes one whole message (type and payload), borrowing from `bytes`.
    ///
    /// Bytes after a known message's fields are ignored, as BOLT 1 allows for
    /// extensions, except for `init`, where they are its TLV stream and are checked.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let ty = r.read_u16("type")?;
        let payload = r.take_rest();
        let message = match ty {
            msg_type::INIT => Message::Init(Init::decode_payload(payload)?),
            msg_type::ERROR => Message::Error(ErrorMessage::decode_payload(payload)?),
            msg_type::WARNING => Message::Warning(Warning::decode_payload(payload)?),
            msg_type::PING => Message::Ping(Ping::decode_payload(payload)?),
            msg_type::PONG => Message::Pong(Pong::decode_payload(payload)?),
            msg_type::GET_HEADERS => Message::GetHeaders(GetHeaders::decode_payload(payload)?),
            msg_type::HEADERS => Message::Headers(Headers::decode_payload(payload)?),
            msg_type::TIP => Message::Tip(Tip::decode_payload(payload)?),
            msg_type::HEADERS_COMPACT => {
                Message::HeadersCompact(HeadersCompact::decode_payload(payload)?)
            }
            msg_type::GET_FILTER_HEADERS => {
                Message::GetFilterHeaders(GetFilterHeaders::decode_payload(payload)?)
            }
            msg_type::FILTER_HEADERS => {
                Message::FilterHeaders(FilterHeaders::decode_payload(payload)?)
            }
            msg_type::GET_FILTER_CHECKPOINTS => {
                Message::GetFilterCheckpoints(GetFilterCheckpoints::decode_payload(payload)?)
            }
            msg_type::FILTER_CHECKPOINTS => {
                Message::FilterCheckpoints(FilterCheckpoints::decode_payload(payload)?)
            }
            msg_type::GET_FILTERS => Message::GetFilters(GetFilters::decode_payload(payload)?),
            msg_type::FILTERS => Message::Filters(Filters::decode_payload(payload)?),
            msg_type::GET_BLOCK => Message::GetBlock(GetBlock::decode_payload(payload)?),
            msg_type::BLOCK => Message::Block(BlockPiece::decode_payload(payload)?),
            msg_type::SEND_TX => Message::SendTx(SendTx::decode_payload(payload)?),
            msg_type::TX_RESULT => Message::TxResult(TxResult::decode_payload(payload)?),
            msg_type::MEMPOOL_SUBSCRIBE => {
                Message::MempoolSubscribe(MempoolSubscribe::decode_payload(payload)?)
            }
            msg_type::MEMPOOL_DIGEST => {
                Message::MempoolDigest(MempoolDigest::decode_payload(payload)?)
            }
            msg_type::GET_MEMPOOL_TX => {
                Message::GetMempoolTx(GetMempoolTx::decode_payload(payload)?)
            }
            msg_type::MEMPOOL_TX => Message::MempoolTx(MempoolTx::decode_payload(payload)?),
            msg_type::GET_FEE_RATES => Message::GetFeeRates(GetFeeRates::decode_payload(payload)?),
            msg_type::FEE_RATES => Message::FeeRates(FeeRates::decode_payload(payload)?),
            msg_type::GET_TWEAK_HEADERS => {
                Message::GetTweakHeaders(GetFilterHeaders::decode_payload(payload)?)
            }
            msg_type::TWEAK_HEADERS => {
                Message::TweakHeaders(FilterHeaders::decode_payload(payload)?)
            }
            msg_type::GET_TWEAK_CHECKPOINTS => {
                Message::GetTweakCheckpoints(GetFilterCheckpoints::decode_payload(payload)?)
            }
            msg_type::TWEAK_CHECKPOINTS => {
                Message::TweakCheckpoints(FilterCheckpoints::decode_payload(payload)?)
            }
            msg_type::GET_TWEAKS => Message::GetTweaks(GetFilters::decode_payload(payload)?),
            msg_type::TWEAKS => Message::Tweaks(Filters::decode_payload(payload)?),
            msg_type::GET_SPENT_FROM => Message::GetSpentFrom(GetBlock::decode_payload(payload)?),
            msg_type::SPENT_FROM => Message::SpentFrom(BlockPiece::decode_payload_as(
                BlockKind::SpentFrom,
                payload,
            )?),
            ty if msg_type::is_odd(ty) => Message::Unknown { ty, payload },
            ty => return Err(DecodeError::UnknownEvenType { ty }),
        };
        Ok(message)
    }

    /// The message type.
    pub const fn ty(&self) -> u16 {
        match self {
            Message::Init(_) => Init::TYPE,
            Message::Error(_) => ErrorMessage::TYPE,
            Message::Warning(_) => Warning::TYPE,
            Message::Ping(_) => Ping::TYPE,
            Message::Pong(_) => Pong::TYPE,
            Message::GetHeaders(_) => GetHeaders::TYPE,
            Message::Headers(_) => Headers::TYPE,
            Message::Tip(_) => Tip::TYPE,
            Message::HeadersCompact(_) => HeadersCompact::TYPE,
            Message::GetFilterHeaders(_) => GetFilterHeaders::TYPE,
            Message::FilterHeaders(_) => FilterHeaders::TYPE,
            Message::GetFilterCheckpoints(_) => GetFilterCheckpoints::TYPE,
            Message::FilterCheckpoints(_) => FilterCheckpoints::TYPE,
            Message::GetFilters(_) => GetFilters::TYPE,
            Message::Filters(_) => Filters::TYPE,
            Message::GetBlock(_) => GetBlock::TYPE,
            Message::Block(_) => BlockPiece::TYPE,
            Message::SendTx(_) => SendTx::TYPE,
            Message::TxResult(_) => TxResult::TYPE,
            Message::MempoolSubscribe(_) => MempoolSubscribe::TYPE,
            Message::MempoolDigest(_) => MempoolDigest::TYPE,
            Message::GetMempoolTx(_) => GetMempoolTx::TYPE,
            Message::MempoolTx(_) => MempoolTx::TYPE,
            Message::GetFeeRates(_) => GetFeeRates::TYPE,
            Message::FeeRates(_) => FeeRates::TYPE,
            Message::GetTweakHeaders(_) => msg_type::GET_TWEAK_HEADERS,
            Message::TweakHeaders(_) => msg_type::TWEAK_HEADERS,
            Message::GetTweakCheckpoints(_) => msg_type::GET_TWEAK_CHECKPOINTS,
            Message::TweakCheckpoints(_) => msg_type::TWEAK_CHECKPOINTS,
            Message::GetTweaks(_) => msg_type::GET_TWEAKS,
            Message::Tweaks(_) => msg_type::TWEAKS,
            Message::GetSpentFrom(_) => msg_type::GET_SPENT_FROM,
            Message::SpentFrom(_) => msg_type::SPENT_FROM,
            Message::Unknown { ty, .. } => *ty,
        }
    }

    /// Length of the payload, without the type.
    pub fn payload_len(&self) -> usize {
        match self {
            Message::Init(m) => m.payload_len(),
            Message::Error(m) => m.payload_len(),
            Message::Warning(m) => m.payload_len(),
            Message::Ping(m) => m.payload_len(),
            Message::Pong(m) => m.payload_len(),
            Message::GetHeaders(m) => m.payload_len(),
            Message::Headers(m) => m.payload_len(),
            Message::Tip(m) => m.payload_len(),
            Message::HeadersCompact(m) => m.payload_len(),
            Message::GetFilterHeaders(m) | Message::GetTweakHeaders(m) => m.payload_len(),
            Message::FilterHeaders(m) | Message::TweakHeaders(m) => m.payload_len(),
            Message::GetFilterCheckpoints(m) | Message::GetTweakCheckpoints(m) => m.payload_len(),
            Message::FilterCheckpoints(m) | Message::TweakCheckpoints(m) => m.payload_len(),
            Message::GetFilters(m) | Message::GetTweaks(m) => m.payload_len(),
            Message::Filters(m) | Message::Tweaks(m) => m.payload_len(),
            Message::GetBlock(m) | Message::GetSpentFrom(m) => m.payload_len(),
            Message::Block(m) | Message::SpentFrom(m) => m.payload_len(),
            Message::SendTx(m) => m.payload_len(),
            Message::TxResult(m) => m.payload_len(),
            Message::MempoolSubscribe(m) => m.payload_len(),
            Message::MempoolDigest(m) => m.payload_len(),
            Message::GetMempoolTx(m) => m.payload_len(),
            Message::MempoolTx(m) => m.payload_len(),
            Message::GetFeeRates(m) => m.payload_len(),
            Message::FeeRates(m) => m.payload_len(),
            Message::Unknown { payload, .. } => payload.len(),
        }
    }

    /// Length of the encoded message, type included.
    pub fn encoded_len(&self) -> usize {
        TYPE_LEN + self.payload_len()
    }

    /// Encodes the message (type and payload) at the start of `out`, returning the bytes
    /// written. Checks first that the whole message fits, so on error nothing useful
    /// has been written.
    ///
    /// `Unknown` is written as its type and payload unchanged.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        encode_message(out, self.ty(), self.payload_len(), |w| match self {
            Message::Init(m) => m.write_payload(w),
            Message::Error(m) => m.write_payload(w),
            Message::Warning(m) => m.write_payload(w),
            Message::Ping(m) => m.write_payload(w),
            Message::Pong(m) => m.write_payload(w),
            Message::GetHeaders(m) => m.write_payload(w),
            Message::Headers(m) => m.write_payload(w),
            Message::Tip(m) => m.write_payload(w),
            Message::HeadersCompact(m) => m.write_payload(w),
            Message::GetFilterHeaders(m) | Message::GetTweakHeaders(m) => m.write_payload(w),
            Message::FilterHeaders(m) | Message::TweakHeaders(m) => m.write_payload(w),
            Message::GetFilterCheckpoints(m) | Message::GetTweakCheckpoints(m) => {
                m.write_payload(w)
            }
            Message::FilterCheckpoints(m) | Message::TweakCheckpoints(m) => m.write_payload(w),
            Message::GetFilters(m) | Message::GetTweaks(m) => m.write_payload(w),
            Message::Filters(m) | Message::Tweaks(m) => m.write_payload(w),
            Message::GetBlock(m) | Message::GetSpentFrom(m) => m.write_payload(w),
            Message::Block(m) | Message::SpentFrom(m) => m.write_payload(w),
            Message::SendTx(m) => m.write_payload(w),
            Message::TxResult(m) => m.write_payload(w),
            Message::MempoolSubscribe(m) => m.write_payload(w),
            Message::MempoolDigest(m) => m.write_payload(w),
            Message::GetMempoolTx(m) => m.write_payload(w),
            Message::MempoolTx(m) => m.write_payload(w),
            Message::GetFeeRates(m) => m.write_payload(w),
            Message::FeeRates(m) => m.write_payload(w),
            Message::Unknown { payload, .. } => w.write_bytes(payload),
        })
    }
}

impl<'a> From<Init<'a>> for Message<'a> {
    fn from(m: Init<'a>) -> Self {
        Message::Init(m)
    }
}

impl<'a> From<ErrorMessage<'a>> for Message<'a> {
    fn from(m: ErrorMessage<'a>) -> Self {
        Message::Error(m)
    }
}

impl<'a> From<Warning<'a>> for Message<'a> {
    fn from(m: Warning<'a>) -> Self {
        Message::Warning(m)
    }
}

impl<'a> From<Ping<'a>> for Message<'a> {
    fn from(m: Ping<'a>) -> Self {
        Message::Ping(m)
    }
}

impl<'a> From<Pong<'a>> for Message<'a> {
    fn from(m: Pong<'a>) -> Self {
        Message::Pong(m)
    }
}

/// Writes the type and then the payload through `write`, after checking that the
/// message fits both the transport's limit and `out`.
pub(crate) fn encode_message(
    out: &mut [u8],
    ty: u16,
    payload_len: usize,
    write: impl FnOnce(&mut Writer<'_>) -> Result<(), EncodeError>,
) -> Result<usize, EncodeError> {
    let len = payload_len.saturating_add(TYPE_LEN);
    if len > MAX_MESSAGE_LEN {
        return Err(EncodeError::MessageTooLong {
            len,
            max: MAX_MESSAGE_LEN,
        });
    }
    let mut w = Writer::new(out);
    w.reserve(len)?;
    w.write_u16(ty)?;
    write(&mut w)?;
    Ok(w.written())
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::features::Features;
    use crate::init::{ChainHash, Networks};

    #[test]
    fn round_trip_every_message() {
        let chains: [ChainHash; 1] = [[0x6f; 32]];
        let addr = [4u8, 1, 2];
        let pad = [0u8; 4];
        let messages = [
            Message::Init(Init {
                global_features: Features::new(&[0x01]),
                features: Features::new(&[0x02, 0x00]),
                networks: Some(Networks::from_chains(&chains)),
                remote_addr: Some(&addr),
                mirrors: None,
            }),
            Message::Init(Init::default()),
            Message::Error(ErrorMessage {
                channel_id: [9; 32],
                data: b"boom",
            }),
            Message::Warning(Warning::connection(b"careful")),
            Message::Ping(Ping {
                num_pong_bytes: 10,
                ignored: &pad,
            }),
            Message::Pong(Pong { ignored: &pad }),
            Message::Unknown {
                ty: 40001,
                payload: &[1, 2, 3],
            },
            Message::Unknown {
                ty: 3,
                payload: &[],
            },
        ];
        for msg in messages {
            let mut out = [0u8; 128];
            let n = msg.encode(&mut out).unwrap();
            assert_eq!(n, msg.encoded_len(), "{msg:?}");
            assert_eq!(u16::from_be_bytes([out[0], out[1]]), msg.ty(), "{msg:?}");
            assert_eq!(Message::decode(&out[..n]), Ok(msg));

            // Every buffer shorter than the message is refused.
            for size in 0..n {
                assert_eq!(
                    msg.encode(&mut out[..size]),
                    Err(EncodeError::BufferTooSmall {
                        needed: n,
                        available: size
                    }),
                    "{msg:?}"
                );
            }
        }
    }

    #[test]
    fn type_and_struct_constants_agree() {
        assert_eq!(Message::from(Init::default()).ty(), 16);
        assert_eq!(Message::from(ErrorMessage::default()).ty(), 17);
        assert_eq!(Message::from(Warning::default()).ty(), 1);
        assert_eq!(Message::from(Ping::default()).ty(), 18);
        assert_eq!(Message::from(Pong::default()).ty(), 19);
        assert_eq!(GetHeaders::TYPE, msg_type::GET_HEADERS);
        assert_eq!(Headers::TYPE, msg_type::HEADERS);
        assert_eq!(Tip::TYPE, msg_type::TIP);
        assert_eq!(crate::MempoolSubscribe::TYPE, msg_type::MEMPOOL_SUBSCRIBE);
        assert_eq!(crate::MempoolDigest::TYPE, msg_type::MEMPOOL_DIGEST);
        assert_eq!(crate::GetMempoolTx::TYPE, msg_type::GET_MEMPOOL_TX);
        assert_eq!(crate::MempoolTx::TYPE, msg_type::MEMPOOL_TX);
        assert_eq!(crate::GetFeeRates::TYPE, msg_type::GET_FEE_RATES);
        assert_eq!(crate::FeeRates::TYPE, msg_type::FEE_RATES);
    }

    #[test]
    fn unknown_odd_type_is_kept_unknown_even_fails() {
        assert_eq!(
            Message::decode(&[0x9c, 0x41, 0xaa]),
            Ok(Message::Unknown {
                ty: 40001,
                payload: &[0xaa]
            })
        );
        assert_eq!(
            Message::decode(&[0x00, 0x03]),
            Ok(Message::Unknown {
                ty: 3,
                payload: &[]
            })
        );
        for ty in [0u16, 2, 32, 258, 32768, 65534] {
            let bytes = ty.to_be_bytes();
            assert_eq!(
                Message::decode(&bytes),
                Err(DecodeError::UnknownEvenType { ty }),
                "type {ty}"
            );
        }
    }

    #[test]
    fn type_itself_truncated() {
        assert_eq!(
            Message::decode(&[]),
            Err(DecodeError::Truncated {
                field: "type",
                needed: 2,
                available: 0
            })
        );
        assert_eq!(
            Message::decode(&[0x00]),
            Err(DecodeError::Truncated {
                field: "type",
                needed: 2,
                available: 1
            })
        );
    }

    #[test]
    fn known_messages_with_empty_payload_are_truncated() {
        for ty in [
            msg_type::INIT,
            msg_type::ERROR,
            msg_type::WARNING,
            msg_type::PING,
            msg_type::PONG,
        ] {
            assert!(
                matches!(
                    Message::decode(&ty.to_be_bytes()),
                    Err(DecodeError::Truncated { .. })
                ),
                "type {ty}"
            );
        }
    }

    #[test]
    fn too_long_message_is_refused() {
        let payload = vec![0u8; MAX_MESSAGE_LEN - 1];
        let msg = Message::Unknown {
            ty: 33333,
            payload: &payload,
        };
        let mut out = vec![0u8; MAX_MESSAGE_LEN + 10];
        assert_eq!(
            msg.encode(&mut out),
            Err(EncodeError::MessageTooLong {
                len: MAX_MESSAGE_LEN + 1,
                max: MAX_MESSAGE_LEN
            })
        );
        let msg = Message::Unknown {
            ty: 33333,
            payload: &payload[1..],
        };
        assert_eq!(msg.encode(&mut out), Ok(MAX_MESSAGE_LEN));
    }
}
