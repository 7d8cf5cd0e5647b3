//! Native header validation benchmark: `cargo bench -p lightwire-benches --bench validate`.
//! Validates the 925,000-header generated regtest chain in batches of 2016.

#[cfg(feature = "count-alloc")]
#[global_allocator]
static ALLOC: lightwire_alloc::CountingAllocator = lightwire_alloc::CountingAllocator::system();

fn main() {
    // Under `cargo test --benches` (no --bench flag) run a small chain, to keep it working.
    let full = std::env::args().any(|a| a == "--bench");
    let count = if full { 925_000 } else { 5_000 };
    let clock = lightwire_benches::Monotonic::new();
    let runs = [lightwire_benches::chain::validate_generated(
        &clock, count, 2016,
    )];
    println!("{}", lightwire_benches::chain::table(&runs));
}
