//! `Message::decode` on arbitrary bytes: a whole message (type, then payload), as it comes
//! out of a decrypted transport frame.
//!
//! Input: the message bytes, as they are.
//!
//! Checks:
//! * The result is exactly what `reference` says: a decoder written here from the message
//!   layouts (BOLT 1 and docs/PROTOCOL.md), with the same field names in `Truncated`
//!   (`needed` = the field's size, `available` = the bytes left), `UnknownEvenType` for an
//!   even type nobody knows, and for `init` the first broken TLV rule (`ref_tlv`, then a
//!   `networks` record that is not whole chain hashes, then an unknown even record), in
//!   stream order. Every borrowed field is a slice of the input at the offsets the
//!   reference gives (so no length read ever reaches past the input).
//! * Round trip (messages of at most 65,535 bytes, as a frame carries): encoding the
//!   decoded value gives its canonical bytes (the input up to the fields' end: trailing
//!   bytes are dropped; for `init`, the input without its unknown odd TLV records), of
//!   `encoded_len()` bytes, the per-type `encode` agrees, and they decode to the same
//!   value (a `headers` message's flags other than bit 0, `last`, are not kept). Every
//!   shorter buffer is refused with `BufferTooSmall { needed, available }`.
//!   A `get_headers` with more than 101 locator hashes decodes (the session refuses it)
//!   but is not encoded: `FieldTooLong`.
//! * Helpers agree with references: feature bits and the first unknown required bit
//!   (`ref_bits`), `pong_len`/`encode_pong` (a zeroed pong of `num_pong_bytes` below
//!   65532, else nothing), `data_utf8` (printable ASCII only), `networks()`,
//!   `accepts_chain`/`require_chain`, `Headers::count`/`iter`, `locator_hashes`.
//! * `headers_compact`: its expansion fails with a typed error, or holds each segment's
//!   anchor and codes back (shortest forms) to the same headers.
//! * Every error's `Display` is non-empty.
#![no_main]

use core::ops::Range;

use libfuzzer_sys::fuzz_target;
use lightwire_wire::sync::{HEADER_LEN, MAX_LOCATOR};
use lightwire_wire::compact::{MAX_CODED_LEN, segment_start};
use lightwire_wire::{
    CompactError, DecodeError, EncodeError, HeadersCompact, InitRefusal,
    MAX_COMPACT_HEADERS_PER_MESSAGE, MAX_MESSAGE_LEN, Message, NO_PONG_THRESHOLD, Pong, TlvError,
    msg_type,
};
use lightwire_wire_fuzz::{ref_bits, ref_first_unknown_required, ref_tlv, within};

fuzz_target!(|data: &[u8]| {
    let got = Message::decode(data);
    let want = reference(data);
    assert_eq!(got.map(|m| as_ref(&m, data)), want, "decode of {data:02x?}");
    match got {
        Err(e) => assert!(!e.to_string().is_empty()),
        Ok(m) => {
            helpers(&m);
            if data.len() <= MAX_MESSAGE_LEN {
                let mut canonical = match want {
                    Ok(Ref::Init { .. }) => init_canonical(data),
                    _ => data[..m.encoded_len().min(data.len())].to_vec(),
                };
                if let Ok(Ref::Headers(..) | Ref::HeadersCompact(..)) = want {
                    // `flags` has one bit so far (`last`); the others are not kept.
                    canonical[10] &= 1;
                }
                round_trip(&m, &canonical);
            }
        }
    }
});

/// A decoded message: borrowed fields as offsets into the input (empty ones as `0..0`,
/// wherever they point), copied fields by value.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ref {
    Init {
        global: Range<usize>,
        local: Range<usize>,
        networks: Option<Range<usize>>,
        remote_addr: Option<Range<usize>>,
        mirrors: Option<Range<usize>>,
    },
    Error([u8; 32], Range<usize>),
    Warning([u8; 32], Range<usize>),
    Ping(u16, Range<usize>),
    Pong(Range<usize>),
    GetHeaders(u32, u32, [u8; 32], Range<usize>),
    Headers(u32, u32, bool, Range<usize>),
    Tip(u32, Range<usize>, Range<usize>),
    /// id, first_height, last, count, anchors, body.
    HeadersCompact(u32, u32, bool, u16, Range<usize>, Range<usize>),
    Unknown(u16, Range<usize>),
}

