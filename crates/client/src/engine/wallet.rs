//! The wallet task (see [`crate::wallet`]): what is watched starts the wallet's scan, the
//! scan's matches are fetched one block at a time from a gateway that serves blocks,
//! checked and applied, and the gap limit's new scripts join the scan. The wallet drives
//! its scan: the engine hands it the scan task where it needs one.
//!
//! Several wallets share one scan, each its owner in it ([`WalletId::owner`]): one pass
//! over each filter matches every wallet's scripts, and a block matched for several is
//! fetched once ([`Blocks`]). A wallet that starts again (it watches more, a rescan, an
//! unwatch) takes the scan back to its start for itself alone: the others keep what they
//! found and are matched again only past where the scan stood ([`crate::scan::Scan::rewind`]),
//! so that one going back for the gap limit ([`Again::From`]) finds its blocks in the
//! scan's matches whatever another did meanwhile.
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
use lightwire_wallet::UnconfirmedTx;
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
use crate::wallet::names::{NameError, WalletNames};
use crate::wallet::{
    Again, Applied, NotFound, WalletChange, WalletError, WalletSync, WatchError, Watched,
};

/// The default wallet (the calls without a wallet name are for it).
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
    /// The watch-only wallets, by id (a [`WalletId`]'s index): `None` where there is none.
    wallets: Vec<Option<WalletSync>>,
    /// The names of the wallets but the default one.
    pub names: WalletNames,
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
            wallets: Vec::new(),
            names: WalletNames::default(),
            blocks: Blocks::default(),
            suspect: None,
            retry_at: None,
            waiting: None,
            expiry: UNCONFIRMED_EXPIRY,
        }
    }
}

impl WalletTask {
    /// Wallet `id`, if there is one.
    pub fn get(&self, id: WalletId) -> Option<&WalletSync> {
        self.wallets.get(id.index())?.as_ref()
    }

    /// Wallet `id`, if there is one.
    pub fn get_mut(&mut self, id: WalletId) -> Option<&mut WalletSync> {
        self.wallets.get_mut(id.index())?.as_mut()
    }

    /// The default wallet, if there is one.
    pub fn one(&self) -> Option<&WalletSync> {
        self.get(ONE)
    }

    /// The default wallet, if there is one.
    pub fn one_mut(&mut self) -> Option<&mut WalletSync> {
        self.get_mut(ONE)
    }

    /// The slot of wallet `id` (made).
    fn slot(&mut self, id: WalletId) -> &mut Option<WalletSync> {
        if self.wallets.len() <= id.index() {
            self.wallets.resize_with(id.index() + 1, || None);
        }
        &mut self.wallets[id.index()]
    }

    /// Put `wallet` in as wallet `id` (made before anything is watched, or restored).
    pub fn put(&mut self, id: WalletId, wallet: WalletSync) {
        *self.slot(id) = Some(wallet);
    }

    /// The wallets there are, with their ids.
    pub(super) fn each_mut(&mut self) -> impl Iterator<Item = (WalletId, &mut WalletSync)> {
        self.wallets
            .iter_mut()
            .enumerate()
            .filter_map(|(i, w)| Some((WalletId::new(i)?, w.as_mut()?)))
    }

    /// The wallets there are, with their ids.
    pub(super) fn each(&self) -> impl Iterator<Item = (WalletId, &WalletSync)> {
        self.wallets
            .iter()
            .enumerate()
            .filter_map(|(i, w)| Some((WalletId::new(i)?, w.as_ref()?)))
    }

    /// Whether there is any wallet.
    pub fn any(&self) -> bool {
        self.each().next().is_some()
    }

    /// Unconfirmed transaction `txid` as the first wallet holding it has it.
    pub fn held(&self, txid: &lightwire_primitives::Txid) -> Option<&UnconfirmedTx> {
        self.each().find_map(|(_, w)| w.unconfirmed.get(txid))
    }

    /// A value that changes whenever a wallet changes what it watches, found or holds
    /// unconfirmed, or a wallet comes or goes: the newest of their revisions (a change
    /// gives a wallet a revision no wallet had), and which wallets there are.
    pub fn revision(&self) -> (u64, u64) {
        self.each().fold((0, 0), |(newest, ids), (id, w)| {
            (newest.max(w.revision()), ids | id.owner())
        })
    }

