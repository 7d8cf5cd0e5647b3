//! Spends over random wallets, checked against a parse of the PSBT written and the
//! transaction a signer would make of it (signatures as long as they may be), and the
//! writer against BIP174's test vectors.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use alloc::vec;
use alloc::vec::Vec;

use lightwire_primitives::Tx;

use super::*;

fn get<'a>(map: &[(&'a [u8], &'a [u8])], kind: u8) -> Option<(&'a [u8], &'a [u8])> {
    map.iter().find(|(k, _)| k[0] == kind).copied()
}

/// A transaction paying `script` `value` at output `vout` (others before it), for a
/// coin's funding transaction; `salt` makes each one different.
fn funding(script: &[u8], value: u64, vout: u32, salt: u64) -> Vec<u8> {
    let mut tx = vec![2, 0, 0, 0, 1];
    tx.extend_from_slice(&[7u8; 32]);
    tx.extend_from_slice(&salt.to_le_bytes()[..4]);
    tx.extend_from_slice(&[0, 0xff, 0xff, 0xff, 0xff]);
    tx.push(vout as u8 + 1);
    for _ in 0..vout {
        tx.extend_from_slice(&1000u64.to_le_bytes());
        tx.extend_from_slice(&[1, 0x51]);
    }
    tx.extend_from_slice(&value.to_le_bytes());
    write_compact_size(&mut tx, script.len() as u64);
    tx.extend_from_slice(script);
    tx.extend_from_slice(&salt.to_le_bytes()[4..]);
    tx
}

/// A coin of `kind` for `pubkey`, with its funding transaction.
fn coin(kind: Kind, pubkey: &[u8; 33], value: u64, salt: u64) -> Spendable {
    let h = hash::hash160(pubkey);
    let script = match kind {
        Kind::Pkh => hash::p2pkh(&h),
        Kind::ShWpkh => hash::p2sh(&hash::hash160(&hash::witness(0, &h))),
        Kind::Wpkh => hash::witness(0, &h),
        Kind::Tr => hash::witness(1, &pubkey[1..]),
    };
    let vout = (salt % 3) as u32;
    let f = funding(&script, value, vout, salt);
    Spendable {
        outpoint: Outpoint {
            txid: Tx::parse(&f).unwrap().txid(),
            vout,
        },
        value,
        script,
        kind,
        funding: Some(f.into()),
        silent: None,
    }
}

/// The key of the test's coin `c`: from the salt its funding transaction carries.
fn key_of(c: &Spendable) -> [u8; 33] {
    let f = c
        .funding
        .as_ref()
        .expect("a test coin has its funding transaction");
    let mut salt = [0u8; 8];
    salt[..4].copy_from_slice(&f[37..41]);
    salt[4..].copy_from_slice(&f[f.len() - 4..]);
    key_for(u64::from_le_bytes(salt))
}

fn key_for(salt: u64) -> [u8; 33] {
    let mut k = [3u8; 33];
    k[1..9].copy_from_slice(&salt.to_le_bytes());
    k
}

fn source(c: &Spendable) -> Result<Option<KeySource>, DescriptorError> {
    Ok(Some(KeySource {
        pubkey: key_of(c),
        fingerprint: [1, 2, 3, 4],
        path: vec![84 | descriptor_hardened(), 1 | descriptor_hardened(), 0, 7],
    }))
}

fn descriptor_hardened() -> u32 {
    crate::descriptor::HARDENED
}

/// A wallet of `n` coins of random kinds and values whose keys are what `source` says.
fn wallet(rng: &mut SplitMix, n: usize) -> Vec<Spendable> {
    let kinds = [Kind::Pkh, Kind::ShWpkh, Kind::Wpkh, Kind::Tr];
    (0..n)
        .map(|i| {
            let kind = kinds[rng.below(4) as usize];
            // Values from dust-ish to a few bitcoin, most in between.
            let value = match rng.below(4) {
                0 => 300 + rng.below(5_000),
                1 => 10_000 + rng.below(1_000_000),
                2 => 1_000_000 + rng.below(50_000_000),
                _ => 100_000_000 + rng.below(400_000_000),
            };
            let salt = rng.next() ^ i as u64;
            coin(kind, &key_for(salt), value, salt)
        })
        .collect()
}

