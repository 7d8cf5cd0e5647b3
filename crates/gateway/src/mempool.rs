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
//! With tweaks ([`ServedMempool::with_tweaks`]: the gateway serves silent-payment tweaks),
//! each transaction with a taproot output is published with its BIP352 tweak, which takes
//! the scripts of the outputs its inputs spend: from a held transaction's outputs, else a
//! waiting one's, else the node's (asked by the task `crate::mempool_tweaks` runs, through
//! [`ServedMempool::pending_lookups`] and [`ServedMempool::resolve`]). Until then it waits,
//! unpublished, in a queue in order of arrival, and whatever comes while the queue is not
//! empty waits behind it, even with nothing to work out: the digest keeps the order the
//! nodes gave, so a replacement is never published before what it replaces (which would
//! then replace it back). It goes without its tweak, counted
//! ([`ServedMempool::tweaks_missed`]), when the node does not know an output it spends,
//! after [`TWEAK_WAIT`] (a node that does not answer never stalls the digest), or when the
//! queue passes its bounds. A block drops the waiting transactions it mines or conflicts,
//! unlogged: they never entered.
//!
//! Bounded: the bytes held ([`ServedMempool::new`]'s budget), the changes remembered
//! ([`LOG_KEPT`]; a session further behind starts over with `reset`), the transactions
//! asked of the nodes and not yet come ([`ASKED_KEPT`]), those waiting for their tweaks
//! ([`PENDING_KEPT`], and a quarter of the budget in bytes). Sans-IO: the node's
//! connection (`upstream::peer`) hands it what the node sends, with the time, and the
//! tweak task what the node's RPC says.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use lightwire_chain::BlockHash;
use lightwire_primitives::{Block, Tx, Txid};
use lightwire_proto::Millis;
use lightwire_proto::feed::MempoolChange;
use lightwire_wallet::silent::{self, is_p2tr};
use lightwire_wire::{MAX_TX_LEN, Removal};
use tokio::sync::Notify;

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

/// How long a transaction may wait for its tweak (with tweaks,
/// [`ServedMempool::with_tweaks`]) before it is published without one: a node that does
/// not answer delays the digest by this much at most.
pub const TWEAK_WAIT: Duration = Duration::from_secs(10);

/// Transactions waiting for their tweaks, at most; past it the first is published without
/// its tweak.
pub const PENDING_KEPT: usize = 10_000;

/// The bytes of the transactions waiting for their tweaks are at most the budget divided
/// by this (on top of the budget held).
const PENDING_SHARE: usize = 4;

/// How often, at most, a warning says how many transactions went without their tweaks.
const MISSED_WARN_EVERY: Duration = Duration::from_secs(60);

/// An outpoint: txid, then the index, little-endian.
type Outpoint = [u8; 36];

/// An outpoint as the node is asked about it: the txid (internal byte order) and the
/// output's index.
pub type OutPoint = ([u8; 32], u32);

/// What the node said of outpoints asked ([`ServedMempool::resolve`]): the script of the
/// output, or `None` when it does not know the output. An outpoint it did not answer
/// (it failed, or gave something that is not an answer) is absent.
pub type Answers = HashMap<OutPoint, Option<Vec<u8>>>;

struct Held {
    /// The number of the change that added it.
    seq: u64,
    raw: Box<[u8]>,
    spends: Box<[Outpoint]>,
    at: Millis,
    /// Its BIP352 tweak, when it has one and it was worked out.
    tweak: Option<[u8; 33]>,
}

/// A transaction waiting for its tweak, or behind one that does (not published yet).
struct Pending {
    /// Its number in order of arrival (the queue is in this order).
    n: u64,
    txid: [u8; 32],
    raw: Box<[u8]>,
    spends: Box<[Outpoint]>,
    /// When it came.
    at: Millis,
    /// It has a taproot output: it may have a tweak, which takes what its inputs spend.
    candidate: bool,
    /// For a candidate, the script each input spends, where found yet (empty otherwise).
    spent: Vec<Option<Box<[u8]>>>,
    /// The node does not know an output it spends (or the transaction found has no such
    /// output): published without a tweak.
    unknown: bool,
}

impl Pending {
    /// Whether the script of every input is known.
    fn complete(&self) -> bool {
        self.spent.iter().all(Option::is_some)
    }
}

/// Why a transaction that may have a tweak was published without one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Missed {
    /// The node does not know an output it spends.
    Unknown,
    /// It waited [`TWEAK_WAIT`].
    Late,
    /// The queue passed its bounds.
    Overflow,
}

