//! For tests (this crate's, and others' with the `test-util` feature): a served chain held
//! in memory, generated on regtest, that can be reorganised on demand, with the compact
//! block filters of its synthetic blocks.

use std::collections::HashMap;

use lightwire_chain::generate::headers_after;
use lightwire_chain::synthetic::{DEFAULT_PROFILE, GENESIS_OUTPUT_SCRIPT, Pool, SyntheticBlock};
use lightwire_chain::{BlockHash, HEADER_LEN, Header, REGTEST, U256};
use lightwire_filter::{FilterHeader, build_filter, filter_hash, filter_header};

use crate::session::{FilterEntry, FilterLookup, Served, ServedTip};

/// The tweaks of a list this chain wrote.
fn parse(list: &[u8]) -> Vec<[u8; 33]> {
    lightwire_primitives::TweakList::parse(list)
        .map(|l| l.iter().copied().collect())
        .unwrap_or_default()
}

/// Headers from regtest's genesis, indexed by hash.
pub struct TestChain {
    headers: Vec<Header>,
    index: HashMap<BlockHash, u32>,
    reorgs: u64,
    /// Each block's filter (genesis: a stand-in item), and its entry.
    filters: Vec<(Vec<u8>, FilterEntry)>,
    /// Whether filters are served.
    pub serve_filters: bool,
    /// Filter headers claimed only up to this height (a gateway whose filter headers lag,
    /// or that says so to answer every request empty).
    pub filters_held: Option<u32>,
    /// Heights whose filter is "being fetched" (answers wait for them).
    pub pending_filters: std::collections::HashSet<u32>,
    /// Heights whose filter it does not have although it serves their filter headers: a
    /// `filters` answer ends there, short of its request.
    pub missing_filters: std::collections::HashSet<u32>,
    /// The heights of the filters read to be served, in order (each read once per answer
    /// for a filter in one piece).
    pub filter_reads: std::sync::Mutex<Vec<u32>>,
    /// The heights of the blocks served, in order (each read once per answer).
    pub block_reads: std::sync::Mutex<Vec<u32>>,
    /// Whether blocks are served.
    pub serve_blocks: bool,
    /// Heights whose block is "being fetched" (answers wait for them).
    pub pending_blocks: std::collections::HashSet<u32>,
    /// Blocks served instead of the generated ones (a lying gateway).
    replaced_blocks: HashMap<u32, Vec<u8>>,
    /// Heights whose block is answered `not_found` (a gateway withholding them).
    pub withheld_blocks: std::collections::HashSet<u32>,
    /// Whether transactions are relayed, and those relayed so far.
    pub relay: bool,
    /// Transactions passed to the "node".
    pub relayed: std::sync::Mutex<Vec<Vec<u8>>>,
    /// What it answers a transaction it relays (`Relayed`, or a refusal: a node that is
    /// not connected).
    pub relay_answer: crate::session::RelayStatus,
    /// Its mempool, served as a digest when `Some`.
    pub mempool: Option<TestMempool>,
    /// Its fee rates (source; sat/kvB for 1, 6 and 144 blocks), served when `Some`.
    pub fee_rates: Option<(lightwire_wire::FeeSource, [Option<u64>; 3])>,
    /// The `bulk_mirrors` value its `init` advertises (empty: none).
    pub mirrors: Vec<u8>,
    /// Each block's silent-payment tweak list and its entry, served when `Some`
    /// ([`TestChain::serve_tweaks`]).
    tweaks: Option<Vec<(Vec<u8>, FilterEntry)>>,
    /// What each block spends from that its tweaks need (`spent_from`), by height: a
    /// height without is answered `not_found`.
    pub spent_from: HashMap<u32, Vec<u8>>,
    /// Heights whose `spent_from` is "being fetched" (answers wait for them).
    pub pending_spent_from: std::collections::HashSet<u32>,
    /// The pool whose payments the chain carries ([`TestChain::generate_paying`]); the
    /// default one when `None`.
    paying: Option<&'static Pool>,
}

