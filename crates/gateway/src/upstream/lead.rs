//! What one node's connection knows of its place for the lead, and what the lead asks of
//! its node: filter headers following the headers, the filters and blocks sessions wait
//! for, and clients' transactions to relay. Sans-IO: requests are appended to the bytes
//! to write, and what the shell must pass on to [`Event`]s.
//!
//! Only an answer to what was asked counts as one (it moves the lead's deadline on): a
//! `cfheaders` for the request in flight, a `cfilter` in the range asked for, the block
//! asked for, or `notfound` for it. A `cfheaders` that does not answer what was asked or
//! does not follow on from the filter headers held ends the connection (Bitcoin Core
//! drops a peer for one) and erases nothing held. `notfound` is believed only for the
//! block asked of this node, and [`STRIKES`] of them in a row rank the node below those
//! with the same height that have not said so ([`Candidacy`]).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use lightwire_chain::{BlockHash, Header};
use lightwire_primitives::FilterHash;
use lightwire_proto::Millis;

use super::peer::{Event, Gateway};
use super::{UpstreamError, WrongFilterHeaders};
use crate::p2p::{self, P2pError};

/// `notfound` answers in a row (for blocks of its own chain) after which a node ranks
/// below the nodes of the same height that have not said so.
pub(super) const STRIKES: u32 = 3;

/// What a node's connection says of its place for the lead (see
/// [`super::Followers`]): the node that can deliver the most leads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Candidacy {
    /// Its height on the served chain; `None` when its tip is not on it, or it serves no
    /// filters while the served chain does: then it may not lead.
    pub(super) height: Option<u32>,
    /// It said `notfound` for [`STRIKES`] blocks in a row.
    pub(super) struck: bool,
}

impl Candidacy {
    /// How it ranks: by its height on the served chain (a node can be asked for nothing
    /// above it, so one stuck at genesis delivers nothing), then not struck; `None` when
    /// it may not lead.
    pub(super) fn rank(&self) -> Option<(u32, bool)> {
        self.height.map(|h| (h, !self.struck))
    }
}

/// What the gateway knows of one node's place, for the lead: its tip as far as its
/// headers showed it, its `version`, and its data requests in flight.
pub(super) struct Place {
    addr: SocketAddr,
    /// The last header it sent; with none yet, the served header at its `version` start
    /// height when it had nothing after our tip (an empty `headers` means its tip is one
    /// of our locator's hashes, and it may be below ours).
    tip: Option<BlockHash>,
    /// What it said of itself.
    pub(super) version: Option<p2p::Version>,
    on_best: bool,
    /// Whether it led when last it looked.
    leading: bool,
    pub(super) filters: Filters,
    /// The block asked of the node (one at a time).
    block_asked: Option<BlockHash>,
    /// `notfound` answers in a row for the block asked.
    strikes: u32,
    /// Since when requests are in flight with none answered (since the last answer).
    waiting_since: Option<Millis>,
    /// How long they may stay so.
    data_deadline: Duration,
}

impl Place {
    /// A node at `addr` just connected, whose requests may stay unanswered for
    /// `data_deadline` when it leads.
    pub(super) fn new(addr: SocketAddr, data_deadline: Duration) -> Place {
        Place {
            addr,
            tip: None,
            version: None,
            on_best: false,
            leading: false,
            filters: Filters::default(),
            block_asked: None,
            strikes: 0,
            waiting_since: None,
            data_deadline,
        }
    }

    /// The node's headers `headers` were taken.
    pub(super) fn headers(&mut self, gw: &Gateway<'_>, headers: &[Header]) {
        match headers.last() {
            Some(last) => self.tip = Some(last.block_hash()),
            None if self.tip.is_none() => {
                let start = self.version.map_or(0, |v| v.start_height);
                self.tip = gw
                    .chain
                    .read()
                    .ok()
                    .and_then(|c| c.block_hash(c.tip().height.min(start)));
            }
            None => {}
        }
    }

    /// A data request was answered.
    pub(super) fn answered(&mut self) {
        self.waiting_since = None;
    }

    /// When the requests in flight are overdue.
    pub(super) fn deadline(&self) -> Option<Millis> {
        self.waiting_since.map(|t| t + self.data_deadline)
    }

    /// Whether they are at `now`.
    pub(super) fn overdue(&self, now: Millis) -> bool {
        self.deadline().is_some_and(|d| d <= now)
    }

