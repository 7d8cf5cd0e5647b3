//! A watch-only wallet's ledger, sans-IO: the transactions of checked blocks that pay a
//! watched script or spend one of its coins, the coins (unspent or spent, and by what), and
//! the balance by depth. Blocks are applied in height order; a reorganisation disconnects
//! everything above the fork (the transactions there go away until their blocks are
//! found again on the new branch).
//!
//! Amounts are satoshis (`u64`). Only mined transactions are here: unconfirmed ones are
//! kept apart ([`crate::unconfirmed`]). A transaction's fee is known when every input spends one of our
//! coins (only then are all input values known).

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use lightwire_primitives::{BlockHash, CheckedBlock, Tx, Txid};

/// Blocks a coinbase output waits before it can be spent (consensus).
pub const COINBASE_MATURITY: u32 = 100;

/// A transaction output's place: its transaction's id (internal byte order) and index.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Hash)]
pub struct Outpoint {
    /// The transaction.
    pub txid: Txid,
    /// The output's index.
    pub vout: u32,
}

/// One of our coins: an output paying a watched script.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Coin {
    /// Where it is.
    pub outpoint: Outpoint,
    /// Its value.
    pub value: u64,
    /// The script it pays.
    pub script: Vec<u8>,
    /// The height of the block it was created in.
    pub height: u32,
    /// Whether a coinbase created it (spendable after [`COINBASE_MATURITY`] blocks).
    pub coinbase: bool,
    /// The transaction that spent it, and at what height, if one did.
    pub spent_by: Option<(Txid, u32)>,
}

/// A transaction of ours: it pays a watched script or spends one of our coins.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct WalletTx {
    /// Its id.
    pub txid: Txid,
    /// The height of its block.
    pub height: u32,
    /// Its block's hash (internal byte order; the client's resume code compares it as
    /// bytes, so it stays an array until that code moves to `BlockHash`).
    pub block_hash: BlockHash,
    /// Its position in the block.
    pub position: u32,
    /// What its outputs pay our scripts.
    pub received: u64,
    /// The value of our coins it spends.
    pub sent: u64,
    /// Its fee, when every input spends one of our coins.
    pub fee: Option<u64>,
    /// Indexes of its outputs that pay us.
    pub our_outputs: Vec<u32>,
    /// Indexes of its inputs that spend our coins.
    pub our_inputs: Vec<u32>,
}

impl WalletTx {
    /// `received - sent`: what it did to the balance.
    pub fn net(&self) -> i64 {
        self.received as i64 - self.sent as i64
    }
}

/// The balance at a tip.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Balance {
    /// Unspent coins with at least the confirmations asked for (and mature).
    pub confirmed: u64,
    /// Unspent coins with fewer confirmations than asked for.
    pub pending: u64,
    /// Unspent coinbase outputs not yet mature.
    pub immature: u64,
    /// How many unspent coins in all.
    pub coins: u32,
    /// The net of the unconfirmed transactions (incoming positive, outgoing negative):
    /// what they will do to the balance if they are mined. Never part of the others.
    pub unconfirmed: i64,
}

/// What applying a block found.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Applied {
    /// Transactions of ours in it, by their index in [`Ledger::transactions`] order
    /// (their ids).
    pub txids: Vec<Txid>,
    /// Watched scripts its outputs pay (for the gap limit).
    pub used_scripts: Vec<Vec<u8>>,
}

/// The ledger (see the module documentation).
#[derive(Clone, Default, Debug, PartialEq, Eq)]
pub struct Ledger {
    /// Our transactions, by (height, position).
    txs: Vec<WalletTx>,
    /// Every coin we ever had, by outpoint.
    coins: BTreeMap<Outpoint, Coin>,
    /// The highest block applied.
    tip: Option<u32>,
    /// The transactions (without witness data) that created coins a signer needs the
    /// whole transaction for (BIP174's `non_witness_utxo`: every script but taproot's),
    /// in txid order: kept while one of their coins is unspent or spent less than
    /// [`FUNDING_KEPT`] blocks deep (a reorganisation may unspend it).
    funding: Vec<(Txid, Vec<u8>)>,
}

/// How deep a coin's spend must be before its funding transaction is let go.
pub const FUNDING_KEPT: u32 = 144;

