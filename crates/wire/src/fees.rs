//! Fee rates: what a gateway's node estimates a transaction must pay to be mined within 1,
//! 6 and 144 blocks, in BOLT 1's custom range (docs/PROTOCOL.md, "Fee rates"). A gateway
//! offers them with the odd feature bit [`FEES_FEATURE`].
//!
//! - `get_fee_rates` (32805): `u32 id`.
//! - `fee_rates` (32807): `u32 id, u8 source, u64 rate x 3` (sat/kvB for 1, 6 and 144
//!   blocks; `u64::MAX` when the node has no estimate for that target; [`FeeSource`]).
//!
//! Fixed-size, so that an answer costs the client no allocation; what the rates are worth
//! is the client's to judge (a gateway may say anything).

use crate::cursor::{Reader, Writer};
use crate::error::{DecodeError, EncodeError};

/// The feature bit (odd: optional) by which a gateway says it answers `get_fee_rates`.
pub const FEES_FEATURE: usize = 267;

/// The confirmation targets of a `fee_rates`, in blocks.
pub const FEE_TARGETS: [u16; 3] = [1, 6, 144];

/// Where a gateway's fee rates come from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FeeSource {
    /// It has none (no node to ask, or the node has not estimated yet).
    None,
    /// Its node's `estimatesmartfee` (Bitcoin Core).
    SmartFee,
    /// Its node's `estimatefee` (btcd).
    EstimateFee,
    /// A source this client does not know.
    Other(u8),
}

impl FeeSource {
    /// Its code on the wire.
    pub const fn code(self) -> u8 {
        match self {
            FeeSource::None => 0,
            FeeSource::SmartFee => 1,
            FeeSource::EstimateFee => 2,
            FeeSource::Other(c) => c,
        }
    }

    /// From its code.
    pub const fn from_code(code: u8) -> FeeSource {
        match code {
            0 => FeeSource::None,
            1 => FeeSource::SmartFee,
            2 => FeeSource::EstimateFee,
            c => FeeSource::Other(c),
        }
    }

    /// Its name, for an application.
    pub const fn name(self) -> &'static str {
        match self {
            FeeSource::None => "none",
            FeeSource::SmartFee => "estimatesmartfee",
            FeeSource::EstimateFee => "estimatefee",
            FeeSource::Other(_) => "other",
        }
    }
}

/// `get_fee_rates` (32805).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GetFeeRates {
    /// Chosen by the client, echoed in the answer.
    pub id: u32,
}

impl GetFeeRates {
    /// The message type.
    pub const TYPE: u16 = 32805;

    /// Decodes a payload.
    pub fn decode_payload(payload: &[u8]) -> Result<Self, DecodeError> {
        Ok(GetFeeRates {
            id: Reader::new(payload).read_u32("id")?,
        })
    }

    /// Payload length.
    pub const fn payload_len(&self) -> usize {
        4
    }

    /// Writes the payload.
    pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.write_u32(self.id)
    }
}

/// `fee_rates` (32807): the answer to `get_fee_rates`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeeRates {
    /// The request answered.
    pub id: u32,
    /// Where they come from.
    pub source: FeeSource,
    /// Sat/kvB to be mined within each of [`FEE_TARGETS`], where the node has an estimate.
    pub rates: [Option<u64>; 3],
}

impl FeeRates {
    /// The message type.
    pub const TYPE: u16 = 32807;

    /// Decodes a payload.
    pub fn decode_payload(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let id = r.read_u32("id")?;
        let source = FeeSource::from_code(r.read_u8("source")?);
        let mut rates = [None; 3];
        for rate in &mut rates {
            *rate = Some(r.read_u64("rate")?).filter(|&v| v != u64::MAX);
        }
        Ok(FeeRates { id, source, rates })
    }

    /// Payload length.
    pub const fn payload_len(&self) -> usize {
        4 + 1 + 3 * 8
    }

    /// Writes the payload.
    pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.write_u32(self.id)?;
        w.write_u8(self.source.code())?;
        for rate in self.rates {
            w.write_u64(rate.unwrap_or(u64::MAX))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::Message;

    #[test]
    fn fee_messages_round_trip_and_refuse_a_short_answer() {
        let mut out = [0u8; 64];
        let ask = Message::GetFeeRates(GetFeeRates { id: 9 });
        let n = ask.encode(&mut out).unwrap();
        assert_eq!(Message::decode(&out[..n]), Ok(ask));
        let answer = FeeRates {
            id: 9,
            source: FeeSource::SmartFee,
            rates: [Some(25_000), None, Some(1_000)],
        };
        let n = Message::FeeRates(answer).encode(&mut out).unwrap();
        assert_eq!(n, 2 + answer.payload_len());
        assert_eq!(Message::decode(&out[..n]), Ok(Message::FeeRates(answer)));
        assert!(Message::decode(&out[..n - 1]).is_err(), "a rate cut short");
        for code in 0..=255u8 {
            assert_eq!(FeeSource::from_code(code).code(), code);
        }
    }
}
