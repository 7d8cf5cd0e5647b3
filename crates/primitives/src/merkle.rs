//! The Merkle root of a block's txids, computed as they stream by: no allocation, the same
//! hashes as building the tree level by level, and whether the tree is *mutated*.
//!
//! Bitcoin pairs an odd last node with itself, so a list of txids and the same list with
//! its last few repeated can share a root (CVE-2012-2459). Two equal nodes paired at any
//! level (a real pair, not the self-pairing of an odd last node) is that shape; Bitcoin
//! Core refuses such a block as mutated, and so must every check of a block here.

use sha2::{Digest, Sha256};

/// Double SHA-256 of two concatenated hashes: a Merkle node from its children.
pub fn hash_pair(left: &[u8; 32], right: &[u8; 32]) -> [u8; 32] {
    let once = Sha256::new()
        .chain_update(left)
        .chain_update(right)
        .finalize();
    Sha256::digest(once).into()
}

/// The root of a tree whose leaves are pushed one at a time.
///
/// `inner[level]` holds the root of a complete subtree of `2^level` leaves still waiting
/// for its right sibling; the bits of `count` say which levels hold one. A leaf climbs
/// while its left sibling waits, so each real pair is hashed once, as it completes.
#[derive(Clone, Debug)]
pub struct MerkleRoot {
    inner: [[u8; 32]; 64],
    count: u64,
    mutated: bool,
}

impl Default for MerkleRoot {
    fn default() -> Self {
        MerkleRoot {
            inner: [[0; 32]; 64],
            count: 0,
            mutated: false,
        }
    }
}

impl MerkleRoot {
    /// No leaves yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The next leaf (a txid in internal byte order).
    pub fn push(&mut self, leaf: [u8; 32]) {
        let mut node = leaf;
        let mut level = 0;
        while self.count >> level & 1 == 1 {
            let left = &self.inner[level];
            self.mutated |= *left == node;
            node = hash_pair(left, &node);
            level += 1;
        }
        self.inner[level] = node;
        self.count += 1;
    }

    /// The root and whether the tree is mutated; `None` without leaves.
    pub fn finish(&self) -> Option<([u8; 32], bool)> {
        if self.count == 0 {
            return None;
        }
        let count = self.count;
        let mut mutated = self.mutated;
        // The rightmost waiting subtree; every node to its right is missing.
        let mut level = count.trailing_zeros() as usize;
        let mut node = self.inner[level];
        // While a subtree waits above, `node` is a left child without a sibling: Bitcoin
        // pairs it with itself (not a mutation), and the result is the right child of any
        // subtree waiting at the next level (a real pair).
        while count >> (level + 1) != 0 {
            node = hash_pair(&node, &node);
            level += 1;
            while count >> level & 1 == 1 {
                let left = &self.inner[level];
                mutated |= *left == node;
                node = hash_pair(left, &node);
                level += 1;
            }
        }
        Some((node, mutated))
    }
}

