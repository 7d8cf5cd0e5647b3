//! `createPsbt`'s work for a wallet of 1,000 coins: the spendable coins gathered, coin
//! selection (branch and bound through its 100,000 tries when no changeless set exists,
//! then largest first), the picked coins' keys and the change address derived, the PSBT
//! written. The wallet: a BIP84 account whose 20 owned receive addresses were paid 50
//! times each, values spread from 10,000 to 2,000,000 sat.

use lightwire_chain::Network;
use lightwire_primitives::{Block, BlockHash};
use lightwire_wallet::spend::FeeRate;
use lightwire_wallet::spend::wallet::{PsbtAsk, WalletState, create_psbt};
use lightwire_wallet::{Ledger, Unconfirmed};

use crate::Clock;
use crate::filter::time;

/// The wallet: its watchlist and a ledger holding `coins` coins of its receive addresses.
pub fn wallet(coins: usize) -> (lightwire_wallet::Watchlist, Ledger) {
    let w = crate::wallet::wallet();
    let owned: Vec<Vec<u8>> = w
        .scripts()
        .filter(|s| w.owns(s) == Some(true))
        .map(<[u8]>::to_vec)
        .collect();
    // One block: a coinbase, then `coins` transactions paying an owned script each.
    let mut b = vec![0u8; 80];
    lightwire_primitives::write_compact_size(&mut b, coins as u64 + 1);
    for i in 0..=coins {
        b.extend_from_slice(&2u32.to_le_bytes());
        b.push(1);
        let mut prev = [0u8; 32];
        if i == 0 {
            b.extend_from_slice(&prev);
            b.extend_from_slice(&u32::MAX.to_le_bytes());
        } else {
            prev[..8].copy_from_slice(&(i as u64).to_le_bytes());
            b.extend_from_slice(&prev);
            b.extend_from_slice(&0u32.to_le_bytes());
        }
        b.extend_from_slice(&[0, 0xff, 0xff, 0xff, 0xff, 1]);
        // Values spread so that sums rarely land exactly: 10,000 + i * 1,987 (mod 2 M).
        let value = 10_000 + (i as u64 * 1_987_003) % 1_990_000;
        b.extend_from_slice(&value.to_le_bytes());
        let script: &[u8] = if i == 0 {
            &[0x51]
        } else {
            &owned[i % owned.len()]
        };
        b.push(script.len() as u8);
        b.extend_from_slice(script);
        b.extend_from_slice(&0u32.to_le_bytes());
    }
    let root = Block::parse(&b).expect("a block").merkle_root().0;
    b[36..68].copy_from_slice(&root);
    let hash = BlockHash::of_header(b[..80].try_into().expect("80 bytes"));
    let block = Block::check(&b, &hash).expect("checks");
    let mut ledger = Ledger::new();
    ledger
        .apply(100, &block, |s| w.owns(s) == Some(true))
        .expect("applied");
    (w, ledger)
}

/// `createPsbt` for a wallet of `coins` coins paying `value` at 3 sat/vB: the time per
/// call (ns), the inputs and whether there was change, and the iterations timed.
pub fn create(
    clock: &impl Clock,
    coins: usize,
    value: u64,
    budget_ns: f64,
) -> (f64, usize, bool, u64) {
    let (watch, ledger) = wallet(coins);
    let unconfirmed = Unconfirmed::new();
    let state = WalletState {
        network: Network::Mainnet,
        watch: &watch,
        ledger: &ledger,
        unconfirmed: &unconfirmed,
        labels: &lightwire_wallet::labels::Labels::new(),
    };
    let ask = PsbtAsk {
        max: None,
        outputs: vec![("bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq".into(), value)],
        rate: FeeRate(3_000),
        coins: None,
        include_unconfirmed: false,
        change_descriptor: None,
    };
    let built = create_psbt(&state, &ask, 200, 200, 1).expect("a spend");
    let (iterations, ns) = time(clock, budget_ns, || {
        create_psbt(&state, &ask, 200, 200, 1).is_ok()
    });
    (ns, built.spent.len(), built.change.is_some(), iterations)
}

/// The benchmark's lines: a small payment and a large one, from 1,000 coins.
pub fn report(clock: &impl Clock, engine: &str, budget_ns: f64) -> Vec<String> {
    [1_234_567u64, 250_000_000]
        .iter()
        .map(|&value| {
            let (ns, inputs, change, iterations) = create(clock, 1_000, value, budget_ns);
            format!(
                "lightwire createPsbt ({engine}): 1,000 coins, paying {value} sat at 3 sat/vB: {:.2} ms per PSBT ({inputs} inputs, {} change; {iterations} timed)",
                ns / 1e6,
                if change { "with" } else { "no" }
            )
        })
        .collect()
}
