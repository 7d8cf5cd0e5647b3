//! Silent payments (BIP352), sans-IO: which inputs of a transaction count and its *tweak*
//! (`input_hash·A`, 33 bytes: what a gateway serves for each eligible transaction, and
//! what the receiver needs besides the outputs); a block's tweaks, sorted, and the
//! tweak-header chain over them (BIP157's filter-header chain, over tweaks), so that what
//! gateways serve can be cross-checked as filters are; then a receiver's side: its `sp1`
//! address and labels, the keys a block's filter is asked about, and the outputs of a
//! transaction that pay it, each with the private-key tweak that spends it
//! (`b_spend + tweak`).
//!
//! Written here on `k256` (the curve crate the handshake and the wallet already use)
//! rather than taken from the `silentpayments` crate: that one is built on libsecp256k1
//! in C, a second curve library in the tab's wasm and a C toolchain in its build. The
//! rules follow BIP352's text and its reference implementation, and every receiving case
//! of the BIP's test vectors is checked below.
//!
//! The scan key (`b_scan`) is a secret: [`Receiver`] holds it and never returns it.
//! Malformed input of any kind is a typed error or a skipped input, never a panic.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;

use bech32::primitives::decode::CheckedHrpstring;
use bech32::primitives::iter::{ByteIterExt, Fe32IterExt};
use bech32::{Bech32m, Fe32, Hrp};
use k256::elliptic_curve::group::Group;
use k256::elliptic_curve::point::AffineCoordinates;
use k256::elliptic_curve::sec1::ToSec1Point;
use k256::elliptic_curve::{BatchNormalize, PrimeField};
use k256::{ProjectivePoint, PublicKey, Scalar};
use lightwire_primitives::{Block, Tx, Witness, compact_size, sha256d};
use sha2::{Digest, Sha256};

use crate::hash::{hash160, tagged};

/// BIP352's `K_max`: the most outputs of one transaction a receiver looks for (a sender
/// may not pay one scan key more in a transaction; a receiver stops there).
pub const K_MAX: u32 = 2323;

/// The x coordinate of BIP341's NUMS point `H`: a taproot script-path spend whose internal
/// key is `H` has no key-path key, and its input does not count.
const NUMS_H: [u8; 32] = [
    0x50, 0x92, 0x9b, 0x74, 0xc1, 0xa0, 0x49, 0x54, 0xb7, 0x8b, 0x4b, 0x60, 0x35, 0xe9, 0x7a, 0x5e,
    0x07, 0x8a, 0x5a, 0x0f, 0x28, 0xec, 0x96, 0xd5, 0x47, 0xbf, 0xee, 0x9a, 0xce, 0x80, 0x3a, 0xc0,
];

/// Tweaks that share a field inversion in [`Receiver::first_keys_batch`].
pub const FIRST_KEYS_BATCH: usize = 16;

/// Longest silent payment address BIP352 suggests reading (its bech32m checksum's limit).
pub const MAX_ADDRESS_LEN: usize = 1023;

/// What went wrong, naming the rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SilentError {
    /// Not a silent payment address: `what` says which rule it breaks.
    #[error("not a silent payment address: {what}")]
    Address {
        /// The rule.
        what: &'static str,
    },
    /// The scan key is not a private key (zero, or not below the curve's order).
    #[error("the scan key is not a valid private key")]
    ScanKey,
    /// The spend key is not a compressed public key on the curve.
    #[error("the spend key is not a compressed public key")]
    SpendKey,
    /// A tweak is not a compressed point on the curve.
    #[error("the tweak is not a compressed point on the curve")]
    Tweak,
    /// A hash BIP352 takes as a scalar is zero or not below the curve's order: BIP352
    /// says to fail (the chance is about 2^-128; only a broken hash would do it).
    #[error("a BIP352 hash is not a valid scalar")]
    Scalar,
}

/// Why a transaction has no tweak: it is not one a receiver scans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoTweak {
    /// It has no taproot output (nothing it pays could be a silent payment).
    NoTaprootOutput,
    /// None of its inputs is of a kind whose key counts (P2TR, P2WPKH, P2SH-P2WPKH, P2PKH
    /// with a compressed key).
    NoEligibleInput,
    /// An input spends a witness program of version 2 or above: left to a later version
    /// of silent payments, as BIP352 says.
    SpendsLaterWitnessVersion,
    /// Its eligible keys sum to the point at infinity.
    KeysCancel,
    /// The scripts its inputs spend were not all given (one per input, in order).
    SpentScripts,
    /// Its input hash is not a valid scalar ([`SilentError::Scalar`]'s case).
    InputHash,
}

/// The tweak of `tx` (`input_hash·A`, SEC1-compressed), given the script each of its
/// inputs spends (`spent[i]` for input `i`), or why it has none. A coinbase has none
/// (its one input spends nothing).
pub fn tweak(tx: &Tx<'_>, spent: &[&[u8]]) -> Result<[u8; 33], NoTweak> {
    if !tx.outputs().any(|o| is_p2tr(o.script)) {
        return Err(NoTweak::NoTaprootOutput);
    }
    if tx.is_coinbase() {
        return Err(NoTweak::NoEligibleInput);
    }
    if tx.inputs().count() != spent.len() {
        return Err(NoTweak::SpentScripts);
    }
    let mut sum = ProjectivePoint::IDENTITY;
    let mut eligible = false;
    let mut smallest: Option<[u8; 36]> = None;
    for (input, script) in tx.inputs().zip(spent) {
        if later_witness_version(script) {
            return Err(NoTweak::SpendsLaterWitnessVersion);
        }
        let mut outpoint = [0u8; 36];
        outpoint[..32].copy_from_slice(input.prev_txid);
        outpoint[32..].copy_from_slice(&input.prev_vout.to_le_bytes());
        if smallest.is_none_or(|s| outpoint < s) {
            smallest = Some(outpoint);
        }
        if let Some(key) = input_key(input.script_sig, &input.witness, script) {
            sum += key;
            eligible = true;
        }
    }
    if !eligible {
        return Err(NoTweak::NoEligibleInput);
    }
    if bool::from(sum.is_identity()) {
        return Err(NoTweak::KeysCancel);
    }
    let a = compressed(&sum);
    let mut data = [0u8; 36 + 33];
    data[..36].copy_from_slice(&smallest.ok_or(NoTweak::NoEligibleInput)?);
    data[36..].copy_from_slice(&a);
    let input_hash = scalar(&tagged("BIP0352/Inputs", &data)).ok_or(NoTweak::InputHash)?;
    Ok(compressed(&(sum * input_hash)))
}

