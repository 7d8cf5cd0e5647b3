//! A mirror's fetches in the browser: its manifest read with `fetch()` and the browser's own
//! JSON parser (no JSON code in the module), and a file's body streamed from the
//! response's `ReadableStream` into the inbox, piece by piece as the network brings it,
//! for the engine to read ([`crate::engine::Engine::mirror_data`]). One file is read at a
//! time, so what waits in the inbox is at most one file.
//!
//! A file's SHA-256 is checked here, by the browser's WebCrypto (`crypto.subtle`, native
//! code, not the engine's thread), once its body ended: hashing 70 MB of files in wasm
//! made the mirror sync about 8 % slower in Firefox and WebKit. The body's pieces are
//! kept (the same arrays the inbox copies from, no copy) until then, so only files of at
//! most 4 MiB are (`MOST_SHELL_HASHED`: headers and filter-headers files); a longer one
//! (a filters file) is hashed by the engine as it passes. The engine is told
//! of the end at once and of a mismatch when the digest comes: the hash only decides
//! whether the mirror is read further (what its files brought was validated as a
//! gateway's answer is). Where `crypto.subtle` is missing (a page not in a secure
//! context), the engine hashes in wasm.

use std::rc::Rc;

use js_sys::{Promise, Reflect, Uint8Array};
use lightwire_chain::BlockHash;
use lightwire_proto::bulk::FileCheck;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use super::inbox::{Inbox, Input};
use super::socket::describe;
use crate::engine::FetchError;
use crate::engine::mirror::{FileEntry, Manifest, MirrorId};

#[wasm_bindgen]
extern "C" {
    /// The global `fetch` (a Window's or a Worker's).
    #[wasm_bindgen(js_name = fetch)]
    fn global_fetch(url: &str, init: &JsValue) -> Promise;
}

/// A file asked for before the engine wants it (the one after the file being read, of
/// the same kind): its request's round trip overlaps the reading of the one before. The
/// browser holds its body (one file) until it is read. Dropping it aborts it.
pub struct Prefetch {
    /// Its URL.
    pub url: String,
    response: Promise,
    /// Taken when a fetch takes the prefetch over (then it is not aborted).
    controller: Option<web_sys::AbortController>,
}

impl Prefetch {
    /// Ask for `url` now.
    pub fn start(url: String) -> Option<Prefetch> {
        let controller = web_sys::AbortController::new().ok()?;
        let response = global_fetch(&url, &file_init(&controller.signal()));
        Some(Prefetch {
            url,
            response,
            controller: Some(controller),
        })
    }
}

impl Drop for Prefetch {
    fn drop(&mut self) {
        if let Some(c) = &self.controller {
            c.abort();
        }
    }
}

/// A file's request options: abortable, and kept out of the browser's HTTP cache
/// (`no-store`): what a file holds goes to IndexedDB, so a cached copy would only double
/// what the tab writes to disk (the whole chain's filters are gigabytes).
fn file_init(signal: &web_sys::AbortSignal) -> JsValue {
    let init = js_sys::Object::new();
    let _ = Reflect::set(&init, &"signal".into(), signal);
    let _ = Reflect::set(&init, &"cache".into(), &"no-store".into());
    init.into()
}

/// A fetch in flight, abortable.
pub struct Fetching {
    /// The engine's fetch.
    pub fetch: u32,
    controller: web_sys::AbortController,
}

impl Drop for Fetching {
    fn drop(&mut self) {
        self.controller.abort();
    }
}

/// The response of `promise`: a `200`, or asked from byte `from` on, a `206` (of a `200`,
/// the whole file, the caller skips to there). A `206` from elsewhere is not looked for
/// (a host or CDN may not expose `Content-Range`): its records would not decode, and the
/// mirror is dropped as for any bad file.
async fn answered(promise: Promise, from: Option<u64>) -> Result<web_sys::Response, FetchError> {
    let response = JsFuture::from(promise)
        .await
        .map_err(|e| FetchError::Failed(describe(&e)))?;
    let response: web_sys::Response = response
        .dyn_into()
        .map_err(|_| FetchError::Failed("fetch gave no response".into()))?;
    match (response.status(), from) {
        (200, _) | (206, Some(_)) => Ok(response),
        (status, _) => Err(FetchError::Status(status)),
    }
}

