//! A test page's wasm: sync the deterministic regtest chain into an [`IdbStore`] in
//! commits of a fixed size, logging each commit to the console, and inspect a store after
//! a reload or a killed browser. Driven by `run.mjs` (Playwright over CDP).
//!
//! `inspect` checks everything a reader can see: the tip is a commit boundary, every
//! stored header is the generated one at its height and links to its parent, every stored
//! hash maps to its height, the hashes of the next headers (those a lost commit would have
//! added) map to nothing, and validation resumes from the stored window.
#![cfg(target_arch = "wasm32")]

use lightwire_chain::generate::next_header;
use lightwire_chain::{BlockHash, Chain, Header, Outcome, REGTEST, WINDOW_LEN};
use lightwire_store::{Durability, HeaderStore, IdbStore, Pending, StoreError};
use wasm_bindgen::prelude::*;

/// A clock after every generated header.
const NOW: u64 = 2_000_000_000;
/// Headers per validation call.
const PIECE: u32 = 2_000;

fn log(s: &str) {
    web_sys::console::log_1(&s.into());
}

fn js(e: impl core::fmt::Display) -> JsValue {
    JsValue::from_str(&e.to_string())
}

/// The validation window at the stored tip.
async fn resume(store: &IdbStore) -> Result<Chain, StoreError> {
    let tip = store.tip().await?.height;
    let entries = store
        .entries(tip.saturating_sub(WINDOW_LEN as u32 - 1), tip)
        .await?;
    Chain::resume(&REGTEST, &entries).ok_or(StoreError::Corrupt {
        what: "stored entries do not link",
    })
}

/// Sync heights up to `count` into the store `name`, from whatever it holds, committing
/// every `batch` headers (`relaxed`; the last `strict`). Logs `commit-start H` before and
/// `committed H` after each commit. Returns the tip height.
///
/// With `hold_at` above zero, the sync never goes past the commit to that height: once it
/// has completed, the returned future waits for ever. The test interrupts the page when
/// that commit starts; without the hold, a fast machine could finish it and the next one
/// before the reload or the kill lands, and the store would rightly be ahead of what the
/// test interrupted.
#[wasm_bindgen]
pub async fn sync(name: String, count: u32, batch: u32, hold_at: u32) -> Result<u32, JsValue> {
    let mut store = IdbStore::open(&name, &REGTEST).await.map_err(js)?;
    let mut chain = resume(&store).await.map_err(js)?;
    let tip = store.tip().await.map_err(js)?;
    let mut pending = Pending::new(tip.height);
    let mut prev = chain.tip().header;
    let mut height = tip.height;
    let mut piece = Vec::with_capacity(PIECE as usize);
    while height < count {
        piece.clear();
        while height < count && piece.len() < PIECE as usize {
            height += 1;
            let h = next_header(&REGTEST, &prev, prev.block_hash(), height, 0);
            prev = h;
            piece.push(h);
        }
        let outcome = chain.connect(&piece, NOW).map_err(js)?;
        if !matches!(outcome, Outcome::Extended { .. }) {
            return Err(js(format!("unexpected outcome {outcome:?}")));
        }
        pending.push(&outcome, chain.staged());
        if pending.len() as u32 >= batch || height == count {
            let durability = if height == count {
                Durability::Strict
            } else {
                Durability::Relaxed
            };
            log(&format!("commit-start {height}"));
            let tip = store.commit(pending.batch(durability)).await.map_err(js)?;
            pending.committed(&tip);
            log(&format!("committed {}", tip.height));
            if hold_at != 0 && tip.height >= hold_at {
                core::future::pending::<()>().await;
            }
        }
    }
    let tip = store.tip().await.map_err(js)?.height;
    store.close();
    Ok(tip)
}

/// Check the store `name` as described in the crate documentation, for a sync of
/// `count` headers in commits of `batch`. Returns the tip height, or what is wrong.
#[wasm_bindgen]
pub async fn inspect(name: String, count: u32, batch: u32) -> Result<u32, JsValue> {
    let store = IdbStore::open(&name, &REGTEST).await.map_err(js)?;
    let result = check(&store, count, batch).await;
    store.close();
    result.map_err(js)
}

async fn check(store: &IdbStore, count: u32, batch: u32) -> Result<u32, String> {
    let tip = store.tip().await.map_err(|e| e.to_string())?;
    if tip.height % batch != 0 && tip.height != count {
        return Err(format!("tip {} is not a commit boundary", tip.height));
    }
    let mut stored = Vec::new();
    store
        .headers(0, tip.height, &mut stored)
        .await
        .map_err(|e| e.to_string())?;
    if stored.len() != tip.height as usize + 1 || stored[0] != REGTEST.genesis {
        return Err("headers from genesis to the tip are not all there".into());
    }
    // The generated chain, up to a batch past the tip.
    let end = (tip.height + batch).min(count);
    let mut generated: Vec<Header> = vec![REGTEST.genesis];
    for height in 1..=end {
        let prev = generated[height as usize - 1];
        generated.push(next_header(&REGTEST, &prev, prev.block_hash(), height, 0));
    }
    if stored[..] != generated[..=tip.height as usize] {
        return Err("a stored header differs from the generated one".into());
    }
    if stored.last().map(Header::block_hash) != Some(tip.hash) {
        return Err("the tip hash is not the last stored header's".into());
    }
    let hashes: Vec<BlockHash> = generated.iter().map(Header::block_hash).collect();
    let mut heights = Vec::new();
    store
        .heights_of(&hashes, &mut heights)
        .await
        .map_err(|e| e.to_string())?;
    for (h, got) in heights.iter().enumerate() {
        let want = (h as u32 <= tip.height).then_some(h as u32);
        if *got != want {
            return Err(format!("index: height {h} gives {got:?}, want {want:?}"));
        }
    }
    resume(store).await.map_err(|e| e.to_string())?;
    Ok(tip.height)
}
