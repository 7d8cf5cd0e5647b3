//! Broadcasting a transaction: it is checked here as a gateway would (one transaction,
//! standard weight and size), sent to every connected gateway that relays, and the
//! application hears how many passed it to their nodes.

use lightwire_proto::session::{RelayStatus, check_tx};
use lightwire_wire::{MAX_TX_LEN, TxResult};

use super::{Core, Engine, Event, REQUEST_TIMEOUT};
use crate::reason::DropReason;
use crate::sync::SyncError;

/// Why a transaction was not sent.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum BroadcastError {
    /// It breaks a relay rule (does not parse, not standard, too heavy).
    #[error("the transaction cannot be relayed: {}", .0.name())]
    Refused(RelayStatus),
    /// Longer than one message carries.
    #[error("the transaction is {0} bytes; at most {MAX_TX_LEN} go in one message")]
    TooLarge(usize),
    /// No connected gateway relays transactions.
    #[error("no connected gateway relays transactions")]
    NoGateway,
}

/// A broadcast waiting for its gateways' answers.
#[derive(Debug)]
pub(super) struct Pending {
    id: u32,
    txid: [u8; 32],
    waiting: Vec<usize>,
    relayed: Vec<usize>,
    refused: Vec<(usize, RelayStatus)>,
    sent_at: lightwire_proto::Millis,
}

impl Engine {
    /// Send signed transaction `tx` to every connected gateway that relays; returns the
    /// request's id and the txid. [`Event::Broadcast`] follows with what they did.
    pub fn broadcast(&mut self, tx: &[u8]) -> Result<(u32, [u8; 32]), BroadcastError> {
        if tx.len() > MAX_TX_LEN {
            return Err(BroadcastError::TooLarge(tx.len()));
        }
        let (status, txid) = check_tx(tx);
        if status != RelayStatus::Relayed {
            return Err(BroadcastError::Refused(status));
        }
        let c = &mut self.core;
        let id = c.relay_ids.next_id();
        let mut waiting = Vec::new();
        for g in 0..c.gateways.len() {
            if !c.gateways[g].ready {
                continue;
            }
            if let Some(conn) = self.conns[g]
                .as_mut()
                .filter(|p| p.is_ready() && p.relays())
                && conn.send_tx(id, tx).is_ok()
            {
                waiting.push(g);
            }
        }
        if waiting.is_empty() {
            return Err(BroadcastError::NoGateway);
        }
        let now = self.core.now;
        self.core.broadcasts.push(Pending {
            id,
            txid,
            waiting,
            relayed: Vec::new(),
            refused: Vec::new(),
            sent_at: now,
        });
        Ok((id, txid))
    }
}

impl Core {
    /// A gateway's `tx_result`.
    pub(super) fn on_tx_result(&mut self, g: usize, r: &TxResult) -> Result<(), DropReason> {
        let Some(i) = self
            .broadcasts
            .iter()
            .position(|b| b.id == r.id && b.waiting.contains(&g))
        else {
            return Err(DropReason::Sync(SyncError::UnexpectedAnswer { id: r.id }));
        };
        let b = &mut self.broadcasts[i];
        b.waiting.retain(|&w| w != g);
        match r.status {
            RelayStatus::Relayed => b.relayed.push(g),
            s => b.refused.push((g, s)),
        }
        self.finish_broadcasts();
        Ok(())
    }

    /// Gateway `g` is gone: it relays nothing more.
    pub(super) fn relay_gateway_gone(&mut self, g: usize) {
        for b in &mut self.broadcasts {
            if b.waiting.contains(&g) {
                b.waiting.retain(|&w| w != g);
                b.refused.push((g, RelayStatus::Busy));
            }
        }
        self.finish_broadcasts();
    }

    /// Broadcasts every gateway answered (or that waited too long) are reported.
    pub(super) fn finish_broadcasts(&mut self) {
        let now = self.now;
        let mut i = 0;
        while i < self.broadcasts.len() {
            let b = &mut self.broadcasts[i];
            if b.sent_at + REQUEST_TIMEOUT <= now {
                let late: Vec<usize> = b.waiting.drain(..).collect();
                b.refused
                    .extend(late.into_iter().map(|g| (g, RelayStatus::Busy)));
            }
            if b.waiting.is_empty() {
                let b = self.broadcasts.remove(i);
                self.events.push_back(Event::Broadcast {
                    id: b.id,
                    txid: b.txid,
                    relayed: b.relayed,
                    refused: b.refused,
                });
            } else {
                i += 1;
            }
        }
    }

    /// When a broadcast stops waiting for its gateways.
    pub(super) fn broadcast_deadline(&self) -> Option<lightwire_proto::Millis> {
        self.broadcasts
            .iter()
            .map(|b| b.sent_at + REQUEST_TIMEOUT)
            .min()
    }
}