/// Offsets of `part` in `whole`; `part` must be a slice of it.
fn offsets(whole: &[u8], part: &[u8]) -> Range<usize> {
    assert!(
        within(whole, part),
        "a borrowed field is not a slice of the input"
    );
    if part.is_empty() {
        return 0..0;
    }
    let start = part.as_ptr() as usize - whole.as_ptr() as usize;
    start..start + part.len()
}

fn norm(r: Range<usize>) -> Range<usize> {
    if r.is_empty() { 0..0 } else { r }
}

fn as_ref(m: &Message<'_>, data: &[u8]) -> Ref {
    let o = |p: &[u8]| offsets(data, p);
    match *m {
        Message::Init(i) => Ref::Init {
            global: o(i.global_features.as_bytes()),
            local: o(i.features.as_bytes()),
            networks: i.networks.map(|n| o(n.as_bytes())),
            remote_addr: i.remote_addr.map(o),
            mirrors: i.mirrors.map(o),
        },
        Message::Error(e) => Ref::Error(e.channel_id, o(e.data)),
        Message::Warning(w) => Ref::Warning(w.channel_id, o(w.data)),
        Message::Ping(p) => Ref::Ping(p.num_pong_bytes, o(p.ignored)),
        Message::Pong(p) => Ref::Pong(o(p.ignored)),
        Message::GetHeaders(g) => Ref::GetHeaders(g.id, g.max_count, g.stop_hash, o(g.locator)),
        Message::Headers(h) => Ref::Headers(h.id, h.first_height, h.last, o(h.headers)),
        Message::Tip(t) => Ref::Tip(t.height, o(t.header), o(t.chainwork)),
        Message::HeadersCompact(h) => Ref::HeadersCompact(
            h.id,
            h.first_height,
            h.last,
            h.count,
            o(h.anchors),
            o(h.body),
        ),
        Message::Unknown { ty, payload } => Ref::Unknown(ty, o(payload)),
    }
}

/// Reads fields like the decoders must: a missing field is `Truncated` with its name, its
/// size, and the bytes that were left.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<Range<usize>, DecodeError> {
        let available = self.data.len() - self.at;
        if n > available {
            return Err(DecodeError::Truncated {
                field,
                needed: n,
                available,
            });
        }
        self.at += n;
        Ok(norm(self.at - n..self.at))
    }

    fn uint(&mut self, n: usize, field: &'static str) -> Result<u64, DecodeError> {
        let r = self.take(n, field)?;
        Ok(self.data[r]
            .iter()
            .fold(0u64, |v, &b| (v << 8) | u64::from(b)))
    }

    fn array(&mut self, field: &'static str) -> Result<[u8; 32], DecodeError> {
        let r = self.take(32, field)?;
        Ok(self.data[r].try_into().expect("32 bytes"))
    }

    fn prefixed(
        &mut self,
        len: &'static str,
        field: &'static str,
    ) -> Result<Range<usize>, DecodeError> {
        let n = self.uint(2, len)? as usize;
        self.take(n, field)
    }
}

