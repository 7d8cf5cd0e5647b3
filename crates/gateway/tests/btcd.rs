//! The gateway following a real Bitcoin node: btcd on regtest, started by each test on
//! 127.0.0.1. The gateway follows btcd to its tip; then btcd reorgs (a block is
//! invalidated and a longer branch mined) and a connected client is told the new tip and
//! syncs the new branch, validated natively. And it serves btcd's compact block filters,
//! which equal what btcd's RPC says and what our BIP158 code builds from btcd's blocks.
//! Following two btcd nodes, it serves the valid chain with the most work among them while
//! one is stopped and the other reorgs.
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
use lightwire_gateway::upstream::follow_all;
use lightwire_wire::{GetHeaders, Message};

mod common;
// Its `build_xpub` is for the browser end-to-end test's helper binary.
#[allow(dead_code)]
#[path = "../../../tests/support/regtest_wallet.rs"]
mod regtest_wallet;

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
        Btcd::start_with(&[])
    }

    /// A node started with `extra` flags too (`--txindex`).
    fn start_with(extra: &[&str]) -> Btcd {
        let p2p: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let rpc: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        // One directory per node: the tests of this file run side by side.
        let dir = std::env::temp_dir().join(format!(
            "lightwire-btcd-{}-{}",
            std::process::id(),
            p2p.port()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("btcd.conf");
        std::fs::write(&conf, "").unwrap();
        let child = Command::new(tool("btcd"))
            .arg(format!("--configfile={}", conf.display()))
            .args(["--regtest", "--notls", "--rpcuser=u", "--rpcpass=p"])
            .arg(format!("--datadir={}", dir.join("data").display()))
            .arg(format!("--logdir={}", dir.join("log").display()))
            .arg(format!("--listen={p2p}"))
            .arg(format!("--rpclisten={rpc}"))
            // The test wallet's key: its coinbases can be spent.
            .arg(format!("--miningaddr={}", regtest_wallet::mining_address()))
            .args(extra)
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

    /// Its RPC, for the gateway's calls.
    fn rpc_endpoint(&self) -> lightwire_gateway::fees::RpcEndpoint {
        lightwire_gateway::fees::RpcEndpoint {
            addr: self.rpc,
            credentials: "u:p".into(),
            file: None,
        }
    }

    /// The block at `height`: its display hash, hash, bytes and header.
    fn block_at(&self, height: u32) -> (String, lightwire_chain::BlockHash, Vec<u8>, [u8; 80]) {
        let hash = self.hash_at(height);
        let block = lightwire_chain::BlockHash::from_display_hex(&hash).unwrap();
        let raw = hex::decode(self.ctl(&["getblock", &hash, "0"])).unwrap();
        let header: [u8; 80] = raw[..80].try_into().unwrap();
        (hash, block, raw, header)
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

/// A gateway following `btcd` from genesis, serving its filters too.
async fn following(btcd: &Btcd) -> common::Gateway {
    following_all(&[btcd.p2p]).await
}

/// A gateway following every node of `nodes` from genesis, serving filters too.
async fn following_all(nodes: &[SocketAddr]) -> common::Gateway {
    let (served, chain) = ServedChain::genesis_only(&REGTEST);
    let gw = common::start(served, Limits::default(), Buffers::pooled(8)).await;
    let shared = gw.shared.clone();
    shared
        .chain
        .write()
        .unwrap()
        .serve_upstream_filters(1 << 20, shared.filter_notify.clone());
    shared
        .chain
        .write()
        .unwrap()
        .serve_upstream_blocks(shared.filter_notify.clone());
    shared
        .chain
        .write()
        .unwrap()
        .serve_relay(shared.relay.clone());
    let (nodes, stopped) = (nodes.to_vec(), gw.stopped());
    tokio::spawn(async move {
        follow_all(&nodes, Network::Regtest, shared, chain, stopped).await;
    });
    gw
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_btcd_to_its_tip_and_through_a_reorg() {
    let btcd = Btcd::start();
    btcd.generate(300);

    // The gateway follows btcd from genesis.
    let gw = following(&btcd).await;
    let shared = gw.shared.clone();
    wait_until("the gateway at btcd's tip (300)", || {
        shared.tip_height() == 300
    })
    .await;

    let mut client = common::client(&gw, Framing::OnePerFrame).await;
    let (height, hash) = next_tip(&mut client).await;
    assert_eq!((height, hash), (300, btcd.hash_at(300)));

    // New blocks on top are announced (301 may come first, and a tip again when its
    // filter headers arrive).
    btcd.generate(2);
    let mut announced = Vec::new();
    loop {
        let (height, hash) = next_tip(&mut client).await;
        announced.push(height);
        assert!(announced.len() <= 5, "tips {announced:?}");
        if height == 302 {
            assert_eq!(hash, btcd.hash_at(302));
            break;
        }
    }

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
    {
        let served = shared.chain.read().unwrap();
        assert_eq!(
            served.height_of(&lightwire_chain::BlockHash::from_display_hex(&replaced).unwrap()),
            None
        );
        assert_eq!(
            served.height_of(
                &lightwire_chain::BlockHash::from_display_hex(&btcd.hash_at(295)).unwrap()
            ),
            Some(295)
        );
    }
    // The filter headers followed the reorg: those of the new branch, btcd's.
    let filter_header = |h: u32| {
        shared
            .chain
            .read()
            .ok()
            .and_then(|c| c.filters().and_then(|f| f.entry(h)))
            .map(|e| e.header.to_string())
    };
    wait_until("the filter headers of the new branch", || {
        filter_header(309).is_some()
    })
    .await;
    for h in 285..=309 {
        let theirs = btcd.ctl(&["getcfilterheader", &btcd.hash_at(h), "0"]);
        assert_eq!(filter_header(h), Some(theirs), "filter header at {h}");
    }
}

/// The gateway follows btcd's filter headers (BIP157 `getcfheaders`) and serves
/// its filters (`getcfilters`, fetched when a client asks): every filter header equals
/// btcd's `getcfilterheader`, the filters a client gets equal btcd's `getcfilter`, and our
/// own BIP158 code builds the same filter from btcd's raw block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_btcds_filters_which_our_bip158_code_rebuilds() {
    use lightwire_filter::basic_filter;

    let btcd = Btcd::start();
    btcd.generate(150);
    let gw = following(&btcd).await;
    filter_headers_are_btcds(&gw, &btcd, 150).await;

    // A client asks for filters 100..=150: the gateway fetches them from btcd.
    let mut client = common::client(&gw, Framing::OnePerFrame).await;
    let got = get_filters(&mut client, &btcd, 100, 150).await;
    assert_eq!(got.len(), 51);
    let mut rebuilt = Vec::new();
    for (height, filter) in &got {
        let hash = btcd.hash_at(*height);
        assert_eq!(
            hex::encode(filter),
            btcd.ctl(&["getcfilter", &hash, "0"]),
            "filter at {height}"
        );
        // The block holds only its coinbase, which spends no output.
        let block = hex::decode(btcd.ctl(&["getblock", &hash, "0"])).unwrap();
        let block_hash = lightwire_chain::BlockHash::from_display_hex(&hash).unwrap();
        basic_filter(&block_hash.0, &block, [], &mut rebuilt).unwrap();
        assert_eq!(&rebuilt, filter, "our filter of block {height}");
    }
}

/// Once the gateway holds btcd's filter headers up to `tip`: every one from genesis is
/// btcd's `getcfilterheader` (which prints them as it prints hashes: reversed).
async fn filter_headers_are_btcds(gw: &common::Gateway, btcd: &Btcd, tip: u32) {
    let shared = gw.shared.clone();
    let header = |height: u32| {
        shared
            .chain
            .read()
            .ok()
            .and_then(|c| c.filters().and_then(|f| f.entry(height)))
            .map(|e| e.header)
    };
    wait_until("the gateway's filter headers at btcd's tip", || {
        header(tip).is_some()
    })
    .await;
    for height in 0..=tip {
        let theirs = btcd.ctl(&["getcfilterheader", &btcd.hash_at(height), "0"]);
        let ours = header(height).expect("held");
        assert_eq!(ours.to_string(), theirs, "filter header at {height}");
    }
}

/// The filters `start..=stop` of btcd's chain, asked of the gateway by `client`.
async fn get_filters(
    client: &mut Client,
    btcd: &Btcd,
    start: u32,
    stop: u32,
) -> Vec<(u32, Vec<u8>)> {
    use lightwire_wire::{FilterRange, GetFilters};
    let stop = lightwire_chain::BlockHash::from_display_hex(&btcd.hash_at(stop)).unwrap();
    let req = GetFilters(FilterRange {
        id: 9,
        start_height: start,
        stop_hash: stop.0,
    });
    client.send(&Message::GetFilters(req)).await.unwrap();
    pieces_answer(client, lightwire_wire::FilterKind::Basic).await
}

/// The filters (or tweak lists) of one answer, put together from their pieces in order.
async fn pieces_answer(
    client: &mut Client,
    kind: lightwire_wire::FilterKind,
) -> Vec<(u32, Vec<u8>)> {
    let mut got: Vec<(u32, Vec<u8>)> = Vec::new();
    loop {
        let (pieces, last) = tokio::time::timeout(
            Duration::from_secs(30),
            client.recv(|m| match (kind, Message::decode(m)) {
                (lightwire_wire::FilterKind::Basic, Ok(Message::Filters(f)))
                | (lightwire_wire::FilterKind::Tweaks, Ok(Message::Tweaks(f))) => Some((
                    f.pieces()
                        .map(|p| (p.height, p.offset, p.data.to_vec()))
                        .collect::<Vec<_>>(),
                    f.flags.last,
                )),
                _ => None,
            }),
        )
        .await
        .expect("an answer in time")
        .unwrap()
        .unwrap_or_default();
        for (height, offset, data) in pieces {
            match got.last_mut() {
                Some((h, f)) if *h == height => {
                    assert_eq!(offset as usize, f.len());
                    f.extend_from_slice(&data);
                }
                _ => {
                    assert_eq!(offset, 0, "a list or filter starts at its first byte");
                    got.push((height, data));
                }
            }
        }
        if last {
            break;
        }
    }
    got
}

/// With real transactions: a block paying one output of every standard kind
/// (P2PKH, P2SH-P2WPKH, P2WPKH, P2WSH, P2TR, and an `OP_RETURN`) and the next spending
/// them all, built and signed by the test: every filter header is btcd's, the filters
/// served are btcd's, our BIP158 code rebuilds them from the raw blocks and the scripts
/// spent, each block checks against its header's Merkle root, and each script matches the
/// blocks that pay it and spend it, and no other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_of_real_transactions_of_every_kind_are_btcds() {
    use lightwire_filter::{Block, Matcher, basic_filter, first_absent, known_items};

    let btcd = Btcd::start();
    let built = regtest_wallet::build(&|args: &[&str]| btcd.ctl(args));
    assert_eq!((built.paid_at, built.spent_at), (102, 103));
    let gw = following(&btcd).await;
    filter_headers_are_btcds(&gw, &btcd, built.spent_at).await;
    let mut client = common::client(&gw, Framing::OnePerFrame).await;
    let got = get_filters(&mut client, &btcd, 95, built.spent_at).await;
    assert_eq!(got.len(), 9);
    let scripts: Vec<Vec<u8>> = built
        .scripts
        .iter()
        .map(|(_, s)| hex::decode(s).unwrap())
        .collect();
    let mut matcher = Matcher::default();
    let mut rebuilt = Vec::new();
    for (height, filter) in &got {
        let hash = btcd.hash_at(*height);
        assert_eq!(hex::encode(filter), btcd.ctl(&["getcfilter", &hash, "0"]));
        let raw = hex::decode(btcd.ctl(&["getblock", &hash, "0"])).unwrap();
        let block_hash = lightwire_chain::BlockHash::from_display_hex(&hash).unwrap();
        let block = Block::parse(&raw).unwrap();
        let header: [u8; 80] = *block.header();
        assert_eq!(lightwire_chain::hash_header_bytes(&header), block_hash);
        let (root, mutated) = block.merkle_root();
        assert!(
            !mutated && root[..] == header[36..68],
            "Merkle root of {height}"
        );
        assert_eq!(
            first_absent(filter, &block_hash.0, known_items(&block)),
            Ok(None)
        );
        let spent: Vec<Vec<u8>> = if *height == built.paid_at {
            built
                .spent_in_paying
                .iter()
                .map(|s| hex::decode(s).unwrap())
                .collect()
        } else if *height == built.spent_at {
            built
                .spent_in_spending
                .iter()
                .map(|s| hex::decode(s).unwrap())
                .collect()
        } else {
            Vec::new()
        };
        basic_filter(
            &block_hash.0,
            &raw,
            spent.iter().map(Vec::as_slice),
            &mut rebuilt,
        )
        .unwrap();
        assert_eq!(&rebuilt, filter, "our filter of block {height}");
        for (kind, script) in built.scripts.iter().map(|(k, _)| k).zip(&scripts) {
            let matched = matcher
                .match_any(filter, &block_hash.0, [script.as_slice()])
                .unwrap();
            let expected = *height == built.paid_at || *height == built.spent_at;
            assert_eq!(matched, expected, "{kind} in block {height}");
        }
        if *height == built.spent_at {
            // Witness data is there (the spends of P2SH-P2WPKH, P2WPKH, P2WSH and P2TR).
            let tx = block.transactions().nth(1).unwrap();
            assert!(tx.has_witness());
            assert_eq!(tx.inputs().filter(|i| !i.witness.is_empty()).count(), 4);
        }
    }

    // The gateway serves the blocks too, fetched from btcd (with witness data) when asked.
    for height in [built.paid_at, built.spent_at, 7] {
        let hash = lightwire_chain::BlockHash::from_display_hex(&btcd.hash_at(height)).unwrap();
        let block = get_block(&mut client, hash).await.expect("the block");
        let raw = hex::decode(btcd.ctl(&["getblock", &btcd.hash_at(height), "0"])).unwrap();
        assert_eq!(block, raw, "block {height}");
    }
    // One it does not have: not found.
    assert_eq!(
        get_block(&mut client, lightwire_chain::BlockHash([7; 32])).await,
        None
    );
}

/// Our receiver paid twice in one transaction by another implementation's sender (the
/// `silentpayments` crate, on libsecp256k1), mined by `btcd`: with the block and its
/// tweaks, computed from the scripts the sender knows its inputs spent.
struct SilentCase {
    spend_secret: bitcoin::secp256k1::SecretKey,
    receiver: lightwire_wallet::silent::Receiver,
    address: String,
    paid: regtest_wallet::SilentBuilt,
    /// The paying block.
    raw: Vec<u8>,
    /// Its tweaks: the paying transaction's, alone.
    tweaks: Vec<[u8; 33]>,
    /// The x-only keys of the paying transaction's taproot outputs.
    outputs: Vec<[u8; 32]>,
}

impl SilentCase {
    fn paid_by(btcd: &Btcd) -> SilentCase {
        use lightwire_wallet::silent::{Receiver, SpNetwork, block_tweaks};
        btcd.generate(101);
        let secp = bitcoin::secp256k1::Secp256k1::new();
        let spend_secret = bitcoin::secp256k1::SecretKey::from_slice(&[0x52; 32]).unwrap();
        let spend = spend_secret.public_key(&secp).serialize();
        let mut receiver = Receiver::new(&[0x51; 32], &spend).unwrap();
        let address = receiver.address(SpNetwork::Regtest, None).unwrap().encode();
        assert!(address.starts_with("sprt1q"), "{address}");
        let paid = regtest_wallet::pay_silent(&|args: &[&str]| btcd.ctl(args), &address, 1, 2);
        let raw = hex::decode(btcd.ctl(&["getblock", &btcd.hash_at(paid.height), "0"])).unwrap();
        let block = lightwire_primitives::Block::parse(&raw).unwrap();
        let spent: Vec<Vec<u8>> = paid.spent.iter().map(|s| hex::decode(s).unwrap()).collect();
        let spent: Vec<&[u8]> = spent.iter().map(Vec::as_slice).collect();
        let mut tweaks = Vec::new();
        block_tweaks(&block, &spent, &mut tweaks).unwrap();
        assert_eq!(tweaks.len(), 1, "one eligible transaction");
        let outputs = block
            .transactions()
            .nth(1)
            .unwrap()
            .outputs()
            .filter(|o| lightwire_wallet::silent::is_p2tr(o.script))
            .map(|o| o.script[2..].try_into().unwrap())
            .collect();
        SilentCase {
            spend_secret,
            receiver,
            address,
            paid,
            raw,
            tweaks,
            outputs,
        }
    }
}

/// A silent payment made by another implementation (the `silentpayments` crate, on
/// libsecp256k1) to our receiver's regtest address, twice in one transaction that btcd
/// mines: the block's tweaks, computed from btcd's block and the scripts its inputs spend,
/// hold the transaction's; from that tweak alone the receiver finds both outputs, in the
/// sender's order; the key `b_spend + tweak` of each is the output's key (the receiver can
/// spend it); a receiver of another scan key finds nothing.
#[test]
fn silent_payments_from_another_sender_are_found_in_btcds_block() {
    use bitcoin::secp256k1::{Scalar, Secp256k1};
    use lightwire_wallet::silent::Receiver;

    let btcd = Btcd::start();
    let SilentCase {
        spend_secret,
        receiver,
        paid,
        tweaks,
        outputs,
        ..
    } = SilentCase::paid_by(&btcd);
    let secp = Secp256k1::new();

    let mut found = Vec::new();
    receiver.scan(&tweaks[0], &outputs, &mut found).unwrap();
    found.sort_by_key(|f| f.k);
    let keys: Vec<String> = found.iter().map(|f| hex::encode(f.key)).collect();
    assert_eq!(keys, paid.keys, "both outputs, in the sender's order");
    for f in &found {
        let d = spend_secret
            .add_tweak(&Scalar::from_be_bytes(f.tweak).unwrap())
            .unwrap();
        assert_eq!(d.x_only_public_key(&secp).0.serialize(), f.key);
        assert_eq!(f.label, None);
    }

    let spend = spend_secret.public_key(&secp).serialize();
    let other = Receiver::new(&[0x53; 32], &spend).unwrap();
    found.clear();
    other.scan(&tweaks[0], &outputs, &mut found).unwrap();
    assert!(found.is_empty());
}

/// The gateway computes the tweaks of btcd's chain from btcd's RPC (`--txindex`) and serves
/// them: the tweak of the block paying our receiver is the one computed here from the
/// scripts the sender knows it spent, the tweak headers chain the lists served, the
/// receiver finds both payments from the served tweak alone, and a gateway started again
/// on the same directory serves the same chain from its file without asking btcd.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_the_tweaks_of_btcds_chain_computed_from_its_rpc() {
    use lightwire_gateway::fees::RpcEndpoint;
    use lightwire_gateway::tweaks::{ServedTweaks, keep};
    use lightwire_primitives::{FilterHeader, TweakList, tweak_list_hash};
    use lightwire_wire::FilterRange;

    let btcd = Btcd::start_with(&["--txindex"]);
    let SilentCase {
        receiver,
        address,
        paid,
        raw,
        tweaks: expected,
        outputs,
        ..
    } = SilentCase::paid_by(&btcd);
    btcd.generate(3);
    let tip = paid.height + 3;
    let block = lightwire_primitives::Block::parse(&raw).unwrap();

    let dir = btcd.dir.join("tweaks");
    let rpc = RpcEndpoint {
        addr: btcd.rpc,
        credentials: "u:p".into(),
        file: None,
    };
    let serve = |gw: &common::Gateway| {
        let tweaks = ServedTweaks::open(&dir, Network::Regtest).unwrap();
        let stored = tweaks.stored();
        gw.shared.chain.write().unwrap().serve_tweaks(tweaks);
        tokio::spawn(keep(gw.shared.clone(), rpc.clone(), gw.stopped()));
        stored
    };
    let tweak_tip = |gw: &common::Gateway| {
        gw.shared
            .chain
            .read()
            .unwrap()
            .tweaks()
            .and_then(|t| t.tip())
    };

    let gw = following(&btcd).await;
    assert_eq!(serve(&gw), 0);
    wait_until("the tweaks of btcd's tip", || tweak_tip(&gw) == Some(tip)).await;

    let stop = lightwire_chain::BlockHash::from_display_hex(&btcd.hash_at(tip)).unwrap();
    let ask = |id| FilterRange {
        id,
        start_height: 0,
        stop_hash: stop.0,
    };
    let mut client = common::client(&gw, Framing::OnePerFrame).await;
    let (headers, lists) = tweaks_served(&mut client, ask(1), ask(2)).await;
    assert_eq!(
        (headers.len(), lists.len()),
        (tip as usize + 1, tip as usize + 1)
    );
    let mut before = FilterHeader::ZERO;
    for (h, (list, header)) in lists.iter().zip(&headers).enumerate() {
        let parsed = TweakList::parse(list).unwrap();
        before = before.next(&tweak_list_hash(list));
        assert_eq!(*header, before, "tweak header {h} chains the list served");
        let tweaks: Vec<[u8; 33]> = parsed.iter().copied().collect();
        if h as u32 == paid.height {
            assert_eq!(tweaks, expected, "the paying block's tweak");
        } else {
            assert!(tweaks.is_empty(), "block {h} pays no taproot output");
        }
    }
    // From the served tweak alone, both payments.
    let served_tweak: [u8; 33] = lists[paid.height as usize][1..].try_into().unwrap();
    let mut found = Vec::new();
    receiver.scan(&served_tweak, &outputs, &mut found).unwrap();
    assert_eq!(found.len(), 2);

    // A reorg: btcd drops the paying block and mines a longer branch holding another
    // payment (and the first again, from its mempool, or not). The gateway's tweaks follow:
    // every block of the new branch is served with the tweaks of its own transactions,
    // worked out here from the one script they all spend (the coinbases' P2PKH of the test
    // wallet's key), and the tweak headers chain those lists.
    btcd.ctl(&["invalidateblock", &btcd.hash_at(paid.height)]);
    let again = regtest_wallet::pay_silent(&|args: &[&str]| btcd.ctl(args), &address, 2, 1);
    assert_eq!(again.height, paid.height);
    btcd.generate(5);
    let tip = paid.height + 5;
    let best =
        lightwire_chain::BlockHash::from_display_hex(&btcd.ctl(&["getbestblockhash"])).unwrap();
    wait_until("the tweaks of btcd's new tip", || {
        let c = gw.shared.chain.read().unwrap();
        c.block_hash(tip) == Some(best) && c.tweaks().and_then(|t| t.tip()) == Some(tip)
    })
    .await;
    let reorged = |id| FilterRange {
        id,
        start_height: 0,
        stop_hash: best.0,
    };
    let (headers, lists) = tweaks_served(&mut client, reorged(5), reorged(6)).await;
    assert_eq!(lists.len(), tip as usize + 1);
    let coinbase = block.transactions().next().unwrap();
    let p2pkh = coinbase.outputs().next().unwrap().script.to_vec();
    let mut before = FilterHeader::ZERO;
    for (h, (list, header)) in lists.iter().zip(&headers).enumerate() {
        before = before.next(&tweak_list_hash(list));
        assert_eq!(*header, before, "tweak header {h} after the reorg");
        let tweaks: Vec<[u8; 33]> = TweakList::parse(list).unwrap().iter().copied().collect();
        let raw = hex::decode(btcd.ctl(&["getblock", &btcd.hash_at(h as u32), "0"])).unwrap();
        let mut theirs: Vec<[u8; 33]> = lightwire_primitives::Block::parse(&raw)
            .unwrap()
            .transactions()
            .skip(1)
            .map(|tx| {
                let spent = vec![p2pkh.as_slice(); tx.inputs().count()];
                lightwire_wallet::silent::tweak(&tx, &spent).unwrap()
            })
            .collect();
        theirs.sort_unstable();
        assert_eq!(tweaks, theirs, "block {h} of the new branch");
        if h as u32 == paid.height {
            assert!(
                !tweaks.is_empty() && tweaks != expected,
                "the new payment's block"
            );
        }
    }
    drop(client);
    // Stopped: its tweak task, up to the tip, ends with it.
    drop(gw);
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Started again on the same directory: every record of the new branch is taken back
    // from the file (btcd is not asked: the RPC given leads nowhere), and the same chain is
    // served.
    let gw = following(&btcd).await;
    let offline = RpcEndpoint {
        addr: "127.0.0.1:1".parse().unwrap(),
        ..rpc.clone()
    };
    let tweaks = ServedTweaks::open(&dir, Network::Regtest).unwrap();
    assert_eq!(tweaks.stored(), tip as usize + 1);
    gw.shared.chain.write().unwrap().serve_tweaks(tweaks);
    tokio::spawn(keep(gw.shared.clone(), offline, gw.stopped()));
    wait_until("the tweaks taken back from the file", || {
        tweak_tip(&gw) == Some(tip)
    })
    .await;
    let mut client = common::client(&gw, Framing::OnePerFrame).await;
    let again = tweaks_served(&mut client, reorged(7), reorged(8)).await;
    assert_eq!(again, (headers, lists));
}

/// A silent payment sent to btcd's mempool, not mined: the gateway (serving tweaks, so
/// working out those of the mempool's transactions) publishes it to a session subscribed
/// with `tweaks` with its tweak, the one its tweak list holds for the transaction once
/// btcd mines it (and the one worked out here from the script the sender spent); a session
/// subscribed without `tweaks` gets it without. And btcd's RPC, asked as the gateway asks
/// it, gives an output of a transaction in its mempool (`getrawtransaction`: not in its
/// chainstate), one of its chain that a mempool transaction spends (`gettxout .. false`),
/// and says it does not know one nobody made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_payment_in_btcds_mempool_is_published_with_its_tweak() {
    use lightwire_gateway::mempool::DEFAULT_BUDGET;
    use lightwire_gateway::server::Shared;
    use lightwire_gateway::tweaks::{ServedTweaks, keep};
    use lightwire_primitives::{TweakList, Tx};
    use lightwire_proto::session::FilterLookup;
    use lightwire_wallet::silent::{Receiver, SpNetwork};
    use lightwire_wire::MempoolSubscribe;

    // Inventory trickled every 100 ms (10 s by default): the payment reaches the gateway
    // at once.
    let btcd = Btcd::start_with(&["--txindex", "--trickleinterval=100ms"]);
    btcd.generate(101);
    let (served, chain) = ServedChain::genesis_only(&REGTEST);
    let gw = Shared::builder(
        served,
        lightwire_noise::SecretKey::from_bytes(&[0x11; 32]).unwrap(),
    )
    .buffers(Buffers::pooled(8))
    .mempool(DEFAULT_BUDGET)
    .mempool_tweaks(true)
    .spawn("127.0.0.1:0".parse().unwrap())
    .await
    .unwrap();
    let shared = gw.shared.clone();
    assert!(shared.mempool.works_out_tweaks());
    {
        let mut c = shared.chain.write().unwrap();
        c.serve_upstream_filters(1 << 20, shared.filter_notify.clone());
        c.serve_upstream_blocks(shared.filter_notify.clone());
        c.serve_relay(shared.relay.clone());
        c.serve_mempool(shared.mempool.clone());
        c.serve_tweaks(ServedTweaks::open(&btcd.dir.join("tweaks"), Network::Regtest).unwrap());
    }
    let (nodes, stopped) = (vec![btcd.p2p], gw.stopped());
    tokio::spawn(async move {
        follow_all(&nodes, Network::Regtest, shared, chain, stopped).await;
    });
    tokio::spawn(keep(gw.shared.clone(), btcd.rpc_endpoint(), gw.stopped()));
    tokio::spawn(lightwire_gateway::mempool_tweaks::keep(
        gw.shared.clone(),
        btcd.rpc_endpoint(),
        gw.stopped(),
    ));
    let tweak_tip = || {
        gw.shared
            .chain
            .read()
            .unwrap()
            .tweaks()
            .and_then(|t| t.tip())
    };
    wait_until("the tweaks of btcd's tip", || tweak_tip() == Some(101)).await;

    // Two sessions: with tweaks, and without.
    let mut with = common::client(&gw, Framing::OnePerFrame).await;
    let mut without = common::client(&gw, Framing::OnePerFrame).await;
    for (client, tweaks) in [(&mut with, true), (&mut without, false)] {
        let subscribe = MempoolSubscribe {
            salt: [tweaks as u8; 16],
            snapshot: true,
            tweaks,
        };
        client
            .send(&Message::MempoolSubscribe(subscribe))
            .await
            .unwrap();
    }

    // The payment, sent and not mined: the regtest wallet's `generate` is skipped.
    let secp = bitcoin::secp256k1::Secp256k1::new();
    let spend = bitcoin::secp256k1::SecretKey::from_slice(&[0x52; 32])
        .unwrap()
        .public_key(&secp)
        .serialize();
    let address = Receiver::new(&[0x51; 32], &spend)
        .unwrap()
        .address(SpNetwork::Regtest, None)
        .unwrap()
        .encode();
    let sent = std::cell::RefCell::new(None);
    let not_mining = |args: &[&str]| -> String {
        match args {
            ["generate", ..] => String::new(),
            ["sendrawtransaction", hex] => {
                *sent.borrow_mut() = Some(hex::decode(hex).unwrap());
                btcd.ctl(args)
            }
            _ => btcd.ctl(args),
        }
    };
    let paid = regtest_wallet::pay_silent(&not_mining, &address, 1, 2);
    assert_eq!(paid.height, 101, "not mined");
    let raw = sent.take().expect("the payment was sent");
    let payment = Tx::parse(&raw).unwrap();
    let txid = payment.txid().0;
    let spent: Vec<Vec<u8>> = paid.spent.iter().map(|s| hex::decode(s).unwrap()).collect();
    let spent: Vec<&[u8]> = spent.iter().map(Vec::as_slice).collect();
    let expected = lightwire_wallet::silent::tweak(&payment, &spent).unwrap();

    // btcd's RPC as the gateway asks it, while the payment is in its mempool.
    let coinbase = payment.inputs().next().unwrap();
    let (coinbase, vout) = (*coinbase.prev_txid, coinbase.prev_vout);
    let (answers, wrong) = lightwire_gateway::mempool_tweaks::lookup(
        &btcd.rpc_endpoint(),
        &[(txid, 0), (coinbase, vout), ([0x77; 32], 0)],
    )
    .await
    .unwrap();
    assert!(wrong.is_empty(), "{wrong:?}");
    let output0 = payment.outputs().next().unwrap().script.to_vec();
    assert_eq!(answers[&(txid, 0)], Some(output0), "from btcd's mempool");
    assert_eq!(
        answers[&(coinbase, vout)],
        Some(spent[0].to_vec()),
        "from its chainstate, though a mempool transaction spends it"
    );
    assert_eq!(answers[&([0x77; 32], 0)], None, "nobody made it");

    // The sessions hear of it: with its tweak, and without.
    let got = added_entry(&mut with, &txid).await;
    assert_eq!(got, Some(expected), "with its tweak");
    assert_eq!(added_entry(&mut without, &txid).await, None, "kind 0");
    assert_eq!(gw.shared.mempool.tweaks_missed(), 0);
    assert_eq!(gw.shared.mempool.pending().0, 0);

    // Mined: the tweak list of its block holds that tweak alone.
    btcd.generate(1);
    wait_until("the tweaks of the paying block", || {
        tweak_tip() == Some(102)
    })
    .await;
    let list = match gw
        .shared
        .chain
        .read()
        .unwrap()
        .tweaks()
        .unwrap()
        .with_list(102, <[u8]>::to_vec)
    {
        FilterLookup::Ready(list) => list,
        _ => panic!("the list of block 102"),
    };
    let listed: Vec<[u8; 33]> = TweakList::parse(&list).unwrap().iter().copied().collect();
    assert_eq!(
        listed,
        [expected],
        "the block's tweak list holds the digest's tweak"
    );
}

/// The next digest entry adding `txid` that `client` gets (skipping anything else): its
/// tweak, for an entry of kind 2; `None` for kind 0.
async fn added_entry(client: &mut Client, txid: &[u8; 32]) -> Option<[u8; 33]> {
    use lightwire_wire::DigestEntry;
    loop {
        let entry = tokio::time::timeout(
            Duration::from_secs(60),
            client.recv(|m| match Message::decode(m) {
                Ok(Message::MempoolDigest(d)) => d.entries().find_map(|e| match e {
                    DigestEntry::Added { txid: t, tweak, .. } if t == txid => Some(tweak.copied()),
                    _ => None,
                }),
                _ => None,
            }),
        )
        .await
        .expect("the transaction in a digest in time")
        .expect("connection up");
        if let Some(tweak) = entry {
            return tweak;
        }
    }
}

/// Bitcoin Core's way (`getblock <hash> 3`, each input's `prevout` from its undo data, one
/// call a block, no transaction index) gives the same tweak list as btcd's transaction
/// index, for the block paying our receiver and for one that does not; btcd, which has no
/// verbosity 3, is asked through its index. Core's answer is played by a stand-in built
/// from btcd's own block and transactions (Core cannot be installed here): it answers
/// `getblock` at verbosity 3 with each transaction's `hex` and each input's
/// `prevout.scriptPubKey.hex`, as Core's RPC documents them, and refuses anything else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bitcoin_cores_verbose_blocks_give_the_tweaks_btcds_index_gives() {
    use lightwire_gateway::tweaks::{SpentSource, compute_list};

    let btcd = Btcd::start_with(&["--txindex"]);
    let case = SilentCase::paid_by(&btcd);
    let btcd_rpc = btcd.rpc_endpoint();
    for height in [case.paid.height, case.paid.height - 1] {
        let (hash, block, raw, header) = btcd.block_at(height);

        let mut source = SpentSource::Unknown;
        let index = compute_list(&btcd_rpc, &header, &block, &mut source)
            .await
            .unwrap();
        assert_eq!(source, SpentSource::TxIndex, "btcd has no verbosity 3");

        // Core's answer, from btcd's block and the transactions it spends.
        let parsed = lightwire_primitives::Block::parse(&raw).unwrap();
        let txs = core_view(&btcd, &hash, &raw).0["tx"].clone();
        // What a client settling a dispute works out from the block and the transactions
        // it spends from (each only as the txid it hashes to): the same list.
        let spent_from: Vec<Vec<u8>> = parsed
            .transactions()
            .skip(1)
            .flat_map(|tx| {
                tx.inputs()
                    .map(|i| i.prev_txid().to_string())
                    .collect::<Vec<_>>()
            })
            .map(|txid| hex::decode(btcd.ctl(&["getrawtransaction", &txid, "0"])).unwrap())
            .collect();
        let spent_from: Vec<&[u8]> = spent_from.iter().map(Vec::as_slice).collect();
        let checked = lightwire_primitives::CheckedBlock::check(&raw, &block).unwrap();
        let mut evidence = Vec::new();
        lightwire_wallet::silent_evidence::tweaks_from_evidence(
            &checked,
            &spent_from,
            &mut evidence,
        )
        .unwrap();
        let mut from_evidence = Vec::new();
        lightwire_primitives::write_tweak_list(&mut evidence, &mut from_evidence);
        assert_eq!(
            from_evidence, index,
            "block {height}: the evidence gives the gateway's list"
        );

        let core = core_stand_in(serde_json::json!({"hash": hash, "tx": txs.clone()})).await;
        let mut source = SpentSource::Unknown;
        let verbose = compute_list(&core, &header, &block, &mut source)
            .await
            .unwrap();
        assert_eq!(source, SpentSource::VerboseBlock);
        assert_eq!(verbose, index, "block {height}: the same list either way");
        if height == case.paid.height {
            assert_eq!(
                verbose[1..],
                case.tweaks[0],
                "the paying transaction's tweak"
            );
        } else {
            assert_eq!(verbose, [0]);
        }

        // An input without its prevout (Core without the block's undo data): the node's
        // transaction index is asked instead (which this stand-in refuses).
        if height == case.paid.height {
            let mut pruned = serde_json::json!({"hash": hash, "tx": txs.clone()});
            pruned["tx"][1]["vin"][0]
                .as_object_mut()
                .unwrap()
                .remove("prevout");
            let core = core_stand_in(pruned).await;
            let mut source = SpentSource::Unknown;
            let asked = compute_list(&core, &header, &block, &mut source).await;
            assert!(
                asked.is_err() && source == SpentSource::TxIndex,
                "{asked:?} {source:?}"
            );
        }

        // A header that is not the block's: refused, whoever gives it.
        let mut other = header;
        other[4] ^= 1;
        let mut source = SpentSource::Unknown;
        let refused = compute_list(&core, &other, &block, &mut source).await;
        assert!(refused.is_err(), "a block that is not the header's");
    }
}