/// The scripts given for a block's inputs were not one per input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{given} spent scripts given for a block whose transactions have {inputs} inputs after the coinbase"
)]
pub struct SpentScriptsMismatch {
    /// Inputs after the coinbase.
    pub inputs: usize,
    /// Scripts given.
    pub given: usize,
}

/// The tweaks of a block: one for each of its transactions a receiver scans, sorted
/// (bytewise), into `out` (replaced). `spent` holds the script each input after the
/// coinbase spends, in block order (what a node's undo data holds: Bitcoin Core's REST
/// `spenttxouts`, or `getblock` at verbosity 3).
pub fn block_tweaks<V>(
    block: &Block<'_, V>,
    spent: &[&[u8]],
    out: &mut Vec<[u8; 33]>,
) -> Result<(), SpentScriptsMismatch> {
    out.clear();
    let inputs: usize = block
        .transactions()
        .skip(1)
        .map(|tx| tx.inputs().count())
        .sum();
    if inputs != spent.len() {
        return Err(SpentScriptsMismatch {
            inputs,
            given: spent.len(),
        });
    }
    let mut at = 0;
    for tx in block.transactions().skip(1) {
        let n = tx.inputs().count();
        if let Ok(t) = tweak(&tx, &spent[at..at + n]) {
            out.push(t);
        }
        at += n;
    }
    out.sort_unstable();
    Ok(())
}

/// The hash a block's tweaks put in the tweak-header chain: SHA-256 of their serialization
/// (a CompactSize count, then each tweak's 33 bytes, sorted), as BIP157 hashes a filter.
pub fn tweaks_hash(tweaks: &[[u8; 33]]) -> [u8; 32] {
    let (count, len) = compact_size(tweaks.len() as u64);
    let mut h = Sha256::new();
    h.update(&count[..len]);
    for t in tweaks {
        h.update(t);
    }
    h.finalize().into()
}

/// The tweak header of a block: `SHA-256d(tweaks_hash || previous tweak header)`, the
/// previous of the first block being 32 zero bytes; BIP157's filter-header chain over
/// tweaks instead of filters, so that gateways can be held to one chain of them.
pub fn tweak_header(tweaks_hash: &[u8; 32], previous: &[u8; 32]) -> [u8; 32] {
    let mut m = [0u8; 64];
    m[..32].copy_from_slice(tweaks_hash);
    m[32..].copy_from_slice(previous);
    sha256d(&m)
}

/// The public key an input contributes (BIP352, "Inputs For Shared Secret Derivation"),
/// from its script, its witness and the script it spends; `None` if it contributes none.
fn input_key(script_sig: &[u8], witness: &Witness<'_>, spent: &[u8]) -> Option<ProjectivePoint> {
    if let [0x76, 0xa9, 0x14, hash @ .., 0x88, 0xac] = spent
        && hash.len() == 20
    {
        // P2PKH: the last 33 bytes of the script that hash to the key hash, wherever they
        // stand (a third party can malleate the script around the key).
        return (33..=script_sig.len())
            .rev()
            .map(|end| &script_sig[end - 33..end])
            .find(|key| hash160(key)[..] == *hash)
            .and_then(compressed_key);
    }
    if let [0xa9, 0x14, _hash @ .., 0x87] = spent
        && spent.len() == 23
    {
        // P2SH-P2WPKH: the script pushes a version-0 20-byte program; the key is the last
        // witness item. Any other P2SH input does not count.
        return match script_sig {
            [0x16, 0x00, 0x14, rest @ ..] if rest.len() == 20 => last_item(witness),
            _ => None,
        }
        .and_then(compressed_key);
    }
    if let [0x00, 0x14, _hash @ ..] = spent
        && spent.len() == 22
    {
        return last_item(witness).and_then(compressed_key);
    }
    if let [0x51, 0x20, x @ ..] = spent
        && x.len() == 32
    {
        // Read in place (no copy of the stack: this runs for every taproot input of every
        // block a gateway indexes).
        let n = witness.len();
        let last = last_item(witness)?;
        // An annex (BIP341: a last item starting 0x50, with at least two items) is not
        // part of the spend.
        let items = if n > 1 && last.first() == Some(&0x50) {
            n - 1
        } else {
            n
        };
        // A script-path spend: the control block is the last item left; its internal key
        // `H` means there is no key path, and the input does not count.
        if items > 1
            && witness.iter().nth(items - 1).and_then(|c| c.get(1..33)) == Some(&NUMS_H[..])
        {
            return None;
        }
        let mut even = [0x02; 33];
        even[1..].copy_from_slice(x);
        return compressed_key(&even);
    }
    None
}

/// The last item of a witness.
fn last_item<'a>(witness: &Witness<'a>) -> Option<&'a [u8]> {
    witness.iter().last()
}

/// A 33-byte SEC1-compressed key on the curve; uncompressed and hybrid keys do not count.
fn compressed_key(key: &[u8]) -> Option<ProjectivePoint> {
    if key.len() != 33 || !matches!(key[0], 0x02 | 0x03) {
        return None;
    }
    PublicKey::from_sec1_bytes(key)
        .ok()
        .map(|k| k.to_projective())
}

