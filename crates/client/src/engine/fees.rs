//! The fee-rates task: `feeRates()` asks every connected gateway that serves them for its
//! node's estimates (1, 6 and 144 blocks) and, once all answered (or after
//! [`REQUEST_TIMEOUT`]), reports them together ([`Event::FeeRates`]) with the figure the
//! application should use for each target ([`combine`]).
//!
//! What they are worth: a gateway may say anything. Each answer is bounded to what nodes
//! relay and what is sane ([`FeeRate::MIN_RELAY`] to [`FeeRate::MAX`]: 0.1 to 10,000 sat/vB),
//! and the figure is the lower median across gateways: one gateway alone among three cannot
//! move it out of the others' range, and of two that disagree the lower is taken, since a
//! rate too low can be bumped (BIP125) and one too high is money lost. A lone gateway's
//! answer is its own. No gateway is dropped for its estimate: estimates differ honestly.

use lightwire_proto::Millis;
use lightwire_wallet::spend::FeeRate;
use lightwire_wire::{FeeRates, FeeSource};

use super::ctx::{Broke, Conns, Ctx, REQUEST_TIMEOUT, ready};
use super::event::Event;
use super::task::{Task, View};
use crate::ids::{GatewayId, Ids, TaskId};
use crate::reason::DropReason;

/// One gateway's answer: where its rates come from, and sat/kvB for 1, 6 and 144 blocks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct FeeAnswer {
    /// The gateway.
    pub gateway: GatewayId,
    /// Its source.
    pub source: FeeSource,
    /// Its rates, as it said them (not bounded).
    pub rates: [Option<u64>; 3],
}

/// A `feeRates()` waiting for its gateways.
#[derive(Debug)]
struct Pending {
    id: u32,
    waiting: Vec<GatewayId>,
    answers: Vec<FeeAnswer>,
    sent_at: Millis,
}

/// The fee-rates task's state.
pub struct Fees {
    asks: Vec<Pending>,
    ids: Ids,
}

impl Default for Fees {
    fn default() -> Fees {
        Fees {
            asks: Vec::new(),
            ids: Ids::new(TaskId::Fees),
        }
    }
}

/// The figure for each target from the gateways' `answers`: each rate bounded to
/// [`FeeRate::MIN_RELAY`]..=[`FeeRate::MAX`], then the lower median of those given; a
/// longer target never above a shorter one. Sat/kvB.
pub fn combine(answers: &[FeeAnswer]) -> [Option<u64>; 3] {
    let mut out = [None; 3];
    for (t, slot) in out.iter_mut().enumerate() {
        let mut rates: Vec<u64> = answers
            .iter()
            .filter_map(|a| a.rates[t])
            .map(|r| r.clamp(FeeRate::MIN_RELAY.0, FeeRate::MAX.0))
            .collect();
        rates.sort_unstable();
        *slot = rates.get(rates.len().saturating_sub(1) / 2).copied();
    }
    // Waiting longer never costs more.
    for t in 1..3 {
        if let (Some(short), Some(long)) = (out[t - 1], out[t]) {
            out[t] = Some(long.min(short));
        }
    }
    out
}

impl Fees {
    /// Ask every connected gateway that serves fee rates; the request's id, or `None`
    /// when none does.
    pub fn ask(&mut self, ctx: &mut Ctx, conns: &mut Conns) -> Option<u32> {
        let id = self.ids.next_id();
        let waiting: Vec<GatewayId> = ctx
            .gateways
            .ids()
            .filter(|&g| {
                ctx.gateways[g].ready
                    && ready(conns, g)
                        .filter(|c| c.serves_fees())
                        .is_some_and(|c| c.get_fee_rates(id).is_ok())
            })
            .collect();
        if waiting.is_empty() {
            return None;
        }
        self.asks.push(Pending {
            id,
            waiting,
            answers: Vec::new(),
            sent_at: ctx.now,
        });
        Some(id)
    }

