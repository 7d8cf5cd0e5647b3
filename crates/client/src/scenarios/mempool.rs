//! The mempool digest, end to end in memory: gateways that serve it stream digests to a
//! client whose wallet watches a script; what matches is fetched and shown unconfirmed,
//! held by the gateways that announced it; removals count per gateway; a gateway whose
//! digest does not describe the transaction it names is marked bad.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use lightwire_primitives::Txid;
use lightwire_proto::testing::TestChain;
use lightwire_wallet::unconfirmed::{Reason, Source};
use lightwire_wire::Removal;

use super::{rejected, small, watching_1234};
use crate::engine::{Event, GatewayState};
use crate::ids::GatewayId;
use crate::testnet::Net;
use crate::wallet::WalletChange;

/// A transaction spending output `vout` of `[prev; 32]` and paying 1,000 to each of
/// `scripts`.
pub(super) fn paying(prev: u8, vout: u32, scripts: &[&[u8]]) -> Vec<u8> {
    let mut t = vec![2, 0, 0, 0, 1];
    t.extend_from_slice(&[prev; 32]);
    t.extend_from_slice(&vout.to_le_bytes());
    t.extend_from_slice(&[0, 0xfd, 0xff, 0xff, 0xff, scripts.len() as u8]);
    for s in scripts {
        t.extend_from_slice(&1_000u64.to_le_bytes());
        t.push(s.len() as u8);
        t.extend_from_slice(s);
    }
    t.extend_from_slice(&[0; 4]);
    t
}

/// A chain whose gateway serves a mempool.
fn with_mempool() -> TestChain {
    let mut c = TestChain::generate(3_000);
    c.mempool = Some(Default::default());
    c
}

/// What gateway `g` does to its mempool, announced to its session.
pub(super) fn mempool(
    net: &mut Net<lightwire_store::MemoryStore>,
    g: usize,
    f: impl FnOnce(&mut lightwire_proto::testing::TestMempool),
) {
    let gw = net.host.gateways[g].as_mut().expect("connected");
    f(gw.chain.mempool.as_mut().expect("a mempool"));
    gw.server.mempool_changed();
    net.drive();
}

/// The unconfirmed and dropped events heard: (txid, gateways) and (txid, reason).
type Heard = (Vec<(Txid, u32)>, Vec<(Txid, Reason)>);

/// What was heard since the last call.
fn heard(net: &mut Net<lightwire_store::MemoryStore>) -> Heard {
    let mut seen = (Vec::new(), Vec::new());
    for e in net.host.events.drain(..) {
        match e {
            Event::Wallet(_, WalletChange::Unconfirmed(t)) => seen.0.push((t.txid, t.gateways())),
            Event::Wallet(_, WalletChange::Dropped(d)) => seen.1.push((d.txid, d.reason)),
            _ => {}
        }
    }
    seen
}

