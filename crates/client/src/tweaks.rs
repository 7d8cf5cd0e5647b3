//! The silent-payment tweak chain as the client checks it, sans-IO: what each gateway
//! vouches for, the spans of tweak hashes it sends, the lists checked against them, and how
//! a block's list is settled by content (docs/PROTOCOL.md, "Silent-payment tweaks"; the
//! receiver's scan that uses all this is [`crate::silent_scan`]).
//!
//! Unlike the filter headers, the tweak chain is not stored: a scan needs each block's list
//! once, and the chain is cheap to ask for again. What the client keeps is each gateway's
//! *word*: its tweak header at the heights where the spans it sent start and end
//! ([`Vouched`]). A gateway that gives two headers for one height broke its word.
//!
//! A *span* is one gateway's tweak hashes over a run of blocks, checked to chain in order
//! ([`SpanBuilder`]: from and to the headers it is checked against, or, opened, from and
//! to whatever the gateway chains, its word there); each list fetched must hash to its
//! block's hash in the span ([`Span::check_list`]). [`first_difference`] gives the first
//! block where two spans of the same blocks differ; that block and the transactions its
//! inputs spend from settle it ([`settle`]): the block is checked against our header and
//! its witness commitment, each transaction spent from counts only as the txid it hashes
//! to, and the block's tweaks are worked out from them
//! (`lightwire_wallet::silent_evidence`). Every gateway whose hash there is not the one the
//! evidence gives is wrong.

use lightwire_primitives::{
    CheckedBlock, FilterHash, FilterHeader, TweakList, TweakListError, Tx, tweak_list_hash,
    write_tweak_list,
};
use lightwire_wallet::silent_evidence::{EvidenceError, tweaks_from_evidence};
use lightwire_wire::filters::FILTER_CHECKPOINT_INTERVAL;
use std::collections::BTreeMap;

use crate::ids::GatewayId;

/// Tweak headers at most in one span (a request's worth; the longest span between two
/// checkpoints is 1,001 blocks, from genesis to 1,000).
pub const MAX_SPAN: u32 = 2 * FILTER_CHECKPOINT_INTERVAL;

/// How a gateway's tweak data breaks a rule (it is wrong whatever the block holds).
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum TweakError {
    /// Its span of tweak headers does not start from the agreed header before it.
    #[error(
        "its tweak headers from height {first} do not start from the agreed tweak header before them"
    )]
    AnchorMismatch {
        /// The span's first height.
        first: u32,
    },
    /// Its span does not end at the header it is checked against (the agreed one, or in a
    /// dispute its own word there).
    #[error("its tweak headers to height {last} do not end at the tweak header vouched for there")]
    EndMismatch {
        /// The span's last height.
        last: u32,
    },
    /// A span's headers came out of order, past its end, or ended short.
    #[error("its tweak headers for heights {first} to {last} came out of order or short")]
    SpanOutOfOrder {
        /// The span's first height.
        first: u32,
        /// The span's last height.
        last: u32,
    },
    /// A list that is not a tweak list (BIP352's 33-byte keys, sorted, counted).
    #[error("its tweak list of height {height} is malformed: {error}")]
    MalformedList {
        /// The block's height.
        height: u32,
        /// The rule it breaks.
        #[source]
        error: TweakListError,
    },
    /// A list that does not hash to its block's tweak hash in the checked span.
    #[error("its tweak list of height {height} does not match the tweak chain")]
    ListMismatch {
        /// The block's height.
        height: u32,
    },
    /// A list for a block outside the checked span.
    #[error("a tweak list for height {height}, outside the span checked")]
    ListOutsideSpan {
        /// The block's height.
        height: u32,
    },
    /// It vouched twice for one height with two different headers.
    #[error("it vouched for two tweak headers at height {height}")]
    TwoWords {
        /// The height.
        height: u32,
    },
}

/// Each gateway's word on the tweak chain of our best chain: its tweak header at the
/// heights where its spans started and ended. Bounded: [`Self::forget_below`] drops those
/// a scan has passed.
#[derive(Default)]
pub struct Vouched {
    words: Vec<BTreeMap<u32, FilterHeader>>,
    /// Gateways proven wrong: their word counts no more.
    out: Vec<bool>,
}

impl Vouched {
    /// Nobody's word yet, for `gateways` gateways.
    pub fn new(gateways: usize) -> Vouched {
        Vouched {
            words: vec![BTreeMap::new(); gateways],
            out: vec![false; gateways],
        }
    }

