//! The state machine against fake nodes on a virtual clock: no socket, no task, no sleep.
//! A fake node answers what it is asked as its behaviour says (or lies, stalls, goes
//! silent); time moves only when a test advances it, from one deadline to the next.

use std::sync::Arc;

use lightwire_chain::generate::headers_after;
use lightwire_chain::synthetic::{DEFAULT_PROFILE, Pool, SyntheticBlock};
use lightwire_chain::{BlockHash, CompactTarget, ConnectError, REGTEST};
use lightwire_filter::{FilterHeader, filter_hash, filter_header};
use lightwire_proto::session::{FilterLookup, RelayStatus};

use super::*;
use crate::p2p::P2pError;
use crate::upstream::WrongFilterHeaders;
use crate::upstream::lead::ASK_BACK;
use crate::wake::Wake;

/// Far enough past every generated header's time that none is from the future.
const UNIX_TIME: u64 = 4_000_000_000;
const IDLE: Duration = Duration::from_secs(60);

/// What every connection shares, and the virtual clock.
struct World {
    chain: RwLock<ServedChain>,
    followers: Followers,
    relay: TxRelay,
    /// The mempool followed, when it is.
    mempool: Option<ServedMempool>,
    now: Millis,
    /// The wall clock validation judges header times by.
    unix_time: u64,
}

impl World {
    /// Following nodes from genesis; serving their filters when `filters`.
    fn new(filters: bool) -> World {
        let (mut served, chain) = ServedChain::genesis_only(&REGTEST);
        let wake = Arc::new(Wake::new());
        if filters {
            served.serve_upstream_filters(1 << 20, wake.clone());
        }
        World {
            chain: RwLock::new(served),
            followers: Followers::new(chain),
            relay: TxRelay::new(wake),
            mempool: None,
            now: Millis(1_000),
            unix_time: UNIX_TIME,
        }
    }

    fn gw(&self) -> Gateway<'_> {
        Gateway {
            chain: &self.chain,
            followers: &self.followers,
            relay: &self.relay,
            mempool: self.mempool.as_ref(),
            unix_time: self.unix_time,
        }
    }

    fn tip(&self) -> u32 {
        self.chain.read().unwrap().tip().height
    }

    fn filter_tip(&self) -> Option<u32> {
        self.chain.read().unwrap().filters().and_then(|f| f.tip())
    }
}

/// How a fake node behaves.
#[derive(Clone, Copy)]
struct Behaviour {
    /// Completes the handshake.
    handshake: bool,
    /// Answers `ping`.
    pongs: bool,
    /// Says it serves filters (NODE_COMPACT_FILTERS).
    says_filters: bool,
    /// Answers `getcfheaders` and `getcfilters`.
    answers_filters: bool,
    /// How it answers `getcfheaders` (while it has lies left).
    cfheaders: CfHeaders,
    /// How it answers `getdata` for a block.
    blocks: Blocks,
    /// Its `version`'s relay flag (Bitcoin Core says false with `-blocksonly`).
    relay: bool,
    /// Pruned: NODE_NETWORK_LIMITED without NODE_NETWORK (BIP159).
    pruned: bool,
    /// The `feefilter` (BIP133, sat/kvB) it sends after the handshake, if any: Bitcoin Core
    /// sends `MAX_MONEY` while in initial block download, when it drops transactions
    /// (`MaybeSendFeefilter`).
    feefilter: Option<u64>,
    /// Whether it takes a peer's `tx` into its mempool (it says nothing either way, as
    /// Bitcoin Core sends no `reject`).
    accepts_txs: bool,
}

/// What a fake node answers to `getcfheaders`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum CfHeaders {
    /// Its filter headers as asked.
    Honest,
    /// A previous filter header that is not its own.
    WrongPrev,
    /// A stop hash that is not the one asked for.
    WrongStop,
    /// No filter hashes.
    Empty,
}

/// What a fake node answers to `getdata` for a block.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Blocks {
    /// The block.
    Real,
    /// Its header without its transactions: not the header's block.
    Bogus,
    /// `notfound`.
    NotFound,
    /// Nothing: Bitcoin Core's answer for a block it has not, has pruned, or will not
    /// serve (`ProcessGetBlockData` returns without a word).
    Silent,
}

const HONEST: Behaviour = Behaviour {
    handshake: true,
    pongs: true,
    says_filters: true,
    answers_filters: true,
    cfheaders: CfHeaders::Honest,
    blocks: Blocks::Real,
    relay: true,
    pruned: false,
    feefilter: None,
    accepts_txs: true,
};

/// A fake node: its chain (after genesis), a filter per block (made up: the gateway only
/// checks each against the filter hash the node itself committed to), and every message
/// it was sent.
struct FakeNode {
    headers: Vec<Header>,
    filters: Vec<Vec<u8>>,
    behaviour: Behaviour,
    /// How many more answers its behaviour may lie in (then it answers honestly).
    lies_left: u32,
    /// Its mempool: listed for `mempool` (BIP35) when it says NODE_BLOOM, served for
    /// `getdata`.
    mempool: Vec<Vec<u8>>,
    /// Whether it says NODE_BLOOM.
    bloom: bool,
    received: Vec<(Vec<u8>, Vec<u8>)>,
    pending: Vec<u8>,
    /// Whether it keeps its `cfheaders` answers in `held` instead of sending them (a node
    /// that answers late).
    hold_cfheaders: bool,
    held: Vec<Vec<u8>>,
    /// It dropped the connection for a request Bitcoin Core drops a peer for (a filter
    /// request without NODE_COMPACT_FILTERS, a block a pruned node does not keep): it
    /// answers nothing more.
    disconnected: bool,
}

impl FakeNode {
    fn new(headers: Vec<Header>, behaviour: Behaviour) -> FakeNode {
        let filters = (0..=headers.len() as u32)
            .map(|h| h.to_le_bytes().to_vec())
            .collect();
        FakeNode {
            headers,
            filters,
            behaviour,
            lies_left: u32::MAX,
            mempool: Vec::new(),
            bloom: false,
            received: Vec::new(),
            pending: Vec::new(),
            hold_cfheaders: false,
            held: Vec::new(),
            disconnected: false,
        }
    }

    fn magic() -> [u8; 4] {
        p2p::magic(Network::Regtest)
    }

    fn hash_at(&self, height: u32) -> BlockHash {
        match height {
            0 => REGTEST.genesis.block_hash(),
            h => self.headers[h as usize - 1].block_hash(),
        }
    }

    fn height_of(&self, hash: &[u8]) -> Option<u32> {
        (0..=self.headers.len() as u32).find(|h| self.hash_at(*h).as_bytes() == hash)
    }

    /// The filter header at `height`, chained from genesis's.
    fn filter_header(&self, height: u32) -> [u8; 32] {
        let header = (0..=height).fold(FilterHeader::ZERO, |prev, h| {
            filter_header(&filter_hash(&self.filters[h as usize]), &prev)
        });
        header.0
    }

    /// How many messages named `command` it was sent.
    fn count(&self, command: &str) -> usize {
        let c = command.as_bytes();
        self.received.iter().filter(|(m, _)| m == c).count()
    }

    /// Take the gateway's bytes; return the node's answers.
    fn receive(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Ok(Some((frame, n))) = p2p::decode(&self.pending, FakeNode::magic()) {
            let (command, payload) = (frame.command.to_vec(), frame.payload.to_vec());
            self.pending.drain(..n);
            self.answer(&command, &payload, &mut out);
            self.received.push((command, payload));
        }
        out
    }

    /// The lie of `lie` if it has lies left (counting it), else the truth.
    fn lie<T: PartialEq>(&mut self, lie: T, truth: T) -> T {
        if lie == truth || self.lies_left == 0 {
            return truth;
        }
        self.lies_left -= 1;
        lie
    }

