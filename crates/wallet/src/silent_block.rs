//! A silent-payment receiver's scan of one block (BIP352 over BIP158), sans-IO, in the two
//! steps a light client takes: first the block's basic filter (verified against its filter
//! header) is asked whether it holds the taproot script of any key a transaction of the
//! block's tweaks would give the receiver first (`P_0`, and `P_0` plus each label's point);
//! only on a match is the block fetched (and checked against its header), and its
//! transactions' taproot outputs are searched for those keys, each transaction found then
//! scanned whole ([`Receiver::scan`]: `P_1`, `P_2`, ... up to K_max).
//!
//! Nothing is taken on the tweak list's word alone: a tweak that is not a point is an error
//! (the list came from a gateway that committed to it), and a payment is one only if the
//! block, checked against its header, holds an output at the key the receiver computed.
//! A tweak missing from the list hides its payment: that is for the tweak-header chain's
//! cross-check to catch, not for this module.
//!
//! [`BlockScanner`] keeps its buffers between blocks: no allocation per block once it has
//! held the largest one.

use alloc::vec::Vec;

use lightwire_filter::{FilterError, Matcher};
use lightwire_primitives::{Block, TweakList, Txid};

use crate::silent::{Found, Receiver, SilentError, is_p2tr};

/// Why a block could not be scanned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BlockScanError {
    /// A tweak of the list is not a point (or a hash is not a scalar).
    #[error(transparent)]
    Silent(#[from] SilentError),
    /// The filter does not decode.
    #[error(transparent)]
    Filter(#[from] FilterError),
}

/// An output of a block that pays the receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Payment {
    /// The transaction paying.
    pub txid: Txid,
    /// The output's index in it.
    pub vout: u32,
    /// The transaction's tweak (from the list).
    pub tweak: [u8; 33],
    /// The output as [`Receiver::scan`] found it (`output` is its index among the
    /// transaction's taproot outputs; `vout` above is its index among all).
    pub found: Found,
}

/// The buffers of a receiver's block scans (see the module's documentation).
#[derive(Debug, Default)]
pub struct BlockScanner {
    /// The tweaks of the list last matched, in order.
    tweaks: Vec<[u8; 33]>,
    /// Their first keys: `1 + labels` a tweak, in the tweaks' order.
    keys: Vec<[u8; 32]>,
    /// The keys' taproot scripts (`OP_1 OP_PUSHBYTES_32 key`).
    scripts: Vec<[u8; 34]>,
    matcher: Matcher,
    /// The keys sorted, each with its tweak's index (built only for a block fetched).
    sorted: Vec<([u8; 32], usize)>,
    /// A transaction's taproot output keys and their vouts.
    outputs: Vec<[u8; 32]>,
    vouts: Vec<u32>,
    found: Vec<Found>,
}

impl BlockScanner {
    /// Empty buffers.
    pub fn new() -> BlockScanner {
        BlockScanner::default()
    }

    /// Whether the basic filter of the block `block_hash` (verified against its filter
    /// header: this does not check it) holds the taproot script of a first key of
    /// `receiver` for any tweak of `list`, the block's tweak list. BIP158's false positives
    /// (one in 784,931 a key) make a match a block to fetch, not a payment: then
    /// [`Self::payments`], with the same receiver, on that block.
    pub fn filter_matches(
        &mut self,
        receiver: &Receiver,
        list: &TweakList<'_>,
        filter: &[u8],
        block_hash: &[u8; 32],
    ) -> Result<bool, BlockScanError> {
        self.load(receiver, list)?;
        if self.keys.is_empty() {
            return Ok(false);
        }
        self.scripts.clear();
        self.scripts.extend(self.keys.iter().map(|k| {
            let mut s = [0u8; 34];
            s[0] = 0x51;
            s[1] = 0x20;
            s[2..].copy_from_slice(k);
            s
        }));
        Ok(self
            .matcher
            .match_any(filter, block_hash, self.scripts.iter().map(|s| &s[..]))?)
    }

    /// Work out the first keys of `receiver` for every tweak of `list` (what
    /// [`Self::filter_matches`] does before it asks the filter): for [`Self::payments`] on
    /// a block matched earlier, once other blocks were matched since.
    pub fn load(
        &mut self,
        receiver: &Receiver,
        list: &TweakList<'_>,
    ) -> Result<(), BlockScanError> {
        self.tweaks.clear();
        self.tweaks.extend(list.iter().copied());
        self.keys.clear();
        receiver.first_keys_batch(&self.tweaks, &mut self.keys)?;
        Ok(())
    }

