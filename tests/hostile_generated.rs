//! `lightwire-hostile --generate` as a process: it starts as the real gateway does (the
//! connect line, the metrics line, a kept key file), serves the lie it was given over the
//! protocol to a native client, and refuses a lie outside the chain.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use lightwire_chain::{Chain, ConnectError, HEADER_LEN, Header, REGTEST, Rule};
use lightwire_gateway::client::{Client, Framing};
use lightwire_noise::PublicKey;
use lightwire_wire::{GetHeaders, Message};

fn hostile(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lightwire-hostile"));
    c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// Killed when dropped, whatever the test did.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every header the gateway at `connect` (a connect line's `ws://HOST:PORT#ID`) serves.
fn fetch_headers(connect: &str) -> Vec<Header> {
    let (addr, id) = connect
        .strip_prefix("ws://")
        .and_then(|u| u.split_once('#'))
        .expect("ws://HOST:PORT#ID");
    let key = PublicKey::from_slice(&hex::decode(id).unwrap()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let genesis = REGTEST.genesis.block_hash().0;
        let mut c = Client::connect(addr.parse().unwrap(), &key, genesis, Framing::OnePerFrame)
            .await
            .expect("connects");
        c.recv(|_| ()).await.expect("init");
        c.recv(|_| ()).await.expect("tip");
        let req = GetHeaders {
            id: 1,
            max_count: 5000,
            stop_hash: [0; 32],
            locator: &[],
        };
        c.send(&Message::GetHeaders(req)).await.unwrap();
        let mut headers = Vec::new();
        loop {
            let last = c
                .recv(|m| match Message::decode(m) {
                    Ok(Message::Headers(h)) => {
                        headers.extend(
                            h.headers
                                .chunks_exact(HEADER_LEN)
                                .filter_map(Header::from_slice),
                        );
                        h.last
                    }
                    other => panic!("{other:?}"),
                })
                .await
                .unwrap();
            if last {
                return headers;
            }
        }
    })
}

#[test]
fn serves_the_corrupted_header_it_was_asked_to() {
    let dir = std::env::temp_dir().join(format!("lightwire-hostile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("k");
    let key = key.to_str().unwrap();
    let mut child = Running(
        hostile(&[
            "--listen",
            "127.0.0.1:0",
            "--key-file",
            key,
            "--metrics-listen",
            "127.0.0.1:0",
            "--generate",
            "300",
            "--corrupt-at",
            "250",
        ])
        .spawn()
        .unwrap(),
    );
    let mut err = String::new();
    BufReader::new(child.0.stderr.take().unwrap())
        .read_line(&mut err)
        .unwrap();
    assert!(
        err.starts_with("lightwire-hostile: metrics on http://127.0.0.1:"),
        "{err}"
    );
    let mut out = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut out)
        .unwrap();
    let words: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(
        (words[0], words[1], words[3]),
        ("node", "id", "connect"),
        "{out}"
    );
    assert_eq!(std::fs::read(key).unwrap().len(), 32, "the key file made");

    let headers = fetch_headers(words[4]);
    assert_eq!(headers.len(), 300);
    let Err(ConnectError::Invalid(e)) = Chain::new(&REGTEST).connect(&headers, u64::MAX / 2) else {
        panic!("header 250 must fail validation");
    };
    assert_eq!(e.height, 250);
    assert!(matches!(e.rule, Rule::WrongBits { .. }), "{e}");
    drop(child);

    let out = hostile(&["--key-file", key, "--generate", "10", "--corrupt-at", "11"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--corrupt-at 11: not a height from 1 to 10"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
