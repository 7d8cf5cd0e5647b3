//! The wallet task (see [`crate::wallet`]): what is watched starts the wallet's scan, the
//! scan's matches are fetched one block at a time from a gateway that serves blocks,
//! checked and applied, and the gap limit's new scripts join the scan. The wallet drives
//! its scan: the engine hands it the scan task where it needs one.
//!
//! A block a gateway answers `not_found` for is asked of the next gateway; once every one
//! connected has said so, all are asked again after [`BLOCK_RETRY`] (a reorganisation
//! meanwhile withdraws the block): a bounded retry, never a stall on one gateway, and no
//! fault in itself. The gateway whose filter matched the block is judged when the block
//! comes from another, or when it says `not_found` again after the retry wait (no other
//! gateway has the block): if the tip it announces then still holds the block, it withheld
//! it.

use core::time::Duration;

use lightwire_chain::BlockHash;
use lightwire_proto::Millis;
use lightwire_proto::time::earliest;
use lightwire_wallet::unconfirmed::Source;
use lightwire_wire::BlockPiece;

use super::ctx::{Broke, Conns, Ctx};
use super::event::Event;
use super::scan::ScanTask;
use super::task::{Task, View, timeout};
use crate::ids::{GatewayId, GivenUp, TaskId};
use crate::reason::DropReason;
use crate::sync::Syncer;
use crate::wallet::blocks::{Blocks, Fetched, WalletId, WalletSet};
use crate::wallet::{
    Again, Applied, NotFound, WalletChange, WalletError, WalletSync, WatchError, Watched,
};

/// The one wallet the engine keeps today (its id in the block queue).
const ONE: WalletId = WalletId::DEFAULT;

/// How long a block every connected gateway answered `not_found` for waits before they
/// are all asked again.
pub const BLOCK_RETRY: Duration = Duration::from_secs(10);

/// How long a matched block may wait with no gateway asked for it before the wallet says
/// why ([`Event::WalletWaiting`]): a block the wallet's filters matched is asked of a
/// gateway at once, or the application hears why not.
pub const WAIT_REPORT: Duration = Duration::from_secs(10);

/// Why a matched block is not being fetched ([`Event::WalletWaiting`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WaitReason {
    /// No connected gateway serves blocks (none is connected, or none has the feature):
    /// it is asked as soon as one is.
    NoGateway,
    /// Every connected gateway that serves blocks said it lacks the block: they are all
    /// asked again every [`BLOCK_RETRY`].
    NotFound,
}

impl WaitReason {
    /// Its name for the application.
    pub fn name(self) -> &'static str {
        match self {
            WaitReason::NoGateway => "no-gateway",
            WaitReason::NotFound => "not-found",
        }
    }
}

/// A matched block at the front of the wallet's queue that no gateway is being asked for.
#[derive(Clone, Copy, Debug)]
struct Waiting {
    height: u32,
    since: Millis,
    /// The application was told (once for each block).
    told: bool,
}

/// How long an unconfirmed transaction no gateway is known to hold is kept unmined, by
/// default: two weeks, Bitcoin Core's mempool expiry (`-mempoolexpiry=336` hours).
pub const UNCONFIRMED_EXPIRY: Duration = Duration::from_secs(336 * 3600);

/// Where the wallet's block fetching stands: what a stall report shows (the page's
/// `metrics().wallet`), so that a wallet that stopped fetching says why.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct WalletTrace {
    /// Whether the scan under way is the wallet's (its matches are fetched).
    pub scan_for_wallet: bool,
    /// Scripts the wallet watches, and scripts its scan matches.
    pub scripts: (usize, usize),
    /// The highest block applied to the ledger.
    pub applied: Option<u32>,
    /// Blocks matched and not applied yet.
    pub pending_blocks: usize,
    /// The next block to apply.
    pub front: Option<u32>,
    /// The gateway its request is in flight to, and the request's id.
    pub asked: Option<(GatewayId, u32)>,
    /// Gateways that failed the block at the front.
    pub tried: usize,
    /// When the block every gateway failed is asked again.
    pub retry_at: Option<Millis>,
    /// When the request in flight times out (or the retry is due, or an unconfirmed
    /// transaction expires): the wallet task's deadline.
    pub deadline: Option<Millis>,
}

