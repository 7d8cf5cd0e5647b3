//! The scan against gateways modelled here: honest ones, and liars that leave out, change
//! or add tweaks of the paying block, withhold the proof, break their word between
//! windows, or send lists, filters and blocks that are not the chain's.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use super::*;
use crate::tweaks::tests::{G, block_of, chain, g_input, tx};
use lightwire_filter::{basic_filter, build_filter};
use lightwire_primitives::{FilterHash, Tx, write_compact_size, write_tweak_list};
use lightwire_wire::FiltersWriter;
use std::cell::Cell;

const SCAN: [u8; 32] = [0x11; 32];
/// The time the scan is driven at (its waits are the engine's tests').
const NOW: Millis = Millis(1_000_000);
/// The paying block's height, and the chain's top: three windows, the payment in the
/// second.
const PAID: u32 = 1502;
const TOP: u32 = 2300;

thread_local! {
    /// Whether [`run`] hands the filter checks out ([`SilentScan::offload`]).
    static OFFLOAD: Cell<bool> = const { Cell::new(false) };
    /// What [`run`] offers the scan as filters another reader took
    /// ([`SilentScan::take_kept`]): none, ours, or a wrong one for every block.
    static KEPT: Cell<Kept> = const { Cell::new(Kept::None) };
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kept {
    None,
    Ours,
    Wrong,
}

fn receiver() -> Receiver {
    Receiver::new(&SCAN, &G).unwrap()
}

/// The chain as our store and an honest gateway hold it.
struct World {
    hashes: Vec<BlockHash>,
    filters: Vec<Vec<u8>>,
    /// The filter header before each block (zero before genesis), then each block's.
    filter_headers: Vec<FilterHeader>,
    lists: Vec<Vec<u8>>,
    block: Vec<u8>,
    /// What the paying block spends from, as `spent_from` carries it.
    spent_from: Vec<u8>,
    /// The paying transaction's tweak and the key it pays.
    tweak: [u8; 33],
    key: [u8; 32],
}

fn list_of(mut tweaks: Vec<[u8; 33]>) -> Vec<u8> {
    let mut out = Vec::new();
    write_tweak_list(&mut tweaks, &mut out);
    out
}

fn world() -> World {
    // The paying transaction spends a P2PKH output of key G and pays the receiver's
    // first key for its tweak (which its inputs alone fix).
    let (p2pkh, source, input) = g_input();
    let inputs = [input];
    // A transaction has a tweak only if it pays a taproot output: any key will do here.
    let mut placeholder = vec![0x51, 0x20];
    placeholder.extend_from_slice(&[0x42; 32]);
    let draft = tx(&inputs, &[(40_000, placeholder)]);
    let tweak = lightwire_wallet::silent::tweak(&Tx::parse(&draft).unwrap(), &[&p2pkh]).unwrap();
    let mut keys = Vec::new();
    receiver().first_keys(&tweak, &mut keys).unwrap();
    let key = keys[0];
    let mut p2tr = vec![0x51, 0x20];
    p2tr.extend_from_slice(&key);
    let (block, paid_hash) = block_of(&[tx(&inputs, &[(40_000, p2tr)])]);
    let mut spent_from = Vec::new();
    write_compact_size(&mut spent_from, 1);
    spent_from.extend_from_slice(&source);

    let mut w = World {
        hashes: Vec::new(),
        filters: Vec::new(),
        filter_headers: vec![FilterHeader([0; 32])],
        lists: Vec::new(),
        block,
        spent_from,
        tweak,
        key,
    };
    for h in 0..=TOP {
        let hash = if h == PAID {
            paid_hash
        } else {
            let mut b = [0u8; 32];
            b[..4].copy_from_slice(&h.to_le_bytes());
            b[31] = 0xaa;
            BlockHash(b)
        };
        let mut filter = Vec::new();
        if h == PAID {
            basic_filter(&hash.0, &w.block, [&p2pkh[..]], &mut filter).unwrap();
            w.lists.push(list_of(vec![tweak]));
        } else {
            let item = [0x51, h as u8, (h >> 8) as u8];
            build_filter(&hash.0, [&item[..]], &mut filter);
            // Every seventh block has one tweak (G: a point, paying nobody here).
            w.lists
                .push(list_of(if h % 7 == 0 { vec![G] } else { Vec::new() }));
        }
        let before = *w.filter_headers.last().unwrap();
        w.filter_headers
            .push(filter_header(&filter_hash(&filter), &before));
        w.hashes.push(hash);
        w.filters.push(filter);
    }
    w
}

/// How a modelled gateway lies.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Lie {
    /// It does not.
    Honest,
    /// It leaves the paying tweak out of the paying block's list.
    Omit,
    /// It changes the paying tweak (to G).
    Change,
    /// It adds 500 tweaks to the paying block's list.
    Add,
    /// Its tweak chain is honest, but it sends the paying block's list without the tweak.
    ListOnly,
    /// Its filter of the paying block is another.
    Filter,
    /// Its paying block is another (a byte of the coinbase changed).
    BadBlock,
    /// Its tweak chain is honest, but it sends the paying block's list longer than any
    /// block's.
    TooLong,
}

