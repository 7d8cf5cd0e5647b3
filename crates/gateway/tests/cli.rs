//! The `lightwire-gateway` binary: key file, the connect line, serving, clean shutdown.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lightwire_chain::REGTEST;
use lightwire_gateway::client::{Client, Framing};
use lightwire_noise::PublicKey;
use lightwire_wire::{GetHeaders, Message};

fn gateway(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lightwire-gateway"));
    c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// Start the gateway; returns it with the node id and address from its connect line.
fn start(key_file: &str, extra: &[&str]) -> (Child, String, SocketAddr) {
    let mut args = vec!["--listen", "127.0.0.1:0", "--key-file", key_file];
    args.extend_from_slice(extra);
    started(gateway(&args))
}

/// Run `command` (the gateway, possibly behind a shell); returns it with the node id and
/// address from its connect line.
fn started(mut command: Command) -> (Child, String, SocketAddr) {
    let mut child = command.spawn().expect("runs");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("a line");
    // "node id <hex> connect ws://HOST:PORT#<hex>"
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[..2], ["node", "id"], "{line}");
    assert_eq!(words[3], "connect", "{line}");
    let node_id = words[2].to_string();
    let url = words[4]
        .strip_prefix("ws://")
        .expect("ws:// connect string");
    let (addr, id) = url.split_once('#').expect("#node-id");
    assert_eq!(id, node_id);
    (child, node_id, addr.parse().expect("HOST:PORT"))
}

/// The gateway's stderr line that gives its metrics URL (`--metrics-listen`).
fn metrics_line(err: &mut impl BufRead) -> String {
    let mut line = String::new();
    while !line.contains("/metrics") {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "no metrics line");
    }
    line
}

