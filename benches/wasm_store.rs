//! The header store in headless Chromium: the 925,000-header generated regtest chain
//! validated with `Chain` and written to `IdbStore` in sync-sized commits, at several index
//! shard widths and commit sizes. `bash scripts/bench-wasm.sh wasm_store`.
//!
//! The chain is generated once (untimed) into a JS `Uint8Array` outside wasm memory, as
//! headers arriving from the network would be; each run copies 2,000 headers at a time
//! into wasm, decodes and validates them, gathers them with `Pending`, and commits every
//! `batch` headers (`relaxed`, the last one `strict`). "Sequential" waits for each commit
//! before validating more; "overlapped" validates the next batch while the commit is in
//! flight (what the sync engine does). Then the store is closed, reopened, and random
//! stored hashes are looked up: one pass right after the reopen (cold), one more (warm).
//!
//! Compile-time knobs (read by `option_env!`): `LIGHTWIRE_STORE_HEADERS` (chain length,
//! default 925000) and `LIGHTWIRE_STORE_ONLY` (comma-separated run ids such as `8-50000`
//! or `8-50000-o`, default all). A run id ending in `-f` stores a filter header per header
//! too (32 made-up bytes each, generated with the chain and copied in the same way): the
//! floor of a sync with filter headers. The run id `migrate` (in the default set) times
//! the one-time migration of a layout-4 store of the whole chain to this layout.
#![cfg(target_arch = "wasm32")]

use futures_util::future::join;
use js_sys::{Promise, Reflect, Uint8Array};
use lightwire_benches::{Clock, PerformanceNow};
use lightwire_chain::generate::next_header;
use lightwire_chain::{BlockHash, Chain, HEADER_LEN, Header, Outcome, REGTEST, hash_header_bytes};
use lightwire_primitives::FilterHeader;
use lightwire_store::{Durability, HeaderStore, IdbOptions, IdbStore, Pending, StoreError, Tip};
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

#[cfg(feature = "count-alloc")]
#[global_allocator]
static ALLOC: lightwire_alloc::CountingAllocator = lightwire_alloc::CountingAllocator::system();

/// A clock after every generated header (they end in 2019).
const NOW: u64 = 2_000_000_000;
/// Headers per validation call, about what one 65,535-byte message carries.
const PIECE: u32 = 2_000;
const LOOKUPS: usize = 1_000;
/// A lookup pass stops early after this long (an unsharded index reads megabytes each).
const PASS_BUDGET_MS: f64 = 8_000.0;
/// Pause before a storage estimate, which lags behind writes and deletions.
const SETTLE_MS: i32 = 1_000;

fn total_headers() -> u32 {
    option_env!("LIGHTWIRE_STORE_HEADERS")
        .and_then(|s| s.parse().ok())
        .unwrap_or(925_000)
}

fn log(s: &str) {
    web_sys::console::log_1(&s.into());
}

fn wasm_memory_mib() -> f64 {
    (core::arch::wasm32::memory_size(0) * 65_536) as f64 / 1_048_576.0
}

fn allocations() -> u64 {
    lightwire_alloc::snapshot().allocations
}

#[derive(Clone, Copy)]
struct Config {
    bits: u8,
    batch: u32,
    overlap: bool,
    /// Stop after this many headers (and scale the times up) when a layout is slow.
    cap: Option<u32>,
    /// Store a filter header per header too.
    filters: bool,
}

impl Config {
    fn id(&self) -> String {
        let o = if self.overlap { "-o" } else { "" };
        let f = if self.filters { "-f" } else { "" };
        format!("{}-{}{o}{f}", self.bits, self.batch)
    }
}

