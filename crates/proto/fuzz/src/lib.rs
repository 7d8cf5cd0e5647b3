//! Shared pieces of the lightwire-proto fuzz targets: the cursor that reads structure out of
//! fuzz input (re-exported from lightwire-fuzz-support), a reference model of the WebSocket frame stream (what `ws::Decoder` must
//! report for any bytes), and a driver that feeds a stream to a real decoder in chunks and
//! records what comes out in the same shape, so that the two can be compared.
//!
//! The model is written from RFC 6455 section 5 as this codec narrows it (binary only,
//! payload streamed as it arrives, control frames whole), not from the decoder's code: it
//! parses the whole stream at once, with no state carried between calls, so a chunking bug
//! in the decoder shows up as a difference.
#![forbid(unsafe_code)]

use lightwire_proto::ws::{Decoder, Event, WsError};

/// The input reader shared by every fuzz project (`crates/fuzz-support`), re-exported so
/// that the targets take everything from this crate.
pub use lightwire_fuzz_support::Cursor;

/// A control frame the stream delivered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Control {
    /// A ping and its payload (unmasked): what the pong must echo.
    Ping(Vec<u8>),
    /// A pong.
    Pong,
    /// A close.
    Close,
}

/// What a frame stream delivers: every binary payload byte in order, each control frame
/// with the number of payload bytes delivered before it, and how the stream ended. The
/// shape does not depend on how the stream was cut into chunks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivered {
    /// Binary (and continuation) payload bytes, unmasked, in order.
    pub data: Vec<u8>,
    /// Control frames, each after `data[..n]`.
    pub controls: Vec<(usize, Control)>,
    /// The first error, if any; nothing after it is delivered.
    pub error: Option<WsError>,
}

/// Opcodes (RFC 6455 5.2).
const CONTINUATION: u8 = 0;
const TEXT: u8 = 1;
const BINARY: u8 = 2;
const CLOSE: u8 = 8;
const PING: u8 = 9;
const PONG: u8 = 10;

/// What a decoder that expects masked frames (`masked`, the server side) or unmasked ones
/// (the client side) must deliver for `stream`.
///
/// A frame is judged once its whole header (2 bytes, the extended length, the mask) has
/// arrived, in this order: reserved bits set, mask bit not the expected one, a 64-bit
/// length with the top bit set, then the opcode: text is refused, a control frame must be
/// final and at most 125 bytes, a continuation needs an open fragmented binary message and
/// a new binary message must not start inside one, other opcodes are reserved. A binary
/// payload is delivered as far as it has arrived; a control frame only when complete.
pub fn model(stream: &[u8], masked: bool) -> Delivered {
    let mut out = Delivered {
        data: Vec::new(),
        controls: Vec::new(),
        error: None,
    };
    let mut in_binary = false;
    let mut pos = 0;
    while stream.len() - pos >= 2 {
        let (b0, b1) = (stream[pos], stream[pos + 1]);
        let has_mask = b1 & 0x80 != 0;
        let len_bytes = match b1 & 0x7f {
            126 => 2,
            127 => 8,
            _ => 0,
        };
        let header_len = 2 + len_bytes + if has_mask { 4 } else { 0 };
        if stream.len() - pos < header_len {
            break;
        }
        let header = &stream[pos..pos + header_len];
        let fail = |out: &mut Delivered, e| out.error = Some(e);
        if b0 & 0x70 != 0 {
            fail(&mut out, WsError::Reserved);
            break;
        }
        if has_mask != masked {
            fail(&mut out, WsError::Unmasked);
            break;
        }
        let len: u64 = match len_bytes {
            2 => u64::from(u16::from_be_bytes([header[2], header[3]])),
            8 => u64::from_be_bytes(header[2..10].try_into().expect("8 bytes")),
            _ => u64::from(b1 & 0x7f),
        };
        if len >= 1 << 63 {
            fail(&mut out, WsError::BadLength);
            break;
        }
        let fin = b0 & 0x80 != 0;
        let opcode = b0 & 0x0f;
        let control = matches!(opcode, CLOSE | PING | PONG);
        match opcode {
            TEXT => {
                fail(&mut out, WsError::Text);
                break;
            }
            CLOSE | PING | PONG if !fin || len > 125 => {
                fail(&mut out, WsError::BadControl);
                break;
            }
            CLOSE | PING | PONG => {}
            BINARY if in_binary => {
                fail(&mut out, WsError::Reserved);
                break;
            }
            CONTINUATION if !in_binary => {
                fail(&mut out, WsError::Reserved);
                break;
            }
            BINARY | CONTINUATION => in_binary = !fin,
            _ => {
                fail(&mut out, WsError::Reserved);
                break;
            }
        }
        let mask = has_mask.then(|| {
            let m = &header[header_len - 4..];
            [m[0], m[1], m[2], m[3]]
        });
        let body_start = pos + header_len;
        let arrived = (stream.len() - body_start) as u64;
        let take = len.min(arrived) as usize;
        let mut payload = stream[body_start..body_start + take].to_vec();
        if let Some(m) = mask {
            for (i, b) in payload.iter_mut().enumerate() {
                *b ^= m[i % 4];
            }
        }
        if control {
            if (take as u64) < len {
                break;
            }
            let c = match opcode {
                PING => Control::Ping(payload),
                PONG => Control::Pong,
                _ => Control::Close,
            };
            out.controls.push((out.data.len(), c));
        } else {
            out.data.extend_from_slice(&payload);
        }
        pos = body_start + take;
        if (take as u64) < len {
            break;
        }
    }
    out
}

