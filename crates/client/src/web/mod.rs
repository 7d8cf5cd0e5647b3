//! The browser shell (wasm only): the [`Client`] JavaScript class and the sync loop that
//! drives the sans-IO [`Engine`] with WebSockets, timers and the IndexedDB store.
//!
//! One loop owns the engine, the sockets and the store, and takes its inputs from one
//! queue ([`inbox`]). While a commit is in flight it keeps taking socket messages and
//! validating (the engine gathers the next commit meanwhile); calls that need the store
//! wait for the commit. What is in flight is bounded: one request per sync (its answer is
//! at most `request_size` headers), one commit, and the next commit's gathering.

mod identity;
mod inbox;
mod js;
mod socket;

use std::cell::RefCell;
use std::pin::pin;
use std::rc::Rc;

use futures_util::future::{Either, select};
use js_sys::{Array, Function, Promise, Reflect};
use lightwire_chain::{BlockHash, Chain, Entry, Network, WINDOW_LEN, merkle};
use lightwire_store::{HeaderStore, IdbStore, Pending, StoreError, Tip};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

use crate::engine::{Action, Engine, Event, GatewayState};
use crate::peer::{ConnectString, decode_headers};
use crate::sync::{DEFAULT_COMMIT_EVERY, DEFAULT_REQUEST};
use inbox::{Call, Inbox, Input, Query};
use socket::Socket;

/// The options `Client.open` takes (a plain object).
struct Options {
    network: Network,
    gateways: Vec<ConnectString>,
    store_name: String,
    commit_every: usize,
    request_size: u32,
    progress_ms: f64,
}

fn options(o: &JsValue) -> Result<Options, JsValue> {
    let get = |k: &str| Reflect::get(o, &k.into()).unwrap_or(JsValue::UNDEFINED);
    let network: Network = get("network")
        .as_string()
        .unwrap_or_else(|| "mainnet".into())
        .parse()
        .map_err(|e: lightwire_chain::UnknownNetwork| js::error("InvalidOptions", e.to_string()))?;
    let list = get("gateways");
    if !Array::is_array(&list) || Array::from(&list).length() == 0 {
        return Err(js::error(
            "InvalidOptions",
            "options.gateways must list at least one gateway (ws://host:port#<node id>)",
        ));
    }
    let mut gateways = Vec::new();
    for item in Array::from(&list).iter() {
        let s = item.as_string().unwrap_or_default();
        let c = ConnectString::parse(&s)
            .map_err(|e| js::error("InvalidGateway", format!("{s:?}: {e}")))?;
        gateways.push(c);
    }
    let number = |k: &str, default: f64, min: f64, max: f64| -> Result<f64, JsValue> {
        match get(k).as_f64() {
            None => Ok(default),
            Some(v) if (min..=max).contains(&v) => Ok(v),
            Some(v) => Err(js::error(
                "InvalidOptions",
                format!("options.{k} is {v}; it must be between {min} and {max}"),
            )),
        }
    };
    Ok(Options {
        store_name: get("storeName")
            .as_string()
            .unwrap_or_else(|| format!("lightwire-{network}")),
        network,
        gateways,
        commit_every: number("commitEvery", DEFAULT_COMMIT_EVERY as f64, 1.0, 1e6)? as usize,
        request_size: number("requestSize", DEFAULT_REQUEST as f64, 1.0, 100_000.0)? as u32,
        progress_ms: number("progressIntervalMs", 250.0, 10.0, 60_000.0)?,
    })
}

/// Bytes of a WebSocket message copied into wasm at a time: a gateway's message (one
/// frame of at most 65,569 bytes) fits in one piece.
const RX_CHUNK: usize = 128 * 1024;

/// What the loop last knew, for the synchronous getters.
#[derive(Default)]
struct Status {
    stored: Option<Tip>,
    stored_time: u32,
    validated_height: u32,
    target: Option<u32>,
    validated: u64,
    counters: crate::engine::Counters,
    idb: lightwire_store::IdbStats,
    states: Vec<GatewayState>,
    urls: Vec<String>,
    synced: bool,
    started_ms: f64,
    /// Time spent taking socket messages (decrypting and validating), in milliseconds.
    receive_ms: f64,
}

