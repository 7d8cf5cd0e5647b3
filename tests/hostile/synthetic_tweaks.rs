//! Silent-payment tweaks for the generated chain (`--generate` with `--synthetic-tweaks N`),
//! for benchmarks of a receiver's scan at a chosen density: each block from
//! `--synthetic-tweaks-from` holds `N` tweaks, points `k·G` for `k` in 1..=65,536 picked by
//! the block's height, kept in `--synthetic-tweaks-dir` as the gateway keeps computed ones
//! and served through its library ([`ServedChain::serve_tweaks`]). No lie: the lists are
//! not the generated blocks' (their transactions spend nothing real), they are the chain's
//! by decree, one consistent tweak chain.
//!
//! `--pay-silent ADDRESS@HEIGHT` makes the chain pay a silent payment address in block
//! HEIGHT, as a sender whose inputs' tweak is the block's first (`k·G`) would: the output
//! key is derived by the `silentpayments` crate (not lightwire's receiver) from the partial
//! secret `k`, so that `b_scan·(k·G) = k·B_scan` is the shared secret both sides compute.
//!
//! [`ServedChain::serve_tweaks`]: lightwire_gateway::served::ServedChain::serve_tweaks

use std::path::PathBuf;

use bitcoin::secp256k1::{PublicKey, Secp256k1, SecretKey};
use clap::Args;
use lightwire_chain::Network;
use lightwire_chain::synthetic::Payment;
use lightwire_gateway::served::ServedChain;
use lightwire_gateway::tweaks::ServedTweaks;
use lightwire_proto::Served as _;

/// Points to pick from: `k·G` for `k` in 1..=POINTS.
const POINTS: u32 = 1 << 16;

/// The flags of synthetic tweaks.
#[derive(Args, Debug)]
#[group(id = "synthetic_tweak_flags")]
#[command(next_help_heading = "Synthetic silent-payment tweaks (with --generate)")]
pub struct Flags {
    /// Serve N tweaks a block (at most 32,768)
    #[arg(long, value_name = "N", requires = "synthetic_tweaks_dir", conflicts_with_all = ["headers_file", "upstream"])]
    synthetic_tweaks: Option<u32>,
    /// The first block with tweaks (those below have none)
    #[arg(
        long,
        value_name = "H",
        default_value_t = 1,
        requires = "synthetic_tweaks"
    )]
    synthetic_tweaks_from: u32,
    /// Keep the lists in DIR (as `lightwire-gateway --tweaks-dir` does)
    #[arg(long, value_name = "DIR", requires = "synthetic_tweaks")]
    synthetic_tweaks_dir: Option<PathBuf>,
    /// Pay a silent payment address (regtest) in block HEIGHT, from the block's first
    /// tweak: ADDRESS@HEIGHT, repeatable
    #[arg(long, value_name = "ADDRESS@HEIGHT", requires = "synthetic_tweaks")]
    pay_silent: Vec<String>,
}

/// The `k` (from 1) of each tweak of block `height`: `n` distinct, picked by the height.
fn picks(height: u32, n: u32) -> Vec<u32> {
    let mut state = u64::from(height).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed;
    let mut taken = std::collections::BTreeSet::new();
    let mut out = Vec::with_capacity(n as usize);
    while out.len() < n as usize {
        // splitmix64.
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let k = (z % u64::from(POINTS)) as u32 + 1;
        if taken.insert(k) {
            out.push(k);
        }
    }
    out
}

fn scalar(k: u32) -> SecretKey {
    let mut b = [0u8; 32];
    b[28..].copy_from_slice(&k.to_be_bytes());
    SecretKey::from_slice(&b).expect("a small scalar")
}

