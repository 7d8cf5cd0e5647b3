//! A watch-only wallet's unconfirmed transactions, sans-IO: transactions not (yet) in a
//! checked block that pay a watched script or spend one of the wallet's coins, kept apart
//! from the [`Ledger`] and never counted as confirmed. Nothing proves them: no proof of
//! work stands behind a transaction outside a block, and whoever handed one over could
//! have invented it or could hide it. They are shown for what they are (seen, not mined).
//!
//! Rules (Bitcoin Core's wallet and mempool are the model):
//! - A transaction is taken once, whole and parsed; a coinbase never (it cannot be
//!   unconfirmed), nor one the ledger already holds, nor one that spends a coin a
//!   confirmed transaction already spent ([`AddError::Conflicted`]).
//! - A transaction a gateway announced that spends a coin of the wallet's is taken only
//!   if the coin's key signed that input ([`crate::sighash`]: legacy, BIP143, BIP341 key
//!   path, as Bitcoin Core's standard checks); one that is not signed so is
//!   [`AddError::NotSigned`] (no node's mempool holds it: its gateway invented it), one the
//!   wallet cannot check is [`AddError::Unchecked`] and not taken. So no gateway can show a
//!   spend of the wallet's coins that its keys did not sign, or lock a coin with one.
//! - Who holds a transaction is what makes a gateway's word count: a removal counts only
//!   from a gateway that holds it ([`Unconfirmed::let_go`]), and a transaction is dropped
//!   only when the last gateway holding it lets it go. Two unconfirmed transactions spending
//!   the same output cannot both be in one mempool: a gateway announcing one no longer
//!   holds the other, which goes ([`Reason::Replaced`], with its descendants) only if that
//!   gateway was the last to hold it. One gateway's word never drops what another holds,
//!   and none drops what no gateway is known to hold (a transaction resumed from the store,
//!   or the wallet's own broadcast whose relaying gateway reconnected): that one is
//!   confirmed, conflicted by a block, replaced by the wallet's own broadcast, or expires.
//! - The wallet's own broadcast (relayed by a gateway) replaces what it conflicts with:
//!   the application signed it, and the relaying node took it.
//! - A block that mines one confirms it (the ledger has it now); a block that spends one
//!   of its inputs otherwise conflicts it away, with its descendants
//!   ([`Reason::Conflicted`], Core's "conflicted"). Only inputs that spend the wallet's
//!   coins can be seen so: the wallet fetches no block for another's coin.
//! - One not mined within the expiry the caller gives, and that no gateway is known to
//!   hold, is dropped ([`Reason::Expired`]; Core's mempool expires transactions after
//!   two weeks, `-mempoolexpiry`).
//! - The set is bounded ([`MAX_UNCONFIRMED`] transactions of at most [`MAX_RAW`] bytes in
//!   all): an announced transaction over the bound is refused, never something already
//!   held dropped for it; the wallet's own broadcast is never refused for room (a gateway
//!   can fill the set with invented payments): announced ones make room for it
//!   ([`Reason::Evicted`]), those a single gateway holds first.
//!
//! Amounts: a transaction's `received` is what its outputs pay watched scripts, `sent`
//! the value of the wallet's coins it spends (confirmed ones, or outputs to the wallet of
//! unconfirmed ones); the coins spent are noted with their value and script when the
//! transaction is taken, so the amounts hold while the ledger is rebuilt under them.

use alloc::collections::BTreeSet;
use alloc::vec;
use alloc::vec::Vec;

use lightwire_primitives::{Tx, Txid};

use crate::ledger::{Ledger, Outpoint};
use crate::sighash::{Check, Fault, Prevout, check_input};

/// At most this many unconfirmed transactions are held.
pub const MAX_UNCONFIRMED: usize = 1_000;

/// At most this many bytes of unconfirmed transactions are held in all.
pub const MAX_RAW: usize = 4 << 20;

/// The wallet's transactions mined in this many blocks below the tip are kept whole, to
/// be put back as unconfirmed if a reorganisation withdraws their block (Bitcoin Core's
/// wallet keeps every transaction; a fork deeper than this is not one a node sees).
pub const MINED_KEPT: u32 = 100;

/// At most this many bytes of them are kept (the oldest go first).
pub const MINED_RAW: usize = 2 << 20;

/// Where an unconfirmed transaction came from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Source {
    /// The wallet's application broadcast it, and a gateway passed it to its node.
    Own,
    /// A gateway's mempool digest announced it, and the transaction fetched matched.
    Announced,
    /// A checked block held it, and a reorganisation withdrew that block (its node puts
    /// it back in its mempool, as Bitcoin Core does, `MaybeUpdateMempoolForReorg`).
    Withdrawn,
}

impl Source {
    fn code(self) -> u8 {
        match self {
            Source::Own => 0,
            Source::Announced => 1,
            Source::Withdrawn => 2,
        }
    }

    fn from_code(c: u8) -> Option<Source> {
        match c {
            0 => Some(Source::Own),
            1 => Some(Source::Announced),
            2 => Some(Source::Withdrawn),
            _ => None,
        }
    }
}

/// One of the wallet's coins an unconfirmed transaction spends.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SpentCoin {
    /// The input that spends it.
    pub input: u32,
    /// The coin.
    pub outpoint: Outpoint,
    /// Its value.
    pub value: u64,
    /// The script it pays.
    pub script: Vec<u8>,
}

/// An output of an unconfirmed transaction that pays a silent-payment receiver of the
/// wallet's (BIP352), found by scanning the transaction with the tweak a gateway's
/// mempool digest gave it. Its key is the receiver's (the spend key plus `tweak`), so it
/// is the wallet's whatever tweak found it; whether the transaction is real is another
/// matter: like every unconfirmed transaction, nothing proves it until a block holds it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SilentOutput {
    /// The output's index.
    pub vout: u32,
    /// The private-key tweak that spends it (the key that signs is the spend key plus it).
    pub tweak: [u8; 32],
    /// The label it was paid to (0: change), `None` for the plain address.
    pub label: Option<u32>,
    /// The receiver's spend public key.
    pub spend: [u8; 33],
}

/// An unconfirmed transaction of the wallet's (see the module documentation).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct UnconfirmedTx {
    /// Its id.
    pub txid: Txid,
    /// The transaction, as serialized.
    pub raw: Vec<u8>,
    /// Where it came from.
    pub source: Source,
    /// When it was first seen (the caller's clock: milliseconds since the Unix epoch).
    pub first_seen: u64,
    /// The gateways known to hold it now, one bit each (bit `i`: the caller's gateway
    /// `i`, below 64); not saved: none are known after a restart until one says so.
    pub holders: u64,
    /// The gateways whose whole mempool is still to be heard before it can be called
    /// gone, while no gateway holds it (one bit each): those that held it and went away,
    /// and after a restart every gateway (see [`Unconfirmed::snapshot_ended`]).
    pub awaited: u64,
    /// The wallet's coins it spends.
    pub spends: Vec<SpentCoin>,
    /// Its outputs that pay a silent-payment receiver of the wallet's, found by scanning
    /// it (empty for most).
    pub silent: Vec<SilentOutput>,
    /// Indexes of its outputs that pay watched scripts, or a silent-payment receiver.
    pub our_outputs: Vec<u32>,
    /// What its outputs pay watched scripts.
    pub received: u64,
    /// The value of the wallet's coins it spends.
    pub sent: u64,
    /// Its fee, when every input spends one of the wallet's coins.
    pub fee: Option<u64>,
}

