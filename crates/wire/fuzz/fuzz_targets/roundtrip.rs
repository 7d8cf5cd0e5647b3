//! Messages built here from the input are encoded with `Message::encode` into a buffer of
//! an input-chosen size, then decoded; and the encoders that write a message piece by piece
//! (`FilterHeaders::encode_answer`, `FiltersWriter`, `DigestWriter`, `BlockPiece::next`,
//! `Init::encode_mirrors`, the zeroed ping and pong, `Headers::encode_in_place`) and the
//! per-type encoders of the messages the filter and tweak chains share (`encode`,
//! `encode_as`) against the layouts.
//!
//! Input: `variant || fields || buffer selector [|| size]`, variant % 36:
//! 0 `init` (`globalfeatures`, `features`, optional `networks`, `remote_addr` and
//! `bulk_mirrors`, then a list of mirror URLs for `encode_mirrors`), 1 `error`, 2 `warning`,
//! 3 `ping`, 4 `pong`, 5 `get_headers`, 6 `headers`, 7 `tip`, 8 an unknown odd type,
//! 9 the zeroed `ping`/`pong` encoders and `Headers::encode_in_place`,
//! 10 `get_filter_headers`, 11 `filter_headers` (the segments a gateway uses, or others),
//! 12 `FilterHeaders::encode_answer`, 13 `get_filter_checkpoints`, 14 `filter_checkpoints`
//! (`first_height` a multiple of 1,000 or not), 15 `get_filters`, 16 `filters` (a list of
//! pieces, each valid or breaking one rule, a count one off or not, bytes after them or not),
//! 17 `FiltersWriter`, 18 `get_block`, 19 `block` (a piece anywhere, at the end, at the
//! 4,000,000-byte limit or the 32 MiB one, `not_found`, or any fields; then
//! `BlockPiece::next` over the data), 20 `send_tx`, 21 `tx_result` (any status code),
//! 22 `mempool_subscribe`, 23 `DigestWriter` (then `mempool_digest` through
//! `Message::encode`), 24 `get_mempool_tx`, 25 `mempool_tx`, 26 `get_fee_rates`,
//! 27 `fee_rates` (any source, rates or none, `u64::MAX`), 28 to 33 the
//! silent-payment tweak messages `get_tweak_headers`, `tweak_headers`,
//! `get_tweak_checkpoints`, `tweak_checkpoints`, `get_tweaks`, `tweaks`, built as 10, 11, 13,
//! 14, 15 and 16 are (the filter messages' layouts under types 32809 to 32819), 34 and 35
//! a tweak dispute's evidence, `get_spent_from` and `spent_from`, built as 18 and 19 are
//! (the block messages' layouts under types 32821 and 32823) but for the limit, 33,554,432
//! bytes (32 MiB): pieces up to and past it, and at and past 4,000,000 bytes, within it.
//! Variable-length fields take a length selector (short, long enough to pass 65,535 bytes
//! in all, near 65,535 itself, or whole or ragged lists around the 101-hash, 819-header,
//! 2,043-filter-hash and 2,047-checkpoint limits) and a fill byte. Buffer selector % 4:
//! exactly the message, larger, smaller, any u16.
//!
//! Checks: the result is exactly the predicted one, in the order the encoder checks:
//! `MessageTooLong { len, max: 65535 }` when type and payload pass 65,535 bytes, then
//! `BufferTooSmall { needed, available }`, then `FieldTooLong` for a list that is not whole
//! entries or over its limit (`locator`, `headers`, `filter_hashes`, `checkpoints`) or for
//! `filter_headers` anchors that are not the segments a gateway uses (4, or `count` when
//! fewer), else `Ok(n)` where `n` is the length computed here from the fields, which
//! `encoded_len()` also gives; the bytes are exactly those of `encode_ref` (the layouts,
//! written here); they decode to the same message, or, where the message built breaks a
//! rule the encoder leaves to the receiver, to the error the rules give (`filters`' pieces
//! in order: `FilterTooLong`, `PieceOutOfRange`, then `Truncated` for a count past the
//! pieces or `TrailingBytes`; `block` and `spent_from`: `NotFoundWithBlock`, `BlockTooLong`
//! over 4,000,000 and 33,554,432 bytes, `PieceOutOfRange`, `LastMisplaced`;
//! `CheckpointHeight`; `mempool_tx`'s `BadAnswer`), or to the value it reads as (a
//! `fee_rates` source `Other(0..=2)` as the named one, a rate of `u64::MAX` as none). The
//! piece-by-piece encoders: `encode_answer` gives each segment the filter header before its
//! first block as anchor, asks each entry once, refuses over 2,043 hashes; `FiltersWriter`
//! and `DigestWriter` take exactly what fits (as much of a filter as fits; a whole entry or
//! nothing), refuse a buffer below 24 and 40 bytes, and write the layout's bytes, which
//! decode to what was written; `BlockPiece::next` cuts 65,520-byte pieces with `last` on
//! the one reaching the end, which encode and decode back as `block` or `spent_from`;
//! `BlockKind::max_len` is each kind's limit; `encode_mirrors` writes u16-prefixed URLs or
//! `None` (too small a buffer, a URL over 65,535 bytes), read back by `mirror_urls`. Both
//! chains: `encode_answer` and `encode_answer_as` with either kind, `FiltersWriter::new`
//! and `new_as` with either kind (fed the same pieces), and for `get_filter_headers`,
//! `get_filter_checkpoints`, `filter_checkpoints`, `get_filters` and their tweak twins
//! `encode` and `encode_as` with either kind, each give the predicted result and the
//! layout's bytes under the kind's type, which decode to the kind's variant; the tweak
//! bytes differ from the basic ones in the 2-byte type alone. Every type is the layouts'
//! (`ref_ty`), not the crate's `ty()`, so a `spent_from` built is expected under its own
//! type and decoded to its own variant. The zeroed encoders and `encode_in_place` (with
//! the headers copied in afterwards) give the same bytes as `encode` of the equivalent
//! message, or the same refusal (over 819 headers, `encode_in_place` says `FieldTooLong`
//! where `encode` says `MessageTooLong`).
//!
//! One weaker oracle: `encode_ref` rebuilds a `mempool_digest`'s entries from the crate's
//! `entries()` (the coded entries are private), so on its own it would not see an entry the
//! iterator and the encoder both got wrong; the digests encoded here all come from
//! `DigestWriter`, whose bytes and whose decoded `entries()` are first compared with the
//! entries written from the input, so every byte is still checked against the layout.
#![no_main]

use core::ops::Range;

use libfuzzer_sys::fuzz_target;
use lightwire_wire::sync::{HEADER_LEN, MAX_HEADERS_PER_MESSAGE, MAX_LOCATOR};
use lightwire_wire::{
    AnswerFlags, BlockKind, BlockPiece, BlocksError, DecodeError, DigestEntry, DigestWriter,
    EncodeError, ErrorMessage, Features, FeeRates, FeeSource, FilterCheckpoints, FilterHeaders,
    FilterKind, FilterRange, Filters, FiltersError, FiltersWriter, GetBlock, GetFeeRates,
    GetFilterCheckpoints, GetFilterHeaders, GetFilters, GetHeaders, GetMempoolTx, Headers, Init,
    MAX_MESSAGE_LEN, MempoolError, MempoolSubscribe, MempoolTx, Message, Networks, Ping, Pong,
    RelayStatus, Removal, SendTx, Tip, TxResult, Warning,
};
use lightwire_wire_fuzz::{
    Cursor, FILTER_TYPES, KNOWN_TYPES, MAX_BLOCK_LEN, MAX_FILTER_HASHES, MAX_FILTER_LEN,
    MAX_SEGMENTS, MAX_SPENT_FROM_LEN, TWEAK_TYPES, ref_bigsize_encode, ref_block_limit,
    ref_relay_code, ref_removal_code,
};

