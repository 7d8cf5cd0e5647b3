//! The scan task: a rescan of scripts over the stored filter headers (see [`crate::scan`]),
//! its filters asked of a gateway known to agree with our filter headers, each match told
//! to the application and, when the scan is the wallet's, to the wallet.
//!
//! Where a mirror's filters file holds the next block, and our filter headers reach its
//! end, the file is read instead (`mirror.rs`): its filters are checked against our
//! filter headers exactly as a gateway's, and a file that fails drops its mirror, the
//! gateways then asked from where the scan stands. While a mirror's manifest is read (at
//! most 10 s), no gateway is asked.

use lightwire_proto::Millis;
use lightwire_wire::Filters;

use super::ctx::{Broke, Conns, Ctx, Effect, ready};
use super::event::Event;
use super::mirror::{Kind, MirrorFault, MirrorId};
use super::task::{Task, View, timeout};
use crate::ids::{GatewayId, GivenUp, TaskId};
use crate::reason::DropReason;
use crate::scan::{Owners, Scan, ScanChange};
use lightwire_chain::BlockHash;

/// The owner of the application's scripts (`scan()`) in the scan the wallets share: the
/// last owner bit, which no wallet has (`crate::wallet::names` gives ids below it).
pub const APP: Owners = 1 << 63;

/// The scan task's state.
#[derive(Default)]
pub struct ScanTask {
    /// The rescan, if one was started.
    pub scan: Option<Scan>,
    /// Whether the scan under way is the shared one, of the wallets and the application's
    /// `scan()` (each an owner); not a scan restored of owners unknown.
    pub for_wallet: bool,
    /// The wallet's scan was dropped (nothing left to watch): its saved state goes.
    pub dropped: bool,
}

impl ScanTask {
    /// Start a rescan of `scripts` from block `from`, replacing any under way. A store
    /// started from a checkpoint at `base` holds no filter header below it: its first
    /// block's filter cannot be checked, so a scan starts after it.
    pub fn start(&mut self, ctx: &mut Ctx, scripts: Vec<Vec<u8>>, from: u32, base: u32) {
        if let Some(old) = self.scan.as_mut() {
            Self::abandon(ctx, old);
        }
        let from = clamp(from, base);
        let mut scan = Scan::new(scripts, from);
        // Nothing is scanned yet: each contested block the scan will reach is matched by
        // the other gateway's filter too.
        for c in &ctx.contested {
            scan.contest(c);
        }
        self.scan = Some(scan);
        ctx.timers.touch(TaskId::Scan, ctx.now);
        self.for_wallet = false;
    }

    /// One owner of the wallets' scan under way is scanned again from `from` with
    /// `scripts` (see [`Scan::rewind`]): the others keep what they found.
    pub fn rewind(
        &mut self,
        ctx: &mut Ctx,
        owner: Owners,
        (scripts, from): (Vec<Vec<u8>>, u32),
        base: u32,
    ) {
        let Some(scan) = self.scan.as_mut() else {
            return;
        };
        let was = scan.mirror_reading();
        let given_up = scan.rewind(owner, scripts, clamp(from, base));
        ctx.give_up_all(given_up);
        Self::stop_mirror_if_gone(ctx, was, scan);
        self.contest_all(ctx);
        ctx.timers.touch(TaskId::Scan, ctx.now);
    }

    /// One owner of the wallets' scan under way is matched again from `height` (see
    /// [`Scan::back_to`]).
    pub fn back_to(&mut self, ctx: &mut Ctx, owner: Owners, height: u32) {
        let Some(scan) = self.scan.as_mut() else {
            return;
        };
        let was = scan.mirror_reading();
        let given_up = scan.back_to(owner, height);
        ctx.give_up_all(given_up);
        Self::stop_mirror_if_gone(ctx, was, scan);
        self.contest_all(ctx);
    }

    /// Each contested block the scan will reach again is matched by the other gateway's
    /// filter too (a block it passed keeps its match).
    fn contest_all(&mut self, ctx: &mut Ctx) {
        if let Some(scan) = self.scan.as_mut() {
            for c in &ctx.contested {
                if c.height >= scan.next() {
                    scan.contest(c);
                }
            }
        }
    }

    /// The application's `scripts` are scanned from `from`, beside the wallets (one pass
    /// over each filter serves all; the wallets keep what they found): the application's
    /// scan before is replaced.
    pub fn start_app(&mut self, ctx: &mut Ctx, scripts: Vec<Vec<u8>>, from: u32, base: u32) {
        if self.scan.is_none() || !self.for_wallet {
            self.start(ctx, Vec::new(), u32::MAX, base);
            self.for_wallet = true;
        }
        self.rewind(ctx, APP, (scripts, from), base);
    }

