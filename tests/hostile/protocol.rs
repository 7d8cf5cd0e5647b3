//! Lies in the protocol (`--headers-file`): a hand-written gateway that speaks the protocol
//! correctly (WebSocket, BOLT 8, `init`, `tip`, `headers`, with the project's own codecs)
//! and misbehaves only in ways a gateway that has read the client's code could choose:
//!
//! - `--claim-work HEX`: announce this chain work for its tip (more than it has);
//! - `--claim-height N`: announce its tip at height N, with a header nobody has (its real
//!   tip's with another nonce), so that the claim cannot be checked until it is delivered;
//! - `--bump-tip`: before each answer, announce a tip one higher with more work, which it
//!   never delivers (a stall that looks like progress);
//! - `--answers empty`: answer every request with an empty final `headers`;
//!   `--answers known`: answer every request with a full answer of the first headers of the
//!   chain (headers the client already has), never what comes after its locator;
//! - `--ping-flood MS`: every MS milliseconds, a `ping` asking for a 65,531-byte `pong`.
//!
//! It serves the headers in `--headers-file` (raw 80-byte headers from genesis, as
//! `lightwire-chain generate` writes them): a file of a fake fork is a fake fork. Two
//! processes collude by being given the same flags. Blocking I/O, a thread per connection:
//! a test tool for a handful of connections. On stderr, one line per connection when it
//! ends, with what was sent.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use lightwire_chain::{Chain, HEADER_LEN, Header, MAX_BATCH, Network};
use lightwire_noise::{ACT_ONE_LEN, ACT_THREE_LEN, FrameBuffer, FrameReader, SecretKey, Sender};
use lightwire_proto::ws;
use lightwire_wire::sync::MAX_HEADERS_PER_MESSAGE;
use lightwire_wire::{Features, Headers, Init, Message, Networks, Ping, Pong, Tip};

/// How requests are answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Answers {
    /// As the real gateway does: the headers after the locator.
    Honest,
    /// An empty final `headers`, always.
    Empty,
    /// A full answer of the chain's first headers, always.
    Known,
}

/// The flags of lies in the protocol.
#[derive(Args, Debug)]
#[group(id = "protocol_lies")]
#[command(next_help_heading = "Lies in the protocol (with --headers-file)")]
pub struct Lies {
    /// Headers to serve (80 bytes each, from genesis).
    #[arg(long, value_name = "FILE")]
    pub headers_file: Option<PathBuf>,
    /// The network (its genesis and rules).
    #[arg(long, default_value = "regtest", conflicts_with = "generate")]
    pub network: Network,
    /// Chain work to claim for the tip (64 hex digits, big-endian).
    #[arg(long, conflicts_with_all = ["generate", "upstream"])]
    claim_work: Option<String>,
    /// Announce the tip at this height, with a header nobody has.
    #[arg(long, value_name = "N", conflicts_with_all = ["generate", "upstream"])]
    claim_height: Option<u32>,
    /// Announce a higher tip before every answer, never delivered.
    #[arg(long, conflicts_with_all = ["generate", "upstream"])]
    bump_tip: bool,
    /// How requests are answered.
    #[arg(
        long,
        value_enum,
        default_value = "honest",
        conflicts_with_all = ["generate", "upstream"]
    )]
    answers: Answers,
    /// Send a ping asking for 65,531 pong bytes every this many milliseconds.
    #[arg(long, value_name = "MS", conflicts_with_all = ["generate", "upstream"])]
    ping_flood: Option<u64>,
}

/// What every connection serves.
struct Served {
    network: Network,
    headers: Vec<u8>,
    heights: HashMap<[u8; 32], u32>,
    tip_height: u32,
    tip_work: [u8; 32],
    claim_height: u32,
    answers: Answers,
    bump_tip: bool,
    ping_flood: Option<Duration>,
}