// Limits as docs/PROTOCOL.md states them (not the crate's constants, which they check).
/// `filter_checkpoints`: `count` 0 to 2,047.
const MAX_CHECKPOINTS: usize = 2047;
/// `block`: pieces of up to 65,520 bytes.
const MAX_BLOCK_PIECE: usize = 65_520;
/// `filters`: a piece's fields before its data (height, filter_len, offset, piece_len).
const PIECE_FIXED: usize = 14;
const VARIANTS: u8 = 36;
/// The tweak variants: from 28 on, each builds the tweak twin of what the variant at the
/// same place in the list builds (`get_filter_headers` ... `filters`).
const TWEAK_VARIANTS: (u8, [u8; 6]) = (28, [10, 11, 13, 14, 15, 16]);
/// The dispute's evidence: from 34 on, `get_spent_from` and `spent_from`, built as the
/// variant at the same place in the list builds its block message (`get_block`, `block`),
/// with the `spent_from` limit.
const SPENT_FROM_VARIANTS: (u8, [u8; 2]) = (34, [18, 19]);

fuzz_target!(|data: &[u8]| {
    let mut input = Cursor::new(data);
    let selector = input.u8() % VARIANTS;
    let (variant, kind, blocks) = if let Some(i) = selector.checked_sub(SPENT_FROM_VARIANTS.0) {
        let variant = SPENT_FROM_VARIANTS.1[usize::from(i)];
        (variant, FilterKind::Basic, BlockKind::SpentFrom)
    } else if let Some(i) = selector.checked_sub(TWEAK_VARIANTS.0) {
        let variant = TWEAK_VARIANTS.1[usize::from(i)];
        (variant, FilterKind::Tweaks, BlockKind::Block)
    } else {
        (selector, FilterKind::Basic, BlockKind::Block)
    };
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
    let answer = AnswerFlags {
        last: flags & 1 != 0,
        stop_unknown: flags & 2 != 0,
    };
    let range = FilterRange {
        id: n1,
        start_height: n2,
        stop_hash: id32,
    };
    // `bulk_mirrors` (init only: a fourth field costs every other variant time).
    let d = if variant == 0 {
        field(&mut input)
    } else {
        Vec::new()
    };
    let mut body = Vec::new();

    match variant {
        9 => return zeroed(n1, &a, &mut input),
        12 => return filter_answer(n1, n2, answer, &fixed, &mut input),
        17 => return filters_writer(n1, answer, &mut input),
        23 => return digest_writer(flags, &mut input),
        _ => {}
    }
    let (m, back) = match variant {
        0 => ok(Message::Init(Init {
            global_features: Features::new(&a),
            features: Features::new(&b),
            networks: (flags & 4 != 0).then(|| Networks::from_chains(&chains)),
            remote_addr: (flags & 8 != 0).then_some(&c[..]),
            mirrors: (flags & 16 != 0).then_some(&d[..]),
        })),
        1 => ok(Message::Error(ErrorMessage {
            channel_id: id32,
            data: &a,
        })),
        2 => ok(Message::Warning(Warning {
            channel_id: id32,
            data: &a,
        })),
        3 => ok(Message::Ping(Ping {
            num_pong_bytes: n1 as u16,
            ignored: &a,
        })),
        4 => ok(Message::Pong(Pong { ignored: &a })),
        5 => ok(Message::GetHeaders(GetHeaders {
            id: n1,
            max_count: n2,
            stop_hash: id32,
            locator: &a,
        })),
        6 => ok(Message::Headers(Headers {
            id: n1,
            first_height: n2,
            last: flags & 1 != 0,
            headers: &a,
        })),
        7 => ok(Message::Tip(Tip {
            height: n1,
            header,
            chainwork: work,
        })),
        8 => {
            // An odd type this crate does not know.
            let mut ty = (n1 as u16) | 1;
            if KNOWN_TYPES.contains(&ty) {
                ty = 40001;
            }
            ok(Message::Unknown { ty, payload: &a })
        }
        10 => ok(Message::GetFilterHeaders(GetFilterHeaders(range))),
        11 => {
            // Mostly the segments a gateway uses; else 0 to 4 of them, whatever the count.
            let count = a.len() / 32;
            let segments = match flags >> 4 {
                s @ 12.. => usize::from(s - 12) + usize::from(n2 & 1 == 1),
                _ => count.min(MAX_SEGMENTS),
            };
            ok(Message::FilterHeaders(FilterHeaders {
                id: n1,
                first_height: n2,
                flags: answer,
                anchors: &fixed[..segments * 32],
                hashes: &a,
            }))
        }
        13 => ok(Message::GetFilterCheckpoints(GetFilterCheckpoints {
            id: n1,
            stop_hash: id32,
        })),
        14 => {
            let first_height = if flags & 16 != 0 { n2 - n2 % 1000 } else { n2 };
            let m = Message::FilterCheckpoints(FilterCheckpoints {
                id: n1,
                first_height,
                flags: answer,
                headers: &a,
            });
            // "a multiple of 1,000 (else the message does not decode)".
            let back = if first_height % 1000 == 0 {
                Ok(m)
            } else {
                Err(DecodeError::Filters(FiltersError::CheckpointHeight {
                    height: first_height,
                }))
            };
            (m, back)
        }
        15 => ok(Message::GetFilters(GetFilters(range))),
        16 => {
            let (count, built, expect) = pieces(&mut input, &mut body);
            let f = Filters {
                id: n1,
                flags: answer,
                count,
                body: &body,
            };
            if expect.is_ok() {
                let got: Vec<_> = f
                    .pieces()
                    .map(|p| (p.height, p.filter_len, p.offset, p.data))
                    .collect();
                let want: Vec<_> = built
                    .iter()
                    .map(|(h, l, o, r)| (*h, *l, *o, &body[r.clone()]))
                    .collect();
                assert_eq!(got, want, "pieces()");
            }
            let m = Message::Filters(f);
            (m, expect.map(|()| m))
        }
        18 => ok(Message::GetBlock(GetBlock {
            id: n1,
            block_hash: id32,
        })),
        19 => {
            // The kind's limit, the layouts' (4,000,000 for a block, 32 MiB for
            // `spent_from`), which the crate's `max_len` must give.
            let limit = ref_block_limit(blocks);
            assert_eq!(blocks.max_len(), limit, "max_len of {blocks:?}");
            let (block_len, offset, not_found, data) = match (flags >> 2) & 3 {
                // Anything.
                0 => (n2, input.u32(), flags & 2 != 0, &a[..]),
                // Within the data, or its end (`last`), mostly: up to the kind's limit and
                // just past it.
                1 => {
                    let offset = n2 % (limit + 2);
                    let extra = if flags & 1 != 0 { 0 } else { input.u8() };
                    let end = u64::from(offset) + a.len() as u64 + u64::from(extra);
                    let block_len = u32::try_from(end).unwrap_or(u32::MAX);
                    (block_len, offset, flags & 2 != 0, &a[..])
                }
                // `not_found`, alone or not.
                2 => (0, 0, true, if flags & 16 != 0 { &a[..] } else { &[][..] }),
                // The end of the data at the kind's limit, or one byte past it; now and
                // then at the other kind's (a `spent_from` answer may be longer than a
                // block, a block may not be as long as a `spent_from` answer).
                _ => {
                    let other = match blocks {
                        BlockKind::Block => MAX_SPENT_FROM_LEN,
                        BlockKind::SpentFrom => MAX_BLOCK_LEN,
                    };
                    let at = if (n2 / 3) % 4 == 3 { other } else { limit };
                    let block_len = at - 1 + n2 % 3;
                    let offset = block_len.saturating_sub(a.len() as u32);
                    (block_len, offset, flags & 2 != 0, &a[..])
                }
            };
            let p = BlockPiece {
                id: n1,
                last: flags & 1 != 0,
                not_found,
                block_len,
                offset,
                data,
            };
            let back = match block_rule(&p, blocks) {
                Some(e) => Err(DecodeError::Blocks(e)),
                None => Ok(Message::Block(p)),
            };
            (Message::Block(p), back)
        }
        20 => ok(Message::SendTx(SendTx { id: n1, tx: &a })),
        21 => {
            // Any code: the known ones, and the others, read as `busy`.
            let status = RelayStatus::from_code(flags);
            assert_eq!(ref_relay_code(status), if flags <= 6 { flags } else { 5 });
            ok(Message::TxResult(TxResult {
                id: n1,
                status,
                txid: id32,
            }))
        }
        22 => ok(Message::MempoolSubscribe(MempoolSubscribe {
            salt: fixed[..16].try_into().expect("16"),
            snapshot: flags & 1 != 0,
            tweaks: flags & 2 != 0,
        })),
        24 => ok(Message::GetMempoolTx(GetMempoolTx { id: n1, txid: id32 })),
        25 => {
            let t = MempoolTx {
                id: n1,
                not_found: flags & 1 != 0,
                tx: if flags & 2 != 0 { &a[..] } else { &[][..] },
            };
            let nothing = MempoolTx {
                id: n1,
                not_found: true,
                tx: &[],
            };
            assert_eq!(MempoolTx::not_found(n1), nothing);
            // Found without a transaction or not found with one does not decode.
            let back = if t.not_found == t.tx.is_empty() {
                Ok(Message::MempoolTx(t))
            } else {
                Err(DecodeError::Mempool(MempoolError::BadAnswer { id: n1 }))
            };
            (Message::MempoolTx(t), back)
        }
        26 => ok(Message::GetFeeRates(GetFeeRates { id: n1 })),
        _ => {
            // `Other` of a named code is written as that code and reads as the named one.
            let source = if input.u8() & 1 != 0 {
                FeeSource::Other(flags)
            } else {
                FeeSource::from_code(flags)
            };
            let mut rates = [None; 3];
            for rate in &mut rates {
                *rate = match input.u8() % 4 {
                    0 => None,
                    1 => Some(u64::MAX),
                    2 => Some(input.u64()),
                    _ => Some(u64::from(input.u16())),
                };
            }
            let m = FeeRates {
                id: n1,
                source,
                rates,
            };
            let read = FeeRates {
                source: fee_source(source_code(source)),
                rates: rates.map(|r| r.filter(|&v| v != u64::MAX)),
                ..m
            };
            (Message::FeeRates(m), Ok(Message::FeeRates(read)))
        }
    };
    // The tweak messages: the same fields under the tweak variant (and so, by the layout,
    // the tweak type); the basic kind leaves every message as built. The same for the
    // dispute's evidence under the `spent_from` variants, the block kind leaving them.
    let as_kinds = |m| of_block_kind(blocks, of_kind(kind, m));
    let (m, back) = (as_kinds(m), back.map(as_kinds));
    check(&m, back, &mut input);
    match variant {
        0 => mirror_list(&mut input),
        10 | 13 | 14 | 15 => encode_kinds(&m, back, &mut input),
        19 => block_next(n1, &a, n2, blocks, &mut input),
        _ => {}
    }
});