/// Funding transactions larger than this (without witness data) are not kept: a payment
/// in a huge transaction cannot make the wallet's record grow by its size. A legacy coin
/// from one cannot be put in a PSBT (its signer needs the whole transaction).
pub const MAX_FUNDING_LEN: usize = 100_000;

impl Ledger {
    /// An empty ledger.
    pub fn new() -> Ledger {
        Ledger::default()
    }

    /// The highest block applied.
    pub fn tip(&self) -> Option<u32> {
        self.tip
    }

    /// Apply `block` (checked against its header: only such a block is taken), at
    /// `height`; `watched` says whether an output script is ours. Blocks come in height
    /// order: one at or below the last applied is refused (`None`; disconnect first).
    pub fn apply(
        &mut self,
        height: u32,
        block: &CheckedBlock<'_>,
        mut watched: impl FnMut(&[u8]) -> bool,
    ) -> Option<Applied> {
        if self.tip.is_some_and(|t| height <= t) {
            return None;
        }
        let hash = block.block_hash();
        let mut applied = Applied::default();
        for (position, tx) in block.transactions().enumerate() {
            let txid = tx.txid();
            let coinbase = tx.is_coinbase();
            let mut record = WalletTx {
                txid,
                height,
                block_hash: hash,
                position: position as u32,
                received: 0,
                sent: 0,
                fee: None,
                our_outputs: Vec::new(),
                our_inputs: Vec::new(),
            };
            let mut inputs = 0u32;
            if !coinbase {
                for (i, input) in tx.inputs().enumerate() {
                    inputs += 1;
                    let outpoint = Outpoint {
                        txid: input.prev_txid(),
                        vout: input.prev_vout,
                    };
                    if let Some(coin) = self.coins.get_mut(&outpoint)
                        && coin.spent_by.is_none()
                    {
                        coin.spent_by = Some((txid, height));
                        record.sent += coin.value;
                        record.our_inputs.push(i as u32);
                    }
                }
            }
            let mut out_total = 0u64;
            for (vout, output) in tx.outputs().enumerate() {
                out_total = out_total.saturating_add(output.value);
                if !watched(output.script) {
                    continue;
                }
                let outpoint = Outpoint {
                    txid,
                    vout: vout as u32,
                };
                self.coins.insert(
                    outpoint,
                    Coin {
                        outpoint,
                        value: output.value,
                        script: output.script.to_vec(),
                        height,
                        coinbase,
                        spent_by: None,
                    },
                );
                if output.script.first() != Some(&0x51) && tx.base_size() <= MAX_FUNDING_LEN {
                    if let Err(at) = self.funding.binary_search_by_key(&txid, |f| f.0) {
                        let mut bytes = Vec::with_capacity(tx.base_size());
                        tx.write_without_witness(&mut bytes);
                        self.funding.insert(at, (txid, bytes));
                    }
                }
                record.received = record.received.saturating_add(output.value);
                record.our_outputs.push(vout as u32);
                if !applied.used_scripts.iter().any(|s| s == output.script) {
                    applied.used_scripts.push(output.script.to_vec());
                }
            }
            if record.our_inputs.is_empty() && record.our_outputs.is_empty() {
                continue;
            }
            if !coinbase && inputs > 0 && record.our_inputs.len() as u32 == inputs {
                record.fee = record.sent.checked_sub(out_total);
            }
            applied.txids.push(txid);
            self.txs.push(record);
        }
        self.tip = Some(height);
        self.prune_funding(height);
        Some(applied)
    }

    /// Funding transactions none of whose coins may be spent again are let go.
    fn prune_funding(&mut self, tip: u32) {
        self.keep_funding(|c| {
            c.spent_by
                .is_none_or(|(_, h)| h.saturating_add(FUNDING_KEPT) > tip)
        });
    }

    /// Funding transactions are kept only for transactions one of whose coins `live`
    /// says is.
    fn keep_funding(&mut self, live: impl Fn(&Coin) -> bool) {
        // The coins are in outpoint order, so their txids come sorted.
        let mut txids: Vec<Txid> = self
            .coins
            .values()
            .filter(|c| live(c))
            .map(|c| c.outpoint.txid)
            .collect();
        txids.dedup();
        self.funding.retain(|(t, _)| txids.binary_search(t).is_ok());
    }

