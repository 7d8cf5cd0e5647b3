//! A stream of P2P messages built with `p2p`'s own encoders, optionally corrupted, read
//! back in input-chosen chunks the way the upstream session reads its socket.
//!
//! Input: `network || count || count × message || mutation count || mutations || chunk sizes`.
//! * network % 5: the magic used to encode and to decode.
//! * message: `kind` then its fields, kind % 8: 0 `version` (time u32, nonce u64, start
//!   height u32, `write_version`); 1 `verack`; 2 `ping` (8-byte nonce); 3 `headers`
//!   (first index and count into a generated regtest chain, a declared count that may
//!   exceed what follows or pass 2000, a tx count byte); 4 `inv` (entries with types from
//!   a menu); 5 `getheaders` (locator hashes from the chain, `write_getheaders`); 6 a
//!   command from a menu (including one over 12 characters, which `encode` cuts), empty
//!   payload; 7 any command bytes and any payload (length u8).
//! * mutation, kind % 6 then its fields: 0 flip a payload bit of message k, 1 flip a
//!   checksum bit of message k, 2 flip a magic bit of message k, 3 flip a command bit of
//!   message k, 4 flip any bit, 5 truncate.
//! * chunk sizes: one selector byte each; the last chunk is what remains.
//!
//! Checks: the messages the chunked reader returns, and its error, are exactly those of
//! `ref_decode` run over the whole stream (for any mutation, with the checksum computed
//! apart). Without mutations, every message comes back as built: command (cut at 12
//! bytes), payload (each compared with a payload written here from the P2P layout; the
//! `version` payload parsed back field by field), `read_headers` gives back the chain's
//! headers or the predicted error, `inv_has_block` the predicted answer. With one payload
//! or checksum mutation, the messages before the corrupted one come back and then
//! `BadChecksum`; with one magic mutation, `BadMagic` with the corrupted bytes; with one
//! command mutation, the same payloads and no error.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use lightwire_chain::{BlockHash, Header, REGTEST, generate::headers_after};
use lightwire_gateway::p2p::{self, MAX_HEADERS, P2pError, PROTOCOL_VERSION};
use lightwire_gateway_fuzz::{
    Cursor, NETWORKS, ref_compact, ref_compact_encode, ref_decode, ref_headers, ref_inv,
};

/// Headers of a regtest chain from genesis, mined once per process.
fn chain() -> &'static [Header] {
    static CHAIN: OnceLock<Vec<Header>> = OnceLock::new();
    CHAIN.get_or_init(|| headers_after(&REGTEST, &REGTEST.genesis, 0, 64, 0))
}

/// A message as built: where it is in the stream, and what must come back.
struct Built {
    start: usize,
    command: Vec<u8>,
    payload: Vec<u8>,
    /// What `read_headers` must give for the payload, if it is a `headers` message.
    headers: Option<(Vec<Header>, Option<P2pError>)>,
    /// What `inv_has_block` must give, if it is an `inv` message.
    inv: Option<Result<bool, P2pError>>,
    /// The fields of a `version` message.
    version: Option<(i64, u64, u32)>,
}

