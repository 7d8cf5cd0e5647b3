//! What the wallet does with a matched block: parse it, check it against its header (its
//! hash, its Merkle root from every txid, not mutated), and pick out the transactions
//! paying a watched script or spending a coin of ours. A 1 MB block of 2,700 segwit
//! transactions (two inputs, two P2WPKH outputs each), five paying a wallet of 140 watched
//! scripts (gap 20 and a lookahead of 50, both branches).

use lightwire_chain::Network;
use lightwire_primitives::{Block, BlockHash};
use lightwire_wallet::watch::{DEFAULT_GAP, DEFAULT_LOOKAHEAD};
use lightwire_wallet::{Descriptor, Ledger, Watchlist};

use crate::Clock;
use crate::filter::time;

/// The account the block pays (BIP84's test vector).
const DESCRIPTOR: &str = "wpkh(xpub6CatWdiZiodmUeTDp8LT5or8nmbKNcuyvz7WyksVFkKB4RHwCD3XyuvPEbvqAQY3rAPshWcMLoP2fMFMKHPJ4ZeZXYVUhLv1VMrjPC7PW6V/<0;1>/*)";

/// A wallet watching [`DESCRIPTOR`] as the client's does.
pub fn wallet() -> Watchlist {
    let mut w = Watchlist::new(DEFAULT_GAP, DEFAULT_LOOKAHEAD);
    w.add_descriptor(Descriptor::parse(DESCRIPTOR, Network::Mainnet).expect("descriptor"))
        .expect("derives");
    w
}

/// A block of `txs` transactions, of which those at the positions in `ours` pay the
/// wallet's scripts, under a header carrying their Merkle root: its bytes.
pub fn block(txs: usize, ours: &[usize], w: &Watchlist) -> Vec<u8> {
    let watched: Vec<&[u8]> = w.scripts().filter(|s| w.owns(s) == Some(true)).collect();
    let mut b = vec![0u8; 80];
    let mut n = Vec::new();
    lightwire_primitives::write_compact_size(&mut n, txs as u64);
    b.extend_from_slice(&n);
    for i in 0..txs {
        // The first is the coinbase (one input, spending the null outpoint), as a block's
        // first must be; the others spend two outputs each.
        let inputs: u32 = if i == 0 { 1 } else { 2 };
        b.extend_from_slice(&2u32.to_le_bytes());
        b.extend_from_slice(&[0, 1, inputs as u8]); // marker, flag, inputs
        for j in 0..inputs {
            if i == 0 {
                b.extend_from_slice(&[0; 32]);
                b.extend_from_slice(&u32::MAX.to_le_bytes());
            } else {
                let mut prev = [0u8; 32];
                prev[..8].copy_from_slice(&(i as u64).to_le_bytes());
                b.extend_from_slice(&prev);
                b.extend_from_slice(&j.to_le_bytes());
            }
            b.extend_from_slice(&[0, 0xfd, 0xff, 0xff, 0xff]);
        }
        b.push(2);
        for j in 0..2usize {
            b.extend_from_slice(&(10_000 + i as u64).to_le_bytes());
            let script: Vec<u8> = if j == 0 && ours.contains(&i) {
                watched[i % watched.len()].to_vec()
            } else {
                let mut s = vec![0x00, 0x14];
                s.extend_from_slice(&[(i % 251) as u8; 20]);
                s[2..10].copy_from_slice(&(i as u64 * 2 + j as u64).to_le_bytes());
                s
            };
            b.push(script.len() as u8);
            b.extend_from_slice(&script);
        }
        for _ in 0..inputs {
            b.push(2);
            b.push(72);
            b.extend_from_slice(&[0x30; 72]);
            b.push(33);
            b.extend_from_slice(&[0x02; 33]);
        }
        b.extend_from_slice(&0u32.to_le_bytes());
    }
    let root = Block::parse(&b)
        .map(|b| b.merkle_root().0)
        .expect("a block");
    b[36..68].copy_from_slice(&root);
    b
}

/// Parse, check against the header, apply to an empty ledger: ns per block, and the
/// transactions found (to check the work was done).
pub fn extract(clock: &impl Clock, budget_ns: f64) -> (usize, f64, usize, u64) {
    let w = wallet();
    let bytes = block(2_700, &[10, 500, 1_200, 2_000, 2_650], &w);
    let hash = BlockHash::of_header(bytes[..80].try_into().expect("a header"));
    let mut found = 0;
    let (iterations, ns) = time(clock, budget_ns, || {
        let Ok(b) = Block::check(&bytes, &hash) else {
            return false;
        };
        let mut ledger = Ledger::new();
        let applied = ledger.apply(1, &b, |s| w.owns(s) == Some(true));
        found = applied.map_or(0, |a| a.txids.len());
        true
    });
    (bytes.len(), ns, found, iterations)
}

/// A descriptor's scripts derived as the client derives them when it is watched: both
/// branches to the gap and the lookahead (140 scripts), each key and script by both routes
/// (`lightwire_wallet::descriptor`). Returns nanoseconds per descriptor and the scripts
/// derived.
pub fn derive(clock: &impl Clock, budget_ns: f64) -> (f64, usize, u64) {
    let mut scripts = 0;
    let (iterations, ns) = time(clock, budget_ns, || {
        let w = wallet();
        scripts = w.scripts().count();
        scripts > 0
    });
    (ns, scripts, iterations)
}
