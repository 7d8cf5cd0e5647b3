//! The three-act Noise XK handshake, as typestates: each act consumes the state that
//! expects it, so an act cannot be replayed or skipped, and a failed act drops every
//! secret of the attempt.

use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use crate::cipher::{self, Secret, hkdf};
use crate::keys::{PublicKey, SecretKey, ecdh};
use crate::observe::{Observer, Silent};
use crate::transport::Transport;
use crate::{ACT_ONE_LEN, ACT_THREE_LEN, ACT_TWO_LEN, HANDSHAKE_VERSION, MAC_LEN};

const PROTOCOL_NAME: &[u8] = b"Noise_XK_secp256k1_ChaChaPoly_SHA256";
const PROLOGUE: &[u8] = b"lightning";

/// A handshake failure; each variant is one failure the BOLT 8 specification names.
/// The connection must be closed after any of them. Each message starts with the
/// variant's [`code`](HandshakeError::code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// Act one was not exactly 50 bytes.
    #[error("{}: act one must be {ACT_ONE_LEN} bytes, got {len}", self.code())]
    Act1ReadFailed {
        /// Bytes received.
        len: usize,
    },
    /// Act one carried a handshake version other than 0.
    #[error("{}: unknown handshake version {version}", self.code())]
    Act1BadVersion {
        /// The version byte received.
        version: u8,
    },
    /// Act one's ephemeral key is not a compressed secp256k1 point.
    #[error("{}: ephemeral key is not a compressed secp256k1 point", self.code())]
    Act1BadPubkey,
    /// Act one's MAC did not verify (wrong responder key, or tampering).
    #[error("{}: MAC check failed", self.code())]
    Act1BadTag,
    /// Act two was not exactly 50 bytes.
    #[error("{}: act two must be {ACT_TWO_LEN} bytes, got {len}", self.code())]
    Act2ReadFailed {
        /// Bytes received.
        len: usize,
    },
    /// Act two carried a handshake version other than 0.
    #[error("{}: unknown handshake version {version}", self.code())]
    Act2BadVersion {
        /// The version byte received.
        version: u8,
    },
    /// Act two's ephemeral key is not a compressed secp256k1 point.
    #[error("{}: ephemeral key is not a compressed secp256k1 point", self.code())]
    Act2BadPubkey,
    /// Act two's MAC did not verify.
    #[error("{}: MAC check failed", self.code())]
    Act2BadTag,
    /// Act three was not exactly 66 bytes.
    #[error("{}: act three must be {ACT_THREE_LEN} bytes, got {len}", self.code())]
    Act3ReadFailed {
        /// Bytes received.
        len: usize,
    },
    /// Act three carried a handshake version other than 0.
    #[error("{}: unknown handshake version {version}", self.code())]
    Act3BadVersion {
        /// The version byte received.
        version: u8,
    },
    /// Act three's sealed static key did not verify.
    #[error("{}: sealed static key failed its MAC", self.code())]
    Act3BadCiphertext,
    /// Act three's static key decrypted, but is not a compressed secp256k1 point.
    #[error("{}: static key is not a compressed secp256k1 point", self.code())]
    Act3BadPubkey,
    /// Act three's final MAC did not verify.
    #[error("{}: MAC check failed", self.code())]
    Act3BadTag,
}

impl HandshakeError {
    /// The failure's name in the specification's test vectors, e.g. `ACT2_BAD_VERSION`.
    pub fn code(&self) -> &'static str {
        match self {
            HandshakeError::Act1ReadFailed { .. } => "ACT1_READ_FAILED",
            HandshakeError::Act1BadVersion { .. } => "ACT1_BAD_VERSION",
            HandshakeError::Act1BadPubkey => "ACT1_BAD_PUBKEY",
            HandshakeError::Act1BadTag => "ACT1_BAD_TAG",
            HandshakeError::Act2ReadFailed { .. } => "ACT2_READ_FAILED",
            HandshakeError::Act2BadVersion { .. } => "ACT2_BAD_VERSION",
            HandshakeError::Act2BadPubkey => "ACT2_BAD_PUBKEY",
            HandshakeError::Act2BadTag => "ACT2_BAD_TAG",
            HandshakeError::Act3ReadFailed { .. } => "ACT3_READ_FAILED",
            HandshakeError::Act3BadVersion { .. } => "ACT3_BAD_VERSION",
            HandshakeError::Act3BadCiphertext => "ACT3_BAD_CIPHERTEXT",
            HandshakeError::Act3BadPubkey => "ACT3_BAD_PUBKEY",
            HandshakeError::Act3BadTag => "ACT3_BAD_TAG",
        }
    }
}

