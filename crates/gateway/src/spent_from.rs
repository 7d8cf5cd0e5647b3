//! The evidence a gateway serving tweaks hands over to settle a dispute over a block's
//! tweak list (`get_spent_from`; docs/PROTOCOL.md, "The dispute's evidence"): the
//! transactions outside the block that its transactions with a taproot output spend from,
//! each without witness data. A client checks each against the txid its block's inputs
//! name, works the block's tweaks out from them and judges the gateways' lists.
//!
//! **From the node**, when a session asks (the session waits meanwhile, as for a block),
//! one of two ways, the one the tweak task uses ([`SpentSource`]):
//! - Bitcoin Core: `getblock <hash> 3` gives each input's `prevout` with the height of the
//!   block that created it; `getblockhash` of those heights, then
//!   `getrawtransaction <txid> false <block>`, which Core answers from the block itself,
//!   without a transaction index (a pruned Core lacks pruned blocks: those answers fail).
//! - btcd, or an input without its `prevout`: `getblock <hash> 0`, then
//!   `getrawtransaction <txid> 0` through the node's transaction index (btcd `--txindex`).
//!
//! The block is checked against the header validated at its height, and each transaction
//! against the txid asked. The last [`KEPT`] answers are kept (a session asks for the same
//! one piece after piece); one the node could not give is answered `not_found` for
//! [`MISSING_FOR`], then asked again.
//!
//! **A budget per client.** A block's evidence costs the node a few thousand calls, and an
//! honest client needs it only to settle a dispute (one per lying gateway). Each client
//! (its address, as the connection caps count it) may have the node asked for at most
//! [`PER_CLIENT`] blocks' evidence in [`BUDGET_WINDOW`]; past that it is answered
//! `not_found` at once (no fault: the client asks another gateway). What is kept is
//! served to anyone without counting.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lightwire_chain::{BlockHash, HEADER_LEN, hash_header_bytes};
use lightwire_primitives::{Tx, write_compact_size};
use lightwire_proto::session::FilterLookup;
use lightwire_wallet::silent::is_p2tr;
use lightwire_wire::MAX_SPENT_FROM_LEN;
use tokio::sync::watch;

use crate::admission::Source;
use crate::fees::{RpcEndpoint, RpcError, call_batch};
use crate::server::Shared;
use crate::tweaks::{
    SpentSource, TweaksError, check_block, fetch_transactions, get_block, hex_bytes, spent_outside,
};
use crate::wake::Wake;
use crate::wants::{SessionId, Wants};

/// Answers kept after they were computed.
pub const KEPT: usize = 4;
/// How long a block whose evidence the node could not give is answered `not_found`
/// before the node is asked again.
pub const MISSING_FOR: Duration = Duration::from_secs(30);
/// Blocks remembered as missing at most (the oldest forgotten first).
const MISSING_KEPT: usize = 64;
/// Blocks whose evidence one client may have computed in [`BUDGET_WINDOW`].
pub const PER_CLIENT: usize = 4;
/// The window of [`PER_CLIENT`].
pub const BUDGET_WINDOW: Duration = Duration::from_secs(600);
/// Clients whose budget is tracked at once: past that, a new client is refused until some
/// budget expires (memory stays bounded whatever addresses connect).
const CLIENTS_TRACKED: usize = 4096;

/// How long the node may take for one call.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// The most of one answer read (a block's hex at verbosity 3, with its prevouts).
const MAX_ANSWER: usize = 64 << 20;

/// The evidence served: what sessions wait for, what was computed, what the node lacked.
pub struct ServedSpentFrom {
    wanted: Mutex<Wants<(u32, BlockHash)>>,
    kept: Mutex<VecDeque<(BlockHash, Arc<[u8]>)>>,
    missing: Mutex<VecDeque<(BlockHash, Instant)>>,
    /// When the node was asked for each client, in the last [`BUDGET_WINDOW`].
    spent: Mutex<HashMap<Source, VecDeque<Instant>>>,
    notify: Arc<Wake>,
}

impl ServedSpentFrom {
    /// Nothing asked yet; `notify` wakes the task that asks the node ([`keep`]).
    pub fn new(notify: Arc<Wake>) -> ServedSpentFrom {
        ServedSpentFrom {
            wanted: Mutex::new(Wants::new()),
            kept: Mutex::new(VecDeque::with_capacity(KEPT)),
            missing: Mutex::new(VecDeque::new()),
            spent: Mutex::new(HashMap::new()),
            notify,
        }
    }