/// The lightwire light client: syncs headers from its gateways into IndexedDB and keeps
/// them current. Create it with `Client.open`.
#[wasm_bindgen]
pub struct Client {
    inbox: Rc<Inbox>,
    status: Rc<RefCell<Status>>,
}

#[wasm_bindgen]
impl Client {
    /// Open the store, read (or create) the client key, and start syncing from the given
    /// gateways. `options`: `{ network, gateways: [connect strings], storeName?,
    /// commitEvery?, requestSize?, progressIntervalMs? }`. `onEvent` gets every event
    /// (plain objects with a `type`).
    pub async fn open(options_: JsValue, on_event: Function) -> Result<Client, JsValue> {
        let o = options(&options_)?;
        let params = o.network.params();
        let store = IdbStore::open(&o.store_name, params)
            .await
            .map_err(|e| js::error("StoreError", e.to_string()))?;
        let (key, chain, stored) = match prepare(&store, &o.store_name).await {
            Ok(v) => v,
            Err(e) => {
                // Closed, so that the store can be deleted or opened again.
                store.close();
                return Err(e);
            }
        };
        let mut engine = Engine::new(chain, &stored, o.gateways.clone(), key);
        engine.syncer_mut().commit_every = o.commit_every;
        engine.syncer_mut().request_size = o.request_size;
        if let Err(e) = seed_locator(&store, &mut engine, stored.height).await {
            store.close();
            return Err(js::error("StoreError", e.to_string()));
        }
        let inbox = Rc::new(Inbox::default());
        let status = Rc::new(RefCell::new(Status {
            stored: Some(stored),
            validated_height: stored.height,
            states: vec![GatewayState::Connecting; o.gateways.len()],
            urls: o.gateways.iter().map(|g| g.url.clone()).collect(),
            started_ms: js::mono_ms(),
            ..Status::default()
        }));
        let stored_time = store
            .header(stored.height)
            .await
            .ok()
            .flatten()
            .map_or(0, |h| h.time);
        status.borrow_mut().stored_time = stored_time;
        let tick = {
            let inbox = inbox.clone();
            Closure::<dyn FnMut()>::new(move || inbox.push(Input::Tick))
        };
        let interval = js::set_interval(tick.as_ref().unchecked_ref(), 1000.0);
        let n = o.gateways.len();
        let net = Net {
            engine,
            sockets: (0..n).map(|_| None).collect(),
            gens: vec![0; n],
            inbox: inbox.clone(),
            status: status.clone(),
            on_event,
            rx: vec![0; RX_CHUNK],
            calls: Vec::new(),
            stop_calls: Vec::new(),
            progress_ms: o.progress_ms,
            last_progress: Progress::default(),
            was_synced: false,
            _tick: tick,
            interval,
        };
        wasm_bindgen_futures::spawn_local(run(net, store));
        Ok(Client { inbox, status })
    }

    /// The stored tip: `{height, hash, time}`.
    pub fn tip(&self) -> JsValue {
        let s = self.status.borrow();
        match s.stored {
            Some(t) => js::object(&[
                ("height", t.height.into()),
                ("hash", js::hash(&t.hash)),
                ("time", s.stored_time.into()),
            ]),
            None => JsValue::NULL,
        }
    }

    /// Each gateway's URL and state: `[{url, state}]`.
    pub fn gateways(&self) -> Array {
        let s = self.status.borrow();
        s.urls
            .iter()
            .zip(&s.states)
            .map(|(u, st)| js::object(&[("url", u.into()), ("state", st.name().into())]))
            .collect()
    }