/// The handshake hash `h` and chaining key `ck`.
struct SymmetricState {
    h: [u8; 32],
    ck: Secret,
}

impl SymmetricState {
    /// `h = SHA-256(protocol name); ck = h; h = SHA-256(h || prologue); h = SHA-256(h || rs)`
    /// where `rs` is the responder's static key, known to both sides in XK.
    fn new(responder_static: &PublicKey) -> Self {
        let h: [u8; 32] = Sha256::digest(PROTOCOL_NAME).into();
        let mut state = SymmetricState {
            h,
            ck: Zeroizing::new(h),
        };
        state.mix_hash(PROLOGUE);
        state.mix_hash(responder_static.as_bytes());
        state
    }

    fn mix_hash(&mut self, data: &[u8]) {
        self.h = Sha256::new()
            .chain_update(self.h)
            .chain_update(data)
            .finalize()
            .into();
    }

    /// `ck, temp_k = HKDF(ck, ikm)`; returns `temp_k`.
    fn mix_key(&mut self, ikm: &[u8], observer: &impl Observer) -> Secret {
        observer.note("hkdf", "salt", self.ck.as_slice());
        observer.note("hkdf", "ikm", ikm);
        let (ck, temp_k) = hkdf(&self.ck, ikm);
        self.ck = ck;
        observer.note("", "ck", self.ck.as_slice());
        temp_k
    }

    /// `c = encryptWithAD(temp_k, n, h, plaintext)` into `out` (plaintext length + MAC).
    /// `label` names the call in the vectors' trace (e.g. `encryptWithAD_static_key`).
    fn encrypt(
        &self,
        label: &str,
        temp_k: &Secret,
        n: u64,
        plaintext: &[u8],
        out: &mut [u8],
        observer: &impl Observer,
    ) {
        observer.note(label, "k", temp_k.as_slice());
        observer.note(label, "nonce", &cipher::nonce(n));
        observer.note(label, "ad", &self.h);
        observer.note(label, "plaintext", plaintext);
        let (body, mac) = out.split_at_mut(plaintext.len());
        body.copy_from_slice(plaintext);
        mac.copy_from_slice(&cipher::seal(temp_k, n, &self.h, body));
    }

    /// [`Self::encrypt`], then `h = SHA-256(h || c)`.
    fn encrypt_and_hash(
        &mut self,
        label: &str,
        temp_k: &Secret,
        n: u64,
        plaintext: &[u8],
        out: &mut [u8],
        observer: &impl Observer,
    ) {
        self.encrypt(label, temp_k, n, plaintext, out, observer);
        observer.note("", "c", out);
        self.mix_hash(out);
        observer.note("", "h_after_mixing_c", &self.h);
    }

    /// Check `c` (plaintext then MAC) with `decryptWithAD(temp_k, n, h, c)` and decrypt it
    /// into `plaintext_out`. `label` names the call in the vectors' trace.
    fn decrypt(
        &self,
        label: &str,
        temp_k: &Secret,
        n: u64,
        c: &[u8],
        plaintext_out: &mut [u8],
        observer: &impl Observer,
    ) -> Result<(), cipher::MacMismatch> {
        observer.note(label, "k", temp_k.as_slice());
        observer.note(label, "nonce", &cipher::nonce(n));
        observer.note(label, "ad", &self.h);
        observer.note(label, "ciphertext", c);
        let (body, mac) = c.split_at(c.len() - MAC_LEN);
        plaintext_out.copy_from_slice(body);
        let mut tag = [0u8; MAC_LEN];
        tag.copy_from_slice(mac);
        cipher::open(temp_k, n, &self.h, plaintext_out, &tag)
    }

