//! The engine against scripted gateways: one message at a time, on a virtual clock.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use super::*;
use core::time::Duration;

use crate::reason::TransportError;
use lightwire_chain::{Chain, Header};
use lightwire_proto::ConnectString;

use lightwire_chain::generate::headers_after;
use lightwire_chain::{REGTEST, U256};
use lightwire_noise::{FrameReader, Receiver, Responder, Sender};
use lightwire_wire::{Features, Headers, Init, Message, Networks};

use crate::testnet::{NOW, key};

/// A request the engine sent a scripted gateway: its kind and id.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Asked {
    /// `get_headers`.
    Headers(u32),
    /// `get_filter_headers`.
    FilterHeaders(u32),
    /// Anything else.
    Other,
}

/// The gateway's side of one connection, scripted by the test.
struct Fake {
    tx: Sender,
    rx: Receiver,
    reader: FrameReader,
}

impl Fake {
    /// Connect gateway `g` of `engine` (keys 0x40 + g) through the handshake and both
    /// inits.
    fn connect(engine: &mut Engine, g: usize) -> Fake {
        Fake::connect_offering(engine, g, &[])
    }

    /// [`Self::connect`], its `init` offering the feature bits `bits`.
    fn connect_offering(engine: &mut Engine, g: usize, bits: &[usize]) -> Fake {
        engine.connecting(GatewayId(g), NOW);
        engine.opened(GatewayId(g), key(0x20 + g as u8), NOW);
        let act_one = engine.poll_transmit(GatewayId(g)).unwrap().to_vec();
        engine.sent(GatewayId(g));
        let (awaiting, act_two) = Responder::start(key(0x40 + g as u8), key(0x60))
            .read_act_one(&act_one)
            .unwrap();
        engine.receive(GatewayId(g), &act_two, NOW);
        let out = engine.poll_transmit(GatewayId(g)).unwrap().to_vec();
        engine.sent(GatewayId(g));
        let (tx, rx) = awaiting.read_act_three(&out[..66]).unwrap().split();
        let mut fake = Fake {
            tx,
            rx,
            reader: FrameReader::new(),
        };
        fake.reader.read(&mut fake.rx, &out[66..]).unwrap(); // the client's init
        let chains = [REGTEST.genesis.block_hash().0];
        let mut field = [0u8; 33];
        let features = Features::write_bits(bits, &mut field).unwrap();
        let init = Init::new(features, Some(Networks::from_chains(&chains)));
        fake.send(engine, g, &Message::Init(init));
        assert_eq!(engine.state(GatewayId(g)), GatewayState::Syncing);
        fake
    }

    fn send(&mut self, engine: &mut Engine, g: usize, m: &Message<'_>) {
        self.send_at(engine, g, NOW, m);
    }

    /// A message received at `now`.
    fn send_at(&mut self, engine: &mut Engine, g: usize, now: Millis, m: &Message<'_>) {
        let mut body = vec![0u8; 70_000];
        let n = m.encode(&mut body).unwrap();
        let mut frame = vec![0u8; n + 34];
        let len = self.tx.encrypt(&body[..n], &mut frame).unwrap();
        engine.receive(GatewayId(g), &frame[..len], now);
    }

    fn tip(&mut self, engine: &mut Engine, g: usize, height: u32, header: &Header) {
        let work = U256::from_u64(2 * (u64::from(height) + 1)).to_be_bytes();
        let tip = lightwire_wire::Tip {
            height,
            header: &header.encode(),
            chainwork: &work,
        };
        self.send(engine, g, &Message::Tip(tip));
    }

    fn headers(&mut self, engine: &mut Engine, g: usize, id: u32, hs: &[Header], last: bool) {
        let bytes: Vec<u8> = hs.iter().flat_map(|h| h.encode()).collect();
        let m = Headers {
            id,
            first_height: 0,
            last,
            headers: &bytes,
        };
        self.send(engine, g, &Message::Headers(m));
    }

    /// The ids of the `get_headers` requests the engine sent this gateway since the last
    /// call (others are read and left).
    fn requests(&mut self, engine: &mut Engine, g: usize) -> Vec<u32> {
        self.asked(engine, g)
            .into_iter()
            .filter_map(|a| match a {
                Asked::Headers(id) => Some(id),
                _ => None,
            })
            .collect()
    }

    /// The requests the engine sent this gateway since the last call.
    fn asked(&mut self, engine: &mut Engine, g: usize) -> Vec<Asked> {
        let Some(out) = engine.poll_transmit(GatewayId(g)).map(<[u8]>::to_vec) else {
            return Vec::new();
        };
        engine.sent(GatewayId(g));
        let mut asked = Vec::new();
        let mut at = 0;
        while at < out.len() {
            let (taken, m) = self.reader.read(&mut self.rx, &out[at..]).unwrap();
            at += taken;
            asked.extend(m.map(|b| match Message::decode(b).unwrap() {
                Message::GetHeaders(r) => Asked::Headers(r.id),
                Message::GetFilterHeaders(r) => Asked::FilterHeaders(r.0.id),
                _ => Asked::Other,
            }));
        }
        asked
    }
}

fn engine(gateways: usize) -> Engine {
    let chain = Chain::new(&REGTEST);
    let tip = Tip::from(chain.tip());
    let list = (0..gateways)
        .map(|g| ConnectString {
            url: format!("ws://127.0.0.1:{}", 9000 + g),
            node_id: key(0x40 + g as u8).public_key(),
        })
        .collect();
    let mut e = Engine::new(chain, &tip, list, key(1), 7, NOW);
    while e.poll_action().is_some() {}
    e
}

