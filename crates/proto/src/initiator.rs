//! The initiator's side (a client connecting to a gateway), sans-IO, in two layers:
//!
//! - [`Link`]: BOLT 8 inside WebSocket binary messages. Act one is queued at once, act two
//!   is collected from any chunking, act three and our `init` follow; after that, whole
//!   decrypted messages come out of [`Link::read`] and [`Link::send`] seals messages into
//!   the outgoing bytes. The native test and load client uses this layer, raw.
//! - [`Initiator`]: the lightwire protocol over a link: the gateway's `init` checked
//!   (another network is refused), pings answered, keepalive and handshake deadlines on
//!   the caller's clock, header requests sent. What the gateway says comes out one event per
//!   call of [`Initiator::handle_input`], borrowing from the receive buffer.
//!
//! Both take the bytes of WebSocket messages: the browser (or the native shell, with
//! [`crate::ws`]) does the WebSocket framing.

use core::time::Duration;

use lightwire_chain::{BlockHash, Header, Params, U256, Work};
use lightwire_noise::{
    ACT_TWO_LEN, AwaitingActTwo, FrameBuffer, FrameReader, HandshakeError, PublicKey, ReceiveError,
    Receiver, SecretKey, SendError, Sender,
};
use lightwire_primitives::{FilterHash, FilterHeader};
use lightwire_wire::{
    AnswerFlags, BLOCKS_FEATURE, BlockKind, BlockPiece, COMPACT_HEADERS_FEATURE, DecodeError,
    EncodeError, FILTERS_FEATURE, Features, FilterCheckpoints, FilterKind, FilterRange, Filters,
    GetBlock, GetFilterCheckpoints, GetFilterHeaders, GetFilters, GetHeaders, Init, InitRefusal,
    MEMPOOL_FEATURE, MempoolDigest, MempoolSubscribe, MempoolTx, Message, Networks, Ping, Pong,
    RELAY_FEATURE, SALT_LEN, SendTx, TxResult,
};

use crate::acts::ActBuffer;
use crate::compact::Expanded;
use crate::time::Millis;