    /// [`Self::decrypt`], then `h = SHA-256(h || c)`.
    fn decrypt_and_hash(
        &mut self,
        label: &str,
        temp_k: &Secret,
        n: u64,
        c: &[u8],
        plaintext_out: &mut [u8],
        observer: &impl Observer,
    ) -> Result<(), cipher::MacMismatch> {
        self.decrypt(label, temp_k, n, c, plaintext_out, observer)?;
        self.mix_hash(c);
        observer.note("", "h_after_mixing_c", &self.h);
        Ok(())
    }

    /// The final split: `HKDF(ck, empty)` gives the initiator's sending key first.
    fn split(&self, observer: &impl Observer) -> (Secret, Secret) {
        observer.note("final_hkdf", "salt", self.ck.as_slice());
        observer.note("final_hkdf", "ikm", &[]);
        hkdf(&self.ck, &[])
    }
}

/// Check that an act has exactly its length (BOLT 8: "if `read_bytes` != N, fail"), and
/// return its version byte.
fn check_len(
    act: &[u8],
    expected: usize,
    err: fn(usize) -> HandshakeError,
) -> Result<u8, HandshakeError> {
    if act.len() != expected {
        return Err(err(act.len()));
    }
    Ok(act[0])
}

/// The initiator: the side that dials, and knows the responder's static key beforehand.
pub struct Initiator;

impl Initiator {
    /// Start a handshake to `remote_static` with our static key `local_static` and a fresh
    /// random `ephemeral` key (never reuse one). Returns the state awaiting act two and
    /// act one to send.
    pub fn start(
        local_static: SecretKey,
        remote_static: PublicKey,
        ephemeral: SecretKey,
    ) -> (AwaitingActTwo, [u8; ACT_ONE_LEN]) {
        Self::start_observed(local_static, remote_static, ephemeral, Silent)
    }

    /// [`Self::start`], with `observer` shown every intermediate value of the handshake
    /// and of the transport it leads to, secrets included: for tests and debugging only
    /// (see [`Observer`]).
    pub fn start_observed<O: Observer>(
        local_static: SecretKey,
        remote_static: PublicKey,
        ephemeral: SecretKey,
        observer: O,
    ) -> (AwaitingActTwo<O>, [u8; ACT_ONE_LEN]) {
        let obs = &observer;
        let mut sym = SymmetricState::new(&remote_static);
        let e_pub = ephemeral.public_key();
        sym.mix_hash(e_pub.as_bytes());
        obs.note("", "h_after_mixing_e_pub", &sym.h);
        let ss = ecdh(&ephemeral, &remote_static);
        obs.note("", "ss_es", ss.as_slice());
        let temp_k1 = sym.mix_key(ss.as_slice(), obs);
        obs.note("", "temp_k1", temp_k1.as_slice());

        let mut act = [0u8; ACT_ONE_LEN];
        act[0] = HANDSHAKE_VERSION;
        act[1..34].copy_from_slice(e_pub.as_bytes());
        sym.encrypt_and_hash("encryptWithAD", &temp_k1, 0, &[], &mut act[34..], obs);
        (
            AwaitingActTwo {
                sym,
                local_static,
                remote_static,
                ephemeral,
                observer,
            },
            act,
        )
    }
}

/// Initiator that has sent act one and waits for act two. `O` is the [`Observer`] given
/// to [`Initiator::start_observed`]: [`Silent`] unless one was.
pub struct AwaitingActTwo<O = Silent> {
    sym: SymmetricState,
    local_static: SecretKey,
    remote_static: PublicKey,
    ephemeral: SecretKey,
    observer: O,
}