    /// Whether the application's scan under way is of `scripts` from `from` (with the
    /// store's `base`).
    pub fn is_for_app(&self, scripts: &[Vec<u8>], from: u32, base: u32) -> bool {
        self.scan
            .as_ref()
            .is_some_and(|s| s.owner_watches(APP, scripts, clamp(from, base)))
    }

    /// Whether the application scans beside the wallets.
    pub fn has_app(&self) -> bool {
        self.scan
            .as_ref()
            .is_some_and(|s| s.all_owners() & APP != 0)
    }

    /// The wallet's scan stops (nothing left to watch): its saved state is removed.
    pub fn drop_wallets(&mut self, ctx: &mut Ctx) {
        if self.for_wallet
            && let Some(mut scan) = self.scan.take()
        {
            Self::abandon(ctx, &mut scan);
        }
        self.for_wallet = false;
        self.dropped = true;
    }

    /// A `filters` message answering the scan.
    pub fn on_filters(
        &mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        m: &Filters<'_>,
    ) -> Result<(), DropReason> {
        let Some(scan) = self.scan.as_mut().filter(|s| s.is_in_flight(g, m.id)) else {
            return ctx.given_up_answer(g, m.id, m.flags.last);
        };
        let before = scan.filters;
        let for_wallet = self.for_wallet;
        // A filter that is not ours, from a gateway in conflict, is taken where it is the
        // one a dispute contested (its block is then matched: fetched and read whole).
        let mut changes = Vec::new();
        let contested = &ctx.contested;
        let in_conflict = ctx.gateways[g].trust.is_conflict();
        let is_contested = |height: u32, hash: &BlockHash, filter: &[u8]| {
            in_conflict
                && contested
                    .iter()
                    .any(|c| (c.height, &c.hash) == (height, hash) && c.filter == filter)
        };
        let result = scan.on_filters(m, is_contested, |c| changes.push(c));
        let app = scan.all_owners() & APP != 0;
        for c in changes {
            changed(ctx, c, for_wallet, app);
        }
        if scan.filters > before {
            ctx.timers.touch(TaskId::Scan, ctx.now);
            ctx.gateways[g].scan.delivered();
            // Those that said these blocks were not on their chain had less than it did.
            for s in scan.shown_refused(g) {
                ctx.gateways[s].scan.strike(ctx.now);
            }
        }
        match result {
            Ok(given_up) => {
                ctx.give_up_all(given_up);
                Ok(())
            }
            Err(e) => {
                // The gateway is dropped: what it still sends is not read.
                scan.abandon().for_each(drop);
                Err(DropReason::Scan(e))
            }
        }
    }

    /// Report a scan that has matched everything stored.
    pub fn check_reached(&mut self, ctx: &mut Ctx) {
        if let Some(scan) = self.scan.as_mut()
            && scan.reached(ctx.stored_filters)
        {
            // The application's matches, when it scans beside the wallets.
            let matches = match scan.all_owners() & APP {
                0 => scan.matches().to_vec(),
                app => scan.matches_of(app),
            };
            ctx.events.push_back(Event::ScanReached {
                height: scan.next().saturating_sub(1),
                matches,
            });
        }
    }

    /// Blocks above `fork` are no longer on the best chain (a reorganisation, or filter
    /// headers found wrong from `fork + 1`): their matches are withdrawn and scanned
    /// again.
    pub fn reorg(&mut self, ctx: &mut Ctx, fork: u32) {
        let Some(scan) = self.scan.as_mut() else {
            return;
        };
        let was = scan.mirror_reading();
        let app = scan.all_owners() & APP != 0;
        let mut changes = Vec::new();
        let given_up: Vec<GivenUp> = scan.reorg(fork, |c| changes.push(c)).collect();
        for c in changes {
            tell(ctx, c, app);
        }
        ctx.give_up_all(given_up);
        Self::stop_mirror_if_gone(ctx, was, scan);
    }

    /// What was scanned from `height` on no longer holds (our filter headers were found
    /// wrong from there): scanned again.
    pub fn drop_from(&mut self, ctx: &mut Ctx, height: u32) {
        let Some(scan) = self.scan.as_mut() else {
            return;
        };
        let was = scan.mirror_reading();
        let app = scan.all_owners() & APP != 0;
        let mut changes = Vec::new();
        let given_up: Vec<GivenUp> = scan.drop_from(height, |c| changes.push(c)).collect();
        for c in changes {
            tell(ctx, c, app);
        }
        ctx.give_up_all(given_up);
        Self::stop_mirror_if_gone(ctx, was, scan);
    }

