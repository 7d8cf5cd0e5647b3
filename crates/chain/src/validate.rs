//! Validation of each header in its parent's context, as a full node does it for headers:
//! the link, proof of work, the exact expected `nBits`, the median-time-past and future
//! limits, minimum versions, checkpoints, and testnet4's timewarp rule (BIP94).
//!
//! Validation reads only [`Window`], an in-memory ring of the last 2016 headers: enough for
//! a retarget, the median of 11 and the testnet minimum-difficulty walk-back, so nothing on
//! this path touches storage or allocates.

use core::cell::Cell;
use core::fmt;

use crate::header::{BlockHash, Header};
use crate::params::Params;
use crate::target::{CompactError, CompactTarget, Target, Work};

/// Seconds a header's time may be ahead of the validating node's clock (Core's
/// `MAX_FUTURE_BLOCK_TIME`).
pub const MAX_FUTURE_BLOCK_TIME: u32 = 2 * 60 * 60;
/// Timestamps whose median a new header must exceed.
pub const MEDIAN_TIME_SPAN: usize = 11;
/// BIP94: the first block of a period may be at most this far before its parent.
pub const MAX_TIMEWARP: u32 = 600;

/// The rule a header broke.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Rule {
    /// `prev_blockhash` is not the hash of the tip it was offered to.
    PrevHashMismatch {
        /// The tip's hash.
        expected: BlockHash,
        /// The header's `prev_blockhash`.
        got: BlockHash,
    },
    /// `nBits` cannot be a target (negative, overflowing, zero) or is easier than the
    /// network's limit (Core: `bad-diffbits` in `CheckProofOfWork`).
    InvalidTarget {
        /// The header's `nBits`.
        bits: CompactTarget,
    },
    /// The hash does not meet the header's own target (Core: `high-hash`).
    HighHash {
        /// The header's hash.
        hash: BlockHash,
    },
    /// `nBits` is not what the difficulty rules require (Core: `bad-diffbits`).
    WrongBits {
        /// What the rules require.
        expected: CompactTarget,
        /// What the header has.
        got: CompactTarget,
    },
    /// At a retarget whose period began before the trusted start, `nBits` is outside the
    /// range the clamp allows (a factor of 4 either way, capped at the limit).
    RetargetOutOfRange {
        /// What the header has.
        got: CompactTarget,
    },
    /// Timestamp at or below the median of the previous 11 (Core: `time-too-old`).
    TimeTooOld {
        /// The header's time.
        time: u32,
        /// The median it must exceed.
        median: u32,
    },
    /// Timestamp more than two hours past the caller's clock (Core: `time-too-new`).
    TimeTooNew {
        /// The header's time.
        time: u32,
        /// The latest time allowed.
        max: u32,
    },
    /// BIP94: the first block of a period is more than 600 s before its parent
    /// (Core: `time-timewarp-attack`).
    Timewarp {
        /// The header's time.
        time: u32,
        /// Its parent's time.
        prev_time: u32,
    },
    /// Version below the minimum after BIP34/66/65 activation (Core: `bad-version`).
    BadVersion {
        /// The header's version.
        version: i32,
        /// The minimum at this height.
        min: i32,
    },
    /// The hash differs from the checkpoint at this height (Core: `checkpoint mismatch`).
    CheckpointMismatch {
        /// The checkpoint's hash.
        expected: BlockHash,
        /// The header's hash.
        got: BlockHash,
    },
    /// The header forks off the best chain below the last checkpoint
    /// (Core: `bad-fork-prior-to-checkpoint`).
    ForkBelowCheckpoint {
        /// Height of the last checkpoint.
        checkpoint: u32,
    },
}

impl Rule {
    /// Whether the header may become valid later without changing: only a time too far
    /// ahead of our clock (Bitcoin Core's `BLOCK_TIME_FUTURE`, which it does not punish).
    /// Every other rule is broken for good.
    pub fn is_not_yet(&self) -> bool {
        matches!(self, Rule::TimeTooNew { .. })
    }

