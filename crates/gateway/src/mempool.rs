//! The mempool a gateway serves as a digest: the transactions its nodes announced
//! (`inv`, fetched with `getdata`, or listed by BIP35 `mempool` at connect where the node
//! allows it), and every change to them numbered, for the client sessions to stream from
//! their cursors (`lightwire_proto::feed`).
//!
//! What leaves, and why ([`Removal`]): a transaction a new block holds (`Mined`), one
//! spending an output that a transaction taken later spends (`Replaced`: the node
//! accepted the replacement) or that one a block holds spends (`Conflicted`), and what the
//! gateway lets go (`Evicted`): the oldest first when the transactions held pass the byte
//! budget, and any older than two weeks (Bitcoin Core's `-mempoolexpiry`). A node evicting
//! a transaction says nothing over P2P: the gateway keeps it until one of these (also while
//! its nodes are away: a node that comes back lists its mempool again, BIP35, and what left
//! meanwhile goes with a block that conflicts it, the budget or the expiry).
//!
//! Bounded: the bytes held ([`ServedMempool::new`]'s budget), the changes remembered
//! ([`LOG_KEPT`]; a session further behind starts over with `reset`), the transactions
//! asked of the nodes and not yet come ([`ASKED_KEPT`]). Sans-IO: the node's connection
//! (`upstream::peer`) hands it what the node sends, with the time.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use lightwire_chain::BlockHash;
use lightwire_primitives::{Block, Tx};
use lightwire_proto::Millis;
use lightwire_proto::feed::MempoolChange;
use lightwire_wire::{MAX_TX_LEN, Removal};

/// Changes remembered for sessions behind: a session further behind starts over.
pub const LOG_KEPT: usize = 100_000;

/// Transactions asked of the nodes and not yet come, at most (more announced are not
/// asked for until these come or time out).
pub const ASKED_KEPT: usize = 10_000;

