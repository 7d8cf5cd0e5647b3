//! Several gateways and one best chain, sans-IO: which gateway is asked for headers, which
//! are dropped and marked bad, when to reconnect and ping. The shell (the wasm one in the
//! browser, the tests' natively) owns the sockets, timers, randomness and the store; it
//! feeds bytes and closes in, and carries out the [`Action`]s and commits that come out.
//!
//! Rules, all here so that both shells follow them:
//! - The target is the announced tip claiming the most work above ours (a hint); the
//!   request goes to the gateway that announced it. What counts is the work of the headers
//!   that arrive: `lightwire-chain` follows the valid chain with the most work.
//! - A gateway that sends an invalid header, a header that links to nothing we know, an
//!   answer nobody asked for, or that fails the handshake or `init`, is closed and marked
//!   bad for the session (no reconnect). Sync continues from the others.
//! - A gateway whose connection drops (or stops answering pings) is reconnected after an
//!   exponential backoff with jitter ([`backoff_ms`]), reset once it is serving again.

use std::collections::VecDeque;

use lightwire_chain::{BlockHash, Chain, Entry, Header, Params, Work};
use lightwire_noise::SecretKey;
use lightwire_store::{Durability, Pending, Tip};

use crate::peer::{ConnectString, Peer, PeerError, PeerEvent};
use crate::sync::{SyncError, Syncer};

/// Keepalive: ping a gateway silent for this long.
pub const PING_AFTER_MS: f64 = 30_000.0;
/// Drop a gateway that has not answered a ping within this long.
pub const PING_TIMEOUT_MS: f64 = 20_000.0;
/// Drop a connection whose handshake and `init` take longer than this.
pub const HANDSHAKE_TIMEOUT_MS: f64 = 10_000.0;
/// Drop a gateway whose answer to a request makes no progress for this long (it may
/// still answer pings).
pub const REQUEST_TIMEOUT_MS: f64 = 30_000.0;
/// Mark a gateway bad after this many announced tips it did not deliver.
pub const MAX_UNDELIVERED: u32 = 3;
/// First reconnect delay; doubled per failed attempt up to [`BACKOFF_MAX_MS`].
pub const BACKOFF_BASE_MS: f64 = 500.0;
/// Longest reconnect delay.
pub const BACKOFF_MAX_MS: f64 = 30_000.0;

