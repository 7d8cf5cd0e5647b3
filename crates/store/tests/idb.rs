//! The IndexedDB store in headless Chromium, checked against `MemoryStore`: the same
//! commits go to both, and every header and every hash (replaced ones included) must read
//! back the same from each, also after closing and reopening.
#![cfg(target_arch = "wasm32")]

use js_sys::Uint8Array;
use lightwire_chain::generate::headers_after;
use lightwire_chain::{
    BlockHash, Chain, Header, MAINNET, Network, Outcome, REGTEST, U256, WINDOW_LEN, Work,
    rebuild_entries,
};
use lightwire_store::idb::request_future;
use lightwire_store::layout::{Meta, genesis_work, prefix, v1, v4};
use lightwire_store::{
    Batch, Durability, FilterHeader, HeaderStore, IdbOptions, IdbStore, MemoryStore, Pending,
    RecordKey, SCHEMA_VERSION, Start, StoreError, Tip,
};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_test::{wasm_bindgen_test as test, wasm_bindgen_test_configure};
use web_sys::{IdbDatabase, IdbOpenDbRequest, IdbRequest, IdbTransactionMode};

wasm_bindgen_test_configure!(run_in_browser);

const NOW: u64 = 2_000_000_000;

async fn fresh(name: &str, bits: u8) -> IdbStore {
    IdbStore::delete(name).await.expect("delete");
    IdbStore::open_with(
        name,
        &REGTEST,
        IdbOptions {
            prefix_bits: bits,
            ..IdbOptions::default()
        },
    )
    .await
    .expect("open")
}

/// Both stores, fed the same commits.
struct Pair {
    idb: IdbStore,
    mem: MemoryStore,
    chain: Chain,
    pending: Pending,
    /// Every hash ever committed, replaced ones included.
    seen: Vec<BlockHash>,
}

impl Pair {
    async fn new(name: &str, bits: u8) -> Pair {
        Pair::around(fresh(name, bits).await)
    }

    /// `idb` (which may already hold headers: see [`Pair::caught_up`]) beside a new memory
    /// store.
    fn around(idb: IdbStore) -> Pair {
        Pair {
            idb,
            mem: MemoryStore::new(&REGTEST),
            chain: Chain::new(&REGTEST),
            pending: Pending::new(0),
            seen: vec![REGTEST.genesis.block_hash()],
        }
    }

    /// `idb` holding the headers after genesis of `all` and the filter headers `filters`
    /// from genesis (a migrated store), and a memory store given the same: both checked.
    async fn caught_up(idb: IdbStore, all: &[Header], filters: &[FilterHeader]) -> Pair {
        let mut pair = Pair::around(idb);
        pair.connect(&all[1..]);
        if !filters.is_empty() {
            pair.pending.push_filters(0, filters);
        }
        let b = pair.pending.batch(Durability::Relaxed);
        let tip = pair.mem.commit(b).await.unwrap();
        pair.pending.committed(&tip);
        pair.check().await;
        pair
    }

    /// Validate `headers` in validation-sized pieces and gather them.
    fn connect(&mut self, headers: &[Header]) -> Vec<Outcome> {
        let mut outcomes = Vec::new();
        for piece in headers.chunks(2000) {
            let outcome = self.chain.connect(piece, NOW).expect("valid");
            self.pending.push(&outcome, self.chain.staged());
            outcomes.push(outcome);
        }
        self.seen.extend(headers.iter().map(Header::block_hash));
        outcomes
    }

    async fn commit(&mut self) -> Tip {
        let b = self.pending.batch(Durability::Relaxed);
        let a = self.idb.commit(b).await.expect("idb commit");
        let m = self.mem.commit(b).await.expect("memory commit");
        assert_eq!(a, m);
        assert_eq!(a, Tip::from(self.chain.tip()));
        self.pending.committed(&a);
        a
    }

    /// Every header, every seen hash, and ranges across chunk edges read the same.
    async fn check(&self) {
        check_same(&self.idb, &self.mem, &self.seen).await;
        check_filters_same(&self.idb, &self.mem).await;
    }
}

