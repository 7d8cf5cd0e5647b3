//! Whether an input of a transaction a gateway handed over is signed by the key of the coin
//! it spends: the signature hashes of Bitcoin's three schemes (legacy `SignatureHash`,
//! BIP143 for segwit v0, BIP341 for taproot) and the signature checks of the standard
//! single-key outputs the wallet's descriptors make (P2PKH, P2SH-P2WPKH, P2WPKH, P2TR key
//! path), with k256's ECDSA and BIP340 verification.
//!
//! Written here rather than taken from rust-bitcoin: its sighash code comes with its whole
//! transaction model and the C libsecp256k1 (a C toolchain for wasm32, and a second curve
//! beside k256 in the package); this module hashes the borrowed [`Tx`] the wallet already
//! parses, in about 300 lines, checked against BIP143's and BIP341's vectors and Bitcoin
//! Core's `sighash.json`.
//!
//! The rules are Bitcoin Core's for a transaction its mempool accepts (`PolicyScriptChecks`
//! with `STANDARD_SCRIPT_VERIFY_FLAGS`): strict DER (BIP66), a defined hash type
//! (`STRICTENC`), low S (`LOW_S`), compressed keys in segwit (`WITNESS_PUBKEYTYPE`), push-only
//! input scripts of exactly the items the output script takes (`SIGPUSHONLY`, `CLEANSTACK`),
//! no witness on a legacy input and an empty input script on a native segwit one. A
//! transaction that breaks one is in no honest node's mempool. An output of another shape
//! (multisig, a P2SH or P2WSH script, a taproot script path) is [`Check::Unknown`]: the
//! wallet cannot tell, and says so rather than guess.

use k256::elliptic_curve::PrimeField;
use k256::elliptic_curve::group::Group;
use k256::elliptic_curve::ops::Reduce;
use k256::elliptic_curve::point::AffineCoordinates;
use k256::elliptic_curve::scalar::IsHigh;
use k256::elliptic_curve::sec1::ToSec1Point;
use k256::{ProjectivePoint, Scalar};
use lightwire_primitives::{Tx, compact_size};
use sha2::{Digest, Sha256};

use crate::hash::hash160;

/// An output a transaction's input spends: its value and script.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Prevout<'a> {
    /// Its value, in satoshis.
    pub value: u64,
    /// Its output script.
    pub script: &'a [u8],
}

/// The rule a signature check failed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Fault {
    /// The input's script or witness is not the shape its output takes.
    Shape,
    /// The key is not the one the output commits to (or not a key at all).
    Key,
    /// The signature is not strict DER (BIP66).
    Encoding,
    /// The hash type is not a defined one (`STRICTENC`, BIP341).
    HashType,
    /// An ECDSA signature with a high S (`LOW_S`).
    HighS,
    /// The signature does not sign the transaction.
    Signature,
}

impl Fault {
    /// Its name: `shape`, `key`, `encoding`, `hash-type`, `high-s`, `signature`.
    pub const fn name(self) -> &'static str {
        match self {
            Fault::Shape => "shape",
            Fault::Key => "key",
            Fault::Encoding => "encoding",
            Fault::HashType => "hash-type",
            Fault::HighS => "high-s",
            Fault::Signature => "signature",
        }
    }
}

/// What a check of one input found.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Check {
    /// The key of the output it spends signed it.
    Signed,
    /// It is not signed so (no node's mempool would hold it).
    NotSigned(Fault),
    /// The output's kind cannot be checked here, or (taproot) another input's output is
    /// not known.
    Unknown,
}

/// Input `index` of `tx`, against `spent`: the outputs its inputs spend, where known
/// (one per input; BIP341 signs every input's, so a taproot input is [`Check::Unknown`]
/// unless it signs with `ANYONECANPAY` or every output is known).
pub fn check_input(tx: &Tx<'_>, index: usize, spent: &[Option<Prevout<'_>>]) -> Check {
    let Some(input) = tx.inputs().nth(index) else {
        return Check::NotSigned(Fault::Shape);
    };
    let Some(Some(prev)) = spent.get(index) else {
        return Check::Unknown;
    };
    let s = prev.script;
    let items = || input.witness.iter();
    match s {
        // P2WPKH: an empty input script; the witness is a signature and its key.
        [0x00, 0x14, program @ ..] if program.len() == 20 => {
            if !input.script_sig.is_empty() {
                return Check::NotSigned(Fault::Shape);
            }
            v0_keyhash(tx, index, prev.value, program, items())
        }
        // P2SH-P2WPKH: the input script pushes exactly the P2WPKH program.
        [0xa9, 0x14, hash @ .., 0x87] if hash.len() == 20 => match input.script_sig {
            [22, redeem @ ..] if redeem.len() == 22 && redeem[..2] == [0x00, 0x14] => {
                if hash160(redeem) != hash {
                    return Check::NotSigned(Fault::Key);
                }
                v0_keyhash(tx, index, prev.value, &redeem[2..], items())
            }
            _ => Check::Unknown,
        },
        // P2PKH: no witness; the input script pushes a signature and its key.
        [0x76, 0xa9, 0x14, hash @ .., 0x88, 0xac] if hash.len() == 20 => {
            if !input.witness.is_empty() {
                return Check::NotSigned(Fault::Shape);
            }
            let Some((sig, rest)) = push(input.script_sig) else {
                return Check::NotSigned(Fault::Shape);
            };
            let Some((key, [])) = push(rest) else {
                return Check::NotSigned(Fault::Shape);
            };
            let strict = matches!((key.len(), key.first()), (33, Some(2 | 3)) | (65, Some(4)));
            if !strict || hash160(key) != hash {
                return Check::NotSigned(Fault::Key);
            }
            ecdsa(sig, key, |hash_type| legacy(tx, index, s, hash_type))
        }
        // P2TR: the key path (one signature, and an annex perhaps); a script path is not
        // checked here.
        [0x51, 0x20, key @ ..] if key.len() == 32 => {
            if !input.script_sig.is_empty() {
                return Check::NotSigned(Fault::Shape);
            }
            let n = input.witness.len();
            let annex = items()
                .last()
                .filter(|a| n >= 2 && a.first() == Some(&0x50));
            let Some(sig) = items()
                .next()
                .filter(|_| n - usize::from(annex.is_some()) == 1)
            else {
                return if n == 0 {
                    Check::NotSigned(Fault::Shape)
                } else {
                    Check::Unknown
                };
            };
            schnorr(tx, index, spent, key, sig, annex)
        }
        _ => Check::Unknown,
    }
}

