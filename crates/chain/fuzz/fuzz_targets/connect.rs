//! `Chain::connect` and `Chain::connect_branch` on regtest, with batches picked, mutated
//! and split by the input, starting from a generated chain.
//!
//! Input: `start || now || op count || ops`.
//! * start: `flags || u16`. Flags bit 0 clear: a chain resumed from the main chain's entries
//!   0..=h with h = u16 % 300 (a window from genesis). Set: entries 0..=h with
//!   h = 4032 + u16 % 500, of which the chain keeps the last 4,032 (a full window that
//!   does not reach genesis, so forks near its bottom need ancestors).
//! * now: `selector [|| u16 or u32]`, % 4: 0 and 1 `NOW` (2033), 2 the tip's time plus a u16
//!   (some headers are then too new), 3 any u32.
//! * op: `kind || fields || mutation count || mutations || split count || split sizes`,
//!   kind % 6:
//!   0 main-chain headers: `back (u16 % 400) || count (u8)`, from the height `tip + 1 - back`;
//!   1 a fork: `back (u16 % 400) || branch (u8) || count (u8 % 200)`, new headers mined on the
//!     best chain's header at `tip - back`;
//!   2 the kept side branch continued: `count (u8 % 100)`;
//!   3 `connect_branch`: `depth (u16 % 700) || ancestors (u8) || count (u16 % 2100) || known
//!     (u8 % 4) || branch || count (u8 % 200)`: a fork from the main chain's header at
//!     `tip - 4032 + depth` (below or near the bottom of a full window), preceded by up
//!     to 3 headers of the main chain the chain already has; ancestors % 6: 0..=2 the
//!     main chain's entries ending at the fork's parent, `count` of them; 3 one short of
//!     the parent; 4 with a gap; 5 none; 6 (bit 3 set with 0) the parent replaced by
//!     another header of the same height (ancestors that do not meet the best chain);
//!   4 a batch of 2,017 headers; 5 an empty batch.
//!   Mutation: `index || field || value bytes || flags`, field % 8: time (any, earlier,
//!   about `now + 7200`), bits, version, previous hash, merkle root, nonce; flags bit 0
//!   mines the header again (at most 16 nonces), bit 1 also re-links and re-mines the
//!   (up to 64) headers after it. Splits: up to 3 sizes (u8); each piece is its own call (the first
//!   with the ancestors).
//!
//! Checks after every call, for any batch:
//! * an error leaves the tip, the window (its length, and the hashes at sampled heights:
//!   `Snapshot`) and the kept side branch as they were, and stages nothing (with
//!   `LIGHTWIRE_FUZZ_ALLOW_WINDOW_SHRINK=1`, the window may lose its oldest entries, down to
//!   2,017, and the entries it keeps are as they were: see the README's "Finding");
//! * `Extended { first_height }`: `first_height` is the old tip's height + 1, and the staged
//!   entries are the batch's last headers, linked from the old tip, with their own hashes
//!   and growing chainwork, ending at the new tip;
//! * `Reorg { fork_height, old_tip }`: `old_tip` is the old tip, the new tip has more work,
//!   and the staged entries start at `fork_height + 1` on the best chain's header at
//!   `fork_height`, are linked and end at the new tip, and the 9 heights up to the fork
//!   hold what they held (the fork checks are skipped for a branch validated on ancestors
//!   that were not the best chain's, now or when it became the side branch; a branch
//!   validated on few ancestors brings a window that starts at them);
//! * `Stale`, `Known`, `NeedAncestors { parent }`: the tip and window are unchanged and
//!   nothing is staged; a stale branch has no more work than the tip and forks below it;
//!   `parent` is the batch's first header's parent.
//! * For every batch of unmutated headers (`predict`), the outcome is exactly the one
//!   fork choice prescribes: `Extended` on the tip; on the kept side branch, `Reorg` when it
//!   passes the tip's height (on regtest every header has the same work) else `Stale`;
//!   from a header held in the window with the context to validate there (or from
//!   ancestors), known headers skipped, then `Known`, `Extended`, `Reorg` or `Stale`;
//!   otherwise `NeedAncestors`; `BatchTooLarge` above 2,016; `BadAncestors` for missing,
//!   short or broken ancestors or a parent above the tip; `TimeTooNew` at the first header
//!   validated that is more than two hours after `now`.
//! * The tip's chainwork never decreases.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lightwire_chain::generate::headers_after;
use lightwire_chain::{
    BlockHash, Chain, ConnectError, Entry, Header, MAX_BATCH, MAX_FUTURE_BLOCK_TIME, Outcome,
    REGTEST, Rule, ValidationError, WINDOW_LEN,
};
use lightwire_chain_fuzz::{
    Cursor, MAIN_LEN, NOW, allow_window_shrink, kept, main_chain, mine_briefly, snapshot,
};