/// The filter-header chains read the same: the tip, all of it, and ranges across records.
async fn check_filters_same(idb: &IdbStore, mem: &MemoryStore) {
    let tip = mem.filter_tip().await.unwrap();
    assert_eq!(idb.filter_tip().await.unwrap(), tip);
    let Some(tip) = tip else {
        return;
    };
    let base = mem.base();
    for (from, to) in [
        (base, tip.height),
        (tip.height, tip.height),
        (base + 1990, (base + 2010).min(tip.height)),
        (base + 1, (base + 4200).min(tip.height)),
    ] {
        if from > to {
            continue;
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        idb.filter_headers(from, to, &mut a).await.unwrap();
        mem.filter_headers(from, to, &mut b).await.unwrap();
        assert_eq!(a, b, "{from}..={to}");
        assert_eq!(a.len() as u32, to - from + 1);
    }
    assert!(
        idb.filter_headers(base, tip.height + 1, &mut Vec::new())
            .await
            .is_err()
    );
}

/// A stand-in filter header for `height` on `branch`.
fn fh(height: u32, branch: u8) -> FilterHeader {
    let mut h = [branch; 32];
    h[..4].copy_from_slice(&height.to_le_bytes());
    FilterHeader(h)
}

fn fhs(from: u32, to: u32, branch: u8) -> Vec<FilterHeader> {
    (from..=to).map(|h| fh(h, branch)).collect()
}

#[test]
async fn filter_headers_are_stored_in_records_and_follow_reorgs() {
    let name = "lightwire-test-filters";
    let mut pair = Pair::new(name, 4).await;
    let all = headers_after(&REGTEST, &REGTEST.genesis, 0, 5000, 0);
    pair.connect(&all);
    // With the headers, across three records of 2,000.
    pair.pending.push_filters(0, &fhs(0, 4500, 0));
    pair.commit().await;
    pair.check().await;
    // Alone.
    pair.pending.push_filters(4501, &fhs(4501, 5000, 0));
    pair.commit().await;
    pair.check().await;
    assert_eq!(pair.idb.stats().filter_headers_written, 5001);
    // Reopened: the tail record is read back.
    let Pair { idb, .. } = pair;
    idb.close();
    let idb = IdbStore::open(name, &REGTEST).await.unwrap();
    let mut pair = Pair { idb, ..pair };
    pair.check().await;
    // A reorg at 3,000: filter headers above it go with the headers.
    let fork = headers_after(&REGTEST, &all[2999], 3000, 2100, 1);
    assert!(outcomes_reorg(&pair.connect(&fork), 3000));
    pair.commit().await;
    assert_eq!(pair.idb.filter_tip().await.unwrap().unwrap().height, 3000);
    pair.check().await;
    // Found wrong from 1,000 (in a record below the tail): cut and replaced in one commit.
    pair.pending.truncate_filters(1000);
    pair.pending.push_filters(1000, &fhs(1000, 2500, 9));
    pair.commit().await;
    pair.check().await;
    let mut got = Vec::new();
    pair.idb.filter_headers(999, 1000, &mut got).await.unwrap();
    assert_eq!(got, [fh(999, 0), fh(1000, 9)]);
    // Filter headers past the header tip, or not next, are refused and change nothing.
    let b = Batch {
        rollback_to: None,
        entries: &[],
        filters: lightwire_store::FilterRun {
            truncate_from: None,
            first_height: 2502,
            headers: &fhs(2502, 2600, 3),
        },
        durability: Durability::Relaxed,
    };
    assert_eq!(
        pair.idb.commit(b).await,
        Err(StoreError::FiltersNotContiguous {
            expected: 2501,
            got: 2502
        })
    );
    let Pair { idb, .. } = pair;
    idb.close();
    let idb = IdbStore::open(name, &REGTEST).await.unwrap();
    let pair = Pair { idb, ..pair };
    pair.check().await;
    let Pair { idb, .. } = pair;
    idb.close();
    IdbStore::delete(name).await.unwrap();
}

async fn check_same(idb: &IdbStore, mem: &MemoryStore, seen: &[BlockHash]) {
    let tip = mem.tip().await.unwrap();
    assert_eq!(idb.tip().await.unwrap(), tip);
    let mut a = Vec::new();
    let mut m = Vec::new();
    idb.headers(0, tip.height, &mut a).await.unwrap();
    mem.headers(0, tip.height, &mut m).await.unwrap();
    assert_eq!(a.len(), tip.height as usize + 1);
    assert_eq!(a, m, "all headers");
    for h in [
        0,
        1,
        1007,
        1008,
        2015,
        2016,
        2017,
        tip.height.saturating_sub(1),
        tip.height,
    ] {
        let h = h.min(tip.height);
        assert_eq!(idb.header(h).await.unwrap(), mem.header(h).await.unwrap());
        for to in [h, (h + 2100).min(tip.height)] {
            a.clear();
            m.clear();
            idb.headers(h, to, &mut a).await.unwrap();
            mem.headers(h, to, &mut m).await.unwrap();
            assert_eq!(a, m, "headers {h}..={to}");
        }
    }
    assert_eq!(idb.header(tip.height + 1).await.unwrap(), None);
    let mut heights = Vec::new();
    // Asked twice over, to see repeated hashes answered too.
    idb.heights_of(seen, &mut heights).await.unwrap();
    idb.heights_of(&seen[..10], &mut heights).await.unwrap();
    assert_eq!(heights[seen.len()..], heights[..10]);
    for (hash, got) in seen.iter().zip(&heights) {
        assert_eq!(*got, mem.height_of(hash).await.unwrap(), "hash {hash}");
    }
    // The single lookup on a sample.
    for hash in seen.iter().step_by(997) {
        assert_eq!(
            idb.height_of(hash).await.unwrap(),
            mem.height_of(hash).await.unwrap()
        );
    }
    let interval = REGTEST.retarget_interval;
    for period in (0..=tip.height).step_by(interval as usize) {
        assert_eq!(
            idb.chainwork_at_period_start(period).await.unwrap(),
            mem.chainwork_at_period_start(period).await.unwrap()
        );
    }
    // A chunk start inside a period is no period start.
    let half = interval / 2;
    if idb.base() + half <= tip.height {
        assert!(matches!(
            idb.chainwork_at_period_start(idb.base() + half).await,
            Err(StoreError::OutOfRange { .. })
        ));
    }
}

#[test]
async fn syncs_reads_and_reopens_like_the_memory_store() {
    let name = "lightwire-test-sync";
    let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 9000, 0);
    let mut pair = Pair::new(name, 8).await;
    // Commit sizes that end inside chunks, on a chunk's last header, and span several.
    for range in [0..1, 1..2015, 2015..4031, 4031..4032, 4032..9000] {
        pair.connect(&headers[range]);
        pair.commit().await;
    }
    pair.check().await;
    assert_eq!(pair.idb.stats().commits, 5);
    assert_eq!(pair.idb.stats().headers_written, 9000);

    // Reopen: the same tip, and validation resumes from stored entries.
    let Pair { idb, mem, seen, .. } = pair;
    idb.close();
    let idb = IdbStore::open(name, &REGTEST).await.expect("reopen");
    assert_eq!(idb.prefix_bits(), 8);
    check_same(&idb, &mem, &seen).await;
    let tip = idb.tip().await.unwrap().height;
    let entries = idb.entries(tip + 1 - WINDOW_LEN as u32, tip).await.unwrap();
    assert_eq!(
        entries,
        mem.entries(tip + 1 - WINDOW_LEN as u32, tip).await.unwrap()
    );
    let mut chain = Chain::resume(&REGTEST, &entries).expect("resumes");
    let more = headers_after(&REGTEST, &headers[8999], 9000, 10, 0);
    assert!(matches!(
        chain.connect(&more, NOW),
        Ok(Outcome::Extended { first_height: 9001 })
    ));
    let mut idb = idb;
    let b = Batch {
        filters: Default::default(),
        rollback_to: None,
        entries: chain.staged(),
        durability: Durability::Strict,
    };
    assert_eq!(idb.commit(b).await.unwrap().height, 9010);
    idb.close();
    IdbStore::delete(name).await.unwrap();
}