/// The evidence of the paying block's tweaks (the transactions it spends from, without
/// witness data) is the same from btcd's transaction index and from Bitcoin Core's way
/// (`getblock 3`'s prevout heights, `getblockhash`, then `getrawtransaction <txid> false
/// <block>`, no index: played by a stand-in answering from btcd's own data, which refuses
/// a lookup without the block); it proves the list the gateway serves; and a client
/// asking a gateway following btcd gets it in `spent_from` pieces, and `not_found` for a
/// block not on the chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_evidence_of_a_blocks_tweaks_either_way_and_served() {
    use lightwire_gateway::spent_from::{ServedSpentFrom, compute, keep};
    use lightwire_gateway::tweaks::{ServedTweaks, SpentSource, compute_list};
    use lightwire_primitives::{Reader, Tx};

    let btcd = Btcd::start_with(&["--txindex"]);
    let case = SilentCase::paid_by(&btcd);
    btcd.generate(1);
    let btcd_rpc = btcd.rpc_endpoint();
    let height = case.paid.height;
    let (hash, block, raw, header) = btcd.block_at(height);

    let mut source = SpentSource::Unknown;
    let evidence = compute(&btcd_rpc, &header, &block, &mut source)
        .await
        .unwrap();
    assert_eq!(source, SpentSource::TxIndex, "btcd has no verbosity 3");
    // A count, then transactions without witness data in txid order, each one the paying
    // block spends from.
    let mut r = Reader::new(&evidence);
    let n = r.compact_size("count").unwrap();
    let mut txs = Vec::new();
    for _ in 0..n {
        let tx = Tx::read(&mut r).unwrap();
        assert!(!tx.has_witness());
        txs.push(tx);
    }
    r.finish().unwrap();
    assert!(!txs.is_empty());
    assert!(txs.windows(2).all(|w| w[0].txid().0 < w[1].txid().0));
    let checked = lightwire_primitives::CheckedBlock::check(&raw, &block).unwrap();
    let spent: std::collections::HashSet<[u8; 32]> = checked
        .transactions()
        .skip(1)
        .flat_map(|tx| tx.inputs().map(|i| *i.prev_txid).collect::<Vec<_>>())
        .collect();
    assert!(txs.iter().all(|t| spent.contains(&t.txid().0)));
    // It proves the list the gateway serves.
    let given: Vec<&[u8]> = txs.iter().map(|t| t.raw()).collect();
    let mut tweaks = Vec::new();
    lightwire_wallet::silent_evidence::tweaks_from_evidence(&checked, &given, &mut tweaks).unwrap();
    let mut proven = Vec::new();
    lightwire_primitives::write_tweak_list(&mut tweaks, &mut proven);
    let mut source = SpentSource::Unknown;
    let served = compute_list(&btcd_rpc, &header, &block, &mut source)
        .await
        .unwrap();
    assert_eq!(proven, served);
    assert_eq!(served[1..], case.tweaks[0]);

    // Core's way, from btcd's data: each input's prevout with its real height.
    let (verbose, table) = core_view(&btcd, &hash, &raw);
    let core = core_stand_in_with(verbose.clone(), table.clone()).await;
    let mut source = SpentSource::Unknown;
    let from_core = compute(&core, &header, &block, &mut source).await.unwrap();
    assert_eq!(source, SpentSource::VerboseBlock);
    assert_eq!(from_core, evidence, "the same evidence either way");
    // Without the lookups by block (the stand-in refuses an index lookup): no evidence.
    let blind = core_stand_in_with(verbose, Vec::new()).await;
    let mut source = SpentSource::Unknown;
    assert!(compute(&blind, &header, &block, &mut source).await.is_err());

    // Served: asked by a client, in pieces; not found off the chain.
    let gw = following(&btcd).await;
    wait_until("the gateway at btcd's tip", || {
        gw.shared.chain.read().unwrap().block_hash(height) == Some(block)
    })
    .await;
    let dir = btcd.dir.join("evidence-tweaks");
    {
        let mut c = gw.shared.chain.write().unwrap();
        c.serve_tweaks(ServedTweaks::open(&dir, Network::Regtest).unwrap());
        c.serve_spent_from(ServedSpentFrom::new(gw.shared.filter_notify.clone()));
    }
    tokio::spawn(keep(gw.shared.clone(), btcd_rpc.clone(), gw.stopped()));
    let mut client = common::client(&gw, Framing::OnePerFrame).await;
    assert_eq!(get_spent_from(&mut client, block).await, Some(evidence));
    let elsewhere = lightwire_chain::BlockHash([7; 32]);
    assert_eq!(get_spent_from(&mut client, elsewhere).await, None);
}

