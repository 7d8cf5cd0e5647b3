//! Gathering validated batches into one store commit.

use lightwire_chain::{Entry, Outcome};
use lightwire_primitives::FilterHeader;

use crate::{Batch, Durability, Tip};

/// What [`lightwire_chain::Chain`] staged since the last commit, as one [`Batch`].
///
/// Validation takes at most `MAX_BATCH` headers at a time; a store commit is cheapest when
/// it carries tens of thousands. Feed every outcome and its staged entries to
/// [`Pending::push`], commit [`Pending::batch`] when [`Pending::len`] is large enough (or
/// at the end of a sync), then call [`Pending::committed`]. A reorg among the gathered
/// batches is folded in: entries above the fork are dropped, and a fork below the stored tip
/// becomes the batch's rollback.
#[derive(Debug)]
pub struct Pending {
    /// The stored tip's height.
    stored: u32,
    rollback_to: Option<u32>,
    entries: Vec<Entry>,
    /// Filter headers gathered, from `filter_first` on.
    filters: Vec<FilterHeader>,
    filter_first: u32,
    /// Stored filter headers from this height on are to be dropped.
    filter_truncate: Option<u32>,
}

impl Pending {
    /// Nothing gathered yet, on a store whose tip is at `stored_height`.
    pub fn new(stored_height: u32) -> Pending {
        Pending {
            stored: stored_height,
            rollback_to: None,
            entries: Vec::new(),
            filters: Vec::new(),
            filter_first: 0,
            filter_truncate: None,
        }
    }

    /// Take filter headers from `first_height` on: right after what is gathered, or, when
    /// nothing is, right after the filter headers stored (the caller tracks that).
    pub fn push_filters(&mut self, first_height: u32, headers: &[FilterHeader]) {
        if self.filters.is_empty() {
            self.filter_first = first_height;
        }
        debug_assert_eq!(first_height, self.filter_first + self.filters.len() as u32);
        self.filters.extend_from_slice(headers);
    }

    /// Make room for `n` filter headers in all, exactly (once; no-op when there is room),
    /// as [`Self::reserve_for`] does for entries.
    pub fn reserve_filters(&mut self, n: usize) {
        if self.filters.capacity() < n {
            self.filters.reserve_exact(n - self.filters.len());
        }
    }

    /// Drop stored and gathered filter headers from `height` on (they were found wrong).
    pub fn truncate_filters(&mut self, height: u32) {
        if height <= self.filter_first || self.filters.is_empty() {
            self.filters.clear();
            self.filter_first = height;
            self.filter_truncate = Some(self.filter_truncate.map_or(height, |t| t.min(height)));
        } else {
            self.filters.truncate((height - self.filter_first) as usize);
        }
    }

    /// Filter headers gathered.
    pub fn filter_len(&self) -> usize {
        self.filters.len()
    }

    /// Take what a `Chain::connect` (or `connect_branch`) call staged, with its outcome.
    /// Outcomes that stage nothing (stale branch, known headers, ancestors needed) change
    /// nothing.
    pub fn push(&mut self, outcome: &Outcome, staged: &[Entry]) {
        match *outcome {
            Outcome::Extended { .. } => {}
            Outcome::Reorg { fork_height, .. } => {
                // Filter headers above the fork are of the old branch. (The store drops the
                // stored ones with the rollback.)
                let above = fork_height + 1;
                if self.filters.is_empty() || above <= self.filter_first {
                    self.filters.clear();
                    self.filter_first = self.filter_first.min(above);
                } else {
                    self.filters.truncate((above - self.filter_first) as usize);
                }
                let base = self.rollback_to.unwrap_or(self.stored);
                if fork_height >= base {
                    // The fork is among the gathered entries: drop those above it.
                    self.entries.truncate((fork_height - base) as usize);
                } else {
                    self.rollback_to = Some(fork_height);
                    self.entries.clear();
                }
            }
            Outcome::Stale { .. } | Outcome::Known | Outcome::NeedAncestors { .. } => return,
        }
        self.entries.extend_from_slice(staged);
    }

