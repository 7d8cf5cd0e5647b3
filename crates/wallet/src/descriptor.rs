//! Output script descriptors over an extended public key (BIP380-386), the four a
//! watch-only wallet needs: `pkh(KEY)`, `sh(wpkh(KEY))`, `wpkh(KEY)` and `tr(KEY)` (key path
//! only), where `KEY` is `[origin]xpub/<0;1>/*` (receive and change), `xpub/N/*` (one
//! branch), or a bare `xpub` (taken as `/<0;1>/*`), with fixed unhardened steps allowed
//! before the branch. `tpub` on the test networks. A `#checksum` (BIP380) is checked when
//! given. Private keys, hardened steps after the key, scripts and multisig are refused
//! with a typed error.
//!
//! Every key and script derived is computed twice, by two routes through different code,
//! and taken only when both agree (`agreed`): JavaScriptCore's concurrent JIT in
//! WebKitGTK was seen to compute a wrong child key now and then (one of 224 scripts in
//! about one session in six, a different index each time; not once with that JIT off,
//! nor in Chromium or Firefox: benches/README.md, "A wrong key in WebKit"). A wallet that
//! watches a wrongly derived script hides the payment to the real one, and two sessions
//! that derive differently disagree about what the wallet watches. Bitcoin Core guards
//! its own computation the same way where a wrong value would cost funds: `CKey::Sign`
//! verifies each signature it makes before it uses it. The second route costs one
//! table-driven multiplication by the generator per key. A branch's keys derived together
//! (a wallet watching a descriptor, [`Descriptor::keys_in`]) take the table route each and
//! one check of the whole batch by the generic route instead (see `children`); a batch
//! that fails it is derived again key by key by both routes.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use bip32::{ChildNumber, Prefix, XPub};
use k256::elliptic_curve::PrimeField;
use k256::elliptic_curve::sec1::ToSec1Point;
use lightwire_chain::Network;

use crate::hash;

/// The script kind a descriptor derives.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// `pkh`: P2PKH (BIP44).
    Pkh,
    /// `sh(wpkh)`: P2WPKH nested in P2SH (BIP49).
    ShWpkh,
    /// `wpkh`: P2WPKH (BIP84).
    Wpkh,
    /// `tr`: P2TR, key path only (BIP86).
    Tr,
}

impl Kind {
    /// Its descriptor function, as written.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Pkh => "pkh",
            Kind::ShWpkh => "sh(wpkh",
            Kind::Wpkh => "wpkh",
            Kind::Tr => "tr",
        }
    }
}

/// A descriptor that cannot be watched.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum DescriptorError {
    /// Its `#checksum` is not the one its text has (BIP380).
    #[error("the descriptor's checksum does not match (expected #{expected})")]
    Checksum {
        /// The checksum of the text given.
        expected: String,
    },
    /// Not a descriptor this wallet reads.
    #[error("not a descriptor: {0}")]
    Syntax(&'static str),
    /// A descriptor it does not watch (scripts, multisig, a key path with hardened steps).
    #[error("not supported: {0}")]
    Unsupported(&'static str),
    /// The extended key does not decode (a typo: its checksum does not match).
    #[error("the extended public key does not decode")]
    BadKey,
    /// An extended private key: a watch-only wallet takes the public one only.
    #[error("an extended private key: give the xpub (tpub), never the xprv")]
    PrivateKey,
    /// A key of another network (`xpub` on mainnet, `tpub` on the others).
    #[error("an extended key of another network, not {0}")]
    WrongNetwork(&'static str),
    /// A derived key that cannot be used (BIP32's 1-in-2^127 invalid child, or a
    /// taproot tweak out of range).
    #[error("derivation at index {0} gives an invalid key")]
    InvalidChild(u32),
    /// Two routes through different code derived different keys (or scripts) at this
    /// index, again and again: the machine computes wrong values, and no script is taken
    /// from it (see the module's documentation).
    #[error(
        "the key at index {0} came out different each time it was derived: this engine computes wrong values"
    )]
    Miscomputed(u32),
}

/// A parsed descriptor: its kind, the key its branches hang from, and the branches.
#[derive(Clone)]
pub struct Descriptor {
    /// The script kind.
    pub kind: Kind,
    /// Where the extended key comes from: the master key's fingerprint and the path from
    /// it (as given in `[fingerprint/path]`; without one, the key's own fingerprint and
    /// an empty path), for a signer to find the keys (BIP174's key origins).
    pub origin: KeyOrigin,
    /// The steps after the extended key, before the branch (`xpub/1/2/<0;1>/*`: 1, 2).
    steps: Vec<u32>,
    /// The key after the fixed steps, whose children are the branches.
    base: XPub,
    /// The branches (`<0;1>`: receive and change), or none when indexes hang from `base`.
    pub branches: Vec<Option<u32>>,
    /// The text, with its checksum.
    pub text: String,
}

impl core::fmt::Debug for Descriptor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.text)
    }
}

