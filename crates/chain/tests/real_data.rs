//! Real chain data from `$LIGHTWIRE_SHARED/data` (see its README): mainnet from genesis to
//! 39,999 under full mainnet rules, every mainnet retarget up to 832,608 recomputed exactly,
//! signet and testnet4 from genesis, and mutated mainnet headers rejected with the rule
//! they break. The files are embedded at compile time so the same tests run in the browser.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;
#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

use lightwire_chain::{
    BitsCheck, CompactTarget, Header, MAINNET, Params, Rule, SIGNET, TESTNET4, U256,
    ValidationError, Window, Work, retarget, validate,
};

const MAINNET_0_39999: &[u8] = include_bytes!(concat!(
    env!("LIGHTWIRE_SHARED"),
    "/data/headers/mainnet_0-39999.bin"
));
const SIGNET_0_2015: &[u8] = include_bytes!(concat!(
    env!("LIGHTWIRE_SHARED"),
    "/data/headers/signet_0-2015.bin"
));
const TESTNET4_0_100: &[u8] = include_bytes!(concat!(
    env!("LIGHTWIRE_SHARED"),
    "/data/headers/testnet4_0-100.bin"
));
const BOUNDARIES: &str = include_str!(concat!(
    env!("LIGHTWIRE_SHARED"),
    "/data/headers/mainnet_retarget_boundaries_0-832608.txt"
));

/// A clock after every header in the files (2033), so the future limit never bites here.
const NOW: u64 = 2_000_000_000;

fn headers(data: &[u8]) -> Vec<Header> {
    assert_eq!(data.len() % 80, 0, "whole headers");
    data.chunks_exact(80)
        .map(|c| Header::from_slice(c).expect("80 bytes"))
        .collect()
}

/// Validate a file that starts at genesis; returns the window at its tip.
fn validate_from_genesis(params: &Params, all: &[Header]) -> Result<Window, ValidationError> {
    assert_eq!(
        all[0], params.genesis,
        "file starts at {}'s genesis",
        params.network
    );
    let mut window = Window::from_genesis(params);
    for header in &all[1..] {
        let v = validate(params, &window, header, NOW)?;
        assert_eq!(v.bits_check, BitsCheck::Exact);
        window.push(v.entry);
    }
    Ok(window)
}

fn u256_hex(s: &str) -> U256 {
    let raw = hex::decode(s).expect("hex");
    U256::from_be_bytes(&raw.try_into().expect("32 bytes"))
}

/// `height header_hex block_hash chainwork_hex` lines of the boundaries file.
fn boundaries() -> Vec<(u32, Header, String, Work)> {
    BOUNDARIES
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let header = Header::from_slice(&hex::decode(f[1]).expect("hex")).expect("80 bytes");
            (
                f[0].parse().expect("height"),
                header,
                f[2].to_string(),
                Work(u256_hex(f[3])),
            )
        })
        .collect()
}

#[test]
fn mainnet_first_40000_headers_validate() {
    let all = headers(MAINNET_0_39999);
    assert_eq!(all.len(), 40_000);
    let window = validate_from_genesis(&MAINNET, &all).expect("all valid");
    assert_eq!(window.tip().height, 39_999);
    assert_eq!(window.tip().hash, all[39_999].block_hash());
    // Core's checkpoints 11111 and 33333 are inside and were enforced on the way.
    assert!(MAINNET.checkpoint_at(11111).is_some() && MAINNET.checkpoint_at(33333).is_some());
    // Chainwork agrees with the boundaries file at 38,303 (its last pair below 40,000).
    let b = boundaries();
    let (_, _, _, work_38303) = b.iter().find(|(h, ..)| *h == 38_303).expect("line 38303");
    let mut w = Window::from_genesis(&MAINNET);
    for header in &all[1..=38_303] {
        let v = validate(&MAINNET, &w, header, NOW).expect("valid");
        w.push(v.entry);
    }
    assert_eq!(w.tip().chainwork, *work_38303);
}