/// A P2TR output script: `OP_1 <32 bytes>`.
pub fn is_p2tr(script: &[u8]) -> bool {
    script.len() == 34 && script[0] == 0x51 && script[1] == 0x20
}

/// A witness program of version 2 to 16 (`OP_2`..`OP_16`, then one push of 2 to 40 bytes).
fn later_witness_version(script: &[u8]) -> bool {
    matches!(script, [0x52..=0x60, len, rest @ ..]
        if (2..=40).contains(len) && rest.len() == usize::from(*len))
}

/// A 32-byte hash as a scalar, if BIP352 may take it as one: not zero, below the order.
fn scalar(bytes: &[u8; 32]) -> Option<Scalar> {
    Option::<Scalar>::from(Scalar::from_repr((*bytes).into())).filter(|s| !bool::from(s.is_zero()))
}

/// SEC1-compressed encoding of a point that is not the identity.
fn compressed(p: &ProjectivePoint) -> [u8; 33] {
    let mut out = [0u8; 33];
    out.copy_from_slice(p.to_affine().to_sec1_point(true).as_bytes());
    out
}

/// Which network's addresses: `sp` on mainnet, `tsp` on the test networks (testnet,
/// signet), `sprt` on regtest (as other wallets write regtest's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpNetwork {
    /// `sp`.
    Mainnet,
    /// `tsp`.
    Testnet,
    /// `sprt`.
    Regtest,
}

impl SpNetwork {
    fn hrp(self) -> &'static str {
        match self {
            SpNetwork::Mainnet => "sp",
            SpNetwork::Testnet => "tsp",
            SpNetwork::Regtest => "sprt",
        }
    }
}

/// A silent payment address's keys: `B_scan` and `B_m` (the spend key, labelled or not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpAddress {
    /// The network its prefix names.
    pub network: SpNetwork,
    /// The scan public key.
    pub scan: [u8; 33],
    /// The spend public key (`B_spend`, or `B_m` for a labelled address).
    pub spend: [u8; 33],
}

impl SpAddress {
    /// Read an address (BIP352, "Address encoding"): bech32m, version 0 with exactly 66
    /// bytes of keys, or versions 1 to 30 of which the first 66 bytes are read; version
    /// 31 is refused, as are keys not on the curve.
    pub fn parse(s: &str) -> Result<SpAddress, SilentError> {
        let bad = |what| SilentError::Address { what };
        if s.len() > MAX_ADDRESS_LEN {
            return Err(bad("longer than 1,023 characters"));
        }
        let checked = CheckedHrpstring::new::<Bech32m>(s).map_err(|_| bad("not bech32m"))?;
        let network = match checked.hrp().to_lowercase().as_str() {
            "sp" => SpNetwork::Mainnet,
            "tsp" => SpNetwork::Testnet,
            "sprt" => SpNetwork::Regtest,
            _ => return Err(bad("its prefix is not sp, tsp or sprt")),
        };
        let mut fes = checked.fe32_iter::<core::iter::Empty<u8>>();
        let version = fes.next().ok_or(bad("no version"))?.to_u8();
        let rest: Vec<Fe32> = fes.collect();
        match version {
            // 66 bytes are 106 five-bit characters (two bits of padding).
            0 if rest.len() != 106 => return Err(bad("version 0 holds exactly 66 bytes")),
            31 => return Err(bad("version 31 is reserved")),
            _ if rest.len() < 106 => return Err(bad("shorter than 66 bytes")),
            _ => {}
        }
        let bytes: Vec<u8> = rest[..106].iter().copied().fes_to_bytes().collect();
        let (mut scan, mut spend) = ([0u8; 33], [0u8; 33]);
        scan.copy_from_slice(&bytes[..33]);
        spend.copy_from_slice(&bytes[33..66]);
        if compressed_key(&scan).is_none() || compressed_key(&spend).is_none() {
            return Err(bad("a key is not on the curve"));
        }
        Ok(SpAddress {
            network,
            scan,
            spend,
        })
    }

    /// The address, lowercase.
    pub fn encode(&self) -> String {
        let hrp = Hrp::parse_unchecked(self.network.hrp());
        let mut keys = [0u8; 66];
        keys[..33].copy_from_slice(&self.scan);
        keys[33..].copy_from_slice(&self.spend);
        keys.iter()
            .copied()
            .bytes_to_fes()
            .with_checksum::<Bech32m>(&hrp)
            .with_witness_version(Fe32::Q)
            .chars()
            .collect()
    }
}

/// One output of a transaction that pays the receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    /// Its index among the x-only keys given to [`Receiver::scan`].
    pub output: usize,
    /// Its x-only key.
    pub key: [u8; 32],
    /// The private-key tweak that spends it: `t_k`, plus the label's tweak for a labelled
    /// payment; the key that signs is `b_spend + tweak`.
    pub tweak: [u8; 32],
    /// The label it was paid to (0 is the change label), `None` for the plain address.
    pub label: Option<u32>,
    /// Its `k`: the how-manyth output to this receiver in the transaction.
    pub k: u32,
}

/// A label: its number, its tweak (`hash_BIP0352/Label(b_scan || m)`) and its point.
#[derive(Clone, Copy, Debug)]
struct Label {
    m: u32,
    tweak: Scalar,
    point: ProjectivePoint,
}

/// A silent payment receiver: the scan private key, the spend public key, and the labels
/// it looks for (always the change label, 0).
#[derive(Clone)]
pub struct Receiver {
    scan: Scalar,
    spend: ProjectivePoint,
    spend_bytes: [u8; 33],
    /// By the label's point (`tweak·G`), compressed.
    labels: BTreeMap<[u8; 33], Label>,
}