impl<O: Observer> AwaitingActTwo<O> {
    /// Process act two (exactly 50 bytes). On success returns act three, which the caller
    /// must send before any transport frame, and the transport.
    pub fn read_act_two(
        mut self,
        act: &[u8],
    ) -> Result<([u8; ACT_THREE_LEN], Transport<O>), HandshakeError> {
        let obs = &self.observer;
        let version = check_len(act, ACT_TWO_LEN, |len| HandshakeError::Act2ReadFailed {
            len,
        })?;
        if version != HANDSHAKE_VERSION {
            return Err(HandshakeError::Act2BadVersion { version });
        }
        let re = PublicKey::from_slice(&act[1..34]).map_err(|_| HandshakeError::Act2BadPubkey)?;
        obs.note("", "re", re.as_bytes());
        self.sym.mix_hash(re.as_bytes());
        obs.note("", "h_after_mixing_re", &self.sym.h);
        let ss = ecdh(&self.ephemeral, &re);
        obs.note("", "ss_ee", ss.as_slice());
        let temp_k2 = self.sym.mix_key(ss.as_slice(), obs);
        obs.note("", "temp_k2", temp_k2.as_slice());
        self.sym
            .decrypt_and_hash("decryptWithAD", &temp_k2, 0, &act[34..], &mut [], obs)
            .map_err(|_| HandshakeError::Act2BadTag)?;

        // Act three.
        obs.section("act_three");
        let mut out = [0u8; ACT_THREE_LEN];
        out[0] = HANDSHAKE_VERSION;
        let s_pub = self.local_static.public_key();
        self.sym.encrypt_and_hash(
            "encryptWithAD_static_key",
            &temp_k2,
            1,
            s_pub.as_bytes(),
            &mut out[1..50],
            obs,
        );
        let ss = ecdh(&self.local_static, &re);
        obs.note("", "ss_se", ss.as_slice());
        let temp_k3 = self.sym.mix_key(ss.as_slice(), obs);
        obs.note("", "temp_k3", temp_k3.as_slice());
        // The final tag is not mixed into h: nothing follows it in the handshake.
        self.sym.encrypt(
            "encryptWithAD_final_tag",
            &temp_k3,
            0,
            &[],
            &mut out[50..],
            obs,
        );
        obs.note("", "t", &out[50..]);
        let (sk, rk) = self.sym.split(obs);
        let transport = Transport::new(sk, rk, &self.sym.ck, self.remote_static, self.observer);
        Ok((out, transport))
    }
}

/// The responder: the side that listens, with a static key the initiator already knows.
pub struct Responder;

impl Responder {
    /// Get ready for a handshake with our static key and a fresh random `ephemeral` key
    /// (never reuse one). Nothing is sent until act one arrives.
    pub fn start(local_static: SecretKey, ephemeral: SecretKey) -> AwaitingActOne {
        Self::start_observed(local_static, ephemeral, Silent)
    }

    /// [`Self::start`], with `observer` shown every intermediate value of the handshake
    /// and of the transport it leads to, secrets included: for tests and debugging only
    /// (see [`Observer`]).
    pub fn start_observed<O: Observer>(
        local_static: SecretKey,
        ephemeral: SecretKey,
        observer: O,
    ) -> AwaitingActOne<O> {
        AwaitingActOne {
            local_static,
            ephemeral,
            observer,
        }
    }
}

/// Responder waiting for act one. `O` is the [`Observer`] given to
/// [`Responder::start_observed`]: [`Silent`] unless one was.
pub struct AwaitingActOne<O = Silent> {
    local_static: SecretKey,
    ephemeral: SecretKey,
    observer: O,
}