    /// Gateway `g` vouches for `header` at `height` of our best chain. Two different
    /// headers for one height is [`TweakError::TwoWords`] (its word stays the first).
    pub fn vouch(
        &mut self,
        g: GatewayId,
        height: u32,
        header: FilterHeader,
    ) -> Result<(), TweakError> {
        let Some(words) = self.words.get_mut(g.0) else {
            return Ok(());
        };
        match words.get(&height) {
            Some(w) if *w != header => Err(TweakError::TwoWords { height }),
            _ => {
                words.insert(height, header);
                Ok(())
            }
        }
    }

    /// Gateway `g`'s word at `height`, if it gave one and still counts.
    #[cfg(test)]
    pub(crate) fn word(&self, g: GatewayId, height: u32) -> Option<FilterHeader> {
        if self.is_out(g) {
            return None;
        }
        self.words.get(g.0)?.get(&height).copied()
    }

    /// Gateway `g` was proven wrong: its word counts no more this session.
    pub fn rule_out(&mut self, g: GatewayId) {
        if let Some(o) = self.out.get_mut(g.0) {
            *o = true;
        }
    }

    /// Whether `g`'s word was ruled out.
    pub fn is_out(&self, g: GatewayId) -> bool {
        self.out.get(g.0).copied().unwrap_or(true)
    }

    /// Gateway `g` is gone (its connection dropped): what it said goes with it, to be
    /// asked again when it is back (a reconnected gateway may have moved on).
    pub fn forget(&mut self, g: GatewayId) {
        if let Some(w) = self.words.get_mut(g.0) {
            w.clear();
        }
    }

    /// Our best chain left its blocks above `fork` (the last block it kept): every word
    /// above it was for blocks no longer ours.
    pub fn reorg(&mut self, fork: u32) {
        for w in &mut self.words {
            w.split_off(&fork.saturating_add(1));
        }
    }

    /// Drop the words below `height` (those of spans a scan has passed).
    pub fn forget_below(&mut self, height: u32) {
        for w in &mut self.words {
            *w = w.split_off(&height);
        }
    }
}

/// The tweak hashes of a span of blocks, checked: they chain from the header before the
/// span to the header at its end that they were checked against.
#[derive(Clone, PartialEq, Eq)]
pub struct Span {
    first: u32,
    hashes: Vec<FilterHash>,
    /// The header before the first and the header at the last, as they chained.
    before: FilterHeader,
    end: FilterHeader,
}

impl core::fmt::Debug for Span {
    /// Its heights, not its up to 2,000 hashes.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Span({}..={})", self.first, self.last())
    }
}

impl Span {
    /// The span's first height.
    pub fn first(&self) -> u32 {
        self.first
    }

    /// The span's last height.
    pub fn last(&self) -> u32 {
        self.first + self.hashes.len() as u32 - 1
    }

    /// The checked tweak hash of block `height`, if the span holds it.
    pub fn hash(&self, height: u32) -> Option<&FilterHash> {
        self.hashes.get(height.checked_sub(self.first)? as usize)
    }

    /// The hashes, from [`Self::first`] on.
    pub fn hashes(&self) -> &[FilterHash] {
        &self.hashes
    }

    /// The tweak header at `height` of the span (chained from the header before it), if
    /// the span holds that block.
    pub fn header_at(&self, height: u32) -> Option<FilterHeader> {
        let n = height.checked_sub(self.first)? as usize;
        let hashes = self.hashes.get(..=n)?;
        Some(hashes.iter().fold(self.before, |at, h| at.next(h)))
    }

    /// The tweak header before the first block, which the span chains from.
    pub fn before(&self) -> FilterHeader {
        self.before
    }

    /// The tweak header at the last block, which the span chains to.
    pub fn end(&self) -> FilterHeader {
        self.end
    }

    /// A span of one block whose tweak hash is known (a dispute over that block alone:
    /// the headers around it are not checked, and stay zero).
    pub(crate) fn single(height: u32, hash: FilterHash) -> Span {
        Span {
            first: height,
            hashes: vec![hash],
            before: FilterHeader([0; 32]),
            end: FilterHeader([0; 32]),
        }
    }