    fn answer(&mut self, command: &[u8], payload: &[u8], out: &mut Vec<u8>) {
        let magic = FakeNode::magic();
        let b = self.behaviour;
        if self.disconnected {
            return;
        }
        match command {
            // Bitcoin Core disconnects a peer asking for filters it does not say it
            // serves (`PrepareBlockFilterRequest`: "peer requested unsupported block
            // filter type" or filters not served).
            b"getcfheaders" | b"getcfilters" | b"getcfcheckpt" if !b.says_filters => {
                self.disconnected = true;
            }
            b"version" if b.handshake => {
                let mut services = if b.pruned {
                    p2p::NODE_NETWORK_LIMITED
                } else {
                    p2p::NODE_NETWORK
                };
                if b.says_filters {
                    services |= p2p::NODE_COMPACT_FILTERS;
                }
                if self.bloom {
                    services |= p2p::NODE_BLOOM;
                }
                let height = self.headers.len() as u32;
                p2p::encode(out, magic, "version", |p| {
                    let at = p.len();
                    p2p::write_version(p, UNIX_TIME, 7, height, b.relay);
                    p[at + 4..at + 12].copy_from_slice(&services.to_le_bytes());
                });
                p2p::encode(out, magic, "verack", |_| {});
                if let Some(rate) = b.feefilter {
                    p2p::encode(out, magic, "feefilter", |p| {
                        p.extend_from_slice(&rate.to_le_bytes())
                    });
                }
            }
            b"ping" if b.pongs => {
                p2p::encode(out, magic, "pong", |p| p.extend_from_slice(payload));
            }
            b"getheaders" => {
                let mut at = 4;
                let count = p2p::read_compact(payload, &mut at, "count").unwrap() as usize;
                let start = (0..count)
                    .find_map(|i| self.height_of(&payload[at + 32 * i..at + 32 * (i + 1)]))
                    .unwrap_or(0) as usize;
                let after = &self.headers[start.min(self.headers.len())..];
                headers_message(out, &after[..after.len().min(p2p::MAX_HEADERS)]);
            }
            b"getcfheaders" if b.answers_filters => {
                let (first, stop) = filter_request(payload);
                let stop = self.height_of(stop.as_bytes()).unwrap();
                let mut prev = first
                    .checked_sub(1)
                    .map_or([0; 32], |h| self.filter_header(h));
                let mut stop_hash = self.hash_at(stop);
                let mut hashes: Vec<_> = (first..=stop)
                    .map(|h| filter_hash(&self.filters[h as usize]))
                    .collect();
                match self.lie(b.cfheaders, CfHeaders::Honest) {
                    CfHeaders::Honest => {}
                    CfHeaders::WrongPrev => prev = [0xee; 32],
                    CfHeaders::WrongStop => stop_hash = BlockHash([0xee; 32]),
                    CfHeaders::Empty => hashes.clear(),
                }
                let mut answer = Vec::new();
                p2p::encode(&mut answer, magic, "cfheaders", |p| {
                    p.push(0);
                    p.extend_from_slice(stop_hash.as_bytes());
                    p.extend_from_slice(&prev);
                    p2p::write_compact(p, hashes.len() as u64);
                    for hash in &hashes {
                        p.extend_from_slice(&hash.0);
                    }
                });
                if self.hold_cfheaders {
                    self.held.push(answer);
                } else {
                    out.extend_from_slice(&answer);
                }
            }
            b"getcfilters" if b.answers_filters => {
                let (first, stop) = filter_request(payload);
                for h in first..=self.height_of(stop.as_bytes()).unwrap() {
                    let filter = &self.filters[h as usize];
                    p2p::encode(out, magic, "cfilter", |p| {
                        p.push(0);
                        p.extend_from_slice(self.hash_at(h).as_bytes());
                        p2p::write_compact(p, filter.len() as u64);
                        p.extend_from_slice(filter);
                    });
                }
            }
            b"mempool" if self.bloom => {
                let txids: Vec<[u8; 32]> = self.mempool.iter().map(|t| txid_of(t)).collect();
                out.extend_from_slice(&inv_txs(&txids));
            }
            // A transaction asked for (MSG_WITNESS_TX), from its mempool; `notfound` for
            // those it has not (Bitcoin Core's `ProcessGetData`).
            b"getdata" if payload[1..5] == (1u32 | 1 << 30).to_le_bytes() => {
                let n = payload[0] as usize;
                let mut missing = Vec::new();
                for i in 0..n {
                    let want = &payload[1 + 36 * i + 4..1 + 36 * (i + 1)];
                    match self.mempool.iter().find(|t| txid_of(t) == want) {
                        Some(tx) => p2p::encode(out, magic, "tx", |p| p.extend_from_slice(tx)),
                        None => missing.push(&payload[1 + 36 * i..1 + 36 * (i + 1)]),
                    }
                }
                if !missing.is_empty() {
                    p2p::encode(out, magic, "notfound", |p| {
                        p2p::write_compact(p, missing.len() as u64);
                        missing.iter().for_each(|m| p.extend_from_slice(m));
                    });
                }
            }
            // A peer's transaction: into its mempool, if it takes it.
            b"tx" if b.accepts_txs => self.mempool.push(payload.to_vec()),
            b"getdata" => {
                let hash = &payload[5..37];
                let Some(h) = self.height_of(hash).filter(|h| *h > 0) else {
                    return;
                };
                // Bitcoin Core, pruned, disconnects a peer asking for a block more than
                // 288 and two below its tip (`ProcessGetBlockData`).
                let tip = self.headers.len() as u32;
                if b.pruned && tip - h > p2p::NODE_NETWORK_LIMITED_MIN_BLOCKS + 2 {
                    self.disconnected = true;
                    return;
                }
                let header = self.headers[h as usize - 1].encode();
                match b.blocks {
                    Blocks::Real => p2p::encode(out, magic, "block", |p| {
                        let mut block = Vec::new();
                        let pool = Pool::default_pool();
                        SyntheticBlock::write_at(&DEFAULT_PROFILE, pool, h, 0, &header, &mut block);
                        p.extend_from_slice(&block);
                    }),
                    // The header asked for, without its transactions.
                    Blocks::Bogus => p2p::encode(out, magic, "block", |p| {
                        p.extend_from_slice(&header);
                        p.push(0);
                    }),
                    // The same inventory as asked for.
                    Blocks::NotFound => {
                        p2p::encode(out, magic, "notfound", |p| p.extend_from_slice(payload))
                    }
                    Blocks::Silent => {}
                }
            }
            _ => {}
        }
    }
}

/// A `getcfheaders` or `getcfilters` payload: its start height and stop hash.
fn filter_request(payload: &[u8]) -> (u32, BlockHash) {
    let first = u32::from_le_bytes(payload[1..5].try_into().unwrap());
    (first, BlockHash(payload[5..37].try_into().unwrap()))
}

fn headers_message(out: &mut Vec<u8>, headers: &[Header]) {
    p2p::encode(out, FakeNode::magic(), "headers", |p| {
        p2p::write_compact(p, headers.len() as u64);
        for h in headers {
            p.extend_from_slice(&h.encode());
            p.push(0);
        }
    });
}

/// A connection between the state machine and a fake node, and what it passed on.
struct Link {
    peer: Peer,
    node: FakeNode,
    events: Vec<Event>,
}

impl Link {
    /// Node `index` connected at the world's time.
    fn open(world: &World, index: usize, node: FakeNode) -> Link {
        let config = PeerConfig {
            index,
            addr: SocketAddr::from(([127, 0, 0, 1], 8333 + index as u16)),
            network: Network::Regtest,
            idle: IDLE,
            nonce: 42,
        };
        let mut link = Link {
            peer: Peer::new(world.now, config, &world.gw()),
            node,
            events: Vec::new(),
        };
        link.pump(world);
        link
    }

