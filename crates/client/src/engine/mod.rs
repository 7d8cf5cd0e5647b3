//! The engine, sans-IO: several gateways and one best chain, with its filter headers, the
//! cross-check, a scan, a wallet and broadcasts. The shell (the wasm one in the browser,
//! the tests' natively) owns the sockets, the timer and the store; it feeds bytes, closes
//! and the clock in, and carries out the [`Action`]s, store reads and commits that come
//! out. The engine owns its seeded random numbers.
//!
//! The engine is a router in quinn-proto's shape: it owns the gateways, their connections
//! and what they share (`ctx.rs`), and hands each input to the task it is for, named by
//! the answer's request id ([`crate::ids`]; the router is `route.rs`). Each capability is
//! a task with its own file, state and requests: `headers.rs`, `filter_headers.rs`,
//! `check.rs` (the filter cross-check), `scan.rs`, `wallet.rs`, `relay.rs`, `mempool.rs`
//! (the mempool digest). The engine
//! schedules them, times them out and tells them of a gateway gone through one trait
//! (`task.rs`), each seeing what it needs of the others in a `View`. What tasks tell each
//! other (a reorg, a conflict, a scan match) goes through the engine as an effect
//! (`ctx.rs`); [`Event`]s go only to the application. This file is the facade's network
//! side; `api.rs` its store reads, commits and the application's calls.
//!
//! Rules the engine itself keeps:
//! - A gateway that sends an invalid header, a header that links to nothing we know, an
//!   answer nobody asked for, or that fails the handshake or `init`, is closed and marked
//!   bad for the session (no reconnect). Sync continues from the others.
//! - A gateway whose connection drops (or stops answering pings, or whose request makes
//!   no progress in [`REQUEST_TIMEOUT`]) is reconnected after an exponential backoff with
//!   jitter ([`backoff`]), started over only after a session that stayed up
//!   [`HEALTHY_SESSION`] (not at each handshake: a gateway that handshakes and then
//!   misbehaves at once is reconnected ever more slowly).

use lightwire_chain::Chain;
use lightwire_noise::SecretKey;
use lightwire_proto::time::earliest;
use lightwire_proto::{ConnectString, Initiator, Millis};
use lightwire_store::Tip;

mod api;
pub use api::NamedToSave;
mod bulk_filters;
mod check;
mod ctx;
mod event;
pub mod fees;
mod filter_headers;
mod gateway;
mod headers;
mod mempool;
pub mod mirror;
mod relay;
mod route;
mod scan;
mod silent;
mod task;
mod wallet;

pub use crate::ids::GatewayId;
pub use ctx::REQUEST_TIMEOUT;
pub use event::{Action, Counters, Event};
pub use gateway::{
    BACKOFF_BASE, BACKOFF_MAX, FilterTrust, GatewayState, HEALTHY_SESSION, MAX_GIVEN_UP, Rng,
    backoff,
};
pub use headers::MAX_UNDELIVERED;
pub use mempool::{DIGEST_BURST, DIGEST_RATE, FETCHES_PER_HOUR, MAX_WANTED, MempoolError};
pub use mirror::{FetchError, Manifest, MirrorFault, MirrorId};

/// The longest mirror file whose SHA-256 the shell checks (see
/// [`Engine::set_shell_hashes`]): the shell holds such a file whole until it ends.
pub const MOST_SHELL_HASHED: u64 = 4 << 20;

/// Who checks the SHA-256 of a file of `kind` and `bytes`, the shell checking what it can
/// (`shell`): the shell, for a headers or filter-headers file of at most
/// [`MOST_SHELL_HASHED`] bytes (it holds such a file whole until its end: WebCrypto hashes
/// no stream); else the engine, as the bytes pass, in bounded memory. Nobody for a filters
/// file: each of its filters a scan uses is checked against the stored filter headers,
/// and the rest are not used, so its hash (as costly as the scan's own work over filters
/// of big blocks) would guard nothing more.
fn hashing(shell: bool, kind: Kind, bytes: u64) -> Hashing {
    match kind {
        Kind::Filters => Hashing::Nobody,
        _ if shell && bytes <= MOST_SHELL_HASHED => Hashing::Shell,
        _ => Hashing::Engine,
    }
}

