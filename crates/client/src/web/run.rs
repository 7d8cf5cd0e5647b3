//! The sync loop: one task owns the engine, the sockets and the store, and takes its
//! inputs from one queue ([`super::inbox`]). While a commit is in flight it keeps taking
//! socket messages and validating (the engine gathers the next commit meanwhile); calls
//! that need the store wait for the commit. What is in flight is bounded: one request per
//! sync (its answer is at most `request_size` headers), one commit, and the next commit's
//! gathering. One timer is armed for the engine's next deadline (and, while syncing, the
//! next progress event): an idle tab is not woken.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use js_sys::Function;
use lightwire_proto::Millis;
use lightwire_store::{IdbStore, StoreError};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

use super::identity;
use super::inbox::{Call, Inbox, Input, Query, WalletQuery};
use super::js;
use super::queries;
use super::socket::Socket;
use super::status::Status;
use crate::dispute::Verdict;
use crate::driver::{self, Host};
use crate::engine::{Action, Engine, Event, GatewayState};
use crate::events::{self, js_event, js_event_from, js_object};
use crate::ids::GatewayId;
use crate::pipeline::{Committed, Pipeline};
use crate::reason::TransportError;
use crate::wallet::WalletChange;
use crate::wallet::blocks::{WalletId, WalletSet};
use lightwire_wallet::labels::{LabelKind, Labels};

/// Bytes of a WebSocket message copied into wasm at a time: a gateway's message (one
/// frame of at most 65,569 bytes) fits in one piece.
const RX_CHUNK: usize = 128 * 1024;

#[derive(Default, Clone, Copy)]
struct Progress {
    at_ms: f64,
    validated: u64,
    bytes_in: u64,
}

/// The loop's state apart from the store (which a commit in flight borrows).
pub struct Net {
    engine: Engine,
    sockets: Vec<Option<Socket>>,
    gens: Vec<u32>,
    /// The mirrors' files being fetched, one of each kind at most (aborted when dropped).
    fetching: Vec<super::mirror::Fetching>,
    /// The files asked for ahead of the engine, one of each kind at most.
    prefetched: Vec<super::mirror::Prefetch>,
    inbox: Rc<Inbox>,
    status: Rc<RefCell<Status>>,
    on_event: Function,
    /// Where a message's bytes are copied into wasm (reused).
    rx: Vec<u8>,
    /// The package's workers for the receiver's filter checks, if it gave them.
    #[cfg(feature = "silent-payments")]
    scan_pool: Option<super::scan_pool::ScanPool>,
    /// Calls the loop ended without answering (rejected as stopped).
    calls: Vec<Call>,
    stop_calls: Vec<Call>,
    /// The `scan` call waiting for the scan to reach the stored tip.
    scan_call: Option<Call>,
    /// The `watch` calls waiting for their wallet to be synced.
    watch_calls: Vec<(Call, WalletId)>,
    /// The `broadcast` calls waiting for their gateways, by request id.
    broadcast_calls: Vec<(u32, Call)>,
    /// The `createPsbt` calls waiting for their wallet to apply every block matched.
    psbt_calls: Vec<(Call, WalletId)>,
    /// Calls done, with their results, waiting for the wallet that recorded what they
    /// did to be saved (`None`: every wallet): `broadcast` (answered by its gateways),
    /// `importLabels`, `setLabel`, `removeWallet`.
    saving: Vec<(Call, JsValue, Option<WalletId>)>,
    /// `feeRates()` calls waiting for their gateways, by request id.
    fee_calls: Vec<(u32, Call)>,
    /// Filters and filter bytes at the last scan progress event.
    scan_progress: (u64, u64),
    progress_ms: f64,
    last_progress: Progress,
    was_synced: bool,
    /// The one timer: its callback, the deadline it is armed for, and its id; `fired` is
    /// set by the callback, so that a timer whose `Timeout` is still in the inbox is
    /// neither cleared nor taken for one armed after it.
    on_timer: Closure<dyn FnMut()>,
    timer: Option<(Millis, JsValue)>,
    fired: Rc<Cell<bool>>,
    /// Whether a commit is in flight (for the wait times in `metrics()`).
    committing: bool,
}

fn now() -> Millis {
    Millis::from_f64(js::now_ms())
}

impl Net {
    /// The loop's state for `engine` with `gateways` gateways.
    pub fn new(
        engine: Engine,
        gateways: usize,
        inbox: &Rc<Inbox>,
        status: &Rc<RefCell<Status>>,
        on_event: Function,
        progress_ms: f64,
    ) -> Net {
        let fired = Rc::new(Cell::new(false));
        let on_timer = {
            let inbox = inbox.clone();
            let fired = fired.clone();
            Closure::<dyn FnMut()>::new(move || {
                js::timer_fired();
                fired.set(true);
                inbox.push(Input::Timeout);
            })
        };
        Net {
            engine,
            sockets: (0..gateways).map(|_| None).collect(),
            gens: vec![0; gateways],
            fetching: Vec::with_capacity(2),
            prefetched: Vec::with_capacity(2),
            inbox: inbox.clone(),
            status: status.clone(),
            on_event,
            rx: vec![0; RX_CHUNK],
            #[cfg(feature = "silent-payments")]
            scan_pool: None,
            calls: Vec::new(),
            stop_calls: Vec::new(),
            scan_call: None,
            watch_calls: Vec::new(),
            broadcast_calls: Vec::new(),
            saving: Vec::new(),
            psbt_calls: Vec::new(),
            fee_calls: Vec::new(),
            scan_progress: (0, 0),
            progress_ms,
            last_progress: Progress::default(),
            was_synced: false,
            on_timer,
            timer: None,
            fired,
            committing: false,
        }
    }

    /// Hand the receiver's filter checks to `pool` from now on.
    #[cfg(feature = "silent-payments")]
    pub fn use_scan_pool(&mut self, pool: super::scan_pool::ScanPool) {
        self.engine.offload_silent(true);
        self.scan_pool = Some(pool);
    }

    fn emit(&self, event: JsValue) {
        // An exception in the application's handler must not stop the sync.
        let _ = self.on_event.call1(&JsValue::NULL, &event);
    }

