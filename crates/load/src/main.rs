//! `lightwire-load`: open N connections to a gateway and either sync its whole chain on
//! each (reporting aggregate headers/s, bytes and requests per connection, and failures)
//! or hold them idle after the handshake (for memory measurements).
//!
//! ```text
//! lightwire-load --connect ws[s]://HOST:PORT[/]#<node-id> --network NET [--clients N]
//!                [--idle SECONDS | --handshakes SECONDS] [--per-request COUNT] [--validate]
//!                [--compact] [--filter-headers] [--manifest FILE]
//!                [--tls-ca FILE] [--tls-name NAME] [--log FILTER]
//! ```
//! `wss://` connects over TLS, trusting the certificates in `--tls-ca` (PEM) for the name
//! `--tls-name` (default: HOST). `--handshakes` opens, completes the handshake (TLS, then
//! the WebSocket upgrade, BOLT 8 and `init`) and closes connections on `--clients` tasks
//! for that many seconds, and reports handshakes/s.
//! A gateway admits 64 connections per client address by default: for more from one
//! machine, start it with `--max-per-address` above `--clients` and `--max-new-per-second`
//! above the rate it connects at.
//! `--validate` runs every header through lightwire-chain and rebuilds every filter header
//! (costs client CPU, which on a small machine competes with the gateway); without it
//! headers and filter headers are only counted.
//!
//! Each connection asks what a new tab asks (crates/client): the headers, then with
//! `--filter-headers` the filter headers, one request at a time, each up to a block it
//! holds at most 20,000 further. With `--manifest` (an export's `manifest.json`, docs/
//! PROTOCOL.md "Bulk files (mirrors)") the tab holds the mirror's history already: it
//! asks for headers above the last headers file only (its locator that file's top), for
//! filter headers above the last filter-headers file only, and probes each filter-headers
//! file's last block (a `get_filter_headers` of that one block, 8 at a time).
//!
//! Its results are the program's output, on stdout (scripts/bench-gateway.sh and
//! scripts/bench-tabs.sh read them): `connected ...`, then `idle`, or `received ...` and
//! `synced ...` (the last line); when it fails, `lightwire-load: <why>` on stderr and exit
//! code 1 (2 for usage errors). Failures of single connections are `tracing` events (to
//! stderr, filtered by `--log`).
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use lightwire_chain::{Chain, Entry, HEADER_LEN, Header, Network, Outcome, Params};
use lightwire_gateway::client::{Client, Framing};
use lightwire_gateway::export::{Kind, Manifest};
use lightwire_noise::PublicKey;
use lightwire_proto::compact::Expanded;
use lightwire_wire::filters::FILTER_CHECKPOINT_INTERVAL;
use lightwire_wire::{FilterRange, GetFilterHeaders, GetHeaders, Message};
use pki_types::CertificateDer;
use pki_types::pem::PemObject;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

use lightwire_gateway::logging;

