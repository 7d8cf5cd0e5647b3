//! The stored layout, sans-IO: how the IndexedDB backend packs headers, the hash index and
//! the tip into records. Kept apart from the I/O so that it is tested natively.
//!
//! - **Chunk** records, keyed by chunk number `k`: the chainwork at height `k * len`
//!   (32 bytes, big-endian), then the headers of heights `k * len ..` coded in pieces
//!   ([`chunk`](crate::chunk)), each after its length (u16, big-endian): no
//!   previous-block hashes (rebuilt on read from each piece's anchors, four segments side
//!   by side; checked on write), version, time and nBits against the
//!   header before: about 39 bytes a header instead of 80. `len` is [`CHUNK_LEN`], half
//!   a difficulty period: a period start is a chunk start, so rebuilding validation
//!   entries from it reads whole chunks and needs no other record, and a record stays under
//!   the size past which Chromium writes it as a file of its own (see [`CHUNK_LEN`]).
//! - **Index** records, keyed `[prefix, first height]`: one record per commit and hash
//!   prefix, holding that commit's entries whose hash starts with the prefix: 4 more bytes
//!   of the hash (its *fragment*, bytes 2..6) and the height, [`INDEX_ENTRY_LEN`] bytes
//!   each. A fragment match is a candidate, confirmed by the stored header's hash (false
//!   candidates are rare: 2^-32 per entry compared, about one per million lookups in a
//!   925,000-header index of 256 shards). Append-only: a commit never reads the index. A lookup is one `getAll` over the prefix's key range (benches/README.md has
//!   the measurements behind this choice).
//! - **Commit** records, keyed by first height: the last height of that commit, so that a
//!   rollback finds the one commit it cuts through.
//! - The **meta** record: [`Meta`]; beside it in the same object store, the **fence**
//!   record (layout 6 on): the store's commit count as its key, `{fence: 0}` as its value,
//!   held once by a unique index. A commit swaps it for the next count without reading it,
//!   and fails if another writer swapped it first (the IndexedDB backend's `advance_fence`).
//! - **Filter** records, keyed by `height / FILTER_CHUNK`: up to [`FILTER_CHUNK`] filter
//!   headers of 32 bytes (layout 3 on).
//! - Saved **records**, keyed by a [`RecordKey`](crate::RecordKey)'s name: what the caller
//!   saves beside its headers, as given (the object store `records`, layout 4 on).
//!
//! Layout 1 (80-byte headers in chunks, whole 32-byte hashes in the index) is read only to
//! migrate it ([`v1`]). Layout 2 coded the chunks and cut the index to fragments; layout 3
//! added the filter records, and the saved records under the name `scans`; layout 4 moved
//! those to `records`, a name that says nothing of what a client keeps there (the records
//! themselves, and every other record, are as layout 3 wrote them). Layouts 2 to 4 kept a
//! whole period (2,016 headers, about 78,600 bytes) in a chunk record; layout 5 keeps half
//! ([`v4`] splits them), and nothing else changed. Layout 6 adds the fence, and nothing
//! else: layout 5 checked for another writer by reading the meta record inside each commit.

use lightwire_chain::{BlockHash, HEADER_LEN, Header, Network, Params, U256, Work, link_segments};

use crate::{SCHEMA_VERSION, StoreError, Tip, chunk};

/// Bytes of one index entry: the hash's fragment and its height (u32, little-endian).
pub const INDEX_ENTRY_LEN: usize = FRAGMENT_LEN + 4;

/// Bytes of the hash an index entry keeps (bytes 2..6: past any prefix a shard can use).
pub const FRAGMENT_LEN: usize = 4;

/// The fragment of `hash` an index entry keeps.
pub fn fragment(hash: &BlockHash) -> [u8; FRAGMENT_LEN] {
    let b = hash.as_bytes();
    [b[2], b[3], b[4], b[5]]
}

/// Bytes of the chainwork that starts every chunk record.
pub const CHUNK_WORK_LEN: usize = 32;

/// Headers per chunk record: half of every network's retarget interval (2,016), so that a
/// period starts a chunk. Chosen by size: even with every header coded at its longest
/// ([`chunk::MAX_CODED_LEN`] bytes), a record stays under 64 KiB, the size past which
/// Chromium's IndexedDB (Blink's `IDBValueWrapper`) wraps a value in a Blob written as a
/// file of its own. A whole period, about 78,600 bytes coded, was wrapped: each `put`
/// took 0.56-0.73 ms instead of 0.04-0.05, and Chromium's 925,000-header sync 0.4-0.5 s
/// more (benches/README.md, "Chunk records under 64 KiB (layout 5)").
pub const CHUNK_LEN: u32 = 1008;

