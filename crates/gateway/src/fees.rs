//! The node's fee estimates, served as `fee_rates` (docs/PROTOCOL.md, "Fee rates"): with
//! `--node-rpc`, the gateway asks its node over JSON-RPC every [`POLL`] for the rate to be
//! mined within 1, 6 and 144 blocks: `estimatesmartfee` (Bitcoin Core), or, where the node
//! does not know that method, `estimatefee` (btcd). P2P carries no estimates (BIP133's
//! `feefilter` is a floor, not an estimate), hence RPC.
//!
//! An estimate older than [`STALE`] (the node stopped answering) is served as none: a
//! client should not build on a rate from an hour ago. The client bounds and combines what
//! gateways say; nothing here is trusted by it.
//!
//! The same poll asks Bitcoin Core how far its block filter index has got (`getindexinfo`):
//! Core answers nothing for filters past it, so the gateway asks that node for none
//! ([`NodeFees::filter_index`]; which of the nodes followed the RPC is, the command line
//! tells, [`rpc_node`]). btcd has no such call (its filters are built with its blocks):
//! nothing is known, and nothing limited.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lightwire_wire::{FEE_TARGETS, FeeSource};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How often the node is asked.
pub const POLL: Duration = Duration::from_secs(60);

/// How old an estimate may be and still be served.
pub const STALE: Duration = Duration::from_secs(10 * 60);

/// How long one RPC call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The most of an RPC answer read (an estimate is a few dozen bytes).
const MAX_ANSWER: usize = 64 * 1024;

/// The node's JSON-RPC endpoint: its address and HTTP basic credentials (`user:password`,
/// as Bitcoin Core's `.cookie` file holds them).
#[derive(Clone, Debug)]
pub struct RpcEndpoint {
    /// Where it listens.
    pub addr: SocketAddr,
    /// `user:password`.
    pub credentials: String,
    /// The file they were read from, read again when the node refuses them: Bitcoin Core
    /// writes a new random `.cookie` each time it starts.
    pub file: Option<std::path::PathBuf>,
}

impl RpcEndpoint {
    /// The node's RPC at `addr`, with the `user:password` on `file`'s first line (read
    /// again when the node refuses them).
    pub fn from_file(addr: SocketAddr, file: &std::path::Path) -> Result<RpcEndpoint, String> {
        Ok(RpcEndpoint {
            addr,
            credentials: read_credentials(file)?,
            file: Some(file.to_path_buf()),
        })
    }

    /// Read the credentials file again; whether they changed.
    fn reload(&mut self) -> Result<bool, String> {
        let Some(file) = &self.file else {
            return Ok(false);
        };
        let fresh = read_credentials(file)?;
        let changed = fresh != self.credentials;
        self.credentials = fresh;
        Ok(changed)
    }
}

/// The `user:password` on `file`'s first line.
fn read_credentials(file: &std::path::Path) -> Result<String, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let credentials = text.lines().next().unwrap_or_default().trim().to_string();
    if !credentials.contains(':') {
        return Err(format!(
            "{}: the first line must be user:password (as Bitcoin Core's .cookie)",
            file.display()
        ));
    }
    Ok(credentials)
}

/// Estimates as served: where they come from, and sat/kvB for each of [`FEE_TARGETS`].
pub type Estimates = (FeeSource, [Option<u64>; 3]);

/// The latest estimates, shared by the sessions, and how far the node's block filter
/// index has got.
#[derive(Default)]
pub struct NodeFees {
    latest: Mutex<Option<(Estimates, Instant)>>,
    /// The node followed whose RPC this is, when known ([`rpc_node`]).
    node: Option<SocketAddr>,
    /// The height its filter index reached, when it said so lately.
    index: Mutex<Option<(u32, Instant)>>,
}

impl NodeFees {
    /// What is served now: the latest estimates unless stale, else none.
    pub fn current(&self) -> Estimates {
        let latest = self.latest.lock().map(|l| *l).unwrap_or(None);
        match latest {
            Some((estimates, at)) if at.elapsed() < STALE => estimates,
            _ => (FeeSource::None, [None; 3]),
        }
    }