/// The transaction a signer makes of the PSBT: budgeted-length signatures in place.
fn signed_weight(unsigned: &[u8], kinds: &[Kind]) -> u64 {
    let tx = Tx::parse(unsigned).unwrap();
    let segwit = kinds.iter().any(|k| *k != Kind::Pkh);
    let mut out = Vec::new();
    out.extend_from_slice(&tx.version().to_le_bytes());
    if segwit {
        out.extend_from_slice(&[0, 1]);
    }
    write_compact_size(&mut out, kinds.len() as u64);
    for (input, kind) in tx.inputs().zip(kinds) {
        out.extend_from_slice(input.prev_txid);
        out.extend_from_slice(&input.prev_vout.to_le_bytes());
        let script_sig: Vec<u8> = match kind {
            Kind::Pkh => [&[72][..], &[0x30; 72], &[33], &[2; 33]].concat(),
            Kind::ShWpkh => [&[22][..], &[0; 22]].concat(),
            _ => Vec::new(),
        };
        write_compact_size(&mut out, script_sig.len() as u64);
        out.extend_from_slice(&script_sig);
        out.extend_from_slice(&input.sequence.to_le_bytes());
    }
    let outputs: Vec<_> = tx.outputs().collect();
    write_compact_size(&mut out, outputs.len() as u64);
    for o in &outputs {
        out.extend_from_slice(&o.value.to_le_bytes());
        write_compact_size(&mut out, o.script.len() as u64);
        out.extend_from_slice(o.script);
    }
    if segwit {
        for kind in kinds {
            match kind {
                Kind::Pkh => out.push(0),
                Kind::Tr => out.extend_from_slice(&[&[1, 65][..], &[1; 65]].concat()),
                _ => out.extend_from_slice(&[&[2, 72][..], &[0x30; 72], &[33], &[2; 33]].concat()),
            }
        }
    }
    out.extend_from_slice(&tx.lock_time().to_le_bytes());
    Tx::parse(&out).unwrap().weight() as u64
}

/// Everything a built spend must be, checked from its PSBT alone.
fn check(req: &Request<'_>, built: &Built) {
    let maps = psbt::read_maps(&built.psbt).unwrap();
    let unsigned = &get(&maps[0], psbt::GLOBAL_UNSIGNED_TX).unwrap().1;
    let tx = Tx::parse(unsigned).unwrap();
    assert_eq!(tx.version(), 2);
    assert_eq!(tx.lock_time(), req.lock_time);
    let inputs: Vec<_> = tx.inputs().collect();
    let outputs: Vec<_> = tx.outputs().collect();
    assert_eq!(maps.len(), 1 + inputs.len() + outputs.len());
    // Each coin spent once, each one of those offered.
    let mut spent: Vec<Outpoint> = inputs
        .iter()
        .map(|i| Outpoint {
            txid: i.prev_txid(),
            vout: i.prev_vout,
        })
        .collect();
    assert_eq!(spent, built.spent);
    spent.sort();
    spent.dedup();
    assert_eq!(spent.len(), inputs.len(), "a coin spent twice");
    let mut kinds = Vec::new();
    let mut total_in = 0u64;
    for (i, input) in inputs.iter().enumerate() {
        assert!(input.script_sig.is_empty() && input.witness.is_empty());
        assert_eq!(input.sequence, SEQUENCE);
        let c = req
            .coins
            .iter()
            .find(|c| c.outpoint.txid == input.prev_txid() && c.outpoint.vout == input.prev_vout)
            .expect("a coin offered");
        kinds.push(c.kind);
        total_in += c.value;
        let map = &maps[1 + i];
        let key = key_of(c);
        match c.kind {
            Kind::Pkh => {
                let f = &get(map, psbt::IN_NON_WITNESS_UTXO).unwrap().1;
                assert_eq!(Tx::parse(f).unwrap().txid(), c.outpoint.txid);
                assert!(get(map, psbt::IN_WITNESS_UTXO).is_none());
            }
            kind => {
                let u = &get(map, psbt::IN_WITNESS_UTXO).unwrap().1;
                assert_eq!(u64::from_le_bytes(u[..8].try_into().unwrap()), c.value);
                assert_eq!(&u[9..], &c.script[..]);
                assert_eq!(
                    get(map, psbt::IN_NON_WITNESS_UTXO).is_some(),
                    kind != Kind::Tr
                );
            }
        }
        match c.kind {
            Kind::Tr => {
                let (k, v) = get(map, psbt::IN_TAP_BIP32_DERIVATION).unwrap();
                assert_eq!(&k[1..], &key[1..]);
                assert_eq!(v[0], 0, "no leaf hashes");
                assert_eq!(&v[1..5], &[1, 2, 3, 4]);
                assert_eq!(get(map, psbt::IN_TAP_INTERNAL_KEY).unwrap().1, &key[1..]);
            }
            kind => {
                let (k, v) = get(map, psbt::IN_BIP32_DERIVATION).unwrap();
                assert_eq!(&k[1..], &key[..]);
                assert_eq!(v.len(), 4 + 16);
                let redeem = get(map, psbt::IN_REDEEM_SCRIPT).map(|(_, r)| r);
                if kind == Kind::ShWpkh {
                    let r = redeem.unwrap();
                    assert_eq!(hash::p2sh(&hash::hash160(r)), c.script);
                } else {
                    assert!(redeem.is_none());
                }
            }
        }
    }
    // The outputs asked for, in order, and the change where it says.
    let mut asked = outputs
        .iter()
        .enumerate()
        .filter(|(i, _)| built.change.is_none_or(|(c, _)| c as usize != *i));
    for (script, value) in req.outputs {
        let (_, o) = asked.next().unwrap();
        assert_eq!((o.script, o.value), (&script[..], *value));
    }
    assert!(asked.next().is_none());
    if let Some((at, value)) = built.change {
        let c = req.change.unwrap();
        let o = &outputs[at as usize];
        assert_eq!((o.script, o.value), (&c.script[..], value));
        assert!(value >= dust_threshold(&c.script), "dust change");
        let out_map = &maps[1 + inputs.len() + at as usize];
        let redeem = get(out_map, psbt::OUT_REDEEM_SCRIPT).map(|(_, r)| r);
        if c.kind == Kind::ShWpkh {
            let r = redeem.expect("a P2SH change output's redeem script");
            assert_eq!(hash::p2sh(&hash::hash160(r)), c.script);
        } else {
            assert!(redeem.is_none());
        }
        assert!(
            get(
                &maps[1 + inputs.len() + at as usize],
                psbt::OUT_BIP32_DERIVATION
            )
            .is_some()
                || get(
                    &maps[1 + inputs.len() + at as usize],
                    psbt::OUT_TAP_INTERNAL_KEY
                )
                .is_some()
        );
    }
    // The fee: what is left, at least the rate for the signed size.
    let total_out: u64 = outputs.iter().map(|o| o.value).sum();
    assert_eq!(built.fee, total_in - total_out);
    let weight = signed_weight(unsigned, &kinds);
    let vsize = weight.div_ceil(4);
    assert!(
        vsize <= built.vsize,
        "budgeted {} vB, signed {vsize}",
        built.vsize
    );
    let least = req.rate.fee(vsize);
    assert!(
        built.fee >= least,
        "fee {} below {least} for {vsize} vB",
        built.fee
    );
    if built.change.is_some() {
        // With change, nothing more than the size's fee (and its rounding).
        assert!(
            built.fee <= req.rate.fee(built.vsize),
            "fee {} for {} vB",
            built.fee,
            built.vsize
        );
    }
    assert!(built.fee <= MAX_FEE);
}

