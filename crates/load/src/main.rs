//! `lightwire-load`: open N connections to a gateway and either sync its whole chain on
//! each (reporting aggregate headers/s and failures) or hold them idle after the handshake
//! (for memory measurements).
//!
//! ```text
//! lightwire-load --connect ws[s]://HOST:PORT[/]#<node-id> --network NET [--clients N]
//!                [--idle SECONDS | --handshakes SECONDS] [--per-request COUNT] [--validate]
//!                [--tls-ca FILE] [--tls-name NAME] [--log FILTER]
//! ```
//! `wss://` connects over TLS, trusting the certificates in `--tls-ca` (PEM) for the name
//! `--tls-name` (default: HOST). `--handshakes` opens, completes the handshake (TLS, then
//! the WebSocket upgrade, BOLT 8 and `init`) and closes connections on `--clients` tasks
//! for that many seconds, and reports handshakes/s.
//! A gateway admits 64 connections per client address by default: for more from one
//! machine, start it with `--max-per-address` above `--clients` and `--max-new-per-second`
//! above the rate it connects at.
//! `--validate` runs every header through lightwire-chain (costs client CPU, which on a
//! small machine competes with the gateway); without it headers are only counted.
//!
//! Its results are the program's output, on stdout (scripts/bench-gateway.sh reads them):
//! `connected ...`, then `idle` or `synced ...`; when it fails, `lightwire-load: <why>` on
//! stderr and exit code 1 (2 for usage errors). Failures of single connections are
//! `tracing` events (to stderr, filtered by `--log`).
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use lightwire_chain::{Chain, Header, Network, Params};
use lightwire_gateway::client::{Client, Framing};
use lightwire_noise::PublicKey;
use lightwire_wire::{GetHeaders, Message};
use pki_types::CertificateDer;
use pki_types::pem::PemObject;
use tokio::net::TcpStream;
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
    Plain(Box<Client>),
    Tls(Box<Client<TlsStream<TcpStream>>>),
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

    async fn dial(&self) -> Result<Conn, lightwire_gateway::client::ClientError> {
        let (addr, id) = (self.connect.addr, &self.connect.node_id);
        let (chain, compact, framing) = (self.chain_hash, self.compact, Framing::OnePerFrame);
        Ok(match &self.tls {
            None => {
                let tcp = TcpStream::connect(addr).await?;
                let c = Client::over_offering(tcp, id, chain, framing, compact).await?;
                Conn::Plain(Box::new(c))
            }
            Some((config, name)) => {
                let config = config.clone();
                let c =
                    Client::connect_tls(addr, name, config, id, chain, framing, compact).await?;
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

/// Sync the whole chain; returns the headers received.
async fn sync<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut c: Client<S>,
    params: &'static Params,
    per_request: u32,
    validate: bool,
    counter: &AtomicU64,
) -> Result<u64, String> {
    let err = |e: lightwire_gateway::client::ClientError| e.to_string();
    c.recv(|_| ()).await.map_err(err)?; // init
    let tip = c
        .recv(|m| match Message::decode(m) {
            Ok(Message::Tip(t)) => Some(t.height),
            _ => None,
        })
        .await
        .map_err(err)?
        .ok_or("no tip after init")?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
        + 7200;
    let mut chain = Chain::new(params);
    let mut batch: Vec<Header> = Vec::with_capacity(2000);
    let mut expanded = lightwire_proto::compact::Expanded::new();
    let (mut height, mut last_hash, mut got, mut id) =
        (0u32, params.genesis.block_hash().0, 0u64, 0u32);
    while height < tip {
        id += 1;
        let req = GetHeaders {
            id,
            max_count: per_request,
            stop_hash: [0; 32],
            locator: &last_hash,
        };
        c.send(&Message::GetHeaders(req)).await.map_err(err)?;
        loop {
            batch.clear();
            let (n, last, first, last_header) = c
                .recv(|m| match Message::decode(m) {
                    Ok(Message::Headers(h)) => {
                        if validate {
                            batch.extend(h.iter().map(Header::decode));
                        }
                        Ok((
                            h.count() as u32,
                            h.last,
                            h.first_height,
                            h.iter().last().copied(),
                        ))
                    }
                    Ok(Message::HeadersCompact(h)) => {
                        let (bytes, _) = expanded.expand(&h).map_err(|e| e.to_string())?;
                        let headers = bytes.chunks_exact(80);
                        if validate {
                            batch.extend(
                                headers
                                    .clone()
                                    .filter_map(|b| b.try_into().ok())
                                    .map(Header::decode),
                            );
                        }
                        let last_header = headers.last().and_then(|b| b.try_into().ok());
                        Ok((u32::from(h.count), h.last, h.first_height, last_header))
                    }
                    other => Err(format!("expected headers, got {other:?}")),
                })
                .await
                .map_err(err)??;
            if validate && !batch.is_empty() {
                chain.connect(&batch, now).map_err(|e| e.to_string())?;
            }
            if let Some(h) = last_header {
                last_hash = lightwire_chain::hash_header_bytes(&h).0;
                height = first + n - 1;
            }
            got += u64::from(n);
            counter.fetch_add(u64::from(n), Relaxed);
            if last {
                break;
            }
        }
    }
    Ok(got)
}

async fn run(o: Cli) -> Result<(), String> {
    let params = o.network.params();
    let chain_hash = params.genesis.block_hash().0;
    let dialer = Arc::new(Dialer::new(&o, chain_hash)?);
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
    let counter = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for c in clients {
        let counter = counter.clone();
        let (per, validate) = (o.per_request, o.validate);
        tasks.push(tokio::spawn(async move {
            match c {
                Conn::Plain(c) => sync(*c, params, per, validate, &counter).await,
                Conn::Tls(c) => sync(*c, params, per, validate, &counter).await,
            }
        }));
    }
    let (mut ok, mut errors, mut total) = (0, 0, 0u64);
    for t in tasks {
        match t.await {
            Ok(Ok(n)) => {
                ok += 1;
                total += n;
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
    println!(
        "synced {ok} clients ({errors} failed): {total} headers in {secs:.2} s = {:.0} headers/s aggregate",
        total as f64 / secs
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
