//! Child pays for parent: what a spend of unconfirmed coins adds to its fee so that it and
//! the unconfirmed transactions it depends on reach its rate together, as Bitcoin Core's
//! wallet (v26 on) does when it spends an unconfirmed coin: `MiniMiner` simulates a miner
//! over the coin's unconfirmed ancestors, takes out those that pay the rate by themselves
//! (with their own ancestors: a miner takes them anyway), and charges the spend the rest's
//! shortfall, `rate × vsize - fee` (`CalculateBumpFees` for each coin while choosing,
//! `CalculateTotalBumpFees` once for the coins chosen, whose shared ancestors are paid
//! for once). A coin whose spend would have more unconfirmed ancestors than nodes relay
//! (Core's `DEFAULT_ANCESTOR_LIMIT`, 25 with itself) is not spent.
//!
//! What a light client knows less than Core, said plainly:
//! - an ancestor's fee is known when every input spends one of the wallet's coins (the
//!   wallet's own spends); a stranger's payment's inputs' values are not known, so its
//!   fee counts as nothing: the child then pays at most that fee more than Core would ask
//!   (and a payment stuck for its fee paid little);
//! - only the unconfirmed transactions the wallet holds are seen: a stranger's payment
//!   spending another stranger's unconfirmed transaction has an ancestor the wallet does
//!   not know, and the package then falls short of the rate by that ancestor's shortfall
//!   (it never pays more than it says).
//!
//! Written here, not taken from a crate: it is a few dozen lines over the wallet's own
//! unconfirmed set, which no Bitcoin crate knows.

use alloc::vec::Vec;

use lightwire_primitives::{Tx, Txid};

use super::FeeRate;
use crate::unconfirmed::Unconfirmed;

/// The most unconfirmed ancestors a spend may have, itself not counted (Bitcoin Core's
/// `DEFAULT_ANCESTOR_LIMIT` of 25, itself counted): nodes relay no longer a chain.
pub const MAX_ANCESTORS: usize = 24;

/// One unconfirmed transaction as the simulation sees it.
struct Node {
    txid: Txid,
    vsize: u64,
    /// Its fee; 0 when not known (see the module documentation).
    fee: u64,
    /// The unconfirmed transactions it spends (indexes).
    parents: Vec<usize>,
}

/// The wallet's unconfirmed transactions and how they depend on one another.
pub struct Ancestry {
    nodes: Vec<Node>,
    /// Each node's txid and index, by txid (a coin's transaction found in O(log n)).
    index: Vec<(Txid, usize)>,
}

impl Ancestry {
    /// The graph of `unconfirmed`.
    pub fn new(unconfirmed: &Unconfirmed) -> Ancestry {
        let txs = unconfirmed.transactions();
        let nodes: Vec<Node> = txs
            .iter()
            .map(|t| Node {
                txid: t.txid,
                vsize: Tx::parse(&t.raw).map_or(0, |tx| (tx.weight() as u64).div_ceil(4)),
                fee: t.fee.unwrap_or(0),
                parents: Vec::new(),
            })
            .collect();
        let index = index_of(&nodes);
        let mut a = Ancestry { nodes, index };
        for (i, t) in txs.iter().enumerate() {
            let mut parents: Vec<usize> = Vec::new();
            for p in t.inputs().filter_map(|o| a.find(&o.txid)) {
                if !parents.contains(&p) {
                    parents.push(p);
                }
            }
            a.nodes[i].parents = parents;
        }
        a
    }

    /// The node of `txid`, if it is an unconfirmed transaction here.
    fn find(&self, txid: &Txid) -> Option<usize> {
        let at = self
            .index
            .binary_search_by(|(t, _)| t.0.cmp(&txid.0))
            .ok()?;
        Some(self.index[at].1)
    }

    /// The unconfirmed transactions a spend of outputs of `of` depends on: those of `of`
    /// held here and their ancestors (indexes, ascending).
    fn closure(&self, of: &[Txid]) -> Vec<usize> {
        let mut stack: Vec<usize> = of.iter().filter_map(|t| self.find(t)).collect();
        if stack.is_empty() {
            return Vec::new();
        }
        let mut seen = alloc::vec![false; self.nodes.len()];
        while let Some(i) = stack.pop() {
            if !core::mem::replace(&mut seen[i], true) {
                stack.extend(self.nodes[i].parents.iter().copied());
            }
        }
        (0..seen.len()).filter(|&i| seen[i]).collect()
    }

    /// How many unconfirmed ancestors a spend of outputs of `of` has.
    pub fn count(&self, of: &[Txid]) -> usize {
        self.closure(of).len()
    }

    /// What a spend of outputs of the transactions `of` adds to its fee at `rate` for
    /// their unconfirmed ancestors (see the module documentation); `Err` with their count
    /// when there are more than [`MAX_ANCESTORS`].
    pub fn bump(&self, of: &[Txid], rate: FeeRate) -> Result<u64, usize> {
        let mut left = self.closure(of);
        if left.len() > MAX_ANCESTORS {
            return Err(left.len());
        }
        // A miner's pass: while some transaction left pays the rate with its ancestors
        // left (the best such first), those are mined without the spend's help.
        loop {
            let mut best: Option<(Vec<usize>, u64, u64)> = None;
            for &i in &left {
                let package = self.ancestors_within(i, &left);
                let (fee, vsize) = self.sums(&package);
                let pays = u128::from(fee) * 1000 >= u128::from(rate.0) * u128::from(vsize);
                let better = best.as_ref().is_none_or(|(_, f, v)| {
                    u128::from(fee) * u128::from(*v) > u128::from(*f) * u128::from(vsize)
                });
                if pays && better {
                    best = Some((package, fee, vsize));
                }
            }
            match best {
                Some((mined, _, _)) => left.retain(|i| !mined.contains(i)),
                None => break,
            }
        }
        let (fee, vsize) = self.sums(&left);
        Ok(rate.fee(vsize).saturating_sub(fee))
    }

