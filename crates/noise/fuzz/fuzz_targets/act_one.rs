//! A responder with fixed static and ephemeral keys reads fuzz bytes as act one.
//!
//! Input: `selector || [key: 32 bytes if selector bit 0] || mask`.
//! * selector bit 0: a second initiator, with ephemeral key `key`, also produces a valid
//!   act one; the shaping below starts from that act instead of the fixed one.
//! * selector bits 1..: how `mask` becomes the act (raw, valid XOR mask, valid XOR mask
//!   resized; see `shape_act`).
//!
//! Checks: the result is exactly what the oracle (`expect_act_one`) predicts: the right
//! `HandshakeError` variant with the right length or version, and `Ok` if and only if
//! the act is one of the valid acts. On `Ok`, act two is 50 bytes: version 0 and the
//! responder's ephemeral key, and it is the expected act two for the fixed act one; for
//! the second initiator the handshake is completed and the transports talk.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lightwire_noise::{HANDSHAKE_VERSION, Responder};
use lightwire_noise_fuzz::{
    Cursor, INITIATOR_STATIC, RESPONDER_EPHEMERAL, RESPONDER_STATIC, ReadSecretKey,
    assert_describes, assert_talk, expect_act_one, key, same, shape_act, start_initiator,
    valid_acts,
};

fuzz_target!(|data: &[u8]| {
    let mut input = Cursor::new(data);
    let selector = input.u8();
    let acts = valid_acts();
    let other = if selector & 1 == 1 {
        input
            .secret_key()
            .map(|ephemeral| start_initiator(key(INITIATOR_STATIC), ephemeral))
    } else {
        None
    };
    let base: &[u8] = match &other {
        Some((_, act)) => act,
        None => &acts.one,
    };
    let act = shape_act(selector, base, input.rest());
    let mut valid: Vec<&[u8]> = vec![&acts.one];
    if let Some((_, other_act)) = &other {
        valid.push(other_act);
    }
    let expected = expect_act_one(&act, &valid);

    let result =
        Responder::start(key(RESPONDER_STATIC), key(RESPONDER_EPHEMERAL)).read_act_one(&act);
    match (result, expected) {
        (Err(e), Err(want)) => {
            assert_eq!(e, want, "act one {act:02x?}");
            assert_describes(e);
        }
        (Ok((responder, act_two)), Ok(())) => {
            assert_eq!(act_two.len(), 50);
            assert_eq!(act_two[0], HANDSHAKE_VERSION);
            assert_eq!(
                &act_two[1..34],
                key(RESPONDER_EPHEMERAL).public_key().as_bytes()
            );
            if same(&act, &acts.one) {
                assert_eq!(act_two, acts.two, "act two answering the fixed act one");
            } else {
                let (initiator, _) = other.expect("a valid act one that is not the fixed one");
                let (act_three, mut initiator) = initiator
                    .read_act_two(&act_two)
                    .expect("the initiator accepts act two");
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
            "act one {act:02x?}: got {:?}, expected {want:?}",
            result.map(|(_, act_two)| act_two)
        ),
    }
});
