//! What comes out of the engine: events for the application, actions for the shell,
//! counters.

use lightwire_chain::BlockHash;
use lightwire_store::Tip;

use super::gateway::GatewayState;
use crate::dispute::Verdict;
use crate::ids::GatewayId;
use crate::reason::DropReason;
use crate::wallet::WalletChange;

/// What the application hears about.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Event {
    /// A gateway's connection changed state; `reason` says why it dropped, if it did. With
    /// its state unchanged, the reason is a header of its not yet valid (`future-header`):
    /// it stays, and the headers before that one were kept.
    Gateway {
        /// Index in the gateway list.
        gateway: GatewayId,
        /// The new state.
        state: GatewayState,
        /// Why it dropped, when it did.
        reason: Option<DropReason>,
    },
    /// The best chain switched branches.
    Reorg {
        /// The tip that was replaced.
        old_tip: Tip,
        /// The new branch's tip so far.
        new_tip: Tip,
        /// Headers of the old chain replaced (old tip height - fork height).
        depth: u32,
    },
    /// A gateway broke a rule and was marked bad; the headers it sent in the failing
    /// batch were not taken.
    Rejected {
        /// Index in the gateway list.
        gateway: GatewayId,
        /// The rule.
        reason: DropReason,
    },
    /// A gateway's filter header at `height` is not ours: it is not asked for filters
    /// while a dispute settles which is wrong ([`Event::FilterDispute`]).
    FilterConflict {
        /// Index in the gateway list.
        gateway: GatewayId,
        /// A height where its filter-header chain and ours differ.
        height: u32,
    },
    /// A dispute over filter headers with a gateway is over.
    FilterDispute {
        /// The gateway disputed.
        gateway: GatewayId,
        /// How it ended.
        verdict: Verdict,
    },
    /// A block's filter matches a watched script (the scan's).
    ScanMatch {
        /// Its height.
        height: u32,
        /// Its hash.
        hash: BlockHash,
    },
    /// A matched block was disconnected by a reorganisation: the match is withdrawn.
    ScanWithdrawn {
        /// Its height.
        height: u32,
        /// Its hash.
        hash: BlockHash,
    },
    /// The scan has matched every block whose filter header is stored, up to `height`;
    /// it goes on as more are stored.
    ScanReached {
        /// The last block matched.
        height: u32,
        /// Every block matched so far, ascending.
        matches: Vec<(u32, BlockHash)>,
    },
    /// A wallet found a transaction of its own, or lost one to a reorganisation; took an
    /// unconfirmed one, or dropped one.
    Wallet(crate::wallet::blocks::WalletId, WalletChange),
    /// A block the wallet's scan matched has waited [`super::WAIT_REPORT`] with no gateway
    /// asked for it: why (once for each block; it is asked as soon as it can be).
    WalletWaiting {
        /// The block's height.
        height: u32,
        /// Why it is not being fetched.
        reason: super::WaitReason,
    },
    /// Every gateway a transaction was sent to answered (or gave up).
    Broadcast {
        /// The request ([`Engine::broadcast`]'s).
        id: u32,
        /// The transaction.
        txid: lightwire_primitives::Txid,
        /// The gateways that passed it to their nodes.
        relayed: Vec<GatewayId>,
        /// Those that did not, and why.
        refused: Vec<(GatewayId, lightwire_wire::RelayStatus)>,
    },
    /// The gateways asked by [`Engine::fee_rates`] answered (or some waited too long).
    FeeRates {
        /// The request ([`Engine::fee_rates`]'s).
        id: u32,
        /// The figure for 1, 6 and 144 blocks (sat/kvB; see [`super::fees::combine`]).
        rates: [Option<u64>; 3],
        /// Each gateway's answer, as it said it.
        answers: Vec<super::fees::FeeAnswer>,
    },
    /// A mirror was dropped for the session: why.
    Mirror {
        /// Index in the mirror list.
        mirror: super::mirror::MirrorId,
        /// Why.
        fault: super::mirror::MirrorFault,
    },
    /// A mirror's manifest was read: its files hold headers up to `height` (a claim).
    MirrorReady {
        /// Index in the mirror list.
        mirror: super::mirror::MirrorId,
        /// The top its manifest claims.
        height: u32,
    },
    /// The silent-payment receiver's scan found an output paying it, in block `height`
    /// (checked against our header; the wallet now watches its script from there).
    SilentPayment {
        /// The block's height; `None` for a payment found in the mempool (unconfirmed).
        height: Option<u32>,
        /// The block; `None` as `height`.
        hash: Option<BlockHash>,
        /// The output, its transaction's tweak and its label.
        payment: lightwire_wallet::silent_block::Payment,
    },
    /// The gateways' tweak lists of block `height` differ and nobody present gave the
    /// block or what it spends from: the silent-payment scan waits below it (it asks
    /// again when the chain moves or a gateway comes back).
    SilentStalled {
        /// The disputed block's height.
        height: u32,
    },
    /// A gateway sent a `warning`.
    Warning {
        /// Index in the gateway list.
        gateway: GatewayId,
        /// Its text, if printable.
        text: Option<String>,
    },
}

/// What the shell must do for a gateway or a mirror.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Action {
    /// Open a WebSocket to the gateway's URL now, then call [`Engine::opened`] (or
    /// [`Engine::closed`] if it fails).
    Connect {
        /// Index in the gateway list.
        gateway: GatewayId,
    },
    /// Close the gateway's WebSocket (its later events are to be ignored).
    Close {
        /// Index in the gateway list.
        gateway: GatewayId,
    },
    /// Fetch the mirror's manifest ([`Engine::mirror_url`] with no fetch), then call
    /// [`Engine::on_manifest`].
    FetchManifest {
        /// Index in the mirror list.
        mirror: super::mirror::MirrorId,
    },
    /// Fetch a file of the mirror ([`Engine::mirror_url`] with this fetch) and stream its
    /// body into [`Engine::mirror_data`], then call [`Engine::mirror_end`].
    Fetch {
        /// Index in the mirror list.
        mirror: super::mirror::MirrorId,
        /// The fetch.
        fetch: u32,
    },
    /// Abort the fetch (its later data is to be dropped).
    CancelFetch {
        /// The fetch.
        fetch: u32,
    },
}

/// Counters since the engine started.
#[derive(Clone, Copy, Default, Debug)]
pub struct Counters {
    /// WebSocket messages received.
    pub messages_in: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// WebSocket messages sent.
    pub messages_out: u64,
    /// Bytes sent.
    pub bytes_out: u64,
    /// Reconnects scheduled.
    pub reconnects: u64,
}