    /// Make room for `n` entries in all, exactly (once; no-op when there is room), so that
    /// gathering up to `n` never grows the buffer by doubling.
    pub fn reserve_for(&mut self, n: usize) {
        if self.entries.capacity() < n {
            self.entries.reserve_exact(n - self.entries.len());
        }
    }

    /// Give back buffer room above `n` entries and `n` filter headers (or what is
    /// gathered, if more): a client following the tip commits a block at a time and need
    /// not keep a bulk sync's buffers. Nothing is moved when the room is already smaller.
    pub fn shrink(&mut self, n: usize) {
        if self.entries.capacity() > n.max(self.entries.len()) {
            self.entries.shrink_to(n);
        }
        if self.filters.capacity() > n.max(self.filters.len()) {
            self.filters.shrink_to(n);
        }
    }

    /// Room for entries (the buffer's capacity).
    pub fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    /// Entries gathered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is nothing to commit.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.filters.is_empty() && self.filter_truncate.is_none()
    }

    /// The gathered change as one batch.
    pub fn batch(&self, durability: Durability) -> Batch<'_> {
        Batch {
            rollback_to: self.rollback_to,
            entries: &self.entries,
            filters: crate::FilterRun {
                truncate_from: self.filter_truncate,
                first_height: self.filter_first,
                headers: &self.filters,
            },
            durability,
        }
    }

    /// Move what is gathered into `into` (whose buffer is reused here), to commit it while
    /// gathering goes on: what is gathered next is based on the store as it will be once
    /// that commit is done. If the commit fails, what was gathered after it is void too:
    /// resume from the store.
    pub fn take_into(&mut self, into: &mut Pending) {
        core::mem::swap(self, into);
        self.rollback_to = None;
        self.entries.clear();
        self.stored = into.entries.last().map_or(into.stored, |e| e.height);
        self.filters.clear();
        self.filter_first = into.filter_first + into.filters.len() as u32;
        self.filter_truncate = None;
    }

    /// The batch was committed and the store's tip is now `tip`: start gathering afresh
    /// (the buffer is kept, so a sync allocates it once).
    pub fn committed(&mut self, tip: &Tip) {
        self.stored = tip.height;
        self.rollback_to = None;
        self.entries.clear();
        self.filter_first += self.filters.len() as u32;
        self.filters.clear();
        self.filter_truncate = None;
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use lightwire_chain::generate::headers_after;
    use lightwire_chain::{Chain, Header, REGTEST};

    use super::*;
    use crate::memory::tests::now;
    use crate::{HeaderStore, MemoryStore};

    const NOW: u64 = 2_000_000_000;

    fn connect(chain: &mut Chain, pending: &mut Pending, headers: &[Header]) -> Outcome {
        let outcome = chain.connect(headers, NOW).expect("valid");
        pending.push(&outcome, chain.staged());
        outcome
    }

    fn commit(store: &mut MemoryStore, pending: &mut Pending) -> Tip {
        let tip = now(store.commit(pending.batch(Durability::Relaxed))).expect("commit");
        pending.committed(&tip);
        tip
    }

    fn stored(store: &MemoryStore, to: u32) -> Vec<Header> {
        let mut out = Vec::new();
        now(store.headers(1, to, &mut out)).unwrap();
        out
    }

    #[test]
    fn batches_gather_into_one_commit() {
        let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 5000, 0);
        let mut chain = Chain::new(&REGTEST);
        let mut store = MemoryStore::new(&REGTEST);
        let mut pending = Pending::new(0);
        for b in headers.chunks(2000) {
            connect(&mut chain, &mut pending, b);
        }
        assert_eq!(pending.len(), 5000);
        assert_eq!(commit(&mut store, &mut pending), Tip::from(chain.tip()));
        assert!(pending.is_empty());
        assert_eq!(stored(&store, 5000), headers);
    }

    #[test]
    fn a_reorg_among_gathered_batches_drops_the_replaced_entries() {
        let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 3000, 0);
        let mut chain = Chain::new(&REGTEST);
        let mut store = MemoryStore::new(&REGTEST);
        let mut pending = Pending::new(0);
        connect(&mut chain, &mut pending, &headers[..1000]);
        commit(&mut store, &mut pending);
        connect(&mut chain, &mut pending, &headers[1000..2000]);
        // A heavier branch from 1500, above the stored tip (1000).
        let branch = headers_after(&REGTEST, &headers[1499], 1500, 600, 1);
        assert!(matches!(
            connect(&mut chain, &mut pending, &branch),
            Outcome::Reorg {
                fork_height: 1500,
                ..
            }
        ));
        assert_eq!(pending.len(), 1100);
        assert_eq!(pending.batch(Durability::Strict).rollback_to, None);
        commit(&mut store, &mut pending);
        let mut want = headers[..1500].to_vec();
        want.extend_from_slice(&branch);
        assert_eq!(stored(&store, 2100), want);
    }

    #[test]
    fn gathering_goes_on_while_a_commit_is_in_flight() {
        let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 3000, 0);
        let mut chain = Chain::new(&REGTEST);
        let mut store = MemoryStore::new(&REGTEST);
        let mut gathering = Pending::new(0);
        let mut in_flight = Pending::new(0);
        connect(&mut chain, &mut gathering, &headers[..1500]);
        gathering.take_into(&mut in_flight);
        assert!(gathering.is_empty());
        // More arrives, including a reorg below what the in-flight commit will store.
        connect(&mut chain, &mut gathering, &headers[1500..2000]);
        let branch = headers_after(&REGTEST, &headers[1199], 1200, 1000, 3);
        assert!(matches!(
            connect(&mut chain, &mut gathering, &branch),
            Outcome::Reorg {
                fork_height: 1200,
                ..
            }
        ));
        assert_eq!(gathering.batch(Durability::Relaxed).rollback_to, Some(1200));
        // The in-flight commit completes, then the gathered one applies on top of it.
        commit(&mut store, &mut in_flight);
        assert_eq!(now(store.tip()).unwrap().height, 1500);
        commit(&mut store, &mut gathering);
        let mut want = headers[..1200].to_vec();
        want.extend_from_slice(&branch);
        assert_eq!(stored(&store, 2200), want);
    }

    #[test]
    fn a_reorg_below_the_stored_tip_becomes_the_rollback() {
        let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 2000, 0);
        let mut chain = Chain::new(&REGTEST);
        let mut store = MemoryStore::new(&REGTEST);
        let mut pending = Pending::new(0);
        connect(&mut chain, &mut pending, &headers[..1500]);
        commit(&mut store, &mut pending);
        connect(&mut chain, &mut pending, &headers[1500..]);
        // Forks at 1200 (stored), then at 1100 (deeper still) before any commit.
        let first = headers_after(&REGTEST, &headers[1199], 1200, 900, 1);
        assert!(matches!(
            connect(&mut chain, &mut pending, &first),
            Outcome::Reorg {
                fork_height: 1200,
                ..
            }
        ));
        let second = headers_after(&REGTEST, &headers[1099], 1100, 1100, 2);
        assert!(matches!(
            connect(&mut chain, &mut pending, &second),
            Outcome::Reorg {
                fork_height: 1100,
                ..
            }
        ));
        let b = pending.batch(Durability::Strict);
        assert_eq!(b.rollback_to, Some(1100));
        assert_eq!(b.entries.len(), 1100);
        commit(&mut store, &mut pending);
        let mut want = headers[..1100].to_vec();
        want.extend_from_slice(&second);
        assert_eq!(stored(&store, 2200), want);
        assert_eq!(now(store.height_of(&first[0].block_hash())).unwrap(), None);
    }
}
