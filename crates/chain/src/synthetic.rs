//! The deterministic blocks behind generated chains: what a generated header's Merkle root
//! commits to, so that a gateway serving a generated chain can serve its blocks and their
//! compact block filters, and a client can check both, as on a real chain.
//!
//! A block at `height` on `branch` holds a coinbase and, from [`Profile::heavy_from`] on,
//! one *payload* transaction with a few thousand outputs and inputs, chosen from a pool of
//! [`POOL_SIZE`] by the height: a basic filter of such a block has mainnet's size (about
//! 14 KB on average: [`Profile::min_elements`] to [`Profile::max_elements`] items). The
//! pool is built once, so a long chain costs one hash more per header, not a block each,
//! and every block is produced again on demand from its height alone.
//!
//! Transactions are in the legacy serialization (no witness). They are not valid
//! transactions: the payload's inputs spend made-up outpoints with empty scripts; what
//! they spend is given by [`SyntheticBlock::spent_scripts`] (a gateway builds the filter
//! from it, as a node does from its undo data).
//!
//! A pool can also carry *payments* ([`Pool::with_payments`], for wallet tests and
//! benchmarks): the block at a payment's height has, after its payload, segwit filler
//! transactions bringing it to a given size (two inputs spending made-up outpoints of
//! P2WPKH scripts, two P2WPKH outputs, a 72-byte signature and a key in each witness), the
//! first of which pays the payment's script. Headers of such a chain must take their
//! Merkle roots from the pool ([`merkle_root_in`]).
//!
//! Coinbase: version 1; one input (null outpoint, script `04 <height LE> 04 <branch LE>`,
//! sequence `ffffffff`); one output of 50 BTC to P2WPKH of the first 20 bytes of
//! `SHA256("lightwire-synthetic" || height LE || branch LE)`; lock time 0. Payload: version
//! 2; inputs and outputs from a splitmix64 stream seeded by the pool index (P2WPKH, P2TR,
//! P2PKH and P2SH outputs in turn; each input spends a P2WPKH script); lock time 0.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use lightwire_primitives::merkle::MerkleRoot;
use lightwire_primitives::{sha256d, write_compact_size};

/// The genesis block's one transaction (the same on every network), serialized.
pub const GENESIS_COINBASE: [u8; 204] = [
    0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x4d, 0x04, 0xff, 0xff, 0x00, 0x1d, 0x01,
    0x04, 0x45, 0x54, 0x68, 0x65, 0x20, 0x54, 0x69, 0x6d, 0x65, 0x73, 0x20, 0x30, 0x33, 0x2f, 0x4a,
    0x61, 0x6e, 0x2f, 0x32, 0x30, 0x30, 0x39, 0x20, 0x43, 0x68, 0x61, 0x6e, 0x63, 0x65, 0x6c, 0x6c,
    0x6f, 0x72, 0x20, 0x6f, 0x6e, 0x20, 0x62, 0x72, 0x69, 0x6e, 0x6b, 0x20, 0x6f, 0x66, 0x20, 0x73,
    0x65, 0x63, 0x6f, 0x6e, 0x64, 0x20, 0x62, 0x61, 0x69, 0x6c, 0x6f, 0x75, 0x74, 0x20, 0x66, 0x6f,
    0x72, 0x20, 0x62, 0x61, 0x6e, 0x6b, 0x73, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00, 0xf2, 0x05, 0x2a,
    0x01, 0x00, 0x00, 0x00, 0x43, 0x41, 0x04, 0x67, 0x8a, 0xfd, 0xb0, 0xfe, 0x55, 0x48, 0x27, 0x19,
    0x67, 0xf1, 0xa6, 0x71, 0x30, 0xb7, 0x10, 0x5c, 0xd6, 0xa8, 0x28, 0xe0, 0x39, 0x09, 0xa6, 0x79,
    0x62, 0xe0, 0xea, 0x1f, 0x61, 0xde, 0xb6, 0x49, 0xf6, 0xbc, 0x3f, 0x4c, 0xef, 0x38, 0xc4, 0xf3,
    0x55, 0x04, 0xe5, 0x1e, 0xc1, 0x12, 0xde, 0x5c, 0x38, 0x4d, 0xf7, 0xba, 0x0b, 0x8d, 0x57, 0x8a,
    0x4c, 0x70, 0x2b, 0x6b, 0xf1, 0x1d, 0x5f, 0xac, 0x00, 0x00, 0x00, 0x00,
];