impl UnconfirmedTx {
    /// How many gateways are known to hold it now.
    pub fn gateways(&self) -> u32 {
        self.holders.count_ones()
    }

    /// `received - sent`: what it will do to the balance if it is mined.
    pub fn net(&self) -> i64 {
        self.received as i64 - self.sent as i64
    }

    /// The outputs it spends, the wallet's or not (from its bytes, checked when taken).
    pub fn inputs(&self) -> impl Iterator<Item = Outpoint> + '_ {
        Tx::parse(&self.raw).into_iter().flat_map(|tx| {
            tx.inputs().map(|i| Outpoint {
                txid: i.prev_txid(),
                vout: i.prev_vout,
            })
        })
    }

    /// Its outputs that pay the wallet: outpoint, value, script.
    pub fn coins(&self) -> impl Iterator<Item = (Outpoint, u64, &[u8])> + '_ {
        let tx = Tx::parse(&self.raw).ok();
        tx.into_iter().flat_map(move |tx| {
            tx.outputs()
                .enumerate()
                .filter(|(i, _)| self.our_outputs.contains(&(*i as u32)))
                .map(move |(i, o)| {
                    (
                        Outpoint {
                            txid: self.txid,
                            vout: i as u32,
                        },
                        o.value,
                        o.script,
                    )
                })
        })
    }

    /// Its outputs paying watched scripts and the amounts, from its bytes and the coins it
    /// spends. `None` if it touches the wallet no more.
    fn account(&mut self, watched: &dyn Fn(&[u8]) -> bool) -> Option<()> {
        let tx = Tx::parse(&self.raw).ok()?;
        self.our_outputs.clear();
        self.received = 0;
        let mut out_total = 0u64;
        for (i, o) in tx.outputs().enumerate() {
            out_total = out_total.saturating_add(o.value);
            if watched(o.script) || self.silent.iter().any(|s| s.vout == i as u32) {
                self.our_outputs.push(i as u32);
                self.received = self.received.saturating_add(o.value);
            }
        }
        self.sent = self.spends.iter().map(|s| s.value).sum();
        self.fee = (self.spends.len() == tx.inputs().count())
            .then(|| self.sent.checked_sub(out_total))
            .flatten();
        (!self.spends.is_empty() || !self.our_outputs.is_empty()).then_some(())
    }
}

/// Why an unconfirmed transaction was dropped.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Reason {
    /// A later transaction spending one of the same outputs replaced it (or one of its
    /// ancestors): fetched, or said by the last gateway that held it.
    Replaced,
    /// A confirmed transaction spent one of the coins it (or one of its ancestors) spends
    /// (seen in a block of the wallet's, or said by the last gateway that held it).
    Conflicted,
    /// It was not mined within the expiry, and no gateway is known to hold it.
    Expired,
    /// It touches none of the scripts still watched.
    Unwatched,
    /// Every gateway that held it let it go (its mempool full, or the transaction too
    /// old): none holds it now.
    Evicted,
}

impl Reason {
    /// Its name in events: `replaced`, `conflicted`, `expired`, `unwatched`, `evicted`.
    pub const fn name(self) -> &'static str {
        match self {
            Reason::Replaced => "replaced",
            Reason::Conflicted => "conflicted",
            Reason::Expired => "expired",
            Reason::Unwatched => "unwatched",
            Reason::Evicted => "evicted",
        }
    }
}

/// An unconfirmed transaction dropped, and why.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Dropped {
    /// Its id.
    pub txid: Txid,
    /// Why.
    pub reason: Reason,
    /// The transaction that replaced or conflicted it (or its ancestor), when one did.
    pub by: Option<Txid>,
}

/// A transaction not taken.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum AddError {
    /// Its bytes are not one transaction.
    #[error("it does not parse as one transaction")]
    Malformed,
    /// A coinbase cannot be unconfirmed.
    #[error("a coinbase is never unconfirmed")]
    Coinbase,
    /// It pays no watched script and spends none of the wallet's coins.
    #[error("it touches none of the wallet's scripts or coins")]
    NotOurs,
    /// A block holds it already.
    #[error("it is confirmed already")]
    Confirmed,
    /// A confirmed transaction spent one of the coins it spends: it can never be mined.
    #[error("it spends a coin that confirmed transaction {0} spent")]
    Conflicted(Txid),
    /// The set is full ([`MAX_UNCONFIRMED`], [`MAX_RAW`]).
    #[error("too many unconfirmed transactions are held")]
    Full,
    /// It spends a coin of the wallet's on input `input`, which the coin's key did not
    /// sign (`fault`: the rule broken): no node holds it.
    #[error("its input {input} spends a coin of the wallet's without its key's signature ({})", .fault.name())]
    NotSigned {
        /// The input.
        input: u32,
        /// The rule its signature broke.
        fault: Fault,
    },
    /// It spends a coin of the wallet's on input `input` whose signature cannot be
    /// checked here (an output of another kind, a taproot script path, or another
    /// input's output not known): not taken, as one not signed would not be.
    #[error(
        "its input {input} spends a coin of the wallet's with a signature the wallet cannot check"
    )]
    Unchecked {
        /// The input.
        input: u32,
    },
}

/// What [`Unconfirmed::add`] did.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Added {
    /// Taken; the transactions it replaced were dropped.
    New {
        /// What it replaced, with their descendants.
        dropped: Vec<Dropped>,
        /// Those it conflicts with that its gateways no longer hold, still held by another.
        unheld: Vec<Txid>,
    },
    /// Not the wallet's, but it spends an output one held spends: its gateways no longer
    /// hold that one, which went if they were the last to (a payment to the wallet
    /// replaced by one paying elsewhere).
    Foreign {
        /// What it replaced, with their descendants.
        dropped: Vec<Dropped>,
        /// Those it conflicts with that its gateways no longer hold, still held by another.
        unheld: Vec<Txid>,
    },
    /// Held already; the gateways holding it were brought up to date if they changed
    /// (`true`).
    Known(bool),
}

/// What a block did to the unconfirmed transactions ([`Unconfirmed::after_block`]).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct AfterBlock {
    /// Mined: the ledger holds them now.
    pub confirmed: Vec<Txid>,
    /// Conflicted away.
    pub dropped: Vec<Dropped>,
}

/// The wallet's unconfirmed transactions, in the order they were first seen; and its
/// transactions mined in the last [`MINED_KEPT`] blocks.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Unconfirmed {
    txs: Vec<UnconfirmedTx>,
    /// The wallet's transactions of recent blocks: height, bytes; in block order.
    mined: Vec<(u32, Vec<u8>)>,
}

impl Unconfirmed {
    /// None held.
    pub fn new() -> Unconfirmed {
        Unconfirmed::default()
    }

    /// The transactions, in the order they were first seen.
    pub fn transactions(&self) -> &[UnconfirmedTx] {
        &self.txs
    }

    /// The one with id `txid`, if held.
    pub fn get(&self, txid: &Txid) -> Option<&UnconfirmedTx> {
        self.txs.iter().find(|t| t.txid == *txid)
    }

    /// How many are held.
    pub fn len(&self) -> usize {
        self.txs.len()
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.txs.is_empty()
    }

    /// The net of them all: what they will do to the balance if they are all mined.
    pub fn net(&self) -> i64 {
        self.txs.iter().map(UnconfirmedTx::net).sum()
    }

