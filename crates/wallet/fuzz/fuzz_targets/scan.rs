//! A silent-payment receiver's block scan (`lightwire_wallet::silent_block::BlockScanner`:
//! `filter_matches`, then `payments`) and the receiver it uses
//! (`lightwire_wallet::silent::Receiver`), against BIP352's sending side written here.
//!
//! Input: `scan key 32 (xored with a constant, so zeros are a valid key) || spend u16 ||
//! flags u8 || labels || mode u8 || ...`, then, by `mode % 2`:
//! * 0, an honest block: a transaction paying the receiver 0-3 times (each payment to the
//!   plain address or a label, among 0-2 taproot outputs paying others and a P2WPKH one,
//!   in the input's order), its inputs P2WPKH or P2TR keys of the input's secrets, beside
//!   a transaction paying only others; the tweak list holds both transactions' tweaks
//!   (BIP352 from the secret keys: `input_hash·A`) and 0-3 other points `k·G`, or, as the
//!   input says, not the paying one's, or a 33-byte entry that is not a point; the filter
//!   is the block's basic filter (BIP158, built with lightwire-filter), or input bytes.
//! * 1, garbage: the list's entries, the filter and the block are input bytes (each entry
//!   starts `02`/`03`; a block that does not parse is replaced by an empty one).
//!
//! Checked. `Receiver::new` refuses exactly a scan key that is zero or not below the
//! curve's order (`ScanKey`) and a spend key that is not a point (`SpendKey`);
//! `add_label(m)` gives `B_spend + hash_BIP0352/Label(b_scan || m)·G`. `filter_matches`:
//! an empty list is `Ok(false)`; a list with an entry that is not a point on the curve (by
//! k256's decoding) is `Silent(Tweak)`, before the filter is read; else a filter that does
//! not decode is `Filter` with `Filter::decode`'s error, and an honest filter matches when
//! the list holds the paying transaction's tweak (BIP158 has no false negatives).
//! `payments` is always `Ok`, and finds nothing after a failed `filter_matches`. Every
//! payment it reports is real: the output at `vout` of the transaction `txid` in the block
//! is a taproot output of x-only key `found.key`, `found.output` is its index among the
//! transaction's taproot outputs, and `(b_spend + found.tweak)·G` has that x (the receiver
//! can spend it). Honest block, with the paying tweak in the list: exactly the payments
//! sent, each with its `vout`, key, `k` (the sender's count), label, the tweak of the
//! list, and the private tweak `t_k` (plus the label's); without it, none. A scanner used
//! before for another list and block gives the same answers as a new one.
#![no_main]

use k256::elliptic_curve::PrimeField;
use k256::{ProjectivePoint, PublicKey, Scalar};
use libfuzzer_sys::fuzz_target;
use lightwire_primitives::{Block, BlockHash, write_tweak_list};
use lightwire_wallet::silent::{Receiver, SilentError};
use lightwire_wallet::silent_block::{BlockScanError, BlockScanner, Payment};
use lightwire_wallet_fuzz::{
    Cursor, Keys, TxIn, TxModel, compressed_point, hash160, ref_merkle_root, ref_tweak,
    ref_write_compact_size, small_secret, tagged,
};

/// Xored into the input's scan key, so that an empty input has a valid one.
const SCAN_XOR: [u8; 32] = [0x5c; 32];

/// A 32-byte hash as a scalar, if BIP352 may take it as one.
fn scalar(bytes: &[u8; 32]) -> Option<Scalar> {
    Option::<Scalar>::from(Scalar::from_repr((*bytes).into())).filter(|s| !bool::from(s.is_zero()))
}

fn x_of(p: &ProjectivePoint) -> [u8; 32] {
    let c = compressed_point(p);
    c[1..].try_into().expect("32 bytes")
}

fn p2tr(x: &[u8; 32]) -> Vec<u8> {
    let mut s = vec![0x51, 0x20];
    s.extend_from_slice(x);
    s
}

fn p2wpkh(key: &[u8; 33]) -> Vec<u8> {
    let mut s = vec![0x00, 0x14];
    s.extend_from_slice(&hash160(key));
    s
}

/// A block of `txs` (the first the coinbase) under a header of their Merkle root.
fn block_bytes(txs: &[TxModel]) -> Vec<u8> {
    let txids: Vec<[u8; 32]> = txs.iter().map(TxModel::txid).collect();
    let mut raw = Vec::new();
    raw.extend_from_slice(&4u32.to_le_bytes());
    raw.extend_from_slice(&[0; 32]);
    raw.extend_from_slice(&ref_merkle_root(&txids));
    raw.extend_from_slice(&[0; 12]);
    ref_write_compact_size(&mut raw, txs.len() as u64);
    for t in txs {
        raw.extend_from_slice(&t.serialize(true));
    }
    raw
}

