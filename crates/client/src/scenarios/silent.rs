//! A silent-payment receiver in the engine, over in-memory gateways serving tweaks: the
//! payment found and made a coin of the wallet; gateways whose tweak lists differ where
//! nobody can prove either leave the scan waiting below the block, taking neither word.
//!
//! The chains' tweak lists here are the test's choice, not computed from their synthetic
//! blocks (whose inputs spend nothing real): the paying block's list holds a tweak for
//! which the block pays the receiver's first key. Disputes settled by the block and what
//! it spends from are the sans-IO scan's tests (`crate::silent_scan`).

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use lightwire_chain::synthetic::{DEFAULT_PROFILE, Payment, Pool};
use lightwire_proto::testing::TestChain;
use lightwire_wallet::silent::Receiver;

use super::{rejected, small, wallet_events};
use crate::engine::Event;
use crate::testnet::{Net, memory};
use crate::tweaks::tests::G;

const PAID: u32 = 1_500;
const VALUE: u64 = 42_000;

fn receiver() -> Receiver {
    Receiver::new(&[0x11; 32], &G).unwrap()
}

/// The receiver's first key for tweak G, and the taproot script paying it.
fn paid_key() -> ([u8; 32], Vec<u8>) {
    let mut keys = Vec::new();
    receiver().first_keys(&G, &mut keys).unwrap();
    let mut script = vec![0x51, 0x20];
    script.extend_from_slice(&keys[0]);
    (keys[0], script)
}

/// A chain of 2,000 blocks whose block 1,500 pays the receiver, serving tweak lists: G
/// in the paying block's when `honest`, none there otherwise; G in every 300th block's too
/// (their filters hold none of the receiver's keys).
fn chain(honest: bool) -> TestChain {
    let (_, script) = paid_key();
    let payment = Payment {
        height: PAID,
        script,
        value: VALUE,
    };
    let pool = Box::leak(Box::new(Pool::with_payments(
        &DEFAULT_PROFILE,
        [payment],
        2_000,
    )));
    let mut chain = TestChain::generate_paying(2_000, pool);
    let lists = (0..=2_000u32)
        .map(|h| match h {
            PAID if honest => vec![G],
            PAID => Vec::new(),
            h if h % 300 == 0 => vec![G],
            _ => Vec::new(),
        })
        .collect();
    chain.serve_tweaks(lists);
    chain
}

fn found(events: &[Event]) -> Vec<(u32, [u8; 32], u32)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::SilentPayment {
                height, payment, ..
            } => height.map(|h| (h, payment.found.key, payment.vout)),
            _ => None,
        })
        .collect()
}

/// One gateway, and then two: the payment is found from the receiver's start, told once,
/// and the wallet watches its script: the coin is in its balance. Again with the filter checks run outside the engine (as the tab's workers run them),
/// each answered as a later input.
#[test]
fn a_silent_payment_is_found_and_is_a_coin_of_the_wallet() {
    for (gateways, offload) in [(1, false), (2, false), (1, true), (2, true)] {
        let chains = (0..gateways).map(|_| chain(true)).collect();
        let mut net = Net::new(memory(), chains, small);
        net.drive();
        if offload {
            net.host.engine.offload_silent(true);
            let helper = lightwire_wallet::silent_block::BlockScanner::new();
            net.host.scan_helper = Some((helper, receiver()));
        }
        net.host.engine.watch_silent_payments(receiver(), 1_000);
        net.drive();
        let (key, _) = paid_key();
        let told = found(&net.host.events);
        assert_eq!(told.len(), 1, "{told:?}");
        assert_eq!((told[0].0, told[0].1), (PAID, key));
        assert_eq!(rejected(&net.host.events), []);
        let scan = net.host.engine.silent_scan().unwrap();
        assert_eq!(scan.next(), 2_001, "scanned to the tip");
        assert_eq!(wallet_events(&net.host.events), [(true, PAID)]);
        let w = net.host.engine.wallet().unwrap();
        assert_eq!(w.balance(2_000, 1).confirmed, VALUE);
        // The coin's script is watched with the tweak that spends it.
        let tweak = net.host.events.iter().find_map(|e| match e {
            Event::SilentPayment { payment, .. } => Some(payment.found.tweak),
            _ => None,
        });
        let (_, script) = paid_key();
        assert_eq!(
            w.watch.origin(&script),
            tweak.map(|tweak| lightwire_wallet::Origin::Silent {
                tweak,
                label: None,
                spend: G,
            })
        );
    }
}