fn change_of(kind: Kind) -> Change {
    let pubkey = [2u8; 33];
    let script = match kind {
        Kind::Tr => hash::witness(1, &pubkey[1..]),
        Kind::ShWpkh => hash::p2sh(&hash::hash160(&hash::witness(0, &hash::hash160(&pubkey)))),
        _ => hash::witness(0, &hash::hash160(&pubkey)),
    };
    Change {
        script,
        kind,
        key: Some(KeySource {
            pubkey,
            fingerprint: [9, 9, 9, 9],
            path: vec![1, 2],
        }),
    }
}

#[test]
fn random_wallets_spend_each_coin_once_pay_the_rate_and_make_no_dust() {
    let mut rng = SplitMix(0x5eed);
    let (mut built_count, mut refused, mut changeless) = (0, 0, 0);
    for round in 0..400 {
        let n = 1 + rng.below(40) as usize;
        let coins = wallet(&mut rng, n);
        let outputs: Vec<(Vec<u8>, u64)> = (0..1 + rng.below(3))
            .map(|i| {
                let script = if i % 2 == 0 {
                    hash::witness(0, &[i as u8; 20])
                } else {
                    hash::p2pkh(&[i as u8; 20])
                };
                (script, 1_000 + rng.below(300_000_000))
            })
            .collect();
        let rate = FeeRate(1_000 + rng.below(200_000));
        let change = change_of([Kind::Wpkh, Kind::Tr, Kind::ShWpkh][round % 3]);
        let req = Request {
            coins: &coins,
            max: None,
            spend_all: round % 7 == 0,
            outputs: &outputs,
            rate,
            change: Some(&change),
            lock_time: 800_000,
            seed: rng.next(),
            ancestors: None,
        };
        let available: u64 = coins.iter().map(|c| c.value).sum();
        let paid: u64 = outputs.iter().map(|(_, v)| v).sum();
        match build(&req, source) {
            Ok(b) => {
                check(&req, &b);
                built_count += 1;
                changeless += usize::from(b.change.is_none());
            }
            Err(SpendError::InsufficientFunds {
                needed,
                available: a,
            }) => {
                assert_eq!(a, available);
                assert!(needed > paid);
                // Short indeed: even every coin that is worth spending does not pay.
                let worth: u64 = coins
                    .iter()
                    .filter(|c| c.value > rate.fee(input_weight(c.kind).div_ceil(4)))
                    .map(|c| c.value - rate.fee(input_weight(c.kind).div_ceil(4)))
                    .sum();
                assert!(
                    worth < paid + rate.fee(60),
                    "refused with {worth} worth for {paid}"
                );
                refused += 1;
            }
            Err(SpendError::FeeTooHigh(fee)) => assert!(fee > MAX_FEE),
            Err(e) => panic!("round {round}: {e}"),
        }
    }
    assert!(
        built_count > 200 && refused > 20 && changeless > 5,
        "{built_count} built, {refused} refused, {changeless} without change"
    );
}

