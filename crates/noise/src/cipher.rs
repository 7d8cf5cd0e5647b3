//! The symmetric half of BOLT 8: HKDF, the nonce layout, ChaCha20-Poly1305 in place, and
//! the per-direction cipher state of the transport with its key rotation.

// In wasm with SIMD128 the AEAD is `simd128.rs` (see `seal`); RustCrypto everywhere else.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
use chacha20poly1305::aead::{AeadInOut, KeyInit};
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce, Tag};
use hkdf::Hkdf;
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::observe::Observer;
use crate::{KEY_ROTATION_INTERVAL, MAC_LEN};

/// A 32-byte key or chaining key, zeroized on drop.
pub(crate) type Secret = Zeroizing<[u8; 32]>;

/// `HKDF(salt, ikm)` as BOLT 8 defines it: RFC 5869 with SHA-256, empty info, 64 bytes of
/// output split into two 32-byte keys.
pub(crate) fn hkdf(salt: &[u8; 32], ikm: &[u8]) -> (Secret, Secret) {
    let mut okm = Zeroizing::new([0u8; 64]);
    // Invariant: RFC 5869 allows up to 255 * 32 bytes of output; we ask for 64.
    Hkdf::<Sha256>::new(Some(salt), ikm)
        .expand(&[], okm.as_mut_slice())
        .expect("64 bytes is within HKDF-SHA256's output limit");
    let mut first = Zeroizing::new([0u8; 32]);
    let mut second = Zeroizing::new([0u8; 32]);
    first.copy_from_slice(&okm[..32]);
    second.copy_from_slice(&okm[32..]);
    (first, second)
}

/// The 96-bit nonce: 32 zero bits, then the 64-bit counter little-endian.
pub(crate) fn nonce(n: u64) -> [u8; 12] {
    let mut out = [0u8; 12];
    out[4..].copy_from_slice(&n.to_le_bytes());
    out
}

/// Encrypt `buf` in place; return its MAC.
pub(crate) fn seal(key: &[u8; 32], n: u64, ad: &[u8], buf: &mut [u8]) -> [u8; MAC_LEN] {
    // Why: RustCrypto's chacha20 and poly1305 have SIMD backends for x86 and ARM only, so
    // in wasm they run portable code. `simd128` is the same RFC 8439 AEAD built on wasm
    // SIMD128 (byte-exact, tested against RustCrypto), about twice as fast in Chromium.
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return crate::simd128::seal(key, &nonce(n), ad, buf);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    {
        // Borrow the key as an `&Key`: a by-value `Key` would leave an unzeroized copy on the
        // stack (the cipher's own copy is zeroized on drop).
        let cipher = ChaCha20Poly1305::new(<&Key>::from(key));
        // Invariant: ChaCha20-Poly1305 refuses only plaintexts over 2^38 bytes; ours are at
        // most 65535 bytes.
        let tag = cipher
            .encrypt_inout_detached(&Nonce::from(nonce(n)), ad, buf.into())
            .expect("a BOLT 8 plaintext is far below ChaCha20-Poly1305's length limit");
        tag.into()
    }
}

/// Check `mac` and decrypt `buf` in place. On failure `buf` is left as it was.
pub(crate) fn open(
    key: &[u8; 32],
    n: u64,
    ad: &[u8],
    buf: &mut [u8],
    mac: &[u8; MAC_LEN],
) -> Result<(), MacMismatch> {
    // As in `seal`: wasm with SIMD128 uses `simd128`, which also verifies before decrypting.
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return crate::simd128::open(key, &nonce(n), ad, buf, mac);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    {
        // Borrow the key as an `&Key`: a by-value `Key` would leave an unzeroized copy on the
        // stack (the cipher's own copy is zeroized on drop).
        let cipher = ChaCha20Poly1305::new(<&Key>::from(key));
        cipher
            .decrypt_inout_detached(&Nonce::from(nonce(n)), ad, buf.into(), &Tag::from(*mac))
            .map_err(|_| MacMismatch)
    }
}

/// The Poly1305 tag did not authenticate the ciphertext.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MacMismatch;

/// One direction of the transport: its key, the chaining key it rotates with, and the
/// nonce. Each seal or open uses one nonce; after 1000 the key rotates:
/// `ck', k' = HKDF(ck, k)`, nonce back to 0.
#[derive(Clone)]
pub(crate) struct CipherState {
    key: Secret,
    ck: Secret,
    n: u64,
}

impl CipherState {
    pub(crate) fn new(key: Secret, ck: Secret) -> Self {
        CipherState { key, ck, n: 0 }
    }

    /// Seal `part` in place with the next nonce: its plaintext is `part` less its last 16
    /// bytes, which receive the MAC. `part` is a length prefix or a body with its MAC, as
    /// they lie in the frame, so the observer sees the ciphertext and its MAC as one value.
    pub(crate) fn seal(&mut self, part: &mut [u8], observer: &impl Observer) {
        // Invariant: `Sender::seal_in_place`, the only caller, passes the 18-byte length
        // prefix or a body with its MAC, never fewer than 16 bytes.
        let (buf, mac) = part.split_at_mut(part.len() - MAC_LEN);
        observer.note("", "plaintext", buf);
        observer.note("", "ad", &[]);
        observer.note("", "nonce", &nonce(self.n));
        observer.note("", "key", self.key.as_slice());
        mac.copy_from_slice(&seal(&self.key, self.n, &[], buf));
        observer.note("", "ciphertext_with_tag", part);
        self.advance(observer);
    }

    /// Check `mac` and decrypt `buf` in place with the next nonce. A failure uses no
    /// nonce; the transport refuses further use after it (see `Receiver`).
    pub(crate) fn open(
        &mut self,
        buf: &mut [u8],
        mac: &[u8; MAC_LEN],
        observer: &impl Observer,
    ) -> Result<(), MacMismatch> {
        open(&self.key, self.n, &[], buf, mac)?;
        self.advance(observer);
        Ok(())
    }

    fn advance(&mut self, observer: &impl Observer) {
        self.n += 1;
        if self.n == KEY_ROTATION_INTERVAL {
            let (ck, key) = hkdf(&self.ck, self.key.as_slice());
            observer.note("rotation", "hkdf_salt_old_ck", self.ck.as_slice());
            observer.note("rotation", "hkdf_ikm_old_k", self.key.as_slice());
            observer.note("rotation", "new_ck", ck.as_slice());
            observer.note("rotation", "new_k", key.as_slice());
            self.ck = ck;
            self.key = key;
            self.n = 0;
        }
    }

    #[cfg(test)]
    pub(crate) fn key(&self) -> &[u8; 32] {
        &self.key
    }

    #[cfg(test)]
    pub(crate) fn chaining_key(&self) -> &[u8; 32] {
        &self.ck
    }
}
