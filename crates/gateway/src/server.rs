//! The tokio shell around the sans-IO [`Responder`]: accepts connections, reads from each
//! socket into its responder, writes what it gives, sleeps until its next deadline, and
//! lends it frame buffers from the pools. The upgrade, the handshake acts, the WebSocket
//! pongs and closes, keepalive, and every deadline but the socket write's are decided in
//! `lightwire-proto`.
//!
//! One task per connection, one loop per task: read, announce tip changes, run deadlines,
//! and write the responder's next frame when it has one. A frame is written whole before
//! anything else happens; while a client does not read, the write waits (up to
//! [`Limits::write_timeout`]) and nothing more is read from it either, so what a connection
//! holds stays bounded by one frame.
//!
//! What a client can hold of the pools ([`Buffers::Pooled`]) is bounded in time as well as
//! in number (one read and one write buffer per connection), so that clients which trickle
//! or do not read cannot keep the buffers from the others:
//! - a read buffer, while a frame is partly read; each frame must be whole within
//!   [`Limits::frame_timeout`] of its first byte (the responder's deadline,
//!   [`Close::SlowFrame`]);
//! - a write buffer, while the frame sealed in it is written: at most
//!   [`Limits::frame_timeout`] too, when that is shorter than [`Limits::write_timeout`]
//!   (this shell's deadline, [`Close::WriteTimeout`]; see `Io::transmit`); the buffer goes
//!   back once the frame is written, before the connection asks for the next;
//! - a wait for either buffer: at most [`Limits::frame_timeout`] ([`Close::PoolExhausted`]);
//!   the pools lend in the order they were asked.
//!
//! So a client that stops reading gives its write buffer back before the first connection
//! waiting behind it gives up (`tests/serve.rs`,
//! `a_client_that_does_not_read_keeps_a_pooled_write_buffer_no_longer_than_others_wait`).
//! Not yet bounded: many slow connections together (more than about twice `--pool`, so
//! from several addresses under `--max-per-address`) can keep the pool busy in turns and
//! have honest waits end as `pool_exhausted` (they reconnect). A larger `--pool` or a lower
//! `--max-per-address` narrows it; closing a stalled writer whenever others wait would end it.
//!
//! Before any of that, each accepted socket is admitted under the connection caps
//! ([`crate::admission`]) or refused at once: see [`serve`]. Then, with [`Front::tls`], the
//! TLS handshake (within [`Limits::handshake`]); and from a proxy in
//! [`Front::trusted_proxies`], the upgrade request is held until the client it names in
//! `X-Forwarded-For` is admitted under the per-address caps (the responder's
//! `expect_forwarded_for`), so that the caps and the logs see clients, not the proxy.

use std::io::IoSlice;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use lightwire_chain::hash_header_bytes;
use lightwire_noise::SecretKey;
use lightwire_proto::responder::{BufferKind, BufferMode, Transmit};
use lightwire_proto::{Millis, Responder};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, watch};
use tokio::time::{Instant, sleep_until, timeout};

use crate::admission::{Admission, Refusal, Slot, Source, TrustedProxies};
use crate::metrics::Metrics;
use crate::pool::Pool;
use crate::served::{ServedChain, SessionView};
use crate::tls::{Stream, Tls};
use crate::wants::SessionId;

pub use crate::admission::Caps;
pub use lightwire_proto::responder::{Close, Limits};

/// Where connections get their frame buffers (65,569 bytes each, one to read and one to
/// write).
pub enum Buffers {
    /// Each connection owns its two buffers for its whole life.
    Fixed,
    /// Connections borrow from two bounded pools only while a frame is being read or
    /// written (for at most [`Limits::frame_timeout`] each time: see the module's
    /// documentation), and wait when a pool is empty.
    Pooled {
        /// Buffers for frames being received.
        read: Pool,
        /// Buffers for frames being sent.
        write: Pool,
    },
}

impl Buffers {
    /// Buffers in each pool by default: 2 x 256 x 64 KiB = 32 MiB at most.
    pub const DEFAULT_POOL: usize = 256;

    /// Two pools of `max` buffers each.
    pub fn pooled(max: usize) -> Buffers {
        Buffers::Pooled {
            read: Pool::new(max),
            write: Pool::new(max),
        }
    }
}

impl Default for Buffers {
    /// Two pools of [`Buffers::DEFAULT_POOL`] buffers.
    fn default() -> Buffers {
        Buffers::pooled(Buffers::DEFAULT_POOL)
    }
}

/// What stands between a client and the protocol: TLS, and proxies in front.
#[derive(Default)]
pub struct Front {
    /// Serve `wss://` with this certificate (none: `ws://`).
    pub tls: Option<Tls>,
    /// Proxies whose connections name their client in `X-Forwarded-For`.
    pub trusted_proxies: TrustedProxies,
}