fn coinbase() -> TxModel {
    TxModel {
        version: 2,
        inputs: vec![TxIn {
            prev_txid: [0; 32],
            prev_vout: u32::MAX,
            script_sig: vec![0x01, 0x01],
            sequence: u32::MAX,
            witness: vec![],
        }],
        outputs: vec![(50, vec![0x51])],
        lock_time: 0,
    }
}

/// A receiver as the sender sees it: `B_scan`, `B_spend`, and its labels `(m, tweak)`.
type Recipient<'a> = (
    &'a ProjectivePoint,
    &'a ProjectivePoint,
    &'a [(u32, Scalar)],
);

/// A payment the sender made: where, and what the receiver must report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sent {
    vout: u32,
    key: [u8; 32],
    tweak: [u8; 32],
    label: Option<u32>,
    k: u32,
}

/// A transaction from the input: 1-3 inputs (P2WPKH or P2TR key path, secrets from the
/// input) and its outputs; with `receiver` (`B_scan`, `B_spend`, labels `(m, tweak)`), it
/// pays it 0-3 times. Returns the transaction, its tweak (BIP352 from the secret keys)
/// and the payments.
fn sending(
    input: &mut Cursor<'_>,
    tag: u8,
    receiver: Option<Recipient<'_>>,
) -> (TxModel, Option<[u8; 33]>, Vec<Sent>) {
    let mut tx = TxModel {
        version: 2,
        inputs: vec![],
        outputs: vec![],
        lock_time: u32::from(tag),
    };
    let mut secrets = Vec::new();
    for i in 0..1 + input.u8() % 3 {
        let how = input.u8();
        let keys = Keys::of(small_secret(input.u16()));
        let mut prev = [tag; 32];
        prev[0] = how;
        prev[1] = i;
        let (witness, secret) = match how % 2 {
            0 => (vec![vec![0x30; 71], keys.compressed.to_vec()], keys.secret),
            _ => (vec![vec![0x01; 64]], keys.even),
        };
        secrets.push(secret);
        tx.inputs.push(TxIn {
            prev_txid: prev,
            prev_vout: u32::from(how >> 1),
            script_sig: vec![],
            sequence: u32::MAX,
            witness,
        });
    }
    let smallest = tx
        .inputs
        .iter()
        .map(|i| {
            let mut o = [0u8; 36];
            o[..32].copy_from_slice(&i.prev_txid);
            o[32..].copy_from_slice(&i.prev_vout.to_le_bytes());
            o
        })
        .min()
        .expect("an input");
    let tweak = ref_tweak(&secrets, &smallest);

    // Outputs: others first, then the payments, then an order from the input.
    let mut outputs: Vec<(Vec<u8>, Option<usize>)> = Vec::new();
    for _ in 0..input.u8() % 3 {
        let other = Keys::of(small_secret(input.u16()));
        outputs.push((p2tr(&other.x), None));
    }
    let change = Keys::of(small_secret(input.u16()));
    outputs.push((p2wpkh(&change.compressed), None));
    let mut sent = Vec::new();
    if let (Some((b_scan, b_spend, labels)), Some(_)) = (receiver, tweak) {
        // BIP352, sending: ecdh = input_hash·a·B_scan (the same point as b_scan·tweak).
        let a: Scalar = secrets.iter().fold(Scalar::ZERO, |s, x| s + x);
        let big_a = compressed_point(&ProjectivePoint::mul_by_generator(&a));
        let mut data = smallest.to_vec();
        data.extend_from_slice(&big_a);
        let input_hash = scalar(&tagged("BIP0352/Inputs", &data)).expect("a scalar");
        let ecdh = compressed_point(&(*b_scan * (input_hash * a)));
        for k in 0..u32::from(input.u8() % 4) {
            let which = input.u8();
            let (label, label_tweak) = match usize::from(which) % (labels.len() + 1) {
                0 => (None, Scalar::ZERO),
                l => (Some(labels[l - 1].0), labels[l - 1].1),
            };
            let mut data = ecdh.to_vec();
            data.extend_from_slice(&k.to_be_bytes());
            let t_k = scalar(&tagged("BIP0352/SharedSecret", &data)).expect("a scalar");
            let b_m = *b_spend + ProjectivePoint::mul_by_generator(&label_tweak);
            let p_k = b_m + ProjectivePoint::mul_by_generator(&t_k);
            let key = x_of(&p_k);
            outputs.push((p2tr(&key), Some(sent.len())));
            sent.push(Sent {
                vout: 0,
                key,
                tweak: (t_k + label_tweak).to_repr().into(),
                label,
                k,
            });
        }
    }
    for i in (1..outputs.len()).rev() {
        let j = usize::from(input.u8()) % (i + 1);
        outputs.swap(i, j);
    }
    for (vout, (script, payment)) in outputs.into_iter().enumerate() {
        if let Some(p) = payment {
            sent[p].vout = vout as u32;
        }
        tx.outputs.push((1000, script));
    }
    (tx, tweak, sent)
}