    /// Exchange bytes until neither side has anything more to say.
    fn pump(&mut self, world: &World) {
        while let Some(bytes) = self.peer.poll_transmit() {
            let n = bytes.len();
            let answer = self.node.receive(bytes);
            self.peer.transmitted(n);
            if !answer.is_empty() {
                self.peer.handle_input(world.now, &answer, &world.gw());
            }
        }
        while let Some(e) = self.peer.poll_event() {
            self.events.push(e);
        }
    }

    /// Bytes from the node, unasked.
    fn send(&mut self, world: &World, bytes: &[u8]) {
        self.peer.handle_input(world.now, bytes, &world.gw());
        self.pump(world);
    }

    /// Move the clock to `to`, deadline by deadline.
    fn advance(&mut self, world: &mut World, to: Millis) {
        while let Some(t) = self.peer.poll_timeout().filter(|t| *t <= to) {
            world.now = t;
            self.peer.handle_timeout(t, &world.gw());
            self.pump(world);
            // A deadline handled must move on, or the shell would wake for it forever.
            assert_ne!(
                self.peer.poll_timeout(),
                Some(t),
                "the deadline did nothing"
            );
        }
        world.now = to;
    }

    fn closed(&self) -> Option<&UpstreamError> {
        self.events.iter().find_map(|e| match e {
            Event::Closed(why) => Some(why),
            _ => None,
        })
    }

    fn saw(&self, wanted: fn(&Event) -> bool) -> bool {
        self.events.iter().any(wanted)
    }
}

/// A transaction's txid.
fn txid_of(tx: &[u8]) -> [u8; 32] {
    lightwire_primitives::Tx::parse(tx).unwrap().txid().0
}

/// An `inv` announcing `txids` as transactions.
fn inv_txs(txids: &[[u8; 32]]) -> Vec<u8> {
    let mut out = Vec::new();
    p2p::encode(&mut out, FakeNode::magic(), "inv", |p| {
        p2p::write_compact(p, txids.len() as u64);
        for t in txids {
            p.extend_from_slice(&1u32.to_le_bytes());
            p.extend_from_slice(t);
        }
    });
    out
}

/// A transaction spending output 0 of `[prev; 32]`, paying 1,000 to `OP_TRUE`.
fn a_tx(prev: u8) -> Vec<u8> {
    let mut t = vec![2, 0, 0, 0, 1];
    t.extend_from_slice(&[prev; 32]);
    t.extend_from_slice(&[0, 0, 0, 0, 0, 0xfd, 0xff, 0xff, 0xff, 1]);
    t.extend_from_slice(&1_000u64.to_le_bytes());
    t.extend_from_slice(&[1, 0x51, 0, 0, 0, 0]);
    t
}

/// The gateway follows a node's mempool: it asks for the transactions already there
/// (BIP35 `mempool`, only of a node that says NODE_BLOOM: Bitcoin Core drops a peer that
/// sends it otherwise), and for those announced after (`inv`), once each; each taken is a
/// change the sessions hear of. Not followed, it asks for none.
#[test]
fn a_nodes_mempool_is_followed_where_it_serves_it() {
    let mut world = World::new(false);
    world.mempool = Some(ServedMempool::new(1 << 20));
    let mut node = FakeNode::new(chain_of(10), HONEST);
    node.bloom = true;
    node.mempool = vec![a_tx(1), a_tx(2)];
    let mut link = Link::open(&world, 0, node);
    assert_eq!(link.node.count("mempool"), 1);
    let m = world.mempool.as_ref().unwrap();
    assert_eq!(m.size().0, 2);
    assert!(link.saw(|e| matches!(e, Event::MempoolChanged)));
    // Announced after: asked for once, however often announced.
    link.node.mempool.push(a_tx(3));
    let third = txid_of(&a_tx(3));
    link.send(&world, &inv_txs(&[third]));
    link.send(&world, &inv_txs(&[third]));
    assert_eq!(m.size().0, 3);
    let asked = link
        .node
        .received
        .iter()
        .filter(|(c, p)| c == b"getdata" && p[5..37] == third)
        .count();
    assert_eq!(asked, 1);
    // A node without NODE_BLOOM is not sent `mempool`; a gateway not following the
    // mempool asks for nothing.
    let mut world = World::new(false);
    world.mempool = Some(ServedMempool::new(1 << 20));
    let link = Link::open(&world, 0, FakeNode::new(chain_of(10), HONEST));
    assert_eq!(link.node.count("mempool"), 0);
    let world = World::new(false);
    let mut link = Link::open(&world, 0, FakeNode::new(chain_of(10), HONEST));
    link.send(&world, &inv_txs(&[third]));
    assert_eq!(link.node.count("getdata"), 0);
}

/// A millisecond before `t`.
fn before(t: Millis) -> Millis {
    Millis(t.0 - 1)
}

fn chain_of(n: u32) -> Vec<Header> {
    headers_after(&REGTEST, &REGTEST.genesis, 0, n, 0)
}

impl World {
    /// Following nodes from genesis, serving their filters when `filters` and their blocks.
    fn with_blocks(filters: bool) -> World {
        let world = World::new(filters);
        world
            .chain
            .write()
            .unwrap()
            .serve_upstream_blocks(Arc::new(Wake::new()));
        world
    }

    /// A session asks for the block at `height`: whether it is here (its length), being
    /// fetched, or not to be had.
    fn block(&self, height: u32) -> FilterLookup<usize> {
        let chain = self.chain.read().unwrap();
        let header = lightwire_proto::Served::header(&*chain, height);
        chain
            .blocks()
            .unwrap()
            .with_block(height, header, <[u8]>::len)
    }

    /// The hash of the served block at `height`.
    fn hash(&self, height: u32) -> BlockHash {
        self.chain.read().unwrap().block_hash(height).unwrap()
    }
}

/// What the shell does on a wake-up (a session waits, the lead changed hands), for every
/// connection, until nothing more happens.
fn wake_all(world: &World, links: &mut [&mut Link]) {
    for _ in 0..3 {
        for link in links.iter_mut() {
            link.peer.handle_wake(world.now, &world.gw());
            link.pump(world);
        }
    }
}

/// A `notfound` listing `hashes` as blocks.
fn notfound(hashes: &[BlockHash]) -> Vec<u8> {
    let mut out = Vec::new();
    p2p::encode(&mut out, FakeNode::magic(), "notfound", |p| {
        p2p::write_compact(p, hashes.len() as u64);
        for h in hashes {
            p.extend_from_slice(&2u32.to_le_bytes());
            p.extend_from_slice(h.as_bytes());
        }
    });
    out
}

#[test]
fn the_handshake_then_headers_to_the_nodes_tip() {
    let world = World::new(false);
    let link = Link::open(&world, 0, FakeNode::new(chain_of(4500), HONEST));
    assert!(link.peer.is_established());
    assert_eq!(world.tip(), 4500, "three batches of headers");
    assert_eq!(link.node.count("getheaders"), 3);
    assert_eq!(
        (link.node.count("verack"), link.node.count("sendheaders")),
        (1, 1)
    );
    assert!(link.saw(|e| matches!(e, Event::Connected)));
    assert!(link.saw(|e| matches!(e, Event::TipChanged)));
    assert_eq!(world.followers.connected(), 1);
    assert_eq!(
        world.followers.lead(Role::Blocks),
        Some(0),
        "on the served chain: it leads"
    );
    assert_eq!(
        world.relay.push(&[1]),
        RelayStatus::Relayed,
        "the relay has a node"
    );
    assert!(link.closed().is_none());
}

/// A node that accepts the connection and never answers `version` is dropped when the
/// handshake's time is up, not a moment before.
#[test]
fn a_node_that_never_completes_the_handshake_is_dropped_in_time() {
    let mut world = World::new(false);
    let mute = Behaviour {
        handshake: false,
        ..HONEST
    };
    let start = world.now;
    let mut link = Link::open(&world, 0, FakeNode::new(chain_of(10), mute));
    assert_eq!(link.peer.poll_timeout(), Some(start + HANDSHAKE_TIMEOUT));
    link.advance(&mut world, before(start + HANDSHAKE_TIMEOUT));
    assert!(link.closed().is_none());
    link.advance(&mut world, start + HANDSHAKE_TIMEOUT);
    assert!(matches!(
        link.closed(),
        Some(UpstreamError::HandshakeTimeout)
    ));
    assert_eq!(world.followers.connected(), 0);
    assert_eq!(link.peer.poll_timeout(), None, "nothing after the end");
}