impl core::fmt::Debug for Receiver {
    /// The scan key is left out: it is a secret.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Receiver")
            .field("spend", &self.spend_bytes)
            .field("labels", &self.labels.len())
            .finish_non_exhaustive()
    }
}

impl Receiver {
    /// A receiver of scan private key `scan` and spend public key `spend` (compressed),
    /// looking for the change label.
    pub fn new(scan: &[u8; 32], spend: &[u8; 33]) -> Result<Receiver, SilentError> {
        let scan_key = scalar(scan).ok_or(SilentError::ScanKey)?;
        let spend_key = compressed_key(spend).ok_or(SilentError::SpendKey)?;
        let mut r = Receiver {
            scan: scan_key,
            spend: spend_key,
            spend_bytes: *spend,
            labels: BTreeMap::new(),
        };
        r.add_label(0)?;
        Ok(r)
    }

    /// Look for payments to label `m` too (BIP352: the app hands out labels from 1; 0 is
    /// change, never handed out). Returns the label's spend key `B_m`.
    pub fn add_label(&mut self, m: u32) -> Result<[u8; 33], SilentError> {
        let tweak = self.label_tweak(m)?;
        let point = ProjectivePoint::mul_by_generator(&tweak);
        self.labels
            .insert(compressed(&point), Label { m, tweak, point });
        Ok(compressed(&(self.spend + point)))
    }

    /// The label tweak `hash_BIP0352/Label(ser256(b_scan) || ser32(m))`.
    fn label_tweak(&self, m: u32) -> Result<Scalar, SilentError> {
        let mut data = [0u8; 36];
        data[..32].copy_from_slice(&self.scan.to_bytes());
        data[32..].copy_from_slice(&m.to_be_bytes());
        scalar(&tagged("BIP0352/Label", &data)).ok_or(SilentError::Scalar)
    }

    /// The labels looked for (0, change, among them), ascending.
    pub fn labels(&self) -> alloc::vec::Vec<u32> {
        let mut m: alloc::vec::Vec<u32> = self.labels.values().map(|l| l.m).collect();
        m.sort_unstable();
        m
    }

    /// How many labels it looks for (the change label among them).
    pub fn label_count(&self) -> usize {
        self.labels.len()
    }

    /// The spend public key `B_spend` (compressed).
    pub fn spend_public(&self) -> [u8; 33] {
        self.spend_bytes
    }

    /// The scan public key `B_scan`.
    pub fn scan_public(&self) -> [u8; 33] {
        compressed(&ProjectivePoint::mul_by_generator(&self.scan))
    }

    /// The receiver's address on `network`: unlabelled, or for label `m` (which it then
    /// also looks for).
    pub fn address(
        &mut self,
        network: SpNetwork,
        label: Option<u32>,
    ) -> Result<SpAddress, SilentError> {
        let spend = match label {
            Some(m) => self.add_label(m)?,
            None => self.spend_bytes,
        };
        Ok(SpAddress {
            network,
            scan: self.scan_public(),
            spend,
        })
    }

    /// The x-only keys a transaction of tweak `tweak` would give its first output to this
    /// receiver (`k = 0`): `P_0`, then `P_0` plus each label's point; appended to `out`.
    /// A transaction that pays the receiver at all has one of them, so these are what a
    /// block's filter is asked about before the block is fetched (later outputs are
    /// looked for in the block itself, by [`Receiver::scan`]).
    pub fn first_keys(&self, tweak: &[u8; 33], out: &mut Vec<[u8; 32]>) -> Result<(), SilentError> {
        let tweak = compressed_key(tweak).ok_or(SilentError::Tweak)?;
        let mut data = [0u8; 33 + 4];
        data[..33].copy_from_slice(&compressed(&(tweak * self.scan)));
        let t = scalar(&tagged("BIP0352/SharedSecret", &data)).ok_or(SilentError::Scalar)?;
        let p = self.spend + ProjectivePoint::mul_by_generator(&t);
        out.push(x_only(&p));
        out.extend(self.labels.values().map(|l| x_only(&(p + l.point))));
        Ok(())
    }

    /// [`Receiver::first_keys`] of many tweaks (a block's): for each tweak in order, `P_0`
    /// then `P_0` plus each label's point, appended to `out`. Each group of
    /// [`FIRST_KEYS_BATCH`] tweaks shares one field inversion per step (Montgomery's
    /// trick, k256's `batch_normalize`) where one at a time takes three a tweak. A tweak
    /// that is not a point fails the call, and `out` is left as it was.
    pub fn first_keys_batch(
        &self,
        tweaks: &[[u8; 33]],
        out: &mut Vec<[u8; 32]>,
    ) -> Result<(), SilentError> {
        let start = out.len();
        let per = 1 + self.labels.len();
        out.resize(start + tweaks.len() * per, [0; 32]);
        let written = self.first_keys_into(tweaks, &mut out[start..]);
        if written.is_err() {
            out.truncate(start);
        }
        written
    }

    /// [`Receiver::first_keys_batch`]'s work, into `out` (`1 + labels` slots a tweak).
    fn first_keys_into(
        &self,
        tweaks: &[[u8; 33]],
        out: &mut [[u8; 32]],
    ) -> Result<(), SilentError> {
        const N: usize = FIRST_KEYS_BATCH;
        let per = 1 + self.labels.len();
        let mut data = [0u8; 33 + 4];
        for (g, group) in tweaks.chunks(N).enumerate() {
            // Padding lanes hold the generator: never the identity, never read.
            let mut points = [ProjectivePoint::GENERATOR; N];
            for (p, t) in points.iter_mut().zip(group) {
                *p = compressed_key(t).ok_or(SilentError::Tweak)? * self.scan;
            }
            let shared = ProjectivePoint::batch_normalize(&points);
            for (p, s) in points.iter_mut().zip(&shared).take(group.len()) {
                data[..33].copy_from_slice(s.to_sec1_point(true).as_bytes());
                let t =
                    scalar(&tagged("BIP0352/SharedSecret", &data)).ok_or(SilentError::Scalar)?;
                *p = self.spend + ProjectivePoint::mul_by_generator(&t);
            }
            let base = g * N * per;
            for (j, offset) in core::iter::once(None)
                .chain(self.labels.values().map(|l| Some(l.point)))
                .enumerate()
            {
                let mut keys = points;
                if let Some(l) = offset {
                    for k in keys.iter_mut().take(group.len()) {
                        *k += l;
                    }
                }
                for (i, a) in ProjectivePoint::batch_normalize(&keys)
                    .iter()
                    .take(group.len())
                    .enumerate()
                {
                    out[base + i * per + j] = a.x().into();
                }
            }
        }
        Ok(())
    }

