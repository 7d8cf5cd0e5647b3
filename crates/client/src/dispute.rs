//! Settling a disagreement over filter headers (BIP157's cross-check, as neutrino does it),
//! sans-IO: which gateway's filter is wrong, proven from the block.
//!
//! Gateways are compared with what we hold: each is *probed* for its filter header at our
//! latest one (a filter header commits to every one before it, so one equal header means
//! agreement all the way down). A gateway whose header differs is in *conflict*, and a
//! [`Dispute`] finds out where and who is wrong:
//!
//! 1. its filter checkpoints (every 1,000th header) up to the height where it differs,
//!    compared with ours by bisection (one store read per step), give the 1,000 blocks
//!    where the two chains part;
//! 2. its filter headers over those give the first height `h` where they differ: there,
//!    the two filters of block `h` differ;
//! 3. its filter of `h` (checked against its own header), ours from a gateway that agrees
//!    with us (checked against ours), and block `h` (checked against our header: its hash
//!    and its Merkle root, refusing a mutated tree) are fetched;
//! 4. a filter that lacks an output script of the block (not empty, not `OP_RETURN`:
//!    BIP158 puts every such script in) is wrong, and so is its gateway.
//!
//! Our side needs a *defender*: a gateway present that agrees with our filter headers at
//! the disputed height and hands over our filter. A defender that vouched for that filter
//! header and will not produce the filter is at fault (as is the other gateway, for its
//! own). When no gateway present can defend ours (the one that gave it is gone, or all
//! present are in conflict with it) and the other side's filter is proven against the
//! block, ours gives way: [`Verdict::OursUndefended`], and the chain is synced again from
//! the disputed height. A stored chain nobody will defend does not outrank one a present
//! gateway proves; otherwise one session with one lying gateway would blind the wallet
//! for good.
//!
//! What the block cannot settle: the scripts its inputs spend are in the filter too, but
//! they are not in the block, and an input's script and witness do not fix them (a bare
//! output script can look like any other). Two filters that both hold every output script
//! stay [`Verdict::Undecided`]: ours is kept and the other gateway is not used for filters.
//! Judging by a guessed input script would let a liar with a crafted transaction get an
//! honest gateway marked bad.

use lightwire_chain::BlockHash;
use lightwire_filter::known_items;
use lightwire_filter::{Filter, FilterError, filter_hash, filter_header, first_absent};
use lightwire_primitives::{Block, BlockError, FilterHash, FilterHeader};
use lightwire_wire::filters::{FILTER_CHECKPOINT_INTERVAL, MAX_FILTER_LEN};
use lightwire_wire::{BlockPiece, FilterCheckpoints, Filters, MAX_BLOCK_LEN};

use crate::filters::FilterAnswer;
use crate::ids::{GatewayId, GivenUp, Ids};

/// How a gateway broke a rule while a dispute questioned it (it is marked bad).
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum DisputeError {
    /// Its filter of the disputed block lacks one of the block's output scripts.
    #[error("its filter of block {height} lacks an output script of the block (BIP158)")]
    FilterLacksOutput {
        /// The block's height.
        height: u32,
    },
    /// Its filter does not match its own filter header.
    #[error("its filter of block {height} does not match its own filter header")]
    FilterMismatch {
        /// The block's height.
        height: u32,
    },
    /// Its filter does not decode.
    #[error("its filter of block {height} does not decode: {error}")]
    UndecodableFilter {
        /// The block's height.
        height: u32,
        /// Why.
        #[source]
        error: FilterError,
    },
    /// The block it sent is not the block of our header: another hash, a Merkle root that
    /// is not the header's, a mutated tree, or bytes that are not a block.
    #[error("the block it sent for height {height} does not match our header: {error}")]
    BlockMismatch {
        /// The block's height.
        height: u32,
        /// The rule it breaks.
        #[source]
        error: BlockError,
    },
    /// Its filter headers contradict what it said before (a checkpoint, or the header it
    /// was probed for), or do not start where asked.
    #[error("its filter headers contradict its own answers near height {height}")]
    Contradiction {
        /// Where.
        height: u32,
    },
    /// Its filter checkpoints skip one (they come at every 1,000th height up to the block
    /// asked): the range to compare would be unbounded.
    #[error("its filter checkpoints skip height {height}")]
    MissingCheckpoint {
        /// The first height missing.
        height: u32,
    },
    /// It vouched for its filter header of the disputed block (its answers chain to it)
    /// and then did not hand over the filter.
    #[error(
        "it did not hand over its filter of block {height}, whose filter header it vouched for"
    )]
    WithheldFilter {
        /// The block's height.
        height: u32,
    },
    /// Pieces out of order, or an answer to something not asked.
    #[error("its answer to the cross-check broke the protocol near height {height}")]
    OutOfOrder {
        /// Where.
        height: u32,
    },
}

/// How a dispute ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Verdict {
    /// The other gateway's filter at `height` is wrong (it is marked bad).
    TheirsWrong {
        /// Where the chains part.
        height: u32,
    },
    /// Ours is: the filter headers we hold from `from` on are dropped and synced again
    /// from the gateway that was right; the gateway that gave us the wrong filter, and
    /// every gateway that agreed with it at or above `height`, is marked bad.
    OursWrong {
        /// The block whose filter in our chain lacks an output script.
        height: u32,
        /// Where ours is dropped from: where the two chains' filter headers part, `height`
        /// unless they differ below it only in what no scan reads (what a store started
        /// from a checkpoint commits to below its first block).
        from: u32,
        /// Their filter header before `from` (the same as ours when `from` is above the
        /// first block we hold).
        prev: FilterHeader,
        /// The block at `from`.
        hash: BlockHash,
    },
    /// Nobody present defends ours (see [`Defence`]) and the other gateway's filter at
    /// `height` holds every output script of the block: ours gives way from `height` on, as
    /// for [`Verdict::OursWrong`], with nobody marked bad (who gave ours is not here).
    OursUndefended {
        /// The block whose filters differ (where they part, when every filter a scan
        /// reads is the same).
        height: u32,
        /// Where ours is dropped from (see [`Verdict::OursWrong`]).
        from: u32,
        /// Their filter header before `from`.
        prev: FilterHeader,
        /// The block at `from`.
        hash: BlockHash,
    },
    /// Both filters hold every output script of the block (or the block could not be
    /// had): ours is kept, the other gateway is not used for filters.
    Undecided {
        /// Where the chains part (as far as it was found).
        height: u32,
    },
}

/// A request the dispute wants sent, to `gateway`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Ask {
    /// `get_filter_checkpoints` up to `stop`.
    Checkpoints {
        /// Request id.
        id: u32,
        /// The block at the top.
        stop: BlockHash,
    },
    /// `get_filter_headers` from `start` to `stop`.
    FilterHeaders {
        /// Request id.
        id: u32,
        /// First height.
        start: u32,
        /// The last block.
        stop: BlockHash,
    },
    /// `get_filters` for the one block `stop` at `height`.
    Filter {
        /// Request id.
        id: u32,
        /// Its height.
        height: u32,
        /// The block.
        stop: BlockHash,
    },
    /// `get_block`.
    Block {
        /// Request id.
        id: u32,
        /// The block.
        hash: BlockHash,
    },
}

/// What an answer did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Outcome {
    /// Taken; the dispute goes on.
    Going,
    /// The dispute is over.
    Over(Verdict),
    /// The gateway answering broke a rule: it is marked bad. (When it is the one the
    /// dispute is against, the dispute is over, [`Verdict::TheirsWrong`] if it was settled
    /// by its filter.)
    Bad(GatewayId, DisputeError),
}

