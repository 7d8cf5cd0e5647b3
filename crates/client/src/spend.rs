//! `createPsbt` over the client's wallet: the wallet crate's
//! [`lightwire_wallet::spend::wallet`] given the wallet's parts.

use lightwire_wallet::spend::Built;
pub use lightwire_wallet::spend::bump::BumpError;
use lightwire_wallet::spend::wallet::WalletState;
pub use lightwire_wallet::spend::wallet::{
    COINBASE_CONFIRMATIONS, PsbtAsk, PsbtError, anti_fee_sniping, outpoint_text, parse_outpoint,
};

use crate::wallet::WalletSync;

/// What a spend is made from: the wallet's parts.
fn state(wallet: &WalletSync) -> WalletState<'_> {
    WalletState {
        network: wallet.network(),
        watch: &wallet.watch,
        ledger: &wallet.ledger,
        unconfirmed: &wallet.unconfirmed,
        labels: &wallet.labels,
    }
}

/// Build the PSBT `ask` asks for from `wallet` with the best chain's tip at `tip`, locked
/// to `lock_time` (see [`anti_fee_sniping`]), `seed` ordering its inputs and change.
pub fn create_psbt(
    wallet: &WalletSync,
    ask: &PsbtAsk,
    tip: u32,
    lock_time: u32,
    seed: u64,
) -> Result<Built, PsbtError> {
    lightwire_wallet::spend::wallet::create_psbt(&state(wallet), ask, tip, lock_time, seed)
}

