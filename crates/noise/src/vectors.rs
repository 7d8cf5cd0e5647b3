//! Every BOLT 8 test vector, read from `$LIGHTWIRE_SHARED/vectors/bolt8.json`: both
//! successful handshakes with every intermediate value of their traces, the 13 failure
//! cases with their exact errors, and the transport messages 0, 1, 500, 501, 1000 and
//! 1001 with both key rotations. The intermediate values come from a recording
//! [`Observer`] installed with `start_observed`; the failure cases run on the default,
//! silent path. They run natively and, under wasm-bindgen-test, in headless Chromium. The
//! file is embedded at compile time so the browser can read it.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;
#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::Value;

use crate::{
    AwaitingActThree, FrameReader, HandshakeError, Initiator, Observer, PublicKey, Responder,
    SecretKey, Transport,
};

/// A recorded value: its dotted name and its bytes.
type Note = (String, Vec<u8>);
/// A named run of notes (an act, or one part of a frame).
type Section = (String, Vec<Note>);

/// The recording observer: every value under its dotted name, split into the sections the
/// code starts. Clones share one record (each half of a transport holds one).
#[derive(Clone, Default)]
struct Recorder(Rc<RefCell<Vec<Section>>>);

impl Recorder {
    /// Everything recorded since the last call; notes before the first section come under
    /// the section `""`.
    fn take(&self) -> Vec<Section> {
        std::mem::take(&mut *self.0.borrow_mut())
    }
}

impl Observer for Recorder {
    fn note(&self, prefix: &str, name: &str, value: &[u8]) {
        let name = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}.{name}")
        };
        let mut sections = self.0.borrow_mut();
        if sections.is_empty() {
            sections.push((String::new(), Vec::new()));
        }
        if let Some((_, notes)) = sections.last_mut() {
            notes.push((name, value.to_vec()));
        }
    }

    fn section(&self, name: &str) {
        self.0.borrow_mut().push((name.to_string(), Vec::new()));
    }
}

const VECTORS: &str = include_str!(concat!(env!("LIGHTWIRE_SHARED"), "/vectors/bolt8.json"));

fn vectors() -> Value {
    serde_json::from_str(VECTORS).expect("bolt8.json parses")
}

fn hex_of(v: &Value) -> Vec<u8> {
    let s = v
        .as_str()
        .unwrap_or_else(|| panic!("expected a hex string, got {v}"));
    hex::decode(s).unwrap_or_else(|e| panic!("bad hex {s}: {e}"))
}

fn secret(v: &Value) -> SecretKey {
    SecretKey::from_slice(&hex_of(v)).expect("vector secret key")
}

fn public(v: &Value) -> PublicKey {
    PublicKey::from_slice(&hex_of(v)).expect("vector public key")
}

/// Flatten a JSON trace into dotted names and byte values. `fn` names the function the
/// spec printed and `part` names a frame part: those are compared as text, as is every
/// non-hex field the vector file adds for people (`when`, `note`).
fn flatten(prefix: &str, v: &Value, out: &mut Vec<Note>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                let name = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                match k.as_str() {
                    "fn" | "when" | "note" => {}
                    "part" => out.push((name, v.as_str().unwrap_or_default().as_bytes().to_vec())),
                    _ => flatten(&name, v, out),
                }
            }
        }
        Value::String(_) => out.push((prefix.to_string(), hex_of(v))),
        other => panic!("unexpected trace value at {prefix}: {other}"),
    }
}

/// Every value of the JSON trace must have been computed, under the same name, with the
/// same bytes; a value the code never computes fails the test rather than being skipped.
fn check_trace(context: &str, trace_json: &Value, notes: &[Note]) {
    let mut expected = Vec::new();
    flatten("", trace_json, &mut expected);
    assert!(!expected.is_empty(), "{context}: empty trace");
    for (name, value) in expected {
        let seen: Vec<&Vec<u8>> = notes
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, v)| v)
            .collect();
        assert!(
            !seen.is_empty(),
            "{context}: {name} was never computed (computed: {:?})",
            names(notes)
        );
        for got in seen {
            assert_eq!(hex::encode(got), hex::encode(&value), "{context}: {name}");
        }
    }
}

fn names(notes: &[Note]) -> Vec<&str> {
    notes.iter().map(|(n, _)| n.as_str()).collect()
}

/// The notes of the one section called `name`.
fn section(all: &[Section], name: &str) -> Vec<Note> {
    let found: Vec<_> = all.iter().filter(|(n, _)| n == name).collect();
    assert_eq!(found.len(), 1, "exactly one trace section {name:?}");
    found[0].1.clone()
}

fn check_keys(inputs: &Value) {
    assert_eq!(
        secret(&inputs["ls.priv"]).public_key(),
        public(&inputs["ls.pub"]),
        "ls.pub"
    );
    assert_eq!(
        secret(&inputs["e.priv"]).public_key(),
        public(&inputs["e.pub"]),
        "e.pub"
    );
}