struct Gateway {
    lie: Lie,
    /// It answers `not_found` for the paying block and what it spends from.
    withholds: bool,
    /// Its tweaks are computed up to this height only: a span past it ends short.
    computed: Option<u32>,
    /// It serves tweaks (else it is asked only for filters and blocks).
    tweaks: bool,
    presence: Presence,
    lists: Vec<Vec<u8>>,
    hashes: Vec<FilterHash>,
    headers: Vec<FilterHeader>,
    /// How many times it was asked for tweak lists.
    list_asks: std::cell::Cell<u32>,
    /// How many times it was asked for filters.
    filter_asks: std::cell::Cell<u32>,
}

fn gateway(w: &World, lie: Lie) -> Gateway {
    let mut lists = w.lists.clone();
    let paid = PAID as usize;
    match lie {
        Lie::Omit => lists[paid] = list_of(Vec::new()),
        Lie::Change => lists[paid] = list_of(vec![G]),
        Lie::Add => {
            // Points 2G, 3G, ... are not at hand without curve arithmetic here: the
            // receiver's own first key, lifted, is one (its x with an even y), then G.
            let mut many = vec![w.tweak, G];
            let mut k = [0u8; 33];
            k[0] = 2;
            k[1..].copy_from_slice(&w.key);
            many.push(k);
            lists[paid] = list_of(many);
        }
        _ => {}
    }
    let (hashes, headers) = chain(&lists);
    if lie == Lie::ListOnly {
        lists[paid] = list_of(Vec::new());
    }
    if lie == Lie::TooLong {
        lists[paid] = vec![0; MAX_LIST_LEN + 1];
    }
    Gateway {
        lie,
        withholds: false,
        computed: None,
        tweaks: true,
        presence: Presence::Ready,
        lists,
        hashes,
        headers,
        list_asks: std::cell::Cell::new(0),
        filter_asks: std::cell::Cell::new(0),
    }
}

/// Messages of `items` (height, bytes) as a `tweaks` or `filters` answer to `id`.
fn pieces(id: u32, items: &[(u32, &[u8])], stop_unknown: bool) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65_535];
    let mut i = 0;
    let mut offset = 0;
    loop {
        let mut wr = FiltersWriter::new(&mut buf, id).unwrap();
        while i < items.len() {
            let (h, bytes) = items[i];
            let Some(n) = wr.push(h, bytes, offset) else {
                break;
            };
            offset += n;
            if offset == bytes.len() {
                i += 1;
                offset = 0;
            }
        }
        let last = i == items.len();
        let len = wr.finish(AnswerFlags {
            last,
            stop_unknown: stop_unknown && last,
        });
        out.push(buf[2..len].to_vec());
        if last {
            return out;
        }
    }
}

fn height_of(w: &World, stop: &BlockHash) -> u32 {
    w.hashes.iter().position(|h| h == stop).unwrap() as u32
}

/// Gateway `g` answers `ask`.
fn answer(scan: &mut SilentScan, w: &World, gw: &Gateway, g: GatewayId, ask: SilentAsk) {
    let last = |first: u32, stop: &BlockHash| (first, height_of(w, stop));
    match ask {
        SilentAsk::Range {
            what: Range::TweakHeaders,
            id,
            first,
            stop,
        } => {
            let (a, b) = last(first, &stop);
            // Past what it computed: the answer ends there (empty when it lacks them all).
            let end = gw.computed.map_or(b, |c| b.min(c)) as usize + 1;
            let (a, end) = (a as usize, end.max(a as usize));
            let before = match a {
                0 => FilterHeader([0; 32]),
                _ => gw.headers[a - 1],
            };
            let flags = AnswerFlags {
                last: true,
                stop_unknown: false,
            };
            let m = FilterAnswer {
                id,
                first_height: first,
                flags,
                before,
                headers: &gw.headers[a..end],
                hashes: &gw.hashes[a..end],
            };
            scan.on_span(g, &m);
        }
        SilentAsk::Range {
            what: Range::Tweaks,
            id,
            first,
            stop,
        } => {
            gw.list_asks.set(gw.list_asks.get() + 1);
            let (a, b) = last(first, &stop);
            let items: Vec<(u32, &[u8])> =
                (a..=b).map(|h| (h, &gw.lists[h as usize][..])).collect();
            for m in pieces(id, &items, false) {
                scan.on_tweaks(g, &Filters::decode_payload(&m).unwrap());
            }
        }
        SilentAsk::Range {
            what: Range::Filters,
            id,
            first,
            stop,
        } => {
            gw.filter_asks.set(gw.filter_asks.get() + 1);
            let (a, b) = last(first, &stop);
            let other = [1u8, 0x42];
            let items: Vec<(u32, &[u8])> = (a..=b)
                .map(|h| match gw.lie {
                    Lie::Filter if h == PAID => (h, &other[..]),
                    _ => (h, &w.filters[h as usize][..]),
                })
                .collect();
            for m in pieces(id, &items, false) {
                scan.on_filters(g, &Filters::decode_payload(&m).unwrap());
            }
        }
        SilentAsk::Fetch(TweakAsk::Block { id, hash }) => {
            let mut block = w.block.clone();
            if gw.lie == Lie::BadBlock {
                block[90] ^= 1;
            }
            let p = if hash == w.hashes[PAID as usize] && !gw.withholds {
                BlockPiece {
                    id,
                    last: true,
                    not_found: false,
                    block_len: block.len() as u32,
                    offset: 0,
                    data: &block,
                }
            } else {
                not_found(id)
            };
            scan.on_block(g, &p);
        }
        SilentAsk::Fetch(TweakAsk::SpentFrom { id, hash }) => {
            let p = if hash == w.hashes[PAID as usize] && !gw.withholds {
                BlockPiece {
                    id,
                    last: true,
                    not_found: false,
                    block_len: w.spent_from.len() as u32,
                    offset: 0,
                    data: &w.spent_from,
                }
            } else {
                not_found(id)
            };
            scan.on_spent_from(g, &p);
        }
        SilentAsk::Fetch(TweakAsk::Span { .. }) => panic!("the scan asks no dispute span"),
    }
}

