//! Lies in the mempool (`--upstream`): the gateway itself, through its library, following a
//! node (btcd in the tests) as `lightwire-gateway --upstream` does (headers, filters,
//! blocks, relay, the mempool digest), and lying in its digest through
//! [`ServedMempool::add`] and [`ServedMempool::remove`]:
//!
//! - `--invent-replacements`: each transaction the node gives is replaced in the digest by
//!   one of the gateway's making: the same inputs, with their scriptSigs and witnesses
//!   (signatures over another transaction), and one output paying the original's outputs'
//!   total to a script nobody holds. Served when asked; no node would take it. Every
//!   gateway relays a wallet's broadcast, so every gateway knows its inputs: this is the
//!   replacement that would drop the wallet's own payment and lock its coins.
//! - `--say-removed`: each transaction the node gives is said removed (`evicted`) a moment
//!   after it is announced: a gateway that held it saying it left, which only a gateway
//!   that held it may say, and which must not drop what another gateway holds.
//!
//! Each lie is written to stderr (`lightwire-hostile: invented <txid> replacing <txid>`,
//! `lightwire-hostile: said <txid> removed`) so that a test can tell it was told.
//!
//! [`ServedMempool::add`]: lightwire_gateway::mempool::ServedMempool::add
//! [`ServedMempool::remove`]: lightwire_gateway::mempool::ServedMempool::remove

use std::collections::HashSet;
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use lightwire_chain::Network;
use lightwire_gateway::filters::DEFAULT_CACHE_BYTES;
use lightwire_gateway::mempool::DEFAULT_BUDGET;
use lightwire_gateway::metrics::serve_metrics;
use lightwire_gateway::served::ServedChain;
use lightwire_gateway::server::{Shared, serve};
use lightwire_gateway::upstream::follow_all;
use lightwire_noise::SecretKey;
use lightwire_primitives::{Tx, write_compact_size};
use lightwire_proto::Millis;
use lightwire_proto::feed::MempoolChange;
use lightwire_wire::Removal;

/// The script the invented replacements pay: a P2WSH of no script anyone has.
const NOBODY: [u8; 34] = {
    let mut s = [0xee; 34];
    s[0] = 0x00;
    s[1] = 0x20;
    s
};

/// The flags of lies in the mempool.
#[derive(Args, Debug)]
#[group(id = "mempool_lies")]
#[command(next_help_heading = "Lies in the mempool (with --upstream)")]
pub struct Lies {
    /// Follow the node at HOST:PORT (P2P) as `lightwire-gateway --upstream` does, on
    /// --network
    #[arg(long, value_name = "HOST:PORT")]
    pub upstream: Option<SocketAddr>,
    /// Replace each transaction the node gives with one of the gateway's making (its
    /// inputs and witnesses, one output elsewhere)
    #[arg(long, requires = "upstream", conflicts_with_all = ["generate", "headers_file"])]
    invent_replacements: bool,
    /// Say each transaction the node gives removed (evicted) after announcing it
    #[arg(long, requires = "upstream", conflicts_with_all = ["generate", "headers_file"])]
    say_removed: bool,
}

/// Follow `node` on `network` and serve on `listen` with `key` (metrics on `metrics`),
/// lying as `lies` say (and serving tweaks as `tweak_lies` say); runs until the process is
/// stopped.
pub fn run(
    (lies, tweak_lies): (&Lies, &crate::tweaks::Lies),
    (node, network): (SocketAddr, Network),
    listen: SocketAddr,
    metrics: Option<SocketAddr>,
    key: SecretKey,
) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let (served, chain) = ServedChain::genesis_only(network.params());
        let node_id = hex::encode(key.public_key().serialize());
        let shared = Shared::builder(served, key).mempool(DEFAULT_BUDGET).build();
        if let Ok(mut c) = shared.chain.write() {
            c.serve_upstream_filters(DEFAULT_CACHE_BYTES, shared.filter_notify.clone());
            c.serve_upstream_blocks(shared.filter_notify.clone());
            c.serve_relay(shared.relay.clone());
            c.serve_mempool(shared.mempool.clone());
        }
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| format!("{listen}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let (_stop, stopped) = tokio::sync::watch::channel(false);
        {
            let (shared, stopped) = (shared.clone(), stopped.clone());
            tokio::spawn(async move { follow_all(&[node], network, shared, chain, stopped).await });
        }
        crate::tweaks::serve(tweak_lies, network, &shared, stopped.clone())?;
        if lies.invent_replacements || lies.say_removed {
            let (invent, remove) = (lies.invent_replacements, lies.say_removed);
            tokio::spawn(lie(shared.clone(), invent, remove));
        }
        if let Some(m) = metrics {
            let metrics = tokio::net::TcpListener::bind(m)
                .await
                .map_err(|e| format!("{m}: {e}"))?;
            let a = metrics.local_addr().map_err(|e| e.to_string())?;
            eprintln!("lightwire-hostile: metrics on http://{a}/metrics");
            let shared = shared.clone();
            tokio::spawn(serve_metrics(metrics, move || shared.render_metrics()));
        }
        tokio::spawn(serve(listener, shared, stopped));
        println!("node id {node_id} connect ws://{addr}#{node_id}");
        std::io::stdout().flush().map_err(|e| e.to_string())?;
        // Until SIGINT; SIGTERM ends the process as it would without a handler.
        tokio::signal::ctrl_c().await.map_err(|e| e.to_string())
    })
}

