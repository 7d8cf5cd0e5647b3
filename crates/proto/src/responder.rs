//! The responder's side (a gateway serving one client), sans-IO: the HTTP upgrade, the
//! WebSocket frames, BOLT 8 acts one and three, then the [`Session`] that answers requests,
//! with every deadline on the caller's clock and frame buffers that may be lent by a pool.
//!
//! The shell reads from the socket into [`Responder::handle_input`], writes what
//! [`Responder::poll_transmit`] gives (then calls [`Responder::transmitted`]), sleeps until
//! [`Responder::poll_timeout`] to call [`Responder::handle_timeout`], and closes the socket
//! once [`Responder::poll_close`] says why. In pooled mode it lends a buffer when the
//! connection asks ([`Responder::needs_read_buffer`], [`Transmit::NeedBuffer`]) and takes
//! it back from [`Responder::reclaim`]; a connection that waits longer than the frame
//! timeout for one is closed ([`Close::PoolExhausted`]).
//!
//! What a connection holds stays bounded: one frame being written (the session produces
//! the next message only when asked), one frame being read, 256 bytes of small frames (the
//! upgrade response, act two, WebSocket pongs and close), and during the upgrade the request
//! (at most [`ws::MAX_REQUEST_LEN`]).

use core::time::Duration;

use lightwire_noise::{
    ACT_ONE_LEN, ACT_THREE_LEN, AwaitingActOne, AwaitingActThree, FrameBuffer, FrameReader,
    HandshakeError, ReceiveError, Receiver, SecretKey, SendError, Sender,
};
use lightwire_wire::EncodeError;

use crate::acts::ActBuffer;
use crate::session::{Received, Served, Session, Violation};
use crate::time::{Millis, earliest};
use crate::ws::{self, WsError};

/// Time limits of a connection.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Limits {
    /// From accepting the connection to the end of BOLT 8 act three.
    pub handshake: Duration,
    /// Silence after which the gateway pings.
    pub idle_ping: Duration,
    /// How long a ping may go unanswered (by anything) before the gateway closes.
    pub ping_timeout: Duration,
    /// How long one frame may take to be written (a client that does not read); the
    /// shell enforces it around its socket write. A frame in a buffer lent from a pool is
    /// held no longer than `frame_timeout` (the gateway's shell takes the shorter), so a
    /// client that does not read gives the buffer back before those waiting for it give up.
    pub write_timeout: Duration,
    /// How long a frame may take to arrive once its first byte has (a client that trickles
    /// bytes would otherwise hold a read buffer forever while looking active), and how long
    /// a connection may wait for a pooled buffer.
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

/// Where the connection's frame buffers (65,569 bytes each, one to read and one to write)
/// come from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BufferMode {
    /// The connection owns its two buffers from the end of the handshake on.
    Fixed,
    /// The shell lends buffers only while a frame is being read or written.
    Pooled,
}

/// Which of the two buffers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BufferKind {
    /// For frames being received.
    Read,
    /// For frames being sent.
    Write,
}

