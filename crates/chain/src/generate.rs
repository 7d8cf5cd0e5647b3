//! Deterministic chains of valid headers for tests and benchmarks: easy targets (regtest),
//! each header mined by counting up its nonce, its Merkle root that of the deterministic
//! block of its height and branch ([`crate::synthetic`]).

use crate::header::{BlockHash, Header};
use crate::params::Params;
use crate::target::Target;

/// Seconds between generated headers. Regtest's genesis is from 2011: at 300 s, a
/// 925,000-header chain ends in 2019, safely before any real clock (600 s would run past
/// today and fail the two-hour future limit).
pub const GENERATED_SPACING: u32 = 300;

/// Version of generated headers: BIP9 signalling bits, above every BIP34/66/65 minimum.
pub const GENERATED_VERSION: i32 = 0x2000_0000;

/// Raise `header.nonce` until the hash meets `target`; false if every nonce failed.
pub fn mine(header: &mut Header, target: &Target) -> bool {
    for nonce in 0..=u32::MAX {
        header.nonce = nonce;
        if target.is_met_by(&header.block_hash()) {
            return true;
        }
    }
    false
}

/// The child of `prev` at `height` on branch `branch` (0 is the main chain), mined at
/// `params`' limit. Different branches differ in their Merkle roots (their coinbases).
pub fn next_header(
    params: &Params,
    prev: &Header,
    prev_hash: BlockHash,
    height: u32,
    branch: u32,
) -> Header {
    let merkle_root = crate::synthetic::merkle_root(height, branch);
    next_header_with_root(params, prev, prev_hash, merkle_root)
}

/// As [`next_header`], with `merkle_root` (of a block of a chain carrying payments:
/// [`crate::synthetic::merkle_root_in`]).
pub fn next_header_with_root(
    params: &Params,
    prev: &Header,
    prev_hash: BlockHash,
    merkle_root: [u8; 32],
) -> Header {
    let mut header = Header {
        version: GENERATED_VERSION,
        prev_blockhash: prev_hash,
        merkle_root,
        time: prev.time.saturating_add(GENERATED_SPACING),
        bits: params.pow_limit_compact(),
        nonce: 0,
    };
    // Mine against the compact form's target: the limit itself can be slightly easier than
    // what its compact encoding says, and the header must meet its own nBits. At regtest's
    // limit half of all hashes qualify, so this ends within a few tries.
    if let Ok(target) = header.bits.to_target() {
        mine(&mut header, &target);
    }
    header
}

/// `count` headers on `branch` after `parent`, which is at `parent_height`: the main chain
/// from genesis is `headers_after(params, &params.genesis, 0, n, 0)`, a competing branch
/// the same from its fork point with another `branch` number.
pub fn headers_after(
    params: &Params,
    parent: &Header,
    parent_height: u32,
    count: u32,
    branch: u32,
) -> Vec<Header> {
    let mut out = Vec::with_capacity(count as usize);
    let (mut prev, mut prev_hash) = (*parent, parent.block_hash());
    for height in parent_height + 1..=parent_height.saturating_add(count) {
        let header = next_header(params, &prev, prev_hash, height, branch);
        prev_hash = header.block_hash();
        prev = header;
        out.push(header);
    }
    out
}
