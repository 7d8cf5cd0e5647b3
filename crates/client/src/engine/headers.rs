//! The headers task: which gateway is asked for headers, what its answers do to the best
//! chain, ancestors read from the store for a fork below the validation window, commits,
//! and gateways that announce tips they do not deliver.
//!
//! - The target is the announced tip claiming the most work above ours (a hint); the
//!   request goes to the gateway that announced it. What counts is the work of the headers
//!   that arrive: `lightwire-chain` follows the valid chain with the most work.
//! - A gateway whose answer ends short of its announced tip is not asked for that tip
//!   again; the third such tip (or request without progress) marks it bad.
//! - A header more than two hours ahead of our clock is "not yet", as in Bitcoin Core: the
//!   headers before it are kept, its gateway is neither dropped nor struck, and its tip
//!   is set aside until it announces another.
//! - While a mirror's file holds the next header, the request goes to the mirror instead
//!   (`mirror.rs`): the file is the whole answer, validated the same way; the gateways
//!   are asked for what lies above the mirror's files.

use std::collections::VecDeque;

use lightwire_chain::{BlockHash, Chain, Entry, Header, Work};
use lightwire_store::{Durability, Pending, Tip};
use lightwire_wire::filters::FILTER_CHECKPOINT_INTERVAL;

use super::ctx::{Broke, Conns, Ctx, Effect, ready};
use super::gateway::GatewayState;
use super::mirror::{MirrorFault, MirrorId};
use super::task::{Task, View};
use crate::ids::{GatewayId, TaskId};
use crate::reason::DropReason;
use crate::sync::{NotYet, Step, SyncError, Syncer};

/// Mark a gateway bad after this many announced tips it did not deliver.
pub const MAX_UNDELIVERED: u32 = 3;

/// Who was asked for the headers an answer brings.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Asker {
    /// A gateway.
    Gateway(GatewayId),
    /// A mirror (its file is the answer).
    Mirror(MirrorId),
}

/// The request in flight to a mirror: its file is the answer.
#[derive(Clone, Debug)]
struct MirrorAsk {
    mirror: MirrorId,
    id: u32,
    /// The file's last height, and its name.
    last: u32,
    name: String,
    /// The answer's last message came.
    answered: bool,
    /// The body ended, whole and of the right hash.
    ended: bool,
}

/// The headers task's state.
pub struct Headers {
    /// The best chain and the requests for it.
    pub syncer: Syncer,
    /// The network's minimum chain work: below it nothing is reported synced.
    min_work: Work,
    /// The gateway the target came from, which the next request goes to.
    source: Option<GatewayId>,
    /// The gateway the request in flight went to.
    asked: Option<GatewayId>,
    locator: Vec<BlockHash>,
    /// The request in flight to a mirror, if it went to one.
    mirror: Option<MirrorAsk>,
    /// An answer whose parent is below the window: who sent it and the parent; its
    /// headers in `deferred`, kept until the shell reads the ancestors from the store.
    ancestors: Option<(Asker, BlockHash)>,
    deferred: Vec<u8>,
    /// The rest of that answer, held until the ancestors come: (id, last, headers).
    held: VecDeque<(u32, bool, Vec<u8>)>,
    /// A commit taken by the shell is in flight.
    committing: bool,
    /// The height up to which the filter-header checkpoint heights validated this session
    /// were told to the other tasks (see [`Self::carry`]).
    marked: u32,
}

impl Headers {
    /// The task resumed on `chain`, whose stored tip is `stored`.
    pub fn new(chain: Chain, stored: &Tip) -> Headers {
        let min_work = chain.params().min_chain_work();
        Headers {
            syncer: Syncer::new(chain, stored),
            min_work,
            source: None,
            asked: None,
            mirror: None,
            locator: Vec::with_capacity(lightwire_wire::sync::MAX_LOCATOR),
            ancestors: None,
            deferred: Vec::new(),
            held: VecDeque::new(),
            committing: false,
            marked: stored.height,
        }
    }

    /// The gateway headers come from (others are preferred for the other streams).
    pub fn source(&self) -> Option<GatewayId> {
        self.source
    }

