//! The filter-header dispute (`lightwire::dispute::Dispute`) as a state machine, driven
//! against an honest model: two gateways, one serving the honest chain of filters (the
//! generated test chain of 3,500 blocks), one a liar whose filter of one block is rewritten
//! (its filter headers rebuilt to match), either without the block's first output (a lie
//! the block proves) or with an item added (a lie it cannot prove). Our stored chain is
//! either side's; gateway 0 defends ours (it serves our chain, or is absent), gateway 1 is
//! the one the dispute is against. The liar may also add an item to a second block's filter
//! (a second lie the block cannot show), and the store may start from a checkpoint at
//! 1,001 with the liar's filter of 1,000 another (its anchor: every filter header differs
//! from there, while the filters a scan reads differ only where it lies).
//!
//! Input layout: byte 0 picks the lie's height (from a fixed list of edges: around the
//! checkpoints, the first block, the top; above 1,001 for a checkpoint store), byte 1 its
//! kind (even: the block proves it), whose chain is ours (bit 1), a second lie (bit 2) and
//! a checkpoint store (bit 3), byte 2 whether a defender is present (bit 0). The rest is
//! read as the run goes: for each answer the liar gives, one byte says how it answers
//! (honestly, empty, cut short, out of order, at other heights, garbage, not at all) and
//! what with.
//!
//! Checks, for any input:
//! - an honest gateway is never found bad, and when ours is the honest chain the verdict
//!   is never that ours was proven wrong;
//! - the dispute ends (a verdict, or the liar found bad) within a bounded number of steps,
//!   never stalling with nothing asked and nothing to read;
//! - every read of the store is of at most 1,001 heights (the memory a dispute holds), none
//!   below the first the store holds;
//! - every contested filter is the other side's own filter of that block, and when the
//!   liar answers everything honestly and the dispute ends undecided, every block where
//!   it told a lie the block cannot show was contested;
//! - when the liar answers everything honestly (its own chain) and its lie is one the
//!   block shows, the verdict names it: it is bad when it is the other side, ours is
//!   dropped when ours was its chain.
#![no_main]

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;
use lightwire::dispute::{Ask, Contested, Defence, Dispute, Outcome, Verdict};
use lightwire::filters::FilterAnswer;
use lightwire::ids::{GatewayId, Ids, TaskId};
use lightwire_fuzz_support::Cursor;
use lightwire_filter::filter_header;
use lightwire_primitives::{Block, BlockHash, FilterHash, FilterHeader};
use lightwire_proto::Served;
use lightwire_proto::session::FilterLookup;
use lightwire_proto::testing::TestChain;
use lightwire_wire::{AnswerFlags, BlockPiece, FilterCheckpoints, Filters};

const TOP: u32 = 3_500;
const HEIGHTS: [u32; 16] = [
    0, 1, 2, 999, 1_000, 1_001, 1_500, 1_999, 2_000, 2_001, 2_345, 2_999, 3_000, 3_001, 3_499,
    3_500,
];
const DEFENDER: GatewayId = GatewayId(0);
const AGAINST: GatewayId = GatewayId(1);
const MAX_STEPS: usize = 10_000;

/// The honest chain (built once, kept for the run, as are the liars': a static is a root
/// the leak checker sees).
fn honest() -> &'static TestChain {
    static HONEST: OnceLock<TestChain> = OnceLock::new();
    HONEST.get_or_init(|| TestChain::generate(TOP))
}

/// The first block a checkpoint store holds.
const BASE: u32 = 1_001;

/// What the liar's chain differs in: a lie at `at`, `provable` or not, a second one the
/// block cannot show at `second`, another anchor below [`BASE`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Lies {
    at: u32,
    provable: bool,
    second: Option<u32>,
    anchor: bool,
}

/// The filter of `height` in `c` without its first output (`provable`), or with an item
/// added.
fn lie(c: &mut TestChain, height: u32, provable: bool) {
    let block = c.block(height);
    let hash = c.header(height).block_hash();
    let parsed = Block::parse(&block).expect("a generated block parses");
    let outputs: Vec<Vec<u8>> = lightwire_filter::known_items(&parsed)
        .map(<[u8]>::to_vec)
        .collect();
    let mut items: Vec<&[u8]> = outputs.iter().map(Vec::as_slice).collect();
    if provable {
        items.remove(0);
    } else {
        items.push(b"an item the block cannot show");
    }
    let mut filter = Vec::new();
    lightwire_filter::build_filter(&hash.0, items, &mut filter);
    c.rewrite_filter(height, filter);
}

