//! `lightwire-regtest-wallet`: the test wallet of `tests/support/regtest_wallet.rs` as a
//! command, for the browser end-to-end test: it builds, on a btcd regtest node, a block
//! paying one output of every standard kind and the next spending them all. Not shipped:
//! it lives in the test crate.
//!
//! - `lightwire-regtest-wallet address`: the address btcd must mine to (`--miningaddr`);
//! - `lightwire-regtest-wallet mempool --rpc .. --user .. --pass .. --address A`: signed
//!   replaceable payments to the address and their replacements, none sent (the mempool
//!   test sends them one by one);
//! - `lightwire-regtest-wallet account [--receive N] [--change N]`: the BIP84 account's
//!   descriptor and first addresses as JSON (for a generated chain paying it);
//! - `lightwire-regtest-wallet build --rpc HOST:PORT --user U --pass P`: mine to maturity,
//!   pay, spend, and print what was built as one line of JSON: `{"scripts":
//!   {kind: hex}, "paidAt": h, "spentAt": h, "spentInPaying": [hex], "spentInSpending":
//!   [hex]}`; with `--xpub`, then a BIP84 account paid six times out of index order and spent
//!   from once, under `"xpub": {descriptor, payments: [{height, branch,
//!   index, value}], spend: {height, txid, fee}, balance, unsent: {hex, txid, value, fee}}`
//!   (`unsent`: signed, for the client to broadcast);
//! - `lightwire-regtest-wallet pay-silent --rpc .. --user .. --pass .. --address SP
//!   --coinbase H --count N`: pay the silent payment address N times in one transaction
//!   from block H's coinbase (outputs derived by the `silentpayments` crate, not by
//!   lightwire), mine it, and print `{"height": h, "keys": [x-only hex], "spent": [hex]}`.
//!
//! btcctl must be on PATH or in `$(go env GOPATH)/bin` (scripts/setup.sh installs it).

use std::path::PathBuf;
use std::process::Command;

use clap::{Parser, Subcommand};

#[path = "support/regtest_wallet.rs"]
mod regtest_wallet;

#[derive(Parser)]
#[command(about = "A test wallet for btcd on regtest")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

/// How to reach btcd's RPC.
#[derive(clap::Args)]
struct NodeArgs {
    /// btcd's RPC address
    #[arg(long)]
    rpc: String,
    /// RPC user
    #[arg(long)]
    user: String,
    /// RPC password
    #[arg(long)]
    pass: String,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print the address btcd must mine to
    Address,
    /// Mine to maturity, pay every kind of output, spend them all; print JSON
    Build {
        #[command(flatten)]
        node: NodeArgs,
        /// Then pay a BIP84 account (a tpub descriptor) too, and spend from it
        #[arg(long)]
        xpub: bool,
    },
    /// Mine to maturity and print signed transactions paying `address` (none sent) as JSON:
    /// `{"pay": {hex, txid}, "bump": .., "other": .., "conflict": ..}` (`bump` replaces
    /// `pay`, `conflict` replaces `other` paying elsewhere)
    Mempool {
        #[command(flatten)]
        node: NodeArgs,
        /// The watched address (regtest)
        #[arg(long)]
        address: String,
    },
    /// Pay a silent payment address `count` times in one transaction from a coinbase, mine
    /// it, print JSON: `{"height": h, "keys": [hex], "spent": [hex]}`
    PaySilent {
        #[command(flatten)]
        node: NodeArgs,
        /// The silent payment address (`sprt1...`)
        #[arg(long)]
        address: String,
        /// The block whose coinbase (mature, the test wallet's key) pays
        #[arg(long)]
        coinbase: u32,
        /// Outputs to the address
        #[arg(long, default_value_t = 1)]
        count: usize,
    },
    /// Print the BIP84 account's descriptor and its first addresses as JSON, no node needed:
    /// `{"descriptor": d, "receive": [address], "change": [address]}`
    Account {
        /// Receive addresses to print
        #[arg(long, default_value_t = 20)]
        receive: u32,
        /// Change addresses to print
        #[arg(long, default_value_t = 20)]
        change: u32,
    },
}