/// Why a connection ended.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum Close {
    /// The handshake did not finish in time.
    #[error("handshake not finished in time")]
    HandshakeTimeout,
    /// WebSocket rules broken.
    #[error("websocket: {0}")]
    Ws(#[source] WsError),
    /// BOLT 8 handshake failed.
    #[error("BOLT 8 handshake: {0}")]
    Handshake(#[source] HandshakeError),
    /// A frame failed to decrypt, or was too long.
    #[error("frame: {0}")]
    Receive(#[source] ReceiveError),
    /// The client broke a protocol rule (a warning was sent).
    #[error("protocol: {0}")]
    Violation(#[source] Violation),
    /// The client closed the WebSocket or the connection.
    #[error("closed by the client")]
    PeerClosed,
    /// The client sent `error`.
    #[error("the client sent error")]
    PeerError,
    /// No reply to a keepalive ping.
    #[error("no answer to a keepalive ping")]
    KeepaliveTimeout,
    /// A frame did not finish arriving in time.
    #[error("a frame took too long to arrive")]
    SlowFrame,
    /// The client did not take a frame in time.
    #[error("client did not read (write timed out)")]
    WriteTimeout,
    /// Socket error (its kind).
    #[error("socket: {0}")]
    Io(std::io::ErrorKind),
    /// Encoding a message failed (the session planned more than fits a frame).
    #[error("encoding: {0}")]
    Encode(#[source] EncodeError),
    /// Sealing failed (cannot happen with messages under 65,535 bytes).
    #[error("sealing: {0}")]
    Send(#[source] SendError),
    /// The gateway is shutting down.
    #[error("gateway shutting down")]
    Shutdown,
    /// A buffer pool is closed (shutting down).
    #[error("no frame buffer (pool closed)")]
    NoBuffer,
    /// No buffer came free within the frame timeout.
    #[error("no frame buffer came free in time")]
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
            Close::Encode(_) => "encode",
            Close::Send(_) => "send",
            Close::Shutdown => "shutdown",
            Close::NoBuffer => "no_buffer",
            Close::PoolExhausted => "pool_exhausted",
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

/// What the shell writes next.
#[derive(Debug, PartialEq, Eq)]
pub enum Transmit<'a> {
    /// Small frames to write whole before anything else (the upgrade response, act two,
    /// WebSocket pongs, the close frame).
    Raw(&'a [u8]),
    /// One WebSocket binary message: its header, then the sealed frame.
    Frame {
        /// The WebSocket frame header.
        header: &'a [u8],
        /// The BOLT 8 frame.
        frame: &'a [u8],
    },
    /// A message is due but the connection holds no write buffer: lend one with
    /// [`Responder::give_buffer`] (or wait; [`Responder::poll_timeout`] says how long).
    NeedBuffer,
}

/// Messages received and headers sent since the last [`Responder::take_counts`].
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Counts {
    /// Transport messages received.
    pub messages_in: u64,
    /// Headers written into `headers` messages.
    pub headers_sent: u64,
}

enum Phase {
    /// The upgrade request so far (on the heap only until the upgrade is done), and the
    /// keys for the handshake that starts after it (no key work before a valid upgrade).
    Http {
        request: Vec<u8>,
        keys: (SecretKey, SecretKey),
    },
    ActOne(AwaitingActOne),
    ActThree(AwaitingActThree),
    Ready(Box<Ready>),
    /// Transitional (a state machine step took the previous phase by value), and after
    /// the connection ended.
    Gone,
}

/// An established connection's transport and protocol state.
struct Ready {
    sender: Sender,
    receiver: Receiver,
    session: Session,
}

/// What was handed out by the last [`Responder::poll_transmit`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Out {
    None,
    Urgent,
    Frame { finished: bool },
}

/// One client's connection: see the module documentation.
pub struct Responder {
    /// The limits it needs after the handshake began, in milliseconds (an idle connection
    /// keeps 12 bytes of them, not 80).
    idle_ping_ms: u32,
    ping_timeout_ms: u32,
    frame_timeout_ms: u32,
    buffers: BufferMode,
    chain_hash: [u8; 32],
    /// Whether the session offers `headers_compact`.
    offer_compact: bool,
    decoder: ws::Decoder,
    phase: Phase,
    acts: ActBuffer,
    urgent: [u8; 256],
    urgent_len: usize,
    close_after_urgent: bool,
    reader: Option<FrameReader>,
    writer: Option<FrameBuffer>,
    ws_header: [u8; ws::MAX_HEADER_LEN],
    out: Out,
    /// Pooled: transport bytes that arrived in the same read as act three, before a read
    /// buffer was lent (at most one read's worth, once per connection).
    carry: Vec<u8>,
    handshake_deadline: Millis,
    idle_deadline: Millis,
    ping_outstanding: bool,
    /// When the frame being received must be complete (a partial frame is held).
    frame_deadline: Option<Millis>,
    /// Since when a pooled buffer has been wanted.
    waiting_since: Option<Millis>,
    /// Why the connection ends: set when the reason is known; while `ended` is false its
    /// last words (a `warning`, a close frame) still go out.
    end: Option<Close>,
    ended: bool,
    established: bool,
    counts: Counts,
    /// Whether the upgrade request comes from a proxy that names the client in
    /// `X-Forwarded-For` ([`Responder::expect_forwarded_for`]).
    expect_forwarded: bool,
    /// The client named by a complete upgrade request held for the shell's admission.
    held_for: Option<core::net::IpAddr>,
}

/// Largest carry accepted: the shell reads at most this much at a time after act three.
const MAX_CARRY: usize = 64 * 1024;

impl Responder {
    /// A connection accepted at `now`, for a gateway with static key `key` serving the
    /// chain whose genesis hash is `chain_hash`; `ephemeral` is fresh randomness for its
    /// handshake.
    pub fn new(
        now: Millis,
        key: SecretKey,
        ephemeral: SecretKey,
        chain_hash: [u8; 32],
        limits: Limits,
        buffers: BufferMode,
    ) -> Responder {
        let handshake_deadline = now + limits.handshake;
        let ms = |d: Duration| u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
        Responder {
            idle_ping_ms: ms(limits.idle_ping),
            ping_timeout_ms: ms(limits.ping_timeout),
            frame_timeout_ms: ms(limits.frame_timeout),
            buffers,
            chain_hash,
            offer_compact: true,
            decoder: ws::Decoder::server(),
            phase: Phase::Http {
                request: Vec::with_capacity(ws::MAX_REQUEST_LEN),
                keys: (key, ephemeral),
            },
            acts: ActBuffer::new(),
            urgent: [0; 256],
            urgent_len: 0,
            close_after_urgent: false,
            reader: None,
            writer: None,
            ws_header: [0; ws::MAX_HEADER_LEN],
            out: Out::None,
            carry: Vec::new(),
            handshake_deadline,
            idle_deadline: handshake_deadline,
            ping_outstanding: false,
            frame_deadline: None,
            waiting_since: None,
            end: None,
            ended: false,
            established: false,
            counts: Counts::default(),
            expect_forwarded: false,
            held_for: None,
        }
    }

    /// The connection comes from a proxy the gateway trusts, which names its client in
    /// `X-Forwarded-For` ([`ws::forwarded_for`]); call before any input. Once the upgrade
    /// request is complete it is held, unanswered and with nothing after it read, until
    /// the shell has admitted the client [`Self::forwarded_client`] names
    /// ([`Self::release_upgrade`]) or refused it (it then writes its refusal and drops
    /// the connection). A request that names no client is refused as a bad upgrade
    /// ([`Close::Ws`]), before any key work.
    pub fn expect_forwarded_for(&mut self) {
        self.expect_forwarded = true;
    }

    /// The client a trusted proxy named, while its upgrade request is held (see
    /// [`Self::expect_forwarded_for`]).
    pub fn forwarded_client(&self) -> Option<core::net::IpAddr> {
        self.held_for
    }

    /// Answer the held upgrade request at `now` and go on with what followed it.
    pub fn release_upgrade(&mut self, now: Millis, chain: &impl Served) {
        if self.held_for.take().is_some() {
            self.expect_forwarded = false;
            self.handle_input(now, &mut [], chain);
        }
    }

    /// Whether to offer `headers_compact` to the client (on by default); call before the
    /// handshake ends. Off, the gateway answers as one from before it existed.
    pub fn offer_compact_headers(&mut self, on: bool) {
        self.offer_compact = on;
    }

    /// Where its frame buffers come from.
    pub fn buffer_mode(&self) -> BufferMode {
        self.buffers
    }

    /// Whether the BOLT 8 handshake completed (even if the connection has ended since).
    pub fn is_established(&self) -> bool {
        self.established
    }

    /// Why the connection ended, once nothing more is to be written: close the socket.
    pub fn poll_close(&self) -> Option<&Close> {
        self.end.as_ref().filter(|_| self.ended)
    }

    /// Why the connection is ending while its last words (a `warning`, a close frame)
    /// still go out.
    pub fn closing(&self) -> Option<&Close> {
        self.end.as_ref().filter(|_| !self.ended)
    }

    /// Whether [`Self::poll_transmit`] has something to give (call it when the socket can
    /// take a write).
    pub fn wants_transmit(&self) -> bool {
        if self.out != Out::None || self.ended {
            return false;
        }
        if self.urgent_len > 0 {
            return true;
        }
        !self.close_after_urgent && matches!(&self.phase, Phase::Ready(r) if r.session.has_output())
    }

    /// Whether input is still wanted (not after an error or while a warning goes out).
    pub fn wants_input(&self) -> bool {
        self.end.is_none() && self.held_for.is_none()
    }

    /// End the connection for a reason found by the shell (a socket error, shutdown).
    /// (A reason already known, such as a violation whose warning was going out, is
    /// kept.)
    pub fn close(&mut self, why: Close) {
        self.end.get_or_insert(why);
        self.ended = true;
        self.phase = Phase::Gone;
    }

    /// Messages received and headers sent since the last call.
    pub fn take_counts(&mut self) -> Counts {
        core::mem::take(&mut self.counts)
    }

    /// The served chain's tip changed: announce it at the next request boundary.
    pub fn tip_changed(&mut self) {
        if let Phase::Ready(r) = &mut self.phase {
            r.session.tip_changed();
        }
    }

    /// The served mempool changed: the session sends a digest if its client subscribed.
    pub fn mempool_changed(&mut self) {
        if let Phase::Ready(r) = &mut self.phase {
            r.session.mempool_changed();
        }
    }

    /// A filter or block the session waited for arrived (or was given up): it answers
    /// again.
    pub fn data_arrived(&mut self) {
        if let Phase::Ready(r) = &mut self.phase {
            r.session.data_arrived();
        }
    }

    /// Pooled: whether bytes that followed act three in the same read wait for a read
    /// buffer (then lend one: [`Self::needs_read_buffer`] says so too).
    pub fn has_carry(&self) -> bool {
        !self.carry.is_empty()
    }

    /// Pooled: whether a read buffer must be lent before more input (or the bytes carried
    /// from the handshake's read) can be taken. Starts the wait's clock.
    pub fn needs_read_buffer(&mut self, now: Millis) -> bool {
        let needed = self.buffers == BufferMode::Pooled
            && self.reader.is_none()
            && self.wants_input()
            && matches!(self.phase, Phase::Ready(_));
        if needed {
            self.waiting_since.get_or_insert(now);
        }
        needed
    }

    /// Lend a buffer (of `lightwire_noise::MAX_FRAME_LEN` bytes) of `kind`; bytes carried
    /// from the handshake's read are taken at once.
    pub fn give_buffer(
        &mut self,
        now: Millis,
        kind: BufferKind,
        buf: Box<[u8]>,
        chain: &impl Served,
    ) {
        self.waiting_since = None;
        match kind {
            BufferKind::Read => {
                self.reader = FrameReader::with_buffer(buf).ok();
                if !self.carry.is_empty() {
                    // Freed afterwards, not kept: needed once per connection.
                    let carry = core::mem::take(&mut self.carry);
                    let frames = self.counts.messages_in;
                    let r = self.data(&carry, chain);
                    self.after_input(now, frames, r);
                }
            }
            BufferKind::Write => self.writer = FrameBuffer::with_buffer(buf).ok(),
        }
    }

    /// Pooled: a buffer the connection no longer needs (a read buffer when no frame is
    /// half read, a write buffer once its frame was written), to give back to its pool.
    pub fn reclaim(&mut self) -> Option<(BufferKind, Box<[u8]>)> {
        if self.buffers != BufferMode::Pooled
            || !matches!(self.phase, Phase::Ready(_) | Phase::Gone)
        {
            return None;
        }
        if self.out == Out::None
            && let Some(w) = self.writer.take()
        {
            return Some((BufferKind::Write, w.into_buffer()));
        }
        let reader = self.reader.take()?;
        match reader.release() {
            Ok(buf) => Some((BufferKind::Read, buf)),
            // Closed with a frame half read: the buffer goes with the connection (its
            // loan ends when the shell drops it; a pool allocates another on demand).
            Err(_) if self.ended => None,
            Err(reader) => {
                self.reader = Some(reader);
                None
            }
        }
    }

    /// Bytes read from the socket at `now` (WebSocket payload is unmasked in place).
    pub fn handle_input(&mut self, now: Millis, bytes: &mut [u8], chain: &impl Served) {
        if !self.wants_input() {
            return;
        }
        let frames = self.counts.messages_in;
        let r = if let Phase::Http { request, .. } = &mut self.phase {
            // Collect the upgrade request; what follows it is WebSocket data.
            let take = bytes
                .len()
                .min(ws::MAX_REQUEST_LEN.saturating_sub(request.len()));
            request.extend_from_slice(&bytes[..take]);
            let mut response = [0u8; 256];
            match ws::server_handshake(request, &mut response) {
                Err(e) => Err(Close::Ws(e)),
                Ok(None) => Ok(()),
                Ok(Some(_)) if self.expect_forwarded => {
                    // Hold it with what followed it in this read (at most one read).
                    let rest = &bytes[take..];
                    match ws::forwarded_for(request) {
                        Ok(_) if rest.len() > MAX_CARRY => Err(Close::Ws(WsError::RequestTooLong)),
                        Ok(client) => {
                            request.extend_from_slice(rest);
                            self.held_for = Some(client);
                            Ok(())
                        }
                        Err(e) => Err(Close::Ws(e)),
                    }
                }
                Ok(Some((consumed, len))) => {
                    let mut rest = core::mem::take(request);
                    self.queue_urgent(&response[..len]);
                    self.upgraded();
                    let r = self.input(&mut rest[consumed..], chain);
                    if r.is_ok() && take < bytes.len() {
                        self.input(&mut bytes[take..], chain)
                    } else {
                        r
                    }
                }
            }
        } else {
            self.input(bytes, chain)
        };
        self.after_input(now, frames, r);
    }

    fn upgraded(&mut self) {
        if let Phase::Http { keys, .. } = core::mem::replace(&mut self.phase, Phase::Gone) {
            let (key, ephemeral) = keys;
            self.phase = Phase::ActOne(lightwire_noise::Responder::start(key, ephemeral));
        }
    }

    /// Deadlines after input: activity keeps an established connection alive (during the
    /// handshake the deadline stays where it was set at accept), and a partial frame must
    /// complete within the frame timeout of when it began.
    fn after_input(&mut self, now: Millis, frames_before: u64, r: Result<(), Close>) {
        if let Err(close) = r {
            match (&close, &mut self.phase) {
                (Close::Violation(v), Phase::Ready(ready)) => {
                    // Say why (after our init, if it has not gone out yet), then close.
                    ready.session.warn(*v);
                    self.end = Some(close);
                }
                _ => self.close(close),
            }
            return;
        }
        let partial = self.reader.as_ref().is_some_and(|r| r.buffered() > 0);
        self.frame_deadline = match self.frame_deadline {
            _ if !partial => None,
            Some(d) if self.counts.messages_in == frames_before => Some(d),
            _ => Some(now + ms(self.frame_timeout_ms)),
        };
        if matches!(self.phase, Phase::Ready(_)) {
            self.idle_deadline = now + ms(self.idle_ping_ms);
            self.ping_outstanding = false;
        }
    }

    /// WebSocket frames, whose payload goes to the handshake or the transport.
    fn input(&mut self, bytes: &mut [u8], chain: &impl Served) -> Result<(), Close> {
        let mut at = 0;
        while at < bytes.len() {
            let (n, event) = self.decoder.decode(&mut bytes[at..]).map_err(Close::Ws)?;
            match event {
                Some(ws::Event::Data(range)) => {
                    let (a, b) = (at + range.start, at + range.end);
                    self.data(&bytes[a..b], chain)?;
                }
                Some(ws::Event::Ping) => {
                    let mut pong = [0u8; 127];
                    let len = self.decoder.pong(&mut pong);
                    self.queue_urgent(&pong[..len]);
                }
                Some(ws::Event::Close) => {
                    self.queue_urgent(&ws::CLOSE_FRAME);
                    self.close_after_urgent = true;
                    self.end = Some(Close::PeerClosed);
                    return Ok(());
                }
                Some(ws::Event::Pong) | None => {}
            }
            at += n;
        }
        Ok(())
    }

    /// Queue a small frame whole, or not at all: a pong that does not fit is dropped (RFC
    /// 6455 lets an endpoint answer only the latest of several pings), never cut, which
    /// would corrupt the stream.
    fn queue_urgent(&mut self, frame: &[u8]) {
        if frame.len() > self.urgent.len() - self.urgent_len {
            return;
        }
        self.urgent[self.urgent_len..self.urgent_len + frame.len()].copy_from_slice(frame);
        self.urgent_len += frame.len();
    }

    /// WebSocket payload bytes, in order.
    fn data(&mut self, mut data: &[u8], chain: &impl Served) -> Result<(), Close> {
        while !data.is_empty() {
            match core::mem::replace(&mut self.phase, Phase::Gone) {
                Phase::ActOne(state) => match self.acts.fill(ACT_ONE_LEN, &mut data) {
                    Some(act_one) => {
                        let (next, act_two) =
                            state.read_act_one(act_one).map_err(Close::Handshake)?;
                        let (h, n) = ws::binary_header(act_two.len());
                        self.queue_urgent(&h[..n]);
                        self.queue_urgent(&act_two);
                        self.phase = Phase::ActThree(next);
                    }
                    None => self.phase = Phase::ActOne(state),
                },
                Phase::ActThree(state) => match self.acts.fill(ACT_THREE_LEN, &mut data) {
                    Some(act_three) => {
                        let transport =
                            state.read_act_three(act_three).map_err(Close::Handshake)?;
                        let (sender, receiver) = transport.split();
                        self.established = true;
                        let mut session = Session::new(self.chain_hash);
                        session.offer_compact_headers(self.offer_compact);
                        self.phase = Phase::Ready(Box::new(Ready {
                            sender,
                            receiver,
                            session,
                        }));
                        if self.buffers == BufferMode::Fixed {
                            self.reader = Some(FrameReader::new());
                            self.writer = Some(FrameBuffer::new());
                        }
                    }
                    None => self.phase = Phase::ActThree(state),
                },
                Phase::Ready(mut r) => {
                    let result = match self.reader.as_mut() {
                        Some(reader) => frames(reader, &mut r, data, chain, &mut self.counts),
                        // Pooled, right after act three: keep the bytes until a buffer is
                        // lent (bounded by the read that brought them).
                        None if self.carry.len() + data.len() <= MAX_CARRY => {
                            self.carry.extend_from_slice(data);
                            Ok(())
                        }
                        None => Err(Close::Receive(ReceiveError::Failed)),
                    };
                    self.phase = Phase::Ready(r);
                    return result;
                }
                Phase::Http { .. } | Phase::Gone => return Err(Close::PeerClosed),
            }
        }
        Ok(())
    }

    /// What to write next, if anything: small frames first, then the session's next
    /// message (one at a time: call [`Self::transmitted`] once it is written).
    pub fn poll_transmit(&mut self, now: Millis, chain: &impl Served) -> Option<Transmit<'_>> {
        if self.out != Out::None || self.ended {
            return None;
        }
        if self.urgent_len > 0 {
            self.out = Out::Urgent;
            return Some(Transmit::Raw(&self.urgent[..self.urgent_len]));
        }
        if self.close_after_urgent {
            return None;
        }
        let Phase::Ready(r) = &mut self.phase else {
            return None;
        };
        if !r.session.has_output() {
            return None;
        }
        let Some(writer) = self.writer.as_mut() else {
            self.waiting_since.get_or_insert(now);
            return Some(Transmit::NeedBuffer);
        };
        let before = r.session.headers_sent;
        let len = match r.session.next_message(chain, writer.body_mut()) {
            Ok(Some(len)) => len,
            Ok(None) => return None,
            Err(e) => {
                self.end.get_or_insert(Close::Encode(e));
                self.ended = true;
                return None;
            }
        };
        self.counts.headers_sent += r.session.headers_sent - before;
        let finished = r.session.finished();
        let frame = match writer.seal(&mut r.sender, len) {
            Ok(frame) => frame,
            Err(e) => {
                self.end.get_or_insert(Close::Send(e));
                self.ended = true;
                return None;
            }
        };
        let (h, n) = ws::binary_header(frame.len());
        self.ws_header = h;
        self.out = Out::Frame { finished };
        Some(Transmit::Frame {
            header: &self.ws_header[..n],
            frame,
        })
    }

    /// What [`Self::poll_transmit`] gave was written.
    pub fn transmitted(&mut self) {
        match core::mem::replace(&mut self.out, Out::None) {
            Out::None => {}
            Out::Urgent => {
                self.urgent_len = 0;
                if self.close_after_urgent {
                    self.close(Close::PeerClosed);
                }
            }
            Out::Frame { finished } => {
                if finished {
                    // The warning went out: the connection ends with the violation.
                    self.close(Close::PeerClosed);
                }
            }
        }
    }

    /// When [`Self::handle_timeout`] must next run.
    pub fn poll_timeout(&self) -> Option<Millis> {
        if self.ended {
            return None;
        }
        let main = if matches!(self.phase, Phase::Ready(_)) {
            self.idle_deadline
        } else {
            self.handshake_deadline
        };
        let waiting = self.waiting_since.map(|t| t + ms(self.frame_timeout_ms));
        earliest(earliest(Some(main), self.frame_deadline), waiting)
    }

    /// Deadlines at `now`: a buffer not lent in time, a frame not complete in time, a
    /// handshake not finished, a ping unanswered close the connection; a silent client is
    /// pinged.
    pub fn handle_timeout(&mut self, now: Millis) {
        if self.ended {
            return;
        }
        if self
            .waiting_since
            .is_some_and(|t| t + ms(self.frame_timeout_ms) <= now)
        {
            return self.close(Close::PoolExhausted);
        }
        if self.frame_deadline.is_some_and(|d| d <= now) {
            return self.close(Close::SlowFrame);
        }
        let Phase::Ready(r) = &mut self.phase else {
            if self.handshake_deadline <= now {
                self.close(Close::HandshakeTimeout);
            }
            return;
        };
        if self.idle_deadline > now || self.end.is_some() {
            return;
        }
        if self.ping_outstanding {
            return self.close(Close::KeepaliveTimeout);
        }
        r.session.ping();
        self.ping_outstanding = true;
        self.idle_deadline = now + ms(self.ping_timeout_ms);
    }
}

/// Milliseconds as a `Duration`.
fn ms(ms: u32) -> Duration {
    Duration::from_millis(u64::from(ms))
}

/// Transport bytes: decrypt frames, hand each message to the session.
fn frames(
    reader: &mut FrameReader,
    r: &mut Ready,
    mut data: &[u8],
    chain: &impl Served,
    counts: &mut Counts,
) -> Result<(), Close> {
    while !data.is_empty() {
        let (taken, message) = reader.read(&mut r.receiver, data).map_err(Close::Receive)?;
        data = &data[taken..];
        if let Some(message) = message {
            counts.messages_in += 1;
            match r
                .session
                .receive(message, chain)
                .map_err(Close::Violation)?
            {
                Received::Ok => {}
                Received::PeerError => return Err(Close::PeerError),
            }
        }
    }
    Ok(())
}
