//! A block's silent-payment tweaks worked out from evidence alone: what settles a dispute
//! between gateways whose tweak lists for a block differ (docs/PROTOCOL.md,
//! "Silent-payment tweaks").
//!
//! The evidence is the block (checked against the header the client validated: hash,
//! Merkle root, no mutation) and the transactions that created the outputs its eligible
//! transactions spend. Each of those is trusted for nothing: it counts only as the
//! transaction whose txid it hashes to, so the scripts it gives are the ones the outpoints
//! name. The keys of P2WPKH and P2TR inputs are witness data, which the Merkle root does
//! not cover: the block's witness commitment (BIP141, [`CheckedBlock::check_witness`]) is
//! checked first, so that a gateway cannot change a witness to change a tweak. What the
//! evidence lacks (a transaction spent from, or its output) is named, so that the gateway
//! that withheld it can be held to it.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use lightwire_primitives::{CheckedBlock, Tx, Txid, WitnessError};

use crate::silent::{is_p2tr, tweak};

/// Why a block's tweaks could not be worked out from the evidence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EvidenceError {
    /// The block's witness data is not what its coinbase commits to.
    #[error("the block's witness data: {0}")]
    Witness(#[from] WitnessError),
    /// A transaction given as evidence does not parse.
    #[error("evidence transaction {index} does not parse")]
    Malformed {
        /// Its place among those given.
        index: usize,
    },
    /// An eligible transaction spends from a transaction neither in the block (before it)
    /// nor given.
    #[error("no transaction {txid} among those given, which the block spends from")]
    Missing {
        /// The transaction spent from.
        txid: Txid,
    },
    /// A transaction spent from has no output at the index spent.
    #[error("transaction {txid} has no output {vout}")]
    NoSuchOutput {
        /// The transaction.
        txid: Txid,
        /// The output index spent.
        vout: u32,
    },
}

/// The tweaks of `block`'s transactions that BIP352 scans, sorted, into `out` (replaced),
/// given `spent_from`: the transactions (serialized) that created the outputs they spend,
/// in any order, any not needed ignored. The witness commitment is checked first; a
/// transaction spent from that is neither in the block, before the spender, nor given is
/// [`EvidenceError::Missing`].
pub fn tweaks_from_evidence(
    block: &CheckedBlock<'_>,
    spent_from: &[&[u8]],
    out: &mut Vec<[u8; 33]>,
) -> Result<(), EvidenceError> {
    out.clear();
    let worked_out = work_out(block, spent_from, out);
    if worked_out.is_err() {
        out.clear();
    }
    worked_out
}

