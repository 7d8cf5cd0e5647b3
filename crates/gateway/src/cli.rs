//! The `lightwire-gateway` command line.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use lightwire_chain::{Chain, Network};
use lightwire_noise::SecretKey;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::metrics::serve_metrics;
use crate::served::ServedChain;
use crate::server::{Buffers, Limits, Shared, serve};
use crate::upstream::follow;

const USAGE: &str = "usage: lightwire-gateway --listen HOST:PORT --key-file PATH SOURCE [--metrics-listen HOST:PORT]
                         [--buffers pooled|fixed] [--pool N]
  SOURCE is one of:
    --generate N [--corrupt-at H]                  a deterministic regtest chain of N headers
                                                   (--corrupt-at: for testing clients, serve
                                                   header H with wrong nBits)
    --headers-file FILE --network NET [--from-height H]
                                                   80-byte headers from a file (validated first;
                                                   reloaded on SIGHUP, a new chain is served
                                                   as a reorg)
    --upstream HOST:PORT --network NET             a Bitcoin node over P2P, followed to its tip
  networks: mainnet, testnet3, testnet4, signet, regtest
  --buffers: frame buffers lent from two pools of N (default 256) only while a frame is read
  or written (pooled, the default), or owned by each connection (fixed); benches/README.md";

enum Source {
    Generate {
        count: u32,
        corrupt_at: Option<u32>,
    },
    File {
        path: PathBuf,
        network: Network,
        from_height: Option<u32>,
    },
    Upstream {
        addr: SocketAddr,
        network: Network,
    },
}

struct Options {
    listen: SocketAddr,
    key_file: PathBuf,
    source: Source,
    metrics: Option<SocketAddr>,
    pool: Option<usize>,
}

/// Buffers per pool by default: 2 x 256 x 64 KiB = 32 MiB at most.
const DEFAULT_POOL: usize = 256;

fn parse(args: &[String]) -> Result<Options, String> {
    let mut listen = None;
    let mut key_file = None;
    let mut generate = None;
    let mut corrupt_at = None;
    let mut file = None;
    let mut network = None;
    let mut from_height = None;
    let mut upstream = None;
    let mut metrics = None;
    let mut pooled = true;
    let mut pool = DEFAULT_POOL;
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--listen" => listen = Some(addr(flag, &value()?)?),
            "--key-file" => key_file = Some(PathBuf::from(value()?)),
            "--generate" => generate = Some(number(flag, &value()?)?),
            "--corrupt-at" => corrupt_at = Some(number(flag, &value()?)?),
            "--headers-file" => file = Some(PathBuf::from(value()?)),
            "--network" => {
                let v = value()?;
                network = Some(v.parse::<Network>().map_err(|e| e.to_string())?)
            }
            "--from-height" => from_height = Some(number(flag, &value()?)?),
            "--upstream" => upstream = Some(value()?),
            "--metrics-listen" => metrics = Some(addr(flag, &value()?)?),
            "--buffers" => {
                pooled = match value()?.as_str() {
                    "pooled" => true,
                    "fixed" => false,
                    other => return Err(format!("--buffers: {other} is not pooled or fixed")),
                }
            }
            "--pool" => pool = number(flag, &value()?)?.max(1) as usize,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let listen = listen.ok_or("--listen is required")?;
    let key_file = key_file.ok_or("--key-file is required")?;
    let source = match (generate, file, upstream) {
        (Some(count), None, None) => Source::Generate { count, corrupt_at },
        (None, Some(path), None) => Source::File {
            path,
            network: network.ok_or("--headers-file needs --network")?,
            from_height,
        },
        (None, None, Some(a)) => Source::Upstream {
            addr: addr("--upstream", &a)?,
            network: network.ok_or("--upstream needs --network")?,
        },
        _ => return Err("give exactly one of --generate, --headers-file, --upstream".into()),
    };
    if corrupt_at.is_some() && !matches!(source, Source::Generate { .. }) {
        return Err("--corrupt-at goes with --generate only".into());
    }
    Ok(Options {
        listen,
        key_file,
        source,
        metrics,
        pool: pooled.then_some(pool),
    })
}

fn addr(flag: &str, v: &str) -> Result<SocketAddr, String> {
    v.parse()
        .map_err(|_| format!("{flag}: {v} is not HOST:PORT (an IP address and a port)"))
}

