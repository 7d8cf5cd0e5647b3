//! WebSocket (RFC 6455), sans-IO: the opening handshake, and binary frames streamed through
//! without reassembly. The transport above does its own framing, so the payload of each
//! WebSocket frame is handed on, unmasked in place, as it arrives; nothing is buffered but
//! control frames (at most 125 bytes). Nothing allocates per frame.
//!
//! Our own frame codec rather than tungstenite's, because the gateway's costs are per
//! connection and per message: tungstenite reserves a read buffer per connection (128 KiB
//! by default) and takes each outgoing message as an owned `Bytes` (an allocation per
//! message), while the gateway holds 4.7 KiB per idle connection and serves with no
//! allocation per message once warm (benches/README.md). Here the only per-connection state
//! is [`Decoder`] (about 150 bytes). The HTTP upgrade itself is parsed by `httparse`.

use sha1::{Digest, Sha1};

/// Largest HTTP upgrade request accepted.
pub const MAX_REQUEST_LEN: usize = 4096;
/// Largest frame header: 2 bytes, an 8-byte length, a 4-byte mask (client frames only).
pub const MAX_HEADER_LEN: usize = 14;
/// Header lines accepted in an upgrade request or response.
const MAX_HEADER_LINES: usize = 32;
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Why a WebSocket connection is refused or ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum WsError {
    /// The upgrade request is longer than [`MAX_REQUEST_LEN`].
    #[error("upgrade request over {MAX_REQUEST_LEN} bytes")]
    RequestTooLong,
    /// The upgrade request is not a WebSocket upgrade (the missing or wrong part).
    #[error("not a WebSocket upgrade: {0}")]
    BadRequest(&'static str),
    /// A client frame without a mask (RFC 6455 5.1: the server must close).
    #[error("client frame not masked")]
    Unmasked,
    /// A text frame: this protocol is binary only.
    #[error("text frame (binary only)")]
    Text,
    /// A reserved bit or opcode.
    #[error("reserved bit or opcode set")]
    Reserved,
    /// A control frame longer than 125 bytes or fragmented.
    #[error("control frame too long or fragmented")]
    BadControl,
    /// A frame length over 2^63 (the top bit must be 0).
    #[error("frame length out of range")]
    BadLength,
    /// The peer's handshake response is not a valid 101 for our key.
    #[error("bad upgrade response: {0}")]
    BadResponse(&'static str),
}

/// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`.
pub fn accept_key(key: &[u8]) -> [u8; 28] {
    let digest: [u8; 20] = Sha1::new()
        .chain_update(key)
        .chain_update(GUID)
        .finalize()
        .into();
    base64_20(&digest)
}

/// Base64 of 20 bytes (28 characters with one `=`).
fn base64_20(b: &[u8; 20]) -> [u8; 28] {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = [b'='; 28];
    let mut o = 0;
    for chunk in b.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out[o + i] = ALPHABET[((n >> (18 - 6 * i)) & 63) as usize];
        }
        o += 4;
    }
    out
}