/// The side branch the chain keeps, as the target knows it from the outcomes.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Side {
    tip: Entry,
    fork: u32,
    /// Whether it was validated on ancestors given to `connect_branch`: its window then
    /// starts at them, and so does the best chain's if it overtakes.
    deep: bool,
    /// Whether those ancestors were not the best chain's (README, "Observation").
    foreign: bool,
}

struct State {
    chain: Chain,
    side: Option<Side>,
    /// Every height up to this one holds the main chain's header on the best chain.
    main_below: u32,
    now: u64,
}

/// What a call must return.
#[derive(Debug, PartialEq)]
enum Expect {
    Extended(u32),
    Reorg(u32),
    Stale {
        fork: u32,
        tip: BlockHash,
        height: u32,
    },
    Known,
    NeedAncestors(BlockHash),
    TooLarge(usize),
    BadAncestors,
    TooNew {
        height: u32,
        time: u32,
    },
}

/// Ancestors handed to `connect_branch`, and whether they are the best chain's.
struct Ancestors {
    entries: Vec<Entry>,
    genuine: bool,
}

fuzz_target!(|data: &[u8]| {
    let main = main_chain();
    let mut input = Cursor::new(data);
    let deep = input.u8() & 1 == 1;
    let h = if deep {
        WINDOW_LEN as u32 + u32::from(input.u16() % 500)
    } else {
        u32::from(input.u16() % 300)
    };
    let chain = Chain::resume(&REGTEST, &main.entries[..=h as usize]).expect("main entries link");
    let now = match input.u8() % 4 {
        0 | 1 => NOW,
        2 => u64::from(chain.tip().time()) + u64::from(input.u16()),
        _ => u64::from(input.u32()),
    };
    let mut s = State {
        chain,
        side: None,
        main_below: h,
        now,
    };

    for _ in 0..input.u8() % 8 {
        let (mut batch, ancestors) = op(&mut input, &s);
        let clean = !mutate(&mut input, &mut batch);
        let mut pieces = Vec::new();
        let mut rest = &batch[..];
        for _ in 0..input.u8() % 4 {
            let n = usize::from(input.u8()).min(rest.len());
            pieces.push(&rest[..n]);
            rest = &rest[n..];
        }
        pieces.push(rest);
        let mut ancestors = ancestors;
        for piece in pieces {
            step(&mut s, piece, ancestors.take(), clean);
        }
    }
});

