//! Spending, watch-only: the coins to spend picked ([`select`]), the transaction laid out
//! (version 2, every input signalling replaceability as BIP125 and Bitcoin Core's wallet
//! do, the lock time at the tip against fee sniping, inputs shuffled and change at a
//! random position) and handed over as a BIP174 PSBT ([`psbt`]) with what a signer needs
//! to sign each input without asking the wallet anything: the output spent (segwit), the
//! whole funding transaction (legacy, and segwit v0 where it is kept), the redeem script
//! of a nested segwit input, and each key's origin (BIP32 derivations, BIP371's for
//! taproot), the change output's too so a signer can tell it is its own.
//!
//! Sizes are budgeted as Bitcoin Core's wallet budgets them: 72-byte ECDSA signatures
//! (with the sighash byte; signers that do not grind for a low R make some of them that
//! long) and 65-byte Schnorr signatures, so the fee is at least the asked rate for the
//! signed transaction's size whatever the signer. Fees round up to the satoshi.

pub mod ancestry;
pub mod bump;
pub mod psbt;
pub mod select;
pub mod wallet;

use alloc::rc::Rc;
use alloc::vec::Vec;

use lightwire_primitives::{Tx, compact_size_len, write_compact_size};

use crate::descriptor::{DescriptorError, Kind};
use crate::hash;
use crate::ledger::Outpoint;
use select::{Candidate, Target};

/// A fee rate in satoshis per 1,000 virtual bytes (Bitcoin Core's `CFeeRate`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub struct FeeRate(pub u64);

impl FeeRate {
    /// Bitcoin Core's minimum relay fee rate since 29.1 (`DEFAULT_MIN_RELAY_TX_FEE`),
    /// 0.1 sat/vB: a transaction paying less is relayed by no node. btcd, Bitcoin Knots and
    /// Core before 29.1 relay from 1 sat/vB: below that, fewer nodes take it.
    pub const MIN_RELAY: FeeRate = FeeRate(100);
    /// Core's `-maxfeerate` for `sendrawtransaction`, 10,000 sat/vB: above is a mistake.
    pub const MAX: FeeRate = FeeRate(10_000_000);
    /// Core's `-consolidatefeerate`, 10 sat/vB: the rate coins are expected to be spent
    /// at some day; spending an input now at more than it is waste.
    pub const LONG_TERM: FeeRate = FeeRate(10_000);
    /// Core's `-discardfee`, 10 sat/vB: change worth less than spending it at this rate
    /// is not made (it goes to the fee).
    pub const DISCARD: FeeRate = FeeRate(10_000);
    /// Core's `-dustrelayfee`, 3 sat/vB, which sets the dust threshold.
    pub const DUST_RELAY: FeeRate = FeeRate(3_000);

    /// The rate of `sat_per_vb` satoshis per virtual byte, rounded to the sat/kvB.
    pub fn from_sat_per_vb(sat_per_vb: f64) -> Option<FeeRate> {
        let k = (sat_per_vb * 1000.0).round();
        (k.is_finite() && k >= 0.0 && k <= u64::MAX as f64).then_some(FeeRate(k as u64))
    }

    /// The fee for `vsize` virtual bytes, rounded up (as Core's `GetFee`).
    pub fn fee(self, vsize: u64) -> u64 {
        (u128::from(self.0) * u128::from(vsize)).div_ceil(1000) as u64
    }
}

/// The most a wallet spend may pay in fees (Core's `-maxtxfee`, 0.1 BTC).
pub const MAX_FEE: u64 = 10_000_000;

/// The heaviest transaction nodes relay (Core's `MAX_STANDARD_TX_WEIGHT`).
pub const MAX_WEIGHT: u64 = 400_000;

/// All the bitcoin there will ever be, in satoshis (Core's `MAX_MONEY`).
pub const MAX_MONEY: u64 = 21_000_000 * 100_000_000;

/// The sequence of every input: BIP125 replaceable, lock time enforced.
pub const SEQUENCE: u32 = 0xffff_fffd;