/// Who checks a mirror file's SHA-256.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Hashing {
    /// The shell, once the file ended.
    Shell,
    /// The engine's reader, as the bytes pass.
    Engine,
    /// Nobody: see `Engine::hashing`.
    Nobody,
}
pub use relay::BroadcastError;
pub use wallet::{
    BLOCK_RETRY, RescanError, UNCONFIRMED_EXPIRY, WAIT_REPORT, WaitReason, WalletTrace,
};

use crate::reason::{DropReason, TransportError};
use crate::wallet::blocks::WalletSet;
use ctx::{Conns, Ctx, Effect};
use lightwire_proto::PeerEvent;
use mirror::Kind;
use route::route;
use task::Tasks;

/// The client's sync over all its gateways.
pub struct Engine {
    /// Each gateway's connection, while it has one (apart from the rest, so that an event
    /// borrowed from a connection's buffer can be handled by the tasks).
    conns: Conns,
    ctx: Ctx,
    tasks: Tasks,
    /// The readers of the mirrors' files streamed, one per [`mirror::Kind`] (their buffers
    /// reused for every file).
    bulk: [lightwire_proto::bulk::BulkReader; 3],
    /// Whether the shell checks files' SHA-256 (see [`Self::set_shell_hashes`]).
    shell_hashes: bool,
}

impl Engine {
    /// An engine resumed on `chain` (rebuilt from the store whose tip is `stored`), for the
    /// gateways `gateways`, as `local_static`, at `now`, with randomness from `seed`. Every
    /// gateway gets an [`Action::Connect`].
    pub fn new(
        chain: Chain,
        stored: &Tip,
        gateways: Vec<ConnectString>,
        local_static: SecretKey,
        seed: u64,
        now: Millis,
    ) -> Engine {
        let params = chain.params();
        let n = gateways.len();
        let gateways = gateway::Gateways::new(gateways);
        Engine {
            conns: Conns::new(n),
            ctx: Ctx::new(params, gateways, local_static, seed, now),
            tasks: Tasks {
                headers: headers::Headers::new(chain, stored),
                filter_headers: filter_headers::FilterHeaders::new(n),
                check: check::Check::new(n),
                scan: scan::ScanTask::default(),
                wallet: wallet::WalletTask::default(),
                relay: relay::Relay::new(),
                mempool: mempool::MempoolTask::new(n),
                fees: fees::Fees::default(),
                silent: silent::SilentTask::default(),
            },
            bulk: [
                lightwire_proto::bulk::BulkReader::new(),
                lightwire_proto::bulk::BulkReader::new(),
                lightwire_proto::bulk::BulkReader::new(),
            ],
            shell_hashes: false,
        }
    }

    /// The shell is opening gateway `g`'s WebSocket (after an [`Action::Connect`]).
    pub fn connecting(&mut self, g: GatewayId, now: Millis) {
        self.ctx.now = now;
        self.ctx.gateways[g].reconnect_at = None;
        self.ctx.set_state(g, GatewayState::Connecting, None);
    }

    /// Gateway `g`'s WebSocket opened at `now`; the handshake starts with `ephemeral`
    /// (fresh randomness, one per connection). Its act one is ready in
    /// [`Self::poll_transmit`].
    pub fn opened(&mut self, g: GatewayId, ephemeral: SecretKey, now: Millis) {
        let c = &mut self.ctx;
        c.now = now;
        if c.stopped || c.gateways[g].state == GatewayState::Bad {
            return;
        }
        let gw = &mut c.gateways[g];
        let key = c.local_static.clone();
        self.conns[g] = Some(Initiator::new(
            now,
            c.params,
            key,
            gw.connect.node_id,
            ephemeral,
            c.limits,
        ));
        gw.tip = None;
        gw.ready = false;
        gw.given_up.clear();
        c.set_state(g, GatewayState::Handshaking, None);
    }

