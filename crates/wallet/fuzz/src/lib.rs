//! Shared by the wallet fuzz targets: the input reader (crates/fuzz-support) and the
//! references the oracles are written with. Each is written from its specification
//! (Bitcoin's CompactSize and transaction serialization with BIP144 witness data, its
//! Merkle tree, BIP141's commitment, BIP340's tagged hash, BIP352's input rules), on
//! `sha2`, `ripemd` and `k256` directly, and none calls the code under test.
pub use lightwire_fuzz_support::Cursor;

use k256::elliptic_curve::PrimeField;
use k256::elliptic_curve::point::AffineCoordinates;
use k256::elliptic_curve::sec1::ToSec1Point;
use k256::{ProjectivePoint, Scalar};
use ripemd::Ripemd160;
use sha2::{Digest, Sha256};

/// SHA-256.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// Double SHA-256 (txids, wtxids, Merkle nodes, the witness commitment).
pub fn sha256d(data: &[u8]) -> [u8; 32] {
    sha256(&sha256(data))
}

/// HASH160: RIPEMD-160 of SHA-256 (P2PKH, P2SH and P2WPKH programs).
pub fn hash160(data: &[u8]) -> [u8; 20] {
    Ripemd160::digest(Sha256::digest(data)).into()
}

/// BIP340's tagged hash: SHA-256(SHA-256(tag) || SHA-256(tag) || data).
pub fn tagged(tag: &str, data: &[u8]) -> [u8; 32] {
    let t = sha256(tag.as_bytes());
    let mut all = Vec::with_capacity(64 + data.len());
    all.extend_from_slice(&t);
    all.extend_from_slice(&t);
    all.extend_from_slice(data);
    sha256(&all)
}

/// A CompactSize read as Bitcoin reads it: one byte below 0xfd, else 0xfd, 0xfe or 0xff
/// and 2, 4 or 8 little-endian bytes holding a value that needs them (at least 0xfd,
/// above 0xffff, above 0xffffffff). The value and the bytes it took; `None` when the
/// bytes end inside it or it is not canonical.
pub fn ref_compact_size(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let width = match first {
        0xfd => 2,
        0xfe => 4,
        0xff => 8,
        n => return Some((u64::from(n), 1)),
    };
    let le = b.get(1..1 + width)?;
    let mut v = 0u64;
    for (i, byte) in le.iter().enumerate() {
        v |= u64::from(*byte) << (8 * i);
    }
    let canonical = match width {
        2 => v >= 0xfd,
        4 => v > 0xffff,
        _ => v > 0xffff_ffff,
    };
    canonical.then_some((v, 1 + width))
}

/// A CompactSize written as Bitcoin writes it (the shortest form).
pub fn ref_write_compact_size(out: &mut Vec<u8>, n: u64) {
    if n < 0xfd {
        out.push(n as u8);
    } else if n <= 0xffff {
        out.push(0xfd);
        out.extend_from_slice(&(n as u16).to_le_bytes());
    } else if n <= 0xffff_ffff {
        out.push(0xfe);
        out.extend_from_slice(&(n as u32).to_le_bytes());
    } else {
        out.push(0xff);
        out.extend_from_slice(&n.to_le_bytes());
    }
}

/// A transaction input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxIn {
    pub prev_txid: [u8; 32],
    pub prev_vout: u32,
    pub script_sig: Vec<u8>,
    pub sequence: u32,
    /// Its witness stack, bottom first.
    pub witness: Vec<Vec<u8>>,
}

/// A transaction, as the model holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxModel {
    pub version: u32,
    pub inputs: Vec<TxIn>,
    /// Value and script of each output.
    pub outputs: Vec<(u64, Vec<u8>)>,
    pub lock_time: u32,
}