/// Where a key comes from, for a signer: the public key, the master key's fingerprint,
/// and the path from it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct KeySource {
    /// The compressed public key (for `tr`, the internal key: its x-only part is used).
    pub pubkey: [u8; 33],
    /// The master key's fingerprint.
    pub fingerprint: [u8; 4],
    /// The path from the master key (hardened steps with bit 31 set).
    pub path: Vec<u32>,
}

/// A coin that may be spent.
#[derive(Clone, Debug)]
pub struct Spendable {
    /// The output it is.
    pub outpoint: Outpoint,
    /// Its value.
    pub value: u64,
    /// Its script.
    pub script: Vec<u8>,
    /// How it is spent (its size follows).
    pub kind: Kind,
    /// The transaction that created it, where kept: required to spend a `pkh` coin
    /// (BIP174's `non_witness_utxo`), given for segwit v0 ones (hardware signers ask).
    /// Shared by every coin it created: one transaction paying the wallet thousands of
    /// times is held once, not once per coin.
    pub funding: Option<Rc<[u8]>>,
    /// For a silent payment's output: what its signer needs (BIP376), which makes the
    /// PSBT version 2.
    pub silent: Option<SilentKey>,
}

/// What spends a silent payment's output (BIP352): the spend key plus the tweak.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SilentKey {
    /// The private-key tweak.
    pub tweak: [u8; 32],
    /// The receiver's spend public key.
    pub spend: [u8; 33],
    /// Where the spend key derives from, if the application said.
    pub origin: Option<crate::descriptor::KeyOrigin>,
}

impl SilentKey {
    /// The one of a coin of `origin`, if it is a silent payment's (its spend key's origin
    /// from `watch`).
    pub fn of(
        origin: Option<crate::watch::Origin>,
        watch: &crate::watch::Watchlist,
    ) -> Option<SilentKey> {
        match origin? {
            crate::watch::Origin::Silent { tweak, spend, .. } => Some(SilentKey {
                tweak,
                spend,
                origin: watch.spend_origin(&spend).cloned(),
            }),
            _ => None,
        }
    }
}

/// Where change goes.
#[derive(Clone, Debug)]
pub struct Change {
    /// Its script.
    pub script: Vec<u8>,
    /// How it will be spent.
    pub kind: Kind,
    /// Its key's origin, so the signer sees it is its own.
    pub key: Option<KeySource>,
}

/// What a spend is asked to do.
pub struct Request<'a> {
    /// The coins it may spend.
    pub coins: &'a [Spendable],
    /// Spend every one of `coins` (the app named them) rather than pick among them.
    pub spend_all: bool,
    /// What it pays: output scripts and values, in order.
    pub outputs: &'a [(Vec<u8>, u64)],
    /// The output that takes everything the coins hold less the other outputs and the fee
    /// (send-max; its value in `outputs` is not read): every one of `coins` is spent, and
    /// there is no change.
    pub max: Option<usize>,
    /// The fee rate.
    pub rate: FeeRate,
    /// Where change goes, if any may be made.
    pub change: Option<&'a Change>,
    /// The transaction's lock time (the tip's height, against fee sniping).
    pub lock_time: u32,
    /// Randomness for the order of inputs and the change's position.
    pub seed: u64,
    /// The unconfirmed transactions coins may come from: a spend of their outputs pays
    /// for those below its rate (child pays for parent, [`ancestry`]); none, nothing.
    pub ancestors: Option<&'a ancestry::Ancestry>,
}

/// A spend laid out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Built {
    /// The PSBT's bytes.
    pub psbt: Vec<u8>,
    /// The fee it pays.
    pub fee: u64,
    /// The part of the fee that pays for unconfirmed ancestors below its rate (child
    /// pays for parent, [`ancestry`]).
    pub ancestor_fee: u64,
    /// Its virtual size once signed, as budgeted.
    pub vsize: u64,
    /// The change output's position and value, if one is made.
    pub change: Option<(u32, u64)>,
    /// The coins it spends, in input order.
    pub spent: Vec<Outpoint>,
}