/// The one output script of the genesis block (a pay-to-public-key): the one item of its
/// basic filter.
pub const GENESIS_OUTPUT_SCRIPT: &[u8] = GENESIS_COINBASE.split_at(133).1.split_at(67).0;

/// Payload transactions to choose from.
pub const POOL_SIZE: usize = 64;

/// Where generated blocks carry payloads and how large their filters are. The same profile
/// must be used everywhere a chain is generated: the Merkle roots depend on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Profile {
    /// First height whose block has a payload.
    pub heavy_from: u32,
    /// Fewest filter items a payload brings.
    pub min_elements: u32,
    /// Most filter items a payload brings.
    pub max_elements: u32,
}

/// The profile of `lightwire-chain generate` and the gateway's `--generate`: payloads in
/// the blocks above 915,000 (the last 10,000 of the 925,000-header benchmark chain), 3,800
/// to 7,000 items each (filters of 10 to 18 KB, about 14 KB on average, mainnet's mean).
pub const DEFAULT_PROFILE: Profile = Profile {
    heavy_from: 915_001,
    min_elements: 3_800,
    max_elements: 7_000,
};

/// One payload transaction of the pool.
#[derive(Debug)]
pub struct PoolTx {
    /// Its legacy serialization.
    pub bytes: Vec<u8>,
    /// Its txid (internal byte order).
    pub txid: [u8; 32],
    /// The output scripts its inputs spend.
    pub spent: Vec<Vec<u8>>,
    /// Where each output script lies in `bytes` (offset, length).
    outputs: Vec<(u32, u8)>,
}

impl PoolTx {
    /// Its output scripts.
    pub fn output_scripts(&self) -> impl Iterator<Item = &[u8]> {
        self.outputs
            .iter()
            .map(|&(at, len)| &self.bytes[at as usize..at as usize + usize::from(len)])
    }
}

/// The pool of one profile's payloads, built once, and the payments its chain carries.
#[derive(Debug)]
pub struct Pool {
    profile: Profile,
    txs: Vec<PoolTx>,
    payments: BTreeMap<u32, Payment>,
    /// The size of a block carrying a payment.
    payment_block_bytes: usize,
}

/// A payment a generated chain carries: its block pays `value` to `script`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Payment {
    /// The block's height.
    pub height: u32,
    /// The output script paid.
    pub script: Vec<u8>,
    /// Satoshis.
    pub value: u64,
}

static DEFAULT_POOL: OnceLock<Pool> = OnceLock::new();

impl Pool {
    /// The pool for `profile` (built on first use for [`DEFAULT_PROFILE`], about 60 ms;
    /// other profiles build a pool each call, to keep).
    pub fn build(profile: &Profile) -> Pool {
        let txs = (0..POOL_SIZE as u64).map(|p| payload(p, profile)).collect();
        Pool {
            profile: *profile,
            txs,
            payments: BTreeMap::new(),
            payment_block_bytes: 0,
        }
    }

    /// The pool for `profile` with `payments` (one per height: a later one at the same
    /// height replaces an earlier), each in a block of about `block_bytes` (at least its
    /// coinbase and payload, and one filler transaction).
    pub fn with_payments(
        profile: &Profile,
        payments: impl IntoIterator<Item = Payment>,
        block_bytes: usize,
    ) -> Pool {
        let mut pool = Pool::build(profile);
        pool.payments = payments.into_iter().map(|p| (p.height, p)).collect();
        pool.payment_block_bytes = block_bytes;
        pool
    }

    /// The payment carried at `height`, if any.
    pub fn payment_at(&self, height: u32) -> Option<&Payment> {
        self.payments.get(&height)
    }

    /// Every payment carried, by height.
    pub fn payments(&self) -> impl Iterator<Item = &Payment> {
        self.payments.values()
    }