#[test]
fn branch_and_bound_pays_an_exact_amount_without_change() {
    let pubkey = [2u8; 33];
    let rate = FeeRate(5_000);
    let coins: Vec<Spendable> = [50_000u64, 120_000, 33_000, 1_000_000]
        .iter()
        .enumerate()
        .map(|(i, &v)| coin(Kind::Wpkh, &pubkey, v, i as u64))
        .collect();
    // 120,000 + 33,000 less the fee of a transaction spending them to one P2WPKH.
    let script = hash::witness(0, &[1; 20]);
    let weight = frame_weight(2, 1, true) + 2 * input_weight(Kind::Wpkh) + output_weight(&script);
    // (Less a few satoshis: a fee rounds up, and the target leaves room for it.)
    let outputs = [(script, 153_000 - rate.fee(vsize(weight)) - 10)];
    let change = change_of(Kind::Wpkh);
    let req = Request {
        coins: &coins,
        max: None,
        spend_all: false,
        outputs: &outputs,
        rate,
        change: Some(&change),
        lock_time: 0,
        seed: 1,
        ancestors: None,
    };
    let b = build(&req, source).unwrap();
    check(&req, &b);
    assert_eq!(b.change, None);
    let mut spent = b.spent.clone();
    spent.sort();
    let mut want = [coins[1].outpoint, coins[2].outpoint];
    want.sort();
    assert_eq!(spent, want);
}

/// Send-max (Bitcoin Core's `sendall`): every coin offered is spent, in one output and
/// any others asked, with no change; the max output gets what the coins hold less the
/// others and the fee of the transaction as signed, exactly (no excess left to the fee).
/// Too little left for the max output is dust or a shortfall, named.
#[test]
fn send_max_spends_every_coin_with_no_change() {
    let pubkey = [2u8; 33];
    let coins = [
        coin(Kind::Wpkh, &pubkey, 120_000, 1),
        coin(Kind::Tr, &key_for(2), 33_000, 2),
        coin(Kind::Pkh, &key_for(3), 9_000, 3),
    ];
    let change = change_of(Kind::Wpkh);
    let to = hash::witness(0, &[1; 20]);
    let other = hash::witness(1, &[7; 32]);
    let rate = FeeRate(3_000);
    let run = |coins: &[Spendable], outputs: &[(Vec<u8>, u64)], at: usize| {
        let req = Request {
            coins,
            max: Some(at),
            spend_all: false,
            outputs,
            rate,
            change: Some(&change),
            lock_time: 0,
            seed: 5,
            ancestors: None,
        };
        build(&req, source).map(|b| (b, outputs.to_vec()))
    };
    for outputs in [
        vec![(to.clone(), 0)],
        vec![(other.clone(), 20_000), (to.clone(), 0)],
    ] {
        let at = outputs.len() - 1;
        let (b, _) = run(&coins, &outputs, at).unwrap();
        assert_eq!(b.change, None, "no change");
        assert_eq!(b.spent.len(), 3, "every coin");
        let maps = psbt::read_maps(&b.psbt).unwrap();
        let unsigned = &get(&maps[0], psbt::GLOBAL_UNSIGNED_TX).unwrap().1;
        let tx = Tx::parse(unsigned).unwrap();
        let paid: Vec<u64> = tx.outputs().map(|o| o.value).collect();
        let others: u64 = outputs[..at].iter().map(|(_, v)| v).sum();
        assert_eq!(paid[at], 162_000 - others - b.fee);
        assert_eq!(b.fee, rate.fee(b.vsize), "the rate's fee, no excess");
        // The signed transaction is no larger than budgeted (`check`'s rules).
        let mut laid = outputs.clone();
        laid[at].1 = paid[at];
        let exact = Request {
            coins: &coins,
            max: None,
            spend_all: true,
            outputs: &laid,
            rate,
            change: None,
            lock_time: 0,
            seed: 5,
            ancestors: None,
        };
        check(&exact, &b);
    }
    // Less left than the output's dust threshold, or less than the other outputs and fee.
    let small = [coin(Kind::Wpkh, &pubkey, 600, 9)];
    assert!(matches!(
        run(&small, &[(to.clone(), 0)], 0),
        Err(SpendError::Dust { index: 0, .. })
    ));
    assert!(matches!(
        run(&small, &[(other.clone(), 20_000), (to.clone(), 0)], 1),
        Err(SpendError::InsufficientFunds { available: 600, .. })
    ));
    assert!(matches!(
        run(&[], &[(to.clone(), 0)], 0),
        Err(SpendError::InsufficientFunds { .. })
    ));
}

