//! Fork choice: the best chain is the valid chain with the most cumulative work.
//!
//! [`Chain`] holds the best chain's recent headers (a [`Window`]) and decides where each
//! batch of headers from a peer lands: on the tip, on a branch that now has more work (a
//! reorg), or on a branch with no more work (kept out). A batch is all or nothing: if one
//! header fails, the chain is exactly as before. It never touches storage: when a branch
//! forks below the window, it asks for the ancestors ([`Outcome::NeedAncestors`]) and the
//! caller hands them back from its store.

use crate::header::{BlockHash, Header};
use crate::params::Params;
use crate::sha256x4::hash_header_list;
use crate::validate::{
    Entry, MAX_BATCH, Rule, ValidationError, WINDOW_LEN, Window, validate_hashed,
};

/// Longest side branch kept while it has no more work than the best chain (8 MB of
/// entries). A branch arrives in batches; it must be kept until it overtakes.
pub const MAX_SIDE_BRANCH: usize = 100_000;

/// Where a batch landed. The entries to store, if any, are in [`Chain::staged`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Outcome {
    /// The batch extends the tip; store the staged entries after it.
    Extended {
        /// Height of the first staged entry.
        first_height: u32,
    },
    /// A branch with more work replaced the tip: roll storage back to `fork_height`, then
    /// store the staged entries.
    Reorg {
        /// Height of the last header both chains share.
        fork_height: u32,
        /// The tip that was replaced.
        old_tip: Entry,
    },
    /// A valid branch with no more work than ours (the first seen wins ties): nothing to
    /// store. It is kept, so that the next batch can continue it.
    Stale {
        /// Height of the last header both chains share.
        fork_height: u32,
        /// The branch's tip.
        branch_tip: Entry,
    },
    /// Every header is already on the best chain.
    Known,
    /// The batch's parent is not in the window: look it up in storage and call
    /// [`Chain::connect_branch`] with the entries up to and including it.
    NeedAncestors {
        /// The batch's parent.
        parent: BlockHash,
    },
}

/// Why a batch was refused. The chain is unchanged.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum ConnectError {
    /// A header broke a rule.
    #[error("{0}")]
    Invalid(#[from] ValidationError),
    /// Batches hold at most [`MAX_BATCH`] headers (so that a failed one can be undone).
    #[error("batch of {len} headers exceeds {MAX_BATCH}")]
    BatchTooLarge {
        /// Headers in the batch.
        len: usize,
    },
    /// The ancestors given to [`Chain::connect_branch`] do not end at the batch's parent,
    /// do not link, or do not meet the best chain.
    #[error("ancestors do not lead to the batch's parent")]
    BadAncestors,
    /// A side branch grew past [`MAX_SIDE_BRANCH`] headers without overtaking the best
    /// chain; it is dropped (memory stays bounded).
    #[error("side branch longer than {MAX_SIDE_BRANCH} headers without more work; dropped")]
    SideBranchTooLong,
    /// [`Chain::connect_hashed`] was given a different number of hashes than headers (a
    /// caller's bug, refused rather than trusted).
    #[error("{hashes} hashes given for {headers} headers")]
    HashCount {
        /// Headers in the batch.
        headers: usize,
        /// Hashes given.
        hashes: usize,
    },
}

/// The best chain's recent headers and fork choice.
pub struct Chain {
    params: &'static Params,
    window: Window,
    /// Validated entries of the last batch, for the caller to store (reused: no allocation
    /// per batch once warm).
    staged: Vec<Entry>,
    /// The latest branch with no more work than the best chain, kept to be continued.
    side: Option<Side>,
    /// Entries a full window dropped while a batch was pushed, to put back if the batch is
    /// refused (reused: allocated once).
    evicted: Vec<Entry>,
    /// The block hashes of the batch [`Chain::connect`] hashes itself (reused).
    hashes: Vec<BlockHash>,
}

/// A side branch: its own window (to validate what extends it) and every entry since the
/// fork (to store them all if it overtakes).
struct Side {
    window: Window,
    fork_height: u32,
    entries: Vec<Entry>,
}

impl Chain {
    /// A chain holding only the genesis header.
    pub fn new(params: &'static Params) -> Chain {
        Chain::with_window(params, Window::from_genesis(params))
    }

