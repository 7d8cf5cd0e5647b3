//! Logs for the binaries built on this library: `tracing` events written to stderr,
//! filtered by `--log` (or `RUST_LOG`).
//!
//! Only binaries call [`LogArgs::init`] (`lightwire-gateway`, `lightwire-load`); the
//! library itself emits events and never installs a subscriber, so a program using it
//! keeps its own.

use std::io::IsTerminal as _;

use clap::Args;
use tracing_subscriber::EnvFilter;

/// The filter when neither `--log` nor `RUST_LOG` gives one.
const DEFAULT_FILTER: &str = "info";

/// The `--log` flag, flattened into each command line.
#[derive(Args)]
pub struct LogArgs {
    /// What to log (to stderr): a level (error, warn, info, debug, trace, off) or tracing
    /// directives such as warn,lightwire_gateway::server=debug [default: RUST_LOG if set,
    /// else info]
    #[arg(long, value_name = "FILTER", value_parser = parse_filter)]
    log: Option<String>,
}

/// `--log`'s value parser: the filter as given, once it is known to parse.
fn parse_filter(s: &str) -> Result<String, String> {
    EnvFilter::builder()
        .parse(s)
        .map(|_| s.to_owned())
        .map_err(|e| e.to_string())
}

impl LogArgs {
    /// Install the global subscriber: events that pass the filter, one line each on
    /// stderr, coloured only when stderr is a terminal. Errs with a sentence when
    /// `RUST_LOG` (read only when `--log` is not given) is not a filter.
    pub fn init(&self) -> Result<(), String> {
        let filter = match (&self.log, std::env::var("RUST_LOG")) {
            (Some(flag), _) => EnvFilter::builder()
                .parse(flag)
                .map_err(|e| e.to_string())?,
            (None, Ok(env)) if !env.is_empty() => EnvFilter::builder()
                .parse(&env)
                .map_err(|e| format!("RUST_LOG={env}: {e}"))?,
            (None, Err(std::env::VarError::NotUnicode(_))) => {
                return Err("RUST_LOG is not UTF-8".into());
            }
            (None, _) => EnvFilter::new(DEFAULT_FILTER),
        };
        // Fails only if a subscriber is already installed, and nothing else in the
        // binaries installs one.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .try_init();
        Ok(())
    }
}
