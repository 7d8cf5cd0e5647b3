//! A `ws::Decoder` (server side: client frames must be masked; or client side: server
//! frames must not be) reads a frame stream cut into input-chosen chunks.
//!
//! Input: `flags || body || chunk sizes`.
//! * flags bit 0: 0 = `Decoder::server()`, 1 = `Decoder::client()`.
//! * flags bit 1: 0 = raw: `u16 length (little-endian) || that many stream bytes` (fewer if
//!   the input ends);
//!   1 = built: `count || count × frame || mutation count || mutations`, where each frame is
//!   `kind || length selector [|| length bytes] || mask (4 bytes, used where the side
//!   masks) || fill [|| first byte or 64-bit length]` (see `Gen::frame`; kind bits 0..5
//!   pick the kind, bit 6 a variant, bit 7 clears FIN).
//!   Frames of kind 0 are made by the crate's own encoders (`push_client_frame`,
//!   `binary_header`); the others are written here, to reach fragments, control frames,
//!   non-minimal lengths, a length with the top bit set, text, reserved bits and opcodes,
//!   and the wrong mask bit. Mutations: flip a bit, truncate, append bytes.
//! * chunk sizes: one selector byte each (empty, 1 byte, 1..14, u16, 1..256, the rest);
//!   the last chunk is what remains of the stream.
//!
//! Checks: what the decoder delivers (payload bytes in order, each ping/pong/close after
//! the payload bytes before it, the ping's payload as echoed by `pong()`, and the first
//! error) is exactly what `model` says for the whole stream, whatever the chunking; the
//! per-call rules in `drive` (taken within the chunk, progress, data ranges, stays failed
//! after an error); no more payload than stream bytes. For a built stream of well-formed
//! frames with no mutation, the model must also give back exactly the payloads built, with
//! no error, so the encoders' frames decode back identically under any chunking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lightwire_proto::ws::{self, Decoder};
use lightwire_proto_fuzz::{Control, Cursor, Delivered, chunks, drive, model};

/// Payload bytes built in one run, so that a run stays well under a millisecond.
const PAYLOAD_BUDGET: usize = 256 * 1024;

fuzz_target!(|data: &[u8]| {
    let mut input = Cursor::new(data);
    let flags = input.u8();
    let masked = flags & 1 == 0;
    let (stream, built) = if flags & 2 == 0 {
        let len = usize::from(input.u16());
        (input.bytes(len).to_vec(), None)
    } else {
        let mut g = Gen::new(masked);
        for index in 0..input.u8() % 12 {
            g.frame(&mut input, index);
        }
        let mut stream = g.out;
        let mutated = mutate(&mut input, &mut stream);
        let expected = (g.well_formed && !mutated).then_some(Delivered {
            data: g.data,
            controls: g.controls,
            error: None,
        });
        (stream, expected)
    };
    let cuts = chunks(&mut input, stream.len());

    let want = model(&stream, masked);
    if let Some(built) = &built {
        assert_eq!(&want, built, "model of a well-formed built stream");
    }
    let mut decoder = if masked {
        Decoder::server()
    } else {
        Decoder::client()
    };
    let got = drive(&mut decoder, &stream, &cuts);
    assert!(got.data.len() <= stream.len());
    if got != want {
        panic!(
            "decoder delivered {} bytes, {:?}, error {:?}; model {} bytes, {:?}, error {:?} \
             (first data difference at {:?})",
            got.data.len(),
            got.controls,
            got.error,
            want.data.len(),
            want.controls,
            want.error,
            got.data.iter().zip(&want.data).position(|(a, b)| a != b),
        );
    }
});

/// Builds a frame stream, keeping what a correct decoder delivers while every frame is
/// well formed.
struct Gen {
    masked: bool,
    out: Vec<u8>,
    budget: usize,
    /// Whether a fragmented binary message is open (as the built frames say).
    in_binary: bool,
    /// Whether every frame so far is one a decoder must accept.
    well_formed: bool,
    data: Vec<u8>,
    controls: Vec<(usize, Control)>,
}

