//! The few Bitcoin P2P messages the gateway exchanges with its upstream node, sans-IO:
//! the 24-byte message header (magic, command, length, checksum) and the payloads of
//! `version`, `verack`, `ping`/`pong`, `sendheaders`, `getheaders`, `headers` and `inv`,
//! BIP157's `getcfheaders`/`cfheaders` and `getcfilters`/`cfilter` (basic filters), and
//! `getdata` for a witness block with its `block` or `notfound` answer.

use lightwire_chain::{BlockHash, HEADER_LEN, Header, Network};
use lightwire_primitives::{CompactSizeError, FilterHash, FilterHeader, read_compact_size};
use sha2::{Digest, Sha256};

/// Bytes of a message header.
pub const MESSAGE_HEADER_LEN: usize = 24;
/// The protocol version we speak (BIP 339 level; we need headers-first and sendheaders).
pub const PROTOCOL_VERSION: i32 = 70016;
/// Largest payload accepted (Bitcoin Core's `MAX_PROTOCOL_MESSAGE_LENGTH`).
pub const MAX_PAYLOAD: usize = 4_000_000;
/// Most headers in one `headers` message.
pub const MAX_HEADERS: usize = 2000;
/// `inv` type of a block.
const MSG_BLOCK: u32 = 2;
/// `inv` type of a transaction (by txid).
const MSG_TX: u32 = 1;
/// The service bit saying a peer serves BIP37 filtering and BIP35 `mempool` (Bitcoin
/// Core disconnects a peer that sends `mempool` without it).
pub const NODE_BLOOM: u64 = 1 << 2;
/// The service bit saying a peer speaks BIP144's witness serialization.
const NODE_WITNESS: u64 = 1 << 3;
/// The flag asking for witness data with it (BIP144).
const MSG_WITNESS_FLAG: u32 = 1 << 30;

