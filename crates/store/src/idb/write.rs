//! A commit's writes: the chunks, the index shards and the filter headers appended, a
//! rollback's cuts, and the fence that refuses it if another tab wrote meanwhile. One
//! readwrite transaction each (see the module above).

use super::*;

impl IdbStore {
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

        self.drop_above(tx, base, (cut_start, cut_end)).await?;
        Ok(stored_chunk)
    }

    /// The rollback's writes: the index records of the commit `cut` (its first and last
    /// heights) holding `base` cut to it, and every index record, commit record and chunk
    /// above `base` deleted.
    async fn drop_above(
        &mut self,
        tx: &IdbTransaction,
        base: u32,
        (cut_start, cut_end): (u32, u32),
    ) -> Result<(), StoreError> {
        let len = self.chunk_len();
        let chunks = object_store(tx, CHUNKS)?;
        let index = object_store(tx, INDEX)?;
        let commits = object_store(tx, COMMITS)?;
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
        Ok(())
    }

    /// Issue the requests of a commit on `tx` after its fence ([`advance_fence`]): the
    /// writes, then the meta record. Only a rollback reaching below what is held in memory
    /// waits on a read; a commit of new headers issues everything at once, so the browser
    /// can commit it without waiting for this thread to take any event (a thread busy with
    /// a large piece of input held each commit for that long: benches/README.md, "A commit
    /// that waits for nothing").
    pub(super) async fn commit_inner(
        &mut self,
        tx: &IdbTransaction,
        base: u32,
        cut: u32,
        batch: &Batch<'_>,
        meta: &Meta,
    ) -> Result<(), StoreError> {
        if batch.rollback_to.is_some() {
            let stored = self.roll_back(tx, base, batch).await?;
            self.write(tx, base, stored.as_ref(), batch, meta)?;
        } else if !batch.entries.is_empty() {
            self.write(tx, base, None, batch, meta)?;
        }
        // Reads a record only to cut stored filter headers below the tail.
        self.write_filters(tx, cut, &batch.filters).await?;
        object_store(tx, META)?
            .put_with_key(&Uint8Array::from(&meta.encode()[..]), &META_KEY.into())
            .map_err(store_error)?;
        self.issued += 1;
        Ok(())
    }
}

/// The fence (layout 6): one record in `meta` under a number key, the store's commit
/// count, whose value the unique index [`FENCE`] allows only once. A commit deletes the
/// record at the count it read and adds the next: if another writer committed since, the
/// record it read is gone and the one it adds either exists or sits beside the other
/// writer's in the index, so the add fails with `ConstraintError` and the whole
/// transaction is undone. That is a compare-and-swap that needs no read: reading the meta
/// record and comparing it before the last write (as layout 5 did) held every commit until
/// this thread took the read's event. A count only grows, so a writer that fell behind by
/// any number of commits (or across a rollback to the same tip) is refused as well.
pub(super) fn advance_fence(tx: &IdbTransaction, count: u64) -> Result<IdbRequest, StoreError> {
    let meta = object_store(tx, META)?;
    meta.delete(&fence_key(count)).map_err(store_error)?;
    meta.add_with_key(&fence_value()?, &fence_key(count + 1))
        .map_err(store_error)
}

/// The fence record's key for commit count `count` (a number: the meta record's key is a
/// string, and IndexedDB orders numbers before strings).
pub(super) fn fence_key(count: u64) -> JsValue {
    (count as f64).into()
}

/// The fence record's value: `{fence: 0}`, the same in every record, so that the unique
/// index on `fence` holds at most one.
pub(super) fn fence_value() -> Result<JsValue, StoreError> {
    let value = Object::new();
    Reflect::set(&value, &FENCE.into(), &0.into()).map_err(store_error)?;
    Ok(value.into())
}