fn not_found(id: u32) -> BlockPiece<'static> {
    BlockPiece {
        id,
        last: true,
        not_found: true,
        block_len: 0,
        offset: 0,
        data: &[],
    }
}

/// Drive the scan to `top` against `gws`, each answering at once; a gateway found bad is
/// dropped (as the engine drops it). Returns what the scan told.
fn run(scan: &mut SilentScan, w: &World, gws: &mut [Gateway], top: u32) -> Vec<SilentEvent> {
    run_at(scan, w, gws, top, NOW)
}

/// [`run`] at `now`.
fn run_at(
    scan: &mut SilentScan,
    w: &World,
    gws: &mut [Gateway],
    top: u32,
    now: Millis,
) -> Vec<SilentEvent> {
    let mut told = Vec::new();
    // Filter checks handed out are run here and answered as late as can be (once nothing
    // else is asked), last first.
    scan.offload(OFFLOAD.with(Cell::get));
    let me = scan.receiver.clone();
    let mut helper = BlockScanner::new();
    let mut pending = Vec::new();
    for _ in 0..100_000 {
        let mut heard = false;
        while let Some(e) = scan.poll_event() {
            if let SilentEvent::Bad(g, _) = &e {
                gws[g.0].presence = Presence::Absent;
                scan.gateway_gone(*g);
            }
            told.push(e);
            heard = true;
        }
        if let Some((a, b)) = scan.need_data(top) {
            let (a, b) = (a as usize, b as usize);
            scan.on_data(a as u32, &w.hashes[a..=b], &w.filter_headers[a..=b + 1]);
            continue;
        }
        let presence = |g: GatewayId| gws[g.0].presence;
        let serves = |g: GatewayId, what| what != Serves::Tweaks || gws[g.0].tweaks;
        let wrong = [1u8, 0x42];
        let took = match KEPT.with(Cell::get) {
            Kept::None => false,
            Kept::Ours => scan.take_kept(&|h, hash| {
                (w.hashes.get(h as usize) == Some(hash)).then(|| &w.filters[h as usize][..])
            }),
            Kept::Wrong => scan.take_kept(&|_, _| Some(&wrong[..])),
        };
        if took {
            continue;
        }
        while let Some(j) = scan.next_job() {
            let r = scan_filter(&mut helper, &me, j.list, j.filter, &j.hash);
            pending.push((j.tag, j.height, r));
        }
        match scan.next_ask(now, presence, serves) {
            Some((g, ask)) => answer(scan, w, &gws[g.0], g, ask),
            None if let Some((tag, height, r)) = pending.pop() => scan.on_scanned(tag, height, r),
            // Nothing to ask, and nothing told since the last look: it waits.
            None if !heard && scan.events.is_empty() => return told,
            None => {}
        }
    }
    panic!("the scan did not settle");
}

fn found(told: &[SilentEvent]) -> Vec<(u32, [u8; 32])> {
    told.iter()
        .filter_map(|e| match e {
            SilentEvent::Found {
                height, payments, ..
            } => Some(
                payments
                    .iter()
                    .map(|p| (*height, p.found.key))
                    .collect::<Vec<_>>(),
            ),
            _ => None,
        })
        .flatten()
        .collect()
}

fn bad(told: &[SilentEvent]) -> Vec<(GatewayId, SilentFault)> {
    told.iter()
        .filter_map(|e| match e {
            SilentEvent::Bad(g, f) => Some((*g, *f)),
            _ => None,
        })
        .collect()
}

/// One honest gateway: the scan goes over three windows, fetches only the paying block
/// (the others' filters hold none of the receiver's keys), and finds its payment.
#[test]
fn an_honest_gateway_alone_gives_the_payment() {
    let w = world();
    let mut gws = [gateway(&w, Lie::Honest)];
    let mut scan = SilentScan::new(receiver(), 0, 1);
    let told = run(&mut scan, &w, &mut gws, TOP);
    assert_eq!(found(&told), [(PAID, w.key)], "{told:?}");
    assert_eq!(bad(&told), []);
    assert_eq!(scan.next(), TOP + 1);
    // Every seventh block's tweak, and the paying one's, went through a filter.
    assert_eq!(scan.tweaks_scanned(), u64::from(TOP / 7 + 1) + 1);

    // From above the payment, nothing is found.
    let mut later = SilentScan::new(receiver(), PAID + 1, 1);
    assert_eq!(found(&run(&mut later, &w, &mut gws, TOP)), []);
}

