//! One client connection's protocol state after the handshake, sans-IO (docs/PROTOCOL.md).
//!
//! The responder feeds each decrypted message to [`Session::receive`] and, whenever the
//! connection can take another frame, asks [`Session::next_message`] to write the next
//! message into the frame buffer's body. Answers are produced one message at a time from
//! the served chain, so a connection holds at most one frame whatever its client asks for
//! or however slowly it reads; queued requests are a few integers each.

use core::fmt;
use std::collections::VecDeque;

use lightwire_chain::{BlockHash, HEADER_LEN};
use lightwire_primitives::{FilterHash, FilterHeader};

use lightwire_wire::Features;
use lightwire_wire::filters::{
    FILTER_CHECKPOINT_INTERVAL, MAX_CHECKPOINTS_PER_MESSAGE, MAX_FILTER_HASHES_PER_MESSAGE,
    MAX_REQUEST_FILTER_HEADERS, MAX_REQUEST_FILTERS,
};
use lightwire_wire::sync::{
    MAX_HEADERS_PER_MESSAGE, MAX_LOCATOR, MAX_PENDING_REQUESTS, MAX_REQUEST_HEADERS,
};
use lightwire_wire::{
    AnswerFlags, BLOCKS_FEATURE, BlockKind, BlockPiece, COMPACT_HEADERS_FEATURE, DecodeError,
    EncodeError, FILTERS_FEATURE, FilterCheckpoints, FilterHeaders, FilterKind, FilterRange,
    FiltersWriter, GetHeaders, Headers, HeadersCompact, Init, InitRefusal, MEMPOOL_FEATURE,
    Message, Networks, Ping, Pong, RELAY_FEATURE, TWEAKS_FEATURE, Tip, TxResult, Warning,
};
use lightwire_wire::{FEES_FEATURE, FeeRates, FeeSource};

pub use lightwire_wire::RelayStatus;

use crate::feed::Feed;
pub use crate::feed::MempoolChange;

/// The tip as announced in `tip` messages.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ServedTip {
    /// Height.
    pub height: u32,
    /// The header, encoded.
    pub header: [u8; HEADER_LEN],
    /// Cumulative work, big-endian.
    pub chainwork: [u8; 32],
}

/// A filter header and the filter hash it chains (BIP157).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct FilterEntry {
    /// The filter header.
    pub header: FilterHeader,
    /// The filter's hash.
    pub hash: FilterHash,
}

/// What a [`Served`] chain has of a filter or a block.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FilterLookup<R> {
    /// Here it is (what the reader returned).
    Ready(R),
    /// Being fetched: the shell calls [`Session::data_arrived`] when it is in.
    Pending,
    /// Not on this chain, or not served.
    Missing,
}

/// The chain a responder serves, as its sessions read it: the gateway's in-memory chain,
/// or a test's. Reads are brief and never block.
pub trait Served {
    /// The tip.
    fn tip(&self) -> ServedTip;

    /// The height of a header on this chain.
    fn height_of(&self, hash: &BlockHash) -> Option<u32>;

    /// Height of the first header held (0 for a chain from genesis).
    fn base(&self) -> u32;

    /// Copy headers `from..from + n` (as many as exist) into `out`, 80 bytes each;
    /// returns how many were copied.
    fn copy_headers(&self, from: u32, n: usize, out: &mut [u8]) -> usize;

    /// The header at `height`, encoded, if this chain holds it.
    fn header(&self, height: u32) -> Option<[u8; HEADER_LEN]> {
        let mut h = [0u8; HEADER_LEN];
        (self.copy_headers(height, 1, &mut h) == 1).then_some(h)
    }

    /// Reorganisations so far: an answer planned before one is cut short.
    fn reorgs(&self) -> u64;

    /// Whether compact block filters are served (the `filters` feature bit).
    fn serves_filters(&self) -> bool {
        false
    }

    /// The mirrors of the chain's history to advertise in `init`: a `bulk_mirrors`
    /// record's value ([`lightwire_wire::Init::encode_mirrors`]), empty for none.
    fn mirrors(&self) -> &[u8] {
        &[]
    }

    /// The highest height whose filter header is known (filter headers may lag headers,
    /// as when a gateway learns them from its node after the headers).
    fn filter_tip(&self) -> Option<u32> {
        None
    }

    /// The filter header and filter hash of the block at `height`.
    fn filter_entry(&self, _height: u32) -> Option<FilterEntry> {
        None
    }

    /// The basic filter of the block at `height` (its serialization: the item count, then
    /// the Golomb-coded set), lent to `read`.
    fn with_filter<R>(&self, _height: u32, _read: impl FnOnce(&[u8]) -> R) -> FilterLookup<R> {
        FilterLookup::Missing
    }

    /// Whether silent-payment tweaks are served (the `tweaks` feature bit).
    fn serves_tweaks(&self) -> bool {
        false
    }

    /// The highest height whose tweak header is known (tweaks are computed after the
    /// headers, from the node's blocks and the outputs they spend).
    fn tweak_tip(&self) -> Option<u32> {
        None
    }

    /// The tweak header and tweak hash of the block at `height`.
    fn tweak_entry(&self, _height: u32) -> Option<FilterEntry> {
        None
    }

    /// The tweak list of the block at `height` (a CompactSize count, then the 33-byte
    /// tweaks, ascending), lent to `read`.
    fn with_tweaks<R>(&self, _height: u32, _read: impl FnOnce(&[u8]) -> R) -> FilterLookup<R> {
        FilterLookup::Missing
    }

    /// Whether `kind`'s data is served.
    fn serves(&self, kind: FilterKind) -> bool {
        match kind {
            FilterKind::Basic => self.serves_filters(),
            FilterKind::Tweaks => self.serves_tweaks(),
        }
    }

    /// [`Self::filter_tip`] or [`Self::tweak_tip`].
    fn data_tip(&self, kind: FilterKind) -> Option<u32> {
        match kind {
            FilterKind::Basic => self.filter_tip(),
            FilterKind::Tweaks => self.tweak_tip(),
        }
    }

    /// [`Self::filter_entry`] or [`Self::tweak_entry`].
    fn data_entry(&self, kind: FilterKind, height: u32) -> Option<FilterEntry> {
        match kind {
            FilterKind::Basic => self.filter_entry(height),
            FilterKind::Tweaks => self.tweak_entry(height),
        }
    }

    /// [`Self::with_filter`] or [`Self::with_tweaks`].
    fn with_data<R>(
        &self,
        kind: FilterKind,
        height: u32,
        read: impl FnOnce(&[u8]) -> R,
    ) -> FilterLookup<R> {
        match kind {
            FilterKind::Basic => self.with_filter(height, read),
            FilterKind::Tweaks => self.with_tweaks(height, read),
        }
    }

    /// Whether blocks are served (the `blocks` feature bit).
    fn serves_blocks(&self) -> bool {
        false
    }

    /// The block at `height` of this chain (its serialization, with witness data), lent
    /// to `read`. The session asks for the same block piece after piece: a chain fetching
    /// it from a node keeps it until it is sent.
    fn with_block<R>(&self, _height: u32, _read: impl FnOnce(&[u8]) -> R) -> FilterLookup<R> {
        FilterLookup::Missing
    }

    /// The transactions the block at `height` spends from that its tweaks need (the
    /// `spent_from` answer: a CompactSize count, then each transaction without witness
    /// data), lent to `read`. Served with the tweaks; asked piece after piece, as a block.
    fn with_spent_from<R>(&self, _height: u32, _read: impl FnOnce(&[u8]) -> R) -> FilterLookup<R> {
        FilterLookup::Missing
    }

    /// Whether `kind`'s per-block data is served (blocks with the `blocks` bit, what a
    /// block spends from with the `tweaks` bit).
    fn serves_block_data(&self, kind: BlockKind) -> bool {
        match kind {
            BlockKind::Block => self.serves_blocks(),
            BlockKind::SpentFrom => self.serves_tweaks(),
        }
    }

    /// [`Self::with_block`] or [`Self::with_spent_from`].
    fn with_block_data<R>(
        &self,
        kind: BlockKind,
        height: u32,
        read: impl FnOnce(&[u8]) -> R,
    ) -> FilterLookup<R> {
        match kind {
            BlockKind::Block => self.with_block(height, read),
            BlockKind::SpentFrom => self.with_spent_from(height, read),
        }
    }

    /// Whether transactions are relayed (the `relay` feature bit).
    fn relays(&self) -> bool {
        false
    }

    /// Pass a transaction (parsed and of standard weight) to the node.
    fn relay_tx(&self, _tx: &[u8]) -> RelayStatus {
        RelayStatus::NoNode
    }

    /// The node's fee estimates, when they are served (the `fees` feature bit): where
    /// they come from and the sat/kvB for 1, 6 and 144 blocks, where there is one.
    fn fee_rates(&self) -> Option<(FeeSource, [Option<u64>; 3])> {
        None
    }

    /// Whether the mempool digest is served (the `mempool` feature bit).
    fn serves_mempool(&self) -> bool {
        false
    }

    /// The number of the latest change to the served mempool (0: none yet).
    fn mempool_head(&self) -> u64 {
        0
    }

