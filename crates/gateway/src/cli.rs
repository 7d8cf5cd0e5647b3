//! The `lightwire-gateway` command line (part of the binary, not the library).
//!
//! What it writes, other than `--help` and clap's usage errors (exit 2):
//! - stdout, one line once it listens: `node id <hex> connect ws://HOST:PORT#<hex>`
//!   (`wss://` with `--tls-cert`);
//! - stderr, with `--metrics-listen`: `lightwire-gateway: metrics on http://HOST:PORT/metrics`;
//! - stderr, when it cannot start or stops on an error: `lightwire-gateway: <why>` (exit 1;
//!   exit 2 when `RUST_LOG` is not a filter);
//! - everything else is a `tracing` event (to stderr, filtered by `--log`).
//!
//! The first three are the program's output rather than logs, so they are printed with
//! `println!`/`eprintln!`, exactly as before, whatever `--log` says: scripts/start.sh,
//! scripts/bench-gateway.sh, tests/browser.mjs and tests/cli.rs take the connect string
//! and the metrics URL from those lines, and an exit code of 1 always comes with its
//! reason.
//!
//! `lightwire-gateway export ...` is another command line ([`ExportCli`]): it writes the
//! chain as bulk files for a static host ([`lightwire_gateway::export`]) and exits. It is
//! dispatched on the first argument rather than made a clap subcommand of [`Cli`], so
//! that the server's flat command line (`--listen`, `--key-file` required, no subcommand)
//! parses and reports usage errors exactly as before. It writes one line on stdout,
//! `exported <n> new files to <dir>: headers to <h>, filters to <f>` (exit 0), or
//! `lightwire-gateway: <why>` on stderr (exit 1; 2 for usage errors).

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::{Args, Parser, ValueEnum};
use lightwire_chain::{Chain, Network};
use lightwire_gateway::admission::{Block, TrustedProxies};
use lightwire_gateway::export;
use lightwire_gateway::key;
use lightwire_gateway::metrics::serve_metrics;
use lightwire_gateway::served::ServedChain;
use lightwire_gateway::server::{Buffers, Caps, Shared, serve};
use lightwire_gateway::tls::Tls;
use lightwire_gateway::upstream::follow_all;
use tokio::net::TcpListener;
use tokio::sync::watch;

use lightwire_gateway::logging::LogArgs;

