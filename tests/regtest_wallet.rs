//! `lightwire-regtest-wallet`: the test wallet of `tests/support/regtest_wallet.rs` as a
//! command, for the browser end-to-end test: it builds, on a btcd regtest node, a block
//! paying one output of every standard kind and the next spending them all. Not shipped:
//! it lives in the test crate.
//!
//! - `lightwire-regtest-wallet address`: the address btcd must mine to (`--miningaddr`);
//! - `lightwire-regtest-wallet mempool --rpc .. --user .. --pass .. --address A`: signed
//!   replaceable payments to the address and their replacements, none sent (the mempool
//!   test sends them one by one);
//! - `lightwire-regtest-wallet account [--number N] [--receive N] [--change N]`: the BIP84
//!   account's (account N's, default 0) descriptor and first addresses as JSON (for a
//!   generated chain paying it);
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
//!   lightwire), mine it, and print `{"height": h, "txid": hex, "keys": [x-only hex],
//!   "spent": [hex]}`; with `--mixed`, once from a P2PKH, a P2WPKH and a P2TR input
//!   (funded from the coinbase in a block before); with `--no-mine`, leave it in the
//!   node's mempool (`height` null);
//!
//! - `lightwire-regtest-wallet silent-address --scan-secret HEX --spend-secret HEX`: the
//!   regtest silent payment address of those keys;
//! - `lightwire-regtest-wallet sign-silent --psbt B64 --spend-secret HEX`: sign and
//!   finalize a PSBT (version 2) spending silent payments as BIP376's signer and finalizer
//!   do: for each input carrying `PSBT_IN_SP_TWEAK`, the key `spend + tweak` (checked to
//!   be the output's key) signs its taproot key path (rust-bitcoin's sighash and
//!   libsecp256k1's BIP340); print the finalized PSBT, base64.
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
        /// Pay once from a P2PKH, a P2WPKH and a P2TR input (the coinbase funds the other
        /// two first, in a block of their own) instead of from the coinbase alone
        #[arg(long)]
        mixed: bool,
        /// Send the payment and leave it in the node's mempool (not mined): `height` is
        /// then null
        #[arg(long)]
        no_mine: bool,
    },
    /// Print the regtest silent payment address of a scan and a spend private key (hex)
    SilentAddress {
        /// The scan private key, hex
        #[arg(long)]
        scan_secret: String,
        /// The spend private key, hex
        #[arg(long)]
        spend_secret: String,
    },
    /// Sign and finalize a PSBT spending silent payments (BIP376), print it (base64)
    SignSilent {
        /// The PSBT, base64
        #[arg(long)]
        psbt: String,
        /// The receiver's spend private key, hex
        #[arg(long)]
        spend_secret: String,
    },
    /// Print the BIP84 account's descriptor and its first addresses as JSON, no node needed:
    /// `{"descriptor": d, "receive": [address], "change": [address]}`
    Account {
        /// The account's number (BIP84's account level: m/84'/1'/N')
        #[arg(long, default_value_t = 0)]
        number: u32,
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

/// Sign and finalize `bytes`, a version 2 PSBT, as BIP376's signer and input finalizer:
/// each input carrying a silent payment's tweak is signed (taproot key path, the default
/// sighash) with `spend + tweak`, which must be its output's key; its witness put in
/// place, its BIP376 fields, its witness UTXO and any signature removed.
fn sign_silent(bytes: &[u8], spend: &bitcoin::secp256k1::SecretKey) -> Result<Vec<u8>, String> {
    use bitcoin::hashes::Hash;
    use bitcoin::secp256k1::{Keypair, Message, Scalar, Secp256k1};
    use bitcoin::sighash::{Prevouts, SighashCache, TapSighashType};
    use bitcoin::{
        Amount, OutPoint, ScriptBuf, Sequence, Transaction, TxIn, TxOut, Txid, Witness,
        absolute::LockTime, transaction::Version,
    };
    use lightwire_wallet::spend::psbt;

    let maps = psbt::read_maps(bytes).map_err(|e| e.to_string())?;
    fn get<'a>(m: &psbt::Map<'a>, kind: u8) -> Option<&'a [u8]> {
        m.iter().find(|(k, _)| *k == [kind]).map(|(_, v)| *v)
    }
    let u32_of = |v: Option<&[u8]>| v.and_then(|v| v.try_into().ok()).map(u32::from_le_bytes);
    let global = &maps[0];
    if u32_of(get(global, psbt::GLOBAL_VERSION)) != Some(2) {
        return Err("not a version 2 PSBT".into());
    }
    let inputs: Vec<usize> = (1..maps.len())
        .filter(|&i| get(&maps[i], psbt::IN_PREVIOUS_TXID).is_some())
        .collect();
    let mut tx = Transaction {
        version: Version(u32_of(get(global, psbt::GLOBAL_TX_VERSION)).ok_or("no version")? as i32),
        lock_time: LockTime::from_consensus(
            u32_of(get(global, psbt::GLOBAL_FALLBACK_LOCKTIME)).unwrap_or(0),
        ),
        input: Vec::new(),
        output: Vec::new(),
    };
    let mut prevouts = Vec::new();
    for &i in &inputs {
        let m = &maps[i];
        let txid: [u8; 32] = get(m, psbt::IN_PREVIOUS_TXID)
            .and_then(|t| t.try_into().ok())
            .ok_or("txid")?;
        tx.input.push(TxIn {
            previous_output: OutPoint::new(
                Txid::from_byte_array(txid),
                u32_of(get(m, psbt::IN_OUTPUT_INDEX)).ok_or("vout")?,
            ),
            script_sig: ScriptBuf::new(),
            sequence: Sequence(u32_of(get(m, psbt::IN_SEQUENCE)).unwrap_or(u32::MAX)),
            witness: Witness::new(),
        });
        let utxo = get(m, psbt::IN_WITNESS_UTXO).ok_or("every input needs its witness UTXO")?;
        prevouts.push(bitcoin::consensus::deserialize::<TxOut>(utxo).map_err(|e| e.to_string())?);
    }
    for m in &maps[1 + inputs.len()..] {
        let value = get(m, psbt::OUT_AMOUNT)
            .and_then(|v| v.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or("amount")?;
        tx.output.push(TxOut {
            value: Amount::from_sat(value),
            script_pubkey: ScriptBuf::from_bytes(
                get(m, psbt::OUT_SCRIPT).ok_or("script")?.to_vec(),
            ),
        });
    }
    let secp = Secp256k1::new();
    let mut cache = SighashCache::new(&tx);
    let mut witnesses = Vec::new();
    for (n, &i) in inputs.iter().enumerate() {
        let Some(tweak) = get(&maps[i], psbt::IN_SP_TWEAK) else {
            return Err(format!(
                "input {n} is not a silent payment's: this signer signs only those"
            ));
        };
        let tweak = Scalar::from_be_bytes(tweak.try_into().map_err(|_| "a tweak of 32 bytes")?)
            .map_err(|_| "the tweak is not a scalar")?;
        let d = spend.add_tweak(&tweak).map_err(|e| e.to_string())?;
        let keypair = Keypair::from_secret_key(&secp, &d);
        let (x, _) = keypair.x_only_public_key();
        let script = &prevouts[n].script_pubkey;
        if script.as_bytes().get(2..) != Some(&x.serialize()[..]) {
            return Err(format!(
                "input {n}: the spend key plus the tweak is not the output's key"
            ));
        }
        let sighash = cache
            .taproot_key_spend_signature_hash(n, &Prevouts::All(&prevouts), TapSighashType::Default)
            .map_err(|e| e.to_string())?;
        let sig =
            secp.sign_schnorr_no_aux_rand(&Message::from_digest(sighash.to_byte_array()), &keypair);
        let mut witness = Witness::new();
        witness.push(sig.as_ref());
        witnesses.push(bitcoin::consensus::serialize(&witness));
    }
    let mut w = psbt::Writer::empty();
    for (k, v) in global {
        w.pair(k[0], &k[1..], v);
    }
    w.end_map();
    for (n, &i) in inputs.iter().enumerate() {
        let dropped = [
            psbt::IN_SP_TWEAK,
            psbt::IN_SP_SPEND_BIP32_DERIVATION,
            psbt::IN_WITNESS_UTXO,
        ];
        for (k, v) in maps[i].iter().filter(|(k, _)| !dropped.contains(&k[0])) {
            w.pair(k[0], &k[1..], v);
        }
        w.pair(psbt::IN_FINAL_SCRIPTWITNESS, &[], &witnesses[n]);
        w.end_map();
    }
    for m in &maps[1 + inputs.len()..] {
        for (k, v) in m {
            w.pair(k[0], &k[1..], v);
        }
        w.end_map();
    }
    Ok(w.finish())
}