/// The batch (and ancestors) an operation describes.
fn op(input: &mut Cursor, s: &State) -> (Vec<Header>, Option<Ancestors>) {
    let main = main_chain();
    let tip = s.chain.tip().height;
    match input.u8() % 6 {
        0 => {
            let back = u32::from(input.u16() % 400);
            let from = (tip + 1).saturating_sub(back).clamp(1, MAIN_LEN);
            let count = u32::from(input.u8());
            let to = (from + count).min(MAIN_LEN + 1);
            (main.headers[from as usize..to as usize].to_vec(), None)
        }
        1 => {
            let back = u32::from(input.u16() % 400);
            let branch = 1 + u32::from(input.u8());
            let count = u32::from(input.u8() % 200);
            let at = tip.saturating_sub(back);
            let parent = best_header(s, at);
            (headers_after(&REGTEST, &parent, at, count, branch), None)
        }
        2 => {
            let count = u32::from(input.u8() % 100);
            match s.side {
                Some(side) => (
                    headers_after(&REGTEST, &side.tip.header, side.tip.height, count, 1000),
                    None,
                ),
                None => (Vec::new(), None),
            }
        }
        3 => {
            let depth = u32::from(input.u16() % 700);
            let variant = input.u8();
            let count = usize::from(input.u16() % 2100);
            let known = u32::from(input.u8() % 4);
            let branch = 2000 + u32::from(input.u8());
            let n = u32::from(input.u8() % 200);
            // The fork's parent on the main chain, preceded in the batch by `known` main
            // headers, so that the ancestors end at `base`.
            let parent = (tip + 1)
                .saturating_sub(WINDOW_LEN as u32)
                .saturating_add(depth)
                .min(MAIN_LEN);
            let known = known.min(parent);
            let base = parent - known;
            let mut batch: Vec<Header> = main.headers[base as usize + 1..=parent as usize].to_vec();
            let mut fork_parent = main.headers[parent as usize];
            let lo = (base as usize + 1).saturating_sub(count.max(1));
            let mut entries: Vec<Entry> = main.entries[lo..=base as usize].to_vec();
            let mut genuine = base <= s.main_below;
            match variant % 6 {
                3 => {
                    entries.pop();
                }
                4 if entries.len() > 2 => {
                    entries.remove(entries.len() / 2);
                }
                5 => entries.clear(),
                0 if variant & 8 != 0 && known == 0 && base > 0 => {
                    // The parent replaced by another header at its height: a chain the
                    // best chain does not hold.
                    let grand = main.headers[base as usize - 1];
                    let other = headers_after(&REGTEST, &grand, base - 1, 1, branch)[0];
                    let last = entries.last_mut().expect("at least one entry");
                    last.header = other;
                    last.hash = other.block_hash();
                    genuine = false;
                    fork_parent = other;
                }
                _ => {}
            }
            batch.extend(headers_after(&REGTEST, &fork_parent, parent, n, branch));
            (batch, Some(Ancestors { entries, genuine }))
        }
        4 => (main.headers[1..=MAX_BATCH + 1].to_vec(), None),
        _ => (Vec::new(), None),
    }
}

/// The best chain's header at `height` as far as the target knows it (the main chain's
/// when not held).
fn best_header(s: &State, height: u32) -> Header {
    match s.chain.window().get(height) {
        Some(e) => e.header,
        None => main_chain().headers[height.min(MAIN_LEN) as usize],
    }
}

/// Apply the input's mutations; whether any header changed.
fn mutate(input: &mut Cursor, batch: &mut [Header]) -> bool {
    let before = batch.to_vec();
    for _ in 0..input.u8() % 4 {
        let index = usize::from(input.u8());
        let field = input.u8();
        let value = input.u32();
        let flags = input.u8();
        if batch.is_empty() {
            continue;
        }
        let i = index % batch.len();
        let h = &mut batch[i];
        match field % 8 {
            0 => h.time = value,
            1 => h.time = h.time.saturating_sub(value % 8000),
            2 => {
                h.time = (NOW as u32 + MAX_FUTURE_BLOCK_TIME)
                    .wrapping_add(value % 3)
                    .wrapping_sub(1)
            }
            3 => {
                h.bits.0 = if value & 1 == 0 {
                    value
                } else {
                    REGTEST
                        .pow_limit_compact()
                        .0
                        .wrapping_add(value >> 30)
                        .wrapping_sub(2)
                }
            }
            4 => {
                h.version = if value & 1 == 0 {
                    (value % 6) as i32
                } else {
                    value as i32
                }
            }
            5 => h.prev_blockhash.0[(value % 32) as usize] ^= 1 << (value >> 29),
            6 => h.merkle_root[(value % 32) as usize] ^= 1 << (value >> 29),
            _ => h.nonce = h.nonce.wrapping_add(1),
        }
        if flags & 1 != 0 {
            mine_briefly(h);
        }
        if flags & 2 != 0 {
            // At most 64: each may take 16 tries against an input-chosen target.
            for j in i + 1..batch.len().min(i + 65) {
                batch[j].prev_blockhash = batch[j - 1].block_hash();
                mine_briefly(&mut batch[j]);
            }
        }
    }
    batch != before.as_slice()
}

