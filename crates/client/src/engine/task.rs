//! What the engine asks of every task, and the tasks it has. The engine schedules, times
//! out and drops gateways through [`Task`] alone; what a task needs to know of the others
//! to schedule comes in a [`View`]. A new capability is a task here (a field of [`Tasks`]
//! and a place in [`Tasks::all_mut`]), an arm of the router for its answers, a variant of
//! [`TaskId`](crate::ids::TaskId) and of [`super::Event`].

use lightwire_chain::BlockHash;
use lightwire_primitives::FilterHeader;
use lightwire_proto::Millis;

use super::check::Check;
use super::ctx::{Broke, Conns, Ctx};
use super::fees::Fees;
use super::filter_headers::FilterHeaders;
use super::headers::Headers;
use super::mempool::MempoolTask;
use super::relay::Relay;
use super::scan::ScanTask;
use super::silent::SilentTask;
use super::wallet::WalletTask;
use crate::ids::GatewayId;
use crate::reason::DropReason;

/// One capability of the engine: its state and its requests.
pub trait Task {
    /// Send what is due, given what the other tasks show (`view`). `Err` names a gateway
    /// whose connection refused a request.
    fn schedule(&mut self, ctx: &mut Ctx, conns: &mut Conns, view: &View) -> Result<(), Broke>;

    /// When its wait for an answer runs out, if it waits.
    fn deadline(&self, ctx: &Ctx) -> Option<Millis>;

    /// Its wait ran out: the gateways to drop, and why.
    fn timed_out(&mut self, ctx: &mut Ctx) -> Vec<(GatewayId, DropReason)>;

    /// Gateway `g` is gone: what was asked of it goes (and is asked of another).
    fn gateway_gone(&mut self, ctx: &mut Ctx, g: GatewayId);
}

/// What a task sees of the others when it schedules.
#[derive(Clone, Copy, Debug, Default)]
pub struct View {
    /// The gateway headers come from (the other streams prefer another).
    pub source: Option<GatewayId>,
    /// The gateway the scan asks (the wallet fetches matched blocks from it first).
    pub scan_gateway: Option<GatewayId>,
    /// Our latest filter header a probe asks about: its height, block and header.
    pub filter_reached: Option<(u32, BlockHash, FilterHeader)>,
    /// The gateway our filter-header request went to (not probed meanwhile).
    pub filters_asked: Option<GatewayId>,
    /// Whether the wallet watches something (the mempool digest is followed for it).
    pub wallet: bool,
    /// Whether a silent-payment receiver scans (the mempool digest is followed for it,
    /// with tweaks).
    pub silent: bool,
    /// The best chain's tip (height and hash), and whether the headers have nothing more
    /// to fetch.
    pub tip: (u32, BlockHash),
    /// See `tip`.
    pub headers_synced: bool,
}

/// The engine's tasks.
pub struct Tasks {
    /// Headers: the best chain.
    pub headers: Headers,
    /// The filter-header chain.
    pub filter_headers: FilterHeaders,
    /// The filter cross-check.
    pub check: Check,
    /// The scan.
    pub scan: ScanTask,
    /// The wallet.
    pub wallet: WalletTask,
    /// Broadcasts.
    pub relay: Relay,
    /// The mempool digest.
    pub mempool: MempoolTask,
    /// Fee rates.
    pub fees: Fees,
    /// The silent-payment receiver's scan.
    pub silent: SilentTask,
}

impl Tasks {
    /// Every task, in the order they schedule: headers first (the others follow them), the
    /// wallet after the scan (it fetches what the scan matched).
    pub fn all_mut(&mut self) -> [&mut dyn Task; 9] {
        [
            &mut self.headers,
            &mut self.filter_headers,
            &mut self.check,
            &mut self.scan,
            &mut self.wallet,
            &mut self.relay,
            &mut self.mempool,
            &mut self.fees,
            &mut self.silent,
        ]
    }

    /// Every task, to read.
    pub fn all(&self) -> [&dyn Task; 9] {
        [
            &self.headers,
            &self.filter_headers,
            &self.check,
            &self.scan,
            &self.wallet,
            &self.relay,
            &self.mempool,
            &self.fees,
            &self.silent,
        ]
    }

    /// What the tasks show each other now.
    pub fn view(&self) -> View {
        let filters = &self.filter_headers.sync;
        View {
            source: self.headers.source(),
            scan_gateway: self.scan.asked(),
            filter_reached: filters
                .reached()
                .and_then(|(t, hash)| filters.header_at(t).map(|ours| (t, hash, ours))),
            filters_asked: filters.asked(),
            wallet: self.wallet.watching(),
            silent: self.silent.scan.is_some(),
            tip: {
                let t = self.headers.syncer.tip();
                (t.height, t.hash)
            },
            headers_synced: self.headers.syncer.is_synced(),
        }
    }
}

/// A gateway whose request timed out, to drop.
pub fn timeout(g: GatewayId) -> (GatewayId, DropReason) {
    (g, DropReason::RequestTimeout)
}