fn number(flag: &str, v: &str) -> Result<u32, String> {
    v.parse()
        .map_err(|_| format!("{flag}: {v} is not a number"))
}

/// The static key in `path`, created (32 random bytes, mode 0600) if it does not exist.
pub fn load_or_create_key(path: &Path) -> Result<SecretKey, String> {
    match std::fs::read(path) {
        Ok(bytes) => SecretKey::from_slice(&bytes)
            .map_err(|e| format!("{}: not a 32-byte secret key: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = crate::random_key().map_err(|e| format!("no randomness: {e}"))?;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut f = options
                .open(path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            f.write_all(&key.to_bytes()[..])
                .and_then(|()| f.sync_all())
                .map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(key)
        }
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
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
        Source::Generate { count, corrupt_at } => {
            let mut chain = ServedChain::generate(*count, now()).map_err(|e| e.to_string())?;
            if let Some(h) = corrupt_at
                && !chain.corrupt(*h)
            {
                return Err(format!("--corrupt-at {h}: not a height from 1 to {count}"));
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
pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse(&args) {
        Ok(o) => o,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return 0;
        }
        Err(e) => {
            eprintln!("lightwire-gateway: {e}\n{USAGE}");
            return 2;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("lightwire-gateway: {e}");
            return 1;
        }
    };
    match runtime.block_on(run(options)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("lightwire-gateway: {e}");
            1
        }
    }
}

async fn run(o: Options) -> Result<(), String> {
    let key = load_or_create_key(&o.key_file)?;
    let started = std::time::Instant::now();
    let (chain, following) = load(&o.source)?;
    let tip = chain.tip();
    eprintln!(
        "lightwire-gateway: serving {} headers of {} (tip {}), validated in {:.1} s",
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
    let shared = Shared::new(chain, key, Limits::default(), buffers);
    if let Some(m) = o.metrics {
        let metrics = TcpListener::bind(m)
            .await
            .map_err(|e| format!("{m}: {e}"))?;
        if let Ok(a) = metrics.local_addr() {
            eprintln!("lightwire-gateway: metrics on http://{a}/metrics");
        }
        let shared = shared.clone();
        tokio::spawn(serve_metrics(metrics, move || shared.render_metrics()));
    }
    println!("node id {node_id} connect ws://{local}#{node_id}");
    let _ = std::io::stdout().flush();

    let (stop, stopped) = watch::channel(false);
    if let (Source::Upstream { addr, network }, Some(chain)) = (&o.source, following) {
        tokio::spawn(follow(
            *addr,
            *network,
            shared.clone(),
            chain,
            stopped.clone(),
        ));
    }
    let server = tokio::spawn(serve(listener, shared.clone(), stopped));
    let reload = || {
        if !matches!(o.source, Source::File { .. }) {
            eprintln!("lightwire-gateway: SIGHUP ignored (only a headers file is reloaded)");
            return;
        }
        match load(&o.source) {
            Ok((chain, _)) => {
                let tip = chain.tip().height;
                let Ok(mut served) = shared.chain.write() else {
                    eprintln!("lightwire-gateway: reload refused: the served chain is unusable");
                    return;
                };
                served.replace(chain);
                drop(served);
                shared.tip_version.send_modify(|v| *v += 1);
                eprintln!("lightwire-gateway: reloaded the headers file, tip {tip}");
            }
            // A bad file changes nothing: the chain served stays the last good one.
            Err(e) => {
                eprintln!("lightwire-gateway: reload refused, still serving the old chain: {e}")
            }
        }
    };
    wait_for_signal(reload).await;
    eprintln!("lightwire-gateway: shutting down");
    let _ = stop.send(true);
    let _ = server.await;
    Ok(())
}

/// Wait for SIGINT or SIGTERM; call `reload` on each SIGHUP meanwhile.
async fn wait_for_signal(reload: impl Fn()) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let (Ok(mut term), Ok(mut hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) {
            loop {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => return,
                    _ = term.recv() => return,
                    _ = hup.recv() => reload(),
                }
            }
        }
    }
    #[cfg(not(unix))]
    let _ = reload;
    let _ = tokio::signal::ctrl_c().await;
}