#[test]
async fn reorgs_at_every_depth_replace_the_branch() {
    for bits in [0u8, 8] {
        let name = format!("lightwire-test-reorg-{bits}");
        let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 7000, 0);
        let mut pair = Pair::new(&name, bits).await;
        pair.connect(&headers[..3000]);
        pair.commit().await;
        pair.connect(&headers[3000..7000]);
        pair.commit().await;

        // In the last chunk (6048..), then in an older chunk of the last commit (cutting
        // it), then below the last commit's start (deleting it and cutting the one before).
        let mut tip_header = headers[6999];
        let mut tip_height = 7000;
        for (fork, branch) in [(6500u32, 1u32), (4100, 2), (2500, 3)] {
            let parent = {
                let mut v = Vec::new();
                pair.mem.headers(fork, fork, &mut v).await.unwrap();
                v[0]
            };
            let len = tip_height - fork + 5;
            let new = headers_after(&REGTEST, &parent, fork, len, branch);
            // The chain validates a fork on its window only when the window holds the
            // 2016 headers at or below it (a retarget's look-back, the median's 11).
            let held_below = (WINDOW_LEN as u32).saturating_sub(tip_height - fork);
            let outcome = if held_below > 2016 {
                pair.connect(&new)
            } else {
                // Below the window, or near its bottom: the ancestors come from the store
                // under test.
                let ancestors = pair.idb.entries(fork - 2015, fork).await.unwrap();
                let first = pair
                    .chain
                    .connect_branch(&ancestors, &new[..2000], NOW)
                    .unwrap();
                pair.pending.push(&first, pair.chain.staged());
                pair.seen.extend(new[..2000].iter().map(Header::block_hash));
                let mut o = vec![first];
                o.extend(pair.connect(&new[2000..]));
                o
            };
            assert!(
                outcomes_reorg(&outcome, fork),
                "fork at {fork}: {outcome:?}"
            );
            assert_eq!(
                pair.pending.batch(Durability::Strict).rollback_to,
                Some(fork)
            );
            pair.commit().await;
            pair.check().await;
            tip_header = *new.last().unwrap();
            tip_height = fork + len;
        }
        // Reopen after the reorgs; extend once more.
        let Pair { idb, mem, seen, .. } = pair;
        idb.close();
        let mut idb = IdbStore::open(&name, &REGTEST).await.unwrap();
        let mut mem = mem;
        check_same(&idb, &mem, &seen).await;
        let tip = idb.tip().await.unwrap().height;
        assert_eq!(tip, tip_height);
        let entries = idb.entries(tip - 100, tip).await.unwrap();
        let mut chain = Chain::resume(&REGTEST, &entries).unwrap();
        chain
            .connect(&headers_after(&REGTEST, &tip_header, tip, 50, 9), NOW)
            .unwrap();
        let b = Batch {
            filters: Default::default(),
            rollback_to: None,
            entries: chain.staged(),
            durability: Durability::Strict,
        };
        assert_eq!(idb.commit(b).await.unwrap(), mem.commit(b).await.unwrap());
        idb.close();
        IdbStore::delete(&name).await.unwrap();
    }
}

fn outcomes_reorg(outcomes: &[Outcome], fork: u32) -> bool {
    outcomes
        .iter()
        .any(|o| matches!(o, Outcome::Reorg { fork_height, .. } if *fork_height == fork))
}

#[test]
async fn refused_commits_leave_the_store_at_its_last_batch() {
    let name = "lightwire-test-refused";
    let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 5000, 0);
    let mut pair = Pair::new(name, 8).await;
    pair.connect(&headers[..4500]);
    pair.commit().await;
    let before = pair.idb.tip().await.unwrap();
    let stats = pair.idb.stats();
    assert_eq!(stats.commits, 1);
    assert!(stats.records_written > 0);

    let mut next = Chain::resume(&REGTEST, &pair.idb.entries(0, 4500).await.unwrap()).unwrap();
    next.connect(&headers[4500..], NOW).unwrap();
    let staged = next.staged().to_vec();
    let batch = |entries| Batch {
        filters: Default::default(),
        rollback_to: None,
        entries,
        durability: Durability::Relaxed,
    };
    assert_eq!(
        pair.idb.commit(batch(&staged[1..])).await,
        Err(StoreError::NotContiguous {
            expected: 4501,
            got: 4502
        })
    );
    let mut unlinked = staged.clone();
    unlinked[0].header.prev_blockhash = BlockHash([7; 32]);
    assert_eq!(
        pair.idb.commit(batch(&unlinked)).await,
        Err(StoreError::DoesNotLink { height: 4501 })
    );
    // A rollback below the last chunk: the link is checked inside the transaction, after
    // its reads, and the transaction is aborted.
    let mut deep = headers_after(&REGTEST, &headers[999], 1000, 10, 5);
    deep[0].prev_blockhash = BlockHash([8; 32]);
    let deep_entries: Vec<_> = {
        // Entries with the right heights but a parent that is not stored at 1000.
        let mut e = pair.idb.entries(1001, 1010).await.unwrap();
        for (entry, header) in e.iter_mut().zip(&deep) {
            entry.header = *header;
        }
        e
    };
    let rollback = Batch {
        filters: Default::default(),
        rollback_to: Some(1000),
        entries: &deep_entries,
        durability: Durability::Strict,
    };
    assert_eq!(
        pair.idb.commit(rollback).await,
        Err(StoreError::DoesNotLink { height: 1001 })
    );
    assert_eq!(pair.idb.tip().await.unwrap(), before);
    assert_eq!(pair.idb.stats().commits, stats.commits);
    assert_eq!(pair.idb.stats().records_written, stats.records_written);
    pair.check().await;

    // Reopened, it is still at the last batch, and takes the next one.
    let Pair {
        idb, mut mem, seen, ..
    } = pair;
    idb.close();
    let mut idb = IdbStore::open(name, &REGTEST).await.unwrap();
    check_same(&idb, &mem, &seen).await;
    assert_eq!(
        idb.commit(batch(&staged)).await.unwrap(),
        mem.commit(batch(&staged)).await.unwrap()
    );
    idb.close();
    IdbStore::delete(name).await.unwrap();
}

#[test]
async fn a_second_writer_is_refused_without_writing() {
    let name = "lightwire-test-two-writers";
    let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 300, 0);
    let mut a = fresh(name, 8).await;
    let mut b = IdbStore::open(name, &REGTEST).await.unwrap();
    let mut chain = Chain::new(&REGTEST);
    chain.connect(&headers[..200], NOW).unwrap();
    let first = chain.staged().to_vec();
    let batch = |entries| Batch {
        filters: Default::default(),
        rollback_to: None,
        entries,
        durability: Durability::Relaxed,
    };
    a.commit(batch(&first)).await.unwrap();
    // `b` still believes the tip is genesis.
    assert_eq!(
        b.commit(batch(&first)).await,
        Err(StoreError::ChangedElsewhere)
    );
    assert_eq!(b.tip().await.unwrap().height, 0);
    b.close();
    let b = IdbStore::open(name, &REGTEST).await.unwrap();
    assert_eq!(b.tip().await.unwrap(), a.tip().await.unwrap());
    assert_eq!(
        b.height_of(&headers[199].block_hash()).await.unwrap(),
        Some(200)
    );
    b.close();
    a.close();
    IdbStore::delete(name).await.unwrap();
}

