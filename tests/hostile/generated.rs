//! Lies in the data (`--generate`): the gateway itself, through its library, serving the
//! deterministic regtest chain of `lightwire-chain generate` with its filters and blocks,
//! and lying in what it serves through the library's extension points
//! ([`ServedChain::set_header`], [`ServedFilters::set_filter`],
//! [`ServedBlocks::set_answer`]):
//!
//! - `--corrupt-at H`: header H with another nBits (it breaks the difficulty rule, and the
//!   next header no longer links to it);
//! - `--lie-filter-at H`: the filter of block H without its coinbase output, filter
//!   headers rebuilt to match (a gateway hiding a payment, which only the block shows);
//! - `--withhold-block-at H`: `not_found` for block H;
//! - `--withhold-filter-at H`: the filter of block H not served (an answer that ends
//!   without it), though its filter header is;
//! - `--lie-anchor-below H`: another filter for block H - 1, filter headers rebuilt from
//!   it: every filter from H on is the same, every filter header differs (the lie a store
//!   started from a checkpoint at H cannot check);
//! - `--filters-to H`: filter headers and filters only up to H, though headers go on (a
//!   gateway whose filters lag, or that says so: every request above is answered empty);
//! - `--wrong-block-at H`: the next block's transactions under block H's header.
//!
//! And for wallet tests and benchmarks, `--payments FILE`: the chain pays what the file
//! lists (no lie: the chain is another one, valid, carrying those payments); with
//! `--export DIR`, the chain served is also written as bulk files (a mirror of it).
//!
//! Output as the real gateway's: `node id <hex> connect ws://HOST:PORT#<hex>` on stdout
//! once it listens, and with `--metrics-listen`, `lightwire-hostile: metrics on
//! http://HOST:PORT/metrics` on stderr.
//!
//! [`ServedFilters::set_filter`]: lightwire_gateway::filters::ServedFilters::set_filter
//! [`ServedBlocks::set_answer`]: lightwire_gateway::blocks::ServedBlocks::set_answer

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Args;
use lightwire_chain::synthetic::{DEFAULT_PROFILE, Payment, Pool, SyntheticBlock};
use lightwire_chain::{CompactTarget, Header, Network, hash_header_bytes};
use lightwire_gateway::blocks::BlockAnswer;
use lightwire_gateway::filters::DEFAULT_CACHE_BYTES;
use lightwire_gateway::metrics::serve_metrics;
use lightwire_gateway::served::ServedChain;
use lightwire_gateway::server::Shared;
use lightwire_noise::SecretKey;
use lightwire_proto::Served as _;

/// The flags of lies in the data.
#[derive(Args, Debug)]
#[group(id = "data_lies")]
#[command(next_help_heading = "Lies in the data (with --generate)")]
pub struct Lies {
    // The flags of each kind conflict with the other kind's source rather than require
    // their own: clap does not report a required argument missing while it conflicts with
    // one given, and the two sources conflict (exactly one is given).
    /// Serve the deterministic regtest chain of N headers, with its filters and blocks,
    /// through the gateway's library
    #[arg(long, value_name = "N")]
    pub generate: Option<u32>,
    /// Serve Prometheus metrics on http://HOST:PORT/metrics (with --generate or
    /// --upstream)
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "headers_file")]
    pub metrics_listen: Option<SocketAddr>,
    /// Do not serve filters (nor blocks)
    #[arg(long, conflicts_with_all = ["headers_file", "upstream"])]
    no_filters: bool,
    /// Serve header H with another nBits
    #[arg(long, value_name = "H", conflicts_with_all = ["headers_file", "upstream"])]
    corrupt_at: Option<u32>,
    /// Serve the filter of block H without its coinbase output, filter headers rebuilt to
    /// match (a gateway hiding a payment)
    #[arg(long, value_name = "H", conflicts_with_all = ["headers_file", "upstream", "no_filters"])]
    lie_filter_at: Option<u32>,
    /// Answer "not found" for block H
    #[arg(long, value_name = "H", conflicts_with_all = ["headers_file", "upstream", "no_filters"])]
    withhold_block_at: Option<u32>,
    /// Answer requests for the filter of block H without it (its filter header served)
    #[arg(long, value_name = "H", conflicts_with_all = ["headers_file", "upstream", "no_filters"])]
    withhold_filter_at: Option<u32>,
    /// Serve another filter for block H - 1, filter headers rebuilt from it (every filter
    /// from H on the same, every filter header different)
    #[arg(long, value_name = "H", conflicts_with_all = ["headers_file", "upstream", "no_filters"])]
    lie_anchor_below: Option<u32>,
    /// Serve filter headers and filters only up to height H
    #[arg(long, value_name = "H", conflicts_with_all = ["headers_file", "upstream", "no_filters"])]
    filters_to: Option<u32>,
    /// Send the next block's transactions as block H
    #[arg(
        long,
        value_name = "H",
        conflicts_with_all = ["headers_file", "upstream", "no_filters", "withhold_block_at"]
    )]
    wrong_block_at: Option<u32>,
    /// The chain pays what FILE lists, one payment a line: `HEIGHT ADDRESS-OR-SCRIPT-HEX
    /// SATOSHIS` (regtest addresses; `#` starts a comment); each paying block is made
    /// --payment-block-bytes long
    #[arg(long, value_name = "FILE", conflicts_with_all = ["headers_file", "upstream"])]
    payments: Option<PathBuf>,
    /// The size of a block carrying a payment of --payments
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 1_000_000,
        requires = "payments"
    )]
    payment_block_bytes: u32,
    /// Write the chain's filter headers (32 bytes each, from genesis, internal byte order)
    /// to FILE and exit instead of serving: the other half of what a light client stores,
    /// for importing the same chain elsewhere (the neutrino comparison, scripts/bench-neutrino.sh)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["headers_file", "upstream", "no_filters"])]
    write_filter_headers: Option<PathBuf>,
    /// Before serving, write the chain served (its lies and payments included) as bulk
    /// files to DIR, as `lightwire-gateway export --out DIR` does: a mirror of this chain
    /// (with --payments, one a wallet restores from)
    #[arg(long, value_name = "DIR", conflicts_with_all = ["headers_file", "upstream", "write_filter_headers"])]
    export: Option<PathBuf>,
}