impl<O: Observer> AwaitingActOne<O> {
    /// Process act one (exactly 50 bytes). On success returns the state awaiting act
    /// three and act two to send.
    pub fn read_act_one(
        self,
        act: &[u8],
    ) -> Result<(AwaitingActThree<O>, [u8; ACT_TWO_LEN]), HandshakeError> {
        let obs = &self.observer;
        let version = check_len(act, ACT_ONE_LEN, |len| HandshakeError::Act1ReadFailed {
            len,
        })?;
        if version != HANDSHAKE_VERSION {
            return Err(HandshakeError::Act1BadVersion { version });
        }
        let mut sym = SymmetricState::new(&self.local_static.public_key());
        let re = PublicKey::from_slice(&act[1..34]).map_err(|_| HandshakeError::Act1BadPubkey)?;
        obs.note("", "re", re.as_bytes());
        sym.mix_hash(re.as_bytes());
        obs.note("", "h_after_mixing_re", &sym.h);
        let ss = ecdh(&self.local_static, &re);
        obs.note("", "ss_es", ss.as_slice());
        let temp_k1 = sym.mix_key(ss.as_slice(), obs);
        obs.note("", "temp_k1", temp_k1.as_slice());
        sym.decrypt_and_hash("decryptWithAD", &temp_k1, 0, &act[34..], &mut [], obs)
            .map_err(|_| HandshakeError::Act1BadTag)?;

        // Act two.
        obs.section("act_two");
        let e_pub = self.ephemeral.public_key();
        obs.note("", "e.pub", e_pub.as_bytes());
        obs.note_secret_key("", "e.priv", &self.ephemeral);
        sym.mix_hash(e_pub.as_bytes());
        obs.note("", "h_after_mixing_e_pub", &sym.h);
        let ss = ecdh(&self.ephemeral, &re);
        obs.note("", "ss_ee", ss.as_slice());
        let temp_k2 = sym.mix_key(ss.as_slice(), obs);
        obs.note("", "temp_k2", temp_k2.as_slice());
        let mut out = [0u8; ACT_TWO_LEN];
        out[0] = HANDSHAKE_VERSION;
        out[1..34].copy_from_slice(e_pub.as_bytes());
        sym.encrypt_and_hash("encryptWithAD", &temp_k2, 0, &[], &mut out[34..], obs);
        Ok((
            AwaitingActThree {
                sym,
                ephemeral: self.ephemeral,
                temp_k2,
                observer: self.observer,
            },
            out,
        ))
    }
}

/// Responder that has sent act two and waits for act three. `O` is the [`Observer`]
/// given to [`Responder::start_observed`]: [`Silent`] unless one was.
pub struct AwaitingActThree<O = Silent> {
    sym: SymmetricState,
    ephemeral: SecretKey,
    temp_k2: Secret,
    observer: O,
}