    /// Take one input; an application's call comes back.
    fn take(&mut self, input: Input) -> Option<Call> {
        match input {
            Input::Opened { g, epoch } if epoch == self.gens[g.index()] => {
                match identity::random_key() {
                    Ok(ephemeral) => self.engine.opened(g, ephemeral, now()),
                    Err(_) => self.engine.closed(g, TransportError::NoRandomness, now()),
                }
            }
            Input::Message { g, epoch, data } if epoch == self.gens[g.index()] => {
                let started = js::mono_ms();
                let now = now();
                // Copied in pieces of at most RX_CHUNK (the connection takes any chunking),
                // so a hostile gateway's huge message cannot grow wasm memory.
                let bytes = js_sys::Uint8Array::new(&data);
                let len = bytes.length();
                let mut at = 0;
                while at < len && self.engine.state(g) != GatewayState::Bad {
                    let n = (len - at).min(RX_CHUNK as u32);
                    bytes
                        .subarray(at, at + n)
                        .copy_to(&mut self.rx[..n as usize]);
                    self.engine.receive(g, &self.rx[..n as usize], now);
                    at += n;
                }
                self.status.borrow_mut().receive_ms += js::mono_ms() - started;
            }
            Input::Closed { g, epoch, why } if epoch == self.gens[g.index()] => {
                self.sockets[g.index()] = None;
                self.engine.closed(g, why, now());
            }
            Input::Manifest { m, result } => self.engine.on_manifest(m, result, now()),
            Input::MirrorData { fetch, data } => {
                let started = js::mono_ms();
                let now = now();
                // Copied as a gateway's message is, in pieces of at most RX_CHUNK.
                let len = data.length();
                let mut at = 0;
                while at < len {
                    let n = (len - at).min(RX_CHUNK as u32);
                    data.subarray(at, at + n)
                        .copy_to(&mut self.rx[..n as usize]);
                    self.engine.mirror_data(fetch, &self.rx[..n as usize], now);
                    at += n;
                }
                self.status.borrow_mut().receive_ms += js::mono_ms() - started;
            }
            Input::MirrorEnd { fetch, result } => {
                self.fetching.retain(|f| f.fetch != fetch);
                self.engine.mirror_end(fetch, result, now());
            }
            Input::MirrorWrongHash { m, name } => self.engine.mirror_wrong_hash(m, name, now()),
            Input::Timeout => {
                // A timer armed after the one that fired is still armed.
                if self.fired.get() {
                    self.timer = None;
                }
                self.engine.handle_timeout(now());
            }
            #[cfg(feature = "silent-payments")]
            Input::Scanned { tag, height, code } => {
                // Our own workers' answer: a code that is none is the pool's bug, taken
                // as "cannot say no".
                let r = crate::silent_scan::Scanned::from_code(code)
                    .unwrap_or(crate::silent_scan::Scanned::Match);
                self.engine.silent_scanned(tag, height, r);
            }
            Input::Call(call) => return Some(call),
            // Events of a socket already replaced.
            Input::Opened { .. } | Input::Message { .. } | Input::Closed { .. } => {}
        }
        None
    }

    fn connect(&mut self, g: GatewayId) {
        self.gens[g.index()] = self.gens[g.index()].wrapping_add(1);
        self.engine.connecting(g, now());
        match Socket::open(self.engine.url(g), g, self.gens[g.index()], &self.inbox) {
            Ok(s) => self.sockets[g.index()] = Some(s),
            Err(why) => self.engine.closed(g, why, now()),
        }
    }

    /// Send what is due, carry out the engine's actions, pass its events on, and arm the
    /// timer for the next deadline.
    fn pump(&mut self) {
        self.engine.schedule();
        while let Some(action) = self.engine.poll_action() {
            match action {
                Action::Connect { gateway } => self.connect(gateway),
                Action::Close { gateway } => {
                    self.gens[gateway.index()] = self.gens[gateway.index()].wrapping_add(1);
                    self.sockets[gateway.index()] = None;
                }
                Action::FetchManifest { mirror } => {
                    if let Some(url) = self.engine.mirror_url(mirror, None) {
                        super::mirror::fetch_manifest(url, mirror, self.inbox.clone());
                    }
                }
                Action::Fetch { mirror, fetch } => {
                    let url = self.engine.mirror_url(mirror, Some(fetch));
                    let ahead = url.as_ref().and_then(|u| {
                        let i = self.prefetched.iter().position(|p| p.url == *u)?;
                        Some(self.prefetched.swap_remove(i))
                    });
                    let inbox = self.inbox.clone();
                    // What its bytes must hash to, when the shell checks it (once a file).
                    let shell = self.engine.shell_hashes_file(fetch);
                    let hashed = shell.then(super::mirror::subtle).flatten().and_then(|_| {
                        let (m, file) = self.engine.mirror_file(fetch)?;
                        Some(super::mirror::Hashed {
                            m,
                            name: file.name.clone(),
                            sha256: file.check.sha256,
                        })
                    });
                    let from = self.engine.mirror_range(fetch);
                    let started = url.and_then(|u| {
                        super::mirror::fetch_file(u, (fetch, from), inbox, ahead, hashed)
                    });
                    // The file after it, asked now (one of each kind: a second would be a
                    // stale one, dropped and aborted).
                    if let Some(next) = self.engine.mirror_next_url(fetch) {
                        if self.prefetched.len() >= 2 {
                            self.prefetched.remove(0);
                        }
                        self.prefetched.extend(super::mirror::Prefetch::start(next));
                    }
                    match started {
                        Some(f) => self.fetching.push(f),
                        None => {
                            let why =
                                crate::engine::FetchError::Failed("no AbortController".into());
                            self.engine.mirror_end(fetch, Err(why), now());
                        }
                    }
                }
                // Dropped: aborted.
                Action::CancelFetch { fetch } => self.fetching.retain(|f| f.fetch != fetch),
            }
        }
        #[cfg(feature = "silent-payments")]
        if let Some(pool) = &self.scan_pool {
            while let Some(job) = self.engine.next_silent_job() {
                pool.post(&job);
            }
        }
        for g in (0..self.sockets.len()).map(GatewayId) {
            if let (Some(socket), Some(bytes)) =
                (&self.sockets[g.index()], self.engine.poll_transmit(g))
                && socket.send(bytes)
            {
                self.engine.sent(g);
            }
        }
        let mut changed = WalletSet::NONE;
        while let Some(event) = self.engine.poll_event() {
            if let Event::Wallet(id, _) = &event {
                changed = changed.with(WalletSet::of(*id));
            }
            let e = self.event(event);
            if !e.is_undefined() {
                self.emit(e);
            }
        }
        let tip = self.engine.syncer().tip().height;
        for id in changed.iter() {
            if let Some(w) = self.engine.wallet_of(id) {
                let b = balance_object(&w.balance(tip, 1));
                js::set(&b, "wallet", self.wallet_name(id));
                self.emit(js_event_from!(
                    events::BALANCE_CHANGED,
                    events::BALANCE_EVENT,
                    b
                ));
            }
        }
        // A broadcast (or a label) is answered once the wallet that recorded it is saved:
        // a tab closed right after still shows it (and its coins spent).
        if !self.saving.is_empty() {
            for (call, result, id) in std::mem::take(&mut self.saving) {
                if self.saved(id) {
                    let _ = call.resolve.call1(&JsValue::NULL, &result);
                } else {
                    self.saving.push((call, result, id));
                }
            }
        }
        for (call, id) in std::mem::take(&mut self.psbt_calls) {
            if self.engine.wallet_synced_of(id) {
                self.creating_psbt(call);
            } else {
                self.psbt_calls.push((call, id));
            }
        }
        // Answered once the wallet is saved too: a tab closed right after still has it.
        for (call, id) in std::mem::take(&mut self.watch_calls) {
            if self.engine.wallet_synced_of(id) && self.engine.wallet_saved_of(id) {
                let _ = call.resolve.call1(&JsValue::NULL, &self.wallet_summary(id));
            } else {
                self.watch_calls.push((call, id));
            }
        }
        self.update_status();
        self.progress(false);
        self.arm_timer();
        self.status.borrow_mut().timer_at = self.timer.as_ref().map(|(at, _)| *at);
    }