fn configs() -> Vec<Config> {
    let c = |bits, batch, overlap, cap| Config {
        bits,
        batch,
        overlap,
        cap,
        filters: false,
    };
    let all = vec![
        c(0, 10_000, false, None),
        c(0, 50_000, false, None),
        c(8, 10_000, false, None),
        c(8, 50_000, false, None),
        c(8, 100_000, false, None),
        c(16, 10_000, false, Some(100_000)),
        c(16, 50_000, false, Some(200_000)),
        c(8, 10_000, true, None),
        c(0, 50_000, true, None),
        c(4, 50_000, true, None),
        c(8, 50_000, true, None),
        c(8, 100_000, true, None),
        Config {
            filters: true,
            ..c(8, 50_000, true, None)
        },
    ];
    all.into_iter().filter(|c| wanted(&c.id())).collect()
}

/// Whether run `id` is asked for (`LIGHTWIRE_STORE_ONLY`; unset or empty: every run).
fn wanted(id: &str) -> bool {
    match option_env!("LIGHTWIRE_STORE_ONLY") {
        Some(only) if !only.is_empty() => only.split(',').any(|w| w.trim() == id),
        _ => true,
    }
}

/// Heights 1..=count of the generated chain, 80 bytes each, in JS memory.
fn generate(count: u32) -> Uint8Array {
    let all = Uint8Array::new_with_length(count * HEADER_LEN as u32);
    let mut buf = Vec::with_capacity(PIECE as usize * HEADER_LEN);
    let (mut prev, mut prev_hash) = (REGTEST.genesis, REGTEST.genesis.block_hash());
    let mut height = 0;
    while height < count {
        buf.clear();
        let first = height;
        while height < count && height - first < PIECE {
            height += 1;
            let h = next_header(&REGTEST, &prev, prev_hash, height, 0);
            prev_hash = h.block_hash();
            prev = h;
            buf.extend_from_slice(&h.encode());
        }
        all.set(&Uint8Array::from(&buf[..]), first * HEADER_LEN as u32);
    }
    all
}

/// Filter headers of heights 0..=count, 32 made-up bytes each (the store does not check
/// them: the engine does), in JS memory.
fn generate_filter_headers(count: u32) -> Uint8Array {
    let all = Uint8Array::new_with_length((count + 1) * 32);
    let mut buf = Vec::with_capacity(PIECE as usize * 32);
    let mut state = 0x6669_6c74_6572;
    let mut height = 0;
    while height <= count {
        buf.clear();
        let first = height;
        while height <= count && height - first < PIECE {
            for _ in 0..4 {
                buf.extend_from_slice(&splitmix64(&mut state).to_le_bytes());
            }
            height += 1;
        }
        all.set(&Uint8Array::from(&buf[..]), first * 32);
    }
    all
}

/// Validation state of one run: the chain, what is gathered for the next commit, and where
/// it is in the source.
struct Sync<'a> {
    source: &'a Uint8Array,
    /// Filter headers to store beside the headers, when the run stores them.
    filter_source: Option<&'a Uint8Array>,
    filter_bytes: Vec<u8>,
    filter_headers: Vec<FilterHeader>,
    end: u32,
    next: u32,
    chain: Chain,
    bytes: Vec<u8>,
    headers: Vec<Header>,
    clock: &'a PerformanceNow,
    validate_ns: f64,
}

