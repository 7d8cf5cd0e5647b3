//! Settling a split in the silent-payment tweak chain by content, sans-IO: two gateways
//! vouch for different tweak headers at one height (or tweak hashes of one block),
//! and the block where their lists part, with the transactions it spends from, proves which
//! (or whether both) lied. The receiver's scan ([`crate::silent_scan`]) has every
//! gateway's hashes of a window already, and starts a dispute at the block itself
//! ([`TweakDispute::at_block`], step 3 on); a split at a header ([`TweakDispute::new`])
//! fetches the two spans first.
//!
//! 1. Each side's tweak headers over the span that ends at the split, from the highest
//!    height below where the gateways agree (or genesis), are asked of that side and
//!    checked to chain from the agreed header to its own word
//!    ([`crate::tweaks::SpanBuilder`]). A side whose span does not is wrong whatever the
//!    block holds: it broke its own word ([`TweakVerdict::BrokeItsWord`]).
//! 2. The first height where the two spans' tweak hashes differ is the disputed block
//!    ([`crate::tweaks::first_difference`]).
//! 3. The block (from either side first, then any gateway serving blocks) is checked
//!    against our header; what it spends from (`spent_from`: either side first, then any
//!    gateway serving tweaks) is checked transaction by transaction. A gateway that sends
//!    something else is at fault ([`TweakOutcome::Bad`]) and the next is asked; one that
//!    says `not_found` is not (its node may lack it), and the next is asked.
//! 4. The block's list is worked out from them ([`crate::tweaks::settle`]); every side
//!    whose hash there differs is wrong ([`TweakVerdict::Settled`]). When nobody present
//!    gives the block or its evidence, nothing is proven ([`TweakVerdict::Unsettled`]):
//!    the split stands, and the blocks above it are not scanned with either side's lists.
//!
//! Unlike a filter dispute, the block and its evidence fix the list exactly: no side can
//! be right for a reason the client cannot check, so there is no "undecided" verdict
//! between two sides that both answered, and no defender is needed.

use lightwire_chain::BlockHash;
use lightwire_primitives::{BlockError, CheckedBlock, FilterHash, FilterHeader};
use lightwire_wallet::silent_evidence::EvidenceError;
use lightwire_wire::{BlockPiece, MAX_BLOCK_LEN};

use crate::ids::{GatewayId, Ids};
use crate::tweaks::{
    MAX_SPAN, Settler, Span, SpanBuilder, SpentFrom, SpentFromError, TweakError, first_difference,
    settle, spent_from_txs,
};

/// What the dispute asks of a gateway.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TweakAsk {
    /// Its tweak headers from `first` to the block `stop` (`get_tweak_headers`).
    Span {
        /// The request's id.
        id: u32,
        /// The span's first height.
        first: u32,
        /// The span's last block.
        stop: BlockHash,
    },
    /// The block `hash` (`get_block`).
    Block {
        /// The request's id.
        id: u32,
        /// The block.
        hash: BlockHash,
    },
    /// What the block `hash` spends from (`get_spent_from`).
    SpentFrom {
        /// The request's id.
        id: u32,
        /// The block.
        hash: BlockHash,
    },
}

/// What a gateway may be asked for, for [`TweakDispute::next_ask`]'s `can`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Need {
    /// A block: it serves blocks.
    Block = 0,
    /// What a block spends from: it serves tweaks.
    SpentFrom = 1,
}

/// How a gateway broke a rule while the dispute asked it (it is at fault; the dispute
/// goes on with another).
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum TweakFault {
    /// The block it sent is not the block of our header (hash, Merkle root, a mutated
    /// tree), or not a block.
    #[error("the block it sent for height {height} is not ours: {error}")]
    Block {
        /// The block's height.
        height: u32,
        /// The rule it breaks.
        #[source]
        error: BlockError,
    },
    /// Its block's witness data is not what the coinbase commits to (BIP141): a witness
    /// changed to change a tweak.
    #[error(
        "the block it sent for height {height} has witness data its coinbase does not commit to"
    )]
    Witness {
        /// The block's height.
        height: u32,
    },
    /// Its `spent_from` answer is not a list of transactions without witness data.
    #[error("its spent_from for height {height}: {error}")]
    SpentFrom {
        /// The block's height.
        height: u32,
        /// What is wrong with it.
        #[source]
        error: SpentFromError,
    },
    /// Its `spent_from` answer lacks a transaction the block spends from, or holds one
    /// that does not parse.
    #[error("its spent_from for height {height} does not prove the block's tweaks: {error}")]
    Evidence {
        /// The block's height.
        height: u32,
        /// What is missing.
        #[source]
        error: EvidenceError,
    },
    /// A piece of the block out of order (not where the last ended), or a block longer
    /// than a block can be.
    #[error("a piece of the block of height {height} out of order")]
    OutOfOrder {
        /// The block's height.
        height: u32,
    },
    /// An answer to nothing the dispute asked of it.
    #[error("an answer to request {id}, which the dispute did not ask of it")]
    Unasked {
        /// The id it used.
        id: u32,
    },
}