/// Why a rescan was refused ([`WalletTask::rescan`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum RescanError {
    /// Nothing is watched: there is nothing to scan for.
    #[error("no wallet: watch something first")]
    NothingWatched,
    /// A start after the wallet's own: a rescan widens the wallet's history, it never
    /// narrows it (what was found before that height would be kept unchecked).
    #[error("a rescan starts at or below the wallet's start (block {start})")]
    AfterStart {
        /// The wallet's start.
        start: u32,
    },
}

/// The wallet task's state.
pub struct WalletTask {
    /// The watch-only wallet, once something is watched.
    pub wallet: Option<WalletSync>,
    /// The blocks its scan matched, fetched one at a time.
    pub blocks: Blocks,
    /// The gateway that vouched for the block at the front (its filter matched it) and
    /// answered `not_found`: judged when the block comes from another.
    suspect: Option<NotFound>,
    /// When the block every gateway answered `not_found` for is asked again.
    retry_at: Option<Millis>,
    /// The block at the front waiting for a gateway to ask, since when.
    waiting: Option<Waiting>,
    /// How long an unconfirmed transaction no gateway holds is kept unmined.
    pub expiry: Duration,
}

impl Default for WalletTask {
    fn default() -> WalletTask {
        WalletTask {
            wallet: None,
            blocks: Blocks::default(),
            suspect: None,
            retry_at: None,
            waiting: None,
            expiry: UNCONFIRMED_EXPIRY,
        }
    }
}

impl WalletTask {
    /// Watch `items` from block `from`: the wallet scans for them (see
    /// [`super::Engine::watch`]). `base` is the store's first height.
    pub fn watch(
        &mut self,
        ctx: &mut Ctx,
        scan: &mut ScanTask,
        items: &[Watched],
        from: u32,
        base: u32,
    ) -> Result<(), WatchError> {
        let network = ctx.params.network;
        let wallet = self
            .wallet
            .get_or_insert_with(|| WalletSync::new(network, from));
        let before = wallet.watch.len();
        wallet.watch(items)?;
        let from = wallet.from.min(from);
        if wallet.watch.len() != before || wallet.from != from || !scan.for_wallet {
            // Everything from the start again, with every script: what was found is
            // withdrawn, and found again.
            wallet.from = from;
            self.restart(ctx, scan, base);
        }
        Ok(())
    }

    /// A wallet watching nothing yet, for what arrives before anything is watched (a
    /// receiver's unconfirmed payments, labels): one watched later scans from its own
    /// start.
    pub fn empty(ctx: &Ctx) -> WalletSync {
        let from = ctx.stored_filters.map_or(u32::MAX, |h| h.saturating_add(1));
        WalletSync::new(ctx.params.network, from)
    }

    /// `f` on the wallet; with none, on an empty one ([`Self::empty`]) kept only if `f`
    /// succeeds (a refused label makes no wallet).
    pub fn with_wallet<T, E>(
        &mut self,
        ctx: &Ctx,
        f: impl FnOnce(&mut WalletSync) -> Result<T, E>,
    ) -> Result<T, E> {
        if let Some(w) = self.wallet.as_mut() {
            return f(w);
        }
        let mut w = Self::empty(ctx);
        let done = f(&mut w)?;
        self.wallet = Some(w);
        Ok(done)
    }

