//! The chain a gateway serves: every header of its best chain in memory, validated with
//! `lightwire-chain` before it is served, and a hash -> height index for locators.
//!
//! A chain followed from a node is served only once it has the network's minimum chain
//! work (Core's `nMinimumChainWork`, which Core's headers presync also waits for): until
//! then clients see the first header alone, so that a node (or anyone on the unencrypted
//! P2P path) cannot have a freshly started gateway hand every client a light chain as the
//! best one. A headers file or a generated chain is served as the operator gave it.

use std::collections::HashMap;

use crate::admission::Source;
use crate::blocks::ServedBlocks;
use crate::filters::ServedFilters;
use crate::wants::SessionId;

use lightwire_chain::generate::next_header_with_root;
use lightwire_chain::synthetic::{Pool, merkle_root, merkle_root_in};
use lightwire_chain::{
    BlockHash, Chain, ConnectError, Entry, HEADER_LEN, Header, MAX_BATCH, Network, Outcome, Params,
    REGTEST, U256, Work, rebuild_entries,
};
use lightwire_proto::session::{FilterEntry, FilterLookup};

/// Why a header source was refused.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The file could not be read.
    #[error("reading headers: {0}")]
    Io(String),
    /// The file is not whole 80-byte headers, or is empty.
    #[error("{len} bytes is not a whole, non-zero number of 80-byte headers")]
    NotHeaders {
        /// Its length.
        len: usize,
    },
    /// The first header is not the network's genesis (and no `--from-height` was given).
    #[error(
        "the first header is not {network}'s genesis (use --from-height for a file that starts later)"
    )]
    NotGenesis {
        /// The network.
        network: Network,
    },
    /// A header failed validation (the height and rule are in the error).
    #[error("invalid header: {0}")]
    Invalid(#[source] ConnectError),
}

/// The tip as announced in `tip` messages (chainwork counted from the first header
/// served, for a chain that starts at a trusted height).
pub type TipInfo = lightwire_proto::ServedTip;

/// A validated chain held in memory. Shared by every connection (it is `Sync`); the
/// validation state that built it is not kept here.
pub struct ServedChain {
    params: &'static Params,
    /// Height of `headers[0]`.
    base: u32,
    headers: Vec<[u8; HEADER_LEN]>,
    index: HashMap<BlockHash, u32>,
    tip: TipInfo,
    /// Chainwork at each period's first height (from `base`), to rebuild entries.
    period_work: Vec<Work>,
    /// Reorgs applied so far: an answer that started before one ends at once.
    reorgs: u64,
    /// Below this chain work only the first header is served (see the module's comment).
    min_work: Work,
    /// Compact block filters, when served.
    filters: Option<ServedFilters>,
    blocks: Option<ServedBlocks>,
    relay: Option<std::sync::Arc<crate::relay::TxRelay>>,
    /// The nodes' mempool, when followed.
    mempool: Option<std::sync::Arc<crate::mempool::ServedMempool>>,
    /// The node's fee estimates, when asked of it (`--node-rpc`).
    fees: Option<std::sync::Arc<crate::fees::NodeFees>>,
    /// The payments a generated chain carries (its blocks' pool).
    payments: Option<&'static Pool>,
    /// The `bulk_mirrors` value clients are told in `init` (`--bulk-url`; empty: none).
    mirrors: Vec<u8>,
    /// Silent-payment tweaks, when served (`--tweaks-dir`).
    tweaks: Option<crate::tweaks::ServedTweaks>,
    /// The evidence of tweak disputes, computed from the node when asked.
    spent_from: Option<crate::spent_from::ServedSpentFrom>,
}

/// A chain being built: what is served, and the validation window its next header needs.
struct Builder {
    served: ServedChain,
    chain: Chain,
}

impl Builder {
    fn starting_at(params: &'static Params, first: Entry) -> Builder {
        let chain = match first.height {
            0 => Chain::new(params),
            _ => Chain::resume(params, &[first]).unwrap_or_else(|| Chain::new(params)),
        };
        Builder {
            served: ServedChain {
                params,
                base: first.height,
                headers: vec![first.header.encode()],
                index: HashMap::from([(first.hash, first.height)]),
                tip: tip_info(&first),
                period_work: vec![first.chainwork],
                reorgs: 0,
                min_work: Work::ZERO,
                filters: None,
                blocks: None,
                relay: None,
                mempool: None,
                fees: None,
                mirrors: Vec::new(),
                payments: None,
                tweaks: None,
                spent_from: None,
            },
            chain,
        }
    }

