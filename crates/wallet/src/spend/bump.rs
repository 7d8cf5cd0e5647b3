//! Fee bumping: a PSBT replacing an unconfirmed transaction of the wallet's at a higher
//! fee rate, by Bitcoin Core's rules (`feebumper::PreconditionChecks`, `CheckFeeRate` and
//! `CreateRateBumpTransaction`, what `psbtbumpfee` does):
//!
//! - only the wallet's own: every input spends a coin of the wallet's (Core: "Transaction
//!   contains inputs that don't belong to this wallet"), it is unconfirmed, nothing the
//!   wallet holds spends its outputs ("Transaction has descendants in the wallet"), and it
//!   signals replaceability (BIP125; the wallet's spends always do);
//! - the replacement spends the same inputs, pays the same outputs but the change, in
//!   order, and keeps the lock time; the change pays the difference (reduced, or left out
//!   when what is left is dust and goes to the fee); when it cannot, the wallet's other
//!   confirmed coins of the same signer are added, largest first, until they do, the
//!   change then going to the old change output or, without one, to the signer's next
//!   change address (Core's coin selection with the old inputs preset; BIP125's second
//!   rule takes no new unconfirmed input);
//! - it pays at least the old fee plus the incremental relay fee (1 sat/vB) for its own
//!   size (BIP125's fourth rule), at a rate above the old one: a rate that would not is
//!   refused, naming the least that would do.
//! - its unconfirmed parents below the new rate are paid for, as a new spend's
//!   ([`super::ancestry`]).

use alloc::vec::Vec;

use lightwire_primitives::{Tx, Txid};

use super::wallet::{WalletState, change_for, confirmed_coins, how_spent, key_source};
use super::{Built, Change, FeeRate, Request, SpendError, Spendable};
use crate::descriptor::Kind;
use crate::unconfirmed::Source;
use crate::watch::Origin;

/// Bitcoin Core's incremental relay fee (`DEFAULT_INCREMENTAL_RELAY_FEE`), sat/kvB.
pub const INCREMENTAL_RELAY_FEE: u64 = 1_000;

/// A fee bump that cannot be made.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum BumpError {
    /// Not an unconfirmed transaction the wallet holds.
    #[error("{0} is not an unconfirmed transaction of the wallet's")]
    NotUnconfirmed(Txid),
    /// One of its inputs is not a coin of the wallet's.
    #[error(
        "its input {0} does not spend a coin of the wallet's: only the wallet's own transactions are bumped"
    )]
    ForeignInput(u32),
    /// An unconfirmed transaction of the wallet spends one of its outputs.
    #[error("unconfirmed transaction {0} spends one of its outputs: bump that one")]
    HasDescendants(Txid),
    /// None of its inputs signals replaceability (BIP125).
    #[error("it does not signal replaceability (BIP125)")]
    NotReplaceable,
    /// An input's coin is of a kind the wallet cannot size a signature for.
    #[error("its input {0} spends a coin whose signature the wallet cannot size")]
    Unsized(u32),
    /// The rate asked does not pay enough: at least `minimum` sat/kvB would.
    #[error(
        "a fee rate of {asked} sat/kvB does not replace it: at least {minimum} sat/kvB (its rate plus 1 sat/vB, and its fee plus 1 sat/vB of the replacement's size)"
    )]
    FeeRateTooLow {
        /// What was asked.
        asked: u64,
        /// The least that would do.
        minimum: u64,
    },
    /// Neither its change nor the wallet's other confirmed coins of its signer can pay the
    /// higher fee.
    #[error(
        "insufficient funds: neither its change nor the wallet's other confirmed coins of its signer pay a fee rate of {0} sat/kvB"
    )]
    InsufficientFunds(u64),
    /// The replacement itself (size, fee).
    #[error(transparent)]
    Spend(#[from] SpendError),
}

impl BumpError {
    /// The error's name, for JavaScript.
    pub fn name(&self) -> &'static str {
        match self {
            BumpError::InsufficientFunds(_) => "InsufficientFunds",
            BumpError::NotUnconfirmed(_) => "UnknownTransaction",
            _ => "InvalidArgument",
        }
    }
}

