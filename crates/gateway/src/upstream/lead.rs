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

/// The longest a node that left requests unanswered rests from its role before it is
/// asked again (the rest starts at the data deadline and doubles).
pub(super) const MAX_REST: Duration = Duration::from_secs(15 * 60);

/// How long after relaying a client's transaction the node is asked whether it holds it:
/// Bitcoin Core answers `getdata` for a transaction it did not announce to the peer only
/// once it has been in its mempool for `UNCONDITIONAL_RELAY_DELAY` (2 minutes,
/// `FindTxForGetData`), and it does not announce one back to the peer that sent it.
pub const ASK_BACK: Duration = Duration::from_secs(2 * 60 + 10);

/// Relayed transactions waiting to be asked back at most (the relay queue's 64, four
/// times over); more are not asked back.
const ASK_BACK_KEPT: usize = 256;

/// The `feefilter` by which Bitcoin Core says it takes no transactions: `MAX_MONEY` in
/// sat/kvB, sent while in initial block download (`MaybeSendFeefilter`).
pub(super) const IBD_FEEFILTER: u64 = 21_000_000 * 100_000_000;

/// What the lead does, each by the node best placed for it (one node may do all three):
/// Bitcoin Core with its defaults serves no filters but every block and transaction, and
/// a pruned or blocks-only one serves less.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Role {
    /// Filter headers and filters: only a node that says NODE_COMPACT_FILTERS (Core with
    /// `peerblockfilters=1`; it disconnects a peer asking without the bit,
    /// `PrepareBlockFilterRequest`).
    Filters = 0,
    /// The blocks sessions wait for: any node; a pruned one (BIP159) only for its last
    /// 288 (Core disconnects a peer asking deeper, `ProcessGetBlockData`), and below a
    /// node of the same height that keeps every block.
    Blocks = 1,
    /// Clients' transactions: a node whose `version` asks for them (a `-blocksonly` Core
    /// says not, and drops them) and that takes them now (Core drops them during its
    /// initial block download, and says so with a `feefilter` of `MAX_MONEY`).
    Transactions = 2,
}

impl Role {
    /// Every role.
    pub const ALL: [Role; 3] = [Role::Filters, Role::Blocks, Role::Transactions];

    fn name(self) -> &'static str {
        match self {
            Role::Filters => "filters",
            Role::Blocks => "blocks",
            Role::Transactions => "clients' transactions",
        }
    }
}

/// What a node's connection says of its place for the lead (see
/// [`super::Followers`]): for each role, the node that can deliver the most leads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Candidacy {
    /// Its height on the served chain; `None` when its tip is not on it: then it may
    /// lead nothing.
    pub(super) height: Option<u32>,
    /// How far it serves filters: its height, or less where its RPC said its filter index
    /// has got no further.
    pub(super) filter_height: Option<u32>,
    /// It said `notfound` for [`STRIKES`] blocks in a row.
    pub(super) struck: bool,
    /// It keeps every block (not a pruned node).
    pub(super) full: bool,
    /// The roles it may take now (by [`Role`]): what it serves, less a role it rests from
    /// after leaving requests unanswered.
    pub(super) may: [bool; 3],
}

impl Candidacy {
    /// How it ranks for `role`: by its height on the served chain (a node can be asked
    /// for nothing above it, so one stuck at genesis delivers nothing), then not struck,
    /// then keeping every block; `None` when it may not lead it.
    pub(super) fn rank(&self, role: Role) -> Option<(u32, bool, bool)> {
        if !self.may[role as usize] {
            return None;
        }
        let height = match role {
            Role::Filters => self.filter_height,
            _ => self.height,
        };
        height.map(|h| (h, !self.struck, self.full))
    }
}