    /// Validate `batch` on top of the tip and append it.
    fn extend(&mut self, batch: &[Header], now: u64) -> Result<(), SourceError> {
        match self
            .chain
            .connect(batch, now)
            .map_err(SourceError::Invalid)?
        {
            outcome @ Outcome::Extended { .. } => {
                self.served.apply(&outcome, self.chain.staged());
                Ok(())
            }
            other => Err(SourceError::Io(format!(
                "headers do not extend the tip ({other:?})"
            ))),
        }
    }
}

fn tip_info(e: &Entry) -> TipInfo {
    TipInfo {
        height: e.height,
        header: e.header.encode(),
        chainwork: e.chainwork.0.to_be_bytes(),
    }
}

impl ServedChain {
    /// Only `params`' genesis header, with the validation state to extend it: the start of
    /// a chain that follows an upstream node.
    pub fn genesis_only(params: &'static Params) -> (ServedChain, Chain) {
        let mut b = Builder::starting_at(params, genesis_entry(params));
        b.served.min_work = params.min_chain_work();
        (b.served, b.chain)
    }

    /// Whether the chain has the work it needs to be served (always, but for a chain
    /// followed from a node below the network's minimum).
    pub fn has_min_work(&self) -> bool {
        Work(U256::from_be_bytes(&self.tip.chainwork)) >= self.min_work
    }

    /// The tip clients are told about and served up to: the tip, or the first header
    /// while the chain lacks the minimum work.
    pub fn served_tip(&self) -> TipInfo {
        if self.has_min_work() {
            return self.tip;
        }
        let first = self.headers[0];
        let work = self.period_work[0];
        TipInfo {
            height: self.base,
            header: first,
            chainwork: work.0.to_be_bytes(),
        }
    }

    /// Store what `Chain::connect` staged with `outcome`: an extension, or a reorg (the
    /// headers above the fork are dropped first). Other outcomes change nothing. Returns
    /// whether the tip changed.
    pub fn apply(&mut self, outcome: &Outcome, staged: &[Entry]) -> bool {
        let Some(last) = staged.last() else {
            return false;
        };
        match *outcome {
            Outcome::Extended { .. } => {}
            Outcome::Reorg { fork_height, .. } => {
                let keep = (fork_height.saturating_sub(self.base) + 1) as usize;
                for dropped in self.headers.drain(keep.min(self.headers.len())..) {
                    self.index
                        .remove(&lightwire_chain::hash_header_bytes(&dropped));
                }
                let interval = self.params.retarget_interval;
                self.period_work
                    .truncate(((fork_height - self.base) / interval) as usize + 1);
                if let Some(f) = self.filters.as_mut() {
                    f.truncate(fork_height + 1);
                }
                if let Some(t) = self.tweaks.as_mut() {
                    t.truncate(fork_height + 1);
                }
                self.reorgs += 1;
            }
            _ => return false,
        }
        let interval = self.params.retarget_interval;
        for e in staged {
            self.headers.push(e.header.encode());
            self.index.insert(e.hash, e.height);
            if (e.height - self.base) % interval == 0 {
                self.period_work.push(e.chainwork);
            }
        }
        self.tip = tip_info(last);
        true
    }

    /// Serve `new` from now on (a reloaded headers file). Counted as a reorg, so answers
    /// under way end at once and clients ask again from their locator.
    pub fn replace(&mut self, new: ServedChain) {
        let reorgs = self.reorgs + 1;
        let mirrors = core::mem::take(&mut self.mirrors);
        *self = new;
        self.reorgs = reorgs;
        self.mirrors = mirrors;
    }

    /// Advertise these mirrors to clients in `init` (a `bulk_mirrors` value,
    /// [`lightwire_wire::Init::encode_mirrors`]; empty: none).
    pub fn advertise_mirrors(&mut self, value: Vec<u8>) {
        self.mirrors = value;
    }

    /// Serve `header` as the header at `height` from now on, in place of the one
    /// validated. False unless `height` is above the first header held and at most the tip.
    ///
    /// An extension point for programs built on this library that serve headers of their
    /// own making (a test gateway serving one that breaks a rule, to check that clients
    /// refuse it); the gateway itself never calls it. Nothing checks `header`, and the
    /// hash index keeps the validated header's hash (a locator naming it is still
    /// understood).
    pub fn set_header(&mut self, height: u32, header: [u8; HEADER_LEN]) -> bool {
        if height <= self.base || height > self.tip.height {
            return false;
        }
        self.headers[(height - self.base) as usize] = header;
        if height == self.tip.height {
            self.tip.header = header;
        }
        true
    }

    /// Reorgs applied since the chain was built.
    pub fn reorgs(&self) -> u64 {
        self.reorgs
    }

