//! The transport after a real handshake between the fixed keys: a sender seals messages
//! and the receiving side is fed what the input makes of the frames.
//!
//! Input: `flags || [warm-up count if flags >> 4 == 0xf] || mode fields`.
//! * flags bit 0: 0 = stream mode, 1 = frame mode (below).
//! * flags bit 1: direction (0: initiator sends, responder receives; 1: the reverse).
//! * flags >> 4 == 0xf: first 492..=499 empty messages (by the next byte) go through
//!   unmutated, so the run crosses the key rotation at 1000 nonces.
//!
//! Stream mode: `count` (0..=8 messages), per message `size selector [size bytes] fill`
//! (sizes 0..255, around the 18/16-byte header and MAC, up to 4 KiB, any, 65472..=65535,
//! 65535; at most 3 * 65535 plaintext bytes a run), `mutation count` (0..=3) and per
//! mutation `kind` and its fields (flip a bit anywhere, flip a bit near a frame start,
//! truncate, append up to 64 bytes), then chunk sizes until the input ends (the rest of
//! the stream is the last chunk). The chunks go through `FrameReader::read`.
//! Checks, against an exact oracle computed from where the mutated stream first differs
//! from the sealed one: the messages that come out are the sealed messages, identical and
//! in order, exactly those whose frames precede the first difference (all of them, and
//! `finish()` is `Ok`, when nothing changed); the first error is the one the position
//! and remaining length predict (`BadLengthMac` for a changed or extra length prefix,
//! `BadBodyMac` for a changed body, `Truncated { have, needed }` from `finish()` for a
//! stream cut inside a frame); `read` always takes the whole chunk unless it returns a
//! message; `buffered()` is the position inside the current frame; after an error every
//! further call (`read` with nothing, with the failing chunk again and with every later
//! chunk, then `finish`) returns `ReceiveError::Failed`.
//!
//! Frame mode: up to 8 operations, each `size selector [size bytes] buffer selector
//! [byte] delivery [mutation fields]`: seal a message of 0..=65535 or more bytes
//! (65535..=65538 and 65536 + u16 included) with `Sender::encrypt` or
//! `Sender::seal_in_place` (fill byte's top bit) into a buffer of exactly, more or fewer
//! bytes than the frame needs; then drop the frame (the receiver's nonce falls behind),
//! or mutate it and hand it to `Receiver::open_frame`.
//! Checks: sealing gives `MessageTooLong` above 65535, else `BufferTooSmall` with the
//! right numbers, else the frame length, and a refused seal uses no nonce; opening gives
//! exactly the message, or the oracle's error (`Truncated`, `BadLengthMac` for a changed
//! prefix or a dropped frame before it, `Truncated`/`TrailingBytes`, `BadBodyMac`), and
//! after any error every later open returns `ReceiveError::Failed`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lightwire_noise::{
    FrameBuffer, FrameReader, LENGTH_HEADER_LEN, MAX_FRAME_LEN, MAX_MESSAGE_LEN, ReceiveError,
    Receiver, SendError, Sender, frame_len,
};
use lightwire_noise_fuzz::{Cursor, connected_pair, first_difference, same};

/// Plaintext bytes sealed in one run, so that a run stays around a millisecond.
const PLAINTEXT_BUDGET: usize = 3 * MAX_MESSAGE_LEN;

fuzz_target!(|data: &[u8]| {
    let mut input = Cursor::new(data);
    let flags = input.u8();
    let (initiator, responder) = connected_pair();
    let (initiator_tx, initiator_rx) = initiator.split();
    let (responder_tx, responder_rx) = responder.split();
    let (mut tx, mut rx) = if flags & 2 == 0 {
        (initiator_tx, responder_rx)
    } else {
        (responder_tx, initiator_rx)
    };
    if flags >> 4 == 0xf {
        warm_up(&mut tx, &mut rx, 492 + usize::from(input.u8() % 8));
    }
    if flags & 1 == 0 {
        stream(&mut input, &mut tx, &mut rx);
    } else {
        frames(&mut input, &mut tx, &mut rx);
    }
});

/// `count` empty messages, each sealed and opened, to move both nonces forward.
fn warm_up(tx: &mut Sender, rx: &mut Receiver, count: usize) {
    let mut frame = [0u8; LENGTH_HEADER_LEN + 16];
    for _ in 0..count {
        assert_eq!(tx.encrypt(&[], &mut frame), Ok(frame.len()));
        assert_eq!(rx.open_frame(&mut frame).map(|m| m.len()), Ok(0));
    }
}