    /// Estimates of the node followed at `node` (P2P), whose filter index height then
    /// limits what it is asked; `None`: of a node not told apart ([`rpc_node`]).
    pub fn of_node(node: Option<SocketAddr>) -> NodeFees {
        NodeFees {
            node,
            ..NodeFees::default()
        }
    }

    /// The height the block filter index of the node followed at `node` has reached, if
    /// this is its RPC and it said so in the last [`STALE`].
    pub fn filter_index(&self, node: SocketAddr) -> Option<u32> {
        if self.node != Some(node) {
            return None;
        }
        let index = self.index.lock().ok()?;
        let (height, when) = (*index)?;
        (when.elapsed() < STALE).then_some(height)
    }

    /// Keep `height` as how far the node's filter index has got.
    pub fn set_filter_index(&self, height: u32) {
        if let Ok(mut i) = self.index.lock() {
            *i = Some((height, Instant::now()));
        }
    }

    /// Keep `rates` from `source` as the latest.
    pub fn set(&self, source: FeeSource, rates: [Option<u64>; 3]) {
        if let Ok(mut l) = self.latest.lock() {
            *l = Some(((source, rates), Instant::now()));
        }
    }
}

/// Why a call to the node's RPC gave nothing.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    /// Connecting, writing or reading failed, or took too long.
    #[error("the node's RPC: {0}")]
    Io(#[from] std::io::Error),
    /// Not an HTTP answer with a JSON body.
    #[error("the node's RPC answered something that is not JSON-RPC: {0}")]
    Malformed(&'static str),
    /// HTTP 401: the credentials are wrong.
    #[error("the node's RPC refused the credentials")]
    Unauthorized,
    /// The node answered a call with an error (its JSON).
    #[error("the node refused the call: {0}")]
    Refused(String),
}

/// Ask the node for its estimates every [`POLL`], for ever, keeping them in `fees`.
pub async fn poll(mut endpoint: RpcEndpoint, fees: std::sync::Arc<NodeFees>) {
    loop {
        refresh(&mut endpoint, &fees).await;
        tokio::time::sleep(POLL).await;
    }
}

/// Ask the node for its estimates once, keeping them in `fees`; credentials it refuses are
/// read again from their file and, if they changed (the node restarted with a new
/// cookie), tried once more.
async fn refresh(endpoint: &mut RpcEndpoint, fees: &NodeFees) {
    let mut answer = estimates(endpoint).await;
    if matches!(answer, Err(RpcError::Unauthorized)) {
        match endpoint.reload() {
            Ok(true) => {
                tracing::info!(rpc = %endpoint.addr, "the node's RPC credentials changed (a new cookie): read again");
                answer = estimates(endpoint).await;
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(rpc = %endpoint.addr, "reading the credentials again: {e}"),
        }
    }
    match answer {
        Ok((source, rates)) => fees.set(source, rates),
        Err(e) => tracing::warn!(rpc = %endpoint.addr, "no fee estimates: {e}"),
    }
    match filter_index(endpoint).await {
        Ok(Some(height)) => fees.set_filter_index(height),
        Ok(None) => {}
        Err(e) => tracing::debug!(rpc = %endpoint.addr, "no filter index height: {e}"),
    }
}

/// Which of the nodes followed (`upstreams`, P2P) the RPC at `rpc` is: the one at the same
/// address; of several there, the one whose port is the RPC's plus one (Bitcoin Core's
/// defaults on every network: 8332 and 8333, 18443 and 18444 on regtest); `None` when that
/// does not tell one apart.
pub fn rpc_node(rpc: SocketAddr, upstreams: &[SocketAddr]) -> Option<SocketAddr> {
    let same_ip: Vec<SocketAddr> = upstreams
        .iter()
        .copied()
        .filter(|u| u.ip() == rpc.ip())
        .collect();
    match same_ip.as_slice() {
        [one] => Some(*one),
        _ => {
            let next: Vec<SocketAddr> = same_ip
                .into_iter()
                .filter(|u| rpc.port().checked_add(1) == Some(u.port()))
                .collect();
            (next.len() == 1).then(|| next[0])
        }
    }
}

/// How far the node's basic block filter index has got (Bitcoin Core's `getindexinfo`,
/// `best_block_height`); `None` when the node has no such call or no such index.
pub async fn filter_index(endpoint: &RpcEndpoint) -> Result<Option<u32>, RpcError> {
    const NAME: &str = "basic block filter index";
    let answer = call(endpoint, "getindexinfo", serde_json::json!([NAME])).await?;
    Ok(answer["result"][NAME]["best_block_height"]
        .as_u64()
        .and_then(|h| u32::try_from(h).ok()))
}

/// The node's estimates for [`FEE_TARGETS`], in sat/kvB: `estimatesmartfee`, or
/// `estimatefee` where the node does not know it.
pub async fn estimates(endpoint: &RpcEndpoint) -> Result<Estimates, RpcError> {
    let mut rates = [None; 3];
    let mut source = FeeSource::SmartFee;
    for (slot, target) in rates.iter_mut().zip(FEE_TARGETS) {
        let answer = match source {
            FeeSource::SmartFee => {
                call(endpoint, "estimatesmartfee", serde_json::json!([target])).await?
            }
            _ => call(endpoint, "estimatefee", serde_json::json!([target])).await?,
        };
        let answer = if source == FeeSource::SmartFee && method_missing(&answer) {
            source = FeeSource::EstimateFee;
            call(endpoint, "estimatefee", serde_json::json!([target])).await?
        } else {
            answer
        };
        *slot = rate_of(&answer);
    }
    Ok((source, rates))
}

/// Whether the answer says the method does not exist (JSON-RPC's -32601).
fn method_missing(answer: &serde_json::Value) -> bool {
    answer["error"]["code"].as_i64() == Some(-32601)
}

/// The rate in an answer, sat/kvB: `estimatesmartfee`'s `result.feerate` or
/// `estimatefee`'s `result`, in BTC/kvB; none for a missing, negative (btcd's "no
/// estimate"), or absurd one.
fn rate_of(answer: &serde_json::Value) -> Option<u64> {
    let result = &answer["result"];
    let btc = result["feerate"].as_f64().or_else(|| result.as_f64())?;
    let sat = (btc * 1e8).round();
    (sat.is_finite() && sat > 0.0 && sat < 1e15).then_some(sat as u64)
}

/// One JSON-RPC call over HTTP/1.0 (a connection each, one a minute; 1.0 so that no
/// server answers in chunks).
async fn call(
    endpoint: &RpcEndpoint,
    method: &str,
    params: serde_json::Value,
) -> Result<serde_json::Value, RpcError> {
    let body = serde_json::json!({"jsonrpc": "1.0", "id": 1, "method": method, "params": params});
    exchange(endpoint, &body, MAX_ANSWER, CALL_TIMEOUT).await
}

/// Several calls in one JSON-RPC batch (one connection, one answer; Bitcoin Core and btcd
/// both take a JSON array of calls), their results in the order of `calls`: each is the
/// call's `result`, or its `error` as [`RpcError::Refused`]. The answer may be up to
/// `max_answer` bytes, and take up to `timeout`.
pub async fn call_batch(
    endpoint: &RpcEndpoint,
    calls: &[(&str, serde_json::Value)],
    max_answer: usize,
    timeout: Duration,
) -> Result<Vec<Result<serde_json::Value, RpcError>>, RpcError> {
    let body: Vec<serde_json::Value> = calls
        .iter()
        .enumerate()
        .map(|(id, (method, params))| {
            serde_json::json!({"jsonrpc": "1.0", "id": id, "method": method, "params": params})
        })
        .collect();
    let answer = exchange(
        endpoint,
        &serde_json::Value::Array(body),
        max_answer,
        timeout,
    )
    .await?;
    let serde_json::Value::Array(answers) = answer else {
        return Err(RpcError::Malformed(
            "a batch answered with something not an array",
        ));
    };
    let mut results: Vec<Option<Result<serde_json::Value, RpcError>>> =
        (0..calls.len()).map(|_| None).collect();
    for mut a in answers {
        let Some(slot) = a["id"]
            .as_u64()
            .and_then(|id| results.get_mut(usize::try_from(id).ok()?))
        else {
            return Err(RpcError::Malformed("a batch answer with an id not asked"));
        };
        *slot = Some(if a["error"].is_null() {
            Ok(a["result"].take())
        } else {
            Err(RpcError::Refused(a["error"].to_string()))
        });
    }
    results
        .into_iter()
        .map(|r| {
            r.ok_or(RpcError::Malformed(
                "a batch answer without one of its calls",
            ))
        })
        .collect()
}

/// Sends `body` as one HTTP/1.0 POST and reads the JSON answer (at most `max_answer`
/// bytes, within `timeout`).
async fn exchange(
    endpoint: &RpcEndpoint,
    body: &serde_json::Value,
    max_answer: usize,
    timeout: Duration,
) -> Result<serde_json::Value, RpcError> {
    let body = body.to_string();
    let request = format!(
        "POST / HTTP/1.0\r\nHost: {}\r\nAuthorization: Basic {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        endpoint.addr,
        base64(endpoint.credentials.as_bytes()),
        body.len(),
    );
    let exchange = async {
        let mut stream = TcpStream::connect(endpoint.addr).await?;
        stream.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        (&mut stream)
            .take(max_answer as u64)
            .read_to_end(&mut answer)
            .await?;
        Ok::<_, std::io::Error>(answer)
    };
    let answer = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer in {} s", timeout.as_secs()),
            )
        })??;
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or(RpcError::Malformed("no end of headers"))?;
    let status = answer.split(|&b| b == b' ').nth(1).unwrap_or_default();
    if status == b"401" {
        return Err(RpcError::Unauthorized);
    }
    serde_json::from_slice(&answer[split + 4..])
        .map_err(|_| RpcError::Malformed("a body that is not JSON"))
}