/// Serve the chain of `count` headers on `listen` with `key`, lying as `lies` say; runs
/// until the process is stopped.
pub fn run(
    (lies, synthetic): (&Lies, &crate::synthetic_tweaks::Flags),
    count: u32,
    listen: SocketAddr,
    key: SecretKey,
) -> Result<(), String> {
    let silent = crate::synthetic_tweaks::payments(synthetic)?;
    let mut chain = chain_paying(lies, count, silent)?;
    crate::synthetic_tweaks::serve(synthetic, &mut chain, count)?;
    if let Some(path) = &lies.write_filter_headers {
        return write_filter_headers(&chain, count, path);
    }
    if let Some(dir) = &lies.export {
        let confirmations = lightwire_gateway::export::DEFAULT_CONFIRMATIONS;
        let done = lightwire_gateway::export::export(&chain, dir, confirmations);
        done.map_err(|e| format!("--export {}: {e}", dir.display()))?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let gw = Shared::builder(chain, key)
            .spawn(listen)
            .await
            .map_err(|e| format!("{listen}: {e}"))?;
        if let Some(m) = lies.metrics_listen {
            let metrics = tokio::net::TcpListener::bind(m)
                .await
                .map_err(|e| format!("{m}: {e}"))?;
            let a = metrics.local_addr().map_err(|e| e.to_string())?;
            eprintln!("lightwire-hostile: metrics on http://{a}/metrics");
            let shared = Arc::clone(&gw.shared);
            tokio::spawn(serve_metrics(metrics, move || shared.render_metrics()));
        }
        let node_id = hex::encode(gw.node_id.serialize());
        println!("node id {node_id} connect ws://{}#{node_id}", gw.addr);
        std::io::stdout().flush().map_err(|e| e.to_string())?;
        // Until SIGINT; SIGTERM ends the process as it would without a handler.
        tokio::signal::ctrl_c().await.map_err(|e| e.to_string())
    })
}

/// Write the filter headers of heights 0..=count to `path`.
fn write_filter_headers(chain: &ServedChain, count: u32, path: &Path) -> Result<(), String> {
    use lightwire_proto::Served;
    let mut out = Vec::with_capacity((count as usize + 1) * 32);
    for h in 0..=count {
        let entry = chain
            .filter_entry(h)
            .ok_or_else(|| format!("no filter header at {h}"))?;
        out.extend_from_slice(entry.header.as_bytes());
    }
    std::fs::write(path, out).map_err(|e| format!("{}: {e}", path.display()))
}

/// The chain to serve: generated (paying what `--payments` lists), with its filters
/// unless `--no-filters`, and the lies told.
#[cfg(test)]
fn chain(lies: &Lies, count: u32) -> Result<ServedChain, String> {
    chain_paying(lies, count, Vec::new())
}

