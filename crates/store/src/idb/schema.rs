//! Creating the database and bringing an older layout up to this one, inside the open
//! request's versionchange transaction (see [`crate::layout`] for what each layout holds).

use super::*;

/// Create the object stores of a new database, inside the open request's versionchange
/// transaction.
pub(super) fn create(
    req: &IdbOpenDbRequest,
    params: &Params,
    options: IdbOptions,
) -> Result<(), StoreError> {
    let db: IdbDatabase = req.result().map_err(store_error)?.unchecked_into();
    let start = options.start.unwrap_or_else(|| Start::genesis(params));
    let meta = Meta::starting_at(params, &start, options.prefix_bits);
    let hash = meta.tip.hash;
    let (base, len) = (start.height, CHUNK_LEN);

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
    let meta_store = db.create_object_store(META).map_err(store_error)?;
    meta_store
        .put_with_key(&Uint8Array::from(&meta.encode()[..]), &META_KEY.into())
        .map_err(store_error)?;
    create_fence(&meta_store)
}

/// The unique index on `meta` and the fence record of a store that has made no commit
/// (layout 6; see [`advance_fence`]).
fn create_fence(meta_store: &IdbObjectStore) -> Result<(), StoreError> {
    let unique = IdbIndexParameters::new();
    unique.set_unique(true);
    meta_store
        .create_index_with_str_and_optional_parameters(FENCE, FENCE, &unique)
        .map_err(store_error)?;
    meta_store
        .add_with_key(&fence_value()?, &fence_key(0))
        .map_err(store_error)?;
    Ok(())
}

/// Chunk records read per request while migrating (16 layout-1 chunks: 2.6 MB).
pub(super) const MIGRATE_CHUNKS: u32 = 16;