#[test]
fn a_given_up_answer_still_arriving_is_ignored_not_punished() {
    let chain = headers_after(&REGTEST, &REGTEST.genesis, 0, 300, 0);
    let mut e = engine(2);
    let mut a = Fake::connect(&mut e, 0);
    let mut b = Fake::connect(&mut e, 1);
    a.tip(&mut e, 0, 100, &chain[99]);
    e.schedule();
    let first = a.requests(&mut e, 0);
    assert_eq!(first.len(), 1, "asked A");
    // B announces more work: A's request is given up, B is asked.
    b.tip(&mut e, 1, 200, &chain[199]);
    e.schedule();
    assert_eq!(b.requests(&mut e, 1).len(), 1, "asked B");
    // B goes away: A is asked again while its first answer is still on its way.
    e.closed(GatewayId(1), TransportError::Closed, NOW);
    e.schedule();
    let second = a.requests(&mut e, 0);
    assert_eq!(second.len(), 1);
    a.headers(&mut e, 0, first[0], &chain[..100], true);
    assert_eq!(
        e.state(GatewayId(0)),
        GatewayState::Syncing,
        "A is not marked bad"
    );
    a.headers(&mut e, 0, second[0], &chain[..100], true);
    assert_eq!(e.syncer().tip().height, 100);
    // An answer to a request never made is refused: A is bad.
    a.headers(&mut e, 0, 999, &chain[100..110], true);
    assert_eq!(e.state(GatewayId(0)), GatewayState::Bad);
    let actions: Vec<Action> = std::iter::from_fn(|| e.poll_action()).collect();
    assert!(
        actions.contains(&Action::Close {
            gateway: GatewayId(0)
        }),
        "{actions:?}"
    );
}

#[test]
fn a_gateway_announcing_what_it_does_not_deliver_is_marked_bad() {
    let chain = headers_after(&REGTEST, &REGTEST.genesis, 0, 50, 0);
    let mut e = engine(1);
    let mut a = Fake::connect(&mut e, 0);
    for (i, claimed) in [1_000u32, 2_000, 3_000].into_iter().enumerate() {
        // A tip "claimed" high, with a header we cannot check until it comes.
        let mut fake = chain[10 + i];
        fake.nonce ^= 1;
        a.tip(&mut e, 0, claimed, &fake);
        e.schedule();
        let ids = a.requests(&mut e, 0);
        assert_eq!(ids.len(), 1, "round {i}: asked");
        a.headers(&mut e, 0, ids[0], &[], true);
        // An undelivered tip announced again is not a target again.
        a.tip(&mut e, 0, claimed, &fake);
        e.schedule();
        if i < 2 {
            assert!(
                a.requests(&mut e, 0).is_empty(),
                "round {i}: not asked again"
            );
            assert_eq!(e.state(GatewayId(0)), GatewayState::Syncing);
        }
    }
    assert_eq!(e.state(GatewayId(0)), GatewayState::Bad);
}

#[test]
fn a_request_without_progress_times_out_and_reconnects() {
    let chain = headers_after(&REGTEST, &REGTEST.genesis, 0, 50, 0);
    let mut e = engine(1);
    let mut a = Fake::connect(&mut e, 0);
    a.tip(&mut e, 0, 50, &chain[49]);
    e.schedule();
    assert_eq!(a.requests(&mut e, 0).len(), 1);
    assert_eq!(e.poll_timeout(), Some(NOW + REQUEST_TIMEOUT));
    e.handle_timeout(NOW + Duration::from_secs(10));
    assert_eq!(e.state(GatewayId(0)), GatewayState::Syncing);
    e.handle_timeout(NOW + REQUEST_TIMEOUT);
    assert_eq!(e.state(GatewayId(0)), GatewayState::BackingOff);
    assert_eq!(
        e.poll_action(),
        Some(Action::Close {
            gateway: GatewayId(0)
        })
    );
    assert_eq!(e.poll_action(), None, "the reconnect waits for its backoff");
    let Some(Event::Gateway {
        reason: Some(why), ..
    }) = std::iter::from_fn(|| e.poll_event()).last()
    else {
        panic!("a reason for the drop");
    };
    assert_eq!(why.code(), "request-timeout");
    // One timer: the reconnect is due within the first backoff (250..500 ms).
    let due = e.poll_timeout().unwrap();
    let wait = due.since(NOW + REQUEST_TIMEOUT);
    assert!(wait >= Duration::from_millis(250) && wait <= Duration::from_millis(500));
    e.handle_timeout(due);
    assert_eq!(
        e.poll_action(),
        Some(Action::Connect {
            gateway: GatewayId(0)
        })
    );
}

#[test]
fn backoff_doubles_to_a_cap_with_jitter() {
    let ms = Duration::from_millis;
    assert_eq!(backoff(1, 0.0), ms(250));
    assert_eq!(backoff(1, 1.0), ms(500));
    assert_eq!(backoff(2, 0.0), ms(500));
    assert_eq!(backoff(3, 0.5), ms(1_500));
    assert_eq!(backoff(20, 1.0), BACKOFF_MAX);
    assert_eq!(backoff(u32::MAX, 0.0), BACKOFF_MAX / 2);
    // Out-of-range randomness is clamped, never a negative or unbounded delay.
    assert_eq!(backoff(1, -3.0), ms(250));
    assert_eq!(backoff(1, 9.0), ms(500));
    // The engine's own numbers are uniform in [0, 1) and differ per seed.
    let (mut a, mut b) = (Rng::new(1), Rng::new(2));
    let xs: Vec<f64> = (0..1000).map(|_| a.next_f64()).collect();
    assert!(xs.iter().all(|x| (0.0..1.0).contains(x)));
    assert!((0.45..0.55).contains(&(xs.iter().sum::<f64>() / 1000.0)));
    assert_ne!(a.next_u64(), b.next_u64());
}

/// A session dropped within a minute of its `init` doubles the next delay, whatever the
/// gateway did meanwhile; one that stayed up a minute starts it over; a connection that
/// never reached `init` doubles it too.
#[test]
fn the_backoff_starts_over_only_after_a_healthy_session() {
    let ms = Duration::from_millis;
    let mut gw = gateway::Gateway::new(ConnectString {
        url: "ws://127.0.0.1:9000".into(),
        node_id: key(0x40).public_key(),
    });
    for want in [500, 1_000, 2_000] {
        gw.ready_at = Some(NOW);
        let dropped = NOW + (HEALTHY_SESSION - ms(1));
        assert_eq!(gw.backoff_after_drop(dropped, 1.0), ms(want));
    }
    gw.ready_at = Some(NOW);
    assert_eq!(gw.backoff_after_drop(NOW + HEALTHY_SESSION, 1.0), ms(500));
    assert_eq!(gw.ready_at, None, "the session is over");
    assert_eq!(gw.backoff_after_drop(NOW + HEALTHY_SESSION, 1.0), ms(1_000));
}