/// How a dispute ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TweakVerdict {
    /// The block's list, worked out from the block and what it spends from, hashes to
    /// `proven`; each side in `wrong` vouched for another list there.
    Settled {
        /// The disputed block's height.
        height: u32,
        /// Its tweak hash.
        proven: FilterHash,
        /// The sides proven wrong (one, or both).
        wrong: [Option<GatewayId>; 2],
    },
    /// A side's span did not chain from the agreed header to its own word: it is wrong
    /// whatever the block holds.
    BrokeItsWord {
        /// The side.
        gateway: GatewayId,
        /// The rule its span broke.
        error: TweakError,
    },
    /// Nobody present gave the block or what it spends from: nothing proven at `height`.
    Unsettled {
        /// The disputed block's height (the split's, before the spans came).
        height: u32,
    },
}

/// What an input did to the dispute.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TweakOutcome {
    /// Still under way.
    Going,
    /// A gateway broke a rule (it is at fault); the dispute goes on with another.
    Bad(GatewayId, TweakFault),
    /// Over.
    Over(TweakVerdict),
}

/// One side of the split.
struct Side {
    gateway: GatewayId,
    /// Its word at the split.
    word: FilterHeader,
    /// Its span's request in flight, and the span being received.
    asked: Option<(u32, SpanBuilder)>,
    span: Option<Span>,
}

/// The evidence stage: one block, its bytes and what it spends from, each asked of one
/// gateway at a time.
struct Evidence {
    height: u32,
    /// Our block there, once known.
    hash: Option<BlockHash>,
    /// The block's and its evidence's fetches, by [`Need`].
    fetches: [Fetch; 2],
    block: Vec<u8>,
    spent: SpentFrom,
}

/// One thing the evidence stage fetches, from one gateway at a time.
#[derive(Default)]
struct Fetch {
    /// Asked of this gateway, with this id.
    from: Option<(GatewayId, u32)>,
    /// In and checked: who sent it.
    done_by: Option<GatewayId>,
    /// Who was asked already (said `not_found`, sent something else, or went).
    tried: Vec<GatewayId>,
}

/// A split at one height, being settled (see the module's documentation).
pub struct TweakDispute {
    top: u32,
    stop: BlockHash,
    first: u32,
    anchor: FilterHeader,
    sides: [Side; 2],
    evidence: Option<Evidence>,
    ids: Ids,
    settler: Settler,
}

impl TweakDispute {
    /// A split at height `top` (our block `stop`) between `a` and `b` (each a gateway and
    /// its word there), the gateways agreeing below at `agreed` (height and tweak header;
    /// `None`: nowhere, the span starts at genesis). `None` when the span would be longer
    /// than [`MAX_SPAN`] (gateways vouch at every checkpoint: a split is never further
    /// than 1,000 blocks above an agreed word, unless one side left out its checkpoints,
    /// which the caller refuses first).
    pub fn new(
        top: u32,
        stop: BlockHash,
        a: (GatewayId, FilterHeader),
        b: (GatewayId, FilterHeader),
        agreed: Option<(u32, FilterHeader)>,
        ids: Ids,
    ) -> Option<TweakDispute> {
        let (first, anchor) = match agreed {
            Some((h, header)) if h < top => (h + 1, header),
            Some(_) => return None,
            None => (0, FilterHeader([0; 32])),
        };
        // `top >= first` here; `top - first + 1` would overflow at the highest height.
        if top - first >= MAX_SPAN {
            return None;
        }
        let side = |(gateway, word)| Side {
            gateway,
            word,
            asked: None,
            span: None,
        };
        Some(TweakDispute {
            top,
            stop,
            first,
            anchor,
            sides: [side(a), side(b)],
            evidence: None,
            ids,
            settler: Settler::default(),
        })
    }

