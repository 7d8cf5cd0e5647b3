//! The IndexedDB backend (wasm): [`IdbStore`]. The records it writes are described in
//! [`crate::layout`]; this module only moves them in and out of IndexedDB.
//!
//! Written on web-sys rather than the `idb` crate because `idb` cannot open a transaction
//! with `durability: 'relaxed'`, which bulk commits use (a commit is the sync point of
//! IndexedDB: 19 such commits store the 925,000-header chain in 2.2-3.7 s in Chromium,
//! benches/README.md), and because the commit pipeline issues its writes without
//! awaiting each request.
//!
//! Every commit is one readwrite transaction over the object stores it writes. It first
//! swaps the fence record for the next commit count (another tab may share the database:
//! if it committed since this store last read or wrote, the swap fails and the whole
//! transaction with it; see `write::advance_fence`), so nothing is read to check. An
//! append issues every request at once and then commits (`IDBTransaction.commit()`), so
//! the browser writes and commits while the caller goes on validating, without waiting
//! for this thread to take the requests' events; a rollback (a reorg) must read before it
//! writes, and is rare. The store's in-memory state (tip, last chunk) changes only once
//! the transaction has completed, so a refused or failed commit leaves the store, on disk
//! and in memory, at its last committed batch.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use js_sys::{Array, Object, Promise, Reflect, Uint8Array};
use lightwire_chain::{BlockHash, Header, Params, Work};
use lightwire_primitives::FilterHeader;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    DomException, IdbCursorDirection, IdbCursorWithValue, IdbDatabase, IdbFactory,
    IdbIndexParameters, IdbKeyRange, IdbObjectStore, IdbOpenDbRequest, IdbRequest, IdbTransaction,
    IdbTransactionMode, IdbVersionChangeEvent,
};

use crate::layout::{
    CHUNK_LEN, CHUNK_WORK_LEN, DEFAULT_PREFIX_BITS, FILTER_CHUNK, FRAGMENT_LEN, Grouped,
    INDEX_ENTRY_LEN, MAX_PREFIX_BITS, Meta, Tail, chunk_work, entry_height, find_in_index,
    fragment, prefix, retain_up_to, v1, v4,
};
mod js;
mod schema;
mod write;

use js::*;
pub use js::{request_future, transaction_future};
use schema::*;
use write::{advance_fence, fence_key, fence_value};

use crate::{
    Batch, Durability, FilterRun, FilterTip, HeaderStore, RecordKey, SCHEMA_VERSION, Start,
    StoreError, Tip, batch_base, filter_next,
};

const CHUNKS: &str = "chunks";
const FILTERS: &str = "filters";
/// The saved records, under [`RecordKey::name`].
const RECORDS: &str = "records";
/// Where layout 3 kept the saved records; moved to [`RECORDS`] when such a store opens.
const LAYOUT_3_RECORDS: &str = "scans";
const INDEX: &str = "index";
const COMMITS: &str = "commits";
const META: &str = "meta";
const META_KEY: &str = "meta";
/// The unique index on `meta` that holds the one fence record (layout 6; see
/// [`advance_fence`]).
const FENCE: &str = "fence";

#[wasm_bindgen]
extern "C" {
    /// An `IDBDatabase`, seen through the one method web-sys binds only behind
    /// `--cfg=web_sys_unstable_apis` (IdbTransactionOptions); that flag would have to be
    /// set for every wasm build of every crate that depends on this one.
    #[wasm_bindgen(extends = IdbDatabase)]
    pub type DbWithOptions;

    /// `db.transaction(stores, mode, { durability })`.
    #[wasm_bindgen(method, catch, js_name = transaction)]
    pub fn transaction_with_options(
        this: &DbWithOptions,
        stores: &Array,
        mode: &str,
        options: &Object,
    ) -> Result<IdbTransaction, JsValue>;
}

/// Choices made when a store is created; an existing store keeps its own.
#[derive(Clone, Copy, Debug)]
pub struct IdbOptions {
    /// Width of the hash prefix the index is sharded by, 0 to
    /// [`MAX_PREFIX_BITS`](crate::layout::MAX_PREFIX_BITS).
    pub prefix_bits: u8,
    /// Where a new store starts (`None`: the genesis header).
    pub start: Option<Start>,
}

impl Default for IdbOptions {
    fn default() -> Self {
        IdbOptions {
            prefix_bits: DEFAULT_PREFIX_BITS,
            start: None,
        }
    }
}

