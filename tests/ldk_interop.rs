//! lightwire against LDK: our BOLT 8 handshake and transport (`lightwire-noise`) and our
//! BOLT 1 messages (`lightwire-wire`) talking to the real `PeerManager` of LDK 0.2, a
//! Lightning implementation written independently of ours.
//!
//! Both sides run in this process: LDK over in-memory sockets driven by `read_event` and
//! `process_events`, our side feeding LDK's output through a `FrameReader`. No threads,
//! no sockets, no timers. What each test proves is in its doc comment.

mod support;

use std::collections::VecDeque;

use lightning::bitcoin::Network;
use lightning::bitcoin::constants::ChainHash as LdkChainHash;
use lightning::ln::msgs::SocketAddress;
use lightwire_noise::{KEY_ROTATION_INTERVAL, LENGTH_HEADER_LEN, ReceiveError, frame_len};
use lightwire_wire::{ChainHash, Init, Message, NO_PONG_THRESHOLD, Ping, Pong};

use support::ldk::{CHAT_FEATURE_BIT, CHAT_TYPE, LdkNode};
use support::{
    MAINNET, REGTEST, TESTNET3, accept_ldk, dial_ldk, established_session, key, ldk_bits,
    send_init, to_ldk,
};

/// Seed of the LDK node's keys.
const LDK_SEED: u8 = 0x42;
/// Our static key's byte; each test's ephemeral keys use other bytes.
const OUR_STATIC: u8 = 0x11;

/// Feature bits of our `init`: two optional BOLT 9 bits LDK knows, and an optional bit in
/// the custom range that it does not (so the field is 33 bytes long).
const OUR_FEATURES: &[usize] = &[9, 15, 259];

/// Chunk sizes for handing LDK's output to our frame reader: single bytes, splits inside
/// and just past the 18-byte length header, and reads longer than any frame.
const UNEVEN: &[usize] = &[1, 7, 18, 19, 2, 333, 64, 1400, 4096, 17, 70_000];

/// An LDK node configured for regtest: it lists regtest in its `networks` and refuses
/// peers that list chains but not regtest.
fn regtest_ldk() -> LdkNode {
    LdkNode::new(LDK_SEED, Some(vec![LdkChainHash::REGTEST]))
}

/// The bits of LDK's `init` as lightwire-wire parses them equal the bits LDK set (read
/// from LDK's own bytes), globalfeatures repeats bits 0..=13 of them as LDK documents, and
/// LDK requires nothing of us.
fn check_ldk_features(init: &Init<'_>, ldk: &LdkNode) {
    let expected = ldk_bits(&ldk.expected_init_features());
    assert!(
        expected.contains(&9) && expected.contains(&CHAT_FEATURE_BIT),
        "LDK offers var_onion_optin and our custom handler's bit: {expected:?}"
    );
    assert_eq!(init.features.iter().collect::<Vec<_>>(), expected);
    let low: Vec<usize> = expected.iter().copied().filter(|&b| b <= 13).collect();
    assert_eq!(init.global_features.iter().collect::<Vec<_>>(), low);
    assert_eq!(
        init.combined_features().iter().collect::<Vec<_>>(),
        expected
    );
    assert!(
        expected.iter().all(|b| b % 2 == 1),
        "LDK only offers: {expected:?}"
    );
    assert_eq!(init.first_unknown_required_feature(&[]), None);
}