    /// The pool of [`DEFAULT_PROFILE`].
    pub fn default_pool() -> &'static Pool {
        DEFAULT_POOL.get_or_init(|| Pool::build(&DEFAULT_PROFILE))
    }

    /// The payload for `height`.
    pub fn pick(&self, height: u32) -> &PoolTx {
        &self.txs[(splitmix(u64::from(height)) % POOL_SIZE as u64) as usize]
    }
}

/// One generated block's transactions.
#[derive(Debug)]
pub struct SyntheticBlock<'p> {
    /// The coinbase, serialized.
    pub coinbase: Vec<u8>,
    /// The payload, from `heavy_from` on.
    pub payload: Option<&'p PoolTx>,
    /// The filler transactions of a block carrying a payment.
    filler: Option<Filler>,
}

/// Filler transactions (see the module documentation).
#[derive(Debug)]
struct Filler {
    /// Serialized, with their witnesses, one after another.
    bytes: Vec<u8>,
    txids: Vec<[u8; 32]>,
    /// Where each output script but the payment's lies in `bytes` (offset; each is 22
    /// bytes).
    outputs: Vec<u32>,
    /// The payment's output script.
    paid: Vec<u8>,
    /// The scripts their inputs spend.
    spent: Vec<[u8; 22]>,
}

impl<'p> SyntheticBlock<'p> {
    /// The block at `height` on `branch` (0 is the main chain).
    pub fn new(profile: &Profile, pool: &'p Pool, height: u32, branch: u32) -> Self {
        let coinbase = coinbase(height, branch);
        let payload = (height >= profile.heavy_from).then(|| pool.pick(height));
        let filler = pool.payment_at(height).map(|p| {
            let base = 80 + 3 + coinbase.len() + payload.map_or(0, |t| t.bytes.len());
            let count = pool.payment_block_bytes.saturating_sub(base) / FILLER_TX_LEN + 1;
            filler(height, branch, p, count)
        });
        SyntheticBlock {
            coinbase,
            payload,
            filler,
        }
    }

    /// Its Merkle root.
    pub fn merkle_root(&self) -> [u8; 32] {
        let cb = txid(&self.coinbase);
        let mut root = MerkleRoot::new();
        root.push(cb);
        self.payload.iter().for_each(|p| root.push(p.txid));
        self.filler
            .iter()
            .flat_map(|f| &f.txids)
            .for_each(|t| root.push(*t));
        root.finish().map_or(cb, |(r, _)| r)
    }

    /// The whole block after `header`, serialized into `out` (replaced).
    pub fn write(&self, header: &[u8; 80], out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(header);
        let fillers = self.filler.as_ref().map_or(0, |f| f.txids.len());
        write_compact_size(
            out,
            (1 + usize::from(self.payload.is_some()) + fillers) as u64,
        );
        out.extend_from_slice(&self.coinbase);
        if let Some(p) = self.payload {
            out.extend_from_slice(&p.bytes);
        }
        if let Some(f) = &self.filler {
            out.extend_from_slice(&f.bytes);
        }
    }

    /// The block at `height` on `branch` after `header`, serialized into `out` (replaced):
    /// the genesis block (height 0) is the real one, every other a synthetic one.
    pub fn write_at(
        profile: &Profile,
        pool: &Pool,
        height: u32,
        branch: u32,
        header: &[u8; 80],
        out: &mut Vec<u8>,
    ) {
        if height == 0 {
            out.clear();
            out.extend_from_slice(header);
            out.push(1);
            out.extend_from_slice(&GENESIS_COINBASE);
        } else {
            SyntheticBlock::new(profile, pool, height, branch).write(header, out);
        }
    }

    /// The output scripts its inputs spend (the coinbase spends none).
    pub fn spent_scripts(&self) -> impl Iterator<Item = &[u8]> {
        self.payload
            .into_iter()
            .flat_map(|p| p.spent.iter().map(Vec::as_slice))
            .chain(
                self.filler
                    .iter()
                    .flat_map(|f| f.spent.iter().map(|s| &s[..])),
            )
    }

