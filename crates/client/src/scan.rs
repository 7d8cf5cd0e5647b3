//! A rescan, sans-IO: the filters of a range of blocks fetched from a gateway, each checked
//! against the stored filter-header chain before it is used, and matched against the
//! watched scripts (BIP157/158).
//!
//! For each window of up to 10,000 blocks the shell reads from the store the block hashes
//! (a filter is keyed by its block's hash) and the filter headers from the one before the
//! window on; then `get_filters` of 1,000 blocks go out, two in flight, so that one's
//! filters follow the other's without a round trip between them. Pieces are put together in one buffer, grown to the largest
//! filter seen (at most 1 MiB); a filter is hashed, chained on the stored filter header
//! before it and compared with the stored one, then matched: no allocation per filter once
//! warm. A filter that does not match its stored header is the gateway's lie (or, until
//! filter headers are cross-checked across gateways, the lie of the gateway the headers
//! came from: see docs/PROTOCOL.md). Filters are not kept.
//!
//! A mirror's filters file holding the next block is read instead of requests, whole
//! (see [`Scan::mirror_request`]): its filters are checked against the stored filter
//! headers exactly as a gateway's, those below where the scan stands skipped. A window
//! holds one more block than [`SCAN_WINDOW`] so that a file of 10,001 (the first, from
//! genesis) fits in one.

use crate::filters::Lacking;
use crate::ids::{GatewayId, GivenUp, Ids, TaskId};
use lightwire_primitives::FilterHeader;
use std::collections::VecDeque;

use lightwire_chain::BlockHash;
use lightwire_filter::{FilterError, Matcher, filter_hash, filter_header};
use lightwire_wire::filters::MAX_FILTER_LEN;
use lightwire_wire::{FilterPiece, Filters};

/// Blocks per request (one `get_filters`; BIP157's limit).
pub const SCAN_REQUEST: u32 = 1000;
/// Blocks whose hashes and filter headers are read from the store at once (with one more:
/// see the module's documentation).
pub const SCAN_WINDOW: u32 = 10_000;
/// The most blocks a mirror's filters file read by a scan may hold: a window's.
pub const MOST_PER_MIRROR_FILE: u32 = SCAN_WINDOW + 1;
/// Requests in flight at once: the next one's filters follow the first's with no round trip
/// between them.
pub const SCAN_IN_FLIGHT: usize = 2;

/// A `filters` answer that breaks a rule.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum ScanError {
    /// A piece that is not the next one: another block, another offset, or another length
    /// than the filter's first piece said; or an answer to a later request before the
    /// earlier one ended.
    #[error("a filter piece for height {height} out of order")]
    OutOfOrder {
        /// The piece's height.
        height: u32,
    },
    /// A filter whose hash does not chain to the stored filter header.
    #[error("the filter of height {height} does not match its filter header")]
    Mismatch {
        /// The block's height.
        height: u32,
    },
    /// A filter that matches its header but does not decode (bad Golomb coding, a count
    /// too large for its bytes): the filter-header chain itself commits to a broken
    /// filter.
    #[error("the filter of height {height} does not decode: {error}")]
    Undecodable {
        /// The block's height.
        height: u32,
        /// Why.
        #[source]
        error: FilterError,
    },
    /// The answer ended with its request unfinished.
    #[error("the filters answer ended at height {height}, short of the request")]
    Short {
        /// The next height that was due.
        height: u32,
    },
}

/// Whose scripts a scan holds, a bit each (the engine's wallets: see
/// `crate::wallet::blocks::WalletSet`); the owner of a scan of one party's scripts is bit 0.
pub type Owners = u64;

/// The owner of the scripts of [`Scan::new`] (and of a scan saved before owners).
pub const FIRST_OWNER: Owners = 1;

/// Where one owner's matches begin: its `start`, and `resume`, at or above it, the height
/// it is matched from again after the scan went back for another owner. Below `resume`
/// its matches are known already (kept in the scan's matches): the pass going back for
/// the other does not report them twice, nor lose them (an owner that goes back itself,
/// as a wallet does when the gap limit makes a script its own, finds them there).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Span {
    /// The owner (one bit).
    owner: Owners,
    start: u32,
    resume: u32,
}

/// What changed in the scan's results.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ScanChange {
    /// A block's filter matches a watched script.
    Matched {
        /// Its height.
        height: u32,
        /// Its hash.
        hash: BlockHash,
        /// Whose scripts it matches: those whose own scripts the filter matches, or every
        /// owner for a block matched whatever our filter says (a contested one).
        owners: Owners,
    },
    /// A matched block was disconnected by a reorganisation.
    Withdrawn {
        /// Its height.
        height: u32,
        /// Its hash.
        hash: BlockHash,
        /// Whose match it was.
        owners: Owners,
    },
}

/// A request in flight: its id, gateway and last height.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Request {
    id: u32,
    gateway: GatewayId,
    end: u32,
}

/// The last few filters a scan took that match our filter headers, kept for another
/// reader of the same blocks (the silent-payment scan following the tip fetches each
/// new block's filter once, with the wallet's): a ring of [`RecentFilters::KEPT`], its
/// buffers reused.
#[derive(Debug, Default)]
pub struct RecentFilters {
    items: Vec<(u32, BlockHash, Vec<u8>)>,
    next: usize,
}

impl RecentFilters {
    /// Filters kept: more than the blocks a tip brings at once, each about 20 KB on
    /// mainnet today.
    pub const KEPT: usize = 16;

    /// Keep the filter of block `hash` at `height` (checked against our filter header).
    pub fn put(&mut self, height: u32, hash: BlockHash, filter: &[u8]) {
        if self.items.len() < Self::KEPT {
            self.items.push((height, hash, filter.to_vec()));
            return;
        }
        let slot = &mut self.items[self.next];
        slot.0 = height;
        slot.1 = hash;
        slot.2.clear();
        slot.2.extend_from_slice(filter);
        self.next = (self.next + 1) % Self::KEPT;
    }

    /// The filter of block `hash` at `height`, if kept.
    pub fn get(&self, height: u32, hash: &BlockHash) -> Option<&[u8]> {
        self.items
            .iter()
            .find(|(h, b, _)| *h == height && b == hash)
            .map(|(_, _, f)| f.as_slice())
    }
}

/// One rescan: its scripts, where it stands, what matched.
#[derive(Debug)]
pub struct Scan {
    scripts: Vec<Vec<u8>>,
    /// Whose each script is (as `scripts`), and all of them together.
    owners: Vec<Owners>,
    all_owners: Owners,
    matcher: Matcher,
    from: u32,
    /// The next height to match.
    next: u32,
    matches: Vec<(u32, BlockHash)>,
    /// Whose scripts each match matched (as `matches`). A match at or above `next` is
    /// one of owners matched past it already ([`Span`]).
    match_owners: Vec<Owners>,
    /// Where each owner's matches begin, one for each owner.
    spans: Vec<Span>,
    /// Blocks not reached yet that a contested filter matched (see [`Self::contest`]),
    /// ascending: matched when the scan gets there, whatever our filter says. Saved with
    /// the scan, so that a session that ends first does not forget them.
    forced: Vec<(u32, BlockHash)>,
    /// Heights the shell is reading from the store.
    reading: Option<(u32, u32)>,
    /// The window read: its first height, block hashes and filter headers (from the one
    /// before its first block); empty when none is.
    start: u32,
    hashes: Vec<BlockHash>,
    headers: Vec<FilterHeader>,
    /// Requests in flight, oldest first, all to one gateway (answers come in order).
    requests: VecDeque<Request>,
    /// A mirror's filters file being read instead (never beside requests): its mirror
    /// and its last height.
    mirror: Option<(crate::engine::MirrorId, u32)>,
    /// The first height not yet requested.
    next_request: u32,
    /// The filter being put together: its bytes so far and its whole length.
    buf: Vec<u8>,
    filter_len: Option<u32>,
    ids: Ids,
    /// Filters matched so far.
    pub filters: u64,
    /// Filter bytes taken.
    pub bytes: u64,
    /// Whether the scan has reached the stored filter tip since it last moved.
    reported_tip: bool,
    /// Where the scan stood, how many matches and blocks matched ahead it had when last
    /// saved.
    saved: Option<(u32, usize, usize)>,
    /// The gateways that said the stop block is not on their chain: not asked until a tip
    /// comes (asking again at once would bring the same); another is asked meanwhile.
    refused: Lacking,
    /// The filters it took, kept for another reader once the engine asks (see
    /// [`RecentFilters`]).
    pub kept: Option<RecentFilters>,
}