#[test]
fn a_rejected_gateway_says_which_rule_at_which_height() {
    use crate::testnet::{Net, memory};
    use lightwire_proto::testing::TestChain;
    // The bad gateway claims more work, with a header at 150 that misses its target.
    let mut bad = TestChain::generate(320);
    bad.corrupt(150);
    let good = TestChain::generate(300);
    let mut net = Net::new(memory(), vec![bad, good], |_| {});
    net.drive();
    let rejected: Vec<&DropReason> = net
        .host
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Rejected {
                gateway: GatewayId(0),
                reason,
            } => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(rejected.len(), 1, "{:?}", net.host.events);
    assert_eq!(rejected[0].code(), "invalid-header");
    assert_eq!(rejected[0].invalid_header(), Some((150, "high-hash")));
    assert!(
        rejected[0].to_string().contains("height 150"),
        "{}",
        rejected[0]
    );
    assert_eq!(net.host.engine.state(GatewayId(0)), GatewayState::Bad);
    // The honest gateway's chain was synced and stored all the same.
    assert_eq!(net.stored().height, 300);
}

#[test]
fn two_gateways_sync_into_the_store_and_keepalive_runs_on_one_timer() {
    use crate::testnet::{Net, memory};
    use lightwire_proto::testing::TestChain;
    let mut net = Net::new(
        memory(),
        vec![TestChain::generate(5_000), TestChain::generate(5_000)],
        |e| {
            e.syncer_mut().request_size = 2_000;
            e.syncer_mut().commit_every = 1_500;
        },
    );
    net.drive();
    assert_eq!(net.stored().height, 5_000);
    assert!(net.host.engine.is_synced());
    assert_eq!(net.host.engine.state(GatewayId(0)), GatewayState::Synced);
    // Idle for ten minutes: pings both ways keep every connection up.
    net.advance(Duration::from_secs(600));
    assert_eq!(net.host.engine.state(GatewayId(0)), GatewayState::Synced);
    assert_eq!(net.host.engine.state(GatewayId(1)), GatewayState::Synced);
    assert_eq!(net.host.engine.counters().reconnects, 0);
    // A gateway that goes silent is dropped by the keepalive and reconnected.
    net.host.gateways[1].as_mut().unwrap().speaks = false;
    net.advance(Duration::from_secs(51));
    assert_eq!(net.host.engine.counters().reconnects, 1);
    let dropped = net.host.events.iter().any(|e| {
        matches!(e, Event::Gateway { gateway: GatewayId(1), reason: Some(r), .. } if r.code() == "keepalive-timeout")
    });
    assert!(dropped, "{:?}", net.host.events);
    net.advance(Duration::from_secs(1));
    assert_eq!(
        net.host.engine.state(GatewayId(1)),
        GatewayState::Synced,
        "back after the backoff"
    );
}

#[test]
fn an_answer_held_for_ancestors_is_capped_at_what_was_asked() {
    // Our chain: 5,000 headers, so that height 100 is below the validation window.
    let main = headers_after(&REGTEST, &REGTEST.genesis, 0, 5_000, 0);
    let mut chain = Chain::new(&REGTEST);
    for piece in main.chunks(2_000) {
        chain.connect(piece, NOW.as_secs()).unwrap();
    }
    let tip = Tip::from(chain.tip());
    let list = vec![ConnectString {
        url: "ws://127.0.0.1:9000".into(),
        node_id: key(0x40).public_key(),
    }];
    let mut e = Engine::new(chain, &tip, list, key(1), 7, NOW);
    e.syncer_mut().request_size = 2_000;
    while e.poll_action().is_some() {}
    let mut a = Fake::connect(&mut e, 0);
    // A branch from height 100 with more work than ours.
    let branch = headers_after(&REGTEST, &main[99], 100, 6_000, 1);
    a.tip(&mut e, 0, 6_100, &branch[5_999]);
    e.schedule();
    let ids = a.requests(&mut e, 0);
    assert_eq!(ids.len(), 1);
    // Its first message forks below the window: the engine waits for ancestors.
    a.headers(&mut e, 0, ids[0], &branch[..800], false);
    assert!(e.need_ancestors().is_some());
    // Meanwhile the gateway keeps sending: 1,200 more is the rest of the 2,000 asked
    // for and is held; anything beyond is refused, and nothing more is held.
    a.headers(&mut e, 0, ids[0], &branch[800..1_600], false);
    a.headers(&mut e, 0, ids[0], &branch[1_600..2_000], false);
    assert_eq!(e.state(GatewayId(0)), GatewayState::Syncing);
    a.headers(&mut e, 0, ids[0], &branch[2_000..2_001], false);
    assert_eq!(e.state(GatewayId(0)), GatewayState::Bad);
    assert!(
        e.need_ancestors().is_none(),
        "what was held went with the gateway"
    );
}

/// A gateway alone, ending its answer with a header three hours ahead: the headers
/// before it are ours, and the gateway stays (neither bad nor dropped): our clock may be
/// the slow one.
#[test]
fn a_header_from_the_future_is_not_yet_not_invalid() {
    let chain = headers_after(&REGTEST, &REGTEST.genesis, 0, 10, 0);
    let mut e = engine(1);
    let mut a = Fake::connect(&mut e, 0);
    let future = future_header(&chain[9], 11);
    a.tip(&mut e, 0, 11, &future);
    e.schedule();
    let ids = a.requests(&mut e, 0);
    let mut answer = chain.clone();
    answer.push(future);
    a.headers(&mut e, 0, ids[0], &answer, true);
    assert_eq!(e.syncer().tip().height, 10);
    assert!(e.syncer().is_synced(), "nothing more is asked for that tip");
    assert_eq!(e.state(GatewayId(0)), GatewayState::Syncing);
    let reason = reasons(&mut e, 0);
    let [reason] = &reason[..] else {
        panic!("one reason: {reason:?}");
    };
    assert_eq!(reason.code(), "future-header");
    assert!(!reason.is_violation());
    assert_eq!(reason.invalid_header(), None, "not an invalid header");
}