/// A transaction (version 2, replaceable) spending output `vout` of `prev` with `witness`
/// (BIP144 when not empty) and paying `outputs` (value, script): what tests and fuzz
/// targets hand to a mempool.
pub fn spending(prev: [u8; 32], vout: u32, witness: &[&[u8]], outputs: &[(u64, &[u8])]) -> Vec<u8> {
    let mut t = vec![2, 0, 0, 0];
    if !witness.is_empty() {
        t.extend_from_slice(&[0, 1]);
    }
    t.push(1);
    t.extend_from_slice(&prev);
    t.extend_from_slice(&vout.to_le_bytes());
    t.extend_from_slice(&[0, 0xfd, 0xff, 0xff, 0xff, outputs.len() as u8]);
    for (value, script) in outputs {
        t.extend_from_slice(&value.to_le_bytes());
        t.push(script.len() as u8);
        t.extend_from_slice(script);
    }
    if !witness.is_empty() {
        t.push(witness.len() as u8);
        for item in witness {
            t.push(item.len() as u8);
            t.extend_from_slice(item);
        }
    }
    t.extend_from_slice(&[0; 4]);
    t
}

/// A served mempool in memory: the transactions held, and every change numbered from 1
/// (those before `kept_from` forgotten, as a gateway's bounded log forgets them).
#[derive(Default, Debug)]
pub struct TestMempool {
    txs: HashMap<[u8; 32], Vec<u8>>,
    /// Transactions announced in the digest as another (a lying gateway: the set it sends
    /// is the other's).
    announced_as: HashMap<[u8; 32], Vec<u8>>,
    /// Transactions answered with another when asked for (a lying gateway).
    served_as: HashMap<[u8; 32], Vec<u8>>,
    /// Transactions announced and answered `not_found` (a lying gateway).
    withheld: std::collections::HashSet<[u8; 32]>,
    /// The BIP352 tweak the digest gives each transaction that has one (true or not).
    tweaks: HashMap<[u8; 32], [u8; 33]>,
    changes: Vec<(u64, [u8; 32], Option<lightwire_wire::Removal>)>,
    head: u64,
    /// Changes numbered below this are no longer held.
    pub kept_from: u64,
    /// Transactions handed over (`get_mempool_tx` answered with one).
    served: std::sync::atomic::AtomicUsize,
}

impl TestMempool {
    /// `tx` entered the mempool; its txid.
    pub fn add(&mut self, tx: &[u8]) -> [u8; 32] {
        let txid = lightwire_primitives::Tx::parse(tx)
            .expect("a transaction")
            .txid()
            .0;
        self.txs.insert(txid, tx.to_vec());
        self.head += 1;
        self.changes.push((self.head, txid, None));
        txid
    }

    /// `tx` entered the mempool, and the digest describes it as `other` (a lie); its
    /// txid.
    pub fn add_announced_as(&mut self, tx: &[u8], other: &[u8]) -> [u8; 32] {
        let txid = self.add(tx);
        self.announced_as.insert(txid, other.to_vec());
        txid
    }

    /// Announce the made-up txid `txid`, described as `like`, and answer `not_found` when
    /// asked for it (a lying gateway probing which scripts are the wallet's, or filling
    /// its queue).
    pub fn announce_missing(&mut self, txid: [u8; 32], like: &[u8]) {
        self.txs.insert(txid, like.to_vec());
        self.withheld.insert(txid);
        self.head += 1;
        self.changes.push((self.head, txid, None));
    }

    /// `tx` entered the mempool, and the digest gives it the BIP352 tweak `tweak` (its
    /// own, or a lie); its txid.
    pub fn add_tweaked(&mut self, tx: &[u8], tweak: [u8; 33]) -> [u8; 32] {
        let txid = self.add(tx);
        self.tweaks.insert(txid, tweak);
        txid
    }

    /// When asked for the transaction `txid`, answer `other` (a lie).
    pub fn serve_as(&mut self, txid: [u8; 32], other: &[u8]) {
        self.served_as.insert(txid, other.to_vec());
    }