impl Scan {
    /// A scan of `scripts` (output scripts) from block `from` on, all of one owner
    /// ([`FIRST_OWNER`]).
    pub fn new(scripts: Vec<Vec<u8>>, from: u32) -> Scan {
        let owners = vec![FIRST_OWNER; scripts.len()];
        Scan::owned(scripts, owners, from)
    }

    /// A scan of `scripts`, each of `owners` (as many), from block `from` on: a block's
    /// filter is read once for all of them, and each match says whose scripts it matches.
    /// A script two owners watch may come twice, once for each (matched as one).
    pub fn owned(scripts: Vec<Vec<u8>>, owners: Vec<Owners>, from: u32) -> Scan {
        let mut scan = Scan::empty(scripts.len(), from);
        // Taken as given, not joined: joining thousands of scripts needs a sort, and a
        // sort of these costs the module about 7 KB; a repeat costs the matcher nothing.
        scan.all_owners = owners.iter().fold(0, |a, o| a | o);
        scan.spans = bits(scan.all_owners)
            .map(|owner| Span {
                owner,
                start: from,
                resume: from,
            })
            .collect();
        scan.scripts = scripts;
        scan.owners = owners;
        scan
    }

    /// Owner `owner` (one bit) is scanned again from `from`, with `scripts` (its own,
    /// replacing those it had): its matches are withdrawn and found again as the scan
    /// passes them. The other owners keep theirs: where the scan goes back below what it
    /// matched for them, they are matched again only from there on ([`Span`]), so one
    /// pass over each filter serves the one going back and the others going on. Returns
    /// the requests given up when the scan moves (their answers may still come).
    pub fn rewind(&mut self, owner: Owners, scripts: Vec<Vec<u8>>, from: u32) -> Vec<GivenUp> {
        self.hold_others();
        self.forget(owner);
        self.spans.push(Span {
            owner,
            start: from,
            resume: from,
        });
        // Taken as given, as in `owned`: a script another owner watches may come twice.
        self.owners
            .extend(core::iter::repeat_n(owner, scripts.len()));
        self.scripts.extend(scripts);
        self.all_owners |= owner;
        self.from = self.first_start().unwrap_or(from);
        self.saved = None;
        self.seek_first_due()
    }

    /// Owner `owner` is matched again from `height` (scripts of its that the scan passed
    /// without, new to it): its matches from there are withdrawn and found again, the
    /// other owners keep theirs (as in [`Self::rewind`]). Returns the requests given up.
    pub fn back_to(&mut self, owner: Owners, height: u32) -> Vec<GivenUp> {
        self.hold_others();
        self.unmark(owner, height);
        for s in self.spans.iter_mut().filter(|s| s.owner == owner) {
            s.resume = height.max(s.start);
        }
        self.saved = None;
        self.seek_first_due()
    }

    /// Every owner is marked matched to where the scan stands (before it goes back for
    /// one of them).
    fn hold_others(&mut self) {
        let next = self.next;
        for s in self.spans.iter_mut() {
            s.resume = s.resume.max(next);
        }
    }

    /// The scan goes to the first height an owner is due at, if it stands elsewhere.
    fn seek_first_due(&mut self) -> Vec<GivenUp> {
        match self.spans.iter().map(|s| s.resume).min() {
            Some(first) if first != self.next => self.seek(first),
            _ => Vec::new(),
        }
    }

    /// Whether owner `owner` has everything stored (up to `stored`) matched: the scan
    /// has, or the owner was matched past it before the scan went back for another.
    pub fn at_tip_for(&self, owner: Owners, stored: Option<u32>) -> bool {
        let past = self
            .spans
            .iter()
            .any(|s| s.owner == owner && stored.is_some_and(|t| s.resume > t));
        past || self.at_tip(stored)
    }

    /// Owner `owner` leaves the scan: its scripts, and its marks on the matches, go (a
    /// match of no one else's with them).
    pub fn remove_owner(&mut self, owner: Owners) {
        self.forget(owner);
        self.from = self.first_start().unwrap_or(self.from);
        self.saved = None;
    }

    /// The lowest start of an owner's.
    fn first_start(&self) -> Option<u32> {
        self.spans.iter().map(|s| s.start).min()
    }

    /// Everything of `owner`'s goes: its scripts, its marks on the matches, its span.
    fn forget(&mut self, owner: Owners) {
        for o in self.owners.iter_mut() {
            *o &= !owner;
        }
        let mut keep = self.owners.iter().map(|&o| o != 0);
        self.scripts.retain(|_| keep.next().unwrap_or(true));
        self.owners.retain(|&o| o != 0);
        self.unmark(owner, 0);
        self.spans.retain(|s| s.owner != owner);
        self.all_owners &= !owner;
    }

    /// `owner`'s marks on the matches from `height` on go (a match left with none goes).
    fn unmark(&mut self, owner: Owners, height: u32) {
        for (o, m) in self.match_owners.iter_mut().zip(&self.matches) {
            if m.0 >= height {
                *o &= !owner;
            }
        }
        let mut keep = self.match_owners.iter().map(|&o| o != 0);
        self.matches.retain(|_| keep.next().unwrap_or(true));
        self.match_owners.retain(|&o| o != 0);
    }

    /// The scan stands at `height` from now on, with nothing read or asked: the requests
    /// in flight are given up (returned), the window and a mirror's file dropped.
    fn seek(&mut self, height: u32) -> Vec<GivenUp> {
        self.next = height;
        self.hashes.clear();
        self.headers.clear();
        self.start = height;
        self.reading = None;
        self.reported_tip = false;
        self.mirror_gone();
        self.abandon().collect()
    }

    /// The owners whose matches at `height` are due: those started at or below it and
    /// not matched past it already.
    fn due_at(&self, height: u32) -> Owners {
        self.spans
            .iter()
            .filter(|s| height >= s.resume)
            .fold(0, |a, s| a | s.owner)
    }

    /// The owners started at or below `height`.
    fn started_at(&self, height: u32) -> Owners {
        self.spans
            .iter()
            .filter(|s| height >= s.start)
            .fold(0, |a, s| a | s.owner)
    }

    /// Block `hash` at `height` matched for `owners`: kept in height order, the marks of
    /// a block matched already joined. The change to tell, for the owners new to it.
    // Called from the filter paths of gateways and mirrors and from disputes: one copy.
    #[inline(never)]
    fn add_match(&mut self, height: u32, hash: BlockHash, owners: Owners) -> Option<ScanChange> {
        let at = self.matches.partition_point(|&(h, _)| h < height);
        let owners = match self.matches.get(at) {
            // The block of that height (a reorganisation withdraws what is above the fork
            // before the scan matches the other branch).
            Some(&(h, _)) if h == height => {
                let new = owners & !self.match_owners[at];
                self.match_owners[at] |= new;
                // Saved again: the count of matches did not change.
                self.saved = None;
                new
            }
            _ if owners != 0 => {
                self.matches.insert(at, (height, hash));
                self.match_owners.insert(at, owners);
                owners
            }
            _ => 0,
        };
        (owners != 0).then_some(ScanChange::Matched {
            height,
            hash,
            owners,
        })
    }