/// What the store has done since it was opened.
#[derive(Clone, Copy, Default, Debug)]
pub struct IdbStats {
    /// Readwrite transactions committed.
    pub commits: u64,
    /// Headers written by them.
    pub headers_written: u64,
    /// Total time from starting a commit to its completion, in milliseconds.
    pub commit_ms: f64,
    /// The last commit's time, in milliseconds.
    pub last_commit_ms: f64,
    /// Records put or deleted by completed commits (a range delete counts once).
    pub records_written: u64,
    /// Filter headers written by them.
    pub filter_headers_written: u64,
}

/// The filter headers of the last `filters` record, held in memory (as [`Tail`] holds the
/// last chunk of headers): appends never read back what was just written.
#[derive(Clone, Debug, Default)]
struct FilterTail {
    /// The record's key: heights `chunk * FILTER_CHUNK ..` up to the next chunk.
    chunk: u32,
    /// Height of `headers[0]` (the chunk's first height, or the store's base in its chunk).
    first: u32,
    headers: Vec<FilterHeader>,
}

impl FilterTail {
    fn empty_at(height: u32) -> FilterTail {
        FilterTail {
            chunk: height / FILTER_CHUNK,
            first: height,
            headers: Vec::new(),
        }
    }

    fn from_record(chunk: u32, first: u32, bytes: &[u8]) -> Result<FilterTail, StoreError> {
        if bytes.len() % 32 != 0 || bytes.len() / 32 > FILTER_CHUNK as usize {
            return Err(StoreError::Corrupt {
                what: "filter record length",
            });
        }
        Ok(FilterTail {
            chunk,
            first,
            headers: bytes
                .chunks_exact(32)
                .filter_map(|c| <[u8; 32]>::try_from(c).ok().map(FilterHeader))
                .collect(),
        })
    }

    fn encode(&self) -> Uint8Array {
        let flat: Vec<u8> = self.headers.iter().flat_map(|h| h.0).collect();
        Uint8Array::from(&flat[..])
    }

    /// Height after the last header.
    fn next(&self) -> u32 {
        self.first + self.headers.len() as u32
    }
}

/// Headers in IndexedDB. See the module documentation and [`crate::layout`].
pub struct IdbStore {
    params: &'static Params,
    db: IdbDatabase,
    meta: Meta,
    tail: Tail,
    /// The next tail is built here, and swapped in once its commit completes.
    spare: Tail,
    grouped: Grouped,
    /// A chunk's stored form, coded by a commit (reused).
    encoded: Vec<u8>,
    scratch: RefCell<Vec<u8>>,
    /// A stored chunk expanded by a read (reused).
    expanded: RefCell<Tail>,
    stats: IdbStats,
    /// The last `filters` record, and the next one built by a commit.
    ftail: FilterTail,
    fspare: FilterTail,
    /// Records written by the commit in progress, counted into `stats` if it completes.
    issued: u64,
    /// The store's commit count as this connection last read or wrote it: the key of the
    /// fence record ([`advance_fence`]).
    fence: u64,
    closed: Rc<Cell<bool>>,
    _on_version_change: Closure<dyn FnMut()>,
}

/// A dropped store closes its connection and unhooks its `versionchange` handler first: the
/// handler is a Rust closure dropped with the store, and a connection left open (until the
/// garbage collector closes it) would have the browser call that freed closure when another
/// connection upgrades or deletes the database (the client's tests drop stores without
/// `close` and reopen them).
impl Drop for IdbStore {
    fn drop(&mut self) {
        self.db.set_onversionchange(None);
        self.db.close();
    }
}

impl IdbStore {
    /// Open (or create, with default options) the store named `name` for `params`'
    /// network.
    pub async fn open(name: &str, params: &'static Params) -> Result<IdbStore, StoreError> {
        IdbStore::open_with(name, params, IdbOptions::default()).await
    }

