//! A native client of the gateway (tokio): the WebSocket upgrade and frames, and a
//! [`Link`] (lightwire-proto's BOLT 8 initiator, which sends `init`) for raw messages. Used
//! by the tests, which also misbehave through it, and by the load generator; the browser's
//! client is the `lightwire` crate. It speaks `ws://` over a socket or `wss://` over
//! tokio-rustls ([`Client::connect_tls`]), and can play a proxy in front of the gateway
//! (extra upgrade headers such as `X-Forwarded-For`: [`Client::upgrade`]).

use std::net::SocketAddr;
use std::sync::Arc;

use lightwire_noise::{PublicKey, frame_len};
use lightwire_proto::ws::{self, WsError};
use lightwire_proto::{Link, PeerError};
use lightwire_wire::{MAX_MESSAGE_LEN, Message};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::ClientConfig;

/// Why a client connection failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Socket error.
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    /// WebSocket rules broken by the gateway.
    #[error("websocket: {0}")]
    Ws(#[from] WsError),
    /// The BOLT 8 link failed (handshake, a frame, sealing, encoding).
    #[error(transparent)]
    Link(#[from] PeerError),
    /// The gateway closed the connection.
    #[error("closed by the gateway")]
    Closed,
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
struct WsLink<S> {
    stream: S,
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

impl<S: AsyncRead + AsyncWrite + Unpin> WsLink<S> {
    /// The next stretch of WebSocket payload in `rbuf` (reading from the socket if needed).
    async fn next_data(&mut self) -> Result<(usize, usize), ClientError> {
        loop {
            if self.data.0 < self.data.1 {
                return Ok(self.data);
            }
            if self.start < self.end {
                let (n, event) = self.decoder.decode(&mut self.rbuf[self.start..self.end])?;
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
        self.wbuf.clear();
        ws::push_client_frame(&mut self.wbuf, payload, self.mask_seed.to_be_bytes());
        self.stream.write_all(&self.wbuf).await?;
        self.stream.flush().await?;
        Ok(())
    }
}

/// A connected client that has sent its `init`, over a socket (`S`: a [`TcpStream`]) or
/// TLS.
pub struct Client<S = TcpStream> {
    link: Link,
    ws: WsLink<S>,
}

fn fresh_key() -> Result<lightwire_noise::SecretKey, ClientError> {
    lightwire_noise::SecretKey::random()
        .map_err(|e| ClientError::Io(std::io::Error::other(e.to_string())))
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
        let stream = TcpStream::connect(addr).await?;
        Client::over(stream, node_id, chain_hash, framing).await
    }

    /// [`Client::connect`] over a socket already connected to the gateway (one bound to a
    /// chosen source address, say).
    pub async fn over(
        stream: TcpStream,
        node_id: &PublicKey,
        chain_hash: [u8; 32],
        framing: Framing,
    ) -> Result<Client, ClientError> {
        Client::over_offering(stream, node_id, chain_hash, framing, false).await
    }

    /// [`Client::over`], offering `headers_compact` in `init` when `compact` (answers then
    /// come as `headers_compact`, for the caller to decode).
    pub async fn over_offering(
        stream: TcpStream,
        node_id: &PublicKey,
        chain_hash: [u8; 32],
        framing: Framing,
        compact: bool,
    ) -> Result<Client, ClientError> {
        let addr = stream.peer_addr()?;
        stream.set_nodelay(true)?;
        let host = addr.to_string();
        Client::upgrade(stream, &host, "", node_id, chain_hash, framing, compact).await
    }

    /// Connect to `addr` over TLS, checking its certificate for `server_name` (a DNS name
    /// or an IP address) with `config`, then as [`Client::connect`] (offering
    /// `headers_compact` when `compact`).
    pub async fn connect_tls(
        addr: SocketAddr,
        server_name: &str,
        config: Arc<ClientConfig>,
        node_id: &PublicKey,
        chain_hash: [u8; 32],
        framing: Framing,
        compact: bool,
    ) -> Result<Client<TlsStream<TcpStream>>, ClientError> {
        let name = pki_types::ServerName::try_from(server_name.to_owned())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let tls = TlsConnector::from(config).connect(name, tcp).await?;
        let host = format!("{server_name}:{}", addr.port());
        Client::upgrade(tls, &host, "", node_id, chain_hash, framing, compact).await
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Client<S> {
    /// The WebSocket upgrade on `stream` (already connected, through TLS or not) for
    /// `host`, with `extra` header lines (each ending in `\r\n`; a proxy's
    /// `X-Forwarded-For`, say), then the handshake and `init` as [`Client::connect`],
    /// offering `headers_compact` when `compact`.
    pub async fn upgrade(
        mut stream: S,
        host: &str,
        extra: &str,
        node_id: &PublicKey,
        chain_hash: [u8; 32],
        framing: Framing,
        compact: bool,
    ) -> Result<Client<S>, ClientError> {
        let key = *b"bGlnaHR3aXJlLWNsaWVudA==";
        let mut req = [0u8; 512];
        let n = ws::client_request(host, "/", &key, &mut req);
        // The request ends with its blank line: the extra lines go before it.
        stream.write_all(&req[..n - 2]).await?;
        stream.write_all(extra.as_bytes()).await?;
        stream.write_all(b"\r\n").await?;
        stream.flush().await?;
        let mut rbuf = vec![0u8; 2 * (MAX_MESSAGE_LEN + 64)].into_boxed_slice();
        let mut end = 0;
        let consumed = loop {
            let k = stream.read(&mut rbuf[end..]).await?;
            if k == 0 {
                return Err(ClientError::Closed);
            }
            end += k;
            if let Some(c) = ws::client_response(&rbuf[..end], &key)? {
                break c;
            }
        };
        let ws = WsLink {
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
        let mut link = Link::new(chain_hash, fresh_key()?, *node_id, fresh_key()?);
        link.offer_compact_headers(compact);
        let mut client = Client { link, ws };
        // Act one; then act two in, act three and init out.
        client.flush().await?;
        while !client.link.is_established() {
            let (a, b) = client.ws.next_data().await?;
            let (taken, _) = client.link.read(&client.ws.rbuf[a..b])?;
            client.ws.data.0 = a + taken;
        }
        client.flush().await?;
        Ok(client)
    }

    /// Send what the link has queued.
    async fn flush(&mut self) -> Result<(), ClientError> {
        if let Some(out) = self.link.transmit() {
            self.ws.send_raw(out).await?;
            self.link.sent();
        }
        Ok(())
    }

    /// Receive the next message and hand its bytes to `f`.
    pub async fn recv<R>(&mut self, f: impl FnOnce(&[u8]) -> R) -> Result<R, ClientError> {
        loop {
            let (a, b) = self.ws.next_data().await?;
            let (taken, message) = self.link.read(&self.ws.rbuf[a..b])?;
            self.ws.data.0 = a + taken;
            if let Some(m) = message {
                return Ok(f(m));
            }
        }
    }

    /// Send a message.
    pub async fn send(&mut self, message: &Message<'_>) -> Result<(), ClientError> {
        let frame = self.link.seal(message)?;
        self.ws.send_raw(frame).await
    }

    /// Send bytes as one WebSocket binary message as they are (tests that misbehave).
    pub async fn send_ws(&mut self, payload: &[u8]) -> Result<(), ClientError> {
        self.ws.send_ws(payload).await
    }

    /// Seal `message` into a frame without sending it (tests that misbehave).
    pub fn seal(&mut self, message: &Message<'_>) -> Result<Vec<u8>, ClientError> {
        Ok(self.link.seal(message)?.to_vec())
    }

    /// The raw stream (tests that misbehave).
    pub fn stream(&mut self) -> &mut S {
        &mut self.ws.stream
    }
}
