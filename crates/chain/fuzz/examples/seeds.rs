//! Write a starting corpus for the `connect` target into `corpus/connect/seed-*`, in the
//! input layout it documents: the main chain extended, forks that stay stale then
//! overtake, a fork below a full window answered with ancestors, a refused batch.
//!
//! Run from this directory: `cargo +nightly run --example seeds`.

use std::fs;
use std::path::Path;

fn write(name: &str, bytes: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join("connect");
    fs::create_dir_all(&dir).expect("create the corpus directory");
    fs::write(dir.join(format!("seed-{name}")), bytes).expect("write a seed");
}

fn main() {
    // start (flags, u16), now selector, op count, then ops:
    // op = kind, fields, mutation count, split count [sizes].
    // 200 headers from genesis, then 100 more of the main chain in two pieces.
    write("extend", &[0, 200, 0, 0, 1, 0, 0, 0, 100, 0, 1, 40]);
    // Tip 200; a fork 20 back of 10 headers (stale), then 15 more on the kept branch
    // (overtakes: reorg), then the main chain again from 30 back (stale, then known).
    write(
        "fork-stale-then-reorg",
        &[
            0, 200, 0, 0, 3, 1, 20, 0, 1, 10, 0, 0, 2, 15, 0, 0, 0, 30, 0, 60, 0, 0,
        ],
    );
    // A full window (tip 4100); connect_branch with 2016 ancestors at depth 10, 2 known
    // headers, 50 fork headers.
    write(
        "deep-connect-branch",
        &[1, 68, 0, 0, 1, 3, 10, 0, 0, 0xe0, 0x07, 2, 1, 50, 0, 0],
    );
    // A full window; 105 main headers, the 10th with its nonce changed: refused.
    write(
        "refused-batch",
        &[1, 0, 0, 0, 1, 0, 0, 0, 105, 1, 9, 7, 0, 0, 0, 0, 0, 0],
    );
    // Ancestors that are not the best chain's, and a batch too large.
    write(
        "foreign-ancestors",
        &[
            1, 68, 0, 0, 2, 3, 10, 0, 24, 0xe0, 0x07, 0, 1, 50, 0, 0, 4, 0, 0,
        ],
    );
}
