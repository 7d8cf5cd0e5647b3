//! End-to-end scenarios: the engine, in-memory gateways (some lying) and a store, run by
//! the shipped driver on a virtual clock: sync, reorgs, store failures, filter headers and
//! their disputes, scans, the wallet, broadcasts.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use core::time::Duration;
use lightwire_proto::testing::TestChain;

use lightwire_chain::{BlockHash, WINDOW_LEN};
use lightwire_store::{HeaderStore, StoreError};

use crate::engine::Engine;
use crate::ids::GatewayId;
use crate::pipeline::ancestors;
use lightwire_proto::Served;

use crate::dispute::Verdict;
use crate::engine::Event;
use crate::testnet::{FailingStore, Net, block_on, memory};

mod content;
mod mempool;
mod miscomputed;
mod silent;
mod trust;
mod wallets;

fn small(e: &mut Engine) {
    e.syncer_mut().request_size = 2_000;
    e.syncer_mut().commit_every = 1_000;
}

#[test]
fn a_commit_reports_the_stored_tips_block_time() {
    // Filter headers end after the headers: the last commit carries filter headers
    // only, and must still report the stored tip's time (it reported 0, shown as
    // 1 January 1970).
    let chain = TestChain::generate(3_000);
    let want = chain.header(3_000).time;
    let mut net = Net::new(memory(), vec![chain], small);
    net.drive();
    let c = net.host.committed.expect("a commit");
    assert_eq!(c.tip.height, 3_000);
    assert_eq!(c.time, want);
    // A store synced without filters, resumed with them: every commit of the second
    // session carries filter headers only.
    let mut net = Net::new(memory(), vec![TestChain::generate(3_000)], |e| {
        small(e);
        e.set_filters(false);
    });
    net.drive();
    let store = net.store;
    let mut net = Net::new(store, vec![TestChain::generate(3_000)], small);
    net.drive();
    let c = net.host.committed.expect("filter headers committed");
    assert_eq!(c.tip.height, 3_000);
    assert_eq!(c.time, want);
}

#[test]
fn a_reopened_store_resumes_where_it_stopped() {
    let mut net = Net::new(memory(), vec![TestChain::generate(3_000)], small);
    net.drive();
    assert_eq!(net.stored().height, 3_000);
    let store = net.store;
    // Later: the gateway has 2,000 more, and a new session starts from the store.
    let chain = TestChain::generate(5_000);
    let tip = chain.header(5_000);
    let mut net = Net::new(store, vec![chain], small);
    assert_eq!(
        net.host.engine.syncer().tip().height,
        3_000,
        "resumed, not from genesis"
    );
    net.drive();
    assert_eq!(net.stored().height, 5_000);
    assert_eq!(net.stored().hash, tip.block_hash());
    // Only what was missing was validated.
    assert_eq!(net.host.engine.syncer().validated, 2_000);
}

/// The store's filter headers are `chain`'s, up to `tip`.
fn check_filters<S: HeaderStore>(store: &S, chain: &TestChain, tip: u32) {
    use lightwire_proto::Served;
    let stored = block_on(store.filter_tip())
        .unwrap()
        .expect("filter headers");
    assert_eq!(stored.height, tip);
    let mut got = Vec::new();
    block_on(store.filter_headers(0, tip, &mut got)).unwrap();
    for (h, header) in got.iter().enumerate() {
        assert_eq!(*header, chain.filter_entry(h as u32).unwrap().header, "{h}");
    }
}

#[test]
fn filter_headers_follow_the_best_chain_into_the_store() {
    let mut net = Net::new(memory(), vec![TestChain::generate(6_000)], small);
    net.drive();
    check_filters(&net.store, &TestChain::generate(6_000), 6_000);
    assert_eq!(net.host.engine.filters().height(), Some(6_000));
    // A reorg 1,000 deep (the filter headers above the fork are still in memory), then
    // a resumed session: the filter headers are the new branch's.
    let mut fork = TestChain::generate(6_000);
    fork.reorg(5_000, 1_500, 1);
    let store = net.store;
    let mut net = Net::new(store, vec![fork], small);
    net.drive();
    let mut want = TestChain::generate(6_000);
    want.reorg(5_000, 1_500, 1);
    check_filters(&net.store, &want, 6_500);
    // Turned off: headers only.
    let mut net = Net::new(memory(), vec![TestChain::generate(3_000)], |e| {
        small(e);
        e.set_filters(false);
    });
    net.drive();
    assert_eq!(net.stored().height, 3_000);
    assert_eq!(block_on(net.store.filter_tip()).unwrap(), None);
}

/// The coinbase output script of generated block `height` on `branch`.
pub fn coinbase_script(height: u32, branch: u32) -> Vec<u8> {
    use lightwire_chain::synthetic::{DEFAULT_PROFILE, Pool, SyntheticBlock};
    let pool = Pool::build(&lightwire_chain::synthetic::Profile {
        heavy_from: u32::MAX,
        ..DEFAULT_PROFILE
    });
    let b = SyntheticBlock::new(&DEFAULT_PROFILE, &pool, height, branch);
    b.filter_items().next().unwrap().to_vec()
}

fn reached(events: &[Event]) -> Vec<Vec<(u32, lightwire_chain::BlockHash)>> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ScanReached { matches, .. } => Some(matches.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_scan_finds_the_blocks_paying_its_scripts_and_follows_reorgs() {
    let chain = TestChain::generate(5_000);
    let (h1, h2) = (
        chain.header(1_234).block_hash(),
        chain.header(4_500).block_hash(),
    );
    let mut net = Net::new(memory(), vec![chain], small);
    net.drive();
    let scripts = vec![
        coinbase_script(1_234, 0),
        coinbase_script(4_500, 0),
        coinbase_script(900, 0),
    ];
    net.host.engine.start_scan(scripts.clone(), 1_000);
    net.drive();
    assert_eq!(reached(&net.host.events), [vec![(1_234, h1), (4_500, h2)]]);
    let scan = net.host.engine.scan().unwrap();
    assert_eq!((scan.next(), scan.filters), (5_001, 4_001));
    // A new session resumes the scan saved in the store: nothing is matched again.
    let mut fork = TestChain::generate(5_000);
    fork.reorg(4_000, 1_200, 1);
    let store = net.store;
    let mut net = Net::new(store, vec![TestChain::generate(5_000)], small);
    net.drive();
    let scan = net.host.engine.scan().expect("resumed");
    assert_eq!((scan.next(), scan.filters), (5_001, 0));
    assert_eq!(scan.matches(), [(1_234, h1), (4_500, h2)]);
    assert_eq!(reached(&net.host.events), [vec![(1_234, h1), (4_500, h2)]]);
    // Asked for again, the same scan goes on; another would start over.
    assert!(net.host.engine.scan_or_continue(scripts.clone(), 1_000));
    // The gateway reorganises at 4,000: the match at 4,500 is withdrawn, and the scan
    // goes on over the new branch (which pays none of the scripts).
    let Some(gw) = net.host.gateways[0].as_mut() else {
        panic!("connected");
    };
    gw.chain = fork;
    gw.server.tip_changed();
    net.drive();
    assert!(
        net.host
            .events
            .iter()
            .any(|e| matches!(e, Event::ScanWithdrawn { height: 4_500, .. }))
    );
    assert_eq!(
        reached(&net.host.events).last().unwrap(),
        &vec![(1_234, h1)]
    );
    assert_eq!(net.host.engine.scan().unwrap().next(), 5_201);
}

/// The filter of `height` in `chain` without the block's coinbase output: what a
/// gateway hiding a payment would serve.
fn filter_without_coinbase(chain: &TestChain, height: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let hash = chain.header(height).block_hash();
    lightwire_filter::build_filter(&hash.0, [&b"not the coinbase"[..]], &mut out);
    out
}

fn verdicts(events: &[Event]) -> Vec<(usize, Verdict)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::FilterDispute { gateway, verdict } => Some((gateway.index(), *verdict)),
            _ => None,
        })
        .collect()
}