    /// Whether `client` may have the node asked for one more block's evidence at `now`
    /// (counted if so). Whoever reads the chain without an address (tests, programs built
    /// on this library) is not counted.
    fn spend(&self, client: Option<Source>, now: Instant) -> bool {
        let Some(client) = client else {
            return true;
        };
        let Ok(mut spent) = self.spent.lock() else {
            return false;
        };
        let fresh = |at: &Instant| now < *at + BUDGET_WINDOW;
        if !spent.contains_key(&client) && spent.len() >= CLIENTS_TRACKED {
            spent.retain(|_, times| times.iter().any(fresh));
            if spent.len() >= CLIENTS_TRACKED {
                return false;
            }
        }
        let times = spent.entry(client).or_default();
        times.retain(fresh);
        if times.len() >= PER_CLIENT {
            return false;
        }
        times.push_back(now);
        true
    }

    /// The evidence of block `block` at `height` of the served chain (`None`: no block
    /// there), lent to `read` when computed; else session `session` (of `client`) waits
    /// for it (the task is woken) or, if the node could not give it lately or the client's
    /// budget is spent, `Missing`.
    pub fn with_for<R>(
        &self,
        session: SessionId,
        client: Option<Source>,
        height: u32,
        block: Option<BlockHash>,
        read: impl FnOnce(&[u8]) -> R,
    ) -> FilterLookup<R> {
        let Some(block) = block else {
            return FilterLookup::Missing;
        };
        let kept = self
            .kept
            .lock()
            .ok()
            .and_then(|k| k.iter().find(|(h, _)| *h == block).map(|(_, b)| b.clone()));
        if let Some(b) = kept {
            return FilterLookup::Ready(read(&b));
        }
        let now = Instant::now();
        if self.missing.lock().is_ok_and(|m| {
            m.iter()
                .any(|(h, at)| *h == block && now < *at + MISSING_FOR)
        }) {
            return FilterLookup::Missing;
        }
        let Ok(mut w) = self.wanted.lock() else {
            return FilterLookup::Missing;
        };
        // Asked again piece after piece while it waits: counted once.
        if w.wanted_by(session) != Some(&(height, block)) {
            if !self.spend(client, now) {
                return FilterLookup::Missing;
            }
            w.want(session, (height, block));
        }
        drop(w);
        self.notify.wake();
        FilterLookup::Pending
    }

    /// The lowest block a live session waits for the evidence of.
    pub fn wanted(&self) -> Option<(u32, BlockHash)> {
        self.wanted.lock().ok()?.items().next().copied()
    }

    /// The evidence of `block`, computed: kept, and the sessions waiting for it answered.
    pub fn insert(&self, height: u32, block: BlockHash, evidence: Vec<u8>) {
        if let Ok(mut w) = self.wanted.lock() {
            w.answered(&(height, block));
        }
        if let Ok(mut k) = self.kept.lock() {
            if k.len() == KEPT {
                k.pop_front();
            }
            k.push_back((block, Arc::from(evidence)));
        }
    }

    /// The node could not give the evidence of `block`: sessions asking for it are
    /// answered `not_found` for [`MISSING_FOR`].
    pub fn missing(&self, height: u32, block: BlockHash) {
        if let Ok(mut w) = self.wanted.lock() {
            w.answered(&(height, block));
        }
        if let Ok(mut m) = self.missing.lock() {
            m.retain(|(h, _)| *h != block);
            if m.len() == MISSING_KEPT {
                m.pop_front();
            }
            m.push_back((block, Instant::now()));
        }
    }

    /// Session `session` ended: what it waited for is no longer computed for it.
    pub fn session_ended(&self, session: SessionId) {
        if let Ok(mut w) = self.wanted.lock() {
            w.session_ended(session);
        }
    }
}