/// A gateway whose tweak list of the paying block leaves the tweak out (its chain rebuilt
/// on it) beside one whose list holds it: their words differ there, and neither can be
/// proven (nobody gives what the block spends from). The scan takes neither: it waits
/// below the block, says so, and marks nobody bad. Alone, the liar's word is taken (as a
/// lone gateway's filter headers are) and the payment is not found.
#[test]
fn differing_tweak_lists_nobody_can_settle_leave_the_scan_waiting_below_them() {
    let mut net = Net::new(memory(), vec![chain(false), chain(true)], small);
    net.drive();
    net.host.engine.watch_silent_payments(receiver(), 1_000);
    net.drive();
    assert_eq!(found(&net.host.events), []);
    assert!(
        net.host
            .events
            .iter()
            .any(|e| matches!(e, Event::SilentStalled { height: PAID })),
    );
    assert_eq!(rejected(&net.host.events), []);
    assert!(net.host.engine.silent_scan().unwrap().next() <= PAID);

    let mut net = Net::new(memory(), vec![chain(false)], small);
    net.drive();
    net.host.engine.watch_silent_payments(receiver(), 1_000);
    net.drive();
    assert_eq!(found(&net.host.events), []);
    assert_eq!(net.host.engine.silent_scan().unwrap().next(), 2_001);
}

/// The scan's progress is saved with the store (the receiver's id and where it stands, no
/// key): the next session's receiver, the same keys from no earlier block, goes on from
/// there and finds nothing again (what it found is in the wallet); one from an earlier
/// block, or another receiver, scans from its own start.
#[test]
fn the_scans_progress_is_saved_and_the_next_session_goes_on_from_it() {
    let session = |store, from: u32, r: Receiver| {
        let mut net = Net::new(store, vec![chain(true)], small);
        net.drive();
        net.host.engine.watch_silent_payments(r, from);
        net.drive();
        let scan = net.host.engine.silent_scan().unwrap();
        let (first, next) = (scan.from(), scan.next());
        (found(&net.host.events).len(), next, first, net.store)
    };
    let (n, next, _, store) = session(memory(), 1_000, receiver());
    assert_eq!((n, next), (1, 2_001));
    let (n, next, _, store) = session(store, 1_000, receiver());
    assert_eq!((n, next), (0, 2_001), "nothing scanned again");
    let (n, next, _, store) = session(store, 1_200, receiver());
    assert_eq!((n, next), (0, 2_001), "a later start is covered");
    let (n, next, _, store) = session(store, 900, receiver());
    assert_eq!((n, next), (1, 2_001), "an earlier start scans from it");
    let mut labelled = receiver();
    labelled.add_label(1).unwrap();
    let (n, _, first, _) = session(store, 1_000, labelled);
    assert_eq!(
        (n, first),
        (1, 1_000),
        "another receiver (a label more) from its start"
    );
}