    /// A dispute over block `height` (our block `hash`) alone, whose tweak hashes two
    /// gateways gave differently (`a` and `b`: each a gateway and its hash there), from
    /// spans the caller already checked: the evidence is asked at once.
    pub fn at_block(
        height: u32,
        hash: BlockHash,
        a: (GatewayId, FilterHash),
        b: (GatewayId, FilterHash),
        ids: Ids,
    ) -> TweakDispute {
        let side = |(gateway, theirs)| Side {
            gateway,
            word: FilterHeader([0; 32]),
            asked: None,
            span: Some(Span::single(height, theirs)),
        };
        TweakDispute {
            top: height,
            stop: hash,
            first: height,
            anchor: FilterHeader([0; 32]),
            sides: [side(a), side(b)],
            evidence: Some(Evidence {
                height,
                hash: Some(hash),
                fetches: Default::default(),
                block: Vec::new(),
                spent: SpentFrom::default(),
            }),
            ids,
            settler: Settler::default(),
        }
    }

    /// The split's height.
    pub fn height(&self) -> u32 {
        self.top
    }

    /// The two sides' gateways.
    pub fn sides(&self) -> [GatewayId; 2] {
        [self.sides[0].gateway, self.sides[1].gateway]
    }

    /// The next request to send, if one is due: `block_hash(h)` is our best chain's block
    /// at `h`, and `can(g, need)` whether gateway `g` may be asked now (ready, serving
    /// it). `Err` when the dispute is over without an answer: no gateway of `gateways`
    /// that was not asked already `can` be asked. (A gateway only briefly not ready counts
    /// as not there: the caller that wants to wait for it does not call this meanwhile.)
    /// The spans are asked of the two sides whatever `can` says: the caller starts a
    /// dispute only between gateways it can ask.
    pub fn next_ask(
        &mut self,
        block_hash: impl Fn(u32) -> Option<BlockHash>,
        can: impl Fn(GatewayId, Need) -> bool,
        gateways: &[GatewayId],
    ) -> Result<Option<(GatewayId, TweakAsk)>, TweakVerdict> {
        if self.evidence.is_none() {
            for side in &mut self.sides {
                if side.span.is_some() || side.asked.is_some() {
                    continue;
                }
                let id = self.ids.next_id();
                let builder = SpanBuilder::new(self.first, self.top, self.anchor, side.word);
                side.asked = Some((id, builder));
                let ask = TweakAsk::Span {
                    id,
                    first: self.first,
                    stop: self.stop,
                };
                return Ok(Some((side.gateway, ask)));
            }
            return Ok(None);
        }
        let sides = self.sides();
        let Some(e) = self.evidence.as_mut() else {
            return Ok(None);
        };
        let hash = match e.hash {
            Some(h) => h,
            None => match block_hash(e.height) {
                Some(h) => *e.hash.insert(h),
                None => return Err(TweakVerdict::Unsettled { height: e.height }),
            },
        };
        // The sides first: each vouched for a list there and should prove it.
        let order = || {
            sides
                .iter()
                .chain(gateways.iter().filter(|g| !sides.contains(g)))
        };
        for need in [Need::Block, Need::SpentFrom] {
            let f = &mut e.fetches[need as usize];
            if f.done_by.is_some() || f.from.is_some() {
                continue;
            }
            let Some(&g) = order().find(|&&g| !f.tried.contains(&g) && can(g, need)) else {
                return Err(TweakVerdict::Unsettled { height: e.height });
            };
            let id = self.ids.next_id();
            f.from = Some((g, id));
            return Ok(Some(match need {
                Need::Block => {
                    e.block.clear();
                    (g, TweakAsk::Block { id, hash })
                }
                Need::SpentFrom => {
                    e.spent.clear();
                    (g, TweakAsk::SpentFrom { id, hash })
                }
            }));
        }
        Ok(None)
    }

    /// One `tweak_headers` message from `g` answering `id`.
    #[allow(clippy::too_many_arguments)]
    pub fn on_span(
        &mut self,
        g: GatewayId,
        id: u32,
        first_height: u32,
        before: FilterHeader,
        hashes: &[FilterHash],
        headers: &[FilterHeader],
        last: bool,
    ) -> TweakOutcome {
        let Some(side) = self
            .sides
            .iter_mut()
            .find(|s| s.gateway == g && s.asked.as_ref().is_some_and(|(i, _)| *i == id))
        else {
            return TweakOutcome::Bad(g, TweakFault::Unasked { id });
        };
        let Some((_, builder)) = side.asked.as_mut() else {
            return TweakOutcome::Bad(g, TweakFault::Unasked { id });
        };
        match builder.push(first_height, before, hashes, headers, last) {
            Ok(None) => TweakOutcome::Going,
            Ok(Some(span)) => {
                side.asked = None;
                side.span = Some(span);
                self.spans_in()
            }
            Err(error) => {
                side.asked = None;
                TweakOutcome::Over(TweakVerdict::BrokeItsWord { gateway: g, error })
            }
        }
    }