    /// Scan the wallet again from `from`, widening its start to it, or from its start
    /// (see [`super::Engine::rescan`]). `base` is the store's first height.
    pub fn rescan(
        &mut self,
        ctx: &mut Ctx,
        scan: &mut ScanTask,
        from: Option<u32>,
        base: u32,
    ) -> Result<(), RescanError> {
        let Some(wallet) = self.wallet.as_mut().filter(|w| !w.watch.is_empty()) else {
            return Err(RescanError::NothingWatched);
        };
        if let Some(from) = from {
            if from > wallet.from {
                return Err(RescanError::AfterStart { start: wallet.from });
            }
            // Saved with the wallet (restart marks it changed): a reload goes on from the
            // widened start.
            wallet.from = from;
        }
        self.restart(ctx, scan, base);
        Ok(())
    }

    /// Stop watching `items` (see [`super::Engine::unwatch`]).
    pub fn unwatch(
        &mut self,
        ctx: &mut Ctx,
        scan: &mut ScanTask,
        items: &[Watched],
        base: u32,
    ) -> Result<(), WatchError> {
        let Some(wallet) = self.wallet.as_mut() else {
            return Ok(());
        };
        let Some(changes) = wallet.unwatch(items)? else {
            return Ok(());
        };
        // The wallet starts from scratch: nothing of its queue is fetched any more. The
        // block in flight is given up (its answer still comes, and is no fault).
        ctx.give_up_all(self.blocks.withdraw(ONE, 0));
        self.suspect = None;
        tell(ctx, changes);
        let scripts: Vec<Vec<u8>> = wallet.watch.scripts().map(<[u8]>::to_vec).collect();
        if scripts.is_empty() {
            scan.drop_wallets(ctx);
        } else {
            scan.start(ctx, scripts, wallet.from, base);
            scan.for_wallet = true;
        }
        Ok(())
    }

    /// Go on with a wallet restored from the store: the blocks its scan matched and it
    /// had not applied are fetched again. A wallet that watches something and finds no
    /// saved scan of all its scripts scans again from its start (see below).
    pub fn resume(
        &mut self,
        ctx: &mut Ctx,
        scan: &mut ScanTask,
        mut wallet: WalletSync,
        base: u32,
    ) {
        if let Some(s) = scan.scan.as_ref() {
            for (&(h, hash), &owners) in s.matches().iter().zip(s.match_owners()) {
                if wallet.wants(h) && WalletSet::from_owners(owners).has(ONE) {
                    // Nothing is in flight yet: nothing to give up. Whose filter matched is
                    // not kept with the scan.
                    let _ = self.blocks.matched(h, hash, None, WalletSet::of(ONE));
                }
            }
            // The saved scan feeds the wallet if it watches all the wallet's scripts (the
            // wallet's own does; an app's scan() replaced it otherwise).
            scan.for_wallet = wallet
                .watch
                .scripts()
                .all(|x| s.scripts().iter().any(|y| y == x));
        }
        wallet.dirty = false;
        let paused = !scan.for_wallet && !wallet.watch.is_empty();
        self.wallet = Some(wallet);
        if paused {
            // No saved scan matches all of the wallet's scripts: an app's scan() was under
            // way when the client closed (its promise is gone with the page), or the scan
            // and the wallet were saved with scripts derived differently (a machine that
            // computed a wrong key: lightwire_wallet::descriptor). Left so, the wallet
            // would fetch nothing its filters match for good, and say nothing: it scans
            // again, with its own scripts, from its start.
            self.restart(ctx, scan, base);
        }
    }

    /// Whether the wallet has matched everything stored and applied every block matched.
    pub fn synced(&self, ctx: &Ctx, scan: &ScanTask) -> bool {
        scan.for_wallet
            && scan.at_tip(ctx)
            && self.wallet.is_some()
            && self.blocks.pending_for(ONE) == 0
    }