/// Silence is pinged after the idle time; a node that answers stays, one that does not
/// is dropped after as long again.
#[test]
fn a_ping_not_answered_drops_the_node() {
    let mut world = World::new(false);
    let mut link = Link::open(&world, 0, FakeNode::new(chain_of(10), HONEST));
    let t0 = world.now;
    link.advance(&mut world, t0 + IDLE * 5);
    assert_eq!(
        link.node.count("ping"),
        5,
        "one per idle time, each answered"
    );
    assert!(link.closed().is_none());

    // It goes mute (it would answer `getheaders`, which is hearing from it).
    link.node.disconnected = true;
    let t1 = world.now;
    link.advance(&mut world, t1 + IDLE);
    assert_eq!(link.node.count("ping"), 6);
    link.advance(&mut world, before(t1 + IDLE * 2));
    assert!(link.closed().is_none(), "it still has time to answer");
    link.advance(&mut world, t1 + IDLE * 2);
    assert!(matches!(link.closed(), Some(UpstreamError::Silent)));
    assert!(link.saw(|e| matches!(e, Event::LeadFreed)), "it led");
    assert_eq!(
        (
            world.followers.lead(Role::Blocks),
            world.followers.connected()
        ),
        (None, 0)
    );
    assert_eq!(
        world.relay.push(&[1]),
        RelayStatus::Busy,
        "no node to relay to"
    );
}

/// A lead that answers headers and pings but never its `getcfheaders` (Bitcoin Core
/// answers nothing for filters its index has not reached: `PrepareBlockFilterRequest`
/// fails and `ProcessGetCFHeaders` returns without a word) is not dropped: after half the
/// idle time, not a moment before, it gives up the filters' lead and rests from it, then
/// is asked again, the rest doubling; it keeps the blocks' lead and its connection.
#[test]
fn a_lead_silent_on_filter_headers_rests_from_them_and_is_asked_again() {
    let mut world = World::new(true);
    let stalls = Behaviour {
        answers_filters: false,
        ..HONEST
    };
    let mut link = Link::open(&world, 0, FakeNode::new(chain_of(100), stalls));
    assert_eq!(world.followers.lead(Role::Filters), Some(0));
    assert_eq!(link.node.count("getcfheaders"), 1);
    let asked = world.now;
    assert_eq!(link.peer.poll_timeout(), Some(asked + IDLE / 2));
    link.advance(&mut world, before(asked + IDLE / 2));
    assert_eq!(world.followers.lead(Role::Filters), Some(0));
    link.advance(&mut world, asked + IDLE / 2);
    assert!(
        link.closed().is_none(),
        "silence is no fault: {:?}",
        link.closed()
    );
    assert!(link.saw(|e| matches!(e, Event::LeadFreed)));
    assert_eq!(world.followers.lead(Role::Filters), None, "resting");
    assert_eq!(world.followers.lead(Role::Blocks), Some(0), "blocks still");
    assert_eq!(world.filter_tip(), None, "nothing taken from it");
    // After its rest (as long as the deadline), asked again; then a rest twice as long.
    let rested = asked + IDLE / 2 + IDLE / 2;
    link.advance(&mut world, rested);
    assert_eq!(world.followers.lead(Role::Filters), Some(0));
    assert_eq!(link.node.count("getcfheaders"), 2);
    link.advance(&mut world, rested + IDLE / 2);
    assert_eq!(world.followers.lead(Role::Filters), None);
    link.advance(&mut world, before(rested + IDLE / 2 + IDLE));
    assert_eq!(
        link.node.count("getcfheaders"),
        2,
        "the second rest is twice as long"
    );
    // Its index caught up: it answers, and the rest starts over.
    link.node.behaviour.answers_filters = true;
    link.advance(&mut world, rested + IDLE / 2 + IDLE);
    assert_eq!(link.node.count("getcfheaders"), 3);
    assert_eq!(world.filter_tip(), Some(100));
    assert!(link.closed().is_none());
}

/// The lead goes away while a session waits for a filter: the next node that may lead
/// (one that serves filters) takes the lead when woken, and fetches it.
#[test]
fn a_lead_that_disconnects_hands_the_lead_to_the_next() {
    let world = World::new(true);
    let mut a = Link::open(&world, 0, FakeNode::new(chain_of(100), HONEST));
    let no_filters = Behaviour {
        says_filters: false,
        answers_filters: false,
        ..HONEST
    };
    let mut c = Link::open(&world, 2, FakeNode::new(chain_of(100), no_filters));
    let mut b = Link::open(&world, 1, FakeNode::new(chain_of(100), HONEST));
    assert_eq!(world.followers.lead(Role::Blocks), Some(0));
    assert_eq!(world.followers.connected(), 3);
    assert_eq!(world.filter_tip(), Some(100));
    assert_eq!(b.node.count("getcfheaders"), 0, "only the lead is asked");

    let filter_50 = || {
        let chain = world.chain.read().unwrap();
        let header = lightwire_proto::Served::header(&*chain, 50);
        chain
            .filters()
            .unwrap()
            .with_filter(50, header, <[u8]>::to_vec)
    };
    assert_eq!(filter_50(), FilterLookup::Pending, "a session waits");
    a.peer.close(&world.gw(), UpstreamError::Closed);
    a.pump(&world);
    assert!(a.saw(|e| matches!(e, Event::LeadFreed)));
    assert_eq!(world.followers.connected(), 2);
    // The shell wakes the others: the first woken hands the lead to the one that may
    // take it, even when that is not itself.
    c.peer.handle_wake(world.now, &world.gw());
    c.pump(&world);
    assert_eq!(
        world.followers.lead(Role::Blocks),
        Some(1),
        "it serves no filters: it may not lead"
    );
    assert!(
        c.saw(|e| matches!(e, Event::LeadFreed)),
        "the others are woken"
    );
    assert_eq!(b.node.count("getcfilters"), 0, "not yet woken");
    b.peer.handle_wake(world.now, &world.gw());
    b.pump(&world);
    assert_eq!(world.followers.lead(Role::Blocks), Some(1));
    assert_eq!(b.node.count("getcfilters"), 1);
    assert_eq!(
        filter_50(),
        FilterLookup::Ready(50u32.to_le_bytes().to_vec())
    );
    assert!(b.saw(|e| matches!(e, Event::DataArrived)));
}

/// A node whose chain has a header breaking a rule is dropped naming the rule and the
/// height; nothing of the batch holding it is served.
#[test]
fn a_header_breaking_a_rule_drops_the_node_with_the_rule() {
    let mut headers = chain_of(3000);
    headers[2100].bits = CompactTarget(0x1d00_ffff);
    let world = World::new(false);
    let link = Link::open(&world, 0, FakeNode::new(headers, HONEST));
    let Some(UpstreamError::Invalid(ConnectError::Invalid(e))) = link.closed() else {
        panic!("{:?}", link.events);
    };
    assert_eq!(e.height, 2101, "{e}");
    assert_eq!(world.tip(), 2000, "the valid batch before it is kept");
    assert_eq!(world.followers.connected(), 0);
}