/// Serves validated block headers to browsers over BOLT 8 in WebSocket.
///
/// Prints `node id <hex> connect ws://HOST:PORT#<hex>` on stdout once it listens (`wss://`
/// with --tls-cert); stops on SIGINT or SIGTERM; on SIGHUP loads the certificate and the
/// headers file again. Exit codes: 0 after a clean stop, 1 when it cannot start (a bad key
/// file, source or address), 2 for usage errors.
///
/// `lightwire-gateway export --help`: write the chain as bulk files for a static web host
/// instead (docs/PROTOCOL.md, "Bulk files (mirrors)").
#[derive(Parser)]
#[command(
    name = "lightwire-gateway",
    group(clap::ArgGroup::new("source").required(true).args(["generate", "headers_file", "upstream"]))
)]
struct Cli {
    /// Where to accept WebSocket connections
    #[arg(long, value_name = "HOST:PORT", value_parser = addr)]
    listen: SocketAddr,
    /// The static secret key (32 bytes), created with mode 0600 if the file does not exist
    #[arg(long, value_name = "PATH")]
    key_file: PathBuf,
    /// Serve wss:// with this certificate chain (PEM: the server's certificate first, then
    /// intermediates); loaded again on SIGHUP, for the connections that follow
    #[arg(long, value_name = "PATH", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1)
    #[arg(long, value_name = "PATH", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// A proxy in front (nginx, say) whose connections name their client in
    /// X-Forwarded-For: an address or a CIDR block; repeatable
    ///
    /// The last address of the header is taken as the client's (the one the proxy wrote),
    /// for the per-address caps and the logs; a request from it without one is refused.
    /// Anyone else's X-Forwarded-For is ignored.
    #[arg(long, value_name = "ADDRESS[/PREFIX]")]
    trusted_proxy: Vec<Block>,
    /// A mirror of the chain's history (`lightwire-gateway export` served as static files,
    /// deploy/nginx/bulk.conf) to advertise to clients in `init`: its base URL, http(s);
    /// repeatable, at most 4
    ///
    /// A client that lists no mirrors of its own reads these (docs/PROTOCOL.md, "Bulk
    /// files"); they carry no trust, and take the bulk of a new client's sync off this
    /// gateway.
    #[arg(long, value_name = "URL", value_parser = bulk_url)]
    bulk_url: Vec<String>,
    /// Keep the chain's history exported as bulk files in DIR/<network>/ (what
    /// `lightwire-gateway export` writes), appended as the chain grows: the ranges
    /// --export-confirmations deep, with their filters fetched from the node
    ///
    /// For a static host to serve (deploy/nginx/bulk.conf) and --bulk-url to advertise.
    /// A failed run (a node slow to send a filter, a full disk) is logged and tried again
    /// at the next block; a sealed file is never rewritten. Its first run reads and hashes
    /// every file the manifest lists.
    #[arg(long, value_name = "DIR")]
    export_dir: Option<PathBuf>,
    /// How deep below the tip a range must end to be exported (--export-dir)
    #[arg(long, value_name = "N", default_value_t = export::DEFAULT_CONFIRMATIONS, requires = "export_dir")]
    export_confirmations: u32,
    /// Serve Prometheus metrics on http://HOST:PORT/metrics
    #[arg(long, value_name = "HOST:PORT", value_parser = addr)]
    metrics_listen: Option<SocketAddr>,
    /// Frame buffers (benches/README.md)
    #[arg(long, value_enum, value_name = "MODE", default_value_t = BufferMode::Pooled)]
    buffers: BufferMode,
    /// Buffers in each of the two pools (--buffers pooled; at least 1)
    #[arg(long, value_name = "N", default_value_t = DEFAULT_POOL)]
    pool: u32,
    /// Client connections open at once; more are answered 503 and closed before any
    /// handshake
    ///
    /// 20,000 idle connections hold about 100 MB with pooled buffers; keep the descriptor
    /// limit (`ulimit -n`) above it. At least 1.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    max_connections: u32,
    /// Client connections open at once from one IP address (IPv6: one /64); more are
    /// refused the same way
    ///
    /// A browser tab opens one connection per gateway, so 64 leaves room for dozens of tabs
    /// or users behind one NAT, while one host needs 313 addresses to take all 20,000
    /// connections. At least 1.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_PER_ADDRESS)]
    max_per_address: u32,
    /// New connections a second from one IP address (IPv6: one /64), in bursts of as
    /// many; more are refused the same way (a 503 with Retry-After: 1)
    ///
    /// Each connection costs a BOLT 8 handshake (two ECDH operations): this keeps one host
    /// from spending the gateway's CPU by connecting and closing in a loop. A tab reconnects
    /// with a backoff from 1 s. At least 1.
    #[arg(long, value_name = "N", default_value_t = Caps::DEFAULT_MAX_NEW_PER_SECOND)]
    max_new_per_second: u32,
    /// Answer with plain 80-byte `headers` only, as a gateway from before `headers_compact`
    /// (for testing that clients still work with one)
    #[arg(long)]
    no_compact_headers: bool,
    #[command(flatten)]
    log: LogArgs,
    #[command(flatten)]
    source: SourceArgs,
}