/// A payment to a watched script enters one gateway's mempool: shown unconfirmed, held by
/// it; the other gateway announces it too: held by both (not fetched again). A
/// transaction paying elsewhere is not fetched. Evicted by one, it is held by the other;
/// by both, it is dropped as evicted. Said conflicted by the only one holding it: dropped
/// as conflicted.
#[test]
fn a_payment_announced_in_the_digest_is_unconfirmed_and_held_by_its_gateways() {
    let (mut net, ours) = watching_1234(vec![with_mempool(), with_mempool()], small);
    heard(&mut net);
    let pay = paying(1, 0, &[&ours]);
    let mut txid = [0u8; 32];
    mempool(&mut net, 0, |m| txid = m.add(&pay));
    let txid = Txid(txid);
    assert_eq!(heard(&mut net), (vec![(txid, 1)], vec![]));
    let w = net.host.engine.wallet().unwrap();
    let t = w.unconfirmed.get(&txid).expect("held");
    assert_eq!(
        (t.source, t.received, t.sent),
        (Source::Announced, 1_000, 0)
    );
    assert_eq!(w.balance(3_000, 1).unconfirmed, 1_000);
    let answered = |net: &Net<_>, g: usize| {
        net.host.gateways[g]
            .as_ref()
            .unwrap()
            .chain
            .mempool
            .as_ref()
            .unwrap()
            .served()
    };
    assert_eq!(answered(&net, 0), 1, "asked for the payment only");
    // The other gateway has it too: held by both, not fetched again.
    mempool(&mut net, 1, |m| {
        m.add(&pay);
    });
    assert_eq!(heard(&mut net), (vec![(txid, 2)], vec![]));
    assert_eq!(answered(&net, 1), 0);
    // Someone else's payment: not fetched.
    mempool(&mut net, 0, |m| {
        m.add(&paying(2, 0, &[&[0x51]]));
    });
    assert_eq!(answered(&net, 0), 1);
    // Evicted by one: held by the other. By both: dropped.
    mempool(&mut net, 0, |m| m.remove(txid.0, Removal::Evicted));
    assert_eq!(heard(&mut net), (vec![(txid, 1)], vec![]));
    mempool(&mut net, 1, |m| m.remove(txid.0, Removal::Evicted));
    assert_eq!(heard(&mut net), (vec![], vec![(txid, Reason::Evicted)]));
    assert!(net.host.engine.wallet().unwrap().unconfirmed.is_empty());
    // Conflicted away by a block, as the only gateway holding it says.
    let other = paying(5, 0, &[&ours]);
    let mut txid = [0u8; 32];
    mempool(&mut net, 1, |m| txid = m.add(&other));
    mempool(&mut net, 1, |m| m.remove(txid, Removal::Conflicted));
    let txid = Txid(txid);
    assert_eq!(
        heard(&mut net),
        (vec![(txid, 1)], vec![(txid, Reason::Conflicted)])
    );
}

/// A payment shown unconfirmed, then the session ends; it leaves the gateway's mempool
/// meanwhile. The next session resumes it from the store (held by nobody yet); the
/// gateway's snapshot does not list it: dropped as evicted. One still listed stays.
#[test]
fn a_payment_that_left_while_the_client_was_away_goes_at_the_snapshots_end() {
    let (mut net, ours) = watching_1234(vec![with_mempool()], small);
    let (gone, kept) = (paying(6, 0, &[&ours]), paying(7, 0, &[&ours]));
    let mut ids = [[0u8; 32]; 2];
    mempool(&mut net, 0, |m| ids = [m.add(&gone), m.add(&kept)]);
    assert_eq!(net.host.engine.wallet().unwrap().unconfirmed.len(), 2);
    let store = net.store;
    // Away: the gateway's mempool has only `kept` now.
    let mut chain = with_mempool();
    chain.mempool.as_mut().unwrap().add(&kept);
    let mut net = Net::new(store, vec![chain], small);
    net.drive();
    let (_, dropped) = heard(&mut net);
    assert_eq!(dropped, [(Txid(ids[0]), Reason::Evicted)]);
    let w = net.host.engine.wallet().unwrap();
    assert_eq!(w.unconfirmed.len(), 1);
    assert_eq!(w.unconfirmed.get(&Txid(ids[1])).unwrap().gateways(), 1);
}

