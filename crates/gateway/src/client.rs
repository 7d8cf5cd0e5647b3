//! A native client of the gateway (tokio): WebSocket, BOLT 8 initiator, `init`, then
//! messages. Used by the tests and the load generator; the browser client is issue 5's.

use core::fmt;
use std::net::SocketAddr;

use lightwire_noise::{
    ACT_TWO_LEN, FrameBuffer, FrameReader, HandshakeError, Initiator, PublicKey, ReceiveError,
    Receiver, SendError, Sender, frame_len,
};
use lightwire_wire::{EncodeError, Features, Init, MAX_MESSAGE_LEN, Message, Networks};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::ws::{self, WsError};

/// Why a client connection failed.
#[derive(Debug)]
pub enum ClientError {
    /// Socket error.
    Io(std::io::Error),
    /// WebSocket rules broken by the gateway.
    Ws(WsError),
    /// BOLT 8 handshake failed.
    Handshake(HandshakeError),
    /// A frame from the gateway failed.
    Receive(ReceiveError),
    /// Sealing failed.
    Send(SendError),
    /// Encoding a message failed.
    Encode(EncodeError),
    /// The gateway closed the connection.
    Closed,
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Io(e) => write!(f, "socket: {e}"),
            ClientError::Ws(e) => write!(f, "websocket: {e}"),
            ClientError::Handshake(e) => write!(f, "handshake: {e}"),
            ClientError::Receive(e) => write!(f, "frame: {e}"),
            ClientError::Send(e) => write!(f, "sealing: {e}"),
            ClientError::Encode(e) => write!(f, "encoding: {e}"),
            ClientError::Closed => f.write_str("closed by the gateway"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> Self {
        ClientError::Io(e)
    }
}

/// How the client cuts its transport frames into WebSocket messages (the gateway must not
/// care).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// One WebSocket message per transport frame (what browsers do).
    OnePerFrame,
    /// Each transport frame split into WebSocket messages of at most this many bytes.
    Split(usize),
}

/// The WebSocket side of a connection: reads frames, writes masked binary messages.
struct Link {
    stream: TcpStream,
    decoder: ws::Decoder,
    /// Read buffer; `rbuf[start..end]` not yet decoded, `rbuf[data.0..data.1]` WebSocket
    /// payload not yet consumed.
    rbuf: Box<[u8]>,
    start: usize,
    end: usize,
    data: (usize, usize),
    /// Outgoing WebSocket message being built (reused).
    wbuf: Vec<u8>,
    framing: Framing,
    mask_seed: u32,
}

impl Link {
    /// The next stretch of WebSocket payload in `rbuf` (reading from the socket if needed).
    async fn next_data(&mut self) -> Result<(usize, usize), ClientError> {
        loop {
            if self.data.0 < self.data.1 {
                return Ok(self.data);
            }
            if self.start < self.end {
                let (n, event) = self
                    .decoder
                    .decode(&mut self.rbuf[self.start..self.end])
                    .map_err(ClientError::Ws)?;
                let at = self.start;
                self.start += n;
                match event {
                    Some(ws::Event::Data(r)) => self.data = (at + r.start, at + r.end),
                    Some(ws::Event::Close) => return Err(ClientError::Closed),
                    _ => {}
                }
                continue;
            }
            self.start = 0;
            self.end = 0;
            self.data = (0, 0);
            let n = self.stream.read(&mut self.rbuf[..]).await?;
            if n == 0 {
                return Err(ClientError::Closed);
            }
            self.end = n;
        }
    }

    /// Send bytes as WebSocket binary messages, cut as [`Framing`] says.
    async fn send_raw(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        let piece = match self.framing {
            Framing::OnePerFrame => bytes.len().max(1),
            Framing::Split(n) => n.max(1),
        };
        for chunk in bytes.chunks(piece) {
            self.send_ws(chunk).await?;
        }
        Ok(())
    }

    /// Send bytes as one masked WebSocket binary message.
    async fn send_ws(&mut self, payload: &[u8]) -> Result<(), ClientError> {
        self.mask_seed = self
            .mask_seed
            .wrapping_mul(1_664_525)
            .wrapping_add(1_013_904_223);
        let mask = self.mask_seed.to_be_bytes();
        let (h, n) = ws::client_binary_header(payload.len(), mask);
        self.wbuf.clear();
        self.wbuf.extend_from_slice(&h[..n]);
        self.wbuf.extend_from_slice(payload);
        ws::apply_mask(&mut self.wbuf[n..], mask, 0);
        self.stream.write_all(&self.wbuf).await?;
        Ok(())
    }
}

