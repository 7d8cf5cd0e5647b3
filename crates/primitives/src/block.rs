//! Blocks read by borrowing, and checked once against the header the chain holds, in the
//! shape of rust-bitcoin's `Block<Unchecked>::validate()`: [`Block::parse`] checks the
//! encoding (an [`UncheckedBlock`]); [`UncheckedBlock::validate`] checks it is the block of
//! a given hash (its header hashes to it, its transactions make the header's Merkle root,
//! the tree is not mutated) and gives a [`CheckedBlock`], the only kind a ledger takes.
//!
//! The witness commitment (BIP141) is not checked by `validate`: nothing most readers take
//! from a block (outputs, outpoints, txids, the scripts of BIP158 filters) is in the
//! witness data, which the Merkle root does not cover, and checking it hashes every witness
//! once more. A reader that takes witness data (the keys of P2WPKH and P2TR inputs, for a
//! silent payment's tweak) checks it with [`CheckedBlock::check_witness`].

use core::marker::PhantomData;

use crate::hash::{BlockHash, HEADER_LEN};
use crate::merkle::MerkleRoot;
use crate::reader::{DecodeError, Reader};
use crate::transaction::Tx;

/// A block is not the block of the hash it was asked for: which rule it breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    /// The bytes are not a block.
    #[error("not a block: {0}")]
    Malformed(#[from] DecodeError),
    /// Its header is not the header of that hash.
    #[error("its header hashes to {got}, not {expected}")]
    HashMismatch {
        /// The hash asked for.
        expected: BlockHash,
        /// Its header's hash.
        got: BlockHash,
    },
    /// Its transactions do not make its header's Merkle root.
    #[error("its transactions do not make its header's Merkle root")]
    MerkleRootMismatch,
    /// Its transactions make the header's Merkle root only by pairing two equal nodes:
    /// repeated transactions (CVE-2012-2459), refused as Bitcoin Core refuses them.
    #[error("its Merkle tree is mutated (repeated transactions)")]
    Mutated,
    /// Its first transaction is not a coinbase, or a later one is (Bitcoin Core's
    /// `bad-cb-missing` and `bad-cb-multiple`): without this rule a 64-byte transaction
    /// could pass for an inner node of the Merkle tree.
    #[error("its first transaction, and only its first, must be a coinbase")]
    Coinbase,
}

/// A block's witness data is not what its coinbase commits to (BIP141; the rule Bitcoin
/// Core's `CheckWitnessMalleation` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WitnessError {
    /// The coinbase commits to witness data, but its input's witness is not one 32-byte
    /// item (`bad-witness-nonce-size`).
    #[error(
        "the coinbase's witness reserved value is not one 32-byte item (bad-witness-nonce-size)"
    )]
    NonceSize,
    /// The witness data is not what the commitment says (`bad-witness-merkle-match`).
    #[error("the witness data does not match the coinbase's commitment (bad-witness-merkle-match)")]
    Mismatch,
    /// A transaction has witness data but the coinbase commits to none
    /// (`unexpected-witness`).
    #[error("a transaction has witness data the block does not commit to (unexpected-witness)")]
    Unexpected,
}

/// A block's encoding was checked, but not that it is the block of any header.
#[derive(Clone, Copy, Debug)]
pub enum Unchecked {}

/// A block was checked against the hash of the header it belongs to.
#[derive(Clone, Copy, Debug)]
pub enum Checked {}

/// A block whose encoding was checked to the last byte: its header and its transactions,
/// borrowed. Walking it again cannot fail. `V` says whether it was checked against its
/// header ([`Checked`]) or not ([`Unchecked`]).
#[derive(Debug)]
pub struct Block<'a, V = Unchecked> {
    header: &'a [u8; HEADER_LEN],
    txs: &'a [u8],
    count: usize,
    state: PhantomData<V>,
}

// By hand: a derive would ask `V: Clone`.
impl<V> Clone for Block<'_, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<V> Copy for Block<'_, V> {}

/// A block whose encoding was checked, not yet against a header.
pub type UncheckedBlock<'a> = Block<'a, Unchecked>;
/// A block checked against its header's hash and Merkle root.
pub type CheckedBlock<'a> = Block<'a, Checked>;

/// Smallest encoded transaction: version, two counts, lock time.
const MIN_TX: usize = 10;

