//! The watch-only wallet, sans-IO: what it watches (`lightwire-wallet`'s watchlist, with the
//! gap limit), and the ledger the blocks its scan matched are applied to, in height order.
//! The blocks are fetched one at a time and checked against their stored headers by
//! [`blocks`], once for every wallet that wants each.
//!
//! Rules, for a gateway that may lie:
//! - A block is the block of the stored header at its height: the hash of its header must
//!   be that header's, and its transactions must make the header's Merkle root without a
//!   repeated pair (CVE-2012-2459). A block that is not is a rule broken
//!   ([`WalletError::BlockMismatch`]): the gateway is marked bad and the block asked of
//!   another.
//! - `not_found` is no fault in itself: a gateway answers so for a block a reorganisation
//!   has just removed, or that its node lacks. The block is asked of another gateway
//!   (every gateway that said `not_found` is asked again after a while). Only the gateway
//!   that served the filter that matched the block vouched for it ([`NotFound`]'s
//!   `vouched`); if the block then comes from another gateway and the tip it announces
//!   still holds the block, it withheld it ([`WalletError::Withheld`]): marked bad. The
//!   engine's wallet task judges it then, when the tip of a reorganisation that took the
//!   block would have come.
//! - The witness commitment is not checked: nothing the wallet takes (outputs, outpoints,
//!   txids) is in the witness data, which the Merkle root does not cover.
//!
//! The gap limit counts in index order, the scan in height order: an address beyond the
//! gap can be paid before the ones that bring it within. The scan matches a lookahead past
//! the gap too ([`lightwire_wallet::watch`]); the blocks it matches are applied like the
//! others, and the lookahead scripts they pay are noted ([`WalletSync`]'s `early`). When
//! one of those becomes the wallet's, the ledger goes back to that block and applies again
//! from there ([`Again::From`]: the transactions after it are withdrawn and found again).
//! When one becomes the wallet's that the scan did not match from its start (the used
//! index grew by more than the lookahead during the scan), the wallet is scanned again
//! from its start ([`Again::Restart`]).

pub mod blocks;
pub mod names;

use crate::ids::GatewayId;
use lightwire_chain::Network;
use lightwire_primitives::{BlockError, Txid};
use lightwire_wallet::unconfirmed::{AddError, Added, Dropped, Source};
use lightwire_wallet::watch::{DEFAULT_GAP, DEFAULT_LOOKAHEAD};
use lightwire_wallet::{
    AddressError, Balance, Descriptor, DescriptorError, Ledger, Unconfirmed, UnconfirmedTx,
    WalletTx, Watchlist,
};

/// A block answer that breaks a rule (the gateway is marked bad).
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum WalletError {
    /// The block is not the one of the stored header at its height.
    #[error("the block it sent for height {height} does not match the stored header: {error}")]
    BlockMismatch {
        /// The block's height.
        height: u32,
        /// The rule it breaks.
        #[source]
        error: BlockError,
    },
    /// It answered `not_found` for a block its own filter matched, and which its tip
    /// still holds.
    #[error("it withheld block {height}, which its filter matched")]
    Withheld {
        /// The block's height.
        height: u32,
    },
    /// Pieces out of order, or over the block size limit.
    #[error("block pieces out of order at height {height}")]
    OutOfOrder {
        /// The block's height.
        height: u32,
    },
}

/// What the application asked to watch, kept as given (to save and restore).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Watched {
    /// An output script (hex).
    Script(String),
    /// An address.
    Address(String),
    /// A descriptor.
    Descriptor(String),
    /// A silent-payment output the receiver's scan found (not given by the application):
    /// the taproot output of x-only `key`, spent with the spend key plus `tweak`.
    Silent {
        /// Its x-only key.
        key: [u8; 32],
        /// The private-key tweak.
        tweak: [u8; 32],
        /// The label it was paid to (0: change), `None` for the plain address.
        label: Option<u32>,
        /// The receiver's spend public key.
        spend: [u8; 33],
        /// Where the spend key derives from, when the application said
        /// (`spendKeyOrigin`): a signer finds the key by it.
        origin: Option<lightwire_wallet::descriptor::KeyOrigin>,
    },
}

impl Watched {
    /// A silent-payment output as the wallet saves it: key, tweak and spend key in hex,
    /// then the label if any, then the spend key's origin if known
    /// (`<key><tweak><spend>[:<label>][@[<fingerprint>/<path>]]`).
    fn silent_text(
        key: &[u8; 32],
        tweak: &[u8; 32],
        spend: &[u8; 33],
        label: Option<u32>,
        origin: Option<&lightwire_wallet::descriptor::KeyOrigin>,
    ) -> String {
        let mut t = format!(
            "{}{}{}",
            hex::encode(key),
            hex::encode(tweak),
            hex::encode(spend)
        );
        if let Some(m) = label {
            t.push_str(&format!(":{m}"));
        }
        if let Some(o) = origin {
            t.push('@');
            t.push_str(&o.text());
        }
        t
    }

    /// [`Self::silent_text`] read back.
    fn silent_of(text: &str) -> Option<Watched> {
        let (text, origin) = match text.split_once('@') {
            Some((t, o)) => (
                t,
                Some(lightwire_wallet::descriptor::KeyOrigin::parse(o).ok()?),
            ),
            None => (text, None),
        };
        let (keys, label) = match text.split_once(':') {
            Some((k, m)) => (k, Some(m.parse().ok()?)),
            None => (text, None),
        };
        let bytes = hex::decode(keys).ok()?;
        let (key, rest) = bytes.split_at_checked(32)?;
        let (tweak, spend) = rest.split_at_checked(32)?;
        Some(Watched::Silent {
            key: key.try_into().ok()?,
            tweak: tweak.try_into().ok()?,
            label,
            spend: spend.try_into().ok()?,
            origin,
        })
    }
}

/// Something the application asked to watch that cannot be.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum WatchError {
    /// A script that is not hex, or empty.
    #[error("script {0:?} is not hex")]
    Script(String),
    /// An address that is not one (of this network).
    #[error("address {address:?}: {error}")]
    Address {
        /// As given.
        address: String,
        /// Why.
        #[source]
        error: AddressError,
    },
    /// A descriptor that cannot be watched.
    #[error("descriptor {descriptor:?}: {error}")]
    Descriptor {
        /// As given.
        descriptor: String,
        /// Why.
        #[source]
        error: DescriptorError,
    },
}

