//! An [`Initiator`] against a [`Responder`] in memory, on a virtual clock (quinn-proto's
//! `Pair`): the client's side does what a browser's WebSocket does (the upgrade, masked
//! frames), the bytes move only when [`Pair::drive`] moves them, and time passes only in
//! [`Pair::advance`]. Keepalive, deadlines, pool waits and closes are tested without sockets
//! or sleeps.

use core::time::Duration;

use lightwire_chain::{BlockHash, REGTEST};
use lightwire_noise::{MAX_FRAME_LEN, SecretKey};
use lightwire_primitives::FilterHeader;
use lightwire_wire::AnswerFlags;

use crate::initiator::{Initiator, Limits as InitiatorLimits, PeerError, PeerEvent};
use crate::responder::{BufferKind, BufferMode, Close, Limits, Responder, Transmit};
use crate::testing::TestChain;
use crate::time::Millis;
use crate::ws;

/// What the client heard, owned (for assertions).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Heard {
    /// The gateway's `init` was accepted.
    Ready,
    /// A tip at this height.
    Tip(u32),
    /// Headers: request id, how many, whether the last.
    Headers(u32, usize, bool),
    /// A warning's text.
    Warning(Option<String>),
    /// A pong.
    Pong,
    /// Filter headers: request id, first height, the header before, the headers, flags.
    FilterHeaders(u32, u32, FilterHeader, Vec<FilterHeader>, AnswerFlags),
    /// Filter checkpoints: request id, (height, header) each, flags.
    FilterCheckpoints(u32, Vec<(u32, [u8; 32])>, AnswerFlags),
    /// Filter pieces: request id, (height, filter length, offset, bytes) each, flags.
    Filters(u32, Vec<(u32, u32, u32, Vec<u8>)>, AnswerFlags),
    /// A block piece: request id, block length, offset, bytes, last, not found.
    Block(u32, u32, u32, Vec<u8>, bool, bool),
    /// What became of a transaction: request id, status, txid.
    TxResult(u32, lightwire_wire::RelayStatus, [u8; 32]),
    /// A mempool digest: reset, then each entry's txid with its set (added) or its reason
    /// (removed).
    MempoolDigest(bool, Vec<HeardEntry>),
    /// A mempool transaction: request id, the transaction (`None`: not found).
    MempoolTx(u32, Option<Vec<u8>>),
    /// Fee rates.
    FeeRates(lightwire_wire::FeeRates),
    /// One of the above (`FilterHeaders`, `FilterCheckpoints`, `Filters` or `Block`) heard
    /// as the silent-payment tweak chain's message (`Block`: a piece of `spent_from`).
    Tweak(Box<Heard>),
}

/// A block piece (or a `spent_from` one) as heard.
fn heard_block(p: &lightwire_wire::BlockPiece<'_>) -> Heard {
    Heard::Block(
        p.id,
        p.block_len,
        p.offset,
        p.data.to_vec(),
        p.last,
        p.not_found,
    )
}

/// A digest entry heard: a transaction's txid, with its set (added) or why it left.
pub type HeardEntry = ([u8; 32], Result<Vec<u8>, lightwire_wire::Removal>);

/// A gateway's end as a browser sees it: a [`Responder`] serving a [`TestChain`], the
/// bytes in flight each way, and the WebSocket client's side (the upgrade, masked frames
/// out, server frames decoded into payloads). Used by [`Pair`], and by the client crate's
/// tests to put its engine in front of several gateways.
pub struct Gateway {
    /// The responder.
    pub server: Responder,
    /// What it serves.
    pub chain: TestChain,
    /// Buffers its pool can lend now (pooled mode).
    pub pool: Vec<Box<[u8]>>,
    /// Whether the client's bytes reach it (false: the client went silent).
    pub hears: bool,
    /// Whether its bytes reach the client (false: the gateway went silent).
    pub speaks: bool,
    to_server: Vec<u8>,
    to_client: Vec<u8>,
    upgraded: bool,
    ws_key: [u8; 24],
    decoder: ws::Decoder,
    mask: u32,
}

impl Gateway {
    /// A gateway with static key `key`, accepting a connection at `now`, serving `chain`;
    /// `pool` buffers are lent in pooled mode. The client's upgrade request is queued.
    pub fn new(
        now: Millis,
        key: SecretKey,
        chain: TestChain,
        buffers: BufferMode,
        pool: usize,
    ) -> Gateway {
        let ephemeral = SecretKey::from_bytes(&[0x44; 32]).expect("a valid test key");
        let server = Responder::new(
            now,
            key,
            ephemeral,
            REGTEST.genesis.block_hash().0,
            Limits::default(),
            buffers,
        );
        let ws_key = *b"dGhlIHNhbXBsZSBub25jZQ==";
        let mut request = [0u8; 512];
        let n = ws::client_request("127.0.0.1:1", "/", &ws_key, &mut request);
        Gateway {
            server,
            chain,
            pool: (0..pool)
                .map(|_| vec![0u8; MAX_FRAME_LEN].into_boxed_slice())
                .collect(),
            hears: true,
            speaks: true,
            to_server: request[..n].to_vec(),
            to_client: Vec::new(),
            upgraded: false,
            ws_key,
            decoder: ws::Decoder::client(),
            mask: 0x1234_5678,
        }
    }