/// A valid header at `height` after `parent`, three hours ahead of our clock (our clock
/// may be the slow one).
fn future_header(parent: &Header, height: u32) -> Header {
    let mut future = headers_after(&REGTEST, parent, height - 1, 1, 0)[0];
    future.time = (NOW.as_secs() + 3 * 3600) as u32;
    let target = future.bits.to_target().unwrap();
    lightwire_chain::generate::mine(&mut future, &target);
    future
}

/// The reasons given in the events for gateway `g`, since the last call.
fn reasons(e: &mut Engine, g: usize) -> Vec<DropReason> {
    std::iter::from_fn(|| e.poll_event())
        .filter_map(|ev| match ev {
            Event::Gateway {
                gateway,
                reason: Some(r),
                ..
            } if gateway == GatewayId(g) => Some(r),
            _ => None,
        })
        .collect()
}

/// Bitcoin Core's `time-too-new`: a header more than two hours ahead of our clock is "not
/// yet", not invalid, and the headers before it in the same message are accepted. A
/// gateway that ends every answer with one (claiming the most work, so that it is asked
/// first) costs us neither those headers nor the others' tips: its tip is set aside until
/// it announces another, the gateway stays connected, and the next tip is asked of
/// another gateway.
#[test]
fn a_future_header_keeps_the_ones_before_it_and_another_gateway_is_asked() {
    let chain = headers_after(&REGTEST, &REGTEST.genesis, 0, 50, 0);
    let mut e = engine(2);
    let mut liar = Fake::connect(&mut e, 0);
    let mut honest = Fake::connect(&mut e, 1);
    honest.tip(&mut e, 1, 40, &chain[39]);
    // Its chain is ours up to 20, then a header three hours ahead; it claims 100.
    liar.tip(&mut e, 0, 100, &future_header(&chain[19], 21));
    e.schedule();
    let ids = liar.requests(&mut e, 0);
    assert_eq!(ids.len(), 1, "the most work claimed: the liar is asked");
    let mut answer = chain[..20].to_vec();
    answer.push(future_header(&chain[19], 21));
    liar.headers(&mut e, 0, ids[0], &answer, false);
    assert_eq!(e.syncer().tip().height, 20, "the 20 before it are kept");
    // The rest of its answer (what follows the future header) is not read, nor punished.
    liar.headers(&mut e, 0, ids[0], &chain[20..25], true);
    assert_eq!(e.state(GatewayId(0)), GatewayState::Syncing);
    let said = reasons(&mut e, 0);
    assert_eq!(said.len(), 1, "{said:?}");
    assert_eq!(said[0].code(), "future-header");
    assert!(!said[0].is_violation());
    let text = said[0].to_string();
    assert!(
        text.contains("not yet valid (time too far ahead)"),
        "{text}"
    );
    assert!(!text.contains("invalid"), "{text}");
    // The honest gateway's tip is the target now.
    e.schedule();
    let ids = honest.requests(&mut e, 1);
    assert_eq!(ids.len(), 1, "the other gateway is asked");
    honest.headers(&mut e, 1, ids[0], &chain[20..40], true);
    assert_eq!(e.syncer().tip().height, 40);
    // Its next tip ends the same way: asked once, what is valid taken, nothing dropped.
    liar.tip(&mut e, 0, 200, &future_header(&chain[49], 51));
    e.schedule();
    let ids = liar.requests(&mut e, 0);
    assert_eq!(ids.len(), 1, "a new tip is asked for");
    let mut answer = chain[40..50].to_vec();
    answer.push(future_header(&chain[49], 51));
    liar.headers(&mut e, 0, ids[0], &answer, true);
    assert_eq!(e.syncer().tip().height, 50);
    // Announced again, the same tip is not asked for again.
    liar.tip(&mut e, 0, 200, &future_header(&chain[49], 51));
    e.schedule();
    assert_eq!(liar.requests(&mut e, 0), [] as [u32; 0]);
    assert_eq!(e.state(GatewayId(0)), GatewayState::Syncing);
    assert_eq!(e.counters().reconnects, 0);
}

/// A deep fork whose first message waits for ancestors from the store, and ends with a
/// header three hours ahead: the branch before it is validated once the ancestors come,
/// and the rest of the answer (held meanwhile, or still arriving) is not read, nor
/// punished.
#[test]
fn a_future_header_in_an_answer_held_for_ancestors_costs_only_the_rest_of_it() {
    let main = headers_after(&REGTEST, &REGTEST.genesis, 0, 5_000, 0);
    let mut chain = Chain::new(&REGTEST);
    let mut stored = vec![*chain.tip()];
    for piece in main.chunks(2_000) {
        chain.connect(piece, NOW.as_secs()).unwrap();
        stored.extend_from_slice(chain.staged());
    }
    let tip = Tip::from(chain.tip());
    let list = vec![ConnectString {
        url: "ws://127.0.0.1:9000".into(),
        node_id: key(0x40).public_key(),
    }];
    let mut e = Engine::new(chain, &tip, list, key(1), 7, NOW);
    while e.poll_action().is_some() {}
    let mut a = Fake::connect(&mut e, 0);
    // A branch from height 100 (below the window), claiming more work than ours.
    let branch = headers_after(&REGTEST, &main[99], 100, 200, 1);
    a.tip(&mut e, 0, 6_100, &claimed(&branch[199], 0));
    e.schedule();
    let ids = a.requests(&mut e, 0);
    let mut first = branch[..50].to_vec();
    first.push(future_header(&branch[49], 151));
    a.headers(&mut e, 0, ids[0], &first, false);
    assert!(e.need_ancestors().is_some());
    a.headers(&mut e, 0, ids[0], &branch[50..100], false);
    e.on_ancestors(Some((&stored[..=100], 0)), NOW);
    assert!(e.need_ancestors().is_none());
    assert_eq!(e.state(GatewayId(0)), GatewayState::Syncing);
    let codes: Vec<&str> = reasons(&mut e, 0).iter().map(DropReason::code).collect();
    assert_eq!(codes, ["future-header"]);
    a.headers(&mut e, 0, ids[0], &branch[100..150], true);
    assert_eq!(e.state(GatewayId(0)), GatewayState::Syncing);
    assert_eq!(
        e.syncer().tip().hash,
        main[4_999].block_hash(),
        "ours has more work"
    );
}