    /// A short machine-readable name (kebab-case; Bitcoin Core's reject reason where it
    /// has one), stable across versions for applications to match on.
    pub fn code(&self) -> &'static str {
        match self {
            Rule::PrevHashMismatch { .. } => "prev-hash-mismatch",
            Rule::InvalidTarget { .. } => "bad-diffbits-target",
            Rule::HighHash { .. } => "high-hash",
            Rule::WrongBits { .. } => "bad-diffbits",
            Rule::RetargetOutOfRange { .. } => "retarget-out-of-range",
            Rule::TimeTooOld { .. } => "time-too-old",
            Rule::TimeTooNew { .. } => "time-too-new",
            Rule::Timewarp { .. } => "time-timewarp-attack",
            Rule::BadVersion { .. } => "bad-version",
            Rule::CheckpointMismatch { .. } => "checkpoint-mismatch",
            Rule::ForkBelowCheckpoint { .. } => "bad-fork-prior-to-checkpoint",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::PrevHashMismatch { expected, got } => {
                write!(f, "prev-hash: links to {got}, not to the tip {expected}")
            }
            Rule::InvalidTarget { bits } => write!(
                f,
                "bad-diffbits: {bits} is not a valid target within the limit"
            ),
            Rule::HighHash { hash } => write!(f, "high-hash: {hash} does not meet its target"),
            Rule::WrongBits { expected, got } => {
                write!(f, "bad-diffbits: nBits {got}, expected {expected}")
            }
            Rule::RetargetOutOfRange { got } => {
                write!(
                    f,
                    "bad-diffbits: retarget to {got} is outside the allowed factor of 4"
                )
            }
            Rule::TimeTooOld { time, median } => {
                write!(
                    f,
                    "time-too-old: {time} is not above the median time past {median}"
                )
            }
            Rule::TimeTooNew { time, max } => {
                write!(f, "time-too-new: {time} is after {max} (clock + 2 h)")
            }
            Rule::Timewarp { time, prev_time } => {
                write!(
                    f,
                    "time-timewarp-attack: {time} is over 600 s before its parent's {prev_time}"
                )
            }
            Rule::BadVersion { version, min } => {
                write!(f, "bad-version: {version} is below {min} at this height")
            }
            Rule::CheckpointMismatch { expected, got } => {
                write!(f, "checkpoint mismatch: {got}, checkpoint is {expected}")
            }
            Rule::ForkBelowCheckpoint { checkpoint } => {
                write!(
                    f,
                    "bad-fork-prior-to-checkpoint: forks below the checkpoint at {checkpoint}"
                )
            }
        }
    }
}

/// A rejected header: its height and the rule it broke.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
#[error("header at height {height} rejected: {rule}")]
pub struct ValidationError {
    /// Height the header would have had.
    pub height: u32,
    /// The rule.
    pub rule: Rule,
}

/// What validation keeps of each recent header.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Entry {
    /// Height.
    pub height: u32,
    /// Block hash.
    pub hash: BlockHash,
    /// The header itself: a store keeps it, and a side branch that overtakes must hand
    /// every one of its headers over, not only the last batch's.
    pub header: Header,
    /// Cumulative work up to and including this header.
    pub chainwork: Work,
    /// What Core's testnet minimum-difficulty walk-back returns from this header: the
    /// `nBits` of the nearest ancestor-or-self that starts a period or does not use the
    /// limit. Carried forward so that the walk costs O(1) instead of up to 2015 steps
    /// (on regtest, where every header uses the limit, that walk would dominate).
    pub normal_bits: CompactTarget,
}

impl Entry {
    /// The header's timestamp.
    pub fn time(&self) -> u32 {
        self.header.time
    }

    /// The header's `nBits`.
    pub fn bits(&self) -> CompactTarget {
        self.header.bits
    }
}

/// How many recent headers a [`Window`] keeps: two difficulty periods. Validation needs one
/// (a retarget looks back 2015 headers); the second lets a rejected batch of up to
/// [`MAX_BATCH`] headers be undone with [`Window::pop`] without losing that context.
pub const WINDOW_LEN: usize = 2 * 2016;

/// Most headers a batch may hold so that it can be undone: see [`WINDOW_LEN`].
pub const MAX_BATCH: usize = 2016;

/// The last [`WINDOW_LEN`] headers of a chain, in a fixed ring (allocated once).
#[derive(Clone, Debug)]
pub struct Window {
    ring: Box<[Entry]>,
    /// Entries held (at most `ring.len()`).
    len: usize,
    /// Index of the tip in `ring`.
    tip: usize,
    /// Whether the window starts at genesis (so "fewer than 11 before" is exact).
    from_genesis: bool,
    /// The work of the last target seen: a 256-bit division costs microseconds, and
    /// `nBits` changes only at retargets (or on testnet's minimum-difficulty blocks).
    work_cache: Cell<(CompactTarget, Work)>,
}

impl Window {
    /// A window holding the genesis header alone.
    pub fn from_genesis(params: &Params) -> Window {
        let g = &params.genesis;
        let work = g.bits.to_target().map(|t| t.work()).unwrap_or(Work::ZERO);
        let entry = Entry {
            height: 0,
            hash: g.block_hash(),
            header: *g,
            chainwork: work,
            normal_bits: g.bits,
        };
        Window::starting_at(entry, true)
    }

