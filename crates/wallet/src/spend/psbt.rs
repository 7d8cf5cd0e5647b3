//! BIP174 (PSBT version 0) written for an unsigned transaction, with BIP371's taproot
//! fields, and base64 (RFC 4648) for handing it over. Written here rather than taken from
//! rust-bitcoin's `psbt` (or the `base64` crate): a watch-only wallet only ever writes the
//! handful of fields below, and rust-bitcoin would add its whole transaction and script
//! model to a package kept small.

use alloc::string::String;
use alloc::vec::Vec;

use lightwire_primitives::{DecodeError, Reader, Tx, write_compact_size};

/// BIP174's magic: `psbt` and 0xff.
pub const MAGIC: [u8; 5] = *b"psbt\xff";

/// Global: the unsigned transaction.
pub const GLOBAL_UNSIGNED_TX: u8 = 0x00;
/// Input: the whole transaction the input spends from.
pub const IN_NON_WITNESS_UTXO: u8 = 0x00;
/// Input: the output spent (value and script), for segwit inputs.
pub const IN_WITNESS_UTXO: u8 = 0x01;
/// Input: the redeem script of a P2SH input.
pub const IN_REDEEM_SCRIPT: u8 = 0x04;
/// Input: a key's origin: master fingerprint and path (key: the public key).
pub const IN_BIP32_DERIVATION: u8 = 0x06;
/// Input (BIP371): a taproot key's leaf hashes and origin (key: the x-only key).
pub const IN_TAP_BIP32_DERIVATION: u8 = 0x16;
/// Input (BIP371): the taproot internal key.
pub const IN_TAP_INTERNAL_KEY: u8 = 0x17;
/// Output: a key's origin (key: the public key).
pub const OUT_BIP32_DERIVATION: u8 = 0x02;
/// Output (BIP371): the taproot internal key.
pub const OUT_TAP_INTERNAL_KEY: u8 = 0x05;
/// Output (BIP371): a taproot key's leaf hashes and origin (key: the x-only key).
pub const OUT_TAP_BIP32_DERIVATION: u8 = 0x07;

/// A PSBT being written: the global map, then each input's, then each output's, in
/// order; every map ends with [`Writer::end_map`].
pub struct Writer {
    out: Vec<u8>,
}

impl Writer {
    /// The magic and the global map's unsigned transaction (`unsigned_tx`: no scriptSig,
    /// no witness), its map ended.
    pub fn new(unsigned_tx: &[u8]) -> Writer {
        let mut w = Writer {
            out: Vec::with_capacity(unsigned_tx.len() * 3),
        };
        w.out.extend_from_slice(&MAGIC);
        w.pair(GLOBAL_UNSIGNED_TX, &[], unsigned_tx);
        w.end_map();
        w
    }

    /// One key-value pair: the key is `kind` then `key_data`.
    pub fn pair(&mut self, kind: u8, key_data: &[u8], value: &[u8]) {
        write_compact_size(&mut self.out, 1 + key_data.len() as u64);
        self.out.push(kind);
        self.out.extend_from_slice(key_data);
        write_compact_size(&mut self.out, value.len() as u64);
        self.out.extend_from_slice(value);
    }

    /// A key origin (`kind` is [`IN_BIP32_DERIVATION`] or [`OUT_BIP32_DERIVATION`]): the
    /// fingerprint, then each step, little-endian.
    pub fn derivation(&mut self, kind: u8, pubkey: &[u8], fingerprint: [u8; 4], path: &[u32]) {
        let mut value = Vec::with_capacity(4 + 4 * path.len());
        value.extend_from_slice(&fingerprint);
        path.iter()
            .for_each(|s| value.extend_from_slice(&s.to_le_bytes()));
        self.pair(kind, pubkey, &value);
    }

    /// A taproot key-path key's origin (BIP371, no leaf hashes) and the internal key.
    pub fn taproot_key(
        &mut self,
        (derivation, internal): (u8, u8),
        xonly: &[u8; 32],
        fingerprint: [u8; 4],
        path: &[u32],
    ) {
        let mut value = Vec::with_capacity(5 + 4 * path.len());
        write_compact_size(&mut value, 0);
        value.extend_from_slice(&fingerprint);
        path.iter()
            .for_each(|s| value.extend_from_slice(&s.to_le_bytes()));
        self.pair(derivation, xonly, &value);
        self.pair(internal, &[], xonly);
    }