    /// What the digest describes the transaction `txid` as.
    fn announced(&self, txid: &[u8; 32]) -> Option<&[u8]> {
        self.announced_as
            .get(txid)
            .or_else(|| self.txs.get(txid))
            .map(Vec::as_slice)
    }

    /// How many transactions were handed over.
    pub fn served(&self) -> usize {
        self.served.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The number of the latest change.
    pub fn changes_len(&self) -> u64 {
        self.head
    }

    /// The transaction `txid` left it, for `reason`.
    pub fn remove(&mut self, txid: [u8; 32], reason: lightwire_wire::Removal) {
        self.txs.remove(&txid);
        self.head += 1;
        self.changes.push((self.head, txid, Some(reason)));
    }
}

impl TestChain {
    /// Genesis and `count` generated headers after it (tip at height `count`).
    pub fn generate(count: u32) -> TestChain {
        Self::generate_in(count, None)
    }

    /// As [`Self::generate`], the chain carrying `pool`'s payments (each in its block,
    /// whose header, filter and bytes are those of the paying block).
    pub fn generate_paying(count: u32, pool: &'static Pool) -> TestChain {
        Self::generate_in(count, Some(pool))
    }

    fn generate_in(count: u32, paying: Option<&'static Pool>) -> TestChain {
        let mut chain = TestChain {
            headers: vec![REGTEST.genesis],
            index: HashMap::new(),
            reorgs: 0,
            filters: Vec::new(),
            serve_filters: true,
            filters_held: None,
            tweaks: None,
            spent_from: HashMap::new(),
            pending_spent_from: Default::default(),
            pending_filters: Default::default(),
            missing_filters: Default::default(),
            filter_reads: Default::default(),
            block_reads: Default::default(),
            serve_blocks: true,
            pending_blocks: Default::default(),
            replaced_blocks: HashMap::new(),
            withheld_blocks: Default::default(),
            relay: true,
            relayed: Default::default(),
            relay_answer: crate::session::RelayStatus::Relayed,
            mempool: None,
            fee_rates: None,
            mirrors: Vec::new(),
            paying,
        };
        chain.index.insert(REGTEST.genesis.block_hash(), 0);
        let headers = chain.headers_after(&REGTEST.genesis, 0, count, 0);
        chain.extend(headers);
        chain
    }

    /// `count` headers on `branch` after `parent` at `parent_height`, of this chain's
    /// blocks.
    fn headers_after(
        &self,
        parent: &Header,
        parent_height: u32,
        count: u32,
        branch: u32,
    ) -> Vec<Header> {
        let Some(pool) = self.paying else {
            return headers_after(&REGTEST, parent, parent_height, count, branch);
        };
        let mut out: Vec<Header> = Vec::with_capacity(count as usize);
        let mut prev = *parent;
        for height in parent_height + 1..=parent_height.saturating_add(count) {
            let root = lightwire_chain::synthetic::merkle_root_in(pool, height, branch);
            let h = lightwire_chain::generate::next_header_with_root(
                &REGTEST,
                &prev,
                prev.block_hash(),
                root,
            );
            out.push(h);
            prev = h;
        }
        out
    }

    /// The pool of `height`'s block.
    fn pool(&self, height: u32) -> &'static Pool {
        self.paying.unwrap_or_else(|| pool_for(height))
    }

    /// The header at `height`.
    pub fn header(&self, height: u32) -> Header {
        self.headers[height as usize]
    }

    /// Every header, genesis first.
    pub fn headers(&self) -> &[Header] {
        &self.headers
    }

    /// Replace everything above `fork` with `len` headers of branch `branch`.
    pub fn reorg(&mut self, fork: u32, len: u32, branch: u32) {
        for h in self.headers.drain(fork as usize + 1..) {
            self.index.remove(&h.block_hash());
        }
        self.filters.truncate(fork as usize + 1);
        let parent = self.header(fork);
        let headers = self.headers_after(&parent, fork, len, branch);
        self.extend(headers);
        self.reorgs += 1;
        if let Some(tweaks) = &self.tweaks {
            // The new branch's blocks have no tweaks.
            let kept = tweaks
                .iter()
                .take(fork as usize + 1)
                .map(|t| parse(&t.0))
                .collect();
            self.serve_tweaks(kept);
        }
    }