    /// Every output an unconfirmed transaction spends (each transaction read once: ask
    /// this set, not the transactions, once per coin).
    pub fn spent(&self) -> BTreeSet<Outpoint> {
        self.txs.iter().flat_map(UnconfirmedTx::inputs).collect()
    }

    /// Take transaction `raw` from `source`, seen at `now`, held by the gateways `holders`
    /// (one bit each; those of a transaction held already are added to its own); `ledger`
    /// holds the confirmed coins and `watched` says whether a script is the wallet's.
    pub fn add(
        &mut self,
        raw: &[u8],
        source: Source,
        now: u64,
        holders: u64,
        ledger: &Ledger,
        watched: impl Fn(&[u8]) -> bool,
    ) -> Result<Added, AddError> {
        self.add_one(raw, source, now, holders, ledger, &watched, &[])
    }

    /// [`Self::add`], with the outputs of the transaction that a scan found paying a
    /// silent-payment receiver of the wallet's (`silent`): they are the wallet's too. A
    /// transaction held already gains those it did not have.
    #[allow(clippy::too_many_arguments)]
    pub fn add_with_silent(
        &mut self,
        raw: &[u8],
        source: Source,
        now: u64,
        holders: u64,
        ledger: &Ledger,
        watched: impl Fn(&[u8]) -> bool,
        silent: &[SilentOutput],
    ) -> Result<Added, AddError> {
        self.add_one(raw, source, now, holders, ledger, &watched, silent)
    }

    /// The inputs of `tx` that spend the wallet's coins: mined ones, or outputs of its
    /// unconfirmed transactions. `Conflicted` if one spends a coin a mined transaction
    /// spent.
    fn spends_of(&self, tx: &Tx<'_>, ledger: &Ledger) -> Result<Vec<SpentCoin>, AddError> {
        let mut spends = Vec::new();
        for (i, input) in tx.inputs().enumerate() {
            let outpoint = Outpoint {
                txid: input.prev_txid(),
                vout: input.prev_vout,
            };
            let coin = match ledger.coin(&outpoint) {
                Some(c) => {
                    if let Some((by, _)) = c.spent_by {
                        return Err(AddError::Conflicted(by));
                    }
                    Some((c.value, c.script.clone()))
                }
                None => self
                    .txs
                    .iter()
                    .filter(|t| t.txid == outpoint.txid)
                    .flat_map(UnconfirmedTx::coins)
                    .find(|(o, _, _)| *o == outpoint)
                    .map(|(_, v, s)| (v, s.to_vec())),
            };
            if let Some((value, script)) = coin {
                spends.push(SpentCoin {
                    input: i as u32,
                    outpoint,
                    value,
                    script,
                });
            }
        }
        Ok(spends)
    }

    /// Whether a gateway's transaction `raw` spends a coin of the wallet's without its
    /// key's signature: [`AddError::NotSigned`] then, else `Ok`, whatever adding it would
    /// say otherwise (held already, conflicted, not the wallet's). Asked of every wallet
    /// before any takes a transaction: one wallet must not hold what another refuses,
    /// and a transaction held already is still checked (a copy with a forged witness has
    /// the same txid).
    pub fn check_signed(&self, raw: &[u8], ledger: &Ledger) -> Result<(), AddError> {
        let Ok(tx) = Tx::parse(raw) else {
            return Ok(());
        };
        if tx.is_coinbase() {
            return Ok(());
        }
        match self
            .spends_of(&tx, ledger)
            .map(|spends| check_spends(&tx, &spends))
        {
            Ok(Err(e @ AddError::NotSigned { .. })) => Err(e),
            _ => Ok(()),
        }
    }

    /// [`Self::add`], compiled once (not once per caller's `watched`: it is long).
    #[allow(clippy::too_many_arguments)]
    fn add_one(
        &mut self,
        raw: &[u8],
        source: Source,
        now: u64,
        holders: u64,
        ledger: &Ledger,
        watched: &dyn Fn(&[u8]) -> bool,
        silent: &[SilentOutput],
    ) -> Result<Added, AddError> {
        let tx = Tx::parse(raw).map_err(|_| AddError::Malformed)?;
        if tx.is_coinbase() {
            return Err(AddError::Coinbase);
        }
        let txid = tx.txid();
        if let Some(t) = self.txs.iter_mut().find(|t| t.txid == txid) {
            let mut changed = t.holders | holders != t.holders;
            t.holders |= holders;
            let before = t.silent.len();
            for s in silent {
                if !t.silent.iter().any(|x| x.vout == s.vout) {
                    t.silent.push(*s);
                }
            }
            if t.silent.len() != before {
                // It pays the wallet more than was known: still the wallet's, at least.
                let _ = t.account(watched);
                changed = true;
            }
            return Ok(Added::Known(changed));
        }
        if ledger.transactions().iter().any(|t| t.txid == txid) {
            return Err(AddError::Confirmed);
        }
        let spends = self.spends_of(&tx, ledger)?;
        // A gateway's transaction spending the wallet's coins: each such input must be
        // signed by its coin's key. (The wallet's own broadcasts are its application's,
        // and a node took them.)
        if source == Source::Announced {
            check_spends(&tx, &spends)?;
        }
        let mut entry = UnconfirmedTx {
            txid,
            raw: raw.to_vec(),
            source,
            first_seen: now,
            holders,
            awaited: 0,
            spends,
            silent: silent.to_vec(),
            our_outputs: Vec::new(),
            received: 0,
            sent: 0,
            fee: None,
        };
        // What it conflicts with: the wallet's own broadcast replaces it; a gateway's
        // transaction unholds it for the gateways announcing this one, and replaces it
        // if they were the last to hold it. What goes, goes first: the bound counts what
        // is left.
        let inputs: Vec<Outpoint> = entry.inputs().collect();
        let conflicting: Vec<(Txid, u64)> = self
            .txs
            .iter()
            .filter(|t| t.inputs().any(|o| inputs.contains(&o)))
            .map(|t| (t.txid, t.holders))
            .collect();
        let replaced: Vec<Txid> = conflicting
            .iter()
            .filter(|&&(_, had)| source == Source::Own || (had != 0 && had & !holders == 0))
            .map(|&(t, _)| t)
            .collect();
        let unheld: Vec<Txid> = conflicting
            .iter()
            .filter(|&&(t, had)| !replaced.contains(&t) && had & holders != 0)
            .map(|&(t, _)| t)
            .collect();
        let unhold = |txs: &mut Vec<UnconfirmedTx>| {
            for t in txs.iter_mut().filter(|t| unheld.contains(&t.txid)) {
                t.holders &= !holders;
            }
        };
        if entry.account(watched).is_none() {
            if replaced.is_empty() && unheld.is_empty() {
                return Err(AddError::NotOurs);
            }
            unhold(&mut self.txs);
            let dropped = self.drop_with_descendants(&replaced, Reason::Replaced, Some(txid));
            return Ok(Added::Foreign { dropped, unheld });
        }
        let held: usize = self.txs.iter().map(|t| t.raw.len()).sum();
        let mut count = self.txs.len() - replaced.len();
        let mut bytes = held
            - self
                .txs
                .iter()
                .filter(|t| replaced.contains(&t.txid))
                .map(|t| t.raw.len())
                .sum::<usize>();
        let fits =
            |count: usize, bytes: usize| count < MAX_UNCONFIRMED && bytes + raw.len() <= MAX_RAW;
        // The wallet's own broadcast is never refused for room (the set is filled by what
        // gateways announce, and a gateway can fill it): announced transactions nothing
        // spends make room, those one gateway alone holds first, oldest first.
        let mut evicted = Vec::new();
        if source == Source::Own && !fits(count, bytes) {
            // Held in the order first seen: single-holder ones first, then the others.
            for shared in [false, true] {
                for t in &self.txs {
                    if fits(count, bytes) {
                        break;
                    }
                    if t.source != Source::Announced
                        || (t.holders.count_ones() > 1) != shared
                        || replaced.contains(&t.txid)
                        || self
                            .txs
                            .iter()
                            .any(|c| c.inputs().any(|o| o.txid == t.txid))
                    {
                        continue;
                    }
                    evicted.push(t.txid);
                    count -= 1;
                    bytes -= t.raw.len();
                }
            }
        }
        if !fits(count, bytes) {
            return Err(AddError::Full);
        }
        unhold(&mut self.txs);
        let mut dropped = self.drop_with_descendants(&replaced, Reason::Replaced, Some(txid));
        dropped.extend(self.drop_with_descendants(&evicted, Reason::Evicted, None));
        self.txs.push(entry);
        Ok(Added::New { dropped, unheld })
    }

