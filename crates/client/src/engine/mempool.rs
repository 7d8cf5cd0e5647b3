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
//!   show, or lock a coin with, a spend the wallet's keys did not sign. Every wallet is
//!   asked before any takes it (a spend of two wallets' coins signed for one is taken by
//!   neither), and a wallet that holds its txid already is asked too (a copy with a
//!   forged witness has the same txid).
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
//!   ones at 1 in 784,931 per watched item and transaction, which differ by salt. A
//!   transaction announced by several gateways is fetched from one that is not the first
//!   to announce it. A `not_found` for a transaction the same gateway announced and did
//!   not remove (its digest says a removal before any answer) is a strike: a gateway
//!   probing which of a set of scripts is the wallet's with invented transactions is bad
//!   at its third ([`MempoolError::Withheld`]); and each gateway is asked for at most
//!   [`FETCHES_PER_HOUR`] transactions an hour.
//! - Bounded work: the wallet's items are hashed under each gateway's salt once per change
//!   of the wallet (an entry of N items costs N binary searches, not the wallet's size);
//!   a gateway may send [`DIGEST_BURST`] entries at once (a whole mempool's snapshot) and
//!   [`DIGEST_RATE`] a second after that, or it is dropped as flooding. Each gateway has
//!   its own share of the [`MAX_WANTED`] matches waiting to be fetched: one whose share is
//!   full is asked for a fresh snapshot once its matches are fetched, rather than its
//!   overflow forgotten (so a gateway that fills the queue with invented matches delays
//!   only its own).
//! - With a silent-payment receiver (BIP352) scanning, each gateway that serves tweaks is
//!   subscribed with `tweaks` (again, with a fresh snapshot, when the receiver starts
//!   after it was subscribed): an entry's tweak gives the receiver's first keys, asked of
//!   the entry's set ([`crate::silent_mempool`]); a transaction that matches is fetched,
//!   and its outputs at the receiver's keys make it the wallet's (a wallet with nothing
//!   watched is made for it). A tweak that is not a point is its gateway's fault
//!   ([`MempoolError::TweakNotAPoint`]); a tweak left out or wrong hides the payment
//!   only until a block holds it (then the receiver's scan finds it from the tweak lists
//!   the gateways agreed on), and another gateway's digest shows it meanwhile.

use std::collections::VecDeque;

use lightwire_filter::txset::{SALT_LEN, SaltedItems, outpoint_item, tx_set};
use lightwire_primitives::{Tx, Txid};
use lightwire_proto::Millis;
use lightwire_wallet::sighash::Fault;
use lightwire_wallet::unconfirmed::{AddError, Reason, Source};

use super::gateway::GatewayState;
use lightwire_wire::{DigestEntry, MempoolDigest, MempoolTx, Removal};

use super::ctx::{Broke, Conns, Ctx, Effect, ready};
use super::event::Event;
use super::task::{Task, View, timeout};
use super::wallet::{WalletTask, tell};
use crate::ids::{GatewayId, Ids, TaskId};
use crate::reason::DropReason;
use crate::silent_mempool::MempoolCheck;
use crate::silent_scan::Scanning;
use crate::wallet::blocks::WalletId;

/// Matched transactions waiting to be fetched, at most, shared between the gateways (a
/// gateway's share is what it announced first).
pub const MAX_WANTED: usize = 64;

/// The fewest matches a gateway's share holds, however many gateways there are.
const MIN_SHARE: usize = 8;

/// Transactions asked of one gateway in an hour, at most.
pub const FETCHES_PER_HOUR: u32 = 120;

/// Digest entries a gateway may send at once: a whole mempool's snapshot (a gateway holds
/// 64 MB by default, about 250,000 transactions).
pub const DIGEST_BURST: u64 = 400_000;

/// Digest entries a second a gateway may send after its burst (mainnet averages about 7
/// transactions a second, and a block removes a few thousand at once).
pub const DIGEST_RATE: u64 = 2_000;

/// `not_found` strikes after which a gateway is bad.
const STRIKES: u32 = 3;

const HOUR: u64 = 3_600_000;

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
    /// It answered `not_found` for transactions it announced and did not remove, a third
    /// time ({0} the last).
    #[error("it announced transactions it does not hand over (the third: {0})")]
    Withheld(Txid),
    /// Its digest's tweak for a transaction is not a point (no transaction has one).
    #[error("its digest's tweak for transaction {0} is not a point")]
    TweakNotAPoint(Txid),
    /// It sent more digest entries than its budget allows.
    #[error("it sent {0} digest entries beyond its budget")]
    Flooding(u16),
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