pub(crate) fn rejected(events: &[Event]) -> Vec<(usize, &'static str)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Rejected { gateway, reason } => Some((gateway.index(), reason.code())),
            _ => None,
        })
        .collect()
}

/// A second gateway whose filter of one block lacks the block's coinbase output (its
/// filter headers rebuilt to match): the probe finds its header differs, the dispute
/// finds the block, and the block proves its filter wrong.
#[test]
fn a_gateway_serving_a_filter_without_an_output_is_caught_by_the_block() {
    let honest = TestChain::generate(5_000);
    let mut liar = TestChain::generate(5_000);
    let f = filter_without_coinbase(&liar, 3_217);
    liar.rewrite_filter(3_217, f);
    let mut net = Net::new(memory(), vec![honest, liar], small);
    net.drive();
    // With this seed the filter headers that cover the lie are drawn from the liar: ours
    // are found wrong when the honest gateway's chain meets them.
    assert!(
        net.host.events.iter().any(|e| matches!(
            e,
            Event::FilterConflict {
                gateway: GatewayId(0),
                ..
            }
        )),
        "{:?}",
        net.host.events
    );
    let v = verdicts(&net.host.events);
    assert!(
        matches!(v[..], [(0, Verdict::OursWrong { height: 3_217, .. })]),
        "{v:?}"
    );
    assert_eq!(rejected(&net.host.events), [(1, "filter-lacks-output")]);
    let want = TestChain::generate(5_000);
    let tip = block_on(net.store.filter_tip()).unwrap().unwrap();
    assert_eq!(tip.height, 5_000);
    assert_eq!(tip.header, want.filter_entry(5_000).unwrap().header);
}

/// The store's filter headers came from a liar; a later session meets an honest
/// gateway: ours are proven wrong from the block, dropped from the disputed height and
/// synced again, and the liar that vouched for them is marked bad. A scan then finds
/// the payment the liar hid.
#[test]
fn filter_headers_stored_from_a_liar_are_replaced_when_the_block_proves_them_wrong() {
    let mut liar = TestChain::generate(5_000);
    let f = filter_without_coinbase(&liar, 2_345);
    liar.rewrite_filter(2_345, f);
    let lying_tip = liar.filter_entry(5_000).unwrap().header;
    let mut net = Net::new(memory(), vec![liar], small);
    net.drive();
    let tip = block_on(net.store.filter_tip()).unwrap().unwrap();
    assert_eq!(tip.header, lying_tip);
    let store = net.store;
    let mut liar = TestChain::generate(5_000);
    let f = filter_without_coinbase(&liar, 2_345);
    liar.rewrite_filter(2_345, f);
    let honest = TestChain::generate(5_000);
    let want = honest.filter_entry(5_000).unwrap().header;
    let paid = honest.header(2_345).block_hash();
    let mut net = Net::new(store, vec![liar, honest], small);
    net.drive();
    assert_eq!(
        verdicts(&net.host.events),
        [(
            1,
            Verdict::OursWrong {
                height: 2_345,
                from: 2_345,
                prev: TestChain::generate(5_000)
                    .filter_entry(2_344)
                    .unwrap()
                    .header,
                hash: paid,
            }
        )]
    );
    assert_eq!(rejected(&net.host.events), [(0, "filter-lacks-output")]);
    holds_and_finds(&mut net, (5_000, want), (2_345, paid));
}

/// The store's filter tip is `tip` (the honest chain's), and a scan from 2,000 for the
/// coinbase script of the block `paid` finds that block (the payment a liar hid).
fn holds_and_finds(
    net: &mut Net<lightwire_store::MemoryStore>,
    tip: (u32, lightwire_primitives::FilterHeader),
    paid: (u32, BlockHash),
) {
    let stored = block_on(net.store.filter_tip()).unwrap().unwrap();
    assert_eq!((stored.height, stored.header), tip);
    net.host
        .engine
        .start_scan(vec![coinbase_script(paid.0, 0)], 2_000);
    net.drive();
    assert_eq!(reached(&net.host.events), [vec![paid]]);
}

/// A liar whose filter lacks only something the block cannot show (a script its inputs
/// spend would be; here an item is added instead): undecided, ours kept, the other
/// gateway not used for filters, nobody marked bad.
#[test]
fn a_dispute_the_block_cannot_settle_keeps_ours_and_marks_nobody() {
    let honest = TestChain::generate(3_000);
    let mut other = TestChain::generate(3_000);
    let hash = other.header(1_500).block_hash();
    let mut f = Vec::new();
    let coinbase = coinbase_script(1_500, 0);
    lightwire_filter::build_filter(&hash.0, [&coinbase[..], b"extra"], &mut f);
    other.rewrite_filter(1_500, f.clone());
    let mut same = TestChain::generate(3_000);
    same.rewrite_filter(1_500, f);
    let tips = [honest.filter_entry(3_000), other.filter_entry(3_000)];
    let mut net = Net::new(memory(), vec![honest, same], small);
    net.drive();
    // Ours came from the gateway drawn for the first filter headers: the other is
    // disputed, and stays in conflict.
    let v = verdicts(&net.host.events);
    let [(disputed, Verdict::Undecided { height: 1_500 })] = v[..] else {
        panic!("{v:?}");
    };
    assert_eq!(rejected(&net.host.events), []);
    let tip = block_on(net.store.filter_tip()).unwrap().unwrap();
    assert_eq!(Some(tip.header), tips[1 - disputed].map(|e| e.header));
}