/// Who can defend our filter of the disputed block (the engine knows the gateways).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Defence {
    /// This gateway agrees with our filter headers at the disputed height.
    By(GatewayId),
    /// No gateway does yet, but one present has not been compared with ours.
    Awaited,
    /// No gateway present can.
    Nobody,
}

/// Which filter of the disputed block: the other gateway's, or ours.
const THEIRS: usize = 0;
const OURS: usize = 1;

#[derive(Debug)]
enum Stage {
    /// Read the hash of `top` and our filter header there.
    ReadTop,
    /// Its checkpoints up to `top` are asked for.
    Checkpoints {
        stop: BlockHash,
        got: Vec<(u32, FilterHeader)>,
    },
    /// Bisecting: `points` (their headers at checkpoint heights, then at `top`), the last
    /// one known to agree (`lo`) and the first known to differ (`hi`); reading ours at the
    /// middle.
    Bisect {
        points: Vec<(u32, FilterHeader)>,
        lo: Option<usize>,
        hi: usize,
    },
    /// Read hashes and our filter headers over `from..=to` (from the agreeing height, or
    /// the first we hold; or, walking on, from the last height of the stretch before).
    ReadRange { from: u32, to: u32, agreed: bool },
    /// Its filter headers over the stretch are asked for.
    Range(Chunk),
    /// Settling the first block whose filters differ.
    Judge(Box<Judge>),
    /// Fetching its filter of a later block whose filter differs from ours (`chunk.at - 1`),
    /// to be matched beside ours.
    Contest { chunk: Chunk, fetch: Fetch },
    /// Every filter from the first block a scan reads to the top is the same in both
    /// chains: they differ only in what they commit to below our store. Whoever is
    /// defended present keeps its chain.
    Same,
}

/// A stretch of the walk over both chains: block hashes, our filter headers and theirs
/// over `start..start + ours.len()`, and their filter hashes. At most
/// [`FILTER_CHECKPOINT_INTERVAL`] + 1 heights.
#[derive(Debug)]
struct Chunk {
    start: u32,
    /// Our filter header before `start` (unknown at the first block of a store started
    /// from a checkpoint).
    anchor: Option<FilterHeader>,
    ours: Vec<FilterHeader>,
    hashes: Vec<BlockHash>,
    theirs: Vec<FilterHeader>,
    their_hashes: Vec<FilterHash>,
    /// Their filter header before `start` (the answer's first anchor).
    their_before: Option<FilterHeader>,
    /// The next index the walk looks at.
    at: usize,
}

impl Chunk {
    fn new(
        start: u32,
        anchor: Option<FilterHeader>,
        ours: &[FilterHeader],
        hashes: &[BlockHash],
    ) -> Chunk {
        Chunk {
            start,
            anchor,
            ours: ours.to_vec(),
            hashes: hashes.to_vec(),
            theirs: Vec::with_capacity(ours.len()),
            their_hashes: Vec::with_capacity(ours.len()),
            their_before: None,
            at: 0,
        }
    }

    fn ours_before(&self, i: usize) -> Option<FilterHeader> {
        match i.checked_sub(1) {
            Some(p) => self.ours.get(p).copied(),
            None => self.anchor,
        }
    }

    fn theirs_before(&self, i: usize) -> Option<FilterHeader> {
        match i.checked_sub(1) {
            Some(p) => self.theirs.get(p).copied(),
            None => self.their_before,
        }
    }

    /// The next block from `at` on whose filter differs in the two chains: its filter
    /// hash in theirs, linked to our header before it, is not our header there (what
    /// their headers below it commit to does not matter). Not known at a checkpoint
    /// store's first block, whose filter no scan reads: passed over.
    fn next_difference(&mut self) -> Option<usize> {
        while self.at < self.ours.len().min(self.their_hashes.len()) {
            let i = self.at;
            self.at += 1;
            let differs = self
                .ours_before(i)
                .is_some_and(|prev| filter_header(&self.their_hashes[i], &prev) != self.ours[i]);
            if differs {
                return Some(i);
            }
        }
        None
    }

    /// The height of index `i`.
    fn height(&self, i: usize) -> u32 {
        self.start + i as u32
    }

    /// The last height it covers.
    fn end(&self) -> u32 {
        self.start + (self.ours.len() as u32).saturating_sub(1)
    }
}

/// A block whose filter differs in the two chains where the block cannot tell which is
/// wrong (both hold every output script it has; they differ in the scripts its inputs
/// spend, which the block does not show): the other gateway's filter, checked against its
/// chain, for scans to match beside ours, so that whichever chain is right nothing is
/// missed.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Contested {
    /// The block's height.
    pub height: u32,
    /// The block.
    pub hash: BlockHash,
    /// The other gateway's filter of it.
    pub filter: Vec<u8>,
}

/// Contested blocks one dispute hands over at most: past these it ends undecided (each
/// costs a filter from the other gateway, and a liar could make every block differ).
pub const MAX_CONTESTED: usize = 64;

/// Blocks whose filters differ that one dispute judges from the block (a block and two
/// filters each); past these, each is only contested (the other's filter). So a liar
/// cannot hide a provable lie behind one the block cannot show, unless behind this many,
/// and even then nothing is missed: the lie is matched beside ours.
pub const MAX_JUDGED: usize = 8;

/// One side's filter of the disputed block.
#[derive(Debug)]
enum Fetch {
    NotAsked,
    /// Asked of `gateway` with `id`: the bytes so far and the whole length.
    Asked {
        gateway: GatewayId,
        id: u32,
        buf: Vec<u8>,
        len: Option<u32>,
    },
    /// In, checked against its filter header.
    Done(Vec<u8>),
    /// Could not be had (the gateway on our side went, or said it has no such block).
    Failed,
}

#[derive(Debug)]
struct Judge {
    height: u32,
    hash: BlockHash,
    /// Each side's filter header before `height` (theirs, ours): the same, unless the two
    /// chains differ below in what no scan reads.
    prev: [FilterHeader; 2],
    /// Each side's filter header at `height` (theirs, ours).
    expect: [FilterHeader; 2],
    /// Each side's filter (theirs, ours).
    filters: [Fetch; 2],
    /// The block: asked from (gateway, id), what came so far, whether it is whole and
    /// checked, and the gateways that could not give it.
    block_from: Option<GivenUp>,
    block: Vec<u8>,
    block_done: bool,
    tried: Vec<GatewayId>,
    /// Defenders that could not hand over our filter (gone, or withheld it).
    failed_defenders: Vec<GatewayId>,
    /// Nobody present can defend ours.
    undefended: bool,
    /// The stretch it is in, for the walk to go on when the block cannot settle it.
    chunk: Chunk,
}

/// One dispute with one gateway (see the module documentation).
#[derive(Debug)]
pub struct Dispute {
    /// The gateway whose filter-header chain parts from ours.
    pub against: GatewayId,
    top: u32,
    top_theirs: FilterHeader,
    /// The first height our store holds a filter header for.
    base: u32,
    stage: Stage,
    /// The request in flight to `against` (not the judge's, which keeps its own).
    asked: Option<u32>,
    ids: Ids,
    reading: bool,
    /// Where ours would be dropped from were it found wrong: the first height whose filter
    /// header differs, their header before it and the block there. Below it the chains
    /// agree, or differ only in what they commit to below our store.
    drop_from: Option<(u32, FilterHeader, BlockHash)>,
    /// Their filter header at the end of the stretch walked (the next must follow on).
    their_last: Option<FilterHeader>,
    /// The first block whose filters differ, once judged undecided: the walk goes on to
    /// the next, judged too (up to [`MAX_JUDGED`]; then only contested).
    judged: Option<u32>,
    judged_count: usize,
    /// The first judged block where nobody present could defend ours; whether ours was
    /// defended at any; whether a block whose filters differ was left unjudged (past
    /// [`MAX_JUDGED`]). Ours gives way, undefended, only to a chain proven at every block
    /// where the two differ: one judged block alone would let a liar put a harmless
    /// difference before its lie.
    undefended_at: Option<u32>,
    defended: bool,
    unjudged: bool,
    /// The walk has handled every block up to here: where the filters differ, judged or
    /// contested; elsewhere the same (see [`Self::checked_to`]).
    walked_to: Option<u32>,
    /// Contested blocks found, for the engine to take ([`Self::take_contested`]).
    contested: Vec<Contested>,
    contested_count: usize,
}

