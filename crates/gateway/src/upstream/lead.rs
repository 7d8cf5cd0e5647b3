//! What one node's connection knows of its place for the lead, and what the lead asks of
//! its node: filter headers following the headers, the filters and blocks sessions wait
//! for, and clients' transactions to relay. Sans-IO: requests are appended to the bytes
//! to write, and what the shell must pass on to [`Event`]s.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use lightwire_chain::{BlockHash, Header};
use lightwire_primitives::FilterHash;
use lightwire_proto::Millis;

use super::UpstreamError;
use super::peer::{Event, Gateway};
use crate::p2p::{self, P2pError};

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
    pub(super) filters: Filters,
    /// The block asked of the node (one at a time).
    block_asked: Option<BlockHash>,
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
            filters: Filters::default(),
            block_asked: None,
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
        let may = limit.is_some() && (has_filters || !serves_filters);
        let (leads, gave_up) = gw.followers.leads(i, may);
        if gave_up {
            events.push_back(Event::LeadFreed);
        }
        if !leads {
            // Not the lead (or no longer): nothing of ours is awaited. What it was asked
            // and may never answer (the served chain left its branch) is forgotten, so
            // that it asks afresh if it leads again.
            self.waiting_since = None;
            if self.in_flight() {
                self.filters = Filters::default();
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

    fn in_flight(&self) -> bool {
        self.filters.headers_from.is_some()
            || self.filters.fetching.is_some()
            || self.block_asked.is_some()
    }

    /// A block from the node: kept for the sessions waiting if it is the one asked for and
    /// checks against its header; a block that does not is an error (the connection to
    /// the node starts over), after the sessions are told it is not found.
    pub(super) fn on_block(
        &mut self,
        gw: &Gateway<'_>,
        payload: &[u8],
        events: &mut VecDeque<Event>,
    ) -> Result<(), UpstreamError> {
        let header: &[u8; 80] = payload
            .get(..80)
            .and_then(|h| h.try_into().ok())
            .ok_or(P2pError::Truncated("block"))?;
        let hash = lightwire_chain::hash_header_bytes(header);
        if self.block_asked != Some(hash) {
            // Not asked for (a block announced unasked): nothing to do.
            return Ok(());
        }
        self.block_asked = None;
        let result = match gw.chain.read() {
            Ok(c) => c.blocks().map_or(Ok(()), |b| b.insert(&hash, payload)),
            Err(_) => Ok(()),
        };
        events.push_back(Event::DataArrived);
        result.map_err(UpstreamError::from)
    }

    /// The node has not the blocks of a `notfound`: sessions asking for them are told.
    pub(super) fn on_notfound(
        &mut self,
        gw: &Gateway<'_>,
        payload: &[u8],
        events: &mut VecDeque<Event>,
    ) -> Result<(), UpstreamError> {
        let asked = &mut self.block_asked;
        p2p::inv_blocks(payload, |hash| {
            if let Ok(c) = gw.chain.read()
                && let Some(b) = c.blocks()
            {
                b.missing_block(&hash);
            }
            if *asked == Some(hash) {
                *asked = None;
            }
        })?;
        events.push_back(Event::DataArrived);
        Ok(())
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
    /// The first height of the `getcfheaders` in flight.
    headers_from: Option<u32>,
    /// The range of the `getcfilters` in flight.
    fetching: Option<(u32, u32)>,
    hashes: Vec<FilterHash>,
}

/// Filters fetched ahead of the one a session waits for.
const FETCH_AHEAD: u32 = 100;

impl Filters {
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
        if self.headers_from.is_none()
            && next <= top
            && let Some(stop) = c.block_hash(top.min(next + p2p::MAX_CFHEADERS - 1))
        {
            p2p::encode(out, magic, "getcfheaders", |p| {
                p2p::write_filter_request(p, next, &stop)
            });
            self.headers_from = Some(next);
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
            self.fetching = Some((first, last));
        }
    }

    /// Filter hashes from the node: chained onto those held; announced to clients (a tip
    /// again) when they reach the tip.
    pub(super) fn on_cfheaders(
        &mut self,
        gw: &Gateway<'_>,
        payload: &[u8],
        events: &mut VecDeque<Event>,
    ) -> Result<(), UpstreamError> {
        let Some(first) = self.headers_from.take() else {
            return Ok(());
        };
        self.hashes.clear();
        let (stop, prev) = p2p::read_cfheaders(payload, &mut self.hashes)?;
        let Ok(mut c) = gw.chain.write() else {
            return Ok(());
        };
        let stop_height = c.height_of(&stop);
        let expected = (first as usize + self.hashes.len()).checked_sub(1);
        if stop_height.map(|h| h as usize) != expected {
            // Not the answer to what we asked (the chain moved meanwhile): ask again.
            return Ok(());
        }
        let tip = c.tip().height;
        let Some(f) = c.filters_mut() else {
            return Ok(());
        };
        if let Err(e) = f.extend(first, prev, &self.hashes) {
            // The node's filter-header chain does not follow on from ours: ours is of a
            // branch the node left (a reorg raced the request). Start over below it.
            tracing::warn!(upstream_filters = %e, "filter headers start over from {}", first.saturating_sub(1));
            f.truncate(first.saturating_sub(1));
            return Ok(());
        }
        if f.tip() == Some(tip) {
            events.push_back(Event::TipChanged);
        }
        Ok(())
    }

    /// A filter from the node: cached if it is the one its filter header commits to.
    pub(super) fn on_cfilter(
        &mut self,
        gw: &Gateway<'_>,
        payload: &[u8],
        events: &mut VecDeque<Event>,
    ) -> Result<(), UpstreamError> {
        let (block, filter) = p2p::read_cfilter(payload)?;
        let Ok(c) = gw.chain.read() else {
            return Ok(());
        };
        let Some(height) = c.height_of(&block) else {
            return Ok(());
        };
        let taken = c.filters().is_some_and(|f| f.insert(height, filter));
        drop(c);
        if !taken {
            return Err(UpstreamError::FilterMismatch(height));
        }
        if self.fetching.is_some_and(|(_, last)| last == height) {
            self.fetching = None;
        }
        events.push_back(Event::DataArrived);
        Ok(())
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
    let Some(hash) = gw.chain.read().ok().and_then(|c| {
        let hash = c.blocks().and_then(|b| b.wanted())?;
        c.height_of(&hash).filter(|h| *h <= limit).map(|_| hash)
    }) else {
        return;
    };
    p2p::encode(out, magic, "getdata", |p| {
        p2p::write_getdata_block(p, &hash)
    });
    *asked = Some(hash);
}