    fn empty(capacity: usize, from: u32) -> Scan {
        Scan {
            matcher: Matcher::with_capacity(capacity),
            scripts: Vec::with_capacity(capacity),
            owners: Vec::with_capacity(capacity),
            all_owners: 0,
            from,
            next: from,
            matches: Vec::new(),
            match_owners: Vec::new(),
            spans: Vec::new(),
            forced: Vec::new(),
            reading: None,
            start: from,
            hashes: Vec::with_capacity(MOST_PER_MIRROR_FILE as usize),
            headers: Vec::with_capacity(MOST_PER_MIRROR_FILE as usize + 1),
            requests: VecDeque::with_capacity(SCAN_IN_FLIGHT),
            mirror: None,
            next_request: from,
            buf: Vec::new(),
            filter_len: None,
            ids: Ids::new(TaskId::Scan),
            filters: 0,
            bytes: 0,
            reported_tip: false,
            saved: None,
            refused: Lacking::default(),
            kept: None,
        }
    }

    /// Watch each script too for its owners, from the next filter matched on.
    pub fn add_owned(&mut self, scripts: impl IntoIterator<Item = (Vec<u8>, Owners)>) {
        let mut changed = false;
        for (s, owner) in scripts {
            match self.scripts.iter().position(|x| *x == s) {
                Some(i) if self.owners[i] & owner == owner => {}
                Some(i) => {
                    self.owners[i] |= owner;
                    changed = true;
                }
                None => {
                    self.scripts.push(s);
                    self.owners.push(owner);
                    changed = true;
                }
            }
            if self.all_owners & owner != owner {
                // An owner new to the scan is matched from here on.
                let next = self.next;
                self.spans
                    .extend(bits(owner & !self.all_owners).map(|owner| Span {
                        owner,
                        start: next,
                        resume: next,
                    }));
                self.all_owners |= owner;
            }
        }
        if changed {
            // Saved again (the scripts are part of the saved state).
            self.saved = None;
        }
    }

    /// Which of `among` filter `filter` of block `hash` matches the scripts of, given that
    /// it matches theirs together: with one owner, that one; else each owner's own
    /// scripts matched again (a match is rare: one filter in thousands).
    fn owners_matching(&mut self, filter: &[u8], hash: &BlockHash, among: Owners) -> Owners {
        if among.count_ones() <= 1 {
            return among;
        }
        let mut found = 0;
        for owner in bits(among) {
            let (scripts, owners) = (&self.scripts, &self.owners);
            let own = scripts
                .iter()
                .zip(owners)
                .filter(|(_, o)| **o & owner != 0)
                .map(|(s, _)| s.as_slice());
            // It decoded for the union: it decodes again (or counts as matched).
            if self.matcher.match_any(filter, &hash.0, own).unwrap_or(true) {
                found |= owner;
            }
        }
        found
    }

    /// Whose scripts each of [`Self::matches`] matched.
    pub fn match_owners(&self) -> &[Owners] {
        &self.match_owners
    }

    /// Whose scripts the scan holds.
    pub fn all_owners(&self) -> Owners {
        self.all_owners
    }

    /// Whether `owner` watches exactly `scripts`, in that order, from `from`.
    pub fn owner_watches(&self, owner: Owners, scripts: &[Vec<u8>], from: u32) -> bool {
        let mut own = self
            .scripts
            .iter()
            .zip(&self.owners)
            .filter(|(_, o)| **o & owner != 0)
            .map(|(s, _)| s);
        let started = self
            .spans
            .iter()
            .any(|s| s.owner == owner && s.start == from);
        started && scripts.iter().all(|s| own.next() == Some(s)) && own.next().is_none()
    }

    /// The matches with one of `owners`' marks, ascending.
    pub fn matches_of(&self, owners: Owners) -> Vec<(u32, BlockHash)> {
        self.matches
            .iter()
            .zip(&self.match_owners)
            .filter(|(_, o)| **o & owners != 0)
            .map(|(m, _)| *m)
            .collect()
    }

    /// The scripts watched.
    pub fn scripts(&self) -> &[Vec<u8>] {
        &self.scripts
    }

    /// Whose each of [`Self::scripts`] is.
    pub fn owners(&self) -> &[Owners] {
        &self.owners
    }

    /// A gateway announced a tip: what was refused as not on its chain is asked again.
    pub fn unblock(&mut self) {
        self.refused.release();
    }

    /// Whether `gateway` said the blocks asked are not on its chain, with no tip since.
    pub fn is_refused(&self, gateway: GatewayId) -> bool {
        self.refused.contains(gateway)
    }