/// What went wrong with a message from the upstream node.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum P2pError {
    /// Another network's magic.
    #[error("network magic {0:02x?} is not ours")]
    BadMagic([u8; 4]),
    /// The payload's checksum does not match.
    #[error("payload checksum mismatch")]
    BadChecksum,
    /// A payload over [`MAX_PAYLOAD`].
    #[error("payload of {0} bytes is over {MAX_PAYLOAD}")]
    TooLarge(usize),
    /// A payload too short for a field.
    #[error("message truncated at {0}")]
    Truncated(&'static str),
    /// A CompactSize longer than its value needs.
    #[error("{0} is not minimally encoded")]
    NonCanonical(&'static str),
    /// A `headers` message with more than [`MAX_HEADERS`].
    #[error("headers message with {0} headers")]
    TooManyHeaders(u64),
    /// A `cfheaders` with more than [`MAX_CFHEADERS`], or a filter type other than basic.
    #[error("cfheaders or cfilter breaks BIP157 ({0})")]
    BadFilterMessage(&'static str),
}

/// Most filter hashes in one `cfheaders` (BIP157).
pub const MAX_CFHEADERS: u32 = 2000;
/// Most filters one `getcfilters` may ask for (BIP157).
pub const MAX_GETCFILTERS: u32 = 1000;
/// BIP158's basic filter type.
const BASIC: u8 = 0;

/// The `getcfheaders` and `getcfilters` payload: basic filters from `start_height` to the
/// block `stop`.
pub fn write_filter_request(out: &mut Vec<u8>, start_height: u32, stop: &BlockHash) {
    out.push(BASIC);
    out.extend_from_slice(&start_height.to_le_bytes());
    out.extend_from_slice(stop.as_bytes());
}

/// A `cfheaders` payload: the stop block, the filter header before the first, and the
/// filter hashes (appended to `hashes`).
pub fn read_cfheaders(
    payload: &[u8],
    hashes: &mut Vec<FilterHash>,
) -> Result<(BlockHash, FilterHeader), P2pError> {
    if payload.first() != Some(&BASIC) {
        return Err(P2pError::BadFilterMessage("not the basic filter type"));
    }
    let stop = payload.get(1..33).ok_or(P2pError::Truncated("stop hash"))?;
    let prev = payload
        .get(33..65)
        .ok_or(P2pError::Truncated("previous header"))?;
    let mut at = 65;
    let n = read_compact(payload, &mut at, "count")?;
    if n > u64::from(MAX_CFHEADERS) {
        return Err(P2pError::BadFilterMessage("more than 2,000 filter hashes"));
    }
    let body = payload
        .get(at..at + n as usize * 32)
        .ok_or(P2pError::Truncated("filter hashes"))?;
    hashes.extend(
        body.chunks_exact(32)
            .filter_map(|c| <[u8; 32]>::try_from(c).ok().map(FilterHash)),
    );
    let mut stop_hash = [0u8; 32];
    stop_hash.copy_from_slice(stop);
    let mut previous = [0u8; 32];
    previous.copy_from_slice(prev);
    Ok((BlockHash(stop_hash), FilterHeader(previous)))
}

/// A `cfilter` payload: the block and its filter (borrowed).
pub fn read_cfilter(payload: &[u8]) -> Result<(BlockHash, &[u8]), P2pError> {
    if payload.first() != Some(&BASIC) {
        return Err(P2pError::BadFilterMessage("not the basic filter type"));
    }
    let block = payload
        .get(1..33)
        .ok_or(P2pError::Truncated("block hash"))?;
    let mut at = 33;
    let n = read_compact(payload, &mut at, "filter length")?;
    // The length is the node's: added to the offset without overflowing.
    let filter = usize::try_from(n)
        .ok()
        .and_then(|n| payload.get(at..at.checked_add(n)?))
        .ok_or(P2pError::Truncated("filter"))?;
    let mut hash = [0u8; 32];
    hash.copy_from_slice(block);
    Ok((BlockHash(hash), filter))
}

/// The message-start bytes of `network`.
pub fn magic(network: Network) -> [u8; 4] {
    match network {
        Network::Mainnet => [0xf9, 0xbe, 0xb4, 0xd9],
        Network::Testnet3 => [0x0b, 0x11, 0x09, 0x07],
        Network::Testnet4 => [0x1c, 0x16, 0x3f, 0x28],
        Network::Signet => [0x0a, 0x03, 0xcf, 0x40],
        Network::Regtest => [0xfa, 0xbf, 0xb5, 0xda],
    }
}

fn checksum(payload: &[u8]) -> [u8; 4] {
    let once = Sha256::digest(payload);
    let twice = Sha256::digest(once);
    [twice[0], twice[1], twice[2], twice[3]]
}

/// A message read from the stream.
#[derive(Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The command, without its zero padding.
    pub command: &'a [u8],
    /// The payload.
    pub payload: &'a [u8],
}

/// Decode the message at the start of `buf`: `Ok(None)` if it is not all there yet,
/// else the message and its length.
pub fn decode(buf: &[u8], magic: [u8; 4]) -> Result<Option<(Frame<'_>, usize)>, P2pError> {
    if buf.len() < MESSAGE_HEADER_LEN {
        return Ok(None);
    }
    if buf[..4] != magic {
        return Err(P2pError::BadMagic([buf[0], buf[1], buf[2], buf[3]]));
    }
    let command = &buf[4..16];
    let end = command.iter().position(|&b| b == 0).unwrap_or(12);
    let len = u32::from_le_bytes([buf[16], buf[17], buf[18], buf[19]]) as usize;
    if len > MAX_PAYLOAD {
        return Err(P2pError::TooLarge(len));
    }
    let Some(payload) = buf.get(MESSAGE_HEADER_LEN..MESSAGE_HEADER_LEN + len) else {
        return Ok(None);
    };
    if checksum(payload) != buf[20..24] {
        return Err(P2pError::BadChecksum);
    }
    Ok(Some((
        Frame {
            command: &command[..end],
            payload,
        },
        MESSAGE_HEADER_LEN + len,
    )))
}

/// Append a message with `command` whose payload `write` appends.
pub fn encode(out: &mut Vec<u8>, magic: [u8; 4], command: &str, write: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&magic);
    let mut cmd = [0u8; 12];
    let n = command.len().min(12);
    cmd[..n].copy_from_slice(&command.as_bytes()[..n]);
    out.extend_from_slice(&cmd);
    out.extend_from_slice(&[0; 8]);
    let body = out.len();
    write(out);
    let len = (out.len() - body) as u32;
    let sum = checksum(&out[body..]);
    out[start + 16..start + 20].copy_from_slice(&len.to_le_bytes());
    out[start + 20..start + 24].copy_from_slice(&sum);
}