/// A connected client that has sent its `init`.
pub struct Client {
    link: Link,
    sender: Sender,
    receiver: Receiver,
    reader: FrameReader,
    frame: FrameBuffer,
}

fn fresh_key() -> Result<lightwire_noise::SecretKey, ClientError> {
    crate::random_key().map_err(|e| ClientError::Io(std::io::Error::other(e.to_string())))
}

impl Client {
    /// Connect to `addr`, expecting the gateway's key `node_id`, and send `init` for the
    /// chain `chain_hash`.
    pub async fn connect(
        addr: SocketAddr,
        node_id: &PublicKey,
        chain_hash: [u8; 32],
        framing: Framing,
    ) -> Result<Client, ClientError> {
        let mut stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let key = *b"bGlnaHR3aXJlLWNsaWVudA==";
        let mut req = [0u8; 512];
        let n = ws::client_request(&addr.to_string(), "/", &key, &mut req);
        stream.write_all(&req[..n]).await?;
        let mut rbuf = vec![0u8; 2 * (MAX_MESSAGE_LEN + 64)].into_boxed_slice();
        let mut end = 0;
        let consumed = loop {
            let k = stream.read(&mut rbuf[end..]).await?;
            if k == 0 {
                return Err(ClientError::Closed);
            }
            end += k;
            if let Some(c) = ws::client_response(&rbuf[..end], &key).map_err(ClientError::Ws)? {
                break c;
            }
        };
        let mut link = Link {
            stream,
            decoder: ws::Decoder::client(),
            rbuf,
            start: consumed,
            end,
            data: (0, 0),
            wbuf: Vec::with_capacity(frame_len(MAX_MESSAGE_LEN) + ws::MAX_HEADER_LEN),
            framing,
            mask_seed: 0x9e37_79b9,
        };
        let (awaiting, act_one) = Initiator::start(fresh_key()?, *node_id, fresh_key()?);
        link.send_raw(&act_one).await?;
        let mut act_two = [0u8; ACT_TWO_LEN];
        let mut have = 0;
        while have < ACT_TWO_LEN {
            let (a, b) = link.next_data().await?;
            let take = (b - a).min(ACT_TWO_LEN - have);
            act_two[have..have + take].copy_from_slice(&link.rbuf[a..a + take]);
            have += take;
            link.data.0 = a + take;
        }
        let (act_three, transport) = awaiting
            .read_act_two(&act_two)
            .map_err(ClientError::Handshake)?;
        link.send_raw(&act_three).await?;
        let (sender, receiver) = transport.split();
        let mut client = Client {
            link,
            sender,
            receiver,
            reader: FrameReader::new(),
            frame: FrameBuffer::new(),
        };
        let chains = [chain_hash];
        let init = Init::new(Features::empty(), Some(Networks::from_chains(&chains)));
        client.send(&Message::Init(init)).await?;
        Ok(client)
    }

    /// Receive the next message and hand its bytes to `f`.
    pub async fn recv<R>(&mut self, f: impl FnOnce(&[u8]) -> R) -> Result<R, ClientError> {
        loop {
            let (a, b) = self.link.next_data().await?;
            let (taken, message) = self
                .reader
                .read(&mut self.receiver, &self.link.rbuf[a..b])
                .map_err(ClientError::Receive)?;
            self.link.data.0 = a + taken;
            if let Some(m) = message {
                return Ok(f(m));
            }
        }
    }

    /// Send a message.
    pub async fn send(&mut self, message: &Message<'_>) -> Result<(), ClientError> {
        let len = message
            .encode(self.frame.body_mut())
            .map_err(ClientError::Encode)?;
        let frame = self
            .frame
            .seal(&mut self.sender, len)
            .map_err(ClientError::Send)?;
        self.link.send_raw(frame).await
    }

    /// Send bytes as one WebSocket binary message as they are (tests that misbehave).
    pub async fn send_ws(&mut self, payload: &[u8]) -> Result<(), ClientError> {
        self.link.send_ws(payload).await
    }

    /// Seal `message` into a frame without sending it (tests that misbehave).
    pub fn seal(&mut self, message: &Message<'_>) -> Result<Vec<u8>, ClientError> {
        let len = message
            .encode(self.frame.body_mut())
            .map_err(ClientError::Encode)?;
        Ok(self
            .frame
            .seal(&mut self.sender, len)
            .map_err(ClientError::Send)?
            .to_vec())
    }

    /// The raw socket (tests that misbehave).
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.link.stream
    }
}
