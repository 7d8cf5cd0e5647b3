//! The gateway following a real Bitcoin node: btcd on regtest, started by this test on
//! 127.0.0.1. The gateway follows btcd to its tip; then btcd reorgs (a block is
//! invalidated and a longer branch mined) and a connected client is told the new tip and
//! syncs the new branch, validated natively.
//!
//! btcd and btcctl come from `scripts/setup.sh` (`go install`); found on PATH, in
//! `$(go env GOPATH)/bin`, or at `$LIGHTWIRE_BTCD_DIR`.

use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lightwire_chain::{Chain, Header, Network, REGTEST};
use lightwire_gateway::client::{Client, Framing};
use lightwire_gateway::served::ServedChain;
use lightwire_gateway::server::{Buffers, Limits};
use lightwire_gateway::upstream::follow;
use lightwire_wire::{GetHeaders, Message};

mod common;

/// A payment address btcd can mine to (regtest P2PKH; nobody holds its key).
const MINING_ADDR: &str = "moKEEKbe5NZRvfgpbZx9wn3GKPYbVgfE7x";

fn tool(name: &str) -> PathBuf {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Ok(d) = std::env::var("LIGHTWIRE_BTCD_DIR") {
        dirs.push(d.into());
    }
    if let Ok(path) = std::env::var("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    if let Ok(out) = Command::new("go").args(["env", "GOPATH"]).output() {
        dirs.push(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("bin"));
    }
    dirs.into_iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} not found: run scripts/setup.sh (go install btcd)"))
}

fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// btcd on regtest, stopped when dropped.
struct Btcd {
    child: Child,
    dir: PathBuf,
    p2p: SocketAddr,
    rpc: SocketAddr,
}

impl Btcd {
    fn start() -> Btcd {
        let dir = std::env::temp_dir().join(format!("lightwire-btcd-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let p2p: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let rpc: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let conf = dir.join("btcd.conf");
        std::fs::write(&conf, "").unwrap();
        let child = Command::new(tool("btcd"))
            .arg(format!("--configfile={}", conf.display()))
            .args(["--regtest", "--notls", "--rpcuser=u", "--rpcpass=p"])
            .arg(format!("--datadir={}", dir.join("data").display()))
            .arg(format!("--logdir={}", dir.join("log").display()))
            .arg(format!("--listen={p2p}"))
            .arg(format!("--rpclisten={rpc}"))
            .arg(format!("--miningaddr={MINING_ADDR}"))
            // Its miner can log a lot: never to a pipe nobody reads.
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("btcd starts");
        let btcd = Btcd {
            child,
            dir,
            p2p,
            rpc,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while btcd.try_ctl(&["getblockcount"]).is_none() {
            assert!(Instant::now() < deadline, "btcd's RPC did not come up");
            std::thread::sleep(Duration::from_millis(200));
        }
        btcd
    }

    fn try_ctl(&self, args: &[&str]) -> Option<String> {
        let conf = self.dir.join("btcctl.conf");
        let _ = std::fs::write(&conf, "");
        let out = Command::new(tool("btcctl"))
            .arg(format!("--configfile={}", conf.display()))
            .args(["--regtest", "--notls", "--rpcuser=u", "--rpcpass=p"])
            .arg(format!("--rpcserver={}", self.rpc))
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn ctl(&self, args: &[&str]) -> String {
        self.try_ctl(args)
            .unwrap_or_else(|| panic!("btcctl {args:?} failed"))
    }

    fn generate(&self, n: u32) {
        self.ctl(&["generate", &n.to_string()]);
    }

    fn hash_at(&self, height: u32) -> String {
        self.ctl(&["getblockhash", &height.to_string()])
    }
}

impl Drop for Btcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The next `tip` message (skipping anything else); returns its height and hash.
async fn next_tip(client: &mut Client) -> (u32, String) {
    loop {
        let tip = tokio::time::timeout(
            Duration::from_secs(60),
            client.recv(|m| match Message::decode(m) {
                Ok(Message::Tip(t)) => {
                    Some((t.height, Header::decode(t.header).block_hash().to_string()))
                }
                _ => None,
            }),
        )
        .await
        .expect("a tip in time")
        .expect("connection up");
        if let Some(t) = tip {
            return t;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_btcd_to_its_tip_and_through_a_reorg() {
    let btcd = Btcd::start();
    btcd.generate(300);

    // The gateway follows btcd from genesis.
    let (served, chain) = ServedChain::genesis_only(&REGTEST);
    let gw = common::start(served, Limits::default(), Buffers::pooled(8)).await;
    let shared = gw.shared.clone();
    tokio::spawn(follow(
        btcd.p2p,
        Network::Regtest,
        shared.clone(),
        chain,
        gw.stopped(),
    ));
    wait_until("the gateway at btcd's tip (300)", || {
        shared.tip_height() == 300
    })
    .await;

    let mut client = common::client(&gw, Framing::OnePerFrame).await;
    let (height, hash) = next_tip(&mut client).await;
    assert_eq!((height, hash), (300, btcd.hash_at(300)));

    // New blocks on top are announced.
    btcd.generate(2);
    let (height, hash) = next_tip(&mut client).await;
    let (height, hash) = if height == 302 {
        (height, hash)
    } else {
        next_tip(&mut client).await
    };
    assert_eq!((height, hash), (302, btcd.hash_at(302)));

    // A reorg: btcd drops block 290 (and everything after it) and mines a longer branch.
    let replaced = btcd.hash_at(295);
    btcd.ctl(&["invalidateblock", &btcd.hash_at(290)]);
    btcd.generate(20);
    let best = btcd.ctl(&["getbestblockhash"]);
    assert_eq!(btcd.ctl(&["getblockcount"]), "309");
    loop {
        let (height, hash) = next_tip(&mut client).await;
        if hash == best {
            assert_eq!(height, 309);
            break;
        }
    }

    // The client syncs the whole new chain from the gateway and validates it.
    let mut chain = Chain::new(&REGTEST);
    let mut id = 0;
    while chain.tip().height < 309 {
        id += 1;
        let locator = chain.tip().hash.0;
        let req = GetHeaders {
            id,
            max_count: 1000,
            stop_hash: [0; 32],
            locator: &locator,
        };
        client.send(&Message::GetHeaders(req)).await.unwrap();
        loop {
            let (batch, last) = client
                .recv(|m| match Message::decode(m) {
                    Ok(Message::Headers(h)) => {
                        Some((h.iter().map(Header::decode).collect::<Vec<_>>(), h.last))
                    }
                    _ => None,
                })
                .await
                .unwrap()
                .map_or((Vec::new(), false), |x| x);
            if !batch.is_empty() {
                chain
                    .connect(&batch, 4_000_000_000)
                    .expect("valid headers from the gateway");
            }
            if last {
                break;
            }
        }
    }
    assert_eq!(chain.tip().hash.to_string(), best);
    let served = shared.chain.read().unwrap();
    assert_eq!(
        served.height_of(&lightwire_chain::BlockHash::from_display_hex(&replaced).unwrap()),
        None
    );
    assert_eq!(
        served
            .height_of(&lightwire_chain::BlockHash::from_display_hex(&btcd.hash_at(295)).unwrap()),
        Some(295)
    );
    drop(served);
}