    /// One timer for the engine's next deadline and, while syncing, the next progress
    /// event; none when there is nothing to wait for. A timer already armed for an earlier
    /// moment is kept (firing early costs one idle `handle_timeout`), so the timer is not
    /// re-armed for every message while deadlines move later.
    fn arm_timer(&mut self) {
        let mut due = self.engine.poll_timeout();
        // For the stall trace in metrics(): the engine's deadline, taken once per pump.
        self.status.borrow_mut().deadline = due;
        // Progress events while headers are being fetched (not while the chain merely
        // lacks the network's minimum work with nothing in flight: then nothing changes).
        let scanning = self.engine.scan().is_some_and(|s| s.asked().is_some());
        if !self.engine.is_stopped() && (!self.engine.syncer().is_synced() || scanning) {
            let p = Millis::from_f64(js::now_ms() + self.progress_ms);
            due = Some(due.map_or(p, |d| d.min(p)));
        }
        let Some(due) = due else {
            return;
        };
        if self.timer.as_ref().is_some_and(|(at, _)| *at <= due) {
            return;
        }
        self.clear_timer();
        let delay = (due.as_f64() - js::now_ms()).max(0.0);
        let id = js::set_timeout(self.on_timer.as_ref().unchecked_ref(), delay);
        self.fired.set(false);
        self.timer = Some((due, id));
    }

    /// Forget the timer; clear it unless it fired.
    fn clear_timer(&mut self) {
        if let Some((_, id)) = self.timer.take()
            && !self.fired.get()
        {
            js::clear_timeout(&id);
        }
    }

    /// The event for the application (`undefined` for one that only answers a call).
    fn event(&mut self, event: Event) -> JsValue {
        match event {
            Event::FeeRates { id, rates, answers } => {
                if let Some(i) = self.fee_calls.iter().position(|(x, _)| *x == id) {
                    let (_, call) = self.fee_calls.remove(i);
                    let value = fee_rates_object(&rates, &answers, |g| self.engine.url(g).into());
                    let _ = call.resolve.call1(&JsValue::NULL, &value);
                }
                JsValue::UNDEFINED
            }
            Event::Gateway {
                gateway,
                state,
                reason,
            } => {
                self.status.borrow_mut().states[gateway.index()] = state;
                js_event!(events::GATEWAY {
                    "gateway": gateway.into(),
                    "url": self.engine.url(gateway).into(),
                    "state": state.name().into(),
                    "reason": reason
                        .as_ref()
                        .map_or(JsValue::NULL, |r| r.to_string().into()),
                    "code": reason.as_ref().map_or(JsValue::NULL, |r| r.code().into()),
                })
            }
            Event::Reorg {
                old_tip,
                new_tip,
                depth,
            } => js_event!(events::REORG {
                "oldTip": js::tip(&old_tip),
                "newTip": js::tip(&new_tip),
                "depth": depth.into(),
            }),
            Event::Rejected { gateway, reason } => {
                let (height, rule) = reason
                    .invalid_header()
                    .map_or((JsValue::NULL, JsValue::NULL), |(h, r)| {
                        (h.into(), r.into())
                    });
                js_event!(events::REJECTED {
                    "gateway": gateway.into(),
                    "url": self.engine.url(gateway).into(),
                    "reason": reason.to_string().into(),
                    "code": reason.code().into(),
                    "height": height,
                    "rule": rule,
                })
            }
            Event::FilterConflict { gateway, height } => js_event!(events::FILTER_CONFLICT {
                "gateway": gateway.into(),
                "url": self.engine.url(gateway).into(),
                "height": height.into(),
            }),
            Event::FilterDispute { gateway, verdict } => {
                let (name, height) = match verdict {
                    Verdict::TheirsWrong { height } => ("theirs-wrong", height),
                    Verdict::OursWrong { height, .. } => ("ours-wrong", height),
                    Verdict::OursUndefended { height, .. } => ("ours-undefended", height),
                    Verdict::Undecided { height } => ("undecided", height),
                };
                js_event!(events::FILTER_DISPUTE {
                    "gateway": gateway.into(),
                    "url": self.engine.url(gateway).into(),
                    "verdict": name.into(),
                    "height": height.into(),
                })
            }
            Event::WalletWaiting { height, reason } => js_event!(events::WALLET_WAITING {
                "height": height.into(),
                "reason": reason.name().into(),
            }),
            Event::Wallet(id, change) => {
                let wallet = self.wallet_name(id);
                let with = |o: JsValue| {
                    js::set(&o, "wallet", wallet.clone());
                    o
                };
                match change {
                    WalletChange::Found(t) => js_event_from!(
                        events::TRANSACTION_FOUND,
                        events::WALLET_TX_EVENT,
                        with(tx_object(&t))
                    ),
                    WalletChange::Withdrawn { txid, height } => {
                        js_event!(events::TRANSACTION_WITHDRAWN {
                            "txid": js::hash(&txid),
                            "height": height.into(),
                            "wallet": wallet,
                        })
                    }
                    WalletChange::Unconfirmed(t) => js_event_from!(
                        events::TRANSACTION_UNCONFIRMED,
                        events::UNCONFIRMED_TX_EVENT,
                        with(unconfirmed_object(&t))
                    ),
                    WalletChange::Dropped(d) => js_event!(events::TRANSACTION_DROPPED {
                        "txid": js::hash(&d.txid),
                        "reason": d.reason.name().into(),
                        "by": d.by.as_ref().map_or(JsValue::NULL, js::hash),
                        "wallet": wallet,
                    }),
                }
            }
            Event::Broadcast {
                id,
                txid,
                relayed,
                refused,
            } => {
                let refused_list: js_sys::Array = refused
                    .iter()
                    .map(|(g, status)| {
                        js::object(&[
                            ("gateway", (*g).into()),
                            ("url", self.engine.url(*g).into()),
                            ("reason", status.name().into()),
                        ])
                    })
                    .collect();
                let result = js_object!(events::BROADCAST_RESULT {
                    "txid": js::hash(&txid),
                    "relayed": (relayed.len() as u32).into(),
                    "refused": refused_list.into(),
                });
                if let Some(i) = self.broadcast_calls.iter().position(|(x, _)| *x == id) {
                    let (_, call) = self.broadcast_calls.remove(i);
                    // Every wallet it touches recorded it.
                    self.saving.push((call, result.clone(), None));
                }
                js_event_from!(events::BROADCAST, events::BROADCAST_RESULT, result)
            }
            // Only the module that can start a receiver tells what it finds.
            #[cfg(not(feature = "silent-payments"))]
            Event::SilentPayment { .. } | Event::SilentStalled { .. } => JsValue::UNDEFINED,
            #[cfg(feature = "silent-payments")]
            Event::SilentPayment {
                height,
                hash,
                payment,
            } => js_event!(events::SILENT_PAYMENT {
                "height": height.map_or(JsValue::NULL, JsValue::from),
                "blockHash": hash.as_ref().map_or(JsValue::NULL, js::hash),
                "txid": js::hash(&payment.txid),
                "vout": payment.vout.into(),
                "outputKey": hex::encode(payment.found.key).into(),
                "tweak": hex::encode(payment.found.tweak).into(),
                "label": payment.found.label.map_or(JsValue::NULL, JsValue::from),
            }),
            #[cfg(feature = "silent-payments")]
            Event::SilentStalled { height } => js_event!(events::SILENT_STALLED {
                "height": height.into(),
            }),
            Event::ScanMatch { height, hash } => js_event!(events::SCAN_MATCH {
                "height": height.into(),
                "blockHash": js::hash(&hash),
            }),
            Event::ScanWithdrawn { height, hash } => js_event!(events::SCAN_WITHDRAWN {
                "height": height.into(),
                "blockHash": js::hash(&hash),
            }),
            Event::ScanReached { height, matches } => {
                if let Some(call) = self.scan_call.take() {
                    let _ = call.resolve.call1(&JsValue::NULL, &scan_result(&matches));
                }
                js_event!(events::SCAN_REACHED {
                    "height": height.into(),
                    "matches": (matches.len() as u32).into(),
                })
            }
            Event::Mirror { mirror, fault } => js_event!(events::MIRROR {
                "mirror": mirror.into(),
                "url": self.mirror_url(mirror),
                "state": "dropped".into(),
                "height": JsValue::NULL,
                "reason": fault.to_string().into(),
                "code": fault.code().into(),
            }),
            Event::MirrorReady { mirror, height } => js_event!(events::MIRROR {
                "mirror": mirror.into(),
                "url": self.mirror_url(mirror),
                "state": "ready".into(),
                "height": height.into(),
                "reason": JsValue::NULL,
                "code": JsValue::NULL,
            }),
            Event::Warning { gateway, text } => js_event!(events::WARNING {
                "gateway": gateway.into(),
                "url": self.engine.url(gateway).into(),
                "text": text.map_or(JsValue::NULL, JsValue::from),
            }),
        }
    }