    /// Whether nothing is missing (see [`super::Engine::is_synced`]).
    pub fn is_synced(&self, ctx: &Ctx) -> bool {
        self.syncer.tip().chainwork >= self.min_work
            && self.syncer.is_synced()
            && self.syncer.uncommitted() == 0
            && !self.committing
            && ctx.gateways.iter().any(|g| g.tip.is_some())
    }

    /// Gateway `g` announced a tip.
    pub fn on_tip(&mut self, ctx: &mut Ctx, g: GatewayId, height: u32, header: Header, work: Work) {
        let gw = &mut ctx.gateways[g];
        gw.tip = Some((height, header, work));
        if gw.undelivered == Some(header.block_hash()) {
            // Announced again, still not delivered: not a target again.
            return;
        }
        if self.syncer.on_tip(height, &header, work) {
            if self.asked.is_some_and(|a| a != g) {
                // A better tip elsewhere: the request in flight to another gateway is
                // given up, with any answer held for ancestors.
                self.give_up(ctx);
                self.asked = None;
                self.ancestors = None;
                self.held.clear();
            }
            self.source = Some(g);
        }
    }

    /// A `headers` message from gateway `g`.
    pub fn on_headers(
        &mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        id: u32,
        headers: &[u8],
        hashes: &[BlockHash],
        last: bool,
    ) -> Result<(), DropReason> {
        if self.asked != Some(g) || self.syncer.in_flight_id() != Some(id) {
            return ctx.given_up_answer(g, id, last);
        }
        if self.ancestors.is_some() || !self.held.is_empty() {
            // Waiting for ancestors from the store: the rest of the answer is held, at most
            // one request's worth (a deep fork only); more is more than was asked for.
            let asked = self.syncer.request_size;
            if !self.hold(id, last, headers, asked) {
                return Err(DropReason::Sync(SyncError::TooManyHeaders { asked }));
            }
            return Ok(());
        }
        let now = ctx.now.as_secs();
        let step = self
            .syncer
            .on_headers_hashed(id, headers, Some(hashes), last, now);
        self.take_step(ctx, step, Asker::Gateway(g), headers)
    }

    /// Hold part of an answer (request `id`, `last` its end) while ancestors are read from
    /// the store: false, holding nothing, when what is held would pass `most` headers.
    fn hold(&mut self, id: u32, last: bool, headers: &[u8], most: u32) -> bool {
        let held: usize = self.held.iter().map(|(_, _, h)| h.len()).sum();
        let held = held + self.deferred.len() + headers.len();
        if held > most as usize * lightwire_chain::HEADER_LEN {
            return false;
        }
        self.held.push_back((id, last, headers.to_vec()));
        true
    }

    /// Headers from the file mirror `m` is streaming (the answer to the request made of
    /// it): validated as a gateway's answer is. A fault drops the mirror.
    pub fn on_mirror_headers(
        &mut self,
        ctx: &mut Ctx,
        m: MirrorId,
        headers: &[u8],
        hashes: &[BlockHash],
        last: bool,
    ) -> Result<(), MirrorFault> {
        let Some(ask) = self.mirror.as_mut().filter(|a| a.mirror == m) else {
            return Ok(());
        };
        if ask.answered {
            // Records after the one that ended the answer.
            return Err(MirrorFault::WrongRange(ask.name.clone()));
        }
        ask.answered = last;
        let (id, most) = (ask.id, ask.last.saturating_add(1));
        // A file's range may start below our tip (at genesis, say): the headers it holds
        // that our best chain has at their heights already are passed over, as a gateway
        // answering a locator would not send them.
        let known = hashes
            .iter()
            .take_while(|h| self.syncer.height_on_best(h).is_some())
            .count();
        self.syncer.skip_known(known as u32);
        let (headers, hashes) = (
            &headers[known * lightwire_chain::HEADER_LEN..],
            &hashes[known..],
        );
        if headers.is_empty() && !last {
            return Ok(());
        }
        if self.ancestors.is_some() || !self.held.is_empty() {
            // Waiting for ancestors, as a gateway's answer may: at most the file's range.
            if !self.hold(id, last, headers, most) {
                return Err(mirror_fault(
                    DropReason::Sync(SyncError::TooManyHeaders { asked: most }),
                    &self.mirror,
                ));
            }
            return Ok(());
        }
        let now = ctx.now.as_secs();
        let step = self
            .syncer
            .on_headers_hashed(id, headers, Some(hashes), last, now);
        self.take_step(ctx, step, Asker::Mirror(m), headers)
            .map_err(|e| mirror_fault(e, &self.mirror))
    }