impl PartialEq for Descriptor {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Descriptor {
    /// Parse `text` for `network`.
    pub fn parse(text: &str, network: Network) -> Result<Descriptor, DescriptorError> {
        let text = text.trim();
        let (body, given) = match text.split_once('#') {
            Some((b, c)) => (b, Some(c)),
            None => (text, None),
        };
        let expected = checksum(body).ok_or(DescriptorError::Syntax(
            "a character descriptors do not use",
        ))?;
        if given.is_some_and(|c| c != expected) {
            return Err(DescriptorError::Checksum { expected });
        }
        let (kind, inner) = if let Some(r) = strip(body, "sh(wpkh(", "))") {
            (Kind::ShWpkh, r)
        } else if let Some(r) = strip(body, "wpkh(", ")") {
            (Kind::Wpkh, r)
        } else if let Some(r) = strip(body, "pkh(", ")") {
            (Kind::Pkh, r)
        } else if let Some(r) = strip(body, "tr(", ")") {
            if r.contains(',') {
                return Err(DescriptorError::Unsupported(
                    "taproot script trees (key path only)",
                ));
            }
            (Kind::Tr, r)
        } else if [
            "sh(",
            "wsh(",
            "multi(",
            "sortedmulti(",
            "combo(",
            "addr(",
            "raw(",
        ]
        .iter()
        .any(|f| body.starts_with(f))
        {
            return Err(DescriptorError::Unsupported(
                "only pkh, sh(wpkh), wpkh and tr over one extended key",
            ));
        } else {
            return Err(DescriptorError::Syntax(
                "expected pkh(, sh(wpkh(, wpkh( or tr(",
            ));
        };
        let parsed = parse_key(inner, network)?;
        let mut canonical = String::from(body);
        canonical.push('#');
        canonical.push_str(&expected);
        Ok(Descriptor {
            kind,
            origin: parsed.origin,
            steps: parsed.steps,
            base: parsed.base,
            branches: parsed.branches,
            text: canonical,
        })
    }

    /// The full derivation path, from the origin's master key, of the key at `index` on
    /// branch `b` (an index into [`Self::branches`]); hardened steps have bit 31 set.
    pub fn path_of(&self, b: usize, index: u32) -> Vec<u32> {
        let mut path = self.origin.path.clone();
        path.extend_from_slice(&self.steps);
        path.extend(self.branches.get(b).copied().flatten());
        path.push(index);
        path
    }

    /// The extended key of branch `b` (an index into [`Self::branches`]).
    pub fn branch_key(&self, b: usize) -> Result<XPub, DescriptorError> {
        match self.branches.get(b).copied().flatten() {
            Some(n) => child(&self.base, n),
            None => Ok(self.base.clone()),
        }
    }

    /// The output script at `index` under the branch key `branch` (from
    /// [`Self::branch_key`]).
    pub fn script_at(&self, branch: &XPub, index: u32) -> Result<Vec<u8>, DescriptorError> {
        let key = child(branch, index)?.to_bytes();
        checked_script_for_key(self.kind, &key, index)
    }

    /// The compressed public key at `index` under the branch key `branch` (for `tr`, the
    /// internal key, before the taproot tweak).
    pub fn key_at(branch: &XPub, index: u32) -> Result<[u8; 33], DescriptorError> {
        Ok(child(branch, index)?.to_bytes())
    }

    /// The compressed public keys at `from..to` under the branch key `branch`, as
    /// [`Self::key_at`] gives each, appended to `out`; cheaper for many (see the module's documentation).
    pub fn keys_in(
        branch: &XPub,
        from: u32,
        to: u32,
        out: &mut Vec<[u8; 33]>,
    ) -> Result<(), DescriptorError> {
        children(branch, from, to, out)
    }
}

/// `body` without `open` and `close`, when it has them.
fn strip<'a>(body: &'a str, open: &str, close: &str) -> Option<&'a str> {
    body.strip_prefix(open)?.strip_suffix(close)
}

/// How a derivation is computed (see [`agreed`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Route {
    /// `bip32`'s derivation, and k256's multiplication of any point (GLV, wNAF).
    Generic,
    /// The same steps written here, and k256's precomputed table for the generator.
    Table,
}

/// How many times two routes are tried before a derivation is given up as miscomputed.
const ATTEMPTS: usize = 3;

/// `by` computed by both routes, taken when both give the same value. `None` from both is
/// BIP32's invalid child at `index` (1 in 2^127). Routes that disagree are tried again, up
/// to [`ATTEMPTS`] times: a wrong value is not taken for a key.
fn agreed<T: PartialEq>(
    index: u32,
    mut by: impl FnMut(Route) -> Option<T>,
) -> Result<T, DescriptorError> {
    for _ in 0..ATTEMPTS {
        match (by(Route::Generic), by(Route::Table)) {
            (Some(a), Some(b)) if a == b => return Ok(a),
            (None, None) => return Err(DescriptorError::InvalidChild(index)),
            _ => {}
        }
    }
    Err(DescriptorError::Miscomputed(index))
}

/// Child `n` (unhardened) of `key`, computed by both routes (see [`agreed`]).
fn child(key: &XPub, n: u32) -> Result<XPub, DescriptorError> {
    let number = ChildNumber::new(n, false).map_err(|_| DescriptorError::InvalidChild(n))?;
    agreed(n, |route| match route {
        Route::Generic => key.derive_child(number).ok(),
        Route::Table => child_by_table(key, n),
    })
}