    /// A window starting from a trusted entry (a checkpoint, or the stored tip's ancestors
    /// pushed in order after it).
    pub fn from_trusted(entry: Entry) -> Window {
        Window::starting_at(entry, entry.height == 0)
    }

    /// A window from consecutive entries (oldest first), as a store reloads them: the
    /// first is trusted, the rest must each link to the one before. `None` if `entries` is
    /// empty or does not link.
    pub fn from_entries(entries: &[Entry]) -> Option<Window> {
        let (first, rest) = entries.split_first()?;
        let mut window = Window::from_trusted(*first);
        for e in rest {
            if e.height != window.tip().height + 1 {
                return None;
            }
            window.push(*e);
        }
        Some(window)
    }

    fn starting_at(entry: Entry, from_genesis: bool) -> Window {
        let mut ring = vec![entry; WINDOW_LEN].into_boxed_slice();
        ring[0] = entry;
        Window {
            ring,
            len: 1,
            tip: 0,
            from_genesis,
            work_cache: Cell::new((CompactTarget(0), Work::ZERO)),
        }
    }

    /// The work of `target` (whose compact form is `bits`), from the cache when it holds it.
    fn work_of(&self, bits: CompactTarget, target: &Target) -> Work {
        let (cached_bits, cached_work) = self.work_cache.get();
        if cached_bits == bits && bits != CompactTarget(0) {
            return cached_work;
        }
        let work = target.work();
        self.work_cache.set((bits, work));
        work
    }

    /// The tip.
    pub fn tip(&self) -> &Entry {
        &self.ring[self.tip]
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never empty: a window always holds at least its starting entry.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The entry at `height`, if the window holds it.
    pub fn get(&self, height: u32) -> Option<&Entry> {
        let tip = self.tip();
        let back = tip.height.checked_sub(height)? as usize;
        if back >= self.len {
            return None;
        }
        let n = self.ring.len();
        Some(&self.ring[(self.tip + n - back) % n])
    }

    /// Append a validated entry as the new tip.
    pub fn push(&mut self, entry: Entry) {
        self.push_evicting(entry);
    }

    /// [`Self::push`], returning the oldest entry when a full window drops it (so that an
    /// undone batch can put it back with [`Self::restore_oldest`]).
    pub fn push_evicting(&mut self, entry: Entry) -> Option<Entry> {
        let n = self.ring.len();
        self.tip = (self.tip + 1) % n;
        let evicted = (self.len == n).then(|| self.ring[self.tip]);
        self.ring[self.tip] = entry;
        self.len = (self.len + 1).min(n);
        evicted
    }

    /// Put back below the oldest entry one that [`Self::push_evicting`] dropped (most recent
    /// first), once the entries pushed since have been popped. False if the window is full.
    pub fn restore_oldest(&mut self, entry: Entry) -> bool {
        let n = self.ring.len();
        if self.len == n {
            return false;
        }
        self.ring[(self.tip + n - self.len) % n] = entry;
        self.len += 1;
        true
    }

    /// Drop the tip (for a reorg), if more than one entry is held.
    pub fn pop(&mut self) -> Option<Entry> {
        if self.len <= 1 {
            return None;
        }
        let e = self.ring[self.tip];
        let n = self.ring.len();
        self.tip = (self.tip + n - 1) % n;
        self.len -= 1;
        Some(e)
    }

    /// Whether a header whose parent is at `height` (held) can be validated exactly on this
    /// window rewound to it: the window reaches back to genesis, or holds the 2016 entries
    /// a retarget looks back over (which include the 11 of the median time). Otherwise a
    /// fork there would be checked by range and without its median time.
    pub fn has_context_at(&self, height: u32) -> bool {
        let bottom = self.tip().height + 1 - self.len as u32;
        (bottom == 0 && self.from_genesis) || height + 1 >= bottom + MAX_BATCH as u32
    }

    /// The height of `hash` if the window holds it (a linear scan: for forks, not the
    /// per-header path).
    pub fn height_of(&self, hash: &BlockHash) -> Option<u32> {
        let tip = self.tip().height;
        (0..self.len as u32)
            .map(|back| tip - back)
            .find(|&h| self.get(h).is_some_and(|e| e.hash == *hash))
    }

    /// Drop entries above `height`; false (and nothing dropped) unless the window holds it.
    pub fn truncate_to(&mut self, height: u32) -> bool {
        if self.get(height).is_none() {
            return false;
        }
        while self.tip().height > height {
            self.pop();
        }
        true
    }

    /// Median of the last (up to) 11 timestamps, or `None` when the window holds fewer than
    /// 11 and does not start at genesis (the true median is then unknown).
    pub fn median_time_past(&self) -> Option<u32> {
        let count = self.len.min(MEDIAN_TIME_SPAN);
        if count < MEDIAN_TIME_SPAN && !self.from_genesis {
            return None;
        }
        let mut times = [0u32; MEDIAN_TIME_SPAN];
        let tip = self.tip().height;
        for (i, t) in times[..count].iter_mut().enumerate() {
            *t = self.get(tip - i as u32).map(|e| e.time()).unwrap_or(0);
        }
        times[..count].sort_unstable();
        Some(times[count / 2])
    }
}

/// How the difficulty of a header was checked.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BitsCheck {
    /// Exactly, as a full node does.
    Exact,
    /// Within the clamp's range only: the period began before the trusted start.
    Bounded,
}