/// A message length from the input, within what is left of `budget`.
fn message_len(input: &mut Cursor, budget: &mut usize) -> usize {
    let len = match input.u8() % 8 {
        0..=2 => usize::from(input.u8()),
        3 => usize::from(input.u8() % 40),
        4 => usize::from(input.u16() % 4096),
        5 => usize::from(input.u16()),
        6 => MAX_MESSAGE_LEN - usize::from(input.u8() % 64),
        _ => MAX_MESSAGE_LEN,
    };
    let len = if len > *budget {
        (len % 256).min(*budget)
    } else {
        len
    };
    *budget -= len;
    len
}

/// The `index`th message's bytes: a pattern that differs between messages.
fn message_bytes(len: usize, fill: u8, index: usize) -> Vec<u8> {
    let salt = (index as u8).wrapping_mul(31) ^ fill;
    (0..len)
        .map(|j| salt ^ (j as u8) ^ ((j >> 8) as u8))
        .collect()
}

/// Apply one input-chosen mutation to `bytes`. `frame_starts` are offsets worth aiming
/// bit flips at (the start of each frame).
fn mutate(input: &mut Cursor, bytes: &mut Vec<u8>, frame_starts: &[usize]) {
    match input.u8() % 4 {
        0 => {
            let pos = input.u32() as usize;
            let bit = 1u8 << (input.u8() % 8);
            if !bytes.is_empty() {
                let n = bytes.len();
                bytes[pos % n] ^= bit;
            }
        }
        1 => {
            let which = usize::from(input.u8());
            let offset = usize::from(input.u8() % 40);
            let bit = 1u8 << (input.u8() % 8);
            if !frame_starts.is_empty() {
                let pos = frame_starts[which % frame_starts.len()] + offset;
                if let Some(b) = bytes.get_mut(pos) {
                    *b ^= bit;
                }
            }
        }
        2 => {
            let cut = input.u32() as usize;
            if !bytes.is_empty() {
                let n = bytes.len();
                bytes.truncate(cut % n);
            }
        }
        _ => {
            let n = 1 + usize::from(input.u8() % 64);
            let garbage = input.bytes(n);
            bytes.extend_from_slice(garbage);
            bytes.extend(std::iter::repeat_n(0x5a, n - garbage.len()));
        }
    }
}

/// What feeding `mutated` to a fresh reader must give, when `sealed` is the stream of
/// frames starting at `starts` with bodies of `lens` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Every delivered message, then `finish()` is `Ok`.
    Clean,
    /// `finish()` reports the stream ended inside a frame.
    Truncated { have: usize, needed: usize },
    /// `read` fails with this error.
    Error(ReceiveError),
}

/// The number of messages delivered, then the outcome. Only the first difference
/// between the streams matters: frames before it are intact, and nothing after the
/// frame it falls in is read. Forging a MAC is out of the fuzzer's reach, so a changed
/// or extra length prefix fails its MAC as soon as 18 bytes of it have arrived, and a
/// changed body as soon as all of it has.
fn expected_stream(
    sealed: &[u8],
    starts: &[usize],
    lens: &[usize],
    mutated: &[u8],
) -> (usize, Outcome) {
    let diff = match first_difference(sealed, mutated) {
        Some(d) => d,
        None if sealed.len() == mutated.len() => return (starts.len(), Outcome::Clean),
        None => sealed.len().min(mutated.len()),
    };
    // The frame holding `diff`: one past the last frame if `diff` is at the end of the
    // sealed stream (bytes were appended).
    let frame = if diff >= sealed.len() {
        starts.len()
    } else {
        starts.partition_point(|&s| s <= diff) - 1
    };
    let start = starts.get(frame).copied().unwrap_or(sealed.len());
    let have = mutated.len() - start;
    let outcome = if have == 0 {
        Outcome::Clean
    } else if diff - start < LENGTH_HEADER_LEN {
        if have >= LENGTH_HEADER_LEN {
            Outcome::Error(ReceiveError::BadLengthMac)
        } else {
            Outcome::Truncated {
                have,
                needed: LENGTH_HEADER_LEN,
            }
        }
    } else {
        let needed = frame_len(lens[frame]);
        if have >= needed {
            Outcome::Error(ReceiveError::BadBodyMac)
        } else {
            Outcome::Truncated { have, needed }
        }
    };
    (frame, outcome)
}