/// The reference decoder.
fn reference(data: &[u8]) -> Result<Ref, DecodeError> {
    let mut r = Reader { data, at: 0 };
    let ty = r.uint(2, "type")? as u16;
    let m = match ty {
        16 => {
            let global = r.prefixed("gflen", "globalfeatures")?;
            let local = r.prefixed("flen", "features")?;
            let (networks, remote_addr, mirrors) = init_records(data, r.at)?;
            Ref::Init {
                global,
                local,
                networks,
                remote_addr,
                mirrors,
            }
        }
        17 | 1 => {
            let c = r.array("channel_id")?;
            let d = r.prefixed("len", "data")?;
            if ty == 17 {
                Ref::Error(c, d)
            } else {
                Ref::Warning(c, d)
            }
        }
        18 => {
            let n = r.uint(2, "num_pong_bytes")? as u16;
            Ref::Ping(n, r.prefixed("byteslen", "ignored")?)
        }
        19 => Ref::Pong(r.prefixed("byteslen", "ignored")?),
        32769 => {
            let id = r.uint(4, "id")? as u32;
            let max = r.uint(4, "max_count")? as u32;
            let stop = r.array("stop_hash")?;
            let n = r.uint(2, "num_locator")? as usize;
            Ref::GetHeaders(id, max, stop, r.take(n * 32, "locator")?)
        }
        32771 => {
            let id = r.uint(4, "id")? as u32;
            let first = r.uint(4, "first_height")? as u32;
            let flags = r.uint(1, "flags")?;
            let n = r.uint(2, "count")? as usize;
            Ref::Headers(id, first, flags & 1 == 1, r.take(n * 80, "headers")?)
        }
        32773 => {
            let h = r.uint(4, "height")? as u32;
            let header = r.take(80, "header")?;
            Ref::Tip(h, header, r.take(32, "chainwork")?)
        }
        32775 => {
            let id = r.uint(4, "id")? as u32;
            let first = r.uint(4, "first_height")? as u32;
            let flags = r.uint(1, "flags")?;
            let count = r.uint(2, "count")? as u16;
            let segments = r.uint(1, "segments")? as u8;
            let n = usize::from(count);
            if n > MAX_COMPACT_HEADERS_PER_MESSAGE {
                return Err(DecodeError::Compact(CompactError::TooMany { count }));
            }
            if segments > 4 || usize::from(segments) > n || (segments == 0) != (n == 0) {
                return Err(DecodeError::Compact(CompactError::Segments { segments, count }));
            }
            let anchors = r.take(usize::from(segments) * 32, "anchors")?;
            let body = norm(r.at..data.len());
            Ref::HeadersCompact(id, first, flags & 1 == 1, count, anchors, body)
        }
        t if t % 2 == 1 => Ref::Unknown(t, norm(2..data.len())),
        t => return Err(DecodeError::UnknownEvenType { ty: t }),
    };
    Ok(m)
}

/// The `init_tlvs` stream starting at `at`: the `networks` (type 1, whole chain hashes) and
/// `remote_addr` (type 3) values, or the first broken rule in stream order.
#[allow(clippy::type_complexity)]
/// `networks`, `remote_addr` and `bulk_mirrors` value ranges.
type InitRecords = (Option<Range<usize>>, Option<Range<usize>>, Option<Range<usize>>);

fn init_records(
    data: &[u8],
    at: usize,
) -> Result<InitRecords, DecodeError> {
    let tlv_err = |error| DecodeError::InvalidTlvStream {
        msg_type: 16,
        error,
    };
    let (records, error) = ref_tlv(&data[at..]);
    let (mut networks, mut remote_addr, mut mirrors) = (None, None, None);
    for rec in records {
        let value = norm(rec.value.start + at..rec.value.end + at);
        match rec.ty {
            1 if rec.value.len() % 32 != 0 => {
                return Err(tlv_err(TlvError::InvalidLength {
                    ty: 1,
                    len: rec.value.len(),
                    expected: "a multiple of 32",
                }));
            }
            1 => networks = Some(value),
            3 => remote_addr = Some(value),
            65_537 => mirrors = Some(value),
            t if t % 2 == 0 => return Err(tlv_err(TlvError::UnknownEvenType { ty: t })),
            _ => {}
        }
    }
    match error {
        Some(e) => Err(tlv_err(e)),
        None => Ok((networks, remote_addr, mirrors)),
    }
}

/// The canonical encoding of a valid `init`: its fields, then only its `networks`,
/// `remote_addr` and `bulk_mirrors` records (minimal BigSizes are the only ones accepted,
/// so those records are the input's own bytes).
fn init_canonical(data: &[u8]) -> Vec<u8> {
    let g = usize::from(u16::from_be_bytes([data[2], data[3]]));
    let f_at = 4 + g;
    let f = usize::from(u16::from_be_bytes([data[f_at], data[f_at + 1]]));
    let fields_end = f_at + 2 + f;
    let mut out = data[..fields_end].to_vec();
    let (records, _) = ref_tlv(&data[fields_end..]);
    for rec in records.iter().filter(|r| matches!(r.ty, 1 | 3 | 65_537)) {
        out.extend_from_slice(&data[fields_end + rec.record.start..fields_end + rec.record.end]);
    }
    out
}