    /// The end of a map.
    pub fn end_map(&mut self) {
        self.out.push(0x00);
    }

    /// The PSBT's bytes.
    pub fn finish(self) -> Vec<u8> {
        self.out
    }
}

/// Bytes that are not a PSBT.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum PsbtReadError {
    /// No BIP174 magic.
    #[error("not a PSBT (it does not start with psbt and 0xff)")]
    Magic,
    /// A key twice in one map (BIP174 forbids it).
    #[error("a key repeated within one map")]
    Repeated,
    /// No unsigned transaction in the global map.
    #[error("no unsigned transaction")]
    NoTransaction,
    /// A field that does not decode.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// One map of a PSBT read back: its key-value pairs, borrowed, in order.
pub type Map<'a> = Vec<(&'a [u8], &'a [u8])>;

/// A PSBT's maps read back (checked to the last byte): the global map, then one for each
/// input and output of its unsigned transaction, whose count they must match.
pub fn read_maps(bytes: &[u8]) -> Result<Vec<Map<'_>>, PsbtReadError> {
    let mut r = Reader::new(bytes);
    if r.take(5, "psbt magic")? != MAGIC {
        return Err(PsbtReadError::Magic);
    }
    let mut maps: Vec<Map<'_>> = Vec::new();
    let mut expected = 1;
    while maps.len() < expected {
        let mut map = Map::new();
        loop {
            let key = r.var_bytes("psbt key")?;
            if key.is_empty() {
                break;
            }
            let value = r.var_bytes("psbt value")?;
            if map.iter().any(|(k, _)| *k == key) {
                return Err(PsbtReadError::Repeated);
            }
            map.push((key, value));
        }
        if maps.is_empty() {
            let tx = map
                .iter()
                .find(|(k, _)| *k == [GLOBAL_UNSIGNED_TX])
                .ok_or(PsbtReadError::NoTransaction)?;
            let tx = Tx::parse(tx.1)?;
            expected = 1 + tx.inputs().count() + tx.outputs().count();
        }
        maps.push(map);
    }
    r.finish()?;
    Ok(maps)
}

/// `bytes` in base64 with padding (RFC 4648 section 4), as BIP174 hands PSBTs over.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * k)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn base64_is_rfc_4648() {
        // RFC 4648 section 10's test vectors.
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in cases {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
        assert_eq!(base64(&[0xff, 0xfe, 0xfd]), "//79");
    }

    #[test]
    fn maps_are_read_back_whole_or_refused() {
        // Version 2, one input (no scriptSig), one output paying OP_TRUE, lock time 0.
        let tx = [
            &[2, 0, 0, 0, 1][..],
            &[1; 36],
            &[0, 0xff, 0xff, 0xff, 0xff, 1],
            &[0; 8],
            &[1, 0x51, 0, 0, 0, 0],
        ]
        .concat();
        let mut w = Writer::new(&tx);
        w.pair(IN_WITNESS_UTXO, &[], &[1, 2, 3]);
        w.end_map();
        w.end_map();
        let bytes = w.finish();
        let maps = read_maps(&bytes).unwrap();
        assert_eq!(maps.len(), 3, "global, one input, one output");
        assert_eq!(maps[1], [(&[IN_WITNESS_UTXO][..], &[1u8, 2, 3][..])]);
        for cut in 0..bytes.len() {
            assert!(read_maps(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut more = bytes.clone();
        more.push(0);
        assert!(read_maps(&more).is_err(), "a map too many");
        let mut twice = bytes[..bytes.len() - 2].to_vec();
        twice.extend_from_slice(&[1, IN_WITNESS_UTXO, 0, 0, 0]);
        assert_eq!(read_maps(&twice), Err(PsbtReadError::Repeated));
        assert_eq!(read_maps(b"psbu\xff"), Err(PsbtReadError::Magic));
    }
}
