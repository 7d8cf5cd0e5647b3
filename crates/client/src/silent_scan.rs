//! A silent-payment receiver's scan of the best chain (BIP352 over BIP157/158), sans-IO:
//! the tweak lists of every block from the receiver's start, taken only where the gateways
//! that serve tweaks agree on them or a block proved them; each block's basic filter
//! (checked against our stored filter headers) asked whether it holds a key a tweak gives
//! the receiver; the blocks it does fetched, checked against our headers, and searched.
//!
//! The chain is scanned in *windows* of up to [`SILENT_WINDOW`] blocks. For a window, the
//! shell reads our block hashes and filter headers from the store; then every gateway that
//! serves tweaks (and is ready, and was not proven wrong) is asked for its tweak headers
//! over the window (`get_tweak_headers`: 32 bytes a block). Each gateway's answer must
//! chain in order, from the header before the window to the header at its end: those two
//! are its *word* there ([`Vouched`]), and a gateway that gives a window a start other
//! than the end it gave the window before broke its word. The windows follow each other,
//! so each gateway tells one tweak chain over the whole scan.
//!
//! Once every such gateway answered (a gateway still connecting is waited for: an honest
//! gateway a moment late must not leave the liar alone), their tweak hashes are compared
//! block by block. The first block where two differ is settled by content
//! ([`TweakDispute`]: the block and what it spends from prove its list); every gateway
//! whose hash there is not the proven one is wrong, and the comparison goes on without it.
//! Where nobody gives the evidence, nothing above that block is scanned ([`SilentEvent::Stalled`]).
//! So with one honest gateway present, no other can leave out, change or add a tweak of a
//! block the scan takes. A lone gateway's word is taken, as its filter headers are.
//!
//! The agreed window is then scanned in chunks of up to [`SILENT_CHUNK`] blocks: their
//! lists from one gateway that gave the agreed hashes (each must hash to it), the filters
//! of the blocks whose lists are not empty, and the blocks whose filter matched. A list,
//! filter or block that breaks a rule is its sender's fault ([`SilentFault`]), and another
//! is asked. Filter false positives (BIP158: one in 784,931 a key) cost a block fetched and
//! searched in vain; a filter that matches its header but does not decode is taken as a
//! match (the block is fetched and searched), never as a miss.
//!
//! A block's filter check (the receiver's first keys for each of its tweaks: a curve
//! multiplication a tweak, the one cost that grows with the chain's use) is done here, or,
//! once [`SilentScan::offload`] is on, handed out as a [`ScanJob`] for the shell to run
//! elsewhere (the tab's extra workers) and answered by [`SilentScan::on_scanned`], in any
//! order. A chunk's blocks are fetched only once every job of it is answered, and its
//! progress moves only then; an answer for a chunk given up (a reorganisation, a list
//! proven wrong) is ignored.
//!
//! Memory is bounded by the window (its 1,001 hashes and filter headers, a span of 1,000
//! tweak hashes a gateway) and the chunk (100 lists: about 2.4 MB at mainnet's density, and
//! never more than [`MAX_CHUNK_BYTES`]: a chunk ends early rather than pass it; a list longer
//! than any block's, [`MAX_LIST_LEN`], is its sender's fault).

use std::collections::VecDeque;

use lightwire_chain::BlockHash;
use lightwire_filter::{filter_hash, filter_header};
use lightwire_primitives::{BlockError, CheckedBlock, FilterHeader, TweakList};
use lightwire_proto::Millis;
use lightwire_wallet::silent::Receiver;
use lightwire_wallet::silent_block::{BlockScanError, BlockScanner, Payment};
use lightwire_wire::filters::MAX_FILTER_LEN;
use lightwire_wire::{AnswerFlags, BlockPiece, FilterPiece, Filters, MAX_BLOCK_LEN};

use crate::filters::FilterAnswer;
use crate::ids::{GatewayId, GivenUp, Ids, TaskId};
use crate::tweak_dispute::{Need, TweakAsk, TweakDispute, TweakFault, TweakOutcome, TweakVerdict};
use crate::tweaks::{Span, SpanBuilder, TweakError, Vouched};

/// Blocks a window: one `get_tweak_headers` a gateway (BIP157's 2,000-header limit holds
/// it), 32 KB of tweak hashes from each.
pub const SILENT_WINDOW: u32 = 1000;
/// Blocks whose tweak lists are held at once (about 24 KB a block on mainnet today).
pub const SILENT_CHUNK: u32 = 100;
/// Tweaks at most in one block's list: a block of 4,000,000 weight units holds at most
/// about 9,000 transactions BIP352 scans (each has an input and a taproot output: some 111
/// virtual bytes at the least), so a longer list is no block's.
pub const MAX_TWEAKS_PER_BLOCK: usize = 10_000;
/// The longest list: its count (3 bytes) and [`MAX_TWEAKS_PER_BLOCK`] tweaks.
pub const MAX_LIST_LEN: usize = 3 + 33 * MAX_TWEAKS_PER_BLOCK;
/// The bytes of lists a chunk holds at most: a chunk whose lists would pass it ends before
/// the block that would (the rest of that answer is let through unread), and the next
/// chunk starts there. Memory stays bounded whatever the gateways commit to.
pub const MAX_CHUNK_BYTES: usize = 8 << 20;
/// A gateway that lacked what was asked (its tweaks or filters not computed that far yet,
/// or our last block not on its chain yet) is asked again after this long.
pub const SILENT_RETRY: core::time::Duration = core::time::Duration::from_secs(2);
/// How long a window's words wait for a gateway that lacks the window before they are
/// compared without it: an honest gateway still computing must not leave a liar alone,
/// and a gateway that never catches up must not stall the scan.
pub const LAG_WAIT: core::time::Duration = core::time::Duration::from_secs(30);
/// Ids a dispute may use before the scan's own counter passes them (a dispute asks a
/// block and its evidence of a few gateways each).
const DISPUTE_IDS: u32 = 1 << 20;

/// What a gateway is asked to serve, for the caller's `serves`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Serves {
    /// Tweak headers, lists and a block's evidence.
    Tweaks,
    /// Basic filters (and its filter headers agree with ours).
    Filters,
    /// Blocks.
    Blocks,
}

/// Where a gateway stands, for the caller's `presence`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Presence {
    /// Connected and ready for requests.
    Ready,
    /// Opening its connection (its answer is waited for before words are compared).
    Coming,
    /// Neither (gone, waiting to reconnect, bad).
    Absent,
}

/// Which range of a chain the scan asks for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Range {
    /// Tweak headers (`get_tweak_headers`).
    TweakHeaders,
    /// Tweak lists (`get_tweaks`).
    Tweaks,
    /// Basic filters (`get_filters`).
    Filters,
}

/// What the scan asks of a gateway.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SilentAsk {
    /// `what` of the heights from `first` to the block `stop`.
    Range {
        /// What.
        what: Range,
        /// The request's id.
        id: u32,
        /// The first height.
        first: u32,
        /// The last block.
        stop: BlockHash,
    },
    /// A block (one its filter matched, or a dispute's), or what a disputed block spends
    /// from: as [`TweakAsk`] (never its `Span`).
    Fetch(TweakAsk),
}