/// Children `from..to` (unhardened) of `key`, their compressed public keys appended to
/// `out`: each by the table route, the batch checked once by the generic one. Each child
/// by both routes (as [`child`]) costs a multiplication of any point per key, most of a
/// derivation's time (353 us a script in Chromium, both routes, before this); here the
/// generic route checks the sum instead: `sum(children) == n * key + (sum of tweaks) * G`,
/// one multiplication for the batch. A wrong child (or a wrong affine form of it, which is
/// what the bytes are made from) changes the left side alone, so a miscomputed key fails
/// the check unless another wrong one cancels it exactly. Each tweak (HMAC-SHA512) is
/// computed twice and compared, as the two routes compared it. A batch that fails the
/// check is derived again key by key, by both routes ([`child`]): the same keys, or
/// `Miscomputed`, as before.
fn children(
    key: &XPub,
    from: u32,
    to: u32,
    out: &mut Vec<[u8; 33]>,
) -> Result<(), DescriptorError> {
    children_by(key, from, to, out, |parent, tweak, _| {
        *parent + k256::ProjectivePoint::mul_by_generator(tweak)
    })
}

/// [`children`], each child computed by `table` (its parent, its tweak, its index): a
/// test gives one that is wrong.
fn children_by(
    key: &XPub,
    from: u32,
    to: u32,
    out: &mut Vec<[u8; 33]>,
    table: impl Fn(&k256::ProjectivePoint, &k256::Scalar, u32) -> k256::ProjectivePoint,
) -> Result<(), DescriptorError> {
    use k256::elliptic_curve::Group;
    use k256::{ProjectivePoint, Scalar};
    if from >= to {
        return Ok(());
    }
    let parent = ProjectivePoint::from(*key.public_key().as_affine());
    let mut affine = Vec::with_capacity((to - from) as usize);
    let mut tweaks = Scalar::ZERO;
    let mut invalid = false;
    for n in from..to {
        let tweak = agreed(n, |_| tweak_of(key, n).map(|(t, _)| t))?;
        let point = table(&parent, &tweak, n);
        if bool::from(point.is_identity()) {
            // BIP32's invalid child (1 in 2^127), or a wrong point: both routes say which,
            // key by key, below.
            invalid = true;
            break;
        }
        tweaks += tweak;
        // (Normalising in batches of 16, one inversion each, made a script 11% faster in
        // Chromium for 1.9 KB more of module.)
        affine.push(point.to_affine());
    }
    let sum = affine.iter().fold(ProjectivePoint::IDENTITY, |sum, a| {
        sum + ProjectivePoint::from(*a)
    });
    // The generic route: k256's multiplication of any point (GLV, wNAF), not the table.
    let expected =
        parent * Scalar::from(u64::from(to - from)) + ProjectivePoint::GENERATOR * tweaks;
    // Compared in affine form: the module has that equality already (the projective one is
    // 6 KB of code).
    if invalid || sum.to_affine() != expected.to_affine() {
        for n in from..to {
            out.push(child(key, n)?.to_bytes());
        }
        return Ok(());
    }
    out.extend(affine.iter().map(|a| {
        let mut bytes = [0u8; 33];
        bytes.copy_from_slice(a.to_compressed_point().as_ref());
        bytes
    }));
    Ok(())
}

/// BIP32's `I = HMAC-SHA512(chain code, key || n)` for unhardened child `n` of `key`: the
/// tweak `I_L` and the child's chain code `I_R`; `None` when `I_L` is not a valid scalar
/// (BIP32's invalid child).
fn tweak_of(key: &XPub, n: u32) -> Option<(k256::Scalar, [u8; 32])> {
    use hmac::{KeyInit, Mac};
    let mut mac = hmac::Hmac::<sha2::Sha512>::new_from_slice(&key.attrs().chain_code).ok()?;
    mac.update(&key.to_bytes());
    mac.update(&n.to_be_bytes());
    let i = mac.finalize().into_bytes();
    let (left, right) = i.split_at(32);
    let tweak = k256::FieldBytes::try_from(left).ok()?;
    let tweak = Option::<k256::NonZeroScalar>::from(k256::NonZeroScalar::from_repr(tweak))?;
    Some((*tweak, right.try_into().ok()?))
}

/// BIP32's CKDpub, written out: `I = HMAC-SHA512(chain code, key || n)`, the child key
/// `key + I_L * G` (by k256's table for the generator), the chain code `I_R`.
fn child_by_table(key: &XPub, n: u32) -> Option<XPub> {
    let (tweak, chain_code) = tweak_of(key, n)?;
    let parent = k256::ProjectivePoint::from(*key.public_key().as_affine());
    let point = (parent + k256::ProjectivePoint::mul_by_generator(&tweak)).to_affine();
    let public_key = k256::ecdsa::VerifyingKey::from_affine(point).ok()?;
    let attrs = bip32::ExtendedKeyAttrs {
        depth: key.attrs().depth.checked_add(1)?,
        parent_fingerprint: key.fingerprint(),
        child_number: ChildNumber::new(n, false).ok()?,
        chain_code,
    };
    Some(XPub::new(public_key, attrs))
}

/// Where an extended key comes from: the master key's fingerprint, and the path from it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct KeyOrigin {
    /// The first four bytes of HASH160 of the master public key.
    pub fingerprint: [u8; 4],
    /// The steps from the master key (hardened ones with bit 31 set).
    pub path: Vec<u32>,
}

/// Bit 31 of a hardened derivation step.
pub const HARDENED: u32 = 1 << 31;

/// A path as BIP32 writes it: `m/84'/0'/0'/0/5`.
pub fn path_text(path: &[u32]) -> String {
    use core::fmt::Write;
    let mut out = String::from("m");
    for n in path {
        out.push('/');
        let _ = write!(out, "{}", n & !HARDENED);
        if n & HARDENED != 0 {
            out.push('\'');
        }
    }
    out
}

