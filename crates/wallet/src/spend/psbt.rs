//! BIP174 (PSBT version 0) written for an unsigned transaction, with BIP371's taproot
//! fields, or BIP370's version 2 where a field allowed only there is needed (BIP376's, to
//! spend a silent payment's output), and base64 (RFC 4648) for handing it over. Written here rather than taken from
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
/// Input: the finalized scriptSig.
pub const IN_FINAL_SCRIPTSIG: u8 = 0x07;
/// Input: the finalized witness (its items, serialized as in a transaction).
pub const IN_FINAL_SCRIPTWITNESS: u8 = 0x08;
/// Output: the redeem script of a P2SH output.
pub const OUT_REDEEM_SCRIPT: u8 = 0x00;
/// Output: a key's origin (key: the public key).
pub const OUT_BIP32_DERIVATION: u8 = 0x02;
/// Output (BIP371): the taproot internal key.
pub const OUT_TAP_INTERNAL_KEY: u8 = 0x05;
/// Output (BIP371): a taproot key's leaf hashes and origin (key: the x-only key).
pub const OUT_TAP_BIP32_DERIVATION: u8 = 0x07;
/// Global (BIP370): the transaction's version.
pub const GLOBAL_TX_VERSION: u8 = 0x02;
/// Global (BIP370): the lock time when no input requires one.
pub const GLOBAL_FALLBACK_LOCKTIME: u8 = 0x03;
/// Global (BIP370): the number of inputs.
pub const GLOBAL_INPUT_COUNT: u8 = 0x04;
/// Global (BIP370): the number of outputs.
pub const GLOBAL_OUTPUT_COUNT: u8 = 0x05;
/// Global: the PSBT's version (absent: 0).
pub const GLOBAL_VERSION: u8 = 0xfb;
/// Input (BIP370): the txid of the output spent (internal byte order).
pub const IN_PREVIOUS_TXID: u8 = 0x0e;
/// Input (BIP370): the index of the output spent.
pub const IN_OUTPUT_INDEX: u8 = 0x0f;
/// Input (BIP370): the sequence number.
pub const IN_SEQUENCE: u8 = 0x10;
/// Input (BIP376, version 2 only): the spend key of a silent payment and its origin (key:
/// the 33-byte spend key; value: fingerprint and path, zero fingerprint and no path when
/// unknown).
pub const IN_SP_SPEND_BIP32_DERIVATION: u8 = 0x1f;
/// Input (BIP376, version 2 only): the 32-byte tweak the spend key's private key is added
/// to.
pub const IN_SP_TWEAK: u8 = 0x20;
/// Output (BIP370): the amount.
pub const OUT_AMOUNT: u8 = 0x03;
/// Output (BIP370): the script.
pub const OUT_SCRIPT: u8 = 0x04;

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

    /// The magic alone: every map, the global one too, is the caller's to write (a PSBT
    /// read back and written again).
    pub fn empty() -> Writer {
        Writer {
            out: MAGIC.to_vec(),
        }
    }

    /// Version 2 (BIP370): the magic and the global map of a transaction of `version`,
    /// `lock_time`, `inputs` and `outputs`, ended; each input's map then starts with
    /// [`Self::v2_input`], each output's with [`Self::v2_output`].
    pub fn new_v2(version: u32, lock_time: u32, inputs: usize, outputs: usize) -> Writer {
        let mut w = Writer {
            out: Vec::with_capacity(256 * (inputs + outputs + 1)),
        };
        w.out.extend_from_slice(&MAGIC);
        w.pair(GLOBAL_TX_VERSION, &[], &version.to_le_bytes());
        w.pair(GLOBAL_FALLBACK_LOCKTIME, &[], &lock_time.to_le_bytes());
        let mut n = Vec::with_capacity(9);
        write_compact_size(&mut n, inputs as u64);
        w.pair(GLOBAL_INPUT_COUNT, &[], &n);
        n.clear();
        write_compact_size(&mut n, outputs as u64);
        w.pair(GLOBAL_OUTPUT_COUNT, &[], &n);
        w.pair(GLOBAL_VERSION, &[], &2u32.to_le_bytes());
        w.end_map();
        w
    }

    /// A version 2 input's outpoint and sequence.
    pub fn v2_input(&mut self, txid: &[u8; 32], vout: u32, sequence: u32) {
        self.pair(IN_PREVIOUS_TXID, &[], txid);
        self.pair(IN_OUTPUT_INDEX, &[], &vout.to_le_bytes());
        self.pair(IN_SEQUENCE, &[], &sequence.to_le_bytes());
    }

    /// A version 2 output's amount and script.
    pub fn v2_output(&mut self, value: u64, script: &[u8]) {
        self.pair(OUT_AMOUNT, &[], &value.to_le_bytes());
        self.pair(OUT_SCRIPT, &[], script);
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
    /// A version 2 PSBT whose field is missing or malformed (BIP370's required ones).
    #[error("a version 2 PSBT's {0} is missing or malformed")]
    V2Field(&'static str),
    /// An input a signer has not finalized (no final scriptSig or witness).
    #[error("input {0} is not finalized: sign and finalize the PSBT first")]
    NotFinalized(usize),
}

/// What a PSBT says of its transaction apart from the inputs' scripts and witnesses: the
/// version, each input's outpoint and sequence, each output, the lock time.
struct Skeleton<'a> {
    version: u32,
    inputs: Vec<(&'a [u8], u32, u32)>,
    outputs: Vec<(u64, &'a [u8])>,
    lock_time: u32,
}

/// The field `kind` (no key data) of `map`.
fn field<'a>(map: &Map<'a>, kind: u8) -> Option<&'a [u8]> {
    map.iter().find(|(k, _)| *k == [kind]).map(|f| f.1)
}

