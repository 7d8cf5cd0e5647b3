//! The options `Client.open` takes (a plain object), checked once, with a typed
//! `InvalidOptions` or `InvalidGateway` error naming what is wrong.

use js_sys::{Array, Reflect};
use lightwire_chain::Network;
use lightwire_proto::ConnectString;
use wasm_bindgen::prelude::*;

use super::js;
use crate::sync::{DEFAULT_COMMIT_EVERY, DEFAULT_REQUEST};

/// What `Client.open` was given.
pub struct Options {
    /// `network` (default mainnet).
    pub network: Network,
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