/// Heights a gateway sends near the top of `u32`: an answer whose first height plus its
/// length passes `u32::MAX` is refused as the rule it breaks (a debug build panicked on
/// the sum), whether it answers the cross-check's probe or nothing at all.
#[test]
fn heights_near_the_top_of_u32_are_refused_not_summed_into_a_panic() {
    use lightwire_primitives::FilterHeader;
    use lightwire_wire::{AnswerFlags, FILTERS_FEATURE, FilterHeaders};
    let mut e = engine(2);
    e.resume_filters(Some((0, FilterHeader([7; 32]))), 0);
    let mut a = Fake::connect_offering(&mut e, 0, &[FILTERS_FEATURE]);
    let mut b = Fake::connect_offering(&mut e, 1, &[FILTERS_FEATURE]);
    // A tip claimed at the top height is only a hint.
    a.tip(&mut e, 0, u32::MAX, &claimed(&REGTEST.genesis, 1));
    e.schedule();
    let probe = a.asked(&mut e, 0).into_iter().find_map(|r| match r {
        Asked::FilterHeaders(id) => Some(id),
        _ => None,
    });
    let probe = probe.expect("our filter header is probed");
    // Two filter hashes, in two segments that link (the second's anchor is the header
    // the first makes), so that the connection hands them on.
    let second = lightwire_filter::filter_header(
        &lightwire_primitives::FilterHash([1; 32]),
        &FilterHeader::ZERO,
    );
    let mut anchors = [0; 64];
    anchors[32..].copy_from_slice(&second.0);
    let answer = |id| FilterHeaders {
        id,
        first_height: u32::MAX,
        flags: AnswerFlags {
            last: true,
            stop_unknown: false,
        },
        anchors: &anchors,
        hashes: &[1; 64],
    };
    a.send(&mut e, 0, &Message::FilterHeaders(answer(probe)));
    assert_eq!(e.state(GatewayId(0)), GatewayState::Bad);
    // An answer to no request of ours (a header request's id), as high.
    b.send(&mut e, 1, &Message::FilterHeaders(answer(12_345)));
    assert_eq!(e.state(GatewayId(1)), GatewayState::Bad);
    let codes: Vec<&str> = std::iter::from_fn(|| e.poll_event())
        .filter_map(|ev| match ev {
            Event::Rejected { reason, .. } => Some(reason.code()),
            _ => None,
        })
        .collect();
    assert_eq!(codes, ["cross-check-out-of-order", "unexpected-answer"]);
}

#[test]
fn colluding_gateways_cannot_push_out_an_honest_gateways_given_up_requests() {
    let chain = headers_after(&REGTEST, &REGTEST.genesis, 0, 300, 0);
    let mut e = engine(3);
    let mut honest = Fake::connect(&mut e, 0);
    let mut a = Fake::connect(&mut e, 1);
    let mut b = Fake::connect(&mut e, 2);
    honest.tip(&mut e, 0, 100, &chain[99]);
    e.schedule();
    let first = honest.requests(&mut e, 0);
    assert_eq!(first.len(), 1, "the honest gateway is asked");
    // Two colluders take turns announcing ever "better" tips, so that request after
    // request is given up: twenty of them, more than any global memory of 16 holds.
    for i in 0..20u32 {
        let (fake, g) = if i % 2 == 0 { (&mut a, 1) } else { (&mut b, 2) };
        let mut header = chain[150];
        header.nonce = header.nonce.wrapping_add(1_000 + i);
        fake.tip(&mut e, g, 1_000 + i, &header);
        e.schedule();
        assert_eq!(fake.requests(&mut e, g).len(), 1, "round {i}");
    }
    // The honest gateway's answer to the first request arrives now: ignored, not
    // punished.
    honest.headers(&mut e, 0, first[0], &chain[..100], true);
    assert_eq!(e.state(GatewayId(0)), GatewayState::Syncing);
    // A colluder answering the honest gateway's request id is another matter.
    a.headers(&mut e, 1, first[0], &chain[..10], true);
    assert_eq!(e.state(GatewayId(1)), GatewayState::Bad);
}

#[test]
fn honest_reorgs_during_a_sync_do_not_count_against_the_gateway() {
    let main = headers_after(&REGTEST, &REGTEST.genesis, 0, 1_200, 0);
    let mut e = engine(1);
    e.syncer_mut().request_size = 50;
    let mut a = Fake::connect(&mut e, 0);
    for round in 0..4 {
        // The gateway announces a tip; its chain reorganises while our request waits,
        // so the answer ends at once, empty, before the new tip is announced.
        a.tip(&mut e, 0, 1_000 + round, &main[999 + round as usize]);
        e.schedule();
        let ids = a.requests(&mut e, 0);
        assert_eq!(ids.len(), 1, "round {round}");
        a.headers(&mut e, 0, ids[0], &[], true);
        // The new tip, and the headers it asks for: progress.
        a.tip(&mut e, 0, 1_100 + round, &main[1_099 + round as usize]);
        e.schedule();
        let ids = a.requests(&mut e, 0);
        assert_eq!(ids.len(), 1, "round {round}");
        let from = e.syncer().tip().height as usize;
        a.headers(&mut e, 0, ids[0], &main[from..from + 50], true);
        assert_eq!(e.syncer().tip().height as usize, from + 50);
        assert_eq!(
            e.state(GatewayId(0)),
            GatewayState::Syncing,
            "round {round}"
        );
    }
}