fn push_var(out: &mut Vec<u8>, bytes: &[u8]) {
    ref_write_compact_size(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

impl TxModel {
    /// Whether any input has a witness item (Bitcoin Core's `HasWitness`).
    pub fn has_witness(&self) -> bool {
        self.inputs.iter().any(|i| !i.witness.is_empty())
    }

    /// The serialization: with BIP144's marker, flag and witnesses when `witness` is asked
    /// and the transaction has any (Core writes no marker for a transaction without).
    pub fn serialize(&self, witness: bool) -> Vec<u8> {
        let marker = witness && self.has_witness();
        let mut out = Vec::new();
        out.extend_from_slice(&self.version.to_le_bytes());
        if marker {
            out.extend_from_slice(&[0, 1]);
        }
        ref_write_compact_size(&mut out, self.inputs.len() as u64);
        for i in &self.inputs {
            out.extend_from_slice(&i.prev_txid);
            out.extend_from_slice(&i.prev_vout.to_le_bytes());
            push_var(&mut out, &i.script_sig);
            out.extend_from_slice(&i.sequence.to_le_bytes());
        }
        ref_write_compact_size(&mut out, self.outputs.len() as u64);
        for (value, script) in &self.outputs {
            out.extend_from_slice(&value.to_le_bytes());
            push_var(&mut out, script);
        }
        if marker {
            for i in &self.inputs {
                ref_write_compact_size(&mut out, i.witness.len() as u64);
                for item in &i.witness {
                    push_var(&mut out, item);
                }
            }
        }
        out.extend_from_slice(&self.lock_time.to_le_bytes());
        out
    }

    /// Its txid: double SHA-256 of the serialization without witness data.
    pub fn txid(&self) -> [u8; 32] {
        sha256d(&self.serialize(false))
    }

    /// Its wtxid: double SHA-256 of the serialization with witness data.
    pub fn wtxid(&self) -> [u8; 32] {
        sha256d(&self.serialize(true))
    }
}

/// What a transaction's bytes say, read by [`ref_parse_tx`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedTx {
    pub txid: [u8; 32],
    pub outputs: usize,
}

struct Bytes<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Bytes<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.b.get(self.at..end)?;
        self.at = end;
        Some(s)
    }
    fn cs(&mut self) -> Option<u64> {
        let (v, n) = ref_compact_size(&self.b[self.at..])?;
        self.at += n;
        Some(v)
    }
    fn var(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.cs()?).ok()?;
        self.take(n)
    }
}

/// One whole transaction, read by Bitcoin's serialization with BIP144: version, input
/// count (0 is BIP144's marker, which must be followed by the flag 1, then the real
/// count), inputs, outputs, a witness stack per input when marked, lock time, nothing
/// after; every CompactSize canonical. A marked transaction whose stacks are all empty is
/// read (Core refuses it as a superfluous witness record; its txid is the same). Its
/// txid and output count, or `None`.
pub fn ref_parse_tx(b: &[u8]) -> Option<ParsedTx> {
    let mut r = Bytes { b, at: 0 };
    let version = r.take(4)?;
    // The txid's serialization runs from the input count to the end of the outputs.
    let mut body_start = r.at;
    let mut n = r.cs()?;
    let marked = n == 0;
    if marked {
        if r.take(1)? != [1] {
            return None;
        }
        body_start = r.at;
        n = r.cs()?;
    }
    for _ in 0..n {
        r.take(36)?;
        r.var()?;
        r.take(4)?;
    }
    let outputs = r.cs()?;
    for _ in 0..outputs {
        r.take(8)?;
        r.var()?;
    }
    let body_end = r.at;
    if marked {
        for _ in 0..n {
            let items = r.cs()?;
            for _ in 0..items {
                r.var()?;
            }
        }
    }
    let lock_time = r.take(4)?;
    if r.at != b.len() {
        return None;
    }
    let mut stripped = version.to_vec();
    stripped.extend_from_slice(&b[body_start..body_end]);
    stripped.extend_from_slice(lock_time);
    Some(ParsedTx {
        txid: sha256d(&stripped),
        outputs: usize::try_from(outputs).ok()?,
    })
}

/// Bitcoin's Merkle root of `leaves`, level by level, an odd last node paired with
/// itself; all zeros for none.
pub fn ref_merkle_root(leaves: &[[u8; 32]]) -> [u8; 32] {
    if leaves.is_empty() {
        return [0; 32];
    }
    let mut level = leaves.to_vec();
    while level.len() > 1 {
        let mut next = Vec::with_capacity(level.len().div_ceil(2));
        for pair in level.chunks(2) {
            let right = pair.get(1).unwrap_or(&pair[0]);
            let mut both = [0u8; 64];
            both[..32].copy_from_slice(&pair[0]);
            both[32..].copy_from_slice(right);
            next.push(sha256d(&both));
        }
        level = next;
    }
    level[0]
}

/// The start of a BIP141 witness commitment output: OP_RETURN, a 36-byte push, the tag.
pub const COMMITMENT_HEAD: [u8; 6] = [0x6a, 0x24, 0xaa, 0x21, 0xa9, 0xed];

/// BIP141's commitment of a block of `txs` (the first is the coinbase) under the witness
/// reserved value `nonce`: double SHA-256 of the Merkle root of the wtxids (the
/// coinbase's taken as zero) and the value.
pub fn ref_commitment(txs: &[TxModel], nonce: &[u8]) -> [u8; 32] {
    let leaves: Vec<[u8; 32]> = txs
        .iter()
        .enumerate()
        .map(|(i, t)| if i == 0 { [0; 32] } else { t.wtxid() })
        .collect();
    let mut data = ref_merkle_root(&leaves).to_vec();
    data.extend_from_slice(nonce);
    sha256d(&data)
}

