//! The upstream state machine (`upstream::peer::Peer`) of three nodes at once, fed what a
//! node may send, in any order, on a virtual clock: what the roles of the lead (filters,
//! blocks, clients' transactions), the rests after silence, the asking back of relayed
//! transactions and the periodic `getheaders` do with a node that lies, stalls or says
//! anything of itself.
//!
//! Input: a sequence of operations, each `op || node || fields`:
//! * op % 12: 0 a `version` (services and relay flag from the input) and `verack`; 1
//!   `headers` of a generated regtest chain (first height and count from the input); 2
//!   `cfheaders` (a stop hash from the chain, a count, a previous header); 3 `cfilter` (a
//!   height, bytes); 4 `block` (the header at a height, then bytes); 5 `notfound` (a block
//!   or a transaction id); 6 `feefilter` (a u64); 7 `tx` (a small transaction); 8 the clock
//!   moves (0..255 s), every node's deadlines handled; 9 every node woken; 10 a session
//!   waits for a block or a filter at a height, or a client relays a transaction; 11 any
//!   bytes (a command from a menu, a payload up to 255 bytes).
//! * node % 3: which node's connection; one closed is opened again (a redial).
//!
//! Checks: nothing panics; each role is led by at most one node, and only by one whose
//! connection is established (a closed node leads nothing); the relay says "relayed" only
//! while a node leads the transactions; a deadline handled moves on (no deadline is
//! returned again at the same time after `handle_timeout`, which would spin the shell).
#![no_main]

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use lightwire_chain::generate::headers_after;
use lightwire_chain::{Header, Network, REGTEST};
use lightwire_gateway::mempool::ServedMempool;
use lightwire_gateway::p2p;
use lightwire_gateway::relay::TxRelay;
use lightwire_gateway::served::ServedChain;
use lightwire_gateway::upstream::peer::{Gateway, Peer, PeerConfig};
use lightwire_gateway::upstream::{Followers, Role};
use lightwire_gateway::wake::Wake;
use lightwire_gateway_fuzz::Cursor;
use lightwire_proto::Millis;
use lightwire_proto::session::RelayStatus;

const NODES: usize = 3;
const CHAIN: u32 = 60;
const UNIX_TIME: u64 = 4_000_000_000;

fn headers() -> &'static [Header] {
    static CHAIN_HEADERS: std::sync::OnceLock<Vec<Header>> = std::sync::OnceLock::new();
    CHAIN_HEADERS.get_or_init(|| headers_after(&REGTEST, &REGTEST.genesis, 0, CHAIN, 0))
}

fn hash_at(h: u32) -> lightwire_chain::BlockHash {
    match h {
        0 => REGTEST.genesis.block_hash(),
        h => headers()[(h - 1) as usize].block_hash(),
    }
}

fn config(i: usize) -> PeerConfig {
    PeerConfig {
        index: i,
        addr: SocketAddr::from(([127, 0, 0, 1], 8333 + i as u16)),
        network: Network::Regtest,
        idle: Duration::from_secs(60),
        nonce: 42,
    }
}

fn message(command: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    p2p::encode(&mut out, p2p::magic(Network::Regtest), command, |p| {
        p.extend_from_slice(payload)
    });
    out
}

fn tiny_tx(n: u8) -> Vec<u8> {
    let mut t = vec![2, 0, 0, 0, 1];
    t.extend_from_slice(&[n; 32]);
    t.extend_from_slice(&[0, 0, 0, 0, 0, 0xfd, 0xff, 0xff, 0xff, 1]);
    t.extend_from_slice(&1_000u64.to_le_bytes());
    t.push(22);
    t.extend_from_slice(&[0, 0x14]);
    t.extend_from_slice(&[n; 20]);
    t.extend_from_slice(&[0; 4]);
    t
}

