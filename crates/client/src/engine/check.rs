//! The engine's side of the filter cross-check (see [`crate::dispute`]): probing every
//! gateway that serves filters for its filter header at ours, and carrying a dispute's
//! requests, answers and verdict.

use lightwire_proto::Initiator;
use lightwire_wire::{BlockPiece, FilterCheckpoints, Filters};

use super::{Core, Engine, Event};
use crate::dispute::{Ask, Dispute, DisputeError, Outcome, Verdict};
use crate::filters::FilterAnswer;
use crate::reason::DropReason;
use crate::request::{Ids, Task};

/// A probe in flight: its id, the height asked and our filter header there.
#[derive(Clone, Copy, Debug)]
pub(super) struct Probe {
    id: u32,
    height: u32,
    ours: [u8; 32],
    /// Their header at `height`, once it came.
    theirs: Option<[u8; 32]>,
}

impl Engine {
    /// Probe the gateways not known to agree with our latest filter header, and send what
    /// a dispute asks.
    pub(super) fn schedule_checks(&mut self) {
        let c = &mut self.core;
        if c.stopped || !c.filters_on {
            return;
        }
        if let Some((t, hash)) = c.filters.reached()
            && let Some(ours) = c.filters.header_at(t)
        {
            for g in 0..c.gateways.len() {
                let gw = &c.gateways[g];
                if !gw.ready
                    || !gw.serves_filters
                    || gw.filter_conflict
                    || gw.probe.is_some()
                    || gw.probe_short
                    || gw.filter_agreed.is_some_and(|a| a >= t)
                    || c.filters.asked() == Some(g)
                {
                    continue;
                }
                let Some(conn) = self.conns[g].as_mut().filter(|p| p.is_ready()) else {
                    continue;
                };
                let id = c.next_check_id();
                if conn.request_filter_headers(id, t, hash).is_ok() {
                    if c.gateways.iter().all(|gw| gw.probe.is_none()) {
                        c.check_heard = c.now;
                    }
                    c.gateways[g].probe = Some(Probe {
                        id,
                        height: t,
                        ours,
                        theirs: None,
                    });
                }
            }
        }
        self.schedule_dispute();
    }