    /// A gateway's `fee_rates`: one it was not asked for is a fault.
    pub fn on_rates(
        &mut self,
        ctx: &mut Ctx,
        g: GatewayId,
        m: &FeeRates,
    ) -> Result<(), DropReason> {
        let Some(p) = self
            .asks
            .iter_mut()
            .find(|p| p.id == m.id && p.waiting.contains(&g))
        else {
            // Asked and given up after the wait (a slow network): let go; anything else
            // was never asked for.
            return ctx.given_up_answer(g, m.id, true);
        };
        p.waiting.retain(|&w| w != g);
        p.answers.push(FeeAnswer {
            gateway: g,
            source: m.source,
            rates: m.rates,
        });
        self.finish(ctx);
        Ok(())
    }

    /// Asks every gateway answered (or that waited too long) are reported.
    fn finish(&mut self, ctx: &mut Ctx) {
        let now = ctx.now;
        let mut i = 0;
        while i < self.asks.len() {
            let p = &mut self.asks[i];
            if p.sent_at + REQUEST_TIMEOUT <= now {
                for g in p.waiting.drain(..) {
                    ctx.gateways[g].give_up(p.id);
                }
            }
            if p.waiting.is_empty() {
                let p = self.asks.remove(i);
                ctx.events.push_back(Event::FeeRates {
                    id: p.id,
                    rates: combine(&p.answers),
                    answers: p.answers,
                });
            } else {
                i += 1;
            }
        }
    }
}

impl Task for Fees {
    /// Asked when the application asks, not scheduled.
    fn schedule(&mut self, _: &mut Ctx, _: &mut Conns, _: &View) -> Result<(), Broke> {
        Ok(())
    }

    fn deadline(&self, _: &Ctx) -> Option<Millis> {
        self.asks.iter().map(|p| p.sent_at + REQUEST_TIMEOUT).min()
    }

    /// Asks that waited too long are reported with the answers they have; nobody is
    /// dropped for not answering in time.
    fn timed_out(&mut self, ctx: &mut Ctx) -> Vec<(GatewayId, DropReason)> {
        self.finish(ctx);
        Vec::new()
    }

    fn gateway_gone(&mut self, ctx: &mut Ctx, g: GatewayId) {
        for p in &mut self.asks {
            p.waiting.retain(|&w| w != g);
        }
        self.finish(ctx);
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn answer(g: u8, rates: [Option<u64>; 3]) -> FeeAnswer {
        FeeAnswer {
            gateway: GatewayId(g.into()),
            source: FeeSource::SmartFee,
            rates,
        }
    }

    #[test]
    fn the_figure_is_the_bounded_lower_median_and_never_rises_with_the_target() {
        // One gateway: its own, bounded.
        assert_eq!(
            combine(&[answer(0, [Some(20_000), Some(5), None])]),
            [Some(20_000), Some(100), None]
        );
        // Two that disagree wildly: the lower (bounded), each still shown by the caller.
        let wild = [
            answer(0, [Some(12_000), Some(8_000), Some(2_000)]),
            answer(1, [Some(u64::MAX - 1), Some(900_000_000), Some(1)]),
        ];
        assert_eq!(combine(&wild), [Some(12_000), Some(8_000), Some(100)]);
        // Three: one liar cannot move the figure out of the honest two's range.
        let three = [
            answer(0, [Some(10_000), Some(5_000), Some(1_000)]),
            answer(1, [Some(11_000), Some(6_000), Some(2_000)]),
            answer(2, [Some(10_000_000), Some(10_000_000), Some(10_000_000)]),
        ];
        assert_eq!(combine(&three), [Some(11_000), Some(6_000), Some(2_000)]);
        // A longer target above a shorter one is brought down to it.
        assert_eq!(
            combine(&[answer(0, [Some(3_000), Some(9_000), Some(4_000)])]),
            [Some(3_000), Some(3_000), Some(3_000)]
        );
        assert_eq!(combine(&[]), [None; 3]);
    }
}