    /// The outputs of `block` (checked against its header by the caller) that pay
    /// `receiver`, appended to `out`: each transaction holding a taproot output at a first
    /// key of the tweaks [`Self::filter_matches`] (or [`Self::load`]) was last given is scanned with that
    /// tweak. A transaction of the block that no such key pays is not looked at further.
    pub fn payments<V>(
        &mut self,
        receiver: &Receiver,
        block: &Block<'_, V>,
        out: &mut Vec<Payment>,
    ) -> Result<(), BlockScanError> {
        let per = self.keys.len() / self.tweaks.len().max(1);
        if per == 0 {
            return Ok(());
        }
        self.sorted.clear();
        self.sorted
            .extend(self.keys.iter().enumerate().map(|(i, k)| (*k, i / per)));
        self.sorted.sort_unstable();
        for tx in block.transactions().skip(1) {
            self.outputs.clear();
            self.vouts.clear();
            for (vout, o) in tx.outputs().enumerate() {
                if is_p2tr(o.script) {
                    let mut key = [0u8; 32];
                    key.copy_from_slice(&o.script[2..34]);
                    self.outputs.push(key);
                    self.vouts.push(vout as u32);
                }
            }
            let tweak = self.outputs.iter().find_map(|key| {
                let i = self.sorted.binary_search_by(|(k, _)| k.cmp(key)).ok()?;
                Some(self.sorted[i].1)
            });
            let Some(tweak) = tweak.and_then(|t| self.tweaks.get(t).copied()) else {
                continue;
            };
            self.found.clear();
            receiver.scan(&tweak, &self.outputs, &mut self.found)?;
            let txid = tx.txid();
            for f in &self.found {
                let vout = self.vouts.get(f.output).copied().unwrap_or(u32::MAX);
                out.push(Payment {
                    txid,
                    vout,
                    tweak,
                    found: *f,
                });
            }
        }
        Ok(())
    }
}