    /// A snapshot of the counters: allocations in wasm (count, bytes, live), wasm memory,
    /// messages and bytes each way, IndexedDB commits and their time, headers validated.
    pub fn metrics(&self) -> JsValue {
        let s = self.status.borrow();
        let a = lightwire_alloc::snapshot();
        let c = s.counters;
        js::object(&[
            ("allocations", (a.allocations as f64).into()),
            ("allocatedBytes", (a.bytes_allocated as f64).into()),
            ("liveBytes", (a.live_bytes() as f64).into()),
            ("wasmMemoryBytes", (wasm_memory() as f64).into()),
            ("messagesIn", (c.messages_in as f64).into()),
            ("bytesIn", (c.bytes_in as f64).into()),
            ("messagesOut", (c.messages_out as f64).into()),
            ("bytesOut", (c.bytes_out as f64).into()),
            ("reconnects", (c.reconnects as f64).into()),
            ("idbCommits", (s.idb.commits as f64).into()),
            ("idbCommitMs", s.idb.commit_ms.into()),
            ("idbLastCommitMs", s.idb.last_commit_ms.into()),
            ("idbHeadersWritten", (s.idb.headers_written as f64).into()),
            ("headersValidated", (s.validated as f64).into()),
            ("validatedHeight", s.validated_height.into()),
            ("storedHeight", s.stored.map_or(0, |t| t.height).into()),
            (
                "targetHeight",
                s.target.map_or(JsValue::NULL, JsValue::from),
            ),
            ("synced", s.synced.into()),
            ("elapsedMs", (js::mono_ms() - s.started_ms).into()),
            ("receiveMs", s.receive_ms.into()),
        ])
    }

    /// The stored header at `height`, or `null`.
    #[wasm_bindgen(js_name = headerAt)]
    pub fn header_at(&self, height: f64) -> Promise {
        match whole(height, "the height") {
            Ok(h) => self.call(Query::HeaderAt(h)),
            Err(e) => Promise::reject(&e),
        }
    }

    /// The stored header with this hash (display hex), or `null`.
    #[wasm_bindgen(js_name = headerByHash)]
    pub fn header_by_hash(&self, hash: String) -> Promise {
        self.call(Query::HeaderByHash(hash))
    }

    /// Check that transaction `txid` at position `index` of block `blockHash` is committed
    /// to by that block's stored header, through `merkleBranch` (sibling hashes, lowest
    /// level first; all display hex). Resolves `{height, confirmations, blockHash}`; rejects
    /// with an Error naming the rule (`UnknownBlock`, `MerkleError`, `InvalidArgument`).
    #[wasm_bindgen(js_name = verifyInclusion)]
    pub fn verify_inclusion(
        &self,
        txid: String,
        merkle_branch: Vec<String>,
        index: f64,
        block_hash: String,
    ) -> Promise {
        match whole(index, "the transaction index") {
            Ok(index) => self.call(Query::VerifyInclusion {
                txid,
                branch: merkle_branch,
                index,
                block_hash,
            }),
            Err(e) => Promise::reject(&e),
        }
    }

    /// Stop syncing, close the connections and the store. Resolves when done.
    pub fn stop(&self) -> Promise {
        self.call(Query::Stop)
    }

    fn call(&self, query: Query) -> Promise {
        let inbox = self.inbox.clone();
        let mut query = Some(query);
        Promise::new(&mut |resolve, reject| {
            if let Some(query) = query.take() {
                inbox.push(Input::Call(Call {
                    query,
                    resolve,
                    reject,
                }));
            }
        })
    }
}

/// A JavaScript number that must be a whole number from 0 to 2^32 - 1.
fn whole(v: f64, what: &str) -> Result<u32, JsValue> {
    if v.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&v) {
        Ok(v as u32)
    } else {
        Err(js::error(
            "InvalidArgument",
            format!("{what} must be a whole number from 0 to 4294967295, not {v}"),
        ))
    }
}

fn wasm_memory() -> usize {
    core::arch::wasm32::memory_size(0) * 65_536
}

/// The client key, the validation state and the stored tip, read once at open.
async fn prepare(
    store: &IdbStore,
    name: &str,
) -> Result<(lightwire_noise::SecretKey, Chain, Tip), JsValue> {
    let key = identity::static_key(&format!("{name}-identity"))
        .await
        .map_err(|e| js::error("KeyError", e))?;
    let store_error = |e: StoreError| {
        js::error(
            "StoreError",
            format!("the stored chain could not be read: {e}"),
        )
    };
    let chain = resume(store).await.map_err(store_error)?;
    let stored = store.tip().await.map_err(store_error)?;
    Ok((key, chain, stored))
}