    /// A new connection to the same chain (after the last one closed), at `now`.
    pub fn reconnect(&mut self, now: Millis, key: SecretKey) {
        let chain = core::mem::replace(&mut self.chain, TestChain::generate(0));
        let buffers = self.server.buffer_mode();
        let pool = core::mem::take(&mut self.pool);
        *self = Gateway::new(now, key, chain, buffers, 0);
        self.pool = pool;
    }

    /// Why the responder closed, if it did.
    pub fn close(&self) -> Option<&Close> {
        self.server.poll_close()
    }

    /// One WebSocket binary message from the client, masked as a browser does.
    pub fn send(&mut self, payload: &[u8]) {
        if !self.hears {
            return;
        }
        self.mask = self
            .mask
            .wrapping_mul(1_664_525)
            .wrapping_add(1_013_904_223);
        ws::push_client_frame(&mut self.to_server, payload, self.mask.to_be_bytes());
    }

    /// Run the responder on what the client sent and carry what it writes back, handing
    /// each WebSocket payload to `deliver`; returns whether anything moved.
    pub fn exchange(&mut self, now: Millis, mut deliver: impl FnMut(&[u8])) -> bool {
        let mut moved = self.output(now);
        if !self.to_server.is_empty() && self.server.wants_input() {
            if self.server.needs_read_buffer(now) && !self.lend(now, BufferKind::Read) {
                // Waits for a buffer (poll_timeout counts the wait).
            } else {
                let mut bytes = core::mem::take(&mut self.to_server);
                self.server.handle_input(now, &mut bytes, &self.chain);
                if self.server.has_carry() && self.server.needs_read_buffer(now) {
                    self.lend(now, BufferKind::Read);
                }
                self.give_back();
                moved = true;
            }
        }
        moved |= self.output(now);
        if !self.to_client.is_empty() {
            let mut bytes = core::mem::take(&mut self.to_client);
            let mut at = 0;
            if !self.upgraded {
                at = ws::client_response(&bytes, &self.ws_key)
                    .expect("a valid upgrade response")
                    .expect("the whole response in one piece");
                self.upgraded = true;
            }
            while at < bytes.len() {
                let (n, event) = self.decoder.decode(&mut bytes[at..]).expect("valid frames");
                if let Some(ws::Event::Data(r)) = event {
                    deliver(&bytes[at + r.start..at + r.end]);
                }
                at += n;
            }
            moved = true;
        }
        moved
    }

    /// The responder's next deadline.
    pub fn poll_timeout(&self) -> Option<Millis> {
        self.server.poll_timeout()
    }

    /// Run the responder's deadlines at `now`.
    pub fn handle_timeout(&mut self, now: Millis) {
        self.server.handle_timeout(now);
        self.give_back();
    }

    fn lend(&mut self, now: Millis, kind: BufferKind) -> bool {
        let Some(buf) = self.pool.pop() else {
            return false;
        };
        self.server.give_buffer(now, kind, buf, &self.chain);
        true
    }

    fn give_back(&mut self) {
        while let Some((_, buf)) = self.server.reclaim() {
            self.pool.push(buf);
        }
    }

    fn output(&mut self, now: Millis) -> bool {
        let mut moved = false;
        loop {
            match self.server.poll_transmit(now, &self.chain) {
                None => break,
                Some(Transmit::NeedBuffer) => {
                    if !self.lend(now, BufferKind::Write) {
                        break;
                    }
                    continue;
                }
                Some(Transmit::Raw(bytes)) => {
                    if self.speaks {
                        self.to_client.extend_from_slice(bytes);
                    }
                }
                Some(Transmit::Frame { header, frame }) => {
                    if self.speaks {
                        self.to_client.extend_from_slice(header);
                        self.to_client.extend_from_slice(frame);
                    }
                }
            }
            self.server.transmitted();
            self.give_back();
            moved = true;
        }
        moved
    }
}

fn key(b: u8) -> SecretKey {
    SecretKey::from_bytes(&[b; 32]).expect("a valid test key")
}

/// An initiator and a gateway, and what the initiator heard.
pub struct Pair {
    /// The virtual clock.
    pub now: Millis,
    /// The client's end.
    pub client: Initiator,
    /// The gateway's end.
    pub gateway: Gateway,
    /// Everything the client heard, in order.
    pub heard: Vec<Heard>,
    /// Every header received, and the block hash the client computed for it.
    pub headers: Vec<([u8; 80], BlockHash)>,
    /// Why the client's connection failed, if it did.
    pub client_error: Option<PeerError>,
}