    /// A `block` message for the wallet; `best` holds the best chain (where a suspect's
    /// tip is looked up).
    pub fn on_block(
        &mut self,
        ctx: &mut Ctx,
        scan: &mut ScanTask,
        g: GatewayId,
        p: &BlockPiece<'_>,
        (base, best): (u32, &Syncer),
    ) -> Result<(), DropReason> {
        if self.blocks.asked() != Some((g, p.id)) {
            return ctx.given_up_answer(g, p.id, p.last);
        }
        ctx.timers.touch(TaskId::Wallet, ctx.now);
        match self.blocks.on_piece(p) {
            Ok(Fetched::More) => Ok(()),
            Ok(Fetched::Whole {
                height,
                block,
                wallets,
            }) => {
                let done = match self.wallet.as_mut() {
                    Some(w) if wallets.has(ONE) => w.apply(height, &block),
                    _ => Applied {
                        height,
                        changes: Vec::new(),
                        derived: Vec::new(),
                        again: None,
                    },
                };
                self.judge(ctx, Some(g), height, best);
                self.applied(ctx, scan, done, base);
                Ok(())
            }
            Ok(Fetched::NotFound(n)) => {
                if n.vouched {
                    // Said again after the retry wait: a reorganisation that explained the
                    // first would have been announced by now.
                    let again = self.suspect == Some(n);
                    self.suspect = Some(n);
                    if again {
                        self.judge(ctx, None, n.height, best);
                    }
                }
                Ok(())
            }
            Err(e) => Err(DropReason::Wallet(e)),
        }
    }

    /// Block `height` came from gateway `from` (or, with `None`, its suspect said
    /// `not_found` for it a second time, after the retry wait): a suspect that answered
    /// `not_found` for it withheld it if its announced tip still holds the block (it is on
    /// our best chain, at the block's height or above). A tip elsewhere may be the
    /// reorganisation that took it (an honest race; its `not_found` may come before its
    /// new tip).
    fn judge(&mut self, ctx: &mut Ctx, from: Option<GatewayId>, height: u32, best: &Syncer) {
        let Some(s) = self.suspect.filter(|s| s.height == height) else {
            return;
        };
        self.suspect = None;
        let gw = &ctx.gateways[s.gateway];
        let holds = gw.tip.is_some_and(|(_, header, _)| {
            best.height_on_best(&header.block_hash())
                .is_some_and(|h| h >= height)
        });
        if from != Some(s.gateway) && gw.ready && holds {
            ctx.drop_later(
                s.gateway,
                DropReason::Wallet(WalletError::Withheld { height }),
            );
        }
    }

    /// Forget a suspect whose block is no longer to be fetched (from `first` on).
    fn forget_suspect_from(&mut self, first: u32) {
        self.suspect = self.suspect.filter(|s| s.height < first);
    }

    /// What a block applied to the wallet did: events, the scan told of the scripts the
    /// gap limit derived, and what must be done again (see [`crate::wallet`]).
    fn applied(&mut self, ctx: &mut Ctx, scan: &mut ScanTask, done: Applied, base: u32) {
        tell(ctx, done.changes);
        if !scan.for_wallet {
            return;
        }
        if done.again == Some(Again::Restart) {
            self.restart(ctx, scan, base);
            return;
        }
        if let Some(s) = scan.scan.as_mut()
            && !done.derived.is_empty()
        {
            // Matched from the scan's next filter on, not from this block: the scan may be
            // far ahead, and going back for each block applied would fetch its filters
            // again and again. Nothing is lost: a script derived after the scan started is
            // not covered, and if it becomes the wallet's, the wallet scans again from its
            // start (Again::Restart).
            s.add_scripts(done.derived);
        }
        if let Some(Again::From(first)) = done.again {
            // A block applied paid a script that has just become the wallet's: the ledger
            // goes back below it and the blocks the scan matched from there are applied
            // again.
            self.again_from(ctx, scan, first);
        }
    }

