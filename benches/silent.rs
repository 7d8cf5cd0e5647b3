//! Silent payments (BIP352), per tweak: what a receiver does for each eligible
//! transaction of a block before fetching it (`first_keys`: the ECDH with the scan key, then
//! `P_0` and the change label's key), what it does with a fetched transaction that does
//! not pay it (`scan` of two taproot outputs), and what a gateway does to make a tweak
//! (`tweak` of a transaction spending two taproot key paths). On k256, natively or in the
//! browser: `cargo bench -p lightwire-benches --bench silent`, `bash scripts/bench-wasm.sh
//! wasm_silent`; with the `libsecp` feature, the first keys on libsecp256k1 beside them
//! (the same steps through rust-secp256k1's calls).

use k256::elliptic_curve::PrimeField;
use k256::elliptic_curve::sec1::ToSec1Point;
use k256::{ProjectivePoint, Scalar};
use lightwire_primitives::{TweakList, Tx, write_compact_size, write_tweak_list};
use lightwire_wallet::silent::{Receiver, tweak};
use lightwire_wallet::silent_block::BlockScanner;
use sha2::{Digest, Sha256};

use crate::Clock;
use crate::filter::time;

/// A point `hash(seed, i)·G`, compressed: tweaks and keys unlike each other.
fn point(seed: u8, i: u32) -> [u8; 33] {
    let h: [u8; 32] = Sha256::new()
        .chain_update([seed])
        .chain_update(i.to_le_bytes())
        .finalize()
        .into();
    let s = Option::<Scalar>::from(Scalar::from_repr(h.into())).expect("below the order");
    let mut out = [0u8; 33];
    out.copy_from_slice(
        ProjectivePoint::mul_by_generator(&s)
            .to_affine()
            .to_sec1_point(true)
            .as_bytes(),
    );
    out
}

/// A transaction spending two P2TR key paths (keys `point(3, i)` and `point(4, i)`) to
/// two P2TR outputs, and the scripts it spends.
fn two_taproot_inputs(i: u32) -> (Vec<u8>, [Vec<u8>; 2]) {
    let mut tx = vec![2, 0, 0, 0, 0, 1, 2];
    let mut spent = [Vec::new(), Vec::new()];
    for (j, seed) in [3u8, 4].into_iter().enumerate() {
        let mut prev = [seed; 32];
        prev[..4].copy_from_slice(&i.to_le_bytes());
        tx.extend_from_slice(&prev);
        tx.extend_from_slice(&(j as u32).to_le_bytes());
        tx.extend_from_slice(&[0, 0xff, 0xff, 0xff, 0xff]);
        spent[j] = [&[0x51, 0x20][..], &point(seed, i)[1..]].concat();
    }
    write_compact_size(&mut tx, 2);
    for seed in [5u8, 6] {
        tx.extend_from_slice(&50_000u64.to_le_bytes());
        tx.extend_from_slice(&[34, 0x51, 0x20]);
        tx.extend_from_slice(&point(seed, i)[1..]);
    }
    for _ in 0..2 {
        tx.extend_from_slice(&[1, 64]);
        tx.extend_from_slice(&[0x42; 64]);
    }
    tx.extend_from_slice(&[0; 4]);
    (tx, spent)
}