/// The liars a lone gateway's word cannot catch (nothing to compare it with): each hides
/// the payment when alone. Beside an honest gateway (before or after it in the list),
/// each is proven wrong at the paying block by the block and what it spends from, and
/// the payment is found.
#[test]
fn beside_an_honest_gateway_no_liar_hides_the_payment() {
    let w = world();
    for lie in [Lie::Omit, Lie::Change, Lie::Add] {
        let mut alone = [gateway(&w, lie)];
        let told = run(&mut SilentScan::new(receiver(), 0, 1), &w, &mut alone, TOP);
        if lie != Lie::Add {
            assert_eq!(found(&told), [], "{lie:?} alone hides it");
        }
        for liar_first in [true, false] {
            let (liar, honest) = if liar_first { (0, 1) } else { (1, 0) };
            let mut gws = [gateway(&w, Lie::Honest), gateway(&w, Lie::Honest)];
            gws[liar] = gateway(&w, lie);
            let mut scan = SilentScan::new(receiver(), 0, 2);
            let told = run(&mut scan, &w, &mut gws, TOP);
            assert_eq!(found(&told), [(PAID, w.key)], "{lie:?}: {told:?}");
            assert_eq!(
                bad(&told),
                [(GatewayId(liar), SilentFault::Disproven { height: PAID })],
                "{lie:?}"
            );
            assert_eq!(gws[honest].presence, Presence::Ready);
            assert_eq!(scan.next(), TOP + 1);
        }
    }
}

/// A liar that withholds the proof: an honest gateway gives it, and the liar is proven
/// wrong. When nobody gives it, nothing is proven: the scan stalls below the paying
/// block (never takes either side's list there) until the chain moves.
#[test]
fn a_withheld_proof_is_taken_from_another_or_the_scan_stalls() {
    let w = world();
    let mut gws = [gateway(&w, Lie::Omit), gateway(&w, Lie::Honest)];
    gws[0].withholds = true;
    let told = run(&mut SilentScan::new(receiver(), 0, 2), &w, &mut gws, TOP);
    assert_eq!(found(&told), [(PAID, w.key)]);
    assert_eq!(
        bad(&told),
        [(GatewayId(0), SilentFault::Disproven { height: PAID })]
    );

    let mut gws = [gateway(&w, Lie::Omit), gateway(&w, Lie::Honest)];
    gws[0].withholds = true;
    gws[1].withholds = true;
    let mut scan = SilentScan::new(receiver(), 0, 2);
    let told = run(&mut scan, &w, &mut gws, TOP);
    assert_eq!(found(&told), []);
    assert_eq!(bad(&told), []);
    assert!(told.contains(&SilentEvent::Stalled { height: PAID }));
    assert!(
        scan.next() <= PAID,
        "nothing at or above the split is scanned"
    );
    assert_eq!(
        scan.wake_at(),
        None,
        "a stall waits for the chain, not a time"
    );
    // The honest one can give the proof again: a new tip asks anew.
    gws[1].withholds = false;
    scan.unblock();
    let told = run(&mut scan, &w, &mut gws, TOP);
    assert_eq!(found(&told), [(PAID, w.key)], "{told:?}");
    assert_eq!(
        bad(&told),
        [(GatewayId(0), SilentFault::Disproven { height: PAID })]
    );
}

/// A gateway still connecting is waited for before the words are compared: the liar's
/// span alone is not taken while the honest one handshakes.
#[test]
fn a_gateway_still_connecting_is_waited_for() {
    let w = world();
    let mut gws = [gateway(&w, Lie::Omit), gateway(&w, Lie::Honest)];
    gws[1].presence = Presence::Coming;
    let mut scan = SilentScan::new(receiver(), 1400, 2);
    let told = run(&mut scan, &w, &mut gws, TOP);
    assert_eq!(told, []);
    assert_eq!(scan.next(), 1400, "nothing taken on the liar's word alone");
    gws[1].presence = Presence::Ready;
    let told = run(&mut scan, &w, &mut gws, TOP);
    assert_eq!(found(&told), [(PAID, w.key)]);
}

/// What breaks a rule whatever the chain holds is its sender's fault, and another is
/// asked: a list that does not hash to the agreed hash, a filter that does not chain to
/// our filter header, a block that is not our header's.
#[test]
fn a_bad_list_filter_or_block_is_its_senders_fault() {
    let w = world();
    for (lie, fault) in [
        (
            Lie::ListOnly,
            SilentFault::Tweaks(TweakError::ListMismatch { height: PAID }),
        ),
        (Lie::Filter, SilentFault::FilterMismatch { height: PAID }),
        (
            Lie::BadBlock,
            SilentFault::Block {
                height: PAID,
                error: BlockError::MerkleRootMismatch,
            },
        ),
    ] {
        let mut gws = [gateway(&w, lie), gateway(&w, Lie::Honest)];
        let told = run(&mut SilentScan::new(receiver(), 1000, 2), &w, &mut gws, TOP);
        assert_eq!(found(&told), [(PAID, w.key)], "{lie:?}: {told:?}");
        assert_eq!(bad(&told), [(GatewayId(0), fault)], "{lie:?}");
    }
}