/// Whether a comma-separated header value lists `token` (case-insensitive).
fn lists(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// Look at a (possibly partial) upgrade request. `Ok(None)`: not complete yet, read more.
/// `Ok(Some((consumed, response)))`: the request's length and the 101 response to send
/// (`response_buf[..n]`).
pub fn server_handshake(
    request: &[u8],
    response_buf: &mut [u8; 256],
) -> Result<Option<(usize, usize)>, WsError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADER_LINES];
    let mut req = httparse::Request::new(&mut headers);
    let end = match req.parse(request) {
        Ok(httparse::Status::Complete(end)) => end,
        Ok(httparse::Status::Partial) if request.len() >= MAX_REQUEST_LEN => {
            return Err(WsError::RequestTooLong);
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(WsError::BadRequest("header count")),
        Err(httparse::Error::Version | httparse::Error::Token) if !request.starts_with(b"GET ") => {
            return Err(WsError::BadRequest("request line"));
        }
        Err(_) => return Err(WsError::BadRequest("header line")),
    };
    if end > MAX_REQUEST_LEN {
        return Err(WsError::RequestTooLong);
    }
    if req.method != Some("GET") || req.version != Some(1) {
        return Err(WsError::BadRequest("request line"));
    }
    let header = |name: &str| {
        req.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value.trim_ascii())
    };
    if !header("upgrade").is_some_and(|v| v.eq_ignore_ascii_case(b"websocket")) {
        return Err(WsError::BadRequest("Upgrade: websocket"));
    }
    if !header("connection").is_some_and(|v| lists(v, b"upgrade")) {
        return Err(WsError::BadRequest("Connection: Upgrade"));
    }
    if header("sec-websocket-version") != Some(b"13") {
        return Err(WsError::BadRequest("Sec-WebSocket-Version: 13"));
    }
    // The key is 16 random bytes in base64: 24 characters.
    let key = header("sec-websocket-key")
        .filter(|k| k.len() == 24)
        .ok_or(WsError::BadRequest("Sec-WebSocket-Key"))?;
    let accept = accept_key(key);
    let n = write_parts(
        response_buf,
        &[
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ",
            &accept,
            b"\r\n\r\n",
        ],
    );
    Ok(Some((end, n)))
}

/// The client a proxy in front of the gateway names in an upgrade request (complete, as
/// [`server_handshake`] found it): the last address of the last `X-Forwarded-For` header.
///
/// That is the one the nearest proxy wrote (nginx's `$remote_addr`, or the end of
/// `$proxy_add_x_forwarded_for`); anything before it came from the client or from
/// proxies further out, which anyone can forge. Only ask this of a request from a
/// proxy the gateway trusts. A request without one, or with something other than an
/// IP address there, is refused: a proxy that does not say who its client is would
/// put every client behind its own address.
pub fn forwarded_for(request: &[u8]) -> Result<core::net::IpAddr, WsError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADER_LINES];
    let mut req = httparse::Request::new(&mut headers);
    req.parse(request)
        .map_err(|_| WsError::BadRequest("header line"))?;
    let bad = WsError::BadRequest("X-Forwarded-For");
    let value = req
        .headers
        .iter()
        .rev()
        .find(|h| h.name.eq_ignore_ascii_case("x-forwarded-for"))
        .ok_or(bad)?
        .value;
    let last = value.rsplit(|&b| b == b',').next().unwrap_or(value);
    core::str::from_utf8(last.trim_ascii())
        .ok()
        .and_then(|a| a.parse().ok())
        .ok_or(bad)
}

/// Write a client's upgrade request for `host` and `path` with `key` (24 base64
/// characters) into `out`; returns its length.
pub fn client_request(host: &str, path: &str, key: &[u8; 24], out: &mut [u8; 512]) -> usize {
    write_parts(
        out,
        &[
            b"GET ",
            path.as_bytes(),
            b" HTTP/1.1\r\nHost: ",
            host.as_bytes(),
            b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ",
            key,
            b"\r\n\r\n",
        ],
    )
}

/// Check a server's response to [`client_request`]. `Ok(None)`: incomplete.
/// `Ok(Some(consumed))`: the response's length.
pub fn client_response(response: &[u8], key: &[u8; 24]) -> Result<Option<usize>, WsError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADER_LINES];
    let mut resp = httparse::Response::new(&mut headers);
    let end = match resp.parse(response) {
        Ok(httparse::Status::Complete(end)) => end,
        Ok(httparse::Status::Partial) if response.len() >= MAX_REQUEST_LEN => {
            return Err(WsError::BadResponse("too long"));
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(WsError::BadResponse("status")),
    };
    if resp.code != Some(101) || resp.version != Some(1) {
        return Err(WsError::BadResponse("status"));
    }
    let header = |name: &str, ok: &dyn Fn(&[u8]) -> bool| {
        resp.headers
            .iter()
            .any(|h| h.name.eq_ignore_ascii_case(name) && ok(h.value.trim_ascii()))
    };
    if !header("upgrade", &|v| v.eq_ignore_ascii_case(b"websocket")) {
        return Err(WsError::BadResponse("Upgrade: websocket"));
    }
    if !header("connection", &|v| lists(v, b"upgrade")) {
        return Err(WsError::BadResponse("Connection: Upgrade"));
    }
    let want = accept_key(key);
    if !header("sec-websocket-accept", &|v| v == want) {
        return Err(WsError::BadResponse("Sec-WebSocket-Accept"));
    }
    Ok(Some(end))
}