/// Bitcoin Core's `getblock <hash> 3` answer for btcd's block `raw` (display hash `hash`),
/// built from btcd's own data as Core's RPC documents it: each transaction's `hex`, each
/// input's `prevout` (its `scriptPubKey.hex` and the real `height` of the block holding
/// the transaction spent from); and the calls Core answers for a block's evidence without
/// a transaction index: `getblockhash` of those heights, `getrawtransaction <txid> false
/// <block>`.
fn core_view(
    btcd: &Btcd,
    hash: &str,
    raw: &[u8],
) -> (
    serde_json::Value,
    Vec<(serde_json::Value, serde_json::Value)>,
) {
    use lightwire_primitives::Tx;
    let mut table = Vec::new();
    let parsed = lightwire_primitives::Block::parse(raw).unwrap();
    let txs: Vec<serde_json::Value> = parsed
        .transactions()
        .enumerate()
        .map(|(i, tx)| {
            let vin: Vec<serde_json::Value> = tx
                .inputs()
                .map(|input| {
                    if i == 0 {
                        return serde_json::json!({"coinbase": "00"});
                    }
                    let txid = input.prev_txid().to_string();
                    let prev: serde_json::Value =
                        serde_json::from_str(&btcd.ctl(&["getrawtransaction", &txid, "1"]))
                            .unwrap();
                    let at = prev["blockhash"].as_str().unwrap().to_string();
                    let header: serde_json::Value =
                        serde_json::from_str(&btcd.ctl(&["getblockheader", &at, "true"]))
                            .unwrap();
                    let h = header["height"].as_u64().unwrap();
                    let prev_raw = hex::decode(prev["hex"].as_str().unwrap()).unwrap();
                    let script = Tx::parse(&prev_raw)
                        .unwrap()
                        .outputs()
                        .nth(input.prev_vout as usize)
                        .unwrap()
                        .script
                        .to_vec();
                    table.push((serde_json::json!(["getblockhash", [h]]), serde_json::json!(at)));
                    table.push((
                        serde_json::json!(["getrawtransaction", [txid, false, at]]),
                        prev["hex"].clone(),
                    ));
                    serde_json::json!({"txid": txid, "vout": input.prev_vout,
                        "prevout": {"generated": false, "height": h, "value": 1.0,
                            "scriptPubKey": {"hex": hex::encode(script)}}})
                })
                .collect();
            serde_json::json!({"txid": tx.txid().to_string(), "hex": hex::encode(tx.raw()), "vin": vin})
        })
        .collect();
    (serde_json::json!({"hash": hash, "tx": txs}), table)
}