impl Dispute {
    /// A dispute with `against`, whose filter header at `top` is `theirs` (not ours); our
    /// store holds filter headers from `base` on.
    pub fn new(against: GatewayId, top: u32, theirs: FilterHeader, base: u32, ids: Ids) -> Dispute {
        Dispute {
            against,
            top,
            top_theirs: theirs,
            base,
            stage: Stage::ReadTop,
            asked: None,
            ids,
            reading: false,
            drop_from: None,
            their_last: None,
            judged: None,
            judged_count: 0,
            undefended_at: None,
            defended: false,
            unjudged: false,
            walked_to: None,
            contested: Vec::new(),
            contested_count: 0,
        }
    }

    /// Up to which height every block where the other gateway's filters differ from ours
    /// has been judged or contested: its filters up to there can be checked against ours
    /// (the same, or the one contested), though its headers differ.
    pub fn checked_to(&self) -> Option<u32> {
        self.walked_to
    }

    /// The contested blocks found since last asked (see [`Contested`]).
    pub fn take_contested(&mut self) -> Vec<Contested> {
        core::mem::take(&mut self.contested)
    }

    /// The block being judged, if it is: its height, our filter header there and its
    /// hash (what a defender is asked to agree with).
    pub fn judged(&self) -> Option<(u32, FilterHeader, BlockHash)> {
        match &self.stage {
            Stage::Judge(j) => Some((j.height, j.expect[OURS], j.hash)),
            _ => None,
        }
    }

    /// Where it stands: the height known to differ, or the one being judged.
    pub fn height(&self) -> u32 {
        match &self.stage {
            Stage::Judge(j) => j.height,
            Stage::Contest { chunk, .. } => chunk.height(chunk.at.saturating_sub(1)),
            _ => self.top,
        }
    }

    fn next_id(&mut self) -> u32 {
        self.ids.next_id()
    }

    /// Heights whose block hashes and stored filter headers to read (then
    /// [`Self::on_read`]), once our store holds filter headers up to `stored`.
    pub fn need_read(&mut self, stored: Option<u32>) -> Option<(u32, u32)> {
        if self.reading {
            return None;
        }
        let want = match &self.stage {
            Stage::ReadTop => (self.top, self.top),
            Stage::Bisect { points, lo, hi, .. } => {
                let mid = points[mid(*lo, *hi)].0;
                (mid, mid)
            }
            Stage::ReadRange { from, to, .. } => (*from, *to),
            _ => return None,
        };
        if stored.is_none_or(|s| s < want.1) {
            return None;
        }
        self.reading = true;
        Some(want)
    }

    /// What [`Self::need_read`] asked for: the block hashes and our filter headers of
    /// `from..=to`. Returns the verdict when the read settles it.
    pub fn on_read(&mut self, from: u32, hashes: &[BlockHash], ours: &[FilterHeader]) -> Outcome {
        self.reading = false;
        let n = ours.len();
        // Not what was asked (the store moved under it): given up rather than asked again.
        let unusable = Outcome::Over(Verdict::Undecided { height: self.top });
        if n == 0 || hashes.len() != n {
            return unusable;
        }
        match &mut self.stage {
            Stage::ReadTop => {
                if ours[0] == self.top_theirs {
                    // It agrees with what we hold now (our chain moved): nothing to settle.
                    return Outcome::Over(Verdict::Undecided { height: self.top });
                }
                self.stage = Stage::Checkpoints {
                    stop: hashes[0],
                    got: Vec::new(),
                };
            }
            Stage::Bisect { points, lo, hi } => {
                let m = mid(*lo, *hi);
                if points[m].0 != from {
                    return unusable;
                }
                if ours[0] == points[m].1 {
                    *lo = Some(m);
                } else {
                    *hi = m;
                }
                if *hi - lo.map_or(0, |l| l + 1) == 0 {
                    self.stage = range_stage(points, *lo, *hi, self.base);
                }
            }
            Stage::ReadRange {
                from: f,
                to,
                agreed,
            } => {
                if *f != from || from + n as u32 - 1 != *to {
                    return unusable;
                }
                let (anchor, ours, hashes) = if *agreed {
                    (Some(ours[0]), &ours[1..], &hashes[1..])
                } else if from == 0 {
                    (Some(FilterHeader::ZERO), ours, hashes)
                } else {
                    (None, ours, hashes)
                };
                let start = if *agreed { from + 1 } else { from };
                if ours.is_empty() {
                    return unusable;
                }
                self.stage = Stage::Range(Chunk::new(start, anchor, ours, hashes));
            }
            _ => {}
        }
        Outcome::Going
    }

    /// The next request to send, if one is due: to `against`, or for the judgment to
    /// the defender of ours (`defence`, as the engine sees the gateways now). `Err` when
    /// the dispute is over (a verdict once nobody can defend ours, undecided when no
    /// gateway is left to give the block) or `against` is found wrong by what it already
    /// gave (judged without ours).
    pub fn next_ask(&mut self, defence: Defence) -> Result<Option<(GatewayId, Ask)>, Outcome> {
        let undecided = |d: &Dispute| Outcome::Over(Verdict::Undecided { height: d.height() });
        let against = self.against;
        if let Stage::Same = self.stage {
            return self.same(defence).map_err(Outcome::Over);
        }
        let Stage::Judge(j) = &mut self.stage else {
            return self.ask().map_err(|()| undecided(self));
        };
        let height = j.height;
        let defender = match defence {
            Defence::By(g) if g != against && !j.failed_defenders.contains(&g) => Some(g),
            _ => None,
        };
        j.undefended = matches!(j.filters[OURS], Fetch::NotAsked | Fetch::Failed)
            && defence == Defence::Nobody;
        if j.undefended {
            match self.try_verdict() {
                Outcome::Going if self.judged().is_some_and(|(h, ..)| h == height) => {}
                // Judged without ours: the walk went on (at most once per block).
                Outcome::Going => return self.next_ask(defence),
                done => return Err(done),
            }
        }
        self.ask_judgment(defender).map_err(|()| undecided(self))
    }

    fn ask_judgment(&mut self, ours: Option<GatewayId>) -> Result<Option<(GatewayId, Ask)>, ()> {
        let against = self.against;
        if let Stage::Judge(j) = &mut self.stage {
            let (height, hash) = (j.height, j.hash);
            let mut id = || self.ids.next_id();
            let side = match (&j.filters[THEIRS], &j.filters[OURS], ours) {
                (Fetch::NotAsked, _, _) => Some((THEIRS, against)),
                (_, Fetch::NotAsked | Fetch::Failed, Some(s)) => Some((OURS, s)),
                _ => None,
            };
            if let Some((side, gateway)) = side {
                let id = id();
                j.filters[side] = Fetch::Asked {
                    gateway,
                    id,
                    buf: Vec::new(),
                    len: None,
                };
                let stop = hash;
                return Ok(Some((gateway, Ask::Filter { id, height, stop })));
            }
            if j.block_from.is_none() && !j.block_done {
                // The block from the gateway on our side first, then from the other.
                let from = [ours, Some(against)]
                    .into_iter()
                    .flatten()
                    .find(|g| !j.tried.contains(g))
                    .ok_or(())?;
                let id = id();
                j.block_from = Some((from, id));
                j.block.clear();
                return Ok(Some((from, Ask::Block { id, hash })));
            }
        }
        Ok(None)
    }