/// The Merkle root of `leaves` and whether the tree is mutated; `None` without leaves.
pub fn merkle_root(leaves: impl IntoIterator<Item = [u8; 32]>) -> Option<([u8; 32], bool)> {
    let mut root = MerkleRoot::new();
    leaves.into_iter().for_each(|l| root.push(l));
    root.finish()
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use alloc::vec::Vec;

    use super::*;

    /// The tree as the consensus rule describes it, level by level (what Bitcoin Core's
    /// `ComputeMerkleRoot` does): the reference the streaming root is held to.
    fn by_levels(leaves: &[[u8; 32]]) -> Option<([u8; 32], bool)> {
        let mut level = leaves.to_vec();
        let mut mutated = false;
        while level.len() > 1 {
            mutated |= level.chunks(2).any(|p| p.len() == 2 && p[0] == p[1]);
            level = level
                .chunks(2)
                .map(|p| hash_pair(&p[0], p.get(1).unwrap_or(&p[0])))
                .collect();
        }
        level.first().map(|r| (*r, mutated))
    }

    fn leaf(i: usize) -> [u8; 32] {
        let mut l = [0u8; 32];
        l[..8].copy_from_slice(&(i as u64).to_le_bytes());
        l[31] = 0x5a;
        l
    }

    /// Mainnet block 100,000: four txids and the root in its header.
    #[test]
    fn mainnet_block_100000() {
        let display = |s: &str| {
            let mut b: [u8; 32] = hex::decode(s).unwrap().try_into().unwrap();
            b.reverse();
            b
        };
        let txids = [
            "8c14f0db3df150123e6f3dbbf30f8b955a8249b62ac1d1ff16284aefa3d06d87",
            "fff2525b8931402dd09222c50775608f75787bd2b87e56995a7bdd30f79702c4",
            "6359f0868171b1d194cbee1af2f16ea598ae8fad666d9b012c8ed2b79a236ec4",
            "e9a66845e05d5abc0ad04ec80f774a7e585c6e8db975962d069a522137b80c1d",
        ]
        .map(display);
        let root = display("f3e94742aca4b5ef85488dc37c06c3282295ffec960994b2c0d5ac2a25a95766");
        assert_eq!(merkle_root(txids), Some((root, false)));
        assert_eq!(merkle_root([]), None);
        assert_eq!(merkle_root([txids[0]]), Some((txids[0], false)));
    }

    /// Every tree size up to 70, distinct leaves: the same root as level by level, never
    /// mutated.
    #[test]
    fn streaming_matches_the_tree_level_by_level() {
        for n in 1..=70 {
            let leaves: Vec<[u8; 32]> = (0..n).map(leaf).collect();
            let got = merkle_root(leaves.iter().copied());
            assert_eq!(got, by_levels(&leaves), "{n} leaves");
            assert!(!got.unwrap().1);
        }
    }

    /// Repeated leaves and repeated subtrees, at the end and in the middle: mutated
    /// exactly when two equal nodes form a real pair at some level, and the odd last
    /// node paired with itself is not that.
    #[test]
    fn mutation_is_a_real_pair_of_equal_nodes_at_any_level() {
        let cases: [&[usize]; 9] = [
            &[0, 1, 2, 2],             // the last pair repeated: mutated at the leaves
            &[0, 1, 2, 3, 4, 5, 4, 5], // the last two repeated: mutated one level up
            &[0, 1, 2],                // odd: 2 paired with itself, not mutated
            &[0, 1, 2, 3, 4],          // odd at two levels, not mutated
            &[0, 0],                   // two equal leaves
            &[0, 1, 0, 1, 2],          // equal subtrees (0,1) paired at level 1
            &[0, 1, 1, 2],             // equal, but not a pair
            &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 8, 9],
            &[0, 1, 2, 3, 4, 4],
        ];
        for case in cases {
            let leaves: Vec<[u8; 32]> = case.iter().map(|&i| leaf(i)).collect();
            assert_eq!(
                merkle_root(leaves.iter().copied()),
                by_levels(&leaves),
                "{case:?}"
            );
        }
        let mutated = |c: &[usize]| merkle_root(c.iter().map(|&i| leaf(i))).unwrap().1;
        assert!(mutated(&[0, 1, 2, 2]) && mutated(&[0, 1, 2, 3, 4, 5, 4, 5]));
        assert!(mutated(&[0, 1, 0, 1, 2]) && mutated(&[0, 1, 2, 3, 4, 4]));
        assert!(!mutated(&[0, 1, 2]) && !mutated(&[0, 1, 1, 2]));
        // Why mutation is refused: [0, 1, 2] and [0, 1, 2, 2] share a root.
        let root = |c: &[usize]| merkle_root(c.iter().map(|&i| leaf(i))).unwrap().0;
        assert_eq!(root(&[0, 1, 2]), root(&[0, 1, 2, 2]));
        assert_eq!(root(&[0, 1, 2, 3, 4, 5]), root(&[0, 1, 2, 3, 4, 5, 4, 5]));
    }
}