/// Append a CompactSize integer: the one writer of the consensus encoding
/// (`lightwire-primitives`), under the name this codec's readers and tests use.
pub use lightwire_primitives::write_compact_size as write_compact;

/// Read a CompactSize integer at `*at` (the consensus encoding's one reader), naming
/// `field` when the payload ends inside it or encodes it longer than it needs (Bitcoin
/// Core refuses such a message).
pub fn read_compact(b: &[u8], at: &mut usize, field: &'static str) -> Result<u64, P2pError> {
    let rest = b.get(*at..).ok_or(P2pError::Truncated(field))?;
    let (n, len) = read_compact_size(rest).map_err(|e| match e {
        CompactSizeError::Truncated => P2pError::Truncated(field),
        CompactSizeError::NonCanonical { .. } => P2pError::NonCanonical(field),
    })?;
    *at += len;
    Ok(n)
}

/// The `version` payload: no services, no address, a nonce, our start height, no relay.
/// With `relay`, the node announces transactions to us (BIP37's `fRelay`); without, it
/// sends none.
pub fn write_version(out: &mut Vec<u8>, now: u64, nonce: u64, start_height: u32, relay: bool) {
    out.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    // Services: NODE_WITNESS only (we serve nothing). It says we speak BIP144's
    // serialization: a node like btcd decodes a peer's `tx` with witness data only from a
    // peer that says so, and the transactions clients relay through us carry it.
    out.extend_from_slice(&NODE_WITNESS.to_le_bytes());
    out.extend_from_slice(&(now as i64).to_le_bytes());
    for _ in 0..2 {
        // addr_recv, addr_from: services, IPv6-mapped address (unspecified), port.
        out.extend_from_slice(&0u64.to_le_bytes());
        out.extend_from_slice(&[0; 10]);
        out.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
        out.extend_from_slice(&0u16.to_be_bytes());
    }
    out.extend_from_slice(&nonce.to_le_bytes());
    let agent = b"/lightwire-gateway:0.1.0/";
    write_compact(out, agent.len() as u64);
    out.extend_from_slice(agent);
    out.extend_from_slice(&(start_height as i32).to_le_bytes());
    out.push(u8::from(relay));
}

/// What a node says of itself in its `version`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Version {
    /// Its service bits.
    pub services: u64,
    /// Its best height when it connected.
    pub start_height: u32,
    /// Whether it wants transactions announced and relayed to it (BIP37's relay flag,
    /// true when absent): Bitcoin Core with `-blocksonly` says false and ignores a
    /// peer's `tx`.
    pub relay: bool,
}

impl Version {
    /// Whether it keeps only the last [`NODE_NETWORK_LIMITED_MIN_BLOCKS`] blocks (a pruned
    /// node: NODE_NETWORK_LIMITED without NODE_NETWORK, BIP159).
    pub fn is_pruned(&self) -> bool {
        self.services & NODE_NETWORK == 0 && self.services & NODE_NETWORK_LIMITED != 0
    }
}

/// NODE_NETWORK: the node serves every block.
pub const NODE_NETWORK: u64 = 1;