    fn ask(&mut self) -> Result<Option<(GatewayId, Ask)>, ()> {
        let against = self.against;
        if self.asked.is_some() {
            return Ok(None);
        }
        let ask = match &self.stage {
            Stage::Checkpoints { stop, .. } => {
                let stop = *stop;
                Ask::Checkpoints {
                    id: self.next_id(),
                    stop,
                }
            }
            Stage::Range(c) => {
                let Some(&stop) = c.hashes.last() else {
                    return Err(());
                };
                let start = c.start;
                Ask::FilterHeaders {
                    id: self.next_id(),
                    start,
                    stop,
                }
            }
            Stage::Contest {
                fetch: Fetch::NotAsked,
                chunk,
            } => {
                let i = chunk.at - 1;
                let (height, stop) = (chunk.height(i), chunk.hashes[i]);
                let id = self.next_id();
                if let Stage::Contest { fetch, .. } = &mut self.stage {
                    *fetch = Fetch::Asked {
                        gateway: against,
                        id,
                        buf: Vec::new(),
                        len: None,
                    };
                }
                Ask::Filter { id, height, stop }
            }
            _ => return Ok(None),
        };
        self.asked = Some(match ask {
            Ask::Checkpoints { id, .. } | Ask::FilterHeaders { id, .. } => id,
            Ask::Filter { id, .. } | Ask::Block { id, .. } => id,
        });
        Ok(Some((against, ask)))
    }

    /// The gateway a request `id` from `gateway` was asked of, if it is this dispute's.
    pub fn is_asked(&self, gateway: GatewayId, id: u32) -> bool {
        if gateway == self.against && self.asked == Some(id) {
            return true;
        }
        match &self.stage {
            Stage::Judge(j) => {
                j.block_from == Some((gateway, id))
                    || j.filters.iter().any(|f| {
                        matches!(f, Fetch::Asked { gateway: g, id: i, .. } if (*g, *i) == (gateway, id))
                    })
            }
            _ => false,
        }
    }

    /// Its filter checkpoints (one message of the answer).
    pub fn on_checkpoints(&mut self, m: &FilterCheckpoints<'_>) -> Outcome {
        let (top, against) = (self.top, self.against);
        let Stage::Checkpoints { got, .. } = &mut self.stage else {
            return Outcome::Bad(against, DisputeError::OutOfOrder { height: top });
        };
        for (height, header) in m.iter() {
            if height > top || got.last().is_some_and(|&(h, _)| h >= height) {
                return Outcome::Bad(against, DisputeError::OutOfOrder { height });
            }
            got.push((height, FilterHeader(*header)));
        }
        if !m.flags.last {
            return Outcome::Going;
        }
        self.asked = None;
        if m.flags.stop_unknown {
            // Our block at `top` is not on its chain (any more): another matter (the
            // headers), not this dispute's.
            return Outcome::Over(Verdict::Undecided { height: top });
        }
        let mut points: Vec<(u32, FilterHeader)> = core::mem::take(got)
            .into_iter()
            .filter(|&(h, _)| h >= self.base && h < top)
            .collect();
        // Every 1,000th height above the first we hold must be there: the bisection then
        // ends with at most 1,000 heights to read and compare. Without this, an answer with
        // none (or with gaps) made us read every filter header between the first we hold
        // and the top, the whole chain, into memory.
        if let Some(height) = missing_checkpoint(&points, self.base, top) {
            return Outcome::Bad(against, DisputeError::MissingCheckpoint { height });
        }
        points.push((top, self.top_theirs));
        let hi = points.len() - 1;
        self.stage = if hi == 0 {
            range_stage(&points, None, 0, self.base)
        } else {
            Stage::Bisect {
                points,
                lo: None,
                hi,
            }
        };
        Outcome::Going
    }

    /// Its filter headers over the stretch asked (one message of the answer).
    pub fn on_filter_headers(&mut self, a: &FilterAnswer<'_>) -> Outcome {
        let (against, top, top_theirs) = (self.against, self.top, self.top_theirs);
        let Stage::Range(c) = &mut self.stage else {
            return Outcome::Bad(against, DisputeError::OutOfOrder { height: top });
        };
        let at = c.start + c.theirs.len() as u32;
        if !a.headers.is_empty() {
            if a.first_height != at
                || c.theirs.len() + a.headers.len() > c.ours.len()
                || a.hashes.len() != a.headers.len()
            {
                return Outcome::Bad(against, DisputeError::OutOfOrder { height: at });
            }
            if c.theirs.is_empty() {
                // Walking on, its chain must follow on from the stretch before; at first,
                // from the height where its checkpoint agreed with ours.
                let expect = self.their_last.or(c.anchor);
                if expect.is_some_and(|x| x != a.before) {
                    return Outcome::Bad(against, DisputeError::Contradiction { height: at });
                }
                c.their_before = Some(a.before);
            }
            c.theirs.extend_from_slice(a.headers);
            c.their_hashes.extend_from_slice(a.hashes);
        }
        if !a.flags.last {
            return Outcome::Going;
        }
        self.asked = None;
        if a.flags.stop_unknown || c.theirs.len() < c.ours.len() {
            return Outcome::Over(Verdict::Undecided { height: at });
        }
        if c.end() == top && c.theirs.last() != Some(&top_theirs) {
            // Not the chain whose header at the top it gave us.
            return Outcome::Bad(against, DisputeError::Contradiction { height: top });
        }
        if self.drop_from.is_none() {
            let Some(i) = (0..c.ours.len()).find(|&i| c.ours[i] != c.theirs[i]) else {
                // It said its header differs at the top, and now that it does not.
                return Outcome::Bad(against, DisputeError::Contradiction { height: top });
            };
            let Some(prev) = c.theirs_before(i) else {
                return Outcome::Bad(against, DisputeError::OutOfOrder { height: at });
            };
            self.drop_from = Some((c.height(i), prev, c.hashes[i]));
            c.at = i;
        }
        let Stage::Range(chunk) = core::mem::replace(&mut self.stage, Stage::Same) else {
            return Outcome::Going;
        };
        self.walk(chunk)
    }

