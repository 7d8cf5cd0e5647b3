//! secp256k1 keys as BOLT 8 uses them: 32-byte secrets, 33-byte compressed public keys,
//! and ECDH as SHA-256 of the compressed shared point.

use core::fmt;

use k256::elliptic_curve::sec1::ToSec1Point;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

/// Why bytes are not a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// A secret key must be 32 bytes, non-zero and below the curve order.
    #[error("secret key must be 32 bytes, non-zero and below the curve order")]
    InvalidSecretKey,
    /// A public key must be 33 bytes: 0x02 or 0x03, then the x coordinate of a curve point.
    #[error("public key must be a 33-byte compressed secp256k1 point")]
    InvalidPublicKey,
}

/// A secp256k1 secret key (a static node key or an ephemeral handshake key).
/// Zeroized on drop; `Debug` does not print it.
#[derive(Clone)]
pub struct SecretKey(k256::SecretKey);

impl SecretKey {
    /// A fresh secret key (static or ephemeral) from the platform's CSPRNG: the operating
    /// system natively, `crypto.getRandomValues` in a browser. The one place lightwire
    /// makes keys.
    #[cfg(feature = "random")]
    pub fn random() -> Result<SecretKey, getrandom::Error> {
        loop {
            let mut b = zeroize::Zeroizing::new([0u8; 32]);
            getrandom::fill(&mut b[..])?;
            // Out of range (about 2^-128 of the time): draw again.
            if let Ok(k) = SecretKey::from_bytes(&b) {
                return Ok(k);
            }
        }
    }

    /// A secret key from its 32 big-endian bytes.
    pub fn from_bytes(bytes: &[u8; 32]) -> Result<Self, KeyError> {
        k256::SecretKey::from_slice(bytes)
            .map(SecretKey)
            .map_err(|_| KeyError::InvalidSecretKey)
    }

    /// A secret key from a slice that must be exactly 32 bytes.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, KeyError> {
        let bytes: &[u8; 32] = bytes.try_into().map_err(|_| KeyError::InvalidSecretKey)?;
        Self::from_bytes(bytes)
    }

    /// The 32 big-endian bytes, in a buffer that is zeroized when dropped.
    pub fn to_bytes(&self) -> Zeroizing<[u8; 32]> {
        Zeroizing::new(self.0.to_bytes().into())
    }

    /// The matching public key.
    pub fn public_key(&self) -> PublicKey {
        PublicKey::from_point(self.0.public_key())
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(..)")
    }
}

/// A secp256k1 public key, kept with its 33-byte compressed encoding (the form BOLT 8
/// sends and hashes).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PublicKey {
    point: k256::PublicKey,
    compressed: [u8; 33],
}

impl PublicKey {
    fn from_point(point: k256::PublicKey) -> Self {
        let compressed = point.as_affine().to_compressed_point().into();
        PublicKey { point, compressed }
    }

    /// Parse a compressed key. Uncompressed (0x04) and hybrid encodings are refused, as
    /// BOLT 8 only ever carries the compressed form.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, KeyError> {
        let compressed: [u8; 33] = bytes.try_into().map_err(|_| KeyError::InvalidPublicKey)?;
        if compressed[0] != 0x02 && compressed[0] != 0x03 {
            return Err(KeyError::InvalidPublicKey);
        }
        let point = k256::PublicKey::from_sec1_bytes(&compressed)
            .map_err(|_| KeyError::InvalidPublicKey)?;
        Ok(PublicKey { point, compressed })
    }

    /// The 33-byte compressed encoding.
    pub fn serialize(&self) -> [u8; 33] {
        self.compressed
    }

    /// The 33-byte compressed encoding, borrowed.
    pub fn as_bytes(&self) -> &[u8; 33] {
        &self.compressed
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey(")?;
        for b in self.compressed {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

/// BOLT 8 ECDH: SHA-256 of the compressed encoding of `sk * pk`.
///
/// The product is never the identity: `pk` is a valid non-identity point and `sk` a
/// non-zero scalar in a prime-order group.
pub(crate) fn ecdh(sk: &SecretKey, pk: &PublicKey) -> Zeroizing<[u8; 32]> {
    let shared = (pk.point.to_projective() * *sk.0.to_nonzero_scalar()).to_affine();
    let compressed = Zeroizing::new(shared.to_compressed_point());
    Zeroizing::new(Sha256::digest(compressed.as_slice()).into())
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn public_key_rejects_other_encodings() {
        let sk = SecretKey::from_bytes(&[0x11; 32]).unwrap();
        let good = sk.public_key().serialize();
        assert!(PublicKey::from_slice(&good).is_ok());
        assert_eq!(
            PublicKey::from_slice(&good[..32]),
            Err(KeyError::InvalidPublicKey)
        );
        let mut bad_prefix = good;
        bad_prefix[0] = 0x04;
        assert_eq!(
            PublicKey::from_slice(&bad_prefix),
            Err(KeyError::InvalidPublicKey)
        );
        // x = 5 is not on secp256k1 (5^3 + 7 = 132 is not a square mod p).
        let mut off_curve = [0u8; 33];
        off_curve[0] = 0x02;
        off_curve[32] = 5;
        assert_eq!(
            PublicKey::from_slice(&off_curve),
            Err(KeyError::InvalidPublicKey)
        );
    }

    #[test]
    fn secret_key_rejects_zero_and_order() {
        assert_eq!(
            SecretKey::from_bytes(&[0; 32]).unwrap_err(),
            KeyError::InvalidSecretKey
        );
        assert_eq!(
            SecretKey::from_bytes(&[0xff; 32]).unwrap_err(),
            KeyError::InvalidSecretKey
        );
        assert_eq!(
            SecretKey::from_slice(&[1; 31]).unwrap_err(),
            KeyError::InvalidSecretKey
        );
        assert_eq!(
            format!("{:?}", SecretKey::from_bytes(&[1; 32]).unwrap()),
            "SecretKey(..)"
        );
    }

    #[test]
    fn error_text_is_pinned_and_has_no_source() {
        use std::error::Error;
        let cases = [
            (
                KeyError::InvalidSecretKey,
                "secret key must be 32 bytes, non-zero and below the curve order",
            ),
            (
                KeyError::InvalidPublicKey,
                "public key must be a 33-byte compressed secp256k1 point",
            ),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), text);
            assert!(e.source().is_none(), "{e:?}");
        }
    }

    #[test]
    fn ecdh_is_symmetric() {
        let a = SecretKey::from_bytes(&[0x21; 32]).unwrap();
        let b = SecretKey::from_bytes(&[0x42; 32]).unwrap();
        assert_eq!(*ecdh(&a, &b.public_key()), *ecdh(&b, &a.public_key()));
    }
}
