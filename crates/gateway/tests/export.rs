//! `lightwire-gateway export`: the binary writes bulk files a client decodes back into the
//! chain, appends on a longer chain without touching what it sealed, and refuses (exit 1,
//! the reason on stderr, nothing written) changed files and other chains.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::SystemTime;

use lightwire_chain::generate::headers_after;
use lightwire_chain::{Header, REGTEST, hash_header_bytes};
use lightwire_gateway::served::ServedChain;
use lightwire_proto::Served as _;
use lightwire_wire::Message;
use sha2::{Digest as _, Sha256};

const NOW: u64 = 2_000_000_000;

fn gateway(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lightwire-gateway"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("runs")
}

fn export(out: &Path, source: &[&str]) -> Output {
    let mut args = vec!["export", "--out", out.to_str().unwrap()];
    args.extend_from_slice(source);
    gateway(&args)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fresh directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("lightwire-gw-export-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn regtest(&self) -> PathBuf {
        self.0.join("regtest")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every file of `dir`: name -> (bytes, modification time).
fn snapshot(dir: &Path) -> BTreeMap<String, (Vec<u8>, SystemTime)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let modified = e.metadata().unwrap().modified().unwrap();
            let name = e.file_name().into_string().unwrap();
            (name, (std::fs::read(e.path()).unwrap(), modified))
        })
        .collect()
}

fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

/// The records of a bulk file, each one whole message.
fn records(file: &[u8]) -> Vec<&[u8]> {
    lightwire_proto::bulk::records(file).collect()
}

/// A headers file's 80-byte headers, each previous hash rebuilt from the header before
/// (`prev`: the block hash before the file's first header).
fn decode_headers(file: &[u8], first: u32, mut prev: [u8; 32]) -> Vec<[u8; 80]> {
    let messages = records(file);
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let Ok(Message::HeadersCompact(h)) = Message::decode(m) else {
            panic!("record {i} is not headers_compact");
        };
        assert_eq!((h.id, h.first_height), (0, first + out.len() as u32));
        assert_eq!(h.last, i + 1 == messages.len());
        let mut buf = vec![0u8; usize::from(h.count) * 80];
        h.expand(&mut buf).unwrap();
        for raw in buf.chunks_exact(80) {
            let mut header: [u8; 80] = raw.try_into().unwrap();
            header[4..36].copy_from_slice(&prev);
            prev = hash_header_bytes(&header).0;
            out.push(header);
        }
    }
    out
}

/// Checks every entry of the manifest's `key` list: contiguous whole ranges from 0 ending
/// at or below `top`, the file there with the size and SHA-256 its name and entry give.
fn check_entries(dir: &Path, key: &str, prefix: &str, top: u32) -> Vec<serde_json::Value> {
    let list = manifest(dir)[key].as_array().unwrap().clone();
    let mut next = 0;
    for e in &list {
        let (first, last) = (e["first"].as_u64().unwrap(), e["last"].as_u64().unwrap());
        assert_eq!(first, next, "{key} contiguous from 0");
        let size = if key == "headers" {
            2016
        } else if first == 0 {
            1001
        } else {
            1000
        };
        assert_eq!(last - first + 1, size, "{key} whole ranges");
        assert!(
            last <= u64::from(top),
            "{key}: nothing above tip - confirmations"
        );
        next = last + 1;
        let bytes = std::fs::read(dir.join(e["file"].as_str().unwrap())).unwrap();
        let sha = hex::encode(Sha256::digest(&bytes));
        assert_eq!(e["sha256"], sha);
        assert_eq!(e["bytes"], bytes.len() as u64);
        assert_eq!(e["file"], format!("{prefix}-{first}-{last}-{sha}.bin"));
    }
    list
}