/// Feed `stream` to `decoder` cut at `chunks` (consecutive ranges covering it), the way
/// the responder does: each chunk is handed over until all of it is taken. Checks what
/// every call must satisfy on its own, and returns what was delivered.
///
/// Per call: `taken` is within the chunk; a non-empty chunk makes progress (bytes taken or
/// an event); `Data(range)` is a non-empty range ending at `taken`; after a ping,
/// `pong()` is a final, unmasked pong frame carrying the ping's payload. After the first
/// error, every further call (an empty chunk, the rest of the chunk, later chunks) fails.
pub fn drive(
    decoder: &mut Decoder,
    stream: &[u8],
    chunks: &[core::ops::Range<usize>],
) -> Delivered {
    let mut out = Delivered {
        data: Vec::new(),
        controls: Vec::new(),
        error: None,
    };
    for range in chunks {
        let mut chunk = stream[range.clone()].to_vec();
        let mut at = 0;
        loop {
            if let Some(first) = out.error {
                for again in [&mut [][..], &mut chunk[at..]] {
                    let len = again.len();
                    assert_eq!(
                        decoder.decode(again),
                        Err(WsError::Reserved),
                        "decode of {len} bytes after {first:?}"
                    );
                }
                break;
            }
            let left = chunk.len() - at;
            match decoder.decode(&mut chunk[at..]) {
                Ok((taken, event)) => {
                    assert!(taken <= left, "took {taken} of {left}");
                    assert!(
                        taken > 0 || event.is_some() || left == 0,
                        "no progress on {left} bytes"
                    );
                    match event {
                        Some(Event::Data(r)) => {
                            assert!(
                                r.start < r.end && r.end == taken,
                                "data {r:?} with {taken} taken"
                            );
                            out.data.extend_from_slice(&chunk[at + r.start..at + r.end]);
                        }
                        Some(Event::Ping) => {
                            let mut pong = [0u8; 2 + 125];
                            let n = decoder.pong(&mut pong);
                            assert!(n >= 2, "pong of {n} bytes");
                            assert_eq!(pong[0], 0x8a, "pong frame's first byte");
                            assert_eq!(usize::from(pong[1]), n - 2, "pong frame's length byte");
                            out.controls
                                .push((out.data.len(), Control::Ping(pong[2..n].to_vec())));
                        }
                        Some(Event::Pong) => out.controls.push((out.data.len(), Control::Pong)),
                        Some(Event::Close) => out.controls.push((out.data.len(), Control::Close)),
                        None => {}
                    }
                    at += taken;
                }
                Err(e) => {
                    assert!(!e.to_string().is_empty());
                    out.error = Some(e);
                    continue;
                }
            }
            if at == chunk.len() {
                break;
            }
        }
    }
    if out.error.is_none() {
        // Nothing left over: an empty chunk completes nothing.
        assert_eq!(decoder.decode(&mut []), Ok((0, None)), "decode of 0 bytes");
    }
    out
}

/// Chunk boundaries for `len` bytes from the rest of the input (including empty chunks,
/// single bytes and cuts inside a header); the last chunk is whatever remains.
pub fn chunks(input: &mut Cursor, len: usize) -> Vec<core::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let left = len - offset;
        let size = if input.is_empty() {
            left
        } else {
            match input.u8() % 6 {
                0 => 0,
                1 => 1,
                2 => 1 + usize::from(input.u8() % 14),
                3 => usize::from(input.u16()),
                4 => 1 + usize::from(input.u8()),
                _ => left,
            }
        }
        .min(left);
        out.push(offset..offset + size);
        offset += size;
        if offset == len && input.is_empty() {
            break;
        }
    }
    out
}
