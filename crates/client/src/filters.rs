//! Filter-header sync (BIP157), sans-IO, beside the header sync: which filter headers to
//! ask for next, from which block to which, and what an answer must be to be taken.
//!
//! The filter-header chain follows the best header chain: a request names its last block
//! by hash (a *mark*, a validated header of our best chain), so gateway and client mean the
//! same blocks; a reorganisation drops what we hold above the fork. Each answer's filter
//! headers arrive rebuilt and linked by `lightwire-proto` from the gateway's filter hashes;
//! here they must follow on from the last one we hold (the message's first anchor is the
//! header before its first block). A gateway whose filter-header chain does not is in
//! *conflict* with what we hold: it is not asked for filters again this session, and the
//! application hears of it. (Which side is wrong, settled by building the filter from the
//! block, is not done yet: see docs/PROTOCOL.md.)
//!
//! Trust: one gateway's filter headers are taken as they come; what makes them hard to
//! forge is that they must chain from the hashes sent, and (to come) agree with the other
//! gateways' checkpoints.

use crate::ids::{GatewayId, GivenUp, Ids, TaskId};
use lightwire_primitives::{FilterHash, FilterHeader};
use std::collections::VecDeque;

use lightwire_chain::BlockHash;
use lightwire_wire::AnswerFlags;
use lightwire_wire::filters::{FILTER_CHECKPOINT_INTERVAL, MAX_REQUEST_FILTER_HEADERS};

/// Filter headers asked for per request (the gateway allows up to 100,000).
pub const FILTER_REQUEST: u32 = 20_000;
/// Filter headers kept in memory below the next wanted, to pick up after a reorg.
pub const RECENT_FILTER_HEADERS: usize = 4096;
/// Marks kept (stop points for requests); one per validated headers message at most.
const MAX_MARKS: usize = 4096;
/// Checkpoint marks kept (the best chain's blocks at BIP157's checkpoint heights, every
/// 1,000 blocks): 4,096 reach 4 million blocks past our filter headers, so none is lost
/// to a header sync that runs far ahead of them (from a mirror, the headers come first).
const MAX_CHECKPOINT_MARKS: usize = 4096;

/// A filter-header answer that cannot be taken.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum FilterSyncError {
    /// It answers no request in flight to that gateway.
    #[error("the gateway answered filter request {id}, which was not asked")]
    Unexpected {
        /// The id it used.
        id: u32,
    },
    /// It does not start where the request (or the previous message) left off.
    #[error("filter headers from height {got} where {expected} was expected")]
    OutOfOrder {
        /// Where the answer should go on.
        expected: u32,
        /// Where it started.
        got: u32,
    },
    /// More filter headers than asked for.
    #[error("filter headers past the requested stop height {stop}")]
    PastStop {
        /// The last height asked for.
        stop: u32,
    },
}

/// What an answer did.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct FilterStep {
    /// Filter headers taken.
    pub taken: u32,
    /// The gateway's chain of filter headers does not follow on from ours at this height.
    pub conflict: Option<u32>,
    /// The request is over.
    pub done: bool,
}

/// One `filter_headers` message, as the connection hands it over.
#[derive(Clone, Copy, Debug)]
pub struct FilterAnswer<'a> {
    /// The request answered.
    pub id: u32,
    /// Height of the first filter header.
    pub first_height: u32,
    /// How the answer ends.
    pub flags: AnswerFlags,
    /// The filter header before the first (the message's first anchor).
    pub before: FilterHeader,
    /// The filter headers, rebuilt from the hashes and linked from `before`.
    pub headers: &'a [FilterHeader],
    /// The filter hashes they chain (what a dispute compares: two chains hold the same
    /// filter of a block when its hash, linked to our header before it, gives our header
    /// there, whatever their headers below it).
    pub hashes: &'a [FilterHash],
}