impl<'a> Block<'a, Unchecked> {
    /// Check `bytes` as a block (the header, then transactions with or without BIP144
    /// witness data, nothing after): no allocation, every length checked against what is
    /// left.
    pub fn parse(bytes: &'a [u8]) -> Result<UncheckedBlock<'a>, DecodeError> {
        let mut r = Reader::new(bytes);
        let header = r.array::<HEADER_LEN>("the header")?;
        let count = r.count(MIN_TX, "the transaction count")?;
        let txs = r.rest();
        for _ in 0..count {
            Tx::read(&mut r)?;
        }
        r.finish()?;
        Ok(Block {
            header,
            txs,
            // At most one per MIN_TX bytes (checked above), so it fits.
            count: count as usize,
            state: PhantomData,
        })
    }

    /// Check that this is the block whose hash is `expected`: its header hashes to it,
    /// its transactions make the header's Merkle root, and not by repeating any (a
    /// mutated tree). Computes every txid once; no allocation.
    pub fn validate(self, expected: &BlockHash) -> Result<CheckedBlock<'a>, BlockError> {
        let got = BlockHash::of_header(self.header);
        if got != *expected {
            return Err(BlockError::HashMismatch {
                expected: *expected,
                got,
            });
        }
        // One pass over the transactions: their txids, and which are coinbases.
        let mut root = MerkleRoot::new();
        let mut coinbases_right = true;
        for (i, t) in self.transactions().enumerate() {
            coinbases_right &= t.is_coinbase() == (i == 0);
            root.push(t.txid().0);
        }
        let (root, mutated) = root.finish().unwrap_or(([0; 32], false));
        // Bitcoin Core's order (CheckBlock): a wrong root, a mutated tree, then the
        // coinbase rule.
        if root[..] != self.header[36..68] {
            return Err(BlockError::MerkleRootMismatch);
        }
        if mutated {
            return Err(BlockError::Mutated);
        }
        if !coinbases_right || self.count == 0 {
            return Err(BlockError::Coinbase);
        }
        Ok(Block {
            header: self.header,
            txs: self.txs,
            count: self.count,
            state: PhantomData,
        })
    }
}

impl<'a> Block<'a, Checked> {
    /// Parse `bytes` and check them against `expected` in one step (a malformed block is
    /// [`BlockError::Malformed`]).
    pub fn check(bytes: &'a [u8], expected: &BlockHash) -> Result<CheckedBlock<'a>, BlockError> {
        Block::parse(bytes)?.validate(expected)
    }

    /// Its hash (the one it was checked against).
    pub fn block_hash(&self) -> BlockHash {
        BlockHash::of_header(self.header)
    }

    /// Check its witness data against its coinbase's commitment, as Bitcoin Core's
    /// `CheckWitnessMalleation` does for a block where segwit is active: the commitment is
    /// the coinbase's last output whose script starts `6a24aa21a9ed`; with one, the
    /// coinbase's witness is one 32-byte item and the double SHA-256 of the witness Merkle
    /// root (of the wtxids, the coinbase's taken as zero) and that item is the commitment;
    /// without one, no transaction has witness data. No allocation.
    pub fn check_witness(&self) -> Result<(), WitnessError> {
        const HEAD: [u8; 6] = [0x6a, 0x24, 0xaa, 0x21, 0xa9, 0xed];
        let Some(coinbase) = self.transactions().next() else {
            return Ok(());
        };
        let commitment = coinbase
            .outputs()
            .filter(|o| o.script.len() >= 38 && o.script[..6] == HEAD)
            .last();
        let Some(commitment) = commitment else {
            return match self.transactions().any(|t| t.has_witness()) {
                true => Err(WitnessError::Unexpected),
                false => Ok(()),
            };
        };
        let mut stack = coinbase
            .inputs()
            .next()
            .map(|i| i.witness)
            .into_iter()
            .flat_map(|w| w.iter());
        let nonce = match (stack.next(), stack.next()) {
            (Some(item), None) if item.len() == 32 => item,
            _ => return Err(WitnessError::NonceSize),
        };
        let mut root = MerkleRoot::new();
        for (i, t) in self.transactions().enumerate() {
            root.push(if i == 0 {
                [0; 32]
            } else {
                crate::hash::sha256d(t.raw())
            });
        }
        let (root, _) = root.finish().unwrap_or(([0; 32], false));
        let mut both = [0u8; 64];
        both[..32].copy_from_slice(&root);
        both[32..].copy_from_slice(nonce);
        if crate::hash::sha256d(&both)[..] != commitment.script[6..38] {
            return Err(WitnessError::Mismatch);
        }
        Ok(())
    }
}

impl<'a, V> Block<'a, V> {
    /// The 80-byte header.
    pub fn header(&self) -> &'a [u8; HEADER_LEN] {
        self.header
    }

    /// How many transactions it holds.
    pub fn tx_count(&self) -> usize {
        self.count
    }

    /// Its transactions, in order.
    pub fn transactions(&self) -> impl Iterator<Item = Tx<'a>> + use<'a, V> {
        let mut r = Reader::new(self.txs);
        (0..self.count).map_while(move |_| Tx::read(&mut r).ok())
    }