fn work_out(
    block: &CheckedBlock<'_>,
    spent_from: &[&[u8]],
    out: &mut Vec<[u8; 33]>,
) -> Result<(), EvidenceError> {
    block.check_witness()?;
    let mut given: BTreeMap<[u8; 32], Tx<'_>> = BTreeMap::new();
    for (index, raw) in spent_from.iter().enumerate() {
        let tx = Tx::parse(raw).map_err(|_| EvidenceError::Malformed { index })?;
        given.insert(tx.txid().0, tx);
    }
    // The block's own transactions, as they come: one may spend an earlier one.
    let mut earlier: BTreeMap<[u8; 32], Tx<'_>> = BTreeMap::new();
    let mut scripts: Vec<&[u8]> = Vec::new();
    for (i, tx) in block.transactions().enumerate() {
        if i > 0 && tx.outputs().any(|o| is_p2tr(o.script)) {
            scripts.clear();
            for input in tx.inputs() {
                let from = earlier
                    .get(input.prev_txid)
                    .or_else(|| given.get(input.prev_txid))
                    .ok_or(EvidenceError::Missing {
                        txid: input.prev_txid(),
                    })?;
                let output = from.outputs().nth(input.prev_vout as usize).ok_or(
                    EvidenceError::NoSuchOutput {
                        txid: input.prev_txid(),
                        vout: input.prev_vout,
                    },
                )?;
                scripts.push(output.script);
            }
            if let Ok(t) = tweak(&tx, &scripts) {
                out.push(t);
            }
        }
        earlier.insert(tx.txid().0, tx);
    }
    out.sort_unstable();
    Ok(())
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::silent::tests::{block_of, first_case, transaction};
    use lightwire_primitives::{Block, BlockHash};

    /// A block of `txs`, given a header whose Merkle root is theirs, and its hash.
    fn checked(txs: &[Vec<u8>]) -> (Vec<u8>, BlockHash) {
        let mut raw = block_of(txs);
        let root = Block::parse(&raw).unwrap().merkle_root().0;
        raw[36..68].copy_from_slice(&root);
        let header: [u8; 80] = raw[..80].try_into().unwrap();
        (raw, BlockHash::of_header(&header))
    }

    /// A transaction with one output of `script`, spendable as output 0 of its txid.
    fn creating(script: &[u8], n: u8) -> Vec<u8> {
        let mut tx = vec![2, 0, 0, 0, 1];
        tx.extend_from_slice(&[n; 32]);
        tx.extend_from_slice(&[0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 1]);
        tx.extend_from_slice(&1000u64.to_le_bytes());
        lightwire_primitives::write_compact_size(&mut tx, script.len() as u64);
        tx.extend_from_slice(script);
        tx.extend_from_slice(&[0; 4]);
        tx
    }

    /// BIP352's first receiving case as a block: from the transactions that created what it
    /// spends (made here with the vector's scripts, the vector's inputs pointed at them),
    /// the vector's tweak; without one of them, which one is named; with one whose output
    /// is missing, that; in any order, with extra ones, the same.
    #[test]
    fn the_tweaks_of_a_block_from_the_transactions_it_spends() {
        let (mut vin, output, want) = first_case();
        let (_, spent) = transaction(&vin, &[output]);
        // Each input now spends output 0 of a transaction made here with its script.
        let sources: Vec<Vec<u8>> = spent
            .iter()
            .enumerate()
            .map(|(i, s)| creating(s, i as u8 + 1))
            .collect();
        for (input, source) in vin.iter_mut().zip(&sources) {
            let txid = Tx::parse(source).unwrap().txid();
            input["txid"] = serde_json::Value::String(txid.to_string());
            input["vout"] = serde_json::json!(0);
        }
        let (paying, _) = transaction(&vin, &[output]);
        let (raw, hash) = checked(&[paying]);
        let block = CheckedBlock::check(&raw, &hash).unwrap();
        // The tweak does not depend on which outpoints are spent but through the input
        // hash: worked out the plain way from the same scripts, it is the same.
        let paying_tx = block.transactions().nth(1).unwrap();
        let scripts: Vec<&[u8]> = spent.iter().map(Vec::as_slice).collect();
        let direct = tweak(&paying_tx, &scripts).unwrap();
        assert_ne!(direct, want, "other outpoints, another input hash");

        let mut out = Vec::new();
        let unrelated = creating(&[0x51], 99);
        let given: Vec<&[u8]> = [&unrelated, &sources[1], &sources[0]]
            .into_iter()
            .map(Vec::as_slice)
            .collect();
        tweaks_from_evidence(&block, &given, &mut out).unwrap();
        assert_eq!(out, [direct]);

        let missing = Tx::parse(&sources[0]).unwrap().txid();
        assert_eq!(
            tweaks_from_evidence(&block, &[&sources[1]], &mut out),
            Err(EvidenceError::Missing { txid: missing })
        );
        assert!(out.is_empty(), "nothing is left from a failed try");
        assert_eq!(
            tweaks_from_evidence(&block, &[&sources[0], &[1, 2, 3]], &mut out),
            Err(EvidenceError::Malformed { index: 1 })
        );

        // An input spending an output its transaction does not have.
        vin[1]["vout"] = serde_json::json!(3);
        let (paying, _) = transaction(&vin, &[output]);
        let (raw, hash) = checked(&[paying]);
        let block = CheckedBlock::check(&raw, &hash).unwrap();
        let txid = Tx::parse(&sources[1]).unwrap().txid();
        assert_eq!(
            tweaks_from_evidence(&block, &given, &mut out),
            Err(EvidenceError::NoSuchOutput { txid, vout: 3 })
        );
    }
}