/// The per-tweak times, one line each.
pub fn report(clock: &impl Clock, engine: &str, budget_ns: f64) -> Vec<String> {
    let scan_key: [u8; 32] = Sha256::digest(b"scan").into();
    let receiver = Receiver::new(&scan_key, &point(1, 0)).expect("keys");
    let tweaks: Vec<[u8; 33]> = (0..256).map(|i| point(2, i)).collect();
    let outputs: Vec<[[u8; 32]; 2]> = (0..256u32)
        .map(|i| {
            let (a, b) = (point(5, i), point(6, i));
            [
                a[1..].try_into().expect("32"),
                b[1..].try_into().expect("32"),
            ]
        })
        .collect();
    let txs: Vec<(Vec<u8>, [Vec<u8>; 2])> = (0..256).map(two_taproot_inputs).collect();
    let mut keys = Vec::with_capacity(4);
    let mut found = Vec::new();
    let mut i = 0usize;
    let (n1, first) = time(clock, budget_ns, || {
        i = (i + 1) % tweaks.len();
        keys.clear();
        receiver.first_keys(&tweaks[i], &mut keys).is_ok()
    });
    // A block's worth in one call, per tweak.
    let mut batch_keys = Vec::with_capacity(tweaks.len() * 2);
    let (n_batch, batch) = time(clock, budget_ns, || {
        batch_keys.clear();
        receiver.first_keys_batch(&tweaks, &mut batch_keys).is_ok()
    });
    let (batch, n_batch) = (batch / tweaks.len() as f64, n_batch * tweaks.len() as u64);
    // A mainnet block's scan before any fetch: 715 tweaks (mainnet's mean), their first
    // keys, and their 1,430 taproot scripts matched against a 6,000-item filter (about
    // 14 KB, mainnet's mean), nothing of the receiver's in it.
    let mut block_tweaks: Vec<[u8; 33]> = (0..715).map(|i| point(2, 1000 + i)).collect();
    let mut list = Vec::new();
    write_tweak_list(&mut block_tweaks, &mut list);
    let list = TweakList::parse(&list).expect("a list");
    let items: Vec<Vec<u8>> = (0..6000)
        .map(|i| [&[0x51, 0x20][..], &point(8, i)[1..]].concat())
        .collect();
    let block_hash = [9u8; 32];
    let mut filter = Vec::new();
    lightwire_filter::build_filter(&block_hash, items.iter().map(Vec::as_slice), &mut filter);
    let mut scanner = BlockScanner::new();
    let (n_block, block) = time(clock, budget_ns, || {
        scanner.filter_matches(&receiver, &list, &filter, &block_hash) == Ok(false)
    });
    let (block, n_block) = (block / list.len() as f64, n_block * list.len() as u64);
    let (n2, scan) = time(clock, budget_ns, || {
        i = (i + 1) % tweaks.len();
        found.clear();
        receiver.scan(&tweaks[i], &outputs[i], &mut found).is_ok() && found.is_empty()
    });
    let (n3, make) = time(clock, budget_ns, || {
        i = (i + 1) % txs.len();
        let (raw, spent) = &txs[i];
        let tx = Tx::parse(raw).expect("a transaction");
        tweak(&tx, &[&spent[0], &spent[1]]).is_ok()
    });
    #[cfg(feature = "libsecp")]
    let (n4, libsecp) = {
        let secp = secp256k1::Secp256k1::verification_only();
        let scan = secp256k1::Scalar::from_be_bytes(scan_key).expect("below the order");
        let spend = secp256k1::PublicKey::from_slice(&point(1, 0)).expect("a key");
        let change = secp256k1::PublicKey::from_slice(&point(7, 0)).expect("a key");
        let mut data = [0u8; 37];
        time(clock, budget_ns, || {
            i = (i + 1) % tweaks.len();
            keys.clear();
            let Ok(t) = secp256k1::PublicKey::from_slice(&tweaks[i]) else {
                return false;
            };
            let Ok(shared) = t.mul_tweak(&secp, &scan) else {
                return false;
            };
            data[..33].copy_from_slice(&shared.serialize());
            let tag = Sha256::digest(b"BIP0352/SharedSecret");
            let h: [u8; 32] = Sha256::new()
                .chain_update(tag)
                .chain_update(tag)
                .chain_update(data)
                .finalize()
                .into();
            let Ok(t0) = secp256k1::Scalar::from_be_bytes(h) else {
                return false;
            };
            let Ok(p0) = spend.add_exp_tweak(&secp, &t0) else {
                return false;
            };
            keys.push(p0.x_only_public_key().0.serialize());
            let Ok(labelled) = p0.combine(&change) else {
                return false;
            };
            keys.push(labelled.x_only_public_key().0.serialize());
            true
        })
    };
    let line = |what: &str, ns: f64, n: u64| {
        format!(
            "lightwire silent payments, k256 ({engine}): {what}: {:.1} us per tweak, {:.0} tweaks/s on one core ({n} timed)",
            ns / 1e3,
            1e9 / ns
        )
    };
    #[allow(unused_mut)]
    let mut lines = vec![
        line("first keys (ECDH, P_0, the change label)", first, n1),
        line(
            "first keys of 256 tweaks in one call (shared inversions)",
            batch,
            n_batch,
        ),
        line(
            "a block's scan before any fetch: 715 tweaks' first keys matched against its 14 KB filter",
            block,
            n_block,
        ),
        line("scan of a transaction not paying (two outputs)", scan, n2),
        line(
            "the gateway's tweak of a two-input taproot transaction",
            make,
            n3,
        ),
    ];
    #[cfg(feature = "libsecp")]
    lines.push(
        line("first keys on libsecp256k1 (the same steps)", libsecp, n4).replace(", k256 (", " ("),
    );
    lines
}
