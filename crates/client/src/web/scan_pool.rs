//! The receiver's filter checks run beside the engine: a block's check (the receiver's
//! first keys for each of its tweaks, a curve multiplication a tweak) is the one cost of a
//! silent-payment scan that grows with the chain's use, and it needs nothing but the
//! block's checked tweak list and filter. So, when the package gives the engine a pool of
//! workers (`scanPool` in `Client.open`'s options), the engine hands each check out
//! ([`crate::engine::Engine::offload_silent`]) and the pool's workers run it on a
//! [`ScanHelper`] of their own, in parallel; the answers come back through
//! `Client.silentScanned`. The workers hold the receiver's keys (the scan key goes to them
//! and to no other context); the engine keeps every check of the gateways' data, and
//! fetches and searches the blocks that match.

use js_sys::{Array, Function, Reflect, Uint8Array};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

use super::js;
use crate::silent_scan::{ScanJob, scan_filter};
use lightwire_chain::BlockHash;
use lightwire_wallet::silent::Receiver;
use lightwire_wallet::silent_block::BlockScanner;

/// The package's pool: `{ start(keys), post(tag, height, list, filter, hash) }`.
pub struct ScanPool {
    this: JsValue,
    start: Function,
    post: Function,
}

impl ScanPool {
    /// The pool in `options.scanPool`, if it is one.
    pub fn from_options(options: &JsValue) -> Option<ScanPool> {
        let this = Reflect::get(options, &"scanPool".into()).ok()?;
        let f = |k: &str| {
            Reflect::get(&this, &k.into())
                .ok()?
                .dyn_into::<Function>()
                .ok()
        };
        Some(ScanPool {
            start: f("start")?,
            post: f("post")?,
            this,
        })
    }

    /// A new receiver's keys, as `watchSilentPayments` took them: the pool's workers
    /// answer every check posted after this with them (those of the receiver before are
    /// dropped: its scan is gone).
    pub fn start(&self, keys: &crate::receiver::ReceiverKeys) {
        let labels: Array = keys.labels.iter().map(|&l| JsValue::from(l)).collect();
        let text = |s: &Option<String>| s.as_deref().map_or(JsValue::UNDEFINED, JsValue::from);
        let o = js::object(&[
            ("scanKey", keys.scan_key.as_str().into()),
            ("spendKey", text(&keys.spend_key)),
            ("address", text(&keys.address)),
            ("labels", labels.into()),
        ]);
        let _ = self.start.call1(&self.this, &o);
    }

    /// Hand `job` to the pool (its bytes copied out of wasm).
    pub fn post(&self, job: &ScanJob<'_>) {
        let args = Array::new();
        args.push(&job.tag.into());
        args.push(&job.height.into());
        args.push(&Uint8Array::from(job.list).into());
        args.push(&Uint8Array::from(job.filter).into());
        args.push(&Uint8Array::from(&job.hash.0[..]).into());
        let _ = self.post.apply(&self.this, &args);
    }
}

/// A pool worker's side: the receiver's keys, checked as `watchSilentPayments` checks
/// them, and the buffers of its checks.
#[wasm_bindgen]
pub struct ScanHelper {
    receiver: Receiver,
    scanner: BlockScanner,
}

#[wasm_bindgen]
impl ScanHelper {
    /// The receiver of `keys` (`{ scanKey, spendKey?, address?, labels? }`) on `network`.
    #[wasm_bindgen(constructor)]
    pub fn new(network: &str, keys: JsValue) -> Result<ScanHelper, JsValue> {
        let network: lightwire_chain::Network =
            network
                .parse()
                .map_err(|e: lightwire_chain::UnknownNetwork| {
                    js::error("InvalidOptions", e.to_string())
                })?;
        let (keys, _, _) = super::client::receiver_keys(&keys)?;
        let r = crate::receiver::receiving(&keys, network)
            .map_err(|e| js::error("InvalidArgument", e.to_string()))?;
        Ok(ScanHelper {
            receiver: r.receiver,
            scanner: BlockScanner::new(),
        })
    }

    /// The check of a block: 0 no key of the receiver's in its filter, 1 one may be (the
    /// block is to be fetched), 2 a tweak of its list is not a point.
    pub fn scan(&mut self, list: &[u8], filter: &[u8], hash: &[u8]) -> u8 {
        let Ok(hash) = <[u8; 32]>::try_from(hash) else {
            // Not a block's hash: it cannot say no.
            return crate::silent_scan::Scanned::Match.code();
        };
        scan_filter(
            &mut self.scanner,
            &self.receiver,
            list,
            filter,
            &BlockHash(hash),
        )
        .code()
    }
}