/// The fence refuses a writer however far behind it is: one that missed two commits (whose
/// own next fence record was deleted again by the writer that went on) and one whose
/// commit is a rollback (which reads before it writes). Nothing of either is written, and
/// the other writer goes on.
#[test]
async fn a_writer_behind_by_several_commits_is_refused_without_writing() {
    let name = "lightwire-test-fence";
    let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 400, 0);
    let mut a = fresh(name, 8).await;
    let mut chain = Chain::new(&REGTEST);
    chain.connect(&headers[..100], NOW).unwrap();
    let first = chain.staged().to_vec();
    let batch = |entries, rollback_to| Batch {
        filters: Default::default(),
        rollback_to,
        entries,
        durability: Durability::Relaxed,
    };
    a.commit(batch(&first, None)).await.unwrap();
    let mut b = IdbStore::open(name, &REGTEST).await.unwrap();
    // `b` read the store after `a`'s first commit; `a` commits twice more.
    chain.connect(&headers[100..200], NOW).unwrap();
    let second = chain.staged().to_vec();
    chain.connect(&headers[200..300], NOW).unwrap();
    let third = chain.staged().to_vec();
    a.commit(batch(&second, None)).await.unwrap();
    a.commit(batch(&third, None)).await.unwrap();
    assert_eq!(
        b.commit(batch(&second, None)).await,
        Err(StoreError::ChangedElsewhere)
    );
    // A heavier branch from 50, a rollback below `b`'s last chunk.
    let mut fork = Chain::new(&REGTEST);
    fork.connect(&headers[..50], NOW).unwrap();
    let branch = headers_after(&REGTEST, &headers[49], 50, 400, 1);
    fork.connect(&branch, NOW).unwrap();
    let staged = fork.staged().to_vec();
    assert_eq!(
        b.commit(batch(&staged, Some(50))).await,
        Err(StoreError::ChangedElsewhere)
    );
    assert_eq!(
        b.tip().await.unwrap().height,
        100,
        "b still sees what it read"
    );
    b.close();
    // `a` is untouched by either and goes on.
    let tip = a.tip().await.unwrap();
    assert_eq!(tip.height, 300);
    chain.connect(&headers[300..], NOW).unwrap();
    a.commit(batch(chain.staged(), None)).await.unwrap();
    a.close();
    let b = IdbStore::open(name, &REGTEST).await.unwrap();
    assert_eq!(b.tip().await.unwrap().height, 400);
    assert_eq!(
        b.height_of(&headers[399].block_hash()).await.unwrap(),
        Some(400)
    );
    assert_eq!(b.height_of(&branch[0].block_hash()).await.unwrap(), None);
    b.close();
    IdbStore::delete(name).await.unwrap();
}

/// A store whose fence record is gone (another program, a damaged disk) does not open as
/// if nobody could write beside it: the open fails with the reason.
#[test]
async fn a_store_without_its_fence_is_refused() {
    let name = "lightwire-test-fence-missing";
    let idb = fresh(name, 4).await;
    idb.close();
    let db = raw_open(name, SCHEMA_VERSION).await;
    let tx = db
        .transaction_with_str_and_mode("meta", IdbTransactionMode::Readwrite)
        .unwrap();
    let req = tx.object_store("meta").unwrap().delete(&0.into()).unwrap();
    await_request(&req).await;
    db.close();
    assert_eq!(
        IdbStore::open(name, &REGTEST).await.err(),
        Some(StoreError::Corrupt {
            what: "missing fence record"
        })
    );
    IdbStore::delete(name).await.unwrap();
}

#[test]
async fn another_network_or_a_newer_layout_is_refused() {
    let name = "lightwire-test-network";
    fresh(name, 8).await.close();
    assert!(matches!(
        IdbStore::open(name, &MAINNET).await,
        Err(StoreError::WrongNetwork {
            stored: Network::Regtest,
            opened_as: Network::Mainnet
        })
    ));

    // A database a newer build upgraded.
    IdbStore::delete(name).await.unwrap();
    raw_open(name, SCHEMA_VERSION + 1).await.close();
    assert!(matches!(
        IdbStore::open(name, &REGTEST).await,
        Err(StoreError::SchemaTooNew { found, supported })
            if found == SCHEMA_VERSION + 1 && supported == SCHEMA_VERSION
    ));
    IdbStore::delete(name).await.unwrap();
}

#[test]
async fn corrupt_records_are_reported_not_misread() {
    let name = "lightwire-test-corrupt";
    let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 100, 0);
    let mut store = fresh(name, 8).await;
    let mut chain = Chain::new(&REGTEST);
    chain.connect(&headers, NOW).unwrap();
    store
        .commit(Batch {
            filters: Default::default(),
            rollback_to: None,
            entries: chain.staged(),
            durability: Durability::Strict,
        })
        .await
        .unwrap();
    store.close();

    // A meta record claiming a tip the last chunk does not end at.
    let db = raw_open(name, SCHEMA_VERSION).await;
    let mut meta = Meta::genesis(&REGTEST, 8);
    meta.tip.height = 50;
    raw_put(&db, "meta", &"meta".into(), &meta.encode()).await;
    db.close();
    assert!(matches!(
        IdbStore::open(name, &REGTEST).await,
        Err(StoreError::Corrupt { .. })
    ));
    // Garbage for a meta record.
    let db = raw_open(name, SCHEMA_VERSION).await;
    raw_put(&db, "meta", &"meta".into(), b"not a meta record").await;
    db.close();
    assert!(matches!(
        IdbStore::open(name, &REGTEST).await,
        Err(StoreError::Corrupt {
            what: "meta record"
        })
    ));
    IdbStore::delete(name).await.unwrap();
}

#[test]
async fn the_index_is_sharded_by_prefix() {
    // 16-bit shards: each lookup reads one small shard.
    let name = "lightwire-test-shards";
    let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 3000, 0);
    let mut pair = Pair::new(name, 16).await;
    pair.connect(&headers);
    pair.commit().await;
    pair.check().await;
    let hash = headers[1234].block_hash();
    assert!(prefix(&hash, 16) < 65_536);
    assert_eq!(pair.idb.height_of(&hash).await.unwrap(), Some(1235));
    assert_eq!(
        pair.idb.height_of(&BlockHash([0xee; 32])).await.unwrap(),
        None
    );
    let Pair { idb, .. } = pair;
    idb.close();
    IdbStore::delete(name).await.unwrap();
}

