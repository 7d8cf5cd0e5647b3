//! Several gateways and one best chain, sans-IO: which gateway is asked for headers, which
//! are dropped and marked bad, when to reconnect, and when the engine next needs to run.
//! The shell (the wasm one in the browser, the tests' natively) owns the sockets, the
//! timer and the store; it feeds bytes, closes and the clock in, and carries out the
//! [`Action`]s and commits that come out. The engine owns its seeded random numbers.
//!
//! Rules, all here so that both shells follow them:
//! - The target is the announced tip claiming the most work above ours (a hint); the
//!   request goes to the gateway that announced it. What counts is the work of the headers
//!   that arrive: `lightwire-chain` follows the valid chain with the most work.
//! - A gateway that sends an invalid header, a header that links to nothing we know, an
//!   answer nobody asked for, or that fails the handshake or `init`, is closed and marked
//!   bad for the session (no reconnect). Sync continues from the others.
//! - A gateway whose connection drops (or stops answering pings) is reconnected after an
//!   exponential backoff with jitter ([`backoff`]), reset once it is serving again.

use core::time::Duration;
use std::collections::VecDeque;

use lightwire_chain::{BlockHash, Chain, Entry, Header, Params, Work};
use lightwire_noise::SecretKey;
use lightwire_proto::initiator::Limits;
use lightwire_proto::time::earliest;
use lightwire_proto::{ConnectString, Initiator, Millis, PeerEvent};
use lightwire_store::{Durability, Pending, Tip};

mod check;
mod fetch;
mod relay;

pub use relay::BroadcastError;

use crate::dispute::{Dispute, Verdict};
use crate::filters::{FilterAnswer, FilterSync};
use crate::reason::{DropReason, TransportError};
use crate::request::{Ids, Task, is_task};
use crate::scan::{Scan, ScanChange};
use crate::sync::{Step, SyncError, Syncer};
use crate::wallet::{WalletChange, WalletSync};

/// Drop a gateway whose answer to a request makes no progress for this long (it may
/// still answer pings).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Requests given up per gateway whose answers are still let through (a gateway answers in
/// order and queues at most 8 requests; the oldest beyond this is forgotten).
pub const MAX_GIVEN_UP: usize = 16;
/// Mark a gateway bad after this many announced tips it did not deliver.
pub const MAX_UNDELIVERED: u32 = 3;
/// First reconnect delay; doubled per failed attempt up to [`BACKOFF_MAX`].
pub const BACKOFF_BASE: Duration = Duration::from_millis(500);
/// Longest reconnect delay.
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The delay before reconnect attempt `failures` (1 for the first), given a uniform
/// `random` in [0, 1): "equal jitter", half the exponential delay fixed and half random,
/// so that clients dropped together do not come back together.
pub fn backoff(failures: u32, random: f64) -> Duration {
    let exp = BACKOFF_BASE.saturating_mul(1 << failures.saturating_sub(1).min(16));
    let full = exp.min(BACKOFF_MAX);
    full / 2 + (full / 2).mul_f64(random.clamp(0.0, 1.0))
}

/// The engine's random numbers (reconnect jitter): SplitMix64, seeded by the shell. Not
/// for secrets; keys come from the platform's CSPRNG.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Where a gateway connection stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum GatewayState {
    /// The WebSocket is opening.
    Connecting,
    /// BOLT 8 handshake and `init` under way.
    Handshaking,
    /// Connected, and the chain is behind the best announced tip.
    Syncing,
    /// Connected, and nothing is missing.
    Synced,
    /// Disconnected; a reconnect is scheduled.
    BackingOff,
    /// Dropped for the session: it broke a rule (see [`Event::Rejected`]).
    Bad,
    /// Stopped by the application.
    Stopped,
}

impl GatewayState {
    /// A lowercase name, for JavaScript.
    pub fn name(&self) -> &'static str {
        match self {
            GatewayState::Connecting => "connecting",
            GatewayState::Handshaking => "handshaking",
            GatewayState::Syncing => "syncing",
            GatewayState::Synced => "synced",
            GatewayState::BackingOff => "backing-off",
            GatewayState::Bad => "bad",
            GatewayState::Stopped => "stopped",
        }
    }
}

/// What the application hears about.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Event {
    /// A gateway's connection changed state; `reason` says why it dropped, if it did.
    Gateway {
        /// Index in the gateway list.
        gateway: usize,
        /// The new state.
        state: GatewayState,
        /// Why it dropped, when it did.
        reason: Option<DropReason>,
    },
    /// The best chain switched branches.
    Reorg {
        /// The tip that was replaced.
        old_tip: Tip,
        /// The new branch's tip so far.
        new_tip: Tip,
        /// Headers of the old chain replaced (old tip height - fork height).
        depth: u32,
    },
    /// A gateway broke a rule and was marked bad; the headers it sent in the failing
    /// batch were not taken.
    Rejected {
        /// Index in the gateway list.
        gateway: usize,
        /// The rule.
        reason: DropReason,
    },
    /// A gateway's filter header at `height` is not ours: it is not asked for filters
    /// while a dispute settles which is wrong ([`Event::FilterDispute`]).
    FilterConflict {
        /// Index in the gateway list.
        gateway: usize,
        /// A height where its filter-header chain and ours differ.
        height: u32,
    },
    /// A dispute over filter headers with a gateway is over.
    FilterDispute {
        /// The gateway disputed.
        gateway: usize,
        /// How it ended.
        verdict: Verdict,
    },
    /// A block's filter matches a watched script (the scan's).
    ScanMatch {
        /// Its height.
        height: u32,
        /// Its hash.
        hash: BlockHash,
    },
    /// A matched block was disconnected by a reorganisation: the match is withdrawn.
    ScanWithdrawn {
        /// Its height.
        height: u32,
        /// Its hash.
        hash: BlockHash,
    },
    /// The scan has matched every block whose filter header is stored, up to `height`;
    /// it goes on as more are stored.
    ScanReached {
        /// The last block matched.
        height: u32,
        /// Every block matched so far, ascending.
        matches: Vec<(u32, BlockHash)>,
    },
    /// The wallet found a transaction of its own, or lost one to a reorganisation.
    Wallet(WalletChange),
    /// Every gateway a transaction was sent to answered (or gave up).
    Broadcast {
        /// The request ([`Engine::broadcast`]'s).
        id: u32,
        /// The transaction.
        txid: [u8; 32],
        /// The gateways that passed it to their nodes.
        relayed: Vec<usize>,
        /// Those that did not, and why.
        refused: Vec<(usize, lightwire_wire::RelayStatus)>,
    },
    /// A gateway sent a `warning`.
    Warning {
        /// Index in the gateway list.
        gateway: usize,
        /// Its text, if printable.
        text: Option<String>,
    },
}

/// What the shell must do for a gateway.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Action {
    /// Open a WebSocket to the gateway's URL now, then call [`Engine::opened`] (or
    /// [`Engine::closed`] if it fails).
    Connect {
        /// Index in the gateway list.
        gateway: usize,
    },
    /// Close the gateway's WebSocket (its later events are to be ignored).
    Close {
        /// Index in the gateway list.
        gateway: usize,
    },
}

/// What the engine keeps of a gateway apart from its connection.
struct Gateway {
    connect: ConnectString,
    state: GatewayState,
    /// Whether its connection has exchanged `init`.
    ready: bool,
    /// Its last announced tip while connected: height, header, claimed chainwork.
    tip: Option<(u32, Header, Work)>,
    /// An announced tip whose answer ended without it: not a target again.
    undelivered: Option<BlockHash>,
    /// Tips it announced and did not deliver, since it last served us in full.
    undelivered_count: u32,
    /// Reconnect attempts since it last served.
    failures: u32,
    /// When to reconnect (backing off).
    reconnect_at: Option<Millis>,
    /// Its answer ended short of the tip it announced (handled by [`Engine::settle`]).
    undelivered_pending: bool,
    /// Requests to this connection that were given up and whose answers have not ended:
    /// what still arrives for them is ignored. Kept per gateway, so that others cannot
    /// push an honest gateway's ids out and get it marked bad for answering.
    given_up: VecDeque<u32>,
    /// Whether its `init` offers filters.
    serves_filters: bool,
    /// Its filter headers differ from ours (a dispute settles who is wrong): not asked
    /// for filters.
    filter_conflict: bool,
    /// The height of our latest filter header it is known to agree with (and so with
    /// every one below): it is asked for filters up to there only.
    filter_agreed: Option<u32>,
    /// Its filter header at ours, asked for.
    probe: Option<check::Probe>,
    /// Its answer to the probe was empty (it lags): probed again after its next tip.
    probe_short: bool,
}

/// Counters since the engine started.
#[derive(Clone, Copy, Default, Debug)]
pub struct Counters {
    /// WebSocket messages received.
    pub messages_in: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// WebSocket messages sent.
    pub messages_out: u64,
    /// Bytes sent.
    pub bytes_out: u64,
    /// Reconnects scheduled.
    pub reconnects: u64,
}