    /// Break the header at `height`: a nonce whose hash misses the header's target (what
    /// a gateway serving a fake header sends). The index is left as it was.
    pub fn corrupt(&mut self, height: u32) {
        let h = &mut self.headers[height as usize];
        let Ok(target) = h.bits.to_target() else {
            return;
        };
        while target.is_met_by(&h.block_hash()) {
            h.nonce = h.nonce.wrapping_add(1);
        }
    }

    /// The tweak list of the block at `height` as served (empty when tweaks are not).
    pub fn tweak_list(&self, height: u32) -> &[u8] {
        self.tweaks
            .as_ref()
            .and_then(|t| t.get(height as usize))
            .map_or(&[], |t| &t.0)
    }

    /// Serves silent-payment tweaks: `lists[h]` are block `h`'s tweaks (any order), and
    /// every block past them has none; the tweak-header chain is built from genesis.
    pub fn serve_tweaks(&mut self, mut lists: Vec<Vec<[u8; 33]>>) {
        lists.resize(self.headers.len(), Vec::new());
        let mut before = FilterHeader::ZERO;
        let mut served = Vec::with_capacity(lists.len());
        for mut tweaks in lists {
            let mut list = Vec::new();
            lightwire_primitives::write_tweak_list(&mut tweaks, &mut list);
            let hash = lightwire_primitives::tweak_list_hash(&list);
            let header = before.next(&hash);
            before = header;
            served.push((list, FilterEntry { header, hash }));
        }
        self.tweaks = Some(served);
    }

    /// The filter of the block at `height` (each block's generated content; branches
    /// differ in their coinbase, heights from 915,001 carry a payload).
    pub fn filter(&self, height: u32) -> &[u8] {
        &self.filters[height as usize].0
    }

    /// Serve `filter` as the filter of `height` (with its entry unchanged: a lying gateway).
    pub fn replace_filter(&mut self, height: u32, filter: Vec<u8>) {
        self.filters[height as usize].0 = filter;
    }

    /// Serve `filter` as the filter of `height`, with the filter-header chain rebuilt from
    /// it up: a gateway that lies consistently (its filters match its own headers).
    pub fn rewrite_filter(&mut self, height: u32, filter: Vec<u8>) {
        let h = height as usize;
        self.filters[h].0 = filter;
        let mut prev = h
            .checked_sub(1)
            .map_or(FilterHeader::ZERO, |p| self.filters[p].1.header);
        for f in &mut self.filters[h..] {
            let hash = filter_hash(&f.0);
            prev = filter_header(&hash, &prev);
            f.1 = FilterEntry { header: prev, hash };
        }
    }

    /// The block at `height` (the real genesis block at 0, synthetic ones above).
    pub fn block(&self, height: u32) -> Vec<u8> {
        if let Some(b) = self.replaced_blocks.get(&height) {
            return b.clone();
        }
        let mut out = Vec::new();
        let header = self.header(height).encode();
        let branch = self.branch_of(height as usize);
        SyntheticBlock::write_at(
            &DEFAULT_PROFILE,
            self.pool(height),
            height,
            branch,
            &header,
            &mut out,
        );
        out
    }

    /// Serve `block` as the block of `height` (a lying gateway).
    pub fn replace_block(&mut self, height: u32, block: Vec<u8>) {
        self.replaced_blocks.insert(height, block);
    }

