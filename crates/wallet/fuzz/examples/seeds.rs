//! Write a starting corpus into `corpus/<target>/seed-*`, in the input layouts the
//! targets document: for `tweak_list`, lists as bytes (empty, one tweak, three, 253 with
//! the three-byte count, and each broken in one way) and structured descriptions (300
//! entries; each defect); for `evidence` and `scan`, the empty input, which is their
//! honest case (every knob reads 0).
//!
//! Run from this directory: `cargo +nightly run --example seeds`.

use std::fs;
use std::path::Path;

use lightwire_wallet_fuzz::ref_write_compact_size;

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    fs::create_dir_all(&dir).expect("create the corpus directory");
    fs::write(dir.join(format!("seed-{name}")), bytes).expect("write a seed");
}

/// Tweak `i` of a sorted list: `02`, then `i` in the last bytes.
fn tweak(i: u32) -> [u8; 33] {
    let mut t = [0x11; 33];
    t[0] = 2;
    t[29..].copy_from_slice(&i.to_be_bytes());
    t
}

/// Selector 0 (the bytes as they are), then a list of `n` sorted tweaks.
fn list(n: u32) -> Vec<u8> {
    let mut b = vec![0];
    ref_write_compact_size(&mut b, u64::from(n));
    (0..n).for_each(|i| b.extend_from_slice(&tweak(i)));
    b
}

fn main() {
    for n in [0, 1, 3, 253] {
        write("tweak_list", &format!("list-{n}"), &list(n));
    }
    // A count written long: 1 in three bytes.
    let mut long = vec![0, 0xfd, 1, 0];
    long.extend_from_slice(&tweak(0));
    write("tweak_list", "count-not-canonical", &long);
    let mut short = list(3);
    short.pop();
    write("tweak_list", "length-short", &short);
    let mut uncompressed = list(3);
    uncompressed[2 + 33] = 4;
    write("tweak_list", "not-compressed", &uncompressed);
    let mut twice = list(2);
    twice[2 + 33..].copy_from_slice(&tweak(0));
    write("tweak_list", "unsorted", &twice);
    // Structured: selector 1, n = 300, canonical count, each defect, at entry 7.
    for defect in 0..8u8 {
        let mut s = vec![1];
        s.extend_from_slice(&300u16.to_le_bytes());
        s.extend_from_slice(&[0, defect]);
        s.extend_from_slice(&7u16.to_le_bytes());
        s.push(0x42);
        write("tweak_list", &format!("structured-defect-{defect}"), &s);
    }
    write("evidence", "honest", &[]);
    write("scan", "honest", &[]);
}
