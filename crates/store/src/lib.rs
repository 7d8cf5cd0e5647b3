//! Where validated headers live: the [`HeaderStore`] trait, and its backends.
//!
//! A store keeps every header of the best chain by height, a hash -> height index and the
//! tip. It is written only through [`HeaderStore::commit`], one atomic [`Batch`] at a
//! time (a reorg's rollback and the new headers together), so that after a crash or a
//! closed tab it holds a whole batch or none of it. It never validates: `lightwire-chain`
//! did that before the batch was staged.
//!
//! Backends: [`MemoryStore`] (native use and tests) and, in wasm, `IdbStore` (IndexedDB;
//! its layout is in [`layout`]).
//!
//! A sync validates in batches of at most `lightwire_chain::MAX_BATCH` headers, but an
//! IndexedDB commit costs about as much for 2,000 headers as for 50,000: [`Pending`] gathers
//! what several validated batches (and reorgs among them) staged into one [`Batch`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]
// The store runs on one thread (a browser tab or worker); no Send bound is wanted.
#![allow(async_fn_in_trait)]

#[cfg(all(test, target_arch = "wasm32"))]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

pub mod chunk;
#[cfg(target_arch = "wasm32")]
pub mod idb;
pub mod layout;
mod memory;
mod pending;

use lightwire_chain::{BlockHash, Entry, Header, Network, Params, Work, rebuild_entries};
pub use lightwire_primitives::FilterHeader;

#[cfg(target_arch = "wasm32")]
pub use idb::{IdbOptions, IdbStats, IdbStore};
pub use memory::MemoryStore;
pub use pending::Pending;

/// Version of the stored layout. A store written by a newer version is refused rather than
/// misread; an older one is migrated when opened (the layouts: [`layout`]).
pub const SCHEMA_VERSION: u32 = 6;

/// The best chain's tip as stored.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Tip {
    /// Height.
    pub height: u32,
    /// Block hash.
    pub hash: BlockHash,
    /// Cumulative work.
    pub chainwork: Work,
}

impl From<&Entry> for Tip {
    fn from(e: &Entry) -> Self {
        Tip {
            height: e.height,
            hash: e.hash,
            chainwork: e.chainwork,
        }
    }
}

/// Where a new store starts: the genesis header, or a trusted header at the first height of
/// a difficulty period (a checkpoint start: nothing below it is stored or checked). Its
/// header and chainwork are what the checks of the headers after it need: nBits and time
/// for the next retarget, the work to compare chains and to reach the minimum chain work.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Start {
    /// Height of the header, 0 or the first height of a period.
    pub height: u32,
    /// The header.
    pub header: Header,
    /// Cumulative work of the chain up to and including it.
    pub chainwork: Work,
}

impl Start {
    /// The genesis header of `params`' network.
    pub fn genesis(params: &Params) -> Start {
        Start {
            height: 0,
            header: params.genesis,
            chainwork: layout::genesis_work(params),
        }
    }

    /// Whether this can start a store of `params`' network: at a period's first height
    /// (so that the retarget that follows is checked exactly), and at height 0 only as the
    /// genesis header; its chainwork at least its own work.
    pub fn check(&self, params: &Params) -> Result<(), StoreError> {
        let bad = |what| Err(StoreError::BadStart { what });
        if self.height % params.retarget_interval != 0 {
            return bad("not the first height of a difficulty period");
        }
        if self.height == 0 && self.header != params.genesis {
            return bad("height 0 but not the genesis header");
        }
        let own = self
            .header
            .bits
            .to_target()
            .map(|t| t.work())
            .unwrap_or_default();
        if self.height > 0 && self.chainwork <= own {
            return bad("chainwork not above the header's own work");
        }
        Ok(())
    }

    /// Its validation entry (a period's first header: its nBits are the period's).
    pub fn entry(&self) -> Entry {
        Entry {
            height: self.height,
            hash: self.header.block_hash(),
            header: self.header,
            chainwork: self.chainwork,
            normal_bits: self.header.bits,
        }
    }

    /// As a stored tip.
    pub fn tip(&self) -> Tip {
        Tip::from(&self.entry())
    }
}