    /// Validation entries for heights `from..=to` (for `Chain::connect_branch` when a fork
    /// is below the validation window). `None` outside the chain.
    pub fn entries(&self, from: u32, to: u32) -> Option<Vec<Entry>> {
        if from > to || from < self.base || to > self.tip.height {
            return None;
        }
        let interval = self.params.retarget_interval;
        let start = from - (from - self.base) % interval;
        let headers: Vec<Header> = self.headers
            [(start - self.base) as usize..=(to - self.base) as usize]
            .iter()
            .map(Header::decode)
            .collect();
        let work = *self
            .period_work
            .get(((start - self.base) / interval) as usize)?;
        let mut all = rebuild_entries(self.params, start, &headers, work);
        all.drain(..(from - start) as usize);
        Some(all)
    }

    /// A block locator: the tip, then back by 1 for ten headers, then by doubling steps,
    /// ending with the first header held.
    pub fn locator(&self) -> Vec<BlockHash> {
        let mut out = Vec::with_capacity(32);
        let mut height = i64::from(self.tip.height);
        let mut step = 1;
        while height > i64::from(self.base) {
            out.push(self.hash_at(height as u32));
            if out.len() >= 10 {
                step *= 2;
            }
            height -= step;
        }
        out.push(self.hash_at(self.base));
        out
    }

    fn hash_at(&self, height: u32) -> BlockHash {
        lightwire_chain::hash_header_bytes(&self.headers[(height - self.base) as usize])
    }

    /// The deterministic regtest chain of `count` headers (`lightwire-chain generate`).
    pub fn generate(count: u32, now: u64) -> Result<ServedChain, SourceError> {
        ServedChain::generate_paying(count, now, None)
    }

    /// The same chain, but carrying the payments of `payments` (a pool of the default
    /// profile): the headers from the first payment on differ.
    pub fn generate_paying(
        count: u32,
        now: u64,
        payments: Option<&'static Pool>,
    ) -> Result<ServedChain, SourceError> {
        let mut served = Builder::starting_at(&REGTEST, genesis_entry(&REGTEST));
        served.served.payments = payments;
        served.served.headers.reserve(count as usize);
        served.served.index.reserve(count as usize);
        let mut batch = Vec::with_capacity(MAX_BATCH);
        let (mut prev, mut prev_hash) = (REGTEST.genesis, REGTEST.genesis.block_hash());
        let mut height = 0;
        while height < count {
            batch.clear();
            while height < count && batch.len() < MAX_BATCH {
                height += 1;
                let root = payments.map_or_else(
                    || merkle_root(height, 0),
                    |pool| merkle_root_in(pool, height, 0),
                );
                let h = next_header_with_root(&REGTEST, &prev, prev_hash, root);
                prev_hash = h.block_hash();
                prev = h;
                batch.push(h);
            }
            served.extend(&batch, now)?;
        }
        Ok(served.served)
    }

    /// Serve the compact block filters of this generated chain (built now, on every core;
    /// the newest kept up to `cache_bytes`).
    pub fn serve_generated_filters(&mut self, cache_bytes: usize) {
        if self.base == 0 {
            let filters = ServedFilters::generated(&self.headers, cache_bytes, self.payments);
            self.blocks = filters
                .generated_source()
                .map(|(profile, pool)| ServedBlocks::generated(profile, pool));
            self.filters = Some(filters);
        }
    }

    /// Serve silent-payment tweaks (kept up to date by [`crate::tweaks::keep`]).
    pub fn serve_tweaks(&mut self, tweaks: crate::tweaks::ServedTweaks) {
        self.tweaks = Some(tweaks);
    }

    /// Serve a tweak dispute's evidence (computed by [`crate::spent_from::keep`]), beside
    /// the tweaks.
    pub fn serve_spent_from(&mut self, spent_from: crate::spent_from::ServedSpentFrom) {
        self.spent_from = Some(spent_from);
    }

    /// The evidence served, if any.
    pub fn spent_from(&self) -> Option<&crate::spent_from::ServedSpentFrom> {
        self.spent_from.as_ref()
    }

    /// The tweaks served, if any.
    pub fn tweaks(&self) -> Option<&crate::tweaks::ServedTweaks> {
        self.tweaks.as_ref()
    }

    /// The tweaks served, to extend.
    pub fn tweaks_mut(&mut self) -> Option<&mut crate::tweaks::ServedTweaks> {
        self.tweaks.as_mut()
    }

    /// The filters served, if any.
    pub fn filters(&self) -> Option<&ServedFilters> {
        self.filters.as_ref()
    }

    /// The filters served, to extend (a chain followed from a node) or to set one
    /// ([`ServedFilters::set_filter`]).
    pub fn filters_mut(&mut self) -> Option<&mut ServedFilters> {
        self.filters.as_mut()
    }