/// The payments `--pay-silent` asks for (output keys derived by the `silentpayments`
/// crate), 100,000 sat each.
pub fn payments(flags: &Flags) -> Result<Vec<Payment>, String> {
    let Some(n) = flags.synthetic_tweaks else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for p in &flags.pay_silent {
        let bad = || format!("--pay-silent {p:?}: expected ADDRESS@HEIGHT");
        let (address, height) = p.rsplit_once('@').ok_or_else(bad)?;
        let height: u32 = height.parse().map_err(|_| bad())?;
        if height < flags.synthetic_tweaks_from || n == 0 {
            return Err(format!("--pay-silent {p}: block {height} has no tweak"));
        }
        let code = silentpayments::SilentPaymentCode::try_from(address)
            .map_err(|e| format!("--pay-silent {address}: {e}"))?;
        let k = picks(height, n)[0];
        let keys =
            silentpayments::sending::generate_recipient_pubkeys(vec![code], scalar(k).into())
                .map_err(|e| format!("--pay-silent {p}: {e}"))?;
        let key = keys[&code][0].serialize();
        let mut script = vec![0x51, 0x20];
        script.extend_from_slice(&key);
        out.push(Payment {
            height,
            script,
            value: 100_000,
        });
    }
    Ok(out)
}

/// Compute and keep the tweak lists of `chain` up to `tip` as `flags` say, and serve them.
pub fn serve(flags: &Flags, chain: &mut ServedChain, tip: u32) -> Result<(), String> {
    let (Some(n), Some(dir)) = (flags.synthetic_tweaks, &flags.synthetic_tweaks_dir) else {
        return Ok(());
    };
    if n > POINTS / 2 {
        return Err(format!("--synthetic-tweaks {n}: at most {}", POINTS / 2));
    }
    let secp = Secp256k1::new();
    let points: Vec<[u8; 33]> = (1..=POINTS)
        .map(|k| PublicKey::from_secret_key(&secp, &scalar(k)).serialize())
        .collect();
    let mut tweaks =
        ServedTweaks::open(dir, Network::Regtest).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut list = Vec::new();
    for height in tweaks.next()..=tip {
        let header = chain.header(height).ok_or("a height past the chain")?;
        let block = lightwire_chain::hash_header_bytes(&header);
        let mut these: Vec<[u8; 33]> = if height >= flags.synthetic_tweaks_from {
            picks(height, n)
                .into_iter()
                .map(|k| points[k as usize - 1])
                .collect()
        } else {
            Vec::new()
        };
        list.clear();
        lightwire_primitives::write_tweak_list(&mut these, &mut list);
        tweaks
            .append(height, &block, &list)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    chain.serve_tweaks(tweaks);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block's picks are distinct, the same each time, and differ from block to block;
    /// the payment to an address is at the key our receiver computes for the block's first
    /// tweak (the two implementations agree on the shared secret `k·B_scan`).
    #[test]
    fn picks_and_the_payment_agree_with_our_receiver() {
        let a = picks(915_072, 715);
        assert_eq!(a.len(), 715);
        assert_eq!(
            a.iter().collect::<std::collections::BTreeSet<_>>().len(),
            715
        );
        assert_eq!(a, picks(915_072, 715));
        assert_ne!(a, picks(915_073, 715));
        assert!(a.iter().all(|k| (1..=POINTS).contains(k)));

        let mut receiver = lightwire_wallet::silent::Receiver::new(&[0x51; 32], &{
            let secp = Secp256k1::new();
            PublicKey::from_secret_key(&secp, &SecretKey::from_slice(&[0x52; 32]).unwrap())
                .serialize()
        })
        .unwrap();
        let address = receiver
            .address(lightwire_wallet::silent::SpNetwork::Regtest, None)
            .unwrap()
            .encode();
        let flags = Flags {
            synthetic_tweaks: Some(715),
            synthetic_tweaks_from: 915_001,
            synthetic_tweaks_dir: None,
            pay_silent: vec![format!("{address}@915072")],
        };
        let paid = payments(&flags).unwrap();
        let secp = Secp256k1::new();
        let tweak = PublicKey::from_secret_key(&secp, &scalar(a[0])).serialize();
        let mut keys = Vec::new();
        receiver.first_keys(&tweak, &mut keys).unwrap();
        assert_eq!(paid[0].script[2..], keys[0]);
        assert_eq!(paid[0].height, 915_072);
    }
}