/// `m` as `kind`'s message when it is one of the six the filter and tweak chains share
/// (the same fields under the other variant), else `m`.
fn of_kind<'a>(kind: FilterKind, m: Message<'a>) -> Message<'a> {
    let tweaks = kind == FilterKind::Tweaks;
    match m {
        Message::GetFilterHeaders(x) | Message::GetTweakHeaders(x) if tweaks => {
            Message::GetTweakHeaders(x)
        }
        Message::GetFilterHeaders(x) | Message::GetTweakHeaders(x) => Message::GetFilterHeaders(x),
        Message::FilterHeaders(x) | Message::TweakHeaders(x) if tweaks => Message::TweakHeaders(x),
        Message::FilterHeaders(x) | Message::TweakHeaders(x) => Message::FilterHeaders(x),
        Message::GetFilterCheckpoints(x) | Message::GetTweakCheckpoints(x) if tweaks => {
            Message::GetTweakCheckpoints(x)
        }
        Message::GetFilterCheckpoints(x) | Message::GetTweakCheckpoints(x) => {
            Message::GetFilterCheckpoints(x)
        }
        Message::FilterCheckpoints(x) | Message::TweakCheckpoints(x) if tweaks => {
            Message::TweakCheckpoints(x)
        }
        Message::FilterCheckpoints(x) | Message::TweakCheckpoints(x) => {
            Message::FilterCheckpoints(x)
        }
        Message::GetFilters(x) | Message::GetTweaks(x) if tweaks => Message::GetTweaks(x),
        Message::GetFilters(x) | Message::GetTweaks(x) => Message::GetFilters(x),
        Message::Filters(x) | Message::Tweaks(x) if tweaks => Message::Tweaks(x),
        Message::Filters(x) | Message::Tweaks(x) => Message::Filters(x),
        m => m,
    }
}

/// `m` as `kind`'s message when it is one of the two the blocks and the dispute's evidence
/// share (`get_block` and `get_spent_from`, `block` and `spent_from`: the same fields under
/// the other variant), else `m`.
fn of_block_kind<'a>(kind: BlockKind, m: Message<'a>) -> Message<'a> {
    let spent_from = kind == BlockKind::SpentFrom;
    match m {
        Message::GetBlock(x) | Message::GetSpentFrom(x) if spent_from => Message::GetSpentFrom(x),
        Message::GetBlock(x) | Message::GetSpentFrom(x) => Message::GetBlock(x),
        Message::Block(x) | Message::SpentFrom(x) if spent_from => Message::SpentFrom(x),
        Message::Block(x) | Message::SpentFrom(x) => Message::Block(x),
        m => m,
    }
}

/// The per-type encoders of the request and checkpoint messages both chains share:
/// `encode` (the basic kind) and `encode_as` with each kind, into one buffer of an
/// input-chosen size. Each gives exactly what `Message::encode` of the kind's variant must
/// (`predict`, and `encode_ref`: the layout's bytes under the kind's type), and its bytes
/// decode to `back` as the kind's variant; the tweak bytes are the basic bytes but for the
/// type.
fn encode_kinds(m: &Message<'_>, back: Result<Message<'_>, DecodeError>, input: &mut Cursor) {
    let size = buffer_size(input, encode_ref(m).len());
    let encode = |kind: Option<FilterKind>, out: &mut [u8]| match (*m, kind) {
        (Message::GetFilterHeaders(x) | Message::GetTweakHeaders(x), Some(k)) => {
            x.encode_as(k, out)
        }
        (Message::GetFilterHeaders(x) | Message::GetTweakHeaders(x), None) => x.encode(out),
        (Message::GetFilterCheckpoints(x) | Message::GetTweakCheckpoints(x), Some(k)) => {
            x.encode_as(k, out)
        }
        (Message::GetFilterCheckpoints(x) | Message::GetTweakCheckpoints(x), None) => x.encode(out),
        (Message::FilterCheckpoints(x) | Message::TweakCheckpoints(x), Some(k)) => {
            x.encode_as(k, out)
        }
        (Message::FilterCheckpoints(x) | Message::TweakCheckpoints(x), None) => x.encode(out),
        (Message::GetFilters(x) | Message::GetTweaks(x), Some(k)) => x.encode_as(k, out),
        (Message::GetFilters(x) | Message::GetTweaks(x), None) => x.encode(out),
        _ => unreachable!("not a message with encode_as: {m:?}"),
    };
    let mut written = Vec::new();
    for (kind, name) in [
        (None, "encode"),
        (Some(FilterKind::Basic), "encode_as(Basic)"),
        (Some(FilterKind::Tweaks), "encode_as(Tweaks)"),
    ] {
        let as_kind = of_kind(kind.unwrap_or(FilterKind::Basic), *m);
        let want_bytes = encode_ref(&as_kind);
        let want = predict(&as_kind, want_bytes.len(), size);
        let mut out = vec![0x5au8; size];
        let got = encode(kind, &mut out);
        assert_eq!(got, want, "{name} of {as_kind:?} into {size} bytes");
        if let Ok(n) = got {
            assert_eq!(&out[..n], &want_bytes[..], "{name} bytes of {as_kind:?}");
            let read = back.map(|b| of_kind(kind.unwrap_or(FilterKind::Basic), b));
            assert_eq!(Message::decode(&out[..n]), read, "decode of {name}");
            out.truncate(n);
            written.push(out);
        }
    }
    if let [basic, _, tweaks] = &written[..] {
        assert_eq!(basic[2..], tweaks[2..], "the kinds differ past the type");
        assert_ne!(basic[..2], tweaks[..2], "the kinds have one type");
    }
}