/// The validation state rebuilt from the store's last `WINDOW_LEN` headers.
async fn resume(store: &IdbStore) -> Result<Chain, StoreError> {
    let tip = store.tip().await?.height;
    let from = tip.saturating_sub(WINDOW_LEN as u32 - 1);
    let entries = store.entries(from, tip).await?;
    Chain::resume(store.params(), &entries).ok_or(StoreError::Corrupt {
        what: "stored headers do not form a chain",
    })
}

/// Give a resumed engine's locator hashes from below its validation window (a few period
/// starts, read from the store), so that a gateway on a deeper fork answers from near it.
async fn seed_locator(store: &IdbStore, engine: &mut Engine, tip: u32) -> Result<(), StoreError> {
    let mut heights = Vec::new();
    engine.syncer().seed_heights(tip, &mut heights);
    let mut seeds = Vec::with_capacity(heights.len());
    for h in heights {
        if let Some(header) = store.header(h).await? {
            seeds.push((h, header.block_hash()));
        }
    }
    engine.syncer_mut().seed_locator(&seeds);
    Ok(())
}

/// For a batch whose parent `parent` is below the window: how many of its first headers
/// the store holds on the best chain right after the parent, and stored entries ending at
/// the last of those, enough to validate what follows; `None` if the parent is not stored.
async fn ancestors(
    store: &IdbStore,
    parent: &BlockHash,
    batch: &[u8],
) -> Result<Option<(Vec<Entry>, usize)>, StoreError> {
    let Some(height) = store.height_of(parent).await? else {
        return Ok(None);
    };
    let hashes: Vec<BlockHash> = decode_headers(batch).map(|h| h.block_hash()).collect();
    let mut heights = Vec::with_capacity(hashes.len());
    store.heights_of(&hashes, &mut heights).await?;
    let known = heights
        .iter()
        .enumerate()
        .take_while(|(i, h)| **h == Some(height + 1 + *i as u32))
        .count();
    let end = height + known as u32;
    let from = end.saturating_sub(WINDOW_LEN as u32 - 1);
    Ok(Some((store.entries(from, end).await?, known)))
}

#[derive(Default, Clone, Copy)]
struct Progress {
    at_ms: f64,
    validated: u64,
    bytes_in: u64,
}

/// The loop's state apart from the store (which a commit in flight borrows).
struct Net {
    engine: Engine,
    sockets: Vec<Option<Socket>>,
    gens: Vec<u32>,
    inbox: Rc<Inbox>,
    status: Rc<RefCell<Status>>,
    on_event: Function,
    /// Where a message's bytes are copied into wasm (reused).
    rx: Vec<u8>,
    /// Calls that wait for the commit in flight.
    calls: Vec<Call>,
    stop_calls: Vec<Call>,
    progress_ms: f64,
    last_progress: Progress,
    was_synced: bool,
    _tick: Closure<dyn FnMut()>,
    interval: JsValue,
}

impl Net {
    fn emit(&self, event: JsValue) {
        // An exception in the application's handler must not stop the sync.
        let _ = self.on_event.call1(&JsValue::NULL, &event);
    }