/// A gateway listed first that answers every filter-header request empty (with `last`, as
/// a gateway whose filter headers lag would) while an honest gateway serves them: the
/// stored filter tip still reaches the chain tip within a bounded time. (Its chain is one
/// block shorter, so that headers come from the honest gateway and the staller is the one
/// asked for filter headers.)
#[test]
fn a_gateway_answering_filter_headers_empty_does_not_stall_their_sync() {
    let mut staller = TestChain::generate(2_999);
    staller.filters_held = Some(0);
    let honest = TestChain::generate(3_000);
    let want = honest.filter_entry(3_000).unwrap().header;
    let mut net = Net::new(memory(), vec![staller, honest], small);
    net.drive();
    net.advance(Duration::from_secs(60));
    let tip = block_on(net.store.filter_tip()).unwrap();
    assert_eq!(tip.map(|t| (t.height, t.header)), Some((3_000, want)));
}

/// A gateway agreed on our filter headers whose chain then moves to another branch (or
/// that says it did): it answers the scan's `get_filters` with `stop_unknown` while an
/// honest gateway holds those filters. The scan is not held back by it: it reaches the
/// stored tip within a bounded time and finds the payment.
#[test]
fn a_gateway_answering_the_scan_stop_unknown_does_not_stall_it() {
    let honest = TestChain::generate(3_000);
    let paid = honest.header(2_500).block_hash();
    // Listed first, the honest gateway announces first: headers come from it, and the
    // scan asks the other.
    let mut net = Net::new(memory(), vec![honest, TestChain::generate(3_000)], small);
    net.drive();
    let Some(gw) = net.host.gateways[1].as_mut() else {
        panic!("connected");
    };
    gw.chain.reorg(2_000, 999, 1);
    gw.server.tip_changed();
    net.drive();
    net.host
        .engine
        .start_scan(vec![coinbase_script(2_500, 0)], 2_100);
    net.drive();
    net.advance(Duration::from_secs(60));
    assert_eq!(reached(&net.host.events), [vec![(2_500, paid)]]);
}

/// A gateway that announces its tip after the honest one (listed second, its tip comes
/// later) and lies consistently (a filter without the block's coinbase output, its filter
/// headers rebuilt on it) does not choose which filter-header chain is stored first: over
/// sessions with different random numbers, the honest gateway is not always the one
/// found in conflict with ours. Every session ends with the honest chain stored and the
/// liar marked bad.
#[test]
fn a_gateway_that_delays_its_tip_does_not_choose_the_filter_headers_stored_first() {
    let want = TestChain::generate(3_000)
        .filter_entry(3_000)
        .unwrap()
        .header;
    let sessions = 8;
    let mut liars_first = 0;
    for seed in 0..sessions {
        let mut liar = TestChain::generate(3_000);
        let f = filter_without_coinbase(&liar, 1_217);
        liar.rewrite_filter(1_217, f);
        let chains = vec![TestChain::generate(3_000), liar];
        let mut net = Net::seeded(memory(), chains, seed, small);
        net.drive();
        let first = net.host.events.iter().find_map(|e| match e {
            Event::FilterConflict { gateway, .. } => Some(gateway.index()),
            _ => None,
        });
        // The honest gateway is found in conflict when the liar's chain was ours.
        if first == Some(0) {
            liars_first += 1;
        }
        let rejected = rejected(&net.host.events);
        assert_eq!(rejected, [(1, "filter-lacks-output")], "seed {seed}");
        let tip = block_on(net.store.filter_tip()).unwrap().unwrap();
        assert_eq!((tip.height, tip.header), (3_000, want), "seed {seed}");
    }
    assert!(
        liars_first < sessions,
        "the liar's chain was stored first in every session"
    );
}

fn wallet_events(events: &[Event]) -> Vec<(bool, u32)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Wallet(_, crate::wallet::WalletChange::Found(t)) => Some((true, t.height)),
            Event::Wallet(_, crate::wallet::WalletChange::Withdrawn { height, .. }) => {
                Some((false, *height))
            }
            _ => None,
        })
        .collect()
}

fn watch_coinbases(heights: &[u32]) -> Vec<crate::wallet::Watched> {
    heights
        .iter()
        .map(|&h| crate::wallet::Watched::Script(hex::encode(coinbase_script(h, 0))))
        .collect()
}

/// A session on `chains` (tuned by `tune`) whose wallet watches the coinbase script of
/// block 1,234, synced; and that script.
fn watching_1234(
    chains: Vec<TestChain>,
    tune: impl FnOnce(&mut Engine),
) -> (Net<lightwire_store::MemoryStore>, Vec<u8>) {
    let mut net = Net::new(memory(), chains, tune);
    net.drive();
    net.host
        .engine
        .watch(&watch_coinbases(&[1_234]), 1_000)
        .unwrap();
    net.drive();
    (net, coinbase_script(1_234, 0))
}

/// `watch` is answered (the wallet settled) only once what it found is saved: the wallet
/// pays the tip's block, so it is synced by the very block that changes it; a store that
/// refuses that save ends the session with its error and the wallet was never settled, so
/// no shell told the app it watched what the store did not keep (a tab closed right after
/// would have lost it).
#[test]
fn a_watch_is_answered_only_once_the_wallet_is_saved() {
    let session = |refuse_from: usize| {
        let mut net = Net::new(
            FailingStore::new(memory(), usize::MAX),
            vec![TestChain::generate(3_000)],
            small,
        );
        net.drive();
        net.store.refuse_records_from = refuse_from;
        net.host
            .engine
            .watch(&watch_coinbases(&[3_000]), 2_000)
            .unwrap();
        net.drive();
        net
    };
    let whole = session(usize::MAX);
    assert!(whole.host.settled_seen && whole.store_error.is_none());
    let saved = block_on(whole.store.record(crate::pipeline::WALLET)).unwrap();
    assert!(saved.is_some_and(|w| !w.is_empty()));
    // The same session with its last save of the wallet refused.
    let last = whole
        .store
        .records
        .iter()
        .rposition(|k| *k == crate::pipeline::WALLET)
        .expect("the wallet saved");
    let cut = session(last + 1);
    assert_eq!(cut.store_error, Some(StoreError::QuotaExceeded));
    assert!(cut.host.engine.wallet_synced());
    assert!(
        !cut.host.settled_seen,
        "the wallet was settled before it was saved"
    );
}