/// A tip "claimed" at `height` whose header we cannot check until it comes (a
/// variant of `base`).
fn claimed(base: &Header, salt: u32) -> Header {
    let mut h = *base;
    h.nonce = h.nonce.wrapping_add(10_000 + salt);
    h
}

#[test]
fn empty_messages_do_not_keep_a_request_alive() {
    let chain = headers_after(&REGTEST, &REGTEST.genesis, 0, 50, 0);
    let mut e = engine(1);
    let mut a = Fake::connect(&mut e, 0);
    a.tip(&mut e, 0, 50, &chain[49]);
    e.schedule();
    let ids = a.requests(&mut e, 0);
    // Every 10 s an empty, not-last `headers`: messages, but no progress.
    for k in 1..=2u64 {
        let now = NOW + Duration::from_secs(10 * k);
        e.handle_timeout(now);
        let empty = Headers {
            id: ids[0],
            first_height: 0,
            last: false,
            headers: &[],
        };
        a.send_at(&mut e, 0, now, &Message::Headers(empty));
    }
    e.handle_timeout(NOW + Duration::from_secs(29));
    assert_eq!(e.state(GatewayId(0)), GatewayState::Syncing);
    e.handle_timeout(NOW + REQUEST_TIMEOUT);
    assert_eq!(
        e.state(GatewayId(0)),
        GatewayState::BackingOff,
        "30 s without progress"
    );
}

#[test]
fn a_higher_tip_before_each_empty_answer_does_not_keep_a_gateway_the_target() {
    let chain = headers_after(&REGTEST, &REGTEST.genesis, 0, 50, 0);
    let mut e = engine(1);
    let mut a = Fake::connect(&mut e, 0);
    a.tip(&mut e, 0, 1_000, &claimed(&chain[10], 0));
    for round in 1..=3u32 {
        e.schedule();
        let ids = a.requests(&mut e, 0);
        assert_eq!(ids.len(), 1, "round {round}: asked");
        // Just before ending the answer empty, a "higher" tip.
        a.tip(&mut e, 0, 1_000 + round, &claimed(&chain[10], round));
        a.headers(&mut e, 0, ids[0], &[], true);
    }
    assert_eq!(e.state(GatewayId(0)), GatewayState::Bad);
}

#[test]
fn full_answers_of_known_headers_are_not_progress() {
    let chain = headers_after(&REGTEST, &REGTEST.genesis, 0, 200, 0);
    let mut e = engine(1);
    e.syncer_mut().request_size = 50;
    let mut a = Fake::connect(&mut e, 0);
    // First a real answer: our chain reaches 50.
    a.tip(&mut e, 0, 50, &chain[49]);
    e.schedule();
    let ids = a.requests(&mut e, 0);
    a.headers(&mut e, 0, ids[0], &chain[..50], true);
    assert_eq!(e.syncer().tip().height, 50);
    // Then "higher" tips, each answered with a full answer of headers we have.
    for round in 0..3u32 {
        a.tip(&mut e, 0, 1_000 + round, &claimed(&chain[150], round));
        e.schedule();
        let ids = a.requests(&mut e, 0);
        assert_eq!(ids.len(), 1, "round {round}: asked");
        a.headers(&mut e, 0, ids[0], &chain[..50], true);
        e.schedule();
        assert!(
            a.requests(&mut e, 0).is_empty(),
            "round {round}: not continued from headers we have"
        );
    }
    assert_eq!(e.state(GatewayId(0)), GatewayState::Bad);
}

#[test]
fn a_task_asks_a_benched_gateway_last_and_draws_evenly_among_the_others() {
    use super::ctx::Ctx;
    use super::gateway::{BENCHED_FOR, Gateways, MAX_STRIKES};
    let list = (0..3)
        .map(|g| ConnectString {
            url: format!("ws://127.0.0.1:{}", 9000 + g),
            node_id: key(0x40 + g as u8).public_key(),
        })
        .collect();
    let mut ctx = Ctx::new(&REGTEST, Gateways::new(list), key(1), 7, NOW);
    let all = |_: GatewayId, _: &gateway::Gateway| true;
    let standing = |gw: &gateway::Gateway| gw.filter_headers;
    // The draw picks among the usable evenly; the headers' source after the others.
    assert_eq!(ctx.pick(1, None, all, standing), Some(GatewayId(1)));
    assert_eq!(ctx.pick(5, None, all, standing), Some(GatewayId(2)));
    let source = Some(GatewayId(1));
    assert_eq!(ctx.pick(1, source, all, standing), Some(GatewayId(2)));
    assert_eq!(ctx.pick(2, source, all, standing), Some(GatewayId(0)));
    let not_0 = |g: GatewayId, _: &gateway::Gateway| g != GatewayId(0);
    assert_eq!(ctx.pick(2, None, not_0, standing), Some(GatewayId(1)));
    // Strikes short of the limit change nothing; the last benches it.
    for _ in 1..MAX_STRIKES {
        ctx.gateways[GatewayId(2)].filter_headers.strike(NOW);
    }
    assert_eq!(ctx.pick(2, None, all, standing), Some(GatewayId(2)));
    ctx.gateways[GatewayId(2)].filter_headers.strike(NOW);
    assert_eq!(ctx.pick(2, None, all, standing), Some(GatewayId(0)));
    // Benched, it is still asked when no other can be: it orders, it never stalls.
    let only_2 = |g: GatewayId, _: &gateway::Gateway| g == GatewayId(2);
    assert_eq!(ctx.pick(0, None, only_2, standing), Some(GatewayId(2)));
    // Other tasks keep their own standing; the bench ends.
    assert_eq!(ctx.pick(2, None, all, |gw| gw.scan), Some(GatewayId(2)));
    ctx.now = NOW + BENCHED_FOR;
    assert_eq!(ctx.pick(2, None, all, standing), Some(GatewayId(2)));
    // A delivery clears its strikes.
    let gw = &mut ctx.gateways[GatewayId(2)];
    gw.filter_headers.strike(NOW);
    gw.filter_headers.delivered();
    assert_eq!(gw.filter_headers, gateway::Standing::default());
    // No gateways, nobody.
    let none = Ctx::new(&REGTEST, Gateways::new(vec![]), key(1), 7, NOW);
    assert_eq!(none.pick(3, None, all, standing), None);
}

