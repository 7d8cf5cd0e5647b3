//! The IndexedDB backend (wasm): [`IdbStore`]. The records it writes are described in
//! [`crate::layout`]; this module only moves them in and out of IndexedDB.
//!
//! Written on web-sys rather than the `idb` crate because `idb` cannot open a transaction
//! with `durability: 'relaxed'`, which bulk commits use (a commit is the sync point of
//! IndexedDB: 19 such commits store the 925,000-header chain in 2.2-3.7 s in Chromium,
//! benches/README.md), and because the commit pipeline issues its writes without
//! awaiting each request.
//!
//! Every commit is one readwrite transaction over all four object stores. It first reads
//! the meta record and compares it with the tip this store last wrote (another tab may
//! share the database), and only then can the transaction commit: a mismatch aborts it.
//! An append issues its writes at once, without waiting for that read, so the browser
//! writes while the caller goes on validating; a rollback (a reorg) must read before it
//! writes, and is rare. The store's in-memory state (tip, last chunk) changes only once
//! the transaction has completed, so a refused or failed commit leaves the store, on disk
//! and in memory, at its last committed batch.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use js_sys::{Array, Object, Promise, Reflect, Uint8Array};
use lightwire_chain::{BlockHash, Header, Params, Work};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    DomException, IdbCursorDirection, IdbCursorWithValue, IdbDatabase, IdbFactory, IdbKeyRange,
    IdbObjectStore, IdbOpenDbRequest, IdbRequest, IdbTransaction, IdbTransactionMode,
    IdbVersionChangeEvent,
};