/// Widest hash prefix the index can be sharded by (65,536 shards).
pub const MAX_PREFIX_BITS: u8 = 16;

/// The store's default shard width: 4 bits, 16 shards (benches/README.md, "Header store").
pub const DEFAULT_PREFIX_BITS: u8 = 4;

/// The shard of `hash`: its first `bits` bits (0 for an unsharded index).
pub fn prefix(hash: &BlockHash, bits: u8) -> u32 {
    if bits == 0 {
        return 0;
    }
    let b = hash.as_bytes();
    u32::from(u16::from_be_bytes([b[0], b[1]])) >> (16 - u32::from(bits))
}

/// Bytes of an encoded [`Meta`] (layout 1's lacked the last two fields, layout 2's the
/// last one).
pub const META_LEN: usize = 4 + 4 + 32 + 1 + 4 + 32 + 32 + 4 + 4;
/// Bytes of a layout-2 meta record.
const META_V2_LEN: usize = META_LEN - 4;
/// Bytes of a layout-1 meta record.
const META_V1_LEN: usize = META_V2_LEN - 4;
/// Filter headers per record of the `filters` object store: 64,000 bytes, under Chromium's
/// 64 KiB threshold above which IndexedDB wraps a value in a Blob (written as a file of its
/// own): with 2,048 (65,536 bytes and the clone's header) the records were wrapped, and the
/// `put` calls alone took about 0.3 s more of the sync's 925 records.
pub const FILTER_CHUNK: u32 = 2000;
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
    /// The first stored height: 0, or the checkpoint the store started from.
    pub base: u32,
    /// The height of the next filter header to store (`base` when none is).
    pub filter_next: u32,
}

impl Meta {
    /// The meta record of a new store: only the genesis header.
    pub fn genesis(params: &Params, prefix_bits: u8) -> Meta {
        Meta::starting_at(params, &crate::Start::genesis(params), prefix_bits)
    }

    /// The meta record of a new store holding only `start`.
    pub fn starting_at(params: &Params, start: &crate::Start, prefix_bits: u8) -> Meta {
        Meta {
            schema: SCHEMA_VERSION,
            genesis: params.genesis.block_hash(),
            prefix_bits,
            tip: start.tip(),
            base: start.height,
            filter_next: start.height,
        }
    }

    /// `magic | schema u32 LE | genesis | prefix bits | tip height u32 LE | tip hash |
    /// chainwork (big-endian) | base height u32 LE | next filter height u32 LE`.
    pub fn encode(&self) -> [u8; META_LEN] {
        let mut b = [0u8; META_LEN];
        b[..4].copy_from_slice(META_MAGIC);
        b[4..8].copy_from_slice(&self.schema.to_le_bytes());
        b[8..40].copy_from_slice(self.genesis.as_bytes());
        b[40] = self.prefix_bits;
        b[41..45].copy_from_slice(&self.tip.height.to_le_bytes());
        b[45..77].copy_from_slice(self.tip.hash.as_bytes());
        b[77..109].copy_from_slice(&self.tip.chainwork.0.to_be_bytes());
        b[109..113].copy_from_slice(&self.base.to_le_bytes());
        b[113..117].copy_from_slice(&self.filter_next.to_le_bytes());
        b
    }

