//! The wallet's work on a matched 1 MB block, natively: `cargo bench -p lightwire-benches
//! --bench wallet`.

fn main() {
    let clock = lightwire_benches::Monotonic::new();
    let (len, ns, found, iterations) = lightwire_benches::wallet::extract(&clock, 2e9);
    println!(
        "lightwire wallet (native): a {len}-byte block parsed, checked against its header (hash, Merkle root, not mutated, one coinbase first) and its {found} transactions of ours picked out: {:.2} ms per block ({iterations} timed)",
        ns / 1e6
    );
    let (ns, scripts, iterations) = lightwire_benches::wallet::derive(&clock, 2e9);
    println!(
        "lightwire wallet (native): a BIP84 descriptor's {scripts} scripts derived by both routes: {:.2} ms ({:.1} us a script; {iterations} timed)",
        ns / 1e6,
        ns / 1e3 / scripts as f64
    );
}