    /// If node `i` leads, ask it for what the sessions wait for (up to its height) and
    /// pass clients' transactions on; if it may no longer lead, give the lead up.
    pub(super) fn serve(
        &mut self,
        out: &mut Vec<u8>,
        magic: [u8; 4],
        gw: &Gateway<'_>,
        i: usize,
        now: Millis,
        events: &mut VecDeque<Event>,
    ) {
        // The node's height on the served chain, and whether filters are served: one read
        // of the chain per message.
        let (limit, serves_filters) = match gw.chain.read() {
            Ok(c) => (
                self.tip.and_then(|t| c.height_of(&t)),
                c.filters().is_some(),
            ),
            Err(_) => (None, false),
        };
        if self.on_best != limit.is_some() {
            self.on_best = limit.is_some();
            log_place(self.addr, self.on_best);
        }
        let has_filters = self
            .version
            .is_some_and(|v| v.services & p2p::NODE_COMPACT_FILTERS != 0);
        let candidacy = Candidacy {
            height: limit.filter(|_| has_filters || !serves_filters),
            struck: self.strikes >= STRIKES,
        };
        let (leads, changed) = gw.followers.leads(i, candidacy);
        if changed {
            events.push_back(Event::LeadFreed);
        }
        if leads != self.leading {
            self.leading = leads;
            self.took_or_lost(gw, candidacy);
        }
        if !leads {
            // Not the lead (or no longer): nothing of ours is awaited. What it was asked
            // and may never answer (the served chain left its branch) is forgotten, so
            // that it asks afresh if it leads again.
            self.waiting_since = None;
            if self.in_flight() {
                self.filters.give_up();
                self.block_asked = None;
            }
            return;
        }
        let Some(limit) = limit else {
            return;
        };
        self.filters.ask(out, magic, gw, limit);
        ask_block(out, magic, gw, &mut self.block_asked, limit);
        // The clock runs from the last answer (or the first request) while anything is
        // in flight.
        if !self.in_flight() {
            self.waiting_since = None;
        } else if self.waiting_since.is_none() {
            self.waiting_since = Some(now);
        }
        for tx in gw.relay.take() {
            p2p::encode(out, magic, "tx", |p| p.extend_from_slice(&tx));
        }
    }

    /// The node took the lead, or lost it: said in the log; one that takes it is asked
    /// for the blocks the node before said it lacks.
    fn took_or_lost(&self, gw: &Gateway<'_>, candidacy: Candidacy) {
        let height = candidacy.height.unwrap_or(0);
        if !self.leading {
            tracing::info!(upstream = %self.addr, height, "upstream no longer leads");
            return;
        }
        tracing::info!(
            upstream = %self.addr,
            height,
            "upstream leads: filters, blocks and clients' transactions go through it"
        );
        if let Ok(c) = gw.chain.read()
            && let Some(b) = c.blocks()
        {
            b.forget_missing();
        }
    }

    fn in_flight(&self) -> bool {
        self.filters.headers_asked.is_some()
            || self.filters.fetching.is_some()
            || self.block_asked.is_some()
    }

    /// A block from the node: kept for the sessions waiting if it is the one asked for and
    /// checks against its header; a block that does not is an error (the connection to
    /// the node starts over), after the sessions are told it is not found. Whether it
    /// answered what was asked.
    pub(super) fn on_block(
        &mut self,
        gw: &Gateway<'_>,
        payload: &[u8],
        events: &mut VecDeque<Event>,
    ) -> Result<bool, UpstreamError> {
        let header: &[u8; 80] = payload
            .get(..80)
            .and_then(|h| h.try_into().ok())
            .ok_or(P2pError::Truncated("block"))?;
        let hash = lightwire_chain::hash_header_bytes(header);
        if self.block_asked != Some(hash) {
            // Not asked for (a block announced unasked): nothing to do.
            return Ok(false);
        }
        self.block_asked = None;
        self.strikes = 0;
        // Checked and kept only if a live session still waits for it.
        let result = match gw.chain.read() {
            Ok(c) => c.blocks().map_or(Ok(()), |b| b.insert(&hash, payload)),
            Err(_) => Ok(()),
        };
        events.push_back(Event::DataArrived);
        result.map(|()| true).map_err(UpstreamError::from)
    }