/// A header that passed validation.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Validated {
    /// Its entry (height, hash, chainwork...), ready to push onto the window.
    pub entry: Entry,
    /// How its `nBits` was checked.
    pub bits_check: BitsCheck,
}

/// Validate `header` as the child of the window's tip, with `now` the caller's clock
/// (seconds since the Unix epoch). Does not modify the window.
pub fn validate(
    params: &Params,
    window: &Window,
    header: &Header,
    now: u64,
) -> Result<Validated, ValidationError> {
    validate_hashed(params, window, header, header.block_hash(), now)
}

/// [`validate`] with the header's block hash already computed (by [`crate::hash4`] for a
/// batch). `hash` must be `header`'s: debug builds check it.
pub fn validate_hashed(
    params: &Params,
    window: &Window,
    header: &Header,
    hash: BlockHash,
    now: u64,
) -> Result<Validated, ValidationError> {
    debug_assert_eq!(hash, header.block_hash(), "the hash given is the header's");
    let parent = *window.tip();
    let height = parent.height + 1;
    let fail = |rule| Err(ValidationError { height, rule });

    if header.prev_blockhash != parent.hash {
        return fail(Rule::PrevHashMismatch {
            expected: parent.hash,
            got: header.prev_blockhash,
        });
    }
    // Proof of work against the header's own target (Core: CheckProofOfWork).
    let target = match header.bits.to_target() {
        Ok(t) if t <= params.pow_limit() => t,
        Ok(_) | Err(CompactError::Negative | CompactError::Overflow | CompactError::Zero) => {
            return fail(Rule::InvalidTarget { bits: header.bits });
        }
    };
    if !target.is_met_by(&hash) {
        return fail(Rule::HighHash { hash });
    }
    // The difficulty the rules require (Core: GetNextWorkRequired).
    let bits_check = match next_bits(params, window, header.time) {
        Expected::Exact(expected) if expected != header.bits => {
            return fail(Rule::WrongBits {
                expected,
                got: header.bits,
            });
        }
        Expected::Exact(_) => BitsCheck::Exact,
        Expected::Range { easiest, hardest } => {
            if target > easiest || target < hardest {
                return fail(Rule::RetargetOutOfRange { got: header.bits });
            }
            BitsCheck::Bounded
        }
    };
    // Timestamps.
    if let Some(median) = window.median_time_past()
        && header.time <= median
    {
        return fail(Rule::TimeTooOld {
            time: header.time,
            median,
        });
    }
    let max = now.saturating_add(u64::from(MAX_FUTURE_BLOCK_TIME));
    if u64::from(header.time) > max {
        return fail(Rule::TimeTooNew {
            time: header.time,
            max: u32::try_from(max).unwrap_or(u32::MAX),
        });
    }
    if params.enforce_bip94
        && height % params.retarget_interval == 0
        && header.time < parent.time().saturating_sub(MAX_TIMEWARP)
    {
        return fail(Rule::Timewarp {
            time: header.time,
            prev_time: parent.time(),
        });
    }
    // Versions (Core: ContextualCheckBlockHeader, "bad-version").
    let min = if height >= params.bip65_height {
        4
    } else if height >= params.bip66_height {
        3
    } else if height >= params.bip34_height {
        2
    } else {
        i32::MIN
    };
    if header.version < min {
        return fail(Rule::BadVersion {
            version: header.version,
            min,
        });
    }
    if let Some(expected) = params.checkpoint_at(height)
        && expected != hash
    {
        return fail(Rule::CheckpointMismatch {
            expected,
            got: hash,
        });
    }
    let chainwork = parent.chainwork.add(&window.work_of(header.bits, &target));
    let normal_bits = normal_bits(params, height, header.bits, parent.normal_bits);
    let entry = Entry {
        height,
        hash,
        header: *header,
        chainwork,
        normal_bits,
    };
    Ok(Validated { entry, bits_check })
}

/// `Entry::normal_bits` of a header at `height` with `bits`, given its parent's.
fn normal_bits(
    params: &Params,
    height: u32,
    bits: CompactTarget,
    parent: CompactTarget,
) -> CompactTarget {
    if height % params.retarget_interval == 0 || bits != params.pow_limit_compact() {
        bits
    } else {
        parent
    }
}