/// A progress saved on a lone liar's word (its lists leave the payment out) is not taken
/// on a later session's gateways' word: one whose tweak chain does not pass through the
/// header the scan reached tells another chain below it, and the scan goes back to its
/// start; the two lists of the paying block then differ (here nobody gives the proof:
/// the scan waits below the block rather than take the saved progress).
#[test]
fn a_progress_saved_on_a_liars_word_is_scanned_again_beside_another_gateway() {
    let mut net = Net::new(memory(), vec![chain(false)], small);
    net.drive();
    net.host.engine.watch_silent_payments(receiver(), 1_000);
    net.drive();
    assert_eq!(found(&net.host.events), []);
    assert_eq!(net.host.engine.silent_scan().unwrap().next(), 2_001);

    let mut net = Net::new(net.store, vec![chain(false), chain(true)], small);
    net.drive();
    net.host.engine.watch_silent_payments(receiver(), 1_000);
    net.drive();
    assert!(net.host.engine.silent_scan().unwrap().next() <= PAID);
    assert!(
        net.host
            .events
            .iter()
            .any(|e| matches!(e, Event::SilentStalled { height: PAID }))
    );
    assert_eq!(rejected(&net.host.events), []);

    // The honest gateway alone: the liar's saved progress is not its chain either.
    let mut net = Net::new(net.store, vec![chain(true)], small);
    net.drive();
    net.host.engine.watch_silent_payments(receiver(), 1_000);
    net.drive();
    let (key, _) = paid_key();
    assert_eq!(
        found(&net.host.events)
            .iter()
            .map(|f| (f.0, f.1))
            .collect::<Vec<_>>(),
        [(PAID, key)]
    );
}

/// Following the tip once the wallet holds a coin the receiver found (so the wallet's scan
/// follows it too): each new block's filter is fetched once, for both scans (the receiver's
/// takes the one the wallet's took, checked again against the same filter header).
#[test]
fn following_the_tip_each_new_blocks_filter_comes_once_for_both_scans() {
    let mut net = Net::new(memory(), vec![chain(true)], small);
    net.drive();
    net.host.engine.watch_silent_payments(receiver(), 1_000);
    net.drive();
    assert_eq!(wallet_events(&net.host.events), [(true, PAID)]);
    let gw = net.host.gateways[0].as_mut().expect("connected");
    gw.chain.reorg(2_000, 5, 1);
    // Every new block has a tweak (none the receiver's): its filter is asked about.
    let lists = (0..=2_005u32)
        .map(|h| match h {
            PAID => vec![G],
            h if h % 300 == 0 || h > 2_000 => vec![G],
            _ => Vec::new(),
        })
        .collect();
    gw.chain.serve_tweaks(lists);
    gw.chain.filter_reads.lock().unwrap().clear();
    gw.server.tip_changed();
    net.drive();
    net.advance(std::time::Duration::from_secs(10));
    let scan = net.host.engine.silent_scan().unwrap();
    assert_eq!(scan.next(), 2_006, "the receiver's scan followed the tip");
    assert_eq!(
        scan.tweaks_scanned(),
        3 + 5,
        "the new blocks' tweaks were checked"
    );
    let gw = net.host.gateways[0].as_ref().expect("connected");
    let reads = gw.chain.filter_reads.lock().unwrap().clone();
    let new: Vec<u32> = reads.into_iter().filter(|&h| h > 2_000).collect();
    assert_eq!(
        new,
        [2_001, 2_002, 2_003, 2_004, 2_005],
        "each new block's filter once"
    );
}

/// 2·G, compressed: a tweak no block of these chains has.
const TWEAK_2G: [u8; 33] = [
    0x02, 0xc6, 0x04, 0x7f, 0x94, 0x41, 0xed, 0x7d, 0x6d, 0x30, 0x45, 0x40, 0x6e, 0x95, 0xc0, 0x7c,
    0xd8, 0x5c, 0x77, 0x8e, 0x4b, 0x8c, 0xef, 0x3c, 0xa7, 0xab, 0xac, 0x09, 0xb9, 0x5c, 0x70, 0x9e,
    0xe5,
];

/// A transaction paying 1,000 to the receiver's first key for tweak 2·G (output 1, beside
/// one paying elsewhere), and that key.
fn mempool_payment() -> (Vec<u8>, [u8; 32]) {
    let mut keys = Vec::new();
    receiver().first_keys(&TWEAK_2G, &mut keys).unwrap();
    let mut script = vec![0x51, 0x20];
    script.extend_from_slice(&keys[0]);
    let tx = super::mempool::paying(9, 0, &[&[0x51], &script]);
    (tx, keys[0])
}

/// `chain(true)` whose gateway serves a mempool too.
fn chain_with_mempool() -> TestChain {
    let mut c = chain(true);
    c.mempool = Some(Default::default());
    c
}