    /// Drop `roots` and every transaction that spends an output of one dropped, for
    /// `reason`.
    fn drop_with_descendants(
        &mut self,
        roots: &[Txid],
        reason: Reason,
        by: Option<Txid>,
    ) -> Vec<Dropped> {
        let mut gone: Vec<Txid> = roots.to_vec();
        // Descendants come after their ancestors in first-seen order: one pass finds them.
        for t in &self.txs {
            if !gone.contains(&t.txid) && t.inputs().any(|o| gone.contains(&o.txid)) {
                gone.push(t.txid);
            }
        }
        let dropped: Vec<Dropped> = self
            .txs
            .iter()
            .filter(|t| gone.contains(&t.txid))
            .map(|t| Dropped {
                txid: t.txid,
                reason,
                by,
            })
            .collect();
        self.txs.retain(|t| !gone.contains(&t.txid));
        dropped
    }

    /// A block was applied to `ledger`, finding the wallet's transactions `mined`: those
    /// held are confirmed, and those that spend a coin a confirmed transaction spent are
    /// conflicted away (with their descendants).
    pub fn after_block(&mut self, ledger: &Ledger, mined: &[Txid]) -> AfterBlock {
        let mut after = AfterBlock::default();
        self.txs.retain(|t| {
            let keep = !mined.contains(&t.txid);
            if !keep {
                after.confirmed.push(t.txid);
            }
            keep
        });
        loop {
            let conflict = self.txs.iter().find_map(|t| {
                t.spends.iter().find_map(|s| {
                    let (by, _) = ledger.coin(&s.outpoint)?.spent_by?;
                    (by != t.txid).then_some((t.txid, by))
                })
            });
            let Some((txid, by)) = conflict else {
                break;
            };
            after
                .dropped
                .extend(self.drop_with_descendants(&[txid], Reason::Conflicted, Some(by)));
        }
        after
    }

    /// Block `height` (checked, applied to the ledger) held the wallet's transactions
    /// `raws`, in block order: kept for [`MINED_KEPT`] blocks (and [`MINED_RAW`] bytes).
    pub fn mined(&mut self, height: u32, raws: &[&[u8]]) {
        self.mined.retain(|(h, _)| *h < height);
        self.mined
            .extend(raws.iter().map(|raw| (height, raw.to_vec())));
        let oldest = height.saturating_sub(MINED_KEPT - 1);
        self.mined.retain(|(h, _)| *h >= oldest);
        let mut bytes: usize = self.mined.iter().map(|(_, r)| r.len()).sum();
        while bytes > MINED_RAW {
            bytes -= self.mined.remove(0).1.len();
        }
    }

    /// A reorganisation withdrew the blocks from `first` on (`ledger` no longer holds
    /// them): the wallet's transactions they held are unconfirmed again, in block order,
    /// seen at `now` and held by no gateway yet (their nodes put them back in their
    /// mempools). What was taken (those a confirmed spend conflicts, or that no longer
    /// touch the wallet, are not).
    pub fn withdrawn(
        &mut self,
        first: u32,
        now: u64,
        ledger: &Ledger,
        watched: &dyn Fn(&[u8]) -> bool,
    ) -> Vec<Txid> {
        let (back, kept): (Vec<_>, Vec<_>) = core::mem::take(&mut self.mined)
            .into_iter()
            .partition(|(h, _)| *h >= first);
        self.mined = kept;
        let mut taken = Vec::new();
        for (_, raw) in back {
            if let Ok(Added::New { .. }) =
                self.add_one(&raw, Source::Withdrawn, now, 0, ledger, watched, &[])
            {
                if let Ok(tx) = Tx::parse(&raw) {
                    taken.push(tx.txid());
                }
            }
        }
        taken
    }