    /// The body of the mirror's file ended whole and of the right hash.
    pub fn mirror_body_ended(&mut self, m: MirrorId) -> Result<(), MirrorFault> {
        let Some(ask) = self.mirror.as_mut().filter(|a| a.mirror == m) else {
            return Ok(());
        };
        if !ask.answered {
            return Err(MirrorFault::WrongRange(ask.name.clone()));
        }
        ask.ended = true;
        Ok(())
    }

    /// The mirror's answer, once its body ended and every header of it was validated:
    /// taken, `Err` when its headers did not become our best chain to the file's end
    /// (another chain, or a branch with less work than ours).
    pub fn mirror_finished(&mut self) -> Option<(MirrorId, Result<(), MirrorFault>)> {
        let ask = self.mirror.as_ref()?;
        if !ask.ended
            || self.ancestors.is_some()
            || !self.held.is_empty()
            || self.syncer.in_flight_id() == Some(ask.id)
        {
            return None;
        }
        let ask = self.mirror.take()?;
        let result = if self.syncer.tip().height < ask.last {
            Err(MirrorFault::NotOurChain(ask.name))
        } else {
            Ok(())
        };
        Some((ask.mirror, result))
    }

    /// Mirror `m` was dropped: its request is given up (nothing more of it is read), and
    /// the gateways' tips are taken again.
    pub fn mirror_gone(&mut self, ctx: &mut Ctx, m: MirrorId) {
        let Some(ask) = self.mirror.take_if(|a| a.mirror == m) else {
            return;
        };
        if self.syncer.in_flight_id() == Some(ask.id) {
            self.syncer.abandon();
        }
        if self.ancestors.is_some_and(|(a, _)| a == Asker::Mirror(m)) || !self.held.is_empty() {
            self.ancestors = None;
            self.held.clear();
            self.deferred.clear();
        }
        self.offer_tips(ctx);
    }

    /// What follows a validated step: effects for the other tasks, ancestors to read (the
    /// batch `headers` kept until they come), or the gateway dropped as bad.
    fn take_step(
        &mut self,
        ctx: &mut Ctx,
        step: Result<Step, SyncError>,
        who: Asker,
        headers: &[u8],
    ) -> Result<(), DropReason> {
        let step = step.map_err(DropReason::Sync)?;
        let Asker::Gateway(g) = who else {
            // A mirror's file: no strikes (its whole file is checked when it ends), and a
            // header not yet valid in a sealed file is a fault of the file.
            if let Some(n) = step.not_yet {
                return Err(DropReason::Sync(SyncError::NotYet(n)));
            }
            self.carry(ctx, &step, who, headers);
            return Ok(());
        };
        if step.progress {
            // Validated progress is what keeps a request alive (not messages), and clears
            // the count of tips announced and not delivered: those were honest reorgs (an
            // answer ends before the new tip is announced), not lies.
            ctx.timers.touch(TaskId::Headers, ctx.now);
            ctx.gateways[g].undelivered_count = 0;
        } else if step.empty_answer && !step.target_dropped {
            // An answer that brought nothing, while a newer tip was announced: one strike,
            // as an undelivered tip (a gateway announcing a "higher" tip before each empty
            // answer would otherwise stay the target for ever).
            let gw = &mut ctx.gateways[g];
            gw.undelivered_count += 1;
            if gw.undelivered_count >= MAX_UNDELIVERED {
                return Err(DropReason::Undelivered(MAX_UNDELIVERED));
            }
        }
        self.carry(ctx, &step, who, headers);
        if step.target_dropped {
            ctx.gateways[g].undelivered_pending = true;
        }
        if let Some(n) = step.not_yet {
            self.not_yet(ctx, g, n, step.given_up);
        }
        Ok(())
    }