/// Requests of one role in flight and unanswered since, and the rest after leaving them
/// so (Bitcoin Core answers nothing for filters its index has not reached, nor for a
/// block it has not: silence is not a fault, only a reason to ask elsewhere or later).
#[derive(Clone, Copy, Default)]
struct Waiting {
    /// Since when its requests are in flight with none answered.
    since: Option<Millis>,
    /// Until when it rests from the role.
    resting_until: Option<Millis>,
    /// How long the next rest lasts (0: the data deadline).
    next_rest: Duration,
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
    /// Its user agent (BIP14), sanitised.
    pub(super) agent: String,
    /// The last `feefilter` it sent (BIP133, sat/kvB): Bitcoin Core sends `MAX_MONEY`
    /// while in initial block download, when it drops transactions.
    pub(super) feefilter: Option<u64>,
    on_best: bool,
    /// The roles it led when last it looked.
    leading: [bool; 3],
    pub(super) filters: Filters,
    /// The block asked of the node (one at a time).
    block_asked: Option<BlockHash>,
    /// `notfound` answers in a row for the block asked.
    strikes: u32,
    /// Filters' and blocks' requests in flight, and rests (by [`Role`]; transactions
    /// are not answered).
    waiting: [Waiting; 2],
    /// How long requests may stay unanswered.
    data_deadline: Duration,
    /// Clients' transactions relayed through the node, and when to ask it back for each
    /// (when the mempool is followed).
    to_ask_back: VecDeque<([u8; 32], Millis)>,
    /// Those asked back, unanswered yet (a `notfound` for one says the node did not take
    /// it, or no longer holds it).
    asked_back: VecDeque<[u8; 32]>,
}