    fn extend(&mut self, headers: Vec<Header>) {
        for h in headers {
            self.index.insert(h.block_hash(), self.headers.len() as u32);
            self.headers.push(h);
        }
        let mut prev = self
            .filters
            .last()
            .map_or(FilterHeader::ZERO, |f| f.1.header);
        for height in self.filters.len()..self.headers.len() {
            let hash = self.headers[height].block_hash().0;
            let mut filter = Vec::new();
            if height == 0 {
                build_filter(&hash, [GENESIS_OUTPUT_SCRIPT], &mut filter);
            } else {
                let pool = self.pool(height as u32);
                let branch = self.branch_of(height);
                let block = SyntheticBlock::new(&DEFAULT_PROFILE, pool, height as u32, branch);
                build_filter(&hash, block.filter_items(), &mut filter);
            }
            let fh = filter_hash(&filter);
            prev = filter_header(&fh, &prev);
            self.filters.push((
                filter,
                FilterEntry {
                    header: prev,
                    hash: fh,
                },
            ));
        }
    }

    /// The branch a generated header at `height` was made on: the one whose Merkle root it
    /// carries (0 unless a reorg put another there).
    fn branch_of(&self, height: usize) -> u32 {
        let root = self.headers[height].merkle_root;
        (0..64)
            .find(|&b| {
                let pool = self.pool(height as u32);
                lightwire_chain::synthetic::merkle_root_in(pool, height as u32, b) == root
            })
            .unwrap_or(0)
    }
}

/// The pool of payloads for `height`'s block (none is used below `heavy_from`: an empty
/// one saves building the default pool in tests of short chains).
fn pool_for(height: u32) -> &'static Pool {
    if height >= DEFAULT_PROFILE.heavy_from {
        Pool::default_pool()
    } else {
        static EMPTY: std::sync::OnceLock<Pool> = std::sync::OnceLock::new();
        EMPTY.get_or_init(|| {
            Pool::build(&lightwire_chain::synthetic::Profile {
                heavy_from: u32::MAX,
                ..DEFAULT_PROFILE
            })
        })
    }
}

impl Served for TestChain {
    fn tip(&self) -> ServedTip {
        let height = self.headers.len() as u32 - 1;
        ServedTip {
            height,
            header: self.header(height).encode(),
            // Regtest headers at the pow limit are 2 work each.
            chainwork: U256::from_u64(2 * (u64::from(height) + 1)).to_be_bytes(),
        }
    }

    fn height_of(&self, hash: &BlockHash) -> Option<u32> {
        self.index.get(hash).copied()
    }

    fn base(&self) -> u32 {
        0
    }

    fn copy_headers(&self, from: u32, n: usize, out: &mut [u8]) -> usize {
        let src = self.headers.get(from as usize..).unwrap_or_default();
        let n = n.min(src.len()).min(out.len() / HEADER_LEN);
        for (dst, h) in out.chunks_exact_mut(HEADER_LEN).zip(&src[..n]) {
            dst.copy_from_slice(&h.encode());
        }
        n
    }

    fn reorgs(&self) -> u64 {
        self.reorgs
    }

    fn serves_filters(&self) -> bool {
        self.serve_filters
    }

    fn mirrors(&self) -> &[u8] {
        &self.mirrors
    }

    fn filter_tip(&self) -> Option<u32> {
        let held = (self.filters.len() as u32).checked_sub(1)?;
        Some(self.filters_held.map_or(held, |h| h.min(held)))
    }

    fn filter_entry(&self, height: u32) -> Option<FilterEntry> {
        self.filters.get(height as usize).map(|f| f.1)
    }

    fn serves_blocks(&self) -> bool {
        self.serve_blocks
    }

    fn serves_tweaks(&self) -> bool {
        self.tweaks.is_some()
    }

    fn tweak_tip(&self) -> Option<u32> {
        (self.tweaks.as_ref()?.len() as u32).checked_sub(1)
    }

    fn tweak_entry(&self, height: u32) -> Option<FilterEntry> {
        self.tweaks.as_ref()?.get(height as usize).map(|t| t.1)
    }

    fn with_spent_from<R>(&self, height: u32, read: impl FnOnce(&[u8]) -> R) -> FilterLookup<R> {
        if self.pending_spent_from.contains(&height) {
            return FilterLookup::Pending;
        }
        match self.spent_from.get(&height) {
            Some(b) => FilterLookup::Ready(read(b)),
            None => FilterLookup::Missing,
        }
    }

