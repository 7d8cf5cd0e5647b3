//! The Golomb-coded set of BIP158 and its basic filter.
//!
//! A filter holds N items (scripts), each hashed with SipHash-2-4 keyed by the first 16
//! bytes of the block hash and mapped into `[0, N * M)` by a 64x64 -> 128-bit
//! multiplication; the sorted values are stored as Golomb-Rice coded deltas (P bits of
//! remainder, the quotient in unary), after N as a CompactSize.

use alloc::vec::Vec;
use core::hash::Hasher;

use siphasher::sip::SipHasher24;

use lightwire_primitives::{
    Block, DecodeError, FilterHash, FilterHeader, Reader, write_compact_size,
};

use crate::bits::{BitReader, BitWriter};

/// The basic filter's Golomb-Rice parameter (BIP158).
pub const BASIC_P: u32 = 19;
/// The basic filter's false-positive rate parameter: 1/M per query and item (BIP158).
pub const BASIC_M: u64 = 784_931;

/// A filter did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// It ended before its item count, or inside an item.
    #[error("the filter ends inside {what}")]
    Truncated {
        /// What was being read.
        what: &'static str,
    },
    /// Its item count is a CompactSize longer than the count needs (Bitcoin Core refuses
    /// it, so a filter has one encoding).
    #[error("the filter's item count {0} is not minimally encoded")]
    NonCanonicalCount(u64),
    /// It claims more items than its bytes can code (each takes at least P + 1 bits).
    #[error("the filter claims {n} items in {bits} bits")]
    TooManyItems {
        /// The count it claims.
        n: u64,
        /// The bits after the count.
        bits: usize,
    },
    /// An item's value leaves the range `[0, N * M)`: bad Golomb coding.
    #[error("item {index} leaves the filter's range")]
    OutOfRange {
        /// The item's index.
        index: u64,
    },
}

/// The SipHash key of a block's filter: the first 16 bytes of its hash (internal order).
pub(crate) fn key(block_hash: &[u8; 32]) -> (u64, u64) {
    let le = |b: &[u8]| b.iter().rev().fold(0u64, |v, x| (v << 8) | u64::from(*x));
    (le(&block_hash[..8]), le(&block_hash[8..16]))
}

pub(crate) fn siphash(k: (u64, u64), item: &[u8]) -> u64 {
    let mut h = SipHasher24::new_with_keys(k.0, k.1);
    h.write(item);
    h.finish()
}

/// Map a 64-bit hash into `[0, f)` (BIP158's `hash_to_range`).
pub(crate) fn to_range(hash: u64, f: u64) -> u64 {
    ((u128::from(hash) * u128::from(f)) >> 64) as u64
}

/// Call `f` with every output script of every transaction in `block`, in order; returns
/// how many transactions there were.
pub fn output_scripts<'a>(
    block: &'a [u8],
    mut f: impl FnMut(&'a [u8]),
) -> Result<usize, DecodeError> {
    let block = Block::parse(block)?;
    for tx in block.transactions() {
        tx.outputs().for_each(|o| f(o.script));
    }
    Ok(block.tx_count())
}

/// Build the basic filter of the block whose hash is `block_hash`: every output script of
/// `block` that is not empty and does not start with `OP_RETURN`, and every non-empty script
/// in `spent` (the output scripts its inputs spend), each distinct script once. Written to
/// `out` (replaced).
pub fn basic_filter<'s>(
    block_hash: &[u8; 32],
    block: &'s [u8],
    spent: impl IntoIterator<Item = &'s [u8]>,
    out: &mut Vec<u8>,
) -> Result<(), DecodeError> {
    let mut outputs: Vec<&[u8]> = Vec::new();
    output_scripts(block, |s| {
        if !s.is_empty() && s[0] != 0x6a {
            outputs.push(s);
        }
    })?;
    let spent = spent.into_iter().filter(|s| !s.is_empty());
    build_filter(block_hash, outputs.into_iter().chain(spent), out);
    Ok(())
}