/// The outputs of one transaction `tx` that pay `receiver`, given its `tweak` (for a
/// transaction outside a block: a gateway's mempool digest gave the tweak), appended to
/// `out` as (vout, what [`Receiver::scan`] found). A tweak that is not this
/// transaction's finds nothing, unless whoever chose it paid the receiver's key on
/// purpose: an output found is the receiver's either way.
pub fn tx_payments(
    receiver: &Receiver,
    tweak: &[u8; 33],
    tx: &lightwire_primitives::Tx<'_>,
    out: &mut Vec<(u32, Found)>,
) -> Result<(), SilentError> {
    let mut keys: Vec<[u8; 32]> = Vec::new();
    let mut vouts: Vec<u32> = Vec::new();
    for (vout, o) in tx.outputs().enumerate() {
        if is_p2tr(o.script) {
            let mut key = [0u8; 32];
            key.copy_from_slice(&o.script[2..34]);
            keys.push(key);
            vouts.push(vout as u32);
        }
    }
    if keys.is_empty() {
        return Ok(());
    }
    let mut found = Vec::new();
    receiver.scan(tweak, &keys, &mut found)?;
    out.extend(
        found
            .into_iter()
            .filter_map(|f| Some((*vouts.get(f.output)?, f))),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::silent::tests::{block_of, first_case_keys, transaction};
    use lightwire_primitives::{BlockHash, write_tweak_list};

    /// A block of a coinbase and `txs`, its hash, and its basic filter (the scripts its
    /// inputs spend given).
    fn block_with(txs: &[Vec<u8>], spent: &[&[u8]]) -> (Vec<u8>, [u8; 32], Vec<u8>) {
        let raw = block_of(txs);
        let header: [u8; 80] = raw[..80].try_into().unwrap();
        let hash = BlockHash::of_header(&header).0;
        let mut filter = Vec::new();
        lightwire_filter::basic_filter(&hash, &raw, spent.iter().copied(), &mut filter).unwrap();
        (raw, hash, filter)
    }

    /// A list of `tweaks` (sorted when written).
    fn list_of(mut tweaks: Vec<[u8; 33]>) -> Vec<u8> {
        let mut list = Vec::new();
        write_tweak_list(&mut tweaks, &mut list);
        list
    }

    /// Other valid tweaks: `k·G` for small `k`.
    fn others(n: u8) -> Vec<[u8; 33]> {
        use k256::elliptic_curve::sec1::ToSec1Point;
        (1..=n)
            .map(|k| {
                let p = k256::ProjectivePoint::GENERATOR * k256::Scalar::from(u64::from(k));
                p.to_affine()
                    .to_sec1_point(true)
                    .as_bytes()
                    .try_into()
                    .unwrap()
            })
            .collect()
    }

    /// BIP352's first receiving case, in a block beside a transaction paying someone
    /// else: the filter matches for the receiver, the block gives the one payment at the
    /// vector's output with the vector's tweak; a receiver of another scan key, or a list
    /// without the tweak, matches nothing (what the block alone could not say).
    #[test]
    fn a_payment_is_found_from_the_filter_then_the_block() {
        let (vin, output, tweak, scan, spend) = first_case_keys();
        let (paying, spent) = transaction(&vin, &[[7; 32], output]);
        let (other, other_spent) = transaction(&vin[..1], &[[8; 32]]);
        let mut scripts: Vec<&[u8]> = spent.iter().map(Vec::as_slice).collect();
        scripts.extend(other_spent.iter().map(Vec::as_slice));
        let (raw, hash, filter) = block_with(&[other, paying.clone()], &scripts);
        let block = Block::parse(&raw).unwrap();

        let mut receiver = Receiver::new(&scan, &spend).unwrap();
        receiver.add_label(3).unwrap();
        let mut tweaks = others(40);
        tweaks.push(tweak);
        let list = list_of(tweaks);
        let list = TweakList::parse(&list).unwrap();
        let mut scanner = BlockScanner::new();
        assert!(
            scanner
                .filter_matches(&receiver, &list, &filter, &hash)
                .unwrap()
        );
        let mut found = Vec::new();
        scanner.payments(&receiver, &block, &mut found).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        let p = found[0];
        assert_eq!((p.vout, p.tweak, p.found.key), (1, tweak, output));
        assert_eq!(
            p.txid,
            lightwire_primitives::Tx::parse(&paying).unwrap().txid()
        );

        // Another scan key: no candidate of its is in the filter.
        let stranger = Receiver::new(&[0x42; 32], &spend).unwrap();
        assert!(
            !scanner
                .filter_matches(&stranger, &list, &filter, &hash)
                .unwrap()
        );
        // The tweak left out of the list: nothing matches (the payment is hidden; the
        // tweak-header chain's cross-check is what catches that).
        let without = list_of(others(40));
        let without = TweakList::parse(&without).unwrap();
        assert!(
            !scanner
                .filter_matches(&receiver, &without, &filter, &hash)
                .unwrap()
        );
        found.clear();
        scanner.payments(&receiver, &block, &mut found).unwrap();
        assert!(found.is_empty(), "no key of the list is in the block");
        // An empty list matches nothing.
        let empty = TweakList::parse(&[0]).unwrap();
        assert!(
            !scanner
                .filter_matches(&receiver, &empty, &filter, &hash)
                .unwrap()
        );
    }

    /// One transaction outside a block, scanned with its tweak: the vector's output at its
    /// vout; with another tweak, or for another receiver, nothing.
    #[test]
    fn a_transaction_alone_is_scanned_with_its_tweak() {
        let (vin, output, tweak, scan, spend) = first_case_keys();
        let (paying, _) = transaction(&vin, &[[7; 32], output]);
        let tx = lightwire_primitives::Tx::parse(&paying).unwrap();
        let receiver = Receiver::new(&scan, &spend).unwrap();
        let mut out = Vec::new();
        tx_payments(&receiver, &tweak, &tx, &mut out).unwrap();
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!((out[0].0, out[0].1.key, out[0].1.k), (1, output, 0));
        out.clear();
        tx_payments(&receiver, &others(1)[0], &tx, &mut out).unwrap();
        assert!(out.is_empty());
        let stranger = Receiver::new(&[0x42; 32], &spend).unwrap();
        tx_payments(&stranger, &tweak, &tx, &mut out).unwrap();
        assert!(out.is_empty());
        let mut off = [0u8; 33];
        off[0] = 2;
        off[32] = 5;
        assert_eq!(
            tx_payments(&receiver, &off, &tx, &mut out),
            Err(SilentError::Tweak)
        );
    }

    /// A tweak that is not a point fails the block with a typed error; so does a filter
    /// that does not decode.
    #[test]
    fn a_tweak_off_the_curve_or_a_broken_filter_is_an_error() {
        let (_, _, tweak, scan, spend) = first_case_keys();
        let receiver = Receiver::new(&scan, &spend).unwrap();
        let mut scanner = BlockScanner::new();
        // x = 5 is not the x of a point of secp256k1 (5^3 + 7 = 132 is not a square mod p).
        let mut off = [0u8; 33];
        off[0] = 2;
        off[32] = 5;
        let list = list_of(vec![tweak, off]);
        let list = TweakList::parse(&list).unwrap();
        let filter = [1u8, 0, 0];
        assert_eq!(
            scanner.filter_matches(&receiver, &list, &filter, &[0; 32]),
            Err(BlockScanError::Silent(SilentError::Tweak))
        );
        let list = list_of(vec![tweak]);
        let list = TweakList::parse(&list).unwrap();
        assert!(matches!(
            scanner.filter_matches(&receiver, &list, &[0xfd], &[0; 32]),
            Err(BlockScanError::Filter(_))
        ));
    }
}
