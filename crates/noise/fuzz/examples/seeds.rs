//! Write a starting corpus for every target into `corpus/<target>/seed-*`, in the input
//! layouts the targets document: the valid acts between the fixed keys (raw, and as
//! zero XOR masks), near misses, and frame streams of each size class.
//!
//! Run from this directory: `cargo +nightly run --example seeds`.

use std::fs;
use std::path::Path;

use lightwire_noise_fuzz::valid_acts;

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    fs::create_dir_all(&dir).expect("create the corpus directory");
    fs::write(dir.join(format!("seed-{name}")), bytes).expect("write a seed");
}

fn with_selector(selector: u8, rest: &[u8]) -> Vec<u8> {
    let mut v = vec![selector];
    v.extend_from_slice(rest);
    v
}

/// Seeds for an act target whose valid act is `valid`.
fn act_seeds(target: &str, valid: &[u8]) {
    let other_key = [0x42u8; 32];
    let zeros = vec![0u8; valid.len()];
    write(target, "raw-valid", &with_selector(0, valid));
    write(
        target,
        "raw-short",
        &with_selector(0, &valid[..valid.len() - 1]),
    );
    let mut long = valid.to_vec();
    long.push(0);
    write(target, "raw-long", &with_selector(0, &long));
    let mut version = valid.to_vec();
    version[0] = 1;
    write(target, "raw-version-1", &with_selector(0, &version));
    let mut tag = valid.to_vec();
    *tag.last_mut().expect("acts are not empty") ^= 1;
    write(target, "raw-bad-tag", &with_selector(0, &tag));
    write(target, "xor-zero", &with_selector(2, &zeros));
    write(target, "xor-resize-zero", &with_selector(4, &zeros));
    let mut other = other_key.to_vec();
    other.extend_from_slice(&zeros);
    write(target, "other-key-xor-zero", &with_selector(3, &other));
}

fn main() {
    let acts = valid_acts();
    act_seeds("act_one", &acts.one);
    act_seeds("act_two", &acts.two);
    act_seeds("act_three", &acts.three);

    // frame, stream mode: flags 0, count, per message `selector [size] fill`,
    // mutation count, then chunk sizes.
    let messages: &[u8] = &[
        3, 0, 0x01, // 0 bytes
        0, 5, 0x02, // 5 bytes
        5, 0xe8, 0x03, 0x03, // 1000 bytes
        7, 0x84, // 65535 bytes, sealed in place
        6, 0x00, 0x05, // 65535 bytes
    ];
    let mut clean = vec![0u8, 5];
    clean.extend_from_slice(messages);
    clean.push(0); // no mutation
    write("frame", "stream-clean-one-chunk", &clean);
    let mut chunked = clean.clone();
    chunked.extend_from_slice(&[1, 0, 2, 0, 2, 1, 2, 2, 4, 200, 3, 0x00, 0x10]);
    write("frame", "stream-clean-chunked", &chunked);
    let mut flipped = vec![0u8, 5];
    flipped.extend_from_slice(messages);
    flipped.extend_from_slice(&[1, 1, 2, 20, 0]); // flip a bit 20 bytes into frame 2
    write("frame", "stream-body-flip", &flipped);
    let mut cut = vec![0u8, 5];
    cut.extend_from_slice(messages);
    cut.extend_from_slice(&[1, 2, 100, 0, 0, 0]); // truncate to 100 bytes
    write("frame", "stream-truncated", &cut);
    let mut garbage = vec![0u8, 5];
    garbage.extend_from_slice(messages);
    garbage.extend_from_slice(&[1, 3, 39]); // append 40 bytes
    garbage.extend_from_slice(&[0xab; 40]);
    write("frame", "stream-garbage", &garbage);
    write(
        "frame",
        "stream-rotation",
        &[0xf0, 5, 6, 0, 0, 1, 0, 0, 1, 2, 5, 2, 3, 0, 0],
    );

    // frame, frame mode: flags 1, op count, per op `len selector [len] buffer selector
    // [byte] fill delivery [mutations]`.
    write(
        "frame",
        "frames-clean",
        &[1, 3, 0, 10, 0, 1, 0, 4, 0x00, 0x01, 0, 2, 0, 0, 2, 0],
    );
    write(
        "frame",
        "frames-too-long",
        &[1, 2, 6, 0, 1, 0, 0, 5, 0, 0, 0],
    );
    write(
        "frame",
        "frames-small-buffer",
        &[1, 2, 0, 10, 3, 4, 1, 0, 0, 10, 0, 1, 0],
    );
    write(
        "frame",
        "frames-dropped",
        &[1, 3, 0, 10, 0, 1, 7, 0, 10, 0, 1, 0, 0, 10, 0, 1, 0],
    );
    write(
        "frame",
        "frames-truncated",
        &[1, 2, 0, 10, 0, 1, 1, 2, 5, 0, 0, 0, 0, 10, 0, 1, 0],
    );
}
