//! `lightwire-load` as a process against a gateway in-process on 127.0.0.1: every client
//! syncs the whole chain (with and without compact headers and validation), the results
//! are on stdout, and a gateway that is not there is a failure (exit code 1).

use std::process::Command;

use lightwire_gateway::served::ServedChain;
use lightwire_gateway::server::{Buffers, Shared};
use lightwire_noise::SecretKey;

fn load(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lightwire-load"))
        .args(args)
        .output()
        .expect("runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_syncs_the_chain_and_failures_are_the_exit_code() {
    let chain = ServedChain::generate(3_000, 2_000_000_000).unwrap();
    let key = SecretKey::from_bytes(&[0x11; 32]).unwrap();
    let gw = Shared::builder(chain, key)
        .buffers(Buffers::pooled(8))
        .spawn("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let id = hex::encode(gw.node_id.serialize());
    let connect = format!("ws://{}#{id}", gw.addr);
    for extra in [&[][..], &["--compact", "--validate"][..]] {
        let mut args = vec![
            "--connect",
            &connect,
            "--network",
            "regtest",
            "--clients",
            "3",
        ];
        args.extend_from_slice(extra);
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let out = tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            load(&args)
        })
        .await
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{extra:?}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("connected 3 of 3"), "{stdout}");
        assert!(
            stdout.contains("synced 3 clients (0 failed): 9000 headers"),
            "{stdout}"
        );
    }
    let port = gw.addr.port();
    drop(gw);
    // The listener closes once the serving task sees the stop.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_ok()
    {
        assert!(std::time::Instant::now() < deadline, "still listening");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let gone = format!("ws://127.0.0.1:{port}#{id}");
    let out =
        tokio::task::spawn_blocking(move || load(&["--connect", &gone, "--network", "regtest"]))
            .await
            .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("connected 0 of 1"));
    let out = load(&["--connect", "ws://127.0.0.1:1", "--network", "regtest"]);
    assert_eq!(out.status.code(), Some(2), "no node id: a usage error");
}