/// Serve `file` (the value of `--headers-file`) on `listen` with `key`, lying as `args`
/// say; runs until the process is stopped.
pub fn run(args: &Lies, file: &Path, listen: SocketAddr, key: SecretKey) -> Result<(), String> {
    let params = args.network.params();
    let file = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    if file.len() % HEADER_LEN != 0 || file.len() < HEADER_LEN {
        return Err("the headers file is not whole 80-byte headers".into());
    }
    // The headers themselves are valid (a hostile gateway that sends invalid ones is simply
    // marked bad): check them, and learn the true work to lie about.
    let headers: Vec<Header> = file
        .chunks_exact(HEADER_LEN)
        .filter_map(Header::from_slice)
        .collect();
    if headers[0] != params.genesis {
        return Err("the headers file does not start at this network's genesis".into());
    }
    let mut chain = Chain::new(params);
    let now = u64::MAX / 2;
    for batch in headers[1..].chunks(MAX_BATCH) {
        chain
            .connect(batch, now)
            .map_err(|e| format!("the headers file is not a valid chain: {e}"))?;
    }
    let mut tip_work = chain.tip().chainwork.0.to_be_bytes();
    if let Some(hex_work) = &args.claim_work {
        hex::decode_to_slice(hex_work, &mut tip_work)
            .map_err(|e| format!("--claim-work: {e} (64 hex digits)"))?;
    }
    let heights = headers
        .iter()
        .enumerate()
        .map(|(height, h)| (h.block_hash().0, height as u32))
        .collect();
    let served = Arc::new(Served {
        network: args.network,
        heights,
        headers: file,
        tip_height: chain.tip().height,
        tip_work,
        claim_height: args.claim_height.unwrap_or(chain.tip().height),
        answers: args.answers,
        bump_tip: args.bump_tip,
        ping_flood: args.ping_flood.map(Duration::from_millis),
    });
    let listener = TcpListener::bind(listen).map_err(|e| format!("{listen}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let node_id = hex::encode(key.public_key().serialize());
    println!("node id {node_id} connect ws://{local}#{node_id}");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let served = Arc::clone(&served);
        let key = key.clone();
        std::thread::spawn(move || {
            let peer = stream
                .peer_addr()
                .map(|a| a.to_string())
                .unwrap_or_default();
            let mut conn = Conn::default();
            let why = conn.serve(stream, &served, key);
            eprintln!(
                "hostile: {peer} closed ({why}); answers {} pings {} tips {}",
                conn.answers, conn.pings, conn.tips
            );
        });
    }
    Ok(())
}

/// Counts for the closing line.
#[derive(Default)]
struct Conn {
    answers: u64,
    pings: u64,
    tips: u64,
}

/// The sending half: seals messages into binary WebSocket frames.
struct Out {
    stream: TcpStream,
    sender: Sender,
    frame: FrameBuffer,
}

impl Out {
    fn send(&mut self, message: &Message<'_>) -> Result<(), String> {
        let n = message
            .encode(self.frame.body_mut())
            .map_err(|e| e.to_string())?;
        let frame = self
            .frame
            .seal(&mut self.sender, n)
            .map_err(|e| e.to_string())?;
        let (h, hn) = ws::binary_header(frame.len());
        self.stream
            .write_all(&h[..hn])
            .and_then(|()| self.stream.write_all(frame))
            .map_err(|e| e.to_string())
    }
}

/// Read WebSocket payload bytes until `n` have arrived (an act), or fail.
fn read_act(
    stream: &mut TcpStream,
    decoder: &mut ws::Decoder,
    pending: &mut Vec<u8>,
    n: usize,
) -> Result<Vec<u8>, String> {
    let mut buf = [0u8; 4096];
    loop {
        if pending.len() >= n {
            return Ok(pending.drain(..n).collect());
        }
        let got = stream.read(&mut buf).map_err(|e| e.to_string())?;
        if got == 0 {
            return Err("closed during the handshake".into());
        }
        let mut at = 0;
        while at < got {
            let (taken, event) = decoder
                .decode(&mut buf[at..got])
                .map_err(|e| e.to_string())?;
            if let Some(ws::Event::Data(r)) = event {
                pending.extend_from_slice(&buf[at + r.start..at + r.end]);
            }
            at += taken;
        }
    }
}

impl Conn {
    fn serve(&mut self, mut stream: TcpStream, served: &Served, key: SecretKey) -> String {
        match self.session(&mut stream, served, key) {
            Ok(()) => "by the client".into(),
            Err(e) => e,
        }
    }

    fn session(
        &mut self,
        stream: &mut TcpStream,
        served: &Served,
        key: SecretKey,
    ) -> Result<(), String> {
        // The upgrade.
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        let mut pending;
        loop {
            let got = stream.read(&mut buf).map_err(|e| e.to_string())?;
            if got == 0 {
                return Err("closed before the upgrade".into());
            }
            request.extend_from_slice(&buf[..got]);
            let mut response = [0u8; 256];
            if let Some((consumed, len)) =
                ws::server_handshake(&request, &mut response).map_err(|e| e.to_string())?
            {
                stream
                    .write_all(&response[..len])
                    .map_err(|e| e.to_string())?;
                pending = request.split_off(consumed);
                break;
            }
        }
        let mut decoder = ws::Decoder::server();
        let mut data = Vec::new();
        let mut at = 0;
        while at < pending.len() {
            let (taken, event) = decoder
                .decode(&mut pending[at..])
                .map_err(|e| e.to_string())?;
            if let Some(ws::Event::Data(r)) = event {
                data.extend_from_slice(&pending[at + r.start..at + r.end]);
            }
            at += taken;
        }
        // BOLT 8, as the responder.
        let ephemeral = SecretKey::random().map_err(|e| e.to_string())?;
        let act_one = read_act(stream, &mut decoder, &mut data, ACT_ONE_LEN)?;
        let (state, act_two) = lightwire_noise::Responder::start(key, ephemeral)
            .read_act_one(&act_one)
            .map_err(|e| e.to_string())?;
        let (h, hn) = ws::binary_header(act_two.len());
        stream
            .write_all(&h[..hn])
            .and_then(|()| stream.write_all(&act_two))
            .map_err(|e| e.to_string())?;
        let act_three = read_act(stream, &mut decoder, &mut data, ACT_THREE_LEN)?;
        let (sender, mut receiver) = state
            .read_act_three(&act_three)
            .map_err(|e| e.to_string())?
            .split();
        let mut out = Out {
            stream: stream.try_clone().map_err(|e| e.to_string())?,
            sender,
            frame: FrameBuffer::new(),
        };
        let chain_hash = served.network.params().genesis.block_hash().0;
        let chains = [chain_hash];
        out.send(&Message::Init(Init::new(
            Features::empty(),
            Some(Networks::from_chains(&chains)),
        )))?;
        let mut claimed = served.claim_height;
        let mut work = served.tip_work;
        self.tip(&mut out, served, claimed, &work)?;
        // Short reads let the ping flood run between messages.
        stream
            .set_read_timeout(Some(Duration::from_millis(5)))
            .map_err(|e| e.to_string())?;
        let mut reader = FrameReader::new();
        let mut next_ping = served.ping_flood.map(|d| Instant::now() + d);
        // What followed act three in its WebSocket message is already payload.
        let mut payload = data;
        let mut input = Vec::new();
        loop {
            if let (Some(at), Some(every)) = (next_ping, served.ping_flood)
                && Instant::now() >= at
            {
                out.send(&Message::Ping(Ping::new(65_531)))?;
                self.pings += 1;
                next_ping = Some(at + every);
            }
            let mut at = 0;
            while at < input.len() {
                let (taken, event) = decoder
                    .decode(&mut input[at..])
                    .map_err(|e| e.to_string())?;
                match event {
                    Some(ws::Event::Data(r)) => {
                        payload.extend_from_slice(&input[at + r.start..at + r.end]);
                    }
                    Some(ws::Event::Close) => return Ok(()),
                    _ => {}
                }
                at += taken;
            }
            let mut rest = &payload[..];
            while !rest.is_empty() {
                let (taken, message) = reader
                    .read(&mut receiver, rest)
                    .map_err(|e| e.to_string())?;
                rest = &rest[taken..];
                let Some(bytes) = message else { continue };
                match Message::decode(bytes).map_err(|e| e.to_string())? {
                    Message::GetHeaders(req) => {
                        if served.bump_tip {
                            claimed += 1;
                            bump(&mut work);
                            self.tip(&mut out, served, claimed, &work)?;
                        }
                        let start = start_after(served, req.locator_hashes());
                        self.answer(&mut out, served, req.id, start, req.max_count)?;
                    }
                    Message::Ping(ping) => {
                        if let Some(len) = ping.pong_len() {
                            let mut body = vec![0u8; 4 + usize::from(len)];
                            let n =
                                Pong::encode_zeroed(len, &mut body).map_err(|e| e.to_string())?;
                            body.truncate(n);
                            send_raw(&mut out, &body)?;
                        }
                    }
                    Message::Error(_) => return Ok(()),
                    _ => {}
                }
            }
            payload.clear();
            input = vec![0u8; 65_536];
            match stream.read(&mut input) {
                Ok(0) => return Ok(()),
                Ok(n) => input.truncate(n),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    input.clear();
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    fn tip(
        &mut self,
        out: &mut Out,
        served: &Served,
        height: u32,
        work: &[u8; 32],
    ) -> Result<(), String> {
        // The real tip's header, or for a claimed height above it, that header with the
        // height as its nonce: a block nobody has, whose work cannot be checked.
        let h = served.tip_height as usize * HEADER_LEN;
        let mut header = [0u8; HEADER_LEN];
        header.copy_from_slice(&served.headers[h..h + HEADER_LEN]);
        if height != served.tip_height {
            header[76..80].copy_from_slice(&height.to_le_bytes());
        }
        out.send(&Message::Tip(Tip {
            height,
            header: &header,
            chainwork: work,
        }))?;
        self.tips += 1;
        Ok(())
    }

    /// Answer request `id`, whose locator points at `start`, as `served.answers` says.
    fn answer(
        &mut self,
        out: &mut Out,
        served: &Served,
        id: u32,
        start: u32,
        max_count: u32,
    ) -> Result<(), String> {
        self.answers += 1;
        let (from, count) = match served.answers {
            Answers::Empty => (start, 0),
            Answers::Known => (1, max_count.min(served.tip_height)),
            Answers::Honest => (
                start,
                max_count.min((served.tip_height + 1).saturating_sub(start)),
            ),
        };
        let mut next = from;
        let end = from + count;
        loop {
            let n = (end - next).min(MAX_HEADERS_PER_MESSAGE as u32);
            let a = next as usize * HEADER_LEN;
            let b = (next + n) as usize * HEADER_LEN;
            out.send(&Message::Headers(Headers {
                id,
                first_height: next,
                last: next + n == end,
                headers: &served.headers[a..b],
            }))?;
            next += n;
            if next == end {
                return Ok(());
            }
        }
    }
}

/// Seal an already encoded message.
fn send_raw(out: &mut Out, body: &[u8]) -> Result<(), String> {
    let frame = out
        .frame
        .encrypt(&mut out.sender, body)
        .map_err(|e| e.to_string())?;
    let (h, hn) = ws::binary_header(frame.len());
    out.stream
        .write_all(&h[..hn])
        .and_then(|()| out.stream.write_all(frame))
        .map_err(|e| e.to_string())
}

/// Add one to a big-endian 256-bit number (saturating).
fn bump(work: &mut [u8; 32]) {
    for b in work.iter_mut().rev() {
        let (v, carry) = b.overflowing_add(1);
        *b = v;
        if !carry {
            return;
        }
    }
    *work = [0xff; 32];
}

/// Where an answer to `locator` starts: after the first hash it holds, else after genesis.
fn start_after<'a>(served: &Served, mut locator: impl Iterator<Item = &'a [u8; 32]>) -> u32 {
    locator
        .find_map(|hash| served.heights.get(hash))
        .map_or(1, |height| height + 1)
}
