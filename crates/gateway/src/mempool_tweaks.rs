//! The silent-payment tweaks of the mempool's transactions (docs/PROTOCOL.md, "The mempool
//! digest", "What the gateway does"): the task that asks the node's JSON-RPC for the scripts
//! of the outputs waiting transactions spend ([`crate::mempool::ServedMempool`]'s
//! `pending_lookups`), hands the answers back (`resolve`), and tells the sessions when that
//! published something.
//!
//! **What the node is asked.** For each outpoint, in JSON-RPC batches:
//! - `gettxout <txid> <n> false`: the output from the node's chainstate (its unspent
//!   outputs: no transaction index needed; btcd and Bitcoin Core both answer it, with the
//!   script as `scriptPubKey.hex`). `false` leaves the mempool out, so that an output a
//!   mempool transaction already spends (the one asked about) is still given; both answer
//!   `null` for an output not there (spent in the chain, or not in it yet);
//! - for those, `getrawtransaction <txid> 0`: a transaction in the node's mempool (no index
//!   needed), or one mined whose outputs are all spent, through the node's transaction
//!   index. The transaction must hash to the txid asked: one that does not is no answer
//!   (the outpoint is asked again, and the transaction goes without its tweak when its
//!   wait is over). A refusal there means the node does not know the output: the
//!   transaction goes without its tweak at once.
//!
//! The node is trusted for these scripts as it is for the mempool itself: a tweak in the
//! digest is a hint for what is unconfirmed; the block's tweak list, checkable across
//! gateways, is what counts.
//!
//! Written here rather than taken from a crate: no published crate works out BIP352 tweaks
//! of a node's mempool transactions from its RPC; the tweak itself is lightwire-wallet's
//! (`silent::tweak`), the RPC calls `crate::fees`'.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use lightwire_primitives::{Tx, Txid};
use tokio::sync::watch;

use crate::fees::{RpcEndpoint, RpcError, call_batch};
use crate::mempool::{Answers, OutPoint};
use crate::server::Shared;

/// Outpoints asked of the node in one round (one batch of `gettxout`: the answers are
/// handed over when the round ends, so a round is kept short).
const ROUND: usize = OUTPUT_BATCH;

/// `gettxout` calls in one JSON-RPC batch (each answer is a few hundred bytes).
const OUTPUT_BATCH: usize = 200;

/// `getrawtransaction` calls in one batch (each answer up to a block's weight in hex).
const TX_BATCH: usize = 50;

/// The most of one batch's answer read.
const MAX_ANSWER: usize = 64 << 20;

/// How long one round may take, all its batches: no longer than a transaction may wait
/// for its tweak (what comes later is of no use, and the waits that run out meanwhile are
/// acted on only when it ends).
const CALL_TIMEOUT: Duration = crate::mempool::TWEAK_WAIT;

/// How long to wait after the node failed (or did not answer every outpoint) before
/// asking again.
const RETRY: Duration = Duration::from_secs(1);