/// NODE_NETWORK_LIMITED (BIP159): the node serves the last
/// [`NODE_NETWORK_LIMITED_MIN_BLOCKS`] blocks.
pub const NODE_NETWORK_LIMITED: u64 = 1 << 10;

/// How deep a pruned node serves blocks (BIP159; Bitcoin Core disconnects a peer asking
/// for one more than this and two below its tip, `ProcessGetBlockData`).
pub const NODE_NETWORK_LIMITED_MIN_BLOCKS: u32 = 288;

/// NODE_COMPACT_FILTERS (BIP157): the node serves `getcfilters` and `getcfheaders`.
pub const NODE_COMPACT_FILTERS: u64 = 1 << 6;

/// The services and start height of a `version` payload.
pub fn read_version(payload: &[u8]) -> Result<Version, P2pError> {
    let truncated = P2pError::Truncated("version");
    let services = payload.get(4..12).ok_or(truncated)?;
    // version, services, timestamp, two addresses (26 bytes each), nonce.
    let mut at = 4 + 8 + 8 + 26 + 26 + 8;
    let agent = read_compact(payload, &mut at, "user agent")?;
    // The agent's length is the node's: every offset after it is added without
    // overflowing.
    let height = usize::try_from(agent)
        .ok()
        .and_then(|n| at.checked_add(n))
        .and_then(|at| payload.get(at..at.checked_add(4)?))
        .ok_or(truncated)?;
    // The relay flag follows the start height (BIP37); a `version` without it relays.
    let relay = usize::try_from(agent)
        .ok()
        .and_then(|n| at.checked_add(n)?.checked_add(4))
        .and_then(|at| payload.get(at))
        .is_none_or(|flag| *flag != 0);
    Ok(Version {
        services: u64::from_le_bytes(services.try_into().unwrap_or_default()),
        start_height: u32::try_from(i32::from_le_bytes(height.try_into().unwrap_or_default()))
            .unwrap_or(0),
        relay,
    })
}

/// The user agent of a `version` payload (BIP14), for the log and `/metrics`: at most 256
/// characters (Bitcoin Core's `MAX_SUBVERSION_LENGTH`), anything but letters, digits and
/// `/.:-_() ` shown as `_`; `None` when the payload is too short to hold it.
pub fn read_user_agent(payload: &[u8]) -> Option<String> {
    let mut at = 4 + 8 + 8 + 26 + 26 + 8;
    let n = usize::try_from(read_compact(payload, &mut at, "user agent").ok()?).ok()?;
    let bytes = payload.get(at..at.checked_add(n)?)?;
    Some(
        bytes
            .iter()
            .take(256)
            .map(|&b| match b {
                b'a'..=b'z'
                | b'A'..=b'Z'
                | b'0'..=b'9'
                | b'/'
                | b'.'
                | b':'
                | b'-'
                | b'_'
                | b'('
                | b')'
                | b' ' => b as char,
                _ => '_',
            })
            .collect(),
    )
}

/// A `feefilter`'s rate (BIP133), sat/kvB.
pub fn read_feefilter(payload: &[u8]) -> Result<u64, P2pError> {
    let rate = payload.get(..8).ok_or(P2pError::Truncated("feefilter"))?;
    Ok(u64::from_le_bytes(rate.try_into().unwrap_or_default()))
}

/// The `getheaders` payload.
pub fn write_getheaders(out: &mut Vec<u8>, locator: &[BlockHash], stop: &BlockHash) {
    out.extend_from_slice(&(PROTOCOL_VERSION as u32).to_le_bytes());
    write_compact(out, locator.len() as u64);
    for h in locator {
        out.extend_from_slice(h.as_bytes());
    }
    out.extend_from_slice(stop.as_bytes());
}

