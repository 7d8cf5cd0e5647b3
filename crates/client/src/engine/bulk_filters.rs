//! Filter headers from a mirror's files (see `mirror.rs`), for the filter-header task.
//!
//! A filter-headers file runs from one checkpoint height to the next (BIP157's, every
//! 1,000 blocks). Its filter headers are linked from ours, as a gateway's answer is, and
//! held aside until the file ends; they are taken only when the last one is the filter
//! header every connected gateway that serves filters said it holds at that height, and
//! at least one said so. What a gateway says there is asked with a *probe*: a
//! `get_filter_headers` for the file's last height alone, stopping at our block there
//! (about 100 bytes each way), once our headers reach it. Where our block hash there is
//! not known (the headers came from the store, not validated this session), the gateway's
//! `filter_checkpoints` are asked instead, with our best chain's tip as the stop: the
//! whole list from genesis, 32 bytes a thousand blocks, so asked seldom (see
//! [`CHECKPOINTS_EVERY`]). A probe per file lets the filter headers keep pace with the
//! headers (checkpoints asked every 100,000 headers left up to 100,000 filter headers to
//! read once the headers were in) and costs the gateways less. Where they are probed,
//! every one must have answered at the file's end before it is taken.
//!
//! A filter-header chain is a hash chain: its last header commits to every one before
//! it, so a file that ends where the gateways agree holds what they would have sent.
//! Where they do not agree, or none can say, the mirror is not used for that range: the
//! gateways serve it and the cross-check and disputes settle who is wrong, as without
//! mirrors. A file whose last header is not the one they agree on drops its mirror.

use lightwire_primitives::FilterHeader;
use lightwire_wire::FilterCheckpoints;
use lightwire_wire::filters::FILTER_CHECKPOINT_INTERVAL;

use super::ctx::Ctx;
use super::mirror::{MirrorFault, MirrorId};
use crate::filters::{FilterAnswer, FilterSyncError};
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

/// Where the ids of probes and checkpoint requests start, in the task's id space.
const PROBE_IDS: u32 = 1 << 27;

/// The files' ends probed ahead of the one being read, per gateway: their answers come
/// while the files before them are read (each probe is a round trip).
pub const PROBES_AHEAD: usize = 8;

/// One gateway's filter checkpoints, and its probes.
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
    /// Its probes, ascending by height: at most [`PROBES_AHEAD`], those below our filter
    /// headers forgotten.
    probes: Vec<Probe>,
}

/// A probe of one height.
#[derive(Clone, Copy, Debug)]
struct Probe {
    height: u32,
    /// Its id while in flight.
    id: Option<u32>,
    /// What it said: its filter header there (none when it lacks it, or not yet).
    said: Option<FilterHeader>,
}

impl Said {
    /// What it said of `height`: its filter header there, or `None` when it cannot say
    /// (not asked, or it lacks it).
    fn at(&self, height: u32) -> Option<FilterHeader> {
        let listed = (height % FILTER_CHECKPOINT_INTERVAL == 0)
            .then(|| (height / FILTER_CHECKPOINT_INTERVAL).checked_sub(1))
            .flatten()
            .and_then(|i| self.list.get(i as usize).copied());
        listed.or_else(|| self.probe(height).and_then(|p| p.said))
    }

    fn probe(&self, height: u32) -> Option<&Probe> {
        self.probes.iter().find(|p| p.height == height)
    }

    /// Whether it answered for `height`: its checkpoints reach it, or a probe there was
    /// answered (with its filter header, or that it lacks it).
    fn answered(&self, height: u32) -> bool {
        let listed = height % FILTER_CHECKPOINT_INTERVAL == 0
            && (height / FILTER_CHECKPOINT_INTERVAL) as usize <= self.list.len()
            && height > 0;
        listed || self.probe(height).is_some_and(|p| p.id.is_none())
    }

    /// Whether a request of ours that may say what it holds at `height` is in flight.
    fn asked_at(&self, height: u32) -> bool {
        self.asked.is_some() || self.probe(height).is_some_and(|p| p.id.is_some())
    }

    /// Whether a request of ours is in flight to it.
    fn asked(&self) -> bool {
        self.asked.is_some() || self.probes.iter().any(|p| p.id.is_some())
    }
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
    /// Probes and checkpoints requests sent this session.
    sent: (u64, u64),
}