/// A message that must decode back to itself.
fn ok(m: Message<'_>) -> (Message<'_>, Result<Message<'_>, DecodeError>) {
    (m, Ok(m))
}

/// Encode `m` into a buffer of an input-chosen size: exactly the predicted result, the
/// layout's bytes, and the encoding decodes to `back`.
fn check(m: &Message<'_>, back: Result<Message<'_>, DecodeError>, input: &mut Cursor) {
    assert_eq!(m.ty(), ref_ty(m), "type of {m:?}");
    let want_bytes = encode_ref(m);
    let n = want_bytes.len();
    assert_eq!(m.encoded_len(), n, "encoded_len of {m:?}");
    let size = buffer_size(input, n);
    let want = predict(m, n, size);
    let mut out = vec![0x5au8; size];
    let got = m.encode(&mut out);
    assert_eq!(got, want, "encode of {m:?} into {size} bytes");
    if got.is_ok() {
        assert_eq!(&out[..n], &want_bytes[..], "bytes of {m:?}");
        assert_eq!(Message::decode(&out[..n]), back, "decode of the encoding");
    }
}

/// What encoding `m`, of `n` bytes by the layout, into `size` bytes must give, in the order
/// the encoder checks.
fn predict(m: &Message<'_>, n: usize, size: usize) -> Result<usize, EncodeError> {
    if n > MAX_MESSAGE_LEN {
        Err(EncodeError::MessageTooLong {
            len: n,
            max: MAX_MESSAGE_LEN,
        })
    } else if size < n {
        Err(EncodeError::BufferTooSmall {
            needed: n,
            available: size,
        })
    } else if let Some(e) = field_error(m) {
        Err(e)
    } else {
        Ok(n)
    }
}

/// A field's bytes, `len` of them, patterned from `fill`.
fn pattern(len: usize, fill: u8) -> Vec<u8> {
    (0..len)
        .map(|i| fill ^ (i as u8) ^ ((i >> 8) as u8))
        .collect()
}

/// A variable-length field: selector % 8: 0..=63 bytes, 0..=1023, 0..=70000 (so that a
/// message can pass 65,535 bytes), whole or ragged lists of 32-byte entries around the
/// locator limit, of 80-byte entries around the header limit, of 32-byte entries around
/// the filter-hash and checkpoint limits, or 65,280..=65,535 bytes (the limits of the
/// fields that run to the end of a message: 65,520 for a block piece, 65,529 for
/// `send_tx`); filled with a pattern from a fill byte.
fn field(input: &mut Cursor) -> Vec<u8> {
    let len = match input.u8() % 8 {
        0 => usize::from(input.u8() % 64),
        1 => usize::from(input.u16() % 1024),
        2 => usize::from(input.u16()) + usize::from(input.u8() % 8) * 600,
        3 => 32 * (MAX_LOCATOR - 3 + usize::from(input.u8() % 6)) + usize::from(input.u8() % 2),
        4 => HEADER_LEN * (MAX_HEADERS_PER_MESSAGE - 2 + usize::from(input.u8() % 4)),
        5 => {
            32 * (MAX_FILTER_HASHES - 3 + usize::from(input.u8() % 6)) + usize::from(input.u8() % 2)
        }
        6 => 32 * (MAX_CHECKPOINTS - 3 + usize::from(input.u8() % 6)) + usize::from(input.u8() % 2),
        _ => MAX_MESSAGE_LEN - usize::from(input.u8()),
    };
    pattern(len, input.u8())
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
    let list = |field, len: usize, entry: usize, max: usize| {
        (!len.is_multiple_of(entry) || len / entry > max).then_some(EncodeError::FieldTooLong {
            field,
            len,
            max: max * entry,
        })
    };
    match m {
        Message::GetHeaders(g) => list("locator", g.locator.len(), 32, MAX_LOCATOR),
        Message::Headers(h) => list(
            "headers",
            h.headers.len(),
            HEADER_LEN,
            MAX_HEADERS_PER_MESSAGE,
        ),
        Message::FilterHeaders(f) | Message::TweakHeaders(f) => {
            list("filter_hashes", f.hashes.len(), 32, MAX_FILTER_HASHES).or_else(|| {
                // The segments a gateway uses: 4, or `count` when fewer.
                let segments = (f.hashes.len() / 32).min(MAX_SEGMENTS);
                (f.anchors.len() != segments * 32).then_some(EncodeError::FieldTooLong {
                    field: "anchors",
                    len: f.anchors.len(),
                    max: segments * 32,
                })
            })
        }
        Message::FilterCheckpoints(c) | Message::TweakCheckpoints(c) => {
            list("checkpoints", c.headers.len(), 32, MAX_CHECKPOINTS)
        }
        _ => None,
    }
}

/// `fee_rates` sources (docs/PROTOCOL.md): 0 none, 1 `estimatesmartfee`, 2 `estimatefee`,
/// others unknown.
fn source_code(s: FeeSource) -> u8 {
    match s {
        FeeSource::None => 0,
        FeeSource::SmartFee => 1,
        FeeSource::EstimateFee => 2,
        FeeSource::Other(c) => c,
    }
}

/// The source a code reads as.
fn fee_source(c: u8) -> FeeSource {
    match c {
        0 => FeeSource::None,
        1 => FeeSource::SmartFee,
        2 => FeeSource::EstimateFee,
        c => FeeSource::Other(c),
    }
}

/// The shared answer `flags`: bit 0 `last`, bit 1 `stop_unknown`.
fn answer_byte(f: AnswerFlags) -> u8 {
    u8::from(f.last) | (u8::from(f.stop_unknown) << 1)
}

/// The rule of docs/PROTOCOL.md ("Blocks") a `block` breaks, if any: `not_found` comes
/// alone (with `last`, no length, offset or data); a block is at most 4,000,000 bytes; a
/// piece holds at least one byte and lies within its block; `last` is on the piece that
/// reaches the end and no other. The same rules for a `spent_from` (`kind` `SpentFrom`),
/// whose answer is at most 33,554,432 bytes (32 MiB).
fn block_rule(p: &BlockPiece<'_>, kind: BlockKind) -> Option<BlocksError> {
    let end = u64::from(p.offset) + p.data.len() as u64;
    if p.not_found {
        let alone = p.last && p.block_len == 0 && p.offset == 0 && p.data.is_empty();
        (!alone).then_some(BlocksError::NotFoundWithBlock)
    } else if p.block_len > ref_block_limit(kind) {
        Some(BlocksError::BlockTooLong { len: p.block_len })
    } else if p.data.is_empty() || end > u64::from(p.block_len) {
        Some(BlocksError::PieceOutOfRange {
            offset: p.offset,
            len: p.data.len(),
        })
    } else if p.last != (end == u64::from(p.block_len)) {
        Some(BlocksError::LastMisplaced { offset: p.offset })
    } else {
        None
    }
}

