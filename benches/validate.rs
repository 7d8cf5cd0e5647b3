//! Native header validation benchmark: `cargo bench -p lightwire-benches --bench validate`.
//! Validates the 925,000-header generated regtest chain in batches of 2016.

use std::time::Instant;

#[cfg(feature = "count-alloc")]
#[global_allocator]
static ALLOC: lightwire_alloc::CountingAllocator = lightwire_alloc::CountingAllocator::system();

struct Monotonic(Instant);

impl lightwire_benches::Clock for Monotonic {
    fn now_ns(&self) -> f64 {
        self.0.elapsed().as_nanos() as f64
    }
}

fn main() {
    // Under `cargo test --benches` (no --bench flag) run a small chain, to keep it working.
    let full = std::env::args().any(|a| a == "--bench");
    let count = if full { 925_000 } else { 5_000 };
    let clock = Monotonic(Instant::now());
    let runs = [lightwire_benches::chain::validate_generated(
        &clock, count, 2016,
    )];
    println!("{}", lightwire_benches::chain::table(&runs));
}