#[test]
fn refusals_name_the_rule() {
    let pubkey = [2u8; 33];
    let coins = [coin(Kind::Wpkh, &pubkey, 100_000, 1)];
    let change = change_of(Kind::Wpkh);
    let p2wpkh = hash::witness(0, &[1; 20]);
    let run = |outputs: &[(Vec<u8>, u64)], coins: &[Spendable], change: Option<&Change>| {
        build(
            &Request {
                coins,
                max: None,
                spend_all: false,
                outputs,
                rate: FeeRate(2_000),
                change,
                lock_time: 0,
                seed: 0,
                ancestors: None,
            },
            source,
        )
    };
    assert_eq!(run(&[], &coins, Some(&change)), Err(SpendError::NoOutputs));
    assert_eq!(
        run(&[(p2wpkh.clone(), 293)], &coins, Some(&change)),
        Err(SpendError::Dust {
            index: 0,
            value: 293,
            threshold: 294
        }),
        "Core's P2WPKH dust threshold"
    );
    assert_eq!(dust_threshold(&hash::p2pkh(&[0; 20])), 546);
    assert_eq!(dust_threshold(&hash::witness(1, &[0; 32])), 330);
    assert_eq!(
        run(
            &[(p2wpkh.clone(), MAX_MONEY), (p2wpkh.clone(), 1000)],
            &coins,
            Some(&change)
        ),
        Err(SpendError::Amount)
    );
    assert!(matches!(
        run(&[(p2wpkh.clone(), 99_900)], &coins, Some(&change)),
        Err(SpendError::InsufficientFunds {
            available: 100_000,
            ..
        })
    ));
    // Change due and nowhere to send it.
    assert_eq!(
        run(&[(p2wpkh.clone(), 50_000)], &coins, None),
        Err(SpendError::NoChangeAddress)
    );
    // A legacy coin without its funding transaction.
    let mut legacy = coin(Kind::Pkh, &pubkey, 100_000, 2);
    legacy.funding = None;
    assert_eq!(
        run(
            &[(p2wpkh.clone(), 50_000)],
            &[legacy.clone()],
            Some(&change)
        ),
        Err(SpendError::MissingFunding(0))
    );
    // One whose funding transaction is another's is as good as none.
    legacy.funding = coins[0].funding.clone();
    assert_eq!(
        run(&[(p2wpkh, 50_000)], &[legacy], Some(&change)),
        Err(SpendError::MissingFunding(0))
    );
}