fn write_parts(out: &mut [u8], parts: &[&[u8]]) -> usize {
    let mut n = 0;
    for p in parts {
        let take = p.len().min(out.len() - n);
        out[n..n + take].copy_from_slice(&p[..take]);
        n += take;
    }
    n
}

/// Opcodes.
mod op {
    pub const CONTINUATION: u8 = 0;
    pub const TEXT: u8 = 1;
    pub const BINARY: u8 = 2;
    pub const CLOSE: u8 = 8;
    pub const PING: u8 = 9;
    pub const PONG: u8 = 10;
}

/// Header of a server (unmasked) binary frame carrying `len` bytes; returns the header and
/// its length.
pub fn binary_header(len: usize) -> ([u8; MAX_HEADER_LEN], usize) {
    header(op::BINARY, len, None)
}

/// Header of a server control frame (pong, close) carrying `len` (<= 125) bytes.
fn control_header(opcode: u8, len: usize) -> ([u8; MAX_HEADER_LEN], usize) {
    header(opcode, len, None)
}

fn header(opcode: u8, len: usize, mask: Option<[u8; 4]>) -> ([u8; MAX_HEADER_LEN], usize) {
    let mut h = [0u8; MAX_HEADER_LEN];
    h[0] = 0x80 | opcode;
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    let mut n = if len < 126 {
        h[1] = mask_bit | len as u8;
        2
    } else if len <= 0xffff {
        h[1] = mask_bit | 126;
        h[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        4
    } else {
        h[1] = mask_bit | 127;
        h[2..10].copy_from_slice(&(len as u64).to_be_bytes());
        10
    };
    if let Some(m) = mask {
        h[n..n + 4].copy_from_slice(&m);
        n += 4;
    }
    (h, n)
}

/// A client (masked) binary frame header for `len` bytes with `mask`. Mask the payload with
/// [`apply_mask`] starting at offset 0.
pub fn client_binary_header(len: usize, mask: [u8; 4]) -> ([u8; MAX_HEADER_LEN], usize) {
    header(op::BINARY, len, Some(mask))
}

/// Append one client (masked) binary frame carrying `payload` to `out`: what a browser
/// sends for `WebSocket.send`, for native clients and tests.
pub fn push_client_frame(out: &mut Vec<u8>, payload: &[u8], mask: [u8; 4]) {
    let (h, n) = client_binary_header(payload.len(), mask);
    out.extend_from_slice(&h[..n]);
    let at = out.len();
    out.extend_from_slice(payload);
    apply_mask(&mut out[at..], mask, 0);
}

/// XOR `data` with `mask`, `data[0]` being byte `offset` of the frame's payload.
pub fn apply_mask(data: &mut [u8], mask: [u8; 4], offset: u64) {
    for (i, b) in data.iter_mut().enumerate() {
        *b ^= mask[((offset + i as u64) % 4) as usize];
    }
}

/// What the decoder found in the input.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// Binary payload bytes, unmasked in place: `input[range]`.
    Data(core::ops::Range<usize>),
    /// A ping; answer with [`Decoder::pong`].
    Ping,
    /// A pong (ignored by the protocol).
    Pong,
    /// The peer closes.
    Close,
}

/// Decodes frames from one peer: streams binary payloads out, buffers control frames.
#[derive(Debug)]
pub struct Decoder {
    /// Whether frames must be masked (server side) or must not be (client side).
    expect_masked: bool,
    header: [u8; MAX_HEADER_LEN],
    have: usize,
    /// Current frame once its header is complete.
    frame: Option<Frame>,
    control: [u8; 125],
    control_len: usize,
    /// Whether a fragmented binary message is open (continuations allowed).
    in_binary: bool,
    failed: bool,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    opcode: u8,
    mask: Option<[u8; 4]>,
    len: u64,
    done: u64,
}