    /// Go on from `chunk.at` to the next block whose filters differ: judged from the block
    /// (the first [`MAX_JUDGED`]; a judgment that cannot settle it goes on here), then
    /// only contested. Past the stretch, on to the next one; at the top, the dispute ends.
    fn walk(&mut self, mut chunk: Chunk) -> Outcome {
        if let Some(i) = chunk.next_difference() {
            let (height, hash) = (chunk.height(i), chunk.hashes[i]);
            self.walked_to = height.checked_sub(1);
            if self.judged_count >= MAX_JUDGED {
                self.unjudged = true;
                if self.contested_count >= MAX_CONTESTED {
                    return Outcome::Over(Verdict::Undecided { height });
                }
                self.stage = Stage::Contest {
                    chunk,
                    fetch: Fetch::NotAsked,
                };
                return Outcome::Going;
            }
            let (Some(theirs), Some(ours)) = (chunk.theirs_before(i), chunk.ours_before(i)) else {
                return Outcome::Over(Verdict::Undecided { height });
            };
            self.stage = Stage::Judge(Box::new(Judge {
                height,
                hash,
                prev: [theirs, ours],
                expect: [chunk.theirs[i], chunk.ours[i]],
                filters: [Fetch::NotAsked, Fetch::NotAsked],
                block_from: None,
                block: Vec::new(),
                block_done: false,
                tried: Vec::new(),
                failed_defenders: Vec::new(),
                undefended: false,
                chunk,
            }));
            return Outcome::Going;
        }
        let end = chunk.end();
        self.walked_to = Some(end);
        if end >= self.top {
            return match (self.judged, self.undefended_at, self.drop_from) {
                (None, ..) => {
                    self.stage = Stage::Same;
                    Outcome::Going
                }
                (Some(_), Some(height), Some((from, prev, hash)))
                    if !self.defended && !self.unjudged =>
                {
                    Outcome::Over(Verdict::OursUndefended {
                        height,
                        from,
                        prev,
                        hash,
                    })
                }
                (Some(height), ..) => Outcome::Over(Verdict::Undecided { height }),
            };
        }
        self.their_last = chunk.theirs.last().copied();
        self.stage = Stage::ReadRange {
            from: end,
            to: end.saturating_add(FILTER_CHECKPOINT_INTERVAL).min(self.top),
            agreed: true,
        };
        Outcome::Going
    }

    /// Every filter a scan reads is the same in both chains: the one a present gateway
    /// defends is kept; with nobody to defend ours, theirs replaces it (else filter sync
    /// could never go on from ours with the gateways present).
    fn same(&self, defence: Defence) -> Result<Option<(GatewayId, Ask)>, Verdict> {
        match (defence, self.drop_from) {
            (Defence::Awaited, _) => Ok(None),
            (Defence::Nobody, Some((from, prev, hash))) => Err(Verdict::OursUndefended {
                height: from,
                from,
                prev,
                hash,
            }),
            _ => Err(Verdict::Undecided { height: self.top }),
        }
    }

    /// A filter for the judgment (one message).
    pub fn on_filters(&mut self, gateway: GatewayId, m: &Filters<'_>) -> Outcome {
        if let Stage::Contest { .. } = self.stage {
            return self.on_contested_filter(gateway, m);
        }
        let Stage::Judge(j) = &mut self.stage else {
            return Outcome::Bad(gateway, DisputeError::OutOfOrder { height: self.top });
        };
        let height = j.height;
        let asked = |f: &Fetch| matches!(f, Fetch::Asked { gateway: g, id, .. } if (*g, *id) == (gateway, m.id));
        let Some(side) = (0..2).find(|&s| asked(&j.filters[s])) else {
            return Outcome::Bad(gateway, DisputeError::OutOfOrder { height });
        };
        let filter = match collect(&mut j.filters[side], height, m) {
            Ok(Some(filter)) => filter,
            Ok(None) => return Outcome::Going,
            Err(e) => {
                // No filter, or not all of it, for a block whose filter header it vouched
                // for (theirs differs from ours there; a defender agrees with ours up to
                // it): not a block it lacks, a filter it withholds. Our side is asked of
                // another defender, if there is one.
                j.filters[side] = Fetch::Failed;
                if side == OURS && e == (DisputeError::WithheldFilter { height }) {
                    j.failed_defenders.push(gateway);
                }
                return Outcome::Bad(gateway, e);
            }
        };
        if filter_header(&filter_hash(&filter), &j.prev[side]) != j.expect[side] {
            return Outcome::Bad(gateway, DisputeError::FilterMismatch { height });
        }
        if let Err(error) = decodes(&filter) {
            return Outcome::Bad(gateway, DisputeError::UndecodableFilter { height, error });
        }
        j.filters[side] = Fetch::Done(filter);
        self.try_verdict()
    }

    /// Its filter of a contested block: checked against its filter hash there (which its
    /// chain up to the top it gave commits to), handed over, and the walk goes on.
    fn on_contested_filter(&mut self, gateway: GatewayId, m: &Filters<'_>) -> Outcome {
        let height = self.height();
        let Stage::Contest { chunk, fetch } = &mut self.stage else {
            return Outcome::Going;
        };
        if gateway != self.against || self.asked != Some(m.id) {
            return Outcome::Bad(gateway, DisputeError::OutOfOrder { height });
        }
        let filter = match collect(fetch, height, m) {
            Ok(Some(filter)) => filter,
            Ok(None) => return Outcome::Going,
            Err(e) => return Outcome::Bad(gateway, e),
        };
        self.asked = None;
        let i = chunk.at - 1;
        if filter_hash(&filter) != chunk.their_hashes[i] {
            return Outcome::Bad(gateway, DisputeError::FilterMismatch { height });
        }
        if let Err(error) = decodes(&filter) {
            return Outcome::Bad(gateway, DisputeError::UndecodableFilter { height, error });
        }
        let hash = chunk.hashes[i];
        self.contested.push(Contested {
            height,
            hash,
            filter,
        });
        self.contested_count += 1;
        let Stage::Contest { chunk, .. } = core::mem::replace(&mut self.stage, Stage::Same) else {
            return Outcome::Going;
        };
        self.walk(chunk)
    }

    /// A piece of the block for the judgment.
    pub fn on_block(&mut self, gateway: GatewayId, p: &BlockPiece<'_>) -> Outcome {
        let Stage::Judge(j) = &mut self.stage else {
            return Outcome::Bad(gateway, DisputeError::OutOfOrder { height: self.top });
        };
        let height = j.height;
        if j.block_from != Some((gateway, p.id)) {
            return Outcome::Bad(gateway, DisputeError::OutOfOrder { height });
        }
        if p.not_found {
            // Not a rule broken (a node may lack it): asked of the other side.
            j.tried.push(gateway);
            j.block_from = None;
            j.block.clear();
            return Outcome::Going;
        }
        if p.block_len > MAX_BLOCK_LEN || p.offset as usize != j.block.len() {
            return Outcome::Bad(gateway, DisputeError::OutOfOrder { height });
        }
        j.block.extend_from_slice(p.data);
        if !p.last {
            return Outcome::Going;
        }
        j.block_from = None;
        if let Err(error) = Block::check(&j.block, &j.hash) {
            j.tried.push(gateway);
            j.block.clear();
            return Outcome::Bad(gateway, DisputeError::BlockMismatch { height, error });
        }
        j.block_done = true;
        self.try_verdict()
    }

    /// Whether some gateway owes the dispute an answer (no allocation: asked on every
    /// input, for the deadline).
    pub fn is_waiting(&self) -> bool {
        self.asked.is_some()
            || matches!(&self.stage, Stage::Judge(j)
                if j.block_from.is_some() || j.filters.iter().any(|f| matches!(f, Fetch::Asked { .. })))
    }

