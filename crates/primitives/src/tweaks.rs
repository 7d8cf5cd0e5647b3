//! A block's silent-payment tweak list as gateways serve it and the tweak-header chain
//! commits to it (docs/PROTOCOL.md, "Silent-payment tweaks"): a CompactSize count, then
//! that many 33-byte compressed points, strictly ascending. Its hash is one SHA-256 of
//! those bytes (the tweak header is then [`FilterHeader::next`], BIP157's step).
//!
//! Written here, beside the other consensus-style encodings, because the gateway (which
//! writes lists), the protocol crate's test chain and the client (which reads them) all
//! need the one encoding; what a tweak *is* (BIP352's input rules) is lightwire-wallet's.

use alloc::vec::Vec;

use sha2::{Digest, Sha256};

use crate::{FilterHash, compact_size, read_compact_size};

/// Bytes of one tweak: a compressed secp256k1 point.
pub const TWEAK_LEN: usize = 33;

/// Why bytes are not a tweak list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TweakListError {
    /// The count is missing or not a canonical CompactSize.
    #[error("the tweak list's count is not a canonical CompactSize")]
    Count,
    /// The bytes after the count are not `count` tweaks exactly.
    #[error("the tweak list says {count} tweaks but holds {len} bytes after its count")]
    Length {
        /// The count it gave.
        count: u64,
        /// Bytes after the count.
        len: usize,
    },
    /// A tweak that does not start as a compressed point does (`02` or `03`).
    #[error("tweak {index} is not a compressed point")]
    NotCompressed {
        /// Its place in the list.
        index: usize,
    },
    /// A tweak not above the one before it: the list is sorted, each tweak once.
    #[error("tweak {index} is not above the one before it")]
    Unsorted {
        /// Its place in the list.
        index: usize,
    },
}

/// A checked tweak list, borrowing its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TweakList<'a> {
    tweaks: &'a [u8],
}

impl<'a> TweakList<'a> {
    /// Reads and checks a list: a canonical count, exactly that many tweaks, each starting
    /// `02` or `03`, strictly ascending. (Whether each is on the curve is for whoever uses
    /// it: that costs a square root.)
    pub fn parse(bytes: &'a [u8]) -> Result<TweakList<'a>, TweakListError> {
        let (count, at) = read_compact_size(bytes).map_err(|_| TweakListError::Count)?;
        let tweaks = &bytes[at..];
        if (tweaks.len() / TWEAK_LEN) as u64 != count || tweaks.len() % TWEAK_LEN != 0 {
            return Err(TweakListError::Length {
                count,
                len: tweaks.len(),
            });
        }
        let mut before: Option<&[u8]> = None;
        for (index, t) in tweaks.chunks_exact(TWEAK_LEN).enumerate() {
            if !matches!(t[0], 2 | 3) {
                return Err(TweakListError::NotCompressed { index });
            }
            if before.is_some_and(|b| b >= t) {
                return Err(TweakListError::Unsorted { index });
            }
            before = Some(t);
        }
        Ok(TweakList { tweaks })
    }

    /// Tweaks in the list.
    pub fn len(&self) -> usize {
        self.tweaks.len() / TWEAK_LEN
    }

    /// Whether the list is empty (a block with no eligible transaction).
    pub fn is_empty(&self) -> bool {
        self.tweaks.is_empty()
    }

    /// The tweaks, ascending.
    pub fn iter(&self) -> impl Iterator<Item = &'a [u8; TWEAK_LEN]> + 'a {
        self.tweaks
            .chunks_exact(TWEAK_LEN)
            .filter_map(|t| t.try_into().ok())
    }
}

/// Appends the list of `tweaks` (sorted here; repeats kept, so that a caller's bug shows
/// as a list that does not parse) to `out`.
pub fn write_tweak_list(tweaks: &mut [[u8; TWEAK_LEN]], out: &mut Vec<u8>) {
    tweaks.sort_unstable();
    let (count, len) = compact_size(tweaks.len() as u64);
    out.reserve(len + tweaks.len() * TWEAK_LEN);
    out.extend_from_slice(&count[..len]);
    for t in tweaks.iter() {
        out.extend_from_slice(t);
    }
}

/// The hash a list puts in the tweak-header chain: one SHA-256 of its bytes.
pub fn tweak_list_hash(list: &[u8]) -> FilterHash {
    FilterHash(Sha256::digest(list).into())
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn tweak(first: u8, fill: u8) -> [u8; TWEAK_LEN] {
        let mut t = [fill; TWEAK_LEN];
        t[0] = first;
        t
    }

    #[test]
    fn a_list_is_written_sorted_and_read_back() {
        let mut tweaks = [tweak(3, 1), tweak(2, 9), tweak(2, 1)];
        let mut out = Vec::new();
        write_tweak_list(&mut tweaks, &mut out);
        assert_eq!(out.len(), 1 + 3 * TWEAK_LEN);
        assert_eq!(out[0], 3);
        let list = TweakList::parse(&out).unwrap();
        let read: Vec<_> = list.iter().copied().collect();
        assert_eq!(read, [tweak(2, 1), tweak(2, 9), tweak(3, 1)]);
        assert_eq!(list.len(), 3);
        let mut empty = Vec::new();
        write_tweak_list(&mut [], &mut empty);
        assert_eq!(empty, [0]);
        assert!(TweakList::parse(&empty).unwrap().is_empty());
        // One SHA-256, not two: the empty list's hash is SHA-256 of the byte 00.
        assert_eq!(
            hex::encode(tweak_list_hash(&empty).0),
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
        );
    }

    #[test]
    fn bad_lists_name_what_is_wrong() {
        assert_eq!(TweakList::parse(&[]), Err(TweakListError::Count));
        // A count of 1 written in three bytes is not canonical.
        assert_eq!(TweakList::parse(&[0xfd, 1, 0]), Err(TweakListError::Count));
        let mut one = vec![1];
        one.extend_from_slice(&tweak(2, 5));
        assert!(TweakList::parse(&one).is_ok());
        let mut short = one.clone();
        short.pop();
        assert_eq!(
            TweakList::parse(&short),
            Err(TweakListError::Length { count: 1, len: 32 })
        );
        let mut long = one.clone();
        long.push(0);
        assert_eq!(
            TweakList::parse(&long),
            Err(TweakListError::Length { count: 1, len: 34 })
        );
        let mut x_only = one.clone();
        x_only[1] = 4;
        assert_eq!(
            TweakList::parse(&x_only),
            Err(TweakListError::NotCompressed { index: 0 })
        );
        let mut twice = vec![2];
        twice.extend_from_slice(&tweak(2, 5));
        twice.extend_from_slice(&tweak(2, 5));
        assert_eq!(
            TweakList::parse(&twice),
            Err(TweakListError::Unsorted { index: 1 })
        );
        let mut backwards = vec![2];
        backwards.extend_from_slice(&tweak(3, 5));
        backwards.extend_from_slice(&tweak(2, 5));
        assert_eq!(
            TweakList::parse(&backwards),
            Err(TweakListError::Unsorted { index: 1 })
        );
    }
}
