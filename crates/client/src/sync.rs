//! Header sync, sans-IO: what to ask a gateway for, validation of what it sends, and the
//! gathering of validated headers into store commits. The engine moves the requests and
//! answers through a `lightwire_proto::Initiator` and the commits into a `HeaderStore`.

use crate::ids::{Ids, TaskId};
use lightwire_chain::{
    BlockHash, Chain, ConnectError, Entry, Header, Outcome, Rule, ValidationError, Work,
};
use lightwire_primitives::FilterHeader;
use lightwire_proto::decode_headers;
use lightwire_store::{Batch, Durability, Pending, Tip};

/// Headers asked for per request: the bound on what is in flight from one gateway.
pub const DEFAULT_REQUEST: u32 = 20_000;
/// Headers gathered before a store commit during bulk sync (benches/README.md: 50,000
/// per commit stores the 925,000-header chain fastest within the memory bound).
pub const DEFAULT_COMMIT_EVERY: usize = 50_000;
/// Entries (and filter headers) a gathering buffer holds without the bulk sync's room:
/// a client following the tip gathers a block or a few a commit, and with two buffers of
/// a bulk commit's room (about 10 MB each) it would hold 20 MB it does not use.
pub const FOLLOW_ROOM: usize = 2_016;
/// Period starts kept for the locator's sparse part. Past this, the older half is thinned
/// to every other entry: the oldest grow exponentially sparse, as a locator's steps do, and
/// the list never grows (nor allocates) past its first size however long the chain.
pub const DEEP_MAX: usize = 64;

/// Why the sync with a gateway failed: the gateway is to be disconnected and marked bad
/// (all but [`SyncError::NotYet`], which is neither).
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum SyncError {
    /// It sent a header that fails validation (the error names the height and rule).
    #[error("the gateway sent an invalid header: {0}")]
    Invalid(#[source] ConnectError),
    /// It sent a header whose time is too far ahead of our clock: not yet valid, and not
    /// invalid (our clock may be the slow one). The gateway stays; see [`NotYet`].
    #[error(transparent)]
    NotYet(NotYet),
    /// It answered a request that was not made (or not this one).
    #[error("the gateway answered request {id}, which was not asked")]
    UnexpectedAnswer {
        /// The id it used.
        id: u32,
    },
    /// Its answer holds more headers than were asked for.
    #[error("the gateway sent more than the {asked} headers asked for")]
    TooManyHeaders {
        /// The request's `max_count`.
        asked: u32,
    },
}

/// A header more than two hours ahead of our clock: Bitcoin Core's `time-too-new`
/// (`BLOCK_TIME_FUTURE`), which it neither punishes nor caches as invalid, and before
/// which it accepts the headers of the same message. So here: the headers before it are
/// kept, the rest of the answer (which builds on it) is not read, the tip it leads to is
/// not asked for again until announced again, and it is validated afresh when it comes
/// again.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
#[error(
    "the gateway sent a header not yet valid (time too far ahead): height {height}, time \
     {time}, after {max} (our clock + 2 h); the headers before it are kept"
)]
pub struct NotYet {
    /// The header's height.
    pub height: u32,
    /// Its time.
    pub time: u32,
    /// The latest time taken now.
    pub max: u32,
}

/// What one `headers` message did.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Step {
    /// Headers that extended the best chain (or replaced part of it).
    pub accepted: u32,
    /// Set when the best chain switched branches: the old tip and the fork height.
    pub reorg: Option<(Entry, u32)>,
    /// The answer's parent is below the validation window: the shell must fetch stored
    /// entries ending at this hash and call [`Syncer::on_ancestors`].
    pub need_ancestors: Option<BlockHash>,
    /// The answer ended without reaching the announced target, which is dropped (the
    /// gateway does not have it, or not any more).
    pub target_dropped: bool,
    /// This message brought headers new to us (on the best chain, or a side branch).
    pub progress: bool,
    /// The answer ended having brought nothing new: no progress, whatever tip was
    /// announced meanwhile.
    pub empty_answer: bool,
    /// The answer reached a header not yet valid: what came before it was taken, and the
    /// request and its target are dropped.
    pub not_yet: Option<NotYet>,
    /// The request given up before its answer's last message (with `not_yet`): what still
    /// comes for it is to be ignored.
    pub given_up: Option<u32>,
}