/// A transaction the digest matched: the gateways that announced it, with their sets
/// and the tweaks they gave it.
#[derive(Debug)]
struct Wanted {
    txid: Txid,
    from: Vec<(GatewayId, Vec<u8>, Option<[u8; 33]>)>,
}

impl Wanted {
    /// The first gateway that announced it and has not removed it, if any (a match being
    /// fetched may have none left).
    fn first(&self) -> Option<GatewayId> {
        self.from.first().map(|(g, _, _)| *g)
    }
}

#[derive(Debug)]
struct Fetch {
    gateway: GatewayId,
    id: u32,
    txid: Txid,
}

/// What the task keeps of one gateway's connection.
#[derive(Default)]
struct PerGateway {
    /// Its salt, once subscribed.
    salt: Option<[u8; SALT_LEN]>,
    /// Subscribed with `tweaks` (for a silent-payment receiver).
    tweaks: bool,
    /// The wallets' items under its salt, and the wallets' revision they are of.
    items: SaltedItems,
    revision: Option<(u64, u64)>,
    /// Digest entries it may still send, as of `refilled`.
    tokens: u64,
    refilled: Millis,
    /// `not_found` strikes.
    strikes: u32,
    /// Transactions asked of it since `window` (an hour's).
    fetched: u32,
    window: Millis,
    /// Its share of the matches overflowed: a fresh snapshot is asked once it is drained.
    overflowed: bool,
}

/// The mempool task's state.
pub struct MempoolTask {
    gateways: Vec<PerGateway>,
    wanted: VecDeque<Wanted>,
    fetch: Option<Fetch>,
    not_ours: VecDeque<Txid>,
    /// The wallet's scripts and outpoints, flat, with their ends (scratch for a rebuild).
    queries: Vec<u8>,
    ends: Vec<usize>,
    /// Gateways found ready without serving the mempool (one bit each): they hold nothing.
    silent: u64,
    /// Scratch for a set rebuilt from a fetched transaction (item hashes, the set).
    items: Vec<u64>,
    set: Vec<u8>,
    /// Scratch for the silent-payment receiver's checks of a digest, and its finds.
    checks: Vec<MempoolCheck>,
    found: Vec<lightwire_wallet::silent_block::Payment>,
    ids: Ids,
}

impl MempoolTask {
    /// For `n` gateways; nothing subscribed.
    pub fn new(n: usize) -> MempoolTask {
        MempoolTask {
            gateways: (0..n).map(|_| PerGateway::default()).collect(),
            wanted: VecDeque::new(),
            fetch: None,
            not_ours: VecDeque::new(),
            queries: Vec::new(),
            ends: Vec::new(),
            silent: 0,
            items: Vec::new(),
            set: Vec::new(),
            checks: Vec::new(),
            found: Vec::new(),
            ids: Ids::new(TaskId::Mempool),
        }
    }

