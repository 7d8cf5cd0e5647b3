//! The mempool task: incoming payments before they are mined, without telling any gateway
//! which scripts are the wallet's. Each gateway that serves the mempool digest is
//! subscribed, once the wallet watches something, with a salt of our own (fresh per
//! connection, from the engine's random numbers, which the browser seeds from
//! `crypto.getRandomValues`); its digest's sets are matched here against the wallet's scripts and the
//! outpoints of its coins and of its unconfirmed transactions' inputs (a spend of a coin,
//! a replacement); a transaction that matches is fetched (one at a time, from a gateway
//! whose digest announced it) and, if it is the wallet's, taken as unconfirmed, held by
//! every gateway whose digest announced it.
//!
//! Rules, for a gateway that may lie:
//! - A transaction fetched must be the one asked for (its txid), and its set under each
//!   announcing gateway's salt must be the set that gateway sent: a gateway whose digest
//!   does not describe the transaction it names is at fault ([`MempoolError`]), as is one
//!   that sends a digest unasked or a set that does not decode.
//! - `not_found` is no fault (the transaction may have just left its mempool): another
//!   gateway that announced it is asked, or the match is let go.
//! - A transaction fetched that spends a coin of the wallet's must be signed by that
//!   coin's key ([`lightwire_wallet::sighash`]), or its sender is at fault
//!   ([`MempoolError::InvalidSignature`]) and another announcer is asked: no gateway can
//!   show, or lock a coin with, a spend the wallet's keys did not sign.
//! - A gateway can invent a payment (it is then shown unconfirmed, held by that gateway
//!   alone, and never counted as confirmed: only a checked block confirms it) or hide one
//!   (another gateway shows it). A removal counts only from a gateway that holds the
//!   transaction, and drops it only when that gateway was the last to hold it (replaced,
//!   conflicted or evicted, as it says); one said mined waits for its block. A fetched
//!   transaction conflicting with a held one means its announcers no longer hold that one
//!   (it is dropped, replaced, only if they were its last holders): one gateway's word
//!   never drops what another holds. When a gateway's snapshot ends (its whole mempool
//!   told, as after a reconnect or a reload), an announced transaction no gateway holds is
//!   dropped as evicted once every gateway that may hold it has ended one too; the
//!   wallet's own broadcasts are not (a gateway's digest does not list what it relayed
//!   itself): they expire.
//! - What is fetched, and when, is all a gateway learns: the real matches, among false
//!   ones at 1 in 784,931 per watched item and transaction, which differ by salt.

use std::collections::VecDeque;

use lightwire_filter::Matcher;
use lightwire_filter::txset::{SALT_LEN, outpoint_item, set_matches, tx_set};
use lightwire_primitives::{Tx, Txid};
use lightwire_proto::Millis;
use lightwire_wallet::sighash::Fault;
use lightwire_wallet::unconfirmed::{AddError, Reason, Source};

use super::gateway::GatewayState;
use lightwire_wire::{DigestEntry, MempoolDigest, MempoolTx, Removal};

use super::ctx::{Broke, Conns, Ctx, Effect, ready};
use super::event::Event;
use super::task::{Task, View, timeout};
use super::wallet::WalletTask;
use crate::ids::{GatewayId, Ids, TaskId};
use crate::reason::DropReason;
use crate::wallet::WalletSync;

/// Matched transactions waiting to be fetched, at most: more are let go (a gateway cannot
/// make them match without lying, and a lie is found when its match is fetched).
pub const MAX_WANTED: usize = 64;

/// Fetched transactions that were not the wallet's (false positives), remembered so that
/// another gateway's match of the same one is not fetched again.
const NOT_OURS_KEPT: usize = 256;

/// A gateway's mempool digest or transaction broke a rule.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum MempoolError {
    /// A digest from a gateway not subscribed on this connection.
    #[error("it sent a mempool digest unasked")]
    Unasked,
    /// A set that does not decode.
    #[error("its digest's set for transaction {0} does not decode")]
    UndecodableSet(Txid),
    /// The transaction it sent is not the one asked for.
    #[error("it sent another transaction for {0}")]
    WrongTransaction(Txid),
    /// Its digest's set for a transaction is not that transaction's.
    #[error("its digest does not describe transaction {0}")]
    DigestMismatch(Txid),
    /// It handed over a transaction spending a coin of the wallet's that the coin's key
    /// did not sign: no node holds it (a replacement or a spend invented from the wallet's
    /// own broadcast, say).
    #[error("transaction {txid} it sent spends the wallet's coin on input {input} without its key's signature ({})", .fault.name())]
    InvalidSignature {
        /// The transaction.
        txid: Txid,
        /// The input.
        input: u32,
        /// The rule its signature broke.
        fault: Fault,
    },
}

