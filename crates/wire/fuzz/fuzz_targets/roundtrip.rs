//! Messages built here from the input are encoded with `Message::encode` into a buffer of
//! an input-chosen size, then decoded.
//!
//! Input: `variant || fields || buffer selector [|| size]`, variant % 10:
//! 0 `init` (`globalfeatures`, `features`, optional `networks` and `remote_addr`),
//! 1 `error`, 2 `warning`, 3 `ping`, 4 `pong`, 5 `get_headers`, 6 `headers`, 7 `tip`,
//! 8 an unknown odd type, 9 the zeroed `ping`/`pong` encoders and `Headers::encode_in_place`.
//! Variable-length fields take a length selector (short, or long enough to pass 65,535
//! bytes in all) and a fill byte; `get_headers` and `headers` may hold a ragged or
//! over-limit list. Buffer selector % 4: exactly the message, larger, smaller, any u16.
//!
//! Checks: the result is exactly the predicted one, in the order the encoder checks:
//! `MessageTooLong { len, max: 65535 }` when type and payload pass 65,535 bytes, then
//! `BufferTooSmall { needed, available }`, then `FieldTooLong` for a locator or header list
//! that is not whole entries or over its limit, else `Ok(n)` where `n` is the length
//! computed here from the fields, which `encoded_len()` also gives; the bytes are exactly
//! those of `encode_ref` (the layouts, written here); they decode to the same message. The
//! zeroed encoders and `encode_in_place` (with the headers copied in afterwards) give the
//! same bytes as `encode` of the equivalent message, or the same refusal (over 819
//! headers, `encode_in_place` says `FieldTooLong` where `encode` says `MessageTooLong`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use lightwire_wire::sync::{HEADER_LEN, MAX_HEADERS_PER_MESSAGE, MAX_LOCATOR};
use lightwire_wire::{
    EncodeError, ErrorMessage, Features, GetHeaders, Headers, Init, MAX_MESSAGE_LEN, Message,
    Networks, Ping, Pong, Tip, Warning, msg_type,
};
use lightwire_wire_fuzz::{Cursor, ref_bigsize_encode};

fuzz_target!(|data: &[u8]| {
    let mut input = Cursor::new(data);
    let variant = input.u8() % 10;
    // Owned field bytes first, so that the message can borrow them.
    let a = field(&mut input);
    let b = field(&mut input);
    let c = field(&mut input);
    let mut fixed = [0u8; 32 + HEADER_LEN + 32];
    for x in fixed.iter_mut() {
        *x = input.u8();
    }
    let (n1, n2) = (input.u32(), input.u32());
    let flags = input.u8();
    let chain_fill = input.u8();
    let chains: Vec<[u8; 32]> = (0..flags % 4).map(|i| [chain_fill ^ i; 32]).collect();
    let id32: [u8; 32] = fixed[..32].try_into().expect("32");
    let header: &[u8; HEADER_LEN] = fixed[32..32 + HEADER_LEN].try_into().expect("80");
    let work: &[u8; 32] = fixed[32 + HEADER_LEN..].try_into().expect("32");

    if variant == 9 {
        zeroed(n1, &a, &mut input);
        return;
    }
    let m = match variant {
        0 => Message::Init(Init {
            global_features: Features::new(&a),
            features: Features::new(&b),
            networks: (flags & 4 != 0).then(|| Networks::from_chains(&chains)),
            remote_addr: (flags & 8 != 0).then_some(&c[..]),
        }),
        1 => Message::Error(ErrorMessage {
            channel_id: id32,
            data: &a,
        }),
        2 => Message::Warning(Warning {
            channel_id: id32,
            data: &a,
        }),
        3 => Message::Ping(Ping {
            num_pong_bytes: n1 as u16,
            ignored: &a,
        }),
        4 => Message::Pong(Pong { ignored: &a }),
        5 => Message::GetHeaders(GetHeaders {
            id: n1,
            max_count: n2,
            stop_hash: id32,
            locator: &a,
        }),
        6 => Message::Headers(Headers {
            id: n1,
            first_height: n2,
            last: flags & 1 != 0,
            headers: &a,
        }),
        7 => Message::Tip(Tip {
            height: n1,
            header,
            chainwork: work,
        }),
        _ => {
            // An odd type this crate does not know.
            let mut ty = (n1 as u16) | 1;
            if [
                msg_type::WARNING,
                msg_type::GET_HEADERS,
                msg_type::HEADERS,
                msg_type::TIP,
                msg_type::HEADERS_COMPACT,
            ]
            .contains(&ty)
                || ty == 17
                || ty == 19
            {
                ty = 40001;
            }
            Message::Unknown { ty, payload: &a }
        }
    };

    let want_bytes = encode_ref(&m);
    let n = want_bytes.len();
    assert_eq!(m.encoded_len(), n, "encoded_len of {m:?}");
    let size = buffer_size(&mut input, n);
    let mut out = vec![0x5au8; size];
    let got = m.encode(&mut out);
    let want = if n > MAX_MESSAGE_LEN {
        Err(EncodeError::MessageTooLong {
            len: n,
            max: MAX_MESSAGE_LEN,
        })
    } else if size < n {
        Err(EncodeError::BufferTooSmall {
            needed: n,
            available: size,
        })
    } else if let Some(e) = field_error(&m) {
        Err(e)
    } else {
        Ok(n)
    };
    assert_eq!(got, want, "encode of {m:?} into {size} bytes");
    if got.is_ok() {
        assert_eq!(&out[..n], &want_bytes[..], "bytes of {m:?}");
        assert_eq!(Message::decode(&out[..n]), Ok(m), "decode of the encoding");
    }
});