/// Malformed messages end the connection with what is wrong with them; a message
/// announcing more than the largest payload is refused from its header, not buffered.
#[test]
fn malformed_messages_drop_the_node_naming_the_fault() {
    let magic = FakeNode::magic();
    let mut checksum = Vec::new();
    p2p::encode(&mut checksum, magic, "pong", |p| {
        p.extend_from_slice(&[1; 8])
    });
    checksum[24] ^= 1;
    let mut other_network = Vec::new();
    p2p::encode(
        &mut other_network,
        p2p::magic(Network::Mainnet),
        "pong",
        |_| {},
    );
    let mut too_many = Vec::new();
    p2p::encode(&mut too_many, magic, "headers", |p| {
        p2p::write_compact(p, 2001)
    });
    let mut huge = Vec::new();
    p2p::encode(&mut huge, magic, "block", |_| {});
    huge[16..20].copy_from_slice(&(p2p::MAX_PAYLOAD as u32 + 1).to_le_bytes());
    let mut not_basic = Vec::new();
    p2p::encode(&mut not_basic, magic, "cfilter", |p| p.push(1));
    for (bytes, fault) in [
        (checksum, P2pError::BadChecksum),
        (
            other_network,
            P2pError::BadMagic(p2p::magic(Network::Mainnet)),
        ),
        (too_many, P2pError::TooManyHeaders(2001)),
        (huge, P2pError::TooLarge(p2p::MAX_PAYLOAD + 1)),
        (
            not_basic,
            P2pError::BadFilterMessage("not the basic filter type"),
        ),
    ] {
        let world = World::new(false);
        let mut link = Link::open(&world, 0, FakeNode::new(chain_of(10), HONEST));
        link.send(&world, &bytes);
        assert!(
            matches!(link.closed(), Some(UpstreamError::P2p(e)) if *e == fault),
            "{fault}: {:?}",
            link.events
        );
    }
}

/// A filter that is not the one the node's own filter headers commit to, and a block
/// that is not its header's, drop the node; the sessions waiting for the block are told
/// it is not found.
#[test]
fn a_lying_filter_or_block_drops_the_node() {
    let world = World::new(true);
    let mut link = Link::open(&world, 0, FakeNode::new(chain_of(100), HONEST));
    link.node.filters[30] = b"another filter".to_vec();
    let header = |h| lightwire_proto::Served::header(&*world.chain.read().unwrap(), h);
    let wanted = world
        .chain
        .read()
        .unwrap()
        .filters()
        .unwrap()
        .with_filter(30, header(30), |_| ());
    assert_eq!(wanted, FilterLookup::Pending);
    link.peer.handle_wake(world.now, &world.gw());
    link.pump(&world);
    assert!(matches!(
        link.closed(),
        Some(UpstreamError::FilterMismatch(30))
    ));

    let world = World::new(true);
    world
        .chain
        .write()
        .unwrap()
        .serve_upstream_blocks(Arc::new(Wake::new()));
    let bogus = Behaviour {
        blocks: Blocks::Bogus,
        ..HONEST
    };
    let mut link = Link::open(&world, 0, FakeNode::new(chain_of(100), bogus));
    let block = |w: &World| {
        let chain = w.chain.read().unwrap();
        let header = lightwire_proto::Served::header(&*chain, 50);
        chain.blocks().unwrap().with_block(50, header, |_| ())
    };
    assert_eq!(block(&world), FilterLookup::Pending);
    link.peer.handle_wake(world.now, &world.gw());
    link.pump(&world);
    assert_eq!(link.node.count("getdata"), 1);
    assert!(matches!(link.closed(), Some(UpstreamError::Block(_))));
    assert!(link.saw(|e| matches!(e, Event::DataArrived)));
    assert_eq!(block(&world), FilterLookup::Missing);
}

/// Messages cut anywhere (one byte at a time here) are read as whole ones.
#[test]
fn messages_arriving_a_byte_at_a_time_are_read_whole() {
    let world = World::new(false);
    let mut link = Link::open(&world, 0, FakeNode::new(chain_of(10), HONEST));
    let mut more = Vec::new();
    let extra = headers_after(&REGTEST, &link.node.headers[9], 10, 5, 0);
    headers_message(&mut more, &extra);
    link.node.headers.extend(extra);
    for byte in &more {
        link.send(&world, std::slice::from_ref(byte));
    }
    assert_eq!(world.tip(), 15);
    assert!(link.closed().is_none());
}

/// A node that says it is at genesis (start height 0, NODE_COMPACT_FILTERS) and answers
/// `headers` empty takes the lead when it comes first; once an honest node shows a chain
/// above it, the honest one leads: filter headers, blocks and clients' transactions go
/// through the node that can deliver them, not into nothing.
#[test]
fn a_node_stuck_at_genesis_does_not_keep_the_lead() {
    let world = World::with_blocks(true);
    let mut stuck = Link::open(&world, 0, FakeNode::new(Vec::new(), HONEST));
    assert_eq!(
        world.followers.lead(Role::Blocks),
        Some(0),
        "alone at genesis, it leads"
    );
    let mut honest = Link::open(&world, 1, FakeNode::new(chain_of(100), HONEST));
    wake_all(&world, &mut [&mut stuck, &mut honest]);
    assert_eq!(world.tip(), 100);
    assert_eq!(
        world.followers.lead(Role::Blocks),
        Some(1),
        "the node that can deliver leads"
    );
    assert_eq!(world.filter_tip(), Some(100));
    assert_eq!(world.block(50), FilterLookup::Pending);
    wake_all(&world, &mut [&mut stuck, &mut honest]);
    assert!(matches!(world.block(50), FilterLookup::Ready(_)));
    assert_eq!(world.relay.push(&[1, 2, 3]), RelayStatus::Relayed);
    wake_all(&world, &mut [&mut stuck, &mut honest]);
    assert_eq!((stuck.node.count("tx"), honest.node.count("tx")), (0, 1));
    assert_eq!(stuck.node.count("getdata"), 0);
    assert!(stuck.closed().is_none() && honest.closed().is_none());
}

/// A lead whose `cfheaders` do not follow on from the filter headers held (its previous
/// filter header is not ours) is dropped, naming the height; the filter headers held
/// stay (today's answer erased one per round), and it is not asked again.
#[test]
fn a_lead_whose_filter_headers_do_not_follow_on_is_dropped_and_erases_nothing() {
    let world = World::new(true);
    let mut first = Link::open(&world, 0, FakeNode::new(chain_of(100), HONEST));
    assert_eq!(world.filter_tip(), Some(100));
    let held = |h| world.chain.read().unwrap().filters().unwrap().entry(h);
    let before = held(100);
    first.peer.close(&world.gw(), UpstreamError::Closed);
    first.pump(&world);
    let lies = Behaviour {
        cfheaders: CfHeaders::WrongPrev,
        ..HONEST
    };
    let mut node = FakeNode::new(chain_of(101), lies);
    node.lies_left = 1;
    let liar = Link::open(&world, 1, node);
    assert_eq!(world.tip(), 101);
    assert!(
        matches!(
            liar.closed(),
            Some(UpstreamError::FilterHeaders {
                height: 101,
                wrong: WrongFilterHeaders::DoNotFollowOn
            })
        ),
        "{:?}",
        liar.events
    );
    assert_eq!(liar.node.count("getcfheaders"), 1, "not asked again");
    assert_eq!((world.filter_tip(), held(100)), (Some(100), before));
    assert_eq!(world.followers.lead(Role::Blocks), None);
}

/// A `cfheaders` that does not answer what was asked (another stop hash, or no filter
/// hashes) drops the node at once instead of being asked again and again.
#[test]
fn a_lead_answering_filter_headers_not_asked_for_is_dropped() {
    for (lie, wrong) in [
        (CfHeaders::WrongStop, WrongFilterHeaders::WrongStop),
        (
            CfHeaders::Empty,
            WrongFilterHeaders::WrongCount { asked: 51, got: 0 },
        ),
    ] {
        let world = World::new(true);
        let mut node = FakeNode::new(chain_of(50), HONEST);
        node.behaviour.cfheaders = lie;
        node.lies_left = 3;
        let link = Link::open(&world, 0, node);
        assert!(
            matches!(link.closed(), Some(UpstreamError::FilterHeaders { height: 0, wrong: w }) if *w == wrong),
            "{lie:?}: {:?}",
            link.events
        );
        assert_eq!(link.node.count("getcfheaders"), 1, "{lie:?}");
        assert_eq!(world.filter_tip(), None);
    }
}