/// The client's sync over all its gateways.
pub struct Engine {
    /// Each gateway's connection, while it has one (apart from the rest of the state, so
    /// that an event borrowed from a connection's buffer can be handled by [`Core`]).
    conns: Vec<Option<Initiator>>,
    core: Core,
}

/// Everything but the connections.
struct Core {
    params: &'static Params,
    /// The network's minimum chain work: below it nothing is reported synced.
    min_work: Work,
    syncer: Syncer,
    gateways: Vec<Gateway>,
    /// The gateway the target came from, which the next request goes to.
    source: Option<usize>,
    /// The gateway the request in flight went to, and when it was last heard on it.
    asked: Option<usize>,
    answer_heard: Millis,
    locator: Vec<BlockHash>,
    /// An answer whose parent is below the window: its gateway and the parent; its
    /// headers in `deferred`, kept until the shell reads the ancestors from the store.
    ancestors: Option<(usize, BlockHash)>,
    deferred: Vec<u8>,
    /// The rest of that answer, held until the ancestors come: (id, last, headers).
    held: VecDeque<(u32, bool, Vec<u8>)>,
    events: VecDeque<Event>,
    actions: VecDeque<Action>,
    local_static: SecretKey,
    limits: Limits,
    rng: Rng,
    counters: Counters,
    /// The time of the latest input.
    now: Millis,
    /// A commit from [`Engine::take_commit`] is in flight.
    committing: bool,
    stopped: bool,
    /// The filter-header chain.
    filters: FilterSync,
    /// Whether filter headers are synced at all.
    filters_on: bool,
    /// When the filter request in flight last brought filter headers (or was sent).
    filter_heard: Millis,
    /// The rescan, if one was started.
    scan: Option<Scan>,
    /// When the scan's request last brought filters (or was sent).
    scan_heard: Millis,
    /// The last filter header stored, as the shell last said.
    stored_filters: Option<u32>,
    /// The first height the store holds a filter header for.
    filter_base: u32,
    /// The dispute under way, and the conflicts waiting for one (gateway, height, its
    /// filter header there).
    dispute: Option<Dispute>,
    disputes: VecDeque<(usize, u32, [u8; 32])>,
    check_ids: Ids,
    /// When a cross-check request was last sent or answered.
    check_heard: Millis,
    /// Gateways found bad while handling another's message: dropped by the engine next.
    drops: VecDeque<(usize, DropReason)>,
    /// The watch-only wallet, once something is watched.
    wallet: Option<WalletSync>,
    /// Whether the scan under way is the wallet's (an app's own scan replaces it).
    wallet_scanning: bool,
    /// The wallet's scan was dropped (nothing left to watch): its saved state goes.
    scan_dropped: bool,
    /// Broadcasts waiting for their gateways' answers.
    broadcasts: Vec<relay::Pending>,
    relay_ids: Ids,
    /// When the wallet's block request last brought a piece (or was sent).
    wallet_heard: Millis,
}

impl Engine {
    /// An engine resumed on `chain` (rebuilt from the store whose tip is `stored`), for the
    /// gateways `gateways`, as `local_static`, at `now`, with randomness from `seed`. Every
    /// gateway gets an [`Action::Connect`].
    pub fn new(
        chain: Chain,
        stored: &Tip,
        gateways: Vec<ConnectString>,
        local_static: SecretKey,
        seed: u64,
        now: Millis,
    ) -> Engine {
        let params = chain.params();
        let n = gateways.len();
        let mut actions = VecDeque::with_capacity(2 * n + 4);
        actions.extend((0..n).map(|gateway| Action::Connect { gateway }));
        let gateways = gateways
            .into_iter()
            .map(|connect| Gateway {
                connect,
                state: GatewayState::Connecting,
                ready: false,
                tip: None,
                undelivered: None,
                undelivered_count: 0,
                failures: 0,
                reconnect_at: None,
                undelivered_pending: false,
                given_up: VecDeque::with_capacity(MAX_GIVEN_UP),
                serves_filters: false,
                filter_conflict: false,
                filter_agreed: None,
                probe: None,
                probe_short: false,
            })
            .collect();
        Engine {
            conns: (0..n).map(|_| None).collect(),
            core: Core {
                params,
                min_work: params.min_chain_work(),
                syncer: Syncer::new(chain, stored),
                gateways,
                source: None,
                asked: None,
                answer_heard: now,
                locator: Vec::with_capacity(lightwire_wire::sync::MAX_LOCATOR),
                ancestors: None,
                deferred: Vec::new(),
                held: VecDeque::new(),
                events: VecDeque::with_capacity(16),
                actions,
                local_static,
                limits: Limits::default(),
                rng: Rng::new(seed),
                counters: Counters::default(),
                now,
                committing: false,
                stopped: false,
                filters: FilterSync::new(None, 0),
                filters_on: true,
                filter_heard: now,
                scan: None,
                scan_heard: now,
                stored_filters: None,
                filter_base: 0,
                dispute: None,
                disputes: VecDeque::new(),
                check_ids: Ids::new(Task::Check),
                check_heard: now,
                drops: VecDeque::new(),
                wallet: None,
                wallet_scanning: false,
                scan_dropped: false,
                broadcasts: Vec::new(),
                relay_ids: Ids::new(Task::Relay),
                wallet_heard: now,
            },
        }
    }

    /// Resume the filter-header chain from the store's last filter header (height and
    /// header), or from its base when it holds none. The stored tip is the first place a
    /// request can stop at.
    pub fn resume_filters(&mut self, tip: Option<(u32, [u8; 32])>, base: u32) {
        let c = &mut self.core;
        c.filters = FilterSync::new(tip, base);
        c.filter_base = base;
        let t = c.syncer.tip();
        c.filters.mark(t.height, t.hash);
        // Filter headers are stored with the headers: usually they end together, and the
        // other gateways can be probed at once.
        c.filters.reach(t.height, t.hash);
    }

    /// Start a rescan of `scripts` from block `from` (replacing any scan under way).
    pub fn start_scan(&mut self, scripts: Vec<Vec<u8>>, from: u32) {
        self.core.start_scan(scripts, from);
    }

    /// The rescan, if one was started.
    pub fn scan(&self) -> Option<&Scan> {
        self.core.scan.as_ref()
    }

    /// Scan `scripts` from `from`: the scan under way goes on if it is that one (returns
    /// true), else a new one starts.
    pub fn scan_or_continue(&mut self, scripts: Vec<Vec<u8>>, from: u32) -> bool {
        let base = self.core.syncer.base_height();
        let from_clamped = if base > 0 { from.max(base + 1) } else { from };
        if self
            .core
            .scan
            .as_ref()
            .is_some_and(|s| s.is_for(&scripts, from_clamped))
        {
            return true;
        }
        self.start_scan(scripts, from);
        false
    }

    /// Whether the scan has matched everything stored.
    pub fn scan_at_tip(&self) -> bool {
        self.core
            .scan
            .as_ref()
            .is_some_and(|s| s.at_tip(self.core.stored_filters))
    }

    /// Go on with a scan restored from the store.
    pub fn resume_scan(&mut self, scan: Scan) {
        self.core.scan = Some(scan);
        self.core.scan_heard = self.core.now;
    }

    /// The scan's state to save, when it moved enough since it was last saved.
    pub fn scan_to_save(&mut self) -> Option<Vec<u8>> {
        self.core.scan.as_mut()?.save()
    }

    /// The store's last filter header is now at `height` (after opening, and after each
    /// commit).
    pub fn stored_filters(&mut self, height: Option<u32>) {
        self.core.stored_filters = height;
        self.settle();
    }

    /// The heights whose block hashes and filter headers the scan needs read from the
    /// store next (then [`Self::on_scan_data`]).
    pub fn need_scan_data(&mut self) -> Option<(u32, u32)> {
        let c = &mut self.core;
        if c.stopped {
            return None;
        }
        let stored = c.stored_filters;
        c.scan.as_mut()?.need_data(stored)
    }

    /// What [`Self::need_scan_data`] asked for: the block hashes of `start..=end` and the
    /// filter headers of `start - 1..=end`.
    pub fn on_scan_data(&mut self, start: u32, hashes: &[BlockHash], headers: &[[u8; 32]]) {
        if let Some(scan) = self.core.scan.as_mut() {
            scan.on_data(start, hashes, headers);
        }
    }

    /// The heights whose block hashes and stored filter headers a dispute needs read from
    /// the store next (then [`Self::on_dispute_data`]).
    pub fn need_dispute_data(&mut self) -> Option<(u32, u32)> {
        let c = &mut self.core;
        if c.stopped {
            return None;
        }
        let stored = c.stored_filters;
        c.dispute.as_mut()?.need_read(stored)
    }

    /// What [`Self::need_dispute_data`] asked for: the block hashes and stored filter
    /// headers of `from..=to`.
    pub fn on_dispute_data(&mut self, from: u32, hashes: &[BlockHash], headers: &[[u8; 32]]) {
        self.core.on_dispute_read(from, hashes, headers);
        self.settle();
    }

    /// Whether to sync filter headers (on by default).
    pub fn set_filters(&mut self, on: bool) {
        self.core.filters_on = on;
    }