/// The sync state of the best chain.
pub struct Syncer {
    chain: Chain,
    pending: Pending,
    /// The best tip a gateway announced that the chain does not have yet: height, hash
    /// and the chainwork it claimed (hints until its headers are validated).
    target: Option<(u32, BlockHash, Work)>,
    /// Bumped by every announcement that sets the target.
    target_seq: u64,
    /// `target_seq` when the request in flight was made.
    request_seq: u64,
    in_flight: Option<u32>,
    /// The last header received in the answer in flight, stored prefix included.
    answer_last: Option<BlockHash>,
    /// Headers received in the answer in flight.
    answer_len: u32,
    /// The answer in flight brought headers new to us.
    answer_new: bool,
    /// The most work of a side branch seen since the best chain last changed.
    side_best: Work,
    /// The answer's last message needed ancestors: its end is handled in `on_ancestors`.
    last_deferred: bool,
    /// The last header of a full answer that stopped short of the target (on the best
    /// chain or on a branch still short of it): the next locator starts there, so the
    /// gateway continues the branch instead of sending it again.
    continue_from: Option<BlockHash>,
    /// Hashes of the best chain at period starts below the validation window (and, after
    /// a resume, the ones the shell seeded), oldest first, sparser with age (at most
    /// [`DEEP_MAX`]): the locator's sparse part, so that a gateway on a fork deeper than
    /// the window answers from near the fork, not from genesis.
    deep: Vec<(u32, BlockHash)>,
    /// The store's first header (height and hash): genesis, or the checkpoint it started
    /// from. Every locator ends with it.
    base: (u32, BlockHash),
    ids: Ids,
    batch: Vec<Header>,
    /// Headers per request.
    pub request_size: u32,
    /// Headers the request in flight asked for (`request_size`, or a mirror file's).
    asked_size: u32,
    /// Headers per bulk commit.
    pub commit_every: usize,
    /// Headers validated since the start.
    pub validated: u64,
    /// More filter headers are on their way in bulk (a mirror's file being read): with
    /// the headers synced, they are gathered into a bulk commit rather than committed a
    /// file at a time (the engine sets it before each commit is taken).
    pub filters_coming: bool,
}

impl Syncer {
    /// Sync on top of `chain`, resumed from the store whose tip is `stored`.
    pub fn new(chain: Chain, stored: &Tip) -> Syncer {
        let chain_genesis = chain.params().genesis.block_hash();
        Syncer {
            chain,
            pending: Pending::new(stored.height),
            target: None,
            target_seq: 0,
            request_seq: 0,
            in_flight: None,
            answer_last: None,
            answer_len: 0,
            answer_new: false,
            side_best: Work::ZERO,
            last_deferred: false,
            continue_from: None,
            deep: Vec::with_capacity(DEEP_MAX),
            base: (0, chain_genesis),
            ids: Ids::new(TaskId::Headers),
            batch: Vec::with_capacity(lightwire_chain::MAX_BATCH),
            request_size: DEFAULT_REQUEST,
            asked_size: DEFAULT_REQUEST,
            commit_every: DEFAULT_COMMIT_EVERY,
            validated: 0,
            filters_coming: false,
        }
    }

    /// The best chain's tip.
    pub fn tip(&self) -> &Entry {
        self.chain.tip()
    }

    /// The height of block `hash` on the best chain, if it is among the recent headers
    /// held (the validation window).
    pub fn height_on_best(&self, hash: &BlockHash) -> Option<u32> {
        self.chain.window().height_of(hash)
    }

    /// The hash of the best chain's block at `height`, if it is among the recent headers
    /// held (the validation window).
    pub fn hash_on_best(&self, height: u32) -> Option<BlockHash> {
        self.chain.window().get(height).map(|e| e.hash)
    }

    /// The first `n` headers of the answer in flight are on our best chain already and
    /// are not handed over (a mirror's file starts where its range does, which may be
    /// below our tip): they count toward the answer's length all the same.
    pub fn skip_known(&mut self, n: u32) {
        self.answer_len += n;
    }