/// How hard a commit must be made durable before it counts as done.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Durability {
    /// Bulk sync: the batch is atomic, but may be lost on a power cut (IndexedDB
    /// `relaxed`). A reload then resumes from an earlier whole batch.
    Relaxed,
    /// Checkpoints and the end of a sync: on disk when the commit completes.
    Strict,
}

/// One atomic change.
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    /// For a reorg: first drop every header above this height (the fork point).
    pub rollback_to: Option<u32>,
    /// Validated entries to append: consecutive, the first right after the (rolled-back)
    /// tip and linking to it.
    pub entries: &'a [Entry],
    /// Filter headers to append (BIP157), after the rollback.
    pub filters: FilterRun<'a>,
    /// See [`Durability`].
    pub durability: Durability,
}

/// The name of a record saved beside the headers ([`HeaderStore::record`]): what the
/// record holds is the caller's business (a client keeps its rescan and its wallet), the
/// store keeps the bytes as given. A name is 1 to [`RecordKey::MAX_LEN`] bytes of
/// lowercase ASCII letters, digits, `-`, `_` and `.`: a stable key in every backend.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct RecordKey(&'static str);

impl RecordKey {
    /// Longest name, in bytes.
    pub const MAX_LEN: usize = 64;

    /// The key named `name`, or `None` if the name breaks the rule above.
    pub const fn new(name: &'static str) -> Option<RecordKey> {
        let b = name.as_bytes();
        if b.is_empty() || b.len() > RecordKey::MAX_LEN {
            return None;
        }
        let mut i = 0;
        while i < b.len() {
            if !matches!(b[i], b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.') {
                return None;
            }
            i += 1;
        }
        Some(RecordKey(name))
    }

    /// The key named `name`, a name fixed in the program: meant for constants
    /// (`const SCAN: RecordKey = RecordKey::from_static("scan");`), where a name that
    /// breaks the rule is a compile-time error.
    ///
    /// # Panics
    ///
    /// If `name` breaks the rule, when evaluated at run time.
    pub const fn from_static(name: &'static str) -> RecordKey {
        match RecordKey::new(name) {
            Some(key) => key,
            None => panic!("a record name is 1 to 64 bytes of a-z, 0-9, '-', '_' and '.'"),
        }
    }

    /// Its name: its key in the store.
    pub const fn name(self) -> &'static str {
        self.0
    }
}

/// The stored filter-header chain's last header.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct FilterTip {
    /// Its block's height.
    pub height: u32,
    /// The filter header.
    pub header: FilterHeader,
}

/// Filter headers in a commit. The store keeps filter headers for heights from its base up
/// to at most its header tip, without gaps; a header rollback to `r` drops those above `r`
/// too.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct FilterRun<'a> {
    /// First drop every stored filter header at or above this height (filter headers found
    /// wrong, to be replaced), applied after the header rollback.
    pub truncate_from: Option<u32>,
    /// Height of the first of `headers`: the stored filter tip's next, once the rollback
    /// and the truncation are applied.
    pub first_height: u32,
    /// Consecutive filter headers, none above the header tip the batch leaves.
    pub headers: &'a [FilterHeader],
}

impl FilterRun<'_> {
    /// Whether the run changes nothing.
    pub fn is_empty(&self) -> bool {
        self.truncate_from.is_none() && self.headers.is_empty()
    }
}

/// Check a batch's filter run against the store: `next` is the height of the next filter
/// header the store would take, `tip_after` the header tip the batch leaves. Returns the
/// next height after the batch, and where the stored ones are cut (the new `next` before
/// the run is appended).
pub(crate) fn filter_next(
    next: u32,
    tip_after: u32,
    batch: &Batch<'_>,
) -> Result<(u32, u32), StoreError> {
    let mut cut = next;
    if let Some(r) = batch.rollback_to {
        cut = cut.min(r + 1);
    }
    if let Some(t) = batch.filters.truncate_from {
        cut = cut.min(t);
    }
    let run = &batch.filters;
    if run.headers.is_empty() {
        return Ok((cut, cut));
    }
    if run.first_height != cut {
        return Err(StoreError::FiltersNotContiguous {
            expected: cut,
            got: run.first_height,
        });
    }
    let last = cut + run.headers.len() as u32 - 1;
    if last > tip_after {
        return Err(StoreError::FiltersAboveTip {
            height: last,
            tip: tip_after,
        });
    }
    Ok((last + 1, cut))
}

