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
//! - Change stays with its signer (a signer: the master key of a descriptor's key origin,
//!   or the extended key itself without one). The wallet picks among one signer's coins
//!   (signers in the order their descriptors were watched; the next one's only if the
//!   first's do not cover the spend) and change goes to that signer: a wallet watching
//!   someone else's descriptor beside its own never pays its change to a key the other
//!   holds. Coins named of several signers are refused unless the change descriptor is
//!   named ([`PsbtAsk::change_descriptor`]).
//! - Change goes to the next unused index of a change branch (past those the unconfirmed
//!   transactions pay too, so that two spends before a block do not share it): the
//!   signer's descriptor of the first output's kind that has a change branch (change then
//!   looks like the payment), else its first with a change branch, else its first
//!   descriptor's only branch. The same address is offered again until a transaction
//!   paying it is seen.

use alloc::format;
use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use lightwire_chain::Network;
use lightwire_primitives::Txid;

use super::{Built, Change, FeeRate, KeySource, Request, SpendError, Spendable};
use crate::address::{AddressError, script_of_address};
use crate::descriptor::{Descriptor, DescriptorError, Kind};
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
    /// Its labels: an output marked `spendable: false` (BIP329) is frozen, spent only when
    /// named.
    pub labels: &'a crate::labels::Labels,
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
    /// The output (an index into `outputs`) that takes everything the coins spent hold
    /// less the other outputs and the fee, its value there not read (send-max): with
    /// `coins`, exactly those; else every coin the wallet would pick (one signer's, or
    /// all with `change_descriptor`). No change is made.
    pub max: Option<usize>,
    /// Whether coins of unconfirmed transactions may be picked.
    pub include_unconfirmed: bool,
    /// The descriptor change goes to (its text, the checksum optional): needed to spend
    /// coins of several signers together; by default change goes to the signer of the
    /// coins spent.
    pub change_descriptor: Option<String>,
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
    #[error("a fee rate of {0} sat/kvB is outside 100-10,000,000 (0.1-10,000 sat/vB)")]
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
    /// Short, and frozen coins (BIP329 `spendable: false`) would cover more.
    #[error(
        "insufficient funds: {needed} sat needed at this fee rate, {available} sat in the coins the wallet picks; {frozen} sat more in frozen coins, spent only when named in `coins`"
    )]
    Frozen {
        /// What the spend needs.
        needed: u64,
        /// What the coins the wallet picks from add up to.
        available: u64,
        /// What the frozen ones add up to.
        frozen: u64,
    },
    /// The same coin named twice.
    #[error("coin {0} is named twice")]
    Twice(String),
    /// Coins named of several signers (master keys), and no change descriptor named:
    /// change to one would be the others' to spend.
    #[error(
        "the coins named are of {0} signers (master keys): name changeDescriptor for the change, or coins of one signer"
    )]
    MixedSigners(usize),
    /// The change descriptor named is not one the wallet watches.
    #[error("changeDescriptor {0:?} is not a descriptor the wallet watches")]
    ChangeDescriptor(String),
    /// Short with one signer's coins, while other signers hold more: the wallet does not
    /// mix signers by itself.
    #[error(
        "insufficient funds: {needed} sat needed at this fee rate, {available} sat in one signer's coins; {others} sat more in other signers' coins, spent together only when changeDescriptor is named"
    )]
    OneSigner {
        /// What the spend needs.
        needed: u64,
        /// What the first signer's coins add up to.
        available: u64,
        /// What the other signers' coins add up to.
        others: u64,
    },
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
            | PsbtError::NamedOnly { .. }
            | PsbtError::Frozen { .. }
            | PsbtError::OneSigner { .. } => "InsufficientFunds",
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
    /// Marked unspendable by a label (BIP329): spent only when named.
    frozen: bool,
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
        !self.frozen && (self.confirmed || (include_unconfirmed && self.own))
    }
}