/// A PSBT replacing unconfirmed transaction `txid` of `wallet` at `rate` with the best
/// chain's tip at `tip` (see the module documentation); `seed` orders its inputs and
/// places its change.
pub fn bump_fee(
    wallet: &WalletState<'_>,
    txid: &Txid,
    rate: FeeRate,
    tip: u32,
    seed: u64,
) -> Result<Built, BumpError> {
    let t = wallet
        .unconfirmed
        .get(txid)
        .filter(|t| t.source != Source::Announced || !t.spends.is_empty())
        .ok_or(BumpError::NotUnconfirmed(*txid))?;
    let tx = Tx::parse(&t.raw).map_err(|_| BumpError::NotUnconfirmed(*txid))?;
    for (i, _) in tx.inputs().enumerate() {
        if !t.spends.iter().any(|s| s.input == i as u32) {
            return Err(BumpError::ForeignInput(i as u32));
        }
    }
    if let Some(d) = wallet
        .unconfirmed
        .transactions()
        .iter()
        .find(|d| d.inputs().any(|o| o.txid == *txid))
    {
        return Err(BumpError::HasDescendants(d.txid));
    }
    if !tx.inputs().any(|i| i.sequence < 0xffff_fffe) {
        return Err(BumpError::NotReplaceable);
    }
    // The old fee and rate; the new rate above it by the incremental relay fee.
    let old_fee = t.fee.unwrap_or(0);
    let old_vsize = (tx.weight() as u64).div_ceil(4);
    let old_rate = (old_fee * 1_000).div_ceil(old_vsize.max(1));
    let minimum = old_rate + INCREMENTAL_RELAY_FEE;
    if rate.0 < minimum {
        return Err(BumpError::FeeRateTooLow {
            asked: rate.0,
            minimum,
        });
    }
    // The inputs, as the wallet spends them.
    let mut coins = Vec::with_capacity(t.spends.len());
    let mut origins = Vec::with_capacity(t.spends.len());
    for s in &t.spends {
        let (kind, origin) = how_spent(wallet, &s.script);
        let kind = kind.ok_or(BumpError::Unsized(s.input))?;
        let funding = match wallet.ledger.funding(&s.outpoint.txid) {
            Some(f) => Some(f),
            None => wallet
                .unconfirmed
                .get(&s.outpoint.txid)
                .map(|p| p.raw.as_slice()),
        };
        coins.push(Spendable {
            outpoint: s.outpoint,
            value: s.value,
            script: s.script.clone(),
            kind,
            funding: funding.filter(|_| kind != Kind::Tr).map(Into::into),
            silent: super::SilentKey::of(wallet.watch.origin(&s.script), wallet.watch),
        });
        origins.push(origin);
    }
    // The outputs but the change: the output paying a change branch of the wallet's.
    let mut outputs: Vec<(Vec<u8>, u64)> = Vec::new();
    let mut change = None;
    for o in tx.outputs() {
        match wallet.watch.origin(o.script) {
            Some(Origin::Derived {
                descriptor,
                branch,
                index,
            }) if change.is_none() && is_change_branch(wallet, descriptor, branch) => {
                let d = wallet.watch.descriptors().nth(descriptor);
                change = d
                    .zip(key_source(wallet, descriptor, branch, index).ok())
                    .map(|(d, key)| Change {
                        script: o.script.to_vec(),
                        kind: d.kind,
                        key: Some(key),
                    });
            }
            _ => outputs.push((o.script.to_vec(), o.value)),
        }
    }
    // Its unconfirmed ancestors below the new rate are paid for too (as a new spend's).
    let ancestry = super::ancestry::Ancestry::new(wallet.unconfirmed);
    let lock_time = tx.lock_time();
    let attempt =
        |coins: &[Spendable], origins: &[Option<(usize, usize, u32)>], change: Option<&Change>| {
            let request = Request {
                coins,
                max: None,
                spend_all: true,
                outputs: &outputs,
                rate,
                change,
                lock_time,
                seed,
                ancestors: Some(&ancestry),
            };
            attempt(wallet, &request, origins)
        };
    let short = |e: &SpendError| {
        matches!(
            e,
            SpendError::InsufficientFunds { .. } | SpendError::NoChangeAddress
        )
    };
    let built = match attempt(&coins, &origins, change.as_ref()) {
        Err(e) if short(&e) => {
            // More inputs: the signers' other confirmed coins, largest first, one at a
            // time until the spend is paid for.
            let signers: Vec<[u8; 4]> = origins
                .iter()
                .flatten()
                .filter_map(|(d, _, _)| wallet.watch.descriptors().nth(*d))
                .map(|d| d.origin.fingerprint)
                .collect();
            let extra = confirmed_coins(wallet, tip, |m| signers.contains(&m));
            let change = change.or_else(|| {
                let descriptors: Vec<_> = wallet.watch.descriptors().collect();
                change_for(wallet, &outputs, |d| {
                    signers.contains(&descriptors[d].origin.fingerprint)
                })
            });
            let mut built = Err(BumpError::InsufficientFunds(rate.0));
            for (coin, origin) in extra {
                // Taken already, or worth less than its own input's fee at this rate (it
                // could never help, and a wallet paid dust would try each in turn).
                let worth = u128::from(coin.value) * 4000
                    > u128::from(rate.0) * u128::from(super::input_weight(coin.kind));
                if !worth || coins.iter().any(|c| c.outpoint == coin.outpoint) {
                    continue;
                }
                coins.push(coin);
                origins.push(Some(origin));
                match attempt(&coins, &origins, change.as_ref()) {
                    Err(e) if short(&e) => {}
                    other => {
                        built = other.map_err(BumpError::from);
                        break;
                    }
                }
            }
            built?
        }
        built => built?,
    };
    // BIP125's fourth rule: the old fee plus the incremental relay fee for the new size.
    let least = old_fee + FeeRate(INCREMENTAL_RELAY_FEE).fee(built.vsize);
    if built.fee < least {
        return Err(BumpError::FeeRateTooLow {
            asked: rate.0,
            minimum: (least * 1_000).div_ceil(built.vsize.max(1)),
        });
    }
    Ok(built)
}

/// The spend `request` asks for, the key of `request.coins[i]` from `origins[i]`. (Never
/// inlined: the bump calls it for its first try and for each coin added.)
#[inline(never)]
fn attempt(
    wallet: &WalletState<'_>,
    request: &Request<'_>,
    origins: &[Option<(usize, usize, u32)>],
) -> Result<Built, SpendError> {
    let keys = |c: &Spendable| {
        let Some(at) = request.coins.iter().position(|x| x.outpoint == c.outpoint) else {
            return Ok(None);
        };
        match origins[at] {
            Some((d, b, index)) => key_source(wallet, d, b, index).map(Some),
            None => Ok(None),
        }
    };
    super::build(request, keys)
}

/// Whether branch `b` of descriptor `d` is its change branch (`<0;1>`'s second).
fn is_change_branch(wallet: &WalletState<'_>, d: usize, b: usize) -> bool {
    wallet
        .watch
        .descriptors()
        .nth(d)
        .is_some_and(|d| d.branches.get(b) == Some(&Some(1)))
}