/// The outcome fork choice prescribes for a batch of valid, linked headers whose parent
/// is a header the target made.
fn predict(s: &State, batch: &[Header], ancestors: Option<&Ancestors>) -> Expect {
    let chain = &s.chain;
    let tip = *chain.tip();
    let Some(first) = batch.first() else {
        return Expect::Known;
    };
    if batch.len() > MAX_BATCH {
        return Expect::TooLarge(batch.len());
    }
    let prev = first.prev_blockhash;
    // Where the batch's parent is, and whether the chain reads it from the window.
    let parent = match ancestors {
        Some(a) => {
            let linked = a.entries.windows(2).all(|w| w[1].height == w[0].height + 1);
            match a.entries.last() {
                Some(last) if linked && last.hash == prev && last.height <= tip.height => {
                    last.height
                }
                _ => return Expect::BadAncestors,
            }
        }
        None => {
            if prev == tip.hash {
                return validated(s, batch, tip.height, Expect::Extended(tip.height + 1));
            }
            if let Some(side) = s.side
                && side.tip.hash == prev
            {
                let end = side.tip.height + batch.len() as u32;
                let outcome = if end > tip.height {
                    Expect::Reorg(side.fork)
                } else {
                    Expect::Stale {
                        fork: side.fork,
                        tip: batch.last().expect("not empty").block_hash(),
                        height: end,
                    }
                };
                return validated(s, batch, side.tip.height, outcome);
            }
            match chain.window().height_of(&prev) {
                Some(p) if chain.window().has_context_at(p) => p,
                _ => return Expect::NeedAncestors(prev),
            }
        }
    };
    // Headers the best chain already holds are skipped.
    let skip = batch
        .iter()
        .enumerate()
        .take_while(|(i, h)| {
            chain
                .window()
                .get(parent + 1 + *i as u32)
                .is_some_and(|e| e.hash == h.block_hash())
        })
        .count();
    let rest = &batch[skip..];
    let fork = parent + skip as u32;
    if rest.is_empty() {
        return Expect::Known;
    }
    let end = parent + batch.len() as u32;
    let outcome = if fork == tip.height {
        Expect::Extended(tip.height + 1)
    } else if end > tip.height {
        Expect::Reorg(fork)
    } else {
        Expect::Stale {
            fork,
            tip: batch.last().expect("not empty").block_hash(),
            height: end,
        }
    };
    validated(s, rest, fork, outcome)
}

/// `outcome`, unless a header of `headers` (whose parent is at `parent`) is more than two
/// hours after `now`: the only rule an unmutated header can break.
fn validated(s: &State, headers: &[Header], parent: u32, outcome: Expect) -> Expect {
    let max = s.now.saturating_add(u64::from(MAX_FUTURE_BLOCK_TIME));
    match headers.iter().position(|h| u64::from(h.time) > max) {
        Some(i) => Expect::TooNew {
            height: parent + 1 + i as u32,
            time: headers[i].time,
        },
        None => outcome,
    }
}