/// The initiator's side of the successful handshake, every value checked; returns the
/// transport and the recorder it still reports to.
fn initiator_handshake(v: &Value) -> (Transport<Recorder>, Recorder) {
    let inputs = &v["inputs"];
    check_keys(inputs);
    let recorder = Recorder::default();
    let (state, act1) = Initiator::start_observed(
        secret(&inputs["ls.priv"]),
        public(&inputs["rs.pub"]),
        secret(&inputs["e.priv"]),
        recorder.clone(),
    );
    assert_eq!(
        hex::encode(act1),
        v["act_one"]["output"].as_str().unwrap(),
        "act one"
    );
    let notes = recorder.take();
    check_trace(
        "initiator act one",
        &v["act_one"]["trace"],
        &section(&notes, ""),
    );

    let (act3, transport) = state
        .read_act_two(&hex_of(&v["act_two"]["input"]))
        .expect("act two accepted");
    assert_eq!(
        hex::encode(act3),
        v["act_three"]["output"].as_str().unwrap(),
        "act three"
    );
    let notes = recorder.take();
    check_trace(
        "initiator act two",
        &v["act_two"]["trace"],
        &section(&notes, ""),
    );
    check_trace(
        "initiator act three",
        &v["act_three"]["trace"],
        &section(&notes, "act_three"),
    );
    check_result(&v["result"], &transport);
    (transport, recorder)
}

/// The responder's side of the successful handshake, every value checked; returns the
/// transport and the recorder it still reports to.
fn responder_handshake(v: &Value) -> (Transport<Recorder>, Recorder) {
    let inputs = &v["inputs"];
    check_keys(inputs);
    let recorder = Recorder::default();
    let state = Responder::start_observed(
        secret(&inputs["ls.priv"]),
        secret(&inputs["e.priv"]),
        recorder.clone(),
    );
    let (state, act2) = state
        .read_act_one(&hex_of(&v["act_one"]["input"]))
        .expect("act one accepted");
    assert_eq!(
        hex::encode(act2),
        v["act_two"]["output"].as_str().unwrap(),
        "act two"
    );
    let notes = recorder.take();
    check_trace(
        "responder act one",
        &v["act_one"]["trace"],
        &section(&notes, ""),
    );
    check_trace(
        "responder act two",
        &v["act_two"]["trace"],
        &section(&notes, "act_two"),
    );

    let transport = state
        .read_act_three(&hex_of(&v["act_three"]["input"]))
        .expect("act three accepted");
    let notes = recorder.take();
    check_trace(
        "responder act three",
        &v["act_three"]["trace"],
        &section(&notes, ""),
    );
    check_result(&v["result"], &transport);
    (transport, recorder)
}

fn check_result<O: Observer>(result: &Value, transport: &Transport<O>) {
    assert_eq!(
        hex::encode(transport.sender_ref().cipher().key()),
        result["sk"].as_str().unwrap(),
        "sk"
    );
    assert_eq!(
        hex::encode(transport.receiver_ref().cipher().key()),
        result["rk"].as_str().unwrap(),
        "rk"
    );
    assert_eq!(
        hex::encode(transport.sender_ref().cipher().chaining_key()),
        result["ck"].as_str().unwrap(),
        "ck"
    );
    assert_eq!(
        hex::encode(transport.receiver_ref().cipher().chaining_key()),
        result["ck"].as_str().unwrap(),
        "ck"
    );
}

#[test]
fn initiator_successful_handshake() {
    let v = vectors();
    let (transport, _) = initiator_handshake(&v["initiator"]["successful_handshake"]);
    let rs = public(&v["initiator"]["successful_handshake"]["inputs"]["rs.pub"]);
    assert_eq!(*transport.remote_static(), rs);
}

#[test]
fn responder_successful_handshake() {
    let v = vectors();
    let (transport, _) = responder_handshake(&v["responder"]["successful_handshake"]);
    // The responder learns the initiator's static key from act three.
    let initiator_static = public(&v["initiator"]["successful_handshake"]["inputs"]["ls.pub"]);
    assert_eq!(*transport.remote_static(), initiator_static);
}

/// The version byte a `*_BAD_VERSION` error carries.
fn version_of(err: &HandshakeError) -> Option<u8> {
    match err {
        HandshakeError::Act1BadVersion { version }
        | HandshakeError::Act2BadVersion { version }
        | HandshakeError::Act3BadVersion { version } => Some(*version),
        _ => None,
    }
}

fn check_failure(f: &Value, err: HandshakeError) {
    let name = f["name"].as_str().unwrap();
    assert_eq!(
        err.code(),
        f["expected_error"].as_str().unwrap(),
        "{name}: {err}"
    );
    if let Some(detail) = f.get("expected_error_detail") {
        // The file gives the detail (the bad version byte) as a decimal string.
        let detail: u8 = detail
            .as_str()
            .and_then(|d| d.parse().ok())
            .expect("version detail");
        assert_eq!(version_of(&err), Some(detail), "{name}: version byte");
    }
}