    /// The filter-header sync state.
    pub fn filters(&self) -> &FilterSync {
        &self.core.filters
    }

    /// The sync state (tip, target, tuning).
    pub fn syncer(&self) -> &Syncer {
        &self.core.syncer
    }

    /// The sync state, to tune (request size, commit size) and seed.
    pub fn syncer_mut(&mut self) -> &mut Syncer {
        &mut self.core.syncer
    }

    /// Counters since the start.
    pub fn counters(&self) -> Counters {
        self.core.counters
    }

    /// Gateway `g`'s WebSocket URL.
    pub fn url(&self, g: usize) -> &str {
        &self.core.gateways[g].connect.url
    }

    /// Gateway `g`'s state.
    pub fn state(&self, g: usize) -> GatewayState {
        self.core.gateways[g].state
    }

    /// Whether nothing is missing: some gateway has been heard, and no announced tip is
    /// missing, nothing is in flight, nothing waits to be committed or is being committed,
    /// and the chain has at least the network's minimum work (Bitcoin Core's
    /// `nMinimumChainWork`: gateways that all lie cannot make a light chain look synced).
    pub fn is_synced(&self) -> bool {
        let c = &self.core;
        c.syncer.tip().chainwork >= c.min_work
            && c.syncer.is_synced()
            && c.syncer.uncommitted() == 0
            && !c.committing
            && c.gateways.iter().any(|g| g.tip.is_some())
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.core.events.pop_front()
    }

    /// The next thing for the shell to do.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.core.actions.pop_front()
    }

    /// The shell is opening gateway `g`'s WebSocket (after an [`Action::Connect`]).
    pub fn connecting(&mut self, g: usize, now: Millis) {
        self.core.now = now;
        self.core.gateways[g].reconnect_at = None;
        self.core.set_state(g, GatewayState::Connecting, None);
    }

    /// Gateway `g`'s WebSocket opened at `now`; the handshake starts with `ephemeral`
    /// (fresh randomness, one per connection). Its act one is ready in
    /// [`Self::poll_transmit`].
    pub fn opened(&mut self, g: usize, ephemeral: SecretKey, now: Millis) {
        let c = &mut self.core;
        c.now = now;
        if c.stopped || c.gateways[g].state == GatewayState::Bad {
            return;
        }
        let gw = &mut c.gateways[g];
        self.conns[g] = Some(Initiator::new(
            now,
            c.params,
            c.local_static.clone(),
            gw.connect.node_id,
            ephemeral,
            c.limits,
        ));
        gw.tip = None;
        gw.ready = false;
        gw.given_up.clear();
        c.set_state(g, GatewayState::Handshaking, None);
    }

    /// Bytes to send to gateway `g` now (one WebSocket message); call [`Self::sent`].
    pub fn poll_transmit(&mut self, g: usize) -> Option<&[u8]> {
        self.conns[g].as_mut()?.poll_transmit()
    }

    /// The bytes from [`Self::poll_transmit`] went out.
    pub fn sent(&mut self, g: usize) {
        if let Some(conn) = self.conns[g].as_mut() {
            let n = conn.sent();
            if n > 0 {
                self.core.counters.messages_out += 1;
                self.core.counters.bytes_out += n as u64;
            }
        }
    }

    /// Gateway `g`'s WebSocket closed (or failed to open) by itself.
    pub fn closed(&mut self, g: usize, why: TransportError, now: Millis) {
        self.core.now = now;
        match self.core.gateways[g].state {
            GatewayState::Bad | GatewayState::Stopped | GatewayState::BackingOff => {}
            _ => self.drop_gateway(g, DropReason::Transport(why)),
        }
    }

    /// A WebSocket message from gateway `g`, at `now` (Unix time: validation checks header
    /// times against it).
    pub fn receive(&mut self, g: usize, mut data: &[u8], now: Millis) {
        self.core.now = now;
        self.core.counters.messages_in += 1;
        self.core.counters.bytes_in += data.len() as u64;
        let mut failure = None;
        while !data.is_empty() {
            let Some(conn) = self.conns[g].as_mut() else {
                return;
            };
            match conn.handle_input(now, data) {
                Ok((taken, event)) => {
                    data = &data[taken..];
                    if let Some(event) = event
                        && let Err(why) = self.core.on_event(g, event)
                    {
                        failure = Some(why);
                        break;
                    }
                }
                Err(e) => {
                    failure = Some(DropReason::Connection(e));
                    break;
                }
            }
        }
        if let Some(why) = failure {
            self.drop_gateway(g, why);
        }
        if let Some(conn) = &self.conns[g] {
            self.core.gateways[g].serves_filters = conn.serves_filters();
        }
        self.settle();
    }

    /// Drop gateway `g` (and with it, whatever it was asked), and settle what follows.
    fn drop_gateway(&mut self, g: usize, why: DropReason) {
        let had_socket = self.conns[g].take().is_some()
            || self.core.gateways[g].state == GatewayState::Connecting;
        self.core.drop_gateway(g, why, had_socket);
    }

    /// After any input: gateways that did not deliver what they announced are handled,
    /// and the states are brought up to date.
    fn settle(&mut self) {
        while let Some((g, why)) = self.core.drops.pop_front() {
            if self.core.gateways[g].ready {
                self.drop_gateway(g, why);
            }
        }
        while let Some(g) = self.core.take_undelivered() {
            if let Some(why) = self.core.undeliver(g) {
                self.drop_gateway(g, why);
            }
        }
        self.core.update_states();
        self.core.check_scan_reached();
    }

    /// When [`Self::handle_timeout`] must next run: a connection's handshake or
    /// keepalive deadline, the request's, or a reconnect.
    pub fn poll_timeout(&self) -> Option<Millis> {
        let c = &self.core;
        if c.stopped {
            return None;
        }
        let mut next = None;
        for (conn, gw) in self.conns.iter().zip(&c.gateways) {
            next = earliest(next, conn.as_ref().and_then(Initiator::poll_timeout));
            next = earliest(next, gw.reconnect_at);
        }
        let next = earliest(next, c.request_deadline());
        let next = earliest(next, c.scan_deadline());
        let next = earliest(next, c.check_deadline());
        let next = earliest(next, c.wallet_deadline());
        let next = earliest(next, c.broadcast_deadline());
        earliest(next, c.filter_deadline())
    }

    /// Deadlines at `now`: requests without progress, handshakes and keepalives that ran
    /// out, pings due, reconnects due.
    pub fn handle_timeout(&mut self, now: Millis) {
        self.core.now = now;
        if self.core.stopped {
            return;
        }
        if let Some(due) = self.core.request_deadline()
            && due <= now
            && let Some(g) = self.core.asked
        {
            // No validated progress in time: reconnected later, and counted as a tip not
            // delivered; the third time it is marked bad.
            let gw = &mut self.core.gateways[g];
            gw.undelivered_count += 1;
            let why = if gw.undelivered_count >= MAX_UNDELIVERED {
                DropReason::Undelivered(MAX_UNDELIVERED)
            } else {
                DropReason::RequestTimeout
            };
            self.drop_gateway(g, why);
        }
        if let Some(due) = self.core.filter_deadline()
            && due <= now
            && let Some(g) = self.core.filters.asked()
        {
            self.drop_gateway(g, DropReason::RequestTimeout);
        }
        if let Some(due) = self.core.scan_deadline()
            && due <= now
            && let Some((g, _)) = self.core.scan.as_ref().and_then(Scan::asked)
        {
            self.drop_gateway(g, DropReason::RequestTimeout);
        }
        self.core.finish_broadcasts();
        if let Some(due) = self.core.wallet_deadline()
            && due <= now
            && let Some((g, _)) = self.core.wallet.as_ref().and_then(WalletSync::asked)
        {
            self.drop_gateway(g, DropReason::RequestTimeout);
        }
        if let Some(due) = self.core.check_deadline()
            && due <= now
        {
            for g in self.core.check_waiting_on() {
                self.drop_gateway(g, DropReason::RequestTimeout);
            }
        }
        for g in 0..self.conns.len() {
            if let Some(conn) = self.conns[g].as_mut()
                && let Err(e) = conn.handle_timeout(now)
            {
                self.drop_gateway(g, DropReason::Connection(e));
            }
            let gw = &mut self.core.gateways[g];
            if gw.state == GatewayState::BackingOff && gw.reconnect_at.is_some_and(|t| t <= now) {
                gw.reconnect_at = None;
                self.core.actions.push_back(Action::Connect { gateway: g });
            }
        }
        self.settle();
    }

    /// A commit to start, if one is due: moved into `into`, validation goes on meanwhile.
    pub fn take_commit(&mut self, into: &mut Pending) -> Option<Durability> {
        let c = &mut self.core;
        let taken = if c.ancestors.is_some() {
            // Everything validated must be stored before ancestors are read from it.
            c.syncer.take_all(into)
        } else {
            c.syncer.take_commit(into)
        };
        c.committing |= taken.is_some();
        taken
    }

    /// The commit from [`Self::take_commit`] completed.
    pub fn committed(&mut self, now: Millis) {
        self.core.now = now;
        self.core.committing = false;
        self.settle();
    }

    /// An answer's batch starts below the validation window: once nothing is uncommitted,
    /// the shell looks up this parent hash and the batch's headers (80 bytes each) in the
    /// store, and calls [`Self::on_ancestors`].
    pub fn need_ancestors(&self) -> Option<(BlockHash, &[u8])> {
        let c = &self.core;
        if c.syncer.uncommitted() > 0 || c.committing {
            return None;
        }
        c.ancestors.map(|(_, hash)| (hash, &c.deferred[..]))
    }

    /// What [`Self::need_ancestors`] asked for: `known`, how many of the batch's first
    /// headers the store holds on the best chain right after the parent, and stored
    /// entries ending at the last of those (or at the parent; up to `WINDOW_LEN`, at least
    /// 2016). `None` if the store does not hold the parent (the gateway's headers link to
    /// nothing we know: it is marked bad).
    pub fn on_ancestors(&mut self, found: Option<(&[Entry], usize)>, now: Millis) {
        self.core.now = now;
        if let Err((g, why)) = self.core.on_ancestors(found) {
            self.drop_gateway(g, why);
        }
        self.settle();
    }

    /// Send the next requests if any are due (call after every input): headers, then
    /// filter headers.
    pub fn schedule(&mut self) {
        self.schedule_headers();
        self.schedule_filters();
        self.schedule_checks();
        self.schedule_scan();
        self.schedule_wallet();
    }

    /// Ask for the scan's next window of filters, from a gateway that serves them (another
    /// than the headers' when there is one).
    fn schedule_scan(&mut self) {
        let c = &mut self.core;
        if c.stopped || c.scan.as_ref().is_none_or(|s| s.asked().is_some()) {
            return;
        }
        // Only a gateway known to agree with our filter headers: a filter that does not
        // match ours is then its own fault (and it is marked bad for it).
        let usable = |g: usize| {
            let gw = &c.gateways[g];
            gw.ready && gw.serves_filters && !gw.filter_conflict && gw.filter_agreed.is_some()
        };
        // Requests in flight all go to one gateway: its answers come in order.
        let asked = c.scan.as_ref().and_then(Scan::asked).map(|(g, _)| g);
        let Some(g) = asked.or_else(|| {
            (0..c.gateways.len())
                .find(|&g| usable(g) && Some(g) != c.source)
                .or(c.source.filter(|&g| usable(g)))
        }) else {
            return;
        };
        let Some(conn) = self.conns[g].as_mut().filter(|p| p.is_ready()) else {
            return;
        };
        if asked.is_none() {
            c.scan_heard = c.now;
        }
        let limit = c.gateways[g].filter_agreed.unwrap_or(0);
        while let Some((id, start, stop)) = c.scan.as_mut().and_then(|s| s.next_request(g, limit)) {
            if let Err(e) = conn.request_filters(id, start, stop) {
                if let Some(s) = c.scan.as_mut() {
                    s.abandon().for_each(drop);
                }
                self.drop_gateway(g, DropReason::Connection(e));
                self.settle();
                return;
            }
        }
    }

    fn schedule_headers(&mut self) {
        let c = &mut self.core;
        if c.ancestors.is_some() || c.stopped {
            return;
        }
        let Some(g) = c.source else {
            return;
        };
        let Some(conn) = self.conns[g].as_mut().filter(|p| p.is_ready()) else {
            return;
        };
        if c.committing && c.syncer.uncommitted() >= c.syncer.commit_every {
            // A whole commit waits behind the one in flight: ask for more once it is
            // done, so that what is gathered stays bounded however slow the store is.
            return;
        }
        if let Some((id, n)) = c.syncer.next_request(&mut c.locator) {
            c.asked = Some(g);
            c.answer_heard = c.now;
            if let Err(e) = conn.request(id, n, &c.locator) {
                // Cannot happen on a ready connection; treat it as a broken one.
                self.drop_gateway(g, DropReason::Connection(e));
                self.settle();
            }
        }
    }

    /// Ask for the next filter headers, up to the last validated header, from the gateway
    /// headers come from when it serves filters, else from another that does.
    fn schedule_filters(&mut self) {
        let c = &mut self.core;
        if !c.filters_on || c.stopped || c.filters.asked().is_some() {
            return;
        }
        let usable = |g: usize| {
            let gw = &c.gateways[g];
            gw.ready && gw.serves_filters && !gw.filter_conflict
        };
        // Another gateway than the one headers come from, when there is one: two
        // connections carry the two streams side by side.
        let Some(g) = (0..c.gateways.len())
            .find(|&g| usable(g) && Some(g) != c.source)
            .or(c.source.filter(|&g| usable(g)))
        else {
            return;
        };
        let Some(conn) = self.conns[g].as_mut().filter(|p| p.is_ready()) else {
            return;
        };
        let Some((id, start, stop)) = c.filters.next_request(g) else {
            return;
        };
        c.filter_heard = c.now;
        if let Err(e) = conn.request_filter_headers(id, start, stop) {
            c.filters.abandon();
            self.drop_gateway(g, DropReason::Connection(e));
            self.settle();
        }
    }

    /// The application stops: every connection is closed, nothing reconnects.
    pub fn stop(&mut self, now: Millis) {
        let c = &mut self.core;
        c.now = now;
        c.stopped = true;
        for g in 0..c.gateways.len() {
            if self.conns[g].take().is_some() || c.gateways[g].state == GatewayState::Connecting {
                c.actions.push_back(Action::Close { gateway: g });
            }
            c.gateways[g].reconnect_at = None;
            c.set_state(g, GatewayState::Stopped, None);
        }
        c.actions.retain(|a| matches!(a, Action::Close { .. }));
    }

    /// Whether [`Self::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.core.stopped
    }
}

