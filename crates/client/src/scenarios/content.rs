//! Disputes over what the filter headers commit to below a checkpoint start, and over what
//! the block alone cannot show (the scripts its inputs spend): the wallet must miss
//! nothing whichever chain it kept, and a chain that differs only below what the store
//! holds must not freeze filter sync.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use lightwire_chain::{REGTEST, Work};
use lightwire_proto::Served;
use lightwire_proto::testing::TestChain;
use lightwire_store::{HeaderStore, MemoryStore, Start};

use super::{coinbase_script, filter_without_coinbase, reached, rejected, small, verdicts};
use crate::dispute::Verdict;
use crate::testnet::{Net, block_on};

/// The first block a checkpoint store starts at (the first of a retarget period).
const BASE: u32 = 2_016;

/// A store started at [`BASE`] on `chain`.
fn checkpoint_store(chain: &TestChain) -> MemoryStore {
    // Regtest's headers carry 2 work each.
    let work = (0..=BASE).fold(Work::default(), |w, h| {
        w.add(&chain.header(h).bits.to_target().unwrap().work())
    });
    let start = Start {
        height: BASE,
        header: chain.header(BASE),
        chainwork: work,
    };
    MemoryStore::starting_at(&REGTEST, &start).unwrap()
}

/// `chain` with another filter at the block below [`BASE`] (its filter headers rebuilt
/// from there): from the store's first block on, the same filters, and filter headers
/// that differ at every height, because what they commit to below the store differs.
fn other_anchor(mut chain: TestChain) -> TestChain {
    let hash = chain.header(BASE - 1).block_hash();
    let mut f = Vec::new();
    lightwire_filter::build_filter(&hash.0, [&b"another anchor"[..]], &mut f);
    chain.rewrite_filter(BASE - 1, f);
    chain
}

/// A liar for a checkpoint store: its own anchor, and its filter of `height` without
/// the block's coinbase output.
fn anchored_liar(n: u32, height: u32) -> TestChain {
    let mut c = other_anchor(TestChain::generate(n));
    let f = filter_without_coinbase(&c, height);
    c.rewrite_filter(height, f);
    c
}

/// A script a block's input spends: in its filter, not in the block.
const SPENT: &[u8] = b"\x00\x14a script an input spends";

/// Drive until nothing moves, then let every deadline fall due for twelve minutes.
fn settle(net: &mut Net<MemoryStore>) {
    net.drive();
    for _ in 0..12 {
        net.advance(core::time::Duration::from_secs(60));
    }
}

/// A scan from the first block for the coinbase script of `paid` and [`SPENT`] finds
/// exactly the blocks `found` of `honest`, and nobody was rejected in the session.
fn scan_finds(net: &mut Net<MemoryStore>, honest: &TestChain, paid: u32, found: [u32; 2]) {
    net.host
        .engine
        .start_scan(vec![coinbase_script(paid, 0), SPENT.to_vec()], 1);
    settle(net);
    let found = found.map(|h| (h, honest.header(h).block_hash()));
    assert_eq!(reached(&net.host.events).last(), Some(&found.to_vec()));
    assert_eq!(rejected(&net.host.events), []);
}

fn filter_tip(net: &Net<MemoryStore>) -> (u32, lightwire_primitives::FilterHeader) {
    let t = block_on(net.store.filter_tip()).unwrap().unwrap();
    (t.height, t.header)
}