/// A transaction the digest matched: the gateways that announced it, with their sets.
#[derive(Debug)]
struct Wanted {
    txid: Txid,
    from: Vec<(GatewayId, Vec<u8>)>,
}

#[derive(Debug)]
struct Fetch {
    gateway: GatewayId,
    id: u32,
    txid: Txid,
}

/// The mempool task's state.
pub struct MempoolTask {
    /// Each gateway's salt, once subscribed on its connection.
    salts: Vec<Option<[u8; SALT_LEN]>>,
    wanted: VecDeque<Wanted>,
    fetch: Option<Fetch>,
    not_ours: VecDeque<Txid>,
    /// What is matched: the wallet's scripts and outpoints, flat, with their ends.
    queries: Vec<u8>,
    ends: Vec<usize>,
    matcher: Matcher,
    /// Gateways found ready without serving the mempool (one bit each): they hold nothing.
    silent: u64,
    /// Scratch for a set rebuilt from a fetched transaction (item hashes, the set).
    items: Vec<u64>,
    set: Vec<u8>,
    ids: Ids,
}

impl MempoolTask {
    /// For `n` gateways; nothing subscribed.
    pub fn new(n: usize) -> MempoolTask {
        MempoolTask {
            salts: vec![None; n],
            wanted: VecDeque::new(),
            fetch: None,
            not_ours: VecDeque::new(),
            queries: Vec::new(),
            ends: Vec::new(),
            matcher: Matcher::default(),
            silent: 0,
            items: Vec::new(),
            set: Vec::new(),
            ids: Ids::new(TaskId::Mempool),
        }
    }

    /// The wallet's scripts, and the outpoints of its coins (confirmed and not) and of
    /// its unconfirmed transactions' inputs, into the query buffers (reused).
    fn queries(&mut self, w: &WalletSync) {
        self.queries.clear();
        self.ends.clear();
        let (q, ends) = (&mut self.queries, &mut self.ends);
        let mut push = |item: &[u8]| {
            q.extend_from_slice(item);
            ends.push(q.len());
        };
        w.watch.scripts().for_each(&mut push);
        for c in w.ledger.utxos() {
            push(&outpoint_item(&c.outpoint.txid.0, c.outpoint.vout));
        }
        for t in w.unconfirmed.transactions() {
            for (o, _, _) in t.coins() {
                push(&outpoint_item(&o.txid.0, o.vout));
            }
            for o in t.inputs() {
                push(&outpoint_item(&o.txid.0, o.vout));
            }
        }
    }

