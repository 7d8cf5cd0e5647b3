//! The mempool task under a hostile gateway, end to end: the engine, a memory store and two
//! in-memory gateways serving a generated chain and a mempool each, on a virtual clock,
//! over two sessions on one store, against an honest model.
//!
//! The wallet watches the coinbase output of block 1,234. The honest gateway (0) holds in
//! its node's mempool the wallet's own broadcast `T` (spending that coin; both gateways
//! relayed it) and one to four incoming payments `P` (paying the watched script, spending
//! others' outputs). The liar (1) does what the input says, one operation a step: announce
//! a payment too and remove it for any reason, announce a conflicting transaction of a
//! payment (paying elsewhere: no signature the wallet can check), announce `T'` (`T`'s
//! input and witness on other outputs: not signed), say it removed `T`, invent payments
//! to the watched script (handed over, or answered `not_found`), describe a transaction as
//! another, hand over another than the one named, flood the queue with invented matches,
//! send removals of transactions it never announced, reconnect, or let time pass.
//!
//! Input layout: byte 0 the number of payments (1 to 4) and whether the liar is listed
//! first (bit 7), byte 1 the engine's seed, then two bytes a step (the operation, its
//! argument) for at most 48 steps; the second session's steps follow the first's after
//! a 0xff byte, if there is one.
//!
//! Checks, for any input:
//! - the honest gateway is never rejected;
//! - `T` and every `P` stay unconfirmed (never dropped) in both sessions, whatever the liar
//!   did, and the coin `T` spends stays spent by it;
//! - no transaction spending the wallet's coin other than `T` is ever shown;
//! - the unconfirmed set stays within its bounds, and each session settles on the virtual
//!   clock.
#![no_main]

use core::time::Duration;

use libfuzzer_sys::fuzz_target;
use lightwire::engine::Event;
use lightwire::testnet::{Net, memory};
use lightwire::wallet::{WalletChange, Watched};
use lightwire_fuzz_support::Cursor;
use lightwire_primitives::{Block, Tx, Txid};
use lightwire_proto::testing::{TestChain, spending as tx};
use lightwire_wire::Removal;

const TOP: u32 = 1_300;

fn small(e: &mut lightwire::engine::Engine) {
    e.syncer_mut().request_size = 2_000;
    e.syncer_mut().commit_every = 1_000;
}

/// A chain of `TOP` blocks whose gateway serves a mempool.
fn chain() -> TestChain {
    let mut c = TestChain::generate(TOP);
    c.mempool = Some(Default::default());
    c
}

fn txid(t: &[u8]) -> Txid {
    Tx::parse(t).expect("a transaction").txid()
}

/// What the liar does to its mempool (and connection) for one step.
fn lie<S: lightwire_store::HeaderStore>(
    net: &mut Net<S>,
    liar: usize,
    op: u8,
    arg: u8,
    honest: &Honest,
) {
    let elsewhere: &[u8] = &[0x51];
    let invented = |n: u8| tx([0xa0 ^ n; 32], u32::from(n), &[], &[(1_000, &honest.ours)]);
    let Some(gw) = net.host.gateways[liar].as_mut() else {
        // Disconnected (or bad): time passes.
        net.advance(Duration::from_secs(u64::from(arg) + 1));
        return;
    };
    let m = gw.chain.mempool.as_mut().expect("a mempool");
    let p = &honest.payments[usize::from(arg) % honest.payments.len()];
    let reason = [
        Removal::Mined,
        Removal::Replaced,
        Removal::Conflicted,
        Removal::Evicted,
    ][usize::from(arg >> 4) % 4];
    match op % 13 {
        0 => {
            m.add(p);
        }
        1 => m.remove(txid(p).0, reason),
        2 => {
            // P's input, paying elsewhere: a conflict nobody can check.
            let input = Tx::parse(p).unwrap().inputs().next().unwrap();
            m.add(&tx(
                *input.prev_txid,
                input.prev_vout,
                &[],
                &[(900, elsewhere)],
            ));
        }
        3 => {
            m.add(&honest.forged);
        }
        4 => m.remove(honest.t_txid.0, reason),
        5 => {
            m.add(&invented(arg));
        }
        6 => m.announce_missing([0xe0 ^ arg; 32], &invented(arg)),
        7 => {
            m.add_announced_as(&invented(arg), &invented(arg.wrapping_add(1)));
        }
        8 => {
            let id = m.add(&invented(arg));
            m.serve_as(id, &invented(arg.wrapping_add(7)));
        }
        9 => {
            for n in 0..u32::from(arg) {
                m.announce_missing(
                    [0xd0 ^ (n as u8); 32],
                    &tx([0xc0; 32], n, &[], &[(1_000, &honest.ours)]),
                );
            }
        }
        10 => {
            let mut made_up = [0xbb; 32];
            made_up[0] = arg;
            m.remove(made_up, reason);
        }
        11 => {
            net.corrupt(lightwire::ids::GatewayId(liar), 1);
            net.drive();
            net.mend(lightwire::ids::GatewayId(liar));
            net.advance(Duration::from_secs(30));
            return;
        }
        _ => {
            net.advance(Duration::from_secs(u64::from(arg) * 10));
            return;
        }
    }
    gw.server.mempool_changed();
    net.drive();
}

