//! The `Client` JavaScript class: opened once, it hands the sync to the loop in
//! [`super::run`] and answers the synchronous getters from the status that loop keeps.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Array, Function, Promise};
use lightwire_proto::Millis;
use lightwire_store::{HeaderStore, IdbOptions, IdbStore, StoreError, Tip};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

use super::identity;
use super::inbox::{Call, Inbox, Input, Query, WalletQuery};
use super::js;
use super::options::{Options, options};
use super::run::{Net, run};
use super::status::Status;
use crate::engine::{Engine, GatewayState};

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
    /// gateways. `options`: `{ network, gateways: [connect strings], checkpoints?, start?,
    /// storeName?, commitEvery?, requestSize?, progressIntervalMs? }`. `onEvent` gets every event
    /// (plain objects with a `type`).
    pub async fn open(options_: JsValue, on_event: Function) -> Result<Client, JsValue> {
        let o = options(&options_)?;
        let params = o.params;
        let idb = IdbOptions {
            start: o.start,
            ..IdbOptions::default()
        };
        let store = IdbStore::open_with(&o.store_name, params, idb)
            .await
            .map_err(|e| js::error(js::store_kind(&e), e.to_string()))?;
        let (engine, stored, stored_time) = match prepare(&store, &o).await {
            Ok(v) => v,
            Err(e) => {
                // Closed, so that the store can be deleted or opened again.
                store.close();
                return Err(e);
            }
        };
        let inbox = Rc::new(Inbox::default());
        let status = Rc::new(RefCell::new(Status {
            stored: Some(stored),
            stored_time,
            validated_height: stored.height,
            states: vec![GatewayState::Connecting; o.gateways.len()],
            urls: o.gateways.iter().map(|g| g.url.clone()).collect(),
            gateway_bytes: vec![0; o.gateways.len()],
            mirrors: engine
                .mirrors()
                .iter()
                .map(|m| (m.url.clone(), 0))
                .collect(),
            started_ms: js::mono_ms(),
            stored_filter_height: store.filter_height(),
            filter_height: store.filter_height(),
            ..Status::default()
        }));
        #[allow(unused_mut)]
        let mut net = Net::new(
            engine,
            o.gateways.len(),
            &inbox,
            &status,
            on_event,
            o.progress_ms,
        );
        #[cfg(feature = "silent-payments")]
        if let Some(pool) = super::scan_pool::ScanPool::from_options(&options_) {
            net.use_scan_pool(pool);
        }
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
    /// messages and bytes each way, IndexedDB commits and their time, headers validated,
    /// and where the loop's time went (taking input, waiting for it, waiting on a commit).
    pub fn metrics(&self) -> JsValue {
        let s = self.status.borrow();
        let now = js::now_ms();
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
            ("timersPending", js::timers_pending().into()),
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
            (
                "filterHeight",
                s.filter_height.map_or(JsValue::NULL, JsValue::from),
            ),
            (
                "storedFilterHeight",
                s.stored_filter_height.map_or(JsValue::NULL, JsValue::from),
            ),
            (
                "idbFilterHeadersWritten",
                (s.idb.filter_headers_written as f64).into(),
            ),
            ("nextDeadlineInMs", in_ms(s.deadline, now)),
            ("timerInMs", in_ms(s.timer_at, now)),
            (
                "wallet",
                s.wallet.map_or(JsValue::NULL, |w| wallet_trace(&w, now)),
            ),
            (
                "silentScan",
                s.silent.map_or(JsValue::NULL, |(from, next, tweaks)| {
                    js::object(&[
                        ("fromHeight", from.into()),
                        (
                            "height",
                            next.checked_sub(1).map_or(JsValue::NULL, JsValue::from),
                        ),
                        ("tweaks", (tweaks as f64).into()),
                    ])
                }),
            ),
            ("elapsedMs", (js::mono_ms() - s.started_ms).into()),
            ("receiveMs", s.receive_ms.into()),
            ("idleMs", s.idle_ms.into()),
            ("commitWaitMs", s.commit_wait_ms.into()),
            ("sources", sources(&s)),
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

    /// Rescan from block `fromHeight` (default 0) for the output scripts `scripts` (hex):
    /// each block's compact filter is fetched, checked against its stored filter header and
    /// matched. Resolves `{ matches: [{ height, blockHash }] }` once every block whose
    /// filter header is stored has been matched; the scan goes on as blocks arrive
    /// (`scanMatch` and `scanWithdrawn` events, of its matches only) until another
    /// replaces it, beside the wallets' (one pass over each filter serves both). Rejects
    /// with `InvalidArgument` for a script that is not hex or is empty, `ScanReplaced` if
    /// another scan starts before this one resolves.
    pub fn scan(&self, scripts: Vec<String>, from_height: Option<f64>) -> Promise {
        let mut parsed = Vec::with_capacity(scripts.len());
        for s in &scripts {
            match hex::decode(s) {
                Ok(b) if !b.is_empty() && b.len() <= 10_000 => parsed.push(b),
                _ => {
                    return Promise::reject(&js::error(
                        "InvalidArgument",
                        format!("script {s:?} is not a non-empty hex output script"),
                    ));
                }
            }
        }
        match whole(from_height.unwrap_or(0.0), "the start height") {
            Ok(from) => self.call(Query::Scan {
                scripts: parsed,
                from,
            }),
            Err(e) => Promise::reject(&e),
        }
    }

    /// Watch a wallet's scripts: `{ addresses?, scripts?, descriptors?, fromHeight? }`
    /// (addresses of this network, output scripts as hex, descriptors `pkh`, `sh(wpkh)`,
    /// `wpkh`, `tr` over an xpub). The blocks whose filters match are fetched, checked
    /// against their stored headers and kept as transactions and coins. Resolves
    /// `{ transactions, balance }` once every stored block is matched and every match
    /// applied; `transaction` and `balance` events follow as blocks arrive. Rejects with
    /// `InvalidArgument` naming what cannot be watched.
    ///
    /// Each wallet call takes the name of the wallet it is for last (see `wallets`):
    /// absent, the default wallet's.
    pub fn watch(&self, options: JsValue, wallet: Option<String>) -> Promise {
        match watch_items(&options) {
            Ok((items, from)) => self.call_in(Query::Watch { items, from }, wallet),
            Err(e) => Promise::reject(&e),
        }
    }

    /// Receive silent payments (BIP352): `{ scanKey, spendKey?, address?, labels?,
    /// fromHeight? }` (the scan private key as hex; the spend public key as hex, or the
    /// receiver's own address instead; the labels it hands out, from 1). From
    /// `fromHeight`, each block's tweaks are taken where the gateways serving them agree
    /// (a disagreement is settled by the block and what it spends from, and the gateway
    /// proven wrong is dropped), the block's verified filter is asked about the
    /// receiver's keys, and a block that matches is fetched and searched: each output
    /// found is a `silentPayment` event and a coin of the wallet. The scan key stays in
    /// this worker and is not stored: a later session receives only once called again.
    /// Resolves `{ address, labels: [{ label, address }] }` at once (the scan goes on);
    /// rejects with `InvalidArgument` naming a key, address or label that cannot be.
    #[cfg(feature = "silent-payments")]
    #[wasm_bindgen(js_name = watchSilentPayments)]
    pub fn watch_silent_payments(&self, options: JsValue) -> Promise {
        match receiver_keys(&options) {
            Ok((keys, from, persist)) => self.call(Query::WatchSilent {
                keys,
                from,
                persist,
            }),
            Err(e) => Promise::reject(&e),
        }
    }

    /// The answer of the package's scan pool to the filter check `tag`, `height` it was
    /// handed (`code`: see `ScanHelper.scan`).
    #[cfg(feature = "silent-payments")]
    #[wasm_bindgen(js_name = silentScanned)]
    pub fn silent_scanned(&self, tag: u32, height: u32, code: u8) {
        self.inbox.push(Input::Scanned { tag, height, code });
    }

    /// Stop watching some of what `watch` was given (the same shape: `{ addresses?,
    /// scripts?, descriptors? }`; an item is the same however it is written). What is left
    /// is scanned again from the wallet's start: `transaction` events withdraw everything
    /// found, then find again what is left. Resolves `{ transactions, balance }` once it is
    /// synced (at once when nothing is left); rejects with `InvalidArgument` for an item
    /// that is not one.
    pub fn unwatch(&self, options: JsValue, wallet: Option<String>) -> Promise {
        match watch_items(&options) {
            Ok((items, _)) => self.call_in(Query::Unwatch(items), wallet),
            Err(e) => Promise::reject(&e),
        }
    }

    /// Scan the wallet again: `{ fromHeight? }`. With `fromHeight`, its start is widened
    /// to that block (a birthday set too late: payments below it are found); without,
    /// from its start (a full rescan). What it found is withdrawn (`transaction` events)
    /// and found again as the scan passes; `scan` events show the progress, and a reload
    /// goes on from where the scan stood. Resolves `{ transactions, balance }` once synced
    /// and saved; rejects with `InvalidArgument` when nothing is watched or for a
    /// `fromHeight` above the wallet's start.
    pub fn rescan(&self, options: JsValue, wallet: Option<String>) -> Promise {
        let given = !options.is_undefined()
            && !options.is_null()
            && js_sys::Reflect::has(&options, &"fromHeight".into()).unwrap_or(false);
        match given.then(|| from_height(&options)).transpose() {
            Ok(from) => self.call_in(Query::Rescan(from), wallet),
            Err(e) => Promise::reject(&e),
        }
    }

    /// The wallet's transactions, oldest first: `[{ txid, height, blockHash, position,
    /// received, sent, fee, status, label }]` (satoshis as numbers; `fee` null unless every
    /// input was ours; `label` the transaction's BIP329 label, or null).
    pub fn transactions(&self, wallet: Option<String>) -> Promise {
        self.call_in(Query::Wallet(WalletQuery::Transactions), wallet)
    }

    /// The wallet's coins no known transaction spends: `[{ txid, vout, value, script,
    /// height, confirmations, coinbase, status, label, frozen, address, addressLabel,
    /// descriptor, keychain, index, derivationPath, masterFingerprint }]` (`height` null
    /// while unconfirmed; `label` the output's BIP329 label or null; `frozen` for
    /// `spendable: false`; `address` null for a script no address stands for; the key
    /// origin null for a coin of a script or address watched as such).
    pub fn utxos(&self, wallet: Option<String>) -> Promise {
        self.call_in(Query::Wallet(WalletQuery::Utxos), wallet)
    }

    /// The balance: `{ confirmed, pending, immature, coins }` (satoshis), counting coins
    /// with at least `minConfirmations` (default 1) as confirmed.
    pub fn balance(&self, min_confirmations: Option<f64>, wallet: Option<String>) -> Promise {
        match whole(min_confirmations.unwrap_or(1.0), "minConfirmations") {
            Ok(n) => self.call_in(Query::Wallet(WalletQuery::Balance(n)), wallet),
            Err(e) => Promise::reject(&e),
        }
    }

    /// The wallet's labels as a BIP329 file (JSON Lines, one record a line, each ended by
    /// a newline; `""` with none): transactions, addresses, public keys, inputs, outputs,
    /// extended keys, then scan keys, each in order of its reference.
    pub fn labels(&self, wallet: Option<String>) -> Promise {
        self.call_in(Query::Wallet(WalletQuery::Labels), wallet)
    }

    /// Import a BIP329 file (JSON Lines) into the wallet's labels, whole or not at all:
    /// resolves `{ imported, unknown, cut }` (records taken; records of a type BIP329 does
    /// not define, skipped; labels cut to 255 characters) once the wallet holding them is
    /// saved. Rejects with `InvalidArgument` naming the first line that cannot be imported
    /// (its `line` property the file's line number, from 1), having imported none. A field
    /// a line leaves out keeps the wallet's value; `spendable: false` on an output freezes
    /// the coin.
    #[wasm_bindgen(js_name = importLabels)]
    pub fn import_labels(&self, text: JsValue, wallet: Option<String>) -> Promise {
        let Some(text) = text.as_string() else {
            return Promise::reject(&js::error(
                "InvalidArgument",
                "a label file is text (JSON Lines)",
            ));
        };
        match super::labels::read(&text) {
            Ok(file) => self.call_in(Query::ImportLabels(file), wallet),
            Err(e) => Promise::reject(&e),
        }
    }

    /// Set one label: `{ type, ref, label?, origin?, spendable? }`, a BIP329 record
    /// (`label: null` removes the label; `spendable: false` freezes an output, `true`
    /// thaws it). Resolves once the wallet is saved; rejects with `InvalidArgument` naming
    /// the rule the record breaks.
    #[wasm_bindgen(js_name = setLabel)]
    pub fn set_label(&self, record: JsValue, wallet: Option<String>) -> Promise {
        match super::labels::record_of(&record) {
            Ok((record, clear)) => self.call_in(Query::SetLabel { record, clear }, wallet),
            Err(why) => Promise::reject(&super::labels::error(None, &why)),
        }
    }

    /// Send a signed transaction (hex) to every connected gateway that relays, each passing
    /// it to its node. Resolves `{ txid, relayed, refused: [{ gateway, url, reason }] }`
    /// once they answered; rejects with `InvalidArgument` (not hex, not one transaction,
    /// not standard: the reason named) or `NoGateway`.
    /// A finalized PSBT (base64, as a signer hands it back) is taken too: its transaction is
    /// extracted (BIP174's extractor) and sent; rejects with `InvalidArgument` if an input
    /// is not finalized.
    pub fn broadcast(&self, raw_tx_hex: String) -> Promise {
        use lightwire_wallet::spend::psbt;
        let text = raw_tx_hex.trim();
        // Base64 of BIP174's magic `psbt` 0xff.
        if text.starts_with("cHNidP8") {
            let tx = psbt::from_base64(text)
                .ok_or_else(|| "the PSBT is not base64".to_string())
                .and_then(|b| psbt::extract(&b).map_err(|e| format!("the PSBT: {e}")));
            return match tx {
                Ok(tx) => self.call(Query::Broadcast(tx)),
                Err(e) => Promise::reject(&js::error("InvalidArgument", e)),
            };
        }
        match hex::decode(text) {
            Ok(tx) if !tx.is_empty() => self.call(Query::Broadcast(tx)),
            _ => Promise::reject(&js::error(
                "InvalidArgument",
                "the transaction is neither hex nor a PSBT in base64",
            )),
        }
    }

    /// A spend of the wallet's coins as a BIP174 PSBT for a signer: `{ outputs: [{ address,
    /// value }], feeRate, coins?, includeUnconfirmed?, changeDescriptor? }` (values in satoshis, `feeRate` in
    /// sat/vB, `coins` as `txid:vout` to spend all of and only). Resolves `{ psbt, fee,
    /// ancestorFee, vsize, feeRate, change, inputs }` (`psbt` in base64, `ancestorFee` the
    /// part of the fee paying for unconfirmed parents below the rate, `change` `{ address, value,
    /// vout }` or null, `inputs` the coins spent as `txid:vout`); rejects with
    /// `InsufficientFunds` or `InvalidArgument` naming what is wrong.
    #[wasm_bindgen(js_name = createPsbt)]
    pub fn create_psbt(&self, options: JsValue, wallet: Option<String>) -> Promise {
        match psbt_ask(&options) {
            Ok(ask) => self.call_in(Query::CreatePsbt(ask), wallet),
            Err(e) => Promise::reject(&e),
        }
    }

    /// A PSBT replacing unconfirmed transaction `txid` (hex, as explorers show it) of the
    /// wallet's at a higher fee rate: `{ feeRate }` in sat/vB. Resolves as `createPsbt`
    /// does, with `replaces` (the txid); rejects with `UnknownTransaction`,
    /// `InsufficientFunds` or `InvalidArgument` naming the rule (Bitcoin Core's
    /// `psbtbumpfee`).
    #[wasm_bindgen(js_name = bumpFee)]
    pub fn bump_fee(&self, txid: JsValue, options: JsValue, wallet: Option<String>) -> Promise {
        let bad = |m: &str| Promise::reject(&js::error("InvalidArgument", m));
        let Some(txid) = txid
            .as_string()
            .and_then(|t| lightwire_primitives::Txid::from_display_hex(&t))
        else {
            return bad("txid must be a transaction id in hex");
        };
        let rate = js_sys::Reflect::get(&options, &"feeRate".into())
            .ok()
            .and_then(|v| v.as_f64())
            .and_then(lightwire_wallet::spend::FeeRate::from_sat_per_vb);
        let Some(rate) = rate else {
            return bad("feeRate must be a number of sat/vB");
        };
        self.call_in(Query::BumpFee { txid, rate }, wallet)
    }

    /// The fee rates to be mined within 1, 6 and 144 blocks, from the connected gateways'
    /// nodes: `{ blocks1, blocks6, blocks144, sources: [{ gateway, url, source, blocks1,
    /// blocks6, blocks144 }] }` in sat/vB (null where none is known). Each figure is the
    /// lower median of the gateways' answers, each bounded to 0.1-10,000 sat/vB; every
    /// answer is in `sources` as the gateway said it. Rejects with `NoGateway` when no
    /// connected gateway serves fee rates.
    #[wasm_bindgen(js_name = feeRates)]
    pub fn fee_rates(&self) -> Promise {
        self.call(Query::FeeRates)
    }

    /// The named wallets, in the order they were made: `[name]`. A wallet is made by the
    /// first call that changes it (`watch`, `importLabels`, `setLabel`) given its name,
    /// saved, and resumed by later sessions until `removeWallet`. The default wallet (the
    /// calls given no name) is not listed.
    pub fn wallets(&self) -> Promise {
        self.call(Query::Wallets)
    }

    /// Remove the wallet named `name`: what it watched, found and labelled, and its
    /// records in the store (the other wallets go on as they were). Resolves `true` once
    /// its records are gone, `false` if there is no such wallet; rejects with
    /// `InvalidArgument` for a name no wallet can have.
    #[wasm_bindgen(js_name = removeWallet)]
    pub fn remove_wallet(&self, name: String) -> Promise {
        self.call_in(Query::RemoveWallet, Some(name))
    }

    /// Stop syncing, close the connections and the store. Resolves when done.
    pub fn stop(&self) -> Promise {
        self.call(Query::Stop)
    }

    fn call(&self, query: Query) -> Promise {
        self.call_in(query, None)
    }

    /// A call for the wallet named `wallet` (`None`: the default one).
    fn call_in(&self, query: Query, wallet: Option<String>) -> Promise {
        let inbox = self.inbox.clone();
        let mut query = Some(query);
        Promise::new(&mut |resolve, reject| {
            if let Some(query) = query.take() {
                inbox.push(Input::Call(Call {
                    query,
                    wallet: wallet.clone(),
                    resolve,
                    reject,
                }));
            }
        })
    }
}

/// What `watch` takes: its lists (each an array of strings, or absent) and start height.
fn watch_items(options: &JsValue) -> Result<(Vec<crate::wallet::Watched>, u32), JsValue> {
    use crate::wallet::Watched;
    let mut items = Vec::new();
    type Make = fn(String) -> Watched;
    let lists: [(&str, Make); 3] = [
        ("scripts", Watched::Script),
        ("addresses", Watched::Address),
        ("descriptors", Watched::Descriptor),
    ];
    for (key, make) in lists {
        let v = js_sys::Reflect::get(options, &key.into()).unwrap_or(JsValue::UNDEFINED);
        if v.is_undefined() || v.is_null() {
            continue;
        }
        let Some(array) = v.dyn_ref::<js_sys::Array>() else {
            return Err(js::error(
                "InvalidArgument",
                format!("{key} must be an array of strings"),
            ));
        };
        for x in array.iter() {
            let Some(s) = x.as_string() else {
                return Err(js::error(
                    "InvalidArgument",
                    format!("{key} must be an array of strings"),
                ));
            };
            items.push(make(s));
        }
    }
    if items.is_empty() {
        return Err(js::error(
            "InvalidArgument",
            "nothing to watch: give scripts, addresses or descriptors",
        ));
    }
    Ok((items, from_height(options)?))
}

/// `fromHeight` of `options`: 0 when not given.
fn from_height(options: &JsValue) -> Result<u32, JsValue> {
    let from = js_sys::Reflect::get(options, &"fromHeight".into()).unwrap_or(JsValue::UNDEFINED);
    match from.as_f64() {
        Some(f) => whole(f, "fromHeight"),
        None if from.is_undefined() || from.is_null() => Ok(0),
        None => Err(js::error("InvalidArgument", "fromHeight must be a number")),
    }
}

#[cfg(feature = "silent-payments")]
/// What `watchSilentPayments` takes, checked for its shape (the keys are checked by
/// [`crate::receiver::receiving`]).
pub(super) fn receiver_keys(
    options: &JsValue,
) -> Result<(crate::receiver::ReceiverKeys, u32, bool), JsValue> {
    let bad = |m: &str| js::error("InvalidArgument", m);
    let get = |key: &str| js_sys::Reflect::get(options, &key.into()).unwrap_or(JsValue::UNDEFINED);
    let text = |key: &str| -> Result<Option<String>, JsValue> {
        let v = get(key);
        if v.is_undefined() || v.is_null() {
            return Ok(None);
        }
        v.as_string()
            .map(Some)
            .ok_or_else(|| bad(&format!("{key} must be a string")))
    };
    let scan_key = text("scanKey")?.ok_or_else(|| bad("scanKey is required"))?;
    let mut labels = Vec::new();
    let v = get("labels");
    if !v.is_undefined() && !v.is_null() {
        let Some(array) = v.dyn_ref::<js_sys::Array>() else {
            return Err(bad("labels must be an array of numbers"));
        };
        for x in array.iter() {
            let Some(f) = x.as_f64() else {
                return Err(bad("labels must be an array of numbers"));
            };
            labels.push(whole(f, "a label")?);
        }
    }
    let keys = crate::receiver::ReceiverKeys {
        scan_key,
        spend_key: text("spendKey")?,
        address: text("address")?,
        labels,
        spend_origin: text("spendKeyOrigin")?,
    };
    let persist = match get("persistScanKey") {
        v if v.is_undefined() || v.is_null() => false,
        v => v
            .as_bool()
            .ok_or_else(|| bad("persistScanKey must be a boolean"))?,
    };
    Ok((keys, from_height(options)?, persist))
}

/// What `createPsbt` takes, checked for its shape (the wallet checks the rest).
fn psbt_ask(options: &JsValue) -> Result<crate::spend::PsbtAsk, JsValue> {
    use lightwire_wallet::spend::{FeeRate, MAX_MONEY};
    let bad = |m: String| js::error("InvalidArgument", m);
    let get =
        |o: &JsValue, k: &str| js_sys::Reflect::get(o, &k.into()).unwrap_or(JsValue::UNDEFINED);
    let list = get(options, "outputs");
    let Some(list) = list.dyn_ref::<js_sys::Array>() else {
        return Err(bad("outputs must be an array of { address, value }".into()));
    };
    let mut outputs = Vec::with_capacity(list.length() as usize);
    let mut max = None;
    for (i, o) in list.iter().enumerate() {
        let address = get(&o, "address").as_string();
        let value = get(&o, "value");
        if let (Some(a), Some("max")) = (&address, value.as_string().as_deref()) {
            // Send-max: this output takes what is left (one output at most).
            if max.replace(i).is_some() {
                return Err(bad("only one output may have value 'max'".into()));
            }
            outputs.push((a.clone(), 0));
            continue;
        }
        match (address, value.as_f64()) {
            (Some(a), Some(v)) if v.fract() == 0.0 && v > 0.0 && v <= MAX_MONEY as f64 => {
                outputs.push((a, v as u64))
            }
            _ => {
                return Err(bad(format!(
                    "outputs[{i}] must be {{ address, value }} with a whole number of satoshis from 1 to 21e14, or 'max'"
                )));
            }
        }
    }
    let rate = get(options, "feeRate")
        .as_f64()
        .and_then(FeeRate::from_sat_per_vb)
        .ok_or_else(|| bad("feeRate must be a number of sat/vB".into()))?;
    let coins = match get(options, "coins") {
        v if v.is_undefined() || v.is_null() => None,
        v => {
            let Some(a) = v.dyn_ref::<js_sys::Array>() else {
                return Err(bad("coins must be an array of txid:vout".into()));
            };
            let mut coins = Vec::with_capacity(a.length() as usize);
            for c in a.iter() {
                let text = c.as_string().unwrap_or_default();
                let o = crate::spend::parse_outpoint(&text)
                    .ok_or_else(|| bad(format!("coins: {text:?} is not txid:vout")))?;
                coins.push(o);
            }
            Some(coins)
        }
    };
    let include_unconfirmed = get(options, "includeUnconfirmed").is_truthy();
    let change_descriptor = match get(options, "changeDescriptor") {
        v if v.is_undefined() || v.is_null() => None,
        v => Some(
            v.as_string()
                .ok_or_else(|| bad("changeDescriptor must be a descriptor's text".into()))?,
        ),
    };
    Ok(crate::spend::PsbtAsk {
        outputs,
        max,
        rate,
        coins,
        include_unconfirmed,
        change_descriptor,
    })
}

/// A JavaScript number that must be a whole number from 0 to 2^32 - 1.
fn whole(v: f64, what: &str) -> Result<u32, JsValue> {
    if v.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&v) {
        Ok(v as u32)
    } else {
        Err(js::error(
            "InvalidArgument",
            format!(
                "{what} must be a whole number from 0 to 4294967295, not {}",
                js::num(v)
            ),
        ))
    }
}