/// Opens N connections to a gateway and syncs its whole chain on each (aggregate
/// headers/s), or holds them idle after the handshake (--idle, for memory measurements).
#[derive(Parser)]
#[command(name = "lightwire-load")]
struct Cli {
    /// The gateway's connect string (HOST an IP address)
    #[arg(long, value_name = "ws[s]://HOST:PORT#NODE_ID", value_parser = connect_string)]
    connect: Connect,
    /// Certificates (PEM) to trust for wss://
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<std::path::PathBuf>,
    /// The name to check the certificate for [default: HOST]
    #[arg(long, value_name = "NAME")]
    tls_name: Option<String>,
    /// mainnet, testnet3, testnet4, signet or regtest
    #[arg(long, value_name = "NET")]
    network: Network,
    /// Connections to open
    #[arg(long, value_name = "N", default_value_t = 1)]
    clients: usize,
    /// Hold the connections idle this long after the handshake instead of syncing
    #[arg(long, value_name = "SECONDS", conflicts_with = "handshakes")]
    idle: Option<u64>,
    /// Open, handshake and close connections for this long, on --clients tasks, and
    /// report handshakes/s
    #[arg(long, value_name = "SECONDS")]
    handshakes: Option<u64>,
    /// Headers asked for per request
    #[arg(long, value_name = "COUNT", default_value_t = 100_000)]
    per_request: u32,
    /// Validate every header with lightwire-chain (costs client CPU) rather than only
    /// count them
    #[arg(long)]
    validate: bool,
    /// Offer `headers_compact` (39 bytes a header instead of 80), as browsers do; the
    /// headers are then expanded and their hash chain rebuilt (client CPU)
    #[arg(long)]
    compact: bool,
    /// After the headers, ask the filter headers too, as a new tab does: one request at a
    /// time, each up to a block held at most 20,000 further
    #[arg(long)]
    filter_headers: bool,
    /// Behave as a tab that holds a mirror's history: an export's manifest.json, its
    /// headers files beside it. Headers are asked above its last headers file only; with
    /// --filter-headers, filter headers above its last filter-headers file, and one probe
    /// at each filter-headers file's last block
    // The manifest rather than two heights: it lists the very files a tab reads (so the
    // probes are at the ends `lightwire-gateway export` chose, its layout not copied
    // here), and its headers files give the block hashes a tab holds there, for any
    // network's export, not only a chain this tool could generate again.
    #[arg(long, value_name = "FILE")]
    manifest: Option<PathBuf>,
    #[command(flatten)]
    log: logging::LogArgs,
}

/// A parsed `ws[s]://HOST:PORT[/]#<node-id>`.
#[derive(Clone)]
struct Connect {
    addr: SocketAddr,
    node_id: PublicKey,
    tls: bool,
}

fn connect_string(s: &str) -> Result<Connect, String> {
    let (rest, tls) = match (s.strip_prefix("ws://"), s.strip_prefix("wss://")) {
        (Some(rest), _) => (rest, false),
        (_, Some(rest)) => (rest, true),
        _ => return Err("must start with ws:// or wss://".into()),
    };
    let (addr, id) = rest.split_once('#').ok_or("needs #<node-id>")?;
    let addr = addr.strip_suffix('/').unwrap_or(addr);
    let node_id = hex::decode(id)
        .ok()
        .and_then(|b| PublicKey::from_slice(&b).ok())
        .ok_or("the node id is not a 33-byte compressed public key in hex")?;
    let addr = addr
        .parse()
        .map_err(|_| format!("{addr} is not HOST:PORT"))?;
    Ok(Connect { addr, node_id, tls })
}

/// One connection, over a socket or TLS (boxed: they differ in size, and are moved about).
enum Conn {
    Plain(Box<Client<Counted<TcpStream>>>),
    Tls(Box<Client<TlsStream<Counted<TcpStream>>>>),
}

/// A socket that counts the bytes read from it: what the gateway sent, its HTTP upgrade
/// answer, WebSocket and BOLT 8 framing (and TLS records) included, as the gateway's
/// `lightwire_bytes_out_total` counts what it writes.
struct Counted<S> {
    inner: S,
    read: u64,
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            self.read += (buf.filled().len() - before) as u64;
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Bytes read from a connection's socket so far.
trait Received {
    fn received(&self) -> u64;
}

impl Received for Counted<TcpStream> {
    fn received(&self) -> u64 {
        self.read
    }
}

impl Received for TlsStream<Counted<TcpStream>> {
    fn received(&self) -> u64 {
        self.get_ref().0.read
    }
}

/// How to reach the gateway.
struct Dialer {
    connect: Connect,
    tls: Option<(Arc<ClientConfig>, String)>,
    chain_hash: [u8; 32],
    compact: bool,
}

impl Dialer {
    fn new(o: &Cli, chain_hash: [u8; 32]) -> Result<Dialer, String> {
        let tls = match (o.connect.tls, &o.tls_ca) {
            (false, _) => None,
            (true, None) => return Err("wss:// needs --tls-ca".into()),
            (true, Some(path)) => {
                let why = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
                let mut roots = RootCertStore::empty();
                for cert in CertificateDer::pem_file_iter(path).map_err(|e| why(&e))? {
                    roots.add(cert.map_err(|e| why(&e))?).map_err(|e| why(&e))?;
                }
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                let config = ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| e.to_string())?
                    .with_root_certificates(roots)
                    .with_no_client_auth();
                let name = o
                    .tls_name
                    .clone()
                    .unwrap_or_else(|| o.connect.addr.ip().to_string());
                Some((Arc::new(config), name))
            }
        };
        Ok(Dialer {
            connect: o.connect.clone(),
            tls,
            chain_hash,
            compact: o.compact,
        })
    }