    /// Decode a stored meta record.
    pub fn decode(b: &[u8]) -> Result<Meta, StoreError> {
        let corrupt = |what| StoreError::Corrupt { what };
        if ![META_LEN, META_V2_LEN, META_V1_LEN].contains(&b.len()) || &b[..4] != META_MAGIC {
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
            // Layout 1 always started at genesis.
            base: if b.len() >= META_V2_LEN {
                u32_at(109)
            } else {
                0
            },
            filter_next: 0,
        })
        .and_then(|mut m| {
            // Layouts 1 and 2 wrote the shorter records, and stored no filter headers.
            m.filter_next = if b.len() == META_LEN {
                u32_at(113)
            } else {
                m.base
            };
            match (b.len(), m.schema) {
                (META_V1_LEN, 1) | (META_V2_LEN, 2) => Ok(m),
                (META_LEN, s) if s >= 3 => Ok(m),
                _ => Err(corrupt("meta record length")),
            }
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
/// reading it back: the work prefix and the headers written so far, 80 bytes each (stored
/// coded: [`encode_chunk`]), with their block hashes. Also a stored chunk, expanded.
#[derive(Clone, Debug, Default)]
pub struct Tail {
    /// Chunk number.
    pub chunk: u32,
    /// Work, then the 80-byte headers.
    pub bytes: Vec<u8>,
    /// The headers' block hashes.
    pub hashes: Vec<BlockHash>,
}

impl Tail {
    /// A tail from a stored chunk record, checked against the stored tip (its last
    /// header must be the tip).
    pub fn from_record(chunk: u32, record: &[u8], len: u32, tip: &Tip) -> Result<Tail, StoreError> {
        let mut tail = Tail::default();
        tail.expand(chunk, record, len)?;
        if tail.hashes.len() != (tip.height - chunk * len + 1) as usize {
            return Err(StoreError::Corrupt {
                what: "last chunk length",
            });
        }
        if tail.last_hash() != Some(tip.hash) {
            return Err(StoreError::Corrupt {
                what: "last chunk does not end at the tip",
            });
        }
        Ok(tail)
    }

    /// Replace what this holds with stored chunk `chunk` ([`expand_chunk`]), reusing the
    /// buffers.
    pub fn expand(&mut self, chunk: u32, record: &[u8], len: u32) -> Result<(), StoreError> {
        self.chunk = chunk;
        expand_chunk(record, chunk * len, len, &mut self.bytes, &mut self.hashes).map(drop)
    }

    /// A tail starting a new chunk at the header whose cumulative work is `work`.
    pub fn start(chunk: u32, work: &Work, capacity: u32) -> Tail {
        let mut bytes = Vec::with_capacity(CHUNK_WORK_LEN + capacity as usize * HEADER_LEN);
        bytes.extend_from_slice(&work.0.to_be_bytes());
        Tail {
            chunk,
            bytes,
            hashes: Vec::with_capacity(capacity as usize),
        }
    }

    /// Become a copy of `other`, reusing the buffers.
    pub fn copy_from(&mut self, other: &Tail) {
        self.chunk = other.chunk;
        self.bytes.clear();
        self.bytes.extend_from_slice(&other.bytes);
        self.hashes.clear();
        self.hashes.extend_from_slice(&other.hashes);
    }

    /// Start chunk `chunk` afresh at the header whose cumulative work is `work`.
    pub fn restart(&mut self, chunk: u32, work: &Work) {
        self.chunk = chunk;
        self.bytes.clear();
        self.bytes.extend_from_slice(&work.0.to_be_bytes());
        self.hashes.clear();
    }

    /// Append a header and its block hash.
    pub fn push(&mut self, header: &[u8; HEADER_LEN], hash: BlockHash) {
        self.bytes.extend_from_slice(header);
        self.hashes.push(hash);
    }

    /// Headers held.
    pub fn len(&self) -> u32 {
        self.hashes.len() as u32
    }

    /// Whether the tail holds no header (never true for a stored tail).
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// The encoded header at index `i` of the chunk.
    pub fn header_bytes(&self, i: u32) -> Option<&[u8; HEADER_LEN]> {
        header_in_chunk(&self.bytes, i)
    }

    /// The block hash of the header at index `i` of the chunk.
    pub fn hash(&self, i: u32) -> Option<BlockHash> {
        self.hashes.get(i as usize).copied()
    }

    /// Hash of the last header held.
    pub fn last_hash(&self) -> Option<BlockHash> {
        self.hashes.last().copied()
    }

    /// Keep the first `n` headers.
    pub fn truncate(&mut self, n: u32) {
        self.bytes
            .truncate(CHUNK_WORK_LEN + n as usize * HEADER_LEN);
        self.hashes.truncate(n as usize);
    }

    /// The stored form of this chunk, into `out` ([`encode_chunk`]).
    pub fn encode(&self, len: u32, out: &mut Vec<u8>) -> Result<(), StoreError> {
        encode_chunk(&self.bytes, self.chunk * len, |i| self.hashes[i], out)
    }
}

/// The encoded header at index `i` of a chunk held as work and 80-byte headers.
pub fn header_in_chunk(record: &[u8], i: u32) -> Option<&[u8; HEADER_LEN]> {
    let at = CHUNK_WORK_LEN + i as usize * HEADER_LEN;
    record.get(at..at + HEADER_LEN)?.try_into().ok()
}

/// The chainwork a chunk record starts with.
pub fn chunk_work(record: &[u8]) -> Option<Work> {
    let b: &[u8; 32] = record.get(..CHUNK_WORK_LEN)?.try_into().ok()?;
    Some(Work(U256::from_be_bytes(b)))
}

/// Code a chunk held as work then 80-byte headers (a [`Tail`]'s bytes), whose first header
/// is at `first_height`, into its stored form in `out` (replaced; its capacity reused).
/// Fails if the headers do not link (each previous-block hash is the block hash of the
/// header before, `hashes` holding those): the stored form drops them, so they are checked
/// here rather than lost.
pub fn encode_chunk(
    held: &[u8],
    first_height: u32,
    hashes: impl Fn(usize) -> BlockHash,
    out: &mut Vec<u8>,
) -> Result<(), StoreError> {
    let headers = held.get(CHUNK_WORK_LEN..).unwrap_or_default();
    let header = |i: usize| -> Option<[u8; HEADER_LEN]> {
        headers
            .get(i * HEADER_LEN..(i + 1) * HEADER_LEN)
            .and_then(|h| h.try_into().ok())
    };
    let n = headers.len() / HEADER_LEN;
    for i in 1..n {
        if header(i).is_none_or(|h| h[4..36] != hashes(i - 1).0) {
            return Err(StoreError::DoesNotLink {
                height: first_height + i as u32,
            });
        }
    }
    out.clear();
    out.extend_from_slice(&held[..CHUNK_WORK_LEN.min(held.len())]);
    let mut at = 0;
    while at < n {
        let len_at = out.len();
        out.extend_from_slice(&[0, 0]);
        at += chunk::push_piece(
            &headers[at * HEADER_LEN..n * HEADER_LEN],
            first_height + at as u32,
            out,
        );
        // At most MAX_PIECE_LEN (u16::MAX) bytes.
        let len = (out.len() - len_at - 2) as u16;
        out[len_at..len_at + 2].copy_from_slice(&len.to_be_bytes());
    }
    Ok(())
}

/// Expand a stored chunk record whose first header is at `first_height` into `headers`
/// (work, then 80-byte headers; replaced) and their block hashes into `hashes` (replaced).
/// Checks that the record's pieces and segments link, and that it holds at most `len`
/// headers. Returns the chunk's work.
pub fn expand_chunk(
    record: &[u8],
    first_height: u32,
    len: u32,
    headers: &mut Vec<u8>,
    hashes: &mut Vec<BlockHash>,
) -> Result<Work, StoreError> {
    let corrupt = |what| StoreError::Corrupt { what };
    let work = chunk_work(record).ok_or(corrupt("chunk record length"))?;
    headers.clear();
    headers.extend_from_slice(&record[..CHUNK_WORK_LEN]);
    hashes.clear();
    let mut rest = &record[CHUNK_WORK_LEN..];
    while !rest.is_empty() {
        let (n, after) = rest
            .split_first_chunk::<2>()
            .ok_or(corrupt("chunk record length"))?;
        let (piece, after) = after
            .split_at_checked(usize::from(u16::from_be_bytes(*n)))
            .ok_or(corrupt("chunk record length"))?;
        rest = after;
        let m = chunk::Piece::decode(piece).map_err(corrupt)?;
        let done = hashes.len();
        let count = m.count;
        if m.first_height != first_height + done as u32 || done + count > len as usize {
            return Err(corrupt("chunk record piece heights"));
        }
        let at = headers.len();
        headers.resize(at + count * HEADER_LEN, 0);
        m.expand(&mut headers[at..]).map_err(corrupt)?;
        hashes.resize(done + count, BlockHash::ZERO);
        let (starts, segments) = m.segment_starts();
        link_segments(&mut headers[at..], &starts[..segments], &mut hashes[done..]);
        // Each segment's anchor must be the hash of the header before it.
        for &s in &starts[..segments] {
            let i = done + s;
            let prev = &headers[CHUNK_WORK_LEN + i * HEADER_LEN + 4..][..32];
            if i > 0 && prev != hashes[i - 1].0 {
                return Err(corrupt("chunk record does not link"));
            }
        }
    }
    Ok(work)
}

/// Layout 1, read only to migrate it: chunks of 80-byte headers, index entries of whole
/// hashes.
pub mod v1 {
    use super::*;

    /// Bytes of a layout-1 index entry: the block hash and its height (u32, little-endian).
    pub const INDEX_ENTRY_LEN: usize = 36;

    /// A layout-1 index record in layout 2's form (fragment and height), appended to `out`.
    pub fn convert_index(record: &[u8], out: &mut Vec<u8>) -> Result<(), StoreError> {
        if record.len() % INDEX_ENTRY_LEN != 0 {
            return Err(StoreError::Corrupt {
                what: "layout 1 index record length",
            });
        }
        for e in record.chunks_exact(INDEX_ENTRY_LEN) {
            out.extend_from_slice(&e[2..6]);
            out.extend_from_slice(&e[32..36]);
        }
        Ok(())
    }

    /// A layout-1 chunk record (work, then 80-byte headers) in layout 2's form, written to
    /// `out`; its headers must link.
    pub fn convert_chunk(
        record: &[u8],
        first_height: u32,
        len: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), StoreError> {
        let (mut held, mut hashes) = (Vec::new(), Vec::new());
        expand_chunk(record, len, &mut held, &mut hashes)?;
        super::encode_chunk(&held, first_height, |i| hashes[i], out)
    }

    /// A layout-1 chunk record of at most `len` headers into `held` (the same bytes) and
    /// their block hashes into `hashes` (both replaced), as [`super::expand_chunk`] does
    /// for a coded one; returns its work. Links are not checked here: coding checks them.
    pub fn expand_chunk(
        record: &[u8],
        len: u32,
        held: &mut Vec<u8>,
        hashes: &mut Vec<BlockHash>,
    ) -> Result<Work, StoreError> {
        let n = record.len().saturating_sub(CHUNK_WORK_LEN) / HEADER_LEN;
        let work = chunk_work(record)
            .filter(|_| (record.len() - CHUNK_WORK_LEN) % HEADER_LEN == 0 && n <= len as usize)
            .ok_or(StoreError::Corrupt {
                what: "layout 1 chunk record length",
            })?;
        held.clear();
        held.extend_from_slice(record);
        hashes.clear();
        hashes.resize(n, BlockHash::ZERO);
        lightwire_chain::hash_headers(&record[CHUNK_WORK_LEN..], hashes);
        Ok(work)
    }

    /// Layout 1's encoding of a chunk held as work and 80-byte headers: the same bytes.
    /// (Kept to write layout-1 stores in tests, as a build from before layout 2 did.)
    pub fn encode_chunk(held: &[u8]) -> Vec<u8> {
        held.to_vec()
    }

    /// Layout 1's index entry for `hash` at `height`.
    pub fn index_entry(hash: &BlockHash, height: u32) -> [u8; INDEX_ENTRY_LEN] {
        let mut e = [0u8; INDEX_ENTRY_LEN];
        e[..32].copy_from_slice(hash.as_bytes());
        e[32..].copy_from_slice(&height.to_le_bytes());
        e
    }
}

/// Layouts 1 to 4's chunk records, read only to migrate them: a whole retarget period each,
/// as 80-byte headers (layout 1) or coded as layout 5 codes its halves (2 to 4).
pub mod v4 {
    use super::*;

    /// Headers in a chunk record of layouts 1 to 4: the retarget interval.
    pub const CHUNK_LEN: u32 = 2 * super::CHUNK_LEN;

    /// How a layout wrote its chunk records.
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub enum Coding {
        /// Layout 1: the chainwork, then 80-byte headers.
        Plain,
        /// Layouts 2 to 4: [`encode_chunk`]'s.
        Coded,
    }

    /// An older layout's chunk record `k` (heights `k * 2016 ..`) as layout 5's records `2k`
    /// and `2k + 1`, into `first` and `second` (replaced); returns whether `second` holds a
    /// header (a record with none is not stored). A record's chainwork is its first
    /// header's (that header's work included), so the second's is the first's plus the
    /// work of the headers after the first, up to and including its own first. `held` and
    /// `hashes` are scratch space. Fails as reading the record would: it must hold linked
    /// headers, at most a period of them.
    pub fn split_chunk(
        record: &[u8],
        k: u32,
        coding: Coding,
        held: &mut Vec<u8>,
        hashes: &mut Vec<BlockHash>,
        first: &mut Vec<u8>,
        second: &mut Vec<u8>,
    ) -> Result<bool, StoreError> {
        let height = k * CHUNK_LEN;
        let mut work = match coding {
            Coding::Coded => expand_chunk(record, height, CHUNK_LEN, held, hashes)?,
            Coding::Plain => v1::expand_chunk(record, CHUNK_LEN, held, hashes)?,
        };
        let half = super::CHUNK_LEN as usize;
        let n = hashes.len().min(half);
        let cut = CHUNK_WORK_LEN + n * HEADER_LEN;
        encode_chunk(&held[..cut], height, |i| hashes[i], first)?;
        second.clear();
        if hashes.len() <= half {
            return Ok(false);
        }
        // Each half's links are checked as it is coded; this is the one between them.
        if held[cut + 4..cut + 36] != hashes[half - 1].0 {
            return Err(StoreError::DoesNotLink {
                height: height + half as u32,
            });
        }
        let after_first = &held[CHUNK_WORK_LEN + HEADER_LEN..cut + HEADER_LEN];
        for h in after_first
            .chunks_exact(HEADER_LEN)
            .filter_map(Header::from_slice)
        {
            let target = h.bits.to_target().map_err(|_| StoreError::Corrupt {
                what: "chunk record nBits",
            })?;
            work = work.add(&target.work());
        }
        // The second half after its chainwork, in place of the first half's headers.
        held.drain(CHUNK_WORK_LEN..cut);
        held[..CHUNK_WORK_LEN].copy_from_slice(&work.0.to_be_bytes());
        encode_chunk(
            held,
            height + super::CHUNK_LEN,
            |i| hashes[half + i],
            second,
        )?;
        Ok(true)
    }
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
            self.entries[at..at + FRAGMENT_LEN].copy_from_slice(&fragment(hash));
            self.entries[at + FRAGMENT_LEN..at + INDEX_ENTRY_LEN]
                .copy_from_slice(&height.to_le_bytes());
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

/// The heights a packed index record holds for hashes with `hash`'s fragment: the
/// candidates for `hash`, to be confirmed against the stored headers.
pub fn find_in_index<'a>(record: &'a [u8], hash: &BlockHash) -> impl Iterator<Item = u32> + 'a {
    let f = fragment(hash);
    record
        .chunks_exact(INDEX_ENTRY_LEN)
        .filter(move |e| e[..FRAGMENT_LEN] == f)
        .map(entry_height)
}

/// The height of a packed index entry.
pub fn entry_height(e: &[u8]) -> u32 {
    let h = &e[FRAGMENT_LEN..INDEX_ENTRY_LEN];
    u32::from_le_bytes([h[0], h[1], h[2], h[3]])
}

/// Keep the entries of a packed index record at or below `height`, in place.
pub fn retain_up_to(record: &mut Vec<u8>, height: u32) {
    let mut kept = 0;
    for i in 0..record.len() / INDEX_ENTRY_LEN {
        let at = i * INDEX_ENTRY_LEN;
        if entry_height(&record[at..at + INDEX_ENTRY_LEN]) <= height {
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
        // Layout 1's shorter record: only with layout version 1, and then from genesis.
        assert!(Meta::decode(&meta.encode()[..META_V1_LEN]).is_err());
        let v1 = Meta {
            schema: 1,
            base: 0,
            filter_next: 0,
            ..meta
        };
        assert_eq!(Meta::decode(&v1.encode()[..META_V1_LEN]), Ok(v1));
        // Layout 2's: no filter headers stored.
        let v2 = Meta {
            schema: 2,
            base: 4032,
            filter_next: 4032,
            ..meta
        };
        assert_eq!(Meta::decode(&v2.encode()[..META_V2_LEN]), Ok(v2));
        assert!(Meta::decode(&meta.encode()[..META_V2_LEN]).is_err());
        let started = Meta {
            base: 4032,
            filter_next: 5000,
            ..meta
        };
        assert_eq!(Meta::decode(&started.encode()), Ok(started));
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
                    let height = entry_height(e);
                    let (h, _) = pairs[(height - 5000) as usize];
                    assert_eq!(e[..FRAGMENT_LEN], fragment(&h));
                    assert_eq!(prefix(&h, bits) as usize, p);
                    assert!(height > last, "input order kept within a shard");
                    last = height;
                }
            }
            assert_eq!(seen, pairs.len());
            for (h, n) in &pairs {
                let found: Vec<u32> = find_in_index(g.of(prefix(h, bits) as usize), h).collect();
                assert_eq!(found, [*n]);
            }
        }
    }

