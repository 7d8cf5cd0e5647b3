//! The silent-payment task: a receiver's scan of the best chain ([`crate::silent_scan`])
//! driven over the gateways. Its requests go to the gateways it names; a gateway it finds
//! wrong is dropped and marked bad (`DropReason::Silent`); each output found is told to
//! the application ([`Event::SilentPayment`]) and handed to the wallet, which watches its
//! script from that block on (so that it is a coin like any other: in the balance, its
//! spend found, withdrawn by a reorganisation). A dispute nobody can settle is told
//! ([`Event::SilentStalled`]) and asked again when the chain moves.
//!
//! The scan stands on our stored filter headers: it goes no higher than the last one
//! stored (and, like the wallet's scan, starts after a checkpoint start's first block,
//! whose filter cannot be checked). Its progress is saved with the store (no key: the
//! receiver's id and the block it reached), and a receiver started again for the same
//! keys goes on from it.

use lightwire_chain::BlockHash;
use lightwire_primitives::FilterHeader;
use lightwire_proto::DataRequest;
use lightwire_proto::Millis;
use lightwire_wallet::silent::Receiver;
use lightwire_wire::{BlockPiece, FilterKind, Filters};

use super::ctx::{Broke, Conns, Ctx, Effect, ready};
use super::event::Event;
use super::gateway::GatewayState;
use super::task::{Task, View, timeout};
use crate::filters::FilterAnswer;
use crate::ids::{GatewayId, TaskId};
use crate::reason::DropReason;
use crate::silent_scan::{Presence, Range, Scanning, Serves, SilentAsk, SilentEvent};
use crate::tweak_dispute::TweakAsk;

/// The silent-payment task's state.
#[derive(Default)]
pub struct SilentTask {
    /// The receiver's scan, once the application started one (a trait object: see
    /// [`Scanning`]).
    pub scan: Option<Box<dyn Scanning>>,
    /// A buffer for the requests in flight (kept: no allocation per call).
    in_flight: Vec<crate::ids::GivenUp>,
    /// The progress saved by an earlier session (checked on our best chain), for the
    /// receiver that will be started.
    pub saved: Option<crate::silent_scan::Progress>,
    /// The shell runs the filter checks elsewhere (see [`crate::silent_scan::ScanJob`]).
    pub offload: bool,
    /// The receiver's keys to keep in the store (`Some(None)`: to delete), when the
    /// application asked for that since they were last saved.
    pub keys_to_save: Option<Option<Vec<u8>>>,
    /// Where the receiver's spend key derives from, if the application said: given to
    /// the wallet with each output found, for the signer.
    pub spend_origin: Option<lightwire_wallet::descriptor::KeyOrigin>,
}

impl SilentTask {
    /// Scan for `receiver` from block `from` (replacing any scan under way); `base` is the
    /// store's first height.
    pub fn start(&mut self, ctx: &mut Ctx, receiver: Receiver, from: u32, base: u32) {
        if let Some(old) = self.scan.take() {
            self.in_flight.clear();
            old.in_flight_into(&mut self.in_flight);
            ctx.give_up_all(self.in_flight.drain(..));
        }
        // As the wallet's scan: a store from a checkpoint cannot check its first filter.
        let from = if base > 0 { from.max(base + 1) } else { from };
        let n = ctx.gateways.len();
        let mut scan = Box::new(crate::silent_scan::SilentScan::new(receiver, from, n));
        // What an earlier session scanned for this receiver is not scanned again.
        if let Some(p) = &self.saved {
            scan.resume(p);
        }
        scan.offload(self.offload);
        self.scan = Some(scan);
        ctx.timers.touch(TaskId::Silent, ctx.now);
    }

