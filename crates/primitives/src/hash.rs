//! Double SHA-256 and the hashes it makes, as small types that say what they hold. Stored
//! and compared in internal byte order (as hashed and serialized); shown byte-reversed, as
//! Bitcoin displays block hashes and txids.

use core::fmt;

use sha2::{Digest, Sha256};

/// Length of a serialized block header.
pub const HEADER_LEN: usize = 80;

/// Double SHA-256 (Bitcoin's hash of headers, transactions, Merkle nodes and filters).
pub fn sha256d(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(Sha256::digest(bytes)).into()
}

/// A 32-byte hash newtype: internal byte order inside, byte-reversed hex when shown.
macro_rules! hash_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(pub [u8; 32]);

        impl $name {
            /// All zeros.
            pub const ZERO: $name = $name([0; 32]);

            /// Parse the displayed (byte-reversed) hex form.
            pub fn from_display_hex(s: &str) -> Option<$name> {
                let mut out = [0u8; 32];
                hex::decode_to_slice(s, &mut out).ok()?;
                out.reverse();
                Some($name(out))
            }

            /// Internal byte order.
            pub fn as_bytes(&self) -> &[u8; 32] {
                &self.0
            }
        }

        impl From<[u8; 32]> for $name {
            fn from(bytes: [u8; 32]) -> $name {
                $name(bytes)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                for b in self.0.iter().rev() {
                    write!(f, "{b:02x}")?;
                }
                Ok(())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self)
            }
        }
    };
}

hash_type!(
    /// A block hash: double SHA-256 of the 80-byte header.
    BlockHash
);

hash_type!(
    /// A transaction id: double SHA-256 of the transaction without its witness data (what
    /// outpoints name and the Merkle root commits to).
    Txid
);

hash_type!(
    /// A compact filter's hash (BIP157): double SHA-256 of the encoded filter. What a
    /// `cfheaders` answer lists, one per block.
    FilterHash
);

hash_type!(
    /// A compact filter header (BIP157): double SHA-256 of a filter's hash and the previous
    /// filter header. The chain of these commits to every filter up to its block; all
    /// zeros before the genesis block's.
    FilterHeader
);

impl FilterHeader {
    /// The filter header chained on `self` by a filter whose hash is `filter_hash`.
    pub fn next(&self, filter_hash: &FilterHash) -> FilterHeader {
        let mut both = [0u8; 64];
        both[..32].copy_from_slice(&filter_hash.0);
        both[32..].copy_from_slice(&self.0);
        FilterHeader(sha256d(&both))
    }
}

impl FilterHash {
    /// The hash of an encoded filter.
    pub fn of(filter: &[u8]) -> FilterHash {
        FilterHash(sha256d(filter))
    }
}

impl BlockHash {
    /// The hash of an encoded header.
    pub fn of_header(header: &[u8; HEADER_LEN]) -> BlockHash {
        BlockHash(sha256d(header))
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use alloc::string::ToString;

    use super::*;

    /// Mainnet's genesis header and coinbase: the hash and txid everyone knows, shown
    /// byte-reversed and parsed back.
    #[test]
    fn hashes_are_shown_byte_reversed_and_parsed_back() {
        let header: [u8; 80] = hex::decode(crate::block::tests::GENESIS).unwrap()[..80]
            .try_into()
            .unwrap();
        let hash = BlockHash::of_header(&header);
        let shown = "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f";
        assert_eq!(hash.to_string(), shown);
        assert_eq!(BlockHash::from_display_hex(shown), Some(hash));
        assert_eq!(
            alloc::format!("{hash:?}"),
            alloc::format!("BlockHash({shown})")
        );
        // The genesis coinbase's txid is its header's Merkle root.
        let txid = Txid(header[36..68].try_into().unwrap());
        let shown = "4a5e1e4baab89f3a32518a88c31bc87f618f76673e2cc77ab2127b7afdeda33b";
        assert_eq!(txid.to_string(), shown);
        assert_eq!(Txid::from_display_hex(shown), Some(txid));
        assert_eq!(alloc::format!("{txid:?}"), alloc::format!("Txid({shown})"));
        // Not 32 bytes of hex: nothing.
        assert_eq!(Txid::from_display_hex("00"), None);
        assert_eq!(Txid::from_display_hex(&"zz".repeat(32)), None);
        assert_eq!(BlockHash::from_display_hex(&"00".repeat(33)), None);
    }
}