/// A `filters` body built from the input: up to 8 pieces, each valid (within its filter,
/// or an empty filter's empty piece), at the 1 MiB filter limit or just past it, past its
/// filter's end, or of any fields; a count one below, equal to or one above the pieces;
/// bytes after them or not. Returns the count, the pieces (data as a range of `body`) and
/// the decoding the rules give.
#[allow(clippy::type_complexity)]
fn pieces(
    input: &mut Cursor,
    body: &mut Vec<u8>,
) -> (
    u16,
    Vec<(u32, u32, u32, Range<usize>)>,
    Result<(), DecodeError>,
) {
    let k = usize::from(input.u8() % 9);
    let mut built = Vec::new();
    let mut broken = Vec::new();
    let mut ends = Vec::new();
    for index in 0..k {
        let sel = input.u8();
        let len = match sel % 4 {
            0 => 0,
            1 => usize::from(input.u8()),
            2 => usize::from(input.u16()),
            _ => usize::from(input.u16() % 4096),
        };
        let height = input.u32();
        let (filter_len, offset) = match (sel >> 2) % 8 {
            0..=4 if len == 0 => (0, 0),
            0..=4 => {
                let offset = u32::from(input.u16());
                let tail = if sel & 0x80 != 0 { 0 } else { input.u8() };
                (offset + len as u32 + u32::from(tail), offset)
            }
            5 => (MAX_FILTER_LEN - 1 + u32::from(input.u8() % 3), 0),
            6 if len == 0 => (1 + u32::from(input.u8()), 0),
            6 => {
                let offset = u32::from(input.u16());
                (offset + len as u32 - 1, offset)
            }
            _ => (input.u32(), input.u32()),
        };
        body.extend_from_slice(&height.to_be_bytes());
        body.extend_from_slice(&filter_len.to_be_bytes());
        body.extend_from_slice(&offset.to_be_bytes());
        body.extend_from_slice(&(len as u16).to_be_bytes());
        let start = body.len();
        body.extend(pattern(len, sel));
        built.push((height, filter_len, offset, start..body.len()));
        ends.push(body.len());
        broken.push(if filter_len > MAX_FILTER_LEN {
            Some(FiltersError::FilterTooLong {
                height,
                len: filter_len,
            })
        } else if u64::from(offset) + len as u64 > u64::from(filter_len)
            || (len == 0 && filter_len != 0)
        {
            Some(FiltersError::PieceOutOfRange {
                index: index as u16,
            })
        } else {
            None
        });
    }
    let count = match input.u8() % 4 {
        0 => k.saturating_sub(1),
        1 => k + 1,
        _ => k,
    };
    // Bytes after the pieces, only where the count does not reach past them (the
    // decoder would read them as a piece).
    if count <= k && input.u8() % 2 == 1 {
        let n = 1 + usize::from(input.u8() % 20);
        body.extend(pattern(n, 0x77));
    }
    let expect = (|| {
        for i in 0..count {
            match broken.get(i) {
                Some(Some(e)) => return Err(DecodeError::Filters(*e)),
                Some(None) => {}
                // A piece past the last: nothing is left to read its height from.
                None => {
                    return Err(DecodeError::Truncated {
                        field: "height",
                        needed: 4,
                        available: 0,
                    });
                }
            }
        }
        let read = count.checked_sub(1).map_or(0, |i| ends[i]);
        if read < body.len() {
            return Err(DecodeError::Filters(FiltersError::TrailingBytes {
                len: body.len() - read,
            }));
        }
        Ok(())
    })();
    (count as u16, built, expect)
}

/// The message's type, from the layouts (BOLT 1, docs/PROTOCOL.md).
fn ref_ty(m: &Message<'_>) -> u16 {
    match *m {
        Message::Warning(_) => 1,
        Message::Init(_) => 16,
        Message::Error(_) => 17,
        Message::Ping(_) => 18,
        Message::Pong(_) => 19,
        Message::GetHeaders(_) => 32769,
        Message::Headers(_) => 32771,
        Message::Tip(_) => 32773,
        Message::HeadersCompact(_) => 32775,
        Message::GetFilterHeaders(_) => FILTER_TYPES[0],
        Message::FilterHeaders(_) => FILTER_TYPES[1],
        Message::GetFilterCheckpoints(_) => FILTER_TYPES[2],
        Message::FilterCheckpoints(_) => FILTER_TYPES[3],
        Message::GetFilters(_) => FILTER_TYPES[4],
        Message::Filters(_) => FILTER_TYPES[5],
        Message::GetBlock(_) => 32789,
        Message::Block(_) => 32791,
        Message::GetSpentFrom(_) => 32821,
        Message::SpentFrom(_) => 32823,
        Message::SendTx(_) => 32793,
        Message::TxResult(_) => 32795,
        Message::MempoolSubscribe(_) => 32797,
        Message::MempoolDigest(_) => 32799,
        Message::GetMempoolTx(_) => 32801,
        Message::MempoolTx(_) => 32803,
        Message::GetFeeRates(_) => 32805,
        Message::FeeRates(_) => 32807,
        Message::GetTweakHeaders(_) => TWEAK_TYPES[0],
        Message::TweakHeaders(_) => TWEAK_TYPES[1],
        Message::GetTweakCheckpoints(_) => TWEAK_TYPES[2],
        Message::TweakCheckpoints(_) => TWEAK_TYPES[3],
        Message::GetTweaks(_) => TWEAK_TYPES[4],
        Message::Tweaks(_) => TWEAK_TYPES[5],
        Message::Unknown { ty, .. } => ty,
    }
}

