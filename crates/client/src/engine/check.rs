//! The cross-check task (see [`crate::dispute`]): every gateway that serves filters is
//! probed for its filter header at our latest; one that differs is in conflict, and a
//! dispute settles who is wrong by evidence (the block), one dispute at a time.

use lightwire_primitives::{BlockHash, FilterHeader};
use std::collections::VecDeque;

use lightwire_proto::{Initiator, Millis};
use lightwire_wire::{BlockPiece, FilterCheckpoints, Filters};

use super::ctx::{Broke, Conns, Ctx, Effect, ready};
use super::event::Event;
use super::gateway::FilterTrust;
use super::task::{Task, View, timeout};
use crate::dispute::{Ask, Defence, Dispute, DisputeError, Outcome, Verdict};
use crate::filters::FilterAnswer;
use crate::ids::{GatewayId, Ids, TaskId};
use crate::reason::DropReason;

/// A probe in flight: its id, the height asked and our filter header there.
#[derive(Clone, Copy, Debug)]
struct Probe {
    id: u32,
    height: u32,
    ours: FilterHeader,
    /// Their header at `height`, once it came.
    theirs: Option<FilterHeader>,
}

/// The cross-check's state.
pub struct Check {
    /// Each gateway's probe in flight.
    probes: Vec<Option<Probe>>,
    /// The dispute under way, and the conflicts waiting for one (gateway, height, its
    /// filter header there).
    dispute: Option<Dispute>,
    disputes: VecDeque<(GatewayId, u32, FilterHeader)>,
    ids: Ids,
    /// The disputed height the gateways in `defenders_probed` were asked about.
    defenders_probed_at: Option<u32>,
    defenders_probed: Vec<GatewayId>,
}

impl Check {
    /// Nothing probed yet, for `gateways` gateways.
    pub fn new(gateways: usize) -> Check {
        Check {
            probes: vec![None; gateways],
            dispute: None,
            disputes: VecDeque::new(),
            ids: Ids::new(TaskId::Check),
            defenders_probed_at: None,
            defenders_probed: Vec::new(),
        }
    }

    /// The dispute under way.
    pub fn dispute_mut(&mut self) -> Option<&mut Dispute> {
        self.dispute.as_mut()
    }

    fn schedule_dispute(&mut self, ctx: &mut Ctx, conns: &mut Conns) -> Result<(), Broke> {
        if self.dispute.is_none() {
            self.start_next_dispute(ctx);
        }
        loop {
            let Some(d) = self.dispute.as_ref() else {
                return Ok(());
            };
            let (against, judged) = (d.against, d.judged());
            if let Some(judged) = judged {
                self.probe_defenders(ctx, conns, against, judged);
            }
            let Some(d) = self.dispute.as_mut() else {
                return Ok(());
            };
            let defence = defence(ctx, &self.probes, d.against, d.height());
            let (g, ask) = match d.next_ask(defence) {
                Ok(Some(next)) => next,
                Ok(None) => return Ok(()),
                Err(outcome) => {
                    // No message of any gateway's settled it: one found bad is dropped
                    // once this round is over.
                    if let Err(why) = self.outcome(ctx, None, outcome)
                        && let Outcome::Bad(bad, _) = outcome
                    {
                        ctx.drop_later(bad, why);
                    }
                    continue;
                }
            };
            let Some(conn) = ready(conns, g) else {
                return Ok(());
            };
            if let Ask::Block { .. } = ask
                && !conn.serves_blocks()
            {
                d.no_block_from(g);
                continue;
            }
            ctx.timers.touch(TaskId::Check, ctx.now);
            if let Err(e) = send(conn, ask) {
                return Err((g, e));
            }
        }
    }

