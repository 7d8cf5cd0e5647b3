//! The stored layout, sans-IO: how the IndexedDB backend packs headers, the hash index and
//! the tip into records. Kept apart from the I/O so that it is tested natively.
//!
//! - **Chunk** records, keyed by chunk number `k`: the chainwork at height `k * len`
//!   (32 bytes, big-endian) and then the 80-byte headers of heights `k * len ..`, where `len`
//!   is the network's retarget interval. A chunk is one difficulty period, so rebuilding
//!   validation entries from a period start reads whole chunks and needs no other record.
//! - **Index** records, keyed `[prefix, first height]`: one record per commit and hash
//!   prefix, holding that commit's `(hash, height)` pairs whose hash starts with the prefix
//!   ([`INDEX_ENTRY_LEN`] bytes each). Append-only: a commit never reads the index. A lookup
//!   is one `getAll` over the prefix's key range (benches/README.md has the measurements
//!   behind this choice).
//! - **Commit** records, keyed by first height: the last height of that commit, so that a
//!   rollback finds the one commit it cuts through.
//! - The **meta** record: [`Meta`].

use lightwire_chain::{BlockHash, HEADER_LEN, Network, Params, U256, Work};

use crate::{SCHEMA_VERSION, StoreError, Tip};

/// Bytes of one index entry: the block hash and its height (u32, little-endian).
pub const INDEX_ENTRY_LEN: usize = 36;

/// Bytes of the chainwork that starts every chunk record.
pub const CHUNK_WORK_LEN: usize = 32;

/// Widest hash prefix the index can be sharded by (65,536 shards).
pub const MAX_PREFIX_BITS: u8 = 16;

/// The store's default shard width: 8 bits, 256 shards (benches/README.md, "Header store").
pub const DEFAULT_PREFIX_BITS: u8 = 8;

/// The shard of `hash`: its first `bits` bits (0 for an unsharded index).
pub fn prefix(hash: &BlockHash, bits: u8) -> u32 {
    if bits == 0 {
        return 0;
    }
    let b = hash.as_bytes();
    u32::from(u16::from_be_bytes([b[0], b[1]])) >> (16 - u32::from(bits))
}

/// Bytes of an encoded [`Meta`].
pub const META_LEN: usize = 4 + 4 + 32 + 1 + 4 + 32 + 32;
const META_MAGIC: &[u8; 4] = b"LWHS";

/// What the store records about itself; rewritten by every commit.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Meta {
    /// Layout version ([`SCHEMA_VERSION`] when written by this build).
    pub schema: u32,
    /// Genesis hash of the network whose headers are stored.
    pub genesis: BlockHash,
    /// Index shard width, fixed when the store is created.
    pub prefix_bits: u8,
    /// The best stored header.
    pub tip: Tip,
}

impl Meta {
    /// The meta record of a new store: only the genesis header.
    pub fn genesis(params: &Params, prefix_bits: u8) -> Meta {
        Meta {
            schema: SCHEMA_VERSION,
            genesis: params.genesis.block_hash(),
            prefix_bits,
            tip: Tip {
                height: 0,
                hash: params.genesis.block_hash(),
                chainwork: genesis_work(params),
            },
        }
    }

    /// `magic | schema u32 LE | genesis | prefix bits | tip height u32 LE | tip hash |
    /// chainwork (big-endian)`.
    pub fn encode(&self) -> [u8; META_LEN] {
        let mut b = [0u8; META_LEN];
        b[..4].copy_from_slice(META_MAGIC);
        b[4..8].copy_from_slice(&self.schema.to_le_bytes());
        b[8..40].copy_from_slice(self.genesis.as_bytes());
        b[40] = self.prefix_bits;
        b[41..45].copy_from_slice(&self.tip.height.to_le_bytes());
        b[45..77].copy_from_slice(self.tip.hash.as_bytes());
        b[77..109].copy_from_slice(&self.tip.chainwork.0.to_be_bytes());
        b
    }