impl Pair {
    /// A client and a gateway serving `chain`, connected as far as the bytes queued at the
    /// start (nothing moves until [`Self::drive`]). `pool` buffers are lent in pooled mode.
    pub fn new(chain: TestChain, buffers: BufferMode, pool: usize) -> Pair {
        let now = Millis(1_000_000);
        let gateway_key = key(0x11);
        let client = Initiator::new(
            now,
            &REGTEST,
            key(0x22),
            gateway_key.public_key(),
            key(0x33),
            InitiatorLimits::default(),
        );
        Pair {
            now,
            client,
            gateway: Gateway::new(now, gateway_key, chain, buffers, pool),
            heard: Vec::new(),
            headers: Vec::new(),
            client_error: None,
        }
    }

    /// Why the gateway closed, if it did.
    pub fn server_close(&self) -> Option<&Close> {
        self.gateway.close()
    }

    /// Move bytes both ways until neither end has anything more to say (or can say it).
    pub fn drive(&mut self) {
        loop {
            let mut moved = false;
            if self.client_error.is_none()
                && let Some(out) = self.client.poll_transmit()
            {
                self.gateway.send(out);
                self.client.sent();
                moved = true;
            }
            let Pair {
                now,
                client,
                gateway,
                heard,
                headers,
                client_error,
            } = self;
            moved |= gateway.exchange(*now, |payload| {
                client_input(*now, client, (heard, headers), client_error, payload)
            });
            if !moved {
                return;
            }
        }
    }

    /// Let `d` pass, running both ends' deadlines as they fall due, and drive.
    pub fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        loop {
            let client = if self.client_error.is_some() {
                None
            } else {
                self.client.poll_timeout()
            };
            let next = [client, self.gateway.poll_timeout()]
                .into_iter()
                .flatten()
                .filter(|t| *t <= end)
                .min();
            let Some(t) = next else { break };
            self.now = t.max(self.now);
            if self.client_error.is_none()
                && let Err(e) = self.client.handle_timeout(self.now)
            {
                self.client_error = Some(e);
            }
            self.gateway.handle_timeout(self.now);
            self.drive();
        }
        self.now = end;
        self.drive();
    }

    /// Ask for `max_count` headers after `locator` from the client.
    pub fn request(&mut self, id: u32, max_count: u32, locator: &[BlockHash]) {
        self.client.request(id, max_count, locator).expect("ready");
    }
}

