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
//!
//! Native only: clap is a dependency for targets other than wasm32, so that the library,
//! which the browser client builds for wasm32, does not carry it.

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    cli::main()
}

/// There is no command line on wasm32 (and no clap): the library is what builds there.
#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
mod cli {
    use std::ffi::OsString;
    use std::io::Write;
    use std::path::{Path, PathBuf};
    use std::process::ExitCode;
    use std::time::{SystemTime, UNIX_EPOCH};

    use clap::error::ErrorKind;
    use clap::{Args, CommandFactory, Parser, Subcommand, value_parser};
    use lightwire_chain::generate::next_header;
    use lightwire_chain::{BitsCheck, Entry, HEADER_LEN, Header, Network, Window, validate};

    /// Validate a raw header file, or generate a regtest chain.
    #[derive(Parser)]
    #[command(name = "lightwire-chain")]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    #[derive(Subcommand)]
    enum Command {
        /// Validate a file of consecutive 80-byte headers.
        ///
        /// Exits 0 with one summary line, 1 naming the first failing height and rule, 2 for
        /// usage and I/O errors.
        Check(CheckArgs),
        /// Write a regtest chain from genesis, and optionally a competing branch.
        Generate(GenerateArgs),
    }

    #[derive(Args)]
    struct CheckArgs {
        /// mainnet, testnet3, testnet4, signet or regtest
        #[arg(long, value_name = "NET")]
        network: Network,
        /// Height of the file's first header, trusted rather than checked [default: the file
        /// starts at the network's genesis]
        #[arg(long, value_name = "H")]
        from_height: Option<u32>,
        /// The headers, raw
        file: PathBuf,
    }

    #[derive(Args)]
    struct GenerateArgs {
        /// regtest (the only network generated)
        #[arg(long, value_name = "NET")]
        network: Network,
        /// Headers to write, genesis included (heights 0..N-1)
        #[arg(long, value_name = "N", value_parser = value_parser!(u32).range(1..))]
        count: u32,
        /// Also write FILE.fork: a branch whose first header is at height H (1..N-1)
        #[arg(
            long,
            value_name = "H",
            requires = "fork_len",
            value_parser = value_parser!(u32).range(1..)
        )]
        fork_at: Option<u32>,
        /// Headers on the branch
        #[arg(
            long,
            value_name = "L",
            requires = "fork_at",
            value_parser = value_parser!(u32).range(1..)
        )]
        fork_len: Option<u32>,
        /// Where to write the headers
        file: PathBuf,
    }

    pub(crate) fn main() -> ExitCode {
        // Exits itself on a usage error (2) or after --help (0).
        let cli = Cli::parse();
        let result = match &cli.command {
            Command::Check(args) => check(args),
            Command::Generate(args) => generate(args),
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
            Err(Failure::Usage(err)) => {
                // Printing the error can only fail if stderr is gone; the code still says it.
                let _ = err.print();
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
        /// The command line is wrong in a way clap cannot see (it reports the rest itself).
        Usage(clap::Error),
        /// A file could not be read or written.
        Io(String),
    }

    /// A usage error found after parsing, reported as clap reports its own, with the
    /// subcommand's usage line.
    fn usage(subcommand: &str, msg: String) -> Failure {
        let mut cli = Cli::command();
        cli.build();
        let err = match cli.find_subcommand_mut(subcommand) {
            Some(sub) => sub.error(ErrorKind::ValueValidation, msg),
            None => cli.error(ErrorKind::ValueValidation, msg),
        };
        Failure::Usage(err)
    }

    fn check(o: &CheckArgs) -> Result<String, Failure> {
        let params = o.network.params();
        let path = o.file.display();
        let data = std::fs::read(&o.file).map_err(|e| Failure::Io(format!("{path}: {e}")))?;
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
            let v = validate(params, &window, &header, now)
                .map_err(|e| Failure::Invalid(e.to_string()))?;
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

    fn generate(o: &GenerateArgs) -> Result<String, Failure> {
        if o.network != Network::Regtest {
            return Err(usage(
                "generate",
                format!(
                    "generate makes regtest chains only (asked for {})",
                    o.network
                ),
            ));
        }
        let params = o.network.params();
        let count = o.count;
        // clap has seen that both or neither are given, and that both are at least 1.
        let fork = match (o.fork_at, o.fork_len) {
            (Some(at), Some(len)) if at < count => Some((at, len)),
            (Some(at), Some(_)) => {
                return Err(usage(
                    "generate",
                    format!("--fork-at {at} is not below --count {count}"),
                ));
            }
            _ => None,
        };
        let path = o.file.as_path();
        let fork_path = {
            let mut p = OsString::from(path);
            p.push(".fork");
            PathBuf::from(p)
        };
        let mut main = Writer::create(path)?;
        let mut fork_out = match fork {
            Some(_) => Some(Writer::create(&fork_path)?),
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
            "wrote {count} regtest headers to {}, tip {} {prev_hash}",
            path.display(),
            count - 1
        );
        if let (Some((at, len)), Some(out)) = (fork, fork_out) {
            out.finish()?;
            summary.push_str(&format!(
                "; {len} fork headers at heights {at}..{} to {}",
                u64::from(at) + u64::from(len) - 1,
                fork_path.display()
            ));
        }
        Ok(summary)
    }

    /// A buffered header file writer that reports its path on failure.
    struct Writer {
        path: PathBuf,
        out: std::io::BufWriter<std::fs::File>,
    }

    impl Writer {
        fn create(path: &Path) -> Result<Writer, Failure> {
            let file = std::fs::File::create(path)
                .map_err(|e| Failure::Io(format!("{}: {e}", path.display())))?;
            Ok(Writer {
                path: path.to_path_buf(),
                out: std::io::BufWriter::new(file),
            })
        }

        fn put(&mut self, header: &Header) -> Result<(), Failure> {
            self.out
                .write_all(&header.encode())
                .map_err(|e| Failure::Io(format!("{}: {e}", self.path.display())))
        }

        fn finish(mut self) -> Result<(), Failure> {
            self.out
                .flush()
                .map_err(|e| Failure::Io(format!("{}: {e}", self.path.display())))
        }
    }
}
