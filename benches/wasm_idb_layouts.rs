//! IndexedDB layouts for the header store, measured in headless Chromium as wasm.
//! Exploratory: this decides the layout of the real backend, which is written later.
//!
//! Run it with the console shown:
//! `CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner WASM_BINDGEN_TEST_TIMEOUT=1500
//! cargo test -p lightwire-benches --release --target wasm32-unknown-unknown --test wasm_idb_layouts -- --nocapture`
//!
//! Every layout writes the same synthetic chain (925,000 heights; splitmix64 hashes and
//! headers, regenerated per batch so the benchmark itself holds no chain in memory) in
//! sync-sized batches, one `relaxed` readwrite transaction per batch holding the chunk
//! records, the index records and a meta (tip) record. It then closes and reopens the
//! database and looks up random stored hashes, one readonly transaction and one read each.
//!
//! - Chunks: 2016 headers (161,280 bytes) per record, keyed by chunk number; the partly
//!   filled last chunk stays in memory and is rewritten by each batch, never read back.
//! - Index A (append-only): per batch and prefix one record of that batch's (hash, height)
//!   pairs, key `[prefix, first height of the batch]`; a lookup is one `getAll` over the
//!   prefix's key range.
//! - Index B (read-modify-write): one record per prefix holding all its pairs, read and
//!   rewritten (`get` then `put`, same transaction) by every batch that touches it; a lookup
//!   is one `get`.
//!
//! An index entry is the full 32-byte hash and a little-endian u32 height (36 bytes).
//!
//! Compile-time knobs (environment variables read by `option_env!`):
//! `LIGHTWIRE_IDB_HEADERS` (chain length, default 925000) and `LIGHTWIRE_IDB_ONLY`
//! (comma-separated layout ids such as `A8-10000`, default all).
#![cfg(target_arch = "wasm32")]

use js_sys::{Array, Object, Promise, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};
use web_sys::{
    IdbDatabase, IdbFactory, IdbKeyRange, IdbObjectStore, IdbOpenDbRequest, IdbRequest,
    IdbTransactionMode,
};

wasm_bindgen_test_configure!(run_in_browser);

#[cfg(feature = "count-alloc")]
#[global_allocator]
static ALLOC: lightwire_alloc::CountingAllocator = lightwire_alloc::CountingAllocator::system();

/// `db.transaction(stores, mode, { durability })`, bound by the store crate.
use lightwire_store::idb::{DbWithOptions, request_future, transaction_future};

type Res<T> = Result<T, JsValue>;

const CHUNK_HEADERS: u32 = 2016;
const HEADER_LEN: usize = 80;
const ENTRY_LEN: usize = 36;
const LOOKUPS: usize = 1000;
/// A lookup pass stops early after this long (wide `getAll`s read megabytes per lookup).
const PASS_BUDGET_MS: f64 = 8_000.0;
/// Pause before each storage estimate (after deleting the previous database, and after
/// closing the written one).
const SETTLE_MS: i32 = 1_000;