/// The evidence of `block` (whose header, validated at its height, is `header`): a
/// CompactSize count, then each transaction outside the block that one of its
/// transactions with a taproot output spends from, without witness data, in txid order.
/// From the node the way `source` says (found out on the first block, as for the lists).
pub async fn compute(
    rpc: &RpcEndpoint,
    header: &[u8; HEADER_LEN],
    block: &BlockHash,
    source: &mut SpentSource,
) -> Result<Vec<u8>, TweaksError> {
    let mut wanted: Option<Vec<([u8; 32], Option<BlockHash>)>> = None;
    if *source != SpentSource::TxIndex {
        wanted = from_verbose_block(rpc, header, block).await?;
        *source = match wanted {
            Some(_) => SpentSource::VerboseBlock,
            None => SpentSource::TxIndex,
        };
    }
    let wanted = match wanted {
        Some(w) => w,
        None => {
            let raw = hex_bytes(&get_block(rpc, block, 0).await??)?;
            let checked = check_block(&raw, block)?;
            let txs: Vec<Tx<'_>> = checked.transactions().collect();
            let (_, outside) = spent_outside(&txs);
            outside.into_iter().map(|t| (t, None)).collect()
        }
    };
    let fetched = fetch_transactions(rpc, wanted.iter().copied()).await?;
    let mut txids: Vec<&[u8; 32]> = fetched.keys().collect();
    txids.sort_unstable();
    let mut out = Vec::new();
    write_compact_size(&mut out, txids.len() as u64);
    for txid in txids {
        let tx = Tx::parse(&fetched[txid])
            .map_err(|e| TweaksError::Node(format!("a transaction that does not parse: {e}")))?;
        tx.write_without_witness(&mut out);
    }
    if out.len() > MAX_SPENT_FROM_LEN as usize {
        return Err(TweaksError::Node(format!(
            "evidence of {} bytes for block {block}, over the {MAX_SPENT_FROM_LEN} a client takes",
            out.len()
        )));
    }
    Ok(out)
}