    /// Bytes to send to gateway `g` now (one WebSocket message); call [`Self::sent`].
    pub fn poll_transmit(&mut self, g: GatewayId) -> Option<&[u8]> {
        self.conns[g].as_mut()?.poll_transmit()
    }

    /// The bytes from [`Self::poll_transmit`] went out.
    pub fn sent(&mut self, g: GatewayId) {
        if let Some(conn) = self.conns[g].as_mut() {
            let n = conn.sent();
            if n > 0 {
                self.ctx.counters.messages_out += 1;
                self.ctx.counters.bytes_out += n as u64;
            }
        }
    }

    /// Gateway `g`'s WebSocket closed (or failed to open) by itself.
    pub fn closed(&mut self, g: GatewayId, why: TransportError, now: Millis) {
        self.ctx.now = now;
        match self.ctx.gateways[g].state {
            GatewayState::Bad | GatewayState::Stopped | GatewayState::BackingOff => {}
            _ => self.drop_gateway(g, DropReason::Transport(why)),
        }
        self.settle();
    }

    /// A WebSocket message from gateway `g`, at `now` (Unix time: validation checks header
    /// times against it).
    pub fn receive(&mut self, g: GatewayId, mut data: &[u8], now: Millis) {
        self.ctx.now = now;
        self.ctx.counters.messages_in += 1;
        self.ctx.counters.bytes_in += data.len() as u64;
        self.ctx.gateways[g].bytes_in += data.len() as u64;
        let mut failure = None;
        while !data.is_empty() {
            let Some(conn) = self.conns[g].as_mut() else {
                return;
            };
            match conn.handle_input(now, data) {
                Ok((taken, event)) => {
                    data = &data[taken..];
                    let Some(event) = event else { continue };
                    let routed = route(&mut self.ctx, &mut self.tasks, g, event);
                    self.apply_effects(Some(g));
                    if let Err(why) = routed {
                        failure = Some(why);
                        break;
                    }
                }
                Err(e) => {
                    failure = Some(DropReason::Connection(e));
                    break;
                }
            }
        }
        if let Some(why) = failure {
            self.drop_gateway(g, why);
        }
        if let Some(conn) = &self.conns[g] {
            let gw = &mut self.ctx.gateways[g];
            gw.serves_filters = conn.serves_filters();
            if conn.is_ready() && !gw.mirrors_taken {
                gw.mirrors_taken = true;
                let c = &mut self.ctx;
                c.mirrors.advertised(conn.mirrors(), now, &mut c.actions);
            }
        }
        self.settle();
    }

    /// Read these mirrors (base URLs of bulk files, docs/PROTOCOL.md "Bulk files"): their
    /// manifests are asked at once ([`Action::FetchManifest`]). With `None`, the mirrors
    /// gateways advertise in their `init` are read instead.
    pub fn set_mirrors(&mut self, urls: Option<Vec<String>>) {
        let c = &mut self.ctx;
        let take_advertised = urls.is_none();
        c.mirrors = mirror::Mirrors::new(urls.unwrap_or_default());
        c.mirrors.take_advertised = take_advertised;
        let now = c.now;
        c.mirrors.read_manifests(now, &mut c.actions);
    }

    /// Whether the shell checks mirror files' SHA-256 itself (off by default): a shell
    /// that can hash off the thread the engine runs on (the browser's WebCrypto, natively)
    /// does, for each file [`Self::shell_hashes_file`] names, at the file's end, with
    /// [`Self::mirror_file`]'s hash, and reports a mismatch with
    /// [`Self::mirror_wrong_hash`]; the engine checks those files' lengths only. The hash
    /// never decides whether a header or a filter is taken (each is validated as a
    /// gateway's answer is), only whether the mirror is read further.
    pub fn set_shell_hashes(&mut self, on: bool) {
        self.shell_hashes = on;
    }

    /// Whether the shell checks the SHA-256 of the file fetch `fetch` streams (see
    /// [`Self::set_shell_hashes`]).
    pub fn shell_hashes_file(&self, fetch: u32) -> bool {
        let stream = self.ctx.mirrors.streams.iter().find(|s| s.fetch == fetch);
        stream.is_some_and(|s| {
            hashing(self.shell_hashes, s.kind, s.file.check.bytes) == Hashing::Shell
        })
    }