/// The message's bytes, from the layouts (BOLT 1, docs/PROTOCOL.md); list counts are
/// written as whole entries (what the decoder reads back). The tweak messages have the
/// filter messages' layouts under their own types, `get_spent_from` and `spent_from` the
/// block messages'.
fn encode_ref(m: &Message<'_>) -> Vec<u8> {
    let mut o = Vec::new();
    o.extend_from_slice(&ref_ty(m).to_be_bytes());
    let prefixed = |o: &mut Vec<u8>, b: &[u8]| {
        o.extend_from_slice(&(b.len() as u16).to_be_bytes());
        o.extend_from_slice(b);
    };
    let record = |o: &mut Vec<u8>, ty: u64, v: &[u8]| {
        o.extend(ref_bigsize_encode(ty));
        o.extend(ref_bigsize_encode(v.len() as u64));
        o.extend_from_slice(v);
    };
    let u32 = |o: &mut Vec<u8>, v: u32| o.extend_from_slice(&v.to_be_bytes());
    let u16 = |o: &mut Vec<u8>, v: usize| o.extend_from_slice(&(v as u16).to_be_bytes());
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
            if let Some(v) = i.mirrors {
                record(&mut o, 65_537, v);
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
            u32(&mut o, g.id);
            u32(&mut o, g.max_count);
            o.extend_from_slice(&g.stop_hash);
            u16(&mut o, g.locator.len() / 32);
            o.extend_from_slice(g.locator);
        }
        Message::Headers(h) => {
            u32(&mut o, h.id);
            u32(&mut o, h.first_height);
            o.push(u8::from(h.last));
            u16(&mut o, h.headers.len() / HEADER_LEN);
            o.extend_from_slice(h.headers);
        }
        Message::Tip(t) => {
            u32(&mut o, t.height);
            o.extend_from_slice(t.header);
            o.extend_from_slice(t.chainwork);
        }
        // Not built from the input here (the message target decodes and codes it).
        Message::HeadersCompact(h) => {
            u32(&mut o, h.id);
            u32(&mut o, h.first_height);
            o.push(u8::from(h.last));
            o.extend_from_slice(&h.count.to_be_bytes());
            o.push((h.anchors.len() / 32) as u8);
            o.extend_from_slice(h.anchors);
            o.extend_from_slice(h.body);
        }
        Message::GetFilterHeaders(GetFilterHeaders(r))
        | Message::GetFilters(GetFilters(r))
        | Message::GetTweakHeaders(GetFilterHeaders(r))
        | Message::GetTweaks(GetFilters(r)) => {
            u32(&mut o, r.id);
            u32(&mut o, r.start_height);
            o.extend_from_slice(&r.stop_hash);
        }
        Message::FilterHeaders(f) | Message::TweakHeaders(f) => {
            u32(&mut o, f.id);
            u32(&mut o, f.first_height);
            o.push(answer_byte(f.flags));
            u16(&mut o, f.hashes.len() / 32);
            o.push((f.anchors.len() / 32) as u8);
            o.extend_from_slice(f.anchors);
            o.extend_from_slice(f.hashes);
        }
        Message::GetFilterCheckpoints(g) | Message::GetTweakCheckpoints(g) => {
            u32(&mut o, g.id);
            o.extend_from_slice(&g.stop_hash);
        }
        Message::FilterCheckpoints(c) | Message::TweakCheckpoints(c) => {
            u32(&mut o, c.id);
            u32(&mut o, c.first_height);
            o.push(answer_byte(c.flags));
            u16(&mut o, c.headers.len() / 32);
            o.extend_from_slice(c.headers);
        }
        Message::Filters(f) | Message::Tweaks(f) => {
            u32(&mut o, f.id);
            o.push(answer_byte(f.flags));
            o.extend_from_slice(&f.count.to_be_bytes());
            o.extend_from_slice(f.body);
        }
        Message::GetBlock(g) | Message::GetSpentFrom(g) => {
            u32(&mut o, g.id);
            o.extend_from_slice(&g.block_hash);
        }
        Message::Block(b) | Message::SpentFrom(b) => {
            u32(&mut o, b.id);
            o.push(u8::from(b.last) | (u8::from(b.not_found) << 1));
            u32(&mut o, b.block_len);
            u32(&mut o, b.offset);
            o.extend_from_slice(b.data);
        }
        Message::SendTx(s) => {
            u32(&mut o, s.id);
            o.extend_from_slice(s.tx);
        }
        Message::TxResult(t) => {
            u32(&mut o, t.id);
            o.push(ref_relay_code(t.status));
            o.extend_from_slice(&t.txid);
        }
        Message::MempoolSubscribe(s) => {
            o.extend_from_slice(&s.salt);
            o.push(u8::from(s.snapshot) | (u8::from(s.tweaks) << 1));
        }
        // The entries are private: rebuilt from `entries()` (see the top comment).
        Message::MempoolDigest(d) => {
            o.push(u8::from(d.reset) | (u8::from(d.snapshot_end) << 1));
            o.extend_from_slice(&d.count.to_be_bytes());
            for e in d.entries() {
                match e {
                    DigestEntry::Added { txid, set, tweak } => {
                        o.push(if tweak.is_some() { 2 } else { 0 });
                        o.extend_from_slice(txid);
                        if let Some(t) = tweak {
                            o.extend_from_slice(t);
                        }
                        prefixed(&mut o, set);
                    }
                    DigestEntry::Removed { txid, reason } => {
                        o.push(1);
                        o.extend_from_slice(txid);
                        o.push(ref_removal_code(reason));
                    }
                }
            }
        }
        Message::GetMempoolTx(g) => {
            u32(&mut o, g.id);
            o.extend_from_slice(&g.txid);
        }
        Message::MempoolTx(t) => {
            u32(&mut o, t.id);
            o.push(u8::from(t.not_found));
            o.extend_from_slice(t.tx);
        }
        Message::GetFeeRates(g) => u32(&mut o, g.id),
        Message::FeeRates(f) => {
            u32(&mut o, f.id);
            o.push(source_code(f.source));
            for r in f.rates {
                o.extend_from_slice(&r.unwrap_or(u64::MAX).to_be_bytes());
            }
        }
        Message::Unknown { payload, .. } => o.extend_from_slice(payload),
    }
    o
}

/// `FilterHeaders::encode_answer` against the layout: `count` around the 2,043 limit, block
/// `i`'s filter header and hash made from `i` (so each is told apart), `before` the filter
/// header before the first block. Each segment's anchor is the filter header of the block
/// before its first; each entry is asked once. `encode_answer_as` with either kind gives
/// the same, under the kind's type, and decodes to the kind's variant; the tweak bytes
/// differ from the basic ones in the type alone.
fn filter_answer(
    id: u32,
    first_height: u32,
    flags: AnswerFlags,
    fixed: &[u8; 32 + HEADER_LEN + 32],
    input: &mut Cursor,
) {
    let count = match input.u8() % 4 {
        0 => usize::from(input.u8() % 9),
        1 => MAX_FILTER_HASHES - 3 + usize::from(input.u8() % 6),
        _ => usize::from(input.u16() % 2100),
    };
    let mut before = [0u8; 32];
    before.copy_from_slice(&fixed[..32]);
    let fill = fixed[32];
    let entry = |i: usize| {
        let mut header = [fill; 32];
        header[..8].copy_from_slice(&(i as u64).to_be_bytes());
        let mut hash = [!fill; 32];
        hash[24..].copy_from_slice(&(i as u64).to_le_bytes());
        (header, hash)
    };
    let segments = count.min(MAX_SEGMENTS);
    // The payload; each kind's message is its type, then this.
    let mut payload = Vec::new();
    payload.extend_from_slice(&id.to_be_bytes());
    payload.extend_from_slice(&first_height.to_be_bytes());
    payload.push(answer_byte(flags));
    payload.extend_from_slice(&(count as u16).to_be_bytes());
    payload.push(segments as u8);
    for k in 0..segments {
        // Segment k starts at floor(count * k / segments).
        match (count * k / segments).checked_sub(1) {
            Some(i) => payload.extend_from_slice(&entry(i).0),
            None => payload.extend_from_slice(&before),
        }
    }
    for i in 0..count {
        payload.extend_from_slice(&entry(i).1);
    }
    let n = 2 + payload.len();
    let size = buffer_size(input, n);
    let expect = if count > MAX_FILTER_HASHES {
        Err(EncodeError::FieldTooLong {
            field: "filter_hashes",
            len: count * 32,
            max: MAX_FILTER_HASHES * 32,
        })
    } else if size < n {
        Err(EncodeError::BufferTooSmall {
            needed: n,
            available: size,
        })
    } else {
        Ok(n)
    };
    let mut written = Vec::new();
    for (kind, name) in [
        (None, "encode_answer"),
        (Some(FilterKind::Basic), "encode_answer_as(Basic)"),
        (Some(FilterKind::Tweaks), "encode_answer_as(Tweaks)"),
    ] {
        let tweaks = kind == Some(FilterKind::Tweaks);
        let ty = if tweaks {
            TWEAK_TYPES[1]
        } else {
            FILTER_TYPES[1]
        };
        let want = [&ty.to_be_bytes()[..], &payload[..]].concat();
        let mut out = vec![0x5au8; size];
        let mut asked = vec![0u32; count];
        let mut stray = Vec::new();
        let ask = |i: usize| {
            match asked.get_mut(i) {
                Some(a) => *a += 1,
                None => stray.push(i),
            }
            entry(i)
        };
        let got = match kind {
            None => {
                FilterHeaders::encode_answer(&mut out, id, first_height, flags, count, before, ask)
            }
            Some(k) => FilterHeaders::encode_answer_as(
                k,
                &mut out,
                id,
                first_height,
                flags,
                count,
                before,
                ask,
            ),
        };
        assert_eq!(got, expect, "{name} of {count} into {size} bytes");
        if got.is_ok() {
            assert!(asked.iter().all(|&a| a == 1), "each entry asked once");
            assert_eq!(stray, Vec::<usize>::new(), "entries past count asked");
            assert_eq!(&out[..n], &want[..], "{name} bytes");
            let anchors_end = 14 + segments * 32;
            let f = FilterHeaders {
                id,
                first_height,
                flags,
                anchors: &want[14..anchors_end],
                hashes: &want[anchors_end..],
            };
            let m = if tweaks {
                Message::TweakHeaders(f)
            } else {
                Message::FilterHeaders(f)
            };
            assert_eq!(Message::decode(&out[..n]), Ok(m), "decode of {name}");
            out.truncate(n);
            written.push(out);
        }
    }
    if let [basic, _, tweaks] = &written[..] {
        assert_eq!(basic[2..], tweaks[2..], "the kinds differ past the type");
    }
}

