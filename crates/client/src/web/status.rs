//! What the sync loop last knew, kept for the `Client`'s synchronous getters: the loop
//! writes it, the getters read it.

use lightwire_store::Tip;

use lightwire_proto::Millis;

use crate::engine::{Counters, GatewayState, WalletTrace};

/// What the loop last knew, for the synchronous getters.
#[derive(Default)]
pub struct Status {
    /// The stored tip.
    pub stored: Option<Tip>,
    /// Its header's time.
    pub stored_time: u32,
    /// The validated tip's height.
    pub validated_height: u32,
    /// The best announced tip's height, while behind it.
    pub target: Option<u32>,
    /// Headers validated.
    pub validated: u64,
    /// The engine's counters.
    pub counters: Counters,
    /// IndexedDB's counters.
    pub idb: lightwire_store::IdbStats,
    /// Each gateway's state.
    pub states: Vec<GatewayState>,
    /// Each gateway's URL.
    pub urls: Vec<String>,
    /// Bytes received from each gateway.
    pub gateway_bytes: Vec<u64>,
    /// Each mirror's base URL, and the bytes of its files taken.
    pub mirrors: Vec<(String, u64)>,
    /// Whether nothing is missing.
    pub synced: bool,
    /// When the client opened (monotonic milliseconds).
    pub started_ms: f64,
    /// Time spent taking socket messages (decrypting and validating), in milliseconds.
    pub receive_ms: f64,
    /// Time the loop waited for input with no commit in flight, in milliseconds: the
    /// engine had nothing to do (a sync starved by its delivery shows here).
    pub idle_ms: f64,
    /// Time the loop waited with a commit in flight and no input to take, in
    /// milliseconds (a sync held by its storage shows here).
    pub commit_wait_ms: f64,
    /// Height of the last filter header validated.
    pub filter_height: Option<u32>,
    /// Height of the last filter header stored.
    pub stored_filter_height: Option<u32>,
    /// Where the wallet's block fetching stood, when a wallet is watched.
    pub wallet: Option<WalletTrace>,
    /// The silent-payment scan, once started: its first block, the lowest block not
    /// scanned yet, and the tweaks tested.
    pub silent: Option<(u32, u32, u64)>,
    /// The engine's next deadline, and the moment the loop's timer is armed for.
    pub deadline: Option<Millis>,
    /// See `deadline`.
    pub timer_at: Option<Millis>,
}