/// The wallet watches two coinbase scripts: the scan matches their blocks, which are
/// fetched, checked and applied; a reorg withdraws one; a new session resumes it.
#[test]
fn the_wallet_finds_its_coins_in_the_blocks_its_filters_match() {
    let chain = TestChain::generate(5_000);
    let mut net = Net::new(memory(), vec![chain], small);
    net.drive();
    net.host
        .engine
        .watch(&watch_coinbases(&[1_234, 4_500]), 1_000)
        .unwrap();
    net.drive();
    assert!(net.host.engine.wallet_synced());
    assert_eq!(
        wallet_events(&net.host.events),
        [(true, 1_234), (true, 4_500)]
    );
    let w = net.host.engine.wallet().unwrap();
    let txs = w.ledger.transactions();
    assert_eq!(txs.len(), 2);
    assert_eq!(
        (txs[0].received, txs[0].position, txs[0].fee),
        (5_000_000_000, 0, None)
    );
    let b = w.ledger.balance(5_000, 1);
    assert_eq!((b.confirmed, b.immature), (10_000_000_000, 0));
    // A new session resumes the wallet from the store: nothing is fetched again.
    let store = net.store;
    let mut net = Net::new(store, vec![TestChain::generate(5_000)], small);
    net.drive();
    assert_eq!(
        net.host
            .engine
            .wallet()
            .unwrap()
            .ledger
            .transactions()
            .len(),
        2
    );
    assert_eq!(wallet_events(&net.host.events), []);
    // A reorg at 4,000: the coin at 4,500 goes.
    let mut fork = TestChain::generate(5_000);
    fork.reorg(4_000, 1_200, 1);
    let Some(gw) = net.host.gateways[0].as_mut() else {
        panic!("connected");
    };
    gw.chain = fork;
    gw.server.tip_changed();
    net.drive();
    assert_eq!(wallet_events(&net.host.events), [(false, 4_500)]);
    let w = net.host.engine.wallet().unwrap();
    assert_eq!(w.ledger.transactions().len(), 1);
}

/// A wallet's start set too late (its birthday after a payment) is widened by a rescan:
/// the payment below the old start is found, what was found above is withdrawn and found
/// again, and the next session goes on from the widened start. A start above the
/// wallet's is refused, as is a rescan with nothing watched.
#[test]
fn a_rescan_from_below_the_wallets_start_finds_the_payment_before_it() {
    use crate::engine::RescanError;
    let mut net = Net::new(memory(), vec![TestChain::generate(5_000)], small);
    net.drive();
    assert_eq!(
        net.host.engine.rescan(None),
        Err(RescanError::NothingWatched)
    );
    net.host
        .engine
        .watch(&watch_coinbases(&[1_234, 4_500]), 2_000)
        .unwrap();
    net.drive();
    assert_eq!(wallet_events(&net.host.events), [(true, 4_500)]);
    assert_eq!(
        net.host.engine.rescan(Some(3_000)),
        Err(RescanError::AfterStart { start: 2_000 })
    );
    net.host.events.clear();
    net.host.engine.rescan(Some(1_000)).unwrap();
    net.drive();
    assert!(net.host.engine.wallet_synced());
    assert_eq!(
        wallet_events(&net.host.events),
        [(false, 4_500), (true, 1_234), (true, 4_500)]
    );
    // A full rescan from the (widened) start finds the same.
    net.host.events.clear();
    net.host.engine.rescan(None).unwrap();
    net.drive();
    assert_eq!(
        wallet_events(&net.host.events),
        [(false, 1_234), (false, 4_500), (true, 1_234), (true, 4_500)]
    );
    // The next session: the widened start, both payments, nothing fetched again.
    let store = net.store;
    let mut net = Net::new(store, vec![TestChain::generate(5_000)], small);
    net.drive();
    let w = net.host.engine.wallet().unwrap();
    assert_eq!((w.from, w.ledger.transactions().len()), (1_000, 2));
    assert_eq!(wallet_events(&net.host.events), []);
}

/// A wallet resumed beside a saved scan that does not match all its scripts (an app's
/// scan() under way when the tab closed, or a scan saved with a key derived wrongly: a
/// machine computed one) is not left paused: it scans again from its start with its own
/// scripts, and the block paying it after the reload is fetched and found. Before, the
/// scan matched that block and the wallet never asked for it (WebKit, after a reload).
#[test]
fn a_wallet_resumed_beside_a_scan_not_its_own_scans_again_and_finds_its_payments() {
    let mut net = Net::new(memory(), vec![TestChain::generate(5_000)], small);
    net.drive();
    net.host
        .engine
        .watch(&watch_coinbases(&[1_234, 5_050]), 1_000)
        .unwrap();
    net.drive();
    assert_eq!(wallet_events(&net.host.events), [(true, 1_234)]);
    // What the store holds then: the wallet, and a scan of other scripts where its own
    // stood.
    let mut store = net.store;
    let mut other = crate::scan::Scan::new(vec![coinbase_script(2_000, 0)], 1_000);
    let saved = other.save().unwrap();
    block_on(store.put_record(crate::pipeline::SCAN, Some(&saved))).unwrap();
    let mut net = Net::new(store, vec![TestChain::generate(5_100)], small);
    net.drive();
    assert!(
        net.host.engine.wallet_synced(),
        "{:?}",
        net.host.engine.wallet_trace()
    );
    assert_eq!(
        wallet_events(&net.host.events),
        [(false, 1_234), (true, 1_234), (true, 5_050)]
    );
}

/// Unwatching: what is left is found again from the start; nothing left, the scan
/// stops and its saved state goes.
#[test]
fn unwatching_keeps_what_is_left_and_stops_with_nothing_left() {
    let mut net = Net::new(memory(), vec![TestChain::generate(3_000)], small);
    net.drive();
    let both = watch_coinbases(&[1_200, 2_500]);
    net.host.engine.watch(&both, 1_000).unwrap();
    net.drive();
    assert_eq!(
        wallet_events(&net.host.events),
        [(true, 1_200), (true, 2_500)]
    );
    net.host.events.clear();
    // The same script written in capitals is the same one.
    let upper =
        crate::wallet::Watched::Script(hex::encode(coinbase_script(1_200, 0)).to_uppercase());
    net.host.engine.unwatch(&[upper]).unwrap();
    net.drive();
    assert_eq!(
        wallet_events(&net.host.events),
        [(false, 1_200), (false, 2_500), (true, 2_500)]
    );
    assert!(net.host.engine.wallet_synced());
    net.host.events.clear();
    net.host.engine.unwatch(&both).unwrap();
    net.drive();
    assert_eq!(wallet_events(&net.host.events), [(false, 2_500)]);
    assert!(net.host.engine.scan().is_none());
    assert_eq!(
        block_on(net.store.record(crate::pipeline::SCAN)).unwrap(),
        None
    );
    // Something that is not watched: nothing changes; something malformed: refused.
    assert_eq!(net.host.engine.unwatch(&watch_coinbases(&[7])), Ok(()));
    assert!(
        net.host
            .engine
            .unwatch(&[crate::wallet::Watched::Address("bc1nonsense".into())])
            .is_err()
    );
}

