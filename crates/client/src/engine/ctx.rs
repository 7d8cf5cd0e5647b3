//! What every task shares and the engine owns: the clock, the gateways, the queues of
//! events (for the application), actions (for the shell) and effects (between tasks), the
//! request timers, and the store's filter-header tip. Tasks take it by `&mut` in each
//! call; none keeps a reference to another task.

use core::time::Duration;
use lightwire_primitives::FilterHeader;
use std::collections::VecDeque;

use lightwire_chain::{BlockHash, Entry, Params};
use lightwire_noise::SecretKey;

use crate::dispute::Contested;
use lightwire_proto::initiator::Limits;
use lightwire_proto::{Initiator, Millis};
use lightwire_store::Tip;

use super::event::{Action, Counters, Event};
use super::gateway::{Gateway, GatewayState, Gateways, Rng, Standing};
use crate::ids::{GatewayId, GivenUp, TaskId};
use crate::reason::DropReason;
use crate::sync::SyncError;

/// Drop a gateway whose answer to a request makes no progress for this long (it may
/// still answer pings).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

pub use super::gateway::Conns;

/// A gateway whose connection refused a request (it is dropped as broken).
pub type Broke = (GatewayId, lightwire_proto::PeerError);

/// The connection to gateway `g`, if it is ready for requests.
pub fn ready(conns: &mut Conns, g: GatewayId) -> Option<&mut Initiator> {
    conns[g].as_mut().filter(|c| c.is_ready())
}

/// What one task tells the others, carried by the engine after the input that caused it.
#[derive(Clone, Debug)]
pub enum Effect {
    /// Headers were validated up to this block: filter headers may be asked up to it.
    Validated {
        /// Its height.
        height: u32,
        /// Its hash.
        hash: BlockHash,
    },
    /// The best chain switched branches at `fork`: what anyone found above it is gone.
    Reorg {
        /// The tip replaced.
        old: Entry,
        /// The new tip.
        new: Tip,
        /// The last block both branches share.
        fork: u32,
    },
    /// A gateway's filter header at `height` is not ours (it says `theirs`).
    Conflict {
        /// The gateway.
        gateway: GatewayId,
        /// The height.
        height: u32,
        /// Its filter header there.
        theirs: FilterHeader,
    },
    /// A dispute found our filter headers wrong from `height` on: `prev` is the right
    /// one at `height - 1`, of block `hash`.
    OursWrong {
        /// The first wrong height.
        height: u32,
        /// The right filter header below it.
        prev: FilterHeader,
        /// The block at `height - 1`.
        hash: BlockHash,
    },
    /// A dispute contested a block (see [`Ctx::contested`]): the scan matches its filter
    /// beside ours.
    Contested {
        /// Its height.
        height: u32,
        /// Its hash.
        hash: BlockHash,
    },
    /// The scan matched a block (the wallets whose scripts it matched fetch it).
    Matched {
        /// Its height.
        height: u32,
        /// Its hash.
        hash: BlockHash,
        /// Whose scripts it matched.
        owners: crate::scan::Owners,
    },
    /// A transaction broadcast was passed to their nodes by the gateways `holders` (one
    /// bit each, at least one): the wallet takes it as unconfirmed if it is the wallet's.
    Relayed {
        /// The transaction.
        tx: Vec<u8>,
        /// The gateways that relayed it.
        holders: u64,
    },
    /// The silent-payment scan found outputs paying the receiver in block `height`: the
    /// wallet watches their scripts from there.
    SilentFound {
        /// The block's height.
        height: u32,
        /// The outputs.
        payments: Vec<lightwire_wallet::silent_block::Payment>,
        /// The receiver's spend public key.
        spend: [u8; 33],
        /// Where the spend key derives from, if the application said.
        origin: Option<lightwire_wallet::descriptor::KeyOrigin>,
    },
    /// A gateway is gone: it holds none of the wallet's unconfirmed transactions now.
    Unheld {
        /// The gateway.
        gateway: GatewayId,
    },
}

/// When each task was last heard from on its requests: a task waiting on an answer that
/// brought nothing for [`REQUEST_TIMEOUT`] drops the gateways it waits on. One table, as
/// quinn-proto's `TimerTable`.
#[derive(Clone, Debug)]
pub struct Timers {
    heard: [Millis; TaskId::ALL.len()],
}