/// How far from its block's time a tip may be for a spend to be locked to it: Bitcoin
/// Core's `MAX_ANTI_FEE_SNIPING_TIP_AGE`, eight hours.
pub const ANTI_FEE_SNIPING_TIP_AGE: u64 = 8 * 60 * 60;

/// The lock time of a new spend, as Bitcoin Core's wallet sets it
/// (`GetLocktimeForNewTransaction`): the tip's height, so that a miner reorganising the
/// tip to take its fee gains nothing; one time in ten a height up to 99 below it (so that
/// transactions signed late, by an offline signer, look like the rest); and 0 when the
/// chain is not synced or its tip is more than eight hours old (`now` and `tip_time` in
/// seconds since the epoch), when the tip's height says nothing. `random` picks.
pub fn anti_fee_sniping(tip: u32, tip_time: u32, now: u64, synced: bool, random: u64) -> u32 {
    if !synced || now.saturating_sub(u64::from(tip_time)) > ANTI_FEE_SNIPING_TIP_AGE {
        return 0;
    }
    if random % 10 == 0 {
        tip.saturating_sub(((random / 10) % 100) as u32)
    } else {
        tip
    }
}

/// Build the PSBT `ask` asks for from `wallet` with the best chain's tip at `tip`, locked
/// to `lock_time` (see [`anti_fee_sniping`]), `seed` ordering its inputs and change.
/// (Never inlined into its caller: the wallet's code is built for size.)
#[inline(never)]
pub fn create_psbt(
    wallet: &WalletState<'_>,
    ask: &PsbtAsk,
    tip: u32,
    lock_time: u32,
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
    let descriptors: Vec<&Descriptor> = wallet.watch.descriptors().collect();
    // The signer of a coin: the master key its descriptor's keys come from.
    let signer_of = |f: &Found| f.origin.map(|(d, _, _)| descriptors[d].origin.fingerprint);
    let named_change = match &ask.change_descriptor {
        Some(text) => Some(
            descriptors
                .iter()
                .position(|d| same_descriptor(&d.text, text))
                .ok_or_else(|| PsbtError::ChangeDescriptor(text.clone()))?,
        ),
        None => None,
    };
    let found = spendable(wallet, tip);
    let ancestry = super::ancestry::Ancestry::new(wallet.unconfirmed);
    let build = |coins: Vec<&Found>, change: Option<Change>| {
        let list: Vec<Spendable> = coins.iter().map(|f| f.coin.clone()).collect();
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
            max: ask.max,
            rate: ask.rate,
            change: change.as_ref(),
            lock_time,
            seed,
            ancestors: Some(&ancestry),
        };
        super::build(&request, keys)
    };
    if let Some(named) = &ask.coins {
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
        if ask.max.is_some() {
            // Exactly these, and no change: whoever signs them.
            return Ok(build(picked, None)?);
        }
        let mut signers: Vec<[u8; 4]> = Vec::new();
        for m in picked.iter().filter_map(|f| signer_of(f)) {
            if !signers.contains(&m) {
                signers.push(m);
            }
        }
        let change = match (named_change, signers.as_slice()) {
            (Some(d), _) => change_on(wallet, d),
            (None, [] | [_]) => change_for(wallet, &outputs, |d| {
                signers.is_empty() || signers.contains(&descriptors[d].origin.fingerprint)
            }),
            (None, _) => return Err(PsbtError::MixedSigners(signers.len())),
        };
        return Ok(build(picked, change)?);
    }
    let pickable: Vec<&Found> = found
        .iter()
        .filter(|f| f.origin.is_some() && f.pickable(ask.include_unconfirmed))
        .collect();
    // The wallet picks among one signer's coins, change to that signer (signers in the
    // order their descriptors were watched); with the change descriptor named, among all.
    let mut signers: Vec<[u8; 4]> = Vec::new();
    for d in &descriptors {
        if !signers.contains(&d.origin.fingerprint) {
            signers.push(d.origin.fingerprint);
        }
    }
    if ask.max.is_some() {
        // Everything the wallet would pick: one signer's coins (or all, with the change
        // descriptor named, as a spend of several signers' coins takes it).
        let holders: Vec<[u8; 4]> = signers
            .iter()
            .copied()
            .filter(|m| pickable.iter().any(|f| signer_of(f) == Some(*m)))
            .collect();
        if named_change.is_none() && holders.len() > 1 {
            return Err(PsbtError::MixedSigners(holders.len()));
        }
        return Ok(build(pickable, None)?);
    }
    let attempts: Vec<(Vec<&Found>, Option<Change>)> = match named_change {
        Some(d) => vec![(pickable.clone(), change_on(wallet, d))],
        None => signers
            .iter()
            .map(|m| {
                let coins = pickable
                    .iter()
                    .copied()
                    .filter(|f| signer_of(f) == Some(*m))
                    .collect();
                let change = change_for(wallet, &outputs, |d| {
                    descriptors[d].origin.fingerprint == *m
                });
                (coins, change)
            })
            .collect(),
    };
    let mut first_short = None;
    for (coins, change) in attempts {
        match build(coins, change) {
            Err(SpendError::InsufficientFunds { needed, available }) => {
                first_short.get_or_insert((needed, available));
            }
            built => return Ok(built?),
        }
    }
    let (needed, available) = first_short.unwrap_or((0, 0));
    // Short: say what else the wallet holds that it does not pick by itself.
    let named_only: u64 = found
        .iter()
        .filter(|f| f.origin.is_none() && f.pickable(ask.include_unconfirmed))
        .map(|f| f.coin.value)
        .sum();
    let other_signers: u64 = pickable
        .iter()
        .filter(|f| signers.first().is_some_and(|m| signer_of(f) != Some(*m)))
        .map(|f| f.coin.value)
        .sum();
    let frozen: u64 = found
        .iter()
        .filter(|f| {
            f.frozen && f.origin.is_some() && (f.confirmed || (ask.include_unconfirmed && f.own))
        })
        .map(|f| f.coin.value)
        .sum();
    Err(if frozen > 0 {
        PsbtError::Frozen {
            needed,
            available,
            frozen,
        }
    } else if named_change.is_none() && other_signers > 0 {
        PsbtError::OneSigner {
            needed,
            available,
            others: other_signers,
        }
    } else if named_only > 0 {
        PsbtError::NamedOnly {
            needed,
            available,
            named_only,
        }
    } else {
        SpendError::InsufficientFunds { needed, available }.into()
    })
}