/// Gateways serving `chains`, synced, and the wallet watching block 1,500's coinbase
/// from 1,000.
fn watching_1_500(chains: Vec<TestChain>) -> Net<lightwire_store::MemoryStore> {
    let mut net = Net::new(memory(), chains, small);
    net.drive();
    net.host
        .engine
        .watch(&watch_coinbases(&[1_500]), 1_000)
        .unwrap();
    net.drive();
    net
}

/// A gateway sending a block that is not the header's, or withholding one its filter
/// matched, is marked bad naming the rule; the block comes from the other.
#[test]
fn a_wrong_or_withheld_block_marks_its_gateway_bad() {
    for (lie, code) in [(true, "block-mismatch"), (false, "block-withheld")] {
        let mut liar = TestChain::generate(3_000);
        if lie {
            let other = liar.block(1_501);
            liar.replace_block(1_500, other);
        } else {
            liar.withheld_blocks.insert(1_500);
        }
        // The liar first: filters and blocks are asked of another gateway than the
        // headers' source, and it is the first such.
        let net = watching_1_500(vec![TestChain::generate(3_000), liar]);
        let rejected = rejected(&net.host.events);
        assert_eq!(rejected, [(1, code)], "{:?}", net.host.events);
        assert_eq!(wallet_events(&net.host.events), [(true, 1_500)]);
        assert!(net.host.engine.wallet_synced());
    }
}

/// The only gateway that serves blocks withholds one its own filter matched: asked again
/// after the retry wait, it says `not_found` again while the tip it announces still holds
/// the block (no reorganisation came to explain the first one): marked bad. (With another
/// gateway to deliver the block it is judged then; alone, it went unjudged, and the wallet
/// waited on it for ever.)
#[test]
fn a_block_its_voucher_alone_withholds_twice_marks_it_bad() {
    let mut liar = TestChain::generate(3_000);
    liar.withheld_blocks.insert(1_500);
    let mut net = watching_1_500(vec![liar]);
    assert_eq!(rejected(&net.host.events), []);
    net.advance(crate::engine::BLOCK_RETRY + core::time::Duration::from_secs(1));
    assert_eq!(rejected(&net.host.events), [(0, "block-withheld")]);
}

/// The wallet's waits for a block, as the application hears them.
fn waiting(events: &[Event]) -> Vec<(u32, &'static str)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::WalletWaiting { height, reason } => Some((*height, reason.name())),
            _ => None,
        })
        .collect()
}

/// A block the wallet's filter matched, which no connected gateway serves (none has the
/// blocks feature): the wallet says so once it has waited WAIT_REPORT, once, and fetches
/// it as soon as a gateway that serves blocks is there.
#[test]
fn a_matched_block_no_gateway_serves_is_reported_then_fetched() {
    let mut chain = TestChain::generate(3_000);
    chain.serve_blocks = false;
    let mut net = watching_1_500(vec![chain]);
    assert_eq!(waiting(&net.host.events), []);
    net.advance(crate::engine::WAIT_REPORT - Duration::from_secs(1));
    assert_eq!(waiting(&net.host.events), [], "reported before its time");
    net.advance(Duration::from_secs(2));
    assert_eq!(waiting(&net.host.events), [(1_500, "no-gateway")]);
    net.advance(Duration::from_secs(60));
    assert_eq!(
        waiting(&net.host.events),
        [(1_500, "no-gateway")],
        "told once"
    );
    assert_eq!(wallet_events(&net.host.events), []);
    // The gateway now serves blocks: asked at its next session.
    let Some(gw) = net.host.gateways[0].as_mut() else {
        panic!("connected");
    };
    gw.chain.serve_blocks = true;
    net.host.engine.closed(
        GatewayId(0),
        crate::reason::TransportError::Closed,
        net.host.now,
    );
    net.advance(Duration::from_secs(120));
    assert_eq!(wallet_events(&net.host.events), [(true, 1_500)]);
}

/// A block every gateway says it lacks is reported as not found while they are asked
/// again; its voucher, still holding it, is then marked bad for withholding it.
#[test]
fn a_matched_block_every_gateway_lacks_is_reported_as_not_found() {
    let mut liar = TestChain::generate(3_000);
    liar.withheld_blocks.insert(1_500);
    let mut net = watching_1_500(vec![liar]);
    net.advance(crate::engine::WAIT_REPORT + Duration::from_secs(1));
    assert_eq!(waiting(&net.host.events), [(1_500, "not-found")]);
}

/// The gateway asked for a block its filter matched loses the block to a reorganisation
/// while it fetches it: its `not_found` comes before the tip that explains it. Not a
/// block withheld: the gateway is not marked bad, and the reorganisation withdraws the
/// match.
#[test]
fn a_block_a_reorganisation_removed_is_not_found_without_fault() {
    let mut chain = TestChain::generate(3_000);
    chain.pending_blocks.insert(1_500);
    let mut net = watching_1_500(vec![chain]);
    let pending = net.host.engine.wallet_trace().map(|t| t.pending_blocks);
    assert_eq!(
        pending,
        Some(1),
        "block 1,500 is asked for, its answer waits"
    );
    let mut fork = TestChain::generate(3_000);
    fork.reorg(1_400, 1_700, 1);
    let Some(gw) = net.host.gateways[0].as_mut() else {
        panic!("connected");
    };
    gw.chain = fork;
    gw.server.tip_changed();
    gw.server.data_arrived();
    net.drive();
    // What else it was asked on the old branch ends short: asked again after a backoff.
    net.advance(core::time::Duration::from_secs(5));
    assert_eq!(rejected(&net.host.events), []);
    assert_ne!(
        net.host.engine.state(GatewayId(0)),
        crate::engine::GatewayState::Bad
    );
    assert_eq!(net.stored().height, 3_100);
    assert_eq!(wallet_events(&net.host.events), []);
    assert!(net.host.engine.wallet_synced());
}

/// A gateway that never served the filter that matched a block answers `not_found` for
/// it (its node lacks it): it vouched for nothing, and is not marked bad; the block comes
/// from another gateway.
#[test]
fn not_found_from_a_gateway_whose_filter_did_not_match_is_no_fault() {
    // Gateway 0 is the headers' source, serves no filters and lacks the block; gateway 1
    // serves the filters and no blocks; gateway 2 has it.
    let mut lacking = TestChain::generate(3_000);
    lacking.withheld_blocks.insert(1_500);
    lacking.serve_filters = false;
    let mut filters_only = TestChain::generate(3_000);
    filters_only.serve_blocks = false;
    let net = watching_1_500(vec![lacking, filters_only, TestChain::generate(3_000)]);
    assert_eq!(rejected(&net.host.events), [], "{:?}", net.host.events);
    assert_eq!(wallet_events(&net.host.events), [(true, 1_500)]);
    assert!(net.host.engine.wallet_synced());
}