/// Rebuild the entries of stored headers, as a store reloads a window: `headers[i]` is at
/// height `start + i`, `start` is 0 or a period's first height (so that every entry's
/// `normal_bits` is exact), and `start_chainwork` is the chainwork at `start`. The headers
/// were validated when stored, so they are not validated again.
pub fn rebuild_entries(
    params: &Params,
    start: u32,
    headers: &[Header],
    start_chainwork: Work,
) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::with_capacity(headers.len());
    let mut work_cache: Option<(CompactTarget, Work)> = None;
    for (i, header) in headers.iter().enumerate() {
        let height = start + i as u32;
        let (chainwork, normal) = match out.last() {
            None => (start_chainwork, header.bits),
            Some(parent) => {
                let work = match work_cache {
                    Some((bits, work)) if bits == header.bits => work,
                    _ => {
                        let work = header
                            .bits
                            .to_target()
                            .map(|t| t.work())
                            .unwrap_or_default();
                        work_cache = Some((header.bits, work));
                        work
                    }
                };
                (
                    parent.chainwork.add(&work),
                    normal_bits(params, height, header.bits, parent.normal_bits),
                )
            }
        };
        out.push(Entry {
            height,
            hash: header.block_hash(),
            header: *header,
            chainwork,
            normal_bits: normal,
        });
    }
    out
}

/// What the difficulty rules require of the next header.
enum Expected {
    Exact(CompactTarget),
    /// At a retarget whose period's first header is not in the window: the clamp's range.
    Range {
        easiest: Target,
        hardest: Target,
    },
}

/// Core's `GetNextWorkRequired` for the child of the window's tip, with the child's time.
fn next_bits(params: &Params, window: &Window, time: u32) -> Expected {
    let last = *window.tip();
    let height = last.height + 1;
    let limit = params.pow_limit_compact();
    if height % params.retarget_interval != 0 {
        if params.allow_min_difficulty_blocks {
            // A block more than twice the spacing after its parent may use the limit.
            if u64::from(time) > u64::from(last.time()) + 2 * u64::from(params.target_spacing) {
                return Expected::Exact(limit);
            }
            // Otherwise the last block that did not use the special rule sets the target.
            return Expected::Exact(last.normal_bits);
        }
        return Expected::Exact(last.bits());
    }
    if params.no_retargeting {
        return Expected::Exact(last.bits());
    }
    let first_height = last.height + 1 - params.retarget_interval;
    let Some(first) = window.get(first_height) else {
        // The period began before what we hold: check the clamp's range only (Core's
        // `PermittedDifficultyTransition`). Both bounds go through the compact encoding, as
        // a retarget's result does: its rounding only lowers a target, so an unrounded
        // bound of a quarter would refuse a legitimate retarget just below it. BIP94
        // retargets from the period's own target, which `normal_bits` holds even when the
        // last header used the minimum-difficulty exception.
        let old = if params.enforce_bip94 {
            last.normal_bits
        } else {
            last.bits()
        };
        let old = old.to_target().map(|t| t.0).unwrap_or_default();
        let rounded = |t| Target(t).to_compact().to_target().unwrap_or(Target(t));
        let limit = params.pow_limit().0;
        let easiest = match limit.checked_div_u64(4) {
            Some(quarter) if old <= quarter => old.wrapping_mul_u64(4),
            _ => limit,
        };
        return Expected::Range {
            easiest: rounded(easiest),
            hardest: rounded(old.checked_div_u64(4).unwrap_or_default()),
        };
    };
    Expected::Exact(retarget(
        params,
        first.time(),
        if params.enforce_bip94 {
            first.bits()
        } else {
            last.bits()
        },
        last.time(),
    ))
}