/// Fetch mirror `m`'s manifest at `url`; its answer goes to the inbox.
pub fn fetch_manifest(url: String, m: MirrorId, inbox: Rc<Inbox>) {
    wasm_bindgen_futures::spawn_local(async move {
        let result = async {
            // Revalidated at every read, so that a new one is seen.
            let init = js_sys::Object::new();
            let _ = Reflect::set(&init, &"cache".into(), &"no-cache".into());
            let response = answered(global_fetch(&url, &init), None).await?;
            let json = response
                .json()
                .map_err(|e| FetchError::Manifest(describe(&e)))?;
            let value = JsFuture::from(json)
                .await
                .map_err(|e| FetchError::Manifest(describe(&e)))?;
            parse_manifest(&value).map_err(FetchError::Manifest)
        }
        .await;
        inbox.push(Input::Manifest { m, result });
    });
}

/// The browser's `crypto.subtle`, where it has one.
pub fn subtle() -> Option<JsValue> {
    let crypto = Reflect::get(&js_sys::global(), &"crypto".into()).ok()?;
    let subtle = Reflect::get(&crypto, &"subtle".into()).ok()?;
    subtle.is_object().then_some(subtle)
}

/// What a file's bytes must hash to, when the shell checks it.
pub struct Hashed {
    /// Its mirror.
    pub m: MirrorId,
    /// Its name.
    pub name: String,
    /// Its SHA-256, as the manifest names it.
    pub sha256: [u8; 32],
}

/// The SHA-256 of `pieces` (Uint8Arrays, `len` bytes in all) by WebCrypto; none if it
/// could not be computed.
async fn digest(pieces: &js_sys::Array, len: u32) -> Option<[u8; 32]> {
    let subtle = subtle()?;
    let whole = Uint8Array::new_with_length(len);
    let mut at = 0;
    for piece in pieces.iter() {
        let piece: Uint8Array = piece.dyn_into().ok()?;
        whole.set(&piece, at);
        at += piece.length();
    }
    let f: js_sys::Function = Reflect::get(&subtle, &"digest".into())
        .ok()?
        .dyn_into()
        .ok()?;
    let promise: Promise = f
        .call2(&subtle, &"SHA-256".into(), &whole)
        .ok()?
        .dyn_into()
        .ok()?;
    let hash = Uint8Array::new(&JsFuture::from(promise).await.ok()?);
    let mut out = [0u8; 32];
    (hash.length() == 32).then(|| hash.copy_to(&mut out))?;
    Some(out)
}

/// Fetch a file at `url` for the engine's fetch `fetch` (or take `prefetched`, when it
/// asked for the same URL), from byte `from` on when given (a part of a filters file: an
/// HTTP `Range`): its body goes to the inbox as it comes, and, with `hashed`, its SHA-256
/// is checked once it ended. Dropping what is returned aborts it.
pub fn fetch_file(
    url: String,
    (fetch, from): (u32, Option<u64>),
    inbox: Rc<Inbox>,
    prefetched: Option<Prefetch>,
    hashed: Option<Hashed>,
) -> Option<Fetching> {
    let from = from.filter(|&f| f > 0);
    // A prefetch asked for the whole file: not taken for a part (dropped, it is aborted).
    let taken = prefetched
        .filter(|p| p.url == url && from.is_none())
        .and_then(|mut p| Some((p.response.clone(), p.controller.take()?)));
    let (promise, controller) = match taken {
        Some(taken) => taken,
        None => {
            let controller = web_sys::AbortController::new().ok()?;
            let init = file_init(&controller.signal());
            if let Some(from) = from {
                let headers = js_sys::Object::new();
                let _ = Reflect::set(&headers, &"Range".into(), &format!("bytes={from}-").into());
                let _ = Reflect::set(&init, &"headers".into(), &headers);
            }
            (global_fetch(&url, &init), controller)
        }
    };
    let signal = controller.signal();
    wasm_bindgen_futures::spawn_local(async move {
        let pieces = hashed.as_ref().map(|_| js_sys::Array::new());
        let result = stream((promise, from), fetch, &signal, &inbox, pieces.as_ref()).await;
        if signal.aborted() {
            return;
        }
        let whole = result.is_ok();
        inbox.push(Input::MirrorEnd { fetch, result });
        let (Some(h), Some(pieces), true) = (hashed, pieces, whole) else {
            return;
        };
        let len = pieces
            .iter()
            .filter_map(|p| p.dyn_into::<Uint8Array>().ok())
            .map(|p| p.length())
            .sum();
        // Not computed (WebCrypto failed): not checked; its content was validated.
        if digest(&pieces, len).await.is_some_and(|d| d != h.sha256) {
            inbox.push(Input::MirrorWrongHash {
                m: h.m,
                name: h.name,
            });
        }
    });
    Some(Fetching { fetch, controller })
}