fn u32_of(b: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(b.try_into().ok()?))
}

/// The skeleton of a PSBT of version 0 (its unsigned transaction) or 2 (its fields).
fn skeleton<'a>(maps: &[Map<'a>]) -> Result<Skeleton<'a>, PsbtReadError> {
    let bad = PsbtReadError::V2Field;
    let global = maps.first().ok_or(PsbtReadError::NoTransaction)?;
    if field(global, GLOBAL_VERSION).and_then(u32_of) == Some(2) {
        // The maps of `read_maps` match the counts; any others are refused, not indexed.
        let n_in = (maps.len() - 1)
            .checked_sub(v2_count(global, GLOBAL_OUTPUT_COUNT)?)
            .filter(|&n| Ok(n) == v2_count(global, GLOBAL_INPUT_COUNT))
            .ok_or(bad("count"))?;
        let inputs = maps[1..=n_in]
            .iter()
            .map(|m| {
                let txid = field(m, IN_PREVIOUS_TXID).filter(|t| t.len() == 32);
                let vout = field(m, IN_OUTPUT_INDEX).and_then(u32_of);
                let sequence = field(m, IN_SEQUENCE).map_or(Some(u32::MAX), u32_of);
                Some((txid?, vout?, sequence?))
            })
            .collect::<Option<Vec<_>>>()
            .ok_or(bad("input"))?;
        let outputs = maps[1 + n_in..]
            .iter()
            .map(|m| {
                let value =
                    field(m, OUT_AMOUNT).and_then(|v| Some(u64::from_le_bytes(v.try_into().ok()?)));
                Some((value?, field(m, OUT_SCRIPT)?))
            })
            .collect::<Option<Vec<_>>>()
            .ok_or(bad("output"))?;
        return Ok(Skeleton {
            version: field(global, GLOBAL_TX_VERSION)
                .and_then(u32_of)
                .ok_or(bad("transaction version"))?,
            inputs,
            outputs,
            lock_time: field(global, GLOBAL_FALLBACK_LOCKTIME)
                .map_or(Some(0), u32_of)
                .ok_or(bad("lock time"))?,
        });
    }
    let unsigned = field(global, GLOBAL_UNSIGNED_TX).ok_or(PsbtReadError::NoTransaction)?;
    let tx = Tx::parse(unsigned)?;
    Ok(Skeleton {
        version: tx.version(),
        inputs: tx
            .inputs()
            .map(|i| (&i.prev_txid[..], i.prev_vout, i.sequence))
            .collect(),
        outputs: tx.outputs().map(|o| (o.value, o.script)).collect(),
        lock_time: tx.lock_time(),
    })
}

