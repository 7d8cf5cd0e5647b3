//! Following Bitcoin nodes over P2P: version/verack, sendheaders, getheaders/headers,
//! ping/pong. Every header is validated with `lightwire-chain` before the served chain
//! takes it; new tips and reorgs are announced to every connection. On any failure the
//! connection is dropped and made again after a pause (1 s, doubling to 30 s).
//!
//! Several nodes ([`follow_all`], `--upstream` repeated) are followed at once, each by its
//! own task, through one validation state ([`Followers`]): whatever any of them sends is
//! validated against the same chain, so the gateway serves the valid chain with the most
//! work among them (a node on a branch with less work is `Stale` there: kept, not served),
//! and one that goes away or stalls leaves the others serving. A node whose headers break
//! a rule is dropped with the rule in the log, and not dialled again for
//! [`INVALID_PAUSE`]: a liar gets no second hearing soon, an honest node we disagree with
//! (a checkpoint, our bug) is tried again later.
//!
//! Filters, blocks and clients' transactions go through one of them at a time, the lead:
//! the first connected node whose tip (as far as its headers showed it) is on the served
//! chain and which says it serves filters (NODE_COMPACT_FILTERS) when the gateway serves
//! them, asked for nothing above its tip. When it leaves, the served chain moves to a
//! branch it is not on, or it leaves requests unanswered for half the idle time (30 s:
//! its connection is then dropped), the next one takes over.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lightwire_chain::{BlockHash, Chain, ConnectError, Header, MAX_BATCH, Network, Outcome};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::p2p::{self, P2pError};
use crate::server::Shared;