impl Core {
    /// Start a rescan of `scripts` from block `from` (see [`Engine::start_scan`]).
    fn start_scan(&mut self, scripts: Vec<Vec<u8>>, from: u32) {
        if let Some(old) = self.scan.as_mut() {
            let given_up: Vec<(usize, u32)> = old.abandon().collect();
            for (g, id) in given_up {
                self.remember_given_up(g, id);
            }
        }
        // A store started from a checkpoint holds no filter header below it: its first
        // block's filter cannot be checked, so a scan starts after it.
        let base = self.syncer.base_height();
        let from = if base > 0 { from.max(base + 1) } else { from };
        self.scan = Some(Scan::new(scripts, from));
        self.scan_heard = self.now;
        self.wallet_scan_replaced();
    }

    fn set_state(&mut self, g: usize, state: GatewayState, reason: Option<DropReason>) {
        let gw = &mut self.gateways[g];
        if gw.state == state && reason.is_none() {
            return;
        }
        gw.state = state;
        self.events.push_back(Event::Gateway {
            gateway: g,
            state,
            reason,
        });
    }

    fn request_deadline(&self) -> Option<Millis> {
        (self.asked.is_some() && self.syncer.in_flight() && self.ancestors.is_none())
            .then(|| self.answer_heard + REQUEST_TIMEOUT)
    }

    /// When the filter request in flight times out without bringing filter headers.
    fn filter_deadline(&self) -> Option<Millis> {
        self.filters
            .asked()
            .map(|_| self.filter_heard + REQUEST_TIMEOUT)
    }

    /// When the scan's request times out without bringing filters.
    fn scan_deadline(&self) -> Option<Millis> {
        self.scan
            .as_ref()?
            .asked()
            .map(|_| self.scan_heard + REQUEST_TIMEOUT)
    }

    /// One event from gateway `g`'s connection; an error drops the gateway.
    fn on_event(&mut self, g: usize, event: PeerEvent<'_>) -> Result<(), DropReason> {
        match event {
            PeerEvent::Ready => {
                self.gateways[g].ready = true;
                self.set_state(g, GatewayState::Syncing, None);
            }
            PeerEvent::Tip {
                height,
                header,
                chainwork,
            } => self.on_tip(g, height, header, chainwork),
            PeerEvent::Headers {
                id,
                headers,
                hashes,
                last,
                ..
            } => return self.on_headers(g, id, headers, hashes, last),
            PeerEvent::Warning(text) => self.events.push_back(Event::Warning {
                gateway: g,
                text: text.map(str::to_string),
            }),
            PeerEvent::Pong => {}
            PeerEvent::FilterHeaders {
                id,
                first_height,
                flags,
                before,
                headers,
                ..
            } => {
                let answer = FilterAnswer {
                    id,
                    first_height,
                    flags,
                    before,
                    headers,
                };
                if is_task(id, Task::Check) {
                    return self.on_check_headers(g, answer);
                }
                return self.on_filter_headers(g, answer);
            }
            PeerEvent::FilterCheckpoints(m) => return self.on_checkpoints(g, &m),
            PeerEvent::Filters(m) if is_task(m.id, Task::Check) => {
                return self.on_check_filters(g, &m);
            }
            PeerEvent::Filters(m) => return self.on_filters(g, &m),
            PeerEvent::Block(p) if is_task(p.id, Task::Wallet) => {
                return self.on_wallet_block(g, &p);
            }
            PeerEvent::Block(p) => return self.on_block(g, &p),
            PeerEvent::TxResult(r) => return self.on_tx_result(g, &r),
        }
        Ok(())
    }

