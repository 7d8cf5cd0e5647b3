//! Native transport benchmarks: `cargo bench -p lightwire-benches --bench transport`.
//! Prints a Markdown table (ns/op, MB/s, allocs/op, B/op) with lnd's figures beside ours.

#[cfg(feature = "count-alloc")]
#[global_allocator]
static ALLOC: lightwire_alloc::CountingAllocator = lightwire_alloc::CountingAllocator::system();

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing. A quick run
    // under test keeps the bench compiled and working without spending seconds on it.
    let quick = !std::env::args().any(|a| a == "--bench");
    let budget_ns = if quick { 1e6 } else { 2e9 };
    let rows = lightwire_benches::suite(&lightwire_benches::Monotonic::new(), budget_ns);
    println!("{}", lightwire_benches::table(&rows));
}