#[test]
fn a_gateway_whose_empty_answers_another_fills_is_benched_and_the_other_serves() {
    use crate::testnet::{Net, block_on, memory};
    use lightwire_proto::testing::TestChain;
    use lightwire_store::HeaderStore;
    let mut staller = TestChain::generate(2_999);
    staller.filters_held = Some(0);
    // Small requests: each brings new marks, and with them a new draw of whom to ask.
    let mut net = Net::new(memory(), vec![staller, TestChain::generate(3_000)], |e| {
        e.syncer_mut().request_size = 250;
        e.syncer_mut().commit_every = 500;
    });
    net.drive();
    let gws = &net.host.engine.ctx.gateways;
    assert!(gws[GatewayId(0)].filter_headers.is_benched(net.host.now));
    assert_eq!(
        gws[GatewayId(1)].filter_headers,
        gateway::Standing::default()
    );
    // New blocks: the honest gateway serves their filter headers.
    for h in 3_001..=3_003u32 {
        let Some(gw) = net.host.gateways[1].as_mut() else {
            panic!("connected");
        };
        gw.chain.reorg(h - 1, 1, 0);
        gw.server.tip_changed();
        net.drive();
        let tip = block_on(net.store.filter_tip()).unwrap().unwrap();
        assert_eq!(tip.height, h);
    }
    assert!(
        net.host.engine.ctx.gateways[GatewayId(0)]
            .filter_headers
            .is_benched(net.host.now)
    );
}

#[test]
fn a_gateway_holding_a_scan_request_past_its_deadline_is_struck_and_another_serves() {
    use crate::testnet::{Net, memory};
    use lightwire_proto::testing::TestChain;
    // Listed first, the honest gateway is the headers' source: the scan asks the other,
    // which holds the filter of 2,200 back (answering pings meanwhile).
    let mut holder = TestChain::generate(3_000);
    holder.pending_filters.insert(2_200);
    let honest = TestChain::generate(3_000);
    let paid = honest.header(2_500).block_hash();
    let mut net = Net::new(memory(), vec![honest, holder], |e| {
        e.syncer_mut().request_size = 2_000;
        e.syncer_mut().commit_every = 1_000;
    });
    net.drive();
    let script = crate::scenarios::coinbase_script(2_500, 0);
    net.host.engine.start_scan(vec![script], 2_001);
    net.drive();
    assert_eq!(net.host.engine.scan().map(|s| s.next()), Some(2_200));
    net.advance(REQUEST_TIMEOUT);
    assert_eq!(net.host.engine.ctx.gateways[GatewayId(1)].scan.strikes, 1);
    let scan = net.host.engine.scan().unwrap();
    assert_eq!((scan.next(), scan.matches()), (3_001, &[(2_500, paid)][..]));
}

/// A context with one gateway listed (not connected), and its id.
fn one_gateway() -> (super::ctx::Ctx, GatewayId) {
    let list = vec![ConnectString {
        url: "ws://127.0.0.1:9000".into(),
        node_id: key(0x40).public_key(),
    }];
    let gateways = super::gateway::Gateways::new(list);
    (
        super::ctx::Ctx::new(&REGTEST, gateways, key(1), 7, NOW),
        GatewayId(0),
    )
}

/// The scan has two requests in flight to one gateway, and the first is answered "the
/// stop block is not on my chain" (a reorganisation there): the second is given up, not
/// forgotten, so that its answer (the same, a moment later) is taken for what it is. It
/// was dropped without a trace, and the honest gateway answering it was marked bad for an
/// `unexpected-answer`.
#[test]
fn a_scan_request_abandoned_after_stop_unknown_is_given_up_not_forgotten() {
    use super::scan::ScanTask;
    use crate::scan::Scan;
    use lightwire_wire::{AnswerFlags, FiltersWriter};
    let (mut ctx, g) = one_gateway();
    let mut task = ScanTask {
        scan: Some(Scan::new(vec![b"ours".to_vec()], 0)),
        ..ScanTask::default()
    };
    let scan = task.scan.as_mut().unwrap();
    let (a, b) = scan.need_data(Some(2_499)).unwrap();
    let hashes: Vec<lightwire_chain::BlockHash> = (a..=b)
        .map(|h| lightwire_chain::BlockHash([h as u8; 32]))
        .collect();
    let headers = vec![lightwire_primitives::FilterHeader([0; 32]); hashes.len() + 1];
    scan.on_data(a, &hashes, &headers);
    let first = scan.next_request(g, u32::MAX).unwrap().0;
    let second = scan.next_request(g, u32::MAX).unwrap().0;
    let refused = |id: u32| {
        let mut buf = vec![0u8; 64];
        let len = FiltersWriter::new(&mut buf, id)
            .unwrap()
            .finish(AnswerFlags {
                last: true,
                stop_unknown: true,
            });
        buf.truncate(len);
        buf
    };
    for id in [first, second] {
        let bytes = refused(id);
        let Ok(Message::Filters(m)) = Message::decode(&bytes) else {
            panic!("filters")
        };
        assert_eq!(
            task.on_filters(&mut ctx, g, &m),
            Ok(()),
            "the answer to {id}"
        );
    }
}