/// What changed in the wallet.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum WalletChange {
    /// A transaction of ours was found in a block.
    Found(WalletTx),
    /// A transaction of ours was in a block a reorganisation disconnected.
    Withdrawn {
        /// Its id.
        txid: Txid,
        /// The height it had.
        height: u32,
    },
    /// An unconfirmed transaction of ours was taken, or how many gateways hold it changed.
    Unconfirmed(UnconfirmedTx),
    /// An unconfirmed transaction of ours was dropped (not mined: mined ones are found).
    Dropped(Dropped),
}

/// A gateway answered `not_found` for a block (see the module documentation).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct NotFound {
    /// The gateway.
    pub gateway: GatewayId,
    /// The block's height.
    pub height: u32,
    /// Whether it served the filter that matched the block: it vouched for the block.
    pub vouched: bool,
}

/// A block applied (see [`WalletSync::apply`]).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Applied {
    /// Its height.
    pub height: u32,
    /// The transactions it found.
    pub changes: Vec<WalletChange>,
    /// Scripts derived for the lookahead: the scan matches them from its next filter on.
    pub derived: Vec<Vec<u8>>,
    /// What must be done again, now that more scripts are the wallet's.
    pub again: Option<Again>,
}

/// Work to do again because scripts became the wallet's (see the module documentation).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Again {
    /// A block at this height paid one of them: the ledger is taken back below it and the
    /// blocks the scan matched from there are applied again.
    From(u32),
    /// The scan did not match one of them from its start: scan again from there.
    Restart,
}

/// The wallet (see the module documentation).
pub struct WalletSync {
    network: Network,
    /// What is watched.
    pub watch: Watchlist,
    /// What it found.
    pub ledger: Ledger,
    /// Its transactions not in a block (yet), apart from the ledger.
    pub unconfirmed: Unconfirmed,
    /// Its labels (BIP329): what the application wrote on its transactions, addresses and
    /// coins, and the coins it froze.
    pub labels: lightwire_wallet::labels::Labels,
    given: Vec<Watched>,
    /// Where its scan started.
    pub from: u32,
    /// Lookahead scripts paid in blocks applied, and the first height each was paid at.
    early: Vec<(Vec<u8>, u32)>,
    /// Applied since the state was last saved.
    pub dirty: bool,
    /// Changed with every change of what it watches, found or holds unconfirmed: a value
    /// no other wallet had (what a cache of its scripts and coins is keyed by).
    revision: u64,
}

impl WalletSync {
    /// An empty wallet on `network`, scanning from `from`.
    pub fn new(network: Network, from: u32) -> WalletSync {
        WalletSync {
            network,
            watch: Watchlist::new(DEFAULT_GAP, DEFAULT_LOOKAHEAD),
            ledger: Ledger::new(),
            unconfirmed: Unconfirmed::new(),
            given: Vec::new(),
            from,
            early: Vec::new(),
            labels: lightwire_wallet::labels::Labels::new(),
            dirty: false,
            revision: next_revision(),
        }
    }

    /// What it holds changed: to be saved, and caches of it are stale.
    fn changed(&mut self) {
        self.dirty = true;
        self.revision = next_revision();
    }

    /// Its revision: another value after any change of what it watches, found or holds
    /// unconfirmed, and a value no other wallet of this process had.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The network it is on.
    pub fn network(&self) -> Network {
        self.network
    }

    /// Watch `items` too; returns the scripts newly watched. Nothing is taken if one item
    /// is refused.
    pub fn watch(&mut self, items: &[Watched]) -> Result<Vec<Vec<u8>>, WatchError> {
        let mut scripts = Vec::new();
        let mut descriptors = Vec::new();
        let mut silent = Vec::new();
        for item in items {
            match item {
                Watched::Silent {
                    key,
                    tweak,
                    label,
                    spend,
                    origin,
                } => silent.push((key, *tweak, *label, *spend, origin)),
                Watched::Script(hex) => {
                    let s = decode_hex(hex).ok_or_else(|| WatchError::Script(hex.clone()))?;
                    scripts.push(s);
                }
                Watched::Address(a) => scripts.push(
                    lightwire_wallet::script_of_address(a, self.network).map_err(|error| {
                        WatchError::Address {
                            address: a.clone(),
                            error,
                        }
                    })?,
                ),
                Watched::Descriptor(d) => {
                    descriptors.push(Descriptor::parse(d, self.network).map_err(|error| {
                        WatchError::Descriptor {
                            descriptor: d.clone(),
                            error,
                        }
                    })?)
                }
            }
        }
        let before = self.watch.len();
        for (key, tweak, label, spend, origin) in silent {
            self.watch.add_silent(key, tweak, label, spend);
            if let Some(o) = origin {
                self.watch.set_spend_origin(spend, o.clone());
            }
        }
        for s in scripts {
            self.watch.add_script(s);
        }
        for (d, item) in descriptors
            .into_iter()
            .zip(items.iter().filter(|i| matches!(i, Watched::Descriptor(_))))
        {
            self.watch
                .add_descriptor(d)
                .map_err(|error| WatchError::Descriptor {
                    descriptor: match item {
                        Watched::Descriptor(t) => t.clone(),
                        _ => String::new(),
                    },
                    error,
                })?;
        }
        for item in items {
            if !self.given.contains(item) {
                self.given.push(item.clone());
            }
        }
        // An unconfirmed transaction may pay a script watched now.
        let watch = &self.watch;
        self.unconfirmed.rewatch(|s| watch.owns(s) == Some(true));
        self.changed();
        Ok(self
            .watch
            .scripts()
            .skip(before)
            .map(<[u8]>::to_vec)
            .collect())
    }

