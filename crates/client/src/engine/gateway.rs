//! What the engine keeps of each gateway apart from its connection: where it stands, the
//! tip it announced, whether its filter headers are trusted, its reconnect backoff and the
//! requests to it that were given up.

use core::ops::{Index, IndexMut};
use core::time::Duration;
use std::collections::VecDeque;

use lightwire_chain::{BlockHash, Header, Work};
use lightwire_proto::{ConnectString, Initiator, Millis};

use crate::ids::GatewayId;

/// Requests given up per gateway whose answers are still let through (a gateway answers in
/// order and queues at most 8 requests; the oldest beyond this is forgotten).
pub const MAX_GIVEN_UP: usize = 16;
/// First reconnect delay; doubled per failed attempt up to [`BACKOFF_MAX`].
pub const BACKOFF_BASE: Duration = Duration::from_millis(500);
/// Longest reconnect delay.
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A session that lasted this long from its `init` was a healthy one: a drop after it
/// starts the backoff over from [`BACKOFF_BASE`]. A drop sooner (for cause or not) doubles
/// it, so that a gateway that handshakes and then misbehaves or fails at once is
/// reconnected ever more slowly, not at once each time.
pub const HEALTHY_SESSION: Duration = Duration::from_secs(60);
/// Strikes after which a task asks a gateway only when no other can be asked (see
/// [`Standing`]): enough that an honest gateway a moment behind another (its node still
/// building the newest filter) is not benched for one late block.
pub const MAX_STRIKES: u32 = 3;
/// How long a gateway with [`MAX_STRIKES`] strikes in a task is asked by it only as the
/// last resort: about a block's time, so that a gateway that has caught up is soon asked
/// again.
pub const BENCHED_FOR: Duration = Duration::from_secs(600);

/// The delay before reconnect attempt `failures` (1 for the first), given a uniform
/// `random` in [0, 1): "equal jitter", half the exponential delay fixed and half random,
/// so that clients dropped together do not come back together.
pub fn backoff(failures: u32, random: f64) -> Duration {
    let exp = BACKOFF_BASE.saturating_mul(1 << failures.saturating_sub(1).min(16));
    let full = exp.min(BACKOFF_MAX);
    full / 2 + (full / 2).mul_f64(random.clamp(0.0, 1.0))
}

/// The engine's random numbers (reconnect jitter): SplitMix64, seeded by the shell. Not
/// for secrets; keys come from the platform's CSPRNG.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Where a gateway connection stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum GatewayState {
    /// The WebSocket is opening.
    Connecting,
    /// BOLT 8 handshake and `init` under way.
    Handshaking,
    /// Connected, and the chain is behind the best announced tip.
    Syncing,
    /// Connected, and nothing is missing.
    Synced,
    /// Disconnected; a reconnect is scheduled.
    BackingOff,
    /// Dropped for the session: it broke a rule (see [`super::Event::Rejected`]).
    Bad,
    /// Stopped by the application.
    Stopped,
}

impl GatewayState {
    /// A lowercase name, for JavaScript.
    pub fn name(&self) -> &'static str {
        match self {
            GatewayState::Connecting => "connecting",
            GatewayState::Handshaking => "handshaking",
            GatewayState::Syncing => "syncing",
            GatewayState::Synced => "synced",
            GatewayState::BackingOff => "backing-off",
            GatewayState::Bad => "bad",
            GatewayState::Stopped => "stopped",
        }
    }
}

/// How far a gateway's filter headers are trusted, as the cross-check found. Only a
/// gateway known to agree with ours is asked for filters (a filter that does not match
/// ours is then its own fault); one in conflict is not asked for filter headers either.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FilterTrust {
    /// Nothing known yet (it is probed at our latest filter header).
    Unknown,
    /// It agrees with our filter headers up to this height, and so with every one below.
    Agrees(u32),
    /// Its answer to a probe was empty (its filter headers lag ours): probed again after
    /// its next tip; what it agreed with before still holds.
    Lagging(Option<u32>),
    /// Its filter headers differ from ours: a dispute settles which is wrong. Sticks for
    /// the session unless the dispute finds ours wrong. It is asked for nothing meanwhile;
    /// the height up to which it agreed with ours is kept: if ours turn out wrong there,
    /// it vouched for them.
    Conflict(Option<u32>),
}

impl FilterTrust {
    /// The height up to which it agrees with our filter headers.
    pub fn agreed(self) -> Option<u32> {
        match self {
            FilterTrust::Agrees(h) => Some(h),
            FilterTrust::Lagging(h) | FilterTrust::Conflict(h) => h,
            FilterTrust::Unknown => None,
        }
    }

    /// Whether its filter headers differ from ours.
    pub fn is_conflict(self) -> bool {
        matches!(self, FilterTrust::Conflict(_))
    }

    /// Its filter header at `height` is not ours: in conflict, agreeing below at most.
    pub fn conflict(&mut self, height: u32) {
        let below = height.saturating_sub(1);
        *self = FilterTrust::Conflict(self.agreed().map(|a| a.min(below)));
    }