/// The confirmed coins of the wallet's descriptors whose signer (master fingerprint)
/// `signer` allows, spendable at `tip`, with where each key comes from, largest first (ties
/// in the wallet's order): what a fee bump may add (BIP125 takes no new unconfirmed input).
pub(super) fn confirmed_coins(
    wallet: &WalletState<'_>,
    tip: u32,
    signer: impl Fn([u8; 4]) -> bool,
) -> Vec<(Spendable, (usize, usize, u32))> {
    let descriptors: Vec<&Descriptor> = wallet.watch.descriptors().collect();
    let mut out: Vec<(Spendable, (usize, usize, u32))> = Vec::new();
    for f in spendable(wallet, tip) {
        let Some(origin) = f.origin else { continue };
        if f.confirmed && !f.frozen && signer(descriptors[origin.0].origin.fingerprint) {
            let at = out.partition_point(|(c, _)| c.value >= f.coin.value);
            out.insert(at, (f.coin, origin));
        }
    }
    out
}

/// Whether descriptor text `a` (with its checksum) is `b` (with or without one).
fn same_descriptor(a: &str, b: &str) -> bool {
    fn body(t: &str) -> &str {
        t.trim().split('#').next().unwrap_or_default().trim()
    }
    body(a) == body(b)
        && b.split_once('#')
            .is_none_or(|(_, c)| a.ends_with(&format!("#{}", c.trim())))
}