/// Where the headers come from: exactly one of --generate, --headers-file, --upstream.
#[derive(Args)]
#[command(next_help_heading = "Source (exactly one of --generate, --headers-file, --upstream)")]
struct SourceArgs {
    /// A deterministic regtest chain of N headers
    #[arg(long, value_name = "N")]
    generate: Option<u32>,
    /// Do not serve compact block filters (for a generated chain they are built at start,
    /// on every core: about 2 s for 925,000 blocks; from a node, its own are served)
    #[arg(long, conflicts_with = "headers_file")]
    no_filters: bool,
    /// Megabytes of filters kept in memory; others are built again (generated) or fetched
    /// again from the node when asked for
    #[arg(long, value_name = "MB", default_value_t = 256)]
    filter_cache_mb: u32,
    /// 80-byte headers from a file, validated first; reloaded on SIGHUP (a new chain is
    /// served as a reorg)
    #[arg(long, value_name = "FILE", requires = "network")]
    headers_file: Option<PathBuf>,
    /// Height of the file's first header [default: the file starts at genesis]
    #[arg(long, value_name = "H")]
    from_height: Option<u32>,
    /// A Bitcoin node over P2P, followed to its tip; repeatable: the valid chain with the
    /// most work among them is served, and any one may go away or lie (a node whose headers
    /// break a rule is dropped, the rule logged, and left alone for 10 minutes)
    #[arg(long, value_name = "HOST:PORT", value_parser = addr, requires = "network")]
    upstream: Vec<SocketAddr>,
    /// The network of --headers-file or --upstream: mainnet, testnet3, testnet4, signet or
    /// regtest
    #[arg(long, value_name = "NET")]
    network: Option<Network>,
    /// Do not follow the nodes' mempools (with --upstream, they are followed and served as
    /// a private digest: clients see payments to them before they are mined)
    #[arg(long)]
    no_mempool: bool,
    /// Megabytes of the nodes' unconfirmed transactions kept; past it the oldest are let go
    #[arg(long, value_name = "MB", default_value_t = 64)]
    mempool_mb: u32,
    /// A node's JSON-RPC, asked every minute for its fee estimates (estimatesmartfee, or
    /// btcd's estimatefee), which are served to clients; needs --node-rpc-auth
    #[arg(long, value_name = "HOST:PORT", value_parser = addr, requires_all = ["upstream", "node_rpc_auth"])]
    node_rpc: Option<SocketAddr>,
    /// A file holding the RPC's user:password on its first line (Bitcoin Core's .cookie is
    /// one), read at start
    #[arg(long, value_name = "FILE", requires = "node_rpc")]
    node_rpc_auth: Option<PathBuf>,
    /// Serve silent-payment tweaks (BIP352), computed for every block from the node at
    /// --node-rpc (Bitcoin Core's getblock at verbosity 3; btcd needs --txindex) and kept
    /// in DIR/<network>/tweaks (mainnet: about 6 GB); off by default
    #[arg(long, value_name = "DIR", requires = "node_rpc")]
    tweaks_dir: Option<PathBuf>,
}

/// Writes a chain's headers, filter headers and filters as immutable, content-addressed
/// bulk files and a manifest, for a static web host (deploy/nginx/bulk.conf) to serve
/// (docs/PROTOCOL.md, "Bulk files (mirrors)").
///
/// Files go in DIR/<network>/. A run on a longer chain appends: it first checks every
/// file the manifest lists (size and SHA-256) and that the chain still has the sealed
/// blocks and filter headers, refusing with nothing written otherwise; sealed files are
/// never rewritten. Prints `exported <n> new files to <dir>: headers to <h>, filters to
/// <f>`. Exit codes: 0, 1 when it cannot export (the reason on stderr), 2 for usage
/// errors.
#[derive(Parser)]
#[command(
    name = "lightwire-gateway export",
    bin_name = "lightwire-gateway export",
    group(clap::ArgGroup::new("source").required(true).args(["generate", "headers_file"]))
)]
struct ExportCli {
    /// The directory to write in (DIR/<network>/ is made if needed)
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Seal (write) a range only when its last block is at least N blocks below the tip:
    /// a reorg deeper than that is refused, never written over
    #[arg(long, value_name = "N", default_value_t = export::DEFAULT_CONFIRMATIONS)]
    confirmations: u32,
    #[command(flatten)]
    log: LogArgs,
    #[command(flatten)]
    source: ExportSourceArgs,
}