/// What every connection shares.
pub struct Shared {
    /// The served chain (read-locked briefly to copy each message's headers).
    pub chain: RwLock<ServedChain>,
    /// The network's chain hash (genesis hash, internal byte order).
    pub chain_hash: [u8; 32],
    /// The gateway's static key.
    pub key: SecretKey,
    /// Bumped whenever the tip changes.
    pub tip_version: watch::Sender<u64>,
    /// Bumped whenever filters fetched from the node arrive: sessions waiting for one try
    /// again.
    pub filter_version: watch::Sender<u64>,
    /// Wakes the task following the node when a session waits for a filter or a block,
    /// or a client's transaction waits to be relayed.
    pub filter_notify: Arc<crate::wake::Wake>,
    /// Clients' transactions for the node (relayed by the chain served when it follows
    /// one: [`ServedChain::serve_relay`]).
    pub relay: Arc<crate::relay::TxRelay>,
    /// The nodes' mempool, served as a digest when followed ([`Builder::mempool`]).
    pub mempool: Arc<crate::mempool::ServedMempool>,
    /// Whether the nodes' mempool is followed.
    pub follows_mempool: bool,
    /// Bumped whenever the mempool followed changes: sessions send their digests.
    pub mempool_version: watch::Sender<u64>,
    /// The zero of the gateway's clock: the time ([`Shared::now`]) given to the state the
    /// tasks share (the mempool, the lead among the nodes followed), so that what one
    /// task stamps another compares on the same clock.
    pub clock: Instant,
    /// Counters.
    pub metrics: Metrics,
    /// Time limits.
    pub limits: Limits,
    /// Frame buffers.
    pub buffers: Buffers,
    /// The connection caps, and the connections they count.
    pub admission: Admission,
    /// TLS and trusted proxies.
    pub front: Front,
    /// Refused connections still being answered (see [`refuse`]).
    refusing: AtomicUsize,
    /// The number of the last connection (what a session waits for is counted by it).
    sessions: AtomicU64,
    /// Whether connections offer `headers_compact` (on unless `--no-compact-headers`,
    /// which makes the gateway answer as one from before it existed).
    pub offer_compact: bool,
}

/// How a gateway serves a chain with its key: everything else has a default, changed by
/// the method of its name. Made by [`Shared::builder`]; ends in [`Builder::build`] (the
/// state for [`serve`], on a listener of the caller's) or [`Builder::spawn`] (listening,
/// in the background).
///
/// ```no_run
/// # async fn f(chain: lightwire_gateway::served::ServedChain, key: lightwire_noise::SecretKey)
/// # -> std::io::Result<()> {
/// use lightwire_gateway::server::{Buffers, Caps, Shared};
/// let gateway = Shared::builder(chain, key)
///     .buffers(Buffers::pooled(16))
///     .caps(Caps::UNLIMITED)
///     .spawn("127.0.0.1:0".parse().unwrap())
///     .await?;
/// # Ok(()) }
/// ```
#[must_use = "a builder does nothing until built or spawned"]
pub struct Builder {
    chain: ServedChain,
    key: SecretKey,
    limits: Limits,
    buffers: Buffers,
    caps: Caps,
    front: Front,
    offer_compact: bool,
    /// The mempool's byte budget, when the nodes' mempool is followed.
    mempool: Option<usize>,
    /// Whether the mempool's transactions are published with their tweaks.
    mempool_tweaks: bool,
}

impl Builder {
    /// Follow the nodes' mempool and serve it as a digest, holding at most `budget` bytes
    /// of transactions [default: not followed]. Only a chain followed from nodes has one.
    pub fn mempool(mut self, budget: usize) -> Builder {
        self.mempool = Some(budget);
        self
    }

    /// Publish each mempool transaction with its silent-payment tweak, worked out first
    /// ([`crate::mempool::ServedMempool::with_tweaks`]) [default: false]: for a gateway
    /// serving tweaks from its node, which runs [`crate::mempool_tweaks::keep`] (without
    /// it, transactions with a taproot output wait [`crate::mempool::TWEAK_WAIT`] and go
    /// without).
    pub fn mempool_tweaks(mut self, on: bool) -> Builder {
        self.mempool_tweaks = on;
        self
    }

    /// Time limits [default: [`Limits::default`]].
    pub fn limits(mut self, limits: Limits) -> Builder {
        self.limits = limits;
        self
    }

    /// Where frame buffers live [default: two pools of [`Buffers::DEFAULT_POOL`]].
    pub fn buffers(mut self, buffers: Buffers) -> Builder {
        self.buffers = buffers;
        self
    }

    /// The connection caps [default: [`Caps::default`]].
    pub fn caps(mut self, caps: Caps) -> Builder {
        self.caps = caps;
        self
    }