impl std::fmt::Display for Missed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Missed::Unknown => "the node does not know an output it spends",
            Missed::Late => "the scripts it spends did not come in time",
            Missed::Overflow => "too many transactions waited for their tweaks",
        })
    }
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
    /// With tweaks: the transactions not published yet, in order of arrival.
    pending: VecDeque<Pending>,
    /// The number of each (to find it in `pending`).
    pending_ids: HashMap<[u8; 32], u64>,
    /// What each spends, and which (several waiting may spend one outpoint: a
    /// replacement behind what it replaces). Ordered as `spent`.
    pending_spends: BTreeSet<(Outpoint, [u8; 32])>,
    pending_bytes: usize,
    /// The number of the next to arrive.
    arrivals: u64,
    /// Published without their tweaks since the last warning, and when that was.
    missed_unwarned: u64,
    missed_warned: Option<Millis>,
}

/// The served mempool (see the module documentation). Shared by the nodes' connections,
/// which write it, and the client sessions, which read it.
pub struct ServedMempool {
    budget: usize,
    /// Whether transactions' tweaks are worked out before they are published.
    tweaks: bool,
    state: RwLock<State>,
    /// Transactions handed to clients.
    served: AtomicU64,
    /// Transactions that may have had a tweak published without one (not for want of
    /// one: the node did not know what they spend, or did not say in time).
    missed: AtomicU64,
    /// Wakes the task that asks the node what waiting transactions spend (the one piece
    /// of the shell here: the nodes' connections hand transactions in through
    /// [`ServedMempool::add`], and that task must hear of them).
    queued: Notify,
}

impl ServedMempool {
    /// An empty mempool holding at most `budget` bytes of transactions.
    pub fn new(budget: usize) -> ServedMempool {
        ServedMempool {
            budget,
            tweaks: false,
            state: RwLock::new(State::default()),
            served: AtomicU64::new(0),
            missed: AtomicU64::new(0),
            queued: Notify::new(),
        }
    }

    /// The same, working out each transaction's tweak before it is published (see the
    /// module documentation): for a gateway that serves tweaks, with a task answering
    /// [`Self::pending_lookups`] through [`Self::resolve`]
    /// (`crate::mempool_tweaks::keep`).
    pub fn with_tweaks(mut self) -> ServedMempool {
        self.tweaks = true;
        self
    }