/// What to export: exactly one of --generate, --headers-file. A chain followed from nodes
/// is exported by the gateway that follows it (`--export-dir`), which fetches the filters
/// from them as the export needs them.
#[derive(Args)]
#[command(next_help_heading = "Source (exactly one of --generate, --headers-file)")]
struct ExportSourceArgs {
    /// A deterministic regtest chain of N headers, with its filters (the server's
    /// --generate chain)
    #[arg(long, value_name = "N")]
    generate: Option<u32>,
    /// 80-byte headers from a file, from genesis, validated first (headers files only: no
    /// filter files are written)
    #[arg(long, value_name = "FILE", requires = "network")]
    headers_file: Option<PathBuf>,
    /// The network of --headers-file: mainnet, testnet3, testnet4, signet or regtest
    #[arg(long, value_name = "NET", requires = "headers_file")]
    network: Option<Network>,
}

impl ExportSourceArgs {
    /// The source as the server loads it ([`load`]). clap has checked that exactly one is
    /// given, --headers-file with --network; the other arm is refused all the same.
    fn source(self) -> Result<Source, String> {
        match (self.generate, self.headers_file, self.network) {
            // Every filter is built once, as it is written: nothing to cache.
            (Some(count), None, _) => Ok(Source::Generate {
                count,
                filter_cache: Some(0),
            }),
            (None, Some(path), Some(network)) => Ok(Source::File {
                path,
                network,
                from_height: None,
            }),
            _ => Err("give exactly one of --generate, --headers-file (with --network)".into()),
        }
    }
}

/// Where frame buffers live.
#[derive(Clone, Copy, ValueEnum)]
enum BufferMode {
    /// Lent from two pools of --pool buffers (64 KiB each) only while a frame is read or
    /// written
    Pooled,
    /// Owned by each connection
    Fixed,
}

enum Source {
    Generate {
        count: u32,
        /// Serve filters, caching this many bytes of them.
        filter_cache: Option<usize>,
    },
    File {
        path: PathBuf,
        network: Network,
        from_height: Option<u32>,
    },
    Upstream {
        /// The nodes (at least one).
        addrs: Vec<SocketAddr>,
        network: Network,
        /// Serve the node's filters, caching this many bytes of them.
        filter_cache: Option<usize>,
        /// Follow the nodes' mempools, holding this many bytes of transactions.
        mempool: Option<usize>,
        /// Ask a node's RPC for fee estimates, and serve them.
        rpc: Option<lightwire_gateway::fees::RpcEndpoint>,
        /// Compute and serve silent-payment tweaks, kept in this directory.
        tweaks: Option<PathBuf>,
    },
}

struct Options {
    listen: SocketAddr,
    key_file: PathBuf,
    source: Source,
    metrics: Option<SocketAddr>,
    pool: Option<usize>,
    caps: Caps,
    compact: bool,
    tls: Option<(PathBuf, PathBuf)>,
    trusted_proxies: TrustedProxies,
    /// The `bulk_mirrors` value advertised in `init` (empty: none).
    mirrors: Vec<u8>,
    /// Where to keep an export, and how deep (`--export-dir`).
    export: Option<(PathBuf, u32)>,
}

/// [`Buffers::DEFAULT_POOL`], as the flag's type.
const DEFAULT_POOL: u32 = 256;

/// [`Caps::DEFAULT_MAX_CONNECTIONS`], as the flag's type (the library says why).
const DEFAULT_MAX_CONNECTIONS: u32 = 20_000;
/// [`Caps::DEFAULT_MAX_PER_ADDRESS`], as the flag's type.
const DEFAULT_MAX_PER_ADDRESS: u32 = 64;
const _: () = assert!(
    DEFAULT_MAX_CONNECTIONS as usize == Caps::DEFAULT_MAX_CONNECTIONS
        && DEFAULT_MAX_PER_ADDRESS as usize == Caps::DEFAULT_MAX_PER_ADDRESS
        && DEFAULT_POOL as usize == Buffers::DEFAULT_POOL
);