/// (a) Our `Initiator` completes the handshake with LDK as responder; LDK's `init`
/// decodes with lightwire-wire (its features are exactly the bits LDK set, its `networks`
/// is regtest's genesis hash in the byte order we use); LDK accepts our `init` and reads
/// our feature bits where we put them; and each `ping` we send gets a `pong` of exactly
/// the requested length, except those asking for 65532 bytes or more, which get none.
#[test]
fn our_initiator_with_ldk_responder_init_and_ping_pong() {
    let ldk = regtest_ldk();
    let our_static = key(OUR_STATIC);
    let our_id = to_ldk(&our_static.public_key());
    let (mut us, mut socket) = dial_ldk(&ldk, our_static, key(0x12));
    assert_eq!(to_ldk(&us.remote_static()), ldk.node_id());
    assert_eq!(
        LdkChainHash::using_genesis_block(Network::Regtest).to_bytes(),
        REGTEST
    );

    // LDK speaks first after act three: its init, alone.
    let mut inits = 0;
    us.receive_all(&socket.take_sent(), UNEVEN, |m| match m {
        Message::Init(init) => {
            check_ldk_features(&init, &ldk);
            assert_eq!(init.networks().collect::<Vec<_>>(), [&REGTEST]);
            assert!(init.accepts_chain(&REGTEST));
            assert!(!init.accepts_chain(&MAINNET));
            assert_eq!(init.remote_addr, None, "no address was given to LDK");
            inits += 1;
        }
        other => panic!("expected LDK's init, got {other:?}"),
    });
    assert_eq!(inits, 1);
    assert!(ldk.peer(&our_id).is_none(), "LDK waits for our init");

    let mut wire = Vec::new();
    send_init(&mut us, &mut wire, OUR_FEATURES, Some(&[REGTEST]));
    ldk.deliver(&mut socket, &wire, 4096)
        .expect("LDK accepts our init");
    let peer = ldk.peer(&our_id).expect("LDK lists us once our init is in");
    assert_eq!(ldk_bits(&peer.init_features), OUR_FEATURES);
    assert!(peer.is_inbound_connection);
    assert_eq!(ldk.chatter.connected(), [(our_id, true)]);
    assert!(
        socket.take_sent().is_empty(),
        "LDK sends nothing unprompted after init"
    );

    // (num_pong_bytes, byteslen) of our pings; the last two must go unanswered.
    let pings: [(u16, u16); 7] = [
        (0, 0),
        (1, 0),
        (16, 3),
        (1000, 64),
        (65531, 0),
        (NO_PONG_THRESHOLD, 0),
        (u16::MAX, 10),
    ];
    let mut wire = Vec::new();
    for &(ask, pad) in &pings {
        us.send_with(&mut wire, |body| Ping::encode_zeroed(ask, pad, body));
    }
    ldk.deliver(&mut socket, &wire, 4096)
        .expect("LDK reads our pings");
    let mut pong_lens = Vec::new();
    us.receive_all(&socket.take_sent(), UNEVEN, |m| match m {
        Message::Pong(pong) => {
            assert!(pong.ignored.iter().all(|&b| b == 0), "LDK pads with zeros");
            pong_lens.push(pong.byteslen());
        }
        other => panic!("expected pongs only, got {other:?}"),
    });
    assert_eq!(pong_lens, [0, 1, 16, 1000, 65531]);
    let ours_would_answer: Vec<usize> = pings
        .iter()
        .filter_map(|&(ask, _)| Ping::new(ask).pong_len().map(usize::from))
        .collect();
    assert_eq!(
        pong_lens, ours_would_answer,
        "LDK and lightwire-wire agree on when to pong"
    );
}

