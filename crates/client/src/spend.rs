//! `createPsbt`: a spend of the wallet's coins, built by the wallet crate's
//! [`lightwire_wallet::spend`] from what the wallet knows here: its coins (confirmed and
//! mature; unconfirmed ones only when asked), how each is spent and where its key comes
//! from, the funding transactions kept, and where change goes.
//!
//! - Picked automatically: only coins of the wallet's descriptors (a coin of an address
//!   watched as such may not be one the signer holds a key for). Named coins
//!   (`coins: ['txid:vout']`) are spent, all of them and nothing else, whatever their
//!   origin, when their script says how they are spent.
//! - A coin an unconfirmed transaction of the wallet spends is not spendable, as in
//!   `utxos()`; a coinbase is, once 100 blocks deep and one more (as Bitcoin Core's wallet).
//! - Change goes to the next unused index of a change branch (past those the unconfirmed
//!   transactions pay too, so that two spends before a block do not share it): the
//!   descriptor of the first output's kind that has a change branch (change then looks like
//!   the payment), else the first with a change branch, else the first descriptor's only
//!   branch. The same address is offered again until a transaction paying it is seen.

use lightwire_primitives::Txid;
use lightwire_wallet::Outpoint;
use lightwire_wallet::address::{AddressError, script_of_address};
use lightwire_wallet::descriptor::Kind;
use lightwire_wallet::spend::{
    self, Built, Change, FeeRate, KeySource, Request, SpendError, Spendable,
};
use lightwire_wallet::watch::Origin;

use crate::wallet::WalletSync;

/// Confirmations a coinbase needs before the wallet spends it (Core's wallet: 100 blocks
/// on top of its own).
pub const COINBASE_CONFIRMATIONS: u32 = 101;

/// What `createPsbt` is asked.
#[derive(Clone, Debug, PartialEq)]
pub struct PsbtAsk {
    /// Addresses and values to pay, in order.
    pub outputs: Vec<(String, u64)>,
    /// The fee rate.
    pub rate: FeeRate,
    /// The coins to spend, all of them (none: picked by the wallet).
    pub coins: Option<Vec<Outpoint>>,
    /// Whether coins of unconfirmed transactions may be picked.
    pub include_unconfirmed: bool,
}

/// A PSBT that cannot be made.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum PsbtError {
    /// An output's address does not decode for this network.
    #[error("output {index}: {error}")]
    Address {
        /// Which output.
        index: usize,
        /// Why.
        error: AddressError,
    },
    /// A fee rate below what nodes relay or above what is sane.
    #[error("a fee rate of {0} sat/kvB is outside 1,000-10,000,000 (1-10,000 sat/vB)")]
    FeeRate(u64),
    /// A named coin the wallet cannot spend: not its own, spent, immature, or of a script
    /// whose spending it cannot size.
    #[error("coin {coin} cannot be spent: {why}")]
    Coin {
        /// `txid:vout`.
        coin: String,
        /// Why.
        why: &'static str,
    },
    /// The same coin named twice.
    #[error("coin {0} is named twice")]
    Twice(String),
    /// Nothing is watched.
    #[error("no wallet: watch a descriptor first")]
    NoWallet,
    /// The spend itself (funds, dust, size, fee).
    #[error(transparent)]
    Spend(#[from] SpendError),
}

impl PsbtError {
    /// The error's name, for JavaScript: `InsufficientFunds` or `InvalidArgument`.
    pub fn name(&self) -> &'static str {
        match self {
            PsbtError::Spend(SpendError::InsufficientFunds { .. }) => "InsufficientFunds",
            _ => "InvalidArgument",
        }
    }
}

/// `txid:vout`, the txid as explorers show it.
pub fn outpoint_text(o: &Outpoint) -> String {
    let mut t = o.txid.0;
    t.reverse();
    let mut s: String = t.iter().map(|b| format!("{b:02x}")).collect();
    s.push(':');
    s.push_str(&format!("{}", o.vout));
    s
}

/// `txid:vout` read back.
pub fn parse_outpoint(s: &str) -> Option<Outpoint> {
    let (txid, vout) = s.trim().split_once(':')?;
    Some(Outpoint {
        txid: Txid::from_display_hex(txid)?,
        vout: vout.parse().ok()?,
    })
}

/// One of the wallet's coins as a spend sees it, and where its key comes from.
struct Found {
    coin: Spendable,
    origin: Option<(usize, usize, u32)>,
    confirmed: bool,
}

