//! Shared pieces of the lightwire-noise fuzz targets: the fixed keys and the valid acts
//! they produce, the oracle for each act (what a correct implementation must answer for
//! any bytes), a connected pair, and the cursor that reads structure out of fuzz input
//! (re-exported from lightwire-fuzz-support, with [`ReadSecretKey`] added here).
//!
//! Every input layout is documented in the target that reads it; `examples/seeds.rs`
//! writes a starting corpus in those layouts.
#![forbid(unsafe_code)]

use std::sync::OnceLock;

use lightwire_noise::{
    ACT_ONE_LEN, ACT_THREE_LEN, ACT_TWO_LEN, FrameBuffer, HANDSHAKE_VERSION, HandshakeError,
    Initiator, PublicKey, Responder, SecretKey, Transport,
};

/// The input reader shared by every fuzz project (`crates/fuzz-support`), re-exported so
/// that the targets take everything from this crate.
pub use lightwire_fuzz_support::Cursor;

/// The initiator's static key byte (`[0x11; 32]`), as in the crate's own tests.
pub const INITIATOR_STATIC: u8 = 0x11;
/// The initiator's ephemeral key byte.
pub const INITIATOR_EPHEMERAL: u8 = 0x12;
/// The responder's static key byte.
pub const RESPONDER_STATIC: u8 = 0x21;
/// The responder's ephemeral key byte.
pub const RESPONDER_EPHEMERAL: u8 = 0x22;

/// The secret key `[b; 32]` (valid for every byte used here).
pub fn key(b: u8) -> SecretKey {
    SecretKey::from_bytes(&[b; 32]).expect("a fixed fuzz key is a valid secret key")
}

/// The acts of the handshake between the fixed keys.
pub struct Acts {
    /// Act one from the fixed initiator.
    pub one: [u8; ACT_ONE_LEN],
    /// Act two from the fixed responder, answering `one`.
    pub two: [u8; ACT_TWO_LEN],
    /// Act three from the fixed initiator, answering `two`.
    pub three: [u8; ACT_THREE_LEN],
}

/// The valid acts between the fixed keys, computed once per process.
pub fn valid_acts() -> &'static Acts {
    static ACTS: OnceLock<Acts> = OnceLock::new();
    ACTS.get_or_init(|| {
        let (initiator, one) = start_initiator(key(INITIATOR_STATIC), key(INITIATOR_EPHEMERAL));
        let (responder, two) = Responder::start(key(RESPONDER_STATIC), key(RESPONDER_EPHEMERAL))
            .read_act_one(&one)
            .expect("fixed act one");
        let (three, _) = initiator.read_act_two(&two).expect("fixed act two");
        responder.read_act_three(&three).expect("fixed act three");
        Acts { one, two, three }
    })
}

/// An initiator dialling the fixed responder.
pub fn start_initiator(
    local_static: SecretKey,
    ephemeral: SecretKey,
) -> (lightwire_noise::AwaitingActTwo, [u8; ACT_ONE_LEN]) {
    Initiator::start(local_static, key(RESPONDER_STATIC).public_key(), ephemeral)
}

/// A connected (initiator, responder) pair from a real handshake between the fixed keys.
/// The handshake runs once per process and each call gets fresh copies (test-util's
/// `Clone`): four ECDHs per input held the frame target to ~45 runs/s.
pub fn connected_pair() -> (Transport, Transport) {
    static PAIR: OnceLock<(Transport, Transport)> = OnceLock::new();
    let (initiator, responder) = PAIR.get_or_init(handshake);
    (initiator.clone(), responder.clone())
}

fn handshake() -> (Transport, Transport) {
    let acts = valid_acts();
    let (initiator, _) = start_initiator(key(INITIATOR_STATIC), key(INITIATOR_EPHEMERAL));
    let (responder, _) = Responder::start(key(RESPONDER_STATIC), key(RESPONDER_EPHEMERAL))
        .read_act_one(&acts.one)
        .expect("fixed act one");
    let (_, initiator) = initiator.read_act_two(&acts.two).expect("fixed act two");
    let responder = responder
        .read_act_three(&acts.three)
        .expect("fixed act three");
    (initiator, responder)
}

/// Check that two transports from one handshake talk: a message each way, through
/// frames sealed by one and opened by the other.
pub fn assert_talk(initiator: &mut Transport, responder: &mut Transport) {
    let mut buf = FrameBuffer::new();
    let message = b"initiator to responder";
    let mut frame = buf
        .encrypt(initiator.sender(), message)
        .expect("seal")
        .to_vec();
    let opened = responder
        .receiver()
        .open_frame(&mut frame)
        .expect("initiator's frame opens");
    assert_eq!(opened, message);
    let message = b"responder to initiator";
    let mut frame = buf
        .encrypt(responder.sender(), message)
        .expect("seal")
        .to_vec();
    let opened = initiator
        .receiver()
        .open_frame(&mut frame)
        .expect("responder's frame opens");
    assert_eq!(opened, message);
}