    /// Decode a stored meta record.
    pub fn decode(b: &[u8]) -> Result<Meta, StoreError> {
        let corrupt = |what| StoreError::Corrupt { what };
        if b.len() != META_LEN || &b[..4] != META_MAGIC {
            return Err(corrupt("meta record"));
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let bytes32 = |i: usize| -> [u8; 32] { b[i..i + 32].try_into().unwrap_or([0; 32]) };
        let prefix_bits = b[40];
        if prefix_bits > MAX_PREFIX_BITS {
            return Err(corrupt("meta record prefix width"));
        }
        Ok(Meta {
            schema: u32_at(4),
            genesis: BlockHash(bytes32(8)),
            prefix_bits,
            tip: Tip {
                height: u32_at(41),
                hash: BlockHash(bytes32(45)),
                chainwork: Work(U256::from_be_bytes(&bytes32(77))),
            },
        })
    }

    /// Check that this store holds `params`' chain in a layout this build reads.
    pub fn check(&self, params: &Params) -> Result<(), StoreError> {
        if self.schema > SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                found: self.schema,
                supported: SCHEMA_VERSION,
            });
        }
        if self.genesis != params.genesis.block_hash() {
            return Err(match network_of(&self.genesis) {
                Some(stored) => StoreError::WrongNetwork {
                    stored,
                    opened_as: params.network,
                },
                None => StoreError::Corrupt {
                    what: "meta record genesis hash",
                },
            });
        }
        Ok(())
    }
}

/// The network whose genesis hash this is.
fn network_of(genesis: &BlockHash) -> Option<Network> {
    Network::ALL
        .into_iter()
        .find(|n| n.params().genesis.block_hash() == *genesis)
}

/// Work of the genesis header alone.
pub fn genesis_work(params: &Params) -> Work {
    params
        .genesis
        .bits
        .to_target()
        .map(|t| t.work())
        .unwrap_or_default()
}

/// The partly filled last chunk, kept in memory so that a commit rewrites it without
/// reading it back: the work prefix and the headers written so far, encoded as stored.
#[derive(Clone, Debug)]
pub struct Tail {
    /// Chunk number.
    pub chunk: u32,
    /// The chunk record as stored: work, then headers.
    pub bytes: Vec<u8>,
}

impl Tail {
    /// A tail from a stored chunk record, checked against the stored tip (its last
    /// header must be the tip).
    pub fn from_record(
        chunk: u32,
        bytes: Vec<u8>,
        len: u32,
        tip: &Tip,
    ) -> Result<Tail, StoreError> {
        let expected = CHUNK_WORK_LEN + (tip.height - chunk * len + 1) as usize * HEADER_LEN;
        if bytes.len() != expected {
            return Err(StoreError::Corrupt {
                what: "last chunk length",
            });
        }
        let tail = Tail { chunk, bytes };
        if tail.last_hash() != Some(tip.hash) {
            return Err(StoreError::Corrupt {
                what: "last chunk does not end at the tip",
            });
        }
        Ok(tail)
    }

    /// A tail starting a new chunk at the header whose cumulative work is `work`.
    pub fn start(chunk: u32, work: &Work, capacity: u32) -> Tail {
        let mut bytes = Vec::with_capacity(CHUNK_WORK_LEN + capacity as usize * HEADER_LEN);
        bytes.extend_from_slice(&work.0.to_be_bytes());
        Tail { chunk, bytes }
    }

    /// Headers held.
    pub fn len(&self) -> u32 {
        ((self.bytes.len() - CHUNK_WORK_LEN) / HEADER_LEN) as u32
    }

    /// Whether the tail holds no header (never true for a stored tail).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The encoded header at index `i` of the chunk.
    pub fn header_bytes(&self, i: u32) -> Option<&[u8; HEADER_LEN]> {
        header_in_chunk(&self.bytes, i)
    }

    /// Hash of the last header held.
    pub fn last_hash(&self) -> Option<BlockHash> {
        let last = self.len().checked_sub(1)?;
        self.header_bytes(last)
            .map(lightwire_chain::hash_header_bytes)
    }

    /// Keep the first `n` headers.
    pub fn truncate(&mut self, n: u32) {
        self.bytes
            .truncate(CHUNK_WORK_LEN + n as usize * HEADER_LEN);
    }
}

/// The encoded header at index `i` of a chunk record.
pub fn header_in_chunk(record: &[u8], i: u32) -> Option<&[u8; HEADER_LEN]> {
    let at = CHUNK_WORK_LEN + i as usize * HEADER_LEN;
    record.get(at..at + HEADER_LEN)?.try_into().ok()
}