    /// What a validated step tells the other tasks (a reorg, headers validated), and the
    /// ancestors it needs read.
    fn carry(&mut self, ctx: &mut Ctx, step: &Step, who: Asker, headers: &[u8]) {
        let tip = self.syncer.tip();
        if let Some((old, fork)) = step.reorg {
            ctx.effects.push_back(Effect::Reorg {
                old,
                new: Tip::from(tip),
                fork,
            });
        }
        if step.progress || step.reorg.is_some() {
            if let Some((_, fork)) = step.reorg {
                self.marked = self.marked.min(fork);
            }
            // Each checkpoint height (BIP157's, every 1,000 blocks) validated, ascending
            // and before the tip: a mirror's filter-headers file ends on one, and the
            // gateways are asked of their filter header there with its block as the stop
            // (`bulk_filters.rs`). A step is at most one request's headers, within the
            // window; one that is not has its heights left out (checkpoints are asked).
            let (interval, (height, hash)) = (FILTER_CHECKPOINT_INTERVAL, (tip.height, tip.hash));
            let mut at = (self.marked / interval + 1) * interval;
            while at < height {
                if let Some(hash) = self.syncer.hash_on_best(at) {
                    ctx.effects
                        .push_back(Effect::Validated { height: at, hash });
                }
                at += interval;
            }
            self.marked = self.marked.max(height);
            ctx.effects.push_back(Effect::Validated { height, hash });
        }
        if let Some(parent) = step.need_ancestors {
            self.deferred.clear();
            self.deferred.extend_from_slice(headers);
            self.ancestors = Some((who, parent));
        }
    }

    /// Gateway `g`'s answer reached a header not yet valid (see [`NotYet`]): the gateway
    /// stays connected and unpunished, as in Core, but the tip it announced is set aside
    /// until it announces another (or reconnects), without a strike, and the others' tips
    /// are taken: a gateway that ends every answer so holds nobody back. The application
    /// hears of it, with the gateway's state unchanged.
    fn not_yet(&mut self, ctx: &mut Ctx, g: GatewayId, n: NotYet, given_up: Option<u32>) {
        if let Some(id) = given_up {
            ctx.give_up(g, id);
        }
        // What was held of the same answer builds on that header: not read either.
        self.held.clear();
        self.asked = None;
        if self.source == Some(g) {
            self.source = None;
        }
        let gw = &mut ctx.gateways[g];
        gw.undelivered = gw.tip.map(|(_, h, _)| h.block_hash());
        let state = gw.state;
        ctx.set_state(g, state, Some(DropReason::Sync(SyncError::NotYet(n))));
        self.offer_tips(ctx);
    }

    /// An answer's batch starts below the validation window: once nothing is uncommitted,
    /// the parent hash and the batch's headers to look up in the store.
    pub fn need_ancestors(&self) -> Option<(BlockHash, &[u8])> {
        if self.syncer.uncommitted() > 0 || self.committing {
            return None;
        }
        self.ancestors.map(|(_, hash)| (hash, &self.deferred[..]))
    }

    /// The ancestors came: the deferred batch, then what was held, until it runs out or
    /// needs ancestors again. An error names the gateway to drop.
    pub fn on_ancestors(
        &mut self,
        ctx: &mut Ctx,
        found: Option<(&[Entry], usize)>,
    ) -> Result<(), (Asker, DropReason)> {
        let Some((g, _)) = self.ancestors.take() else {
            return Ok(());
        };
        let Some((entries, known)) = found else {
            let base = self.syncer.base_height();
            let reason = if base > 0 {
                DropReason::OffCheckpoint(base)
            } else {
                DropReason::Orphan
            };
            return Err((g, reason));
        };
        let now = ctx.now.as_secs();
        let skip = (known * lightwire_chain::HEADER_LEN).min(self.deferred.len());
        let step = self
            .syncer
            .on_ancestors(entries, &self.deferred[skip..], now);
        self.take_step(ctx, step, g, &[]).map_err(|e| (g, e))?;
        while self.ancestors.is_none() {
            let Some((id, last, headers)) = self.held.pop_front() else {
                break;
            };
            let step = self.syncer.on_headers(id, &headers, last, now);
            self.take_step(ctx, step, g, &headers).map_err(|e| (g, e))?;
        }
        Ok(())
    }