    /// A dispute contested block `height` (see [`Ctx::contested`]): the scan matches the
    /// other gateway's filter of it too, whether it has passed the block (a match told
    /// now) or not (matched when it gets there).
    pub fn contest(&mut self, ctx: &mut Ctx, height: u32, hash: lightwire_chain::BlockHash) {
        let Some(scan) = self.scan.as_mut() else {
            return;
        };
        let changes: Vec<ScanChange> = ctx
            .contested
            .iter()
            .filter(|c| (c.height, c.hash) == (height, hash))
            .filter_map(|c| scan.contest(c))
            .collect();
        let app = scan.all_owners() & APP != 0;
        for c in changes {
            changed(ctx, c, self.for_wallet, app);
        }
    }

    /// The gateway asked, if a request is in flight.
    pub fn asked(&self) -> Option<GatewayId> {
        self.scan.as_ref()?.asked().map(|(g, _)| g)
    }

    /// Read a mirror's filters file holding the next block, when our filter headers reach
    /// its end and nothing is asked. True while the scan waits for a mirror (its manifest,
    /// its file, or the window that holds the file): the gateways are not asked.
    fn schedule_mirror(ctx: &mut Ctx, scan: &mut Scan) -> bool {
        if scan.mirror_reading().is_some() || ctx.mirrors.reading_manifest() {
            return true;
        }
        if scan.asked().is_some() {
            return false;
        }
        let next = scan.next();
        let Some((m, file)) = ctx.mirrors.file(Kind::Filters, next) else {
            return false;
        };
        if ctx.stored_filters.is_none_or(|s| s < file.last) {
            // Its tail could not be checked: the gateways serve up to our filter headers.
            return false;
        }
        if ctx.mirrors.streaming(Kind::Filters).is_some() {
            return true;
        }
        if !scan.window_holds(file.last) {
            // The window that holds it is read next (the shell asks the store).
            scan.read_window_again();
            return true;
        }
        let file = file.clone();
        if scan.mirror_request(m, file.last) {
            // From the part holding the next block, when the file has parts: the filters
            // before it are not fetched to be skipped (a large file of recent mainnet
            // blocks is some 200 MB).
            let from = file.parts.iter().rev().find(|(h, _)| *h <= next).copied();
            let now = ctx.now;
            ctx.mirrors
                .start_part(m, (file, from), Kind::Filters, now, &mut ctx.actions);
        }
        true
    }

    /// A `filters` message of mirror `m`'s file the scan reads (see
    /// [`Scan::mirror_request`]).
    pub fn on_mirror_filters(
        &mut self,
        ctx: &mut Ctx,
        m: MirrorId,
        f: &Filters<'_>,
    ) -> Result<(), crate::scan::ScanError> {
        let for_wallet = self.for_wallet;
        let Some(scan) = self.scan.as_mut().filter(|s| s.mirror_reading() == Some(m)) else {
            return Ok(());
        };
        let before = scan.filters;
        let mut changes = Vec::new();
        let result = scan.on_mirror_filters(f, |c| changes.push(c));
        let app = scan.all_owners() & APP != 0;
        for c in changes {
            changed(ctx, c, for_wallet, app);
        }
        if scan.filters > before {
            ctx.timers.touch(TaskId::Scan, ctx.now);
        }
        result
    }

    /// The body of mirror `m`'s filters file ended whole: it must have held every filter
    /// of its range.
    pub fn mirror_body_ended(&mut self, m: MirrorId, name: &str) -> Result<(), MirrorFault> {
        let Some(scan) = self.scan.as_mut().filter(|s| s.mirror_reading() == Some(m)) else {
            return Ok(());
        };
        scan.mirror_ended().map_err(|error| MirrorFault::Filters {
            name: name.to_string(),
            error,
        })
    }

    /// Mirror `m` was dropped: its file is not read further.
    pub fn mirror_gone(&mut self, m: MirrorId) {
        if let Some(scan) = self.scan.as_mut().filter(|s| s.mirror_reading() == Some(m)) {
            scan.mirror_gone();
        }
    }

    /// The scan gave up the mirror's file it read (a reorganisation, or filter headers
    /// found wrong, below its end): its fetch is stopped.
    fn stop_mirror_if_gone(ctx: &mut Ctx, was: Option<MirrorId>, scan: &Scan) {
        if was.is_some() && scan.mirror_reading().is_none() {
            Self::stop_mirror(ctx);
        }
    }