/// A gateway whose digest describes a transaction as another (so that it matches) is
/// marked bad when the transaction is fetched; nothing of it is taken. One that invents a
/// payment and says it was mined does not make it confirmed: only a block does.
#[test]
fn a_digest_that_does_not_describe_its_transaction_is_a_rule_broken() {
    let (mut net, ours) = watching_1234(vec![with_mempool(), with_mempool()], small);
    heard(&mut net);
    // Gateway 1 announces someone else's transaction as one paying the wallet.
    let theirs = paying(3, 0, &[&[0x51]]);
    mempool(&mut net, 1, |m| {
        m.add_announced_as(&theirs, &paying(3, 0, &[&ours]));
    });
    assert_eq!(rejected(&net.host.events), [(1, "digest-mismatch")]);
    assert_eq!(net.host.engine.state(GatewayId(1)), GatewayState::Bad);
    assert!(net.host.engine.wallet().unwrap().unconfirmed.is_empty());
    net.host.events.clear();
    // Gateway 0 invents a payment (no block will ever hold it) and says it was mined:
    // shown unconfirmed until a block confirms it, never counted as confirmed.
    let confirmed = net
        .host
        .engine
        .wallet()
        .unwrap()
        .balance(3_000, 1)
        .confirmed;
    let pay = paying(4, 0, &[&ours]);
    let mut txid = [0u8; 32];
    mempool(&mut net, 0, |m| txid = m.add(&pay));
    mempool(&mut net, 0, |m| m.remove(txid, Removal::Mined));
    let (shown, dropped) = heard(&mut net);
    assert_eq!(shown.last(), Some(&(Txid(txid), 0)));
    assert!(dropped.is_empty());
    let w = net.host.engine.wallet().unwrap();
    assert_eq!(w.unconfirmed.len(), 1);
    let b = w.balance(3_000, 1);
    assert_eq!((b.confirmed, b.unconfirmed), (confirmed, 1_000));
}

/// A gateway that announces a payment truthfully but, asked for it, hands over another
/// transaction (one that pays the wallet too) is marked bad (`wrong-transaction`) and
/// nothing of it is taken; the payment, announced by an honest gateway, is then shown,
/// held by that one alone.
#[test]
fn a_transaction_handed_over_that_is_not_the_one_named_is_a_rule_broken() {
    let (mut net, ours) = watching_1234(vec![with_mempool(), with_mempool()], small);
    heard(&mut net);
    let pay = paying(5, 0, &[&ours]);
    let other = paying(6, 0, &[&ours]);
    let mut txid = [0u8; 32];
    mempool(&mut net, 1, |m| {
        txid = m.add(&pay);
        m.serve_as(txid, &other);
    });
    assert_eq!(rejected(&net.host.events), [(1, "wrong-transaction")]);
    assert_eq!(net.host.engine.state(GatewayId(1)), GatewayState::Bad);
    assert!(net.host.engine.wallet().unwrap().unconfirmed.is_empty());
    mempool(&mut net, 0, |m| {
        m.add(&pay);
    });
    let w = net.host.engine.wallet().unwrap();
    assert_eq!(w.unconfirmed.len(), 1);
    assert_eq!(w.unconfirmed.get(&Txid(txid)).unwrap().gateways(), 1);
}

/// A gateway that claims to hold a transaction the wallet holds, with a set that is not
/// that transaction's, is marked bad at once (the wallet has the transaction to check
/// against), and is not counted as holding it.
#[test]
fn a_claim_to_hold_a_held_transaction_is_checked_against_it() {
    let (mut net, ours) = watching_1234(vec![with_mempool(), with_mempool()], small);
    let pay = paying(8, 0, &[&ours]);
    let mut txid = [0u8; 32];
    mempool(&mut net, 0, |m| txid = m.add(&pay));
    heard(&mut net);
    net.host.events.clear();
    mempool(&mut net, 1, |m| {
        m.add_announced_as(&pay, &paying(9, 0, &[&ours]));
    });
    assert_eq!(rejected(&net.host.events), [(1, "digest-mismatch")]);
    let w = net.host.engine.wallet().unwrap();
    assert_eq!(w.unconfirmed.get(&Txid(txid)).unwrap().gateways(), 1);
}

/// A transaction spending `(coin, vout)` with `witness` and paying `outputs`.
fn spending(coin: Txid, vout: u32, witness: &[&[u8]], outputs: &[(u64, &[u8])]) -> Vec<u8> {
    lightwire_proto::testing::spending(coin.0, vout, witness, outputs)
}

