//! Small bridges to JavaScript: plain objects for events and answers, typed errors,
//! timers, clocks.

use js_sys::{Function, Object, Reflect};
use lightwire_chain::{BlockHash, Header};
use lightwire_store::Tip;

use crate::events::EventShape;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

/// A plain object with these properties.
pub fn object(props: &[(&str, JsValue)]) -> JsValue {
    let o = Object::new();
    for (k, v) in props {
        let _ = Reflect::set(&o, &JsValue::from_str(k), v);
    }
    o.into()
}

/// Set property `key` of object `o`.
pub fn set(o: &JsValue, key: &str, value: JsValue) {
    let _ = Reflect::set(o, &JsValue::from_str(key), &value);
}

/// The object of event `shape` with these properties: built through
/// [`crate::events::js_event!`], which checks the names against the table.
pub fn event(shape: &EventShape, props: &[(&str, JsValue)]) -> JsValue {
    let o = tag_event(shape, Object::new().into());
    for (k, v) in props {
        let _ = Reflect::set(&o, &JsValue::from_str(k), v);
    }
    o
}

/// `o` with the `type` of event `shape` (and its variant) set: through
/// [`crate::events::js_event_from!`].
pub fn tag_event(shape: &EventShape, o: JsValue) -> JsValue {
    let _ = Reflect::set(&o, &"type".into(), &shape.kind.into());
    if let Some((k, v)) = shape.variant {
        let _ = Reflect::set(&o, &k.into(), &v.into());
    }
    o
}

/// An `Error` whose `name` is `kind` (what a caller can branch on) and whose message is a
/// sentence for a user.
pub fn error(kind: &str, message: impl AsRef<str>) -> JsValue {
    let e = js_sys::Error::new(message.as_ref());
    e.set_name(kind);
    e.into()
}

/// A number as JavaScript writes it (`String(v)`): Rust's own float formatting would add
/// 18 KB to the module for a few error messages.
pub fn num(v: f64) -> String {
    js_sys::Number::from(v)
        .to_string_with_radix(10)
        .map(String::from)
        .unwrap_or_default()
}

/// The `name` of an `Error` (or `kind` of an `error` event) for a store failure: what an
/// app can branch on. `StoreUnavailable`: this page may not use IndexedDB (some private
/// windows, storage blocked); `QuotaExceeded`: the browser will store no more; `StoreError`:
/// anything else.
pub fn store_kind(e: &lightwire_store::StoreError) -> &'static str {
    match e {
        lightwire_store::StoreError::Unavailable(_) => "StoreUnavailable",
        lightwire_store::StoreError::QuotaExceeded => "QuotaExceeded",
        _ => "StoreError",
    }
}

/// A block hash or a txid as the usual display hex (byte-reversed).
pub fn hash(h: &impl core::fmt::Display) -> JsValue {
    JsValue::from_str(&h.to_string())
}

/// A header, and its height, as a plain object.
pub fn header(height: u32, h: &Header) -> JsValue {
    object(&[
        ("height", height.into()),
        ("hash", hash(&h.block_hash())),
        ("prevHash", hash(&h.prev_blockhash)),
        // Display hex, like hashes and txids (the byte order reversed).
        ("merkleRoot", hash(&BlockHash(h.merkle_root))),
        ("time", h.time.into()),
        ("bits", h.bits.0.into()),
        ("nonce", h.nonce.into()),
        ("version", h.version.into()),
    ])
}

/// A tip as `{height, hash}`.
pub fn tip(t: &Tip) -> JsValue {
    object(&[("height", t.height.into()), ("hash", hash(&t.hash))])
}

/// Milliseconds since the epoch.
pub fn now_ms() -> f64 {
    js_sys::Date::now()
}

thread_local! {
    /// The global `performance` (a Window's or a Worker's), looked up once: the clock is
    /// read several times for every input the loop takes.
    static PERFORMANCE: Option<web_sys::Performance> =
        Reflect::get(&js_sys::global(), &"performance".into())
            .ok()
            .and_then(|p| p.dyn_into::<web_sys::Performance>().ok());
}

/// A monotonic clock in milliseconds (for rates and durations).
pub fn mono_ms() -> f64 {
    PERFORMANCE.with(|p| p.as_ref().map_or_else(now_ms, |p| p.now()))
}

thread_local! {
    /// Timers set with [`set_timeout`] that have neither fired ([`timer_fired`]) nor been
    /// cleared: the `timersPending` metric, which a long session's test watches for growth.
    static TIMERS_PENDING: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
}