    /// The transactions the served mempool holds that came in the changes numbered after
    /// `after` and at most `upto`, in the order they came (a snapshot), lent to `each`
    /// with their numbers until it returns `false`.
    fn mempool_held(
        &self,
        _after: u64,
        _upto: u64,
        _each: impl FnMut(u64, MempoolChange<'_>) -> bool,
    ) {
    }

    /// The changes to the served mempool numbered after `after`, in order, lent to `each`
    /// with their numbers until it returns `false`; `false` (and nothing lent) when they
    /// are no longer all held: the caller starts over from a snapshot.
    fn mempool_changes(
        &self,
        _after: u64,
        _each: impl FnMut(u64, MempoolChange<'_>) -> bool,
    ) -> bool {
        true
    }

    /// The transaction whose txid is `txid`, if the served mempool holds it, lent to
    /// `read`.
    fn with_mempool_tx<R>(&self, _txid: &[u8; 32], _read: impl FnOnce(&[u8]) -> R) -> Option<R> {
        None
    }

    /// Where an answer to `locator` starts: after the first hash on this chain, else
    /// after the first header held.
    fn start_after<'a>(&self, locator: impl Iterator<Item = &'a [u8; 32]>) -> u32 {
        for hash in locator {
            if let Some(h) = self.height_of(&BlockHash(*hash)) {
                return h + 1;
            }
        }
        self.base() + 1
    }
}

/// A client broke a protocol rule; the gateway sends a `warning` and closes.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum Violation {
    /// A message other than `init` came first.
    #[error("the first message must be init")]
    NoInitFirst,
    /// `init` without a `networks` record.
    #[error("init must carry a networks record")]
    MissingNetworks,
    /// `init` whose `networks` does not hold the served chain.
    #[error("init's networks does not include this gateway's chain")]
    WrongNetwork,
    /// `init` requires a feature bit the gateway does not know.
    #[error("init requires unknown feature bit {0}")]
    UnknownRequiredFeature(usize),
    /// A message that does not decode (or an unknown even type).
    #[error("message does not decode: {0}")]
    Undecodable(#[source] DecodeError),
    /// `get_headers` with `max_count` of 0 or over the limit.
    #[error("get_headers max_count {0} is not in 1..={MAX_REQUEST_HEADERS}")]
    MaxCount(u32),
    /// `get_headers` with too many locator hashes.
    #[error("get_headers locator of {0} hashes is over {MAX_LOCATOR}")]
    LocatorTooLong(usize),
    /// More unanswered requests than allowed.
    #[error("more than {MAX_PENDING_REQUESTS} get_headers unanswered")]
    TooManyRequests,
    /// A filter request to a gateway that does not serve filters.
    #[error("this gateway does not serve filters")]
    FiltersNotServed,
    /// A tweak request to a gateway that does not serve tweaks.
    #[error("this gateway does not serve silent-payment tweaks")]
    TweaksNotServed,
    /// A filter request whose range is empty or over its limit.
    #[error("filter request from {start} to {stop} is empty or over the limit of {max}")]
    FilterRange {
        /// The start height asked for.
        start: u32,
        /// The height of the stop hash.
        stop: u32,
        /// The most that kind of request may ask for.
        max: u32,
    },
    /// A block request to a gateway that does not serve blocks.
    #[error("this gateway does not serve blocks")]
    BlocksNotServed,
    /// A second `get_block` before the first was answered in full.
    #[error("get_block while a block is still being sent (one at a time)")]
    BlockInFlight,
    /// A mempool message to a gateway that does not serve the digest.
    #[error("this gateway does not serve the mempool digest")]
    MempoolNotServed,
    /// `get_fee_rates` to a gateway that does not serve them.
    #[error("this gateway does not serve fee rates")]
    FeesNotServed,
}

impl From<InitRefusal> for Violation {
    fn from(r: InitRefusal) -> Self {
        match r {
            InitRefusal::UnknownRequiredFeature(bit) => Violation::UnknownRequiredFeature(bit),
            InitRefusal::MissingNetworks => Violation::MissingNetworks,
            InitRefusal::WrongNetwork => Violation::WrongNetwork,
        }
    }
}

impl Violation {
    /// A short label (for metrics).
    pub fn label(&self) -> &'static str {
        match self {
            Violation::NoInitFirst => "no_init_first",
            Violation::MissingNetworks => "missing_networks",
            Violation::WrongNetwork => "wrong_network",
            Violation::UnknownRequiredFeature(_) => "unknown_required_feature",
            Violation::Undecodable(_) => "undecodable",
            Violation::MaxCount(_) => "max_count",
            Violation::LocatorTooLong(_) => "locator_too_long",
            Violation::TooManyRequests => "too_many_requests",
            Violation::FiltersNotServed => "filters_not_served",
            Violation::TweaksNotServed => "tweaks_not_served",
            Violation::FilterRange { .. } => "filter_range",
            Violation::BlocksNotServed => "blocks_not_served",
            Violation::BlockInFlight => "block_in_flight",
            Violation::MempoolNotServed => "mempool_not_served",
            Violation::FeesNotServed => "fees_not_served",
        }
    }
}

/// What the client said that the shell must act on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Received {
    /// Nothing to do but keep going.
    Ok,
    /// The client sent `error`: close without a reply.
    PeerError,
}

/// A request waiting to be answered: where its answer starts and ends, resolved when it
/// arrived (a few integers; the locator itself is not kept).
#[derive(Clone, Copy, Debug)]
struct Request {
    id: u32,
    /// The next height to send (for checkpoints: the next checkpoint's height).
    next: u32,
    /// The chain's reorg count when the answer started.
    reorgs: u64,
    want: Want,
}

/// What a request asks for.
#[derive(Clone, Copy, Debug)]
enum Want {
    Headers {
        remaining: u32,
        /// The height of `stop_hash`, if it is on the chain.
        stop: Option<u32>,
    },
    /// Filter (or tweak) hashes up to `end` (`None`: the stop hash is not on the chain).
    FilterHeaders { kind: FilterKind, end: Option<u32> },
    /// Checkpoints up to `end`.
    Checkpoints { kind: FilterKind, end: Option<u32> },
    /// Filters (or tweak lists) up to `end`; `offset` into the one of `next` already sent.
    Filters {
        kind: FilterKind,
        end: Option<u32>,
        offset: u32,
    },
    /// The block of height `next`, or what it spends from (`found` false: not on the
    /// chain); `offset` into it already sent.
    Block {
        kind: BlockKind,
        found: bool,
        offset: u32,
    },
}

/// The protocol state of one connection.
#[derive(Debug)]
pub struct Session {
    chain_hash: [u8; 32],
    init_sent: bool,
    init_received: bool,
    tip_due: bool,
    ping_due: bool,
    pong_due: Option<u16>,
    warning: Option<Violation>,
    /// The warning went out: nothing more is sent.
    done: bool,
    requests: VecDeque<Request>,
    /// The request being answered (its `headers` messages have started).
    answering: Option<Request>,
    /// Headers sent since the session started.
    pub headers_sent: u64,
    /// Whether this gateway offers `headers_compact` (see [`Self::offer_compact_headers`]).
    offer_compact: bool,
    /// Whether the client's `init` offered it too: answers are then `headers_compact`.
    compact: bool,
    /// A filter or block the answer needs is being fetched: nothing to write until it
    /// arrives.
    waiting_for_data: bool,
    /// Filter bytes sent since the session started.
    pub filter_bytes_sent: u64,
    /// Block bytes sent since the session started.
    pub block_bytes_sent: u64,
    /// Answers to `send_tx` not sent yet.
    tx_results: VecDeque<TxResult>,
    /// `get_fee_rates` asked and not answered yet: their ids.
    fee_asks: VecDeque<u32>,
    /// The mempool digest subscription, and `get_mempool_tx` requests.
    feed: Feed,
}

impl Session {
    /// A session for a gateway serving the chain whose genesis hash is `chain_hash`.
    pub fn new(chain_hash: [u8; 32]) -> Session {
        Session {
            chain_hash,
            init_sent: false,
            init_received: false,
            tip_due: true,
            ping_due: false,
            pong_due: None,
            warning: None,
            done: false,
            requests: VecDeque::with_capacity(MAX_PENDING_REQUESTS),
            answering: None,
            headers_sent: 0,
            offer_compact: true,
            compact: false,
            waiting_for_data: false,
            filter_bytes_sent: 0,
            block_bytes_sent: 0,
            tx_results: VecDeque::new(),
            fee_asks: VecDeque::new(),
            feed: Feed::default(),
        }
    }

    /// A filter or block the session waited for is in (or given up): try again.
    pub fn data_arrived(&mut self) {
        self.waiting_for_data = false;
    }

    /// Whether to offer `headers_compact` (on by default); call before `init` goes out.
    /// Off, the gateway answers as one from before it existed.
    pub fn offer_compact_headers(&mut self, on: bool) {
        self.offer_compact = on;
    }

    /// The tip changed: announce it at the next request boundary.
    pub fn tip_changed(&mut self) {
        self.tip_due = true;
    }

    /// The served mempool changed: a digest may be due (if the client subscribed).
    pub fn mempool_changed(&mut self) {
        self.feed.changed();
    }

    /// Send a keepalive `ping`.
    pub fn ping(&mut self) {
        self.ping_due = true;
    }

    /// A violation to report with a `warning` before closing.
    pub fn warn(&mut self, v: Violation) {
        self.warning = Some(v);
    }

    /// Take one decrypted message from the client.
    pub fn receive<C: Served>(&mut self, bytes: &[u8], chain: &C) -> Result<Received, Violation> {
        let message = Message::decode(bytes).map_err(Violation::Undecodable)?;
        if !self.init_received {
            let Message::Init(init) = message else {
                return Err(Violation::NoInitFirst);
            };
            init.require_chain(&self.chain_hash)?;
            self.init_received = true;
            self.compact =
                self.offer_compact && init.combined_features().is_set(COMPACT_HEADERS_FEATURE);
            return Ok(Received::Ok);
        }
        match message {
            Message::GetHeaders(req) => self.request(&req, chain)?,
            Message::GetFilterHeaders(req) | Message::GetTweakHeaders(req) => {
                let kind = kind_of(&message);
                let end = self.filter_request(kind, &req.0, MAX_REQUEST_FILTER_HEADERS, chain)?;
                let want = Want::FilterHeaders { kind, end };
                self.queue(req.0.id, req.0.start_height, chain, want);
            }
            Message::GetFilters(req) | Message::GetTweaks(req) => {
                let kind = kind_of(&message);
                let end = self.filter_request(kind, &req.0, MAX_REQUEST_FILTERS, chain)?;
                let want = Want::Filters {
                    kind,
                    end,
                    offset: 0,
                };
                self.queue(req.0.id, req.0.start_height, chain, want);
            }
            Message::GetFilterCheckpoints(req) | Message::GetTweakCheckpoints(req) => {
                let kind = kind_of(&message);
                let range = FilterRange {
                    id: req.id,
                    start_height: FILTER_CHECKPOINT_INTERVAL,
                    stop_hash: req.stop_hash,
                };
                // Any stop height is fine: checkpoints are few.
                let end = self.filter_request(kind, &range, u32::MAX, chain)?;
                let want = Want::Checkpoints { kind, end };
                self.queue(req.id, FILTER_CHECKPOINT_INTERVAL, chain, want);
            }
            Message::GetBlock(req) | Message::GetSpentFrom(req) => {
                let kind = match message {
                    Message::GetSpentFrom(_) => BlockKind::SpentFrom,
                    _ => BlockKind::Block,
                };
                if !chain.serves_block_data(kind) {
                    return Err(match kind {
                        BlockKind::Block => Violation::BlocksNotServed,
                        BlockKind::SpentFrom => Violation::TweaksNotServed,
                    });
                }
                // One of each kind at a time: a gateway fetching from its node fetches
                // one block (or one block's evidence) a session.
                let same = |r: &Request| matches!(r.want, Want::Block { kind: k, .. } if k == kind);
                if self.answering.iter().chain(&self.requests).any(same) {
                    return Err(Violation::BlockInFlight);
                }
                self.check_room()?;
                let height = chain.height_of(&lightwire_chain::BlockHash(req.block_hash));
                let want = Want::Block {
                    kind,
                    found: height.is_some(),
                    offset: 0,
                };
                self.queue(req.id, height.unwrap_or(0), chain, want);
            }
            Message::SendTx(m) => {
                if self.tx_results.len() >= MAX_PENDING_REQUESTS {
                    return Err(Violation::TooManyRequests);
                }
                let (status, txid) = check_tx(m.tx);
                let status = match status {
                    RelayStatus::Relayed => chain.relay_tx(m.tx),
                    refused => refused,
                };
                self.tx_results.push_back(TxResult {
                    id: m.id,
                    status,
                    txid,
                });
            }
            Message::GetFeeRates(m) => {
                if chain.fee_rates().is_none() {
                    return Err(Violation::FeesNotServed);
                }
                if self.fee_asks.len() >= MAX_PENDING_REQUESTS {
                    return Err(Violation::TooManyRequests);
                }
                self.fee_asks.push_back(m.id);
            }
            Message::MempoolSubscribe(m) => self.feed.subscribe(&m, chain)?,
            Message::GetMempoolTx(m) => self.feed.ask(m, chain)?,
            Message::Ping(ping) => self.pong_due = ping.pong_len(),
            Message::Error(_) => return Ok(Received::PeerError),
            // A second init, warnings, pongs, headers and tips from a client, and unknown odd
            // types: nothing to do.
            Message::Init(_)
            | Message::Warning(_)
            | Message::Pong(_)
            | Message::Headers(_)
            | Message::HeadersCompact(_)
            | Message::Tip(_)
            | Message::FilterHeaders(_)
            | Message::FilterCheckpoints(_)
            | Message::Filters(_)
            | Message::TweakHeaders(_)
            | Message::TweakCheckpoints(_)
            | Message::Tweaks(_)
            | Message::Block(_)
            | Message::SpentFrom(_)
            | Message::TxResult(_)
            | Message::MempoolDigest(_)
            | Message::MempoolTx(_)
            | Message::FeeRates(_)
            | Message::Unknown { .. } => {}
        }
        Ok(Received::Ok)
    }