/// `promise.then(on_fulfilled, on_rejected)` with functions (js-sys's `then2` takes
/// closures only).
fn then2(promise: &Promise, on_fulfilled: &js_sys::Function, on_rejected: &js_sys::Function) {
    let then = Reflect::get(promise, &"then".into()).ok();
    if let Some(then) = then.and_then(|t| t.dyn_into::<js_sys::Function>().ok()) {
        let _ = then.call2(promise, on_fulfilled, on_rejected);
    }
}

/// The body of the answer of `promise`, piece by piece into the inbox (and kept in
/// `pieces`, when given); asked from byte `from` on, a `206` is taken as starting there,
/// and of a `200` (a host that serves no ranges) the bytes before it are skipped here (the
/// engine sees none of them: on a slow link a long skip can make it drop the mirror as
/// stalled, and the gateways serve the scan).
///
/// Each `read()` of the body's reader is answered by one of two closures made once a
/// file (a piece, a failure), the piece's asking the next read: awaiting a `JsFuture`
/// per read instead allocated its state and two closures at every piece (about 0.2
/// allocations a filter in a rescan from a mirror, against 0.008 from a gateway).
async fn stream(
    (promise, from): (Promise, Option<u64>),
    fetch: u32,
    signal: &web_sys::AbortSignal,
    inbox: &Rc<Inbox>,
    pieces: Option<&js_sys::Array>,
) -> Result<(), FetchError> {
    let response = answered(promise, from).await?;
    // Bytes of the body before the part asked for: a whole file's answer to a range.
    let skip = core::cell::Cell::new(match (from, response.status()) {
        (Some(from), 200) => from,
        _ => 0,
    });
    let Some(body) = response.body() else {
        return Ok(());
    };
    let reader: web_sys::ReadableStreamDefaultReader = body
        .get_reader()
        .dyn_into()
        .map_err(|_| FetchError::Failed("the body gave no reader".into()))?;
    // Settled by the closures when the body ends, is aborted, or fails.
    let mut settle = None;
    let done = Promise::new(&mut |resolve, reject| settle = Some((resolve, reject)));
    let Some((resolve, reject)) = settle else {
        return Err(FetchError::Failed("no promise to wait on".into()));
    };
    // The two closures' functions, for the piece's closure to ask the next read with.
    let next: Rc<core::cell::RefCell<Option<(js_sys::Function, js_sys::Function)>>> = Rc::default();
    let on_error = Closure::<dyn FnMut(JsValue)>::new(move |e: JsValue| {
        let _ = reject.call1(&JsValue::NULL, &e);
    });
    let on_piece = {
        let (next, reader, signal) = (next.clone(), reader.clone(), signal.clone());
        let (inbox, pieces) = (inbox.clone(), pieces.cloned());
        Closure::<dyn FnMut(JsValue)>::new(move |chunk: JsValue| {
            let ended = Reflect::get(&chunk, &"done".into())
                .ok()
                .and_then(|d| d.as_bool())
                .unwrap_or(true);
            if ended || signal.aborted() {
                let _ = resolve.call0(&JsValue::NULL);
                return;
            }
            let value = Reflect::get(&chunk, &"value".into()).unwrap_or(JsValue::UNDEFINED);
            if let Ok(mut data) = value.dyn_into::<Uint8Array>() {
                let skipping = skip.get();
                if skipping > 0 {
                    let dropped = skipping.min(u64::from(data.length()));
                    skip.set(skipping - dropped);
                    data = data.subarray(dropped as u32, data.length());
                }
                if data.length() > 0 {
                    if let Some(pieces) = &pieces {
                        pieces.push(&data);
                    }
                    inbox.push(Input::MirrorData { fetch, data });
                }
            }
            if let Some((piece, error)) = next.borrow().as_ref() {
                then2(&reader.read(), piece, error);
            }
        })
    };
    let functions = (
        on_piece
            .as_ref()
            .unchecked_ref::<js_sys::Function>()
            .clone(),
        on_error
            .as_ref()
            .unchecked_ref::<js_sys::Function>()
            .clone(),
    );
    then2(&reader.read(), &functions.0, &functions.1);
    *next.borrow_mut() = Some(functions);
    let result = JsFuture::from(done)
        .await
        .map(|_| ())
        .map_err(|e| FetchError::Failed(describe(&e)));
    // The closures are dropped here, after the last call (none is under way).
    next.borrow_mut().take();
    drop((on_piece, on_error));
    result
}

