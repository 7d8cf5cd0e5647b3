//! The client's static key: generated once, kept in IndexedDB (its own small database
//! next to the header store), read once per session and then held in memory. Handshakes
//! take it from memory; storage is never read per handshake or per message.
//!
//! Randomness comes from `crypto.getRandomValues` (a CSPRNG in every browser and worker),
//! through getrandom: keys from `SecretKey::random`, the one place lightwire makes them.

use js_sys::{Reflect, Uint8Array};
use lightwire_noise::SecretKey;
use lightwire_store::idb::{request_future, transaction_future};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{IdbDatabase, IdbFactory, IdbTransactionMode};

use super::socket::describe;

const STORE: &str = "keys";
const KEY: &str = "static";

/// A seed for the engine's own random numbers (reconnect jitter).
pub fn random_seed() -> Result<u64, String> {
    getrandom::u64().map_err(|e| e.to_string())
}

/// A fresh secret key (an ephemeral one per handshake, or a new static key).
pub fn random_key() -> Result<SecretKey, String> {
    SecretKey::random().map_err(|e| e.to_string())
}

/// The static key kept in the database `name`, created on first use.
pub async fn static_key(name: &str) -> Result<SecretKey, String> {
    let db = open(name).await?;
    let result = get_or_create(&db).await;
    db.close();
    result
}

async fn get_or_create(db: &IdbDatabase) -> Result<SecretKey, String> {
    if let Some(k) = read(db).await? {
        return Ok(k);
    }
    let key = random_key()?;
    let tx = db
        .transaction_with_str_and_mode(STORE, IdbTransactionMode::Readwrite)
        .map_err(|e| describe(&e))?;
    let store = tx.object_store(STORE).map_err(|e| describe(&e))?;
    // `add`, not `put`: if another tab stored a key meanwhile, this fails and theirs is
    // read back, so both tabs use the same key.
    let bytes = Uint8Array::from(&key.to_bytes()[..]);
    store
        .add_with_key(&bytes, &KEY.into())
        .map_err(|e| describe(&e))?;
    let written = transaction_future(&tx).await.is_ok();
    bytes.fill(0, 0, 32);
    if written {
        return Ok(key);
    }
    read(db)
        .await?
        .ok_or_else(|| "the client key could not be stored".to_string())
}

async fn read(db: &IdbDatabase) -> Result<Option<SecretKey>, String> {
    let tx = db.transaction_with_str(STORE).map_err(|e| describe(&e))?;
    let req = tx
        .object_store(STORE)
        .and_then(|s| s.get(&KEY.into()))
        .map_err(|e| describe(&e))?;
    request_future(&req).await.map_err(|e| describe(&e))?;
    let value = req.result().map_err(|e| describe(&e))?;
    if value.is_undefined() {
        return Ok(None);
    }
    let bytes = value
        .dyn_into::<Uint8Array>()
        .ok()
        .filter(|b| b.length() == 32)
        .ok_or("the stored client key is not 32 bytes")?;
    let mut raw = [0u8; 32];
    bytes.copy_to(&mut raw);
    let key = SecretKey::from_bytes(&raw).map_err(|_| "the stored client key is not valid");
    raw.fill(0);
    Ok(Some(key?))
}

async fn open(name: &str) -> Result<IdbDatabase, String> {
    let factory: IdbFactory = Reflect::get(&js_sys::global(), &"indexedDB".into())
        .ok()
        .and_then(|f| f.dyn_into().ok())
        .ok_or("IndexedDB is not available here")?;
    let req = factory.open_with_u32(name, 1).map_err(|e| describe(&e))?;
    let on_upgrade = {
        let req = req.clone();
        Closure::once(move || {
            if let Ok(db) = req.result() {
                let _ = db
                    .unchecked_into::<IdbDatabase>()
                    .create_object_store(STORE);
            }
        })
    };
    req.set_onupgradeneeded(Some(on_upgrade.as_ref().unchecked_ref()));
    let opened = request_future(&req).await;
    req.set_onupgradeneeded(None);
    opened.map_err(|e| describe(&e))?;
    Ok(req
        .result()
        .map_err(|e| describe(&e))?
        .unchecked_into::<IdbDatabase>())
}