    /// `g` answered its span request `id` with `stop_unknown`: our block at the split is
    /// not on its chain (it reorganised, or never had it). No rule is broken, but its word
    /// there no longer stands for our chain: nothing is proven, and the caller forgets its
    /// words and asks again. An answer to nothing asked is a fault.
    pub fn on_span_stop_unknown(&mut self, g: GatewayId, id: u32) -> TweakOutcome {
        let asked = self
            .sides
            .iter()
            .any(|s| s.gateway == g && s.asked.as_ref().is_some_and(|(i, _)| *i == id));
        if !asked {
            return TweakOutcome::Bad(g, TweakFault::Unasked { id });
        }
        TweakOutcome::Over(TweakVerdict::Unsettled { height: self.top })
    }

    /// Both spans came: the block they part at is the one to prove.
    fn spans_in(&mut self) -> TweakOutcome {
        let (Some(a), Some(b)) = (&self.sides[0].span, &self.sides[1].span) else {
            return TweakOutcome::Going;
        };
        // Two spans from one anchor to different ends differ somewhere.
        let Some(height) = first_difference(a, b) else {
            return TweakOutcome::Over(TweakVerdict::Unsettled { height: self.top });
        };
        self.evidence = Some(Evidence {
            height,
            hash: (height == self.top).then_some(self.stop),
            fetches: Default::default(),
            block: Vec::new(),
            spent: SpentFrom::default(),
        });
        TweakOutcome::Going
    }

    /// The disputed block's height, once the spans showed it.
    pub fn disputed(&self) -> Option<u32> {
        self.evidence.as_ref().map(|e| e.height)
    }

    /// The evidence stage, if `need` was asked of `g` with `id`.
    fn asked(&mut self, g: GatewayId, id: u32, need: Need) -> Option<&mut Evidence> {
        self.evidence
            .as_mut()
            .filter(|e| e.fetches[need as usize].from == Some((g, id)))
    }

    /// A piece of the block from `g`.
    pub fn on_block(&mut self, g: GatewayId, p: &BlockPiece<'_>) -> TweakOutcome {
        let Some(e) = self.asked(g, p.id, Need::Block) else {
            return TweakOutcome::Bad(g, TweakFault::Unasked { id: p.id });
        };
        let f = &mut e.fetches[Need::Block as usize];
        let height = e.height;
        if p.not_found {
            f.tried.push(g);
            f.from = None;
            return TweakOutcome::Going;
        }
        if p.block_len > MAX_BLOCK_LEN || p.offset as usize != e.block.len() {
            f.tried.push(g);
            f.from = None;
            return TweakOutcome::Bad(g, TweakFault::OutOfOrder { height });
        }
        e.block.extend_from_slice(p.data);
        if !p.last {
            return TweakOutcome::Going;
        }
        f.from = None;
        f.tried.push(g);
        let Some(hash) = e.hash else {
            return TweakOutcome::Bad(g, TweakFault::Unasked { id: p.id });
        };
        if let Err(error) = CheckedBlock::check(&e.block, &hash) {
            e.block.clear();
            return TweakOutcome::Bad(g, TweakFault::Block { height, error });
        }
        f.done_by = Some(g);
        self.judge()
    }

    /// A piece of what the block spends from, from `g`.
    pub fn on_spent_from(&mut self, g: GatewayId, p: &BlockPiece<'_>) -> TweakOutcome {
        let Some(e) = self.asked(g, p.id, Need::SpentFrom) else {
            return TweakOutcome::Bad(g, TweakFault::Unasked { id: p.id });
        };
        let f = &mut e.fetches[Need::SpentFrom as usize];
        let height = e.height;
        match e.spent.push(p) {
            Ok(None) => TweakOutcome::Going,
            Ok(Some(found)) => {
                f.from = None;
                f.tried.push(g);
                if !found {
                    return TweakOutcome::Going;
                }
                f.done_by = Some(g);
                self.judge()
            }
            Err(error) => {
                f.from = None;
                f.tried.push(g);
                TweakOutcome::Bad(g, TweakFault::SpentFrom { height, error })
            }
        }
    }