/// (b) LDK dials our `Responder` (`new_outbound_connection`); the responder learns LDK's
/// node id from act three; LDK's `init` arrives in the same read as act three and
/// decodes (no `networks` when LDK is given no chain; `remote_addr` carrying the address
/// LDK dialled, as a BOLT 7 descriptor); LDK accepts our `init`.
#[test]
fn ldk_initiator_with_our_responder_init_exchange() {
    let ldk = LdkNode::new(LDK_SEED, None);
    let our_static = key(OUR_STATIC);
    let our_id = to_ldk(&our_static.public_key());
    let dialled = SocketAddress::TcpIpV4 {
        addr: [203, 0, 113, 7],
        port: 9735,
    };
    let (mut us, mut socket, after_act_three) =
        accept_ldk(&ldk, our_static, key(0x22), Some(dialled));
    assert_eq!(
        to_ldk(&us.remote_static()),
        ldk.node_id(),
        "act three proves LDK's node id"
    );

    let mut inits = 0;
    us.receive_all(&after_act_three, UNEVEN, |m| match m {
        Message::Init(init) => {
            check_ldk_features(&init, &ldk);
            assert_eq!(init.networks, None, "LDK without a chain sends no networks");
            assert!(init.accepts_chain(&MAINNET) && init.accepts_chain(&REGTEST));
            // Address type 1 (IPv4), four address bytes, big-endian port 9735.
            assert_eq!(init.remote_addr, Some(&[1, 203, 0, 113, 7, 0x26, 0x07][..]));
            inits += 1;
        }
        other => panic!("expected LDK's init, got {other:?}"),
    });
    assert_eq!(inits, 1);

    let mut wire = Vec::new();
    send_init(&mut us, &mut wire, OUR_FEATURES, Some(&[MAINNET]));
    ldk.deliver(&mut socket, &wire, 4096)
        .expect("LDK accepts our init");
    let peer = ldk.peer(&our_id).expect("LDK lists us once our init is in");
    assert_eq!(peer.counterparty_node_id, our_id);
    assert!(!peer.is_inbound_connection);
    assert_eq!(ldk_bits(&peer.init_features), OUR_FEATURES);
    assert_eq!(ldk.chatter.connected(), [(our_id, false)]);
}

/// Messages each way in the rotation test, beyond `init`.
const ROUNDS: usize = 1_200;
/// Messages of each kind sent before both sides catch up.
const BATCH: usize = 50;

/// `num_pong_bytes` of our `i`th ping: varied, and now and then the largest that gets a
/// reply (a 65,535-byte pong, the largest frame).
fn pong_len(i: usize) -> u16 {
    if i % 100 == 99 {
        NO_PONG_THRESHOLD - 1
    } else {
        u16::try_from(i * 7919 % 1500).expect("below 1500")
    }
}

/// Payload of the `i`th chat from `from` (0: us, 1: LDK): who, the index, then a pattern,
/// so that any misplaced, dropped or repeated message shows.
fn chat_payload(from: u8, i: usize) -> Vec<u8> {
    let index = u32::try_from(i).expect("small index");
    let mut payload = vec![from];
    payload.extend_from_slice(&index.to_be_bytes());
    payload.extend((0..i * 31 % 700).map(|k| (i + k) as u8));
    payload
}

/// Tallies of the rotation test.
#[derive(Debug, Default)]
struct Tally {
    /// LDK's pongs to our pings.
    pongs: usize,
    /// LDK's chats (custom type 40001) to us.
    chats: usize,
    /// Our chats as LDK's custom handler received them.
    chats_at_ldk: usize,
    /// Pings LDK sent on its own (once 32 messages go out without a pong back).
    ldk_pings: usize,
    /// Our pongs to those.
    our_pongs: usize,
}