fuzz_target!(|data: &[u8]| {
    let mut input = Cursor::new(data);
    let magic = p2p::magic(NETWORKS[usize::from(input.u8()) % NETWORKS.len()]);
    let mut stream = Vec::new();
    let mut built = Vec::new();
    for _ in 0..input.u8() % 10 {
        built.push(message(&mut input, &mut stream, magic));
    }
    let clean = stream.clone();

    let count = input.u8() % 4;
    let mut only = None;
    for _ in 0..count {
        let kind = input.u8() % 6;
        let k = usize::from(input.u8());
        let pos = input.u32() as usize;
        let bit = 1u8 << (input.u8() % 8);
        only = Some((kind, k));
        if stream.is_empty() {
            continue;
        }
        let target = (!built.is_empty()).then(|| &built[k % built.len()]);
        let at = match (kind, target) {
            (0, Some(m)) if !m.payload.is_empty() => Some(m.start + 24 + pos % m.payload.len()),
            (1, Some(m)) => Some(m.start + 20 + pos % 4),
            (2, Some(m)) => Some(m.start + pos % 4),
            (3, Some(m)) => Some(m.start + 4 + pos % 12),
            (4, _) => Some(pos % stream.len()),
            (5, _) => {
                stream.truncate(pos % stream.len());
                None
            }
            _ => None,
        };
        if let Some(at) = at.filter(|&a| a < stream.len()) {
            stream[at] ^= bit;
        }
    }
    let only = if count == 1 { only } else { None };

    // The reference over the whole stream.
    let mut want = Vec::new();
    let mut at = 0;
    let want_error = loop {
        match ref_decode(&stream[at..], magic) {
            Ok(Some(f)) => {
                let (c, p) = (
                    f.command.start + at..f.command.end + at,
                    f.payload.start + at..f.payload.end + at,
                );
                want.push((stream[c].to_vec(), stream[p].to_vec()));
                at += f.len;
            }
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };

    // The chunked reader, as the upstream session: append what arrives, decode what is
    // buffered until it wants more.
    let mut got = Vec::new();
    let mut got_error = None;
    let mut buf: Vec<u8> = Vec::new();
    let mut start = 0;
    let mut offset = 0;
    'read: while offset < stream.len() || !input.is_empty() {
        let left = stream.len() - offset;
        let size = if input.is_empty() {
            left
        } else {
            match input.u8() % 5 {
                0 => 1,
                1 => 1 + usize::from(input.u8() % 30),
                2 => usize::from(input.u16()),
                3 => 0,
                _ => left,
            }
        }
        .min(left);
        buf.extend_from_slice(&stream[offset..offset + size]);
        offset += size;
        loop {
            match p2p::decode(&buf[start..], magic) {
                Ok(Some((frame, n))) => {
                    got.push((frame.command.to_vec(), frame.payload.to_vec()));
                    start += n;
                }
                Ok(None) => break,
                Err(e) => {
                    got_error = Some(e);
                    break 'read;
                }
            }
        }
    }
    assert_eq!(got_error, want_error, "error after {} messages", got.len());
    assert_eq!(got, want, "messages");
    if got_error.is_none() {
        assert_eq!(start, at, "bytes consumed");
    }

    if stream == clean {
        assert_eq!(want_error, None);
        assert_eq!(got.len(), built.len(), "every message comes back");
        for (m, (command, payload)) in built.iter().zip(&got) {
            assert_eq!(command, &m.command, "command");
            assert_eq!(
                payload,
                &m.payload,
                "payload of {:?}",
                String::from_utf8_lossy(command)
            );
            if let Some((headers, error)) = &m.headers {
                let mut out = Vec::new();
                assert_eq!(
                    p2p::read_headers(payload, &mut out),
                    error.map_or(Ok(()), Err)
                );
                assert_eq!(&out, headers);
            }
            if let Some(has_block) = m.inv {
                assert_eq!(p2p::inv_has_block(payload), has_block);
            }
            if let Some(fields) = m.version {
                assert_eq!(parse_version(payload), Some(fields), "version fields");
            }
        }
    }
    match only {
        Some((kind @ (0 | 1 | 2), k)) if !built.is_empty() && stream != clean => {
            let k = k % built.len();
            let want_error = if kind == 2 {
                let s = built[k].start;
                P2pError::BadMagic(stream[s..s + 4].try_into().expect("4 bytes"))
            } else {
                P2pError::BadChecksum
            };
            assert_eq!(got.len(), k, "messages before the corrupted one");
            assert_eq!(got_error, Some(want_error), "corrupted message {k}");
        }
        Some((3, _)) if !built.is_empty() => {
            assert_eq!(got_error, None);
            let payloads: Vec<_> = got.iter().map(|(_, p)| p).collect();
            let built: Vec<_> = built.iter().map(|m| &m.payload).collect();
            assert_eq!(payloads, built, "a command is not covered by the checksum");
        }
        _ => {}
    }
});

