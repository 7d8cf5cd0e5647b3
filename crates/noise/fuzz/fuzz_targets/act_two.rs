//! An initiator with fixed keys, having sent the fixed act one, reads fuzz bytes as act two.
//!
//! Input: `selector || [key: 32 bytes if selector bit 0] || mask`.
//! * selector bit 0: a second responder, with ephemeral key `key`, answers the fixed act
//!   one with its own valid act two; the shaping starts from that act.
//! * selector bits 1..: how `mask` becomes the act (raw, valid XOR mask, valid XOR mask
//!   resized; see `shape_act`).
//!
//! Checks: the result is exactly what `expect_act_two` predicts (`Ok` if and only if
//! the act is one of the valid acts). On `Ok`: act three is 66 bytes with version 0, the
//! transport's remote key is the responder's static key, act three is the expected one
//! for the fixed act two, and for the second responder the handshake completes and the
//! transports talk.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lightwire_noise::{HANDSHAKE_VERSION, Responder};
use lightwire_noise_fuzz::{
    Cursor, INITIATOR_EPHEMERAL, INITIATOR_STATIC, RESPONDER_STATIC, ReadSecretKey,
    assert_describes, assert_talk, expect_act_two, key, same, shape_act, start_initiator,
    valid_acts,
};

fuzz_target!(|data: &[u8]| {
    let mut input = Cursor::new(data);
    let selector = input.u8();
    let acts = valid_acts();
    let other = if selector & 1 == 1 {
        input.secret_key().map(|ephemeral| {
            Responder::start(key(RESPONDER_STATIC), ephemeral)
                .read_act_one(&acts.one)
                .expect("any responder accepts the fixed act one")
        })
    } else {
        None
    };
    let base: &[u8] = match &other {
        Some((_, act)) => act,
        None => &acts.two,
    };
    let act = shape_act(selector, base, input.rest());
    let mut valid: Vec<&[u8]> = vec![&acts.two];
    if let Some((_, other_act)) = &other {
        valid.push(other_act);
    }
    let expected = expect_act_two(&act, &valid);

    let (initiator, _) = start_initiator(key(INITIATOR_STATIC), key(INITIATOR_EPHEMERAL));
    match (initiator.read_act_two(&act), expected) {
        (Err(e), Err(want)) => {
            assert_eq!(e, want, "act two {act:02x?}");
            assert_describes(e);
        }
        (Ok((act_three, mut initiator)), Ok(())) => {
            assert_eq!(act_three.len(), 66);
            assert_eq!(act_three[0], HANDSHAKE_VERSION);
            assert_eq!(
                initiator.remote_static(),
                &key(RESPONDER_STATIC).public_key()
            );
            if same(&act, &acts.two) {
                assert_eq!(
                    act_three, acts.three,
                    "act three answering the fixed act two"
                );
            } else {
                let (responder, _) = other.expect("a valid act two that is not the fixed one");
                let mut responder = responder
                    .read_act_three(&act_three)
                    .expect("the responder accepts act three");
                assert_eq!(
                    responder.remote_static(),
                    &key(INITIATOR_STATIC).public_key()
                );
                assert_talk(&mut initiator, &mut responder);
            }
        }
        (result, want) => panic!(
            "act two {act:02x?}: got {:?}, expected {want:?}",
            result.map(|(act_three, _)| act_three)
        ),
    }
});