/// A gateway that tells another tweak header where one window starts than where the
/// window before ended broke its word.
#[test]
fn a_gateway_that_changes_its_word_between_windows_is_bad() {
    let w = world();
    let mut gws = [gateway(&w, Lie::Honest), gateway(&w, Lie::Honest)];
    let mut scan = SilentScan::new(receiver(), 0, 2);
    run(&mut scan, &w, &mut gws, 999);
    assert_eq!(scan.next(), 1000);
    // Gateway 0 now tells the omitting chain: its header at 999 is the same (the lie is
    // above), so it is caught at the paying block; gateway 1 tells a chain whose every
    // header differs, so its span of the next window does not start from its word.
    gws[0] = gateway(&w, Lie::Omit);
    let mut shifted = w.lists.clone();
    shifted[5] = list_of(vec![G]);
    let (hashes, headers) = chain(&shifted);
    gws[1].hashes = hashes;
    gws[1].headers = headers;
    let told = run(&mut scan, &w, &mut gws, TOP);
    assert_eq!(
        bad(&told),
        [(
            GatewayId(1),
            SilentFault::Tweaks(TweakError::TwoWords { height: 999 })
        )],
        "{told:?}"
    );
    // Gateway 0 is then alone: its omission is not caught (nothing to compare it with).
    assert_eq!(found(&told), []);
}

/// A reorganisation below where the scan stands sends it back to the fork, and the
/// payment above it is found again.
#[test]
fn a_reorg_scans_again_from_the_fork() {
    let w = world();
    let mut gws = [gateway(&w, Lie::Honest)];
    let mut scan = SilentScan::new(receiver(), 1000, 1);
    assert_eq!(found(&run(&mut scan, &w, &mut gws, TOP)), [(PAID, w.key)]);
    assert_eq!(scan.reorg(1400), []);
    assert_eq!(scan.next(), 1401);
    assert_eq!(found(&run(&mut scan, &w, &mut gws, TOP)), [(PAID, w.key)]);
    // A reorg below the scan's start goes back to its start, no further.
    scan.reorg(10);
    assert_eq!(scan.next(), 1000);
}

/// A gateway whose tweaks are not computed that far yet (its span ends short) broke no
/// rule: it is asked again, and the window waits for it (up to `LAG_WAIT`) rather than
/// take a liar's word alone; once it catches up, the liar is proven wrong. Alone, such a
/// gateway leaves the scan below what it lacks until it catches up. Past the wait, the
/// others' words are compared without it.
#[test]
fn a_gateway_still_computing_its_tweaks_is_waited_for_and_asked_again() {
    let w = world();
    let mut gws = [gateway(&w, Lie::Omit), gateway(&w, Lie::Honest)];
    gws[1].computed = Some(1200);
    let mut scan = SilentScan::new(receiver(), 1400, 2);
    let told = run(&mut scan, &w, &mut gws, TOP);
    assert_eq!((told.clone(), scan.next()), (vec![], 1400), "{told:?}");
    let retry = scan.wake_at().expect("a wake-up to ask again");
    assert!(retry > NOW && retry <= NOW + SILENT_RETRY);
    // Asked again before the wait runs out, it has caught up.
    gws[1].computed = None;
    let told = run_at(&mut scan, &w, &mut gws, TOP, retry);
    assert_eq!(found(&told), [(PAID, w.key)], "{told:?}");
    assert_eq!(
        bad(&told),
        [(GatewayId(0), SilentFault::Disproven { height: PAID })]
    );

    // Alone and lagging: nothing taken, nobody bad; caught up, found.
    let mut alone = [gateway(&w, Lie::Honest)];
    alone[0].computed = Some(1450);
    let mut scan = SilentScan::new(receiver(), 1000, 1);
    let told = run(&mut scan, &w, &mut alone, TOP);
    assert_eq!((found(&told), bad(&told)), (vec![], vec![]));
    assert_eq!(scan.next(), 1000);
    alone[0].computed = None;
    let told = run_at(&mut scan, &w, &mut alone, TOP, NOW + SILENT_RETRY);
    assert_eq!(found(&told), [(PAID, w.key)]);

    // One that never catches up: after the wait the others are compared without it.
    let mut gws = [gateway(&w, Lie::Honest), gateway(&w, Lie::Honest)];
    gws[1].computed = Some(10);
    let mut scan = SilentScan::new(receiver(), 1000, 2);
    assert_eq!(run(&mut scan, &w, &mut gws, TOP), []);
    let mut now = NOW;
    let mut told = Vec::new();
    while now <= NOW + LAG_WAIT + SILENT_RETRY && found(&told).is_empty() {
        now = scan.wake_at().expect("a wake-up while it lags").max(now);
        told.extend(run_at(&mut scan, &w, &mut gws, TOP, now));
    }
    assert!(now >= NOW + LAG_WAIT, "not taken before the wait ran out");
    assert_eq!(found(&told), [(PAID, w.key)]);
    assert_eq!(bad(&told), []);
}