/// Every coin the wallet may spend now, with how it is spent (coins whose script does not
/// say are left out).
fn spendable(wallet: &WalletState<'_>, tip: u32) -> Vec<Found> {
    let spent = wallet.unconfirmed.spent();
    let mut found = Vec::new();
    // One copy of each funding transaction, shared by its coins (which come one after
    // another: the ledger's by outpoint, an unconfirmed transaction's together).
    let mut shared: Option<(Txid, Rc<[u8]>)> = None;
    let mut add = |outpoint: Outpoint,
                   value: u64,
                   script: &[u8],
                   (confirmed, own): (bool, bool),
                   funding: Option<&[u8]>,
                   found_silent: Option<super::SilentKey>| {
        let (kind, origin) = how_spent(wallet, script);
        if let Some(kind) = kind {
            found.push(Found {
                coin: Spendable {
                    outpoint,
                    value,
                    script: script.to_vec(),
                    kind,
                    funding: funding.filter(|_| kind != Kind::Tr).map(|f| match &shared {
                        Some((txid, rc)) if *txid == outpoint.txid => rc.clone(),
                        _ => shared.insert((outpoint.txid, f.into())).1.clone(),
                    }),
                    silent: super::SilentKey::of(wallet.watch.origin(script), wallet.watch)
                        .or(found_silent),
                },
                origin,
                // (No `txid:vout` written for each coin of a wallet with no labels.)
                frozen: !wallet.labels.is_empty()
                    && wallet.labels.frozen(&outpoint_text(&outpoint)),
                confirmed,
                own,
            });
        }
    };
    for c in wallet.ledger.utxos() {
        let mature = !c.coinbase || tip >= c.height.saturating_add(COINBASE_CONFIRMATIONS - 1);
        if mature && !spent.contains(&c.outpoint) {
            let funding = wallet.ledger.funding(&c.outpoint.txid);
            add(c.outpoint, c.value, &c.script, (true, false), funding, None);
        }
    }
    for t in wallet.unconfirmed.transactions() {
        // The wallet's own: broadcast by it, or (withdrawn by a reorganisation) spending
        // its coins, which its keys signed.
        let own = match t.source {
            crate::unconfirmed::Source::Own => true,
            crate::unconfirmed::Source::Withdrawn => !t.spends.is_empty(),
            crate::unconfirmed::Source::Announced => false,
        };
        for (o, value, script) in t.coins() {
            if !spent.contains(&o) {
                // A silent payment found in the mempool: its key is the tweak's, as a
                // found coin's is (spent only when named, as any payment of another's).
                let silent = t
                    .silent
                    .iter()
                    .find(|s| s.vout == o.vout)
                    .map(|s| super::SilentKey {
                        tweak: s.tweak,
                        spend: s.spend,
                        origin: wallet.watch.spend_origin(&s.spend).cloned(),
                    });
                add(o, value, script, (false, own), Some(&t.raw), silent);
            }
        }
    }
    found
}