    /// The height the sync is heading for (the best announced tip), if above ours.
    pub fn target(&self) -> Option<u32> {
        self.target.map(|t| t.0)
    }

    /// A gateway announced its tip, claiming `chainwork`. Returns whether it became the
    /// target: a tip we lack that claims more work than ours and than the current target.
    /// (A claim is only a hint: what counts is the work of the headers that arrive.)
    pub fn on_tip(&mut self, height: u32, header: &Header, chainwork: Work) -> bool {
        let hash = header.block_hash();
        if chainwork <= self.chain.tip().chainwork || self.chain.window().height_of(&hash).is_some()
        {
            return false;
        }
        if self.target.is_none_or(|(_, _, w)| chainwork > w) {
            self.target = Some((height, hash, chainwork));
            self.target_seq += 1;
            return true;
        }
        false
    }

    /// Forget the target (its gateway is gone); announcements set a new one.
    pub fn clear_target(&mut self) {
        self.target = None;
    }

    /// Give up the request in flight (its gateway is gone, or a better tip appeared
    /// elsewhere); returns its id. What still arrives for it is the engine's to ignore: it
    /// keeps the ids given up per gateway, since only that gateway may still answer them.
    pub fn abandon(&mut self) -> Option<u32> {
        let id = self.in_flight.take()?;
        self.last_deferred = false;
        Some(id)
    }

    /// The id of the request in flight.
    pub fn in_flight_id(&self) -> Option<u32> {
        self.in_flight
    }

