//! The tokio shell: accepts connections, runs the WebSocket and BOLT 8 responder
//! handshakes, then moves bytes between the socket and the sans-IO [`Session`].
//!
//! One task per connection, one loop per task: read, announce tip changes, keep alive, and
//! write the session's next frame when it has one. A frame is written whole before
//! anything else happens; while a client does not read, the write waits (up to
//! [`Limits::write_timeout`]) and nothing more is read from it either, so what a connection
//! holds stays bounded by one frame.

use std::io::IoSlice;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use core::fmt;
use core::sync::atomic::Ordering::Relaxed;

use lightwire_chain::hash_header_bytes;
use lightwire_noise::{
    ACT_ONE_LEN, ACT_THREE_LEN, AwaitingActOne, AwaitingActThree, FrameBuffer, FrameReader,
    HandshakeError, ReceiveError, Receiver, Responder, SecretKey, SendError, Sender,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, watch};
use tokio::time::{Instant, sleep_until, timeout};

use crate::metrics::Metrics;
use crate::pool::Pool;
use crate::served::ServedChain;
use crate::session::{Received, Session, Violation};
use crate::ws::{self, WsError};

/// Time limits of a connection.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// From accepting the TCP connection to the end of BOLT 8 act three.
    pub handshake: Duration,
    /// Silence after which the gateway pings.
    pub idle_ping: Duration,
    /// How long a ping may go unanswered (by anything) before the gateway closes.
    pub ping_timeout: Duration,
    /// How long one frame may take to be written (a client that does not read).
    pub write_timeout: Duration,
    /// How long a frame may take to arrive once its first byte has (a client that trickles
    /// bytes would otherwise hold a read buffer forever while looking active).
    pub frame_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            handshake: Duration::from_secs(5),
            idle_ping: Duration::from_secs(30),
            ping_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            frame_timeout: Duration::from_secs(10),
        }
    }
}

/// Where connections get their frame buffers (65,569 bytes each, one to read and one to
/// write).
pub enum Buffers {
    /// Each connection owns its two buffers for its whole life.
    Fixed,
    /// Connections borrow from two bounded pools only while a frame is being read or
    /// written, and wait when a pool is empty.
    Pooled {
        /// Buffers for frames being received.
        read: Pool,
        /// Buffers for frames being sent.
        write: Pool,
    },
}

impl Buffers {
    /// Two pools of `max` buffers each.
    pub fn pooled(max: usize) -> Buffers {
        Buffers::Pooled {
            read: Pool::new(max),
            write: Pool::new(max),
        }
    }
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
    /// Counters.
    pub metrics: Metrics,
    /// Time limits.
    pub limits: Limits,
    /// Frame buffers.
    pub buffers: Buffers,
}

impl Shared {
    /// Shared state for serving `chain` with `key`.
    pub fn new(
        chain: ServedChain,
        key: SecretKey,
        limits: Limits,
        buffers: Buffers,
    ) -> Arc<Shared> {
        let chain_hash = chain.params().genesis.block_hash().0;
        Arc::new(Shared {
            chain: RwLock::new(chain),
            chain_hash,
            key,
            tip_version: watch::channel(0).0,
            metrics: Metrics::default(),
            limits,
            buffers,
        })
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
        self.metrics.render(height, &hash)
    }

    /// The tip height now.
    pub fn tip_height(&self) -> u32 {
        self.chain.read().map(|c| c.tip().height).unwrap_or(0)
    }
}

/// Why a connection ended.
#[derive(Debug)]
pub enum Close {
    /// The handshake did not finish in time.
    HandshakeTimeout,
    /// WebSocket rules broken.
    Ws(WsError),
    /// BOLT 8 handshake failed.
    Handshake(HandshakeError),
    /// A frame failed to decrypt, or was too long.
    Receive(ReceiveError),
    /// The client broke a protocol rule (a warning was sent).
    Violation(Violation),
    /// The client closed the WebSocket or the TCP connection.
    PeerClosed,
    /// The client sent `error`.
    PeerError,
    /// No reply to a keepalive ping.
    KeepaliveTimeout,
    /// A frame did not finish arriving in time.
    SlowFrame,
    /// The client did not take a frame in time.
    WriteTimeout,
    /// Socket error.
    Io(std::io::ErrorKind),
    /// Sealing failed (cannot happen with messages under 65,535 bytes).
    Send(SendError),
    /// The gateway is shutting down.
    Shutdown,
    /// A buffer pool is closed (shutting down).
    NoBuffer,
    /// No buffer came free within the frame timeout.
    PoolExhausted,
}