#[test]
fn initiator_failures() {
    let v = vectors();
    let failures = v["initiator"]["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 4);
    for f in failures {
        let inputs = &f["inputs"];
        let (state, act1) = Initiator::start(
            secret(&inputs["ls.priv"]),
            public(&inputs["rs.pub"]),
            secret(&inputs["e.priv"]),
        );
        assert_eq!(hex::encode(act1), f["act_one_output"].as_str().unwrap());
        let err = match state.read_act_two(&hex_of(&f["act_two_input"])) {
            Ok(_) => panic!("{}: act two accepted", f["name"]),
            Err(e) => e,
        };
        check_failure(f, err);
    }
}

#[test]
fn responder_failures() {
    let v = vectors();
    let failures = v["responder"]["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 9);
    for f in failures {
        let inputs = &f["inputs"];
        let state = Responder::start(secret(&inputs["ls.priv"]), secret(&inputs["e.priv"]));
        let after_act_one: Result<AwaitingActThree, HandshakeError> = state
            .read_act_one(&hex_of(&f["act_one_input"]))
            .map(|(state, act2)| {
                assert_eq!(
                    hex::encode(act2),
                    f["act_two_output"].as_str().unwrap(),
                    "{}",
                    f["name"]
                );
                state
            });
        let err = match after_act_one {
            Err(e) => {
                assert!(
                    f.get("act_three_input").is_none(),
                    "{}: failed in act one",
                    f["name"]
                );
                e
            }
            Ok(state) => match state.read_act_three(&hex_of(&f["act_three_input"])) {
                Ok(_) => panic!("{}: act three accepted", f["name"]),
                Err(e) => e,
            },
        };
        check_failure(f, err);
    }
}

#[test]
fn thirteen_distinct_failures() {
    let v = vectors();
    let mut codes: Vec<&str> = ["initiator", "responder"]
        .iter()
        .flat_map(|r| v[r]["failures"].as_array().unwrap())
        .map(|f| f["expected_error"].as_str().unwrap())
        .collect();
    codes.sort_unstable();
    codes.dedup();
    assert_eq!(codes.len(), 13);
}

#[test]
fn transport_messages_and_rotations() {
    let v = vectors();
    let m = &v["message_encryption"];
    let (mut initiator, recorder) = initiator_handshake(&v["initiator"]["successful_handshake"]);
    let (mut responder, _) = responder_handshake(&v["responder"]["successful_handshake"]);
    assert_eq!(
        hex::encode(initiator.sender_ref().cipher().key()),
        m["sk"].as_str().unwrap()
    );
    assert_eq!(
        hex::encode(initiator.receiver_ref().cipher().key()),
        m["rk"].as_str().unwrap()
    );
    assert_eq!(
        hex::encode(initiator.sender_ref().cipher().chaining_key()),
        m["ck"].as_str().unwrap()
    );

    let plaintext = hex_of(&m["plaintext"]);
    assert_eq!(plaintext, m["plaintext_ascii"].as_str().unwrap().as_bytes());
    let outputs = m["outputs"].as_object().unwrap();
    let mut checked = 0;
    let mut rotations = Vec::new();
    let mut stream = Vec::new();
    let mut frame = [0u8; 64];
    for i in 0..1002u32 {
        let len = initiator
            .sender()
            .encrypt(&plaintext, &mut frame)
            .expect("seal");
        stream.extend_from_slice(&frame[..len]);
        let parts = recorder.take();
        rotations.extend(
            parts
                .iter()
                .flat_map(|(_, notes)| notes)
                .filter(|(n, _)| n.starts_with("rotation."))
                .cloned(),
        );
        if let Some(trace_json) = m["trace"].get(format!("message_{i}")) {
            check_trace(
                &format!("message {i} length"),
                &trace_json["length"],
                &section(&parts, "length"),
            );
            check_trace(
                &format!("message {i} body"),
                &trace_json["body"],
                &section(&parts, "body"),
            );
        }
        if let Some(expected) = outputs.get(&i.to_string()) {
            assert_eq!(
                hex::encode(&frame[..len]),
                expected.as_str().unwrap(),
                "message {i}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 6, "messages 0, 1, 500, 501, 1000, 1001");

    let expected_rotations = m["trace"]["key_rotations"].as_array().unwrap();
    assert_eq!(expected_rotations.len(), 2);
    assert_eq!(rotations.len(), 8, "two rotations of four values each");
    for (k, (expected, got)) in expected_rotations
        .iter()
        .zip(rotations.chunks(4))
        .enumerate()
    {
        let got: Vec<_> = got
            .iter()
            .map(|(n, v)| (n.trim_start_matches("rotation.").to_string(), v.clone()))
            .collect();
        check_trace(&format!("rotation {k}"), expected, &got);
    }

    // The responder reads the same stream back, fed in uneven chunks so that frames
    // straddle chunk boundaries, through both of its rotations.
    let mut reader = FrameReader::new();
    let mut received = 0;
    for chunk in stream.chunks(37) {
        let mut chunk = chunk;
        while !chunk.is_empty() {
            let (taken, message) = reader
                .read(responder.receiver(), chunk)
                .expect("frame opens");
            chunk = &chunk[taken..];
            if let Some(message) = message {
                assert_eq!(message, plaintext.as_slice());
                received += 1;
            }
        }
    }
    reader.finish().expect("stream ends on a frame boundary");
    assert_eq!(received, 1002);
}