/// The node's RPC at `addr`, with the `user:password` on `file`'s first line (read again
/// when the node refuses them: Bitcoin Core writes a new cookie each time it starts).
fn rpc_endpoint(
    addr: SocketAddr,
    file: &std::path::Path,
) -> Result<lightwire_gateway::fees::RpcEndpoint, String> {
    lightwire_gateway::fees::RpcEndpoint::from_file(addr, file)
}

impl Cli {
    /// The options to run with. clap has checked that exactly one source is given, with
    /// --network where it needs one, so the `None` arms are unreachable; they are refused
    /// all the same rather than unwrapped.
    fn options(self) -> Result<Options, String> {
        let s = self.source;
        let upstream = (!s.upstream.is_empty()).then_some(s.upstream);
        let source = match (s.generate, s.headers_file, upstream, s.network) {
            (Some(count), None, None, _) => Source::Generate {
                count,
                filter_cache: (!s.no_filters).then_some((s.filter_cache_mb as usize) << 20),
            },
            (None, Some(path), None, Some(network)) => Source::File {
                path,
                network,
                from_height: s.from_height,
            },
            (None, None, Some(addrs), Some(network)) => Source::Upstream {
                addrs,
                network,
                filter_cache: (!s.no_filters).then_some((s.filter_cache_mb as usize) << 20),
                mempool: (!s.no_mempool).then_some((s.mempool_mb as usize) << 20),
                rpc: match (s.node_rpc, s.node_rpc_auth) {
                    (Some(addr), Some(file)) => Some(rpc_endpoint(addr, &file)?),
                    _ => None,
                },
                tweaks: s.tweaks_dir,
            },
            _ => {
                return Err(
                    "give exactly one of --generate, --headers-file, --upstream \
                            (the last two with --network)"
                        .into(),
                );
            }
        };
        let count = |n: u32| usize::try_from(n.max(1)).unwrap_or(usize::MAX);
        let pool = count(self.pool);
        let caps = Caps {
            max_connections: count(self.max_connections),
            max_per_address: count(self.max_per_address),
            max_new_per_second: self.max_new_per_second,
        };
        if self.bulk_url.len() > lightwire_proto::initiator::MAX_MIRRORS_ADVERTISED {
            return Err(format!(
                "--bulk-url is given {} times; clients take at most {}",
                self.bulk_url.len(),
                lightwire_proto::initiator::MAX_MIRRORS_ADVERTISED
            ));
        }
        let urls: Vec<&str> = self.bulk_url.iter().map(String::as_str).collect();
        let mut mirrors = vec![0u8; urls.iter().map(|u| u.len() + 2).sum()];
        let n = lightwire_wire::Init::encode_mirrors(&urls, &mut mirrors).unwrap_or(0);
        mirrors.truncate(n);
        Ok(Options {
            mirrors,
            export: self.export_dir.map(|d| (d, self.export_confirmations)),
            listen: self.listen,
            key_file: self.key_file,
            source,
            metrics: self.metrics_listen,
            pool: matches!(self.buffers, BufferMode::Pooled).then_some(pool),
            caps,
            compact: !self.no_compact_headers,
            tls: self.tls_cert.zip(self.tls_key),
            trusted_proxies: TrustedProxies::new(self.trusted_proxy),
        })
    }
}

/// A `--bulk-url`: what a client takes from a gateway's `init` (an absolute http(s) URL,
/// no spaces, at most 512 bytes).
fn bulk_url(v: &str) -> Result<String, String> {
    let absolute = v.starts_with("https://") || v.starts_with("http://");
    if !absolute || v.len() > lightwire_proto::initiator::MAX_MIRROR_URL {
        return Err(
            "a mirror's base URL is an http:// or https:// URL of at most 512 bytes".into(),
        );
    }
    if v.bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err("a mirror's base URL has no spaces".into());
    }
    Ok(v.to_string())
}