/// How long a transaction asked for may take to come before it may be asked again.
const ASK_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a transaction is held unmined (Bitcoin Core's `-mempoolexpiry`, two weeks).
pub const EXPIRY: Duration = Duration::from_secs(336 * 3600);

/// The default budget of transaction bytes held.
pub const DEFAULT_BUDGET: usize = 64 << 20;

/// An outpoint: txid, then the index, little-endian.
type Outpoint = [u8; 36];

struct Held {
    /// The number of the change that added it.
    seq: u64,
    raw: Box<[u8]>,
    spends: Box<[Outpoint]>,
    at: Millis,
    /// Its BIP352 tweak, when it has one and it was worked out.
    tweak: Option<[u8; 33]>,
}

#[derive(Default)]
struct State {
    txs: HashMap<[u8; 32], Held>,
    /// Held transactions by the number of the change that added them.
    by_seq: BTreeMap<u64, [u8; 32]>,
    /// Which held transaction spends each outpoint (ordered: the outpoints of one
    /// transaction's outputs are one range).
    spent: BTreeMap<Outpoint, [u8; 32]>,
    log: VecDeque<(u64, [u8; 32], Option<Removal>)>,
    head: u64,
    bytes: usize,
    asked: HashMap<[u8; 32], Millis>,
}

/// The served mempool (see the module documentation). Shared by the nodes' connections,
/// which write it, and the client sessions, which read it.
pub struct ServedMempool {
    budget: usize,
    state: RwLock<State>,
    /// Transactions handed to clients.
    served: AtomicU64,
}

impl ServedMempool {
    /// An empty mempool holding at most `budget` bytes of transactions.
    pub fn new(budget: usize) -> ServedMempool {
        ServedMempool {
            budget,
            state: RwLock::new(State::default()),
            served: AtomicU64::new(0),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Of the transactions `announced` at `now`, those to ask the node for (not held, not
    /// asked lately), marked asked.
    pub fn to_ask(&self, announced: &[[u8; 32]], now: Millis) -> Vec<[u8; 32]> {
        let mut s = self.write();
        s.asked.retain(|_, at| now.since(*at) < ASK_TIMEOUT);
        let mut out = Vec::new();
        for txid in announced {
            if s.txs.contains_key(txid) || s.asked.contains_key(txid) {
                continue;
            }
            if s.asked.len() >= ASKED_KEPT {
                break;
            }
            s.asked.insert(*txid, now);
            out.push(*txid);
        }
        out
    }

    /// A transaction from a node at `now`: held if it parses, is not held already and is
    /// not over [`MAX_TX_LEN`] (a client could not fetch it); what it spends that another
    /// held transaction spends, that one is replaced. Whether anything changed.
    pub fn add(&self, raw: &[u8], now: Millis) -> bool {
        let Ok(tx) = Tx::parse(raw) else {
            return false;
        };
        let txid = tx.txid().0;
        let mut s = self.write();
        s.asked.remove(&txid);
        if s.txs.contains_key(&txid) || raw.len() > MAX_TX_LEN || tx.is_coinbase() {
            return false;
        }
        let spends: Box<[Outpoint]> = tx
            .inputs()
            .map(|i| lightwire_filter::txset::outpoint_item(i.prev_txid, i.prev_vout))
            .collect();
        let replaced: Vec<[u8; 32]> = spends
            .iter()
            .filter_map(|o| s.spent.get(o).copied())
            .collect();
        for r in replaced {
            remove(&mut s, &r, Removal::Replaced);
        }
        s.head += 1;
        let seq = s.head;
        for o in spends.iter() {
            s.spent.insert(*o, txid);
        }
        s.bytes += raw.len();
        s.by_seq.insert(seq, txid);
        s.txs.insert(
            txid,
            Held {
                seq,
                raw: raw.into(),
                spends,
                at: now,
                tweak: None,
            },
        );
        log(&mut s, seq, txid, None);
        // Over the budget, or too old: the oldest go.
        while s.bytes > self.budget
            || s.by_seq
                .first_key_value()
                .is_some_and(|(_, t)| s.txs.get(t).is_some_and(|h| now.since(h.at) >= EXPIRY))
        {
            let Some((_, oldest)) = s.by_seq.first_key_value().map(|(k, t)| (*k, *t)) else {
                break;
            };
            remove(&mut s, &oldest, Removal::Evicted);
        }
        true
    }

    /// A block joined the best chain: what it holds is mined, what spends what it spends
    /// is conflicted. Whether anything changed.
    pub fn block(&self, block: &[u8]) -> bool {
        let Ok(block) = Block::parse(block) else {
            return false;
        };
        let mut s = self.write();
        let before = s.head;
        for tx in block.transactions() {
            let txid = tx.txid().0;
            if s.txs.contains_key(&txid) {
                remove(&mut s, &txid, Removal::Mined);
                continue;
            }
            if tx.is_coinbase() {
                continue;
            }
            for i in tx.inputs() {
                let o = lightwire_filter::txset::outpoint_item(i.prev_txid, i.prev_vout);
                if let Some(other) = s.spent.get(&o).copied() {
                    remove(&mut s, &other, Removal::Conflicted);
                }
            }
        }
        s.head != before
    }

    /// Say `txid` left for `reason`, with what spends it, whatever the nodes say: for
    /// programs built on this library that serve data of their own making (test gateways
    /// lying about the mempool); the gateway itself removes only as the module
    /// documentation says. Whether it was held.
    pub fn remove(&self, txid: &[u8; 32], reason: Removal) -> bool {
        let mut s = self.write();
        let held = s.txs.contains_key(txid);
        if held {
            remove(&mut s, txid, reason);
        }
        held
    }

    /// How many transactions are held, and their bytes.
    pub fn size(&self) -> (usize, usize) {
        let s = self.read();
        (s.txs.len(), s.bytes)
    }

    /// The number of the latest change.
    pub fn head(&self) -> u64 {
        self.read().head
    }

    /// The held transactions added by changes after `after` up to `upto` (a snapshot).
    pub fn held(
        &self,
        after: u64,
        upto: u64,
        mut each: impl FnMut(u64, MempoolChange<'_>) -> bool,
    ) {
        let s = self.read();
        for (seq, txid) in s.by_seq.range(after.saturating_add(1)..=upto) {
            if let Some(h) = s.txs.get(txid)
                && !each(
                    *seq,
                    MempoolChange::Added {
                        txid,
                        tx: &h.raw,
                        tweak: h.tweak.as_ref(),
                    },
                )
            {
                return;
            }
        }
    }

    /// The changes after `after`; `false` when they are no longer all remembered.
    pub fn changes(
        &self,
        after: u64,
        mut each: impl FnMut(u64, MempoolChange<'_>) -> bool,
    ) -> bool {
        let s = self.read();
        if after < s.head && s.log.front().is_none_or(|(seq, _, _)| *seq > after + 1) {
            return false;
        }
        let start = s.log.partition_point(|(seq, _, _)| *seq <= after);
        for (seq, txid, removal) in s.log.range(start..) {
            let change = match removal {
                Some(reason) => MempoolChange::Removed {
                    txid,
                    reason: *reason,
                },
                None => match s.txs.get(txid).filter(|h| h.seq == *seq) {
                    Some(h) => MempoolChange::Added {
                        txid,
                        tx: &h.raw,
                        tweak: h.tweak.as_ref(),
                    },
                    // Gone since: its removal follows.
                    None => continue,
                },
            };
            if !each(*seq, change) {
                break;
            }
        }
        true
    }

    /// The held transaction `txid`, lent to `read` (counted as handed to a client).
    pub fn with_tx<R>(&self, txid: &[u8; 32], read: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let s = self.read();
        let h = s.txs.get(txid)?;
        self.served.fetch_add(1, Ordering::Relaxed);
        Some(read(&h.raw))
    }

    /// How many transactions were handed to clients.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }
}

/// Remove `txid` for `reason` (and log it), with what spends its outputs: those can no
/// longer be mined either (replaced with it; evicted with it).
fn remove(s: &mut State, txid: &[u8; 32], reason: Removal) {
    let mut gone = vec![*txid];
    while let Some(t) = gone.pop() {
        let Some(h) = s.txs.remove(&t) else {
            continue;
        };
        s.by_seq.remove(&h.seq);
        s.bytes -= h.raw.len();
        for o in h.spends.iter() {
            if s.spent.get(o) == Some(&t) {
                s.spent.remove(o);
            }
        }
        s.head += 1;
        let seq = s.head;
        log(s, seq, t, Some(reason));
        if reason != Removal::Mined {
            // Its children spend its outputs: they go too.
            let (mut lo, mut hi) = ([0u8; 36], [0xffu8; 36]);
            lo[..32].copy_from_slice(&t);
            hi[..32].copy_from_slice(&t);
            gone.extend(s.spent.range(lo..=hi).map(|(_, c)| *c));
        }
    }
}

fn log(s: &mut State, seq: u64, txid: [u8; 32], removal: Option<Removal>) {
    if s.log.len() == LOG_KEPT {
        s.log.pop_front();
    }
    s.log.push_back((seq, txid, removal));
}

/// The hash of a block's header, if the bytes start with one.
pub fn block_hash(block: &[u8]) -> Option<BlockHash> {
    let header: &[u8; 80] = block.get(..80)?.try_into().ok()?;
    Some(lightwire_chain::hash_header_bytes(header))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transaction spending `(prev, vout)` and paying 1,000 to `[0x51]`.
    fn tx(prev: [u8; 32], vout: u32, tag: u8) -> Vec<u8> {
        let mut t = vec![2, 0, 0, 0, 1];
        t.extend_from_slice(&prev);
        t.extend_from_slice(&vout.to_le_bytes());
        t.extend_from_slice(&[0, 0xfd, 0xff, 0xff, 0xff, 1]);
        t.extend_from_slice(&(1_000 + u64::from(tag)).to_le_bytes());
        t.extend_from_slice(&[1, 0x51]);
        t.extend_from_slice(&[0; 4]);
        t
    }

    fn txid(t: &[u8]) -> [u8; 32] {
        Tx::parse(t).unwrap().txid().0
    }

    fn changes(m: &ServedMempool, after: u64) -> Vec<(u64, [u8; 32], Option<Removal>)> {
        let mut out = Vec::new();
        assert!(m.changes(after, |n, c| {
            out.push(match c {
                MempoolChange::Added { txid, .. } => (n, *txid, None),
                MempoolChange::Removed { txid, reason } => (n, *txid, Some(reason)),
            });
            true
        }));
        out
    }

    #[test]
    fn replacements_descendants_blocks_and_the_budget() {
        let m = ServedMempool::new(1_000);
        let now = Millis(0);
        let a = tx([1; 32], 0, 0);
        let child = tx(txid(&a), 0, 0);
        assert_eq!(m.to_ask(&[txid(&a), txid(&a)], now), [txid(&a)]);
        assert!(m.to_ask(&[txid(&a)], now).is_empty(), "asked already");
        assert!(m.add(&a, now) && m.add(&child, now));
        assert!(!m.add(&a, now), "held already");
        assert!(!m.add(&[1, 2, 3], now));
        // A replacement of a: a and its child go.
        let b = tx([1; 32], 0, 1);
        assert!(m.add(&b, now));
        assert_eq!(
            changes(&m, 2),
            [
                (3, txid(&a), Some(Removal::Replaced)),
                (4, txid(&child), Some(Removal::Replaced)),
                (5, txid(&b), None),
            ]
        );
        assert_eq!(m.size().0, 1);
        // A snapshot holds b alone.
        let mut snap = Vec::new();
        m.held(0, m.head(), |n, _| {
            snap.push(n);
            true
        });
        assert_eq!(snap, [5]);
        assert_eq!(m.with_tx(&txid(&b), <[u8]>::len), Some(b.len()));
        // A block mining b, and spending what c spends: b mined, c conflicted.
        let c = tx([2; 32], 0, 0);
        m.add(&c, now);
        let conflict = tx([2; 32], 0, 9);
        let mut block = vec![0u8; 80];
        block.push(3);
        block.extend_from_slice(&tx([0; 32], u32::MAX, 0));
        block.extend_from_slice(&b);
        block.extend_from_slice(&conflict);
        assert!(m.block(&block));
        let tail = changes(&m, 6);
        assert_eq!(
            tail,
            [
                (7, txid(&b), Some(Removal::Mined)),
                (8, txid(&c), Some(Removal::Conflicted)),
            ]
        );
        // The budget: 1,000 bytes hold 16 of these (61 bytes each); the oldest go.
        for i in 0..20u8 {
            m.add(&tx([10 + i; 32], 0, 0), now);
        }
        let (n, bytes) = m.size();
        assert!(n == 16 && bytes <= 1_000, "{n} {bytes}");
        assert_eq!(
            changes(&m, 8)
                .iter()
                .filter(|c| c.2 == Some(Removal::Evicted))
                .count(),
            4
        );
        // Too old: evicted at the next one.
        m.add(&tx([99; 32], 0, 0), Millis(0) + EXPIRY);
        assert_eq!(m.size().0, 1);
    }

    #[test]
    fn a_session_too_far_behind_is_told_to_start_over() {
        let m = ServedMempool::new(usize::MAX);
        for i in 0..(LOG_KEPT as u32 + 10) {
            let mut prev = [0u8; 32];
            prev[..4].copy_from_slice(&i.to_le_bytes());
            m.add(&tx(prev, 0, 0), Millis(0));
        }
        assert!(!m.changes(3, |_, _| true));
        assert!(m.changes(m.head() - 5, |_, _| true));
        assert!(m.changes(m.head(), |_, _| true));
    }
}