/// Append one message described by the input to `out`.
fn message(input: &mut Cursor, out: &mut Vec<u8>, magic: [u8; 4]) -> Built {
    let start = out.len();
    let mut b = Built {
        start,
        command: Vec::new(),
        payload: Vec::new(),
        headers: None,
        inv: None,
        version: None,
    };
    let (command, payload): (String, Vec<u8>) = match input.u8() % 8 {
        0 => {
            let (now, nonce, height) = (u64::from(input.u32()), input.u64(), input.u32());
            p2p::encode(out, magic, "version", |p| {
                p2p::write_version(p, now, nonce, height, false)
            });
            b.version = Some((now as i64, nonce, height));
            ("version".into(), out[start + 24..].to_vec())
        }
        1 => ("verack".into(), Vec::new()),
        2 => ("ping".into(), input.bytes(8).to_vec()),
        3 => {
            let chain = chain();
            let first = usize::from(input.u8()) % chain.len();
            let n = usize::from(input.u8() % 12).min(chain.len() - first);
            let headers = &chain[first..first + n];
            let declared = match input.u8() % 4 {
                0 => n as u64 + 1,
                1 => MAX_HEADERS as u64 + 1,
                _ => n as u64,
            };
            let tx_count = input.u8() % 2;
            let mut p = ref_compact_encode(declared);
            for h in headers {
                p.extend_from_slice(&h.encode());
                p.push(tx_count);
            }
            let error = if declared > MAX_HEADERS as u64 {
                Some(P2pError::TooManyHeaders(declared))
            } else if declared > n as u64 {
                Some(P2pError::Truncated("header"))
            } else {
                None
            };
            let read = if declared > MAX_HEADERS as u64 {
                Vec::new()
            } else {
                headers.to_vec()
            };
            assert_eq!(ref_headers(&p), (read.clone(), error), "reference headers");
            b.headers = Some((read, error));
            ("headers".into(), p)
        }
        4 => {
            let n = input.u8() % 8;
            let mut p = ref_compact_encode(u64::from(n));
            let mut has_block = false;
            for i in 0..n {
                let ty: u32 = match input.u8() % 6 {
                    0 => 1,
                    1 => 2,
                    2 => 0x4000_0002,
                    3 => 0x4000_0001,
                    4 => 3,
                    _ => input.u32(),
                };
                has_block |= ty & 0x3fff_ffff == 2;
                p.extend_from_slice(&ty.to_le_bytes());
                p.extend_from_slice(&[i; 32]);
            }
            b.inv = Some(Ok(has_block));
            assert_eq!(ref_inv(&p), Ok(has_block), "reference inv");
            ("inv".into(), p)
        }
        5 => {
            let chain = chain();
            let n = usize::from(input.u8() % 10);
            let locator: Vec<BlockHash> = (0..n)
                .map(|i| chain[(i * 7) % chain.len()].block_hash())
                .collect();
            let stop = BlockHash([input.u8(); 32]);
            p2p::encode(out, magic, "getheaders", |p| {
                p2p::write_getheaders(p, &locator, &stop)
            });
            let mut p = (PROTOCOL_VERSION as u32).to_le_bytes().to_vec();
            p.extend(ref_compact_encode(n as u64));
            for h in &locator {
                p.extend_from_slice(&h.0);
            }
            p.extend_from_slice(&stop.0);
            ("getheaders".into(), p)
        }
        6 => {
            let c = [
                "sendheaders",
                "wtxidrelay",
                "sendaddrv2",
                "feefilter",
                "sendcmpct",
                "lightwire-long-command",
            ][usize::from(input.u8() % 6)];
            (c.into(), Vec::new())
        }
        _ => {
            let len = usize::from(input.u8() % 13);
            let c: String = input
                .bytes(len)
                .iter()
                .map(|&x| char::from(x % 128))
                .collect();
            let n = usize::from(input.u8());
            (c, input.bytes(n).to_vec())
        }
    };
    if out.len() == start {
        p2p::encode(out, magic, &command, |p| p.extend_from_slice(&payload));
    }
    // What decoding must give back: at most 12 bytes, up to the first NUL.
    let bytes = command.as_bytes();
    let bytes = &bytes[..bytes.len().min(12)];
    let end = bytes.iter().position(|&x| x == 0).unwrap_or(bytes.len());
    b.command = bytes[..end].to_vec();
    assert_eq!(
        &out[start + 24..],
        &payload[..],
        "payload written for {command:?}"
    );
    b.payload = payload;
    b
}

/// The fields of a `version` payload the gateway sets: (timestamp, nonce, start height),
/// if the layout is the protocol's (version 70016, no services, two 26-byte addresses, a
/// user agent, no relay).
fn parse_version(p: &[u8]) -> Option<(i64, u64, u32)> {
    let u = |r: core::ops::Range<usize>| {
        p.get(r)
            .map(|b| b.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x)))
    };
    if u(0..4)? != PROTOCOL_VERSION as u64 || u(4..12)? != 0 {
        return None;
    }
    let time = u(12..20)? as i64;
    for addr in [20, 46] {
        // services 0, the IPv4-mapped unspecified address, port 0.
        let mut want = [0u8; 26];
        want[18..20].copy_from_slice(&[0xff, 0xff]);
        if p.get(addr..addr + 26)? != want {
            return None;
        }
    }
    let nonce = u(72..80)?;
    let mut at = 80;
    let agent_len = ref_compact(p, &mut at, "agent").ok()? as usize;
    let agent = p.get(at..at + agent_len)?;
    if !agent.starts_with(b"/lightwire-gateway:") || !agent.ends_with(b"/") {
        return None;
    }
    at += agent_len;
    let height = u(at..at + 4)? as u32;
    if p.get(at + 4) != Some(&0) || p.len() != at + 5 {
        return None;
    }
    Some((time, nonce, height))
}
