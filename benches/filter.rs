//! BIP158 matching, shared by the native benchmark (`cargo bench -p lightwire-benches --bench
//! filter`, which also runs rust-bitcoin's `bip158` on the same filters as the anchor) and
//! the in-browser one (`bash scripts/bench-wasm.sh wasm_filter`).
//!
//! Filters of 1,000, 5,000 and 10,000 random scripts (20 to 34 bytes, as output scripts
//! are), keyed by a fixed block hash; queries of 1 and 100 other random scripts, so that no
//! query matches and every match walks the whole filter (the worst case, and a scan's
//! common one).

use std::hint::black_box;

use lightwire_filter::{Matcher, build_filter};

use crate::Clock;

/// The block hash the filters are keyed by.
pub const BLOCK_HASH: [u8; 32] = [0x5a; 32];

/// `n` random scripts from `seed` (xorshift; deterministic).
pub fn scripts(n: usize, mut seed: u64) -> Vec<Vec<u8>> {
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    (0..n)
        .map(|_| {
            let len = 20 + (next() % 15) as usize;
            (0..len).map(|_| next() as u8).collect()
        })
        .collect()
}

/// The filter of `n` random scripts.
pub fn filter_of(n: usize) -> Vec<u8> {
    let items = scripts(n, 0x9e37_79b9_7f4a_7c15 ^ n as u64);
    let mut out = Vec::new();
    build_filter(&BLOCK_HASH, items.iter().map(Vec::as_slice), &mut out);
    out
}

/// One measurement: `queries` scripts matched against a filter of `elements`.
#[derive(Clone, Debug)]
pub struct Row {
    /// Who matched (ours, or the anchor).
    pub who: &'static str,
    /// Items in the filter.
    pub elements: usize,
    /// Bytes of the filter.
    pub bytes: usize,
    /// Scripts per match.
    pub queries: usize,
    /// Matches timed.
    pub iterations: u64,
    /// Nanoseconds per match.
    pub ns: f64,
}

/// Time `f` (one match) for about `budget_ns`.
pub fn time(clock: &impl Clock, budget_ns: f64, mut f: impl FnMut() -> bool) -> (u64, f64) {
    for _ in 0..3 {
        black_box(f());
    }
    let start = clock.now_ns();
    let mut iterations = 0u64;
    loop {
        for _ in 0..16 {
            black_box(f());
        }
        iterations += 16;
        let elapsed = clock.now_ns() - start;
        if elapsed >= budget_ns {
            return (iterations, elapsed / iterations as f64);
        }
    }
}

/// Our `Matcher::match_any` on every size and query count.
pub fn ours(clock: &impl Clock, budget_ns: f64) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut m = Matcher::with_capacity(100);
    for elements in [1_000, 5_000, 10_000] {
        let filter = filter_of(elements);
        // 420 and 2,100: the scripts of one wallet of three descriptors (a gap of 20 and a
        // lookahead of 50 on two branches each), and of five such wallets.
        for queries in [1, 100, 420, 2_100] {
            let q = scripts(queries, 0x1234_5678 + queries as u64);
            let (iterations, ns) = time(clock, budget_ns, || {
                m.match_any(&filter, &BLOCK_HASH, q.iter().map(Vec::as_slice))
                    .unwrap_or(true)
            });
            rows.push(Row {
                who: "lightwire-filter",
                elements,
                bytes: filter.len(),
                queries,
                iterations,
                ns,
            });
        }
    }
    rows
}

/// A markdown table of `rows`.
pub fn table(rows: &[Row]) -> String {
    let mut s = String::from(
        "| matcher | elements | filter bytes | queries | us per match_any | matches timed |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {:.2} | {} |\n",
            r.who,
            r.elements,
            r.bytes,
            r.queries,
            r.ns / 1000.0,
            r.iterations
        ));
    }
    s
}