    /// The gateways that refused what `by` has now delivered (each once).
    pub fn shown_refused(&mut self, by: GatewayId) -> impl Iterator<Item = GatewayId> + '_ {
        self.refused.shown(by, self.next)
    }

    /// Whether everything stored (up to `stored`) is matched and nothing is in flight.
    pub fn at_tip(&self, stored: Option<u32>) -> bool {
        stored.is_some_and(|t| self.next > t) && self.idle()
    }

    /// Nothing is asked: no request in flight, no mirror's file read.
    fn idle(&self) -> bool {
        self.requests.is_empty() && self.mirror.is_none()
    }

    /// The scan's state for the store, if it moved since it was last saved (by 1,000
    /// blocks, or at all when nothing is in flight, or a match came or went):
    /// `version 4 | from u32 | next u32 | scripts (u32 count, then u16 length, bytes and
    /// owners u64 each) | matches | blocks matched ahead | owners of each match (u64
    /// each) | spans (u32 count, then owner u64, start u32 and resume u32 each)`, each
    /// list of blocks a u32 count, then height u32 and hash 32 each; little-endian.
    /// (Version 3, still read, had no spans: every owner started at `from`; versions 1
    /// and 2 no owners either: all [`FIRST_OWNER`]'s; version 1 no blocks matched ahead.)
    pub fn save(&mut self) -> Option<Vec<u8>> {
        let now = (self.next, self.matches.len(), self.forced.len());
        let due = match self.saved {
            None => true,
            Some((next, matches, forced)) => {
                matches != now.1
                    || forced != now.2
                    || self.next.abs_diff(next) >= SCAN_REQUEST
                    || self.next < next
                    // Nothing in flight (at the stored tip, or between windows): where it
                    // stands is worth keeping. (A mirror's file being read is in flight:
                    // counted as a request, else it was saved at every message.)
                    || (self.next != next && self.idle())
            }
        };
        if !due {
            return None;
        }
        self.saved = Some(now);
        let mut out = Vec::with_capacity(16 + self.scripts.len() * 32 + self.matches.len() * 44);
        out.push(4);
        out.extend_from_slice(&self.from.to_le_bytes());
        out.extend_from_slice(&self.next.to_le_bytes());
        out.extend_from_slice(&(self.scripts.len() as u32).to_le_bytes());
        for (s, owners) in self.scripts.iter().zip(&self.owners) {
            out.extend_from_slice(&(s.len() as u16).to_le_bytes());
            out.extend_from_slice(s);
            out.extend_from_slice(&owners.to_le_bytes());
        }
        for list in [&self.matches, &self.forced] {
            out.extend_from_slice(&(list.len() as u32).to_le_bytes());
            for (h, hash) in list {
                out.extend_from_slice(&h.to_le_bytes());
                out.extend_from_slice(&hash.0);
            }
        }
        for owners in &self.match_owners {
            out.extend_from_slice(&owners.to_le_bytes());
        }
        out.extend_from_slice(&(self.spans.len() as u32).to_le_bytes());
        for s in &self.spans {
            out.extend_from_slice(&s.owner.to_le_bytes());
            out.extend_from_slice(&s.start.to_le_bytes());
            out.extend_from_slice(&s.resume.to_le_bytes());
        }
        Some(out)
    }

    /// A scan saved by [`Self::save`], going on from where it stood; `None` if the bytes
    /// are not a saved scan (then it is not resumed).
    pub fn restore(bytes: &[u8]) -> Option<Scan> {
        let mut at = 0usize;
        let mut take = |n: usize| -> Option<&[u8]> {
            let b = bytes.get(at..at.checked_add(n)?)?;
            at += n;
            Some(b)
        };
        let u32_of = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let u64_of = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
        // Version 1 had no blocks matched ahead; versions 1 and 2 no owners; versions 1
        // to 3 no spans.
        let version = take(1)?[0];
        if !(1..=4).contains(&version) {
            return None;
        }
        let from = u32_of(take(4)?);
        let next = u32_of(take(4)?);
        let n = u32_of(take(4)?) as usize;
        let mut scripts = Vec::with_capacity(n.min(10_000));
        let mut owners = Vec::with_capacity(n.min(10_000));
        for _ in 0..n {
            let len = take(2)?;
            let len = usize::from(u16::from_le_bytes([len[0], len[1]]));
            scripts.push(take(len)?.to_vec());
            owners.push(match version {
                3.. => u64_of(take(8)?),
                _ => FIRST_OWNER,
            });
        }
        let mut lists = [Vec::new(), Vec::new()];
        for list in lists.iter_mut().take(usize::from(version.min(2))) {
            let m = u32_of(take(4)?) as usize;
            list.reserve(m.min(100_000));
            for _ in 0..m {
                let h = u32_of(take(4)?);
                let hash: [u8; 32] = take(32)?.try_into().ok()?;
                list.push((h, BlockHash(hash)));
            }
        }
        let [matches, forced] = lists;
        let mut match_owners = Vec::with_capacity(matches.len());
        for _ in 0..matches.len() {
            match_owners.push(match version {
                3.. => u64_of(take(8)?),
                _ => FIRST_OWNER,
            });
        }
        let all = owners.iter().fold(0, |a, o| a | o);
        let spans: Vec<Span> = match version {
            4 => {
                let n = u32_of(take(4)?);
                let mut spans = Vec::with_capacity(n.min(64) as usize);
                for _ in 0..n {
                    let owner = u64_of(take(8)?);
                    let (start, resume) = (u32_of(take(4)?), u32_of(take(4)?));
                    spans.push(Span {
                        owner,
                        start,
                        resume,
                    });
                }
                spans
            }
            _ => bits(all)
                .map(|owner| Span {
                    owner,
                    start: from,
                    resume: from,
                })
                .collect(),
        };
        // Every script someone's, every match someone's of those: a match of nobody's
        // would be fetched for no wallet, its payment hidden. One span for each owner,
        // each at or above the scan's start; a match at or above where the scan stands
        // only of owners matched past it, none below an owner's start.
        let span_of = |o: Owners| spans.iter().find(|s| s.owner == o);
        let span_owners = spans.iter().fold(0, |a, s| a | s.owner);
        let spans_ok = spans.len() == all.count_ones() as usize
            && span_owners == all
            && spans
                .iter()
                .all(|s| s.owner.count_ones() == 1 && from <= s.start && s.start <= s.resume);
        let match_ok = |&(h, _): &(u32, BlockHash), &o: &Owners| {
            h >= from
                && o != 0
                && o & !all == 0
                && bits(o)
                    .all(|o| span_of(o).is_some_and(|s| h >= s.start && (h < next || h < s.resume)))
        };
        if next < from
            || !spans_ok
            || !matches.windows(2).all(|w| w[0].0 < w[1].0)
            || !matches
                .iter()
                .zip(&match_owners)
                .all(|(m, o)| match_ok(m, o))
            || !forced.is_sorted()
            || owners.contains(&0)
        {
            return None;
        }
        let mut scan = Scan::owned(scripts, owners, from);
        scan.spans = spans;
        scan.next = next;
        scan.start = next;
        scan.next_request = next;
        scan.matches = matches;
        scan.match_owners = match_owners;
        scan.forced = forced;
        scan.saved = Some((next, scan.matches.len(), scan.forced.len()));
        Some(scan)
    }

    /// Another gateway's filter of block `c.height`, which a dispute could not settle
    /// against ours (see [`crate::dispute::Contested`]): when it matches a script, the
    /// block is matched, now if the scan has passed it (returned, to be told), else when
    /// the scan gets there. (An empty filter stands for one not kept: always matched.)
    pub fn contest(&mut self, c: &crate::dispute::Contested) -> Option<ScanChange> {
        if c.height < self.from {
            return None;
        }
        let scripts = self.scripts.iter().map(Vec::as_slice);
        // A filter that does not decode was refused before it got here; were it to, the
        // block is matched (fetched and read), never passed over.
        let matched = c.filter.is_empty()
            || self
                .matcher
                .match_any(&c.filter, &c.hash.0, scripts)
                .unwrap_or(true);
        if !matched {
            return None;
        }
        let entry = (c.height, c.hash);
        if c.height >= self.next {
            let at = self.forced.partition_point(|f| *f < entry);
            if self.forced.get(at) != Some(&entry) {
                self.forced.insert(at, entry);
            }
            return None;
        }
        // Whose: those started by then (matched past it or not: our filter may have said
        // no for them); with no filter kept, every one of those.
        let started = self.started_at(c.height);
        let owners = match c.filter.is_empty() {
            true => started,
            false => self.owners_matching(&c.filter, &c.hash, started),
        };
        self.add_match(c.height, c.hash, owners)
    }

    /// Keep only what the stored chain still bears out: a match whose block is no longer
    /// at its height (a reorg while the scan was not running) goes, with everything from
    /// it on, and the scan goes on from there.
    pub fn keep_matches_on(&mut self, mut on_chain: impl FnMut(u32, &BlockHash) -> bool) {
        if let Some(i) = self
            .matches
            .iter()
            .position(|(h, hash)| !on_chain(*h, hash))
        {
            let height = self.matches[i].0;
            self.matches.truncate(i);
            self.match_owners.truncate(i);
            self.resume_by(height);
            self.next = self.next.min(height);
            self.start = self.next;
            self.next_request = self.next;
        }
    }

    /// What was matched from `height` on is gone for every owner: each is matched again
    /// from there at the latest.
    fn resume_by(&mut self, height: u32) {
        for s in self.spans.iter_mut() {
            s.resume = s.resume.min(height).max(s.start);
        }
    }

    /// The first height scanned.
    pub fn from(&self) -> u32 {
        self.from
    }

    /// The next height to match (every height below it is done).
    pub fn next(&self) -> u32 {
        self.next
    }

    /// The blocks that matched, ascending.
    pub fn matches(&self) -> &[(u32, BlockHash)] {
        &self.matches
    }

    /// The first height after the window read.
    fn window_end(&self) -> u32 {
        self.start + self.hashes.len() as u32
    }

    /// The window to read from the store, if one is due (the one read is used up): heights
    /// `start..=end`, up to the last stored filter header `stored`.
    pub fn need_data(&mut self, stored: Option<u32>) -> Option<(u32, u32)> {
        if let Some(r) = self.reading {
            return Some(r);
        }
        if self.next < self.window_end() || !self.idle() {
            return None;
        }
        let tip = stored.filter(|&t| t >= self.next)?;
        let end = tip.min(self.next.saturating_add(MOST_PER_MIRROR_FILE - 1));
        self.reading = Some((self.next, end));
        self.reading
    }

    /// The store's answer to [`Self::need_data`]: the block hashes of `start..=end` and the
    /// filter headers of `start - 1..=end` (32 zero bytes before genesis). Ignored if the
    /// window was dropped meanwhile (a reorganisation) or does not fit.
    pub fn on_data(&mut self, start: u32, hashes: &[BlockHash], headers: &[FilterHeader]) {
        let asked = self.reading.take();
        if asked.map(|r| r.0) != Some(start)
            || headers.len() != hashes.len() + 1
            || hashes.is_empty()
            || start != self.next
        {
            return;
        }
        self.start = start;
        self.hashes.clear();
        self.hashes.extend_from_slice(hashes);
        self.headers.clear();
        self.headers.extend_from_slice(headers);
        self.next_request = start;
    }

    /// The next request, if one is due: id, first height and the last block's hash.
    /// `gateway` is where it goes, for filters up to `limit` at most; requests in flight
    /// all go to one gateway (see [`Self::asked`]).
    pub fn next_request(
        &mut self,
        gateway: GatewayId,
        limit: u32,
    ) -> Option<(u32, u32, BlockHash)> {
        if self.requests.len() >= SCAN_IN_FLIGHT
            || self.mirror.is_some()
            || self.refused.contains(gateway)
            || self.next_request >= self.window_end()
            || self.next_request > limit
            || self.requests.front().is_some_and(|r| r.gateway != gateway)
        {
            return None;
        }
        let first = self.next_request;
        let end = (self.window_end() - 1)
            .min(first.saturating_add(SCAN_REQUEST - 1))
            .min(limit);
        let id = self.ids.next_id();
        self.requests.push_back(Request { id, gateway, end });
        self.next_request = end + 1;
        let stop = *self.hashes.get((end - self.start) as usize)?;
        Some((id, first, stop))
    }

    /// The gateway requests are in flight to, and the oldest one's id.
    pub fn asked(&self) -> Option<GivenUp> {
        self.requests.front().map(|r| (r.gateway, r.id))
    }

    /// Every request in flight is given up (its gateway dropped, or its answer broke a
    /// rule): their ids, to ignore what still arrives; the filters are asked again.
    pub fn abandon(&mut self) -> impl Iterator<Item = GivenUp> + '_ {
        self.filter_len = None;
        self.next_request = self.next;
        self.requests.drain(..).map(|r| (r.gateway, r.id))
    }

    /// Whether `id` from `gateway` is a request in flight.
    pub fn is_in_flight(&self, gateway: GatewayId, id: u32) -> bool {
        self.requests
            .iter()
            .any(|r| r.gateway == gateway && r.id == id)
    }

    /// Whether the scan stands at the stored filter tip `stored` (everything stored is
    /// matched) for the first time since it last moved: the shell reports it once.
    pub fn reached(&mut self, stored: Option<u32>) -> bool {
        let at_tip = stored.is_some_and(|t| self.next > t) && self.idle();
        let first = at_tip && !self.reported_tip;
        self.reported_tip = at_tip;
        first
    }

    /// One `filters` message. Matches are reported to `change`. Returns the requests given
    /// up because of it (the others in flight, after an answer that ended short): their
    /// answers may still come, and must be known for what they are.
    /// `contested` says whether a filter that does not match our filter header is the one
    /// a dispute contested at that block (from a gateway in conflict): then it is taken,
    /// and the block matched.
    pub fn on_filters(
        &mut self,
        m: &Filters<'_>,
        contested: impl Fn(u32, &BlockHash, &[u8]) -> bool,
        mut change: impl FnMut(ScanChange),
    ) -> Result<Vec<GivenUp>, ScanError> {
        if self.requests.front().map(|r| r.id) != Some(m.id) {
            // An answer to a later request while an earlier one is unfinished.
            return Err(ScanError::OutOfOrder { height: self.next });
        }
        for piece in m.pieces() {
            let Some(front) = self.requests.front().copied() else {
                return Err(ScanError::OutOfOrder {
                    height: piece.height,
                });
            };
            if self.on_piece(&piece, front.end, &contested, &mut change)? {
                self.requests.pop_front();
            }
        }
        let ended = self.requests.front().copied();
        if let Some(front) = ended.filter(|r| m.flags.last && r.id == m.id) {
            // Short of the request: the gateway's chain moved (a reorg: it says the stop
            // block is not on its chain, and a new tip follows), or it is behind. It is
            // asked again once a tip comes, another meanwhile; an answer cut short
            // otherwise is a strike.
            let (height, gateway) = (self.next, front.gateway);
            // The others in flight (to the same gateway) are given up, not forgotten: it
            // answers them too, a moment later. (Dropped without a trace, that answer
            // made an honest gateway an `unexpected-answer`.)
            let others: Vec<GivenUp> = self.abandon().filter(|&(_, id)| id != m.id).collect();
            if m.flags.stop_unknown {
                self.hashes.clear();
                self.headers.clear();
                self.start = self.next;
                self.refused.add(gateway, height);
            } else {
                return Err(ScanError::Short { height });
            }
            return Ok(others);
        }
        Ok(Vec::new())
    }

    /// One piece of the filters asked up to `end`: true when it ends the filter of `end`.
    // One copy for the gateways' answers and the mirrors' files (a call a piece is
    // nothing beside matching a filter).
    #[inline(never)]
    fn on_piece(
        &mut self,
        p: &FilterPiece<'_>,
        end: u32,
        contested: &impl Fn(u32, &BlockHash, &[u8]) -> bool,
        change: &mut impl FnMut(ScanChange),
    ) -> Result<bool, ScanError> {
        let height = p.height;
        let out_of_order = ScanError::OutOfOrder { height };
        if height != self.next || height > end {
            return Err(out_of_order);
        }
        match self.filter_len {
            None if p.offset == 0 && p.filter_len <= MAX_FILTER_LEN => {
                self.filter_len = Some(p.filter_len);
                self.buf.clear();
            }
            Some(len) if len == p.filter_len && p.offset as usize == self.buf.len() => {}
            _ => return Err(out_of_order),
        }
        self.buf.extend_from_slice(p.data);
        self.bytes += p.data.len() as u64;
        if !p.ends_filter() {
            return Ok(false);
        }
        self.filter_len = None;
        let i = (height - self.start) as usize;
        let (Some(before), Some(stored), Some(hash)) = (
            self.headers.get(i),
            self.headers.get(i + 1),
            self.hashes.get(i),
        ) else {
            return Err(out_of_order);
        };
        let hash = &{ *hash };
        let theirs = filter_header(&filter_hash(&self.buf), before) != *stored;
        if theirs && !contested(height, hash, &self.buf) {
            return Err(ScanError::Mismatch { height });
        }
        if let Some(kept) = self.kept.as_mut().filter(|_| !theirs) {
            kept.put(height, *hash, &self.buf);
        }
        // Only the scripts of owners due here: those of owners matched past it already
        // would match again what they have (and cost a match of each owner's own).
        let due = self.due_at(height);
        let scripts = self
            .scripts
            .iter()
            .zip(&self.owners)
            .filter(|(_, o)| **o & due != 0)
            .map(|(s, _)| s.as_slice());
        let matched = self
            .matcher
            .match_any(&self.buf, &hash.0, scripts)
            .map_err(|error| ScanError::Undecodable { height, error })?;
        let forced = !self.forced.is_empty() && {
            self.forced.retain(|&(h, _)| h >= height);
            self.forced.first() == Some(&(height, *hash))
        };
        if matched || forced || theirs {
            // A block matched whatever our filter says is everyone's to read (every owner
            // started by then: one matched past it may not have read it).
            let owners = match matched && !forced && !theirs {
                true => {
                    let filter = core::mem::take(&mut self.buf);
                    let owners = self.owners_matching(&filter, hash, due);
                    self.buf = filter;
                    owners
                }
                false => self.started_at(height),
            };
            if let Some(c) = self.add_match(height, *hash, owners) {
                change(c);
            }
        }
        self.filters += 1;
        self.next += 1;
        Ok(height == end)
    }

    /// Read mirror `m`'s filters file ending at `last` instead of asking gateways: only
    /// when nothing is asked, and the window read holds the block the scan stands at and
    /// every block to `last` (else false; see [`Self::window_holds`]).
    pub fn mirror_request(&mut self, m: crate::engine::MirrorId, last: u32) -> bool {
        if !self.idle() || !self.window_holds(last) {
            return false;
        }
        self.mirror = Some((m, last));
        self.filter_len = None;
        true
    }

    /// Whether the window read holds the blocks from where the scan stands to `last`.
    pub fn window_holds(&self, last: u32) -> bool {
        self.reading.is_none()
            && !self.hashes.is_empty()
            && self.start <= self.next
            && self.next < self.window_end()
            && last < self.window_end()
    }

    /// The window read is given up (it does not hold a mirror's file that holds the next
    /// block): the next one is read from where the scan stands, when nothing is asked.
    pub fn read_window_again(&mut self) {
        if self.idle() && self.reading.is_none() {
            self.hashes.clear();
            self.headers.clear();
            self.start = self.next;
            self.next_request = self.next;
        }
    }

    /// The mirror whose file is read, if one is.
    pub fn mirror_reading(&self) -> Option<crate::engine::MirrorId> {
        self.mirror.map(|(m, _)| m)
    }

    /// One `filters` message of the mirror's file read (see [`Self::mirror_request`]):
    /// filters below where the scan stands are skipped (a file may start before it),
    /// the others taken as a gateway's answer is, none past the file's last height.
    pub fn on_mirror_filters(
        &mut self,
        m: &Filters<'_>,
        mut change: impl FnMut(ScanChange),
    ) -> Result<(), ScanError> {
        let Some((_, end)) = self.mirror else {
            return Ok(());
        };
        let no_contest = |_: u32, _: &BlockHash, _: &[u8]| false;
        for piece in m.pieces() {
            if piece.height < self.next && self.filter_len.is_none() {
                continue;
            }
            self.on_piece(&piece, end, &no_contest, &mut change)?;
        }
        Ok(())
    }

    /// The mirror's file ended whole: it must have brought every filter to its last
    /// height. Nothing is read from it after.
    pub fn mirror_ended(&mut self) -> Result<(), ScanError> {
        let Some((_, end)) = self.mirror.take() else {
            return Ok(());
        };
        self.next_request = self.next;
        if self.next != end + 1 || self.filter_len.is_some() {
            self.filter_len = None;
            return Err(ScanError::Short { height: self.next });
        }
        Ok(())
    }

    /// The mirror's file is not read further (its mirror dropped, or the scan moved): the
    /// scan goes on from where it stands. Returns whether one was being read.
    pub fn mirror_gone(&mut self) -> bool {
        self.filter_len = None;
        self.next_request = self.next;
        self.mirror.take().is_some()
    }

    /// The best chain switched branches at `fork`: matches above it are withdrawn (to
    /// `change`), and the scan goes on from the fork. Returns the requests given up.
    pub fn reorg(
        &mut self,
        fork: u32,
        change: impl FnMut(ScanChange),
    ) -> impl Iterator<Item = GivenUp> + '_ {
        self.drop_from(fork.saturating_add(1), change)
    }

    /// What was scanned from `height` on no longer holds (a reorg above `height - 1`, or
    /// the filter headers found wrong from `height`, which may be 0): matches from there
    /// are withdrawn (to `change`), and the scan goes on from there. Returns the requests
    /// given up.
    pub fn drop_from(
        &mut self,
        height: u32,
        mut change: impl FnMut(ScanChange),
    ) -> impl Iterator<Item = GivenUp> + '_ {
        while let Some(&(h, hash)) = self.matches.last().filter(|(h, _)| *h >= height) {
            self.matches.pop();
            let owners = self.match_owners.pop().unwrap_or(0);
            change(ScanChange::Withdrawn {
                height: h,
                hash,
                owners,
            });
        }
        self.resume_by(height);
        if self.next > height {
            self.next = height.max(self.from);
        }
        if self.reading.is_some_and(|(_, end)| end >= height) {
            self.reading = None;
        }
        // The window keeps what is below `height` (common to both).
        let keep = height.saturating_sub(self.start) as usize;
        if keep < self.hashes.len() {
            self.hashes.truncate(keep);
            self.headers.truncate(keep + 1);
        }
        if self.next < self.start || self.hashes.is_empty() {
            self.hashes.clear();
            self.headers.clear();
            self.start = self.next;
        }
        if self.mirror.is_some_and(|(_, end)| end >= height) {
            // Its filters from `height` on are of the old branch (or not ours): the task
            // stops the file (it sees the read gone).
            self.mirror_gone();
        }
        let touched = self.requests.back().is_some_and(|r| r.end >= height);
        let given_up: Vec<GivenUp> = if touched {
            self.abandon().collect()
        } else {
            Vec::new()
        };
        given_up.into_iter()
    }
}