    // As `Client::over_offering` and `Client::connect_tls`, with the socket counted.
    async fn dial(&self) -> Result<Conn, lightwire_gateway::client::ClientError> {
        let (addr, id) = (self.connect.addr, &self.connect.node_id);
        let (chain, compact, framing) = (self.chain_hash, self.compact, Framing::OnePerFrame);
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let tcp = Counted {
            inner: tcp,
            read: 0,
        };
        Ok(match &self.tls {
            None => {
                let host = addr.to_string();
                let c = Client::upgrade(tcp, &host, "", id, chain, framing, compact).await?;
                Conn::Plain(Box::new(c))
            }
            Some((config, name)) => {
                let server_name = pki_types::ServerName::try_from(name.clone())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                let tls = TlsConnector::from(config.clone())
                    .connect(server_name, tcp)
                    .await?;
                let host = format!("{name}:{}", addr.port());
                let c = Client::upgrade(tls, &host, "", id, chain, framing, compact).await?;
                Conn::Tls(Box::new(c))
            }
        })
    }
}

/// Handshakes completed (up to `init` received) on `tasks` tasks for `secs` seconds.
async fn handshakes(dialer: Arc<Dialer>, tasks: usize, secs: u64) -> (u64, u64) {
    let until = Instant::now() + Duration::from_secs(secs);
    let mut joins = Vec::new();
    for _ in 0..tasks.max(1) {
        let dialer = dialer.clone();
        joins.push(tokio::spawn(async move {
            let (mut ok, mut failed) = (0u64, 0u64);
            while Instant::now() < until {
                let done = match dialer.dial().await {
                    Ok(Conn::Plain(mut c)) => c.recv(|_| ()).await.is_ok(),
                    Ok(Conn::Tls(mut c)) => c.recv(|_| ()).await.is_ok(),
                    Err(e) => {
                        tracing::debug!("connect: {e}");
                        false
                    }
                };
                if done { ok += 1 } else { failed += 1 }
            }
            (ok, failed)
        }));
    }
    let mut total = (0, 0);
    for j in joins {
        if let Ok((ok, failed)) = j.await {
            total.0 += ok;
            total.1 += failed;
        }
    }
    total
}

/// Filter headers asked for per request, as crates/client's `filters::FILTER_REQUEST`.
const FILTER_REQUEST: u32 = 20_000;
/// Probes of a mirror's filter-headers files in flight at once, as crates/client's.
const PROBES_IN_FLIGHT: usize = 8;

/// What every connection asks for (shared by all of them).
struct Plan {
    params: &'static Params,
    per_request: u32,
    validate: bool,
    filter_headers: bool,
    mirror: Option<Mirror>,
    /// The caller's clock for validation, two hours ahead (the future-time limit).
    now: u64,
}

/// What a tab holds from a mirror before it asks a gateway anything: read once from an
/// export's manifest and headers files, shared by every connection.
struct Mirror {
    /// The last headers file's last height and block hash: the locator.
    headers_top: (u32, [u8; 32]),
    /// Each filter-headers file's last height and the filter header the manifest gives
    /// there (internal byte order): the probes, and where filter-header sync starts.
    filter_files: Vec<(u32, [u8; 32])>,
    /// The block hashes the mirror's headers give at filter checkpoint heights and at
    /// `headers_top`: the stops of the probes and of filter-header requests below it.
    marks: Marks,
    /// The validated chain's last entries at `headers_top` (`--validate` only), for each
    /// connection's chain to resume from.
    window: Vec<Entry>,
}