    /// Serve `wss://` with this certificate [default: `ws://`].
    pub fn tls(mut self, tls: Tls) -> Builder {
        self.front.tls = Some(tls);
        self
    }

    /// Proxies whose connections name their client in `X-Forwarded-For` [default: none].
    pub fn trusted_proxies(mut self, proxies: TrustedProxies) -> Builder {
        self.front.trusted_proxies = proxies;
        self
    }

    /// Whether connections offer `headers_compact` [default: true; false answers as a
    /// gateway from before it, for testing that clients still work with one].
    pub fn offer_compact_headers(mut self, offer: bool) -> Builder {
        self.offer_compact = offer;
        self
    }

    /// The state every connection shares, for [`serve`].
    pub fn build(self) -> Arc<Shared> {
        let chain_hash = self.chain.params().genesis.block_hash().0;
        let notify = Arc::new(crate::wake::Wake::new());
        Arc::new(Shared {
            chain: RwLock::new(self.chain),
            chain_hash,
            key: self.key,
            tip_version: watch::channel(0).0,
            filter_version: watch::channel(0).0,
            filter_notify: notify.clone(),
            relay: Arc::new(crate::relay::TxRelay::new(notify)),
            mempool: Arc::new({
                let m = crate::mempool::ServedMempool::new(self.mempool.unwrap_or(0));
                if self.mempool_tweaks && self.mempool.is_some() {
                    m.with_tweaks()
                } else {
                    m
                }
            }),
            follows_mempool: self.mempool.is_some(),
            mempool_version: watch::channel(0).0,
            clock: Instant::now(),
            metrics: Metrics::default(),
            limits: self.limits,
            buffers: self.buffers,
            admission: Admission::new(self.caps),
            front: self.front,
            refusing: AtomicUsize::new(0),
            sessions: AtomicU64::new(SessionId::ANONYMOUS.0),
            offer_compact: self.offer_compact,
        })
    }

    /// Listen on `listen` and serve on the current tokio runtime, in the background, until
    /// the [`Running`] returned is dropped.
    pub async fn spawn(self, listen: SocketAddr) -> std::io::Result<Running> {
        let node_id = self.key.public_key();
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let shared = self.build();
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(serve(listener, shared.clone(), stopped));
        Ok(Running {
            addr,
            shared,
            node_id,
            stop,
        })
    }
}

impl Shared {
    /// The gateway's clock now ([`Shared::clock`]).
    pub fn now(&self) -> Millis {
        Millis(u64::try_from(self.clock.elapsed().as_millis()).unwrap_or(u64::MAX))
    }

    /// A session number not given before: what a connection (or the exporter) waits for
    /// from the node is counted by it.
    pub fn next_session(&self) -> SessionId {
        SessionId(self.sessions.fetch_add(1, Relaxed) + 1)
    }

    /// A gateway serving `chain` with `key`, everything else as [`Builder`]'s defaults
    /// until changed there.
    pub fn builder(chain: ServedChain, key: SecretKey) -> Builder {
        Builder {
            chain,
            key,
            limits: Limits::default(),
            buffers: Buffers::default(),
            caps: Caps::default(),
            front: Front::default(),
            offer_compact: true,
            mempool: None,
            mempool_tweaks: false,
        }
    }

    /// The `/metrics` text now.
    pub fn render_metrics(&self) -> String {
        if let Buffers::Pooled { read, write } = &self.buffers {
            let lent = read.lent() + write.lent();
            self.metrics.pool_in_use.store(lent as i64, Relaxed);
        }
        let (height, hash) = self
            .chain
            .read()
            .map(|c| {
                let tip = c.tip();
                (tip.height, hash_header_bytes(&tip.header).to_string())
            })
            .unwrap_or_default();
        let mut out = self.metrics.render(height, &hash);
        if self.follows_mempool {
            let (txs, bytes) = self.mempool.size();
            let served = self.mempool.served();
            out.push_str(&format!(
                "# HELP lightwire_mempool_transactions Unconfirmed transactions of the nodes held for the digest.\n\
                 # TYPE lightwire_mempool_transactions gauge\n\
                 lightwire_mempool_transactions {txs}\n\
                 # HELP lightwire_mempool_bytes Their bytes.\n\
                 # TYPE lightwire_mempool_bytes gauge\n\
                 lightwire_mempool_bytes {bytes}\n\
                 # HELP lightwire_mempool_txs_served_total Transactions handed to clients (get_mempool_tx).\n\
                 # TYPE lightwire_mempool_txs_served_total counter\n\
                 lightwire_mempool_txs_served_total {served}\n"
            ));
            if self.mempool.works_out_tweaks() {
                let (waiting, _) = self.mempool.pending();
                let missed = self.mempool.tweaks_missed();
                out.push_str(&format!(
                    "# HELP lightwire_mempool_tweaks_waiting Transactions waiting for their silent-payment tweaks (or behind one that does), unpublished.\n\
                     # TYPE lightwire_mempool_tweaks_waiting gauge\n\
                     lightwire_mempool_tweaks_waiting {waiting}\n\
                     # HELP lightwire_mempool_tweaks_missed_total Transactions that may have a tweak published without it (the node did not know what they spend, did not answer in time, or too many waited).\n\
                     # TYPE lightwire_mempool_tweaks_missed_total counter\n\
                     lightwire_mempool_tweaks_missed_total {missed}\n"
                ));
            }
        }
        out
    }