#[test]
fn every_mainnet_retarget_to_832608_recomputed_exactly() {
    let b = boundaries();
    assert_eq!(b[0].0, 0);
    let mut checked = 0;
    for k in 1..=413u32 {
        let find = |h: u32| {
            b.iter()
                .find(|(height, ..)| *height == h)
                .unwrap_or_else(|| panic!("line {h}"))
        };
        let (_, first, ..) = find(2016 * (k - 1));
        let (_, last, _, last_work) = find(2016 * k - 1);
        let (_, next, next_hash, next_work) = find(2016 * k);
        assert_eq!(next.prev_blockhash, last.block_hash(), "{}", 2016 * k);
        assert_eq!(next.block_hash().to_string(), *next_hash);
        assert_eq!(
            retarget(&MAINNET, first.time, last.bits, last.time),
            next.bits,
            "retarget at {}",
            2016 * k
        );
        // Work: the period's headers all carry its first header's nBits.
        let per_header = next.bits.to_target().expect("valid bits").work();
        assert_eq!(
            last_work.add(&per_header),
            *next_work,
            "chainwork at {}",
            2016 * k
        );
        checked += 1;
    }
    assert_eq!(checked, 413);
}

#[test]
fn signet_first_period_validates() {
    let all = headers(SIGNET_0_2015);
    let window = validate_from_genesis(&SIGNET, &all).expect("all valid");
    assert_eq!(window.tip().height, 2015);
}

#[test]
fn testnet4_first_101_validate() {
    let all = headers(TESTNET4_0_100);
    let window = validate_from_genesis(&TESTNET4, &all).expect("all valid");
    assert_eq!(window.tip().height, 100);
}

/// Validate mainnet up to `height - 1`, then offer `mutated` at `height`.
fn reject_at(height: usize, mutate: impl FnOnce(&mut Header)) -> ValidationError {
    let all = headers(&MAINNET_0_39999[..80 * (height + 1)]);
    let mut window = Window::from_genesis(&MAINNET);
    for header in &all[1..height] {
        window.push(
            validate(&MAINNET, &window, header, NOW)
                .expect("valid prefix")
                .entry,
        );
    }
    let mut bad = all[height];
    mutate(&mut bad);
    let err = validate(&MAINNET, &window, &bad, NOW).expect_err("mutated header rejected");
    assert_eq!(err.height, height as u32);
    err
}

#[test]
fn mutated_mainnet_headers_are_rejected_with_their_rule() {
    // Any change to a real header changes its hash, which then (almost surely) misses the
    // target: proof of work is checked first, as Core's CheckBlockHeader does.
    let e = reject_at(1000, |h| h.nonce ^= 1);
    assert!(matches!(e.rule, Rule::HighHash { .. }), "{e}");
    let e = reject_at(1000, |h| h.bits = CompactTarget(h.bits.0 ^ 1));
    assert!(matches!(e.rule, Rule::HighHash { .. }), "{e}");
    let e = reject_at(1000, |h| h.prev_blockhash.0[0] ^= 1);
    assert!(matches!(e.rule, Rule::PrevHashMismatch { .. }), "{e}");
    // A target easier than the limit is refused before its hash is even looked at.
    let e = reject_at(1000, |h| h.bits = CompactTarget(0x1d01ffff));
    assert_eq!(
        e.rule,
        Rule::InvalidTarget {
            bits: CompactTarget(0x1d01ffff)
        }
    );
    // The first real retarget (0x1d00ffff -> 0x1d00d86a at 32256), with the old nBits kept.
    let e = reject_at(32256, |h| h.bits = CompactTarget(0x1d00ffff));
    assert!(matches!(e.rule, Rule::HighHash { .. }), "{e}");
    // The rules a mutated real header cannot reach (its hash no longer meets any mainnet
    // target) are tested on mined chains in src/validate.rs: time too old or too new, bad
    // version, checkpoint mismatch, wrong nBits at a retarget, min-difficulty, timewarp.
}