    /// The Merkle root of its txids, and whether the tree is mutated (see
    /// [`crate::merkle`]): what [`UncheckedBlock::validate`] compares with the header. No
    /// allocation.
    pub fn merkle_root(&self) -> ([u8; 32], bool) {
        let mut root = MerkleRoot::new();
        self.transactions().for_each(|t| root.push(t.txid().0));
        root.finish().unwrap_or(([0; 32], false))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use alloc::vec::Vec;

    use super::*;
    use crate::compact_size::write_compact_size;
    use crate::hash::Txid;
    use crate::merkle::hash_pair;

    /// Mainnet's genesis block.
    pub(crate) const GENESIS: &str = "0100000000000000000000000000000000000000000000000000000000000000000000003ba3edfd7a7b12b27ac72c3e67768f617fc81bc3888a51323a9fb8aa4b1e5e4a29ab5f49ffff001d1dac2b7c0101000000010000000000000000000000000000000000000000000000000000000000000000ffffffff4d04ffff001d0104455468652054696d65732030332f4a616e2f32303039204368616e63656c6c6f72206f6e206272696e6b206f66207365636f6e64206261696c6f757420666f722062616e6b73ffffffff0100f2052a01000000434104678afdb0fe5548271967f1a67130b7105cd6a828e03909a67962e0ea1f61deb649f6bc3f4cef38c4f35504e51ec112de5c384df7ba0b8d578a4c702b6bf11d5fac00000000";

    /// A distinct legacy transaction (one input, one output), numbered `i`; number 1 is a
    /// coinbase (it spends the null outpoint), as a block's first must be.
    fn tx(i: u8) -> Vec<u8> {
        let mut t = alloc::vec![1, 0, 0, 0, 1];
        if i == 1 {
            t.extend_from_slice(&[0; 32]);
            t.extend_from_slice(&[0xff; 4]);
        } else {
            t.extend_from_slice(&[i; 32]);
            t.extend_from_slice(&[0; 4]);
        }
        t.extend_from_slice(&[0, 0xff, 0xff, 0xff, 0xff, 1]);
        t.extend_from_slice(&u64::from(i).to_le_bytes());
        t.extend_from_slice(&[1, 0x51, 0, 0, 0, 0]);
        t
    }

    /// A block of `txs` under a header carrying `root` (their own root when `None`).
    fn block(txs: &[Vec<u8>], root: Option<[u8; 32]>) -> (Vec<u8>, BlockHash) {
        let mut b = alloc::vec![0u8; 80];
        b[..4].copy_from_slice(&4u32.to_le_bytes());
        write_compact_size(&mut b, txs.len() as u64);
        txs.iter().for_each(|t| b.extend_from_slice(t));
        let root = root.unwrap_or_else(|| Block::parse(&b).unwrap().merkle_root().0);
        b[36..68].copy_from_slice(&root);
        let hash = BlockHash::of_header(b[..80].try_into().unwrap());
        (b, hash)
    }

    #[test]
    fn the_genesis_block_checks_against_its_hash() {
        let bytes = hex::decode(GENESIS).unwrap();
        let hash = BlockHash::of_header(bytes[..80].try_into().unwrap());
        let b = Block::parse(&bytes).unwrap();
        assert_eq!(b.tx_count(), 1);
        let tx = b.transactions().next().unwrap();
        assert!(tx.is_coinbase() && !tx.has_witness());
        // The genesis coinbase's txid is the header's Merkle root.
        assert_eq!(&tx.txid().0[..], &bytes[36..68]);
        assert_eq!(b.merkle_root(), (tx.txid().0, false));
        let checked = b.validate(&hash).unwrap();
        assert_eq!(checked.block_hash(), hash);
        assert_eq!(checked.header(), b.header());
        assert_eq!(Block::check(&bytes, &hash).map(|c| c.tx_count()), Ok(1));
        let input = tx.inputs().next().unwrap();
        assert_eq!(input.script_sig.len(), 0x4d);
        let output = tx.outputs().next().unwrap();
        assert_eq!((output.value, output.script.len()), (5_000_000_000, 67));
    }

    /// The attack CVE-2012-2459 names: the last pair of transactions repeated. The root is
    /// the header's, the header the chain's; refused as mutated. The block without the
    /// repeat checks.
    #[test]
    fn a_mutated_block_is_refused() {
        let txs: Vec<Vec<u8>> = (1..=6).map(tx).collect();
        let (good, hash) = block(&txs, None);
        assert!(Block::check(&good, &hash).is_ok());
        let mut repeated = txs.clone();
        repeated.extend_from_slice(&txs[4..6]);
        let (bad, bad_hash) = block(&repeated, None);
        assert_eq!(bad_hash, hash, "the same header: the same root");
        assert_eq!(
            Block::parse(&bad).unwrap().merkle_root(),
            (good[36..68].try_into().unwrap(), true)
        );
        assert_eq!(
            Block::check(&bad, &hash).map(|_| ()),
            Err(BlockError::Mutated)
        );
        // An odd count: the last one repeated once shares the root too.
        let (good, hash) = block(&txs[..5], None);
        let mut once = txs[..5].to_vec();
        once.push(txs[4].clone());
        let (bad, _) = block(&once, Some(good[36..68].try_into().unwrap()));
        assert_eq!(
            Block::check(&bad, &hash).map(|_| ()),
            Err(BlockError::Mutated)
        );
    }

    /// A block whose first transaction is not a coinbase, or with a second coinbase, is
    /// refused even under a header it matches (Bitcoin Core's `bad-cb-missing`,
    /// `bad-cb-multiple`).
    #[test]
    fn only_the_first_transaction_is_a_coinbase() {
        let (good, hash) = block(&[tx(1), tx(2)], None);
        assert!(Block::check(&good, &hash).is_ok());
        // Another coinbase: the first's, paying another value.
        let mut other = tx(1);
        let at = other.len() - 14;
        other[at] ^= 1;
        for txs in [
            alloc::vec![tx(2), tx(3)],
            alloc::vec![tx(1), other],
            alloc::vec![tx(2), tx(1)],
        ] {
            let (bad, hash) = block(&txs, None);
            assert_eq!(
                Block::check(&bad, &hash).map(|_| ()),
                Err(BlockError::Coinbase),
                "{txs:?}"
            );
        }
    }

    /// Transactions that make the header's Merkle root, under a header that is not the
    /// one asked for: refused by the hash. Transactions changed under the right header:
    /// refused by the root.
    #[test]
    fn the_hash_and_the_root_are_each_checked() {
        let txs: Vec<Vec<u8>> = (1..=3).map(tx).collect();
        let (good, hash) = block(&txs, None);
        let mut other = good.clone();
        other[68] ^= 1; // another time, the same root
        assert!(Block::parse(&other).unwrap().merkle_root().0[..] == other[36..68]);
        let got = BlockHash::of_header(other[..80].try_into().unwrap());
        assert_eq!(
            Block::check(&other, &hash).map(|_| ()),
            Err(BlockError::HashMismatch {
                expected: hash,
                got
            })
        );
        let mut changed = good.clone();
        let last = changed.len() - 7;
        changed[last] ^= 1; // a value of the last output
        assert_eq!(
            Block::check(&changed, &hash).map(|_| ()),
            Err(BlockError::MerkleRootMismatch)
        );
        // Fewer transactions under the header: not its root either.
        let (fewer, _) = block(&txs[..2], Some(good[36..68].try_into().unwrap()));
        assert_eq!(
            Block::check(&fewer, &hash).map(|_| ()),
            Err(BlockError::MerkleRootMismatch)
        );
        let root = Block::parse(&good).unwrap().merkle_root().0;
        let leaves: Vec<Txid> = Block::parse(&good)
            .unwrap()
            .transactions()
            .map(|t| t.txid())
            .collect();
        let l2 = hash_pair(&leaves[2].0, &leaves[2].0);
        assert_eq!(root, hash_pair(&hash_pair(&leaves[0].0, &leaves[1].0), &l2));
    }

    /// Bytes that are not a block are malformed, whatever the hash: every cut, a byte
    /// more, a count beyond the bytes.
    #[test]
    fn a_malformed_block_is_refused() {
        let bytes = hex::decode(GENESIS).unwrap();
        let hash = BlockHash::of_header(bytes[..80].try_into().unwrap());
        for cut in 0..bytes.len() {
            assert!(
                matches!(
                    Block::check(&bytes[..cut], &hash),
                    Err(BlockError::Malformed(_))
                ),
                "cut at {cut}"
            );
        }
        let mut more = bytes.clone();
        more.push(0);
        assert_eq!(
            Block::check(&more, &hash).map(|_| ()),
            Err(BlockError::Malformed(DecodeError::TrailingBytes(1)))
        );
        let mut lie = bytes[..80].to_vec();
        lie.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
        assert!(matches!(
            Block::parse(&lie),
            Err(DecodeError::TooLong { .. })
        ));
        // The transaction count written long: refused as Core refuses it.
        let mut wide = bytes[..80].to_vec();
        wide.extend_from_slice(&[0xfd, 1, 0]);
        wide.extend_from_slice(&bytes[81..]);
        assert_eq!(
            Block::parse(&wide).map(|_| ()),
            Err(DecodeError::NonCanonical {
                field: "the transaction count",
                value: 1
            })
        );
    }
}