/// Why the upstream connection ended.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// Socket error.
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    /// A malformed message.
    #[error("message: {0}")]
    P2p(#[from] P2pError),
    /// The node sent a header that fails validation (it is on another chain, or broken).
    #[error("invalid header from the node: {0}")]
    Invalid(#[source] ConnectError),
    /// The node closed the connection.
    #[error("closed by the node")]
    Closed,
    /// No handshake within 30 s.
    #[error("no version/verack in time")]
    HandshakeTimeout,
    /// Silent through a ping and its timeout (the node or the path to it is gone).
    #[error("no answer to a ping")]
    Silent,
    /// As the lead, it left requests for filter headers, filters or a block unanswered
    /// for half the idle time ([`UPSTREAM_IDLE`]: 30 s).
    #[error("no answer to requests for filters or a block in time")]
    Unanswered,
    /// A filter whose hash is not the one the node's own filter headers commit to.
    #[error("the node's filter for height {0} does not match its filter header")]
    FilterMismatch(u32),
    /// A block that is not the one asked for.
    #[error(transparent)]
    Block(#[from] crate::blocks::BlockFetchError),
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Follow the node at `addr` until `shutdown` turns true, validating with `chain` (the
/// validation state of the served chain's tip).
pub async fn follow(
    addr: SocketAddr,
    network: Network,
    shared: Arc<Shared>,
    chain: Chain,
    shutdown: watch::Receiver<bool>,
) {
    follow_all(&[addr], network, shared, chain, shutdown).await
}

/// Follow every node of `addrs` until `shutdown` turns true (see the module's
/// documentation).
pub async fn follow_all(
    addrs: &[SocketAddr],
    network: Network,
    shared: Arc<Shared>,
    chain: Chain,
    shutdown: watch::Receiver<bool>,
) {
    follow_all_with(addrs, network, shared, chain, shutdown, UPSTREAM_IDLE).await
}

/// [`follow`], pinging the node after `idle` of silence and reconnecting when it stays
/// silent as long again.
pub async fn follow_with(
    addr: SocketAddr,
    network: Network,
    shared: Arc<Shared>,
    chain: Chain,
    shutdown: watch::Receiver<bool>,
    idle: Duration,
) {
    follow_all_with(&[addr], network, shared, chain, shutdown, idle).await
}

/// [`follow_all`] with [`follow_with`]'s `idle`.
pub async fn follow_all_with(
    addrs: &[SocketAddr],
    network: Network,
    shared: Arc<Shared>,
    chain: Chain,
    shutdown: watch::Receiver<bool>,
    idle: Duration,
) {
    let followers = Arc::new(Followers {
        chain: Mutex::new(chain),
        lead: Mutex::new(None),
        lead_changed: watch::channel(0).0,
        connected: Mutex::new(0),
    });
    let mut tasks = tokio::task::JoinSet::new();
    for (i, addr) in addrs.iter().enumerate() {
        let node = Node {
            i,
            addr: *addr,
            network,
            idle,
        };
        let (shared, followers) = (shared.clone(), followers.clone());
        tasks.spawn(follow_one(node, shared, followers, shutdown.clone()));
    }
    while tasks.join_next().await.is_some() {}
}

/// What the tasks following the nodes share.
pub struct Followers {
    /// The validation state of the served chain's tip, and the latest lesser branch.
    chain: Mutex<Chain>,
    /// The node that fetches filters and blocks and relays transactions (its index).
    lead: Mutex<Option<usize>>,
    /// Bumped when the lead is given up, so that another node's task takes it at once.
    lead_changed: watch::Sender<u64>,
    /// Nodes that completed the handshake (the relay is told under this lock, so that it
    /// never says "none" while one is connected).
    connected: Mutex<usize>,
}

impl Followers {
    /// Whether node `i` is the lead, taking the lead if there is none and it may lead
    /// (`may`: its tip is on the served chain, and it serves filters if the chain does);
    /// one that may no longer gives the lead up.
    fn leads(&self, i: usize, may: bool) -> bool {
        let mut lead = self.lead.lock().unwrap_or_else(PoisonError::into_inner);
        match *lead {
            Some(l) if l == i && !may => {
                *lead = None;
                drop(lead);
                self.give_up();
                false
            }
            Some(l) => l == i,
            None if may => {
                *lead = Some(i);
                true
            }
            None => false,
        }
    }

    /// Node `i` is gone: the lead is free if it had it.
    fn leave(&self, i: usize) {
        let mut lead = self.lead.lock().unwrap_or_else(PoisonError::into_inner);
        if *lead == Some(i) {
            *lead = None;
            drop(lead);
            self.give_up();
        }
    }

    /// Tell the other nodes' tasks that the lead is free (a `watch`: a task busy at this
    /// moment sees it at its next wait, not only those waiting now).
    fn give_up(&self) {
        self.lead_changed.send_modify(|v| *v = v.wrapping_add(1));
    }
}

/// One node to follow.
#[derive(Clone, Copy)]
struct Node {
    i: usize,
    addr: SocketAddr,
    network: Network,
    idle: Duration,
}

/// How long a node whose headers broke a rule is left alone.
pub const INVALID_PAUSE: Duration = Duration::from_secs(600);

async fn follow_one(
    node: Node,
    shared: Arc<Shared>,
    followers: Arc<Followers>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut pause = Duration::from_secs(1);
    loop {
        let result = tokio::select! {
            r = session(node, &shared, &followers) => r,
            _ = shutdown.changed() => return,
        };
        let wait = match result {
            Ok(()) => {
                pause = Duration::from_secs(1);
                pause
            }
            Err(UpstreamError::Invalid(rule)) => {
                tracing::error!(
                    upstream = %node.addr,
                    "upstream dropped: it sent a header that breaks a rule ({rule}); \
                     not dialled again for {} s",
                    INVALID_PAUSE.as_secs()
                );
                INVALID_PAUSE
            }
            Err(e) => {
                tracing::warn!(
                    upstream = %node.addr,
                    "upstream: {e}; again in {} s",
                    pause.as_secs()
                );
                pause
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.changed() => return,
        }
        pause = (pause * 2).min(Duration::from_secs(30));
    }
}

/// A node's place among the followers while its connection lasts: counted as connected
/// once its handshake is done, and out of the lead when the connection ends.
struct Seat<'a> {
    node: Node,
    shared: &'a Shared,
    followers: &'a Followers,
    connected: bool,
}

impl Seat<'_> {
    fn handshake_done(&mut self) {
        if !self.connected {
            self.connected = true;
            let mut n = self
                .followers
                .connected
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            *n += 1;
            self.shared.relay.set_connected(true);
        }
    }
}

impl Drop for Seat<'_> {
    fn drop(&mut self) {
        if self.connected {
            let mut n = self
                .followers
                .connected
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            *n = n.saturating_sub(1);
            self.shared.relay.set_connected(*n > 0);
        }
        self.followers.leave(self.node.i);
    }
}

/// Silence after which the node is pinged, and then how long it has to answer.
pub const UPSTREAM_IDLE: Duration = Duration::from_secs(60);

/// How long the lead may leave its requests for filter headers, filters or a block
/// unanswered (with nothing else of them answered meanwhile) before its connection is
/// dropped and the lead goes to another node: half the idle time, 30 s. A node that
/// answers pings but not these would otherwise hold every client's filters and blocks
/// back.
fn data_deadline(idle: Duration) -> Duration {
    idle / 2
}

/// What the gateway knows of one node's place, for the lead: its tip as far as its
/// headers showed it, its `version`, and its data requests in flight.
struct Place {
    addr: SocketAddr,
    /// The last header it sent; with none yet, the served header at its `version` start
    /// height when it had nothing after our tip (an empty `headers` means its tip is one
    /// of our locator's hashes, and it may be below ours).
    tip: Option<BlockHash>,
    version: Option<p2p::Version>,
    on_best: bool,
    filters: Filters,
    /// The block asked of the node (one at a time).
    block_asked: Option<BlockHash>,
    /// Since when requests are in flight with none answered (since the last answer).
    waiting_since: Option<tokio::time::Instant>,
    data_deadline: Duration,
}

impl Place {
    /// The node's headers `headers` were taken.
    fn headers(&mut self, shared: &Shared, headers: &[Header]) {
        match headers.last() {
            Some(last) => self.tip = Some(last.block_hash()),
            None if self.tip.is_none() => {
                let start = self.version.map_or(0, |v| v.start_height);
                self.tip = shared
                    .chain
                    .read()
                    .ok()
                    .and_then(|c| c.block_hash(c.tip().height.min(start)));
            }
            None => {}
        }
    }

    /// A data request was answered.
    fn answered(&mut self) {
        self.waiting_since = None;
    }

    /// When the requests in flight are overdue (see [`data_deadline`]).
    fn deadline(&self) -> Option<tokio::time::Instant> {
        self.waiting_since.map(|t| t + self.data_deadline)
    }

    /// If this node leads, ask it for what the sessions wait for (up to its height) and
    /// pass clients' transactions on; if it may no longer lead, give the lead up.
    fn serve(
        &mut self,
        out: &mut Vec<u8>,
        magic: [u8; 4],
        shared: &Shared,
        followers: &Followers,
        i: usize,
    ) {
        // The node's height on the served chain, and whether filters are served: one read
        // of the chain per message.
        let (limit, serves_filters) = match shared.chain.read() {
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
        if !followers.leads(i, may) {
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
        self.filters.ask(out, magic, shared, limit);
        ask_block(out, magic, shared, &mut self.block_asked, limit);
        // The clock runs from the last answer (or the first request) while anything is
        // in flight.
        if !self.in_flight() {
            self.waiting_since = None;
        } else if self.waiting_since.is_none() {
            self.waiting_since = Some(tokio::time::Instant::now());
        }
        relay_txs(out, magic, shared);
    }

    fn in_flight(&self) -> bool {
        self.filters.headers_from.is_some()
            || self.filters.fetching.is_some()
            || self.block_asked.is_some()
    }
}

/// One connection to the node.
async fn session(node: Node, shared: &Shared, followers: &Followers) -> Result<(), UpstreamError> {
    let Node {
        i,
        addr,
        network,
        idle,
        ..
    } = node;
    let mut seat = Seat {
        node,
        shared,
        followers,
        connected: false,
    };
    let magic = p2p::magic(network);
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let mut out = Vec::with_capacity(1024);
    let mut nonce = [0u8; 8];
    getrandom::fill(&mut nonce).map_err(|e| std::io::Error::other(e.to_string()))?;
    let height = followers
        .chain
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .tip()
        .height;
    p2p::encode(&mut out, magic, "version", |p| {
        p2p::write_version(p, now(), u64::from_le_bytes(nonce), height)
    });
    stream.write_all(&out).await?;

    let mut buf = vec![0u8; 1 << 20];
    let (mut start, mut end) = (0, 0);
    let mut headers: Vec<Header> = Vec::with_capacity(p2p::MAX_HEADERS);
    let mut place = Place {
        addr,
        tip: None,
        version: None,
        on_best: false,
        filters: Filters::default(),
        block_asked: None,
        waiting_since: None,
        data_deadline: data_deadline(idle),
    };
    let mut lead_changed = followers.lead_changed.subscribe();
    let mut wanted = shared.filter_notify.subscribe();
    let mut handshake_done = false;
    let handshake_deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut pinged = false;
    loop {
        // Decode what is buffered.
        while let Some((frame, n)) = p2p::decode(&buf[start..end], magic)? {
            out.clear();
            match frame.command {
                b"version" => {
                    place.version = Some(p2p::read_version(frame.payload)?);
                    p2p::encode(&mut out, magic, "verack", |_| {});
                }
                b"verack" => {
                    handshake_done = true;
                    seat.handshake_done();
                    tracing::info!(upstream = %addr, "upstream connected");
                    // Announce new blocks with headers (BIP 130), then ask for ours.
                    p2p::encode(&mut out, magic, "sendheaders", |_| {});
                    getheaders(&mut out, magic, shared, None);
                }
                b"ping" => {
                    let payload = frame.payload.to_vec();
                    p2p::encode(&mut out, magic, "pong", |p| p.extend_from_slice(&payload));
                }
                b"headers" => {
                    headers.clear();
                    p2p::read_headers(frame.payload, &mut headers)?;
                    let full = headers.len() == p2p::MAX_HEADERS;
                    let ask_again = take_headers(shared, &followers.chain, &headers)?;
                    place.headers(shared, &headers);
                    // After a full batch the next request continues from its last header,
                    // so that a node on a lesser branch longer than a batch is walked to
                    // its end, not asked from the fork again and again.
                    if ask_again {
                        getheaders(&mut out, magic, shared, None);
                    } else if full {
                        let last = headers.last().map(Header::block_hash);
                        getheaders(&mut out, magic, shared, last);
                    }
                }
                b"inv" if p2p::inv_has_block(frame.payload)? => {
                    getheaders(&mut out, magic, shared, None)
                }
                b"cfheaders" => {
                    place.answered();
                    place.filters.on_cfheaders(shared, frame.payload)?;
                }
                b"cfilter" => {
                    place.answered();
                    place.filters.on_cfilter(shared, frame.payload)?;
                }
                b"block" => {
                    place.answered();
                    on_block(shared, &mut place.block_asked, frame.payload)?;
                }
                b"notfound" => {
                    place.answered();
                    let asked = &mut place.block_asked;
                    p2p::inv_blocks(frame.payload, |hash| {
                        if let Ok(c) = shared.chain.read()
                            && let Some(b) = c.blocks()
                        {
                            b.missing_block(&hash);
                        }
                        if *asked == Some(hash) {
                            *asked = None;
                        }
                    })?;
                    shared.filter_version.send_modify(|v| *v += 1);
                }
                _ => {}
            }
            if handshake_done {
                place.serve(&mut out, magic, shared, followers, i);
            }
            start += n;
            if !out.is_empty() {
                stream.write_all(&out).await?;
            }
        }
        if place
            .deadline()
            .is_some_and(|d| d <= tokio::time::Instant::now())
        {
            return Err(UpstreamError::Unanswered);
        }
        // Keep the unread tail at the front, then read more.
        buf.copy_within(start..end, 0);
        end -= start;
        start = 0;
        if end == buf.len() {
            // A block takes up to 4 MB: the buffer grows to the largest message, no more.
            let largest = p2p::MAX_PAYLOAD + p2p::MESSAGE_HEADER_LEN;
            if buf.len() >= largest {
                return Err(P2pError::TooLarge(end).into());
            }
            buf.resize(largest, 0);
        }
        let read = stream.read(&mut buf[end..]);
        let n = if handshake_done {
            let overdue = place.deadline();
            let woken = tokio::select! {
                r = tokio::time::timeout(idle, read) => Some(r),
                _ = wanted.changed() => None,
                _ = lead_changed.changed() => None,
                _ = tokio::time::sleep_until(overdue.unwrap_or_else(tokio::time::Instant::now)), if overdue.is_some() => None,
            };
            let Some(read) = woken else {
                // A session waits for a filter or a block, or a client's transaction
                // waits, or the lead is free: ask the node, or pass it on, if it leads.
                out.clear();
                place.serve(&mut out, magic, shared, followers, i);
                if !out.is_empty() {
                    stream.write_all(&out).await?;
                }
                continue;
            };
            match read {
                Ok(n) => {
                    pinged = false;
                    n?
                }
                Err(_) if pinged => return Err(UpstreamError::Silent),
                Err(_) => {
                    // Silent for a while: a ping it must answer (BIP 31 pong).
                    out.clear();
                    p2p::encode(&mut out, magic, "ping", |p| p.extend_from_slice(&nonce));
                    stream.write_all(&out).await?;
                    pinged = true;
                    continue;
                }
            }
        } else {
            tokio::time::timeout_at(handshake_deadline, read)
                .await
                .map_err(|_| UpstreamError::HandshakeTimeout)??
        };
        if n == 0 {
            return Err(UpstreamError::Closed);
        }
        end += n;
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
struct Filters {
    /// The first height of the `getcfheaders` in flight.
    headers_from: Option<u32>,
    /// The range of the `getcfilters` in flight.
    fetching: Option<(u32, u32)>,
    hashes: Vec<[u8; 32]>,
}

/// Filters fetched ahead of the one a session waits for.
const FETCH_AHEAD: u32 = 100;

impl Filters {
    /// Ask for what is due, up to `limit` (the node's height): filter headers the chain
    /// lacks, filters sessions wait for.
    fn ask(&mut self, out: &mut Vec<u8>, magic: [u8; 4], shared: &Shared, limit: u32) {
        let Ok(c) = shared.chain.read() else {
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
    fn on_cfheaders(&mut self, shared: &Shared, payload: &[u8]) -> Result<(), UpstreamError> {
        let Some(first) = self.headers_from.take() else {
            return Ok(());
        };
        self.hashes.clear();
        let (stop, prev) = p2p::read_cfheaders(payload, &mut self.hashes)?;
        let Ok(mut c) = shared.chain.write() else {
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
            drop(c);
            shared.tip_version.send_modify(|v| *v += 1);
        }
        Ok(())
    }

    /// A filter from the node: cached if it is the one its filter header commits to.
    fn on_cfilter(&mut self, shared: &Shared, payload: &[u8]) -> Result<(), UpstreamError> {
        let (block, filter) = p2p::read_cfilter(payload)?;
        let Ok(c) = shared.chain.read() else {
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
        shared.filter_version.send_modify(|v| *v += 1);
        Ok(())
    }
}

/// Clients' transactions, as P2P `tx` messages.
fn relay_txs(out: &mut Vec<u8>, magic: [u8; 4], shared: &Shared) {
    for tx in shared.relay.take() {
        p2p::encode(out, magic, "tx", |p| p.extend_from_slice(&tx));
    }
}

/// Ask the node for the block a session waits for, if none is asked already and the node
/// has it (it is at or below `limit`, the node's height).
fn ask_block(
    out: &mut Vec<u8>,
    magic: [u8; 4],
    shared: &Shared,
    asked: &mut Option<BlockHash>,
    limit: u32,
) {
    if asked.is_some() {
        return;
    }
    let Some(hash) = shared.chain.read().ok().and_then(|c| {
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

/// A block from the node: kept for the sessions waiting if it is the one asked for and
/// checks against its header; a block that does not is an error (the connection to the
/// node starts over).
fn on_block(
    shared: &Shared,
    asked: &mut Option<BlockHash>,
    payload: &[u8],
) -> Result<(), UpstreamError> {
    let header: &[u8; 80] = payload
        .get(..80)
        .and_then(|h| h.try_into().ok())
        .ok_or(P2pError::Truncated("block"))?;
    let hash = lightwire_chain::hash_header_bytes(header);
    if *asked != Some(hash) {
        // Not asked for (a block announced unasked): nothing to do.
        return Ok(());
    }
    *asked = None;
    let result = match shared.chain.read() {
        Ok(c) => c.blocks().map_or(Ok(()), |b| b.insert(&hash, payload)),
        Err(_) => Ok(()),
    };
    shared.filter_version.send_modify(|v| *v += 1);
    result.map_err(UpstreamError::from)
}

/// Ask for headers after the served chain's locator, or first after `from` (the last
/// header of the node's previous batch, wherever it is).
fn getheaders(out: &mut Vec<u8>, magic: [u8; 4], shared: &Shared, from: Option<BlockHash>) {
    let mut locator = match shared.chain.read() {
        Ok(c) => c.locator(),
        Err(_) => return,
    };
    if let Some(from) = from
        && locator.first() != Some(&from)
    {
        locator.insert(0, from);
    }
    p2p::encode(out, magic, "getheaders", |p| {
        p2p::write_getheaders(p, &locator, &BlockHash([0; 32]))
    });
}

/// Validate `headers` from a node and apply them to the served chain (the validation
/// state locked throughout, so that it and the served chain move together). Returns
/// whether to ask for headers again from the served chain (their parent was unknown: the
/// node is on a branch we have not seen the start of).
fn take_headers(
    shared: &Shared,
    chain: &Mutex<Chain>,
    headers: &[Header],
) -> Result<bool, UpstreamError> {
    let mut chain = chain.lock().unwrap_or_else(PoisonError::into_inner);
    for piece in headers.chunks(MAX_BATCH) {
        let now = now();
        let mut outcome = chain.connect(piece, now).map_err(UpstreamError::Invalid)?;
        if let Outcome::NeedAncestors { parent } = outcome {
            // Below the validation window: rebuild the ancestors from the served chain.
            let ancestors = shared.chain.read().ok().and_then(|c| {
                let fork = c.height_of(&parent)?;
                c.entries(fork.saturating_sub(MAX_BATCH as u32 - 1), fork)
            });
            let Some(ancestors) = ancestors else {
                return Ok(true);
            };
            outcome = chain
                .connect_branch(&ancestors, piece, now)
                .map_err(UpstreamError::Invalid)?;
        }
        let changed = match shared.chain.write() {
            Ok(mut c) => {
                let had = c.has_min_work();
                let changed = c.apply(&outcome, chain.staged());
                if !had && c.has_min_work() {
                    tracing::info!(
                        height = chain.tip().height,
                        "the chain from the node reached the network's minimum work: serving it"
                    );
                }
                changed
            }
            Err(_) => false,
        };
        if changed {
            if let Outcome::Reorg {
                fork_height,
                old_tip,
            } = outcome
            {
                tracing::info!(
                    "upstream reorg: fork at {fork_height}, old tip {} {}, new tip {} {}",
                    old_tip.height,
                    old_tip.hash,
                    chain.tip().height,
                    chain.tip().hash
                );
            }
            shared.tip_version.send_modify(|v| *v += 1);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::*;

    #[test]
    fn wrapped_errors_are_sources() {
        let err = UpstreamError::from(P2pError::BadChecksum);
        let source = err.source().and_then(|s| s.downcast_ref::<P2pError>());
        assert_eq!(source, Some(&P2pError::BadChecksum));
        assert_eq!(err.to_string(), "message: payload checksum mismatch");

        let err = UpstreamError::Invalid(ConnectError::BadAncestors);
        let source = err.source().and_then(|s| s.downcast_ref::<ConnectError>());
        assert_eq!(source, Some(&ConnectError::BadAncestors));

        let err = UpstreamError::from(std::io::Error::other("reset"));
        assert!(err.source().is_some_and(|s| s.is::<std::io::Error>()));
        assert!(UpstreamError::Closed.source().is_none());
    }
}