    /// The gateways that owe the dispute an answer (without allocating: asked at every
    /// `poll_timeout` while a dispute is on).
    pub fn asked_gateways(&self) -> impl Iterator<Item = GatewayId> + '_ {
        self.in_flight().map(|(g, _)| g)
    }

    /// Every request in flight, as (gateway, id): when the dispute ends before their
    /// answers come, they are given up, so that the answers are known for what they are
    /// (a defender asked for our filter and the block while the other side's answer ended
    /// the dispute still answers).
    pub fn in_flight(&self) -> impl Iterator<Item = GivenUp> + '_ {
        let judge = match &self.stage {
            Stage::Judge(j) => Some(&**j),
            _ => None,
        };
        let filters = judge.into_iter().flat_map(|j| {
            j.filters.iter().filter_map(|f| match f {
                Fetch::Asked { gateway, id, .. } => Some((*gateway, *id)),
                _ => None,
            })
        });
        self.asked
            .map(|id| (self.against, id))
            .into_iter()
            .chain(judge.and_then(|j| j.block_from))
            .chain(filters)
    }

    /// `gateway` does not serve blocks: the block is asked of the other side.
    pub fn no_block_from(&mut self, gateway: GatewayId) {
        if let Stage::Judge(j) = &mut self.stage {
            if j.block_from.is_some_and(|(g, _)| g == gateway) {
                j.block_from = None;
            }
            j.tried.push(gateway);
        }
    }

    /// A gateway is gone: what it was asked is asked elsewhere (or the dispute ends, when
    /// it is the one disputed).
    pub fn gateway_gone(&mut self, gateway: GatewayId) -> Option<Verdict> {
        if gateway == self.against {
            return Some(Verdict::Undecided {
                height: self.height(),
            });
        }
        if let Stage::Judge(j) = &mut self.stage {
            if j.block_from.is_some_and(|(g, _)| g == gateway) {
                j.block_from = None;
                j.block.clear();
                j.tried.push(gateway);
            }
            if matches!(j.filters[OURS], Fetch::Asked { gateway: g, .. } if g == gateway) {
                j.filters[OURS] = Fetch::Failed;
            }
            if !j.failed_defenders.contains(&gateway) {
                j.failed_defenders.push(gateway);
            }
        }
        None
    }

    /// Whether every fetch of the judgment is in (or given up), and if so the verdict.
    fn try_verdict(&mut self) -> Outcome {
        let Stage::Judge(j) = &self.stage else {
            return Outcome::Going;
        };
        // Ours is in, or nobody present can defend it.
        let ours_settled = match j.filters[OURS] {
            Fetch::Done(_) => true,
            Fetch::Asked { .. } => false,
            Fetch::NotAsked | Fetch::Failed => j.undefended,
        };
        if !matches!(j.filters[THEIRS], Fetch::Done(_)) || !ours_settled || !j.block_done {
            return Outcome::Going;
        }
        let height = j.height;
        let Ok(block) = Block::parse(&j.block) else {
            return Outcome::Over(Verdict::Undecided { height });
        };
        let lacks = |side: usize| match &j.filters[side] {
            Fetch::Done(f) => {
                first_absent(f, &j.hash.0, known_items(&block)).is_ok_and(|a| a.is_some())
            }
            _ => false,
        };
        let (theirs_lack, ours_lack) = (lacks(THEIRS), lacks(OURS));
        // Ours is dropped from where the two chains' headers part (their header before it):
        // the same height, unless they differ below it only in what no scan reads.
        let (from, prev, hash) = self.drop_from.unwrap_or((height, j.prev[THEIRS], j.hash));
        if theirs_lack {
            Outcome::Bad(self.against, DisputeError::FilterLacksOutput { height })
        } else if ours_lack {
            Outcome::Over(Verdict::OursWrong {
                height,
                from,
                prev,
                hash,
            })
        } else {
            // Both hold every output script (they differ in what the block's inputs
            // spend, which the block does not show), or theirs does and nobody present
            // will hand over ours. Theirs is matched beside ours, and the walk goes on to
            // the next block whose filters differ: ours gives way, undefended, only to a
            // chain proven wherever the two differ.
            if matches!(j.filters[OURS], Fetch::Done(_)) {
                self.defended = true;
            } else {
                self.undefended_at = self.undefended_at.or(Some(height));
            }
            let Stage::Judge(j) = core::mem::replace(&mut self.stage, Stage::Same) else {
                return Outcome::Going;
            };
            let Judge {
                hash,
                filters: [theirs, _],
                chunk,
                ..
            } = *j;
            if let Fetch::Done(filter) = theirs {
                self.contested.push(Contested {
                    height,
                    hash,
                    filter,
                });
                self.contested_count += 1;
            }
            self.judged = self.judged.or(Some(height));
            self.judged_count += 1;
            self.walk(chunk)
        }
    }
}

/// One `filters` message of the filter of block `height` asked with `fetch`: the whole
/// filter once the last piece came. A filter cut short (or none) is withheld: filters
/// have no `not_found`, and the gateway vouched for this one by its filter header.
fn collect(
    fetch: &mut Fetch,
    height: u32,
    m: &Filters<'_>,
) -> Result<Option<Vec<u8>>, DisputeError> {
    let Fetch::Asked { buf, len, .. } = fetch else {
        return Err(DisputeError::OutOfOrder { height });
    };
    for p in m.pieces() {
        let fresh = len.is_none();
        if p.height != height
            || p.filter_len > MAX_FILTER_LEN
            || (!fresh && *len != Some(p.filter_len))
            || p.offset as usize != buf.len()
        {
            return Err(DisputeError::OutOfOrder { height });
        }
        *len = Some(p.filter_len);
        buf.extend_from_slice(p.data);
    }
    if !m.flags.last {
        return Ok(None);
    }
    if *len != Some(buf.len() as u32) {
        return Err(DisputeError::WithheldFilter { height });
    }
    Ok(Some(core::mem::take(buf)))
}

/// Whether a filter decodes to the end.
fn decodes(filter: &[u8]) -> Result<(), FilterError> {
    Filter::decode(filter).and_then(|f| f.values().try_for_each(|v| v.map(drop)))
}

/// The first multiple of 1,000 above `base` and below `top` that `points` (ascending,
/// each at or above `base`) lack, if any.
fn missing_checkpoint(points: &[(u32, FilterHeader)], base: u32, top: u32) -> Option<u32> {
    let step = FILTER_CHECKPOINT_INTERVAL;
    let mut want = (base / step).saturating_add(1).saturating_mul(step);
    for &(h, _) in points.iter().filter(|&&(h, _)| h > base) {
        if h != want {
            return Some(want);
        }
        want = want.saturating_add(step);
    }
    (want < top).then_some(want)
}

fn mid(lo: Option<usize>, hi: usize) -> usize {
    let lo = lo.map_or(0, |l| l + 1);
    lo + (hi - lo) / 2
}