/// `setTimeout(f, ms)` on whatever global this runs in (window or worker); returns its id.
/// Its callback must call [`timer_fired`] when it runs.
pub fn set_timeout(f: &Function, ms: f64) -> JsValue {
    TIMERS_PENDING.with(|t| t.set(t.get().saturating_add(1)));
    call_global("setTimeout", f, ms)
}

/// `clearTimeout(id)` of a timer that has not fired.
pub fn clear_timeout(id: &JsValue) {
    TIMERS_PENDING.with(|t| t.set(t.get().saturating_sub(1)));
    if let Some((g, clear)) = global_function("clearTimeout") {
        let _ = clear.call1(&g, id);
    }
}

/// A timer of [`set_timeout`] fired.
pub fn timer_fired() {
    TIMERS_PENDING.with(|t| t.set(t.get().saturating_sub(1)));
}

/// Timers set and neither fired nor cleared.
pub fn timers_pending() -> u32 {
    TIMERS_PENDING.with(|t| t.get())
}

fn call_global(name: &str, f: &Function, ms: f64) -> JsValue {
    global_function(name)
        .and_then(|(g, t)| t.call2(&g, f, &ms.into()).ok())
        .unwrap_or(JsValue::UNDEFINED)
}

/// The global object (window or worker) and its function `name`.
fn global_function(name: &str) -> Option<(JsValue, Function)> {
    let global: JsValue = js_sys::global().into();
    let f = Reflect::get(&global, &name.into()).ok()?.dyn_into().ok()?;
    Some((global, f))
}

/// Parse a display-hex hash (64 hex digits), naming `what` in the error.
pub fn parse_hash(s: &str, what: &str) -> Result<BlockHash, JsValue> {
    BlockHash::from_display_hex(s).ok_or_else(|| {
        error(
            "InvalidArgument",
            format!("{what} is not a 32-byte hash in hex (64 digits): {s:?}"),
        )
    })
}

/// A gateway as JavaScript sees it: its index in the list the application gave.
impl From<crate::ids::GatewayId> for JsValue {
    fn from(g: crate::ids::GatewayId) -> JsValue {
        JsValue::from(g.index() as u32)
    }
}

#[cfg(test)]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::events::{self, ALL, js_event, js_event_from, js_object};

    fn keys(o: &JsValue) -> Vec<String> {
        Object::keys(o.unchecked_ref::<Object>())
            .iter()
            .filter_map(|k| k.as_string())
            .collect()
    }

    fn get(o: &JsValue, k: &str) -> JsValue {
        Reflect::get(o, &k.into()).unwrap_or(JsValue::UNDEFINED)
    }

    /// Every event of the table, built: `type`, then its variant, then its properties.
    #[test]
    fn each_event_object_has_its_type_variant_and_properties() {
        for shape in ALL {
            let props: Vec<(&str, JsValue)> =
                shape.fields.iter().map(|f| (*f, JsValue::NULL)).collect();
            let e = event(shape, &props);
            let mut expected = vec!["type"];
            expected.extend(shape.variant.map(|v| v.0));
            expected.extend(shape.fields);
            assert_eq!(keys(&e), expected, "{}", shape.kind);
            assert_eq!(get(&e, "type"), shape.kind, "{}", shape.kind);
            if let Some((k, v)) = shape.variant {
                assert_eq!(get(&e, k), v);
            }
        }
    }

    #[test]
    fn the_builders_set_what_they_are_given() {
        let e = js_event!(events::SCAN_MATCH {
            "height": 5.into(),
            "blockHash": "ab".into(),
        });
        assert_eq!(keys(&e), ["type", "height", "blockHash"]);
        assert_eq!(get(&e, "height"), 5);
        let balance = js_object!(events::BALANCE {
            "confirmed": 1.into(),
            "pending": 2.into(),
            "immature": 3.into(),
            "coins": 4.into(),
            "unconfirmed": (-5).into(),
        });
        assert_eq!(keys(&balance), events::BALANCE);
        set(&balance, "wallet", "savings".into());
        let e = js_event_from!(events::BALANCE_CHANGED, events::BALANCE_EVENT, balance);
        assert_eq!(get(&e, "type"), "balance");
        assert_eq!(get(&e, "coins"), 4);
        assert_eq!(keys(&e)[..6], events::BALANCE_EVENT[..]);
    }
}