    /// The ledger goes back below `first`, and the blocks the scan matched from there are
    /// fetched and applied again.
    fn again_from(&mut self, ctx: &mut Ctx, scan: &ScanTask, first: u32) {
        let (Some(wallet), Some(s)) = (self.wallet.as_mut(), scan.scan.as_ref()) else {
            return;
        };
        let withdrawn = wallet.withdraw_from(first);
        self.suspect = self.suspect.filter(|s| s.height < first);
        let mut given_up: Vec<GivenUp> = self.blocks.withdraw(ONE, first).into_iter().collect();
        // Matched again without the gateway whose filter matched: it is no longer known
        // (so not judged for these).
        for (&(h, hash), &owners) in s.matches().iter().zip(s.match_owners()) {
            if h >= first && WalletSet::from_owners(owners).has(ONE) {
                given_up.extend(self.blocks.matched(h, hash, None, WalletSet::of(ONE)));
            }
        }
        tell(ctx, withdrawn);
        ctx.give_up_all(given_up);
    }

    /// The wallet is scanned again from its start, with every script it derived.
    fn restart(&mut self, ctx: &mut Ctx, scan: &mut ScanTask, base: u32) {
        let Some(wallet) = self.wallet.as_mut() else {
            return;
        };
        let withdrawn = wallet.restart();
        let gave_up = self.blocks.withdraw(ONE, wallet.from);
        let scripts: Vec<Vec<u8>> = wallet.watch.scripts().map(<[u8]>::to_vec).collect();
        let from = wallet.from;
        self.suspect = None;
        tell(ctx, withdrawn);
        ctx.give_up_all(gave_up);
        scan.start(ctx, scripts, from, base);
        scan.for_wallet = true;
    }

    /// The wallet's scan matched a block for `wallets`, by a filter gateway `voucher`
    /// served (when known): the wallet fetches it if it is one of them. A block below
    /// what the wallet applied (a contested block matched late, see
    /// [`crate::dispute::Contested`]) takes the ledger back below it, and what the scan
    /// matched from there is applied again, in order.
    pub fn matched(
        &mut self,
        ctx: &mut Ctx,
        scan: &ScanTask,
        (height, hash, wallets): (u32, BlockHash, WalletSet),
        voucher: Option<GatewayId>,
    ) {
        let Some(w) = self.wallet.as_mut().filter(|_| wallets.has(ONE)) else {
            return;
        };
        if !w.wants(height) {
            if scan.for_wallet {
                self.again_from(ctx, scan, height);
            }
            return;
        }
        if let Some((g, id)) = self
            .blocks
            .matched(height, hash, voucher, WalletSet::of(ONE))
        {
            ctx.give_up(g, id);
        }
    }

    /// The silent-payment scan found `payments` in block `height`: their taproot scripts
    /// are watched from there (the wallet made from that block if it watched nothing), so
    /// that each is a coin like any other, its spend found as any coin's, with the tweak
    /// that spends it (saved with the wallet). `base`: the store's first height.
    ///
    /// A payment's key is in no block before the one that pays it (it is derived from
    /// that transaction's inputs), so a wallet scanning already goes back only to that
    /// block: the scripts join its scan, and what it scanned from the block on is scanned
    /// again (applied again, with the coins), not everything from the wallet's start.
    pub fn silent_found(
        &mut self,
        ctx: &mut Ctx,
        scan: &mut ScanTask,
        (height, payments, spend, origin): (
            u32,
            &[lightwire_wallet::silent_block::Payment],
            [u8; 33],
            Option<lightwire_wallet::descriptor::KeyOrigin>,
        ),
        base: u32,
    ) {
        let items: Vec<Watched> = payments
            .iter()
            .map(|p| Watched::Silent {
                key: p.found.key,
                tweak: p.found.tweak,
                label: p.found.label,
                spend,
                origin: origin.clone(),
            })
            .collect();
        let scanning = scan.for_wallet && scan.scan.is_some();
        if let Some(wallet) = self
            .wallet
            .as_mut()
            .filter(|w| scanning && w.from <= height)
        {
            // The payments' scripts the wallet does not watch yet (not a copy of all it
            // does).
            let new: Vec<Vec<u8>> = payments
                .iter()
                .map(|p| [&[0x51, 0x20][..], &p.found.key].concat())
                .filter(|s| wallet.watch.origin(s).is_none())
                .collect();
            // A silent-payment output always watches.
            if wallet.watch(&items).is_err() {
                return;
            }
            if new.is_empty() {
                return;
            }
            let passed = scan.scan.as_ref().is_some_and(|s| s.next() > height);
            if let Some(s) = scan.scan.as_mut() {
                s.add_scripts(new);
            }
            if passed {
                // Scanned from there without them: again from there, with them.
                scan.drop_from(ctx, height);
                let withdrawn = wallet.withdraw_from(height);
                let gave_up = self.blocks.withdraw(ONE, height);
                self.suspect = self.suspect.filter(|s| s.height < height);
                tell(ctx, withdrawn);
                ctx.give_up_all(gave_up);
            }
            return;
        }
        // A silent-payment output always watches.
        let _ = self.watch(ctx, scan, &items, height, base);
    }