fn addr(v: &str) -> Result<SocketAddr, String> {
    v.parse()
        .map_err(|_| format!("{v} is not HOST:PORT (an IP address and a port)"))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The chain to serve, and the validation state to keep following an upstream node.
fn load(source: &Source) -> Result<(ServedChain, Option<Chain>), String> {
    match source {
        Source::Upstream { network, .. } => {
            let (served, chain) = ServedChain::genesis_only(network.params());
            Ok((served, Some(chain)))
        }
        Source::Generate {
            count,
            filter_cache,
        } => {
            let mut chain = ServedChain::generate(*count, now()).map_err(|e| e.to_string())?;
            if let Some(bytes) = filter_cache {
                chain.serve_generated_filters(*bytes);
            }
            Ok((chain, None))
        }
        Source::File {
            path,
            network,
            from_height,
        } => {
            let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            ServedChain::from_file(network.params(), &data, *from_height, now())
                .map(|c| (c, None))
                .map_err(|e| format!("{}: {e}", path.display()))
        }
    }
}

/// Run the command line; returns the exit code.
pub fn main() -> ExitCode {
    if std::env::args_os().nth(1).is_some_and(|a| a == "export") {
        return export_main();
    }
    // Exits itself after --help (0) or on a usage error (2).
    let cli = Cli::parse();
    if let Err(e) = cli.log.init() {
        eprintln!("lightwire-gateway: {e}");
        return ExitCode::from(2);
    }
    let options = match cli.options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("lightwire-gateway: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(&e.to_string()),
    };
    match runtime.block_on(run(options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// `lightwire-gateway export ...`: returns the exit code.
fn export_main() -> ExitCode {
    // "export" stands in for the program's name: clap reads the arguments after it.
    let cli = ExportCli::parse_from(std::env::args_os().skip(1));
    if let Err(e) = cli.log.init() {
        eprintln!("lightwire-gateway: {e}");
        return ExitCode::from(2);
    }
    let source = match cli.source.source() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("lightwire-gateway: {e}");
            return ExitCode::from(2);
        }
    };
    let started = std::time::Instant::now();
    let chain = match load(&source) {
        Ok((chain, _)) => chain,
        Err(e) => return fail(&e),
    };
    tracing::info!(
        "exporting {} headers of {}, validated in {:.1} s",
        u64::from(chain.tip().height) + 1,
        chain.params().network,
        started.elapsed().as_secs_f64()
    );
    match export::export(&chain, &cli.out, cli.confirmations) {
        Ok(done) => {
            // Program output, not a log: scripts take the heights from this line.
            println!("{done}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e.to_string()),
    }
}

/// Why the gateway cannot go on, on stderr whatever `--log` says (see the module's
/// documentation), and exit code 1.
fn fail(why: &str) -> ExitCode {
    eprintln!("lightwire-gateway: {why}");
    ExitCode::from(1)
}

async fn run(o: Options) -> Result<(), String> {
    let key = key::load_or_create(&o.key_file).map_err(|e| e.to_string())?;
    let tls = match &o.tls {
        Some((cert, key)) => Some(Tls::load(cert, key).map_err(|e| e.to_string())?),
        None => None,
    };
    let started = std::time::Instant::now();
    let (mut chain, following) = load(&o.source)?;
    chain.advertise_mirrors(o.mirrors.clone());
    let tip = chain.tip();
    tracing::info!(
        "serving {} headers of {} (tip {}), validated in {:.1} s",
        tip.height + 1 - chain.base(),
        chain.params().network,
        tip.height,
        started.elapsed().as_secs_f64()
    );
    let listener = TcpListener::bind(o.listen)
        .await
        .map_err(|e| format!("{}: {e}", o.listen))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let node_id = hex::encode(key.public_key().serialize());
    let buffers = match o.pool {
        Some(n) => Buffers::pooled(n),
        None => Buffers::Fixed,
    };
    let scheme = if tls.is_some() { "wss" } else { "ws" };
    let mut builder = Shared::builder(chain, key)
        .buffers(buffers)
        .caps(o.caps)
        .trusted_proxies(o.trusted_proxies.clone())
        .offer_compact_headers(o.compact);
    if let Some(tls) = tls {
        builder = builder.tls(tls);
    }
    if let Source::Upstream {
        mempool: Some(budget),
        ..
    } = o.source
    {
        builder = builder.mempool(budget);
    }
    if let Source::Upstream {
        rpc: Some(_),
        tweaks: Some(_),
        ..
    } = &o.source
    {
        // Serving tweaks: the mempool's transactions go out with theirs.
        builder = builder.mempool_tweaks(true);
    }
    let shared = builder.build();
    if let Source::Upstream {
        filter_cache: Some(bytes),
        ..
    } = o.source
        && let Ok(mut c) = shared.chain.write()
    {
        c.serve_upstream_filters(bytes, shared.filter_notify.clone());
    }
    if let Source::Upstream { .. } = o.source
        && let Ok(mut c) = shared.chain.write()
    {
        c.serve_upstream_blocks(shared.filter_notify.clone());
        c.serve_relay(shared.relay.clone());
        if shared.follows_mempool {
            c.serve_mempool(shared.mempool.clone());
        }
    }
    if let Source::Upstream {
        rpc: Some(rpc),
        addrs,
        ..
    } = &o.source
        && let Ok(mut c) = shared.chain.write()
    {
        // Which node followed the RPC is, for its filter index height.
        let node = lightwire_gateway::fees::rpc_node(rpc.addr, addrs);
        if node.is_none() {
            tracing::warn!(
                rpc = %rpc.addr,
                "cannot tell which --upstream node --node-rpc is (none at its address, or \
                 several and none on the next port): its filter index height is not used"
            );
        }
        let fees = std::sync::Arc::new(lightwire_gateway::fees::NodeFees::of_node(node));
        c.serve_fees(fees.clone());
        tokio::spawn(lightwire_gateway::fees::poll(rpc.clone(), fees));
    }
    if let Source::Upstream {
        rpc: Some(_),
        tweaks: Some(dir),
        network,
        ..
    } = &o.source
    {
        let tweaks = lightwire_gateway::tweaks::ServedTweaks::open(dir, *network)
            .map_err(|e| e.to_string())?;
        tracing::info!(
            stored = tweaks.stored(),
            dir = %dir.display(),
            "serving silent-payment tweaks"
        );
        if let Ok(mut c) = shared.chain.write() {
            c.serve_tweaks(tweaks);
            c.serve_spent_from(lightwire_gateway::spent_from::ServedSpentFrom::new(
                shared.filter_notify.clone(),
            ));
        }
    }
    let signals = Signals::catch();
    if let Some(m) = o.metrics {
        let metrics = TcpListener::bind(m)
            .await
            .map_err(|e| format!("{m}: {e}"))?;
        if let Ok(a) = metrics.local_addr() {
            // Program output, not a log (see the module's documentation): scripts and
            // tests take the URL from this line.
            eprintln!("lightwire-gateway: metrics on http://{a}/metrics");
        }
        let shared = shared.clone();
        tokio::spawn(serve_metrics(metrics, move || shared.render_metrics()));
    }
    // Program output: the line scripts and tests wait for and take the connect string from.
    println!("node id {node_id} connect {scheme}://{local}#{node_id}");
    let _ = std::io::stdout().flush();

    let (stop, stopped) = watch::channel(false);
    if let (Source::Upstream { addrs, network, .. }, Some(chain)) = (&o.source, following) {
        let (addrs, network, shared) = (addrs.clone(), *network, shared.clone());
        let stopped = stopped.clone();
        tokio::spawn(async move { follow_all(&addrs, network, shared, chain, stopped).await });
    }
    if let Source::Upstream {
        rpc: Some(rpc),
        tweaks: Some(_),
        ..
    } = &o.source
    {
        let (rpc, shared, stopped) = (rpc.clone(), shared.clone(), stopped.clone());
        tokio::spawn(lightwire_gateway::tweaks::keep(
            shared.clone(),
            rpc.clone(),
            stopped.clone(),
        ));
        if shared.mempool.works_out_tweaks() {
            tokio::spawn(lightwire_gateway::mempool_tweaks::keep(
                shared.clone(),
                rpc.clone(),
                stopped.clone(),
            ));
        }
        tokio::spawn(lightwire_gateway::spent_from::keep(shared, rpc, stopped));
    }
    if let Some((dir, confirmations)) = o.export.clone() {
        let (shared, stopped) = (shared.clone(), stopped.clone());
        tokio::spawn(lightwire_gateway::exporter::keep(
            shared,
            dir,
            confirmations,
            stopped,
        ));
    }
    let server = tokio::spawn(serve(listener, shared.clone(), stopped));
    let reload = || {
        if let Some(tls) = &shared.front.tls {
            match tls.reload() {
                Ok(()) => tracing::info!("reloaded the TLS certificate and key"),
                // A bad pair changes nothing: new connections get the last good one.
                Err(e) => tracing::error!("TLS reload refused, still serving the old pair: {e}"),
            }
        }
        if !matches!(o.source, Source::File { .. }) {
            if shared.front.tls.is_none() {
                tracing::warn!("SIGHUP ignored (it reloads a certificate or a headers file)");
            }
            return;
        }
        match load(&o.source) {
            Ok((chain, _)) => {
                let tip = chain.tip().height;
                let Ok(mut served) = shared.chain.write() else {
                    tracing::error!("reload refused: the served chain is unusable");
                    return;
                };
                served.replace(chain);
                drop(served);
                shared.tip_version.send_modify(|v| *v += 1);
                tracing::info!(tip, "reloaded the headers file");
            }
            // A bad file changes nothing: the chain served stays the last good one.
            Err(e) => tracing::error!("reload refused, still serving the old chain: {e}"),
        }
    };
    signals.wait(reload).await;
    tracing::info!("shutting down");
    let _ = stop.send(true);
    let _ = server.await;
    Ok(())
}

/// SIGINT, SIGTERM and SIGHUP, caught from the moment this is made: before the metrics and
/// connect lines are printed, so that a signal sent as soon as they are seen is handled
/// (SIGTERM stops the gateway cleanly, exit 0) rather than killing it. While the chain is
/// still being validated, before that, a signal does kill it.
struct Signals {
    #[cfg(unix)]
    unix: Option<[tokio::signal::unix::Signal; 3]>,
}

impl Signals {
    /// Start catching them (inside the runtime).
    fn catch() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let caught = (|| {
                Ok::<_, std::io::Error>([
                    signal(SignalKind::interrupt())?,
                    signal(SignalKind::terminate())?,
                    signal(SignalKind::hangup())?,
                ])
            })();
            let unix = caught
                .map_err(|e| tracing::warn!("signals: {e}; only Ctrl-C stops the gateway"))
                .ok();
            Signals { unix }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// Wait for SIGINT or SIGTERM; call `reload` on each SIGHUP meanwhile.
    async fn wait(self, reload: impl Fn()) {
        #[cfg(unix)]
        if let Some([mut int, mut term, mut hup]) = self.unix {
            loop {
                tokio::select! {
                    _ = int.recv() => return,
                    _ = term.recv() => return,
                    _ = hup.recv() => reload(),
                }
            }
        }
        #[cfg(not(unix))]
        let _ = reload;
        let _ = tokio::signal::ctrl_c().await;
    }
}
