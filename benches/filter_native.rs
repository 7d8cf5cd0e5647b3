//! BIP158 matching natively, ours and rust-bitcoin's `bip158` (the anchor the issue names)
//! on the same filters and queries: `cargo bench -p lightwire-benches --bench filter`.

use bitcoin::hashes::Hash;
use lightwire_benches::filter::{BLOCK_HASH, Row, filter_of, ours, scripts, table, time};

#[cfg(feature = "count-alloc")]
#[global_allocator]
static ALLOC: lightwire_alloc::CountingAllocator = lightwire_alloc::CountingAllocator::system();

fn main() {
    // Under `cargo test --benches` (no --bench flag) run briefly, to keep it working.
    let budget = if std::env::args().any(|a| a == "--bench") {
        300e6
    } else {
        1e6
    };
    let clock = lightwire_benches::Monotonic::new();
    let mut rows = ours(&clock, budget);
    let hash = bitcoin::BlockHash::from_byte_array(BLOCK_HASH);
    for elements in [1_000, 5_000, 10_000] {
        let bytes = filter_of(elements);
        let filter = bitcoin::bip158::BlockFilter::new(&bytes);
        for queries in [1, 100] {
            let q = scripts(queries, 0x1234_5678 + queries as u64);
            let (iterations, ns) = time(&clock, budget, || {
                filter
                    .match_any(&hash, q.iter().map(Vec::as_slice))
                    .unwrap_or(true)
            });
            rows.push(Row {
                who: "rust-bitcoin 0.32 bip158",
                elements,
                bytes: bytes.len(),
                queries,
                iterations,
                ns,
            });
        }
    }
    println!("{}", table(&rows));
}