/// The extended public key `text` (base58check, BIP32's 78 bytes) of `network`. Decoded
/// here, with the checksum checked by the SHA-256 the rest of lightwire uses, rather than
/// by `bip32`'s parser, whose base58check brings a second SHA-256 implementation into
/// the package.
fn extended_key(text: &str, network: Network) -> Result<bip32::ExtendedKey, DescriptorError> {
    let bytes = crate::address::base58check(text).ok_or(DescriptorError::BadKey)?;
    let bytes: &[u8; 78] = bytes[..].try_into().map_err(|_| DescriptorError::BadKey)?;
    let version = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let wanted = if network == Network::Mainnet {
        Prefix::XPUB
    } else {
        Prefix::TPUB
    };
    let prefix = match version {
        v if v == wanted.version() => wanted,
        v if v == Prefix::XPRV.version() || v == Prefix::TPRV.version() => {
            return Err(DescriptorError::PrivateKey);
        }
        v if v == Prefix::XPUB.version() || v == Prefix::TPUB.version() => {
            return Err(DescriptorError::WrongNetwork(network.name()));
        }
        _ => {
            return Err(DescriptorError::Unsupported(
                "SLIP-132 prefixes (ypub, zpub): the descriptor says the kind; give the xpub",
            ));
        }
    };
    let array = |r: core::ops::Range<usize>| -> [u8; 32] {
        let mut a = [0u8; 32];
        a[..r.len()].copy_from_slice(&bytes[r]);
        a
    };
    let fingerprint = array(5..9);
    let child = array(9..13);
    let mut key_bytes = [0u8; 33];
    key_bytes.copy_from_slice(&bytes[45..78]);
    Ok(bip32::ExtendedKey {
        prefix,
        attrs: bip32::ExtendedKeyAttrs {
            depth: bytes[4],
            parent_fingerprint: [
                fingerprint[0],
                fingerprint[1],
                fingerprint[2],
                fingerprint[3],
            ],
            child_number: ChildNumber::from_bytes([child[0], child[1], child[2], child[3]]),
            chain_code: array(13..45),
        },
        key_bytes,
    })
}

/// A key expression taken apart (see [`parse_key`]).
struct ParsedKey {
    origin: KeyOrigin,
    steps: Vec<u32>,
    base: XPub,
    branches: Vec<Option<u32>>,
}

impl KeyOrigin {
    /// A key origin as descriptors write it, `[fingerprint/step/...]` (the brackets
    /// optional; steps hardened with `'`, `h` or `H`).
    pub fn parse(text: &str) -> Result<KeyOrigin, DescriptorError> {
        let t = text.trim();
        let t = t
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .unwrap_or(t);
        parse_origin(t)
    }

    /// As [`Self::parse`] reads it, with brackets (`[d34db33f/352h/0h/0h/0h/0]`).
    pub fn text(&self) -> String {
        let f = self.fingerprint;
        let mut t = format!("[{:02x}{:02x}{:02x}{:02x}", f[0], f[1], f[2], f[3]);
        for step in &self.path {
            t.push_str(&format!("/{}", step & !HARDENED));
            if step & HARDENED != 0 {
                t.push('h');
            }
        }
        t.push(']');
        t
    }
}

/// The origin `fingerprint/step/...` (steps hardened with `'`, `h` or `H`).
fn parse_origin(origin: &str) -> Result<KeyOrigin, DescriptorError> {
    let mut parts = origin.split('/');
    let fingerprint = parts.next().unwrap_or_default();
    let mut fp = [0u8; 4];
    if fingerprint.len() != 8 || hex_into(fingerprint, &mut fp).is_none() {
        return Err(DescriptorError::Syntax(
            "a key origin's fingerprint is 8 hex digits",
        ));
    }
    let path = parts
        .map(|step| {
            let (number, hardened) = match step.strip_suffix(['\'', 'h', 'H']) {
                Some(n) => (n, HARDENED),
                None => (step, 0),
            };
            number
                .parse::<u32>()
                .ok()
                .filter(|n| *n < HARDENED)
                .map(|n| n | hardened)
                .ok_or(DescriptorError::Syntax(
                    "a key origin's step is a number below 2^31",
                ))
        })
        .collect::<Result<Vec<u32>, _>>()?;
    Ok(KeyOrigin {
        fingerprint: fp,
        path,
    })
}

/// Hex digits into `out` (exactly its length).
fn hex_into(text: &str, out: &mut [u8]) -> Option<()> {
    let bytes = text.as_bytes();
    if bytes.len() != out.len() * 2 {
        return None;
    }
    for (o, pair) in out.iter_mut().zip(bytes.chunks(2)) {
        let digit = |c: u8| (c as char).to_digit(16);
        *o = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
    }
    Some(())
}