    /// The mirror and the file fetch `fetch` streams, while it does.
    pub fn mirror_file(&self, fetch: u32) -> Option<(MirrorId, &mirror::FileEntry)> {
        self.ctx.mirrors.file_of(fetch)
    }

    /// The bytes of mirror `m`'s file `name` (its fetch ended) do not hash to the SHA-256
    /// its manifest names, as the shell found (see [`Self::set_shell_hashes`]), at `now`:
    /// the mirror is dropped (`wrong-hash`). What its files brought was validated and
    /// stays.
    pub fn mirror_wrong_hash(&mut self, m: MirrorId, name: String, now: Millis) {
        self.ctx.now = now;
        let error = lightwire_proto::bulk::BulkError::WrongHash;
        self.drop_mirror(m, MirrorFault::File { name, error });
        self.settle();
    }

    /// The URL to fetch for an [`Action::FetchManifest`] (`fetch` `None`) or an
    /// [`Action::Fetch`].
    pub fn mirror_url(&self, m: MirrorId, fetch: Option<u32>) -> Option<String> {
        self.ctx.mirrors.url(m, fetch)
    }

    /// Where fetch `fetch`'s bytes start in its file, when it asks for a part of it: the
    /// shell asks for them with an HTTP `Range` (and skips to there itself when a mirror
    /// answers with the whole file).
    pub fn mirror_range(&self, fetch: u32) -> Option<u64> {
        self.ctx.mirrors.range_from(fetch)
    }

    /// The URL of the file likely asked after the one fetch `fetch` streams (the next of
    /// its kind in its mirror), for the shell to ask ahead.
    pub fn mirror_next_url(&self, fetch: u32) -> Option<String> {
        self.ctx.mirrors.next_url(fetch)
    }

    /// Bytes received from gateway `g` since the start.
    pub fn gateway_bytes(&self, g: GatewayId) -> u64 {
        self.ctx.gateways[g].bytes_in
    }

    /// The mirrors, to read (their states and the bytes each served).
    pub fn mirrors(&self) -> &[mirror::Mirror] {
        &self.ctx.mirrors.list
    }

    /// Mirror `m`'s manifest as the shell parsed it, or why it could not, at `now`.
    pub fn on_manifest(
        &mut self,
        m: MirrorId,
        manifest: Result<Manifest, FetchError>,
        now: Millis,
    ) {
        self.ctx.now = now;
        let c = &mut self.ctx;
        let genesis = c.params.genesis.block_hash();
        c.mirrors.on_manifest(m, manifest, &genesis, &mut c.events);
        self.settle();
    }

    /// Bytes of the body of fetch `fetch` (any chunking), at `now`: read into the same
    /// events as a gateway's answers and validated the same way.
    pub fn mirror_data(&mut self, fetch: u32, mut data: &[u8], now: Millis) {
        self.ctx.now = now;
        if !self.ctx.mirrors.took(fetch, data.len()) {
            return;
        }
        let Some(stream) = self.ctx.mirrors.stream_mut(fetch) else {
            return;
        };
        let (m, kind) = (stream.mirror, stream.kind);
        if !stream.reading {
            stream.reading = true;
            let by = hashing(self.shell_hashes, kind, stream.file.check.bytes);
            let reader = &mut self.bulk[kind as usize];
            reader.set_hashing(by == Hashing::Engine);
            reader.start(stream.check());
        }
        let mut fault = None;
        while !data.is_empty() {
            let (taken, event) = match self.bulk[kind as usize].read(data) {
                Ok(read) => read,
                Err(error) => {
                    let stream = self.ctx.mirrors.stream_mut(fetch);
                    let name = stream.map(|s| s.file.name.clone()).unwrap_or_default();
                    fault = Some(MirrorFault::File { name, error });
                    break;
                }
            };
            data = &data[taken..];
            let Some(event) = event else { continue };
            let result = match (kind, event) {
                (
                    Kind::Headers,
                    PeerEvent::Headers {
                        headers,
                        hashes,
                        last,
                        ..
                    },
                ) => self
                    .tasks
                    .headers
                    .on_mirror_headers(&mut self.ctx, m, headers, hashes, last),
                (Kind::FilterHeaders, e @ PeerEvent::FilterHeaders { .. }) => {
                    match crate::filters::FilterAnswer::of(e) {
                        Some(answer) => self.tasks.filter_headers.bulk.on_record(m, answer),
                        None => Ok(()),
                    }
                }
                (Kind::Filters, PeerEvent::Filters(f)) => self
                    .tasks
                    .scan
                    .on_mirror_filters(&mut self.ctx, m, &f)
                    .map_err(|error| {
                        let stream = self.ctx.mirrors.streaming(Kind::Filters);
                        let name = stream.map(|s| s.file.name.clone()).unwrap_or_default();
                        MirrorFault::Filters { name, error }
                    }),
                // A record of another kind than the file's.
                _ => {
                    let stream = self.ctx.mirrors.stream_mut(fetch);
                    let name = stream.map(|s| s.file.name.clone()).unwrap_or_default();
                    Err(MirrorFault::WrongRange(name))
                }
            };
            self.apply_effects(None);
            if let Err(f) = result {
                fault = Some(f);
                break;
            }
        }
        if let Some(fault) = fault {
            self.drop_mirror(m, fault);
        }
        self.finish_mirror();
        self.settle();
    }