impl Close {
    /// A short label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Close::HandshakeTimeout => "handshake_timeout",
            Close::Ws(_) => "websocket",
            Close::Handshake(_) => "noise_handshake",
            Close::Receive(ReceiveError::Failed) => "receive_failed",
            Close::Receive(_) => "bad_frame",
            Close::Violation(v) => v.label(),
            Close::PeerClosed => "peer_closed",
            Close::PeerError => "peer_error",
            Close::KeepaliveTimeout => "keepalive_timeout",
            Close::SlowFrame => "slow_frame",
            Close::WriteTimeout => "write_timeout",
            Close::Io(_) => "io",
            Close::Send(_) => "send",
            Close::Shutdown => "shutdown",
            Close::NoBuffer => "no_buffer",
            Close::PoolExhausted => "pool_exhausted",
        }
    }
}

impl fmt::Display for Close {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Close::HandshakeTimeout => f.write_str("handshake not finished in time"),
            Close::Ws(e) => write!(f, "websocket: {e}"),
            Close::Handshake(e) => write!(f, "BOLT 8 handshake: {e}"),
            Close::Receive(e) => write!(f, "frame: {e}"),
            Close::Violation(v) => write!(f, "protocol: {v}"),
            Close::PeerClosed => f.write_str("closed by the client"),
            Close::PeerError => f.write_str("the client sent error"),
            Close::KeepaliveTimeout => f.write_str("no answer to a keepalive ping"),
            Close::SlowFrame => f.write_str("a frame took too long to arrive"),
            Close::WriteTimeout => f.write_str("client did not read (write timed out)"),
            Close::Io(k) => write!(f, "socket: {k}"),
            Close::Send(e) => write!(f, "sealing: {e}"),
            Close::Shutdown => f.write_str("gateway shutting down"),
            Close::NoBuffer => f.write_str("no frame buffer (pool closed)"),
            Close::PoolExhausted => f.write_str("no frame buffer came free in time"),
        }
    }
}

impl From<std::io::Error> for Close {
    fn from(e: std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::BrokenPipe => Close::PeerClosed,
            k => Close::Io(k),
        }
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

/// Listen on `listen` and serve `chain` with `key` on the current tokio runtime.
pub async fn spawn(
    listen: SocketAddr,
    chain: ServedChain,
    key: SecretKey,
    limits: Limits,
    buffers: Buffers,
) -> std::io::Result<Running> {
    let node_id = key.public_key();
    let shared = Shared::new(chain, key, limits, buffers);
    let listener = TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(serve(listener, shared.clone(), stopped));
    Ok(Running {
        addr,
        shared,
        node_id,
        stop,
    })
}

/// Accept connections until `shutdown` turns true.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>, shutdown: watch::Receiver<bool>) {
    let mut stop = shutdown.clone();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, peer)) = accepted else { continue };
                let shared = shared.clone();
                let shutdown = shutdown.clone();
                tokio::spawn(async move {
                    shared.metrics.connections_total.fetch_add(1, Relaxed);
                    shared.metrics.connections_open.fetch_add(1, Relaxed);
                    let (close, handshaken) = connection(stream, &shared, shutdown).await;
                    shared.metrics.connections_open.fetch_sub(1, Relaxed);
                    log_close(peer, &close, handshaken, &shared.metrics);
                });
            }
            _ = stop.changed() => break,
        }
    }
}

fn log_close(peer: SocketAddr, close: &Close, handshaken: bool, metrics: &Metrics) {
    if handshaken {
        metrics.closed(close.label());
    } else {
        metrics.handshake_failed(close.label());
    }
    if !matches!(close, Close::PeerClosed | Close::Shutdown) {
        eprintln!("lightwire-gateway: {peer}: closed: {close}");
    }
}

/// Handshake state, then the established session.
enum Phase {
    Http,
    ActOne(AwaitingActOne),
    ActThree(AwaitingActThree),
    Ready(Box<Ready>),
    /// Transitional (a state machine step took the previous phase by value).
    Gone,
}

/// An established connection's transport and protocol state.
struct Ready {
    sender: Sender,
    receiver: Receiver,
    session: Session,
}