fn btcctl() -> Result<PathBuf, String> {
    let mut dirs: Vec<PathBuf> = std::env::var("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Ok(out) = Command::new("go").args(["env", "GOPATH"]).output() {
        dirs.push(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("btcctl"))
        .find(|p| p.is_file())
        .ok_or_else(|| "btcctl not found: run scripts/setup.sh".to_string())
}

/// A function running btcctl against the node at `rpc` (and the empty configuration file
/// it reads, to remove after).
fn runner(node: &NodeArgs) -> Result<(impl Fn(&[&str]) -> String, PathBuf), String> {
    let tool = btcctl()?;
    // An empty configuration: nothing from the user's ~/.btcctl.
    let conf = std::env::temp_dir().join(format!("lightwire-wallet-{}.conf", std::process::id()));
    std::fs::write(&conf, "").map_err(|e| e.to_string())?;
    let (rpc, user, pass, file) = (
        node.rpc.clone(),
        node.user.clone(),
        node.pass.clone(),
        conf.clone(),
    );
    let ctl = move |args: &[&str]| -> String {
        let out = Command::new(&tool)
            .arg(format!("--configfile={}", file.display()))
            .args(["--regtest", "--notls"])
            .arg(format!("--rpcuser={user}"))
            .arg(format!("--rpcpass={pass}"))
            .arg(format!("--rpcserver={rpc}"))
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("btcctl {args:?}: {e}"));
        assert!(
            out.status.success(),
            "btcctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    Ok((ctl, conf))
}

fn main() -> Result<(), String> {
    match Cli::parse().command {
        Cmd::Address => println!("{}", regtest_wallet::mining_address()),
        Cmd::Account { receive, change } => {
            let (descriptor, receive, change) = regtest_wallet::account(receive, change);
            let list = |v: &[String]| {
                let quoted: Vec<String> = v.iter().map(|s| format!("\"{s}\"")).collect();
                format!("[{}]", quoted.join(","))
            };
            println!(
                "{{\"descriptor\":\"{descriptor}\",\"receive\":{},\"change\":{}}}",
                list(&receive),
                list(&change)
            );
        }
        Cmd::PaySilent {
            node,
            address,
            coinbase,
            count,
        } => {
            let (ctl, conf) = runner(&node)?;
            let paid = regtest_wallet::pay_silent(&ctl, &address, coinbase, count);
            let list = |v: &[String]| {
                let quoted: Vec<String> = v.iter().map(|s| format!("\"{s}\"")).collect();
                format!("[{}]", quoted.join(","))
            };
            println!(
                "{{\"height\":{},\"keys\":{},\"spent\":{}}}",
                paid.height,
                list(&paid.keys),
                list(&paid.spent)
            );
            let _ = std::fs::remove_file(&conf);
        }
        Cmd::Mempool { node, address } => {
            let script = regtest_wallet::script_of(&address)?;
            let (ctl, conf) = runner(&node)?;
            let m = regtest_wallet::mempool_txs(&ctl, &script);
            let one = |(hex, txid): &(String, String)| {
                format!("{{\"hex\":\"{hex}\",\"txid\":\"{txid}\"}}")
            };
            println!(
                "{{\"pay\":{},\"bump\":{},\"other\":{},\"conflict\":{}}}",
                one(&m.pay),
                one(&m.bump),
                one(&m.other),
                one(&m.conflict)
            );
            let _ = std::fs::remove_file(&conf);
        }
        Cmd::Build { node, xpub } => {
            let (ctl, conf) = runner(&node)?;
            let built = regtest_wallet::build(&ctl);
            let scripts: Vec<String> = built
                .scripts
                .iter()
                .map(|(k, s)| format!("\"{k}\":\"{s}\""))
                .collect();
            let addresses: Vec<String> = built
                .addresses
                .iter()
                .map(|(k, a)| format!("\"{k}\":\"{a}\""))
                .collect();
            let list = |v: &[String]| {
                let quoted: Vec<String> = v.iter().map(|s| format!("\"{s}\"")).collect();
                format!("[{}]", quoted.join(","))
            };
            let account = if xpub {
                let x = regtest_wallet::build_xpub(&ctl);
                let payments: Vec<String> = x
                    .payments
                    .iter()
                    .map(|(h, b, i, v)| {
                        format!("{{\"height\":{h},\"branch\":{b},\"index\":{i},\"value\":{v}}}")
                    })
                    .collect();
                format!(
                    ",\"xpub\":{{\"descriptor\":\"{}\",\"payments\":[{}],\"spend\":{{\"height\":{},\"txid\":\"{}\",\"fee\":{}}},\"balance\":{},\"unsent\":{{\"hex\":\"{}\",\"txid\":\"{}\",\"value\":{},\"fee\":{}}}}}",
                    x.descriptor,
                    payments.join(","),
                    x.spend.0,
                    x.spend.1,
                    x.spend.2,
                    x.balance,
                    x.unsent.0,
                    x.unsent.1,
                    x.unsent.2,
                    x.unsent.3
                )
            } else {
                String::new()
            };
            println!(
                "{{\"scripts\":{{{}}},\"addresses\":{{{}}},\"paidAt\":{},\"spentAt\":{},\"spentInPaying\":{},\"spentInSpending\":{}{}}}",
                scripts.join(","),
                addresses.join(","),
                built.paid_at,
                built.spent_at,
                list(&built.spent_in_paying),
                list(&built.spent_in_spending),
                account
            );
            let _ = std::fs::remove_file(&conf);
        }
    }
    Ok(())
}
