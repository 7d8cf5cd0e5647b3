//! The cross-check end to end: probes, conflicts, disputes and what follows them (filter
//! headers dropped and synced again, contested blocks, scans), driven as the shell drives
//! it: the engine, a memory store and in-memory gateways serving test chains, on a virtual
//! clock, over two sessions on one store.
//!
//! One gateway is honest: its chain's filter of block `u` also holds a script the block's
//! input spends (`SPENT`: the block cannot show it). The other lies as the input says: it
//! leaves that script out (a lie the block cannot prove), hides a payment (its filter of
//! block `p` without the coinbase output, which the block proves), withholds its filter of
//! `p` or the block, lags (its filter headers stop below the top), or tells no lie at all;
//! it is listed first or second. In the first session the liar is alone or beside the
//! honest gateway; in the second, the honest gateway is alone or beside the liar.
//!
//! Input layout: byte 0 picks `p`, byte 1 `u` (from fixed lists), byte 2 the lies (bit 0
//! the payment hidden, 1 the spent script left out, 2 its filter of `p` withheld, 3 the
//! block `p` withheld, 4 its filter headers lag to 2,000), byte 3 the sessions (bit 0 the
//! honest gateway in the first, 1 the liar in the second, 2 the liar listed first), byte 4
//! the engine's seed.
//!
//! Checks, for any input:
//! - the honest gateway is never rejected;
//! - each session settles: driving returns, and the virtual clock runs deadlines out;
//! - in the second session (the honest gateway present), a scan from the first block for
//!   the payment's script and the spent script finds both blocks: whatever the liar did
//!   in either session, nothing is missed.
#![no_main]

use core::time::Duration;

use libfuzzer_sys::fuzz_target;
use lightwire::engine::Event;
use lightwire::testnet::{Net, memory};
use lightwire_fuzz_support::Cursor;
use lightwire_primitives::Block;
use lightwire_proto::testing::TestChain;

const TOP: u32 = 2_500;
const PAID: [u32; 8] = [1, 999, 1_000, 1_001, 1_500, 2_001, 2_345, 2_500];
const SPENT_AT: [u32; 4] = [2, 1_234, 2_000, 2_499];
const SPENT: &[u8] = b"\x00\x14a script an input spends";

/// The coinbase output script of block `h` of `c`.
fn coinbase(c: &TestChain, h: u32) -> Vec<u8> {
    let block = c.block(h);
    let parsed = Block::parse(&block).expect("a generated block parses");
    lightwire_filter::known_items(&parsed)
        .next()
        .expect("a coinbase output")
        .to_vec()
}

/// `c` with the filter of `h` rebuilt from `items`.
fn rewrite(c: &mut TestChain, h: u32, items: &[&[u8]]) {
    let hash = c.header(h).block_hash();
    let mut f = Vec::new();
    lightwire_filter::build_filter(&hash.0, items.iter().copied(), &mut f);
    c.rewrite_filter(h, f);
}

fn small(e: &mut lightwire::engine::Engine) {
    e.syncer_mut().request_size = 2_000;
    e.syncer_mut().commit_every = 1_000;
}

/// Drive until nothing moves, then let every deadline fall due for a while.
fn settle<S: lightwire_store::HeaderStore>(net: &mut Net<S>) {
    net.drive();
    for _ in 0..12 {
        net.advance(Duration::from_secs(60));
    }
}

fn rejected(events: &[Event], g: usize) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Rejected { gateway, reason } if gateway.index() == g => {
                Some(reason.code().to_string())
            }
            _ => None,
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let mut input = Cursor::new(data);
    let p = PAID[usize::from(input.u8()) % PAID.len()];
    let u = SPENT_AT[usize::from(input.u8()) % SPENT_AT.len()];
    let lies = input.u8();
    let sessions = input.u8();
    let seed = u64::from(input.u8());
    let honest = || {
        let mut c = TestChain::generate(TOP);
        let cb = coinbase(&c, u);
        rewrite(&mut c, u, &[&cb, SPENT]);
        c
    };
    let liar = || {
        let mut c = TestChain::generate(TOP);
        let cb = coinbase(&c, u);
        if lies & 2 == 0 {
            rewrite(&mut c, u, &[&cb, SPENT]);
        }
        if lies & 1 != 0 {
            rewrite(&mut c, p, &[b"not the coinbase"]);
        }
        if lies & 4 != 0 {
            c.missing_filters.insert(p);
        }
        if lies & 8 != 0 {
            c.withheld_blocks.insert(p);
        }
        if lies & 16 != 0 {
            c.filters_held = Some(2_000);
        }
        c
    };
    let liar_first = sessions & 4 != 0;
    let both = |liar_chain: TestChain| {
        if liar_first {
            (vec![liar_chain, honest()], 1)
        } else {
            (vec![honest(), liar_chain], 0)
        }
    };
    // First session.
    let (chains, honest_at) = if sessions & 1 != 0 {
        let (c, h) = both(liar());
        (c, Some(h))
    } else {
        (vec![liar()], None)
    };
    let mut net = Net::seeded(memory(), chains, seed, small);
    settle(&mut net);
    if let Some(h) = honest_at {
        let r = rejected(&net.host.events, h);
        assert!(r.is_empty(), "the honest gateway rejected in the first session: {r:?}");
    }
    // Second session, on the same store.
    let (chains, h) = if sessions & 2 != 0 {
        both(liar())
    } else {
        (vec![honest()], 0)
    };
    let mut net = Net::seeded(net.store, chains, seed.wrapping_add(1), small);
    settle(&mut net);
    let payment = coinbase(&honest(), p);
    net.host.engine.start_scan(vec![payment, SPENT.to_vec()], 1);
    settle(&mut net);
    let r = rejected(&net.host.events, h);
    assert!(r.is_empty(), "the honest gateway rejected in the second session: {r:?}");
    let found: Vec<u32> = net
        .host
        .events
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::ScanReached { matches, .. } => Some(matches.iter().map(|m| m.0).collect()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the scan never reached the tip: {:?}", net.host.events.len()));
    for want in [p, u] {
        assert!(found.contains(&want), "block {want} not found: {found:?}");
    }
});