/// Check a batch's shape against the stored tip height, before anything changes; returns
/// the height its first entry must follow (the rollback height, or the tip). Whether that
/// entry links to the stored header there is for the backend to check.
pub(crate) fn batch_base(tip: u32, batch: &Batch<'_>) -> Result<u32, StoreError> {
    let base = match batch.rollback_to {
        Some(r) if r > tip => {
            return Err(StoreError::RollbackAboveTip {
                rollback_to: r,
                tip,
            });
        }
        Some(_) if batch.entries.is_empty() => return Err(StoreError::RollbackWithoutEntries),
        Some(r) => r,
        None => tip,
    };
    for (i, e) in batch.entries.iter().enumerate() {
        let expected = base + 1 + i as u32;
        if e.height != expected {
            return Err(StoreError::NotContiguous {
                expected,
                got: e.height,
            });
        }
    }
    Ok(base)
}

/// Why a store refused an operation. A refused commit changes nothing.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum StoreError {
    /// The store holds another network's chain.
    #[error("the store holds {stored} headers, not {opened_as}")]
    WrongNetwork {
        /// What it holds.
        stored: Network,
        /// What it was opened for.
        opened_as: Network,
    },
    /// Written by a newer lightwire with a layout this one does not know.
    #[error("stored layout version {found} is newer than this build's {supported}")]
    SchemaTooNew {
        /// The stored schema version.
        found: u32,
        /// The newest this build reads.
        supported: u32,
    },
    /// A batch's entries do not start right after the tip, or skip a height.
    #[error("batch entry at height {got} where {expected} was expected")]
    NotContiguous {
        /// The height expected.
        expected: u32,
        /// The height given.
        got: u32,
    },
    /// A batch's first entry does not link to the stored header before it.
    #[error("batch entry at height {height} does not link to the stored header before it")]
    DoesNotLink {
        /// Height of the entry.
        height: u32,
    },
    /// A rollback to a height above the tip.
    #[error("rollback to {rollback_to} is above the tip {tip}")]
    RollbackAboveTip {
        /// The height asked for.
        rollback_to: u32,
        /// The tip.
        tip: u32,
    },
    /// A batch's filter headers do not start right after the stored ones.
    #[error("filter header at height {got} where {expected} was expected")]
    FiltersNotContiguous {
        /// The height expected.
        expected: u32,
        /// The height given.
        got: u32,
    },
    /// Filter headers above the header tip.
    #[error("filter header at height {height} is above the header tip {tip}")]
    FiltersAboveTip {
        /// Height of the last filter header.
        height: u32,
        /// The header tip.
        tip: u32,
    },
    /// A rollback must come with the branch that replaces what it drops.
    #[error("a rollback needs the entries that replace it")]
    RollbackWithoutEntries,
    /// A read beyond the tip (or an empty range).
    #[error("heights {from}..={to} are not stored (tip {tip})")]
    OutOfRange {
        /// First height asked for.
        from: u32,
        /// Last height asked for.
        to: u32,
        /// The tip.
        tip: u32,
    },
    /// The browser refused to store more (quota).
    #[error("storage quota exceeded; the store keeps its last batch")]
    QuotaExceeded,
    /// This page may not use IndexedDB at all (the API is missing, or the browser refuses
    /// to open a database: some private windows, storage blocked by the user).
    #[error("IndexedDB is not available here: {0}")]
    Unavailable(String),
    /// Another tab or worker committed to the same store since this one read its tip;
    /// nothing was written. Reopen the store to continue from what it holds.
    #[error("another tab or worker changed the store; nothing was written, reopen it")]
    ChangedElsewhere,
    /// A store cannot start at this header ([`Start::check`]).
    #[error("cannot start a store there: {what}")]
    BadStart {
        /// Which rule.
        what: &'static str,
    },
    /// A stored record is not what this layout writes.
    #[error("stored data is corrupt: {what}")]
    Corrupt {
        /// Which record, or what about it.
        what: &'static str,
    },
    /// The store was closed (for example because another tab deletes or upgrades it).
    #[error("the store was closed")]
    Closed,
    /// The storage backend failed (its message).
    #[error("storage failed: {0}")]
    Backend(String),
}