    /// The tip height now.
    pub fn tip_height(&self) -> u32 {
        self.chain.read().map(|c| c.tip().height).unwrap_or(0)
    }
}

/// A gateway serving in the background (tests, embedding): stops when dropped.
pub struct Running {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its shared state (chain, counters).
    pub shared: Arc<Shared>,
    /// Its node id.
    pub node_id: lightwire_noise::PublicKey,
    stop: watch::Sender<bool>,
}

impl Running {
    /// Turns true when the gateway stops (for tasks run beside it, like an upstream).
    pub fn stopped(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Accept connections until `shutdown` turns true.
///
/// Each accepted socket is admitted under the caps ([`Shared::admission`]) before anything
/// is spent on it; one over a cap is refused at once (see `refuse`: a 503, then closed,
/// no handshake) and does not count towards the caps. One from a trusted proxy is counted
/// in the total only, until its upgrade request names the client.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>, shutdown: watch::Receiver<bool>) {
    let mut stop = shutdown.clone();
    // After a failed accept (out of descriptors, above all) wait before the next one, 5 ms
    // doubling to 1 s: the listener stays readable while the error lasts, and accepting at
    // once again would spin a core at 100 % while refusing everyone.
    let mut pause = ACCEPT_PAUSE_MIN;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        shared.metrics.accept_errors.fetch_add(1, Relaxed);
                        tracing::warn!(error = %e, pause_ms = pause.as_millis() as u64, "accept failed; pausing");
                        tokio::select! {
                            _ = tokio::time::sleep(pause) => {}
                            _ = stop.changed() => break,
                        }
                        pause = (pause * 2).min(ACCEPT_PAUSE_MAX);
                        continue;
                    }
                };
                pause = ACCEPT_PAUSE_MIN;
                let proxied = shared.front.trusted_proxies.contains(peer.ip());
                let admitted = if proxied {
                    shared.admission.admit_proxied()
                } else {
                    shared.admission.admit(peer.ip())
                };
                let slot = match admitted {
                    Ok(slot) => slot,
                    Err(why) => {
                        refuse(stream, peer, why, &shared);
                        continue;
                    }
                };
                let shared = shared.clone();
                let shutdown = shutdown.clone();
                let accepted = Instant::now();
                tokio::spawn(async move {
                    shared.metrics.connections_total.fetch_add(1, Relaxed);
                    shared.metrics.connections_open.fetch_add(1, Relaxed);
                    let mut conn = Conn { client: None, addr: peer.ip(), slot, proxied };
                    let ended = connection(stream, accepted, &mut conn, &shared, shutdown).await;
                    drop(conn.slot);
                    shared.metrics.connections_open.fetch_sub(1, Relaxed);
                    match ended {
                        Ended::Closed(close, handshaken) => {
                            log_close(peer, conn.client, &close, handshaken, &shared.metrics);
                        }
                        Ended::Refused(why) => {
                            tracing::debug!(%peer, client = ?conn.client, reason = why.label(), "refused: {why}");
                        }
                        Ended::Tls(e) => {
                            shared.metrics.handshake_failed("tls");
                            tracing::info!(%peer, reason = "tls", handshaken = false, "closed: TLS handshake: {e}");
                        }
                    }
                });
            }
            _ = stop.changed() => break,
        }
    }
}

/// The first pause after a failed accept.
const ACCEPT_PAUSE_MIN: Duration = Duration::from_millis(5);
/// The longest.
const ACCEPT_PAUSE_MAX: Duration = Duration::from_secs(1);