/// (c) One session carries 1,200 of our pings, each answered by an LDK pong of the
/// requested length, 1,200 chats from us that LDK's handler receives intact and in order,
/// and 1,200 chats from LDK that we decrypt and decode intact and in order, with LDK's own
/// pings answered along the way. That is well over 500 frames each way, so both sending
/// keys and both receiving keys rotate (every 1,000 nonces, two per frame) several times,
/// and any disagreement on rotation would fail a MAC. LDK's output reaches our
/// `FrameReader` in uneven chunks; our output reaches LDK in reads of varied sizes.
#[test]
fn both_directions_across_key_rotations() {
    let ldk = regtest_ldk();
    let our_static = key(OUR_STATIC);
    let our_id = to_ldk(&our_static.public_key());
    let (mut us, mut socket) =
        established_session(&ldk, our_static, key(0x13), OUR_FEATURES, Some(&[REGTEST]));
    let mut tally = Tally::default();
    let mut pongs_due: VecDeque<u16> = VecDeque::new();
    let mut ldk_pings: Vec<u16> = Vec::new();
    let mut ldk_read_sizes = [4096usize, 1, 50, 1000, 18, 333, 65_536].iter().cycle();

    for start in (0..ROUNDS).step_by(BATCH) {
        let mut wire = Vec::new();
        for len in ldk_pings.drain(..) {
            us.send_with(&mut wire, |body| Pong::encode_zeroed(len, body));
            tally.our_pongs += 1;
        }
        for i in start..start + BATCH {
            let ask = pong_len(i);
            let pad = u16::try_from(i % 5 * 13).expect("small");
            us.send_with(&mut wire, |body| Ping::encode_zeroed(ask, pad, body));
            pongs_due.push_back(ask);
            let payload = chat_payload(0, i);
            let chat = Message::Unknown {
                ty: CHAT_TYPE,
                payload: &payload,
            };
            us.send(&mut wire, chat);
            ldk.chatter.queue(our_id, chat_payload(1, i));
        }
        let read_size = *ldk_read_sizes.next().expect("cycle");
        ldk.deliver(&mut socket, &wire, read_size)
            .expect("LDK reads our batch");
        ldk.flush();

        us.receive_all(&socket.take_sent(), UNEVEN, |m| match m {
            Message::Pong(pong) => {
                let asked = pongs_due.pop_front().expect("every pong answers a ping");
                assert_eq!(pong.byteslen(), usize::from(asked), "pong {}", tally.pongs);
                tally.pongs += 1;
            }
            Message::Unknown {
                ty: CHAT_TYPE,
                payload,
            } => {
                assert_eq!(
                    payload,
                    chat_payload(1, tally.chats),
                    "chat {}",
                    tally.chats
                );
                tally.chats += 1;
            }
            Message::Ping(ping) => {
                ldk_pings.push(ping.pong_len().expect("LDK asks for a pong that fits"));
                tally.ldk_pings += 1;
            }
            other => panic!("unexpected message from LDK: {other:?}"),
        });
        for chat in ldk.chatter.take_inbox() {
            assert_eq!(
                chat.0,
                chat_payload(0, tally.chats_at_ldk),
                "chat {}",
                tally.chats_at_ldk
            );
            tally.chats_at_ldk += 1;
        }
    }
    // Answer LDK's last pings so that nothing is left owed.
    let mut wire = Vec::new();
    for len in ldk_pings.drain(..) {
        us.send_with(&mut wire, |body| Pong::encode_zeroed(len, body));
        tally.our_pongs += 1;
    }
    ldk.deliver(&mut socket, &wire, 4096)
        .expect("LDK reads our last pongs");
    assert!(socket.take_sent().is_empty(), "LDK owes nothing more");

    eprintln!(
        "rotation test: {tally:?}; frames sent {}, received {}",
        us.frames_sent(),
        us.frames_received()
    );
    assert_eq!(tally.pongs, ROUNDS);
    assert_eq!(tally.chats, ROUNDS);
    assert_eq!(tally.chats_at_ldk, ROUNDS);
    assert!(pongs_due.is_empty());
    assert!(
        tally.ldk_pings > 0,
        "LDK pings after 32 unanswered messages"
    );
    assert_eq!(tally.our_pongs, tally.ldk_pings);
    let rotations =
        |frames: usize| frames * 2 / usize::try_from(KEY_ROTATION_INTERVAL).expect("small");
    assert!(rotations(us.frames_sent()) >= 4, "our sending key rotated");
    assert!(
        rotations(us.frames_received()) >= 4,
        "our receiving key rotated"
    );
    assert!(ldk.peer(&our_id).is_some(), "LDK still connected");
    assert!(!socket.disconnected());
}

