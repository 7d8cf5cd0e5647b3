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
use lightwire_chain::{BlockHash, HEADER_LEN, Header, Params, Work, hash_header_bytes};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    DomException, IdbCursorDirection, IdbCursorWithValue, IdbDatabase, IdbFactory, IdbKeyRange,
    IdbObjectStore, IdbOpenDbRequest, IdbRequest, IdbTransaction, IdbTransactionMode,
    IdbVersionChangeEvent,
};

use crate::layout::{
    CHUNK_WORK_LEN, DEFAULT_PREFIX_BITS, Grouped, INDEX_ENTRY_LEN, MAX_PREFIX_BITS, Meta, Tail,
    chunk_work, find_in_index, header_in_chunk, prefix, retain_up_to,
};
use crate::{Batch, Durability, HeaderStore, SCHEMA_VERSION, StoreError, Tip, batch_base};

const CHUNKS: &str = "chunks";
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
}

impl Default for IdbOptions {
    fn default() -> Self {
        IdbOptions {
            prefix_bits: DEFAULT_PREFIX_BITS,
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
    scratch: RefCell<Vec<u8>>,
    stats: IdbStats,
    /// Records written by the commit in progress, counted into `stats` if it completes.
    issued: u64,
    closed: Rc<Cell<bool>>,
    _on_version_change: Closure<dyn FnMut()>,
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
                if let Err(e) = upgrade(&req, event.old_version(), params, options) {
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
        let (meta, tail) = match loaded {
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
            scratch: RefCell::new(Vec::new()),
            stats: IdbStats::default(),
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
        self.db.close();
    }

    /// The index shard width this store was created with.
    pub fn prefix_bits(&self) -> u8 {
        self.meta.prefix_bits
    }

    /// Counters since the store was opened.
    pub fn stats(&self) -> IdbStats {
        self.stats
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

    /// Build the tail the commit leaves in `self.spare`, starting from `tail` cut after
    /// `base`, and issue every write of the commit on `tx`.
    fn write(
        &mut self,
        tx: &IdbTransaction,
        base: u32,
        from_stored: Option<&[u8]>,
        batch: &Batch<'_>,
        meta: &Meta,
    ) -> Result<(), StoreError> {
        let len = self.chunk_len();
        let chunks = object_store(tx, CHUNKS)?;
        let index = object_store(tx, INDEX)?;
        let commits = object_store(tx, COMMITS)?;

        // The chunk holding `base`, cut after it.
        let spare = &mut self.spare;
        spare.chunk = base / len;
        spare.bytes.clear();
        match from_stored {
            Some(record) => spare.bytes.extend_from_slice(record),
            None => spare.bytes.extend_from_slice(&self.tail.bytes),
        }
        let before = spare.len();
        spare.truncate(base % len + 1);
        // A full chunk that was stored as it is needs no rewrite.
        let mut dirty = spare.len() != before || from_stored.is_some();

        let mut written = 0;
        for e in batch.entries {
            if spare.len() == len {
                if dirty {
                    chunks
                        .put_with_key(&Uint8Array::from(&spare.bytes[..]), &spare.chunk.into())
                        .map_err(store_error)?;
                    written += 1;
                }
                spare.chunk += 1;
                spare.bytes.clear();
                spare.bytes.extend_from_slice(&e.chainwork.0.to_be_bytes());
            }
            spare.bytes.extend_from_slice(&e.header.encode());
            dirty = true;
        }
        // `batch.entries` is not empty, so the last chunk changed.
        chunks
            .put_with_key(&Uint8Array::from(&spare.bytes[..]), &spare.chunk.into())
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
        object_store(tx, META)?
            .put_with_key(&Uint8Array::from(&meta.encode()[..]), &META_KEY.into())
            .map_err(store_error)?;
        self.issued += written + 2;
        Ok(())
    }

    /// The rollback part of a commit: read what the rollback cuts through, check that the
    /// batch links to the header at `base`, and issue the deletes. Returns the stored chunk
    /// holding `base` when it is not the tail.
    async fn roll_back(
        &mut self,
        tx: &IdbTransaction,
        base: u32,
        batch: &Batch<'_>,
    ) -> Result<Option<Vec<u8>>, StoreError> {
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
                if record.len() != CHUNK_WORK_LEN + len as usize * HEADER_LEN {
                    return Err(StoreError::Corrupt {
                        what: "chunk record length",
                    });
                }
                Some(record)
            }
            _ => None,
        };
        let parent = match &stored_chunk {
            Some(record) => header_in_chunk(record, base % len).map(hash_header_bytes),
            None => self.tail.header_bytes(base % len).map(hash_header_bytes),
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
        batch: &Batch<'_>,
        meta: &Meta,
    ) -> Result<(), StoreError> {
        let meta_req = object_store(tx, META)?
            .get(&META_KEY.into())
            .map_err(store_error)?;
        let meta_fut = request_future(&meta_req);
        if batch.rollback_to.is_some() {
            meta_fut.await.map_err(|_| request_error(&meta_req))?;
            self.check_unchanged(&meta_req)?;
            let stored = self.roll_back(tx, base, batch).await?;
            self.write(tx, base, stored.as_deref(), batch, meta)?;
        } else {
            // Writes go out now; the check below still comes before the commit can.
            self.write(tx, base, None, batch, meta)?;
            meta_fut.await.map_err(|_| request_error(&meta_req))?;
            self.check_unchanged(&meta_req)?;
        }
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

    /// Search the records a shard request returned for `hash`.
    fn find_in_shard(&self, req: &IdbRequest, hash: &BlockHash) -> Result<Option<u32>, StoreError> {
        let records: Array = req.result().map_err(store_error)?.unchecked_into();
        for record in records.iter() {
            let record: Uint8Array = record.dyn_into().map_err(|_| StoreError::Corrupt {
                what: "index record type",
            })?;
            if let Some(h) = self.with_bytes(&record, |b| find_in_index(b, hash)) {
                // Entries above the tip cannot exist (a rollback deletes them); a stale one
                // would be corruption, not an answer.
                return Ok((h <= self.meta.tip.height).then_some(h));
            }
        }
        Ok(None)
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
        let Some(last) = batch.entries.last() else {
            return Ok(self.meta.tip);
        };
        // The parent is in memory unless a rollback reaches below the last chunk; then
        // the transaction reads it and checks there.
        if self.in_tail(base) {
            let parent = self
                .tail
                .header_bytes(base % self.chunk_len())
                .map(hash_header_bytes);
            if parent != Some(batch.entries[0].header.prev_blockhash) {
                return Err(StoreError::DoesNotLink {
                    height: batch.entries[0].height,
                });
            }
        }
        let meta = Meta {
            tip: Tip::from(last),
            ..self.meta
        };
        let durability = match batch.durability {
            Durability::Relaxed => "relaxed",
            Durability::Strict => "strict",
        };
        let options = Object::new();
        Reflect::set(&options, &"durability".into(), &durability.into()).map_err(store_error)?;
        let stores = Array::of4(&CHUNKS.into(), &INDEX.into(), &COMMITS.into(), &META.into());
        let t0 = now_ms();
        let tx = self
            .db
            .unchecked_ref::<DbWithOptions>()
            .transaction_with_options(&stores, "readwrite", &options)
            .map_err(store_error)?;
        let done = transaction_future(&tx);
        self.issued = 0;
        if let Err(e) = self.commit_inner(&tx, base, &batch, &meta).await {
            // Nothing is kept: the transaction is undone as a whole.
            let _ = tx.abort();
            let _ = done.await;
            return Err(e);
        }
        done.await.map_err(|_| transaction_error(&tx))?;

        core::mem::swap(&mut self.tail, &mut self.spare);
        self.meta = meta;
        let ms = now_ms() - t0;
        self.stats.commits += 1;
        self.stats.headers_written += batch.entries.len() as u64;
        self.stats.records_written += self.issued;
        self.stats.commit_ms += ms;
        self.stats.last_commit_ms = ms;
        Ok(self.meta.tip)
    }

    async fn header(&self, height: u32) -> Result<Option<Header>, StoreError> {
        if height > self.meta.tip.height {
            return Ok(None);
        }
        let len = self.chunk_len();
        if self.in_tail(height) {
            return Ok(self.tail.header_bytes(height % len).map(Header::decode));
        }
        let tx = self.readonly(CHUNKS)?;
        let req = object_store(&tx, CHUNKS)?
            .get(&(height / len).into())
            .map_err(store_error)?;
        let record = request_result(&req).await?;
        let record: Uint8Array = record.dyn_into().map_err(|_| StoreError::Corrupt {
            what: "missing chunk record",
        })?;
        let at = (CHUNK_WORK_LEN + (height % len) as usize * HEADER_LEN) as u32;
        if record.length() != CHUNK_WORK_LEN as u32 + len * HEADER_LEN as u32 {
            return Err(StoreError::Corrupt {
                what: "chunk record length",
            });
        }
        let mut bytes = [0u8; HEADER_LEN];
        record
            .subarray(at, at + HEADER_LEN as u32)
            .copy_to(&mut bytes);
        Ok(Some(Header::decode(&bytes)))
    }

    async fn headers(&self, from: u32, to: u32, out: &mut Vec<Header>) -> Result<(), StoreError> {
        let tip = self.meta.tip.height;
        if from > to || to > tip {
            return Err(StoreError::OutOfRange { from, to, tip });
        }
        let len = self.chunk_len();
        let full = CHUNK_WORK_LEN + len as usize * HEADER_LEN;
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
            for (k, record) in (first_chunk..).zip(records.iter()) {
                let record: Uint8Array = record.dyn_into().map_err(|_| StoreError::Corrupt {
                    what: "chunk record type",
                })?;
                if record.length() as usize != full {
                    return Err(StoreError::Corrupt {
                        what: "chunk record length",
                    });
                }
                let lo = from.max(k * len) - k * len;
                let hi = to.min(k * len + len - 1) - k * len;
                self.with_bytes(&record, |b| {
                    out.extend((lo..=hi).filter_map(|i| header_in_chunk(b, i).map(Header::decode)))
                });
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
        let tx = self.readonly(INDEX)?;
        let index = object_store(&tx, INDEX)?;
        let req = self.shard_request(&index, prefix(hash, self.meta.prefix_bits))?;
        request_result(&req).await?;
        self.find_in_shard(&req, hash)
    }

    async fn heights_of(
        &self,
        hashes: &[BlockHash],
        out: &mut Vec<Option<u32>>,
    ) -> Result<(), StoreError> {
        if hashes.is_empty() {
            return Ok(());
        }
        // One transaction; one getAll per distinct shard, all in flight together. Each
        // shard's records are then scanned once, every entry looked up among the queries
        // of that shard (sorted), so an unsharded index costs one pass, not one per hash.
        let tx = self.readonly(INDEX)?;
        let index = object_store(&tx, INDEX)?;
        let bits = self.meta.prefix_bits;
        let mut queries: Vec<(u32, BlockHash, usize)> = hashes
            .iter()
            .enumerate()
            .map(|(i, h)| (prefix(h, bits), *h, i))
            .collect();
        queries.sort_unstable_by_key(|q| (q.0, q.1.0));
        let mut reqs = Vec::new();
        for group in queries.chunk_by(|a, b| a.0 == b.0) {
            let req = self.shard_request(&index, group[0].0)?;
            let fut = request_future(&req);
            reqs.push((group, req, fut));
        }
        let start = out.len();
        out.resize(start + hashes.len(), None);
        let tip = self.meta.tip.height;
        for (group, req, fut) in reqs {
            fut.await.map_err(|_| request_error(&req))?;
            let records: Array = req.result().map_err(store_error)?.unchecked_into();
            for record in records.iter() {
                let record: Uint8Array = record.dyn_into().map_err(|_| StoreError::Corrupt {
                    what: "index record type",
                })?;
                self.with_bytes(&record, |b| {
                    for e in b.chunks_exact(INDEX_ENTRY_LEN) {
                        let hash = &e[..32];
                        // The same hash may be asked for more than once.
                        let first = group.partition_point(|q| q.1.0[..] < *hash);
                        let height = u32::from_le_bytes([e[32], e[33], e[34], e[35]]);
                        for q in group[first..].iter().take_while(|q| q.1.0[..] == *hash) {
                            if height <= tip {
                                out[start + q.2] = Some(height);
                            }
                        }
                    }
                });
            }
        }
        Ok(())
    }

    async fn chainwork_at_period_start(&self, height: u32) -> Result<Work, StoreError> {
        let len = self.chunk_len();
        let tip = self.meta.tip.height;
        if height % len != 0 || height > tip {
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

/// Create or migrate the object stores, inside the open request's versionchange
/// transaction.
fn upgrade(
    req: &IdbOpenDbRequest,
    old_version: f64,
    params: &Params,
    options: IdbOptions,
) -> Result<(), StoreError> {
    if old_version != 0.0 {
        // Only one layout exists so far; a future one migrates from here.
        return Err(StoreError::Backend(format!(
            "no migration from layout version {old_version} to {SCHEMA_VERSION}"
        )));
    }
    let db: IdbDatabase = req.result().map_err(store_error)?.unchecked_into();
    let meta = Meta::genesis(params, options.prefix_bits);
    let genesis = params.genesis;
    let hash = meta.tip.hash;

    let chunks = db.create_object_store(CHUNKS).map_err(store_error)?;
    let mut chunk = Tail::start(0, &meta.tip.chainwork, 1).bytes;
    chunk.extend_from_slice(&genesis.encode());
    chunks
        .put_with_key(&Uint8Array::from(&chunk[..]), &0.into())
        .map_err(store_error)?;

    let index = db.create_object_store(INDEX).map_err(store_error)?;
    let mut entry = [0u8; INDEX_ENTRY_LEN];
    entry[..32].copy_from_slice(hash.as_bytes());
    index
        .put_with_key(
            &Uint8Array::from(&entry[..]),
            &index_key(prefix(&hash, options.prefix_bits), 0),
        )
        .map_err(store_error)?;

    let commits = db.create_object_store(COMMITS).map_err(store_error)?;
    commits
        .put_with_key(&0.into(), &0.into())
        .map_err(store_error)?;

    db.create_object_store(META)
        .map_err(store_error)?
        .put_with_key(&Uint8Array::from(&meta.encode()[..]), &META_KEY.into())
        .map_err(store_error)?;
    Ok(())
}

/// Read the meta record and the last chunk of an open database.
async fn load(db: &IdbDatabase, params: &'static Params) -> Result<(Meta, Tail), StoreError> {
    let stores = Array::of2(&META.into(), &CHUNKS.into());
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
    let mut tail = Tail::from_record(chunk, bytes, len, &meta.tip)?;
    tail.bytes
        .reserve((CHUNK_WORK_LEN + len as usize * HEADER_LEN).saturating_sub(tail.bytes.len()));
    Ok((meta, tail))
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