/// A lead that answers `notfound` for blocks of its own chain is believed for the block
/// asked (the session is told), and after three such answers another node that has the
/// same chain leads; the block the first said it lacks is asked of the new lead. A node
/// without blocks is not a liar: it stays connected.
#[test]
fn a_lead_that_has_no_blocks_hands_the_lead_to_one_that_has() {
    let world = World::with_blocks(false);
    let lacks = Behaviour {
        blocks: Blocks::NotFound,
        ..HONEST
    };
    let mut a = Link::open(&world, 0, FakeNode::new(chain_of(100), lacks));
    let mut b = Link::open(&world, 1, FakeNode::new(chain_of(100), HONEST));
    assert_eq!(world.followers.lead(Role::Blocks), Some(0));
    for h in [10, 11, 12] {
        assert_eq!(world.block(h), FilterLookup::Pending);
        // The wake-up reaches the lead first.
        a.peer.handle_wake(world.now, &world.gw());
        a.pump(&world);
        assert_eq!(
            world.block(h),
            FilterLookup::Missing,
            "believed from the node asked"
        );
    }
    assert_eq!(a.node.count("getdata"), 3);
    assert_eq!(world.followers.lead(Role::Blocks), Some(1));
    assert!(a.saw(|e| matches!(e, Event::LeadFreed)));
    wake_all(&world, &mut [&mut a, &mut b]);
    assert_eq!(
        world.block(10),
        FilterLookup::Pending,
        "asked again, of the new lead"
    );
    wake_all(&world, &mut [&mut a, &mut b]);
    assert!(matches!(world.block(10), FilterLookup::Ready(_)));
    assert_eq!(b.node.count("getdata"), 1);
    assert!(a.closed().is_none() && b.closed().is_none());
}

/// A lead that never answers its `getcfheaders` but keeps sending things nobody asked
/// for (a `notfound`, a `block`) rests from the filters after half the idle time all the
/// same: only an answer to what was asked counts.
#[test]
fn unasked_messages_do_not_count_as_answers() {
    let mut world = World::new(true);
    let stalls = Behaviour {
        answers_filters: false,
        ..HONEST
    };
    let mut link = Link::open(&world, 0, FakeNode::new(chain_of(100), stalls));
    let asked = world.now;
    let mut block = Vec::new();
    p2p::encode(&mut block, FakeNode::magic(), "block", |p| {
        p.extend_from_slice(&link.node.headers[4].encode());
        p.push(0);
    });
    for (at, unasked) in [(10, notfound(&[BlockHash([7; 32])])), (20, block)] {
        link.advance(&mut world, asked + Duration::from_secs(at));
        link.send(&world, &unasked);
    }
    link.advance(&mut world, before(asked + IDLE / 2));
    assert_eq!(world.followers.lead(Role::Filters), Some(0));
    link.advance(&mut world, asked + IDLE / 2);
    assert_eq!(
        world.followers.lead(Role::Filters),
        None,
        "{:?}",
        link.events
    );
    assert!(link.closed().is_none());
}

/// `notfound` is believed only from the node asked, for the block asked: blocks that
/// nodes list unasked (the lead one, another node thirty thousand) poison nothing, take
/// no memory and wake no session, and are fetched when a session asks.
#[test]
fn an_unsolicited_notfound_is_not_believed() {
    let world = World::with_blocks(false);
    let mut lead = Link::open(&world, 0, FakeNode::new(chain_of(100), HONEST));
    let mut other = Link::open(&world, 1, FakeNode::new(chain_of(100), HONEST));
    lead.send(&world, &notfound(&[world.hash(50)]));
    let mut many: Vec<BlockHash> = (0..30_000u32)
        .map(|i| {
            let mut h = [0u8; 32];
            h[..4].copy_from_slice(&i.to_le_bytes());
            BlockHash(h)
        })
        .collect();
    many.push(world.hash(60));
    other.send(&world, &notfound(&many));
    let woke = |l: &Link| l.saw(|e| matches!(e, Event::DataArrived));
    assert!(!woke(&lead) && !woke(&other), "no session woken");
    for h in [50, 60] {
        assert_eq!(world.block(h), FilterLookup::Pending, "{h}");
        wake_all(&world, &mut [&mut lead, &mut other]);
        assert!(matches!(world.block(h), FilterLookup::Ready(_)), "{h}");
    }
    assert!(lead.closed().is_none() && other.closed().is_none());
}

/// A node that loses the lead while a `getcfheaders` is in flight (its tip was off the
/// served chain for a moment: a restarted gateway catching up with it sees this at each
/// 2,000-header step) and takes it again answers the request given up late, after the one
/// asked since. That answer is let go: taken for the answer to the newer request (another
/// stop hash) it dropped an honest node for ten minutes, and a restarted gateway behind
/// its only node served a stalled tip (found by the long-session test, tests/soak).
#[test]
fn a_late_answer_to_a_request_given_up_does_not_drop_the_node() {
    let world = World::new(true);
    let mut node = FakeNode::new(chain_of(2_001), HONEST);
    node.hold_cfheaders = true;
    let mut a = Link::open(&world, 0, node);
    assert_eq!(world.tip(), 2_001);
    // Its first answer (0..=1999) taken: it is asked for the one left (2000..=2000).
    let first = std::mem::take(&mut a.node.held);
    assert_eq!(first.len(), 1);
    a.send(&world, &first[0]);
    assert_eq!(world.filter_tip(), Some(1_999));
    assert_eq!((a.node.count("getcfheaders"), a.node.held.len()), (2, 1));
    // A node further on takes the lead (and stalls on filters); the first gives up its
    // request. Its own chain moves on too.
    let silent = Behaviour {
        answers_filters: false,
        ..HONEST
    };
    let mut b = Link::open(&world, 1, FakeNode::new(chain_of(2_051), silent));
    assert_eq!(
        (world.tip(), world.followers.lead(Role::Blocks)),
        (2_051, Some(1))
    );
    let mut more = Vec::new();
    let extra = headers_after(&REGTEST, &a.node.headers[2_000], 2_001, 50, 0);
    headers_message(&mut more, &extra);
    a.node.headers.extend(extra);
    a.node
        .filters
        .extend((2_002..=2_051u32).map(|h| h.to_le_bytes().to_vec()));
    a.send(&world, &more);
    // The other goes: the first leads again and asks afresh (2000..=2051).
    b.peer.close(&world.gw(), UpstreamError::Closed);
    b.pump(&world);
    wake_all(&world, &mut [&mut a]);
    assert_eq!(world.followers.lead(Role::Blocks), Some(0));
    assert_eq!((a.node.count("getcfheaders"), a.node.held.len()), (3, 2));
    // The answer to the request given up comes first: let go, not an error.
    let late = std::mem::take(&mut a.node.held);
    a.send(&world, &late[0]);
    assert!(a.closed().is_none(), "{:?}", a.events);
    assert_eq!(world.filter_tip(), Some(1_999));
    a.send(&world, &late[1]);
    assert!(a.closed().is_none(), "{:?}", a.events);
    assert_eq!(world.filter_tip(), Some(2_051));
}