/// One direct push (`OP_PUSHBYTES_1`..`_75`, the minimal encoding of a signature or a
/// key) at the front of `script`, and what follows.
fn push(script: &[u8]) -> Option<(&[u8], &[u8])> {
    let (&n, rest) = script.split_first()?;
    let n = usize::from(n);
    (1..=75).contains(&n).then_some(())?;
    (rest.len() >= n).then(|| rest.split_at(n))
}

/// A segwit v0 key-hash spend: the witness is exactly a signature and a compressed key
/// hashing to `program`; BIP143 signs it with the P2PKH script of that hash.
fn v0_keyhash<'a>(
    tx: &Tx<'_>,
    index: usize,
    value: u64,
    program: &[u8],
    mut witness: impl Iterator<Item = &'a [u8]>,
) -> Check {
    let (Some(sig), Some(key), None) = (witness.next(), witness.next(), witness.next()) else {
        return Check::NotSigned(Fault::Shape);
    };
    if key.len() != 33 || !matches!(key[0], 2 | 3) || hash160(key) != program {
        return Check::NotSigned(Fault::Key);
    }
    let mut code = [0u8; 25];
    code[..3].copy_from_slice(&[0x76, 0xa9, 0x14]);
    code[3..23].copy_from_slice(program);
    code[23..].copy_from_slice(&[0x88, 0xac]);
    ecdsa(sig, key, |hash_type| {
        segwit_v0(tx, index, &code, value, hash_type)
    })
}

/// An ECDSA signature with its hash type byte, by `key`, of the hash `sighash` gives for
/// that hash type.
fn ecdsa(sig: &[u8], key: &[u8], sighash: impl FnOnce(u32) -> [u8; 32]) -> Check {
    let Some((&hash_type, der)) = sig.split_last() else {
        return Check::NotSigned(Fault::Encoding);
    };
    if !strict_der(sig) {
        return Check::NotSigned(Fault::Encoding);
    }
    if !matches!(hash_type & !0x80, 1..=3) {
        return Check::NotSigned(Fault::HashType);
    }
    let Some((r, s)) = from_der(der) else {
        return Check::NotSigned(Fault::Signature);
    };
    if bool::from(s.is_high()) {
        return Check::NotSigned(Fault::HighS);
    }
    let Ok(key) = k256::PublicKey::from_sec1_bytes(key) else {
        return Check::NotSigned(Fault::Key);
    };
    // SEC1 4.1.4: R = (z/s)G + (r/s)Q; signed when R's x, mod n, is r.
    let z = <Scalar as Reduce<k256::FieldBytes>>::reduce(&sighash(u32::from(hash_type)).into());
    let Some(w) = Option::<Scalar>::from(s.invert()) else {
        return Check::NotSigned(Fault::Signature);
    };
    let point = ProjectivePoint::mul_by_generator(&(z * w)) + key.to_projective() * (r * w);
    if bool::from(point.is_identity()) {
        return Check::NotSigned(Fault::Signature);
    }
    let x = point.to_affine().x();
    if <Scalar as Reduce<k256::FieldBytes>>::reduce(&x) == r {
        Check::Signed
    } else {
        Check::NotSigned(Fault::Signature)
    }
}

/// BIP66's strict DER of `sig` (with its hash type byte): Bitcoin Core's
/// `IsValidSignatureEncoding`.
fn strict_der(sig: &[u8]) -> bool {
    let len = sig.len();
    if !(9..=73).contains(&len) || sig[0] != 0x30 || usize::from(sig[1]) != len - 3 {
        return false;
    }
    let len_r = usize::from(sig[3]);
    if 5 + len_r >= len {
        return false;
    }
    let len_s = usize::from(sig[5 + len_r]);
    if len_r + len_s + 7 != len {
        return false;
    }
    let minimal = |at: usize, n: usize| {
        n != 0 && sig[at] & 0x80 == 0 && !(n > 1 && sig[at] == 0 && sig[at + 1] & 0x80 == 0)
    };
    sig[2] == 0x02 && minimal(4, len_r) && sig[len_r + 4] == 0x02 && minimal(len_r + 6, len_s)
}

/// R and S of a strict DER signature (without its hash type), as scalars; `None` if
/// either is zero or not below the group order (it then signs nothing).
fn from_der(der: &[u8]) -> Option<(Scalar, Scalar)> {
    let len_r = usize::from(der[3]);
    let r = &der[4..4 + len_r];
    let s = &der[6 + len_r..];
    let scalar = |v: &[u8]| -> Option<[u8; 32]> {
        let v = &v[v.iter().take_while(|&&b| b == 0).count()..];
        let mut out = [0u8; 32];
        out.get_mut(32usize.checked_sub(v.len())?..)?
            .copy_from_slice(v);
        Some(out)
    };
    let nonzero = |b: [u8; 32]| {
        Option::<Scalar>::from(Scalar::from_repr(b.into())).filter(|x| !bool::from(x.is_zero()))
    };
    Some((nonzero(scalar(r)?)?, nonzero(scalar(s)?)?))
}

const SIGHASH_NONE: u32 = 2;
const SIGHASH_SINGLE: u32 = 3;
const ANYONECANPAY: u32 = 0x80;

/// `n` as a CompactSize, into `h`.
fn count(h: &mut Sha256, n: usize) {
    let (bytes, len) = compact_size(n as u64);
    h.update(&bytes[..len]);
}

/// `bytes` with their CompactSize length before them, into `h`.
fn var_bytes(h: &mut Sha256, bytes: &[u8]) {
    count(h, bytes.len());
    h.update(bytes);
}

