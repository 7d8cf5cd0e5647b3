//! The filter-header task: the BIP157 filter-header chain beside the headers, each
//! request asked of a gateway that serves filters drawn at random, each answer checked to
//! follow on from ours (see [`crate::filters`]). An answer that does not is a conflict,
//! for the cross-check to settle.
//!
//! Whom to ask: a gateway drawn at random for each request. Were it the first in the
//! list, the one other than the headers' source (the gateway whose tip came first), or
//! the next in turns (the one that was not ready for the first request), a gateway could
//! make its own chain the one stored first by where it is listed or when it answers.
//! Drawn, no gateway chooses which batches it serves; each batch must follow on from the
//! last, whoever served it, and the others are probed where it ends (see `check.rs`), so
//! two chains meet within a batch and a dispute settles which is wrong. A gateway whose
//! answer ends short (it says it lacks them) is not asked again until a tip or new
//! headers come, and another is asked at once; each such answer that another gateway
//! then fills is a strike, and a gateway with [`MAX_STRIKES`] is asked only when no other
//! can be, for [`BENCHED_FOR`].
//!
//! A mirror's file holding the next range is read instead, once the gateways agree on the
//! filter header at its end (`bulk_filters.rs`); while the headers have not reached its
//! end, or the gateways' word there (a probe, or their checkpoints) is on its way, the
//! gateways are not asked for that range (a range they served would leave the next file's start behind us).

use lightwire_chain::BlockHash;
use lightwire_chain::link_filter_headers;
use lightwire_primitives::FilterHeader;

use super::bulk_filters::{BulkFilters, PROBES_AHEAD};
use super::ctx::{Broke, Conns, Ctx, Effect, ready};
use super::gateway::Gateway;
#[cfg(doc)]
use super::gateway::{BENCHED_FOR, MAX_STRIKES};
use super::mirror::Kind;
use super::task::{Task, View, timeout};
use crate::filters::{FilterAnswer, FilterSync};
use crate::ids::{GatewayId, TaskId};
use crate::reason::DropReason;

/// Filter headers an answer brought and the task validated, for the next commit.
pub struct Taken<'a> {
    /// The height of the first.
    pub first: u32,
    /// The headers, consecutive.
    pub headers: &'a [FilterHeader],
}

/// The filter-header task's state.
pub struct FilterHeaders {
    /// The filter-header chain.
    pub sync: FilterSync,
    /// A random number drawn for the next request: where among the gateways the search
    /// for one to ask starts.
    draw: Option<usize>,
    /// An answer of a gateway in conflict, linked onto ours (see [`Self::on_answer`]).
    relinked: Vec<FilterHeader>,
    /// Mirrors' files and the gateways' checkpoints they are checked against.
    pub bulk: BulkFilters,
}

impl FilterHeaders {
    /// Nothing known until [`Self::resume`], for `gateways` gateways.
    pub fn new(gateways: usize) -> FilterHeaders {
        FilterHeaders {
            sync: FilterSync::new(None, 0),
            draw: None,
            relinked: Vec::new(),
            bulk: BulkFilters::new(gateways),
        }
    }

    /// Read a mirror's file holding the next range, once the gateways agree on its end;
    /// ask them for their checkpoints when that is due. True while the range waits for
    /// the mirror (the gateways are not asked for it).
    fn schedule_mirror(&mut self, ctx: &mut Ctx, conns: &mut Conns, view: &View) -> bool {
        if self.bulk.is_reading() {
            return true;
        }
        if ctx.mirrors.reading_manifest() {
            // What it holds is not known yet.
            return true;
        }
        let next = self.sync.next();
        let (Some(before), Some((m, first, last))) = (
            self.sync.prev(),
            ctx.mirrors
                .filter_headers_file(next)
                .map(|(m, f)| (m, f.first, f.last)),
        ) else {
            return false;
        };
        let (tip, synced) = (view.tip, view.headers_synced);
        if last > tip.0 {
            // The headers are on their way to it (they come first).
            return !synced;
        }
        let top = ctx.mirrors.filter_headers_top();
        // Our block at the file's end, when validated this session: the gateways are
        // probed there, and at the ends of the files after it that the headers reached;
        // else their checkpoints are asked (see `bulk_filters.rs`).
        self.bulk.forget_below(next);
        if self.sync.mark_at(last).is_some() {
            let mut end = last;
            for _ in 0..PROBES_AHEAD {
                let Some(hash) = self.sync.mark_at(end) else {
                    break;
                };
                for g in ctx.gateways.ids() {
                    if !self.bulk.probe_due(ctx, g, end) {
                        continue;
                    }
                    if let Some(conn) = ready(conns, g) {
                        let id = self.bulk.probing(g, end);
                        if conn.request_filter_headers(id, end, hash).is_err() {
                            self.bulk.not_asked(g);
                        } else {
                            ctx.timers.touch(TaskId::FilterHeaders, ctx.now);
                        }
                    }
                }
                match ctx.mirrors.filter_headers_file(end + 1) {
                    Some((_, f)) if f.last <= tip.0 => end = f.last,
                    _ => break,
                }
            }
        } else {
            for g in ctx.gateways.ids() {
                if !self.bulk.due(ctx, g, last, (tip.0, synced), top) {
                    continue;
                }
                if let Some(conn) = ready(conns, g) {
                    let id = self.bulk.asking(g, tip.0);
                    if conn.request_filter_checkpoints(id, tip.1).is_err() {
                        self.bulk.not_asked(g);
                    } else {
                        ctx.timers.touch(TaskId::FilterHeaders, ctx.now);
                    }
                }
            }
        }
        match self
            .bulk
            .agreed(ctx, last, self.sync.mark_at(last).is_some())
        {
            Some(expected) if ctx.mirrors.streaming(Kind::FilterHeaders).is_none() => {
                // Copied once a file, when it starts (not at each schedule).
                let Some((_, file)) = ctx.mirrors.filter_headers_file(next) else {
                    return false;
                };
                let file = file.clone();
                let name = file.name.clone();
                self.bulk
                    .start(m, name, (first, next, last), before, expected);
                let now = ctx.now;
                ctx.mirrors
                    .start(m, file, Kind::FilterHeaders, now, &mut ctx.actions);
                true
            }
            Some(_) => true,
            // Not agreed yet: their checkpoints are on their way, or are asked once the
            // headers are further (or synced); else they differ, or none can say.
            None => self.bulk.asked_any() || !synced,
        }
    }