/// Bitcoin Core with its defaults: no `peerblockfilters` (no NODE_COMPACT_FILTERS; it
/// disconnects a peer asking for filters, `PrepareBlockFilterRequest`), every block, and
/// transactions. Beside a gateway serving filters it leads blocks and transactions and is
/// never asked for a filter; the relay says "relayed" because a node takes them.
#[test]
fn bitcoin_cores_defaults_serve_blocks_and_transactions_without_filters() {
    let world = World::with_blocks(true);
    let core = Behaviour {
        says_filters: false,
        answers_filters: false,
        ..HONEST
    };
    let mut link = Link::open(&world, 0, FakeNode::new(chain_of(100), core));
    assert_eq!(world.tip(), 100);
    assert_eq!(
        Role::ALL.map(|r| world.followers.lead(r)),
        [None, Some(0), Some(0)]
    );
    assert_eq!(world.block(10), FilterLookup::Pending);
    assert_eq!(world.relay.push(&a_tx(1)), RelayStatus::Relayed);
    link.peer.handle_wake(world.now, &world.gw());
    link.pump(&world);
    assert!(matches!(world.block(10), FilterLookup::Ready(_)));
    assert_eq!(
        link.node.count("tx"),
        1,
        "the client's transaction reached it"
    );
    assert_eq!(link.node.count("getcfheaders"), 0);
    assert!(!link.node.disconnected && link.closed().is_none());
}

/// Filters from the node that serves them, blocks and transactions from the highest of
/// all: a node serving filters that is behind does not hold the blocks back.
#[test]
fn filters_from_a_node_that_serves_them_blocks_from_the_highest() {
    let world = World::with_blocks(true);
    let core = Behaviour {
        says_filters: false,
        answers_filters: false,
        ..HONEST
    };
    let mut a = Link::open(&world, 0, FakeNode::new(chain_of(100), core));
    let mut b = Link::open(&world, 1, FakeNode::new(chain_of(90), HONEST));
    wake_all(&world, &mut [&mut a, &mut b]);
    assert_eq!(
        Role::ALL.map(|r| world.followers.lead(r)),
        [Some(1), Some(0), Some(0)]
    );
    assert_eq!(
        world.filter_tip(),
        Some(90),
        "as far as the filter node goes"
    );
    assert_eq!(world.block(95), FilterLookup::Pending);
    wake_all(&world, &mut [&mut a, &mut b]);
    assert!(matches!(world.block(95), FilterLookup::Ready(_)));
    assert_eq!(
        (a.node.count("getcfheaders"), b.node.count("getdata")),
        (0, 0)
    );
}

/// Bitcoin Core answers nothing for a block it has not (`ProcessGetBlockData`): the
/// silent lead is not dropped; after half the idle time it rests from the blocks, and the
/// next node that has them is asked.
#[test]
fn a_block_met_with_silence_is_asked_of_another_node() {
    let mut world = World::with_blocks(false);
    let silent = Behaviour {
        blocks: Blocks::Silent,
        ..HONEST
    };
    let mut a = Link::open(&world, 0, FakeNode::new(chain_of(100), silent));
    let mut b = Link::open(&world, 1, FakeNode::new(chain_of(100), HONEST));
    assert_eq!(world.followers.lead(Role::Blocks), Some(0));
    assert_eq!(world.block(10), FilterLookup::Pending);
    wake_all(&world, &mut [&mut a, &mut b]);
    assert_eq!((a.node.count("getdata"), b.node.count("getdata")), (1, 0));
    let asked = world.now;
    a.advance(&mut world, asked + IDLE / 2);
    assert!(a.closed().is_none(), "{:?}", a.closed());
    assert!(a.saw(|e| matches!(e, Event::LeadFreed)));
    assert_eq!(
        world.followers.lead(Role::Blocks),
        Some(1),
        "the first rests"
    );
    wake_all(&world, &mut [&mut a, &mut b]);
    assert!(matches!(world.block(10), FilterLookup::Ready(_)));
    assert_eq!(b.node.count("getdata"), 1);
    assert_eq!(
        world.followers.lead(Role::Transactions),
        Some(0),
        "it still takes transactions"
    );
}

/// A pruned node (NODE_NETWORK_LIMITED, BIP159) keeps its last 288 blocks, and Bitcoin
/// Core disconnects a peer asking deeper: it is asked only for those; a session waiting
/// for a deeper block is told it is not found. Beside a node keeping every block at the
/// same height, that one leads the blocks.
#[test]
fn a_pruned_node_is_asked_only_for_the_blocks_it_keeps() {
    let world = World::with_blocks(false);
    let pruned = Behaviour {
        pruned: true,
        ..HONEST
    };
    let mut a = Link::open(&world, 0, FakeNode::new(chain_of(1000), pruned));
    assert_eq!(world.followers.lead(Role::Blocks), Some(0));
    // (A session waits for one block at a time: the test's one, for each in turn.)
    for (h, found) in [(10, false), (900, true)] {
        assert_eq!(world.block(h), FilterLookup::Pending);
        a.peer.handle_wake(world.now, &world.gw());
        a.pump(&world);
        match found {
            true => assert!(matches!(world.block(h), FilterLookup::Ready(_))),
            false => assert_eq!(
                world.block(h),
                FilterLookup::Missing,
                "deeper than it keeps"
            ),
        }
    }
    assert_eq!(a.node.count("getdata"), 1);
    assert!(!a.node.disconnected && a.closed().is_none());
    // A node keeping every block, as high: it leads the blocks, and has block 10.
    let mut b = Link::open(&world, 1, FakeNode::new(chain_of(1000), HONEST));
    wake_all(&world, &mut [&mut a, &mut b]);
    assert_eq!(world.followers.lead(Role::Blocks), Some(1));
    assert_eq!(world.block(10), FilterLookup::Pending);
    wake_all(&world, &mut [&mut a, &mut b]);
    assert!(matches!(world.block(10), FilterLookup::Ready(_)));
}

/// A `-blocksonly` Bitcoin Core says relay=0 in its `version` and drops a peer's `tx`:
/// alone, clients are told "busy" rather than "relayed"; beside a node that relays,
/// transactions go through that one.
#[test]
fn a_blocks_only_node_is_given_no_transactions() {
    let world = World::with_blocks(false);
    let blocks_only = Behaviour {
        relay: false,
        ..HONEST
    };
    let mut a = Link::open(&world, 0, FakeNode::new(chain_of(100), blocks_only));
    assert_eq!(world.followers.lead(Role::Blocks), Some(0));
    assert_eq!(world.followers.lead(Role::Transactions), None);
    assert_eq!(world.relay.push(&a_tx(1)), RelayStatus::Busy);
    let mut b = Link::open(&world, 1, FakeNode::new(chain_of(100), HONEST));
    assert_eq!(world.followers.lead(Role::Transactions), Some(1));
    assert_eq!(world.relay.push(&a_tx(2)), RelayStatus::Relayed);
    wake_all(&world, &mut [&mut a, &mut b]);
    assert_eq!((a.node.count("tx"), b.node.count("tx")), (0, 1));
}

/// Bitcoin Core announces no blocks while in initial block download (its `inv`s and
/// `headers` announcements wait until it is out, `PeerManagerImpl::SendMessages`), and a
/// node may miss announcing one: a node that sends no headers for the idle time is asked
/// for them again, so the served tip follows its chain without an announcement.
#[test]
fn a_node_that_announces_nothing_is_asked_for_headers_each_idle_time() {
    let mut world = World::new(false);
    let chain = chain_of(300);
    let mut link = Link::open(&world, 0, FakeNode::new(chain[..100].to_vec(), HONEST));
    assert_eq!(world.tip(), 100);
    let asked = link.node.count("getheaders");
    // Its chain grows, unannounced.
    link.node.headers = chain.clone();
    let t0 = world.now;
    link.advance(&mut world, before(t0 + IDLE));
    assert_eq!(world.tip(), 100);
    link.advance(&mut world, t0 + IDLE);
    assert_eq!(world.tip(), 300, "asked again after the idle time");
    assert_eq!(link.node.count("getheaders"), asked + 1);
    assert!(link.closed().is_none());
}

