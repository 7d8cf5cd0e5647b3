//! Transport benchmarks, shared by the native runner (`cargo bench -p lightwire-benches`)
//! and the in-browser one (`wasm_transport.rs`, run by wasm-bindgen-test in headless
//! Chromium). Each prints ns/op, MB/s, allocs/op and B/op; the caller supplies the clock.
//!
//! Allocation columns are only meaningful when the binary installs
//! [`lightwire_alloc::CountingAllocator`] (the `count-alloc` feature, on by default).

pub mod chain;
pub mod digest;
pub mod filter;
pub mod silent;
pub mod spend;
pub mod wallet;

use std::hint::black_box;

use lightwire_alloc::snapshot;
use lightwire_noise::test_util::connected_pair;
use lightwire_noise::{FrameBuffer, FrameReader, Receiver, Sender, frame_len};

/// A monotonic clock in nanoseconds (`Instant` natively, `performance.now()` in a browser).
pub trait Clock {
    /// Nanoseconds since an arbitrary origin.
    fn now_ns(&self) -> f64;
}

/// `Instant`: the native benchmarks' clock.
#[cfg(not(target_arch = "wasm32"))]
pub struct Monotonic(std::time::Instant);

#[cfg(not(target_arch = "wasm32"))]
impl Monotonic {
    /// A clock starting now.
    pub fn new() -> Self {
        Monotonic(std::time::Instant::now())
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl Default for Monotonic {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl Clock for Monotonic {
    fn now_ns(&self) -> f64 {
        self.0.elapsed().as_nanos() as f64
    }
}

/// The browser the benchmark runs in, as its user agent says (tables name their engine).
#[cfg(target_arch = "wasm32")]
pub fn browser() -> String {
    let get = |o: &wasm_bindgen::JsValue, k: &str| js_sys::Reflect::get(o, &k.into()).ok();
    get(&js_sys::global(), "navigator")
        .and_then(|n| get(&n, "userAgent"))
        .and_then(|u| u.as_string())
        .unwrap_or_else(|| "an unknown browser".into())
}

/// `performance.now()`, from a window or a worker: the in-browser benchmarks' clock.
#[cfg(target_arch = "wasm32")]
pub struct PerformanceNow(web_sys::Performance);

#[cfg(target_arch = "wasm32")]
impl PerformanceNow {
    /// The global scope's `performance`.
    pub fn new() -> Self {
        use wasm_bindgen::JsCast;
        let global = js_sys::global();
        let performance = match global.dyn_ref::<web_sys::Window>() {
            Some(window) => window.performance(),
            None => global
                .unchecked_ref::<web_sys::WorkerGlobalScope>()
                .performance(),
        };
        PerformanceNow(performance.expect("performance.now() available"))
    }
}

#[cfg(target_arch = "wasm32")]
impl Default for PerformanceNow {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(target_arch = "wasm32")]
impl Clock for PerformanceNow {
    fn now_ns(&self) -> f64 {
        self.0.now() * 1e6
    }
}

/// One benchmark's result.
#[derive(Debug, Clone)]
pub struct Measurement {
    /// What was measured.
    pub name: &'static str,
    /// Message (plaintext) length per operation.
    pub message_len: usize,
    /// Operations timed.
    pub iterations: u64,
    /// Total time of the timed operations.
    pub total_ns: f64,
    /// Heap allocations during the timed operations.
    pub allocations: u64,
    /// Bytes those allocations asked for.
    pub bytes_allocated: u64,
    /// The lnd brontide figure for the same operation, where there is one.
    pub reference: Option<&'static str>,
}

impl Measurement {
    /// Nanoseconds per operation.
    pub fn ns_per_op(&self) -> f64 {
        self.total_ns / self.iterations as f64
    }

    /// Message bytes per second, in MB/s (10^6), counting the plaintext once per operation
    /// (as Go's `b.SetBytes` does in lnd's benchmarks).
    pub fn mb_per_s(&self) -> f64 {
        (self.message_len as f64 * self.iterations as f64) / (self.total_ns / 1e9) / 1e6
    }

    /// Allocations per operation.
    pub fn allocs_per_op(&self) -> f64 {
        self.allocations as f64 / self.iterations as f64
    }

    /// Bytes allocated per operation.
    pub fn bytes_per_op(&self) -> f64 {
        self.bytes_allocated as f64 / self.iterations as f64
    }
}

/// The initiator's sender and the responder's receiver of a connected pair (one
/// direction is all a benchmark needs).
fn pair() -> (Sender, Receiver) {
    let (initiator, responder) = connected_pair();
    (initiator.split().0, responder.split().1)
}

/// Time `batch` repeatedly until `budget_ns` is spent; `op` runs one batch and returns the
/// nanoseconds that count (so untimed preparation can sit inside a batch).
fn run(
    name: &'static str,
    message_len: usize,
    budget_ns: f64,
    batch: u64,
    reference: Option<&'static str>,
    mut op: impl FnMut() -> (f64, lightwire_alloc::Snapshot),
) -> Measurement {
    // Warm up: buffers exist, caches are hot, the JIT (in wasm) has compiled.
    for _ in 0..2 {
        op();
    }
    let mut m = Measurement {
        name,
        message_len,
        iterations: 0,
        total_ns: 0.0,
        allocations: 0,
        bytes_allocated: 0,
        reference,
    };
    while m.total_ns < budget_ns {
        let (ns, allocs) = op();
        m.total_ns += ns;
        m.iterations += batch;
        m.allocations += allocs.allocations;
        m.bytes_allocated += allocs.bytes_allocated;
    }
    m
}

/// Seal a message into a frame buffer (lnd: `BenchmarkWriteMessage`).
pub fn write(
    clock: &impl Clock,
    message_len: usize,
    budget_ns: f64,
    reference: Option<&'static str>,
) -> Measurement {
    let (mut tx, _rx) = pair();
    let mut buf = FrameBuffer::new();
    buf.body_mut()[..message_len].fill(0x5a);
    const BATCH: u64 = 16;
    run("write", message_len, budget_ns, BATCH, reference, || {
        let before = snapshot();
        let start = clock.now_ns();
        for _ in 0..BATCH {
            black_box(buf.seal(&mut tx, message_len).expect("seal")[0]);
        }
        let ns = clock.now_ns() - start;
        (ns, snapshot().since(&before))
    })
}

/// Open frames from a byte stream through the frame reader: one copy in, decrypt the
/// length header, then the body, in place (lnd: `BenchmarkReadHeaderAndBody`).
pub fn read(
    clock: &impl Clock,
    message_len: usize,
    budget_ns: f64,
    reference: Option<&'static str>,
) -> Measurement {
    let (mut tx, mut rx) = pair();
    let mut buf = FrameBuffer::new();
    let mut reader = FrameReader::new();
    buf.body_mut()[..message_len].fill(0x5a);
    // Frames must be opened in nonce order, so each batch seals fresh ones (untimed).
    const BATCH: u64 = 32;
    let flen = frame_len(message_len);
    let mut frames = vec![0u8; flen * BATCH as usize];
    run("read", message_len, budget_ns, BATCH, reference, || {
        for slot in frames.chunks_mut(flen) {
            slot.copy_from_slice(buf.seal(&mut tx, message_len).expect("seal"));
        }
        let before = snapshot();
        let start = clock.now_ns();
        for slot in frames.chunks(flen) {
            let (_, message) = reader.read(&mut rx, slot).expect("open");
            black_box(message.map(|m| m.len()));
        }
        let ns = clock.now_ns() - start;
        (ns, snapshot().since(&before))
    })
}

/// Seal a message, then read it back through the frame reader: the whole per-message
/// cost of one hop.
pub fn write_read(clock: &impl Clock, message_len: usize, budget_ns: f64) -> Measurement {
    let (mut tx, mut rx) = pair();
    let mut buf = FrameBuffer::new();
    let mut reader = FrameReader::new();
    buf.body_mut()[..message_len].fill(0x5a);
    const BATCH: u64 = 16;
    run("write+read", message_len, budget_ns, BATCH, None, || {
        let before = snapshot();
        let start = clock.now_ns();
        for _ in 0..BATCH {
            let frame = buf.seal(&mut tx, message_len).expect("seal");
            let (_, message) = reader.read(&mut rx, frame).expect("open");
            black_box(message.map(|m| m.len()));
        }
        let ns = clock.now_ns() - start;
        (ns, snapshot().since(&before))
    })
}

/// A whole handshake, both sides (what a gateway pays per connection).
pub fn handshake(clock: &impl Clock, budget_ns: f64) -> Measurement {
    const BATCH: u64 = 4;
    run("handshake (both sides)", 0, budget_ns, BATCH, None, || {
        let before = snapshot();
        let start = clock.now_ns();
        for _ in 0..BATCH {
            black_box(pair());
        }
        let ns = clock.now_ns() - start;
        (ns, snapshot().since(&before))
    })
}

/// lnd brontide on this machine kind: `BenchmarkWriteMessage`, 65,535 bytes.
pub const LND_WRITE: &str = "32 us/op, ~2 GB/s, 0 allocs";
/// lnd brontide on this machine kind: `BenchmarkReadHeaderAndBody`, 60,000 bytes.
pub const LND_READ: &str = "33 us/op, 3 allocs/op";

/// The whole suite, each benchmark running for about `budget_ns`.
pub fn suite(clock: &impl Clock, budget_ns: f64) -> Vec<Measurement> {
    vec![
        write(clock, 65535, budget_ns, Some(LND_WRITE)),
        read(clock, 60000, budget_ns, Some(LND_READ)),
        write_read(clock, 65535, budget_ns),
        write_read(clock, 100, budget_ns),
        write(clock, 100, budget_ns, None),
        read(clock, 100, budget_ns, None),
        handshake(clock, budget_ns),
    ]
}

/// The results as a Markdown table.
pub fn table(rows: &[Measurement]) -> String {
    let mut out = String::from(
        "| benchmark | bytes | ops | ns/op | MB/s | allocs/op | B/op | lnd brontide |\n\
         |---|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for r in rows {
        let mbs = if r.message_len == 0 {
            "-".to_string()
        } else {
            format!("{:.0}", r.mb_per_s())
        };
        out.push_str(&format!(
            "| {} | {} | {} | {:.0} | {} | {} | {} | {} |\n",
            r.name,
            r.message_len,
            r.iterations,
            r.ns_per_op(),
            mbs,
            trim(r.allocs_per_op()),
            trim(r.bytes_per_op()),
            r.reference.unwrap_or("")
        ));
    }
    out
}

fn trim(x: f64) -> String {
    if x == x.trunc() {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}
