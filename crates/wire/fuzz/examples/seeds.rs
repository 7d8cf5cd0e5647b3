//! Write a starting corpus for every target into `corpus/<target>/seed-*`, in the input
//! layouts the targets document: one encoded message of each type (some with trailing
//! bytes or unknown TLV records; the filter and tweak answers and the digest written by
//! their encoders), a description of each variant for `roundtrip`, and BOLT 1 appendix
//! streams and BigSizes for `tlv`.
//!
//! Run from this directory: `cargo +nightly run --example seeds`.

use std::fs;
use std::path::Path;

use lightwire_wire::{
    AnswerFlags, BlockPiece, DigestWriter, ErrorMessage, Features, FeeRates, FeeSource,
    FilterCheckpoints, FilterHeaders, FilterKind, FilterRange, FiltersWriter, GetBlock,
    GetFeeRates, GetFilterCheckpoints, GetFilterHeaders, GetFilters, GetHeaders, GetMempoolTx,
    Headers, Init, MAX_MESSAGE_LEN, MempoolSubscribe, MempoolTx, Message, Networks, Ping, Pong,
    RelayStatus, Removal, SendTx, Tip, TxResult, Warning,
};

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    fs::create_dir_all(&dir).expect("create the corpus directory");
    fs::write(dir.join(format!("seed-{name}")), bytes).expect("write a seed");
}

fn encoded(m: Message<'_>) -> Vec<u8> {
    let mut out = vec![0u8; m.encoded_len()];
    let n = m.encode(&mut out).expect("a seed message encodes");
    out.truncate(n);
    out
}