/// A store created from a checkpoint (at 4,032) holds it first and
/// nothing below; it takes commits, reads back like the memory store started the same
/// way, reopens at its base, and refuses a rollback below it.
#[test]
async fn a_store_started_from_a_checkpoint_holds_nothing_below_it() {
    let name = "lightwire-test-start";
    IdbStore::delete(name).await.unwrap();
    let main = headers_after(&REGTEST, &REGTEST.genesis, 0, 9000, 0); // main[i]: height i + 1
    let start = Start {
        height: 4032,
        header: main[4031],
        chainwork: Work(U256::from_u64(2 * 4033)),
    };
    let options = IdbOptions {
        start: Some(start),
        ..IdbOptions::default()
    };
    let mut idb = IdbStore::open_with(name, &REGTEST, options).await.unwrap();
    let mut mem = MemoryStore::starting_at(&REGTEST, &start).unwrap();
    assert_eq!(idb.tip().await.unwrap(), start.tip());
    assert_eq!(idb.base(), 4032);
    let mut chain = Chain::resume(&REGTEST, &idb.entries(4032, 4032).await.unwrap()).unwrap();
    for piece in main[4032..].chunks(2000) {
        chain.connect(piece, NOW).unwrap();
        let b = Batch {
            filters: Default::default(),
            rollback_to: None,
            entries: chain.staged(),
            durability: Durability::Relaxed,
        };
        assert_eq!(idb.commit(b).await.unwrap(), mem.commit(b).await.unwrap());
    }
    idb.close();
    let mut idb = IdbStore::open(name, &REGTEST).await.unwrap();
    assert_eq!(idb.base(), 4032, "kept across a reopen");
    let mut a = Vec::new();
    idb.headers(4032, 9000, &mut a).await.unwrap();
    assert_eq!(a, main[4031..]);
    assert_eq!(idb.header(4031).await.unwrap(), None);
    assert_eq!(idb.header(4032).await.unwrap(), Some(main[4031]));
    assert!(matches!(
        idb.headers(0, 10, &mut a).await,
        Err(StoreError::OutOfRange { .. })
    ));
    assert_eq!(
        idb.height_of(&main[4031].block_hash()).await.unwrap(),
        Some(4032)
    );
    assert_eq!(idb.height_of(&main[100].block_hash()).await.unwrap(), None);
    assert_eq!(
        idb.chainwork_at_period_start(4032).await.unwrap(),
        start.chainwork
    );
    assert_eq!(
        idb.entries(8000, 9000).await.unwrap(),
        mem.entries(8000, 9000).await.unwrap()
    );
    // A rollback below the start is refused.
    let fork = headers_after(&REGTEST, &main[3999], 4000, 10, 5);
    let mut other = Chain::new(&REGTEST);
    for piece in main[..4000].chunks(2000) {
        other.connect(piece, NOW).unwrap();
    }
    other.connect(&fork, NOW).unwrap();
    let b = Batch {
        filters: Default::default(),
        rollback_to: Some(4000),
        entries: &other.staged()[..1],
        durability: Durability::Strict,
    };
    assert!(matches!(
        idb.commit(b).await,
        Err(StoreError::OutOfRange { .. })
    ));
    assert_eq!(idb.tip().await.unwrap().height, 9000);
    idb.close();
    IdbStore::delete(name).await.unwrap();
}

/// A store in layout 1, written record by record as every build before layout 2 wrote it (two commits, chunks of 80-byte headers, 36-byte index entries), opens,
/// migrates in place, and reads back every header and hash; then it takes new commits and a
/// reorg that cuts through a migrated commit and chunk.
#[test]
async fn a_layout_1_store_migrates_in_place_and_reads_back_everything() {
    let name = "lightwire-test-migrate";
    IdbStore::delete(name).await.unwrap();
    let bits = 8u8;
    let mut all = vec![REGTEST.genesis];
    all.extend(headers_after(&REGTEST, &REGTEST.genesis, 0, 5000, 0));
    let entries = rebuild_entries(&REGTEST, 0, &all, genesis_work(&REGTEST));

    // Commits 0..=0 (genesis), 1..=3000, 3001..=5000: each its index records by prefix.
    write_old_store(name, 1, &entries, bits, &[(0, 0), (1, 3000), (3001, 5000)]).await;

    let mut idb = IdbStore::open(name, &REGTEST)
        .await
        .expect("opens and migrates");
    assert_eq!(idb.prefix_bits(), bits);
    check_records(&mut idb, &[]).await;
    let pair = Pair::caught_up(idb, &all, &[]).await;

    // It is the current layout now: reopening does not migrate again, and it goes on as
    // any store, filter headers included.
    let Pair { idb, .. } = pair;
    idb.close();
    let db = raw_open(name, SCHEMA_VERSION).await;
    assert_eq!(db.version() as u32, SCHEMA_VERSION);
    db.close();
    let idb = IdbStore::open(name, &REGTEST).await.expect("reopens");
    let mut pair = Pair { idb, ..pair };
    pair.connect(&headers_after(&REGTEST, &all[5000], 5000, 100, 0));
    pair.pending.push_filters(0, &fhs(0, 5100, 0));
    pair.commit().await;
    // A heavier fork from 4,000: inside the migrated commit 3001..=5000 and chunk 1.
    let fork = headers_after(&REGTEST, &all[4000], 4000, 1200, 1);
    assert!(outcomes_reorg(&pair.connect(&fork), 4000));
    pair.commit().await;
    pair.check().await;
    assert_eq!(pair.idb.tip().await.unwrap().height, 5200);
    let Pair { idb, .. } = pair;
    idb.close();
    IdbStore::delete(name).await.unwrap();
}

/// A layout-1 store whose chunk does not hold what its meta says is not migrated: the open
/// fails with the reason, and the store is left in layout 1, untouched.
#[test]
async fn a_broken_layout_1_store_is_left_as_it_was() {
    let name = "lightwire-test-migrate-broken";
    IdbStore::delete(name).await.unwrap();
    let db = raw_open(name, 1).await;
    let work = genesis_work(&REGTEST);
    let mut held = work.0.to_be_bytes().to_vec();
    held.extend_from_slice(&REGTEST.genesis.encode());
    held.extend_from_slice(&[7u8; 40]); // half a header
    raw_put(&db, "chunks", &0.into(), &held).await;
    let meta = Meta {
        schema: 1,
        ..Meta::genesis(&REGTEST, 8)
    };
    raw_put(&db, "meta", &"meta".into(), &meta.encode()[..109]).await;
    db.close();
    assert_eq!(
        IdbStore::open(name, &REGTEST).await.err(),
        Some(StoreError::Corrupt {
            what: "layout 1 chunk record length"
        })
    );
    let db = raw_open(name, 1).await;
    assert_eq!(db.version() as u32, 1, "still layout 1");
    db.close();
    IdbStore::delete(name).await.unwrap();
}