/// What a refused client is told, whatever it sent (usually nothing yet: the refusal comes
/// at accept): an HTTP answer to the WebSocket upgrade it is about to send, so that a
/// browser sees the open fail at once rather than a connection that hangs.
fn refusal_response(why: Refusal) -> &'static [u8] {
    match why {
        Refusal::MaxConnections => concat!(
            "HTTP/1.1 503 Service Unavailable\r\n",
            "Retry-After: 10\r\n",
            "Content-Type: text/plain\r\n",
            "Content-Length: 37\r\n",
            "Connection: close\r\n\r\n",
            "too many connections to this gateway\n",
        )
        .as_bytes(),
        Refusal::MaxPerAddress => concat!(
            "HTTP/1.1 503 Service Unavailable\r\n",
            "Retry-After: 10\r\n",
            "Content-Type: text/plain\r\n",
            "Content-Length: 39\r\n",
            "Connection: close\r\n\r\n",
            "too many connections from this address\n",
        )
        .as_bytes(),
        Refusal::MaxNewPerSecond => concat!(
            "HTTP/1.1 503 Service Unavailable\r\n",
            "Retry-After: 1\r\n",
            "Content-Type: text/plain\r\n",
            "Content-Length: 46\r\n",
            "Connection: close\r\n\r\n",
            "connections opened too fast from this address\n",
        )
        .as_bytes(),
    }
}

/// Refused sockets being answered at once; beyond this, a refused socket gets its answer
/// only if the socket takes it without waiting, and is closed at once.
const MAX_REFUSING: usize = 256;

/// How long a refused socket may take to be answered and to close.
const REFUSAL_DEADLINE: Duration = Duration::from_secs(2);

/// Turn a socket away for `why`, at the cost of under a kilobyte for at most
/// [`REFUSAL_DEADLINE`]: no frame buffer, no responder, no slot under the caps.
///
/// With TLS, the socket is closed without an answer: the answer would cost the TLS
/// handshake the caps are there to spare (a browser sees the connection fail at once
/// all the same).
///
/// The answer is written, then the socket shut for writing and what the client sends
/// (its upgrade request) read and dropped until it closes: closing a socket with unread
/// input makes the kernel reset the connection, and a reset can destroy the answer before
/// the client reads it. At most [`MAX_REFUSING`] are answered that way at once, so a flood
/// of refused sockets costs bounded memory and descriptors; the rest get the answer only
/// if it fits without waiting, then a plain close.
fn refuse(stream: TcpStream, peer: SocketAddr, why: Refusal, shared: &Arc<Shared>) {
    shared.metrics.refused(why);
    tracing::debug!(%peer, reason = why.label(), "refused: {why}");
    if shared.front.tls.is_some() {
        return;
    }
    let response = refusal_response(why);
    if shared.refusing.fetch_add(1, Relaxed) >= MAX_REFUSING {
        shared.refusing.fetch_sub(1, Relaxed);
        let _ = stream.try_write(response);
        return;
    }
    let shared = shared.clone();
    tokio::spawn(async move {
        let _ = timeout(REFUSAL_DEADLINE, answer_refused(stream, response)).await;
        shared.refusing.fetch_sub(1, Relaxed);
    });
}

async fn answer_refused(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    response: &[u8],
) -> std::io::Result<()> {
    stream.write_all(response).await?;
    stream.shutdown().await?;
    let mut sink = [0u8; 256];
    while stream.read(&mut sink).await? > 0 {}
    Ok(())
}

fn log_close(
    peer: SocketAddr,
    client: Option<std::net::IpAddr>,
    close: &Close,
    handshaken: bool,
    metrics: &Metrics,
) {
    if handshaken {
        metrics.closed(close.label());
    } else {
        metrics.handshake_failed(close.label());
    }
    let reason = close.label();
    macro_rules! closed {
        ($level:ident) => {
            tracing::$level!(%peer, client = ?client, reason, handshaken, "closed: {close}")
        };
    }
    match close {
        // Routine: the client went away, or the gateway is stopping (which also closes
        // the pools).
        Close::PeerClosed | Close::Shutdown | Close::NoBuffer => closed!(debug),
        // The client's doing, or its network's: expected now and then on a public server.
        Close::HandshakeTimeout
        | Close::Ws(_)
        | Close::Handshake(_)
        | Close::Receive(_)
        | Close::Violation(_)
        | Close::PeerError
        | Close::KeepaliveTimeout
        | Close::SlowFrame
        | Close::WriteTimeout
        | Close::Io(_) => closed!(info),
        // More connections busy than the pools serve: the operator may want a bigger --pool.
        Close::PoolExhausted => closed!(warn),
        // The gateway's own fault: a message planned larger than a frame, or sealing failed.
        Close::Encode(_) | Close::Send(_) => closed!(error),
    }
}

/// Bytes read per socket read: clients send little (requests of ~50 bytes, pings), and
/// this buffer lives as long as the connection.
const READ_BUF: usize = 2048;

/// One accepted connection's place under the caps, and who its client is.
struct Conn {
    /// The client a trusted proxy named, once it has.
    client: Option<std::net::IpAddr>,
    /// The address the connection comes from (the proxy's, when proxied).
    addr: std::net::IpAddr,
    slot: Slot,
    proxied: bool,
}