impl Timers {
    /// Every timer heard at `now`.
    pub fn new(now: Millis) -> Timers {
        Timers {
            heard: [now; TaskId::ALL.len()],
        }
    }

    /// `task`'s requests were sent, or brought something, at `now`.
    pub fn touch(&mut self, task: TaskId, now: Millis) {
        self.heard[task.index()] = now;
    }

    /// When `task`'s wait runs out, if it waits.
    pub fn deadline(&self, task: TaskId, waiting: bool) -> Option<Millis> {
        waiting.then(|| self.heard[task.index()] + REQUEST_TIMEOUT)
    }
}

/// The engine's shared state.
pub struct Ctx {
    /// The network's rules.
    pub params: &'static Params,
    /// The time of the latest input.
    pub now: Millis,
    /// Every gateway, as the application listed them.
    pub gateways: Gateways,
    /// For the application.
    pub events: VecDeque<Event>,
    /// For the shell.
    pub actions: VecDeque<Action>,
    /// Between tasks.
    pub effects: VecDeque<Effect>,
    /// Gateways found bad while handling another's message: dropped by the engine next.
    pub drops: VecDeque<(GatewayId, DropReason)>,
    /// When each task was last heard.
    pub timers: Timers,
    /// Counters since the start.
    pub counters: Counters,
    /// Reconnect jitter, and where the filter-header task's turns start.
    pub rng: Rng,
    /// Our static key.
    pub local_static: SecretKey,
    /// Limits of each connection.
    pub limits: Limits,
    /// The application stopped the engine.
    pub stopped: bool,
    /// Whether filter headers are synced at all.
    pub filters_on: bool,
    /// The last filter header stored, as the shell last said (lowered at once by a reorg
    /// or a truncation: what the store holds above is rolled back with the next commit).
    pub stored_filters: Option<u32>,
    /// The first height the store holds a filter header for.
    pub filter_base: u32,
    /// Blocks whose filter a gateway in conflict disputes where the block cannot settle
    /// it: every scan this session matches its filter beside ours (see
    /// [`crate::dispute::Contested`]). At most [`MAX_CONTESTED_KEPT`], their filters at
    /// most [`MAX_CONTESTED_BYTES`] in all: past that a filter is dropped and its block
    /// matched by every scan (fetched, never missed).
    pub contested: Vec<Contested>,
    /// The mirrors, and the file streamed from one.
    pub mirrors: super::mirror::Mirrors,
}

/// Contested blocks kept in a session.
pub const MAX_CONTESTED_KEPT: usize = 256;
/// The bytes of their filters kept in a session.
pub const MAX_CONTESTED_BYTES: usize = 16 << 20;

impl Ctx {
    /// Keep a contested block (see [`Ctx::contested`]); whether it is new.
    pub fn contest(&mut self, mut c: Contested) -> bool {
        if self.contested.contains(&c) || self.contested.len() >= MAX_CONTESTED_KEPT {
            return false;
        }
        let bytes: usize = self.contested.iter().map(|c| c.filter.len()).sum();
        if bytes + c.filter.len() > MAX_CONTESTED_BYTES {
            // Matched by every scan: the block is fetched and read whole.
            c.filter.clear();
        }
        self.contested.push(c);
        true
    }

    /// A context for `gateways` at `now`.
    pub fn new(
        params: &'static Params,
        gateways: Gateways,
        local_static: SecretKey,
        seed: u64,
        now: Millis,
    ) -> Ctx {
        let mut actions = VecDeque::with_capacity(2 * gateways.len() + 4);
        actions.extend(gateways.ids().map(|gateway| Action::Connect { gateway }));
        Ctx {
            params,
            now,
            gateways,
            events: VecDeque::with_capacity(16),
            actions,
            effects: VecDeque::new(),
            drops: VecDeque::new(),
            timers: Timers::new(now),
            counters: Counters::default(),
            rng: Rng::new(seed),
            local_static,
            limits: Limits::default(),
            stopped: false,
            filters_on: true,
            stored_filters: None,
            filter_base: 0,
            contested: Vec::new(),
            mirrors: super::mirror::Mirrors::new(Vec::new()),
        }
    }