impl<O: Observer> AwaitingActThree<O> {
    /// Process act three (exactly 66 bytes). On success returns the transport, whose
    /// [`Transport::remote_static`] is the initiator's authenticated static key.
    pub fn read_act_three(mut self, act: &[u8]) -> Result<Transport<O>, HandshakeError> {
        let obs = &self.observer;
        let version = check_len(act, ACT_THREE_LEN, |len| HandshakeError::Act3ReadFailed {
            len,
        })?;
        if version != HANDSHAKE_VERSION {
            return Err(HandshakeError::Act3BadVersion { version });
        }
        let mut rs_bytes = [0u8; 33];
        self.sym
            .decrypt_and_hash(
                "decryptWithAD_static_key",
                &self.temp_k2,
                1,
                &act[1..50],
                &mut rs_bytes,
                obs,
            )
            .map_err(|_| HandshakeError::Act3BadCiphertext)?;
        let rs = PublicKey::from_slice(&rs_bytes).map_err(|_| HandshakeError::Act3BadPubkey)?;
        obs.note("", "rs", rs.as_bytes());
        let ss = ecdh(&self.ephemeral, &rs);
        obs.note("", "ss_se", ss.as_slice());
        let temp_k3 = self.sym.mix_key(ss.as_slice(), obs);
        obs.note("", "temp_k3", temp_k3.as_slice());
        self.sym
            .decrypt(
                "decryptWithAD_final_tag",
                &temp_k3,
                0,
                &act[50..],
                &mut [],
                obs,
            )
            .map_err(|_| HandshakeError::Act3BadTag)?;
        // The responder receives with the first key and sends with the second.
        let (rk, sk) = self.sym.split(obs);
        Ok(Transport::new(sk, rk, &self.sym.ck, rs, self.observer))
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn key(b: u8) -> SecretKey {
        SecretKey::from_bytes(&[b; 32]).expect("valid test key")
    }

    #[test]
    fn long_acts_are_read_failures() {
        let (initiator, act1) = Initiator::start(key(1), key(2).public_key(), key(3));
        let mut long = act1.to_vec();
        long.push(0);
        assert_eq!(
            Responder::start(key(2), key(4)).read_act_one(&long).err(),
            Some(HandshakeError::Act1ReadFailed { len: 51 })
        );
        let (responder, act2) = Responder::start(key(2), key(4))
            .read_act_one(&act1)
            .expect("act one");
        assert_eq!(
            initiator.read_act_two(&[]).err(),
            Some(HandshakeError::Act2ReadFailed { len: 0 })
        );
        let (initiator, _) = Initiator::start(key(1), key(2).public_key(), key(3));
        let (act3, _) = initiator.read_act_two(&act2).expect("act two");
        let mut long = act3.to_vec();
        long.push(0);
        assert_eq!(
            responder.read_act_three(&long).err(),
            Some(HandshakeError::Act3ReadFailed { len: 67 })
        );
    }

    #[test]
    fn dialling_the_wrong_key_fails_act_one_mac() {
        let (_, act1) = Initiator::start(key(1), key(9).public_key(), key(3));
        assert_eq!(
            Responder::start(key(2), key(4)).read_act_one(&act1).err(),
            Some(HandshakeError::Act1BadTag)
        );
    }

    #[test]
    fn every_error_names_its_rule() {
        let all = [
            HandshakeError::Act1ReadFailed { len: 3 },
            HandshakeError::Act1BadVersion { version: 1 },
            HandshakeError::Act1BadPubkey,
            HandshakeError::Act1BadTag,
            HandshakeError::Act2ReadFailed { len: 3 },
            HandshakeError::Act2BadVersion { version: 1 },
            HandshakeError::Act2BadPubkey,
            HandshakeError::Act2BadTag,
            HandshakeError::Act3ReadFailed { len: 3 },
            HandshakeError::Act3BadVersion { version: 1 },
            HandshakeError::Act3BadCiphertext,
            HandshakeError::Act3BadPubkey,
            HandshakeError::Act3BadTag,
        ];
        for e in all {
            assert!(e.to_string().starts_with(e.code()), "{e}");
        }
    }

    #[test]
    fn error_text_is_pinned_and_has_no_source() {
        use std::error::Error;
        let cases = [
            (
                HandshakeError::Act1ReadFailed { len: 3 },
                "ACT1_READ_FAILED: act one must be 50 bytes, got 3",
            ),
            (
                HandshakeError::Act2ReadFailed { len: 49 },
                "ACT2_READ_FAILED: act two must be 50 bytes, got 49",
            ),
            (
                HandshakeError::Act3ReadFailed { len: 0 },
                "ACT3_READ_FAILED: act three must be 66 bytes, got 0",
            ),
            (
                HandshakeError::Act1BadVersion { version: 1 },
                "ACT1_BAD_VERSION: unknown handshake version 1",
            ),
            (
                HandshakeError::Act2BadVersion { version: 2 },
                "ACT2_BAD_VERSION: unknown handshake version 2",
            ),
            (
                HandshakeError::Act3BadVersion { version: 255 },
                "ACT3_BAD_VERSION: unknown handshake version 255",
            ),
            (
                HandshakeError::Act1BadPubkey,
                "ACT1_BAD_PUBKEY: ephemeral key is not a compressed secp256k1 point",
            ),
            (
                HandshakeError::Act2BadPubkey,
                "ACT2_BAD_PUBKEY: ephemeral key is not a compressed secp256k1 point",
            ),
            (
                HandshakeError::Act3BadPubkey,
                "ACT3_BAD_PUBKEY: static key is not a compressed secp256k1 point",
            ),
            (HandshakeError::Act1BadTag, "ACT1_BAD_TAG: MAC check failed"),
            (HandshakeError::Act2BadTag, "ACT2_BAD_TAG: MAC check failed"),
            (HandshakeError::Act3BadTag, "ACT3_BAD_TAG: MAC check failed"),
            (
                HandshakeError::Act3BadCiphertext,
                "ACT3_BAD_CIPHERTEXT: sealed static key failed its MAC",
            ),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), text);
            // Every handshake failure is a leaf: nothing underneath it to report.
            assert!(e.source().is_none(), "{e:?}");
        }
    }
}