    /// Mirror `m`'s base URL, for its events.
    fn mirror_url(&self, m: crate::engine::MirrorId) -> JsValue {
        self.engine
            .mirrors()
            .get(m as usize)
            .map_or(JsValue::NULL, |x| x.url.as_str().into())
    }

    fn update_status(&mut self) {
        let mut s = self.status.borrow_mut();
        let syncer = self.engine.syncer();
        s.validated_height = syncer.tip().height;
        s.target = syncer.target();
        s.validated = syncer.validated;
        s.counters = self.engine.counters();
        s.synced = self.engine.is_synced();
        s.filter_height = self.engine.filters().height();
        s.wallet = self.engine.wallet_trace();
        s.silent = self
            .engine
            .silent_scan()
            .map(|scan| (scan.from(), scan.next(), scan.tweaks_scanned()));
        // In place: no allocation per pump.
        for (g, b) in s.gateway_bytes.iter_mut().enumerate() {
            *b = self.engine.gateway_bytes(GatewayId(g));
        }
        let mirrors = self.engine.mirrors();
        if s.mirrors.len() != mirrors.len() {
            // A gateway advertised one (rare: once a connection).
            s.mirrors = mirrors.iter().map(|m| (m.url.clone(), m.bytes)).collect();
        }
        for ((_, b), m) in s.mirrors.iter_mut().zip(mirrors) {
            *b = m.bytes;
        }
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
        let event = js_event!(events::PROGRESS {
            "height": height.into(),
            "storedHeight": stored.into(),
            "targetHeight": target.unwrap_or(height.max(stored)).into(),
            "headersPerSecond": ((validated - last.validated) as f64 / secs).into(),
            "bytesPerSecond": ((bytes_in - last.bytes_in) as f64 / secs).into(),
            "synced": synced.into(),
            "filterHeight": self
                .engine
                .filters()
                .height()
                .map_or(JsValue::NULL, JsValue::from),
        });
        self.last_progress = Progress {
            at_ms: now,
            validated,
            bytes_in,
        };
        self.emit(event);
        if let Some(scan) = self.engine.scan() {
            let (filters, bytes) = (scan.filters, scan.bytes);
            let (f0, b0) = self.scan_progress;
            let target = self.status.borrow().stored_filter_height;
            let event = js_event!(events::SCAN {
                "height": scan.next().saturating_sub(1).max(scan.from()).into(),
                "fromHeight": scan.from().into(),
                "targetHeight": target.map_or(JsValue::NULL, JsValue::from),
                "filtersPerSecond": ((filters - f0) as f64 / secs).into(),
                "bytesPerSecond": ((bytes - b0) as f64 / secs).into(),
                "filters": (filters as f64).into(),
                "matches": (scan.matches().len() as u32).into(),
            });
            self.scan_progress = (filters, bytes);
            self.emit(event);
        }
    }

    fn committed(&mut self, store: &IdbStore, c: Committed) {
        {
            let mut s = self.status.borrow_mut();
            s.stored = Some(c.tip);
            s.stored_time = c.time;
            s.idb = store.stats();
            s.stored_filter_height = store.filter_height();
        }
        self.emit(js_event!(events::TIP {
            "height": c.tip.height.into(),
            "hash": js::hash(&c.tip.hash),
            "time": c.time.into(),
            "filterHeight": store.filter_height().map_or(JsValue::NULL, JsValue::from),
        }));
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
        self.emit(js_event!(events::ERROR {
            "kind": js::store_kind(e).into(),
            "message": message.into(),
            "fatal": true.into(),
        }));
        self.engine.stop(now());
        self.pump();
    }

    /// `stop` was called: close everything; the call resolves once the loop has ended.
    /// A `scan` call: the scan starts (replacing one under way, whose call is rejected).
    fn scanning(&mut self, call: Call) {
        let Query::Scan { scripts, from } = &call.query else {
            return;
        };
        // The same scan again (after a reload, it was resumed from the store): it goes on.
        let continued = self.engine.scan_or_continue(scripts.clone(), *from);
        if continued && self.engine.app_scan_at_tip() {
            let matches = self.engine.app_matches();
            let _ = call.resolve.call1(&JsValue::NULL, &scan_result(&matches));
            return;
        }
        if let Some(old) = self.scan_call.replace(call) {
            let _ = old.reject.call1(
                &JsValue::NULL,
                &js::error("ScanReplaced", "another scan started"),
            );
        }
        if !continued {
            self.scan_progress = (0, 0);
        }
        self.pump();
    }

    /// The name of wallet `id` for the application: null for the default one.
    fn wallet_name(&self, id: WalletId) -> JsValue {
        let names = &mut self.engine.wallet_names();
        names
            .find(|(x, _)| *x == id)
            .map_or(JsValue::NULL, |(_, n)| n.into())
    }

    /// Whether what wallet `id` holds is saved (`None`: every wallet's).
    fn saved(&self, id: Option<WalletId>) -> bool {
        match id {
            Some(id) => self.engine.wallet_saved_of(id),
            None => self.engine.wallets_saved(),
        }
    }

    /// The wallet `call` is for, made if its name has none yet: and whether it was made
    /// now (so that a call refused leaves none). A name no wallet can have is refused.
    fn wallet_made(&mut self, call: &Call) -> Result<(WalletId, bool), JsValue> {
        let Some(name) = &call.wallet else {
            return Ok((WalletId::DEFAULT, false));
        };
        let before = self.engine.wallet_id(name);
        let id = self
            .engine
            .add_wallet(name)
            .map_err(|e| js::error("InvalidArgument", e.to_string()))?;
        Ok((id, before.is_none()))
    }