    /// Ask every gateway that may defend ours at the disputed height (`judged`: the
    /// height, our filter header there and its block) for its filter header there, once
    /// per height: one that agrees with ours at our latest is a defender already, but one
    /// whose filter headers lag our latest (its probe there came back empty), or that was
    /// never compared, may still agree at the disputed height, which is all a defender
    /// needs. Without this, a lagging honest gateway counted for nobody and ours gave way.
    fn probe_defenders(
        &mut self,
        ctx: &mut Ctx,
        conns: &mut Conns,
        against: GatewayId,
        (height, ours, hash): (u32, FilterHeader, BlockHash),
    ) {
        if self.defenders_probed_at != Some(height) {
            self.defenders_probed_at = Some(height);
            self.defenders_probed.clear();
        }
        for g in ctx.gateways.ids() {
            let gw = &ctx.gateways[g];
            if g == against
                || !gw.filters_usable()
                || gw.agrees_at(height)
                || self.probes[g.index()].is_some()
                || self.defenders_probed.contains(&g)
            {
                continue;
            }
            let Some(conn) = ready(conns, g) else {
                continue;
            };
            if self.probe(ctx, conn, g, height, hash, ours) {
                self.defenders_probed.push(g);
            }
        }
    }

    /// Ask `g` for its filter header at `height` (ours there is `ours`); whether it was
    /// sent.
    fn probe(
        &mut self,
        ctx: &mut Ctx,
        conn: &mut Initiator,
        g: GatewayId,
        height: u32,
        hash: BlockHash,
        ours: FilterHeader,
    ) -> bool {
        let id = self.ids.next_id();
        if conn.request_filter_headers(id, height, hash).is_err() {
            return false;
        }
        if self.probes.iter().all(Option::is_none) {
            ctx.timers.touch(TaskId::Check, ctx.now);
        }
        self.probes[g.index()] = Some(Probe {
            id,
            height,
            ours,
            theirs: None,
        });
        true
    }

    /// Gateway `g`'s filter headers differ from ours at `height` (it says `theirs`): it
    /// is not used for filters, the application hears of it, and a dispute settles it.
    pub fn conflict(&mut self, ctx: &mut Ctx, g: GatewayId, height: u32, theirs: FilterHeader) {
        let gw = &mut ctx.gateways[g];
        if gw.trust.is_conflict() {
            return;
        }
        gw.trust.conflict(height);
        ctx.events
            .push_back(Event::FilterConflict { gateway: g, height });
        self.disputes.push_back((g, height, theirs));
    }

    fn start_next_dispute(&mut self, ctx: &mut Ctx) {
        while let Some((g, height, theirs)) = self.disputes.pop_front() {
            if ctx.gateways[g].ready {
                // A range of its own, so that a late answer to an earlier dispute is not
                // taken for this one's.
                let seq = self.ids.seq().wrapping_add(1 << 20);
                let ids = Ids::starting_at(TaskId::Check, seq);
                // The probes' ids from the upper half of the range: never one of the
                // dispute's.
                self.ids = Ids::starting_at(TaskId::Check, seq.wrapping_add(1 << 19));
                self.defenders_probed_at = None;
                self.dispute = Some(Dispute::new(g, height, theirs, ctx.filter_base, ids));
                ctx.timers.touch(TaskId::Check, ctx.now);
                return;
            }
        }
    }

    /// A `filter_headers` message answering a cross-check request.
    pub fn on_headers(
        &mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        a: FilterAnswer<'_>,
    ) -> Result<(), DropReason> {
        if let Some(p) = self.probes[g.index()].filter(|p| p.id == a.id) {
            return self.on_probe(ctx, g, p, a);
        }
        match self.dispute.as_mut().filter(|d| d.is_asked(g, a.id)) {
            Some(d) => {
                let outcome = d.on_filter_headers(&a);
                self.outcome(ctx, Some(g), outcome)
            }
            None => ctx.given_up_answer(g, a.id, a.flags.last),
        }
    }