/// Double SHA-256 of what `hasher` was given.
fn double(hasher: Sha256) -> [u8; 32] {
    Sha256::digest(hasher.finalize()).into()
}

/// Where the opcode at `at` of `script` and its data end, as Bitcoin Core's `GetScriptOp`
/// reads it; a push cut short is `Err` with where the reading stopped (past the opcode and
/// whatever length bytes were there).
fn next_op(script: &[u8], at: usize) -> Result<usize, usize> {
    let op = script[at];
    let mut pc = at + 1;
    let len_bytes = match op {
        0x4c => 1,
        0x4d => 2,
        0x4e => 4,
        _ => 0,
    };
    let size = match op {
        0..=0x4b => usize::from(op),
        0x4c..=0x4e => {
            let Some(b) = script.get(pc..pc + len_bytes) else {
                return Err(pc);
            };
            pc += len_bytes;
            b.iter().rev().fold(0usize, |n, &x| n << 8 | usize::from(x))
        }
        _ => 0,
    };
    if script.len() - pc < size {
        return Err(pc);
    }
    Ok(pc + size)
}

/// `script` as Bitcoin Core's legacy signature hash serializes a script code
/// (`CTransactionSignatureSerializer::SerializeScriptCode`): its length less one per
/// `OP_CODESEPARATOR`, then the script without them, up to where a push cut short stops
/// the walk.
fn script_code(script: &[u8], h: &mut Sha256) {
    let walk = |emit: &mut dyn FnMut(&[u8])| {
        let (mut at, mut from) = (0usize, 0usize);
        while at < script.len() {
            match next_op(script, at) {
                Ok(next) => {
                    if script[at] == 0xab {
                        emit(&script[from..at]);
                        from = next;
                    }
                    at = next;
                }
                Err(stop) => {
                    at = stop;
                    break;
                }
            }
        }
        emit(&script[from..at]);
    };
    let mut separators = 0usize;
    walk(&mut |_| separators += 1);
    count(h, script.len() + 1 - separators);
    walk(&mut |piece| h.update(piece));
}

/// Bitcoin Core's legacy `SignatureHash` of input `index` of `tx` with script code `code`
/// and the whole 32-bit hash type (only its low byte is ever in a signature).
pub fn legacy(tx: &Tx<'_>, index: usize, code: &[u8], hash_type: u32) -> [u8; 32] {
    let base = hash_type & 0x1f;
    let outputs = tx.outputs().count();
    if base == SIGHASH_SINGLE && index >= outputs {
        // The historical quirk: the hash of "one" (little-endian), signed as it is.
        let mut one = [0u8; 32];
        one[0] = 1;
        return one;
    }
    let acp = hash_type & ANYONECANPAY != 0;
    let mut h = Sha256::new();
    h.update(tx.version().to_le_bytes());
    count(&mut h, if acp { 1 } else { tx.inputs().count() });
    for (i, input) in tx.inputs().enumerate() {
        if acp && i != index {
            continue;
        }
        h.update(input.prev_txid);
        h.update(input.prev_vout.to_le_bytes());
        if i == index {
            script_code(code, &mut h);
        } else {
            h.update([0]);
        }
        let zeroed = i != index && (base == SIGHASH_NONE || base == SIGHASH_SINGLE);
        h.update(if zeroed { 0 } else { input.sequence }.to_le_bytes());
    }
    match base {
        SIGHASH_NONE => count(&mut h, 0),
        SIGHASH_SINGLE => {
            count(&mut h, index + 1);
            for (i, o) in tx.outputs().take(index + 1).enumerate() {
                if i == index {
                    output(&mut h, o.value, o.script);
                } else {
                    output(&mut h, u64::MAX, &[]);
                }
            }
        }
        _ => {
            count(&mut h, outputs);
            for o in tx.outputs() {
                output(&mut h, o.value, o.script);
            }
        }
    }
    h.update(tx.lock_time().to_le_bytes());
    h.update(hash_type.to_le_bytes());
    double(h)
}

/// An output as serialized: value, script length, script.
fn output(h: &mut Sha256, value: u64, script: &[u8]) {
    h.update(value.to_le_bytes());
    var_bytes(h, script);
}

/// BIP143's signature hash of input `index` of `tx` spending `value` with script code
/// `code`.
pub fn segwit_v0(tx: &Tx<'_>, index: usize, code: &[u8], value: u64, hash_type: u32) -> [u8; 32] {
    let base = hash_type & 0x1f;
    let acp = hash_type & ANYONECANPAY != 0;
    let mut prevouts = [0u8; 32];
    let mut sequences = [0u8; 32];
    if !acp {
        let mut h = Sha256::new();
        for i in tx.inputs() {
            h.update(i.prev_txid);
            h.update(i.prev_vout.to_le_bytes());
        }
        prevouts = double(h);
        if base != SIGHASH_SINGLE && base != SIGHASH_NONE {
            let mut h = Sha256::new();
            tx.inputs().for_each(|i| h.update(i.sequence.to_le_bytes()));
            sequences = double(h);
        }
    }
    let mut outputs = [0u8; 32];
    if base != SIGHASH_SINGLE && base != SIGHASH_NONE {
        let mut h = Sha256::new();
        tx.outputs().for_each(|o| output(&mut h, o.value, o.script));
        outputs = double(h);
    } else if let Some(o) = tx.outputs().nth(index).filter(|_| base == SIGHASH_SINGLE) {
        let mut h = Sha256::new();
        output(&mut h, o.value, o.script);
        outputs = double(h);
    }
    let Some(input) = tx.inputs().nth(index) else {
        return [0; 32];
    };
    let mut h = Sha256::new();
    h.update(tx.version().to_le_bytes());
    h.update(prevouts);
    h.update(sequences);
    h.update(input.prev_txid);
    h.update(input.prev_vout.to_le_bytes());
    var_bytes(&mut h, code);
    h.update(value.to_le_bytes());
    h.update(input.sequence.to_le_bytes());
    h.update(outputs);
    h.update(tx.lock_time().to_le_bytes());
    h.update(hash_type.to_le_bytes());
    double(h)
}

