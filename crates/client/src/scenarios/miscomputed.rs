//! A gateway whose bytes fail their BOLT 8 checks, again and again: a MAC of act two (a
//! failed handshake) or of a frame after it. The client cannot tell a gateway tampering
//! from its own engine computing a wrong value (WebKit's JavaScriptCore was seen to, now
//! and then), so such a gateway is reconnected with the usual backoff, slowed down and
//! never marked bad, while an honest gateway beside it serves the chain.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use core::time::Duration;

use lightwire_proto::testing::TestChain;

use super::{rejected, small};
use crate::engine::{Event, GatewayState};
use crate::ids::GatewayId;
use crate::testnet::{Net, memory};

/// The drops of gateway `g`: each one's state and code.
fn drops(events: &[Event], g: usize) -> Vec<(GatewayState, &'static str)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Gateway {
                gateway,
                state,
                reason: Some(r),
            } if gateway.index() == g => Some((*state, r.code())),
            _ => None,
        })
        .collect()
}

/// Gateway 0's messages fail their MAC from message `from` of each connection on
/// (0: act two, 1: the first frame); gateway 1 is honest. Gateway 0 is dropped with
/// `code` each time and reconnected ever more slowly, never marked bad; gateway 1 serves
/// the chain.
fn corrupted_is_backed_off(from: usize, code: &str) {
    let mut net = Net::new(
        memory(),
        vec![TestChain::generate(3_000), TestChain::generate(3_000)],
        small,
    );
    net.corrupt(GatewayId(0), from);
    net.drive();
    assert_eq!(net.stored().height, 3_000, "the honest gateway serves");
    assert_eq!(
        drops(&net.host.events, 0),
        [(GatewayState::BackingOff, code)],
        "{:?}",
        net.host.events
    );
    let before = net.host.engine.counters().reconnects;
    net.advance(Duration::from_secs(60));
    let reconnects = net.host.engine.counters().reconnects - before;
    // Delays of at least 0.25, 0.5, 1, 2, 4, 8, 15, 15 s (half of each, at the least,
    // with jitter): no more than eight in a minute, and the backoff doubles at least
    // three times. Without it, a reconnect would follow each drop at once.
    assert!((3..=8).contains(&reconnects), "{reconnects} in a minute");
    let dropped = drops(&net.host.events, 0);
    assert_eq!(dropped.len() as u64, 1 + reconnects, "{dropped:?}");
    assert!(
        dropped
            .iter()
            .all(|d| *d == (GatewayState::BackingOff, code)),
        "{dropped:?}"
    );
    assert_eq!(rejected(&net.host.events), []);
    assert_ne!(net.host.engine.state(GatewayId(0)), GatewayState::Bad);
    assert_eq!(drops(&net.host.events, 1), [], "the honest one stays");
}

#[test]
fn a_gateway_whose_frames_fail_their_mac_is_reconnected_with_backoff_not_marked_bad() {
    corrupted_is_backed_off(1, "corrupt-frame");
}

#[test]
fn a_gateway_whose_handshake_fails_its_mac_is_reconnected_with_backoff_not_marked_bad() {
    corrupted_is_backed_off(0, "handshake-failed");
}

/// A wallet record that does not read back (a layout this version does not know, damaged
/// bytes, or keys a machine derived wrongly every time) fails the open with the store's
/// typed error and is left as it was. Before, the client opened without the wallet and
/// its next save wrote an empty one over it: the labels and the unconfirmed transactions
/// it had broadcast were gone (WebKit, after a reload, with JavaScriptCore computing
/// wrong values in that session).
#[test]
fn a_wallet_record_that_does_not_read_back_fails_the_open_and_is_kept() {
    use lightwire_store::{HeaderStore, StoreError};

    use crate::testnet::block_on;
    let mut net = Net::new(memory(), vec![TestChain::generate(2_000)], small);
    net.drive();
    let mut store = net.store;
    let good = crate::wallet::WalletSync::new(lightwire_chain::Network::Regtest, 1_000).encode();
    // The store opened with `record` as its wallet's: whether the engine has a wallet.
    let mut open_with = |record: &[u8]| {
        block_on(store.put_record(crate::pipeline::WALLET, Some(record))).unwrap();
        let opened = block_on(crate::pipeline::open(
            &store,
            Vec::new(),
            crate::testnet::key(1),
            1,
            lightwire_proto::Millis(1),
        ));
        let kept = block_on(store.record(crate::pipeline::WALLET)).unwrap();
        assert_eq!(kept.as_deref(), Some(record), "left as it was");
        opened.map(|(engine, _)| engine.wallet().is_some())
    };
    for bad in [vec![9u8; 40], good[..good.len() - 3].to_vec()] {
        let opened = open_with(&bad);
        assert!(
            matches!(opened, Err(StoreError::Corrupt { .. })),
            "{opened:?}"
        );
    }
    // A record that reads back opens as before.
    assert_eq!(open_with(&good), Ok(true));
}