    /// The body of fetch `fetch` ended (or the fetch failed), at `now`.
    pub fn mirror_end(&mut self, fetch: u32, result: Result<(), FetchError>, now: Millis) {
        self.ctx.now = now;
        let Some(stream) = self.ctx.mirrors.end_stream(fetch, now) else {
            return;
        };
        let m = stream.mirror;
        let reader = &mut self.bulk[stream.kind as usize];
        if !stream.reading {
            // An empty body: checked as one.
            let by = hashing(self.shell_hashes, stream.kind, stream.file.check.bytes);
            reader.set_hashing(by == Hashing::Engine);
            reader.start(stream.check());
        }
        let ended = result
            .map_err(MirrorFault::Fetch)
            .and_then(|()| {
                reader.finish().map_err(|error| MirrorFault::File {
                    name: stream.file.name.clone(),
                    error,
                })
            })
            .and_then(|()| match stream.kind {
                Kind::Headers => self.tasks.headers.mirror_body_ended(m),
                Kind::FilterHeaders => self.tasks.filter_headers.bulk.body_ended(m),
                Kind::Filters => self.tasks.scan.mirror_body_ended(m, &stream.file.name),
            });
        if let Err(fault) = ended {
            self.drop_mirror(m, fault);
        }
        self.finish_mirror();
        self.settle();
    }

    /// When [`Self::handle_timeout`] must next run: a connection's handshake or
    /// keepalive deadline, a task's request, or a reconnect.
    pub fn poll_timeout(&self) -> Option<Millis> {
        let c = &self.ctx;
        if c.stopped {
            return None;
        }
        let mut next = None;
        for (conn, gw) in self.conns.into_iter().zip(c.gateways.iter()) {
            next = earliest(next, conn.as_ref().and_then(Initiator::poll_timeout));
            next = earliest(next, gw.reconnect_at);
        }
        next = earliest(next, c.mirrors.deadline());
        let tasks = self.tasks.all();
        tasks
            .iter()
            .fold(next, |next, t| earliest(next, t.deadline(c)))
    }

    /// Deadlines at `now`: requests without progress (their gateways are dropped),
    /// handshakes and keepalives that ran out, pings due, reconnects due.
    pub fn handle_timeout(&mut self, now: Millis) {
        self.ctx.now = now;
        if self.ctx.stopped {
            return;
        }
        for i in 0..self.tasks.all().len() {
            let task = &mut self.tasks.all_mut()[i];
            if task.deadline(&self.ctx).is_some_and(|d| d <= now) {
                for (g, why) in task.timed_out(&mut self.ctx) {
                    self.drop_gateway(g, why);
                }
            }
        }
        while let Some((m, fault)) = self.ctx.mirrors.timed_out(now) {
            self.drop_mirror(m, fault);
        }
        for g in self.ctx.gateways.ids() {
            if let Some(conn) = self.conns[g].as_mut()
                && let Err(e) = conn.handle_timeout(now)
            {
                self.drop_gateway(g, DropReason::Connection(e));
            }
            let gw = &mut self.ctx.gateways[g];
            if gw.state == GatewayState::BackingOff && gw.reconnect_at.is_some_and(|t| t <= now) {
                gw.reconnect_at = None;
                self.ctx.actions.push_back(Action::Connect { gateway: g });
            }
        }
        self.settle();
    }

