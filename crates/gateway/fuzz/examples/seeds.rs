//! Write a starting corpus for every target into `corpus/<target>/seed-*`, in the input
//! layouts the targets document: real regtest message streams (version, verack, headers,
//! inv, ping) for `p2p_decode`, and descriptions of each message kind, clean and with
//! each kind of mutation, for `p2p_stream`.
//!
//! Run from this directory: `cargo +nightly run --example seeds`.

use std::fs;
use std::path::Path;

use lightwire_chain::{Network, REGTEST, generate::headers_after};
use lightwire_gateway::p2p;

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    fs::create_dir_all(&dir).expect("create the corpus directory");
    fs::write(dir.join(format!("seed-{name}")), bytes).expect("write a seed");
}

fn main() {
    // p2p_decode, mode 0 (stream) on regtest (network index 4).
    let magic = p2p::magic(Network::Regtest);
    let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 5, 0);
    let mut s = Vec::new();
    p2p::encode(&mut s, magic, "version", |p| {
        p2p::write_version(p, 1_700_000_000, 42, 0, false)
    });
    p2p::encode(&mut s, magic, "verack", |_| {});
    let mut payload = Vec::new();
    p2p::write_compact(&mut payload, headers.len() as u64);
    for h in &headers {
        payload.extend_from_slice(&h.encode());
        payload.push(0);
    }
    p2p::encode(&mut s, magic, "headers", |p| p.extend_from_slice(&payload));
    p2p::encode(&mut s, magic, "inv", |p| {
        p2p::write_compact(p, 2);
        p.extend_from_slice(&1u32.to_le_bytes());
        p.extend_from_slice(&[1; 32]);
        p.extend_from_slice(&2u32.to_le_bytes());
        p.extend_from_slice(&[2; 32]);
    });
    p2p::encode(&mut s, magic, "ping", |p| p.extend_from_slice(&[7; 8]));
    write("p2p_decode", "stream", &[&[4u8][..], &s].concat());
    let mut bad = s.clone();
    bad[30] ^= 1;
    write(
        "p2p_decode",
        "stream-bad-checksum",
        &[&[4u8][..], &bad].concat(),
    );
    // The payloads alone: mode 1 (headers), mode 2 (inv), mode 3 (compact).
    write(
        "p2p_decode",
        "headers-payload",
        &[&[4u8 | 8][..], &payload].concat(),
    );
    write("p2p_decode", "inv-payload", &[4 | 16, 1, 2, 0, 0, 0x40]);
    write("p2p_decode", "compact", &[4 | 24, 0xfd, 0x00, 0x01]);

    // p2p_stream: network, count, messages (kind then fields), mutations, chunk sizes.
    let clean: Vec<u8> = [
        &[4u8, 7][..],
        &[0, 1, 2, 3, 4, 42, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0], // version
        &[1],                                                  // verack
        &[3, 0, 5, 2, 0],                                      // headers 0..5
        &[4, 2, 1, 1],                                         // inv: tx, block
        &[5, 3, 0],                                            // getheaders
        &[6, 0],                                               // sendheaders
        &[2, 1, 2, 3, 4, 5, 6, 7, 8],                          // ping
    ]
    .concat();
    write(
        "p2p_stream",
        "clean",
        &[&clean[..], &[0, 1, 2, 0x10, 0x00]].concat(),
    );
    for (kind, name) in [
        (0u8, "payload"),
        (1, "checksum"),
        (2, "magic"),
        (3, "command"),
    ] {
        let m = [1u8, kind, 2, 5, 0, 0, 0, 3];
        write(
            "p2p_stream",
            &format!("corrupt-{name}"),
            &[&clean[..], &m[..]].concat(),
        );
    }
}