/// Migrate a layout-1 store's index and meta record to layout 4's in place, inside the open
/// request's versionchange transaction `tx`: every index record cut to fragments, keys
/// kept (commit records and the meta's tip are the same in both layouts), then the meta's
/// layout version. [`split_period_chunks`] follows, reading layout 1's chunks as they are.
/// The open request completes only once both have, and if anything fails the transaction
/// is aborted: the store stays as it was, in layout 1.
pub(super) async fn migrate_from_v1(
    tx: &IdbTransaction,
    params: &'static Params,
) -> Result<(), StoreError> {
    let corrupt = |what| StoreError::Corrupt { what };
    let meta_store = object_store(tx, META)?;
    let req = meta_store.get(&META_KEY.into()).map_err(store_error)?;
    let stored = bytes_of(&request_result(&req).await?).ok_or(corrupt("missing meta record"))?;
    let mut meta = Meta::decode(&stored)?;
    meta.check(params)?;
    if meta.schema != 1 {
        return Err(corrupt("meta record layout version"));
    }
    let mut out = Vec::new();
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

/// Read the meta record, the fence's commit count and the last chunk of an open database.
pub(super) async fn load(
    db: &IdbDatabase,
    params: &'static Params,
) -> Result<(Meta, Tail, FilterTail, u64), StoreError> {
    let stores = Array::of3(&META.into(), &CHUNKS.into(), &FILTERS.into());
    let tx = db
        .transaction_with_str_sequence_and_mode(&stores, IdbTransactionMode::Readonly)
        .map_err(store_error)?;
    let meta_store = object_store(&tx, META)?;
    let fence_req = meta_store
        .index(FENCE)
        .and_then(|i| i.get_key(&0.into()))
        .map_err(store_error)?;
    let fence = request_result(&fence_req)
        .await?
        .as_f64()
        .filter(|n| n.fract() == 0.0 && (0.0..=MAX_FENCE).contains(n))
        .ok_or(StoreError::Corrupt {
            what: "missing fence record",
        })? as u64;
    let req = meta_store.get(&META_KEY.into()).map_err(store_error)?;
    let meta = bytes_of(&request_result(&req).await?).ok_or(StoreError::Corrupt {
        what: "missing meta record",
    })?;
    let meta = Meta::decode(&meta)?;
    meta.check(params)?;
    let len = CHUNK_LEN;
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
    Ok((meta, tail, ftail, fence))
}

/// The largest commit count a fence key holds exactly (2^53 - 1: IndexedDB keys are
/// doubles), far beyond any store's commits.
const MAX_FENCE: f64 = 9_007_199_254_740_991.0;

/// Create the object stores and the index that layouts after `old` added, inside the
/// open request's versionchange transaction `tx`: `filters` (layout 3), `records` (layout
/// 4) and the fence (layout 6).
pub(super) fn create_later_stores(
    req: &IdbOpenDbRequest,
    tx: &IdbTransaction,
    old: u32,
) -> Result<(), StoreError> {
    let db: IdbDatabase = req.result().map_err(store_error)?.unchecked_into();
    if old < 3 {
        db.create_object_store(FILTERS).map_err(store_error)?;
    }
    if old < 4 {
        db.create_object_store(RECORDS).map_err(store_error)?;
    }
    if old < 6 {
        create_fence(&object_store(tx, META)?)?;
    }
    Ok(())
}

/// Migrate a store of layout `old` (1 to 5) to this one, inside the open request's
/// versionchange transaction `tx`, once [`create_later_stores`] has run (which is all
/// layout 5 lacks): first its other records to layout 4's, then its chunks split. If
/// anything fails the caller aborts the transaction: the store stays as it was.
pub(super) async fn migrate(
    tx: &IdbTransaction,
    old: u32,
    params: &'static Params,
) -> Result<(), StoreError> {
    match old {
        1 => migrate_from_v1(tx, params).await?,
        // Layout 2 to 4: the same records, a `filters` object store and a meta record
        // that says no filter header is stored yet.
        2 => set_layout_version(tx, 2, params).await?,
        3 => {
            set_layout_version(tx, 3, params).await?;
            move_layout_3_records(tx).await?
        }
        4 => set_layout_version(tx, 4, params).await?,
        _ => return set_layout_version(tx, 5, params).await,
    }
    let coding = if old == 1 {
        v4::Coding::Plain
    } else {
        v4::Coding::Coded
    };
    split_period_chunks(tx, params, coding).await
}

/// Layout 4 to 5: every chunk record (a whole period, `k`, written as `coding`) rewritten
/// as two (`2k` and `2k + 1`, the second only if it holds a header: [`v4::split_chunk`]),
/// and nothing else. Read from the last record down, so that a record is read before a
/// new one takes its key; keys no new record has (below the base's, above the tip's) are
/// deleted. Every header is rehashed, as reading a chunk does: about a second for 925,000
/// headers (benches/README.md).
pub(super) async fn split_period_chunks(
    tx: &IdbTransaction,
    params: &'static Params,
    coding: v4::Coding,
) -> Result<(), StoreError> {
    let corrupt = |what| StoreError::Corrupt { what };
    let req = object_store(tx, META)?
        .get(&META_KEY.into())
        .map_err(store_error)?;
    let meta = bytes_of(&request_result(&req).await?).ok_or(corrupt("missing meta record"))?;
    let meta = Meta::decode(&meta)?;
    meta.check(params)?;
    let chunks = object_store(tx, CHUNKS)?;
    let (first, last) = (meta.base / v4::CHUNK_LEN, meta.tip.height / v4::CHUNK_LEN);
    let (mut held, mut hashes) = (Vec::new(), Vec::new());
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut hi = last;
    loop {
        let lo = hi.saturating_sub(MIGRATE_CHUNKS - 1).max(first);
        let range = IdbKeyRange::bound(&lo.into(), &hi.into()).map_err(store_error)?;
        let req = chunks.get_all_with_key(&range).map_err(store_error)?;
        let records: Array = request_result(&req).await?.unchecked_into();
        if records.length() != hi - lo + 1 {
            return Err(corrupt("missing chunk record"));
        }
        for k in (lo..=hi).rev() {
            let record = bytes_of(&records.get(k - lo)).ok_or(corrupt("chunk record type"))?;
            if v4::split_chunk(&record, k, coding, &mut held, &mut hashes, &mut a, &mut b)? {
                chunks
                    .put_with_key(&Uint8Array::from(&b[..]), &(2 * k + 1).into())
                    .map_err(store_error)?;
            }
            chunks
                .put_with_key(&Uint8Array::from(&a[..]), &(2 * k).into())
                .map_err(store_error)?;
        }
        if lo == first {
            break;
        }
        hi = lo - 1;
    }
    let below = IdbKeyRange::upper_bound_with_open(&(2 * first).into(), true);
    let above = IdbKeyRange::lower_bound_with_open(&(meta.tip.height / CHUNK_LEN).into(), true);
    for range in [below, above] {
        chunks
            .delete(&range.map_err(store_error)?.into())
            .map_err(store_error)?;
    }
    Ok(())
}

/// Layout 3 to 4: every saved record moves from `scans` to `records` (created by the
/// caller) as it is, under the same key, and `scans` is deleted.
pub(super) async fn move_layout_3_records(tx: &IdbTransaction) -> Result<(), StoreError> {
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
pub(super) async fn set_layout_version(
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
pub(super) async fn stored_version(factory: &IdbFactory, name: &str) -> Result<u32, StoreError> {
    let req = factory.open(name).map_err(store_error)?;
    let db: IdbDatabase = request_result(&req).await?.unchecked_into();
    let version = db.version();
    db.close();
    Ok(version as u32)
}

/// Open database `name` at this layout, creating it or bringing an older layout up to
/// this one first.
pub(super) async fn open_database(
    name: &str,
    params: &'static Params,
    options: IdbOptions,
) -> Result<IdbDatabase, StoreError> {
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
            upgrade(&req, event.old_version(), params, options, &failed);
        })
    };
    req.set_onupgradeneeded(Some(on_upgrade.as_ref().unchecked_ref()));
    let opened = request_future(&req).await;
    req.set_onupgradeneeded(None);
    drop(on_upgrade);
    if let Some(e) = failed.borrow_mut().take() {
        return Err(e);
    }
    match opened {
        Ok(_) => Ok(req.result().map_err(store_error)?.unchecked_into()),
        Err(_) => Err(match req.error() {
            // A newer build upgraded the database past what this one reads.
            Ok(Some(e)) if e.name() == "VersionError" => StoreError::SchemaTooNew {
                found: stored_version(&factory, name).await?,
                supported: SCHEMA_VERSION,
            },
            // Some private windows refuse to open any database.
            _ => unavailable(request_error(&req)),
        }),
    }
}