    #[test]
    fn a_fragment_match_is_only_a_candidate() {
        // Two hashes with the same fragment and prefix: both heights are candidates.
        let (a, mut b) = (hash(7, 7, 1), hash(7, 7, 1));
        b.0[31] = 2;
        let mut g = Grouped::default();
        g.fill(8, [(&a, 10u32), (&b, 20)].into_iter());
        let found: Vec<u32> = find_in_index(g.of(7), &a).collect();
        assert_eq!(found, [10, 20]);
        assert_eq!(find_in_index(g.of(7), &hash(7, 7, 9)).count(), 0);
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
        assert_eq!(
            find_in_index(&record, &pairs[4].0).collect::<Vec<_>>(),
            [104]
        );
        assert_eq!(find_in_index(&record, &pairs[5].0).count(), 0);
        retain_up_to(&mut record, 99);
        assert!(record.is_empty());
    }

    /// `n` regtest headers after genesis held as a chunk (work, then 80-byte headers), with
    /// their hashes.
    fn held(n: u32) -> (Vec<u8>, Vec<BlockHash>) {
        let hs = lightwire_chain::generate::headers_after(&REGTEST, &REGTEST.genesis, 0, n, 0);
        let mut bytes = Tail::start(0, &Work::default(), n).bytes;
        let mut hashes = Vec::new();
        for h in [REGTEST.genesis].iter().chain(&hs) {
            bytes.extend_from_slice(&h.encode());
            hashes.push(h.block_hash());
        }
        (bytes, hashes)
    }