    /// The recently mined transactions as bytes, for the store (see
    /// [`Self::decode_mined`]).
    pub fn encode_mined(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.mined.len() as u32).to_le_bytes());
        for (h, raw) in &self.mined {
            out.extend_from_slice(&h.to_le_bytes());
            out.extend_from_slice(&(raw.len() as u32).to_le_bytes());
            out.extend_from_slice(raw);
        }
    }

    /// The recently mined transactions from [`Self::encode_mined`]'s bytes at the front of
    /// `bytes`, into this set; what follows. `None` if they are not that.
    pub fn decode_mined<'b>(&mut self, bytes: &'b [u8]) -> Option<&'b [u8]> {
        let mut r = crate::ledger::Cursor(bytes);
        let n = r.count(4 + 4 + 60)?;
        let mut mined = Vec::with_capacity(n);
        for _ in 0..n {
            let h = r.u32()?;
            let len = r.count(1)?;
            let raw = r.take(len)?;
            Tx::parse(raw).ok()?;
            mined.push((h, raw.to_vec()));
        }
        self.mined = mined;
        Some(r.0)
    }

    /// The gateways holding `txid` are now `holders` (one bit each); whether that
    /// changed anything.
    pub fn set_holders(&mut self, txid: &Txid, holders: u64) -> bool {
        match self.txs.iter_mut().find(|t| t.txid == *txid) {
            Some(t) if t.holders != holders => {
                t.holders = holders;
                true
            }
            _ => false,
        }
    }

    /// Gateway `bit` no longer holds anything (it is gone): the transactions whose
    /// holders changed. Its whole mempool is awaited before those it held can be called
    /// gone.
    pub fn forget_holder(&mut self, bit: u64) -> Vec<Txid> {
        let mut changed = Vec::new();
        for t in &mut self.txs {
            if t.holders & bit != 0 {
                t.holders &= !bit;
                t.awaited |= bit;
                changed.push(t.txid);
            }
        }
        changed
    }

    /// Gateway `bit` has told its whole mempool (its snapshot ended), without announcing
    /// what it no longer holds; `expected` are the gateways that can hold anything (one bit
    /// each: not those found to serve no mempool, or bad). An announced transaction no
    /// gateway holds is dropped as evicted once every gateway awaited for it has told
    /// its whole mempool: one gateway's word never drops what another held before it
    /// reconnected (or, after a restart, what any gateway may still hold). The wallet's own
    /// broadcasts are not (a gateway's digest does not list what it relayed itself):
    /// they expire.
    pub fn snapshot_ended(&mut self, bit: u64, expected: u64) -> Vec<Dropped> {
        let mut gone = Vec::new();
        for t in &mut self.txs {
            if t.source != Source::Announced || t.holders != 0 {
                continue;
            }
            t.awaited &= !bit & expected;
            if t.awaited == 0 {
                gone.push(t.txid);
            }
        }
        self.drop_with_descendants(&gone, Reason::Evicted, None)
    }

    /// Gateway `bit` let `txid` go (for `reason`; `None`: mined, which its block will
    /// show): if it held it, it holds it no more, and if it was the last to, `txid` is
    /// dropped (with its descendants). A gateway that did not hold it changes nothing.
    /// Whether its holders changed, and what was dropped.
    pub fn let_go(
        &mut self,
        txid: &Txid,
        bit: u64,
        reason: Option<Reason>,
    ) -> (bool, Vec<Dropped>) {
        let Some(t) = self.txs.iter_mut().find(|t| t.txid == *txid) else {
            return (false, Vec::new());
        };
        if t.holders & bit == 0 {
            return (false, Vec::new());
        }
        t.holders &= !bit;
        match reason {
            Some(reason) if t.holders == 0 => {
                (true, self.drop_with_descendants(&[*txid], reason, None))
            }
            _ => (true, Vec::new()),
        }
    }

    /// Those first seen `expiry` milliseconds or more before `now` that no gateway is
    /// known to hold are dropped.
    pub fn expire(&mut self, now: u64, expiry: u64) -> Vec<Dropped> {
        let old: Vec<Txid> = self
            .txs
            .iter()
            .filter(|t| t.holders == 0 && now.saturating_sub(t.first_seen) >= expiry)
            .map(|t| t.txid)
            .collect();
        self.drop_with_descendants(&old, Reason::Expired, None)
    }

    /// When the next one would expire (see [`Self::expire`]), if one can.
    pub fn next_expiry(&self, expiry: u64) -> Option<u64> {
        self.txs
            .iter()
            .filter(|t| t.holders == 0)
            .map(|t| t.first_seen.saturating_add(expiry))
            .min()
    }

    /// What is watched changed: the amounts are taken again, the coins spent whose script
    /// is no longer watched are forgotten, and those that touch the wallet no more are
    /// dropped.
    pub fn rewatch(&mut self, watched: impl Fn(&[u8]) -> bool) -> Vec<Dropped> {
        let mut gone = Vec::new();
        for t in &mut self.txs {
            t.spends.retain(|s| watched(&s.script));
            if t.account(&watched).is_none() {
                gone.push(t.txid);
            }
        }
        self.drop_with_descendants(&gone, Reason::Unwatched, None)
    }

    /// The set as bytes, for the store (see [`Self::decode`]): per transaction its bytes,
    /// source, first-seen time, the coins it spends and its silent-payment outputs.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.txs.len() as u32).to_le_bytes());
        for t in &self.txs {
            out.extend_from_slice(&(t.raw.len() as u32).to_le_bytes());
            out.extend_from_slice(&t.raw);
            out.push(t.source.code());
            out.extend_from_slice(&t.first_seen.to_le_bytes());
            out.extend_from_slice(&(t.spends.len() as u32).to_le_bytes());
            for s in &t.spends {
                out.extend_from_slice(&s.input.to_le_bytes());
                out.extend_from_slice(&s.outpoint.txid.0);
                out.extend_from_slice(&s.outpoint.vout.to_le_bytes());
                out.extend_from_slice(&s.value.to_le_bytes());
                out.extend_from_slice(&(s.script.len() as u32).to_le_bytes());
                out.extend_from_slice(&s.script);
            }
            out.extend_from_slice(&(t.silent.len() as u32).to_le_bytes());
            for s in &t.silent {
                out.extend_from_slice(&s.vout.to_le_bytes());
                out.extend_from_slice(&s.tweak);
                out.extend_from_slice(&s.label.unwrap_or(u32::MAX).to_le_bytes());
                out.extend_from_slice(&s.spend);
            }
        }
    }

    /// A set from [`Self::encode`]'s bytes at the front of `bytes`, with what follows;
    /// `watched` as for [`Self::add`]; `silent`: the bytes hold silent-payment outputs (an
    /// earlier layout did not). `None` if they are not that.
    pub fn decode(
        bytes: &[u8],
        silent: bool,
        watched: impl Fn(&[u8]) -> bool,
    ) -> Option<(Unconfirmed, &[u8])> {
        let mut r = crate::ledger::Cursor(bytes);
        let n = r.count(4 + 60 + 1 + 8 + 4)?;
        let mut txs = Vec::with_capacity(n);
        for _ in 0..n {
            let len = r.count(1)?;
            let raw = r.take(len)?.to_vec();
            let source = Source::from_code(r.u8()?)?;
            let first_seen = r.u64()?;
            let k = r.count(4 + 36 + 8 + 4)?;
            let mut spends = Vec::with_capacity(k);
            for _ in 0..k {
                let input = r.u32()?;
                let outpoint = Outpoint {
                    txid: Txid(r.array()?),
                    vout: r.u32()?,
                };
                let value = r.u64()?;
                let len = r.count(1)?;
                let script = r.take(len)?.to_vec();
                spends.push(SpentCoin {
                    input,
                    outpoint,
                    value,
                    script,
                });
            }
            let mut found = Vec::new();
            if silent {
                let k = r.count(4 + 32 + 4 + 33)?;
                for _ in 0..k {
                    let vout = r.u32()?;
                    let tweak = r.array()?;
                    let label = Some(r.u32()?).filter(|l| *l != u32::MAX);
                    found.push(SilentOutput {
                        vout,
                        tweak,
                        label,
                        spend: r.take(33)?.try_into().ok()?,
                    });
                }
            }
            let txid = Tx::parse(&raw).ok()?.txid();
            let mut t = UnconfirmedTx {
                txid,
                raw,
                source,
                first_seen,
                holders: 0,
                awaited: u64::MAX,
                spends,
                silent: found,
                our_outputs: Vec::new(),
                received: 0,
                sent: 0,
                fee: None,
            };
            // One that no longer touches the wallet is not kept (it was saved by a wallet
            // that watched more).
            if t.account(&watched).is_some() {
                txs.push(t);
            }
        }
        Some((
            Unconfirmed {
                txs,
                mined: Vec::new(),
            },
            r.0,
        ))
    }
}