    /// Stop watching `items` (as [`Self::watch`] takes them: a script, an address or a
    /// descriptor is the same one however it is written). What is left is watched from
    /// scratch: the ledger is emptied (the caller scans again from the start). Returns the
    /// changes (every transaction found so far, withdrawn) when something was removed.
    pub fn unwatch(&mut self, items: &[Watched]) -> Result<Option<Vec<WalletChange>>, WatchError> {
        let network = self.network;
        let key = |item: &Watched| -> Result<String, WatchError> {
            match item {
                Watched::Script(hex) => decode_hex(hex)
                    .map(|s| format!("s{}", hex::encode(s)))
                    .ok_or_else(|| WatchError::Script(hex.clone())),
                Watched::Address(a) => lightwire_wallet::script_of_address(a, network)
                    .map(|s| format!("s{}", hex::encode(s)))
                    .map_err(|error| WatchError::Address {
                        address: a.clone(),
                        error,
                    }),
                Watched::Silent { key, .. } => Ok(format!("s5120{}", hex::encode(key))),
                Watched::Descriptor(d) => Descriptor::parse(d, network)
                    .map(|d| format!("d{}", d.text))
                    .map_err(|error| WatchError::Descriptor {
                        descriptor: d.clone(),
                        error,
                    }),
            }
        };
        let gone: Vec<String> = items.iter().map(key).collect::<Result<_, _>>()?;
        let remaining: Vec<Watched> = self
            .given
            .iter()
            .filter(|g| key(g).is_ok_and(|k| !gone.contains(&k)))
            .cloned()
            .collect();
        if remaining.len() == self.given.len() {
            return Ok(None);
        }
        let withdrawn = self
            .ledger
            .transactions()
            .iter()
            .map(|t| WalletChange::Withdrawn {
                txid: t.txid,
                height: t.height,
            })
            .collect::<Vec<_>>();
        let mut fresh = WalletSync::new(network, self.from);
        fresh.watch(&remaining)?;
        // The labels are the user's, whatever is watched: an address unwatched and
        // watched again finds its label where it was.
        fresh.labels = core::mem::take(&mut self.labels);
        // The unconfirmed transactions stay, for what they still touch.
        let mut unconfirmed = core::mem::take(&mut self.unconfirmed);
        let watch = &fresh.watch;
        let dropped = unconfirmed.rewatch(|s| watch.owns(s) == Some(true));
        fresh.unconfirmed = unconfirmed;
        *self = fresh;
        self.changed();
        let mut changes = withdrawn;
        changes.extend(dropped.into_iter().map(WalletChange::Dropped));
        Ok(Some(changes))
    }

    /// Import BIP329 `records` (a file's lines, in order): whole or nothing (see
    /// [`lightwire_wallet::labels`]); the wallet is saved when one was taken.
    pub fn import_labels(
        &mut self,
        records: &[lightwire_wallet::labels::LabelRecord],
    ) -> Result<lightwire_wallet::labels::Imported, lightwire_wallet::labels::LabelError> {
        let done = self.labels.import(records, self.network)?;
        if done.taken > 0 {
            self.changed();
        }
        Ok(done)
    }

    /// Set one record's fields, as an import of that one line does, except that `clear`
    /// removes its label (an import leaves a label it is not given). Checked as an import
    /// checks a line; a type BIP329 does not define is refused here (nothing to skip it
    /// for).
    pub fn set_label(
        &mut self,
        record: &lightwire_wallet::labels::LabelRecord,
        clear: bool,
    ) -> Result<(), lightwire_wallet::labels::LabelError> {
        use lightwire_wallet::labels::{LabelError, LabelFault, LabelKind};
        let kind = record.kind.as_deref().ok_or(LabelError {
            line: 1,
            fault: LabelFault::NoType,
        })?;
        let kind = LabelKind::from_name(kind).ok_or(LabelError {
            line: 1,
            fault: LabelFault::UnknownType,
        })?;
        // One line imports whole or not at all: refused, nothing changed.
        self.labels
            .import(core::slice::from_ref(record), self.network)?;
        if clear {
            // Its reference passed the import's check: this one cannot fail.
            let reference = record.reference.as_deref().unwrap_or_default();
            self.labels
                .set_label(kind, reference, None, self.network)
                .map_err(|fault| LabelError { line: 1, fault })?;
        }
        self.changed();
        Ok(())
    }

    /// Take unconfirmed transaction `raw` from `source`, seen at `now` (milliseconds since
    /// the Unix epoch), held by the gateways `holders` (one bit each): what changed (the
    /// transaction taken, or its holders updated, and what it replaced).
    pub fn add_unconfirmed(
        &mut self,
        raw: &[u8],
        source: Source,
        now: u64,
        holders: u64,
    ) -> Result<Vec<WalletChange>, AddError> {
        self.add_unconfirmed_silent(raw, source, now, holders, &[])
    }

    /// [`Self::add_unconfirmed`], with the transaction's outputs that a scan found paying a
    /// silent-payment receiver (`silent`): the wallet's too. A held transaction gaining
    /// some is saved again (they are kept with it).
    pub fn add_unconfirmed_silent(
        &mut self,
        raw: &[u8],
        source: Source,
        now: u64,
        holders: u64,
        silent: &[lightwire_wallet::unconfirmed::SilentOutput],
    ) -> Result<Vec<WalletChange>, AddError> {
        let txid = lightwire_primitives::Tx::parse(raw).map(|t| t.txid()).ok();
        let found_before = txid
            .and_then(|t| self.unconfirmed.get(&t))
            .map_or(0, |t| t.silent.len());
        let watch = &self.watch;
        let added = self.unconfirmed.add_with_silent(
            raw,
            source,
            now,
            holders,
            &self.ledger,
            |s| watch.owns(s) == Some(true),
            silent,
        )?;
        // Who holds it is not saved: a change of holders alone leaves the state clean; new
        // silent outputs of a held one do not.
        let (dropped, unheld, shown, changed) = match added {
            Added::New { dropped, unheld } => (dropped, unheld, txid, true),
            Added::Foreign { dropped, unheld } => {
                let changed = !dropped.is_empty();
                (dropped, unheld, None, changed)
            }
            Added::Known(true) => {
                let found = txid
                    .and_then(|t| self.unconfirmed.get(&t))
                    .map_or(0, |t| t.silent.len());
                (Vec::new(), Vec::new(), txid, found != found_before)
            }
            Added::Known(false) => (Vec::new(), Vec::new(), None, false),
        };
        if changed {
            self.changed();
        }
        let mut changes: Vec<WalletChange> =
            dropped.into_iter().map(WalletChange::Dropped).collect();
        for t in unheld.iter().chain(&shown) {
            if let Some(t) = self.unconfirmed.get(t) {
                changes.push(WalletChange::Unconfirmed(t.clone()));
            }
        }
        Ok(changes)
    }

    /// Whether a gateway's transaction `raw` spends a coin of this wallet's without its
    /// key's signature (see [`lightwire_wallet::Unconfirmed::check_signed`]).
    pub fn check_signed(&self, raw: &[u8]) -> Result<(), AddError> {
        self.unconfirmed.check_signed(raw, &self.ledger)
    }

    /// The gateways holding unconfirmed transaction `txid` are now `holders`: the change,
    /// if there is one.
    pub fn set_holders(&mut self, txid: &Txid, holders: u64) -> Option<WalletChange> {
        if !self.unconfirmed.set_holders(txid, holders) {
            return None;
        }
        self.unconfirmed
            .get(txid)
            .map(|t| WalletChange::Unconfirmed(t.clone()))
    }

