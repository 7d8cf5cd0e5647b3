//! Filter headers from a mirror's files (see `mirror.rs`), for the filter-header task.
//!
//! A filter-headers file runs from one checkpoint height to the next (BIP157's, every
//! 1,000 blocks). Its filter headers are linked from ours, as a gateway's answer is, and
//! held aside until the file ends; they are taken only when the last one is the filter
//! header every connected gateway that serves filters said it holds at that height (their
//! `filter_checkpoints`, asked of each with our best chain's tip as the stop), and at least
//! one said so. A filter-header chain is a hash chain: its last header commits to every
//! one before it, so a file that ends where the gateways agree holds what they would have
//! sent. Where they do not agree, or none can say, the mirror is not used for that range:
//! the gateways serve it and the cross-check and disputes settle who is wrong, as without
//! mirrors. A file whose last header is not the one they agree on drops its mirror.

use lightwire_primitives::FilterHeader;
use lightwire_wire::FilterCheckpoints;
use lightwire_wire::filters::FILTER_CHECKPOINT_INTERVAL;

use super::ctx::Ctx;
use super::mirror::{MirrorFault, MirrorId};
use crate::filters::FilterAnswer;
use crate::ids::{GatewayId, Ids, TaskId};
use crate::reason::DropReason;

/// Checkpoints are asked again of a gateway once our tip is this far past its last
/// answer's stop (or the headers are synced): about ten answers for a mainnet-sized
/// sync, 176 KB in all, instead of one at each file.
pub const CHECKPOINTS_EVERY: u32 = 100_000;

/// Most filter headers one file may hold: 20 checkpoint intervals (and genesis, in the
/// first). Its filter headers are held until it ends: 640 KB at most.
pub const MOST_PER_FILE: u32 = 20 * FILTER_CHECKPOINT_INTERVAL + 1;
const MOST: usize = MOST_PER_FILE as usize;

/// One gateway's filter checkpoints.
#[derive(Clone, Debug, Default)]
struct Said {
    /// The request in flight: its id and the stop's height.
    asked: Option<(u32, u32)>,
    /// The height its last whole answer reached (the stop's).
    stop: u32,
    /// Its filter headers at 1,000, 2,000, ... up to `stop`.
    list: Vec<FilterHeader>,
    /// Gathered from the answer in flight.
    gathering: Vec<FilterHeader>,
}

/// A mirror's filter-headers file being read.
#[derive(Clone, Debug)]
struct Reading {
    mirror: MirrorId,
    name: String,
    /// Its range.
    first: u32,
    last: u32,
    /// The first height taken from it (ours end below: a file may start before).
    from: u32,
    /// The filter header the gateways agree on at `last`.
    expected: FilterHeader,
    /// Ours before `from`: the file's header there must be it.
    before: FilterHeader,
    /// The height of the next header the file must bring, and the last it brought.
    at: u32,
    seen: Option<FilterHeader>,
    /// The answer's last message came; the body ended whole.
    answered: bool,
    ended: bool,
}

/// Where a file's checked filter headers start: the height of the first taken, and ours
/// before it.
pub type Start = (u32, FilterHeader);

/// What the filter-header task keeps for mirrors.
#[derive(Debug)]
pub struct BulkFilters {
    said: Vec<Said>,
    ids: Ids,
    reading: Option<Reading>,
    /// The file's filter headers so far (at most [`MOST`]; reused).
    got: Vec<FilterHeader>,
}

impl BulkFilters {
    /// Nothing said yet, for `gateways` gateways.
    pub fn new(gateways: usize) -> BulkFilters {
        BulkFilters {
            said: vec![Said::default(); gateways],
            ids: Ids::new(TaskId::FilterHeaders),
            reading: None,
            got: Vec::new(),
        }
    }

    /// Whether a file is being read.
    pub fn is_reading(&self) -> bool {
        self.reading.is_some()
    }

    /// The filter header every connected gateway serving filters said it holds at
    /// `height` (a checkpoint height), when at least one said and none said otherwise.
    pub fn agreed(&self, ctx: &Ctx, height: u32) -> Option<FilterHeader> {
        let i = (height / FILTER_CHECKPOINT_INTERVAL).checked_sub(1)? as usize;
        let mut agreed = None;
        for (g, gw) in ctx.gateways.with_ids() {
            if !gw.ready || !gw.serves_filters {
                continue;
            }
            match self.said[g.index()].list.get(i) {
                Some(h) if agreed.is_none_or(|a| a == *h) => agreed = Some(*h),
                Some(_) => return None,
                // One that cannot say yet: it is asked (or its chain is behind ours).
                None if self.said[g.index()].asked.is_some() => return None,
                None => {}
            }
        }
        agreed
    }