    /// The wallet `call` is for, if there is one (the default one for a call without a
    /// name). A name no wallet can have is refused.
    fn wallet_found(&self, call: &Call) -> Result<Option<WalletId>, JsValue> {
        match &call.wallet {
            None => Ok(Some(WalletId::DEFAULT)),
            Some(name) => {
                crate::wallet::names::check_name(name)
                    .map_err(|e| js::error("InvalidArgument", e.to_string()))?;
                Ok(self.engine.wallet_id(name))
            }
        }
    }

    /// A call refused: rejected with `e`, and the wallet it made for it (if it did)
    /// removed.
    fn refuse(&mut self, call: Call, made: Option<WalletId>, e: JsValue) {
        if let Some(id) = made {
            self.engine.remove_wallet(id);
        }
        let _ = call.reject.call1(&JsValue::NULL, &e);
    }

    /// A `watch` call: the wallet watches more (scanning again from its start when it
    /// does); the call resolves once it is synced.
    fn watching(&mut self, call: Call) {
        let Query::Watch { items, from } = &call.query else {
            return;
        };
        let (id, made) = match self.wallet_made(&call) {
            Ok(w) => w,
            Err(e) => return self.refuse(call, None, e),
        };
        if let Err(e) = self.engine.watch_in(id, items, *from) {
            let e = js::error("InvalidArgument", e.to_string());
            return self.refuse(call, made.then_some(id), e);
        }
        self.wallet_scanning(call, id);
    }

    /// Wallet `id`'s scan started (`watch`, `rescan`; an app's `scan()` goes on beside
    /// it): `call` is answered once the wallet is synced and saved.
    fn wallet_scanning(&mut self, call: Call, id: WalletId) {
        self.scan_progress = (0, 0);
        self.watch_calls.push((call, id));
        self.pump();
    }

    /// A `rescan` call: the wallet's scan starts again; answered once it is synced and
    /// saved, as `watch` is.
    fn rescanning(&mut self, call: Call) {
        let Query::Rescan(from) = &call.query else {
            return;
        };
        let id = match self.wallet_found(&call) {
            Ok(Some(id)) => id,
            Ok(None) => {
                let e = js::error("InvalidArgument", "no wallet of that name");
                return self.refuse(call, None, e);
            }
            Err(e) => return self.refuse(call, None, e),
        };
        if let Err(e) = self.engine.rescan_in(id, *from) {
            let e = js::error("InvalidArgument", e.to_string());
            return self.refuse(call, None, e);
        }
        self.wallet_scanning(call, id);
    }

    /// A `watchSilentPayments` call: the receiver's scan starts; resolved at once with
    /// its addresses.
    #[cfg(feature = "silent-payments")]
    fn watching_silent(&mut self, call: Call) {
        let Query::WatchSilent {
            keys,
            from,
            persist,
        } = &call.query
        else {
            return;
        };
        match crate::receiver::receiving(keys, self.engine.network()) {
            Ok(r) => {
                let labels = js_sys::Array::new();
                for (label, address) in &r.labelled {
                    labels.push(&js::object(&[
                        ("label", (*label).into()),
                        ("address", address.into()),
                    ]));
                }
                let value = js::object(&[("address", r.address.into()), ("labels", labels.into())]);
                // The pool's workers take the new keys before any check of the new scan.
                if let Some(pool) = &self.scan_pool {
                    pool.start(keys);
                }
                self.engine
                    .watch_silent_payments_from(r.receiver, *from, r.spend_origin);
                // Kept in the store only when asked; otherwise any kept before go.
                self.engine
                    .keep_silent_keys(persist.then(|| keys.encode(*from)));
                let _ = call.resolve.call1(&JsValue::NULL, &value);
                self.pump();
            }
            Err(e) => {
                let kind = match e {
                    crate::receiver::ReceiverError::Unstable => "WrongValues",
                    _ => "InvalidArgument",
                };
                let e = js::error(kind, e.to_string());
                let _ = call.reject.call1(&JsValue::NULL, &e);
            }
        }
    }

    /// A `broadcast` call: sent to the gateways; resolved when they answered.
    fn broadcasting(&mut self, call: Call) {
        let Query::Broadcast(tx) = &call.query else {
            return;
        };
        match self.engine.broadcast(tx) {
            Ok((id, _)) => {
                self.broadcast_calls.push((id, call));
                self.pump();
            }
            Err(e) => {
                let kind = match e {
                    crate::engine::BroadcastError::NoGateway => "NoGateway",
                    _ => "InvalidArgument",
                };
                let _ = call
                    .reject
                    .call1(&JsValue::NULL, &js::error(kind, e.to_string()));
            }
        }
    }

    /// An `unwatch` call: resolves once what is left is synced (at once if nothing is).
    fn unwatching(&mut self, call: Call) {
        let Query::Unwatch(items) = &call.query else {
            return;
        };
        let id = match self.wallet_found(&call) {
            Ok(Some(id)) => id,
            Ok(None) => {
                let _ = call.resolve.call1(&JsValue::NULL, &JsValue::NULL);
                return;
            }
            Err(e) => return self.refuse(call, None, e),
        };
        if let Err(e) = self.engine.unwatch_in(id, items) {
            let e = js::error("InvalidArgument", e.to_string());
            return self.refuse(call, None, e);
        }
        if self.engine.wallet_of(id).is_none_or(|w| w.watch.is_empty()) {
            let _ = call.resolve.call1(&JsValue::NULL, &self.wallet_summary(id));
        } else {
            self.watch_calls.push((call, id));
        }
        self.pump();
    }

    /// `importLabels` or `setLabel`: answered once the wallet holding them is saved; a
    /// refused file or record is rejected at once (`InvalidArgument`, with the `line` a
    /// file's error names), having changed nothing.
    fn labelling(&mut self, call: Call) {
        let (id, made) = match self.wallet_made(&call) {
            Ok(w) => w,
            Err(e) => return self.refuse(call, None, e),
        };
        let done = match &call.query {
            Query::ImportLabels(file) => self
                .engine
                .import_labels_in(id, &file.records)
                .map(|d| {
                    js::object(&[
                        ("imported", d.taken.into()),
                        ("unknown", d.unknown.into()),
                        ("cut", d.cut.into()),
                    ])
                })
                .map_err(|e| {
                    // The import counts records; the user's editor counts the file's lines.
                    let line = file.lines.get(e.line.wrapping_sub(1)).copied();
                    super::labels::error(line, &e.fault)
                }),
            Query::SetLabel { record, clear } => self
                .engine
                .set_label_in(id, record, *clear)
                .map(|()| JsValue::UNDEFINED)
                .map_err(|e| super::labels::error(None, &e.fault)),
            _ => return,
        };
        match done {
            Ok(result) => {
                self.saving.push((call, result, Some(id)));
                self.pump();
            }
            Err(e) => self.refuse(call, made.then_some(id), e),
        }
    }

    /// `wallets()`: the named wallets; `removeWallet(name)`: one goes, answered once its
    /// records are.
    fn wallets(&mut self, call: Call) {
        if let Query::Wallets = call.query {
            let names = js_sys::Array::new();
            for (_, n) in self.engine.wallet_names() {
                names.push(&n.into());
            }
            let _ = call.resolve.call1(&JsValue::NULL, &names);
            return;
        }
        match self.wallet_found(&call) {
            Ok(Some(id)) if call.wallet.is_some() => {
                self.engine.remove_wallet(id);
                self.saving.push((call, true.into(), None));
                self.pump();
            }
            Ok(_) => {
                let _ = call.resolve.call1(&JsValue::NULL, &false.into());
            }
            Err(e) => self.refuse(call, None, e),
        }
    }