/// A spend that cannot be made.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum SpendError {
    /// Nothing to pay.
    #[error("no outputs to pay")]
    NoOutputs,
    /// An output a node would not relay (Core's `IsDust`).
    #[error(
        "output {index} pays {value} sat, below the dust threshold of {threshold} sat for its script"
    )]
    Dust {
        /// Which output.
        index: usize,
        /// What it pays.
        value: u64,
        /// The least its script may be paid.
        threshold: u64,
    },
    /// The outputs add up to more than there is bitcoin.
    #[error("the outputs add up to more than 21 million bitcoin")]
    Amount,
    /// The coins do not cover the outputs and the fee.
    #[error("insufficient funds: {needed} sat needed at this fee rate, {available} sat spendable")]
    InsufficientFunds {
        /// The outputs and the fee of spending every coin that may be spent.
        needed: u64,
        /// What the coins that may be spent add up to.
        available: u64,
    },
    /// Heavier than nodes relay.
    #[error("the transaction would weigh {0} WU, above the 400,000 nodes relay")]
    TooLarge(u64),
    /// A fee above Core's `-maxtxfee`.
    #[error("a fee of {0} sat is above the 10,000,000 sat cap (Bitcoin Core's -maxtxfee)")]
    FeeTooHigh(u64),
    /// Change is due and the wallet has nowhere to send it.
    #[error("change is due and no descriptor is watched to send it to")]
    NoChangeAddress,
    /// A `pkh` coin whose funding transaction the wallet did not keep (a signer needs it).
    #[error("coin {0} spends a legacy output whose funding transaction is not kept")]
    MissingFunding(usize),
    /// A key that does not derive.
    #[error("a coin's key does not derive: {0}")]
    Key(DescriptorError),
    /// The coins spent have more unconfirmed ancestors than nodes relay a transaction
    /// with (Bitcoin Core's `DEFAULT_ANCESTOR_LIMIT`, 25 with itself).
    #[error(
        "the coins spent have {0} unconfirmed ancestors: nodes relay a transaction with at most 24 (Bitcoin Core's ancestor limit of 25, itself counted)"
    )]
    TooManyAncestors(usize),
}

/// Core's dust threshold for an output paying `script` (`GetDustThreshold` at the dust
/// relay fee): three times the size of the output and of the input that would spend it.
pub fn dust_threshold(script: &[u8]) -> u64 {
    if script.first() == Some(&0x6a) {
        return 0;
    }
    let output = 8 + compact_size_len(script.len() as u64) as u64 + script.len() as u64;
    // Core's estimate of the input spending it: 67 vbytes for a witness program, 148
    // otherwise.
    let input = if is_witness_program(script) { 67 } else { 148 };
    FeeRate::DUST_RELAY.fee(output + input)
}

/// Whether `script` is a witness program (BIP141): a version opcode then a 2-40 byte push.
fn is_witness_program(script: &[u8]) -> bool {
    let n = script.len();
    (4..=42).contains(&n)
        && (script[0] == 0 || (0x51..=0x60).contains(&script[0]))
        && usize::from(script[1]) + 2 == n
}

/// How `script` is spent, when its form says (a P2SH script does not: only the wallet's
/// descriptor knows it nests P2WPKH).
pub fn kind_of(script: &[u8]) -> Option<Kind> {
    match script {
        [0x76, 0xa9, 0x14, .., 0x88, 0xac] if script.len() == 25 => Some(Kind::Pkh),
        [0x00, 0x14, ..] if script.len() == 22 => Some(Kind::Wpkh),
        [0x51, 0x20, ..] if script.len() == 34 => Some(Kind::Tr),
        _ => None,
    }
}

