//! One gateway connection, sans-IO: the BOLT 8 initiator handshake, `init` both ways (a
//! gateway on another network is refused), and the header-sync messages
//! (docs/PROTOCOL.md). Bytes from the WebSocket go in through [`Peer::receive`]; bytes to
//! send come out of [`Peer::transmit`]. The shell owns the socket and the timers.

use core::fmt;

use lightwire_chain::{BlockHash, HEADER_LEN, Header, Params, U256, Work};
use lightwire_noise::{
    ACT_TWO_LEN, AwaitingActTwo, FrameBuffer, FrameReader, HandshakeError, Initiator, PublicKey,
    ReceiveError, Receiver, SecretKey, SendError, Sender,
};
use lightwire_wire::{
    DecodeError, EncodeError, Features, GetHeaders, Init, InitRefusal, Message, Networks, Ping,
    Pong,
};

/// A gateway's address and key, from a connect string `ws[s]://host:port#<node-id-hex>`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ConnectString {
    /// The WebSocket URL (without the fragment).
    pub url: String,
    /// The gateway's static key, pinned for the handshake.
    pub node_id: PublicKey,
}

/// Why a connect string was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ConnectStringError {
    /// Not `ws://` or `wss://`.
    Scheme,
    /// No `#<node-id>` after the address.
    MissingNodeId,
    /// The node id is not a 33-byte compressed public key in hex.
    BadNodeId,
    /// No host.
    MissingHost,
}

impl fmt::Display for ConnectStringError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConnectStringError::Scheme => "a gateway address starts with ws:// or wss://",
            ConnectStringError::MissingNodeId => {
                "a gateway address ends with #<node id> (the gateway's public key, 66 hex digits)"
            }
            ConnectStringError::BadNodeId => {
                "the node id after # is not a 33-byte compressed public key in hex"
            }
            ConnectStringError::MissingHost => "the gateway address has no host",
        })
    }
}

impl std::error::Error for ConnectStringError {}

impl ConnectString {
    /// Parse `ws[s]://host:port#<node-id-hex>`.
    pub fn parse(s: &str) -> Result<ConnectString, ConnectStringError> {
        let s = s.trim();
        let rest = s
            .strip_prefix("ws://")
            .or_else(|| s.strip_prefix("wss://"))
            .ok_or(ConnectStringError::Scheme)?;
        let (address, id) = rest
            .split_once('#')
            .ok_or(ConnectStringError::MissingNodeId)?;
        if address.is_empty() || address.starts_with('/') {
            return Err(ConnectStringError::MissingHost);
        }
        let bytes = decode_hex(id).ok_or(ConnectStringError::BadNodeId)?;
        let node_id = PublicKey::from_slice(&bytes).map_err(|_| ConnectStringError::BadNodeId)?;
        let url = s[..s.len() - id.len() - 1].to_string();
        Ok(ConnectString { url, node_id })
    }
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Why a connection to a gateway ended.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum PeerError {
    /// The BOLT 8 handshake failed (a wrong pinned key shows up here).
    Handshake(HandshakeError),
    /// A frame from the gateway failed to decrypt.
    Receive(ReceiveError),
    /// A message from the gateway does not decode.
    Decode(DecodeError),
    /// The gateway's `init` names no network.
    MissingNetworks,
    /// The gateway serves another network.
    WrongNetwork,
    /// The gateway requires a feature we do not know.
    UnknownRequiredFeature(usize),
    /// The gateway sent `error`.
    GatewayError(String),
    /// The gateway's first message was not `init`.
    NoInitFirst,
    /// A request was made before the connection was ready.
    NotReady,
    /// Sealing failed.
    Send(SendError),
    /// Encoding failed.
    Encode(EncodeError),
    /// An earlier error ended this connection.
    Failed,
}

impl fmt::Display for PeerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerError::Handshake(e) => write!(f, "handshake with the gateway failed: {e}"),
            PeerError::Receive(e) => write!(f, "a message from the gateway was corrupted: {e}"),
            PeerError::Decode(e) => {
                write!(f, "the gateway sent a message that does not decode: {e}")
            }
            PeerError::MissingNetworks => {
                f.write_str("the gateway did not say which network it serves")
            }
            PeerError::WrongNetwork => f.write_str("the gateway serves another Bitcoin network"),
            PeerError::UnknownRequiredFeature(b) => {
                write!(
                    f,
                    "the gateway requires feature bit {b}, which this client does not know"
                )
            }
            PeerError::GatewayError(e) => write!(f, "the gateway reported an error: {e}"),
            PeerError::NoInitFirst => f.write_str("the gateway did not start with init"),
            PeerError::NotReady => f.write_str("the connection is not ready"),
            PeerError::Send(e) => write!(f, "sealing a message failed: {e}"),
            PeerError::Encode(e) => write!(f, "encoding a message failed: {e}"),
            PeerError::Failed => f.write_str("the connection already failed"),
        }
    }
}