/// One call: run it, check it, follow the side branch.
fn step(s: &mut State, batch: &[Header], ancestors: Option<Ancestors>, clean: bool) {
    let before_tip = *s.chain.tip();
    let before_window = snapshot(s.chain.window());
    let before_side = s.side;
    let expect = (clean && ancestors.as_ref().is_none_or(|a| a.genuine))
        .then(|| predict(s, batch, ancestors.as_ref()));
    // The best chain's entries near the tip, to check a reorg's fork point against.
    let held = |height: u32| s.chain.window().get(height).copied();
    let at_fork = |height: u32| held(height).map(|e| e.hash);
    // (Fork operations reach 400 below the tip; deeper forks come with main-chain
    // ancestors.)
    let before_at: Vec<Option<BlockHash>> = (0..=before_tip.height.min(420))
        .map(|back| at_fork(before_tip.height - back))
        .collect();
    let fork_hash = |height: u32, s: &State| -> Option<BlockHash> {
        let back = before_tip.height.checked_sub(height)?;
        if let Some(h) = before_at.get(back as usize) {
            return *h;
        }
        (height <= s.main_below).then(|| main_chain().entries[height as usize].hash)
    };

    let result = match &ancestors {
        Some(a) => s.chain.connect_branch(&a.entries, batch, s.now),
        None => s.chain.connect(batch, s.now),
    };
    let tip = *s.chain.tip();
    let staged = s.chain.staged().to_vec();
    let unchanged = |s: &State, what: &str| {
        assert_eq!(*s.chain.tip(), before_tip, "{what}: tip changed");
        let after = snapshot(s.chain.window());
        if after != before_window {
            panic!(
                "{what}: window changed from {} entries to {} (tip {} then {})",
                before_window.len, after.len, before_window.tip.height, after.tip.height
            );
        }
        assert!(s.chain.staged().is_empty(), "{what}: staged entries");
    };
    assert!(tip.chainwork >= before_tip.chainwork, "chainwork went down");

    // The kept side branch, if this call continued it.
    let continued = before_side.filter(|x| {
        ancestors.is_none() && Some(x.tip.hash) == batch.first().map(|h| h.prev_blockhash)
    });
    match result {
        Err(e) => {
            assert!(!e.to_string().is_empty());
            if allow_window_shrink() {
                // The known finding: the window may lose its oldest entries (never below
                // one period and one entry), but what it still holds is as it was.
                let w = s.chain.window();
                assert!(kept(&before_window, w), "error {e:?}: window changed");
                assert!(
                    w.len() >= before_window.len.min(WINDOW_LEN - MAX_BATCH + 1),
                    "error {e:?}: window shrank to {}",
                    w.len()
                );
                assert!(s.chain.staged().is_empty(), "error {e:?}: staged entries");
            } else {
                unchanged(s, &format!("error {e:?}"));
            }
        }
        Ok(Outcome::Extended { first_height }) => {
            assert_eq!(first_height, before_tip.height + 1, "first height");
            linked(&staged, &before_tip, batch);
            assert_eq!(staged.last(), Some(&tip), "tip is the last staged entry");
            assert!(tip.chainwork > before_tip.chainwork);
            assert_eq!(s.chain.window().get(before_tip.height), Some(&before_tip));
        }
        Ok(Outcome::Reorg {
            fork_height,
            old_tip,
        }) => {
            assert_eq!(old_tip, before_tip, "old tip");
            assert!(tip.chainwork > before_tip.chainwork, "a reorg to less work");
            assert!(!staged.is_empty());
            assert_eq!(staged[0].height, fork_height + 1, "first staged height");
            assert!(
                fork_height < before_tip.height,
                "a reorg forks below the tip"
            );
            let genuine = ancestors.as_ref().is_none_or(|a| a.genuine)
                && !continued.is_some_and(|x| x.foreign);
            if genuine && let Some(hash) = fork_hash(fork_height, s) {
                assert_eq!(
                    staged[0].header.prev_blockhash, hash,
                    "the branch forks from the best chain"
                );
            }
            for w in staged.windows(2) {
                link(&w[0], &w[1]);
            }
            assert_eq!(staged.last(), Some(&tip));
            // Below the fork, the best chain is what it was (where the target knows it).
            // A branch validated on ancestors given to `connect_branch` (now, or when it
            // became the side branch) brings a window that starts at them, which may be
            // fewer.
            let from_ancestors = ancestors.is_some() || continued.is_some_and(|x| x.deep);
            for height in fork_height.saturating_sub(8)..=fork_height {
                let now_held = s.chain.window().get(height).map(|e| e.hash);
                if genuine
                    && let Some(hash) = fork_hash(height, s)
                    && (!from_ancestors || now_held.is_some())
                {
                    assert_eq!(
                        now_held,
                        Some(hash),
                        "best chain at {height}, below the fork at {fork_height}"
                    );
                }
            }
            let last = batch.last().expect("a reorg needs headers");
            assert_eq!(
                tip.hash,
                last.block_hash(),
                "the new tip is the batch's last header"
            );
            s.side = None;
            // Ancestors off the best chain end at another header at the fork height.
            let main_to = if genuine {
                fork_height
            } else {
                fork_height.saturating_sub(1)
            };
            s.main_below = s.main_below.min(main_to);
        }
        Ok(Outcome::Stale {
            fork_height,
            branch_tip,
        }) => {
            unchanged(s, "stale");
            assert!(
                branch_tip.chainwork <= tip.chainwork,
                "a stale branch with more work"
            );
            assert!(branch_tip.height > fork_height && fork_height < tip.height);
            let last = batch.last().expect("a stale branch needs headers");
            assert_eq!(branch_tip.hash, last.block_hash());
            assert_eq!(branch_tip.header, *last);
            // A branch continued keeps where it was validated first.
            s.side = Some(Side {
                tip: branch_tip,
                fork: fork_height,
                deep: continued.map_or(ancestors.is_some(), |x| x.deep),
                foreign: continued.map_or(ancestors.as_ref().is_some_and(|a| !a.genuine), |x| {
                    x.foreign
                }),
            });
        }
        Ok(Outcome::Known) => unchanged(s, "known"),
        Ok(Outcome::NeedAncestors { parent }) => {
            unchanged(s, "need ancestors");
            assert_eq!(Some(parent), batch.first().map(|h| h.prev_blockhash));
            assert!(ancestors.is_none(), "connect_branch asked for ancestors");
        }
    }
    if !matches!(result, Ok(Outcome::Reorg { .. } | Outcome::Stale { .. })) {
        assert_eq!(s.side, before_side);
    }

    if let Some(expect) = expect {
        let got = match result {
            Ok(Outcome::Extended { first_height }) => Expect::Extended(first_height),
            Ok(Outcome::Reorg { fork_height, .. }) => Expect::Reorg(fork_height),
            Ok(Outcome::Stale {
                fork_height,
                branch_tip,
            }) => Expect::Stale {
                fork: fork_height,
                tip: branch_tip.hash,
                height: branch_tip.height,
            },
            Ok(Outcome::Known) => Expect::Known,
            Ok(Outcome::NeedAncestors { parent }) => Expect::NeedAncestors(parent),
            Err(ConnectError::BatchTooLarge { len }) => Expect::TooLarge(len),
            Err(ConnectError::BadAncestors) => Expect::BadAncestors,
            Err(ConnectError::Invalid(ValidationError {
                height,
                rule: Rule::TimeTooNew { time, .. },
            })) => Expect::TooNew { height, time },
            Err(e) => panic!(
                "unmutated batch of {} refused: {e:?}, expected {expect:?}",
                batch.len()
            ),
        };
        assert_eq!(
            got,
            expect,
            "outcome of an unmutated batch of {}",
            batch.len()
        );
    }
}

/// `staged` are the last headers of `batch`, each linked to the one before, the first to
/// `parent`, with their own hashes, heights and growing work.
fn linked(staged: &[Entry], parent: &Entry, batch: &[Header]) {
    assert!(
        !staged.is_empty() && staged.len() <= batch.len(),
        "{} staged",
        staged.len()
    );
    let tail = &batch[batch.len() - staged.len()..];
    for (e, h) in staged.iter().zip(tail) {
        assert_eq!(e.header, *h, "staged header");
    }
    link(parent, &staged[0]);
    for w in staged.windows(2) {
        link(&w[0], &w[1]);
    }
}

fn link(a: &Entry, b: &Entry) {
    assert_eq!(b.height, a.height + 1, "heights");
    assert_eq!(b.header.prev_blockhash, a.hash, "link at {}", b.height);
    assert_eq!(b.hash, b.header.block_hash(), "hash at {}", b.height);
    assert!(b.chainwork > a.chainwork, "work at {}", b.height);
}