/// The weight of an input of `kind` once signed, as budgeted; a legacy input counts the
/// empty witness it has in a transaction with witnesses.
pub fn input_weight(kind: Kind) -> u64 {
    // Outpoint, sequence and the scriptSig's length.
    const BASE: u64 = 36 + 4 + 1;
    // Items, a 72-byte signature and a 33-byte key, each with its length.
    const P2WPKH_WITNESS: u64 = 1 + 1 + 72 + 1 + 33;
    match kind {
        Kind::Pkh => (BASE + 1 + 72 + 1 + 33) * 4 + 1,
        Kind::ShWpkh => (BASE + 23) * 4 + P2WPKH_WITNESS,
        Kind::Wpkh => BASE * 4 + P2WPKH_WITNESS,
        // One item: a 64-byte signature and a sighash byte, with its length.
        Kind::Tr => BASE * 4 + 1 + 1 + 65,
    }
}

/// The weight of an output paying `script`.
pub fn output_weight(script: &[u8]) -> u64 {
    (8 + compact_size_len(script.len() as u64) as u64 + script.len() as u64) * 4
}

/// The weight of everything but the inputs' and outputs' own: version, lock time, the
/// counts, and the segwit marker and flag when an input has a witness.
fn frame_weight(inputs: usize, outputs: usize, segwit: bool) -> u64 {
    let counts = compact_size_len(inputs as u64) + compact_size_len(outputs as u64);
    (8 + counts as u64) * 4 + if segwit { 2 } else { 0 }
}

/// The virtual size of `weight` (BIP141: a quarter, rounded up).
fn vsize(weight: u64) -> u64 {
    weight.div_ceil(4)
}

/// Lay out the spend `req` asks for and write its PSBT; `keys` gives each spent coin's
/// key origin (derived only for the coins picked), `None` for one the wallet does not
/// derive (a watched address's).
pub fn build(
    req: &Request<'_>,
    mut keys: impl FnMut(&Spendable) -> Result<Option<KeySource>, DescriptorError>,
) -> Result<Built, SpendError> {
    build_with(req, &mut keys)
}

/// The key origins of spent coins, for [`build`].
type Keys<'k> = dyn FnMut(&Spendable) -> Result<Option<KeySource>, DescriptorError> + 'k;