/// The key expression: `[origin]xpub`, then `/N` steps, a `/<a;b>` branch pair or one
/// `/N` branch, and `/*`.
fn parse_key(inner: &str, network: Network) -> Result<ParsedKey, DescriptorError> {
    let mut rest = inner;
    let mut origin = None;
    if let Some(r) = rest.strip_prefix('[') {
        let (given, after) = r
            .split_once(']')
            .ok_or(DescriptorError::Syntax("an unclosed key origin"))?;
        origin = Some(parse_origin(given)?);
        rest = after;
    }
    let mut parts = rest.split('/');
    let key_text = parts.next().unwrap_or_default();
    let extended = extended_key(key_text, network)?;
    let mut key = XPub::try_from(extended).map_err(|_| DescriptorError::BadKey)?;
    // Without an origin, the key is its own master: its fingerprint, an empty path.
    let origin = origin.unwrap_or_else(|| KeyOrigin {
        fingerprint: key.fingerprint(),
        path: Vec::new(),
    });
    let steps: Vec<&str> = parts.collect();
    if steps.is_empty() {
        // A bare key: its receive and change branches.
        return Ok(ParsedKey {
            origin,
            steps: Vec::new(),
            base: key,
            branches: alloc::vec![Some(0), Some(1)],
        });
    }
    let (last, fixed) = steps.split_last().unwrap_or((&"", &[]));
    if *last != "*" {
        return Err(DescriptorError::Unsupported(
            "a single key: descriptors here end in /*",
        ));
    }
    let mut branches = alloc::vec![None];
    let mut fixed_steps = Vec::new();
    for (i, step) in fixed.iter().enumerate() {
        let is_branch = i + 1 == fixed.len();
        if let Some(pair) = step.strip_prefix('<').and_then(|s| s.strip_suffix('>')) {
            if !is_branch {
                return Err(DescriptorError::Syntax(
                    "a <a;b> step must be the one before /*",
                ));
            }
            let numbers: Result<Vec<u32>, _> = pair.split(';').map(step_number).collect();
            branches = numbers?.into_iter().map(Some).collect();
            if branches.len() < 2 {
                return Err(DescriptorError::Syntax("<a;b> takes two branches or more"));
            }
            continue;
        }
        let n = step_number(step)?;
        if is_branch {
            branches = alloc::vec![Some(n)];
        } else {
            key = child(&key, n)?;
            fixed_steps.push(n);
        }
    }
    Ok(ParsedKey {
        origin,
        steps: fixed_steps,
        base: key,
        branches,
    })
}

fn step_number(step: &str) -> Result<u32, DescriptorError> {
    if step.ends_with(['\'', 'h', 'H']) {
        return Err(DescriptorError::Unsupported(
            "hardened steps after an extended public key (they need the private key)",
        ));
    }
    step.parse::<u32>()
        .ok()
        .filter(|n| *n < 1 << 31)
        .ok_or(DescriptorError::Syntax(
            "a derivation step is a number below 2^31",
        ))
}

/// The output script of `kind` for the compressed public key `key` (`None` for a taproot
/// key whose tweak is out of range).
pub fn script_for_key(kind: Kind, key: &[u8; 33]) -> Option<Vec<u8>> {
    script_by(Route::Generic, kind, key)
}

/// The output script of `kind` for `key` at `index`, computed by both routes (see
/// `agreed`).
pub fn checked_script_for_key(
    kind: Kind,
    key: &[u8; 33],
    index: u32,
) -> Result<Vec<u8>, DescriptorError> {
    agreed(index, |route| script_by(route, kind, key))
}

fn script_by(route: Route, kind: Kind, key: &[u8; 33]) -> Option<Vec<u8>> {
    Some(match kind {
        Kind::Pkh => hash::p2pkh(&hash::hash160(key)),
        Kind::Wpkh => hash::witness(0, &hash::hash160(key)),
        Kind::ShWpkh => hash::p2sh(&hash::hash160(&hash::witness(0, &hash::hash160(key)))),
        Kind::Tr => hash::witness(1, &taproot_output_key(route, key)?),
    })
}

/// BIP86/BIP341: the output key of internal key `key` with no script tree: the x-only
/// key lifted to even y, plus `hash_TapTweak(x)` times the generator (by `route`'s
/// multiplication).
fn taproot_output_key(route: Route, key: &[u8; 33]) -> Option<[u8; 32]> {
    let mut even = *key;
    even[0] = 0x02;
    let p = k256::PublicKey::from_sec1_bytes(&even).ok()?;
    let t = hash::tagged("TapTweak", &key[1..]);
    let t = Option::<k256::Scalar>::from(k256::Scalar::from_repr(t.into()))?;
    let tweak = match route {
        Route::Generic => k256::ProjectivePoint::GENERATOR * t,
        Route::Table => k256::ProjectivePoint::mul_by_generator(&t),
    };
    let q = (p.to_projective() + tweak).to_affine();
    let compressed = q.to_compressed_point();
    let mut x = [0u8; 32];
    x.copy_from_slice(&compressed[1..33]);
    Some(x)
}