    /// With the block and its evidence in, the verdict; evidence that proves nothing is
    /// its sender's fault, and the next is asked.
    fn judge(&mut self) -> TweakOutcome {
        let Some(e) = self.evidence.as_mut() else {
            return TweakOutcome::Going;
        };
        let [block_fetch, spent_fetch] = &mut e.fetches;
        let (Some(block_sender), Some(spent_sender)) = (block_fetch.done_by, spent_fetch.done_by)
        else {
            return TweakOutcome::Going;
        };
        let height = e.height;
        let Some(block) = e.hash.and_then(|h| CheckedBlock::check(&e.block, &h).ok()) else {
            // Checked when it came; kept unchanged since.
            return TweakOutcome::Over(TweakVerdict::Unsettled { height });
        };
        // Evidence that proves nothing is its sender's fault; another is asked.
        let spent_fault = |f: &mut Fetch, fault| {
            f.done_by = None;
            TweakOutcome::Bad(spent_sender, fault)
        };
        let mut txs = Vec::new();
        if let Err(error) = spent_from_txs(e.spent.bytes(), &mut txs) {
            return spent_fault(spent_fetch, TweakFault::SpentFrom { height, error });
        }
        // Worked out twice (three times when the two differ) and taken where two agree:
        // a JavaScript engine has been seen to compute wrong curve values now and then
        // (JavaScriptCore's concurrent JIT: benches/README.md, "WebKit computes wrong
        // values"), and one here would prove an honest gateway wrong. None agree: nothing
        // is proven.
        let settled = match settle(&mut self.settler, &block, &txs) {
            Ok(a) => {
                let b = settle(&mut self.settler, &block, &txs);
                if b.as_ref().ok() == Some(&a) {
                    Ok(a)
                } else {
                    match (settle(&mut self.settler, &block, &txs), b) {
                        (Ok(c), _) if c == a => Ok(a),
                        (Ok(c), Ok(b)) if c == b => Ok(b),
                        _ => return TweakOutcome::Over(TweakVerdict::Unsettled { height }),
                    }
                }
            }
            Err(e) => Err(e),
        };
        match settled {
            Ok(proven) => {
                let mut wrong = [None; 2];
                for (w, side) in wrong.iter_mut().zip(&self.sides) {
                    let theirs = side.span.as_ref().and_then(|s| s.hash(height));
                    if theirs != Some(&proven) {
                        *w = Some(side.gateway);
                    }
                }
                TweakOutcome::Over(TweakVerdict::Settled {
                    height,
                    proven,
                    wrong,
                })
            }
            Err(EvidenceError::Witness(_)) => {
                // The block's witness is not what its coinbase commits to: its sender
                // changed it; another is asked for the block.
                block_fetch.done_by = None;
                TweakOutcome::Bad(block_sender, TweakFault::Witness { height })
            }
            Err(EvidenceError::NoSuchOutput { .. }) => {
                // The block spends an output its transaction does not have: not a valid
                // block, which our header chain holds only if its proof of work lies.
                TweakOutcome::Over(TweakVerdict::Unsettled { height })
            }
            Err(error) => spent_fault(spent_fetch, TweakFault::Evidence { height, error }),
        }
    }

    /// Gateway `g` is gone: what was asked of it is asked of another (a side gone before
    /// its span came leaves nothing to compare: the dispute is over).
    pub fn gateway_gone(&mut self, g: GatewayId) -> Option<TweakVerdict> {
        if self.evidence.is_none() {
            if self
                .sides
                .iter()
                .any(|s| s.gateway == g && s.span.is_none())
            {
                return Some(TweakVerdict::Unsettled { height: self.top });
            }
            return None;
        }
        if let Some(e) = self.evidence.as_mut() {
            for f in &mut e.fetches {
                if f.from.is_some_and(|(from, _)| from == g) {
                    f.from = None;
                    f.tried.push(g);
                }
            }
        }
        None
    }

    /// Every request in flight, as (gateway, id).
    pub fn in_flight(&self) -> impl Iterator<Item = (GatewayId, u32)> + '_ {
        let spans = self
            .sides
            .iter()
            .filter_map(|s| s.asked.as_ref().map(|(id, _)| (s.gateway, *id)));
        let evidence = self
            .evidence
            .iter()
            .flat_map(|e| e.fetches.iter().filter_map(|f| f.from));
        spans.chain(evidence)
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::ids::TaskId;
    use crate::tweaks::tests::{G, chain, hash160, list, paying_block, tx};
    use lightwire_primitives::{Tx, write_tweak_list};

    const LIAR: GatewayId = GatewayId(0);
    const HONEST: GatewayId = GatewayId(1);
    const OTHER: GatewayId = GatewayId(2);

    /// A chain of 2,100 blocks whose block 1502 is the paying block (its bytes, the
    /// transaction it spends from, its hash) and the honest tweak chain over it.
    struct Case {
        block: Vec<u8>,
        source: Vec<u8>,
        hash: BlockHash,
        honest: (Vec<FilterHash>, Vec<FilterHeader>),
    }