impl Mirror {
    /// Read `path` and the headers files it lists (beside it), checking that they are of
    /// `params`' network and that each file ends at its manifest `top`; with `validate`,
    /// every header goes through lightwire-chain, as a tab validates a mirror's.
    fn load(
        path: &Path,
        params: &'static Params,
        validate: bool,
        now: u64,
    ) -> Result<Mirror, String> {
        let at = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        let bytes = std::fs::read(path).map_err(|e| at(&e))?;
        let m = Manifest::parse(&bytes).map_err(|e| at(&e))?;
        if m.network != params.network.name() || m.genesis != params.genesis.block_hash() {
            return Err(at(&format!(
                "a mirror of {}, not {}",
                m.network,
                params.network.name()
            )));
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut marks = Marks::default();
        let mut expanded = Expanded::new();
        let mut chain = validate.then(|| Chain::new(params));
        let mut batch: Vec<Header> = Vec::new();
        for e in &m.headers {
            let name = dir.join(e.file_name(Kind::Headers));
            let file = std::fs::read(&name).map_err(|err| format!("{}: {err}", name.display()))?;
            let bad = |why: String| format!("{}: {why}", name.display());
            let (mut rest, mut next, mut last_hash) = (&file[..], e.first, None);
            while let Some(len) = rest
                .get(..2)
                .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
            {
                let record = rest
                    .get(2..2 + len)
                    .ok_or_else(|| bad("a record cut short".into()))?;
                rest = &rest[2 + len..];
                let Ok(Message::HeadersCompact(h)) = Message::decode(record) else {
                    return Err(bad("a record that is not headers_compact".into()));
                };
                if h.first_height != next {
                    return Err(bad(format!(
                        "headers from {} where {next} was next",
                        h.first_height
                    )));
                }
                let (headers, hashes) = expanded.expand(&h).map_err(|err| bad(err.to_string()))?;
                for (height, hash) in (next..).zip(hashes) {
                    if height % FILTER_CHECKPOINT_INTERVAL == 0 {
                        marks.push(height, hash.0);
                    }
                    last_hash = Some(hash.0);
                }
                if let Some(chain) = chain.as_mut() {
                    batch.clear();
                    // Genesis is every chain's first entry already.
                    let skip = usize::from(next == 0);
                    batch.extend(
                        headers
                            .chunks_exact(HEADER_LEN)
                            .skip(skip)
                            .filter_map(|b| b.try_into().ok())
                            .map(Header::decode),
                    );
                    chain
                        .connect(&batch, now)
                        .map_err(|err| bad(err.to_string()))?;
                }
                next += u32::from(h.count);
            }
            if !rest.is_empty() || next != e.last + 1 || last_hash != e.top {
                return Err(bad(format!(
                    "does not end at height {} with its manifest top",
                    e.last
                )));
            }
        }
        let (top, hash) = m.top();
        marks.push(top, hash.0);
        let window = match &chain {
            Some(chain) if chain.tip().height == top => {
                let w = chain.window();
                (top + 1 - w.len() as u32..=top)
                    .filter_map(|h| w.get(h).copied())
                    .collect()
            }
            Some(chain) => {
                return Err(at(&format!(
                    "validated to {}, not {top}",
                    chain.tip().height
                )));
            }
            None => Vec::new(),
        };
        let filter_files = m
            .filter_headers
            .iter()
            .map(|e| e.top.map(|t| (e.last, t)))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| at(&"a filter-headers file without its top"))?;
        Ok(Mirror {
            headers_top: (top, hash.0),
            filter_files,
            marks,
            window,
        })
    }
}

/// Block hashes held at some heights, ascending: the stops a tab can ask filter headers up
/// to. As crates/client's filter-header task keeps them: each headers answer's last block,
/// and every filter checkpoint's (where a mirror's filter-headers files end, so probed).
#[derive(Default)]
struct Marks(Vec<(u32, [u8; 32])>);