    /// A commit to start, if one is due, moved into `into`.
    pub fn take_commit(&mut self, into: &mut Pending) -> Option<Durability> {
        let taken = if self.ancestors.is_some() {
            // Everything validated must be stored before ancestors are read from it.
            self.syncer.take_all(into)
        } else {
            self.syncer.take_commit(into)
        };
        self.committing |= taken.is_some();
        taken
    }

    /// Whether a commit is in flight.
    pub fn is_committing(&self) -> bool {
        self.committing
    }

    /// The commit in flight completed.
    pub fn committed(&mut self) {
        self.committing = false;
    }

    /// A gateway whose answer ended short of its announced tip, if any (see
    /// [`Self::undeliver`]).
    pub fn take_undelivered(ctx: &mut Ctx) -> Option<GatewayId> {
        let (g, _) = ctx
            .gateways
            .with_ids()
            .find(|(_, gw)| gw.undelivered_pending)?;
        ctx.gateways[g].undelivered_pending = false;
        Some(g)
    }

    /// Gateway `g` did not deliver the tip it announced: the target is not set from that
    /// announcement again, the other gateways' tips are considered, and a gateway that
    /// keeps announcing what it does not deliver is to be marked bad (returned).
    pub fn undeliver(&mut self, ctx: &mut Ctx, g: GatewayId) -> Option<DropReason> {
        let gw = &mut ctx.gateways[g];
        gw.undelivered = gw.tip.map(|(_, h, _)| h.block_hash());
        gw.undelivered_count += 1;
        if gw.undelivered_count >= MAX_UNDELIVERED {
            return Some(DropReason::Undelivered(MAX_UNDELIVERED));
        }
        if self.source == Some(g) {
            self.source = None;
        }
        self.offer_tips(ctx);
        None
    }

    /// Offer the connected gateways' announced tips (not the undelivered ones) to the
    /// syncer; the best one becomes the target, its gateway the source.
    fn offer_tips(&mut self, ctx: &Ctx) {
        for (g, gw) in ctx.gateways.with_ids() {
            if let Some((height, header, work)) = gw.tip
                && gw.undelivered != Some(header.block_hash())
                && gw.ready
                && self.syncer.on_tip(height, &header, work)
            {
                self.source = Some(g);
            }
        }
    }

    /// Give up the request in flight, remembering its id with the gateway it was sent to
    /// (while that gateway is connected) so that the rest of its answer is let through.
    fn give_up(&mut self, ctx: &mut Ctx) {
        let (Some(id), Some(a)) = (self.syncer.abandon(), self.asked) else {
            return;
        };
        if ctx.gateways[a].ready {
            ctx.give_up(a, id);
        }
    }

    /// The target's gateway is gone: give up its request and take the best tip the
    /// others announced.
    fn retarget(&mut self, ctx: &mut Ctx) {
        self.give_up(ctx);
        self.syncer.clear_target();
        self.source = None;
        self.asked = None;
        self.offer_tips(ctx);
    }

    /// Set Syncing/Synced on the connected gateways; a gateway serving in full has its
    /// count of undelivered tips cleared.
    pub fn update_states(&self, ctx: &mut Ctx) {
        let tip = self.syncer.tip();
        let stored = self.syncer.uncommitted() == 0 && !self.committing;
        for g in ctx.gateways.ids() {
            let gw = &ctx.gateways[g];
            if !matches!(gw.state, GatewayState::Syncing | GatewayState::Synced) {
                continue;
            }
            let ours = gw
                .tip
                .is_some_and(|(_, h, w)| w <= tip.chainwork || h.block_hash() == tip.hash);
            // Synced: its announced tip is ours (or behind it) and stored. A gateway whose
            // claimed tip never came stays "syncing", and its count of undelivered tips
            // is kept.
            let state = if ours && stored && tip.chainwork >= self.min_work {
                GatewayState::Synced
            } else {
                GatewayState::Syncing
            };
            // Not its backoff: a gateway is "synced" right after its handshake, and one that
            // then misbehaves at once would be reconnected at once, again and again (its
            // backoff starts over after a healthy session instead).
            if state == GatewayState::Synced {
                ctx.gateways[g].undelivered_count = 0;
            }
            ctx.set_state(g, state, None);
        }
    }
}