/// Read each change to the served mempool and lie about what the node gave.
async fn lie(shared: Arc<Shared>, invent: bool, remove: bool) {
    let mut changed = shared.mempool_version.subscribe();
    let mut cursor = 0u64;
    // The gateway's own inventions, not lied about again.
    let mut ours: HashSet<[u8; 32]> = HashSet::new();
    loop {
        let mut given: Vec<([u8; 32], Vec<u8>)> = Vec::new();
        let mut head = cursor;
        let whole = shared.mempool.changes(cursor, |seq, change| {
            head = seq;
            if let MempoolChange::Added { txid, tx, .. } = change
                && !ours.contains(txid)
            {
                given.push((*txid, tx.to_vec()));
            }
            true
        });
        if !whole {
            // Too far behind: start from what is there now.
            head = shared.mempool.head();
        }
        cursor = head;
        if remove && !given.is_empty() {
            // Announced first (the sessions stream the addition), then said gone.
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        let mut told = false;
        for (txid, raw) in &given {
            if invent && let Some(fake) = invented(raw) {
                let fake_txid = Tx::parse(&fake).map(|t| t.txid().0).unwrap_or_default();
                ours.insert(fake_txid);
                if shared.mempool.add(&fake, now()) {
                    told = true;
                    eprintln!(
                        "lightwire-hostile: invented {} replacing {}",
                        display(&fake_txid),
                        display(txid)
                    );
                }
            }
            if remove && shared.mempool.remove(txid, Removal::Evicted) {
                told = true;
                eprintln!("lightwire-hostile: said {} removed", display(txid));
            }
        }
        // (What it told comes back as changes too: its inventions are in `ours`, and
        // removals are not lied about.)
        if told {
            shared.mempool_version.send_modify(|v| *v += 1);
        }
        if changed.changed().await.is_err() {
            return;
        }
    }
}

/// A transaction with `raw`'s inputs, scriptSigs and witnesses and one output paying
/// [`NOBODY`] its outputs' total. `None` if `raw` does not parse.
fn invented(raw: &[u8]) -> Option<Vec<u8>> {
    let tx = Tx::parse(raw).ok()?;
    let total: u64 = tx.outputs().map(|o| o.value).sum();
    let segwit = tx.inputs().any(|i| !i.witness.is_empty());
    let mut out = raw[..4].to_vec();
    if segwit {
        out.extend_from_slice(&[0, 1]);
    }
    write_compact_size(&mut out, tx.inputs().count() as u64);
    for i in tx.inputs() {
        out.extend_from_slice(i.prev_txid);
        out.extend_from_slice(&i.prev_vout.to_le_bytes());
        write_compact_size(&mut out, i.script_sig.len() as u64);
        out.extend_from_slice(i.script_sig);
        out.extend_from_slice(&i.sequence.to_le_bytes());
    }
    out.push(1);
    out.extend_from_slice(&total.to_le_bytes());
    out.push(NOBODY.len() as u8);
    out.extend_from_slice(&NOBODY);
    if segwit {
        for i in tx.inputs() {
            write_compact_size(&mut out, i.witness.len() as u64);
            for item in i.witness.iter() {
                write_compact_size(&mut out, item.len() as u64);
                out.extend_from_slice(item);
            }
        }
    }
    out.extend_from_slice(&raw[raw.len() - 4..]);
    Some(out)
}

/// A txid as explorers show it.
fn display(txid: &[u8; 32]) -> String {
    let mut t = *txid;
    t.reverse();
    hex::encode(t)
}

fn now() -> Millis {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    Millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The invented transaction spends what the original spends, with its witnesses, and
    /// pays its total elsewhere: another txid, the same outpoints.
    #[test]
    fn an_invented_replacement_spends_the_same_inputs_with_their_witnesses() {
        // Version 2, segwit, one input with a two-item witness, two outputs.
        let mut raw = vec![2, 0, 0, 0, 0, 1, 1];
        raw.extend_from_slice(&[7; 32]);
        raw.extend_from_slice(&[1, 0, 0, 0, 0, 0xfd, 0xff, 0xff, 0xff, 2]);
        for v in [5_000u64, 7_000] {
            raw.extend_from_slice(&v.to_le_bytes());
            raw.extend_from_slice(&[22, 0, 20]);
            raw.extend_from_slice(&[3; 20]);
        }
        raw.extend_from_slice(&[2, 3, 1, 2, 3, 1, 9]);
        raw.extend_from_slice(&[0x10, 0, 0, 0]);
        let fake = invented(&raw).unwrap();
        let (a, b) = (Tx::parse(&raw).unwrap(), Tx::parse(&fake).unwrap());
        assert_ne!(a.txid(), b.txid());
        let ins = |t: &Tx| {
            t.inputs()
                .map(|i| {
                    (
                        *i.prev_txid,
                        i.prev_vout,
                        i.sequence,
                        i.witness.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(),
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(ins(&a), ins(&b));
        let outs: Vec<(u64, Vec<u8>)> = b.outputs().map(|o| (o.value, o.script.to_vec())).collect();
        assert_eq!(outs, [(12_000, NOBODY.to_vec())]);
        assert_eq!(b.lock_time(), a.lock_time());
    }
}