/// Bitcoin Core's `getblock <hash> 3`: the transactions to fetch, each with the block that
/// holds it (from its `prevout.height`, through `getblockhash`); `None` when the node gave
/// no such answer (it refused the verbosity, or an input it needs has no `prevout` height).
async fn from_verbose_block(
    rpc: &RpcEndpoint,
    header: &[u8; HEADER_LEN],
    block: &BlockHash,
) -> Result<Option<Vec<([u8; 32], Option<BlockHash>)>>, TweaksError> {
    let Ok(verbose) = get_block(rpc, block, 3).await? else {
        return Ok(None);
    };
    let Some(txs) = verbose["tx"].as_array() else {
        return Ok(None);
    };
    let mut raw = header.to_vec();
    write_compact_size(&mut raw, txs.len() as u64);
    for tx in txs {
        raw.extend_from_slice(&hex_bytes(&tx["hex"])?);
    }
    let checked = check_block(&raw, block)?;
    let parsed: Vec<Tx<'_>> = checked.transactions().collect();
    let (_, outside) = spent_outside(&parsed);
    // The height of the block holding each transaction spent from.
    let mut heights: Vec<([u8; 32], u64)> = Vec::with_capacity(outside.len());
    for (tx, json) in parsed.iter().zip(txs).skip(1) {
        if !tx.outputs().any(|o| is_p2tr(o.script)) {
            continue;
        }
        let vin = json["vin"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        for (input, j) in tx.inputs().zip(vin) {
            if outside.binary_search(input.prev_txid).is_err() {
                continue;
            }
            let Some(height) = j["prevout"]["height"].as_u64() else {
                return Ok(None);
            };
            heights.push((*input.prev_txid, height));
        }
    }
    heights.sort_unstable();
    heights.dedup_by_key(|(t, _)| *t);
    let mut distinct: Vec<u64> = heights.iter().map(|(_, h)| *h).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let mut hashes = std::collections::HashMap::with_capacity(distinct.len());
    for chunk in distinct.chunks(200) {
        let calls: Vec<(&str, serde_json::Value)> = chunk
            .iter()
            .map(|h| ("getblockhash", serde_json::json!([h])))
            .collect();
        for (h, answer) in chunk
            .iter()
            .zip(call_batch(rpc, &calls, MAX_ANSWER, CALL_TIMEOUT).await?)
        {
            let hash =
                answer.map_err(|e| TweaksError::Node(format!("no block at height {h}: {e}")))?;
            let hash = hash
                .as_str()
                .and_then(BlockHash::from_display_hex)
                .ok_or(RpcError::Malformed("a block hash that is not hex"))?;
            hashes.insert(*h, hash);
        }
    }
    Ok(Some(
        heights
            .into_iter()
            .map(|(t, h)| (t, hashes.get(&h).copied()))
            .collect(),
    ))
}

/// Computes the evidence live sessions wait for, for as long as the gateway runs: the
/// lowest block first, checked to be the one at its height of the served chain; each
/// answer wakes the sessions waiting.
pub async fn keep(shared: Arc<Shared>, rpc: RpcEndpoint, mut stopped: watch::Receiver<bool>) {
    let mut woken = shared.filter_notify.subscribe();
    let mut source = SpentSource::Unknown;
    loop {
        if *stopped.borrow() {
            return;
        }
        let job = match shared.chain.read() {
            Ok(c) => c
                .spent_from()
                .and_then(|s| s.wanted())
                .map(|(height, block)| {
                    let header = lightwire_proto::Served::header(&*c, height)
                        .filter(|h| hash_header_bytes(h) == block);
                    (height, block, header)
                }),
            Err(_) => return,
        };
        let Some((height, block, header)) = job else {
            tokio::select! {
                _ = woken.changed() => {}
                _ = stopped.changed() => {}
            }
            continue;
        };
        let answer = match header {
            Some(header) => compute(&rpc, &header, &block, &mut source).await,
            None => Err(TweaksError::Node(format!(
                "a request for block {block}, no longer at height {height}"
            ))),
        };
        if let Ok(c) = shared.chain.read()
            && let Some(s) = c.spent_from()
        {
            match answer {
                Ok(evidence) => s.insert(height, block, evidence),
                Err(e) => {
                    tracing::warn!(height, %block, "no evidence of the block's tweaks: {e}");
                    s.missing(height, block);
                }
            }
        }
        shared.filter_version.send_modify(|v| *v += 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session's ask is waited for and woken, answered once computed (kept for the
    /// next), refused for a while when the node lacked it, and forgotten when the session
    /// ends.
    #[test]
    fn asked_computed_kept_missing_and_forgotten() {
        let wake = Arc::new(Wake::new());
        let woken = wake.subscribe();
        let s = ServedSpentFrom::new(wake);
        let (a, b) = (BlockHash([1; 32]), BlockHash([2; 32]));
        let read =
            |s: &ServedSpentFrom, h, b| match s
                .with_for(SessionId(1), None, h, Some(b), |x| x.to_vec())
            {
                FilterLookup::Ready(x) => Some(Some(x)),
                FilterLookup::Pending => None,
                FilterLookup::Missing => Some(None),
            };
        assert_eq!(read(&s, 5, a), None, "waits");
        assert!(woken.has_changed().unwrap(), "the task is woken");
        assert_eq!(s.wanted(), Some((5, a)));
        s.insert(5, a, vec![1, 9]);
        assert_eq!(s.wanted(), None);
        assert_eq!(read(&s, 5, a), Some(Some(vec![1, 9])));
        assert_eq!(read(&s, 6, b), None);
        s.missing(6, b);
        assert_eq!(read(&s, 6, b), Some(None), "not_found for a while");
        assert!(matches!(
            s.with_for(SessionId(1), None, 7, None, |_| ()),
            FilterLookup::Missing
        ));
        let c = BlockHash([3; 32]);
        assert_eq!(read(&s, 8, c), None);
        s.session_ended(SessionId(1));
        assert_eq!(s.wanted(), None, "nobody waits any more");
    }

    /// One client may have at most four blocks' evidence computed in ten minutes; asking
    /// for the same block piece after piece counts once; what is kept is served to it
    /// past its budget, and another client has a budget of its own.
    #[test]
    fn a_client_has_the_node_asked_for_four_blocks_in_ten_minutes() {
        let s = ServedSpentFrom::new(Arc::new(Wake::new()));
        let (a, b) = (
            Some(Source::V4([10, 0, 0, 1])),
            Some(Source::V4([10, 0, 0, 2])),
        );
        let ask = |session, client, n: u8| {
            s.with_for(
                SessionId(session),
                client,
                n.into(),
                Some(BlockHash([n; 32])),
                |_| (),
            )
        };
        for n in 1..=4u8 {
            assert!(matches!(ask(n.into(), a, n), FilterLookup::Pending));
            assert!(
                matches!(ask(n.into(), a, n), FilterLookup::Pending),
                "counted once"
            );
        }
        assert!(
            matches!(ask(5, a, 5), FilterLookup::Missing),
            "over its budget"
        );
        assert!(
            matches!(ask(6, b, 5), FilterLookup::Pending),
            "another client"
        );
        s.insert(1, BlockHash([1; 32]), vec![0]);
        assert!(
            matches!(ask(7, a, 1), FilterLookup::Ready(())),
            "kept: served"
        );
        assert!(
            matches!(ask(8, None, 9), FilterLookup::Pending),
            "no address: not counted"
        );
    }
}