    /// A chain resumed from stored entries (oldest first, ending at the stored tip; up to
    /// [`WINDOW_LEN`] of them are kept). `None` if they are empty or do not link.
    pub fn resume(params: &'static Params, entries: &[Entry]) -> Option<Chain> {
        let keep = &entries[entries.len().saturating_sub(WINDOW_LEN)..];
        Window::from_entries(keep).map(|w| Chain::with_window(params, w))
    }

    fn with_window(params: &'static Params, window: Window) -> Chain {
        Chain {
            params,
            window,
            staged: Vec::with_capacity(MAX_BATCH),
            side: None,
            evicted: Vec::with_capacity(MAX_BATCH),
            hashes: Vec::with_capacity(MAX_BATCH),
        }
    }

    /// The network's parameters.
    pub fn params(&self) -> &'static Params {
        self.params
    }

    /// The best chain's tip.
    pub fn tip(&self) -> &Entry {
        self.window.tip()
    }

    /// The recent headers of the best chain.
    pub fn window(&self) -> &Window {
        &self.window
    }

    /// Entries the last [`Self::connect`] or [`Self::connect_branch`] validated for storage.
    pub fn staged(&self) -> &[Entry] {
        &self.staged
    }

    /// Take a batch of consecutive headers from a peer, `now` being the caller's clock. The
    /// block hashes are computed here, four at a time in wasm ([`crate::hash4`]).
    pub fn connect(&mut self, headers: &[Header], now: u64) -> Result<Outcome, ConnectError> {
        let mut hashes = core::mem::take(&mut self.hashes);
        hash_header_list(headers, &mut hashes);
        let outcome = self.connect_hashed(headers, &hashes, now);
        self.hashes = hashes;
        outcome
    }

    /// [`Self::connect`] with the block hashes already computed (`hashes[i]` is the hash of
    /// `headers[i]`), as a decoder that had to hash the headers to link them has them.
    pub fn connect_hashed(
        &mut self,
        headers: &[Header],
        hashes: &[BlockHash],
        now: u64,
    ) -> Result<Outcome, ConnectError> {
        self.staged.clear();
        let Some(first) = headers.first() else {
            return Ok(Outcome::Known);
        };
        check_batch(headers, hashes)?;
        if first.prev_blockhash == self.tip().hash {
            return self.extend(headers, hashes, now);
        }
        if self
            .side
            .as_ref()
            .is_some_and(|s| s.window.tip().hash == first.prev_blockhash)
        {
            return self.extend_side(headers, hashes, now);
        }
        match self.window.height_of(&first.prev_blockhash) {
            Some(fork) if self.window.has_context_at(fork) => {
                self.branch(None, fork, headers, hashes, now)
            }
            // Not held, or too near the bottom of the window to check the median time and
            // a retarget exactly: the caller's store has what lies below.
            _ => Ok(Outcome::NeedAncestors {
                parent: first.prev_blockhash,
            }),
        }
    }

    /// Take a batch whose parent is below the window, with `ancestors`: consecutive stored
    /// entries of the best chain (oldest first) ending at the batch's parent; up to
    /// [`WINDOW_LEN`] are used, and validation needs the last 2016.
    pub fn connect_branch(
        &mut self,
        ancestors: &[Entry],
        headers: &[Header],
        now: u64,
    ) -> Result<Outcome, ConnectError> {
        let mut hashes = core::mem::take(&mut self.hashes);
        hash_header_list(headers, &mut hashes);
        let outcome = self.connect_branch_hashed(ancestors, headers, &hashes, now);
        self.hashes = hashes;
        outcome
    }

    /// [`Self::connect_branch`] with the block hashes already computed.
    pub fn connect_branch_hashed(
        &mut self,
        ancestors: &[Entry],
        headers: &[Header],
        hashes: &[BlockHash],
        now: u64,
    ) -> Result<Outcome, ConnectError> {
        self.staged.clear();
        let Some(first) = headers.first() else {
            return Ok(Outcome::Known);
        };
        check_batch(headers, hashes)?;
        let keep = &ancestors[ancestors.len().saturating_sub(WINDOW_LEN)..];
        let base = Window::from_entries(keep).ok_or(ConnectError::BadAncestors)?;
        // They must end at the batch's parent, on the best chain: where the window holds that
        // height its hash must match (below the window the caller's store vouches for it).
        let on_best = self
            .window
            .get(base.tip().height)
            .is_none_or(|e| e.hash == base.tip().hash);
        if base.tip().hash != first.prev_blockhash
            || base.tip().height > self.tip().height
            || !on_best
        {
            return Err(ConnectError::BadAncestors);
        }
        let fork = base.tip().height;
        self.branch(Some(base), fork, headers, hashes, now)
    }

    fn extend(
        &mut self,
        headers: &[Header],
        hashes: &[BlockHash],
        now: u64,
    ) -> Result<Outcome, ConnectError> {
        let first_height = self.tip().height + 1;
        self.evicted.clear();
        for (i, (header, hash)) in headers.iter().zip(hashes).enumerate() {
            match validate_hashed(self.params, &self.window, header, *hash, now) {
                Ok(v) => {
                    self.evicted.extend(self.window.push_evicting(v.entry));
                    self.staged.push(v.entry);
                }
                Err(e) => {
                    // Undo the batch exactly, the entries a full window dropped included.
                    undo(&mut self.window, i, &self.evicted);
                    self.staged.clear();
                    return Err(e.into());
                }
            }
        }
        Ok(Outcome::Extended { first_height })
    }

    /// Validate `headers`, whose parent is the best chain's header at `fork`, on a copy of
    /// the window rewound to it (or on `deep`, built from stored ancestors, when the fork is
    /// below the window); then keep whichever of branch and best chain has more work.
    fn branch(
        &mut self,
        deep: Option<Window>,
        mut fork: u32,
        headers: &[Header],
        hashes: &[BlockHash],
        now: u64,
    ) -> Result<Outcome, ConnectError> {
        // A peer may resend headers we already have: skip those on the best chain before
        // copying anything.
        let mut skip = 0;
        while let (Some(h), Some(e)) = (hashes.get(skip), self.window.get(fork + 1)) {
            if e.hash != *h {
                break;
            }
            fork += 1;
            skip += 1;
        }
        let (rest, rest_hashes) = (&headers[skip..], &hashes[skip..]);
        if rest.is_empty() {
            return Ok(Outcome::Known);
        }
        if fork == self.tip().height {
            return self.extend(rest, rest_hashes, now);
        }
        // Core (`bad-fork-prior-to-checkpoint`): a fork below the last checkpoint the chain
        // has reached. Only a checkpoint reached counts: one fake header on genesis must not
        // lock the real chain out before it gets there.
        let checkpoint = self.params.last_checkpoint_reached(self.tip().height);
        if fork + 1 < checkpoint {
            return Err(ConnectError::Invalid(ValidationError {
                height: fork + 1,
                rule: Rule::ForkBelowCheckpoint { checkpoint },
            }));
        }
        // Forks are rare: copying the window (about 320 KB) here keeps the tip path free.
        let mut base = match deep {
            Some(mut w) => {
                // Headers skipped as known continue the stored ancestors.
                for height in w.tip().height + 1..=fork {
                    let entry = self.window.get(height).ok_or(ConnectError::BadAncestors)?;
                    w.push(*entry);
                }
                w
            }
            None => self.window.clone(),
        };
        if !base.truncate_to(fork) {
            return Err(ConnectError::BadAncestors);
        }
        for (header, hash) in rest.iter().zip(rest_hashes) {
            match validate_hashed(self.params, &base, header, *hash, now) {
                Ok(v) => {
                    base.push(v.entry);
                    self.staged.push(v.entry);
                }
                Err(e) => {
                    self.staged.clear();
                    return Err(e.into());
                }
            }
        }
        let entries = self.staged.clone();
        Ok(self.choose(Side {
            window: base,
            fork_height: fork,
            entries,
        }))
    }

    /// Continue the kept side branch with `headers`.
    fn extend_side(
        &mut self,
        headers: &[Header],
        hashes: &[BlockHash],
        now: u64,
    ) -> Result<Outcome, ConnectError> {
        let Some(mut side) = self.side.take() else {
            return Err(ConnectError::BadAncestors);
        };
        if side.entries.len() + headers.len() > MAX_SIDE_BRANCH {
            return Err(ConnectError::SideBranchTooLong);
        }
        self.evicted.clear();
        for (pushed, (header, hash)) in headers.iter().zip(hashes).enumerate() {
            match validate_hashed(self.params, &side.window, header, *hash, now) {
                Ok(v) => {
                    self.evicted.extend(side.window.push_evicting(v.entry));
                    side.entries.push(v.entry);
                }
                // All or nothing: the branch is kept as it was before this batch.
                Err(e) => {
                    side.entries.truncate(side.entries.len() - pushed);
                    undo(&mut side.window, pushed, &self.evicted);
                    self.side = Some(side);
                    return Err(e.into());
                }
            }
        }
        Ok(self.choose(side))
    }

    /// Keep whichever of `side` and the best chain has more work (ties keep the best chain:
    /// the first seen wins, as in Core).
    fn choose(&mut self, side: Side) -> Outcome {
        self.staged.clear();
        if side.window.tip().chainwork > self.tip().chainwork {
            let old_tip = *self.tip();
            self.window = side.window;
            // Everything since the fork is stored, not only the last batch.
            self.staged.extend_from_slice(&side.entries);
            self.side = None;
            Outcome::Reorg {
                fork_height: side.fork_height,
                old_tip,
            }
        } else {
            let outcome = Outcome::Stale {
                fork_height: side.fork_height,
                branch_tip: *side.window.tip(),
            };
            self.side = Some(side);
            outcome
        }
    }
}