/// [`build`] with `keys` behind a pointer: one copy of the layout in the wasm for every
/// caller's closure (a spend and a bump each had theirs, about 4.7 KB).
fn build_with(req: &Request<'_>, keys: &mut Keys<'_>) -> Result<Built, SpendError> {
    if req.outputs.is_empty() {
        return Err(SpendError::NoOutputs);
    }
    if let Some(at) = req.max {
        return send_max(req, at, keys);
    }
    let mut paid = 0u64;
    for (index, (script, value)) in req.outputs.iter().enumerate() {
        let threshold = dust_threshold(script);
        if *value < threshold || *value == 0 {
            return Err(SpendError::Dust {
                index,
                value: *value,
                threshold,
            });
        }
        paid = paid
            .checked_add(*value)
            .filter(|&p| p <= MAX_MONEY)
            .ok_or(SpendError::Amount)?;
    }
    let rate = i128::from(req.rate.0);
    let outputs_weight: u64 = req.outputs.iter().map(|(s, _)| output_weight(s)).sum();
    // The counts as large as they may get, and the marker: never less than the real one.
    let frame = frame_weight(req.coins.len(), req.outputs.len() + 1, true);
    // What each coin's unconfirmed ancestors lack (Core's `CalculateBumpFees`): charged
    // to its effective value while choosing; a coin over the ancestor limit is not one
    // to choose.
    let alone: Vec<Result<u64, usize>> = req
        .coins
        .iter()
        .map(|c| bump_for(req, &[c.outpoint.txid]))
        .collect();
    if req.spend_all
        && let Some(Err(n)) = alone.iter().find(|b| b.is_err())
    {
        return Err(SpendError::TooManyAncestors(*n));
    }
    let candidates: Vec<Candidate> = req
        .coins
        .iter()
        .zip(&alone)
        .map(|(c, bump)| {
            let w = i128::from(input_weight(c.kind));
            Candidate {
                effective: match bump {
                    Ok(b) => (i128::from(c.value) - i128::from(*b)) * 4000 - rate * w,
                    Err(_) => i128::MIN / 2,
                },
                waste: (rate - i128::from(FeeRate::LONG_TERM.0)) * w,
            }
        })
        .collect();
    // Rounding the size up to a whole vbyte, and the fee up to a satoshi.
    let slack = rate * 4 + 4000;
    let amount = i128::from(paid) * 4000 + rate * i128::from(frame + outputs_weight) + slack;
    // Without a change address, what a P2WPKH change output would cost bounds the
    // excess left to the fee.
    let (change_script, change_kind) = match req.change {
        Some(c) => (c.script.len(), c.kind),
        None => (22, Kind::Wpkh),
    };
    let change_weight = (8 + 1 + change_script as u64) * 4;
    let change_spend = input_weight(change_kind);
    let min_change = match req.change {
        Some(c) => dust_threshold(&c.script).max(FeeRate::DISCARD.fee(vsize(change_spend)) + 1),
        None => 0,
    };
    let change_fee = rate * i128::from(change_weight);
    let cost_of_change = change_fee + i128::from(FeeRate::DISCARD.0) * i128::from(change_spend);
    let target = Target {
        amount,
        cost_of_change,
        with_change: if req.change.is_some() {
            amount + change_fee + i128::from(min_change) * 4000
        } else {
            i128::MAX
        },
    };
    let excess_allowed = ((cost_of_change + slack) / 4000) as u64 + 1;
    let picked: Vec<usize> = if req.spend_all {
        (0..req.coins.len()).collect()
    } else {
        // Coins that cost more to spend than they are worth are left alone (as Core).
        // Largest first, as both selections take them, ties in the coins' order: each put
        // in its place (a binary search, then a move of what follows: n²/4 words moved,
        // under a millisecond for the bench's 1,000 coins, and no sort's code in the wasm,
        // about 1.3 KB gzipped for this one caller's copy).
        let mut worth: Vec<usize> = Vec::with_capacity(candidates.len());
        for (i, c) in candidates.iter().enumerate() {
            if c.effective > 0 {
                let at = worth.partition_point(|&j| candidates[j].effective >= c.effective);
                worth.insert(at, i);
            }
        }
        let pool: Vec<Candidate> = worth.iter().map(|&i| candidates[i]).collect();
        let found = select::branch_and_bound(&pool, &target).or_else(|| {
            req.change
                .is_some()
                .then(|| select::largest_first(&pool, &target))
                .flatten()
        });
        match found {
            Some(p) => p.into_iter().map(|i| worth[i]).collect(),
            None if req.change.is_none()
                && pool.iter().map(|c| c.effective).sum::<i128>() >= amount =>
            {
                return Err(SpendError::NoChangeAddress);
            }
            None => return Err(insufficient(req, paid, frame + outputs_weight)),
        }
    };
    let change = (change_weight, min_change, excess_allowed);
    lay_out(req, &picked, paid, outputs_weight, change, keys)
}