    #[test]
    fn chunks_code_to_about_half_and_expand_to_the_same_headers_and_hashes() {
        for n in [0, 1, 4, 5, 1722, 1723, 1724, 2015] {
            let (bytes, hashes) = held(n);
            let mut stored = Vec::new();
            encode_chunk(&bytes, 0, |i| hashes[i], &mut stored).unwrap();
            let (mut back, mut back_hashes) = (Vec::new(), Vec::new());
            let work = expand_chunk(&stored, 0, 2016, &mut back, &mut back_hashes).unwrap();
            assert_eq!(work, Work::default());
            assert_eq!(back, bytes, "{n}");
            assert_eq!(back_hashes, hashes, "{n}");
            if n == 2015 {
                let per_header = (stored.len() - CHUNK_WORK_LEN) as f64 / 2016.0;
                assert!(per_header < 40.0, "{per_header} bytes a header");
            }
        }
    }

    #[test]
    fn a_chunk_that_does_not_link_is_refused_on_write_and_on_read() {
        let (mut bytes, hashes) = held(100);
        let mut stored = Vec::new();
        // On write: header 50's previous-block hash is not header 49's hash.
        bytes[CHUNK_WORK_LEN + 50 * HEADER_LEN + 4] ^= 1;
        assert_eq!(
            encode_chunk(&bytes, 0, |i| hashes[i], &mut stored),
            Err(StoreError::DoesNotLink { height: 50 })
        );
        bytes[CHUNK_WORK_LEN + 50 * HEADER_LEN + 4] ^= 1;
        encode_chunk(&bytes, 0, |i| hashes[i], &mut stored).unwrap();
        // On read: a segment's anchor changed on disk.
        let anchors = CHUNK_WORK_LEN + 2 + 2 + 12;
        let mut bad = stored.clone();
        bad[anchors + 32] ^= 1;
        let (mut out, mut out_hashes) = (Vec::new(), Vec::new());
        assert_eq!(
            expand_chunk(&bad, 0, 2016, &mut out, &mut out_hashes),
            Err(StoreError::Corrupt {
                what: "chunk record does not link"
            })
        );
        // Cut short, or at another height, or more than a chunk holds.
        assert!(
            expand_chunk(
                &stored[..stored.len() - 1],
                0,
                2016,
                &mut out,
                &mut out_hashes
            )
            .is_err()
        );
        assert!(expand_chunk(&stored, 2016, 2016, &mut out, &mut out_hashes).is_err());
        assert!(expand_chunk(&stored, 0, 100, &mut out, &mut out_hashes).is_err());
        assert!(expand_chunk(&stored[..20], 0, 2016, &mut out, &mut out_hashes).is_err());
    }

