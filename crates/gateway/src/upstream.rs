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
//! chain, asked for nothing above its tip; when it leaves, or the served chain moves to a
//! branch it is not on, the next one takes over.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lightwire_chain::{
    BlockHash, Chain, ConnectError, Header, MAX_BATCH, Network, Outcome, hash_header_bytes,
};
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
        connected: AtomicUsize::new(0),
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
    /// Nodes that completed the handshake.
    connected: AtomicUsize,
}

impl Followers {
    /// Whether node `i` is the lead, taking the lead if there is none and its tip is on the
    /// served chain (`on_best`); one whose tip is no longer on it gives the lead up.
    fn leads(&self, i: usize, on_best: bool, shared: &Shared) -> bool {
        let mut lead = self.lead.lock().unwrap_or_else(PoisonError::into_inner);
        match *lead {
            Some(l) if l == i && !on_best => {
                *lead = None;
                drop(lead);
                // Another may take it now.
                shared.filter_notify.notify_waiters();
                false
            }
            Some(l) => l == i,
            None if on_best => {
                *lead = Some(i);
                true
            }
            None => false,
        }
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
            self.followers.connected.fetch_add(1, Relaxed);
            self.shared.relay.set_connected(true);
        }
    }
}

impl Drop for Seat<'_> {
    fn drop(&mut self) {
        if self.connected && self.followers.connected.fetch_sub(1, Relaxed) == 1 {
            self.shared.relay.set_connected(false);
        }
        let mut lead = self
            .followers
            .lead
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if *lead == Some(self.node.i) {
            *lead = None;
            drop(lead);
            self.shared.filter_notify.notify_waiters();
        }
    }
}

/// Silence after which the node is pinged, and then how long it has to answer.
pub const UPSTREAM_IDLE: Duration = Duration::from_secs(60);

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
    let mut filters = Filters::default();
    // The block asked of the node (one at a time).
    let mut block_asked: Option<BlockHash> = None;
    let mut handshake_done = false;
    let handshake_deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut pinged = false;
    // The node's tip as far as we know: the last header it sent, or the served tip when it
    // had nothing after it. While that is on the served chain, the node may lead, and is
    // asked for filters and blocks up to its height. After a full batch the next request
    // continues from its last header, so that a node on a lesser branch longer than a
    // batch is walked to its end, not asked from the fork again and again.
    let mut node_tip: Option<BlockHash> = None;
    let mut on_best = false;
    loop {
        // Decode what is buffered.
        while let Some((frame, n)) = p2p::decode(&buf[start..end], magic)? {
            out.clear();
            match frame.command {
                b"version" => p2p::encode(&mut out, magic, "verack", |_| {}),
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
                    node_tip = match headers.last() {
                        Some(last) => Some(last.block_hash()),
                        None => shared
                            .chain
                            .read()
                            .ok()
                            .map(|c| hash_header_bytes(&c.tip().header)),
                    };
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
                b"cfheaders" => filters.on_cfheaders(shared, frame.payload)?,
                b"cfilter" => filters.on_cfilter(shared, frame.payload)?,
                b"block" => on_block(shared, &mut block_asked, frame.payload)?,
                b"notfound" => {
                    p2p::inv_blocks(frame.payload, |hash| {
                        if let Ok(c) = shared.chain.read()
                            && let Some(b) = c.blocks()
                        {
                            b.missing_block(&hash);
                        }
                        if block_asked == Some(hash) {
                            block_asked = None;
                        }
                    })?;
                    shared.filter_version.send_modify(|v| *v += 1);
                }
                _ => {}
            }
            let limit = node_height(shared, node_tip);
            if on_best != limit.is_some() {
                on_best = limit.is_some();
                log_place(addr, on_best);
            }
            if let Some(limit) = limit
                && handshake_done
                && followers.leads(i, true, shared)
            {
                filters.ask(&mut out, magic, shared, limit);
                ask_block(&mut out, magic, shared, &mut block_asked, limit);
                relay_txs(&mut out, magic, shared);
            } else {
                followers.leads(i, false, shared);
            }
            start += n;
            if !out.is_empty() {
                stream.write_all(&out).await?;
            }
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
            let woken = tokio::select! {
                r = tokio::time::timeout(idle, read) => Some(r),
                _ = shared.filter_notify.notified() => None,
            };
            let Some(read) = woken else {
                // A session waits for a filter or a block, or a client's transaction
                // waits (or the lead changed): ask the node, or pass it on, if it leads.
                out.clear();
                let limit = node_height(shared, node_tip);
                if let Some(limit) = limit
                    && followers.leads(i, true, shared)
                {
                    filters.ask(&mut out, magic, shared, limit);
                    ask_block(&mut out, magic, shared, &mut block_asked, limit);
                    relay_txs(&mut out, magic, shared);
                } else {
                    followers.leads(i, false, shared);
                }
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

/// The height of `tip` (a node's) on the served chain, if it is on it.
fn node_height(shared: &Shared, tip: Option<BlockHash>) -> Option<u32> {
    let tip = tip?;
    shared.chain.read().ok()?.height_of(&tip)
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