    /// A mirror's file, checked (see `bulk_filters.rs`): taken as a gateway's answer is,
    /// the gateways that said its last header agreeing with ours up to it. Returns
    /// whether it was taken (not when ours moved meanwhile: a reorg, a truncation).
    pub fn take_checked(
        ctx: &mut Ctx,
        sync: &mut FilterSync,
        bulk: &BulkFilters,
        first: u32,
        before: FilterHeader,
        headers: &[FilterHeader],
    ) -> bool {
        if !sync.take_checked(first, before, headers) {
            return false;
        }
        let last = first + headers.len() as u32 - 1;
        if let Some(h) = headers.last() {
            for g in bulk.agreeing(last, *h) {
                ctx.gateways[g].trust.agree(last);
            }
        }
        ctx.timers.touch(TaskId::FilterHeaders, ctx.now);
        true
    }

    /// Resume from the store's last filter header, or its base; the headers' tip `tip` is
    /// the first place a request can stop at.
    pub fn resume(
        &mut self,
        stored: Option<(u32, FilterHeader)>,
        base: u32,
        tip: (u32, BlockHash),
    ) {
        self.sync = FilterSync::new(stored, base);
        self.sync.mark(tip.0, tip.1);
        // Filter headers are stored with the headers: usually they end together, and the
        // other gateways can be probed at once.
        self.sync.reach(tip.0, tip.1);
    }

    /// A `filter_headers` answer to our request. What it validated comes back (its first
    /// height and the headers): the engine puts it in the commit the headers task gathers,
    /// so that headers and filter headers are stored in one transaction.
    ///
    /// A gateway in conflict is asked only when none that agrees with ours can be, and
    /// only once a dispute walked its chain up to our latest (every difference judged or
    /// contested): its filter hashes are then linked onto ours. Ours hold what they held,
    /// and from here what its filters hold; the others are probed at our new latest as
    /// after any batch. Without this, ours kept after a dispute the block could not settle
    /// could not grow once the gateway that agreed with them stopped serving (filter sync
    /// frozen, with an honest gateway present).
    pub fn on_answer<'a>(
        &'a mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        mut answer: FilterAnswer<'a>,
    ) -> Result<Option<Taken<'a>>, DropReason> {
        let (id, flags, before) = (answer.id, answer.flags, answer.before);
        let first = answer.first_height;
        // Saturating: `first` is the gateway's, and an answer not in flight is refused
        // below (one that is starts where ours end, far from the top).
        let end = first.saturating_add(answer.headers.len() as u32);
        if self.bulk.is_probe(g, id) {
            self.bulk.on_probe(g, answer)?;
            ctx.timers.touch(TaskId::FilterHeaders, ctx.now);
            return Ok(None);
        }
        if !self.sync.is_in_flight(g, id) {
            return ctx.given_up_answer(g, id, flags.last).map(|()| None);
        }
        let relink = ctx.gateways[g].trust.is_conflict();
        if relink && let Some(prev) = self.sync.prev() {
            // One segment, from our latest instead of its anchor.
            self.relinked.clear();
            self.relinked
                .resize(answer.hashes.len(), FilterHeader::ZERO);
            link_filter_headers(answer.hashes, &[prev], &[0], &mut self.relinked);
            answer.before = prev;
            answer.headers = &self.relinked;
        }
        let headers = answer.headers;
        let step = self
            .sync
            .on_filter_headers(g, answer)
            .map_err(DropReason::Filters)?;
        if step.taken > 0 {
            ctx.timers.touch(TaskId::FilterHeaders, ctx.now);
            let gw = &mut ctx.gateways[g];
            if relink {
                // Still in conflict (its headers differ); what it gave is ours now, so
                // it is checked up to here.
                gw.contested_to = gw.contested_to.map(|c| c.max(end - 1));
            } else {
                // Its chain follows on from ours: it agrees with all we hold.
                gw.trust.agree(end - 1);
            }
            gw.filter_headers.delivered();
            // Those that said they lacked these had less than it did.
            for s in self.sync.shown_short(g) {
                ctx.gateways[s].filter_headers.strike(ctx.now);
            }
        }
        if let Some(height) = step.conflict {
            if !flags.last {
                ctx.give_up(g, id);
            }
            // Its header before `height` (the answer's anchor) is not ours.
            ctx.effects.push_back(Effect::Conflict {
                gateway: g,
                height: height.saturating_sub(1),
                theirs: before,
            });
        }
        Ok((step.taken > 0).then_some(Taken { first, headers }))
    }

    /// The best chain switched branches at `fork`.
    pub fn reorg(&mut self, ctx: &mut Ctx, fork: u32) {
        if let Some((a, id)) = self.sync.reorg(fork) {
            ctx.give_up(a, id);
        }
        if self.bulk.reorg(ctx, fork).is_some() {
            let now = ctx.now;
            ctx.mirrors
                .cancel(Kind::FilterHeaders, now, &mut ctx.actions);
        }
    }

    /// Our filter headers are wrong from `height` on (see [`Effect::OursWrong`]); the
    /// headers' tip is `tip`.
    pub fn ours_wrong(
        &mut self,
        ctx: &mut Ctx,
        height: u32,
        prev: FilterHeader,
        hash: BlockHash,
        tip: (u32, BlockHash),
    ) {
        if let Some((a, id)) = self.sync.truncate(height, prev) {
            ctx.give_up(a, id);
        }
        self.sync.mark_below(height, hash);
        self.sync.mark(tip.0, tip.1);
    }
}