/// How a gateway broke a rule of the scan (it is wrong whatever the chain holds).
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum SilentFault {
    /// Its tweak headers or lists broke the tweak chain's rules.
    #[error(transparent)]
    Tweaks(#[from] TweakError),
    /// It sent pieces of tweak lists out of order.
    #[error("its tweak list pieces for height {height} came out of order")]
    ListsOutOfOrder {
        /// The height due.
        height: u32,
    },
    /// It sent a list longer than any block's ([`MAX_LIST_LEN`]).
    #[error("its tweak list of height {height} is longer than any block's")]
    ListTooLong {
        /// The block's height.
        height: u32,
    },
    /// A tweak of the list it gave (hashing to the agreed hash) is not a point: no block
    /// gives such a tweak.
    #[error("its tweak list of height {height} holds a tweak that is not a point")]
    NotAPoint {
        /// The block's height.
        height: u32,
    },
    /// It sent filter pieces out of order.
    #[error("its filter pieces for height {height} came out of order")]
    FiltersOutOfOrder {
        /// The height due.
        height: u32,
    },
    /// Its filter does not chain to our filter header.
    #[error("its filter of height {height} does not match our filter header")]
    FilterMismatch {
        /// The block's height.
        height: u32,
    },
    /// Its block's pieces came out of order.
    #[error("its block pieces for height {height} came out of order")]
    BlockOutOfOrder {
        /// The block's height.
        height: u32,
    },
    /// Its block is not our header's.
    #[error("the block it sent for height {height} is not ours: {error}")]
    Block {
        /// The block's height.
        height: u32,
        /// How.
        #[source]
        error: BlockError,
    },
    /// It broke a rule while a dispute asked it for a block or its evidence.
    #[error(transparent)]
    Dispute(#[from] TweakFault),
    /// The block and what it spends from prove its tweak list of `height` wrong.
    #[error("the block of height {height} and what it spends from prove its tweak list wrong")]
    Disproven {
        /// The disputed block's height.
        height: u32,
    },
    /// Its answer ended short of what was asked (and did not say the stop block is not on
    /// its chain).
    #[error("its answer ended at height {height}, short of the request")]
    Short {
        /// The height due.
        height: u32,
    },
}

/// What the scan tells its caller.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum SilentEvent {
    /// Gateway `0` broke a rule: it is dropped, and marked bad.
    Bad(GatewayId, SilentFault),
    /// Block `height` pays the receiver: its outputs found.
    Found {
        /// The block's height.
        height: u32,
        /// The block.
        hash: BlockHash,
        /// The outputs that pay the receiver.
        payments: Vec<Payment>,
        /// The receiver's spend public key (what spends them, with each one's tweak).
        spend: [u8; 33],
    },
    /// The gateways' tweak lists of block `height` differ and nobody present gave the
    /// block or what it spends from: nothing from there up is scanned until a gateway
    /// that can prove it is back (or the chain moves).
    Stalled {
        /// The disputed block's height.
        height: u32,
    },
}

/// What a block's filter check gave (see [`scan_filter`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Scanned {
    /// No first key of the receiver's is in the filter.
    Miss,
    /// One may be (or the filter, though it matches its header, does not decode, and so
    /// cannot say no): the block is fetched and searched.
    Match,
    /// A tweak of the list is not a point: the list's fault (every giver's).
    NotAPoint,
}

impl Scanned {
    /// As a number, for the shell's messages: 0, 1, 2.
    pub fn code(self) -> u8 {
        match self {
            Scanned::Miss => 0,
            Scanned::Match => 1,
            Scanned::NotAPoint => 2,
        }
    }

    /// [`Self::code`] read back.
    pub fn from_code(code: u8) -> Option<Scanned> {
        match code {
            0 => Some(Scanned::Miss),
            1 => Some(Scanned::Match),
            2 => Some(Scanned::NotAPoint),
            _ => None,
        }
    }
}

/// A block's filter check handed out by an offloaded scan ([`SilentScan::next_job`]): run
/// [`scan_filter`] on it with the same receiver, and give the answer to
/// [`SilentScan::on_scanned`] with its `tag` and `height`.
#[derive(Clone, Copy, Debug)]
pub struct ScanJob<'a> {
    /// The chunk it is of.
    pub tag: u32,
    /// The block's height.
    pub height: u32,
    /// Its tweak list (checked against the agreed tweak hash), as served.
    pub list: &'a [u8],
    /// Its basic filter (checked against our filter header).
    pub filter: &'a [u8],
    /// Its hash (the filter's key).
    pub hash: BlockHash,
}

/// Whether `filter`, the checked basic filter of block `hash`, may hold a first key of
/// `receiver` for a tweak of `list`, its checked tweak list (a non-empty one): what the
/// scan does for each block, here or in a worker of the shell's.
pub fn scan_filter(
    scanner: &mut BlockScanner,
    receiver: &Receiver,
    list: &[u8],
    filter: &[u8],
    hash: &BlockHash,
) -> Scanned {
    // Lists are checked as they come; one that does not parse here cannot say no.
    let Ok(list) = TweakList::parse(list) else {
        return Scanned::Match;
    };
    match scanner.filter_matches(receiver, &list, filter, &hash.0) {
        Ok(false) => Scanned::Miss,
        // A filter that matches our header but does not decode cannot say "no".
        Ok(true) | Err(BlockScanError::Filter(_)) => Scanned::Match,
        Err(BlockScanError::Silent(_)) => Scanned::NotAPoint,
    }
}

/// A gateway's span of the window, by stage.
enum Asked {
    No,
    Sent(u32, SpanBuilder),
    Got(Span),
    /// It lacks the window: our last block is not on its chain (behind, or another
    /// branch), or its answer ended short (its tweaks not computed that far). No rule
    /// broken: asked again after [`SILENT_RETRY`], waited for up to [`LAG_WAIT`], and
    /// then the window is compared without it.
    Lacking,
    /// It broke a rule on this window: it does not count for it.
    Refused,
}

/// One piece-by-piece list or filter being put together.
#[derive(Default)]
struct Pieces {
    /// The height due and the length its first piece gave.
    len: Option<u32>,
    buf: Vec<u8>,
}

impl Pieces {
    /// A piece of the item of `height` (the one due): the item whole, once it ends.
    fn push(&mut self, p: &FilterPiece<'_>, height: u32) -> Option<Option<()>> {
        if p.height != height || p.filter_len > MAX_FILTER_LEN {
            return None;
        }
        match self.len {
            None if p.offset == 0 => {
                self.len = Some(p.filter_len);
                self.buf.clear();
            }
            Some(len) if len == p.filter_len && p.offset as usize == self.buf.len() => {}
            _ => return None,
        }
        self.buf.extend_from_slice(p.data);
        if !p.ends_filter() {
            return Some(None);
        }
        self.len = None;
        Some(Some(()))
    }
}

/// What the chunk is fetching.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Stage {
    Lists,
    Filters,
    Blocks,
}

/// Blocks of the window scanned together (see the module's documentation).
struct Chunk {
    first: u32,
    last: u32,
    stage: Stage,
    /// The lists taken, back to back, and each one's end in `lists` (by height).
    lists: Vec<u8>,
    ends: Vec<usize>,
    /// The height due in the answer under way.
    due: u32,
    pieces: Pieces,
    /// Matched blocks still to fetch, lowest first.
    matched: VecDeque<u32>,
    /// The request in flight.
    asked: Option<(GatewayId, u32)>,
    /// Who answered `stop_unknown`, `not_found` or broke a rule at this stage.
    tried: Vec<GatewayId>,
    /// The lists' budget ran out: the chunk ends at `last` and the rest of the answer in
    /// flight is let through unread.
    rest_ignored: bool,
    /// Its jobs' tag (see [`ScanJob`]), and the heights of its jobs not answered yet.
    tag: u32,
    out: Vec<u32>,
}

impl Chunk {
    /// How the answer from `g` to the chunk's request stands once its message (of
    /// `flags`) was read up to `due`, of what was asked up to `end`: `Err` its sender's
    /// fault (`fault`, or an answer ended short), `Ok(false)` ended short because the
    /// stop block is not on its chain (no fault); either way the request is over and
    /// another gateway is asked. `Ok(true)`: going, or whole.
    fn answer_stands(
        &mut self,
        g: GatewayId,
        flags: AnswerFlags,
        end: u32,
        fault: Option<SilentFault>,
    ) -> Result<bool, SilentFault> {
        let short = flags.last && self.due <= end;
        let fault = fault
            .or((short && !flags.stop_unknown).then_some(SilentFault::Short { height: self.due }));
        if fault.is_some() || short {
            self.tried.push(g);
            self.asked = None;
            self.pieces = Pieces::default();
        }
        match fault {
            Some(f) => Err(f),
            None => Ok(!short),
        }
    }

