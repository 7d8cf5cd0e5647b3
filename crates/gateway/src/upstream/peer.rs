//! One connection to a Bitcoin node, sans-IO: the state machine that follows it over P2P.
//!
//! It takes the node's bytes and the time ([`Peer::handle_input`]), the end of the stream
//! ([`Peer::close`]), wake-ups ([`Peer::handle_wake`]: a session waits for a filter or a
//! block, a client's transaction waits, or the lead is free) and its deadlines
//! ([`Peer::poll_timeout`], [`Peer::handle_timeout`]); it gives the bytes to write
//! ([`Peer::poll_transmit`]) and what the shell must pass on ([`Peer::poll_event`]: a new
//! tip or data for the client sessions, the lead given up, the end). It owns no socket,
//! timer or task: the tokio shell ([`super`]) does the I/O, and the tests drive it on a
//! virtual clock with fake nodes.
//!
//! What the connections to every node share (the validation state, who leads, the served
//! chain, the relay queue) is lent to each call as a [`Gateway`]. The time is a plain
//! [`Millis`] on the shell's monotonic clock; the wall clock, which only the rule against
//! headers from the future and our `version` read, comes in [`Gateway::unix_time`].

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError, RwLock};
use std::time::Duration;

use lightwire_chain::{Chain, Header, Network};
use lightwire_proto::Millis;

use super::UpstreamError;
use super::headers::{Next, getheaders, take_headers};
use super::lead::{Candidacy, Place, Role};
use crate::mempool::ServedMempool;
use crate::p2p;
use crate::relay::TxRelay;
use crate::served::ServedChain;

/// How long the node has for its `version` and `verack` after the connection is made.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// What a node's connection reads and changes beyond itself, lent to each call.
pub struct Gateway<'a> {
    /// The chain served to clients, with its filters and blocks.
    pub chain: &'a RwLock<ServedChain>,
    /// What the connections to every node share.
    pub followers: &'a Followers,
    /// Clients' transactions for the node.
    pub relay: &'a TxRelay,
    /// The mempool followed for the digest, if it is.
    pub mempool: Option<&'a ServedMempool>,
    /// The wall clock now, in seconds since the Unix epoch.
    pub unix_time: u64,
}

/// What the connections to every node share: one validation state, so that whatever any
/// node sends is validated against the same chain (the gateway serves the valid chain
/// with the most work among them), the node that leads (fetches filters and blocks and
/// relays transactions for everyone), and how many nodes completed their handshake.
///
/// The lead goes by what a node can deliver: the node highest on the served chain leads
/// (one can be asked for nothing above its height), and among those as high, one that
/// has not said `notfound` for the blocks asked again and again. The lead keeps it until
/// another ranks strictly above it (no change among equals, so that requests in flight
/// are not dropped for nothing), it may no longer lead, or it goes.
pub struct Followers {
    /// The validation state of the served chain's tip, and the latest lesser branch.
    chain: Mutex<Chain>,
    /// Who leads, and what each node's connection last said of its place.
    lead: Mutex<Lead>,
    /// Nodes that completed the handshake (the relay is told under this lock, so that it
    /// never says "none" while one is connected).
    connected: Mutex<usize>,
}

impl Followers {
    /// Nothing connected yet, validating with `chain` (the validation state of the served
    /// chain's tip).
    pub fn new(chain: Chain) -> Followers {
        Followers {
            chain: Mutex::new(chain),
            lead: Mutex::new(Lead::default()),
            connected: Mutex::new(0),
        }
    }

    /// The node that leads `role` now, if any.
    pub fn lead(&self, role: Role) -> Option<usize> {
        self.lead
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .node[role as usize]
    }