fn main() {
    let chains = [[0x6f; 32], [0x43; 32]];
    let addr = [1u8, 127, 0, 0, 1, 0x26, 0x07];
    let locator = [3u8; 3 * 32];
    let headers = [4u8; 2 * 80];
    let header = [5u8; 80];
    let work = [6u8; 32];
    let mut mirrors = [0u8; 64];
    let mirrors_len = Init::encode_mirrors(&["https://a.example/bulk/", "/b/"], &mut mirrors)
        .expect("the mirrors fit");
    let messages = [
        (
            "init",
            Message::Init(Init {
                global_features: Features::new(&[0x02]),
                features: Features::new(&[0x82, 0x00]),
                networks: Some(Networks::from_chains(&chains)),
                remote_addr: Some(&addr),
                mirrors: Some(&mirrors[..mirrors_len]),
            }),
        ),
        ("init-empty", Message::Init(Init::default())),
        (
            "error",
            Message::Error(ErrorMessage {
                channel_id: [0; 32],
                data: b"bad thing",
            }),
        ),
        (
            "warning",
            Message::Warning(Warning::connection(b"careful\x07")),
        ),
        (
            "ping",
            Message::Ping(Ping {
                num_pong_bytes: 12,
                ignored: &[0; 4],
            }),
        ),
        ("ping-no-reply", Message::Ping(Ping::new(65532))),
        ("pong", Message::Pong(Pong { ignored: &[0; 12] })),
        (
            "get-headers",
            Message::GetHeaders(GetHeaders {
                id: 7,
                max_count: 2000,
                stop_hash: [0; 32],
                locator: &locator,
            }),
        ),
        (
            "headers",
            Message::Headers(Headers {
                id: 7,
                first_height: 100,
                last: true,
                headers: &headers,
            }),
        ),
        (
            "tip",
            Message::Tip(Tip {
                height: 900_000,
                header: &header,
                chainwork: &work,
            }),
        ),
        (
            "unknown-odd",
            Message::Unknown {
                ty: 40001,
                payload: &[1, 2, 3],
            },
        ),
    ];
    for (name, m) in messages {
        let bytes = encoded(m);
        write("message", name, &bytes);
        let mut trailing = bytes.clone();
        trailing.extend_from_slice(&[0xee; 3]);
        write("message", &format!("{name}-trailing"), &trailing);
    }
    // The filter, block, relay, mempool and fee messages.
    let range = FilterRange {
        id: 3,
        start_height: 1000,
        stop_hash: [7; 32],
    };
    let checkpoints = [9u8; 3 * 32];
    let block: Vec<u8> = (0..100u8).collect();
    // A tweak dispute's evidence: a CompactSize count, then transactions without witness
    // data (opaque to the wire).
    let evidence: Vec<u8> = [&[1u8][..], &[0x02; 60][..]].concat();
    let tx = [0x42u8; 120];
    let more = [
        (
            "get-filter-headers",
            Message::GetFilterHeaders(GetFilterHeaders(range)),
        ),
        (
            "get-filter-checkpoints",
            Message::GetFilterCheckpoints(GetFilterCheckpoints {
                id: 4,
                stop_hash: [7; 32],
            }),
        ),
        (
            "filter-checkpoints",
            Message::FilterCheckpoints(FilterCheckpoints {
                id: 4,
                first_height: 2000,
                flags: AnswerFlags {
                    last: true,
                    stop_unknown: false,
                },
                headers: &checkpoints,
            }),
        ),
        ("get-filters", Message::GetFilters(GetFilters(range))),
        // The tweak messages: the filter messages' layouts under types 32809 to 32819.
        (
            "get-tweak-headers",
            Message::GetTweakHeaders(GetFilterHeaders(range)),
        ),
        (
            "get-tweak-checkpoints",
            Message::GetTweakCheckpoints(GetFilterCheckpoints {
                id: 4,
                stop_hash: [7; 32],
            }),
        ),
        (
            "tweak-checkpoints",
            Message::TweakCheckpoints(FilterCheckpoints {
                id: 4,
                first_height: 0,
                flags: AnswerFlags {
                    last: false,
                    stop_unknown: true,
                },
                headers: &checkpoints,
            }),
        ),
        ("get-tweaks", Message::GetTweaks(GetFilters(range))),
        (
            "get-block",
            Message::GetBlock(GetBlock {
                id: 5,
                block_hash: [8; 32],
            }),
        ),
        (
            "block",
            Message::Block(BlockPiece::next(5, &block, 0).expect("a piece")),
        ),
        ("block-not-found", Message::Block(BlockPiece::not_found(5))),
        // The dispute's evidence: the block messages' layouts under types 32821 and 32823.
        (
            "get-spent-from",
            Message::GetSpentFrom(GetBlock {
                id: 5,
                block_hash: [8; 32],
            }),
        ),
        (
            "spent-from",
            Message::SpentFrom(BlockPiece::next(5, &evidence, 0).expect("a piece")),
        ),
        (
            "spent-from-not-found",
            Message::SpentFrom(BlockPiece::not_found(5)),
        ),
        // The last piece of an answer longer than a block may be (valid as `spent_from`).
        (
            "spent-from-past-block-limit",
            Message::SpentFrom(BlockPiece {
                id: 5,
                last: true,
                not_found: false,
                block_len: 4_000_000 + evidence.len() as u32,
                offset: 4_000_000,
                data: &evidence,
            }),
        ),
        ("send-tx", Message::SendTx(SendTx { id: 6, tx: &tx })),
        (
            "tx-result",
            Message::TxResult(TxResult {
                id: 6,
                status: RelayStatus::Busy,
                txid: [1; 32],
            }),
        ),
        (
            "mempool-subscribe",
            Message::MempoolSubscribe(MempoolSubscribe {
                salt: [2; 16],
                snapshot: true,
                tweaks: true,
            }),
        ),
        (
            "get-mempool-tx",
            Message::GetMempoolTx(GetMempoolTx {
                id: 7,
                txid: [1; 32],
            }),
        ),
        (
            "mempool-tx",
            Message::MempoolTx(MempoolTx {
                id: 7,
                not_found: false,
                tx: &tx,
            }),
        ),
        (
            "mempool-tx-not-found",
            Message::MempoolTx(MempoolTx::not_found(7)),
        ),
        ("get-fee-rates", Message::GetFeeRates(GetFeeRates { id: 8 })),
        (
            "fee-rates",
            Message::FeeRates(FeeRates {
                id: 8,
                source: FeeSource::SmartFee,
                rates: [Some(25_000), None, Some(1_000)],
            }),
        ),
    ];
    for (name, m) in more {
        let bytes = encoded(m);
        write("message", name, &bytes);
        let mut trailing = bytes.clone();
        trailing.extend_from_slice(&[0xee; 3]);
        write("message", &format!("{name}-trailing"), &trailing);
    }
    let mut out = vec![0u8; MAX_MESSAGE_LEN];
    let flags = AnswerFlags {
        last: true,
        stop_unknown: false,
    };
    for (kind, name) in [(FilterKind::Basic, "filter"), (FilterKind::Tweaks, "tweak")] {
        for n in [0usize, 2, 10] {
            let len =
                FilterHeaders::encode_answer_as(kind, &mut out, 3, 1000, flags, n, [0; 32], |i| {
                    ([i as u8; 32], [!(i as u8); 32])
                })
                .expect("a seed encodes");
            write("message", &format!("{name}-headers-{n}"), &out[..len]);
        }
    }
    let mut w = FiltersWriter::new(&mut out, 3).expect("room");
    w.push(1000, &[1, 0x55, 0xaa, 0x0f], 0);
    w.push(1001, &[], 0);
    w.push(1002, &block, 40);
    let len = w.finish(flags);
    write("message", "filters", &out[..len]);
    // A block's tweak list: a CompactSize count, then 33-byte points (opaque to the wire).
    let mut list = vec![2u8];
    list.extend_from_slice(&[0x02; 33]);
    list.extend_from_slice(&[0x03; 33]);
    let mut w = FiltersWriter::new_as(FilterKind::Tweaks, &mut out, 3).expect("room");
    w.push(1000, &list, 0);
    w.push(1001, &[0], 0);
    w.push(1002, &list, 34);
    let len = w.finish(flags);
    write("message", "tweaks", &out[..len]);
    let mut w = DigestWriter::new(&mut out, true).expect("room");
    w.added(&[3; 32], &[2, 0xab, 0xcd], None);
    w.removed(&[4; 32], Removal::Replaced);
    w.added(&[5; 32], &[1, 0x42], Some(&[3; 33]));
    w.end_snapshot();
    let len = w.finish();
    write("message", "mempool-digest", &out[..len]);

    // An init with an unknown odd record (type 5) after networks and remote_addr: it is
    // skipped on decoding and not written back.
    let mut init = encoded(messages[0].1);
    init.extend_from_slice(&[0x05, 0x02, 0xaa, 0xbb]);
    write("message", "init-unknown-odd-record", &init);

    // headers_compact: a few headers with every coding form, whole, and 100 in four segments.
    let mut time = 1_300_000_000u32;
    let coded: Vec<[u8; 80]> = (0..100u32)
        .map(|i| {
            let mut h = [0u8; 80];
            let version: u32 = if i % 9 == 4 { 0x2000_0000 | i } else { 2 };
            time = match i % 4 {
                0 => time + 600,
                1 => time + 7,
                2 => time - 100,
                _ => time + 70_000,
            };
            let bits: u32 = if i % 13 == 0 {
                0x1b00_ffff
            } else {
                0x1d00_ffff
            };
            h[..4].copy_from_slice(&version.to_le_bytes());
            h[4..36].fill(i as u8);
            h[36..68].fill(!(i as u8));
            h[68..72].copy_from_slice(&time.to_le_bytes());
            h[72..76].copy_from_slice(&bits.to_le_bytes());
            h[76..].copy_from_slice(&(i * 77).to_le_bytes());
            h
        })
        .collect();
    for n in [0usize, 1, 3, 100] {
        let mut out = vec![0u8; lightwire_wire::MAX_MESSAGE_LEN];
        let (len, _) = lightwire_wire::HeadersCompact::encode_answer(&mut out, 5, 1000, n, |i| {
            coded.get(i).copied()
        })
        .expect("a seed codes");
        write("message", &format!("headers-compact-{n}"), &out[..len]);
    }

    // roundtrip: variant, three fields (selector, length bytes, fill: 96 bytes, three
    // hashes, then 5 and 7), 144 fixed bytes, two u32, flags, chain fill, buffer selector.
    for variant in 0..36u8 {
        let mut seed = vec![variant];
        seed.extend_from_slice(&[1, 96, 0, 0x11, 0, 5, 0x22, 0, 7, 0x33]);
        seed.extend((0..144).map(|i| i as u8));
        seed.extend_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0, 0x0f, 0x6f, 0]);
        write("roundtrip", &format!("variant-{variant}"), &seed);
    }

    // tlv: streams (mode 0), BigSizes (mode 1), a writer run (mode 2), features (mode 3).
    let streams: [&[u8]; 5] = [
        &[0x01, 0x01, 0xaa, 0x03, 0x00],
        &[0x01, 0x20, 0x6f, 0x6f, 0x6f],
        &[0xfd, 0x02, 0x01, 0x00, 0xfe, 0x02, 0x00, 0x00, 0x01, 0x00],
        &[0x1f, 0x00, 0x0f, 0x01, 0x2a],
        &[0x0f, 0xfd, 0x26, 0x02],
    ];
    for (i, s) in streams.iter().enumerate() {
        write("tlv", &format!("stream-{i}"), &[&[0u8][..], s].concat());
    }
    let sizes: [&[u8]; 6] = [
        &[0xfc],
        &[0xfd, 0x00, 0xfd],
        &[0xfe, 0x00, 0x01, 0x00, 0x00],
        &[0xff, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00],
        &[0xfd, 0x00, 0xfc],
        &[0xff, 0xff],
    ];
    for (i, s) in sizes.iter().enumerate() {
        write("tlv", &format!("bigsize-{i}"), &[&[1u8][..], s].concat());
    }
    write(
        "tlv",
        "writer",
        &[2, 0, 1, 6, 5, 1, 0, 5, 2, 4, 0, 2, 3, 1, 255],
    );
    write(
        "tlv",
        "features",
        &[
            3, 2, 5, 0x01, 0x02, 0x80, 0x00, 0x08, 2, 13, 4, 3, 9, 0, 15, 0, 16, 0,
        ],
    );
}
