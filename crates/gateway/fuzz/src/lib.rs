//! Shared pieces of the lightwire-gateway fuzz targets: the cursor that reads structure out
//! of fuzz input (re-exported from lightwire-fuzz-support), and reference decoders for the P2P envelope and the payloads the gateway
//! reads, written here from the Bitcoin P2P layout (not from `p2p.rs`), with the checksum
//! computed apart with sha2.
//!
//! The references follow `p2p.rs` where it is lenient, and say so: a CompactSize need not
//! be minimal, bytes after the command's first NUL are not checked (Bitcoin Core refuses
//! both), and bit 31 of an inventory type is ignored. The upstream node is the operator's
//! own, and none of these lets a message through that should not be.
#![forbid(unsafe_code)]

use core::ops::Range;

use lightwire_chain::{HEADER_LEN, Header, Network};
use lightwire_gateway::p2p::{MAX_HEADERS, MAX_PAYLOAD, MESSAGE_HEADER_LEN, P2pError};
use sha2::{Digest, Sha256};

/// The input reader shared by every fuzz project (`crates/fuzz-support`), re-exported so
/// that the targets take everything from this crate.
pub use lightwire_fuzz_support::Cursor;

/// Every network, by index.
pub const NETWORKS: [Network; 5] = [
    Network::Mainnet,
    Network::Testnet3,
    Network::Testnet4,
    Network::Signet,
    Network::Regtest,
];

/// The message-start bytes (Bitcoin Core's `pchMessageStart`, chainparams.cpp).
pub fn ref_magic(network: Network) -> [u8; 4] {
    match network {
        Network::Mainnet => [0xf9, 0xbe, 0xb4, 0xd9],
        Network::Testnet3 => [0x0b, 0x11, 0x09, 0x07],
        Network::Testnet4 => [0x1c, 0x16, 0x3f, 0x28],
        Network::Signet => [0x0a, 0x03, 0xcf, 0x40],
        Network::Regtest => [0xfa, 0xbf, 0xb5, 0xda],
    }
}

/// The first 4 bytes of SHA-256(SHA-256(payload)).
pub fn ref_checksum(payload: &[u8]) -> [u8; 4] {
    let h = Sha256::digest(Sha256::digest(payload));
    [h[0], h[1], h[2], h[3]]
}

/// A message found by [`ref_decode`], as offsets into the buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefFrame {
    /// The command, up to its first NUL (all 12 bytes if none).
    pub command: Range<usize>,
    /// The payload.
    pub payload: Range<usize>,
    /// The message's whole length.
    pub len: usize,
}

/// The message at the start of `buf`: magic (4), command (12, NUL-padded), payload length
/// (u32 LE), checksum (4), payload. `Ok(None)` until the header and then the whole payload
/// have arrived; the magic is judged as soon as the header has, then the length limit, and
/// the checksum once the payload is there.
pub fn ref_decode(buf: &[u8], magic: [u8; 4]) -> Result<Option<RefFrame>, P2pError> {
    if buf.len() < MESSAGE_HEADER_LEN {
        return Ok(None);
    }
    let got_magic: [u8; 4] = buf[..4].try_into().expect("4 bytes");
    if got_magic != magic {
        return Err(P2pError::BadMagic(got_magic));
    }
    let len = u32::from_le_bytes(buf[16..20].try_into().expect("4 bytes")) as usize;
    if len > MAX_PAYLOAD {
        return Err(P2pError::TooLarge(len));
    }
    if buf.len() < MESSAGE_HEADER_LEN + len {
        return Ok(None);
    }
    let payload = MESSAGE_HEADER_LEN..MESSAGE_HEADER_LEN + len;
    if ref_checksum(&buf[payload.clone()]) != buf[20..24] {
        return Err(P2pError::BadChecksum);
    }
    let command_len = buf[4..16].iter().position(|&b| b == 0).unwrap_or(12);
    Ok(Some(RefFrame {
        command: 4..4 + command_len,
        payload,
        len: MESSAGE_HEADER_LEN + len,
    }))
}

/// A CompactSize at `*at`: one byte below 0xfd, else 0xfd/0xfe/0xff and a little-endian
/// u16/u32/u64, which must be the minimal encoding (`NonCanonical` otherwise, as in
/// `p2p.rs` and Bitcoin Core).
pub fn ref_compact(b: &[u8], at: &mut usize, field: &'static str) -> Result<u64, P2pError> {
    let first = *b.get(*at).ok_or(P2pError::Truncated(field))?;
    let n = match first {
        0xfd => 2,
        0xfe => 4,
        0xff => 8,
        v => {
            *at += 1;
            return Ok(u64::from(v));
        }
    };
    let bytes = b
        .get(*at + 1..*at + 1 + n)
        .ok_or(P2pError::Truncated(field))?;
    let v = bytes
        .iter()
        .rev()
        .fold(0u64, |v, &x| (v << 8) | u64::from(x));
    // Bitcoin Core refuses a longer encoding than the value needs.
    if ref_compact_encode(v).len() != 1 + n {
        return Err(P2pError::NonCanonical(field));
    }
    *at += 1 + n;
    Ok(v)
}

/// The minimal CompactSize encoding of `n`.
pub fn ref_compact_encode(n: u64) -> Vec<u8> {
    match n {
        0..=0xfc => vec![n as u8],
        0xfd..=0xffff => [&[0xfd][..], &(n as u16).to_le_bytes()].concat(),
        0x1_0000..=0xffff_ffff => [&[0xfe][..], &(n as u32).to_le_bytes()].concat(),
        _ => [&[0xff][..], &n.to_le_bytes()].concat(),
    }
}

/// A `headers` payload: a count (at most [`MAX_HEADERS`]), then per header its 80 bytes and
/// a transaction count. Returns the headers read before the first error, and the error.
pub fn ref_headers(payload: &[u8]) -> (Vec<Header>, Option<P2pError>) {
    let mut out = Vec::new();
    let mut at = 0;
    let n = match ref_compact(payload, &mut at, "count") {
        Ok(n) => n,
        Err(e) => return (out, Some(e)),
    };
    if n > MAX_HEADERS as u64 {
        return (out, Some(P2pError::TooManyHeaders(n)));
    }
    for _ in 0..n {
        let Some(bytes) = payload.get(at..at + HEADER_LEN) else {
            return (out, Some(P2pError::Truncated("header")));
        };
        out.push(Header::decode(bytes.try_into().expect("80 bytes")));
        at += HEADER_LEN;
        if let Err(e) = ref_compact(payload, &mut at, "tx count") {
            return (out, Some(e));
        }
    }
    (out, None)
}

/// An `inv` payload: a count, then 36-byte entries (u32 LE type, 32-byte hash). Whether an
/// entry before the first missing one is a block: `MSG_BLOCK` = 2 with or without the
/// witness flag (bit 30). `p2p.rs` also ignores bit 31, which no inventory type uses; at
/// worst that asks for headers once more, so the reference ignores it too.
pub fn ref_inv(payload: &[u8]) -> Result<bool, P2pError> {
    let mut at = 0;
    let n = ref_compact(payload, &mut at, "count")?;
    let mut i = 0u64;
    while i < n {
        let Some(e) = payload.get(at..at + 36) else {
            return Err(P2pError::Truncated("inv"));
        };
        let ty = u32::from_le_bytes(e[..4].try_into().expect("4 bytes"));
        if ty & !(3 << 30) == 2 {
            return Ok(true);
        }
        at += 36;
        i += 1;
    }
    Ok(false)
}