/// How a connection ended.
enum Ended {
    /// Why, and whether its BOLT 8 handshake had completed.
    Closed(Close, bool),
    /// The client a trusted proxy named was over a per-address cap (answered with a 503).
    Refused(Refusal),
    /// The TLS handshake failed.
    Tls(std::io::Error),
}

/// Serve one connection accepted at `accepted`: TLS first if the gateway serves `wss://`,
/// then the protocol. The handshake deadline counts from `accepted`, TLS included.
async fn connection(
    tcp: TcpStream,
    accepted: Instant,
    conn: &mut Conn,
    shared: &Shared,
    shutdown: watch::Receiver<bool>,
) -> Ended {
    let _ = tcp.set_nodelay(true);
    let stream = match &shared.front.tls {
        None => Stream::Plain(tcp),
        Some(tls) => match timeout(shared.limits.handshake, tls.acceptor().accept(tcp)).await {
            Ok(Ok(s)) => Stream::Tls(Box::new(s)),
            Ok(Err(e)) => return Ended::Tls(e),
            Err(_) => return Ended::Closed(Close::HandshakeTimeout, false),
        },
    };
    let mut handshaken = false;
    match run(stream, accepted, conn, shared, shutdown, &mut handshaken).await {
        Ok(close) => Ended::Closed(close, handshaken),
        Err(why) => Ended::Refused(why),
    }
}

/// The socket side of one connection: the stream, the clock the responder runs on, the
/// permits of the buffers it has on loan, and who it is as the chain counts what its
/// session waits for and relays.
struct Io<'a> {
    stream: Stream,
    shared: &'a Shared,
    start: Instant,
    read_permit: Option<OwnedSemaphorePermit>,
    write_permit: Option<OwnedSemaphorePermit>,
    session: SessionId,
    /// Its client (none yet while a proxy has not named it).
    client: Option<Source>,
}

impl Drop for Io<'_> {
    /// The session is over, however the connection ended: nothing more is fetched for it.
    fn drop(&mut self) {
        if let Ok(chain) = self.shared.chain.read() {
            chain.session_ended(self.session);
        }
    }
}