    fn list(&self, height: u32) -> Option<&[u8]> {
        let i = height.checked_sub(self.first)? as usize;
        let start = if i == 0 { 0 } else { *self.ends.get(i - 1)? };
        self.lists.get(start..*self.ends.get(i)?)
    }

    /// The heights whose lists hold a tweak (an empty list is the one byte 0).
    fn with_tweaks(&self) -> impl Iterator<Item = u32> + '_ {
        (self.first..=self.last).filter(|&h| self.list(h).is_some_and(|l| l.len() > 1))
    }
}

/// One window of the scan.
struct Window {
    first: u32,
    last: u32,
    /// Our block hashes of `first..=last` and filter headers of `first - 1..=last`, once read.
    hashes: Vec<BlockHash>,
    filter_headers: Vec<FilterHeader>,
    reading: bool,
    spans: Vec<Asked>,
    /// The span every counted gateway gave, and who gave it.
    agreed: Option<(Span, Vec<GatewayId>)>,
    dispute: Option<TweakDispute>,
    stalled: bool,
    chunk: Option<Chunk>,
    /// When the first span was asked, and when what was lacking is asked again.
    opened: Option<Millis>,
    retry_at: Option<Millis>,
    /// [`LAG_WAIT`] ran out: the words are compared without those that lack the window.
    lag_over: bool,
}

impl Window {
    fn hash(&self, height: u32) -> Option<BlockHash> {
        self.hashes
            .get(height.checked_sub(self.first)? as usize)
            .copied()
    }
}

/// A silent-payment receiver's scan (see the module's documentation).
pub struct SilentScan {
    receiver: Receiver,
    from: u32,
    next: u32,
    gateways: usize,
    vouched: Vouched,
    ids: Ids,
    window: Option<Window>,
    scanner: BlockScanner,
    block: Vec<u8>,
    events: VecDeque<SilentEvent>,
    tweaks: u64,
    /// [`MAX_CHUNK_BYTES`] (smaller in tests).
    chunk_bytes: usize,
    /// Gateways a window was compared without (they lacked it past [`LAG_WAIT`]): not
    /// waited for again until one gives a window whole.
    slow: Vec<bool>,
    /// Our block at `next - 1` and the tweak header the scan took there, once it passed
    /// it (saved with the progress), and the `next` last saved.
    reached: Option<(BlockHash, FilterHeader)>,
    saved: u32,
    /// A progress taken from an earlier session: its last block and the tweak header
    /// there, which every gateway's span of the first window (from that block, scanned
    /// again) must pass through, else the scan goes back to its start (`restart`).
    check_word: Option<(u32, FilterHeader)>,
    restart: bool,
    /// Filter checks are handed out ([`Self::offload`]): those not taken yet (tag,
    /// height, and the filter's place in `job_bytes`), and the last chunk's tag.
    offload: bool,
    jobs: VecDeque<(u32, u32, usize, usize)>,
    job_bytes: Vec<u8>,
    tags: u32,
    /// The receiver's look at the mempool ([`crate::silent_mempool`]).
    mempool: crate::silent_mempool::MempoolScanner,
}

/// A scan's progress as saved (see [`SilentScan::save`]): whose, from where, to where.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Progress {
    /// The receiver's [`SilentScan::id`].
    pub id: [u8; 32],
    /// The scan's first block.
    pub from: u32,
    /// The lowest block not scanned.
    pub next: u32,
    /// Our block at `next - 1` when it was saved.
    pub reached: BlockHash,
    /// The tweak header the scan took at `next - 1`: it commits to every list scanned
    /// below, so a gateway of a later session that does not start from it tells another
    /// tweak chain, and what was scanned is scanned again (with that gateway's word beside).
    pub word: FilterHeader,
}

impl Progress {
    /// Saved bytes read back, if they are a progress.
    pub fn read(bytes: &[u8]) -> Option<Progress> {
        let (&[1], rest) = bytes.split_first_chunk::<1>()? else {
            return None;
        };
        if rest.len() != 32 + 4 + 4 + 32 + 32 {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes(rest[i..i + 4].try_into().unwrap_or([0; 4]));
        Some(Progress {
            id: rest[..32].try_into().ok()?,
            from: u32_at(32),
            next: u32_at(36),
            reached: BlockHash(rest[40..72].try_into().ok()?),
            word: FilterHeader(rest[72..].try_into().ok()?),
        })
    }

    fn write(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(105);
        out.push(1);
        out.extend_from_slice(&self.id);
        out.extend_from_slice(&self.from.to_le_bytes());
        out.extend_from_slice(&self.next.to_le_bytes());
        out.extend_from_slice(&self.reached.0);
        out.extend_from_slice(&self.word.0);
        out
    }
}

impl SilentScan {
    /// A scan for `receiver` from block `from`, over `gateways` gateways.
    pub fn new(receiver: Receiver, from: u32, gateways: usize) -> SilentScan {
        SilentScan {
            receiver,
            from,
            next: from,
            gateways,
            vouched: Vouched::new(gateways),
            ids: Ids::new(TaskId::Silent),
            window: None,
            scanner: BlockScanner::new(),
            block: Vec::new(),
            events: VecDeque::new(),
            tweaks: 0,
            chunk_bytes: MAX_CHUNK_BYTES,
            slow: vec![false; gateways],
            reached: None,
            saved: from,
            check_word: None,
            restart: false,
            offload: false,
            jobs: VecDeque::new(),
            job_bytes: Vec::new(),
            tags: 0,
            mempool: Default::default(),
        }
    }

    /// Hand each block's filter check out as a [`ScanJob`] ([`Self::next_job`]) instead of
    /// doing it here; the shell answers each with [`Self::on_scanned`].
    pub fn offload(&mut self, on: bool) {
        self.offload = on;
    }

    /// The next filter check to run, when [`Self::offload`] is on.
    pub fn next_job(&mut self) -> Option<ScanJob<'_>> {
        loop {
            let (tag, height, start, end) = self.jobs.pop_front()?;
            let Some(w) = self.window.as_ref() else {
                continue;
            };
            // Of a chunk given up: nobody waits for it.
            let Some(c) = w.chunk.as_ref().filter(|c| c.tag == tag) else {
                continue;
            };
            let (Some(list), Some(filter), Some(hash)) = (
                c.list(height),
                self.job_bytes.get(start..end),
                w.hash(height),
            ) else {
                continue;
            };
            return Some(ScanJob {
                tag,
                height,
                list,
                filter,
                hash,
            });
        }
    }

    /// The answer to the job `tag`, `height`: one of a chunk given up, or not asked, is
    /// ignored.
    pub fn on_scanned(&mut self, tag: u32, height: u32, result: Scanned) {
        let Some(w) = self.window.as_mut() else {
            return;
        };
        let Some(c) = w.chunk.as_mut().filter(|c| c.tag == tag) else {
            return;
        };
        let Some(i) = c.out.iter().position(|&h| h == height) else {
            return;
        };
        c.out.swap_remove(i);
        let n = c.list(height).and_then(|l| TweakList::parse(l).ok());
        self.tweaks += n.map_or(0, |l| l.len() as u64);
        match result {
            Scanned::Miss => {}
            Scanned::Match => {
                // Fetched lowest first, as when checked here.
                let at = c.matched.partition_point(|&h| h < height);
                c.matched.insert(at, height);
            }
            Scanned::NotAPoint => {
                self.not_a_point(SilentFault::NotAPoint { height });
                return;
            }
        }
        if c.stage == Stage::Blocks && c.out.is_empty() && c.matched.is_empty() {
            self.chunk_done();
        }
    }

