//! `lightwire-load`: open N connections to a gateway and either sync its whole chain on
//! each (reporting aggregate headers/s and failures) or hold them idle after the handshake
//! (for memory measurements).
//!
//! ```text
//! lightwire-load --connect ws://HOST:PORT#<node-id> --network NET --clients N
//!                [--idle SECONDS] [--per-request COUNT] [--validate]
//! ```
//! `--validate` runs every header through lightwire-chain (costs client CPU, which on a
//! small machine competes with the gateway); without it headers are only counted.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lightwire_chain::{Chain, Header, Network, Params};
use lightwire_gateway::client::{Client, Framing};
use lightwire_noise::PublicKey;
use lightwire_wire::{GetHeaders, Message};

struct Options {
    addr: SocketAddr,
    node_id: PublicKey,
    network: Network,
    clients: usize,
    idle: Option<u64>,
    per_request: u32,
    validate: bool,
}

fn parse() -> Result<Options, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut connect, mut network, mut clients) = (None, None, 1);
    let (mut idle, mut per_request, mut validate) = (None, 100_000, false);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--connect" => connect = Some(value()?),
            "--network" => network = Some(value()?.parse::<Network>().map_err(|e| e.to_string())?),
            "--clients" => clients = value()?.parse().map_err(|_| "--clients: a number")?,
            "--idle" => idle = Some(value()?.parse().map_err(|_| "--idle: seconds")?),
            "--per-request" => {
                per_request = value()?.parse().map_err(|_| "--per-request: a number")?
            }
            "--validate" => validate = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let connect = connect.ok_or("--connect ws://HOST:PORT#<node-id> is required")?;
    let rest = connect
        .strip_prefix("ws://")
        .ok_or("--connect must start with ws://")?;
    let (addr, id) = rest.split_once('#').ok_or("--connect needs #<node-id>")?;
    let node_id = hex::decode(id)
        .ok()
        .and_then(|b| PublicKey::from_slice(&b).ok())
        .ok_or("the node id is not a 33-byte compressed public key in hex")?;
    Ok(Options {
        addr: addr
            .parse()
            .map_err(|_| format!("{addr} is not HOST:PORT"))?,
        node_id,
        network: network.ok_or("--network is required")?,
        clients,
        idle,
        per_request,
        validate,
    })
}

/// Sync the whole chain; returns the headers received.
async fn sync(
    mut c: Client,
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
    let mut batch: Vec<Header> = Vec::with_capacity(819);
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

async fn run(o: Options) -> Result<(), String> {
    let params = o.network.params();
    let chain_hash = params.genesis.block_hash().0;
    let started = Instant::now();
    let mut clients = Vec::with_capacity(o.clients);
    let mut failed = 0;
    for _ in 0..o.clients {
        match Client::connect(o.addr, &o.node_id, chain_hash, Framing::OnePerFrame).await {
            Ok(c) => clients.push(c),
            Err(e) => {
                failed += 1;
                if failed <= 5 {
                    eprintln!("lightwire-load: connect: {e}");
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
            sync(c, params, per, validate, &counter).await
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
                eprintln!("lightwire-load: sync: {e}");
            }
            Err(e) => {
                errors += 1;
                eprintln!("lightwire-load: task: {e}");
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

fn main() {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("lightwire-load: {e}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Err(e) = rt.block_on(run(o)) {
        eprintln!("lightwire-load: {e}");
        std::process::exit(1);
    }
}