    fn case() -> Case {
        let (block, source, hash) = paying_block();
        let checked = CheckedBlock::check(&block, &hash).unwrap();
        let paying = checked.transactions().nth(1).unwrap();
        let mut p2pkh = vec![0x76, 0xa9, 0x14];
        p2pkh.extend_from_slice(&hash160(&G));
        p2pkh.extend_from_slice(&[0x88, 0xac]);
        let t = lightwire_wallet::silent::tweak(&paying, &[&p2pkh]).unwrap();
        let mut lists: Vec<Vec<u8>> = (0..2_100).map(list).collect();
        lists[1502].clear();
        write_tweak_list(&mut [t], &mut lists[1502]);
        Case {
            honest: chain(&lists),
            block,
            source,
            hash,
        }
    }

    /// A liar's chain: block 1502's list replaced by `bad`.
    fn lying(bad: Vec<u8>) -> (Vec<FilterHash>, Vec<FilterHeader>) {
        let mut lists: Vec<Vec<u8>> = (0..2_100).map(list).collect();
        lists[1502] = bad;
        chain(&lists)
    }

    fn empty_list() -> Vec<u8> {
        vec![0]
    }

    /// The dispute at 2,000 between the liar's chain and `other`'s, agreed at 1,000.
    fn dispute(liar: &[FilterHeader], other: &[FilterHeader], other_g: GatewayId) -> TweakDispute {
        TweakDispute::new(
            2000,
            BlockHash([20; 32]),
            (LIAR, liar[2000]),
            (other_g, other[2000]),
            Some((1000, liar[1000])),
            Ids::new(TaskId::Check),
        )
        .unwrap()
    }

    /// A span asked with `ask`, answered from a chain, in two messages.
    fn answer(
        d: &mut TweakDispute,
        g: GatewayId,
        ask: TweakAsk,
        (hashes, headers): &(Vec<FilterHash>, Vec<FilterHeader>),
    ) -> TweakOutcome {
        let TweakAsk::Span { id, first, .. } = ask else {
            panic!("{ask:?}")
        };
        let (f, mid, end) = (first as usize, 1500usize, 2001usize);
        let one = d.on_span(
            g,
            id,
            first,
            headers[f - 1],
            &hashes[f..mid],
            &headers[f..mid],
            false,
        );
        assert_eq!(one, TweakOutcome::Going);
        d.on_span(
            g,
            id,
            mid as u32,
            headers[mid - 1],
            &hashes[mid..end],
            &headers[mid..end],
            true,
        )
    }