    /// Who the scan is for, without the scan key: double SHA-256 of its scan and spend
    /// public keys and its labels (what a saved progress is matched against).
    pub fn id(&self) -> [u8; 32] {
        let mut data = Vec::with_capacity(21 + 66 + 4 * 8);
        data.extend_from_slice(b"lightwire silent scan");
        data.extend_from_slice(&self.receiver.scan_public());
        data.extend_from_slice(&self.receiver.spend_public());
        for m in self.receiver.labels() {
            data.extend_from_slice(&m.to_be_bytes());
        }
        lightwire_primitives::sha256d(&data)
    }

    /// The progress to save, when the scan moved since it was last saved: the receiver's
    /// id, its start, the lowest block not scanned and our block below it.
    pub fn save(&mut self) -> Option<Vec<u8>> {
        let (reached, word) = self.reached?;
        if self.next == self.saved || self.next <= self.from {
            return None;
        }
        self.saved = self.next;
        Some(
            Progress {
                id: self.id(),
                from: self.from,
                next: self.next,
                reached,
                word,
            }
            .write(),
        )
    }

    /// Go on from `saved`, a progress of this receiver's (checked by the caller to be on
    /// our best chain) that covers this scan's start: what it scanned is not scanned again
    /// (what it found is in the wallet) but its last block, whose tweak header every
    /// gateway's span must pass through (see [`Progress::word`]). Whether it was taken.
    pub fn resume(&mut self, saved: &Progress) -> bool {
        let covers = saved.from <= self.from && saved.next > self.from;
        if saved.id != self.id() || !covers || self.next != self.from {
            return false;
        }
        self.next = saved.next - 1;
        self.saved = self.next;
        self.check_word = Some((saved.next - 1, saved.word));
        true
    }

    /// The receiver scanned for.
    pub fn receiver(&self) -> &Receiver {
        &self.receiver
    }

    /// The first block scanned.
    pub fn from(&self) -> u32 {
        self.from
    }

    /// The lowest block not scanned yet (every one below it is).
    pub fn next(&self) -> u32 {
        self.next
    }

    /// Tweaks tested against filters so far.
    pub fn tweaks_scanned(&self) -> u64 {
        self.tweaks
    }

    /// The next thing that happened, if any.
    pub fn poll_event(&mut self) -> Option<SilentEvent> {
        self.events.pop_front()
    }

    /// The heights whose block hashes (`first..=last`) and filter headers (`first -
    /// 1..=last`) the scan needs read from the store next, then [`Self::on_data`]; `top`
    /// is the highest block with a stored filter header on our best chain.
    pub fn need_data(&mut self, top: u32) -> Option<(u32, u32)> {
        if self.window.is_none() && self.next <= top {
            let last = top.min(self.next.saturating_add(SILENT_WINDOW - 1));
            self.window = Some(Window {
                first: self.next,
                last,
                hashes: Vec::new(),
                filter_headers: Vec::new(),
                reading: false,
                spans: (0..self.gateways).map(|_| Asked::No).collect(),
                agreed: None,
                dispute: None,
                stalled: false,
                chunk: None,
                opened: None,
                retry_at: None,
                lag_over: false,
            });
        }
        let w = self.window.as_mut()?;
        if !w.hashes.is_empty() || w.reading {
            return None;
        }
        w.reading = true;
        Some((w.first, w.last))
    }

    /// What [`Self::need_data`] asked for: the block hashes from `first` and the filter
    /// headers from the one before it. A read that does not cover the window (the store
    /// moved meanwhile) is asked again.
    pub fn on_data(&mut self, first: u32, hashes: &[BlockHash], filter_headers: &[FilterHeader]) {
        let Some(w) = self.window.as_mut().filter(|w| w.first == first) else {
            return;
        };
        w.reading = false;
        let len = (w.last - w.first + 1) as usize;
        if hashes.len() != len || filter_headers.len() != len + 1 {
            // The store ended short: the window is made again from what it holds.
            self.window = None;
            return;
        }
        w.hashes = hashes.to_vec();
        w.filter_headers = filter_headers.to_vec();
    }

    /// The next request to send at `now`, if one is due: `presence(g)` and `serves(g,
    /// what)` say what each gateway can be asked now.
    pub fn next_ask(
        &mut self,
        now: Millis,
        presence: impl Fn(GatewayId) -> Presence,
        serves: impl Fn(GatewayId, Serves) -> bool,
    ) -> Option<(GatewayId, SilentAsk)> {
        self.ask(now, &presence, &serves)
    }

    /// [`Self::next_ask`].
    fn ask(
        &mut self,
        now: Millis,
        presence: &dyn Fn(GatewayId) -> Presence,
        serves: &dyn Fn(GatewayId, Serves) -> bool,
    ) -> Option<(GatewayId, SilentAsk)> {
        let ready = |g: GatewayId, what| presence(g) == Presence::Ready && serves(g, what);
        let w = self.window.as_mut()?;
        if w.hashes.is_empty() || w.stalled {
            return None;
        }
        if w.retry_at.is_some_and(|t| t <= now) {
            w.retry_at = None;
            for a in &mut w.spans {
                if matches!(a, Asked::Lacking) {
                    *a = Asked::No;
                }
            }
            if let Some(c) = w.chunk.as_mut() {
                c.tried.clear();
            }
        }
        let lacking = w.spans.iter().any(|a| matches!(a, Asked::Lacking))
            || w.chunk
                .as_ref()
                .is_some_and(|c| !c.tried.is_empty() && c.asked.is_none());
        if lacking && w.retry_at.is_none() {
            w.retry_at = Some(now + SILENT_RETRY);
        }
        let stop = w.hash(w.last)?;
        if w.agreed.is_none() && w.dispute.is_none() {
            let opened = *w.opened.get_or_insert(now);
            // Every gateway that serves tweaks is asked for its span.
            for (i, asked) in w.spans.iter_mut().enumerate() {
                let g = GatewayId(i);
                if matches!(asked, Asked::No) && !self.vouched.is_out(g) && ready(g, Serves::Tweaks)
                {
                    let id = self.ids.next_id();
                    *asked = Asked::Sent(id, SpanBuilder::open(w.first, w.last));
                    let (what, first) = (Range::TweakHeaders, w.first);
                    return Some((
                        g,
                        SilentAsk::Range {
                            what,
                            id,
                            first,
                            stop,
                        },
                    ));
                }
            }
            w.lag_over |= now >= opened + LAG_WAIT;
            let slow = &self.slow;
            let lagging = !w.lag_over
                && w.spans
                    .iter()
                    .enumerate()
                    .any(|(i, a)| matches!(a, Asked::Lacking) && !slow[i]);
            let waiting = w.spans.iter().any(|a| matches!(a, Asked::Sent(..)))
                || lagging
                || (0..self.gateways).any(|g| presence(GatewayId(g)) == Presence::Coming);
            if waiting {
                return None;
            }
            if core::mem::take(&mut self.restart) {
                // Every span is in (none in flight): the window goes, and the scan starts
                // again from its start.
                self.window = None;
                self.next = self.from;
                self.saved = self.from;
                self.reached = None;
                self.check_word = None;
                return None;
            }
            // A gateway compared without, its wait run out, is not waited for again until
            // it gives a window whole (a gateway that never does must not slow every one).
            for (i, a) in w.spans.iter().enumerate() {
                match a {
                    Asked::Lacking => self.slow[i] = true,
                    Asked::Got(_) => self.slow[i] = false,
                    _ => {}
                }
            }
            self.compare();
        }
        let w = self.window.as_mut()?;
        if let Some(d) = w.dispute.as_mut() {
            let all: Vec<GatewayId> = (0..self.gateways).map(GatewayId).collect();
            let can = |g: GatewayId, need: Need| match need {
                Need::Block => ready(g, Serves::Blocks),
                Need::SpentFrom => ready(g, Serves::Tweaks),
            };
            let hashes = &w.hashes;
            let first = w.first;
            let hash_of = |h: u32| hashes.get(h.checked_sub(first)? as usize).copied();
            return match d.next_ask(hash_of, can, &all) {
                // A dispute started over one block asks no span.
                Ok(Some((_, TweakAsk::Span { .. }))) | Ok(None) => None,
                Ok(Some((g, ask))) => Some((g, SilentAsk::Fetch(ask))),
                Err(verdict) => {
                    self.verdict(verdict);
                    None
                }
            };
        }
        let (_, givers) = w.agreed.as_ref()?;
        let givers = givers.clone();
        if w.chunk.is_none() {
            let last = w.last.min(self.next.saturating_add(SILENT_CHUNK - 1));
            w.chunk = Some(Chunk {
                first: self.next,
                last,
                stage: Stage::Lists,
                lists: Vec::new(),
                ends: Vec::new(),
                due: self.next,
                pieces: Pieces::default(),
                matched: VecDeque::new(),
                asked: None,
                tried: Vec::new(),
                rest_ignored: false,
                tag: self.tags,
                out: Vec::new(),
            });
            self.tags = self.tags.wrapping_add(1);
        }
        let first = w.first;
        let c = w.chunk.as_mut()?;
        if c.asked.is_some() {
            return None;
        }
        let hash_of = |h: u32| w.hashes.get(h.checked_sub(first)? as usize).copied();
        let tried = &c.tried;
        let pick = |what: Serves, among: &[GatewayId]| {
            among
                .iter()
                .copied()
                .find(|&g| !tried.contains(&g) && ready(g, what))
        };
        let all: Vec<GatewayId> = (0..self.gateways).map(GatewayId).collect();
        let (g, ask) = match c.stage {
            Stage::Lists => {
                let Some(g) = pick(Serves::Tweaks, &givers) else {
                    // Every gateway that gave the agreed hashes is gone: the window's
                    // hashes are asked again of those present.
                    if givers.iter().all(|&g| presence(g) == Presence::Absent) {
                        w.agreed = None;
                        w.chunk = None;
                        w.opened = None;
                        w.lag_over = false;
                        w.spans.iter_mut().for_each(|a| *a = Asked::No);
                        // At once: nothing else would call again.
                        return self.ask(now, presence, serves);
                    }
                    return None;
                };
                c.lists.clear();
                c.ends.clear();
                c.due = c.first;
                c.pieces = Pieces::default();
                (g, (Range::Tweaks, c.first, hash_of(c.last)?))
            }
            Stage::Filters => {
                let hi = c.with_tweaks().last()?;
                let g = pick(Serves::Filters, &all)?;
                c.pieces = Pieces::default();
                (g, (Range::Filters, c.due, hash_of(hi)?))
            }
            Stage::Blocks => {
                // The jobs handed out answer first: blocks are fetched lowest first.
                if !c.out.is_empty() {
                    return None;
                }
                let hash = hash_of(*c.matched.front()?)?;
                let g = pick(Serves::Blocks, &all)?;
                self.block.clear();
                let id = self.ids.next_id();
                c.asked = Some((g, id));
                return Some((g, SilentAsk::Fetch(TweakAsk::Block { id, hash })));
            }
        };
        let (what, first, stop) = ask;
        let id = self.ids.next_id();
        let ask = SilentAsk::Range {
            what,
            id,
            first,
            stop,
        };
        c.asked = Some((g, id));
        Some((g, ask))
    }