/// What the honest side holds.
struct Honest {
    ours: Vec<u8>,
    payments: Vec<Vec<u8>>,
    t: Vec<u8>,
    t_txid: Txid,
    forged: Vec<u8>,
    coin: Txid,
}

/// The checks of one session, from its events and the wallet now.
fn check<S: lightwire_store::HeaderStore>(net: &Net<S>, honest_g: usize, h: &Honest) {
    for e in &net.host.events {
        match e {
            Event::Rejected { gateway, reason } if gateway.index() == honest_g => {
                panic!("the honest gateway was rejected: {}", reason.code())
            }
            Event::Wallet(_, WalletChange::Dropped(d))
                if d.txid == h.t_txid || h.payments.iter().any(|p| txid(p) == d.txid) =>
            {
                panic!("dropped {d:?}")
            }
            Event::Wallet(_, WalletChange::Unconfirmed(t))
                if t.txid != h.t_txid && t.spends.iter().any(|s| s.outpoint.txid == h.coin) =>
            {
                panic!("a spend of the wallet's coin it did not sign: {:?}", t.txid)
            }
            _ => {}
        }
    }
    let w = net.host.engine.wallet().expect("a wallet");
    assert!(
        w.unconfirmed.get(&h.t_txid).is_some(),
        "the broadcast is gone"
    );
    for p in &h.payments {
        assert!(w.unconfirmed.get(&txid(p)).is_some(), "a payment is gone");
    }
    assert!(w.unconfirmed.spent().iter().any(|o| o.txid == h.coin));
    assert!(w.unconfirmed.len() <= lightwire_wallet::unconfirmed::MAX_UNCONFIRMED);
}

fuzz_target!(|data: &[u8]| {
    let mut c = Cursor::new(data);
    let first = c.u8();
    let count = 1 + usize::from(first & 3);
    let liar_first = first & 0x80 != 0;
    let seed = u64::from(c.u8());
    let (honest_g, liar) = if liar_first { (1, 0) } else { (0, 1) };
    let chains = || vec![chain(), chain()];
    let mut net = Net::seeded(memory(), chains(), seed, small);
    net.drive();
    let base = TestChain::generate(TOP);
    let block = base.block(1_234);
    let parsed = Block::parse(&block).expect("a generated block parses");
    let ours = lightwire_filter::known_items(&parsed)
        .next()
        .expect("a coinbase output")
        .to_vec();
    let coin = parsed.transactions().next().expect("a coinbase").txid();
    net.host
        .engine
        .watch(&[Watched::Script(hex(&ours))], 1_000)
        .expect("watched");
    net.drive();
    let payments: Vec<Vec<u8>> = (0..count)
        .map(|i| tx([0x10 + i as u8; 32], i as u32, &[], &[(50_000, &ours)]))
        .collect();
    let (sig, key) = ([0x30u8; 71], [0x02u8; 33]);
    let t = tx(
        coin.0,
        0,
        &[&sig, &key],
        &[(4_000_000_000, &[0x51]), (999_990_000, &ours)],
    );
    let forged = tx(coin.0, 0, &[&sig, &key], &[(4_999_990_000, &[0x52])]);
    let honest = Honest {
        t_txid: txid(&t),
        ours,
        payments,
        t: t.clone(),
        forged,
        coin,
    };
    // The broadcast, relayed by both; the payments in the honest node's mempool.
    net.host.engine.broadcast(&honest.t).expect("relayed");
    net.drive();
    {
        let gw = net.host.gateways[honest_g].as_mut().expect("connected");
        let m = gw.chain.mempool.as_mut().unwrap();
        for p in &honest.payments {
            m.add(p);
        }
        gw.server.mempool_changed();
    }
    net.drive();
    for _ in 0..48 {
        if c.is_empty() {
            break;
        }
        let op = c.u8();
        if op == 0xff {
            break;
        }
        lie(&mut net, liar, op, c.u8(), &honest);
    }
    net.advance(Duration::from_secs(600));
    check(&net, honest_g, &honest);
    // The second session on the same store: the honest gateway's mempool as it was.
    let store = net.store;
    let mut second = chains();
    {
        let m = second[honest_g].mempool.as_mut().unwrap();
        for p in &honest.payments {
            m.add(p);
        }
    }
    let mut net = Net::seeded(store, second, seed ^ 1, small);
    net.drive();
    for _ in 0..48 {
        if c.is_empty() {
            break;
        }
        let op = c.u8();
        lie(&mut net, liar, op, c.u8(), &honest);
    }
    net.advance(Duration::from_secs(600));
    check(&net, honest_g, &honest);
});

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