/// A layout-2 store (as the previous release wrote it: no `filters` records, a 113-byte
/// meta record) opens as the current layout, with no filter headers, and takes them.
#[test]
async fn a_layout_2_store_gets_its_filter_records() {
    let name = "lightwire-test-migrate-v2";
    IdbStore::delete(name).await.unwrap();
    let bits = 4u8;
    let mut all = vec![REGTEST.genesis];
    all.extend(headers_after(&REGTEST, &REGTEST.genesis, 0, 3000, 0));
    let entries = rebuild_entries(&REGTEST, 0, &all, genesis_work(&REGTEST));
    write_old_store(name, 2, &entries, bits, &[(0, 0), (1, 3000)]).await;

    let mut idb = IdbStore::open(name, &REGTEST)
        .await
        .expect("opens and migrates");
    assert_eq!(idb.filter_tip().await.unwrap(), None);
    check_records(&mut idb, &[]).await;
    let mut pair = Pair::caught_up(idb, &all, &[]).await;
    pair.connect(&headers_after(&REGTEST, &all[3000], 3000, 10, 0));
    pair.pending.push_filters(0, &fhs(0, 3010, 0));
    pair.commit().await;
    pair.check().await;
    let Pair { idb, .. } = pair;
    idb.close();
    IdbStore::delete(name).await.unwrap();
}

/// A layout-3 store (its saved records in the object store `scans`) opens as the current
/// layout: the records are in `records`, byte for byte, `scans` is gone, and its headers
/// and filter headers read back as they were.
#[test]
async fn a_layout_3_store_moves_its_saved_records() {
    let name = "lightwire-test-migrate-v3";
    IdbStore::delete(name).await.unwrap();
    let bits = 4u8;
    let mut all = vec![REGTEST.genesis];
    all.extend(headers_after(&REGTEST, &REGTEST.genesis, 0, 3000, 0));
    let entries = rebuild_entries(&REGTEST, 0, &all, genesis_work(&REGTEST));
    write_old_store(name, 3, &entries, bits, &[(0, 0), (1, 3000)]).await;
    let db = raw_open(name, 3).await;
    // Filter headers 0..=2500: a full record and the start of the next.
    let filters = fhs(0, 2500, 0);
    raw_put_filters(&db, 3, &filters, &entries[3000], bits).await;
    let wallet: Vec<u8> = (0..=255).collect();
    raw_put(&db, "scans", &"scan".into(), &[1, 2, 3]).await;
    raw_put(&db, "scans", &"wallet".into(), &wallet).await;
    db.close();

    let mut idb = IdbStore::open(name, &REGTEST)
        .await
        .expect("opens and migrates");
    check_records(&mut idb, &[("scan", &[1, 2, 3]), ("wallet", &wallet)]).await;
    let mut out = Vec::new();
    idb.filter_headers(0, 2500, &mut out).await.unwrap();
    assert_eq!(out, filters);
    let Pair { idb, .. } = Pair::caught_up(idb, &all, &filters).await;
    idb.close();
    let db = raw_open(name, SCHEMA_VERSION).await;
    let names = db.object_store_names();
    assert!(!names.contains("scans") && names.contains("records"));
    db.close();
    IdbStore::delete(name).await.unwrap();
}

/// A layout-4 store (a whole period in each chunk record) opens as the current layout:
/// each chunk split in two, the last period's second half only where it holds headers, and
/// every header, hash, chainwork, filter header and saved record reads back as it was; then
/// it takes commits and a reorg through a split chunk. Once from genesis, once from a
/// checkpoint (a layout-1 store's migration has its tip in a period's first half).
#[test]
async fn a_layout_4_store_splits_its_chunks_in_two() {
    let name = "lightwire-test-migrate-v4";
    IdbStore::delete(name).await.unwrap();
    let bits = 4u8;
    let mut all = vec![REGTEST.genesis];
    all.extend(headers_after(&REGTEST, &REGTEST.genesis, 0, 5100, 0));
    let entries = rebuild_entries(&REGTEST, 0, &all, genesis_work(&REGTEST));
    write_old_store(name, 4, &entries, bits, &[(0, 0), (1, 3000), (3001, 5100)]).await;
    let db = raw_open(name, 4).await;
    let filters = fhs(0, 4500, 0);
    raw_put_filters(&db, 4, &filters, &entries[5100], bits).await;
    let wallet: Vec<u8> = (0..=255).collect();
    raw_put(&db, "records", &"wallet".into(), &wallet).await;
    db.close();

    let mut idb = IdbStore::open(name, &REGTEST)
        .await
        .expect("opens and migrates");
    check_records(&mut idb, &[("wallet", &wallet)]).await;
    idb.close();
    // 5,100 / 1,008: records 0 to 5, 5 holding 5,040 to 5,100.
    let db = raw_open(name, SCHEMA_VERSION).await;
    assert_eq!(db.version() as u32, SCHEMA_VERSION);
    assert_eq!(chunk_keys(&db).await, (0..=5).collect::<Vec<u32>>());
    db.close();
    let idb = IdbStore::open(name, &REGTEST).await.expect("reopens");
    let mut pair = Pair::caught_up(idb, &all, &filters).await;
    pair.connect(&headers_after(&REGTEST, &all[5100], 5100, 100, 0));
    pair.pending.push_filters(4501, &fhs(4501, 5200, 0));
    pair.commit().await;
    // A heavier fork from 4,500: inside split chunk 4 (4,032 to 5,039).
    let fork = headers_after(&REGTEST, &all[4500], 4500, 1000, 1);
    assert!(outcomes_reorg(&pair.connect(&fork), 4500));
    pair.commit().await;
    pair.check().await;
    let Pair { idb, .. } = pair;
    idb.close();
    IdbStore::delete(name).await.unwrap();

    // From a checkpoint at 4,032 to 5,100: layout 4's record 2 becomes records 4 and 5,
    // and key 2 (below the new records) is deleted.
    let start = 4032u32;
    let db = raw_open(name, 4).await;
    let chunk = &entries[start as usize..=5100];
    let mut held = chunk[0].chainwork.0.to_be_bytes().to_vec();
    for e in chunk {
        held.extend_from_slice(&e.header.encode());
    }
    let mut out = Vec::new();
    v1::convert_chunk(&held, start, 2016, &mut out).unwrap();
    raw_put(&db, "chunks", &2.into(), &out).await;
    let meta = Meta {
        schema: 4,
        tip: Tip::from(&entries[5100]),
        base: start,
        filter_next: start,
        ..Meta::genesis(&REGTEST, bits)
    };
    raw_put(&db, "meta", &"meta".into(), &meta.encode()).await;
    db.close();
    let idb = IdbStore::open(name, &REGTEST).await.expect("migrates");
    assert_eq!(idb.base(), start);
    let mut got = Vec::new();
    idb.headers(start, 5100, &mut got).await.unwrap();
    assert_eq!(got, all[start as usize..=5100]);
    assert_eq!(
        idb.chainwork_at_period_start(start).await.unwrap(),
        entries[start as usize].chainwork
    );
    idb.close();
    let db = raw_open(name, SCHEMA_VERSION).await;
    assert_eq!(chunk_keys(&db).await, [4, 5]);
    db.close();
    IdbStore::delete(name).await.unwrap();
}