/// A chunk's lists are bounded in bytes: past the budget the chunk ends before the block
/// that would pass it (the rest of that answer let through unread) and the next chunk
/// starts there; the scan finds what it finds without the budget. A list longer than any
/// block's is its sender's fault alone, and another gateway's list is taken.
#[test]
fn a_chunks_lists_are_bounded_and_a_list_longer_than_any_blocks_is_refused() {
    let w = world();
    let mut gws = [gateway(&w, Lie::Honest)];
    let mut scan = SilentScan::new(receiver(), 1400, 1);
    let told = run(&mut scan, &w, &mut gws, TOP);
    let whole = gws[0].list_asks.get();
    assert_eq!(found(&told), [(PAID, w.key)]);

    let mut gws = [gateway(&w, Lie::Honest)];
    let mut scan = SilentScan::new(receiver(), 1400, 1);
    // About one list of a tweak (34 bytes) and a few empty ones a chunk.
    scan.chunk_bytes = 40;
    let told = run(&mut scan, &w, &mut gws, TOP);
    assert_eq!(found(&told), [(PAID, w.key)], "{told:?}");
    assert_eq!(bad(&told), []);
    assert_eq!(scan.next(), TOP + 1);
    let asks = gws[0].list_asks.get();
    assert!(
        asks > 5 * whole,
        "{asks} chunks, {whole} without the budget"
    );

    let mut gws = [gateway(&w, Lie::TooLong), gateway(&w, Lie::Honest)];
    let told = run(&mut SilentScan::new(receiver(), 1400, 2), &w, &mut gws, TOP);
    assert_eq!(found(&told), [(PAID, w.key)]);
    assert_eq!(
        bad(&told),
        [(GatewayId(0), SilentFault::ListTooLong { height: PAID })]
    );
}

/// Every gateway that gave a window's agreed hashes gone before its lists came: the hashes
/// are asked again of the gateways present, and the scan goes on with them.
#[test]
fn the_givers_gone_the_window_is_asked_of_those_present() {
    let w = world();
    let mut gws = [gateway(&w, Lie::Honest), gateway(&w, Lie::Honest)];
    gws[1].tweaks = false;
    let mut scan = SilentScan::new(receiver(), 1400, 2);
    let (a, b) = scan.need_data(TOP).unwrap();
    let (a, b) = (a as usize, b as usize);
    scan.on_data(a as u32, &w.hashes[a..=b], &w.filter_headers[a..=b + 1]);
    let ask = |scan: &mut SilentScan, gws: &[Gateway]| {
        let presence = |g: GatewayId| gws[g.0].presence;
        let serves = |g: GatewayId, what| what != Serves::Tweaks || gws[g.0].tweaks;
        scan.next_ask(NOW, presence, serves).unwrap()
    };
    // Gateway 0's span, then its lists are asked: it goes before it answers them.
    let (g, span) = ask(&mut scan, &gws);
    answer(&mut scan, &w, &gws[g.0], g, span);
    let (g, lists) = ask(&mut scan, &gws);
    assert!(
        matches!(
            lists,
            SilentAsk::Range {
                what: Range::Tweaks,
                ..
            }
        ),
        "{lists:?}"
    );
    gws[g.0].presence = Presence::Absent;
    scan.gateway_gone(g);
    // Gateway 1 serves tweaks now.
    gws[1].tweaks = true;
    let told = run(&mut scan, &w, &mut gws, TOP);
    assert_eq!(found(&told), [(PAID, w.key)], "{told:?}");
    assert_eq!(scan.next(), TOP + 1);
}

/// A gateway that never gives a window whole (always short) is waited for once, up to
/// `LAG_WAIT`, and then not again until it does: it cannot slow every window.
#[test]
fn a_gateway_that_always_lags_is_waited_for_once() {
    let w = world();
    let mut gws = [gateway(&w, Lie::Honest), gateway(&w, Lie::Honest)];
    gws[1].computed = Some(10);
    let mut scan = SilentScan::new(receiver(), 0, 2);
    let mut now = NOW;
    let mut told = Vec::new();
    loop {
        told.extend(run_at(&mut scan, &w, &mut gws, TOP, now));
        if scan.next() > TOP {
            break;
        }
        now = scan.wake_at().expect("a wake-up while it lags").max(now);
        let waited = now.since(NOW);
        assert!(
            waited < LAG_WAIT * 2,
            "the windows waited {waited:?} in all"
        );
    }
    assert_eq!(found(&told), [(PAID, w.key)]);
    assert_eq!(bad(&told), []);
}

