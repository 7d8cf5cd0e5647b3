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
//! Filters, blocks and clients' transactions each go through one node at a time, the
//! lead of that [`Role`], so that each comes from a node that serves it (Bitcoin Core with
//! its defaults serves no filters, a pruned one only its last 288 blocks, a `-blocksonly`
//! one no transactions): filters from one that says NODE_COMPACT_FILTERS, blocks from any
//! (a pruned one asked only for its last 288, and below a node of the same height keeping
//! every block), transactions through one whose `version` asks for them. The lead of a role
//! is the node whose tip (as far as its headers showed it) is the highest on the served
//! chain (so one that says it is at genesis and shows no headers holds it only until
//! another shows more), then one that has not answered `notfound` for the blocks asked of
//! it again and again ([`Followers`]); it is asked for nothing above its tip. Only an
//! answer to what was asked counts: `notfound` is believed only for the block asked of the
//! node; one whose `cfheaders` do not answer what was asked or do not follow on from the
//! filter headers held is dropped (Bitcoin Core drops a peer for that; the ones held are
//! never erased by an answer). Requests left unanswered for half the idle time (30 s) are
//! not a fault: Core answers nothing for filters its index has not reached (its index may
//! build for hours) or for a block it has not; the node rests from that role, 30 s doubling
//! to 15 minutes, while another may take it, and the connection stays. When a lead leaves,
//! the served chain moves to a branch it is not on, or another ranks above it, the next one
//! takes over, and the log says so. What a node cannot serve and what would make it (the
//! `bitcoin.conf` lines) is logged at its handshake.
//!
//! The pause before dialling a node again starts over after a connection that served
//! for a while ([`HEALTHY`]): Bitcoin Core drops a peer that relays a transaction with a
//! bad signature (a client's, which the gateway checks only for structure) unless the
//! peer has the `noban` permission, and the gateway is back a second later.
//!
//! The protocol with one node is the sans-IO state machine [`peer::Peer`]; this module is
//! its tokio shell (the socket, the clock, the wake-ups, the pause before dialling again).

mod headers;
mod lead;
pub mod peer;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lightwire_chain::{Chain, ConnectError, Network};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::p2p::P2pError;
use crate::server::Shared;
use peer::{Event, Gateway, Peer, PeerConfig};

pub use lead::Role;
pub use peer::Followers;

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
    /// No handshake within [`peer::HANDSHAKE_TIMEOUT`] (30 s).
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
    /// A `cfheaders` that does not answer what was asked, or does not follow on from the
    /// filter headers held (Bitcoin Core drops a peer for such an answer, and so do we:
    /// another node is asked).
    #[error("the node's filter headers from height {height}: {wrong}")]
    FilterHeaders {
        /// The first height asked for.
        height: u32,
        /// What is wrong with them.
        #[source]
        wrong: WrongFilterHeaders,
    },
    /// The gateway is stopping.
    #[error("the gateway is stopping")]
    Stopping,
}

/// What is wrong with a `cfheaders` answer.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum WrongFilterHeaders {
    /// Its stop hash is not the block asked for (BIP157: the answer names the stop hash of
    /// its request).
    #[error("the stop hash is not the block asked for")]
    WrongStop,
    /// It holds another number of filter hashes than the request covers.
    #[error("{got} filter hashes where {asked} were asked for")]
    WrongCount {
        /// How many the request covers.
        asked: u32,
        /// How many came.
        got: usize,
    },
    /// Its previous filter header is not the one held at the height before: the node's
    /// filter-header chain and the one held (from this node or another) disagree. The
    /// ones held are kept.
    #[error("they do not follow on from the filter header held before them")]
    DoNotFollowOn,
}

