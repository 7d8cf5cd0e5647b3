//! Block headers: the 80-byte consensus encoding and the block hash.

use crate::target::CompactTarget;

// The hash of a header and the header length live with the rest of the consensus
// encoding; re-exported here so that the chain's users name them as before.
pub use lightwire_primitives::{BlockHash, HEADER_LEN};

/// A block header.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Header {
    /// Block version (signed in the consensus encoding).
    pub version: i32,
    /// Hash of the previous block.
    pub prev_blockhash: BlockHash,
    /// Merkle root of the block's transactions (internal byte order).
    pub merkle_root: [u8; 32],
    /// Block time, seconds since the Unix epoch.
    pub time: u32,
    /// The target, compact-encoded (`nBits`).
    pub bits: CompactTarget,
    /// Nonce.
    pub nonce: u32,
}

impl Header {
    /// Decode the 80-byte consensus encoding (every 80 bytes are some header).
    pub fn decode(b: &[u8; HEADER_LEN]) -> Header {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut prev = [0u8; 32];
        prev.copy_from_slice(&b[4..36]);
        let mut merkle_root = [0u8; 32];
        merkle_root.copy_from_slice(&b[36..68]);
        Header {
            version: u32_at(0) as i32,
            prev_blockhash: BlockHash(prev),
            merkle_root,
            time: u32_at(68),
            bits: CompactTarget(u32_at(72)),
            nonce: u32_at(76),
        }
    }

    /// Decode from a slice that must be exactly 80 bytes.
    pub fn from_slice(b: &[u8]) -> Option<Header> {
        b.try_into().ok().map(Header::decode)
    }

    /// The 80-byte consensus encoding.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..4].copy_from_slice(&self.version.to_le_bytes());
        out[4..36].copy_from_slice(&self.prev_blockhash.0);
        out[36..68].copy_from_slice(&self.merkle_root);
        out[68..72].copy_from_slice(&self.time.to_le_bytes());
        out[72..76].copy_from_slice(&self.bits.0.to_le_bytes());
        out[76..80].copy_from_slice(&self.nonce.to_le_bytes());
        out
    }

    /// The block hash: double SHA-256 of the encoding.
    pub fn block_hash(&self) -> BlockHash {
        hash_header_bytes(&self.encode())
    }
}

/// Double SHA-256 of an encoded header: its block hash.
pub fn hash_header_bytes(b: &[u8; HEADER_LEN]) -> BlockHash {
    BlockHash::of_header(b)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    /// Mainnet genesis, from `bitcoin_core_chainparams_facts.txt` in the shared data.
    const GENESIS_HEX: &str = "0100000000000000000000000000000000000000000000000000000000000000000000003ba3edfd7a7b12b27ac72c3e67768f617fc81bc3888a51323a9fb8aa4b1e5e4a29ab5f49ffff001d1dac2b7c";

    #[test]
    fn genesis_round_trip_and_hash() {
        let raw: [u8; 80] = hex::decode(GENESIS_HEX).unwrap().try_into().unwrap();
        let h = Header::decode(&raw);
        assert_eq!(h.version, 1);
        assert_eq!(h.time, 1231006505);
        assert_eq!(h.bits, CompactTarget(0x1d00ffff));
        assert_eq!(h.nonce, 2083236893);
        assert_eq!(h.encode(), raw);
        assert_eq!(
            h.block_hash().to_string(),
            "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f"
        );
        let parsed = BlockHash::from_display_hex(
            "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f",
        );
        assert_eq!(parsed, Some(h.block_hash()));
        assert_eq!(BlockHash::from_display_hex("00"), None);
        assert_eq!(BlockHash::from_display_hex(&"zz".repeat(32)), None);
        assert_eq!(Header::from_slice(&raw[..79]), None);
    }
}