    /// A call about the wallet's state, answered from the engine.
    fn wallet_query(&mut self, call: Call) {
        let Query::Wallet(q) = &call.query else {
            return;
        };
        let tip = self.engine.syncer().tip().height;
        let wallet = match self.wallet_found(&call) {
            Ok(id) => id.and_then(|id| self.engine.wallet_of(id)),
            Err(e) => return self.refuse(call, None, e),
        };
        let value = match (wallet, q) {
            (None, WalletQuery::Balance(_)) => balance_object(&Default::default()),
            (None, WalletQuery::Labels) => JsValue::from(""),
            (Some(w), WalletQuery::Labels) => {
                let mut out = String::new();
                w.labels.write_lines(&mut out);
                JsValue::from(out)
            }
            (None, _) => js_sys::Array::new().into(),
            // Confirmed ones oldest first, then the unconfirmed in the order first seen.
            (Some(w), WalletQuery::Transactions) => {
                let labels = &w.labels;
                let with = |o: JsValue, status: &str, txid: &lightwire_primitives::Txid| {
                    js::set(&o, "status", status.into());
                    js::set(&o, "label", tx_label(labels, txid));
                    o
                };
                let confirmed = w.ledger.transactions().iter();
                let unconfirmed = w.unconfirmed.transactions().iter();
                confirmed
                    .map(|t| with(tx_object(t), "confirmed", &t.txid))
                    .chain(unconfirmed.map(|t| with(unconfirmed_object(t), "unconfirmed", &t.txid)))
                    .collect::<js_sys::Array>()
                    .into()
            }
            // What can be spent now, as Bitcoin Core's `listunspent`: coins no transaction
            // (mined or not) spends, confirmed ones and the unconfirmed ones' outputs.
            (Some(w), WalletQuery::Utxos) => {
                let u = &w.unconfirmed;
                let spent = u.spent();
                let confirmed = w
                    .ledger
                    .utxos()
                    .filter(|c| !spent.contains(&c.outpoint))
                    .map(|c| {
                        let confirmations = tip.saturating_sub(c.height) + 1;
                        let (height, coinbase) = (c.height.into(), c.coinbase);
                        let o = utxo_object(
                            &c.outpoint,
                            c.value,
                            &c.script,
                            height,
                            confirmations,
                            coinbase,
                        );
                        with_label(&o, w, &c.outpoint, &c.script);
                        with_origin(o, &w.watch, &c.script, None)
                    });
                let pending = u
                    .transactions()
                    .iter()
                    .flat_map(|t| t.coins().map(move |c| (t, c)))
                    .filter(|(_, (o, _, _))| !spent.contains(o))
                    .map(|(t, (o, value, script))| {
                        let silent = t.silent.iter().find(|s| s.vout == o.vout);
                        let outpoint = o;
                        let o = utxo_object(&o, value, script, JsValue::NULL, 0, false);
                        with_label(&o, w, &outpoint, script);
                        with_origin(o, &w.watch, script, silent)
                    });
                confirmed.chain(pending).collect::<js_sys::Array>().into()
            }
            (Some(w), WalletQuery::Balance(n)) => balance_object(&w.balance(tip, *n)),
        };
        let _ = call.resolve.call1(&JsValue::NULL, &value);
    }

    /// A `createPsbt` call, answered from the wallet once it has applied every block its
    /// filters matched in what is stored (before, it could pick a coin a block not yet
    /// fetched spends).
    fn creating_psbt(&mut self, call: Call) {
        let id = match self.wallet_found(&call) {
            Ok(id) => id,
            Err(e) => return self.refuse(call, None, e),
        };
        if let Some(id) = id
            .filter(|&id| self.engine.wallet_of(id).is_some() && !self.engine.wallet_synced_of(id))
        {
            self.psbt_calls.push((call, id));
            return;
        }
        let wallet = id.and_then(|id| self.engine.wallet_of(id));
        if let Query::BumpFee { txid, rate } = &call.query {
            let tip = self.engine.syncer().tip().height;
            let seed =
                super::identity::random_seed().unwrap_or_else(|_| js_sys::Math::random().to_bits());
            let _ = match wallet {
                Some(w) => match crate::spend::bump_fee(w, txid, *rate, tip, seed) {
                    Ok(b) => {
                        let value = psbt_object(&b, *rate, w.network());
                        let _ = js_sys::Reflect::set(&value, &"replaces".into(), &js::hash(txid));
                        call.resolve.call1(&JsValue::NULL, &value)
                    }
                    Err(e) => call
                        .reject
                        .call1(&JsValue::NULL, &js::error(e.name(), e.to_string())),
                },
                None => call.reject.call1(
                    &JsValue::NULL,
                    &js::error("InvalidArgument", "no wallet: watch a descriptor first"),
                ),
            };
            return;
        }
        let Query::CreatePsbt(ask) = &call.query else {
            return;
        };
        let tip = self.engine.syncer().tip();
        let seed =
            super::identity::random_seed().unwrap_or_else(|_| js_sys::Math::random().to_bits());
        // Bitcoin Core's anti-fee-sniping lock time, from the tip's block time.
        let lock_time = crate::spend::anti_fee_sniping(
            tip.height,
            tip.header.time,
            (js::now_ms() / 1_000.0) as u64,
            self.engine.syncer().is_synced(),
            seed.rotate_left(17),
        );
        let built = match wallet {
            Some(w) => crate::spend::create_psbt(w, ask, tip.height, lock_time, seed)
                .map(|b| (b, w.network())),
            None => Err(crate::spend::PsbtError::NoWallet),
        };
        let _ = match built {
            Ok((b, network)) => call
                .resolve
                .call1(&JsValue::NULL, &psbt_object(&b, ask.rate, network)),
            Err(e) => call
                .reject
                .call1(&JsValue::NULL, &js::error(e.name(), e.to_string())),
        };
    }

    /// What `watch()` resolves to, for wallet `id`.
    fn wallet_summary(&self, id: WalletId) -> JsValue {
        let tip = self.engine.syncer().tip().height;
        match self.engine.wallet_of(id) {
            Some(w) => js::object(&[
                (
                    "transactions",
                    (w.ledger.transactions().len() as u32).into(),
                ),
                ("balance", balance_object(&w.balance(tip, 1))),
            ]),
            None => JsValue::NULL,
        }
    }

    fn stopping(&mut self, call: Call) {
        if !self.engine.is_stopped() {
            self.engine.stop(now());
            self.pump();
        }
        self.stop_calls.push(call);
    }
}

/// A wallet transaction as JavaScript sees it (satoshis as numbers: every amount of
/// bitcoin is below 2^53).
fn tx_object(t: &lightwire_wallet::WalletTx) -> JsValue {
    js_object!(events::WALLET_TX {
        "txid": js::hash(&t.txid),
        "height": t.height.into(),
        "blockHash": js::hash(&t.block_hash),
        "position": t.position.into(),
        "received": (t.received as f64).into(),
        "sent": (t.sent as f64).into(),
        "fee": t.fee.map_or(JsValue::NULL, |f| (f as f64).into()),
    })
}