    /// A `notfound`: believed only for the block asked of this node (as Bitcoin Core
    /// tracks the blocks in flight per peer), whose sessions are told it is not found; a
    /// strike against the node. Blocks listed unasked are not looked at (they would
    /// poison the blocks of every session, and a 4 MB list of them the memory). Whether
    /// it answered what was asked.
    pub(super) fn on_notfound(
        &mut self,
        gw: &Gateway<'_>,
        payload: &[u8],
        events: &mut VecDeque<Event>,
    ) -> Result<bool, UpstreamError> {
        let Some(asked) = self.block_asked else {
            // Still read whole: a malformed one is an error all the same.
            p2p::inv_blocks(payload, |_| {})?;
            return Ok(false);
        };
        let mut lacks = false;
        p2p::inv_blocks(payload, |hash| lacks |= hash == asked)?;
        if !lacks {
            return Ok(false);
        }
        self.block_asked = None;
        self.strikes = self.strikes.saturating_add(1);
        tracing::info!(
            upstream = %self.addr,
            block = %asked,
            strikes = self.strikes,
            "upstream has not the block asked for (notfound)"
        );
        if let Ok(c) = gw.chain.read()
            && let Some(b) = c.blocks()
        {
            b.missing_block(&asked);
        }
        events.push_back(Event::DataArrived);
        Ok(true)
    }
}

fn log_place(addr: SocketAddr, on_best: bool) {
    match on_best {
        true => tracing::info!(upstream = %addr, "upstream's tip on the served chain"),
        false => tracing::info!(
            upstream = %addr,
            "upstream's tip off the served chain (a branch with less work, or unknown yet)"
        ),
    }
}

/// The node's compact block filters (BIP157), when the served chain takes them: the filter
/// headers follow the headers, 2,000 per `getcfheaders`; filters are fetched when a
/// session waits for one, up to 100 ahead (a scan asks for them in order). One request of
/// each kind at a time.
#[derive(Default)]
pub(super) struct Filters {
    /// The `getcfheaders` in flight.
    headers_asked: Option<HeadersAsked>,
    /// The stop blocks of the last `getcfheaders` given up (the node lost the lead): a
    /// node answers every request, in order, so their answers may still come, before the
    /// answer to one asked since; they are let go, not taken for that answer.
    given_up: [Option<BlockHash>; GIVEN_UP],
    /// The range of the `getcfilters` in flight.
    fetching: Option<(u32, u32)>,
    hashes: Vec<FilterHash>,
}

/// `getcfheaders` given up whose answers are still recognised: a node that loses and
/// takes the lead more often than this before answering is out of step, and its late
/// answer drops it.
const GIVEN_UP: usize = 4;

/// A `getcfheaders` in flight: what its answer must be.
#[derive(Clone, Copy)]
struct HeadersAsked {
    /// Its first height.
    first: u32,
    /// Its stop block.
    stop: BlockHash,
    /// How many filter hashes it covers.
    count: u32,
}

/// Filters fetched ahead of the one a session waits for.
const FETCH_AHEAD: u32 = 100;

impl Filters {
    /// The node lost the lead: nothing asked is awaited now (asked afresh if it leads
    /// again); the answer to the `getcfheaders` in flight will be recognised and let go.
    fn give_up(&mut self) {
        if let Some(asked) = self.headers_asked.take() {
            self.given_up.rotate_right(1);
            self.given_up[0] = Some(asked.stop);
        }
        self.fetching = None;
    }

    /// Ask for what is due, up to `limit` (the node's height): filter headers the chain
    /// lacks, filters sessions wait for.
    fn ask(&mut self, out: &mut Vec<u8>, magic: [u8; 4], gw: &Gateway<'_>, limit: u32) {
        let Ok(c) = gw.chain.read() else {
            return;
        };
        let Some(f) = c.filters() else {
            return;
        };
        let next = f.tip().map_or(0, |t| t + 1);
        let top = c.tip().height.min(limit);
        let last = top.min(next.saturating_add(p2p::MAX_CFHEADERS - 1));
        if self.headers_asked.is_none()
            && next <= top
            && let Some(stop) = c.block_hash(last)
        {
            p2p::encode(out, magic, "getcfheaders", |p| {
                p2p::write_filter_request(p, next, &stop)
            });
            self.headers_asked = Some(HeadersAsked {
                first: next,
                stop,
                count: last - next + 1,
            });
        }
        let wanted = f.wanted(FETCH_AHEAD.min(p2p::MAX_GETCFILTERS));
        if self
            .fetching
            .is_some_and(|(_, last)| wanted.is_none_or(|(first, _)| first > last))
        {
            // Everything in flight is answered (or no longer wanted).
            self.fetching = None;
        }
        if self.fetching.is_none()
            && let Some((first, last)) = wanted
            && first <= limit
            && let Some(stop) = c.block_hash(last.min(limit))
        {
            p2p::encode(out, magic, "getcfilters", |p| {
                p2p::write_filter_request(p, first, &stop)
            });
            // The node answers up to the stop block: that is the last to wait for.
            self.fetching = Some((first, last.min(limit)));
        }
    }