/// A header more than two hours ahead of our clock is not invalid, only not yet (Bitcoin
/// Core's `BLOCK_TIME_FUTURE`, which `MaybePunishNodeForBlock` does not punish): the node
/// is not dropped, the headers before it are served, and once our clock has caught up
/// (asked again after the idle time) it is taken.
#[test]
fn a_header_from_the_future_is_not_yet_and_the_node_stays() {
    let mut world = World::new(false);
    let mut headers = chain_of(200);
    let last = headers.len() - 1;
    headers[last].time = (UNIX_TIME + 3 * 3600) as u32;
    let target = headers[last].bits.to_target().unwrap();
    assert!(lightwire_chain::generate::mine(&mut headers[last], &target));
    let mut link = Link::open(&world, 0, FakeNode::new(headers, HONEST));
    assert!(link.closed().is_none(), "{:?}", link.closed());
    assert_eq!(world.tip(), 0, "its one batch waits for our clock");
    assert_eq!(link.node.count("getheaders"), 1, "not asked again at once");
    // Our clock passes the header's time; asked again after the idle time, taken.
    world.unix_time = UNIX_TIME + 3 * 3600;
    let t0 = world.now;
    link.advance(&mut world, t0 + IDLE);
    assert_eq!(world.tip(), 200);
    assert!(link.closed().is_none());
}

/// Bitcoin Core in initial block download drops a peer's transactions (`ProcessMessage`,
/// "tx": ignored while `IsInitialBlockDownload`) and says so with a `feefilter` of
/// `MAX_MONEY` (`MaybeSendFeefilter`): it is given none, and clients are told busy, until
/// it sends a real floor.
#[test]
fn a_node_in_initial_block_download_is_given_no_transactions() {
    let world = World::with_blocks(false);
    let syncing = Behaviour {
        feefilter: Some(21_000_000 * 100_000_000),
        ..HONEST
    };
    let mut link = Link::open(&world, 0, FakeNode::new(chain_of(100), syncing));
    assert_eq!(world.followers.lead(Role::Blocks), Some(0));
    assert_eq!(world.followers.lead(Role::Transactions), None);
    assert_eq!(world.relay.push(&a_tx(1)), RelayStatus::Busy);
    // Out of it: a real floor (1 sat/vB).
    let mut floor = Vec::new();
    p2p::encode(&mut floor, FakeNode::magic(), "feefilter", |p| {
        p.extend_from_slice(&1_000u64.to_le_bytes())
    });
    link.send(&world, &floor);
    assert_eq!(world.followers.lead(Role::Transactions), Some(0));
    assert_eq!(world.relay.push(&a_tx(2)), RelayStatus::Relayed);
    link.peer.handle_wake(world.now, &world.gw());
    link.pump(&world);
    assert_eq!(link.node.count("tx"), 1);
    // A malformed one is a fault like any other.
    let mut short = Vec::new();
    p2p::encode(&mut short, FakeNode::magic(), "feefilter", |p| p.push(1));
    link.send(&world, &short);
    assert!(
        matches!(link.closed(), Some(UpstreamError::P2p(_))),
        "{:?}",
        link.closed()
    );
}

/// Bitcoin Core says nothing of a transaction a peer relays: no `reject`, and it does not
/// announce it back to the peer that sent it (its inventory filter knows the peer has it);
/// `getdata` for it is answered only after `UNCONDITIONAL_RELAY_DELAY` (2 minutes,
/// `FindTxForGetData`), `notfound` until then and if it did not take it. So the gateway
/// asks the node back after that delay: taken, it is in the mempool the gateway serves
/// (the clients' digests list it, from this gateway too); refused, the log says so.
#[test]
fn a_relayed_transaction_is_asked_back_after_cores_relay_delay() {
    for accepts in [true, false] {
        let mut world = World::new(false);
        world.mempool = Some(ServedMempool::new(1 << 20));
        let node = FakeNode::new(
            chain_of(10),
            Behaviour {
                accepts_txs: accepts,
                ..HONEST
            },
        );
        let mut link = Link::open(&world, 0, node);
        assert_eq!(world.relay.push(&a_tx(9)), RelayStatus::Relayed);
        link.peer.handle_wake(world.now, &world.gw());
        link.pump(&world);
        assert_eq!(link.node.count("tx"), 1);
        let asked_back = |link: &Link| {
            link.node
                .received
                .iter()
                .filter(|(c, p)| c == b"getdata" && p[5..37] == txid_of(&a_tx(9)))
                .count()
        };
        let sent = world.now;
        link.advance(&mut world, before(sent + ASK_BACK));
        assert_eq!(asked_back(&link), 0, "not before the delay");
        link.advance(&mut world, sent + ASK_BACK);
        assert_eq!(asked_back(&link), 1);
        let held = world.mempool.as_ref().unwrap().size().0;
        assert_eq!(held, usize::from(accepts), "accepted: {accepts}");
        assert!(link.closed().is_none());
        // Asked once.
        link.advance(&mut world, sent + ASK_BACK * 3);
        assert_eq!(asked_back(&link), 1);
    }
}

/// What `/metrics` shows of a node: its user agent, service bits, relay flag and the roles
/// it leads (a Core with its defaults: blocks and transactions, no filters).
#[test]
fn a_nodes_version_and_roles_are_shown() {
    let world = World::with_blocks(true);
    let core = Behaviour {
        says_filters: false,
        answers_filters: false,
        ..HONEST
    };
    let link = Link::open(&world, 0, FakeNode::new(chain_of(10), core));
    let info = link.peer.info().expect("connected");
    assert_eq!(
        info.agent, "/lightwire-gateway:0.1.0/",
        "the fake node says ours"
    );
    assert_eq!((info.services, info.relay), (p2p::NODE_NETWORK, true));
    assert_eq!(info.leads, [false, true, true]);
    let metrics = crate::metrics::Metrics::default();
    metrics.set_upstream("127.0.0.1:8333", Some(info));
    let text = metrics.render(10, "00");
    assert!(text.contains("lightwire_upstream_info{upstream=\"127.0.0.1:8333\",agent=\"/lightwire-gateway:0.1.0/\",services=\"0x1\",relay=\"1\"} 1"), "{text}");
    assert!(
        text.contains("lightwire_upstream_leads{upstream=\"127.0.0.1:8333\",role=\"filters\"} 0")
    );
    assert!(
        text.contains("lightwire_upstream_leads{upstream=\"127.0.0.1:8333\",role=\"blocks\"} 1")
    );
    metrics.set_upstream("127.0.0.1:8333", None);
    assert!(!metrics.render(10, "00").contains("127.0.0.1:8333"));
}

/// With `--node-rpc`, Bitcoin Core's `getindexinfo` says how far its filter index has got:
/// the node at the RPC's address is asked for no filter header past it (it would answer
/// nothing), and for the rest once the index has caught up.
#[test]
fn filters_are_asked_only_as_far_as_the_nodes_index_has_got() {
    let world = World::with_blocks(true);
    // The RPC is node 0's (the fake nodes listen on 127.0.0.1:8333 + their index).
    let node0 = SocketAddr::from(([127, 0, 0, 1], 8333));
    let fees = Arc::new(crate::fees::NodeFees::of_node(Some(node0)));
    world.chain.write().unwrap().serve_fees(fees.clone());
    fees.set_filter_index(50);
    let mut link = Link::open(&world, 0, FakeNode::new(chain_of(100), HONEST));
    assert_eq!(world.tip(), 100);
    assert_eq!(world.filter_tip(), Some(50), "as far as its index");
    assert_eq!(link.node.count("getcfheaders"), 1);
    // A node whose index is not known, as high: it serves more, so it leads the filters.
    let mut other = Link::open(&world, 1, FakeNode::new(chain_of(100), HONEST));
    wake_all(&world, &mut [&mut link, &mut other]);
    assert_eq!(world.followers.lead(Role::Filters), Some(1));
    assert_eq!(world.filter_tip(), Some(100));
    assert_eq!(
        link.node.count("getcfheaders"),
        1,
        "not asked past its index"
    );
    assert_eq!(
        fees.filter_index(SocketAddr::from(([127, 0, 0, 1], 8334))),
        None,
        "not the other's"
    );
}