    /// Nodes that completed their handshake and are still connected.
    pub fn connected(&self) -> usize {
        *self
            .connected
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The validation state (locked for as long as the guard lives).
    pub(super) fn validation(&self) -> std::sync::MutexGuard<'_, Chain> {
        self.chain.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Which roles node `i`, whose place is now `candidacy`, leads (by [`Role`]; see the
    /// type's documentation for who does); the second value says a lead changed hands
    /// (the others are to be woken). The relay is told whether a node takes clients'
    /// transactions, under the same lock, so that it never says "relayed" while none
    /// does.
    pub(super) fn leads(
        &self,
        i: usize,
        candidacy: Candidacy,
        relay: &TxRelay,
    ) -> ([bool; 3], bool) {
        let mut lead = self.lead.lock().unwrap_or_else(PoisonError::into_inner);
        lead.candidates.insert(i, candidacy);
        let changed = lead.choose();
        relay.set_connected(lead.node[Role::Transactions as usize].is_some());
        (lead.node.map(|n| n == Some(i)), changed)
    }

    /// Node `i` is gone: whether it freed a lead.
    fn leave(&self, i: usize, relay: &TxRelay) -> bool {
        let mut lead = self.lead.lock().unwrap_or_else(PoisonError::into_inner);
        lead.candidates.remove(&i);
        let mut freed = false;
        for n in &mut lead.node {
            if *n == Some(i) {
                *n = None;
                freed = true;
            }
        }
        relay.set_connected(lead.node[Role::Transactions as usize].is_some());
        freed
    }

    /// Count a node in (`+1`) or out (`-1`).
    fn count(&self, up: bool) {
        let mut n = self
            .connected
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *n = if up { *n + 1 } else { n.saturating_sub(1) };
    }
}

/// Who leads each role, and what each node's connection last said of its place.
#[derive(Default)]
struct Lead {
    node: [Option<usize>; 3],
    candidates: BTreeMap<usize, Candidacy>,
}

impl Lead {
    /// For each role, keep its lead or hand it to the node ranking strictly above it (the
    /// lowest index among equals); whether any changed hands.
    fn choose(&mut self) -> bool {
        let mut changed = false;
        for role in Role::ALL {
            let rank = |n: &usize| self.candidates.get(n).and_then(|c| c.rank(role));
            let best = self
                .candidates
                .iter()
                .filter_map(|(n, c)| Some((c.rank(role)?, std::cmp::Reverse(*n))))
                .max();
            let slot = self.node[role as usize];
            let keep = slot
                .and_then(|l| Some((l, rank(&l)?)))
                .filter(|(_, r)| best.is_none_or(|(b, _)| b <= *r));
            let next = keep.map(|(l, _)| l).or(best.map(|(_, n)| n.0));
            changed |= next != slot;
            self.node[role as usize] = next;
        }
        changed
    }
}

/// What the shell must pass on.
#[derive(Debug)]
pub enum Event {
    /// The handshake completed.
    Connected,
    /// The served chain's tip changed, or its filter headers reached it: announce it to
    /// the client sessions.
    TipChanged,
    /// Filters or a block arrived, or the node said it has not a block: the sessions
    /// waiting for one try again.
    DataArrived,
    /// The mempool followed changed: the sessions send their digests.
    MempoolChanged,
    /// The lead changed hands through this node (it gave the lead up, took it, or handed
    /// it to a node ranking above it): wake the other nodes' connections
    /// ([`Peer::handle_wake`]), so that the one leading now asks for what is waited for
    /// and the one before forgets what it asked.
    LeadFreed,
    /// The connection is over, and why: the shell closes the socket. Nothing more comes.
    Closed(UpstreamError),
}

/// Who the node is among those followed, and how to follow it.
#[derive(Clone, Copy, Debug)]
pub struct PeerConfig {
    /// Its index among the nodes followed (who leads is said by index).
    pub index: usize,
    /// Its address (for the logs).
    pub addr: SocketAddr,
    /// The network (the message magic).
    pub network: Network,
    /// Silence after which it is pinged, and then how long it has to answer; half of it
    /// is how long, as the lead, it may leave requests for data unanswered.
    pub idle: Duration,
    /// Our `version` nonce (random: a node drops a connection to itself by it).
    pub nonce: u64,
}

/// One connection to a node (see the module's documentation).
pub struct Peer {
    config: PeerConfig,
    magic: [u8; 4],
    /// Bytes read and not yet a whole message (at most one message and a read).
    input: Vec<u8>,
    /// Bytes to write.
    out: Vec<u8>,
    /// The headers of the message being handled (kept for its capacity).
    headers: Vec<Header>,
    /// Until when the node has to complete the handshake; `None` once it has.
    handshake_by: Option<Millis>,
    /// When the node last sent anything.
    heard: Millis,
    /// When we pinged it, unanswered since.
    pinged: Option<Millis>,
    /// When it last sent `headers` (or completed the handshake): after the idle time
    /// without, it is asked again (Bitcoin Core announces nothing while in initial block
    /// download).
    headers_heard: Millis,
    /// Counted among the connected nodes (after its `verack`, until closed).
    counted: bool,
    place: Place,
    /// New blocks asked of the node for the mempool (what they mine leaves it).
    mempool_blocks: VecDeque<lightwire_chain::BlockHash>,
    events: VecDeque<Event>,
    closed: bool,
}

/// New blocks asked for the mempool at most: a batch of more headers is a catch-up (what
/// those blocks mined is let go with the rest, by the byte budget and the expiry).
const MEMPOOL_BLOCKS: usize = 6;

impl Peer {
    /// A connection just made at `now`: our `version` is the first thing to write.
    pub fn new(now: Millis, config: PeerConfig, gw: &Gateway<'_>) -> Peer {
        let magic = p2p::magic(config.network);
        let height = gw.followers.validation().tip().height;
        let mut out = Vec::with_capacity(1024);
        p2p::encode(&mut out, magic, "version", |p| {
            p2p::write_version(p, gw.unix_time, config.nonce, height, gw.mempool.is_some())
        });
        Peer {
            config,
            magic,
            input: Vec::new(),
            out,
            headers: Vec::with_capacity(p2p::MAX_HEADERS),
            handshake_by: Some(now + HANDSHAKE_TIMEOUT),
            heard: now,
            pinged: None,
            headers_heard: now,
            counted: false,
            place: Place::new(config.addr, config.idle / 2),
            mempool_blocks: VecDeque::new(),
            events: VecDeque::new(),
            closed: false,
        }
    }

    /// What the node said of itself and the roles it leads, for `/metrics`; `None` before
    /// its handshake and once closed.
    pub fn info(&self) -> Option<crate::metrics::Upstream> {
        let v = self.place.version.filter(|_| self.is_established())?;
        Some(crate::metrics::Upstream {
            agent: self.place.agent.clone(),
            services: v.services,
            relay: v.relay,
            leads: self.place.leading(),
        })
    }

    /// The node's address.
    pub fn addr(&self) -> SocketAddr {
        self.config.addr
    }

    /// The roles it led when last it looked (filters, blocks, clients' transactions).
    pub fn leading(&self) -> [bool; 3] {
        self.place.leading()
    }

    /// Whether the handshake is done (and the connection not closed).
    pub fn is_established(&self) -> bool {
        self.handshake_by.is_none() && !self.closed
    }

    /// Take `bytes` read from the node at `now`.
    pub fn handle_input(&mut self, now: Millis, bytes: &[u8], gw: &Gateway<'_>) {
        if self.closed {
            return;
        }
        self.heard = now;
        self.pinged = None;
        // Taken out while its messages are handled (they borrow it, and change the rest).
        let mut input = std::mem::take(&mut self.input);
        input.extend_from_slice(bytes);
        let mut start = 0;
        let result = loop {
            match p2p::decode(&input[start..], self.magic) {
                Ok(Some((frame, n))) => {
                    start += n;
                    if let Err(e) = self.message(now, frame.command, frame.payload, gw) {
                        break Err(e);
                    }
                    if self.is_established() {
                        self.serve(now, gw);
                    }
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(UpstreamError::from(e)),
            }
        };
        input.drain(..start);
        self.input = input;
        match result {
            Ok(()) => self.check_overdue(now, gw),
            Err(e) => self.close(gw, e),
        }
    }

    /// Something the lead may have to do (see the module's documentation): ask the node
    /// for it, or pass it on, if this node leads, or take the lead if it is free.
    pub fn handle_wake(&mut self, now: Millis, gw: &Gateway<'_>) {
        if self.is_established() {
            self.serve(now, gw);
        }
    }

    /// The deadlines due at `now`: the handshake's, the ping's, the lead's requests'.
    pub fn handle_timeout(&mut self, now: Millis, gw: &Gateway<'_>) {
        if self.closed {
            return;
        }
        if let Some(by) = self.handshake_by {
            if now >= by {
                self.close(gw, UpstreamError::HandshakeTimeout);
            }
            return;
        }
        match self.pinged {
            Some(at) if now >= at + self.config.idle => {
                return self.close(gw, UpstreamError::Silent);
            }
            None if now >= self.heard + self.config.idle => {
                // Silent for a while: a ping it must answer (BIP 31 pong).
                let nonce = self.config.nonce.to_le_bytes();
                p2p::encode(&mut self.out, self.magic, "ping", |p| {
                    p.extend_from_slice(&nonce)
                });
                self.pinged = Some(now);
            }
            _ => {}
        }
        self.place.ask_back(&mut self.out, self.magic, now);
        if now >= self.headers_heard + self.config.idle {
            // No headers for the idle time: asked again, once per idle time.
            getheaders(&mut self.out, self.magic, gw, None);
            self.headers_heard = now;
        }
        if self.place.due(now) {
            // It may no longer lead (then nothing of ours is awaited): ask first.
            self.serve(now, gw);
        }
        self.check_overdue(now, gw);
    }

    /// The next deadline, if any.
    pub fn poll_timeout(&self) -> Option<Millis> {
        if self.closed {
            return None;
        }
        if let Some(by) = self.handshake_by {
            return Some(by);
        }
        let silence = match self.pinged {
            Some(at) => at + self.config.idle,
            None => self.heard + self.config.idle,
        };
        let due = silence.min(self.headers_heard + self.config.idle);
        Some(self.place.deadline().map_or(due, |d| d.min(due)))
    }

    /// The bytes to write to the node next, if any; say how many were written with
    /// [`Self::transmitted`].
    pub fn poll_transmit(&self) -> Option<&[u8]> {
        (!self.closed && !self.out.is_empty()).then_some(&self.out[..])
    }

    /// `n` bytes of [`Self::poll_transmit`]'s were written.
    pub fn transmitted(&mut self, n: usize) {
        self.out.drain(..n.min(self.out.len()));
    }

    /// What the shell must pass on next.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// End the connection for `why` (the node closed it, a socket error, or the shell is
    /// stopping): out of the lead and of the count of connected nodes, and
    /// [`Event::Closed`]. Nothing happens after; a second call does nothing.
    pub fn close(&mut self, gw: &Gateway<'_>, why: UpstreamError) {
        if self.closed {
            return;
        }
        self.closed = true;
        if gw.followers.leave(self.config.index, gw.relay) {
            self.events.push_back(Event::LeadFreed);
        }
        if self.counted {
            self.counted = false;
            gw.followers.count(false);
        }
        self.out.clear();
        self.events.push_back(Event::Closed(why));
    }

    /// One message from the node.
    fn message(
        &mut self,
        now: Millis,
        command: &[u8],
        payload: &[u8],
        gw: &Gateway<'_>,
    ) -> Result<(), UpstreamError> {
        let (magic, out) = (self.magic, &mut self.out);
        match command {
            b"version" => {
                self.place.version = Some(p2p::read_version(payload)?);
                self.place.agent = p2p::read_user_agent(payload).unwrap_or_default();
                p2p::encode(out, magic, "verack", |_| {});
            }
            b"verack" if self.handshake_by.is_some() => {
                self.handshake_by = None;
                self.heard = now;
                self.headers_heard = now;
                self.counted = true;
                gw.followers.count(true);
                self.events.push_back(Event::Connected);
                let v = self.place.version;
                tracing::info!(
                    upstream = %self.config.addr,
                    agent = %self.place.agent,
                    services = format_args!("{:#x}", v.map_or(0, |v| v.services)),
                    relay = v.is_some_and(|v| v.relay),
                    start_height = v.map_or(0, |v| v.start_height),
                    "upstream connected"
                );
                remedies(self.config.addr, v, gw);
                // Announce new blocks with headers (BIP 130), then ask for ours.
                p2p::encode(out, magic, "sendheaders", |_| {});
                getheaders(out, magic, gw, None);
                // Its mempool as it is now (BIP35), where it serves `mempool`.
                let services = self.place.version.map_or(0, |v| v.services);
                if gw.mempool.is_some() && services & p2p::NODE_BLOOM != 0 {
                    p2p::encode(out, magic, "mempool", |_| {});
                }
            }
            b"ping" => {
                p2p::encode(out, magic, "pong", |p| p.extend_from_slice(payload));
            }
            b"feefilter" => {
                let rate = p2p::read_feefilter(payload)?;
                if self.place.feefilter != Some(rate) {
                    tracing::info!(
                        upstream = %self.config.addr,
                        sat_per_kvb = rate,
                        "upstream's fee filter{}",
                        if rate >= super::lead::IBD_FEEFILTER {
                            " (in initial block download: it takes no transactions)"
                        } else {
                            ""
                        }
                    );
                }
                self.place.feefilter = Some(rate);
            }
            b"headers" => {
                self.headers_heard = now;
                self.on_headers(payload, gw)?;
            }
            b"inv" => {
                if p2p::inv_has_block(payload)? {
                    getheaders(out, magic, gw, None);
                }
                if let Some(m) = gw.mempool {
                    let mut announced = Vec::new();
                    p2p::inv_txs(payload, |t| announced.push(t))?;
                    let ask = m.to_ask(&announced, now);
                    // At most 50,000 a message (Bitcoin Core's MAX_INV_SZ).
                    for chunk in ask.chunks(50_000) {
                        p2p::encode(out, magic, "getdata", |p| p2p::write_getdata_txs(p, chunk));
                    }
                }
            }
            b"tx" => {
                if self.place.awaits_txs()
                    && let Ok(tx) = lightwire_primitives::Tx::parse(payload)
                {
                    self.place.on_tx(&tx.txid().0);
                }
                if let Some(m) = gw.mempool
                    && m.add(payload, now)
                {
                    self.events.push_back(Event::MempoolChanged);
                }
            }
            b"cfheaders" | b"cfilter" | b"block" | b"notfound" => {
                let (place, events) = (&mut self.place, &mut self.events);
                if command == b"notfound" {
                    place.on_notfound_txs(payload)?;
                }
                if command == b"block" {
                    mempool_block(&mut self.mempool_blocks, payload, gw, events);
                }
                let (answered, role) = match command {
                    b"cfheaders" => (
                        place.filters.on_cfheaders(gw, payload, events)?,
                        Role::Filters,
                    ),
                    b"cfilter" => (
                        place.filters.on_cfilter(gw, payload, events)?,
                        Role::Filters,
                    ),
                    b"block" => (place.on_block(gw, payload, events)?, Role::Blocks),
                    _ => (place.on_notfound(gw, payload, events)?, Role::Blocks),
                };
                // Only an answer to what was asked moves the lead's deadline on.
                if answered {
                    place.answered(role);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A `headers` message: validated and applied, then more asked for as it says.
    fn on_headers(&mut self, payload: &[u8], gw: &Gateway<'_>) -> Result<(), UpstreamError> {
        self.headers.clear();
        p2p::read_headers(payload, &mut self.headers)?;
        let full = self.headers.len() == p2p::MAX_HEADERS;
        let next = take_headers(gw, &self.headers, &mut self.events)?;
        if next == Next::Wait {
            // Not taken yet: its place stays where its headers taken put it.
            return Ok(());
        }
        self.place.headers(gw, &self.headers);
        // A few new blocks: asked for, for what they mine to leave the mempool.
        if gw.mempool.is_some() && self.headers.len() <= MEMPOOL_BLOCKS {
            for h in &self.headers {
                let hash = h.block_hash();
                if self.mempool_blocks.len() == MEMPOOL_BLOCKS {
                    self.mempool_blocks.pop_front();
                }
                self.mempool_blocks.push_back(hash);
                p2p::encode(&mut self.out, self.magic, "getdata", |p| {
                    p2p::write_getdata_block(p, &hash)
                });
            }
        }
        // After a full batch the next request continues from its last header, so that a
        // node on a lesser branch longer than a batch is walked to its end, not asked
        // from the fork again and again.
        if next == Next::FromServed {
            getheaders(&mut self.out, self.magic, gw, None);
        } else if full {
            let last = self.headers.last().map(Header::block_hash);
            getheaders(&mut self.out, self.magic, gw, last);
        }
        Ok(())
    }

    /// If this node leads, ask it for what the sessions wait for and pass clients'
    /// transactions on; if it may no longer lead, give the lead up.
    fn serve(&mut self, now: Millis, gw: &Gateway<'_>) {
        let (out, events) = (&mut self.out, &mut self.events);
        (self.place).serve(out, self.magic, gw, self.config.index, now, events);
    }

    /// Requests overdue at `now` are given up and the node rests from their role (the
    /// connection stays); a rest over lets it take the role again.
    fn check_overdue(&mut self, now: Millis, gw: &Gateway<'_>) {
        if self.place.due(now) {
            self.place.rest_overdue(now);
            self.serve(now, gw);
        }
    }
}

/// What the gateway cannot do with this node, and what would let it, in the log once at
/// its handshake (Bitcoin Core's defaults serve no filters and no BIP35 `mempool`).
fn remedies(addr: SocketAddr, version: Option<p2p::Version>, gw: &Gateway<'_>) {
    let Some(v) = version else {
        return;
    };
    let serves_filters = gw.chain.read().is_ok_and(|c| c.filters().is_some());
    if serves_filters && v.services & p2p::NODE_COMPACT_FILTERS == 0 {
        tracing::warn!(
            upstream = %addr,
            "upstream serves no compact block filters (NODE_COMPACT_FILTERS): filters come \
             from other nodes only; for Bitcoin Core set blockfilterindex=1 and \
             peerblockfilters=1 in bitcoin.conf, for btcd leave --nocfilters off"
        );
    }
    if gw.mempool.is_some() && v.services & p2p::NODE_BLOOM == 0 {
        tracing::warn!(
            upstream = %addr,
            "upstream does not list its mempool (BIP35 needs NODE_BLOOM): only transactions \
             announced from now on are seen; for Bitcoin Core add \
             whitelist=bloomfilter,noban@<the gateway's address> to bitcoin.conf"
        );
    }
    if !v.relay {
        tracing::warn!(
            upstream = %addr,
            "upstream takes no transactions (its version's relay flag is off: Bitcoin Core \
             with -blocksonly): clients' transactions go through other nodes only"
        );
    }
    if v.is_pruned() {
        tracing::warn!(
            upstream = %addr,
            "upstream is pruned (NODE_NETWORK_LIMITED): asked only for its last 288 blocks"
        );
    }
}

/// A `block` from the node: if it was asked for the mempool (one of `asked`), what it
/// mines leaves the mempool. (The lead may have asked for it too: it is handled there as
/// well.)
fn mempool_block(
    asked: &mut VecDeque<lightwire_chain::BlockHash>,
    payload: &[u8],
    gw: &Gateway<'_>,
    events: &mut VecDeque<Event>,
) {
    let (Some(m), Some(hash)) = (gw.mempool, crate::mempool::block_hash(payload)) else {
        return;
    };
    let Some(i) = asked.iter().position(|h| *h == hash) else {
        return;
    };
    asked.remove(i);
    if m.block(payload) {
        events.push_back(Event::MempoolChanged);
    }
}

#[cfg(test)]
mod tests;
