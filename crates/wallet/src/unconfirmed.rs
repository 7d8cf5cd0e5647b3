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
//! - Two unconfirmed transactions spending the same output cannot both be mined: the one
//!   taken later replaces the other (BIP125; the node that relayed it accepted the
//!   replacement), and the replaced one goes with its descendants
//!   ([`Reason::Replaced`]).
//! - A block that mines one confirms it (the ledger has it now); a block that spends one
//!   of its inputs otherwise conflicts it away, with its descendants
//!   ([`Reason::Conflicted`], Core's "conflicted"). Only inputs that spend the wallet's
//!   coins can be seen so: the wallet fetches no block for another's coin.
//! - One not mined within the expiry the caller gives, and that no gateway is known to
//!   hold, is dropped ([`Reason::Expired`]; Core's mempool expires transactions after
//!   two weeks, `-mempoolexpiry`).
//! - The set is bounded ([`MAX_UNCONFIRMED`] transactions of at most [`MAX_RAW`] bytes in
//!   all): what comes over the bound is refused, never something already held dropped.
//!
//! Amounts: a transaction's `received` is what its outputs pay watched scripts, `sent`
//! the value of the wallet's coins it spends (confirmed ones, or outputs to the wallet of
//! unconfirmed ones); the coins spent are noted with their value and script when the
//! transaction is taken, so the amounts hold while the ledger is rebuilt under them.

use alloc::collections::BTreeSet;
use alloc::vec::Vec;

use lightwire_primitives::{Tx, Txid};

use crate::ledger::{Ledger, Outpoint};

/// At most this many unconfirmed transactions are held.
pub const MAX_UNCONFIRMED: usize = 1_000;

/// At most this many bytes of unconfirmed transactions are held in all.
pub const MAX_RAW: usize = 4 << 20;

/// Where an unconfirmed transaction came from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Source {
    /// The wallet's application broadcast it, and a gateway passed it to its node.
    Own,
    /// A gateway's mempool digest announced it, and the transaction fetched matched.
    Announced,
}

impl Source {
    fn code(self) -> u8 {
        match self {
            Source::Own => 0,
            Source::Announced => 1,
        }
    }