/// A hostile gateway takes the wallet's broadcast T (every gateway receives every
/// broadcast), makes T' with T's input and witness and one output of its own (no
/// signature of the wallet's commits to T': no node would take it) and announces it.
/// The wallet checks T' on the input that spends its coin, finds the signature does not
/// sign it, marks the gateway bad (`invalid-signature`) and takes nothing: T stays
/// unconfirmed, held by the honest gateway, and its coin stays spent by T alone.
#[test]
fn an_invented_replacement_of_an_own_broadcast_is_refused_and_its_gateway_marked_bad() {
    let (mut net, ours) = watching_1234(vec![with_mempool(), with_mempool()], small);
    let coin = net.host.engine.wallet().unwrap().ledger.transactions()[0].txid;
    // The witness does not sign anything here: the wallet checks no signature of its own
    // broadcasts (the nodes do); it checks those of what a gateway hands over.
    let sig = [0x30; 71];
    let key = [0x02; 33];
    let t = spending(
        coin,
        0,
        &[&sig, &key],
        &[(4_000_000_000, &[0x51]), (999_990_000, &ours)],
    );
    let (_, txid) = net.host.engine.broadcast(&t).unwrap();
    net.drive();
    heard(&mut net);
    let held = |net: &Net<_>| {
        let w = net.host.engine.wallet().unwrap();
        w.unconfirmed
            .transactions()
            .iter()
            .map(|t| (t.txid, t.gateways()))
            .collect::<Vec<_>>()
    };
    assert_eq!(held(&net), [(txid, 2)]);
    let forged = spending(coin, 0, &[&sig, &key], &[(4_999_990_000, &[0x52])]);
    net.host.events.clear();
    mempool(&mut net, 1, |m| {
        m.add(&forged);
    });
    let rejections = rejected(&net.host.events);
    let (_, dropped) = heard(&mut net);
    assert!(dropped.is_empty(), "dropped {dropped:?}");
    assert_eq!(rejections, [(1, "invalid-signature")]);
    assert_eq!(net.host.engine.state(GatewayId(1)), GatewayState::Bad);
    assert_eq!(held(&net).len(), 1);
    assert_eq!(held(&net)[0].0, txid);
}

/// An incoming payment P (its input is not the wallet's: no signature the wallet can
/// check) held by an honest gateway; a hostile gateway announces P' spending P's input
/// and paying elsewhere. P' cannot be checked, so it counts only as its announcer's word:
/// that gateway does not hold P (it never did), and P stays, held by the honest one.
#[test]
fn a_conflict_nobody_can_check_does_not_drop_what_another_gateway_holds() {
    let (mut net, ours) = watching_1234(vec![with_mempool(), with_mempool()], small);
    heard(&mut net);
    let pay = paying(7, 0, &[&ours]);
    let mut txid = [0u8; 32];
    mempool(&mut net, 0, |m| txid = m.add(&pay));
    let txid = Txid(txid);
    assert_eq!(heard(&mut net), (vec![(txid, 1)], vec![]));
    mempool(&mut net, 1, |m| {
        m.add(&paying(7, 0, &[&[0x51]]));
    });
    let (_, dropped) = heard(&mut net);
    assert!(dropped.is_empty(), "dropped {dropped:?}");
    let w = net.host.engine.wallet().unwrap();
    assert_eq!(w.unconfirmed.get(&txid).map(|t| t.gateways()), Some(1));
    assert_ne!(net.host.engine.state(GatewayId(1)), GatewayState::Bad);
}

/// The wallet's broadcast, resumed in a new session (no gateway known to hold it yet):
/// a gateway that never held it says it was replaced. A removal counts only from a
/// gateway that held the transaction: it stays, and its coin stays spent (a new spend
/// would not pick it and replace the payment at the nodes).
#[test]
fn a_removal_from_a_gateway_that_never_held_the_transaction_is_not_applied() {
    let (mut net, ours) = watching_1234(vec![with_mempool()], small);
    let coin = net.host.engine.wallet().unwrap().ledger.transactions()[0].txid;
    let t = spending(
        coin,
        0,
        &[&[0x30; 71], &[0x02; 33]],
        &[(4_000_000_000, &[0x51]), (999_990_000, &ours)],
    );
    let (_, txid) = net.host.engine.broadcast(&t).unwrap();
    net.drive();
    let store = net.store;
    let mut net = Net::new(store, vec![with_mempool(), with_mempool()], small);
    net.drive();
    heard(&mut net);
    assert_eq!(
        net.host.engine.wallet().unwrap().unconfirmed.len(),
        1,
        "resumed"
    );
    for reason in [Removal::Replaced, Removal::Conflicted, Removal::Evicted] {
        mempool(&mut net, 1, |m| m.remove(txid.0, reason));
    }
    let (_, dropped) = heard(&mut net);
    assert!(dropped.is_empty(), "dropped {dropped:?}");
    let w = net.host.engine.wallet().unwrap();
    assert!(w.unconfirmed.get(&txid).is_some());
    assert!(w.unconfirmed.spent().iter().any(|o| o.txid == coin));
}

