//! The set of one unconfirmed transaction in a gateway's mempool digest: BIP158's
//! Golomb-coded set (P = 19, M = 784,931) of the transaction's output scripts (not empty,
//! not `OP_RETURN`, as in a basic filter) and the outputs it spends (each as its 36-byte
//! outpoint: txid, then the output's index, little-endian), keyed by a salt the client
//! chose for its connection.
//!
//! Why these items: a wallet matches the scripts it watches (a payment to it) and the
//! outpoints of its coins (a spend of one, or a replacement of its own unconfirmed
//! transaction); the scripts a transaction's inputs spend are not in the transaction, and
//! a gateway following a node over P2P cannot know them without the UTXO set.
//!
//! Why a salt per connection: with a key everyone knows, the false positives of a set of
//! scripts would be the same for every session, and a gateway watching which transactions
//! a client fetches could tell them from its real payments. With the client's own random
//! salt they differ each time; only the real matches repeat. A false positive costs one
//! transaction fetched: 1 in 784,931 per watched item and transaction, however many items
//! the transaction has (each query falls on one of N values in a range N * M wide).

use alloc::vec::Vec;

use lightwire_primitives::Tx;

use crate::FilterError;
use crate::gcs::{BASIC_M, Filter, Matcher, build_from_hashes, item_hash, to_range};

/// Bytes of a salt.
pub const SALT_LEN: usize = 16;

/// An outpoint as a set item: the txid (internal byte order), then the index.
pub fn outpoint_item(txid: &[u8; 32], vout: u32) -> [u8; 36] {
    let mut item = [0u8; 36];
    item[..32].copy_from_slice(txid);
    item[32..].copy_from_slice(&vout.to_le_bytes());
    item
}

/// The key BIP158's code takes (a block hash's first 16 bytes), from a salt.
fn key(salt: &[u8; SALT_LEN]) -> [u8; 32] {
    let mut k = [0u8; 32];
    k[..SALT_LEN].copy_from_slice(salt);
    k
}

/// Call `f` with every item of `tx`'s set: its output scripts that are not empty and do
/// not start with `OP_RETURN`, then the outpoints its inputs spend.
pub fn tx_items(tx: &Tx<'_>, mut f: impl FnMut(&[u8])) {
    for o in tx.outputs() {
        if !o.script.is_empty() && o.script[0] != 0x6a {
            f(o.script);
        }
    }
    for i in tx.inputs() {
        f(&outpoint_item(i.prev_txid, i.prev_vout));
    }
}

/// The set of `tx` keyed by `salt`, written to `out` (replaced). `hashes` is scratch kept
/// by the caller: no allocation once it has held the largest transaction's items.
pub fn tx_set(tx: &Tx<'_>, salt: &[u8; SALT_LEN], hashes: &mut Vec<u64>, out: &mut Vec<u8>) {
    let k = key(salt);
    hashes.clear();
    tx_items(tx, |item| hashes.push(item_hash(&k, item)));
    build_from_hashes(hashes, out);
}

/// A wallet's items hashed under one connection's salt and sorted: what each entry of that
/// connection's digest is matched against. Hashing and sorting are done once per salt and
/// per change of the items, not per entry: an entry whose set holds N items costs N binary
/// searches, however many items the wallet has. (`to_range` keeps the hashes' order for
/// any N, so one sorted list of hashes serves every set size.)
#[derive(Default, Debug)]
pub struct SaltedItems {
    hashes: Vec<u64>,
}

impl SaltedItems {
    /// `items` hashed under `salt` (the buffer reused).
    pub fn rebuild<'i>(
        &mut self,
        salt: &[u8; SALT_LEN],
        items: impl IntoIterator<Item = &'i [u8]>,
    ) {
        let k = crate::gcs::key(&key(salt));
        self.hashes.clear();
        self.hashes
            .extend(items.into_iter().map(|i| crate::gcs::siphash(k, i)));
        self.hashes.sort_unstable();
    }

    /// How many items are held.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// Whether any of the items is in `set`, a transaction's set keyed by the same salt.
    pub fn matches(&self, set: &[u8]) -> Result<bool, FilterError> {
        let filter = Filter::decode(set)?;
        if filter.n == 0 || self.hashes.is_empty() {
            return Ok(false);
        }
        let f = filter.n.saturating_mul(BASIC_M);
        let mut from = 0;
        for value in filter.values() {
            let value = value?;
            // The values rise: the search starts where the last one ended.
            from += self.hashes[from..].partition_point(|&h| to_range(h, f) < value);
            match self.hashes.get(from) {
                None => return Ok(false),
                Some(&h) if to_range(h, f) == value => return Ok(true),
                Some(_) => {}
            }
        }
        Ok(false)
    }
}