    /// Read the scan's events: a gateway found wrong is dropped (at once when it is `from`,
    /// the one whose message is handled: the `Err`), outputs found go to the wallet.
    fn told(&mut self, ctx: &mut Ctx, from: Option<GatewayId>) -> Result<(), DropReason> {
        let Some(scan) = self.scan.as_mut() else {
            return Ok(());
        };
        let mut own = None;
        while let Some(e) = scan.poll_event() {
            match e {
                SilentEvent::Bad(g, fault) => {
                    let why = DropReason::Silent(fault);
                    if Some(g) == from {
                        own.get_or_insert(why);
                    } else {
                        ctx.drop_later(g, why);
                    }
                }
                SilentEvent::Found {
                    height,
                    hash,
                    payments,
                    spend,
                } => {
                    for payment in &payments {
                        ctx.events.push_back(Event::SilentPayment {
                            height: Some(height),
                            hash: Some(hash),
                            payment: *payment,
                        });
                    }
                    ctx.effects.push_back(Effect::SilentFound {
                        height,
                        payments,
                        spend,
                        origin: self.spend_origin.clone(),
                    });
                }
                SilentEvent::Stalled { height } => {
                    ctx.events.push_back(Event::SilentStalled { height })
                }
            }
        }
        own.map_or(Ok(()), Err)
    }

    /// An answer for the scan from `g`: one not in flight is the rest of a request given
    /// up, or a fault.
    fn answer(
        &mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        id: u32,
        last: bool,
        read: impl FnOnce(&mut dyn Scanning),
    ) -> Result<(), DropReason> {
        let Some(scan) = self.scan.as_mut().filter(|s| s.is_in_flight(g, id)) else {
            return ctx.given_up_answer(g, id, last);
        };
        ctx.timers.touch(TaskId::Silent, ctx.now);
        read(scan.as_mut());
        self.told(ctx, Some(g))
    }

    /// A `tweak_headers` message from `g`.
    pub fn on_span(
        &mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        m: &FilterAnswer<'_>,
    ) -> Result<(), DropReason> {
        self.answer(ctx, g, m.id, m.flags.last, |s| s.on_span(g, m))
    }

    /// A `tweaks` message from `g`.
    pub fn on_tweaks(
        &mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        m: &Filters<'_>,
    ) -> Result<(), DropReason> {
        self.answer(ctx, g, m.id, m.flags.last, |s| s.on_tweaks(g, m))
    }

    /// A `filters` message from `g` answering the scan.
    pub fn on_filters(
        &mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        m: &Filters<'_>,
    ) -> Result<(), DropReason> {
        self.answer(ctx, g, m.id, m.flags.last, |s| s.on_filters(g, m))
    }

    /// A `block` message from `g` answering the scan.
    pub fn on_block(
        &mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        p: &BlockPiece<'_>,
    ) -> Result<(), DropReason> {
        self.answer(ctx, g, p.id, p.last, |s| s.on_block(g, p))
    }

    /// A `spent_from` message from `g`.
    pub fn on_spent_from(
        &mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        p: &BlockPiece<'_>,
    ) -> Result<(), DropReason> {
        self.answer(ctx, g, p.id, p.last, |s| s.on_spent_from(g, p))
    }

    /// The answer to a filter check handed out: what it told (a list proven wrong) is
    /// acted on.
    pub fn on_scanned(
        &mut self,
        ctx: &mut Ctx,
        tag: u32,
        height: u32,
        result: crate::silent_scan::Scanned,
    ) {
        if let Some(scan) = self.scan.as_mut() {
            scan.on_scanned(tag, height, result);
        }
        let _ = self.told(ctx, None);
    }

    /// The scan's progress to save, when it moved since it was last saved.
    pub fn progress_to_save(&mut self) -> Option<Vec<u8>> {
        self.scan.as_mut()?.save()
    }

    /// Our best chain left its blocks above `fork`.
    pub fn reorg(&mut self, ctx: &mut Ctx, fork: u32) {
        if self.saved.is_some_and(|p| p.next > fork + 1) {
            self.saved = None;
        }
        if let Some(scan) = self.scan.as_mut() {
            ctx.give_up_all(scan.reorg(fork));
        }
    }

    /// A gateway's new tip: what waited for the chain to move is asked again.
    pub fn unblock(&mut self) {
        if let Some(scan) = self.scan.as_mut() {
            scan.unblock();
        }
    }

    /// The heights of block hashes and filter headers to read from the store next (see
    /// [`crate::silent_scan::SilentScan::need_data`]).
    pub fn need_data(&mut self, ctx: &Ctx) -> Option<(u32, u32)> {
        let top = ctx.stored_filters?;
        self.scan.as_mut()?.need_data(top)
    }