    /// The gateway a task asks next, of those `usable` accepts: one not benched in the
    /// task (`standing` is its standing there) before one that is, then one other than
    /// `avoid` (the headers' source, so that two connections carry two streams side by
    /// side) before it; of the `n` left, the `draw % n`-th in list order (a random `draw`
    /// picks among them evenly). A benched gateway is still asked when no other can be:
    /// benching orders, it never stalls.
    pub fn pick(
        &self,
        draw: usize,
        avoid: Option<GatewayId>,
        usable: impl Fn(GatewayId, &Gateway) -> bool,
        standing: impl Fn(&Gateway) -> Standing,
    ) -> Option<GatewayId> {
        let rank = |g: GatewayId| {
            let gw = &self.gateways[g];
            let benched = standing(gw).is_benched(self.now);
            usable(g, gw).then_some((benched, Some(g) == avoid))
        };
        let best = self.gateways.ids().filter_map(rank).min()?;
        let tied = || self.gateways.ids().filter(|&g| rank(g) == Some(best));
        tied().nth(draw % tied().count())
    }

    /// Gateway `g` moves to `state` (the application hears of it, with `reason`).
    pub fn set_state(&mut self, g: GatewayId, state: GatewayState, reason: Option<DropReason>) {
        let gw = &mut self.gateways[g];
        if gw.state == state && reason.is_none() {
            return;
        }
        gw.state = state;
        self.events.push_back(Event::Gateway {
            gateway: g,
            state,
            reason,
        });
    }

    /// Request `id` to gateway `g` was given up: the rest of its answer is let through.
    pub fn give_up(&mut self, g: GatewayId, id: u32) {
        self.gateways[g].give_up(id);
    }

    /// Every `(gateway, id)` given up.
    pub fn give_up_all(&mut self, given_up: impl IntoIterator<Item = GivenUp>) {
        for (g, id) in given_up {
            self.give_up(g, id);
        }
    }

    /// A message answering request `id`, which is not in flight to gateway `g`: the rest of
    /// an answer this gateway was asked and then given up (a better tip elsewhere, a reorg)
    /// is ignored, until its `last`; anything else was never asked for.
    pub fn given_up_answer(&mut self, g: GatewayId, id: u32, last: bool) -> Result<(), DropReason> {
        let given_up = &mut self.gateways[g].given_up;
        let Some(i) = given_up.iter().position(|x| *x == id) else {
            return Err(DropReason::Sync(SyncError::UnexpectedAnswer { id }));
        };
        if last {
            given_up.remove(i);
        }
        Ok(())
    }

    /// Gateway `g` (not the one whose message is being handled) broke a rule: dropped by
    /// the engine once the message is handled.
    pub fn drop_later(&mut self, g: GatewayId, why: DropReason) {
        self.drops.push_back((g, why));
    }

    /// Gateway `g`'s connection is gone (`had_socket`: the shell must close it): what the
    /// engine knew of it while connected is forgotten.
    pub fn disconnected(&mut self, g: GatewayId, had_socket: bool) {
        let gw = &mut self.gateways[g];
        gw.tip = None;
        gw.ready = false;
        gw.undelivered = None;
        gw.undelivered_pending = false;
        gw.trust.forget();
        if had_socket {
            self.actions.push_back(Action::Close { gateway: g });
        }
    }

    /// Gateway `g` was dropped for `why`: marked bad for a broken rule, else reconnected
    /// after a backoff.
    pub fn dropped(&mut self, g: GatewayId, why: DropReason) {
        if why.is_violation() {
            self.events.push_back(Event::Rejected {
                gateway: g,
                reason: why.clone(),
            });
            self.set_state(g, GatewayState::Bad, Some(why));
        } else {
            let gw = &mut self.gateways[g];
            let delay = gw.backoff_after_drop(self.now, self.rng.next_f64());
            gw.reconnect_at = Some(self.now + delay);
            self.counters.reconnects += 1;
            self.set_state(g, GatewayState::BackingOff, Some(why));
        }
    }
}