/// The headers of a `headers` payload (each followed by a transaction count, always 0).
pub fn read_headers(payload: &[u8], out: &mut Vec<Header>) -> Result<(), P2pError> {
    let mut at = 0;
    let n = read_compact(payload, &mut at, "count")?;
    if n > MAX_HEADERS as u64 {
        return Err(P2pError::TooManyHeaders(n));
    }
    for _ in 0..n {
        let bytes = payload
            .get(at..at + HEADER_LEN)
            .ok_or(P2pError::Truncated("header"))?;
        out.extend(Header::from_slice(bytes));
        at += HEADER_LEN;
        read_compact(payload, &mut at, "tx count")?;
    }
    Ok(())
}

/// Whether an `inv` payload announces a block.
pub fn inv_has_block(payload: &[u8]) -> Result<bool, P2pError> {
    let mut any = false;
    inv_blocks(payload, |_| any = true)?;
    Ok(any)
}

/// Call `f` with the type (without the witness flag) and hash of every entry of an `inv`
/// or `notfound` payload.
fn inv_entries(payload: &[u8], mut f: impl FnMut(u32, [u8; 32])) -> Result<(), P2pError> {
    let mut at = 0;
    let n = read_compact(payload, &mut at, "count")?;
    for _ in 0..n {
        let entry = payload.get(at..at + 36).ok_or(P2pError::Truncated("inv"))?;
        at += 36;
        let ty = u32::from_le_bytes([entry[0], entry[1], entry[2], entry[3]]);
        let mut hash = [0u8; 32];
        hash.copy_from_slice(&entry[4..]);
        f(ty & 0x3fff_ffff, hash);
    }
    Ok(())
}

/// Call `f` with the hash of every block in an `inv` or `notfound` payload (either
/// type: `MSG_BLOCK`, or `MSG_WITNESS_BLOCK` = 0x40000002).
pub fn inv_blocks(payload: &[u8], mut f: impl FnMut(BlockHash)) -> Result<(), P2pError> {
    inv_entries(payload, |ty, hash| {
        if ty == MSG_BLOCK {
            f(BlockHash(hash));
        }
    })
}

/// Call `f` with the txid of every transaction in an `inv` payload (`MSG_TX`, or
/// `MSG_WITNESS_TX`: the same id).
pub fn inv_txs(payload: &[u8], mut f: impl FnMut([u8; 32])) -> Result<(), P2pError> {
    inv_entries(payload, |ty, txid| {
        if ty == MSG_TX {
            f(txid);
        }
    })
}

/// The `getdata` payload asking for transactions with their witness data (BIP144).
pub fn write_getdata_txs(out: &mut Vec<u8>, txids: &[[u8; 32]]) {
    write_compact(out, txids.len() as u64);
    for t in txids {
        out.extend_from_slice(&(MSG_TX | MSG_WITNESS_FLAG).to_le_bytes());
        out.extend_from_slice(t);
    }
}

/// The `getdata` payload asking for one block with its witness data (BIP144).
pub fn write_getdata_block(out: &mut Vec<u8>, hash: &BlockHash) {
    write_compact(out, 1);
    out.extend_from_slice(&(MSG_BLOCK | MSG_WITNESS_FLAG).to_le_bytes());
    out.extend_from_slice(hash.as_bytes());
}

#[cfg(test)]
mod tests {
    use lightwire_chain::generate::headers_after;
    use lightwire_chain::{MAINNET, REGTEST};

    use super::*;