/// The range stage after bisection: from the agreeing point (or, when no point agrees,
/// the first height our store holds) to the first differing one: at most 1,000 heights,
/// checkpoints being 1,000 apart.
fn range_stage(points: &[(u32, FilterHeader)], lo: Option<usize>, hi: usize, base: u32) -> Stage {
    let to = points[hi].0;
    match lo {
        Some(l) => Stage::ReadRange {
            from: points[l].0,
            to,
            agreed: true,
        },
        None => Stage::ReadRange {
            from: base,
            to,
            agreed: false,
        },
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use lightwire_wire::AnswerFlags;

    use super::*;
    use crate::ids::TaskId;

    const LAST: AnswerFlags = AnswerFlags {
        last: true,
        stop_unknown: false,
    };

    fn hash(h: u32) -> BlockHash {
        let mut b = [0u8; 32];
        b[..4].copy_from_slice(&h.to_le_bytes());
        BlockHash(b)
    }

    fn filter_hash_of(h: u32, branch: u8) -> FilterHash {
        let mut b = [branch; 32];
        b[..4].copy_from_slice(&h.to_le_bytes());
        FilterHash(b)
    }

    /// Two filter-header chains over 0..=3,500 that part at `fork` (their filter of `fork`
    /// is another), and their filter hashes.
    fn chains(fork: u32) -> (Vec<FilterHeader>, Vec<FilterHeader>, Vec<FilterHash>) {
        let link = |theirs: bool| {
            let mut prev = FilterHeader::ZERO;
            let mut headers = Vec::new();
            let mut hashes = Vec::new();
            for h in 0..=3_500u32 {
                let hash = filter_hash_of(h, u8::from(theirs && h == fork));
                prev = filter_header(&hash, &prev);
                headers.push(prev);
                hashes.push(hash);
            }
            (headers, hashes)
        };
        let (ours, _) = link(false);
        let (theirs, hashes) = link(true);
        (ours, theirs, hashes)
    }

    /// Read what the dispute asks from `ours`.
    fn serve_read(d: &mut Dispute, ours: &[FilterHeader]) -> Outcome {
        let (from, to) = d.need_read(Some(3_500)).expect("a read");
        let hashes: Vec<BlockHash> = (from..=to).map(hash).collect();
        d.on_read(from, &hashes, &ours[from as usize..=to as usize])
    }

    fn checkpoints<'a>(id: u32, flat: &'a [u8]) -> FilterCheckpoints<'a> {
        FilterCheckpoints {
            id,
            first_height: 1_000,
            flags: LAST,
            headers: flat,
        }
    }

    /// Bring a dispute against gateway 1 (parting at `fork`) to its judgment of `fork`.
    fn to_judgment(fork: u32) -> (Dispute, Vec<FilterHeader>, Vec<FilterHeader>) {
        let (ours, theirs, th) = chains(fork);
        let mut d = Dispute::new(
            GatewayId(1),
            3_500,
            theirs[3_500],
            0,
            Ids::new(TaskId::Check),
        );
        assert_eq!(d.need_read(Some(3_000)), None, "not stored yet");
        assert_eq!(serve_read(&mut d, &ours), Outcome::Going);
        let Ok(Some((GatewayId(1), Ask::Checkpoints { id, stop }))) = d.next_ask(Defence::Awaited)
        else {
            panic!("checkpoints");
        };
        assert_eq!(stop, hash(3_500));
        assert_eq!(d.next_ask(Defence::Awaited), Ok(None), "one at a time");
        let flat: Vec<u8> = [1_000, 2_000, 3_000]
            .iter()
            .flat_map(|&h| theirs[h].0)
            .collect();
        assert_eq!(d.on_checkpoints(&checkpoints(id, &flat)), Outcome::Going);
        // Bisection: reads of ours at checkpoints until the two around the fork.
        let mut reads = 0;
        while let Some((from, to)) = d.need_read(Some(3_500)) {
            let hashes: Vec<BlockHash> = (from..=to).map(hash).collect();
            assert_eq!(
                d.on_read(from, &hashes, &ours[from as usize..=to as usize]),
                Outcome::Going
            );
            reads += 1;
            if to > from {
                break;
            }
        }
        assert!(reads <= 4, "{reads} reads");
        let Ok(Some((GatewayId(1), Ask::FilterHeaders { id, start, stop }))) =
            d.next_ask(Defence::Awaited)
        else {
            panic!("filter headers");
        };
        let end = fork.div_ceil(1_000) * 1_000;
        assert_eq!(
            (start, stop),
            ((end - 1_000 + 1), hash(end.min(3_500))),
            "the 1,000 around the fork"
        );
        let answer = FilterAnswer {
            id,
            first_height: start,
            flags: LAST,
            before: theirs[start as usize - 1],
            headers: &theirs[start as usize..=end as usize],
            hashes: &th[start as usize..=end as usize],
        };
        assert_eq!(d.on_filter_headers(&answer), Outcome::Going);
        assert_eq!(d.height(), fork);
        (d, ours, theirs)
    }

    #[test]
    fn bisection_finds_the_first_differing_height() {
        for fork in [1_001, 2_345, 2_999, 3_000] {
            let (d, _, _) = to_judgment(fork);
            assert_eq!(d.height(), fork);
        }
    }

    /// A dispute against gateway 1, whose header at 3,500 is `top` and whose checkpoints
    /// are `cps`' at 1,000, 2,000 and 3,000, brought to its filter-header request: the
    /// dispute, the request's id and first height.
    fn to_range(
        ours: &[FilterHeader],
        cps: &[FilterHeader],
        top: FilterHeader,
    ) -> (Dispute, u32, u32) {
        let mut d = with_checkpoints(ours, cps, top, 0);
        serve_reads(&mut d, ours);
        let Ok(Some((_, Ask::FilterHeaders { id, start, .. }))) = d.next_ask(Defence::Awaited)
        else {
            panic!("filter headers")
        };
        (d, id, start)
    }

    /// A dispute against gateway 1 (its header at 3,500 `top`, our store from `base`)
    /// given `cps`' checkpoints at 1,000, 2,000 and 3,000.
    fn with_checkpoints(
        ours: &[FilterHeader],
        cps: &[FilterHeader],
        top: FilterHeader,
        base: u32,
    ) -> Dispute {
        let mut d = Dispute::new(GatewayId(1), 3_500, top, base, Ids::new(TaskId::Check));
        serve_read(&mut d, ours);
        let Ok(Some((_, Ask::Checkpoints { id, .. }))) = d.next_ask(Defence::Awaited) else {
            panic!("checkpoints")
        };
        let flat: Vec<u8> = [1_000, 2_000, 3_000]
            .iter()
            .flat_map(|&h| cps[h].0)
            .collect();
        assert_eq!(d.on_checkpoints(&checkpoints(id, &flat)), Outcome::Going);
        d
    }

    /// Every read the dispute asks for, from `ours`.
    fn serve_reads(d: &mut Dispute, ours: &[FilterHeader]) {
        while let Some((from, to)) = d.need_read(Some(3_500)) {
            assert!(to - from <= 1_000, "a read of {from}..={to}");
            let hashes: Vec<BlockHash> = (from..=to).map(hash).collect();
            assert_eq!(
                d.on_read(from, &hashes, &ours[from as usize..=to as usize]),
                Outcome::Going
            );
        }
    }

    #[test]
    fn filter_headers_that_contradict_a_checkpoint_are_a_rule_broken() {
        let (ours, theirs, th) = chains(2_345);
        let (mut d, id, start) = to_range(&ours, &theirs, theirs[3_500]);
        // Its anchor (at 2,000, where its checkpoint agreed with ours) is another.
        let answer = FilterAnswer {
            id,
            first_height: start,
            flags: LAST,
            before: FilterHeader([9; 32]),
            headers: &theirs[start as usize..=3_000],
            hashes: &th[start as usize..=3_000],
        };
        assert_eq!(
            d.on_filter_headers(&answer),
            Outcome::Bad(GatewayId(1), DisputeError::Contradiction { height: 2_001 })
        );
        // And headers that equal ours after all (it said the top differs).
        let (mut d, id, start) = to_range(&ours, &ours, FilterHeader([7; 32]));
        let answer = FilterAnswer {
            id,
            first_height: start,
            flags: LAST,
            before: ours[start as usize - 1],
            headers: &ours[start as usize..=3_500],
            hashes: &chains(u32::MAX).2[start as usize..=3_500],
        };
        assert_eq!(
            d.on_filter_headers(&answer),
            Outcome::Bad(GatewayId(1), DisputeError::Contradiction { height: 3_500 })
        );
    }

    #[test]
    fn checkpoints_out_of_order_or_above_the_top_are_a_rule_broken() {
        let (ours, theirs, _) = chains(2_345);
        let mut d = Dispute::new(
            GatewayId(1),
            3_500,
            theirs[3_500],
            0,
            Ids::new(TaskId::Check),
        );
        serve_read(&mut d, &ours);
        let Ok(Some((_, Ask::Checkpoints { id, .. }))) = d.next_ask(Defence::Awaited) else {
            panic!()
        };
        let flat = [0u8; 32 * 4];
        assert_eq!(
            d.on_checkpoints(&checkpoints(id, &flat)),
            Outcome::Bad(GatewayId(1), DisputeError::OutOfOrder { height: 4_000 })
        );
    }

    /// Checkpoints must come at every 1,000th height above the first we hold up to the
    /// top: none at all, or a gap, is a rule broken (else the range to read and compare
    /// is every filter header from the first we hold).
    #[test]
    fn checkpoints_that_skip_a_height_are_a_rule_broken() {
        let (ours, theirs, _) = chains(2_345);
        let start = |d: &mut Dispute| {
            serve_read(d, &ours);
            let Ok(Some((_, Ask::Checkpoints { id, .. }))) = d.next_ask(Defence::Awaited) else {
                panic!()
            };
            id
        };
        let new = || {
            Dispute::new(
                GatewayId(1),
                3_500,
                theirs[3_500],
                0,
                Ids::new(TaskId::Check),
            )
        };
        let mut d = new();
        let id = start(&mut d);
        assert_eq!(
            d.on_checkpoints(&checkpoints(id, &[])),
            Outcome::Bad(
                GatewayId(1),
                DisputeError::MissingCheckpoint { height: 1_000 }
            )
        );
        let mut d = new();
        let id = start(&mut d);
        let first = FilterCheckpoints {
            id,
            first_height: 1_000,
            flags: AnswerFlags::default(),
            headers: &theirs[1_000].0,
        };
        assert_eq!(d.on_checkpoints(&first), Outcome::Going);
        let then = FilterCheckpoints {
            id,
            first_height: 3_000,
            flags: LAST,
            headers: &theirs[3_000].0,
        };
        assert_eq!(
            d.on_checkpoints(&then),
            Outcome::Bad(
                GatewayId(1),
                DisputeError::MissingCheckpoint { height: 2_000 }
            )
        );
        // Stopping short of the top.
        let mut d = new();
        let id = start(&mut d);
        let flat: Vec<u8> = [1_000, 2_000].iter().flat_map(|&h| theirs[h].0).collect();
        assert_eq!(
            d.on_checkpoints(&checkpoints(id, &flat)),
            Outcome::Bad(
                GatewayId(1),
                DisputeError::MissingCheckpoint { height: 3_000 }
            )
        );
    }

    /// The judgment's fetches: a block that is not ours, then one that is; a filter that
    /// does not match its gateway's own header.
    #[test]
    fn the_judgment_checks_the_block_and_each_filter_against_its_own_header() {
        let (mut d, _, _) = to_judgment(2_345);
        let Ok(Some((GatewayId(1), Ask::Filter { id, height, stop }))) =
            d.next_ask(Defence::By(GatewayId(0)))
        else {
            panic!("their filter");
        };
        assert_eq!((height, stop), (2_345, hash(2_345)));
        let Ok(Some((GatewayId(0), Ask::Filter { .. }))) = d.next_ask(Defence::By(GatewayId(0)))
        else {
            panic!("ours")
        };
        let Ok(Some((GatewayId(0), Ask::Block { id: block_id, .. }))) =
            d.next_ask(Defence::By(GatewayId(0)))
        else {
            panic!("the block, from our side first")
        };
        assert!(
            d.is_asked(GatewayId(1), id)
                && d.is_asked(GatewayId(0), block_id)
                && !d.is_asked(GatewayId(0), id)
        );
        // Its filter does not hash to its header at 2,345.
        let mut body = Vec::new();
        body.extend_from_slice(&2_345u32.to_be_bytes());
        body.extend_from_slice(&3u32.to_be_bytes());
        body.extend_from_slice(&0u32.to_be_bytes());
        body.extend_from_slice(&3u16.to_be_bytes());
        body.extend_from_slice(&[1, 2, 3]);
        let m = Filters {
            id,
            flags: LAST,
            count: 1,
            body: &body,
        };
        assert_eq!(
            d.on_filters(GatewayId(1), &m),
            Outcome::Bad(GatewayId(1), DisputeError::FilterMismatch { height: 2_345 })
        );
        // A block whose header is not ours at 2,345.
        let mut block = vec![0u8; 80];
        block.push(0);
        let p = BlockPiece {
            id: block_id,
            last: true,
            not_found: false,
            block_len: block.len() as u32,
            offset: 0,
            data: &block,
        };
        assert_eq!(
            d.on_block(GatewayId(0), &p),
            Outcome::Bad(
                GatewayId(0),
                DisputeError::BlockMismatch {
                    height: 2_345,
                    error: BlockError::HashMismatch {
                        expected: hash(2_345),
                        got: BlockHash::of_header(&[0; 80]),
                    }
                }
            )
        );
        // Asked of the other side next; with no one left, the dispute cannot go on.
        let Ok(Some((GatewayId(1), Ask::Block { id: again, .. }))) =
            d.next_ask(Defence::By(GatewayId(0)))
        else {
            panic!("the block from the other side")
        };
        assert_eq!(
            d.on_block(GatewayId(1), &BlockPiece::not_found(again)),
            Outcome::Going
        );
        assert_eq!(
            d.next_ask(Defence::By(GatewayId(0))),
            Err(Outcome::Over(Verdict::Undecided { height: 2_345 }))
        );
    }

    /// Our store starts at 1 (as from a checkpoint: the filter header below it is not
    /// ours to check), and theirs differs from ours only below it: every header differs,
    /// every filter from 1 on is the same. The dispute walks both chains 1,000 heights at a
    /// time to the top, and ends by who defends ours; an answer that does not follow on
    /// from the stretch before is a contradiction.
    #[test]
    fn chains_that_differ_only_below_the_store_are_walked_to_the_top() {
        let (ours, _, hashes) = chains(u32::MAX);
        // Their filter of 0 is another; from 1 on, ours.
        let mut prev = filter_header(&filter_hash_of(0, 9), &FilterHeader::ZERO);
        let mut theirs = vec![prev];
        for hash in &hashes[1..] {
            prev = filter_header(hash, &prev);
            theirs.push(prev);
        }
        let walk = |break_at: Option<u32>| {
            let mut d = with_checkpoints(&ours, &theirs, theirs[3_500], 1);
            let mut stretches = 0;
            loop {
                serve_reads(&mut d, &ours);
                let Ok(Some((_, Ask::FilterHeaders { id, start, stop }))) =
                    d.next_ask(Defence::Awaited)
                else {
                    return d;
                };
                stretches += 1;
                let end = u32::from_le_bytes(stop.0[..4].try_into().unwrap()) as usize;
                let before = match break_at {
                    Some(b) if b == start => FilterHeader([3; 32]),
                    _ => theirs[start as usize - 1],
                };
                let answer = FilterAnswer {
                    id,
                    first_height: start,
                    flags: LAST,
                    before,
                    headers: &theirs[start as usize..=end],
                    hashes: &hashes[start as usize..=end],
                };
                let out = d.on_filter_headers(&answer);
                if break_at == Some(start) {
                    assert_eq!(
                        out,
                        Outcome::Bad(GatewayId(1), DisputeError::Contradiction { height: start })
                    );
                    return d;
                }
                assert_eq!(out, Outcome::Going);
                assert!(stretches <= 4, "{stretches} stretches");
            }
        };
        let mut d = walk(None);
        assert_eq!(
            d.next_ask(Defence::Awaited),
            Ok(None),
            "waits for a defender"
        );
        assert_eq!(
            d.next_ask(Defence::Nobody),
            Err(Outcome::Over(Verdict::OursUndefended {
                height: 1,
                from: 1,
                prev: theirs[0],
                hash: hash(1)
            }))
        );
        let mut d = walk(None);
        assert_eq!(
            d.next_ask(Defence::By(GatewayId(0))),
            Err(Outcome::Over(Verdict::Undecided { height: 3_500 }))
        );
        walk(Some(1_001));
    }
}