impl BulkFilters {
    /// Nothing said yet, for `gateways` gateways.
    pub fn new(gateways: usize) -> BulkFilters {
        BulkFilters {
            said: vec![Said::default(); gateways],
            // Probes are `get_filter_headers` as the task's own requests are, and answered
            // by the same messages: their ids are from another range (the task's would
            // need 2^27 requests in one session to reach it).
            ids: Ids::starting_at(TaskId::FilterHeaders, PROBE_IDS),
            reading: None,
            got: Vec::new(),
            sent: (0, 0),
        }
    }

    /// Whether a file is being read.
    pub fn is_reading(&self) -> bool {
        self.reading.is_some()
    }

    /// The filter header every connected gateway serving filters said it holds at
    /// `height`, when at least one said and none said otherwise. With `probed` (the
    /// gateways are probed there), every one must have answered there first: one not
    /// asked yet is waited for, not passed over (else the others' word alone would do).
    pub fn agreed(&self, ctx: &Ctx, height: u32, probed: bool) -> Option<FilterHeader> {
        let mut agreed = None;
        for (g, gw) in ctx.gateways.with_ids() {
            if !gw.ready || !gw.serves_filters {
                continue;
            }
            let s = &self.said[g.index()];
            match s.at(height) {
                Some(h) if agreed.is_none_or(|a| a == h) => agreed = Some(h),
                Some(_) => return None,
                // One that cannot say yet: it is asked (or its chain is behind ours).
                None if s.asked_at(height) || (probed && !s.answered(height)) => return None,
                None => {}
            }
        }
        agreed
    }

    /// Whether gateway `g` is to be probed at `height` now: it serves filters, has no
    /// checkpoints request in flight, has not been probed there, and has fewer than
    /// [`PROBES_AHEAD`] probes in flight.
    pub fn probe_due(&self, ctx: &Ctx, g: GatewayId, height: u32) -> bool {
        let (gw, s) = (&ctx.gateways[g], &self.said[g.index()]);
        let in_flight = s.probes.iter().filter(|p| p.id.is_some()).count();
        gw.ready
            && gw.serves_filters
            && s.asked.is_none()
            && s.probe(height).is_none()
            && in_flight < PROBES_AHEAD
    }

    /// A probe of gateway `g` at `height` is about to go: its id. Its probes stay in
    /// height order; past [`PROBES_AHEAD`] kept, the highest answered one above it goes
    /// (asked again when its file comes), so that the file being read is never the one
    /// left out.
    pub fn probing(&mut self, g: GatewayId, height: u32) -> u32 {
        let id = self.ids.next_id();
        self.sent.0 += 1;
        let probes = &mut self.said[g.index()].probes;
        let at = probes.partition_point(|p| p.height < height);
        probes.insert(
            at,
            Probe {
                height,
                id: Some(id),
                said: None,
            },
        );
        if probes.len() > PROBES_AHEAD
            && let Some(i) = probes
                .iter()
                .rposition(|p| p.id.is_none() && p.height > height)
        {
            probes.remove(i);
        }
        id
    }

    /// Our filter headers reach `height`: probes below it are of no more use.
    pub fn forget_below(&mut self, height: u32) {
        for s in &mut self.said {
            s.probes.retain(|p| p.height >= height || p.id.is_some());
        }
    }

    /// Whether `id` is a probe in flight to `g`.
    pub fn is_probe(&self, g: GatewayId, id: u32) -> bool {
        self.said[g.index()].probes.iter().any(|p| p.id == Some(id))
    }

    /// A `filter_headers` message answering our probe of `g` (see [`Self::is_probe`]): at
    /// most the one filter header asked, at the height asked. (Each is progress of the
    /// task: the caller touches its timer.)
    pub fn on_probe(&mut self, g: GatewayId, answer: FilterAnswer<'_>) -> Result<(), DropReason> {
        let s = &mut self.said[g.index()];
        let Some(p) = s.probes.iter_mut().find(|p| p.id == Some(answer.id)) else {
            return Ok(());
        };
        let height = p.height;
        match answer.headers {
            [] => {}
            [h] if answer.first_height == height && p.said.is_none() => p.said = Some(*h),
            [_] if answer.first_height != height => {
                return Err(DropReason::Filters(FilterSyncError::OutOfOrder {
                    expected: height,
                    got: answer.first_height,
                }));
            }
            // More than the one header asked.
            _ => {
                return Err(DropReason::Filters(FilterSyncError::PastStop {
                    stop: height,
                }));
            }
        }
        if answer.flags.last {
            // Answered; without the header, it lacks it (or our block there is not on its
            // chain) and cannot say.
            p.id = None;
        }
        Ok(())
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
    /// (Asked only where no probe can be: see the module's documentation.)
    pub fn asking(&mut self, g: GatewayId, stop: u32) -> u32 {
        let id = self.ids.next_id();
        self.sent.1 += 1;
        let s = &mut self.said[g.index()];
        s.asked = Some((id, stop));
        s.gathering.clear();
        id
    }

    /// The probes and the checkpoints requests asked this session.
    pub fn sent(&self) -> (u64, u64) {
        self.sent
    }

    /// Whether a checkpoints request or a probe is in flight to any gateway.
    pub fn asked_any(&self) -> bool {
        self.said.iter().any(Said::asked)
    }

    /// The gateways a checkpoints request or a probe is in flight to.
    pub fn asked_gateways(&self) -> impl Iterator<Item = GatewayId> + '_ {
        self.said
            .iter()
            .enumerate()
            .filter(|(_, s)| s.asked())
            .map(|(g, _)| GatewayId(g))
    }