    /// The outputs among `outputs` (a transaction's taproot output keys, x-only, in any
    /// order) that pay this receiver, given the transaction's `tweak` ([`tweak`]),
    /// appended to `found` (BIP352, "Scanning"): for `k` from 0, the output that is
    /// `P_k = B_spend + t_k·G`, or `P_k` plus a label's point; stops at the first `k`
    /// that none is, or at [`K_MAX`].
    pub fn scan(
        &self,
        tweak: &[u8; 33],
        outputs: &[[u8; 32]],
        found: &mut Vec<Found>,
    ) -> Result<(), SilentError> {
        let tweak = compressed_key(tweak).ok_or(SilentError::Tweak)?;
        let shared = compressed(&(tweak * self.scan));
        // The outputs not matched yet, by x-only key (a key twice in one transaction is
        // two outputs, each found at most once).
        let mut left: BTreeMap<[u8; 32], Vec<usize>> = BTreeMap::new();
        for (i, x) in outputs.iter().enumerate() {
            left.entry(*x).or_default().push(i);
        }
        let mut count = outputs.len();
        let mut data = [0u8; 33 + 4];
        data[..33].copy_from_slice(&shared);
        for k in 0..K_MAX {
            data[33..].copy_from_slice(&k.to_be_bytes());
            let t = scalar(&tagged("BIP0352/SharedSecret", &data)).ok_or(SilentError::Scalar)?;
            let p = self.spend + ProjectivePoint::mul_by_generator(&t);
            let Some((key, tweak, label)) = self.match_k(&p, t, &left, count) else {
                break;
            };
            let Some(indices) = left.get_mut(&key) else {
                break;
            };
            let output = indices.pop().unwrap_or_default();
            if indices.is_empty() {
                left.remove(&key);
            }
            count -= 1;
            found.push(Found {
                output,
                key,
                tweak: tweak.to_bytes().into(),
                label,
                k,
            });
        }
        Ok(())
    }

    /// The output among `left` (`count` of them) that is `P_k` (`p`, of tweak `t`), or
    /// `P_k` plus a label's point: its key, its private-key tweak and its label.
    fn match_k(
        &self,
        p: &ProjectivePoint,
        t: Scalar,
        left: &BTreeMap<[u8; 32], Vec<usize>>,
        count: usize,
    ) -> Option<([u8; 32], Scalar, Option<u32>)> {
        let x = x_only(p);
        if left.contains_key(&x) {
            return Some((x, t, None));
        }
        // BIP352's footnote: adding each label to `P_k` costs a point a label, and
        // subtracting `P_k` from each output two points an output; take the fewer.
        if self.labels.len() <= 2 * count {
            return self.labels.values().find_map(|l| {
                let x = x_only(&(*p + l.point));
                left.contains_key(&x).then_some((x, t + l.tweak, Some(l.m)))
            });
        }
        left.keys().find_map(|x| {
            let mut even = [0x02; 33];
            even[1..].copy_from_slice(x);
            let o = compressed_key(&even)?;
            // The label that makes `P_k` this output, for either y of the output.
            [o - p, -o - p].iter().find_map(|diff| {
                if bool::from(diff.is_identity()) {
                    return None;
                }
                let l = self.labels.get(&compressed(diff))?;
                Some((*x, t + l.tweak, Some(l.m)))
            })
        })
    }
}