/// An unconfirmed transaction as JavaScript sees it: no block, and how many gateways
/// hold it.
fn unconfirmed_object(t: &lightwire_wallet::UnconfirmedTx) -> JsValue {
    js_object!(events::UNCONFIRMED_TX {
        "txid": js::hash(&t.txid),
        "height": JsValue::NULL,
        "blockHash": JsValue::NULL,
        "received": (t.received as f64).into(),
        "sent": (t.sent as f64).into(),
        "fee": t.fee.map_or(JsValue::NULL, |f| (f as f64).into()),
        "gateways": t.gateways().into(),
        "firstSeen": (t.first_seen as f64).into(),
        "silentPayments": t
            .silent
            .iter()
            .map(|s| {
                js::object(&[
                    ("vout", s.vout.into()),
                    ("tweak", hex::encode(s.tweak).into()),
                    ("label", s.label.map_or(JsValue::NULL, JsValue::from)),
                    ("spendKey", hex::encode(s.spend).into()),
                ])
            })
            .collect::<js_sys::Array>()
            .into(),
    })
}

/// The label of transaction `txid`, or null (no text formatted for a wallet with no
/// labels).
fn tx_label(labels: &Labels, txid: &lightwire_primitives::Txid) -> JsValue {
    if labels.is_empty() {
        return JsValue::NULL;
    }
    labels
        .get(LabelKind::Tx, &txid.to_string())
        .and_then(|e| e.label.as_deref())
        .map_or(JsValue::NULL, JsValue::from)
}

/// A `utxos()` entry's `label` (its output's, or null), `frozen` (BIP329's
/// `spendable: false`: createPsbt picks it only when named), `address` (of its script,
/// null for a script no address stands for) and `addressLabel` (that address's label).
fn with_label(
    o: &JsValue,
    w: &crate::wallet::WalletSync,
    outpoint: &lightwire_wallet::Outpoint,
    script: &[u8],
) {
    let labels = &w.labels;
    let entry = (!labels.is_empty())
        .then(|| labels.get(LabelKind::Output, &crate::spend::outpoint_text(outpoint)))
        .flatten();
    let label = entry.and_then(|e| e.label.as_deref());
    js::set(o, "label", label.map_or(JsValue::NULL, JsValue::from));
    let frozen = entry.is_some_and(|e| e.spendable == Some(false));
    js::set(o, "frozen", frozen.into());
    let address = lightwire_wallet::address::address_of(script, w.network());
    let address_label = address
        .as_deref()
        .filter(|_| !labels.is_empty())
        .and_then(|a| labels.get(LabelKind::Addr, a))
        .and_then(|e| e.label.as_deref());
    js::set(
        o,
        "addressLabel",
        address_label.map_or(JsValue::NULL, JsValue::from),
    );
    js::set(o, "address", address.map_or(JsValue::NULL, JsValue::from));
}

/// A `utxos()` entry with where its key comes from, for a signer (BIP174): for a coin of
/// a descriptor, the descriptor, the keychain (`receive` for branch 0 or a single branch,
/// `change` for branch 1), the index, the full derivation path and the master key's
/// fingerprint; null for a coin of a script or an address given as such. For a silent
/// payment the scan found, the tweak that spends it and its label (`silentPayment`); for an
/// unconfirmed one found in the mempool, the same from `unconfirmed`.
fn with_origin(
    o: JsValue,
    watch: &lightwire_wallet::Watchlist,
    script: &[u8],
    unconfirmed: Option<&lightwire_wallet::unconfirmed::SilentOutput>,
) -> JsValue {
    use lightwire_wallet::descriptor::path_text;
    let derived = match watch.origin(script) {
        Some(lightwire_wallet::Origin::Derived {
            descriptor,
            branch,
            index,
        }) => watch
            .descriptors()
            .nth(descriptor)
            .map(|d| (d, branch, index)),
        _ => None,
    };
    let (descriptor, keychain, index, path, fingerprint) = match derived {
        Some((d, branch, index)) => {
            let keychain = match d.branches.get(branch).copied().flatten() {
                Some(1) => "change",
                _ => "receive",
            };
            (
                JsValue::from(d.text.as_str()),
                JsValue::from(keychain),
                JsValue::from(index),
                JsValue::from(path_text(&d.path_of(branch, index))),
                JsValue::from(hex::encode(d.origin.fingerprint)),
            )
        }
        None => (
            JsValue::NULL,
            JsValue::NULL,
            JsValue::NULL,
            JsValue::NULL,
            JsValue::NULL,
        ),
    };
    js::set(&o, "descriptor", descriptor);
    js::set(&o, "keychain", keychain);
    js::set(&o, "index", index);
    js::set(&o, "derivationPath", path);
    js::set(&o, "masterFingerprint", fingerprint);
    let origin = watch
        .origin(script)
        .or(unconfirmed.map(|s| lightwire_wallet::Origin::Silent {
            tweak: s.tweak,
            label: s.label,
            spend: s.spend,
        }));
    let silent = match origin {
        Some(lightwire_wallet::Origin::Silent {
            tweak,
            label,
            spend,
        }) => js::object(&[
            ("tweak", hex::encode(tweak).into()),
            ("label", label.map_or(JsValue::NULL, JsValue::from)),
            ("spendKey", hex::encode(spend).into()),
        ]),
        _ => JsValue::NULL,
    };
    js::set(&o, "silentPayment", silent);
    o
}

/// One of `utxos()`' entries: unconfirmed when it has no height.
fn utxo_object(
    o: &lightwire_wallet::Outpoint,
    value: u64,
    script: &[u8],
    height: JsValue,
    confirmations: u32,
    coinbase: bool,
) -> JsValue {
    let status = if height.is_null() {
        "unconfirmed"
    } else {
        "confirmed"
    };
    js::object(&[
        ("txid", js::hash(&o.txid)),
        ("vout", o.vout.into()),
        ("value", (value as f64).into()),
        ("script", hex::encode(script).into()),
        ("height", height),
        ("confirmations", confirmations.into()),
        ("coinbase", coinbase.into()),
        ("status", status.into()),
    ])
}

/// What `feeRates()` resolves to: the figure for each target and each gateway's answer,
/// in sat/vB (null where there is none).
fn fee_rates_object(
    rates: &[Option<u64>; 3],
    answers: &[crate::engine::fees::FeeAnswer],
    url: impl Fn(GatewayId) -> JsValue,
) -> JsValue {
    let per_vb = |r: Option<u64>| r.map_or(JsValue::NULL, |k| (k as f64 / 1000.0).into());
    let sources: js_sys::Array = answers
        .iter()
        .map(|a| {
            js::object(&[
                ("gateway", a.gateway.into()),
                ("url", url(a.gateway)),
                ("source", a.source.name().into()),
                ("blocks1", per_vb(a.rates[0])),
                ("blocks6", per_vb(a.rates[1])),
                ("blocks144", per_vb(a.rates[2])),
            ])
        })
        .collect();
    js::object(&[
        ("blocks1", per_vb(rates[0])),
        ("blocks6", per_vb(rates[1])),
        ("blocks144", per_vb(rates[2])),
        ("sources", sources.into()),
    ])
}