    /// The request to `g` could not go.
    pub fn not_asked(&mut self, g: GatewayId) {
        let s = &mut self.said[g.index()];
        s.asked = None;
        s.probes.retain(|p| p.id.is_none());
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
    /// branch, and a probe above it stopped at a block of the old branch (given up: the
    /// rest of its answer is let through, not taken). Returns the mirror whose file being
    /// read was given up (its range above the fork).
    pub fn reorg(&mut self, ctx: &mut Ctx, fork: u32) -> Option<MirrorId> {
        for (g, s) in self.said.iter_mut().enumerate() {
            let keep = (fork / FILTER_CHECKPOINT_INTERVAL) as usize;
            s.list.truncate(keep);
            s.stop = s.stop.min(fork);
            for p in s.probes.iter().filter(|p| p.height > fork) {
                if let Some(id) = p.id {
                    ctx.give_up(GatewayId(g), id);
                }
            }
            s.probes.retain(|p| p.height <= fork);
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
        self.said
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.at(height) == Some(header))
            .map(|(g, _)| GatewayId(g))
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn a_probe_is_answered_by_the_one_header_asked_or_by_none() {
        // A probe asks one filter header at a file's end: an answer at another height, or
        // more than one, breaks the rule (as any answer past its stop).
        let mut bulk = BulkFilters::new(1);
        let g = GatewayId(0);
        let headers = [FilterHeader([1; 32]), FilterHeader([2; 32])];
        let answer = |id, first_height, headers, last| FilterAnswer {
            id,
            first_height,
            flags: lightwire_wire::AnswerFlags {
                last,
                stop_unknown: false,
            },
            before: FilterHeader::ZERO,
            headers,
            hashes: &[],
        };
        let id = bulk.probing(g, 2_000);
        assert!(bulk.is_probe(g, id));
        assert!(
            bulk.on_probe(g, answer(id, 1_999, &headers[..1], true))
                .is_err()
        );
        assert!(
            bulk.on_probe(g, answer(id, 2_000, &headers[..], true))
                .is_err()
        );
        assert!(
            bulk.on_probe(g, answer(id, 2_000, &headers[..1], false))
                .is_ok()
        );
        // The same header again: more than was asked.
        assert!(
            bulk.on_probe(g, answer(id, 2_000, &headers[1..], true))
                .is_err()
        );
        assert_eq!(bulk.said[0].at(2_000), Some(headers[0]));
        bulk.not_asked(g);
        // An answer without it: the gateway cannot say, and is not asked there again.
        let id = bulk.probing(g, 3_000);
        assert!(bulk.on_probe(g, answer(id, 3_000, &[], true)).is_ok());
        assert!(!bulk.is_probe(g, id));
        assert_eq!(bulk.said[0].at(3_000), None);
        assert!(bulk.said[0].probe(3_000).is_some());
        assert!(!bulk.said[0].asked());
        // Several in flight, answered in any order; those below our filter headers go.
        let (a, b) = (bulk.probing(g, 4_000), bulk.probing(g, 5_000));
        assert!(
            bulk.on_probe(g, answer(b, 5_000, &headers[1..], true))
                .is_ok()
        );
        assert!(bulk.said[0].asked_at(4_000) && !bulk.said[0].asked_at(5_000));
        assert!(
            bulk.on_probe(g, answer(a, 4_000, &headers[..1], true))
                .is_ok()
        );
        bulk.forget_below(4_001);
        assert_eq!(bulk.said[0].at(4_000), None);
        assert_eq!(bulk.said[0].at(5_000), Some(headers[1]));
    }
}