    /// What its basic filter holds (BIP158): every output script (none is empty or
    /// `OP_RETURN`) and every script its inputs spend, possibly repeated.
    pub fn filter_items(&self) -> impl Iterator<Item = &[u8]> {
        let coinbase_output = &self.coinbase[self.coinbase.len() - 4 - 22..self.coinbase.len() - 4];
        let filler_outputs = self.filler.iter().flat_map(|f| {
            let paid = (!f.paid.is_empty() && f.paid[0] != 0x6a).then_some(&f.paid[..]);
            paid.into_iter().chain(
                f.outputs
                    .iter()
                    .map(|&at| &f.bytes[at as usize..at as usize + 22]),
            )
        });
        core::iter::once(coinbase_output)
            .chain(self.payload.into_iter().flat_map(PoolTx::output_scripts))
            .chain(filler_outputs)
            .chain(self.spent_scripts())
    }
}

/// The serialized length of a filler transaction paying a 22-byte script.
const FILLER_TX_LEN: usize = 372;

/// `count` filler transactions for the block at `height` on `branch`, the first paying
/// `payment` (its output script may be of any length).
fn filler(height: u32, branch: u32, payment: &Payment, count: usize) -> Filler {
    let mut f = Filler {
        bytes: Vec::with_capacity(count * FILLER_TX_LEN + payment.script.len()),
        txids: Vec::with_capacity(count),
        outputs: Vec::with_capacity(2 * count),
        paid: payment.script.clone(),
        spent: Vec::with_capacity(2 * count),
    };
    let mut s = Stream(u64::from(height) << 24 ^ u64::from(branch) << 56 ^ 0xf111);
    let mut legacy = Vec::with_capacity(FILLER_TX_LEN);
    for i in 0..count {
        // Without the witness first (for the txid), then with it.
        legacy.clear();
        legacy.extend_from_slice(&2u32.to_le_bytes());
        legacy.push(2);
        for j in 0..2u32 {
            s.bytes(&mut legacy, 32);
            legacy.extend_from_slice(&j.to_le_bytes());
            legacy.push(0);
            legacy.extend_from_slice(&0xffff_fffdu32.to_le_bytes());
            let mut spent = [0u8; 22];
            spent[1] = 0x14;
            let mut key = Vec::with_capacity(24);
            s.bytes(&mut key, 20);
            spent[2..].copy_from_slice(&key);
            f.spent.push(spent);
        }
        legacy.push(2);
        let mut outputs = [0usize; 2];
        for (j, at) in outputs.iter_mut().enumerate() {
            if i == 0 && j == 0 {
                legacy.extend_from_slice(&payment.value.to_le_bytes());
                write_compact_size(&mut legacy, payment.script.len() as u64);
                legacy.extend_from_slice(&payment.script);
                continue;
            }
            legacy.extend_from_slice(&(10_000 + i as u64).to_le_bytes());
            legacy.push(22);
            *at = legacy.len();
            legacy.extend_from_slice(&[0x00, 0x14]);
            s.bytes(&mut legacy, 20);
        }
        let lock_time = legacy.len();
        legacy.extend_from_slice(&0u32.to_le_bytes());
        f.txids.push(txid(&legacy));
        let start = f.bytes.len();
        f.bytes.extend_from_slice(&legacy[..4]);
        f.bytes.extend_from_slice(&[0, 1]);
        f.bytes.extend_from_slice(&legacy[4..lock_time]);
        for _ in 0..2 {
            f.bytes.push(2);
            f.bytes.push(72);
            f.bytes.push(0x30);
            f.bytes.extend_from_slice(&[0x45; 71]);
            f.bytes.push(33);
            f.bytes.push(0x02);
            f.bytes.extend_from_slice(&[0x79; 32]);
        }
        f.bytes.extend_from_slice(&legacy[lock_time..]);
        // Output scripts moved by the marker and flag (2 bytes).
        for at in outputs.into_iter().filter(|&at| at != 0) {
            f.outputs.push((start + at + 2) as u32);
        }
    }
    f
}

/// The Merkle root of the generated block at `height` on `branch` of `pool`'s chain (one
/// that may carry payments), with the profile it was built for.
pub fn merkle_root_in(pool: &Pool, height: u32, branch: u32) -> [u8; 32] {
    SyntheticBlock::new(&pool.profile, pool, height, branch).merkle_root()
}