/// The outputs (value, script) of the transaction of a PSBT's `maps` (version 0 or 2).
pub fn outputs<'a>(maps: &[Map<'a>]) -> Result<Vec<(u64, &'a [u8])>, PsbtReadError> {
    Ok(skeleton(maps)?.outputs)
}

/// A version 2 global map's count `kind` (inputs or outputs).
fn v2_count(global: &Map<'_>, kind: u8) -> Result<usize, PsbtReadError> {
    let value = field(global, kind).ok_or(PsbtReadError::NoTransaction)?;
    let mut r = Reader::new(value);
    let n = r.compact_size("psbt v2 count")?;
    r.finish()?;
    usize::try_from(n).map_err(|_| PsbtReadError::V2Field("count"))
}

/// The network transaction of a finalized PSBT (BIP174's transaction extractor, and
/// BIP370's for version 2): its transaction with each input's final scriptSig and witness
/// in place.
pub fn extract(bytes: &[u8]) -> Result<Vec<u8>, PsbtReadError> {
    let maps = read_maps(bytes)?;
    let tx = skeleton(&maps)?;
    let n = tx.inputs.len();
    let mut finals = Vec::with_capacity(n);
    for i in 0..n {
        let (sig, witness) = (
            field(&maps[1 + i], IN_FINAL_SCRIPTSIG),
            field(&maps[1 + i], IN_FINAL_SCRIPTWITNESS),
        );
        if sig.is_none() && witness.is_none() {
            return Err(PsbtReadError::NotFinalized(i));
        }
        finals.push((sig.unwrap_or_default(), witness));
    }
    let segwit = finals.iter().any(|(_, w)| w.is_some());
    let mut out = Vec::with_capacity(bytes.len());
    out.extend_from_slice(&tx.version.to_le_bytes());
    if segwit {
        out.extend_from_slice(&[0, 1]);
    }
    write_compact_size(&mut out, n as u64);
    for ((txid, vout, sequence), (sig, _)) in tx.inputs.iter().zip(&finals) {
        out.extend_from_slice(txid);
        out.extend_from_slice(&vout.to_le_bytes());
        write_compact_size(&mut out, sig.len() as u64);
        out.extend_from_slice(sig);
        out.extend_from_slice(&sequence.to_le_bytes());
    }
    write_compact_size(&mut out, tx.outputs.len() as u64);
    for (value, script) in &tx.outputs {
        out.extend_from_slice(&value.to_le_bytes());
        write_compact_size(&mut out, script.len() as u64);
        out.extend_from_slice(script);
    }
    if segwit {
        for (_, w) in &finals {
            out.extend_from_slice(w.unwrap_or(&[0]));
        }
    }
    out.extend_from_slice(&tx.lock_time.to_le_bytes());
    // What came out must be one transaction (a witness field that is not a stack fails).
    Tx::parse(&out)?;
    Ok(out)
}