/// The wall clock, in seconds since the Unix epoch.
fn unix_time() -> u64 {
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
    let followers = Arc::new(Together {
        followers: Followers::new(chain),
        lead_changed: watch::channel(0).0,
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

/// What the tasks following the nodes share: the state machines' [`Followers`], and the
/// wake-up for the others when one gives the lead up (a `watch`: a task busy at that
/// moment sees it at its next wait, not only those waiting then).
struct Together {
    followers: Followers,
    lead_changed: watch::Sender<u64>,
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

/// Silence after which the node is pinged, and then how long it has to answer.
pub const UPSTREAM_IDLE: Duration = Duration::from_secs(60);

/// How long a connection must have been up after its handshake for the pause before the
/// next one to start over from the first.
pub const HEALTHY: Duration = Duration::from_secs(60);

/// The pause before dialling a node again: 1 s, doubling to 30 s after each connection
/// that ended, from 1 s again after one that was up for [`HEALTHY`]; [`INVALID_PAUSE`]
/// after one whose headers broke a rule or whose `cfheaders` did not answer what was
/// asked.
struct Redial {
    pause: Duration,
}

impl Redial {
    const FIRST: Duration = Duration::from_secs(1);
    const MOST: Duration = Duration::from_secs(30);

    fn new() -> Redial {
        Redial {
            pause: Redial::FIRST,
        }
    }

    /// The pause after a connection that ended for `why`, `healthy` when it had served
    /// for a while first (the pauses start over).
    fn after(&mut self, why: &UpstreamError, healthy: bool) -> Duration {
        if healthy {
            self.pause = Redial::FIRST;
        }
        let wait = match why {
            UpstreamError::Invalid(_) => INVALID_PAUSE,
            UpstreamError::FilterHeaders { wrong, .. }
                if *wrong != WrongFilterHeaders::DoNotFollowOn =>
            {
                INVALID_PAUSE
            }
            _ => self.pause,
        };
        self.pause = (self.pause * 2).min(Redial::MOST);
        wait
    }
}

async fn follow_one(
    node: Node,
    shared: Arc<Shared>,
    together: Arc<Together>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut redial = Redial::new();
    loop {
        let (why, up) = tokio::select! {
            ended = session(node, &shared, &together) => ended,
            _ = shutdown.changed() => return,
        };
        let wait = redial.after(&why, up.is_some_and(|up| up >= HEALTHY));
        match why {
            UpstreamError::Invalid(rule) => tracing::error!(
                upstream = %node.addr,
                "upstream dropped: it sent a header that breaks a rule ({rule}); \
                 not dialled again for {} s",
                wait.as_secs()
            ),
            e @ UpstreamError::FilterHeaders { .. } => tracing::error!(
                upstream = %node.addr,
                "upstream dropped: {e} (the filter headers held are kept); again in {} s",
                wait.as_secs()
            ),
            e => tracing::warn!(
                upstream = %node.addr,
                "upstream: {e}; again in {} s",
                wait.as_secs()
            ),
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// A connection's state machine with what it shares, passing its events on. Dropped, it
/// closes the state machine (out of the lead and of the count of connected nodes),
/// whatever ended the session: the gateway stopping drops it unfinished.
struct Seat<'a> {
    peer: Peer,
    shared: &'a Shared,
    together: &'a Together,
    /// Whether `/metrics` shows the node as connected, and the roles it leads there (what
    /// it shows is made again only when these change: nothing is allocated per message).
    shown: (bool, [bool; 3]),
}

impl<'a> Seat<'a> {
    /// What the state machine is lent.
    fn gateway(shared: &'a Shared, together: &'a Together) -> Gateway<'a> {
        Gateway {
            chain: &shared.chain,
            followers: &together.followers,
            relay: &shared.relay,
            mempool: shared.follows_mempool.then_some(&*shared.mempool),
            unix_time: unix_time(),
        }
    }

    /// Pass the state machine's events on; the reason when it closed.
    fn pass_on(&mut self) -> Option<UpstreamError> {
        // What `/metrics` shows of the node, when it changed (its handshake, a role taken
        // or lost, its close).
        let now = (self.peer.is_established(), self.peer.leading());
        if now != self.shown {
            self.shown = now;
            let addr = self.peer.addr().to_string();
            self.shared.metrics.set_upstream(&addr, self.peer.info());
        }
        while let Some(event) = self.peer.poll_event() {
            let bump = |v: &mut u64| *v = v.wrapping_add(1);
            match event {
                Event::Connected => {}
                Event::TipChanged => self.shared.tip_version.send_modify(bump),
                Event::DataArrived => self.shared.filter_version.send_modify(bump),
                Event::MempoolChanged => self.shared.mempool_version.send_modify(bump),
                Event::LeadFreed => self.together.lead_changed.send_modify(bump),
                Event::Closed(why) => return Some(why),
            }
        }
        None
    }
}

impl Drop for Seat<'_> {
    fn drop(&mut self) {
        let gw = Seat::gateway(self.shared, self.together);
        self.peer.close(&gw, UpstreamError::Stopping);
        let _ = self.pass_on();
        self.shared
            .metrics
            .set_upstream(&self.peer.addr().to_string(), None);
    }
}

/// Bytes read from the node at a time (the state machine keeps what is not a whole
/// message yet).
const READ_BUF: usize = 64 << 10;

/// One connection to the node, until it ends: why, and how long it was up after its
/// handshake (`None`: it never completed one).
async fn session(
    node: Node,
    shared: &Shared,
    together: &Together,
) -> (UpstreamError, Option<Duration>) {
    let connected = async {
        let stream = TcpStream::connect(node.addr).await?;
        stream.set_nodelay(true)?;
        let mut nonce = [0u8; 8];
        getrandom::fill(&mut nonce).map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok::<_, std::io::Error>((stream, u64::from_le_bytes(nonce)))
    };
    let (mut stream, nonce) = match connected.await {
        Ok(c) => c,
        Err(e) => return (e.into(), None),
    };
    // The gateway's clock, not the connection's: the mempool and the lead compare what
    // one connection stamped with what another (or the mempool's tweak task) does.
    let start = shared.clock;
    let now = || shared.now();
    let gateway = || Seat::gateway(shared, together);
    let config = PeerConfig {
        index: node.i,
        addr: node.addr,
        network: node.network,
        idle: node.idle,
        nonce,
    };
    let mut seat = Seat {
        peer: Peer::new(now(), config, &gateway()),
        shared,
        together,
        shown: (false, [false; 3]),
    };
    let mut wanted = shared.filter_notify.subscribe();
    let mut lead_changed = together.lead_changed.subscribe();
    let mut buf = vec![0u8; READ_BUF];
    let mut established: Option<Instant> = None;
    loop {
        if established.is_none() && seat.peer.is_established() {
            established = Some(Instant::now());
        }
        if let Some(why) = seat.pass_on() {
            return (why, established.map(|at| at.elapsed()));
        }
        if let Some(bytes) = seat.peer.poll_transmit() {
            let n = bytes.len();
            match stream.write_all(bytes).await {
                Ok(()) => seat.peer.transmitted(n),
                Err(e) => seat.peer.close(&gateway(), e.into()),
            }
            continue;
        }
        let deadline = seat
            .peer
            .poll_timeout()
            .map(|t| start + Duration::from_millis(t.0));
        tokio::select! {
            read = stream.read(&mut buf) => match read {
                Ok(0) => seat.peer.close(&gateway(), UpstreamError::Closed),
                Ok(n) => seat.peer.handle_input(now(), &buf[..n], &gateway()),
                Err(e) => seat.peer.close(&gateway(), e.into()),
            },
            // A session waits for a filter or a block, or a client's transaction waits,
            // or the lead is free: ask the node, or pass it on, if it leads.
            _ = wanted.changed() => seat.peer.handle_wake(now(), &gateway()),
            _ = lead_changed.changed() => seat.peer.handle_wake(now(), &gateway()),
            _ = tokio::time::sleep_until(deadline.unwrap_or(start)), if deadline.is_some() => {
                seat.peer.handle_timeout(now(), &gateway());
            }
        }
    }
}

#[cfg(test)]
mod errors {
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

    /// 1 s, doubling to 30 s; a node that broke a rule waits 10 minutes.
    #[test]
    fn the_pause_before_dialling_again() {
        let mut r = Redial::new();
        let pauses: Vec<u64> = (0..7)
            .map(|_| r.after(&UpstreamError::Closed, false).as_secs())
            .collect();
        assert_eq!(pauses, [1, 2, 4, 8, 16, 30, 30]);
        let invalid = UpstreamError::Invalid(ConnectError::BadAncestors);
        assert_eq!(Redial::new().after(&invalid, false), INVALID_PAUSE);
    }

    /// A connection that served for a while and then ended (Bitcoin Core dropping the
    /// gateway over a client's invalid transaction, say) is dialled again after the first
    /// pause, not the longest one the node's earlier failures reached; a node dropped
    /// for breaking a rule still waits its pause.
    #[test]
    fn the_pause_starts_over_after_a_healthy_connection() {
        let mut r = Redial::new();
        for _ in 0..6 {
            r.after(&UpstreamError::Closed, false);
        }
        assert_eq!(r.after(&UpstreamError::Closed, true).as_secs(), 1);
        assert_eq!(r.after(&UpstreamError::Closed, false).as_secs(), 2);
        let invalid = UpstreamError::Invalid(ConnectError::BadAncestors);
        assert_eq!(r.after(&invalid, true), INVALID_PAUSE);
        // An answer that is not one to what was asked is a lie as plain; filter headers
        // that do not follow on from those held may be an honest node's (the held ones
        // came from another), so it is dialled again as after any ending.
        let wrong = |wrong| UpstreamError::FilterHeaders { height: 5, wrong };
        let stop = wrong(WrongFilterHeaders::WrongStop);
        assert_eq!(Redial::new().after(&stop, false), INVALID_PAUSE);
        let disagrees = wrong(WrongFilterHeaders::DoNotFollowOn);
        assert_eq!(Redial::new().after(&disagrees, false), Redial::FIRST);
    }
}