    /// Take one input; returns a call that needs the store.
    fn handle(&mut self, input: Input) -> Option<Call> {
        let now = js::now_ms();
        match input {
            Input::Opened { g, epoch } if epoch == self.gens[g] => match identity::random_key() {
                Ok(ephemeral) => self.engine.opened(g, ephemeral, now),
                Err(e) => self.engine.closed(g, &e, now, js::random()),
            },
            Input::Message { g, epoch, data } if epoch == self.gens[g] => {
                let started = js::mono_ms();
                // Copied in pieces of at most RX_CHUNK (the peer takes any chunking), so a
                // hostile gateway's huge message cannot grow wasm memory.
                let bytes = js_sys::Uint8Array::new(&data);
                let len = bytes.length();
                let mut at = 0;
                while at < len && self.engine.state(g) != GatewayState::Bad {
                    let n = (len - at).min(RX_CHUNK as u32);
                    bytes
                        .subarray(at, at + n)
                        .copy_to(&mut self.rx[..n as usize]);
                    self.engine
                        .receive(g, &self.rx[..n as usize], now, js::random());
                    at += n;
                }
                self.status.borrow_mut().receive_ms += js::mono_ms() - started;
            }
            Input::Closed { g, epoch, reason } if epoch == self.gens[g] => {
                self.sockets[g] = None;
                self.engine.closed(g, &reason, now, js::random());
            }
            Input::ConnectDue { g } => {
                if !self.engine.is_stopped() && self.engine.state(g) == GatewayState::BackingOff {
                    self.connect(g);
                }
            }
            Input::Tick => self.engine.tick(now, js::random()),
            Input::Call(call) => return Some(call),
            // Events of a socket already replaced.
            Input::Opened { .. } | Input::Message { .. } | Input::Closed { .. } => {}
        }
        None
    }

    fn connect(&mut self, g: usize) {
        self.gens[g] = self.gens[g].wrapping_add(1);
        let now = js::now_ms();
        match Socket::open(self.engine.url(g), g, self.gens[g], &self.inbox) {
            Ok(s) => {
                self.sockets[g] = Some(s);
                self.engine.connecting(g, now);
            }
            Err(e) => {
                self.engine.connecting(g, now);
                self.engine.closed(g, &e, now, js::random());
            }
        }
    }

    /// Send what is due, carry out the engine's actions, pass its events on.
    fn pump(&mut self) {
        self.engine.schedule();
        while let Some(action) = self.engine.poll_action() {
            match action {
                Action::Connect { gateway, after_ms } if after_ms <= 0.0 => self.connect(gateway),
                Action::Connect { gateway, after_ms } => {
                    let inbox = self.inbox.clone();
                    let due =
                        Closure::once_into_js(move || inbox.push(Input::ConnectDue { g: gateway }));
                    js::set_timeout(due.unchecked_ref(), after_ms);
                }
                Action::Close { gateway } => {
                    self.gens[gateway] = self.gens[gateway].wrapping_add(1);
                    self.sockets[gateway] = None;
                }
            }
        }
        for g in 0..self.sockets.len() {
            if let (Some(socket), Some(bytes)) = (&self.sockets[g], self.engine.transmit(g)) {
                if socket.send(bytes) {
                    self.engine.sent(g);
                }
            }
        }
        while let Some(event) = self.engine.poll_event() {
            let e = self.event(event);
            self.emit(e);
        }
        self.update_status();
        self.progress(false);
    }

    fn event(&mut self, event: Event) -> JsValue {
        match event {
            Event::Gateway {
                gateway,
                state,
                reason,
            } => {
                self.status.borrow_mut().states[gateway] = state;
                js::object(&[
                    ("type", "gateway".into()),
                    ("gateway", gateway.into()),
                    ("url", self.engine.url(gateway).into()),
                    ("state", state.name().into()),
                    ("reason", reason.map_or(JsValue::NULL, JsValue::from)),
                ])
            }
            Event::Reorg {
                old_tip,
                new_tip,
                depth,
            } => js::object(&[
                ("type", "reorg".into()),
                ("oldTip", js::tip(&old_tip)),
                ("newTip", js::tip(&new_tip)),
                ("depth", depth.into()),
            ]),
            Event::Rejected { gateway, reason } => js::object(&[
                ("type", "rejected".into()),
                ("gateway", gateway.into()),
                ("url", self.engine.url(gateway).into()),
                ("reason", reason.into()),
            ]),
            Event::Warning { gateway, text } => js::object(&[
                ("type", "warning".into()),
                ("gateway", gateway.into()),
                ("url", self.engine.url(gateway).into()),
                ("text", text.map_or(JsValue::NULL, JsValue::from)),
            ]),
        }
    }