/// The Merkle root of the generated block at `height` on `branch` with the default profile.
pub fn merkle_root(height: u32, branch: u32) -> [u8; 32] {
    let pool = if height >= DEFAULT_PROFILE.heavy_from {
        Pool::default_pool()
    } else {
        // Not used below `heavy_from`: avoid building it.
        static EMPTY: Pool = Pool {
            profile: DEFAULT_PROFILE,
            txs: Vec::new(),
            payments: BTreeMap::new(),
            payment_block_bytes: 0,
        };
        &EMPTY
    };
    SyntheticBlock::new(&DEFAULT_PROFILE, pool, height, branch).merkle_root()
}

/// The txid of a transaction serialized without witness data.
fn txid(tx: &[u8]) -> [u8; 32] {
    sha256d(tx)
}

fn coinbase(height: u32, branch: u32) -> Vec<u8> {
    let mut tx = Vec::with_capacity(96);
    tx.extend_from_slice(&1u32.to_le_bytes());
    tx.push(1);
    tx.extend_from_slice(&[0; 32]);
    tx.extend_from_slice(&u32::MAX.to_le_bytes());
    tx.push(10);
    tx.push(4);
    tx.extend_from_slice(&height.to_le_bytes());
    tx.push(4);
    tx.extend_from_slice(&branch.to_le_bytes());
    tx.extend_from_slice(&u32::MAX.to_le_bytes());
    tx.push(1);
    tx.extend_from_slice(&5_000_000_000u64.to_le_bytes());
    let key: [u8; 32] = Sha256::new()
        .chain_update(b"lightwire-synthetic")
        .chain_update(height.to_le_bytes())
        .chain_update(branch.to_le_bytes())
        .finalize()
        .into();
    tx.push(22);
    tx.extend_from_slice(&[0x00, 0x14]);
    tx.extend_from_slice(&key[..20]);
    tx.extend_from_slice(&0u32.to_le_bytes());
    tx
}

/// splitmix64: a fixed, fast stream of numbers for the pool's contents.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct Stream(u64);

impl Stream {
    fn bytes(&mut self, out: &mut Vec<u8>, n: usize) {
        for _ in 0..n.div_ceil(8) {
            self.0 = self.0.wrapping_add(1);
            out.extend_from_slice(&splitmix(self.0).to_le_bytes());
        }
        out.truncate(out.len() - (8 - n % 8) % 8);
    }
}