/// Whether any of `queries` is in `set`, a transaction's set keyed by `salt`.
pub fn set_matches<'q>(
    matcher: &mut Matcher,
    set: &[u8],
    salt: &[u8; SALT_LEN],
    queries: impl IntoIterator<Item = &'q [u8]>,
) -> Result<bool, FilterError> {
    matcher.match_any(set, &key(salt), queries)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use alloc::vec;

    use super::*;

    /// A transaction spending `(txid, vout)` and paying `scripts`.
    fn tx(spends: ([u8; 32], u32), scripts: &[&[u8]]) -> Vec<u8> {
        let mut t = vec![2, 0, 0, 0, 1];
        t.extend_from_slice(&spends.0);
        t.extend_from_slice(&spends.1.to_le_bytes());
        t.extend_from_slice(&[0, 0xff, 0xff, 0xff, 0xff]);
        t.push(scripts.len() as u8);
        for s in scripts {
            t.extend_from_slice(&1_000u64.to_le_bytes());
            t.push(s.len() as u8);
            t.extend_from_slice(s);
        }
        t.extend_from_slice(&[0; 4]);
        t
    }

    #[test]
    fn a_set_matches_its_scripts_and_outpoints_under_its_salt_only() {
        let ours: &[u8] = &[
            0x00, 0x14, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
        ];
        let other: &[u8] = &[0x51];
        let op_return: &[u8] = &[0x6a, 1, 2];
        let bytes = tx(([9; 32], 3), &[ours, op_return]);
        let t = Tx::parse(&bytes).unwrap();
        let (salt, other_salt) = ([5u8; 16], [6u8; 16]);
        let (mut hashes, mut set) = (Vec::new(), Vec::new());
        tx_set(&t, &salt, &mut hashes, &mut set);
        assert_eq!(set[0], 2, "the script and the outpoint; not OP_RETURN");
        let mut m = Matcher::default();
        let spent = outpoint_item(&[9; 32], 3);
        assert!(set_matches(&mut m, &set, &salt, [ours]).unwrap());
        assert!(set_matches(&mut m, &set, &salt, [&spent[..]]).unwrap());
        assert!(!set_matches(&mut m, &set, &salt, [other, op_return]).unwrap());
        assert!(!set_matches(&mut m, &set, &salt, [&outpoint_item(&[9; 32], 4)[..]]).unwrap());
        // Another salt codes another set.
        let mut set2 = Vec::new();
        tx_set(&t, &other_salt, &mut hashes, &mut set2);
        assert_ne!(set, set2);
        assert!(set_matches(&mut m, &set2, &other_salt, [ours]).unwrap());
        // The same answers from the items hashed once.
        let mut salted = SaltedItems::default();
        salted.rebuild(&salt, [other, op_return]);
        assert!(!salted.matches(&set).unwrap());
        salted.rebuild(&salt, [other, &spent[..]]);
        assert!(salted.matches(&set).unwrap());
        assert!(!salted.matches(&set2).unwrap());
        salted.rebuild(&salt, []);
        assert!(!salted.matches(&set).unwrap());
    }

    /// Against the merge of every item for each set (what the digest was matched with
    /// before): the same answer for sets of 1 to 40 items and wallets of 1 to 3,000, and
    /// a set that does not decode is the same error.
    #[test]
    fn items_hashed_once_match_as_the_merge_does() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let salt = [7u8; 16];
        let (mut hashes, mut set, mut m) = (Vec::new(), Vec::new(), Matcher::default());
        let mut salted = SaltedItems::default();
        let mut agreed = (0, 0);
        for round in 0..300 {
            let scripts: Vec<[u8; 22]> = (0..1 + next() % 40)
                .map(|_| {
                    let mut s = [0u8; 22];
                    s[..8].copy_from_slice(&next().to_le_bytes());
                    s
                })
                .collect();
            let refs: Vec<&[u8]> = scripts.iter().map(|s| &s[..]).collect();
            let bytes = tx(([round as u8; 32], 1), &refs);
            tx_set(&Tx::parse(&bytes).unwrap(), &salt, &mut hashes, &mut set);
            let mut wallet: Vec<[u8; 22]> = (0..1 + next() % 3_000)
                .map(|_| {
                    let mut s = [0u8; 22];
                    s[..8].copy_from_slice(&next().to_le_bytes());
                    s
                })
                .collect();
            if round % 3 == 0 {
                wallet.push(scripts[(next() % scripts.len() as u64) as usize]);
            }
            let items = || wallet.iter().map(|s| &s[..]);
            salted.rebuild(&salt, items());
            let merged = set_matches(&mut m, &set, &salt, items()).unwrap();
            assert_eq!(salted.matches(&set).unwrap(), merged, "round {round}");
            agreed.0 += usize::from(merged);
            agreed.1 += 1;
            let cut = &set[..set.len() / 2];
            assert_eq!(
                salted.matches(cut).is_err(),
                set_matches(&mut m, cut, &salt, items()).is_err()
            );
        }
        assert!(agreed.0 >= 100, "{agreed:?}");
    }
}