    /// `bytes`, a gateway's tweak list of block `height`, checked: well formed and hashing
    /// to the span's hash there.
    pub fn check_list<'a>(
        &self,
        height: u32,
        bytes: &'a [u8],
    ) -> Result<TweakList<'a>, TweakError> {
        let want = self
            .hash(height)
            .ok_or(TweakError::ListOutsideSpan { height })?;
        if tweak_list_hash(bytes) != *want {
            return Err(TweakError::ListMismatch { height });
        }
        // A list that hashes right but does not parse: the chain itself commits to it, and
        // the gateways agreed on that chain. No list can be scanned from it: the block is
        // a dispute's to settle (its evidence gives the true list).
        TweakList::parse(bytes).map_err(|error| TweakError::MalformedList { height, error })
    }
}

/// A span being received: the tweak headers of heights `first..=last` from one gateway's
/// answers, checked to chain from `anchor` (the agreed header before `first`, zero at
/// genesis) and to end at `end`; or, opened with [`SpanBuilder::open`], from and to
/// whatever the gateway chains (its word, for the caller to compare).
pub struct SpanBuilder {
    first: u32,
    last: u32,
    end: Option<FilterHeader>,
    hashes: Vec<FilterHash>,
    /// The header the next one must chain from (`None`: the first message's `before`).
    at: Option<FilterHeader>,
    /// The header the span chains from, once known.
    anchor: Option<FilterHeader>,
}

impl SpanBuilder {
    /// A span of `first..=last` (at most [`MAX_SPAN`] blocks), to chain from `anchor` to `end`.
    pub fn new(first: u32, last: u32, anchor: FilterHeader, end: FilterHeader) -> SpanBuilder {
        SpanBuilder {
            end: Some(end),
            at: Some(anchor),
            anchor: Some(anchor),
            ..SpanBuilder::open(first, last)
        }
    }

    /// A span of `first..=last` (at most [`MAX_SPAN`] blocks) that chains from the header
    /// before it and to the header at its end the gateway gives ([`Span::before`],
    /// [`Span::end`]: its word there), checked only to chain in order.
    pub fn open(first: u32, last: u32) -> SpanBuilder {
        SpanBuilder {
            first,
            last,
            end: None,
            // Room for the span, but never more than a span may hold: a caller's wrong
            // heights cost a refused answer, not a huge allocation.
            hashes: Vec::with_capacity(last.saturating_sub(first).min(MAX_SPAN) as usize + 1),
            at: None,
            anchor: None,
        }
    }

    /// The height due next.
    pub fn next(&self) -> u32 {
        self.first + self.hashes.len() as u32
    }

    /// The heights the span covers.
    pub fn range(&self) -> (u32, u32) {
        (self.first, self.last)
    }

    /// One `tweak_headers` message of the answer: headers of heights `first_height..`,
    /// chained (by the connection) from `before` over `hashes`. The span once its last
    /// header came and ended where it must; `None` while more are due. `last_message`:
    /// the answer says it is over.
    pub fn push(
        &mut self,
        first_height: u32,
        before: FilterHeader,
        hashes: &[FilterHash],
        headers: &[FilterHeader],
        last_message: bool,
    ) -> Result<Option<Span>, TweakError> {
        let next = self.first + self.hashes.len() as u32;
        let order = TweakError::SpanOutOfOrder {
            first: self.first,
            last: self.last,
        };
        if first_height != next || hashes.len() != headers.len() || next > self.last {
            return Err(order);
        }
        match self.at {
            Some(at) if at != before => {
                return Err(if next == self.first {
                    TweakError::AnchorMismatch { first: self.first }
                } else {
                    order
                });
            }
            Some(_) => {}
            None => {
                self.at = Some(before);
                self.anchor = Some(before);
            }
        }
        if (self.last - next + 1) < hashes.len() as u32 {
            return Err(order);
        }
        self.hashes.extend_from_slice(hashes);
        if let Some(h) = headers.last() {
            self.at = Some(*h);
        }
        let done = self.first + self.hashes.len() as u32 > self.last;
        let (Some(at), Some(anchor)) = (self.at, self.anchor) else {
            return Err(order);
        };
        match (done, last_message) {
            (false, false) => Ok(None),
            (false, true) => Err(order),
            (true, _) if self.end.is_some_and(|end| end != at) => {
                Err(TweakError::EndMismatch { last: self.last })
            }
            (true, _) => Ok(Some(Span {
                first: self.first,
                hashes: core::mem::take(&mut self.hashes),
                before: anchor,
                end: at,
            })),
        }
    }
}