/// Seeded random adversaries beside an honest gateway: two others, each telling one of the
/// lies modelled here (or none), withholding the proof or not, lagging or not, and each of
/// their answers given, dropped (the request then times out: the gateway goes, as the
/// engine drops it), or given twice. Whatever they do: the honest gateway is never found
/// bad, nothing is found but the payment, and the scan ends at the top having found it.
#[test]
fn random_adversaries_beside_an_honest_gateway_never_hide_the_payment() {
    let w = world();
    let lies = [
        Lie::Honest,
        Lie::Omit,
        Lie::Change,
        Lie::Add,
        Lie::ListOnly,
        Lie::Filter,
        Lie::BadBlock,
        Lie::TooLong,
    ];
    let seeds = if cfg!(target_arch = "wasm32") { 8 } else { 40 };
    for seed in 0..seeds {
        let mut rng = (seed as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        // The honest one anywhere in the list.
        let honest = next(3) as usize;
        let mut gws: Vec<Gateway> = (0..3)
            .map(|i| {
                let lie = if i == honest {
                    Lie::Honest
                } else {
                    lies[next(lies.len() as u64) as usize]
                };
                let mut g = gateway(&w, lie);
                if i != honest {
                    g.withholds = next(2) == 0;
                    g.computed = (next(3) == 0).then(|| 1_400 + next(1_000) as u32);
                }
                g
            })
            .collect();
        let mut scan = SilentScan::new(receiver(), 1_000, 3);
        // Handed out, the filter checks are answered in a random order, between asks.
        scan.offload(OFFLOAD.with(Cell::get));
        let me = receiver();
        let mut helper = BlockScanner::new();
        let mut pending = Vec::new();
        let mut told = Vec::new();
        let mut now = NOW;
        for _ in 0..100_000 {
            while let Some(e) = scan.poll_event() {
                if let SilentEvent::Bad(g, _) = &e {
                    gws[g.0].presence = Presence::Absent;
                    scan.gateway_gone(*g);
                }
                told.push(e);
            }
            if let Some((a, b)) = scan.need_data(TOP) {
                let (a, b) = (a as usize, b as usize);
                scan.on_data(a as u32, &w.hashes[a..=b], &w.filter_headers[a..=b + 1]);
                continue;
            }
            while let Some(j) = scan.next_job() {
                let r = scan_filter(&mut helper, &me, j.list, j.filter, &j.hash);
                pending.push((j.tag, j.height, r));
            }
            if !pending.is_empty() && next(3) == 0 {
                let (tag, height, r) = pending.swap_remove(next(pending.len() as u64) as usize);
                scan.on_scanned(tag, height, r);
                continue;
            }
            let presence = |g: GatewayId| gws[g.0].presence;
            let serves = |g: GatewayId, what| what != Serves::Tweaks || gws[g.0].tweaks;
            if let Some((g, ask)) = scan.next_ask(now, presence, serves) {
                match (g.0 == honest, next(6)) {
                    // Dropped: its request times out.
                    (false, 0) => {
                        gws[g.0].presence = Presence::Absent;
                        scan.gateway_gone(g);
                    }
                    (false, 1) => {
                        answer(&mut scan, &w, &gws[g.0], g, ask);
                        answer(&mut scan, &w, &gws[g.0], g, ask);
                    }
                    _ => answer(&mut scan, &w, &gws[g.0], g, ask),
                }
                continue;
            }
            if let Some((tag, height, r)) = pending.pop() {
                scan.on_scanned(tag, height, r);
                continue;
            }
            if !scan.events.is_empty() {
                continue;
            }
            match scan.wake_at() {
                Some(t) if scan.next() <= TOP => now = t.max(now),
                _ => break,
            }
        }
        assert!(
            !bad(&told).iter().any(|(g, _)| g.0 == honest),
            "seed {seed}: the honest gateway found bad: {told:?}"
        );
        let f = found(&told);
        assert!(
            f.iter().all(|p| *p == (PAID, w.key)) && !f.is_empty(),
            "seed {seed}: found {f:?}"
        );
        assert_eq!(scan.next(), TOP + 1, "seed {seed}: {told:?}");
    }
}

/// Every case above again with each block's filter check handed out
/// ([`SilentScan::offload`]) and answered late and last first, as the tab's workers may:
/// the same payments found, the same gateways found wrong.
#[test]
fn every_case_again_with_the_filter_checks_handed_out() {
    OFFLOAD.with(|o| o.set(true));
    an_honest_gateway_alone_gives_the_payment();
    beside_an_honest_gateway_no_liar_hides_the_payment();
    a_withheld_proof_is_taken_from_another_or_the_scan_stalls();
    a_gateway_still_connecting_is_waited_for();
    a_bad_list_filter_or_block_is_its_senders_fault();
    a_gateway_that_changes_its_word_between_windows_is_bad();
    a_reorg_scans_again_from_the_fork();
    a_gateway_still_computing_its_tweaks_is_waited_for_and_asked_again();
    a_chunks_lists_are_bounded_and_a_list_longer_than_any_blocks_is_refused();
    the_givers_gone_the_window_is_asked_of_those_present();
    a_gateway_that_always_lags_is_waited_for_once();
    random_adversaries_beside_an_honest_gateway_never_hide_the_payment();
    OFFLOAD.with(|o| o.set(false));
}

/// Drive `scan` (offloaded) until it asks nothing more, answering the gateways' asks but
/// none of its filter checks: returns the checks handed out.
fn until_checks_wait(scan: &mut SilentScan, w: &World, gws: &[Gateway]) -> Vec<(u32, u32)> {
    let mut jobs = Vec::new();
    for _ in 0..10_000 {
        if let Some((a, b)) = scan.need_data(TOP) {
            let (a, b) = (a as usize, b as usize);
            scan.on_data(a as u32, &w.hashes[a..=b], &w.filter_headers[a..=b + 1]);
            continue;
        }
        while let Some(j) = scan.next_job() {
            jobs.push((j.tag, j.height));
        }
        match scan.next_ask(NOW, |_| Presence::Ready, |_, _| true) {
            Some((g, ask)) => answer(scan, w, &gws[g.0], g, ask),
            None => return jobs,
        }
    }
    panic!("the scan did not settle");
}

/// The checks of a chunk given up (here by a reorganisation) are answered after a new
/// chunk of the same blocks handed out its own: the old answers, matches all, are
/// ignored (no block fetched for them, no tweak counted twice), and so is an answer to a
/// check never handed out. Until its checks are answered, a chunk fetches no block and
/// its progress does not move.
#[test]
fn answers_to_the_checks_of_a_chunk_given_up_are_ignored() {
    let w = world();
    let mut gws = [gateway(&w, Lie::Honest)];
    let mut scan = SilentScan::new(receiver(), 0, 1);
    scan.offload(true);
    let old = until_checks_wait(&mut scan, &w, &gws);
    assert_eq!(old.len() as u32, 99 / 7 + 1, "{old:?}");
    assert_eq!(scan.next(), 0);
    assert_eq!(scan.tweaks_scanned(), 0);

    assert!(scan.reorg(50).is_empty());
    let new = until_checks_wait(&mut scan, &w, &gws);
    assert_eq!(new.len(), old.len());
    assert!(new.iter().zip(&old).all(|(n, o)| n.1 == o.1 && n.0 != o.0));
    for &(tag, height) in &old {
        scan.on_scanned(tag, height, Scanned::Match);
    }
    scan.on_scanned(new[0].0, 1, Scanned::Match);
    assert_eq!(scan.tweaks_scanned(), 0);
    let me = receiver();
    let mut helper = BlockScanner::new();
    for &(tag, height) in &new {
        let i = height as usize;
        let r = scan_filter(&mut helper, &me, &w.lists[i], &w.filters[i], &w.hashes[i]);
        assert_eq!(r, Scanned::Miss);
        scan.on_scanned(tag, height, r);
    }
    assert_eq!(
        scan.next(),
        SILENT_CHUNK,
        "the chunk is done, nothing fetched"
    );
    let told = run(&mut scan, &w, &mut gws, TOP);
    assert_eq!(found(&told), [(PAID, w.key)], "{told:?}");
    assert_eq!(bad(&told), []);
    assert_eq!(scan.tweaks_scanned(), u64::from(TOP / 7 + 1) + 1);

    // The paying block's check answered first: nothing is fetched until every other
    // check of its chunk is answered (a chunk done early would drop their answers).
    let mut scan = SilentScan::new(receiver(), PAID, 1);
    scan.offload(true);
    let jobs = until_checks_wait(&mut scan, &w, &gws);
    assert!(jobs.len() > 1 && jobs.iter().any(|j| j.1 == PAID));
    let mut answers: Vec<(u32, u32, Scanned)> = jobs
        .iter()
        .map(|&(tag, height)| {
            let i = height as usize;
            let r = scan_filter(&mut helper, &me, &w.lists[i], &w.filters[i], &w.hashes[i]);
            (tag, height, r)
        })
        .collect();
    answers.sort_by_key(|a| a.1 != PAID);
    for (n, &(tag, height, r)) in answers.iter().enumerate() {
        assert_eq!(r == Scanned::Match, height == PAID);
        scan.on_scanned(tag, height, r);
        let ask = scan.next_ask(NOW, |_| Presence::Ready, |_, _| true);
        assert_eq!(ask.is_some(), n + 1 == answers.len(), "{ask:?}");
        if let Some((g, ask)) = ask {
            answer(&mut scan, &w, &gws[g.0], g, ask);
        }
    }
    let told = run(&mut scan, &w, &mut gws, TOP);
    assert_eq!(found(&told), [(PAID, w.key)], "{told:?}");
}

/// Filters another reader took (the wallet's scan) are taken instead of asked for: with
/// every block's at hand, no gateway is asked for one, and the payment is found, also with
/// the checks handed out. One that is not ours (another block's, or any bytes) is checked
/// against our filter header like a gateway's, found wrong and left: the gateways are asked,
/// and nobody is taken for a liar by it.
#[test]
fn filters_another_reader_took_are_not_asked_again() {
    let w = world();
    for offload in [false, true] {
        OFFLOAD.with(|o| o.set(offload));
        for kept in [Kept::Ours, Kept::Wrong] {
            KEPT.with(|k| k.set(kept));
            let mut gws = [gateway(&w, Lie::Honest)];
            let mut scan = SilentScan::new(receiver(), 0, 1);
            let told = run(&mut scan, &w, &mut gws, TOP);
            assert_eq!(found(&told), [(PAID, w.key)], "{kept:?}: {told:?}");
            assert_eq!(bad(&told), []);
            assert_eq!(scan.next(), TOP + 1);
            let asks = gws[0].filter_asks.get();
            match kept {
                Kept::Ours => assert_eq!(asks, 0, "filters asked though kept"),
                _ => assert!(asks > 0, "a wrong filter taken for ours"),
            }
        }
    }
    KEPT.with(|k| k.set(Kept::None));
    OFFLOAD.with(|o| o.set(false));
}
