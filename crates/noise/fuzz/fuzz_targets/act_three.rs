//! A responder with fixed keys that accepted the fixed act one reads fuzz bytes as act
//! three.
//!
//! Input: `selector || [key: 32 bytes if selector bit 0] || mask`.
//! * selector bit 0: a second initiator, with static key `key` (and the fixed
//!   ephemeral key, so its act one is the fixed one), answers the fixed act two with its
//!   own valid act three; the shaping starts from that act.
//! * selector bits 1..: how `mask` becomes the act (raw, valid XOR mask, valid XOR mask
//!   resized; see `shape_act`).
//!
//! Checks: the result is exactly what `expect_act_three` predicts (length, version,
//! sealed static key, final tag; `Ok` if and only if the act is one of the valid acts).
//! On `Ok`: the transport's remote key is the static key of the initiator that made the
//! act, and the two transports talk.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lightwire_noise::Responder;
use lightwire_noise_fuzz::{
    Cursor, INITIATOR_EPHEMERAL, INITIATOR_STATIC, RESPONDER_EPHEMERAL, RESPONDER_STATIC,
    ReadSecretKey, assert_describes, assert_talk, expect_act_three, key, same, shape_act,
    start_initiator, valid_acts,
};

fuzz_target!(|data: &[u8]| {
    let mut input = Cursor::new(data);
    let selector = input.u8();
    let acts = valid_acts();
    let other = if selector & 1 == 1 {
        input.secret_key().map(|local_static| {
            let public = local_static.public_key();
            let (initiator, _) = start_initiator(local_static, key(INITIATOR_EPHEMERAL));
            let (act, transport) = initiator
                .read_act_two(&acts.two)
                .expect("any initiator with the fixed ephemeral key accepts the fixed act two");
            (act, transport, public)
        })
    } else {
        None
    };
    let base: &[u8] = match &other {
        Some((act, _, _)) => act,
        None => &acts.three,
    };
    let act = shape_act(selector, base, input.rest());
    let mut valid: Vec<&[u8]> = vec![&acts.three];
    if let Some((other_act, _, _)) = &other {
        valid.push(other_act);
    }
    let expected = expect_act_three(&act, &valid);

    let (responder, _) = Responder::start(key(RESPONDER_STATIC), key(RESPONDER_EPHEMERAL))
        .read_act_one(&acts.one)
        .expect("the fixed act one");
    match (responder.read_act_three(&act), expected) {
        (Err(e), Err(want)) => {
            assert_eq!(e, want, "act three {act:02x?}");
            assert_describes(e);
        }
        (Ok(mut responder), Ok(())) => {
            let (mut initiator, public) = match other {
                Some((other_act, transport, public)) if same(&act, &other_act) => {
                    (transport, public)
                }
                _ => {
                    assert!(
                        same(&act, &acts.three),
                        "accepted act three {act:02x?} is not a valid one"
                    );
                    let (initiator, _) =
                        start_initiator(key(INITIATOR_STATIC), key(INITIATOR_EPHEMERAL));
                    let (_, transport) = initiator.read_act_two(&acts.two).expect("fixed act two");
                    (transport, key(INITIATOR_STATIC).public_key())
                }
            };
            assert_eq!(responder.remote_static(), &public);
            assert_talk(&mut initiator, &mut responder);
        }
        (result, want) => panic!(
            "act three {act:02x?}: got {:?}, expected {want:?}",
            result.map(|t| *t.remote_static())
        ),
    }
});