    /// Every span in: the first block where two counted gateways' hashes differ is
    /// disputed; none, and the window's hashes are agreed.
    fn compare(&mut self) {
        let Some(w) = self.window.as_mut() else {
            return;
        };
        let vouched = &self.vouched;
        let givers: Vec<(GatewayId, &Span)> = w
            .spans
            .iter()
            .enumerate()
            .filter_map(|(i, a)| match a {
                Asked::Got(s) if !vouched.is_out(GatewayId(i)) => Some((GatewayId(i), s)),
                _ => None,
            })
            .collect();
        let Some(&(a, ours)) = givers.first() else {
            return;
        };
        for (i, h) in ours.hashes().iter().enumerate() {
            let Some((b, theirs)) = givers
                .iter()
                .find_map(|(g, s)| s.hashes().get(i).filter(|t| *t != h).map(|t| (*g, *t)))
            else {
                continue;
            };
            let height = w.first + i as u32;
            let Some(hash) = w.hash(height) else {
                return;
            };
            let ids = Ids::starting_at(TaskId::Silent, self.ids.seq());
            self.ids = Ids::starting_at(TaskId::Silent, self.ids.seq().wrapping_add(DISPUTE_IDS));
            w.dispute = Some(TweakDispute::at_block(
                height,
                hash,
                (a, *h),
                (b, theirs),
                ids,
            ));
            return;
        }
        let span = ours.clone();
        let who = givers.iter().map(|(g, _)| *g).collect();
        w.agreed = Some((span, who));
    }

    /// A dispute ended.
    fn verdict(&mut self, verdict: TweakVerdict) {
        let Some(w) = self.window.as_mut() else {
            return;
        };
        w.dispute = None;
        match verdict {
            TweakVerdict::Settled { height, wrong, .. } => {
                for g in wrong.into_iter().flatten() {
                    self.vouched.rule_out(g);
                    self.events
                        .push_back(SilentEvent::Bad(g, SilentFault::Disproven { height }));
                }
            }
            TweakVerdict::BrokeItsWord { gateway, error } => {
                self.vouched.rule_out(gateway);
                self.events
                    .push_back(SilentEvent::Bad(gateway, SilentFault::Tweaks(error)));
            }
            TweakVerdict::Unsettled { height } => {
                w.stalled = true;
                self.events.push_back(SilentEvent::Stalled { height });
            }
        }
    }

    /// A dispute's outcome for an input.
    fn outcome(&mut self, o: TweakOutcome) {
        match o {
            TweakOutcome::Going => {}
            TweakOutcome::Bad(g, fault) => {
                self.events.push_back(SilentEvent::Bad(g, fault.into()));
            }
            TweakOutcome::Over(v) => self.verdict(v),
        }
    }

    /// When the scan next has something to do without an answer: ask again what a gateway
    /// lacked, or stop waiting for a gateway that lags.
    pub fn wake_at(&self) -> Option<Millis> {
        // A stalled window waits for the chain to move, not for a time.
        let w = self.window.as_ref().filter(|w| !w.stalled)?;
        let lagging = w.agreed.is_none()
            && !w.lag_over
            && w.spans
                .iter()
                .enumerate()
                .any(|(i, a)| matches!(a, Asked::Lacking) && !self.slow[i]);
        let give_up = w.opened.filter(|_| lagging).map(|t| t + LAG_WAIT);
        lightwire_proto::time::earliest(w.retry_at, give_up)
    }

    /// Whether request `id` to `g` is one of the scan's in flight.
    pub fn is_in_flight(&self, g: GatewayId, id: u32) -> bool {
        self.in_flight().any(|x| x == (g, id))
    }