impl<'a> Sync<'a> {
    /// From genesis to height `end` of `source`.
    fn new(source: &'a Uint8Array, end: u32, clock: &'a PerformanceNow) -> Sync<'a> {
        Sync {
            source,
            filter_source: None,
            filter_bytes: Vec::with_capacity((PIECE as usize + 1) * 32),
            filter_headers: Vec::with_capacity(PIECE as usize + 1),
            end,
            next: 1,
            chain: Chain::new(&REGTEST),
            bytes: Vec::with_capacity(PIECE as usize * HEADER_LEN),
            headers: Vec::with_capacity(PIECE as usize),
            clock,
            validate_ns: 0.0,
        }
    }

    /// Validate pieces into `pending` until it holds `batch` entries or the source ends.
    fn fill(&mut self, pending: &mut Pending, batch: u32) {
        while (pending.len() as u32) < batch && self.next <= self.end {
            let t0 = self.clock.now_ns();
            let to = (self.next + PIECE - 1).min(self.end);
            let (a, b) = ((self.next - 1) * HEADER_LEN as u32, to * HEADER_LEN as u32);
            self.bytes.resize((b - a) as usize, 0);
            self.source.subarray(a, b).copy_to(&mut self.bytes);
            self.headers.clear();
            self.headers.extend(
                self.bytes
                    .chunks_exact(HEADER_LEN)
                    .filter_map(Header::from_slice),
            );
            let outcome = self.chain.connect(&self.headers, NOW);
            assert!(
                matches!(outcome, Ok(Outcome::Extended { .. })),
                "generated chain is valid: {outcome:?}"
            );
            pending.push(&outcome.unwrap(), self.chain.staged());
            if let Some(f) = self.filter_source {
                // The first piece brings genesis's filter header too.
                let from = if self.next == 1 { 0 } else { self.next };
                self.filter_bytes.resize(((to + 1 - from) * 32) as usize, 0);
                f.subarray(from * 32, (to + 1) * 32)
                    .copy_to(&mut self.filter_bytes);
                self.filter_headers.clear();
                self.filter_headers.extend(
                    self.filter_bytes
                        .chunks_exact(32)
                        .filter_map(|c| <[u8; 32]>::try_from(c).ok().map(FilterHeader)),
                );
                pending.push_filters(from, &self.filter_headers);
            }
            self.next = to + 1;
            self.validate_ns += self.clock.now_ns() - t0;
        }
    }
}

/// Validation without storage: the same pieces, nothing gathered. Returns seconds.
fn validate_only(source: &Uint8Array, end: u32, clock: &PerformanceNow) -> f64 {
    let mut sync = Sync::new(source, end, clock);
    let mut pending = Pending::new(0);
    while sync.next <= sync.end {
        sync.fill(&mut pending, 1);
        pending.committed(&Tip::from(sync.chain.tip()));
    }
    sync.validate_ns / 1e9
}

struct Row {
    config: Config,
    written: u32,
    wall_s: f64,
    validate_s: f64,
    commit_s: f64,
    commits: u64,
    allocs_per_commit: f64,
    usage_mb: f64,
    wasm_mib: f64,
    lookups: usize,
    cold: (f64, f64),
    warm: (f64, f64),
    by_height: (f64, f64),
}

async fn sleep(ms: i32) {
    let promise = Promise::new(&mut |resolve, _| {
        let _ = web_sys::window()
            .expect("window")
            .set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
    });
    let _ = JsFuture::from(promise).await;
}