    fn on_filter_headers(&mut self, g: usize, answer: FilterAnswer<'_>) -> Result<(), DropReason> {
        let (id, flags, before) = (answer.id, answer.flags, answer.before);
        let end = answer.first_height + answer.headers.len() as u32;
        if !self.filters.is_in_flight(g, id) {
            return self.given_up_answer(g, id, flags.last);
        }
        let syncer = &mut self.syncer;
        let step = self
            .filters
            .on_filter_headers(g, answer, |h, x| syncer.push_filters(h, x))
            .map_err(DropReason::Filters)?;
        if step.taken > 0 {
            self.filter_heard = self.now;
            // Its chain follows on from ours: it agrees with all we hold.
            self.gateways[g].filter_agreed = Some(end - 1);
        }
        if let Some(height) = step.conflict {
            if !flags.last {
                self.remember_given_up(g, id);
            }
            // Its header before `height` (the answer's anchor) is not ours.
            self.conflict(g, height.saturating_sub(1), before);
        }
        Ok(())
    }

    fn on_filters(&mut self, g: usize, m: &lightwire_wire::Filters<'_>) -> Result<(), DropReason> {
        let Some(scan) = self.scan.as_mut().filter(|s| s.is_in_flight(g, m.id)) else {
            return self.given_up_answer(g, m.id, m.flags.last);
        };
        let events = &mut self.events;
        let before = scan.filters;
        let heard = events.len();
        let result = scan.on_filters(m, |c| events.push_back(scan_event(c)));
        if scan.filters > before {
            self.scan_heard = self.now;
        }
        let matched: Vec<(u32, BlockHash)> = self
            .events
            .range(heard..)
            .filter_map(|e| match e {
                Event::ScanMatch { height, hash } => Some((*height, *hash)),
                _ => None,
            })
            .collect();
        for (height, hash) in matched {
            self.wallet_matched(height, hash);
        }
        match result {
            Ok(()) => Ok(()),
            Err(e) => {
                // The gateway is dropped: what it still sends is not read.
                if let Some(s) = self.scan.as_mut() {
                    s.abandon().for_each(drop);
                }
                Err(DropReason::Scan(e))
            }
        }
    }

    /// Report a scan that has matched everything stored.
    fn check_scan_reached(&mut self) {
        let stored = self.stored_filters;
        if let Some(scan) = self.scan.as_mut()
            && scan.reached(stored)
        {
            self.events.push_back(Event::ScanReached {
                height: scan.next().saturating_sub(1),
                matches: scan.matches().to_vec(),
            });
        }
    }

    /// A message answering request `id`, which is not in flight to gateway `g`: the rest of
    /// an answer this gateway was asked and then given up (a better tip elsewhere, a reorg)
    /// is ignored, until its `last`; anything else was never asked for.
    fn given_up_answer(&mut self, g: usize, id: u32, last: bool) -> Result<(), DropReason> {
        let given_up = &mut self.gateways[g].given_up;
        let Some(i) = given_up.iter().position(|x| *x == id) else {
            return Err(DropReason::Sync(SyncError::UnexpectedAnswer { id }));
        };
        if last {
            given_up.remove(i);
        }
        Ok(())
    }

    fn remember_given_up(&mut self, g: usize, id: u32) {
        let gw = &mut self.gateways[g];
        if gw.given_up.len() == MAX_GIVEN_UP {
            gw.given_up.pop_front();
        }
        gw.given_up.push_back(id);
    }

    fn on_tip(&mut self, g: usize, height: u32, header: Header, chainwork: Work) {
        // A tip (again) may mean the gateway's filter headers caught up, or its chain moved.
        self.filters.unblock();
        self.gateways[g].probe_short = false;
        if let Some(scan) = self.scan.as_mut() {
            scan.unblock();
        }
        let gw = &mut self.gateways[g];
        gw.tip = Some((height, header, chainwork));
        if gw.undelivered == Some(header.block_hash()) {
            // Announced again, still not delivered: not a target again.
            return;
        }
        if self.syncer.on_tip(height, &header, chainwork) {
            if self.asked.is_some_and(|a| a != g) {
                // A better tip elsewhere: the request in flight to another gateway is
                // given up, with any answer held for ancestors.
                self.give_up();
                self.asked = None;
                self.ancestors = None;
                self.held.clear();
            }
            self.source = Some(g);
        }
    }

    fn on_headers(
        &mut self,
        g: usize,
        id: u32,
        headers: &[u8],
        hashes: &[BlockHash],
        last: bool,
    ) -> Result<(), DropReason> {
        if self.asked != Some(g) || self.syncer.in_flight_id() != Some(id) {
            return self.given_up_answer(g, id, last);
        }
        if self.ancestors.is_some() || !self.held.is_empty() {
            // Waiting for ancestors from the store: the rest of the answer is held, at most
            // one request's worth (a deep fork only); more is more than was asked for.
            let held: usize = self.held.iter().map(|(_, _, h)| h.len()).sum();
            let held = held + self.deferred.len() + headers.len();
            let asked = self.syncer.request_size;
            if held > asked as usize * lightwire_chain::HEADER_LEN {
                return Err(DropReason::Sync(SyncError::TooManyHeaders { asked }));
            }
            self.held.push_back((id, last, headers.to_vec()));
            return Ok(());
        }
        let step =
            self.syncer
                .on_headers_hashed(id, headers, Some(hashes), last, self.now.as_secs());
        self.take_step(step, g, headers)
    }

    /// What follows a validated step: a reorg event, ancestors to read (the batch
    /// `headers` kept until they come), or the gateway dropped as bad.
    fn take_step(
        &mut self,
        step: Result<Step, SyncError>,
        g: usize,
        headers: &[u8],
    ) -> Result<(), DropReason> {
        let step = step.map_err(DropReason::Sync)?;
        if step.progress {
            // Validated progress is what keeps a request alive (not messages), and clears
            // the count of tips announced and not delivered: those were honest reorgs (an
            // answer ends before the new tip is announced), not lies.
            self.answer_heard = self.now;
            self.gateways[g].undelivered_count = 0;
        } else if step.empty_answer && !step.target_dropped {
            // An answer that brought nothing, while a newer tip was announced: one strike,
            // as an undelivered tip (a gateway announcing a "higher" tip before each empty
            // answer would otherwise stay the target for ever).
            let gw = &mut self.gateways[g];
            gw.undelivered_count += 1;
            if gw.undelivered_count >= MAX_UNDELIVERED {
                return Err(DropReason::Undelivered(MAX_UNDELIVERED));
            }
        }
        if let Some((_, fork)) = step.reorg
            && let Some((a, id)) = self.filters.reorg(fork)
        {
            self.remember_given_up(a, id);
        }
        if let Some((_, fork)) = step.reorg {
            // What the store holds above the fork is of the old branch: it is rolled back
            // with the next commit, and not read for a scan meanwhile.
            self.stored_filters = self.stored_filters.map(|s| s.min(fork));
            for gw in &mut self.gateways {
                gw.filter_agreed = gw.filter_agreed.map(|a| a.min(fork));
            }
            self.wallet_reorg(fork);
            if self.dispute.as_ref().is_some_and(|d| d.height() > fork) {
                // Settled on blocks no longer ours: probed again on the new branch.
                let height = fork;
                self.finish_dispute(Verdict::Undecided { height });
            }
        }
        if let Some((_, fork)) = step.reorg
            && let Some(scan) = self.scan.as_mut()
        {
            let events = &mut self.events;
            let given_up: Vec<(usize, u32)> = scan
                .reorg(fork, |c| events.push_back(scan_event(c)))
                .collect();
            for (a, id) in given_up {
                self.remember_given_up(a, id);
            }
        }
        if step.progress || step.reorg.is_some() {
            let tip = self.syncer.tip();
            self.filters.mark(tip.height, tip.hash);
        }
        if let Some((old, fork)) = step.reorg {
            self.events.push_back(Event::Reorg {
                old_tip: Tip::from(&old),
                new_tip: Tip::from(self.syncer.tip()),
                depth: old.height - fork,
            });
        }
        if let Some(parent) = step.need_ancestors {
            self.deferred.clear();
            self.deferred.extend_from_slice(headers);
            self.ancestors = Some((g, parent));
        }
        if step.target_dropped {
            self.gateways[g].undelivered_pending = true;
        }
        Ok(())
    }

    /// The ancestors came: the deferred batch, then what was held, until it runs out or
    /// needs ancestors again. An error names the gateway to drop.
    fn on_ancestors(
        &mut self,
        found: Option<(&[Entry], usize)>,
    ) -> Result<(), (usize, DropReason)> {
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
        let now = self.now.as_secs();
        let skip = (known * lightwire_chain::HEADER_LEN).min(self.deferred.len());
        let step = self
            .syncer
            .on_ancestors(entries, &self.deferred[skip..], now);
        self.take_step(step, g, &[]).map_err(|e| (g, e))?;
        while self.ancestors.is_none() {
            let Some((id, last, headers)) = self.held.pop_front() else {
                break;
            };
            let step = self.syncer.on_headers(id, &headers, last, now);
            self.take_step(step, g, &headers).map_err(|e| (g, e))?;
        }
        Ok(())
    }