/// A frame we corrupt in transit (one bit flipped in the sealed length, its MAC, the body
/// or the body's MAC) makes LDK drop the connection: `read_event` fails, LDK forgets the
/// peer (its handlers see the disconnection, its log names the bad MAC), and no reply
/// comes. A clean frame just before it was answered, so the session was good until then.
#[test]
fn ldk_drops_the_connection_on_a_frame_we_corrupted() {
    let ping_frame = frame_len(Ping::new(8).encoded_len() + 8);
    let cases = [
        ("length prefix", 0),
        ("length MAC", LENGTH_HEADER_LEN - 1),
        ("body", LENGTH_HEADER_LEN + 3),
        ("body MAC", ping_frame - 1),
    ];
    for (what, at) in cases {
        let ldk = regtest_ldk();
        let our_static = key(OUR_STATIC);
        let our_id = to_ldk(&our_static.public_key());
        let (mut us, mut socket) =
            established_session(&ldk, our_static, key(0x14), &[], Some(&[REGTEST]));

        let mut wire = Vec::new();
        us.send_with(&mut wire, |body| Ping::encode_zeroed(8, 8, body));
        ldk.deliver(&mut socket, &wire, 4096).expect("a clean ping");
        let mut pongs = 0;
        us.receive_all(&socket.take_sent(), UNEVEN, |m| {
            assert!(matches!(m, Message::Pong(p) if p.byteslen() == 8), "{m:?}");
            pongs += 1;
        });
        assert_eq!(pongs, 1, "{what}: the session works before the corruption");

        let mut wire = Vec::new();
        us.send_with(&mut wire, |body| Ping::encode_zeroed(8, 8, body));
        assert_eq!(wire.len(), ping_frame);
        wire[at] ^= 0x01;
        assert!(
            ldk.deliver(&mut socket, &wire, 4096).is_err(),
            "{what}: LDK refuses the frame"
        );
        assert!(socket.take_sent().is_empty(), "{what}: no pong");
        assert!(ldk.peer(&our_id).is_none(), "{what}: LDK forgot us");
        assert_eq!(ldk.chatter.disconnected(), [our_id], "{what}");
        assert!(ldk.log.contains("Bad MAC"), "{what}: LDK names the MAC");
        // LDK leaves closing the socket to its caller when `read_event` fails.
        assert!(!socket.disconnected(), "{what}");
        assert!(
            ldk.deliver(&mut socket, &[0; 18], 4096).is_err(),
            "{what}: closed"
        );
    }
}

/// LDK's bytes corrupted in transit make our receiver fail with the MAC error for the part
/// that was hit (`BadLengthMac` for the sealed length or its MAC, `BadBodyMac` for the
/// body or its MAC), deliver nothing, and stay failed for the frames that follow.
#[test]
fn our_receiver_refuses_ldk_frames_corrupted_in_transit() {
    let payload_len = 100;
    let chat_frame = frame_len(2 + payload_len);
    let cases = [
        ("length prefix", 1, ReceiveError::BadLengthMac),
        (
            "length MAC",
            LENGTH_HEADER_LEN - 1,
            ReceiveError::BadLengthMac,
        ),
        ("body", LENGTH_HEADER_LEN + 5, ReceiveError::BadBodyMac),
        ("body MAC", chat_frame - 1, ReceiveError::BadBodyMac),
    ];
    for (what, at, expected) in cases {
        let ldk = regtest_ldk();
        let our_static = key(OUR_STATIC);
        let our_id = to_ldk(&our_static.public_key());
        let (mut us, socket) =
            established_session(&ldk, our_static, key(0x15), &[], Some(&[REGTEST]));

        ldk.chatter.queue(our_id, vec![0xab; payload_len]);
        ldk.chatter.queue(our_id, vec![0xcd; payload_len]);
        ldk.flush();
        let mut bytes = socket.take_sent();
        assert_eq!(bytes.len(), 2 * chat_frame, "{what}: two chat frames");
        bytes[at] ^= 0x80;

        let mut delivered = 0;
        let result = us.receive(&bytes, UNEVEN, |_| delivered += 1);
        assert_eq!(result, Err(expected), "{what}");
        assert_eq!(delivered, 0, "{what}: nothing got through");
        assert!(us.receiver_failed(), "{what}");

        ldk.chatter.queue(our_id, vec![0xef; payload_len]);
        ldk.flush();
        let clean = socket.take_sent();
        assert_eq!(
            us.receive(&clean, &[4096], |_| delivered += 1),
            Err(ReceiveError::Failed),
            "{what}: the receiver stays closed"
        );
        assert_eq!(delivered, 0);
    }
}

