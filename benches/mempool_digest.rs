//! The mempool digest's bandwidth and false matches at a mainnet-like rate, computed (not
//! timed): `cargo bench -p lightwire-benches --bench mempool_digest`.
//!
//! An hour of transactions at 7 a second (25,200), shaped like mainnet's in 2025: 1 to 4
//! inputs (mostly 1 or 2), 2 outputs (some 1 or 3), P2WPKH, P2TR and P2SH-P2WPKH scripts.
//! Each enters the mempool (an `added` entry of its txid and its set, keyed by one
//! connection's salt) and leaves it when mined (a `removed` entry). What a client receives
//! is counted with the transport around each message: the WebSocket frame header (2 or 4
//! bytes) and BOLT 8's (an encrypted length and two MACs, 34 bytes). Worst case, one
//! message per transaction (each arrival wakes the session), and removals in one message
//! per block. False matches: a wallet of 100 addresses and 20 coins (120 items) against
//! every transaction, for several salts. With tweaks (a subscription for a silent-payment
//! receiver): each transaction with a taproot output carries its 33-byte tweak (taken as
//! having one: an upper bound).

use lightwire_filter::Matcher;
use lightwire_filter::txset::{outpoint_item, set_matches, tx_set};
use lightwire_primitives::Tx;
use lightwire_wire::{DigestWriter, Removal};

/// A small deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut b = [0u8; N];
        for c in b.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
        b
    }
    fn pick(&mut self, weights: &[u32]) -> usize {
        let total: u32 = weights.iter().sum();
        let mut r = (self.next() % u64::from(total)) as u32;
        for (i, w) in weights.iter().enumerate() {
            if r < *w {
                return i;
            }
            r -= w;
        }
        weights.len() - 1
    }
}

/// A mainnet-like transaction (legacy coding, no witness: the set does not look at it).
fn a_tx(rng: &mut Rng) -> Vec<u8> {
    let inputs = 1 + rng.pick(&[55, 30, 10, 5]);
    let outputs = 1 + rng.pick(&[15, 75, 10]);
    let mut t = vec![2, 0, 0, 0, inputs as u8];
    for _ in 0..inputs {
        t.extend_from_slice(&rng.bytes::<32>());
        t.extend_from_slice(&((rng.next() % 3) as u32).to_le_bytes());
        t.extend_from_slice(&[0, 0xfd, 0xff, 0xff, 0xff]);
    }
    t.push(outputs as u8);
    for _ in 0..outputs {
        t.extend_from_slice(&(rng.next() % 100_000_000).to_le_bytes());
        let script: Vec<u8> = match rng.pick(&[60, 25, 15]) {
            0 => [&[0x00, 0x14][..], &rng.bytes::<20>()].concat(),
            1 => [&[0x51, 0x20][..], &rng.bytes::<32>()].concat(),
            _ => [&[0xa9, 0x14][..], &rng.bytes::<20>(), &[0x87][..]].concat(),
        };
        t.push(script.len() as u8);
        t.extend_from_slice(&script);
    }
    t.extend_from_slice(&[0; 4]);
    t
}

/// Bytes on the wire around a message of `n` bytes: the WebSocket frame header and BOLT 8.
fn wire(n: usize) -> usize {
    let ws = if n + 34 <= 125 { 2 } else { 4 };
    n + 34 + ws
}

fn main() {
    const RATE: usize = 7;
    const HOUR: usize = 3_600;
    const PER_BLOCK: usize = RATE * 600;
    let n = RATE * HOUR;
    let mut rng = Rng(7);
    let txs: Vec<Vec<u8>> = (0..n).map(|_| a_tx(&mut rng)).collect();
    let salt: [u8; 16] = rng.bytes();
    let (mut items, mut set): (Vec<u64>, Vec<u8>) = (Vec::new(), Vec::new());
    let mut out = vec![0u8; 65_535];
    // Added: one message each; with tweaks, those with a taproot output carry one.
    let (mut added, mut set_bytes, mut item_count) = (0usize, 0usize, 0usize);
    let (mut tweaked, mut with_tweak) = (0usize, 0usize);
    for t in &txs {
        let tx = Tx::parse(t).expect("a transaction");
        tx_set(&tx, &salt, &mut items, &mut set);
        set_bytes += set.len();
        item_count += tx.outputs().count() + tx.inputs().count();
        let mut w = DigestWriter::new(&mut out, false).expect("room");
        assert!(w.added(&tx.txid().0, &set, None));
        added += wire(w.finish());
        let taproot = tx
            .outputs()
            .any(|o| o.script.len() == 34 && o.script[..2] == [0x51, 0x20]);
        let tweak = taproot.then_some([2u8; 33]);
        with_tweak += usize::from(taproot);
        let mut w = DigestWriter::new(&mut out, false).expect("room");
        assert!(w.added(&tx.txid().0, &set, tweak.as_ref()));
        tweaked += wire(w.finish());
    }
    // Removed when mined: one message per block's worth.
    let mut removed = 0usize;
    for block in txs.chunks(PER_BLOCK) {
        let mut w = DigestWriter::new(&mut out, false).expect("room");
        for t in block {
            if !w.removed(&Tx::parse(t).unwrap().txid().0, Removal::Mined) {
                removed += wire(w.finish());
                w = DigestWriter::new(&mut out, false).expect("room");
                assert!(w.removed(&Tx::parse(t).unwrap().txid().0, Removal::Mined));
            }
        }
        removed += wire(w.finish());
    }
    let per_s = |b: usize| b as f64 / HOUR as f64;
    println!(
        "mempool digest at {RATE} tx/s ({n} transactions, {:.2} items and {:.1} set bytes each): \
         {:.0} B/s added (one message each), {:.0} B/s removed (one message a block), {:.0} B/s in all",
        item_count as f64 / n as f64,
        set_bytes as f64 / n as f64,
        per_s(added),
        per_s(removed),
        per_s(added + removed)
    );
    println!(
        "with tweaks: {with_tweak} of {n} transactions ({:.0}%) have a taproot output and carry a 33-byte tweak: {:.0} B/s added, {:.0} B/s in all; the receiver works out {:.1} tweaks a second",
        100.0 * with_tweak as f64 / n as f64,
        per_s(tweaked),
        per_s(tweaked + removed),
        with_tweak as f64 / HOUR as f64
    );
    // False matches for a wallet of 100 addresses and 20 coins, over several salts.
    let mut queries: Vec<Vec<u8>> = (0..100)
        .map(|_| [&[0x00, 0x14][..], &rng.bytes::<20>()].concat())
        .collect();
    queries.extend((0..20).map(|_| outpoint_item(&rng.bytes::<32>(), 0).to_vec()));
    let mut matcher = Matcher::default();
    let mut per_salt = Vec::new();
    for _ in 0..5 {
        let salt: [u8; 16] = rng.bytes();
        let mut hits = 0;
        for t in &txs {
            let tx = Tx::parse(t).unwrap();
            tx_set(&tx, &salt, &mut items, &mut set);
            if set_matches(&mut matcher, &set, &salt, queries.iter().map(Vec::as_slice)).unwrap() {
                hits += 1;
            }
        }
        per_salt.push(hits);
    }
    // BIP158: each query falls on one of N values in [0, N * M): 1/M a query, whatever N.
    let expected = n as f64 * queries.len() as f64 / 784_931.0;
    println!(
        "false matches in an hour for 100 addresses and 20 coins (120 items), five salts: {per_salt:?} \
         (expected {expected:.1}: 120 / 784,931 per transaction); each costs one transaction fetched"
    );
}