/// `FiltersWriter` against the layout: up to 9 filters (empty, short, or longer than a
/// message can hold), each pushed from an offset within it. A push takes as much of
/// `filter[offset..]` as fits in what is left of 65,535 bytes (or the buffer) and says how
/// much; nothing when not even a one-byte piece (for an empty filter, an empty piece)
/// fits. The buffer must hold the message's fields and a one-byte piece (24 bytes). The
/// message written decodes to the pieces pushed, and goes through `check` like the
/// others. Three writers are fed the same pieces: `new`, `new_as` with the basic kind (the
/// same `filters` message) and `new_as` with the tweak kind (a `tweaks` message: the same
/// bytes but the type, decoding to `Message::Tweaks`).
fn filters_writer(id: u32, flags: AnswerFlags, input: &mut Cursor) {
    let size = usize::from(input.u16()) + usize::from(input.u8() % 2) * 65536;
    let limit = size.min(MAX_MESSAGE_LEN);
    // `new`, `new_as(Basic)`, `new_as(Tweaks)`.
    let mut outs = [vec![0x5au8; size], vec![0x5au8; size], vec![0x5au8; size]];
    let names = ["new", "new_as(Basic)", "new_as(Tweaks)"];
    let [o0, o1, o2] = &mut outs;
    let made = [
        FiltersWriter::new(o0, id),
        FiltersWriter::new_as(FilterKind::Basic, o1, id),
        FiltersWriter::new_as(FilterKind::Tweaks, o2, id),
    ];
    // The message's fields (type, id, flags, count) and a one-byte piece.
    let need = 2 + 4 + 1 + 2 + PIECE_FIXED + 1;
    let refused = (limit < need).then_some(EncodeError::BufferTooSmall {
        needed: need,
        available: size,
    });
    for (w, name) in made.iter().zip(names) {
        assert_eq!(
            w.as_ref().err(),
            refused.as_ref(),
            "FiltersWriter::{name} into {size} bytes"
        );
    }
    if refused.is_some() {
        return;
    }
    let mut ws = made.map(|w| w.expect("a writer, as checked"));
    let mut want = Vec::new();
    want.extend_from_slice(&FILTER_TYPES[5].to_be_bytes());
    want.extend_from_slice(&id.to_be_bytes());
    want.extend_from_slice(&[0, 0, 0]);
    let mut pushed = Vec::new();
    let mut count = 0u16;
    for _ in 0..input.u8() % 10 {
        let sel = input.u8();
        let len = match sel % 4 {
            0 => 0,
            1 => usize::from(input.u8()),
            2 => usize::from(input.u16()) + usize::from(input.u8() % 2) * 65536,
            _ => usize::from(input.u16() % 8192),
        };
        let filter = pattern(len, sel);
        let offset = match len {
            0 => 0,
            _ => usize::from(input.u16()) % len,
        };
        let height = input.u32();
        let room = limit - want.len();
        let rest = len - offset;
        // A message cannot hold 65,535 pieces, nor a piece of 65,535 bytes: only the room
        // left bounds a push.
        let fits = room >= PIECE_FIXED + usize::from(rest > 0);
        let n = fits.then(|| rest.min(room - PIECE_FIXED));
        for (w, name) in ws.iter_mut().zip(names) {
            assert_eq!(w.has_room(), room > PIECE_FIXED, "has_room ({name})");
            assert_eq!(
                w.push(height, &filter, offset),
                n,
                "push {rest} bytes into {room} ({name})"
            );
        }
        if let Some(n) = n {
            let data = &filter[offset..offset + n];
            want.extend_from_slice(&height.to_be_bytes());
            want.extend_from_slice(&(len as u32).to_be_bytes());
            want.extend_from_slice(&(offset as u32).to_be_bytes());
            want.extend_from_slice(&(n as u16).to_be_bytes());
            want.extend_from_slice(data);
            pushed.push((height, len as u32, offset as u32, data.to_vec()));
            count += 1;
        }
        for (w, name) in ws.iter().zip(names) {
            assert_eq!(w.pieces(), count, "pieces ({name})");
        }
    }
    let lens = ws.map(|w| w.finish(flags));
    want[6] = answer_byte(flags);
    want[7..9].copy_from_slice(&count.to_be_bytes());
    for (i, (out, name)) in outs.iter().zip(names).enumerate() {
        let tweaks = i == 2;
        let len = lens[i];
        let mut want = want.clone();
        if tweaks {
            want[..2].copy_from_slice(&TWEAK_TYPES[5].to_be_bytes());
        }
        assert_eq!(len, want.len(), "finish ({name})");
        assert_eq!(&out[..len], &want[..], "FiltersWriter::{name} bytes");
        let f = match Message::decode(&out[..len]) {
            Ok(Message::Filters(f)) if !tweaks => f,
            Ok(Message::Tweaks(f)) if tweaks => f,
            other => panic!("FiltersWriter::{name}'s message decodes as {other:?}"),
        };
        assert_eq!((f.id, f.flags, f.count), (id, flags, count));
        let got: Vec<_> = f
            .pieces()
            .map(|p| (p.height, p.filter_len, p.offset, p.data.to_vec()))
            .collect();
        assert_eq!(got, pushed, "pieces of FiltersWriter::{name}'s message");
        if i != 1 {
            let m = if tweaks {
                Message::Tweaks(f)
            } else {
                Message::Filters(f)
            };
            check(&m, Ok(m), input);
        }
    }
    assert_eq!(
        outs[0][2..lens[0]],
        outs[2][2..lens[2]],
        "the kinds differ past the type"
    );
}

/// A digest entry as written: kind 0 with txid and set, or kind 1 with txid and the
/// reason's code.
type RefEntry = (u8, [u8; 32], Vec<u8>);