/// The x coordinate of a point (its x-only key).
fn x_only(p: &ProjectivePoint) -> [u8; 32] {
    let c = compressed(p);
    let mut x = [0u8; 32];
    x.copy_from_slice(&c[1..]);
    x
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// `../shared/vectors/bip352.json`: the BIP's own test vectors (compiled in, so the
    /// browser run has them too).
    const VECTORS: &str = include_str!(concat!(env!("LIGHTWIRE_SHARED"), "/vectors/bip352.json"));

    fn hex32(s: &str) -> [u8; 32] {
        let mut b = [0u8; 32];
        hex::decode_to_slice(s, &mut b).unwrap();
        b
    }

    fn hex33(s: &str) -> [u8; 33] {
        let mut b = [0u8; 33];
        hex::decode_to_slice(s, &mut b).unwrap();
        b
    }

    /// A transaction with the vector's inputs (displayed txids, scripts and serialized
    /// witness stacks as given) and one P2TR output for each x-only key in `outputs`,
    /// serialized as BIP144 says, and the scripts its inputs spend.
    pub(crate) fn transaction(
        vin: &[serde_json::Value],
        outputs: &[[u8; 32]],
    ) -> (Vec<u8>, Vec<Vec<u8>>) {
        let witnesses: Vec<Vec<u8>> = vin
            .iter()
            .map(|i| hex::decode(i["txinwitness"].as_str().unwrap()).unwrap())
            .collect();
        let segwit = witnesses.iter().any(|w| !w.is_empty());
        let mut tx = 2u32.to_le_bytes().to_vec();
        if segwit {
            tx.extend_from_slice(&[0, 1]);
        }
        tx.push(vin.len() as u8);
        let mut spent = Vec::new();
        for i in vin {
            let mut txid = hex32(i["txid"].as_str().unwrap());
            txid.reverse();
            tx.extend_from_slice(&txid);
            tx.extend_from_slice(&(i["vout"].as_u64().unwrap() as u32).to_le_bytes());
            let script = hex::decode(i["scriptSig"].as_str().unwrap()).unwrap();
            lightwire_primitives::write_compact_size(&mut tx, script.len() as u64);
            tx.extend_from_slice(&script);
            tx.extend_from_slice(&[0xff; 4]);
            spent.push(hex::decode(i["prevout"]["scriptPubKey"]["hex"].as_str().unwrap()).unwrap());
        }
        lightwire_primitives::write_compact_size(&mut tx, outputs.len() as u64);
        for x in outputs {
            tx.extend_from_slice(&1000u64.to_le_bytes());
            tx.extend_from_slice(&[34, 0x51, 0x20]);
            tx.extend_from_slice(x);
        }
        if segwit {
            for w in &witnesses {
                if w.is_empty() {
                    tx.push(0);
                } else {
                    tx.extend_from_slice(w);
                }
            }
        }
        tx.extend_from_slice(&0u32.to_le_bytes());
        (tx, spent)
    }

    /// Every receiving case of BIP352's vectors: the addresses (plain and labelled), the
    /// tweak (or none, where the BIP skips the transaction), and the outputs found, each
    /// with the private-key tweak whose key (`b_spend + tweak`) is the output's.
    #[test]
    fn the_bips_receiving_vectors() {
        let cases: Vec<serde_json::Value> = serde_json::from_str(VECTORS).unwrap();
        let mut checked = 0;
        for case in &cases {
            let comment = case["comment"].as_str().unwrap();
            for r in case["receiving"].as_array().unwrap() {
                let given = &r["given"];
                let expected = &r["expected"];
                let keys = &given["key_material"];
                let scan = hex32(keys["scan_priv_key"].as_str().unwrap());
                let spend_priv = hex32(keys["spend_priv_key"].as_str().unwrap());
                let spend_secret = scalar(&spend_priv).unwrap();
                let spend = compressed(&ProjectivePoint::mul_by_generator(&spend_secret));
                let mut receiver = Receiver::new(&scan, &spend).unwrap();
                // Addresses: the plain one, then one per label, as listed.
                let mut addresses = vec![receiver.address(SpNetwork::Mainnet, None).unwrap()];
                for m in given["labels"].as_array().unwrap() {
                    let m = m.as_u64().unwrap() as u32;
                    addresses.push(receiver.address(SpNetwork::Mainnet, Some(m)).unwrap());
                }
                let want: Vec<&str> = expected["addresses"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap())
                    .collect();
                let got: Vec<String> = addresses.iter().map(SpAddress::encode).collect();
                assert_eq!(got, want, "{comment}: addresses");
                for a in &want {
                    let parsed = SpAddress::parse(a).unwrap();
                    assert!(addresses.contains(&parsed), "{comment}: {a} reads back");
                }

                let outputs: Vec<[u8; 32]> = given["outputs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|o| hex32(o.as_str().unwrap()))
                    .collect();
                let (raw, spent) = transaction(given["vin"].as_array().unwrap(), &outputs);
                let tx = Tx::parse(&raw).unwrap();
                let spent: Vec<&[u8]> = spent.iter().map(Vec::as_slice).collect();
                let got = tweak(&tx, &spent);
                // Absent where only the count is given (the K_max case).
                let none = Vec::new();
                let want_outputs = expected["outputs"].as_array().unwrap_or(&none);
                let Some(want_tweak) = expected["tweak"].as_str() else {
                    assert!(got.is_err(), "{comment}: no tweak, got {got:?}");
                    assert!(want_outputs.is_empty(), "{comment}");
                    checked += 1;
                    continue;
                };
                let t = got.unwrap_or_else(|e| panic!("{comment}: {e:?}"));
                assert_eq!(t, hex33(want_tweak), "{comment}: tweak");

                let mut found = Vec::new();
                receiver.scan(&t, &outputs, &mut found).unwrap();
                let mut first = Vec::new();
                receiver.first_keys(&t, &mut first).unwrap();
                assert_eq!(first.len(), 1 + receiver.labels.len());
                for f in found.iter().filter(|f| f.k == 0) {
                    assert!(
                        first.contains(&f.key),
                        "{comment}: k = 0 among the first keys"
                    );
                }
                let n = expected["n_outputs"]
                    .as_u64()
                    .map_or(want_outputs.len(), |n| n as usize);
                assert_eq!(found.len(), n, "{comment}: outputs found");
                for f in &found {
                    if !want_outputs.is_empty() {
                        let w = want_outputs
                            .iter()
                            .find(|w| hex32(w["pub_key"].as_str().unwrap()) == f.key)
                            .unwrap_or_else(|| {
                                panic!("{comment}: {} not expected", hex::encode(f.key))
                            });
                        assert_eq!(
                            f.tweak,
                            hex32(w["priv_key_tweak"].as_str().unwrap()),
                            "{comment}: tweak of {}",
                            hex::encode(f.key)
                        );
                    }
                    let d = spend_secret + scalar(&f.tweak).unwrap();
                    assert_eq!(x_only(&ProjectivePoint::mul_by_generator(&d)), f.key);
                    assert_eq!(outputs[f.output], f.key);
                }
                checked += 1;
            }
        }
        assert_eq!(checked, 29, "every receiving case");
    }

    /// The first vector's transaction (two P2PKH inputs, one P2TR output) and the scripts
    /// it spends.
    /// A block (a zero header) of a coinbase and `txs`.
    pub(crate) fn block_of(txs: &[Vec<u8>]) -> Vec<u8> {
        let mut coinbase = vec![2, 0, 0, 0, 1];
        coinbase.extend_from_slice(&[0; 32]);
        coinbase.extend_from_slice(&[0xff; 4]);
        coinbase.extend_from_slice(&[2, 0x51, 0x00, 0xff, 0xff, 0xff, 0xff, 1]);
        coinbase.extend_from_slice(&[0; 8]);
        coinbase.extend_from_slice(&[1, 0x51, 0, 0, 0, 0]);
        let mut block = vec![0u8; 80];
        block.push(1 + txs.len() as u8);
        block.extend_from_slice(&coinbase);
        for tx in txs {
            block.extend_from_slice(tx);
        }
        block
    }

    /// [`first_case`], with the receiver's scan private key and spend public key.
    #[allow(clippy::type_complexity)]
    pub(crate) fn first_case_keys() -> (
        Vec<serde_json::Value>,
        [u8; 32],
        [u8; 33],
        [u8; 32],
        [u8; 33],
    ) {
        let (vin, output, tweak) = first_case();
        let cases: Vec<serde_json::Value> = serde_json::from_str(VECTORS).unwrap();
        let keys = &cases[0]["receiving"][0]["given"]["key_material"];
        let scan = hex32(keys["scan_priv_key"].as_str().unwrap());
        let spend_priv = hex32(keys["spend_priv_key"].as_str().unwrap());
        let spend = compressed(&ProjectivePoint::mul_by_generator(
            &scalar(&spend_priv).unwrap(),
        ));
        (vin, output, tweak, scan, spend)
    }

    pub(crate) fn first_case() -> (Vec<serde_json::Value>, [u8; 32], [u8; 33]) {
        let cases: Vec<serde_json::Value> = serde_json::from_str(VECTORS).unwrap();
        let r = &cases[0]["receiving"][0];
        let vin = r["given"]["vin"].as_array().unwrap().clone();
        let output = hex32(r["given"]["outputs"][0].as_str().unwrap());
        let tweak = hex33(r["expected"]["tweak"].as_str().unwrap());
        (vin, output, tweak)
    }

    /// What BIP352 skips is skipped, each for its reason; an input of no listed kind beside
    /// eligible ones changes nothing.
    #[test]
    fn transactions_a_receiver_skips_say_why() {
        let (vin, output, want) = first_case();
        let (raw, spent) = transaction(&vin, &[output]);
        let tx = Tx::parse(&raw).unwrap();
        let scripts: Vec<&[u8]> = spent.iter().map(Vec::as_slice).collect();
        assert_eq!(tweak(&tx, &scripts), Ok(want));
        // One script short.
        assert_eq!(tweak(&tx, &scripts[..1]), Err(NoTweak::SpentScripts));
        // An input spending a version-2 witness program: the whole transaction is left.
        let v2 = [0x52, 0x02, 0xab, 0xcd];
        assert_eq!(
            tweak(&tx, &[scripts[0], &v2]),
            Err(NoTweak::SpendsLaterWitnessVersion)
        );
        // An input spending a P2WSH (not listed) beside an eligible one: only the eligible
        // one counts, so the tweak is that of the one key.
        let mut p2wsh = vec![0x00, 0x20];
        p2wsh.extend_from_slice(&[9; 32]);
        let one = tweak(&tx, &[scripts[0], &p2wsh]).unwrap();
        assert_ne!(one, want);
        // Neither counts.
        assert_eq!(tweak(&tx, &[&p2wsh, &p2wsh]), Err(NoTweak::NoEligibleInput));
        // No taproot output: nothing to scan.
        let (raw, _) = transaction(&vin, &[]);
        let tx = Tx::parse(&raw).unwrap();
        assert_eq!(tweak(&tx, &scripts), Err(NoTweak::NoTaprootOutput));
    }

    /// A block of a coinbase, the first vector's transaction, and the same transaction
    /// again with its inputs said to spend P2WSH scripts (no eligible input): one tweak,
    /// the vector's; the scripts must be one per input; the
    /// tweak headers chain as the known answers say (computed apart from this code, by
    /// Python's hashlib over the same bytes).
    #[test]
    fn a_blocks_tweaks_and_their_header_chain() {
        let (vin, output, want) = first_case();
        let (paying, spent) = transaction(&vin, &[output]);
        let block = block_of(&[paying.clone(), paying]);
        let block = Block::parse(&block).unwrap();
        let p2wsh: Vec<u8> = [&[0x00, 0x20][..], &[9; 32]].concat();
        let mut scripts: Vec<&[u8]> = spent.iter().map(Vec::as_slice).collect();
        scripts.extend([&p2wsh[..], &p2wsh[..]]);
        let mut tweaks = Vec::new();
        block_tweaks(&block, &scripts, &mut tweaks).unwrap();
        assert_eq!(tweaks, [want]);
        assert_eq!(
            block_tweaks(&block, &scripts[..3], &mut tweaks),
            Err(SpentScriptsMismatch {
                inputs: 4,
                given: 3
            })
        );
        // The chain: no tweaks at the first block, then the one tweak.
        let none = tweak_header(&tweaks_hash(&[]), &[0; 32]);
        let one = tweak_header(&tweaks_hash(&[want]), &none);
        assert_eq!(
            hex::encode(tweaks_hash(&[])),
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
        );
        assert_eq!(
            hex::encode(none),
            "6a49d76f0983cebc5259e0001c225f775bff510e786ed70b2b907b0646681322"
        );
        assert_eq!(
            hex::encode(one),
            "d1d726a9404c892999a8818249672fdcefb23f6e19b83874be65cdb8c1db4984"
        );
        // The list a gateway serves hashes and chains the same.
        let mut list = Vec::new();
        lightwire_primitives::write_tweak_list(&mut [want], &mut list);
        let hash = lightwire_primitives::tweak_list_hash(&list);
        assert_eq!(hash.0, tweaks_hash(&[want]));
        let chained = lightwire_primitives::FilterHeader(none).next(&hash);
        assert_eq!(chained.0, one);
    }

    /// The batch gives what one at a time gives, in order, over more tweaks than a group
    /// and with labels; a tweak off the curve fails it and leaves `out` as it was.
    #[test]
    fn first_keys_in_batches_are_the_same_keys() {
        let spend = compressed(&(ProjectivePoint::GENERATOR * scalar(&[7; 32]).unwrap()));
        let mut r = Receiver::new(&[0x21; 32], &spend).unwrap();
        r.add_label(1).unwrap();
        r.add_label(77).unwrap();
        let tweaks: Vec<[u8; 33]> = (1..=37u8)
            .map(|i| compressed(&(ProjectivePoint::GENERATOR * scalar(&[i; 32]).unwrap())))
            .collect();
        let mut one = vec![[9; 32]];
        for t in &tweaks {
            r.first_keys(t, &mut one).unwrap();
        }
        let mut batch = vec![[9; 32]];
        r.first_keys_batch(&tweaks, &mut batch).unwrap();
        // P_0 and three labels (the change label, 1 and 77) a tweak.
        assert_eq!(batch.len(), 1 + 37 * 4);
        assert_eq!(batch, one);
        let mut bad = tweaks.clone();
        bad[20] = [0xff; 33];
        bad[20][0] = 0x02;
        assert_eq!(
            r.first_keys_batch(&bad, &mut batch),
            Err(SilentError::Tweak)
        );
        assert_eq!(batch, one);
    }

    /// An address that breaks a rule is refused with it.
    #[test]
    fn addresses_that_break_a_rule_are_refused() {
        let good = "sp1qqgste7k9hx0qftg6qmwlkqtwuy6cycyavzmzj85c6qdfhjdpdjtdgqjuexzk6murw56suy3e0rd2cgqvycxttddwsvgxe2usfpxumr70xc9pkqwv";
        let a = SpAddress::parse(good).unwrap();
        assert_eq!(a.encode(), good);
        assert_eq!(SpAddress::parse(&good.to_uppercase()), Ok(a));
        let bad = |s: &str| SpAddress::parse(s).unwrap_err();
        // One character changed: the checksum fails.
        let mut typo = good.to_string();
        typo.replace_range(10..11, if &good[10..11] == "q" { "p" } else { "q" });
        assert_eq!(
            bad(&typo),
            SilentError::Address {
                what: "not bech32m"
            }
        );
        // Another prefix, another version with too few bytes, version 31.
        let reencode = |hrp: &str, version: Fe32, bytes: &[u8]| -> String {
            bytes
                .iter()
                .copied()
                .bytes_to_fes()
                .with_checksum::<Bech32m>(&Hrp::parse_unchecked(hrp))
                .with_witness_version(version)
                .chars()
                .collect()
        };
        let mut keys = a.scan.to_vec();
        keys.extend_from_slice(&a.spend);
        assert_eq!(
            bad(&reencode("bc", Fe32::Q, &keys)),
            SilentError::Address {
                what: "its prefix is not sp, tsp or sprt"
            }
        );
        assert_eq!(
            bad(&reencode("sp", Fe32::L, &keys)),
            SilentError::Address {
                what: "version 31 is reserved"
            }
        );
        assert!(matches!(
            bad(&reencode("sp", Fe32::Q, &keys[..65])),
            SilentError::Address { .. }
        ));
        // Version 1 with more bytes: the first 66 are read.
        let mut longer = keys.clone();
        longer.extend_from_slice(&[7; 10]);
        let v1 = SpAddress::parse(&reencode("tsp", Fe32::P, &longer)).unwrap();
        assert_eq!((v1.scan, v1.spend), (a.scan, a.spend));
        assert_eq!(v1.network, SpNetwork::Testnet);
        // Version 0 with more bytes is refused.
        assert!(matches!(
            bad(&reencode("sp", Fe32::Q, &longer)),
            SilentError::Address { .. }
        ));
        // A key off the curve.
        let mut off = keys.clone();
        off[1..33].copy_from_slice(&[0xff; 32]);
        assert_eq!(
            bad(&reencode("sp", Fe32::Q, &off)),
            SilentError::Address {
                what: "a key is not on the curve"
            }
        );
        // Past BIP352's length limit.
        assert!(matches!(
            bad(&"q".repeat(1024)),
            SilentError::Address { .. }
        ));
    }

    /// Keys that are not keys are refused; the scan key does not show in `Debug`.
    #[test]
    fn bad_keys_are_refused_and_the_scan_key_is_not_shown() {
        let spend = compressed(&ProjectivePoint::GENERATOR);
        assert_eq!(
            Receiver::new(&[0; 32], &spend).unwrap_err(),
            SilentError::ScanKey
        );
        assert_eq!(
            Receiver::new(&[0xff; 32], &spend).unwrap_err(),
            SilentError::ScanKey
        );
        let mut not_compressed = spend;
        not_compressed[0] = 4;
        assert_eq!(
            Receiver::new(&[1; 32], &not_compressed).unwrap_err(),
            SilentError::SpendKey
        );
        let r = Receiver::new(&[0x11; 32], &spend).unwrap();
        let shown = format!("{r:?}");
        assert!(
            !shown.contains("11, 17") && !shown.contains("1111"),
            "{shown}"
        );
        let mut found = Vec::new();
        let mut off_curve = [0xff; 33];
        off_curve[0] = 0x02;
        assert_eq!(
            r.scan(&off_curve, &[[1; 32]], &mut found),
            Err(SilentError::Tweak)
        );
        assert_eq!(
            r.scan(&[0xff; 33], &[[1; 32]], &mut found),
            Err(SilentError::Tweak)
        );
    }
}