/// Base64 `text` (RFC 4648, padding optional, white space ignored) as bytes, or `None`.
pub fn from_base64(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes().filter(|c| !c.is_ascii_whitespace()) {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// One map of a PSBT read back: its key-value pairs, borrowed, in order.
pub type Map<'a> = Vec<(&'a [u8], &'a [u8])>;

/// A PSBT's maps read back (checked to the last byte): the global map, then one for each
/// input and output of its unsigned transaction (version 0) or of its counts (version 2),
/// which they must match.
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
            expected = if field(&map, GLOBAL_VERSION).and_then(u32_of) == Some(2) {
                // Version 2 (BIP370): the counts are fields (bounded by the bytes left:
                // each map is at least its one terminating byte).
                let n = v2_count(&map, GLOBAL_INPUT_COUNT)?
                    .checked_add(v2_count(&map, GLOBAL_OUTPUT_COUNT)?)
                    .filter(|n| *n <= r.rest().len())
                    .ok_or(PsbtReadError::V2Field("count"))?;
                1 + n
            } else {
                let tx = field(&map, GLOBAL_UNSIGNED_TX).ok_or(PsbtReadError::NoTransaction)?;
                let tx = Tx::parse(tx)?;
                1 + tx.inputs().count() + tx.outputs().count()
            };
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

    #[test]
    fn base64_reads_back() {
        for bytes in [
            &b""[..],
            b"f",
            b"fo",
            b"foo",
            b"foob",
            &[0xff, 0xfe, 0xfd, 0],
        ] {
            assert_eq!(from_base64(&base64(bytes)).as_deref(), Some(bytes));
        }
        assert_eq!(from_base64("Zm9v\nYg=="), Some(b"foob".to_vec()));
        assert_eq!(from_base64("Zm9v!"), None);
    }

    /// BIP174's extractor vector: the finalized PSBT gives the network transaction.
    #[test]
    fn extraction_matches_bip174s_extractor() {
        let finalized = from_base64(FINALIZED).unwrap();
        let tx = extract(&finalized).unwrap();
        let hex: alloc::string::String = tx.iter().map(|b| alloc::format!("{b:02x}")).collect();
        assert_eq!(hex, EXTRACTED);
        // A PSBT not finalized (BIP174's creator vector) is refused, naming the input.
        let mut w = Writer::new(&Tx::parse(&tx).map(|_| unsigned_of(&finalized)).unwrap());
        (0..4).for_each(|_| w.end_map());
        assert_eq!(extract(&w.finish()), Err(PsbtReadError::NotFinalized(0)));
    }

    /// The unsigned transaction of `psbt`.
    fn unsigned_of(psbt: &[u8]) -> Vec<u8> {
        read_maps(psbt).unwrap()[0][0].1.to_vec()
    }

    /// BIP174's finalized PSBT (the input finalizer's vector).
    const FINALIZED: &str = concat!(
        "cHNidP8BAJoCAAAAAljoeiG1ba8MI76OcHBFbDNvfLqlyHV5JPVFiHuyq911AAAAAAD/////g40EJ9DsZQpoqka7CwmK6kQi",
        "wHGyyng1Kgd5WdB86h0BAAAAAP////8CcKrwCAAAAAAWABTYXCtx0AYLCcmIauuBXlCZHdoSTQDh9QUAAAAAFgAUAK6pouXw",
        "+HaliN9VRuh0LR2HAI8AAAAAAAEAuwIAAAABqtc5MQGL0l+ErkALaISL4J23BurCrBgpi6vucatlb4sAAAAASEcwRAIgWPb8",
        "fGoz4bMVSNSByCbAFb0wE1qtQs1neQ2rZtKtJDsCIEoc7SYExnNbY5PltBaR3XiwDwxZQvufdRhW+qk4FX26Af7///8CgPD6",
        "AgAAAAAXqRQPuUY0IWlrgsgzryQceMF9295JNIfQ8gonAQAAABepFCnKdPigj4GZlCgYXJe12FLkBj9hh2UAAAABB9oARzBE",
        "AiB0AYrUGACXuHMyPAAVcgs2hMyBI4kQSOfbzZtVrWecmQIgc9Npt0Dj61Pc76M4I8gHBRTKVafdlUTxV8FnkTJhEYwBSDBF",
        "AiEA9hA4swjcHahlo0hSdG8BV3KTQgjG0kRUOTzZm98iF3cCIAVuZ1pnWm0KArhbFOXikHTYolqbV2C+ooFvZhkQoAbqAUdS",
        "IQKVg785rgpgl0etGZrd1jT6YQhVnWxc05tMIYPxq5bgfyEC2rYf9JoU22p9ArDNH7t4/EsYMStbTlTa5Nui+/71NtdSrgAB",
        "ASAAwusLAAAAABepFLf1+vQOPUClpFmx2zU18rcvqSHohwEHIyIAIIwjUxc3Q7WV37Sge3K6jkLjeX2nTof+fZ10l+OyAokD",
        "AQjaBABHMEQCIGLrelVhB6fHP0WsSrWh3d9vcHX7EnWWmn84Pv/3hLyyAiAMBdu3Rw2/LwhVfdNWxzJcHtMJE+mWzThAlF2x",
        "IijaXwFHMEQCIGX0W6WZi1mif/4ae+0BavHx+Q1Us6qPdFCqX1aiUQO9AiB/ckcDrR7blmgLKEtW1P/LiPf7dZ6rvgiqMPKb",
        "hROD0gFHUiEDCJ3BDHrG21T5EymvYXMz2ziM6tDCMfcjN50bmQMLAtwhAjrdkE89bc9Z3bkGsN7iNSm3/7ntUOXoYVGSaGAi",
        "Hw5zUq4AIgIDqaTDf1mW06ol26xrVwrwZQOUSSlCRgs1R1Ptnuylh3EQ2QxqTwAAAIAAAACABAAAgAAiAgJ/Y5l1fS7/VaE2",
        "rQLGhLGDi2VW5fG2s0KCqUtrUAUQlhDZDGpPAAAAgAAAAIAFAACAAA==",
    );

    /// The transaction BIP174's extractor makes of it.
    const EXTRACTED: &str = concat!(
        "0200000000010258e87a21b56daf0c23be8e7070456c336f7cbaa5c8757924f545887bb2abdd7500000000da00473044",
        "022074018ad4180097b873323c0015720b3684cc8123891048e7dbcd9b55ad679c99022073d369b740e3eb53dcefa338",
        "23c8070514ca55a7dd9544f157c167913261118c01483045022100f61038b308dc1da865a34852746f015772934208c6",
        "d24454393cd99bdf2217770220056e675a675a6d0a02b85b14e5e29074d8a25a9b5760bea2816f661910a006ea014752",
        "21029583bf39ae0a609747ad199addd634fa6108559d6c5cd39b4c2183f1ab96e07f2102dab61ff49a14db6a7d02b0cd",
        "1fbb78fc4b18312b5b4e54dae4dba2fbfef536d752aeffffffff838d0427d0ec650a68aa46bb0b098aea4422c071b2ca",
        "78352a077959d07cea1d01000000232200208c2353173743b595dfb4a07b72ba8e42e3797da74e87fe7d9d7497e3b202",
        "8903ffffffff0270aaf00800000000160014d85c2b71d0060b09c9886aeb815e50991dda124d00e1f505000000001600",
        "1400aea9a2e5f0f876a588df5546e8742d1d87008f000400473044022062eb7a556107a7c73f45ac4ab5a1dddf6f7075",
        "fb1275969a7f383efff784bcb202200c05dbb7470dbf2f08557dd356c7325c1ed30913e996cd3840945db12228da5f01",
        "473044022065f45ba5998b59a27ffe1a7bed016af1f1f90d54b3aa8f7450aa5f56a25103bd02207f724703ad1edb9668",
        "0b284b56d4ffcb88f7fb759eabbe08aa30f29b851383d20147522103089dc10c7ac6db54f91329af617333db388cead0",
        "c231f723379d1b99030b02dc21023add904f3d6dcf59ddb906b0dee23529b7ffb9ed50e5e86151926860221f0e7352ae",
        "00000000",
    );
}