    fn from_code(c: u8) -> Option<Source> {
        match c {
            0 => Some(Source::Own),
            1 => Some(Source::Announced),
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
    /// The wallet's coins it spends.
    pub spends: Vec<SpentCoin>,
    /// Indexes of its outputs that pay watched scripts.
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
    fn account(&mut self, watched: &impl Fn(&[u8]) -> bool) -> Option<()> {
        let tx = Tx::parse(&self.raw).ok()?;
        self.our_outputs.clear();
        self.received = 0;
        let mut out_total = 0u64;
        for (i, o) in tx.outputs().enumerate() {
            out_total = out_total.saturating_add(o.value);
            if watched(o.script) {
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
}

/// What [`Unconfirmed::add`] did.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Added {
    /// Taken; the transactions it replaced were dropped.
    New {
        /// What it replaced, with their descendants.
        dropped: Vec<Dropped>,
    },
    /// Not the wallet's, but it spends an output one held spends: those it replaced were
    /// dropped (a payment to the wallet replaced by one paying elsewhere).
    Foreign {
        /// What it replaced, with their descendants.
        dropped: Vec<Dropped>,
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

/// The wallet's unconfirmed transactions, in the order they were first seen.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Unconfirmed {
    txs: Vec<UnconfirmedTx>,
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
        let tx = Tx::parse(raw).map_err(|_| AddError::Malformed)?;
        if tx.is_coinbase() {
            return Err(AddError::Coinbase);
        }
        let txid = tx.txid();
        if let Some(t) = self.txs.iter_mut().find(|t| t.txid == txid) {
            let changed = t.holders | holders != t.holders;
            t.holders |= holders;
            return Ok(Added::Known(changed));
        }
        if ledger.transactions().iter().any(|t| t.txid == txid) {
            return Err(AddError::Confirmed);
        }
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
        let mut entry = UnconfirmedTx {
            txid,
            raw: raw.to_vec(),
            source,
            first_seen: now,
            holders,
            spends,
            our_outputs: Vec::new(),
            received: 0,
            sent: 0,
            fee: None,
        };
        // What it replaces goes first: the bound counts what is left.
        let inputs: Vec<Outpoint> = entry.inputs().collect();
        let replaced: Vec<Txid> = self
            .txs
            .iter()
            .filter(|t| t.inputs().any(|o| inputs.contains(&o)))
            .map(|t| t.txid)
            .collect();
        if entry.account(&watched).is_none() {
            if replaced.is_empty() {
                return Err(AddError::NotOurs);
            }
            let dropped = self.drop_with_descendants(&replaced, Reason::Replaced, Some(txid));
            return Ok(Added::Foreign { dropped });
        }
        let held: usize = self.txs.iter().map(|t| t.raw.len()).sum();
        let freed: usize = self
            .txs
            .iter()
            .filter(|t| replaced.contains(&t.txid))
            .map(|t| t.raw.len())
            .sum();
        if self.txs.len() - replaced.len() >= MAX_UNCONFIRMED || held - freed + raw.len() > MAX_RAW
        {
            return Err(AddError::Full);
        }
        let dropped = self.drop_with_descendants(&replaced, Reason::Replaced, Some(txid));
        self.txs.push(entry);
        Ok(Added::New { dropped })
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
    /// holders changed.
    pub fn forget_holder(&mut self, bit: u64) -> Vec<Txid> {
        let mut changed = Vec::new();
        for t in &mut self.txs {
            if t.holders & bit != 0 {
                t.holders &= !bit;
                changed.push(t.txid);
            }
        }
        changed
    }

    /// `txid` is dropped for `reason` (with its descendants) if no gateway holds it.
    pub fn let_go(&mut self, txid: &Txid, reason: Reason) -> Vec<Dropped> {
        if self.get(txid).is_none_or(|t| t.holders != 0) {
            return Vec::new();
        }
        self.drop_with_descendants(&[*txid], reason, None)
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
    /// source, first-seen time and the coins it spends.
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
        }
    }

    /// A set from [`Self::encode`]'s bytes at the front of `bytes`, with what follows;
    /// `watched` as for [`Self::add`]. `None` if they are not that.
    pub fn decode(bytes: &[u8], watched: impl Fn(&[u8]) -> bool) -> Option<(Unconfirmed, &[u8])> {
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
            let txid = Tx::parse(&raw).ok()?.txid();
            let mut t = UnconfirmedTx {
                txid,
                raw,
                source,
                first_seen,
                holders: 0,
                spends,
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
        Some((Unconfirmed { txs }, r.0))
    }
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
            Ok(Added::New { dropped: vec![] })
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
        let Ok(Added::New { dropped }) = u.add(&bumped, Source::Own, 4, 1, &l, ours) else {
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
                dropped: super::tests::dropped(&[&unrelated_input], Reason::Replaced, &elsewhere)
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

    #[test]
    fn saved_and_restored_and_damaged_bytes_refused() {
        let (l, pay) = funded();
        let mut u = Unconfirmed::new();
        let spend = tx(&[(txid(&pay).0, 0)], &[(6_000, OTHER), (3_500, OURS)]);
        u.add(&spend, Source::Own, 1_234, 2, &l, ours).unwrap();
        let mut bytes = Vec::new();
        u.encode(&mut bytes);
        bytes.push(0xaa);
        let (back, rest) = Unconfirmed::decode(&bytes, ours).unwrap();
        assert_eq!(rest, [0xaa]);
        let mut expected = u.clone();
        expected.txs[0].holders = 0;
        assert_eq!(back, expected);
        for cut in 0..bytes.len() - 1 {
            assert!(
                Unconfirmed::decode(&bytes[..cut], ours).is_none(),
                "cut at {cut}"
            );
        }
    }
}