/// The filter of the set of `items` (each distinct item once), keyed by `block_hash`,
/// written to `out` (replaced). [`basic_filter`] chooses a block's items and calls this.
pub fn build_filter<'s>(
    block_hash: &[u8; 32],
    items: impl IntoIterator<Item = &'s [u8]>,
    out: &mut Vec<u8>,
) {
    let k = key(block_hash);
    let mut items: Vec<(u64, &[u8])> = items.into_iter().map(|s| (siphash(k, s), s)).collect();
    // A set: equal items hash equally, so after sorting they are neighbours.
    items.sort_unstable();
    items.dedup();
    write_set(items.iter().map(|(hash, _)| *hash), items.len(), out);
}

/// The SipHash of `item` under the key a 32-byte `block_hash` gives (its first 16 bytes).
pub(crate) fn item_hash(block_hash: &[u8; 32], item: &[u8]) -> u64 {
    siphash(key(block_hash), item)
}

/// The set of items whose hashes are `hashes` (sorted here, equal ones once), written to
/// `out` (replaced): as [`build_filter`], from hashes a caller computed into a buffer it
/// keeps (no allocation once the buffer is warm). Two distinct items whose 64-bit hashes
/// are equal count once here, where [`build_filter`] keeps both: for sets both ends build
/// with this function alone.
pub(crate) fn build_from_hashes(hashes: &mut Vec<u64>, out: &mut Vec<u8>) {
    hashes.sort_unstable();
    hashes.dedup();
    write_set(hashes.iter().copied(), hashes.len(), out);
}

/// Code `n` sorted hashes as a set into `out` (replaced).
fn write_set(hashes: impl Iterator<Item = u64>, n: usize, out: &mut Vec<u8>) {
    let n = n as u64;
    let f = n.saturating_mul(BASIC_M);
    out.clear();
    write_compact_size(out, n);
    let mut w = BitWriter::new(out);
    let mut last = 0u64;
    for hash in hashes {
        // `to_range` keeps the order of the hashes, so the values are sorted too.
        let v = to_range(hash, f);
        let delta = v - last;
        w.unary(delta >> BASIC_P);
        w.write(delta & ((1 << BASIC_P) - 1), BASIC_P);
        last = v;
    }
    w.finish();
}

/// A filter's hash: double SHA-256 of its bytes.
pub fn filter_hash(filter: &[u8]) -> FilterHash {
    FilterHash::of(filter)
}

/// The filter header chained on `prev_header` (BIP157): double SHA-256 of the filter's
/// hash and the previous header (all zeros before the genesis block's).
pub fn filter_header(filter_hash: &FilterHash, prev_header: &FilterHeader) -> FilterHeader {
    prev_header.next(filter_hash)
}

/// A decoded filter's count and coded items, borrowing its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Filter<'a> {
    /// Items in the set.
    pub n: u64,
    coded: &'a [u8],
}

impl<'a> Filter<'a> {
    /// Read the item count; refuses a count the bytes cannot hold.
    pub fn decode(bytes: &'a [u8]) -> Result<Filter<'a>, FilterError> {
        let mut r = Reader::new(bytes);
        let n = r.compact_size("the item count").map_err(|e| match e {
            DecodeError::NonCanonical { value, .. } => FilterError::NonCanonicalCount(value),
            _ => FilterError::Truncated {
                what: "the item count",
            },
        })?;
        let coded = r.rest();
        let bits = coded.len() * 8;
        if n.saturating_mul(u64::from(BASIC_P) + 1) > bits as u64 {
            return Err(FilterError::TooManyItems { n, bits });
        }
        Ok(Filter { n, coded })
    }

    /// The item values in order (each in `[0, N * M)`), or the first coding error.
    pub fn values(&self) -> Values<'a> {
        Values {
            bits: BitReader::new(self.coded),
            left: self.n,
            index: 0,
            last: 0,
            f: self.n.saturating_mul(BASIC_M),
            failed: false,
        }
    }
}

/// The values of a [`Filter`], decoded one at a time (no allocation).
pub struct Values<'a> {
    bits: BitReader<'a>,
    left: u64,
    index: u64,
    last: u64,
    f: u64,
    failed: bool,
}

impl Iterator for Values<'_> {
    type Item = Result<u64, FilterError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 || self.failed {
            return None;
        }
        let index = self.index;
        let result = self.decode_one(index);
        self.failed = result.is_err();
        self.left -= 1;
        self.index += 1;
        Some(result)
    }
}