/// A gateway that handshakes, serves headers, and then cuts every `filters` answer short
/// (an answer cut short may be a reorganisation: not marked bad, reconnected): its backoff
/// doubles from 0.5 s to 30 s instead of starting over at each handshake, so it is
/// reconnected a few times a minute, not hammered (and hammering us) hundreds of times.
#[test]
fn a_gateway_that_cuts_every_answer_short_is_backed_off_not_hammered() {
    let mut chain = TestChain::generate(3_000);
    chain.missing_filters.insert(2_000);
    let mut net = Net::new(memory(), vec![chain], small);
    net.drive();
    net.host
        .engine
        .start_scan(vec![coinbase_script(2_500, 0)], 1_000);
    net.drive();
    let cut_short = |events: &[Event]| {
        events
            .iter()
            .filter(|e| {
                matches!(e, Event::Gateway { reason: Some(r), .. } if r.code() == "filters-cut-short")
            })
            .count()
    };
    assert_eq!(cut_short(&net.host.events), 1, "{:?}", net.host.events);
    let before = net.host.engine.counters().reconnects;
    net.advance(core::time::Duration::from_secs(60));
    let reconnects = net.host.engine.counters().reconnects - before;
    // Delays of at least 0.25, 0.5, 1, 2, 4, 8, 15, 15 s (half of each, at the least,
    // with jitter): no more than eight in a minute.
    assert!((3..=8).contains(&reconnects), "{reconnects} in a minute");
    assert_eq!(cut_short(&net.host.events) as u64, 1 + reconnects);
    assert_ne!(
        net.host.engine.state(GatewayId(0)),
        crate::engine::GatewayState::Bad
    );
}