    fn on_probe(
        &mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        mut p: Probe,
        a: FilterAnswer<'_>,
    ) -> Result<(), DropReason> {
        if let Some(&last) = a.headers.last() {
            // The first height is the gateway's: checked, so that one near `u32::MAX` is
            // refused, not summed past it.
            let end = u32::try_from(a.headers.len() - 1)
                .ok()
                .and_then(|n| a.first_height.checked_add(n));
            if end != Some(p.height) {
                return Err(DropReason::Dispute(DisputeError::OutOfOrder {
                    height: p.height,
                }));
            }
            p.theirs = Some(last);
        }
        ctx.timers.touch(TaskId::Check, ctx.now);
        if !a.flags.last {
            self.probes[g.index()] = Some(p);
            return Ok(());
        }
        self.probes[g.index()] = None;
        match p.theirs {
            // It has not these filter headers yet: asked again after its next tip.
            None => ctx.gateways[g].trust.lag(),
            Some(t) if t == p.ours => ctx.gateways[g].trust.agree(p.height),
            Some(t) => self.conflict(ctx, g, p.height, t),
        }
        Ok(())
    }

    /// A `filter_checkpoints` message (only disputes ask for them).
    pub fn on_checkpoints(
        &mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        m: &FilterCheckpoints<'_>,
    ) -> Result<(), DropReason> {
        match self.dispute.as_mut().filter(|d| d.is_asked(g, m.id)) {
            Some(d) => {
                let outcome = d.on_checkpoints(m);
                self.outcome(ctx, Some(g), outcome)
            }
            None => ctx.given_up_answer(g, m.id, m.flags.last),
        }
    }

    /// A `filters` message answering a dispute's request.
    pub fn on_filters(
        &mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        m: &Filters<'_>,
    ) -> Result<(), DropReason> {
        match self.dispute.as_mut().filter(|d| d.is_asked(g, m.id)) {
            Some(d) => {
                let outcome = d.on_filters(g, m);
                self.outcome(ctx, Some(g), outcome)
            }
            None => ctx.given_up_answer(g, m.id, m.flags.last),
        }
    }

    /// A `block` message answering a dispute's request.
    pub fn on_block(
        &mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        p: &BlockPiece<'_>,
    ) -> Result<(), DropReason> {
        match self.dispute.as_mut().filter(|d| d.is_asked(g, p.id)) {
            Some(d) => {
                let outcome = d.on_block(g, p);
                self.outcome(ctx, Some(g), outcome)
            }
            None => ctx.given_up_answer(g, p.id, p.last),
        }
    }

    /// The store's answer to a dispute's read.
    pub fn on_read(
        &mut self,
        ctx: &mut Ctx,
        from: u32,
        hashes: &[lightwire_chain::BlockHash],
        ours: &[FilterHeader],
    ) {
        if let Some(d) = self.dispute.as_mut()
            && let Outcome::Over(verdict) = d.on_read(from, hashes, ours)
        {
            self.finish(ctx, verdict);
        }
    }

    /// What an answer did to the dispute. `g` is the gateway whose message it was (none:
    /// the dispute settled while asking): an error returned drops it (or the gateway found
    /// bad, when there was no message); another gateway found bad is dropped by the
    /// engine after.
    fn outcome(
        &mut self,
        ctx: &mut Ctx,
        g: Option<GatewayId>,
        outcome: Outcome,
    ) -> Result<(), DropReason> {
        ctx.timers.touch(TaskId::Check, ctx.now);
        self.hand_over(ctx);
        let (bad, e) = match outcome {
            Outcome::Going => return Ok(()),
            Outcome::Over(verdict) => {
                self.finish(ctx, verdict);
                return Ok(());
            }
            Outcome::Bad(bad, e) => (bad, e),
        };
        let against = self.dispute.as_ref().map(|d| d.against);
        if against == Some(bad) {
            let height = self.dispute.as_ref().map_or(0, Dispute::height);
            let verdict = match e {
                DisputeError::FilterLacksOutput { .. } | DisputeError::WithheldFilter { .. } => {
                    Verdict::TheirsWrong { height }
                }
                _ => Verdict::Undecided { height },
            };
            self.finish(ctx, verdict);
        } else if let Some(v) = self.dispute.as_mut().and_then(|d| d.gateway_gone(bad)) {
            // A gateway on our side that broke a rule: the dispute goes on with the
            // others, unless it cannot.
            self.finish(ctx, v);
        }
        let why = DropReason::Dispute(e);
        if g.is_none_or(|g| g == bad) {
            return Err(why);
        }
        ctx.drop_later(bad, why);
        Ok(())
    }