impl Place {
    /// A node at `addr` just connected, whose requests may stay unanswered for
    /// `data_deadline` when it leads.
    pub(super) fn new(addr: SocketAddr, data_deadline: Duration) -> Place {
        Place {
            addr,
            tip: None,
            version: None,
            agent: String::new(),
            feefilter: None,
            on_best: false,
            leading: [false; 3],
            filters: Filters::default(),
            block_asked: None,
            strikes: 0,
            waiting: [Waiting::default(); 2],
            data_deadline,
            to_ask_back: VecDeque::new(),
            asked_back: VecDeque::new(),
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

    /// The roles it led when last it looked (by [`Role`]).
    pub(super) fn leading(&self) -> [bool; 3] {
        self.leading
    }

    /// A request of `role` was answered: its clock starts over, and so does its rest.
    pub(super) fn answered(&mut self, role: Role) {
        if let Some(w) = self.waiting.get_mut(role as usize) {
            w.since = None;
            w.next_rest = Duration::ZERO;
        }
    }

    /// The next time something is due: requests overdue, a rest over, a transaction to
    /// ask back.
    pub(super) fn deadline(&self) -> Option<Millis> {
        self.waiting
            .iter()
            .flat_map(|w| [w.since.map(|t| t + self.data_deadline), w.resting_until])
            .chain([self.to_ask_back.front().map(|(_, at)| *at)])
            .flatten()
            .min()
    }

    /// Ask the node back for the transactions relayed through it whose time has come
    /// (see [`ASK_BACK`]): one it holds comes as `tx` and joins the mempool served.
    pub(super) fn ask_back(&mut self, out: &mut Vec<u8>, magic: [u8; 4], now: Millis) {
        let mut due = Vec::new();
        while let Some((txid, _)) = self.to_ask_back.front().filter(|(_, at)| *at <= now) {
            due.push(*txid);
            self.to_ask_back.pop_front();
        }
        if due.is_empty() {
            return;
        }
        p2p::encode(out, magic, "getdata", |p| p2p::write_getdata_txs(p, &due));
        for txid in due {
            if self.asked_back.len() == ASK_BACK_KEPT {
                self.asked_back.pop_front();
            }
            self.asked_back.push_back(txid);
        }
    }

    /// A `notfound` for transactions: those asked back the node does not hold (it did not
    /// take them, or mined or evicted them since), said in the log.
    pub(super) fn on_notfound_txs(&mut self, payload: &[u8]) -> Result<(), UpstreamError> {
        let addr = self.addr;
        let asked = &mut self.asked_back;
        p2p::inv_txs(payload, |txid| {
            if let Some(i) = asked.iter().position(|t| *t == txid) {
                asked.remove(i);
                let mut shown = txid;
                shown.reverse();
                tracing::warn!(
                    upstream = %addr,
                    txid = %hex::encode(shown),
                    "upstream does not hold a client's transaction relayed through it two \
                     minutes ago: it refused it (Bitcoin Core says nothing of why), or mined \
                     or evicted it since"
                );
            }
        })?;
        Ok(())
    }

    /// Whether transactions asked back are awaited (only then is a `tx` hashed for them).
    pub(super) fn awaits_txs(&self) -> bool {
        !self.asked_back.is_empty()
    }

    /// A `tx` from the node: no longer awaited as an answer to asking back.
    pub(super) fn on_tx(&mut self, txid: &[u8; 32]) {
        self.asked_back.retain(|t| t != txid);
    }

    /// Whether something is due at `now`.
    pub(super) fn due(&self, now: Millis) -> bool {
        self.deadline().is_some_and(|d| d <= now)
    }

    /// Requests left unanswered past the data deadline at `now`: given up, and the node
    /// rests from their role (another may take it meanwhile), for the data deadline at
    /// first, twice as long each time after, up to [`MAX_REST`]; rests over at `now`
    /// end. The connection stays: the node still serves headers and what else it leads.
    pub(super) fn rest_overdue(&mut self, now: Millis) {
        for role in [Role::Filters, Role::Blocks] {
            let w = &mut self.waiting[role as usize];
            if w.resting_until.is_some_and(|t| t <= now) {
                w.resting_until = None;
            }
            if w.since.is_none_or(|t| t + self.data_deadline > now) {
                continue;
            }
            let rest = w.next_rest.max(self.data_deadline);
            w.since = None;
            w.resting_until = Some(now + rest);
            w.next_rest = (rest * 2).min(MAX_REST);
            match role {
                Role::Filters => self.filters.give_up(),
                _ => self.block_asked = None,
            }
            tracing::warn!(
                upstream = %self.addr,
                role = role.name(),
                rest_s = rest.as_secs(),
                "upstream left requests unanswered (Bitcoin Core answers nothing for filters \
                 its index has not reached, or a block it has not): asked of another node, \
                 or of it again after the rest"
            );
        }
    }

    /// Ask node `i` for what the sessions wait for (up to its height) in the roles it
    /// leads and pass clients' transactions on if it leads them; give up what it may no
    /// longer lead.
    pub(super) fn serve(
        &mut self,
        out: &mut Vec<u8>,
        magic: [u8; 4],
        gw: &Gateway<'_>,
        i: usize,
        now: Millis,
        events: &mut VecDeque<Event>,
    ) {
        // The node's height on the served chain, whether filters are served, and how far
        // its filter index has got where its RPC said so (Bitcoin Core answers nothing for
        // filters past it): one read of the chain per message.
        let (limit, serves_filters, index) = match gw.chain.read() {
            Ok(c) => (
                self.tip.and_then(|t| c.height_of(&t)),
                c.filters().is_some(),
                c.fees().and_then(|f| f.filter_index(self.addr)),
            ),
            Err(_) => (None, false, None),
        };
        if self.on_best != limit.is_some() {
            self.on_best = limit.is_some();
            log_place(self.addr, self.on_best);
        }
        let version = self.version.unwrap_or(p2p::Version {
            services: 0,
            start_height: 0,
            relay: false,
        });
        let resting = |role: Role| {
            self.waiting[role as usize]
                .resting_until
                .is_some_and(|t| t > now)
        };
        let filter_limit = limit.map(|l| index.map_or(l, |i| i.min(l)));
        let candidacy = Candidacy {
            height: limit,
            filter_height: filter_limit,
            struck: self.strikes >= STRIKES,
            full: !version.is_pruned(),
            may: [
                serves_filters
                    && version.services & p2p::NODE_COMPACT_FILTERS != 0
                    && !resting(Role::Filters),
                !resting(Role::Blocks),
                version.relay && self.feefilter.is_none_or(|f| f < IBD_FEEFILTER),
            ],
        };
        let (leads, changed) = gw.followers.leads(i, candidacy, gw.relay);
        if changed {
            events.push_back(Event::LeadFreed);
        }
        for role in Role::ALL {
            if leads[role as usize] != self.leading[role as usize] {
                self.leading[role as usize] = leads[role as usize];
                self.took_or_lost(gw, role, limit.unwrap_or(0));
            }
        }
        // What it was asked in a role it no longer leads, and may never answer (the served
        // chain left its branch, it rests), is forgotten, so that it asks afresh if it
        // leads again; nothing of it is awaited.
        if !leads[Role::Filters as usize] {
            self.waiting[Role::Filters as usize].since = None;
            self.filters.give_up();
        }
        if !leads[Role::Blocks as usize] {
            self.waiting[Role::Blocks as usize].since = None;
            self.block_asked = None;
        }
        let Some(limit) = limit else {
            return;
        };
        if leads[Role::Filters as usize]
            && let Some(filter_limit) = filter_limit
        {
            self.filters.ask(out, magic, gw, filter_limit);
            let in_flight = self.filters.in_flight();
            clock(&mut self.waiting[Role::Filters as usize], in_flight, now);
        }
        if leads[Role::Blocks as usize] {
            // A pruned node is asked only for its last blocks; the sessions waiting for a
            // deeper one are told it is not found (another gateway may have it).
            let floor = match version.is_pruned() {
                true => limit.saturating_sub(p2p::NODE_NETWORK_LIMITED_MIN_BLOCKS),
                false => 0,
            };
            ask_block(
                out,
                magic,
                gw,
                &mut self.block_asked,
                (floor, limit),
                events,
            );
            let in_flight = self.block_asked.is_some();
            clock(&mut self.waiting[Role::Blocks as usize], in_flight, now);
        }
        if leads[Role::Transactions as usize] {
            for tx in gw.relay.take() {
                p2p::encode(out, magic, "tx", |p| p.extend_from_slice(&tx));
                if gw.mempool.is_some()
                    && self.to_ask_back.len() < ASK_BACK_KEPT
                    && let Ok(parsed) = lightwire_primitives::Tx::parse(&tx)
                {
                    self.to_ask_back
                        .push_back((parsed.txid().0, now + ASK_BACK));
                }
            }
        }
    }

    /// The node took the lead of `role` (at `height`), or lost it: said in the log; one
    /// that takes the blocks is asked for those the node before said it lacks.
    fn took_or_lost(&self, gw: &Gateway<'_>, role: Role, height: u32) {
        let role_name = role.name();
        if !self.leading[role as usize] {
            tracing::info!(upstream = %self.addr, height, role = role_name, "upstream no longer leads");
            return;
        }
        tracing::info!(
            upstream = %self.addr,
            height,
            role = role_name,
            "upstream leads: what the sessions wait for of this role goes through it"
        );
        if role == Role::Blocks
            && let Ok(c) = gw.chain.read()
            && let Some(b) = c.blocks()
        {
            b.forget_missing();
        }
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
    /// Whether anything asked is awaited.
    fn in_flight(&self) -> bool {
        self.headers_asked.is_some() || self.fetching.is_some()
    }

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
        // What answers the request in flight is taken, even if a request given up before
        // had the same stop: that one may never be answered (Bitcoin Core answers nothing
        // for filters past its index), and an answer to it would be the same.
        let answers = self
            .headers_asked
            .is_some_and(|a| a.stop == stop && a.count as usize == self.hashes.len());
        if !answers && let Some(late) = self.given_up.iter_mut().find(|s| **s == Some(stop)) {
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

/// The clock of requests of one role: it runs from the last answer (or the first request)
/// while anything is in flight.
fn clock(w: &mut Waiting, in_flight: bool, now: Millis) {
    if !in_flight {
        w.since = None;
    } else if w.since.is_none() {
        w.since = Some(now);
    }
}

/// Ask the node for the block a session waits for, if none is asked already and the node
/// has it: on the served chain within `(floor, limit)` (its height, and for a pruned node
/// the lowest it keeps). The lowest block waited for below `floor` is said missing, so
/// that its sessions are told now rather than wait for a node that will never be asked.
fn ask_block(
    out: &mut Vec<u8>,
    magic: [u8; 4],
    gw: &Gateway<'_>,
    asked: &mut Option<BlockHash>,
    (floor, limit): (u32, u32),
    events: &mut VecDeque<Event>,
) {
    if asked.is_some() {
        return;
    }
    let Ok(c) = gw.chain.read() else {
        return;
    };
    let Some(blocks) = c.blocks() else {
        return;
    };
    // The lowest block a live session waits for that the node has: on the served chain
    // (a session may wait for one a reorg took off it) at or below its height.
    let on_chain = |height: u32, hash: &BlockHash| c.height_of(hash) == Some(height);
    if floor > 0
        && let Some(deep) =
            blocks.wanted_within(|height, hash| height < floor && on_chain(height, hash))
    {
        tracing::info!(block = %deep, floor, "a block below what the pruned upstream keeps: not found");
        blocks.missing_block(&deep);
        events.push_back(Event::DataArrived);
    }
    let Some(hash) = blocks
        .wanted_within(|height, hash| (floor..=limit).contains(&height) && on_chain(height, hash))
    else {
        return;
    };
    p2p::encode(out, magic, "getdata", |p| {
        p2p::write_getdata_block(p, &hash)
    });
    *asked = Some(hash);
}