fn main() -> Result<(), String> {
    match Cli::parse().command {
        Cmd::SilentAddress {
            scan_secret,
            spend_secret,
        } => {
            let secret = |h: &str| {
                hex::decode(h.trim())
                    .ok()
                    .and_then(|k| bitcoin::secp256k1::SecretKey::from_slice(&k).ok())
                    .ok_or("not a private key")
            };
            let secp = bitcoin::secp256k1::Secp256k1::new();
            let spend = secret(&spend_secret)?.public_key(&secp).serialize();
            let scan = secret(&scan_secret)?.secret_bytes();
            let mut receiver = lightwire_wallet::silent::Receiver::new(&scan, &spend)
                .map_err(|e| e.to_string())?;
            let address = receiver
                .address(lightwire_wallet::silent::SpNetwork::Regtest, None)
                .map_err(|e| e.to_string())?;
            println!("{}", address.encode());
        }
        Cmd::SignSilent { psbt, spend_secret } => {
            use lightwire_wallet::spend::psbt as p;
            let bytes = p::from_base64(&psbt).ok_or("the PSBT is not base64")?;
            let key = hex::decode(spend_secret.trim())
                .ok()
                .and_then(|k| bitcoin::secp256k1::SecretKey::from_slice(&k).ok())
                .ok_or("the spend secret is not a private key")?;
            println!("{}", p::base64(&sign_silent(&bytes, &key)?));
        }
        Cmd::Address => println!("{}", regtest_wallet::mining_address()),
        Cmd::Account {
            number,
            receive,
            change,
        } => {
            let (descriptor, receive, change) = regtest_wallet::account(number, receive, change);
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
            mixed,
            no_mine,
        } => {
            let (node_ctl, conf) = runner(&node)?;
            // Unmined: the payment's own block is not made, the block after its send (a
            // mixed payment's funding transaction, sent first, is still mined).
            let sends = std::cell::Cell::new(0);
            let payment_sent = if mixed { 2 } else { 1 };
            let ctl = |args: &[&str]| -> String {
                if no_mine && sends.get() >= payment_sent && args.first() == Some(&"generate") {
                    return String::new();
                }
                if args.first() == Some(&"sendrawtransaction") {
                    sends.set(sends.get() + 1);
                }
                node_ctl(args)
            };
            let paid = match mixed {
                true => regtest_wallet::pay_silent_mixed(&ctl, &address, coinbase),
                false => regtest_wallet::pay_silent(&ctl, &address, coinbase, count),
            };
            let list = |v: &[String]| {
                let quoted: Vec<String> = v.iter().map(|s| format!("\"{s}\"")).collect();
                format!("[{}]", quoted.join(","))
            };
            let height = match no_mine {
                true => "null".to_string(),
                false => paid.height.to_string(),
            };
            println!(
                "{{\"height\":{height},\"txid\":\"{}\",\"keys\":{},\"spent\":{}}}",
                paid.txid,
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