impl Io<'_> {
    /// The chain as this connection's session reads it.
    fn view<'c>(&self, chain: &'c ServedChain) -> SessionView<'c> {
        chain.for_session(self.session, self.client)
    }

    fn now(&self) -> Millis {
        Millis(u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX))
    }

    fn instant(&self, at: Millis) -> Instant {
        self.start + Duration::from_millis(at.0)
    }

    /// Lend `conn` a buffer of `kind` from its pool, waiting as long as its deadlines
    /// allow (it closes itself when a wait runs past the frame timeout).
    async fn lend(&mut self, conn: &mut Responder, kind: BufferKind) {
        struct Waiting<'a>(&'a Metrics);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.pool_waiting.fetch_sub(1, Relaxed);
            }
        }
        let Buffers::Pooled { read, write } = &self.shared.buffers else {
            return;
        };
        let pool = match kind {
            BufferKind::Read => read,
            BufferKind::Write => write,
        };
        let m = &self.shared.metrics;
        m.pool_waiting.fetch_add(1, Relaxed);
        let _waiting = Waiting(m);
        while conn.poll_close().is_none() {
            let deadline = conn.poll_timeout().map(|t| self.instant(t));
            tokio::select! {
                loan = pool.take() => {
                    let Some(loan) = loan else {
                        conn.close(Close::NoBuffer);
                        return;
                    };
                    let (buf, permit) = loan.into_parts();
                    match kind {
                        BufferKind::Read => self.read_permit = Some(permit),
                        BufferKind::Write => self.write_permit = Some(permit),
                    }
                    let now = self.now();
                    match self.shared.chain.read() {
                        Ok(chain) => conn.give_buffer(now, kind, buf, &self.view(&chain)),
                        Err(_) => conn.close(Close::Shutdown),
                    }
                    return;
                }
                _ = sleep_until(deadline.unwrap_or(self.start)), if deadline.is_some() => {
                    conn.handle_timeout(self.now());
                }
            }
        }
    }

    /// Give back to their pools the buffers `conn` no longer needs.
    fn reclaim(&mut self, conn: &mut Responder) {
        let Buffers::Pooled { read, write } = &self.shared.buffers else {
            return;
        };
        while let Some((kind, buf)) = conn.reclaim() {
            let (pool, permit) = match kind {
                BufferKind::Read => (read, self.read_permit.take()),
                BufferKind::Write => (write, self.write_permit.take()),
            };
            if let Some(permit) = permit {
                pool.give(buf, permit);
            }
        }
    }

    /// Write what `conn` gives next, lending it a write buffer first if it needs one
    /// (in the same turn: a pooled connection writes a frame per turn, as a fixed one).
    ///
    /// A frame in a pooled buffer must be written within the frame timeout when that is
    /// shorter than the write timeout: the connections waiting for a write buffer give up
    /// after the frame timeout, and a client that does not read must not keep the buffer
    /// longer than they wait (with one buffer, it would otherwise have every other
    /// connection closed for [`Close::PoolExhausted`] while it sits on it).
    async fn transmit(&mut self, conn: &mut Responder) -> Result<(), Close> {
        let limits = &self.shared.limits;
        loop {
            let now = self.now();
            let transmit = {
                let chain = self.shared.chain.read().map_err(|_| Close::Shutdown)?;
                conn.poll_transmit(now, &self.view(&chain))
            };
            let written = match transmit {
                None => return Ok(()),
                Some(Transmit::NeedBuffer) => {
                    self.lend(conn, BufferKind::Write).await;
                    if conn.poll_close().is_some() {
                        return Ok(());
                    }
                    continue;
                }
                Some(Transmit::Raw(bytes)) => {
                    let write = async {
                        self.stream.write_all(bytes).await?;
                        self.stream.flush().await
                    };
                    match timeout(limits.write_timeout, write).await {
                        Err(_) => return Err(Close::WriteTimeout),
                        Ok(r) => r?,
                    }
                    bytes.len()
                }
                Some(Transmit::Frame { header, frame }) => {
                    let limit = match self.write_permit {
                        Some(_) => limits.write_timeout.min(limits.frame_timeout),
                        None => limits.write_timeout,
                    };
                    match timeout(limit, write_two(&mut self.stream, header, frame)).await {
                        Err(_) => return Err(Close::WriteTimeout),
                        Ok(r) => r?,
                    }
                    self.shared.metrics.messages_out.fetch_add(1, Relaxed);
                    header.len() + frame.len()
                }
            };
            self.shared
                .metrics
                .bytes_out
                .fetch_add(written as u64, Relaxed);
            conn.transmitted();
            self.reclaim(conn);
            return Ok(());
        }
    }

    /// Take `bytes` read from the socket.
    async fn input(&mut self, conn: &mut Responder, bytes: &mut [u8]) {
        if conn.needs_read_buffer(self.now()) {
            self.lend(conn, BufferKind::Read).await;
            if conn.poll_close().is_some() {
                return;
            }
        }
        let now = self.now();
        match self.shared.chain.read() {
            Ok(chain) => conn.handle_input(now, bytes, &self.view(&chain)),
            Err(_) => conn.close(Close::Shutdown),
        }
        // Bytes that followed act three in the same read wait for a read buffer.
        if conn.has_carry() && conn.needs_read_buffer(self.now()) {
            self.lend(conn, BufferKind::Read).await;
        }
        self.count(conn);
        self.reclaim(conn);
    }

    /// Add what `conn` counted to the metrics.
    fn count(&self, conn: &mut Responder) {
        let counts = conn.take_counts();
        let m = &self.shared.metrics;
        m.messages_in.fetch_add(counts.messages_in, Relaxed);
        m.headers_served.fetch_add(counts.headers_sent, Relaxed);
    }
}