/// Core's `CalculateNextWorkRequired`: scale the target by the period's actual duration,
/// clamped to a factor of 4, capped at the limit, rounded through the compact encoding.
pub fn retarget(
    params: &Params,
    first_time: u32,
    bits: CompactTarget,
    last_time: u32,
) -> CompactTarget {
    let timespan = params.target_timespan;
    let actual = (i64::from(last_time) - i64::from(first_time))
        .clamp(i64::from(timespan / 4), i64::from(timespan) * 4) as u64;
    let old = bits.to_target().map(|t| t.0).unwrap_or_default();
    let new = old
        .wrapping_mul_u64(actual)
        .checked_div_u64(u64::from(timespan))
        .unwrap_or_default();
    Target(new.min(params.pow_limit().0)).to_compact()
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::generate::{GENERATED_SPACING, mine, next_header};
    use crate::params::REGTEST;

    const NOW: u64 = 2_000_000_000;

    /// A mined chain of `count` headers after genesis under `params`, and its window.
    fn mined(params: &Params, count: u32) -> (Window, Header) {
        let mut window = Window::from_genesis(params);
        let mut prev = params.genesis;
        for height in 1..=count {
            let mut h = next_header(params, &prev, window.tip().hash, height, 0);
            let expected = match next_bits(params, &window, h.time) {
                Expected::Exact(bits) => bits,
                Expected::Range { .. } => unreachable!("window from genesis"),
            };
            if h.bits != expected {
                h.bits = expected;
                assert!(mine(&mut h, &expected.to_target().unwrap()));
            }
            window.push(
                validate(params, &window, &h, NOW)
                    .expect("mined header valid")
                    .entry,
            );
            prev = h;
        }
        (window, prev)
    }

    /// The next header after `prev`, changed by `edit`, then mined again.
    fn child(
        params: &Params,
        window: &Window,
        prev: &Header,
        edit: impl FnOnce(&mut Header),
    ) -> Header {
        let mut h = next_header(params, prev, window.tip().hash, window.tip().height + 1, 0);
        edit(&mut h);
        let target = h.bits.to_target().unwrap();
        assert!(mine(&mut h, &target));
        h
    }

    fn rule_of(params: &Params, window: &Window, h: &Header, now: u64) -> Rule {
        validate(params, window, h, now).expect_err("rejected").rule
    }

    #[test]
    fn time_rules() {
        let (window, prev) = mined(&REGTEST, 30);
        let median = window.median_time_past().unwrap();
        assert_eq!(median, prev.time - 5 * GENERATED_SPACING);
        let h = child(&REGTEST, &window, &prev, |h| h.time = median);
        assert_eq!(
            rule_of(&REGTEST, &window, &h, NOW),
            Rule::TimeTooOld {
                time: median,
                median
            }
        );
        let h = child(&REGTEST, &window, &prev, |h| h.time = median + 1);
        assert!(
            validate(&REGTEST, &window, &h, NOW).is_ok(),
            "one second above the median is fine"
        );
        let now = u64::from(prev.time);
        let h = child(&REGTEST, &window, &prev, |h| {
            h.time = prev.time + MAX_FUTURE_BLOCK_TIME + 1
        });
        assert_eq!(
            rule_of(&REGTEST, &window, &h, now),
            Rule::TimeTooNew {
                time: prev.time + 7201,
                max: prev.time + 7200
            }
        );
        let h = child(&REGTEST, &window, &prev, |h| {
            h.time = prev.time + MAX_FUTURE_BLOCK_TIME
        });
        assert!(
            validate(&REGTEST, &window, &h, now).is_ok(),
            "exactly two hours ahead is fine"
        );
    }

    /// A retarget checked by range only (the period began
    /// below the window) is refused or allowed exactly as Core's
    /// `PermittedDifficultyTransition` does, with both bounds rounded through `nBits`.
    /// (Checked on the rule's bounds: mining a mainnet-sized target is out of reach.)
    #[test]
    fn a_retarget_checked_by_range_rounds_its_bounds_as_core_does() {
        let params = &crate::params::MAINNET;
        // A full 23-bit mantissa: a quarter of it needs a fourth byte `nBits` lacks.
        let old = CompactTarget(0x1c7f_ffff);
        let quarter = retarget(params, 0, old, params.target_timespan / 4);
        assert_eq!(
            quarter,
            CompactTarget(0x1c1f_ffff),
            "Core's hardest retarget"
        );
        let fourfold = retarget(params, 0, old, params.target_timespan * 4);
        let mut parent = params.genesis;
        parent.bits = old;
        let window = Window::from_trusted(Entry {
            height: 2015,
            hash: parent.block_hash(),
            header: parent,
            chainwork: Work::ZERO,
            normal_bits: old,
        });
        let Expected::Range { easiest, hardest } = next_bits(params, &window, parent.time + 1)
        else {
            panic!("the period's first header is not in the window: a range");
        };
        let allowed = |bits: u32| {
            let t = CompactTarget(bits).to_target().unwrap();
            hardest <= t && t <= easiest
        };
        assert!(allowed(quarter.0), "Core's own result is allowed");
        assert!(allowed(fourfold.0) && allowed(old.0));
        assert!(!allowed(0x1c1f_fffe), "harder than any retarget");
        assert!(!allowed(fourfold.0 + 1), "easier than any retarget");
    }

    #[test]
    fn version_rule() {
        let params = Params {
            bip34_height: 5,
            bip66_height: 10,
            bip65_height: 20,
            ..REGTEST.clone()
        };
        let (window, prev) = mined(&params, 9);
        let h = child(&params, &window, &prev, |h| h.version = 2);
        assert_eq!(
            rule_of(&params, &window, &h, NOW),
            Rule::BadVersion { version: 2, min: 3 }
        );
        let h = child(&params, &window, &prev, |h| h.version = 3);
        assert!(validate(&params, &window, &h, NOW).is_ok());
    }

    #[test]
    fn checkpoint_rule() {
        let (_, real) = mined(&REGTEST, 7);
        let hash: &'static str = Box::leak(real.block_hash().to_string().into_boxed_str());
        let checkpoints: &'static [(u32, &'static str)] =
            Box::leak(vec![(7, hash)].into_boxed_slice());
        let params = Params {
            checkpoints,
            ..REGTEST.clone()
        };
        let (window, prev) = mined(&params, 6);
        assert!(
            validate(&params, &window, &real, NOW).is_ok(),
            "the checkpointed header itself"
        );
        let other = child(&params, &window, &prev, |h| h.merkle_root[0] ^= 1);
        assert_eq!(
            rule_of(&params, &window, &other, NOW),
            Rule::CheckpointMismatch {
                expected: real.block_hash(),
                got: other.block_hash()
            }
        );
    }

    /// Mainnet's difficulty rules on an easy, fast chain: 16-block periods of 9,600 s, and a
    /// limit of 2^243 - 1. (Regtest's limit, 2^255, overflows Core's `target * timespan`
    /// multiplication, which is why Core never retargets regtest.)
    fn retargeting() -> Params {
        let mut pow_limit = [0xff; 32];
        pow_limit[0] = 0;
        pow_limit[1] = 0x07;
        let limit_bits = Target(crate::uint::U256::from_be_bytes(&pow_limit)).to_compact();
        Params {
            no_retargeting: false,
            allow_min_difficulty_blocks: false,
            retarget_interval: 16,
            target_timespan: 16 * 600,
            pow_limit,
            genesis: Header {
                bits: limit_bits,
                ..REGTEST.genesis
            },
            ..REGTEST.clone()
        }
    }

    /// The retarget after the first period of [`retargeting`], computed independently
    /// (Python, from Core's SetCompact/GetCompact): 0x07ffff << 224 * 4500 / 9600.
    const FIRST_RETARGET: CompactTarget = CompactTarget(0x1f03bfff);

    #[test]
    fn wrong_bits_at_a_retarget() {
        let params = retargeting();
        assert_eq!(params.pow_limit_compact(), CompactTarget(0x1f07ffff));
        let (window, prev) = mined(&params, 15);
        // 15 intervals of 300 s against 9,600 s intended: the target shrinks to 4500/9600.
        let first = window.get(0).unwrap();
        assert_eq!(
            retarget(&params, first.time(), prev.bits, prev.time),
            FIRST_RETARGET
        );
        let kept = child(&params, &window, &prev, |_| {});
        assert_eq!(kept.bits, params.pow_limit_compact());
        assert_eq!(
            rule_of(&params, &window, &kept, NOW),
            Rule::WrongBits {
                expected: FIRST_RETARGET,
                got: kept.bits
            }
        );
        let right = child(&params, &window, &prev, |h| h.bits = FIRST_RETARGET);
        assert!(validate(&params, &window, &right, NOW).is_ok());
        // Inside a period the parent's nBits must be kept.
        let (window, prev) = mined(&params, 20);
        assert_eq!(window.tip().bits(), FIRST_RETARGET);
        let h = child(&params, &window, &prev, |h| {
            h.bits = params.pow_limit_compact()
        });
        assert_eq!(
            rule_of(&params, &window, &h, NOW),
            Rule::WrongBits {
                expected: FIRST_RETARGET,
                got: params.pow_limit_compact()
            }
        );
    }

    #[test]
    fn testnet_minimum_difficulty_rule() {
        let params = Params {
            allow_min_difficulty_blocks: true,
            ..retargeting()
        };
        let (mut window, mut prev) = mined(&params, 17);
        assert_eq!(
            window.tip().bits(),
            FIRST_RETARGET,
            "the period after the first retarget is harder"
        );
        // More than 20 minutes after its parent: the limit is allowed.
        let easy = child(&params, &window, &prev, |h| {
            h.time = prev.time + 1201;
            h.bits = params.pow_limit_compact();
        });
        window.push(
            validate(&params, &window, &easy, NOW)
                .expect("min-difficulty block")
                .entry,
        );
        prev = easy;
        // The next one, on time, must return to the last real target, not keep the limit.
        let limit = child(&params, &window, &prev, |h| {
            h.bits = params.pow_limit_compact()
        });
        assert_eq!(
            rule_of(&params, &window, &limit, NOW),
            Rule::WrongBits {
                expected: FIRST_RETARGET,
                got: limit.bits
            }
        );
        let back = child(&params, &window, &prev, |h| h.bits = FIRST_RETARGET);
        assert!(validate(&params, &window, &back, NOW).is_ok());
    }

    #[test]
    fn bip94_timewarp_rule() {
        let params = Params {
            enforce_bip94: true,
            ..retargeting()
        };
        let (window, prev) = mined(&params, 15);
        let first = window.get(0).unwrap();
        let bits = retarget(&params, first.time(), first.bits(), prev.time);
        let early = child(&params, &window, &prev, |h| {
            h.bits = bits;
            h.time = prev.time - MAX_TIMEWARP - 1;
        });
        assert_eq!(
            rule_of(&params, &window, &early, NOW),
            Rule::Timewarp {
                time: early.time,
                prev_time: prev.time
            }
        );
        let ok = child(&params, &window, &prev, |h| {
            h.bits = bits;
            h.time = prev.time - MAX_TIMEWARP;
        });
        assert!(validate(&params, &window, &ok, NOW).is_ok());
    }

    #[test]
    fn rebuilt_entries_equal_validated_ones() {
        let params = Params {
            allow_min_difficulty_blocks: true,
            ..retargeting()
        };
        let (mut window, mut prev) = mined(&params, 40);
        // A min-difficulty header at 41, so normal_bits differs from bits.
        let easy = child(&params, &window, &prev, |h| {
            h.time = prev.time + 1201;
            h.bits = params.pow_limit_compact();
        });
        window.push(validate(&params, &window, &easy, NOW).unwrap().entry);
        prev = easy;
        let next = child(&params, &window, &prev, |h| {
            h.bits = window.tip().normal_bits
        });
        window.push(validate(&params, &window, &next, NOW).unwrap().entry);
        // Rebuild from the period starting at 32.
        let held: Vec<Entry> = (32..=42).map(|h| *window.get(h).unwrap()).collect();
        let headers: Vec<Header> = held.iter().map(|e| e.header).collect();
        assert_eq!(
            rebuild_entries(&params, 32, &headers, held[0].chainwork),
            held
        );
    }

    #[test]
    fn window_keeps_two_periods() {
        let (mut window, _) = mined(&REGTEST, 4100);
        assert_eq!(window.len(), WINDOW_LEN);
        assert!(window.get(4100 - 4031).is_some() && window.get(4100 - 4032).is_none());
        let tip = *window.tip();
        assert_eq!(window.pop(), Some(tip));
        assert_eq!(window.tip().height, 4099);
        let at_4000 = *window.get(4000).unwrap();
        assert_eq!(window.height_of(&at_4000.hash), Some(4000));
        assert!(window.truncate_to(4000));
        assert_eq!(*window.tip(), at_4000);
        assert!(!window.truncate_to(10), "not held: nothing dropped");
        assert_eq!(window.tip().height, 4000);
    }

    /// `retarget` against Core's `CalculateNextWorkRequired` computed with crypto-bigint
    /// (`SetCompact` and `GetCompact` from `crate::reference`): the old target times the
    /// clamped timespan (wrapping at 2^256, as `arith_uint256` does), divided by the target
    /// timespan, capped at the limit.
    #[test]
    fn retarget_against_crypto_bigint() {
        use crate::reference::{Rng, cb, get_compact, set_compact};
        use crypto_bigint::{NonZero, U256 as Cb};

        let mut rng = Rng::new(0x7265_7461_7207);
        for _ in 0..5000 {
            let params = crate::Network::ALL[rng.below(5) as usize].params();
            let limit = cb(&params.pow_limit);
            // Mostly real-looking targets at or below the limit, sometimes any nBits.
            let bits = if rng.below(4) == 0 {
                rng.next_u64() as u32
            } else {
                let value = cb(&rng.value());
                get_compact(&value.min(limit))
            };
            let first_time = rng.next_u64() as u32;
            let span = i64::from(params.target_timespan);
            let last_time = match rng.below(3) {
                0 => rng.next_u64() as u32,
                _ => (i64::from(first_time) + rng.below(6 * span as u64) as i64 - span) as u32,
            };

            let actual = (i64::from(last_time) - i64::from(first_time)).clamp(span / 4, span * 4);
            let old = set_compact(bits).unwrap_or(Cb::ZERO);
            let scaled = old.wrapping_mul(&Cb::from_u64(actual as u64));
            let timespan = NonZero::new(Cb::from_u32(params.target_timespan)).unwrap();
            let new = scaled.div_rem_vartime(&timespan).0.min(limit);
            assert_eq!(
                retarget(params, first_time, CompactTarget(bits), last_time),
                CompactTarget(get_compact(&new)),
                "{} {first_time} {bits:#010x} {last_time}",
                params.network
            );
        }
    }
}