    /// Send the next requests if any are due (call after every input).
    pub fn schedule(&mut self) {
        // A round may leave something to carry: a connection broken, or a verdict reached
        // while scheduling (a dispute that ends for want of a defender): carried, and
        // every task scheduled again, so that what follows (filter headers to sync again)
        // is asked now, not at the next input. A few rounds at most.
        for _ in 0..4 {
            self.share_filters();
            let mut any = false;
            for i in 0..self.tasks.all().len() {
                // What the others show is taken again before each: the wallet fetches from
                // the gateway the scan has just asked.
                let view = self.tasks.view();
                let sent = self.tasks.all_mut()[i].schedule(&mut self.ctx, &mut self.conns, &view);
                // A connection broken twice in one round is dropped once.
                if let Err((g, e)) = sent
                    && self.conns[g].is_some()
                {
                    self.drop_gateway(g, DropReason::Connection(e));
                    any = true;
                }
            }
            if !any && self.ctx.effects.is_empty() && self.ctx.drops.is_empty() {
                return;
            }
            self.settle();
        }
    }

    /// While a silent-payment scan runs, the wallet's scan keeps the last filters it took,
    /// and the silent scan takes from them those it is due to ask for: following the tip,
    /// each new block's filter is fetched once for both.
    fn share_filters(&mut self) {
        let (Some(silent), Some(scan)) = (
            self.tasks.silent.scan.as_mut(),
            self.tasks.scan.scan.as_mut(),
        ) else {
            return;
        };
        let kept = scan
            .kept
            .get_or_insert_with(crate::scan::RecentFilters::default);
        let _ = silent.take_kept(&|height, hash| kept.get(height, hash));
    }

    /// Drop gateway `g` (and with it, whatever it was asked, from every task), and settle
    /// what follows.
    fn drop_gateway(&mut self, g: GatewayId, why: DropReason) {
        let had_socket = self.conns[g].take().is_some()
            || self.ctx.gateways[g].state == GatewayState::Connecting;
        self.ctx.disconnected(g, had_socket);
        for task in self.tasks.all_mut() {
            task.gateway_gone(&mut self.ctx, g);
        }
        self.ctx.dropped(g, why);
    }

    /// Drop mirror `m` for `fault` (the application hears of it): its file is no longer
    /// read, and the headers it answered for are asked of the gateways.
    fn drop_mirror(&mut self, m: MirrorId, fault: MirrorFault) {
        let c = &mut self.ctx;
        c.mirrors
            .drop_mirror(m, fault, &mut c.events, &mut c.actions);
        self.tasks.headers.mirror_gone(&mut self.ctx, m);
        self.tasks.filter_headers.bulk.mirror_gone(m);
        self.tasks.scan.mirror_gone(m);
    }

    /// A mirror's answer that is over: checked (its headers must have become our best
    /// chain to the file's end), the mirror dropped if not.
    fn finish_mirror(&mut self) {
        if let Some((m, Err(fault))) = self.tasks.headers.mirror_finished() {
            self.drop_mirror(m, fault);
        }
        let fh = &mut self.tasks.filter_headers;
        let fault = match fh.bulk.finished() {
            Some((_, Ok((first, before)))) => {
                let (sync, bulk) = (&mut fh.sync, &fh.bulk);
                let headers = bulk.got();
                let taken = filter_headers::FilterHeaders::take_checked(
                    &mut self.ctx,
                    sync,
                    bulk,
                    first,
                    before,
                    headers,
                );
                if taken {
                    // Into the commit the headers task gathers, as a gateway's answer.
                    self.tasks.headers.syncer.push_filters(first, headers);
                }
                None
            }
            Some((m, Err(fault))) => Some((m, fault)),
            None => None,
        };
        if let Some((m, fault)) = fault {
            self.drop_mirror(m, fault);
        }
    }

