//! The options `Client.open` takes (a plain object), checked once, with a typed
//! `InvalidOptions` or `InvalidGateway` error naming what is wrong.

use js_sys::{Array, Reflect};
use lightwire_chain::{BlockHash, Network, Params};
use lightwire_proto::ConnectString;
use lightwire_store::Start;
use wasm_bindgen::prelude::*;

use super::js;
use crate::engine::UNCONFIRMED_EXPIRY;
use crate::start;
use crate::sync::{DEFAULT_COMMIT_EVERY, DEFAULT_REQUEST};

/// What `Client.open` was given.
pub struct Options {
    /// `network`'s rules (default mainnet), with `checkpoints` added to its own.
    pub params: &'static Params,
    /// `gateways`: connect strings, at least one.
    pub gateways: Vec<ConnectString>,
    /// `storeName` (default `lightwire-<network>`).
    pub store_name: String,
    /// `commitEvery`: headers per bulk commit.
    pub commit_every: usize,
    /// `requestSize`: headers per request.
    pub request_size: u32,
    /// `progressIntervalMs`: the most frequent progress events.
    pub progress_ms: f64,
    /// `start`: where a new store begins (`None`: genesis). An existing store keeps its own.
    pub start: Option<Start>,
    /// `filters`: sync the filter-header chain beside the headers (default true).
    pub filters: bool,
    /// `bulk`: base URLs of mirrors of the chain's history (docs/PROTOCOL.md, "Bulk
    /// files"); `None` (not given): the mirrors the gateways advertise.
    pub bulk: Option<Vec<String>>,
    /// `unconfirmedExpiryMs`: how long an unconfirmed transaction no gateway holds is kept
    /// unmined (default two weeks, Bitcoin Core's mempool expiry).
    pub unconfirmed_expiry: core::time::Duration,
}

/// Read and check `o`.
pub fn options(o: &JsValue) -> Result<Options, JsValue> {
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
                format!(
                    "options.{k} is {}; it must be between {} and {}",
                    js::num(v),
                    js::num(min),
                    js::num(max)
                ),
            )),
        }
    };
    let params = with_checkpoints(network, &get("checkpoints"))?;
    let bulk = bulk_option(&get("bulk"))?;
    let start = start_option(network, params, &get("start"))?;
    Ok(Options {
        start,
        params,
        store_name: get("storeName")
            .as_string()
            .unwrap_or_else(|| format!("lightwire-{network}")),
        gateways,
        commit_every: number("commitEvery", DEFAULT_COMMIT_EVERY as f64, 1.0, 1e6)? as usize,
        request_size: number("requestSize", DEFAULT_REQUEST as f64, 1.0, 100_000.0)? as u32,
        progress_ms: number("progressIntervalMs", 250.0, 10.0, 60_000.0)?,
        filters: get("filters").as_bool().unwrap_or(true),
        bulk,
        unconfirmed_expiry: core::time::Duration::from_millis(number(
            "unconfirmedExpiryMs",
            UNCONFIRMED_EXPIRY.as_millis() as f64,
            1.0,
            1e12,
        )? as u64),
    })
}

/// The most mirrors an app may list.
const MAX_MIRRORS: usize = 8;

/// `bulk`: a list of base URLs (`https://`, `http://`, or a path on the app's origin
/// starting with `/`), at most [`MAX_MIRRORS`].
fn bulk_option(v: &JsValue) -> Result<Option<Vec<String>>, JsValue> {
    let bad = |why: String| js::error("InvalidOptions", format!("options.bulk: {why}"));
    if v.is_undefined() || v.is_null() {
        return Ok(None);
    }
    if !Array::is_array(v) || Array::from(v).length() as usize > MAX_MIRRORS {
        return Err(bad(format!(
            "must be a list of at most {MAX_MIRRORS} base URLs"
        )));
    }
    let mut out = Vec::new();
    for item in Array::from(v).iter() {
        let url = item.as_string().unwrap_or_default();
        let ok = url.starts_with("https://") || url.starts_with("http://") || url.starts_with('/');
        if !ok || url.len() > 2_000 {
            return Err(bad(format!(
                "{url:?} is not an http(s) URL or a path starting with /"
            )));
        }
        out.push(url);
    }
    Ok(Some(out))
}