/// [`build_with`] for a request whose output `at` takes what is left (send-max, as Bitcoin
/// Core's `sendall`): every coin is spent, the fee is the rate's for the transaction
/// without change (and what the coins' unconfirmed ancestors lack), and the output gets
/// the rest, which must not be dust. Then laid out as an ordinary spend of those outputs,
/// which leaves no excess for change.
fn send_max(req: &Request<'_>, at: usize, keys: &mut Keys<'_>) -> Result<Built, SpendError> {
    let Some((script, _)) = req.outputs.get(at) else {
        return Err(SpendError::NoOutputs);
    };
    if req.coins.is_empty() {
        return Err(SpendError::InsufficientFunds {
            needed: 0,
            available: 0,
        });
    }
    let mut others = 0u64;
    for (i, (_, value)) in req.outputs.iter().enumerate() {
        if i != at {
            others = others
                .checked_add(*value)
                .filter(|&p| p <= MAX_MONEY)
                .ok_or(SpendError::Amount)?;
        }
    }
    let total_in: u64 = req.coins.iter().map(|c| c.value).sum();
    let segwit = req.coins.iter().any(|c| c.kind != Kind::Pkh);
    let inputs_weight: u64 = req
        .coins
        .iter()
        .map(|c| input_weight(c.kind) - u64::from(!segwit && c.kind == Kind::Pkh))
        .sum();
    let outputs_weight: u64 = req.outputs.iter().map(|(s, _)| output_weight(s)).sum();
    let weight =
        frame_weight(req.coins.len(), req.outputs.len(), segwit) + inputs_weight + outputs_weight;
    let txids: Vec<_> = req.coins.iter().map(|c| c.outpoint.txid).collect();
    let ancestor_fee = bump_for(req, &txids).map_err(SpendError::TooManyAncestors)?;
    let fee = req.rate.fee(vsize(weight)) + ancestor_fee;
    let needed = others.saturating_add(fee);
    let value = total_in
        .checked_sub(needed)
        .ok_or(SpendError::InsufficientFunds {
            needed,
            available: total_in,
        })?;
    let threshold = dust_threshold(script);
    if value < threshold || value == 0 {
        return Err(SpendError::Dust {
            index: at,
            value,
            threshold,
        });
    }
    let mut outputs = req.outputs.to_vec();
    outputs[at].1 = value;
    let exact = Request {
        coins: req.coins,
        spend_all: true,
        outputs: &outputs,
        max: None,
        rate: req.rate,
        change: None,
        lock_time: req.lock_time,
        seed: req.seed,
        ancestors: req.ancestors,
    };
    build_with(&exact, keys)
}

/// What a spend of outputs of `of` adds to its fee for their unconfirmed ancestors.
fn bump_for(req: &Request<'_>, of: &[lightwire_primitives::Txid]) -> Result<u64, usize> {
    req.ancestors.map_or(Ok(0), |a| a.bump(of, req.rate))
}

/// The shortfall of spending every coin, for [`SpendError::InsufficientFunds`].
fn insufficient(req: &Request<'_>, paid: u64, other_weight: u64) -> SpendError {
    let inputs: u64 = req.coins.iter().map(|c| input_weight(c.kind)).sum();
    let txids: Vec<_> = req.coins.iter().map(|c| c.outpoint.txid).collect();
    let ancestors = bump_for(req, &txids).unwrap_or(0);
    SpendError::InsufficientFunds {
        needed: paid
            .saturating_add(req.rate.fee(vsize(other_weight + inputs)))
            .saturating_add(ancestors),
        available: req.coins.iter().map(|c| c.value).sum(),
    }
}