    /// The transaction that created `outpoint`, when kept (see [`MAX_FUNDING_LEN`]).
    pub fn funding(&self, txid: &Txid) -> Option<&[u8]> {
        let at = self.funding.binary_search_by_key(txid, |f| f.0).ok()?;
        Some(&self.funding[at].1)
    }

    /// The blocks above `fork` were disconnected: their transactions go away, the coins
    /// they created are dropped and those they spent are unspent again. Returns the ids of
    /// the transactions withdrawn.
    pub fn disconnect_above(&mut self, fork: u32) -> Vec<Txid> {
        match fork.checked_add(1) {
            Some(first) => self.disconnect_from(first),
            None => Vec::new(),
        }
    }

    /// What blocks from `first` on did is undone (as [`Self::disconnect_above`]); from 0,
    /// everything.
    pub fn disconnect_from(&mut self, first: u32) -> Vec<Txid> {
        let keep = self.txs.partition_point(|t| t.height < first);
        let gone: Vec<Txid> = self.txs.drain(keep..).map(|t| t.txid).collect();
        self.coins.retain(|_, c| c.height < first);
        for c in self.coins.values_mut() {
            if c.spent_by.is_some_and(|(_, h)| h >= first) {
                c.spent_by = None;
            }
        }
        if self.tip.is_some_and(|t| t >= first) {
            self.tip = first.checked_sub(1);
        }
        self.keep_funding(|_| true);
        gone
    }

    /// Our transactions, oldest first.
    pub fn transactions(&self) -> &[WalletTx] {
        &self.txs
    }

    /// Our unspent coins.
    pub fn utxos(&self) -> impl Iterator<Item = &Coin> {
        self.coins.values().filter(|c| c.spent_by.is_none())
    }

    /// The coin at `outpoint`, spent or not, if it was ever ours.
    pub fn coin(&self, outpoint: &Outpoint) -> Option<&Coin> {
        self.coins.get(outpoint)
    }

    /// Every coin we had, spent or not.
    pub fn coins(&self) -> impl Iterator<Item = &Coin> {
        self.coins.values()
    }

    /// The balance with the best chain's tip at `tip`, counting coins with at least
    /// `min_confirmations` as confirmed (a block's own transactions have one).
    pub fn balance(&self, tip: u32, min_confirmations: u32) -> Balance {
        let mut b = Balance::default();
        for c in self.utxos() {
            let confirmations = tip.saturating_sub(c.height).saturating_add(1);
            b.coins += 1;
            if c.coinbase && confirmations < COINBASE_MATURITY + 1 {
                b.immature += c.value;
            } else if confirmations >= min_confirmations {
                b.confirmed += c.value;
            } else {
                b.pending += c.value;
            }
        }
        b
    }