/// A store started from a checkpoint took its filter anchor (the filter header below its
/// first block) from a liar alone, with a lie above it. With the honest gateway present
/// in the next session, the lie is found from the block and the honest chain replaces
/// the liar's; a scan finds the payment. (It ended undecided at the first block, the
/// liar's chain kept in this and every later session.)
#[test]
fn a_checkpoint_stores_anchor_from_a_liar_gives_way_when_the_block_proves_the_lie() {
    let honest = TestChain::generate(5_000);
    let mut net = Net::new(
        checkpoint_store(&honest),
        vec![anchored_liar(5_000, 3_456)],
        small,
    );
    net.drive();
    let lying = anchored_liar(5_000, 3_456)
        .filter_entry(5_000)
        .unwrap()
        .header;
    assert_eq!(filter_tip(&net), (5_000, lying));

    let want = honest.filter_entry(5_000).unwrap().header;
    let paid = honest.header(3_456).block_hash();
    let mut net = Net::new(
        net.store,
        vec![anchored_liar(5_000, 3_456), TestChain::generate(5_000)],
        small,
    );
    net.drive();
    let v = verdicts(&net.host.events);
    assert!(
        matches!(v[..], [(1, Verdict::OursWrong { height: 3_456, .. })]),
        "{v:?}"
    );
    assert_eq!(rejected(&net.host.events), [(0, "filter-lacks-output")]);
    assert_eq!(filter_tip(&net), (5_000, want));
    net.host
        .engine
        .start_scan(vec![coinbase_script(3_456, 0)], 2_100);
    net.drive();
    assert_eq!(reached(&net.host.events), [vec![(3_456, paid)]]);
}

/// The same, with the honest gateway alone in the next session: nobody defends the
/// liar's chain, the honest one is proven against the block where they differ, and
/// replaces it.
#[test]
fn a_checkpoint_stores_anchor_from_a_liar_gives_way_when_nobody_defends_it() {
    let honest = TestChain::generate(5_000);
    let mut net = Net::new(
        checkpoint_store(&honest),
        vec![anchored_liar(5_000, 3_456)],
        small,
    );
    net.drive();
    let want = honest.filter_entry(5_000).unwrap().header;
    let mut net = Net::new(net.store, vec![TestChain::generate(5_000)], small);
    net.drive();
    let v = verdicts(&net.host.events);
    assert!(
        matches!(v[..], [(0, Verdict::OursUndefended { height: 3_456, .. })]),
        "{v:?}"
    );
    assert_eq!(rejected(&net.host.events), []);
    assert_eq!(filter_tip(&net), (5_000, want));
}

/// A chain whose filters are all the same from the store's first block on, and whose
/// anchor differs: nothing the wallet can see differs. With only the honest gateway in
/// the next session and a chain grown by 100 blocks, filter sync must not freeze: the
/// stored filter headers reach the new tip. (They stayed at the old one: every answer
/// conflicted with the anchor taken from the first gateway.)
#[test]
fn a_chain_that_differs_only_below_a_checkpoint_store_does_not_freeze_filter_sync() {
    let honest = TestChain::generate(5_100);
    let mut net = Net::new(
        checkpoint_store(&honest),
        vec![other_anchor(TestChain::generate(5_000))],
        small,
    );
    net.drive();
    let want = honest.filter_entry(5_100).unwrap().header;
    let mut net = Net::new(net.store, vec![TestChain::generate(5_100)], small);
    net.drive();
    assert_eq!(rejected(&net.host.events), []);
    assert_eq!(filter_tip(&net), (5_100, want));
}

/// A chain whose filter of `heights` also holds `spent` (what a block's input spends: the
/// block cannot show it).
fn spending(n: u32, heights: &[u32], spent: &[u8]) -> TestChain {
    let mut c = TestChain::generate(n);
    for &h in heights {
        let hash = c.header(h).block_hash();
        let coinbase = coinbase_script(h, 0);
        let mut f = Vec::new();
        lightwire_filter::build_filter(&hash.0, [&coinbase[..], spent], &mut f);
        c.rewrite_filter(h, f);
    }
    c
}

/// The stored filter headers came from a liar that leaves out the scripts two blocks'
/// inputs spend (the block cannot prove that). In the next session the honest gateway is
/// present and the liar defends its chain: the dispute cannot be settled, but a scan for
/// the spent script must still find both blocks (the wallet would otherwise miss the
/// spends of its own coins and report too high a balance). (Undecided kept the liar's
/// chain, and the scan found nothing.)
#[test]
fn blocks_whose_spent_scripts_a_kept_chain_leaves_out_are_still_found() {
    let mut net = Net::new(
        super::super::testnet::memory(),
        vec![TestChain::generate(5_000)],
        small,
    );
    net.drive();
    let honest = spending(5_000, &[2_345, 3_456], SPENT);
    let found = [2_345, 3_456].map(|h| (h, honest.header(h).block_hash()));
    let mut net = Net::new(net.store, vec![TestChain::generate(5_000), honest], small);
    net.drive();
    let v = verdicts(&net.host.events);
    assert!(matches!(v[..], [(1, Verdict::Undecided { .. })]), "{v:?}");
    assert_eq!(rejected(&net.host.events), []);
    net.host.engine.start_scan(vec![SPENT.to_vec()], 2_000);
    net.drive();
    assert_eq!(reached(&net.host.events).last(), Some(&found.to_vec()));
}