    /// Whether a request is in flight.
    pub fn in_flight(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Whether nothing is in flight and no announced tip is missing.
    pub fn is_synced(&self) -> bool {
        self.in_flight.is_none() && self.target.is_none()
    }

    /// The next request to send, if one is due: its id, size, and the locator (written
    /// into `locator`, newest first).
    pub fn next_request(&mut self, locator: &mut Vec<BlockHash>) -> Option<(u32, u32)> {
        self.next_request_of(self.request_size, locator)
    }

    /// [`Self::next_request`] for `n` headers (a mirror's file holds a fixed range: its
    /// answer is whole when it brought that many).
    pub fn next_request_of(&mut self, n: u32, locator: &mut Vec<BlockHash>) -> Option<(u32, u32)> {
        if self.in_flight.is_some() || self.target.is_none() {
            return None;
        }
        self.asked_size = n;
        let id = self.ids.next_id();
        self.in_flight = Some(id);
        self.answer_len = 0;
        self.answer_new = false;
        self.answer_last = None;
        self.request_seq = self.target_seq;
        self.locator(locator);
        Some((id, n))
    }

    /// The store starts at `height` with `hash` (a checkpoint start) rather than at genesis:
    /// locators end there, and nothing below it is asked for.
    pub fn set_base(&mut self, height: u32, hash: BlockHash) {
        self.base = (height, hash);
    }

    /// The height of the store's first header (0 unless it started from a checkpoint).
    pub fn base_height(&self) -> u32 {
        self.base.0
    }

    /// Seed the locator's sparse part after a resume: best-chain hashes below the window
    /// (any heights, oldest first), read from the store.
    pub fn seed_locator(&mut self, hashes: &[(u32, BlockHash)]) {
        self.deep.clear();
        for &seed in hashes {
            push_deep(&mut self.deep, seed);
        }
    }

    /// The heights whose hashes [`Self::seed_locator`] wants after a resume at `tip`:
    /// period starts at doubling distances below the window, oldest first.
    pub fn seed_heights(&self, tip: u32, out: &mut Vec<u32>) {
        out.clear();
        let interval = self.chain.params().retarget_interval;
        let top = tip.saturating_sub(lightwire_chain::WINDOW_LEN as u32) / interval;
        let bottom = i64::from(self.base.0 / interval);
        let mut step = 1;
        let mut period = i64::from(top);
        while period > bottom {
            out.push(period as u32 * interval);
            period -= step;
            step *= 2;
        }
        out.reverse();
    }

    /// A block locator: where the last full answer stopped (if it did not reach the
    /// target), then from the validation window the tip, back by one for ten headers,
    /// then by doubling steps; then sparse hashes below the window; then the store's first
    /// header (genesis, or the checkpoint it started from).
    pub fn locator(&self, out: &mut Vec<BlockHash>) {
        out.clear();
        out.extend(self.continue_from);
        let window = self.chain.window();
        let tip = self.chain.tip().height;
        let mut height = i64::from(tip);
        let mut step = 1;
        let mut lowest = tip;
        while height >= 0 {
            let Some(e) = window.get(height as u32) else {
                break;
            };
            out.push(e.hash);
            lowest = e.height;
            if out.len() >= 10 {
                step *= 2;
            }
            height -= step;
        }
        let mut i = self.deep.len();
        let mut stride = 1;
        while i > 0 && out.len() < lightwire_wire::sync::MAX_LOCATOR - 1 {
            i = i.saturating_sub(stride);
            let (h, hash) = self.deep[i];
            if h < lowest {
                out.push(hash);
                stride *= 2;
            }
            if i == 0 {
                break;
            }
        }
        let (_, first) = self.base;
        if out.last() != Some(&first) {
            out.push(first);
        }
    }

    /// Take a `headers` message answering request `id`, validated as of `now`.
    pub fn on_headers(
        &mut self,
        id: u32,
        headers: &[u8],
        last: bool,
        now: u64,
    ) -> Result<Step, SyncError> {
        self.on_headers_hashed(id, headers, None, last, now)
    }

    /// [`Self::on_headers`] with the headers' block hashes, when the connection already
    /// computed them (`hashes[i]` is the hash of the `i`-th header).
    pub fn on_headers_hashed(
        &mut self,
        id: u32,
        headers: &[u8],
        hashes: Option<&[BlockHash]>,
        last: bool,
        now: u64,
    ) -> Result<Step, SyncError> {
        if self.in_flight != Some(id) {
            return Err(SyncError::UnexpectedAnswer { id });
        }
        self.batch.clear();
        self.batch.extend(decode_headers(headers));
        self.answer_len += self.batch.len() as u32;
        if self.answer_len > self.asked_size {
            return Err(SyncError::TooManyHeaders {
                asked: self.asked_size,
            });
        }
        self.answer_last = match hashes {
            Some(hashes) => hashes.last().copied(),
            None => self.batch.last().map(Header::block_hash),
        }
        .or(self.answer_last);
        let (outcome, not_yet) = self.connect_batch(hashes, None, now)?;
        let mut step = self.after(outcome);
        if let Some(n) = not_yet {
            self.end_not_yet(&mut step, n, last);
        } else if step.need_ancestors.is_some() {
            // The batch waits for its ancestors; so does the end of the answer.
            self.last_deferred = last;
        } else if last {
            self.end_answer(&mut step);
        }
        Ok(step)
    }

    /// Connect the batch decoded in `self.batch` (on `ancestors` when its parent is below
    /// the window). A header not yet valid does not cost the ones before it, as in Core:
    /// they are connected alone (the chain took nothing of the whole batch). Returns where
    /// they landed, and the header not yet valid if there was one.
    fn connect_batch(
        &mut self,
        hashes: Option<&[BlockHash]>,
        ancestors: Option<&[Entry]>,
        now: u64,
    ) -> Result<(Outcome, Option<NotYet>), SyncError> {
        let (height, time, max) = match self.connect_once(hashes, ancestors, now) {
            Ok(outcome) => return Ok((outcome, None)),
            Err(ConnectError::Invalid(ValidationError {
                height,
                rule: Rule::TimeTooNew { time, max },
            })) => (height, time, max),
            Err(e) => return Err(SyncError::Invalid(e)),
        };
        // The headers before it passed every rule, the time limit included: the first
        // past it is the one refused.
        let valid = self
            .batch
            .iter()
            .position(|h| h.time > max)
            .unwrap_or(self.batch.len());
        self.batch.truncate(valid);
        let outcome = if valid == 0 {
            Outcome::Known
        } else {
            let hashes = hashes.map(|h| h.get(..valid).unwrap_or_default());
            self.connect_once(hashes, ancestors, now)
                .map_err(SyncError::Invalid)?
        };
        Ok((outcome, Some(NotYet { height, time, max })))
    }

    fn connect_once(
        &mut self,
        hashes: Option<&[BlockHash]>,
        ancestors: Option<&[Entry]>,
        now: u64,
    ) -> Result<Outcome, ConnectError> {
        match (ancestors, hashes) {
            (Some(ancestors), _) => self.chain.connect_branch(ancestors, &self.batch, now),
            (None, Some(hashes)) => self.chain.connect_hashed(&self.batch, hashes, now),
            (None, None) => self.chain.connect(&self.batch, now),
        }
    }

    /// The answer reached a header not yet valid (see [`NotYet`]): the request ends here
    /// (given up unless this was its `last` message) and its target is dropped, without
    /// counting against the gateway (that is the engine's: it sets the tip aside).
    fn end_not_yet(&mut self, step: &mut Step, not_yet: NotYet, last: bool) {
        let id = self.in_flight.take();
        step.given_up = id.filter(|_| !last);
        step.not_yet = Some(not_yet);
        self.last_deferred = false;
        self.continue_from = None;
        self.target = None;
    }

    fn end_answer(&mut self, step: &mut Step) {
        self.in_flight = None;
        let previous = self.continue_from.take();
        if self.target.is_none() {
            return;
        }
        step.empty_answer = !self.answer_new;
        if self.answer_len >= self.asked_size && self.answer_new && self.answer_last != previous {
            // Cut at our limit: go on from its last header.
            self.continue_from = self.answer_last;
        } else if self.answer_len >= self.asked_size && self.request_seq == self.target_seq {
            // A full answer that ends where the last one did, or of headers we already
            // have: no progress. Drop the target rather than ask the same again.
            self.target = None;
            step.target_dropped = true;
        } else if self.request_seq == self.target_seq {
            // The gateway had nothing more after our locator, no newer tip was announced
            // since we asked, and the target is still not ours: it is not on the
            // gateway's best chain (any more), or its claimed work was not there. Wait for
            // the next announcement. (An answer cut short by a reorg comes with a new tip,
            // which keeps the target.)
            self.target = None;
            step.target_dropped = true;
        }
    }

    /// Continue an answer whose parent was below the window, with `ancestors` from the
    /// store (oldest first, ending at that parent), and the same headers again, less any
    /// the store already holds on the best chain (so that the fork is where the chains
    /// really part); then the rest of the answer, which the shell held meanwhile.
    pub fn on_ancestors(
        &mut self,
        ancestors: &[Entry],
        headers: &[u8],
        now: u64,
    ) -> Result<Step, SyncError> {
        self.batch.clear();
        self.batch.extend(decode_headers(headers));
        if self.batch.is_empty() {
            // Every header of the batch was already stored on the best chain.
            let mut step = Step::default();
            if core::mem::take(&mut self.last_deferred) {
                self.end_answer(&mut step);
            }
            return Ok(step);
        }
        let (outcome, not_yet) = self.connect_batch(None, Some(ancestors), now)?;
        let mut step = self.after(outcome);
        let last = core::mem::take(&mut self.last_deferred);
        if let Some(n) = not_yet {
            self.end_not_yet(&mut step, n, last);
        } else if last {
            self.end_answer(&mut step);
        }
        Ok(step)
    }

    fn after(&mut self, outcome: Outcome) -> Step {
        if let Outcome::Reorg { fork_height, .. } = outcome {
            let keep = self.deep.partition_point(|(h, _)| *h <= fork_height);
            self.deep.truncate(keep);
        }
        if let Outcome::NeedAncestors { parent } = outcome {
            // Nothing validated yet: counted when the ancestors come.
            return Step {
                need_ancestors: Some(parent),
                ..Step::default()
            };
        }
        self.validated += self.batch.len() as u64;
        // Progress is headers new to us: the best chain extended or replaced, or a side
        // branch with more work than any seen (a branch sent again is not progress).
        let progress = match outcome {
            Outcome::Extended { .. } | Outcome::Reorg { .. } => {
                self.side_best = Work::ZERO;
                true
            }
            Outcome::Stale { branch_tip, .. } if branch_tip.chainwork > self.side_best => {
                self.side_best = branch_tip.chainwork;
                true
            }
            _ => false,
        };
        let mut step = Step {
            progress,
            ..Step::default()
        };
        self.answer_new |= step.progress;
        // Only an extension or a reorg staged anything (`staged` is otherwise left from
        // an earlier call).
        if matches!(outcome, Outcome::Extended { .. } | Outcome::Reorg { .. }) {
            let interval = self.chain.params().retarget_interval;
            let staged = self.chain.staged();
            for e in staged {
                if e.height % interval == 0 {
                    push_deep(&mut self.deep, (e.height, e.hash));
                }
            }
            // In a bulk sync, sized once for the most a commit can gather (a full commit
            // plus the request that crossed it), so that the buffer never doubles past it:
            // at 160 bytes an entry, doubling from 65,536 to 131,072 would pin 10 MB more
            // wasm memory. Following the tip (a block or a few a commit) it stays small.
            if self.far_from_target() || self.pending.len() + staged.len() > FOLLOW_ROOM {
                self.pending
                    .reserve_for(self.commit_every + self.request_size as usize);
            }
            self.pending.push(&outcome, staged);
            step.accepted = staged.len() as u32;
        }
        if let Outcome::Reorg {
            fork_height,
            old_tip,
        } = outcome
        {
            step.reorg = Some((old_tip, fork_height));
        }
        if let Some((_, hash, _)) = self.target
            && self.chain.window().height_of(&hash).is_some()
        {
            self.target = None;
            self.continue_from = None;
        }
        // An answer that ended without reaching the target leaves it for the next request.
        step
    }

    /// Whether a commit is due: enough gathered for a bulk commit, or the sync caught up.
    pub fn commit_due(&self) -> bool {
        // Filter headers ride along with the header commits while headers come in (they
        // follow the headers), and commit on their own once the headers are in: in bulk
        // while more are coming in bulk.
        // (A bulk commit is a whole `commit_every` of headers: filter headers gathered past
        // it while the headers come do not cut one short, so a store ends at a whole
        // commit's height.)
        let filters_alone = self.uncommitted_filters() >= self.commit_every || !self.filters_coming;
        !self.pending.is_empty()
            && (self.pending.len() >= self.commit_every || (self.is_synced() && filters_alone))
    }

    /// Headers gathered and not committed.
    pub fn uncommitted(&self) -> usize {
        self.pending.len()
    }

    /// Filter headers gathered and not committed.
    pub fn uncommitted_filters(&self) -> usize {
        self.pending.filter_len()
    }

    /// Our filter headers from `height` on were found wrong: those gathered are dropped,
    /// and the stored ones with the next commit.
    pub fn truncate_filters(&mut self, height: u32) {
        self.pending.truncate_filters(height);
    }

    /// Gather validated filter headers from `first_height` on, for the next commit.
    pub fn push_filters(&mut self, first_height: u32, headers: &[FilterHeader]) {
        // Filter headers follow the headers by at most a request: sized once for a
        // commit's worth and a request, as the entries are, in a bulk sync.
        let behind = self.tip().height.saturating_sub(first_height) > FOLLOW_ROOM as u32;
        if self.far_from_target()
            || behind
            || self.pending.filter_len() + headers.len() > FOLLOW_ROOM
        {
            self.pending
                .reserve_filters(self.commit_every + crate::filters::FILTER_REQUEST as usize);
        }
        self.pending.push_filters(first_height, headers);
    }

    /// Whether the headers being fetched end more than [`FOLLOW_ROOM`] above the tip: a
    /// bulk sync, whose buffers take a whole commit's room at once.
    fn far_from_target(&self) -> bool {
        self.target
            .is_some_and(|t| t.0.saturating_sub(self.chain.tip().height) > FOLLOW_ROOM as u32)
    }

    /// Entries the gathering buffer has room for (a bulk sync's commit, or a few while
    /// following the tip).
    pub fn gathering_room(&self) -> usize {
        self.pending.capacity()
    }

    /// Give back the gathering buffer's room above [`FOLLOW_ROOM`] (caught up).
    pub fn shrink_gathering(&mut self) {
        self.pending.shrink(FOLLOW_ROOM);
    }

    /// The gathered commit: `relaxed` during bulk sync, `strict` once caught up.
    pub fn batch(&self) -> Batch<'_> {
        let durability = if self.is_synced() {
            Durability::Strict
        } else {
            Durability::Relaxed
        };
        self.pending.batch(durability)
    }