fn wasm_memory() -> usize {
    core::arch::wasm32::memory_size(0) * 65_536
}

/// The engine resumed from the store (with the client key, read or made once), the
/// stored tip and its time.
async fn prepare(store: &IdbStore, o: &Options) -> Result<(Engine, Tip, u32), JsValue> {
    let key = identity::static_key(&format!("{}-identity", o.store_name))
        .await
        .map_err(|e| js::error("KeyError", e))?;
    let seed = identity::random_seed().map_err(|e| js::error("KeyError", e))?;
    let store_error = |e: StoreError| {
        js::error(
            js::store_kind(&e),
            format!("the stored chain could not be read: {e}"),
        )
    };
    let now = Millis::from_f64(js::now_ms());
    let (mut engine, stored) = crate::pipeline::open(store, o.gateways.clone(), key, seed, now)
        .await
        .map_err(store_error)?;
    engine.syncer_mut().commit_every = o.commit_every;
    engine.syncer_mut().request_size = o.request_size;
    engine.set_filters(o.filters);
    engine.set_mirrors(o.bulk.clone());
    // Files' SHA-256 by the browser's WebCrypto where it has it (natively, off the
    // engine's thread); else by the engine, in wasm.
    engine.set_shell_hashes(super::mirror::subtle().is_some());
    engine.set_unconfirmed_expiry(o.unconfirmed_expiry);
    let stored_time = store
        .header(stored.height)
        .await
        .ok()
        .flatten()
        .map_or(0, |h| h.time);
    Ok((engine, stored, stored_time))
}