/// The open request's `upgradeneeded` from layout `old` (0: a new database): the stores
/// created, or the migration started in a task that keeps the versionchange transaction
/// alive; what fails aborts the transaction and is left in `failed`.
fn upgrade(
    req: &IdbOpenDbRequest,
    old: f64,
    params: &'static Params,
    options: IdbOptions,
    failed: &Rc<RefCell<Option<StoreError>>>,
) {
    let result = if old == 0.0 {
        create(req, params, options)
    } else if [1.0, 2.0, 3.0, 4.0, 5.0].contains(&old) {
        let old = old as u32;
        // Requests issued from the task (which starts in this event's
        // microtasks) keep the versionchange transaction alive until it is done.
        let tx = req.transaction();
        let created = tx
            .as_ref()
            .map_or(Ok(()), |tx| create_later_stores(req, tx, old));
        match (tx, created) {
            (Some(tx), Ok(())) => {
                let failed = failed.clone();
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
            "no migration from layout version {} to {SCHEMA_VERSION}",
            // IndexedDB versions are whole numbers (and Rust's float formatting is big).
            old as u64
        )))
    };
    if let Err(e) = result {
        if let Some(tx) = req.transaction() {
            let _ = tx.abort();
        }
        *failed.borrow_mut() = Some(e);
    }
}