    /// Whether tweaks are worked out ([`Self::with_tweaks`]).
    pub fn works_out_tweaks(&self) -> bool {
        self.tweaks
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Of the transactions `announced` at `now`, those to ask the node for (not held, not
    /// waiting for a tweak, not asked lately), marked asked.
    pub fn to_ask(&self, announced: &[[u8; 32]], now: Millis) -> Vec<[u8; 32]> {
        let mut s = self.write();
        s.asked.retain(|_, at| now.since(*at) < ASK_TIMEOUT);
        let mut out = Vec::new();
        for txid in announced {
            if s.txs.contains_key(txid)
                || s.pending_ids.contains_key(txid)
                || s.asked.contains_key(txid)
            {
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

    /// A transaction from a node at `now`: held if it parses, is not held (or waiting)
    /// already and is not over [`MAX_TX_LEN`] (a client could not fetch it); what it
    /// spends that another held transaction spends, that one is replaced. With tweaks, it
    /// waits first if it has a taproot output or others wait (see the module
    /// documentation). Whether anything was published.
    pub fn add(&self, raw: &[u8], now: Millis) -> bool {
        let Ok(tx) = Tx::parse(raw) else {
            return false;
        };
        let txid = tx.txid().0;
        let mut s = self.write();
        s.asked.remove(&txid);
        if s.txs.contains_key(&txid)
            || s.pending_ids.contains_key(&txid)
            || raw.len() > MAX_TX_LEN
            || tx.is_coinbase()
        {
            return false;
        }
        let spends: Box<[Outpoint]> = tx
            .inputs()
            .map(|i| lightwire_filter::txset::outpoint_item(i.prev_txid, i.prev_vout))
            .collect();
        let candidate = self.tweaks && tx.outputs().any(|o| is_p2tr(o.script));
        if !candidate && s.pending.is_empty() {
            self.publish(&mut s, txid, raw.into(), spends, None, now);
            self.evict(&mut s, now);
            return true;
        }
        // It waits: for its tweak, or behind those that do (published in order of arrival).
        let n = s.arrivals;
        s.arrivals += 1;
        for o in spends.iter() {
            s.pending_spends.insert((*o, txid));
        }
        s.pending_ids.insert(txid, n);
        s.pending_bytes += raw.len();
        let spent = if candidate {
            vec![None; spends.len()]
        } else {
            Vec::new()
        };
        s.pending.push_back(Pending {
            n,
            txid,
            raw: raw.into(),
            spends,
            at: now,
            candidate,
            spent,
            unknown: false,
        });
        self.queued.notify_one();
        // What it spends may be held already: then it goes at once.
        self.drain(&mut s, now)
    }

    /// Publish `txid`, come at `at`: hold it, replacing what spends what it spends, and
    /// log it (then [`Self::evict`]).
    fn publish(
        &self,
        s: &mut State,
        txid: [u8; 32],
        raw: Box<[u8]>,
        spends: Box<[Outpoint]>,
        tweak: Option<[u8; 33]>,
        at: Millis,
    ) {
        let replaced: Vec<[u8; 32]> = spends
            .iter()
            .filter_map(|o| s.spent.get(o).copied())
            .collect();
        for r in replaced {
            remove(s, &r, Removal::Replaced);
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
                raw,
                spends,
                at,
                tweak,
            },
        );
        log(s, seq, txid, None);
    }

    /// Over the budget, or too old at `now`: the oldest go.
    fn evict(&self, s: &mut State, now: Millis) {
        while s.bytes > self.budget
            || s.by_seq
                .first_key_value()
                .is_some_and(|(_, t)| s.txs.get(t).is_some_and(|h| now.since(h.at) >= EXPIRY))
        {
            let Some((_, oldest)) = s.by_seq.first_key_value().map(|(k, t)| (*k, *t)) else {
                break;
            };
            remove(s, &oldest, Removal::Evicted);
        }
    }

    /// Publish, in order, the waiting transactions at the front that may go at `now`:
    /// those with their tweak worked out (or with none to work out), and those that may
    /// not wait longer. Whether any was.
    fn drain(&self, s: &mut State, now: Millis) -> bool {
        let mut published = false;
        let pending_budget = self.budget / PENDING_SHARE;
        while let Some(front) = s.pending.front() {
            if front.candidate && !front.unknown && !front.complete() {
                fill_local(s, 0);
            }
            let Some(front) = s.pending.front() else {
                break;
            };
            let over = s.pending.len() > PENDING_KEPT || s.pending_bytes > pending_budget;
            let missed = if !front.candidate || (!front.unknown && front.complete()) {
                None
            } else if front.unknown {
                Some(Missed::Unknown)
            } else if over {
                Some(Missed::Overflow)
            } else if now.since(front.at) >= TWEAK_WAIT {
                Some(Missed::Late)
            } else {
                break;
            };
            let Some(p) = s.pending.pop_front() else {
                break;
            };
            forget_pending(s, &p);
            let tweak = match missed {
                Some(why) => {
                    self.count_missed(s, &p.txid, why, now);
                    None
                }
                None if p.candidate => Tx::parse(&p.raw).ok().and_then(|tx| {
                    let scripts: Vec<&[u8]> = p.spent.iter().flatten().map(|b| &**b).collect();
                    silent::tweak(&tx, &scripts).ok()
                }),
                None => None,
            };
            self.publish(s, p.txid, p.raw, p.spends, tweak, p.at);
            self.evict(s, now);
            published = true;
        }
        published
    }

    /// Count `txid`, published without its tweak for `why`, and say so (a warning at
    /// most every [`MISSED_WARN_EVERY`]).
    fn count_missed(&self, s: &mut State, txid: &[u8; 32], why: Missed, now: Millis) {
        self.missed.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(txid = %Txid(*txid), "a mempool transaction published without its tweak: {why}");
        s.missed_unwarned += 1;
        if s.missed_warned
            .is_none_or(|at| now.since(at) >= MISSED_WARN_EVERY)
        {
            tracing::warn!(
                count = s.missed_unwarned,
                "mempool transactions published without their silent-payment tweaks (the \
                 last: {why}); clients find their payments in the blocks' tweak lists"
            );
            s.missed_unwarned = 0;
            s.missed_warned = Some(now);
        }
    }

    /// The outpoints whose scripts the first waiting transactions still need from the
    /// node, at most `max` (each once), in order; those found meanwhile among the
    /// transactions held or waiting are taken from there (and not asked).
    pub fn pending_lookups(&self, max: usize) -> Vec<OutPoint> {
        let mut s = self.write();
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for i in 0..s.pending.len() {
            if out.len() >= max {
                break;
            }
            let p = &s.pending[i];
            if !p.candidate || p.unknown || p.complete() {
                continue;
            }
            fill_local(&mut s, i);
            let p = &s.pending[i];
            if p.unknown {
                // It goes without its tweak: nothing more to ask for it.
                continue;
            }
            let Ok(tx) = Tx::parse(&p.raw) else {
                continue;
            };
            for (input, spent) in tx.inputs().zip(&p.spent) {
                let o = (*input.prev_txid, input.prev_vout);
                if spent.is_none() && out.len() < max && seen.insert(o) {
                    out.push(o);
                }
            }
        }
        out
    }

    /// What the node said of outpoints asked ([`Self::pending_lookups`]), at `now`: each
    /// waiting transaction takes the scripts it spends; then those at the front that may
    /// go are published, in order (see [`Self::add`]'s rules and the module
    /// documentation). Also called with no answers when the first's wait is over
    /// ([`Self::next_deadline`]). Whether anything was published.
    pub fn resolve(&self, answers: &Answers, now: Millis) -> bool {
        let mut s = self.write();
        if !answers.is_empty() {
            for p in s.pending.iter_mut() {
                if !p.candidate || p.unknown || p.complete() {
                    continue;
                }
                let Ok(tx) = Tx::parse(&p.raw) else {
                    continue;
                };
                let Pending { spent, unknown, .. } = p;
                for (input, slot) in tx.inputs().zip(spent.iter_mut()) {
                    if slot.is_some() {
                        continue;
                    }
                    match answers.get(&(*input.prev_txid, input.prev_vout)) {
                        Some(Some(script)) => *slot = Some(script.as_slice().into()),
                        Some(None) => *unknown = true,
                        None => {}
                    }
                }
            }
        }
        self.drain(&mut s, now)
    }

    /// When the first waiting transaction may wait no longer (call [`Self::resolve`]
    /// then), if any waits.
    pub fn next_deadline(&self) -> Option<Millis> {
        self.read().pending.front().map(|p| p.at + TWEAK_WAIT)
    }

    /// Wakes when a transaction was queued to wait for its tweak, or dropped while it
    /// waited (for the task that asks the node: [`Self::pending_lookups`]).
    pub fn queued(&self) -> &Notify {
        &self.queued
    }

    /// How many transactions wait for their tweaks (or behind those that do), and their
    /// bytes.
    pub fn pending(&self) -> (usize, usize) {
        let s = self.read();
        (s.pending.len(), s.pending_bytes)
    }

    /// How many transactions that may have had a tweak were published without one (the
    /// node did not know an output they spend, did not say in time, or too many waited).
    pub fn tweaks_missed(&self) -> u64 {
        self.missed.load(Ordering::Relaxed)
    }

    /// A block joined the best chain: what it holds is mined, what spends what it spends
    /// is conflicted. Transactions waiting for their tweaks that it mines or conflicts
    /// are dropped, unlogged (they never entered). Whether anything changed.
    pub fn block(&self, block: &[u8]) -> bool {
        let Ok(block) = Block::parse(block) else {
            return false;
        };
        let mut s = self.write();
        let before = s.head;
        let waiting = s.pending.len();
        for tx in block.transactions() {
            let txid = tx.txid().0;
            // Mined while it waited: dropped (what spends it stays valid).
            drop_pending(&mut s, &txid);
            if s.txs.contains_key(&txid) {
                remove(&mut s, &txid, Removal::Mined);
            }
            if tx.is_coinbase() {
                continue;
            }
            for i in tx.inputs() {
                let o = lightwire_filter::txset::outpoint_item(i.prev_txid, i.prev_vout);
                let waiting_spenders: Vec<[u8; 32]> = s
                    .pending_spends
                    .range((o, [0; 32])..=(o, [0xff; 32]))
                    .map(|(_, t)| *t)
                    .collect();
                for t in waiting_spenders {
                    if drop_pending(&mut s, &t) {
                        drop_pending_spending(&mut s, vec![t]);
                    }
                }
                if let Some(other) = s.spent.get(&o).copied()
                    && other != txid
                {
                    remove(&mut s, &other, Removal::Conflicted);
                }
            }
        }
        if s.pending.len() != waiting {
            // Those behind may go now.
            self.queued.notify_one();
        }
        s.head != before
    }

    /// Say `txid` left for `reason`, with what spends it, whatever the nodes say: for
    /// programs built on this library that serve data of their own making (test gateways
    /// lying about the mempool); the gateway itself removes only as the module
    /// documentation says. One waiting for its tweak is dropped, unlogged. Whether it was
    /// held or waiting.
    pub fn remove(&self, txid: &[u8; 32], reason: Removal) -> bool {
        let mut s = self.write();
        if s.txs.contains_key(txid) {
            remove(&mut s, txid, reason);
            return true;
        }
        let waited = drop_pending(&mut s, txid);
        if waited {
            drop_pending_spending(&mut s, vec![*txid]);
            self.queued.notify_one();
        }
        waited
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
/// longer be mined either (replaced with it; evicted with it). Those waiting for their
/// tweaks that spend them are dropped too (unlogged: they never entered).
fn remove(s: &mut State, txid: &[u8; 32], reason: Removal) {
    let mut gone = vec![*txid];
    let mut removed = Vec::new();
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
            let (lo, hi) = outputs_of(&t);
            gone.extend(s.spent.range(lo..=hi).map(|(_, c)| *c));
            removed.push(t);
        }
    }
    if !s.pending.is_empty() {
        drop_pending_spending(s, removed);
    }
}

/// The first and last outpoints of `txid`'s outputs (a range of the spent maps).
fn outputs_of(txid: &[u8; 32]) -> (Outpoint, Outpoint) {
    let (mut lo, mut hi) = ([0u8; 36], [0xffu8; 36]);
    lo[..32].copy_from_slice(txid);
    hi[..32].copy_from_slice(txid);
    (lo, hi)
}

/// Drop the waiting transactions that spend an output of one of `parents` (which can no
/// longer be mined), and those spending theirs.
fn drop_pending_spending(s: &mut State, mut parents: Vec<[u8; 32]>) {
    while let Some(t) = parents.pop() {
        let (lo, hi) = outputs_of(&t);
        let children: Vec<[u8; 32]> = s
            .pending_spends
            .range((lo, [0; 32])..=(hi, [0xff; 32]))
            .map(|(_, c)| *c)
            .collect();
        for c in children {
            if drop_pending(s, &c) {
                parents.push(c);
            }
        }
    }
}

/// Drop the waiting transaction `txid`, if it waits (unlogged).
fn drop_pending(s: &mut State, txid: &[u8; 32]) -> bool {
    let Some(n) = s.pending_ids.get(txid).copied() else {
        return false;
    };
    let i = s.pending.partition_point(|p| p.n < n);
    let Some(p) = s.pending.remove(i) else {
        return false;
    };
    forget_pending(s, &p);
    true
}

/// Take `p`, out of the queue, out of the indexes of what waits.
fn forget_pending(s: &mut State, p: &Pending) {
    s.pending_ids.remove(&p.txid);
    for o in p.spends.iter() {
        s.pending_spends.remove(&(*o, p.txid));
    }
    s.pending_bytes -= p.raw.len();
}

/// Fill in the scripts that the waiting transaction at `i` spends from the outputs of
/// transactions held or waiting; an output that such a transaction does not have makes it
/// `unknown`.
fn fill_local(s: &mut State, i: usize) {
    let Some(p) = s.pending.get(i) else {
        return;
    };
    let Ok(tx) = Tx::parse(&p.raw) else {
        return;
    };
    let found: Vec<(usize, Option<Box<[u8]>>)> = tx
        .inputs()
        .enumerate()
        .filter(|(k, _)| p.spent.get(*k).is_some_and(Option::is_none))
        .filter_map(|(k, input)| {
            let raw: &[u8] = match s.txs.get(input.prev_txid) {
                Some(h) => &h.raw,
                None => {
                    let n = s.pending_ids.get(input.prev_txid)?;
                    let j = s.pending.partition_point(|q| q.n < *n);
                    &s.pending.get(j)?.raw
                }
            };
            let from = Tx::parse(raw).ok()?;
            let script = from
                .outputs()
                .nth(input.prev_vout as usize)
                .map(|o| o.script.into());
            Some((k, script))
        })
        .collect();
    let Some(p) = s.pending.get_mut(i) else {
        return;
    };
    for (k, script) in found {
        match script {
            Some(script) => p.spent[k] = Some(script),
            None => p.unknown = true,
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

    /// The x coordinate of the curve's generator `G`: a key whose script an input spends.
    const G_X: [u8; 32] = [
        0x79, 0xbe, 0x66, 0x7e, 0xf9, 0xdc, 0xbb, 0xac, 0x55, 0xa0, 0x62, 0x95, 0xce, 0x87, 0x0b,
        0x07, 0x02, 0x9b, 0xfc, 0xdb, 0x2d, 0xce, 0x28, 0xd9, 0x59, 0xf2, 0x81, 0x5b, 0x16, 0xf8,
        0x17, 0x98,
    ];

    /// `G`, compressed: the key a P2WPKH input's witness shows.
    fn g() -> Vec<u8> {
        let mut k = vec![0x02];
        k.extend_from_slice(&G_X);
        k
    }

    fn p2tr(x: [u8; 32]) -> Vec<u8> {
        let mut s = vec![0x51, 0x20];
        s.extend_from_slice(&x);
        s
    }

    fn p2wpkh() -> Vec<u8> {
        let mut s = vec![0x00, 0x14];
        s.extend_from_slice(&[7; 20]);
        s
    }

    /// An input: the outpoint it spends and its witness.
    type Input<'a> = ([u8; 32], u32, &'a [&'a [u8]]);

    /// A segwit transaction spending each of `inputs` to `outputs`.
    fn segwit(inputs: &[Input<'_>], outputs: &[&[u8]]) -> Vec<u8> {
        let mut t = vec![2, 0, 0, 0, 0, 1, inputs.len() as u8];
        for (prev, vout, _) in inputs {
            t.extend_from_slice(prev);
            t.extend_from_slice(&vout.to_le_bytes());
            t.extend_from_slice(&[0, 0xfd, 0xff, 0xff, 0xff]);
        }
        t.push(outputs.len() as u8);
        for (i, script) in outputs.iter().enumerate() {
            t.extend_from_slice(&(1_000 + i as u64).to_le_bytes());
            t.push(script.len() as u8);
            t.extend_from_slice(script);
        }
        for (_, _, witness) in inputs {
            t.push(witness.len() as u8);
            for item in *witness {
                t.push(item.len() as u8);
                t.extend_from_slice(item);
            }
        }
        t.extend_from_slice(&[0; 4]);
        t
    }

    /// A key-path taproot spend of `(prev, vout)` paying a taproot output: it may have a
    /// tweak, from the script it spends.
    fn sp(prev: [u8; 32], vout: u32, tag: u8) -> Vec<u8> {
        segwit(&[(prev, vout, &[&[tag; 64]])], &[&p2tr([tag; 32])])
    }

    /// The tweak of `t` given the scripts its inputs spend.
    fn tweak_of(t: &[u8], spent: &[&[u8]]) -> [u8; 33] {
        silent::tweak(&Tx::parse(t).unwrap(), spent).unwrap()
    }

    /// The transactions published (added), in order, with their tweaks.
    fn added(m: &ServedMempool) -> Vec<([u8; 32], Option<[u8; 33]>)> {
        let mut out = Vec::new();
        assert!(m.changes(0, |_, c| {
            if let MempoolChange::Added { txid, tweak, .. } = c {
                out.push((*txid, tweak.copied()));
            }
            true
        }));
        out
    }

    fn answer(o: OutPoint, script: Option<Vec<u8>>) -> Answers {
        Answers::from([(o, script)])
    }

    /// With tweaks, one with a taproot output waits for the scripts it spends, unpublished
    /// and not asked of the node again; one without that comes after it waits behind it;
    /// the scripts given, both go in order, the first with its tweak (BIP352's, of the
    /// transaction and what it spends).
    #[test]
    fn a_transaction_waits_for_its_tweak_and_those_after_it_wait_behind() {
        let m = ServedMempool::new(1 << 20).with_tweaks();
        let now = Millis(1_000);
        let a = sp([1; 32], 0, 1);
        assert!(!m.add(&a, now), "waits");
        assert_eq!(m.head(), 0);
        assert!(m.to_ask(&[txid(&a)], now).is_empty(), "not asked again");
        assert!(!m.add(&a, now));
        assert_eq!(m.pending().0, 1, "not queued twice");
        let plain = tx([2; 32], 0, 0);
        assert!(!m.add(&plain, now), "behind the one waiting");
        assert_eq!(m.pending().0, 2);
        assert!(m.to_ask(&[txid(&plain)], now).is_empty());
        assert_eq!(m.pending_lookups(10), [([1; 32], 0)]);
        assert_eq!(m.next_deadline(), Some(now + TWEAK_WAIT));
        assert!(m.resolve(&answer(([1; 32], 0), Some(p2tr(G_X))), now));
        assert_eq!(
            added(&m),
            [
                (txid(&a), Some(tweak_of(&a, &[&p2tr(G_X)]))),
                (txid(&plain), None),
            ]
        );
        assert_eq!((m.pending(), m.tweaks_missed()), ((0, 0), 0));
        assert_eq!(m.next_deadline(), None);
        // Nothing waits: one without a taproot output goes at once.
        assert!(m.add(&tx([3; 32], 0, 0), now));
    }

    /// A replacement that comes while what it replaces waits for its tweak is published
    /// after it, and so is the one held at the end (published first, it would be
    /// replaced by the one it replaced).
    #[test]
    fn a_replacement_of_one_waiting_is_the_one_held() {
        let m = ServedMempool::new(1 << 20).with_tweaks();
        let now = Millis(0);
        let a = sp([1; 32], 0, 1);
        let b = tx([1; 32], 0, 9);
        assert!(!m.add(&a, now) && !m.add(&b, now));
        assert!(m.resolve(&answer(([1; 32], 0), Some(p2tr(G_X))), now));
        // (Its addition, change 1, is no longer sent: it is gone since.)
        assert_eq!(
            changes(&m, 0),
            [(2, txid(&a), Some(Removal::Replaced)), (3, txid(&b), None),]
        );
        assert_eq!(m.size().0, 1);
        assert_eq!(m.with_tx(&txid(&b), <[u8]>::len), Some(b.len()));
    }

    /// What a transaction spends from one held, or from one waiting, is taken from there:
    /// nothing is asked of the node for it; an output such a transaction does not have
    /// publishes it without a tweak.
    #[test]
    fn scripts_spent_from_the_mempool_are_taken_from_it() {
        let m = ServedMempool::new(1 << 20).with_tweaks();
        let now = Millis(0);
        let parent = segwit(&[([5; 32], 0, &[&[1; 71], &g()])], &[&p2wpkh()]);
        assert!(m.add(&parent, now), "no taproot output: at once");
        let child = segwit(&[(txid(&parent), 0, &[&[2; 71], &g()])], &[&p2tr([3; 32])]);
        assert!(m.add(&child, now), "what it spends is held: at once");
        assert!(m.pending_lookups(10).is_empty());
        assert_eq!(
            added(&m)[1],
            (txid(&child), Some(tweak_of(&child, &[&p2wpkh()])))
        );

        // The parent waits (its own input unknown); the child spends its second output.
        let p2 = segwit(&[([6; 32], 0, &[&[4; 64]])], &[&p2tr([4; 32]), &p2wpkh()]);
        let c2 = segwit(&[(txid(&p2), 1, &[&[5; 71], &g()])], &[&p2tr([5; 32])]);
        assert!(!m.add(&p2, now) && !m.add(&c2, now));
        assert_eq!(
            m.pending_lookups(10),
            [([6; 32], 0)],
            "the child's is known"
        );
        assert!(m.resolve(&answer(([6; 32], 0), Some(p2tr(G_X))), now));
        assert_eq!(
            added(&m)[2..],
            [
                (txid(&p2), Some(tweak_of(&p2, &[&p2tr(G_X)]))),
                (txid(&c2), Some(tweak_of(&c2, &[&p2wpkh()]))),
            ]
        );
        assert_eq!(m.tweaks_missed(), 0);

        // An output the held parent does not have.
        let no_such = sp(txid(&parent), 5, 6);
        assert!(m.add(&no_such, now));
        assert_eq!(added(&m)[4], (txid(&no_such), None));
        assert_eq!(m.tweaks_missed(), 1);
    }

    /// An outpoint the node does not know, or a wait of [`TWEAK_WAIT`], publishes it
    /// without a tweak (counted as missed); scripts that make no tweak publish it without
    /// one too (not missed: it has none).
    #[test]
    fn an_unknown_outpoint_or_the_wait_running_out_publishes_without_a_tweak() {
        let m = ServedMempool::new(1 << 20).with_tweaks();
        let now = Millis(5_000);
        let x = sp([1; 32], 0, 1);
        assert!(!m.add(&x, now));
        assert!(m.resolve(&answer(([1; 32], 0), None), now));
        assert_eq!(added(&m), [(txid(&x), None)]);
        assert_eq!(m.tweaks_missed(), 1);

        let y = sp([2; 32], 0, 2);
        assert!(!m.add(&y, now));
        let just_before = now + (TWEAK_WAIT - Duration::from_millis(1));
        assert!(!m.resolve(&Answers::new(), just_before));
        assert!(!m.add(&tx([9; 32], 0, 0), just_before), "behind y");
        assert!(m.resolve(&Answers::new(), now + TWEAK_WAIT));
        assert_eq!(
            added(&m)[1..],
            [(txid(&y), None), (txid(&tx([9; 32], 0, 0)), None)]
        );
        assert_eq!(m.tweaks_missed(), 2);

        // The wait runs out at the next transaction too (the task may be slow).
        let w = sp([3; 32], 0, 3);
        assert!(!m.add(&w, now));
        assert!(m.add(&tx([10; 32], 0, 0), now + TWEAK_WAIT));
        assert_eq!(m.tweaks_missed(), 3);

        // Eligible inputs: none (an `OP_TRUE` spent). No tweak, none missed.
        let z = sp([4; 32], 0, 4);
        assert!(!m.add(&z, now));
        assert!(m.resolve(&answer(([4; 32], 0), Some(vec![0x51])), now));
        assert_eq!(added(&m).last(), Some(&(txid(&z), None)));
        assert_eq!(m.tweaks_missed(), 3);
    }

    /// A block drops, unlogged, the waiting transactions it mines, those spending what it
    /// spends, and those spending theirs; a conflict of a held one drops its waiting
    /// children too. What spends a mined one stays. `remove` drops one waiting.
    #[test]
    fn a_block_drops_what_waits_that_it_mines_or_conflicts() {
        let m = ServedMempool::new(1 << 20).with_tweaks();
        let now = Millis(0);
        let held = tx([8; 32], 0, 0);
        assert!(m.add(&held, now));
        let a = sp([1; 32], 0, 1);
        let b = sp([2; 32], 0, 2);
        let b_child = tx(txid(&b), 0, 3);
        let a_child = tx(txid(&a), 0, 4);
        let held_child = tx(txid(&held), 0, 5);
        let d = sp([4; 32], 0, 4);
        for t in [&a, &b, &b_child, &a_child, &held_child, &d] {
            assert!(!m.add(t, now));
        }
        assert_eq!(m.pending().0, 6);
        let mut block = vec![0u8; 80];
        block.push(4);
        block.extend_from_slice(&tx([0; 32], u32::MAX, 0));
        block.extend_from_slice(&a);
        block.extend_from_slice(&tx([2; 32], 0, 9));
        block.extend_from_slice(&tx([8; 32], 0, 9));
        assert!(m.block(&block), "the held one conflicted");
        assert_eq!(
            changes(&m, 1),
            [(2, txid(&held), Some(Removal::Conflicted))]
        );
        assert_eq!(m.pending().0, 2, "a's child and d wait");
        assert!(m.resolve(&answer(([4; 32], 0), Some(p2tr(G_X))), now));
        assert_eq!(
            added(&m),
            [
                (txid(&a_child), None),
                (txid(&d), Some(tweak_of(&d, &[&p2tr(G_X)]))),
            ]
        );

        let e = sp([5; 32], 0, 5);
        let e_child = tx(txid(&e), 0, 6);
        assert!(!m.add(&e, now) && !m.add(&e_child, now));
        let head = m.head();
        assert!(m.remove(&txid(&e), Removal::Evicted));
        assert_eq!(
            (m.pending().0, m.head()),
            (0, head),
            "dropped, with its child"
        );
    }

    /// Past the queue's bounds (count, or a quarter of the budget in bytes), the first
    /// waiting goes without its tweak.
    #[test]
    fn the_queue_is_bounded() {
        let m = ServedMempool::new(usize::MAX).with_tweaks();
        let now = Millis(0);
        let prev = |i: u32| {
            let mut p = [0u8; 32];
            p[..4].copy_from_slice(&i.to_le_bytes());
            p
        };
        for i in 0..PENDING_KEPT as u32 {
            assert!(!m.add(&sp(prev(i), 0, 1), now));
        }
        assert!(m.add(&sp(prev(u32::MAX), 0, 1), now));
        assert_eq!(added(&m), [(txid(&sp(prev(0), 0, 1)), None)]);
        assert_eq!((m.pending().0, m.tweaks_missed()), (PENDING_KEPT, 1));

        let len = sp([0; 32], 0, 1).len();
        let m = ServedMempool::new(PENDING_SHARE * (3 * len + len / 2)).with_tweaks();
        for i in 0..3 {
            assert!(!m.add(&sp(prev(i), 0, 1), now));
        }
        assert!(m.add(&sp(prev(3), 0, 1), now), "past the bytes");
        assert_eq!((m.pending(), m.tweaks_missed()), ((3, 3 * len), 1));
    }
}