impl Decoder {
    /// A server's decoder (client frames are masked).
    pub fn server() -> Decoder {
        Decoder::new(true)
    }

    /// A client's decoder (server frames are not masked).
    pub fn client() -> Decoder {
        Decoder::new(false)
    }

    fn new(expect_masked: bool) -> Decoder {
        Decoder {
            expect_masked,
            header: [0; MAX_HEADER_LEN],
            have: 0,
            frame: None,
            control: [0; 125],
            control_len: 0,
            in_binary: false,
            failed: false,
        }
    }

    /// The last ping's payload, and the pong frame to send back (header then payload) in
    /// `out`; returns its length.
    pub fn pong(&self, out: &mut [u8; 2 + 125]) -> usize {
        let (h, n) = control_header(op::PONG, self.control_len);
        out[..n].copy_from_slice(&h[..n]);
        out[n..n + self.control_len].copy_from_slice(&self.control[..self.control_len]);
        n + self.control_len
    }

    /// Take bytes from `input` (unmasking binary payload in place). Returns how many were
    /// taken and what they completed, if anything; call again with the rest.
    pub fn decode(&mut self, input: &mut [u8]) -> Result<(usize, Option<Event>), WsError> {
        if self.failed {
            return Err(WsError::Reserved);
        }
        let r = self.step(input);
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    fn step(&mut self, input: &mut [u8]) -> Result<(usize, Option<Event>), WsError> {
        let mut taken = 0;
        let frame = loop {
            if let Some(f) = self.frame {
                break f;
            }
            let needed = self.header_len();
            if self.have >= needed {
                let f = self.parse_header()?;
                self.frame = Some(f);
                self.have = 0;
                self.control_len = 0;
                if f.len == 0 {
                    self.frame = None;
                    return Ok((taken, self.finish(f)));
                }
                continue;
            }
            if taken == input.len() {
                return Ok((taken, None));
            }
            self.header[self.have] = input[taken];
            self.have += 1;
            taken += 1;
        };
        // On 32-bit targets a frame can be longer than usize: saturate, never truncate.
        let left = usize::try_from(frame.len - frame.done).unwrap_or(usize::MAX);
        let n = left.min(input.len() - taken);
        let chunk = &mut input[taken..taken + n];
        if let Some(mask) = frame.mask {
            apply_mask(chunk, mask, frame.done);
        }
        let start = taken;
        taken += n;
        let done = frame.done + n as u64;
        let complete = done == frame.len;
        self.frame = if complete {
            None
        } else {
            Some(Frame { done, ..frame })
        };
        if frame.opcode == op::BINARY || frame.opcode == op::CONTINUATION {
            let event = (n > 0).then_some(Event::Data(start..taken));
            return Ok((taken, event));
        }
        // A control frame: buffer it whole.
        self.control[self.control_len..self.control_len + n].copy_from_slice(&input[start..taken]);
        self.control_len += n;
        Ok((taken, if complete { self.finish(frame) } else { None }))
    }

    /// Bytes of the header, as far as known from what has arrived.
    fn header_len(&self) -> usize {
        if self.have < 2 {
            return 2;
        }
        let len_bytes = match self.header[1] & 0x7f {
            126 => 2,
            127 => 8,
            _ => 0,
        };
        let mask_bytes = if self.header[1] & 0x80 != 0 { 4 } else { 0 };
        2 + len_bytes + mask_bytes
    }

    fn parse_header(&mut self) -> Result<Frame, WsError> {
        let (b0, b1) = (self.header[0], self.header[1]);
        if b0 & 0x70 != 0 {
            return Err(WsError::Reserved);
        }
        let fin = b0 & 0x80 != 0;
        let opcode = b0 & 0x0f;
        let masked = b1 & 0x80 != 0;
        if masked != self.expect_masked {
            return Err(WsError::Unmasked);
        }
        let (len, at) = match b1 & 0x7f {
            126 => (
                u64::from(u16::from_be_bytes([self.header[2], self.header[3]])),
                4,
            ),
            127 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&self.header[2..10]);
                (u64::from_be_bytes(b), 10)
            }
            l => (u64::from(l), 2),
        };
        if len >> 63 != 0 {
            return Err(WsError::BadLength);
        }
        let mask = masked.then(|| {
            [
                self.header[at],
                self.header[at + 1],
                self.header[at + 2],
                self.header[at + 3],
            ]
        });
        match opcode {
            op::BINARY if !self.in_binary => self.in_binary = !fin,
            op::CONTINUATION if self.in_binary => self.in_binary = !fin,
            op::TEXT => return Err(WsError::Text),
            op::CLOSE | op::PING | op::PONG => {
                if !fin || len > 125 {
                    return Err(WsError::BadControl);
                }
            }
            _ => return Err(WsError::Reserved),
        }
        Ok(Frame {
            opcode,
            mask,
            len,
            done: 0,
        })
    }

    fn finish(&mut self, f: Frame) -> Option<Event> {
        match f.opcode {
            op::PING => Some(Event::Ping),
            op::PONG => Some(Event::Pong),
            op::CLOSE => Some(Event::Close),
            _ => None,
        }
    }
}

