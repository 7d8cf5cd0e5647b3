//! Matching a mempool digest message natively, before and after (see `digest.rs`):
//! `cargo bench -p lightwire-benches --bench digest`.

#[cfg(feature = "count-alloc")]
#[global_allocator]
static ALLOC: lightwire_alloc::CountingAllocator = lightwire_alloc::CountingAllocator::system();

fn main() {
    // Under `cargo test --benches` (no --bench flag) run briefly, to keep it working.
    let budget = if std::env::args().any(|a| a == "--bench") {
        2e9
    } else {
        1e6
    };
    let clock = lightwire_benches::Monotonic::new();
    let (rows, bytes) = lightwire_benches::digest::run(&clock, budget);
    println!("{}", lightwire_benches::digest::table(&rows, bytes));
}