    /// Open the store named `name`, creating it with `options` if it does not exist.
    pub async fn open_with(
        name: &str,
        params: &'static Params,
        options: IdbOptions,
    ) -> Result<IdbStore, StoreError> {
        if options.prefix_bits > MAX_PREFIX_BITS {
            return Err(StoreError::Backend(format!(
                "prefix width {} is over {MAX_PREFIX_BITS} bits",
                options.prefix_bits
            )));
        }
        if let Some(start) = &options.start {
            start.check(params)?;
        }
        let db = open_database(name, params, options).await?;

        // Another tab deleting or upgrading the database must not wait for this one: close,
        // and let later calls fail with `Closed`.
        let closed = Rc::new(Cell::new(false));
        let on_version_change = {
            let db = db.clone();
            let closed = closed.clone();
            Closure::<dyn FnMut()>::new(move || {
                db.close();
                closed.set(true);
            })
        };
        db.set_onversionchange(Some(on_version_change.as_ref().unchecked_ref()));

        let loaded = load(&db, params).await;
        let (meta, tail, ftail, fence) = match loaded {
            Ok(v) => v,
            Err(e) => {
                db.close();
                return Err(e);
            }
        };
        let len = CHUNK_LEN;
        Ok(IdbStore {
            params,
            db,
            meta,
            spare: Tail::start(0, &Work::default(), len),
            tail,
            grouped: Grouped::default(),
            encoded: Vec::new(),
            scratch: RefCell::new(Vec::new()),
            expanded: RefCell::new(Tail::default()),
            stats: IdbStats::default(),
            fspare: ftail.clone(),
            ftail,
            issued: 0,
            fence,
            closed,
            _on_version_change: on_version_change,
        })
    }

    /// Delete the store named `name` (close every open [`IdbStore`] on it first, or the
    /// deletion waits for them).
    pub async fn delete(name: &str) -> Result<(), StoreError> {
        let req = factory()?.delete_database(name).map_err(store_error)?;
        request_result(&req).await.map(drop)
    }

    /// Close the database connection.
    pub fn close(self) {
        // Dropping closes it (see the Drop impl).
        drop(self);
    }

    /// The index shard width this store was created with.
    pub fn prefix_bits(&self) -> u8 {
        self.meta.prefix_bits
    }

    /// Counters since the store was opened.
    pub fn stats(&self) -> IdbStats {
        self.stats
    }

    /// Height of the last stored filter header, if any (what [`HeaderStore::filter_tip`]
    /// says, without waiting).
    pub fn filter_height(&self) -> Option<u32> {
        self.meta
            .filter_next
            .checked_sub(1)
            .filter(|_| self.meta.filter_next > self.meta.base)
    }

    fn check_open(&self) -> Result<(), StoreError> {
        if self.closed.get() {
            Err(StoreError::Closed)
        } else {
            Ok(())
        }
    }

    fn chunk_len(&self) -> u32 {
        CHUNK_LEN
    }

    /// Whether `height` is in the last chunk, which is held in memory.
    fn in_tail(&self, height: u32) -> bool {
        height / self.chunk_len() == self.tail.chunk && height <= self.meta.tip.height
    }

    fn readonly(&self, stores: &str) -> Result<IdbTransaction, StoreError> {
        self.check_open()?;
        self.db
            .transaction_with_str_and_mode(stores, IdbTransactionMode::Readonly)
            .map_err(store_error)
    }

    /// Copy a stored record into the scratch buffer and run `f` on its bytes.
    fn with_bytes<T>(&self, record: &Uint8Array, f: impl FnOnce(&[u8]) -> T) -> T {
        let mut scratch = self.scratch.borrow_mut();
        let n = record.length() as usize;
        scratch.resize(n, 0);
        record.copy_to(&mut scratch[..n]);
        f(&scratch[..n])
    }

    /// The index records of shard `p`: one `getAll`.
    fn shard_request(&self, index: &IdbObjectStore, p: u32) -> Result<IdbRequest, StoreError> {
        let range = IdbKeyRange::bound_with_lower_open_and_upper_open(
            &Array::of1(&p.into()),
            &Array::of1(&(p + 1).into()),
            false,
            true,
        )
        .map_err(store_error)?;
        index.get_all_with_key(&range).map_err(store_error)
    }

