//! The relay task: a transaction is checked here as a gateway would (one transaction,
//! standard weight and size), sent to every connected gateway that relays, and the
//! application hears how many passed it to their nodes. One that at least one gateway
//! relayed goes to the wallet (an effect), which keeps it as unconfirmed if it is the
//! wallet's: only then, so that a transaction every node refused never shows.

use lightwire_primitives::Txid;
use lightwire_proto::Millis;
use lightwire_proto::session::{RelayStatus, check_tx};
use lightwire_wire::{MAX_TX_LEN, TxResult};

use super::ctx::{Broke, Conns, Ctx, Effect, REQUEST_TIMEOUT, ready};
use super::event::Event;
use super::task::{Task, View};
use crate::ids::{GatewayId, Ids, TaskId};
use crate::reason::DropReason;

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
struct Pending {
    id: u32,
    txid: Txid,
    /// The transaction, for the wallet once a gateway relayed it.
    tx: Vec<u8>,
    waiting: Vec<GatewayId>,
    relayed: Vec<GatewayId>,
    refused: Vec<(GatewayId, RelayStatus)>,
    sent_at: Millis,
}

/// The relay task's state.
pub struct Relay {
    broadcasts: Vec<Pending>,
    ids: Ids,
}

impl Relay {
    /// Nothing sent yet.
    pub fn new() -> Relay {
        Relay {
            broadcasts: Vec::new(),
            ids: Ids::new(TaskId::Relay),
        }
    }

    /// Send signed transaction `tx` to every connected gateway that relays; returns the
    /// request's id and the txid.
    pub fn broadcast(
        &mut self,
        ctx: &mut Ctx,
        conns: &mut Conns,
        tx: &[u8],
    ) -> Result<(u32, Txid), BroadcastError> {
        if tx.len() > MAX_TX_LEN {
            return Err(BroadcastError::TooLarge(tx.len()));
        }
        let (status, txid) = check_tx(tx);
        let txid = Txid(txid);
        if status != RelayStatus::Relayed {
            return Err(BroadcastError::Refused(status));
        }
        let id = self.ids.next_id();
        let waiting: Vec<GatewayId> = ctx
            .gateways
            .ids()
            .filter(|&g| {
                ctx.gateways[g].ready
                    && ready(conns, g)
                        .filter(|c| c.relays())
                        .is_some_and(|c| c.send_tx(id, tx).is_ok())
            })
            .collect();
        if waiting.is_empty() {
            return Err(BroadcastError::NoGateway);
        }
        self.broadcasts.push(Pending {
            id,
            txid,
            tx: tx.to_vec(),
            waiting,
            relayed: Vec::new(),
            refused: Vec::new(),
            sent_at: ctx.now,
        });
        Ok((id, txid))
    }

    /// A gateway's `tx_result`.
    pub fn on_result(
        &mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        r: &TxResult,
    ) -> Result<(), DropReason> {
        let Some(b) = self
            .broadcasts
            .iter_mut()
            .find(|b| b.id == r.id && b.waiting.contains(&g))
        else {
            // Asked and given up after the wait (counted as refused): let go; anything
            // else was never asked for.
            return ctx.given_up_answer(g, r.id, true);
        };
        b.waiting.retain(|&w| w != g);
        match r.status {
            RelayStatus::Relayed => b.relayed.push(g),
            s => b.refused.push((g, s)),
        }
        self.finish(ctx);
        Ok(())
    }

    /// Broadcasts every gateway answered (or that waited too long) are reported.
    pub fn finish(&mut self, ctx: &mut Ctx) {
        let now = ctx.now;
        let mut i = 0;
        while i < self.broadcasts.len() {
            let b = &mut self.broadcasts[i];
            if b.sent_at + REQUEST_TIMEOUT <= now {
                let late: Vec<GatewayId> = b.waiting.drain(..).collect();
                for &g in &late {
                    ctx.gateways[g].give_up(b.id);
                }
                b.refused
                    .extend(late.into_iter().map(|g| (g, RelayStatus::Busy)));
            }
            if b.waiting.is_empty() {
                let b = self.broadcasts.remove(i);
                if !b.relayed.is_empty() {
                    ctx.effects.push_back(Effect::Relayed {
                        tx: b.tx,
                        holders: b.relayed.iter().fold(0, |h, g| h | g.bit()),
                    });
                }
                ctx.events.push_back(Event::Broadcast {
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
}

impl Task for Relay {
    /// Transactions are sent when the application broadcasts them, not scheduled.
    fn schedule(&mut self, _: &mut Ctx, _: &mut Conns, _: &View) -> Result<(), Broke> {
        Ok(())
    }

    fn deadline(&self, _: &Ctx) -> Option<Millis> {
        self.broadcasts
            .iter()
            .map(|b| b.sent_at + REQUEST_TIMEOUT)
            .min()
    }

    /// Broadcasts that waited too long are reported; nobody is dropped (a gateway that
    /// does not answer a `tx` is counted as refusing it).
    fn timed_out(&mut self, ctx: &mut Ctx) -> Vec<(GatewayId, DropReason)> {
        self.finish(ctx);
        Vec::new()
    }

    fn gateway_gone(&mut self, ctx: &mut Ctx, g: GatewayId) {
        for b in &mut self.broadcasts {
            if b.waiting.contains(&g) {
                b.waiting.retain(|&w| w != g);
                b.refused.push((g, RelayStatus::Busy));
            }
        }
        self.finish(ctx);
    }
}