/// A payment held by gateway A, then a new session in which gateway B connects first
/// (A's handshake fails for a while) and tells its whole mempool, without the payment.
/// B's word alone does not drop what A may still hold: the payment stays until every
/// gateway has told its mempool; A comes back and holds it.
#[test]
fn one_gateways_snapshot_does_not_drop_what_another_may_still_hold() {
    let (mut net, ours) = watching_1234(vec![with_mempool()], small);
    let pay = paying(6, 0, &[&ours]);
    let mut txid = [0u8; 32];
    mempool(&mut net, 0, |m| txid = m.add(&pay));
    let txid = Txid(txid);
    let store = net.store;
    let mut holding = with_mempool();
    holding.mempool.as_mut().unwrap().add(&pay);
    let mut net = Net::new(store, vec![with_mempool(), holding], small);
    net.corrupt(GatewayId(1), 0);
    net.drive();
    net.advance(std::time::Duration::from_secs(5));
    let (_, dropped) = heard(&mut net);
    assert!(dropped.is_empty(), "dropped {dropped:?}");
    assert_eq!(
        net.host
            .engine
            .wallet()
            .unwrap()
            .unconfirmed
            .get(&txid)
            .map(|t| t.gateways()),
        Some(0)
    );
    net.mend(GatewayId(1));
    net.advance(std::time::Duration::from_secs(120));
    let (shown, dropped) = heard(&mut net);
    assert!(dropped.is_empty(), "dropped {dropped:?}");
    assert_eq!(shown.last(), Some(&(txid, 1)));
}

/// A made-up txid from `n`.
fn made_up(n: u32) -> [u8; 32] {
    let mut t = [0xee; 32];
    t[..4].copy_from_slice(&n.to_le_bytes());
    t
}

/// A gateway probing which script is the wallet's: it announces made-up transactions
/// whose sets hold candidate scripts, and answers `not_found` when one matches (the fetch
/// told it). Three such answers for transactions it announced and did not remove: it is
/// bad (`withheld-transaction`), and probes no more. A removal it announced first is no
/// strike.
#[test]
fn a_gateway_that_does_not_hand_over_what_it_announced_is_struck_then_bad() {
    let (mut net, ours) = watching_1234(vec![with_mempool()], small);
    heard(&mut net);
    for n in 0..2 {
        mempool(&mut net, 0, |m| {
            m.announce_missing(made_up(n), &paying(n as u8, 0, &[&ours]))
        });
    }
    assert_ne!(net.host.engine.state(GatewayId(0)), GatewayState::Bad);
    // Removed, then asked: no strike (and not asked: it is gone).
    mempool(&mut net, 0, |m| {
        m.announce_missing(made_up(9), &paying(9, 0, &[&ours]));
        m.remove(made_up(9), Removal::Evicted);
    });
    assert_ne!(net.host.engine.state(GatewayId(0)), GatewayState::Bad);
    mempool(&mut net, 0, |m| {
        m.announce_missing(made_up(2), &paying(2, 0, &[&ours]))
    });
    assert_eq!(rejected(&net.host.events), [(0, "withheld-transaction")]);
    assert_eq!(net.host.engine.state(GatewayId(0)), GatewayState::Bad);
}