    /// The candidate heights for `hash` in the records a shard request returned: entries
    /// with its fragment, at or below the tip (entries above it cannot exist: a rollback
    /// deletes them). Appended to `out` with `tag`.
    fn candidates_in_shard(
        &self,
        req: &IdbRequest,
        queries: &[(u32, BlockHash, usize)],
        out: &mut Vec<(u32, usize)>,
    ) -> Result<(), StoreError> {
        let records: Array = req.result().map_err(store_error)?.unchecked_into();
        let tip = self.meta.tip.height;
        for record in records.iter() {
            let record: Uint8Array = record.dyn_into().map_err(|_| StoreError::Corrupt {
                what: "index record type",
            })?;
            self.with_bytes(&record, |b| {
                if queries.len() == 1 {
                    let (_, hash, tag) = &queries[0];
                    out.extend(
                        find_in_index(b, hash)
                            .filter(|h| *h <= tip)
                            .map(|h| (h, *tag)),
                    );
                    return;
                }
                // Many queries in one shard (sorted by fragment): one pass over the record.
                for e in b.chunks_exact(INDEX_ENTRY_LEN) {
                    let f = &e[..FRAGMENT_LEN];
                    let first = queries.partition_point(|q| fragment(&q.1)[..] < *f);
                    let height = entry_height(e);
                    for q in queries[first..]
                        .iter()
                        .take_while(|q| fragment(&q.1)[..] == *f)
                    {
                        if height <= tip {
                            out.push((height, q.2));
                        }
                    }
                }
            });
        }
        Ok(())
    }

    /// The block hashes at `heights` (each at or below the tip), read from the chunks
    /// that hold them: one transaction, one `get` per chunk, all in flight together.
    async fn hashes_at(&self, heights: &[u32]) -> Result<Vec<BlockHash>, StoreError> {
        let len = self.chunk_len();
        let mut out = vec![BlockHash::ZERO; heights.len()];
        let mut chunks: Vec<u32> = heights
            .iter()
            .map(|h| h / len)
            .filter(|k| *k != self.tail.chunk)
            .collect();
        chunks.sort_unstable();
        chunks.dedup();
        let mut reads = Vec::with_capacity(chunks.len());
        if !chunks.is_empty() {
            let tx = self.readonly(CHUNKS)?;
            let store = object_store(&tx, CHUNKS)?;
            for &k in &chunks {
                let req = store.get(&k.into()).map_err(store_error)?;
                let fut = request_future(&req);
                reads.push((k, req, fut));
            }
        }
        for (k, req, fut) in reads {
            fut.await.map_err(|_| request_error(&req))?;
            let record: Uint8Array =
                req.result()
                    .map_err(store_error)?
                    .dyn_into()
                    .map_err(|_| StoreError::Corrupt {
                        what: "missing chunk record",
                    })?;
            let mut chunk = self.expanded.borrow_mut();
            self.with_bytes(&record, |b| chunk.expand(k, b, len))?;
            for (o, h) in out.iter_mut().zip(heights) {
                if h / len == k {
                    *o = chunk.hash(h % len).ok_or(StoreError::Corrupt {
                        what: "chunk record length",
                    })?;
                }
            }
        }
        for (o, h) in out.iter_mut().zip(heights) {
            if h / len == self.tail.chunk {
                *o = self
                    .tail
                    .hash(h % len)
                    .ok_or(StoreError::Corrupt { what: "last chunk" })?;
            }
        }
        Ok(out)
    }

    /// The heights of `queries` (`(shard, hash, slot)`, sorted by shard then fragment),
    /// written to `out[slot]`: candidates from the index, confirmed by the stored hashes.
    async fn look_up(
        &self,
        queries: &[(u32, BlockHash, usize)],
        out: &mut [Option<u32>],
    ) -> Result<(), StoreError> {
        // One transaction; one getAll per distinct shard, all in flight together. Each
        // shard's records are then scanned once.
        let tx = self.readonly(INDEX)?;
        let index = object_store(&tx, INDEX)?;
        let mut reqs = Vec::new();
        for group in queries.chunk_by(|a, b| a.0 == b.0) {
            let req = self.shard_request(&index, group[0].0)?;
            let fut = request_future(&req);
            reqs.push((group, req, fut));
        }
        let mut candidates = Vec::new();
        for (group, req, fut) in reqs {
            fut.await.map_err(|_| request_error(&req))?;
            self.candidates_in_shard(&req, group, &mut candidates)?;
        }
        let heights: Vec<u32> = candidates.iter().map(|c| c.0).collect();
        let hashes = self.hashes_at(&heights).await?;
        let mut wanted = vec![BlockHash::ZERO; out.len()];
        for q in queries {
            wanted[q.2] = q.1;
        }
        for ((height, slot), hash) in candidates.into_iter().zip(hashes) {
            if wanted[slot] == hash {
                out[slot] = Some(height);
            }
        }
        Ok(())
    }
}