    /// The ledger as bytes, for the store (see [`Self::decode`]).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.txs.len() * 120 + self.coins.len() * 80);
        out.push(2); // layout
        out.extend_from_slice(&self.tip.map_or(u32::MAX, |t| t).to_le_bytes());
        out.extend_from_slice(&(self.txs.len() as u32).to_le_bytes());
        for t in &self.txs {
            out.extend_from_slice(&t.txid.0);
            out.extend_from_slice(&t.height.to_le_bytes());
            out.extend_from_slice(&t.block_hash.0);
            out.extend_from_slice(&t.position.to_le_bytes());
            out.extend_from_slice(&t.received.to_le_bytes());
            out.extend_from_slice(&t.sent.to_le_bytes());
            out.extend_from_slice(&t.fee.map_or(u64::MAX, |f| f).to_le_bytes());
            for list in [&t.our_outputs, &t.our_inputs] {
                out.extend_from_slice(&(list.len() as u32).to_le_bytes());
                list.iter()
                    .for_each(|i| out.extend_from_slice(&i.to_le_bytes()));
            }
        }
        out.extend_from_slice(&(self.coins.len() as u32).to_le_bytes());
        for c in self.coins.values() {
            out.extend_from_slice(&c.outpoint.txid.0);
            out.extend_from_slice(&c.outpoint.vout.to_le_bytes());
            out.extend_from_slice(&c.value.to_le_bytes());
            out.extend_from_slice(&c.height.to_le_bytes());
            out.push(u8::from(c.coinbase));
            match c.spent_by {
                Some((txid, h)) => {
                    out.push(1);
                    out.extend_from_slice(&txid.0);
                    out.extend_from_slice(&h.to_le_bytes());
                }
                None => out.push(0),
            }
            out.extend_from_slice(&(c.script.len() as u32).to_le_bytes());
            out.extend_from_slice(&c.script);
        }
        out.extend_from_slice(&(self.funding.len() as u32).to_le_bytes());
        for (txid, tx) in &self.funding {
            out.extend_from_slice(&txid.0);
            out.extend_from_slice(&(tx.len() as u32).to_le_bytes());
            out.extend_from_slice(tx);
        }
        out
    }

    /// A ledger from [`Self::encode`]'s bytes; `None` if they are not that (a store
    /// written by another version, or damaged).
    pub fn decode(bytes: &[u8]) -> Option<Ledger> {
        let mut r = Cursor(bytes);
        // Layout 1 kept no funding transactions.
        let layout = r.u8()?;
        if layout != 1 && layout != 2 {
            return None;
        }
        let tip = Some(r.u32()?).filter(|t| *t != u32::MAX);
        let n = r.count(100)?;
        let mut txs = Vec::with_capacity(n);
        for _ in 0..n {
            let txid = Txid(r.array()?);
            let height = r.u32()?;
            let block_hash = BlockHash(r.array()?);
            let position = r.u32()?;
            let received = r.u64()?;
            let sent = r.u64()?;
            let fee = Some(r.u64()?).filter(|f| *f != u64::MAX);
            let mut lists = [Vec::new(), Vec::new()];
            for list in &mut lists {
                let k = r.count(4)?;
                for _ in 0..k {
                    list.push(r.u32()?);
                }
            }
            let [our_outputs, our_inputs] = lists;
            txs.push(WalletTx {
                txid,
                height,
                block_hash,
                position,
                received,
                sent,
                fee,
                our_outputs,
                our_inputs,
            });
        }
        let n = r.count(50)?;
        let mut coins = BTreeMap::new();
        for _ in 0..n {
            let outpoint = Outpoint {
                txid: Txid(r.array()?),
                vout: r.u32()?,
            };
            let value = r.u64()?;
            let height = r.u32()?;
            let coinbase = r.u8()? == 1;
            let spent_by = match r.u8()? {
                1 => Some((Txid(r.array()?), r.u32()?)),
                _ => None,
            };
            let len = r.count(1)?;
            let script = r.take(len)?.to_vec();
            coins.insert(
                outpoint,
                Coin {
                    outpoint,
                    value,
                    script,
                    height,
                    coinbase,
                    spent_by,
                },
            );
        }
        let mut funding: Vec<(Txid, Vec<u8>)> = Vec::new();
        if layout == 2 {
            let n = r.count(36)?;
            for _ in 0..n {
                let txid = Txid(r.array()?);
                let len = r.count(1)?;
                let tx = r.take(len)?;
                // Only the transaction it names, in txid order (a damaged record is
                // refused whole).
                let ordered = funding.last().is_none_or(|(t, _)| *t < txid);
                if !ordered || len > MAX_FUNDING_LEN || Tx::parse(tx).ok()?.txid() != txid {
                    return None;
                }
                funding.push((txid, tx.to_vec()));
            }
        }
        r.0.is_empty().then_some(Ledger {
            txs,
            coins,
            tip,
            funding,
        })
    }
}

/// A reader over the encoded ledger: every read checked.
pub(crate) struct Cursor<'a>(pub(crate) &'a [u8]);