/// Whether 33 bytes are a compressed point of the curve (k256's SEC1 decoding).
fn is_point(t: &[u8; 33]) -> bool {
    matches!(t[0], 2 | 3) && PublicKey::from_sec1_bytes(t).is_ok()
}

fuzz_target!(|data: &[u8]| {
    let mut input = Cursor::new(data);
    let mut scan = [0u8; 32];
    let raw_scan = input.bytes(32);
    scan[..raw_scan.len()].copy_from_slice(raw_scan);
    scan.iter_mut().zip(SCAN_XOR).for_each(|(b, x)| *b ^= x);
    let spend_keys = Keys::of(small_secret(input.u16()));
    let flags = input.u8();
    let b_scan_secret = scalar(&scan);

    // The receiver, or the refusal of its keys.
    let mut spend = spend_keys.compressed;
    if flags & 1 == 1 {
        // x = 5 is not the x of a point (5^3 + 7 is not a square mod p).
        spend = [0; 33];
        spend[0] = 2 + (flags >> 1 & 1);
        spend[32] = 5;
    }
    let receiver = Receiver::new(&scan, &spend);
    let Some(b_scan_secret) = b_scan_secret else {
        assert_eq!(receiver.err(), Some(SilentError::ScanKey));
        return;
    };
    if flags & 1 == 1 {
        assert_eq!(receiver.err(), Some(SilentError::SpendKey));
        return;
    }
    let mut receiver = receiver.expect("valid keys");
    let b_scan = ProjectivePoint::mul_by_generator(&b_scan_secret);
    assert_eq!(receiver.scan_public(), compressed_point(&b_scan));
    let b_spend = ProjectivePoint::mul_by_generator(&spend_keys.secret);

    // Labels: the change label 0 always, and those the input adds.
    let label_of = |m: u32| {
        let mut data = b_scan_secret.to_repr().to_vec();
        data.extend_from_slice(&m.to_be_bytes());
        scalar(&tagged("BIP0352/Label", &data)).expect("a scalar")
    };
    let mut labels = vec![(0, label_of(0))];
    for _ in 0..input.u8() % 3 {
        let m = u32::from(input.u8());
        let b_m = receiver.add_label(m).expect("a label");
        let t = label_of(m);
        assert_eq!(
            b_m,
            compressed_point(&(b_spend + ProjectivePoint::mul_by_generator(&t))),
            "B_m of label {m}"
        );
        labels.push((m, t));
    }

    let mode = input.u8();
    let mut list_tweaks: Vec<[u8; 33]> = Vec::new();
    let filter: Vec<u8>;
    let raw: Vec<u8>;
    let mut expected: Option<Vec<Sent>> = None;
    let mut paying_tweak = None;
    let mut honest_filter = false;
    if mode.is_multiple_of(2) {
        let (paying, tweak, sent) = sending(&mut input, 1, Some((&b_scan, &b_spend, &labels)));
        let (other, other_tweak, _) = sending(&mut input, 2, None);
        let txs = [coinbase(), paying, other];
        raw = block_bytes(&txs);
        let hash = BlockHash::of_header(raw[..80].try_into().expect("a header"));
        let shape = input.u8();
        list_tweaks.extend(other_tweak);
        for _ in 0..shape % 4 {
            list_tweaks.push(Keys::of(small_secret(input.u16())).compressed);
        }
        if shape & 0x10 == 0 {
            list_tweaks.extend(tweak);
            paying_tweak = tweak;
        }
        if shape & 0x20 != 0 {
            let mut off = [0u8; 33];
            off[0] = 2 + (shape >> 6 & 1);
            off[32] = 5;
            list_tweaks.push(off);
        }
        expected = Some(if paying_tweak.is_some() { sent } else { vec![] });
        if shape & 0x80 == 0 {
            let mut f = Vec::new();
            lightwire_filter::basic_filter(&hash.0, &raw, [], &mut f).expect("the block parses");
            filter = f;
            honest_filter = true;
        } else {
            let n = usize::from(input.u8());
            filter = input.bytes(n).to_vec();
        }
    } else {
        for _ in 0..input.u8() % 5 {
            let mut t = [0u8; 33];
            let b = input.bytes(33);
            t[..b.len()].copy_from_slice(b);
            t[0] = 2 + (t[0] & 1);
            list_tweaks.push(t);
        }
        let n = usize::from(input.u8());
        filter = input.bytes(n).to_vec();
        let rest = input.rest();
        raw = match Block::parse(rest) {
            Ok(_) => rest.to_vec(),
            Err(_) => block_bytes(&[coinbase()]),
        };
    }
    let block = Block::parse(&raw).expect("a block");
    let hash = BlockHash::of_header(block.header()).0;
    // Repeated entries make a list that does not parse: leave them out.
    list_tweaks.sort_unstable();
    list_tweaks.dedup();
    let mut list_bytes = Vec::new();
    write_tweak_list(&mut list_tweaks.clone(), &mut list_bytes);
    let list = lightwire_primitives::TweakList::parse(&list_bytes).expect("a written list");

    // Twice: with a new scanner, and with one used before for another list and block.
    let mut used = BlockScanner::new();
    {
        let mut warm_up = Vec::new();
        write_tweak_list(&mut [Keys::of(Scalar::ONE).compressed], &mut warm_up);
        let warm_list = lightwire_primitives::TweakList::parse(&warm_up).expect("a list");
        let _ = used.filter_matches(&receiver, &warm_list, &[1, 0, 0], &[7; 32]);
        let empty = block_bytes(&[coinbase()]);
        let mut sink = Vec::new();
        used.payments(
            &receiver,
            &Block::parse(&empty).expect("a block"),
            &mut sink,
        )
        .expect("payments of a listed point");
    }
    let mut answers = Vec::new();
    for mut scanner in [BlockScanner::new(), used] {
        let matched = scanner.filter_matches(&receiver, &list, &filter, &hash);
        if list_tweaks.is_empty() {
            assert_eq!(matched, Ok(false), "an empty list");
        } else if !list_tweaks.iter().all(is_point) {
            assert_eq!(matched, Err(BlockScanError::Silent(SilentError::Tweak)));
        } else if let Err(e) = lightwire_filter::Filter::decode(&filter) {
            assert_eq!(matched, Err(BlockScanError::Filter(e)));
        } else if let Err(e) = matched {
            assert!(matches!(e, BlockScanError::Filter(_)), "{e:?}");
        }
        if honest_filter && paying_tweak.is_some() && list_tweaks.iter().all(is_point) {
            let sent = expected.as_ref().expect("honest");
            if !sent.is_empty() {
                assert_eq!(matched, Ok(true), "the filter holds the first payment");
            }
        }
        let mut found: Vec<Payment> = vec![];
        scanner
            .payments(&receiver, &block, &mut found)
            .expect("payments never fail");
        if let Err(BlockScanError::Silent(_)) = matched {
            assert!(found.is_empty(), "nothing after a failed match: {found:?}");
        }

        // Every payment reported is real and spendable.
        for p in &found {
            let tx = block
                .transactions()
                .find(|t| t.txid() == p.txid)
                .expect("the paying transaction is in the block");
            let script = tx
                .outputs()
                .nth(p.vout as usize)
                .expect("the output")
                .script;
            assert_eq!(script, p2tr(&p.found.key), "the output paid");
            let taproot_index = tx
                .outputs()
                .take(p.vout as usize)
                .filter(|o| o.script.len() == 34 && o.script[..2] == [0x51, 0x20])
                .count();
            assert_eq!(p.found.output, taproot_index);
            let t = Option::<Scalar>::from(Scalar::from_repr(p.found.tweak.into()))
                .expect("a private tweak");
            let key = ProjectivePoint::mul_by_generator(&(spend_keys.secret + t));
            assert_eq!(x_of(&key), p.found.key, "spendable");
            assert!(list_tweaks.contains(&p.tweak));
        }
        if let Some(sent) = &expected
            && list_tweaks.iter().all(is_point)
        {
            let mut got: Vec<Sent> = found
                .iter()
                .map(|p| Sent {
                    vout: p.vout,
                    key: p.found.key,
                    tweak: p.found.tweak,
                    label: p.found.label,
                    k: p.found.k,
                })
                .collect();
            got.sort_by_key(|s| s.vout);
            let mut want = sent.clone();
            want.sort_by_key(|s| s.vout);
            assert_eq!(got, want, "the payments sent");
            assert!(found.iter().all(|p| Some(p.tweak) == paying_tweak));
        }
        answers.push((matched, found));
    }
    assert_eq!(
        answers[0], answers[1],
        "a used scanner answers as a new one"
    );
});