/// Encode the decoded value: its canonical bytes, or `FieldTooLong` for a locator the
/// encoder refuses; the per-type encoder agrees; the bytes decode to the same value; every
/// shorter buffer is refused.
fn round_trip(m: &Message<'_>, canonical: &[u8]) {
    let n = m.encoded_len();
    let mut out = vec![0xa5u8; n + 8];
    if let Message::GetHeaders(g) = m
        && g.locator.len() / 32 > MAX_LOCATOR
    {
        assert_eq!(
            m.encode(&mut out),
            Err(EncodeError::FieldTooLong {
                field: "locator",
                len: g.locator.len(),
                max: MAX_LOCATOR * 32
            })
        );
        return;
    }
    assert_eq!(m.encode(&mut out), Ok(n), "encode {m:?}");
    assert_eq!(&out[..n], canonical, "canonical bytes of {m:?}");
    let mut own = vec![0u8; n];
    let k = match m {
        Message::Init(x) => x.encode(&mut own),
        Message::Error(x) => x.encode(&mut own),
        Message::Warning(x) => x.encode(&mut own),
        Message::Ping(x) => x.encode(&mut own),
        Message::Pong(x) => x.encode(&mut own),
        Message::GetHeaders(x) => x.encode(&mut own),
        Message::Headers(x) => x.encode(&mut own),
        Message::Tip(x) => x.encode(&mut own),
        Message::HeadersCompact(_) | Message::Unknown { .. } => m.encode(&mut own),
    };
    assert_eq!(k, Ok(n), "per-type encode of {m:?}");
    assert_eq!(&own[..], canonical, "per-type encoding");
    assert_eq!(Message::decode(&out[..n]), Ok(*m), "decode of the encoding");
    for size in [0, n / 2, n.saturating_sub(1)] {
        if size < n {
            let mut short = vec![0u8; size];
            assert_eq!(
                m.encode(&mut short),
                Err(EncodeError::BufferTooSmall {
                    needed: n,
                    available: size
                }),
                "encode into {size} bytes"
            );
        }
    }
}

/// `headers_compact`: expanding either fails with a typed error or gives `count` headers
/// whose segment starts carry the anchors; coding those again (shortest forms) and expanding
/// gives the same headers, previous-block hashes aside (the segments may differ).
fn compact(h: &HeadersCompact<'_>) {
    let n = usize::from(h.count);
    let mut expanded = vec![0xa5u8; n * HEADER_LEN];
    match h.expand(&mut expanded) {
        Err(e) => assert!(!e.to_string().is_empty()),
        Ok(()) => {
            let segments = h.segments();
            for i in 0..n {
                let prev = &expanded[i * HEADER_LEN + 4..i * HEADER_LEN + 36];
                match (0..segments).find(|k| segment_start(n, segments, *k) == i) {
                    Some(k) => assert_eq!(prev, &h.anchors[k * 32..k * 32 + 32]),
                    None => assert_eq!(prev, [0u8; 32]),
                }
            }
            let mut out = vec![0u8; MAX_MESSAGE_LEN];
            let header = |i: usize| -> Option<[u8; HEADER_LEN]> {
                expanded.get(i * HEADER_LEN..(i + 1) * HEADER_LEN)?.try_into().ok()
            };
            let (len, count) =
                HeadersCompact::encode_answer(&mut out, h.id, h.first_height, n, header)
                    .expect("codes");
            // Shortest forms take no more room, but the encoder stops while a longest header
            // might not fit, and may use more segments: only a nearly full message ends short.
            assert!(
                count == n || len + MAX_CODED_LEN + 3 * 32 > MAX_MESSAGE_LEN,
                "{count} of {n} headers coded in {len} bytes"
            );
            let Ok(Message::HeadersCompact(again)) = Message::decode(&out[..len]) else {
                panic!("the coding does not decode");
            };
            let want = (h.id, h.first_height, count == n);
            assert_eq!((again.id, again.first_height, again.last), want);
            let mut back = vec![0u8; count * HEADER_LEN];
            again.expand(&mut back).expect("the coding expands");
            for (a, b) in expanded.chunks_exact(HEADER_LEN).zip(back.chunks_exact(HEADER_LEN)) {
                assert_eq!((&a[..4], &a[36..]), (&b[..4], &b[36..]));
            }
        }
    }
}

