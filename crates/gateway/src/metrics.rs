//! Counters for `/metrics` (Prometheus text format), and the tiny HTTP server for it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use tokio::net::{TcpListener, TcpStream};

use crate::admission::Refusal;

/// What the gateway counts. Counters are touched per message with relaxed atomics; the
/// labelled ones (by reason) once per connection.
#[derive(Default, Debug)]
pub struct Metrics {
    /// Connections open now.
    pub connections_open: AtomicI64,
    /// Connections accepted and served since start (not the refused ones).
    pub connections_total: AtomicU64,
    /// Connections refused at the connection cap, since start.
    refused_max_connections: AtomicU64,
    /// Connections refused at the per-address cap, since start.
    refused_max_per_address: AtomicU64,
    /// Connections refused at the per-address rate of new connections, since start.
    refused_max_new_per_second: AtomicU64,
    /// Accepts that failed (out of descriptors, above all); each pauses the listener.
    pub accept_errors: AtomicU64,
    /// Handshakes (WebSocket and BOLT 8) completed.
    pub handshakes_completed: AtomicU64,
    /// Bytes read from sockets.
    pub bytes_in: AtomicU64,
    /// Bytes written to sockets.
    pub bytes_out: AtomicU64,
    /// Transport messages received.
    pub messages_in: AtomicU64,
    /// Transport messages sent.
    pub messages_out: AtomicU64,
    /// Headers sent in `headers` messages.
    pub headers_served: AtomicU64,
    /// Connections that need a buffer from the pool and are waiting for one.
    pub pool_waiting: AtomicI64,
    /// Buffers of the pool in use.
    pub pool_in_use: AtomicI64,
    /// Failed handshakes, by reason.
    handshake_failures: Mutex<BTreeMap<&'static str, u64>>,
    /// Closed connections (after the handshake), by reason.
    closes: Mutex<BTreeMap<&'static str, u64>>,
    /// The nodes followed, connected now, by address: what each said of itself.
    upstreams: Mutex<BTreeMap<String, Upstream>>,
    /// The export kept with `--export-dir`, when there is one.
    export: Mutex<Option<ExportMetrics>>,
}

/// What `/metrics` shows of the export a gateway keeps (`--export-dir`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportMetrics {
    /// The last sealed header's height, once one headers file is.
    pub headers_to: Option<u32>,
    /// The last sealed filter's height, once one filters file is.
    pub filters_to: Option<u32>,
    /// Runs that stopped on an error (each logged with its reason).
    pub failures: u64,
}

/// What `/metrics` shows of a node followed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    /// Its user agent (BIP14), sanitised.
    pub agent: String,
    /// Its service bits.
    pub services: u64,
    /// Its `version`'s relay flag.
    pub relay: bool,
    /// The roles it leads now: filters, blocks, clients' transactions.
    pub leads: [bool; 3],
}

impl Metrics {
    /// The export kept with `--export-dir` is now as `state` says.
    pub fn set_export(&self, state: ExportMetrics) {
        if let Ok(mut e) = self.export.lock() {
            *e = Some(state);
        }
    }

    /// Count a connection refused at a cap.
    pub fn refused(&self, why: Refusal) {
        self.refusals_of(why).fetch_add(1, Relaxed);
    }

    /// Connections refused for `why` so far.
    pub fn refusals(&self, why: Refusal) -> u64 {
        self.refusals_of(why).load(Relaxed)
    }

    fn refusals_of(&self, why: Refusal) -> &AtomicU64 {
        match why {
            Refusal::MaxConnections => &self.refused_max_connections,
            Refusal::MaxPerAddress => &self.refused_max_per_address,
            Refusal::MaxNewPerSecond => &self.refused_max_new_per_second,
        }
    }

    /// Count a failed handshake.
    pub fn handshake_failed(&self, reason: &'static str) {
        if let Ok(mut m) = self.handshake_failures.lock() {
            *m.entry(reason).or_default() += 1;
        }
    }

    /// Count a connection closed after its handshake.
    pub fn closed(&self, reason: &'static str) {
        if let Ok(mut m) = self.closes.lock() {
            *m.entry(reason).or_default() += 1;
        }
    }

    /// Node `addr` is connected and says `info` of itself; `None`: it is gone.
    pub fn set_upstream(&self, addr: &str, info: Option<Upstream>) {
        if let Ok(mut m) = self.upstreams.lock() {
            match info {
                Some(i) => {
                    m.insert(addr.to_string(), i);
                }
                None => {
                    m.remove(addr);
                }
            }
        }
    }

