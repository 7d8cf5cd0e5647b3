//! Headers in memory: for native use (a gateway serving from RAM) and tests.

use std::collections::HashMap;

use lightwire_chain::{BlockHash, Header, Params, Work};
use lightwire_primitives::FilterHeader;

use crate::{
    Batch, FilterTip, HeaderStore, RecordKey, Start, StoreError, Tip, batch_base, filter_next,
};

/// A store in memory: 80 bytes per header plus its index entry.
pub struct MemoryStore {
    params: &'static Params,
    /// The first stored height (0, or a checkpoint's).
    base: u32,
    /// Header at each height of the best chain from `base` (index: height - base).
    headers: Vec<Header>,
    index: HashMap<BlockHash, u32>,
    /// Chainwork at each period's first height (index k: height k * interval).
    period_work: Vec<Work>,
    tip: Tip,
    /// Filter headers from `base` on.
    filters: Vec<FilterHeader>,
    /// Saved records.
    records: HashMap<RecordKey, Vec<u8>>,
}

impl MemoryStore {
    /// A store holding `params`' genesis header.
    pub fn new(params: &'static Params) -> MemoryStore {
        MemoryStore::from_start(params, &Start::genesis(params))
    }

    /// A store holding only `start` (the genesis header, or a checkpoint).
    pub fn starting_at(params: &'static Params, start: &Start) -> Result<MemoryStore, StoreError> {
        start.check(params)?;
        Ok(MemoryStore::from_start(params, start))
    }

    fn from_start(params: &'static Params, start: &Start) -> MemoryStore {
        let entry = start.entry();
        MemoryStore {
            params,
            base: start.height,
            headers: vec![start.header],
            index: HashMap::from([(entry.hash, start.height)]),
            // Period k's work at index k - base / interval.
            period_work: vec![start.chainwork],
            tip: start.tip(),
            filters: Vec::new(),
            records: HashMap::new(),
        }
    }

    /// The header at `height`, if stored.
    fn at(&self, height: u32) -> Option<&Header> {
        self.headers.get(height.checked_sub(self.base)? as usize)
    }

    /// Check `batch` against the store without changing anything: the height its entries
    /// follow, and where the filter headers are cut.
    fn check(&self, batch: &Batch<'_>) -> Result<(u32, u32), StoreError> {
        let base = batch_base(self.tip.height, batch)?;
        let tip_after = batch.entries.last().map_or(self.tip.height, |e| e.height);
        let next = self.base + self.filters.len() as u32;
        let (_, cut) = filter_next(next, tip_after, batch)?;
        if let Some(first) = batch.entries.first() {
            let parent = self.at(base).map(Header::block_hash);
            if parent != Some(first.header.prev_blockhash) {
                return Err(StoreError::DoesNotLink {
                    height: first.height,
                });
            }
        }
        Ok((base, cut))
    }
}

