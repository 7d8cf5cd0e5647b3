//! `lightwire-chain`: validate a raw header file, or generate a regtest chain.
//!
//! ```text
//! lightwire-chain check --network NET [--from-height H] FILE
//! lightwire-chain generate --network regtest --count N [--fork-at H --fork-len L] FILE
//! ```
//!
//! `check` exits 0 with one summary line, or 1 naming the first failing height and rule
//! (2 for usage and I/O errors). `generate` writes N headers from genesis (heights 0..N-1);
//! with `--fork-at H --fork-len L` it also writes `FILE.fork`: L headers at heights H..
//! on a competing branch whose parent is the main chain's header H-1.

use std::io::Write;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use lightwire_chain::generate::next_header;
use lightwire_chain::{BitsCheck, Entry, HEADER_LEN, Header, Network, Window, validate};

const USAGE: &str = "usage:
  lightwire-chain check --network NET [--from-height H] FILE
  lightwire-chain generate --network regtest --count N [--fork-at H --fork-len L] FILE
networks: mainnet, testnet3, testnet4, signet, regtest";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("check") => Options::parse(&args[1..]).and_then(|o| check(&o)),
        Some("generate") => Options::parse(&args[1..]).and_then(|o| generate(&o)),
        _ => Err(Failure::Usage("expected `check` or `generate`".into())),
    };
    match result {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(Failure::Invalid(msg)) => {
            eprintln!("invalid: {msg}");
            ExitCode::from(1)
        }
        Err(Failure::Usage(msg)) => {
            eprintln!("error: {msg}\n{USAGE}");
            ExitCode::from(2)
        }
        Err(Failure::Io(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
    }
}

enum Failure {
    /// The chain broke a rule.
    Invalid(String),
    /// The command line is wrong.
    Usage(String),
    /// A file could not be read or written.
    Io(String),
}

#[derive(Default)]
struct Options {
    network: Option<Network>,
    from_height: Option<u32>,
    count: Option<u32>,
    fork_at: Option<u32>,
    fork_len: Option<u32>,
    file: Option<String>,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, Failure> {
        let mut o = Options::default();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let mut value = |name: &str| {
                it.next()
                    .cloned()
                    .ok_or_else(|| Failure::Usage(format!("{name} needs a value")))
            };
            let number = |name: &str, v: String| {
                v.parse::<u32>()
                    .map_err(|_| Failure::Usage(format!("{name}: {v:?} is not a number")))
            };
            match arg.as_str() {
                "--network" => {
                    o.network = Some(
                        value("--network")?
                            .parse()
                            .map_err(|e| Failure::Usage(format!("{e}")))?,
                    )
                }
                "--from-height" => {
                    o.from_height = Some(number("--from-height", value("--from-height")?)?)
                }
                "--count" => o.count = Some(number("--count", value("--count")?)?),
                "--fork-at" => o.fork_at = Some(number("--fork-at", value("--fork-at")?)?),
                "--fork-len" => o.fork_len = Some(number("--fork-len", value("--fork-len")?)?),
                flag if flag.starts_with("--") => {
                    return Err(Failure::Usage(format!("unknown option {flag}")));
                }
                file if o.file.is_none() => o.file = Some(file.to_string()),
                extra => return Err(Failure::Usage(format!("unexpected argument {extra:?}"))),
            }
        }
        Ok(o)
    }

    fn network(&self) -> Result<Network, Failure> {
        self.network
            .ok_or_else(|| Failure::Usage("--network is required".into()))
    }

    fn file(&self) -> Result<&str, Failure> {
        self.file
            .as_deref()
            .ok_or_else(|| Failure::Usage("FILE is required".into()))
    }
}