/// The protocol on one connection, until it closes (`Ok`), or until the client a trusted
/// proxy names is refused under the caps (`Err`, after answering it).
async fn run(
    stream: Stream,
    accepted: Instant,
    place: &mut Conn,
    shared: &Shared,
    mut shutdown: watch::Receiver<bool>,
    handshaken: &mut bool,
) -> Result<Close, Refusal> {
    let Ok(ephemeral) = SecretKey::random() else {
        return Ok(Close::Io(std::io::ErrorKind::Other));
    };
    let mode = match shared.buffers {
        Buffers::Fixed => BufferMode::Fixed,
        Buffers::Pooled { .. } => BufferMode::Pooled,
    };
    let mut io = Io {
        stream,
        shared,
        start: accepted,
        read_permit: None,
        write_permit: None,
        session: shared.next_session(),
        client: (!place.proxied).then(|| Source::from(place.addr)),
    };
    // Created at the accept (time 0 on its clock): its handshake deadline includes TLS.
    let mut conn = Responder::new(
        Millis(0),
        shared.key.clone(),
        ephemeral,
        shared.chain_hash,
        shared.limits,
        mode,
    );
    conn.offer_compact_headers(shared.offer_compact);
    if place.proxied {
        conn.expect_forwarded_for();
    }
    let mut tips = shared.tip_version.subscribe();
    let mut filters = shared.filter_version.subscribe();
    let mut mempools = shared.mempool_version.subscribe();
    let mut rbuf = [0u8; READ_BUF];
    loop {
        if let Some(close) = conn.poll_close() {
            return Ok(close.clone());
        }
        let established = conn.is_established();
        let deadline = conn.poll_timeout().map(|t| io.instant(t));
        tokio::select! {
            read = io.stream.read(&mut rbuf[..]), if conn.wants_input() => {
                let n = match read {
                    Ok(0) => return Ok(Close::PeerClosed),
                    Ok(n) => n,
                    Err(e) => return Ok(e.into()),
                };
                shared.metrics.bytes_in.fetch_add(n as u64, Relaxed);
                io.input(&mut conn, &mut rbuf[..n]).await;
                if let Some(client) = conn.forwarded_client() {
                    place.client = Some(client);
                    io.client = Some(Source::from(client));
                    if let Err(why) = shared.admission.admit_forwarded(&mut place.slot, client) {
                        shared.metrics.refused(why);
                        let answer = answer_refused(&mut io.stream, refusal_response(why));
                        let _ = timeout(REFUSAL_DEADLINE, answer).await;
                        return Err(why);
                    }
                    let now = io.now();
                    match shared.chain.read() {
                        Ok(chain) => conn.release_upgrade(now, &io.view(&chain)),
                        Err(_) => return Ok(Close::Shutdown),
                    }
                    io.count(&mut conn);
                }
                if !established && conn.is_established() {
                    shared.metrics.handshakes_completed.fetch_add(1, Relaxed);
                    *handshaken = true;
                }
            }
            changed = tips.changed(), if established => {
                if changed.is_err() {
                    return Ok(Close::Shutdown);
                }
                conn.tip_changed();
            }
            changed = filters.changed(), if established => {
                if changed.is_err() {
                    return Ok(Close::Shutdown);
                }
                conn.data_arrived();
            }
            changed = mempools.changed(), if established => {
                if changed.is_err() {
                    return Ok(Close::Shutdown);
                }
                conn.mempool_changed();
            }
            _ = sleep_until(deadline.unwrap_or(io.start)), if deadline.is_some() => {
                conn.handle_timeout(io.now());
                io.reclaim(&mut conn);
            }
            _ = shutdown.changed() => return Ok(Close::Shutdown),
            _ = std::future::ready(()), if conn.wants_transmit() => {
                if let Err(e) = io.transmit(&mut conn).await {
                    // A client told why it is being closed need not read it.
                    return Ok(conn.closing().cloned().unwrap_or(e));
                }
                io.count(&mut conn);
            }
        }
    }
}

/// Write `a` then `b` with vectored writes (one syscall when the socket takes both), and
/// flush (TLS keeps the last record otherwise; a socket has nothing to flush).
async fn write_two(stream: &mut Stream, mut a: &[u8], mut b: &[u8]) -> Result<(), Close> {
    while !a.is_empty() || !b.is_empty() {
        let n = stream
            .write_vectored(&[IoSlice::new(a), IoSlice::new(b)])
            .await?;
        if n == 0 {
            return Err(Close::PeerClosed);
        }
        let from_a = n.min(a.len());
        a = &a[from_a..];
        b = &b[n - from_a..];
    }
    stream.flush().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What is not set is the documented default; what is set is kept.
    #[test]
    fn the_builder_keeps_what_is_set_and_defaults_the_rest() {
        let chain = || ServedChain::generate(10, 2_000_000_000).unwrap();
        let key = || SecretKey::from_bytes(&[0x11; 32]).unwrap();
        let default = Shared::builder(chain(), key()).build();
        assert!(default.offer_compact);
        assert!(default.front.tls.is_none());
        assert_eq!(default.admission.caps(), Caps::default());
        let Buffers::Pooled { read, .. } = &default.buffers else {
            panic!("pooled by default");
        };
        assert_eq!(read.max(), Buffers::DEFAULT_POOL);
        let limits = Limits {
            handshake: Duration::from_millis(1),
            ..Limits::default()
        };
        let set = Shared::builder(chain(), key())
            .limits(limits)
            .buffers(Buffers::Fixed)
            .caps(Caps::UNLIMITED)
            .offer_compact_headers(false)
            .build();
        assert!(!set.offer_compact);
        assert!(matches!(set.buffers, Buffers::Fixed));
        assert_eq!(set.admission.caps(), Caps::UNLIMITED);
        assert_eq!(set.limits, limits);
        assert_eq!(
            set.chain_hash,
            lightwire_chain::REGTEST.genesis.block_hash().0
        );
    }

    #[test]
    fn refusal_responses_are_whole_503s() {
        for why in Refusal::ALL {
            let text = std::str::from_utf8(refusal_response(why)).unwrap();
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            assert!(
                head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
                "{head}"
            );
            assert!(head.contains("\r\nRetry-After: "), "{head}");
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .unwrap();
            assert_eq!(length.parse::<usize>().unwrap(), body.len(), "{text}");
        }
    }
}