    /// A `mempool_digest` from gateway `g`.
    pub fn on_digest(
        &mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        d: &MempoolDigest<'_>,
        wallet: &mut WalletTask,
    ) -> Result<(), DropReason> {
        let Some(salt) = self.salts.get(g.index()).copied().flatten() else {
            return Err(DropReason::Mempool(MempoolError::Unasked));
        };
        let Some(w) = wallet.wallet.as_mut() else {
            return Ok(());
        };
        if d.reset {
            // It forgets everything it said: it holds nothing until it says so again.
            tell(ctx, w.forget_holder(g.bit()));
            self.forget(g);
        }
        self.queries(w);
        for entry in d.entries() {
            match entry {
                DigestEntry::Added { txid, set } => {
                    let txid = Txid(*txid);
                    if let Some(t) = w.unconfirmed.get(&txid) {
                        // Held already: its set is checked here and now (a gateway cannot
                        // claim to hold what it does not describe).
                        if let Ok(tx) = Tx::parse(&t.raw) {
                            tx_set(&tx, &salt, &mut self.items, &mut self.set);
                            if self.set != set {
                                let why = MempoolError::DigestMismatch(txid);
                                return Err(DropReason::Mempool(why));
                            }
                        }
                        let holders = t.holders | g.bit();
                        tell(ctx, w.set_holders(&txid, holders));
                        continue;
                    }
                    if self.not_ours.contains(&txid) {
                        continue;
                    }
                    let (q, ends) = (&self.queries, &self.ends);
                    let items = ends.iter().scan(0, |start, &end| {
                        let item = &q[*start..end];
                        *start = end;
                        Some(item)
                    });
                    let matched = set_matches(&mut self.matcher, set, &salt, items)
                        .map_err(|_| DropReason::Mempool(MempoolError::UndecodableSet(txid)))?;
                    if matched {
                        self.want(txid, g, set);
                    }
                }
                DigestEntry::Removed { txid, reason } => {
                    let txid = Txid(*txid);
                    if let Some(i) = self.wanted.iter().position(|x| x.txid == txid) {
                        self.wanted[i].from.retain(|(x, _)| *x != g);
                        if self.wanted[i].from.is_empty() && self.fetch_of(&txid).is_none() {
                            self.wanted.remove(i);
                        }
                    }
                    // It counts only if this gateway held it. Said mined: its block
                    // confirms it (or, if no block does, it expires). Otherwise it goes
                    // once no gateway holds it, for the last one's reason.
                    let why = match reason {
                        Removal::Mined => None,
                        Removal::Replaced => Some(Reason::Replaced),
                        Removal::Conflicted => Some(Reason::Conflicted),
                        Removal::Evicted => Some(Reason::Evicted),
                    };
                    tell(ctx, w.let_go(&txid, g.bit(), why));
                }
            }
        }
        if d.snapshot_end {
            // Its whole mempool is known now: a transaction a digest announced that no
            // gateway holds (one that left while this client was away) is gone once every
            // gateway that may still hold it has said so too.
            let expected = ctx
                .gateways
                .ids()
                .filter(|&x| {
                    ctx.gateways[x].state != GatewayState::Bad && self.silent & x.bit() == 0
                })
                .fold(0u64, |m, x| m | x.bit());
            tell(ctx, w.snapshot_ended(g.bit(), expected));
        }
        Ok(())
    }

    /// The fetch in flight, if it is of `txid`.
    fn fetch_of(&self, txid: &Txid) -> Option<&Fetch> {
        self.fetch.as_ref().filter(|f| f.txid == *txid)
    }

    /// Gateway `g` announced `txid` with `set`, which matched: fetch it (once).
    fn want(&mut self, txid: Txid, g: GatewayId, set: &[u8]) {
        if let Some(x) = self.wanted.iter_mut().find(|x| x.txid == txid) {
            if !x.from.iter().any(|(y, _)| *y == g) {
                x.from.push((g, set.to_vec()));
            }
            return;
        }
        if self.wanted.len() < MAX_WANTED {
            self.wanted.push_back(Wanted {
                txid,
                from: vec![(g, set.to_vec())],
            });
        }
    }

    /// Gateway `g` said nothing it held stands: its announcements go.
    fn forget(&mut self, g: GatewayId) {
        for x in &mut self.wanted {
            x.from.retain(|(y, _)| *y != g);
        }
        let in_flight = self.fetch.as_ref().map(|f| f.txid);
        self.wanted
            .retain(|x| !x.from.is_empty() || Some(x.txid) == in_flight);
    }

    /// A `mempool_tx` from gateway `g`.
    pub fn on_tx(
        &mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        m: &MempoolTx<'_>,
        wallet: &mut WalletTask,
    ) -> Result<(), DropReason> {
        let Some(f) = self.fetch.take_if(|f| f.gateway == g && f.id == m.id) else {
            return ctx.given_up_answer(g, m.id, true);
        };
        ctx.timers.touch(TaskId::Mempool, ctx.now);
        let Some(i) = self.wanted.iter().position(|x| x.txid == f.txid) else {
            return Ok(());
        };
        if m.not_found {
            // No fault: it may have just left. Another that announced it is asked.
            self.wanted[i].from.retain(|(y, _)| *y != g);
            if self.wanted[i].from.is_empty() {
                self.wanted.remove(i);
            }
            return Ok(());
        }
        let Some(wanted) = self.wanted.remove(i) else {
            return Ok(());
        };
        let tx = match Tx::parse(m.tx) {
            Ok(tx) if tx.txid() == f.txid => tx,
            _ => return Err(DropReason::Mempool(MempoolError::WrongTransaction(f.txid))),
        };
        // Each gateway that announced it: its set must be the transaction's, under its
        // salt. The one that sent it is judged here; the others after.
        let mut holders = 0u64;
        for (x, set) in &wanted.from {
            let Some(salt) = self.salts.get(x.index()).copied().flatten() else {
                continue;
            };
            tx_set(&tx, &salt, &mut self.items, &mut self.set);
            if self.set != *set {
                let why = DropReason::Mempool(MempoolError::DigestMismatch(f.txid));
                if *x == g {
                    return Err(why);
                }
                ctx.drop_later(*x, why);
                continue;
            }
            holders |= x.bit();
        }
        let Some(w) = wallet.wallet.as_mut() else {
            return Ok(());
        };
        match w.add_unconfirmed(m.tx, Source::Announced, ctx.now.0, holders) {
            Ok(changes) => tell(ctx, changes),
            Err(AddError::NotSigned { input, fault }) => {
                // Its sender invented it; another gateway that announced the same txid
                // may hold the signed one (a witness is not in the txid): it is asked.
                let from: Vec<_> = wanted.from.into_iter().filter(|(x, _)| *x != g).collect();
                if !from.is_empty() {
                    self.wanted.push_front(Wanted { txid: f.txid, from });
                }
                let why = MempoolError::InvalidSignature {
                    txid: f.txid,
                    input,
                    fault,
                };
                return Err(DropReason::Mempool(why));
            }
            // Not the wallet's, or a spend of its coins it cannot check (and so does not
            // take): not fetched again.
            Err(AddError::NotOurs | AddError::Unchecked { .. }) => {
                if self.not_ours.len() == NOT_OURS_KEPT {
                    self.not_ours.pop_front();
                }
                self.not_ours.push_back(f.txid);
            }
            // Mined already, spending a coin a mined transaction spent, or too many held:
            // nothing to show.
            Err(_) => {}
        }
        Ok(())
    }
}