impl<'a> Cursor<'a> {
    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = self.0.split_at_checked(n)?;
        self.0 = tail;
        Some(head)
    }
    pub(crate) fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    pub(crate) fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    pub(crate) fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    pub(crate) fn array(&mut self) -> Option<[u8; 32]> {
        self.take(32)?.try_into().ok()
    }
    /// A count of items at least `min` bytes each: refused if the bytes cannot hold them.
    pub(crate) fn count(&mut self, min: usize) -> Option<usize> {
        let n = self.u32()? as usize;
        (n.saturating_mul(min) <= self.0.len()).then_some(n)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use alloc::vec;

    use lightwire_primitives::{Block, BlockHash};

    use super::*;

    /// A transaction: inputs (prev txid, vout), outputs (value, script); legacy coding.
    pub(crate) fn tx(inputs: &[([u8; 32], u32)], outputs: &[(u64, &[u8])]) -> Vec<u8> {
        let mut t = vec![2, 0, 0, 0, inputs.len() as u8];
        for (txid, vout) in inputs {
            t.extend_from_slice(txid);
            t.extend_from_slice(&vout.to_le_bytes());
            t.extend_from_slice(&[0, 0xff, 0xff, 0xff, 0xff]);
        }
        t.push(outputs.len() as u8);
        for (value, script) in outputs {
            t.extend_from_slice(&value.to_le_bytes());
            t.push(script.len() as u8);
            t.extend_from_slice(script);
        }
        t.extend_from_slice(&[0; 4]);
        t
    }

    /// A block of `txs` whose header carries their Merkle root.
    pub(crate) fn block(txs: &[Vec<u8>]) -> Vec<u8> {
        let mut b = vec![0u8; 80];
        b.push(txs.len() as u8);
        txs.iter().for_each(|t| b.extend_from_slice(t));
        let root = Block::parse(&b).unwrap().merkle_root().0;
        b[36..68].copy_from_slice(&root);
        b
    }

    /// `block` checked against its own header, as the ledger takes it.
    pub(crate) fn checked(block: &[u8]) -> CheckedBlock<'_> {
        let hash = BlockHash::of_header(block[..80].try_into().unwrap());
        Block::check(block, &hash).unwrap()
    }

    pub(crate) fn txid(t: &[u8]) -> Txid {
        lightwire_primitives::Tx::parse(t).unwrap().txid()
    }

    pub(crate) const OURS: &[u8] = &[
        0x00, 0x14, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    ];
    pub(crate) const OTHER: &[u8] = &[0x51];

    #[test]
    fn payments_spends_fees_balance_and_a_reorg() {
        let mut l = Ledger::new();
        let ours = |s: &[u8]| s == OURS;
        // Block 10: a coinbase paying us, and a payment of 5,000 to us from elsewhere.
        let cb = tx(&[([0; 32], u32::MAX)], &[(50_000, OURS)]);
        let pay = tx(&[([9; 32], 0)], &[(5_000, OURS), (1_000, OTHER)]);
        let b10 = block(&[cb.clone(), pay.clone()]);
        let got = l.apply(10, &checked(&b10), ours).unwrap();
        assert_eq!(got.txids, [txid(&cb), txid(&pay)]);
        let hash = BlockHash::of_header(b10[..80].try_into().unwrap());
        assert_eq!(l.transactions()[0].block_hash, hash);
        assert_eq!(got.used_scripts, [OURS.to_vec()]);
        assert_eq!(l.transactions()[1].received, 5_000);
        assert_eq!(l.transactions()[1].fee, None, "its input is not ours");
        // The coinbase is immature for 100 blocks.
        let b = l.balance(10, 1);
        assert_eq!((b.confirmed, b.immature, b.coins), (5_000, 50_000, 2));
        assert_eq!(l.balance(109, 1).immature, 50_000);
        assert_eq!(l.balance(110, 1).confirmed, 55_000);
        assert_eq!(l.balance(12, 6).pending, 5_000);
        // Block 20: spend the 5,000 into 4,000 elsewhere (fee 1,000).
        let spend = tx(&[(txid(&pay).0, 0)], &[(4_000, OTHER)]);
        let b20 = block(&[tx(&[([0; 32], u32::MAX)], &[(1, OTHER)]), spend.clone()]);
        let got = l.apply(20, &checked(&b20), ours).unwrap();
        assert_eq!(got.txids, [txid(&spend)]);
        let s = &l.transactions()[2];
        assert_eq!(
            (s.sent, s.received, s.fee, s.net()),
            (5_000, 0, Some(1_000), -5_000)
        );
        assert_eq!(s.our_inputs, [0]);
        assert_eq!(l.utxos().count(), 1);
        // Blocks out of order are refused.
        assert!(l.apply(15, &checked(&b10), ours).is_none());
        // A round trip through the store's bytes.
        assert_eq!(Ledger::decode(&l.encode()), Some(l.clone()));
        // Block 20 disconnected: the spend goes away, the coin is unspent again.
        assert_eq!(l.disconnect_above(15), [txid(&spend)]);
        assert_eq!(l.utxos().count(), 2);
        assert_eq!(l.tip(), Some(15));
        assert_eq!(l.balance(15, 1).confirmed, 5_000);
        // Everything disconnected.
        l.disconnect_above(5);
        assert_eq!((l.transactions().len(), l.coins().count()), (0, 0));
    }

    #[test]
    fn damaged_bytes_are_refused_not_trusted() {
        let mut l = Ledger::new();
        let b = block(&[tx(&[([0; 32], u32::MAX)], &[(7, OURS)])]);
        l.apply(3, &checked(&b), |s| s == OURS);
        let bytes = l.encode();
        for cut in 0..bytes.len() {
            assert_eq!(Ledger::decode(&bytes[..cut]), None, "cut at {cut}");
        }
        let mut more = bytes.clone();
        more.push(0);
        assert_eq!(Ledger::decode(&more), None);
        let mut lie = bytes.clone();
        lie[5..9].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(Ledger::decode(&lie), None, "a count the bytes cannot hold");
    }

    #[test]
    fn funding_transactions_are_kept_for_what_a_signer_needs_them_for() {
        let mut l = Ledger::new();
        let taproot: &[u8] = &[[0x51, 0x20].as_slice(), &[5; 32]].concat();
        let ours = |s: &[u8]| s == OURS || s == taproot;
        let cb = tx(&[([0; 32], u32::MAX)], &[(1, OTHER)]);
        let block = |txs: &[Vec<u8>]| block(&[std::slice::from_ref(&cb), txs].concat());
        let pay = tx(&[([9; 32], 0)], &[(5_000, OURS)]);
        let pay_tr = tx(&[([8; 32], 0)], &[(6_000, taproot)]);
        l.apply(10, &checked(&block(&[pay.clone(), pay_tr.clone()])), ours);
        assert_eq!(l.funding(&txid(&pay)), Some(&pay[..]));
        assert_eq!(
            l.funding(&txid(&pay_tr)),
            None,
            "taproot signs the amounts it spends"
        );
        assert_eq!(Ledger::decode(&l.encode()), Some(l.clone()));
        // A record from before funding transactions were kept is read, without them.
        let mut old = l.encode();
        old[0] = 1;
        old.truncate(old.len() - (4 + 32 + 4 + pay.len()));
        let read = Ledger::decode(&old).unwrap();
        assert_eq!(read.funding(&txid(&pay)), None);
        assert_eq!(read.utxos().count(), 2);
        // A record whose funding transaction is not the one it names is refused.
        let mut lie = l.encode();
        let at = lie.len() - 1;
        lie[at] ^= 1;
        assert_eq!(Ledger::decode(&lie), None);
        // Spent at 20: kept until the spend is 144 deep (a reorganisation may undo it).
        let spend = tx(&[(txid(&pay).0, 0)], &[(4_000, OTHER)]);
        l.apply(20, &checked(&block(&[spend])), ours);
        assert!(l.funding(&txid(&pay)).is_some());
        l.apply(
            163,
            &checked(&block(&[tx(&[([1; 32], 0)], &[(1, OTHER)])])),
            ours,
        );
        assert!(l.funding(&txid(&pay)).is_some(), "143 deep");
        l.apply(
            164,
            &checked(&block(&[tx(&[([2; 32], 0)], &[(1, OTHER)])])),
            ours,
        );
        assert_eq!(l.funding(&txid(&pay)), None, "144 deep");
        // Disconnecting the block that paid drops its funding transaction with its coin.
        let pay2 = tx(&[([3; 32], 0)], &[(7_000, OURS)]);
        l.apply(170, &checked(&block(std::slice::from_ref(&pay2))), ours);
        assert!(l.funding(&txid(&pay2)).is_some());
        l.disconnect_above(169);
        assert_eq!(l.funding(&txid(&pay2)), None);
    }
}