async fn storage_usage_mb() -> f64 {
    let navigator = web_sys::window().expect("window").navigator();
    let Ok(promise) = navigator.storage().estimate() else {
        return f64::NAN;
    };
    let Ok(estimate) = JsFuture::from(promise).await else {
        return f64::NAN;
    };
    Reflect::get(&estimate, &"usage".into())
        .ok()
        .and_then(|u| u.as_f64())
        .map_or(f64::NAN, |u| u / 1e6)
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

async fn run(
    source: &Uint8Array,
    filter_source: &Uint8Array,
    config: Config,
    clock: &PerformanceNow,
) -> Result<Row, StoreError> {
    let name = format!("lightwire-bench-store-{}", config.id());
    IdbStore::delete(&name).await?;
    let options = IdbOptions {
        prefix_bits: config.bits,
        ..IdbOptions::default()
    };
    let mut store = IdbStore::open_with(&name, &REGTEST, options).await?;
    let end = config
        .cap
        .map_or(total_headers(), |c| c.min(total_headers()));
    let mut sync = Sync::new(source, end, clock);
    if config.filters {
        sync.filter_source = Some(filter_source);
    }
    let mut gathering = Pending::new(0);
    let mut inflight = Pending::new(0);
    let allocs0 = allocations();
    let t0 = clock.now_ns();
    sync.fill(&mut gathering, config.batch);
    while !gathering.is_empty() {
        core::mem::swap(&mut gathering, &mut inflight);
        gathering.committed(&Tip::from(sync.chain.tip()));
        let durability = if sync.next > sync.end {
            Durability::Strict
        } else {
            Durability::Relaxed
        };
        let tip = if config.overlap {
            let commit = store.commit(inflight.batch(durability));
            let validate = async { sync.fill(&mut gathering, config.batch) };
            join(commit, validate).await.0?
        } else {
            let tip = store.commit(inflight.batch(durability)).await?;
            sync.fill(&mut gathering, config.batch);
            tip
        };
        inflight.committed(&tip);
    }
    let wall_ns = clock.now_ns() - t0;
    let stats = store.stats();
    let allocs = allocations() - allocs0;
    assert_eq!(store.tip().await?.height, end);
    store.close();
    sleep(SETTLE_MS).await;
    let usage_mb = storage_usage_mb().await;

    // Lookups after a reopen: random stored hashes, then random heights.
    let store = IdbStore::open(&name, &REGTEST).await?;
    let mut state = 0x6c6f_6f6b_7570 ^ u64::from(config.bits) ^ u64::from(config.batch);
    let heights: Vec<u32> = (0..LOOKUPS)
        .map(|_| 1 + (splitmix64(&mut state) % u64::from(end)) as u32)
        .collect();
    let hash_at = |h: u32| -> BlockHash {
        let mut b = [0u8; HEADER_LEN];
        let at = (h - 1) * HEADER_LEN as u32;
        source.subarray(at, at + HEADER_LEN as u32).copy_to(&mut b);
        hash_header_bytes(&b)
    };
    let mut n = LOOKUPS;
    let mut passes = Vec::new();
    for pass in 0..2 {
        let mut times = Vec::with_capacity(n);
        let start = clock.now_ns();
        for (i, &h) in heights[..n].iter().enumerate() {
            let hash = hash_at(h);
            let t = clock.now_ns();
            let found = store.height_of(&hash).await?;
            times.push((clock.now_ns() - t) / 1e6);
            assert_eq!(found, Some(h), "lookup of height {h}");
            if pass == 0 && (clock.now_ns() - start) / 1e6 > PASS_BUDGET_MS {
                n = i + 1;
                break;
            }
        }
        times.sort_by(f64::total_cmp);
        passes.push((percentile(&times, 0.5), percentile(&times, 0.99)));
    }
    let mut times = Vec::with_capacity(n);
    for &h in &heights[..n] {
        let t = clock.now_ns();
        let header = store.header(h).await?;
        times.push((clock.now_ns() - t) / 1e6);
        assert_eq!(header.map(|x| x.block_hash()), Some(hash_at(h)));
    }
    times.sort_by(f64::total_cmp);
    store.close();
    IdbStore::delete(&name).await?;

    Ok(Row {
        config,
        written: end,
        wall_s: wall_ns / 1e9,
        validate_s: sync.validate_ns / 1e9,
        commit_s: stats.commit_ms / 1e3,
        commits: stats.commits,
        allocs_per_commit: allocs as f64 / stats.commits.max(1) as f64,
        usage_mb,
        wasm_mib: wasm_memory_mib(),
        lookups: n,
        cold: passes[0],
        warm: passes[1],
        by_height: (percentile(&times, 0.5), percentile(&times, 0.99)),
    })
}

const HEADER: &str = "| prefix bits | batch | mode | headers | both (s) | headers/s | validate (s) | in commits (s) | commits | allocs/commit | usage MB | wasm MiB | lookups | hash cold p50 / p99 (ms) | hash warm p50 / p99 (ms) | height p50 / p99 (ms) |\n|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|";

fn format_row(r: &Row) -> String {
    let total = total_headers();
    let scale = f64::from(total) / f64::from(r.written);
    let mark = if r.written < total { "*" } else { "" };
    let mode = match (r.config.overlap, r.config.filters) {
        (true, true) => "overlapped, with filter headers",
        (true, false) => "overlapped",
        (false, _) => "sequential",
    };
    format!(
        "| {} | {} | {mode} | {}{mark} | {:.2}{mark} | {:.0} | {:.2}{mark} | {:.2}{mark} | {} | {:.1} | {:.1} | {:.1} | {} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} / {:.2} |",
        r.config.bits,
        r.config.batch,
        r.written,
        r.wall_s * scale,
        f64::from(r.written) / r.wall_s,
        r.validate_s * scale,
        r.commit_s * scale,
        r.commits,
        r.allocs_per_commit,
        r.usage_mb,
        r.wasm_mib,
        r.lookups,
        r.cold.0,
        r.cold.1,
        r.warm.0,
        r.warm.1,
        r.by_height.0,
        r.by_height.1,
    )
}

#[wasm_bindgen_test]
async fn store_benchmark() {
    let clock = PerformanceNow::new();
    let total = total_headers();
    let t = clock.now_ns();
    let source = generate(total);
    let filter_source = generate_filter_headers(total);
    log(&format!(
        "generated {total} headers in {:.1} s (untimed below)",
        (clock.now_ns() - t) / 1e9
    ));
    let validate_s = validate_only(&source, total, &clock);
    log(&format!(
        "validation alone (copy from JS, decode, Chain::connect): {validate_s:.2} s, {:.0} headers/s",
        f64::from(total) / validate_s
    ));
    let mut rows = Vec::new();
    log(&format!(
        "lightwire header store, {total} headers\n{HEADER}"
    ));
    for config in configs() {
        let t = clock.now_ns();
        match run(&source, &filter_source, config, &clock).await {
            Ok(row) => {
                let line = format_row(&row);
                log(&format!("{line}   [{:.0} s]", (clock.now_ns() - t) / 1e9));
                rows.push(line);
            }
            Err(e) => {
                let line = format!("{}: failed: {e}", config.id());
                log(&line);
                rows.push(line);
            }
        }
    }
    log(&format!(
        "lightwire header store (wasm32, headless Chromium, {total} headers)\n{HEADER}\n{}",
        rows.join("\n")
    ));
}

/// A store of the whole chain as layout 4 left it (a retarget period per chunk record; its
/// headers, meta and filter records, no index: the migration reads none), opened by this
/// build: the open that splits its chunks, once, then a second open. The headers read back
/// (untimed) must be the chain's.
#[wasm_bindgen_test]
async fn migration_benchmark() {
    if !wanted("migrate") {
        return;
    }
    let clock = PerformanceNow::new();
    let total = total_headers();
    let source = generate(total);
    let name = "lightwire-bench-store-migrate";
    IdbStore::delete(name).await.expect("delete");
    let tip = write_layout_4(name, &source, total)
        .await
        .expect("layout-4 store");
    let usage = storage_usage_mb().await;
    let t = clock.now_ns();
    let store = IdbStore::open(name, &REGTEST).await.expect("migrates");
    let migrate_s = (clock.now_ns() - t) / 1e9;
    assert_eq!(store.tip().await.unwrap(), tip);
    store.close();
    let t = clock.now_ns();
    let store = IdbStore::open(name, &REGTEST).await.expect("reopens");
    let reopen_s = (clock.now_ns() - t) / 1e9;
    let mut got = Vec::new();
    let mut want = vec![0u8; PIECE as usize * HEADER_LEN];
    let mut from = 1;
    while from <= total {
        let to = (from + PIECE - 1).min(total);
        got.clear();
        store.headers(from, to, &mut got).await.expect("reads back");
        let want = &mut want[..(to - from + 1) as usize * HEADER_LEN];
        source
            .subarray((from - 1) * HEADER_LEN as u32, to * HEADER_LEN as u32)
            .copy_to(want);
        let same = got
            .iter()
            .zip(want.chunks_exact(HEADER_LEN))
            .all(|(h, w)| h.encode()[..] == *w);
        assert!(
            same && got.len() == want.len() / HEADER_LEN,
            "{from}..={to}"
        );
        from = to + 1;
    }
    store.close();
    IdbStore::delete(name).await.expect("delete");
    log(&format!(
        "migration of a layout-4 store of {total} headers ({usage:.0} MB stored): {migrate_s:.2} s; reopened after: {reopen_s:.3} s"
    ));
}

/// Write `name` as layout 4 held the chain `source` (heights 1..=total after genesis):
/// version 4, its object stores, a chunk record per period, and the meta record. Returns
/// the tip.
async fn write_layout_4(
    name: &str,
    source: &Uint8Array,
    total: u32,
) -> Result<Tip, wasm_bindgen::JsValue> {
    use lightwire_store::idb::{request_future, transaction_future};
    use lightwire_store::layout::{Meta, encode_chunk, genesis_work};
    use wasm_bindgen::{JsCast, JsValue, closure::Closure};
    use web_sys::{IdbDatabase, IdbOpenDbRequest, IdbTransactionMode};

    const PERIOD: u32 = 2016;
    let factory = web_sys::window()
        .ok_or("no window")?
        .indexed_db()?
        .ok_or("no indexedDB")?;
    let req: IdbOpenDbRequest = factory.open_with_u32(name, 4)?;
    let r = req.clone();
    let on_upgrade = Closure::once(move || -> Result<(), JsValue> {
        let db: IdbDatabase = r.result()?.unchecked_into();
        for store in ["chunks", "index", "commits", "meta", "filters", "records"] {
            db.create_object_store(store)?;
        }
        Ok(())
    });
    req.set_onupgradeneeded(Some(on_upgrade.as_ref().unchecked_ref()));
    request_future(&req).await?;
    req.set_onupgradeneeded(None);
    let db: IdbDatabase = req.result()?.unchecked_into();

    let per_header = genesis_work(&REGTEST);
    let mut work = per_header;
    let (mut held, mut hashes, mut record) = (Vec::new(), Vec::new(), Vec::new());
    let mut tip_hash = REGTEST.genesis.block_hash();
    let mut header = [0u8; HEADER_LEN];
    let last = total / PERIOD;
    let mut k = 0;
    while k <= last {
        let tx = db.transaction_with_str_and_mode("chunks", IdbTransactionMode::Readwrite)?;
        let chunks = tx.object_store("chunks")?;
        for k in k..=(k + 31).min(last) {
            held.clear();
            hashes.clear();
            held.extend_from_slice(&work.0.to_be_bytes());
            let first = k * PERIOD;
            for height in first..=(first + PERIOD - 1).min(total) {
                if height == 0 {
                    header = REGTEST.genesis.encode();
                } else {
                    let at = (height - 1) * HEADER_LEN as u32;
                    source
                        .subarray(at, at + HEADER_LEN as u32)
                        .copy_to(&mut header);
                    work = work.add(&per_header);
                }
                held.extend_from_slice(&header);
                tip_hash = hash_header_bytes(&header);
                hashes.push(tip_hash);
            }
            encode_chunk(&held, first, |i| hashes[i], &mut record)
                .map_err(|e| JsValue::from_str(&e.to_string()))?;
            chunks.put_with_key(&Uint8Array::from(&record[..]), &k.into())?;
        }
        transaction_future(&tx).await?;
        k += 32;
    }
    let tip = Tip {
        height: total,
        hash: tip_hash,
        chainwork: work,
    };
    let meta = Meta {
        schema: 4,
        tip,
        ..Meta::genesis(&REGTEST, 8)
    };
    let tx = db.transaction_with_str_and_mode("meta", IdbTransactionMode::Readwrite)?;
    tx.object_store("meta")?
        .put_with_key(&Uint8Array::from(&meta.encode()[..]), &"meta".into())?;
    transaction_future(&tx).await?;
    db.close();
    Ok(tip)
}