    /// Every request in flight, as (gateway, id).
    pub fn in_flight(&self) -> impl Iterator<Item = GivenUp> + '_ {
        let w = self.window.as_ref();
        let spans = w.into_iter().flat_map(|w| {
            w.spans.iter().enumerate().filter_map(|(i, a)| match a {
                Asked::Sent(id, _) => Some((GatewayId(i), *id)),
                _ => None,
            })
        });
        let dispute = w
            .and_then(|w| w.dispute.as_ref())
            .into_iter()
            .flat_map(|d| d.in_flight());
        let chunk = w.and_then(|w| w.chunk.as_ref()).and_then(|c| c.asked);
        spans.chain(dispute).chain(chunk)
    }

    /// A `tweak_headers` message from `g`.
    pub fn on_span(&mut self, g: GatewayId, m: &FilterAnswer<'_>) {
        let (id, flags) = (m.id, m.flags);
        let Some(w) = self.window.as_mut() else {
            return;
        };
        let Some(asked) = w.spans.get_mut(g.0) else {
            return;
        };
        let Asked::Sent(sent, builder) = asked else {
            return;
        };
        if *sent != id {
            return;
        }
        // Our last block not on its chain, or an answer in order that ends short of it:
        // it lacks the window (no rule broken).
        let short = flags.last
            && m.first_height == builder.next()
            && m.first_height as u64 + (m.hashes.len() as u64) <= u64::from(w.last);
        if flags.stop_unknown || short {
            *asked = Asked::Lacking;
            return;
        }
        let span = match builder.push(m.first_height, m.before, m.hashes, m.headers, flags.last) {
            Ok(None) => return,
            Ok(Some(span)) => span,
            Err(e) => {
                *asked = Asked::Refused;
                self.events.push_back(SilentEvent::Bad(g, e.into()));
                return;
            }
        };
        // A progress taken from an earlier session: a gateway whose chain does not pass
        // through the header it reached tells another tweak chain below; what was scanned
        // is scanned again, with its word beside the others'.
        if let Some((h, word)) = self.check_word
            && span.header_at(h).is_some_and(|theirs| theirs != word)
        {
            self.restart = true;
        }
        // Its word where the window starts and ends: a start other than the end it gave
        // the window before breaks its word.
        let words = [
            w.first.checked_sub(1).map(|h| (h, span.before())),
            Some((w.last, span.end())),
        ];
        for (h, header) in words.into_iter().flatten() {
            if let Err(e) = self.vouched.vouch(g, h, header) {
                *asked = Asked::Refused;
                self.events.push_back(SilentEvent::Bad(g, e.into()));
                return;
            }
        }
        *asked = Asked::Got(span);
    }

    /// A `tweaks` message from `g`.
    pub fn on_tweaks(&mut self, g: GatewayId, m: &Filters<'_>) {
        let Some(w) = self.window.as_mut() else {
            return;
        };
        let Some((span, _)) = w.agreed.as_ref() else {
            return;
        };
        let Some(c) = w.chunk.as_mut().filter(|c| c.asked == Some((g, m.id))) else {
            return;
        };
        let mut fault = None;
        for p in m.pieces() {
            if c.rest_ignored {
                break;
            }
            if c.due > c.last {
                fault = Some(SilentFault::ListsOutOfOrder { height: p.height });
                break;
            }
            if p.filter_len as usize > MAX_LIST_LEN {
                fault = Some(SilentFault::ListTooLong { height: c.due });
                break;
            }
            match c.pieces.push(&p, c.due) {
                None => {
                    fault = Some(SilentFault::ListsOutOfOrder { height: c.due });
                    break;
                }
                Some(None) => {}
                Some(Some(())) => {
                    let list = &c.pieces.buf;
                    if let Err(e) = span.check_list(c.due, list) {
                        fault = Some(e.into());
                        break;
                    }
                    if c.due > c.first && c.lists.len() + list.len() > self.chunk_bytes {
                        // Over the budget: the chunk ends before this block.
                        c.last = c.due - 1;
                        c.rest_ignored = true;
                        break;
                    }
                    c.lists.extend_from_slice(list);
                    c.ends.push(c.lists.len());
                    c.due += 1;
                }
            }
        }
        let end = c.last;
        match c.answer_stands(g, m.flags, end, fault) {
            Ok(true) => {}
            Ok(false) => return,
            Err(f) => {
                self.events.push_back(SilentEvent::Bad(g, f));
                return;
            }
        }
        // A chunk cut short waits for its answer's last message, which is still ours.
        if c.due > c.last && (!c.rest_ignored || m.flags.last) {
            c.asked = None;
            c.tried.clear();
            c.stage = Stage::Filters;
            // The filters from the first block with a tweak: none, and the chunk is done.
            let with = c.with_tweaks().next();
            match with {
                Some(h) => c.due = h,
                None => self.chunk_done(),
            }
        }
    }

    /// A `filters` message from `g`.
    pub fn on_filters(&mut self, g: GatewayId, m: &Filters<'_>) {
        let Some(hi) = self
            .window
            .as_ref()
            .and_then(|w| w.chunk.as_ref())
            .filter(|c| c.asked == Some((g, m.id)))
            .and_then(|c| c.with_tweaks().last())
        else {
            return;
        };
        let mut fault = None;
        for p in m.pieces() {
            let Some(c) = self.window.as_mut().and_then(|w| w.chunk.as_mut()) else {
                return;
            };
            if c.due > hi {
                fault = Some(SilentFault::FiltersOutOfOrder { height: p.height });
                break;
            }
            let height = c.due;
            match c.pieces.push(&p, height) {
                None => {
                    fault = Some(SilentFault::FiltersOutOfOrder { height });
                    break;
                }
                Some(None) => continue,
                Some(Some(())) => {}
            }
            if let Err(f) = self.filter_taken(height) {
                fault = Some(f);
                break;
            }
        }
        // A tweak that is not a point is the lists' fault (their sender's word, and every
        // giver's), not the filter's: the window's spans are asked again.
        if let Some(f @ SilentFault::NotAPoint { .. }) = fault {
            self.not_a_point(f);
            return;
        }
        let Some(c) = self.window.as_mut().and_then(|w| w.chunk.as_mut()) else {
            return;
        };
        match c.answer_stands(g, m.flags, hi, fault) {
            Ok(true) => {}
            Ok(false) => return,
            Err(f) => {
                self.events.push_back(SilentEvent::Bad(g, f));
                return;
            }
        }
        self.filters_over(hi);
    }

    /// The filter of `height`, the one due, whole in the chunk's piece buffer: checked
    /// against our filter header, then asked about the receiver's keys (here, or handed
    /// out). `Err`: what it broke (or a tweak of its list that is not a point).
    fn filter_taken(&mut self, height: u32) -> Result<(), SilentFault> {
        let Some(w) = self.window.as_mut() else {
            return Ok(());
        };
        let first = w.first;
        let Some(c) = w.chunk.as_mut() else {
            return Ok(());
        };
        let i = (height - first) as usize;
        let (Some(before), Some(ours), Some(hash)) = (
            w.filter_headers.get(i),
            w.filter_headers.get(i + 1),
            w.hashes.get(i),
        ) else {
            return Err(SilentFault::FiltersOutOfOrder { height });
        };
        let filter = &c.pieces.buf;
        if filter_header(&filter_hash(filter), before) != *ours {
            return Err(SilentFault::FilterMismatch { height });
        }
        c.due += 1;
        let list = c.list(height).and_then(|l| TweakList::parse(l).ok());
        let Some(list) = list.filter(|l| !l.is_empty()) else {
            return Ok(());
        };
        if self.offload {
            // The bytes of jobs all taken are not needed again.
            if self.jobs.is_empty() {
                self.job_bytes.clear();
            }
            let start = self.job_bytes.len();
            self.job_bytes.extend_from_slice(filter);
            let end = self.job_bytes.len();
            self.jobs.push_back((c.tag, height, start, end));
            c.out.push(height);
            return Ok(());
        }
        self.tweaks += list.len() as u64;
        let Some(list) = c.list(height) else {
            return Ok(());
        };
        match scan_filter(&mut self.scanner, &self.receiver, list, filter, hash) {
            Scanned::Miss => {}
            Scanned::Match => c.matched.push_back(height),
            Scanned::NotAPoint => return Err(SilentFault::NotAPoint { height }),
        }
        Ok(())
    }

    /// Every filter of the chunk to `hi` taken: its matched blocks are fetched next (once
    /// its checks handed out are answered), or it is done.
    fn filters_over(&mut self, hi: u32) {
        let Some(c) = self.window.as_mut().and_then(|w| w.chunk.as_mut()) else {
            return;
        };
        if c.due > hi {
            c.asked = None;
            c.tried.clear();
            c.stage = Stage::Blocks;
            if c.matched.is_empty() && c.out.is_empty() {
                self.chunk_done();
            }
        }
    }

    /// Filters another reader of the same blocks took and checked against the same filter
    /// headers (the wallet's scan, following the tip: `kept`, by height and block hash):
    /// those the chunk is due to ask for are taken from it instead, checked again here, so
    /// that a block's filter comes once. Only between requests (an answer in flight is its
    /// gateway's to finish). Returns whether it took any.
    pub fn take_kept<'k>(&mut self, kept: &dyn Fn(u32, &BlockHash) -> Option<&'k [u8]>) -> bool {
        let mut took = false;
        loop {
            let Some(w) = self.window.as_mut() else {
                return took;
            };
            let Some(hash_at) = w
                .chunk
                .as_ref()
                .filter(|c| c.stage == Stage::Filters && c.asked.is_none())
                .map(|c| c.due)
                .and_then(|h| w.hash(h).map(|x| (h, x)))
            else {
                return took;
            };
            let Some(c) = w.chunk.as_mut() else {
                return took;
            };
            let Some(hi) = c.with_tweaks().last() else {
                return took;
            };
            if c.due > hi {
                return took;
            }
            let (height, hash) = hash_at;
            let Some(filter) = kept(height, &hash) else {
                return took;
            };
            c.pieces.len = None;
            c.pieces.buf.clear();
            c.pieces.buf.extend_from_slice(filter);
            match self.filter_taken(height) {
                Ok(()) => self.filters_over(hi),
                Err(f @ SilentFault::NotAPoint { .. }) => {
                    self.not_a_point(f);
                    return true;
                }
                // Not ours after all (kept under another header): the gateways are asked.
                Err(_) => return took,
            }
            took = true;
        }
    }

    /// A list taken vouched for a tweak that is not a point: every gateway that gave the
    /// window's hashes vouched for it, and each is wrong (BIP352 gives points only).
    fn not_a_point(&mut self, fault: SilentFault) {
        let Some(w) = self.window.as_mut() else {
            return;
        };
        if let Some((_, givers)) = w.agreed.take() {
            for g in givers {
                self.vouched.rule_out(g);
                self.events.push_back(SilentEvent::Bad(g, fault));
            }
        }
        w.chunk = None;
    }

    /// A `block` message from `g` (the dispute's or a matched block's).
    pub fn on_block(&mut self, g: GatewayId, p: &BlockPiece<'_>) {
        let Some(w) = self.window.as_mut() else {
            return;
        };
        if let Some(d) = w
            .dispute
            .as_mut()
            .filter(|d| d.in_flight().any(|x| x == (g, p.id)))
        {
            let o = d.on_block(g, p);
            self.outcome(o);
            return;
        }
        let first = w.first;
        let Some(c) = w.chunk.as_mut().filter(|c| c.asked == Some((g, p.id))) else {
            return;
        };
        let Some(&height) = c.matched.front() else {
            return;
        };
        if p.not_found {
            c.tried.push(g);
            c.asked = None;
            return;
        }
        if p.block_len > MAX_BLOCK_LEN || p.offset as usize != self.block.len() {
            c.tried.push(g);
            c.asked = None;
            let f = SilentFault::BlockOutOfOrder { height };
            self.events.push_back(SilentEvent::Bad(g, f));
            return;
        }
        self.block.extend_from_slice(p.data);
        if !p.last {
            return;
        }
        c.asked = None;
        let Some(hash) = w.hashes.get((height - first) as usize).copied() else {
            return;
        };
        let block = match CheckedBlock::check(&self.block, &hash) {
            Ok(b) => b,
            Err(error) => {
                c.tried.push(g);
                let f = SilentFault::Block { height, error };
                self.events.push_back(SilentEvent::Bad(g, f));
                return;
            }
        };
        c.matched.pop_front();
        c.tried.clear();
        let list = c.list(height).and_then(|l| TweakList::parse(l).ok());
        let mut payments = Vec::new();
        if let Some(list) = list {
            // Searched twice when the first search finds nothing (a filter's false positive,
            // rare): a JavaScript engine has been seen to compute wrong curve values now
            // and then, and one here would hide the payment the filter matched.
            for _ in 0..2 {
                // The keys were checked when the filter was asked: they load again.
                let loaded = self.scanner.load(&self.receiver, &list);
                if loaded.is_ok() {
                    // A transaction that does not parse is not in a checked block.
                    let _ = self.scanner.payments(&self.receiver, &block, &mut payments);
                }
                if !payments.is_empty() {
                    break;
                }
            }
        }
        if !payments.is_empty() {
            self.events.push_back(SilentEvent::Found {
                height,
                hash,
                payments,
                spend: self.receiver.spend_public(),
            });
        }
        if c.matched.is_empty() {
            self.chunk_done();
        }
    }

    /// A `spent_from` message from `g` (a dispute's).
    pub fn on_spent_from(&mut self, g: GatewayId, p: &BlockPiece<'_>) {
        let Some(d) = self
            .window
            .as_mut()
            .and_then(|w| w.dispute.as_mut())
            .filter(|d| d.in_flight().any(|x| x == (g, p.id)))
        else {
            return;
        };
        let o = d.on_spent_from(g, p);
        self.outcome(o);
    }

    /// The chunk is scanned: the next one (or window) follows.
    fn chunk_done(&mut self) {
        let Some(w) = self.window.as_mut() else {
            return;
        };
        let Some(c) = w.chunk.take() else {
            return;
        };
        self.next = c.last + 1;
        let word = w.agreed.as_ref().and_then(|(s, _)| s.header_at(c.last));
        self.reached = w.hash(c.last).zip(word);
        self.check_word = None;
        if self.next > w.last {
            self.window = None;
            // The words below the window just left are no longer compared.
            self.vouched.forget_below(self.next.saturating_sub(1));
        }
    }

    /// Gateway `g` is gone: what was asked of it is asked of another. Returns nothing to
    /// give up (its connection is gone).
    pub fn gateway_gone(&mut self, g: GatewayId) {
        self.vouched.forget(g);
        let Some(w) = self.window.as_mut() else {
            return;
        };
        if let Some(a) = w.spans.get_mut(g.0)
            && w.agreed.is_none()
        {
            *a = Asked::No;
        }
        if let Some(d) = w.dispute.as_mut()
            && let Some(v) = d.gateway_gone(g)
        {
            self.verdict(v);
            return;
        }
        if let Some(c) = w.chunk.as_mut()
            && c.asked.is_some_and(|(from, _)| from == g)
        {
            c.asked = None;
            c.tried.push(g);
        }
    }

    /// Gateway `g` broke a rule elsewhere and is dropped as bad: it counts no more.
    pub fn rule_out(&mut self, g: GatewayId) {
        self.vouched.rule_out(g);
        self.gateway_gone(g);
    }

    /// A new tip came: gateways that had not our blocks, or a dispute nobody could settle,
    /// are asked again.
    pub fn unblock(&mut self) {
        let Some(w) = self.window.as_mut() else {
            return;
        };
        for a in &mut w.spans {
            if matches!(a, Asked::Lacking) {
                *a = Asked::No;
            }
        }
        w.retry_at = None;
        if w.stalled {
            w.stalled = false;
            w.dispute = None;
        }
        if let Some(c) = w.chunk.as_mut() {
            c.tried.clear();
        }
    }

    /// Our best chain left its blocks above `fork`: what the scan stood on above it is
    /// asked again. Returns the requests in flight, to give up.
    pub fn reorg(&mut self, fork: u32) -> Vec<GivenUp> {
        self.vouched.reorg(fork);
        if self.next > fork + 1 {
            // Saved again once the scan passes the fork on the new branch.
            self.reached = None;
        }
        let above = self.window.as_ref().is_some_and(|w| w.last > fork);
        let given_up = if above {
            let g = self.in_flight().collect();
            self.window = None;
            g
        } else {
            Vec::new()
        };
        self.next = self.next.min(fork + 1).max(self.from);
        given_up
    }
}