impl Marks {
    fn push(&mut self, height: u32, hash: [u8; 32]) {
        if self.0.last().is_none_or(|&(h, _)| h < height) {
            self.0.push((height, hash));
        }
    }

    fn at(&self, height: u32) -> Option<[u8; 32]> {
        let i = self.0.binary_search_by_key(&height, |&(h, _)| h).ok()?;
        Some(self.0[i].1)
    }

    /// The highest mark in `from..=to`.
    fn furthest(&self, from: u32, to: u32) -> Option<(u32, [u8; 32])> {
        let end = self.0.partition_point(|&(h, _)| h <= to);
        self.0[..end].last().copied().filter(|&(h, _)| h >= from)
    }
}

/// What one connection was sent and asked.
#[derive(Default)]
struct Tally {
    headers: u64,
    filter_headers: u64,
    probes: u64,
    requests: u64,
    bytes: u64,
}

/// One connection's state as it syncs.
struct Tab<'p, S> {
    c: Client<S>,
    plan: &'p Plan,
    /// Hashes at heights above what the mirror holds, from this connection's headers.
    marks: Marks,
    expanded: Expanded,
    id: u32,
    tally: Tally,
}

fn client_err(e: lightwire_gateway::client::ClientError) -> String {
    e.to_string()
}

/// Sync as a new tab does: headers, then (`--filter-headers`) filter headers.
async fn tab<S>(c: Client<S>, plan: &Plan) -> Result<Tally, String>
where
    S: AsyncRead + AsyncWrite + Unpin + Received,
{
    let mut t = Tab {
        c,
        plan,
        marks: Marks::default(),
        expanded: Expanded::new(),
        id: 0,
        tally: Tally::default(),
    };
    t.c.recv(|_| ()).await.map_err(client_err)?; // init
    let tip =
        t.c.recv(|m| match Message::decode(m) {
            Ok(Message::Tip(t)) => Some(t.height),
            _ => None,
        })
        .await
        .map_err(client_err)?
        .ok_or("no tip after init")?;
    t.headers(tip).await?;
    if plan.filter_headers {
        t.probes().await?;
        t.filter_headers(tip).await?;
    }
    t.tally.bytes = t.c.stream().received();
    Ok(t.tally)
}