/// A layout-5 store (the chunks as this layout keeps them, no fence) opens as the current
/// layout with its fence: everything reads back, it takes commits, and a second writer
/// that read it before a commit is refused.
#[test]
async fn a_layout_5_store_gets_its_fence() {
    let name = "lightwire-test-migrate-v5";
    IdbStore::delete(name).await.unwrap();
    let bits = 4u8;
    let mut all = vec![REGTEST.genesis];
    all.extend(headers_after(&REGTEST, &REGTEST.genesis, 0, 3000, 0));
    let entries = rebuild_entries(&REGTEST, 0, &all, genesis_work(&REGTEST));
    write_old_store(name, 4, &entries, bits, &[(0, 0), (1, 3000)]).await;
    // Layout 4's chunks split as layout 5 keeps them, then its meta record.
    let db = raw_open(name, 5).await;
    let (mut held, mut hashes, mut first, mut second) = Default::default();
    for k in (0..=1u32).rev() {
        let record = raw_get(&db, "chunks", &k.into()).await;
        let coded = v4::Coding::Coded;
        let two = v4::split_chunk(
            &record,
            k,
            coded,
            &mut held,
            &mut hashes,
            &mut first,
            &mut second,
        )
        .unwrap();
        if two {
            raw_put(&db, "chunks", &(2 * k + 1).into(), &second).await;
        }
        raw_put(&db, "chunks", &(2 * k).into(), &first).await;
    }
    let filters = fhs(0, 2500, 0);
    raw_put_filters(&db, 5, &filters, &entries[3000], bits).await;
    db.close();

    let idb = IdbStore::open(name, &REGTEST).await.expect("migrates");
    let mut pair = Pair::caught_up(idb, &all, &filters).await;
    let second_writer = IdbStore::open(name, &REGTEST).await.unwrap();
    pair.connect(&headers_after(&REGTEST, &all[3000], 3000, 100, 0));
    pair.pending.push_filters(2501, &fhs(2501, 3050, 0));
    pair.commit().await;
    pair.check().await;
    let Pair { idb, .. } = pair;
    idb.close();
    let db = raw_open(name, SCHEMA_VERSION).await;
    assert_eq!(db.version() as u32, SCHEMA_VERSION);
    db.close();
    let mut late = second_writer;
    let more = headers_after(&REGTEST, &all[3000], 3000, 10, 2);
    let mut chain = Chain::new(&REGTEST);
    for piece in all[1..].chunks(2000) {
        chain.connect(piece, NOW).unwrap();
    }
    chain.connect(&more, NOW).unwrap();
    assert_eq!(
        late.commit(Batch {
            filters: Default::default(),
            rollback_to: None,
            entries: chain.staged(),
            durability: Durability::Relaxed,
        })
        .await,
        Err(StoreError::ChangedElsewhere)
    );
    late.close();
    IdbStore::delete(name).await.unwrap();
}

/// A layout-4 store whose chunk record is damaged is not migrated: the open fails with the
/// reason, and the store is left in layout 4, its records as they were.
#[test]
async fn a_broken_layout_4_store_is_left_as_it_was() {
    let name = "lightwire-test-migrate-v4-broken";
    IdbStore::delete(name).await.unwrap();
    let mut all = vec![REGTEST.genesis];
    all.extend(headers_after(&REGTEST, &REGTEST.genesis, 0, 3000, 0));
    let entries = rebuild_entries(&REGTEST, 0, &all, genesis_work(&REGTEST));
    write_old_store(name, 4, &entries, 4, &[(0, 0), (1, 3000)]).await;
    // Chunk 0's second segment anchor changed (after the work, the piece's length and
    // its fixed fields, and the first anchor): its headers no longer link.
    let db = raw_open(name, 4).await;
    let before = raw_get(&db, "chunks", &1.into()).await;
    let mut bad = raw_get(&db, "chunks", &0.into()).await;
    bad[32 + 2 + 14 + 32] ^= 1;
    raw_put(&db, "chunks", &0.into(), &bad).await;
    db.close();
    assert_eq!(
        IdbStore::open(name, &REGTEST).await.err(),
        Some(StoreError::Corrupt {
            what: "chunk record does not link"
        })
    );
    let db = raw_open(name, 4).await;
    assert_eq!(db.version() as u32, 4, "still layout 4");
    assert_eq!(chunk_keys(&db).await, [0, 1]);
    assert_eq!(raw_get(&db, "chunks", &0.into()).await, bad);
    assert_eq!(raw_get(&db, "chunks", &1.into()).await, before);
    db.close();
    IdbStore::delete(name).await.unwrap();
}

/// The saved records are kept as given, apart from the headers, and across a reopen.
#[test]
async fn saved_records_are_kept_as_given() {
    let name = "lightwire-test-records";
    let mut idb = fresh(name, 4).await;
    check_records(&mut idb, &[]).await;
    let (a, b) = (RecordKey::from_static("a"), RecordKey::from_static("b-1.x"));
    idb.put_record(a, Some(&[7; 70_000])).await.unwrap();
    idb.put_record(b, Some(&[])).await.unwrap();
    idb.put_record(a, Some(&[8, 9])).await.unwrap();
    idb.close();
    let mut idb = IdbStore::open(name, &REGTEST).await.unwrap();
    assert_eq!(idb.record(a).await.unwrap(), Some(vec![8, 9]));
    assert_eq!(idb.record(b).await.unwrap(), Some(vec![]));
    idb.put_record(a, None).await.unwrap();
    assert_eq!(idb.record(a).await.unwrap(), None);
    assert_eq!(idb.tip().await.unwrap().height, 0);
    idb.close();
    IdbStore::delete(name).await.unwrap();
}