/// Each of `spends` (inputs of `tx` spending the wallet's coins) signed by its coin's key.
fn check_spends(tx: &Tx<'_>, spends: &[SpentCoin]) -> Result<(), AddError> {
    if spends.is_empty() {
        return Ok(());
    }
    let mut spent: Vec<Option<Prevout<'_>>> = vec![None; tx.inputs().count()];
    for s in spends {
        spent[s.input as usize] = Some(Prevout {
            value: s.value,
            script: &s.script,
        });
    }
    for s in spends {
        match check_input(tx, s.input as usize, &spent) {
            Check::Signed => {}
            Check::NotSigned(fault) => {
                return Err(AddError::NotSigned {
                    input: s.input,
                    fault,
                });
            }
            Check::Unknown => return Err(AddError::Unchecked { input: s.input }),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use alloc::vec;

    use super::*;
    use crate::ledger::tests::{OTHER, OURS, block, checked, tx, txid};

    /// What `txs` dropped for `reason` by `by` look like.
    fn dropped(txs: &[&[u8]], reason: Reason, by: &[u8]) -> Vec<Dropped> {
        txs.iter()
            .map(|t| Dropped {
                txid: txid(t),
                reason,
                by: Some(txid(by)),
            })
            .collect()
    }

    fn ours(s: &[u8]) -> bool {
        s == OURS
    }

    /// A ledger holding a confirmed coin of 10,000 (block 5), and a coinbase to fund it.
    fn funded() -> (Ledger, Vec<u8>) {
        let mut l = Ledger::new();
        let cb = tx(&[([0; 32], u32::MAX)], &[(1, OTHER)]);
        let pay = tx(&[([9; 32], 0)], &[(10_000, OURS)]);
        l.apply(5, &checked(&block(&[cb, pay.clone()])), ours)
            .unwrap();
        (l, pay)
    }

    #[test]
    fn a_spend_with_change_is_net_of_what_leaves_and_is_confirmed_when_mined() {
        let (mut l, pay) = funded();
        let mut u = Unconfirmed::new();
        let spend = tx(&[(txid(&pay).0, 0)], &[(6_000, OTHER), (3_500, OURS)]);
        assert_eq!(
            u.add(&spend, Source::Own, 1_000, 2, &l, ours),
            Ok(Added::New {
                dropped: vec![],
                unheld: vec![]
            })
        );
        let t = &u.transactions()[0];
        assert_eq!(
            (t.sent, t.received, t.fee, t.net()),
            (10_000, 3_500, Some(500), -6_500)
        );
        assert_eq!(u.net(), -6_500);
        assert!(u.spent().contains(&Outpoint {
            txid: txid(&pay),
            vout: 0
        }));
        assert_eq!(u.transactions()[0].coins().count(), 1);
        // Again: known, the gateway count brought up to date.
        assert_eq!(
            u.add(&spend, Source::Own, 2_000, 3, &l, ours),
            Ok(Added::Known(true))
        );
        assert_eq!(u.transactions()[0].first_seen, 1_000);
        // Mined at 6: confirmed, gone from the set; the ledger has it.
        let cb = tx(&[([0; 32], u32::MAX)], &[(2, OTHER)]);
        let a = l
            .apply(6, &checked(&block(&[cb, spend.clone()])), ours)
            .unwrap();
        let after = u.after_block(&l, &a.txids);
        assert_eq!(after.confirmed, [txid(&spend)]);
        assert!(after.dropped.is_empty() && u.is_empty());
        // Offered again now: confirmed already.
        assert_eq!(
            u.add(&spend, Source::Own, 3_000, 1, &l, ours),
            Err(AddError::Confirmed)
        );
    }

    #[test]
    fn a_replacement_drops_the_replaced_and_its_descendants() {
        let (l, pay) = funded();
        let mut u = Unconfirmed::new();
        let first = tx(&[(txid(&pay).0, 0)], &[(9_000, OURS)]);
        let child = tx(&[(txid(&first).0, 0)], &[(8_000, OTHER)]);
        let unrelated_input = tx(&[([3; 32], 1)], &[(700, OURS)]);
        u.add(&first, Source::Own, 1, 1, &l, ours).unwrap();
        u.add(&child, Source::Own, 2, 1, &l, ours).unwrap();
        u.add(&unrelated_input, Source::Own, 3, 1, &l, ours)
            .unwrap();
        // The child spends the unconfirmed output: its value is known.
        assert_eq!(u.get(&txid(&child)).unwrap().sent, 9_000);
        assert_eq!(u.net(), -1_000 - 9_000 + 700);
        let bumped = tx(&[(txid(&pay).0, 0)], &[(8_800, OURS)]);
        let Ok(Added::New { dropped, .. }) = u.add(&bumped, Source::Own, 4, 1, &l, ours) else {
            panic!()
        };
        assert_eq!(
            dropped,
            super::tests::dropped(&[&first, &child], Reason::Replaced, &bumped)
        );
        assert_eq!(u.len(), 2);
        assert_eq!(u.net(), -1_200 + 700);
        // A payment to the wallet replaced by one paying elsewhere: not the wallet's, but
        // the payment goes.
        let elsewhere = tx(&[([3; 32], 1)], &[(650, OTHER)]);
        assert_eq!(
            u.add(&elsewhere, Source::Announced, 5, 1, &l, ours),
            Ok(Added::Foreign {
                dropped: super::tests::dropped(&[&unrelated_input], Reason::Replaced, &elsewhere),
                unheld: vec![]
            })
        );
        assert_eq!(u.len(), 1);
    }

    #[test]
    fn a_block_spending_its_coin_otherwise_conflicts_it_away() {
        let (mut l, pay) = funded();
        let mut u = Unconfirmed::new();
        let ours_tx = tx(&[(txid(&pay).0, 0)], &[(9_000, OTHER)]);
        let child = tx(&[(txid(&ours_tx).0, 0)], &[(8_000, OURS)]);
        u.add(&ours_tx, Source::Own, 1, 1, &l, ours).unwrap();
        u.add(&child, Source::Own, 2, 1, &l, ours).unwrap();
        let other = tx(&[(txid(&pay).0, 0)], &[(9_900, OTHER)]);
        let cb = tx(&[([0; 32], u32::MAX)], &[(2, OTHER)]);
        let a = l
            .apply(6, &checked(&block(&[cb, other.clone()])), ours)
            .unwrap();
        let after = u.after_block(&l, &a.txids);
        assert_eq!(
            after.dropped,
            dropped(&[&ours_tx, &child], Reason::Conflicted, &other)
        );
        assert!(u.is_empty());
        // Offered after: it can never be mined.
        assert_eq!(
            u.add(&ours_tx, Source::Own, 3, 1, &l, ours),
            Err(AddError::Conflicted(txid(&other)))
        );
    }

    #[test]
    fn refusals_expiry_rewatch_and_the_bound() {
        let (l, pay) = funded();
        let mut u = Unconfirmed::new();
        assert_eq!(
            u.add(&[1, 2, 3], Source::Own, 0, 0, &l, ours),
            Err(AddError::Malformed)
        );
        let cb = tx(&[([0; 32], u32::MAX)], &[(5, OURS)]);
        assert_eq!(
            u.add(&cb, Source::Own, 0, 0, &l, ours),
            Err(AddError::Coinbase)
        );
        let foreign = tx(&[([4; 32], 0)], &[(5, OTHER)]);
        assert_eq!(
            u.add(&foreign, Source::Own, 0, 0, &l, ours),
            Err(AddError::NotOurs)
        );
        assert_eq!(
            u.add(&pay, Source::Own, 0, 0, &l, ours),
            Err(AddError::Confirmed)
        );
        // Expiry: only those no gateway holds.
        let a = tx(&[([4; 32], 0)], &[(5, OURS)]);
        let b = tx(&[([4; 32], 1)], &[(6, OURS)]);
        u.add(&a, Source::Own, 100, 0, &l, ours).unwrap();
        u.add(&b, Source::Own, 100, 1, &l, ours).unwrap();
        assert_eq!(u.next_expiry(50), Some(150));
        assert!(u.expire(149, 50).is_empty());
        assert_eq!(
            u.expire(150, 50),
            [Dropped {
                txid: txid(&a),
                reason: Reason::Expired,
                by: None
            }]
        );
        // Nothing watched any more: dropped as unwatched.
        assert_eq!(u.rewatch(|_| false)[0].reason, Reason::Unwatched);
        assert!(u.is_empty());
        // The bound: the thousand-and-first is refused, nothing held is dropped.
        for i in 0..MAX_UNCONFIRMED as u32 {
            let mut prev = [5u8; 32];
            prev[..4].copy_from_slice(&i.to_le_bytes());
            u.add(&tx(&[(prev, 0)], &[(5, OURS)]), Source::Own, 0, 1, &l, ours)
                .unwrap();
        }
        assert_eq!(u.add(&a, Source::Own, 0, 1, &l, ours), Err(AddError::Full));
        assert_eq!(u.len(), MAX_UNCONFIRMED);
    }

    /// A gateway fills the set with invented payments to a known script: an announced
    /// transaction over the bound is refused, the wallet's own broadcast is not: the
    /// announced payment a single gateway holds, oldest first, makes room (one held by two
    /// gateways, or one a held transaction spends, only after).
    #[test]
    fn an_own_broadcast_finds_room_in_a_full_set() {
        let (l, pay) = funded();
        let mut u = Unconfirmed::new();
        let invented = |i: u32| {
            let mut prev = [5u8; 32];
            prev[..4].copy_from_slice(&i.to_le_bytes());
            tx(&[(prev, 0)], &[(5, OURS)])
        };
        // The oldest is held by two gateways, the next has a child (the wallet's own): both
        // kept.
        u.add(&invented(0), Source::Announced, 0, 0b11, &l, ours)
            .unwrap();
        u.add(&invented(1), Source::Announced, 1, 0b01, &l, ours)
            .unwrap();
        let child = tx(&[(txid(&invented(1)).0, 0)], &[(4, OURS)]);
        u.add(&child, Source::Own, 2, 0b01, &l, ours).unwrap();
        for i in 3..MAX_UNCONFIRMED as u32 {
            u.add(&invented(i), Source::Announced, i.into(), 0b10, &l, ours)
                .unwrap();
        }
        assert_eq!(u.len(), MAX_UNCONFIRMED);
        assert_eq!(
            u.add(&invented(5_000), Source::Announced, 9, 0b10, &l, ours),
            Err(AddError::Full)
        );
        let spend = tx(&[(txid(&pay).0, 0)], &[(9_000, OTHER)]);
        let Ok(Added::New { dropped, .. }) = u.add(&spend, Source::Own, 10_000, 0b01, &l, ours)
        else {
            panic!("refused")
        };
        assert_eq!(
            dropped,
            [Dropped {
                txid: txid(&invented(3)),
                reason: Reason::Evicted,
                by: None
            }]
        );
        assert_eq!(u.len(), MAX_UNCONFIRMED);
        assert!(u.get(&txid(&spend)).is_some());
        assert!(u.get(&txid(&invented(0))).is_some() && u.get(&txid(&child)).is_some());
    }

    #[test]
    fn saved_and_restored_and_damaged_bytes_refused() {
        let (l, pay) = funded();
        let mut u = Unconfirmed::new();
        let spend = tx(&[(txid(&pay).0, 0)], &[(6_000, OTHER), (3_500, OURS)]);
        u.add(&spend, Source::Own, 1_234, 2, &l, ours).unwrap();
        // A silent payment found in a gateway's transaction: kept with it.
        let found = SilentOutput {
            vout: 1,
            tweak: [7; 32],
            label: Some(3),
            spend: [2; 33],
        };
        let paid = tx(&[([9; 32], 0)], &[(100, OTHER), (2_000, OTHER)]);
        u.add_with_silent(&paid, Source::Announced, 5, 1, &l, ours, &[found])
            .unwrap();
        let mut bytes = Vec::new();
        u.encode(&mut bytes);
        bytes.push(0xaa);
        let (back, rest) = Unconfirmed::decode(&bytes, true, ours).unwrap();
        assert_eq!(rest, [0xaa]);
        let mut expected = u.clone();
        for t in &mut expected.txs {
            t.holders = 0;
            t.awaited = u64::MAX;
        }
        assert_eq!(back, expected);
        assert_eq!(back.get(&txid(&paid)).unwrap().received, 2_000);
        for cut in 0..bytes.len() - 1 {
            assert!(
                Unconfirmed::decode(&bytes[..cut], true, ours).is_none(),
                "cut at {cut}"
            );
        }
        // The layout before silent outputs: read without them.
        let mut old = Unconfirmed::new();
        old.add(&spend, Source::Own, 1_234, 2, &l, ours).unwrap();
        let mut bytes = Vec::new();
        old.encode(&mut bytes);
        // (Without silent outputs, the new layout is the old one plus a zero count.)
        bytes.truncate(bytes.len() - 4);
        let (back, rest) = Unconfirmed::decode(&bytes, false, ours).unwrap();
        assert!(rest.is_empty());
        assert_eq!(back.len(), 1);
    }

    /// A silent payment's output is the wallet's only through what was found: a
    /// transaction paying no watched script is not taken without it, is taken with it (its
    /// amount received), and gains what a later scan finds when held already.
    #[test]
    fn silent_outputs_make_a_transaction_the_wallets() {
        let (l, _) = funded();
        let mut u = Unconfirmed::new();
        let paid = tx(
            &[([9; 32], 0)],
            &[(100, OTHER), (2_000, OTHER), (300, OTHER)],
        );
        assert_eq!(
            u.add(&paid, Source::Announced, 5, 1, &l, ours),
            Err(AddError::NotOurs)
        );
        let out = |vout| SilentOutput {
            vout,
            tweak: [7; 32],
            label: None,
            spend: [2; 33],
        };
        assert!(matches!(
            u.add_with_silent(&paid, Source::Announced, 5, 1, &l, ours, &[out(1)]),
            Ok(Added::New { .. })
        ));
        assert_eq!(u.get(&txid(&paid)).unwrap().received, 2_000);
        assert_eq!(
            u.add_with_silent(&paid, Source::Announced, 6, 1, &l, ours, &[out(1), out(2)]),
            Ok(Added::Known(true))
        );
        let t = u.get(&txid(&paid)).unwrap();
        assert_eq!((t.received, t.silent.len()), (2_300, 2));
        // Nothing watched: still the wallet's by its silent outputs.
        assert!(u.rewatch(|_| false).is_empty());
        assert_eq!(u.len(), 1);
    }

    /// A gateway's transaction spending a coin of the wallet's: taken only when the coin's
    /// key signed it (one invented from the wallet's own broadcast, its witness reused, is
    /// refused for its rule); once taken beside the wallet's own conflicting broadcast, it
    /// drops nothing its gateway does not hold. A removal counts only from a holder.
    #[test]
    fn a_gateways_spend_of_the_wallets_coin_counts_only_when_its_key_signed_it() {
        use crate::sighash::{Fault, segwit_v0};
        use k256::ecdsa::signature::hazmat::PrehashSigner;
        let key = k256::ecdsa::SigningKey::from_slice(&[0x42; 32]).unwrap();
        let public = key.verifying_key().to_sec1_point(true);
        let public = public.as_bytes();
        let script = crate::hash::witness(0, &crate::hash::hash160(public));
        let mine = |s: &[u8]| s == script;
        let mut l = Ledger::new();
        let cb = tx(&[([0; 32], u32::MAX)], &[(1, OTHER)]);
        let pay = tx(&[([9; 32], 0)], &[(10_000, &script)]);
        l.apply(5, &checked(&block(&[cb, pay.clone()])), mine)
            .unwrap();
        // A spend with a witness: the signature (over its BIP143 hash) and the key.
        let spend = |outputs: &[(u64, &[u8])], sig: Option<&[u8]>| {
            let bare = tx(&[(txid(&pay).0, 0)], outputs);
            let code = crate::hash::p2pkh(&crate::hash::hash160(public));
            let hash = segwit_v0(&Tx::parse(&bare).unwrap(), 0, &code, 10_000, 1);
            let signed: k256::ecdsa::Signature = key.sign_prehash(&hash).unwrap();
            let mut der = signed.normalize_s().to_der().as_bytes().to_vec();
            der.push(1);
            let sig = sig.map_or(der, <[u8]>::to_vec);
            // BIP144: marker and flag after the version, the witness before the lock time.
            let mut raw = bare[..4].to_vec();
            raw.extend_from_slice(&[0, 1]);
            raw.extend_from_slice(&bare[4..bare.len() - 4]);
            raw.push(2);
            raw.push(sig.len() as u8);
            raw.extend_from_slice(&sig);
            raw.push(public.len() as u8);
            raw.extend_from_slice(public);
            raw.extend_from_slice(&bare[bare.len() - 4..]);
            (raw, sig)
        };
        let mut u = Unconfirmed::new();
        let (own, own_sig) = spend(&[(9_000, OTHER)], None);
        u.add(&own, Source::Own, 1, 0b01, &l, mine).unwrap();
        // Invented: the own broadcast's witness on other outputs.
        let (forged, _) = spend(&[(9_900, OTHER)], Some(&own_sig));
        assert_eq!(
            u.add(&forged, Source::Announced, 2, 0b10, &l, mine),
            Err(AddError::NotSigned {
                input: 0,
                fault: Fault::Signature
            })
        );
        let no_witness = tx(&[(txid(&pay).0, 0)], &[(9_900, OTHER)]);
        assert_eq!(
            u.add(&no_witness, Source::Announced, 2, 0b10, &l, mine),
            Err(AddError::NotSigned {
                input: 0,
                fault: Fault::Shape
            })
        );
        assert_eq!(u.len(), 1);
        assert_eq!(u.get(&txid(&own)).unwrap().holders, 0b01);
        // A copy of the held broadcast with a witness that signs nothing has its txid:
        // adding it would find it held (a witness is not in the txid), but the check
        // every wallet is asked first refuses it; the real one passes.
        let mut broken = own_sig.clone();
        broken[8] ^= 1;
        let (copy, _) = spend(&[(9_000, OTHER)], Some(&broken));
        assert_eq!(txid(&copy), txid(&own));
        assert_eq!(
            u.check_signed(&copy, &l),
            Err(AddError::NotSigned {
                input: 0,
                fault: Fault::Signature
            })
        );
        assert_eq!(u.check_signed(&own, &l), Ok(()));
        assert!(u.check_signed(&no_witness, &l).is_err());
        // Signed by the coin's key (another of the wallet's signers, say): shown, and the
        // own broadcast, held by gateway 0, stays.
        let (other, _) = spend(&[(9_500, OTHER)], None);
        assert_eq!(
            u.add(&other, Source::Announced, 3, 0b10, &l, mine),
            Ok(Added::New {
                dropped: vec![],
                unheld: vec![]
            })
        );
        assert_eq!(u.len(), 2);
        // Removals: from a gateway that does not hold it, nothing; said mined by its
        // holder, held no more but kept for its block; replaced by its last holder, gone.
        let t = txid(&own);
        assert_eq!(u.let_go(&t, 0b10, Some(Reason::Replaced)), (false, vec![]));
        assert_eq!(u.let_go(&t, 0b01, None), (true, vec![]));
        assert_eq!(u.get(&t).unwrap().holders, 0);
        assert_eq!(u.let_go(&t, 0b01, Some(Reason::Replaced)), (false, vec![]));
        assert!(
            u.get(&t).is_some(),
            "no holder is known: nobody's word drops it"
        );
    }

    /// An incoming payment held by gateways 0 and 1; transactions spending its input and
    /// paying elsewhere (no signature the wallet can check): announced by gateway 1, it
    /// unholds the payment for gateway 1 only; then by gateway 0, the last holder: the
    /// payment is replaced. One announced by a gateway that never held it changes nothing.
    #[test]
    fn a_conflict_unholds_for_its_announcers_and_replaces_only_for_the_last() {
        let (l, _) = funded();
        let mut u = Unconfirmed::new();
        let pay = tx(&[([3; 32], 1)], &[(700, OURS)]);
        u.add(&pay, Source::Announced, 1, 0b11, &l, ours).unwrap();
        let elsewhere = tx(&[([3; 32], 1)], &[(650, OTHER)]);
        assert_eq!(
            u.add(&elsewhere, Source::Announced, 2, 0b100, &l, ours),
            Err(AddError::NotOurs)
        );
        assert_eq!(
            u.add(&elsewhere, Source::Announced, 2, 0b10, &l, ours),
            Ok(Added::Foreign {
                dropped: vec![],
                unheld: vec![txid(&pay)]
            })
        );
        assert_eq!(u.get(&txid(&pay)).unwrap().holders, 0b01);
        assert_eq!(
            u.add(&elsewhere, Source::Announced, 3, 0b01, &l, ours),
            Ok(Added::Foreign {
                dropped: dropped(&[&pay], Reason::Replaced, &elsewhere),
                unheld: vec![]
            })
        );
        assert!(u.is_empty());
    }

    /// The wallet's transactions of block 6 (a payment to it, and its spend of a coin of
    /// block 5) are kept whole; a reorganisation withdraws block 6: both are unconfirmed
    /// again (in block order, so the spend's coin is known), and a block of the new branch
    /// that mines the spend confirms it. Kept no longer than [`MINED_KEPT`] blocks, and
    /// saved.
    #[test]
    fn a_withdrawn_block_puts_the_wallets_transactions_back_until_mined_again() {
        let (mut l, pay) = funded();
        let mut u = Unconfirmed::new();
        let cb = tx(&[([0; 32], u32::MAX)], &[(1, OTHER)]);
        let incoming = tx(&[([8; 32], 3)], &[(2_000, OURS)]);
        let spend = tx(&[(txid(&pay).0, 0)], &[(9_000, OTHER), (500, OURS)]);
        let block6 = [cb.clone(), incoming.clone(), spend.clone()];
        let a = l.apply(6, &checked(&block(&block6)), ours).unwrap();
        assert_eq!(a.txids.len(), 2);
        u.mined(6, &[&incoming[..], &spend[..]]);
        let mut saved = Vec::new();
        u.encode_mined(&mut saved);
        l.disconnect_from(6);
        let back = u.withdrawn(6, 77, &l, &ours);
        assert_eq!(back, [txid(&incoming), txid(&spend)]);
        let t = u.get(&txid(&spend)).unwrap();
        assert_eq!(
            (t.source, t.sent, t.holders, t.first_seen),
            (Source::Withdrawn, 10_000, 0, 77)
        );
        // The new branch's block 6 mines the spend only: confirmed; the payment stays.
        let a = l
            .apply(6, &checked(&block(&[cb.clone(), spend.clone()])), ours)
            .unwrap();
        let after = u.after_block(&l, &a.txids);
        assert_eq!(after.confirmed, [txid(&spend)]);
        assert_eq!(u.len(), 1);
        // Saved and read back; pruned past the window.
        let mut v = Unconfirmed::new();
        assert_eq!(v.decode_mined(&saved), Some(&[][..]));
        v.mined(6 + MINED_KEPT, &[]);
        assert_eq!(v.mined.len(), 0);
        let mut w = Unconfirmed::new();
        w.decode_mined(&saved).unwrap();
        w.mined(5 + MINED_KEPT, &[]);
        assert_eq!(w.mined.len(), 2);
        assert!(
            Unconfirmed::new()
                .decode_mined(&saved[..saved.len() - 1])
                .is_none()
        );
    }
}