/// LDK reads our `networks` record and our feature bits where BOLT 1 and BOLT 9 put them:
/// it accepts an `init` that lists its chain (or lists none), refuses one that lists only
/// other chains or an empty list, accepts required bits whose feature it offers, and
/// refuses required bits it does not offer, each refusal with LDK's logged reason.
#[test]
fn ldk_checks_the_networks_and_required_features_we_send() {
    struct Case {
        what: &'static str,
        features: &'static [usize],
        networks: Option<&'static [ChainHash]>,
        /// `None`: accepted; `Some(reason)`: refused, with this in LDK's log.
        refused: Option<&'static str>,
    }
    const NO_CHAIN: &str = "Peer does not support any of our supported chains";
    const UNKNOWN: &str = "requires features unknown to us";
    let cases = [
        Case {
            what: "no networks record",
            features: &[],
            networks: None,
            refused: None,
        },
        Case {
            what: "regtest",
            features: &[],
            networks: Some(&[REGTEST]),
            refused: None,
        },
        Case {
            what: "testnet3 and regtest",
            features: &[],
            networks: Some(&[TESTNET3, REGTEST]),
            refused: None,
        },
        Case {
            what: "only testnet3",
            features: &[],
            networks: Some(&[TESTNET3]),
            refused: Some(NO_CHAIN),
        },
        Case {
            what: "empty networks",
            features: &[],
            networks: Some(&[]),
            refused: Some(NO_CHAIN),
        },
        Case {
            what: "requires var_onion_optin (8), which LDK offers",
            features: &[8],
            networks: Some(&[REGTEST]),
            refused: None,
        },
        Case {
            what: "requires the pair of LDK's custom bit (256)",
            features: &[CHAT_FEATURE_BIT - 1],
            networks: Some(&[REGTEST]),
            refused: None,
        },
        Case {
            what: "requires gossip_queries (6), which this LDK does not offer",
            features: &[6],
            networks: Some(&[REGTEST]),
            refused: Some(UNKNOWN),
        },
        Case {
            what: "requires unassigned bit 100",
            features: &[100],
            networks: Some(&[REGTEST]),
            refused: Some(UNKNOWN),
        },
        Case {
            what: "offers unassigned bit 101",
            features: &[101],
            networks: Some(&[REGTEST]),
            refused: None,
        },
    ];
    for case in cases {
        let what = case.what;
        let ldk = regtest_ldk();
        let our_static = key(OUR_STATIC);
        let our_id = to_ldk(&our_static.public_key());
        let (mut us, mut socket) = dial_ldk(&ldk, our_static, key(0x16));
        socket.take_sent(); // LDK's init, checked in the tests above.

        let mut wire = Vec::new();
        send_init(&mut us, &mut wire, case.features, case.networks);
        let result = ldk.deliver(&mut socket, &wire, 4096);
        match case.refused {
            None => {
                assert!(result.is_ok(), "{what}: accepted");
                let peer = ldk.peer(&our_id).expect(what);
                assert_eq!(ldk_bits(&peer.init_features), case.features, "{what}");
                assert_eq!(ldk.chatter.connected(), [(our_id, true)], "{what}");
            }
            Some(reason) => {
                assert!(result.is_err(), "{what}: refused");
                assert!(ldk.peer(&our_id).is_none(), "{what}");
                assert!(ldk.chatter.connected().is_empty(), "{what}");
                assert!(ldk.log.contains(reason), "{what}: LDK logs {reason:?}");
            }
        }
    }
}