/// What `createPsbt()` resolves to.
fn psbt_object(
    b: &lightwire_wallet::spend::Built,
    rate: lightwire_wallet::spend::FeeRate,
    network: lightwire_chain::Network,
) -> JsValue {
    use lightwire_wallet::spend::psbt;
    // The change output, read back from the transaction written.
    let change = b.change.and_then(|(vout, value)| {
        let maps = psbt::read_maps(&b.psbt).ok()?;
        let script = psbt::outputs(&maps).ok()?.get(vout as usize)?.1;
        let address = lightwire_wallet::address_of(script, network)?;
        Some(js::object(&[
            ("address", address.into()),
            ("value", (value as f64).into()),
            ("vout", vout.into()),
        ]))
    });
    js::object(&[
        ("psbt", psbt::base64(&b.psbt).into()),
        ("fee", (b.fee as f64).into()),
        ("ancestorFee", (b.ancestor_fee as f64).into()),
        ("vsize", (b.vsize as f64).into()),
        ("feeRate", (rate.0 as f64 / 1000.0).into()),
        ("change", change.unwrap_or(JsValue::NULL)),
        (
            "inputs",
            b.spent
                .iter()
                .map(|o| JsValue::from(crate::spend::outpoint_text(o)))
                .collect::<js_sys::Array>()
                .into(),
        ),
    ])
}

fn balance_object(b: &lightwire_wallet::Balance) -> JsValue {
    js_object!(events::BALANCE {
        "confirmed": (b.confirmed as f64).into(),
        "pending": (b.pending as f64).into(),
        "immature": (b.immature as f64).into(),
        "coins": b.coins.into(),
        "unconfirmed": (b.unconfirmed as f64).into(),
    })
}

/// What `scan()` resolves to: `{ matches: [{ height, blockHash }] }`.
fn scan_result(matches: &[(u32, lightwire_chain::BlockHash)]) -> JsValue {
    let list = js_sys::Array::new();
    for (h, hash) in matches {
        list.push(&js::object(&[
            ("height", (*h).into()),
            ("blockHash", js::hash(hash)),
        ]));
    }
    js::object(&[("matches", list.into())])
}

impl Host for Net {
    type Store = IdbStore;
    type Input = Input;
    type Call = Call;

    fn engine(&mut self) -> &mut Engine {
        &mut self.engine
    }

    fn now(&self) -> Millis {
        now()
    }

    fn pump(&mut self) {
        Net::pump(self);
    }

    async fn next(&mut self) -> Option<Input> {
        // Timed until the input comes or the wait is given up (the commit it raced
        // completed first): a guard, so that both count.
        struct Waiting<'a>(&'a RefCell<Status>, f64, bool);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                let waited = js::mono_ms() - self.1;
                let mut s = self.0.borrow_mut();
                match self.2 {
                    true => s.commit_wait_ms += waited,
                    false => s.idle_ms += waited,
                }
            }
        }
        let _waiting = Waiting(&self.status, js::mono_ms(), self.committing);
        Some(self.inbox.next().await)
    }

    fn committing(&mut self, on: bool) {
        self.committing = on;
    }

    /// Inputs go to the engine; calls answered from the engine alone (`stop`, `scan`,
    /// `watch`, the wallet's queries, `broadcast`, `unwatch`, `createPsbt`, `feeRates`, the
    /// labels) are
    /// taken at once, even while a commit is in flight; the others read the store.
    fn handle(&mut self, input: Input) -> Option<Call> {
        let call = self.take(input)?;
        match call.query {
            Query::Stop => self.stopping(call),
            Query::Scan { .. } => self.scanning(call),
            Query::Watch { .. } => self.watching(call),
            #[cfg(feature = "silent-payments")]
            Query::WatchSilent { .. } => self.watching_silent(call),
            Query::Wallet(_) => self.wallet_query(call),
            Query::Broadcast(_) => self.broadcasting(call),
            Query::Unwatch(_) => self.unwatching(call),
            Query::Rescan(_) => self.rescanning(call),
            Query::CreatePsbt(_) | Query::BumpFee { .. } => self.creating_psbt(call),
            Query::ImportLabels(_) | Query::SetLabel { .. } => self.labelling(call),
            Query::Wallets | Query::RemoveWallet => self.wallets(call),
            Query::FeeRates => match self.engine.fee_rates() {
                Some(id) => {
                    self.fee_calls.push((id, call));
                    self.pump();
                }
                None => {
                    let e = js::error("NoGateway", "no connected gateway serves fee rates");
                    let _ = call.reject.call1(&JsValue::NULL, &e);
                }
            },
            _ => return Some(call),
        }
        None
    }

    async fn serve(&mut self, store: &mut IdbStore, call: Call) {
        queries::answer(store, call).await;
    }

    fn unanswered(&mut self, call: Call) {
        self.calls.push(call);
    }

    fn committed(&mut self, store: &IdbStore, c: Committed) {
        Net::committed(self, store, c);
    }
}

/// The receiver whose keys the store keeps (the application asked: `persistScanKey`),
/// started as `watchSilentPayments` starts one. Keys that no longer make a receiver (read
/// back damaged, or of another network) are left as they are, and nothing is started.
#[cfg(feature = "silent-payments")]
async fn resume_receiver(net: &mut Net, store: &IdbStore) {
    use lightwire_store::HeaderStore;
    let Ok(Some(bytes)) = store.record(crate::pipeline::SILENT_KEYS).await else {
        return;
    };
    let Some((keys, from)) = crate::receiver::ReceiverKeys::decode(&bytes) else {
        return;
    };
    if let Ok(r) = crate::receiver::receiving(&keys, net.engine.network()) {
        if let Some(pool) = &net.scan_pool {
            pool.start(&keys);
        }
        net.engine
            .watch_silent_payments_from(r.receiver, from, r.spend_origin);
    }
}

/// The loop, until the client stops or the store fails.
pub async fn run(mut net: Net, mut store: IdbStore) {
    #[cfg(feature = "silent-payments")]
    resume_receiver(&mut net, &store).await;
    let tip_time = net.status.borrow().stored_time;
    let mut pipeline = Pipeline::resumed(tip_time);
    if let Err(e) = driver::run(&mut net, &mut store, &mut pipeline).await {
        net.store_failed(&e);
    }
    net.inbox.close();
    net.clear_timer();
    net.update_status();
    net.progress(true);
    // Broadcasts the gateways answered: they were relayed (a store that failed to save
    // their record stopped the client, and said so). Labels not saved were not kept.
    for (call, result, id) in std::mem::take(&mut net.saving) {
        let _ = match call.query {
            Query::Broadcast(_) => call.resolve.call1(&JsValue::NULL, &result),
            _ if net.saved(id) => call.resolve.call1(&JsValue::NULL, &result),
            _ => call.reject.call1(
                &JsValue::NULL,
                &js::error("Stopped", "the client stopped before the labels were saved"),
            ),
        };
    }
    // Calls still waiting (for the store, or for gateways that will not answer now).
    let waiting = std::mem::take(&mut net.calls)
        .into_iter()
        .chain(
            std::mem::take(&mut net.psbt_calls)
                .into_iter()
                .map(|(c, _)| c),
        )
        .chain(
            std::mem::take(&mut net.fee_calls)
                .into_iter()
                .chain(std::mem::take(&mut net.broadcast_calls))
                .map(|(_, call)| call),
        );
    for call in waiting {
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