fn stream(input: &mut Cursor, tx: &mut Sender, rx: &mut Receiver) {
    // Seal the messages into one stream.
    let count = input.u8() % 9;
    let mut budget = PLAINTEXT_BUDGET;
    let mut messages = Vec::new();
    let mut lens = Vec::new();
    let mut starts = Vec::new();
    let mut sealed = Vec::new();
    let mut buf = FrameBuffer::new();
    for index in 0..usize::from(count) {
        let len = message_len(input, &mut budget);
        let fill = input.u8();
        let message = message_bytes(len, fill, index);
        let frame = if fill & 0x80 == 0 {
            buf.encrypt(tx, &message)
        } else {
            buf.body_mut()[..len].copy_from_slice(&message);
            buf.seal(tx, len)
        }
        .expect("a message of at most 65535 bytes seals into a frame buffer");
        assert_eq!(frame.len(), frame_len(len));
        starts.push(sealed.len());
        sealed.extend_from_slice(frame);
        messages.push(message);
        lens.push(len);
    }

    let mut mutated = sealed.clone();
    for _ in 0..input.u8() % 4 {
        mutate(input, &mut mutated, &starts);
    }
    let (want_delivered, want) = expected_stream(&sealed, &starts, &lens, &mutated);

    // Chunk sizes from the rest of the input; the last chunk is what remains.
    let mut chunks = Vec::new();
    let mut offset = 0;
    loop {
        let left = mutated.len() - offset;
        let size = if input.is_empty() {
            left
        } else {
            match input.u8() % 6 {
                0 => 0,
                1 => 1 + usize::from(input.u8() % 17),
                2 => LENGTH_HEADER_LEN - 1 + usize::from(input.u8() % 3),
                3 => usize::from(input.u16()),
                4 => 1 + usize::from(input.u8()),
                _ => left,
            }
        }
        .min(left);
        chunks.push(offset..offset + size);
        offset += size;
        if offset == mutated.len() && input.is_empty() {
            break;
        }
    }

    // Boundaries where the reader starts a frame: the sealed frames, then appended bytes.
    let mut boundaries = starts.clone();
    boundaries.push(sealed.len());

    let mut reader = FrameReader::new();
    let mut delivered = 0;
    let mut consumed = 0;
    let mut error: Option<ReceiveError> = None;
    for range in chunks {
        let mut chunk = &mutated[range];
        loop {
            if let Some(first) = error {
                // `read` does not say how much of a chunk it took before failing, so after
                // the error: nothing, then the chunk again, then every later chunk.
                for again in [&[][..], chunk] {
                    let result = reader.read(rx, again).map(|(n, m)| (n, m.map(|m| m.len())));
                    assert_eq!(
                        result,
                        Err(ReceiveError::Failed),
                        "read of {} bytes after {first:?}",
                        again.len()
                    );
                }
                break;
            }
            match reader.read(rx, chunk) {
                Ok((taken, message)) => {
                    assert!(taken <= chunk.len(), "took {taken} of {}", chunk.len());
                    consumed += taken;
                    chunk = &chunk[taken..];
                    let completed = message.is_some();
                    if let Some(message) = message {
                        assert!(
                            delivered < messages.len() && message == messages[delivered].as_slice(),
                            "message {delivered} ({} bytes) is not the one sealed",
                            message.len()
                        );
                        delivered += 1;
                    }
                    let frame_start =
                        boundaries[boundaries.partition_point(|&b| b <= consumed) - 1];
                    assert_eq!(
                        reader.buffered(),
                        consumed - frame_start,
                        "buffered at {consumed}"
                    );
                    if !completed {
                        assert!(
                            chunk.is_empty(),
                            "read stopped with {} bytes left and no message",
                            chunk.len()
                        );
                    }
                    if chunk.is_empty() {
                        break;
                    }
                }
                Err(e) => {
                    assert!(rx.is_failed(), "{e:?} left the receiver usable");
                    error = Some(e);
                }
            }
        }
    }

    assert_eq!(
        delivered, want_delivered,
        "messages delivered (outcome {want:?})"
    );
    match (error, want) {
        (None, Outcome::Clean) => {
            assert_eq!(reader.finish(), Ok(()));
            assert!(!rx.is_failed());
        }
        (None, Outcome::Truncated { have, needed }) => {
            assert_eq!(
                reader.finish(),
                Err(ReceiveError::Truncated { have, needed })
            );
        }
        (Some(e), Outcome::Error(want_e)) => {
            assert_eq!(e, want_e, "first error");
            assert_eq!(
                reader.finish(),
                Err(ReceiveError::Failed),
                "finish() after {e:?}"
            );
        }
        (got, want) => panic!("stream ended with error {got:?}, expected {want:?}"),
    }
}