    /// It agrees up to `height` (at least): what a probe or a chain following ours showed.
    pub fn agree(&mut self, height: u32) {
        let up_to = self.agreed().map_or(height, |a| a.max(height));
        match self {
            FilterTrust::Conflict(_) => {}
            FilterTrust::Lagging(a) => *a = Some(up_to),
            FilterTrust::Unknown | FilterTrust::Agrees(_) => *self = FilterTrust::Agrees(up_to),
        }
    }

    /// Its answer to a probe was empty.
    pub fn lag(&mut self) {
        if !self.is_conflict() {
            *self = FilterTrust::Lagging(self.agreed());
        }
    }

    /// A new tip from it: its filter headers may have caught up (probed again).
    pub fn unlag(&mut self) {
        if let FilterTrust::Lagging(a) = *self {
            *self = a.map_or(FilterTrust::Unknown, FilterTrust::Agrees);
        }
    }

    /// Its connection is gone: what it agreed with is asked again when it is back (a
    /// conflict stays).
    pub fn forget(&mut self) {
        *self = match self {
            FilterTrust::Conflict(_) => FilterTrust::Conflict(None),
            _ => FilterTrust::Unknown,
        };
    }

    /// A reorganisation or a truncation at `height`: what it agreed with above is gone.
    pub fn cut(&mut self, height: u32) {
        match self {
            FilterTrust::Agrees(a)
            | FilterTrust::Lagging(Some(a))
            | FilterTrust::Conflict(Some(a)) => *a = (*a).min(height),
            FilterTrust::Unknown | FilterTrust::Lagging(None) | FilterTrust::Conflict(None) => {}
        }
    }
}

/// A gateway's standing with one task that asks for filter headers or filters: the answers
/// it ended with nothing where another gateway then delivered (an empty answer, or "the
/// stop block is not on my chain", for data another showed it holds). Each is a strike;
/// [`MAX_STRIKES`] bench it for [`BENCHED_FOR`]: the task asks the others first, so that
/// a gateway that answers every request empty cannot hold the task back while another
/// serves it. Strikes are kept across reconnects in the session (hanging up does not
/// clear them) and cleared by a delivery.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Standing {
    /// Strikes since it last delivered or was benched.
    pub strikes: u32,
    /// Until when it is benched.
    pub benched_until: Option<Millis>,
}

impl Standing {
    /// Another gateway delivered what it answered it had not, at `now`: a strike; the
    /// last one benches it.
    pub fn strike(&mut self, now: Millis) {
        self.strikes += 1;
        if self.strikes >= MAX_STRIKES {
            self.strikes = 0;
            self.benched_until = Some(now + BENCHED_FOR);
        }
    }

    /// It delivered: its strikes and bench go.
    pub fn delivered(&mut self) {
        *self = Standing::default();
    }

    /// Whether it is benched at `now`.
    pub fn is_benched(&self, now: Millis) -> bool {
        self.benched_until.is_some_and(|t| now < t)
    }
}

/// What the engine keeps of a gateway apart from its connection.
pub struct Gateway {
    /// Where to connect, and its key.
    pub connect: ConnectString,
    /// Where its connection stands.
    pub state: GatewayState,
    /// Whether its connection has exchanged `init`.
    pub ready: bool,
    /// Whether its `init` offers filters.
    pub serves_filters: bool,
    /// Its last announced tip while connected: height, header, claimed chainwork.
    pub tip: Option<(u32, Header, Work)>,
    /// An announced tip whose answer ended without it: not a target again.
    pub undelivered: Option<BlockHash>,
    /// Tips it announced and did not deliver, since it last served us in full.
    pub undelivered_count: u32,
    /// Its answer ended short of the tip it announced (handled after the input).
    pub undelivered_pending: bool,
    /// Drops since its last healthy session (see [`HEALTHY_SESSION`]).
    pub failures: u32,
    /// Bytes received from it since the engine started.
    pub bytes_in: u64,
    /// The mirrors its `init` advertised were taken (once a session).
    pub mirrors_taken: bool,
    /// When its connection exchanged `init`, while it has one.
    pub ready_at: Option<Millis>,
    /// When to reconnect (backing off).
    pub reconnect_at: Option<Millis>,
    /// Requests to this connection that were given up and whose answers have not ended:
    /// what still arrives for them is ignored. Kept per gateway, so that others cannot
    /// push an honest gateway's ids out and get it marked bad for answering.
    pub given_up: VecDeque<u32>,
    /// How far its filter headers are trusted.
    pub trust: FilterTrust,
    /// In conflict with ours after a dispute that could not settle it: every block up to
    /// this height where its filters differ from ours is contested (see
    /// [`super::ctx::Ctx::contested`]), so its filters up to here can still be checked
    /// (the same as ours, or the one contested) and a scan may ask it. Without this, a
    /// gateway that agrees with ours and cuts every scan short held the scan back for
    /// good while an honest one in conflict stood by.
    pub contested_to: Option<u32>,
    /// Its standing with the filter-header task.
    pub filter_headers: Standing,
    /// Its standing with the scan.
    pub scan: Standing,
}