/// The store holds exactly `expected` of the names "scan" and "wallet", and takes a new
/// record.
async fn check_records(idb: &mut IdbStore, expected: &[(&'static str, &[u8])]) {
    for name in ["scan", "wallet"] {
        let want = expected
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| b.to_vec());
        let key = RecordKey::from_static(name);
        assert_eq!(idb.record(key).await.unwrap(), want, "{name}");
    }
    let key = RecordKey::from_static("check");
    idb.put_record(key, Some(b"new")).await.unwrap();
    assert_eq!(idb.record(key).await.unwrap(), Some(b"new".to_vec()));
    idb.put_record(key, None).await.unwrap();
}

/// Write `entries` as layout `version` (1 to 4) wrote them, record by record, with plain
/// IndexedDB: chunk records, index records by prefix for each commit in `commits`, commit
/// records, and the meta record of that layout's length (layouts 3 and 4: no filter
/// headers).
async fn write_old_store(
    name: &str,
    version: u32,
    entries: &[lightwire_chain::Entry],
    bits: u8,
    commits: &[(u32, u32)],
) {
    let db = raw_open(name, version).await;
    let mut out = Vec::new();
    for (k, chunk) in entries.chunks(2016).enumerate() {
        let mut held = chunk[0].chainwork.0.to_be_bytes().to_vec();
        for e in chunk {
            held.extend_from_slice(&e.header.encode());
        }
        let v1 = v1::encode_chunk(&held);
        let record = if version == 1 {
            v1
        } else {
            v1::convert_chunk(&v1, k as u32 * 2016, 2016, &mut out).unwrap();
            out.clone()
        };
        raw_put(&db, "chunks", &(k as u32).into(), &record).await;
    }
    for &(first, last) in commits {
        let mut shards = std::collections::BTreeMap::<u32, Vec<u8>>::new();
        for e in &entries[first as usize..=last as usize] {
            shards
                .entry(prefix(&e.hash, bits))
                .or_default()
                .extend_from_slice(&v1::index_entry(&e.hash, e.height));
        }
        for (p, mut record) in shards {
            if version >= 2 {
                out.clear();
                v1::convert_index(&record, &mut out).unwrap();
                record = out.clone();
            }
            let key = js_sys::Array::of2(&p.into(), &first.into());
            raw_put(&db, "index", &key, &record).await;
        }
        raw_put_value(&db, "commits", &first.into(), &last.into()).await;
    }
    let tip = commits.last().map_or(0, |c| c.1) as usize;
    let meta = Meta {
        schema: version,
        tip: Tip::from(&entries[tip]),
        ..Meta::genesis(&REGTEST, bits)
    };
    // Layout 1's meta record lacked the base height, layout 2's the next filter height.
    let len = [109, 113, 117, 117][version as usize - 1];
    raw_put(&db, "meta", &"meta".into(), &meta.encode()[..len]).await;
    db.close();
}

/// Open `name` at `version` with plain IndexedDB, creating empty stores if new (those of
/// layout 3 too when `version` is 3, of layout 4 when it is 4).
async fn raw_open(name: &str, version: u32) -> IdbDatabase {
    let factory = web_sys::window().unwrap().indexed_db().unwrap().unwrap();
    let req: IdbOpenDbRequest = factory.open_with_u32(name, version).unwrap();
    let r = req.clone();
    let on_upgrade = Closure::once(move || {
        let db: IdbDatabase = r.result().unwrap().unchecked_into();
        let later: &[&str] = match version {
            3 => &["filters", "scans"],
            4 => &["filters", "records"],
            _ => &[],
        };
        let stores = ["chunks", "index", "commits", "meta"].iter();
        for store in stores.chain(later) {
            if !db.object_store_names().contains(store) {
                db.create_object_store(store).unwrap();
            }
        }
    });
    req.set_onupgradeneeded(Some(on_upgrade.as_ref().unchecked_ref()));
    await_request(&req).await;
    req.result().unwrap().unchecked_into()
}

async fn raw_put(db: &IdbDatabase, store: &str, key: &JsValue, value: &[u8]) {
    let tx = db
        .transaction_with_str_and_mode(store, IdbTransactionMode::Readwrite)
        .unwrap();
    let req = tx
        .object_store(store)
        .unwrap()
        .put_with_key(&Uint8Array::from(value), key)
        .unwrap();
    await_request(&req).await;
}

/// Filter headers from genesis in records of 2,000, as layouts 3 and 4 wrote them, and
/// the meta record of layout `version` with the tip `tip` that says so.
async fn raw_put_filters(
    db: &IdbDatabase,
    version: u32,
    filters: &[FilterHeader],
    tip: &lightwire_chain::Entry,
    bits: u8,
) {
    for (k, record) in filters.chunks(2000).enumerate() {
        let bytes: Vec<u8> = record.iter().flat_map(|h| h.0).collect();
        raw_put(db, "filters", &(k as u32).into(), &bytes).await;
    }
    let meta = Meta {
        schema: version,
        tip: Tip::from(tip),
        filter_next: filters.len() as u32,
        ..Meta::genesis(&REGTEST, bits)
    };
    raw_put(db, "meta", &"meta".into(), &meta.encode()).await;
}

async fn raw_get(db: &IdbDatabase, store: &str, key: &JsValue) -> Vec<u8> {
    let tx = db
        .transaction_with_str_and_mode(store, IdbTransactionMode::Readonly)
        .unwrap();
    let req = tx.object_store(store).unwrap().get(key).unwrap();
    await_request(&req).await;
    req.result()
        .unwrap()
        .unchecked_into::<Uint8Array>()
        .to_vec()
}

/// The keys of the `chunks` object store, in order.
async fn chunk_keys(db: &IdbDatabase) -> Vec<u32> {
    let tx = db
        .transaction_with_str_and_mode("chunks", IdbTransactionMode::Readonly)
        .unwrap();
    let req = tx.object_store("chunks").unwrap().get_all_keys().unwrap();
    await_request(&req).await;
    let keys: js_sys::Array = req.result().unwrap().unchecked_into();
    keys.iter().map(|k| k.as_f64().unwrap() as u32).collect()
}

async fn raw_put_value(db: &IdbDatabase, store: &str, key: &JsValue, value: &JsValue) {
    let tx = db
        .transaction_with_str_and_mode(store, IdbTransactionMode::Readwrite)
        .unwrap();
    let req = tx
        .object_store(store)
        .unwrap()
        .put_with_key(value, key)
        .unwrap();
    await_request(&req).await;
}

async fn await_request(req: &IdbRequest) {
    request_future(req).await.expect("request");
}