    /// Whether gateway `g` is to be asked for checkpoints now, for a file ending at
    /// `needed`, with our tip at `tip` (`synced`: the headers have nothing more to fetch)
    /// and the mirrors' filter-headers files reaching `mirrors_top`: it serves filters,
    /// has no request in flight, and its answer does not reach `needed` yet, once the tip
    /// is far enough past it (see [`CHECKPOINTS_EVERY`]) or the headers are synced.
    pub fn due(
        &self,
        ctx: &Ctx,
        g: GatewayId,
        needed: u32,
        (tip, synced): (u32, bool),
        mirrors_top: u32,
    ) -> bool {
        let (gw, s) = (&ctx.gateways[g], &self.said[g.index()]);
        gw.ready
            && gw.serves_filters
            && s.asked.is_none()
            && s.stop < needed
            && (synced || tip >= s.stop.saturating_add(CHECKPOINTS_EVERY) || tip >= mirrors_top)
    }

    /// A checkpoints request to gateway `g` with our tip at `stop` is about to go: its id.
    pub fn asking(&mut self, g: GatewayId, stop: u32) -> u32 {
        let id = self.ids.next_id();
        let s = &mut self.said[g.index()];
        s.asked = Some((id, stop));
        s.gathering.clear();
        id
    }

    /// Whether a checkpoints request is in flight to any gateway.
    pub fn asked_any(&self) -> bool {
        self.said.iter().any(|s| s.asked.is_some())
    }