    /// A gateway whose answer ended short of its announced tip, if any (see
    /// [`Self::undeliver`]).
    fn take_undelivered(&mut self) -> Option<usize> {
        let g = self.gateways.iter().position(|gw| gw.undelivered_pending)?;
        self.gateways[g].undelivered_pending = false;
        Some(g)
    }

    /// Set Syncing/Synced on the connected gateways; a gateway serving again has its
    /// backoff reset.
    fn update_states(&mut self) {
        for g in 0..self.gateways.len() {
            let gw = &self.gateways[g];
            if !matches!(gw.state, GatewayState::Syncing | GatewayState::Synced) {
                continue;
            }
            let tip = self.syncer.tip();
            let ours = gw
                .tip
                .is_some_and(|(_, h, w)| w <= tip.chainwork || h.block_hash() == tip.hash);
            // Synced: its announced tip is ours (or behind it) and stored. A gateway whose
            // claimed tip never came stays "syncing", and its count of undelivered tips
            // is kept.
            let state = if ours
                && self.syncer.uncommitted() == 0
                && !self.committing
                && tip.chainwork >= self.min_work
            {
                GatewayState::Synced
            } else {
                GatewayState::Syncing
            };
            if state == GatewayState::Synced {
                self.gateways[g].failures = 0;
                self.gateways[g].undelivered_count = 0;
            }
            self.set_state(g, state, None);
        }
    }

    /// Gateway `g` is gone (its connection is already dropped by the engine): marked bad,
    /// or scheduled to reconnect; what it was asked is given up.
    fn drop_gateway(&mut self, g: usize, why: DropReason, had_socket: bool) {
        let gw = &mut self.gateways[g];
        gw.tip = None;
        gw.ready = false;
        gw.undelivered = None;
        gw.undelivered_pending = false;
        if had_socket {
            self.actions.push_back(Action::Close { gateway: g });
        }
        if self.ancestors.is_some_and(|(a, _)| a == g) || self.asked == Some(g) {
            self.ancestors = None;
            self.held.clear();
            self.deferred.clear();
        }
        if self.filters.asked() == Some(g) {
            self.filters.abandon();
        }
        if let Some(scan) = self.scan.as_mut()
            && scan.asked().is_some_and(|(a, _)| a == g)
        {
            scan.abandon().for_each(drop);
        }
        self.check_gateway_gone(g);
        if let Some(w) = self.wallet.as_mut() {
            w.gateway_gone(g);
        }
        self.relay_gateway_gone(g);
        if why.is_violation() {
            self.events.push_back(Event::Rejected {
                gateway: g,
                reason: why.clone(),
            });
            self.set_state(g, GatewayState::Bad, Some(why));
        } else {
            let gw = &mut self.gateways[g];
            gw.failures += 1;
            let delay = backoff(gw.failures, self.rng.next_f64());
            gw.reconnect_at = Some(self.now + delay);
            self.counters.reconnects += 1;
            self.set_state(g, GatewayState::BackingOff, Some(why));
        }
        if self.source == Some(g) || self.asked == Some(g) {
            self.retarget();
        }
    }

    /// Gateway `g` did not deliver the tip it announced: the target is not set from that
    /// announcement again, the other gateways' tips are considered, and a gateway that
    /// keeps announcing what it does not deliver is to be marked bad (returned).
    fn undeliver(&mut self, g: usize) -> Option<DropReason> {
        let gw = &mut self.gateways[g];
        gw.undelivered = gw.tip.map(|(_, h, _)| h.block_hash());
        gw.undelivered_count += 1;
        if gw.undelivered_count >= MAX_UNDELIVERED {
            return Some(DropReason::Undelivered(MAX_UNDELIVERED));
        }
        if self.source == Some(g) {
            self.source = None;
        }
        self.offer_tips();
        None
    }