#[test]
fn export_writes_files_that_decode_back_into_the_chain() {
    let scratch = Scratch::new("roundtrip");
    let dir = scratch.regtest();
    let o = export(
        &scratch.0,
        &["--generate", "5000", "--confirmations", "100"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        format!(
            "exported 10 new files to {}: headers to 4031, filters to 4000\n",
            dir.display()
        )
    );
    let mut chain = ServedChain::generate(5000, NOW).unwrap();
    chain.serve_generated_filters(0);
    let filters = chain.filters().unwrap();
    let m = manifest(&dir);
    assert_eq!(m["version"], 1);
    assert_eq!(m["network"], "regtest");
    assert_eq!(m["genesis"], REGTEST.genesis.block_hash().to_string());
    assert_eq!(m["height"], 4031);
    assert_eq!(m["hash"], chain.block_hash(4031).unwrap().to_string());

    let headers = check_entries(&dir, "headers", "headers", 4900);
    assert_eq!(headers.len(), 2);
    let mut prev = [0; 32];
    for e in &headers {
        let first = e["first"].as_u64().unwrap() as u32;
        let bytes = std::fs::read(dir.join(e["file"].as_str().unwrap())).unwrap();
        let got = decode_headers(&bytes, first, prev);
        for (i, h) in got.iter().enumerate() {
            assert_eq!(
                Some(*h),
                chain.header(first + i as u32),
                "{}",
                first + i as u32
            );
        }
        prev = hash_header_bytes(got.last().unwrap()).0;
        assert_eq!(e["top"], hash_header_bytes(got.last().unwrap()).to_string());
    }
    let filter_headers = check_entries(&dir, "filterHeaders", "filter-headers", 4900);
    let filter_files = check_entries(&dir, "filters", "filters", 4900);
    assert_eq!((filter_headers.len(), filter_files.len()), (4, 4));
    let mut prev = lightwire_filter::FilterHeader::ZERO;
    for (fh, fl) in filter_headers.iter().zip(&filter_files) {
        // Filter headers: chained from the anchor before the file, ending at `top`.
        let bytes = std::fs::read(dir.join(fh["file"].as_str().unwrap())).unwrap();
        let mut height = fh["first"].as_u64().unwrap() as u32;
        for m in records(&bytes) {
            let Ok(Message::FilterHeaders(f)) = Message::decode(m) else {
                panic!("not filter_headers");
            };
            assert_eq!(f.first_height, height);
            assert_eq!(f.anchors[..32], prev.0, "the filter header before");
            for hash in f.hashes.chunks_exact(32) {
                prev = prev.next(&lightwire_filter::FilterHash(hash.try_into().unwrap()));
                assert_eq!(prev, filters.entry(height).unwrap().header);
                height += 1;
            }
        }
        assert_eq!(fh["top"], prev.to_string());
        // Filters: each whole, in order, with the hash its filter header chains.
        let bytes = std::fs::read(dir.join(fl["file"].as_str().unwrap())).unwrap();
        let mut height = fl["first"].as_u64().unwrap() as u32;
        let mut filter = Vec::new();
        let messages = records(&bytes);
        for (i, m) in messages.iter().enumerate() {
            let Ok(Message::Filters(f)) = Message::decode(m) else {
                panic!("not filters");
            };
            assert_eq!(f.flags.last, i + 1 == messages.len());
            for p in f.pieces() {
                assert_eq!((p.height, p.offset as usize), (height, filter.len()));
                filter.extend_from_slice(p.data);
                if p.ends_filter() {
                    let hash = lightwire_filter::FilterHash::of(&filter);
                    assert_eq!(hash, filters.entry(height).unwrap().hash, "{height}");
                    filter.clear();
                    height += 1;
                }
            }
        }
        assert_eq!(u64::from(height), fl["last"].as_u64().unwrap() + 1);
    }
}

#[test]
fn export_appends_and_a_run_with_nothing_new_changes_nothing() {
    let scratch = Scratch::new("append");
    let dir = scratch.regtest();
    let o = export(&scratch.0, &["--generate", "5000"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let first = snapshot(&dir);

    let o = export(&scratch.0, &["--generate", "5000"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("exported 0 new files to "),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        snapshot(&dir),
        first,
        "every file, the manifest included, untouched"
    );

    std::thread::sleep(std::time::Duration::from_millis(20));
    let o = export(&scratch.0, &["--generate", "9000"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).ends_with(": headers to 8063, filters to 8000\n"),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).starts_with("exported 10 new files"));
    let second = snapshot(&dir);
    for (name, old) in first.iter().filter(|(n, _)| *n != "manifest.json") {
        assert_eq!(
            second.get(name),
            Some(old),
            "{name}: bytes and mtime unchanged"
        );
    }
    assert_eq!(second.len(), first.len() + 10, "only new files added");
    let listed: Vec<String> = ["headers", "filterHeaders", "filters"]
        .iter()
        .flat_map(|k| manifest(&dir)[*k].as_array().unwrap().clone())
        .map(|e| e["file"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed.len(), 4 + 8 + 8);
    for name in second.keys().filter(|n| *n != "manifest.json") {
        assert!(listed.contains(name), "{name} is listed");
    }
    check_entries(&dir, "headers", "headers", 8994);
    check_entries(&dir, "filters", "filters", 8994);
}

#[test]
fn export_refuses_a_changed_file_and_another_chain_writing_nothing() {
    let scratch = Scratch::new("refuse");
    let dir = scratch.regtest();
    let o = export(&scratch.0, &["--generate", "5000"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let before = snapshot(&dir);

    // A headers file of another branch from height 3,000: the sealed headers file ending
    // at 4,031 says otherwise.
    let main = headers_after(&REGTEST, &REGTEST.genesis, 0, 3000, 0);
    let branch = headers_after(&REGTEST, &main[2999], 3000, 6000, 1);
    let file = scratch.0.join("branch.bin");
    let bytes: Vec<u8> = std::iter::once(&REGTEST.genesis)
        .chain(&main)
        .chain(&branch)
        .flat_map(Header::encode)
        .collect();
    std::fs::write(&file, bytes).unwrap();
    let file = file.to_str().unwrap();
    let o = export(
        &scratch.0,
        &["--headers-file", file, "--network", "regtest"],
    );
    assert_eq!(o.status.code(), Some(1));
    let why = stderr(&o);
    assert!(why.starts_with("lightwire-gateway: "), "{why}");
    assert!(
        why.contains("contradicts") && why.contains("at height 4031"),
        "{why}"
    );
    assert_eq!(snapshot(&dir), before, "nothing written");

    // Each network has its own directory; a manifest of another network in it (copied
    // there by hand) is refused.
    let text = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    let signet = scratch.0.join("signet");
    std::fs::create_dir_all(&signet).unwrap();
    std::fs::write(signet.join("manifest.json"), &text).unwrap();
    let genesis = scratch.0.join("signet.bin");
    std::fs::write(&genesis, lightwire_chain::SIGNET.genesis.encode()).unwrap();
    let o = export(
        &scratch.0,
        &[
            "--headers-file",
            genesis.to_str().unwrap(),
            "--network",
            "signet",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("the export is of regtest, the chain of signet"),
        "{}",
        stderr(&o)
    );

    // One byte of a sealed filters file changed: refused naming it, nothing written.
    let m = manifest(&dir);
    let victim = m["filters"][2]["file"].as_str().unwrap().to_owned();
    let mut bytes = std::fs::read(dir.join(&victim)).unwrap();
    bytes[50] ^= 0x40;
    std::fs::write(dir.join(&victim), &bytes).unwrap();
    let before = snapshot(&dir);
    let o = export(&scratch.0, &["--generate", "9000"]);
    assert_eq!(o.status.code(), Some(1));
    let why = stderr(&o);
    assert!(why.starts_with("lightwire-gateway: "), "{why}");
    assert!(why.contains(&victim) && why.contains("changed"), "{why}");
    assert_eq!(snapshot(&dir), before, "nothing written");

    std::fs::remove_file(dir.join(&victim)).unwrap();
    let o = export(&scratch.0, &["--generate", "9000"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("missing"), "{}", stderr(&o));
}

#[test]
fn a_headers_file_writes_headers_only() {
    let scratch = Scratch::new("headers-only");
    let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 4100, 0);
    let file = scratch.0.join("headers.bin");
    let bytes: Vec<u8> = std::iter::once(&REGTEST.genesis)
        .chain(&headers)
        .flat_map(Header::encode)
        .collect();
    std::fs::write(&file, bytes).unwrap();
    let o = export(
        &scratch.0,
        &[
            "--headers-file",
            file.to_str().unwrap(),
            "--network",
            "regtest",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).ends_with(": headers to 4031, filters to none\n"),
        "{}",
        stdout(&o)
    );
    let names: Vec<String> = snapshot(&scratch.regtest()).into_keys().collect();
    assert_eq!(
        names.len(),
        3,
        "two headers files and the manifest: {names:?}"
    );
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("headers-") || n == "manifest.json")
    );
    let m = manifest(&scratch.regtest());
    assert_eq!(m["filterHeaders"], serde_json::json!([]));
    assert_eq!(m["filters"], serde_json::json!([]));
}

#[test]
fn export_needs_no_listen_address_and_the_server_line_is_unchanged() {
    let scratch = Scratch::new("usage");
    // No --out, no source, a headers file without its network: usage errors (2).
    for (args, names) in [
        (vec!["export", "--generate", "10"], vec!["--out"]),
        (
            vec!["export", "--out", "x"],
            vec!["--generate", "--headers-file"],
        ),
        (
            vec!["export", "--out", "x", "--headers-file", "f"],
            vec!["--network"],
        ),
        (
            vec![
                "export",
                "--out",
                "x",
                "--generate",
                "1",
                "--headers-file",
                "f",
            ],
            vec!["cannot be used with"],
        ),
    ] {
        let o = gateway(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        for name in names {
            assert!(stderr(&o).contains(name), "{args:?}: {}", stderr(&o));
        }
    }
    // A short chain seals nothing; the manifest is written all the same.
    let o = export(&scratch.0, &["--generate", "10"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).ends_with(": headers to none, filters to none\n"));
    assert_eq!(manifest(&scratch.regtest())["height"], 0);
    // The server's flat command line still wants --listen and --key-file.
    let o = gateway(&["--generate", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--listen"), "{}", stderr(&o));
    let o = gateway(&["--help"]);
    assert!(stdout(&o).contains("lightwire-gateway export --help"));
}