/// What a drop reason met in a mirror's file means for the mirror (`ask`: its request).
fn mirror_fault(e: DropReason, ask: &Option<MirrorAsk>) -> MirrorFault {
    let name = || ask.as_ref().map(|a| a.name.clone()).unwrap_or_default();
    match e {
        DropReason::Sync(SyncError::Invalid(e)) => MirrorFault::Invalid(e),
        DropReason::Sync(SyncError::NotYet(n)) => MirrorFault::NotYet(n),
        // More headers than its range, or records after its last.
        DropReason::Sync(_) => MirrorFault::WrongRange(name()),
        _ => MirrorFault::NotOurChain(name()),
    }
}

impl Headers {
    /// [`mirror_fault`] for the mirror's request in flight.
    pub fn mirror_fault(&self, e: DropReason) -> MirrorFault {
        mirror_fault(e, &self.mirror)
    }
}

impl Task for Headers {
    fn schedule(&mut self, ctx: &mut Ctx, conns: &mut Conns, _: &View) -> Result<(), Broke> {
        if self.ancestors.is_some() || self.mirror.is_some() || ctx.stopped {
            return Ok(());
        }
        if self.committing && self.syncer.uncommitted() >= self.syncer.commit_every {
            // A whole commit waits behind the one in flight: ask for more once it is
            // done, so that what is gathered stays bounded however slow the store is.
            return Ok(());
        }
        // A mirror's file holding the next header answers before any gateway is asked
        // (nor is one asked while a manifest is read, at most its timeout).
        if ctx.mirrors.reading_manifest() {
            return Ok(());
        }
        let next = self.syncer.tip().height + 1;
        if self.asked.is_none()
            && let Some((m, file)) = ctx.mirrors.headers_file(next)
            && let Some((id, _)) = self
                .syncer
                .next_request_of(file.last - file.first + 1, &mut self.locator)
        {
            let file = file.clone();
            self.mirror = Some(MirrorAsk {
                mirror: m,
                id,
                last: file.last,
                name: file.name.clone(),
                answered: false,
                ended: false,
            });
            let now = ctx.now;
            ctx.mirrors
                .start(m, file, super::mirror::Kind::Headers, now, &mut ctx.actions);
            return Ok(());
        }
        let Some(g) = self.source else {
            return Ok(());
        };
        let Some(conn) = ready(conns, g) else {
            return Ok(());
        };
        if let Some((id, n)) = self.syncer.next_request(&mut self.locator) {
            self.asked = Some(g);
            ctx.timers.touch(TaskId::Headers, ctx.now);
            if let Err(e) = conn.request(id, n, &self.locator) {
                // Cannot happen on a ready connection; treat it as a broken one.
                return Err((g, e));
            }
        }
        Ok(())
    }

    fn deadline(&self, ctx: &Ctx) -> Option<lightwire_proto::Millis> {
        let waiting = self.asked.is_some() && self.syncer.in_flight() && self.ancestors.is_none();
        ctx.timers.deadline(TaskId::Headers, waiting)
    }

    /// The request ran out of time: its gateway is dropped (reconnected later, and
    /// counted as a tip not delivered; the third time it is marked bad).
    fn timed_out(&mut self, ctx: &mut Ctx) -> Vec<(GatewayId, DropReason)> {
        let Some(g) = self.asked else {
            return Vec::new();
        };
        let gw = &mut ctx.gateways[g];
        gw.undelivered_count += 1;
        let why = if gw.undelivered_count >= MAX_UNDELIVERED {
            DropReason::Undelivered(MAX_UNDELIVERED)
        } else {
            DropReason::RequestTimeout
        };
        vec![(g, why)]
    }

    /// What it was asked, and an answer held for ancestors, go; if it was the target's
    /// gateway, the best tip the others announced is taken.
    fn gateway_gone(&mut self, ctx: &mut Ctx, g: GatewayId) {
        if self.ancestors.is_some_and(|(a, _)| a == Asker::Gateway(g)) || self.asked == Some(g) {
            self.ancestors = None;
            self.held.clear();
            self.deferred.clear();
        }
        if self.source == Some(g) || self.asked == Some(g) {
            self.retarget(ctx);
        }
    }
}