/// A gateway fills the queue of matches with invented ones (announced at once, before the
/// first is fetched); an honest gateway's real payment, announced right after, is still
/// fetched and shown: each gateway has its own share of the queue.
#[test]
fn a_flooded_queue_does_not_hide_another_gateways_payment() {
    let (mut net, ours) = watching_1234(vec![with_mempool(), with_mempool()], small);
    heard(&mut net);
    let pay = paying(77, 0, &[&ours]);
    let mut txid = [0u8; 32];
    for g in 0..2 {
        let gw = net.host.gateways[g].as_mut().expect("connected");
        let m = gw.chain.mempool.as_mut().unwrap();
        if g == 0 {
            for n in 0..100 {
                m.announce_missing(made_up(n), &paying(n as u8, 1, &[&ours]));
            }
        } else {
            txid = m.add(&pay);
        }
        gw.server.mempool_changed();
    }
    net.drive();
    let w = net.host.engine.wallet().unwrap();
    assert!(
        w.unconfirmed.get(&Txid(txid)).is_some(),
        "the honest payment is shown"
    );
    assert_eq!(net.host.engine.state(GatewayId(0)), GatewayState::Bad);
}

/// A gateway that sends more digest entries than a whole mempool at once is dropped as
/// flooding (the work of matching is bounded by its budget).
#[test]
fn a_gateway_sending_digest_entries_beyond_its_budget_is_dropped() {
    let (mut net, _) = watching_1234(vec![with_mempool()], small);
    mempool(&mut net, 0, |m| {
        for n in 0..(crate::engine::DIGEST_BURST as u32 + 1) {
            m.remove(made_up(n), Removal::Evicted);
        }
    });
    assert_eq!(rejected(&net.host.events), [(0, "digest-flooding")]);
}

/// 130 payments announced by one gateway at once: its share of the queue (64 here, the
/// only gateway) overflows, and it is asked for a fresh snapshot once its matches are
/// fetched: nothing is forgotten. Past 120 fetches in the hour the rest wait for the next
/// hour.
#[test]
fn a_gateways_overflow_is_fetched_from_a_fresh_snapshot_within_its_hourly_fetches() {
    let (mut net, ours) = watching_1234(vec![with_mempool()], small);
    heard(&mut net);
    mempool(&mut net, 0, |m| {
        for n in 0..130u32 {
            let mut t = paying(0, n, &[&ours]);
            t[5] = n as u8;
            m.add(&t);
        }
    });
    let shown = net.host.engine.wallet().unwrap().unconfirmed.len();
    assert_eq!(shown, crate::engine::FETCHES_PER_HOUR as usize);
    net.advance(std::time::Duration::from_secs(3_601));
    assert_eq!(net.host.engine.wallet().unwrap().unconfirmed.len(), 130);
}

/// A match being fetched that its only announcer removes before it answers (`not_found`
/// after the removal, as the gateway sends them): the match, announced by nobody now, is
/// still in flight; the engine goes on (before, the next scheduling read the first
/// announcer of a match that had none and panicked), and the answer ends it without fault.
#[test]
fn a_match_removed_by_its_announcer_while_fetched_ends_without_fault() {
    let (mut net, ours) = watching_1234(vec![with_mempool()], small);
    heard(&mut net);
    let pay = paying(31, 0, &[&ours]);
    net.hold(GatewayId(0));
    let mut txid = [0u8; 32];
    mempool(&mut net, 0, |m| txid = m.add(&pay));
    mempool(&mut net, 0, |m| m.remove(txid, Removal::Evicted));
    // The announcement arrives; the fetch goes out; the removal and not_found come back.
    net.deliver_held(GatewayId(0));
    net.deliver_held(GatewayId(0));
    net.release(GatewayId(0));
    assert_eq!(rejected(&net.host.events), []);
    assert_ne!(net.host.engine.state(GatewayId(0)), GatewayState::Bad);
    assert!(net.host.engine.wallet().unwrap().unconfirmed.is_empty());
    // And the next payment is fetched as any.
    let next = paying(32, 0, &[&ours]);
    let mut id = [0u8; 32];
    mempool(&mut net, 0, |m| id = m.add(&next));
    assert!(
        net.host
            .engine
            .wallet()
            .unwrap()
            .unconfirmed
            .get(&Txid(id))
            .is_some()
    );
}