/// What block `hash` spends from, asked of the gateway by `client`: its bytes, or `None`
/// for `not_found`.
async fn get_spent_from(client: &mut Client, hash: lightwire_chain::BlockHash) -> Option<Vec<u8>> {
    block_answer(client, hash, lightwire_wire::BlockKind::SpentFrom).await
}

/// A stand-in for Bitcoin Core's RPC that answers every `getblock` with `block` (the
/// verbosity 3 answer) and refuses every other call (JSON-RPC -32601), one connection a
/// request.
async fn core_stand_in(block: serde_json::Value) -> lightwire_gateway::fees::RpcEndpoint {
    core_stand_in_with(block, Vec::new()).await
}

/// [`core_stand_in`], also answering each call of `table` (method and params, exactly)
/// with its result.
async fn core_stand_in_with(
    block: serde_json::Value,
    table: Vec<(serde_json::Value, serde_json::Value)>,
) -> lightwire_gateway::fees::RpcEndpoint {
    let table = std::sync::Arc::new(table);
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let (block, table) = (block.clone(), table.clone());
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request);
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("Content-Length: "))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0);
                        if body.len() >= len {
                            break;
                        }
                    }
                    if n == 0 {
                        return;
                    }
                }
                let text = String::from_utf8_lossy(&request);
                let body = text.split_once("\r\n\r\n").unwrap().1;
                let calls: Vec<serde_json::Value> = match serde_json::from_str(body).unwrap() {
                    serde_json::Value::Array(calls) => calls,
                    one => vec![one],
                };
                let answers: Vec<serde_json::Value> = calls
                    .iter()
                    .map(|c| {
                        let call = serde_json::json!([c["method"], c["params"]]);
                        if c["method"] == "getblock" && c["params"][1] == 3 {
                            serde_json::json!({"result": block, "error": null, "id": c["id"]})
                        } else if let Some((_, result)) = table.iter().find(|(k, _)| *k == call) {
                            serde_json::json!({"result": result, "error": null, "id": c["id"]})
                        } else {
                            serde_json::json!({"result": null, "error": {"code": -32601, "message": "Method not found"}, "id": c["id"]})
                        }
                    })
                    .collect();
                let json = serde_json::Value::Array(answers).to_string();
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{json}",
                    json.len()
                );
                let _ = s.write_all(reply.as_bytes()).await;
            });
        }
    });
    lightwire_gateway::fees::RpcEndpoint {
        addr,
        credentials: "u:p".into(),
        file: None,
    }
}