/// What is wrong with a file's parts in a manifest.
const PARTS: &str = "a file's parts are not a list of at most 64 pairs";

/// A manifest (docs/PROTOCOL.md, "Bulk files") from its parsed JSON: a sentence saying
/// what is wrong if it is not one.
fn parse_manifest(v: &JsValue) -> Result<Manifest, String> {
    let get = |o: &JsValue, k: &str| Reflect::get(o, &k.into()).unwrap_or(JsValue::UNDEFINED);
    let hash = |o: &JsValue, k: &str| {
        get(o, k)
            .as_string()
            .and_then(|h| BlockHash::from_display_hex(&h.to_ascii_lowercase()))
            .ok_or_else(|| format!("{k} is not a block hash"))
    };
    let height = |o: &JsValue, k: &str| {
        get(o, k)
            .as_f64()
            .filter(|h| h.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(h))
            .map(|h| h as u32)
            .ok_or_else(|| format!("{k} is not a height"))
    };
    if get(v, "version").as_f64() != Some(1.0) {
        return Err("its version is not 1".into());
    }
    let files = |key: &str| -> Result<Vec<FileEntry>, String> {
        let list = get(v, key);
        if list.is_undefined() && key != "headers" {
            // A headers-only export.
            return Ok(Vec::new());
        }
        if !js_sys::Array::is_array(&list) {
            return Err(format!("{key} is not a list"));
        }
        let list = js_sys::Array::from(&list);
        if list.length() as usize > crate::engine::mirror::MAX_FILES {
            return Err("it lists too many files".into());
        }
        let mut out = Vec::with_capacity(list.length() as usize);
        for f in list.iter() {
            let sha = get(&f, "sha256").as_string().unwrap_or_default();
            let mut sha256 = [0u8; 32];
            hex::decode_to_slice(&sha, &mut sha256).map_err(|_| "a sha256 is not 64 hex digits")?;
            let bytes = get(&f, "bytes")
                .as_f64()
                .filter(|b| b.fract() == 0.0 && (0.0..9e15).contains(b))
                .ok_or("a file's bytes is not a length")? as u64;
            // A filters file's parts: [height, offset] pairs, read flat as numbers (what is
            // not a number reads as 0 there, a part the engine refuses).
            let parts = get(&f, "parts");
            let parts: Vec<(u32, u64)> = match parts.is_undefined() {
                true => Vec::new(),
                false => {
                    let flat = Reflect::get(&parts, &"flat".into())
                        .ok()
                        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
                        .and_then(|f| f.call0(&parts).ok())
                        .ok_or(PARTS)?;
                    let numbers = js_sys::Float64Array::new(&flat).to_vec();
                    if numbers.len() > 2 * crate::engine::mirror::MAX_PARTS {
                        return Err(PARTS.into());
                    }
                    numbers
                        .chunks_exact(2)
                        .map(|p| (p[0] as u32, p[1] as u64))
                        .collect()
                }
            };
            out.push(FileEntry {
                first: height(&f, "first")?,
                last: height(&f, "last")?,
                check: FileCheck { bytes, sha256 },
                name: get(&f, "file").as_string().ok_or("a file has no name")?,
                parts,
            });
        }
        Ok(out)
    };
    Ok(Manifest {
        genesis: hash(v, "genesis")?,
        height: height(v, "height")?,
        hash: hash(v, "hash")?,
        headers: files("headers")?,
        filter_headers: files("filterHeaders")?,
        filters: files("filters")?,
    })
}
