//! The upstream node's bytes, arbitrary: the P2P envelope decoder and the payload readers
//! of `lightwire_gateway::p2p`.
//!
//! Input: `selector || body`. Selector bits 0..2 (% 5): the network whose magic is
//! expected; bits 3..4, the mode:
//! * 0, stream: `p2p::decode` at the start of the body, then after each message it
//!   returns, as the upstream session does, until it wants more bytes or fails;
//! * 1: `p2p::read_headers` on the body;
//! * 2: `p2p::inv_has_block` on the body;
//! * 3: `p2p::read_compact` at offset 0 and at the offset given by the body's first byte,
//!   and `write_compact` of the body's first 8 bytes (a little-endian u64 shifted right by
//!   the low 6 bits of the 9th).
//!
//! Checks: every result is exactly the reference's (`ref_decode`, `ref_headers`, `ref_inv`,
//! `ref_compact` in `src/lib.rs`, with the checksum computed apart): the same error
//! (`BadMagic` with the bytes seen, `TooLarge` with the length, `BadChecksum`,
//! `Truncated` or `NonCanonical` with the field, `TooManyHeaders` with the count), or the
//! same message (command up to its first NUL, payload and length, both slices of the
//! input). A message
//! that decodes is `Ok(None)` when cut anywhere short of its end. For every message, its
//! payload also goes through `read_headers` and `inv_has_block` against the references;
//! `read_headers` appends exactly the headers read before an error, to what the vector
//! held. `read_compact` advances by the encoding's length. Every error's `Display` is
//! non-empty.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lightwire_chain::{Header, REGTEST};
use lightwire_gateway::p2p;
use lightwire_gateway_fuzz::{
    Cursor, NETWORKS, ref_compact, ref_compact_encode, ref_decode, ref_headers, ref_inv, ref_magic,
};

fuzz_target!(|data: &[u8]| {
    let mut input = Cursor::new(data);
    let selector = input.u8();
    let network = NETWORKS[usize::from(selector & 7) % NETWORKS.len()];
    let magic = p2p::magic(network);
    assert_eq!(magic, ref_magic(network), "magic of {network:?}");
    let body = input.rest();
    match (selector >> 3) & 3 {
        0 => stream(body, magic),
        1 => headers(body),
        2 => inv(body),
        _ => compact(body),
    }
});

fn offset(whole: &[u8], part: &[u8]) -> usize {
    let (w, p) = (whole.as_ptr() as usize, part.as_ptr() as usize);
    assert!(
        p >= w && p + part.len() <= w + whole.len(),
        "a decoded field is not a slice of the input"
    );
    p - w
}

fn stream(buf: &[u8], magic: [u8; 4]) {
    let mut at = 0;
    loop {
        let rest = &buf[at..];
        let got = p2p::decode(rest, magic);
        let want = ref_decode(rest, magic);
        match (got, want) {
            (Ok(Some((frame, n))), Ok(Some(w))) => {
                assert_eq!(n, w.len, "message length");
                let c = offset(rest, frame.command);
                assert_eq!(c..c + frame.command.len(), w.command, "command");
                let p = offset(rest, frame.payload);
                assert_eq!(p..p + frame.payload.len(), w.payload, "payload");
                for cut in [0, n / 2, 23, 24, n - 1].into_iter().filter(|&c| c < n) {
                    assert_eq!(
                        p2p::decode(&rest[..cut], magic),
                        Ok(None),
                        "{n}-byte message cut at {cut}"
                    );
                }
                headers(frame.payload);
                inv(frame.payload);
                at += n;
            }
            (Ok(None), Ok(None)) => return,
            (Err(e), Err(w)) => {
                assert_eq!(e, w);
                assert!(!e.to_string().is_empty());
                return;
            }
            (got, want) => panic!("decode at {at}: {got:?}, reference {want:?}"),
        }
    }
}

fn headers(payload: &[u8]) {
    let (want, error) = ref_headers(payload);
    // Appends to what the vector holds.
    let mut got = vec![REGTEST.genesis];
    let result = p2p::read_headers(payload, &mut got);
    assert_eq!(result, error.map_or(Ok(()), Err), "read_headers");
    assert_eq!(got[0], REGTEST.genesis);
    assert_eq!(&got[1..], &want[..], "headers read");
    if let Err(e) = result {
        assert!(!e.to_string().is_empty());
    }
    // Every header read back encodes to its 80 bytes (there is one encoding).
    for h in &want {
        assert_eq!(Header::decode(&h.encode()), *h);
    }
}

fn inv(payload: &[u8]) {
    assert_eq!(
        p2p::inv_has_block(payload),
        ref_inv(payload),
        "inv_has_block"
    );
}

fn compact(body: &[u8]) {
    for start in [0, body.first().map_or(0, |&b| usize::from(b))] {
        let (mut at, mut ref_at) = (start, start);
        let got = p2p::read_compact(body, &mut at, "n");
        assert_eq!(
            got,
            ref_compact(body, &mut ref_at, "n"),
            "read_compact at {start}"
        );
        if got.is_ok() {
            assert_eq!(at, ref_at, "advance");
        }
    }
    let mut raw = [0u8; 8];
    for (r, b) in raw.iter_mut().zip(body) {
        *r = *b;
    }
    let v = u64::from_le_bytes(raw) >> body.get(8).map_or(0, |b| b % 64);
    let mut out = vec![0xee];
    p2p::write_compact(&mut out, v);
    assert_eq!(&out[1..], &ref_compact_encode(v)[..], "write_compact({v})");
    let mut at = 1;
    assert_eq!(p2p::read_compact(&out, &mut at, "n"), Ok(v));
    assert_eq!(at, out.len());
}