/// The tweak headers (rebuilt from the hashes and anchors) and the lists a gateway serves
/// for `headers` and `lists`.
async fn tweaks_served(
    client: &mut Client,
    headers: lightwire_wire::FilterRange,
    lists: lightwire_wire::FilterRange,
) -> (Vec<lightwire_primitives::FilterHeader>, Vec<Vec<u8>>) {
    use lightwire_primitives::{FilterHash, FilterHeader};
    client
        .send(&Message::GetTweakHeaders(lightwire_wire::GetFilterHeaders(
            headers,
        )))
        .await
        .unwrap();
    let mut chain: Vec<FilterHeader> = Vec::new();
    loop {
        let answer = tokio::time::timeout(
            Duration::from_secs(30),
            client.recv(|m| match Message::decode(m) {
                Ok(Message::TweakHeaders(t)) => {
                    assert!(!t.flags.stop_unknown, "the stop is on the gateway's chain");
                    assert!(t.count() > 0, "an answer cut short: {:?}", t.flags);
                    Some((t.anchors[..32].to_vec(), t.hashes.to_vec(), t.flags.last))
                }
                _ => None,
            }),
        )
        .await
        .expect("tweak headers in time")
        .unwrap();
        let Some((anchor, hashes, last)) = answer else {
            continue;
        };
        let mut before = FilterHeader(anchor.try_into().unwrap());
        assert_eq!(before, chain.last().copied().unwrap_or(FilterHeader::ZERO));
        for h in hashes.chunks_exact(32) {
            before = before.next(&FilterHash(h.try_into().unwrap()));
            chain.push(before);
        }
        if last {
            break;
        }
    }
    client
        .send(&Message::GetTweaks(lightwire_wire::GetFilters(lists)))
        .await
        .unwrap();
    let got = pieces_answer(client, lightwire_wire::FilterKind::Tweaks).await;
    for (i, (height, _)) in got.iter().enumerate() {
        assert_eq!(
            *height as usize, i,
            "lists in order of height, none skipped"
        );
    }
    let got = got.into_iter().map(|(_, list)| list).collect();
    (chain, got)
}