/// The first height where two spans of the same blocks (each checked against its own
/// gateway's word) hold different tweak hashes: the block a dispute is about.
pub fn first_difference(a: &Span, b: &Span) -> Option<u32> {
    if a.first != b.first {
        return None;
    }
    a.hashes
        .iter()
        .zip(&b.hashes)
        .position(|(x, y)| x != y)
        .map(|i| a.first + i as u32)
}

/// Why a gateway's `spent_from` answer cannot be used as evidence (it is not proof of
/// anything; the gateway that sent it withheld the proof it owed).
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum SpentFromError {
    /// A piece out of order: another length than the first said, or not where the last
    /// one ended.
    #[error("a spent_from piece at {offset} out of order")]
    OutOfOrder {
        /// Where it started.
        offset: u32,
    },
    /// The answer does not start with a CompactSize count, or ends before its last
    /// transaction or after it.
    #[error("the spent_from answer is not a count of transactions followed by them")]
    Malformed,
    /// Transaction `index` does not parse.
    #[error("spent_from transaction {index} does not parse")]
    BadTransaction {
        /// Its place in the answer.
        index: usize,
    },
    /// Transaction `index` carries witness data, which the protocol leaves out (its txid,
    /// what makes it evidence, does not cover it).
    #[error("spent_from transaction {index} carries witness data")]
    WithWitness {
        /// Its place in the answer.
        index: usize,
    },
}

/// A `spent_from` answer put together from its pieces (one at a time; the buffer kept
/// between answers).
#[derive(Default)]
pub struct SpentFrom {
    buf: Vec<u8>,
    len: Option<u32>,
}

impl SpentFrom {
    /// Ready for a new answer.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.len = None;
    }

    /// One piece: `Some(true)` once the answer is whole ([`Self::bytes`]), `Some(false)`
    /// when the gateway has none (`not_found`), `None` while more are due. (The wire
    /// decoder has already refused a piece past its end, an empty one, `last` misplaced
    /// and an answer over [`lightwire_wire::MAX_SPENT_FROM_LEN`].)
    pub fn push(
        &mut self,
        p: &lightwire_wire::BlockPiece<'_>,
    ) -> Result<Option<bool>, SpentFromError> {
        if p.not_found {
            self.clear();
            return Ok(Some(false));
        }
        if self.len.is_some_and(|l| l != p.block_len) || p.offset as usize != self.buf.len() {
            let offset = p.offset;
            self.clear();
            return Err(SpentFromError::OutOfOrder { offset });
        }
        self.len = Some(p.block_len);
        self.buf.extend_from_slice(p.data);
        Ok(p.last.then_some(true))
    }

    /// The whole answer.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }
}

/// The transactions of a whole `spent_from` answer, each checked to parse and to carry no
/// witness data, appended to `out` (cleared first).
pub fn spent_from_txs<'a>(bytes: &'a [u8], out: &mut Vec<&'a [u8]>) -> Result<(), SpentFromError> {
    out.clear();
    let mut r = lightwire_primitives::Reader::new(bytes);
    // Each transaction takes at least 10 bytes: a count beyond that is a lie about the rest.
    let count = r
        .count(10, "count")
        .map_err(|_| SpentFromError::Malformed)?;
    for index in 0..count as usize {
        let tx = Tx::read(&mut r).map_err(|_| SpentFromError::BadTransaction { index })?;
        if tx.has_witness() {
            return Err(SpentFromError::WithWitness { index });
        }
        out.push(tx.raw());
    }
    r.finish().map_err(|_| SpentFromError::Malformed)
}

/// Buffers for [`settle`], kept between disputes.
#[derive(Default)]
pub struct Settler {
    tweaks: Vec<[u8; 33]>,
    list: Vec<u8>,
}

/// The tweak hash of `block` (checked by the caller against our header at its height: its
/// hash, Merkle root, no mutation) worked out from the block and `spent_from`, the
/// transactions its inputs spend from: what every gateway's tweak hash there must be. The
/// block's witness commitment is checked; evidence that lacks a transaction the block
/// spends from, or that is malformed, is an [`EvidenceError`] naming it (the block is not
/// settled by it: the gateway that sent it withheld the proof).
pub fn settle(
    settler: &mut Settler,
    block: &CheckedBlock<'_>,
    spent_from: &[&[u8]],
) -> Result<FilterHash, EvidenceError> {
    tweaks_from_evidence(block, spent_from, &mut settler.tweaks)?;
    settler.list.clear();
    write_tweak_list(&mut settler.tweaks, &mut settler.list);
    Ok(tweak_list_hash(&settler.list))
}

