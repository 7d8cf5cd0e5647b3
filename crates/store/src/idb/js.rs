//! The browser's side: IndexedDB requests and transactions as futures, keys and byte
//! records, and DOM errors turned into typed [`StoreError`]s.

use super::*;

/// `indexedDB` of the window or worker this runs in.
pub(super) fn factory() -> Result<IdbFactory, StoreError> {
    Reflect::get(&js_sys::global(), &"indexedDB".into())
        .ok()
        .and_then(|f| f.dyn_into::<IdbFactory>().ok())
        .ok_or_else(|| StoreError::Unavailable("no indexedDB in this context".into()))
}

pub(super) fn now_ms() -> f64 {
    Reflect::get(&js_sys::global(), &"performance".into())
        .ok()
        .and_then(|p| p.dyn_into::<web_sys::Performance>().ok())
        .map_or(0.0, |p| p.now())
}

pub(super) fn object_store(tx: &IdbTransaction, name: &str) -> Result<IdbObjectStore, StoreError> {
    tx.object_store(name).map_err(store_error)
}

pub(super) fn key_range(r: Result<IdbKeyRange, JsValue>) -> Result<JsValue, StoreError> {
    r.map(JsValue::from).map_err(store_error)
}

pub(super) fn index_key(p: u32, first: u32) -> JsValue {
    Array::of2(&p.into(), &first.into()).into()
}

/// The bytes of a stored `Uint8Array` value, `None` if there is no record.
pub(super) fn bytes_of(value: &JsValue) -> Option<Vec<u8>> {
    value.dyn_ref::<Uint8Array>().map(Uint8Array::to_vec)
}

/// Resolves once the request succeeds (set up now, before the request can complete).
pub fn request_future(req: &IdbRequest) -> JsFuture {
    let promise = Promise::new(&mut |resolve, reject| {
        req.set_onsuccess(Some(&resolve));
        req.set_onerror(Some(&reject));
    });
    JsFuture::from(promise)
}

pub(super) async fn request_result(req: &IdbRequest) -> Result<JsValue, StoreError> {
    request_future(req).await.map_err(|_| request_error(req))?;
    req.result().map_err(store_error)
}

/// Resolves once the transaction completes; rejects if it fails or is aborted.
pub fn transaction_future(tx: &IdbTransaction) -> JsFuture {
    let promise = Promise::new(&mut |resolve, reject| {
        tx.set_oncomplete(Some(&resolve));
        tx.set_onerror(Some(&reject));
        tx.set_onabort(Some(&reject));
    });
    JsFuture::from(promise)
}

pub(super) fn request_error(req: &IdbRequest) -> StoreError {
    match req.error() {
        Ok(Some(e)) => dom_error(&e),
        _ => StoreError::Backend("request failed".into()),
    }
}

pub(super) fn transaction_error(tx: &IdbTransaction) -> StoreError {
    match tx.error() {
        Some(e) => dom_error(&e),
        None => StoreError::Backend("transaction aborted".into()),
    }
}

pub(super) fn dom_error(e: &DomException) -> StoreError {
    match e.name().as_str() {
        "QuotaExceededError" => StoreError::QuotaExceeded,
        "InvalidStateError" => StoreError::Closed,
        name => StoreError::Backend(format!("{name}: {}", e.message())),
    }
}

/// An error from opening the database: the browser's refusals (`SecurityError`,
/// `InvalidStateError`, `UnknownError`) mean IndexedDB cannot be used here.
pub(super) fn unavailable(e: StoreError) -> StoreError {
    match e {
        StoreError::Closed => StoreError::Unavailable("InvalidStateError".into()),
        StoreError::Backend(m)
            if m.starts_with("SecurityError") || m.starts_with("UnknownError") =>
        {
            StoreError::Unavailable(m)
        }
        e => e,
    }
}

/// A thrown JS value as a store error.
pub(super) fn store_error(e: JsValue) -> StoreError {
    match e.dyn_ref::<DomException>() {
        Some(d) => dom_error(d),
        None => StoreError::Backend(format!("{e:?}")),
    }
}