    /// The gateways a checkpoints request is in flight to.
    pub fn asked_gateways(&self) -> impl Iterator<Item = GatewayId> + '_ {
        self.said
            .iter()
            .enumerate()
            .filter(|(_, s)| s.asked.is_some())
            .map(|(g, _)| GatewayId(g))
    }

    /// The request to `g` could not go.
    pub fn not_asked(&mut self, g: GatewayId) {
        self.said[g.index()].asked = None;
    }

    /// A `filter_checkpoints` message from `g` answering our request (or given up).
    pub fn on_checkpoints(
        &mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        m: &FilterCheckpoints<'_>,
    ) -> Result<(), DropReason> {
        let s = &mut self.said[g.index()];
        let Some((_, stop)) = s.asked.filter(|(id, _)| *id == m.id) else {
            return ctx.given_up_answer(g, m.id, m.flags.last);
        };
        let expected = (s.gathering.len() as u32 + 1) * FILTER_CHECKPOINT_INTERVAL;
        if m.count() > 0 && m.first_height != expected {
            return Err(DropReason::Filters(
                crate::filters::FilterSyncError::OutOfOrder {
                    expected,
                    got: m.first_height,
                },
            ));
        }
        // An answer's message is progress (as on any request of the task).
        ctx.timers.touch(TaskId::FilterHeaders, ctx.now);
        for (_, h) in m.iter() {
            if s.gathering.len() as u32 >= stop / FILTER_CHECKPOINT_INTERVAL {
                // More than the stop holds: more than was asked.
                return Err(DropReason::Filters(
                    crate::filters::FilterSyncError::PastStop { stop },
                ));
            }
            s.gathering.push(FilterHeader(*h));
        }
        if m.flags.last {
            s.asked = None;
            if !m.flags.stop_unknown {
                s.stop = stop;
                core::mem::swap(&mut s.list, &mut s.gathering);
                s.gathering.clear();
            }
        }
        Ok(())
    }

    /// Gateway `g` is gone: what it said may not hold on its next connection.
    pub fn gateway_gone(&mut self, g: GatewayId) {
        self.said[g.index()] = Said::default();
    }

    /// The best chain switched branches at `fork`: what was said above it is of the old
    /// branch. Returns whether a file being read was given up (its range above the fork).
    pub fn reorg(&mut self, fork: u32) -> Option<MirrorId> {
        for s in &mut self.said {
            let keep = (fork / FILTER_CHECKPOINT_INTERVAL) as usize;
            s.list.truncate(keep);
            s.stop = s.stop.min(fork);
        }
        let r = self.reading.take_if(|r| r.last > fork)?;
        Some(r.mirror)
    }

    /// Start reading a file of mirror `m` (`name`, from `first` to `last`) for the filter
    /// headers from `from` on, ours before `from` being `before`, the gateways agreeing on
    /// `expected` at its end.
    pub fn start(
        &mut self,
        m: MirrorId,
        name: String,
        (first, from, last): (u32, u32, u32),
        before: FilterHeader,
        expected: FilterHeader,
    ) {
        self.got.clear();
        self.reading = Some(Reading {
            mirror: m,
            name,
            first,
            last,
            from,
            expected,
            before,
            at: first,
            seen: None,
            answered: false,
            ended: false,
        });
    }

    /// A `filter_headers` record of the file mirror `m` is streaming: it must follow on
    /// from what came before it, within the file's range.
    pub fn on_record(&mut self, m: MirrorId, answer: FilterAnswer<'_>) -> Result<(), MirrorFault> {
        let Some(r) = self.reading.as_mut().filter(|r| r.mirror == m) else {
            return Ok(());
        };
        let wrong = || MirrorFault::WrongRange(r.name.clone());
        if r.answered {
            return Err(wrong());
        }
        r.answered = answer.flags.last;
        if answer.headers.is_empty() {
            return Ok(());
        }
        let count = answer.headers.len() as u32;
        if answer.first_height != r.at
            || r.at + count - 1 > r.last
            || r.at + count - r.first > MOST as u32
        {
            return Err(wrong());
        }
        // Linked across messages as within one (the proto crate checks that its segments
        // join), and from ours: the file's header before `from` must be ours.
        let contradicted = || MirrorFault::FilterHeadersContradicted(r.name.clone());
        let anchor_of_from = (r.from == r.at).then_some(answer.before);
        if r.seen.is_some_and(|s| s != answer.before) {
            return Err(contradicted());
        }
        for (i, h) in answer.headers.iter().enumerate() {
            let height = r.at + i as u32;
            if height + 1 == r.from && *h != r.before {
                return Err(contradicted());
            }
            if height >= r.from {
                self.got.push(*h);
            }
        }
        if anchor_of_from.is_some_and(|a| a != r.before) {
            return Err(contradicted());
        }
        r.at += count;
        r.seen = answer.headers.last().copied();
        Ok(())
    }

    /// The body of the file ended whole and of the right hash.
    pub fn body_ended(&mut self, m: MirrorId) -> Result<(), MirrorFault> {
        let Some(r) = self.reading.as_mut().filter(|r| r.mirror == m) else {
            return Ok(());
        };
        if !r.answered {
            return Err(MirrorFault::WrongRange(r.name.clone()));
        }
        r.ended = true;
        Ok(())
    }

    /// The file read, once its body ended, with its mirror: the height of its first filter
    /// header and ours before it, when it is whole and ends on what the gateways agree on
    /// (its headers are then [`Self::got`]); `Err` drops the mirror.
    pub fn finished(&mut self) -> Option<(MirrorId, Result<Start, MirrorFault>)> {
        let r = self.reading.take_if(|r| r.ended)?;
        let whole = self.got.len() == (r.last + 1).saturating_sub(r.from) as usize;
        let result = if !whole {
            Err(MirrorFault::WrongRange(r.name))
        } else if self.got.last() != Some(&r.expected) {
            Err(MirrorFault::FilterHeadersContradicted(r.name))
        } else {
            Ok((r.from, r.before))
        };
        Some((r.mirror, result))
    }

    /// The filter headers of the file last read.
    pub fn got(&self) -> &[FilterHeader] {
        &self.got
    }

    /// Mirror `m` was dropped: its file is not read further.
    pub fn mirror_gone(&mut self, m: MirrorId) {
        self.reading.take_if(|r| r.mirror == m);
    }

    /// The gateways that said `header` at `height`: they agree with ours up to it.
    pub fn agreeing(
        &self,
        height: u32,
        header: FilterHeader,
    ) -> impl Iterator<Item = GatewayId> + '_ {
        let i = (height / FILTER_CHECKPOINT_INTERVAL).wrapping_sub(1) as usize;
        self.said
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.list.get(i) == Some(&header))
            .map(|(g, _)| GatewayId(g))
    }
}