    fn with_tweaks<R>(&self, height: u32, read: impl FnOnce(&[u8]) -> R) -> FilterLookup<R> {
        match self.tweaks.as_ref().and_then(|t| t.get(height as usize)) {
            Some(t) => FilterLookup::Ready(read(&t.0)),
            None => FilterLookup::Missing,
        }
    }

    fn relays(&self) -> bool {
        self.relay
    }

    fn relay_tx(&self, tx: &[u8]) -> crate::session::RelayStatus {
        if let Ok(mut r) = self.relayed.lock() {
            r.push(tx.to_vec());
        }
        self.relay_answer
    }

    fn serves_mempool(&self) -> bool {
        self.mempool.is_some()
    }

    fn fee_rates(&self) -> Option<(lightwire_wire::FeeSource, [Option<u64>; 3])> {
        self.fee_rates
    }

    fn mempool_head(&self) -> u64 {
        self.mempool.as_ref().map_or(0, |m| m.head)
    }

    fn mempool_held(
        &self,
        after: u64,
        upto: u64,
        mut each: impl FnMut(u64, crate::feed::MempoolChange<'_>) -> bool,
    ) {
        let Some(m) = &self.mempool else {
            return;
        };
        for (n, txid, removal) in &m.changes {
            if *n <= after || *n > upto || removal.is_some() {
                continue;
            }
            if m.txs.contains_key(txid)
                && let Some(tx) = m.announced(txid)
                && !each(
                    *n,
                    crate::feed::MempoolChange::Added {
                        txid,
                        tx,
                        tweak: m.tweaks.get(txid),
                    },
                )
            {
                return;
            }
        }
    }

    fn mempool_changes(
        &self,
        after: u64,
        mut each: impl FnMut(u64, crate::feed::MempoolChange<'_>) -> bool,
    ) -> bool {
        use crate::feed::MempoolChange;
        let Some(m) = &self.mempool else {
            return true;
        };
        if after + 1 < m.kept_from {
            return false;
        }
        for (n, txid, removal) in &m.changes {
            if *n <= after {
                continue;
            }
            let held = m
                .txs
                .contains_key(txid)
                .then(|| m.announced(txid))
                .flatten();
            let change = match (removal, held) {
                (Some(reason), _) => MempoolChange::Removed {
                    txid,
                    reason: *reason,
                },
                (None, Some(tx)) => MempoolChange::Added {
                    txid,
                    tx,
                    tweak: m.tweaks.get(txid),
                },
                // Gone since: its removal follows.
                (None, None) => continue,
            };
            if !each(*n, change) {
                break;
            }
        }
        true
    }

    fn with_mempool_tx<R>(&self, txid: &[u8; 32], read: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let m = self.mempool.as_ref()?;
        m.txs.get(txid)?;
        if m.withheld.contains(txid) {
            return None;
        }
        let tx = m.served_as.get(txid).or_else(|| m.txs.get(txid))?;
        m.served.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(read(tx))
    }

    fn with_block<R>(&self, height: u32, read: impl FnOnce(&[u8]) -> R) -> FilterLookup<R> {
        if self.pending_blocks.contains(&height) {
            return FilterLookup::Pending;
        }
        if height as usize >= self.headers.len() || self.withheld_blocks.contains(&height) {
            return FilterLookup::Missing;
        }
        if let Ok(mut reads) = self.block_reads.lock() {
            reads.push(height);
        }
        FilterLookup::Ready(read(&self.block(height)))
    }

    fn with_filter<R>(&self, height: u32, read: impl FnOnce(&[u8]) -> R) -> FilterLookup<R> {
        if self.pending_filters.contains(&height) {
            return FilterLookup::Pending;
        }
        if self.missing_filters.contains(&height) {
            return FilterLookup::Missing;
        }
        match self.filters.get(height as usize) {
            Some(f) => {
                if let Ok(mut reads) = self.filter_reads.lock() {
                    reads.push(height);
                }
                FilterLookup::Ready(read(&f.0))
            }
            None => FilterLookup::Missing,
        }
    }
}