    /// Offer the connected gateways' announced tips (not the undelivered ones) to the
    /// syncer; the best one becomes the target, its gateway the source.
    fn offer_tips(&mut self) {
        for (g, gw) in self.gateways.iter().enumerate() {
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
    fn give_up(&mut self) {
        let (Some(id), Some(a)) = (self.syncer.abandon(), self.asked) else {
            return;
        };
        let gw = &mut self.gateways[a];
        if !gw.ready {
            return;
        }
        if gw.given_up.len() == MAX_GIVEN_UP {
            gw.given_up.pop_front();
        }
        gw.given_up.push_back(id);
    }

    /// The target's gateway is gone: give up its request and take the best tip the
    /// others announced.
    fn retarget(&mut self) {
        self.give_up();
        self.syncer.clear_target();
        self.source = None;
        self.asked = None;
        self.offer_tips();
    }
}

fn scan_event(c: ScanChange) -> Event {
    match c {
        ScanChange::Matched { height, hash } => Event::ScanMatch { height, hash },
        ScanChange::Withdrawn { height, hash } => Event::ScanWithdrawn { height, hash },
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::reason::TransportError;

    use lightwire_chain::generate::headers_after;
    use lightwire_chain::{REGTEST, U256};
    use lightwire_noise::{FrameReader, Receiver, Responder, Sender};
    use lightwire_wire::{Features, Headers, Init, Message, Networks};

    use crate::testnet::{NOW, key};

    /// The gateway's side of one connection, scripted by the test.
    struct Fake {
        tx: Sender,
        rx: Receiver,
        reader: FrameReader,
    }

    impl Fake {
        /// Connect gateway `g` of `engine` (keys 0x40 + g) through the handshake and both
        /// inits.
        fn connect(engine: &mut Engine, g: usize) -> Fake {
            engine.connecting(g, NOW);
            engine.opened(g, key(0x20 + g as u8), NOW);
            let act_one = engine.poll_transmit(g).unwrap().to_vec();
            engine.sent(g);
            let (awaiting, act_two) = Responder::start(key(0x40 + g as u8), key(0x60))
                .read_act_one(&act_one)
                .unwrap();
            engine.receive(g, &act_two, NOW);
            let out = engine.poll_transmit(g).unwrap().to_vec();
            engine.sent(g);
            let (tx, rx) = awaiting.read_act_three(&out[..66]).unwrap().split();
            let mut fake = Fake {
                tx,
                rx,
                reader: FrameReader::new(),
            };
            fake.reader.read(&mut fake.rx, &out[66..]).unwrap(); // the client's init
            let chains = [REGTEST.genesis.block_hash().0];
            let init = Init::new(Features::empty(), Some(Networks::from_chains(&chains)));
            fake.send(engine, g, &Message::Init(init));
            assert_eq!(engine.state(g), GatewayState::Syncing);
            fake
        }

        fn send(&mut self, engine: &mut Engine, g: usize, m: &Message<'_>) {
            self.send_at(engine, g, NOW, m);
        }

        /// A message received at `now`.
        fn send_at(&mut self, engine: &mut Engine, g: usize, now: Millis, m: &Message<'_>) {
            let mut body = vec![0u8; 70_000];
            let n = m.encode(&mut body).unwrap();
            let mut frame = vec![0u8; n + 34];
            let len = self.tx.encrypt(&body[..n], &mut frame).unwrap();
            engine.receive(g, &frame[..len], now);
        }

        fn tip(&mut self, engine: &mut Engine, g: usize, height: u32, header: &Header) {
            let work = U256::from_u64(2 * (u64::from(height) + 1)).to_be_bytes();
            let tip = lightwire_wire::Tip {
                height,
                header: &header.encode(),
                chainwork: &work,
            };
            self.send(engine, g, &Message::Tip(tip));
        }

        fn headers(&mut self, engine: &mut Engine, g: usize, id: u32, hs: &[Header], last: bool) {
            let bytes: Vec<u8> = hs.iter().flat_map(|h| h.encode()).collect();
            let m = Headers {
                id,
                first_height: 0,
                last,
                headers: &bytes,
            };
            self.send(engine, g, &Message::Headers(m));
        }

        /// The ids of the requests the engine sent this gateway since the last call.
        fn requests(&mut self, engine: &mut Engine, g: usize) -> Vec<u32> {
            let Some(out) = engine.poll_transmit(g).map(<[u8]>::to_vec) else {
                return Vec::new();
            };
            engine.sent(g);
            let mut ids = Vec::new();
            let mut at = 0;
            while at < out.len() {
                let (taken, m) = self.reader.read(&mut self.rx, &out[at..]).unwrap();
                at += taken;
                if let Some(Message::GetHeaders(r)) = m.map(|b| Message::decode(b).unwrap()) {
                    ids.push(r.id);
                }
            }
            ids
        }
    }

    fn engine(gateways: usize) -> Engine {
        let chain = Chain::new(&REGTEST);
        let tip = Tip::from(chain.tip());
        let list = (0..gateways)
            .map(|g| ConnectString {
                url: format!("ws://127.0.0.1:{}", 9000 + g),
                node_id: key(0x40 + g as u8).public_key(),
            })
            .collect();
        let mut e = Engine::new(chain, &tip, list, key(1), 7, NOW);
        while e.poll_action().is_some() {}
        e
    }

    #[test]
    fn a_given_up_answer_still_arriving_is_ignored_not_punished() {
        let chain = headers_after(&REGTEST, &REGTEST.genesis, 0, 300, 0);
        let mut e = engine(2);
        let mut a = Fake::connect(&mut e, 0);
        let mut b = Fake::connect(&mut e, 1);
        a.tip(&mut e, 0, 100, &chain[99]);
        e.schedule();
        let first = a.requests(&mut e, 0);
        assert_eq!(first.len(), 1, "asked A");
        // B announces more work: A's request is given up, B is asked.
        b.tip(&mut e, 1, 200, &chain[199]);
        e.schedule();
        assert_eq!(b.requests(&mut e, 1).len(), 1, "asked B");
        // B goes away: A is asked again while its first answer is still on its way.
        e.closed(1, TransportError::Closed, NOW);
        e.schedule();
        let second = a.requests(&mut e, 0);
        assert_eq!(second.len(), 1);
        a.headers(&mut e, 0, first[0], &chain[..100], true);
        assert_eq!(e.state(0), GatewayState::Syncing, "A is not marked bad");
        a.headers(&mut e, 0, second[0], &chain[..100], true);
        assert_eq!(e.syncer().tip().height, 100);
        // An answer to a request never made is refused: A is bad.
        a.headers(&mut e, 0, 999, &chain[100..110], true);
        assert_eq!(e.state(0), GatewayState::Bad);
        let actions: Vec<Action> = std::iter::from_fn(|| e.poll_action()).collect();
        assert!(
            actions.contains(&Action::Close { gateway: 0 }),
            "{actions:?}"
        );
    }

    #[test]
    fn a_gateway_announcing_what_it_does_not_deliver_is_marked_bad() {
        let chain = headers_after(&REGTEST, &REGTEST.genesis, 0, 50, 0);
        let mut e = engine(1);
        let mut a = Fake::connect(&mut e, 0);
        for (i, claimed) in [1_000u32, 2_000, 3_000].into_iter().enumerate() {
            // A tip "claimed" high, with a header we cannot check until it comes.
            let mut fake = chain[10 + i];
            fake.nonce ^= 1;
            a.tip(&mut e, 0, claimed, &fake);
            e.schedule();
            let ids = a.requests(&mut e, 0);
            assert_eq!(ids.len(), 1, "round {i}: asked");
            a.headers(&mut e, 0, ids[0], &[], true);
            // An undelivered tip announced again is not a target again.
            a.tip(&mut e, 0, claimed, &fake);
            e.schedule();
            if i < 2 {
                assert!(
                    a.requests(&mut e, 0).is_empty(),
                    "round {i}: not asked again"
                );
                assert_eq!(e.state(0), GatewayState::Syncing);
            }
        }
        assert_eq!(e.state(0), GatewayState::Bad);
    }

    #[test]
    fn a_request_without_progress_times_out_and_reconnects() {
        let chain = headers_after(&REGTEST, &REGTEST.genesis, 0, 50, 0);
        let mut e = engine(1);
        let mut a = Fake::connect(&mut e, 0);
        a.tip(&mut e, 0, 50, &chain[49]);
        e.schedule();
        assert_eq!(a.requests(&mut e, 0).len(), 1);
        assert_eq!(e.poll_timeout(), Some(NOW + REQUEST_TIMEOUT));
        e.handle_timeout(NOW + Duration::from_secs(10));
        assert_eq!(e.state(0), GatewayState::Syncing);
        e.handle_timeout(NOW + REQUEST_TIMEOUT);
        assert_eq!(e.state(0), GatewayState::BackingOff);
        assert_eq!(e.poll_action(), Some(Action::Close { gateway: 0 }));
        assert_eq!(e.poll_action(), None, "the reconnect waits for its backoff");
        let Some(Event::Gateway {
            reason: Some(why), ..
        }) = std::iter::from_fn(|| e.poll_event()).last()
        else {
            panic!("a reason for the drop");
        };
        assert_eq!(why.code(), "request-timeout");
        // One timer: the reconnect is due within the first backoff (250..500 ms).
        let due = e.poll_timeout().unwrap();
        let wait = due.since(NOW + REQUEST_TIMEOUT);
        assert!(wait >= Duration::from_millis(250) && wait <= Duration::from_millis(500));
        e.handle_timeout(due);
        assert_eq!(e.poll_action(), Some(Action::Connect { gateway: 0 }));
    }

    #[test]
    fn backoff_doubles_to_a_cap_with_jitter() {
        let ms = Duration::from_millis;
        assert_eq!(backoff(1, 0.0), ms(250));
        assert_eq!(backoff(1, 1.0), ms(500));
        assert_eq!(backoff(2, 0.0), ms(500));
        assert_eq!(backoff(3, 0.5), ms(1_500));
        assert_eq!(backoff(20, 1.0), BACKOFF_MAX);
        assert_eq!(backoff(u32::MAX, 0.0), BACKOFF_MAX / 2);
        // Out-of-range randomness is clamped, never a negative or unbounded delay.
        assert_eq!(backoff(1, -3.0), ms(250));
        assert_eq!(backoff(1, 9.0), ms(500));
        // The engine's own numbers are uniform in [0, 1) and differ per seed.
        let (mut a, mut b) = (Rng::new(1), Rng::new(2));
        let xs: Vec<f64> = (0..1000).map(|_| a.next_f64()).collect();
        assert!(xs.iter().all(|x| (0.0..1.0).contains(x)));
        assert!((0.45..0.55).contains(&(xs.iter().sum::<f64>() / 1000.0)));
        assert_ne!(a.next_u64(), b.next_u64());
    }

    #[test]
    fn a_rejected_gateway_says_which_rule_at_which_height() {
        use crate::testnet::{Net, memory};
        use lightwire_proto::testing::TestChain;
        // The bad gateway claims more work, with a header at 150 that misses its target.
        let mut bad = TestChain::generate(320);
        bad.corrupt(150);
        let good = TestChain::generate(300);
        let mut net = Net::new(memory(), vec![bad, good], |_| {});
        net.drive();
        let rejected: Vec<&DropReason> = net
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Rejected { gateway: 0, reason } => Some(reason),
                _ => None,
            })
            .collect();
        assert_eq!(rejected.len(), 1, "{:?}", net.events);
        assert_eq!(rejected[0].code(), "invalid-header");
        assert_eq!(rejected[0].invalid_header(), Some((150, "high-hash")));
        assert!(
            rejected[0].to_string().contains("height 150"),
            "{}",
            rejected[0]
        );
        assert_eq!(net.engine.state(0), GatewayState::Bad);
        // The honest gateway's chain was synced and stored all the same.
        assert_eq!(net.stored().height, 300);
    }

    #[test]
    fn two_gateways_sync_into_the_store_and_keepalive_runs_on_one_timer() {
        use crate::testnet::{Net, memory};
        use lightwire_proto::testing::TestChain;
        let mut net = Net::new(
            memory(),
            vec![TestChain::generate(5_000), TestChain::generate(5_000)],
            |e| {
                e.syncer_mut().request_size = 2_000;
                e.syncer_mut().commit_every = 1_500;
            },
        );
        net.drive();
        assert_eq!(net.stored().height, 5_000);
        assert!(net.engine.is_synced());
        assert_eq!(net.engine.state(0), GatewayState::Synced);
        // Idle for ten minutes: pings both ways keep every connection up.
        net.advance(Duration::from_secs(600));
        assert_eq!(net.engine.state(0), GatewayState::Synced);
        assert_eq!(net.engine.state(1), GatewayState::Synced);
        assert_eq!(net.engine.counters().reconnects, 0);
        // A gateway that goes silent is dropped by the keepalive and reconnected.
        net.gateways[1].as_mut().unwrap().speaks = false;
        net.advance(Duration::from_secs(51));
        assert_eq!(net.engine.counters().reconnects, 1);
        let dropped = net.events.iter().any(|e| {
            matches!(e, Event::Gateway { gateway: 1, reason: Some(r), .. } if r.code() == "keepalive-timeout")
        });
        assert!(dropped, "{:?}", net.events);
        net.advance(Duration::from_secs(1));
        assert_eq!(
            net.engine.state(1),
            GatewayState::Synced,
            "back after the backoff"
        );
    }

    #[test]
    fn an_answer_held_for_ancestors_is_capped_at_what_was_asked() {
        // Our chain: 5,000 headers, so that height 100 is below the validation window.
        let main = headers_after(&REGTEST, &REGTEST.genesis, 0, 5_000, 0);
        let mut chain = Chain::new(&REGTEST);
        for piece in main.chunks(2_000) {
            chain.connect(piece, NOW.as_secs()).unwrap();
        }
        let tip = Tip::from(chain.tip());
        let list = vec![ConnectString {
            url: "ws://127.0.0.1:9000".into(),
            node_id: key(0x40).public_key(),
        }];
        let mut e = Engine::new(chain, &tip, list, key(1), 7, NOW);
        e.syncer_mut().request_size = 2_000;
        while e.poll_action().is_some() {}
        let mut a = Fake::connect(&mut e, 0);
        // A branch from height 100 with more work than ours.
        let branch = headers_after(&REGTEST, &main[99], 100, 6_000, 1);
        a.tip(&mut e, 0, 6_100, &branch[5_999]);
        e.schedule();
        let ids = a.requests(&mut e, 0);
        assert_eq!(ids.len(), 1);
        // Its first message forks below the window: the engine waits for ancestors.
        a.headers(&mut e, 0, ids[0], &branch[..800], false);
        assert!(e.need_ancestors().is_some());
        // Meanwhile the gateway keeps sending: 1,200 more is the rest of the 2,000 asked
        // for and is held; anything beyond is refused, and nothing more is held.
        a.headers(&mut e, 0, ids[0], &branch[800..1_600], false);
        a.headers(&mut e, 0, ids[0], &branch[1_600..2_000], false);
        assert_eq!(e.state(0), GatewayState::Syncing);
        a.headers(&mut e, 0, ids[0], &branch[2_000..2_001], false);
        assert_eq!(e.state(0), GatewayState::Bad);
        assert!(
            e.need_ancestors().is_none(),
            "what was held went with the gateway"
        );
    }

    #[test]
    fn a_header_from_the_future_is_not_yet_not_invalid() {
        let chain = headers_after(&REGTEST, &REGTEST.genesis, 0, 10, 0);
        let mut e = engine(1);
        let mut a = Fake::connect(&mut e, 0);
        // A valid header three hours ahead of our clock (our clock may be the slow one).
        let mut future = headers_after(&REGTEST, &chain[9], 10, 1, 0)[0];
        future.time = (NOW.as_secs() + 3 * 3600) as u32;
        let target = future.bits.to_target().unwrap();
        lightwire_chain::generate::mine(&mut future, &target);
        a.tip(&mut e, 0, 11, &future);
        e.schedule();
        let ids = a.requests(&mut e, 0);
        let mut answer = chain.clone();
        answer.push(future);
        a.headers(&mut e, 0, ids[0], &answer, true);
        // Not marked bad: reconnected after a backoff, to be asked again.
        assert_eq!(e.state(0), GatewayState::BackingOff);
        let reason = std::iter::from_fn(|| e.poll_event()).find_map(|ev| match ev {
            Event::Gateway {
                reason: Some(r), ..
            } => Some(r),
            _ => None,
        });
        let reason = reason.expect("a reason");
        assert_eq!(reason.code(), "future-header");
        assert!(!reason.is_violation());
        assert_eq!(reason.invalid_header(), Some((11, "time-too-new")));
    }

    #[test]
    fn colluding_gateways_cannot_push_out_an_honest_gateways_given_up_requests() {
        let chain = headers_after(&REGTEST, &REGTEST.genesis, 0, 300, 0);
        let mut e = engine(3);
        let mut honest = Fake::connect(&mut e, 0);
        let mut a = Fake::connect(&mut e, 1);
        let mut b = Fake::connect(&mut e, 2);
        honest.tip(&mut e, 0, 100, &chain[99]);
        e.schedule();
        let first = honest.requests(&mut e, 0);
        assert_eq!(first.len(), 1, "the honest gateway is asked");
        // Two colluders take turns announcing ever "better" tips, so that request after
        // request is given up: twenty of them, more than any global memory of 16 holds.
        for i in 0..20u32 {
            let (fake, g) = if i % 2 == 0 { (&mut a, 1) } else { (&mut b, 2) };
            let mut header = chain[150];
            header.nonce = header.nonce.wrapping_add(1_000 + i);
            fake.tip(&mut e, g, 1_000 + i, &header);
            e.schedule();
            assert_eq!(fake.requests(&mut e, g).len(), 1, "round {i}");
        }
        // The honest gateway's answer to the first request arrives now: ignored, not
        // punished.
        honest.headers(&mut e, 0, first[0], &chain[..100], true);
        assert_eq!(e.state(0), GatewayState::Syncing);
        // A colluder answering the honest gateway's request id is another matter.
        a.headers(&mut e, 1, first[0], &chain[..10], true);
        assert_eq!(e.state(1), GatewayState::Bad);
    }

    #[test]
    fn honest_reorgs_during_a_sync_do_not_count_against_the_gateway() {
        let main = headers_after(&REGTEST, &REGTEST.genesis, 0, 1_200, 0);
        let mut e = engine(1);
        e.syncer_mut().request_size = 50;
        let mut a = Fake::connect(&mut e, 0);
        for round in 0..4 {
            // The gateway announces a tip; its chain reorganises while our request waits,
            // so the answer ends at once, empty, before the new tip is announced.
            a.tip(&mut e, 0, 1_000 + round, &main[999 + round as usize]);
            e.schedule();
            let ids = a.requests(&mut e, 0);
            assert_eq!(ids.len(), 1, "round {round}");
            a.headers(&mut e, 0, ids[0], &[], true);
            // The new tip, and the headers it asks for: progress.
            a.tip(&mut e, 0, 1_100 + round, &main[1_099 + round as usize]);
            e.schedule();
            let ids = a.requests(&mut e, 0);
            assert_eq!(ids.len(), 1, "round {round}");
            let from = e.syncer().tip().height as usize;
            a.headers(&mut e, 0, ids[0], &main[from..from + 50], true);
            assert_eq!(e.syncer().tip().height as usize, from + 50);
            assert_eq!(e.state(0), GatewayState::Syncing, "round {round}");
        }
    }

    /// A tip "claimed" at `height` whose header we cannot check until it comes (a
    /// variant of `base`).
    fn claimed(base: &Header, salt: u32) -> Header {
        let mut h = *base;
        h.nonce = h.nonce.wrapping_add(10_000 + salt);
        h
    }

    #[test]
    fn empty_messages_do_not_keep_a_request_alive() {
        let chain = headers_after(&REGTEST, &REGTEST.genesis, 0, 50, 0);
        let mut e = engine(1);
        let mut a = Fake::connect(&mut e, 0);
        a.tip(&mut e, 0, 50, &chain[49]);
        e.schedule();
        let ids = a.requests(&mut e, 0);
        // Every 10 s an empty, not-last `headers`: messages, but no progress.
        for k in 1..=2u64 {
            let now = NOW + Duration::from_secs(10 * k);
            e.handle_timeout(now);
            let empty = Headers {
                id: ids[0],
                first_height: 0,
                last: false,
                headers: &[],
            };
            a.send_at(&mut e, 0, now, &Message::Headers(empty));
        }
        e.handle_timeout(NOW + Duration::from_secs(29));
        assert_eq!(e.state(0), GatewayState::Syncing);
        e.handle_timeout(NOW + REQUEST_TIMEOUT);
        assert_eq!(
            e.state(0),
            GatewayState::BackingOff,
            "30 s without progress"
        );
    }

    #[test]
    fn a_higher_tip_before_each_empty_answer_does_not_keep_a_gateway_the_target() {
        let chain = headers_after(&REGTEST, &REGTEST.genesis, 0, 50, 0);
        let mut e = engine(1);
        let mut a = Fake::connect(&mut e, 0);
        a.tip(&mut e, 0, 1_000, &claimed(&chain[10], 0));
        for round in 1..=3u32 {
            e.schedule();
            let ids = a.requests(&mut e, 0);
            assert_eq!(ids.len(), 1, "round {round}: asked");
            // Just before ending the answer empty, a "higher" tip.
            a.tip(&mut e, 0, 1_000 + round, &claimed(&chain[10], round));
            a.headers(&mut e, 0, ids[0], &[], true);
        }
        assert_eq!(e.state(0), GatewayState::Bad);
    }

    #[test]
    fn full_answers_of_known_headers_are_not_progress() {
        let chain = headers_after(&REGTEST, &REGTEST.genesis, 0, 200, 0);
        let mut e = engine(1);
        e.syncer_mut().request_size = 50;
        let mut a = Fake::connect(&mut e, 0);
        // First a real answer: our chain reaches 50.
        a.tip(&mut e, 0, 50, &chain[49]);
        e.schedule();
        let ids = a.requests(&mut e, 0);
        a.headers(&mut e, 0, ids[0], &chain[..50], true);
        assert_eq!(e.syncer().tip().height, 50);
        // Then "higher" tips, each answered with a full answer of headers we have.
        for round in 0..3u32 {
            a.tip(&mut e, 0, 1_000 + round, &claimed(&chain[150], round));
            e.schedule();
            let ids = a.requests(&mut e, 0);
            assert_eq!(ids.len(), 1, "round {round}: asked");
            a.headers(&mut e, 0, ids[0], &chain[..50], true);
            e.schedule();
            assert!(
                a.requests(&mut e, 0).is_empty(),
                "round {round}: not continued from headers we have"
            );
        }
        assert_eq!(e.state(0), GatewayState::Bad);
    }
}