/// How a coin paying `script` is spent: its kind and, for a descriptor's, where its key
/// comes from (descriptor, branch, index).
pub(super) fn how_spent(
    wallet: &WalletState<'_>,
    script: &[u8],
) -> (Option<Kind>, Option<(usize, usize, u32)>) {
    match wallet.watch.origin(script) {
        Some(Origin::Derived {
            descriptor,
            branch,
            index,
        }) => match wallet.watch.descriptors().nth(descriptor) {
            Some(d) => (Some(d.kind), Some((descriptor, branch, index))),
            None => (None, None),
        },
        _ => (super::kind_of(script), None),
    }
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
pub(super) fn key_source(
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

/// Where change goes, among the descriptors `allowed` says (see the module
/// documentation): the first of the payment's kind with a change branch, else the first
/// with a change branch, else the first.
pub(super) fn change_for(
    wallet: &WalletState<'_>,
    outputs: &[(Vec<u8>, u64)],
    allowed: impl Fn(usize) -> bool,
) -> Option<Change> {
    let descriptors: Vec<_> = wallet.watch.descriptors().collect();
    let has_change = |d: usize| descriptors[d].branches.contains(&Some(1));
    let like_payment = outputs.iter().find_map(|(s, _)| {
        let kind = super::kind_of(s)?;
        (0..descriptors.len()).find(|&d| allowed(d) && descriptors[d].kind == kind && has_change(d))
    });
    let d = like_payment
        .or_else(|| (0..descriptors.len()).find(|&d| allowed(d) && has_change(d)))
        .or_else(|| (0..descriptors.len()).find(|&d| allowed(d)))?;
    change_on(wallet, d)
}

/// Change to descriptor `d`: its change branch (its only branch if it has none), at the
/// next index not used (nor paid by an unconfirmed transaction).
fn change_on(wallet: &WalletState<'_>, d: usize) -> Option<Change> {
    let descriptor = wallet.watch.descriptors().nth(d)?;
    let b = descriptor
        .branches
        .iter()
        .position(|b| *b == Some(1))
        .unwrap_or(0);
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
    let kind = descriptor.kind;
    let script = crate::descriptor::script_for_key(kind, &branch_key)?;
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

    use super::*;
    use crate::ledger::tests::{OURS, block, checked, tx};

    /// One transaction paying the wallet 3,000 times (dust-plus coins to a watched
    /// address cost an attacker little): every coin a spend considers shares one copy of
    /// it, where each held its own (3,000 copies of 100 KB, twice, on every createPsbt).
    #[test]
    fn coins_of_one_funding_transaction_share_one_copy_of_it() {
        let mut watch = Watchlist::new(20, 20);
        watch.add_script(OURS.to_vec());
        let mut many = tx(&[([9; 32], 0)], &[]);
        many.truncate(many.len() - 5);
        lightwire_primitives::write_compact_size(&mut many, 3_000);
        for _ in 0..3_000 {
            many.extend_from_slice(&1_000u64.to_le_bytes());
            many.push(OURS.len() as u8);
            many.extend_from_slice(OURS);
        }
        many.extend_from_slice(&[0; 4]);
        let cb = tx(&[([0; 32], u32::MAX)], &[(1, &[0x51])]);
        let mut ledger = Ledger::new();
        ledger
            .apply(5, &checked(&block(&[cb, many])), |s| s == OURS)
            .unwrap();
        let unconfirmed = Unconfirmed::new();
        let wallet = WalletState {
            network: Network::Regtest,
            watch: &watch,
            ledger: &ledger,
            unconfirmed: &unconfirmed,
            labels: &crate::labels::Labels::new(),
        };
        let found = spendable(&wallet, 10);
        assert_eq!(found.len(), 3_000);
        let copies: Vec<*const u8> = found
            .iter()
            .map(|f| f.coin.funding.as_ref().expect("kept").as_ptr())
            .collect();
        assert!(copies.iter().all(|p| *p == copies[0]), "one copy");
    }

    /// Bitcoin Core's lock time: the tip's height nine times in ten, up to 99 below it the
    /// tenth; 0 while syncing or past eight hours since the tip's block.
    #[test]
    fn the_lock_time_is_the_tips_height_as_bitcoin_cores_wallet_sets_it() {
        let now = 1_700_000_000u64;
        let fresh = (now - 600) as u32;
        let mut below = 0;
        for random in 0..10_000u64 {
            let t = anti_fee_sniping(
                800_000,
                fresh,
                now,
                true,
                random.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            );
            assert!((799_901..=800_000).contains(&t), "{t}");
            below += u32::from(t < 800_000);
        }
        // One in ten draws 1-99 below (a tenth of those draws 0).
        assert!((800..1_000).contains(&below), "{below}");
        assert_eq!(anti_fee_sniping(800_000, fresh, now, false, 3), 0);
        let stale = (now - ANTI_FEE_SNIPING_TIP_AGE - 1) as u32;
        assert_eq!(anti_fee_sniping(800_000, stale, now, true, 3), 0);
        assert_eq!(anti_fee_sniping(50, fresh, now, true, 490), 1);
        assert_eq!(anti_fee_sniping(5, fresh, now, true, 490), 0);
    }
}