    /// The dispute is over: the application hears the verdict, and when ours was wrong
    /// (or gave way, undefended), the other tasks hear of it ([`Effect::OursWrong`]); when
    /// it was proven wrong, the gateways that vouched for ours are marked bad.
    pub fn finish(&mut self, ctx: &mut Ctx, verdict: Verdict) {
        self.hand_over(ctx);
        let Some(d) = self.dispute.take() else {
            return;
        };
        // What it still waits for comes anyway: known for what it is when it does.
        ctx.give_up_all(d.in_flight());
        let against = d.against;
        ctx.events.push_back(Event::FilterDispute {
            gateway: against,
            verdict,
        });
        let (height, from, prev, hash, proven) = match verdict {
            Verdict::OursWrong {
                height,
                from,
                prev,
                hash,
            } => (height, from, prev, hash, true),
            Verdict::OursUndefended {
                height,
                from,
                prev,
                hash,
            } => (height, from, prev, hash, false),
            Verdict::Undecided { .. } => {
                // It stays in conflict; a scan may still ask it where every difference
                // is contested.
                ctx.gateways[against].contested_to = d.checked_to();
                self.start_next_dispute(ctx);
                return;
            }
            Verdict::TheirsWrong { .. } => {
                self.start_next_dispute(ctx);
                return;
            }
        };
        // Ours change from `from`: what was checked against them no longer holds.
        for g in ctx.gateways.ids() {
            let gw = &mut ctx.gateways[g];
            gw.contested_to = gw.contested_to.filter(|&c| c < from);
        }
        // Ours stand below `from`: none at all when it is the first block we hold.
        let below = from.checked_sub(1).filter(|&b| b >= ctx.filter_base);
        ctx.stored_filters = ctx.stored_filters.and_then(|s| below.map(|b| s.min(b)));
        ctx.effects.push_back(Effect::OursWrong {
            height: from,
            prev,
            hash,
        });
        for g in ctx.gateways.ids() {
            let gw = &ctx.gateways[g];
            if proven && g != against && gw.trust.agreed().is_some_and(|a| a >= height) {
                let why = DropReason::Dispute(DisputeError::FilterLacksOutput { height });
                ctx.drop_later(g, why);
            }
        }
        ctx.gateways[against].trust = below.map_or(FilterTrust::Unknown, FilterTrust::Agrees);
        self.start_next_dispute(ctx);
    }

    /// The contested blocks the dispute found (see [`crate::dispute::Contested`]): kept for the session,
    /// and the scan told.
    fn hand_over(&mut self, ctx: &mut Ctx) {
        let Some(d) = self.dispute.as_mut() else {
            return;
        };
        for c in d.take_contested() {
            let (height, hash) = (c.height, c.hash);
            if ctx.contest(c) {
                ctx.effects.push_back(Effect::Contested { height, hash });
            }
        }
    }

    /// The best chain switched branches at `fork`: a dispute above it was over blocks no
    /// longer ours (probed again on the new branch).
    pub fn reorg(&mut self, ctx: &mut Ctx, fork: u32) {
        if self.dispute.as_ref().is_some_and(|d| d.height() > fork) {
            self.finish(ctx, Verdict::Undecided { height: fork });
        }
    }
}