/// A variable-length field: selector % 4: 0..=63 bytes, 0..=1023, 0..=70000 (so that a
/// message can pass 65,535 bytes), or a whole number of 32- or 80-byte entries around
/// the locator and header limits; filled with a pattern from a fill byte.
fn field(input: &mut Cursor) -> Vec<u8> {
    let len = match input.u8() % 5 {
        0 => usize::from(input.u8() % 64),
        1 => usize::from(input.u16() % 1024),
        2 => usize::from(input.u16()) + usize::from(input.u8() % 8) * 600,
        3 => 32 * (MAX_LOCATOR - 3 + usize::from(input.u8() % 6)) + usize::from(input.u8() % 2),
        _ => HEADER_LEN * (MAX_HEADERS_PER_MESSAGE - 2 + usize::from(input.u8() % 4)),
    };
    let fill = input.u8();
    (0..len)
        .map(|i| fill ^ (i as u8) ^ ((i >> 8) as u8))
        .collect()
}

fn buffer_size(input: &mut Cursor, n: usize) -> usize {
    match input.u8() % 4 {
        0 => n,
        1 => n + 1 + usize::from(input.u8()),
        2 => n.saturating_sub(1 + usize::from(input.u8())),
        _ => usize::from(input.u16()),
    }
}

/// The field rule `write_payload` enforces, if broken.
fn field_error(m: &Message<'_>) -> Option<EncodeError> {
    match m {
        Message::GetHeaders(g)
            if g.locator.len() % 32 != 0 || g.locator.len() / 32 > MAX_LOCATOR =>
        {
            Some(EncodeError::FieldTooLong {
                field: "locator",
                len: g.locator.len(),
                max: MAX_LOCATOR * 32,
            })
        }
        Message::Headers(h)
            if h.headers.len() % HEADER_LEN != 0
                || h.headers.len() / HEADER_LEN > MAX_HEADERS_PER_MESSAGE =>
        {
            Some(EncodeError::FieldTooLong {
                field: "headers",
                len: h.headers.len(),
                max: MAX_HEADERS_PER_MESSAGE * HEADER_LEN,
            })
        }
        _ => None,
    }
}

