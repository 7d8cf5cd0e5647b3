//! Merkle branches: whether a transaction is committed to by a header's Merkle root
//! (what an SPV proof checks). Hashes are in internal byte order. The root of a whole
//! block's txids is `lightwire_primitives::merkle`'s.

pub use lightwire_primitives::merkle::hash_pair;

/// Longest branch accepted: a block would need more than 2^32 transactions for more.
pub const MAX_BRANCH: usize = 32;

/// Why a Merkle proof was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum MerkleError {
    /// More than [`MAX_BRANCH`] hashes.
    #[error("Merkle branch of {len} hashes is longer than {MAX_BRANCH}")]
    BranchTooLong {
        /// Hashes given.
        len: usize,
    },
    /// The index has bits set above the branch's depth (it names no leaf of that tree).
    #[error("transaction index {index} is outside a tree of depth {depth}")]
    IndexOutOfRange {
        /// The index given.
        index: u32,
        /// The branch's depth.
        depth: usize,
    },
    /// A sibling equals the hash it is paired with on the left: the CVE-2012-2459 shape
    /// (duplicated last nodes), which lets a proof claim a transaction at two positions.
    #[error("Merkle branch pairs a node with itself at level {level} (ambiguous proof)")]
    DuplicateSibling {
        /// Level of the branch where it happened.
        level: usize,
    },
    /// The branch leads to another root.
    #[error("the Merkle branch does not lead to the header's Merkle root")]
    RootMismatch,
}

/// The branch proving leaf `index` of `leaves` (siblings from the bottom up).
pub fn branch(leaves: &[[u8; 32]], mut index: usize) -> Vec<[u8; 32]> {
    let mut out = Vec::new();
    let mut level = leaves.to_vec();
    while level.len() > 1 {
        let sibling = index ^ 1;
        out.push(*level.get(sibling).unwrap_or(&level[index]));
        level = level
            .chunks(2)
            .map(|p| hash_pair(&p[0], p.get(1).unwrap_or(&p[0])))
            .collect();
        index /= 2;
    }
    out
}

/// Check that `leaf` (a txid) at position `index` leads through `branch` to `root`.
pub fn verify(
    leaf: &[u8; 32],
    branch: &[[u8; 32]],
    index: u32,
    root: &[u8; 32],
) -> Result<(), MerkleError> {
    if branch.len() > MAX_BRANCH {
        return Err(MerkleError::BranchTooLong { len: branch.len() });
    }
    if branch.len() < 32 && index >> branch.len() != 0 {
        return Err(MerkleError::IndexOutOfRange {
            index,
            depth: branch.len(),
        });
    }
    let mut node = *leaf;
    for (level, sibling) in branch.iter().enumerate() {
        if index >> level & 1 == 1 {
            // We are the right node: a left sibling equal to us is the duplicated-node
            // shape, which a real tree has only where we are the left copy.
            if *sibling == node {
                return Err(MerkleError::DuplicateSibling { level });
            }
            node = hash_pair(sibling, &node);
        } else {
            node = hash_pair(&node, sibling);
        }
    }
    if node == *root {
        Ok(())
    } else {
        Err(MerkleError::RootMismatch)
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    /// The root of `leaves`, as a block's (the tree the branches are cut from).
    fn root(leaves: &[[u8; 32]]) -> Option<[u8; 32]> {
        lightwire_primitives::merkle::merkle_root(leaves.iter().copied()).map(|(root, _)| root)
    }

    /// A hash given as displayed (byte-reversed hex).
    fn display(s: &str) -> [u8; 32] {
        let mut b = [0u8; 32];
        for (i, byte) in b.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
        }
        b.reverse();
        b
    }

    /// Mainnet block 100,000: four transactions, and the Merkle root in its header.
    #[test]
    fn mainnet_block_100000() {
        let txids = [
            display("8c14f0db3df150123e6f3dbbf30f8b955a8249b62ac1d1ff16284aefa3d06d87"),
            display("fff2525b8931402dd09222c50775608f75787bd2b87e56995a7bdd30f79702c4"),
            display("6359f0868171b1d194cbee1af2f16ea598ae8fad666d9b012c8ed2b79a236ec4"),
            display("e9a66845e05d5abc0ad04ec80f774a7e585c6e8db975962d069a522137b80c1d"),
        ];
        let merkle_root =
            display("f3e94742aca4b5ef85488dc37c06c3282295ffec960994b2c0d5ac2a25a95766");
        assert_eq!(root(&txids), Some(merkle_root));
        for (i, txid) in txids.iter().enumerate() {
            let b = branch(&txids, i);
            assert_eq!(verify(txid, &b, i as u32, &merkle_root), Ok(()));
            // The wrong position, or a different transaction, fails.
            assert_eq!(
                verify(txid, &b, (i ^ 1) as u32, &merkle_root),
                Err(MerkleError::RootMismatch)
            );
            assert_eq!(
                verify(&txids[(i + 1) % 4], &b, i as u32, &merkle_root),
                Err(MerkleError::RootMismatch)
            );
        }
    }

    #[test]
    fn odd_trees_and_the_duplicate_node_shape() {
        let leaves: Vec<[u8; 32]> = (0..5u8).map(|i| [i + 1; 32]).collect();
        let r = root(&leaves).unwrap();
        for i in 0..5 {
            assert_eq!(
                verify(&leaves[i], &branch(&leaves, i), i as u32, &r),
                Ok(())
            );
        }
        // Leaf 4 is paired with itself; claiming it as leaf 5 (its copy) is refused.
        let b4 = branch(&leaves, 4);
        assert_eq!(b4[0], leaves[4]);
        assert_eq!(
            verify(&leaves[4], &b4, 5, &r),
            Err(MerkleError::DuplicateSibling { level: 0 })
        );
        assert_eq!(
            verify(&leaves[0], &branch(&leaves, 0), 8, &r),
            Err(MerkleError::IndexOutOfRange { index: 8, depth: 3 })
        );
        assert_eq!(
            verify(&leaves[0], &[[0; 32]; 33], 0, &r),
            Err(MerkleError::BranchTooLong { len: 33 })
        );
        // A single-transaction block: the root is the txid, the branch empty.
        assert_eq!(root(&leaves[..1]), Some(leaves[0]));
        assert_eq!(verify(&leaves[0], &[], 0, &leaves[0]), Ok(()));
        assert_eq!(root(&[]), None);
    }
}
