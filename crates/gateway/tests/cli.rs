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
    let mut child = gateway(&args).spawn().expect("runs");
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
    let dir = std::env::temp_dir().join(format!("lightwire-gw-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
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

#[test]
fn bad_arguments_and_bad_sources_are_refused() {
    let out = gateway(&["--listen", "127.0.0.1:0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--key-file is required"));

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
    std::fs::write(&key, [1u8; 5]).unwrap();
    let out = gateway(&[
        "--listen",
        "127.0.0.1:0",
        "--key-file",
        key.to_str().unwrap(),
        "--generate",
        "1",
    ])
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a 32-byte secret key"));
    std::fs::remove_dir_all(&dir).unwrap();
}