/// What the engine asks of a receiver's scan, as a trait object: the engine holds a
/// `Box<dyn Scanning>`, made only where the application starts a receiver, so that a build
/// that never starts one (the package's default wasm, without the `silent-payments`
/// feature) links none of the scan, its curve arithmetic or its dispute: only these
/// entries, and the engine's handling of what they return. [`SilentScan`]'s methods of
/// the same names, one for one.
pub trait Scanning {
    /// [`SilentScan::from`].
    fn from(&self) -> u32;
    /// [`SilentScan::next`].
    fn next(&self) -> u32;
    /// [`SilentScan::tweaks_scanned`].
    fn tweaks_scanned(&self) -> u64;
    /// [`SilentScan::poll_event`].
    fn poll_event(&mut self) -> Option<SilentEvent>;
    /// [`SilentScan::need_data`].
    fn need_data(&mut self, top: u32) -> Option<(u32, u32)>;
    /// [`SilentScan::on_data`].
    fn on_data(&mut self, first: u32, hashes: &[BlockHash], filter_headers: &[FilterHeader]);
    /// [`SilentScan::wake_at`].
    fn wake_at(&self) -> Option<Millis>;
    /// [`SilentScan::next_ask`].
    fn next_ask(
        &mut self,
        now: Millis,
        presence: &dyn Fn(GatewayId) -> Presence,
        serves: &dyn Fn(GatewayId, Serves) -> bool,
    ) -> Option<(GatewayId, SilentAsk)>;
    /// [`SilentScan::is_in_flight`].
    fn is_in_flight(&self, g: GatewayId, id: u32) -> bool;
    /// [`SilentScan::in_flight`], appended to `out`.
    fn in_flight_into(&self, out: &mut Vec<GivenUp>);
    /// Whether a request is in flight.
    fn waiting(&self) -> bool;
    /// [`SilentScan::on_span`].
    fn on_span(&mut self, g: GatewayId, m: &FilterAnswer<'_>);
    /// [`SilentScan::on_tweaks`].
    fn on_tweaks(&mut self, g: GatewayId, m: &Filters<'_>);
    /// [`SilentScan::on_filters`].
    fn on_filters(&mut self, g: GatewayId, m: &Filters<'_>);
    /// [`SilentScan::on_block`].
    fn on_block(&mut self, g: GatewayId, p: &BlockPiece<'_>);
    /// [`SilentScan::on_spent_from`].
    fn on_spent_from(&mut self, g: GatewayId, p: &BlockPiece<'_>);
    /// [`SilentScan::gateway_gone`].
    fn gateway_gone(&mut self, g: GatewayId);
    /// [`SilentScan::unblock`].
    fn unblock(&mut self);
    /// [`SilentScan::reorg`].
    fn reorg(&mut self, fork: u32) -> Vec<GivenUp>;
    /// [`SilentScan::save`].
    fn save(&mut self) -> Option<Vec<u8>>;
    /// [`SilentScan::resume`].
    fn resume(&mut self, saved: &Progress) -> bool;
    /// [`SilentScan::offload`].
    fn offload(&mut self, on: bool);
    /// [`SilentScan::next_job`].
    fn next_job(&mut self) -> Option<ScanJob<'_>>;
    /// [`SilentScan::on_scanned`].
    fn on_scanned(&mut self, tag: u32, height: u32, result: Scanned);
    /// [`SilentScan::take_kept`].
    fn take_kept<'k>(&mut self, kept: &dyn Fn(u32, &BlockHash) -> Option<&'k [u8]>) -> bool;
    /// [`crate::silent_mempool::MempoolScanner::matches`], for this scan's receiver.
    fn mempool_matches(
        &mut self,
        salt: &[u8; 16],
        entries: &[(&[u8; 33], &[u8])],
        out: &mut Vec<crate::silent_mempool::MempoolCheck>,
    );
    /// [`crate::silent_mempool::MempoolScanner::payments`], for this scan's receiver.
    fn mempool_payments(
        &mut self,
        tweak: &[u8; 33],
        tx: &lightwire_primitives::Tx<'_>,
        out: &mut Vec<Payment>,
    );
    /// The receiver's spend public key.
    fn spend_key(&self) -> [u8; 33];
}

impl Scanning for SilentScan {
    fn from(&self) -> u32 {
        SilentScan::from(self)
    }
    fn mempool_matches(
        &mut self,
        salt: &[u8; 16],
        entries: &[(&[u8; 33], &[u8])],
        out: &mut Vec<crate::silent_mempool::MempoolCheck>,
    ) {
        self.mempool.matches(&self.receiver, salt, entries, out)
    }
    fn mempool_payments(
        &mut self,
        tweak: &[u8; 33],
        tx: &lightwire_primitives::Tx<'_>,
        out: &mut Vec<Payment>,
    ) {
        self.mempool.payments(&self.receiver, tweak, tx, out)
    }
    fn spend_key(&self) -> [u8; 33] {
        self.receiver.spend_public()
    }
    fn next(&self) -> u32 {
        SilentScan::next(self)
    }
    fn tweaks_scanned(&self) -> u64 {
        SilentScan::tweaks_scanned(self)
    }
    fn poll_event(&mut self) -> Option<SilentEvent> {
        SilentScan::poll_event(self)
    }
    fn need_data(&mut self, top: u32) -> Option<(u32, u32)> {
        SilentScan::need_data(self, top)
    }
    fn on_data(&mut self, first: u32, hashes: &[BlockHash], filter_headers: &[FilterHeader]) {
        SilentScan::on_data(self, first, hashes, filter_headers)
    }
    fn wake_at(&self) -> Option<Millis> {
        SilentScan::wake_at(self)
    }
    fn next_ask(
        &mut self,
        now: Millis,
        presence: &dyn Fn(GatewayId) -> Presence,
        serves: &dyn Fn(GatewayId, Serves) -> bool,
    ) -> Option<(GatewayId, SilentAsk)> {
        SilentScan::next_ask(self, now, presence, serves)
    }
    fn is_in_flight(&self, g: GatewayId, id: u32) -> bool {
        SilentScan::is_in_flight(self, g, id)
    }
    fn in_flight_into(&self, out: &mut Vec<GivenUp>) {
        out.extend(self.in_flight());
    }
    fn waiting(&self) -> bool {
        self.in_flight().next().is_some()
    }
    fn on_span(&mut self, g: GatewayId, m: &FilterAnswer<'_>) {
        SilentScan::on_span(self, g, m)
    }
    fn on_tweaks(&mut self, g: GatewayId, m: &Filters<'_>) {
        SilentScan::on_tweaks(self, g, m)
    }
    fn on_filters(&mut self, g: GatewayId, m: &Filters<'_>) {
        SilentScan::on_filters(self, g, m)
    }
    fn on_block(&mut self, g: GatewayId, p: &BlockPiece<'_>) {
        SilentScan::on_block(self, g, p)
    }
    fn on_spent_from(&mut self, g: GatewayId, p: &BlockPiece<'_>) {
        SilentScan::on_spent_from(self, g, p)
    }
    fn gateway_gone(&mut self, g: GatewayId) {
        SilentScan::gateway_gone(self, g)
    }
    fn unblock(&mut self) {
        SilentScan::unblock(self)
    }
    fn reorg(&mut self, fork: u32) -> Vec<GivenUp> {
        SilentScan::reorg(self, fork)
    }
    fn save(&mut self) -> Option<Vec<u8>> {
        SilentScan::save(self)
    }
    fn resume(&mut self, saved: &Progress) -> bool {
        SilentScan::resume(self, saved)
    }
    fn offload(&mut self, on: bool) {
        SilentScan::offload(self, on)
    }
    fn next_job(&mut self) -> Option<ScanJob<'_>> {
        SilentScan::next_job(self)
    }
    fn on_scanned(&mut self, tag: u32, height: u32, result: Scanned) {
        SilentScan::on_scanned(self, tag, height, result)
    }
    fn take_kept<'k>(&mut self, kept: &dyn Fn(u32, &BlockHash) -> Option<&'k [u8]>) -> bool {
        SilentScan::take_kept(self, kept)
    }
}

#[cfg(test)]
mod tests;
