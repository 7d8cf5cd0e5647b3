//! The `lightwire-chain` binary, run as a user would: exit codes and the one summary line.
#![cfg(not(target_arch = "wasm32"))]

use std::path::PathBuf;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_lightwire-chain");

fn shared(rel: &str) -> PathBuf {
    let p = PathBuf::from(env!("LIGHTWIRE_SHARED")).join(rel);
    assert!(p.exists(), "shared test data missing: {}", p.display());
    p
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run lightwire-chain")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A usage error's message, without the usage line that follows it (which names every
/// required option).
fn error_part(stderr: &str) -> &str {
    stderr.split("\nUsage:").next().unwrap_or(stderr)
}

/// A scratch directory for this test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("lightwire-chain-cli-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }

    fn path(&self, file: &str) -> String {
        self.0.join(file).to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn check_accepts_real_mainnet_with_one_summary_line() {
    let file = shared("data/headers/mainnet_0-39999.bin");
    let out = run(&["check", "--network", "mainnet", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_eq!(stdout.lines().count(), 1);
    assert!(
        stdout.starts_with(
            "ok: 40000 mainnet headers, tip 39999 000000002509f3a013a1d21b89fe33306a45b1fcbb485dd4d310e4f9b2c09945, chainwork "
        ),
        "{stdout}"
    );
}

#[test]
fn check_names_the_first_failing_height_and_rule() {
    let scratch = Scratch::new("mutated");
    let mut data = std::fs::read(shared("data/headers/mainnet_0-39999.bin")).unwrap();
    data[80 * 1234 + 76] ^= 1; // nonce of header 1234
    let path = scratch.path("mutated.bin");
    std::fs::write(&path, &data).unwrap();
    let out = run(&["check", "--network", "mainnet", &path]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("height 1234") && stderr.contains("high-hash"),
        "{stderr}"
    );

    data[80 * 1234 + 76] ^= 1;
    data[80 * 500 + 4] ^= 1; // prev-hash of header 500
    std::fs::write(&path, &data).unwrap();
    let stderr = text(&run(&["check", "--network", "mainnet", &path]).stderr);
    assert!(
        stderr.contains("height 500") && stderr.contains("prev-hash"),
        "{stderr}"
    );
}

#[test]
fn check_refuses_bad_input_with_reasons() {
    let scratch = Scratch::new("bad");
    let file = shared("data/headers/mainnet_0-39999.bin");
    let out = run(&["check", "--network", "signet", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("not signet's genesis"));

    let partial = scratch.path("partial.bin");
    std::fs::write(&partial, [0u8; 81]).unwrap();
    let out = run(&["check", "--network", "mainnet", &partial]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("81 bytes is not a whole number"));

    let missing = scratch.path("missing.bin");
    let out = run(&["check", "--network", "mainnet", &missing]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("missing.bin"),
        "{}",
        text(&out.stderr)
    );

    // Usage errors: exit 2, naming what is wrong (the wording is clap's).
    for (args, names) in [
        (
            &["check", "--network", "dogecoin", &partial][..],
            "dogecoin",
        ),
        (&["check", &partial][..], "--network"),
        (&["check", "--network", "mainnet"][..], "<FILE>"),
        (
            &[
                "check",
                "--network",
                "mainnet",
                "--from-height",
                "x",
                &partial,
            ][..],
            "--from-height",
        ),
        (
            &["check", "--network", "mainnet", "--bogus", &partial][..],
            "--bogus",
        ),
        (&["frobnicate"][..], "frobnicate"),
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(error_part(&stderr).contains(names), "{args:?}: {stderr}");
    }
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("Usage: lightwire-chain <COMMAND>"));
}

#[test]
fn help_is_not_an_error() {
    let out = run(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("check") && stdout.contains("generate"),
        "{stdout}"
    );
    let out = run(&["check", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("--from-height"));
}

#[test]
fn check_from_a_trusted_height() {
    let scratch = Scratch::new("from");
    let data = std::fs::read(shared("data/headers/mainnet_0-39999.bin")).unwrap();
    let path = scratch.path("from32256.bin");
    std::fs::write(&path, &data[80 * 32256..]).unwrap();
    let out = run(&[
        "check",
        "--network",
        "mainnet",
        "--from-height",
        "32256",
        &path,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("tip 39999"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn generate_then_check_with_a_fork() {
    let scratch = Scratch::new("generate");
    let path = scratch.path("regtest.bin");
    let out = run(&[
        "generate",
        "--network",
        "regtest",
        "--count",
        "3000",
        "--fork-at",
        "2500",
        "--fork-len",
        "600",
        &path,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 3000 * 80);
    assert_eq!(
        std::fs::metadata(format!("{path}.fork")).unwrap().len(),
        600 * 80
    );
    let out = run(&["check", "--network", "regtest", &path]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("ok: 3000 regtest headers, tip 2999 "));

    // The branch, checked from its parent (main header 2499) as a trusted start.
    let main = std::fs::read(&path).unwrap();
    let mut branch = main[80 * 2499..80 * 2500].to_vec();
    branch.extend_from_slice(&std::fs::read(format!("{path}.fork")).unwrap());
    let branch_path = scratch.path("branch.bin");
    std::fs::write(&branch_path, &branch).unwrap();
    let out = run(&[
        "check",
        "--network",
        "regtest",
        "--from-height",
        "2499",
        &branch_path,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("tip 3099 "),
        "{}",
        text(&out.stdout)
    );

    // Deterministic: the same command writes the same bytes.
    let again = scratch.path("again.bin");
    assert!(
        run(&[
            "generate",
            "--network",
            "regtest",
            "--count",
            "3000",
            &again
        ])
        .status
        .success()
    );
    assert_eq!(std::fs::read(&again).unwrap(), main);

    // Usage errors: exit 2, naming what is wrong, and nothing written.
    let unwritten = scratch.path("unwritten.bin");
    for (args, names) in [
        (&["--network", "mainnet", "--count", "10"][..], "regtest"),
        (&["--network", "regtest", "--count", "0"][..], "--count"),
        (&["--network", "regtest"][..], "--count"),
        (
            &["--network", "regtest", "--count", "10", "--fork-at", "5"][..],
            "--fork-len",
        ),
        (
            &["--network", "regtest", "--count", "10", "--fork-len", "2"][..],
            "--fork-at",
        ),
        (
            &[
                "--network",
                "regtest",
                "--count",
                "10",
                "--fork-at",
                "10",
                "--fork-len",
                "2",
            ][..],
            "--fork-at",
        ),
        (
            &[
                "--network",
                "regtest",
                "--count",
                "10",
                "--fork-at",
                "0",
                "--fork-len",
                "2",
            ][..],
            "--fork-at",
        ),
        (
            &[
                "--network",
                "regtest",
                "--count",
                "10",
                "--fork-at",
                "5",
                "--fork-len",
                "0",
            ][..],
            "--fork-len",
        ),
    ] {
        let out = run(&[&["generate"], args, &[unwritten.as_str()]].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(error_part(&stderr).contains(names), "{args:?}: {stderr}");
        assert!(!std::path::Path::new(&unwritten).exists(), "{args:?}");
    }
}