fn check(o: &Options) -> Result<String, Failure> {
    let params = o.network()?.params();
    let path = o.file()?;
    let data = std::fs::read(path).map_err(|e| Failure::Io(format!("{path}: {e}")))?;
    if data.is_empty() || data.len() % HEADER_LEN != 0 {
        return Err(Failure::Invalid(format!(
            "{path}: {} bytes is not a whole number of 80-byte headers",
            data.len()
        )));
    }
    let mut headers = data.chunks_exact(HEADER_LEN).filter_map(Header::from_slice);
    let first = headers
        .next()
        .ok_or_else(|| Failure::Invalid("empty file".into()))?;
    let start = o.from_height.unwrap_or(0);
    let mut window = match o.from_height {
        None if first != params.genesis => {
            return Err(Failure::Invalid(format!(
                "header at height 0 is not {}'s genesis {} (use --from-height for a file that starts later)",
                params.network,
                params.genesis.block_hash()
            )));
        }
        None => Window::from_genesis(params),
        Some(height) => Window::from_trusted(Entry {
            height,
            hash: first.block_hash(),
            header: first,
            // Work before the trusted header is unknown: count from it.
            chainwork: first.bits.to_target().map(|t| t.work()).unwrap_or_default(),
            normal_bits: first.bits,
        }),
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut bounded = 0u32;
    for header in headers {
        let v =
            validate(params, &window, &header, now).map_err(|e| Failure::Invalid(e.to_string()))?;
        if v.bits_check == BitsCheck::Bounded {
            bounded += 1;
        }
        window.push(v.entry);
    }
    let tip = window.tip();
    let count = data.len() / HEADER_LEN;
    let work = if start == 0 {
        "chainwork"
    } else {
        "work since the trusted header"
    };
    let mut summary = format!(
        "ok: {count} {} headers, tip {} {}, {work} {}",
        params.network, tip.height, tip.hash, tip.chainwork
    );
    if bounded > 0 {
        let (n, began) = if bounded == 1 {
            ("retarget", "its period began")
        } else {
            ("retargets", "their periods began")
        };
        summary.push_str(&format!(
            " ({bounded} {n} checked by range only: {began} before height {start})"
        ));
    }
    Ok(summary)
}

fn generate(o: &Options) -> Result<String, Failure> {
    let network = o.network()?;
    if network != Network::Regtest {
        return Err(Failure::Usage(format!(
            "generate makes regtest chains only (asked for {network})"
        )));
    }
    let params = network.params();
    let count = o
        .count
        .ok_or_else(|| Failure::Usage("--count is required".into()))?;
    if count == 0 {
        return Err(Failure::Usage(
            "--count must be at least 1 (the genesis header)".into(),
        ));
    }
    let fork = match (o.fork_at, o.fork_len) {
        (None, None) => None,
        (Some(at), Some(len)) if at >= 1 && at < count && len >= 1 => Some((at, len)),
        (Some(_), Some(_)) => {
            return Err(Failure::Usage(
                "--fork-at must be in 1..count and --fork-len >= 1".into(),
            ));
        }
        _ => {
            return Err(Failure::Usage(
                "--fork-at and --fork-len go together".into(),
            ));
        }
    };
    let path = o.file()?;
    let mut main = Writer::create(path)?;
    let mut fork_out = match fork {
        Some(_) => Some(Writer::create(&format!("{path}.fork"))?),
        None => None,
    };
    let mut prev = params.genesis;
    let mut prev_hash = prev.block_hash();
    main.put(&prev)?;
    for height in 1..count {
        if let (Some((at, len)), Some(out)) = (fork, fork_out.as_mut())
            && height == at
        {
            // The branch leaves the main chain here: same parent, different contents.
            let (mut b_prev, mut b_hash) = (prev, prev_hash);
            for h in at..at.saturating_add(len) {
                let header = next_header(params, &b_prev, b_hash, h, 1);
                out.put(&header)?;
                b_hash = header.block_hash();
                b_prev = header;
            }
        }
        let header = next_header(params, &prev, prev_hash, height, 0);
        main.put(&header)?;
        prev_hash = header.block_hash();
        prev = header;
    }
    main.finish()?;
    let mut summary = format!(
        "wrote {count} regtest headers to {path}, tip {} {prev_hash}",
        count - 1
    );
    if let (Some((at, len)), Some(out)) = (fork, fork_out) {
        out.finish()?;
        summary.push_str(&format!(
            "; {len} fork headers at heights {at}..{} to {path}.fork",
            at + len - 1
        ));
    }
    Ok(summary)
}

/// A buffered header file writer that reports its path on failure.
struct Writer {
    path: String,
    out: std::io::BufWriter<std::fs::File>,
}

impl Writer {
    fn create(path: &str) -> Result<Writer, Failure> {
        let file = std::fs::File::create(path).map_err(|e| Failure::Io(format!("{path}: {e}")))?;
        Ok(Writer {
            path: path.to_string(),
            out: std::io::BufWriter::new(file),
        })
    }

    fn put(&mut self, header: &Header) -> Result<(), Failure> {
        self.out
            .write_all(&header.encode())
            .map_err(|e| Failure::Io(format!("{}: {e}", self.path)))
    }

    fn finish(mut self) -> Result<(), Failure> {
        self.out
            .flush()
            .map_err(|e| Failure::Io(format!("{}: {e}", self.path)))
    }
}
