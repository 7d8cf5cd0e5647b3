//! A spend of a wallet's coins, from what the wallet knows ([`WalletState`]): its coins
//! (confirmed and mature; unconfirmed ones only when asked), how each is spent and where
//! its key comes from, the funding transactions kept, and where change goes; laid out by
//! [`super::build`].
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

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use lightwire_chain::Network;
use lightwire_primitives::Txid;

use super::{Built, Change, FeeRate, KeySource, Request, SpendError, Spendable};
use crate::address::{AddressError, script_of_address};
use crate::descriptor::{DescriptorError, Kind};
use crate::ledger::{Ledger, Outpoint};
use crate::unconfirmed::Unconfirmed;
use crate::watch::{Origin, Watchlist};

/// What a spend is made from: the wallet's parts.
#[derive(Clone, Copy)]
pub struct WalletState<'a> {
    /// Its network (addresses are of it).
    pub network: Network,
    /// What it watches.
    pub watch: &'a Watchlist,
    /// What blocks did.
    pub ledger: &'a Ledger,
    /// Its unconfirmed transactions.
    pub unconfirmed: &'a Unconfirmed,
}

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
    /// Short with the coins the wallet picks, while it holds coins of addresses or scripts
    /// watched as such, which it spends only when named (their signer may not be this
    /// wallet's).
    #[error(
        "insufficient funds: {needed} sat needed at this fee rate, {available} sat in the descriptors' coins; {named_only} sat more in coins of addresses or scripts watched as such, spent only when named in `coins`"
    )]
    NamedOnly {
        /// What the spend needs.
        needed: u64,
        /// What the coins the wallet picks from add up to.
        available: u64,
        /// What the others add up to.
        named_only: u64,
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
            PsbtError::Spend(SpendError::InsufficientFunds { .. })
            | PsbtError::NamedOnly { .. } => "InsufficientFunds",
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
    /// An output of a transaction the wallet broadcast itself (unconfirmed): one an
    /// `includeUnconfirmed` spend may pick, as Bitcoin Core spends its own unconfirmed
    /// change and never someone else's unconfirmed payment (a gateway may have invented
    /// it).
    own: bool,
}

impl Found {
    /// Whether the wallet may pick it by itself.
    fn pickable(&self, include_unconfirmed: bool) -> bool {
        self.confirmed || (include_unconfirmed && self.own)
    }
}

/// Build the PSBT `ask` asks for from `wallet` with the best chain's tip at `tip` (the
/// lock time), `seed` ordering its inputs and change.
pub fn create_psbt(
    wallet: &WalletState<'_>,
    ask: &PsbtAsk,
    tip: u32,
    seed: u64,
) -> Result<Built, PsbtError> {
    if ask.rate < FeeRate::MIN_RELAY || ask.rate > FeeRate::MAX {
        return Err(PsbtError::FeeRate(ask.rate.0));
    }
    let network = wallet.network;
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
            .filter(|f| f.origin.is_some() && f.pickable(ask.include_unconfirmed))
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
    match super::build(&request, keys) {
        // Short, with coins the wallet does not pick by itself: say so.
        Err(SpendError::InsufficientFunds { needed, available }) if ask.coins.is_none() => {
            let named_only: u64 = found
                .iter()
                .filter(|f| f.origin.is_none() && f.pickable(ask.include_unconfirmed))
                .map(|f| f.coin.value)
                .sum();
            Err(match named_only {
                0 => SpendError::InsufficientFunds { needed, available }.into(),
                _ => PsbtError::NamedOnly {
                    needed,
                    available,
                    named_only,
                },
            })
        }
        built => Ok(built?),
    }
}

/// Every coin the wallet may spend now, with how it is spent (coins whose script does not
/// say are left out).
fn spendable(wallet: &WalletState<'_>, tip: u32) -> Vec<Found> {
    let spent = wallet.unconfirmed.spent();
    let mut found = Vec::new();
    let mut add = |outpoint: Outpoint,
                   value: u64,
                   script: &[u8],
                   (confirmed, own): (bool, bool),
                   funding: Option<&[u8]>| {
        let (kind, origin) = match wallet.watch.origin(script) {
            Some(Origin::Derived {
                descriptor,
                branch,
                index,
            }) => match wallet.watch.descriptors().nth(descriptor) {
                Some(d) => (Some(d.kind), Some((descriptor, branch, index))),
                None => (None, None),
            },
            _ => (super::kind_of(script), None),
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
                own,
            });
        }
    };
    for c in wallet.ledger.utxos() {
        let mature = !c.coinbase || tip >= c.height.saturating_add(COINBASE_CONFIRMATIONS - 1);
        if mature && !spent.contains(&c.outpoint) {
            let funding = wallet.ledger.funding(&c.outpoint.txid);
            add(c.outpoint, c.value, &c.script, (true, false), funding);
        }
    }
    for t in wallet.unconfirmed.transactions() {
        let own = t.source == crate::unconfirmed::Source::Own;
        for (o, value, script) in t.coins() {
            if !spent.contains(&o) {
                add(o, value, script, (false, own), Some(&t.raw));
            }
        }
    }
    found
}

/// Why coin `o` is not among the spendable.
fn why_not(wallet: &WalletState<'_>, o: &Outpoint, tip: u32) -> &'static str {
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
    wallet: &WalletState<'_>,
    d: usize,
    b: usize,
    index: u32,
) -> Result<KeySource, DescriptorError> {
    let descriptor = wallet
        .watch
        .descriptors()
        .nth(d)
        .ok_or(DescriptorError::InvalidChild(index))?;
    Ok(KeySource {
        pubkey: wallet.watch.key_at(d, b, index)?,
        fingerprint: descriptor.origin.fingerprint,
        path: descriptor.path_of(b, index),
    })
}

/// Where change goes (see the module documentation).
fn change_for(wallet: &WalletState<'_>, outputs: &[(Vec<u8>, u64)]) -> Option<Change> {
    let descriptors: Vec<_> = wallet.watch.descriptors().collect();
    let change_branch = |d: usize| descriptors[d].branches.iter().position(|b| *b == Some(1));
    let like_payment = outputs.iter().find_map(|(s, _)| {
        let kind = super::kind_of(s)?;
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
    let script = crate::descriptor::script_for_key(kind, &branch_key)?;
    Some(Change {
        script,
        kind,
        key: Some(key),
    })
}