impl Gen {
    fn new(masked: bool) -> Gen {
        Gen {
            masked,
            out: Vec::new(),
            budget: PAYLOAD_BUDGET,
            in_binary: false,
            well_formed: true,
            data: Vec::new(),
            controls: Vec::new(),
        }
    }

    /// A payload length from the input, within what is left of the budget.
    fn len(&mut self, input: &mut Cursor) -> usize {
        let len = match input.u8() % 8 {
            0..=2 => usize::from(input.u8() % 126),
            3 => 124 + usize::from(input.u8() % 4),
            4 => usize::from(input.u16()),
            5 => 65535 + usize::from(input.u8() % 2),
            6 => 65536 + usize::from(input.u16()),
            _ => 0,
        };
        let len = if len > self.budget {
            (len % 126).min(self.budget)
        } else {
            len
        };
        self.budget -= len;
        len
    }

    /// One frame, described by the input.
    fn frame(&mut self, input: &mut Cursor, index: u8) {
        let kind = input.u8();
        let fin = kind & 0x80 == 0;
        let len = self.len(input);
        let mask: [u8; 4] = [input.u8(), input.u8(), input.u8(), input.u8()];
        let fill = input.u8();
        let payload: Vec<u8> = (0..len)
            .map(|j| fill ^ index.wrapping_mul(37) ^ (j as u8) ^ ((j >> 8) as u8))
            .collect();
        let my_mask = self.masked.then_some(mask);
        // Bits 0..5 pick the kind, bit 6 a variant, bit 7 clears FIN.
        match (kind & 0x3f) % 10 {
            // A final binary frame from the crate's own encoders.
            0 => {
                if self.masked {
                    ws::push_client_frame(&mut self.out, &payload, mask);
                } else {
                    let (h, n) = ws::binary_header(len);
                    self.out.extend_from_slice(&h[..n]);
                    self.out.extend_from_slice(&payload);
                }
                self.data_frame(0x02, true, &payload);
            }
            // Binary or continuation, final or not; a fresh binary frame whose header
            // spells its length in a longer form than needed (RFC 6455 asks for the
            // minimal one, decoders accept either).
            1 => self.write(0x02, fin, len, my_mask, &payload, Form::Minimal, true),
            2 => self.write(0x00, fin, len, my_mask, &payload, Form::Minimal, true),
            3 => {
                let form = if kind & 0x40 == 0 {
                    Form::U16
                } else {
                    Form::U64
                };
                self.write(0x02, fin, len, my_mask, &payload, form, true);
            }
            // Control frames (a ping over 125 bytes or fragmented must be refused).
            4 => self.write(0x09, fin, len, my_mask, &payload, Form::Minimal, true),
            5 => self.write(0x0a, fin, len, my_mask, &payload, Form::Minimal, true),
            6 => self.write(0x08, fin, len, my_mask, &payload, Form::Minimal, true),
            // Text: refused.
            7 => self.write(0x01, fin, len, my_mask, &payload, Form::Minimal, true),
            // Any first byte (reserved bits, reserved opcodes), the right mask bit.
            8 => {
                let b0 = input.u8();
                self.write(
                    b0 & 0x7f,
                    b0 & 0x80 != 0,
                    len,
                    my_mask,
                    &payload,
                    Form::Minimal,
                    true,
                );
            }
            // The wrong mask bit for this side, or a length with the top bit set.
            _ => {
                if kind & 0x40 == 0 {
                    let wrong = (!self.masked).then_some(mask);
                    self.write(0x02, fin, len, wrong, &payload, Form::Minimal, false);
                } else {
                    let huge = (1u64 << 63) | input.u64();
                    self.write(0x02, fin, len, my_mask, &payload, Form::Exact(huge), false);
                }
            }
        }
    }