/// `DigestWriter` against the layout: up to 11 entries, `added` (sets from empty to over
/// 65,535 bytes) or `removed` (any reason code, through `Removal::from_code`), each whole
/// or not at all; the buffer must hold the message's fields and an `added` entry with an
/// empty set (40 bytes). The digest written decodes to the entries written and goes
/// through `check` (so `Message::encode` gives the writer's bytes back).
fn digest_writer(flags: u8, input: &mut Cursor) {
    let size = usize::from(input.u16()) + usize::from(input.u8() % 2) * 65536;
    let limit = size.min(MAX_MESSAGE_LEN);
    let (reset, snapshot_end) = (flags & 1 != 0, flags & 2 != 0);
    let mut out = vec![0x5au8; size];
    let start = 2 + 1 + 2;
    let (added_fixed, removed_len) = (1 + 32 + 2, 1 + 32 + 1);
    let mut w = match DigestWriter::new(&mut out, reset) {
        Ok(w) if limit >= start + added_fixed => w,
        w => {
            assert_eq!(
                w.err(),
                (limit < start + added_fixed).then_some(EncodeError::BufferTooSmall {
                    needed: start + added_fixed,
                    available: size,
                }),
                "DigestWriter::new into {size} bytes"
            );
            return;
        }
    };
    let mut want = Vec::new();
    want.extend_from_slice(&32799u16.to_be_bytes());
    want.extend_from_slice(&[0, 0, 0]);
    let mut written: Vec<RefEntry> = Vec::new();
    let mut count = 0u16;
    for i in 0..input.u8() % 12 {
        let sel = input.u8();
        let mut txid = [sel; 32];
        txid[0] = i;
        let room = limit - want.len();
        if sel & 1 == 0 {
            let len = match (sel >> 1) % 4 {
                0 => 0,
                1 => usize::from(input.u8()),
                2 => usize::from(input.u16()) + usize::from(input.u8() % 2) * 65536,
                _ => usize::from(input.u16() % 4096),
            };
            let set = pattern(len, sel);
            // Every other added entry carries a tweak (kind 2, 33 bytes more).
            let tweak = (sel & 8 != 0).then(|| {
                let mut t = [sel; 33];
                t[0] = 2 + (sel >> 4) % 2;
                t
            });
            let extra = if tweak.is_some() { 33 } else { 0 };
            // Only the room left bounds an entry (a set over 65,535 bytes never fits).
            let fits = room >= added_fixed + extra + len;
            assert_eq!(
                w.added(&txid, &set, tweak.as_ref()),
                fits,
                "added, {len} bytes into {room}"
            );
            if fits {
                let kind = if tweak.is_some() { 2 } else { 0 };
                want.push(kind);
                want.extend_from_slice(&txid);
                let mut body = tweak.map(|t| t.to_vec()).unwrap_or_default();
                want.extend_from_slice(&body);
                want.extend_from_slice(&(len as u16).to_be_bytes());
                want.extend_from_slice(&set);
                body.extend_from_slice(&set);
                written.push((kind, txid, body));
            }
        } else {
            let code = input.u8();
            let reason = Removal::from_code(code);
            // "an unknown reason reads as `evicted`".
            let read = if code <= 3 { code } else { 2 };
            assert_eq!(ref_removal_code(reason), read, "Removal::from_code({code})");
            let fits = room >= removed_len;
            assert_eq!(w.removed(&txid, reason), fits, "removed into {room}");
            if fits {
                want.push(1);
                want.extend_from_slice(&txid);
                want.push(read);
                written.push((1, txid, vec![read]));
            }
        }
        count += u16::from(written.len() > usize::from(count));
        assert_eq!(w.count(), count);
    }
    if snapshot_end {
        w.end_snapshot();
    }
    let len = w.finish();
    want[2] = u8::from(reset) | (u8::from(snapshot_end) << 1);
    want[3..5].copy_from_slice(&count.to_be_bytes());
    assert_eq!(len, want.len(), "finish");
    assert_eq!(&out[..len], &want[..], "DigestWriter bytes");
    let Ok(Message::MempoolDigest(d)) = Message::decode(&out[..len]) else {
        panic!("DigestWriter's message does not decode");
    };
    assert_eq!(
        (d.reset, d.snapshot_end, d.count),
        (reset, snapshot_end, count)
    );
    let got: Vec<RefEntry> = d
        .entries()
        .map(|e| match e {
            DigestEntry::Added { txid, set, tweak } => {
                let mut body = tweak.map(|t| t.to_vec()).unwrap_or_default();
                body.extend_from_slice(set);
                (if tweak.is_some() { 2 } else { 0 }, *txid, body)
            }
            DigestEntry::Removed { txid, reason } => (1, *txid, vec![ref_removal_code(reason)]),
        })
        .collect();
    assert_eq!(got, written, "entries of DigestWriter's message");
    check(
        &Message::MempoolDigest(d),
        Ok(Message::MempoolDigest(d)),
        input,
    );
}

/// `Init::encode_mirrors` against the layout (URLs back to back, each a big-endian u16
/// length and its bytes): up to 5 URLs, some at and past 65,535 bytes, into a buffer of
/// the exact size, smaller, or any; `None` when a URL is too long or the buffer too small;
/// what it writes, as an `init`'s record, reads back through `mirror_urls`.
fn mirror_list(input: &mut Cursor) {
    let urls: Vec<String> = (0..input.u8() % 6)
        .map(|i| {
            let len = match input.u8() % 4 {
                0 => usize::from(input.u8() % 64),
                1 => usize::from(input.u16() % 1024),
                2 => usize::from(u16::MAX) - 1 + usize::from(input.u8() % 3),
                _ => 0,
            };
            (0..len)
                .map(|j| char::from(b'a' + ((i as usize + j) % 26) as u8))
                .collect()
        })
        .collect();
    let refs: Vec<&str> = urls.iter().map(String::as_str).collect();
    let mut value = Vec::new();
    for url in &refs {
        value.extend_from_slice(&(url.len() as u16).to_be_bytes());
        value.extend_from_slice(url.as_bytes());
    }
    let too_long = refs.iter().any(|u| u.len() > usize::from(u16::MAX));
    let size = match input.u8() % 3 {
        0 => value.len(),
        1 => value.len().saturating_sub(1 + usize::from(input.u8())),
        _ => usize::from(input.u16()),
    };
    let mut out = vec![0x5au8; size];
    let got = Init::encode_mirrors(&refs, &mut out);
    let want = (!too_long && value.len() <= size).then_some(value.len());
    assert_eq!(got, want, "encode_mirrors into {size} bytes");
    if let Some(n) = got {
        assert_eq!(&out[..n], &value[..], "encode_mirrors bytes");
        let init = Init {
            mirrors: Some(&out[..n]),
            ..Init::default()
        };
        assert_eq!(init.mirror_urls().collect::<Vec<_>>(), refs, "mirror_urls");
    }
}

/// `BlockPiece::next` over `block` from an offset at its start, its end, anywhere, or near
/// the last full piece: `None` at or past the end, else the next 65,520 bytes at most, with
/// `last` when they reach the end, which goes through `check` as `kind`'s message (a
/// valid piece decodes back, as `block` or `spent_from`); and `not_found` is the lone
/// answer the layout gives.
fn block_next(id: u32, block: &[u8], sel: u32, kind: BlockKind, input: &mut Cursor) {
    let at = (sel >> 2) as usize;
    let offset = match sel % 4 {
        0 => 0,
        1 => block.len() + at % 2,
        2 => at % (block.len() + 1),
        _ => block.len().saturating_sub(MAX_BLOCK_PIECE + 1) + at % 3,
    };
    let want = (offset < block.len()).then(|| {
        let end = (offset + MAX_BLOCK_PIECE).min(block.len());
        BlockPiece {
            id,
            last: end == block.len(),
            not_found: false,
            block_len: block.len() as u32,
            offset: offset as u32,
            data: &block[offset..end],
        }
    });
    let got = BlockPiece::next(id, block, offset);
    assert_eq!(got, want, "BlockPiece::next at {offset} of {}", block.len());
    if let Some(p) = got {
        let m = of_block_kind(kind, Message::Block(p));
        check(&m, Ok(m), input);
    }
    let alone = BlockPiece {
        id,
        last: true,
        not_found: true,
        block_len: 0,
        offset: 0,
        data: &[],
    };
    assert_eq!(BlockPiece::not_found(id), alone);
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
