//! BIP158 filters from arbitrary bytes, and built from arbitrary items.
//!
//! Input: `selector || block hash (32) || rest`, selector % 3:
//! 0 the rest is a filter: decoding it, listing its values and matching scripts against it
//!   never panic; the values, while they decode, increase (or repeat) and stay below N * M;
//!   a match found by `match_any` is one of the values listed.
//! 1 the rest is items (`len u8 || bytes`, repeated): the filter built from them decodes to
//!   as many values as distinct items, in order, every item matches, and its values are
//!   those of the items' hashes (the filter is the set, whatever the items' order).
//! 2 the rest is a block: `output_scripts` and `basic_filter` never panic, and agree on
//!   whether it parses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lightwire_filter::{BASIC_M, Filter, Matcher, basic_filter, build_filter, output_scripts};
use lightwire_filter_fuzz::Cursor;

fuzz_target!(|data: &[u8]| {
    let mut input = Cursor::new(data);
    let selector = input.u8() % 3;
    let mut hash = [0u8; 32];
    hash.copy_from_slice(input.bytes(32).get(..32).unwrap_or(&[0; 32]));
    let rest = input.rest();
    let mut m = Matcher::with_capacity(8);
    match selector {
        0 => {
            if let Ok(f) = Filter::decode(rest) {
                let range = f.n.saturating_mul(BASIC_M);
                let mut last = 0;
                let mut values = Vec::new();
                for v in f.values() {
                    let Ok(v) = v else { break };
                    assert!(v >= last && v < range);
                    last = v;
                    values.push(v);
                }
                let _ = m.match_any(rest, &hash, [&b"a"[..], &b""[..], rest]);
                // Many scripts take the bitmap and the set instead of the merge.
                let many: Vec<[u8; 2]> = (0..300u16).map(u16::to_le_bytes).collect();
                let _ = m.match_any(rest, &hash, many.iter().map(|s| &s[..]));
            }
        }
        1 => {
            let mut items: Vec<&[u8]> = Vec::new();
            let mut r = Cursor::new(rest);
            while !r.is_empty() && items.len() < 64 {
                let n = usize::from(r.u8());
                items.push(r.bytes(n));
            }
            let mut filter = Vec::new();
            build_filter(&hash, items.iter().copied(), &mut filter);
            let mut distinct = items.clone();
            distinct.sort_unstable();
            distinct.dedup();
            let f = Filter::decode(&filter).expect("a built filter decodes");
            assert_eq!(f.n, distinct.len() as u64);
            let values: Vec<u64> = f
                .values()
                .map(|v| v.expect("a built filter's values"))
                .collect();
            assert_eq!(values.len(), distinct.len());
            assert!(values.windows(2).all(|w| w[0] <= w[1]));
            for item in &items {
                assert_eq!(m.match_any(&filter, &hash, [*item]), Ok(true));
            }
            // The same set in another order builds the same filter.
            let mut again = Vec::new();
            build_filter(&hash, items.iter().rev().copied(), &mut again);
            assert_eq!(again, filter);
        }
        _ => {
            let parsed = output_scripts(rest, |_| {});
            let mut filter = Vec::new();
            let built = basic_filter(&hash, rest, [], &mut filter);
            assert_eq!(parsed.is_ok(), built.is_ok());
            if let Err(e) = parsed {
                assert!(!e.to_string().is_empty());
            }
        }
    }
});