    /// A reorganisation at `fork`: what the wallet found above it is withdrawn.
    pub fn reorg(&mut self, ctx: &mut Ctx, fork: u32) {
        self.forget_suspect_from(fork.saturating_add(1));
        let Some(w) = self.wallet.as_mut() else {
            return;
        };
        let changes = w.reorg(fork, ctx.now.0);
        let gave_up = fork
            .checked_add(1)
            .and_then(|first| self.blocks.withdraw_all(first));
        tell(ctx, changes);
        ctx.give_up_all(gave_up);
    }

    /// Transaction `raw` was broadcast and the gateways `holders` passed it to their
    /// nodes: it is the wallet's unconfirmed transaction if it touches the wallet (one
    /// that does not, or that a confirmed transaction conflicts, is not the wallet's to
    /// show).
    pub fn broadcast(&mut self, ctx: &mut Ctx, raw: &[u8], holders: u64) {
        let Some(w) = self.wallet.as_mut() else {
            return;
        };
        if let Ok(changes) = w.add_unconfirmed(raw, Source::Own, ctx.now.0, holders) {
            tell(ctx, changes);
        }
    }

    /// Gateway `g` is gone: it holds none of the unconfirmed transactions now.
    pub fn unheld(&mut self, ctx: &mut Ctx, g: GatewayId) {
        if let Some(w) = self.wallet.as_mut() {
            tell(ctx, w.forget_holder(g.bit()));
        }
    }

    /// When the next unconfirmed transaction expires, if one can.
    fn expires_at(&self) -> Option<Millis> {
        let w = self.wallet.as_ref()?;
        w.unconfirmed
            .next_expiry(self.expiry.as_millis() as u64)
            .map(Millis)
    }

    /// Where its block fetching stands (see [`WalletTrace`]), when a wallet is watched.
    pub fn trace(&self, ctx: &Ctx, scan: &ScanTask) -> Option<WalletTrace> {
        let w = self.wallet.as_ref()?;
        Some(WalletTrace {
            scan_for_wallet: scan.for_wallet,
            scripts: (
                w.watch.len(),
                scan.scan.as_ref().map_or(0, |s| s.scripts().len()),
            ),
            applied: w.ledger.tip(),
            pending_blocks: self.blocks.pending_for(ONE),
            front: self.blocks.front(),
            asked: self.blocks.asked(),
            tried: self.blocks.tried_count(),
            retry_at: self.retry_at,
            deadline: self.deadline(ctx),
        })
    }

    /// When the block waiting for a gateway is to be reported, unless it was.
    fn report_at(&self) -> Option<Millis> {
        self.waiting
            .filter(|w| !w.told)
            .map(|w| w.since + WAIT_REPORT)
    }

    /// The application hears that the block at the front has waited [`WAIT_REPORT`] with
    /// no gateway asked for it, and why.
    fn report(&mut self, ctx: &mut Ctx) {
        let Some(waiting) = self.waiting.as_mut() else {
            return;
        };
        waiting.told = true;
        let reason = if self.blocks.all_tried() {
            WaitReason::NotFound
        } else {
            WaitReason::NoGateway
        };
        ctx.events.push_back(Event::WalletWaiting {
            height: waiting.height,
            reason,
        });
    }