/// BIP380's descriptor checksum of `body` (8 characters), or `None` for a character
/// outside descriptors' set.
pub fn checksum(body: &str) -> Option<String> {
    const INPUT: &str = "0123456789()[],'/*abcdefgh@:$%{}IJKLMNOPQRSTUVWXYZ&+-.;<=>?!^_|~ijklmnopqrstuvwxyzABCDEFGH`#\"\\ ";
    const CHECKSUM: &[u8] = b"qpzry9x8gf2tvdw0s3jn54khce6mua7l";
    const GENERATOR: [u64; 5] = [
        0xf5dee51989,
        0xa9fdca3312,
        0x1bab10e32d,
        0x3706b1677a,
        0x644d626ffd,
    ];
    let polymod = |c: u64, value: u64| {
        let top = c >> 35;
        let mut c = ((c & 0x7_ffff_ffff) << 5) ^ value;
        for (i, g) in GENERATOR.iter().enumerate() {
            if (top >> i) & 1 == 1 {
                c ^= g;
            }
        }
        c
    };
    let mut c = 1u64;
    let mut groups = [0u64; 3];
    let mut n = 0;
    for ch in body.chars() {
        let v = INPUT.find(ch)? as u64;
        c = polymod(c, v & 31);
        groups[n] = v >> 5;
        n += 1;
        if n == 3 {
            c = polymod(c, groups[0] * 9 + groups[1] * 3 + groups[2]);
            n = 0;
        }
    }
    match n {
        1 => c = polymod(c, groups[0]),
        2 => c = polymod(c, groups[0] * 3 + groups[1]),
        _ => {}
    }
    for _ in 0..8 {
        c = polymod(c, 0);
    }
    c ^= 1;
    Some(
        (0..8)
            .map(|i| CHECKSUM[((c >> (5 * (7 - i))) & 31) as usize] as char)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use core::str::FromStr;

    use super::*;
    use crate::address_of;

    /// BIP84's account 0 (m/84'/0'/0') of the "abandon ... about" mnemonic.
    const BIP84: &str = "xpub6CatWdiZiodmUeTDp8LT5or8nmbKNcuyvz7WyksVFkKB4RHwCD3XyuvPEbvqAQY3rAPshWcMLoP2fMFMKHPJ4ZeZXYVUhLv1VMrjPC7PW6V";
    /// BIP86's account 0 (m/86'/0'/0') of the same mnemonic.
    const BIP86: &str = "xpub6BgBgsespWvERF3LHQu6CnqdvfEvtMcQjYrcRzx53QJjSxarj2afYWcLteoGVky7D3UKDP9QyrLprQ3VCECoY49yfdDEHGCtMMj92pReUsQ";

    fn addresses(d: &Descriptor, branch: usize, n: u32) -> Vec<String> {
        let key = d.branch_key(branch).unwrap();
        (0..n)
            .map(|i| address_of(&d.script_at(&key, i).unwrap(), Network::Mainnet).unwrap())
            .collect()
    }

    #[test]
    fn bip84_and_bip86_accounts_derive_their_addresses() {
        let d =
            Descriptor::parse(&alloc::format!("wpkh({BIP84}/<0;1>/*)"), Network::Mainnet).unwrap();
        assert_eq!(d.kind, Kind::Wpkh);
        assert_eq!(
            addresses(&d, 0, 2),
            [
                "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu",
                "bc1qnjg0jd8228aq7egyzacy8cys3knf9xvrerkf9g"
            ]
        );
        assert_eq!(
            addresses(&d, 1, 1),
            ["bc1q8c6fshw2dlwun7ekn9qwf37cu2rn755upcp6el"]
        );
        // A bare key is its receive and change branches.
        let bare = Descriptor::parse(
            &alloc::format!("[73c5da0a/84h/0h/0h]{BIP84}"),
            Network::Mainnet,
        );
        assert!(bare.is_err(), "a key is not a descriptor");
        let bare = Descriptor::parse(
            &alloc::format!("wpkh([73c5da0a/84h/0h/0h]{BIP84})"),
            Network::Mainnet,
        )
        .unwrap();
        assert_eq!(bare.branches, [Some(0), Some(1)]);
        assert_eq!(addresses(&bare, 1, 1), addresses(&d, 1, 1));

        let t =
            Descriptor::parse(&alloc::format!("tr({BIP86}/<0;1>/*)"), Network::Mainnet).unwrap();
        assert_eq!(
            addresses(&t, 0, 2),
            [
                "bc1p5cyxnuxmeuwuvkwfem96lqzszd02n6xdcjrs20cac6yqjjwudpxqkedrcr",
                "bc1p4qhjn9zdvkux4e44uhx8tc55attvtyu358kutcqkudyccelu0was9fqzwh"
            ]
        );
        assert_eq!(
            addresses(&t, 1, 1),
            ["bc1p3qkhfews2uk44qtvauqyr2ttdsw7svhkl9nkm9s9c3x4ax5h60wqwruhk7"]
        );
        // One branch only.
        let r = Descriptor::parse(&alloc::format!("tr({BIP86}/1/*)"), Network::Mainnet).unwrap();
        assert_eq!(r.branches, [Some(1)]);
        assert_eq!(addresses(&r, 0, 1), addresses(&t, 1, 1));
        // The same key as pkh and sh(wpkh): P2PKH and P2SH addresses.
        let p = Descriptor::parse(&alloc::format!("pkh({BIP84}/0/*)"), Network::Mainnet).unwrap();
        assert!(addresses(&p, 0, 1)[0].starts_with('1'));
        let s =
            Descriptor::parse(&alloc::format!("sh(wpkh({BIP84}/0/*))"), Network::Mainnet).unwrap();
        assert!(addresses(&s, 0, 1)[0].starts_with('3'));
    }

    /// BIP32's test vector 1, from the public keys: m/0H to m/0H/1, and m/0H/1/2H/2 to
    /// m/0H/1/2H/2/1000000000.
    #[test]
    fn bip32_public_derivation_matches_its_vectors() {
        let pairs = [
            (
                "xpub68Gmy5EdvgibQVfPdqkBBCHxA5htiqg55crXYuXoQRKfDBFA1WEjWgP6LHhwBZeNK1VTsfTFUHCdrfp1bgwQ9xv5ski8PX9rL2dZXvgGDnw",
                1,
                "xpub6ASuArnXKPbfEwhqN6e3mwBcDTgzisQN1wXN9BJcM47sSikHjJf3UFHKkNAWbWMiGj7Wf5uMash7SyYq527Hqck2AxYysAA7xmALppuCkwQ",
            ),
            (
                "xpub6FHa3pjLCk84BayeJxFW2SP4XRrFd1JYnxeLeU8EqN3vDfZmbqBqaGJAyiLjTAwm6ZLRQUMv1ZACTj37sR62cfN7fe5JnJ7dh8zL4fiyLHV",
                1_000_000_000,
                "xpub6H1LXWLaKsWFhvm6RVpEL9P4KfRZSW7abD2ttkWP3SSQvnyA8FSVqNTEcYFgJS2UaFcxupHiYkro49S8yGasTvXEYBVPamhGW6cFJodrTHy",
            ),
        ];
        for (parent, n, want) in pairs {
            let parent = XPub::from_str(parent).unwrap();
            let got = child(&parent, n).unwrap();
            assert_eq!(got.to_extended_key(Prefix::XPUB).to_string(), want);
            // Each route alone gives the vector too.
            let by_table = child_by_table(&parent, n).unwrap();
            assert_eq!(by_table.to_extended_key(Prefix::XPUB).to_string(), want);
            let generic = parent.derive_child(ChildNumber::new(n, false).unwrap());
            assert_eq!(
                generic.unwrap().to_extended_key(Prefix::XPUB).to_string(),
                want
            );
        }
    }

    /// Keys derived in a batch are the keys derived one by one (both routes each), from
    /// any start; a batch with one wrong child (as JavaScriptCore's JIT computed one) fails
    /// its check and is derived again key by key: the wrong key is never given out.
    #[test]
    fn a_batch_of_keys_is_each_key_and_a_wrong_one_is_caught() {
        let d = Descriptor::parse(
            "wpkh([d34db33f/84'/0'/0']xpub6CatWdiZiodmUeTDp8LT5or8nmbKNcuyvz7WyksVFkKB4RHwCD3XyuvPEbvqAQY3rAPshWcMLoP2fMFMKHPJ4ZeZXYVUhLv1VMrjPC7PW6V/<0;1>/*)",
            Network::Mainnet,
        )
        .unwrap();
        let branch = d.branch_key(0).unwrap();
        let one_by_one: Vec<[u8; 33]> = (0..70)
            .map(|i| Descriptor::key_at(&branch, i).unwrap())
            .collect();
        for (from, to) in [(0, 70), (5, 6), (17, 53), (69, 70), (3, 3)] {
            let mut batch = Vec::new();
            Descriptor::keys_in(&branch, from, to, &mut batch).unwrap();
            assert_eq!(
                batch,
                one_by_one[from as usize..to as usize],
                "{from}..{to}"
            );
        }
        // Child 12 computed wrongly (its tweak's point doubled) in the batch.
        let wrong = |parent: &k256::ProjectivePoint, tweak: &k256::Scalar, n: u32| {
            let g = k256::ProjectivePoint::mul_by_generator(tweak);
            *parent + if n == 12 { g.double() } else { g }
        };
        let mut batch = Vec::new();
        children_by(&branch, 0, 70, &mut batch, wrong).unwrap();
        assert_eq!(batch, one_by_one);
        // The check is what caught it: without it, the batch would hold the wrong key.
        let parent = k256::ProjectivePoint::from(*branch.public_key().as_affine());
        let unchecked: Vec<[u8; 33]> = (0..70)
            .map(|n| {
                let p = wrong(&parent, &tweak_of(&branch, n).unwrap().0, n).to_affine();
                let mut bytes = [0u8; 33];
                bytes.copy_from_slice(p.to_compressed_point().as_ref());
                bytes
            })
            .collect();
        assert_ne!(unchecked[12], one_by_one[12]);
        assert_eq!(unchecked[..12], one_by_one[..12]);
    }

    /// A route that computes a wrong value (as JavaScriptCore's concurrent JIT did) is
    /// outvoted by trying again; one that never agrees gives a typed error, never a key;
    /// both routes finding BIP32's invalid child say so.
    #[test]
    fn a_wrong_value_from_one_route_is_never_taken() {
        let mut calls = 0;
        let once_wrong = agreed(7, |route| {
            calls += 1;
            Some(if route == Route::Generic && calls == 1 {
                666
            } else {
                42
            })
        });
        assert_eq!(once_wrong, Ok(42));
        assert_eq!(calls, 4, "tried again after the disagreement");
        let always = agreed(7, |route| Some(if route == Route::Table { 1 } else { 2 }));
        assert_eq!(always, Err(DescriptorError::Miscomputed(7)));
        let one_fails = agreed(9, |route| (route == Route::Generic).then_some(1));
        assert_eq!(one_fails, Err(DescriptorError::Miscomputed(9)));
        assert_eq!(
            agreed::<u8>(3, |_| None),
            Err(DescriptorError::InvalidChild(3))
        );
    }

    /// The taproot tweak by either multiplication gives BIP86's first receive output.
    #[test]
    fn both_routes_give_bip86s_output_key() {
        // BIP86's test vector: m/86'/0'/0'/0/0.
        let internal: [u8; 33] = {
            let mut k = [0x02; 33];
            k[1..].copy_from_slice(
                &hex::decode("cc8a4bc64d897bddc5fbc2f670f7a8ba0b386779106cf1223c6fc5d7cd6fc115")
                    .unwrap(),
            );
            k
        };
        let want = "a60869f0dbcf1dc659c9cecbaf8050135ea9e8cdc487053f1dc6880949dc684c";
        for route in [Route::Generic, Route::Table] {
            let q = taproot_output_key(route, &internal).unwrap();
            assert_eq!(hex::encode(q), want, "{route:?}");
        }
    }

    #[test]
    fn checksums_are_bip380s() {
        // SLIP-0014's account descriptor, with its checksum, in both hardened notations'
        // own checksums.
        let body = "pkh([5c9e228d/44'/0'/0']xpub6BiVtCpG9fQPxnPmHXG8PhtzQdWC2Su4qWu6XW9tpWFYhxydCLJGrWBJZ5H6qTAHdPQ7pQhtpjiYZVZARo14qHiay2fvrX996oEP42u8wZy/0/*)";
        assert_eq!(checksum(body).as_deref(), Some("vzuemqzv"));
        let d = Descriptor::parse(&alloc::format!("{body}#vzuemqzv"), Network::Mainnet).unwrap();
        assert_eq!(d.text, alloc::format!("{body}#vzuemqzv"));
        assert_eq!(
            Descriptor::parse(&alloc::format!("{body}#vzuemqzw"), Network::Mainnet),
            Err(DescriptorError::Checksum {
                expected: "vzuemqzv".into()
            })
        );
    }

    #[test]
    fn what_cannot_be_watched_is_a_typed_error() {
        let parse = |s: String| Descriptor::parse(&s, Network::Mainnet).map(|_| ());
        // A private key: refused, and never kept.
        let xprv = "xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHi";
        assert_eq!(
            parse(alloc::format!("wpkh({xprv}/0/*)")),
            Err(DescriptorError::PrivateKey)
        );
        // A tpub on mainnet, an xpub on regtest.
        let tpub = XPub::from_str(BIP84)
            .unwrap()
            .to_extended_key(Prefix::TPUB)
            .to_string();
        assert_eq!(
            parse(alloc::format!("wpkh({tpub}/0/*)")),
            Err(DescriptorError::WrongNetwork("mainnet"))
        );
        assert!(Descriptor::parse(&alloc::format!("wpkh({tpub}/0/*)"), Network::Regtest).is_ok());
        assert_eq!(
            Descriptor::parse(&alloc::format!("wpkh({BIP84}/0/*)"), Network::Regtest).map(|_| ()),
            Err(DescriptorError::WrongNetwork("regtest"))
        );
        // A typo in the key.
        let typo = BIP84.replace('W', "X");
        assert_eq!(
            parse(alloc::format!("wpkh({typo}/0/*)")),
            Err(DescriptorError::BadKey)
        );
        // Hardened steps after the key, scripts, multisig, script trees, other shapes.
        assert!(matches!(
            parse(alloc::format!("wpkh({BIP84}/0h/*)")),
            Err(DescriptorError::Unsupported(_))
        ));
        assert!(matches!(
            parse(alloc::format!("wsh(multi(1,{BIP84}/0/*))")),
            Err(DescriptorError::Unsupported(_))
        ));
        assert!(matches!(
            parse(alloc::format!("tr({BIP84}/0/*,pk({BIP86}/0/*))")),
            Err(DescriptorError::Unsupported(_))
        ));
        assert!(matches!(
            parse(alloc::format!("wpkh({BIP84}/0/1)")),
            Err(DescriptorError::Unsupported(_))
        ));
        assert!(matches!(
            parse(alloc::format!("wpkh({BIP84}/<0;1>/2/*)")),
            Err(DescriptorError::Syntax(_))
        ));
        assert!(matches!(
            parse("wpkh(".into()),
            Err(DescriptorError::BadKey | DescriptorError::Syntax(_))
        ));
        assert!(matches!(
            parse("nonsense".into()),
            Err(DescriptorError::Syntax(_))
        ));
        assert!(matches!(
            parse("wpkh(é)".into()),
            Err(DescriptorError::Syntax(_))
        ));
    }

    /// The key origin and the full path of each derived key, as a signer needs them
    /// (BIP174): the given origin, the fixed steps, the branch and the index; without an
    /// origin, the key's own fingerprint and the path from it.
    #[test]
    fn origins_and_paths_reach_back_to_the_master_key() {
        let d = Descriptor::parse(
            &format!("wpkh([d34db33f/84h/0'/0H]{BIP84}/<0;1>/*)"),
            Network::Mainnet,
        )
        .unwrap();
        assert_eq!(d.origin.fingerprint, [0xd3, 0x4d, 0xb3, 0x3f]);
        let h = |n: u32| n | HARDENED;
        assert_eq!(d.origin.path, [h(84), h(0), h(0)]);
        assert_eq!(d.path_of(1, 7), [h(84), h(0), h(0), 1, 7]);
        assert_eq!(path_text(&d.path_of(1, 7)), "m/84'/0'/0'/1/7");
        let bare = Descriptor::parse(&format!("tr({BIP86}/3/<0;1>/*)"), Network::Mainnet).unwrap();
        assert_eq!(bare.origin.path, [] as [u32; 0]);
        let given: XPub = BIP86.parse().unwrap();
        assert_eq!(bare.origin.fingerprint, given.fingerprint());
        assert_eq!(bare.path_of(0, 2), [3, 0, 2]);
        for bad in [
            "[d34db33f/84x]",
            "[d34db3/84h]",
            "[d34db33g]",
            "[d34db33f/2147483648]",
        ] {
            assert!(
                matches!(
                    Descriptor::parse(&format!("wpkh({bad}{BIP84}/*)"), Network::Mainnet),
                    Err(DescriptorError::Syntax(_))
                ),
                "{bad}"
            );
        }
    }
}