/// Bytes read per socket read: clients send little (requests of ~50 bytes, pings), and
/// this buffer lives as long as the connection.
const READ_BUF: usize = 2048;

struct Conn<'a> {
    stream: TcpStream,
    shared: &'a Shared,
    decoder: ws::Decoder,
    phase: Phase,
    /// Handshake bytes collected across WebSocket frames (acts one and three).
    acts: [u8; ACT_THREE_LEN],
    acts_len: usize,
    /// Small frames to write before anything else (act two, WebSocket pongs).
    urgent: [u8; 256],
    urgent_len: usize,
    close_after_urgent: bool,
    /// The frame reader, once the handshake nears its end; in pooled mode only while a
    /// frame is arriving, with the permit of its buffer.
    reader: Option<FrameReader>,
    reader_permit: Option<OwnedSemaphorePermit>,
    /// The frame writer; in pooled mode only while a frame is written.
    writer: Option<FrameBuffer>,
    writer_permit: Option<OwnedSemaphorePermit>,
    /// Pooled: transport bytes that arrived right after act three, before a reader
    /// buffer was borrowed (at most one read's worth).
    carry: Vec<u8>,
    /// Transport messages received so far.
    frames_done: u64,
}

/// Serve one connection; returns why it ended and whether its handshake had completed.
async fn connection(
    stream: TcpStream,
    shared: &Shared,
    shutdown: watch::Receiver<bool>,
) -> (Close, bool) {
    let mut handshaken = false;
    let close = run(stream, shared, shutdown, &mut handshaken).await;
    (close, handshaken)
}