    #[test]
    fn layout_1_records_convert_to_layout_2() {
        let (bytes, hashes) = held(2015);
        let mut converted = Vec::new();
        v1::convert_chunk(&v1::encode_chunk(&bytes), 0, 2016, &mut converted).unwrap();
        let (mut back, mut back_hashes) = (Vec::new(), Vec::new());
        expand_chunk(&converted, 0, 2016, &mut back, &mut back_hashes).unwrap();
        assert_eq!((back, back_hashes), (bytes.clone(), hashes.clone()));
        let record: Vec<u8> = hashes
            .iter()
            .enumerate()
            .flat_map(|(i, h)| v1::index_entry(h, i as u32))
            .collect();
        let mut index = Vec::new();
        v1::convert_index(&record, &mut index).unwrap();
        for (i, h) in hashes.iter().enumerate() {
            assert!(find_in_index(&index, h).any(|x| x == i as u32));
        }
        assert!(v1::convert_index(&record[..35], &mut index).is_err());
        assert!(v1::convert_chunk(&bytes[..100], 0, 2016, &mut converted).is_err());
    }

    #[test]
    fn a_period_record_splits_into_two_halves_with_their_chainwork() {
        let all = lightwire_chain::generate::headers_after(&REGTEST, &REGTEST.genesis, 0, 2015, 0);
        let all: Vec<_> = [REGTEST.genesis].into_iter().chain(all).collect();
        let entries = lightwire_chain::rebuild_entries(&REGTEST, 0, &all, genesis_work(&REGTEST));
        let (mut scratch, mut scratch_hashes) = (Vec::new(), Vec::new());
        let (mut first, mut second) = (Vec::new(), Vec::new());
        let (mut back, mut back_hashes) = (Vec::new(), Vec::new());
        let mut split = |r: &[u8], k, coding, first: &mut Vec<u8>, second: &mut Vec<u8>| {
            v4::split_chunk(
                r,
                k,
                coding,
                &mut scratch,
                &mut scratch_hashes,
                first,
                second,
            )
        };
        for coding in [v4::Coding::Coded, v4::Coding::Plain] {
            for n in [1usize, 1007, 1008, 1009, 2016] {
                // An older layout's record of heights 0..n, chainwork from genesis.
                let (mut bytes, hashes) = held(n as u32 - 1);
                bytes[..CHUNK_WORK_LEN].copy_from_slice(&genesis_work(&REGTEST).0.to_be_bytes());
                let mut record = bytes.clone();
                if coding == v4::Coding::Coded {
                    encode_chunk(&bytes, 0, |i| hashes[i], &mut record).unwrap();
                }
                let has_second = split(&record, 0, coding, &mut first, &mut second).unwrap();
                assert_eq!(has_second, n > 1008, "{n}");
                let work = expand_chunk(&first, 0, CHUNK_LEN, &mut back, &mut back_hashes);
                assert_eq!(work.unwrap(), entries[0].chainwork);
                let m = n.min(1008);
                let cut = CHUNK_WORK_LEN + m * HEADER_LEN;
                assert_eq!(back[CHUNK_WORK_LEN..], bytes[CHUNK_WORK_LEN..cut]);
                assert_eq!(back_hashes, hashes[..m]);
                if has_second {
                    let work = expand_chunk(&second, 1008, CHUNK_LEN, &mut back, &mut back_hashes);
                    assert_eq!(work.unwrap(), entries[1008].chainwork, "{n}");
                    assert_eq!(back[CHUNK_WORK_LEN..], bytes[cut..]);
                    assert_eq!(back_hashes, hashes[1008..]);
                }
            }
        }
        // Chunk 3 of layout 4 is read at its heights (6,048 on): at others it is refused.
        let (mut bytes, hashes) = held(2015);
        let mut record = Vec::new();
        encode_chunk(&bytes, 0, |i| hashes[i], &mut record).unwrap();
        let coded = v4::Coding::Coded;
        assert!(split(&record, 3, coded, &mut first, &mut second).is_err());
        assert!(
            split(
                &record[..record.len() - 1],
                0,
                coded,
                &mut first,
                &mut second
            )
            .is_err()
        );
        // A layout-1 record half a header short, or that does not link: in a half, or
        // across them.
        let plain = v4::Coding::Plain;
        assert_eq!(
            split(
                &bytes[..bytes.len() - 40],
                0,
                plain,
                &mut first,
                &mut second
            ),
            Err(StoreError::Corrupt {
                what: "layout 1 chunk record length"
            })
        );
        for at in [500, 1008, 1500] {
            bytes[CHUNK_WORK_LEN + at * HEADER_LEN + 4] ^= 1;
            assert_eq!(
                split(&bytes, 0, plain, &mut first, &mut second),
                Err(StoreError::DoesNotLink { height: at as u32 })
            );
            bytes[CHUNK_WORK_LEN + at * HEADER_LEN + 4] ^= 1;
        }
    }