impl<'a> FilterAnswer<'a> {
    /// The answer a connection's (or a bulk file's) `filter_headers` event carries.
    pub fn of(event: lightwire_proto::PeerEvent<'a>) -> Option<FilterAnswer<'a>> {
        Self::of_kind(event, false)
    }

    /// The answer a connection's `tweak_headers` event carries (the same layout, over
    /// the tweak chain: never taken for filter headers).
    pub fn of_tweaks(event: lightwire_proto::PeerEvent<'a>) -> Option<FilterAnswer<'a>> {
        Self::of_kind(event, true)
    }

    fn of_kind(event: lightwire_proto::PeerEvent<'a>, tweaks: bool) -> Option<FilterAnswer<'a>> {
        use lightwire_proto::PeerEvent::{FilterHeaders, TweakHeaders};
        match (event, tweaks) {
            (
                FilterHeaders {
                    id,
                    first_height,
                    flags,
                    before,
                    headers,
                    hashes,
                },
                false,
            )
            | (
                TweakHeaders {
                    id,
                    first_height,
                    flags,
                    before,
                    headers,
                    hashes,
                },
                true,
            ) => Some(FilterAnswer {
                id,
                first_height,
                flags,
                before,
                headers,
                hashes,
            }),
            _ => None,
        }
    }
}

/// The gateways whose answer ended short of what was asked (they said they lack what
/// follows: an empty answer, or "the stop block is not on my chain"). Each *waits*, not
/// asked again, until a tip comes or new headers are validated (asking again at once would
/// bring the same), and the others are asked meanwhile. One whose lack another gateway
/// then fills is *shown* (once, whether or not it still waits): a strike for it (the
/// engine's `Standing` of the gateway with the task). One entry per gateway at most.
#[derive(Clone, Debug, Default)]
pub struct Lacking(Vec<Lack>);

#[derive(Clone, Copy, Debug)]
struct Lack {
    gateway: GatewayId,
    /// The first height it lacked (`u32::MAX` once shown).
    from: u32,
    /// Not asked again until a tip or new headers.
    waits: bool,
}

impl Lacking {
    /// `gateway` lacks what follows height `from - 1`.
    pub fn add(&mut self, gateway: GatewayId, from: u32) {
        self.0.retain(|l| l.gateway != gateway);
        self.0.push(Lack {
            gateway,
            from,
            waits: true,
        });
    }

    /// Whether `gateway` said it lacks what we ask next, and waits.
    pub fn contains(&self, gateway: GatewayId) -> bool {
        self.0.iter().any(|l| l.gateway == gateway && l.waits)
    }

    /// A tip or new headers came: every gateway is asked again (what they said they
    /// lacked is kept, to be shown).
    pub fn release(&mut self) {
        self.0.iter_mut().for_each(|l| l.waits = false);
    }

    /// `by` delivered everything below `next`: the others that said they lacked some of
    /// it, each once.
    pub fn shown(&mut self, by: GatewayId, next: u32) -> impl Iterator<Item = GatewayId> + '_ {
        self.0
            .iter_mut()
            .filter(move |l| l.gateway != by && l.from < next)
            .map(|l| {
                l.from = u32::MAX;
                l.gateway
            })
    }
}

#[derive(Clone, Copy, Debug)]
struct InFlight {
    id: u32,
    gateway: GatewayId,
    stop: u32,
    stop_hash: BlockHash,
}

/// The filter-header sync state.
#[derive(Debug)]
pub struct FilterSync {
    /// Height of the next filter header wanted.
    next: u32,
    /// The filter header at `next - 1`, when known: only a store started from a checkpoint
    /// (before its first answer) or a reorg deeper than what is kept in memory leave it
    /// unknown; the first answer's anchor is then taken.
    prev: Option<FilterHeader>,
    /// The filter headers just below `next`, newest last.
    recent: VecDeque<FilterHeader>,
    /// Validated headers of the best chain above `next - 1`, ascending: where requests stop.
    marks: VecDeque<(u32, BlockHash)>,
    /// Those at checkpoint heights, ascending, kept apart: where a mirror's files end,
    /// asked of the gateways (and stops for requests too).
    checkpoint_marks: VecDeque<(u32, BlockHash)>,
    in_flight: Option<InFlight>,
    ids: Ids,
    /// The gateways whose last answer ended short of its stop (their filter headers lag
    /// their headers, or they say so): not asked until a tip or new headers come.
    short: Lacking,
    /// The last filter header held is of this block (known when a request ended at its
    /// stop): where other gateways are probed.
    reached: Option<(u32, BlockHash)>,
}

impl FilterSync {
    /// Filter sync over a store whose filter headers end at `tip` (height and header), or
    /// that holds none and starts at `base` (the filter header before genesis is 32 zero
    /// bytes; before a checkpoint start it is not known).
    pub fn new(tip: Option<(u32, FilterHeader)>, base: u32) -> FilterSync {
        let (next, prev) = match tip {
            Some((height, header)) => (height + 1, Some(header)),
            None if base == 0 => (0, Some(FilterHeader::ZERO)),
            None => (base, None),
        };
        let mut recent = VecDeque::with_capacity(RECENT_FILTER_HEADERS);
        recent.extend(tip.map(|t| t.1));
        FilterSync {
            next,
            prev,
            recent,
            marks: VecDeque::new(),
            checkpoint_marks: VecDeque::new(),
            in_flight: None,
            ids: Ids::new(TaskId::FilterHeaders),
            short: Lacking::default(),
            reached: None,
        }
    }

    /// The block the last filter header held is of, when known (see [`Self::reach`]).
    pub fn reached(&self) -> Option<(u32, BlockHash)> {
        self.reached.filter(|&(h, _)| Some(h) == self.height())
    }

    /// The last filter header held is of block `hash` at `height` (the shell knows it
    /// when the store's filter headers end with its headers).
    pub fn reach(&mut self, height: u32, hash: BlockHash) {
        if Some(height) == self.height() {
            self.reached = Some((height, hash));
        }
    }

    /// The filter header held at `height`, if it is among the recent ones kept.
    pub fn header_at(&self, height: u32) -> Option<FilterHeader> {
        let back = self.next.checked_sub(height)? as usize;
        let i = self.recent.len().checked_sub(back)?;
        self.recent.get(i).copied()
    }

    /// A block of the best chain below the marks held (where a request can stop after a
    /// truncation).
    pub fn mark_below(&mut self, height: u32, hash: BlockHash) {
        if height >= self.next && self.marks.front().is_none_or(|&(h, _)| h > height) {
            self.marks.push_front((height, hash));
        }
    }

    /// The filter headers held from `height` on were found wrong: the chain goes on from
    /// `prev`, ours before `height` (all zeros before genesis). Returns the request in
    /// flight, given up (its gateway and id).
    pub fn truncate(&mut self, height: u32, prev: FilterHeader) -> Option<GivenUp> {
        if height < self.next {
            let drop = (self.next - height) as usize;
            if drop < self.recent.len() {
                self.recent.truncate(self.recent.len() - drop);
            } else {
                self.recent.clear();
                // Below genesis there is no header to keep, only the zeros it chains from.
                if height > 0 {
                    self.recent.push_back(prev);
                }
            }
            self.next = height;
            self.prev = Some(prev);
            self.reached = None;
        }
        self.short.release();
        self.in_flight.take().map(|f| (f.gateway, f.id))
    }

    /// A gateway announced a tip: ask again even those whose answer ended short.
    pub fn unblock(&mut self) {
        self.short.release();
    }

    /// Whether `gateway`'s last answer ended short, with no tip or new headers since:
    /// another is asked.
    pub fn is_short(&self, gateway: GatewayId) -> bool {
        self.short.contains(gateway)
    }

    /// The gateways whose answer ended short of what `by` has now delivered (each once).
    pub fn shown_short(&mut self, by: GatewayId) -> impl Iterator<Item = GatewayId> + '_ {
        self.short.shown(by, self.next)
    }

    /// Height of the last filter header held (validated and gathered or stored).
    pub fn height(&self) -> Option<u32> {
        self.next.checked_sub(1).filter(|_| self.prev.is_some())
    }

    /// The filter header at `next - 1`, when known.
    pub fn prev(&self) -> Option<FilterHeader> {
        self.prev
    }

    /// Height of the next filter header wanted.
    pub fn next(&self) -> u32 {
        self.next
    }

    /// The gateway the request in flight went to.
    pub fn asked(&self) -> Option<GatewayId> {
        self.in_flight.map(|f| f.gateway)
    }

    /// A validated header of the best chain: a place a request can stop at.
    pub fn mark(&mut self, height: u32, hash: BlockHash) {
        if height < self.next || self.marks.back().is_some_and(|&(h, _)| h >= height) {
            return;
        }
        self.short.release();
        if self.marks.len() == MAX_MARKS {
            // Keep the newest: the tip must stay reachable; requests stop at any mark.
            self.marks.pop_front();
        }
        self.marks.push_back((height, hash));
        let checkpoint = height % FILTER_CHECKPOINT_INTERVAL == 0;
        if checkpoint
            && self
                .checkpoint_marks
                .back()
                .is_none_or(|&(h, _)| h < height)
        {
            if self.checkpoint_marks.len() == MAX_CHECKPOINT_MARKS {
                self.checkpoint_marks.pop_front();
            }
            self.checkpoint_marks.push_back((height, hash));
        }
    }

    /// The block of the best chain at checkpoint height `height`, if its mark is held.
    pub fn mark_at(&self, height: u32) -> Option<BlockHash> {
        let marks = &self.checkpoint_marks;
        let i = marks.binary_search_by_key(&height, |&(h, _)| h).ok()?;
        Some(marks[i].1)
    }

    /// The best chain switched branches at `fork`: marks and filter headers above it are
    /// of the old branch. Returns the request in flight, if it was given up (its gateway
    /// and id).
    pub fn reorg(&mut self, fork: u32) -> Option<GivenUp> {
        while self.marks.back().is_some_and(|&(h, _)| h > fork) {
            self.marks.pop_back();
        }
        while self.checkpoint_marks.back().is_some_and(|&(h, _)| h > fork) {
            self.checkpoint_marks.pop_back();
        }
        if self.next > fork + 1 {
            let drop = (self.next - fork - 1) as usize;
            if drop <= self.recent.len() {
                self.recent.truncate(self.recent.len() - drop);
                self.prev = self.recent.back().copied();
            } else {
                self.recent.clear();
                self.prev = None;
            }
            self.next = fork + 1;
        }
        if self.reached.is_some_and(|(h, _)| h > fork) {
            self.reached = None;
        }
        let gave_up = self.in_flight.filter(|f| f.stop > fork);
        if gave_up.is_some() {
            self.in_flight = None;
        }
        gave_up.map(|f| (f.gateway, f.id))
    }

    /// The next request, if one is due and nothing is in flight: its id, the first height
    /// and the stop block. `gateway` is where it goes.
    pub fn next_request(&mut self, gateway: GatewayId) -> Option<(u32, u32, BlockHash)> {
        if self.in_flight.is_some() || self.short.contains(gateway) {
            return None;
        }
        self.forget_marks_below();
        let limit = self
            .next
            .saturating_add(FILTER_REQUEST.min(MAX_REQUEST_FILTER_HEADERS) - 1);
        // The furthest mark within a request's reach, of either kind (the marks may have
        // lost their oldest to a header sync far ahead; the checkpoints' reach further).
        let within = |marks: &VecDeque<(u32, BlockHash)>| {
            marks
                .iter()
                .take_while(|&&(h, _)| h <= limit)
                .last()
                .or(marks.front())
                .copied()
        };
        let (stop, hash) = [within(&self.marks), within(&self.checkpoint_marks)]
            .into_iter()
            .flatten()
            // The furthest within reach, else the nearest beyond it.
            .min_by_key(|&(h, _)| {
                if h <= limit {
                    (0, u32::MAX - h)
                } else {
                    (1, h)
                }
            })
            // After a truncation deeper than a request can reach, no mark is near enough
            // (marks come with validated headers): nothing is asked this session.
            .filter(|&(h, _)| h - self.next < MAX_REQUEST_FILTER_HEADERS)?;
        let id = self.ids.next_id();
        self.in_flight = Some(InFlight {
            id,
            gateway,
            stop,
            stop_hash: hash,
        });
        Some((id, self.next, hash))
    }

    /// Marks below the next filter header wanted are of no more use.
    fn forget_marks_below(&mut self) {
        while self.marks.front().is_some_and(|&(h, _)| h < self.next) {
            self.marks.pop_front();
        }
        while self
            .checkpoint_marks
            .front()
            .is_some_and(|&(h, _)| h < self.next)
        {
            self.checkpoint_marks.pop_front();
        }
    }

    /// Filter headers a mirror's file brought, from `first` on, `before` the one before
    /// them, already checked (see `engine/bulk_filters.rs`): taken when they follow on
    /// from ours with nothing in flight; false otherwise (ours moved meanwhile).
    pub fn take_checked(
        &mut self,
        first: u32,
        before: FilterHeader,
        headers: &[FilterHeader],
    ) -> bool {
        if first != self.next || self.prev != Some(before) || self.in_flight.is_some() {
            return false;
        }
        let Some(&last) = headers.last() else {
            return false;
        };
        for h in headers {
            if self.recent.len() == RECENT_FILTER_HEADERS {
                self.recent.pop_front();
            }
            self.recent.push_back(*h);
        }
        self.prev = Some(last);
        self.next = first + headers.len() as u32;
        self.reached = None;
        self.forget_marks_below();
        true
    }

    /// The request in flight is given up (its gateway dropped).
    pub fn abandon(&mut self) {
        self.in_flight = None;
    }

    /// Whether request `id` from `gateway` is in flight.
    pub fn is_in_flight(&self, gateway: GatewayId, id: u32) -> bool {
        self.in_flight
            .is_some_and(|f| f.gateway == gateway && f.id == id)
    }

    /// One `filter_headers` message from `gateway`. When [`FilterStep::taken`] is not
    /// zero, every header of the answer was taken (from its `first_height`), for the store.
    pub fn on_filter_headers(
        &mut self,
        gateway: GatewayId,
        answer: FilterAnswer<'_>,
    ) -> Result<FilterStep, FilterSyncError> {
        let FilterAnswer {
            id,
            first_height,
            flags,
            before,
            headers,
            ..
        } = answer;
        let Some(f) = self
            .in_flight
            .filter(|f| f.gateway == gateway && f.id == id)
        else {
            return Err(FilterSyncError::Unexpected { id });
        };
        let mut step = FilterStep {
            done: flags.last,
            ..FilterStep::default()
        };
        if !headers.is_empty() {
            if first_height != self.next {
                return Err(FilterSyncError::OutOfOrder {
                    expected: self.next,
                    got: first_height,
                });
            }
            let last = first_height + headers.len() as u32 - 1;
            if last > f.stop {
                return Err(FilterSyncError::PastStop { stop: f.stop });
            }
            if self.prev.is_some_and(|p| p != before) {
                // Its chain does not follow on from ours here: take nothing more from it.
                step.conflict = Some(first_height);
                step.done = true;
                self.in_flight = None;
                return Ok(step);
            }
            for h in headers {
                if self.recent.len() == RECENT_FILTER_HEADERS {
                    self.recent.pop_front();
                }
                self.recent.push_back(*h);
            }
            self.prev = headers.last().copied();
            self.next = last + 1;
            step.taken = headers.len() as u32;
            if last == f.stop {
                self.reached = Some((last, f.stop_hash));
            }
        }
        if step.done {
            self.in_flight = None;
            // Not as far as asked: the gateway has not the filter headers yet. Asking it
            // again at once would only bring the same: it waits for a tip or new headers,
            // and another is asked meanwhile.
            if self.next <= f.stop {
                self.short.add(gateway, self.next);
            }
        }
        Ok(step)
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::ids::GatewayId;

    fn hash(h: u32) -> BlockHash {
        let mut b = [0u8; 32];
        b[..4].copy_from_slice(&h.to_le_bytes());
        BlockHash(b)
    }

    fn fh(h: u32) -> FilterHeader {
        let mut b = [7u8; 32];
        b[..4].copy_from_slice(&h.to_le_bytes());
        FilterHeader(b)
    }

    fn ans(
        id: u32,
        first_height: u32,
        flags: AnswerFlags,
        before: FilterHeader,
        headers: &[FilterHeader],
    ) -> FilterAnswer<'_> {
        FilterAnswer {
            id,
            first_height,
            flags,
            before,
            headers,
            hashes: &[],
        }
    }

    const LAST: AnswerFlags = AnswerFlags {
        last: true,
        stop_unknown: false,
    };

    #[test]
    fn requests_stop_at_marks_and_answers_must_follow_on() {
        let mut s = FilterSync::new(None, 0);
        assert_eq!(s.next_request(GatewayId(0)), None, "no mark yet");
        for h in (1723..=50_000).step_by(1723) {
            s.mark(h, hash(h));
        }
        let (id, start, stop) = s.next_request(GatewayId(0)).unwrap();
        assert_eq!(
            (start, stop),
            (0, hash(18_953)),
            "the last mark within 20,000"
        );
        assert!(crate::ids::is_task(id, TaskId::FilterHeaders));
        assert_eq!(s.next_request(GatewayId(0)), None, "one at a time");
        let headers: Vec<FilterHeader> = (0..100).map(fh).collect();
        let flags = AnswerFlags::default();
        // Not the request's gateway, or not from the next height: refused.
        assert!(
            s.on_filter_headers(
                GatewayId(1),
                ans(id, 0, flags, FilterHeader::ZERO, &headers)
            )
            .is_err()
        );
        assert_eq!(
            s.on_filter_headers(
                GatewayId(0),
                ans(id, 5, flags, FilterHeader::ZERO, &headers)
            ),
            Err(FilterSyncError::OutOfOrder {
                expected: 0,
                got: 5
            })
        );
        let step = s
            .on_filter_headers(
                GatewayId(0),
                ans(id, 0, flags, FilterHeader::ZERO, &headers),
            )
            .unwrap();
        assert_eq!((step.taken, step.done, step.conflict), (100, false, None));
        assert_eq!(s.height(), Some(99));
        // The next message must chain from the last header taken.
        let more: Vec<FilterHeader> = (100..200).map(fh).collect();
        let step = s
            .on_filter_headers(
                GatewayId(0),
                ans(id, 100, LAST, FilterHeader([9; 32]), &more),
            )
            .unwrap();
        assert_eq!(step.taken, 0);
        assert_eq!(step.conflict, Some(100));
        assert!(step.done);
        assert_eq!(s.next(), 100);
        // Another gateway goes on from there.
        let (id, start, _) = s.next_request(GatewayId(1)).unwrap();
        assert_eq!(start, 100);
        let step = s
            .on_filter_headers(GatewayId(1), ans(id, 100, LAST, fh(99), &more))
            .unwrap();
        assert_eq!((step.taken, step.done), (100, true));
        // It ended short of the stop: asked again after a tip.
        assert_eq!(s.next_request(GatewayId(1)), None);
        s.unblock();
        // Past the stop asked for: refused.
        let (id, _, _) = s.next_request(GatewayId(1)).unwrap();
        let far: Vec<FilterHeader> = (200..20_300).map(fh).collect();
        assert!(matches!(
            s.on_filter_headers(GatewayId(1), ans(id, 200, LAST, fh(199), &far)),
            Err(FilterSyncError::PastStop { .. })
        ));
    }

    #[test]
    fn an_answer_short_of_its_stop_waits_for_a_tip() {
        let mut s = FilterSync::new(None, 0);
        s.mark(100, hash(100));
        let (id, _, _) = s.next_request(GatewayId(0)).unwrap();
        let headers: Vec<FilterHeader> = (0..50).map(fh).collect();
        s.on_filter_headers(GatewayId(0), ans(id, 0, LAST, FilterHeader::ZERO, &headers))
            .unwrap();
        assert_eq!(
            s.next_request(GatewayId(0)),
            None,
            "the gateway lags: not asked again at once"
        );
        s.unblock();
        let (_, start, _) = s.next_request(GatewayId(0)).unwrap();
        assert_eq!(start, 50);
    }

    #[test]
    fn a_gateway_that_answered_short_is_passed_over_and_shown_when_another_fills_it() {
        let mut s = FilterSync::new(None, 0);
        s.mark(100, hash(100));
        let (id, _, _) = s.next_request(GatewayId(0)).unwrap();
        s.on_filter_headers(GatewayId(0), ans(id, 0, LAST, FilterHeader::ZERO, &[]))
            .unwrap();
        assert!(s.is_short(GatewayId(0)) && !s.is_short(GatewayId(1)));
        assert_eq!(s.next_request(GatewayId(0)), None, "it said it lacks them");
        assert_eq!(
            s.shown_short(GatewayId(1)).count(),
            0,
            "nobody filled it yet"
        );
        // Another is asked at once, and delivers what the first said it lacked.
        let (id, start, _) = s.next_request(GatewayId(1)).unwrap();
        assert_eq!(start, 0);
        let headers: Vec<FilterHeader> = (0..=100).map(fh).collect();
        s.on_filter_headers(GatewayId(1), ans(id, 0, LAST, FilterHeader::ZERO, &headers))
            .unwrap();
        assert_eq!(
            s.shown_short(GatewayId(1)).collect::<Vec<_>>(),
            [GatewayId(0)]
        );
        assert_eq!(s.shown_short(GatewayId(1)).count(), 0, "shown once");
        // A tip: asked again.
        s.unblock();
        assert!(!s.is_short(GatewayId(0)));
    }

    #[test]
    fn a_reorg_drops_filter_headers_and_marks_above_the_fork() {
        let mut s = FilterSync::new(Some((999, fh(999))), 0);
        s.mark(3000, hash(3000));
        let (id, start, _) = s.next_request(GatewayId(0)).unwrap();
        assert_eq!(start, 1000);
        let headers: Vec<FilterHeader> = (1000..=3000).map(fh).collect();
        s.on_filter_headers(GatewayId(0), ans(id, 1000, LAST, fh(999), &headers))
            .unwrap();
        assert_eq!(s.height(), Some(3000));
        s.mark(3500, hash(3500));
        assert_eq!(s.reorg(2500), None);
        assert_eq!((s.next(), s.height()), (2501, Some(2500)));
        assert_eq!(
            s.next_request(GatewayId(0)),
            None,
            "the mark at 3,500 was on the old branch"
        );
        s.mark(2600, hash(2600));
        let (id, start, stop) = s.next_request(GatewayId(0)).unwrap();
        assert_eq!((start, stop), (2501, hash(2600)));
        // The next answer must chain from the header kept at 2,500.
        let step = s
            .on_filter_headers(GatewayId(0), ans(id, 2501, LAST, fh(2500), &[fh(2501)]))
            .unwrap();
        assert_eq!(step.taken, 1);
        // Deeper than what is kept: the filter header before the fork is not known; the
        // next answer's anchor is taken.
        s.reorg(10);
        assert_eq!((s.next(), s.height()), (11, None));
    }
}
