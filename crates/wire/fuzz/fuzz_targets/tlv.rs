//! TLV streams, BigSize and feature fields: the pieces under `init` and any future TLV
//! extension.
//!
//! Input: `mode || body`, mode % 4:
//! * 0, stream: the body is a TLV stream, read with `TlvStream`.
//! * 1, BigSize: the body is decoded with `bigsize::decode`; its first 8 bytes (as a
//!   little-endian u64, shifted right by the low 6 bits of the 9th) are also encoded.
//! * 2, writer: `buffer size (u16) || count || count × (type step || value length)`,
//!   records written with `TlvWriter::write` or `write_header` then the value.
//! * 3, features: `split || field bytes || bits`: the body's first `split` bytes are
//!   `globalfeatures`, the rest `features`; then bits for `write_bits` (u16 each, % 600).
//!
//! Checks:
//! * stream: the records yielded are exactly `ref_tlv`'s (type and value, the value a slice
//!   of the input), then its error if any, then `None` for ever; `validate_all_unknown`
//!   fails on the first even record, else on the stream's error; the records written back
//!   with `TlvWriter` are the input's bytes up to the last record (minimal BigSizes are the
//!   only ones accepted, so the encoding is canonical); `encoded_len` and `record_len`
//!   give each record's size.
//! * BigSize: `decode` equals `ref_bigsize` (value and length, or `Truncated { needed,
//!   available }` / `NonMinimal`); a decoded value encodes back to the same bytes;
//!   `encode` of any value equals the minimal form, `encoded_len` its length, decodes back,
//!   and a buffer too small is refused with nothing written.
//! * writer: each write is `TlvNotStrictlyIncreasing { prev, ty }` when the type does not
//!   follow the last written one, else `BufferTooSmall { needed, available }` when the
//!   record does not fit (and then nothing is written, and it does not count for order),
//!   else `Ok`; `TlvStream` reads back exactly the records accepted.
//! * features: `iter`, `is_set`, `is_empty`, the combined field and
//!   `first_unknown_required` agree with `ref_bits`; `write_bits` writes a minimal field
//!   whose bits are exactly those asked, or refuses a buffer too small.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lightwire_wire::features::{bits_len, is_known};
use lightwire_wire::tlv::record_len;
use lightwire_wire::{
    BigSizeError, CombinedFeatures, EncodeError, Features, TlvError, TlvRecord, TlvStream,
    TlvWriter, Writer, bigsize,
};
use lightwire_wire_fuzz::{
    Cursor, ref_bigsize, ref_bigsize_encode, ref_bits, ref_first_unknown_required, ref_tlv, within,
};

fuzz_target!(|data: &[u8]| {
    let mut input = Cursor::new(data);
    match input.u8() % 4 {
        0 => stream(input.rest()),
        1 => big_size(input.rest()),
        2 => writer(&mut input),
        _ => features(&mut input),
    }
});

fn stream(bytes: &[u8]) {
    let (records, error) = ref_tlv(bytes);
    let mut it = TlvStream::new(bytes);
    for want in &records {
        let got = it.next().expect("a record").expect("a valid record");
        assert_eq!(got.ty, want.ty);
        assert!(within(bytes, got.value), "value not a slice of the stream");
        assert_eq!(got.value, &bytes[want.value.clone()]);
        assert_eq!(got.encoded_len(), want.record.len());
        assert_eq!(record_len(got.ty, got.value.len()), want.record.len());
        assert_eq!(got.skip_unknown().is_ok(), got.ty % 2 == 1);
    }
    if let Some(e) = error {
        assert_eq!(it.next(), Some(Err(e)));
        assert!(!e.to_string().is_empty());
    }
    assert_eq!(it.next(), None);
    assert_eq!(it.next(), None, "fused");

    let want = match records.iter().find(|r| r.ty % 2 == 0) {
        Some(r) => Err(TlvError::UnknownEvenType { ty: r.ty }),
        None => error.map_or(Ok(()), Err),
    };
    assert_eq!(TlvStream::new(bytes).validate_all_unknown(), want);

    let end = records.last().map_or(0, |r| r.record.end);
    let mut out = vec![0u8; end];
    let mut w = Writer::new(&mut out);
    let mut tlv = TlvWriter::new(&mut w);
    for r in &records {
        tlv.write(r.ty, &bytes[r.value.clone()])
            .expect("fits and in order");
    }
    assert_eq!(w.written(), end);
    assert_eq!(&out[..], &bytes[..end], "records written back");
}

fn big_size(bytes: &[u8]) {
    let got = bigsize::decode(bytes);
    assert_eq!(got, ref_bigsize(bytes), "decode of {bytes:02x?}");
    if let Ok((v, n)) = got {
        let mut out = [0u8; 9];
        assert_eq!(bigsize::encode(v, &mut out), Ok(n));
        assert_eq!(&out[..n], &bytes[..n]);
    }
    if let Err(e) = got {
        assert!(!e.to_string().is_empty());
        if let BigSizeError::Truncated { needed, available } = e {
            assert!(available < needed && available == bytes.len());
        }
    }
    // Encode a value from the input (shifted, so that every size class is common).
    let mut raw = [0u8; 8];
    for (r, b) in raw.iter_mut().zip(bytes) {
        *r = *b;
    }
    let shift = bytes.get(8).map_or(0, |b| b % 64);
    let v = u64::from_le_bytes(raw) >> shift;
    let want = ref_bigsize_encode(v);
    assert_eq!(bigsize::encoded_len(v), want.len());
    let mut out = [0xeeu8; 9];
    assert_eq!(bigsize::encode(v, &mut out), Ok(want.len()));
    assert_eq!(&out[..want.len()], &want[..]);
    assert_eq!(bigsize::decode(&out), Ok((v, want.len())));
    let mut short = vec![0xeeu8; want.len() - 1];
    assert_eq!(
        bigsize::encode(v, &mut short),
        Err(EncodeError::BufferTooSmall {
            needed: want.len(),
            available: want.len() - 1
        })
    );
    assert!(short.iter().all(|&b| b == 0xee), "nothing written");
}