/// A transaction goes to every gateway that relays; the application hears how many
/// passed it on. One that is not a transaction never leaves.
#[test]
fn a_broadcast_reaches_every_relaying_gateway() {
    use crate::engine::BroadcastError;
    use lightwire_wire::RelayStatus;
    let mut other = TestChain::generate(100);
    other.relay = false;
    let mut net = Net::new(
        memory(),
        vec![TestChain::generate(100), TestChain::generate(100), other],
        small,
    );
    net.drive();
    let mut tx = vec![2, 0, 0, 0, 1];
    tx.extend_from_slice(&[5; 32]);
    tx.extend_from_slice(&[0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 1]);
    tx.extend_from_slice(&1_000u64.to_le_bytes());
    tx.push(22);
    tx.extend_from_slice(&[0, 0x14]);
    tx.extend_from_slice(&[9; 20]);
    tx.extend_from_slice(&[0; 4]);
    let (id, txid) = net.host.engine.broadcast(&tx).unwrap();
    net.drive();
    let done: Vec<_> = net
        .host
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Broadcast {
                id: i,
                txid: t,
                relayed,
                refused,
            } => Some((*i, *t, relayed.clone(), refused.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(done, [(id, txid, vec![GatewayId(0), GatewayId(1)], vec![])]);
    for g in [0, 1] {
        let gw = net.host.gateways[g].as_ref().unwrap();
        assert_eq!(*gw.chain.relayed.lock().unwrap(), [tx.clone()]);
    }
    assert_eq!(
        net.host.engine.broadcast(&tx[..30]),
        Err(BroadcastError::Refused(RelayStatus::Malformed))
    );
    // Bitcoin Core's CheckTransaction, which gets a relaying gateway dropped: checked here
    // first (an output above 21 million bitcoin).
    let parsed = lightwire_primitives::Tx::parse(&tx).unwrap();
    let value = parsed.outputs().next().unwrap().value.to_le_bytes();
    let at = tx.windows(8).position(|w| w == value).unwrap();
    let mut invalid = tx.clone();
    invalid[at..at + 8].copy_from_slice(&(21_000_000 * 100_000_000u64 + 1).to_le_bytes());
    assert_eq!(
        net.host.engine.broadcast(&invalid),
        Err(BroadcastError::Refused(RelayStatus::Invalid))
    );
    assert_eq!(
        net.host.engine.broadcast(&vec![0; 70_000]),
        Err(BroadcastError::TooLarge(70_000))
    );
}

/// Fee rates from three gateways: two that disagree wildly and one that serves none. Each
/// answer is heard as the gateway said it; the figure is bounded and the lower median;
/// the gateway that serves none is not asked. An answer nobody asked for is a fault.
#[test]
fn fee_rates_from_gateways_that_disagree_are_bounded_and_each_shown() {
    use lightwire_wire::FeeSource;
    let mut honest = TestChain::generate(100);
    honest.fee_rates = Some((
        FeeSource::SmartFee,
        [Some(25_000), Some(12_000), Some(2_000)],
    ));
    let mut wild = TestChain::generate(100);
    wild.fee_rates = Some((FeeSource::EstimateFee, [Some(u64::MAX - 1), Some(1), None]));
    let mut net = Net::new(
        memory(),
        vec![honest, wild, TestChain::generate(100)],
        small,
    );
    net.drive();
    let id = net
        .host
        .engine
        .fee_rates()
        .expect("two gateways serve fee rates");
    net.drive();
    let heard: Vec<_> = net
        .host
        .events
        .iter()
        .filter_map(|e| match e {
            Event::FeeRates {
                id: i,
                rates,
                answers,
            } => Some((*i, *rates, answers.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(heard.len(), 1);
    let (i, rates, mut answers) = heard[0].clone();
    assert_eq!(i, id);
    // 1 block: 25,000 and 10,000,000 (bounded): the lower. 6: 12,000 and 100 (bounded
    // up to 0.1 sat/vB): the lower. 144: the honest one alone, not above 6's.
    assert_eq!(rates, [Some(25_000), Some(100), Some(100)]);
    answers.sort_by_key(|a| a.gateway);
    assert_eq!(answers.len(), 2, "the gateway serving none was not asked");
    assert_eq!(answers[0].rates, [Some(25_000), Some(12_000), Some(2_000)]);
    assert_eq!(answers[1].source, FeeSource::EstimateFee);
    assert_eq!(
        answers[1].rates,
        [Some(u64::MAX - 1), Some(1), None],
        "as it said them"
    );
    for g in 0..3 {
        assert_ne!(
            net.host.engine.state(GatewayId(g)),
            crate::engine::GatewayState::Bad
        );
    }
}

/// A gateway whose fee rates (or relay answer) arrive after the 30 s the client waits
/// (a slow network, a busy node) is not at fault: the answer was asked for; the call was
/// answered without it, and the late answer is let go.
#[test]
fn answers_that_arrive_after_their_wait_are_let_go_without_fault() {
    use lightwire_wire::FeeSource;
    let mut slow = TestChain::generate(100);
    slow.fee_rates = Some((
        FeeSource::SmartFee,
        [Some(25_000), Some(12_000), Some(2_000)],
    ));
    let mut net = Net::new(memory(), vec![TestChain::generate(100), slow], small);
    net.drive();
    net.hold(GatewayId(1));
    let id = net
        .host
        .engine
        .fee_rates()
        .expect("one gateway serves fee rates");
    let mut tx = vec![2, 0, 0, 0, 1];
    tx.extend_from_slice(&[5; 32]);
    tx.extend_from_slice(&[0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 1]);
    tx.extend_from_slice(&1_000u64.to_le_bytes());
    tx.extend_from_slice(&[22, 0, 0x14]);
    tx.extend_from_slice(&[9; 20]);
    tx.extend_from_slice(&[0; 4]);
    net.host.engine.broadcast(&tx).unwrap();
    net.drive();
    net.advance(Duration::from_secs(31));
    assert!(
        net.host
            .events
            .iter()
            .any(|e| matches!(e, Event::FeeRates { id: i, answers, .. } if *i == id && answers.is_empty())),
        "answered without the slow gateway"
    );
    net.host.events.clear();
    net.release(GatewayId(1));
    assert_eq!(rejected(&net.host.events), []);
    assert_ne!(
        net.host.engine.state(GatewayId(1)),
        crate::engine::GatewayState::Bad
    );
}

/// A transaction of the wallet's that a gateway relayed is the wallet's unconfirmed
/// transaction as soon as the broadcast is answered: the coin it spends still counted
/// confirmed (no block spent it), its net apart, never both. It is saved and resumed
/// with the wallet; held by a gateway it stays past the expiry, and once none is known
/// to hold it (after a restart), it expires. One that no gateway relayed never shows.
#[test]
fn a_broadcast_of_the_wallets_is_unconfirmed_at_once_saved_and_expires() {
    use crate::wallet::WalletChange;
    let mut busy = TestChain::generate(3_000);
    busy.relay_answer = lightwire_wire::RelayStatus::Busy;
    let (mut net, ours) = watching_1234(vec![TestChain::generate(3_000)], |e| {
        small(e);
        e.set_unconfirmed_expiry(Duration::from_secs(60));
    });
    let coin = net.host.engine.wallet().unwrap().ledger.transactions()[0].txid;
    // Spend it: 4,000,000,000 elsewhere, 999,990,000 back to the same script, fee 10,000.
    let mut tx = vec![2, 0, 0, 0, 1];
    tx.extend_from_slice(&coin.0);
    tx.extend_from_slice(&[0, 0, 0, 0, 0, 0xfd, 0xff, 0xff, 0xff, 2]);
    tx.extend_from_slice(&4_000_000_000u64.to_le_bytes());
    tx.extend_from_slice(&[22, 0, 0x14]);
    tx.extend_from_slice(&[9; 20]);
    tx.extend_from_slice(&999_990_000u64.to_le_bytes());
    tx.push(ours.len() as u8);
    tx.extend_from_slice(&ours);
    tx.extend_from_slice(&[0; 4]);
    net.host.events.clear();
    let (_, txid) = net.host.engine.broadcast(&tx).unwrap();
    net.drive();
    let unconfirmed: Vec<_> = net
        .host
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Wallet(_, WalletChange::Unconfirmed(t)) => Some(t.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(unconfirmed.len(), 1, "{:?}", net.host.events);
    let t = &unconfirmed[0];
    assert_eq!(
        (t.txid, t.gateways(), t.sent, t.received, t.fee),
        (txid, 1, 5_000_000_000, 999_990_000, Some(10_000))
    );
    let balance = |net: &Net<_>| net.host.engine.wallet().unwrap().balance(3_000, 1);
    let b = balance(&net);
    assert_eq!(
        (b.confirmed, b.unconfirmed),
        (5_000_000_000, -4_000_010_000)
    );
    // Held by a gateway: kept past the expiry.
    net.advance(Duration::from_secs(120));
    assert_eq!(net.host.engine.wallet().unwrap().unconfirmed.len(), 1);
    // A new session: resumed from the store, no gateway known to hold it; it expires.
    let store = net.store;
    let mut net = Net::new(store, vec![busy], |e| {
        small(e);
        e.set_unconfirmed_expiry(Duration::from_secs(60));
    });
    net.drive();
    let w = net.host.engine.wallet().unwrap();
    assert_eq!(w.unconfirmed.transactions()[0].txid, txid);
    assert_eq!(w.unconfirmed.transactions()[0].gateways(), 0);
    assert_eq!(balance(&net).unconfirmed, -4_000_010_000);
    // Broadcast through a gateway whose node is gone: refused, never the wallet's.
    let mut other = tx.clone();
    let at = other.len() - 4 - ours.len() - 1 - 8;
    other[at..at + 8].copy_from_slice(&999_980_000u64.to_le_bytes());
    net.host.engine.broadcast(&other).unwrap();
    net.drive();
    assert_eq!(net.host.engine.wallet().unwrap().unconfirmed.len(), 1);
    net.advance(Duration::from_secs(61));
    let dropped: Vec<_> = net
        .host
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Wallet(_, WalletChange::Dropped(d)) => Some(*d),
            _ => None,
        })
        .collect();
    assert_eq!(
        dropped,
        [lightwire_wallet::unconfirmed::Dropped {
            txid,
            reason: lightwire_wallet::unconfirmed::Reason::Expired,
            by: None
        }]
    );
    assert_eq!(balance(&net).unconfirmed, 0);
    // The drop is saved: a third session has nothing unconfirmed.
    let store = net.store;
    let mut net = Net::new(store, vec![TestChain::generate(3_000)], small);
    net.drive();
    assert!(net.host.engine.wallet().unwrap().unconfirmed.is_empty());
}

#[test]
fn a_fork_deeper_than_the_window_reorganises_the_store() {
    let mut net = Net::new(memory(), vec![TestChain::generate(6_000)], small);
    net.drive();
    assert_eq!(net.stored().height, 6_000);
    let store = net.store;
    // The gateway's chain now forks at 1,000 (5,000 below our tip, deeper than the
    // 4,032-header window) and is longer.
    let mut fork = TestChain::generate(6_000);
    fork.reorg(1_000, 5_500, 1);
    let branch_tip = fork.header(6_500).block_hash();
    let branch_1001 = fork.header(1_001);
    let mut net = Net::new(store, vec![fork], small);
    net.drive();
    assert_eq!(net.stored().height, 6_500);
    assert_eq!(net.stored().hash, branch_tip);
    assert_eq!(
        block_on(net.store.header(1_001)).unwrap(),
        Some(branch_1001),
        "the store holds the branch from the fork on"
    );
    let depth = net.host.events.iter().find_map(|e| match e {
        Event::Reorg { depth, .. } => Some(*depth),
        _ => None,
    });
    assert_eq!(depth, Some(5_000));
    assert!(net.host.engine.is_synced());
    // Deeper than the filter headers kept in memory too: the branch's are stored.
    let mut want = TestChain::generate(6_000);
    want.reorg(1_000, 5_500, 1);
    check_filters(&net.store, &want, 6_500);
}

/// An answer of headers already stored deep below the window costs one index lookup and
/// a range read, not a lookup per header.
#[test]
fn known_deep_headers_are_compared_not_looked_up_one_by_one() {
    let chain = TestChain::generate(8_000);
    let mut net = Net::new(
        FailingStore::new(memory(), usize::MAX),
        vec![TestChain::generate(8_000)],
        small,
    );
    net.drive();
    assert_eq!(net.stored().height, 8_000);
    let store = &net.store;
    let batch: Vec<u8> = (1_001..=1_819)
        .flat_map(|h| chain.header(h).encode())
        .collect();
    let parent = chain.header(1_000).block_hash();
    store.lookups.set(0);
    let (entries, known) = block_on(ancestors(store, &parent, &batch))
        .unwrap()
        .expect("the parent is stored");
    assert_eq!(known, 819, "every header is on the stored chain");
    assert_eq!(store.lookups.get(), 1, "only the parent was looked up");
    assert_eq!(entries.last().map(|e| e.height), Some(1_819));
    assert_eq!(entries.len(), 1_820, "from genesis: fewer than the window");
    // A batch that parts from the stored chain after 5 headers.
    let mut fork = TestChain::generate(8_000);
    fork.reorg(1_005, 20, 3);
    let batch: Vec<u8> = (1_001..=1_020)
        .flat_map(|h| fork.header(h).encode())
        .collect();
    let (entries, known) = block_on(ancestors(store, &parent, &batch))
        .unwrap()
        .unwrap();
    assert_eq!(known, 5);
    assert_eq!(
        entries.last().unwrap().hash,
        chain.header(1_005).block_hash()
    );
    // Deep in a long chain, the window's worth ending at the last known header.
    let parent = chain.header(7_000).block_hash();
    let batch: Vec<u8> = (7_001..=7_010)
        .flat_map(|h| chain.header(h).encode())
        .collect();
    let (entries, known) = block_on(ancestors(store, &parent, &batch))
        .unwrap()
        .unwrap();
    assert_eq!(known, 10);
    assert_eq!(entries.len(), WINDOW_LEN);
    assert_eq!(entries.last().unwrap().height, 7_010);
    let unknown = BlockHash([7; 32]);
    assert!(
        block_on(ancestors(store, &unknown, &batch))
            .unwrap()
            .is_none()
    );
}

#[test]
fn a_failed_commit_keeps_the_last_whole_one_and_a_reopen_finishes() {
    let store = FailingStore::new(memory(), 3);
    let mut net = Net::new(store, vec![TestChain::generate(5_000)], small);
    net.drive();
    assert_eq!(
        net.store_error,
        Some(lightwire_store::StoreError::QuotaExceeded)
    );
    assert!(
        net.host.engine.is_stopped(),
        "a store failure stops the sync"
    );
    // Two whole commits (of at least 1,000 each), nothing of the third.
    let stored = net.stored();
    assert_eq!(Some(stored), net.store.last_ok);
    assert!((2_000..5_000).contains(&stored.height), "{stored:?}");
    let mut store = net.store;
    store.fail_at = usize::MAX;
    let mut net = Net::new(store, vec![TestChain::generate(5_000)], small);
    net.drive();
    assert_eq!(net.stored().height, 5_000);
    assert_eq!(net.store_error, None);
}

#[test]
fn a_fake_header_stored_in_one_session_does_not_lock_out_the_real_chain_in_the_next() {
    use lightwire_chain::{Params, REGTEST};
    use lightwire_store::MemoryStore;
    let honest = TestChain::generate(300);
    // Regtest with a checkpoint at 200 on the honest chain.
    let cp: &'static str = Box::leak(honest.header(200).block_hash().to_string().into_boxed_str());
    let params: &'static Params = Box::leak(Box::new(Params {
        checkpoints: Box::leak(vec![(200, cp)].into_boxed_slice()),
        ..REGTEST.clone()
    }));
    // Session 1: the only gateway is hostile, and serves one valid header on genesis.
    let mut fake = TestChain::generate(0);
    fake.reorg(0, 1, 9);
    let mut net = Net::new(MemoryStore::new(params), vec![fake], small);
    net.drive();
    assert_eq!(net.stored().height, 1, "the fake header was committed");
    let store = net.store;
    // Session 2: an honest gateway. Its chain forks below the checkpoint, which this
    // chain has not reached: it is taken, and the honest gateway is not marked bad.
    let tip = honest.header(300).block_hash();
    let mut net = Net::new(store, vec![honest], small);
    net.drive();
    assert_eq!(net.stored().hash, tip);
    assert_eq!(net.stored().height, 300);
    assert!(
        !net.host
            .events
            .iter()
            .any(|e| matches!(e, Event::Rejected { .. })),
        "{:?}",
        net.host.events
    );
}

#[test]
fn below_the_minimum_chain_work_nothing_is_synced_but_everything_is_stored() {
    use lightwire_chain::{Params, REGTEST, U256};
    use lightwire_store::MemoryStore;
    // Regtest with a minimum chain work of 500 headers (each is 2 work).
    let min: &'static str =
        Box::leak(hex::encode(U256::from_u64(2 * 501).to_be_bytes()).into_boxed_str());
    let params: &'static Params = Box::leak(Box::new(Params {
        min_chain_work: min,
        ..REGTEST.clone()
    }));
    let mut net = Net::new(
        MemoryStore::new(params),
        vec![TestChain::generate(300)],
        small,
    );
    net.drive();
    // Validated, stored and committed as it came...
    assert_eq!(net.stored().height, 300);
    assert!(
        net.host.engine.syncer().is_synced(),
        "caught up with the gateway"
    );
    // ...but not reported synced, and the gateway not "synced" either.
    assert!(!net.host.engine.is_synced());
    assert_eq!(
        net.host.engine.state(GatewayId(0)),
        crate::engine::GatewayState::Syncing
    );
    // Enough work: synced.
    let store = net.store;
    let mut net = Net::new(store, vec![TestChain::generate(600)], small);
    net.drive();
    assert_eq!(net.stored().height, 600);
    assert!(net.host.engine.is_synced());
}