impl Task for FilterHeaders {
    /// Ask for the next filter headers, up to the last validated header, from the next
    /// gateway in turn that serves them (see the module's comment). `Err` names a gateway
    /// whose connection broke.
    fn schedule(&mut self, ctx: &mut Ctx, conns: &mut Conns, view: &View) -> Result<(), Broke> {
        if !ctx.filters_on || ctx.stopped || self.sync.asked().is_some() {
            return Ok(());
        }
        if self.schedule_mirror(ctx, conns, view) {
            return Ok(());
        }
        // The engine's seeded random numbers: the shell seeds them from the platform's.
        let draw = *self.draw.get_or_insert_with(|| ctx.rng.next_u64() as usize);
        let sync = &self.sync;
        let usable = |g: GatewayId, gw: &Gateway| gw.filters_usable() && !sync.is_short(g);
        // One in conflict whose chain a dispute walked up to ours, when no other can be
        // asked (see `on_answer`).
        let walked = |g: GatewayId, gw: &Gateway| {
            gw.ready
                && gw.serves_filters
                && gw.trust.is_conflict()
                && !sync.is_short(g)
                && gw.contested_to.is_some_and(|c| Some(c) >= sync.height())
                && sync.prev().is_some()
        };
        let picked = ctx
            .pick(draw, None, usable, |gw| gw.filter_headers)
            .or_else(|| ctx.pick(draw, None, walked, |gw| gw.filter_headers));
        let Some(g) = picked else {
            return Ok(());
        };
        let Some(conn) = ready(conns, g) else {
            return Ok(());
        };
        let Some((id, start, stop)) = self.sync.next_request(g) else {
            return Ok(());
        };
        // Drawn again for the next request.
        self.draw = None;
        ctx.timers.touch(TaskId::FilterHeaders, ctx.now);
        if let Err(e) = conn.request_filter_headers(id, start, stop) {
            self.sync.abandon();
            return Err((g, e));
        }
        Ok(())
    }

    fn deadline(&self, ctx: &Ctx) -> Option<lightwire_proto::Millis> {
        let waiting = self.sync.asked().is_some() || self.bulk.asked_any();
        ctx.timers.deadline(TaskId::FilterHeaders, waiting)
    }

    /// Its request made no progress: the gateway is dropped (and reconnected), and
    /// struck, so that one that takes every request and never answers is benched too.
    /// So is one that leaves the checkpoints a mirror's file waits for unanswered (the
    /// file waits for every gateway's word: one silent gateway would stall it).
    fn timed_out(&mut self, ctx: &mut Ctx) -> Vec<(GatewayId, DropReason)> {
        let asked = self.sync.asked();
        if let Some(g) = asked {
            ctx.gateways[g].filter_headers.strike(ctx.now);
        }
        let mut out: Vec<_> = asked.map(timeout).into_iter().collect();
        for g in self.bulk.asked_gateways() {
            if Some(g) != asked {
                out.push(timeout(g));
            }
        }
        out
    }

    fn gateway_gone(&mut self, _: &mut Ctx, g: GatewayId) {
        if self.sync.asked() == Some(g) {
            self.sync.abandon();
        }
        self.bulk.gateway_gone(g);
    }
}