    /// A node's user agent is shown as it says it, but for what could break a log line or
    /// a `/metrics` label (a quote, a brace, a newline), and at most 256 characters.
    #[test]
    fn a_user_agent_is_read_and_made_safe_to_show() {
        let mut v = Vec::new();
        write_version(&mut v, 0, 1, 5, true);
        assert_eq!(
            read_user_agent(&v).as_deref(),
            Some("/lightwire-gateway:0.1.0/")
        );
        let at = 4 + 8 + 8 + 26 + 26 + 8;
        let mut odd = v[..at].to_vec();
        let agent = b"/Satoshi:29.1.0/\"}\n{x=\"1\"";
        odd.push(agent.len() as u8);
        odd.extend_from_slice(agent);
        odd.extend_from_slice(&v[at + 1 + 25..]);
        assert_eq!(
            read_user_agent(&odd).as_deref(),
            Some("/Satoshi:29.1.0/____x__1_")
        );
        assert_eq!(
            read_version(&odd).map(|v| (v.start_height, v.relay)),
            Ok((5, true))
        );
        let mut long = v[..at].to_vec();
        long.extend_from_slice(&[0xfd, 0x2c, 0x01]);
        long.extend(std::iter::repeat_n(b'a', 300));
        long.extend_from_slice(&v[at + 1 + 25..]);
        assert_eq!(read_user_agent(&long).map(|a| a.len()), Some(256));
        assert_eq!(read_user_agent(&v[..at + 3]), None, "cut short");
    }

    #[test]
    fn versions_say_their_services_and_height() {
        let mut out = Vec::new();
        write_version(&mut out, 1_700_000_000, 7, 812_345, false);
        let v = read_version(&out).unwrap();
        assert_eq!(v.start_height, 812_345);
        assert_eq!(v.services, NODE_WITNESS);
        assert_eq!(v.services & NODE_COMPACT_FILTERS, 0);
        for cut in [0, 11, 80, out.len() - 5] {
            assert!(read_version(&out[..cut]).is_err(), "{cut}");
        }
    }