fuzz_target!(|data: &[u8]| {
    let mut c = Cursor::new(data);
    let (mut served, validation) = ServedChain::genesis_only(&REGTEST);
    let wake = Arc::new(Wake::new());
    served.serve_upstream_filters(1 << 20, wake.clone());
    served.serve_upstream_blocks(wake.clone());
    let chain = RwLock::new(served);
    let followers = Followers::new(validation);
    let relay = TxRelay::new(wake);
    let mempool = ServedMempool::new(1 << 20);
    let gw = Gateway {
        chain: &chain,
        followers: &followers,
        relay: &relay,
        mempool: Some(&mempool),
        unix_time: UNIX_TIME,
    };
    let mut now = Millis(1_000);
    let mut peers: Vec<Peer> = (0..NODES).map(|i| Peer::new(now, config(i), &gw)).collect();
    let mut steps = 0;
    while !c.is_empty() && steps < 200 {
        steps += 1;
        let op = c.u8() % 12;
        let i = usize::from(c.u8()) % NODES;
        if peers[i].poll_timeout().is_none() {
            // Closed: dialled again.
            peers[i] = Peer::new(now, config(i), &gw);
        }
        let bytes: Vec<u8> = match op {
            0 => {
                let mut v = Vec::new();
                p2p::write_version(&mut v, UNIX_TIME, 7, c.u8().into(), c.u8() & 1 == 1);
                v[4..12].copy_from_slice(&c.u64().to_le_bytes());
                if c.u8() & 1 == 0 {
                    // Without the relay flag at all (BIP37: relays).
                    v.pop();
                }
                [message("version", &v), message("verack", &[])].concat()
            }
            1 => {
                let first = u32::from(c.u8()) % CHAIN;
                let count = (u32::from(c.u8()) % 20).min(CHAIN - first);
                let mut p = Vec::new();
                p2p::write_compact(&mut p, u64::from(count));
                for h in &headers()[first as usize..(first + count) as usize] {
                    p.extend_from_slice(&h.encode());
                    p.push(0);
                }
                message("headers", &p)
            }
            2 => {
                let stop = u32::from(c.u8()) % (CHAIN + 1);
                let n = c.u8() % 4;
                let mut p = vec![0];
                p.extend_from_slice(hash_at(stop).as_bytes());
                p.extend_from_slice(c.bytes(32));
                p2p::write_compact(&mut p, u64::from(n));
                for _ in 0..n {
                    p.extend_from_slice(c.bytes(32));
                }
                message("cfheaders", &p)
            }
            3 => {
                let h = u32::from(c.u8()) % (CHAIN + 1);
                let mut p = vec![0];
                p.extend_from_slice(hash_at(h).as_bytes());
                let n = usize::from(c.u8() % 8);
                let filter = c.bytes(n);
                p2p::write_compact(&mut p, filter.len() as u64);
                p.extend_from_slice(filter);
                message("cfilter", &p)
            }
            4 => {
                let h = u32::from(c.u8()) % CHAIN + 1;
                let mut p = headers()[(h - 1) as usize].encode().to_vec();
                let n = usize::from(c.u8() % 16);
                p.extend_from_slice(c.bytes(n));
                message("block", &p)
            }
            5 => {
                let mut p = Vec::new();
                p2p::write_compact(&mut p, 1);
                if c.u8() & 1 == 0 {
                    p.extend_from_slice(&0x4000_0002u32.to_le_bytes());
                    p.extend_from_slice(hash_at(u32::from(c.u8()) % (CHAIN + 1)).as_bytes());
                } else {
                    p.extend_from_slice(&0x4000_0001u32.to_le_bytes());
                    let tx = tiny_tx(c.u8() % 4);
                    let txid = lightwire_primitives::Tx::parse(&tx).unwrap().txid().0;
                    p.extend_from_slice(&txid);
                }
                message("notfound", &p)
            }
            6 => message("feefilter", &c.u64().to_le_bytes()),
            7 => message("tx", &tiny_tx(c.u8() % 4)),
            8 => {
                now = now + Duration::from_secs(c.u8().into());
                for p in peers.iter_mut() {
                    // Every deadline due by `now`, one after another.
                    let mut guard = 0;
                    while let Some(t) = p.poll_timeout().filter(|t| *t <= now) {
                        p.handle_timeout(t, &gw);
                        assert_ne!(p.poll_timeout(), Some(t), "a deadline handled did nothing");
                        guard += 1;
                        assert!(guard < 1_000, "deadlines without end");
                    }
                }
                Vec::new()
            }
            9 => {
                for p in peers.iter_mut() {
                    p.handle_wake(now, &gw);
                }
                Vec::new()
            }
            10 => {
                let h = u32::from(c.u8()) % (CHAIN + 1);
                let read = chain.read().unwrap();
                let header = lightwire_proto::Served::header(&*read, h);
                match c.u8() % 3 {
                    0 => {
                        let _ = read.blocks().map(|b| b.with_block(h, header, <[u8]>::len));
                    }
                    1 => {
                        let _ = read
                            .filters()
                            .map(|f| f.with_filter(h, header, <[u8]>::len));
                    }
                    _ => {
                        let status = relay.push(&tiny_tx(c.u8() % 4));
                        let leads = followers.lead(Role::Transactions);
                        assert!(
                            status != RelayStatus::Relayed || leads.is_some(),
                            "relayed with no node taking transactions"
                        );
                    }
                }
                Vec::new()
            }
            _ => {
                let commands = [
                    "inv",
                    "getdata",
                    "ping",
                    "pong",
                    "sendheaders",
                    "mempool",
                    "reject",
                    "zz",
                ];
                let command = commands[usize::from(c.u8()) % commands.len()];
                let n = usize::from(c.u8());
                let payload = c.bytes(n);
                message(command, payload)
            }
        };
        if !bytes.is_empty() {
            peers[i].handle_input(now, &bytes, &gw);
        }
        for p in peers.iter_mut() {
            while let Some(out) = p.poll_transmit() {
                let n = out.len();
                p.transmitted(n);
            }
            while p.poll_event().is_some() {}
        }
        for role in Role::ALL {
            if let Some(lead) = followers.lead(role) {
                assert!(
                    peers[lead].is_established(),
                    "node {lead} leads {role:?} but is not connected"
                );
            }
        }
    }
});
