//! The hashes scripts are made of.

use ripemd::Ripemd160;
use sha2::{Digest, Sha256};

/// HASH160: RIPEMD-160 of SHA-256 (key and script hashes of P2PKH, P2SH, P2WPKH).
pub(crate) fn hash160(data: &[u8]) -> [u8; 20] {
    Ripemd160::digest(Sha256::digest(data)).into()
}

/// BIP340's tagged hash: SHA-256(SHA-256(tag) || SHA-256(tag) || data).
pub(crate) fn tagged(tag: &str, data: &[u8]) -> [u8; 32] {
    let t = Sha256::digest(tag.as_bytes());
    Sha256::new()
        .chain_update(t)
        .chain_update(t)
        .chain_update(data)
        .finalize()
        .into()
}

/// P2PKH: `OP_DUP OP_HASH160 <20> OP_EQUALVERIFY OP_CHECKSIG`.
pub(crate) fn p2pkh(hash: &[u8; 20]) -> alloc::vec::Vec<u8> {
    let mut s = alloc::vec::Vec::with_capacity(25);
    s.extend_from_slice(&[0x76, 0xa9, 0x14]);
    s.extend_from_slice(hash);
    s.extend_from_slice(&[0x88, 0xac]);
    s
}

/// P2SH: `OP_HASH160 <20> OP_EQUAL`.
pub(crate) fn p2sh(hash: &[u8; 20]) -> alloc::vec::Vec<u8> {
    let mut s = alloc::vec::Vec::with_capacity(23);
    s.extend_from_slice(&[0xa9, 0x14]);
    s.extend_from_slice(hash);
    s.push(0x87);
    s
}

/// A witness program: `OP_n <program>`.
pub(crate) fn witness(version: u8, program: &[u8]) -> alloc::vec::Vec<u8> {
    let mut s = alloc::vec::Vec::with_capacity(2 + program.len());
    s.push(if version == 0 { 0 } else { 0x50 + version });
    s.push(program.len() as u8);
    s.extend_from_slice(program);
    s
}