/// A batch's size and its hashes' count.
fn check_batch(headers: &[Header], hashes: &[BlockHash]) -> Result<(), ConnectError> {
    if headers.len() > MAX_BATCH {
        return Err(ConnectError::BatchTooLarge { len: headers.len() });
    }
    if hashes.len() != headers.len() {
        return Err(ConnectError::HashCount {
            headers: headers.len(),
            hashes: hashes.len(),
        });
    }
    Ok(())
}

/// Undo `pushed` pushes onto `window`, putting back what they `evicted` (oldest first).
fn undo(window: &mut Window, pushed: usize, evicted: &[Entry]) {
    for _ in 0..pushed {
        window.pop();
    }
    for e in evicted.iter().rev() {
        window.restore_oldest(*e);
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::params::REGTEST;

    const NOW: u64 = 2_000_000_000;

    /// `count` headers on `branch` after `parent` (at height `parent_height`).
    fn headers_after(parent: &Header, parent_height: u32, count: u32, branch: u32) -> Vec<Header> {
        crate::generate::headers_after(&REGTEST, parent, parent_height, count, branch)
    }

    /// The main chain: genesis then `count` headers (index = height).
    fn main_chain(count: u32) -> Vec<Header> {
        let mut all = vec![REGTEST.genesis];
        all.extend(headers_after(&REGTEST.genesis, 0, count, 0));
        all
    }

    /// A chain that took `headers[1..]` in batches of `batch`.
    fn synced(headers: &[Header], batch: usize) -> Chain {
        let mut chain = Chain::new(&REGTEST);
        for b in headers[1..].chunks(batch) {
            assert!(matches!(
                chain.connect(b, NOW).expect("valid"),
                Outcome::Extended { .. }
            ));
        }
        chain
    }

    #[test]
    fn extends_in_batches_and_stages_what_to_store() {
        let main = main_chain(2500);
        let mut chain = Chain::new(&REGTEST);
        let mut next = 1;
        for b in main[1..].chunks(800) {
            assert_eq!(
                chain.connect(b, NOW),
                Ok(Outcome::Extended { first_height: next })
            );
            assert_eq!(chain.staged().len(), b.len());
            assert_eq!(chain.staged()[0].hash, b[0].block_hash());
            next += b.len() as u32;
        }
        assert_eq!(chain.tip().height, 2500);
        assert_eq!(chain.tip().hash, main[2500].block_hash());
        assert_eq!(chain.connect(&main[2400..2450], NOW), Ok(Outcome::Known));
        assert_eq!(chain.connect(&[], NOW), Ok(Outcome::Known));
        let too_many = headers_after(&main[2500], 2500, MAX_BATCH as u32 + 1, 0);
        assert_eq!(
            chain.connect(&too_many, NOW),
            Err(ConnectError::BatchTooLarge { len: MAX_BATCH + 1 })
        );
    }

    #[test]
    fn a_bad_header_refuses_the_whole_batch() {
        let main = main_chain(3000);
        let mut chain = synced(&main[..=2000], 1000);
        let before = (*chain.tip(), chain.window().len());
        let mut batch = main[2001..].to_vec();
        batch[300].prev_blockhash.0[5] ^= 1;
        let err = chain.connect(&batch, NOW).expect_err("refused");
        assert!(matches!(
            err,
            ConnectError::Invalid(ValidationError {
                height: 2301,
                rule: Rule::PrevHashMismatch { .. }
            })
        ));
        assert_eq!(
            (*chain.tip(), chain.window().len()),
            before,
            "unchanged, context kept"
        );
        assert!(chain.staged().is_empty());
        assert!(matches!(
            chain.connect(&main[2001..], NOW),
            Ok(Outcome::Extended { first_height: 2001 })
        ));
    }

    /// Ancestors that end on another branch than the best chain's are refused where the
    /// window can tell (found by the chain fuzz target).
    #[test]
    fn ancestors_off_the_best_chain_are_refused() {
        let main = main_chain(3_000);
        let mut chain = synced(&main, 1_000);
        // A branch of 60 from genesis: its header 50 is not the best chain's.
        let other = headers_after(&REGTEST.genesis, 0, 60, 7);
        let mut side = Chain::new(&REGTEST);
        side.connect(&other[..50], NOW).unwrap();
        let ancestors: Vec<Entry> = (0..=50)
            .filter_map(|h| side.window().get(h).copied())
            .collect();
        assert_eq!(
            chain.connect_branch(&ancestors, &other[50..], NOW),
            Err(ConnectError::BadAncestors)
        );
    }

    /// A refused batch on a full window leaves every entry in place, the oldest ones the
    /// batch pushed out included (found by the chain fuzz target: the window shrank).
    #[test]
    fn a_refused_batch_leaves_a_full_window_exactly_as_it_was() {
        let main = main_chain(4_200);
        let mut chain = synced(&main[..=4_032], 2_000);
        let before: Vec<Entry> = (0..=4_032)
            .filter_map(|h| chain.window().get(h).copied())
            .collect();
        assert_eq!(before.len(), WINDOW_LEN, "full");
        let mut batch = main[4_033..=4_137].to_vec();
        batch[9].time = 0;
        assert!(chain.connect(&batch, NOW).is_err());
        let after: Vec<Entry> = (0..=4_032)
            .filter_map(|h| chain.window().get(h).copied())
            .collect();
        assert_eq!(after, before);
        // And the valid headers still extend it.
        assert!(matches!(
            chain.connect(&main[4_033..], NOW),
            Ok(Outcome::Extended {
                first_height: 4_033
            })
        ));
    }

    #[test]
    fn a_heavier_fork_reorgs_a_lighter_or_equal_one_does_not() {
        let main = main_chain(1000);
        let mut chain = synced(&main, 500);
        // 100 headers from 900: tip 999 < 1000, stale. 101: a tie, still stale.
        let fork = headers_after(&main[899], 899, 102, 1);
        let old_tip = *chain.tip();
        assert!(matches!(
            chain.connect(&fork[..100], NOW),
            Ok(Outcome::Stale {
                fork_height: 899,
                ..
            })
        ));
        assert_eq!(*chain.tip(), old_tip);
        assert!(chain.staged().is_empty());
        // The kept side branch continues: one more header ties (stale), one more overtakes.
        assert!(matches!(
            chain.connect(&fork[100..101], NOW),
            Ok(Outcome::Stale { .. })
        ));
        assert_eq!(
            chain.connect(&fork[101..], NOW),
            Ok(Outcome::Reorg {
                fork_height: 899,
                old_tip
            })
        );
        assert_eq!(chain.tip().height, 1001);
        assert_eq!(chain.tip().hash, fork[101].block_hash());
        // Everything since the fork is staged, not only the last batch.
        assert_eq!(chain.staged().len(), 102);
        assert_eq!(chain.staged()[0].hash, fork[0].block_hash());
        // The old branch can come back with more work.
        let back = headers_after(&main[1000], 1000, 2, 0);
        assert!(matches!(
            chain.connect(&back, NOW),
            Ok(Outcome::NeedAncestors { .. })
        ));
    }

    #[test]
    fn a_long_branch_arriving_in_batches_reorgs_deeply() {
        let main = main_chain(6000);
        let mut chain = synced(&main, 2000);
        // Fork at 1000: deeper than the window. The caller supplies the ancestors.
        let branch = headers_after(&main[1000], 1000, 5100, 1);
        let parent = match chain.connect(&branch[..2000], NOW) {
            Ok(Outcome::NeedAncestors { parent }) => parent,
            other => panic!("expected NeedAncestors, got {other:?}"),
        };
        assert_eq!(parent, main[1000].block_hash());
        let ancestors = synced(&main[..=1000], 1000).window().clone();
        let entries: Vec<Entry> = (0..=1000)
            .filter_map(|h| ancestors.get(h).copied())
            .collect();
        assert!(matches!(
            chain.connect_branch(&entries, &branch[..2000], NOW),
            Ok(Outcome::Stale {
                fork_height: 1000,
                ..
            })
        ));
        assert!(matches!(
            chain.connect(&branch[2000..4000], NOW),
            Ok(Outcome::Stale { .. })
        ));
        let old_tip = *chain.tip();
        assert_eq!(
            chain.connect(&branch[4000..], NOW),
            Ok(Outcome::Reorg {
                fork_height: 1000,
                old_tip
            })
        );
        assert_eq!(chain.tip().height, 6100);
        assert_eq!(chain.staged().len(), 5100);
        // The headers themselves, from all three batches, ready for the store.
        let staged: Vec<Header> = chain.staged().iter().map(|e| e.header).collect();
        assert_eq!(staged, branch);
        // Wrong ancestors are refused.
        assert_eq!(
            chain.connect_branch(&entries[..500], &branch[..10], NOW),
            Err(ConnectError::BadAncestors)
        );
    }

    #[test]
    fn a_bad_header_on_a_side_branch_keeps_the_branch_as_it_was() {
        let main = main_chain(1000);
        let mut chain = synced(&main, 500);
        let fork = headers_after(&main[899], 899, 150, 1);
        assert!(matches!(
            chain.connect(&fork[..60], NOW),
            Ok(Outcome::Stale { .. })
        ));
        let mut bad = fork[60..120].to_vec();
        bad[10].time = 1; // far below the median time past
        assert!(chain.connect(&bad, NOW).is_err());
        assert_eq!(
            chain.connect(&fork[60..], NOW),
            Ok(Outcome::Reorg {
                fork_height: 899,
                old_tip: *synced(&main, 500).tip()
            })
        );
    }

    /// Regtest with a checkpoint at height 200 of `main`.
    fn checkpoint_at_200(main: &[Header]) -> &'static Params {
        let hash: &'static str = Box::leak(main[200].block_hash().to_string().into_boxed_str());
        Box::leak(Box::new(Params {
            checkpoints: Box::leak(vec![(200, hash)].into_boxed_slice()),
            ..REGTEST.clone()
        }))
    }

    #[test]
    fn a_fork_below_the_last_checkpoint_is_refused() {
        let main = main_chain(300);
        let params = checkpoint_at_200(&main);
        let mut chain = Chain::new(params);
        chain
            .connect(&main[1..=300], NOW)
            .expect("the checkpointed chain");
        let below = headers_after(&main[150], 150, 200, 1);
        assert_eq!(
            chain.connect(&below, NOW),
            Err(ConnectError::Invalid(ValidationError {
                height: 151,
                rule: Rule::ForkBelowCheckpoint { checkpoint: 200 }
            }))
        );
        // At the checkpoint's own height, the checkpoint decides.
        let at = headers_after(&main[199], 199, 200, 1);
        assert!(matches!(
            chain.connect(&at, NOW),
            Err(ConnectError::Invalid(ValidationError {
                height: 200,
                rule: Rule::CheckpointMismatch { .. }
            }))
        ));
        // Above it, forks are fine.
        let above = headers_after(&main[250], 250, 60, 1);
        assert!(matches!(
            chain.connect(&above, NOW),
            Ok(Outcome::Reorg {
                fork_height: 250,
                ..
            })
        ));
    }

    #[test]
    fn a_checkpoint_not_reached_yet_does_not_lock_out_the_real_chain() {
        let main = main_chain(300);
        let params = checkpoint_at_200(&main);
        // A hostile gateway's one header with valid proof of work on genesis is taken...
        let mut chain = Chain::new(params);
        let fake = headers_after(&main[0], 0, 1, 9);
        assert!(matches!(
            chain.connect(&fake, NOW),
            Ok(Outcome::Extended { .. })
        ));
        // ...and the real chain, which forks from genesis, below the checkpoint, replaces
        // it: the checkpoint at 200 is not reached yet.
        assert!(matches!(
            chain.connect(&main[1..=300], NOW),
            Ok(Outcome::Reorg { fork_height: 0, .. })
        ));
        assert_eq!(chain.tip().hash, main[300].block_hash());
        // Once it is reached, it guards what is below it.
        let below = headers_after(&main[150], 150, 200, 1);
        assert!(matches!(
            chain.connect(&below, NOW),
            Err(ConnectError::Invalid(ValidationError {
                rule: Rule::ForkBelowCheckpoint { checkpoint: 200 },
                ..
            }))
        ));
    }

    #[test]
    fn resumes_from_stored_entries() {
        let main = main_chain(5000);
        let chain = synced(&main, 2000);
        let w = chain.window();
        let entries: Vec<Entry> = (0..=5000).filter_map(|h| w.get(h).copied()).collect();
        assert_eq!(entries.len(), WINDOW_LEN);
        let mut resumed = Chain::resume(&REGTEST, &entries).expect("links");
        assert_eq!(resumed.tip(), chain.tip());
        let more = headers_after(&main[5000], 5000, 10, 0);
        assert!(matches!(
            resumed.connect(&more, NOW),
            Ok(Outcome::Extended { first_height: 5001 })
        ));
        assert!(Chain::resume(&REGTEST, &[]).is_none());
        assert!(Chain::resume(&REGTEST, &[entries[0], entries[2]]).is_none());
    }

    /// A fork a few headers above the bottom of the window was once validated on those
    /// few alone, so its median time past went unchecked. It now asks for the stored
    /// ancestors, and the median is checked on them.
    #[test]
    fn a_fork_near_the_bottom_of_the_window_is_checked_on_its_ancestors() {
        let main = main_chain(4600);
        let mut chain = synced(&main, 2000);
        let bottom = 4600 + 1 - WINDOW_LEN as u32;
        let parent = bottom + 5;
        assert!(chain.window().get(parent).is_some(), "the parent is held");
        let median = {
            let mut times: Vec<u32> = main[parent as usize - 10..=parent as usize]
                .iter()
                .map(|h| h.time)
                .collect();
            times.sort_unstable();
            times[5]
        };
        let mut fork = headers_after(&main[parent as usize], parent, 1, 1);
        fork[0].time = median;
        let target = fork[0].bits.to_target().unwrap();
        assert!(crate::generate::mine(&mut fork[0], &target));
        assert_eq!(
            chain.connect(&fork, NOW),
            Ok(Outcome::NeedAncestors {
                parent: main[parent as usize].block_hash()
            })
        );
        let stored = synced(&main[..=parent as usize], 2000);
        let ancestors: Vec<Entry> = (0..=parent)
            .filter_map(|h| stored.window().get(h).copied())
            .collect();
        assert_eq!(
            chain.connect_branch(&ancestors, &fork, NOW),
            Err(ConnectError::Invalid(ValidationError {
                height: parent + 1,
                rule: Rule::TimeTooOld {
                    time: median,
                    median
                }
            }))
        );
        // Headers the store would skip as known continue its ancestors exactly too.
        let mut known_then_fork = main[parent as usize + 1..parent as usize + 3].to_vec();
        let mut late = headers_after(&main[parent as usize + 2], parent + 2, 1, 1);
        late[0].time = 0;
        assert!(crate::generate::mine(&mut late[0], &target));
        known_then_fork.extend(late);
        assert!(matches!(
            chain.connect_branch(&ancestors, &known_then_fork, NOW),
            Err(ConnectError::Invalid(ValidationError {
                rule: Rule::TimeTooOld { time: 0, .. },
                ..
            }))
        ));
        // A fork higher up, with 2016 headers below it in the window, needs no store.
        let higher = bottom + MAX_BATCH as u32;
        let ok = headers_after(&main[higher as usize], higher, 1, 1);
        assert!(matches!(chain.connect(&ok, NOW), Ok(Outcome::Stale { .. })));
    }

    #[test]
    fn a_rejected_header_is_the_source_of_the_refusal() {
        use std::error::Error;

        let invalid = ValidationError {
            height: 2500,
            rule: Rule::TimeTooOld { time: 1, median: 2 },
        };
        let err = ConnectError::from(invalid);
        let source = err
            .source()
            .and_then(|s| s.downcast_ref::<ValidationError>());
        assert_eq!(source, Some(&invalid));
        // The message is still the rejected header's own.
        assert_eq!(err.to_string(), invalid.to_string());
        assert!(ConnectError::BadAncestors.source().is_none());
        assert!(invalid.source().is_none());
    }
}