/// A session on `n` gateways serving tweaks and a mempool, its receiver scanning from
/// block 1,000 (the payment of block 1,500 found).
fn receiving_beside_mempools(n: usize) -> Net<lightwire_store::MemoryStore> {
    let mut net = Net::new(
        memory(),
        (0..n).map(|_| chain_with_mempool()).collect(),
        small,
    );
    net.drive();
    net.host.engine.watch_silent_payments(receiver(), 1_000);
    net.drive();
    net
}

/// The silent payments told without a block: (txid, vout, key).
fn found_unconfirmed(events: &[Event]) -> Vec<(lightwire_primitives::Txid, u32, [u8; 32])> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::SilentPayment {
                height: None,
                payment,
                ..
            } => Some((payment.txid, payment.vout, payment.found.key)),
            _ => None,
        })
        .collect()
}

/// A silent payment enters a gateway's mempool with its tweak: the receiver finds it
/// unconfirmed (told once, held by that gateway, what it pays counted apart), though the
/// wallet watched nothing before; the other gateway announces it without a tweak: held by
/// both, not fetched again. The confirmed payment of block 1,500 is found as before.
#[test]
fn a_silent_payment_in_the_mempool_is_found_unconfirmed() {
    let mut net = receiving_beside_mempools(2);
    assert_eq!(found(&net.host.events).len(), 1, "the mined one");
    let (tx, key) = mempool_payment();
    let mut txid = [0u8; 32];
    super::mempool::mempool(&mut net, 0, |m| txid = m.add_tweaked(&tx, TWEAK_2G));
    let txid = lightwire_primitives::Txid(txid);
    assert_eq!(found_unconfirmed(&net.host.events), [(txid, 1, key)]);
    let w = net.host.engine.wallet().unwrap();
    let t = w.unconfirmed.get(&txid).expect("held unconfirmed");
    assert_eq!((t.received, t.gateways(), t.silent.len()), (1_000, 1, 1));
    assert_eq!(t.silent[0].spend, G);
    assert_eq!(w.balance(2_000, 1).unconfirmed, 1_000);
    assert_eq!(w.balance(2_000, 1).confirmed, VALUE, "counted apart");
    // The other gateway holds it too, without a tweak: held by both, not fetched again.
    super::mempool::mempool(&mut net, 1, |m| {
        m.add(&tx);
    });
    let w = net.host.engine.wallet().unwrap();
    assert_eq!(w.unconfirmed.get(&txid).unwrap().gateways(), 2);
    let served: Vec<usize> = (0..2)
        .map(|g| {
            let gw = net.host.gateways[g].as_ref().unwrap();
            gw.chain.mempool.as_ref().unwrap().served()
        })
        .collect();
    assert_eq!(served, [1, 0]);
    assert_eq!(found_unconfirmed(&net.host.events).len(), 1, "told once");
    assert_eq!(rejected(&net.host.events), []);
}

/// A gateway gives the payment's transaction another tweak (a point, not its own): alone,
/// nothing is fetched and the payment is not seen before it is mined (the tweak lists the
/// gateways agree on find it then); beside a gateway giving the right tweak, it is found.
/// A tweak that is not a point is its gateway's fault.
#[test]
fn a_wrong_tweak_hides_the_payment_only_from_its_own_digest() {
    let (tx, key) = mempool_payment();
    let mut net = receiving_beside_mempools(1);
    super::mempool::mempool(&mut net, 0, |m| {
        m.add_tweaked(&tx, G);
    });
    assert_eq!(found_unconfirmed(&net.host.events), []);
    let gw = net.host.gateways[0].as_ref().unwrap();
    assert_eq!(gw.chain.mempool.as_ref().unwrap().served(), 0);

    let mut net = receiving_beside_mempools(2);
    let mut txid = [0u8; 32];
    super::mempool::mempool(&mut net, 0, |m| txid = m.add_tweaked(&tx, G));
    super::mempool::mempool(&mut net, 1, |m| {
        m.add_tweaked(&tx, TWEAK_2G);
    });
    let txid = lightwire_primitives::Txid(txid);
    assert_eq!(found_unconfirmed(&net.host.events), [(txid, 1, key)]);
    assert_eq!(rejected(&net.host.events), []);

    // x = 5 is no point's x.
    let mut off = [0u8; 33];
    off[0] = 2;
    off[32] = 5;
    super::mempool::mempool(&mut net, 0, |m| {
        m.add_tweaked(&super::mempool::paying(10, 0, &[&[0x51]]), off);
    });
    assert_eq!(rejected(&net.host.events), [(0, "tweak-not-a-point")]);
}