/// Why a connection to a gateway ended.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum PeerError {
    /// The BOLT 8 handshake failed (a wrong pinned key shows up here).
    #[error("handshake with the gateway failed: {0}")]
    Handshake(#[source] HandshakeError),
    /// A frame from the gateway failed to decrypt.
    #[error("a message from the gateway was corrupted: {0}")]
    Receive(#[source] ReceiveError),
    /// A message from the gateway does not decode.
    #[error("the gateway sent a message that does not decode: {0}")]
    Decode(#[source] DecodeError),
    /// The gateway's `init` names no network.
    #[error("the gateway did not say which network it serves")]
    MissingNetworks,
    /// The gateway serves another network.
    #[error("the gateway serves another Bitcoin network")]
    WrongNetwork,
    /// The gateway requires a feature we do not know.
    #[error("the gateway requires feature bit {0}, which this client does not know")]
    UnknownRequiredFeature(usize),
    /// The gateway sent `error` (its text, if printable).
    #[error("the gateway reported an error: {}", .0.as_deref().unwrap_or("(not printable)"))]
    GatewayError(Option<String>),
    /// The gateway's first message was not `init`.
    #[error("the gateway did not start with init")]
    NoInitFirst,
    /// The handshake and `init` did not finish within [`Limits::handshake`].
    #[error("the handshake did not finish in time")]
    HandshakeTimeout,
    /// A keepalive ping went unanswered for [`Limits::ping_timeout`].
    #[error("the gateway stopped answering")]
    KeepaliveTimeout,
    /// More pings than [`MAX_PINGS`] within [`PING_WINDOW`] (BOLT 1 lets a node fail a
    /// peer that pings far more than once per 30 s: each ping can ask for 65 KB of pong).
    #[error("the gateway sent more than {MAX_PINGS} pings in {} s", PING_WINDOW.as_secs())]
    PingFlood,
    /// A request was made before the connection was ready.
    #[error("the connection is not ready")]
    NotReady,
    /// Sealing failed.
    #[error("sealing a message failed: {0}")]
    Send(#[source] SendError),
    /// Encoding failed.
    #[error("encoding a message failed: {0}")]
    Encode(#[source] EncodeError),
    /// An earlier error ended this connection.
    #[error("the connection already failed")]
    Failed,
    /// A `filter_headers` message whose segments do not join: a segment's last filter
    /// header is not the next segment's anchor.
    #[error("the gateway sent filter headers that do not chain")]
    FilterHeadersDisjoint,
}

impl PeerError {
    /// Whether the gateway broke a rule (an undecodable message, another network, no
    /// `init` first, a ping flood) rather than the connection failing or timing out, the
    /// gateway saying it has a problem, or a BOLT 8 check failing.
    ///
    /// A failed handshake or a frame that does not decrypt is not held against the
    /// gateway: these are checks the client computes itself (ChaCha20-Poly1305 tags,
    /// SHA-256 and HKDF, secp256k1 ECDH and point decoding), and an engine that computes
    /// a wrong value (WebKit's JavaScriptCore has been seen to, now and then) fails them
    /// against an honest gateway exactly as against one that tampers. Counted as a
    /// connection failure (a reconnect with backoff), it costs an honest gateway nothing,
    /// and a gateway failing them on purpose gains nothing (nothing it sent was believed)
    /// and is only reconnected more and more slowly. The same holds for a pinned key that
    /// is not the gateway's (act two's tag fails): retried at the slowest backoff, not
    /// given up, since a wrong tag cannot be told from a wrong computation.
    ///
    /// The line is drawn at decryption: a message whose MAC checked but that does not
    /// decode, or that breaks a rule, stays a violation. A miscomputing engine could
    /// garble those too, but the failures seen were in the cryptography, and a gateway
    /// that breaks a rule in a well-formed message can do so on purpose at no cost: it
    /// must stay one that is dropped for the session.
    pub fn is_violation(&self) -> bool {
        !matches!(
            self,
            PeerError::Handshake(_)
                | PeerError::Receive(_)
                | PeerError::GatewayError(_)
                | PeerError::HandshakeTimeout
                | PeerError::KeepaliveTimeout
                | PeerError::NotReady
                | PeerError::Send(_)
                | PeerError::Encode(_)
                | PeerError::Failed
        )
    }
}

impl From<InitRefusal> for PeerError {
    fn from(r: InitRefusal) -> Self {
        match r {
            InitRefusal::UnknownRequiredFeature(bit) => PeerError::UnknownRequiredFeature(bit),
            InitRefusal::MissingNetworks => PeerError::MissingNetworks,
            InitRefusal::WrongNetwork => PeerError::WrongNetwork,
        }
    }
}

enum LinkState {
    ActTwo(Box<AwaitingActTwo>),
    Transport { sender: Sender, receiver: Receiver },
    Failed,
}

/// BOLT 8 as the initiator, inside WebSocket messages: see the module documentation.
pub struct Link {
    chain_hash: [u8; 32],
    state: LinkState,
    acts: ActBuffer,
    reader: FrameReader,
    frame: FrameBuffer,
    /// Bytes waiting to be sent (frames back to back; one WebSocket message).
    out: Vec<u8>,
    /// Whether our `init` offers `headers_compact`.
    offer_compact: bool,
}

impl Link {
    /// Start a handshake with the gateway whose key is `gateway` (pinned), as
    /// `local_static`, for the chain whose genesis hash is `chain_hash` (our `init` names
    /// it). Act one is queued for [`Self::transmit`].
    pub fn new(
        chain_hash: [u8; 32],
        local_static: SecretKey,
        gateway: PublicKey,
        ephemeral: SecretKey,
    ) -> Link {
        let (state, act_one) = lightwire_noise::Initiator::start(local_static, gateway, ephemeral);
        let mut out = Vec::with_capacity(lightwire_noise::MAX_FRAME_LEN);
        out.extend_from_slice(&act_one);
        Link {
            chain_hash,
            state: LinkState::ActTwo(Box::new(state)),
            acts: ActBuffer::new(),
            reader: FrameReader::new(),
            frame: FrameBuffer::new(),
            out,
            offer_compact: false,
        }
    }

    /// Whether our `init` offers `headers_compact` ([`COMPACT_HEADERS_FEATURE`]); off unless
    /// turned on here before the handshake finishes (a raw link then decodes
    /// `headers_compact` itself; [`Initiator`] turns it on and expands them).
    pub fn offer_compact_headers(&mut self, on: bool) {
        self.offer_compact = on;
    }

    /// Whether act three went out (messages can be sent and received).
    pub fn is_established(&self) -> bool {
        matches!(self.state, LinkState::Transport { .. })
    }

    /// Take bytes from the gateway (any chunking): returns how many were taken and, when
    /// they completed one, the decrypted message. Call again with the rest. After an error
    /// the link stays failed.
    pub fn read(&mut self, data: &[u8]) -> Result<(usize, Option<&[u8]>), PeerError> {
        match &mut self.state {
            LinkState::Failed => Err(PeerError::Failed),
            LinkState::ActTwo(_) => {
                let mut rest = data;
                if self.acts.fill(ACT_TWO_LEN, &mut rest).is_some() {
                    if let Err(e) = self.finish_handshake() {
                        self.state = LinkState::Failed;
                        return Err(e);
                    }
                }
                Ok((data.len() - rest.len(), None))
            }
            LinkState::Transport { receiver, .. } => match self.reader.read(receiver, data) {
                Ok((taken, message)) => Ok((taken, message.map(|m| &*m))),
                Err(e) => {
                    self.state = LinkState::Failed;
                    Err(PeerError::Receive(e))
                }
            },
        }
    }

    fn finish_handshake(&mut self) -> Result<(), PeerError> {
        let LinkState::ActTwo(state) = core::mem::replace(&mut self.state, LinkState::Failed)
        else {
            return Err(PeerError::Failed);
        };
        // The act is still in the buffer: `fill` returned it and starts over next time.
        let mut act_two = [0u8; ACT_TWO_LEN];
        act_two.copy_from_slice(self.acts.last(ACT_TWO_LEN));
        let (act_three, transport) = state.read_act_two(&act_two).map_err(PeerError::Handshake)?;
        self.out.extend_from_slice(&act_three);
        let (sender, receiver) = transport.split();
        self.state = LinkState::Transport { sender, receiver };
        let chains = [self.chain_hash];
        let mut field = [0u8; COMPACT_HEADERS_FEATURE / 8 + 1];
        let bits: &[usize] = if self.offer_compact {
            &[COMPACT_HEADERS_FEATURE]
        } else {
            &[]
        };
        let features = Features::write_bits(bits, &mut field).map_err(PeerError::Encode)?;
        let init = Init::new(features, Some(Networks::from_chains(&chains)));
        self.send(&Message::Init(init))
    }

    /// Encode `message` into the frame buffer and seal it; returns the frame.
    pub fn seal(&mut self, message: &Message<'_>) -> Result<&[u8], PeerError> {
        let n = message
            .encode(self.frame.body_mut())
            .map_err(PeerError::Encode)?;
        let LinkState::Transport { sender, .. } = &mut self.state else {
            return Err(PeerError::NotReady);
        };
        self.frame.seal(sender, n).map_err(PeerError::Send)
    }

    /// The frame buffer's body, to encode a message straight into (then [`Self::queue`]).
    pub fn body_mut(&mut self) -> &mut [u8] {
        self.frame.body_mut()
    }

    /// Seal the first `len` bytes of [`Self::body_mut`] and queue the frame.
    pub fn queue(&mut self, len: usize) -> Result<(), PeerError> {
        let LinkState::Transport { sender, .. } = &mut self.state else {
            return Err(PeerError::NotReady);
        };
        let frame = self.frame.seal(sender, len).map_err(PeerError::Send)?;
        self.out.extend_from_slice(frame);
        Ok(())
    }

    /// Encode, seal and queue `message`.
    pub fn send(&mut self, message: &Message<'_>) -> Result<(), PeerError> {
        let n = message
            .encode(self.frame.body_mut())
            .map_err(PeerError::Encode)?;
        self.queue(n)
    }

    /// Bytes to send now (one WebSocket message), if any; call [`Self::sent`] after.
    pub fn transmit(&self) -> Option<&[u8]> {
        (!self.out.is_empty()).then_some(&self.out[..])
    }

    /// The bytes from [`Self::transmit`] went out; returns how many.
    pub fn sent(&mut self) -> usize {
        let n = self.out.len();
        self.out.clear();
        n
    }
}

/// Pings a gateway may send within [`PING_WINDOW`] before it is failed (an honest one
/// pings at most once per 30 s of silence).
pub const MAX_PINGS: u32 = 10;
/// The most mirrors taken from a gateway's `init` (more are ignored).
pub const MAX_MIRRORS_ADVERTISED: usize = 4;
/// The longest mirror URL taken from a gateway's `init`.
pub const MAX_MIRROR_URL: usize = 512;
/// The window [`MAX_PINGS`] counts in.
pub const PING_WINDOW: Duration = Duration::from_secs(30);

/// Time limits of a connection to a gateway.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Limits {
    /// From the socket opening to the gateway's `init`.
    pub handshake: Duration,
    /// Silence after which we ping.
    pub ping_after: Duration,
    /// How long a ping may go unanswered (by anything).
    pub ping_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            handshake: Duration::from_secs(10),
            ping_after: Duration::from_secs(30),
            ping_timeout: Duration::from_secs(20),
        }
    }
}

/// What the gateway said.
#[derive(Debug, PartialEq, Eq)]
pub enum PeerEvent<'a> {
    /// `init` arrived and was accepted: requests may be sent.
    Ready,
    /// The gateway's tip.
    Tip {
        /// Height (a hint).
        height: u32,
        /// The tip header.
        header: Header,
        /// Chainwork claimed (a hint).
        chainwork: Work,
    },
    /// Headers answering request `id` (from `headers` or `headers_compact`).
    Headers {
        /// The request.
        id: u32,
        /// Height of the first (a hint).
        first_height: u32,
        /// `80 * n` bytes.
        headers: &'a [u8],
        /// Their block hashes, computed once here (four at a time).
        hashes: &'a [BlockHash],
        /// The last message of this answer.
        last: bool,
    },
    /// Filter headers answering request `id` (`filter_headers`, rebuilt from the filter
    /// hashes and linked: they chain from `before`).
    FilterHeaders {
        /// The request.
        id: u32,
        /// Height of the first (of the next, when there are none).
        first_height: u32,
        /// How the answer ends.
        flags: AnswerFlags,
        /// The filter header before the first (the message's first anchor; zeros when the
        /// message is empty or starts at genesis).
        before: FilterHeader,
        /// The filter headers.
        headers: &'a [FilterHeader],
        /// The filter hashes they chain.
        hashes: &'a [FilterHash],
    },
    /// Filter checkpoints answering request `id`.
    FilterCheckpoints(FilterCheckpoints<'a>),
    /// Tweak headers answering request `id` (`tweak_headers`, rebuilt from the tweak hashes
    /// and linked as filter headers are: they chain from `before`). A variant of its own,
    /// so that no code written for filters takes tweaks for them.
    TweakHeaders {
        /// The request.
        id: u32,
        /// Height of the first (of the next, when there are none).
        first_height: u32,
        /// How the answer ends.
        flags: AnswerFlags,
        /// The tweak header before the first.
        before: FilterHeader,
        /// The tweak headers.
        headers: &'a [FilterHeader],
        /// The tweak hashes they chain.
        hashes: &'a [FilterHash],
    },
    /// Tweak checkpoints answering request `id`.
    TweakCheckpoints(FilterCheckpoints<'a>),
    /// Pieces of tweak lists answering request `id` (checked for range, as filter pieces).
    Tweaks(Filters<'a>),
    /// Filter pieces answering request `id` (the pieces are checked for range; their
    /// order and completeness are the receiver's to check).
    Filters(Filters<'a>),
    /// A piece of the block answering request `id` (checked for range; order is the
    /// receiver's to check).
    Block(BlockPiece<'a>),
    /// A piece of what a block spends from, answering
    /// [`Initiator::request_spent_from`]'s `id` (checked as a block's pieces are).
    SpentFrom(BlockPiece<'a>),
    /// What became of a transaction sent with [`Initiator::send_tx`].
    TxResult(TxResult),
    /// Transactions that entered or left the gateway's mempool (after
    /// [`Initiator::subscribe_mempool`]; the entries are checked whole).
    MempoolDigest(MempoolDigest<'a>),
    /// The transaction asked with [`Initiator::get_mempool_tx`], or `not_found`.
    MempoolTx(MempoolTx<'a>),
    /// The fee rates asked with [`Initiator::get_fee_rates`].
    FeeRates(lightwire_wire::FeeRates),
    /// A `warning` (printable text, or `None`).
    Warning(Option<&'a str>),
    /// A `pong`.
    Pong,
}

/// One connection to a gateway: see the module documentation.
pub struct Initiator {
    link: Link,
    chain_hash: [u8; 32],
    ready: bool,
    failed: bool,
    /// A pong owed: only the latest ping is answered, once per [`Self::poll_transmit`], so
    /// that a gateway cannot make us queue 64 KB of pong per 40-byte ping.
    pong_due: Option<u16>,
    /// Pings counted since `ping_window` began.
    pings: u32,
    ping_window: Millis,
    limits: Limits,
    opened: Millis,
    heard: Millis,
    ping_sent: Option<Millis>,
    /// Whether our `init` offered `headers_compact` (only then is it taken).
    compact: bool,
    /// Whether the gateway's `init` offers filters.
    gateway_filters: bool,
    /// Whether the gateway's `init` offers blocks.
    gateway_blocks: bool,
    /// Whether the gateway's `init` offers transaction relay.
    gateway_relay: bool,
    /// Whether the gateway's `init` offers the mempool digest.
    gateway_mempool: bool,
    gateway_fees: bool,
    /// Whether the gateway's `init` offers silent-payment tweaks.
    gateway_tweaks: bool,
    /// The mirrors its `init` advertised (at most [`MAX_MIRRORS_ADVERTISED`]).
    gateway_mirrors: Vec<String>,
    /// Headers expanded from `headers_compact` and the block hashes of every answer.
    expanded: Expanded,
}

impl Initiator {
    /// Start a handshake at `now` with the gateway whose key is `gateway` (pinned), as
    /// `local_static`, for `params`' network, with `ephemeral` (fresh randomness, one per
    /// connection). Act one is ready in [`Self::poll_transmit`].
    pub fn new(
        now: Millis,
        params: &Params,
        local_static: SecretKey,
        gateway: PublicKey,
        ephemeral: SecretKey,
        limits: Limits,
    ) -> Initiator {
        let mut initiator = Initiator {
            chain_hash: params.genesis.block_hash().0,
            link: Link::new(
                params.genesis.block_hash().0,
                local_static,
                gateway,
                ephemeral,
            ),
            ready: false,
            failed: false,
            pong_due: None,
            pings: 0,
            ping_window: now,
            limits,
            opened: now,
            heard: now,
            ping_sent: None,
            compact: false,
            gateway_filters: false,
            gateway_blocks: false,
            gateway_relay: false,
            gateway_mempool: false,
            gateway_fees: false,
            gateway_tweaks: false,
            gateway_mirrors: Vec::new(),
            expanded: Expanded::new(),
        };
        initiator.offer_compact_headers(true);
        initiator
    }

    /// Whether to offer `headers_compact` (on by default); call before the handshake ends.
    /// Off, the connection behaves as a client from before it existed.
    pub fn offer_compact_headers(&mut self, on: bool) {
        self.compact = on;
        self.link.offer_compact_headers(on);
    }

    /// Whether the gateway's `init` said it serves compact block filters
    /// ([`FILTERS_FEATURE`]).
    pub fn serves_filters(&self) -> bool {
        self.gateway_filters
    }

    /// Whether the gateway's `init` said it serves blocks ([`BLOCKS_FEATURE`]).
    pub fn serves_blocks(&self) -> bool {
        self.gateway_blocks
    }

    /// Whether the gateway's `init` said it relays transactions ([`RELAY_FEATURE`]).
    pub fn relays(&self) -> bool {
        self.gateway_relay
    }

    /// Whether the gateway's `init` said it serves the mempool digest
    /// ([`MEMPOOL_FEATURE`]).
    pub fn serves_mempool(&self) -> bool {
        self.gateway_mempool
    }

    /// Whether the gateway's `init` said it serves silent-payment tweaks
    /// ([`lightwire_wire::TWEAKS_FEATURE`]).
    pub fn serves_tweaks(&self) -> bool {
        self.gateway_tweaks
    }

    /// Whether the gateway's `init` said it answers `get_fee_rates`
    /// ([`lightwire_wire::FEES_FEATURE`]).
    pub fn serves_fees(&self) -> bool {
        self.gateway_fees
    }

    /// The mirrors of the chain's history the gateway's `init` advertised (its
    /// `bulk_mirrors` record: at most [`MAX_MIRRORS_ADVERTISED`], each at most
    /// [`MAX_MIRROR_URL`] bytes), in its order.
    pub fn mirrors(&self) -> &[String] {
        &self.gateway_mirrors
    }

    /// Whether `init` has been exchanged.
    pub fn is_ready(&self) -> bool {
        self.ready && !self.failed
    }

    /// Take bytes from the gateway at `now` (a WebSocket message's payload, any chunking):
    /// returns how many were taken and at most one event. Call again with the rest. After
    /// an error the connection stays failed.
    pub fn handle_input(
        &mut self,
        now: Millis,
        data: &[u8],
    ) -> Result<(usize, Option<PeerEvent<'_>>), PeerError> {
        if self.failed {
            return Err(PeerError::Failed);
        }
        self.heard = now;
        self.ping_sent = None;
        let Initiator { link, expanded, .. } = self;
        let (taken, message) = match link.read(data) {
            Ok((taken, Some(bytes))) => (taken, bytes),
            Ok((taken, None)) => return Ok((taken, None)),
            Err(e) => {
                self.failed = true;
                return Err(e);
            }
        };
        match interpret(
            message,
            &self.chain_hash,
            self.ready,
            expanded,
            self.compact,
        ) {
            Ok(Interpreted::Ready {
                filters,
                blocks,
                relay,
                mempool,
                fees,
                tweaks,
                mirrors,
            }) => {
                self.ready = true;
                // A hint, bounded: the engine checks each and what its mirror serves.
                self.gateway_mirrors.clear();
                let urls = mirrors.mirror_urls().filter(|u| u.len() <= MAX_MIRROR_URL);
                self.gateway_mirrors
                    .extend(urls.take(MAX_MIRRORS_ADVERTISED).map(str::to_string));
                self.gateway_filters = filters;
                self.gateway_blocks = blocks;
                self.gateway_relay = relay;
                self.gateway_mempool = mempool;
                self.gateway_fees = fees;
                self.gateway_tweaks = tweaks;
                Ok((taken, Some(PeerEvent::Ready)))
            }
            Ok(Interpreted::Pong(len)) => {
                if now.since(self.ping_window) >= PING_WINDOW {
                    self.ping_window = now;
                    self.pings = 0;
                }
                self.pings += 1;
                if self.pings > MAX_PINGS {
                    self.failed = true;
                    return Err(PeerError::PingFlood);
                }
                self.pong_due = len;
                Ok((taken, None))
            }
            Ok(Interpreted::Event(event)) => Ok((taken, event)),
            Err(e) => {
                self.failed = true;
                Err(e)
            }
        }
    }

    /// Bytes to send now (one WebSocket message), if any; call [`Self::sent`] after.
    pub fn poll_transmit(&mut self) -> Option<&[u8]> {
        if self.failed {
            return None;
        }
        if let Some(len) = self.pong_due.take() {
            let n = Pong::encode_zeroed(len, self.link.body_mut());
            if n.map(|n| self.link.queue(n)).is_err() {
                // Cannot happen: `pong_len` is checked against the frame size.
                self.failed = true;
            }
        }
        self.link.transmit()
    }

    /// The bytes from [`Self::poll_transmit`] went out; returns how many (0 if nothing was
    /// waiting).
    pub fn sent(&mut self) -> usize {
        self.link.sent()
    }

    /// When [`Self::handle_timeout`] must next run: the handshake deadline, then the
    /// keepalive's.
    pub fn poll_timeout(&self) -> Option<Millis> {
        if self.failed {
            return None;
        }
        Some(if !self.ready {
            self.opened + self.limits.handshake
        } else if let Some(sent) = self.ping_sent {
            sent + self.limits.ping_timeout
        } else {
            self.heard + self.limits.ping_after
        })
    }

    /// Deadlines at `now`: a handshake that has not finished, or a ping unanswered, fails
    /// the connection; a silent gateway is pinged.
    pub fn handle_timeout(&mut self, now: Millis) -> Result<(), PeerError> {
        let Some(due) = self.poll_timeout() else {
            return Ok(());
        };
        if now < due {
            return Ok(());
        }
        let result = if !self.ready {
            Err(PeerError::HandshakeTimeout)
        } else if self.ping_sent.is_some() {
            Err(PeerError::KeepaliveTimeout)
        } else {
            self.ping_sent = Some(now);
            Ping::encode_zeroed(0, 0, self.link.body_mut())
                .map_err(PeerError::Encode)
                .and_then(|n| self.link.queue(n))
        };
        self.failed |= result.is_err();
        result
    }

    /// Ask for at most `max_count` headers after the first of `locator` on the gateway's
    /// chain (newest first; at most `MAX_LOCATOR` are sent).
    pub fn request(
        &mut self,
        id: u32,
        max_count: u32,
        locator: &[BlockHash],
    ) -> Result<(), PeerError> {
        if !self.is_ready() {
            return Err(PeerError::NotReady);
        }
        let mut flat = [0u8; 32 * lightwire_wire::sync::MAX_LOCATOR];
        let n = locator.len().min(lightwire_wire::sync::MAX_LOCATOR);
        for (dst, h) in flat.chunks_exact_mut(32).zip(&locator[..n]) {
            dst.copy_from_slice(h.as_bytes());
        }
        let req = GetHeaders {
            id,
            max_count,
            stop_hash: [0; 32],
            locator: &flat[..n * 32],
        };
        self.link.send(&Message::GetHeaders(req))
    }

    /// Ask for the filter hashes (and so the filter headers) of `start_height` up to the
    /// block `stop_hash`.
    pub fn request_filter_headers(
        &mut self,
        id: u32,
        start_height: u32,
        stop_hash: BlockHash,
    ) -> Result<(), PeerError> {
        let range = self.filter_range(id, start_height, stop_hash)?;
        self.link
            .send(&Message::GetFilterHeaders(GetFilterHeaders(range)))
    }

    /// Ask for the filters of `start_height` up to the block `stop_hash`.
    pub fn request_filters(
        &mut self,
        id: u32,
        start_height: u32,
        stop_hash: BlockHash,
    ) -> Result<(), PeerError> {
        let range = self.filter_range(id, start_height, stop_hash)?;
        self.link.send(&Message::GetFilters(GetFilters(range)))
    }

    /// Ask for the filter checkpoints up to the block `stop_hash`.
    pub fn request_filter_checkpoints(
        &mut self,
        id: u32,
        stop_hash: BlockHash,
    ) -> Result<(), PeerError> {
        let range = self.filter_range(id, 0, stop_hash)?;
        let req = GetFilterCheckpoints {
            id,
            stop_hash: range.stop_hash,
        };
        self.link.send(&Message::GetFilterCheckpoints(req))
    }

    /// Ask for `kind`'s headers (as hashes), data or checkpoints: `request_filter_headers`,
    /// `request_filters` and `request_filter_checkpoints` for either chain.
    pub fn request_data(
        &mut self,
        kind: FilterKind,
        what: DataRequest,
        id: u32,
        start_height: u32,
        stop_hash: BlockHash,
    ) -> Result<(), PeerError> {
        let range = self.filter_range(id, start_height, stop_hash)?;
        let message = match (kind, what) {
            (FilterKind::Basic, DataRequest::Headers) => {
                Message::GetFilterHeaders(GetFilterHeaders(range))
            }
            (FilterKind::Tweaks, DataRequest::Headers) => {
                Message::GetTweakHeaders(GetFilterHeaders(range))
            }
            (FilterKind::Basic, DataRequest::Data) => Message::GetFilters(GetFilters(range)),
            (FilterKind::Tweaks, DataRequest::Data) => Message::GetTweaks(GetFilters(range)),
            (kind, DataRequest::Checkpoints) => {
                let req = GetFilterCheckpoints {
                    id,
                    stop_hash: range.stop_hash,
                };
                match kind {
                    FilterKind::Basic => Message::GetFilterCheckpoints(req),
                    FilterKind::Tweaks => Message::GetTweakCheckpoints(req),
                }
            }
        };
        self.link.send(&message)
    }

    /// Hand a signed transaction to the gateway for its node (at most
    /// [`lightwire_wire::MAX_TX_LEN`] bytes).
    pub fn send_tx(&mut self, id: u32, tx: &[u8]) -> Result<(), PeerError> {
        if !self.is_ready() {
            return Err(PeerError::NotReady);
        }
        self.link.send(&Message::SendTx(SendTx { id, tx }))
    }

    /// Ask the gateway to stream its mempool digest, each transaction's set keyed by
    /// `salt` (fresh randomness, one per connection); with `snapshot`, every transaction
    /// it holds now first; with `tweaks`, each transaction's BIP352 tweak with it (from a
    /// gateway that serves tweaks).
    pub fn subscribe_mempool(
        &mut self,
        salt: [u8; SALT_LEN],
        snapshot: bool,
        tweaks: bool,
    ) -> Result<(), PeerError> {
        if !self.is_ready() {
            return Err(PeerError::NotReady);
        }
        let m = MempoolSubscribe {
            salt,
            snapshot,
            tweaks,
        };
        self.link.send(&Message::MempoolSubscribe(m))
    }

    /// Ask for the transaction whose txid is `txid` from the gateway's mempool.
    pub fn get_mempool_tx(&mut self, id: u32, txid: [u8; 32]) -> Result<(), PeerError> {
        if !self.is_ready() {
            return Err(PeerError::NotReady);
        }
        let m = lightwire_wire::GetMempoolTx { id, txid };
        self.link.send(&Message::GetMempoolTx(m))
    }

    /// Ask for the gateway's node's fee estimates.
    pub fn get_fee_rates(&mut self, id: u32) -> Result<(), PeerError> {
        if !self.is_ready() {
            return Err(PeerError::NotReady);
        }
        self.link
            .send(&Message::GetFeeRates(lightwire_wire::GetFeeRates { id }))
    }

    /// Ask for the block whose hash is `block_hash` (one at a time: the gateway answers a
    /// second request before the first is done with a warning).
    pub fn request_block(&mut self, id: u32, block_hash: BlockHash) -> Result<(), PeerError> {
        self.request_block_data(BlockKind::Block, id, block_hash)
    }

    /// Ask for the transactions the block `block_hash` spends from that its tweaks need
    /// (a tweak dispute's evidence; one at a time, beside at most one block).
    pub fn request_spent_from(&mut self, id: u32, block_hash: BlockHash) -> Result<(), PeerError> {
        self.request_block_data(BlockKind::SpentFrom, id, block_hash)
    }

    fn request_block_data(
        &mut self,
        kind: BlockKind,
        id: u32,
        block_hash: BlockHash,
    ) -> Result<(), PeerError> {
        if !self.is_ready() {
            return Err(PeerError::NotReady);
        }
        let req = GetBlock {
            id,
            block_hash: block_hash.0,
        };
        self.link.send(&match kind {
            BlockKind::Block => Message::GetBlock(req),
            BlockKind::SpentFrom => Message::GetSpentFrom(req),
        })
    }

    fn filter_range(
        &self,
        id: u32,
        start_height: u32,
        stop_hash: BlockHash,
    ) -> Result<FilterRange, PeerError> {
        if !self.is_ready() {
            return Err(PeerError::NotReady);
        }
        Ok(FilterRange {
            id,
            start_height,
            stop_hash: stop_hash.0,
        })
    }
}

/// What one message means to the receiver.
pub(crate) enum Interpreted<'a> {
    /// With whether the gateway serves filters, blocks and the mempool digest, and relays
    /// transactions.
    Ready {
        filters: bool,
        blocks: bool,
        relay: bool,
        mempool: bool,
        fees: bool,
        tweaks: bool,
        /// The URLs of its `bulk_mirrors` record.
        mirrors: Init<'a>,
    },
    Pong(Option<u16>),
    Event(Option<PeerEvent<'a>>),
}

/// Which of a chain's three requests [`Initiator::request_data`] sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataRequest {
    /// Its headers, as hashes with anchors (`get_filter_headers`, `get_tweak_headers`).
    Headers,
    /// Its per-block data (`get_filters`, `get_tweaks`).
    Data,
    /// Its checkpoints (`get_filter_checkpoints`, `get_tweak_checkpoints`); the start
    /// height is not sent.
    Checkpoints,
}

/// What a decrypted message from the gateway means, before or after its `init`. Headers are
/// hashed (and `headers_compact` expanded, when we offered it) into `expanded`.
pub(crate) fn interpret<'a>(
    bytes: &'a [u8],
    chain_hash: &[u8; 32],
    ready: bool,
    expanded: &'a mut Expanded,
    compact: bool,
) -> Result<Interpreted<'a>, PeerError> {
    let message = Message::decode(bytes).map_err(PeerError::Decode)?;
    if !ready {
        let Message::Init(init) = message else {
            return Err(PeerError::NoInitFirst);
        };
        init.require_chain(chain_hash)?;
        let features = init.combined_features();
        return Ok(Interpreted::Ready {
            filters: features.is_set(FILTERS_FEATURE),
            blocks: features.is_set(BLOCKS_FEATURE),
            relay: features.is_set(RELAY_FEATURE),
            mempool: features.is_set(MEMPOOL_FEATURE),
            fees: features.is_set(lightwire_wire::FEES_FEATURE),
            tweaks: features.is_set(lightwire_wire::TWEAKS_FEATURE),
            mirrors: init,
        });
    }
    let event = match message {
        Message::Tip(t) => PeerEvent::Tip {
            height: t.height,
            header: Header::decode(t.header),
            chainwork: Work(U256::from_be_bytes(t.chainwork)),
        },
        Message::Headers(h) => PeerEvent::Headers {
            id: h.id,
            first_height: h.first_height,
            headers: h.headers,
            hashes: expanded.hash(h.headers),
            last: h.last,
        },
        Message::HeadersCompact(h) if compact => {
            let (headers, hashes) = expanded.expand(&h).map_err(PeerError::Decode)?;
            PeerEvent::Headers {
                id: h.id,
                first_height: h.first_height,
                headers,
                hashes,
                last: h.last,
            }
        }
        Message::FilterHeaders(m) | Message::TweakHeaders(m) => {
            // One linking for both chains; the variant keeps them apart for the receiver.
            let (before, headers, hashes) = expanded
                .link_filter_headers(&m)
                .ok_or(PeerError::FilterHeadersDisjoint)?;
            let (id, first_height, flags) = (m.id, m.first_height, m.flags);
            if matches!(message, Message::TweakHeaders(_)) {
                PeerEvent::TweakHeaders {
                    id,
                    first_height,
                    flags,
                    before,
                    headers,
                    hashes,
                }
            } else {
                PeerEvent::FilterHeaders {
                    id,
                    first_height,
                    flags,
                    before,
                    headers,
                    hashes,
                }
            }
        }
        Message::FilterCheckpoints(m) => PeerEvent::FilterCheckpoints(m),
        Message::TweakCheckpoints(m) => PeerEvent::TweakCheckpoints(m),
        Message::Tweaks(m) => PeerEvent::Tweaks(m),
        Message::Filters(m) => PeerEvent::Filters(m),
        Message::Block(m) => PeerEvent::Block(m),
        Message::SpentFrom(m) => PeerEvent::SpentFrom(m),
        Message::TxResult(m) => PeerEvent::TxResult(m),
        Message::MempoolDigest(m) => PeerEvent::MempoolDigest(m),
        Message::MempoolTx(m) => PeerEvent::MempoolTx(m),
        Message::FeeRates(m) => PeerEvent::FeeRates(m),
        Message::Warning(w) => PeerEvent::Warning(w.data_utf8()),
        Message::Error(e) => {
            return Err(PeerError::GatewayError(e.data_utf8().map(str::to_string)));
        }
        Message::Ping(p) => return Ok(Interpreted::Pong(p.pong_len())),
        Message::Pong(_) => PeerEvent::Pong,
        // Not offered: an odd type this connection does not know (BOLT 1: ignored).
        Message::Init(_)
        | Message::GetHeaders(_)
        | Message::HeadersCompact(_)
        | Message::GetFilterHeaders(_)
        | Message::GetFilterCheckpoints(_)
        | Message::GetFilters(_)
        | Message::GetTweakHeaders(_)
        | Message::GetTweakCheckpoints(_)
        | Message::GetTweaks(_)
        | Message::GetBlock(_)
        | Message::GetSpentFrom(_)
        | Message::SendTx(_)
        | Message::MempoolSubscribe(_)
        | Message::GetMempoolTx(_)
        | Message::GetFeeRates(_)
        | Message::Unknown { .. } => {
            return Ok(Interpreted::Event(None));
        }
    };
    Ok(Interpreted::Event(Some(event)))
}