    /// Filter hashes from the node: chained onto those held; announced to clients (a tip
    /// again) when they reach the tip. One that does not answer the request in flight,
    /// or does not follow on from the filter headers held, is an error (the held ones
    /// stay). Whether it answered what was asked.
    pub(super) fn on_cfheaders(
        &mut self,
        gw: &Gateway<'_>,
        payload: &[u8],
        events: &mut VecDeque<Event>,
    ) -> Result<bool, UpstreamError> {
        self.hashes.clear();
        let (stop, prev) = p2p::read_cfheaders(payload, &mut self.hashes)?;
        if let Some(late) = self.given_up.iter_mut().find(|s| **s == Some(stop)) {
            // The answer to a request given up: let go (the one in flight still waits).
            *late = None;
            return Ok(false);
        }
        let Some(asked) = self.headers_asked.take() else {
            // Not asked for: nothing to do.
            return Ok(false);
        };
        let wrong = |wrong| UpstreamError::FilterHeaders {
            height: asked.first,
            wrong,
        };
        if stop != asked.stop {
            return Err(wrong(WrongFilterHeaders::WrongStop));
        }
        if self.hashes.len() != asked.count as usize {
            return Err(wrong(WrongFilterHeaders::WrongCount {
                asked: asked.count,
                got: self.hashes.len(),
            }));
        }
        let Ok(mut c) = gw.chain.write() else {
            return Ok(true);
        };
        let tip = c.tip().height;
        // The served chain moved since the request (a reorg took the stop block off it,
        // or filter headers held were dropped or came from the node leading before): the
        // answer is of no use now, and no fault of the node's. It is asked afresh.
        if c.height_of(&stop) != Some(asked.first + asked.count - 1) {
            return Ok(true);
        }
        let Some(f) = c.filters_mut() else {
            return Ok(true);
        };
        if f.tip().map_or(0, |t| t + 1) != asked.first {
            return Ok(true);
        }
        if f.extend(asked.first, prev, &self.hashes).is_err() {
            // Its chain of filter headers and the one held disagree below `first`: one of
            // the nodes lied, and which cannot be told from here. The held ones stay (an
            // answer never erases them), and this node goes.
            return Err(wrong(WrongFilterHeaders::DoNotFollowOn));
        }
        if f.tip() == Some(tip) {
            events.push_back(Event::TipChanged);
        }
        Ok(true)
    }

    /// A filter from the node, in the range asked for: cached if it is the one its filter
    /// header commits to, an error if not. Whether it answered what was asked.
    pub(super) fn on_cfilter(
        &mut self,
        gw: &Gateway<'_>,
        payload: &[u8],
        events: &mut VecDeque<Event>,
    ) -> Result<bool, UpstreamError> {
        let (block, filter) = p2p::read_cfilter(payload)?;
        let Ok(c) = gw.chain.read() else {
            return Ok(false);
        };
        let Some(height) = c.height_of(&block) else {
            return Ok(false);
        };
        let Some((_, last)) = self.fetching.filter(|(a, b)| (*a..=*b).contains(&height)) else {
            // Not asked for: not looked at.
            return Ok(false);
        };
        let taken = c.filters().is_some_and(|f| f.insert(height, filter));
        drop(c);
        if !taken {
            return Err(UpstreamError::FilterMismatch(height));
        }
        if last == height {
            self.fetching = None;
        }
        events.push_back(Event::DataArrived);
        Ok(true)
    }
}

/// Ask the node for the block a session waits for, if none is asked already and the node
/// has it (it is at or below `limit`, the node's height).
fn ask_block(
    out: &mut Vec<u8>,
    magic: [u8; 4],
    gw: &Gateway<'_>,
    asked: &mut Option<BlockHash>,
    limit: u32,
) {
    if asked.is_some() {
        return;
    }
    // The lowest block a live session waits for that the node has: on the served chain
    // (a session may wait for one a reorg took off it) at or below its height.
    let Some(hash) = gw.chain.read().ok().and_then(|c| {
        c.blocks()?
            .wanted_within(|height, hash| height <= limit && c.height_of(hash) == Some(height))
    }) else {
        return;
    };
    p2p::encode(out, magic, "getdata", |p| {
        p2p::write_getdata_block(p, &hash)
    });
    *asked = Some(hash);
}