impl HeaderStore for IdbStore {
    fn params(&self) -> &'static Params {
        self.params
    }

    async fn tip(&self) -> Result<Tip, StoreError> {
        Ok(self.meta.tip)
    }

    async fn commit(&mut self, batch: Batch<'_>) -> Result<Tip, StoreError> {
        self.check_open()?;
        let base = batch_base(self.meta.tip.height, &batch)?;
        if base < self.meta.base {
            // Nothing below the store's start can be rolled back to.
            return Err(StoreError::OutOfRange {
                from: base,
                to: base,
                tip: self.meta.tip.height,
            });
        }
        let tip_after = batch
            .entries
            .last()
            .map_or(self.meta.tip.height, |e| e.height);
        let (filter_next, cut) = filter_next(self.meta.filter_next, tip_after, &batch)?;
        if batch.entries.is_empty() && batch.filters.is_empty() {
            return Ok(self.meta.tip);
        }
        // The parent is in memory unless a rollback reaches below the last chunk; then
        // the transaction reads it and checks there.
        if let Some(first) = batch.entries.first()
            && self.in_tail(base)
        {
            let parent = self.tail.hash(base % self.chunk_len());
            if parent != Some(first.header.prev_blockhash) {
                return Err(StoreError::DoesNotLink {
                    height: first.height,
                });
            }
        }
        let meta = Meta {
            tip: batch.entries.last().map_or(self.meta.tip, Tip::from),
            filter_next,
            ..self.meta
        };
        let durability = match batch.durability {
            Durability::Relaxed => "relaxed",
            Durability::Strict => "strict",
        };
        let options = Object::new();
        Reflect::set(&options, &"durability".into(), &durability.into()).map_err(store_error)?;
        let stores = Array::of5(
            &CHUNKS.into(),
            &INDEX.into(),
            &COMMITS.into(),
            &META.into(),
            &FILTERS.into(),
        );
        let t0 = now_ms();
        let tx = self
            .db
            .unchecked_ref::<DbWithOptions>()
            .transaction_with_options(&stores, "readwrite", &options)
            .map_err(store_error)?;
        let done = transaction_future(&tx);
        self.issued = 0;
        // Issued first: when another writer came first, the transaction fails with it,
        // whatever else fails then.
        let fence = match advance_fence(&tx, self.fence) {
            Ok(req) => req,
            Err(e) => {
                let _ = tx.abort();
                let _ = done.await;
                return Err(e);
            }
        };
        let refused = |e: StoreError| match fence.error() {
            Ok(Some(d)) if d.name() == "ConstraintError" => StoreError::ChangedElsewhere,
            _ => e,
        };
        if let Err(e) = self.commit_inner(&tx, base, cut, &batch, &meta).await {
            // Nothing is kept: the transaction is undone as a whole.
            let _ = tx.abort();
            let _ = done.await;
            return Err(refused(e));
        }
        // Everything is issued: the browser may commit now rather than once this thread has
        // taken every request's event. (A browser without `commit()`, Safari before 15,
        // commits when they are taken, as before; web-sys marks the binding deprecated,
        // though the method is in the IndexedDB 3.0 standard every engine we test ships.)
        #[allow(deprecated)]
        let _ = tx.commit();
        done.await.map_err(|_| refused(transaction_error(&tx)))?;
        self.fence += 1;

        if !batch.entries.is_empty() {
            core::mem::swap(&mut self.tail, &mut self.spare);
        }
        core::mem::swap(&mut self.ftail, &mut self.fspare);
        self.meta = meta;
        let ms = now_ms() - t0;
        self.stats.commits += 1;
        self.stats.headers_written += batch.entries.len() as u64;
        self.stats.filter_headers_written += batch.filters.headers.len() as u64;
        self.stats.records_written += self.issued;
        self.stats.commit_ms += ms;
        self.stats.last_commit_ms = ms;
        Ok(self.meta.tip)
    }

    fn base(&self) -> u32 {
        self.meta.base
    }

    async fn record(&self, key: RecordKey) -> Result<Option<Vec<u8>>, StoreError> {
        let tx = self.readonly(RECORDS)?;
        let req = object_store(&tx, RECORDS)?
            .get(&key.name().into())
            .map_err(store_error)?;
        Ok(bytes_of(&request_result(&req).await?))
    }

    async fn put_record(
        &mut self,
        key: RecordKey,
        record: Option<&[u8]>,
    ) -> Result<(), StoreError> {
        self.check_open()?;
        let tx = self
            .db
            .transaction_with_str_and_mode(RECORDS, IdbTransactionMode::Readwrite)
            .map_err(store_error)?;
        let done = transaction_future(&tx);
        let store = object_store(&tx, RECORDS)?;
        match record {
            Some(b) => store
                .put_with_key(&Uint8Array::from(b), &key.name().into())
                .map(drop),
            None => store.delete(&key.name().into()).map(drop),
        }
        .map_err(store_error)?;
        done.await.map(drop).map_err(|_| transaction_error(&tx))
    }

    async fn filter_tip(&self) -> Result<Option<FilterTip>, StoreError> {
        Ok(self.ftail.headers.last().map(|h| FilterTip {
            height: self.ftail.next() - 1,
            header: *h,
        }))
    }

    async fn filter_headers(
        &self,
        from: u32,
        to: u32,
        out: &mut Vec<FilterHeader>,
    ) -> Result<(), StoreError> {
        let next = self.meta.filter_next;
        if from > to || to >= next || from < self.meta.base {
            return Err(StoreError::OutOfRange {
                from,
                to,
                tip: next.saturating_sub(1),
            });
        }
        let (first_chunk, tail_chunk) = (from / FILTER_CHUNK, self.ftail.chunk);
        if first_chunk < tail_chunk {
            let last = (to / FILTER_CHUNK).min(tail_chunk - 1);
            let tx = self.readonly(FILTERS)?;
            let range =
                IdbKeyRange::bound(&first_chunk.into(), &last.into()).map_err(store_error)?;
            let req = object_store(&tx, FILTERS)?
                .get_all_with_key(&range)
                .map_err(store_error)?;
            let records: Array = request_result(&req).await?.unchecked_into();
            if records.length() != last - first_chunk + 1 {
                return Err(StoreError::Corrupt {
                    what: "missing filter record",
                });
            }
            for (k, record) in (first_chunk..).zip(records.iter()) {
                let record: Uint8Array = record.dyn_into().map_err(|_| StoreError::Corrupt {
                    what: "filter record type",
                })?;
                // Copied through the scratch buffer and taken straight into `out`: a read
                // allocates nothing once the buffers have grown.
                let first = (k * FILTER_CHUNK).max(self.meta.base);
                let end = (k + 1) * FILTER_CHUNK;
                self.with_bytes(&record, |b| {
                    if b.len() != (end - first) as usize * 32 {
                        return Err(StoreError::Corrupt {
                            what: "filter record length",
                        });
                    }
                    let lo = from.max(first) - first;
                    let hi = to.min(end - 1) - first;
                    let taken = b[lo as usize * 32..(hi as usize + 1) * 32].chunks_exact(32);
                    out.extend(
                        taken.filter_map(|c| <[u8; 32]>::try_from(c).ok().map(FilterHeader)),
                    );
                    Ok(())
                })?;
            }
        }
        if to / FILTER_CHUNK >= tail_chunk {
            let t = &self.ftail;
            let lo = from.max(t.first) - t.first;
            let hi = to - t.first;
            out.extend_from_slice(t.headers.get(lo as usize..=hi as usize).ok_or(
                StoreError::Corrupt {
                    what: "filter tail",
                },
            )?);
        }
        Ok(())
    }

    async fn header(&self, height: u32) -> Result<Option<Header>, StoreError> {
        if height > self.meta.tip.height || height < self.meta.base {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(1);
        self.headers(height, height, &mut out).await?;
        Ok(out.pop())
    }

    async fn headers(&self, from: u32, to: u32, out: &mut Vec<Header>) -> Result<(), StoreError> {
        let tip = self.meta.tip.height;
        if from > to || to > tip || from < self.meta.base {
            return Err(StoreError::OutOfRange { from, to, tip });
        }
        let len = self.chunk_len();
        out.reserve((to - from + 1) as usize);
        let (first_chunk, last_chunk) = (from / len, (to / len).min(self.tail.chunk));
        if first_chunk < self.tail.chunk {
            // Stored chunks first, with one getAll.
            let stored_last = last_chunk.min(self.tail.chunk - 1);
            let tx = self.readonly(CHUNKS)?;
            let range = IdbKeyRange::bound(&first_chunk.into(), &stored_last.into())
                .map_err(store_error)?;
            let req = object_store(&tx, CHUNKS)?
                .get_all_with_key(&range)
                .map_err(store_error)?;
            let records: Array = request_result(&req).await?.unchecked_into();
            if records.length() != stored_last - first_chunk + 1 {
                return Err(StoreError::Corrupt {
                    what: "missing chunk record",
                });
            }
            let mut chunk = self.expanded.borrow_mut();
            for (k, record) in (first_chunk..).zip(records.iter()) {
                let record: Uint8Array = record.dyn_into().map_err(|_| StoreError::Corrupt {
                    what: "chunk record type",
                })?;
                self.with_bytes(&record, |b| chunk.expand(k, b, len))?;
                if chunk.len() != len {
                    return Err(StoreError::Corrupt {
                        what: "chunk record length",
                    });
                }
                let lo = from.max(k * len) - k * len;
                let hi = to.min(k * len + len - 1) - k * len;
                out.extend((lo..=hi).filter_map(|i| chunk.header_bytes(i).map(Header::decode)));
            }
        }
        if to / len >= self.tail.chunk {
            let lo = from.max(self.tail.chunk * len) - self.tail.chunk * len;
            let hi = to - self.tail.chunk * len;
            out.extend((lo..=hi).filter_map(|i| self.tail.header_bytes(i).map(Header::decode)));
        }
        Ok(())
    }

    async fn height_of(&self, hash: &BlockHash) -> Result<Option<u32>, StoreError> {
        let mut out = [None];
        let query = [(prefix(hash, self.meta.prefix_bits), *hash, 0)];
        self.look_up(&query, &mut out).await?;
        Ok(out[0])
    }

    async fn heights_of(
        &self,
        hashes: &[BlockHash],
        out: &mut Vec<Option<u32>>,
    ) -> Result<(), StoreError> {
        if hashes.is_empty() {
            return Ok(());
        }
        let bits = self.meta.prefix_bits;
        let mut queries: Vec<(u32, BlockHash, usize)> = hashes
            .iter()
            .enumerate()
            .map(|(i, h)| (prefix(h, bits), *h, i))
            .collect();
        queries.sort_unstable_by_key(|q| (q.0, fragment(&q.1)));
        let start = out.len();
        out.resize(start + hashes.len(), None);
        self.look_up(&queries, &mut out[start..]).await
    }

    async fn chainwork_at_period_start(&self, height: u32) -> Result<Work, StoreError> {
        let len = self.chunk_len();
        let tip = self.meta.tip.height;
        // A period start is a chunk start (CHUNK_LEN divides the interval).
        let interval = self.params.retarget_interval;
        if height % interval != 0 || height > tip || height < self.meta.base {
            return Err(StoreError::OutOfRange {
                from: height,
                to: height,
                tip,
            });
        }
        if height / len == self.tail.chunk {
            return chunk_work(&self.tail.bytes).ok_or(StoreError::Corrupt { what: "last chunk" });
        }
        let tx = self.readonly(CHUNKS)?;
        let req = object_store(&tx, CHUNKS)?
            .get(&(height / len).into())
            .map_err(store_error)?;
        let record: Uint8Array =
            request_result(&req)
                .await?
                .dyn_into()
                .map_err(|_| StoreError::Corrupt {
                    what: "missing chunk record",
                })?;
        let mut work = [0u8; CHUNK_WORK_LEN];
        if record.length() < CHUNK_WORK_LEN as u32 {
            return Err(StoreError::Corrupt {
                what: "chunk record length",
            });
        }
        record.subarray(0, CHUNK_WORK_LEN as u32).copy_to(&mut work);
        chunk_work(&work).ok_or(StoreError::Corrupt {
            what: "chunk record",
        })
    }
}

#[cfg(test)]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn dom(name: &str) -> JsValue {
        DomException::new_with_message_and_name("from the test", name)
            .expect("DOMException")
            .into()
    }

    #[test]
    fn browser_errors_become_typed_store_errors() {
        assert_eq!(
            store_error(dom("QuotaExceededError")),
            StoreError::QuotaExceeded
        );
        assert_eq!(store_error(dom("InvalidStateError")), StoreError::Closed);
        assert_eq!(
            store_error(dom("UnknownError")),
            StoreError::Backend("UnknownError: from the test".into())
        );
        assert!(matches!(
            store_error(JsValue::from_str("thrown string")),
            StoreError::Backend(_)
        ));
    }
}