/// Base64 for the basic-auth header (RFC 4648, padded).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for k in 0..4 {
            out.push(if k <= chunk.len() {
                char::from(ALPHABET[(n >> (18 - 6 * k)) as usize & 63])
            } else {
                '='
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A fake node RPC answering each call with what `answer` makes of its method and
    /// target; the requests it saw.
    async fn fake_node(
        answer: fn(&str, u64) -> (u16, String),
    ) -> (RpcEndpoint, tokio::task::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Ok(Ok((mut s, _))) =
                tokio::time::timeout(Duration::from_millis(500), listener.accept()).await
            {
                let mut buf = vec![0u8; 4096];
                let n = s.read(&mut buf).await.unwrap();
                let text = String::from_utf8_lossy(&buf[..n]).to_string();
                let body: serde_json::Value =
                    serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap();
                let method = body["method"].as_str().unwrap().to_string();
                let target = body["params"][0].as_u64().unwrap_or(0);
                seen.push(format!("{method} {target} {}", text.contains("Basic dTpw")));
                let (status, json) = answer(&method, target);
                let reply = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n{json}",
                    json.len()
                );
                s.write_all(reply.as_bytes()).await.unwrap();
            }
            seen
        });
        let endpoint = RpcEndpoint {
            addr,
            credentials: "u:p".into(),
            file: None,
        };
        (endpoint, task)
    }

    /// The RPC belongs to the node followed at its address, or of several there, to the one
    /// on the next port; otherwise to none.
    #[test]
    fn the_node_an_rpc_belongs_to() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        let rpc = a("127.0.0.1:8332");
        assert_eq!(
            rpc_node(rpc, &[a("127.0.0.1:8333"), a("10.0.0.5:8333")]),
            Some(a("127.0.0.1:8333"))
        );
        assert_eq!(
            rpc_node(rpc, &[a("127.0.0.1:9000")]),
            Some(a("127.0.0.1:9000"))
        );
        assert_eq!(
            rpc_node(rpc, &[a("127.0.0.1:18444"), a("127.0.0.1:8333")]),
            Some(a("127.0.0.1:8333"))
        );
        assert_eq!(
            rpc_node(rpc, &[a("127.0.0.1:18444"), a("127.0.0.1:9000")]),
            None
        );
        assert_eq!(rpc_node(rpc, &[a("10.0.0.5:8333")]), None);
    }

    /// Bitcoin Core's `getindexinfo` says how far its block filter index has got; btcd
    /// has no such call, and a Core without the index lists none: nothing is known.
    #[tokio::test]
    async fn the_filter_index_height_from_getindexinfo() {
        let (endpoint, _) = fake_node(|method, _| match method {
            "getindexinfo" => (200, r#"{"result":{"basic block filter index":{"synced":false,"best_block_height":812345}},"error":null,"id":1}"#.into()),
            _ => (200, "{}".into()),
        })
        .await;
        assert_eq!(filter_index(&endpoint).await.unwrap(), Some(812_345));
        let (endpoint, _) = fake_node(|_, _| {
            (
                200,
                r#"{"result":null,"error":{"code":-32601,"message":"Method not found"},"id":1}"#
                    .into(),
            )
        })
        .await;
        assert_eq!(filter_index(&endpoint).await.unwrap(), None, "btcd");
        let (endpoint, _) =
            fake_node(|_, _| (200, r#"{"result":{},"error":null,"id":1}"#.into())).await;
        assert_eq!(filter_index(&endpoint).await.unwrap(), None, "no index");
    }

    /// A node that answers any request once with `json`.
    async fn answering(json: &'static str) -> RpcEndpoint {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            if let Ok((mut s, _)) = listener.accept().await {
                let mut buf = vec![0u8; 4096];
                let _ = s.read(&mut buf).await;
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{json}",
                    json.len()
                );
                let _ = s.write_all(reply.as_bytes()).await;
            }
        });
        RpcEndpoint {
            addr,
            credentials: "u:p".into(),
            file: None,
        }
    }

    /// A batch's answers are matched to its calls by id, whatever their order; a call the
    /// node refused is that call's error; an answer missing a call, naming one not made, or
    /// not an array is malformed.
    #[tokio::test]
    async fn a_batch_is_answered_call_by_call() {
        let calls = [
            ("getrawtransaction", serde_json::json!(["aa", 0])),
            ("getrawtransaction", serde_json::json!(["bb", 0])),
        ];
        let e = answering(
            r#"[{"result":null,"error":{"code":-5,"message":"No such transaction"},"id":1},{"result":"00ff","error":null,"id":0}]"#,
        )
        .await;
        let got = call_batch(&e, &calls, 1 << 16, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(got[0].as_ref().unwrap(), "00ff");
        assert!(matches!(&got[1], Err(RpcError::Refused(m)) if m.contains("No such transaction")));
        for bad in [
            r#"[{"result":"00","error":null,"id":0}]"#,
            r#"[{"result":"00","error":null,"id":0},{"result":"00","error":null,"id":7}]"#,
            r#"{"result":"00","error":null,"id":0}"#,
        ] {
            let e = answering(bad).await;
            let answer = call_batch(&e, &calls, 1 << 16, Duration::from_secs(5)).await;
            assert!(matches!(answer, Err(RpcError::Malformed(_))), "{bad}");
        }
    }

    /// Bitcoin Core writes a new random `.cookie` each time it starts: refused, the
    /// credentials are read again from their file, and the estimates come.
    #[tokio::test]
    async fn a_new_cookie_is_read_again_when_the_node_refuses_the_old_one() {
        // The node takes only u:p ("Basic dTpw").
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let mut buf = vec![0u8; 4096];
                let n = s.read(&mut buf).await.unwrap();
                let text = String::from_utf8_lossy(&buf[..n]).to_string();
                let (status, json) = match text.contains("Basic dTpw") {
                    true => (
                        200,
                        r#"{"result":{"feerate":0.0001,"blocks":2},"error":null,"id":1}"#,
                    ),
                    false => (401, ""),
                };
                let reply = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n{json}",
                    json.len()
                );
                s.write_all(reply.as_bytes()).await.unwrap();
            }
        });
        let dir = std::env::temp_dir().join(format!("lightwire-cookie-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cookie = dir.join(".cookie");
        std::fs::write(&cookie, "__cookie__:old\n").unwrap();
        let mut endpoint = RpcEndpoint::from_file(addr, &cookie).unwrap();
        let fees = NodeFees::default();
        refresh(&mut endpoint, &fees).await;
        assert_eq!(fees.current().0, FeeSource::None, "refused");
        // The node restarted: a new cookie.
        std::fs::write(&cookie, "u:p\n").unwrap();
        refresh(&mut endpoint, &fees).await;
        assert_eq!(fees.current(), (FeeSource::SmartFee, [Some(10_000); 3]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn bitcoin_cores_estimatesmartfee_in_sat_per_kvb() {
        let (endpoint, seen) = fake_node(|_, target| match target {
            1 => (200, r#"{"result":{"feerate":0.00025,"blocks":2},"error":null,"id":1}"#.into()),
            6 => (200, r#"{"result":{"feerate":0.0001234,"blocks":6},"error":null,"id":1}"#.into()),
            _ => (200, r#"{"result":{"errors":["Insufficient data or no feerate found"],"blocks":0},"error":null,"id":1}"#.into()),
        })
        .await;
        let got = estimates(&endpoint).await.unwrap();
        assert_eq!(
            got,
            (FeeSource::SmartFee, [Some(25_000), Some(12_340), None])
        );
        let seen = seen.await.unwrap();
        assert_eq!(
            seen,
            [
                "estimatesmartfee 1 true",
                "estimatesmartfee 6 true",
                "estimatesmartfee 144 true"
            ]
        );
    }

    #[tokio::test]
    async fn btcds_estimatefee_where_estimatesmartfee_is_missing() {
        let (endpoint, seen) = fake_node(|method, target| match (method, target) {
            ("estimatesmartfee", _) => (
                200,
                r#"{"result":null,"error":{"code":-32601,"message":"Method not found"},"id":1}"#
                    .into(),
            ),
            (_, 144) => (200, r#"{"result":-1,"error":null,"id":1}"#.into()),
            _ => (
                200,
                format!(
                    r#"{{"result":{},"error":null,"id":1}}"#,
                    0.0002 / target as f64
                ),
            ),
        })
        .await;
        let got = estimates(&endpoint).await.unwrap();
        assert_eq!(
            got,
            (FeeSource::EstimateFee, [Some(20_000), Some(3_333), None])
        );
        assert_eq!(
            seen.await.unwrap().first().map(String::as_str),
            Some("estimatesmartfee 1 true")
        );
    }

    #[tokio::test]
    async fn wrong_credentials_and_garbage_are_errors_and_stale_estimates_are_not_served() {
        let (endpoint, _) = fake_node(|_, _| (401, String::new())).await;
        assert!(matches!(
            estimates(&endpoint).await,
            Err(RpcError::Unauthorized)
        ));
        let (endpoint, _) = fake_node(|_, _| (200, "<html>".into())).await;
        assert!(matches!(
            estimates(&endpoint).await,
            Err(RpcError::Malformed(_))
        ));
        let fees = NodeFees::default();
        assert_eq!(fees.current(), (FeeSource::None, [None; 3]));
        fees.set(FeeSource::SmartFee, [Some(1_000); 3]);
        assert_eq!(fees.current(), (FeeSource::SmartFee, [Some(1_000); 3]));
        if let Ok(mut l) = fees.latest.lock() {
            *l = Some((
                (FeeSource::SmartFee, [Some(1_000); 3]),
                Instant::now() - STALE,
            ));
        }
        assert_eq!(fees.current(), (FeeSource::None, [None; 3]), "stale");
        assert_eq!(base64(b"u:p"), "dTpw");
        assert_eq!(base64(b"user:pw"), "dXNlcjpwdw==");
    }
}