    /// Write a frame: first byte `opcode` (plus FIN), the length in `form`, `mask` if any,
    /// then `payload` masked. `acceptable` is false for frames that break a rule the
    /// opcode check below does not cover (mask bit, length).
    #[allow(clippy::too_many_arguments)]
    fn write(
        &mut self,
        opcode: u8,
        fin: bool,
        len: usize,
        mask: Option<[u8; 4]>,
        payload: &[u8],
        form: Form,
        acceptable: bool,
    ) {
        let b0 = opcode | if fin { 0x80 } else { 0 };
        let mask_bit = if mask.is_some() { 0x80 } else { 0 };
        let form = match form {
            Form::Minimal if len < 126 => Form::Short,
            Form::Minimal if len <= 0xffff => Form::U16,
            Form::Minimal => Form::U64,
            Form::U16 if len > 0xffff => Form::U64,
            f => f,
        };
        self.out.push(b0);
        match form {
            Form::Short => self.out.push(mask_bit | len as u8),
            Form::U16 => {
                self.out.push(mask_bit | 126);
                self.out.extend_from_slice(&(len as u16).to_be_bytes());
            }
            Form::U64 => {
                self.out.push(mask_bit | 127);
                self.out.extend_from_slice(&(len as u64).to_be_bytes());
            }
            Form::Exact(n) => {
                self.out.push(mask_bit | 127);
                self.out.extend_from_slice(&n.to_be_bytes());
            }
            Form::Minimal => unreachable!("resolved above"),
        }
        if let Some(m) = mask {
            self.out.extend_from_slice(&m);
        }
        let at = self.out.len();
        self.out.extend_from_slice(payload);
        if let Some(m) = mask {
            ws::apply_mask(&mut self.out[at..], m, 0);
        }
        if !acceptable || matches!(form, Form::Exact(_)) {
            self.well_formed = false;
            return;
        }
        self.data_frame(opcode, fin, payload);
    }

    /// Record what a well-formed frame delivers, or that the stream is no longer well
    /// formed.
    fn data_frame(&mut self, opcode: u8, fin: bool, payload: &[u8]) {
        if !self.well_formed {
            return;
        }
        let ok = match opcode {
            0x02 if !self.in_binary => {
                self.in_binary = !fin;
                true
            }
            0x00 if self.in_binary => {
                self.in_binary = !fin;
                true
            }
            0x08..=0x0a => fin && payload.len() <= 125,
            _ => false,
        };
        if !ok {
            self.well_formed = false;
            return;
        }
        match opcode {
            0x09 => self
                .controls
                .push((self.data.len(), Control::Ping(payload.to_vec()))),
            0x0a => self.controls.push((self.data.len(), Control::Pong)),
            0x08 => self.controls.push((self.data.len(), Control::Close)),
            _ => self.data.extend_from_slice(payload),
        }
    }
}

/// How a frame header spells the payload length.
#[derive(Clone, Copy)]
enum Form {
    /// The shortest form (the only one RFC 6455 allows a sender).
    Minimal,
    /// 7 bits.
    Short,
    /// 126 then 16 bits.
    U16,
    /// 127 then 64 bits.
    U64,
    /// 127 then this 64-bit value, whatever the payload.
    Exact(u64),
}

/// Apply 0..3 input-chosen mutations; whether any changed the stream.
fn mutate(input: &mut Cursor, stream: &mut Vec<u8>) -> bool {
    let before = stream.clone();
    for _ in 0..input.u8() % 4 {
        match input.u8() % 3 {
            0 => {
                let pos = input.u32() as usize;
                let bit = 1u8 << (input.u8() % 8);
                if !stream.is_empty() {
                    let n = stream.len();
                    stream[pos % n] ^= bit;
                }
            }
            1 => {
                let cut = input.u32() as usize;
                if !stream.is_empty() {
                    let n = stream.len();
                    stream.truncate(cut % n);
                }
            }
            _ => {
                let n = 1 + usize::from(input.u8() % 32);
                let extra = input.bytes(n);
                stream.extend_from_slice(extra);
            }
        }
    }
    *stream != before
}