/// The first index where `a` and `b` differ, within their common length.
///
/// Written without `memcmp` and without wide integer comparisons on purpose: libFuzzer
/// intercepts `memcmp`/`bcmp` and 4- and 8-byte comparisons and adds both operands to
/// its dictionary, so comparing input with a valid act (or frame) made from an
/// input-chosen key in one run hands that valid act to later runs, whose oracle does not
/// know it is valid (this produced a false "act one accepted" report). Byte comparisons
/// and the OR of XORs below give it nothing to copy.
pub fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    const BLOCK: usize = 64;
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut start = 0;
    while start < n {
        let end = (start + BLOCK).min(n);
        let (x, y) = (&a[start..end], &b[start..end]);
        if x.iter().zip(y).fold(0u8, |acc, (p, q)| acc | (p ^ q)) != 0 {
            return x.iter().zip(y).position(|(p, q)| p != q).map(|i| start + i);
        }
        start = end;
    }
    None
}

/// Whether `a` and `b` hold the same bytes; see [`first_difference`] for why not `==`.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && first_difference(a, b).is_none()
}

/// Every error's text starts with its specification name.
pub fn assert_describes(e: HandshakeError) {
    let text = e.to_string();
    assert!(text.starts_with(e.code()), "{e:?} displays as {text:?}");
}

/// The one reading of fuzz input that needs lightwire-noise's types, kept here so that
/// lightwire-fuzz-support stays without dependencies; a trait so that the targets still
/// write `input.secret_key()`.
pub trait ReadSecretKey {
    /// A secret key from the next 32 bytes, if there are 32 and they form one.
    fn secret_key(&mut self) -> Option<SecretKey>;
}

impl ReadSecretKey for Cursor<'_> {
    fn secret_key(&mut self) -> Option<SecretKey> {
        SecretKey::from_slice(self.bytes(32)).ok()
    }
}

/// How an act target turns its input into the act it feeds, chosen by bits 1.. of the
/// selector byte (bit 0 says whether a second, input-keyed peer takes part).
///
/// * raw: the act is `mask` itself;
/// * xor: the valid act, same length, XOR `mask` (a short mask leaves the tail alone,
///   extra mask bytes are ignored), so most inputs get past the length and version
///   checks;
/// * xor-resize: the valid act XOR `mask`, cut or extended to `mask`'s length (extra
///   mask bytes are appended as they are).
pub fn shape_act(selector: u8, valid: &[u8], mask: &[u8]) -> Vec<u8> {
    match (selector >> 1) % 3 {
        0 => mask.to_vec(),
        1 => {
            let mut act = valid.to_vec();
            for (b, m) in act.iter_mut().zip(mask) {
                *b ^= m;
            }
            act
        }
        _ => mask
            .iter()
            .enumerate()
            .map(|(i, m)| valid.get(i).copied().unwrap_or(0) ^ m)
            .collect(),
    }
}

/// What reading `act` as act one or act two must give, when the acts in `valid` are the
/// only valid ones the fuzzer can present: the length, then the version, then the
/// ephemeral key's encoding are checked in that order, and a MAC cannot be forged, so
/// any other well-formed act fails its MAC.
fn expect_ephemeral_act(
    act: &[u8],
    expected_len: usize,
    valid: &[&[u8]],
    read_failed: fn(usize) -> HandshakeError,
    bad_version: fn(u8) -> HandshakeError,
    bad_pubkey: HandshakeError,
    bad_tag: HandshakeError,
) -> Result<(), HandshakeError> {
    if act.len() != expected_len {
        return Err(read_failed(act.len()));
    }
    if act[0] != HANDSHAKE_VERSION {
        return Err(bad_version(act[0]));
    }
    if PublicKey::from_slice(&act[1..34]).is_err() {
        return Err(bad_pubkey);
    }
    if valid.iter().any(|v| same(v, act)) {
        Ok(())
    } else {
        Err(bad_tag)
    }
}

/// The oracle for act one; see [`expect_ephemeral_act`].
pub fn expect_act_one(act: &[u8], valid: &[&[u8]]) -> Result<(), HandshakeError> {
    expect_ephemeral_act(
        act,
        ACT_ONE_LEN,
        valid,
        |len| HandshakeError::Act1ReadFailed { len },
        |version| HandshakeError::Act1BadVersion { version },
        HandshakeError::Act1BadPubkey,
        HandshakeError::Act1BadTag,
    )
}

/// The oracle for act two; see [`expect_ephemeral_act`].
pub fn expect_act_two(act: &[u8], valid: &[&[u8]]) -> Result<(), HandshakeError> {
    expect_ephemeral_act(
        act,
        ACT_TWO_LEN,
        valid,
        |len| HandshakeError::Act2ReadFailed { len },
        |version| HandshakeError::Act2BadVersion { version },
        HandshakeError::Act2BadPubkey,
        HandshakeError::Act2BadTag,
    )
}

/// The oracle for act three, when the acts in `valid` (all answering the same act two)
/// are the only valid ones the fuzzer can present: length, version, then the sealed
/// static key (bytes 1..50, which only a holder of the handshake keys can seal), then
/// the final tag. `Act3BadPubkey` needs a correctly sealed invalid key, which no input
/// can produce without the handshake's secrets.
pub fn expect_act_three(act: &[u8], valid: &[&[u8]]) -> Result<(), HandshakeError> {
    if act.len() != ACT_THREE_LEN {
        return Err(HandshakeError::Act3ReadFailed { len: act.len() });
    }
    if act[0] != HANDSHAKE_VERSION {
        return Err(HandshakeError::Act3BadVersion { version: act[0] });
    }
    match valid.iter().find(|v| same(&v[1..50], &act[1..50])) {
        None => Err(HandshakeError::Act3BadCiphertext),
        Some(v) if same(&v[50..], &act[50..]) => Ok(()),
        Some(_) => Err(HandshakeError::Act3BadTag),
    }
}