    fn request<C: Served>(&mut self, req: &GetHeaders<'_>, chain: &C) -> Result<(), Violation> {
        if req.max_count == 0 || req.max_count > MAX_REQUEST_HEADERS {
            return Err(Violation::MaxCount(req.max_count));
        }
        let n = req.locator.len() / 32;
        if n > MAX_LOCATOR {
            return Err(Violation::LocatorTooLong(n));
        }
        self.check_room()?;
        let stop = (req.stop_hash != [0; 32])
            .then(|| chain.height_of(&lightwire_chain::BlockHash(req.stop_hash)))
            .flatten();
        let want = Want::Headers {
            remaining: req.max_count,
            stop,
        };
        let next = chain.start_after(req.locator_hashes());
        self.queue(req.id, next, chain, want);
        Ok(())
    }

    fn check_room(&self) -> Result<(), Violation> {
        let unanswered = self.requests.len() + usize::from(self.answering.is_some());
        if unanswered >= MAX_PENDING_REQUESTS {
            return Err(Violation::TooManyRequests);
        }
        Ok(())
    }

    fn queue<C: Served>(&mut self, id: u32, next: u32, chain: &C, want: Want) {
        self.requests.push_back(Request {
            id,
            next,
            reorgs: chain.reorgs(),
            want,
        });
    }

    /// Checks a filter request; the height of its stop hash (`None` when it is not on the
    /// chain: the answer is empty, flagged `stop_unknown`).
    fn filter_request<C: Served>(
        &self,
        kind: FilterKind,
        req: &FilterRange,
        max: u32,
        chain: &C,
    ) -> Result<Option<u32>, Violation> {
        if !chain.serves(kind) {
            return Err(match kind {
                FilterKind::Basic => Violation::FiltersNotServed,
                FilterKind::Tweaks => Violation::TweaksNotServed,
            });
        }
        self.check_room()?;
        let Some(stop) = chain.height_of(&lightwire_chain::BlockHash(req.stop_hash)) else {
            return Ok(None);
        };
        if req.start_height > stop || stop - req.start_height >= max {
            return Err(Violation::FilterRange {
                start: req.start_height,
                stop,
                max,
            });
        }
        Ok(Some(stop))
    }

    /// Whether a message is waiting to be written.
    pub fn has_output(&self) -> bool {
        if self.done {
            return false;
        }
        !self.init_sent
            || self.warning.is_some()
            || self.pong_due.is_some()
            || self.ping_due
            || !self.tx_results.is_empty()
            || !self.fee_asks.is_empty()
            || (self.init_received && self.feed.has_output())
            || (self.init_received
                && !self.waiting_for_data
                && ((self.answering.is_none() && self.tip_due)
                    || self.answering.is_some()
                    || !self.requests.is_empty()))
    }

    /// Whether the session is ending: a `warning` is due or went out.
    pub fn closing(&self) -> bool {
        self.done || self.warning.is_some()
    }

    /// Whether the session has said its last word (its `warning` went out): close now.
    pub fn finished(&self) -> bool {
        self.done
    }

    /// Write the next message into `out` (a frame buffer's body, 65,535 bytes); `None`
    /// when there is nothing to send.
    pub fn next_message<C: Served>(
        &mut self,
        chain: &C,
        out: &mut [u8],
    ) -> Result<Option<usize>, EncodeError> {
        if !self.init_sent {
            self.init_sent = true;
            let chains = [self.chain_hash];
            let bits: &[usize] = if self.offer_compact {
                &[COMPACT_HEADERS_FEATURE]
            } else {
                &[]
            };
            let mut field = [0u8; TWEAKS_FEATURE / 8 + 1];
            let mut all = [0usize; 7];
            let mut n = 0;
            for &b in bits
                .iter()
                .chain(chain.serves_filters().then_some(&FILTERS_FEATURE))
                .chain(chain.serves_blocks().then_some(&BLOCKS_FEATURE))
                .chain(chain.relays().then_some(&RELAY_FEATURE))
                .chain(chain.serves_mempool().then_some(&MEMPOOL_FEATURE))
                .chain(chain.fee_rates().is_some().then_some(&FEES_FEATURE))
                .chain(chain.serves_tweaks().then_some(&TWEAKS_FEATURE))
            {
                all[n] = b;
                n += 1;
            }
            let features = Features::write_bits(&all[..n], &mut field)?;
            let mirrors = chain.mirrors();
            let init = Init {
                mirrors: (!mirrors.is_empty()).then_some(mirrors),
                ..Init::new(features, Some(Networks::from_chains(&chains)))
            };
            return init.encode(out).map(Some);
        }
        if self.done {
            return Ok(None);
        }
        if let Some(v) = self.warning.take() {
            self.done = true;
            let mut text = [0u8; 200];
            let n = write_display(&v, &mut text);
            return Warning::connection(&text[..n]).encode(out).map(Some);
        }
        if let Some(len) = self.pong_due.take() {
            return Pong::encode_zeroed(len, out).map(Some);
        }
        if self.ping_due {
            self.ping_due = false;
            return Ping::encode_zeroed(0, 0, out).map(Some);
        }
        if let Some(r) = self.tx_results.pop_front() {
            return Message::TxResult(r).encode(out).map(Some);
        }
        if let Some(id) = self.fee_asks.pop_front() {
            let (source, rates) = chain.fee_rates().unwrap_or((FeeSource::None, [None; 3]));
            let m = FeeRates { id, source, rates };
            return Message::FeeRates(m).encode(out).map(Some);
        }
        if !self.init_received {
            return Ok(None);
        }
        if let Some(n) = self.feed.next_message(chain, out)? {
            return Ok(Some(n));
        }
        if self.answering.is_none() {
            if self.tip_due {
                self.tip_due = false;
                let tip = chain.tip();
                let m = Tip {
                    height: tip.height,
                    header: &tip.header,
                    chainwork: &tip.chainwork,
                };
                return m.encode(out).map(Some);
            }
            self.answering = self.requests.pop_front();
        }
        if self.waiting_for_data {
            return Ok(None);
        }
        let Some(req) = self.answering else {
            return Ok(None);
        };
        let reorged = chain.reorgs() != req.reorgs;
        let written = match req.want {
            Want::Headers { remaining, stop } => {
                self.write_headers(req, remaining, stop, reorged, chain, out)?
            }
            Want::FilterHeaders { kind, end } => {
                self.write_filter_headers(kind, req, end, reorged, chain, out)?
            }
            Want::Checkpoints { kind, end } => {
                self.write_checkpoints(kind, req, end, reorged, chain, out)?
            }
            Want::Filters { kind, end, offset } => {
                self.write_filters(kind, req, end, offset, chain, out)?
            }
            Want::Block {
                kind,
                found,
                offset,
            } => self.write_block(kind, req, found, offset, reorged, chain, out)?,
        };
        Ok(written)
    }

    fn write_headers<C: Served>(
        &mut self,
        mut req: Request,
        remaining: u32,
        stop: Option<u32>,
        reorged: bool,
        chain: &C,
        out: &mut [u8],
    ) -> Result<Option<usize>, EncodeError> {
        let tip = chain.tip().height;
        let mut end = tip.min(stop.unwrap_or(u32::MAX));
        if reorged {
            // The chain reorganised since this answer was planned: end it here; the client
            // learns the new tip next and asks again from its locator.
            end = req.next.saturating_sub(1);
        }
        end = end.min(req.next.saturating_add(remaining - 1));
        let left = end.saturating_add(1).saturating_sub(req.next) as usize;
        let (len, count, last) = if self.compact {
            let from = req.next;
            let (len, count) = HeadersCompact::encode_answer(out, req.id, from, left, |i| {
                chain.header(from + i as u32)
            })?;
            (len, count, count == left)
        } else {
            let count = left.min(MAX_HEADERS_PER_MESSAGE);
            let fields = Headers {
                id: req.id,
                first_height: req.next,
                last: count == left,
                headers: &[],
            };
            let (start, len) = fields.encode_in_place(count, out)?;
            let copied = chain.copy_headers(req.next, count, &mut out[start..len]);
            if copied != count {
                // The chain is behind what was planned (it cannot be: the tip was read above).
                return Err(EncodeError::BufferTooSmall {
                    needed: count,
                    available: copied,
                });
            }
            (len, count, count == left)
        };
        if !last && count == 0 {
            // Nothing fitted, or the chain is behind what was planned (it cannot be: the tip
            // was read above): never loop on empty messages.
            return Err(EncodeError::BufferTooSmall {
                needed: left,
                available: 0,
            });
        }
        self.headers_sent += count as u64;
        req.next += count as u32;
        req.want = Want::Headers {
            remaining: remaining - count as u32,
            stop,
        };
        self.answering = (!last).then_some(req);
        Ok(Some(len))
    }

