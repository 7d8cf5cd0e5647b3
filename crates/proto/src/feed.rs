//! The gateway side of the mempool digest, per session: what the client subscribed with
//! (its salt), how far through the served mempool's changes it has been sent (a cursor),
//! and the transactions it asked for. [`crate::session::Session`] holds one and asks it
//! for a message between answers, as it does for `tx_result`s: a digest goes out as soon
//! as the mempool changes, never held behind a long answer.
//!
//! The served mempool ([`crate::session::Served`]) numbers its changes; a session reads
//! those after its cursor. A snapshot is the transactions held that came up to the head
//! when it started (its last message says `snapshot_end`, even with no entry), then the
//! changes from there (a transaction that came during the snapshot may be sent twice: the
//! client takes it once). One too far behind (the changes
//! it has not been sent are no longer held) starts over: a digest with `reset`, then a
//! snapshot.

use std::cell::Cell;
use std::collections::VecDeque;

use lightwire_filter::txset::tx_set;
use lightwire_primitives::Tx;
use lightwire_wire::sync::MAX_PENDING_REQUESTS;
use lightwire_wire::{
    DigestWriter, EncodeError, GetMempoolTx, MAX_TX_LEN, MempoolSubscribe, MempoolTx, Message,
    Removal, SALT_LEN,
};

use crate::session::{Served, Violation};

/// A change to the served mempool, lent to a session.
#[derive(Clone, Copy, Debug)]
pub enum MempoolChange<'a> {
    /// A transaction entered it (with its witness data).
    Added {
        /// Its txid (internal byte order).
        txid: &'a [u8; 32],
        /// The transaction.
        tx: &'a [u8],
        /// Its BIP352 tweak, when the served mempool has one for it (it has a taproot
        /// output and the scripts its inputs spend were found).
        tweak: Option<&'a [u8; 33]>,
    },
    /// A transaction left it.
    Removed {
        /// Its txid.
        txid: &'a [u8; 32],
        /// Why.
        reason: Removal,
    },
}

/// A session's mempool subscription (see the module documentation).
#[derive(Debug, Default)]
pub struct Feed {
    /// The client's salt, once it subscribed.
    salt: Option<[u8; SALT_LEN]>,
    /// It asked for each transaction's tweak too.
    tweaks: bool,
    /// The number of the last change (or held transaction, in a snapshot) sent.
    cursor: u64,
    /// While a snapshot is sent: the head it goes up to.
    snapshot_to: Option<u64>,
    /// The next digest says `reset`.
    reset_due: bool,
    /// The mempool may have changed since the last digest.
    due: bool,
    /// `get_mempool_tx` requests to answer, in order.
    asked: VecDeque<GetMempoolTx>,
    /// Scratch for a transaction's item hashes and its set (kept for their capacity).
    items: Vec<u64>,
    set: Vec<u8>,
}

impl Feed {
    /// A `mempool_subscribe`: from everything held now (`snapshot`) or from now on. A
    /// second one starts over with its salt (and `reset`).
    pub fn subscribe<C: Served>(
        &mut self,
        m: &MempoolSubscribe,
        chain: &C,
    ) -> Result<(), Violation> {
        if !chain.serves_mempool() {
            return Err(Violation::MempoolNotServed);
        }
        self.reset_due = self.salt.is_some();
        self.salt = Some(m.salt);
        self.tweaks = m.tweaks;
        let head = chain.mempool_head();
        self.cursor = if m.snapshot { 0 } else { head };
        self.snapshot_to = m.snapshot.then_some(head);
        self.due = true;
        Ok(())
    }

    /// A `get_mempool_tx`, answered in turn.
    pub fn ask<C: Served>(&mut self, m: GetMempoolTx, chain: &C) -> Result<(), Violation> {
        if !chain.serves_mempool() {
            return Err(Violation::MempoolNotServed);
        }
        if self.asked.len() >= MAX_PENDING_REQUESTS {
            return Err(Violation::TooManyRequests);
        }
        self.asked.push_back(m);
        Ok(())
    }

    /// The served mempool changed: a digest may be due.
    pub fn changed(&mut self) {
        self.due |= self.salt.is_some();
    }

    /// Whether a message may be waiting.
    pub fn has_output(&self) -> bool {
        !self.asked.is_empty() || self.due
    }

    /// Write the next message into `out`: an answer to `get_mempool_tx`, or a digest of
    /// the changes not sent yet (as many as fit); `None` when there is nothing to send.
    pub fn next_message<C: Served>(
        &mut self,
        chain: &C,
        out: &mut [u8],
    ) -> Result<Option<usize>, EncodeError> {
        if let Some(m) = self.asked.pop_front() {
            let answer = chain.with_mempool_tx(&m.txid, |tx| {
                let tx = if tx.len() <= MAX_TX_LEN { tx } else { &[][..] };
                let answer = MempoolTx {
                    id: m.id,
                    not_found: tx.is_empty(),
                    tx,
                };
                Message::MempoolTx(answer).encode(out)
            });
            return match answer {
                Some(written) => written.map(Some),
                None => Message::MempoolTx(MempoolTx::not_found(m.id))
                    .encode(out)
                    .map(Some),
            };
        }
        let Some(salt) = self.salt.filter(|_| self.due) else {
            return Ok(None);
        };
        let head = chain.mempool_head();
        let tweaks = self.tweaks;
        let Feed {
            cursor,
            snapshot_to,
            reset_due,
            items,
            set,
            ..
        } = self;
        let mut w = DigestWriter::new(out, *reset_due)?;
        // Shared with the closure that writes each change.
        let (last, complete) = (Cell::new(*cursor), Cell::new(true));
        let mut write = |n: u64, change: MempoolChange<'_>| {
            let fits = match change {
                MempoolChange::Added { txid, tx, tweak } => {
                    match Tx::parse(tx) {
                        Ok(t) => tx_set(&t, &salt, items, set),
                        // The served mempool holds parsed transactions only; an empty set
                        // if not (it matches nothing).
                        Err(_) => set.clear(),
                    }
                    w.added(txid, set, tweak.filter(|_| tweaks))
                }
                MempoolChange::Removed { txid, reason } => w.removed(txid, reason),
            };
            if fits {
                last.set(n);
            }
            complete.set(complete.get() && fits);
            fits
        };
        let mut snapshot_ends = false;
        if let Some(upto) = *snapshot_to {
            chain.mempool_held(last.get(), upto, &mut write);
            if complete.get() {
                *snapshot_to = None;
                last.set(upto);
                snapshot_ends = true;
            }
        }
        let behind = complete.get()
            && snapshot_to.is_none()
            && !chain.mempool_changes(last.get(), &mut write);
        *cursor = last.get();
        if behind {
            // Too far behind: `reset`, then a snapshot from scratch (with this message,
            // when nothing is in it yet; after it otherwise).
            *reset_due = true;
            *snapshot_to = Some(head);
            *cursor = 0;
            if w.count() == 0 {
                return self.next_message(chain, out);
            }
            return Ok(Some(w.finish()));
        }
        if complete.get() && *cursor >= head {
            // Everything was sent: nothing is due until the mempool changes.
            self.due = false;
        }
        if snapshot_ends {
            w.end_snapshot();
        } else if w.count() == 0 && !*reset_due {
            return Ok(None);
        }
        self.reset_due = false;
        Ok(Some(w.finish()))
    }
}