    fn update_status(&mut self) {
        let mut s = self.status.borrow_mut();
        let syncer = self.engine.syncer();
        s.validated_height = syncer.tip().height;
        s.target = syncer.target();
        s.validated = syncer.validated;
        s.counters = self.engine.counters();
        s.synced = self.engine.is_synced();
    }

    /// A progress event, at most every `progress_ms` (or now, if `force`, or when the
    /// synced state flips).
    fn progress(&mut self, force: bool) {
        let now = js::mono_ms();
        let synced = self.engine.is_synced();
        let flip = synced != self.was_synced;
        if !force && !flip && now - self.last_progress.at_ms < self.progress_ms {
            return;
        }
        self.was_synced = synced;
        let (validated, bytes_in, stored, target, height) = {
            let s = self.status.borrow();
            (
                s.validated,
                s.counters.bytes_in,
                s.stored.map_or(0, |t| t.height),
                s.target,
                s.validated_height,
            )
        };
        let last = self.last_progress;
        let secs = ((now - last.at_ms) / 1000.0).max(1e-3);
        let event = js::object(&[
            ("type", "progress".into()),
            ("height", height.into()),
            ("storedHeight", stored.into()),
            ("targetHeight", target.unwrap_or(height.max(stored)).into()),
            (
                "headersPerSecond",
                ((validated - last.validated) as f64 / secs).into(),
            ),
            (
                "bytesPerSecond",
                ((bytes_in - last.bytes_in) as f64 / secs).into(),
            ),
            ("synced", synced.into()),
        ]);
        self.last_progress = Progress {
            at_ms: now,
            validated,
            bytes_in,
        };
        self.emit(event);
    }

    fn committed(&mut self, store: &IdbStore, tip: Tip, time: u32) {
        self.engine.committed(js::now_ms());
        {
            let mut s = self.status.borrow_mut();
            s.stored = Some(tip);
            s.stored_time = time;
            s.idb = store.stats();
        }
        self.emit(js::object(&[
            ("type", "tip".into()),
            ("height", tip.height.into()),
            ("hash", js::hash(&tip.hash)),
            ("time", time.into()),
        ]));
        self.pump();
    }

    /// A store failure ends the sync: an `error` event with a sentence for the user.
    /// (What is stored stays as the last completed commit left it; opening the client
    /// again resumes from there.)
    fn store_failed(&mut self, e: &StoreError) {
        let message = match e {
            StoreError::QuotaExceeded => {
                "the browser refused to store more headers (storage quota reached)".to_string()
            }
            StoreError::ChangedElsewhere | StoreError::Closed => {
                "another tab or window took over this header store; this one stopped syncing"
                    .to_string()
            }
            e => format!("storing headers failed ({e}); open the client again to resume"),
        };
        self.emit(js::object(&[
            ("type", "error".into()),
            ("kind", "StoreError".into()),
            ("message", message.into()),
            ("fatal", true.into()),
        ]));
        self.engine.stop(js::now_ms());
        self.pump();
    }

    fn stopping(&mut self, call: Call) {
        if !self.engine.is_stopped() {
            self.engine.stop(js::now_ms());
            self.pump();
        }
        self.stop_calls.push(call);
    }
}