/// The application hears of what the wallet took or dropped.
fn tell(ctx: &mut Ctx, changes: impl IntoIterator<Item = crate::wallet::WalletChange>) {
    ctx.events.extend(changes.into_iter().map(Event::Wallet));
}

impl Task for MempoolTask {
    /// Subscribe to each gateway that serves the digest (once the wallet watches
    /// something), and fetch the next transaction matched.
    fn schedule(&mut self, ctx: &mut Ctx, conns: &mut Conns, view: &View) -> Result<(), Broke> {
        if ctx.stopped || !view.wallet {
            return Ok(());
        }
        for g in ctx.gateways.ids() {
            if self.salts[g.index()].is_some() || !ctx.gateways[g].ready {
                continue;
            }
            let Some(conn) = ready(conns, g) else {
                continue;
            };
            if !conn.serves_mempool() {
                self.silent |= g.bit();
                continue;
            }
            self.silent &= !g.bit();
            let mut salt = [0u8; SALT_LEN];
            salt[..8].copy_from_slice(&ctx.rng.next_u64().to_le_bytes());
            salt[8..].copy_from_slice(&ctx.rng.next_u64().to_le_bytes());
            conn.subscribe_mempool(salt, true).map_err(|e| (g, e))?;
            self.salts[g.index()] = Some(salt);
        }
        if self.fetch.is_some() {
            return Ok(());
        }
        while let Some(front) = self.wanted.front() {
            let txid = front.txid;
            let from = front
                .from
                .iter()
                .map(|(g, _)| *g)
                .find(|&g| ctx.gateways[g].ready && ready(conns, g).is_some());
            let Some(g) = from else {
                self.wanted.pop_front();
                continue;
            };
            let id = self.ids.next_id();
            if let Some(conn) = ready(conns, g) {
                conn.get_mempool_tx(id, txid.0).map_err(|e| (g, e))?;
            }
            ctx.timers.touch(TaskId::Mempool, ctx.now);
            self.fetch = Some(Fetch {
                gateway: g,
                id,
                txid,
            });
            break;
        }
        Ok(())
    }

    fn deadline(&self, ctx: &Ctx) -> Option<Millis> {
        ctx.timers.deadline(TaskId::Mempool, self.fetch.is_some())
    }

    /// A fetch without an answer drops its gateway.
    fn timed_out(&mut self, _: &mut Ctx) -> Vec<(GatewayId, DropReason)> {
        self.fetch
            .as_ref()
            .map(|f| timeout(f.gateway))
            .into_iter()
            .collect()
    }

    /// Its subscription and what it announced go; what it held, it holds no more.
    fn gateway_gone(&mut self, ctx: &mut Ctx, g: GatewayId) {
        if let Some(s) = self.salts.get_mut(g.index()) {
            *s = None;
        }
        if self.fetch.as_ref().is_some_and(|f| f.gateway == g) {
            self.fetch = None;
        }
        self.forget(g);
        ctx.effects.push_back(Effect::Unheld { gateway: g });
    }
}