/// How often, at most, a failing node is logged as a warning.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// What the node said of `outpoints` (see the module documentation): the script of each it
/// gave, `None` for each it does not know; an outpoint whose answer was not one (not
/// JSON of the shape documented, a transaction that does not hash to the txid asked) is
/// left out, with why in the second list. A call that fails (the connection, HTTP, not
/// JSON-RPC) fails the whole.
pub async fn lookup(
    rpc: &RpcEndpoint,
    outpoints: &[OutPoint],
) -> Result<(Answers, Vec<String>), RpcError> {
    let mut answers = Answers::with_capacity(outpoints.len());
    let mut wrong = Vec::new();
    // The outpoints the chainstate does not hold, by the transaction to ask for.
    let mut elsewhere: HashMap<[u8; 32], Vec<u32>> = HashMap::new();
    for chunk in outpoints.chunks(OUTPUT_BATCH) {
        let calls: Vec<(&str, serde_json::Value)> = chunk
            .iter()
            .map(|(t, n)| {
                (
                    "gettxout",
                    serde_json::json!([Txid(*t).to_string(), n, false]),
                )
            })
            .collect();
        let results = call_batch(rpc, &calls, MAX_ANSWER, CALL_TIMEOUT).await?;
        for (&(txid, n), result) in chunk.iter().zip(results) {
            match result {
                // Not an unspent output of the chain (Core: null; btcd: null, or an error
                // for a transaction it holds no output of).
                Ok(serde_json::Value::Null) | Err(RpcError::Refused(_)) => {
                    elsewhere.entry(txid).or_default().push(n);
                }
                Ok(found) => match script_of(&found) {
                    Some(script) => {
                        answers.insert((txid, n), Some(script));
                    }
                    None => wrong.push(format!(
                        "gettxout {}:{n} answered without a scriptPubKey.hex",
                        Txid(txid)
                    )),
                },
                Err(e) => return Err(e),
            }
        }
    }
    let txids: Vec<[u8; 32]> = elsewhere.keys().copied().collect();
    for chunk in txids.chunks(TX_BATCH) {
        let calls: Vec<(&str, serde_json::Value)> = chunk
            .iter()
            .map(|t| {
                (
                    "getrawtransaction",
                    serde_json::json!([Txid(*t).to_string(), 0]),
                )
            })
            .collect();
        let results = call_batch(rpc, &calls, MAX_ANSWER, CALL_TIMEOUT).await?;
        for (txid, result) in chunk.iter().zip(results) {
            let outputs = elsewhere.get(txid).map(Vec::as_slice).unwrap_or_default();
            let raw = match result {
                Ok(hex) => crate::tweaks::hex_bytes(&hex).ok(),
                // Neither in its mempool nor (where it has one) in its index: it does not
                // know the output.
                Err(RpcError::Refused(_)) => {
                    for n in outputs {
                        answers.insert((*txid, *n), None);
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            let parsed = raw.as_deref().map(Tx::parse);
            match parsed {
                Some(Ok(tx)) if tx.txid().0 == *txid => {
                    for n in outputs {
                        let script = tx.outputs().nth(*n as usize).map(|o| o.script.to_vec());
                        answers.insert((*txid, *n), script);
                    }
                }
                Some(Ok(tx)) => wrong.push(format!(
                    "getrawtransaction {} gave transaction {}",
                    Txid(*txid),
                    tx.txid()
                )),
                _ => wrong.push(format!(
                    "getrawtransaction {} gave something that is not a transaction in hex",
                    Txid(*txid)
                )),
            }
        }
    }
    Ok((answers, wrong))
}

/// `scriptPubKey.hex` of a `gettxout` answer, as bytes.
fn script_of(found: &serde_json::Value) -> Option<Vec<u8>> {
    hex::decode(found["scriptPubKey"]["hex"].as_str()?).ok()
}

/// Works out the tweaks of the mempool's waiting transactions for as long as the gateway
/// runs (until `stopped`): whenever transactions wait ([`crate::mempool::ServedMempool`]'s
/// `queued`), asks the node what they spend and hands the answers to the mempool, which
/// publishes what may go; a transaction's wait running out publishes it too. What is
/// published bumps `shared.mempool_version`: the sessions send their digests. A node that
/// fails is logged (a warning a minute at most) and asked again after a pause; meanwhile
/// the waits run out and transactions go without their tweaks.
pub async fn keep(shared: Arc<Shared>, rpc: RpcEndpoint, mut stopped: watch::Receiver<bool>) {
    let mempool = shared.mempool.clone();
    if !mempool.works_out_tweaks() {
        return;
    }
    let mut warned: Option<tokio::time::Instant> = None;
    loop {
        if *stopped.borrow() {
            return;
        }
        let wanted = mempool.pending_lookups(ROUND);
        let mut answers = Answers::new();
        let mut pause = false;
        if !wanted.is_empty() {
            let trouble = match tokio::time::timeout(CALL_TIMEOUT, lookup(&rpc, &wanted)).await {
                Ok(Ok((got, wrong))) => {
                    answers = got;
                    wrong.into_iter().next()
                }
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some(format!("no answer in {} s", CALL_TIMEOUT.as_secs())),
            };
            // Asked again at once only if every outpoint was answered: else after a pause.
            pause = trouble.is_some() || answers.len() < wanted.len();
            if let Some(why) = trouble {
                if warned.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
                    warned = Some(tokio::time::Instant::now());
                    tracing::warn!(rpc = %rpc.addr, "the scripts mempool transactions spend: {why}");
                } else {
                    tracing::debug!(rpc = %rpc.addr, "the scripts mempool transactions spend: {why}");
                }
            }
        }
        if mempool.resolve(&answers, shared.now()) {
            shared
                .mempool_version
                .send_modify(|v| *v = v.wrapping_add(1));
        }
        if !wanted.is_empty() && !pause {
            continue;
        }
        let deadline = mempool
            .next_deadline()
            .map(|at| shared.clock + Duration::from_millis(at.0));
        let retry = pause.then(|| tokio::time::Instant::now() + RETRY);
        let wake = match (deadline, retry) {
            (Some(d), Some(r)) => Some(d.min(r)),
            (d, r) => d.or(r),
        };
        tokio::select! {
            _ = mempool.queued().notified(), if !pause => {}
            _ = tokio::time::sleep_until(wake.unwrap_or_else(tokio::time::Instant::now)), if wake.is_some() => {}
            _ = stopped.changed() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    type Answer = Result<serde_json::Value, serde_json::Value>;

    /// A stand-in for the node's RPC: each call of each batch answered with what `answer`
    /// makes of its method and params; the calls it saw (`method params`).
    async fn stand_in(
        answer: impl Fn(&str, &serde_json::Value) -> Answer + Send + Sync + 'static,
    ) -> (RpcEndpoint, Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                // The headers, then Content-Length bytes of body.
                let body = loop {
                    let n = s.read(&mut buf).await.unwrap();
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request).to_string();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("Content-Length: "))
                            .and_then(|l| l.trim().parse().ok())
                            .unwrap();
                        if body.len() >= len {
                            break body.to_string();
                        }
                    }
                };
                let calls: Vec<serde_json::Value> = serde_json::from_str(&body).unwrap();
                let answers: Vec<serde_json::Value> = calls
                    .iter()
                    .map(|c| {
                        let method = c["method"].as_str().unwrap();
                        log.lock()
                            .unwrap()
                            .push(format!("{method} {}", c["params"]));
                        match answer(method, &c["params"]) {
                            Ok(r) => serde_json::json!({"result": r, "error": null, "id": c["id"]}),
                            Err(e) => {
                                serde_json::json!({"result": null, "error": e, "id": c["id"]})
                            }
                        }
                    })
                    .collect();
                let json = serde_json::Value::Array(answers).to_string();
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{json}",
                    json.len()
                );
                s.write_all(reply.as_bytes()).await.unwrap();
            }
        });
        let endpoint = RpcEndpoint {
            addr,
            credentials: "u:p".into(),
            file: None,
        };
        (endpoint, seen)
    }

    /// A legacy transaction spending `[tag; 32]:0`, paying `[0x51]` and `[0x00, 0x14, 7 x 20]`.
    fn transaction(tag: u8) -> Vec<u8> {
        let mut t = vec![2, 0, 0, 0, 1];
        t.extend_from_slice(&[tag; 32]);
        t.extend_from_slice(&[0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 2]);
        t.extend_from_slice(&1_000u64.to_le_bytes());
        t.extend_from_slice(&[1, 0x51]);
        t.extend_from_slice(&2_000u64.to_le_bytes());
        t.extend_from_slice(&[22, 0x00, 0x14]);
        t.extend_from_slice(&[7; 20]);
        t.extend_from_slice(&[0; 4]);
        t
    }

    /// The outputs of the chainstate come from `gettxout` (asked with `false`: an output a
    /// mempool transaction spends is still given), the others from `getrawtransaction`,
    /// whose transaction must hash to the txid asked (else no answer, and said why); a
    /// transaction the node refuses, or an output the transaction found does not have, is
    /// one the node does not know; a `gettxout` answer without the script is no answer.
    #[tokio::test]
    async fn the_nodes_answers_are_taken_only_as_what_was_asked() {
        let raw = transaction(1);
        let t = Tx::parse(&raw).unwrap().txid().0;
        let name = |tag: u8| Txid([tag; 32]).to_string();
        let (chain, other, missing, shapeless) = ([0xa0; 32], [0xc0; 32], [0xd0; 32], [0xe0; 32]);
        let (t_name, hex_raw) = (Txid(t).to_string(), hex::encode(&raw));
        let (rpc, seen) = stand_in(move |method, params| {
            let txid = params[0].as_str().unwrap_or_default();
            let not_found = serde_json::json!({"code": -5, "message": "No such transaction"});
            match method {
                "gettxout" if txid == name(0xa0) => Ok(serde_json::json!({
                    "bestblock": "00", "confirmations": 3, "value": 0.1,
                    "scriptPubKey": {"asm": "", "hex": "0014aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "type": "witness_v0_keyhash"},
                    "coinbase": false
                })),
                "gettxout" if txid == name(0xe0) => Ok(serde_json::json!({"value": 0.1})),
                "gettxout" if txid == name(0xd0) => Err(not_found),
                "gettxout" => Ok(serde_json::Value::Null),
                // Asked for `other`, it gives `t`: not the transaction asked.
                "getrawtransaction" if txid == t_name || txid == name(0xc0) => {
                    Ok(serde_json::json!(hex_raw))
                }
                _ => Err(not_found),
            }
        })
        .await;
        let asked = [
            (chain, 0),
            (t, 1),
            (t, 7),
            (other, 0),
            (missing, 0),
            (shapeless, 0),
        ];
        let (answers, wrong) = lookup(&rpc, &asked).await.unwrap();
        let mut p2wpkh = vec![0x00, 0x14];
        p2wpkh.extend_from_slice(&[0xaa; 20]);
        assert_eq!(answers.get(&(chain, 0)), Some(&Some(p2wpkh)));
        let mut second = vec![0x00, 0x14];
        second.extend_from_slice(&[7; 20]);
        assert_eq!(answers.get(&(t, 1)), Some(&Some(second)));
        assert_eq!(answers.get(&(t, 7)), Some(&None), "no such output");
        assert_eq!(answers.get(&(missing, 0)), Some(&None), "refused");
        assert_eq!(answers.get(&(other, 0)), None, "not the transaction asked");
        assert_eq!(
            answers.get(&(shapeless, 0)),
            None,
            "no script in the answer"
        );
        assert_eq!(answers.len(), 4);
        assert_eq!(wrong.len(), 2, "{wrong:?}");
        assert!(
            wrong.iter().any(|w| w.contains(&Txid(other).to_string())),
            "{wrong:?}"
        );
        let seen = seen.lock().unwrap().clone();
        assert!(
            seen.iter()
                .filter(|c| c.starts_with("gettxout"))
                .all(|c| c.ends_with(",false]")),
            "{seen:?}"
        );
        // `t` asked once for both of its outputs.
        let t_asked = format!("getrawtransaction [\"{}\",0]", Txid(t));
        assert_eq!(
            seen.iter().filter(|c| **c == t_asked).count(),
            1,
            "{seen:?}"
        );
    }
}