/// Build the PSBT `ask` asks for from `wallet` with the best chain's tip at `tip` (the
/// lock time), `seed` ordering its inputs and change.
pub fn create_psbt(
    wallet: &WalletSync,
    ask: &PsbtAsk,
    tip: u32,
    seed: u64,
) -> Result<Built, PsbtError> {
    if ask.rate < FeeRate::MIN_RELAY || ask.rate > FeeRate::MAX {
        return Err(PsbtError::FeeRate(ask.rate.0));
    }
    let network = wallet.network();
    let outputs = ask
        .outputs
        .iter()
        .enumerate()
        .map(|(index, (address, value))| {
            script_of_address(address, network)
                .map(|s| (s, *value))
                .map_err(|error| PsbtError::Address { index, error })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let found = spendable(wallet, tip);
    let coins: Vec<&Found> = match &ask.coins {
        Some(named) => {
            let mut picked: Vec<&Found> = Vec::with_capacity(named.len());
            for o in named {
                let text = || outpoint_text(o);
                if picked.iter().any(|f| f.coin.outpoint == *o) {
                    return Err(PsbtError::Twice(text()));
                }
                let f = found
                    .iter()
                    .find(|f| f.coin.outpoint == *o)
                    .ok_or_else(|| PsbtError::Coin {
                        coin: text(),
                        why: why_not(wallet, o, tip),
                    })?;
                picked.push(f);
            }
            picked
        }
        None => found
            .iter()
            .filter(|f| f.origin.is_some() && (f.confirmed || ask.include_unconfirmed))
            .collect(),
    };
    let list: Vec<Spendable> = coins.iter().map(|f| f.coin.clone()).collect();
    let change = change_for(wallet, &outputs);
    let keys = |c: &Spendable| {
        let Some(&(d, b, index)) = coins
            .iter()
            .find(|f| f.coin.outpoint == c.outpoint)
            .and_then(|f| f.origin.as_ref())
        else {
            return Ok(None);
        };
        key_source(wallet, d, b, index).map(Some)
    };
    let request = Request {
        coins: &list,
        spend_all: ask.coins.is_some(),
        outputs: &outputs,
        rate: ask.rate,
        change: change.as_ref(),
        lock_time: tip,
        seed,
    };
    Ok(spend::build(&request, keys)?)
}

/// Every coin the wallet may spend now, with how it is spent (coins whose script does not
/// say are left out).
fn spendable(wallet: &WalletSync, tip: u32) -> Vec<Found> {
    let spent = wallet.unconfirmed.spent();
    let mut found = Vec::new();
    let mut add =
        |outpoint: Outpoint, value: u64, script: &[u8], confirmed: bool, funding: Option<&[u8]>| {
            let (kind, origin) = match wallet.watch.origin(script) {
                Some(Origin::Derived {
                    descriptor,
                    branch,
                    index,
                }) => match wallet.watch.descriptors().nth(descriptor) {
                    Some(d) => (Some(d.kind), Some((descriptor, branch, index))),
                    None => (None, None),
                },
                _ => (spend::kind_of(script), None),
            };
            if let Some(kind) = kind {
                found.push(Found {
                    coin: Spendable {
                        outpoint,
                        value,
                        script: script.to_vec(),
                        kind,
                        funding: funding.filter(|_| kind != Kind::Tr).map(<[u8]>::to_vec),
                    },
                    origin,
                    confirmed,
                });
            }
        };
    for c in wallet.ledger.utxos() {
        let mature = !c.coinbase || tip >= c.height.saturating_add(COINBASE_CONFIRMATIONS - 1);
        if mature && !spent.contains(&c.outpoint) {
            let funding = wallet.ledger.funding(&c.outpoint.txid);
            add(c.outpoint, c.value, &c.script, true, funding);
        }
    }
    for t in wallet.unconfirmed.transactions() {
        for (o, value, script) in t.coins() {
            if !spent.contains(&o) {
                add(o, value, script, false, Some(&t.raw));
            }
        }
    }
    found
}

/// Why coin `o` is not among the spendable.
fn why_not(wallet: &WalletSync, o: &Outpoint, tip: u32) -> &'static str {
    match wallet.ledger.coin(o) {
        Some(c) if c.spent_by.is_some() => "it is spent",
        Some(c) if c.coinbase && tip < c.height.saturating_add(COINBASE_CONFIRMATIONS - 1) => {
            "a coinbase not yet 101 blocks deep"
        }
        Some(_) if wallet.unconfirmed.spent().contains(o) => {
            "an unconfirmed transaction of the wallet spends it"
        }
        Some(_) => "its script is not one the wallet can size a signature for",
        None if wallet
            .unconfirmed
            .transactions()
            .iter()
            .any(|t| t.txid == o.txid) =>
        {
            "not an output of the wallet's, or one an unconfirmed transaction spends"
        }
        None => "not a coin of the wallet's",
    }
}

/// The key origin of index `index` on branch `b` of descriptor `d`.
fn key_source(
    wallet: &WalletSync,
    d: usize,
    b: usize,
    index: u32,
) -> Result<KeySource, lightwire_wallet::DescriptorError> {
    let descriptor = wallet
        .watch
        .descriptors()
        .nth(d)
        .ok_or(lightwire_wallet::DescriptorError::InvalidChild(index))?;
    Ok(KeySource {
        pubkey: wallet.watch.key_at(d, b, index)?,
        fingerprint: descriptor.origin.fingerprint,
        path: descriptor.path_of(b, index),
    })
}

/// Where change goes (see the module documentation).
fn change_for(wallet: &WalletSync, outputs: &[(Vec<u8>, u64)]) -> Option<Change> {
    let descriptors: Vec<_> = wallet.watch.descriptors().collect();
    let change_branch = |d: usize| descriptors[d].branches.iter().position(|b| *b == Some(1));
    let like_payment = outputs.iter().find_map(|(s, _)| {
        let kind = spend::kind_of(s)?;
        (0..descriptors.len()).find(|&d| descriptors[d].kind == kind && change_branch(d).is_some())
    });
    let (d, b) = match like_payment
        .or_else(|| (0..descriptors.len()).find(|&d| change_branch(d).is_some()))
    {
        Some(d) => (d, change_branch(d)?),
        None if !descriptors.is_empty() => (0, 0),
        None => return None,
    };
    let (used, _) = wallet.watch.branch_state(d, b)?;
    // Past what the unconfirmed transactions pay on that branch too.
    let pending = wallet
        .unconfirmed
        .transactions()
        .iter()
        .flat_map(|t| {
            t.coins()
                .map(|(_, _, s)| wallet.watch.origin(s))
                .collect::<Vec<_>>()
        })
        .filter_map(|o| match o {
            Some(Origin::Derived {
                descriptor,
                branch,
                index,
            }) if descriptor == d && branch == b => Some(index),
            _ => None,
        })
        .max();
    let index = used.max(pending).map_or(0, |u| u + 1);
    let key = key_source(wallet, d, b, index).ok()?;
    let branch_key = wallet.watch.key_at(d, b, index).ok()?;
    let kind = descriptors[d].kind;
    let script = lightwire_wallet::descriptor::script_for_key(kind, &branch_key)?;
    Some(Change {
        script,
        kind,
        key: Some(key),
    })
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

    use super::*;
    use crate::wallet::Watched;

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
        }
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
        let built = create_psbt(&w, &ask(&[(ELSEWHERE, 30_000)], 2_000), 20, 7).unwrap();
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
            create_psbt(&w, &ask(&[(ELSEWHERE, 100_000)], 2_000), 20, 7),
            Err(PsbtError::Spend(SpendError::InsufficientFunds { .. }))
        ));
        let built = create_psbt(&w, &ask(&[(ELSEWHERE, 100_000)], 2_000), 110, 7).unwrap();
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
        let b = create_psbt(&w, &with(vec![paid]), 20, 1).unwrap();
        assert_eq!(b.spent, [paid]);
        let refused = create_psbt(&w, &with(vec![coinbase]), 20, 1).unwrap_err();
        assert_eq!(refused.name(), "InvalidArgument");
        assert!(refused.to_string().contains("coinbase"), "{refused}");
        assert_eq!(
            create_psbt(&w, &with(vec![paid, paid]), 20, 1),
            Err(PsbtError::Twice(outpoint_text(&paid)))
        );
        let unknown = Outpoint {
            txid: Txid([4; 32]),
            vout: 0,
        };
        assert!(
            create_psbt(&w, &with(vec![unknown]), 20, 1)
                .unwrap_err()
                .to_string()
                .contains("not a coin")
        );
        assert_eq!(parse_outpoint(&outpoint_text(&paid)), Some(paid));
        assert_eq!(parse_outpoint("00:1"), None);
        // Bad rates and addresses are refused with what is wrong.
        assert_eq!(
            create_psbt(&w, &ask(&[(ELSEWHERE, 10_000)], 999), 20, 1),
            Err(PsbtError::FeeRate(999))
        );
        let mut bad = ask(&[(ELSEWHERE, 10_000)], 1_000);
        bad.outputs[0].0.push('x');
        assert!(matches!(
            create_psbt(&w, &bad, 20, 1),
            Err(PsbtError::Address { index: 0, .. })
        ));
    }

    #[test]
    fn unconfirmed_coins_only_when_asked_and_change_moves_past_what_they_pay() {
        let mut w = wallet();
        // An own transaction, unconfirmed: it spends the 80,000 coin and pays change 0.
        let paid = Tx::parse(&paying(Some(7), &script(0, 1), 80_000))
            .unwrap()
            .txid();
        let mut own = vec![2, 0, 0, 0, 1];
        own.extend_from_slice(&paid.0);
        own.extend_from_slice(&[0, 0, 0, 0, 0, 0xfd, 0xff, 0xff, 0xff, 1]);
        own.extend_from_slice(&79_000u64.to_le_bytes());
        own.push(22);
        own.extend_from_slice(&script(1, 0));
        own.extend_from_slice(&[0; 4]);
        w.add_unconfirmed(&own, Source::Own, 0, 1).unwrap();
        // The coin it spends is not spendable, its output only when asked.
        assert!(matches!(
            create_psbt(&w, &ask(&[(ELSEWHERE, 30_000)], 1_000), 20, 1),
            Err(PsbtError::Spend(SpendError::InsufficientFunds {
                available: 0,
                ..
            }))
        ));
        let with = PsbtAsk {
            include_unconfirmed: true,
            ..ask(&[(ELSEWHERE, 30_000)], 1_000)
        };
        let b = create_psbt(&w, &with, 20, 1).unwrap();
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
}
