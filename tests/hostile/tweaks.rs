//! Lies in silent-payment tweaks (`--upstream` with `--tweaks-dir`): the gateway's own
//! tweak computation from the node (as `lightwire-gateway --node-rpc .. --tweaks-dir ..`
//! does), with each list edited through [`keep_with`] before it is kept, so that the lie is
//! consistent: the tweak-header chain it serves is built on its edited lists.
//!
//! - `--omit-tweaks`: each list that holds a tweak loses its last one (a payment hidden);
//! - `--withhold-evidence`: it serves no dispute's evidence (`spent_from` is answered
//!   `not_found`), so only another gateway can settle a disagreement.
//!
//! Each edit is written to stderr (`lightwire-hostile: left a tweak out of block <h>`).
//!
//! [`keep_with`]: lightwire_gateway::tweaks::keep_with

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use lightwire_chain::Network;
use lightwire_gateway::fees::RpcEndpoint;
use lightwire_gateway::server::Shared;
use lightwire_gateway::spent_from::ServedSpentFrom;
use lightwire_gateway::tweaks::{ServedTweaks, keep_with};
use lightwire_primitives::{TweakList, write_tweak_list};

/// The flags of lies in tweaks.
#[derive(Args, Debug)]
#[group(id = "tweak_lies")]
#[command(next_help_heading = "Lies in silent-payment tweaks (with --upstream)")]
pub struct Lies {
    /// The node's RPC, which the tweaks are computed from (btcd needs --txindex)
    #[arg(long, value_name = "HOST:PORT", requires_all = ["upstream", "node_rpc_auth", "tweaks_dir"])]
    node_rpc: Option<SocketAddr>,
    /// A file holding the RPC's user:password on its first line
    #[arg(long, value_name = "FILE", requires = "node_rpc")]
    node_rpc_auth: Option<PathBuf>,
    /// Serve tweaks, kept in this directory
    #[arg(long, value_name = "DIR", requires = "node_rpc")]
    tweaks_dir: Option<PathBuf>,
    /// Leave the last tweak out of each list that holds one
    #[arg(long, requires = "tweaks_dir")]
    omit_tweaks: bool,
    /// Serve no dispute's evidence
    #[arg(long, requires = "tweaks_dir")]
    withhold_evidence: bool,
}

/// Serve tweaks on `shared` (following `network`) as `lies` say, if asked to; the task
/// that computes them runs until `stopped`.
pub fn serve(
    lies: &Lies,
    network: Network,
    shared: &Arc<Shared>,
    stopped: tokio::sync::watch::Receiver<bool>,
) -> Result<(), String> {
    let (Some(addr), Some(auth), Some(dir)) =
        (lies.node_rpc, &lies.node_rpc_auth, &lies.tweaks_dir)
    else {
        return Ok(());
    };
    let rpc = RpcEndpoint::from_file(addr, auth)?;
    let tweaks = ServedTweaks::open(dir, network).map_err(|e| e.to_string())?;
    if let Ok(mut c) = shared.chain.write() {
        c.serve_tweaks(tweaks);
        if !lies.withhold_evidence {
            c.serve_spent_from(ServedSpentFrom::new(shared.filter_notify.clone()));
        }
    }
    if !lies.withhold_evidence {
        let (shared, rpc, stopped) = (shared.clone(), rpc.clone(), stopped.clone());
        tokio::spawn(lightwire_gateway::spent_from::keep(shared, rpc, stopped));
    }
    let omit = lies.omit_tweaks;
    tokio::spawn(keep_with(
        shared.clone(),
        rpc,
        stopped,
        move |height, list| {
            if omit && omit_last(list) {
                eprintln!("lightwire-hostile: left a tweak out of block {height}");
            }
        },
    ));
    Ok(())
}

/// Leave the last tweak out of `list` (a list's bytes); whether it held one.
fn omit_last(list: &mut Vec<u8>) -> bool {
    let mut tweaks: Vec<[u8; 33]> = match TweakList::parse(list) {
        Ok(t) => t.iter().copied().collect(),
        Err(_) => return false,
    };
    if tweaks.pop().is_none() {
        return false;
    }
    list.clear();
    write_tweak_list(&mut tweaks, list);
    true
}