/// Block `hash` asked of the gateway by `client`: its bytes, or `None` for `not_found`.
async fn get_block(client: &mut Client, hash: lightwire_chain::BlockHash) -> Option<Vec<u8>> {
    block_answer(client, hash, lightwire_wire::BlockKind::Block).await
}

/// `kind`'s data of block `hash` asked of the gateway by `client`, put together from its
/// pieces: its bytes, or `None` for `not_found`.
async fn block_answer(
    client: &mut Client,
    hash: lightwire_chain::BlockHash,
    kind: lightwire_wire::BlockKind,
) -> Option<Vec<u8>> {
    use lightwire_wire::{BlockKind, GetBlock};
    let req = GetBlock {
        id: 77,
        block_hash: hash.0,
    };
    let ask = match kind {
        BlockKind::Block => Message::GetBlock(req),
        BlockKind::SpentFrom => Message::GetSpentFrom(req),
    };
    client.send(&ask).await.unwrap();
    let mut got = Vec::new();
    loop {
        let piece = tokio::time::timeout(
            Duration::from_secs(60),
            client.recv(|m| match (kind, Message::decode(m)) {
                (BlockKind::Block, Ok(Message::Block(p)))
                | (BlockKind::SpentFrom, Ok(Message::SpentFrom(p))) => {
                    Some((p.not_found, p.offset, p.data.to_vec(), p.last))
                }
                _ => None,
            }),
        )
        .await
        .expect("an answer in time")
        .unwrap();
        let Some((not_found, offset, data, last)) = piece else {
            continue;
        };
        if not_found {
            return None;
        }
        assert_eq!(offset as usize, got.len());
        got.extend_from_slice(&data);
        if last {
            return Some(got);
        }
    }
}