/// The liar's chain (built once, kept).
fn liar(lies: Lies) -> &'static TestChain {
    static LIARS: OnceLock<Mutex<HashMap<Lies, &'static TestChain>>> = OnceLock::new();
    let mut liars = LIARS
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    {
        *liars.entry(lies).or_insert_with(|| {
            let mut c = TestChain::generate(TOP);
            if lies.anchor {
                let hash = c.header(BASE - 1).block_hash();
                let mut f = Vec::new();
                lightwire_filter::build_filter(&hash.0, [&b"another anchor"[..]], &mut f);
                c.rewrite_filter(BASE - 1, f);
            }
            lie(&mut c, lies.at, lies.provable);
            if let Some(s) = lies.second {
                lie(&mut c, s, false);
            }
            Box::leak(Box::new(c))
        })
    }
}

const LAST: AnswerFlags = AnswerFlags {
    last: true,
    stop_unknown: false,
};

/// One party's answers: from `chain`, honestly unless it is the liar reading bytes.
struct Party<'c> {
    chain: &'c TestChain,
    honest: bool,
}

fn entry(c: &TestChain, h: u32) -> FilterHeader {
    c.filter_entry(h).map_or(FilterHeader::ZERO, |e| e.header)
}

fn hash(c: &TestChain, h: u32) -> BlockHash {
    c.header(h).block_hash()
}

/// How the liar answers this time (0 and anything unlisted: honestly).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    Honest,
    Empty,
    Short,
    Shifted,
    Garbage,
    Silent,
}

fn way(party: &Party<'_>, input: &mut Cursor<'_>) -> Way {
    if party.honest {
        return Way::Honest;
    }
    match input.u8() % 8 {
        1 => Way::Empty,
        2 => Way::Short,
        3 => Way::Shifted,
        4 => Way::Garbage,
        5 => Way::Silent,
        _ => Way::Honest,
    }
}