/// [`chain`], paying `silent` too.
fn chain_paying(lies: &Lies, count: u32, silent: Vec<Payment>) -> Result<ServedChain, String> {
    let pool = match &lies.payments {
        Some(path) => Some(payments_pool(
            path,
            lies.payment_block_bytes as usize,
            silent,
        )?),
        None if !silent.is_empty() => Some(&*Box::leak(Box::new(Pool::with_payments(
            &DEFAULT_PROFILE,
            silent,
            lies.payment_block_bytes as usize,
        )))),
        None => None,
    };
    if let Some(p) = pool.and_then(|p| p.payments().find(|p| p.height > count)) {
        return Err(format!(
            "--payments: a payment at {}, above the chain's {count}",
            p.height
        ));
    }
    let mut chain = ServedChain::generate_paying(count, now(), pool).map_err(|e| e.to_string())?;
    if !lies.no_filters {
        chain.serve_generated_filters(DEFAULT_CACHE_BYTES);
    }
    let range = |flag: &str, h: u32, from: u32| {
        format!("--{flag} {h}: not a height from {from} to {count}")
    };
    if let Some(h) = lies.corrupt_at {
        corrupt_header(&mut chain, h).ok_or_else(|| range("corrupt-at", h, 1))?;
    }
    if let Some(h) = lies.lie_anchor_below {
        other_anchor(&mut chain, h).ok_or_else(|| range("lie-anchor-below", h, 2))?;
    }
    if let Some(h) = lies.lie_filter_at {
        hide_coinbase(&mut chain, h).ok_or_else(|| range("lie-filter-at", h, 1))?;
    }
    if let Some(h) = lies.filters_to {
        let f = chain.filters_mut().filter(|_| h <= count);
        f.ok_or_else(|| range("filters-to", h, 0))?.truncate(h + 1);
    }
    if let Some(h) = lies.withhold_filter_at {
        chain
            .filters_mut()
            .is_some_and(|f| f.withhold_filter(h))
            .then_some(())
            .ok_or_else(|| range("withhold-filter-at", h, 0))?;
    }
    if let Some(h) = lies.withhold_block_at {
        answer_block(&mut chain, h, |_| Some(BlockAnswer::NotFound))
            .ok_or_else(|| range("withhold-block-at", h, 0))?;
    }
    if let Some(h) = lies.wrong_block_at {
        answer_block(&mut chain, h, |c| {
            next_block_as(c, h).map(BlockAnswer::Bytes)
        })
        .ok_or_else(|| range("wrong-block-at", h, 0))?;
    }
    Ok(chain)
}

/// Serve header `height` with another nBits. `None` outside `1..=tip`.
fn corrupt_header(chain: &mut ServedChain, height: u32) -> Option<()> {
    let mut header = Header::decode(&chain.header(height)?);
    header.bits = CompactTarget(header.bits.0 ^ 0x0001_0000);
    chain.set_header(height, header.encode()).then_some(())
}

/// Serve the filter of block `height` without the block's coinbase output (the first
/// item of its filter), the filter headers rebuilt from it. `None` outside `1..=tip`, or
/// without filters.
fn hide_coinbase(chain: &mut ServedChain, height: u32) -> Option<()> {
    let header = chain.header(height)?;
    let (profile, pool) = chain.filters()?.generated_source()?;
    let block = SyntheticBlock::new(&profile, pool, height, 0);
    let mut filter = Vec::new();
    lightwire_filter::build_filter(
        &hash_header_bytes(&header).0,
        block.filter_items().skip(1),
        &mut filter,
    );
    chain
        .filters_mut()?
        .set_filter(height, filter)
        .then_some(())
}

/// Serve another filter for block `height - 1` (an item no block has), the filter headers
/// rebuilt from it. `None` outside `2..=tip`, or without filters.
fn other_anchor(chain: &mut ServedChain, height: u32) -> Option<()> {
    let below = height.checked_sub(1).filter(|&b| b > 0)?;
    let header = chain.header(below)?;
    let mut filter = Vec::new();
    lightwire_filter::build_filter(
        &hash_header_bytes(&header).0,
        [&b"another anchor"[..]],
        &mut filter,
    );
    chain.filters_mut()?.set_filter(below, filter).then_some(())
}

/// Answer what `answer` makes for block `height`. `None` above the tip, or without blocks.
fn answer_block(
    chain: &mut ServedChain,
    height: u32,
    answer: impl FnOnce(&ServedChain) -> Option<BlockAnswer>,
) -> Option<()> {
    chain.header(height)?;
    let answer = answer(chain)?;
    chain.blocks_mut()?.set_answer(height, answer);
    Some(())
}