/// Where the bytes came from: each gateway's and each mirror's, in list order.
fn sources(s: &Status) -> JsValue {
    let source = |kind: &str, url: &str, bytes: u64| {
        js::object(&[
            ("kind", kind.into()),
            ("url", url.into()),
            ("bytes", (bytes as f64).into()),
        ])
    };
    let gateways = s.urls.iter().zip(&s.gateway_bytes);
    let gateways = gateways.map(|(u, b)| source("gateway", u, *b));
    let mirrors = s.mirrors.iter().map(|(u, b)| source("mirror", u, *b));
    gateways.chain(mirrors).collect::<js_sys::Array>().into()
}

/// Milliseconds from `now` (Unix time) to `at`, negative when overdue; null for none.
fn in_ms(at: Option<lightwire_proto::Millis>, now: f64) -> JsValue {
    at.map_or(JsValue::NULL, |t| (t.as_f64() - now).round().into())
}

/// The wallet's block fetching, as `metrics().wallet` shows it.
fn wallet_trace(w: &crate::engine::WalletTrace, now: f64) -> JsValue {
    let opt = |v: Option<u32>| v.map_or(JsValue::NULL, JsValue::from);
    js::object(&[
        ("scanForWallet", w.scan_for_wallet.into()),
        ("walletScripts", (w.scripts.0 as u32).into()),
        ("scanScripts", (w.scripts.1 as u32).into()),
        ("applied", opt(w.applied)),
        ("pendingBlocks", (w.pending_blocks as u32).into()),
        ("front", opt(w.front)),
        ("askedGateway", opt(w.asked.map(|(g, _)| g.index() as u32))),
        ("askedId", opt(w.asked.map(|(_, id)| id))),
        ("tried", (w.tried as u32).into()),
        ("retryInMs", in_ms(w.retry_at, now)),
        ("deadlineInMs", in_ms(w.deadline, now)),
    ])
}