async fn run(
    stream: TcpStream,
    shared: &Shared,
    mut shutdown: watch::Receiver<bool>,
    handshaken: &mut bool,
) -> Close {
    let _ = stream.set_nodelay(true);
    let mut conn = Conn {
        stream,
        shared,
        decoder: ws::Decoder::server(),
        phase: Phase::Http,
        acts: [0; ACT_THREE_LEN],
        acts_len: 0,
        urgent: [0; 256],
        urgent_len: 0,
        close_after_urgent: false,
        reader: None,
        reader_permit: None,
        writer: None,
        writer_permit: None,
        carry: Vec::new(),
        frames_done: 0,
    };
    let mut tips = shared.tip_version.subscribe();
    let limits = shared.limits;
    let handshake_deadline = Instant::now() + limits.handshake;
    let mut idle_deadline = handshake_deadline;
    let mut ping_outstanding = false;
    // When the frame being received must be complete (a partial frame is held).
    let mut frame_deadline: Option<Instant> = None;
    let mut rbuf = [0u8; READ_BUF];
    // Only during the upgrade: on the heap, so that it is not kept with the connection.
    let mut http = Vec::with_capacity(ws::MAX_REQUEST_LEN);

    loop {
        if conn.urgent_len > 0 {
            let n = conn.urgent_len;
            conn.urgent_len = 0;
            let urgent = conn.urgent;
            if let Err(e) = conn.write_raw(&urgent[..n]).await {
                return e;
            }
            if conn.close_after_urgent {
                return Close::PeerClosed;
            }
        }
        let can_write = matches!(&conn.phase, Phase::Ready(r) if r.session.has_output());
        let ready = matches!(conn.phase, Phase::Ready(_));
        tokio::select! {
            read = conn.stream.read(&mut rbuf[..]) => {
                let n = match read {
                    Ok(0) => return Close::PeerClosed,
                    Ok(n) => n,
                    Err(e) => return e.into(),
                };
                shared.metrics.bytes_in.fetch_add(n as u64, Relaxed);
                if let Err(e) = conn.ensure_reader().await {
                    return e;
                }
                let frames_before = conn.frames_done;
                let result = if matches!(conn.phase, Phase::Http) {
                    // Collect the upgrade request; what follows it is WebSocket data.
                    let take = n.min(ws::MAX_REQUEST_LEN - http.len());
                    http.extend_from_slice(&rbuf[..take]);
                    let mut response = [0u8; 256];
                    match ws::server_handshake(&http, &mut response) {
                        Err(e) => return Close::Ws(e),
                        Ok(None) => Ok(()),
                        Ok(Some((consumed, len))) => {
                            if let Err(e) = conn.write_raw(&response[..len]).await {
                                return e;
                            }
                            let Ok(ephemeral) = crate::random_key() else {
                                return Close::Io(std::io::ErrorKind::Other);
                            };
                            conn.phase = Phase::ActOne(Responder::start(shared.key.clone(), ephemeral));
                            let mut rest = std::mem::take(&mut http);
                            let mut result = conn.input(&mut rest[consumed..]);
                            if result.is_ok() && take < n {
                                result = conn.input(&mut rbuf[take..n]);
                            }
                            result
                        }
                    }
                } else {
                    conn.input(&mut rbuf[..n])
                };
                let result = match result {
                    Ok(()) if !conn.carry.is_empty() => conn.take_carry().await,
                    other => other,
                };
                conn.release_reader();
                // A partial frame must complete within the frame timeout of when it began:
                // a read that completed frames and began another starts a new deadline.
                let partial = conn.reader.as_ref().is_some_and(|r| r.buffered() > 0);
                frame_deadline = match frame_deadline {
                    _ if !partial => None,
                    Some(d) if conn.frames_done == frames_before => Some(d),
                    _ => Some(Instant::now() + limits.frame_timeout),
                };
                if !ready && matches!(conn.phase, Phase::Ready(_)) {
                    shared.metrics.handshakes_completed.fetch_add(1, Relaxed);
                    *handshaken = true;
                }
                if let Err(close) = result {
                    if let (Close::Violation(v), Phase::Ready(r)) = (&close, &mut conn.phase) {
                        // Say why (after our init, if it has not gone out yet), then close.
                        r.session.warn(*v);
                        for _ in 0..2 {
                            match timeout(limits.write_timeout, conn.write_next()).await {
                                Ok(Ok(false)) => continue,
                                _ => break,
                            }
                        }
                    }
                    return close;
                }
                // Activity keeps an established connection alive; during the handshake
                // the deadline stays where it was set at accept.
                if matches!(conn.phase, Phase::Ready(_)) {
                    idle_deadline = Instant::now() + limits.idle_ping;
                    ping_outstanding = false;
                }
            }
            changed = tips.changed(), if ready => {
                if changed.is_err() {
                    return Close::Shutdown;
                }
                if let Phase::Ready(r) = &mut conn.phase {
                    r.session.tip_changed();
                }
            }
            _ = sleep_until(frame_deadline.map_or(idle_deadline, |d| d.min(idle_deadline))) => {
                if frame_deadline.is_some_and(|d| d <= Instant::now()) {
                    return Close::SlowFrame;
                }
                if !ready {
                    return Close::HandshakeTimeout;
                }
                if ping_outstanding {
                    return Close::KeepaliveTimeout;
                }
                if let Phase::Ready(r) = &mut conn.phase {
                    r.session.ping();
                }
                ping_outstanding = true;
                idle_deadline = Instant::now() + limits.ping_timeout;
            }
            _ = shutdown.changed() => return Close::Shutdown,
            _ = std::future::ready(()), if can_write => {
                match timeout(limits.write_timeout, conn.write_next()).await {
                    Err(_) => return Close::WriteTimeout,
                    Ok(Err(e)) => return e,
                    Ok(Ok(true)) => return Close::PeerClosed,
                    Ok(Ok(false)) => {}
                }
            }
        }
    }
}