/// The delay before reconnect attempt `failures` (1 for the first), given a uniform
/// `random` in [0, 1): "equal jitter", half the exponential delay fixed and half random,
/// so that clients dropped together do not come back together.
pub fn backoff_ms(failures: u32, random: f64) -> f64 {
    let exp = BACKOFF_BASE_MS * 2f64.powi(failures.saturating_sub(1).min(16) as i32);
    let full = exp.min(BACKOFF_MAX_MS);
    full / 2.0 + full / 2.0 * random.clamp(0.0, 1.0)
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
        /// Why it dropped (a sentence), when it did.
        reason: Option<String>,
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
        /// The rule, as a sentence.
        reason: String,
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
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Action {
    /// Open a WebSocket to the gateway's URL, after `after_ms` milliseconds, then call
    /// [`Engine::opened`] (or [`Engine::closed`] if it fails).
    Connect {
        /// Index in the gateway list.
        gateway: usize,
        /// Delay.
        after_ms: f64,
    },
    /// Close the gateway's WebSocket (its later events are to be ignored).
    Close {
        /// Index in the gateway list.
        gateway: usize,
    },
}

/// Why a gateway is being dropped.
enum Drop {
    /// It broke a rule: closed and marked bad.
    Bad(String),
    /// The connection failed: reconnect later.
    Transient(String),
}

struct Gateway {
    connect: ConnectString,
    state: GatewayState,
    peer: Option<Peer>,
    /// Its last announced tip while connected: height, header, claimed chainwork.
    tip: Option<(u32, Header, Work)>,
    /// An announced tip whose answer ended without it: not a target again.
    undelivered: Option<BlockHash>,
    /// Tips it announced and did not deliver, since it last served us in full.
    undelivered_count: u32,
    /// Reconnect attempts since it last served.
    failures: u32,
    /// When the state last changed (handshake deadline), and when it was last heard.
    since_ms: f64,
    heard_ms: f64,
    ping_sent_ms: Option<f64>,
}

/// Counters since the engine started.
#[derive(Clone, Copy, Default, Debug)]
pub struct Counters {
    /// WebSocket messages received, and their bytes.
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
    params: &'static Params,
    syncer: Syncer,
    gateways: Vec<Gateway>,
    /// The gateway the target came from, which the next request goes to.
    source: Option<usize>,
    /// The gateway the request in flight went to, and when it was last heard on it.
    asked: Option<usize>,
    answer_heard_ms: f64,
    locator: Vec<BlockHash>,
    /// An answer whose parent is below the window: its gateway, the parent, and the
    /// headers, kept until the shell reads the ancestors from the store.
    ancestors: Option<(usize, BlockHash)>,
    deferred: Vec<u8>,
    /// The rest of that answer, held until the ancestors come: (id, last, headers).
    held: VecDeque<(u32, bool, Vec<u8>)>,
    /// An answer ended short of the announced target (set by `take_step`).
    dropped_target: bool,
    events: VecDeque<Event>,
    actions: VecDeque<Action>,
    local_static: SecretKey,
    counters: Counters,
    /// The time of the latest input (for the request deadline).
    now_ms: f64,
    /// A commit from [`Engine::take_commit`] is in flight.
    committing: bool,
    stopped: bool,
}

impl Engine {
    /// An engine resumed on `chain` (rebuilt from the store whose tip is `stored`), for the
    /// gateways `gateways`, as `local_static`. Every gateway gets a [`Action::Connect`].
    pub fn new(
        chain: Chain,
        stored: &Tip,
        gateways: Vec<ConnectString>,
        local_static: SecretKey,
    ) -> Engine {
        let params = chain.params();
        let mut actions = VecDeque::with_capacity(2 * gateways.len() + 4);
        let gateways = gateways
            .into_iter()
            .enumerate()
            .map(|(i, connect)| {
                actions.push_back(Action::Connect {
                    gateway: i,
                    after_ms: 0.0,
                });
                Gateway {
                    connect,
                    state: GatewayState::Connecting,
                    peer: None,
                    tip: None,
                    undelivered: None,
                    undelivered_count: 0,
                    failures: 0,
                    since_ms: 0.0,
                    heard_ms: 0.0,
                    ping_sent_ms: None,
                }
            })
            .collect();
        Engine {
            params,
            syncer: Syncer::new(chain, stored),
            gateways,
            source: None,
            asked: None,
            answer_heard_ms: 0.0,
            locator: Vec::with_capacity(lightwire_wire::sync::MAX_LOCATOR),
            ancestors: None,
            deferred: Vec::new(),
            held: VecDeque::new(),
            dropped_target: false,
            events: VecDeque::with_capacity(16),
            actions,
            local_static,
            counters: Counters::default(),
            now_ms: 0.0,
            committing: false,
            stopped: false,
        }
    }

    /// The sync state (tip, target, tuning).
    pub fn syncer(&self) -> &Syncer {
        &self.syncer
    }

    /// The sync state, to tune (request size, commit size).
    pub fn syncer_mut(&mut self) -> &mut Syncer {
        &mut self.syncer
    }

    /// Counters since the start.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Gateway `g`'s WebSocket URL.
    pub fn url(&self, g: usize) -> &str {
        &self.gateways[g].connect.url
    }

    /// Gateway `g`'s state.
    pub fn state(&self, g: usize) -> GatewayState {
        self.gateways[g].state
    }

    /// Whether nothing is missing: some gateway has been heard, and no announced tip is
    /// missing, nothing is in flight, nothing waits to be committed or is being committed.
    pub fn is_synced(&self) -> bool {
        self.syncer.is_synced()
            && self.syncer.uncommitted() == 0
            && !self.committing
            && self.gateways.iter().any(|g| g.tip.is_some())
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The next thing for the shell to do.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    fn set_state(&mut self, g: usize, state: GatewayState, reason: Option<String>, now_ms: f64) {
        let gw = &mut self.gateways[g];
        if gw.state == state && reason.is_none() {
            return;
        }
        gw.state = state;
        gw.since_ms = now_ms;
        self.events.push_back(Event::Gateway {
            gateway: g,
            state,
            reason,
        });
    }

    /// The shell is opening gateway `g`'s WebSocket (after a [`Action::Connect`]).
    pub fn connecting(&mut self, g: usize, now_ms: f64) {
        self.set_state(g, GatewayState::Connecting, None, now_ms);
    }

    /// Gateway `g`'s WebSocket opened; the handshake starts with `ephemeral` (fresh
    /// randomness, one per connection). Its act one is ready in [`Self::transmit`].
    pub fn opened(&mut self, g: usize, ephemeral: SecretKey, now_ms: f64) {
        if self.stopped || self.gateways[g].state == GatewayState::Bad {
            return;
        }
        let gw = &mut self.gateways[g];
        gw.peer = Some(Peer::new(
            self.params,
            self.local_static.clone(),
            gw.connect.node_id,
            ephemeral,
        ));
        gw.tip = None;
        gw.heard_ms = now_ms;
        gw.ping_sent_ms = None;
        self.set_state(g, GatewayState::Handshaking, None, now_ms);
    }

    /// Bytes to send to gateway `g` now (one WebSocket message); call [`Self::sent`].
    pub fn transmit(&self, g: usize) -> Option<&[u8]> {
        self.gateways[g].peer.as_ref()?.transmit()
    }

    /// The bytes from [`Self::transmit`] went out.
    pub fn sent(&mut self, g: usize) {
        if let Some(peer) = self.gateways[g].peer.as_mut() {
            if let Some(out) = peer.transmit() {
                self.counters.messages_out += 1;
                self.counters.bytes_out += out.len() as u64;
            }
            peer.sent();
        }
    }

    /// Gateway `g`'s WebSocket closed (or failed to open) by itself.
    pub fn closed(&mut self, g: usize, reason: &str, now_ms: f64, random: f64) {
        match self.gateways[g].state {
            GatewayState::Bad | GatewayState::Stopped | GatewayState::BackingOff => {}
            _ => self.drop_gateway(g, Drop::Transient(reason.to_string()), now_ms, random),
        }
    }

    /// A WebSocket message from gateway `g`, at `now_ms` (ms since the epoch; validation
    /// checks header times against it).
    pub fn receive(&mut self, g: usize, data: &[u8], now_ms: f64, random: f64) {
        self.now_ms = now_ms;
        self.counters.messages_in += 1;
        self.counters.bytes_in += data.len() as u64;
        let now = (now_ms / 1000.0) as u64;
        let Engine {
            syncer,
            gateways,
            source,
            asked,
            ancestors,
            deferred,
            held,
            dropped_target,
            events,
            answer_heard_ms,
            ..
        } = self;
        let Gateway {
            peer,
            tip,
            undelivered,
            ..
        } = &mut gateways[g];
        let Some(p) = peer.as_mut() else {
            return;
        };
        let mut failure: Option<Drop> = None;
        let mut ready = false;
        let mut on_event = |event: PeerEvent<'_>| {
            if failure.is_some() {
                return;
            }
            match event {
                PeerEvent::Ready => ready = true,
                PeerEvent::Tip {
                    height,
                    header,
                    chainwork,
                } => {
                    *tip = Some((height, header, chainwork));
                    if *undelivered == Some(header.block_hash()) {
                        // Announced again, still not delivered: not a target again.
                        return;
                    }
                    if syncer.on_tip(height, &header, chainwork) {
                        if asked.is_some_and(|a| a != g) {
                            // A better tip elsewhere: the request in flight to another
                            // gateway is given up, with any answer held for ancestors.
                            syncer.abandon();
                            *asked = None;
                            *ancestors = None;
                            held.clear();
                        }
                        *source = Some(g);
                    }
                }
                PeerEvent::Headers {
                    id, headers, last, ..
                } => {
                    if *asked != Some(g) {
                        // Not the gateway asked: the rest of an answer given up is
                        // ignored, anything else was never asked for.
                        if !syncer.is_abandoned(id) {
                            let e = SyncError::UnexpectedAnswer { id };
                            failure = Some(Drop::Bad(e.to_string()));
                        }
                        return;
                    }
                    *answer_heard_ms = now_ms;
                    if ancestors.is_some() || !held.is_empty() {
                        // Waiting for ancestors from the store: the rest of the answer is
                        // held (at most one request's worth; a deep fork only).
                        held.push_back((id, last, headers.to_vec()));
                        return;
                    }
                    let r = syncer.on_headers(id, headers, last, now);
                    match take_step(r, g, headers, syncer, events, deferred, ancestors) {
                        Ok(dropped) => *dropped_target |= dropped,
                        Err(e) => failure = Some(e),
                    }
                }
                PeerEvent::Warning(text) => events.push_back(Event::Warning {
                    gateway: g,
                    text: text.map(str::to_string),
                }),
                PeerEvent::Pong => {}
            }
        };
        if let Err(e) = p.receive(data, &mut on_event) {
            failure = failure.or(Some(match e {
                PeerError::GatewayError(_) => Drop::Transient(e.to_string()),
                _ => Drop::Bad(e.to_string()),
            }));
        }
        let gw = &mut self.gateways[g];
        gw.heard_ms = now_ms;
        gw.ping_sent_ms = None;
        if self.dropped_target {
            self.dropped_target = false;
            self.undeliver(g, now_ms, random);
        }
        if let Some(f) = failure {
            self.drop_gateway(g, f, now_ms, random);
        } else if ready {
            self.set_state(g, GatewayState::Syncing, None, now_ms);
        }
        self.update_states(now_ms);
    }

    /// Set Syncing/Synced on the connected gateways; a gateway serving again has its
    /// backoff reset.
    fn update_states(&mut self, now_ms: f64) {
        for g in 0..self.gateways.len() {
            let gw = &self.gateways[g];
            if !matches!(gw.state, GatewayState::Syncing | GatewayState::Synced) {
                continue;
            }
            let ours = gw.tip.is_some_and(|(_, h, w)| {
                w <= self.syncer.tip().chainwork || h.block_hash() == self.syncer.tip().hash
            });
            // Synced: its announced tip is ours (or behind it) and stored. A gateway whose
            // claimed tip never came stays "syncing", and its count of undelivered tips
            // is kept.
            let state = if ours && self.syncer.uncommitted() == 0 && !self.committing {
                GatewayState::Synced
            } else {
                GatewayState::Syncing
            };
            if state == GatewayState::Synced {
                self.gateways[g].failures = 0;
                self.gateways[g].undelivered_count = 0;
            }
            self.set_state(g, state, None, now_ms);
        }
    }

    fn drop_gateway(&mut self, g: usize, why: Drop, now_ms: f64, random: f64) {
        let gw = &mut self.gateways[g];
        let had_socket = gw.peer.take().is_some() || gw.state == GatewayState::Connecting;
        gw.tip = None;
        gw.undelivered = None;
        gw.ping_sent_ms = None;
        if had_socket {
            self.actions.push_back(Action::Close { gateway: g });
        }
        if self.ancestors.is_some_and(|(a, _)| a == g) || self.asked == Some(g) {
            self.ancestors = None;
            self.held.clear();
            self.deferred.clear();
        }
        match why {
            Drop::Bad(reason) => {
                self.events.push_back(Event::Rejected {
                    gateway: g,
                    reason: reason.clone(),
                });
                self.set_state(g, GatewayState::Bad, Some(reason), now_ms);
            }
            Drop::Transient(reason) => {
                let gw = &mut self.gateways[g];
                gw.failures += 1;
                let after_ms = backoff_ms(gw.failures, random);
                self.counters.reconnects += 1;
                self.actions.push_back(Action::Connect {
                    gateway: g,
                    after_ms,
                });
                self.set_state(g, GatewayState::BackingOff, Some(reason), now_ms);
            }
        }
        if self.source == Some(g) || self.asked == Some(g) {
            self.retarget();
        }
    }

    /// Gateway `g` did not deliver the tip it announced: the target is not set from that
    /// announcement again, the other gateways' tips are considered, and a gateway that
    /// keeps announcing what it does not deliver is marked bad.
    fn undeliver(&mut self, g: usize, now_ms: f64, random: f64) {
        let gw = &mut self.gateways[g];
        gw.undelivered = gw.tip.map(|(_, h, _)| h.block_hash());
        gw.undelivered_count += 1;
        if gw.undelivered_count >= MAX_UNDELIVERED {
            let why =
                format!("the gateway announced {MAX_UNDELIVERED} chain tips it did not deliver");
            self.drop_gateway(g, Drop::Bad(why), now_ms, random);
            return;
        }
        if self.source == Some(g) {
            self.source = None;
        }
        self.offer_tips();
    }

    /// Offer the connected gateways' announced tips (not the undelivered ones) to the
    /// syncer; the best one becomes the target, its gateway the source.
    fn offer_tips(&mut self) {
        for (g, gw) in self.gateways.iter().enumerate() {
            if let Some((height, header, work)) = gw.tip
                && gw.undelivered != Some(header.block_hash())
                && gw.peer.as_ref().is_some_and(Peer::is_ready)
                && self.syncer.on_tip(height, &header, work)
            {
                self.source = Some(g);
            }
        }
    }

    /// The target's gateway is gone: give up its request and take the best tip the
    /// others announced.
    fn retarget(&mut self) {
        self.syncer.abandon();
        self.syncer.clear_target();
        self.source = None;
        self.asked = None;
        self.offer_tips();
    }

    /// Send the next request if one is due (call after every input).
    pub fn schedule(&mut self) {
        if self.ancestors.is_some() || self.stopped {
            return;
        }
        let Some(g) = self.source else {
            return;
        };
        let Some(peer) = self.gateways[g].peer.as_mut() else {
            return;
        };
        if !peer.is_ready() {
            return;
        }
        if self.committing && self.syncer.uncommitted() >= self.syncer.commit_every {
            // A whole commit waits behind the one in flight: ask for more once it is
            // done, so that what is gathered stays bounded however slow the store is.
            return;
        }
        if let Some((id, n)) = self.syncer.next_request(&mut self.locator) {
            self.asked = Some(g);
            self.answer_heard_ms = self.now_ms;
            if let Err(e) = peer.request(id, n, &self.locator) {
                // Cannot happen on a ready peer; treat as a broken connection.
                self.drop_gateway(g, Drop::Transient(e.to_string()), 0.0, 0.5);
            }
        }
    }

    /// Keepalive, handshake and request deadlines, at `now_ms`; call about once a second.
    pub fn tick(&mut self, now_ms: f64, random: f64) {
        self.now_ms = now_ms;
        if let Some(g) = self.asked
            && self.syncer.in_flight()
            && self.ancestors.is_none()
            && now_ms - self.answer_heard_ms > REQUEST_TIMEOUT_MS
        {
            let why = "the gateway stopped answering our request".to_string();
            self.drop_gateway(g, Drop::Transient(why), now_ms, random);
        }
        for g in 0..self.gateways.len() {
            let gw = &mut self.gateways[g];
            let Some(peer) = gw.peer.as_mut() else {
                continue;
            };
            if !peer.is_ready() {
                if now_ms - gw.since_ms > HANDSHAKE_TIMEOUT_MS {
                    let why = "the handshake did not finish in time".to_string();
                    self.drop_gateway(g, Drop::Transient(why), now_ms, random);
                }
                continue;
            }
            match gw.ping_sent_ms {
                Some(sent) if now_ms - sent > PING_TIMEOUT_MS => {
                    let why = "the gateway stopped answering".to_string();
                    self.drop_gateway(g, Drop::Transient(why), now_ms, random);
                }
                None if now_ms - gw.heard_ms > PING_AFTER_MS && peer.ping().is_ok() => {
                    gw.ping_sent_ms = Some(now_ms);
                }
                _ => {}
            }
        }
    }

    /// A commit to start, if one is due: moved into `into`, validation goes on meanwhile.
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

    /// The commit from [`Self::take_commit`] completed.
    pub fn committed(&mut self, now_ms: f64) {
        self.committing = false;
        self.update_states(now_ms);
    }

    /// An answer's batch starts below the validation window: once nothing is uncommitted,
    /// the shell looks up this parent hash and the batch's headers (80 bytes each) in the
    /// store, and calls [`Self::on_ancestors`].
    pub fn need_ancestors(&self) -> Option<(BlockHash, &[u8])> {
        if self.syncer.uncommitted() > 0 || self.committing {
            return None;
        }
        self.ancestors.map(|(_, hash)| (hash, &self.deferred[..]))
    }

    /// What [`Self::need_ancestors`] asked for: `known`, how many of the batch's first
    /// headers the store holds on the best chain right after the parent, and stored
    /// entries ending at the last of those (or at the parent; up to `WINDOW_LEN`, at least
    /// 2016). `None` if the store does not hold the parent (the gateway's headers link to
    /// nothing we know: it is marked bad).
    pub fn on_ancestors(&mut self, found: Option<(&[Entry], usize)>, now_ms: f64, random: f64) {
        let Some((g, _)) = self.ancestors.take() else {
            return;
        };
        let now = (now_ms / 1000.0) as u64;
        let result = match found {
            Some((entries, known)) => {
                let skip = (known * lightwire_chain::HEADER_LEN).min(self.deferred.len());
                self.syncer
                    .on_ancestors(entries, &self.deferred[skip..], now)
            }
            None => {
                let why = "the gateway sent headers that link to no block on our chain";
                self.drop_gateway(g, Drop::Bad(why.to_string()), now_ms, random);
                return;
            }
        };
        let mut r = take_step(
            result,
            g,
            &[],
            &mut self.syncer,
            &mut self.events,
            &mut self.deferred,
            &mut self.ancestors,
        );
        // Then what was held, until it runs out or needs ancestors again.
        while let Ok(dropped) = r {
            self.dropped_target |= dropped;
            if self.ancestors.is_some() {
                break;
            }
            let Some((id, last, headers)) = self.held.pop_front() else {
                break;
            };
            let result = self.syncer.on_headers(id, &headers, last, now);
            r = take_step(
                result,
                g,
                &headers,
                &mut self.syncer,
                &mut self.events,
                &mut self.deferred,
                &mut self.ancestors,
            );
        }
        if let Ok(dropped) = r {
            self.dropped_target |= dropped;
        }
        if core::mem::take(&mut self.dropped_target) {
            self.undeliver(g, now_ms, random);
        }
        if let Err(e) = r {
            self.drop_gateway(g, e, now_ms, random);
        }
        self.update_states(now_ms);
    }

    /// The application stops: every connection is closed, nothing reconnects.
    pub fn stop(&mut self, now_ms: f64) {
        self.stopped = true;
        for g in 0..self.gateways.len() {
            if self.gateways[g].peer.take().is_some()
                || self.gateways[g].state == GatewayState::Connecting
            {
                self.actions.push_back(Action::Close { gateway: g });
            }
            self.set_state(g, GatewayState::Stopped, None, now_ms);
        }
        self.actions.retain(|a| matches!(a, Action::Close { .. }));
    }

    /// Whether [`Self::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }
}

/// What the engine does with a validated step: a reorg event, ancestors to read (the
/// batch `headers` kept until they come), or the gateway dropped as bad.
#[allow(clippy::too_many_arguments)]
fn take_step(
    result: Result<crate::sync::Step, SyncError>,
    g: usize,
    headers: &[u8],
    syncer: &mut Syncer,
    events: &mut VecDeque<Event>,
    deferred: &mut Vec<u8>,
    ancestors: &mut Option<(usize, BlockHash)>,
) -> Result<bool, Drop> {
    let step = result.map_err(|e| Drop::Bad(e.to_string()))?;
    if let Some((old, fork)) = step.reorg {
        events.push_back(Event::Reorg {
            old_tip: Tip::from(&old),
            new_tip: Tip::from(syncer.tip()),
            depth: old.height - fork,
        });
    }
    if let Some(parent) = step.need_ancestors {
        deferred.clear();
        deferred.extend_from_slice(headers);
        *ancestors = Some((g, parent));
    }
    Ok(step.target_dropped)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    use lightwire_chain::generate::headers_after;
    use lightwire_chain::{REGTEST, U256};
    use lightwire_noise::{FrameReader, Receiver, Responder, Sender};
    use lightwire_wire::{Features, Headers, Init, Message, Networks};

    const NOW_MS: f64 = 2_000_000_000_000.0;

    fn key(b: u8) -> SecretKey {
        SecretKey::from_bytes(&[b; 32]).unwrap()
    }

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
            engine.connecting(g, NOW_MS);
            engine.opened(g, key(0x20 + g as u8), NOW_MS);
            let act_one = engine.transmit(g).unwrap().to_vec();
            engine.sent(g);
            let (awaiting, act_two) = Responder::start(key(0x40 + g as u8), key(0x60))
                .read_act_one(&act_one)
                .unwrap();
            engine.receive(g, &act_two, NOW_MS, 0.5);
            let out = engine.transmit(g).unwrap().to_vec();
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
            let mut body = vec![0u8; 70_000];
            let n = m.encode(&mut body).unwrap();
            let mut frame = vec![0u8; n + 34];
            let len = self.tx.encrypt(&body[..n], &mut frame).unwrap();
            engine.receive(g, &frame[..len], NOW_MS, 0.5);
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
            let Some(out) = engine.transmit(g).map(<[u8]>::to_vec) else {
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
        let mut e = Engine::new(chain, &tip, list, key(1));
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
        e.closed(1, "gone", NOW_MS, 0.5);
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
        e.tick(NOW_MS + 10_000.0, 0.5);
        assert_eq!(e.state(0), GatewayState::Syncing);
        e.tick(NOW_MS + REQUEST_TIMEOUT_MS + 1.0, 0.5);
        assert_eq!(e.state(0), GatewayState::BackingOff);
        assert!(matches!(
            e.poll_action(),
            Some(Action::Close { gateway: 0 })
        ));
        assert!(matches!(
            e.poll_action(),
            Some(Action::Connect { gateway: 0, after_ms }) if after_ms > 0.0
        ));
    }

    #[test]
    fn backoff_doubles_to_a_cap_with_jitter() {
        assert_eq!(backoff_ms(1, 0.0), 250.0);
        assert_eq!(backoff_ms(1, 1.0), 500.0);
        assert_eq!(backoff_ms(2, 0.0), 500.0);
        assert_eq!(backoff_ms(3, 0.5), 1_500.0);
        assert_eq!(backoff_ms(20, 1.0), BACKOFF_MAX_MS);
        assert_eq!(backoff_ms(u32::MAX, 0.0), BACKOFF_MAX_MS / 2.0);
        // Out-of-range randomness is clamped, never a negative or unbounded delay.
        assert_eq!(backoff_ms(1, -3.0), 250.0);
        assert_eq!(backoff_ms(1, 9.0), 500.0);
    }
}