impl Values<'_> {
    fn decode_one(&mut self, index: u64) -> Result<u64, FilterError> {
        let truncated = FilterError::Truncated { what: "an item" };
        // The quotient, in unary; any quotient past the range is already an error.
        let limit = (self.f - self.last) >> BASIC_P;
        let q = self.bits.unary(limit).ok_or(truncated)?;
        if q > limit {
            return Err(FilterError::OutOfRange { index });
        }
        let r = self.bits.read(BASIC_P).ok_or(truncated)?;
        let v = self.last + ((q << BASIC_P) | r);
        if v >= self.f {
            return Err(FilterError::OutOfRange { index });
        }
        self.last = v;
        Ok(v)
    }
}

/// Matches scripts against filters, reusing its buffers: no allocation per filter once
/// they have held the largest query set.
///
/// Few scripts are sorted and merged with the filter's values as they decode. Many (a
/// wallet of several descriptors, several wallets) go into a bitmap of their values' high
/// bits and a hash set of their values instead, and each value of the filter is tested
/// against the bitmap (one load, rarely set) and, when set, the set: sorting 2,100 values
/// and advancing through them one by one cost more than hashing them into both.
#[derive(Default, Debug)]
pub struct Matcher {
    /// The scripts' values in the filter's range.
    values: Vec<u64>,
    /// One bit for each range of values that holds a script's (the values' high bits).
    bitmap: Vec<u32>,
    /// The scripts' values, by their low bits (open addressing; `EMPTY` where none).
    set: Vec<u64>,
}

/// A slot of the hash set without a value (no value reaches it: values are below N * M).
const EMPTY: u64 = u64::MAX;

/// From this many scripts, the bitmap and the set (below, the sort and the merge).
const MANY: usize = 256;

impl Matcher {
    /// A matcher with room for `queries` scripts.
    pub fn with_capacity(queries: usize) -> Matcher {
        Matcher {
            values: Vec::with_capacity(queries),
            ..Matcher::default()
        }
    }

    /// Whether any of `scripts` is in `filter`, the basic filter of the block whose hash is
    /// `block_hash`: the scripts are hashed with the filter's key, then matched against the
    /// filter's values as they decode, stopping at the first match (see [`Matcher`]). A
    /// filter that does not decode is an error, unless a match, or the last script's value,
    /// came before the bad item.
    pub fn match_any<'s>(
        &mut self,
        filter: &[u8],
        block_hash: &[u8; 32],
        scripts: impl IntoIterator<Item = &'s [u8]>,
    ) -> Result<bool, FilterError> {
        let filter = Filter::decode(filter)?;
        if filter.n == 0 {
            return Ok(false);
        }
        let k = key(block_hash);
        let f = filter.n.saturating_mul(BASIC_M);
        self.values.clear();
        self.values
            .extend(scripts.into_iter().map(|s| to_range(siphash(k, s), f)));
        if self.values.len() >= MANY {
            return self.match_many(&filter, f);
        }
        self.values.sort_unstable();
        let mut queries = self.values.iter().copied().peekable();
        for value in filter.values() {
            let value = value?;
            while let Some(&q) = queries.peek() {
                if q < value {
                    queries.next();
                } else {
                    break;
                }
            }
            match queries.peek() {
                None => return Ok(false),
                Some(&q) if q == value => return Ok(true),
                Some(_) => {}
            }
        }
        Ok(false)
    }

    /// The bitmap and the set of the scripts' values (in `[0, f)`), then the filter's
    /// values tested against them. The bitmap has about 32 bits a script (at most 2^16), so
    /// a value not a script's finds its bit clear but once in about 32.
    fn match_many(&mut self, filter: &Filter<'_>, f: u64) -> Result<bool, FilterError> {
        let queries = self.values.len();
        let bits = (queries * 32).next_power_of_two().min(1 << 16);
        let range_bits = u64::BITS - (f - 1).leading_zeros();
        let shift = range_bits.saturating_sub(bits.trailing_zeros());
        self.bitmap.clear();
        self.bitmap.resize(bits / 32, 0);
        let slots = (queries + queries / 2).next_power_of_two();
        let mask = slots - 1;
        self.set.clear();
        self.set.resize(slots, EMPTY);
        let mut last = 0;
        for &v in &self.values {
            let bit = (v >> shift) as usize;
            if let Some(word) = self.bitmap.get_mut(bit / 32) {
                *word |= 1 << (bit % 32);
            }
            let mut i = v as usize & mask;
            while self.set[i] != EMPTY && self.set[i] != v {
                i = (i + 1) & mask;
            }
            self.set[i] = v;
            last = last.max(v);
        }
        for value in filter.values() {
            let value = value?;
            let bit = (value >> shift) as usize;
            let word = self.bitmap.get(bit / 32).copied().unwrap_or(0);
            if word & (1 << (bit % 32)) != 0 {
                let mut i = value as usize & mask;
                loop {
                    match self.set[i] {
                        EMPTY => break,
                        q if q == value => return Ok(true),
                        _ => i = (i + 1) & mask,
                    }
                }
            }
            if value >= last {
                // Past every script's value.
                return Ok(false);
            }
        }
        Ok(false)
    }
}