/// The gateway's `/metrics` text (the address from its stderr line).
fn scrape(stderr_line: &str) -> String {
    use std::io::{Read, Write};
    let url = stderr_line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("metrics URL");
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

/// The metrics once they hold `want`, or as they are after 2 s: the gateway counts some
/// things just after the act a client sees (a frame's headers after its write returns).
fn scrape_until(stderr_line: &str, want: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let text = scrape(stderr_line);
        if text.contains(want) || Instant::now() >= deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An empty directory of the system's temporary one, for one test of this process.
fn fresh_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("lightwire-gw-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn terminate(mut child: Child) -> i32 {
    let pid = child.id().to_string();
    Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code().unwrap_or(-1);
        }
        assert!(Instant::now() < deadline, "did not exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn serves_with_a_kept_key_and_stops_on_sigterm() {
    let dir = fresh_dir("cli");
    let key_file = dir.join("gateway.key");
    let key_path = key_file.to_str().unwrap();

    let (child, node_id, addr) = start(key_path, &["--generate", "3000"]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "key file mode {mode:o}");
    }
    assert_eq!(std::fs::read(&key_file).unwrap().len(), 32);

    // A client using the printed connect string syncs to the tip.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let key = PublicKey::from_slice(&hex::decode(&node_id).unwrap()).unwrap();
    let tip = runtime.block_on(async {
        let mut c = Client::connect(
            addr,
            &key,
            REGTEST.genesis.block_hash().0,
            Framing::OnePerFrame,
        )
        .await
        .expect("connects");
        c.recv(|_| ()).await.unwrap();
        c.recv(|_| ()).await.unwrap();
        let req = GetHeaders {
            id: 1,
            max_count: 5000,
            stop_hash: [0; 32],
            locator: &[],
        };
        c.send(&Message::GetHeaders(req)).await.unwrap();
        let mut last_height = 0;
        loop {
            let (first, n, last) = c
                .recv(|m| match Message::decode(m) {
                    Ok(Message::Headers(h)) => (h.first_height, h.count() as u32, h.last),
                    other => panic!("{other:?}"),
                })
                .await
                .unwrap();
            last_height = last_height.max(first + n - 1);
            if last {
                break last_height;
            }
        }
    });
    assert_eq!(tip, 3000);
    assert_eq!(terminate(child), 0);

    // The key is kept: the same node id next time.
    let (child, again, _) = start(key_path, &["--generate", "10"]);
    assert_eq!(again, node_id);
    assert_eq!(terminate(child), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--export-dir`: the gateway writes its chain's bulk files and manifest while it
/// serves (here a generated chain, with its filters), and stops cleanly.
#[test]
fn keeps_an_export_of_its_chain_while_it_serves() {
    let dir = fresh_dir("export");
    let key_file = dir.join("gateway.key");
    let out = dir.join("bulk");
    let (mut child, _, _) = start(
        key_file.to_str().unwrap(),
        &[
            "--generate",
            "2100",
            "--export-dir",
            out.to_str().unwrap(),
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    );
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let metrics_line = metrics_line(&mut err);
    let manifest = out.join("regtest").join("manifest.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    let listed = loop {
        if let Some(m) = std::fs::read(&manifest)
            .ok()
            .and_then(|b| lightwire_gateway::export::Manifest::parse(&b).ok())
        {
            break m;
        }
        assert!(
            Instant::now() < deadline,
            "no manifest in {}",
            out.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    use lightwire_gateway::export::Kind;
    let last = |k| listed.entries(k).last().map(|e| e.last);
    assert_eq!(last(Kind::Headers), Some(2015));
    assert_eq!(last(Kind::FilterHeaders), Some(2000));
    assert_eq!(last(Kind::Filters), Some(2000));
    // /metrics says how far it is sealed (set just after the manifest is written).
    let text = scrape_until(&metrics_line, "lightwire_export_filters_to 2000");
    for want in [
        "lightwire_export_headers_to 2015",
        "lightwire_export_filters_to 2000",
        "lightwire_export_failures_total 0",
    ] {
        assert!(text.lines().any(|l| l == want), "{want} not in\n{text}");
    }
    assert_eq!(terminate(child), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn serves_a_headers_file_and_reports_metrics() {
    use lightwire_chain::generate::headers_after;
    let dir = fresh_dir("file");
    let file = dir.join("chain.headers");
    let mut data = REGTEST.genesis.encode().to_vec();
    for h in headers_after(&REGTEST, &REGTEST.genesis, 0, 2500, 0) {
        data.extend_from_slice(&h.encode());
    }
    std::fs::write(&file, &data).unwrap();
    let key = dir.join("k");
    let mut args = vec![
        "--listen",
        "127.0.0.1:0",
        "--key-file",
        key.to_str().unwrap(),
    ];
    args.extend_from_slice(&[
        "--headers-file",
        file.to_str().unwrap(),
        "--network",
        "regtest",
    ]);
    args.extend_from_slice(&["--metrics-listen", "127.0.0.1:0"]);
    let mut child = gateway(&args).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    let (addr, id) = words[4]
        .trim_start_matches("ws://")
        .split_once('#')
        .unwrap();
    let metrics_line = metrics_line(&mut err);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let key = PublicKey::from_slice(&hex::decode(id).unwrap()).unwrap();
    let served = runtime.block_on(async {
        let mut c = Client::connect(
            addr.parse().unwrap(),
            &key,
            REGTEST.genesis.block_hash().0,
            Framing::OnePerFrame,
        )
        .await
        .unwrap();
        c.recv(|_| ()).await.unwrap();
        c.recv(|_| ()).await.unwrap();
        let req = GetHeaders {
            id: 1,
            max_count: 3000,
            stop_hash: [0; 32],
            locator: &[],
        };
        c.send(&Message::GetHeaders(req)).await.unwrap();
        let mut n = 0;
        loop {
            let (count, last) = c
                .recv(|m| match Message::decode(m) {
                    Ok(Message::Headers(h)) => (h.count(), h.last),
                    other => panic!("{other:?}"),
                })
                .await
                .unwrap();
            n += count;
            if last {
                break (n, c);
            }
        }
    });
    let (served, _open) = served;
    assert_eq!(served, 2500);
    // The gateway counts a frame's headers after its write returns, so a client can read
    // the last frame and scrape before the gateway's task runs on (on a loaded machine it
    // did, and saw 2457): scrape until they are counted, 2 s at most. The client stays
    // connected and silent meanwhile, so the count cannot come from its close either.
    let text = scrape_until(&metrics_line, "lightwire_headers_served_total 2500");
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    for want in [
        "lightwire_connections_total 1",
        "# TYPE lightwire_connections_open gauge",
        "lightwire_handshakes_completed_total 1",
        "lightwire_headers_served_total 2500",
        "lightwire_tip_height 2500",
        "lightwire_messages_in_total 2",
        "# TYPE lightwire_bytes_in_total counter",
        "# TYPE lightwire_bytes_out_total counter",
        "# TYPE lightwire_messages_out_total counter",
        "# TYPE lightwire_pool_in_use gauge",
        "# TYPE lightwire_allocations_total counter",
        "# TYPE lightwire_handshake_failures_total counter",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    assert_eq!(terminate(child), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A gateway for the caps tests, started with `flags` (and `--metrics-listen`): the
/// process, the line naming its metrics address, where it listens, its node id, and its
/// directory.
fn capped_gateway(
    name: &str,
    flags: &[&str],
) -> (Child, String, SocketAddr, PublicKey, std::path::PathBuf) {
    let dir = fresh_dir(name);
    let key = dir.join("k");
    let mut args = vec![
        "--generate",
        "10",
        "--metrics-listen",
        "127.0.0.1:0",
        "--log",
        "off",
    ];
    args.extend_from_slice(flags);
    let (mut child, node_id, addr) = start(key.to_str().unwrap(), &args);
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut metrics_line = String::new();
    err.read_line(&mut metrics_line).unwrap();
    let id = PublicKey::from_slice(&hex::decode(&node_id).unwrap()).unwrap();
    (child, metrics_line, addr, id, dir)
}

/// What a caps test ends with: `/metrics` holds every line of `wants`; the gateway stops
/// cleanly; its directory goes.
fn finish_capped(child: Child, metrics_line: &str, dir: &std::path::Path, wants: &[&str]) {
    let text = scrape(metrics_line);
    for want in wants {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    assert_eq!(terminate(child), 0);
    std::fs::remove_dir_all(dir).unwrap();
}

/// A client of the gateway at `addr` (node id `id`) connecting from the loopback address
/// `from`.
async fn connect_from(
    addr: SocketAddr,
    id: &PublicKey,
    from: &str,
) -> Result<Client, lightwire_gateway::client::ClientError> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let stream = socket.connect(addr).await.unwrap();
    Client::over(
        stream,
        id,
        REGTEST.genesis.block_hash().0,
        Framing::OnePerFrame,
    )
    .await
}

#[test]
fn connections_over_the_caps_are_refused_with_a_503_and_counted() {
    let (child, metrics_line, addr, id, dir) = capped_gateway(
        "caps",
        &["--max-connections", "2", "--max-per-address", "1"],
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let connect = |from: &'static str| connect_from(addr, &id, from);
    runtime.block_on(async {
        let mut first = connect("127.0.0.1").await.expect("the first is served");
        first.recv(|_| ()).await.expect("init");
        // A second from the same address: the upgrade is answered 503 (the per-address
        // cap of 1).
        let refused = connect("127.0.0.1").await;
        assert!(refused.is_err(), "served over --max-per-address 1");
        let mut second = connect("127.0.0.2")
            .await
            .expect("another address is served");
        second.recv(|_| ()).await.expect("init");
        // A third address: over --max-connections 2.
        let refused = connect("127.0.0.3").await;
        assert!(refused.is_err(), "served over --max-connections 2");
    });
    finish_capped(
        child,
        &metrics_line,
        &dir,
        &[
            "# TYPE lightwire_refused_connections_total counter",
            "lightwire_refused_connections_total{reason=\"max_per_address\"} 1",
            "lightwire_refused_connections_total{reason=\"max_connections\"} 1",
            "lightwire_connections_total 2",
        ],
    );
}

/// `--max-new-per-second`: from one address, a burst of that many connections, then a 503
/// and a count, while another address still gets in.
#[test]
fn connections_opened_too_fast_from_one_address_are_refused() {
    let (child, metrics_line, addr, id, dir) =
        capped_gateway("rate", &["--max-new-per-second", "2"]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let connect = |from: &'static str| connect_from(addr, &id, from);
    runtime.block_on(async {
        // Within the same second (the burst is 2; the third comes at most a few ms later).
        for _ in 0..2 {
            let mut c = connect("127.0.0.1").await.expect("within the burst");
            c.recv(|_| ()).await.expect("init");
        }
        let refused = connect("127.0.0.1").await;
        assert!(refused.is_err(), "served over --max-new-per-second 2");
        let mut other = connect("127.0.0.2")
            .await
            .expect("another address is served");
        other.recv(|_| ()).await.expect("init");
    });
    finish_capped(
        child,
        &metrics_line,
        &dir,
        &[
            "lightwire_refused_connections_total{reason=\"max_new_per_second\"} 1",
            "lightwire_connections_total 3",
        ],
    );
}

/// A usage error's message, without the usage line that follows it (which names every
/// required flag whatever the error is).
fn error_part(stderr: &str) -> &str {
    stderr.split("\nUsage:").next().unwrap_or(stderr)
}

#[test]
fn usage_errors_name_what_is_wrong() {
    // A server's command line: `--listen` and `--key-file`, then `extra`.
    let served = |extra: &[&'static str]| {
        let mut args = vec!["--listen", "127.0.0.1:0", "--key-file", "k"];
        args.extend_from_slice(extra);
        args
    };
    for (args, names) in [
        (
            vec!["--listen", "127.0.0.1:0", "--generate", "1"],
            vec!["required", "--key-file"],
        ),
        (
            vec!["--listen", "127.0.0.1:0", "--key-file", "k"],
            vec!["required", "--generate", "--headers-file", "--upstream"],
        ),
        (
            vec!["--listen", "x:1", "--key-file", "k", "--generate", "1"],
            vec!["--listen", "x:1 is not HOST:PORT"],
        ),
        (
            served(&["--generate", "1", "--export-confirmations", "3"]),
            vec!["required", "--export-dir"],
        ),
        (
            served(&["--generate", "1", "--upstream", "127.0.0.1:1"]),
            vec!["--generate", "cannot be used with", "--upstream"],
        ),
        (
            served(&["--headers-file", "f"]),
            vec!["required", "--network"],
        ),
        (
            served(&["--upstream", "127.0.0.1:1"]),
            vec!["required", "--network"],
        ),
        (
            served(&["--upstream", "127.0.0.1:1", "--network", "moon"]),
            vec!["--network", "moon"],
        ),
        (served(&["--generate", "ten"]), vec!["--generate", "ten"]),
        (
            served(&["--generate", "1", "--buffers", "shared"]),
            vec!["--buffers", "shared", "pooled", "fixed"],
        ),
        (
            served(&["--generate", "1", "--log", "info=loud"]),
            vec!["--log", "info=loud"],
        ),
        (
            served(&["--generate", "1", "--max-per-address", "lots"]),
            vec!["--max-per-address", "lots"],
        ),
        (
            vec!["--listen", "127.0.0.1:0", "--frobnicate"],
            vec!["--frobnicate"],
        ),
        // What tests need of a gateway that lies or pays a wallet is in the test crate's
        // lightwire-hostile, not in the gateway that ships.
        (
            served(&["--generate", "10", "--corrupt-at", "5"]),
            vec!["unexpected argument", "--corrupt-at"],
        ),
        (
            served(&["--generate", "10", "--payments", "f"]),
            vec!["unexpected argument", "--payments"],
        ),
    ] {
        let out = gateway(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        for name in names {
            assert!(error_part(&stderr).contains(name), "{args:?}: {stderr}");
        }
    }
    // RUST_LOG is read when --log is not given, and checked the same way.
    let out = gateway(&[
        "--listen",
        "127.0.0.1:0",
        "--key-file",
        "k",
        "--generate",
        "1",
    ])
    .env("RUST_LOG", "info=loud")
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("RUST_LOG=info=loud"));

    let out = gateway(&["--help"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--listen",
        "--key-file",
        "--metrics-listen",
        "--buffers",
        "--pool",
        "--max-connections",
        "--max-per-address",
        "--log",
        "--generate",
        "--headers-file",
        "--from-height",
        "--upstream",
        "--network",
    ] {
        assert!(help.contains(flag), "--help does not name {flag}:\n{help}");
    }
}

/// The connect line and the metrics URL are the program's output, printed whatever `--log`
/// filters out; the logs follow `--log`.
#[test]
fn the_connect_and_metrics_lines_do_not_depend_on_the_log_filter() {
    let dir = fresh_dir("log");
    let key = dir.join("k");
    for (log, logs_serving) in [("off", false), ("info", true)] {
        let (mut child, _, _) = start(
            key.to_str().unwrap(),
            &[
                "--generate",
                "10",
                "--metrics-listen",
                "127.0.0.1:0",
                "--log",
                log,
            ],
        );
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut metrics_line = String::new();
        err.read_line(&mut metrics_line).unwrap();
        if logs_serving {
            // The "serving" event comes before the metrics listener is bound.
            assert!(
                metrics_line.contains("serving 11 headers of regtest"),
                "{metrics_line}"
            );
            metrics_line.clear();
            err.read_line(&mut metrics_line).unwrap();
        }
        assert!(
            metrics_line.starts_with("lightwire-gateway: metrics on http://127.0.0.1:")
                && metrics_line.trim_end().ends_with("/metrics"),
            "{log}: {metrics_line}"
        );
        assert_eq!(terminate(child), 0);
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
        assert_eq!(
            rest.contains("shutting down"),
            logs_serving,
            "{log}: {rest}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_sources_are_refused() {
    let dir = std::env::temp_dir().join(format!("lightwire-gw-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let headers = dir.join("bad.headers");
    std::fs::write(&headers, [0u8; 81]).unwrap();
    let key = dir.join("k");
    let out = gateway(&[
        "--listen",
        "127.0.0.1:0",
        "--key-file",
        key.to_str().unwrap(),
        "--headers-file",
        headers.to_str().unwrap(),
        "--network",
        "regtest",
    ])
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("not a whole, non-zero number of 80-byte headers"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let with_key = || {
        gateway(&[
            "--listen",
            "127.0.0.1:0",
            "--key-file",
            key.to_str().unwrap(),
            "--generate",
            "1",
        ])
        .output()
        .unwrap()
    };
    std::fs::write(&key, [1u8; 5]).unwrap();
    let out = with_key();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a 32-byte secret key"));
    // A valid key that other users can read is refused, with the fix in the sentence.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(&key, [7u8; 32]).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let out = with_key();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("open to other users (mode 644)") && stderr.contains("chmod 600"),
            "{stderr}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// CPU time a process has used, in clock ticks (user + system, /proc/PID/stat).
#[cfg(target_os = "linux")]
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after_name = &stat[stat.rfind(')').expect("(comm)") + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // Fields 14 and 15 of the whole line: 12 and 13 after the name and state.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
#[cfg(target_os = "linux")]
fn out_of_descriptors_the_gateway_pauses_instead_of_spinning_and_recovers() {
    let dir = fresh_dir("fd");
    let key = dir.join("gateway.key");
    // The gateway with 48 descriptors, behind a shell that sets the limit.
    let mut command = Command::new("sh");
    command
        .args([
            "-c",
            "ulimit -n 48 && exec \"$0\" \"$@\"",
            env!("CARGO_BIN_EXE_lightwire-gateway"),
            "--listen",
            "127.0.0.1:0",
            "--key-file",
            key.to_str().unwrap(),
            "--generate",
            "10",
            // 80 connections from 127.0.0.1: the per-address caps must not be what stops
            // them.
            "--max-per-address",
            "1000",
            "--max-new-per-second",
            "1000",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let (child, node_id, addr) = started(command);
    // Killed if an assertion fails before the clean stop at the end.
    struct Stop(Option<Child>);
    impl Drop for Stop {
        fn drop(&mut self) {
            if let Some(c) = self.0.as_mut() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
    let mut child = Stop(Some(child));
    let pid = child.0.as_ref().map_or(0, Child::id);
    // More connections than it has descriptors; they wait in the backlog (each accepted
    // one is closed by the handshake deadline after 5 s).
    let held: Vec<std::net::TcpStream> = (0..80)
        .filter_map(|_| std::net::TcpStream::connect(addr).ok())
        .collect();
    assert!(held.len() > 48, "{} connections", held.len());
    std::thread::sleep(Duration::from_millis(300));
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_ticks(pid) - before;
    // A loop retrying accept at once burns the whole 2 s (about 200 ticks).
    assert!(
        used < 40,
        "{used} ticks of CPU in 2 s while out of descriptors"
    );
    // Once descriptors are free again, clients are served.
    drop(held);
    std::thread::sleep(Duration::from_millis(1_200));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let id = PublicKey::from_slice(&hex::decode(&node_id).unwrap()).unwrap();
    runtime.block_on(async {
        let mut c = tokio::time::timeout(
            Duration::from_secs(10),
            Client::connect(
                addr,
                &id,
                REGTEST.genesis.block_hash().0,
                Framing::OnePerFrame,
            ),
        )
        .await
        .expect("served again in time")
        .expect("connects");
        c.recv(|_| ()).await.expect("the gateway's init");
    });
    assert_eq!(terminate(child.0.take().expect("running")), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}