/// The stored filter headers came from a liar that first differs where the block cannot
/// show it (an item added to the filter of 2,345) and then hides a payment (its filter of
/// 3,456 without the coinbase output). With the honest gateway present, the walk judges
/// the second block too: the liar's chain is proven wrong, dropped from 2,345, and the
/// liar marked bad. (Judging only the first difference left its chain stored, the
/// payment found only by matching the honest filter beside it.)
#[test]
fn a_provable_lie_behind_one_the_block_cannot_show_is_still_proven() {
    let liar = || {
        let mut c = TestChain::generate(5_000);
        let hash = c.header(2_345).block_hash();
        let coinbase = coinbase_script(2_345, 0);
        let mut f = Vec::new();
        lightwire_filter::build_filter(&hash.0, [&coinbase[..], b"extra"], &mut f);
        c.rewrite_filter(2_345, f);
        let f = filter_without_coinbase(&c, 3_456);
        c.rewrite_filter(3_456, f);
        c
    };
    let mut net = Net::new(super::super::testnet::memory(), vec![liar()], small);
    net.drive();
    let honest = TestChain::generate(5_000);
    let want = honest.filter_entry(5_000).unwrap().header;
    let mut net = Net::new(net.store, vec![liar(), honest], small);
    net.drive();
    let v = verdicts(&net.host.events);
    assert!(
        matches!(
            v[..],
            [(
                1,
                Verdict::OursWrong {
                    height: 3_456,
                    from: 2_345,
                    ..
                }
            )]
        ),
        "{v:?}"
    );
    assert_eq!(rejected(&net.host.events), [(0, "filter-lacks-output")]);
    assert_eq!(filter_tip(&net), (5_000, want));
}

/// Ours came from an honest gateway; the next session has only a liar, whose filter of
/// 2,100 holds an item more (the block cannot show it) and whose filter of 3,456 hides a
/// payment. Nobody present defends ours, but the liar's chain is not proven where it
/// differs: its filter of 3,456 lacks an output of the block. It is marked bad, ours kept,
/// and the payment found. (Ours gave way at the first difference, the liar's chain was
/// stored and the payment hidden: a harmless difference put before a lie was enough.)
#[test]
fn an_undefended_chain_gives_way_only_to_one_proven_wherever_they_differ() {
    let mut net = Net::new(
        super::super::testnet::memory(),
        vec![TestChain::generate(5_000)],
        small,
    );
    net.drive();
    let honest = TestChain::generate(5_000);
    let want = honest.filter_entry(5_000).unwrap().header;
    let paid = honest.header(3_456).block_hash();
    let mut liar = TestChain::generate(5_000);
    let hash = liar.header(2_100).block_hash();
    let mut f = Vec::new();
    let coinbase = coinbase_script(2_100, 0);
    lightwire_filter::build_filter(&hash.0, [&coinbase[..], b"extra"], &mut f);
    liar.rewrite_filter(2_100, f);
    let f = filter_without_coinbase(&liar, 3_456);
    liar.rewrite_filter(3_456, f);
    let mut net = Net::new(net.store, vec![liar], small);
    net.drive();
    assert_eq!(
        verdicts(&net.host.events),
        [(0, Verdict::TheirsWrong { height: 3_456 })]
    );
    assert_eq!(rejected(&net.host.events), [(0, "filter-lacks-output")]);
    assert_eq!(filter_tip(&net), (5_000, want));
    let mut net = Net::new(net.store, vec![TestChain::generate(5_000)], small);
    net.drive();
    net.host
        .engine
        .start_scan(vec![coinbase_script(3_456, 0)], 2_000);
    net.drive();
    assert_eq!(reached(&net.host.events), [vec![(3_456, paid)]]);
}