fn total_headers() -> u32 {
    option_env!("LIGHTWIRE_IDB_HEADERS")
        .and_then(|s| s.parse().ok())
        .unwrap_or(925_000)
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The synthetic block hash at `height`.
fn hash_at(height: u32) -> [u8; 32] {
    let mut state = 0x6c77_6861_7368_0000 ^ (u64::from(height) << 8);
    let mut out = [0u8; 32];
    for word in out.chunks_exact_mut(8) {
        word.copy_from_slice(&splitmix64(&mut state).to_le_bytes());
    }
    out
}

/// The synthetic 80-byte header at `height`.
fn header_at(height: u32, out: &mut [u8]) {
    let mut state = 0x6c77_6864_7200_0000 ^ (u64::from(height) << 8);
    for word in out[..HEADER_LEN].chunks_exact_mut(8) {
        word.copy_from_slice(&splitmix64(&mut state).to_le_bytes());
    }
}

/// The first `width` bits of `hash`.
fn prefix(hash: &[u8], width: u32) -> u32 {
    if width == 0 {
        0
    } else {
        (u32::from(u16::from_be_bytes([hash[0], hash[1]]))) >> (16 - width)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Index {
    /// One record per (batch, prefix).
    Append,
    /// One record per prefix, read and rewritten by each batch.
    Rmw,
}

#[derive(Clone, Copy)]
struct Layout {
    index: Index,
    /// Prefix width in bits.
    width: u32,
    batch: u32,
    /// Stop writing after this many headers (and extrapolate) when the layout is slow.
    cap: Option<u32>,
    /// Append-only only: after the sync, merge each prefix's records into one.
    compact: bool,
}

impl Layout {
    fn id(&self) -> String {
        let kind = match self.index {
            Index::Append => "A",
            Index::Rmw => "B",
        };
        let compact = if self.compact { "c" } else { "" };
        format!("{kind}{}-{}{compact}", self.width, self.batch)
    }
}

fn layouts() -> Vec<Layout> {
    let a = |width, batch, cap| Layout {
        index: Index::Append,
        width,
        batch,
        cap,
        compact: false,
    };
    let b = |width, batch, cap| Layout {
        index: Index::Rmw,
        width,
        batch,
        cap,
        compact: false,
    };
    let all = vec![
        a(0, 10_000, None),
        a(0, 50_000, None),
        a(4, 10_000, None),
        a(4, 50_000, None),
        a(8, 10_000, None),
        a(8, 50_000, None),
        a(8, 2_000, None),
        Layout {
            compact: true,
            ..a(8, 50_000, None)
        },
        a(16, 10_000, Some(200_000)),
        a(16, 50_000, Some(200_000)),
        b(8, 10_000, None),
        b(8, 50_000, None),
        b(16, 10_000, Some(50_000)),
        b(16, 50_000, Some(100_000)),
    ];
    match option_env!("LIGHTWIRE_IDB_ONLY") {
        Some(only) if !only.is_empty() => {
            let wanted: Vec<&str> = only.split(',').map(str::trim).collect();
            all.into_iter()
                .filter(|l| wanted.contains(&l.id().as_str()))
                .collect()
        }
        _ => all,
    }
}

fn now_ms() -> f64 {
    web_sys::window()
        .and_then(|w| w.performance())
        .map_or(0.0, |p| p.now())
}

fn log(s: &str) {
    web_sys::console::log_1(&s.into());
}

/// Wasm linear memory in bytes (it only grows, so this is the peak so far in this run).
fn wasm_memory() -> usize {
    core::arch::wasm32::memory_size(0) * 65_536
}

/// Live heap bytes, from the counting allocator (0 without the `count-alloc` feature).
fn live_heap() -> u64 {
    if cfg!(feature = "count-alloc") {
        lightwire_alloc::snapshot().live_bytes()
    } else {
        0
    }
}

#[derive(Default)]
struct Peaks {
    wasm: usize,
    heap_base: u64,
    heap: u64,
}

impl Peaks {
    fn new() -> Self {
        Peaks {
            wasm: wasm_memory(),
            heap_base: live_heap(),
            heap: 0,
        }
    }
    fn sample(&mut self) {
        self.wasm = self.wasm.max(wasm_memory());
        self.heap = self.heap.max(live_heap().saturating_sub(self.heap_base));
    }
}

async fn request_result(req: &IdbRequest) -> Res<JsValue> {
    request_future(req).await?;
    req.result()
}

fn factory() -> Res<IdbFactory> {
    web_sys::window()
        .ok_or("no window")?
        .indexed_db()?
        .ok_or_else(|| "no indexedDB".into())
}

async fn open(name: &str) -> Res<IdbDatabase> {
    let req: IdbOpenDbRequest = factory()?.open_with_u32(name, 1)?;
    let upgrade_req = req.clone();
    let on_upgrade = Closure::once(move || -> Res<()> {
        let db: IdbDatabase = upgrade_req.result()?.unchecked_into();
        for store in ["chunks", "index", "meta"] {
            db.create_object_store(store)?;
        }
        Ok(())
    });
    req.set_onupgradeneeded(Some(on_upgrade.as_ref().unchecked_ref()));
    let db = request_result(&req).await?;
    req.set_onupgradeneeded(None);
    drop(on_upgrade);
    Ok(db.unchecked_into())
}

async fn delete(name: &str) -> Res<()> {
    let req = factory()?.delete_database(name)?;
    request_future(&req).await?;
    Ok(())
}

async fn storage_usage() -> Res<f64> {
    let navigator = web_sys::window().ok_or("no window")?.navigator();
    let estimate = JsFuture::from(navigator.storage().estimate()?).await?;
    Ok(Reflect::get(&estimate, &"usage".into())?
        .as_f64()
        .unwrap_or(0.0))
}

/// Lets the browser settle (file deletion, quota bookkeeping) before an estimate.
async fn sleep(ms: i32) -> Res<()> {
    let window = web_sys::window().ok_or("no window")?;
    let promise = Promise::new(&mut |resolve, _| {
        let _ = window.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
    });
    JsFuture::from(promise).await?;
    Ok(())
}

fn u8_array(bytes: &[u8]) -> Uint8Array {
    Uint8Array::from(bytes)
}

/// One batch's index entries, grouped by prefix: `entries[offsets[p]..offsets[p + 1]]`
/// (in entries) belong to prefix `p`.
struct Grouped {
    unsorted: Vec<u8>,
    entries: Vec<u8>,
    offsets: Vec<u32>,
}

impl Grouped {
    fn new(width: u32, batch: u32) -> Self {
        Grouped {
            unsorted: Vec::with_capacity(batch as usize * ENTRY_LEN),
            entries: Vec::with_capacity(batch as usize * ENTRY_LEN),
            offsets: vec![0; (1usize << width) + 1],
        }
    }

    fn fill(&mut self, width: u32, from: u32, to: u32) {
        self.unsorted.clear();
        self.offsets.iter_mut().for_each(|o| *o = 0);
        for h in from..to {
            let hash = hash_at(h);
            self.offsets[prefix(&hash, width) as usize + 1] += 1;
            self.unsorted.extend_from_slice(&hash);
            self.unsorted.extend_from_slice(&h.to_le_bytes());
        }
        for i in 1..self.offsets.len() {
            self.offsets[i] += self.offsets[i - 1];
        }
        let n = (to - from) as usize;
        self.entries.clear();
        self.entries.resize(n * ENTRY_LEN, 0);
        let mut next: Vec<u32> = self.offsets[..self.offsets.len() - 1].to_vec();
        for e in self.unsorted.chunks_exact(ENTRY_LEN) {
            let slot = &mut next[prefix(e, width) as usize];
            let at = *slot as usize * ENTRY_LEN;
            self.entries[at..at + ENTRY_LEN].copy_from_slice(e);
            *slot += 1;
        }
    }

    fn prefixes(&self) -> usize {
        self.offsets.len() - 1
    }

    fn of(&self, p: usize) -> &[u8] {
        let (a, b) = (self.offsets[p] as usize, self.offsets[p + 1] as usize);
        &self.entries[a * ENTRY_LEN..b * ENTRY_LEN]
    }
}

struct WriteStats {
    written: u32,
    ms: f64,
    commits: u32,
    records_put: u64,
    bytes_put: u64,
}

async fn write_all(db: &IdbDatabase, layout: &Layout, peaks: &mut Peaks) -> Res<WriteStats> {
    let total = total_headers();
    let written = layout.cap.map_or(total, |c| c.min(total));
    let stores = Array::of3(&"chunks".into(), &"index".into(), &"meta".into());
    let options = Object::new();
    Reflect::set(&options, &"durability".into(), &"relaxed".into())?;

    let mut chunk = Vec::with_capacity(CHUNK_HEADERS as usize * HEADER_LEN);
    let mut header = [0u8; HEADER_LEN];
    let mut grouped = Grouped::new(layout.width, layout.batch);
    let mut stats = WriteStats {
        written,
        ms: 0.0,
        commits: 0,
        records_put: 0,
        bytes_put: 0,
    };
    let t0 = now_ms();
    let mut from = 0;
    while from < written {
        let to = (from + layout.batch).min(written);
        let tx = db
            .unchecked_ref::<DbWithOptions>()
            .transaction_with_options(&stores, "readwrite", &options)?;
        if stats.commits == 0 {
            let durability = Reflect::get(&tx, &"durability".into())?;
            log(&format!(
                "{}: transaction durability = {:?}",
                layout.id(),
                durability.as_string()
            ));
        }
        let done = transaction_future(&tx);
        let chunks = tx.object_store("chunks")?;
        let index = tx.object_store("index")?;
        let meta = tx.object_store("meta")?;

        // Chunks: full chunks are written once; the partial last one is rewritten.
        let mut chunk_no = from / CHUNK_HEADERS;
        for h in from..to {
            header_at(h, &mut header);
            chunk.extend_from_slice(&header);
            if chunk.len() == CHUNK_HEADERS as usize * HEADER_LEN {
                chunks.put_with_key(&u8_array(&chunk), &chunk_no.into())?;
                stats.records_put += 1;
                stats.bytes_put += chunk.len() as u64;
                chunk.clear();
                chunk_no += 1;
            }
        }
        if !chunk.is_empty() {
            chunks.put_with_key(&u8_array(&chunk), &chunk_no.into())?;
            stats.records_put += 1;
            stats.bytes_put += chunk.len() as u64;
        }

        grouped.fill(layout.width, from, to);
        peaks.sample();
        match layout.index {
            Index::Append => {
                for p in 0..grouped.prefixes() {
                    let entries = grouped.of(p);
                    if entries.is_empty() {
                        continue;
                    }
                    let key = Array::of2(&(p as u32).into(), &from.into());
                    index.put_with_key(&u8_array(entries), &key)?;
                    stats.records_put += 1;
                    stats.bytes_put += entries.len() as u64;
                }
            }
            Index::Rmw => {
                let mut pending = Vec::new();
                for p in 0..grouped.prefixes() {
                    if grouped.of(p).is_empty() {
                        continue;
                    }
                    let req = index.get(&(p as u32).into())?;
                    let fut = request_future(&req);
                    pending.push((p, req, fut));
                }
                for (p, req, fut) in pending {
                    fut.await?;
                    let old = req.result()?;
                    let add = grouped.of(p);
                    let old_len = old.dyn_ref::<Uint8Array>().map_or(0, |a| a.length());
                    let value = Uint8Array::new_with_length(old_len + add.len() as u32);
                    if let Some(old) = old.dyn_ref::<Uint8Array>() {
                        value.set(old, 0);
                    }
                    value.subarray(old_len, value.length()).copy_from(add);
                    index.put_with_key(&value, &(p as u32).into())?;
                    stats.records_put += 1;
                    stats.bytes_put += u64::from(value.length());
                }
            }
        }

        let mut tip = [0u8; 68];
        tip[..4].copy_from_slice(&(to - 1).to_le_bytes());
        tip[4..36].copy_from_slice(&hash_at(to - 1));
        meta.put_with_key(&u8_array(&tip), &"tip".into())?;
        stats.records_put += 1;
        done.await?;
        stats.commits += 1;
        peaks.sample();
        from = to;
    }
    stats.ms = now_ms() - t0;
    Ok(stats)
}

/// Merges each prefix's per-batch records into one record keyed `[prefix, 0]`, in one
/// readwrite transaction (`strict`: the end of a sync). Returns the time taken.
async fn compact(db: &IdbDatabase, layout: &Layout) -> Res<f64> {
    let t0 = now_ms();
    let tx = db.transaction_with_str_and_mode("index", IdbTransactionMode::Readwrite)?;
    let done = transaction_future(&tx);
    let index = tx.object_store("index")?;
    let mut pending = Vec::new();
    for p in 0..(1u32 << layout.width) {
        let range = IdbKeyRange::bound_with_lower_open_and_upper_open(
            &Array::of1(&p.into()),
            &Array::of1(&(p + 1).into()),
            false,
            true,
        )?;
        let req = index.get_all_with_key(&range)?;
        let fut = request_future(&req);
        pending.push((p, range, req, fut));
    }
    for (p, range, req, fut) in pending {
        fut.await?;
        let parts: Array = req.result()?.unchecked_into();
        let parts: Vec<Uint8Array> = parts.iter().map(JsCast::unchecked_into).collect();
        let total: u32 = parts.iter().map(Uint8Array::length).sum();
        let merged = Uint8Array::new_with_length(total);
        let mut at = 0;
        for part in &parts {
            merged.set(part, at);
            at += part.length();
        }
        index.delete(&range)?;
        index.put_with_key(&merged, &Array::of2(&p.into(), &0.into()))?;
    }
    done.await?;
    Ok(now_ms() - t0)
}

struct LookupStats {
    n: usize,
    cold: (f64, f64),
    warm: (f64, f64),
    bytes: f64,
    records: f64,
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

/// One lookup: one readonly transaction, one read. Returns (height, bytes read, records).
async fn lookup(
    db: &IdbDatabase,
    layout: &Layout,
    hash: &[u8; 32],
    scratch: &mut Vec<u8>,
) -> Res<(Option<u32>, usize, usize)> {
    let tx = db.transaction_with_str_and_mode("index", IdbTransactionMode::Readonly)?;
    let index: IdbObjectStore = tx.object_store("index")?;
    let p = prefix(hash, layout.width);
    let records: Vec<Uint8Array> = match layout.index {
        Index::Append => {
            let range = IdbKeyRange::bound_with_lower_open_and_upper_open(
                &Array::of1(&p.into()),
                &Array::of1(&(p + 1).into()),
                false,
                true,
            )?;
            let all: Array = request_result(&index.get_all_with_key(&range)?)
                .await?
                .unchecked_into();
            all.iter().map(JsCast::unchecked_into).collect()
        }
        Index::Rmw => {
            let v = request_result(&index.get(&p.into())?).await?;
            v.dyn_into::<Uint8Array>().into_iter().collect()
        }
    };
    let mut bytes = 0;
    let mut found = None;
    for r in &records {
        let len = r.length() as usize;
        bytes += len;
        if found.is_some() {
            continue;
        }
        scratch.resize(len, 0);
        r.copy_to(&mut scratch[..len]);
        for e in scratch.chunks_exact(ENTRY_LEN) {
            if e[..32] == hash[..] {
                found = Some(u32::from_le_bytes([e[32], e[33], e[34], e[35]]));
                break;
            }
        }
    }
    Ok((found, bytes, records.len()))
}

async fn lookups(
    db: &IdbDatabase,
    layout: &Layout,
    written: u32,
    peaks: &mut Peaks,
) -> Res<LookupStats> {
    let mut state = 0x6c6f_6f6b_7570 ^ u64::from(layout.width) ^ u64::from(layout.batch);
    let heights: Vec<u32> = (0..LOOKUPS)
        .map(|_| (splitmix64(&mut state) % u64::from(written)) as u32)
        .collect();
    let mut scratch = Vec::new();
    let mut n = LOOKUPS;
    let mut bytes = 0usize;
    let mut records = 0usize;
    let mut passes = Vec::new();
    for pass in 0..2 {
        let mut times = Vec::with_capacity(n);
        let start = now_ms();
        for (i, &h) in heights[..n].iter().enumerate() {
            let hash = hash_at(h);
            let t0 = now_ms();
            let (found, b, r) = lookup(db, layout, &hash, &mut scratch).await?;
            times.push(now_ms() - t0);
            if found != Some(h) {
                return Err(
                    format!("{}: lookup of height {h} found {found:?}", layout.id()).into(),
                );
            }
            if pass == 0 {
                bytes += b;
                records += r;
            }
            peaks.sample();
            if pass == 0 && now_ms() - start > PASS_BUDGET_MS {
                n = i + 1;
                break;
            }
        }
        times.sort_by(f64::total_cmp);
        passes.push((percentile(&times, 0.5), percentile(&times, 0.99)));
    }
    Ok(LookupStats {
        n,
        cold: passes[0],
        warm: passes[1],
        bytes: bytes as f64 / n as f64,
        records: records as f64 / n as f64,
    })
}

async fn run(layout: &Layout) -> Res<String> {
    let name = format!("lightwire-idb-bench-{}", layout.id());
    delete(&name).await?;
    sleep(SETTLE_MS).await?;
    let usage_before = storage_usage().await?;
    let mut peaks = Peaks::new();
    let db = open(&name).await?;
    let w = write_all(&db, layout, &mut peaks).await?;
    db.close();
    sleep(SETTLE_MS).await?;
    let usage_written = storage_usage().await?;
    let mut db = open(&name).await?;
    let compact_ms = if layout.compact {
        let ms = compact(&db, layout).await?;
        db.close();
        db = open(&name).await?;
        Some(ms)
    } else {
        None
    };
    let l = lookups(&db, layout, w.written, &mut peaks).await?;
    db.close();
    delete(&name).await?;
    sleep(SETTLE_MS).await?;
    let usage_deleted = storage_usage().await?;
    // The estimate lags behind deletions now and then (the "before" figure is then not
    // back to zero), so the table shows the usage after writing and before it.
    log(&format!(
        "{}: usage estimate MB before {:.1}, written {:.1}, deleted {:.1}",
        layout.id(),
        usage_before / 1e6,
        usage_written / 1e6,
        usage_deleted / 1e6
    ));

    let total = total_headers();
    let capped = w.written < total;
    let scale = f64::from(total) / f64::from(w.written);
    let secs = w.ms / 1000.0 * scale;
    let mark = if capped { "*" } else { "" };
    let commits = total.div_ceil(layout.batch);
    let commits = if layout.compact {
        format!("{commits} + 1")
    } else {
        format!("{commits}{mark}")
    };
    let write = match compact_ms {
        Some(c) => format!("{secs:.2} + {:.2} compaction", c / 1000.0),
        None => format!("{secs:.2}{mark}"),
    };
    let (kind, width) = match (layout.index, layout.width) {
        (Index::Append, 0) => ("A append", "0 (none)".to_string()),
        (Index::Append, w) if layout.compact => ("A append, compacted", format!("{w} bits")),
        (Index::Append, w) => ("A append", format!("{w} bits")),
        (Index::Rmw, w) => ("B read-modify-write", format!("{w} bits")),
    };
    let written = if capped {
        format!("{}", w.written)
    } else {
        "all".to_string()
    };
    Ok(format!(
        "| {kind} | {width} | {} | {written} | {write} | {:.0}{mark} | {commits} | {} | {:.1} ({:.1}) | {:.1} | {:.1} | {} | {:.2} / {:.2} | {:.2} / {:.2} | {:.0} ({:.1}) |",
        layout.batch,
        f64::from(w.written) / (w.ms / 1000.0),
        w.records_put,
        usage_written / 1e6,
        usage_before / 1e6,
        peaks.wasm as f64 / 1_048_576.0,
        peaks.heap as f64 / 1_048_576.0,
        l.n,
        l.cold.0,
        l.cold.1,
        l.warm.0,
        l.warm.1,
        l.bytes,
        l.records,
    ))
}

const HEADER: &str = "| index | prefix width | batch | headers written | write 925k (s) | headers/s | commits | records put | usage MB after (before) | wasm memory MB | live heap MB | lookups | cold p50 / p99 (ms) | warm p50 / p99 (ms) | bytes read per lookup (records) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|";

#[wasm_bindgen_test]
async fn idb_layouts() {
    let mut rows = Vec::new();
    log(&format!(
        "lightwire IndexedDB layouts, {} headers\n{HEADER}",
        total_headers()
    ));
    for layout in layouts() {
        let t0 = now_ms();
        match run(&layout).await {
            Ok(row) => {
                log(&format!(
                    "{row}   [{} s]",
                    ((now_ms() - t0) / 1000.0).round()
                ));
                rows.push(row);
            }
            Err(e) => {
                let msg = format!("{}: failed: {e:?}", layout.id());
                log(&msg);
                rows.push(msg);
            }
        }
    }
    log(&format!(
        "lightwire IndexedDB layouts (wasm32, headless Chromium)\n{HEADER}\n{}",
        rows.join("\n")
    ));
}