    /// The gateway asked for a block, if one is.
    pub fn asked(&self) -> Option<GatewayId> {
        self.blocks.asked().map(|(g, _)| g)
    }
}

/// The application hears of what the wallet found or lost.
fn tell(ctx: &mut Ctx, changes: Vec<WalletChange>) {
    ctx.events.extend(changes.into_iter().map(Event::Wallet));
}

impl Task for WalletTask {
    /// Ask for the next matched block, from a gateway that serves blocks (the one the
    /// scan asks first: its filter matched). `Err` names a gateway whose connection broke.
    fn schedule(&mut self, ctx: &mut Ctx, conns: &mut Conns, view: &View) -> Result<(), Broke> {
        let scan_gateway = view.scan_gateway;
        if self.wallet.is_none() || ctx.stopped {
            return Ok(());
        }
        let blocks = &mut self.blocks;
        let gateways = &ctx.gateways;
        let usable = |g: GatewayId, tried: &[GatewayId]| {
            gateways[g].ready
                && !tried.contains(&g)
                && conns[g]
                    .as_ref()
                    .is_some_and(|p| p.is_ready() && p.serves_blocks())
        };
        let front = blocks.front();
        if self.waiting.is_some_and(|w| Some(w.height) != front) {
            // The block waited for was applied or withdrawn.
            self.waiting = None;
        }
        let Some((g, id, hash)) = blocks.next_fetch(|tried| {
            scan_gateway
                .filter(|&g| usable(g, tried))
                .or_else(|| gateways.ids().find(|&g| usable(g, tried)))
        }) else {
            if blocks.all_tried() && self.retry_at.is_none() {
                self.retry_at = Some(ctx.now + BLOCK_RETRY);
            }
            if let (Some(height), None, None) = (front, blocks.asked(), self.waiting) {
                self.waiting = Some(Waiting {
                    height,
                    since: ctx.now,
                    told: false,
                });
            }
            return Ok(());
        };
        self.retry_at = None;
        ctx.timers.touch(TaskId::Wallet, ctx.now);
        let Some(conn) = conns[g].as_mut() else {
            return Ok(());
        };
        if let Err(e) = conn.request_block(id, hash) {
            blocks.gateway_gone(g);
            return Err((g, e));
        }
        Ok(())
    }

    /// The block request's wait, or the retry of a block every gateway said it lacks, or
    /// the report of a block no gateway is asked for; and the next unconfirmed
    /// transaction's expiry.
    fn deadline(&self, ctx: &Ctx) -> Option<Millis> {
        let blocks = match self.asked() {
            Some(_) => ctx.timers.deadline(TaskId::Wallet, true),
            None => earliest(self.retry_at, self.report_at()),
        };
        earliest(blocks, self.expires_at())
    }

    /// A block request without progress drops its gateway; a retry due asks every gateway
    /// again (the next schedule); unconfirmed transactions due expire.
    fn timed_out(&mut self, ctx: &mut Ctx) -> Vec<(GatewayId, DropReason)> {
        let now = ctx.now;
        if self.expires_at().is_some_and(|t| t <= now)
            && let Some(w) = self.wallet.as_mut()
        {
            let changes = w.expire_unconfirmed(now.0, self.expiry.as_millis() as u64);
            tell(ctx, changes);
        }
        if let Some(g) = self.asked() {
            if ctx
                .timers
                .deadline(TaskId::Wallet, true)
                .is_some_and(|d| d <= now)
            {
                return vec![timeout(g)];
            }
        } else {
            if self.report_at().is_some_and(|t| t <= now) {
                self.report(ctx);
            }
            if self.retry_at.is_some_and(|t| t <= now) {
                self.retry_at = None;
                self.blocks.try_again();
            }
        }
        Vec::new()
    }

    fn gateway_gone(&mut self, _: &mut Ctx, g: GatewayId) {
        self.blocks.gateway_gone(g);
    }
}