use crate::layout::{
    CHUNK_WORK_LEN, DEFAULT_PREFIX_BITS, FILTER_CHUNK, FRAGMENT_LEN, Grouped, INDEX_ENTRY_LEN,
    MAX_PREFIX_BITS, Meta, Tail, chunk_work, entry_height, find_in_index, fragment, prefix,
    retain_up_to, v1,
};
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
    headers: Vec<[u8; 32]>,
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
                .filter_map(|c| c.try_into().ok())
                .collect(),
        })
    }

    fn encode(&self) -> Uint8Array {
        let flat: Vec<u8> = self.headers.iter().flatten().copied().collect();
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
        let factory = factory()?;
        // Refused at once (a storage-blocking setting, an opaque origin): not a store error
        // the app can fix by reopening.
        let req = factory
            .open_with_u32(name, SCHEMA_VERSION)
            .map_err(|e| unavailable(store_error(e)))?;
        let failed: Rc<RefCell<Option<StoreError>>> = Rc::default();
        let on_upgrade = {
            let req = req.clone();
            let failed = failed.clone();
            Closure::once(move |event: IdbVersionChangeEvent| {
                let old = event.old_version();
                let result = if old == 0.0 {
                    create(&req, params, options)
                } else if [1.0, 2.0, 3.0].contains(&old) {
                    let old = old as u32;
                    // Requests issued from the task (which starts in this event's
                    // microtasks) keep the versionchange transaction alive until it is done.
                    match (req.transaction(), create_later_stores(&req, old)) {
                        (Some(tx), Ok(())) => {
                            wasm_bindgen_futures::spawn_local(async move {
                                if let Err(e) = migrate(&tx, old, params).await {
                                    let _ = tx.abort();
                                    *failed.borrow_mut() = Some(e);
                                }
                            });
                            return;
                        }
                        (_, Err(e)) => Err(e),
                        (None, _) => Err(StoreError::Backend("no upgrade transaction".into())),
                    }
                } else {
                    Err(StoreError::Backend(format!(
                        "no migration from layout version {old} to {SCHEMA_VERSION}"
                    )))
                };
                if let Err(e) = result {
                    if let Some(tx) = req.transaction() {
                        let _ = tx.abort();
                    }
                    *failed.borrow_mut() = Some(e);
                }
            })
        };
        req.set_onupgradeneeded(Some(on_upgrade.as_ref().unchecked_ref()));
        let opened = request_future(&req).await;
        req.set_onupgradeneeded(None);
        drop(on_upgrade);
        if let Some(e) = failed.borrow_mut().take() {
            return Err(e);
        }
        let db: IdbDatabase = match opened {
            Ok(_) => req.result().map_err(store_error)?.unchecked_into(),
            Err(_) => {
                return Err(match req.error() {
                    // A newer build upgraded the database past what this one reads.
                    Ok(Some(e)) if e.name() == "VersionError" => StoreError::SchemaTooNew {
                        found: stored_version(&factory, name).await?,
                        supported: SCHEMA_VERSION,
                    },
                    // Some private windows refuse to open any database.
                    _ => unavailable(request_error(&req)),
                });
            }
        };

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
        let (meta, tail, ftail) = match loaded {
            Ok(v) => v,
            Err(e) => {
                db.close();
                return Err(e);
            }
        };
        let len = params.retarget_interval;
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
        self.params.retarget_interval
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

    /// Build the tail the commit leaves in `self.spare`, starting from `tail` (or the stored
    /// chunk holding `base`, expanded) cut after `base`, and issue every write of the commit
    /// on `tx`.
    fn write(
        &mut self,
        tx: &IdbTransaction,
        base: u32,
        from_stored: Option<&Tail>,
        batch: &Batch<'_>,
        meta: &Meta,
    ) -> Result<(), StoreError> {
        let len = self.chunk_len();
        let chunks = object_store(tx, CHUNKS)?;
        let index = object_store(tx, INDEX)?;
        let commits = object_store(tx, COMMITS)?;

        // The chunk holding `base`, cut after it.
        let spare = &mut self.spare;
        spare.copy_from(from_stored.unwrap_or(&self.tail));
        let before = spare.len();
        spare.truncate(base % len + 1);
        // A full chunk that was stored as it is needs no rewrite.
        let mut dirty = spare.len() != before || from_stored.is_some();

        let mut written = 0;
        for e in batch.entries {
            if spare.len() == len {
                if dirty {
                    spare.encode(len, &mut self.encoded)?;
                    chunks
                        .put_with_key(&Uint8Array::from(&self.encoded[..]), &spare.chunk.into())
                        .map_err(store_error)?;
                    written += 1;
                }
                spare.restart(spare.chunk + 1, &e.chainwork);
            }
            spare.push(&e.header.encode(), e.hash);
            dirty = true;
        }
        // `batch.entries` is not empty, so the last chunk changed. Coding it checks that
        // the batch links (the stored form keeps no previous-block hashes).
        spare.encode(len, &mut self.encoded)?;
        chunks
            .put_with_key(&Uint8Array::from(&self.encoded[..]), &spare.chunk.into())
            .map_err(store_error)?;
        written += 1;

        let first = base + 1;
        let bits = self.meta.prefix_bits;
        self.grouped
            .fill(bits, batch.entries.iter().map(|e| (&e.hash, e.height)));
        for p in 0..self.grouped.shards() {
            let entries = self.grouped.of(p);
            if !entries.is_empty() {
                index
                    .put_with_key(&Uint8Array::from(entries), &index_key(p as u32, first))
                    .map_err(store_error)?;
                written += 1;
            }
        }
        commits
            .put_with_key(&meta.tip.height.into(), &first.into())
            .map_err(store_error)?;
        self.issued += written + 1;
        Ok(())
    }

    /// The filter part of a commit: cut the stored filter headers at `cut` (reading the
    /// record that holds the last one kept, when it is not the tail) and append `run`,
    /// building the next tail in `self.fspare`.
    async fn write_filters(
        &mut self,
        tx: &IdbTransaction,
        cut: u32,
        run: &FilterRun<'_>,
    ) -> Result<(), StoreError> {
        let store = object_store(tx, FILTERS)?;
        let base = self.meta.base;
        self.fspare.clone_from(&self.ftail);
        if run.headers.is_empty() && cut == self.meta.filter_next {
            return Ok(());
        }
        if cut < self.meta.filter_next {
            if cut == base {
                self.fspare = FilterTail::empty_at(base);
            } else {
                let k = (cut - 1) / FILTER_CHUNK;
                if k != self.ftail.chunk {
                    let req = store.get(&k.into()).map_err(store_error)?;
                    let bytes =
                        bytes_of(&request_result(&req).await?).ok_or(StoreError::Corrupt {
                            what: "missing filter record",
                        })?;
                    let first = (k * FILTER_CHUNK).max(base);
                    self.fspare = FilterTail::from_record(k, first, &bytes)?;
                }
                let keep = (cut - self.fspare.first) as usize;
                if keep > self.fspare.headers.len() {
                    return Err(StoreError::Corrupt {
                        what: "filter record shorter than the stored filter tip",
                    });
                }
                self.fspare.headers.truncate(keep);
            }
            let above = IdbKeyRange::lower_bound_with_open(&self.fspare.chunk.into(), true)
                .map_err(store_error)?;
            store.delete(&above).map_err(store_error)?;
            self.issued += 1;
        }
        for h in run.headers {
            if self.fspare.next() == (self.fspare.chunk + 1) * FILTER_CHUNK {
                store
                    .put_with_key(&self.fspare.encode(), &self.fspare.chunk.into())
                    .map_err(store_error)?;
                self.issued += 1;
                self.fspare = FilterTail::empty_at((self.fspare.chunk + 1) * FILTER_CHUNK);
            }
            self.fspare.headers.push(*h);
        }
        if self.fspare.headers.is_empty() {
            store
                .delete(&self.fspare.chunk.into())
                .map_err(store_error)?;
        } else {
            store
                .put_with_key(&self.fspare.encode(), &self.fspare.chunk.into())
                .map_err(store_error)?;
        }
        self.issued += 1;
        Ok(())
    }

    /// The rollback part of a commit: read what the rollback cuts through, check that the
    /// batch links to the header at `base`, and issue the deletes. Returns the stored chunk
    /// holding `base`, expanded, when it is not the tail.
    async fn roll_back(
        &mut self,
        tx: &IdbTransaction,
        base: u32,
        batch: &Batch<'_>,
    ) -> Result<Option<Tail>, StoreError> {
        let len = self.chunk_len();
        let chunks = object_store(tx, CHUNKS)?;
        let index = object_store(tx, INDEX)?;
        let commits = object_store(tx, COMMITS)?;

        // The commit whose range holds `base`: its index records are cut, not deleted.
        let cursor_req = commits
            .open_cursor_with_range_and_direction(
                &key_range(IdbKeyRange::upper_bound(&base.into()))?,
                IdbCursorDirection::Prev,
            )
            .map_err(store_error)?;
        let cursor_fut = request_future(&cursor_req);
        let chunk_req = if base / len < self.tail.chunk {
            Some(chunks.get(&(base / len).into()).map_err(store_error)?)
        } else {
            None
        };
        let chunk_fut = chunk_req.as_ref().map(request_future);

        cursor_fut.await.map_err(|_| request_error(&cursor_req))?;
        let cursor = cursor_req
            .result()
            .map_err(store_error)?
            .dyn_into::<IdbCursorWithValue>()
            .map_err(|_| StoreError::Corrupt {
                what: "no commit record at or below the rollback height",
            })?;
        let cut_start = cursor
            .key()
            .ok()
            .and_then(|k| k.as_f64())
            .ok_or(StoreError::Corrupt {
                what: "commit record key",
            })? as u32;
        let cut_end = cursor
            .value()
            .ok()
            .and_then(|v| v.as_f64())
            .ok_or(StoreError::Corrupt {
                what: "commit record value",
            })? as u32;

        let stored_chunk = match (chunk_req, chunk_fut) {
            (Some(req), Some(fut)) => {
                fut.await.map_err(|_| request_error(&req))?;
                let record =
                    bytes_of(&req.result().map_err(store_error)?).ok_or(StoreError::Corrupt {
                        what: "missing chunk record",
                    })?;
                let mut chunk = Tail::default();
                chunk.expand(base / len, &record, len)?;
                if chunk.len() != len {
                    return Err(StoreError::Corrupt {
                        what: "chunk record length",
                    });
                }
                Some(chunk)
            }
            _ => None,
        };
        let parent = match &stored_chunk {
            Some(chunk) => chunk.hash(base % len),
            None => self.tail.hash(base % len),
        };
        if let Some(first) = batch.entries.first()
            && parent != Some(first.header.prev_blockhash)
        {
            return Err(StoreError::DoesNotLink {
                height: first.height,
            });
        }

        let shards = 1u32 << self.meta.prefix_bits;
        if cut_end > base {
            // Read that commit's index records, keep what is at or below `base`.
            let mut reads = Vec::with_capacity(shards as usize);
            for p in 0..shards {
                let req = index.get(&index_key(p, cut_start)).map_err(store_error)?;
                let fut = request_future(&req);
                reads.push((p, req, fut));
            }
            for (p, req, fut) in reads {
                fut.await.map_err(|_| request_error(&req))?;
                let Some(mut record) = bytes_of(&req.result().map_err(store_error)?) else {
                    continue;
                };
                retain_up_to(&mut record, base);
                let key = index_key(p, cut_start);
                if record.is_empty() {
                    index.delete(&key).map_err(store_error)?;
                } else {
                    index
                        .put_with_key(&Uint8Array::from(&record[..]), &key)
                        .map_err(store_error)?;
                }
            }
            commits
                .put_with_key(&base.into(), &cut_start.into())
                .map_err(store_error)?;
        }
        // Everything written after `base`.
        for p in 0..shards {
            let range = IdbKeyRange::bound_with_lower_open_and_upper_open(
                &index_key(p, base + 1),
                &Array::of1(&(p + 1).into()),
                false,
                true,
            )
            .map_err(store_error)?;
            index.delete(&range).map_err(store_error)?;
        }
        let above = |key: u32| key_range(IdbKeyRange::lower_bound_with_open(&key.into(), true));
        commits.delete(&above(base)?).map_err(store_error)?;
        chunks.delete(&above(base / len)?).map_err(store_error)?;
        self.issued += u64::from(shards) + 2;
        Ok(stored_chunk)
    }

    async fn commit_inner(
        &mut self,
        tx: &IdbTransaction,
        base: u32,
        cut: u32,
        batch: &Batch<'_>,
        meta: &Meta,
    ) -> Result<(), StoreError> {
        let meta_store = object_store(tx, META)?;
        let meta_req = meta_store.get(&META_KEY.into()).map_err(store_error)?;
        let meta_fut = request_future(&meta_req);
        if batch.rollback_to.is_some() {
            meta_fut.await.map_err(|_| request_error(&meta_req))?;
            self.check_unchanged(&meta_req)?;
            let stored = self.roll_back(tx, base, batch).await?;
            self.write(tx, base, stored.as_ref(), batch, meta)?;
            self.write_filters(tx, cut, &batch.filters).await?;
        } else {
            // Writes go out now; the check below still comes before the commit can.
            if !batch.entries.is_empty() {
                self.write(tx, base, None, batch, meta)?;
            }
            // Reads a record only to cut stored filter headers below the tail.
            self.write_filters(tx, cut, &batch.filters).await?;
            meta_fut.await.map_err(|_| request_error(&meta_req))?;
            self.check_unchanged(&meta_req)?;
        }
        meta_store
            .put_with_key(&Uint8Array::from(&meta.encode()[..]), &META_KEY.into())
            .map_err(store_error)?;
        self.issued += 1;
        Ok(())
    }

    fn check_unchanged(&self, meta_req: &IdbRequest) -> Result<(), StoreError> {
        let stored =
            bytes_of(&meta_req.result().map_err(store_error)?).ok_or(StoreError::Corrupt {
                what: "missing meta record",
            })?;
        if stored[..] != self.meta.encode()[..] {
            return Err(StoreError::ChangedElsewhere);
        }
        Ok(())
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
        if let Err(e) = self.commit_inner(&tx, base, cut, &batch, &meta).await {
            // Nothing is kept: the transaction is undone as a whole.
            let _ = tx.abort();
            let _ = done.await;
            return Err(e);
        }
        done.await.map_err(|_| transaction_error(&tx))?;

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
        out: &mut Vec<[u8; 32]>,
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
                    out.extend(taken.filter_map(|c| <[u8; 32]>::try_from(c).ok()));
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
        if height % len != 0 || height > tip || height < self.meta.base {
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

/// Create the object stores of a new database, inside the open request's versionchange
/// transaction.
fn create(req: &IdbOpenDbRequest, params: &Params, options: IdbOptions) -> Result<(), StoreError> {
    let db: IdbDatabase = req.result().map_err(store_error)?.unchecked_into();
    let start = options.start.unwrap_or_else(|| Start::genesis(params));
    let meta = Meta::starting_at(params, &start, options.prefix_bits);
    let hash = meta.tip.hash;
    let (base, len) = (start.height, params.retarget_interval);

    let chunks = db.create_object_store(CHUNKS).map_err(store_error)?;
    let mut chunk = Tail::start(base / len, &meta.tip.chainwork, 1);
    chunk.push(&start.header.encode(), hash);
    let mut stored = Vec::new();
    chunk.encode(len, &mut stored)?;
    chunks
        .put_with_key(&Uint8Array::from(&stored[..]), &(base / len).into())
        .map_err(store_error)?;

    let index = db.create_object_store(INDEX).map_err(store_error)?;
    let mut entry = [0u8; INDEX_ENTRY_LEN];
    entry[..FRAGMENT_LEN].copy_from_slice(&fragment(&hash));
    entry[FRAGMENT_LEN..].copy_from_slice(&base.to_le_bytes());
    index
        .put_with_key(
            &Uint8Array::from(&entry[..]),
            &index_key(prefix(&hash, options.prefix_bits), base),
        )
        .map_err(store_error)?;

    let commits = db.create_object_store(COMMITS).map_err(store_error)?;
    commits
        .put_with_key(&base.into(), &base.into())
        .map_err(store_error)?;

    db.create_object_store(FILTERS).map_err(store_error)?;
    db.create_object_store(RECORDS).map_err(store_error)?;
    db.create_object_store(META)
        .map_err(store_error)?
        .put_with_key(&Uint8Array::from(&meta.encode()[..]), &META_KEY.into())
        .map_err(store_error)?;
    Ok(())
}

/// Chunk records read per request while migrating (16 layout-1 chunks: 2.6 MB).
const MIGRATE_CHUNKS: u32 = 16;

/// Migrate a layout-1 store to this layout in place, inside the open request's
/// versionchange transaction `tx`: every chunk record coded, every index record cut to
/// fragments, keys kept (commit records and the meta's tip are the same in both layouts),
/// then the meta's layout version. The open request completes only once this has, and if
/// anything fails the transaction is aborted: the store stays as it was, in layout 1.
async fn migrate_from_v1(tx: &IdbTransaction, params: &'static Params) -> Result<(), StoreError> {
    let corrupt = |what| StoreError::Corrupt { what };
    let meta_store = object_store(tx, META)?;
    let req = meta_store.get(&META_KEY.into()).map_err(store_error)?;
    let stored = bytes_of(&request_result(&req).await?).ok_or(corrupt("missing meta record"))?;
    let mut meta = Meta::decode(&stored)?;
    meta.check(params)?;
    if meta.schema != 1 {
        return Err(corrupt("meta record layout version"));
    }
    let len = params.retarget_interval;
    let chunks = object_store(tx, CHUNKS)?;
    let last = meta.tip.height / len;
    let mut out = Vec::new();
    let mut k = 0;
    while k <= last {
        let hi = (k + MIGRATE_CHUNKS - 1).min(last);
        let range = IdbKeyRange::bound(&k.into(), &hi.into()).map_err(store_error)?;
        let req = chunks.get_all_with_key(&range).map_err(store_error)?;
        let records: Array = request_result(&req).await?.unchecked_into();
        if records.length() != hi - k + 1 {
            return Err(corrupt("missing chunk record"));
        }
        for (c, record) in (k..).zip(records.iter()) {
            let bytes = bytes_of(&record).ok_or(corrupt("chunk record type"))?;
            v1::convert_chunk(&bytes, c * len, len, &mut out)?;
            chunks
                .put_with_key(&Uint8Array::from(&out[..]), &c.into())
                .map_err(store_error)?;
        }
        k = hi + 1;
    }
    // The index, about 256 shards' records per request.
    let index = object_store(tx, INDEX)?;
    let shards = 1u32 << meta.prefix_bits;
    let step = (shards / 256).max(1);
    for p in (0..shards).step_by(step as usize) {
        let range = IdbKeyRange::bound_with_lower_open_and_upper_open(
            &Array::of1(&p.into()),
            &Array::of1(&(p + step).into()),
            false,
            true,
        )
        .map_err(store_error)?;
        let keys_req = index.get_all_keys_with_key(&range).map_err(store_error)?;
        let values_req = index.get_all_with_key(&range).map_err(store_error)?;
        let keys: Array = request_result(&keys_req).await?.unchecked_into();
        let values: Array = request_result(&values_req).await?.unchecked_into();
        for (key, value) in keys.iter().zip(values.iter()) {
            let bytes = bytes_of(&value).ok_or(corrupt("index record type"))?;
            out.clear();
            v1::convert_index(&bytes, &mut out)?;
            index
                .put_with_key(&Uint8Array::from(&out[..]), &key)
                .map_err(store_error)?;
        }
    }
    meta.schema = SCHEMA_VERSION;
    meta_store
        .put_with_key(&Uint8Array::from(&meta.encode()[..]), &META_KEY.into())
        .map_err(store_error)?;
    Ok(())
}

/// Read the meta record and the last chunk of an open database.
async fn load(
    db: &IdbDatabase,
    params: &'static Params,
) -> Result<(Meta, Tail, FilterTail), StoreError> {
    let stores = Array::of3(&META.into(), &CHUNKS.into(), &FILTERS.into());
    let tx = db
        .transaction_with_str_sequence_and_mode(&stores, IdbTransactionMode::Readonly)
        .map_err(store_error)?;
    let req = object_store(&tx, META)?
        .get(&META_KEY.into())
        .map_err(store_error)?;
    let meta = bytes_of(&request_result(&req).await?).ok_or(StoreError::Corrupt {
        what: "missing meta record",
    })?;
    let meta = Meta::decode(&meta)?;
    meta.check(params)?;
    let len = params.retarget_interval;
    let chunk = meta.tip.height / len;
    let req = object_store(&tx, CHUNKS)?
        .get(&chunk.into())
        .map_err(store_error)?;
    let bytes = bytes_of(&request_result(&req).await?).ok_or(StoreError::Corrupt {
        what: "missing last chunk",
    })?;
    let mut tail = Tail::from_record(chunk, &bytes, len, &meta.tip)?;
    let room = len.saturating_sub(tail.len()) as usize;
    tail.bytes.reserve(room * lightwire_chain::HEADER_LEN);
    tail.hashes.reserve(room);
    let ftail = if meta.filter_next > meta.base {
        let k = (meta.filter_next - 1) / FILTER_CHUNK;
        let req = object_store(&tx, FILTERS)?
            .get(&k.into())
            .map_err(store_error)?;
        let bytes = bytes_of(&request_result(&req).await?).ok_or(StoreError::Corrupt {
            what: "missing last filter record",
        })?;
        let t = FilterTail::from_record(k, (k * FILTER_CHUNK).max(meta.base), &bytes)?;
        if t.next() != meta.filter_next {
            return Err(StoreError::Corrupt {
                what: "last filter record length",
            });
        }
        t
    } else {
        FilterTail::empty_at(meta.base)
    };
    Ok((meta, tail, ftail))
}

/// Create the object stores that layouts after `old` added, inside the open request's
/// versionchange transaction: `filters` (layout 3) and `records` (layout 4).
fn create_later_stores(req: &IdbOpenDbRequest, old: u32) -> Result<(), StoreError> {
    let db: IdbDatabase = req.result().map_err(store_error)?.unchecked_into();
    if old < 3 {
        db.create_object_store(FILTERS).map_err(store_error)?;
    }
    db.create_object_store(RECORDS).map_err(store_error)?;
    Ok(())
}

/// Migrate a store of layout `old` (1, 2 or 3) to this one, inside the open request's
/// versionchange transaction `tx`, once [`create_later_stores`] has run. If anything fails
/// the caller aborts the transaction: the store stays as it was.
async fn migrate(tx: &IdbTransaction, old: u32, params: &'static Params) -> Result<(), StoreError> {
    match old {
        1 => migrate_from_v1(tx, params).await,
        // Layout 2 to 4: the same records, a `filters` object store and a meta record
        // that says no filter header is stored yet.
        2 => set_layout_version(tx, 2, params).await,
        _ => {
            set_layout_version(tx, 3, params).await?;
            move_layout_3_records(tx).await
        }
    }
}

/// Layout 3 to 4: every saved record moves from `scans` to `records` (created by the
/// caller) as it is, under the same key, and `scans` is deleted.
async fn move_layout_3_records(tx: &IdbTransaction) -> Result<(), StoreError> {
    let old = object_store(tx, LAYOUT_3_RECORDS)?;
    let keys_req = old.get_all_keys().map_err(store_error)?;
    let values_req = old.get_all().map_err(store_error)?;
    // Both in key order.
    let keys: Array = request_result(&keys_req).await?.unchecked_into();
    let values: Array = request_result(&values_req).await?.unchecked_into();
    let records = object_store(tx, RECORDS)?;
    for (key, value) in keys.iter().zip(values.iter()) {
        records.put_with_key(&value, &key).map_err(store_error)?;
    }
    tx.db()
        .delete_object_store(LAYOUT_3_RECORDS)
        .map_err(store_error)
}

/// Rewrite the meta record of a store of layout `from` (checked) as this layout's: the
/// fields it lacked take their defaults ([`Meta::decode`]).
async fn set_layout_version(
    tx: &IdbTransaction,
    from: u32,
    params: &'static Params,
) -> Result<(), StoreError> {
    let meta_store = object_store(tx, META)?;
    let req = meta_store.get(&META_KEY.into()).map_err(store_error)?;
    let stored = bytes_of(&request_result(&req).await?).ok_or(StoreError::Corrupt {
        what: "missing meta record",
    })?;
    let mut meta = Meta::decode(&stored)?;
    meta.check(params)?;
    if meta.schema != from {
        return Err(StoreError::Corrupt {
            what: "meta record layout version",
        });
    }
    meta.schema = SCHEMA_VERSION;
    meta_store
        .put_with_key(&Uint8Array::from(&meta.encode()[..]), &META_KEY.into())
        .map_err(store_error)?;
    Ok(())
}

/// The version of an existing database (opened without asking for one, then closed).
async fn stored_version(factory: &IdbFactory, name: &str) -> Result<u32, StoreError> {
    let req = factory.open(name).map_err(store_error)?;
    let db: IdbDatabase = request_result(&req).await?.unchecked_into();
    let version = db.version();
    db.close();
    Ok(version as u32)
}

/// `indexedDB` of the window or worker this runs in.
fn factory() -> Result<IdbFactory, StoreError> {
    Reflect::get(&js_sys::global(), &"indexedDB".into())
        .ok()
        .and_then(|f| f.dyn_into::<IdbFactory>().ok())
        .ok_or_else(|| StoreError::Unavailable("no indexedDB in this context".into()))
}

fn now_ms() -> f64 {
    Reflect::get(&js_sys::global(), &"performance".into())
        .ok()
        .and_then(|p| p.dyn_into::<web_sys::Performance>().ok())
        .map_or(0.0, |p| p.now())
}

fn object_store(tx: &IdbTransaction, name: &str) -> Result<IdbObjectStore, StoreError> {
    tx.object_store(name).map_err(store_error)
}

fn key_range(r: Result<IdbKeyRange, JsValue>) -> Result<JsValue, StoreError> {
    r.map(JsValue::from).map_err(store_error)
}

fn index_key(p: u32, first: u32) -> JsValue {
    Array::of2(&p.into(), &first.into()).into()
}

/// The bytes of a stored `Uint8Array` value, `None` if there is no record.
fn bytes_of(value: &JsValue) -> Option<Vec<u8>> {
    value.dyn_ref::<Uint8Array>().map(Uint8Array::to_vec)
}

/// Resolves once the request succeeds (set up now, before the request can complete).
pub fn request_future(req: &IdbRequest) -> JsFuture {
    let promise = Promise::new(&mut |resolve, reject| {
        req.set_onsuccess(Some(&resolve));
        req.set_onerror(Some(&reject));
    });
    JsFuture::from(promise)
}

async fn request_result(req: &IdbRequest) -> Result<JsValue, StoreError> {
    request_future(req).await.map_err(|_| request_error(req))?;
    req.result().map_err(store_error)
}

/// Resolves once the transaction completes; rejects if it fails or is aborted.
pub fn transaction_future(tx: &IdbTransaction) -> JsFuture {
    let promise = Promise::new(&mut |resolve, reject| {
        tx.set_oncomplete(Some(&resolve));
        tx.set_onerror(Some(&reject));
        tx.set_onabort(Some(&reject));
    });
    JsFuture::from(promise)
}

fn request_error(req: &IdbRequest) -> StoreError {
    match req.error() {
        Ok(Some(e)) => dom_error(&e),
        _ => StoreError::Backend("request failed".into()),
    }
}

fn transaction_error(tx: &IdbTransaction) -> StoreError {
    match tx.error() {
        Some(e) => dom_error(&e),
        None => StoreError::Backend("transaction aborted".into()),
    }
}

fn dom_error(e: &DomException) -> StoreError {
    match e.name().as_str() {
        "QuotaExceededError" => StoreError::QuotaExceeded,
        "InvalidStateError" => StoreError::Closed,
        name => StoreError::Backend(format!("{name}: {}", e.message())),
    }
}

/// An error from opening the database: the browser's refusals (`SecurityError`,
/// `InvalidStateError`, `UnknownError`) mean IndexedDB cannot be used here.
fn unavailable(e: StoreError) -> StoreError {
    match e {
        StoreError::Closed => StoreError::Unavailable("InvalidStateError".into()),
        StoreError::Backend(m)
            if m.starts_with("SecurityError") || m.starts_with("UnknownError") =>
        {
            StoreError::Unavailable(m)
        }
        e => e,
    }
}

/// A thrown JS value as a store error.
fn store_error(e: JsValue) -> StoreError {
    match e.dyn_ref::<DomException>() {
        Some(d) => dom_error(d),
        None => StoreError::Backend(format!("{e:?}")),
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