/// The items of a block's basic filter that can be known from the block alone: its output
/// scripts that are not empty and do not start with `OP_RETURN` (BIP158). The scripts its
/// inputs spend are in the filter too, but they are not in the block: an input's script
/// and witness do not fix the script it spent (a bare script can look like any other), so
/// they are not listed here.
pub fn known_items<'a, V>(block: &Block<'a, V>) -> impl Iterator<Item = &'a [u8]> + use<'a, V> {
    block
        .transactions()
        .flat_map(|tx| tx.outputs())
        .map(|o| o.script)
        .filter(|s| !s.is_empty() && s[0] != 0x6a)
}

/// The first of `items` that `filter` (keyed by `block_hash`) does not hold, by its index
/// in `items`: a filter that lacks an item its block must put in it is wrong. One sorted
/// merge pass; allocates the items' values.
pub fn first_absent<'s>(
    filter: &[u8],
    block_hash: &[u8; 32],
    items: impl IntoIterator<Item = &'s [u8]>,
) -> Result<Option<usize>, FilterError> {
    let filter = Filter::decode(filter)?;
    let k = key(block_hash);
    let f = filter.n.saturating_mul(BASIC_M);
    let mut wanted: Vec<(u64, usize)> = items
        .into_iter()
        .enumerate()
        .map(|(i, s)| (to_range(siphash(k, s), f), i))
        .collect();
    wanted.sort_unstable();
    let mut values = filter.values();
    let mut held = None;
    for (v, i) in wanted {
        loop {
            match held {
                Some(h) if h >= v => break,
                _ => match values.next() {
                    Some(x) => held = Some(x?),
                    None => return Ok(Some(i)),
                },
            }
        }
        if held != Some(v) {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use alloc::string::String;
    use alloc::vec;

    use lightwire_primitives::BlockHash;

    use super::*;

    /// Mainnet's genesis block.
    const GENESIS: &str = "0100000000000000000000000000000000000000000000000000000000000000000000003ba3edfd7a7b12b27ac72c3e67768f617fc81bc3888a51323a9fb8aa4b1e5e4a29ab5f49ffff001d1dac2b7c0101000000010000000000000000000000000000000000000000000000000000000000000000ffffffff4d04ffff001d0104455468652054696d65732030332f4a616e2f32303039204368616e63656c6c6f72206f6e206272696e6b206f66207365636f6e64206261696c6f757420666f722062616e6b73ffffffff0100f2052a01000000434104678afdb0fe5548271967f1a67130b7105cd6a828e03909a67962e0ea1f61deb649f6bc3f4cef38c4f35504e51ec112de5c384df7ba0b8d578a4c702b6bf11d5fac00000000";

    #[test]
    fn the_genesis_block_has_one_output_script() {
        let block = hex::decode(GENESIS).unwrap();
        let mut scripts = Vec::new();
        assert_eq!(output_scripts(&block, |s| scripts.push(s.to_vec())), Ok(1));
        assert_eq!(scripts.len(), 1);
        assert_eq!(scripts[0].len(), 67);
        // Every cut is a typed error; so is a byte more.
        for cut in 0..block.len() {
            assert!(
                output_scripts(&block[..cut], |_| {}).is_err(),
                "cut at {cut}"
            );
        }
        let mut more = block.clone();
        more.push(0);
        assert_eq!(
            output_scripts(&more, |_| {}),
            Err(DecodeError::TrailingBytes(1))
        );
    }

    /// `../shared/vectors/bip158.json`: the BIP's own testnet vectors (compiled in, so the
    /// browser run has them too).
    const VECTORS: &str = include_str!(concat!(env!("LIGHTWIRE_SHARED"), "/vectors/bip158.json"));

    struct Vector {
        height: u64,
        block_hash: [u8; 32],
        block: Vec<u8>,
        spent: Vec<Vec<u8>>,
        prev_header: FilterHeader,
        filter: Vec<u8>,
        header: FilterHeader,
        notes: String,
    }

    /// Hashes in the vectors are displayed byte-reversed, as Bitcoin shows them.
    fn displayed(s: &str) -> [u8; 32] {
        let mut b = [0u8; 32];
        hex::decode_to_slice(s, &mut b).unwrap();
        b.reverse();
        b
    }

    fn vectors() -> Vec<Vector> {
        let rows: Vec<serde_json::Value> = serde_json::from_str(VECTORS).unwrap();
        rows.iter()
            .skip(1) // the column names
            .map(|r| Vector {
                height: r[0].as_u64().unwrap(),
                block_hash: displayed(r[1].as_str().unwrap()),
                block: hex::decode(r[2].as_str().unwrap()).unwrap(),
                spent: r[3]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| hex::decode(s.as_str().unwrap()).unwrap())
                    .collect(),
                prev_header: FilterHeader(displayed(r[4].as_str().unwrap())),
                filter: hex::decode(r[5].as_str().unwrap()).unwrap(),
                header: FilterHeader(displayed(r[6].as_str().unwrap())),
                notes: r[7].as_str().unwrap_or("").into(),
            })
            .collect()
    }

    /// BIP141's witness commitment on real testnet blocks: every vector's block passes
    /// (1,263,442's witness data, 1,414,221's commitment to none, the blocks before segwit
    /// with neither); one witness byte changed, a commitment with its coinbase's reserved
    /// value gone, and witness data in a block that commits to none each fail with the
    /// rule Bitcoin Core names.
    #[test]
    fn real_blocks_witness_commitments_check_and_changed_ones_do_not() {
        use lightwire_primitives::{BlockHash, CheckedBlock, WitnessError};
        let all = vectors();
        let check = |raw: &[u8], hash: &[u8; 32]| {
            let block = CheckedBlock::check(raw, &BlockHash(*hash)).expect("the block of its hash");
            block.check_witness()
        };
        for v in &all {
            assert_eq!(check(&v.block, &v.block_hash), Ok(()), "block {}", v.height);
        }
        let segwit = all
            .iter()
            .find(|v| v.height == 1_263_442)
            .expect("the vector with witness data");
        let block = lightwire_primitives::Block::parse(&segwit.block).unwrap();
        let txs: Vec<_> = block.transactions().collect();
        let spender = txs
            .iter()
            .position(|t| t.has_witness() && !t.is_coinbase())
            .expect("a witness spend");
        // The last byte of the spender's witness data: just before its lock time.
        let start =
            segwit.block.len() - txs[spender..].iter().map(|t| t.raw().len()).sum::<usize>();
        let at = start + txs[spender].raw().len() - 5;
        let mut changed = segwit.block.clone();
        changed[at] ^= 1;
        // The txids, and so the Merkle root and the header, do not cover it: only the
        // commitment does.
        assert_eq!(
            check(&changed, &segwit.block_hash),
            Err(WitnessError::Mismatch)
        );
        // The coinbase's reserved value: its witness is the last 33 bytes before its lock
        // time (one item of 32). Dropped, the coinbase has no witness at all.
        let coinbase = txs[0].raw();
        assert!(txs[0].has_witness());
        let mut legacy = Vec::new();
        txs[0].write_without_witness(&mut legacy);
        let mut no_nonce = segwit.block[..81].to_vec();
        no_nonce.extend_from_slice(&legacy);
        no_nonce.extend_from_slice(&segwit.block[81 + coinbase.len()..]);
        assert_eq!(segwit.block[80], txs.len() as u8, "a one-byte count");
        assert_eq!(
            check(&no_nonce, &segwit.block_hash),
            Err(WitnessError::NonceSize)
        );
        // A block from before segwit (no commitment) whose coinbase is given a witness
        // (which its txid, and so the header, does not cover): witness data committed to by
        // nothing.
        let old = all.iter().find(|v| v.height == 2).expect("block 2");
        let cb = lightwire_primitives::Block::parse(&old.block)
            .unwrap()
            .transactions()
            .next()
            .unwrap()
            .raw();
        assert_eq!(
            old.block.len(),
            81 + cb.len(),
            "a block of its coinbase alone"
        );
        let mut with_witness = old.block[..85].to_vec();
        with_witness.extend_from_slice(&[0x00, 0x01]);
        with_witness.extend_from_slice(&cb[4..cb.len() - 4]);
        with_witness.extend_from_slice(&[1, 32]);
        with_witness.extend_from_slice(&[7; 32]);
        with_witness.extend_from_slice(&cb[cb.len() - 4..]);
        assert_eq!(
            check(&with_witness, &old.block_hash),
            Err(WitnessError::Unexpected)
        );
    }

    #[test]
    fn every_vector_builds_its_filter_and_header() {
        let all = vectors();
        assert!(all.len() >= 10, "{} vectors", all.len());
        let mut out = Vec::new();
        for v in &all {
            basic_filter(
                &v.block_hash,
                &v.block,
                v.spent.iter().map(Vec::as_slice),
                &mut out,
            )
            .unwrap();
            assert_eq!(out, v.filter, "filter at {} ({})", v.height, v.notes);
            let header = filter_header(&filter_hash(&v.filter), &v.prev_header);
            assert_eq!(header, v.header, "header at {} ({})", v.height, v.notes);
        }
    }

    #[test]
    fn every_item_of_every_vector_matches_and_others_do_not() {
        let mut m = Matcher::with_capacity(4);
        for v in vectors() {
            let mut items: Vec<Vec<u8>> = Vec::new();
            output_scripts(&v.block, |s| {
                if !s.is_empty() && s[0] != 0x6a {
                    items.push(s.to_vec());
                }
            })
            .unwrap();
            items.extend(v.spent.iter().filter(|s| !s.is_empty()).cloned());
            let f = Filter::decode(&v.filter).unwrap();
            let values: Result<Vec<u64>, _> = f.values().collect();
            assert_eq!(values.unwrap().len() as u64, f.n);
            for item in &items {
                assert_eq!(
                    m.match_any(&v.filter, &v.block_hash, [item.as_slice()]),
                    Ok(true),
                    "{} ({})",
                    v.height,
                    v.notes
                );
            }
            // A script in no block: no match (a false positive is 1 in 784,931).
            let stranger: &[u8] = b"\x00\x14lightwire-not-a-script";
            assert_eq!(m.match_any(&v.filter, &v.block_hash, [stranger]), Ok(false));
            // Among many others, one real item still matches.
            if let Some(first) = items.first() {
                let others: Vec<Vec<u8>> = (0..100u8).map(|i| vec![0x51, i, i]).collect();
                let mut queries: Vec<&[u8]> = others.iter().map(Vec::as_slice).collect();
                queries.push(first);
                assert_eq!(m.match_any(&v.filter, &v.block_hash, queries), Ok(true));
            }
        }
    }

    #[test]
    fn a_filter_holds_every_known_item_of_its_block_and_one_without_is_caught() {
        let mut out = Vec::new();
        let mut caught = 0;
        for v in vectors() {
            // Each vector's block is the block of its hash (testnet's real blocks).
            let block = Block::check(&v.block, &BlockHash(v.block_hash))
                .unwrap_or_else(|e| panic!("{} ({}): {e}", v.height, v.notes));
            let items: Vec<&[u8]> = known_items(&block).collect();
            assert_eq!(
                first_absent(&v.filter, &v.block_hash, items.iter().copied()),
                Ok(None),
                "{} ({})",
                v.height,
                v.notes
            );
            // The same filter without one output script: that script is found missing.
            if let Some(&dropped) = items.last() {
                let rest = items.iter().copied().filter(|s| *s != dropped);
                // (A block may also spend that script: left out there too.)
                let spent = v.spent.iter().map(Vec::as_slice);
                let spent = spent.filter(|s| !s.is_empty() && *s != dropped);
                build_filter(&v.block_hash, rest.chain(spent), &mut out);
                let absent = first_absent(&out, &v.block_hash, items.iter().copied());
                assert_eq!(absent.map(|a| a.map(|i| items[i])), Ok(Some(dropped)));
                caught += 1;
            }
        }
        assert!(caught >= 8, "{caught}");
    }

    /// `n` distinct byte strings of 20 to 34 bytes, each from its index and `seed` (a
    /// multiplicative hash spread over its bytes).
    fn random_scripts(n: usize, seed: u64) -> Vec<Vec<u8>> {
        (0..n as u64)
            .map(|i| {
                let x = (i ^ seed << 32).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                let y = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
                let len = 20 + (y % 15) as usize;
                (0..len)
                    .map(|j| (x.rotate_left(j as u32 * 7) ^ y >> (j % 8)) as u8)
                    .collect()
            })
            .collect()
    }

    /// Many scripts (the bitmap and the set) and few (the merge) answer as a plain search
    /// of every value does: no match among strangers, a match for an item wherever it is
    /// among them (first, last, twice), at every filter size.
    #[test]
    fn many_scripts_match_as_a_search_of_every_value() {
        let hash = [0x5a; 32];
        let mut m = Matcher::default();
        let mut filter = Vec::new();
        for (n, seed) in [(1, 1), (2, 2), (7, 3), (100, 4), (1_000, 5), (20_000, 6)] {
            let items = random_scripts(n, seed);
            build_filter(&hash, items.iter().map(Vec::as_slice), &mut filter);
            let f = Filter::decode(&filter).unwrap();
            let values: Vec<u64> = f.values().map(Result::unwrap).collect();
            let range = f.n * BASIC_M;
            let searched = |qs: &[&[u8]]| {
                qs.iter()
                    .any(|q| values.contains(&to_range(siphash(key(&hash), q), range)))
            };
            for count in [MANY - 1, MANY, 2_100] {
                let strangers = random_scripts(count, seed * 1_000 + count as u64);
                let mut qs: Vec<&[u8]> = strangers.iter().map(Vec::as_slice).collect();
                assert_eq!(
                    m.match_any(&filter, &hash, qs.iter().copied()),
                    Ok(searched(&qs))
                );
                for item in [&items[0], &items[n / 2], &items[n - 1]] {
                    for at in [0, qs.len() / 2, qs.len()] {
                        qs.insert(at, item);
                        assert_eq!(
                            m.match_any(&filter, &hash, qs.iter().copied()),
                            Ok(true),
                            "{n} {count} {at}"
                        );
                        qs.remove(at);
                    }
                }
                // A script twice (two wallets watching one) is one value in the set.
                qs.push(qs[0]);
                assert_eq!(
                    m.match_any(&filter, &hash, qs.iter().copied()),
                    Ok(searched(&qs))
                );
            }
        }
    }

    #[test]
    fn malformed_filters_are_typed_errors() {
        let v = &vectors()[1];
        let mut m = Matcher::default();
        // No count, or a count the bytes cannot hold.
        assert_eq!(
            Filter::decode(&[]),
            Err(FilterError::Truncated {
                what: "the item count"
            })
        );
        assert_eq!(
            Filter::decode(&[0xfd, 0xff]),
            Err(FilterError::Truncated {
                what: "the item count"
            })
        );
        assert!(matches!(
            Filter::decode(&[0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0xaa]),
            Err(FilterError::TooManyItems { .. })
        ));
        // A count written longer than it needs: refused as Bitcoin Core refuses it.
        assert_eq!(
            Filter::decode(&[0xfd, 1, 0, 0xaa, 0xbb, 0xcc]),
            Err(FilterError::NonCanonicalCount(1))
        );
        // A quotient running past the range (all ones).
        let ones = [0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        let f = Filter::decode(&ones).unwrap();
        assert_eq!(
            f.values().next(),
            Some(Err(FilterError::OutOfRange { index: 0 }))
        );
        assert_eq!(
            m.match_any(&ones, &v.block_hash, [&b"x"[..]]),
            Err(FilterError::OutOfRange { index: 0 })
        );
        // Cut short: every cut of a real filter decodes to an error or fewer items, never a
        // panic.
        for cut in 0..v.filter.len() {
            if let Ok(f) = Filter::decode(&v.filter[..cut]) {
                let _ = f.values().count();
                let _ = m.match_any(&v.filter[..cut], &v.block_hash, [&b"x"[..]]);
                let many = random_scripts(MANY, cut as u64 + 1);
                let _ = m.match_any(
                    &v.filter[..cut],
                    &v.block_hash,
                    many.iter().map(Vec::as_slice),
                );
            }
        }
    }
}
