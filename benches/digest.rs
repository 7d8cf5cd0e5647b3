//! Matching a mempool digest message against a wallet, per message, shared by the native
//! benchmark (`cargo bench -p lightwire-benches --bench digest`) and the in-browser one
//! (`bash scripts/bench-wasm.sh wasm_digest`).
//!
//! The load a gateway can make: a 64 KB digest of tiny entries (one input and one output
//! each, a set of two items: 1,550 of them fit), against a wallet of 10,000 items (9,000 scripts of
//! its gap limit and lookahead, 1,000 coins' outpoints). Before: what the engine did for
//! each message: the wallet's items gathered again, then for each entry every item hashed
//! under the salt, mapped into the entry's range and sorted, and merged with the set.
//! After: the items hashed once under the connection's salt and sorted ([`SaltedItems`],
//! rebuilt only when the wallet changes), each entry a binary search per set item.

use lightwire_filter::Matcher;
use lightwire_filter::txset::{SaltedItems, outpoint_item, set_matches, tx_set};
use lightwire_primitives::Tx;

use crate::Clock;
use crate::filter::{scripts, time};

/// Entries in the digest message.
pub const ENTRIES: usize = 1_550;

/// Items the wallet matches.
pub const ITEMS: usize = 10_000;

/// How much of the load: all of it, or (for `cargo test --benches`, a debug build that
/// only keeps the benchmark working) a tenth of the entries and items.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Scale {
    /// [`ENTRIES`] against [`ITEMS`].
    Full,
    /// A tenth of each.
    Smoke,
}

impl Scale {
    fn of(self, n: usize) -> usize {
        match self {
            Scale::Full => n,
            Scale::Smoke => n / 10,
        }
    }
}

/// The connection's salt.
const SALT: [u8; 16] = [0x33; 16];

/// The wallet's items: scripts, then outpoints (a tenth of them).
pub fn items(scale: Scale) -> Vec<Vec<u8>> {
    let coins = scale.of(ITEMS) / 10;
    let mut items = scripts(scale.of(ITEMS) - coins, 0xabcd);
    items.extend((0..coins as u32).map(|i| {
        let mut txid = [0x77; 32];
        txid[..4].copy_from_slice(&i.to_le_bytes());
        outpoint_item(&txid, i % 3).to_vec()
    }));
    items
}

/// The digest's sets: tiny transactions paying one random script each (none of the
/// wallet's), and the bytes the message would take.
pub fn sets(scale: Scale) -> (Vec<Vec<u8>>, usize) {
    let payees = scripts(scale.of(ENTRIES), 0x5eed);
    let (mut hashes, mut sets) = (Vec::new(), Vec::with_capacity(payees.len()));
    let mut bytes = 3;
    for (i, s) in payees.iter().enumerate() {
        // No inputs would be no transaction: one input, whose outpoint is an item too; a
        // coinbase-like one (all zeros) keeps the set at the payee and that outpoint.
        let mut t = vec![2, 0, 0, 0, 1];
        t.extend_from_slice(&[0; 32]);
        t.extend_from_slice(&(i as u32).to_le_bytes());
        t.extend_from_slice(&[0, 0xff, 0xff, 0xff, 0xff, 1]);
        t.extend_from_slice(&1_000u64.to_le_bytes());
        t.push(s.len() as u8);
        t.extend_from_slice(s);
        t.extend_from_slice(&[0; 4]);
        let mut set = Vec::new();
        tx_set(
            &Tx::parse(&t).expect("a transaction"),
            &SALT,
            &mut hashes,
            &mut set,
        );
        bytes += 1 + 32 + 2 + set.len();
        sets.push(set);
    }
    (sets, bytes)
}

/// One measurement.
#[derive(Clone, Debug)]
pub struct Row {
    /// Before or after.
    pub who: &'static str,
    /// Messages timed.
    pub iterations: u64,
    /// Nanoseconds per message.
    pub ns: f64,
}

/// Both ways, each for about `budget_ns`; and the message's bytes and its entries and
/// items.
pub fn run(clock: &impl Clock, budget_ns: f64, scale: Scale) -> (Vec<Row>, usize) {
    let items = items(scale);
    let (sets, bytes) = sets(scale);
    let mut flat = Vec::new();
    let mut ends = Vec::new();
    let mut matcher = Matcher::default();
    let (iterations, ns) = time(clock, budget_ns, || {
        flat.clear();
        ends.clear();
        for i in &items {
            flat.extend_from_slice(i);
            ends.push(flat.len());
        }
        let mut any = false;
        for set in &sets {
            let queries = ends.iter().scan(0, |start, &end| {
                let item = &flat[*start..end];
                *start = end;
                Some(item)
            });
            any |= set_matches(&mut matcher, set, &SALT, queries).unwrap_or(true);
        }
        any
    });
    let before = Row {
        who: "before: every item hashed and sorted per entry",
        iterations,
        ns,
    };
    let mut salted = SaltedItems::default();
    salted.rebuild(&SALT, items.iter().map(Vec::as_slice));
    // Every entry matched (a false match does not end the message's work).
    let (iterations, ns) = time(clock, budget_ns, || {
        sets.iter()
            .filter(|set| salted.matches(set).unwrap_or(true))
            .count()
            > 0
    });
    let after = Row {
        who: "after: items hashed once, a binary search per set item",
        iterations,
        ns,
    };
    let (iterations, ns) = time(clock, budget_ns, || {
        salted.rebuild(&SALT, items.iter().map(Vec::as_slice));
        !salted.is_empty()
    });
    let rebuild = Row {
        who: "after, once per wallet change: the items hashed and sorted",
        iterations,
        ns,
    };
    (vec![before, after, rebuild], bytes)
}

/// A markdown table of `rows`.
pub fn table(rows: &[Row], bytes: usize, scale: Scale) -> String {
    let mut s = format!(
        "a digest of {} entries ({bytes} bytes) against {} items\n\
         | matching | ms per message | messages timed |\n|---|---:|---:|\n",
        scale.of(ENTRIES),
        scale.of(ITEMS)
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {:.3} | {} |\n",
            r.who,
            r.ns / 1e6,
            r.iterations
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_load_is_what_it_says() {
        let (_, bytes) = sets(Scale::Full);
        assert!(bytes <= 65_535, "{bytes}");
        assert_eq!(items(Scale::Full).len(), ITEMS);
        // Checked at a tenth of the load (a debug build's merge of every item per entry is
        // slow): both ways give the same answers.
        let (sets, _) = sets(Scale::Smoke);
        let items = items(Scale::Smoke);
        let mut salted = SaltedItems::default();
        salted.rebuild(&SALT, items.iter().map(Vec::as_slice));
        let mut m = Matcher::default();
        let mut matched = 0;
        for set in &sets {
            let merged = set_matches(&mut m, set, &SALT, items.iter().map(Vec::as_slice));
            assert_eq!(salted.matches(set), merged);
            matched += usize::from(merged == Ok(true));
        }
        // 155 sets of 2 against 1,000 items: about 0.2 false matches expected (1 in
        // 784,931 per item and set); these seeds give one, both ways.
        assert_eq!(matched, 1);
    }
}
