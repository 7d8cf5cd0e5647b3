//! Silent payments per tweak, natively: `cargo bench -p lightwire-benches --bench silent`.

fn main() {
    let clock = lightwire_benches::Monotonic::new();
    for line in lightwire_benches::silent::report(&clock, "native", 1e9) {
        println!("{line}");
    }
}