impl<S: AsyncRead + AsyncWrite + Unpin> Tab<'_, S> {
    fn next_id(&mut self) -> u32 {
        self.id += 1;
        self.tally.requests += 1;
        self.id
    }

    /// The hash held at `height`, from the mirror or from this connection's headers.
    fn hash_at(&self, height: u32) -> Option<[u8; 32]> {
        let mirror = self.plan.mirror.as_ref();
        self.marks.at(height).or_else(|| mirror?.marks.at(height))
    }

    /// Headers from the mirror's top (or genesis) to `tip`, `--per-request` at a time.
    async fn headers(&mut self, tip: u32) -> Result<(), String> {
        let plan = self.plan;
        let (mut height, mut last_hash) = match &plan.mirror {
            Some(m) => m.headers_top,
            None => (0, plan.params.genesis.block_hash().0),
        };
        let mut chain = match &plan.mirror {
            Some(m) if plan.validate => Some(
                Chain::resume(plan.params, &m.window)
                    .ok_or("the mirror's chain does not resume")?,
            ),
            _ => plan.validate.then(|| Chain::new(plan.params)),
        };
        let mut batch: Vec<Header> = Vec::with_capacity(2000);
        while height < tip {
            let id = self.next_id();
            let req = GetHeaders {
                id,
                max_count: plan.per_request,
                stop_hash: [0; 32],
                locator: &last_hash,
            };
            self.c
                .send(&Message::GetHeaders(req))
                .await
                .map_err(client_err)?;
            loop {
                batch.clear();
                let (marks, expanded, validate) =
                    (&mut self.marks, &mut self.expanded, chain.is_some());
                let (n, last) = self
                    .c
                    .recv(|m| -> Result<(u32, bool), String> {
                        let (first, n, last) = match Message::decode(m) {
                            Ok(Message::Headers(h)) => {
                                let (first, n) = (h.first_height, h.count() as u32);
                                for (height, header) in (first..).zip(h.iter()) {
                                    if height % FILTER_CHECKPOINT_INTERVAL == 0
                                        || height + 1 == first + n
                                    {
                                        marks.push(
                                            height,
                                            lightwire_chain::hash_header_bytes(header).0,
                                        );
                                    }
                                }
                                if validate {
                                    batch.extend(h.iter().map(Header::decode));
                                }
                                (first, n, h.last)
                            }
                            Ok(Message::HeadersCompact(h)) => {
                                let (first, n) = (h.first_height, u32::from(h.count));
                                let (bytes, hashes) =
                                    expanded.expand(&h).map_err(|e| e.to_string())?;
                                for (height, hash) in (first..).zip(hashes) {
                                    if height % FILTER_CHECKPOINT_INTERVAL == 0
                                        || height + 1 == first + n
                                    {
                                        marks.push(height, hash.0);
                                    }
                                }
                                if validate {
                                    batch.extend(
                                        bytes
                                            .chunks_exact(HEADER_LEN)
                                            .filter_map(|b| b.try_into().ok())
                                            .map(Header::decode),
                                    );
                                }
                                (first, n, h.last)
                            }
                            other => return Err(format!("expected headers, got {other:?}")),
                        };
                        if n > 0 {
                            if first != height + 1 {
                                return Err(format!(
                                    "headers from {first} where {} was next",
                                    height + 1
                                ));
                            }
                            height = first + n - 1;
                        }
                        Ok((n, last))
                    })
                    .await
                    .map_err(client_err)??;
                if n > 0 {
                    last_hash = self
                        .marks
                        .at(height)
                        .ok_or("no hash kept for the last header")?;
                }
                if let Some(chain) = chain.as_mut()
                    && !batch.is_empty()
                    && let Outcome::NeedAncestors { .. } | Outcome::Stale { .. } =
                        chain.connect(&batch, plan.now).map_err(|e| e.to_string())?
                {
                    return Err(format!("headers to {height} do not extend the chain held"));
                }
                self.tally.headers += u64::from(n);
                if last {
                    break;
                }
            }
        }
        Ok(())
    }

    /// One `filter_headers` answer to `id`, starting at `next`: `(count, last)`. With
    /// `--validate` its filter headers are rebuilt and must follow on from `prev`, which
    /// then moves to the last of them.
    async fn filter_headers_message(
        &mut self,
        id: u32,
        next: u32,
        prev: &mut [u8; 32],
    ) -> Result<(u32, bool), String> {
        let (expanded, validate) = (&mut self.expanded, self.plan.validate);
        self.c
            .recv(|m| match Message::decode(m) {
                Ok(Message::FilterHeaders(f)) if f.id == id => {
                    let n = f.count() as u32;
                    if f.flags.stop_unknown {
                        return Err(format!("the gateway does not know the stop of {next}"));
                    }
                    if n > 0 && f.first_height != next {
                        return Err(format!(
                            "filter headers from {} where {next} was next",
                            f.first_height
                        ));
                    }
                    if validate && n > 0 {
                        let (before, headers, _) = expanded
                            .link_filter_headers(&f)
                            .ok_or("filter-header segments do not join")?;
                        if before.0 != *prev {
                            return Err(format!("filter headers from {next} do not follow on"));
                        }
                        *prev = headers.last().map_or(*prev, |h| h.0);
                    }
                    Ok((n, f.flags.last))
                }
                other => Err(format!("expected filter headers for {id}, got {other:?}")),
            })
            .await
            .map_err(client_err)?
    }

    /// Each mirror filter-headers file's last filter header, asked with a request of that
    /// one block, `PROBES_IN_FLIGHT` at a time; with `--validate` it must equal the file's.
    async fn probes(&mut self) -> Result<(), String> {
        let Some(mirror) = &self.plan.mirror else {
            return Ok(());
        };
        let mut files = mirror.filter_files.iter();
        let mut in_flight = VecDeque::with_capacity(PROBES_IN_FLIGHT);
        loop {
            while in_flight.len() < PROBES_IN_FLIGHT
                && let Some(&(height, top)) = files.next()
            {
                let stop_hash = self
                    .hash_at(height)
                    .ok_or(format!("no block held at {height} to probe"))?;
                let id = self.next_id();
                let req = FilterRange {
                    id,
                    start_height: height,
                    stop_hash,
                };
                self.c
                    .send(&Message::GetFilterHeaders(GetFilterHeaders(req)))
                    .await
                    .map_err(client_err)?;
                in_flight.push_back((id, height, top));
            }
            let Some(&(id, height, top)) = in_flight.front() else {
                return Ok(());
            };
            // Not known before the answer: its anchor is the filter header below `height`.
            let mut got = [0; 32];
            let (expanded, validate) = (&mut self.expanded, self.plan.validate);
            let (n, last) = self
                .c
                .recv(|m| match Message::decode(m) {
                    Ok(Message::FilterHeaders(f)) if f.id == id && !f.flags.stop_unknown => {
                        if validate && f.count() > 0 {
                            let (_, headers, _) = expanded
                                .link_filter_headers(&f)
                                .ok_or("filter-header segments do not join")?;
                            got = headers.last().map_or(got, |h| h.0);
                        }
                        Ok((f.count() as u32, f.flags.last))
                    }
                    other => Err(format!("expected the probe at {height}, got {other:?}")),
                })
                .await
                .map_err(client_err)??;
            self.tally.filter_headers += u64::from(n);
            if validate && n > 0 && got != top {
                return Err(format!("the filter header at {height} is not the mirror's"));
            }
            if last {
                in_flight.pop_front();
                self.tally.probes += 1;
            }
        }
    }

    /// Filter headers above the mirror's (or from genesis) to `tip`, one request at a time,
    /// each to the furthest block held at most `FILTER_REQUEST` further.
    async fn filter_headers(&mut self, tip: u32) -> Result<(), String> {
        let mirror = self.plan.mirror.as_ref();
        // The anchor of genesis' filter header is 32 zero bytes.
        let (mut next, mut prev) = mirror
            .and_then(|m| m.filter_files.last())
            .map_or((0, [0; 32]), |&(h, top)| (h + 1, top));
        while next <= tip {
            let limit = next.saturating_add(FILTER_REQUEST - 1);
            let (stop, stop_hash) = self
                .marks
                .furthest(next, limit)
                .or_else(|| mirror?.marks.furthest(next, limit))
                .ok_or(format!("no block held from {next} to {limit}"))?;
            let id = self.next_id();
            let req = FilterRange {
                id,
                start_height: next,
                stop_hash,
            };
            self.c
                .send(&Message::GetFilterHeaders(GetFilterHeaders(req)))
                .await
                .map_err(client_err)?;
            loop {
                let (n, last) = self.filter_headers_message(id, next, &mut prev).await?;
                next += n;
                self.tally.filter_headers += u64::from(n);
                if last {
                    break;
                }
            }
            if next <= stop {
                return Err(format!(
                    "filter headers ended at {}, short of {stop}",
                    next - 1
                ));
            }
        }
        Ok(())
    }
}