impl HeaderStore for MemoryStore {
    fn params(&self) -> &'static Params {
        self.params
    }

    async fn tip(&self) -> Result<Tip, StoreError> {
        Ok(self.tip)
    }

    async fn commit(&mut self, batch: Batch<'_>) -> Result<Tip, StoreError> {
        // Everything is checked before anything changes: a refused batch leaves no trace.
        let (base, cut) = self.check(&batch)?;
        self.filters.truncate((cut - self.base) as usize);
        self.filters.extend_from_slice(batch.filters.headers);
        let Some(last) = batch.entries.last() else {
            return Ok(self.tip);
        };
        for dropped in self.headers.drain((base - self.base) as usize + 1..) {
            self.index.remove(&dropped.block_hash());
        }
        let interval = self.params.retarget_interval;
        self.period_work
            .truncate(((base - self.base) / interval) as usize + 1);
        for e in batch.entries {
            self.headers.push(e.header);
            self.index.insert(e.hash, e.height);
            if e.height % interval == 0 {
                self.period_work.push(e.chainwork);
            }
        }
        self.tip = Tip::from(last);
        Ok(self.tip)
    }

    fn base(&self) -> u32 {
        self.base
    }

    async fn header(&self, height: u32) -> Result<Option<Header>, StoreError> {
        Ok(self.at(height).copied())
    }

    async fn record(&self, key: RecordKey) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.records.get(&key).cloned())
    }

    async fn put_record(
        &mut self,
        key: RecordKey,
        record: Option<&[u8]>,
    ) -> Result<(), StoreError> {
        match record {
            Some(b) => self.records.insert(key, b.to_vec()),
            None => self.records.remove(&key),
        };
        Ok(())
    }

    async fn filter_tip(&self) -> Result<Option<FilterTip>, StoreError> {
        Ok(self.filters.last().map(|h| FilterTip {
            height: self.base + self.filters.len() as u32 - 1,
            header: *h,
        }))
    }

    async fn filter_headers(
        &self,
        from: u32,
        to: u32,
        out: &mut Vec<FilterHeader>,
    ) -> Result<(), StoreError> {
        let next = self.base + self.filters.len() as u32;
        if from > to || to >= next || from < self.base {
            return Err(StoreError::OutOfRange {
                from,
                to,
                tip: next.saturating_sub(1),
            });
        }
        out.extend_from_slice(
            &self.filters[(from - self.base) as usize..=(to - self.base) as usize],
        );
        Ok(())
    }

    async fn headers(&self, from: u32, to: u32, out: &mut Vec<Header>) -> Result<(), StoreError> {
        if from > to || to > self.tip.height || from < self.base {
            return Err(StoreError::OutOfRange {
                from,
                to,
                tip: self.tip.height,
            });
        }
        let (a, b) = ((from - self.base) as usize, (to - self.base) as usize);
        out.extend_from_slice(&self.headers[a..=b]);
        Ok(())
    }

    async fn height_of(&self, hash: &BlockHash) -> Result<Option<u32>, StoreError> {
        Ok(self.index.get(hash).copied())
    }

    async fn chainwork_at_period_start(&self, height: u32) -> Result<Work, StoreError> {
        let interval = self.params.retarget_interval;
        if height % interval != 0 || height > self.tip.height || height < self.base {
            return Err(StoreError::OutOfRange {
                from: height,
                to: height,
                tip: self.tip.height,
            });
        }
        self.period_work
            .get(((height - self.base) / interval) as usize)
            .copied()
            .ok_or(StoreError::OutOfRange {
                from: height,
                to: height,
                tip: self.tip.height,
            })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use core::future::Future;
    use core::pin::pin;
    use core::task::{Context, Poll, Waker};

    use lightwire_chain::generate::headers_after;
    use lightwire_chain::{Chain, Entry, Outcome, REGTEST, WINDOW_LEN};

    use super::*;
    use crate::Durability;

    const NOW: u64 = 2_000_000_000;

    /// Run a future that completes without waiting (every MemoryStore future does).
    pub(crate) fn now<F: Future>(f: F) -> F::Output {
        match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("a MemoryStore future waited"),
        }
    }

    /// `count` headers on `branch` after `parent` at `parent_height`.
    fn after(parent: &Header, parent_height: u32, count: u32, branch: u32) -> Vec<Header> {
        headers_after(&REGTEST, parent, parent_height, count, branch)
    }

    fn batch(entries: &[Entry]) -> Batch<'_> {
        Batch {
            filters: Default::default(),
            rollback_to: None,
            entries,
            durability: Durability::Relaxed,
        }
    }

    /// Sync `headers` (heights 1..) into a chain and a store, in batches of `size`.
    fn synced(headers: &[Header], size: usize) -> (Chain, MemoryStore) {
        let mut chain = Chain::new(&REGTEST);
        let mut store = MemoryStore::new(&REGTEST);
        for b in headers.chunks(size) {
            assert!(matches!(
                chain.connect(b, NOW),
                Ok(Outcome::Extended { .. })
            ));
            let tip = now(store.commit(batch(chain.staged()))).expect("commit");
            assert_eq!(tip, Tip::from(chain.tip()));
        }
        (chain, store)
    }

    #[test]
    fn saved_records_are_kept_as_given_by_name() {
        let mut store = MemoryStore::new(&REGTEST);
        let (a, b) = (RecordKey::from_static("a"), RecordKey::from_static("b"));
        assert_eq!(now(store.record(a)), Ok(None));
        now(store.put_record(a, Some(&[1, 2]))).unwrap();
        now(store.put_record(b, Some(&[]))).unwrap();
        assert_eq!(now(store.record(a)), Ok(Some(vec![1, 2])));
        assert_eq!(now(store.record(b)), Ok(Some(vec![])));
        now(store.put_record(a, None)).unwrap();
        assert_eq!(now(store.record(a)), Ok(None));
        assert_eq!(now(store.record(b)), Ok(Some(vec![])));
    }

    #[test]
    fn stores_what_the_chain_validated_and_reloads_it() {
        let headers = after(&REGTEST.genesis, 0, 5000, 0);
        let (chain, store) = synced(&headers, 1000);
        assert_eq!(now(store.tip()).unwrap().height, 5000);
        assert_eq!(now(store.header(4321)).unwrap(), Some(headers[4320]));
        assert_eq!(now(store.header(5001)).unwrap(), None);
        assert_eq!(
            now(store.height_of(&headers[1999].block_hash())).unwrap(),
            Some(2000)
        );
        let mut range = Vec::new();
        now(store.headers(10, 19, &mut range)).unwrap();
        assert_eq!(range, headers[9..19]);

        // A reload: the window rebuilt from storage equals the one validation built.
        let tip = chain.tip().height;
        let from = tip + 1 - WINDOW_LEN as u32;
        let entries = now(store.entries(from, tip)).expect("entries");
        let held: Vec<Entry> = (from..=tip)
            .map(|h| *chain.window().get(h).unwrap())
            .collect();
        assert_eq!(entries, held);
        let mut resumed = Chain::resume(&REGTEST, &entries).expect("resumes");
        assert_eq!(resumed.tip(), chain.tip());
        let more = after(&headers[4999], 5000, 10, 0);
        assert!(matches!(
            resumed.connect(&more, NOW),
            Ok(Outcome::Extended { first_height: 5001 })
        ));
    }

    #[test]
    fn a_reorg_replaces_the_branch_atomically() {
        let headers = after(&REGTEST.genesis, 0, 1000, 0);
        let (mut chain, mut store) = synced(&headers, 500);
        let fork = after(&headers[899], 900, 150, 1);
        let Ok(Outcome::Reorg { fork_height, .. }) = chain.connect(&fork, NOW) else {
            panic!("heavier branch reorgs");
        };
        assert_eq!(fork_height, 900);
        let b = Batch {
            filters: Default::default(),
            rollback_to: Some(fork_height),
            entries: chain.staged(),
            durability: Durability::Strict,
        };
        assert_eq!(now(store.commit(b)).unwrap(), Tip::from(chain.tip()));
        assert_eq!(now(store.header(901)).unwrap(), Some(fork[0]));
        assert_eq!(
            now(store.height_of(&headers[950].block_hash())).unwrap(),
            None,
            "replaced headers leave the index"
        );
        assert_eq!(
            now(store.height_of(&fork[149].block_hash())).unwrap(),
            Some(1050)
        );
    }

    #[test]
    fn a_deep_reorg_takes_its_ancestors_from_the_store() {
        let headers = after(&REGTEST.genesis, 0, 6000, 0);
        let (mut chain, mut store) = synced(&headers, 2000);
        let branch = after(&headers[999], 1000, 5100, 1);
        let Ok(Outcome::NeedAncestors { parent }) = chain.connect(&branch[..2000], NOW) else {
            panic!("the fork is below the window");
        };
        let fork = now(store.height_of(&parent))
            .unwrap()
            .expect("parent stored");
        let ancestors = now(store.entries(fork.saturating_sub(2015), fork)).unwrap();
        assert!(matches!(
            chain.connect_branch(&ancestors, &branch[..2000], NOW),
            Ok(Outcome::Stale { .. })
        ));
        assert!(matches!(
            chain.connect(&branch[2000..4000], NOW),
            Ok(Outcome::Stale { .. })
        ));
        let Ok(Outcome::Reorg { fork_height, .. }) = chain.connect(&branch[4000..], NOW) else {
            panic!("overtakes");
        };
        let b = Batch {
            filters: Default::default(),
            rollback_to: Some(fork_height),
            entries: chain.staged(),
            durability: Durability::Strict,
        };
        now(store.commit(b)).unwrap();
        assert_eq!(now(store.tip()).unwrap().height, 6100);
        let mut stored = Vec::new();
        now(store.headers(1001, 6100, &mut stored)).unwrap();
        assert_eq!(stored, branch);
    }

    #[test]
    fn refused_commits_change_nothing() {
        let headers = after(&REGTEST.genesis, 0, 300, 0);
        let (chain, mut store) = synced(&headers[..200], 100);
        let before = now(store.tip()).unwrap();
        let mut next = Chain::resume(&REGTEST, &now(store.entries(0, 200)).unwrap()).unwrap();
        next.connect(&headers[200..], NOW).unwrap();
        let staged = next.staged().to_vec();

        let gap = batch(&staged[1..]);
        assert_eq!(
            now(store.commit(gap)),
            Err(StoreError::NotContiguous {
                expected: 201,
                got: 202
            })
        );
        let mut skipping = staged[..3].to_vec();
        skipping.remove(1);
        assert_eq!(
            now(store.commit(batch(&skipping))),
            Err(StoreError::NotContiguous {
                expected: 202,
                got: 203
            })
        );
        let mut unlinked = staged.clone();
        unlinked[0].header.prev_blockhash = BlockHash([7; 32]);
        assert_eq!(
            now(store.commit(batch(&unlinked))),
            Err(StoreError::DoesNotLink { height: 201 })
        );
        let above = Batch {
            filters: Default::default(),
            rollback_to: Some(250),
            entries: &staged,
            durability: Durability::Strict,
        };
        assert_eq!(
            now(store.commit(above)),
            Err(StoreError::RollbackAboveTip {
                rollback_to: 250,
                tip: 200
            })
        );
        let bare = Batch {
            filters: Default::default(),
            rollback_to: Some(100),
            entries: &[],
            durability: Durability::Strict,
        };
        assert_eq!(
            now(store.commit(bare)),
            Err(StoreError::RollbackWithoutEntries)
        );
        assert_eq!(now(store.tip()).unwrap(), before);
        assert_eq!(now(store.header(150)).unwrap(), Some(headers[149]));

        let mut out = Vec::new();
        assert_eq!(
            now(store.headers(150, 250, &mut out)),
            Err(StoreError::OutOfRange {
                from: 150,
                to: 250,
                tip: 200
            })
        );
        assert!(now(store.chainwork_at_period_start(7)).is_err());
        // A range beyond the tip is refused before any memory is reserved for it.
        assert_eq!(
            now(store.entries(0, u32::MAX)),
            Err(StoreError::OutOfRange {
                from: 0,
                to: u32::MAX,
                tip: 200
            })
        );
        assert_eq!(
            now(store.entries(150, 100)),
            Err(StoreError::OutOfRange {
                from: 150,
                to: 100,
                tip: 200
            })
        );
        assert_eq!(now(store.commit(batch(&staged))).unwrap().height, 300);
        let _ = chain;
    }

    #[test]
    fn filter_headers_follow_the_header_chain() {
        let mut store = MemoryStore::new(&REGTEST);
        let mut chain = Chain::new(&REGTEST);
        let headers = after(&REGTEST.genesis, 0, 300, 0);
        chain.connect(&headers, NOW).unwrap();
        let staged = chain.staged().to_vec();
        let fh = |h: u32| FilterHeader([h as u8; 32]);
        let run: Vec<FilterHeader> = (0..=100).map(fh).collect();
        let with = |rollback_to, entries, first_height, headers, truncate_from| Batch {
            rollback_to,
            entries,
            filters: crate::FilterRun {
                truncate_from,
                first_height,
                headers,
            },
            durability: Durability::Relaxed,
        };
        // Not from the next height, or above the header tip: refused, nothing changes.
        assert_eq!(
            now(store.commit(with(None, &staged, 1, &run, None))),
            Err(StoreError::FiltersNotContiguous {
                expected: 0,
                got: 1
            })
        );
        assert_eq!(
            now(store.commit(with(None, &[], 0, &run, None))),
            Err(StoreError::FiltersAboveTip {
                height: 100,
                tip: 0
            })
        );
        assert_eq!(now(store.tip()).unwrap().height, 0);
        now(store.commit(with(None, &staged, 0, &run, None))).unwrap();
        assert_eq!(
            now(store.filter_tip()).unwrap(),
            Some(FilterTip {
                height: 100,
                header: fh(100)
            })
        );
        // Filter headers alone.
        let more: Vec<FilterHeader> = (101..=200).map(fh).collect();
        now(store.commit(with(None, &[], 101, &more, None))).unwrap();
        let mut out = Vec::new();
        now(store.filter_headers(99, 101, &mut out)).unwrap();
        assert_eq!(out, [fh(99), fh(100), fh(101)]);
        assert!(now(store.filter_headers(150, 201, &mut out)).is_err());
        // A reorg at 150 drops the filter headers above it.
        let fork = &headers[149];
        let mut branch = Chain::resume(&REGTEST, &staged[..150]).unwrap();
        let b = after(fork, 150, 200, 7);
        assert!(matches!(
            branch.connect(&b, NOW),
            Ok(Outcome::Extended { .. })
        ));
        let entries = branch.staged().to_vec();
        now(store.commit(with(Some(150), &entries, 0, &[], None))).unwrap();
        assert_eq!(now(store.filter_tip()).unwrap().unwrap().height, 150);
        // Truncated (found wrong) and replaced in one commit.
        let again: Vec<FilterHeader> = (120..=130)
            .map(|h| FilterHeader([h as u8 ^ 0xff; 32]))
            .collect();
        now(store.commit(with(None, &[], 120, &again, Some(120)))).unwrap();
        assert_eq!(
            now(store.filter_tip()).unwrap(),
            Some(FilterTip {
                height: 130,
                header: FilterHeader([130 ^ 0xff; 32])
            })
        );
    }
}