/// The next block's transactions under block `height`'s header: not the header's block
/// (its Merkle root differs).
fn next_block_as(chain: &ServedChain, height: u32) -> Option<Arc<[u8]>> {
    let header = chain.header(height)?;
    let (profile, pool) = chain.filters()?.generated_source()?;
    let mut out = Vec::new();
    SyntheticBlock::write_at(&profile, pool, height + 1, 0, &header, &mut out);
    Some(Arc::from(out))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The payments of a `--payments` file, in a pool of the default profile. The pool lives
/// as long as the process (the chain's blocks and filters are made from it on demand).
fn payments_pool(
    path: &Path,
    block_bytes: usize,
    more: Vec<Payment>,
) -> Result<&'static Pool, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("--payments {}: {e}", path.display()))?;
    let mut payments =
        parse_payments(&text).map_err(|e| format!("--payments {}: {e}", path.display()))?;
    payments.extend(more);
    Ok(Box::leak(Box::new(Pool::with_payments(
        &DEFAULT_PROFILE,
        payments,
        block_bytes,
    ))))
}

/// The lines of a `--payments` file (see the flag).
fn parse_payments(text: &str) -> Result<Vec<Payment>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |why: String| format!("line {}: {why}", n + 1);
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [height, to, value] = fields[..] else {
            return Err(bad("expected HEIGHT ADDRESS-OR-SCRIPT-HEX SATOSHIS".into()));
        };
        let height: u32 = height
            .parse()
            .ok()
            .filter(|h| *h > 0)
            .ok_or_else(|| bad(format!("{height:?} is not a height above 0")))?;
        let value: u64 = value
            .parse()
            .map_err(|_| bad(format!("{value:?} is not an amount in satoshis")))?;
        let script = match lightwire_wallet::script_of_address(to, Network::Regtest) {
            Ok(script) => script,
            Err(e) => hex::decode(to)
                .ok()
                .filter(|s| !s.is_empty() && s.len() <= 10_000)
                .ok_or_else(|| bad(format!("{to:?} is neither a script nor an address: {e}")))?,
        };
        out.push(Payment {
            height,
            script,
            value,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use lightwire_chain::{Chain, ConnectError, REGTEST, Rule};
    use lightwire_filter::{filter_hash, filter_header};
    use lightwire_proto::session::FilterLookup;

    use super::*;

    const NOW: u64 = 2_000_000_000;

    /// The lies of the command line `args`.
    fn lies(args: &[&str]) -> Lies {
        let argv = std::iter::once("lightwire-hostile").chain(args.iter().copied());
        <crate::Args as clap::Parser>::try_parse_from(argv)
            .unwrap()
            .generated
    }

    /// The corrupted header breaks the difficulty rule at its height, for a client.
    #[test]
    fn a_corrupted_header_breaks_the_difficulty_rule() {
        let chain = chain(&lies(&["--generate", "60", "--corrupt-at", "50"]), 60).unwrap();
        let headers: Vec<Header> = (1..=60)
            .map(|h| Header::decode(&chain.header(h).unwrap()))
            .collect();
        let Err(ConnectError::Invalid(e)) = Chain::new(&REGTEST).connect(&headers, NOW) else {
            panic!("header 50 must fail validation");
        };
        assert_eq!(e.height, 50);
        assert!(matches!(e.rule, Rule::WrongBits { .. }), "{e}");
        assert_eq!(
            super::chain(&lies(&["--generate", "60", "--corrupt-at", "61"]), 60).err(),
            Some("--corrupt-at 61: not a height from 1 to 60".into())
        );
    }

    /// The filter without the coinbase output has filter headers to match; the block shows
    /// the coinbase output is missing from it.
    #[test]
    fn a_hidden_coinbase_output_is_committed_to_and_shown_by_the_block() {
        let honest = chain(&lies(&["--generate", "40"]), 40).unwrap();
        let liar = chain(&lies(&["--generate", "40", "--lie-filter-at", "30"]), 40).unwrap();
        let filters = liar.filters().unwrap();
        let FilterLookup::Ready(lie) = liar.with_filter(30, <[u8]>::to_vec) else {
            panic!("no filter at 30");
        };
        let before = honest.filters().unwrap().entry(29).unwrap();
        assert_eq!(filters.entry(29), Some(before));
        assert_eq!(
            filters.entry(30).unwrap().header,
            filter_header(&filter_hash(&lie), &before.header)
        );
        assert_ne!(
            filters.entry(40),
            honest.filters().unwrap().entry(40),
            "every filter header above commits to the lie"
        );
        let header = liar.header(30).unwrap();
        let FilterLookup::Ready(absent) = liar.with_block(30, |b| {
            let block = lightwire_filter::Block::parse(b).unwrap();
            lightwire_filter::first_absent(
                &lie,
                &hash_header_bytes(&header).0,
                lightwire_filter::known_items(&block),
            )
        }) else {
            panic!("no block at 30");
        };
        assert_eq!(absent, Ok(Some(0)));
    }

    /// Another anchor: every filter from the height given on is the same, every filter
    /// header differs; filters only up to a height: none above.
    #[test]
    fn another_anchor_changes_every_header_and_no_filter_above_it() {
        let honest = chain(&lies(&["--generate", "40"]), 40).unwrap();
        let liar = chain(&lies(&["--generate", "40", "--lie-anchor-below", "30"]), 40).unwrap();
        let (h, l) = (honest.filters().unwrap(), liar.filters().unwrap());
        assert_eq!(h.entry(28), l.entry(28));
        for at in 30..=40 {
            let (a, b) = (h.entry(at).unwrap(), l.entry(at).unwrap());
            assert_eq!(a.hash, b.hash, "the same filter at {at}");
            assert_ne!(a.header, b.header, "another header at {at}");
        }
        let lagging = chain(&lies(&["--generate", "40", "--filters-to", "25"]), 40).unwrap();
        assert_eq!(lagging.filters().unwrap().tip(), Some(25));
        assert_eq!(lagging.tip().height, 40);
        for bad in [["--lie-anchor-below", "1"], ["--filters-to", "41"]] {
            let flags = ["--generate", "40", bad[0], bad[1]];
            assert!(super::chain(&lies(&flags), 40).is_err(), "{flags:?}");
        }
    }

    /// A withheld filter is not served, though its filter header is; the others are.
    #[test]
    fn a_withheld_filter_is_not_served_but_its_header_is() {
        let honest = chain(&lies(&["--generate", "40"]), 40).unwrap();
        let withheld = chain(
            &lies(&["--generate", "40", "--withhold-filter-at", "30"]),
            40,
        )
        .unwrap();
        assert_eq!(withheld.with_filter(30, |_| ()), FilterLookup::Missing);
        assert!(matches!(
            withheld.with_filter(31, |_| ()),
            FilterLookup::Ready(())
        ));
        assert_eq!(
            withheld.filters().unwrap().entry(30),
            honest.filters().unwrap().entry(30)
        );
        assert_eq!(
            super::chain(
                &lies(&["--generate", "40", "--withhold-filter-at", "41"]),
                40
            )
            .err(),
            Some("--withhold-filter-at 41: not a height from 0 to 40".into())
        );
    }

    /// The wrong block has the header asked for but not its transactions; the withheld one
    /// is not found; the others are served as they are.
    #[test]
    fn blocks_are_withheld_or_wrong_where_asked() {
        let wrong = chain(&lies(&["--generate", "40", "--wrong-block-at", "20"]), 40).unwrap();
        let header = wrong.header(20).unwrap();
        let FilterLookup::Ready((same_header, root)) = wrong.with_block(20, |b| {
            let block = lightwire_filter::Block::parse(b).unwrap();
            (*block.header() == header, block.merkle_root().0)
        }) else {
            panic!("no block at 20");
        };
        assert!(same_header);
        assert_ne!(&root[..], &header[36..68], "not the header's block");
        let withheld = chain(
            &lies(&["--generate", "40", "--withhold-block-at", "20"]),
            40,
        )
        .unwrap();
        assert_eq!(withheld.with_block(20, |_| ()), FilterLookup::Missing);
        assert!(matches!(
            withheld.with_block(21, |_| ()),
            FilterLookup::Ready(())
        ));
        assert!(
            chain(&lies(&["--generate", "40", "--wrong-block-at", "41"]), 40).is_err(),
            "above the tip"
        );
    }

    #[test]
    fn payment_files_name_their_errors() {
        let address = "bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080";
        let got = parse_payments(&format!(
            "# height address value\n5 {address} 1000\n\n7 0014{} 2 # a script\n",
            "ab".repeat(20)
        ))
        .unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].height, got[0].value), (5, 1000));
        assert_eq!(got[1].script.len(), 22);
        for (text, why) in [
            ("5 x", "line 1: expected"),
            ("0 0014ab 1", "line 1: \"0\" is not a height above 0"),
            ("5 0014ab lots", "line 1: \"lots\" is not an amount"),
            (
                "\n5 zz 1",
                "line 2: \"zz\" is neither a script nor an address",
            ),
        ] {
            let err = parse_payments(text).unwrap_err();
            assert!(err.starts_with(why), "{text:?}: {err}");
        }
    }
}
