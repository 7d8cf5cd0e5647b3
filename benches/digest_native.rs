//! Matching a mempool digest message natively, before and after (see `digest.rs`):
//! `cargo bench -p lightwire-benches --bench digest`.

#[cfg(feature = "count-alloc")]
#[global_allocator]
static ALLOC: lightwire_alloc::CountingAllocator = lightwire_alloc::CountingAllocator::system();

fn main() {
    use lightwire_benches::digest::{Scale, run, table};
    // Under `cargo test --benches` (no --bench flag, a debug build) run briefly and on a
    // tenth of the load, to keep it working: the whole "before" takes seconds a message.
    let (budget, scale) = if std::env::args().any(|a| a == "--bench") {
        (2e9, Scale::Full)
    } else {
        (1e6, Scale::Smoke)
    };
    let clock = lightwire_benches::Monotonic::new();
    let (rows, bytes) = run(&clock, budget, scale);
    println!("{}", table(&rows, bytes, scale));
}