/// Answer `ask` as `party` from `g` the way `w`, feeding the dispute; the outcome, or
/// `None` when the party stays silent (the engine's timeout then drops it: the caller's to
/// model).
fn answer(
    d: &mut Dispute,
    g: GatewayId,
    party: &Party<'_>,
    ask: Ask,
    w: Way,
    input: &mut Cursor<'_>,
) -> Option<Outcome> {
    let c = party.chain;
    if w == Way::Silent {
        return None;
    }
    Some(match ask {
        Ask::Checkpoints { id, stop } => {
            let top = c.height_of(&stop).unwrap_or(TOP);
            let mut heights: Vec<u32> = (0..=top).step_by(1_000).collect();
            match w {
                Way::Empty => heights.clear(),
                Way::Short => {
                    heights.pop();
                }
                Way::Shifted => heights.retain(|h| h % 2_000 == 0),
                _ => {}
            }
            let mut flat = Vec::new();
            // Consecutive runs as separate messages: a gap is a new message.
            let mut out = Outcome::Going;
            let mut i = 0;
            while i < heights.len() {
                let first = heights[i];
                flat.clear();
                let mut j = i;
                while j < heights.len() && heights[j] == first + 1_000 * (j - i) as u32 {
                    let mut e = entry(c, heights[j]).0;
                    if w == Way::Garbage {
                        e[0] ^= input.u8();
                    }
                    flat.extend_from_slice(&e);
                    j += 1;
                }
                let m = FilterCheckpoints {
                    id,
                    first_height: first,
                    flags: AnswerFlags {
                        last: j == heights.len(),
                        stop_unknown: false,
                    },
                    headers: &flat,
                };
                out = d.on_checkpoints(&m);
                if out != Outcome::Going {
                    return Some(out);
                }
                i = j;
            }
            if heights.is_empty() {
                let m = FilterCheckpoints {
                    id,
                    first_height: 0,
                    flags: LAST,
                    headers: &[],
                };
                out = d.on_checkpoints(&m);
            }
            out
        }
        Ask::FilterHeaders { id, start, stop } => {
            let end = c.height_of(&stop).filter(|&h| h >= start).unwrap_or(TOP);
            let (first, last) = match w {
                Way::Empty => (start, start.wrapping_sub(1)),
                Way::Short => (start, end.saturating_sub(1 + u32::from(input.u8()))),
                Way::Shifted => (start + 1, end),
                _ => (start, end),
            };
            // As the connection hands them over: headers rebuilt from the hashes sent.
            let mut hashes: Vec<FilterHash> = (first..=last.min(TOP))
                .filter(|_| last >= first)
                .map(|h| c.filter_entry(h).map_or(FilterHash([0; 32]), |e| e.hash))
                .collect();
            if w == Way::Garbage
                && let Some(x) = hashes.get_mut(usize::from(input.u8()))
            {
                x.0[1] ^= 1;
            }
            let before = first
                .checked_sub(1)
                .map_or(FilterHeader::ZERO, |b| entry(c, b));
            let mut prev = before;
            let headers: Vec<FilterHeader> = hashes
                .iter()
                .map(|h| {
                    prev = filter_header(h, &prev);
                    prev
                })
                .collect();
            d.on_filter_headers(&FilterAnswer {
                id,
                first_height: first,
                flags: LAST,
                before,
                headers: &headers,
                hashes: &hashes,
            })
        }
        Ask::Filter { id, height, .. } => {
            let filter = match c.with_filter(height, <[u8]>::to_vec) {
                FilterLookup::Ready(f) => f,
                _ => Vec::new(),
            };
            let mut data = filter.clone();
            let mut len = filter.len() as u32;
            match w {
                Way::Empty => {
                    data.clear();
                    len = 0;
                }
                Way::Short => {
                    data.truncate(data.len() / 2);
                }
                Way::Garbage => {
                    if let Some(b) = data.get_mut(usize::from(input.u8())) {
                        *b ^= 0x55;
                    }
                }
                _ => {}
            }
            let piece_height = if w == Way::Shifted {
                height + 1
            } else {
                height
            };
            let mut body = Vec::new();
            let mut count = 0u16;
            if len > 0 || w != Way::Empty {
                body.extend_from_slice(&piece_height.to_be_bytes());
                body.extend_from_slice(&len.to_be_bytes());
                body.extend_from_slice(&0u32.to_be_bytes());
                body.extend_from_slice(&(data.len() as u16).to_be_bytes());
                body.extend_from_slice(&data);
                count = 1;
            }
            d.on_filters(
                g,
                &Filters {
                    id,
                    flags: LAST,
                    count,
                    body: &body,
                },
            )
        }
        Ask::Block { id, hash: want } => {
            let height = c.height_of(&want);
            let mut block = height.map(|h| c.block(h)).unwrap_or_default();
            match w {
                Way::Empty => return Some(d.on_block(g, &BlockPiece::not_found(id))),
                Way::Garbage => {
                    if let Some(b) = block.get_mut(80 + usize::from(input.u8())) {
                        *b ^= 1;
                    }
                }
                Way::Short => block.truncate(block.len() / 2),
                _ => {}
            }
            if block.is_empty() {
                return Some(d.on_block(g, &BlockPiece::not_found(id)));
            }
            d.on_block(
                g,
                &BlockPiece {
                    id,
                    last: true,
                    not_found: false,
                    block_len: block.len() as u32,
                    offset: 0,
                    data: &block,
                },
            )
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let mut input = Cursor::new(data);
    let picked = HEIGHTS[usize::from(input.u8()) % HEIGHTS.len()];
    let setup = input.u8();
    let provable = setup & 1 == 0;
    let ours_honest = setup & 2 == 0;
    let anchor = setup & 8 != 0;
    let lie_at = if anchor && picked <= BASE {
        picked + 1_100
    } else {
        picked
    };
    let second = (setup & 4 != 0).then_some(if lie_at < 3_200 { 3_210 } else { 1_210 });
    let base = if anchor { BASE } else { 0 };
    let mut defender_present = input.u8() & 1 == 1;
    {
        let honest = honest();
        let liar = liar(Lies {
            at: lie_at,
            provable,
            second,
            anchor,
        });
        let (ours, theirs) = if ours_honest {
            (honest, liar)
        } else {
            (liar, honest)
        };
        let defender = Party {
            chain: ours,
            honest: ours_honest,
        };
        let other = Party {
            chain: theirs,
            honest: !ours_honest,
        };
        let mut liar_honest = true;
        let mut d = Dispute::new(AGAINST, TOP, entry(theirs, TOP), base, Ids::new(TaskId::Check));
        let mut contested = Vec::new();
        let end = run(
            &mut d,
            &mut input,
            &defender,
            &other,
            &mut defender_present,
            &mut liar_honest,
            &mut contested,
            base,
        );
        contested.extend(d.take_contested());
        // Each contested filter is the other side's own.
        for c in &contested {
            let FilterLookup::Ready(f) = theirs.with_filter(c.height, <[u8]>::to_vec) else {
                panic!("contested {} where the other side has no filter", c.height);
            };
            assert_eq!((c.hash, &c.filter), (hash(theirs, c.height), &f));
        }
        let Some(end) = end else {
            panic!("the dispute did not end within {MAX_STEPS} steps");
        };
        // Nothing honest is ever found wrong.
        match end {
            End::Bad(g) => assert!(
                !(g == AGAINST && !ours_honest) && !(g == DEFENDER && ours_honest),
                "an honest gateway found bad"
            ),
            End::Over(Verdict::OursWrong { .. }) => {
                assert!(!ours_honest, "ours, honest, proven wrong")
            }
            _ => {}
        }
        // A lie the block shows, told consistently, is found.
        if provable && liar_honest {
            let found = match end {
                End::Bad(g) => g == AGAINST && ours_honest,
                End::Over(Verdict::OursWrong { .. } | Verdict::OursUndefended { .. }) => {
                    !ours_honest
                }
                _ => false,
            };
            assert!(found, "a provable lie at {lie_at} not found: {:?}", end);
        }
        // Told honestly, every lie the block cannot show is contested when undecided.
        if liar_honest && let End::Over(Verdict::Undecided { .. }) = end {
            let unprovable = (!provable).then_some(lie_at).into_iter().chain(second);
            for u in unprovable {
                assert!(
                    contested.iter().any(|c| c.height == u),
                    "{u} not contested: {:?}",
                    contested.iter().map(|c| c.height).collect::<Vec<_>>()
                );
            }
        }
    }
});

#[derive(Debug, Clone, Copy)]
enum End {
    Bad(GatewayId),
    Over(Verdict),
}

/// Drive `d` to its end; `None` when it did not end within [`MAX_STEPS`].
fn run(
    d: &mut Dispute,
    input: &mut Cursor<'_>,
    defender: &Party<'_>,
    other: &Party<'_>,
    defender_present: &mut bool,
    liar_honest: &mut bool,
    contested: &mut Vec<Contested>,
    base: u32,
) -> Option<End> {
    let ours = defender.chain;
    for _ in 0..MAX_STEPS {
        contested.extend(d.take_contested());
        if let Some((from, to)) = d.need_read(Some(TOP)) {
            assert!(to >= from && to - from <= 1_000, "a read of {from}..={to}");
            assert!(from >= base, "a read of {from}, below the store");
            let hashes: Vec<BlockHash> = (from..=to).map(|h| hash(ours, h)).collect();
            let headers: Vec<FilterHeader> = (from..=to).map(|h| entry(ours, h)).collect();
            match d.on_read(from, &hashes, &headers) {
                Outcome::Going => continue,
                Outcome::Over(v) => return Some(End::Over(v)),
                Outcome::Bad(g, _) => return Some(End::Bad(g)),
            }
        }
        let defence = if *defender_present {
            Defence::By(DEFENDER)
        } else {
            Defence::Nobody
        };
        let (g, ask) = match d.next_ask(defence) {
            Err(Outcome::Over(v)) => return Some(End::Over(v)),
            Err(Outcome::Bad(g, _)) => return Some(End::Bad(g)),
            Err(Outcome::Going) => panic!("next_ask ended with nothing"),
            Ok(None) => panic!("stalled: nothing asked, nothing to read"),
            Ok(Some(next)) => next,
        };
        let party = if g == AGAINST { other } else { defender };
        let w = way(party, input);
        if w != Way::Honest {
            *liar_honest = false;
        }
        let outcome = answer(d, g, party, ask, w, input);
        match outcome {
            None => {
                // Silent: the engine's timeout drops it.
                if g == AGAINST {
                    return Some(End::Over(Verdict::Undecided { height: d.height() }));
                }
                *defender_present = false;
                if let Some(v) = d.gateway_gone(g) {
                    return Some(End::Over(v));
                }
            }
            Some(Outcome::Going) => {}
            Some(Outcome::Over(v)) => return Some(End::Over(v)),
            Some(Outcome::Bad(b, _)) => {
                if b == AGAINST {
                    return Some(End::Bad(b));
                }
                // A defender found bad: dropped; the dispute goes on without it.
                assert!(!party.honest || b != g, "an honest defender found bad");
                if b == DEFENDER && defender.honest {
                    return Some(End::Bad(b));
                }
                *defender_present = false;
                if let Some(v) = d.gateway_gone(b) {
                    return Some(End::Over(v));
                }
            }
        }
    }
    None
}