    /// Failed handshakes for `reason` so far.
    pub fn handshake_failures(&self, reason: &str) -> u64 {
        self.handshake_failures
            .lock()
            .map(|m| m.get(reason).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    /// Closes for `reason` so far.
    pub fn closes(&self, reason: &str) -> u64 {
        self.closes
            .lock()
            .map(|m| m.get(reason).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    /// The Prometheus text exposition of every counter, with the tip (height and hash, in
    /// display hex) and the process's allocation counters.
    pub fn render(&self, tip_height: u32, tip_hash: &str) -> String {
        let mut out = String::with_capacity(2048);
        let mut gauge = |name: &str, help: &str, kind: &str, value: i128| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        };
        let get = |a: &AtomicU64| i128::from(a.load(Relaxed));
        gauge(
            "lightwire_connections_open",
            "Connections open.",
            "gauge",
            i128::from(self.connections_open.load(Relaxed)),
        );
        gauge(
            "lightwire_connections_total",
            "Connections accepted and served (refused ones are in lightwire_refused_connections_total).",
            "counter",
            get(&self.connections_total),
        );
        gauge(
            "lightwire_accept_errors_total",
            "Accepts that failed (each pauses accepting, 5 ms doubling to 1 s).",
            "counter",
            get(&self.accept_errors),
        );
        gauge(
            "lightwire_handshakes_completed_total",
            "Handshakes completed.",
            "counter",
            get(&self.handshakes_completed),
        );
        gauge(
            "lightwire_bytes_in_total",
            "Bytes read from clients.",
            "counter",
            get(&self.bytes_in),
        );
        gauge(
            "lightwire_bytes_out_total",
            "Bytes written to clients.",
            "counter",
            get(&self.bytes_out),
        );
        gauge(
            "lightwire_messages_in_total",
            "Transport messages received.",
            "counter",
            get(&self.messages_in),
        );
        gauge(
            "lightwire_messages_out_total",
            "Transport messages sent.",
            "counter",
            get(&self.messages_out),
        );
        gauge(
            "lightwire_headers_served_total",
            "Headers sent.",
            "counter",
            get(&self.headers_served),
        );
        gauge(
            "lightwire_tip_height",
            "Height of the served chain's tip.",
            "gauge",
            i128::from(tip_height),
        );
        gauge(
            "lightwire_pool_in_use",
            "Frame buffers of the pool in use.",
            "gauge",
            i128::from(self.pool_in_use.load(Relaxed)),
        );
        gauge(
            "lightwire_pool_waiting",
            "Connections waiting for a pool buffer.",
            "gauge",
            i128::from(self.pool_waiting.load(Relaxed)),
        );
        if let Some(e) = self.export.lock().ok().and_then(|e| *e) {
            // -1 while nothing of the kind is sealed.
            let to = |h: Option<u32>| h.map_or(-1, i128::from);
            gauge(
                "lightwire_export_headers_to",
                "Height of the last header the kept export (--export-dir) has sealed, or -1.",
                "gauge",
                to(e.headers_to),
            );
            gauge(
                "lightwire_export_filters_to",
                "Height of the last filter the kept export (--export-dir) has sealed, or -1.",
                "gauge",
                to(e.filters_to),
            );
            gauge(
                "lightwire_export_failures_total",
                "Runs of the kept export (--export-dir) that stopped on an error (logged).",
                "counter",
                i128::from(e.failures),
            );
        }
        let alloc = lightwire_alloc::snapshot();
        gauge(
            "lightwire_allocations_total",
            "Heap allocations by the process.",
            "counter",
            i128::from(alloc.allocations),
        );
        gauge(
            "lightwire_allocated_bytes_live",
            "Heap bytes live.",
            "gauge",
            i128::from(alloc.live_bytes()),
        );
        let _ = writeln!(
            out,
            "# HELP lightwire_tip_info The served chain's tip hash.\n# TYPE lightwire_tip_info gauge\nlightwire_tip_info{{hash=\"{tip_hash}\"}} 1"
        );
        // Every reason, even at 0: an alert on a rate needs the series before the first
        // refusal.
        let name = "lightwire_refused_connections_total";
        let _ = writeln!(
            out,
            "# HELP {name} Connections refused at a cap (a 503 and a close, before any handshake), by reason.\n# TYPE {name} counter"
        );
        for why in Refusal::ALL {
            let _ = writeln!(
                out,
                "{name}{{reason=\"{}\"}} {}",
                why.label(),
                self.refusals(why)
            );
        }
        for (name, help, map) in [
            (
                "lightwire_handshake_failures_total",
                "Handshakes that failed, by reason.",
                &self.handshake_failures,
            ),
            (
                "lightwire_closes_total",
                "Connections closed after the handshake, by reason.",
                &self.closes,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            if let Ok(m) = map.lock() {
                for (reason, n) in m.iter() {
                    let _ = writeln!(out, "{name}{{reason=\"{reason}\"}} {n}");
                }
            }
        }
        if let Ok(m) = self.upstreams.lock() {
            let _ = writeln!(
                out,
                "# HELP lightwire_upstream_info The nodes followed, connected now: what each said of itself (its user agent, service bits and relay flag).\n# TYPE lightwire_upstream_info gauge"
            );
            for (addr, u) in m.iter() {
                let _ = writeln!(
                    out,
                    "lightwire_upstream_info{{upstream=\"{addr}\",agent=\"{}\",services=\"{:#x}\",relay=\"{}\"}} 1",
                    u.agent,
                    u.services,
                    u8::from(u.relay)
                );
            }
            let _ = writeln!(
                out,
                "# HELP lightwire_upstream_leads Whether the node leads a role: filters, blocks or clients' transactions go through it.\n# TYPE lightwire_upstream_leads gauge"
            );
            for (addr, u) in m.iter() {
                for (role, leads) in ["filters", "blocks", "transactions"].iter().zip(u.leads) {
                    let _ = writeln!(
                        out,
                        "lightwire_upstream_leads{{upstream=\"{addr}\",role=\"{role}\"}} {}",
                        u8::from(leads)
                    );
                }
            }
        }
        out
    }
}

/// How long one `/metrics` exchange may take, request and answer together: a client that
/// trickles its request or does not read the answer cannot hold a task longer.
pub const METRICS_DEADLINE: Duration = Duration::from_secs(5);

/// Answer every HTTP request on `listener` with `body()`, until the task is dropped.
pub async fn serve_metrics(
    listener: TcpListener,
    body: impl Fn() -> String + Send + Sync + 'static,
) {
    serve_metrics_within(listener, body, METRICS_DEADLINE).await;
}

async fn serve_metrics_within(
    listener: TcpListener,
    body: impl Fn() -> String + Send + Sync + 'static,
    deadline: Duration,
) {
    let body = std::sync::Arc::new(body);
    // After a failed accept (out of descriptors), pause before the next, as the gateway's
    // own listener does, rather than spin.
    let mut pause = Duration::from_millis(5);
    loop {
        let mut stream = match listener.accept().await {
            Ok((stream, _)) => {
                pause = Duration::from_millis(5);
                stream
            }
            Err(_) => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let body = body.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(deadline, answer(&mut stream, &*body)).await;
        });
    }
}

/// Read one request head (at most 4 KiB), then answer it with `body()`.
async fn answer(
    stream: &mut TcpStream,
    body: &(dyn Fn() -> String + Send + Sync),
) -> std::io::Result<()> {
    let mut req = [0u8; 4096];
    let mut n = 0;
    while n < req.len() {
        let k = stream.read(&mut req[n..]).await?;
        if k == 0 {
            return Ok(());
        }
        n += k;
        if req[..n].windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    let text = body();
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        text.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(text.as_bytes()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the server has closed `s` (a read sees the end, or the connection reset).
    async fn closed(s: &mut TcpStream) -> bool {
        let mut b = [0u8; 64];
        loop {
            match tokio::time::timeout(Duration::from_millis(10), s.read(&mut b)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                Ok(Ok(_)) => continue,
                Err(_) => return false,
            }
        }
    }

    #[tokio::test]
    async fn a_trickled_request_is_cut_at_the_whole_request_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve_metrics_within(
            listener,
            || "x 1\n".to_string(),
            Duration::from_millis(300),
        ));
        // A client that sends one byte every 100 ms (each read is quick; the whole is not).
        let mut slow = TcpStream::connect(addr).await.unwrap();
        let started = tokio::time::Instant::now();
        let mut cut = false;
        for b in b"GET /metrics HTTP/1.1\r\nHost: a-very-long-host-name\r\n"
            .iter()
            .cycle()
            .take(20)
        {
            if slow.write_all(&[*b]).await.is_err() || closed(&mut slow).await {
                cut = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(cut, "still open after {:?}", started.elapsed());
        assert!(started.elapsed() < Duration::from_millis(900));
        // A normal request is answered.
        let mut ok = TcpStream::connect(addr).await.unwrap();
        ok.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut text = String::new();
        ok.read_to_string(&mut text).await.unwrap();
        assert!(
            text.starts_with("HTTP/1.1 200 OK") && text.ends_with("x 1\n"),
            "{text}"
        );
        server.abort();
    }
}