    /// Node `i` and its ancestors among `within`.
    fn ancestors_within(&self, i: usize, within: &[usize]) -> Vec<usize> {
        let mut out = alloc::vec![i];
        let mut at = 0;
        while at < out.len() {
            for &p in &self.nodes[out[at]].parents {
                if within.contains(&p) && !out.contains(&p) {
                    out.push(p);
                }
            }
            at += 1;
        }
        out
    }

    /// The fees and virtual sizes of `set`.
    fn sums(&self, set: &[usize]) -> (u64, u64) {
        set.iter().fold((0u64, 0u64), |(f, v), &i| {
            (
                f.saturating_add(self.nodes[i].fee),
                v.saturating_add(self.nodes[i].vsize),
            )
        })
    }
}

/// `nodes`' txids with their indexes, sorted by txid (each put in its place: at most
/// [`crate::unconfirmed::MAX_UNCONFIRMED`] of them, and no sort's code in the wasm).
fn index_of(nodes: &[Node]) -> Vec<(Txid, usize)> {
    let mut index: Vec<(Txid, usize)> = Vec::with_capacity(nodes.len());
    for (i, n) in nodes.iter().enumerate() {
        let at = index.partition_point(|(t, _)| t.0 < n.txid.0);
        index.insert(at, (n.txid, i));
    }
    index
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn txid(n: u8) -> Txid {
        Txid([n; 32])
    }

    /// A graph of (fee, vsize, parents) by hand.
    fn graph(nodes: &[(u64, u64, &[usize])]) -> Ancestry {
        let nodes: Vec<Node> = nodes
            .iter()
            .enumerate()
            .map(|(i, (fee, vsize, parents))| Node {
                txid: txid(i as u8),
                vsize: *vsize,
                fee: *fee,
                parents: parents.to_vec(),
            })
            .collect();
        let index = index_of(&nodes);
        Ancestry { nodes, index }
    }

    const FIVE: FeeRate = FeeRate(5_000);

    #[test]
    fn a_parent_below_the_rate_is_paid_up_to_it() {
        // 141 vB at 1 sat/vB: 5 sat/vB lacks 4 × 141.
        let a = graph(&[(141, 141, &[])]);
        assert_eq!(a.bump(&[txid(0)], FIVE), Ok(564));
        // At or above the rate: nothing.
        let a = graph(&[(705, 141, &[])]);
        assert_eq!(a.bump(&[txid(0)], FIVE), Ok(0));
        // A confirmed coin (not held here): nothing.
        assert_eq!(a.bump(&[txid(9)], FIVE), Ok(0));
    }

    /// Core's `MiniMiner`: a grandparent paying well is mined by itself; its low-paying
    /// child is what the spend pays for. Counting the two as one package would let the
    /// grandparent's fee stand in for the child's, which a miner would not do.
    #[test]
    fn an_ancestor_paying_the_rate_by_itself_is_left_to_the_miner() {
        // 0: 100 vB at 20 sat/vB; 1 (spends 0): 100 vB at 1 sat/vB.
        let a = graph(&[(2_000, 100, &[]), (100, 100, &[0])]);
        assert_eq!(a.bump(&[txid(1)], FIVE), Ok(400));
        // Both low: both paid up.
        let a = graph(&[(100, 100, &[]), (100, 100, &[0])]);
        assert_eq!(a.bump(&[txid(1)], FIVE), Ok(800));
        // A high-paying child carries its low parent: mined together, nothing to add.
        let a = graph(&[(100, 100, &[]), (2_000, 100, &[0])]);
        assert_eq!(a.bump(&[txid(1)], FIVE), Ok(0));
    }

    /// Two coins of one parent: the parent is paid for once (`CalculateTotalBumpFees`),
    /// though each coin alone would be charged for it.
    #[test]
    fn shared_ancestors_are_paid_for_once() {
        let a = graph(&[(100, 100, &[]), (100, 100, &[0]), (100, 100, &[0])]);
        assert_eq!(a.bump(&[txid(1)], FIVE), Ok(800));
        assert_eq!(a.bump(&[txid(2)], FIVE), Ok(800));
        assert_eq!(a.bump(&[txid(1), txid(2)], FIVE), Ok(1_200));
    }

    /// A chain longer than nodes relay: refused with its length, before any simulation.
    #[test]
    fn more_ancestors_than_nodes_relay_are_refused() {
        let parents: Vec<[usize; 1]> = (0..30).map(|i| [i]).collect();
        let mut nodes: Vec<(u64, u64, &[usize])> = vec![(100, 100, &[])];
        for p in parents.iter().take(29) {
            nodes.push((100, 100, p));
        }
        let a = graph(&nodes);
        assert_eq!(a.count(&[txid(23)]), 24);
        assert!(a.bump(&[txid(23)], FIVE).is_ok());
        assert_eq!(a.bump(&[txid(24)], FIVE), Err(25));
    }
}