/// Where validated headers live. Reads never see half a commit.
pub trait HeaderStore {
    /// The network's parameters.
    fn params(&self) -> &'static Params;

    /// The stored tip (a new store holds its start: the genesis header, or a checkpoint).
    async fn tip(&self) -> Result<Tip, StoreError>;

    /// The height of the first stored header: 0, or the checkpoint the store started from.
    /// Nothing below it is stored.
    fn base(&self) -> u32 {
        0
    }

    /// Apply `batch` atomically; returns the new tip.
    async fn commit(&mut self, batch: Batch<'_>) -> Result<Tip, StoreError>;

    /// The header at `height`, if stored.
    async fn header(&self, height: u32) -> Result<Option<Header>, StoreError>;

    /// The last stored filter header, if any.
    async fn filter_tip(&self) -> Result<Option<FilterTip>, StoreError>;

    /// Filter headers `from..=to`, appended to `out`.
    async fn filter_headers(
        &self,
        from: u32,
        to: u32,
        out: &mut Vec<FilterHeader>,
    ) -> Result<(), StoreError>;

    /// The record saved under `key`, if any: the bytes as given to [`Self::put_record`].
    async fn record(&self, key: RecordKey) -> Result<Option<Vec<u8>>, StoreError>;

    /// Save (or with `None`, forget) the record under `key`, on its own: it is written
    /// apart from the commits of headers (a caller that keeps state tied to the chain in it
    /// checks it against the headers when it reads it back).
    async fn put_record(&mut self, key: RecordKey, record: Option<&[u8]>)
    -> Result<(), StoreError>;

    /// Headers `from..=to`, appended to `out` (a batch lookup).
    async fn headers(&self, from: u32, to: u32, out: &mut Vec<Header>) -> Result<(), StoreError>;

    /// The height of a stored header.
    async fn height_of(&self, hash: &BlockHash) -> Result<Option<u32>, StoreError>;

    /// The heights of several headers, in order, appended to `out` (a batch lookup: a
    /// backend answers it with fewer reads than one lookup each).
    async fn heights_of(
        &self,
        hashes: &[BlockHash],
        out: &mut Vec<Option<u32>>,
    ) -> Result<(), StoreError> {
        for hash in hashes {
            out.push(self.height_of(hash).await?);
        }
        Ok(())
    }

    /// Chainwork at `height`, which must be 0 or the first height of a period.
    async fn chainwork_at_period_start(&self, height: u32) -> Result<Work, StoreError>;

    /// Validation entries for heights `from..=to`, rebuilt from the stored headers: what
    /// `Chain::resume` and `Chain::connect_branch` take.
    async fn entries(&self, from: u32, to: u32) -> Result<Vec<Entry>, StoreError> {
        // Check the range before reserving memory for it.
        let tip = self.tip().await?.height;
        if from > to || to > tip {
            return Err(StoreError::OutOfRange { from, to, tip });
        }
        let params = self.params();
        if from < self.base() {
            return Err(StoreError::OutOfRange { from, to, tip });
        }
        let start = from - from % params.retarget_interval;
        let mut headers = Vec::with_capacity((to.saturating_sub(start) + 1) as usize);
        self.headers(start, to, &mut headers).await?;
        let work = self.chainwork_at_period_start(start).await?;
        let mut all = rebuild_entries(params, start, &headers, work);
        all.drain(..(from - start) as usize);
        Ok(all)
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn record_names_are_short_lowercase_ascii() {
        for good in ["scan", "wallet", "a", "b-1.x_2", &"z".repeat(64)] {
            let name: &'static str = Box::leak(good.to_string().into_boxed_str());
            assert_eq!(RecordKey::new(name).map(RecordKey::name), Some(name));
        }
        for bad in ["", "Scan", "a b", "é", "a/b", &"z".repeat(65)] {
            let name: &'static str = Box::leak(bad.to_string().into_boxed_str());
            assert_eq!(RecordKey::new(name), None, "{bad:?}");
        }
        const SCAN: RecordKey = RecordKey::from_static("scan");
        assert_eq!(SCAN.name(), "scan");
    }
}
