//! Transaction relay: a client hands a signed transaction to a gateway, which passes it to
//! its node over P2P, in BOLT 1's custom range (docs/PROTOCOL.md). A gateway offers it with
//! the odd feature bit [`RELAY_FEATURE`].
//!
//! - `send_tx` (32793): `u32 id`, then the transaction (the rest of the message, at most
//!   [`MAX_TX_LEN`] bytes, with or without witness data).
//! - `tx_result` (32795): `u32 id, u8 status, [32] txid` ([`RelayStatus`]).

use crate::cursor::{Reader, Writer};
use crate::error::{DecodeError, EncodeError};
use crate::message::{MAX_MESSAGE_LEN, TYPE_LEN};
use crate::sync::HASH_LEN;

/// The feature bit (odd: optional) by which a gateway says it relays transactions.
pub const RELAY_FEATURE: usize = 263;
/// The longest transaction one `send_tx` carries.
pub const MAX_TX_LEN: usize = MAX_MESSAGE_LEN - TYPE_LEN - 4;

/// What became of a transaction sent to a gateway.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RelayStatus {
    /// Passed to the gateway's node.
    Relayed,
    /// It does not parse as one transaction.
    Malformed,
    /// Over the standard weight (400,000, Bitcoin Core's `MAX_STANDARD_TX_WEIGHT`).
    Oversized,
    /// Under the standard size without witness (65 bytes, Bitcoin Core's
    /// `MIN_STANDARD_TX_NONWITNESS_SIZE`), no inputs or outputs, or a coinbase.
    NotStandard,
    /// The gateway has no node to pass it to (a generated chain, or a file).
    NoNode,
    /// The gateway's node is not connected now, or its queue is full: try later.
    Busy,
    /// It breaks a rule every node checks before anything else (Bitcoin Core's
    /// `CheckTransaction`: an input spent twice, an output or the outputs' total above 21
    /// million bitcoin, a null previous output); Core disconnects a peer relaying one.
    Invalid,
}

impl RelayStatus {
    /// Its code on the wire.
    pub const fn code(self) -> u8 {
        match self {
            RelayStatus::Relayed => 0,
            RelayStatus::Malformed => 1,
            RelayStatus::Oversized => 2,
            RelayStatus::NotStandard => 3,
            RelayStatus::NoNode => 4,
            RelayStatus::Busy => 5,
            RelayStatus::Invalid => 6,
        }
    }

    /// From its code; an unknown code is taken as not relayed for a reason this client
    /// does not know (`Busy`: it may be tried again).
    pub const fn from_code(code: u8) -> RelayStatus {
        match code {
            0 => RelayStatus::Relayed,
            1 => RelayStatus::Malformed,
            2 => RelayStatus::Oversized,
            3 => RelayStatus::NotStandard,
            4 => RelayStatus::NoNode,
            6 => RelayStatus::Invalid,
            _ => RelayStatus::Busy,
        }
    }

    /// A stable kebab-case name.
    pub const fn name(self) -> &'static str {
        match self {
            RelayStatus::Relayed => "relayed",
            RelayStatus::Malformed => "malformed",
            RelayStatus::Oversized => "oversized",
            RelayStatus::NotStandard => "not-standard",
            RelayStatus::NoNode => "no-node",
            RelayStatus::Busy => "busy",
            RelayStatus::Invalid => "invalid",
        }
    }
}

/// `send_tx` (32793).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SendTx<'a> {
    /// Chosen by the client, echoed in the answer.
    pub id: u32,
    /// The transaction.
    pub tx: &'a [u8],
}

impl<'a> SendTx<'a> {
    /// The message type.
    pub const TYPE: u16 = 32793;

    /// Decodes a payload.
    pub fn decode_payload(payload: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        Ok(SendTx {
            id: r.read_u32("id")?,
            tx: r.take_rest(),
        })
    }

    /// Payload length.
    pub const fn payload_len(&self) -> usize {
        4 + self.tx.len()
    }

    /// Writes the payload.
    pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.write_u32(self.id)?;
        w.write_bytes(self.tx)
    }
}

/// `tx_result` (32795).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TxResult {
    /// The request answered.
    pub id: u32,
    /// What became of it.
    pub status: RelayStatus,
    /// Its txid (internal byte order; zeros when it did not parse).
    pub txid: [u8; HASH_LEN],
}

impl TxResult {
    /// The message type.
    pub const TYPE: u16 = 32795;

    /// Decodes a payload.
    pub fn decode_payload(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        Ok(TxResult {
            id: r.read_u32("id")?,
            status: RelayStatus::from_code(r.read_u8("status")?),
            txid: *r.read_array::<HASH_LEN>("txid")?,
        })
    }

    /// Payload length.
    pub const fn payload_len(&self) -> usize {
        4 + 1 + HASH_LEN
    }

    /// Writes the payload.
    pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.write_u32(self.id)?;
        w.write_u8(self.status.code())?;
        w.write_bytes(&self.txid)
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::message::Message;

    #[test]
    fn relay_messages_round_trip() {
        let tx = [7u8; 300];
        let m = Message::SendTx(SendTx { id: 5, tx: &tx });
        let mut out = [0u8; 400];
        let n = m.encode(&mut out).unwrap();
        assert_eq!(&out[..2], &[0x80, 0x19]);
        assert_eq!(Message::decode(&out[..n]), Ok(m));
        for status in [
            RelayStatus::Relayed,
            RelayStatus::Malformed,
            RelayStatus::Oversized,
            RelayStatus::NotStandard,
            RelayStatus::NoNode,
            RelayStatus::Busy,
            RelayStatus::Invalid,
        ] {
            let m = Message::TxResult(TxResult {
                id: 9,
                status,
                txid: [3; 32],
            });
            let n = m.encode(&mut out).unwrap();
            assert_eq!(Message::decode(&out[..n]), Ok(m));
            assert_eq!(RelayStatus::from_code(status.code()), status);
        }
        assert_eq!(RelayStatus::from_code(200), RelayStatus::Busy);
        assert!(matches!(
            Message::decode(&[0x80, 0x1b, 0, 0, 0, 9, 0]),
            Err(DecodeError::Truncated { .. })
        ));
    }
}