impl Conn<'_> {
    /// Take bytes read from the socket: WebSocket frames, whose payload goes to the
    /// handshake or the transport.
    fn input(&mut self, bytes: &mut [u8]) -> Result<(), Close> {
        let mut at = 0;
        while at < bytes.len() {
            let (n, event) = self.decoder.decode(&mut bytes[at..]).map_err(Close::Ws)?;
            match event {
                Some(ws::Event::Data(range)) => {
                    let (a, b) = (at + range.start, at + range.end);
                    self.data(&bytes[a..b])?;
                }
                Some(ws::Event::Ping) => {
                    let mut pong = [0u8; 127];
                    let len = self.decoder.pong(&mut pong);
                    self.queue_urgent(&pong[..len]);
                }
                Some(ws::Event::Close) => {
                    self.queue_urgent(&ws::CLOSE_FRAME);
                    self.close_after_urgent = true;
                    return Ok(());
                }
                Some(ws::Event::Pong) | None => {}
            }
            at += n;
        }
        Ok(())
    }

    /// Queue a small frame (act two, a WebSocket pong or close) whole, or not at all: a
    /// pong that does not fit is dropped (RFC 6455 lets an endpoint answer only the latest
    /// of several pings), never cut, which would corrupt the stream.
    fn queue_urgent(&mut self, frame: &[u8]) {
        if frame.len() > self.urgent.len() - self.urgent_len {
            return;
        }
        self.urgent[self.urgent_len..self.urgent_len + frame.len()].copy_from_slice(frame);
        self.urgent_len += frame.len();
    }

    /// WebSocket payload bytes, in order.
    fn data(&mut self, mut data: &[u8]) -> Result<(), Close> {
        while !data.is_empty() {
            match std::mem::replace(&mut self.phase, Phase::Gone) {
                Phase::ActOne(state) => {
                    let take = self.fill_act(ACT_ONE_LEN, &mut data);
                    if take {
                        let (next, act_two) = state
                            .read_act_one(&self.acts[..ACT_ONE_LEN])
                            .map_err(Close::Handshake)?;
                        let (h, n) = ws::binary_header(act_two.len());
                        self.queue_urgent(&h[..n]);
                        self.queue_urgent(&act_two);
                        self.acts_len = 0;
                        self.phase = Phase::ActThree(next);
                    } else {
                        self.phase = Phase::ActOne(state);
                    }
                }
                Phase::ActThree(state) => {
                    if self.fill_act(ACT_THREE_LEN, &mut data) {
                        let transport = state
                            .read_act_three(&self.acts[..ACT_THREE_LEN])
                            .map_err(Close::Handshake)?;
                        let (sender, receiver) = transport.split();
                        self.phase = Phase::Ready(Box::new(Ready {
                            sender,
                            receiver,
                            session: Session::new(self.shared.chain_hash),
                        }));
                        if matches!(self.shared.buffers, Buffers::Fixed) {
                            self.reader = Some(FrameReader::new());
                            self.writer = Some(FrameBuffer::new());
                        }
                    } else {
                        self.phase = Phase::ActThree(state);
                    }
                }
                Phase::Ready(mut r) => {
                    let result = match self.reader.as_mut() {
                        Some(reader) => {
                            frames(self.shared, reader, &mut r, data).map(|n| self.frames_done += n)
                        }
                        // Pooled, right after act three: keep the bytes until a buffer is
                        // borrowed (bounded by the read that brought them).
                        None => {
                            self.carry.extend_from_slice(data);
                            Ok(())
                        }
                    };
                    self.phase = Phase::Ready(r);
                    return result;
                }
                Phase::Http | Phase::Gone => return Err(Close::PeerClosed),
            }
        }
        Ok(())
    }

    /// Collect handshake bytes up to `len`; true once there are `len`.
    fn fill_act(&mut self, len: usize, data: &mut &[u8]) -> bool {
        let take = (len - self.acts_len).min(data.len());
        self.acts[self.acts_len..self.acts_len + take].copy_from_slice(&data[..take]);
        self.acts_len += take;
        *data = &data[take..];
        self.acts_len == len
    }

    /// Write the session's next message as one WebSocket frame. Returns whether the
    /// session is done (its warning went out).
    async fn write_next(&mut self) -> Result<bool, Close> {
        if self.writer.is_none()
            && let Buffers::Pooled { write, .. } = &self.shared.buffers
        {
            let loan = self.borrow(write).await?;
            let (buf, permit) = loan.into_parts();
            self.writer = FrameBuffer::with_buffer(buf).ok();
            self.writer_permit = Some(permit);
        }
        let result = self.write_with_writer().await;
        // Pooled: the buffer goes back as soon as its frame is written.
        if let (Some(permit), Buffers::Pooled { write, .. }) =
            (self.writer_permit.take(), &self.shared.buffers)
            && let Some(w) = self.writer.take()
        {
            write.give(w.into_buffer(), permit);
        }
        result
    }

    async fn write_with_writer(&mut self) -> Result<bool, Close> {
        let (Phase::Ready(r), Some(writer)) = (&mut self.phase, self.writer.as_mut()) else {
            return Ok(false);
        };
        let len = {
            let chain = self.shared.chain.read().map_err(|_| Close::Shutdown)?;
            let before = r.session.headers_sent;
            let Some(len) = r
                .session
                .next_message(&chain, writer.body_mut())
                .map_err(|_| Close::Send(SendError::MessageTooLong { len: 0 }))?
            else {
                return Ok(r.session.finished());
            };
            self.shared
                .metrics
                .headers_served
                .fetch_add(r.session.headers_sent - before, Relaxed);
            len
        };
        let done = r.session.finished();
        let frame = writer.seal(&mut r.sender, len).map_err(Close::Send)?;
        let (h, hn) = ws::binary_header(frame.len());
        write_two(&mut self.stream, &h[..hn], frame).await?;
        self.shared.metrics.messages_out.fetch_add(1, Relaxed);
        self.shared
            .metrics
            .bytes_out
            .fetch_add((hn + frame.len()) as u64, Relaxed);
        Ok(done)
    }

    /// Borrow a buffer from `pool`, counting the wait; a connection that waits longer
    /// than the frame timeout is closed (the pools are exhausted: it cannot be served).
    async fn borrow(&self, pool: &Pool) -> Result<crate::pool::Loan, Close> {
        struct Waiting<'a>(&'a Metrics);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.pool_waiting.fetch_sub(1, Relaxed);
            }
        }
        let m = &self.shared.metrics;
        m.pool_waiting.fetch_add(1, Relaxed);
        let _waiting = Waiting(m);
        match timeout(self.shared.limits.frame_timeout, pool.take()).await {
            Ok(Some(loan)) => Ok(loan),
            Ok(None) => Err(Close::NoBuffer),
            Err(_) => Err(Close::PoolExhausted),
        }
    }

    /// Pooled: once the transport is up, borrow a reader's buffer before input is
    /// processed. (During the handshake none is held: bytes that follow act three in the
    /// same read are carried until one is borrowed.)
    async fn ensure_reader(&mut self) -> Result<(), Close> {
        if self.reader.is_some() || !matches!(self.phase, Phase::Ready(_)) {
            return Ok(());
        }
        if let Buffers::Pooled { read, .. } = &self.shared.buffers {
            let (buf, permit) = self.borrow(read).await?.into_parts();
            self.reader = FrameReader::with_buffer(buf).ok();
            self.reader_permit = Some(permit);
        }
        Ok(())
    }

    /// Pooled: borrow a reader and feed it the bytes carried from the handshake's read.
    async fn take_carry(&mut self) -> Result<(), Close> {
        self.ensure_reader().await?;
        // Freed afterwards, not kept: it is needed once per connection.
        let carry = std::mem::take(&mut self.carry);
        self.data(&carry)
    }

    /// Pooled: give the reader's buffer back when no frame is half read.
    fn release_reader(&mut self) {
        let Buffers::Pooled { read, .. } = &self.shared.buffers else {
            return;
        };
        if !matches!(self.phase, Phase::Ready(_)) {
            return;
        }
        if let (Some(reader), Some(permit)) = (self.reader.take(), self.reader_permit.take()) {
            match reader.release() {
                Ok(buf) => read.give(buf, permit),
                Err(reader) => {
                    self.reader = Some(reader);
                    self.reader_permit = Some(permit);
                }
            }
        }
    }

    async fn write_raw(&mut self, bytes: &[u8]) -> Result<(), Close> {
        match timeout(
            self.shared.limits.write_timeout,
            self.stream.write_all(bytes),
        )
        .await
        {
            Err(_) => Err(Close::WriteTimeout),
            Ok(r) => {
                r?;
                self.shared
                    .metrics
                    .bytes_out
                    .fetch_add(bytes.len() as u64, Relaxed);
                Ok(())
            }
        }
    }
}

/// Transport bytes: decrypt frames, hand each message to the session.
fn frames(
    shared: &Shared,
    reader: &mut FrameReader,
    r: &mut Ready,
    mut data: &[u8],
) -> Result<u64, Close> {
    let mut done = 0;
    while !data.is_empty() {
        let (taken, message) = reader.read(&mut r.receiver, data).map_err(Close::Receive)?;
        data = &data[taken..];
        if let Some(message) = message {
            done += 1;
            shared.metrics.messages_in.fetch_add(1, Relaxed);
            let chain = shared.chain.read().map_err(|_| Close::Shutdown)?;
            match r
                .session
                .receive(message, &chain)
                .map_err(Close::Violation)?
            {
                Received::Ok => {}
                Received::PeerError => return Err(Close::PeerError),
            }
        }
    }
    Ok(done)
}

/// Write `a` then `b` with vectored writes (one syscall when the socket takes both).
async fn write_two(stream: &mut TcpStream, mut a: &[u8], mut b: &[u8]) -> Result<(), Close> {
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
    Ok(())
}