impl Gateway {
    /// A gateway not yet connected.
    pub fn new(connect: ConnectString) -> Gateway {
        Gateway {
            connect,
            state: GatewayState::Connecting,
            ready: false,
            serves_filters: false,
            tip: None,
            undelivered: None,
            bytes_in: 0,
            mirrors_taken: false,
            undelivered_count: 0,
            undelivered_pending: false,
            failures: 0,
            ready_at: None,
            reconnect_at: None,
            given_up: VecDeque::with_capacity(MAX_GIVEN_UP),
            trust: FilterTrust::Unknown,
            contested_to: None,
            filter_headers: Standing::default(),
            scan: Standing::default(),
        }
    }

    /// Whether it can be asked for filter headers: connected, serving them, not in
    /// conflict with ours.
    pub fn filters_usable(&self) -> bool {
        self.ready && self.serves_filters && !self.trust.is_conflict()
    }

    /// Up to which height a scan may ask it for filters: as far as it agrees with ours, or,
    /// in conflict, as far as every difference is contested.
    pub fn scan_limit(&self) -> Option<u32> {
        if !self.ready || !self.serves_filters {
            return None;
        }
        match self.trust {
            FilterTrust::Conflict(_) => self.contested_to,
            t => t.agreed(),
        }
    }

    /// Whether it can be asked for filters up to our filter header at `height`.
    pub fn agrees_at(&self, height: u32) -> bool {
        self.filters_usable() && self.trust.agreed().is_some_and(|a| a >= height)
    }

    /// Its connection was dropped at `now` (not for a broken rule): the delay before it is
    /// reconnected, given a uniform `random` in [0, 1). A session that stayed up
    /// [`HEALTHY_SESSION`] starts the backoff over; any shorter one (a handshake alone is
    /// not a healthy session) doubles it.
    pub fn backoff_after_drop(&mut self, now: Millis, random: f64) -> Duration {
        if self
            .ready_at
            .take()
            .is_some_and(|t| now.since(t) >= HEALTHY_SESSION)
        {
            self.failures = 0;
        }
        self.failures = self.failures.saturating_add(1);
        backoff(self.failures, random)
    }

    /// Remember request `id`, given up: the rest of its answer is let through.
    pub fn give_up(&mut self, id: u32) {
        if self.given_up.len() == MAX_GIVEN_UP {
            self.given_up.pop_front();
        }
        self.given_up.push_back(id);
    }
}

/// Every gateway the application listed, by id.
pub struct Gateways(Vec<Gateway>);

impl Gateways {
    /// One for each connect string, in the application's order.
    pub fn new(list: Vec<ConnectString>) -> Gateways {
        Gateways(list.into_iter().map(Gateway::new).collect())
    }

    /// How many.
    #[allow(clippy::len_without_is_empty)] // Never empty for long: an engine has gateways.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Every id, in order.
    pub fn ids(&self) -> impl Iterator<Item = GatewayId> + use<> {
        (0..self.0.len()).map(GatewayId)
    }

    /// Every gateway.
    pub fn iter(&self) -> impl Iterator<Item = &Gateway> {
        self.0.iter()
    }

    /// Every gateway with its id.
    pub fn with_ids(&self) -> impl Iterator<Item = (GatewayId, &Gateway)> {
        self.0.iter().enumerate().map(|(i, g)| (GatewayId(i), g))
    }

    /// Every gateway, to change.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Gateway> {
        self.0.iter_mut()
    }
}

impl Index<GatewayId> for Gateways {
    type Output = Gateway;
    fn index(&self, g: GatewayId) -> &Gateway {
        &self.0[g.index()]
    }
}

impl IndexMut<GatewayId> for Gateways {
    fn index_mut(&mut self, g: GatewayId) -> &mut Gateway {
        &mut self.0[g.index()]
    }
}

/// Each gateway's connection, while it has one. Kept apart from the rest of the gateway's
/// state, so that an event borrowed from a connection's buffer can be handled by the tasks.
pub struct Conns(Vec<Option<Initiator>>);

impl Conns {
    /// None connected, for `n` gateways.
    pub fn new(n: usize) -> Conns {
        Conns((0..n).map(|_| None).collect())
    }
}

impl Index<GatewayId> for Conns {
    type Output = Option<Initiator>;
    fn index(&self, g: GatewayId) -> &Option<Initiator> {
        &self.0[g.index()]
    }
}

impl IndexMut<GatewayId> for Conns {
    fn index_mut(&mut self, g: GatewayId) -> &mut Option<Initiator> {
        &mut self.0[g.index()]
    }
}

impl<'a> IntoIterator for &'a Conns {
    type Item = &'a Option<Initiator>;
    type IntoIter = core::slice::Iter<'a, Option<Initiator>>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}
