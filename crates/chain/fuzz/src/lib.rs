//! Shared pieces of the lightwire-chain fuzz target: the cursor that reads structure out
//! of fuzz input (re-exported from lightwire-fuzz-support), the regtest main chain and its
//! validation entries (made once per process), snapshots of a chain's window to compare,
//! and mining that gives up.
#![forbid(unsafe_code)]

use std::sync::OnceLock;

use lightwire_chain::generate::headers_after;
use lightwire_chain::{BlockHash, Chain, Entry, Header, Outcome, REGTEST, Window};

/// The input reader shared by every fuzz project (`crates/fuzz-support`), re-exported so
/// that the targets take everything from this crate.
pub use lightwire_fuzz_support::Cursor;

/// Height of the last header of the generated main chain.
pub const MAIN_LEN: u32 = 4800;

/// The regtest main chain, genesis first (index = height), and the validation entry of
/// every header, made once per process: mining 4,800 headers and validating them takes
/// milliseconds, too long per input.
pub struct Main {
    /// Headers 0..=MAIN_LEN.
    pub headers: Vec<Header>,
    /// Entries 0..=MAIN_LEN.
    pub entries: Vec<Entry>,
}

/// See [`Main`].
pub fn main_chain() -> &'static Main {
    static MAIN: OnceLock<Main> = OnceLock::new();
    MAIN.get_or_init(|| {
        let mut headers = vec![REGTEST.genesis];
        headers.extend(headers_after(&REGTEST, &REGTEST.genesis, 0, MAIN_LEN, 0));
        let mut chain = Chain::new(&REGTEST);
        let mut entries = vec![*Window::from_genesis(&REGTEST).tip()];
        for batch in headers[1..].chunks(2000) {
            let outcome = chain
                .connect(batch, NOW)
                .expect("the generated chain is valid");
            assert!(matches!(outcome, Outcome::Extended { .. }), "{outcome:?}");
            entries.extend_from_slice(chain.staged());
        }
        Main { headers, entries }
    })
}

/// The default clock: 2033, after every generated header (they end in 2011).
pub const NOW: u64 = 2_000_000_000;

/// What the target compares of a window before and after a call: its length, its tip,
/// and the hash (first 8 bytes) of the entries at sampled heights: the 512 below the tip
/// (where batches and forks land), the 8 at the bottom, and every 8th between.
/// The window is a ring changed only at its tip, so a change elsewhere would show in the
/// samples or the length; reading all 4,032 entries twice per call was a fifth of the run
/// time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Entries held.
    pub len: usize,
    /// The tip.
    pub tip: Entry,
    /// (height, first 8 bytes of the hash), from the tip down.
    pub samples: Vec<(u32, u64)>,
}

/// See [`Snapshot`].
pub fn snapshot(w: &Window) -> Snapshot {
    let tip = *w.tip();
    let bottom = tip.height + 1 - w.len() as u32;
    // Generated rather than filtered: the filter's comparisons over all 4,032 heights
    // cost more than the reads.
    let top = (bottom..=tip.height).rev().take(512);
    let low = tip.height.saturating_sub(512).max(bottom);
    let middle = (bottom + 8..low).rev().step_by(8);
    let base = (bottom..(bottom + 8).min(low)).rev();
    let samples = top
        .chain(middle)
        .chain(base)
        .map(|h| {
            let e = w
                .get(h)
                .expect("a window holds its heights from bottom to tip");
            assert_eq!(e.height, h, "entry height");
            (
                h,
                u64::from_le_bytes(e.hash.0[..8].try_into().expect("8 bytes")),
            )
        })
        .collect();
    Snapshot {
        len: w.len(),
        tip,
        samples,
    }
}

/// Whether `after` is `before` with, at most, entries lost at the bottom: the same tip,
/// no more entries, and every sampled entry it still holds as it was.
pub fn kept(before: &Snapshot, after: &Window) -> bool {
    let bottom = after.tip().height + 1 - after.len() as u32;
    *after.tip() == before.tip
        && after.len() <= before.len
        && before
            .samples
            .iter()
            .filter(|(h, _)| *h >= bottom)
            .all(|&(h, word)| {
                after.get(h).is_some_and(|e| {
                    u64::from_le_bytes(e.hash.0[..8].try_into().expect("8 bytes")) == word
                })
            })
}

/// Whether the run tolerates the known finding that a refused batch can shrink a full
/// window (README, "Finding"): set `LIGHTWIRE_FUZZ_ALLOW_WINDOW_SHRINK=1` to check the
/// rest while it stands. Without it, the target holds `connect` to its documentation.
pub fn allow_window_shrink() -> bool {
    static ALLOW: OnceLock<bool> = OnceLock::new();
    *ALLOW.get_or_init(|| {
        std::env::var_os("LIGHTWIRE_FUZZ_ALLOW_WINDOW_SHRINK").is_some_and(|v| v == "1")
    })
}

/// Set `header.nonce` so that its hash meets its own target, trying at most 16 nonces
/// (an input-chosen target may be out of reach; regtest's is met by half of all hashes,
/// so 16 fail once in 65,536).
/// Whether it was met.
pub fn mine_briefly(header: &mut Header) -> bool {
    let Ok(target) = header.bits.to_target() else {
        return false;
    };
    for nonce in 0..16 {
        header.nonce = nonce;
        if target.is_met_by(&header.block_hash()) {
            return true;
        }
    }
    false
}

/// The hash of the header at `height` of the main chain.
pub fn main_hash(height: u32) -> BlockHash {
    main_chain().entries[height as usize].hash
}