/// The transaction spending `picked`, its exact size, fee and change, and its PSBT.
fn lay_out(
    req: &Request<'_>,
    picked: &[usize],
    paid: u64,
    outputs_weight: u64,
    (change_weight, min_change, excess_allowed): (u64, u64, u64),
    keys: &mut Keys<'_>,
) -> Result<Built, SpendError> {
    let coins: Vec<&Spendable> = picked.iter().map(|&i| &req.coins[i]).collect();
    let total_in: u64 = coins.iter().map(|c| c.value).sum();
    let segwit = coins.iter().any(|c| c.kind != Kind::Pkh);
    // A legacy input's empty witness counts only when the transaction has witnesses.
    let inputs_weight: u64 = coins
        .iter()
        .map(|c| input_weight(c.kind) - u64::from(!segwit && c.kind == Kind::Pkh))
        .sum();
    let n_out = req.outputs.len();
    let weight_without = frame_weight(coins.len(), n_out, segwit) + inputs_weight + outputs_weight;
    let weight_with = frame_weight(coins.len(), n_out + 1, segwit)
        + inputs_weight
        + outputs_weight
        + change_weight;
    // The ancestors' shortfall, their shared ones counted once (`CalculateTotalBumpFees`).
    let txids: Vec<_> = coins.iter().map(|c| c.outpoint.txid).collect();
    let ancestor_fee = bump_for(req, &txids).map_err(SpendError::TooManyAncestors)?;
    let fee_without = req.rate.fee(vsize(weight_without)) + ancestor_fee;
    let fee_with = req.rate.fee(vsize(weight_with)) + ancestor_fee;
    let left = total_in.checked_sub(paid);
    let change_value = left
        .and_then(|l| l.checked_sub(fee_with))
        .filter(|&v| req.change.is_some() && v >= min_change);
    let (weight, fee) = match (change_value, left) {
        (Some(v), Some(l)) => (weight_with, l - v),
        (None, Some(l)) if l >= fee_without => (weight_without, l),
        _ => {
            let frame = frame_weight(req.coins.len(), n_out + 1, true);
            return Err(insufficient(req, paid, frame + outputs_weight));
        }
    };
    if req.change.is_none() && fee - fee_without > excess_allowed {
        return Err(SpendError::NoChangeAddress);
    }
    if weight > MAX_WEIGHT {
        return Err(SpendError::TooLarge(weight));
    }
    if fee > MAX_FEE {
        return Err(SpendError::FeeTooHigh(fee));
    }
    // Inputs shuffled, change at a random position (Core's wallet does both: neither
    // order nor position tells which output is the change).
    let mut rng = SplitMix(req.seed);
    let mut order: Vec<usize> = (0..coins.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut outputs: Vec<(&[u8], u64)> = req.outputs.iter().map(|(s, v)| (&s[..], *v)).collect();
    let change = match (change_value, req.change) {
        (Some(v), Some(c)) => {
            let at = rng.below(n_out as u64 + 1) as usize;
            outputs.insert(at, (&c.script, v));
            Some((at as u32, v))
        }
        _ => None,
    };
    // A silent payment's output is spent with BIP376's fields, which only version 2 takes.
    let v2 = coins.iter().any(|c| c.silent.is_some());
    let mut w = if v2 {
        psbt::Writer::new_v2(2, req.lock_time, coins.len(), outputs.len())
    } else {
        psbt::Writer::new(&unsigned_tx(&order, &coins, &outputs, req.lock_time))
    };
    for &i in &order {
        if v2 {
            let o = &coins[i].outpoint;
            w.v2_input(o.txid.as_bytes(), o.vout, SEQUENCE);
        }
        input_map(&mut w, coins[i], picked[i], keys)?;
        w.end_map();
    }
    for (at, (script, value)) in outputs.iter().enumerate() {
        if v2 {
            w.v2_output(*value, script);
        }
        if let (
            Some((c_at, _)),
            Some(Change {
                key: Some(k), kind, ..
            }),
        ) = (change, req.change)
            && c_at as usize == at
        {
            match kind {
                Kind::Tr => w.taproot_key(
                    (psbt::OUT_TAP_BIP32_DERIVATION, psbt::OUT_TAP_INTERNAL_KEY),
                    &xonly(&k.pubkey),
                    k.fingerprint,
                    &k.path,
                ),
                kind => {
                    // BIP174: a P2SH change output carries its redeem script, so that a
                    // signer can tell the output is its own.
                    if *kind == Kind::ShWpkh {
                        w.pair(
                            psbt::OUT_REDEEM_SCRIPT,
                            &[],
                            &hash::witness(0, &hash::hash160(&k.pubkey)),
                        );
                    }
                    w.derivation(
                        psbt::OUT_BIP32_DERIVATION,
                        &k.pubkey,
                        k.fingerprint,
                        &k.path,
                    )
                }
            }
        }
        w.end_map();
    }
    Ok(Built {
        psbt: w.finish(),
        fee,
        ancestor_fee,
        vsize: vsize(weight),
        change,
        spent: order.iter().map(|&i| coins[i].outpoint).collect(),
    })
}

/// One input's PSBT map; `index` names the coin in an error.
fn input_map(
    w: &mut psbt::Writer,
    coin: &Spendable,
    index: usize,
    keys: &mut Keys<'_>,
) -> Result<(), SpendError> {
    // A funding transaction is given only when it is the one the coin comes from.
    let funding = coin.funding.as_deref().filter(|f| {
        Tx::parse(f).is_ok_and(|t| {
            t.txid() == coin.outpoint.txid
                && t.outputs()
                    .nth(coin.outpoint.vout as usize)
                    .is_some_and(|o| o.value == coin.value && o.script == coin.script)
        })
    });
    if coin.kind == Kind::Tr {
        // BIP341 signs every input's amount and script: the output spent is enough.
    } else if let Some(f) = funding {
        w.pair(psbt::IN_NON_WITNESS_UTXO, &[], f);
    } else if coin.kind == Kind::Pkh {
        return Err(SpendError::MissingFunding(index));
    }
    if coin.kind != Kind::Pkh {
        let mut utxo = Vec::with_capacity(9 + coin.script.len());
        utxo.extend_from_slice(&coin.value.to_le_bytes());
        write_compact_size(&mut utxo, coin.script.len() as u64);
        utxo.extend_from_slice(&coin.script);
        w.pair(psbt::IN_WITNESS_UTXO, &[], &utxo);
    }
    if let Some(s) = &coin.silent {
        // BIP376: the tweak, and the spend key with its origin where the application gave
        // it (else a zero fingerprint and no path: it gave the key alone).
        let mut origin = Vec::with_capacity(4 + 4 * s.origin.as_ref().map_or(0, |o| o.path.len()));
        match &s.origin {
            Some(o) => {
                origin.extend_from_slice(&o.fingerprint);
                for step in &o.path {
                    origin.extend_from_slice(&step.to_le_bytes());
                }
            }
            None => origin.extend_from_slice(&[0; 4]),
        }
        w.pair(psbt::IN_SP_SPEND_BIP32_DERIVATION, &s.spend, &origin);
        w.pair(psbt::IN_SP_TWEAK, &[], &s.tweak);
        return Ok(());
    }
    let Some(k) = keys(coin).map_err(SpendError::Key)? else {
        return Ok(());
    };
    match coin.kind {
        Kind::Tr => w.taproot_key(
            (psbt::IN_TAP_BIP32_DERIVATION, psbt::IN_TAP_INTERNAL_KEY),
            &xonly(&k.pubkey),
            k.fingerprint,
            &k.path,
        ),
        kind => {
            if kind == Kind::ShWpkh {
                w.pair(
                    psbt::IN_REDEEM_SCRIPT,
                    &[],
                    &hash::witness(0, &hash::hash160(&k.pubkey)),
                );
            }
            w.derivation(psbt::IN_BIP32_DERIVATION, &k.pubkey, k.fingerprint, &k.path);
        }
    }
    Ok(())
}

/// The unsigned transaction: version 2, empty scriptSigs, no witnesses.
fn unsigned_tx(
    order: &[usize],
    coins: &[&Spendable],
    outputs: &[(&[u8], u64)],
    lock_time: u32,
) -> Vec<u8> {
    let mut tx = Vec::with_capacity(10 + 41 * coins.len() + 43 * outputs.len());
    tx.extend_from_slice(&2u32.to_le_bytes());
    write_compact_size(&mut tx, coins.len() as u64);
    for &i in order {
        let o = &coins[i].outpoint;
        tx.extend_from_slice(o.txid.as_bytes());
        tx.extend_from_slice(&o.vout.to_le_bytes());
        tx.push(0);
        tx.extend_from_slice(&SEQUENCE.to_le_bytes());
    }
    write_compact_size(&mut tx, outputs.len() as u64);
    for (script, value) in outputs {
        tx.extend_from_slice(&value.to_le_bytes());
        write_compact_size(&mut tx, script.len() as u64);
        tx.extend_from_slice(script);
    }
    tx.extend_from_slice(&lock_time.to_le_bytes());
    tx
}

fn xonly(key: &[u8; 33]) -> [u8; 32] {
    let mut x = [0u8; 32];
    x.copy_from_slice(&key[1..]);
    x
}

/// SplitMix64: a few random numbers from a seed (the order of inputs, the change's
/// position), where no more than that is asked of them.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (`n` > 0; the bias is below 2^-50 for the counts used here).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[cfg(test)]
mod tests;