    fn schedule_dispute(&mut self) {
        let c = &mut self.core;
        if c.dispute.is_none() {
            c.start_next_dispute();
        }
        loop {
            let c = &mut self.core;
            let Some(d) = c.dispute.as_mut() else {
                return;
            };
            let height = d.height();
            let against = d.against;
            // A gateway on our side: it agrees with us at or above the disputed height.
            let ours = (0..c.gateways.len()).find(|&g| {
                let gw = &c.gateways[g];
                g != against
                    && gw.ready
                    && gw.serves_filters
                    && !gw.filter_conflict
                    && gw.filter_agreed.is_some_and(|a| a >= height)
            });
            let (g, ask) = match d.next_ask(ours) {
                Ok(Some(next)) => next,
                Ok(None) => return,
                Err(verdict) => {
                    c.finish_dispute(verdict);
                    continue;
                }
            };
            let Some(conn) = self.conns[g].as_mut().filter(|p| p.is_ready()) else {
                return;
            };
            if let Ask::Block { .. } = ask
                && !conn.serves_blocks()
            {
                d.no_block_from(g);
                continue;
            }
            c.check_heard = c.now;
            if let Err(e) = send(conn, ask) {
                self.drop_gateway(g, DropReason::Connection(e));
                return;
            }
        }
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

impl Core {
    fn next_check_id(&mut self) -> u32 {
        self.check_ids.next_id()
    }

    /// Gateway `g`'s filter headers differ from ours at `height` (it says `theirs`): it
    /// is not used for filters, the application hears of it, and a dispute settles it.
    pub(super) fn conflict(&mut self, g: usize, height: u32, theirs: [u8; 32]) {
        let gw = &mut self.gateways[g];
        if gw.filter_conflict {
            return;
        }
        gw.filter_conflict = true;
        gw.filter_agreed = gw.filter_agreed.map(|a| a.min(height.saturating_sub(1)));
        self.events
            .push_back(Event::FilterConflict { gateway: g, height });
        self.disputes.push_back((g, height, theirs));
    }

    fn start_next_dispute(&mut self) {
        while let Some((g, height, theirs)) = self.disputes.pop_front() {
            if self.gateways[g].ready {
                // A range of its own, so that a late answer to an earlier dispute is not
                // taken for this one's.
                let seq = self.check_ids.seq().wrapping_add(1 << 20);
                self.check_ids = Ids::starting_at(Task::Check, seq);
                let ids = self.check_ids.clone();
                self.dispute = Some(Dispute::new(g, height, theirs, self.filter_base, ids));
                self.check_heard = self.now;
                return;
            }
        }
    }

    /// A `filter_headers` message answering a cross-check request.
    pub(super) fn on_check_headers(
        &mut self,
        g: usize,
        a: FilterAnswer<'_>,
    ) -> Result<(), DropReason> {
        if let Some(mut p) = self.gateways[g].probe.filter(|p| p.id == a.id) {
            if let Some(&last) = a.headers.last() {
                if a.first_height + a.headers.len() as u32 - 1 != p.height {
                    return Err(DropReason::Dispute(DisputeError::OutOfOrder {
                        height: p.height,
                    }));
                }
                p.theirs = Some(last);
            }
            self.check_heard = self.now;
            if !a.flags.last {
                self.gateways[g].probe = Some(p);
                return Ok(());
            }
            self.gateways[g].probe = None;
            match p.theirs {
                // It has not these filter headers yet: asked again after its next tip.
                None => self.gateways[g].probe_short = true,
                Some(t) if t == p.ours => {
                    let gw = &mut self.gateways[g];
                    gw.filter_agreed = Some(gw.filter_agreed.map_or(p.height, |x| x.max(p.height)));
                }
                Some(t) => self.conflict(g, p.height, t),
            }
            return Ok(());
        }
        match self.dispute.as_mut().filter(|d| d.is_asked(g, a.id)) {
            Some(d) => {
                let outcome = d.on_filter_headers(&a);
                self.dispute_outcome(g, outcome)
            }
            None => self.given_up_answer(g, a.id, a.flags.last),
        }
    }

    /// A `filter_checkpoints` message (only disputes ask for them).
    pub(super) fn on_checkpoints(
        &mut self,
        g: usize,
        m: &FilterCheckpoints<'_>,
    ) -> Result<(), DropReason> {
        match self.dispute.as_mut().filter(|d| d.is_asked(g, m.id)) {
            Some(d) => {
                let outcome = d.on_checkpoints(m);
                self.dispute_outcome(g, outcome)
            }
            None => self.given_up_answer(g, m.id, m.flags.last),
        }
    }

    /// A `filters` message answering a dispute's request.
    pub(super) fn on_check_filters(&mut self, g: usize, m: &Filters<'_>) -> Result<(), DropReason> {
        match self.dispute.as_mut().filter(|d| d.is_asked(g, m.id)) {
            Some(d) => {
                let outcome = d.on_filters(g, m);
                self.dispute_outcome(g, outcome)
            }
            None => self.given_up_answer(g, m.id, m.flags.last),
        }
    }

    /// A `block` message (only disputes ask for blocks).
    pub(super) fn on_block(&mut self, g: usize, p: &BlockPiece<'_>) -> Result<(), DropReason> {
        match self.dispute.as_mut().filter(|d| d.is_asked(g, p.id)) {
            Some(d) => {
                let outcome = d.on_block(g, p);
                self.dispute_outcome(g, outcome)
            }
            None => self.given_up_answer(g, p.id, p.last),
        }
    }

    /// The store's answer to a dispute's read.
    pub(super) fn on_dispute_read(
        &mut self,
        from: u32,
        hashes: &[lightwire_chain::BlockHash],
        ours: &[[u8; 32]],
    ) {
        if let Some(d) = self.dispute.as_mut()
            && let Outcome::Over(verdict) = d.on_read(from, hashes, ours)
        {
            self.finish_dispute(verdict);
        }
    }

    /// What an answer did to the dispute. `g` is the gateway whose message it was: an
    /// error returned drops it; another gateway found bad is dropped by the engine after.
    fn dispute_outcome(&mut self, g: usize, outcome: Outcome) -> Result<(), DropReason> {
        self.check_heard = self.now;
        match outcome {
            Outcome::Going => Ok(()),
            Outcome::Over(verdict) => {
                self.finish_dispute(verdict);
                Ok(())
            }
            Outcome::Bad(bad, e) => {
                let against = self.dispute.as_ref().map(|d| d.against);
                if against == Some(bad) {
                    let height = self.dispute.as_ref().map_or(0, Dispute::height);
                    let verdict = match e {
                        DisputeError::FilterLacksOutput { .. } => Verdict::TheirsWrong { height },
                        _ => Verdict::Undecided { height },
                    };
                    self.finish_dispute(verdict);
                } else if let Some(d) = self.dispute.as_mut() {
                    // A gateway on our side that broke a rule: the dispute goes on with
                    // the others.
                    if let Some(v) = d.gateway_gone(bad) {
                        self.finish_dispute(v);
                    }
                }
                let why = DropReason::Dispute(e);
                if bad == g {
                    Err(why)
                } else {
                    self.drops.push_back((bad, why));
                    Ok(())
                }
            }
        }
    }

    /// The dispute is over: the application hears the verdict, and when ours was wrong,
    /// our filter headers from the disputed height on are dropped (stored ones with the
    /// next commit) and synced again, and the gateways that vouched for them are marked
    /// bad.
    pub(super) fn finish_dispute(&mut self, verdict: Verdict) {
        let Some(d) = self.dispute.take() else {
            return;
        };
        let against = d.against;
        self.events.push_back(Event::FilterDispute {
            gateway: against,
            verdict,
        });
        if let Verdict::OursWrong { height, prev, hash } = verdict {
            if let Some((a, id)) = self.filters.truncate(height - 1, prev) {
                self.remember_given_up(a, id);
            }
            self.filters.mark_below(height, hash);
            let tip = self.syncer.tip();
            self.filters.mark(tip.height, tip.hash);
            self.syncer.truncate_filters(height);
            self.stored_filters = self.stored_filters.map(|s| s.min(height - 1));
            if let Some(scan) = self.scan.as_mut() {
                let events = &mut self.events;
                let given_up: Vec<(usize, u32)> = scan
                    .reorg(height - 1, |c| events.push_back(super::scan_event(c)))
                    .collect();
                for (a, id) in given_up {
                    self.remember_given_up(a, id);
                }
            }
            for g in 0..self.gateways.len() {
                let gw = &mut self.gateways[g];
                if g != against && gw.filter_agreed.is_some_and(|a| a >= height) {
                    let why = DropReason::Dispute(DisputeError::FilterLacksOutput { height });
                    self.drops.push_back((g, why));
                }
            }
            let gw = &mut self.gateways[against];
            gw.filter_conflict = false;
            gw.filter_agreed = Some(height - 1);
        }
        self.start_next_dispute();
    }

    /// Gateway `g` is gone: its probe, its agreement and its part in a dispute.
    pub(super) fn check_gateway_gone(&mut self, g: usize) {
        let gw = &mut self.gateways[g];
        gw.probe = None;
        gw.probe_short = false;
        gw.filter_agreed = None;
        self.disputes.retain(|&(x, _, _)| x != g);
        if let Some(v) = self.dispute.as_mut().and_then(|d| d.gateway_gone(g)) {
            self.finish_dispute(v);
        }
    }

    /// When the cross-check's requests time out without an answer.
    pub(super) fn check_deadline(&self) -> Option<lightwire_proto::Millis> {
        let waiting = self.gateways.iter().any(|gw| gw.probe.is_some())
            || self
                .dispute
                .as_ref()
                .is_some_and(|d| !d.asked_gateways().is_empty());
        waiting.then(|| self.check_heard + super::REQUEST_TIMEOUT)
    }

    /// The gateways the cross-check waits on (to drop when it times out).
    pub(super) fn check_waiting_on(&self) -> Vec<usize> {
        let mut out: Vec<usize> = (0..self.gateways.len())
            .filter(|&g| self.gateways[g].probe.is_some())
            .collect();
        if let Some(d) = &self.dispute {
            out.extend(d.asked_gateways());
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}