/// The message's bytes, from the layouts (BOLT 1, docs/PROTOCOL.md); list counts are
/// written as whole entries (what the decoder reads back).
fn encode_ref(m: &Message<'_>) -> Vec<u8> {
    let mut o = Vec::new();
    o.extend_from_slice(&m.ty().to_be_bytes());
    let prefixed = |o: &mut Vec<u8>, b: &[u8]| {
        o.extend_from_slice(&(b.len() as u16).to_be_bytes());
        o.extend_from_slice(b);
    };
    let record = |o: &mut Vec<u8>, ty: u64, v: &[u8]| {
        o.extend(ref_bigsize_encode(ty));
        o.extend(ref_bigsize_encode(v.len() as u64));
        o.extend_from_slice(v);
    };
    match *m {
        Message::Init(i) => {
            prefixed(&mut o, i.global_features.as_bytes());
            prefixed(&mut o, i.features.as_bytes());
            if let Some(n) = i.networks {
                record(&mut o, 1, n.as_bytes());
            }
            if let Some(a) = i.remote_addr {
                record(&mut o, 3, a);
            }
        }
        Message::Error(ErrorMessage { channel_id, data })
        | Message::Warning(Warning { channel_id, data }) => {
            o.extend_from_slice(&channel_id);
            prefixed(&mut o, data);
        }
        Message::Ping(p) => {
            o.extend_from_slice(&p.num_pong_bytes.to_be_bytes());
            prefixed(&mut o, p.ignored);
        }
        Message::Pong(p) => prefixed(&mut o, p.ignored),
        Message::GetHeaders(g) => {
            o.extend_from_slice(&g.id.to_be_bytes());
            o.extend_from_slice(&g.max_count.to_be_bytes());
            o.extend_from_slice(&g.stop_hash);
            o.extend_from_slice(&((g.locator.len() / 32) as u16).to_be_bytes());
            o.extend_from_slice(g.locator);
        }
        Message::Headers(h) => {
            o.extend_from_slice(&h.id.to_be_bytes());
            o.extend_from_slice(&h.first_height.to_be_bytes());
            o.push(u8::from(h.last));
            o.extend_from_slice(&((h.headers.len() / HEADER_LEN) as u16).to_be_bytes());
            o.extend_from_slice(h.headers);
        }
        Message::Tip(t) => {
            o.extend_from_slice(&t.height.to_be_bytes());
            o.extend_from_slice(t.header);
            o.extend_from_slice(t.chainwork);
        }
        // Not built from the input here (the message target decodes and codes it).
        Message::HeadersCompact(h) => {
            o.extend_from_slice(&h.id.to_be_bytes());
            o.extend_from_slice(&h.first_height.to_be_bytes());
            o.push(u8::from(h.last));
            o.extend_from_slice(&h.count.to_be_bytes());
            o.push((h.anchors.len() / 32) as u8);
            o.extend_from_slice(h.anchors);
            o.extend_from_slice(h.body);
        }
        Message::Unknown { payload, .. } => o.extend_from_slice(payload),
    }
    o
}

/// `Ping::encode_zeroed`, `Pong::encode_zeroed` and `Headers::encode_in_place` against
/// `encode` of the same message with the bytes filled in.
fn zeroed(n: u32, headers: &[u8], input: &mut Cursor) {
    let (num, len) = (n as u16, (n >> 16) as u16);
    let zeros = vec![0u8; usize::from(len)];
    let size = usize::from(input.u16()) + usize::from(input.u8() % 2) * 65536;
    let mut a = vec![0x11u8; size];
    let mut b = vec![0x22u8; size];
    let got = Ping::encode_zeroed(num, len, &mut a);
    let want = Message::Ping(Ping {
        num_pong_bytes: num,
        ignored: &zeros,
    })
    .encode(&mut b);
    assert_eq!(got, want, "zeroed ping");
    if let Ok(k) = got {
        assert_eq!(a[..k], b[..k]);
    }
    let got = Pong::encode_zeroed(len, &mut a);
    let want = Message::Pong(Pong { ignored: &zeros }).encode(&mut b);
    assert_eq!(got, want, "zeroed pong");
    if let Ok(k) = got {
        assert_eq!(a[..k], b[..k]);
    }
    let whole = &headers[..headers.len() - headers.len() % HEADER_LEN];
    let count = whole.len() / HEADER_LEN;
    let h = Headers {
        id: n,
        first_height: !n,
        last: n & 1 == 0,
        headers: whole,
    };
    let got = h.encode_in_place(count, &mut a);
    let want = h.encode(&mut b);
    match (got, want) {
        (Ok((start, end)), Ok(k)) => {
            assert_eq!(end, k);
            assert_eq!(end - start, whole.len());
            assert!(
                a[start..end].iter().all(|&x| x == 0),
                "in-place body is zeroed"
            );
            a[start..end].copy_from_slice(whole);
            assert_eq!(a[..end], b[..k]);
        }
        // Over the header limit, encode_in_place says so before it sizes the message,
        // where encode finds the message too long; otherwise they refuse alike.
        (Err(e), Err(_)) if count > MAX_HEADERS_PER_MESSAGE => assert_eq!(
            e,
            EncodeError::FieldTooLong {
                field: "headers",
                len: whole.len(),
                max: MAX_HEADERS_PER_MESSAGE * HEADER_LEN
            }
        ),
        (Err(e), Err(f)) => assert_eq!(e, f, "encode_in_place refuses as encode does"),
        (got, want) => panic!("encode_in_place {got:?}, encode {want:?}"),
    }
}
