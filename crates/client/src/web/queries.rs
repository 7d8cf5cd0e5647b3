//! The calls that read the store (`headerAt`, `headerByHash`, `verifyInclusion`), answered
//! by the sync loop between commits.

use lightwire_chain::merkle;
use lightwire_store::{HeaderStore, IdbStore, StoreError};
use wasm_bindgen::prelude::*;

use super::inbox::{Call, Query};
use super::js;

/// Answer a call that reads the store (`stop` is the loop's, and is refused here).
pub async fn answer(store: &IdbStore, call: Call) {
    let result = match &call.query {
        #[cfg(feature = "silent-payments")]
        Query::WatchSilent { .. } => Err(js::error(
            "InvalidArgument",
            "the loop answers these, not the store",
        )),
        Query::Stop
        | Query::Wallets
        | Query::RemoveWallet
        | Query::Scan { .. }
        | Query::Watch { .. }
        | Query::Unwatch(_)
        | Query::Rescan(_)
        | Query::Wallet(_)
        | Query::Broadcast(_)
        | Query::CreatePsbt(_)
        | Query::BumpFee { .. }
        | Query::ImportLabels(_)
        | Query::SetLabel { .. }
        | Query::FeeRates => Err(js::error(
            "InvalidArgument",
            "the loop answers these, not the store",
        )),
        Query::HeaderAt(h) => header_at(store, *h).await,
        Query::HeaderByHash(hex) => match js::parse_hash(hex, "the block hash") {
            Ok(hash) => match store.height_of(&hash).await {
                Ok(Some(h)) => header_at(store, h).await,
                Ok(None) => Ok(JsValue::NULL),
                Err(e) => Err(store_error(&e)),
            },
            Err(e) => Err(e),
        },
        Query::VerifyInclusion {
            txid,
            branch,
            index,
            block_hash,
        } => verify_inclusion(store, txid, branch, *index, block_hash).await,
    };
    let _ = match result {
        Ok(v) => call.resolve.call1(&JsValue::NULL, &v),
        Err(e) => call.reject.call1(&JsValue::NULL, &e),
    };
}

fn store_error(e: &StoreError) -> JsValue {
    js::error(js::store_kind(e), e.to_string())
}

async fn header_at(store: &IdbStore, height: u32) -> Result<JsValue, JsValue> {
    match store.header(height).await {
        Ok(Some(h)) => Ok(js::header(height, &h)),
        Ok(None) => Ok(JsValue::NULL),
        Err(e) => Err(store_error(&e)),
    }
}

async fn verify_inclusion(
    store: &IdbStore,
    txid: &str,
    branch: &[String],
    index: u32,
    block_hash: &str,
) -> Result<JsValue, JsValue> {
    let leaf = js::parse_hash(txid, "the txid")?.0;
    let mut siblings = Vec::with_capacity(branch.len());
    for (i, s) in branch.iter().enumerate() {
        siblings.push(js::parse_hash(s, &format!("Merkle branch hash {i}"))?.0);
    }
    let block = js::parse_hash(block_hash, "the block hash")?;
    let Some(height) = store.height_of(&block).await.map_err(|e| store_error(&e))? else {
        return Err(js::error(
            "UnknownBlock",
            format!("block {block_hash} is not on the stored best chain"),
        ));
    };
    let header = store
        .header(height)
        .await
        .map_err(|e| store_error(&e))?
        .ok_or_else(|| js::error("UnknownBlock", "the block was replaced by a reorg"))?;
    merkle::verify(&leaf, &siblings, index, &header.merkle_root)
        .map_err(|e| js::error("MerkleError", e.to_string()))?;
    let tip = store.tip().await.map_err(|e| store_error(&e))?.height;
    Ok(js::object(&[
        ("height", height.into()),
        ("confirmations", (tip - height + 1).into()),
        ("blockHash", js::hash(&block)),
    ]))
}
