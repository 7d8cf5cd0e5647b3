//! Header validation throughput: the 925,000-header generated regtest chain through
//! `Chain::connect` in sync-sized batches, without storage. Shared by the native runner
//! (`validate.rs`) and the in-browser one (`wasm_validate.rs`).

use lightwire_alloc::snapshot;
use lightwire_chain::generate::next_header;
use lightwire_chain::{Chain, Header, MAX_BATCH, Outcome, REGTEST};

use crate::Clock;

/// A clock after every generated header (they end in 2019).
const NOW: u64 = 2_000_000_000;

/// What validating a whole chain cost.
#[derive(Debug, Clone)]
pub struct ValidationRun {
    /// Headers validated.
    pub headers: u32,
    /// Headers per batch.
    pub batch: usize,
    /// Time spent in `Chain::connect` only (generation excluded).
    pub validate_ns: f64,
    /// Time spent generating the headers (mining at regtest's limit).
    pub generate_ns: f64,
    /// Allocations inside `Chain::connect`, after the first batch.
    pub allocations: u64,
}

impl ValidationRun {
    /// Headers validated per second.
    pub fn headers_per_s(&self) -> f64 {
        f64::from(self.headers) / (self.validate_ns / 1e9)
    }
}

/// Generate `count` headers batch by batch (untimed) and validate each batch (timed).
pub fn validate_generated(clock: &impl Clock, count: u32, batch: usize) -> ValidationRun {
    let batch = batch.min(MAX_BATCH);
    let mut chain = Chain::new(&REGTEST);
    let mut buf: Vec<Header> = Vec::with_capacity(batch);
    let (mut prev, mut prev_hash) = (REGTEST.genesis, REGTEST.genesis.block_hash());
    let mut run = ValidationRun {
        headers: 0,
        batch,
        validate_ns: 0.0,
        generate_ns: 0.0,
        allocations: 0,
    };
    let mut height = 0u32;
    while height < count {
        buf.clear();
        let start = clock.now_ns();
        while buf.len() < batch && height < count {
            height += 1;
            let h = next_header(&REGTEST, &prev, prev_hash, height, 0);
            prev_hash = h.block_hash();
            prev = h;
            buf.push(h);
        }
        run.generate_ns += clock.now_ns() - start;
        let before = snapshot();
        let start = clock.now_ns();
        let outcome = chain.connect(&buf, NOW);
        run.validate_ns += clock.now_ns() - start;
        if run.headers > 0 {
            run.allocations += snapshot().since(&before).allocations;
        }
        assert!(
            matches!(outcome, Ok(Outcome::Extended { .. })),
            "generated chain is valid: {outcome:?}"
        );
        run.headers += buf.len() as u32;
    }
    assert_eq!(chain.tip().height, count);
    run
}

/// The results as a Markdown table.
pub fn table(runs: &[ValidationRun]) -> String {
    let mut out = String::from(
        "| headers | batch | validate (s) | headers/s | allocs after first batch | generate (s) |\n\
         |---:|---:|---:|---:|---:|---:|\n",
    );
    for r in runs {
        out.push_str(&format!(
            "| {} | {} | {:.2} | {:.0} | {} | {:.2} |\n",
            r.headers,
            r.batch,
            r.validate_ns / 1e9,
            r.headers_per_s(),
            r.allocations,
            r.generate_ns / 1e9
        ));
    }
    out
}