    /// Whether no wallet changed since it was last saved.
    pub fn all_saved(&self) -> bool {
        self.each().all(|(_, w)| !w.dirty)
    }

    /// Whether any wallet watches anything.
    pub fn watching(&self) -> bool {
        self.each().any(|(_, w)| !w.watch.is_empty())
    }

    /// Watch `items` in wallet `id` (made if there is none) from block `from`: the wallet
    /// scans for them (see [`super::Engine::watch`]). `base` is the store's first height.
    pub fn watch(
        &mut self,
        ctx: &mut Ctx,
        scan: &mut ScanTask,
        (id, items): (WalletId, &[Watched]),
        from: u32,
        base: u32,
    ) -> Result<(), WatchError> {
        let network = ctx.params.network;
        let wallet = self
            .slot(id)
            .get_or_insert_with(|| WalletSync::new(network, from));
        let before = wallet.watch.len();
        wallet.watch(items)?;
        let from = wallet.from.min(from);
        if wallet.watch.len() != before || wallet.from != from || !scan.for_wallet {
            // Everything from the start again, with every script: what was found is
            // withdrawn, and found again.
            wallet.from = from;
            self.restart(ctx, scan, id, base);
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

    /// `f` on wallet `id`; with none, on an empty one ([`Self::empty`]) kept only if `f`
    /// succeeds (a refused label makes no wallet).
    pub fn with_wallet<T, E>(
        &mut self,
        ctx: &Ctx,
        id: WalletId,
        f: impl FnOnce(&mut WalletSync) -> Result<T, E>,
    ) -> Result<T, E> {
        if let Some(w) = self.get_mut(id) {
            return f(w);
        }
        let mut w = Self::empty(ctx);
        let done = f(&mut w)?;
        self.put(id, w);
        Ok(done)
    }

    /// Scan the wallet again from `from`, widening its start to it, or from its start
    /// (see [`super::Engine::rescan`]). `base` is the store's first height.
    pub fn rescan(
        &mut self,
        ctx: &mut Ctx,
        scan: &mut ScanTask,
        (id, from): (WalletId, Option<u32>),
        base: u32,
    ) -> Result<(), RescanError> {
        let Some(wallet) = self.get_mut(id).filter(|w| !w.watch.is_empty()) else {
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
        self.restart(ctx, scan, id, base);
        Ok(())
    }

    /// Stop watching `items` (see [`super::Engine::unwatch`]).
    pub fn unwatch(
        &mut self,
        ctx: &mut Ctx,
        scan: &mut ScanTask,
        (id, items): (WalletId, &[Watched]),
        base: u32,
    ) -> Result<(), WatchError> {
        let Some(wallet) = self.get_mut(id) else {
            return Ok(());
        };
        let Some(changes) = wallet.unwatch(items)? else {
            return Ok(());
        };
        // The wallet starts from scratch: nothing of its queue is fetched any more. The
        // block in flight is given up (its answer still comes, and is no fault).
        ctx.give_up_all(self.blocks.withdraw(id, 0));
        self.suspect = None;
        tell(ctx, id, changes);
        self.restart(ctx, scan, id, base);
        Ok(())
    }

    /// The wallet named `name`, made (watching nothing, to be saved) if there is none.
    pub fn named(&mut self, ctx: &Ctx, name: &str) -> Result<WalletId, NameError> {
        let id = self.names.add(name)?;
        if self.get(id).is_none() {
            let mut w = Self::empty(ctx);
            // Its record is written before the names that point to it.
            w.dirty = true;
            self.put(id, w);
        }
        Ok(id)
    }

    /// Wallet `id` goes, with everything it watched and found, and its name; the scan and
    /// the blocks queued go on for the others (nothing is told: the application removed
    /// it).
    pub fn remove(&mut self, ctx: &mut Ctx, scan: &mut ScanTask, id: WalletId) {
        self.names.remove(id);
        if self.slot(id).take().is_none() {
            return;
        }
        ctx.give_up_all(self.blocks.withdraw(id, 0));
        self.suspect = None;
        self.leave_scan(ctx, scan, id);
    }

    /// Wallet `id` (which watches nothing now, or is gone) leaves the wallets' scan; with
    /// no wallet watching anything, the scan stops.
    fn leave_scan(&self, ctx: &mut Ctx, scan: &mut ScanTask, id: WalletId) {
        if !self.watching() && !scan.has_app() {
            scan.drop_wallets(ctx);
        } else if let Some(s) = scan.scan.as_mut().filter(|_| scan.for_wallet) {
            s.remove_owner(id.owner());
        }
    }

    /// Go on with the wallets restored from the store: the blocks their scan matched and
    /// they had not applied are fetched again. If the saved scan does not hold every
    /// wallet's scripts as that wallet's, every wallet scans again from its start (see
    /// below).
    pub fn resume(
        &mut self,
        ctx: &mut Ctx,
        scan: &mut ScanTask,
        wallets: Vec<(WalletId, WalletSync)>,
        base: u32,
    ) {
        for (id, mut wallet) in wallets {
            wallet.dirty = false;
            self.put(id, wallet);
        }
        if let Some(s) = scan.scan.as_ref() {
            for (&(h, hash), &owners) in s.matches().iter().zip(s.match_owners()) {
                let wanted = WalletSet::from_owners(owners)
                    .iter()
                    .filter(|&id| self.get(id).is_some_and(|w| w.wants(h)))
                    .fold(WalletSet::NONE, |a, id| a.with(WalletSet::of(id)));
                // Nothing is in flight yet: nothing to give up. Whose filter matched is
                // not kept with the scan.
                let _ = self.blocks.matched(h, hash, None, wanted);
            }
            // The saved scan feeds the wallets if it watches each one's scripts as its
            // (the wallets' own does; an app's scan() replaced it otherwise).
            scan.for_wallet = self.each().all(|(id, w)| {
                w.watch.scripts().all(|x| {
                    s.scripts()
                        .iter()
                        .zip(s.owners())
                        .any(|(y, o)| y == x && o & id.owner() != 0)
                })
            });
        }
        let paused = !scan.for_wallet && self.each().any(|(_, w)| !w.watch.is_empty());
        if paused {
            // No saved scan matches all of the wallets' scripts: an app's scan() was under
            // way when the client closed (its promise is gone with the page), or the scan
            // and the wallets were saved with scripts derived differently (a machine that
            // computed a wrong key: lightwire_wallet::descriptor). Left so, a wallet
            // would fetch nothing its filters match for good, and say nothing: they scan
            // again, with their own scripts, from their starts.
            self.restart_all(ctx, scan, base);
        }
    }

    /// Whether wallet `id` has matched everything stored and applied every block matched
    /// for it.
    pub fn synced(&self, ctx: &Ctx, scan: &ScanTask, id: WalletId) -> bool {
        scan.for_wallet
            && scan
                .scan
                .as_ref()
                .is_some_and(|s| s.at_tip_for(id.owner(), ctx.stored_filters))
            && self.get(id).is_some()
            && self.blocks.pending_for(id) == 0
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
                let mut done: Vec<(WalletId, Applied)> = Vec::new();
                for (id, w) in self.wallets.iter_mut().enumerate() {
                    let (Some(id), Some(w)) = (WalletId::new(id), w.as_mut()) else {
                        continue;
                    };
                    if wallets.has(id) {
                        done.push((id, w.apply(height, &block)));
                    }
                }
                self.judge(ctx, Some(g), height, best);
                for (id, done) in done {
                    self.applied(ctx, scan, id, done, base);
                }
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

    /// What a block applied to wallet `id` did: events, the scan told of the scripts the
    /// gap limit derived, and what must be done again (see [`crate::wallet`]).
    fn applied(
        &mut self,
        ctx: &mut Ctx,
        scan: &mut ScanTask,
        id: WalletId,
        done: Applied,
        base: u32,
    ) {
        tell(ctx, id, done.changes);
        if !scan.for_wallet {
            return;
        }
        if done.again == Some(Again::Restart) {
            self.restart(ctx, scan, id, base);
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
            s.add_owned(done.derived.into_iter().map(|x| (x, id.owner())));
        }
        if let Some(Again::From(first)) = done.again {
            // A block applied paid a script that has just become the wallet's: the ledger
            // goes back below it and the blocks the scan matched from there are applied
            // again.
            self.again_from(ctx, scan, id, first);
        }
    }

    /// Wallet `id`'s ledger goes back below `first`, and the blocks the scan matched for
    /// it from there are fetched and applied again.
    // Called for a block applied and for one matched late: one copy.
    #[inline(never)]
    fn again_from(&mut self, ctx: &mut Ctx, scan: &ScanTask, id: WalletId, first: u32) {
        let (Some(wallet), Some(s)) = (self.wallets.get_mut(id.index()), scan.scan.as_ref()) else {
            return;
        };
        let Some(wallet) = wallet.as_mut() else {
            return;
        };
        let withdrawn = wallet.withdraw_from(first);
        self.suspect = self.suspect.filter(|s| s.height < first);
        let mut given_up: Vec<GivenUp> = self.blocks.withdraw(id, first).into_iter().collect();
        // Matched again without the gateway whose filter matched: it is no longer known
        // (so not judged for these).
        for (&(h, hash), &owners) in s.matches().iter().zip(s.match_owners()) {
            if h >= first && WalletSet::from_owners(owners).has(id) {
                given_up.extend(self.blocks.matched(h, hash, None, WalletSet::of(id)));
            }
        }
        tell(ctx, id, withdrawn);
        ctx.give_up_all(given_up);
    }

    /// Wallet `id` is scanned again from its start, with every script it derived; the
    /// other wallets keep what they found (see the module documentation). A wallet that
    /// watches nothing leaves the scan.
    fn restart(&mut self, ctx: &mut Ctx, scan: &mut ScanTask, id: WalletId, base: u32) {
        if !scan.for_wallet || scan.scan.is_none() {
            // No scan of the wallets' under way (an app's scan() replaced it): all of them
            // start again, in one scan.
            self.restart_all(ctx, scan, base);
            return;
        }
        let Some(wallet) = self.get_mut(id) else {
            return;
        };
        let withdrawn = wallet.restart();
        let from = wallet.from;
        let scripts: Vec<Vec<u8>> = wallet.watch.scripts().map(<[u8]>::to_vec).collect();
        let gave_up = self.blocks.withdraw(id, from);
        self.suspect = None;
        tell(ctx, id, withdrawn);
        ctx.give_up_all(gave_up);
        if scripts.is_empty() {
            self.leave_scan(ctx, scan, id);
        } else {
            scan.rewind(ctx, id.owner(), (scripts, from), base);
        }
    }

    /// Every wallet is scanned again from its start, in one scan replacing any under way
    /// (none is started when none watches anything).
    fn restart_all(&mut self, ctx: &mut Ctx, scan: &mut ScanTask, base: u32) {
        if !self.watching() {
            return;
        }
        if !scan.for_wallet || scan.scan.is_none() {
            // A scan of owners unknown (restored from an older session) is replaced by an
            // empty one; the shared scan is kept (the application's scripts stay in it).
            scan.start(ctx, Vec::new(), u32::MAX, base);
            scan.for_wallet = true;
        }
        // Each wallet taken back to its start in it.
        for id in (0..self.wallets.len()).filter_map(WalletId::new) {
            self.restart(ctx, scan, id, base);
        }
    }

    /// The wallet's scan matched a block for `wallets`, by a filter gateway `voucher`
    /// served (when known): the wallet fetches it if it is one of them. A block below
    /// what the wallet applied (a contested block matched late, see
    /// [`crate::dispute::Contested`]) takes the ledger back below it, and what the scan
    /// matched from there is applied again, in order.
    #[inline(never)]
    pub fn matched(
        &mut self,
        ctx: &mut Ctx,
        scan: &ScanTask,
        (height, hash, wallets): (u32, BlockHash, WalletSet),
        voucher: Option<GatewayId>,
    ) {
        let mut wanted = WalletSet::NONE;
        for id in wallets.iter() {
            match self.get(id).map(|w| w.wants(height)) {
                Some(true) => wanted = wanted.with(WalletSet::of(id)),
                Some(false) if scan.for_wallet => self.again_from(ctx, scan, id, height),
                _ => {}
            }
        }
        if let Some((g, id)) = self.blocks.matched(height, hash, voucher, wanted) {
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
            .get_mut(ONE)
            .filter(|w| scanning && w.from <= height && !w.watch.is_empty())
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
                s.add_owned(new.into_iter().map(|x| (x, ONE.owner())));
            }
            if passed {
                // Scanned from there without them: again from there, with them (the other
                // wallets keep what they found).
                scan.back_to(ctx, ONE.owner(), height);
                let withdrawn = wallet.withdraw_from(height);
                let gave_up = self.blocks.withdraw(ONE, height);
                self.suspect = self.suspect.filter(|s| s.height < height);
                tell(ctx, ONE, withdrawn);
                ctx.give_up_all(gave_up);
            }
            return;
        }
        // A silent-payment output always watches.
        let _ = self.watch(ctx, scan, (ONE, &items), height, base);
    }

    /// A reorganisation at `fork`: what the wallets found above it is withdrawn.
    pub fn reorg(&mut self, ctx: &mut Ctx, fork: u32) {
        self.forget_suspect_from(fork.saturating_add(1));
        let now = ctx.now.0;
        for (id, w) in self.each_mut() {
            tell(ctx, id, w.reorg(fork, now));
        }
        let gave_up = fork
            .checked_add(1)
            .and_then(|first| self.blocks.withdraw_all(first));
        ctx.give_up_all(gave_up);
    }

    /// Transaction `raw` was broadcast and the gateways `holders` passed it to their
    /// nodes: it is an unconfirmed transaction of each wallet it touches (one that does
    /// not, or that a confirmed transaction conflicts, is not a wallet's to show).
    pub fn broadcast(&mut self, ctx: &mut Ctx, raw: &[u8], holders: u64) {
        let now = ctx.now.0;
        for (id, w) in self.each_mut() {
            if let Ok(c) = w.add_unconfirmed(raw, Source::Own, now, holders) {
                tell(ctx, id, c);
            }
        }
    }

    /// Gateway `g` is gone: it holds none of the unconfirmed transactions now.
    pub fn unheld(&mut self, ctx: &mut Ctx, g: GatewayId) {
        for (id, w) in self.each_mut() {
            tell(ctx, id, w.forget_holder(g.bit()));
        }
    }

    /// When the next unconfirmed transaction of any wallet expires, if one can.
    fn expires_at(&self) -> Option<Millis> {
        let expiry = self.expiry.as_millis() as u64;
        self.each()
            .filter_map(|(_, w)| w.unconfirmed.next_expiry(expiry))
            .min()
            .map(Millis)
    }

    /// Where the default wallet's block fetching stands (see [`WalletTrace`]), when there
    /// is one.
    pub fn trace(&self, ctx: &Ctx, scan: &ScanTask) -> Option<WalletTrace> {
        let w = self.one()?;
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

/// The application hears of what wallet `id` found, lost, took or dropped.
pub(super) fn tell(ctx: &mut Ctx, id: WalletId, changes: impl IntoIterator<Item = WalletChange>) {
    ctx.events
        .extend(changes.into_iter().map(|c| Event::Wallet(id, c)));
}

impl Task for WalletTask {
    /// Ask for the next matched block, from a gateway that serves blocks (the one the
    /// scan asks first: its filter matched). `Err` names a gateway whose connection broke.
    fn schedule(&mut self, ctx: &mut Ctx, conns: &mut Conns, view: &View) -> Result<(), Broke> {
        let scan_gateway = view.scan_gateway;
        if !self.any() || ctx.stopped {
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
        if self.expires_at().is_some_and(|t| t <= now) {
            let expiry = self.expiry.as_millis() as u64;
            for (id, w) in self.each_mut() {
                tell(ctx, id, w.expire_unconfirmed(now.0, expiry));
            }
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