/// `start`: `'genesis'` (the default), `'checkpoint'` (the network's built-in one), or
/// `{ height, header, chainwork, hash? }` (a header the app trusts at a period's first
/// height: its 80-byte encoding in hex, the chainwork up to it in hex as Bitcoin Core's
/// `getblockheader` gives it, and optionally its hash in display hex to check it against).
fn start_option(
    network: Network,
    params: &'static Params,
    v: &JsValue,
) -> Result<Option<Start>, JsValue> {
    let bad = |why: String| js::error("InvalidOptions", format!("options.start: {why}"));
    if v.is_undefined() || v.is_null() || v.as_string().as_deref() == Some("genesis") {
        return Ok(None);
    }
    if v.as_string().as_deref() == Some("checkpoint") {
        return start::builtin(network)
            .map(Some)
            .map_err(|e| bad(e.to_string()));
    }
    if !v.is_object() {
        return Err(bad(
            "'genesis', 'checkpoint' or { height, header, chainwork, hash? }".into(),
        ));
    }
    let get = |k: &str| Reflect::get(v, &k.into()).unwrap_or(JsValue::UNDEFINED);
    let height = get("height")
        .as_f64()
        .filter(|h| h.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(h))
        .ok_or_else(|| bad("height must be a whole number".into()))? as u32;
    let text = |k: &str| get(k).as_string().unwrap_or_default().to_ascii_lowercase();
    let hash = match get("hash").as_string() {
        None => None,
        Some(h) => Some(
            BlockHash::from_display_hex(&h.to_ascii_lowercase())
                .ok_or_else(|| bad(format!("{h:?} is not a block hash (64 hex digits)")))?,
        ),
    };
    start::parse(params, height, &text("header"), &text("chainwork"), hash)
        .map(Some)
        .map_err(|e| bad(e.to_string()))
}

/// The network's parameters with the app's own `checkpoints` (`[{ height, hash }]`, hash in
/// display hex) added: a header at such a height must have that hash, and once the chain
/// reaches it no fork below it is taken (Core's checkpoint rules). They can only narrow
/// what is accepted. The parameters live for the rest of the page (a few hundred bytes per
/// `open` with checkpoints: the chain code takes `&'static Params`).
fn with_checkpoints(network: Network, list: &JsValue) -> Result<&'static Params, JsValue> {
    let params = network.params();
    if list.is_undefined() || list.is_null() {
        return Ok(params);
    }
    let bad = |why: String| js::error("InvalidOptions", format!("options.checkpoints: {why}"));
    if !Array::is_array(list) {
        return Err(bad("must be an array of { height, hash }".into()));
    }
    let mut all: Vec<(u32, &'static str)> = params.checkpoints.to_vec();
    for item in Array::from(list).iter() {
        let get = |k: &str| Reflect::get(&item, &k.into()).unwrap_or(JsValue::UNDEFINED);
        let height = get("height")
            .as_f64()
            .filter(|h| h.fract() == 0.0 && (1.0..=f64::from(u32::MAX)).contains(h))
            .ok_or_else(|| bad("each height must be a whole number from 1".into()))?
            as u32;
        let hash = get("hash")
            .as_string()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if BlockHash::from_display_hex(&hash).is_none() {
            return Err(bad(format!("{hash:?} is not a block hash (64 hex digits)")));
        }
        match all.iter().find(|(h, _)| *h == height) {
            Some((_, known)) if *known != hash => {
                return Err(bad(format!(
                    "height {height} is already a checkpoint of {network} with hash {known}"
                )));
            }
            Some(_) => {}
            // In height order, each put in its place (an app's few checkpoints; no sort's
            // code in the wasm for them).
            None => {
                let at = all.partition_point(|(h, _)| *h < height);
                all.insert(at, (height, Box::leak(hash.into_boxed_str())));
            }
        }
    }
    Ok(Box::leak(Box::new(Params {
        checkpoints: Box::leak(all.into_boxed_slice()),
        ..params.clone()
    })))
}