    /// Gateway `bit` let unconfirmed transaction `txid` go, for `reason` (`None`: mined):
    /// it counts only if that gateway held it, and drops it only if it was the last to
    /// (see [`lightwire_wallet::Unconfirmed::let_go`]). The changes.
    pub fn let_go(
        &mut self,
        txid: &Txid,
        bit: u64,
        reason: Option<lightwire_wallet::unconfirmed::Reason>,
    ) -> Vec<WalletChange> {
        let (unheld, dropped) = self.unconfirmed.let_go(txid, bit, reason);
        if !dropped.is_empty() {
            self.changed();
        }
        let mut changes: Vec<WalletChange> =
            dropped.into_iter().map(WalletChange::Dropped).collect();
        if let Some(t) = self.unconfirmed.get(txid).filter(|_| unheld) {
            changes.push(WalletChange::Unconfirmed(t.clone()));
        }
        changes
    }

    /// Gateway `bit` told its whole mempool; `expected` the gateways that can hold
    /// anything (see [`lightwire_wallet::Unconfirmed::snapshot_ended`]): the changes.
    pub fn snapshot_ended(&mut self, bit: u64, expected: u64) -> Vec<WalletChange> {
        let dropped = self.unconfirmed.snapshot_ended(bit, expected);
        if !dropped.is_empty() {
            self.changed();
        }
        dropped.into_iter().map(WalletChange::Dropped).collect()
    }

    /// Gateway `bit` holds nothing any more (it is gone): the changes.
    pub fn forget_holder(&mut self, bit: u64) -> Vec<WalletChange> {
        let changed = self.unconfirmed.forget_holder(bit);
        changed
            .iter()
            .filter_map(|t| self.unconfirmed.get(t))
            .map(|t| WalletChange::Unconfirmed(t.clone()))
            .collect()
    }

    /// Unconfirmed transactions first seen `expiry` ms or more before `now` that no
    /// gateway holds are dropped.
    pub fn expire_unconfirmed(&mut self, now: u64, expiry: u64) -> Vec<WalletChange> {
        let dropped = self.unconfirmed.expire(now, expiry);
        if !dropped.is_empty() {
            self.changed();
        }
        dropped.into_iter().map(WalletChange::Dropped).collect()
    }

    /// The balance with the best chain's tip at `tip`, counting coins with at least
    /// `min_confirmations` as confirmed; the unconfirmed transactions' net apart.
    pub fn balance(&self, tip: u32, min_confirmations: u32) -> Balance {
        Balance {
            unconfirmed: self.unconfirmed.net(),
            ..self.ledger.balance(tip, min_confirmations)
        }
    }

    /// What was given to watch.
    pub fn given(&self) -> &[Watched] {
        &self.given
    }

    /// Whether a block at `height` the scan matched is to be applied: one above the
    /// last it applied (below, it was, or one of that height was).
    pub fn wants(&self, height: u32) -> bool {
        self.ledger.tip().is_none_or(|t| height > t)
    }

    /// Apply `block` at `height` (whole, and checked against its stored header by
    /// [`blocks::Blocks`]): what that did. A block at or below the last applied changes
    /// nothing.
    pub fn apply(
        &mut self,
        height: u32,
        block: &lightwire_primitives::CheckedBlock<'_>,
    ) -> Applied {
        let (watch, early) = (&self.watch, &mut self.early);
        let applied = self.ledger.apply(height, block, |s| match watch.owns(s) {
            Some(true) => true,
            Some(false) => {
                if !early.iter().any(|(e, _)| e == s) {
                    early.push((s.to_vec(), height));
                }
                false
            }
            None => false,
        });
        let mut done = Applied {
            height,
            changes: Vec::new(),
            derived: Vec::new(),
            again: None,
        };
        if let Some(applied) = applied {
            // Kept whole for a while: a reorganisation puts them back as unconfirmed.
            let at: Vec<u32> = self
                .ledger
                .transactions()
                .iter()
                .rev()
                .take_while(|t| t.height == height)
                .map(|t| t.position)
                .collect();
            let raws: Vec<&[u8]> = block
                .transactions()
                .enumerate()
                .filter(|(i, t)| at.contains(&(*i as u32)) && !t.is_coinbase())
                .map(|(_, t)| t.raw())
                .collect();
            self.unconfirmed.mined(height, &raws);
            self.applied(&applied, &mut done);
            // Mined ones are found above; those a spend in the block conflicts go.
            let after = self.unconfirmed.after_block(&self.ledger, &applied.txids);
            done.changes
                .extend(after.dropped.into_iter().map(WalletChange::Dropped));
        }
        done
    }

    /// What a block applied to the ledger did: the transactions it found, the scripts the
    /// gap limit derives for the ones it used, and what to do again for the lookahead
    /// scripts that became the wallet's.
    fn applied(&mut self, applied: &lightwire_wallet::ledger::Applied, done: &mut Applied) {
        self.changed();
        done.changes = self
            .ledger
            .transactions()
            .iter()
            .rev()
            .take(applied.txids.len())
            .rev()
            .cloned()
            .map(WalletChange::Found)
            .collect();
        let mut restart = false;
        for s in &applied.used_scripts {
            // A derivation error cannot come from a key that derived before; if it did,
            // the branch just stops growing.
            let Ok(used) = self.watch.mark_used(s) else {
                continue;
            };
            done.derived.extend(used.derived);
            restart |= used.uncovered;
        }
        // Lookahead scripts seen paid that the uses made the wallet's: from the first.
        let watch = &self.watch;
        let again = self
            .early
            .iter()
            .filter(|(s, _)| watch.owns(s) == Some(true))
            .map(|&(_, h)| h)
            .min();
        self.early.retain(|(s, _)| watch.owns(s) == Some(false));
        done.again = if restart {
            Some(Again::Restart)
        } else {
            again.map(Again::From)
        };
    }

    /// The scan starts again from the wallet's start: what was found is withdrawn (the
    /// scan finds it again), and every script derived is matched from there.
    pub fn restart(&mut self) -> Vec<WalletChange> {
        self.watch.cover_all();
        self.early.clear();
        self.changed();
        self.withdraw_from(self.from)
    }