    /// `scan` is given up: its requests, and the mirror's file it read (which is not
    /// read for whatever comes next).
    fn abandon(ctx: &mut Ctx, scan: &mut Scan) {
        ctx.give_up_all(scan.abandon());
        if scan.mirror_reading().is_some() {
            Self::stop_mirror(ctx);
        }
    }

    /// The filters file streaming is not read further: its fetch is stopped.
    fn stop_mirror(ctx: &mut Ctx) {
        let now = ctx.now;
        ctx.mirrors.cancel(Kind::Filters, now, &mut ctx.actions);
    }
}

/// A scan from `from`, on a store whose first header is at `base`.
fn clamp(from: u32, base: u32) -> u32 {
    if base > 0 { from.max(base + 1) } else { from }
}

/// A scan's change: the wallets fetch their matches; the application hears of its own
/// (`app`: it scans beside the wallets), or of every one when it does not scan.
fn changed(ctx: &mut Ctx, c: ScanChange, for_wallet: bool, app: bool) {
    if let (
        ScanChange::Matched {
            height,
            hash,
            owners,
        },
        true,
    ) = (c, for_wallet)
        && owners & !APP != 0
    {
        ctx.effects.push_back(Effect::Matched {
            height,
            hash,
            owners: owners & !APP,
        });
    }
    tell(ctx, c, app);
}

/// The application hears of a change of its matches (every match's, when it does not
/// scan beside the wallets: `app` false).
fn tell(ctx: &mut Ctx, c: ScanChange, app: bool) {
    let (ScanChange::Matched { owners, .. } | ScanChange::Withdrawn { owners, .. }) = c;
    if app && owners & APP == 0 {
        return;
    }
    ctx.events.push_back(match c {
        ScanChange::Matched { height, hash, .. } => Event::ScanMatch { height, hash },
        ScanChange::Withdrawn { height, hash, .. } => Event::ScanWithdrawn { height, hash },
    });
}

impl Task for ScanTask {
    /// Ask for the scan's next window of filters, from a gateway known to agree with our
    /// filter headers (a filter that does not match ours is then its own fault, and it
    /// is marked bad for it): not one that said the blocks are not on its chain since the
    /// last tip, one not benched for such answers first, another than `source` (the
    /// headers') when there is one. `Err` names a gateway whose connection broke.
    fn schedule(&mut self, ctx: &mut Ctx, conns: &mut Conns, view: &View) -> Result<(), Broke> {
        let source = view.source;
        let Some(scan) = self.scan.as_mut() else {
            return Ok(());
        };
        if ctx.stopped || scan.asked().is_some() || Self::schedule_mirror(ctx, scan) {
            return Ok(());
        }
        // One that can be asked for the next filter: one checked only below it would be
        // picked and asked nothing, for good.
        let next = scan.next();
        let usable = |g: GatewayId, gw: &super::gateway::Gateway| {
            gw.scan_limit().is_some_and(|l| l >= next) && !scan.is_refused(g)
        };
        let Some(g) = ctx.pick(0, source, usable, |gw| gw.scan) else {
            return Ok(());
        };
        let Some(conn) = ready(conns, g) else {
            return Ok(());
        };
        ctx.timers.touch(TaskId::Scan, ctx.now);
        let limit = ctx.gateways[g].scan_limit().unwrap_or(0);
        // Requests in flight all go to one gateway: its answers come in order.
        while let Some((id, start, stop)) = scan.next_request(g, limit) {
            if let Err(e) = conn.request_filters(id, start, stop) {
                scan.abandon().for_each(drop);
                return Err((g, e));
            }
        }
        Ok(())
    }

    fn deadline(&self, ctx: &Ctx) -> Option<Millis> {
        ctx.timers.deadline(TaskId::Scan, self.asked().is_some())
    }

    /// Its request made no progress: the gateway is dropped (and reconnected), and
    /// struck, so that one that takes every request and never answers is benched too.
    fn timed_out(&mut self, ctx: &mut Ctx) -> Vec<(GatewayId, DropReason)> {
        let asked = self.asked();
        if let Some(g) = asked {
            ctx.gateways[g].scan.strike(ctx.now);
        }
        asked.map(timeout).into_iter().collect()
    }

    fn gateway_gone(&mut self, _: &mut Ctx, g: GatewayId) {
        if let Some(scan) = self.scan.as_mut()
            && scan.asked().is_some_and(|(a, _)| a == g)
        {
            scan.abandon().for_each(drop);
        }
    }
}