    /// What [`Self::need_data`] asked for.
    pub fn on_data(&mut self, first: u32, hashes: &[BlockHash], headers: &[FilterHeader]) {
        if let Some(scan) = self.scan.as_mut() {
            scan.on_data(first, hashes, headers);
        }
    }
}

impl Task for SilentTask {
    fn schedule(&mut self, ctx: &mut Ctx, conns: &mut Conns, _: &View) -> Result<(), Broke> {
        let Some(scan) = self.scan.as_mut() else {
            return Ok(());
        };
        if ctx.stopped {
            return Ok(());
        }
        loop {
            let was_idle = !scan.waiting();
            let gateways = &ctx.gateways;
            let presence = |g: GatewayId| {
                let gw = &gateways[g];
                match gw.state {
                    _ if gw.ready && conns[g].as_ref().is_some_and(|c| c.is_ready()) => {
                        Presence::Ready
                    }
                    // An honest gateway a moment late must not leave a liar alone; its
                    // handshake is bounded (`PeerError::HandshakeTimeout`).
                    GatewayState::Handshaking => Presence::Coming,
                    _ => Presence::Absent,
                }
            };
            let serves = |g: GatewayId, what: Serves| {
                let Some(c) = conns[g].as_ref() else {
                    return false;
                };
                match what {
                    Serves::Tweaks => c.serves_tweaks(),
                    Serves::Filters => gateways[g].filters_usable(),
                    Serves::Blocks => c.serves_blocks(),
                }
            };
            let Some((g, ask)) = scan.next_ask(ctx.now, &presence, &serves) else {
                break;
            };
            let Some(conn) = ready(conns, g) else {
                break;
            };
            let sent = match ask {
                SilentAsk::Range {
                    what,
                    id,
                    first,
                    stop,
                } => {
                    let (kind, request) = match what {
                        Range::TweakHeaders => (FilterKind::Tweaks, DataRequest::Headers),
                        Range::Tweaks => (FilterKind::Tweaks, DataRequest::Data),
                        Range::Filters => (FilterKind::Basic, DataRequest::Data),
                    };
                    conn.request_data(kind, request, id, first, stop)
                }
                SilentAsk::Fetch(TweakAsk::Block { id, hash }) => conn.request_block(id, hash),
                SilentAsk::Fetch(TweakAsk::SpentFrom { id, hash }) => {
                    conn.request_spent_from(id, hash)
                }
                SilentAsk::Fetch(TweakAsk::Span { id, first, stop }) => {
                    conn.request_data(FilterKind::Tweaks, DataRequest::Headers, id, first, stop)
                }
            };
            sent.map_err(|e| (g, e))?;
            if was_idle {
                ctx.timers.touch(TaskId::Silent, ctx.now);
            }
        }
        // A dispute that ended while asking (nobody left to give the proof) is told.
        let _ = self.told(ctx, None);
        Ok(())
    }

    fn deadline(&self, ctx: &Ctx) -> Option<Millis> {
        let scan = self.scan.as_ref()?;
        let answer = ctx.timers.deadline(TaskId::Silent, scan.waiting());
        lightwire_proto::time::earliest(answer, scan.wake_at())
    }

    /// Every gateway the scan waited on too long is dropped (not marked bad: a slow
    /// network). A wake-up alone drops nobody: the next schedule asks again.
    fn timed_out(&mut self, ctx: &mut Ctx) -> Vec<(GatewayId, DropReason)> {
        let Some(scan) = self.scan.as_deref() else {
            return Vec::new();
        };
        let answer = ctx.timers.deadline(TaskId::Silent, scan.waiting());
        if answer.is_none_or(|d| d > ctx.now) {
            return Vec::new();
        }
        self.in_flight.clear();
        scan.in_flight_into(&mut self.in_flight);
        let mut gone: Vec<(GatewayId, DropReason)> = Vec::new();
        for &(g, _) in &self.in_flight {
            if !gone.iter().any(|(x, _)| *x == g) {
                gone.push(timeout(g));
            }
        }
        gone
    }

    fn gateway_gone(&mut self, ctx: &mut Ctx, g: GatewayId) {
        if let Some(scan) = self.scan.as_mut() {
            scan.gateway_gone(g);
        }
        let _ = self.told(ctx, None);
    }
}