/// A PSBT replacing unconfirmed transaction `txid` of `wallet` at `rate` with the best
/// chain's tip at `tip` (see [`lightwire_wallet::spend::bump`]), `seed` ordering its
/// inputs and change.
pub fn bump_fee(
    wallet: &WalletSync,
    txid: &lightwire_primitives::Txid,
    rate: lightwire_wallet::spend::FeeRate,
    tip: u32,
    seed: u64,
) -> Result<Built, BumpError> {
    lightwire_wallet::spend::bump::bump_fee(&state(wallet), txid, rate, tip, seed)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use lightwire_chain::{BlockHash, Network};
    use lightwire_primitives::{Block, Tx};
    use lightwire_wallet::Descriptor;
    use lightwire_wallet::address::address_of;
    use lightwire_wallet::spend::psbt;
    use lightwire_wallet::unconfirmed::Source;

    use lightwire_primitives::Txid;
    use lightwire_wallet::Outpoint;
    use lightwire_wallet::descriptor::Kind;
    use lightwire_wallet::spend::{FeeRate, SpendError};

    use super::*;
    use crate::wallet::{WalletSync, Watched};

    const BIP84: &str = "wpkh([d34db33f/84'/0'/0']xpub6CatWdiZiodmUeTDp8LT5or8nmbKNcuyvz7WyksVFkKB4RHwCD3XyuvPEbvqAQY3rAPshWcMLoP2fMFMKHPJ4ZeZXYVUhLv1VMrjPC7PW6V/<0;1>/*)";

    /// A transaction spending output 0 of a transaction of `prev`s paying `value` to
    /// `script` (a coinbase when `prev` is `None`).
    fn paying(prev: Option<u8>, script: &[u8], value: u64) -> Vec<u8> {
        let mut tx = vec![2, 0, 0, 0, 1];
        match prev {
            None => tx.extend_from_slice(&[[0; 32].as_slice(), &u32::MAX.to_le_bytes()].concat()),
            Some(p) => tx.extend_from_slice(&[[p; 32].as_slice(), &[0; 4]].concat()),
        }
        tx.extend_from_slice(&[4, 1, 2, 3, prev.unwrap_or(0), 0xff, 0xff, 0xff, 0xff, 1]);
        tx.extend_from_slice(&value.to_le_bytes());
        tx.push(script.len() as u8);
        tx.extend_from_slice(script);
        tx.extend_from_slice(&[0; 4]);
        tx
    }

    /// The ledger takes a block of `txs` at `height` (each use marked, as the wallet does).
    fn apply(w: &mut WalletSync, height: u32, txs: &[Vec<u8>]) {
        let mut block = vec![0u8; 80];
        block.push(txs.len() as u8);
        txs.iter().for_each(|t| block.extend_from_slice(t));
        let (root, _) = Block::parse(&block).unwrap().merkle_root();
        block[36..68].copy_from_slice(&root);
        let hash = BlockHash::of_header(block[..80].try_into().unwrap());
        let checked = Block::check(&block, &hash).unwrap();
        let watch = &w.watch;
        let applied = w
            .ledger
            .apply(height, &checked, |s| watch.owns(s) == Some(true))
            .unwrap();
        for s in applied.used_scripts {
            w.watch.mark_used(&s).unwrap();
        }
    }

    fn script(branch: usize, index: u32) -> Vec<u8> {
        let d = Descriptor::parse(BIP84, Network::Mainnet).unwrap();
        d.script_at(&d.branch_key(branch).unwrap(), index).unwrap()
    }

    fn ask(outputs: &[(&[u8], u64)], rate: u64) -> PsbtAsk {
        PsbtAsk {
            outputs: outputs
                .iter()
                .map(|(s, v)| (address_of(s, Network::Mainnet).unwrap(), *v))
                .collect(),
            rate: FeeRate(rate),
            coins: None,
            include_unconfirmed: false,
            change_descriptor: None,
            max: None,
        }
    }

    /// A coin frozen by a label (BIP329 `spendable: false`) is not picked, and a spend it
    /// alone could pay says so; named, it is spent; thawed, it is picked again. The
    /// labels are kept with the wallet.
    #[test]
    fn a_frozen_coin_is_spent_only_when_named() {
        let mut w = wallet();
        let coin = w
            .ledger
            .utxos()
            .find(|c| c.value == 80_000)
            .unwrap()
            .outpoint;
        let text = outpoint_text(&coin);
        w.labels
            .set_spendable(&text, false, Network::Mainnet)
            .unwrap();
        let err = create_psbt(&w, &ask(&[(ELSEWHERE, 20_000)], 1_000), 20, 20, 1).unwrap_err();
        assert!(
            matches!(err, PsbtError::Frozen { frozen: 80_000, .. }),
            "{err}"
        );
        assert_eq!(err.name(), "InsufficientFunds");
        let named = PsbtAsk {
            coins: Some(vec![coin]),
            ..ask(&[(ELSEWHERE, 20_000)], 1_000)
        };
        assert_eq!(create_psbt(&w, &named, 20, 20, 1).unwrap().spent, [coin]);
        let back = WalletSync::decode(&w.encode(), Network::Mainnet).unwrap();
        assert!(back.labels.frozen(&text), "kept with the wallet");
        w.labels
            .set_spendable(&text, true, Network::Mainnet)
            .unwrap();
        assert!(create_psbt(&w, &ask(&[(ELSEWHERE, 20_000)], 1_000), 20, 20, 1).is_ok());
    }

    /// Send-max: every coin the wallet would pick (the mature ones: the coinbase is not
    /// yet), all to the output asked, less the fee, no change; with a coin named, exactly
    /// it. Beside another output, what that one pays is left out of the max.
    #[test]
    fn send_max_takes_every_coin_less_the_fee() {
        let w = wallet();
        let max = |outputs: &[(&[u8], u64)], at| PsbtAsk {
            max: Some(at),
            ..ask(outputs, 2_000)
        };
        let b = create_psbt(&w, &max(&[(ELSEWHERE, 0)], 0), 20, 20, 1).unwrap();
        assert_eq!((b.change, b.spent.len()), (None, 1));
        assert_eq!(b.fee, FeeRate(2_000).fee(b.vsize));
        // What the unsigned transaction's outputs pay.
        let paid = |b: &lightwire_wallet::spend::Built| -> Vec<u64> {
            let maps = psbt::read_maps(&b.psbt).unwrap();
            let (_, tx) = maps[0]
                .iter()
                .find(|(k, _)| k[0] == psbt::GLOBAL_UNSIGNED_TX)
                .unwrap();
            Tx::parse(tx).unwrap().outputs().map(|o| o.value).collect()
        };
        assert_eq!(paid(&b), [80_000 - b.fee]);
        let two = create_psbt(
            &w,
            &max(&[(&script(0, 5), 30_000), (ELSEWHERE, 0)], 1),
            20,
            20,
            1,
        )
        .unwrap();
        assert_eq!(paid(&two), [30_000, 50_000 - two.fee]);
        // Named: exactly those coins (here the immature coinbase cannot be).
        let named = PsbtAsk {
            coins: Some(b.spent.clone()),
            ..max(&[(ELSEWHERE, 0)], 0)
        };
        assert_eq!(create_psbt(&w, &named, 20, 20, 1).unwrap().spent, b.spent);
    }

    /// A wallet on the BIP84 account: a coinbase to receive 0 at 10, a payment of 80,000
    /// to receive 1 at 11.
    fn wallet() -> WalletSync {
        let mut w = WalletSync::new(Network::Mainnet, 0);
        w.watch(&[Watched::Descriptor(BIP84.into())]).unwrap();
        apply(&mut w, 10, &[paying(None, &script(0, 0), 5_000_000)]);
        let cb = paying(None, &[0x51], 1);
        apply(&mut w, 11, &[cb, paying(Some(7), &script(0, 1), 80_000)]);
        w
    }

    const ELSEWHERE: &[u8] = &[
        0x00, 0x14, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9,
    ];

    #[test]
    fn a_spend_takes_mature_coins_and_sends_change_to_the_next_change_address() {
        let w = wallet();
        let built = create_psbt(&w, &ask(&[(ELSEWHERE, 30_000)], 2_000), 20, 20, 7).unwrap();
        // The coinbase is immature at 20: the payment at 11 pays.
        let paid = Tx::parse(&paying(Some(7), &script(0, 1), 80_000))
            .unwrap()
            .txid();
        assert_eq!(
            built.spent,
            [Outpoint {
                txid: paid,
                vout: 0
            }]
        );
        let maps = psbt::read_maps(&built.psbt).unwrap();
        let tx = Tx::parse(maps[0][0].1).unwrap();
        assert_eq!(tx.lock_time(), 20, "the tip, against fee sniping");
        // The input: the output spent, its funding transaction, and its key's origin: the
        // key whose hash the script pays, at m/84'/0'/0'/0/1 from d34db33f.
        let input = &maps[1];
        let find = |kind: u8| input.iter().find(|(k, _)| k[0] == kind).copied().unwrap();
        assert_eq!(
            Tx::parse(find(psbt::IN_NON_WITNESS_UTXO).1).unwrap().txid(),
            paid
        );
        let (key, origin) = find(psbt::IN_BIP32_DERIVATION);
        let h = |x: u32| x | lightwire_wallet::descriptor::HARDENED;
        let path: Vec<u8> = [h(84), h(0), h(0), 0, 1]
            .iter()
            .flat_map(|s| s.to_le_bytes())
            .collect();
        assert_eq!(origin, [&[0xd3, 0x4d, 0xb3, 0x3f][..], &path].concat());
        let key: [u8; 33] = key[1..].try_into().unwrap();
        assert_eq!(
            lightwire_wallet::descriptor::script_for_key(Kind::Wpkh, &key).unwrap(),
            script(0, 1)
        );
        // Change: 80,000 - 30,000 - the fee, to change index 0, said to be ours.
        let (at, value) = built.change.unwrap();
        let change = tx.outputs().nth(at as usize).unwrap();
        assert_eq!((change.script, change.value), (&script(1, 0)[..], value));
        assert_eq!(value, 80_000 - 30_000 - built.fee);
        let out = &maps[2 + at as usize];
        assert_eq!(out[0].0[0], psbt::OUT_BIP32_DERIVATION);
        // At 110 the coinbase is 101 blocks deep, mature: a larger spend takes it.
        assert!(matches!(
            create_psbt(&w, &ask(&[(ELSEWHERE, 100_000)], 2_000), 20, 20, 7),
            Err(PsbtError::Spend(SpendError::InsufficientFunds { .. }))
        ));
        let built = create_psbt(&w, &ask(&[(ELSEWHERE, 100_000)], 2_000), 110, 110, 7).unwrap();
        assert!(built.spent.iter().any(|o| o.txid != paid));
    }

    #[test]
    fn named_coins_are_spent_all_and_alone_or_refused_by_name() {
        let w = wallet();
        let paid = Outpoint {
            txid: Tx::parse(&paying(Some(7), &script(0, 1), 80_000))
                .unwrap()
                .txid(),
            vout: 0,
        };
        let coinbase = Outpoint {
            txid: Tx::parse(&paying(None, &script(0, 0), 5_000_000))
                .unwrap()
                .txid(),
            vout: 0,
        };
        let with = |coins: Vec<Outpoint>| PsbtAsk {
            coins: Some(coins),
            ..ask(&[(ELSEWHERE, 10_000)], 1_000)
        };
        let b = create_psbt(&w, &with(vec![paid]), 20, 20, 1).unwrap();
        assert_eq!(b.spent, [paid]);
        let refused = create_psbt(&w, &with(vec![coinbase]), 20, 20, 1).unwrap_err();
        assert_eq!(refused.name(), "InvalidArgument");
        assert!(refused.to_string().contains("coinbase"), "{refused}");
        assert_eq!(
            create_psbt(&w, &with(vec![paid, paid]), 20, 20, 1),
            Err(PsbtError::Twice(outpoint_text(&paid)))
        );
        let unknown = Outpoint {
            txid: Txid([4; 32]),
            vout: 0,
        };
        assert!(
            create_psbt(&w, &with(vec![unknown]), 20, 20, 1)
                .unwrap_err()
                .to_string()
                .contains("not a coin")
        );
        assert_eq!(parse_outpoint(&outpoint_text(&paid)), Some(paid));
        assert_eq!(parse_outpoint("00:1"), None);
        // Bad rates and addresses are refused with what is wrong.
        assert_eq!(
            create_psbt(&w, &ask(&[(ELSEWHERE, 10_000)], 99), 20, 20, 1),
            Err(PsbtError::FeeRate(99))
        );
        let mut bad = ask(&[(ELSEWHERE, 10_000)], 1_000);
        bad.outputs[0].0.push('x');
        assert!(matches!(
            create_psbt(&w, &bad, 20, 20, 1),
            Err(PsbtError::Address { index: 0, .. })
        ));
    }

    /// A spend of the wallet's 80,000 coin (receive 1) paying `change` to change 0, with no
    /// signature (the wallet's own: its application's, which a node took).
    fn spend_of_80_000(change: u64) -> Vec<u8> {
        let paid = Tx::parse(&paying(Some(7), &script(0, 1), 80_000))
            .unwrap()
            .txid();
        let mut own = vec![2, 0, 0, 0, 1];
        own.extend_from_slice(&paid.0);
        own.extend_from_slice(&[0, 0, 0, 0, 0, 0xfd, 0xff, 0xff, 0xff, 1]);
        own.extend_from_slice(&change.to_le_bytes());
        own.push(22);
        own.extend_from_slice(&script(1, 0));
        own.extend_from_slice(&[0; 4]);
        own
    }

    #[test]
    fn unconfirmed_coins_only_when_asked_and_change_moves_past_what_they_pay() {
        let mut w = wallet();
        // An own transaction, unconfirmed: it spends the 80,000 coin and pays change 0.
        let own = spend_of_80_000(79_000);
        w.add_unconfirmed(&own, Source::Own, 0, 1).unwrap();
        // The coin it spends is not spendable, its output only when asked.
        assert!(matches!(
            create_psbt(&w, &ask(&[(ELSEWHERE, 30_000)], 1_000), 20, 20, 1),
            Err(PsbtError::Spend(SpendError::InsufficientFunds {
                available: 0,
                ..
            }))
        ));
        let with = PsbtAsk {
            include_unconfirmed: true,
            change_descriptor: None,
            ..ask(&[(ELSEWHERE, 30_000)], 1_000)
        };
        let b = create_psbt(&w, &with, 20, 20, 1).unwrap();
        let own_txid = Tx::parse(&own).unwrap().txid();
        assert_eq!(
            b.spent,
            [Outpoint {
                txid: own_txid,
                vout: 0
            }]
        );
        // Change goes to index 1: index 0 is paid by the unconfirmed transaction.
        let maps = psbt::read_maps(&b.psbt).unwrap();
        let tx = Tx::parse(maps[0][0].1).unwrap();
        let (at, _) = b.change.unwrap();
        assert_eq!(
            tx.outputs().nth(at as usize).unwrap().script,
            &script(1, 1)[..]
        );
    }

    /// Child pays for parent (Bitcoin Core 26+): a spend of an unconfirmed coin pays what
    /// its parent lacks to reach the spend's rate, as one package; a parent paying more
    /// than the rate asks nothing.
    #[test]
    fn a_spend_of_unconfirmed_change_pays_for_its_parent_below_the_rate() {
        let mut w = wallet();
        // Own, unconfirmed: 80,000 in, 79,900 change out, 82 vB: 100 sat, 1.22 sat/vB.
        let own = spend_of_80_000(79_900);
        assert_eq!(Tx::parse(&own).unwrap().weight(), 82 * 4);
        w.add_unconfirmed(&own, Source::Own, 0, 1).unwrap();
        let at = |rate| PsbtAsk {
            include_unconfirmed: true,
            ..ask(&[(ELSEWHERE, 30_000)], rate)
        };
        let b = create_psbt(&w, &at(5_000), 20, 20, 1).unwrap();
        assert_eq!(
            b.ancestor_fee,
            5 * 82 - 100,
            "the parent's shortfall at 5 sat/vB"
        );
        assert_eq!(b.fee, FeeRate(5_000).fee(b.vsize) + b.ancestor_fee);
        assert!(
            (b.fee + 100) * 1000 >= 5_000 * (b.vsize + 82),
            "the package pays 5 sat/vB"
        );
        // At 1 sat/vB the parent pays its way.
        let b = create_psbt(&w, &at(1_000), 20, 20, 1).unwrap();
        assert_eq!((b.ancestor_fee, b.fee), (0, FeeRate(1_000).fee(b.vsize)));
        // Confirmed coins ask nothing of it.
        let b = create_psbt(&w, &ask(&[(ELSEWHERE, 30_000)], 5_000), 20, 20, 1);
        assert!(b.is_err(), "the only mature coin is spent by `own`");
    }

    /// Someone else's unconfirmed payment, named: its fee is not known to a light
    /// client (its inputs' values are not), so the whole of it is paid for at the rate,
    /// at most what it paid more than a full node's wallet would.
    #[test]
    fn a_named_unconfirmed_payment_is_paid_for_as_if_it_paid_nothing() {
        let mut w = WalletSync::new(Network::Mainnet, 0);
        w.watch(&[Watched::Descriptor(BIP84.into())]).unwrap();
        let incoming = paying(Some(5), &script(0, 2), 60_000);
        w.add_unconfirmed(&incoming, Source::Announced, 0, 1)
            .unwrap();
        let parent = Tx::parse(&incoming).unwrap();
        let coin = Outpoint {
            txid: parent.txid(),
            vout: 0,
        };
        let named = PsbtAsk {
            coins: Some(vec![coin]),
            ..ask(&[(ELSEWHERE, 20_000)], 3_000)
        };
        let b = create_psbt(&w, &named, 20, 20, 1).unwrap();
        let parent_vsize = (parent.weight() as u64).div_ceil(4);
        assert_eq!(b.ancestor_fee, FeeRate(3_000).fee(parent_vsize));
        assert_eq!(b.fee, FeeRate(3_000).fee(b.vsize) + b.ancestor_fee);
    }

    /// A silent payment found in the mempool, named: its input carries BIP376's tweak and
    /// spend key, as a mined one's does (the key is the receiver's, whatever the
    /// transaction turns out to be); not named, it is not picked.
    #[test]
    fn a_named_unconfirmed_silent_payment_is_spent_with_its_tweak() {
        let mut w = WalletSync::new(Network::Mainnet, 0);
        w.watch(&[Watched::Descriptor(BIP84.into())]).unwrap();
        let mut taproot = vec![0x51, 0x20];
        taproot.extend_from_slice(&[0x42; 32]);
        let incoming = paying(Some(6), &taproot, 50_000);
        let found = lightwire_wallet::unconfirmed::SilentOutput {
            vout: 0,
            tweak: [7; 32],
            label: None,
            spend: [2; 33],
        };
        w.add_unconfirmed_silent(&incoming, Source::Announced, 0, 1, &[found])
            .unwrap();
        let coin = Outpoint {
            txid: Tx::parse(&incoming).unwrap().txid(),
            vout: 0,
        };
        let err = create_psbt(&w, &ask(&[(ELSEWHERE, 20_000)], 1_000), 20, 20, 1);
        assert!(err.is_err(), "another's unconfirmed payment is not picked");
        let named = PsbtAsk {
            coins: Some(vec![coin]),
            ..ask(&[(ELSEWHERE, 20_000)], 1_000)
        };
        let b = create_psbt(&w, &named, 20, 20, 1).unwrap();
        let maps = psbt::read_maps(&b.psbt).unwrap();
        let tweak = maps[1..]
            .iter()
            .flat_map(|m| m.iter())
            .find(|(k, _)| k[0] == psbt::IN_SP_TWEAK)
            .map(|(_, v)| v.to_vec());
        assert_eq!(tweak.as_deref(), Some(&[7u8; 32][..]));
    }

    #[test]
    fn coins_of_addresses_watched_as_such_are_spent_only_when_named() {
        let mut w = WalletSync::new(Network::Mainnet, 0);
        let address = address_of(ELSEWHERE, Network::Mainnet).unwrap();
        w.watch(&[Watched::Address(address)]).unwrap();
        apply(
            &mut w,
            10,
            &[paying(None, &[0x51], 1), paying(Some(3), ELSEWHERE, 70_000)],
        );
        let err = create_psbt(&w, &ask(&[(&script(0, 0), 10_000)], 1_000), 20, 20, 1).unwrap_err();
        assert!(
            matches!(
                err,
                PsbtError::NamedOnly {
                    available: 0,
                    named_only: 70_000,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(err.name(), "InsufficientFunds");
        // Named, it is spent: its output and funding transaction given, no key origin (the
        // wallet has none for it); change nowhere (no descriptor), so none is due here:
        // the excess is refused rather than given to the fee.
        let coin = Outpoint {
            txid: Tx::parse(&paying(Some(3), ELSEWHERE, 70_000))
                .unwrap()
                .txid(),
            vout: 0,
        };
        let named = PsbtAsk {
            coins: Some(vec![coin]),
            ..ask(&[(&script(0, 0), 10_000)], 1_000)
        };
        assert_eq!(
            create_psbt(&w, &named, 20, 20, 1),
            Err(PsbtError::Spend(SpendError::NoChangeAddress))
        );
        let all = PsbtAsk {
            coins: Some(vec![coin]),
            ..ask(&[(&script(0, 0), 69_800)], 1_000)
        };
        let b = create_psbt(&w, &all, 20, 20, 1).unwrap();
        assert_eq!(b.spent, [coin]);
        let maps = psbt::read_maps(&b.psbt).unwrap();
        assert!(
            maps[1]
                .iter()
                .all(|(k, _)| k[0] != psbt::IN_BIP32_DERIVATION)
        );
        assert!(maps[1].iter().any(|(k, _)| k[0] == psbt::IN_WITNESS_UTXO));
    }

    /// A payment announced by a gateway's mempool digest may be invented: the wallet does
    /// not pick it even with `includeUnconfirmed` (Bitcoin Core spends only its own
    /// unconfirmed change); named, it is spent.
    #[test]
    fn someone_elses_unconfirmed_payment_is_spent_only_when_named() {
        let mut w = WalletSync::new(Network::Mainnet, 0);
        w.watch(&[Watched::Descriptor(BIP84.into())]).unwrap();
        let incoming = paying(Some(5), &script(0, 2), 60_000);
        w.add_unconfirmed(&incoming, Source::Announced, 0, 1)
            .unwrap();
        let with = PsbtAsk {
            include_unconfirmed: true,
            change_descriptor: None,
            ..ask(&[(ELSEWHERE, 20_000)], 1_000)
        };
        assert!(matches!(
            create_psbt(&w, &with, 20, 20, 1),
            Err(PsbtError::Spend(SpendError::InsufficientFunds {
                available: 0,
                ..
            }))
        ));
        let coin = Outpoint {
            txid: Tx::parse(&incoming).unwrap().txid(),
            vout: 0,
        };
        let named = PsbtAsk {
            coins: Some(vec![coin]),
            ..with
        };
        assert_eq!(create_psbt(&w, &named, 20, 20, 1).unwrap().spent, [coin]);
    }

    /// The script a spend's change output pays.
    fn change_script(built: &Built) -> Vec<u8> {
        let (vout, _) = built.change.expect("change");
        let maps = psbt::read_maps(&built.psbt).unwrap();
        let tx = Tx::parse(maps[0][0].1).unwrap();
        tx.outputs().nth(vout as usize).unwrap().script.to_vec()
    }

    /// Someone else's taproot account watched beside the wallet's own segwit one (a
    /// family's, a co-signer's): a payment to a taproot address sends change to the
    /// signer of the coins spent, never to the other's change branch (where it went by
    /// the payment's kind). Coins of both named together are refused unless the change
    /// descriptor is named; the wallet does not mix signers by itself.
    #[test]
    fn change_goes_to_the_signer_of_the_coins_spent() {
        const THEIRS: &str = "tr(xpub6BgBgsespWvERF3LHQu6CnqdvfEvtMcQjYrcRzx53QJjSxarj2afYWcLteoGVky7D3UKDP9QyrLprQ3VCECoY49yfdDEHGCtMMj92pReUsQ/<0;1>/*)";
        let mut w = wallet();
        w.watch(&[Watched::Descriptor(THEIRS.into())]).unwrap();
        let theirs = Descriptor::parse(THEIRS, Network::Mainnet).unwrap();
        let their_script =
            |b: usize, i: u32| theirs.script_at(&theirs.branch_key(b).unwrap(), i).unwrap();
        apply(
            &mut w,
            12,
            &[
                paying(None, &[0x51], 2),
                paying(Some(8), &their_script(0, 0), 60_000),
            ],
        );
        let taproot_payee = [&[0x51, 0x20][..], &[5; 32]].concat();
        let built = create_psbt(&w, &ask(&[(&taproot_payee, 30_000)], 1_000), 20, 20, 7).unwrap();
        assert_eq!(
            change_script(&built),
            script(1, 0),
            "the wallet's own change branch"
        );
        let mine = Tx::parse(&paying(Some(7), &script(0, 1), 80_000))
            .unwrap()
            .txid();
        assert_eq!(
            built.spent,
            [Outpoint {
                txid: mine,
                vout: 0
            }]
        );
        // Coins of both signers named: refused; with the change descriptor named, made.
        let theirs_coin = Outpoint {
            txid: Tx::parse(&paying(Some(8), &their_script(0, 0), 60_000))
                .unwrap()
                .txid(),
            vout: 0,
        };
        let both = PsbtAsk {
            coins: Some(vec![
                Outpoint {
                    txid: mine,
                    vout: 0,
                },
                theirs_coin,
            ]),
            ..ask(&[(&taproot_payee, 100_000)], 1_000)
        };
        assert_eq!(
            create_psbt(&w, &both, 20, 20, 7),
            Err(PsbtError::MixedSigners(2))
        );
        let named = PsbtAsk {
            change_descriptor: Some(BIP84.into()),
            ..both.clone()
        };
        let built = create_psbt(&w, &named, 20, 20, 7).unwrap();
        assert_eq!(change_script(&built), script(1, 0));
        let unknown = PsbtAsk {
            change_descriptor: Some("wpkh(xpub6CatWdiZiodmUeTDp8LT5or8nmbKNcuyvz7WyksVFkKB4RHwCD3XyuvPEbvqAQY3rAPshWcMLoP2fMFMKHPJ4ZeZXYVUhLv1VMrjPC7PW6V/<0;1>/*)".into()),
            ..both
        };
        assert!(matches!(
            create_psbt(&w, &unknown, 20, 20, 7),
            Err(PsbtError::ChangeDescriptor(_))
        ));
        // More than one signer's coins hold: refused, saying so.
        let err =
            create_psbt(&w, &ask(&[(&taproot_payee, 100_000)], 1_000), 20, 20, 7).unwrap_err();
        assert!(
            matches!(err, PsbtError::OneSigner { others: 60_000, .. }),
            "{err}"
        );
        assert_eq!(err.name(), "InsufficientFunds");
    }

    /// The unsigned transaction of `built`, with a witness of a budgeted signature and key
    /// on each input: what a signer makes of it, as long.
    fn signed(built: &Built) -> Vec<u8> {
        let maps = psbt::read_maps(&built.psbt).unwrap();
        let unsigned = maps[0][0].1;
        let n = Tx::parse(unsigned).unwrap().inputs().count();
        let mut t = unsigned[..4].to_vec();
        t.extend_from_slice(&[0, 1]);
        t.extend_from_slice(&unsigned[4..unsigned.len() - 4]);
        for _ in 0..n {
            t.push(2);
            t.push(72);
            t.extend_from_slice(&[0x30; 72]);
            t.push(33);
            t.extend_from_slice(&[0x02; 33]);
        }
        t.extend_from_slice(&unsigned[unsigned.len() - 4..]);
        t
    }

    /// A payment at 2 sat/vB, broadcast: bumped to 5 sat/vB, the replacement spends the
    /// same coin, pays the same output and lock time, takes the increase from the change,
    /// and pays at least the old fee plus 1 sat/vB of its own size. Refused: a rate not
    /// above the old one by 1 sat/vB, one the change cannot pay, a transaction with a
    /// child, one not the wallet's.
    #[test]
    fn a_stuck_payment_is_bumped_from_its_change_by_bitcoin_cores_rules() {
        let mut w = wallet();
        let first = create_psbt(&w, &ask(&[(ELSEWHERE, 30_000)], 2_000), 20, 15, 7).unwrap();
        let raw = signed(&first);
        let txid = Tx::parse(&raw).unwrap().txid();
        w.add_unconfirmed(&raw, Source::Own, 0, 1).unwrap();
        assert_eq!(
            bump_fee(&w, &txid, FeeRate(2_500), 20, 1),
            Err(BumpError::FeeRateTooLow {
                asked: 2_500,
                minimum: 3_000
            })
        );
        let bumped = bump_fee(&w, &txid, FeeRate(5_000), 20, 1).unwrap();
        assert_eq!(bumped.spent, first.spent, "the same input");
        let maps = psbt::read_maps(&bumped.psbt).unwrap();
        let tx = Tx::parse(maps[0][0].1).unwrap();
        assert_eq!(tx.lock_time(), 15, "the old lock time");
        let outs: Vec<(Vec<u8>, u64)> =
            tx.outputs().map(|o| (o.script.to_vec(), o.value)).collect();
        assert!(outs.contains(&(ELSEWHERE.to_vec(), 30_000)));
        let (_, old_change) = first.change.unwrap();
        let (_, new_change) = bumped.change.unwrap();
        assert_eq!(old_change - new_change, bumped.fee - first.fee);
        assert!(bumped.fee >= first.fee + bumped.vsize, "BIP125 rule 4");
        assert_eq!(change_script(&bumped), change_script(&first));
        // The change cannot pay 10,000 sat/vB.
        assert_eq!(
            bump_fee(&w, &txid, FeeRate(10_000_000), 20, 1),
            Err(BumpError::InsufficientFunds(10_000_000))
        );
        // A child of it (spending its change): bump the child.
        let (at, value) = first.change.unwrap();
        let mut child = vec![2, 0, 0, 0, 1];
        child.extend_from_slice(&txid.0);
        child.extend_from_slice(&at.to_le_bytes());
        child.extend_from_slice(&[0, 0xfd, 0xff, 0xff, 0xff, 1]);
        child.extend_from_slice(&(value - 500).to_le_bytes());
        child.extend_from_slice(&[1, 0x51, 0, 0, 0, 0]);
        w.add_unconfirmed(&child, Source::Own, 0, 1).unwrap();
        assert_eq!(
            bump_fee(&w, &txid, FeeRate(5_000), 20, 1),
            Err(BumpError::HasDescendants(Tx::parse(&child).unwrap().txid()))
        );
        // Not the wallet's.
        let other = Txid([9; 32]);
        assert_eq!(
            bump_fee(&w, &other, FeeRate(5_000), 20, 1),
            Err(BumpError::NotUnconfirmed(other))
        );
    }

    /// Core's bump with more inputs: when the change cannot pay, the wallet's other
    /// confirmed coins of the same signer are added (largest first, until paid for); an
    /// unconfirmed coin never is (BIP125's second rule), nor is another signer's.
    #[test]
    fn a_bump_the_change_cannot_pay_adds_confirmed_coins_of_its_signer() {
        const COSIGNER: &str = "tr(xpub6BgBgsespWvERF3LHQu6CnqdvfEvtMcQjYrcRzx53QJjSxarj2afYWcLteoGVky7D3UKDP9QyrLprQ3VCECoY49yfdDEHGCtMMj92pReUsQ/<0;1>/*)";
        let mut w = wallet();
        // More coins at 12: 60,000 and 20,000 to receive 2 and 3; at 13, 90,000 to a
        // co-signer's descriptor the wallet watches too.
        let cb = |n: u8| paying(None, &[0x51, n], 1);
        apply(
            &mut w,
            12,
            &[
                cb(1),
                paying(Some(8), &script(0, 2), 60_000),
                paying(Some(9), &script(0, 3), 20_000),
            ],
        );
        w.watch(&[Watched::Descriptor(COSIGNER.into())]).unwrap();
        let cosigner = Descriptor::parse(COSIGNER, Network::Mainnet).unwrap();
        let theirs = cosigner
            .script_at(&cosigner.branch_key(0).unwrap(), 0)
            .unwrap();
        apply(&mut w, 13, &[cb(2), paying(Some(10), &theirs, 90_000)]);
        // The stuck payment: 75,000 from the 80,000 coin, change about 4,700.
        let coin80 = Outpoint {
            txid: Tx::parse(&paying(Some(7), &script(0, 1), 80_000))
                .unwrap()
                .txid(),
            vout: 0,
        };
        let first = create_psbt(
            &w,
            &PsbtAsk {
                coins: Some(vec![coin80]),
                ..ask(&[(ELSEWHERE, 75_000)], 2_000)
            },
            20,
            15,
            7,
        )
        .unwrap();
        let raw = signed(&first);
        let txid = Tx::parse(&raw).unwrap().txid();
        w.add_unconfirmed(&raw, Source::Own, 0, 1).unwrap();
        // 50 sat/vB: about 7,000 sat more than the change; the 60,000 coin is added (not
        // the co-signer's 90,000, larger), the change to the old change output.
        let bumped = bump_fee(&w, &txid, FeeRate(50_000), 20, 1).unwrap();
        let coin60 = Outpoint {
            txid: Tx::parse(&paying(Some(8), &script(0, 2), 60_000))
                .unwrap()
                .txid(),
            vout: 0,
        };
        let mut spent = bumped.spent.clone();
        spent.sort();
        let mut want = vec![coin80, coin60];
        want.sort();
        assert_eq!(spent, want, "the old input and the 60,000 coin");
        assert_eq!(change_script(&bumped), change_script(&first));
        let (_, value) = bumped.change.unwrap();
        assert_eq!(80_000 + 60_000 - 75_000 - bumped.fee, value);
        assert!(bumped.fee >= FeeRate(50_000).fee(bumped.vsize));
        // More than this signer's confirmed coins hold: refused, naming it.
        assert_eq!(
            bump_fee(&w, &txid, FeeRate(1_000_000), 20, 1),
            Err(BumpError::InsufficientFunds(1_000_000))
        );
        // Frozen (BIP329 `spendable: false`), the 60,000 coin is not added: the 20,000 is.
        w.labels
            .set_spendable(&outpoint_text(&coin60), false, Network::Mainnet)
            .unwrap();
        let bumped = bump_fee(&w, &txid, FeeRate(50_000), 20, 1).unwrap();
        let coin20 = Outpoint {
            txid: Tx::parse(&paying(Some(9), &script(0, 3), 20_000))
                .unwrap()
                .txid(),
            vout: 0,
        };
        let mut spent = bumped.spent.clone();
        spent.sort();
        let mut want = vec![coin80, coin20];
        want.sort();
        assert_eq!(
            spent, want,
            "the old input and the 20,000 coin, not the frozen one"
        );
    }

    #[test]
    fn bump_refuses_what_is_not_the_wallets_own() {
        let w = wallet();
        let other = Txid([9; 32]);
        assert_eq!(
            bump_fee(&w, &other, FeeRate(5_000), 20, 1),
            Err(BumpError::NotUnconfirmed(other))
        );
    }
}
