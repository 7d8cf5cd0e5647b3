//! Matching allocates nothing per filter once the matcher's buffer has held the query set:
//! every allocation counted while 100 scripts are matched against filters built from the
//! BIP158 vectors' blocks, many times over.
#![cfg(not(target_arch = "wasm32"))]

use lightwire_alloc::{CountingAllocator, snapshot};
use lightwire_filter::{Matcher, basic_filter};

#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator::system();

const VECTORS: &str = include_str!(concat!(env!("LIGHTWIRE_SHARED"), "/vectors/bip158.json"));

/// Held by each test for its whole run. The counters are the process's, and the harness
/// runs the tests of this file on threads side by side: one test's setup (the vectors
/// parsed, filters built) allocated through every round of the other's, which then
/// counted allocations it never made (a CI run failed both, with 2 and 17 "in every
/// round").
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn matching_allocates_nothing_per_filter_once_warm() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let rows: Vec<serde_json::Value> = serde_json::from_str(VECTORS).unwrap();
    let mut filters = Vec::new();
    for r in rows.iter().skip(1) {
        let mut hash = [0u8; 32];
        hex::decode_to_slice(r[1].as_str().unwrap(), &mut hash).unwrap();
        hash.reverse();
        let block = hex::decode(r[2].as_str().unwrap()).unwrap();
        let spent: Vec<Vec<u8>> = r[3]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| hex::decode(s.as_str().unwrap()).unwrap())
            .collect();
        let mut f = Vec::new();
        basic_filter(&hash, &block, spent.iter().map(Vec::as_slice), &mut f).unwrap();
        filters.push((hash, f));
    }
    // 100 scripts are merged; 2,100 (five wallets' worth) go through the bitmap and set.
    for count in [100u32, 2_100] {
        let scripts: Vec<Vec<u8>> = (0..count)
            .map(|i| {
                let mut s = vec![0x00, 0x14];
                s.extend_from_slice(&i.to_le_bytes());
                s.extend_from_slice(&[0xa5; 16]);
                s
            })
            .collect();
        let mut m = Matcher::with_capacity(scripts.len());
        let mut matched = 0;
        // The counters are the whole process's: the test harness's own thread can allocate
        // while a round runs (seen on a loaded machine). Code that allocates per filter does
        // so in every round, so the fewest allocations of a few rounds is what it made.
        let mut fewest = u64::MAX;
        for _ in 0..3 {
            let before = snapshot();
            for _ in 0..100 {
                for (hash, f) in &filters {
                    matched += usize::from(
                        m.match_any(f, hash, scripts.iter().map(Vec::as_slice))
                            .unwrap(),
                    );
                }
            }
            fewest = fewest.min(snapshot().since(&before).allocations);
        }
        assert_eq!(
            matched, 0,
            "none of these scripts is in the vectors' blocks"
        );
        assert_eq!(
            fewest, 0,
            "{count} scripts: {fewest} allocations in every round"
        );
    }
}

/// A mempool transaction's set is built, and matched, without allocating once the
/// caller's buffers are warm (the gateway builds one per transaction per subscribed
/// session; the client rebuilds one per transaction fetched).
#[test]
fn a_transaction_set_allocates_nothing_once_warm() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    use lightwire_filter::txset::{set_matches, tx_set};
    let rows: Vec<serde_json::Value> = serde_json::from_str(VECTORS).unwrap();
    let blocks: Vec<Vec<u8>> = rows
        .iter()
        .skip(1)
        .map(|r| hex::decode(r[2].as_str().unwrap()).unwrap())
        .collect();
    let scripts: Vec<Vec<u8>> = (0..100u8).map(|i| vec![0x00, 0x14, i, i, i]).collect();
    let (mut hashes, mut set) = (Vec::new(), Vec::new());
    let mut m = Matcher::with_capacity(scripts.len());
    let salt = [9u8; 16];
    let mut fewest = u64::MAX;
    let mut txs = 0;
    for _ in 0..3 {
        let before = snapshot();
        for b in &blocks {
            let block = lightwire_filter::Block::parse(b).unwrap();
            for tx in block.transactions() {
                tx_set(&tx, &salt, &mut hashes, &mut set);
                let _ = set_matches(&mut m, &set, &salt, scripts.iter().map(Vec::as_slice));
                txs += 1;
            }
        }
        fewest = fewest.min(snapshot().since(&before).allocations);
    }
    assert!(txs > 30, "{txs} transactions");
    assert_eq!(fewest, 0, "allocations in a warm round of {} sets", txs / 3);
}