#[cfg(test)]
pub(crate) mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use lightwire_primitives::{Block, BlockHash, Tx, write_compact_size};
    use sha2::Digest;

    pub(crate) const G: [u8; 33] = [
        0x02, 0x79, 0xbe, 0x66, 0x7e, 0xf9, 0xdc, 0xbb, 0xac, 0x55, 0xa0, 0x62, 0x95, 0xce, 0x87,
        0x0b, 0x07, 0x02, 0x9b, 0xfc, 0xdb, 0x2d, 0xce, 0x28, 0xd9, 0x59, 0xf2, 0x81, 0x5b, 0x16,
        0xf8, 0x17, 0x98,
    ];

    /// The list of block `h` of a made-up chain: `h % 3` tweaks, each `02 || h || i`.
    pub(crate) fn list(h: u32) -> Vec<u8> {
        let mut tweaks: Vec<[u8; 33]> = (0..h % 3)
            .map(|i| {
                let mut t = [0u8; 33];
                t[0] = 2;
                t[1..5].copy_from_slice(&h.to_be_bytes());
                t[5] = i as u8;
                t
            })
            .collect();
        let mut out = Vec::new();
        write_tweak_list(&mut tweaks, &mut out);
        out
    }

    /// The tweak headers of `lists` from genesis (the zero header before it).
    pub(crate) fn chain(lists: &[Vec<u8>]) -> (Vec<FilterHash>, Vec<FilterHeader>) {
        let hashes: Vec<FilterHash> = lists.iter().map(|l| tweak_list_hash(l)).collect();
        let mut at = FilterHeader([0; 32]);
        let headers = hashes
            .iter()
            .map(|h| {
                at = at.next(h);
                at
            })
            .collect();
        (hashes, headers)
    }

    pub(crate) fn before(headers: &[FilterHeader], first: u32) -> FilterHeader {
        match first {
            0 => FilterHeader([0; 32]),
            f => headers[f as usize - 1],
        }
    }

    /// Heights `first..=last` of a chain sent in `pieces` messages to a builder from the
    /// header before `first` to the one at `last`.
    pub(crate) fn send(
        b: &mut SpanBuilder,
        hashes: &[FilterHash],
        headers: &[FilterHeader],
        pieces: usize,
    ) -> Result<Option<Span>, TweakError> {
        let (first, last) = b.range();
        let all = first as usize..=last as usize;
        let n = all.clone().count();
        let per = n.div_ceil(pieces);
        let mut out = None;
        for (i, start) in all.clone().step_by(per).enumerate() {
            let end = (start + per).min(last as usize + 1);
            let is_last = i + 1 == pieces;
            out = b.push(
                start as u32,
                before(headers, start as u32),
                &hashes[start..end],
                &headers[start..end],
                is_last,
            )?;
        }
        Ok(out)
    }

    /// Gateways' words: each one's own, a second word at a height refused (the first
    /// stays), a ruled-out gateway's word no longer counting; a reorg drops the words above
    /// the fork, a passed height's go, and a gateway gone takes its words with it.
    #[test]
    fn what_the_gateways_vouch_for() {
        let (a, b, c) = (GatewayId(0), GatewayId(1), GatewayId(2));
        let h = |n: u8| FilterHeader([n; 32]);
        let mut v = Vouched::new(3);
        assert_eq!(v.word(a, 1000), None);
        for g in [a, b, c] {
            v.vouch(g, 1000, h(1)).unwrap();
        }
        v.vouch(a, 2000, h(2)).unwrap();
        v.vouch(b, 2000, h(9)).unwrap();
        v.vouch(a, 2500, h(3)).unwrap();
        assert_eq!((v.word(a, 2000), v.word(b, 2000)), (Some(h(2)), Some(h(9))));
        assert_eq!(
            v.vouch(b, 1000, h(7)),
            Err(TweakError::TwoWords { height: 1000 })
        );
        assert_eq!(v.word(b, 1000), Some(h(1)), "the first word stays");
        v.vouch(b, 1000, h(1)).unwrap();

        v.rule_out(b);
        assert!(v.is_out(b) && !v.is_out(a));
        assert_eq!(v.word(b, 2000), None);

        v.reorg(2000);
        assert_eq!(v.word(a, 2500), None, "above the fork");
        assert_eq!(v.word(a, 2000), Some(h(2)));
        v.forget_below(2000);
        assert_eq!(v.word(a, 1000), None, "a passed height goes");
        assert_eq!(v.word(a, 2000), Some(h(2)));
        v.forget(a);
        assert_eq!(v.word(a, 2000), None);
        assert_eq!(v.word(c, 1000), None, "below where the scan stands");
    }

    /// A span from the agreed header before it to the agreed one at its end is taken in
    /// one message or several, from genesis or from a checkpoint, and each honest list
    /// checks against it. What a lying gateway sends is refused with the rule it breaks:
    /// a span that starts elsewhere, one that ends elsewhere (a list changed and the
    /// headers rebuilt on it), one out of order or short, and lists that omit a tweak,
    /// change one, add many or are for another block.
    #[test]
    fn a_span_is_checked_from_anchor_to_end_and_each_list_against_it() {
        let lists: Vec<Vec<u8>> = (0..2_500).map(list).collect();
        let (hashes, headers) = chain(&lists);
        // From genesis to the first checkpoint (1,001 blocks), in one message.
        let mut b = SpanBuilder::new(0, 1000, FilterHeader([0; 32]), headers[1000]);
        let span = send(&mut b, &hashes, &headers, 1).unwrap().unwrap();
        assert_eq!((span.first(), span.last()), (0, 1000));
        // From a checkpoint to the next, in three messages.
        let mut b = SpanBuilder::new(1001, 2000, headers[1000], headers[2000]);
        let span = send(&mut b, &hashes, &headers, 3).unwrap().unwrap();
        assert_eq!(span.hashes(), &hashes[1001..=2000]);
        for h in [1001u32, 1500, 1502, 2000] {
            let l = span.check_list(h, &lists[h as usize]).unwrap();
            assert_eq!(l.len(), h as usize % 3);
        }

        // Lists a liar sends for block 1502 (two tweaks).
        let mut omitted = list(1502);
        omitted[0] = 1;
        omitted.truncate(1 + 33);
        let mut changed = list(1502);
        changed[40] ^= 1;
        let mut many: Vec<[u8; 33]> = (0..500u32)
            .map(|i| {
                let mut t = [3u8; 33];
                t[1..5].copy_from_slice(&i.to_be_bytes());
                t
            })
            .collect();
        let mut added = Vec::new();
        write_tweak_list(&mut many, &mut added);
        for bad in [&omitted, &changed, &added, &list(1503), &list(1500)] {
            assert_eq!(
                span.check_list(1502, bad).map(|_| ()),
                Err(TweakError::ListMismatch { height: 1502 })
            );
        }
        assert_eq!(
            span.check_list(2001, &lists[2001]).map(|_| ()),
            Err(TweakError::ListOutsideSpan { height: 2001 })
        );

        // A liar's chain: block 1502's list without its second tweak, headers rebuilt.
        let mut lying = lists.clone();
        lying[1502] = omitted.clone();
        let (l_hashes, l_headers) = chain(&lying);
        let mut b = SpanBuilder::new(1001, 2000, headers[1000], headers[2000]);
        assert_eq!(
            send(&mut b, &l_hashes, &l_headers, 2),
            Err(TweakError::EndMismatch { last: 2000 })
        );
        // The same span checked against the liar's own word is taken: what a dispute does.
        let mut b = SpanBuilder::new(1001, 2000, headers[1000], l_headers[2000]);
        let theirs = send(&mut b, &l_hashes, &l_headers, 2).unwrap().unwrap();
        assert_eq!(first_difference(&span, &theirs), Some(1502));
        assert_eq!(first_difference(&span, &span), None);

        // Another anchor: a chain whose first block differs starts nowhere we agreed.
        let mut b = SpanBuilder::new(1001, 2000, headers[999], headers[2000]);
        assert_eq!(
            send(&mut b, &hashes, &headers, 1),
            Err(TweakError::AnchorMismatch { first: 1001 })
        );
        // Out of order: the second message skips a block.
        let mut b = SpanBuilder::new(1001, 2000, headers[1000], headers[2000]);
        assert_eq!(
            b.push(
                1001,
                headers[1000],
                &hashes[1001..1101],
                &headers[1001..1101],
                false
            ),
            Ok(None)
        );
        let order = Err(TweakError::SpanOutOfOrder {
            first: 1001,
            last: 2000,
        });
        assert_eq!(
            b.push(
                1102,
                headers[1100],
                &hashes[1102..1200],
                &headers[1102..1200],
                false
            ),
            order
        );
        // A message that does not chain from the last one's end.
        assert_eq!(
            b.push(
                1101,
                headers[1000],
                &hashes[1101..1200],
                &headers[1101..1200],
                false
            ),
            order
        );
        // Past the end.
        assert_eq!(
            b.push(
                1101,
                headers[1100],
                &hashes[1101..2002],
                &headers[1101..2002],
                true
            ),
            order
        );
        // Short: the answer says it is over before the span's end.
        assert_eq!(
            b.push(
                1101,
                headers[1100],
                &hashes[1101..1200],
                &headers[1101..1200],
                true
            ),
            order
        );
    }

    /// HASH160.
    pub(crate) fn hash160(data: &[u8]) -> [u8; 20] {
        ripemd::Ripemd160::digest(sha2::Sha256::digest(data)).into()
    }

    /// A transaction of `inputs` (outpoint, scriptSig) and `outputs` (value, script).
    pub(crate) fn tx(inputs: &[Input], outputs: &[(u64, Vec<u8>)]) -> Vec<u8> {
        let mut t = vec![2, 0, 0, 0];
        write_compact_size(&mut t, inputs.len() as u64);
        for (outpoint, script) in inputs {
            t.extend_from_slice(outpoint);
            write_compact_size(&mut t, script.len() as u64);
            t.extend_from_slice(script);
            t.extend_from_slice(&[0xff; 4]);
        }
        write_compact_size(&mut t, outputs.len() as u64);
        for (value, script) in outputs {
            t.extend_from_slice(&value.to_le_bytes());
            write_compact_size(&mut t, script.len() as u64);
            t.extend_from_slice(script);
        }
        t.extend_from_slice(&[0; 4]);
        t
    }

    /// A transaction's input: its outpoint and scriptSig.
    pub(crate) type Input = ([u8; 36], Vec<u8>);

    /// The P2PKH script of key G, a transaction creating an output of it (what a block
    /// spending it spends from), and the input spending that output (outpoint, scriptSig).
    pub(crate) fn g_input() -> (Vec<u8>, Vec<u8>, Input) {
        let mut p2pkh = vec![0x76, 0xa9, 0x14];
        p2pkh.extend_from_slice(&hash160(&G));
        p2pkh.extend_from_slice(&[0x88, 0xac]);
        let source = tx(&[([7; 36], vec![0x51])], &[(50_000, p2pkh.clone())]);
        let mut outpoint = [0u8; 36];
        outpoint[..32].copy_from_slice(&Tx::parse(&source).unwrap().txid().0);
        // scriptSig: a signature's push (not checked here: a block's validity is its
        // header's), then the key's.
        let mut script_sig = vec![71];
        script_sig.extend_from_slice(&[0x30; 71]);
        script_sig.push(33);
        script_sig.extend_from_slice(&G);
        (p2pkh, source, (outpoint, script_sig))
    }

    /// A block of a coinbase and `txs`, its Merkle root set, and its hash.
    pub(crate) fn block_of(txs: &[Vec<u8>]) -> (Vec<u8>, BlockHash) {
        let mut coinbase_in = [0u8; 36];
        coinbase_in[32..].copy_from_slice(&[0xff; 4]);
        let coinbase = tx(&[(coinbase_in, vec![1, 1])], &[(0, vec![0x51])]);
        let mut raw = vec![0u8; 80];
        write_compact_size(&mut raw, txs.len() as u64 + 1);
        raw.extend_from_slice(&coinbase);
        for t in txs {
            raw.extend_from_slice(t);
        }
        let root = Block::parse(&raw).unwrap().merkle_root().0;
        raw[36..68].copy_from_slice(&root);
        let header: [u8; 80] = raw[..80].try_into().unwrap();
        (raw, BlockHash::of_header(&header))
    }

    /// A block paying a taproot output from a P2PKH output of key G, the transaction that
    /// created that output (the dispute's evidence), and the block's hash.
    pub(crate) fn paying_block() -> (Vec<u8>, Vec<u8>, BlockHash) {
        let (_, source, input) = g_input();
        let mut p2tr = vec![0x51, 0x20];
        p2tr.extend_from_slice(&[0x42; 32]);
        let paying = tx(&[input], &[(40_000, p2tr)]);
        let (raw, hash) = block_of(&[paying]);
        (raw, source, hash)
    }

    /// A dispute settled by content: the block and the transaction it spends from give the
    /// block's tweak list, which is the honest gateway's and not the liar's (it omitted the
    /// payment's tweak); evidence that lacks the transaction spent from settles nothing and
    /// says which is missing.
    #[test]
    fn the_evidence_gives_the_blocks_list() {
        let (raw, source, hash) = paying_block();
        let block = CheckedBlock::check(&raw, &hash).unwrap();
        let paying = block.transactions().nth(1).unwrap();
        let mut p2pkh = vec![0x76, 0xa9, 0x14];
        p2pkh.extend_from_slice(&hash160(&G));
        p2pkh.extend_from_slice(&[0x88, 0xac]);
        let t = lightwire_wallet::silent::tweak(&paying, &[&p2pkh]).unwrap();
        let mut honest = Vec::new();
        write_tweak_list(&mut [t], &mut honest);
        let mut liar = Vec::new();
        write_tweak_list(&mut [], &mut liar);

        let mut s = Settler::default();
        let proven = settle(&mut s, &block, &[&source]).unwrap();
        assert_eq!(proven, tweak_list_hash(&honest));
        assert_ne!(proven, tweak_list_hash(&liar));
        let txid = Tx::parse(&source).unwrap().txid();
        assert_eq!(
            settle(&mut s, &block, &[]),
            Err(EvidenceError::Missing { txid })
        );

        // The same evidence as a gateway sends it: pieces of a count and the transactions.
        let unrelated = tx(&[([3; 36], vec![0x51])], &[(1, vec![0x51])]);
        let mut answer = vec![2];
        answer.extend_from_slice(&unrelated);
        answer.extend_from_slice(&source);
        let mut got = SpentFrom::default();
        let mut offset = 0;
        let mut end = None;
        for chunk in answer.chunks(50) {
            let piece = lightwire_wire::BlockPiece {
                id: 1,
                last: offset + chunk.len() == answer.len(),
                not_found: false,
                block_len: answer.len() as u32,
                offset: offset as u32,
                data: chunk,
            };
            offset += chunk.len();
            end = got.push(&piece).unwrap();
        }
        assert_eq!(end, Some(true));
        let mut txs = Vec::new();
        spent_from_txs(got.bytes(), &mut txs).unwrap();
        assert_eq!(txs, [&unrelated[..], &source[..]]);
        assert_eq!(settle(&mut s, &block, &txs), Ok(proven));
        drop(txs);
        // Not found, and a piece out of place.
        assert_eq!(
            got.push(&lightwire_wire::BlockPiece::not_found(1)),
            Ok(Some(false))
        );
        let piece = lightwire_wire::BlockPiece {
            id: 1,
            last: false,
            not_found: false,
            block_len: 100,
            offset: 10,
            data: &[1; 10],
        };
        assert_eq!(
            got.push(&piece),
            Err(SpentFromError::OutOfOrder { offset: 10 })
        );

        // Answers that are not evidence, each refused with what is wrong.
        let with = |count: u8, rest: &[&[u8]]| {
            let mut a = vec![count];
            for r in rest {
                a.extend_from_slice(r);
            }
            a
        };
        // The same transaction with a marker, a flag and a witness of one one-byte item.
        let mut witness = source.clone();
        witness.splice(4..4, [0, 1]);
        let at = witness.len() - 4;
        witness.splice(at..at, [1, 1, 0x42]);
        assert!(Tx::parse(&witness).unwrap().has_witness());
        for (answer, want) in [
            (vec![], SpentFromError::Malformed),
            (with(9, &[&source]), SpentFromError::Malformed),
            (
                with(3, &[&source]),
                SpentFromError::BadTransaction { index: 1 },
            ),
            (with(1, &[&source, &[0]]), SpentFromError::Malformed),
            (
                with(2, &[&source, &source[..20]]),
                SpentFromError::BadTransaction { index: 1 },
            ),
            (
                with(1, &[&witness]),
                SpentFromError::WithWitness { index: 0 },
            ),
        ] {
            let mut txs = Vec::new();
            assert_eq!(spent_from_txs(&answer, &mut txs), Err(want), "{answer:?}");
        }
    }
}