    /// Every wallet's scripts, and the outpoints of its coins (confirmed and not) and of
    /// its unconfirmed transactions' inputs, into the query buffers (reused): one match
    /// of each digest entry serves every wallet.
    fn queries(&mut self, wallets: &WalletTask) {
        self.queries.clear();
        self.ends.clear();
        let (q, ends) = (&mut self.queries, &mut self.ends);
        let mut push = |item: &[u8]| {
            q.extend_from_slice(item);
            ends.push(q.len());
        };
        for (_, w) in wallets.each() {
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
    }

    /// A `mempool_digest` from gateway `g`; `silent`: the receiver's scan, if one runs.
    pub fn on_digest(
        &mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        d: &MempoolDigest<'_>,
        wallet: &mut WalletTask,
        mut silent: Option<&mut (dyn Scanning + 'static)>,
    ) -> Result<(), DropReason> {
        let Some(salt) = self.gateways.get(g.index()).and_then(|p| p.salt) else {
            return Err(DropReason::Mempool(MempoolError::Unasked));
        };
        // Its budget of entries: refilled for the time since, spent by these.
        let p = &mut self.gateways[g.index()];
        let elapsed = ctx.now.0.saturating_sub(p.refilled.0);
        p.tokens = p
            .tokens
            .saturating_add(elapsed.saturating_mul(DIGEST_RATE) / 1_000)
            .min(DIGEST_BURST);
        p.refilled = ctx.now;
        let Some(left) = p.tokens.checked_sub(u64::from(d.count)) else {
            let over = u64::from(d.count) - p.tokens;
            return Err(DropReason::Mempool(MempoolError::Flooding(over as u16)));
        };
        p.tokens = left;
        if silent.is_some() && wallet.one().is_none() {
            // A receiver alone: its unconfirmed payments need a wallet to be held in
            // (nothing watched; one watched later scans from its own start).
            let empty = super::wallet::WalletTask::empty(ctx);
            wallet.put(crate::wallet::blocks::WalletId::DEFAULT, empty);
        }
        if !wallet.any() {
            return Ok(());
        }
        if d.reset {
            // It forgets everything it said: it holds nothing until it says so again.
            for (id, w) in wallet.each_mut() {
                tell(ctx, id, w.forget_holder(g.bit()));
            }
            self.forget(g);
        }
        let revision = wallet.revision();
        if self.gateways[g.index()].revision != Some(revision) {
            self.queries(wallet);
            let (q, ends) = (&self.queries, &self.ends);
            let items = ends.iter().scan(0, |start, &end| {
                let item = &q[*start..end];
                *start = end;
                Some(item)
            });
            let p = &mut self.gateways[g.index()];
            p.items.rebuild(&salt, items);
            p.revision = Some(revision);
        }
        let share = (MAX_WANTED / ctx.gateways.len().max(1)).max(MIN_SHARE);
        // The receiver's checks of the entries with a tweak, all at once (their keys are
        // worked out together), read in order below.
        self.checks.clear();
        if let Some(scan) = silent.as_deref_mut() {
            let entries: Vec<(&[u8; 33], &[u8])> = d
                .entries()
                .filter_map(|e| match e {
                    DigestEntry::Added {
                        set,
                        tweak: Some(t),
                        ..
                    } => Some((t, set)),
                    _ => None,
                })
                .collect();
            if !entries.is_empty() {
                scan.mempool_matches(&salt, &entries, &mut self.checks);
            }
        }
        let mut checks = 0usize;
        for entry in d.entries() {
            match entry {
                DigestEntry::Added { txid, set, tweak } => {
                    let txid = Txid(*txid);
                    let check = match tweak {
                        Some(_) if silent.is_some() => {
                            checks += 1;
                            self.checks.get(checks - 1).copied()
                        }
                        _ => None,
                    };
                    match check {
                        Some(MempoolCheck::NotAPoint) => {
                            let why = MempoolError::TweakNotAPoint(txid);
                            return Err(DropReason::Mempool(why));
                        }
                        Some(MempoolCheck::Undecodable) => {
                            let why = MempoolError::UndecodableSet(txid);
                            return Err(DropReason::Mempool(why));
                        }
                        _ => {}
                    }
                    if let Some(t) = wallet.held(&txid) {
                        // Held already: its set is checked here and now (a gateway cannot
                        // claim to hold what it does not describe).
                        if let Ok(tx) = Tx::parse(&t.raw) {
                            tx_set(&tx, &salt, &mut self.items, &mut self.set);
                            if self.set != set {
                                let why = MempoolError::DigestMismatch(txid);
                                return Err(DropReason::Mempool(why));
                            }
                        }
                        // Held, and a tweak given: its outputs are searched with it here
                        // (it may pay the receiver too, seen before the receiver was).
                        let found = match (tweak, silent.as_deref_mut()) {
                            (Some(tweak), Some(scan)) => {
                                self.found.clear();
                                let raw = t.raw.clone();
                                if let Ok(tx) = Tx::parse(&raw) {
                                    scan.mempool_payments(tweak, &tx, &mut self.found);
                                }
                                let found = silent_outputs(&self.found, scan.spend_key());
                                (!found.is_empty()).then_some((raw, found, t.holders))
                            }
                            _ => None,
                        };
                        for (id, w) in wallet.each_mut() {
                            if let Some(t) = w.unconfirmed.get(&txid) {
                                let holders = t.holders | g.bit();
                                tell(ctx, id, w.set_holders(&txid, holders));
                            }
                        }
                        // The receiver's outputs are the default wallet's.
                        if let Some((raw, found, holders)) = found
                            && let Some(w) = wallet.one_mut()
                            && let Ok(changes) = w.add_unconfirmed_silent(
                                &raw,
                                Source::Announced,
                                ctx.now.0,
                                holders | g.bit(),
                                &found,
                            )
                            && !changes.is_empty()
                        {
                            silent_told(ctx, &self.found);
                            tell(ctx, WalletId::DEFAULT, changes);
                        }
                        continue;
                    }
                    let silent_match = check == Some(MempoolCheck::Match);
                    if self.not_ours.contains(&txid) && !silent_match {
                        continue;
                    }
                    let matched = silent_match
                        || self.gateways[g.index()]
                            .items
                            .matches(set)
                            .map_err(|_| DropReason::Mempool(MempoolError::UndecodableSet(txid)))?;
                    if matched {
                        self.not_ours.retain(|x| *x != txid);
                        self.want(txid, g, set, tweak.copied(), share);
                    }
                }
                DigestEntry::Removed { txid, reason } => {
                    let txid = Txid(*txid);
                    if let Some(i) = self.wanted.iter().position(|x| x.txid == txid) {
                        self.wanted[i].from.retain(|(x, _, _)| *x != g);
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
                    for (id, w) in wallet.each_mut() {
                        tell(ctx, id, w.let_go(&txid, g.bit(), why));
                    }
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
            for (id, w) in wallet.each_mut() {
                tell(ctx, id, w.snapshot_ended(g.bit(), expected));
            }
        }
        Ok(())
    }

    /// The fetch in flight, if it is of `txid`.
    fn fetch_of(&self, txid: &Txid) -> Option<&Fetch> {
        self.fetch.as_ref().filter(|f| f.txid == *txid)
    }

    /// Gateway `g` announced `txid` with `set` (and `tweak`), which matched: fetch it
    /// (once). A match it announced first counts against its `share`; past it, it is asked
    /// for a fresh snapshot once its matches are fetched.
    fn want(
        &mut self,
        txid: Txid,
        g: GatewayId,
        set: &[u8],
        tweak: Option<[u8; 33]>,
        share: usize,
    ) {
        if let Some(x) = self.wanted.iter_mut().find(|x| x.txid == txid) {
            if !x.from.iter().any(|(y, _, _)| *y == g) {
                x.from.push((g, set.to_vec(), tweak));
            }
            return;
        }
        let owned = self.wanted.iter().filter(|x| x.first() == Some(g)).count();
        if owned >= share || self.wanted.len() >= MAX_WANTED {
            self.gateways[g.index()].overflowed = true;
            return;
        }
        self.wanted.push_back(Wanted {
            txid,
            from: vec![(g, set.to_vec(), tweak)],
        });
    }

    /// Gateway `g` said nothing it held stands: its announcements go.
    fn forget(&mut self, g: GatewayId) {
        for x in &mut self.wanted {
            x.from.retain(|(y, _, _)| *y != g);
        }
        let in_flight = self.fetch.as_ref().map(|f| f.txid);
        self.wanted
            .retain(|x| !x.from.is_empty() || Some(x.txid) == in_flight);
    }

    /// A `mempool_tx` from gateway `g`; `silent`: the receiver's scan, if one runs.
    pub fn on_tx(
        &mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        m: &MempoolTx<'_>,
        wallet: &mut WalletTask,
        silent: Option<&mut (dyn Scanning + 'static)>,
    ) -> Result<(), DropReason> {
        let Some(f) = self.fetch.take_if(|f| f.gateway == g && f.id == m.id) else {
            return ctx.given_up_answer(g, m.id, true);
        };
        ctx.timers.touch(TaskId::Mempool, ctx.now);
        let Some(i) = self.wanted.iter().position(|x| x.txid == f.txid) else {
            return Ok(());
        };
        if m.not_found {
            // It says it does not hold what it announced and did not say it removed (a
            // removal comes before any answer): a strike. Another that announced it is
            // asked.
            let announced = self.wanted[i].from.iter().any(|(y, _, _)| *y == g);
            self.wanted[i].from.retain(|(y, _, _)| *y != g);
            if self.wanted[i].from.is_empty() {
                self.wanted.remove(i);
            }
            if announced {
                let p = &mut self.gateways[g.index()];
                p.strikes += 1;
                if p.strikes >= STRIKES {
                    return Err(DropReason::Mempool(MempoolError::Withheld(f.txid)));
                }
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
        for (x, set, _) in &wanted.from {
            let Some(salt) = self.gateways.get(x.index()).and_then(|p| p.salt) else {
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
        // Its outputs at the receiver's keys, for each tweak its holders gave it.
        self.found.clear();
        let mut found = Vec::new();
        if let Some(scan) = silent {
            let mut tried: Vec<[u8; 33]> = Vec::new();
            for (x, _, tweak) in &wanted.from {
                let Some(tweak) = tweak.filter(|_| holders & x.bit() != 0) else {
                    continue;
                };
                if !tried.contains(&tweak) {
                    tried.push(tweak);
                    scan.mempool_payments(&tweak, &tx, &mut self.found);
                }
            }
            found = silent_outputs(&self.found, scan.spend_key());
        }
        // A spend of any wallet's coin its key did not sign is its sender's fault, and no
        // wallet takes it: every wallet is asked before any takes it (one whose own
        // input is signed would otherwise hold what the next refuses), and one that holds
        // that txid already is asked too (a copy with a forged witness has its txid).
        for (_, w) in wallet.each() {
            if let Err(AddError::NotSigned { input, fault }) = w.check_signed(m.tx) {
                return Err(self.not_signed(g, wanted, (input, fault)));
            }
        }
        // Each wallet it touches takes it (the receiver's outputs are the default
        // wallet's).
        let mut ours = false;
        let now = ctx.now.0;
        for (id, w) in wallet.each_mut() {
            let silent: &[_] = if id == WalletId::DEFAULT { &found } else { &[] };
            match w.add_unconfirmed_silent(m.tx, Source::Announced, now, holders, silent) {
                Ok(changes) => {
                    ours = true;
                    if !silent.is_empty() && !changes.is_empty() {
                        silent_told(ctx, &self.found);
                    }
                    tell(ctx, id, changes);
                }
                Err(AddError::NotSigned { input, fault }) => {
                    return Err(self.not_signed(g, wanted, (input, fault)));
                }
                // Not this wallet's, or a spend of its coins it cannot check (and so does
                // not take).
                Err(AddError::NotOurs | AddError::Unchecked { .. }) => {}
                // Mined already, spending a coin a mined transaction spent, or too many
                // held: nothing to show.
                Err(_) => ours = true,
            }
        }
        if !ours {
            // No wallet's: not fetched again.
            if self.not_ours.len() == NOT_OURS_KEPT {
                self.not_ours.pop_front();
            }
            self.not_ours.push_back(f.txid);
        }
        Ok(())
    }

    /// Transaction `wanted` gateway `g` sent spends a wallet's coin on `input` without
    /// its key's signature: why `g` is dropped. Its sender invented it; another gateway
    /// that announced the same txid may hold the signed one (a witness is not in the
    /// txid): it is asked.
    fn not_signed(
        &mut self,
        g: GatewayId,
        wanted: Wanted,
        (input, fault): (u32, Fault),
    ) -> DropReason {
        let txid = wanted.txid;
        let from: Vec<_> = wanted
            .from
            .into_iter()
            .filter(|(x, _, _)| *x != g)
            .collect();
        if !from.is_empty() {
            self.wanted.push_front(Wanted { txid, from });
        }
        DropReason::Mempool(MempoolError::InvalidSignature { txid, input, fault })
    }
}

/// The wallet's record of the receiver's `payments` in a mempool transaction, the spend
/// key `spend`'s.
fn silent_outputs(
    payments: &[lightwire_wallet::silent_block::Payment],
    spend: [u8; 33],
) -> Vec<lightwire_wallet::unconfirmed::SilentOutput> {
    let mut out: Vec<lightwire_wallet::unconfirmed::SilentOutput> = Vec::new();
    for p in payments {
        if !out.iter().any(|s| s.vout == p.vout) {
            out.push(lightwire_wallet::unconfirmed::SilentOutput {
                vout: p.vout,
                tweak: p.found.tweak,
                label: p.found.label,
                spend,
            });
        }
    }
    out
}

/// The application hears of each silent payment found in the mempool (no block yet).
fn silent_told(ctx: &mut Ctx, payments: &[lightwire_wallet::silent_block::Payment]) {
    let mut told: Vec<u32> = Vec::new();
    for p in payments {
        if !told.contains(&p.vout) {
            told.push(p.vout);
            ctx.events.push_back(Event::SilentPayment {
                height: None,
                hash: None,
                payment: *p,
            });
        }
    }
}

impl Task for MempoolTask {
    /// Subscribe to each gateway that serves the digest (once the wallet watches
    /// something), and fetch the next transaction matched.
    fn schedule(&mut self, ctx: &mut Ctx, conns: &mut Conns, view: &View) -> Result<(), Broke> {
        if ctx.stopped || !(view.wallet || view.silent) {
            return Ok(());
        }
        for g in ctx.gateways.ids() {
            let owns = self.wanted.iter().any(|x| x.first() == Some(g));
            if !ctx.gateways[g].ready {
                continue;
            }
            let Some(conn) = ready(conns, g) else {
                continue;
            };
            let p = &self.gateways[g.index()];
            // Subscribed as the receiver needs, and not drained of an overflow: nothing
            // to do.
            let drained_overflow = p.overflowed && !owns;
            let tweaks = view.silent && conn.serves_tweaks();
            if p.salt.is_some() && !drained_overflow && p.tweaks == tweaks {
                continue;
            }
            if !conn.serves_mempool() {
                self.silent |= g.bit();
                continue;
            }
            self.silent &= !g.bit();
            let mut salt = [0u8; SALT_LEN];
            salt[..8].copy_from_slice(&ctx.rng.next_u64().to_le_bytes());
            salt[8..].copy_from_slice(&ctx.rng.next_u64().to_le_bytes());
            conn.subscribe_mempool(salt, true, tweaks)
                .map_err(|e| (g, e))?;
            let p = &mut self.gateways[g.index()];
            // A connection's first subscription starts its budget of entries; a fresh
            // snapshot keeps it.
            if p.salt.is_none() {
                p.tokens = DIGEST_BURST;
                p.refilled = ctx.now;
            }
            p.salt = Some(salt);
            p.tweaks = tweaks;
            p.revision = None;
            p.overflowed = false;
        }
        if self.fetch.is_some() {
            return Ok(());
        }
        // Matches no ready gateway announced go; the first that one can be asked for is:
        // of a gateway other than its first announcer if one announced it too, within
        // each gateway's fetches for the hour.
        let now = ctx.now;
        let gateways = &mut self.gateways;
        self.wanted.retain(|x| {
            x.from
                .iter()
                .any(|(g, _, _)| ctx.gateways[*g].ready && ready(conns, *g).is_some())
        });
        let mut pick = None;
        'wanted: for (i, x) in self.wanted.iter().enumerate() {
            // (A match whose announcers all removed it is kept only while its fetch is in
            // flight; it has none to ask.)
            let mut order: Vec<GatewayId> = x.from.iter().skip(1).map(|(g, _, _)| *g).collect();
            order.extend(x.first());
            for g in order {
                if !ctx.gateways[g].ready || ready(conns, g).is_none() {
                    continue;
                }
                let p = &mut gateways[g.index()];
                if now.0.saturating_sub(p.window.0) >= HOUR {
                    p.window = now;
                    p.fetched = 0;
                }
                if p.fetched < FETCHES_PER_HOUR {
                    pick = Some((i, g));
                    break 'wanted;
                }
            }
        }
        let Some((i, g)) = pick else {
            return Ok(());
        };
        let txid = self.wanted[i].txid;
        let id = self.ids.next_id();
        if let Some(conn) = ready(conns, g) {
            conn.get_mempool_tx(id, txid.0).map_err(|e| (g, e))?;
        }
        self.gateways[g.index()].fetched += 1;
        ctx.timers.touch(TaskId::Mempool, ctx.now);
        self.fetch = Some(Fetch {
            gateway: g,
            id,
            txid,
        });
        Ok(())
    }

    fn deadline(&self, ctx: &Ctx) -> Option<Millis> {
        let fetch = ctx.timers.deadline(TaskId::Mempool, self.fetch.is_some());
        // Matches waiting on a gateway's hourly fetches: when its hour ends.
        let budget = (self.fetch.is_none() && !self.wanted.is_empty())
            .then(|| {
                self.gateways
                    .iter()
                    .filter(|p| p.fetched >= FETCHES_PER_HOUR)
                    .map(|p| Millis(p.window.0 + HOUR))
                    .min()
            })
            .flatten();
        match (fetch, budget) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
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
        // Its strikes and its hour's fetches stay with it (a gateway does not shed them by
        // reconnecting); the rest was its connection's.
        if let Some(p) = self.gateways.get_mut(g.index()) {
            *p = PerGateway {
                strikes: p.strikes,
                fetched: p.fetched,
                window: p.window,
                ..PerGateway::default()
            };
        }
        if self.fetch.as_ref().is_some_and(|f| f.gateway == g) {
            self.fetch = None;
        }
        self.forget(g);
        ctx.effects.push_back(Effect::Unheld { gateway: g });
    }
}