async fn run(o: Cli) -> Result<(), String> {
    let params = o.network.params();
    let chain_hash = params.genesis.block_hash().0;
    let dialer = Arc::new(Dialer::new(&o, chain_hash)?);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
        + 7200;
    // Read before the first connection: what a tab fetched from the mirror is no part of
    // what the gateway serves.
    let mirror = match &o.manifest {
        Some(path) if o.idle.is_none() && o.handshakes.is_none() => {
            Some(Mirror::load(path, params, o.validate, now)?)
        }
        _ => None,
    };
    let plan = Arc::new(Plan {
        params,
        per_request: o.per_request,
        validate: o.validate,
        filter_headers: o.filter_headers,
        mirror,
        now,
    });
    if let Some(secs) = o.handshakes {
        let t0 = Instant::now();
        let (ok, failed) = handshakes(dialer, o.clients, secs).await;
        let secs = t0.elapsed().as_secs_f64();
        println!(
            "handshakes {ok} in {secs:.2} s ({failed} failed) = {:.0} handshakes/s",
            ok as f64 / secs
        );
        return Ok(());
    }
    let started = Instant::now();
    let mut clients = Vec::with_capacity(o.clients);
    let mut failed = 0;
    for _ in 0..o.clients {
        match dialer.dial().await {
            Ok(c) => clients.push(c),
            Err(e) => {
                failed += 1;
                // The first few say why; the rest would repeat it, and are counted below.
                if failed <= 5 {
                    tracing::warn!("connect: {e}");
                } else {
                    tracing::debug!("connect: {e}");
                }
            }
        }
    }
    let connect_s = started.elapsed().as_secs_f64();
    println!(
        "connected {} of {} in {connect_s:.2} s ({failed} failed)",
        clients.len(),
        o.clients
    );
    if let Some(secs) = o.idle {
        println!("idle");
        tokio::time::sleep(Duration::from_secs(secs)).await;
        return Ok(());
    }
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for c in clients {
        let plan = plan.clone();
        tasks.push(tokio::spawn(async move {
            match c {
                Conn::Plain(c) => tab(*c, &plan).await,
                Conn::Tls(c) => tab(*c, &plan).await,
            }
        }));
    }
    let (mut ok, mut errors, mut total) = (0, 0, Tally::default());
    for t in tasks {
        match t.await {
            Ok(Ok(n)) => {
                ok += 1;
                total.headers += n.headers;
                total.filter_headers += n.filter_headers;
                total.probes += n.probes;
                total.requests += n.requests;
                total.bytes += n.bytes;
            }
            Ok(Err(e)) => {
                errors += 1;
                tracing::warn!("sync: {e}");
            }
            Err(e) => {
                errors += 1;
                tracing::error!("task: {e}");
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    // Per connection that synced: a failed one's bytes are not counted.
    let per = |x: u64| x as f64 / f64::from(ok.max(1));
    println!(
        "received {} bytes in {:.2} s with {} requests: {:.0} bytes, {:.1} requests, {:.0} headers, \
         {:.0} filter headers ({:.0} probes) per client",
        total.bytes,
        started.elapsed().as_secs_f64(),
        total.requests,
        per(total.bytes),
        per(total.requests),
        per(total.headers),
        per(total.filter_headers),
        per(total.probes),
    );
    println!(
        "synced {ok} clients ({errors} failed): {} headers in {secs:.2} s = {:.0} headers/s aggregate",
        total.headers,
        total.headers as f64 / secs
    );
    if errors > 0 || failed > 0 {
        return Err(format!("{} failures", errors + failed));
    }
    Ok(())
}

fn main() -> ExitCode {
    // Exits itself after --help (0) or on a usage error (2).
    let cli = Cli::parse();
    if let Err(e) = cli.log.init() {
        eprintln!("lightwire-load: {e}");
        return ExitCode::from(2);
    }
    let result = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
        .and_then(|rt| rt.block_on(run(cli)));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The program's output, not a log: why the exit code is 1.
        Err(e) => {
            eprintln!("lightwire-load: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_stops_at_the_furthest_mark_in_reach() {
        let mut marks = Marks::default();
        for (h, b) in [
            (1000, 1),
            (1637, 2),
            (2000, 3),
            (2000, 9),
            (1500, 9),
            (21_000, 4),
        ] {
            marks.push(h, [b; 32]);
        }
        // Out of order or repeated heights are not kept.
        assert_eq!(marks.0.len(), 4);
        assert_eq!(marks.at(2000), Some([3; 32]));
        assert_eq!(marks.at(1500), None);
        assert_eq!(marks.furthest(0, 19_999), Some((2000, [3; 32])));
        assert_eq!(marks.furthest(2001, 22_000), Some((21_000, [4; 32])));
        assert_eq!(marks.furthest(2001, 20_000), None);
        assert_eq!(marks.furthest(0, 999), None);
    }
}
