//! Write a starting corpus for `tweak_dispute` into `corpus/tweak_dispute/seed-*`, in the
//! input layout its file documents: the set-up bytes of a few disputes (which side lies
//! and how, where, their words, who else is there and what it serves), with no steps
//! after them, so that every answer is honest and whole (every knob reads 0 past the end).
//!
//! Run from this directory: `cargo +nightly run --example seeds`.

use std::fs;
use std::path::Path;

fn write(name: &str, bytes: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join("tweak_dispute");
    fs::create_dir_all(&dir).expect("create the corpus directory");
    fs::write(dir.join(format!("seed-{name}")), bytes).expect("write a seed");
}

/// The set-up bytes: flags, gateway order, side a's lies (kind, height, second kind,
/// second height), side b's (its kind shifted by one: 0 leaves a tweak out), the words,
/// what each gateway lacks.
struct Setup {
    flags: u8,
    perm: u8,
    a: [u8; 4],
    b: [u8; 4],
    words: u8,
    lacks: u8,
}

impl Setup {
    fn bytes(&self) -> Vec<u8> {
        let mut v = vec![self.flags, self.perm];
        v.extend_from_slice(&self.a);
        v.extend_from_slice(&self.b);
        v.extend_from_slice(&[self.words, self.lacks]);
        v
    }
}

const BASE: Setup = Setup {
    flags: 0,
    perm: 0,
    a: [0; 4],
    b: [0; 4],
    words: 0,
    lacks: 0,
};

fn main() {
    // Side b leaves a tweak of the paying block (1,502) out; side a is honest.
    write("honest", &[]);
    // Side a adds a tweak there too: both wrong.
    write(
        "both-lie",
        &Setup {
            a: [3, 0, 0, 0],
            ..BASE
        }
        .bytes(),
    );
    // Side b adds 300 tweaks to the paying block and lies again higher up.
    write(
        "many-and-a-second-lie",
        &Setup {
            b: [3, 0, 2, 4],
            ..BASE
        }
        .bytes(),
    );
    // From genesis, split at 600 (the paying block's own height): b's lie is in the empty
    // block at 0, the span's first.
    write(
        "genesis-empty-block",
        &Setup {
            flags: 1,
            b: [0, 1, 0, 0],
            ..BASE
        }
        .bytes(),
    );
    // A lie at a height without a real block, `block_hash` without one there.
    write(
        "no-block-there",
        &Setup {
            flags: 2,
            b: [0, 2, 0, 0],
            ..BASE
        }
        .bytes(),
    );
    // Side b's word is the honest header, its span its lie: it broke its word.
    write(
        "broken-word",
        &Setup {
            words: 1 << 2,
            ..BASE
        }
        .bytes(),
    );
    // Two other gateways, the sides serving no blocks, listed last, dropped on a fault.
    write(
        "others-serve-the-block",
        &Setup {
            flags: 4 | (3 << 3) | (2 << 5),
            perm: 5,
            lacks: 0b0101,
            ..BASE
        }
        .bytes(),
    );
}