#[test]
fn a_fee_rate_rounds_up_and_reads_sat_per_vbyte() {
    assert_eq!(FeeRate(1_000).fee(141), 141);
    assert_eq!(FeeRate(1_500).fee(141), 212, "211.5 rounds up");
    assert_eq!(FeeRate::from_sat_per_vb(2.5), Some(FeeRate(2_500)));
    assert_eq!(FeeRate::from_sat_per_vb(f64::NAN), None);
    assert_eq!(FeeRate::from_sat_per_vb(-1.0), None);
    // Core's input sizes with 72-byte signatures.
    assert_eq!(input_weight(Kind::Wpkh).div_ceil(4), 68);
    assert_eq!(input_weight(Kind::ShWpkh).div_ceil(4), 91);
    assert_eq!(input_weight(Kind::Pkh) / 4, 148);
    assert_eq!(input_weight(Kind::Tr).div_ceil(4), 58);
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// BIP174's creator and updater test vectors: the same maps written field by field.
#[test]
fn the_writer_matches_bip174s_creator_and_updater() {
    let unsigned = unhex(
        "020000000258e87a21b56daf0c23be8e7070456c336f7cbaa5c8757924f545887bb2abdd750000000000ffffffff838d0427d0ec650a68aa46bb0b098aea4422c071b2ca78352a077959d07cea1d0100000000ffffffff0270aaf00800000000160014d85c2b71d0060b09c9886aeb815e50991dda124d00e1f5050000000016001400aea9a2e5f0f876a588df5546e8742d1d87008f00000000",
    );
    let mut w = psbt::Writer::new(&unsigned);
    (0..4).for_each(|_| w.end_map());
    assert_eq!(
        psbt::base64(&w.finish()),
        "cHNidP8BAJoCAAAAAljoeiG1ba8MI76OcHBFbDNvfLqlyHV5JPVFiHuyq911AAAAAAD/////g40EJ9DsZQpoqka7CwmK6kQiwHGyyng1Kgd5WdB86h0BAAAAAP////8CcKrwCAAAAAAWABTYXCtx0AYLCcmIauuBXlCZHdoSTQDh9QUAAAAAFgAUAK6pouXw+HaliN9VRuh0LR2HAI8AAAAAAAAAAAA="
    );
    let fingerprint = [0xd9, 0x0c, 0x6a, 0x4f];
    let h = descriptor_hardened();
    let path = |i: u32| [h, h, h | i];
    let key = |s: &str| unhex(s);
    let mut w = psbt::Writer::new(&unsigned);
    w.pair(psbt::IN_NON_WITNESS_UTXO, &[], &unhex("0200000001aad73931018bd25f84ae400b68848be09db706eac2ac18298babee71ab656f8b0000000048473044022058f6fc7c6a33e1b31548d481c826c015bd30135aad42cd67790dab66d2ad243b02204a1ced2604c6735b6393e5b41691dd78b00f0c5942fb9f751856faa938157dba01feffffff0280f0fa020000000017a9140fb9463421696b82c833af241c78c17ddbde493487d0f20a270100000017a91429ca74f8a08f81999428185c97b5d852e4063f618765000000"));
    w.pair(psbt::IN_REDEEM_SCRIPT, &[], &unhex("5221029583bf39ae0a609747ad199addd634fa6108559d6c5cd39b4c2183f1ab96e07f2102dab61ff49a14db6a7d02b0cd1fbb78fc4b18312b5b4e54dae4dba2fbfef536d752ae"));
    w.derivation(
        psbt::IN_BIP32_DERIVATION,
        &key("029583bf39ae0a609747ad199addd634fa6108559d6c5cd39b4c2183f1ab96e07f"),
        fingerprint,
        &path(0),
    );
    w.derivation(
        psbt::IN_BIP32_DERIVATION,
        &key("02dab61ff49a14db6a7d02b0cd1fbb78fc4b18312b5b4e54dae4dba2fbfef536d7"),
        fingerprint,
        &path(1),
    );
    w.end_map();
    w.pair(
        psbt::IN_WITNESS_UTXO,
        &[],
        &unhex("00c2eb0b0000000017a914b7f5faf40e3d40a5a459b1db3535f2b72fa921e887"),
    );
    w.pair(
        psbt::IN_REDEEM_SCRIPT,
        &[],
        &unhex("00208c2353173743b595dfb4a07b72ba8e42e3797da74e87fe7d9d7497e3b2028903"),
    );
    w.pair(0x05, &[], &unhex("522103089dc10c7ac6db54f91329af617333db388cead0c231f723379d1b99030b02dc21023add904f3d6dcf59ddb906b0dee23529b7ffb9ed50e5e86151926860221f0e7352ae"));
    w.derivation(
        psbt::IN_BIP32_DERIVATION,
        &key("023add904f3d6dcf59ddb906b0dee23529b7ffb9ed50e5e86151926860221f0e73"),
        fingerprint,
        &path(3),
    );
    w.derivation(
        psbt::IN_BIP32_DERIVATION,
        &key("03089dc10c7ac6db54f91329af617333db388cead0c231f723379d1b99030b02dc"),
        fingerprint,
        &path(2),
    );
    w.end_map();
    w.derivation(
        psbt::OUT_BIP32_DERIVATION,
        &key("03a9a4c37f5996d3aa25dbac6b570af0650394492942460b354753ed9eeca58771"),
        fingerprint,
        &path(4),
    );
    w.end_map();
    w.derivation(
        psbt::OUT_BIP32_DERIVATION,
        &key("027f6399757d2eff55a136ad02c684b1838b6556e5f1b6b34282a94b6b50051096"),
        fingerprint,
        &path(5),
    );
    w.end_map();
    assert_eq!(w.finish(), unhex(UPDATED));
}

/// BIP174's updater vector, whole.
const UPDATED: &str = concat!(
    "70736274ff01009a020000000258e87a21b56daf0c23be8e7070456c336f7cbaa5c8757924f545887bb2abdd75000000",
    "0000ffffffff838d0427d0ec650a68aa46bb0b098aea4422c071b2ca78352a077959d07cea1d0100000000ffffffff02",
    "70aaf00800000000160014d85c2b71d0060b09c9886aeb815e50991dda124d00e1f5050000000016001400aea9a2e5f0",
    "f876a588df5546e8742d1d87008f00000000000100bb0200000001aad73931018bd25f84ae400b68848be09db706eac2",
    "ac18298babee71ab656f8b0000000048473044022058f6fc7c6a33e1b31548d481c826c015bd30135aad42cd67790dab",
    "66d2ad243b02204a1ced2604c6735b6393e5b41691dd78b00f0c5942fb9f751856faa938157dba01feffffff0280f0fa",
    "020000000017a9140fb9463421696b82c833af241c78c17ddbde493487d0f20a270100000017a91429ca74f8a08f8199",
    "9428185c97b5d852e4063f6187650000000104475221029583bf39ae0a609747ad199addd634fa6108559d6c5cd39b4c",
    "2183f1ab96e07f2102dab61ff49a14db6a7d02b0cd1fbb78fc4b18312b5b4e54dae4dba2fbfef536d752ae2206029583",
    "bf39ae0a609747ad199addd634fa6108559d6c5cd39b4c2183f1ab96e07f10d90c6a4f00000080000000800000008022",
    "0602dab61ff49a14db6a7d02b0cd1fbb78fc4b18312b5b4e54dae4dba2fbfef536d710d90c6a4f000000800000008001",
    "0000800001012000c2eb0b0000000017a914b7f5faf40e3d40a5a459b1db3535f2b72fa921e88701042200208c235317",
    "3743b595dfb4a07b72ba8e42e3797da74e87fe7d9d7497e3b2028903010547522103089dc10c7ac6db54f91329af6173",
    "33db388cead0c231f723379d1b99030b02dc21023add904f3d6dcf59ddb906b0dee23529b7ffb9ed50e5e86151926860",
    "221f0e7352ae2206023add904f3d6dcf59ddb906b0dee23529b7ffb9ed50e5e86151926860221f0e7310d90c6a4f0000",
    "00800000008003000080220603089dc10c7ac6db54f91329af617333db388cead0c231f723379d1b99030b02dc10d90c",
    "6a4f00000080000000800200008000220203a9a4c37f5996d3aa25dbac6b570af0650394492942460b354753ed9eeca5",
    "877110d90c6a4f000000800000008004000080002202027f6399757d2eff55a136ad02c684b1838b6556e5f1b6b34282",
    "a94b6b5005109610d90c6a4f00000080000000800500008000",
);

/// A silent payment's coin beside an ordinary one: the PSBT is version 2 (BIP370: no
/// unsigned transaction; each input's outpoint and sequence, each output's amount and
/// script), the silent coin's input carries BIP376's tweak and spend key (a zero
/// fingerprint, no path), the other its key origin as before; read back, it describes the
/// same transaction a version 0 PSBT of the same coins does, and once finalized it
/// extracts to it. A version 2 PSBT missing a required field is refused, naming it.
#[test]
fn a_silent_payment_coin_makes_a_version_2_psbt_with_its_tweak() {
    use k256::elliptic_curve::sec1::ToSec1Point;
    let (spend_secret, tweak) = (k256::Scalar::from(5u64), k256::Scalar::from(7u64));
    let point = |s: k256::Scalar| {
        let p = (k256::ProjectivePoint::GENERATOR * s).to_affine();
        let b: [u8; 33] = p.to_sec1_point(true).as_bytes().try_into().unwrap();
        b
    };
    let spend = point(spend_secret);
    let output_key = point(spend_secret + tweak);
    let mut silent_coin = coin(Kind::Tr, &output_key, 80_000, 11);
    let mut tweak_bytes = [0u8; 32];
    tweak_bytes.copy_from_slice(&tweak.to_bytes());
    // The spend key's origin as the application gave it (BIP352's path for a spend key).
    let spend_origin = crate::descriptor::KeyOrigin::parse("[d34db33f/352h/0h/0h/0h/0]").unwrap();
    silent_coin.silent = Some(SilentKey {
        tweak: tweak_bytes,
        spend,
        origin: Some(spend_origin.clone()),
    });
    let other = coin(Kind::Wpkh, &key_for(12), 50_000, 12);
    let coins = [silent_coin.clone(), other];
    let outputs = [(hash::witness(0, &[9; 20]), 100_000u64)];
    let change = Change {
        script: hash::witness(0, &[8; 20]),
        kind: Kind::Wpkh,
        key: None,
    };
    let req = Request {
        coins: &coins,
        max: None,
        spend_all: true,
        outputs: &outputs,
        rate: FeeRate(2_000),
        change: Some(&change),
        lock_time: 800_000,
        seed: 3,
        ancestors: None,
    };
    let sources = |c: &Spendable| {
        if c.silent.is_some() {
            Ok(None)
        } else {
            source(c)
        }
    };
    let built = build(&req, sources).unwrap();
    let maps = psbt::read_maps(&built.psbt).unwrap();
    assert!(get(&maps[0], psbt::GLOBAL_UNSIGNED_TX).is_none());
    assert_eq!(
        get(&maps[0], psbt::GLOBAL_VERSION).unwrap().1,
        2u32.to_le_bytes()
    );
    assert_eq!(maps.len(), 1 + 2 + 2, "two inputs, a payment and change");
    let silent_in = (1..=2)
        .find(|&i| get(&maps[i], psbt::IN_SP_TWEAK).is_some())
        .expect("the silent coin's input");
    let m = &maps[silent_in];
    assert_eq!(get(m, psbt::IN_SP_TWEAK).unwrap().1, tweak_bytes);
    let (key, origin) = get(m, psbt::IN_SP_SPEND_BIP32_DERIVATION).unwrap();
    let mut want = vec![0xd3, 0x4d, 0xb3, 0x3f];
    use crate::descriptor::HARDENED;
    for step in [352 | HARDENED, HARDENED, HARDENED, HARDENED, 0] {
        want.extend_from_slice(&u32::to_le_bytes(step));
    }
    assert_eq!((&key[1..], origin), (&spend[..], &want[..]));
    assert_eq!(spend_origin.text(), "[d34db33f/352h/0h/0h/0h/0]");
    assert_eq!(
        get(m, psbt::IN_PREVIOUS_TXID).unwrap().1,
        silent_coin.outpoint.txid.as_bytes()
    );
    assert!(get(m, psbt::IN_WITNESS_UTXO).is_some());
    assert!(get(m, psbt::IN_TAP_BIP32_DERIVATION).is_none());
    let other_in = 3 - silent_in;
    assert!(get(&maps[other_in], psbt::IN_BIP32_DERIVATION).is_some());
    assert!(get(&maps[other_in], psbt::IN_SP_TWEAK).is_none());
    // The same coins without the silent one's tweak: a version 0 PSBT of the same
    // transaction (same order, change and fee).
    let plain = [
        Spendable {
            silent: None,
            ..silent_coin.clone()
        },
        coins[1].clone(),
    ];
    let v0 = build(
        &Request {
            coins: &plain,
            max: None,
            ..req
        },
        |c: &Spendable| {
            if c.kind == Kind::Tr {
                Ok(None)
            } else {
                source(c)
            }
        },
    )
    .unwrap();
    assert_eq!(
        (v0.fee, v0.change, v0.vsize),
        (built.fee, built.change, built.vsize)
    );
    let v0_maps = psbt::read_maps(&v0.psbt).unwrap();
    assert_eq!(
        psbt::outputs(&maps).unwrap(),
        psbt::outputs(&v0_maps).unwrap()
    );
    // Finalized (a signature's length of witness for each input), both extract to one
    // transaction.
    let finalize = |bytes: &[u8]| -> Vec<u8> {
        let maps = psbt::read_maps(bytes).unwrap();
        let mut w = psbt::Writer::empty();
        for (k, v) in &maps[0] {
            w.pair(k[0], &k[1..], v);
        }
        w.end_map();
        for m in &maps[1..=2] {
            for (k, v) in m {
                w.pair(k[0], &k[1..], v);
            }
            w.pair(
                psbt::IN_FINAL_SCRIPTWITNESS,
                &[],
                &[&[1, 64][..], &[7; 64]].concat(),
            );
            w.end_map();
        }
        for m in &maps[3..] {
            for (k, v) in m {
                w.pair(k[0], &k[1..], v);
            }
            w.end_map();
        }
        w.finish()
    };
    let tx = psbt::extract(&finalize(&built.psbt)).unwrap();
    assert_eq!(tx, psbt::extract(&finalize(&v0.psbt)).unwrap());
    // Maps that are not a PSBT's (none; fewer than its counts say) are refused, not
    // indexed past their end.
    assert!(psbt::outputs(&[]).is_err());
    assert_eq!(
        psbt::outputs(&maps[..1]),
        Err(psbt::PsbtReadError::V2Field("count"))
    );
    // A version 2 PSBT missing a required field is refused, naming it.
    let mut broken = psbt::Writer::new_v2(2, 0, 1, 0);
    broken.end_map();
    assert_eq!(
        psbt::extract(&broken.finish()),
        Err(psbt::PsbtReadError::V2Field("input"))
    );
}