    /// Serve filters fetched from the node (a chain followed from one); `notify` wakes the
    /// task that fetches them.
    pub fn serve_upstream_filters(
        &mut self,
        cache_bytes: usize,
        notify: std::sync::Arc<crate::wake::Wake>,
    ) {
        self.filters = Some(ServedFilters::upstream(cache_bytes, notify));
    }

    /// Serve blocks fetched from the node (a chain followed from one); `notify` wakes the
    /// task that fetches them.
    pub fn serve_upstream_blocks(&mut self, notify: std::sync::Arc<crate::wake::Wake>) {
        self.blocks = Some(ServedBlocks::upstream(notify));
    }

    /// Relay clients' transactions to the node through `relay`.
    pub fn serve_relay(&mut self, relay: std::sync::Arc<crate::relay::TxRelay>) {
        self.relay = Some(relay);
    }

    /// The node's fee estimates and filter index height, when served.
    pub fn fees(&self) -> Option<&std::sync::Arc<crate::fees::NodeFees>> {
        self.fees.as_ref()
    }

    /// Serve the node's fee estimates `fees` (`fee_rates`).
    pub fn serve_fees(&mut self, fees: std::sync::Arc<crate::fees::NodeFees>) {
        self.fees = Some(fees);
    }

    /// Serve `mempool` as the mempool digest.
    pub fn serve_mempool(&mut self, mempool: std::sync::Arc<crate::mempool::ServedMempool>) {
        self.mempool = Some(mempool);
    }

    /// The blocks served, if any.
    pub fn blocks(&self) -> Option<&ServedBlocks> {
        self.blocks.as_ref()
    }

    /// The blocks served, to change what is answered for one ([`ServedBlocks::set_answer`]).
    pub fn blocks_mut(&mut self) -> Option<&mut ServedBlocks> {
        self.blocks.as_mut()
    }

    /// The hash of the block at `height` on this chain.
    pub fn block_hash(&self, height: u32) -> Option<BlockHash> {
        let i = height.checked_sub(self.base)?;
        self.headers
            .get(i as usize)
            .map(lightwire_chain::hash_header_bytes)
    }

    /// Headers from a file of concatenated 80-byte headers: from the genesis header, or
    /// with `from_height` the first is trusted at that height.
    pub fn from_file(
        params: &'static Params,
        data: &[u8],
        from_height: Option<u32>,
        now: u64,
    ) -> Result<ServedChain, SourceError> {
        if data.is_empty() || data.len() % HEADER_LEN != 0 {
            return Err(SourceError::NotHeaders { len: data.len() });
        }
        let mut headers = data.chunks_exact(HEADER_LEN).filter_map(Header::from_slice);
        let first = headers
            .next()
            .ok_or(SourceError::NotHeaders { len: data.len() })?;
        let entry = match from_height {
            None if first != params.genesis => {
                return Err(SourceError::NotGenesis {
                    network: params.network,
                });
            }
            None => genesis_entry(params),
            Some(height) => Entry {
                height,
                hash: first.block_hash(),
                header: first,
                chainwork: first.bits.to_target().map(|t| t.work()).unwrap_or_default(),
                normal_bits: first.bits,
            },
        };
        let mut served = Builder::starting_at(params, entry);
        let rest: Vec<Header> = headers.collect();
        served.served.headers.reserve(rest.len());
        served.served.index.reserve(rest.len());
        for batch in rest.chunks(MAX_BATCH) {
            served.extend(batch, now)?;
        }
        Ok(served.served)
    }

    /// The network's parameters.
    pub fn params(&self) -> &'static Params {
        self.params
    }

    /// Height of the first header held.
    pub fn base(&self) -> u32 {
        self.base
    }

    /// The tip.
    pub fn tip(&self) -> TipInfo {
        self.tip
    }

    /// The height of a header on this chain.
    pub fn height_of(&self, hash: &BlockHash) -> Option<u32> {
        self.index.get(hash).copied()
    }

    /// Copy headers `from..from + n` (as many as exist) into `out`, 80 bytes each;
    /// returns how many were copied.
    pub fn copy_headers(&self, from: u32, n: usize, out: &mut [u8]) -> usize {
        let Some(i) = from.checked_sub(self.base) else {
            return 0;
        };
        let src = self.headers.get(i as usize..).unwrap_or_default();
        let n = n.min(src.len()).min(out.len() / HEADER_LEN);
        for (dst, h) in out.chunks_exact_mut(HEADER_LEN).zip(&src[..n]) {
            dst.copy_from_slice(h);
        }
        n
    }
}

impl lightwire_proto::Served for ServedChain {
    fn tip(&self) -> TipInfo {
        self.served_tip()
    }

    fn height_of(&self, hash: &BlockHash) -> Option<u32> {
        ServedChain::height_of(self, hash)
    }