/// BIP341's signature hash of input `index` of `tx` for a key path spend (`ext_flag` 0),
/// with `annex` if there is one; `None` if a spent output it signs is not known, or the
/// hash type is not defined (or `SIGHASH_SINGLE` without its output).
pub fn taproot(
    tx: &Tx<'_>,
    index: usize,
    spent: &[Option<Prevout<'_>>],
    hash_type: u8,
    annex: Option<&[u8]>,
) -> Option<[u8; 32]> {
    let acp = hash_type & 0x80 != 0;
    let out = u32::from(hash_type & 3);
    if !matches!(hash_type, 0..=3 | 0x81..=0x83) {
        return None;
    }
    // hash_TapSighash(0x00 || SigMsg): the tagged hash's prefix, then the epoch.
    let tag = Sha256::digest(b"TapSighash");
    let mut m = Sha256::new();
    m.update(tag);
    m.update(tag);
    m.update([0u8]);
    m.update([hash_type]);
    m.update(tx.version().to_le_bytes());
    m.update(tx.lock_time().to_le_bytes());
    if !acp {
        if spent.len() != tx.inputs().count() {
            return None;
        }
        let (mut p, mut a, mut s, mut q) =
            (Sha256::new(), Sha256::new(), Sha256::new(), Sha256::new());
        for (i, prev) in tx.inputs().zip(spent) {
            let prev = prev.as_ref()?;
            p.update(i.prev_txid);
            p.update(i.prev_vout.to_le_bytes());
            a.update(prev.value.to_le_bytes());
            var_bytes(&mut s, prev.script);
            q.update(i.sequence.to_le_bytes());
        }
        m.update(p.finalize());
        m.update(a.finalize());
        m.update(s.finalize());
        m.update(q.finalize());
    }
    if out != SIGHASH_NONE && out != SIGHASH_SINGLE {
        let mut h = Sha256::new();
        tx.outputs().for_each(|o| output(&mut h, o.value, o.script));
        m.update(h.finalize());
    }
    m.update([u8::from(annex.is_some())]);
    if acp {
        let input = tx.inputs().nth(index)?;
        let prev = spent.get(index)?.as_ref()?;
        m.update(input.prev_txid);
        m.update(input.prev_vout.to_le_bytes());
        m.update(prev.value.to_le_bytes());
        var_bytes(&mut m, prev.script);
        m.update(input.sequence.to_le_bytes());
    } else {
        m.update((index as u32).to_le_bytes());
    }
    if let Some(annex) = annex {
        let mut h = Sha256::new();
        var_bytes(&mut h, annex);
        m.update(h.finalize());
    }
    if out == SIGHASH_SINGLE {
        let o = tx.outputs().nth(index)?;
        let mut h = Sha256::new();
        output(&mut h, o.value, o.script);
        m.update(h.finalize());
    }
    Some(m.finalize().into())
}

/// A BIP340 signature `sig` (64 bytes, or 65 with a hash type) by x-only key `key` of
/// input `index`'s BIP341 hash.
fn schnorr(
    tx: &Tx<'_>,
    index: usize,
    spent: &[Option<Prevout<'_>>],
    key: &[u8],
    sig: &[u8],
    annex: Option<&[u8]>,
) -> Check {
    let (sig, hash_type) = match sig.len() {
        64 => (sig, 0),
        65 if sig[64] != 0 => (&sig[..64], sig[64]),
        _ => return Check::NotSigned(Fault::HashType),
    };
    if !matches!(hash_type, 0..=3 | 0x81..=0x83) {
        return Check::NotSigned(Fault::HashType);
    }
    if hash_type & 3 == SIGHASH_SINGLE as u8 && index >= tx.outputs().count() {
        return Check::NotSigned(Fault::HashType);
    }
    let Some(message) = taproot(tx, index, spent, hash_type, annex) else {
        return Check::Unknown;
    };
    // BIP340's verification: P lifted to even y; r below the field's prime, s below the
    // group order; e = hash(r || P || m); R = sG - eP is not infinity, has even y, and
    // its x is r.
    let mut even = [2u8; 33];
    even[1..].copy_from_slice(key);
    let Ok(p) = k256::PublicKey::from_sec1_bytes(&even) else {
        return Check::NotSigned(Fault::Key);
    };
    let (r, s) = sig.split_at(32);
    let Some(s) = <[u8; 32]>::try_from(s)
        .ok()
        .and_then(|s| Option::<Scalar>::from(Scalar::from_repr(s.into())))
    else {
        return Check::NotSigned(Fault::Signature);
    };
    if r >= &FIELD_PRIME[..] {
        return Check::NotSigned(Fault::Signature);
    }
    let tag = Sha256::digest(b"BIP0340/challenge");
    let e: [u8; 32] = Sha256::new()
        .chain_update(tag)
        .chain_update(tag)
        .chain_update(r)
        .chain_update(key)
        .chain_update(message)
        .finalize()
        .into();
    let e = <Scalar as Reduce<k256::FieldBytes>>::reduce(&e.into());
    let point = ProjectivePoint::mul_by_generator(&s) + p.to_projective() * (-e);
    if bool::from(point.is_identity()) {
        return Check::NotSigned(Fault::Signature);
    }
    let q = point.to_affine().to_compressed_point();
    if q[0] == 2 && q[1..] == *r {
        Check::Signed
    } else {
        Check::NotSigned(Fault::Signature)
    }
}

/// secp256k1's field prime, big-endian: a BIP340 `r` must be below it.
const FIELD_PRIME: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 0xff, 0xff, 0xfc, 0x2f,
];

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use alloc::vec;
    use alloc::vec::Vec;

    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        ::hex::decode(s).unwrap()
    }

    /// BIP143's "Native P2WPKH" example, signed: input 0 spends a P2PK output (6.25 BTC),
    /// input 1 a P2WPKH output (6 BTC).
    const BIP143_NATIVE: &str = "01000000000102fff7f7881a8099afa6940d42d1e7f6362bec38171ea3edf433541db4e4ad969f00000000494830450221008b9d1dc26ba6a9cb62127b02742fa9d754cd3bebf337f7a55d114c8e5cdd30be022040529b194ba3f9281a99f2b1c0a19c0489bc22ede944ccf4ecbab4cc618ef3ed01eeffffffef51e1b804cc89d182d279655c3aa89e815b1b309fe287d9b2b55d57b90ec68a0100000000ffffffff02202cb206000000001976a9148280b37df378db99f66f85c95a783a76ac7a6d5988ac9093510d000000001976a9143bde42dbee7e4dbe6a21b2d50ce2f0167faa815988ac000247304402203609e17b84f6a7d30c80bfa610b5b4542f32a8a0d5447a12fb1366d7f01cc44a0220573a954c4518331561406f90300e8f3358f51928d43c212a8caed02de67eebee0121025476c2e83188368da1ff3e292e7acafcdb3566bb0ad253f62fc70f07aeee635711000000";
    /// BIP143's "P2SH-P2WPKH" example, signed (10 BTC).
    const BIP143_NESTED: &str = "01000000000101db6b1b20aa0fd7b23880be2ecbd4a98130974cf4748fb66092ac4d3ceb1a5477010000001716001479091972186c449eb1ded22b78e40d009bdf0089feffffff02b8b4eb0b000000001976a914a457b684d7f0d539a46a45bbc043f35b59d0d96388ac0008af2f000000001976a914fd270b1ee6abcaea97fea7ad0402e8bd8ad6d77c88ac02473044022047ac8e878352d3ebbde1c94ce3a10d057c24175747116f8288e5d794d12d482f0220217f36a485cae903c713331d877c1f64677e3622ad4010726870540656fe9dcb012103ad1d8e89212f0b92c74d23bb710c00662ad1470198ac48c43f7d6f93a2a2687392040000";

    #[test]
    fn bip143s_examples_hash_and_check() {
        let raw = hex(BIP143_NATIVE);
        let tx = Tx::parse(&raw).unwrap();
        let p2pk = hex("2103c9f4836b9a4f77fc0d81f7bcb01b7f1b35916864b9476c241ce9fc198bd25432ac");
        let p2wpkh = hex("00141d0f172a0ecb48aee1be1f2687d2963ae33f71a1");
        let mut code = hex("76a914");
        code.extend_from_slice(&p2wpkh[2..]);
        code.extend_from_slice(&[0x88, 0xac]);
        assert_eq!(
            segwit_v0(&tx, 1, &code, 600_000_000, 1),
            hex("c37af31116d1b27caf68aae9e3ac82f1477929014d5b917657d0eb49478cb670")[..]
        );
        let spent = [
            Some(Prevout {
                value: 625_000_000,
                script: &p2pk,
            }),
            Some(Prevout {
                value: 600_000_000,
                script: &p2wpkh,
            }),
        ];
        assert_eq!(check_input(&tx, 1, &spent), Check::Signed);
        // A P2PK output is not a kind checked here; its legacy hash is, by its signature.
        assert_eq!(check_input(&tx, 0, &spent), Check::Unknown);
        let input = tx.inputs().next().unwrap();
        let (sig, _) = push(input.script_sig).unwrap();
        assert_eq!(
            ecdsa(sig, &p2pk[1..34], |t| legacy(&tx, 0, &p2pk, t)),
            Check::Signed
        );
        // The value signed is part of the hash: another value, another hash.
        let less = [
            spent[0],
            Some(Prevout {
                value: 599_999_999,
                script: &p2wpkh,
            }),
        ];
        assert_eq!(
            check_input(&tx, 1, &less),
            Check::NotSigned(Fault::Signature)
        );

        let raw = hex(BIP143_NESTED);
        let tx = Tx::parse(&raw).unwrap();
        let p2sh = hex("a9144733f37cf4db86fbc2efed2500b4f4e49f31202387");
        let spent = [Some(Prevout {
            value: 1_000_000_000,
            script: &p2sh,
        })];
        assert_eq!(check_input(&tx, 0, &spent), Check::Signed);
        let mut code = hex("76a914");
        code.extend_from_slice(&hex("79091972186c449eb1ded22b78e40d009bdf0089"));
        code.extend_from_slice(&[0x88, 0xac]);
        assert_eq!(
            segwit_v0(&tx, 0, &code, 1_000_000_000, 1),
            hex("64f3b0f4dd2bb3aa1ce8566d220cc74dda9df97d8490cc81d89d735c92e59fb6")[..]
        );
    }

    /// Bitcoin Core's src/test/data/sighash.json, five entries: `[raw transaction, script,
    /// input, hash type, hash as displayed (reversed)]`, covering `SIGHASH_NONE` and
    /// `SIGHASH_SINGLE`, `ANYONECANPAY`, hash types outside the defined ones (the low five
    /// bits decide) and scripts with `OP_CODESEPARATOR`.
    const CORE_SIGHASH: [(&str, &str, usize, i32, &str); 5] = [
        (
            "55ac8c58018ee52bb68140928ef51797252451876c3a1e13f9680b0dadbad53a005426bf920300000006006552655200130c0ad202362f01ebfe3702000800abab6a526553633d5a6de6b433000002515100000000",
            "5100acacab536a00",
            0,
            -1752709726,
            "1f12d097f09738929cb0edbe4cce42f29797bff36395083415ab4e862284e123",
        ),
        (
            "13b8956c0204f0ad11a36be5070de7e9400564bebf39fcd49e624b0d58d4323d2d22275f2c02000000066352655200510a3c0311ceee828dcf114b40fd6b0b80b6adde650824d49f14f4ded3bb83eb8f96408b790300000003655165ffffffff02c31445d21bc700000079a6a4eb568e000004006aac5100000000",
            "535100516351",
            0,
            193516099,
            "8f678a52a04e3b515248964fc2112a0100e644f0f3876996e56d434f689e8ce1",
        ),
        (
            "4737215002d6ac898bde5f2055b5f642a9d95251aa9bd79a757058b5fc429c0c9ae2b1f2250100000009ab6a00ac00abab656affffffff176c3a90b0495f136312fafc161bff5bb32fa61981303f9d15e683798e8e219e0300000001ab5b0be2bb02b92d2229714b01000500006353ab294057f6cbcc020002ac6500000000",
            "53",
            0,
            434913772,
            "e154b93312a31ae30d7629517083866bb3dd9f2b8c2aeca1fdcc6d9ef28b2deb",
        ),
        (
            "c9d2af7c014379565ef74fe6cbb17ff5a42ba57c64329b85f90ea6bfc000a94fa5cc414be502000000076a0053ab536551ffffffff040b4effecb1d70100030065ab54986fe2c36d01000163b5890ec22d40000008636aac65515200ac23749cc4abe100000453ac005200000000",
            "acab63ab635353ab6a",
            0,
            -783683045,
            "196c87b447f8666af448a62f086deb0dbfaf3284bdc0fbfc973aa998e6b13876",
        ),
        (
            "c2a8db94017709eed353ca42aa3b78a0c4a3c2cc4c52287b784fcf508a4df8876ca9ab156903000000025151853c5140029ac92ccbb795030007000052526553520d4c9ee0dcd900000665516565006a00acb7f7",
            "526a63",
            0,
            -1402165248,
            "7f682def9a0f014c9919807c5177e033a478493f753ce763dadc7f097e49fb8b",
        ),
    ];

    #[test]
    fn legacy_hashes_match_bitcoin_cores_vectors() {
        for (raw, script, index, hash_type, expected) in CORE_SIGHASH {
            let raw = hex(raw);
            let tx = Tx::parse(&raw).unwrap();
            let mut got = legacy(&tx, index, &hex(script), hash_type as u32);
            got.reverse();
            assert_eq!(::hex::encode(got), expected, "{script}");
        }
        // SIGHASH_SINGLE past the last output: the hash of one.
        let raw = hex(CORE_SIGHASH[0].0);
        let tx = Tx::parse(&raw).unwrap();
        let mut one = [0u8; 32];
        one[0] = 1;
        assert_eq!(legacy(&tx, 5, &[], 3), one);
    }

    const TX: &str = "02000000097de20cbff686da83a54981d2b9bab3586f4ca7e48f57f5b55963115f3b334e9c010000000000000000d7b7cab57b1393ace2d064f4d4a2cb8af6def61273e127517d44759b6dafdd990000000000fffffffff8e1f583384333689228c5d28eac13366be082dc57441760d957275419a418420000000000fffffffff0689180aa63b30cb162a73c6d2a38b7eeda2a83ece74310fda0843ad604853b0100000000feffffffaa5202bdf6d8ccd2ee0f0202afbbb7461d9264a25e5bfd3c5a52ee1239e0ba6c0000000000feffffff956149bdc66faa968eb2be2d2faa29718acbfe3941215893a2a3446d32acd050000000000000000000e664b9773b88c09c32cb70a2a3e4da0ced63b7ba3b22f848531bbb1d5d5f4c94010000000000000000e9aa6b8e6c9de67619e6a3924ae25696bb7b694bb677a632a74ef7eadfd4eabf0000000000ffffffffa778eb6a263dc090464cd125c466b5a99667720b1c110468831d058aa1b82af10100000000ffffffff0200ca9a3b000000001976a91406afd46bcdfd22ef94ac122aa11f241244a37ecc88ac807840cb0000000020ac9a87f5594be208f8532db38cff670c450ed2fea8fcdefcc9a663f78bab962b0065cd1d";
    const SPENT: [(u64, &str); 9] = [
        (
            420000000,
            "512053a1f6e454df1aa2776a2814a721372d6258050de330b3c6d10ee8f4e0dda343",
        ),
        (
            462000000,
            "5120147c9c57132f6e7ecddba9800bb0c4449251c92a1e60371ee77557b6620f3ea3",
        ),
        (
            294000000,
            "76a914751e76e8199196d454941c45d1b3a323f1433bd688ac",
        ),
        (
            504000000,
            "5120e4d810fd50586274face62b8a807eb9719cef49c04177cc6b76a9a4251d5450e",
        ),
        (
            630000000,
            "512091b64d5324723a985170e4dc5a0f84c041804f2cd12660fa5dec09fc21783605",
        ),
        (378000000, "00147dd65592d0ab2fe0d0257d571abf032cd9db93dc"),
        (
            672000000,
            "512075169f4001aa68f15bbed28b218df1d0a62cbbcf1188c6665110c293c907b831",
        ),
        (
            546000000,
            "5120712447206d7a5238acc7ff53fbe94a3b64539ad291c7cdbc490b7577e4b17df5",
        ),
        (
            588000000,
            "512077e30a5522dd9f894c3f8b8bd4c4b2cf82ca7da8a3ea6a239655c39c050ab220",
        ),
    ];
    const INPUTS: [(usize, u8, &str, &str); 7] = [
        (
            0,
            3,
            "2514a6272f85cfa0f45eb907fcb0d121b808ed37c6ea160a5a9046ed5526d555",
            "ed7c1647cb97379e76892be0cacff57ec4a7102aa24296ca39af7541246d8ff14d38958d4cc1e2e478e4d4a764bbfd835b16d4e314b72937b29833060b87276c03",
        ),
        (
            1,
            131,
            "325a644af47e8a5a2591cda0ab0723978537318f10e6a63d4eed783b96a71a4d",
            "052aedffc554b41f52b521071793a6b88d6dbca9dba94cf34c83696de0c1ec35ca9c5ed4ab28059bd606a4f3a657eec0bb96661d42921b5f50a95ad33675b54f83",
        ),
        (
            3,
            1,
            "bf013ea93474aa67815b1b6cc441d23b64fa310911d991e713cd34c7f5d46669",
            "ff45f742a876139946a149ab4d9185574b98dc919d2eb6754f8abaa59d18b025637a3aa043b91817739554f4ed2026cf8022dbd83e351ce1fabc272841d2510a01",
        ),
        (
            4,
            0,
            "4f900a0bae3f1446fd48490c2958b5a023228f01661cda3496a11da502a7f7ef",
            "b4010dd48a617db09926f729e79c33ae0b4e94b79f04a1ae93ede6315eb3669de185a17d2b0ac9ee09fd4c64b678a0b61a0a86fa888a273c8511be83bfd6810f",
        ),
        (
            6,
            2,
            "15f25c298eb5cdc7eb1d638dd2d45c97c4c59dcaec6679cfc16ad84f30876b85",
            "a3785919a2ce3c4ce26f298c3d51619bc474ae24014bcdd31328cd8cfbab2eff3395fa0a16fe5f486d12f22a9cedded5ae74feb4bbe5351346508c5405bcfee002",
        ),
        (
            7,
            130,
            "cd292de50313804dabe4685e83f923d2969577191a3e1d2882220dca88cbeb10",
            "ea0c6ba90763c2d3a296ad82ba45881abb4f426b3f87af162dd24d5109edc1cdd11915095ba47c3a9963dc1e6c432939872bc49212fe34c632cd3ab9fed429c482",
        ),
        (
            8,
            129,
            "cccb739eca6c13a8a89e6e5cd317ffe55669bbda23f2fd37b0f18755e008edd2",
            "bbc9584a11074e83bc8c6759ec55401f0ae7b03ef290c3139814f545b58a9f8127258000874f44bc46db7646322107d4d86aec8e73b8719a61fff761d75b5dd981",
        ),
    ];

    #[test]
    fn bip341s_key_path_vectors_hash_and_check() {
        let raw = hex(TX);
        let tx = Tx::parse(&raw).unwrap();
        let scripts: Vec<Vec<u8>> = SPENT.iter().map(|(_, s)| hex(s)).collect();
        let spent: Vec<Option<Prevout<'_>>> = SPENT
            .iter()
            .zip(&scripts)
            .map(|((value, _), script)| {
                Some(Prevout {
                    value: *value,
                    script,
                })
            })
            .collect();
        for (index, hash_type, sighash, sig) in INPUTS {
            assert_eq!(
                taproot(&tx, index, &spent, hash_type, None).map(::hex::encode),
                Some(sighash.into()),
                "input {index}"
            );
            let key = &scripts[index][2..];
            let sig = hex(sig);
            assert_eq!(schnorr(&tx, index, &spent, key, &sig, None), Check::Signed);
            // Signed under another hash type, or with an annex: not signed.
            let mut other = sig.clone();
            if other.len() == 64 {
                other.push(1);
            } else {
                other[64] ^= 0x80;
            }
            assert_ne!(
                schnorr(&tx, index, &spent, key, &other, None),
                Check::Signed
            );
            assert_eq!(
                schnorr(&tx, index, &spent, key, &sig, Some(&[0x50])),
                Check::NotSigned(Fault::Signature)
            );
            // Another input's output unknown: only ANYONECANPAY signs without it.
            let mut partial = spent.clone();
            partial[(index + 1) % 9] = None;
            let unknown = schnorr(&tx, index, &partial, key, &sig, None);
            if hash_type & 0x80 != 0 {
                assert_eq!(unknown, Check::Signed);
            } else {
                assert_eq!(unknown, Check::Unknown);
            }
        }
        // Hash types that are not defined.
        let (index, _, _, sig) = INPUTS[3];
        let mut sig = hex(sig);
        let key = &scripts[index][2..];
        for t in [0u8, 4, 0x80, 0x84] {
            sig.truncate(64);
            sig.push(t);
            assert_eq!(
                schnorr(&tx, index, &spent, key, &sig, None),
                Check::NotSigned(Fault::HashType)
            );
        }
    }

    /// A transaction with one input spending `prev` and one output, the input's script
    /// and witness as given.
    fn one_input(script_sig: &[u8], witness: &[&[u8]]) -> Vec<u8> {
        let mut t = vec![2, 0, 0, 0];
        if !witness.is_empty() {
            t.extend_from_slice(&[0, 1]);
        }
        t.push(1);
        t.extend_from_slice(&[7; 32]);
        t.extend_from_slice(&[1, 0, 0, 0]);
        t.push(script_sig.len() as u8);
        t.extend_from_slice(script_sig);
        t.extend_from_slice(&[0xfd, 0xff, 0xff, 0xff, 1]);
        t.extend_from_slice(&90_000u64.to_le_bytes());
        t.extend_from_slice(&[1, 0x51]);
        if !witness.is_empty() {
            t.push(witness.len() as u8);
            for w in witness {
                t.push(w.len() as u8);
                t.extend_from_slice(w);
            }
        }
        t.extend_from_slice(&[0; 4]);
        t
    }

    /// Sign `hash` with `key`, DER and hash type; the signature with S replaced by
    /// its negation (high) too.
    fn sign(key: &k256::ecdsa::SigningKey, hash: &[u8; 32], hash_type: u8) -> (Vec<u8>, Vec<u8>) {
        use k256::ecdsa::signature::hazmat::PrehashSigner;
        let s: k256::ecdsa::Signature = key.sign_prehash(hash).unwrap();
        let s = s.normalize_s();
        let mut low = s.to_der().as_bytes().to_vec();
        low.push(hash_type);
        let (r, sv) = s.split_scalars();
        let high = k256::ecdsa::Signature::from_scalars(r.to_bytes(), (-*sv).to_bytes()).unwrap();
        let mut high = high.to_der().as_bytes().to_vec();
        high.push(hash_type);
        (low, high)
    }

    /// P2PKH and P2WPKH spends signed here (each hash type): signed; the same signature
    /// under the other scheme, with S high, with its hash type undefined, not strict
    /// DER, by another key, or with the input's shape wrong: each refused for its rule.
    #[test]
    fn key_hash_spends_and_each_rule_they_can_break() {
        let key = k256::ecdsa::SigningKey::from_slice(&[0x42; 32]).unwrap();
        let public = key.verifying_key().to_sec1_point(true);
        let public = public.as_bytes();
        let hash = hash160(public);
        let mut p2pkh = vec![0x76, 0xa9, 0x14];
        p2pkh.extend_from_slice(&hash);
        p2pkh.extend_from_slice(&[0x88, 0xac]);
        let mut p2wpkh = vec![0x00, 0x14];
        p2wpkh.extend_from_slice(&hash);
        let unsigned = one_input(&[], &[]);
        let utx = Tx::parse(&unsigned).unwrap();
        for hash_type in [1u8, 2, 3, 0x81, 0x82, 0x83] {
            // P2PKH.
            let (low, high) = sign(&key, &legacy(&utx, 0, &p2pkh, hash_type.into()), hash_type);
            let script_sig = |sig: &[u8], key: &[u8]| {
                let mut s = vec![sig.len() as u8];
                s.extend_from_slice(sig);
                s.push(key.len() as u8);
                s.extend_from_slice(key);
                s
            };
            let spent = [Some(Prevout {
                value: 100_000,
                script: &p2pkh,
            })];
            let run = |script: &[u8], witness: &[&[u8]]| {
                let raw = one_input(script, witness);
                check_input(&Tx::parse(&raw).unwrap(), 0, &spent)
            };
            assert_eq!(
                run(&script_sig(&low, public), &[]),
                Check::Signed,
                "{hash_type}"
            );
            assert_eq!(
                run(&script_sig(&high, public), &[]),
                Check::NotSigned(Fault::HighS)
            );
            assert_eq!(
                run(&script_sig(&low, public), &[&[1]]),
                Check::NotSigned(Fault::Shape)
            );
            let mut extra = script_sig(&low, public);
            extra.extend_from_slice(&[1, 1]);
            assert_eq!(run(&extra, &[]), Check::NotSigned(Fault::Shape));
            let other = k256::ecdsa::SigningKey::from_slice(&[0x43; 32]).unwrap();
            let other = other.verifying_key().to_sec1_point(true);
            assert_eq!(
                run(&script_sig(&low, other.as_bytes()), &[]),
                Check::NotSigned(Fault::Key)
            );
            let mut undefined = low.clone();
            *undefined.last_mut().unwrap() = 4;
            assert_eq!(
                run(&script_sig(&undefined, public), &[]),
                Check::NotSigned(Fault::HashType)
            );
            let mut loose = low.clone();
            loose[1] += 1;
            assert_eq!(
                run(&script_sig(&loose, public), &[]),
                Check::NotSigned(Fault::Encoding)
            );

            // P2WPKH.
            let (low, high) = sign(
                &key,
                &segwit_v0(&utx, 0, &p2pkh, 100_000, hash_type.into()),
                hash_type,
            );
            let spent = [Some(Prevout {
                value: 100_000,
                script: &p2wpkh,
            })];
            let run = |script: &[u8], witness: &[&[u8]]| {
                let raw = one_input(script, witness);
                check_input(&Tx::parse(&raw).unwrap(), 0, &spent)
            };
            assert_eq!(run(&[], &[&low, public]), Check::Signed, "{hash_type}");
            assert_eq!(run(&[], &[&high, public]), Check::NotSigned(Fault::HighS));
            assert_eq!(
                run(&[1, 1], &[&low, public]),
                Check::NotSigned(Fault::Shape)
            );
            assert_eq!(
                run(&[], &[&low, public, &[]]),
                Check::NotSigned(Fault::Shape)
            );
            assert_eq!(run(&[], &[&low]), Check::NotSigned(Fault::Shape));
            let uncompressed = key.verifying_key().to_sec1_point(false);
            assert_eq!(
                run(&[], &[&low, uncompressed.as_bytes()]),
                Check::NotSigned(Fault::Key)
            );
        }
        // A legacy signature is not a segwit one.
        let (low, _) = sign(&key, &legacy(&utx, 0, &p2pkh, 1), 1);
        let raw = one_input(&[], &[&low, public]);
        let spent = [Some(Prevout {
            value: 100_000,
            script: &p2wpkh,
        })];
        assert_eq!(
            check_input(&Tx::parse(&raw).unwrap(), 0, &spent),
            Check::NotSigned(Fault::Signature)
        );
        // Other kinds, or no output known: unknown.
        let p2wsh = [&[0x00, 0x20][..], &[9; 32]].concat();
        let spent = [Some(Prevout {
            value: 100_000,
            script: &p2wsh,
        })];
        assert_eq!(
            check_input(&Tx::parse(&raw).unwrap(), 0, &spent),
            Check::Unknown
        );
        assert_eq!(
            check_input(&Tx::parse(&raw).unwrap(), 0, &[None]),
            Check::Unknown
        );
        // BIP66: a few encodings refused.
        assert!(
            !strict_der(&[0x30, 6, 2, 1, 0x80, 2, 1, 1, 1]),
            "negative R"
        );
        assert!(!strict_der(&[0x30, 7, 2, 2, 0, 1, 2, 1, 1, 1]), "R padded");
        assert!(strict_der(&[0x30, 6, 2, 1, 1, 2, 1, 1, 1]));
    }

    /// A taproot input: a script path (more than one item, no annex) is not checked here;
    /// no witness at all is no spend of a taproot output.
    #[test]
    fn taproot_spends_outside_the_key_path() {
        let p2tr = [&[0x51, 0x20][..], &[9; 32]].concat();
        let spent = [Some(Prevout {
            value: 1,
            script: &p2tr,
        })];
        let raw = one_input(&[], &[&[1; 64], &[0x51], &[0xc0; 33]]);
        assert_eq!(
            check_input(&Tx::parse(&raw).unwrap(), 0, &spent),
            Check::Unknown
        );
        let raw = one_input(&[], &[]);
        assert_eq!(
            check_input(&Tx::parse(&raw).unwrap(), 0, &spent),
            Check::NotSigned(Fault::Shape)
        );
    }
}