    /// The best chain switched branches at `fork`: what was found above it is withdrawn,
    /// and blocks matched above it are not fetched (the scan matches the new branch); the
    /// wallet's transactions of the withdrawn blocks are unconfirmed again, seen at `now`
    /// (their nodes put them back in their mempools, as Bitcoin Core's does), until a
    /// block of the new branch mines or conflicts them. Returns the changes.
    pub fn reorg(&mut self, fork: u32, now: u64) -> Vec<WalletChange> {
        let Some(first) = fork.checked_add(1) else {
            return Vec::new();
        };
        let mut changes = self.withdraw_from(first);
        let watch = &self.watch;
        let back = self
            .unconfirmed
            .withdrawn(first, now, &self.ledger, &|s| watch.owns(s) == Some(true));
        if !back.is_empty() {
            self.changed();
        }
        changes.extend(
            back.iter()
                .filter_map(|t| self.unconfirmed.get(t))
                .map(|t| WalletChange::Unconfirmed(t.clone())),
        );
        changes
    }

    /// What blocks from `first` on did is withdrawn (the caller takes the wallet off the
    /// blocks queued from there: [`blocks::Blocks::withdraw`]). Returns the changes.
    pub fn withdraw_from(&mut self, first: u32) -> Vec<WalletChange> {
        let withdrawn: Vec<WalletChange> = self
            .ledger
            .transactions()
            .iter()
            .filter(|t| t.height >= first)
            .map(|t| WalletChange::Withdrawn {
                txid: t.txid,
                height: t.height,
            })
            .collect();
        self.ledger.disconnect_from(first);
        self.early.retain(|&(_, h)| h < first);
        if !withdrawn.is_empty() {
            self.changed();
        }
        withdrawn
    }

    /// The state to save (what is watched and the ledger), when it changed.
    pub fn to_save(&mut self) -> Option<Vec<u8>> {
        if !core::mem::take(&mut self.dirty) {
            return None;
        }
        Some(self.encode())
    }

    /// The state as bytes: layout, network, start, what was given, the gap state of each
    /// descriptor branch (highest used, covered), the lookahead scripts paid, the
    /// unconfirmed transactions, the recently mined ones, the labels, the ledger.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![5u8];
        out.extend_from_slice(self.network.name().as_bytes());
        out.push(0);
        out.extend_from_slice(&self.from.to_le_bytes());
        out.extend_from_slice(&(self.given.len() as u32).to_le_bytes());
        for g in &self.given {
            let silent;
            let (kind, text) = match g {
                Watched::Script(t) => (0u8, t),
                Watched::Address(t) => (1, t),
                Watched::Descriptor(t) => (2, t),
                Watched::Silent {
                    key,
                    tweak,
                    label,
                    spend,
                    origin,
                } => {
                    silent = Watched::silent_text(key, tweak, spend, *label, origin.as_ref());
                    (3, &silent)
                }
            };
            out.push(kind);
            out.extend_from_slice(&(text.len() as u32).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
        }
        // The highest used index of each branch (in the order descriptors were given) and
        // how far the scan covered it.
        let mut branches = Vec::new();
        for (d, desc) in self.watch.descriptors().enumerate() {
            for b in 0..desc.branches.len() {
                let (u, _) = self.watch.branch_state(d, b).unwrap_or((None, 0));
                let covered = self.watch.covered(d, b).unwrap_or(0);
                branches.push((u.map_or(u32::MAX, |u| u), covered));
            }
        }
        out.extend_from_slice(&(branches.len() as u32).to_le_bytes());
        for (u, covered) in branches {
            out.extend_from_slice(&u.to_le_bytes());
            out.extend_from_slice(&covered.to_le_bytes());
        }
        out.extend_from_slice(&(self.early.len() as u32).to_le_bytes());
        for (script, height) in &self.early {
            out.extend_from_slice(&(script.len() as u32).to_le_bytes());
            out.extend_from_slice(script);
            out.extend_from_slice(&height.to_le_bytes());
        }
        self.unconfirmed.encode(&mut out);
        self.unconfirmed.encode_mined(&mut out);
        self.labels.encode(&mut out);
        out.extend_from_slice(&self.ledger.encode());
        out
    }

    /// A wallet from [`Self::encode`]'s bytes (for `network`), or from the layouts before
    /// (without the recently mined transactions; without the unconfirmed ones); `None` if
    /// they are not that.
    pub fn decode(bytes: &[u8], network: Network) -> Option<WalletSync> {
        let (&layout, rest) = bytes.split_first()?;
        if !(2..=5).contains(&layout) {
            return None;
        }
        let nul = rest.iter().position(|b| *b == 0)?;
        if &rest[..nul] != network.name().as_bytes() {
            return None;
        }
        let mut r = &rest[nul + 1..];
        let mut take = |n: usize| -> Option<&[u8]> {
            let (h, t) = r.split_at_checked(n)?;
            r = t;
            Some(h)
        };
        let u32_at = |b: &[u8]| u32::from_le_bytes(b.try_into().unwrap_or([0; 4]));
        let from = u32_at(take(4)?);
        let n = u32_at(take(4)?) as usize;
        let mut given = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            let kind = take(1)?[0];
            let len = u32_at(take(4)?) as usize;
            let text = String::from_utf8(take(len)?.to_vec()).ok()?;
            given.push(match kind {
                0 => Watched::Script(text),
                1 => Watched::Address(text),
                2 => Watched::Descriptor(text),
                3 => Watched::silent_of(&text)?,
                _ => return None,
            });
        }
        let n = u32_at(take(4)?) as usize;
        let mut branches = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            let used = Some(u32_at(take(4)?)).filter(|u| *u != u32::MAX);
            branches.push((used, u32_at(take(4)?)));
        }
        let n = u32_at(take(4)?) as usize;
        let mut early = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            let len = u32_at(take(4)?) as usize;
            let script = take(len)?.to_vec();
            early.push((script, u32_at(take(4)?)));
        }
        let mut w = WalletSync::new(network, from);
        w.watch(&given).ok()?;
        // Grow each branch back to where it was.
        let mut i = 0;
        let mut grow = Vec::new();
        for (d, desc) in w.watch.descriptors().enumerate() {
            for b in 0..desc.branches.len() {
                let (used, covered) = *branches.get(i)?;
                grow.push((d, b, used, covered));
                i += 1;
            }
        }
        for (d, b, used, covered) in grow {
            w.watch.restore_branch(d, b, used, covered).ok()?;
        }
        // Read once the watchlist is whole: what an unconfirmed transaction pays is
        // matched against it.
        let (mut unconfirmed, r) = match layout {
            3..=5 => {
                let watch = &w.watch;
                Unconfirmed::decode(r, layout >= 5, |s| watch.owns(s) == Some(true))?
            }
            _ => (Unconfirmed::new(), r),
        };
        let r = match layout {
            4 | 5 => unconfirmed.decode_mined(r)?,
            _ => r,
        };
        let r = match layout {
            5 => {
                let (labels, r) = lightwire_wallet::labels::Labels::decode(r)?;
                w.labels = labels;
                r
            }
            _ => r,
        };
        w.ledger = Ledger::decode(r)?;
        w.unconfirmed = unconfirmed;
        w.early = early;
        w.dirty = false;
        Some(w)
    }
}