    fn base(&self) -> u32 {
        self.base
    }

    fn copy_headers(&self, from: u32, n: usize, out: &mut [u8]) -> usize {
        ServedChain::copy_headers(self, from, n, out)
    }

    fn header(&self, height: u32) -> Option<[u8; HEADER_LEN]> {
        let i = height.checked_sub(self.base)?;
        self.headers.get(i as usize).copied()
    }

    fn reorgs(&self) -> u64 {
        self.reorgs
    }

    fn serves_filters(&self) -> bool {
        self.filters.is_some()
    }

    fn filter_tip(&self) -> Option<u32> {
        self.filters.as_ref()?.tip()
    }

    fn filter_entry(&self, height: u32) -> Option<FilterEntry> {
        self.filters.as_ref()?.entry(height)
    }

    fn serves_blocks(&self) -> bool {
        self.blocks.is_some()
    }

    fn relays(&self) -> bool {
        self.relay.is_some()
    }

    fn relay_tx(&self, tx: &[u8]) -> lightwire_proto::session::RelayStatus {
        self.for_session(SessionId::ANONYMOUS, None).relay_tx(tx)
    }

    fn with_block<R>(&self, height: u32, read: impl FnOnce(&[u8]) -> R) -> FilterLookup<R> {
        self.for_session(SessionId::ANONYMOUS, None)
            .with_block(height, read)
    }

    fn with_filter<R>(&self, height: u32, read: impl FnOnce(&[u8]) -> R) -> FilterLookup<R> {
        self.for_session(SessionId::ANONYMOUS, None)
            .with_filter(height, read)
    }

    fn serves_tweaks(&self) -> bool {
        self.tweaks.is_some()
    }

    fn tweak_tip(&self) -> Option<u32> {
        self.tweaks.as_ref()?.tip()
    }

    fn tweak_entry(&self, height: u32) -> Option<FilterEntry> {
        self.tweaks.as_ref()?.entry(height)
    }

    fn with_tweaks<R>(&self, height: u32, read: impl FnOnce(&[u8]) -> R) -> FilterLookup<R> {
        self.for_session(SessionId::ANONYMOUS, None)
            .with_tweaks(height, read)
    }

    fn with_spent_from<R>(&self, height: u32, read: impl FnOnce(&[u8]) -> R) -> FilterLookup<R> {
        self.for_session(SessionId::ANONYMOUS, None)
            .with_spent_from(height, read)
    }
}

impl ServedChain {
    /// The chain as session `session` of client `client` reads it (see [`SessionView`]).
    pub fn for_session(&self, session: SessionId, client: Option<Source>) -> SessionView<'_> {
        SessionView {
            chain: self,
            session,
            client,
        }
    }

    /// Session `session` has ended: the block or filter it waited for from the node is
    /// no longer fetched for it.
    pub fn session_ended(&self, session: SessionId) {
        if let Some(b) = &self.blocks {
            b.session_ended(session);
        }
        if let Some(f) = &self.filters {
            f.session_ended(session);
        }
        if let Some(s) = &self.spent_from {
            s.session_ended(session);
        }
    }
}

/// The served chain as one client session reads it (the server's connections): the block
/// or filter it waits for from the node is fetched while it waits and dropped when it ends
/// ([`ServedChain::session_ended`]), and its transactions count against its client's share
/// of the relay queue ([`crate::relay::RELAY_PER_CLIENT`]).
pub struct SessionView<'a> {
    chain: &'a ServedChain,
    session: SessionId,
    client: Option<Source>,
}