/// The close frame a server sends (no status code).
pub const CLOSE_FRAME: [u8; 2] = [0x88, 0x00];

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn accept_key_matches_rfc_6455() {
        // RFC 6455 section 1.3's example.
        assert_eq!(
            &accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
            b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn the_forwarded_client_is_the_last_address_the_nearest_proxy_wrote() {
        let request = |xff: &[&str]| {
            let mut r = String::from("GET / HTTP/1.1\r\nHost: x\r\n");
            for v in xff {
                r += &format!("X-Forwarded-For: {v}\r\n");
            }
            r + "\r\n"
        };
        let ip = |s: &str| Ok(s.parse::<core::net::IpAddr>().unwrap());
        assert_eq!(
            forwarded_for(request(&["203.0.113.7"]).as_bytes()),
            ip("203.0.113.7")
        );
        // What the client wrote itself comes first; the proxy's entry is the last.
        assert_eq!(
            forwarded_for(request(&["10.0.0.1, 198.51.100.2 ,2001:db8::5"]).as_bytes()),
            ip("2001:db8::5")
        );
        assert_eq!(
            forwarded_for(request(&["10.0.0.1", "198.51.100.9"]).as_bytes()),
            ip("198.51.100.9")
        );
        let refused = Err(WsError::BadRequest("X-Forwarded-For"));
        assert_eq!(forwarded_for(request(&[]).as_bytes()), refused);
        assert_eq!(forwarded_for(request(&["unknown"]).as_bytes()), refused);
        assert_eq!(
            forwarded_for(request(&["198.51.100.9, "]).as_bytes()),
            refused
        );
        assert_eq!(
            forwarded_for(request(&["198.51.100.9:443"]).as_bytes()),
            refused
        );
    }

    #[test]
    fn handshake_both_ways() {
        let key = b"dGhlIHNhbXBsZSBub25jZQ==";
        let mut req = [0u8; 512];
        let n = client_request("127.0.0.1:1", "/", key, &mut req);
        let mut resp = [0u8; 256];
        assert_eq!(server_handshake(&req[..n - 1], &mut resp), Ok(None));
        let (consumed, len) = server_handshake(&req[..n], &mut resp).unwrap().unwrap();
        assert_eq!(consumed, n);
        assert_eq!(client_response(&resp[..len], key), Ok(Some(len)));
        assert!(client_response(&resp[..len], b"AAAAAAAAAAAAAAAAAAAAAA==").is_err());
        let no_upgrade =
            String::from_utf8_lossy(&resp[..len]).replace("Upgrade: websocket\r\n", "");
        assert_eq!(
            client_response(no_upgrade.as_bytes(), key),
            Err(WsError::BadResponse("Upgrade: websocket"))
        );

        let mut resp = [0u8; 256];
        assert!(matches!(
            server_handshake(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", &mut resp),
            Err(WsError::BadRequest(_))
        ));
        assert!(matches!(
            server_handshake(b"POST / HTTP/1.1\r\n\r\n", &mut resp),
            Err(WsError::BadRequest("request line"))
        ));
        assert_eq!(
            server_handshake(&[b'a'; MAX_REQUEST_LEN], &mut resp),
            Err(WsError::RequestTooLong)
        );
    }

    /// Masked client frames carrying `payloads`, back to back.
    fn client_frames(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, p) in payloads.iter().enumerate() {
            let mask = [i as u8, 0x5a, 0xa5, 0x11];
            let (h, n) = client_binary_header(p.len(), mask);
            out.extend_from_slice(&h[..n]);
            let mut body = p.to_vec();
            apply_mask(&mut body, mask, 0);
            out.extend_from_slice(&body);
        }
        out
    }

    /// Decode `wire` fed in pieces of `step` bytes; returns the data and the events.
    fn decode_all(wire: &[u8], step: usize) -> Result<(Vec<u8>, Vec<Event>), WsError> {
        let mut d = Decoder::server();
        let (mut data, mut events) = (Vec::new(), Vec::new());
        for piece in wire.chunks(step) {
            let mut piece = piece.to_vec();
            let mut at = 0;
            while at < piece.len() {
                let (n, event) = d.decode(&mut piece[at..])?;
                match event {
                    Some(Event::Data(r)) => {
                        data.extend_from_slice(&piece[at + r.start..at + r.end])
                    }
                    Some(e) => events.push(e),
                    None => {}
                }
                at += n;
            }
        }
        Ok((data, events))
    }

    #[test]
    fn payloads_stream_through_any_split() {
        let big = vec![7u8; 70_000];
        let mid: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        let wire = client_frames(&[b"abc", &mid, &big, b""]);
        let mut want = b"abc".to_vec();
        want.extend_from_slice(&mid);
        want.extend_from_slice(&big);
        for step in [1, 2, 3, 7, 126, 4096, wire.len()] {
            let (data, events) = decode_all(&wire, step).unwrap();
            assert_eq!(data, want, "step {step}");
            assert!(events.is_empty());
        }
    }

    #[test]
    fn control_frames_and_violations() {
        let mask = [1, 2, 3, 4];
        let mut ping = Vec::new();
        let (h, n) = header(op::PING, 3, Some(mask));
        ping.extend_from_slice(&h[..n]);
        let mut body = b"hey".to_vec();
        apply_mask(&mut body, mask, 0);
        ping.extend_from_slice(&body);
        let mut d = Decoder::server();
        let (n, e) = d.decode(&mut ping.clone()).unwrap();
        assert_eq!((n, e), (ping.len(), Some(Event::Ping)));
        let mut pong = [0u8; 127];
        let len = d.pong(&mut pong);
        assert_eq!(&pong[..len], b"\x8a\x03hey");

        // Unmasked client frame, text frame, oversized ping, reserved bits: all refused,
        // and the decoder stays failed.
        let (h, n) = header(op::BINARY, 1, None);
        assert_eq!(decode_all(&h[..n], 64), Err(WsError::Unmasked));
        let (h, n) = header(op::TEXT, 1, Some(mask));
        assert_eq!(decode_all(&h[..n], 64), Err(WsError::Text));
        let (h, n) = header(op::PING, 126, Some(mask));
        assert_eq!(decode_all(&h[..n], 64), Err(WsError::BadControl));
        let mut d = Decoder::server();
        assert_eq!(
            d.decode(&mut [0xf2, 0x80, 0, 0, 0, 0]),
            Err(WsError::Reserved)
        );
        assert!(d.decode(&mut [0x82]).is_err());
        // A continuation with no message open.
        let (h, n) = header(op::CONTINUATION, 1, Some(mask));
        assert_eq!(decode_all(&h[..n], 64), Err(WsError::Reserved));
    }

    #[test]
    fn server_frames_decode_on_the_client_side() {
        let (h, n) = binary_header(300);
        let mut wire = h[..n].to_vec();
        wire.extend_from_slice(&[9u8; 300]);
        let mut d = Decoder::client();
        let (taken, event) = d.decode(&mut wire).unwrap();
        assert_eq!(taken, wire.len());
        assert_eq!(event, Some(Event::Data(n..n + 300)));
    }
}