/// What `open_frame` must give for `mutated` when `sealed` is the next frame the sender
/// made, `behind` says a sealed frame was dropped before it (so the receiver's nonce is
/// behind the sender's), and the receiver has not failed.
fn expected_frame(sealed: &[u8], mutated: &[u8], behind: bool) -> Result<(), ReceiveError> {
    if mutated.len() < LENGTH_HEADER_LEN {
        return Err(ReceiveError::Truncated {
            have: mutated.len(),
            needed: LENGTH_HEADER_LEN,
        });
    }
    if behind || !same(&mutated[..LENGTH_HEADER_LEN], &sealed[..LENGTH_HEADER_LEN]) {
        return Err(ReceiveError::BadLengthMac);
    }
    if mutated.len() < sealed.len() {
        return Err(ReceiveError::Truncated {
            have: mutated.len(),
            needed: sealed.len(),
        });
    }
    if mutated.len() > sealed.len() {
        return Err(ReceiveError::TrailingBytes {
            extra: mutated.len() - sealed.len(),
        });
    }
    if !same(mutated, sealed) {
        return Err(ReceiveError::BadBodyMac);
    }
    Ok(())
}

fn frames(input: &mut Cursor, tx: &mut Sender, rx: &mut Receiver) {
    let mut buf = vec![0u8; MAX_FRAME_LEN + 256];
    let mut budget = PLAINTEXT_BUDGET;
    let mut failed = false;
    let mut behind = false;
    for index in 0..1 + usize::from(input.u8() % 8) {
        let len = match input.u8() % 8 {
            0..=2 => usize::from(input.u8()),
            3 => usize::from(input.u16() % 4096),
            4 => usize::from(input.u16()),
            5 => MAX_MESSAGE_LEN + usize::from(input.u8() % 4),
            6 => MAX_MESSAGE_LEN + 1,
            _ => MAX_MESSAGE_LEN + 1 + usize::from(input.u16()),
        };
        let len = if len <= MAX_MESSAGE_LEN && len > budget {
            (len % 256).min(budget)
        } else {
            len
        };
        budget -= len.min(budget);
        let needed = frame_len(len);
        let available = match input.u8() % 4 {
            0 | 1 => needed,
            2 => needed + usize::from(input.u8()),
            _ => needed.saturating_sub(1 + usize::from(input.u8())),
        }
        .min(buf.len());
        let fill = input.u8();
        let message = message_bytes(len, fill, index);

        let sealed = if fill & 0x80 == 0 {
            tx.encrypt(&message, &mut buf[..available])
        } else {
            if len <= MAX_MESSAGE_LEN && LENGTH_HEADER_LEN + len <= available {
                buf[LENGTH_HEADER_LEN..LENGTH_HEADER_LEN + len].copy_from_slice(&message);
            }
            tx.seal_in_place(&mut buf[..available], len)
        };
        let want = if len > MAX_MESSAGE_LEN {
            Err(SendError::MessageTooLong { len })
        } else if available < needed {
            Err(SendError::BufferTooSmall { needed, available })
        } else {
            Ok(needed)
        };
        assert_eq!(sealed, want, "sealing {len} bytes into {available}");
        if sealed.is_err() {
            // Nothing was sealed and no nonce used: the next frame must still open.
            continue;
        }

        let delivery = input.u8();
        if delivery % 8 == 7 {
            behind = true;
            continue;
        }
        let frame = &buf[..needed];
        let mut mutated = frame.to_vec();
        for _ in 0..delivery % 4 {
            mutate(input, &mut mutated, &[0]);
        }
        let want = if failed {
            Err(ReceiveError::Failed)
        } else {
            expected_frame(frame, &mutated, behind)
        };
        let opened = rx.open_frame(&mut mutated).map(|m| m.to_vec());
        match want {
            Ok(()) => assert_eq!(opened.as_deref(), Ok(message.as_slice()), "frame {index}"),
            Err(e) => assert_eq!(
                opened,
                Err(e),
                "frame {index} (receiver failed before: {failed})"
            ),
        }
        failed |= opened.is_err();
        assert_eq!(rx.is_failed(), failed, "is_failed() after frame {index}");
    }
}