    #[test]
    fn a_chunk_record_stays_under_64_kib_at_its_longest() {
        for network in Network::ALL {
            assert_eq!(
                network.params().retarget_interval % CHUNK_LEN,
                0,
                "{network:?}"
            );
        }
        // Every header coded at its longest: the version, the nBits and an absolute time
        // each differ from the header before.
        let mut bytes = Work::default().0.to_be_bytes().to_vec();
        let mut hashes = Vec::new();
        let mut prev = BlockHash::ZERO;
        for i in 0..CHUNK_LEN {
            let h = Header {
                version: i as i32,
                prev_blockhash: prev,
                merkle_root: [i as u8; 32],
                time: i * 100_000,
                bits: lightwire_chain::CompactTarget(0x1d00_ffff - (i & 1)),
                nonce: i,
            };
            bytes.extend_from_slice(&h.encode());
            prev = h.block_hash();
            hashes.push(prev);
        }
        let mut record = Vec::new();
        encode_chunk(&bytes, 0, |i| hashes[i], &mut record).unwrap();
        let coded = CHUNK_LEN as usize * chunk::MAX_CODED_LEN;
        assert!(
            record.len() > coded,
            "every header at its longest: {}",
            record.len()
        );
        // Under 64 KiB with room for the structured clone's few bytes of header.
        assert!(record.len() + 64 < 65_536, "{} bytes", record.len());
    }

    #[test]
    fn the_tail_must_end_at_the_tip() {
        let meta = Meta::genesis(&REGTEST, 8);
        let (bytes, hashes) = held(0);
        let mut stored = Vec::new();
        encode_chunk(&bytes, 0, |i| hashes[i], &mut stored).unwrap();
        let tail = Tail::from_record(0, &stored, 2016, &meta.tip).unwrap();
        assert_eq!(tail.len(), 1);
        assert_eq!(tail.bytes, bytes);
        assert_eq!(tail.hashes, hashes);
        let mut again = Vec::new();
        tail.encode(2016, &mut again).unwrap();
        assert_eq!(again, stored);
        let mut longer = meta.tip;
        longer.height = 1;
        assert!(Tail::from_record(0, &stored, 2016, &longer).is_err());
        let mut other = meta.tip;
        other.hash = hash(1, 1, 1);
        assert!(Tail::from_record(0, &stored, 2016, &other).is_err());
    }
}