/// Each owner of `owners`, one bit each, lowest first.
fn bits(owners: Owners) -> impl Iterator<Item = Owners> {
    (0..Owners::BITS)
        .map(|b| 1 << b)
        .filter(move |o| owners & o != 0)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use lightwire_filter::build_filter;
    use lightwire_wire::{AnswerFlags, FiltersWriter, Message};

    use super::*;

    fn hash(h: u32) -> BlockHash {
        let mut b = [1u8; 32];
        b[..4].copy_from_slice(&h.to_le_bytes());
        BlockHash(b)
    }

    /// Blocks 0..n: block h's filter holds script [h; 4] (and block 7's also "ours").
    fn chain(n: u32) -> (Vec<Vec<u8>>, Vec<FilterHeader>) {
        let mut filters = Vec::new();
        let mut headers = vec![FilterHeader::ZERO];
        for h in 0..n {
            let mut f = Vec::new();
            let mine = b"ours".to_vec();
            let items: Vec<Vec<u8>> = if h == 7 || h == 1500 {
                vec![vec![h as u8; 4], mine]
            } else {
                vec![vec![h as u8; 4]]
            };
            build_filter(&hash(h).0, items.iter().map(Vec::as_slice), &mut f);
            let prev = *headers.last().unwrap();
            headers.push(filter_header(&filter_hash(&f), &prev));
            filters.push(f);
        }
        (filters, headers)
    }

    /// The gateway's messages for heights `a..=b`, `per` pieces' worth of room each.
    fn answer(id: u32, filters: &[Vec<u8>], a: u32, b: u32, room: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; room];
        let (mut h, mut off) = (a, 0);
        while h <= b {
            let mut w = FiltersWriter::new(&mut buf, id).unwrap();
            while h <= b {
                let Some(n) = w.push(h, &filters[h as usize], off) else {
                    break;
                };
                off += n;
                if off == filters[h as usize].len() {
                    (h, off) = (h + 1, 0);
                }
            }
            let len = w.finish(AnswerFlags {
                last: h > b,
                stop_unknown: false,
            });
            out.push(buf[..len].to_vec());
        }
        out
    }

    #[test]
    fn a_mirrors_file_is_read_whole_checked_and_saved_as_requests_are() {
        // A file of 0..=2,999 read from 1,200 (the scan's start): the filters below are
        // skipped, the others checked and matched as a gateway's; where the scan stands
        // is saved every 1,000 blocks while the file is read, not at every message (it was
        // at every one: no request was in flight), and once it ended.
        let (filters, headers) = chain(3_000);
        let mut s = Scan::new(vec![b"ours".to_vec()], 1_200);
        assert_eq!(s.save().map(|_| ()), Some(()));
        assert!(!s.mirror_request(0, 2_999), "no window read yet");
        let (a, b) = s.need_data(Some(2_999)).unwrap();
        let hashes: Vec<BlockHash> = (a..=b).map(hash).collect();
        s.on_data(a, &hashes, &headers[a as usize..=b as usize + 1]);
        assert!(s.mirror_request(0, 2_999));
        assert_eq!(
            s.next_request(GatewayId(0), 2_999),
            None,
            "no request beside it"
        );
        let mut saves = 0;
        let mut changes = Vec::new();
        for m in answer(0, &filters, 0, 2_999, 600) {
            let Ok(Message::Filters(f)) = Message::decode(&m) else {
                panic!("filters")
            };
            s.on_mirror_filters(&f, |c| changes.push(c)).unwrap();
            saves += usize::from(s.save().is_some());
        }
        assert_eq!(s.next(), 3_000);
        assert!(saves <= 2, "saved {saves} times while the file was read");
        assert_eq!(s.mirror_ended(), Ok(()));
        assert!(s.save().is_some(), "saved once it ended");
        let matched: Vec<u32> = changes
            .iter()
            .filter_map(|c| match c {
                ScanChange::Matched { height, .. } => Some(*height),
                _ => None,
            })
            .collect();
        assert_eq!(matched, [1_500]);
        // One that holds another filter: a mismatch; one that ends short: short.
        let mut s = Scan::new(vec![b"ours".to_vec()], 0);
        let (a, b) = s.need_data(Some(2_999)).unwrap();
        let hashes: Vec<BlockHash> = (a..=b).map(hash).collect();
        s.on_data(a, &hashes, &headers[a as usize..=b as usize + 1]);
        assert!(s.mirror_request(0, 999));
        let mut bad = filters.clone();
        bad.swap(10, 11);
        let mut result = Ok(());
        for m in answer(0, &bad, 0, 999, 600) {
            let Ok(Message::Filters(f)) = Message::decode(&m) else {
                panic!("filters")
            };
            result = result.and_then(|()| s.on_mirror_filters(&f, |_| {}));
        }
        assert_eq!(result, Err(ScanError::Mismatch { height: 10 }));
        assert!(s.mirror_gone());
        assert!(s.mirror_request(0, 999));
        for m in answer(0, &filters, 0, 500, 600) {
            let Ok(Message::Filters(f)) = Message::decode(&m) else {
                panic!("filters")
            };
            s.on_mirror_filters(&f, |_| {}).unwrap();
        }
        assert_eq!(s.mirror_ended(), Err(ScanError::Short { height: 501 }));
    }

    fn feed(s: &mut Scan, msgs: &[Vec<u8>]) -> (Vec<ScanChange>, Result<(), ScanError>) {
        let mut changes = Vec::new();
        for m in msgs {
            let Ok(Message::Filters(f)) = Message::decode(m) else {
                panic!("filters")
            };
            if let Err(e) = s.on_filters(&f, |_, _, _| false, |c| changes.push(c)) {
                return (changes, Err(e));
            }
        }
        (changes, Ok(()))
    }

    /// Each change a match: its height and owners.
    fn matched(changes: &[ScanChange]) -> Vec<(u32, Owners)> {
        changes
            .iter()
            .map(|c| match c {
                ScanChange::Matched { height, owners, .. } => (*height, *owners),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    /// Read the window the scan asks for and take its requests: (id, first, last) each.
    fn requests(s: &mut Scan, headers: &[FilterHeader], stored: u32) -> Vec<(u32, u32, u32)> {
        if let Some((a, b)) = s.need_data(Some(stored)) {
            let hashes: Vec<BlockHash> = (a..=b).map(hash).collect();
            s.on_data(a, &hashes, &headers[a as usize..=b as usize + 1]);
        }
        let mut out = Vec::new();
        while let Some((id, start, stop)) = s.next_request(GatewayId(0), u32::MAX) {
            let end = u32::from_le_bytes(stop.0[..4].try_into().unwrap());
            out.push((id, start, end));
        }
        out
    }

    #[test]
    fn filters_are_checked_then_matched_two_requests_in_flight() {
        let (filters, headers) = chain(2500);
        let mut s = Scan::new(vec![b"ours".to_vec(), b"not".to_vec()], 0);
        assert_eq!(s.need_data(None), None, "nothing stored");
        let r = requests(&mut s, &headers, 2499);
        assert_eq!(
            r.iter().map(|x| (x.1, x.2)).collect::<Vec<_>>(),
            [(0, 999), (1000, 1999)]
        );
        assert!(crate::ids::is_task(r[0].0, TaskId::Scan));
        // An answer to the second before the first ended: refused.
        let (_, e) = feed(&mut s, &answer(r[1].0, &filters, 1000, 1999, 65_535));
        assert!(matches!(e, Err(ScanError::OutOfOrder { .. })));
        let mut s = Scan::new(vec![b"ours".to_vec(), b"not".to_vec()], 0);
        let r = requests(&mut s, &headers, 2499);
        // Small messages: filters cut in pieces across them.
        let (changes, e) = feed(&mut s, &answer(r[0].0, &filters, 0, 999, 40));
        e.unwrap();
        assert_eq!(
            changes,
            [ScanChange::Matched {
                height: 7,
                hash: hash(7),
                owners: FIRST_OWNER,
            }]
        );
        assert_eq!(s.next(), 1000);
        // The third request goes out once the first is done; no store read is due yet.
        assert_eq!(s.need_data(Some(2499)), None);
        let third = requests(&mut s, &headers, 2499);
        assert_eq!(
            third.iter().map(|x| (x.1, x.2)).collect::<Vec<_>>(),
            [(2000, 2499)]
        );
        let (changes, e) = feed(&mut s, &answer(r[1].0, &filters, 1000, 1999, 65_535));
        e.unwrap();
        assert_eq!(changes.len(), 1);
        feed(&mut s, &answer(third[0].0, &filters, 2000, 2499, 65_535))
            .1
            .unwrap();
        assert!(s.reached(Some(2499)));
        assert!(!s.reached(Some(2499)), "reported once");
        assert_eq!(s.matches(), [(7, hash(7)), (1500, hash(1500))]);
        // A reorg at 1,200 withdraws the match at 1,500 and goes on from 1,201.
        let mut withdrawn = Vec::new();
        assert_eq!(s.reorg(1200, |c| withdrawn.push(c)).count(), 0);
        assert_eq!(
            withdrawn,
            [ScanChange::Withdrawn {
                height: 1500,
                hash: hash(1500),
                owners: FIRST_OWNER,
            }]
        );
        assert_eq!(s.next(), 1201);
        assert_eq!(s.need_data(Some(1300)), Some((1201, 1300)));
        assert_eq!(s.filters, 2500);
    }

    #[test]
    fn a_gateway_saying_the_stop_is_not_on_its_chain_is_passed_over_until_a_tip() {
        let (filters, headers) = chain(1000);
        let mut s = Scan::new(vec![b"ours".to_vec()], 0);
        let r = requests(&mut s, &headers, 999);
        let mut buf = vec![0u8; 64];
        let w = FiltersWriter::new(&mut buf, r[0].0).unwrap();
        let len = w.finish(AnswerFlags {
            last: true,
            stop_unknown: true,
        });
        let (_, e) = feed(&mut s, &[buf[..len].to_vec()]);
        e.unwrap();
        assert!(s.is_refused(GatewayId(0)));
        // The window is read again, and another gateway is asked for it at once.
        let (a, b) = s.need_data(Some(999)).unwrap();
        let hashes: Vec<BlockHash> = (a..=b).map(hash).collect();
        s.on_data(a, &hashes, &headers[a as usize..=b as usize + 1]);
        assert_eq!(s.next_request(GatewayId(0), u32::MAX), None);
        let (id, start, _) = s.next_request(GatewayId(1), u32::MAX).unwrap();
        assert_eq!(start, 0);
        feed(&mut s, &answer(id, &filters, 0, 999, 65_535))
            .1
            .unwrap();
        assert_eq!(
            s.shown_refused(GatewayId(1)).collect::<Vec<_>>(),
            [GatewayId(0)]
        );
        s.unblock();
        assert!(!s.is_refused(GatewayId(0)));
    }

    /// Scripts of several owners are matched in one pass over each filter; each match
    /// says whose scripts it matched (a script of two owners is both's).
    #[test]
    fn each_match_names_whose_scripts_it_matched() {
        let (filters, headers) = chain(1000);
        let scripts = vec![b"ours".to_vec(), vec![9; 4], vec![7; 4], vec![7; 4]];
        let mut s = Scan::owned(scripts, vec![1, 2, 4, 8], 0);
        assert_eq!(s.all_owners(), 15);
        let r = requests(&mut s, &headers, 999);
        let (changes, e) = feed(&mut s, &answer(r[0].0, &filters, 0, 999, 65_535));
        e.unwrap();
        let got = matched(&changes);
        // Block h holds [h as u8; 4]; blocks 7 and 1,500 hold "ours" too.
        let want = [
            (7, 1 | 4 | 8),
            (9, 2),
            (263, 12),
            (265, 2),
            (519, 12),
            (521, 2),
            (775, 12),
            (777, 2),
        ];
        assert_eq!(got, want);
        assert_eq!(s.match_owners(), want.map(|(_, o)| o));
        // One owner more for a script: from the next filter on, the script not repeated.
        s.add_owned([(b"ours".to_vec(), 16)]);
        assert_eq!((s.scripts().len(), s.all_owners()), (4, 31));
    }

    /// One owner scanned again from below where the scan stands (a wallet watching more):
    /// the others keep what they had, are not told it twice, and are matched again only
    /// past where the scan stood; their matches above where it stands now are saved.
    #[test]
    fn a_scan_gone_back_for_one_owner_keeps_the_others_matches() {
        let (filters, headers) = chain(2500);
        let mut s = Scan::owned(vec![vec![9; 4], b"ours".to_vec()], vec![1, 2], 0);
        let r = requests(&mut s, &headers, 2499);
        for (id, a, b) in r {
            feed(&mut s, &answer(id, &filters, a, b, 65_535)).1.unwrap();
        }
        assert_eq!(s.next(), 2000);
        let one = [9, 265, 521, 777, 1033, 1289, 1545, 1801];
        let heights = |s: &Scan, o: Owners| -> Vec<u32> {
            s.matches()
                .iter()
                .zip(s.match_owners())
                .filter(|(_, m)| **m & o != 0)
                .map(|((h, _), _)| *h)
                .collect()
        };
        assert_eq!(
            (heights(&s, 1), heights(&s, 2)),
            (one.to_vec(), vec![7, 1500])
        );
        // Owner 2 watches one script more, from 1,000.
        let gave_up = s.rewind(2, vec![b"ours".to_vec(), vec![7; 4]], 1000);
        assert!(gave_up.is_empty(), "nothing was in flight");
        assert_eq!((s.next(), s.from()), (1000, 0));
        assert_eq!((heights(&s, 1), heights(&s, 2)), (one.to_vec(), vec![]));
        // Saved here, owner 1's matches above where the scan stands are kept.
        let saved = s.save().unwrap();
        let r = Scan::restore(&saved).unwrap();
        assert_eq!(
            (r.matches(), r.match_owners()),
            (s.matches(), s.match_owners())
        );
        assert_eq!(r.spans, s.spans);
        // A match above where the scan stands of an owner not matched past it: not a scan.
        let mut bad = saved.clone();
        let last_match_owners = bad.len() - 4 - 2 * 16 - 8;
        bad[last_match_owners..last_match_owners + 8].copy_from_slice(&3u64.to_le_bytes());
        assert!(Scan::restore(&bad).is_none());
        let mut changes = Vec::new();
        for (id, a, b) in requests(&mut s, &headers, 2499) {
            let (c, e) = feed(&mut s, &answer(id, &filters, a, b, 65_535));
            e.unwrap();
            changes.extend(c);
        }
        let got = matched(&changes);
        // Owner 2's from 1,000; owner 1's only from 2,000, where the scan stood.
        let want = [
            (1031, 2),
            (1287, 2),
            (1500, 2),
            (1543, 2),
            (1799, 2),
            (2055, 2),
            (2057, 1),
            (2311, 2),
            (2313, 1),
        ];
        assert_eq!(got, want);
        assert_eq!(
            heights(&s, 1),
            [&one[..], &[2057, 2313]].concat(),
            "owner 1's matches whole"
        );
        assert!(s.matches().windows(2).all(|w| w[0].0 < w[1].0));
        // A reorganisation below where both stand takes every owner back to it.
        let mut withdrawn = 0;
        assert_eq!(s.reorg(1199, |_| withdrawn += 1).count(), 0);
        assert_eq!((s.next(), withdrawn), (1200, 11));
        assert!(s.spans.iter().all(|sp| sp.resume <= 1200));
        // The owner leaving takes its marks: blocks only it had go.
        s.remove_owner(2);
        assert_eq!(s.matches().len(), 5);
        assert_eq!((s.all_owners(), s.scripts()), (1, &[vec![9; 4]][..]));
    }

    #[test]
    fn a_saved_scan_is_restored_where_it_stood() {
        let mut s = Scan::owned(vec![b"ours".to_vec(), vec![1, 2, 3]], vec![1, 6], 10);
        s.next = 2500;
        s.matches = vec![(20, hash(20)), (2000, hash(2000))];
        s.match_owners = vec![2, 5];
        s.forced = vec![(3000, hash(3000))];
        let saved = s.save().unwrap();
        assert_eq!(s.save(), None, "nothing moved");
        let mut r = Scan::restore(&saved).unwrap();
        assert_eq!(
            r.forced, s.forced,
            "a contested block matched ahead is kept"
        );
        assert_eq!(
            (&r.owners, r.all_owners(), r.match_owners()),
            (&vec![1, 6], 7, &[2, 5][..])
        );
        // Scans saved before owners (version 2) and before blocks matched ahead
        // (version 1) are still read: every script and match the first owner's.
        let old = |version: u8| {
            let mut out = vec![version];
            out.extend_from_slice(&10u32.to_le_bytes());
            out.extend_from_slice(&2500u32.to_le_bytes());
            out.extend_from_slice(&2u32.to_le_bytes());
            for script in [&b"ours"[..], &[1, 2, 3]] {
                out.extend_from_slice(&(script.len() as u16).to_le_bytes());
                out.extend_from_slice(script);
            }
            let lists: &[&[(u32, BlockHash)]] = match version {
                1 => &[&s.matches],
                _ => &[&s.matches, &s.forced],
            };
            for list in lists {
                out.extend_from_slice(&(list.len() as u32).to_le_bytes());
                for (h, hash) in list.iter() {
                    out.extend_from_slice(&h.to_le_bytes());
                    out.extend_from_slice(&hash.0);
                }
            }
            out
        };
        for version in [1, 2] {
            let r = Scan::restore(&old(version)).unwrap();
            assert_eq!(r.matches(), s.matches());
            assert_eq!((r.match_owners(), r.all_owners()), (&[1, 1][..], 1));
            assert_eq!(r.forced.len(), usize::from(version == 2));
        }
        assert!(r.owner_watches(2, &[vec![1, 2, 3]], 10));
        assert!(r.owner_watches(1, &[b"ours".to_vec()], 10));
        assert_eq!((r.next(), r.matches()), (2500, s.matches()));
        // The block at 2,000 was reorged away while the tab was closed.
        r.keep_matches_on(|h, _| h != 2000);
        assert_eq!((r.next(), r.matches()), (2000, &[(20, hash(20))][..]));
        // Broken or foreign bytes are not a scan.
        assert!(Scan::restore(&saved[..saved.len() - 1]).is_none());
        assert!(Scan::restore(&[2]).is_none());
        // A match of nobody's, or of an owner with no script: not a scan.
        for o in [0u64, 8] {
            let mut bad = saved.clone();
            let at = bad.len() - 8;
            bad[at..].copy_from_slice(&o.to_le_bytes());
            assert!(Scan::restore(&bad).is_none(), "match owners {o}");
        }
        let mut bad = saved.clone();
        bad[5..9].copy_from_slice(&5u32.to_le_bytes()); // next below from
        assert!(Scan::restore(&bad).is_none());
    }

    #[test]
    fn a_wrong_filter_or_an_answer_cut_short_is_refused() {
        let (mut filters, headers) = chain(1000);
        let mut s = Scan::new(vec![b"ours".to_vec()], 0);
        let r = requests(&mut s, &headers, 999);
        // Block 5's filter without its item: it does not chain to the stored header.
        build_filter(&hash(5).0, [&b"other"[..]], &mut filters[5]);
        let (_, e) = feed(&mut s, &answer(r[0].0, &filters, 0, 999, 65_535));
        assert_eq!(e, Err(ScanError::Mismatch { height: 5 }));
        // Pieces from another height than the next.
        let mut s = Scan::new(vec![b"ours".to_vec()], 0);
        let r = requests(&mut s, &headers, 999);
        let (_, e) = feed(&mut s, &answer(r[0].0, &filters, 1, 999, 65_535));
        assert_eq!(e, Err(ScanError::OutOfOrder { height: 1 }));
        // An answer that ends early; the filters are asked again.
        let mut s = Scan::new(vec![b"ours".to_vec()], 0);
        let r = requests(&mut s, &headers, 999);
        let (_, e) = feed(&mut s, &answer(r[0].0, &filters, 0, 3, 65_535));
        assert_eq!(e, Err(ScanError::Short { height: 4 }));
        let again = requests(&mut s, &headers, 999);
        assert_eq!(
            again.iter().map(|x| (x.1, x.2)).collect::<Vec<_>>(),
            [(4, 999)]
        );
    }
}