    #[test]
    fn messages_round_trip_and_are_checked() {
        let magic = magic(Network::Regtest);
        let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 3, 0);
        let mut out = Vec::new();
        encode(&mut out, magic, "headers", |p| {
            write_compact(p, 3);
            for h in &headers {
                p.extend_from_slice(&h.encode());
                p.push(0);
            }
        });
        encode(&mut out, magic, "verack", |_| {});
        let (frame, n) = decode(&out, magic).unwrap().unwrap();
        assert_eq!(frame.command, b"headers");
        let mut got = Vec::new();
        read_headers(frame.payload, &mut got).unwrap();
        assert_eq!(got, headers);
        let (frame, m) = decode(&out[n..], magic).unwrap().unwrap();
        assert_eq!(
            (frame.command, frame.payload.len(), n + m),
            (&b"verack"[..], 0, out.len())
        );
        // Incomplete, another network, a corrupted payload.
        assert_eq!(decode(&out[..n - 1], magic), Ok(None));
        assert!(matches!(
            decode(&out, super::magic(Network::Mainnet)),
            Err(P2pError::BadMagic(_))
        ));
        let mut bad = out.clone();
        bad[30] ^= 1;
        assert_eq!(decode(&bad, magic), Err(P2pError::BadChecksum));
        let _ = MAINNET;
    }

    #[test]
    fn filter_messages_round_trip_and_are_checked() {
        let stop = BlockHash([7; 32]);
        let mut req = Vec::new();
        write_filter_request(&mut req, 1000, &stop);
        assert_eq!(req.len(), 37);
        assert_eq!((req[0], &req[1..5]), (0, &1000u32.to_le_bytes()[..]));
        let mut payload = vec![0u8];
        payload.extend_from_slice(&[7; 32]);
        payload.extend_from_slice(&[9; 32]);
        write_compact(&mut payload, 2);
        payload.extend_from_slice(&[1; 32]);
        payload.extend_from_slice(&[2; 32]);
        let mut hashes = Vec::new();
        assert_eq!(
            read_cfheaders(&payload, &mut hashes),
            Ok((stop, FilterHeader([9; 32])))
        );
        assert_eq!(hashes, [FilterHash([1; 32]), FilterHash([2; 32])]);
        assert!(read_cfheaders(&payload[..100], &mut hashes).is_err());
        payload[0] = 1;
        assert!(matches!(
            read_cfheaders(&payload, &mut hashes),
            Err(P2pError::BadFilterMessage(_))
        ));
        let mut cf = vec![0u8];
        cf.extend_from_slice(&[7; 32]);
        write_compact(&mut cf, 3);
        cf.extend_from_slice(&[1, 2, 3]);
        assert_eq!(read_cfilter(&cf), Ok((stop, &[1u8, 2, 3][..])));
        assert!(read_cfilter(&cf[..35]).is_err());
    }

    /// Lengths a node declares are added to offsets without overflowing: a `cfilter` or a
    /// `version` declaring one near the largest integer is a message cut short (an error
    /// naming the field), not a panic.
    #[test]
    fn declared_lengths_near_the_integer_limit_are_refused_without_overflow() {
        let mut cf = vec![0u8];
        cf.extend_from_slice(&[7; 32]);
        write_compact(&mut cf, u64::MAX);
        assert_eq!(read_cfilter(&cf), Err(P2pError::Truncated("filter")));
        let mut version = Vec::new();
        write_version(&mut version, 1_700_000_000, 7, 5, false);
        // The user agent's length is the CompactSize after the nonce (80 bytes in): one
        // that ends two bytes short of the largest offset, so the height after it is past it.
        let mut huge = version[..80].to_vec();
        write_compact(&mut huge, (usize::MAX - 80 - 9 - 1) as u64);
        huge.extend_from_slice(&[0; 8]);
        assert_eq!(read_version(&huge), Err(P2pError::Truncated("version")));
    }

    #[test]
    fn getdata_and_notfound_name_witness_blocks() {
        let mut p = Vec::new();
        let hash = BlockHash([5; 32]);
        write_getdata_block(&mut p, &hash);
        assert_eq!(p.len(), 37);
        assert_eq!(&p[1..5], &0x4000_0002u32.to_le_bytes());
        let mut got = Vec::new();
        inv_blocks(&p, |h| got.push(h)).unwrap();
        assert_eq!(got, [hash]);
        // A transaction in the list is not a block; a list cut short is an error.
        p[0] = 2;
        p.extend_from_slice(&1u32.to_le_bytes());
        p.extend_from_slice(&[6; 32]);
        got.clear();
        inv_blocks(&p, |h| got.push(h)).unwrap();
        assert_eq!(got, [hash]);
        assert!(inv_blocks(&p[..50], |_| {}).is_err());
    }

    #[test]
    fn compact_sizes_and_limits() {
        for n in [
            0u64,
            0xfc,
            0xfd,
            0xffff,
            0x1_0000,
            0xffff_ffff,
            0x1_0000_0000,
        ] {
            let mut out = Vec::new();
            write_compact(&mut out, n);
            let mut at = 0;
            assert_eq!(read_compact(&out, &mut at, "n"), Ok(n));
            assert_eq!(at, out.len());
        }
        // Cut short, or written longer than needed: refused, naming the field.
        assert_eq!(
            read_compact(&[0xfe, 1, 0], &mut 0, "n"),
            Err(P2pError::Truncated("n"))
        );
        assert_eq!(
            read_compact(&[0xfd], &mut 1, "n"),
            Err(P2pError::Truncated("n"))
        );
        assert_eq!(
            read_headers(&[0xfd, 1, 0], &mut Vec::new()),
            Err(P2pError::NonCanonical("count"))
        );
        let mut big = Vec::new();
        write_compact(&mut big, 2001);
        assert_eq!(
            read_headers(&big, &mut Vec::new()),
            Err(P2pError::TooManyHeaders(2001))
        );
        let mut inv = Vec::new();
        write_compact(&mut inv, 1);
        inv.extend_from_slice(&2u32.to_le_bytes());
        inv.extend_from_slice(&[0; 32]);
        assert_eq!(inv_has_block(&inv), Ok(true));
        assert_eq!(inv_has_block(&inv[..10]), Err(P2pError::Truncated("inv")));
    }
}