    /// Carry what tasks told each other, in order. `from`: the gateway whose message
    /// caused them, when one did (they are carried right after each message): a scan's
    /// match is then of a filter it served, and it vouched for the block.
    fn apply_effects(&mut self, from: Option<GatewayId>) {
        while let Some(effect) = self.ctx.effects.pop_front() {
            let c = &mut self.ctx;
            match effect {
                Effect::Validated { height, hash } => {
                    self.tasks.filter_headers.sync.mark(height, hash)
                }
                Effect::Reorg { old, new, fork } => {
                    self.tasks.filter_headers.reorg(c, fork);
                    // What the store holds above the fork is of the old branch: it is rolled
                    // back with the next commit, and not read for a scan meanwhile.
                    c.stored_filters = c.stored_filters.map(|s| s.min(fork));
                    c.gateways.iter_mut().for_each(|gw| {
                        gw.trust.cut(fork);
                        gw.contested_to = gw.contested_to.map(|t| t.min(fork));
                    });
                    c.contested.retain(|x| x.height <= fork);
                    self.tasks.wallet.reorg(c, fork);
                    self.tasks.check.reorg(c, fork);
                    self.tasks.scan.reorg(c, fork);
                    self.tasks.silent.reorg(c, fork);
                    let depth = old.height - fork;
                    let old_tip = Tip::from(&old);
                    let new_tip = new;
                    c.events.push_back(Event::Reorg {
                        old_tip,
                        new_tip,
                        depth,
                    });
                }
                Effect::Conflict {
                    gateway,
                    height,
                    theirs,
                } => self.tasks.check.conflict(c, gateway, height, theirs),
                Effect::OursWrong { height, prev, hash } => {
                    let t = self.tasks.headers.syncer.tip();
                    let tip = (t.height, t.hash);
                    self.tasks
                        .filter_headers
                        .ours_wrong(c, height, prev, hash, tip);
                    self.tasks.headers.syncer.truncate_filters(height);
                    self.tasks.scan.drop_from(c, height);
                }
                Effect::Contested { height, hash } => self.tasks.scan.contest(c, height, hash),
                Effect::Matched {
                    height,
                    hash,
                    owners,
                } => {
                    let scan = &self.tasks.scan;
                    let wallets = WalletSet::from_owners(owners);
                    self.tasks
                        .wallet
                        .matched(c, scan, (height, hash, wallets), from)
                }
                Effect::Relayed { tx, holders } => self.tasks.wallet.broadcast(c, &tx, holders),
                Effect::Unheld { gateway } => self.tasks.wallet.unheld(c, gateway),
                Effect::SilentFound {
                    height,
                    payments,
                    spend,
                    origin,
                } => {
                    let base = self.tasks.headers.syncer.base_height();
                    let t = &mut self.tasks;
                    let found = (height, &payments[..], spend, origin);
                    t.wallet.silent_found(c, &mut t.scan, found, base);
                }
            }
        }
    }

    /// After any input: effects carried, gateways found bad or that did not deliver what
    /// they announced dropped, and the states brought up to date.
    fn settle(&mut self) {
        loop {
            self.apply_effects(None);
            if let Some((g, why)) = self.ctx.drops.pop_front() {
                if self.ctx.gateways[g].ready {
                    self.drop_gateway(g, why);
                }
                continue;
            }
            let Some(g) = headers::Headers::take_undelivered(&mut self.ctx) else {
                break;
            };
            if let Some(why) = self.tasks.headers.undeliver(&mut self.ctx, g) {
                self.drop_gateway(g, why);
            }
        }
        self.tasks.headers.update_states(&mut self.ctx);
        self.tasks.scan.check_reached(&mut self.ctx);
    }
}

#[cfg(test)]
mod tests;