/// Copy `a`'s blocks `from..=to` to `b` (`submitblock`): a shared history without a P2P
/// link between them, which would merge their branches.
fn copy_blocks(a: &Btcd, b: &Btcd, from: u32, to: u32) {
    for h in from..=to {
        let raw = a.ctl(&["getblock", &a.hash_at(h), "0"]);
        b.ctl(&["submitblock", &raw]);
    }
    assert_eq!(b.hash_at(to), a.hash_at(to));
}

/// Two btcd nodes with a shared history of 50 blocks, then branches of their own
/// (a: 60, b: 55). The gateway follows both and serves a's, the heavier. a is stopped: the
/// gateway still serves a's chain (b's has less work). b mines past it: the gateway reorgs
/// onto b's. b reorgs itself (a block invalidated, a longer branch mined): the gateway
/// follows. Throughout, the filter headers are those of the node whose chain is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_btcd_nodes_one_stopped_one_reorged_the_most_work_is_served() {
    let (a, b) = (Btcd::start(), Btcd::start());
    a.generate(50);
    copy_blocks(&a, &b, 1, 50);
    a.generate(10);
    b.generate(5);
    let gw = following_all(&[a.p2p, b.p2p]).await;
    let shared = gw.shared.clone();
    let served_hash = |h: u32| {
        shared
            .chain
            .read()
            .unwrap()
            .block_hash(h)
            .map(|x| x.to_string())
    };
    let a_tip = a.hash_at(60);
    wait_until("a's chain (60) served", || {
        shared.tip_height() == 60 && served_hash(60).as_deref() == Some(&a_tip)
    })
    .await;
    filter_headers_are_btcds(&gw, &a, 60).await;

    // a stops: its chain is still the heaviest valid one anyone showed.
    drop(a);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(served_hash(60).as_deref(), Some(a_tip.as_str()));
    let mut client = common::client(&gw, Framing::OnePerFrame).await;
    let (height, hash) = next_tip(&mut client).await;
    assert_eq!(
        (height, hash),
        (60, a_tip.clone()),
        "still served with a gone"
    );

    // b mines past it: the gateway reorgs onto b's branch, and takes its filters.
    b.generate(10);
    let b_tip = b.hash_at(65);
    wait_until("b's chain (65) served", || {
        shared.tip_height() == 65 && served_hash(65).as_deref() == Some(&b_tip)
    })
    .await;
    assert_eq!(served_hash(55), Some(b.hash_at(55)));
    filter_headers_are_btcds(&gw, &b, 65).await;

    // b reorgs: block 52 invalidated, a longer branch mined from 51.
    b.ctl(&["invalidateblock", &b.hash_at(52)]);
    b.generate(20);
    assert_eq!(b.ctl(&["getblockcount"]), "71");
    let b_tip = b.ctl(&["getbestblockhash"]);
    wait_until("b's new branch (71) served", || {
        shared.tip_height() == 71 && served_hash(71).as_deref() == Some(&b_tip)
    })
    .await;
    assert_eq!(served_hash(52), Some(b.hash_at(52)));
    filter_headers_are_btcds(&gw, &b, 71).await;

    // A client's filters come from the lead, b, asked when the client asks (both nodes'
    // tasks are woken; the lead acts), within the filter timeout.
    let mut client = common::client(&gw, Framing::OnePerFrame).await;
    let started = Instant::now();
    let got = get_filters(&mut client, &b, 60, 71).await;
    assert_eq!(got.len(), 12);
    for (height, filter) in got {
        let theirs = b.ctl(&["getcfilter", &b.hash_at(height), "0"]);
        assert_eq!(hex::encode(filter), theirs, "filter at {height}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

/// The manifest the exporter keeps in `dir`, once it exists and `done` holds for it.
async fn manifest_when(
    dir: &std::path::Path,
    what: &str,
    done: impl Fn(&lightwire_gateway::export::Manifest) -> bool,
) -> lightwire_gateway::export::Manifest {
    use lightwire_gateway::export::Manifest;
    let path = dir.join("regtest").join("manifest.json");
    let read = || {
        std::fs::read(&path)
            .ok()
            .and_then(|b| Manifest::parse(&b).ok())
    };
    wait_until(what, || read().is_some_and(|m| done(&m))).await;
    read().expect("read just now")
}

/// The filters of a filters file, in order (the records are `filters` messages whose
/// pieces may split a filter).
fn filters_of(file: &[u8], first: u32) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut current: Vec<u8> = Vec::new();
    for record in lightwire_proto::bulk::records(file) {
        let Ok(Message::Filters(f)) = Message::decode(record) else {
            panic!("a record that is not filters");
        };
        for p in f.pieces() {
            assert_eq!(p.height, first + out.len() as u32);
            assert_eq!(p.offset as usize, current.len());
            current.extend_from_slice(p.data);
            if p.ends_filter() {
                out.push(std::mem::take(&mut current));
            }
        }
    }
    assert!(current.is_empty(), "a filter left unfinished");
    out
}

/// A gateway following btcd with `--export-dir` keeps a mirror of btcd's chain: each
/// range appears once it is six blocks deep, its filters fetched from btcd (they chain,
/// from genesis, to btcd's own filter header at the file's end), and the files written
/// before are left byte for byte as they were when the chain grows and more are appended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keeps_an_export_of_btcds_chain_with_its_filters() {
    use lightwire_gateway::export::Kind;
    use lightwire_primitives::FilterHeader;

    let btcd = Btcd::start();
    btcd.generate(1010);
    let gw = following(&btcd).await;
    let out = btcd.dir.join("export");
    tokio::spawn(lightwire_gateway::exporter::keep(
        gw.shared.clone(),
        out.clone(),
        6,
        gw.stopped(),
    ));

    // Tip 1,010: the first filter range (0..=1,000) is sealed, no headers range yet.
    let first = manifest_when(&out, "the filters to 1,000", |m| {
        m.entries(Kind::Filters).last().map(|e| e.last) == Some(1000)
    })
    .await;
    assert!(
        first.entries(Kind::Headers).is_empty(),
        "2,016 headers are not 6 deep"
    );
    let dir = out.join("regtest");
    let check_filters = |m: &lightwire_gateway::export::Manifest, from: u32| {
        let headers = m.entries(Kind::FilterHeaders);
        let fh = headers.iter().find(|e| e.first == from).expect("listed");
        let top = FilterHeader(fh.top.expect("a filter-headers file has a top"));
        let theirs = btcd.ctl(&["getcfilterheader", &btcd.hash_at(fh.last), "0"]);
        assert_eq!(
            top.to_string(),
            theirs,
            "the top of {}",
            fh.file_name(Kind::FilterHeaders)
        );
        // Every filter of the file chains to it: each is btcd's.
        let filters = m.entries(Kind::Filters);
        let f = filters.iter().find(|e| e.first == from).expect("listed");
        let file = std::fs::read(dir.join(f.file_name(Kind::Filters))).unwrap();
        let got = filters_of(&file, f.first);
        assert_eq!(got.len() as u32, f.last - f.first + 1);
        let mut chained = match from.checked_sub(1) {
            None => FilterHeader::ZERO,
            Some(before) => {
                let hex = btcd.ctl(&["getcfilterheader", &btcd.hash_at(before), "0"]);
                let mut bytes: [u8; 32] = hex::decode(hex).unwrap().try_into().unwrap();
                bytes.reverse();
                FilterHeader(bytes)
            }
        };
        for filter in &got {
            chained =
                lightwire_filter::filter_header(&lightwire_filter::filter_hash(filter), &chained);
        }
        assert_eq!(
            chained,
            top,
            "the filters of {}",
            f.file_name(Kind::Filters)
        );
    };
    check_filters(&first, 0);
    let before: Vec<(String, Vec<u8>, std::time::SystemTime)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".bin"))
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let meta = e.metadata().unwrap();
            (
                name,
                std::fs::read(e.path()).unwrap(),
                meta.modified().unwrap(),
            )
        })
        .collect();
    assert_eq!(before.len(), 2, "one filter-headers and one filters file");

    // Tip 2,022: the first headers range (0..=2,015) and the second filter range.
    btcd.generate(1012);
    let second = manifest_when(&out, "headers to 2,015 and filters to 2,000", |m| {
        m.entries(Kind::Headers).last().map(|e| e.last) == Some(2015)
            && m.entries(Kind::Filters).last().map(|e| e.last) == Some(2000)
    })
    .await;
    let headers = &second.entries(Kind::Headers)[0];
    let top = lightwire_chain::BlockHash(headers.top.expect("a headers file has a top"));
    assert_eq!(top.to_string(), btcd.hash_at(2015));
    check_filters(&second, 1001);
    for (name, bytes, modified) in &before {
        let path = dir.join(name);
        assert_eq!(&std::fs::read(&path).unwrap(), bytes, "{name} unchanged");
        assert_eq!(
            &path.metadata().unwrap().modified().unwrap(),
            modified,
            "{name} not rewritten"
        );
    }
}