    /// `bytes` in pieces of 40, answering `id`.
    fn pieces(id: u32, bytes: &[u8]) -> Vec<BlockPiece<'_>> {
        let mut offset = 0;
        bytes
            .chunks(40)
            .map(|c| {
                let p = BlockPiece {
                    id,
                    last: offset + c.len() == bytes.len(),
                    not_found: false,
                    block_len: bytes.len() as u32,
                    offset: offset as u32,
                    data: c,
                };
                offset += c.len();
                p
            })
            .collect()
    }

    fn all(_: GatewayId, _: Need) -> bool {
        true
    }

    /// The next ask, which must be for `need`: its gateway and id.
    fn asked(
        d: &mut TweakDispute,
        at: impl Fn(u32) -> Option<BlockHash>,
        gws: &[GatewayId],
        need: Need,
    ) -> (GatewayId, u32) {
        match d.next_ask(at, all, gws) {
            Ok(Some((g, TweakAsk::Block { id, .. }))) if need == Need::Block => (g, id),
            Ok(Some((g, TweakAsk::SpentFrom { id, .. }))) if need == Need::SpentFrom => (g, id),
            other => panic!("{other:?}, not {need:?}"),
        }
    }

    /// `bytes` given by `g` as the answer `id` (a block or what it spends from), in
    /// pieces: what the last piece did.
    fn give(d: &mut TweakDispute, g: GatewayId, id: u32, bytes: &[u8], need: Need) -> TweakOutcome {
        let mut out = TweakOutcome::Going;
        for p in pieces(id, bytes) {
            out = match need {
                Need::Block => d.on_block(g, &p),
                Need::SpentFrom => d.on_spent_from(g, &p),
            };
        }
        out
    }

    /// What the paying block spends from, as a gateway sends it.
    fn evidence_of(c: &Case) -> Vec<u8> {
        let mut evidence = vec![1];
        evidence.extend_from_slice(&c.source);
        evidence
    }

    /// The liar left the payment's tweak out of block 1502 (headers rebuilt on it). Both
    /// spans are taken (each ends at its own word) and part at 1502; the liar's block is
    /// not ours and its evidence is `not_found`: the honest gateway's prove the block's
    /// list, which is the honest one's, and the liar is the one wrong.
    #[test]
    fn the_liar_that_left_a_tweak_out_is_proven_wrong_by_the_block() {
        let c = case();
        let liar = lying(empty_list());
        let mut d = dispute(&liar.1, &c.honest.1, HONEST);
        let gws = [LIAR, HONEST, OTHER];
        let at = |h: u32| (h == 1502).then_some(c.hash);
        let (g, ask) = d.next_ask(at, all, &gws).unwrap().unwrap();
        assert_eq!(g, LIAR);
        assert!(matches!(ask, TweakAsk::Span { first: 1001, .. }));
        let (g2, ask2) = d.next_ask(at, all, &gws).unwrap().unwrap();
        assert_eq!(g2, HONEST);
        assert_eq!(d.next_ask(at, all, &gws), Ok(None), "both spans asked");
        assert_eq!(answer(&mut d, LIAR, ask, &liar), TweakOutcome::Going);
        assert_eq!(answer(&mut d, HONEST, ask2, &c.honest), TweakOutcome::Going);
        assert_eq!(d.disputed(), Some(1502));

        // The block: the liar first, which sends another block.
        let (g, ask) = d.next_ask(at, all, &gws).unwrap().unwrap();
        let TweakAsk::Block { id, hash } = ask else {
            panic!("{ask:?}")
        };
        assert_eq!((g, hash), (LIAR, c.hash));
        let mut wrong = c.block.clone();
        wrong[100] ^= 1;
        let out = give(&mut d, g, id, &wrong, Need::Block);
        assert!(
            matches!(
                out,
                TweakOutcome::Bad(LIAR, TweakFault::Block { height: 1502, .. })
            ),
            "{out:?}"
        );
        let (g, id) = asked(&mut d, at, &gws, Need::Block);
        assert_eq!(g, HONEST);
        for p in pieces(id, &c.block) {
            assert_eq!(d.on_block(g, &p), TweakOutcome::Going);
        }
        // The evidence: the liar says it has none, the honest one gives it.
        let (g, id) = asked(&mut d, at, &gws, Need::SpentFrom);
        assert_eq!(g, LIAR);
        assert_eq!(
            d.on_spent_from(g, &BlockPiece::not_found(id)),
            TweakOutcome::Going
        );
        let (g, id) = asked(&mut d, at, &gws, Need::SpentFrom);
        assert_eq!(g, HONEST);
        let out = give(&mut d, g, id, &evidence_of(&c), Need::SpentFrom);
        assert_eq!(
            out,
            TweakOutcome::Over(TweakVerdict::Settled {
                height: 1502,
                proven: c.honest.0[1502],
                wrong: [Some(LIAR), None],
            })
        );
        assert_eq!(d.in_flight().count(), 0);
    }

    /// Two liars, one leaving the tweak out and one adding many: both proven wrong. A
    /// liar's evidence that lacks the transaction spent from is its fault, and another
    /// gateway's is taken.
    #[test]
    fn two_liars_are_both_wrong_and_evidence_without_the_spent_transaction_is_a_fault() {
        let c = case();
        let left_out = lying(empty_list());
        let mut many: Vec<[u8; 33]> = (0..300u32)
            .map(|i| {
                let mut t = [2u8; 33];
                t[1..5].copy_from_slice(&i.to_be_bytes());
                t
            })
            .collect();
        let mut added = Vec::new();
        write_tweak_list(&mut many, &mut added);
        let added = lying(added);
        let mut d = dispute(&left_out.1, &added.1, HONEST);
        let gws = [LIAR, HONEST, OTHER];
        let at = |h: u32| (h == 1502).then_some(c.hash);
        let (_, a) = d.next_ask(at, all, &gws).unwrap().unwrap();
        let (_, b) = d.next_ask(at, all, &gws).unwrap().unwrap();
        answer(&mut d, LIAR, a, &left_out);
        answer(&mut d, HONEST, b, &added);
        assert_eq!(d.disputed(), Some(1502));
        let (g, id) = asked(&mut d, at, &gws, Need::Block);
        give(&mut d, g, id, &c.block, Need::Block);
        // The liar's evidence: none of the transactions spent from.
        let (g, id) = asked(&mut d, at, &gws, Need::SpentFrom);
        let unrelated = tx(&[([3; 36], vec![0x51])], &[(1, vec![0x51])]);
        let mut bogus = vec![1];
        bogus.extend_from_slice(&unrelated);
        let out = give(&mut d, g, id, &bogus, Need::SpentFrom);
        let txid = Tx::parse(&c.source).unwrap().txid();
        assert_eq!(
            out,
            TweakOutcome::Bad(
                LIAR,
                TweakFault::Evidence {
                    height: 1502,
                    error: EvidenceError::Missing { txid }
                }
            )
        );
        // The second liar has none to give; a third gateway does.
        let (g, id) = asked(&mut d, at, &gws, Need::SpentFrom);
        assert_eq!(g, HONEST);
        d.on_spent_from(g, &BlockPiece::not_found(id));
        let (g, id) = asked(&mut d, at, &gws, Need::SpentFrom);
        assert_eq!(g, OTHER);
        let out = give(&mut d, g, id, &evidence_of(&c), Need::SpentFrom);
        assert_eq!(
            out,
            TweakOutcome::Over(TweakVerdict::Settled {
                height: 1502,
                proven: c.honest.0[1502],
                wrong: [Some(LIAR), Some(HONEST)],
            })
        );
    }

    /// Nobody gives the evidence: nothing is proven. A side whose span does not end at its
    /// own word broke it, whatever the block holds; an answer to nothing asked is a fault;
    /// a side gone before its span came leaves nothing to settle.
    #[test]
    fn withheld_evidence_proves_nothing_and_a_broken_word_is_wrong_at_once() {
        let c = case();
        let liar = lying(empty_list());
        let gws = [LIAR, HONEST];
        let at = |h: u32| (h == 1502).then_some(c.hash);
        let mut d = dispute(&liar.1, &c.honest.1, HONEST);
        let (_, a) = d.next_ask(at, all, &gws).unwrap().unwrap();
        let (_, b) = d.next_ask(at, all, &gws).unwrap().unwrap();
        answer(&mut d, LIAR, a, &liar);
        answer(&mut d, HONEST, b, &c.honest);
        let (g, id) = asked(&mut d, at, &gws, Need::Block);
        give(&mut d, g, id, &c.block, Need::Block);
        for _ in 0..2 {
            let (g, id) = asked(&mut d, at, &gws, Need::SpentFrom);
            assert_eq!(
                d.on_spent_from(g, &BlockPiece::not_found(id)),
                TweakOutcome::Going
            );
        }
        assert_eq!(
            d.next_ask(at, all, &gws),
            Err(TweakVerdict::Unsettled { height: 1502 })
        );

        // The liar's span, checked against the honest word it did not give: its own word
        // at 2,000 is the honest header, but its hashes are its lie.
        let mut d = dispute(&c.honest.1, &c.honest.1, HONEST);
        let (_, a) = d.next_ask(at, all, &gws).unwrap().unwrap();
        assert_eq!(
            answer(&mut d, LIAR, a, &liar),
            TweakOutcome::Over(TweakVerdict::BrokeItsWord {
                gateway: LIAR,
                error: TweakError::EndMismatch { last: 2000 },
            })
        );
        // A side whose chain no longer holds the split's block: nothing proven, no fault.
        let mut d = dispute(&liar.1, &c.honest.1, HONEST);
        let (_, a) = d.next_ask(at, all, &gws).unwrap().unwrap();
        let TweakAsk::Span { id, .. } = a else {
            panic!("{a:?}")
        };
        assert_eq!(
            d.on_span_stop_unknown(HONEST, id),
            TweakOutcome::Bad(HONEST, TweakFault::Unasked { id })
        );
        assert_eq!(
            d.on_span_stop_unknown(LIAR, id),
            TweakOutcome::Over(TweakVerdict::Unsettled { height: 2000 })
        );
        let mut d = dispute(&liar.1, &c.honest.1, HONEST);
        assert_eq!(
            d.on_block(HONEST, &BlockPiece::not_found(99)),
            TweakOutcome::Bad(HONEST, TweakFault::Unasked { id: 99 })
        );
        let _ = d.next_ask(at, all, &gws);
        assert_eq!(
            d.gateway_gone(LIAR),
            Some(TweakVerdict::Unsettled { height: 2000 })
        );
        // A span longer than a request, or one to the highest height from genesis (whose
        // length overflowed): refused.
        assert!(
            TweakDispute::new(
                u32::MAX,
                BlockHash([1; 32]),
                (LIAR, liar.1[2000]),
                (HONEST, c.honest.1[2000]),
                None,
                Ids::new(TaskId::Check),
            )
            .is_none()
        );
        assert!(
            TweakDispute::new(
                5000,
                BlockHash([1; 32]),
                (LIAR, liar.1[2000]),
                (HONEST, c.honest.1[2000]),
                Some((1000, liar.1[1000])),
                Ids::new(TaskId::Check),
            )
            .is_none()
        );
    }
}