impl std::error::Error for PeerError {}

impl From<InitRefusal> for PeerError {
    fn from(r: InitRefusal) -> Self {
        match r {
            InitRefusal::UnknownRequiredFeature(bit) => PeerError::UnknownRequiredFeature(bit),
            InitRefusal::MissingNetworks => PeerError::MissingNetworks,
            InitRefusal::WrongNetwork => PeerError::WrongNetwork,
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
    /// Headers answering request `id`.
    Headers {
        /// The request.
        id: u32,
        /// Height of the first (a hint).
        first_height: u32,
        /// `80 * n` bytes.
        headers: &'a [u8],
        /// The last message of this answer.
        last: bool,
    },
    /// A `warning` (printable text, or `None`).
    Warning(Option<&'a str>),
    /// A `pong`.
    Pong,
}

enum State {
    ActTwo(Box<AwaitingActTwo>),
    Transport {
        sender: Sender,
        receiver: Receiver,
        ready: bool,
    },
    Failed,
}

/// One gateway connection.
pub struct Peer {
    chain_hash: [u8; 32],
    state: State,
    act_two: [u8; ACT_TWO_LEN],
    act_two_len: usize,
    reader: FrameReader,
    frame: FrameBuffer,
    /// Bytes waiting to be sent (frames back to back; one WebSocket message).
    out: Vec<u8>,
    /// A pong owed: only the latest ping is answered, once per `receive`, so that a
    /// gateway cannot make us queue 64 KB of pong per 40-byte ping.
    pong_due: Option<u16>,
}

impl Peer {
    /// Start a handshake with the gateway whose key is `gateway` (pinned), as
    /// `local_static`, for `params`' network. Act one is queued for [`Self::transmit`].
    pub fn new(
        params: &Params,
        local_static: SecretKey,
        gateway: PublicKey,
        ephemeral: SecretKey,
    ) -> Peer {
        let (state, act_one) = Initiator::start(local_static, gateway, ephemeral);
        let mut out = Vec::with_capacity(lightwire_noise::MAX_FRAME_LEN);
        out.extend_from_slice(&act_one);
        Peer {
            chain_hash: params.genesis.block_hash().0,
            state: State::ActTwo(Box::new(state)),
            act_two: [0; ACT_TWO_LEN],
            act_two_len: 0,
            reader: FrameReader::new(),
            frame: FrameBuffer::new(),
            out,
            pong_due: None,
        }
    }

    /// Whether `init` has been exchanged.
    pub fn is_ready(&self) -> bool {
        matches!(self.state, State::Transport { ready: true, .. })
    }

    /// Bytes to send now (one WebSocket message), if any; call [`Self::sent`] after.
    pub fn transmit(&self) -> Option<&[u8]> {
        (!self.out.is_empty()).then_some(&self.out[..])
    }

    /// The bytes from [`Self::transmit`] went out.
    pub fn sent(&mut self) {
        self.out.clear();
    }

    /// Take bytes from the gateway (a WebSocket message's payload, any chunking), handing
    /// each event to `on_event`. After an error the peer stays failed.
    pub fn receive(
        &mut self,
        mut data: &[u8],
        on_event: &mut impl FnMut(PeerEvent<'_>),
    ) -> Result<(), PeerError> {
        let r = (|| {
            while !data.is_empty() {
                match &mut self.state {
                    State::Failed => return Err(PeerError::Failed),
                    State::ActTwo(_) => {
                        let take = (ACT_TWO_LEN - self.act_two_len).min(data.len());
                        self.act_two[self.act_two_len..self.act_two_len + take]
                            .copy_from_slice(&data[..take]);
                        self.act_two_len += take;
                        data = &data[take..];
                        if self.act_two_len == ACT_TWO_LEN {
                            self.finish_handshake()?;
                        }
                    }
                    State::Transport { .. } => {
                        let taken = self.frames(data, on_event)?;
                        data = &data[taken..];
                    }
                }
            }
            if let Some(len) = self.pong_due.take() {
                let n =
                    Pong::encode_zeroed(len, self.frame.body_mut()).map_err(PeerError::Encode)?;
                self.queue(n)?;
            }
            Ok(())
        })();
        if r.is_err() {
            self.state = State::Failed;
        }
        r
    }

    fn finish_handshake(&mut self) -> Result<(), PeerError> {
        let State::ActTwo(state) = core::mem::replace(&mut self.state, State::Failed) else {
            return Err(PeerError::Failed);
        };
        let (act_three, transport) = state
            .read_act_two(&self.act_two)
            .map_err(PeerError::Handshake)?;
        self.out.extend_from_slice(&act_three);
        let (sender, receiver) = transport.split();
        self.state = State::Transport {
            sender,
            receiver,
            ready: false,
        };
        let chains = [self.chain_hash];
        let init = Init::new(Features::empty(), Some(Networks::from_chains(&chains)));
        self.send(&Message::Init(init))
    }

    /// Decrypt frames from `data` until it runs out or one message is handled; returns the
    /// bytes taken.
    fn frames(
        &mut self,
        data: &[u8],
        on_event: &mut impl FnMut(PeerEvent<'_>),
    ) -> Result<usize, PeerError> {
        let State::Transport {
            receiver, ready, ..
        } = &mut self.state
        else {
            return Err(PeerError::Failed);
        };
        let (taken, message) = self
            .reader
            .read(receiver, data)
            .map_err(PeerError::Receive)?;
        let Some(bytes) = message else {
            return Ok(taken);
        };
        let message = Message::decode(bytes).map_err(PeerError::Decode)?;
        if !*ready {
            let Message::Init(init) = message else {
                return Err(PeerError::NoInitFirst);
            };
            init.require_chain(&self.chain_hash)?;
            *ready = true;
            on_event(PeerEvent::Ready);
            return Ok(taken);
        }
        match message {
            Message::Tip(t) => on_event(PeerEvent::Tip {
                height: t.height,
                header: Header::decode(t.header),
                chainwork: Work(U256::from_be_bytes(t.chainwork)),
            }),
            Message::Headers(h) => on_event(PeerEvent::Headers {
                id: h.id,
                first_height: h.first_height,
                headers: h.headers,
                last: h.last,
            }),
            Message::Warning(w) => on_event(PeerEvent::Warning(w.data_utf8())),
            Message::Error(e) => {
                return Err(PeerError::GatewayError(
                    e.data_utf8().unwrap_or("(not printable)").to_string(),
                ));
            }
            Message::Ping(p) => self.pong_due = p.pong_len(),
            Message::Pong(_) => on_event(PeerEvent::Pong),
            Message::Init(_) | Message::GetHeaders(_) | Message::Unknown { .. } => {}
        }
        Ok(taken)
    }

    /// Seal the `len` bytes in the frame buffer's body and queue the frame.
    fn queue(&mut self, len: usize) -> Result<(), PeerError> {
        let State::Transport { sender, .. } = &mut self.state else {
            return Err(PeerError::NotReady);
        };
        let frame = self.frame.seal(sender, len).map_err(PeerError::Send)?;
        self.out.extend_from_slice(frame);
        Ok(())
    }

    fn send(&mut self, message: &Message<'_>) -> Result<(), PeerError> {
        let n = message
            .encode(self.frame.body_mut())
            .map_err(PeerError::Encode)?;
        self.queue(n)
    }

    /// Ask for at most `max_count` headers after the first of `locator` on the gateway's
    /// chain (newest first).
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
        self.send(&Message::GetHeaders(req))
    }

    /// Send a keepalive `ping`.
    pub fn ping(&mut self) -> Result<(), PeerError> {
        if !self.is_ready() {
            return Err(PeerError::NotReady);
        }
        let n = Ping::encode_zeroed(0, 0, self.frame.body_mut()).map_err(PeerError::Encode)?;
        self.queue(n)
    }
}

/// The headers of a `headers` event, decoded.
pub fn decode_headers(bytes: &[u8]) -> impl Iterator<Item = Header> + '_ {
    bytes
        .chunks_exact(HEADER_LEN)
        .filter_map(Header::from_slice)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    /// A peer and a responder (the gateway's side of BOLT 8) after the handshake and both
    /// inits; returns the peer and the gateway's transport.
    fn connected() -> (Peer, lightwire_noise::Transport) {
        use lightwire_chain::REGTEST;
        use lightwire_noise::Responder;
        let key = |b| SecretKey::from_bytes(&[b; 32]).unwrap();
        let gateway_key = key(9);
        let mut peer = Peer::new(&REGTEST, key(1), gateway_key.public_key(), key(2));
        let act_one = peer.transmit().unwrap().to_vec();
        peer.sent();
        let (awaiting, act_two) = Responder::start(gateway_key, key(3))
            .read_act_one(&act_one)
            .unwrap();
        peer.receive(&act_two, &mut |_| {}).unwrap();
        let out = peer.transmit().unwrap().to_vec();
        peer.sent();
        let mut gw = awaiting.read_act_three(&out[..66]).unwrap();
        // The gateway's init.
        let chains = [REGTEST.genesis.block_hash().0];
        let init = Init::new(Features::empty(), Some(Networks::from_chains(&chains)));
        let mut body = vec![0u8; 200];
        let n = init.encode(&mut body).unwrap();
        let mut frame = vec![0u8; n + 34];
        let len = gw.sender().encrypt(&body[..n], &mut frame).unwrap();
        let mut ready = false;
        peer.receive(&frame[..len], &mut |e| ready |= e == PeerEvent::Ready)
            .unwrap();
        assert!(ready && peer.is_ready());
        (peer, gw)
    }

    #[test]
    fn many_pings_get_one_pong() {
        let (mut peer, mut gw) = connected();
        let mut wire = Vec::new();
        let mut body = [0u8; 16];
        for _ in 0..1000 {
            let n = Ping::encode_zeroed(65_531, 0, &mut body).unwrap();
            let mut frame = [0u8; 64];
            let len = gw.sender().encrypt(&body[..n], &mut frame).unwrap();
            wire.extend_from_slice(&frame[..len]);
        }
        peer.receive(&wire, &mut |_| {}).unwrap();
        // One pong of 65,531 zero bytes (plus type, length and MACs), not a thousand.
        let out = peer.transmit().unwrap();
        assert_eq!(out.len(), lightwire_noise::frame_len(2 + 2 + 65_531));
    }

    #[test]
    fn another_network_is_refused() {
        use lightwire_chain::MAINNET;
        let key = |b| SecretKey::from_bytes(&[b; 32]).unwrap();
        let gateway_key = key(9);
        let mut peer = Peer::new(&MAINNET, key(1), gateway_key.public_key(), key(2));
        let act_one = peer.transmit().unwrap().to_vec();
        peer.sent();
        let (awaiting, act_two) = lightwire_noise::Responder::start(gateway_key, key(3))
            .read_act_one(&act_one)
            .unwrap();
        peer.receive(&act_two, &mut |_| {}).unwrap();
        let out = peer.transmit().unwrap().to_vec();
        let mut gw = awaiting.read_act_three(&out[..66]).unwrap();
        let chains = [lightwire_chain::REGTEST.genesis.block_hash().0];
        let init = Init::new(Features::empty(), Some(Networks::from_chains(&chains)));
        let mut body = vec![0u8; 200];
        let n = init.encode(&mut body).unwrap();
        let mut frame = vec![0u8; n + 34];
        let len = gw.sender().encrypt(&body[..n], &mut frame).unwrap();
        assert_eq!(
            peer.receive(&frame[..len], &mut |_| {}),
            Err(PeerError::WrongNetwork)
        );
        assert_eq!(peer.receive(&[0], &mut |_| {}), Err(PeerError::Failed));
    }

    #[test]
    fn connect_strings() {
        let id = "0271979bbcaeab937120bac197c1cfe4248e85cc1263a7add019937772ed19945b";
        let c = ConnectString::parse(&format!("ws://127.0.0.1:8335#{id}")).unwrap();
        assert_eq!(c.url, "ws://127.0.0.1:8335");
        assert_eq!(c.node_id.serialize().to_vec(), decode_hex(id).unwrap());
        let c = ConnectString::parse(&format!(" wss://gw.example:443/x#{id} ")).unwrap();
        assert_eq!(c.url, "wss://gw.example:443/x");
        assert_eq!(
            ConnectString::parse(&format!("http://h:1#{id}")),
            Err(ConnectStringError::Scheme)
        );
        assert_eq!(
            ConnectString::parse("ws://h:1"),
            Err(ConnectStringError::MissingNodeId)
        );
        assert_eq!(
            ConnectString::parse("ws://h:1#02abc"),
            Err(ConnectStringError::BadNodeId)
        );
        assert_eq!(
            ConnectString::parse(&format!("ws://#{id}")),
            Err(ConnectStringError::MissingHost)
        );
        let bad_point = format!("02{}", "ff".repeat(32));
        assert_eq!(
            ConnectString::parse(&format!("ws://h:1#{bad_point}")),
            Err(ConnectStringError::BadNodeId)
        );
    }
}