/// Who can defend our filter at `height` against `against`: a gateway that agrees with
/// ours at or above it; else, while another filter-serving gateway has not been compared
/// with ours (its probe in flight: every one was asked, see [`Check::probe_defenders`]), or
/// another is still in its handshake (once ready it is probed), it may; else nobody.
/// Without the wait for a handshake, ours gave way to whichever gateway handshook first: a
/// liar quicker than the honest gateway that stored ours could have it replaced. The wait
/// is bounded by the handshake's timeout.
fn defence(ctx: &Ctx, probes: &[Option<Probe>], against: GatewayId, height: u32) -> Defence {
    let others = || ctx.gateways.ids().filter(move |&g| g != against);
    if let Some(g) = others().find(|&g| ctx.gateways[g].agrees_at(height)) {
        return Defence::By(g);
    }
    let unknown = others().any(|g| {
        let gw = &ctx.gateways[g];
        (gw.filters_usable() && probes[g.index()].is_some())
            || gw.state == super::gateway::GatewayState::Handshaking
    });
    if unknown {
        Defence::Awaited
    } else {
        Defence::Nobody
    }
}

fn send(conn: &mut Initiator, ask: Ask) -> Result<(), lightwire_proto::PeerError> {
    match ask {
        Ask::Checkpoints { id, stop } => conn.request_filter_checkpoints(id, stop),
        Ask::FilterHeaders { id, start, stop } => conn.request_filter_headers(id, start, stop),
        Ask::Filter { id, height, stop } => conn.request_filters(id, height, stop),
        Ask::Block { id, hash } => conn.request_block(id, hash),
    }
}

impl Check {
    /// The gateways the cross-check waits on (to drop when it times out).
    pub fn waiting_on(&self) -> Vec<GatewayId> {
        let mut out: Vec<GatewayId> = (0..self.probes.len())
            .filter(|&g| self.probes[g].is_some())
            .map(GatewayId)
            .collect();
        // In order, once each (a few gateways: each put in its place, and no sort's code
        // in the wasm for them).
        if let Some(d) = &self.dispute {
            for g in d.asked_gateways() {
                if let Err(at) = out.binary_search(&g) {
                    out.insert(at, g);
                }
            }
        }
        out
    }
}

impl Task for Check {
    /// Probe the gateways not known to agree with our latest filter header (of
    /// `filters`), and send what a dispute asks. `Err` names a gateway whose connection
    /// broke.
    fn schedule(&mut self, ctx: &mut Ctx, conns: &mut Conns, view: &View) -> Result<(), Broke> {
        if ctx.stopped || !ctx.filters_on {
            return Ok(());
        }
        if let Some((t, hash, ours)) = view.filter_reached {
            for g in ctx.gateways.ids() {
                let gw = &ctx.gateways[g];
                if !gw.filters_usable()
                    || self.probes[g.index()].is_some()
                    || matches!(gw.trust, FilterTrust::Lagging(_))
                    || gw.trust.agreed().is_some_and(|a| a >= t)
                    || view.filters_asked == Some(g)
                {
                    continue;
                }
                let Some(conn) = ready(conns, g) else {
                    continue;
                };
                self.probe(ctx, conn, g, t, hash, ours);
            }
        }
        self.schedule_dispute(ctx, conns)
    }

    fn deadline(&self, ctx: &Ctx) -> Option<Millis> {
        let waiting = self.probes.iter().any(Option::is_some)
            || self.dispute.as_ref().is_some_and(|d| d.is_waiting());
        ctx.timers.deadline(TaskId::Check, waiting)
    }

    /// The probes and the dispute's requests ran out: the gateways they wait on.
    fn timed_out(&mut self, _: &mut Ctx) -> Vec<(GatewayId, DropReason)> {
        self.waiting_on().into_iter().map(timeout).collect()
    }

    fn gateway_gone(&mut self, ctx: &mut Ctx, g: GatewayId) {
        self.probes[g.index()] = None;
        self.disputes.retain(|&(x, _, _)| x != g);
        if let Some(v) = self.dispute.as_mut().and_then(|d| d.gateway_gone(g)) {
            self.finish(ctx, v);
        }
    }
}