fn client_input(
    now: Millis,
    client: &mut Initiator,
    (heard, received): (&mut Vec<Heard>, &mut Vec<([u8; 80], BlockHash)>),
    error: &mut Option<PeerError>,
    mut data: &[u8],
) {
    while !data.is_empty() && error.is_none() {
        match client.handle_input(now, data) {
            Ok((taken, event)) => {
                if let Some(e) = event {
                    heard.push(match e {
                        PeerEvent::Ready => Heard::Ready,
                        PeerEvent::Tip { height, .. } => Heard::Tip(height),
                        PeerEvent::Headers {
                            id,
                            headers,
                            hashes,
                            last,
                            ..
                        } => {
                            let whole = headers.chunks_exact(80).filter_map(|h| h.try_into().ok());
                            received.extend(whole.zip(hashes.iter().copied()));
                            Heard::Headers(id, headers.len() / 80, last)
                        }
                        PeerEvent::Warning(t) => Heard::Warning(t.map(str::to_string)),
                        PeerEvent::Pong => Heard::Pong,
                        PeerEvent::FilterHeaders {
                            id,
                            first_height,
                            flags,
                            before,
                            headers,
                            ..
                        } => {
                            Heard::FilterHeaders(id, first_height, before, headers.to_vec(), flags)
                        }
                        PeerEvent::TweakHeaders {
                            id,
                            first_height,
                            flags,
                            before,
                            headers,
                            ..
                        } => Heard::Tweak(Box::new(Heard::FilterHeaders(
                            id,
                            first_height,
                            before,
                            headers.to_vec(),
                            flags,
                        ))),
                        PeerEvent::TweakCheckpoints(m) => {
                            Heard::Tweak(Box::new(Heard::FilterCheckpoints(
                                m.id,
                                m.iter().map(|(h, c)| (h, *c)).collect(),
                                m.flags,
                            )))
                        }
                        PeerEvent::Tweaks(m) => Heard::Tweak(Box::new(Heard::Filters(
                            m.id,
                            m.pieces()
                                .map(|p| (p.height, p.filter_len, p.offset, p.data.to_vec()))
                                .collect(),
                            m.flags,
                        ))),
                        PeerEvent::FilterCheckpoints(m) => Heard::FilterCheckpoints(
                            m.id,
                            m.iter().map(|(h, c)| (h, *c)).collect(),
                            m.flags,
                        ),
                        PeerEvent::Filters(m) => Heard::Filters(
                            m.id,
                            m.pieces()
                                .map(|p| (p.height, p.filter_len, p.offset, p.data.to_vec()))
                                .collect(),
                            m.flags,
                        ),
                        PeerEvent::TxResult(r) => Heard::TxResult(r.id, r.status, r.txid),
                        PeerEvent::MempoolDigest(d) => Heard::MempoolDigest(
                            d.reset,
                            d.entries()
                                .map(|e| match e {
                                    lightwire_wire::DigestEntry::Added { txid, set, .. } => {
                                        (*txid, Ok(set.to_vec()))
                                    }
                                    lightwire_wire::DigestEntry::Removed { txid, reason } => {
                                        (*txid, Err(reason))
                                    }
                                })
                                .collect(),
                        ),
                        PeerEvent::MempoolTx(m) => {
                            Heard::MempoolTx(m.id, (!m.not_found).then(|| m.tx.to_vec()))
                        }
                        PeerEvent::FeeRates(m) => Heard::FeeRates(m),
                        PeerEvent::Block(p) => heard_block(&p),
                        PeerEvent::SpentFrom(p) => Heard::Tweak(Box::new(heard_block(&p))),
                    });
                }
                data = &data[taken..];
            }
            Err(e) => *error = Some(e),
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use lightwire_wire::Ping;

    use super::*;
    use crate::session::{Served, Violation};

    fn connected(buffers: BufferMode, pool: usize) -> Pair {
        let mut p = Pair::new(TestChain::generate(3000), buffers, pool);
        p.drive();
        assert!(p.gateway.server.is_established(), "{:?}", p.server_close());
        assert!(p.client.is_ready(), "{:?}", p.client_error);
        assert_eq!(p.heard, [Heard::Ready, Heard::Tip(3000)]);
        p.heard.clear();
        p
    }

    #[test]
    fn a_sync_over_the_pair_in_both_buffer_modes() {
        for (mode, pool) in [(BufferMode::Fixed, 0), (BufferMode::Pooled, 2)] {
            let mut p = connected(mode, pool);
            p.request(1, 2000, &[REGTEST.genesis.block_hash()]);
            p.drive();
            // Both sides offer headers_compact: 2,000 headers in two messages.
            assert_eq!(
                p.heard,
                [Heard::Headers(1, 1676, false), Heard::Headers(1, 324, true)],
                "{mode:?}"
            );
            assert_eq!(p.gateway.server.take_counts().headers_sent, 2000);
            if mode == BufferMode::Pooled {
                assert_eq!(
                    p.gateway.pool.len(),
                    2,
                    "both buffers back in the pool when idle"
                );
            }
        }
    }

    /// A proxy's upgrade request (the client's, naming it in `X-Forwarded-For` when
    /// `client` is given).
    fn proxied(client: Option<&str>) -> Pair {
        let mut p = Pair::new(TestChain::generate(10), BufferMode::Fixed, 0);
        p.gateway.server.expect_forwarded_for();
        let request = String::from_utf8(core::mem::take(&mut p.gateway.to_server)).unwrap();
        let header = client.map(|c| format!("X-Forwarded-For: 10.9.9.9, {c}\r\n"));
        p.gateway.to_server = request
            .replace(
                "\r\n\r\n",
                &format!("\r\n{}\r\n", header.unwrap_or_default()),
            )
            .into_bytes();
        p
    }

    #[test]
    fn a_proxied_upgrade_is_held_until_the_client_it_names_is_admitted() {
        let mut p = proxied(Some("203.0.113.7"));
        // Act one follows the request in the same read: held with it.
        p.drive();
        assert_eq!(
            p.gateway.server.forwarded_client(),
            Some("203.0.113.7".parse().unwrap())
        );
        assert!(!p.gateway.server.wants_input());
        assert!(!p.client.is_ready());
        assert!(
            p.heard.is_empty() && p.gateway.to_client.is_empty(),
            "nothing answered"
        );
        assert_eq!(p.server_close(), None);

        p.gateway.server.release_upgrade(p.now, &p.gateway.chain);
        assert_eq!(p.gateway.server.forwarded_client(), None);
        p.drive();
        assert!(p.gateway.server.is_established(), "{:?}", p.server_close());
        assert_eq!(p.heard, [Heard::Ready, Heard::Tip(10)]);
    }

    #[test]
    fn a_proxied_upgrade_that_names_no_client_is_refused() {
        let mut p = proxied(None);
        p.drive();
        assert_eq!(p.gateway.server.forwarded_client(), None);
        assert_eq!(
            p.server_close(),
            Some(&Close::Ws(ws::WsError::BadRequest("X-Forwarded-For")))
        );
        assert!(!p.gateway.server.is_established());
    }

    /// Filter headers, checkpoints and filters through both ends: the client rebuilds every
    /// filter header from the hashes and the anchors.
    #[test]
    fn filters_over_the_pair() {
        let mut p = connected(BufferMode::Pooled, 2);
        assert!(p.client.serves_filters());
        let stop = p.gateway.chain.header(3000).block_hash();
        p.client.request_filter_headers(1, 0, stop).unwrap();
        p.client.request_filter_checkpoints(2, stop).unwrap();
        p.client.request_filters(3, 2001, stop).unwrap();
        p.drive();
        let mut headers = Vec::new();
        let mut filters: Vec<(u32, Vec<u8>)> = Vec::new();
        for h in &p.heard {
            match h {
                Heard::FilterHeaders(1, first, before, got, _) => {
                    assert_eq!(*first as usize, headers.len());
                    let want = match first.checked_sub(1) {
                        Some(b) => p.gateway.chain.filter_entry(b).unwrap().header,
                        None => FilterHeader::ZERO,
                    };
                    assert_eq!(*before, want);
                    headers.extend_from_slice(got);
                }
                Heard::FilterCheckpoints(2, got, flags) => {
                    assert!(flags.last);
                    for (height, c) in got {
                        assert_eq!(*c, p.gateway.chain.filter_entry(*height).unwrap().header.0);
                    }
                    assert_eq!(got.len(), 3);
                }
                Heard::Filters(3, pieces, _) => {
                    for (height, len, offset, data) in pieces {
                        assert_eq!(*offset, 0);
                        assert_eq!(*len as usize, data.len());
                        filters.push((*height, data.clone()));
                    }
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(headers.len(), 3001);
        for (h, got) in headers.iter().enumerate() {
            assert_eq!(*got, p.gateway.chain.filter_entry(h as u32).unwrap().header);
        }
        assert_eq!(filters.len(), 1000);
        for (h, f) in &filters {
            assert_eq!(f, p.gateway.chain.filter(*h));
        }
    }

    /// Tweaks through both ends, asked with `request_data`: the client sees the gateway's
    /// bit, rebuilds every tweak header from the hashes and anchors, and gets the lists;
    /// each comes as a tweak message, never as a filter one.
    #[test]
    fn tweaks_over_the_pair() {
        use crate::DataRequest;
        use lightwire_wire::FilterKind;
        let mut chain = TestChain::generate(3000);
        let mut lists = vec![Vec::new(); 2002];
        lists[2001] = (1..=3u8)
            .map(|i| {
                let mut t = [i; 33];
                t[0] = 2;
                t
            })
            .collect();
        chain.serve_tweaks(lists);
        let mut p = Pair::new(chain, BufferMode::Pooled, 2);
        p.drive();
        assert!(p.client.is_ready(), "{:?}", p.client_error);
        assert!(p.client.serves_tweaks() && p.client.serves_filters());
        p.heard.clear();
        let stop = p.gateway.chain.header(3000).block_hash();
        let kind = FilterKind::Tweaks;
        p.client
            .request_data(kind, DataRequest::Headers, 1, 0, stop)
            .unwrap();
        p.client
            .request_data(kind, DataRequest::Checkpoints, 2, 0, stop)
            .unwrap();
        p.client
            .request_data(kind, DataRequest::Data, 3, 2001, stop)
            .unwrap();
        p.drive();
        let mut headers = Vec::new();
        let mut got_lists = Vec::new();
        for h in &p.heard {
            let Heard::Tweak(h) = h else {
                panic!("not a tweak message: {h:?}");
            };
            match &**h {
                Heard::FilterHeaders(1, first, _, got, _) => {
                    assert_eq!(*first as usize, headers.len());
                    headers.extend_from_slice(got);
                }
                Heard::FilterCheckpoints(2, got, _) => {
                    for (height, c) in got {
                        assert_eq!(*c, p.gateway.chain.tweak_entry(*height).unwrap().header.0);
                    }
                    assert_eq!(got.len(), 3);
                }
                Heard::Filters(3, pieces, _) => got_lists.extend(pieces.iter().cloned()),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(headers.len(), 3001);
        for (h, got) in headers.iter().enumerate() {
            assert_eq!(*got, p.gateway.chain.tweak_entry(h as u32).unwrap().header);
        }
        assert_eq!(got_lists.len(), 1000);
        for (height, _, _, data) in &got_lists {
            assert_eq!(data, p.gateway.chain.tweak_list(*height));
        }
        assert_eq!(got_lists[0].0, 2001);
        assert_eq!(
            got_lists[0].3.len(),
            1 + 3 * 33,
            "block 2001's three tweaks"
        );
    }

    /// What a block spends from through both ends, beside the block itself: each comes in
    /// its own pieces, heard as its own kind.
    #[test]
    fn what_a_block_spends_from_over_the_pair() {
        let mut chain = TestChain::generate(3000);
        chain.serve_tweaks(Vec::new());
        let evidence: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        chain.spent_from.insert(2500, evidence.clone());
        let mut p = Pair::new(chain, BufferMode::Pooled, 2);
        p.drive();
        assert!(p.client.is_ready(), "{:?}", p.client_error);
        p.heard.clear();
        let hash = p.gateway.chain.header(2500).block_hash();
        p.client.request_spent_from(8, hash).unwrap();
        p.client.request_block(9, hash).unwrap();
        p.drive();
        let (mut spent, mut block) = (Vec::new(), Vec::new());
        for h in &p.heard {
            let (into, piece, want) = match h {
                Heard::Tweak(b) => (&mut spent, &**b, 8),
                b => (&mut block, b, 9),
            };
            let Heard::Block(id, _, offset, data, _, false) = piece else {
                panic!("{h:?}");
            };
            assert_eq!(*id, want);
            assert_eq!(*offset as usize, into.len());
            into.extend_from_slice(data);
        }
        assert_eq!(spent, evidence);
        assert_eq!(block, p.gateway.chain.block(2500));
    }

    /// A block through both ends, in pieces: the client gets the generated block, whose
    /// Merkle root is its header's.
    #[test]
    fn a_block_over_the_pair() {
        let mut p = connected(BufferMode::Pooled, 2);
        assert!(p.client.serves_blocks());
        let hash = p.gateway.chain.header(2500).block_hash();
        p.client.request_block(7, hash).unwrap();
        p.drive();
        let mut block = Vec::new();
        for h in &p.heard {
            let Heard::Block(7, len, offset, data, last, false) = h else {
                panic!("{h:?}");
            };
            assert_eq!(*offset as usize, block.len());
            block.extend_from_slice(data);
            assert_eq!(*last, block.len() == *len as usize);
        }
        assert_eq!(block, p.gateway.chain.block(2500));
        let parsed = lightwire_filter::Block::parse(&block).unwrap();
        let header = p.gateway.chain.header(2500);
        assert_eq!(parsed.merkle_root(), (header.merkle_root, false));
        assert_eq!(lightwire_chain::hash_header_bytes(parsed.header()), hash);
    }

    /// Old and new ends interoperate: `headers_compact` only when both offer it, and the
    /// same headers, with their right hashes, either way.
    #[test]
    fn compact_headers_only_when_both_ends_offer_them() {
        for (client, gateway) in [(true, true), (true, false), (false, true), (false, false)] {
            let mut p = Pair::new(TestChain::generate(3000), BufferMode::Fixed, 0);
            p.client.offer_compact_headers(client);
            p.gateway.server.offer_compact_headers(gateway);
            p.drive();
            assert!(p.client.is_ready(), "{:?}", p.client_error);
            p.heard.clear();
            p.request(1, 2000, &[REGTEST.genesis.block_hash()]);
            p.drive();
            let messages = p.heard.len();
            assert_eq!(
                messages,
                if client && gateway { 2 } else { 3 },
                "{client} {gateway}"
            );
            let chain = &p.gateway.chain;
            assert_eq!(p.headers.len(), 2000);
            for (i, (h, hash)) in p.headers.iter().enumerate() {
                assert_eq!(crate::Served::header(chain, i as u32 + 1).as_ref(), Some(h));
                assert_eq!(*hash, lightwire_chain::hash_header_bytes(h));
            }
        }
    }

    #[test]
    fn keepalive_both_ways_on_the_virtual_clock() {
        let mut p = connected(BufferMode::Fixed, 0);
        // Pings go both ways after 30 s of silence, and are answered: nothing closes.
        for _ in 0..10 {
            p.advance(Duration::from_secs(31));
        }
        assert!(p.server_close().is_none() && p.client_error.is_none());
        assert!(
            p.heard.contains(&Heard::Pong),
            "the gateway answered our pings"
        );

        // A client that goes silent: the gateway pings at 30 s and closes 30 s later.
        let mut p = connected(BufferMode::Fixed, 0);
        p.gateway.hears = false;
        p.advance(Duration::from_secs(59));
        assert_eq!(p.server_close(), None);
        p.advance(Duration::from_secs(2));
        assert_eq!(p.server_close(), Some(&Close::KeepaliveTimeout));
    }

    #[test]
    fn a_silent_gateway_fails_the_client_keepalive() {
        let mut p = connected(BufferMode::Fixed, 0);
        p.gateway.speaks = false;
        // Ping after 30 s, unanswered for 20 s.
        p.advance(Duration::from_secs(49));
        assert_eq!(p.client_error, None);
        p.advance(Duration::from_secs(2));
        assert_eq!(p.client_error, Some(PeerError::KeepaliveTimeout));
    }

    #[test]
    fn handshake_deadlines_on_both_ends() {
        // A client that never sends act one: the gateway closes after 5 s.
        let mut p = Pair::new(TestChain::generate(10), BufferMode::Fixed, 0);
        p.gateway.hears = false;
        p.drive();
        p.advance(Duration::from_millis(4_999));
        assert_eq!(p.server_close(), None);
        p.advance(Duration::from_millis(2));
        assert_eq!(p.server_close(), Some(&Close::HandshakeTimeout));
        // The client gives up after 10 s without the gateway's init.
        p.advance(Duration::from_secs(5));
        assert_eq!(p.client_error, Some(PeerError::HandshakeTimeout));
    }

    #[test]
    fn a_frame_that_trickles_is_closed_at_the_frame_deadline() {
        let mut p = connected(BufferMode::Pooled, 2);
        // Half of a frame's length prefix: the gateway holds a read buffer for it.
        p.gateway.send(&[0u8; 10]);
        p.drive();
        assert_eq!(
            p.gateway.pool.len(),
            1,
            "a read buffer is held for the partial frame"
        );
        p.advance(Duration::from_secs(9));
        assert_eq!(p.server_close(), None);
        p.advance(Duration::from_secs(2));
        assert_eq!(p.server_close(), Some(&Close::SlowFrame));
        // The half-read frame's buffer went with the connection (a real pool allocates
        // another in its place: the loan ended with the connection).
        assert_eq!(p.gateway.server.reclaim(), None);
    }

    #[test]
    fn an_exhausted_pool_closes_the_waiting_connection() {
        // No buffer to write the gateway's init with.
        let mut p = Pair::new(TestChain::generate(10), BufferMode::Pooled, 0);
        p.drive();
        assert!(p.gateway.server.is_established());
        p.advance(Duration::from_millis(9_999));
        assert_eq!(p.server_close(), None);
        // A buffer that comes free in time is used.
        p.gateway
            .pool
            .push(vec![0u8; MAX_FRAME_LEN].into_boxed_slice());
        p.drive();
        assert!(p.client.is_ready());
        // Now none again, and a request waits: closed 10 s after the wait began.
        let buf = p.gateway.pool.pop().unwrap();
        p.request(1, 10, &[]);
        p.drive();
        p.advance(Duration::from_secs(11));
        assert_eq!(p.server_close(), Some(&Close::PoolExhausted));
        drop(buf);
    }

    #[test]
    fn a_violation_is_warned_then_closed() {
        let mut p = connected(BufferMode::Fixed, 0);
        p.request(1, 0, &[]);
        p.drive();
        assert_eq!(
            p.server_close(),
            Some(&Close::Violation(Violation::MaxCount(0)))
        );
        assert!(
            matches!(p.heard.last(), Some(Heard::Warning(Some(t))) if t.contains("max_count 0"))
        );
    }

    /// An initiator past the handshake with a bare responder, and that responder's
    /// sending half, after the gateway's init for `chain` was taken (the result).
    fn handshaken(chain: [u8; 32]) -> (Initiator, lightwire_noise::Sender, Result<(), PeerError>) {
        use lightwire_wire::{Features, Init, Networks};
        let gateway = key(9);
        let mut c = Initiator::new(
            Millis(0),
            &REGTEST,
            key(1),
            gateway.public_key(),
            key(2),
            InitiatorLimits::default(),
        );
        let act_one = c.poll_transmit().unwrap().to_vec();
        c.sent();
        let (awaiting, act_two) = lightwire_noise::Responder::start(gateway, key(3))
            .read_act_one(&act_one)
            .unwrap();
        assert_eq!(c.handle_input(Millis(0), &act_two).unwrap(), (50, None));
        let out = c.poll_transmit().unwrap().to_vec();
        c.sent();
        let (mut tx, _rx) = awaiting.read_act_three(&out[..66]).unwrap().split();
        let chains = [chain];
        let init = Init::new(Features::empty(), Some(Networks::from_chains(&chains)));
        let mut body = vec![0u8; 200];
        let n = init.encode(&mut body).unwrap();
        let mut frame = vec![0u8; n + 34];
        let len = tx.encrypt(&body[..n], &mut frame).unwrap();
        let r = c
            .handle_input(Millis(0), &frame[..len])
            .map(|(_, e)| assert_eq!(e, Some(PeerEvent::Ready)));
        (c, tx, r)
    }

    #[test]
    fn pings_get_one_pong_per_transmit_and_a_ping_flood_fails_the_gateway() {
        let (mut c, mut tx, r) = handshaken(REGTEST.genesis.block_hash().0);
        r.unwrap();
        // Pings asking for 65,531 pong bytes each, `n` of them in one WebSocket message.
        let mut pings = |n: usize| {
            let mut body = [0u8; 16];
            let len = Ping::encode_zeroed(65_531, 0, &mut body).unwrap();
            let mut wire = Vec::new();
            for _ in 0..n {
                let mut frame = [0u8; 64];
                let k = tx.encrypt(&body[..len], &mut frame).unwrap();
                wire.extend_from_slice(&frame[..k]);
            }
            wire
        };
        let feed = |c: &mut Initiator, now: Millis, wire: &[u8]| -> Result<(), PeerError> {
            let mut data = wire;
            while !data.is_empty() {
                let (taken, _) = c.handle_input(now, data)?;
                data = &data[taken..];
            }
            Ok(())
        };
        // Five at once: one pong of 65,531 zero bytes (plus type, length and MACs).
        feed(&mut c, Millis(0), &pings(5)).unwrap();
        let out = c.poll_transmit().unwrap();
        assert_eq!(out.len(), lightwire_noise::frame_len(2 + 2 + 65_531));
        c.sent();
        // Five more later in the same 30 s: still within the limit; thirty seconds on, the
        // count starts again.
        feed(&mut c, Millis(10_000), &pings(5)).unwrap();
        c.sent();
        feed(&mut c, Millis(40_000), &pings(10)).unwrap();
        c.sent();
        // One more within that window fails the gateway, before any 65 KB pong is made.
        assert_eq!(
            feed(&mut c, Millis(41_000), &pings(1)),
            Err(PeerError::PingFlood)
        );
        assert!(!c.is_ready());
        // A flood of a thousand pings in one message fails at the eleventh.
        let (mut c, mut tx, _) = handshaken(REGTEST.genesis.block_hash().0);
        let mut body = [0u8; 16];
        let len = Ping::encode_zeroed(65_531, 0, &mut body).unwrap();
        let mut wire = Vec::new();
        for _ in 0..1000 {
            let mut frame = [0u8; 64];
            let k = tx.encrypt(&body[..len], &mut frame).unwrap();
            wire.extend_from_slice(&frame[..k]);
        }
        assert_eq!(feed(&mut c, Millis(0), &wire), Err(PeerError::PingFlood));
        assert_eq!(
            c.poll_transmit(),
            None,
            "a failed connection answers nothing"
        );
    }

    #[test]
    fn another_network_is_refused_and_the_connection_stays_failed() {
        let mainnet = lightwire_chain::MAINNET.genesis.block_hash().0;
        let (mut c, _tx, r) = handshaken(mainnet);
        assert_eq!(r, Err(PeerError::WrongNetwork));
        assert_eq!(c.handle_input(Millis(0), &[0]), Err(PeerError::Failed));
        assert!(!c.is_ready());
        assert_eq!(c.poll_timeout(), None);
    }

    #[test]
    fn bytes_in_any_chunking_make_the_same_connection() {
        // The whole client side (upgrade, act one, act three with init, a request) fed to
        // the responder one byte per read.
        let mut p = Pair::new(TestChain::generate(100), BufferMode::Pooled, 2);
        let mut wire = core::mem::take(&mut p.gateway.to_server);
        let mut act_one = Vec::new();
        ws::push_client_frame(
            &mut act_one,
            p.client.poll_transmit().unwrap(),
            [1, 2, 3, 4],
        );
        p.client.sent();
        wire.extend_from_slice(&act_one);
        let now = p.now;
        for b in wire.iter_mut() {
            p.gateway
                .server
                .handle_input(now, core::slice::from_mut(b), &p.gateway.chain);
        }
        assert!(p.gateway.server.poll_close().is_none());
        // The upgrade response and act two came out; the rest goes through the pair.
        p.drive();
        assert!(p.client.is_ready(), "{:?}", p.client_error);
        assert!(p.gateway.server.is_established());
        p.request(9, 100, &[]);
        p.drive();
        assert_eq!(p.heard.last(), Some(&Heard::Headers(9, 100, true)));
    }

    #[test]
    fn websocket_ping_and_close_and_an_oversized_upgrade() {
        let mut p = connected(BufferMode::Fixed, 0);
        // A WebSocket ping (masked, "hi") is answered with a pong carrying the same bytes.
        let mut ping = vec![0x89, 0x82, 1, 2, 3, 4, b'h' ^ 1, b'i' ^ 2];
        let now = p.now;
        p.gateway
            .server
            .handle_input(now, &mut ping, &p.gateway.chain);
        assert_eq!(
            p.gateway.server.poll_transmit(now, &p.gateway.chain),
            Some(Transmit::Raw(b"\x8a\x02hi"))
        );
        p.gateway.server.transmitted();
        // A close is answered with a close, then the connection ends.
        let mut close = vec![0x88, 0x80, 9, 9, 9, 9];
        p.gateway
            .server
            .handle_input(now, &mut close, &p.gateway.chain);
        assert!(!p.gateway.server.wants_input());
        assert_eq!(
            p.gateway.server.poll_transmit(now, &p.gateway.chain),
            Some(Transmit::Raw(&ws::CLOSE_FRAME[..]))
        );
        p.gateway.server.transmitted();
        assert_eq!(p.server_close(), Some(&Close::PeerClosed));

        // An upgrade request that never ends is refused at 4 KiB.
        let mut g = Gateway::new(now, key(0x11), TestChain::generate(1), BufferMode::Fixed, 0);
        let mut junk = vec![b'A'; ws::MAX_REQUEST_LEN + 10];
        let chain = TestChain::generate(1);
        g.server.handle_input(now, &mut junk, &chain);
        assert_eq!(g.close(), Some(&Close::Ws(ws::WsError::RequestTooLong)));
    }
}