/// Both gateways present in two sessions; the one whose chain is stored (it leaves out
/// the script a block's input spends at 2,000: the dispute with the honest gateway is
/// undecided) then cuts every scan answer short at 1,500 (it withholds that filter). The
/// honest gateway, in conflict, can still be checked wherever the two differ (every
/// difference is contested): the scan asks it and reaches the tip, finding the payment at
/// 1,500 and the spend at 2,000. (It stalled at 1,500 for good: only the gateway agreeing
/// with ours was asked. Found by the fuzz target `crosscheck`.)
#[test]
fn a_scan_is_not_held_back_by_the_only_agreeing_gateway() {
    let honest = || spending(2_500, &[2_000], SPENT);
    let liar = || {
        let mut c = TestChain::generate(2_500);
        c.missing_filters.insert(1_500);
        c
    };
    let mut net = Net::seeded(
        super::super::testnet::memory(),
        vec![honest(), liar()],
        0,
        small,
    );
    settle(&mut net);
    assert_eq!(
        verdicts(&net.host.events),
        [(0, Verdict::Undecided { height: 2_000 })]
    );
    let mut net = Net::seeded(net.store, vec![honest(), liar()], 1, small);
    settle(&mut net);
    scan_finds(&mut net, &honest(), 1_500, [1_500, 2_000]);
}

/// The stored filter headers came from a liar alone, whose filters stop at 2,000 and leave
/// out the script the input of block 2,000 spends; the next session has the honest
/// gateway beside it, its chain grown. The dispute at 2,000 cannot be settled, the liar
/// serves nothing above, and the honest gateway's filter headers do not follow on from
/// ours: filter sync must still reach the tip (its filter hashes linked onto ours) and a
/// scan find the payment at 2,345. (Filter sync stayed at 2,000 for good. Found by the
/// fuzz target `crosscheck`.)
#[test]
fn filter_sync_goes_on_from_a_kept_chain_whose_gateway_stopped_serving() {
    let liar = || {
        let mut c = TestChain::generate(2_500);
        c.filters_held = Some(2_000);
        c
    };
    let mut net = Net::seeded(super::super::testnet::memory(), vec![liar()], 0, small);
    settle(&mut net);
    assert_eq!(filter_tip(&net).0, 2_000);
    let honest = || spending(2_500, &[2_000], SPENT);
    let mut net = Net::seeded(net.store, vec![honest(), liar()], 1, small);
    settle(&mut net);
    assert_eq!(filter_tip(&net).0, 2_500);
    scan_finds(&mut net, &honest(), 2_345, [2_000, 2_345]);
}

/// The fuzz target `crosscheck`'s second finding: a liar listed first whose filters stop
/// at 2,000, hiding a payment at 2,001 and leaving out the spent script at 1,234, beside
/// the honest gateway in both sessions. The liar ends up agreeing with ours only up to the
/// contested block; the scan must ask a gateway that can serve its next filter, not the
/// first usable one (which was asked nothing, and the scan stood at 1,235 for good).
#[test]
fn a_scan_asks_a_gateway_that_can_serve_its_next_filter() {
    let (p, u) = (2_001u32, 1_234u32);
    let honest = || spending(2_500, &[u], SPENT);
    let liar = || {
        let mut c = TestChain::generate(2_500);
        let f = filter_without_coinbase(&c, p);
        c.rewrite_filter(p, f);
        c.missing_filters.insert(p);
        c.withheld_blocks.insert(p);
        c.filters_held = Some(2_000);
        c
    };
    let mut net = Net::seeded(
        super::super::testnet::memory(),
        vec![liar(), honest()],
        0,
        small,
    );
    settle(&mut net);
    let mut net = Net::seeded(net.store, vec![liar(), honest()], 1, small);
    settle(&mut net);
    scan_finds(&mut net, &honest(), p, [u, p]);
}