/// The wallet watched a script, so its gateway was subscribed without tweaks, and a
/// silent payment already waits in the mempool: the receiver, started later, has the
/// gateway subscribed again with tweaks, and finds it in the fresh snapshot.
#[test]
fn a_receiver_started_later_finds_what_waits_in_the_mempool() {
    let (tx, key) = mempool_payment();
    let mut net = Net::new(memory(), vec![chain_with_mempool()], small);
    net.drive();
    net.host
        .engine
        .watch(&super::watch_coinbases(&[1_234]), 1_000)
        .unwrap();
    net.drive();
    let mut txid = [0u8; 32];
    super::mempool::mempool(&mut net, 0, |m| txid = m.add_tweaked(&tx, TWEAK_2G));
    assert_eq!(found_unconfirmed(&net.host.events), []);
    net.host.engine.watch_silent_payments(receiver(), 1_000);
    net.drive();
    let txid = lightwire_primitives::Txid(txid);
    assert_eq!(found_unconfirmed(&net.host.events), [(txid, 1, key)]);
    let w = net.host.engine.wallet().unwrap();
    assert_eq!(w.unconfirmed.get(&txid).unwrap().received, 1_000);
}

/// The wallet watches a script from block 1,000 and has scanned to the tip; a receiver
/// then finds a payment in block 1,500. The wallet watches the payment's script from that
/// block: its scan goes back to 1,500, not to its own start (the payment's key can be in
/// no block before the one that pays it), and finds the coin. Before, each payment found
/// rescanned every filter from the wallet's start.
#[test]
fn a_payment_found_rescans_the_wallet_only_from_its_block() {
    let mut net = Net::new(memory(), vec![chain(true)], small);
    net.drive();
    net.host
        .engine
        .watch(&super::watch_coinbases(&[1_234]), 1_000)
        .unwrap();
    net.drive();
    let gw = net.host.gateways[0].as_ref().expect("connected");
    gw.chain.filter_reads.lock().unwrap().clear();
    // With the spend key's origin: the wallet keeps it with the coin, for the signer.
    let origin =
        lightwire_wallet::descriptor::KeyOrigin::parse("[d34db33f/352h/0h/0h/0h/0]").unwrap();
    net.host
        .engine
        .watch_silent_payments_from(receiver(), 1_000, Some(origin.clone()));
    net.drive();
    assert_eq!(found(&net.host.events).len(), 1);
    let w = net.host.engine.wallet().unwrap();
    assert_eq!(w.balance(2_000, 1).confirmed, VALUE + 5_000_000_000);
    assert_eq!(w.watch.spend_origin(&G), Some(&origin));
    let saved = w.encode();
    let back =
        crate::wallet::WalletSync::decode(&saved, lightwire_chain::Network::Regtest).unwrap();
    assert_eq!(
        back.watch.spend_origin(&G),
        Some(&origin),
        "kept with the wallet"
    );
    let gw = net.host.gateways[0].as_ref().expect("connected");
    let reads = gw.chain.filter_reads.lock().unwrap().clone();
    // The receiver's scan reads the filters of the blocks with tweaks (every 300th, and
    // the paying one); the wallet's, from the paying block on.
    let below: Vec<u32> = reads
        .iter()
        .copied()
        .filter(|&h| h < PAID && h % 300 != 0)
        .collect();
    assert_eq!(
        below,
        Vec::<u32>::new(),
        "the wallet scanned again below the paying block"
    );
    assert!(
        reads.iter().filter(|&&h| h >= PAID).count() >= 500,
        "{reads:?}"
    );
}
