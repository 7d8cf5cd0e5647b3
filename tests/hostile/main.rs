//! `lightwire-hostile`: a gateway that lies, for tests of the client's trust rules
//! (docs/PROTOCOL.md, "Trust rules"). It is not shipped: it lives in the test crate, and
//! the gateway that ships has none of this.
//!
//! Three kinds of lie, by the source given:
//! - `--headers-file FILE`: lies in the protocol (claimed work and heights, stalls, answers
//!   of known headers, ping floods), from a hand-written server ([`protocol`]);
//! - `--generate N`: lies in the data (a header breaking a rule, a filter hiding a
//!   payment, a block withheld or not the header's), and chains paying a wallet
//!   (`--payments`), from the gateway's own library ([`generated`]), with synthetic
//!   silent-payment tweaks for benchmarks ([`synthetic_tweaks`]);
//! - `--upstream HOST:PORT`: lies in the mempool digest (replacements of its own making,
//!   removals of what the node still holds) while following a real node, from the
//!   gateway's own library ([`mempool`]); and, with `--tweaks-dir`, in silent-payment
//!   tweaks computed from the node ([`tweaks`]).
//!
//! Output, as the real gateway's: `node id <hex> connect ws://HOST:PORT#<hex>` on stdout
//! once it listens; when it cannot start, `lightwire-hostile: <why>` on stderr and exit
//! code 1 (2 for usage errors).
#![forbid(unsafe_code)]

mod generated;
mod mempool;
mod protocol;
mod synthetic_tweaks;
mod tweaks;

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use lightwire_noise::SecretKey;

/// A gateway that lies, for tests.
#[derive(Parser, Debug)]
#[command(
    name = "lightwire-hostile",
    group(clap::ArgGroup::new("source").required(true).args(["headers_file", "generate", "upstream"]))
)]
struct Args {
    /// Address to listen on.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The static secret key, created if the file does not exist [default: a new key]
    #[arg(long, value_name = "PATH")]
    key_file: Option<PathBuf>,
    #[command(flatten)]
    protocol: protocol::Lies,
    #[command(flatten)]
    generated: generated::Lies,
    #[command(flatten)]
    mempool: mempool::Lies,
    #[command(flatten)]
    tweaks: tweaks::Lies,
    #[command(flatten)]
    synthetic: synthetic_tweaks::Flags,
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("lightwire-hostile: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), String> {
    let key = match &args.key_file {
        Some(path) => lightwire_gateway::key::load_or_create(path).map_err(|e| e.to_string())?,
        None => SecretKey::random().map_err(|e| format!("no randomness: {e}"))?,
    };
    let network = args.protocol.network;
    match (
        &args.protocol.headers_file,
        args.generated.generate,
        args.mempool.upstream,
    ) {
        (Some(file), None, None) => protocol::run(&args.protocol, file, args.listen, key),
        (None, Some(count), None) => {
            generated::run((&args.generated, &args.synthetic), count, args.listen, key)
        }
        (None, None, Some(node)) => {
            let metrics = args.generated.metrics_listen;
            let lies = (&args.mempool, &args.tweaks);
            mempool::run(lies, (node, network), args.listen, metrics, key)
        }
        // clap has checked that exactly one is given.
        _ => Err("give exactly one of --headers-file, --generate, --upstream".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind of lie goes with its source, and exactly one source is given.
    #[test]
    fn lies_go_with_their_source() {
        let parse = |args: &[&str]| {
            Args::try_parse_from(std::iter::once("lightwire-hostile").chain(args.iter().copied()))
        };
        assert!(parse(&["--headers-file", "f", "--bump-tip"]).is_ok());
        assert!(parse(&["--generate", "10", "--corrupt-at", "5"]).is_ok());
        assert!(parse(&["--generate", "10", "--headers-file", "f"]).is_err());
        assert!(parse(&["--corrupt-at", "5"]).is_err(), "no source");
        assert!(parse(&["--generate", "10", "--bump-tip"]).is_err());
        assert!(parse(&["--headers-file", "f", "--lie-filter-at", "5"]).is_err());
        assert!(parse(&["--generate", "10", "--no-filters", "--lie-filter-at", "5"]).is_err());
        assert!(parse(&["--generate", "10", "--payment-block-bytes", "5"]).is_err());
        assert!(parse(&["--generate", "10", "--export", "d"]).is_ok());
        assert!(parse(&["--headers-file", "f", "--export", "d"]).is_err());
        assert!(parse(&["--upstream", "127.0.0.1:1", "--invent-replacements"]).is_ok());
        assert!(
            parse(&[
                "--upstream",
                "127.0.0.1:1",
                "--network",
                "regtest",
                "--say-removed"
            ])
            .is_ok()
        );
        assert!(parse(&["--generate", "10", "--say-removed"]).is_err());
        assert!(parse(&["--upstream", "127.0.0.1:1", "--bump-tip"]).is_err());
        assert!(parse(&["--upstream", "127.0.0.1:1", "--corrupt-at", "5"]).is_err());
        assert!(parse(&["--upstream", "127.0.0.1:1", "--generate", "5"]).is_err());
    }
}