/// A block is being fetched for the wallet when the application unwatches one of its
/// items: the wallet starts again without it, and the fetch in flight is given up, not
/// forgotten, so that the gateway's answer is known for what it is. (It was dropped with
/// the old wallet, and the honest gateway answering it marked bad, `unexpected-answer`.)
#[test]
fn a_block_in_flight_when_an_item_is_unwatched_is_given_up_not_forgotten() {
    use super::scan::ScanTask;
    use super::wallet::WalletTask;
    use crate::wallet::Watched;
    let (mut ctx, g) = one_gateway();
    let (mut task, mut scan) = (WalletTask::default(), ScanTask::default());
    let items = [
        Watched::Script(hex::encode([0x51])),
        Watched::Script(hex::encode([0x52])),
    ];
    let default = crate::wallet::blocks::WalletId::DEFAULT;
    task.watch(&mut ctx, &mut scan, (default, &items), 100, 0)
        .unwrap();
    let one = crate::wallet::blocks::WalletSet::of(default);
    let block = (150, lightwire_chain::BlockHash([1; 32]), one);
    task.matched(&mut ctx, &scan, block, Some(g));
    let (_, id, _) = task.blocks.next_fetch(|_| Some(g)).unwrap();
    task.unwatch(&mut ctx, &mut scan, (default, &items[..1]), 0)
        .unwrap();
    assert_eq!(ctx.given_up_answer(g, id, true), Ok(()));
}

/// A mirror's filter-headers file is taken on the word of every connected gateway that
/// serves filters: where they are probed, one not asked there yet holds the file back
/// (the others' word alone does not do), and one that answered it lacks the header is
/// passed over. Probes keep the file being read even when more than can be kept ahead
/// were asked.
#[test]
fn a_probed_file_waits_for_every_gateways_word_there() {
    use super::bulk_filters::{BulkFilters, PROBES_AHEAD};
    use crate::filters::FilterAnswer;
    use lightwire_primitives::FilterHeader;
    let list = (0..2)
        .map(|i| ConnectString {
            url: format!("ws://127.0.0.{}:9000", i + 1),
            node_id: key(0x40 + i).public_key(),
        })
        .collect();
    let mut ctx = super::ctx::Ctx::new(
        &REGTEST,
        super::gateway::Gateways::new(list),
        key(1),
        7,
        NOW,
    );
    for gw in ctx.gateways.iter_mut() {
        gw.ready = true;
        gw.serves_filters = true;
    }
    let (a, b) = (GatewayId(0), GatewayId(1));
    let said = [FilterHeader([7; 32])];
    let answer = |id, headers| FilterAnswer {
        id,
        first_height: 2_000,
        flags: lightwire_wire::AnswerFlags {
            last: true,
            stop_unknown: false,
        },
        before: FilterHeader::ZERO,
        headers,
        hashes: &[],
    };
    let mut bulk = BulkFilters::new(2);
    let id = bulk.probing(a, 2_000);
    bulk.on_probe(a, answer(id, &said)).unwrap();
    assert_eq!(
        bulk.agreed(&ctx, 2_000, true),
        None,
        "the second is not asked yet"
    );
    // (Without probes, as with checkpoints, one that has said nothing is passed over.)
    assert_eq!(bulk.agreed(&ctx, 2_000, false), Some(said[0]));
    let id = bulk.probing(b, 2_000);
    assert_eq!(bulk.agreed(&ctx, 2_000, true), None, "the second is asked");
    bulk.on_probe(b, answer(id, &[])).unwrap();
    assert_eq!(bulk.agreed(&ctx, 2_000, true), Some(said[0]), "it lacks it");
    // More than can be kept ahead, answered, then the file being read (lower) is asked:
    // it is kept, a higher one goes.
    for i in 0..PROBES_AHEAD as u32 {
        let id = bulk.probing(b, 10_000 + 1_000 * i);
        let mut m = answer(id, &said);
        m.first_height = 10_000 + 1_000 * i;
        bulk.on_probe(b, m).unwrap();
    }
    assert!(bulk.probe_due(&ctx, b, 3_000));
    let id = bulk.probing(b, 3_000);
    assert!(bulk.is_probe(b, id));
    assert!(bulk.probe_due(&ctx, b, 17_000), "the highest went");
}

/// A scan started (or the wallet's dropped) while a mirror's filters file is read for the
/// one before: its fetch is stopped, not left to stream for nobody (holding the filters
/// stream, so the new scan waited for it to end).
#[test]
fn a_new_scan_stops_the_mirror_file_the_old_one_read() {
    use super::mirror::{FileEntry, Kind};
    use super::scan::ScanTask;
    use crate::scan::Scan;
    let (mut ctx, _) = one_gateway();
    let file = FileEntry {
        first: 0,
        last: 999,
        check: lightwire_proto::bulk::FileCheck {
            bytes: 40_000,
            sha256: [0; 32],
        },
        name: "filters-0-999-00.bin".into(),
        parts: Vec::new(),
    };
    for replace in [true, false] {
        let mut scan = Scan::new(vec![b"ours".to_vec()], 0);
        let (a, b) = scan.need_data(Some(2_999)).unwrap();
        let hashes: Vec<lightwire_chain::BlockHash> = (a..=b)
            .map(|h| lightwire_chain::BlockHash([h as u8; 32]))
            .collect();
        let headers = vec![lightwire_primitives::FilterHeader::ZERO; hashes.len() + 1];
        scan.on_data(a, &hashes, &headers);
        assert!(scan.mirror_request(0, 999));
        let now = ctx.now;
        ctx.mirrors
            .start(0, file.clone(), Kind::Filters, now, &mut ctx.actions);
        let mut task = ScanTask {
            scan: Some(scan),
            for_wallet: !replace,
            ..ScanTask::default()
        };
        ctx.actions.clear();
        if replace {
            task.start(&mut ctx, vec![b"other".to_vec()], 0, 0);
        } else {
            task.drop_wallets(&mut ctx);
        }
        assert!(ctx.mirrors.streaming(Kind::Filters).is_none(), "{replace}");
        assert!(
            ctx.actions
                .iter()
                .any(|a| matches!(a, Action::CancelFetch { .. })),
            "{replace}"
        );
    }
}