    /// The last height a filter answer reaches: its stop, but no further than what the
    /// chain holds filter headers for, and at once after a reorg. `None` when the stop
    /// hash was not on the chain.
    fn filter_end<C: Served>(
        kind: FilterKind,
        req: &Request,
        end: Option<u32>,
        reorged: bool,
        chain: &C,
    ) -> Option<u32> {
        let end = end?;
        let held = chain.data_tip(kind).unwrap_or(0).min(chain.tip().height);
        Some(if reorged {
            req.next.saturating_sub(1)
        } else {
            end.min(held)
        })
    }

    fn write_filter_headers<C: Served>(
        &mut self,
        kind: FilterKind,
        mut req: Request,
        end: Option<u32>,
        reorged: bool,
        chain: &C,
        out: &mut [u8],
    ) -> Result<Option<usize>, EncodeError> {
        let stop_unknown = end.is_none();
        let end = Self::filter_end(kind, &req, end, reorged, chain);
        let left = end.map_or(0, |e| (e + 1).saturating_sub(req.next) as usize);
        let count = left.min(MAX_FILTER_HASHES_PER_MESSAGE);
        let before = match req.next.checked_sub(1) {
            Some(h) if count > 0 => chain.data_entry(kind, h).map(|e| e.header.0),
            _ => Some([0; 32]),
        };
        let from = req.next;
        let entries = (0..count as u32).map(|i| chain.data_entry(kind, from + i));
        // The entries were held when `end` was worked out: a gap would be the chain's bug.
        let (Some(before), true) = (before, entries.clone().all(|e| e.is_some())) else {
            return Err(EncodeError::BufferTooSmall {
                needed: count,
                available: 0,
            });
        };
        let flags = AnswerFlags {
            last: count == left,
            stop_unknown,
        };
        let entry = |i: usize| {
            let e = chain
                .data_entry(kind, from + i as u32)
                .unwrap_or(FilterEntry {
                    header: FilterHeader::ZERO,
                    hash: FilterHash::ZERO,
                });
            (e.header.0, e.hash.0)
        };
        let len =
            FilterHeaders::encode_answer_as(kind, out, req.id, from, flags, count, before, entry)?;
        req.next += count as u32;
        self.answering = (!flags.last).then_some(req);
        Ok(Some(len))
    }

    fn write_checkpoints<C: Served>(
        &mut self,
        kind: FilterKind,
        mut req: Request,
        end: Option<u32>,
        reorged: bool,
        chain: &C,
        out: &mut [u8],
    ) -> Result<Option<usize>, EncodeError> {
        let stop_unknown = end.is_none();
        let end = Self::filter_end(kind, &req, end, reorged, chain);
        let left = end.map_or(0, |e| {
            (e / FILTER_CHECKPOINT_INTERVAL + 1)
                .saturating_sub(req.next / FILTER_CHECKPOINT_INTERVAL)
        }) as usize;
        let count = left.min(MAX_CHECKPOINTS_PER_MESSAGE);
        let flags = AnswerFlags {
            last: count == left,
            stop_unknown,
        };
        let m = FilterCheckpoints {
            id: req.id,
            first_height: req.next,
            flags,
            headers: &[],
        };
        let fixed = m.encode_as(kind, out)?;
        let body = &mut out[fixed..];
        if body.len() < count * 32 {
            return Err(EncodeError::BufferTooSmall {
                needed: fixed + count * 32,
                available: out.len(),
            });
        }
        for (i, dst) in body.chunks_exact_mut(32).take(count).enumerate() {
            let height = req.next + i as u32 * FILTER_CHECKPOINT_INTERVAL;
            let e = chain
                .data_entry(kind, height)
                .ok_or(EncodeError::BufferTooSmall {
                    needed: count,
                    available: i,
                })?;
            dst.copy_from_slice(&e.header.0);
        }
        // `count` went out as 0 with the fixed fields: set it.
        out[11..13].copy_from_slice(&(count as u16).to_be_bytes());
        req.next += count as u32 * FILTER_CHECKPOINT_INTERVAL;
        self.answering = (!flags.last).then_some(req);
        Ok(Some(fixed + count * 32))
    }

    fn write_filters<C: Served>(
        &mut self,
        kind: FilterKind,
        mut req: Request,
        end: Option<u32>,
        mut offset: u32,
        chain: &C,
        out: &mut [u8],
    ) -> Result<Option<usize>, EncodeError> {
        let reorged = chain.reorgs() != req.reorgs;
        let stop_unknown = end.is_none();
        let end = Self::filter_end(kind, &req, end, reorged, chain);
        let mut w = FiltersWriter::new_as(kind, out, req.id)?;
        let mut done = end.is_none_or(|e| req.next > e);
        while !done && w.has_room() {
            let height = req.next;
            let pushed = chain.with_data(kind, height, |f| {
                w.push(height, f, offset as usize)
                    .map(|n| (n, offset as usize + n == f.len()))
            });
            match pushed {
                FilterLookup::Ready(Some((n, whole))) => {
                    self.filter_bytes_sent += n as u64;
                    if whole {
                        offset = 0;
                        req.next += 1;
                        done = end.is_none_or(|e| req.next > e);
                    } else {
                        offset += n as u32;
                    }
                }
                FilterLookup::Ready(None) => break,
                FilterLookup::Pending => {
                    self.waiting_for_data = true;
                    break;
                }
                // Not held after all (the chain moved): end the answer here.
                FilterLookup::Missing => done = true,
            }
        }
        if !done && w.pieces() == 0 {
            req.want = Want::Filters { kind, end, offset };
            self.answering = Some(req);
            return Ok(None);
        }
        let len = w.finish(AnswerFlags {
            last: done,
            stop_unknown,
        });
        req.want = Want::Filters { kind, end, offset };
        self.answering = (!done).then_some(req);
        Ok(Some(len))
    }
}