/// The chainwork a chunk record starts with.
pub fn chunk_work(record: &[u8]) -> Option<Work> {
    let b: &[u8; 32] = record.get(..CHUNK_WORK_LEN)?.try_into().ok()?;
    Some(Work(U256::from_be_bytes(b)))
}

/// One commit's index entries grouped by shard, reusing its buffers between commits.
#[derive(Default, Debug)]
pub struct Grouped {
    entries: Vec<u8>,
    /// `entries[offsets[p] .. offsets[p + 1]]` (in entries) belong to shard `p`.
    offsets: Vec<u32>,
    /// Each entry's shard, in input order (the counting sort's first pass).
    shards: Vec<u32>,
}

impl Grouped {
    /// Group `(hash, height)` pairs by the first `bits` bits of the hash.
    pub fn fill<'a>(
        &mut self,
        bits: u8,
        pairs: impl ExactSizeIterator<Item = (&'a BlockHash, u32)> + Clone,
    ) {
        let shards = 1usize << bits;
        self.offsets.clear();
        self.offsets.resize(shards + 1, 0);
        self.shards.clear();
        for (hash, _) in pairs.clone() {
            let p = prefix(hash, bits);
            self.shards.push(p);
            self.offsets[p as usize + 1] += 1;
        }
        for i in 1..self.offsets.len() {
            self.offsets[i] += self.offsets[i - 1];
        }
        self.entries.clear();
        self.entries.resize(pairs.len() * INDEX_ENTRY_LEN, 0);
        // Each offsets[p] serves as shard p's next free slot, then is shifted back below.
        for ((hash, height), &p) in pairs.zip(self.shards.iter()) {
            let slot = &mut self.offsets[p as usize];
            let at = *slot as usize * INDEX_ENTRY_LEN;
            self.entries[at..at + 32].copy_from_slice(hash.as_bytes());
            self.entries[at + 32..at + INDEX_ENTRY_LEN].copy_from_slice(&height.to_le_bytes());
            *slot += 1;
        }
        // Each offsets[p] now holds the end of shard p, which is the start of p + 1.
        for p in (1..self.offsets.len()).rev() {
            self.offsets[p] = self.offsets[p - 1];
        }
        self.offsets[0] = 0;
    }