/// How a block's witness data stands against its coinbase (Bitcoin Core's
/// `CheckWitnessMalleation`, segwit active).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefWitness {
    Ok,
    /// `bad-witness-nonce-size`.
    NonceSize,
    /// `bad-witness-merkle-match`.
    Mismatch,
    /// `unexpected-witness`.
    Unexpected,
}

/// Core's rule: the commitment is the coinbase's last output whose script is at least 38
/// bytes and starts with [`COMMITMENT_HEAD`]; with one, the coinbase's first input's
/// witness must be one item of 32 bytes, and the commitment must be [`ref_commitment`]
/// under it; without one, no transaction may have witness data.
pub fn ref_check_witness(txs: &[TxModel]) -> RefWitness {
    let Some(coinbase) = txs.first() else {
        return RefWitness::Ok;
    };
    let commitment = coinbase
        .outputs
        .iter()
        .rev()
        .find(|(_, s)| s.len() >= 38 && s[..6] == COMMITMENT_HEAD);
    let Some((_, commitment)) = commitment else {
        return match txs.iter().any(TxModel::has_witness) {
            true => RefWitness::Unexpected,
            false => RefWitness::Ok,
        };
    };
    let stack = coinbase
        .inputs
        .first()
        .map(|i| &i.witness[..])
        .unwrap_or(&[]);
    let [nonce] = stack else {
        return RefWitness::NonceSize;
    };
    if nonce.len() != 32 {
        return RefWitness::NonceSize;
    }
    if ref_commitment(txs, nonce)[..] != commitment[6..38] {
        return RefWitness::Mismatch;
    }
    RefWitness::Ok
}

/// A secret key and the encodings of its point, computed once.
#[derive(Clone, Copy, Debug)]
pub struct Keys {
    pub secret: Scalar,
    /// SEC1 compressed.
    pub compressed: [u8; 33],
    /// SEC1 uncompressed.
    pub uncompressed: [u8; 65],
    /// BIP340's x-only key.
    pub x: [u8; 32],
    /// The secret whose point has that x and an even y (`secret` or `-secret`).
    pub even: Scalar,
}

impl Keys {
    pub fn of(secret: Scalar) -> Keys {
        let p = ProjectivePoint::mul_by_generator(&secret).to_affine();
        let mut compressed = [0u8; 33];
        compressed.copy_from_slice(p.to_sec1_point(true).as_bytes());
        let mut uncompressed = [0u8; 65];
        uncompressed.copy_from_slice(p.to_sec1_point(false).as_bytes());
        let even = if bool::from(p.y_is_odd()) {
            -secret
        } else {
            secret
        };
        Keys {
            secret,
            compressed,
            uncompressed,
            x: p.x().into(),
            even,
        }
    }
}

/// A secret key from two input bytes: `1..=32768`, negated when the top bit is set (so
/// that two inputs' keys can cancel).
pub fn small_secret(v: u16) -> Scalar {
    let s = Scalar::from(u64::from(v & 0x7fff) + 1);
    if v & 0x8000 != 0 { -s } else { s }
}

/// The SEC1 compressed encoding of `s·G` (`s` not zero).
pub fn compressed_of(s: &Scalar) -> [u8; 33] {
    compressed_point(&ProjectivePoint::mul_by_generator(s))
}

/// The SEC1 compressed encoding of a point that is not the identity.
pub fn compressed_point(p: &ProjectivePoint) -> [u8; 33] {
    let mut out = [0u8; 33];
    out.copy_from_slice(p.to_affine().to_sec1_point(true).as_bytes());
    out
}

/// BIP352's tweak of a transaction from its eligible inputs' secret keys (each as the
/// point the input shows: a taproot key's with even y) and its smallest outpoint
/// (`txid || vout`, little-endian): `input_hash·A` with `A = Σa·G` and `input_hash =
/// hash_BIP0352/Inputs(outpoint || A)`. `None` when there is no key, the keys cancel, or
/// the hash is not a scalar.
pub fn ref_tweak(secrets: &[Scalar], smallest: &[u8; 36]) -> Option<[u8; 33]> {
    if secrets.is_empty() {
        return None;
    }
    let a: Scalar = secrets.iter().fold(Scalar::ZERO, |sum, s| sum + s);
    if bool::from(a.is_zero()) {
        return None;
    }
    let big_a = compressed_of(&a);
    let mut data = smallest.to_vec();
    data.extend_from_slice(&big_a);
    let h = tagged("BIP0352/Inputs", &data);
    let h = Option::<Scalar>::from(Scalar::from_repr(h.into()))?;
    if bool::from(h.is_zero()) {
        return None;
    }
    Some(compressed_of(&(h * a)))
}