    /// The store took the commit of [`Self::batch`]; its tip is now `tip`. Only for a shell
    /// that commits without [`Self::take_commit`]: after `take_commit` the gathering has
    /// already moved on, and this would drop what was gathered since.
    pub fn committed(&mut self, tip: &Tip) {
        self.pending.committed(tip);
    }

    /// Move everything gathered into `into` now, due or not (before reading ancestors from
    /// the store, which must hold what was validated). None if nothing is gathered.
    pub fn take_all(&mut self, into: &mut Pending) -> Option<Durability> {
        if self.pending.is_empty() {
            return None;
        }
        let durability = self.batch().durability;
        self.pending.take_into(into);
        Some(durability)
    }

    /// If a commit is due, move it into `into` (a spare [`Pending`] whose buffer is
    /// reused) and return its durability; validation can go on while the shell commits
    /// `into`. Should that commit fail, what was validated meanwhile is void: resume
    /// from the store.
    pub fn take_commit(&mut self, into: &mut Pending) -> Option<Durability> {
        if !self.commit_due() {
            return None;
        }
        self.take_all(into)
    }
}

/// Add the newest period start to the locator's sparse part, first thinning its older
/// half to every other entry when it is full.
fn push_deep(deep: &mut Vec<(u32, BlockHash)>, entry: (u32, BlockHash)) {
    if deep.len() >= DEEP_MAX {
        let older = deep.len() / 2;
        let mut i = 0;
        deep.retain(|_| {
            i += 1;
            i > older || i % 2 == 1
        });
    }
    deep.push(entry);
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use lightwire_chain::REGTEST;
    use lightwire_chain::generate::headers_after;

    use super::*;

    const NOW: u64 = 2_000_000_000;

    fn syncer() -> Syncer {
        let chain = Chain::new(&REGTEST);
        let tip = Tip::from(chain.tip());
        Syncer::new(chain, &tip)
    }

    /// Regtest work of a chain `height` headers long (each header's work is 2).
    fn work(height: u64) -> Work {
        Work(lightwire_chain::U256::from_u64(2 * (height + 1)))
    }

    fn encode(headers: &[Header]) -> Vec<u8> {
        headers.iter().flat_map(|h| h.encode()).collect()
    }

    #[test]
    fn requests_until_the_announced_tip_then_commits() {
        let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 100, 0);
        let mut s = syncer();
        let mut locator = Vec::new();
        assert_eq!(s.next_request(&mut locator), None, "no tip announced yet");
        assert!(s.on_tip(100, &headers[99], work(100)));
        let (id, _) = s.next_request(&mut locator).unwrap();
        assert_eq!(locator, [REGTEST.genesis.block_hash()]);
        assert_eq!(s.next_request(&mut locator), None, "one request in flight");
        assert_eq!(
            s.on_headers(id + 1, &[], true, NOW),
            Err(SyncError::UnexpectedAnswer { id: id + 1 })
        );
        let step = s
            .on_headers(id, &encode(&headers[..60]), false, NOW)
            .unwrap();
        assert_eq!(step.accepted, 60);
        assert!(!s.commit_due(), "not caught up, not enough gathered");
        s.on_headers(id, &encode(&headers[60..]), true, NOW)
            .unwrap();
        assert!(s.is_synced() && s.commit_due());
        let mut spare = Pending::new(0);
        assert_eq!(s.take_commit(&mut spare), Some(Durability::Strict));
        assert_eq!(spare.len(), 100);
        // An invalid header (wrong nBits at height 101) is refused, naming the rule.
        let mut bad = headers_after(&REGTEST, &headers[99], 100, 1, 0);
        bad[0].bits = lightwire_chain::CompactTarget(0x1d00ffff);
        s.on_tip(101, &bad[0], work(101));
        let (id, _) = s
            .next_request(&mut locator)
            .expect("behind the announced tip");
        let Err(SyncError::Invalid(ConnectError::Invalid(e))) =
            s.on_headers(id, &encode(&bad), true, NOW)
        else {
            panic!("the bad header is refused");
        };
        assert_eq!(e.height, 101);
    }

    /// Core's `time-too-new`: the headers of the message before the one too far ahead are
    /// accepted; the rest of the message and of the answer are not, and the tip it led to
    /// is no longer the target.
    #[test]
    fn a_header_not_yet_valid_keeps_the_ones_before_it() {
        let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 30, 0);
        let mut future = headers_after(&REGTEST, &headers[19], 20, 1, 7)[0];
        future.time = (NOW + 3 * 3600) as u32;
        let target = future.bits.to_target().unwrap();
        lightwire_chain::generate::mine(&mut future, &target);
        let mut s = syncer();
        let mut locator = Vec::new();
        assert!(s.on_tip(40, &future, work(40)));
        let (id, _) = s.next_request(&mut locator).unwrap();
        let mut answer = headers[..20].to_vec();
        answer.push(future);
        answer.extend_from_slice(&headers[20..25]);
        let step = s.on_headers(id, &encode(&answer), false, NOW).unwrap();
        assert_eq!(step.accepted, 20);
        assert!(step.progress);
        assert_eq!(
            step.given_up,
            Some(id),
            "the rest of the answer is not read"
        );
        let n = step.not_yet.expect("the header not yet valid");
        assert_eq!((n.height, n.time), (21, future.time));
        assert!(
            n.to_string().contains("not yet valid (time too far ahead)"),
            "{n}"
        );
        assert_eq!(s.tip().height, 20);
        assert_eq!(s.target(), None);
        assert!(s.is_synced() && s.commit_due());
        // The header is not held as invalid: with time, it is taken.
        assert!(s.on_tip(21, &future, work(21)));
        let (id, _) = s.next_request(&mut locator).unwrap();
        let later = NOW + 3 * 3600;
        let step = s.on_headers(id, &encode(&[future]), true, later).unwrap();
        assert_eq!((step.accepted, step.not_yet), (1, None));
        assert_eq!(s.tip().hash, future.block_hash());
    }

    #[test]
    fn an_empty_answer_drops_the_target_unless_a_newer_tip_came() {
        let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 10, 0);
        let mut s = syncer();
        let mut locator = Vec::new();
        s.on_tip(10, &headers[9], work(10));
        let (id, _) = s.next_request(&mut locator).unwrap();
        // The gateway reorged while our request was queued: it announces a new, higher
        // tip, then ends our answer empty. The new target stays.
        let branch = headers_after(&REGTEST, &REGTEST.genesis, 0, 12, 1);
        assert!(s.on_tip(12, &branch[11], work(12)));
        s.on_headers(id, &[], true, NOW).unwrap();
        assert_eq!(s.target(), Some(12));
        let (id, _) = s.next_request(&mut locator).expect("asks again");
        // Nothing after our locator and nothing new announced: the target is dropped.
        s.on_headers(id, &[], true, NOW).unwrap();
        assert_eq!(s.target(), None);
        assert!(s.is_synced());
    }

    #[test]
    fn the_locators_sparse_part_stays_bounded_and_reaches_far_back() {
        let mut deep = Vec::with_capacity(DEEP_MAX);
        // 5,000 period starts (ten million headers): the list stays within its first size.
        for p in 1..=5_000u32 {
            push_deep(&mut deep, (p * 2016, BlockHash([p as u8; 32])));
            assert!(deep.len() <= DEEP_MAX);
            assert_eq!(deep.capacity(), DEEP_MAX, "grew at period {p}");
        }
        let heights: Vec<u32> = deep.iter().map(|(h, _)| *h).collect();
        // Oldest first, the newest kept densely, the oldest reaching near the start.
        assert!(heights.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(*heights.last().unwrap(), 5_000 * 2016);
        assert_eq!(heights[heights.len() - 2], 4_999 * 2016);
        assert!(heights[0] <= 200 * 2016, "{heights:?}");
    }
}