    /// Shards in use (2^bits).
    pub fn shards(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// The entries of shard `p`, packed as stored.
    pub fn of(&self, p: usize) -> &[u8] {
        let (a, b) = (self.offsets[p] as usize, self.offsets[p + 1] as usize);
        &self.entries[a * INDEX_ENTRY_LEN..b * INDEX_ENTRY_LEN]
    }
}

/// The height stored for `hash` in a packed index record.
pub fn find_in_index(record: &[u8], hash: &BlockHash) -> Option<u32> {
    record
        .chunks_exact(INDEX_ENTRY_LEN)
        .find(|e| e[..32] == hash.as_bytes()[..])
        .map(|e| u32::from_le_bytes([e[32], e[33], e[34], e[35]]))
}

/// Keep the entries of a packed index record at or below `height`, in place.
pub fn retain_up_to(record: &mut Vec<u8>, height: u32) {
    let mut kept = 0;
    for i in 0..record.len() / INDEX_ENTRY_LEN {
        let at = i * INDEX_ENTRY_LEN;
        let h = u32::from_le_bytes([
            record[at + 32],
            record[at + 33],
            record[at + 34],
            record[at + 35],
        ]);
        if h <= height {
            record.copy_within(at..at + INDEX_ENTRY_LEN, kept * INDEX_ENTRY_LEN);
            kept += 1;
        }
    }
    record.truncate(kept * INDEX_ENTRY_LEN);
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use lightwire_chain::{MAINNET, REGTEST};

    use super::*;

    fn hash(first: u8, second: u8, fill: u8) -> BlockHash {
        let mut b = [fill; 32];
        b[0] = first;
        b[1] = second;
        BlockHash(b)
    }

    #[test]
    fn prefixes_are_the_leading_bits() {
        let h = hash(0xab, 0xcd, 0);
        assert_eq!(prefix(&h, 0), 0);
        assert_eq!(prefix(&h, 4), 0xa);
        assert_eq!(prefix(&h, 8), 0xab);
        assert_eq!(prefix(&h, 16), 0xabcd);
    }

    #[test]
    fn meta_round_trips_and_checks_network_and_schema() {
        let mut meta = Meta::genesis(&REGTEST, 8);
        meta.tip.height = 123_456;
        meta.tip.hash = hash(1, 2, 3);
        let decoded = Meta::decode(&meta.encode()).unwrap();
        assert_eq!(decoded, meta);
        assert_eq!(decoded.check(&REGTEST), Ok(()));
        assert_eq!(
            decoded.check(&MAINNET),
            Err(StoreError::WrongNetwork {
                stored: Network::Regtest,
                opened_as: Network::Mainnet
            })
        );
        let newer = Meta {
            schema: SCHEMA_VERSION + 1,
            ..meta
        };
        assert_eq!(
            newer.check(&REGTEST),
            Err(StoreError::SchemaTooNew {
                found: SCHEMA_VERSION + 1,
                supported: SCHEMA_VERSION
            })
        );
        let unknown = Meta {
            genesis: hash(9, 9, 9),
            ..meta
        };
        assert!(matches!(
            unknown.check(&REGTEST),
            Err(StoreError::Corrupt { .. })
        ));
        let mut bad = meta.encode();
        bad[0] = b'X';
        assert!(Meta::decode(&bad).is_err());
        assert!(Meta::decode(&meta.encode()[..50]).is_err());
        let mut wide = meta.encode();
        wide[40] = 17;
        assert!(Meta::decode(&wide).is_err());
    }

    #[test]
    fn grouping_puts_every_pair_in_its_shard_in_order() {
        let pairs: Vec<(BlockHash, u32)> = (0..1000u32)
            .map(|i| {
                let mut h = hash((i * 37) as u8, (i * 11) as u8, 0);
                h.0[2..6].copy_from_slice(&i.to_le_bytes());
                (h, 5000 + i)
            })
            .collect();
        let mut g = Grouped::default();
        for bits in [0u8, 4, 8, 16] {
            g.fill(bits, pairs.iter().map(|(h, n)| (h, *n)));
            assert_eq!(g.shards(), 1 << bits);
            let mut seen = 0;
            for p in 0..g.shards() {
                let record = g.of(p);
                seen += record.len() / INDEX_ENTRY_LEN;
                let mut last = 0;
                for e in record.chunks_exact(INDEX_ENTRY_LEN) {
                    let h = BlockHash(e[..32].try_into().unwrap());
                    assert_eq!(prefix(&h, bits) as usize, p);
                    let height = u32::from_le_bytes(e[32..].try_into().unwrap());
                    assert!(height > last, "input order kept within a shard");
                    last = height;
                }
            }
            assert_eq!(seen, pairs.len());
            for (h, n) in &pairs {
                assert_eq!(find_in_index(g.of(prefix(h, bits) as usize), h), Some(*n));
            }
        }
    }

    #[test]
    fn a_rollback_keeps_only_entries_at_or_below_the_fork() {
        let pairs: Vec<(BlockHash, u32)> =
            (0..10u32).map(|i| (hash(0, 0, i as u8), 100 + i)).collect();
        let mut g = Grouped::default();
        g.fill(0, pairs.iter().map(|(h, n)| (h, *n)));
        let mut record = g.of(0).to_vec();
        retain_up_to(&mut record, 104);
        assert_eq!(record.len(), 5 * INDEX_ENTRY_LEN);
        assert_eq!(find_in_index(&record, &pairs[4].0), Some(104));
        assert_eq!(find_in_index(&record, &pairs[5].0), None);
        retain_up_to(&mut record, 99);
        assert!(record.is_empty());
    }

    #[test]
    fn the_tail_must_end_at_the_tip() {
        let genesis = REGTEST.genesis;
        let meta = Meta::genesis(&REGTEST, 8);
        let mut bytes = Tail::start(0, &meta.tip.chainwork, 2016).bytes;
        bytes.extend_from_slice(&genesis.encode());
        let tail = Tail::from_record(0, bytes.clone(), 2016, &meta.tip).unwrap();
        assert_eq!(tail.len(), 1);
        assert_eq!(chunk_work(&tail.bytes), Some(meta.tip.chainwork));
        let mut longer = meta.tip;
        longer.height = 1;
        assert!(Tail::from_record(0, bytes.clone(), 2016, &longer).is_err());
        let mut other = meta.tip;
        other.hash = hash(1, 1, 1);
        assert!(Tail::from_record(0, bytes, 2016, &other).is_err());
    }
}