async fn run(mut net: Net, mut store: IdbStore) {
    let mut spare = Pending::new(0);
    loop {
        net.pump();
        for call in std::mem::take(&mut net.calls) {
            serve(&mut net, &store, call).await;
        }
        if net.engine.is_stopped() {
            break;
        }
        if let Some((parent, batch)) = net.engine.need_ancestors() {
            let found = ancestors(&store, &parent, batch).await;
            match found {
                Ok(found) => {
                    let found = found.as_ref().map(|(e, known)| (&e[..], *known));
                    net.engine.on_ancestors(found, js::now_ms(), js::random());
                }
                Err(e) => {
                    net.store_failed(&e);
                    break;
                }
            }
            continue;
        }
        if let Some(durability) = net.engine.take_commit(&mut spare) {
            let result = {
                let mut commit = pin!(store.commit(spare.batch(durability)));
                loop {
                    match select(commit.as_mut(), net.inbox.next()).await {
                        Either::Left((r, _)) => break r,
                        Either::Right((input, _)) => {
                            if let Some(call) = net.handle(input) {
                                match call.query {
                                    Query::Stop => net.stopping(call),
                                    _ => net.calls.push(call),
                                }
                            }
                            net.pump();
                        }
                    }
                }
            };
            match result {
                Ok(tip) => {
                    let time = spare
                        .batch(durability)
                        .entries
                        .last()
                        .map_or(0, |e| e.header.time);
                    net.committed(&store, tip, time);
                }
                Err(e) => {
                    net.store_failed(&e);
                    break;
                }
            }
            continue;
        }
        let input = net.inbox.next().await;
        if let Some(call) = net.handle(input) {
            serve(&mut net, &store, call).await;
        }
    }
    net.inbox.close();
    js::clear_interval(&net.interval);
    net.update_status();
    net.progress(true);
    for call in std::mem::take(&mut net.calls) {
        let _ = call.reject.call1(
            &JsValue::NULL,
            &js::error("Stopped", "the client was stopped"),
        );
    }
    store.close();
    for call in std::mem::take(&mut net.stop_calls) {
        let _ = call.resolve.call0(&JsValue::NULL);
    }
}

/// Answer a call that reads the store.
async fn serve(net: &mut Net, store: &IdbStore, call: Call) {
    let result = match &call.query {
        Query::Stop => {
            net.stopping(call);
            return;
        }
        Query::HeaderAt(h) => header_at(store, *h).await,
        Query::HeaderByHash(hex) => match js::parse_hash(hex, "the block hash") {
            Ok(hash) => match store.height_of(&hash).await {
                Ok(Some(h)) => header_at(store, h).await,
                Ok(None) => Ok(JsValue::NULL),
                Err(e) => Err(js::error("StoreError", e.to_string())),
            },
            Err(e) => Err(e),
        },
        Query::VerifyInclusion {
            txid,
            branch,
            index,
            block_hash,
        } => verify_inclusion(store, txid, branch, *index, block_hash).await,
    };
    let _ = match result {
        Ok(v) => call.resolve.call1(&JsValue::NULL, &v),
        Err(e) => call.reject.call1(&JsValue::NULL, &e),
    };
}

async fn header_at(store: &IdbStore, height: u32) -> Result<JsValue, JsValue> {
    match store.header(height).await {
        Ok(Some(h)) => Ok(js::header(height, &h)),
        Ok(None) => Ok(JsValue::NULL),
        Err(e) => Err(js::error("StoreError", e.to_string())),
    }
}

async fn verify_inclusion(
    store: &IdbStore,
    txid: &str,
    branch: &[String],
    index: u32,
    block_hash: &str,
) -> Result<JsValue, JsValue> {
    let leaf = js::parse_hash(txid, "the txid")?.0;
    let mut siblings = Vec::with_capacity(branch.len());
    for (i, s) in branch.iter().enumerate() {
        siblings.push(js::parse_hash(s, &format!("Merkle branch hash {i}"))?.0);
    }
    let block = js::parse_hash(block_hash, "the block hash")?;
    let store_err = |e: StoreError| js::error("StoreError", e.to_string());
    let Some(height) = store.height_of(&block).await.map_err(store_err)? else {
        return Err(js::error(
            "UnknownBlock",
            format!("block {block_hash} is not on the stored best chain"),
        ));
    };
    let header = store
        .header(height)
        .await
        .map_err(store_err)?
        .ok_or_else(|| js::error("UnknownBlock", "the block was replaced by a reorg"))?;
    merkle::verify(&leaf, &siblings, index, &header.merkle_root)
        .map_err(|e| js::error("MerkleError", e.to_string()))?;
    let tip = store.tip().await.map_err(store_err)?.height;
    Ok(js::object(&[
        ("height", height.into()),
        ("confirmations", (tip - height + 1).into()),
        ("blockHash", js::hash(&block)),
    ]))
}