impl lightwire_proto::Served for SessionView<'_> {
    fn tip(&self) -> TipInfo {
        self.chain.served_tip()
    }

    fn height_of(&self, hash: &BlockHash) -> Option<u32> {
        self.chain.height_of(hash)
    }

    fn base(&self) -> u32 {
        self.chain.base
    }

    fn copy_headers(&self, from: u32, n: usize, out: &mut [u8]) -> usize {
        self.chain.copy_headers(from, n, out)
    }

    fn header(&self, height: u32) -> Option<[u8; HEADER_LEN]> {
        lightwire_proto::Served::header(self.chain, height)
    }

    fn reorgs(&self) -> u64 {
        self.chain.reorgs
    }

    fn serves_filters(&self) -> bool {
        self.chain.filters.is_some()
    }

    fn mirrors(&self) -> &[u8] {
        &self.chain.mirrors
    }

    fn filter_tip(&self) -> Option<u32> {
        self.chain.filters.as_ref()?.tip()
    }

    fn filter_entry(&self, height: u32) -> Option<FilterEntry> {
        self.chain.filters.as_ref()?.entry(height)
    }

    fn serves_blocks(&self) -> bool {
        self.chain.blocks.is_some()
    }

    fn serves_tweaks(&self) -> bool {
        self.chain.tweaks.is_some()
    }

    fn tweak_tip(&self) -> Option<u32> {
        self.chain.tweaks.as_ref()?.tip()
    }

    fn tweak_entry(&self, height: u32) -> Option<FilterEntry> {
        self.chain.tweaks.as_ref()?.entry(height)
    }

    fn with_tweaks<R>(&self, height: u32, read: impl FnOnce(&[u8]) -> R) -> FilterLookup<R> {
        match &self.chain.tweaks {
            Some(t) => t.with_list(height, read),
            None => FilterLookup::Missing,
        }
    }

    fn with_spent_from<R>(&self, height: u32, read: impl FnOnce(&[u8]) -> R) -> FilterLookup<R> {
        match &self.chain.spent_from {
            Some(s) => s.with_for(
                self.session,
                self.client,
                height,
                self.chain.block_hash(height),
                read,
            ),
            None => FilterLookup::Missing,
        }
    }

    fn relays(&self) -> bool {
        self.chain.relay.is_some()
    }

    fn serves_mempool(&self) -> bool {
        self.chain.mempool.is_some()
    }

    fn fee_rates(&self) -> Option<(lightwire_wire::FeeSource, [Option<u64>; 3])> {
        Some(self.chain.fees.as_ref()?.current())
    }

    fn mempool_head(&self) -> u64 {
        self.chain.mempool.as_ref().map_or(0, |m| m.head())
    }

    fn mempool_held(
        &self,
        after: u64,
        upto: u64,
        each: impl FnMut(u64, lightwire_proto::feed::MempoolChange<'_>) -> bool,
    ) {
        if let Some(m) = &self.chain.mempool {
            m.held(after, upto, each);
        }
    }

    fn mempool_changes(
        &self,
        after: u64,
        each: impl FnMut(u64, lightwire_proto::feed::MempoolChange<'_>) -> bool,
    ) -> bool {
        self.chain
            .mempool
            .as_ref()
            .is_none_or(|m| m.changes(after, each))
    }

    fn with_mempool_tx<R>(&self, txid: &[u8; 32], read: impl FnOnce(&[u8]) -> R) -> Option<R> {
        self.chain.mempool.as_ref()?.with_tx(txid, read)
    }

    fn relay_tx(&self, tx: &[u8]) -> lightwire_proto::session::RelayStatus {
        match &self.chain.relay {
            Some(r) => r.push_from(self.client, tx),
            None => lightwire_proto::session::RelayStatus::NoNode,
        }
    }

    fn with_block<R>(&self, height: u32, read: impl FnOnce(&[u8]) -> R) -> FilterLookup<R> {
        let header = lightwire_proto::Served::header(self.chain, height);
        match &self.chain.blocks {
            Some(b) => b.with_block_for(self.session, height, header, read),
            None => FilterLookup::Missing,
        }
    }

    fn with_filter<R>(&self, height: u32, read: impl FnOnce(&[u8]) -> R) -> FilterLookup<R> {
        let header = lightwire_proto::Served::header(self.chain, height);
        match &self.chain.filters {
            Some(f) => f.with_filter_for(self.session, height, header, read),
            None => FilterLookup::Missing,
        }
    }
}

fn genesis_entry(params: &Params) -> Entry {
    let genesis = params.genesis;
    Entry {
        height: 0,
        hash: genesis.block_hash(),
        header: genesis,
        chainwork: genesis
            .bits
            .to_target()
            .map(|t| t.work())
            .unwrap_or_default(),
        normal_bits: genesis.bits,
    }
}

#[cfg(test)]
mod tests {
    use lightwire_chain::generate::headers_after;
    use lightwire_chain::{MAINNET, Rule};

    use super::*;
    use lightwire_proto::Served;

    const NOW: u64 = 2_000_000_000;

    #[test]
    fn generated_chain_is_indexed_and_located() {
        let served = ServedChain::generate(5000, NOW).unwrap();
        let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 5000, 0);
        assert_eq!(served.tip().height, 5000);
        assert_eq!(served.tip().header, headers[4999].encode());
        assert_eq!(served.height_of(&headers[99].block_hash()), Some(100));
        let locator = [headers[2999].block_hash().0, [9; 32]];
        assert_eq!(served.start_after(locator.iter()), 3000 + 1);
        assert_eq!(served.start_after([[9u8; 32]].iter()), 1);
        let mut out = [0u8; 3 * HEADER_LEN];
        assert_eq!(served.copy_headers(4999, 3, &mut out), 2);
        assert_eq!(out[..80], headers[4998].encode());
        assert_eq!(served.copy_headers(5001, 3, &mut out), 0);
    }

    /// A header set by the program is served as given (here one with another nBits, which
    /// a client's validation refuses), only within the chain; a replaced chain counts as a
    /// reorg.
    #[test]
    fn a_set_header_is_served_and_replace_counts_as_a_reorg() {
        let mut served = ServedChain::generate(100, NOW).unwrap();
        let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 100, 0);
        let mut bad = headers[49];
        bad.bits = lightwire_chain::CompactTarget(bad.bits.0 ^ 0x0001_0000);
        assert!(!served.set_header(0, bad.encode()), "the first header held");
        assert!(!served.set_header(101, bad.encode()), "above the tip");
        assert!(served.set_header(50, bad.encode()));
        assert!(served.set_header(100, bad.encode()));
        assert_eq!(
            served.tip().header,
            bad.encode(),
            "the tip announced is the one served"
        );
        let mut out = [0u8; HEADER_LEN];
        served.copy_headers(50, 1, &mut out);
        assert_eq!(out, bad.encode());
        assert_eq!(served.height_of(&headers[49].block_hash()), Some(50));
        let mut chain = lightwire_chain::Chain::new(&REGTEST);
        let mut sent = headers[..49].to_vec();
        sent.push(Header::decode(&out));
        let Err(lightwire_chain::ConnectError::Invalid(e)) = chain.connect(&sent, NOW) else {
            panic!("the header set must fail validation");
        };
        assert_eq!(e.height, 50);
        assert!(matches!(e.rule, Rule::WrongBits { .. }), "{e}");

        let before = served.reorgs();
        served.replace(ServedChain::generate(120, NOW).unwrap());
        assert_eq!(served.reorgs(), before + 1);
        assert_eq!(served.tip().height, 120);
    }

    #[test]
    fn files_are_validated_before_serving() {
        let headers = headers_after(&REGTEST, &REGTEST.genesis, 0, 100, 0);
        let mut data = REGTEST.genesis.encode().to_vec();
        for h in &headers {
            data.extend_from_slice(&h.encode());
        }
        assert_eq!(
            ServedChain::from_file(&REGTEST, &data, None, NOW)
                .unwrap()
                .tip()
                .height,
            100
        );
        // From a later height, trusting the first header.
        let later = ServedChain::from_file(&REGTEST, &data[50 * 80..], Some(50), NOW).unwrap();
        assert_eq!(later.tip().height, 100);
        assert_eq!(later.start_after(core::iter::empty()), 51);

        let mut bad = data.clone();
        bad[60 * 80 + 4] ^= 1; // prev-hash of height 60
        assert!(matches!(
            ServedChain::from_file(&REGTEST, &bad, None, NOW),
            Err(SourceError::Invalid(ConnectError::Invalid(e)))
                if e.height == 60 && matches!(e.rule, Rule::PrevHashMismatch { .. })
        ));
        assert!(matches!(
            ServedChain::from_file(&MAINNET, &data, None, NOW),
            Err(SourceError::NotGenesis { .. })
        ));
        assert!(matches!(
            ServedChain::from_file(&REGTEST, &data[..81], None, NOW),
            Err(SourceError::NotHeaders { len: 81 })
        ));
    }

    #[test]
    fn the_refused_batch_is_the_source() {
        use std::error::Error;

        let invalid = lightwire_chain::ValidationError {
            height: 60,
            rule: Rule::TimeTooOld { time: 1, median: 2 },
        };
        let err = SourceError::Invalid(ConnectError::Invalid(invalid));
        let connect = err.source().and_then(|s| s.downcast_ref::<ConnectError>());
        assert_eq!(connect, Some(&ConnectError::Invalid(invalid)));
        // The chain goes on to the rejected header.
        let rejected = connect
            .and_then(|c| c.source())
            .and_then(|s| s.downcast_ref::<lightwire_chain::ValidationError>());
        assert_eq!(rejected, Some(&invalid));
        assert_eq!(err.to_string(), format!("invalid header: {invalid}"));
        assert!(SourceError::NotHeaders { len: 81 }.source().is_none());
    }

    #[test]
    fn a_followed_chain_extends_and_reorgs() {
        let (mut served, mut chain) = ServedChain::genesis_only(&REGTEST);
        let main = headers_after(&REGTEST, &REGTEST.genesis, 0, 3000, 0);
        for piece in main.chunks(1000) {
            let outcome = chain.connect(piece, NOW).unwrap();
            assert!(served.apply(&outcome, chain.staged()));
        }
        assert_eq!(served.tip().height, 3000);
        // Entries rebuilt from the served chain equal the validation window's.
        let rebuilt = served.entries(2500, 3000).unwrap();
        assert_eq!(rebuilt.len(), 501);
        assert_eq!(rebuilt[500], *chain.tip());
        assert!(served.entries(2500, 3001).is_none());
        // Locator: newest first, ending at genesis.
        let locator = served.locator();
        assert_eq!(locator[0], main[2999].block_hash());
        assert_eq!(locator[1], main[2998].block_hash());
        assert_eq!(*locator.last().unwrap(), REGTEST.genesis.block_hash());
        assert!(locator.len() < 30);

        // A heavier branch from 2900 replaces the last 100 headers.
        let branch = headers_after(&REGTEST, &main[2899], 2900, 150, 1);
        let outcome = chain.connect(&branch, NOW).unwrap();
        assert!(matches!(
            outcome,
            Outcome::Reorg {
                fork_height: 2900,
                ..
            }
        ));
        assert!(served.apply(&outcome, chain.staged()));
        assert_eq!(served.reorgs(), 1);
        assert_eq!(served.tip().height, 3050);
        assert_eq!(served.height_of(&main[2950].block_hash()), None);
        assert_eq!(served.height_of(&branch[0].block_hash()), Some(2901));
        let mut out = [0u8; 80];
        served.copy_headers(2901, 1, &mut out);
        assert_eq!(out, branch[0].encode());
        assert_eq!(served.entries(3000, 3050).unwrap()[50], *chain.tip());
        // Outcomes that stage nothing change nothing.
        assert!(!served.apply(&Outcome::Known, &[]));
    }

    /// A session reads the chain as it is, but what it waits for from the node is its
    /// own: it is fetched while the session waits, and not once the session has ended;
    /// its transactions count against its client's share of the relay queue.
    #[test]
    fn a_session_view_waits_as_its_own_session() {
        use crate::wake::Wake;
        use std::sync::Arc;
        let (mut served, mut chain) = ServedChain::genesis_only(&REGTEST);
        let main = headers_after(&REGTEST, &REGTEST.genesis, 0, 20, 0);
        let outcome = chain.connect(&main, NOW).unwrap();
        assert!(served.apply(&outcome, chain.staged()));
        served.serve_upstream_blocks(Arc::new(Wake::new()));
        let relay = Arc::new(crate::relay::TxRelay::new(Arc::new(Wake::new())));
        relay.set_connected(true);
        served.serve_relay(relay.clone());
        let client = Some(Source::from(std::net::IpAddr::from([192, 0, 2, 1])));
        let view = served.for_session(SessionId(7), client);
        assert_eq!(
            (view.tip(), view.header(5)),
            (served.served_tip(), served.header(5))
        );
        assert_eq!(view.with_block(5, |_| ()), FilterLookup::Pending);
        let blocks = served.blocks().unwrap();
        assert_eq!(blocks.wanted(), Some(main[4].block_hash()));
        served.session_ended(SessionId(7));
        assert_eq!(blocks.wanted(), None, "it ended");
        let relayed = (0..=crate::relay::RELAY_PER_CLIENT)
            .filter(|_| view.relay_tx(&[1]) == lightwire_proto::session::RelayStatus::Relayed)
            .count();
        assert_eq!(
            relayed,
            crate::relay::RELAY_PER_CLIENT,
            "its client's share"
        );
    }

    /// A chain followed from a node is not served below the network's minimum chain
    /// work; a headers file is served as given.
    #[test]
    fn a_followed_chain_is_served_only_once_it_has_the_minimum_work() {
        // Regtest headers have work 2 each: require the work of genesis + 1,000 headers.
        let work: &'static str = Box::leak(format!("{:064x}", 2 * 1001).into_boxed_str());
        let params: &'static Params = Box::leak(Box::new(Params {
            min_chain_work: work,
            ..REGTEST.clone()
        }));
        let (mut served, mut chain) = ServedChain::genesis_only(params);
        let main = headers_after(params, &params.genesis, 0, 1500, 0);
        let outcome = chain.connect(&main[..999], NOW).unwrap();
        assert!(served.apply(&outcome, chain.staged()));
        assert_eq!(served.tip().height, 999, "validated and held");
        assert!(!served.has_min_work());
        let shown = Served::tip(&served);
        assert_eq!((shown.height, shown.header), (0, params.genesis.encode()));
        assert_eq!(served.start_after([main[500].block_hash().0].iter()), 502);
        let outcome = chain.connect(&main[999..1000], NOW).unwrap();
        assert!(served.apply(&outcome, chain.staged()));
        assert!(served.has_min_work());
        assert_eq!(Served::tip(&served), served.tip());
        assert_eq!(Served::tip(&served).height, 1000);
        // A file is served as given, whatever its work.
        let file = ServedChain::generate(10, NOW).unwrap();
        assert!(file.has_min_work());
    }
}