/// The helpers on decoded messages, against references.
fn helpers(m: &Message<'_>) {
    match *m {
        Message::Init(i) => {
            let (g, f) = (i.global_features.as_bytes(), i.features.as_bytes());
            assert_eq!(i.features.iter().collect::<Vec<_>>(), ref_bits(f, &[]));
            let both = ref_bits(g, f);
            assert_eq!(i.combined_features().iter().collect::<Vec<_>>(), both);
            for &bit in both.iter().take(64) {
                assert!(i.combined_features().is_set(bit));
            }
            let unknown = ref_first_unknown_required(&both, &[]);
            assert_eq!(i.first_unknown_required_feature(&[]), unknown);
            let known: Vec<usize> = both.iter().copied().filter(|b| b % 4 == 0).collect();
            assert_eq!(
                i.first_unknown_required_feature(&known),
                ref_first_unknown_required(&both, &known)
            );
            let chains: Vec<&[u8; 32]> = i.networks().collect();
            let bytes = i.networks.map_or(&[][..], |n| n.as_bytes());
            assert_eq!(chains.len(), bytes.len() / 32);
            let other = [0x5au8; 32];
            let listed = chains.contains(&&other);
            assert_eq!(i.accepts_chain(&other), i.networks.is_none() || listed);
            let want = match (unknown, i.networks) {
                (Some(bit), _) => Err(InitRefusal::UnknownRequiredFeature(bit)),
                (None, None) => Err(InitRefusal::MissingNetworks),
                (None, Some(_)) if !listed => Err(InitRefusal::WrongNetwork),
                _ => Ok(()),
            };
            assert_eq!(i.require_chain(&other), want);
            if let Some(first) = chains.first() {
                assert!(i.accepts_chain(first));
            }
        }
        Message::Error(e) => printable(e.data, e.data_utf8()),
        Message::Warning(w) => printable(w.data, w.data_utf8()),
        Message::Ping(p) => {
            let mut out = vec![0xa5u8; MAX_MESSAGE_LEN];
            let reply = p.encode_pong(&mut out);
            if p.num_pong_bytes < NO_PONG_THRESHOLD {
                let len = usize::from(p.num_pong_bytes);
                assert_eq!(p.pong_len(), Some(p.num_pong_bytes));
                assert_eq!(reply, Ok(Some(4 + len)));
                let zeros = vec![0u8; len];
                assert_eq!(
                    Message::decode(&out[..4 + len]),
                    Ok(Message::Pong(Pong { ignored: &zeros }))
                );
            } else {
                assert_eq!(p.pong_len(), None);
                assert_eq!(reply, Ok(None));
            }
        }
        Message::GetHeaders(g) => {
            assert_eq!(g.locator.len() % 32, 0);
            let hashes: Vec<_> = g.locator_hashes().collect();
            assert_eq!(hashes.len(), g.locator.len() / 32);
            assert!(
                hashes
                    .iter()
                    .zip(g.locator.chunks(32))
                    .all(|(h, c)| &h[..] == c)
            );
        }
        Message::Headers(h) => {
            assert_eq!(h.headers.len() % HEADER_LEN, 0);
            assert_eq!(h.count(), h.headers.len() / HEADER_LEN);
            assert_eq!(h.iter().count(), h.count());
        }
        Message::HeadersCompact(h) => compact(&h),
        Message::Pong(_) | Message::Tip(_) => {}
        Message::Unknown { ty, .. } => {
            assert!(ty % 2 == 1, "unknown type {ty} is even");
            assert!(
                ![
                    msg_type::WARNING,
                    msg_type::INIT,
                    msg_type::ERROR,
                    msg_type::PING,
                    msg_type::PONG
                ]
                .contains(&ty)
                    && ![msg_type::GET_HEADERS, msg_type::HEADERS, msg_type::TIP].contains(&ty),
                "known type {ty} decoded as unknown"
            );
        }
    }
}

/// `data_utf8` is the text exactly when every byte is printable ASCII (32..=126).
fn printable(data: &[u8], text: Option<&str>) {
    if data.iter().all(|b| (32..=126).contains(b)) {
        assert_eq!(text.map(str::as_bytes), Some(data));
    } else {
        assert_eq!(text, None);
    }
}