fn payload(index: u64, profile: &Profile) -> PoolTx {
    let span = u64::from(profile.max_elements.saturating_sub(profile.min_elements)) + 1;
    let elements = u64::from(profile.min_elements) + splitmix(index ^ 0x5157) % span;
    let inputs = (elements / 3) as usize;
    let outputs = elements as usize - inputs;
    let mut s = Stream(index << 32);
    let mut tx = Vec::with_capacity(inputs * 41 + outputs * 44 + 16);
    let mut spent = Vec::with_capacity(inputs);
    tx.extend_from_slice(&2u32.to_le_bytes());
    write_compact_size(&mut tx, inputs as u64);
    for i in 0..inputs {
        s.bytes(&mut tx, 32);
        tx.extend_from_slice(&(i as u32).to_le_bytes());
        tx.push(0);
        tx.extend_from_slice(&u32::MAX.to_le_bytes());
        let mut script = vec![0x00, 0x14];
        s.bytes(&mut script, 20);
        spent.push(script);
    }
    write_compact_size(&mut tx, outputs as u64);
    let mut scripts = Vec::with_capacity(outputs);
    for j in 0..outputs {
        tx.extend_from_slice(&(1000 + j as u64).to_le_bytes());
        let (prefix, len, suffix): (&[u8], usize, &[u8]) = match j % 4 {
            0 => (&[0x00, 0x14], 20, &[]),
            1 => (&[0x51, 0x20], 32, &[]),
            2 => (&[0x76, 0xa9, 0x14], 20, &[0x88, 0xac]),
            _ => (&[0xa9, 0x14], 20, &[0x87]),
        };
        let script_len = (prefix.len() + len + suffix.len()) as u8;
        tx.push(script_len);
        scripts.push((tx.len() as u32, script_len));
        tx.extend_from_slice(prefix);
        s.bytes(&mut tx, len);
        tx.extend_from_slice(suffix);
    }
    tx.extend_from_slice(&0u32.to_le_bytes());
    PoolTx {
        txid: txid(&tx),
        bytes: tx,
        spent,
        outputs: scripts,
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::merkle::hash_pair;

    #[test]
    fn light_blocks_are_their_coinbase() {
        let pool = Pool {
            profile: DEFAULT_PROFILE,
            txs: Vec::new(),
            payments: BTreeMap::new(),
            payment_block_bytes: 0,
        };
        let b = SyntheticBlock::new(&DEFAULT_PROFILE, &pool, 7, 0);
        assert!(b.payload.is_none());
        assert_eq!(b.merkle_root(), txid(&b.coinbase));
        assert_eq!(merkle_root(7, 0), b.merkle_root());
        assert_ne!(merkle_root(7, 1), merkle_root(7, 0), "branches differ");
        let mut block = Vec::new();
        b.write(&[0; 80], &mut block);
        assert_eq!(block.len(), 80 + 1 + b.coinbase.len());
        assert_eq!(b.spent_scripts().count(), 0);
        let items: Vec<&[u8]> = b.filter_items().collect();
        assert_eq!(items.len(), 1);
        assert_eq!(&items[0][..2], &[0x00, 0x14]);
    }

    #[test]
    fn heavy_blocks_carry_a_payload_of_the_profile_size() {
        let profile = Profile {
            heavy_from: 10,
            min_elements: 300,
            max_elements: 400,
        };
        let pool = Pool::build(&profile);
        let b = SyntheticBlock::new(&profile, &pool, 10, 0);
        let p = b.payload.expect("a payload from heavy_from on");
        assert!(
            (100..=133).contains(&p.spent.len()),
            "a third of the items are inputs"
        );
        let items = b.filter_items().count();
        assert!((301..=401).contains(&items), "{items} items");
        for script in p.output_scripts() {
            assert!(matches!(script.len(), 22 | 23 | 25 | 34), "{script:02x?}");
        }
        assert_eq!(b.merkle_root(), hash_pair(&txid(&b.coinbase), &p.txid));
        // Deterministic: the same pool is built again.
        assert_eq!(Pool::build(&profile).pick(10).txid, p.txid);
        assert!(SyntheticBlock::new(&profile, &pool, 9, 0).payload.is_none());
    }

    /// A block carrying a payment has the size asked for, pays the script in its first
    /// filler transaction, and its filter items and Merkle root cover the fillers.
    #[test]
    fn a_payment_block_pays_its_script_at_the_size_asked() {
        let profile = Profile {
            heavy_from: 10,
            min_elements: 300,
            max_elements: 400,
        };
        let script = vec![0x51, 0x20, 7, 7];
        let pay = |height| Payment {
            height,
            script: script.clone(),
            value: 123_456,
        };
        let pool = Pool::with_payments(&profile, [pay(5), pay(12)], 100_000);
        assert_eq!(pool.payments().count(), 2);
        for height in [5, 12] {
            let b = SyntheticBlock::new(&profile, &pool, height, 0);
            let mut block = Vec::new();
            b.write(&[0; 80], &mut block);
            assert!(
                (100_000..100_000 + FILLER_TX_LEN).contains(&block.len()),
                "{}",
                block.len()
            );
            let f = b.filler.as_ref().unwrap();
            let items: Vec<&[u8]> = b.filter_items().collect();
            assert!(items.contains(&&script[..]));
            assert_eq!(
                items.len(),
                1 + b
                    .payload
                    .map_or(0, |p| p.output_scripts().count() + p.spent.len())
                    + 1
                    + f.outputs.len()
                    + f.spent.len()
            );
            assert_eq!(f.outputs.len(), 2 * f.txids.len() - 1);
            for &at in &f.outputs {
                assert_eq!(&f.bytes[at as usize..at as usize + 2], &[0x00, 0x14]);
            }
            assert_eq!(merkle_root_in(&pool, height, 0), b.merkle_root());
            assert_ne!(merkle_root_in(&pool, height, 0), merkle_root(height, 0));
        }
        assert!(SyntheticBlock::new(&profile, &pool, 6, 0).filler.is_none());
        assert_eq!(
            merkle_root_in(&pool, 6, 0),
            merkle_root(6, 0),
            "below heavy_from"
        );
    }
}
