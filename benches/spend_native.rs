//! `createPsbt` for a wallet of 1,000 coins, natively: `cargo bench -p lightwire-benches
//! --bench spend`.

fn main() {
    let clock = lightwire_benches::Monotonic::new();
    for line in lightwire_benches::spend::report(&clock, "native", 2e9) {
        println!("{line}");
    }
}