impl Session {
    /// One piece of the block (or what it spends from) asked for. After a reorg the
    /// height may hold another block: the answer then ends with `not_found` (a client
    /// drops the pieces it had).
    #[allow(clippy::too_many_arguments)]
    fn write_block<C: Served>(
        &mut self,
        kind: BlockKind,
        mut req: Request,
        found: bool,
        offset: u32,
        reorged: bool,
        chain: &C,
        out: &mut [u8],
    ) -> Result<Option<usize>, EncodeError> {
        fn message(kind: BlockKind, p: BlockPiece<'_>) -> Message<'_> {
            match kind {
                BlockKind::Block => Message::Block(p),
                BlockKind::SpentFrom => Message::SpentFrom(p),
            }
        }
        let not_found = |out: &mut [u8]| message(kind, BlockPiece::not_found(req.id)).encode(out);
        if !found || reorged {
            self.answering = None;
            return not_found(out).map(Some);
        }
        let written = chain.with_block_data(kind, req.next, |block| {
            BlockPiece::next(req.id, block, offset as usize)
                .map(|p| (message(kind, p).encode(out), p.data.len(), p.last))
        });
        match written {
            FilterLookup::Ready(Some((len, n, last))) => {
                self.block_bytes_sent += n as u64;
                req.want = Want::Block {
                    kind,
                    found,
                    offset: offset + n as u32,
                };
                self.answering = (!last).then_some(req);
                len.map(Some)
            }
            FilterLookup::Pending => {
                self.waiting_for_data = true;
                Ok(None)
            }
            FilterLookup::Ready(None) | FilterLookup::Missing => {
                self.answering = None;
                not_found(out).map(Some)
            }
        }
    }
}

/// Which chain a filter-family request is about.
fn kind_of(message: &Message<'_>) -> FilterKind {
    match message {
        Message::GetTweakHeaders(_) | Message::GetTweakCheckpoints(_) | Message::GetTweaks(_) => {
            FilterKind::Tweaks
        }
        _ => FilterKind::Basic,
    }
}

/// Bitcoin Core's `MAX_STANDARD_TX_WEIGHT`.
pub const MAX_STANDARD_TX_WEIGHT: usize = 400_000;
/// Bitcoin Core's `MIN_STANDARD_TX_NONWITNESS_SIZE`.
pub const MIN_STANDARD_TX_NONWITNESS_SIZE: usize = 65;

/// All the bitcoin there will ever be, in satoshis (Bitcoin Core's `MAX_MONEY`).
pub const MAX_MONEY: u64 = 21_000_000 * 100_000_000;

/// Whether a transaction may be relayed: it parses as one transaction (nothing after it),
/// passes Bitcoin Core's `CheckTransaction` (which Core, v28 to v30, disconnects a peer for
/// failing: no input spent twice, no output and not the outputs' total above
/// [`MAX_MONEY`], no null previous output), has inputs and outputs and is no coinbase,
/// weighs at most the standard limit, and is not under the standard size without
/// witness. `Relayed` means it may; with its txid.
pub fn check_tx(bytes: &[u8]) -> (RelayStatus, [u8; 32]) {
    let Ok(tx) = lightwire_primitives::Tx::parse(bytes) else {
        return (RelayStatus::Malformed, [0; 32]);
    };
    let txid = tx.txid().0;
    let status = if !passes_check_transaction(&tx) {
        RelayStatus::Invalid
    } else if tx.weight() > MAX_STANDARD_TX_WEIGHT {
        RelayStatus::Oversized
    } else if tx.base_size() < MIN_STANDARD_TX_NONWITNESS_SIZE
        || tx.inputs().next().is_none()
        || tx.outputs().next().is_none()
        || tx.is_coinbase()
    {
        RelayStatus::NotStandard
    } else {
        RelayStatus::Relayed
    };
    (status, txid)
}

/// Bitcoin Core's `CheckTransaction` on what it checks of a transaction alone, past its
/// parse and size: outputs each and together at most [`MAX_MONEY`] ("bad-txns-vout-toolarge",
/// "bad-txns-txouttotal-toolarge"; a value with the sign bit is negative there,
/// "bad-txns-vout-negative", and above it here), no outpoint spent twice
/// ("bad-txns-inputs-duplicate"), and for a transaction that is not a coinbase no null
/// previous output ("bad-txns-prevout-null"). A coinbase is refused as not standard.
fn passes_check_transaction(tx: &lightwire_primitives::Tx<'_>) -> bool {
    let mut total = 0u64;
    for o in tx.outputs() {
        if o.value > MAX_MONEY {
            return false;
        }
        total += o.value;
        if total > MAX_MONEY {
            return false;
        }
    }
    // Outpoints spent twice: their 64-bit keys sorted (the sort of `u64` the package has
    // already; one of its own for outpoints would add 1.5 KB to the wasm), and only where
    // two keys are equal the outpoints compared in full.
    let key = |t: &[u8; 32], v: u32| {
        let mut k = [0u8; 8];
        k.copy_from_slice(&t[..8]);
        u64::from_le_bytes(k) ^ u64::from(v).rotate_left(32)
    };
    let mut keys: Vec<u64> = tx.inputs().map(|i| key(i.prev_txid, i.prev_vout)).collect();
    keys.sort_unstable();
    if keys.windows(2).any(|w| w[0] == w[1]) {
        let spent: Vec<(&[u8; 32], u32)> =
            tx.inputs().map(|i| (i.prev_txid, i.prev_vout)).collect();
        for (n, a) in spent.iter().enumerate() {
            if spent[n + 1..].contains(a) {
                return false;
            }
        }
    }
    tx.is_coinbase()
        || !tx
            .inputs()
            .any(|i| *i.prev_txid == [0; 32] && i.prev_vout == u32::MAX)
}

/// Write `v`'s display text into `out` (truncated), returning the length.
fn write_display(v: &impl fmt::Display, out: &mut [u8]) -> usize {
    struct W<'a>(&'a mut [u8], usize);
    impl fmt::Write for W<'_> {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let n = s.len().min(self.0.len() - self.1);
            self.0[self.1..self.1 + n].copy_from_slice(&s.as_bytes()[..n]);
            self.1 += n;
            Ok(())
        }
    }
    let mut w = W(out, 0);
    let _ = fmt::write(&mut w, format_args!("{v}"));
    w.1
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use lightwire_chain::{BlockHash, REGTEST};
    use lightwire_wire::MAX_MESSAGE_LEN;

    use super::*;
    use crate::testing::TestChain;

    fn chain_hash() -> [u8; 32] {
        REGTEST.genesis.block_hash().0
    }

    fn encode(m: Message<'_>) -> Vec<u8> {
        let mut out = vec![0u8; MAX_MESSAGE_LEN];
        let n = m.encode(&mut out).unwrap();
        out.truncate(n);
        out
    }

    fn init_for(chain: [u8; 32]) -> Vec<u8> {
        let chains = [chain];
        encode(Message::Init(Init::new(
            Features::empty(),
            Some(Networks::from_chains(&chains)),
        )))
    }

    fn get(id: u32, max_count: u32, locator: &[BlockHash]) -> Vec<u8> {
        let flat: Vec<u8> = locator.iter().flat_map(|h| h.0).collect();
        encode(Message::GetHeaders(GetHeaders {
            id,
            max_count,
            stop_hash: [0; 32],
            locator: &flat,
        }))
    }

    /// Every message the session writes until it has nothing more.
    fn drain(s: &mut Session, chain: &TestChain) -> Vec<Vec<u8>> {
        let mut out = vec![0u8; MAX_MESSAGE_LEN];
        let mut all = Vec::new();
        while let Some(n) = s.next_message(chain, &mut out).unwrap() {
            all.push(out[..n].to_vec());
        }
        all
    }

    #[test]
    fn answers_a_request_in_full_messages_then_a_last_one() {
        let chain = TestChain::generate(3000);
        let headers = &chain.headers()[1..];
        let mut s = Session::new(chain_hash());
        assert_eq!(s.receive(&init_for(chain_hash()), &chain), Ok(Received::Ok));
        s.receive(&get(7, 2000, &[REGTEST.genesis.block_hash()]), &chain)
            .unwrap();
        let sent = drain(&mut s, &chain);
        assert!(matches!(Message::decode(&sent[0]), Ok(Message::Init(_))));
        let Ok(Message::Tip(tip)) = Message::decode(&sent[1]) else {
            panic!("tip after init");
        };
        assert_eq!(tip.height, 3000);
        let answers: Vec<Headers<'_>> = sent[2..]
            .iter()
            .map(|m| match Message::decode(m) {
                Ok(Message::Headers(h)) => h,
                other => panic!("{other:?}"),
            })
            .collect();
        let counts: Vec<(u32, usize, bool)> = answers
            .iter()
            .map(|h| (h.first_height, h.count(), h.last))
            .collect();
        assert_eq!(
            counts,
            [(1, 819, false), (820, 819, false), (1639, 362, true)]
        );
        let got: Vec<[u8; 80]> = answers.iter().flat_map(|h| h.iter().copied()).collect();
        let want: Vec<[u8; 80]> = headers[..2000].iter().map(|h| h.encode()).collect();
        assert_eq!(got, want);

        // From a locator in the middle, to the tip: ends early with what there is.
        s.receive(&get(8, 100_000, &[headers[2899].block_hash()]), &chain)
            .unwrap();
        let sent = drain(&mut s, &chain);
        let Ok(Message::Headers(h)) = Message::decode(&sent[0]) else {
            panic!()
        };
        assert_eq!(
            (h.id, h.first_height, h.count(), h.last),
            (8, 2901, 100, true)
        );
        // At the tip: one empty last message.
        s.receive(&get(9, 10, &[headers[2999].block_hash()]), &chain)
            .unwrap();
        let sent = drain(&mut s, &chain);
        let Ok(Message::Headers(h)) = Message::decode(&sent[0]) else {
            panic!()
        };
        assert_eq!((h.first_height, h.count(), h.last), (3001, 0, true));
        assert_eq!(s.headers_sent, 2100);
    }

    #[test]
    fn a_tip_change_is_announced_between_answers_only() {
        let chain = TestChain::generate(2000);
        let mut s = Session::new(chain_hash());
        s.receive(&init_for(chain_hash()), &chain).unwrap();
        let _ = drain(&mut s, &chain);
        s.receive(&get(1, 1000, &[]), &chain).unwrap();
        let mut out = vec![0u8; MAX_MESSAGE_LEN];
        s.next_message(&chain, &mut out).unwrap();
        s.tip_changed();
        let rest = drain(&mut s, &chain);
        let types: Vec<u16> = rest
            .iter()
            .map(|m| u16::from_be_bytes([m[0], m[1]]))
            .collect();
        assert_eq!(types, [Headers::TYPE, Tip::TYPE]);
    }

    #[test]
    fn violations_are_typed() {
        let chain = TestChain::generate(10);
        let mut s = Session::new(chain_hash());
        assert_eq!(
            s.receive(&get(1, 1, &[]), &chain),
            Err(Violation::NoInitFirst)
        );
        assert_eq!(
            s.receive(&init_for([1; 32]), &chain),
            Err(Violation::WrongNetwork)
        );
        assert_eq!(
            s.receive(&encode(Message::Init(Init::default())), &chain),
            Err(Violation::MissingNetworks)
        );
        assert!(matches!(
            s.receive(&[0x00], &chain),
            Err(Violation::Undecodable(_))
        ));
        s.receive(&init_for(chain_hash()), &chain).unwrap();
        assert_eq!(
            s.receive(&get(1, 0, &[]), &chain),
            Err(Violation::MaxCount(0))
        );
        assert_eq!(
            s.receive(&get(1, MAX_REQUEST_HEADERS + 1, &[]), &chain),
            Err(Violation::MaxCount(MAX_REQUEST_HEADERS + 1))
        );
        // A locator over 101 hashes cannot be encoded by our own encoder: build it by hand.
        let mut long = get(1, 1, &[]);
        let n = MAX_LOCATOR + 1;
        long.truncate(long.len() - 2);
        long.extend_from_slice(&(n as u16).to_be_bytes());
        long.extend(std::iter::repeat_n(0u8, n * 32));
        assert_eq!(s.receive(&long, &chain), Err(Violation::LocatorTooLong(n)));
        for id in 0..MAX_PENDING_REQUESTS as u32 {
            s.receive(&get(id, 1, &[]), &chain).unwrap();
        }
        assert_eq!(
            s.receive(&get(99, 1, &[]), &chain),
            Err(Violation::TooManyRequests)
        );
        // The warning is the last message.
        s.warn(Violation::TooManyRequests);
        let mut out = vec![0u8; MAX_MESSAGE_LEN];
        s.next_message(&chain, &mut out).unwrap(); // init
        let n = s.next_message(&chain, &mut out).unwrap().unwrap();
        let Ok(Message::Warning(w)) = Message::decode(&out[..n]) else {
            panic!()
        };
        assert_eq!(w.data_utf8(), Some("more than 8 get_headers unanswered"));
        assert!(s.closing() && s.finished());
        assert_eq!(s.next_message(&chain, &mut out).unwrap(), None);
    }

    #[test]
    fn a_warning_due_before_init_went_out_follows_init() {
        let chain = TestChain::generate(10);
        let mut s = Session::new(chain_hash());
        s.receive(&init_for(chain_hash()), &chain).unwrap();
        s.warn(Violation::MaxCount(0));
        assert!(s.closing() && !s.finished());
        let sent = drain(&mut s, &chain);
        let types: Vec<u16> = sent
            .iter()
            .map(|m| u16::from_be_bytes([m[0], m[1]]))
            .collect();
        assert_eq!(types, [16, 1], "init, then the warning, then nothing");
        assert!(s.finished());
    }

    #[test]
    fn pings_get_pongs() {
        let chain = TestChain::generate(10);
        let mut s = Session::new(chain_hash());
        s.receive(&init_for(chain_hash()), &chain).unwrap();
        let _ = drain(&mut s, &chain);
        let mut ping = vec![0u8; 64];
        let n = Ping::encode_zeroed(5, 0, &mut ping).unwrap();
        s.receive(&ping[..n], &chain).unwrap();
        let sent = drain(&mut s, &chain);
        assert!(matches!(Message::decode(&sent[0]), Ok(Message::Pong(p)) if p.ignored.len() == 5));
    }

    #[test]
    fn an_answer_ends_at_once_when_the_chain_reorgs() {
        let mut chain = TestChain::generate(2000);
        let mut s = Session::new(chain_hash());
        s.receive(&init_for(chain_hash()), &chain).unwrap();
        let _ = drain(&mut s, &chain);
        s.receive(&get(1, 2000, &[]), &chain).unwrap();
        let mut out = vec![0u8; MAX_MESSAGE_LEN];
        s.next_message(&chain, &mut out).unwrap(); // 819 headers from height 1
        chain.reorg(1500, 600, 1);
        s.tip_changed();
        let rest = drain(&mut s, &chain);
        let Ok(Message::Headers(h)) = Message::decode(&rest[0]) else {
            panic!("the answer's end")
        };
        assert_eq!((h.first_height, h.count(), h.last), (820, 0, true));
        assert!(matches!(Message::decode(&rest[1]), Ok(Message::Tip(t)) if t.height == 2100));
        assert_eq!(rest.len(), 2);
    }

    fn range(id: u32, start: u32, stop: BlockHash) -> FilterRange {
        FilterRange {
            id,
            start_height: start,
            stop_hash: stop.0,
        }
    }

    fn ready(chain: &TestChain) -> Session {
        let mut s = Session::new(chain_hash());
        s.receive(&init_for(chain_hash()), chain).unwrap();
        let sent = drain(&mut s, chain);
        let Ok(Message::Init(init)) = Message::decode(&sent[0]) else {
            panic!("init first")
        };
        assert!(init.combined_features().is_set(FILTERS_FEATURE));
        s
    }

    #[test]
    fn tweaks_are_served_as_filters_are_under_their_own_types() {
        let mut chain = TestChain::generate(2500);
        let mut s = ready(&chain);
        let stop = chain.header(2500).block_hash();
        // Not served yet: a tweak request is a rule break of its own.
        let get = Message::GetTweakHeaders(lightwire_wire::GetFilterHeaders(range(1, 0, stop)));
        assert_eq!(
            s.receive(&encode(get), &chain),
            Err(Violation::TweaksNotServed)
        );

        let mut lists = vec![Vec::new(); 2001];
        let tweak = |b: u8| {
            let mut t = [b; 33];
            t[0] = 2;
            t
        };
        lists[7] = vec![tweak(9), tweak(4)];
        lists[2000] = (0..2000u32)
            .map(|i| {
                let mut t = [0u8; 33];
                t[0] = 3;
                t[1..5].copy_from_slice(&i.to_be_bytes());
                t
            })
            .collect();
        chain.serve_tweaks(lists);
        let mut s = ready(&chain);

        // Headers: tweak_headers, chaining the tweak hashes from zeros, up to the stop.
        s.receive(&encode(get), &chain).unwrap();
        let mut next = 0;
        for m in drain(&mut s, &chain) {
            let Ok(Message::TweakHeaders(m)) = Message::decode(&m) else {
                panic!("tweak_headers");
            };
            for (j, hash) in m.hashes.chunks_exact(32).enumerate() {
                let e = chain.tweak_entry(next + j as u32).unwrap();
                assert_eq!(hash, e.hash.0);
            }
            next += m.count() as u32;
        }
        assert_eq!(next, 2501);
        let e7 = chain.tweak_entry(7).unwrap();
        assert_eq!(
            e7.header,
            chain
                .tweak_entry(6)
                .unwrap()
                .header
                .next(&lightwire_primitives::tweak_list_hash(chain.tweak_list(7)))
        );

        // Checkpoints at 1,000 and 2,000.
        let get = lightwire_wire::GetFilterCheckpoints {
            id: 2,
            stop_hash: stop.0,
        };
        s.receive(&encode(Message::GetTweakCheckpoints(get)), &chain)
            .unwrap();
        let sent = drain(&mut s, &chain);
        let Ok(Message::TweakCheckpoints(m)) = Message::decode(&sent[0]) else {
            panic!("tweak_checkpoints");
        };
        let got: Vec<_> = m.iter().map(|(h, c)| (h, *c)).collect();
        let want: Vec<_> = [1000, 2000]
            .iter()
            .map(|&h| (h, chain.tweak_entry(h).unwrap().header.0))
            .collect();
        assert_eq!(got, want);

        // The lists, whole (the 2,000-tweak one, 66 KB, across two messages).
        let stop = chain.header(2001).block_hash();
        let get = Message::GetTweaks(lightwire_wire::GetFilters(range(3, 1995, stop)));
        s.receive(&encode(get), &chain).unwrap();
        let mut lists: std::collections::BTreeMap<u32, Vec<u8>> = Default::default();
        for m in drain(&mut s, &chain) {
            let Ok(Message::Tweaks(m)) = Message::decode(&m) else {
                panic!("tweaks");
            };
            for p in m.pieces() {
                let l = lists.entry(p.height).or_default();
                assert_eq!(p.offset as usize, l.len());
                l.extend_from_slice(p.data);
            }
        }
        assert_eq!(lists.len(), 7);
        for (h, l) in &lists {
            assert_eq!(l.as_slice(), chain.tweak_list(*h), "list {h}");
            lightwire_primitives::TweakList::parse(l).unwrap();
        }
        assert_eq!(lists[&2000].len(), 3 + 2000 * 33);
        assert_eq!(lists[&1999], [0]);

        // The init says so.
        let mut s = Session::new(chain_hash());
        s.receive(&init_for(chain_hash()), &chain).unwrap();
        let sent = drain(&mut s, &chain);
        let Ok(Message::Init(init)) = Message::decode(&sent[0]) else {
            panic!("init first")
        };
        assert!(init.combined_features().is_set(TWEAKS_FEATURE));
    }

    #[test]
    fn filter_headers_are_answered_with_anchors_that_chain() {
        let chain = TestChain::generate(3000);
        let mut s = ready(&chain);
        let stop = chain.header(3000).block_hash();
        let get = Message::GetFilterHeaders(lightwire_wire::GetFilterHeaders(range(4, 0, stop)));
        s.receive(&encode(get), &chain).unwrap();
        let sent = drain(&mut s, &chain);
        let mut next = 0;
        let mut prev = [0u8; 32];
        for (i, m) in sent.iter().enumerate() {
            let Ok(Message::FilterHeaders(m)) = Message::decode(m) else {
                panic!("filter_headers");
            };
            assert_eq!((m.id, m.first_height), (4, next));
            assert_eq!(m.flags.last, i == 1);
            assert_eq!(&m.anchors[..32], &prev);
            let (starts, segments) = m.segment_starts();
            for (start, anchor) in starts[..segments].iter().zip(m.anchors.chunks_exact(32)) {
                let h = next + *start as u32;
                let before = h
                    .checked_sub(1)
                    .map_or([0; 32], |b| chain.filter_entry(b).unwrap().header.0);
                assert_eq!(anchor, &before);
            }
            for (j, hash) in m.hashes.chunks_exact(32).enumerate() {
                assert_eq!(hash, chain.filter_entry(next + j as u32).unwrap().hash.0);
            }
            next += m.count() as u32;
            prev = chain.filter_entry(next - 1).unwrap().header.0;
        }
        assert_eq!((sent.len(), next), (2, 3001));

        // A stop hash not on the chain: one empty answer saying so.
        let get = Message::GetFilterHeaders(lightwire_wire::GetFilterHeaders(range(
            5,
            10,
            BlockHash([9; 32]),
        )));
        s.receive(&encode(get), &chain).unwrap();
        let sent = drain(&mut s, &chain);
        let Ok(Message::FilterHeaders(m)) = Message::decode(&sent[0]) else {
            panic!()
        };
        assert_eq!(
            (m.count(), m.flags.last, m.flags.stop_unknown),
            (0, true, true)
        );
    }

    #[test]
    fn checkpoints_are_every_thousandth_filter_header() {
        let chain = TestChain::generate(3500);
        let mut s = ready(&chain);
        let get = lightwire_wire::GetFilterCheckpoints {
            id: 2,
            stop_hash: chain.header(3500).block_hash().0,
        };
        s.receive(&encode(Message::GetFilterCheckpoints(get)), &chain)
            .unwrap();
        let sent = drain(&mut s, &chain);
        let Ok(Message::FilterCheckpoints(m)) = Message::decode(&sent[0]) else {
            panic!()
        };
        let got: Vec<(u32, [u8; 32])> = m.iter().map(|(h, c)| (h, *c)).collect();
        let want: Vec<(u32, [u8; 32])> = [1000, 2000, 3000]
            .iter()
            .map(|&h| (h, chain.filter_entry(h).unwrap().header.0))
            .collect();
        assert_eq!(got, want);
        assert!(m.flags.last && !m.flags.stop_unknown);
        assert_eq!(sent.len(), 1);
    }

    #[test]
    fn filters_are_sent_whole_in_pieces_and_wait_for_a_pending_one() {
        let mut chain = TestChain::generate(1200);
        // A filter longer than a message: it goes in pieces.
        let long: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        chain.replace_filter(5, long.clone());
        chain.pending_filters.insert(700);
        let mut s = ready(&chain);
        let stop = chain.header(1000).block_hash();
        let get = Message::GetFilters(lightwire_wire::GetFilters(range(8, 1, stop)));
        s.receive(&encode(get), &chain).unwrap();
        let mut got: std::collections::BTreeMap<u32, Vec<u8>> = Default::default();
        let take = |sent: Vec<Vec<u8>>, got: &mut std::collections::BTreeMap<u32, Vec<u8>>| {
            let mut last = false;
            for m in sent {
                let Ok(Message::Filters(m)) = Message::decode(&m) else {
                    panic!()
                };
                last = m.flags.last;
                for p in m.pieces() {
                    let f = got.entry(p.height).or_default();
                    assert_eq!(p.offset as usize, f.len(), "pieces in order");
                    f.extend_from_slice(p.data);
                }
            }
            last
        };
        assert!(!take(drain(&mut s, &chain), &mut got));
        assert!(!s.has_output(), "waiting for the filter of 700");
        assert_eq!(got.keys().last(), Some(&699));
        chain.pending_filters.clear();
        s.data_arrived();
        assert!(take(drain(&mut s, &chain), &mut got));
        assert_eq!(got.len(), 1000);
        for (h, f) in &got {
            assert_eq!(f, chain.filter(*h), "filter {h}");
        }
        assert_eq!(got[&5], long);
    }

    fn take_block(sent: Vec<Vec<u8>>, got: &mut Vec<u8>) -> Option<bool> {
        take_pieces(BlockKind::Block, sent, got)
    }

    /// The pieces of a `block` (or `spent_from`) answer in `sent`, appended to `got`:
    /// `Some(true)` once the last came, `Some(false)` for not found, `None` while more
    /// are due.
    fn take_pieces(kind: BlockKind, sent: Vec<Vec<u8>>, got: &mut Vec<u8>) -> Option<bool> {
        let mut end = None;
        for m in sent {
            let p = match (kind, Message::decode(&m)) {
                (BlockKind::Block, Ok(Message::Block(p))) => p,
                (BlockKind::SpentFrom, Ok(Message::SpentFrom(p))) => p,
                _ => panic!("a piece of {kind:?}"),
            };
            assert!(end.is_none(), "nothing after the last piece");
            if p.not_found {
                end = Some(false);
                continue;
            }
            assert_eq!(p.offset as usize, got.len(), "pieces in order");
            got.extend_from_slice(p.data);
            end = p.last.then_some(true);
        }
        end
    }

    #[test]
    fn fee_rates_are_answered_when_served_and_refused_when_not() {
        let ask = |id| encode(Message::GetFeeRates(lightwire_wire::GetFeeRates { id }));
        // Not served: the feature is not offered, and asking is a violation.
        let chain = TestChain::generate(10);
        let mut s = Session::new(chain_hash());
        s.receive(&init_for(chain_hash()), &chain).unwrap();
        let sent = drain(&mut s, &chain);
        let Ok(Message::Init(init)) = Message::decode(&sent[0]) else {
            panic!("init first")
        };
        assert!(!init.combined_features().is_set(FEES_FEATURE));
        assert_eq!(s.receive(&ask(1), &chain), Err(Violation::FeesNotServed));
        // Served: offered, and each ask answered with the chain's rates, in order.
        let mut chain = TestChain::generate(10);
        chain.fee_rates = Some((FeeSource::SmartFee, [Some(30_000), None, Some(1_000)]));
        let mut s = Session::new(chain_hash());
        s.receive(&init_for(chain_hash()), &chain).unwrap();
        let sent = drain(&mut s, &chain);
        let Ok(Message::Init(init)) = Message::decode(&sent[0]) else {
            panic!("init first")
        };
        assert!(init.combined_features().is_set(FEES_FEATURE));
        s.receive(&ask(7), &chain).unwrap();
        s.receive(&ask(8), &chain).unwrap();
        let answers: Vec<_> = drain(&mut s, &chain)
            .iter()
            .filter_map(|m| match Message::decode(m) {
                Ok(Message::FeeRates(f)) => Some(f),
                _ => None,
            })
            .collect();
        let rates = [Some(30_000), None, Some(1_000)];
        let want = |id| FeeRates {
            id,
            source: FeeSource::SmartFee,
            rates,
        };
        assert_eq!(answers, [want(7), want(8)]);
    }

    #[test]
    fn a_block_is_sent_in_pieces_one_at_a_time_and_waits_while_fetched() {
        let mut chain = TestChain::generate(1200);
        let big: Vec<u8> = (0..300_000u32).map(|i| (i / 7) as u8).collect();
        chain.replace_block(900, big.clone());
        chain.pending_blocks.insert(900);
        let mut s = ready(&chain);
        let get = |id, hash: BlockHash| {
            encode(Message::GetBlock(lightwire_wire::GetBlock {
                id,
                block_hash: hash.0,
            }))
        };
        s.receive(&get(1, chain.header(900).block_hash()), &chain)
            .unwrap();
        // One block at a time.
        assert_eq!(
            s.receive(&get(2, chain.header(901).block_hash()), &chain),
            Err(Violation::BlockInFlight)
        );
        let mut got = Vec::new();
        assert_eq!(take_block(drain(&mut s, &chain), &mut got), None);
        assert!(!s.has_output(), "waiting for the block");
        chain.pending_blocks.clear();
        s.data_arrived();
        assert_eq!(take_block(drain(&mut s, &chain), &mut got), Some(true));
        assert_eq!(got, big);
        assert_eq!(s.block_bytes_sent, big.len() as u64);
        // Answered: the next may come. A small one goes in one piece.
        s.receive(&get(3, chain.header(7).block_hash()), &chain)
            .unwrap();
        got.clear();
        assert_eq!(take_block(drain(&mut s, &chain), &mut got), Some(true));
        assert_eq!(got, chain.block(7));
        // A hash not on the chain: not found.
        s.receive(&get(4, BlockHash([9; 32])), &chain).unwrap();
        assert_eq!(take_block(drain(&mut s, &chain), &mut got), Some(false));
        // A gateway that does not serve blocks.
        chain.serve_blocks = false;
        assert_eq!(
            s.receive(&get(5, chain.header(7).block_hash()), &chain),
            Err(Violation::BlocksNotServed)
        );
    }

    /// What a block spends from is sent as a block is, under its own types, by a gateway
    /// serving tweaks: in pieces, waiting while it is fetched, not found where there is
    /// none. One at a time, but beside a block; refused by a gateway without tweaks.
    #[test]
    fn what_a_block_spends_from_is_sent_as_a_block_is() {
        let mut chain = TestChain::generate(1200);
        chain.serve_tweaks(Vec::new());
        let evidence: Vec<u8> = (0..150_000u32).map(|i| (i / 3) as u8).collect();
        chain.spent_from.insert(900, evidence.clone());
        chain.pending_spent_from.insert(900);
        let mut s = ready(&chain);
        let ask = |id, hash: BlockHash| {
            encode(Message::GetSpentFrom(lightwire_wire::GetBlock {
                id,
                block_hash: hash.0,
            }))
        };
        s.receive(&ask(1, chain.header(900).block_hash()), &chain)
            .unwrap();
        assert_eq!(
            s.receive(&ask(2, chain.header(901).block_hash()), &chain),
            Err(Violation::BlockInFlight)
        );
        let mut got = Vec::new();
        assert_eq!(
            take_pieces(BlockKind::SpentFrom, drain(&mut s, &chain), &mut got),
            None
        );
        assert!(!s.has_output(), "waiting for the evidence");
        chain.pending_spent_from.clear();
        s.data_arrived();
        assert_eq!(
            take_pieces(BlockKind::SpentFrom, drain(&mut s, &chain), &mut got),
            Some(true)
        );
        assert_eq!(got, evidence);
        // A block of its own kind beside one.
        s.receive(&ask(3, chain.header(900).block_hash()), &chain)
            .unwrap();
        let get_block = encode(Message::GetBlock(lightwire_wire::GetBlock {
            id: 4,
            block_hash: chain.header(7).block_hash().0,
        }));
        s.receive(&get_block, &chain).unwrap();
        let sent = drain(&mut s, &chain);
        let (evidence_pieces, block_pieces): (Vec<_>, Vec<_>) = sent
            .into_iter()
            .partition(|m| matches!(Message::decode(m), Ok(Message::SpentFrom(_))));
        got.clear();
        assert_eq!(
            take_pieces(BlockKind::SpentFrom, evidence_pieces, &mut got),
            Some(true)
        );
        got.clear();
        assert_eq!(take_block(block_pieces, &mut got), Some(true));
        assert_eq!(got, chain.block(7));
        // None for this block, and a hash not on the chain: not found.
        for (id, hash) in [(5, chain.header(7).block_hash()), (6, BlockHash([9; 32]))] {
            s.receive(&ask(id, hash), &chain).unwrap();
            assert_eq!(
                take_pieces(BlockKind::SpentFrom, drain(&mut s, &chain), &mut got),
                Some(false)
            );
        }
        // A gateway without tweaks.
        let plain = TestChain::generate(1200);
        let mut s = ready(&plain);
        assert_eq!(
            s.receive(&ask(1, plain.header(900).block_hash()), &plain),
            Err(Violation::TweaksNotServed)
        );
    }

    #[test]
    fn a_reorg_during_a_block_ends_it_not_found() {
        let mut chain = TestChain::generate(1200);
        chain.replace_block(1100, vec![1; 200_000]);
        let mut s = ready(&chain);
        let get = lightwire_wire::GetBlock {
            id: 1,
            block_hash: chain.header(1100).block_hash().0,
        };
        s.receive(&encode(Message::GetBlock(get)), &chain).unwrap();
        let mut out = vec![0u8; lightwire_wire::MAX_MESSAGE_LEN];
        let n = s.next_message(&chain, &mut out).unwrap().unwrap();
        let mut got = Vec::new();
        assert_eq!(take_block(vec![out[..n].to_vec()], &mut got), None);
        chain.reorg(1000, 250, 1);
        assert_eq!(take_block(drain(&mut s, &chain), &mut got), Some(false));
    }

    /// A standard-looking transaction: one input, one P2WPKH output, 82 bytes.
    fn small_tx() -> Vec<u8> {
        let mut t = vec![2, 0, 0, 0, 1];
        t.extend_from_slice(&[5; 32]);
        t.extend_from_slice(&[0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 1]);
        t.extend_from_slice(&1_000u64.to_le_bytes());
        t.push(22);
        t.extend_from_slice(&[0, 0x14]);
        t.extend_from_slice(&[9; 20]);
        t.extend_from_slice(&[0; 4]);
        t
    }

    /// A transaction paying `script` from output `vout` of `[prev; 32]`.
    fn paying(prev: u8, vout: u32, script: &[u8]) -> Vec<u8> {
        let mut t = vec![2, 0, 0, 0, 1];
        t.extend_from_slice(&[prev; 32]);
        t.extend_from_slice(&vout.to_le_bytes());
        t.extend_from_slice(&[0, 0xff, 0xff, 0xff, 0xff, 1]);
        t.extend_from_slice(&1_000u64.to_le_bytes());
        t.push(script.len() as u8);
        t.extend_from_slice(script);
        t.extend_from_slice(&[0; 4]);
        t
    }

    /// A digest as the tests compare it: reset, and (txid, added?) of each entry.
    type Digest = (bool, Vec<([u8; 32], bool)>);

    /// The digests among `sent`.
    fn digests(sent: &[Vec<u8>]) -> Vec<Digest> {
        sent.iter()
            .filter_map(|m| match Message::decode(m) {
                Ok(Message::MempoolDigest(d)) => Some((
                    d.reset,
                    d.entries()
                        .map(|e| match e {
                            lightwire_wire::DigestEntry::Added { txid, .. } => (*txid, true),
                            lightwire_wire::DigestEntry::Removed { txid, .. } => (*txid, false),
                        })
                        .collect(),
                )),
                _ => None,
            })
            .collect()
    }

    /// The digest: a subscriber with `snapshot` gets what is held first, then each change
    /// as it comes, each set keyed by its salt (it matches the scripts paid, and the
    /// outpoints spent); transactions asked for are answered, or `not_found`. One too far
    /// behind gets `reset` and everything held again. A gateway without a mempool refuses
    /// the messages.
    #[test]
    fn the_mempool_digest_streams_changes_under_the_subscribers_salt() {
        use lightwire_wire::{GetMempoolTx, MEMPOOL_FEATURE, MempoolSubscribe, Removal};
        let mut chain = TestChain::generate(10);
        let mut s = ready(&chain);
        let sub = encode(Message::MempoolSubscribe(MempoolSubscribe {
            salt: [3; 16],
            snapshot: true,
            tweaks: false,
        }));
        assert_eq!(s.receive(&sub, &chain), Err(Violation::MempoolNotServed));
        chain.mempool = Some(Default::default());
        let mut s = Session::new(chain_hash());
        s.receive(&init_for(chain_hash()), &chain).unwrap();
        let sent = drain(&mut s, &chain);
        let Ok(Message::Init(init)) = Message::decode(&sent[0]) else {
            panic!("init first")
        };
        assert!(init.combined_features().is_set(MEMPOOL_FEATURE));
        let script = [
            0x00, 0x14, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8,
        ];
        let (a, b) = (paying(1, 0, &script), paying(2, 5, &[0x51]));
        let m = chain.mempool.as_mut().unwrap();
        let (ta, tb) = (m.add(&a), m.add(&b));
        // Nothing before the subscription.
        assert!(drain(&mut s, &chain).is_empty());
        s.receive(&sub, &chain).unwrap();
        let sent = drain(&mut s, &chain);
        assert_eq!(digests(&sent), [(false, vec![(ta, true), (tb, true)])]);
        let Ok(Message::MempoolDigest(d)) = Message::decode(&sent[0]) else {
            panic!()
        };
        let sets: Vec<&[u8]> = d
            .entries()
            .filter_map(|e| match e {
                lightwire_wire::DigestEntry::Added { set, .. } => Some(set),
                _ => None,
            })
            .collect();
        let spent = lightwire_filter::txset::outpoint_item(&[2; 32], 5);
        let matches = |set: &[u8], q: &[u8], salt| {
            lightwire_filter::txset::set_matches(
                &mut lightwire_filter::Matcher::default(),
                set,
                salt,
                [q],
            )
            .unwrap()
        };
        assert!(matches(sets[0], &script, &[3; 16]));
        assert!(!matches(sets[1], &script, &[3; 16]));
        assert!(matches(sets[1], &spent, &[3; 16]));
        // Changes as they come: a removal, an addition.
        let m = chain.mempool.as_mut().unwrap();
        m.remove(ta, Removal::Mined);
        let tc = m.add(&paying(3, 0, &script));
        s.mempool_changed();
        assert_eq!(
            digests(&drain(&mut s, &chain)),
            [(false, vec![(ta, false), (tc, true)])]
        );
        assert!(!s.has_output(), "nothing due until the mempool changes");
        // Asked for: held, or not.
        let ask = |id, txid| encode(Message::GetMempoolTx(GetMempoolTx { id, txid }));
        s.receive(&ask(7, tb), &chain).unwrap();
        s.receive(&ask(8, ta), &chain).unwrap();
        let answers: Vec<_> = drain(&mut s, &chain)
            .iter()
            .filter_map(|m| match Message::decode(m) {
                Ok(Message::MempoolTx(t)) => Some((t.id, t.not_found, t.tx.to_vec())),
                _ => None,
            })
            .collect();
        assert_eq!(answers, [(7, false, b.clone()), (8, true, vec![])]);
        // Behind what is kept: reset, then what is held (b and c).
        let m = chain.mempool.as_mut().unwrap();
        let td = m.add(&paying(4, 0, &script));
        m.remove(td, Removal::Evicted);
        m.kept_from = m.changes_len() + 1;
        s.mempool_changed();
        assert_eq!(
            digests(&drain(&mut s, &chain)),
            [(true, vec![(tb, true), (tc, true)])]
        );
    }

    /// A transaction the served mempool has a tweak for goes with it (kind 2) to a
    /// session that asked for tweaks, in the snapshot and in the changes after; without
    /// one it goes as before, and a session that did not ask gets no tweak.
    #[test]
    fn tweaks_go_with_the_digest_only_when_asked_for() {
        use lightwire_wire::{DigestEntry, MempoolSubscribe};
        let mut chain = TestChain::generate(10);
        chain.mempool = Some(Default::default());
        let mut tweak = [7u8; 33];
        tweak[0] = 2;
        let m = chain.mempool.as_mut().unwrap();
        let ta = m.add_tweaked(&paying(1, 0, &[0x51]), tweak);
        let tb = m.add(&paying(2, 0, &[0x51]));
        let entries = |sent: &[Vec<u8>]| -> Vec<([u8; 32], Option<[u8; 33]>)> {
            sent.iter()
                .filter_map(|m| match Message::decode(m) {
                    Ok(Message::MempoolDigest(d)) => Some(
                        d.entries()
                            .filter_map(|e| match e {
                                DigestEntry::Added { txid, tweak, .. } => {
                                    Some((*txid, tweak.copied()))
                                }
                                DigestEntry::Removed { .. } => None,
                            })
                            .collect::<Vec<_>>(),
                    ),
                    _ => None,
                })
                .flatten()
                .collect()
        };
        // What the mempool holds: each txid, and whether it has a tweak.
        let mut held = vec![(ta, true), (tb, false)];
        for tweaks in [true, false] {
            let mut s = ready(&chain);
            let sub = encode(Message::MempoolSubscribe(MempoolSubscribe {
                salt: [3; 16],
                snapshot: true,
                tweaks,
            }));
            s.receive(&sub, &chain).unwrap();
            let given = tweaks.then_some(tweak);
            let want: Vec<_> = held
                .iter()
                .map(|(t, has)| (*t, given.filter(|_| *has)))
                .collect();
            assert_eq!(
                entries(&drain(&mut s, &chain)),
                want,
                "snapshot, tweaks asked: {tweaks}"
            );
            let tc = chain
                .mempool
                .as_mut()
                .unwrap()
                .add_tweaked(&paying(3, 0, &[0x51]), tweak);
            s.mempool_changed();
            assert_eq!(entries(&drain(&mut s, &chain)), [(tc, given)], "a change");
            held.push((tc, true));
        }
    }

    #[test]
    fn transactions_are_checked_then_relayed_and_answered() {
        let chain = TestChain::generate(10);
        let mut s = ready(&chain);
        let send = |id, tx: &[u8]| encode(Message::SendTx(lightwire_wire::SendTx { id, tx }));
        let good = small_tx();
        let mut coinbase = good.clone();
        coinbase[5..37].copy_from_slice(&[0; 32]);
        coinbase[37..41].copy_from_slice(&[0xff; 4]);
        let cases: [(&[u8], RelayStatus); 4] = [
            (&good, RelayStatus::Relayed),
            (&good[..40], RelayStatus::Malformed),
            (&good[..good.len() - 1], RelayStatus::Malformed),
            (&coinbase, RelayStatus::NotStandard),
        ];
        for (i, (tx, _)) in cases.iter().enumerate() {
            s.receive(&send(i as u32, tx), &chain).unwrap();
        }
        let answers: Vec<(u32, RelayStatus)> = drain(&mut s, &chain)
            .iter()
            .filter_map(|m| match Message::decode(m) {
                Ok(Message::TxResult(r)) => Some((r.id, r.status)),
                _ => None,
            })
            .collect();
        let want: Vec<(u32, RelayStatus)> = cases
            .iter()
            .enumerate()
            .map(|(i, c)| (i as u32, c.1))
            .collect();
        assert_eq!(answers, want);
        assert_eq!(*chain.relayed.lock().unwrap(), std::slice::from_ref(&good));
        assert_eq!(
            check_tx(&good).1,
            lightwire_primitives::Tx::parse(&good).unwrap().txid().0
        );
        // Under 65 bytes without witness, and over the weight.
        // (One input, one output with an empty script: 60 bytes.)
        let mut tiny = good[..46].to_vec();
        tiny.push(1);
        tiny.extend_from_slice(&[0; 8]);
        tiny.push(0);
        tiny.extend_from_slice(&[0; 4]);
        assert_eq!(tiny.len(), 60);
        assert_eq!(check_tx(&tiny).0, RelayStatus::NotStandard);
        let mut heavy = good[..41].to_vec();
        heavy.extend_from_slice(&[0xfe, 0xa0, 0x86, 0x01, 0x00]);
        heavy.extend(std::iter::repeat_n(0x51u8, 100_000));
        heavy.extend_from_slice(&good[42..]);
        assert_eq!(check_tx(&heavy).0, RelayStatus::Oversized);
        // Bitcoin Core's CheckTransaction, whose failure gets the relaying peer dropped:
        // an output above 21 million bitcoin, two that add up above it, an input spent
        // twice, a null previous output beside another input.
        // (Version, one input of 41 bytes, the output count, then the output's value.)
        let output_at = 4 + 1 + 41 + 1;
        let with_value = |v: u64| {
            let mut t = good.clone();
            t[output_at..output_at + 8].copy_from_slice(&v.to_le_bytes());
            t
        };
        assert_eq!(check_tx(&with_value(MAX_MONEY)).0, RelayStatus::Relayed);
        assert_eq!(check_tx(&with_value(MAX_MONEY + 1)).0, RelayStatus::Invalid);
        assert_eq!(
            check_tx(&with_value(u64::MAX)).0,
            RelayStatus::Invalid,
            "negative in Core"
        );
        let two_outputs = |v: u64| {
            let mut t = good[..output_at - 1].to_vec();
            t.push(2);
            for _ in 0..2 {
                t.extend_from_slice(&v.to_le_bytes());
                t.extend_from_slice(&[1, 0x51]);
            }
            t.extend_from_slice(&[0; 4]);
            t
        };
        assert_eq!(
            check_tx(&two_outputs(MAX_MONEY / 2)).0,
            RelayStatus::Relayed
        );
        assert_eq!(
            check_tx(&two_outputs(MAX_MONEY / 2 + 1)).0,
            RelayStatus::Invalid
        );
        let two_inputs = |second: &[u8]| {
            let mut t = good[..4].to_vec();
            t.push(2);
            t.extend_from_slice(&good[5..46]);
            t.extend_from_slice(second);
            t.extend_from_slice(&good[46..]);
            t
        };
        let mut other = good[5..46].to_vec();
        other[0] ^= 1;
        assert_eq!(check_tx(&two_inputs(&other)).0, RelayStatus::Relayed);
        assert_eq!(
            check_tx(&two_inputs(&good[5..46])).0,
            RelayStatus::Invalid,
            "spent twice"
        );
        let mut null = good[5..46].to_vec();
        null[..32].fill(0);
        null[32..36].fill(0xff);
        assert_eq!(
            check_tx(&two_inputs(&null)).0,
            RelayStatus::Invalid,
            "a null prevout"
        );
        // More than 8 unanswered: a rule broken.
        for i in 0..8 {
            s.receive(&send(i, &good), &chain).unwrap();
        }
        assert_eq!(
            s.receive(&send(9, &good), &chain),
            Err(Violation::TooManyRequests)
        );
    }

    #[test]
    fn filter_requests_break_rules_typed() {
        let mut chain = TestChain::generate(3000);
        let stop = chain.header(2000).block_hash();
        let mut s = ready(&chain);
        let filters = |id, start| {
            encode(Message::GetFilters(lightwire_wire::GetFilters(range(
                id, start, stop,
            ))))
        };
        assert_eq!(
            s.receive(&filters(1, 1000), &chain),
            Err(Violation::FilterRange {
                start: 1000,
                stop: 2000,
                max: MAX_REQUEST_FILTERS
            })
        );
        assert!(matches!(
            s.receive(&filters(1, 2001), &chain),
            Err(Violation::FilterRange { .. })
        ));
        assert!(s.receive(&filters(1, 1001), &chain).is_ok());
        chain.serve_filters = false;
        let mut s = Session::new(chain_hash());
        s.receive(&init_for(chain_hash()), &chain).unwrap();
        assert_eq!(
            s.receive(&filters(1, 1500), &chain),
            Err(Violation::FiltersNotServed)
        );
    }
}