fn writer(input: &mut Cursor) {
    let size = usize::from(input.u16() % 2048);
    let mut out = vec![0u8; size];
    let mut accepted: Vec<(u64, Vec<u8>)> = Vec::new();
    {
        let mut w = Writer::new(&mut out);
        let mut tlv = TlvWriter::new(&mut w);
        let mut ty: u64 = 0;
        let mut prev: Option<u64> = None;
        let mut written = 0usize;
        for i in 0..input.u8() % 16 {
            // Mostly increasing types, of every BigSize size; sometimes a repeat or a step
            // back.
            let step = input.u8();
            ty = match step % 8 {
                0 => ty,
                1 => ty.saturating_sub(u64::from(input.u8())),
                2 => ty.wrapping_add(u64::from(input.u16()) << 16),
                3 => ty.wrapping_add(u64::from(input.u32()) << 24),
                4 => input.u64(),
                _ => ty.wrapping_add(1 + u64::from(step >> 3)),
            };
            let len = match input.u8() % 4 {
                0 => 0,
                1 => usize::from(input.u8()),
                _ => usize::from(input.u8() % 8),
            };
            let value: Vec<u8> = (0..len).map(|j| i ^ j as u8).collect();
            let rec = record_len(ty, len);
            let want = match prev {
                Some(p) if ty <= p => Err(EncodeError::TlvNotStrictlyIncreasing { prev: p, ty }),
                _ if written + rec > size => Err(EncodeError::BufferTooSmall {
                    needed: written + rec,
                    available: size,
                }),
                _ => Ok(()),
            };
            let got = if step & 0x80 == 0 {
                tlv.write(ty, &value)
            } else {
                tlv.write_header(ty, len)
                    .and_then(|()| tlv.writer().write_bytes(&value))
            };
            assert_eq!(
                got, want,
                "record {i}: type {ty}, {len} bytes, {written} written"
            );
            assert_eq!(
                tlv.writer().written(),
                written + if got.is_ok() { rec } else { 0 }
            );
            if got.is_ok() {
                written += rec;
                prev = Some(ty);
                accepted.push((ty, value));
            }
        }
    }
    let end: usize = accepted.iter().map(|(t, v)| record_len(*t, v.len())).sum();
    let read: Vec<TlvRecord<'_>> = TlvStream::new(&out[..end])
        .collect::<Result<_, _>>()
        .expect("what the writer wrote reads back");
    assert_eq!(read.len(), accepted.len());
    for (r, (t, v)) in read.iter().zip(&accepted) {
        assert_eq!((r.ty, r.value), (*t, &v[..]));
    }
}

fn features(input: &mut Cursor) {
    let split = usize::from(input.u8() % 16);
    let len = usize::from(input.u8() % 48);
    let field = input.bytes(len);
    let (g, f) = field.split_at(split.min(field.len()));
    let (gf, ff) = (Features::new(g), Features::new(f));
    let bits = ref_bits(f, &[]);
    assert_eq!(ff.iter().collect::<Vec<_>>(), bits);
    assert_eq!(ff.is_empty(), bits.is_empty());
    for bit in 0..f.len() * 8 + 9 {
        assert_eq!(ff.is_set(bit), bits.contains(&bit), "bit {bit}");
    }
    assert!(!ff.is_set(usize::MAX));
    let both = ref_bits(g, f);
    let combined = CombinedFeatures {
        global: gf,
        local: ff,
    };
    assert_eq!(combined.iter().collect::<Vec<_>>(), both);
    let known: Vec<usize> = (0..input.u8() % 8)
        .map(|_| usize::from(input.u8()))
        .collect();
    for bit in 0..64 {
        assert_eq!(
            is_known(bit, &known),
            known.iter().any(|k| k / 2 == bit / 2)
        );
    }
    assert_eq!(
        combined.first_unknown_required(&known),
        ref_first_unknown_required(&both, &known)
    );
    assert_eq!(
        ff.first_unknown_required(&known),
        ref_first_unknown_required(&bits, &known)
    );

    let asked: Vec<usize> = (0..input.u8() % 12)
        .map(|_| usize::from(input.u16() % 600))
        .collect();
    let need = asked.iter().max().map_or(0, |&b| b / 8 + 1);
    assert_eq!(bits_len(&asked), need);
    let size = match input.u8() % 3 {
        0 => need,
        1 => need + 3,
        _ => need.saturating_sub(1),
    };
    let mut buf = vec![0xffu8; size];
    match Features::write_bits(&asked, &mut buf) {
        Ok(written) => {
            assert!(size >= need);
            assert_eq!(written.as_bytes().len(), need);
            let mut want = asked.clone();
            want.sort_unstable();
            want.dedup();
            assert_eq!(written.iter().collect::<Vec<_>>(), want);
        }
        Err(e) => {
            assert!(size < need);
            assert_eq!(
                e,
                EncodeError::BufferTooSmall {
                    needed: need,
                    available: size
                }
            );
        }
    }
}