/// A revision no wallet of this process had (see [`WalletSync::revision`]).
fn next_revision() -> u64 {
    static NEXT: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, core::sync::atomic::Ordering::Relaxed)
}

/// A script given as hex (surrounding white space ignored); not an empty one.
fn decode_hex(s: &str) -> Option<Vec<u8>> {
    hex::decode(s.trim()).ok().filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use lightwire_chain::BlockHash;
    use lightwire_primitives::Block;
    use lightwire_wire::BlockPiece;

    const BIP84: &str = "wpkh(xpub6CatWdiZiodmUeTDp8LT5or8nmbKNcuyvz7WyksVFkKB4RHwCD3XyuvPEbvqAQY3rAPshWcMLoP2fMFMKHPJ4ZeZXYVUhLv1VMrjPC7PW6V/<0;1>/*)";

    /// A coinbase at `height` paying `script`.
    fn coinbase_paying(height: u32, script: &[u8]) -> Vec<u8> {
        paying(height, script, None)
    }

    /// A transaction paying `script`: a coinbase (`spends` None) or one spending output 0
    /// of the transaction `spends` names.
    fn paying(height: u32, script: &[u8], spends: Option<u8>) -> Vec<u8> {
        let mut tx = vec![1, 0, 0, 0, 1];
        match spends {
            None => {
                tx.extend_from_slice(&[0; 32]);
                tx.extend_from_slice(&u32::MAX.to_le_bytes());
            }
            Some(t) => {
                tx.extend_from_slice(&[t; 32]);
                tx.extend_from_slice(&0u32.to_le_bytes());
            }
        }
        tx.push(4);
        tx.extend_from_slice(&height.to_le_bytes());
        tx.extend_from_slice(&[0xff; 4]);
        tx.push(1);
        tx.extend_from_slice(&50_000u64.to_le_bytes());
        tx.push(script.len() as u8);
        tx.extend_from_slice(script);
        tx.extend_from_slice(&[0; 4]);
        tx
    }

    /// A block of `txs` with their Merkle root in its header; and its hash.
    fn block_of(txs: &[Vec<u8>]) -> (Vec<u8>, BlockHash) {
        let mut block = vec![0u8; 80];
        block.push(txs.len() as u8);
        txs.iter().for_each(|t| block.extend_from_slice(t));
        let (root, _) = Block::parse(&block).unwrap().merkle_root();
        block[36..68].copy_from_slice(&root);
        let hash = BlockHash::of_header(block[..80].try_into().unwrap());
        (block, hash)
    }

    /// A block at `height` with a coinbase paying `script`; and its hash.
    fn block_paying(height: u32, script: &[u8]) -> (Vec<u8>, BlockHash) {
        block_of(&[coinbase_paying(height, script)])
    }

    /// A wallet with the engine's block queue, as the engine's wallet task drives them
    /// (for the tests of what a block applied does).
    struct Fetching {
        w: WalletSync,
        blocks: blocks::Blocks,
    }

    impl core::ops::Deref for Fetching {
        type Target = WalletSync;
        fn deref(&self) -> &WalletSync {
            &self.w
        }
    }

    impl core::ops::DerefMut for Fetching {
        fn deref_mut(&mut self) -> &mut WalletSync {
            &mut self.w
        }
    }

    impl Fetching {
        fn new(network: Network, from: u32) -> Fetching {
            Fetching::of(WalletSync::new(network, from))
        }

        fn of(w: WalletSync) -> Fetching {
            Fetching {
                w,
                blocks: blocks::Blocks::default(),
            }
        }

        /// The scan matched block `hash` at `height`: queued if the wallet wants it.
        fn matched(&mut self, height: u32, hash: BlockHash, voucher: Option<GatewayId>) {
            if self.w.wants(height) {
                let one = blocks::WalletSet::of(blocks::WalletId::DEFAULT);
                self.blocks.matched(height, hash, voucher, one);
            }
        }

        fn withdraw_from(&mut self, first: u32) -> Vec<WalletChange> {
            self.blocks.withdraw(blocks::WalletId::DEFAULT, first);
            self.w.withdraw_from(first)
        }

        fn restart(&mut self) -> Vec<WalletChange> {
            self.blocks.withdraw(blocks::WalletId::DEFAULT, self.w.from);
            self.w.restart()
        }
    }

    /// The block fetched whole: what the wallet made of it.
    fn send(w: &mut Fetching, block: &[u8]) -> Result<Option<Applied>, WalletError> {
        let (_, id, _) = w
            .blocks
            .next_fetch(|_| Some(GatewayId(0)))
            .expect("a block to fetch");
        let piece = BlockPiece {
            id,
            last: true,
            not_found: false,
            block_len: block.len() as u32,
            offset: 0,
            data: block,
        };
        match w.blocks.on_piece(&piece)? {
            blocks::Fetched::Whole { height, block, .. } => Ok(Some(w.w.apply(height, &block))),
            blocks::Fetched::More | blocks::Fetched::NotFound(_) => Ok(None),
        }
    }

    /// The block fetched and applied whole.
    fn deliver(w: &mut Fetching, block: &[u8]) -> Applied {
        send(w, block).unwrap().expect("applied")
    }

    /// A gateway sends, for a block the scan matched, the block with its last
    /// transaction repeated (CVE-2012-2459): the header and its Merkle root are the
    /// chain's, the tree is mutated. A rule broken, nothing applied; the real block, from
    /// another gateway, is applied.
    #[test]
    fn a_mutated_block_is_a_rule_broken_and_not_applied() {
        let script = [
            0x00, 0x14, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
        ];
        let mut w = Fetching::new(Network::Mainnet, 100);
        w.watch(&[Watched::Script(hex::encode(script))]).unwrap();
        // A coinbase, then two transactions paying the script: a block's first transaction,
        // and only its first, is a coinbase.
        let txs: Vec<Vec<u8>> = (0..3u8)
            .map(|i| paying(150, &script, i.checked_sub(1).map(|t| t + 1)))
            .collect();
        let (good, hash) = block_of(&txs);
        let mut repeated = txs.clone();
        repeated.push(txs[2].clone());
        let (mutated, _) = block_of(&repeated);
        assert_eq!(mutated[..80], good[..80], "the same header");
        w.matched(150, hash, None);
        assert_eq!(
            send(&mut w, &mutated),
            Err(WalletError::BlockMismatch {
                height: 150,
                error: BlockError::Mutated
            })
        );
        assert!(w.ledger.transactions().is_empty());
        let a = deliver(&mut w, &good);
        assert_eq!(found(&a), [150, 150, 150]);
    }

    /// `not_found` for a matched block: vouched for only by the gateway whose filter
    /// matched it; each gateway that said it is tried last for that block, until the
    /// block at the front changes or all are asked again.
    #[test]
    fn not_found_is_vouched_only_by_the_gateway_whose_filter_matched() {
        let script = [
            0x00, 0x14, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5,
        ];
        let mut w = Fetching::new(Network::Mainnet, 100);
        w.watch(&[Watched::Script(hex::encode(script))]).unwrap();
        let (block, hash) = block_paying(150, &script);
        w.matched(150, hash, Some(GatewayId(1)));
        let not_found = |w: &mut Fetching, g: GatewayId| {
            let (asked, id, _) = w.blocks.next_fetch(|tried| {
                assert!(!tried.contains(&g), "{g} asked again");
                Some(g)
            })?;
            assert_eq!(asked, g);
            let piece = BlockPiece::not_found(id);
            match w.blocks.on_piece(&piece) {
                Ok(blocks::Fetched::NotFound(n)) => Some(n),
                other => panic!("{other:?}"),
            }
        };
        let n = not_found(&mut w, GatewayId(0)).unwrap();
        assert_eq!((n.gateway, n.height, n.vouched), (GatewayId(0), 150, false));
        let n = not_found(&mut w, GatewayId(1)).unwrap();
        assert!(n.vouched);
        assert!(w.blocks.all_tried());
        w.blocks.try_again();
        assert!(!w.blocks.all_tried());
        assert_eq!(found(&deliver(&mut w, &block)), [150]);
    }

    /// A held unconfirmed transaction that a later scan finds paying a silent-payment
    /// receiver gains those outputs, and the wallet is to be saved again (they are part of
    /// what it keeps); announced again with nothing new, it is not.
    #[test]
    fn silent_outputs_found_on_a_held_transaction_are_saved() {
        let mut w = WalletSync::new(Network::Regtest, 100);
        // Spends [5; 32]:0 and pays two taproot keys the wallet does not watch.
        let mut raw = vec![2, 0, 0, 0, 1];
        raw.extend_from_slice(&[5; 32]);
        raw.extend_from_slice(&[0, 0, 0, 0, 0, 0xfd, 0xff, 0xff, 0xff, 2]);
        for key in [[7u8; 32], [8; 32]] {
            raw.extend_from_slice(&1_000u64.to_le_bytes());
            raw.extend_from_slice(&[34, 0x51, 0x20]);
            raw.extend_from_slice(&key);
        }
        raw.extend_from_slice(&[0; 4]);
        let out = lightwire_wallet::unconfirmed::SilentOutput {
            vout: 0,
            tweak: [7; 32],
            label: None,
            spend: [2; 33],
        };
        w.add_unconfirmed_silent(&raw, Source::Announced, 1, 1, &[out])
            .unwrap();
        assert!(w.to_save().is_some());
        let again = lightwire_wallet::unconfirmed::SilentOutput { vout: 1, ..out };
        w.add_unconfirmed_silent(&raw, Source::Announced, 2, 1, &[out, again])
            .unwrap();
        assert!(w.to_save().is_some(), "a new silent output is saved");
        w.add_unconfirmed_silent(&raw, Source::Announced, 3, 3, &[out, again])
            .unwrap();
        assert!(w.to_save().is_none(), "holders alone are not saved");
    }

    /// Labels go with the wallet: an import or a label set is saved, a refused one
    /// changes and saves nothing; `label: null` removes a label and keeps the coin's
    /// freeze; unwatching (which starts the wallet's state over) keeps every label.
    #[test]
    fn labels_are_saved_with_the_wallet_and_kept_through_unwatch() {
        use lightwire_wallet::labels::{LabelFault, LabelKind, LabelRecord};
        let txid = "f91d0a8a78462bc59398f2c5d7a84fcff491c26ba54c4833478b202796c8aafd";
        let record = |kind: &str, reference: &str, label: Option<&str>| LabelRecord {
            kind: Some(kind.into()),
            reference: Some(reference.into()),
            label: label.map(Into::into),
            ..LabelRecord::default()
        };
        let mut w = WalletSync::new(Network::Mainnet, 100);
        w.watch(&[Watched::Descriptor(BIP84.into())]).unwrap();
        w.watch(&[Watched::Address(
            "bc1q34aq5drpuwy3wgl9lhup9892qp6svr8ldzyy7c".into(),
        )])
        .unwrap();
        w.to_save();
        let output = format!("{txid}:1");
        let file = [
            record("tx", txid, Some("rent")),
            LabelRecord {
                spendable: Some(false),
                ..record("output", &output, Some("cold"))
            },
        ];
        let done = w.import_labels(&file).unwrap();
        assert_eq!(done.taken, 2);
        let saved = w.to_save().expect("an import is saved");
        let back = WalletSync::decode(&saved, Network::Mainnet).unwrap();
        assert!(back.labels.frozen(&output));
        // A refused file: nothing taken, nothing to save.
        let bad = [
            record("tx", txid, Some("changed")),
            record("tx", "not a txid", None),
        ];
        let e = w.import_labels(&bad).unwrap_err();
        assert_eq!((e.line, e.fault), (2, LabelFault::Ref(LabelKind::Tx)));
        assert!(w.to_save().is_none());
        let e = w
            .set_label(&record("utxo", txid, Some("x")), false)
            .unwrap_err();
        assert_eq!(e.fault, LabelFault::UnknownType);
        assert!(w.to_save().is_none());
        // `label: null` on the frozen output: its label goes, its freeze stays.
        w.set_label(&record("output", &output, None), true).unwrap();
        assert!(w.to_save().is_some());
        let e = w.labels.get(LabelKind::Output, &output).unwrap();
        assert_eq!((e.label.as_deref(), e.spendable), (None, Some(false)));
        // Unwatching starts the wallet over, with its labels.
        let before = w.labels.clone();
        let changes = w
            .unwatch(&[Watched::Address(
                "bc1q34aq5drpuwy3wgl9lhup9892qp6svr8ldzyy7c".into(),
            )])
            .unwrap();
        assert!(changes.is_some());
        assert_eq!(w.labels, before);
        assert_eq!(
            w.labels.get(LabelKind::Tx, txid).unwrap().label.as_deref(),
            Some("rent")
        );
    }

    /// A silent payment's output, watched as the scan found it: the wallet owns its
    /// script, knows the tweak and label that spend it, finds what pays it, and keeps all of
    /// that through a save and a restore; unwatching it (by its key) removes it. A saved
    /// item that is not one is refused, not half-read.
    #[test]
    fn a_silent_payment_output_is_watched_with_its_tweak_and_kept() {
        const SPEND: [u8; 33] = [2; 33];
        let key = [0x42; 32];
        let mut script = vec![0x51, 0x20];
        script.extend_from_slice(&key);
        let items = [
            Watched::Silent {
                key,
                tweak: [7; 32],
                label: None,
                spend: SPEND,
                origin: None,
            },
            Watched::Silent {
                key: [0x43; 32],
                tweak: [8; 32],
                label: Some(3),
                spend: SPEND,
                origin: Some(
                    lightwire_wallet::descriptor::KeyOrigin::parse("[d34db33f/352h/0h/0h/0h/0]")
                        .unwrap(),
                ),
            },
        ];
        let mut w = Fetching::new(Network::Regtest, 100);
        w.watch(&items).unwrap();
        let origin = lightwire_wallet::Origin::Silent {
            tweak: [7; 32],
            label: None,
            spend: SPEND,
        };
        assert_eq!(w.watch.origin(&script), Some(origin));
        assert_eq!(w.watch.owns(&script), Some(true));
        let (block, hash) = block_paying(150, &script);
        w.matched(150, hash, None);
        assert_eq!(found(&deliver(&mut w, &block)), [150]);

        let bytes = w.encode();
        let back = WalletSync::decode(&bytes, Network::Regtest).unwrap();
        assert_eq!(back.given(), items);
        assert_eq!(back.watch.origin(&script), Some(origin));
        let mut other = vec![0x51, 0x20];
        other.extend_from_slice(&[0x43; 32]);
        assert_eq!(
            back.watch.origin(&other),
            Some(lightwire_wallet::Origin::Silent {
                tweak: [8; 32],
                label: Some(3),
                spend: SPEND,
            })
        );
        assert_eq!(back.ledger.transactions().len(), 1);
        // The spend key's origin, given with one of them, kept for the signer.
        assert_eq!(
            back.watch.spend_origin(&SPEND).map(|o| o.text()),
            Some("[d34db33f/352h/0h/0h/0h/0]".to_string())
        );

        // A saved silent item that is not one: the wallet is not read at all.
        let text = Watched::silent_text(&key, &[7; 32], &SPEND, None, None);
        let at = bytes
            .windows(text.len())
            .position(|x| x == text.as_bytes())
            .unwrap();
        let mut broken = bytes.clone();
        broken[at] = b'z';
        assert!(WalletSync::decode(&broken, Network::Regtest).is_none());

        let mut w = back;
        assert!(w.unwatch(&items[..1]).unwrap().is_some());
        assert_eq!(w.watch.origin(&script), None);
    }

    fn found(a: &Applied) -> Vec<u32> {
        a.changes
            .iter()
            .filter_map(|c| match c {
                WalletChange::Found(t) => Some(t.height),
                WalletChange::Withdrawn { height, .. } => Some(u32::MAX - height),
                WalletChange::Unconfirmed(_) | WalletChange::Dropped(_) => None,
            })
            .collect()
    }

    /// An address beyond the gap paid before the one that brings it within is found: the
    /// ledger goes back to its block. One further than the lookahead makes the wallet scan
    /// again from its start. Both survive a save and a restore.
    #[test]
    fn a_payment_beyond_the_gap_is_found_when_the_gap_reaches_it() {
        let descriptor = Descriptor::parse(BIP84, Network::Mainnet).unwrap();
        let receive = descriptor.branch_key(0).unwrap();
        let at = |i| descriptor.script_at(&receive, i).unwrap();
        let mut w = Fetching::new(Network::Mainnet, 100);
        w.watch(&[Watched::Descriptor(BIP84.into())]).unwrap();

        // Receive 25 is paid at 101, before receive 10 at 102 (the gap covers 0..20).
        let (b101, h101) = block_paying(101, &at(25));
        let (b102, h102) = block_paying(102, &at(10));
        w.matched(101, h101, None);
        w.matched(102, h102, None);
        let a = deliver(&mut w, &b101);
        assert_eq!(
            (found(&a), a.again),
            (vec![], None),
            "only in the lookahead"
        );
        let a = deliver(&mut w, &b102);
        assert_eq!(found(&a), [102]);
        assert_eq!(a.again, Some(Again::From(101)));
        assert_eq!(a.derived.len(), 11, "receive 70..81");

        // The caller takes the ledger back and applies the scan's matches again.
        let withdrawn = w.withdraw_from(101);
        assert_eq!(withdrawn.len(), 1);
        w.matched(101, h101, None);
        w.matched(102, h102, None);
        let a = deliver(&mut w, &b101);
        assert_eq!((found(&a), a.again), (vec![101], None));
        let a = deliver(&mut w, &b102);
        assert_eq!((found(&a), a.again), (vec![102], None));

        // Saved and restored: the gap, the lookahead noted and the coverage come back.
        let (b103, h103) = block_paying(103, &at(55));
        w.matched(103, h103, None);
        assert_eq!(found(&deliver(&mut w, &b103)), [] as [u32; 0]);
        let mut w = Fetching::of(WalletSync::decode(&w.encode(), Network::Mainnet).unwrap());
        assert_eq!(w.watch.branch_state(0, 0), Some((Some(25), 96)));
        assert_eq!(w.ledger.transactions().len(), 2);

        // Receive 45 at 104 owns up to 66, 55 among them: back to 103. Applied again, 55
        // owns up to 76, past the 70 covered from the start (0..20 and the lookahead of 50):
        // scan again.
        let (b104, h104) = block_paying(104, &at(45));
        w.matched(104, h104, None);
        let a = deliver(&mut w, &b104);
        assert_eq!((found(&a), a.again), (vec![104], Some(Again::From(103))));
        let withdrawn = w.withdraw_from(103);
        assert_eq!(withdrawn.len(), 1);
        w.matched(103, h103, None);
        w.matched(104, h104, None);
        let a = deliver(&mut w, &b103);
        assert_eq!((found(&a), a.again), (vec![103], Some(Again::Restart)));
        let withdrawn = w.restart();
        assert_eq!(withdrawn.len(), 3);
        assert!(w.ledger.transactions().is_empty());
        assert_eq!(
            w.watch.covered(0, 0),
            w.watch.branch_state(0, 0).map(|s| s.1)
        );
    }
}
