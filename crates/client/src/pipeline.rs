//! The store side of a sync, over any [`HeaderStore`]: the engine resumed from what the
//! store holds (validation window, locator seeds), ancestors read for a fork deeper than
//! the window, and commits taken from the engine while it keeps validating. The driver
//! ([`crate::driver`]) runs these steps, over IndexedDB in the browser and over
//! `MemoryStore` and a store that fails in the native tests.

use lightwire_chain::{BlockHash, Chain, Entry, WINDOW_LEN};
use lightwire_noise::SecretKey;
use lightwire_primitives::FilterHeader;
use lightwire_proto::{ConnectString, Millis, decode_headers};
use lightwire_store::{Batch, Durability, HeaderStore, Pending, RecordKey, StoreError, Tip};

use crate::engine::Engine;
use crate::scan::Scan;
use crate::sync::Syncer;
use crate::wallet::WalletSync;
use crate::wallet::blocks::WalletId;
use crate::wallet::names::{NAMES, WalletNames, record_key};

/// The validation state rebuilt from the store's last `WINDOW_LEN` headers.
pub async fn resume<S: HeaderStore>(store: &S) -> Result<Chain, StoreError> {
    let tip = store.tip().await?.height;
    let from = tip.saturating_sub(WINDOW_LEN as u32 - 1).max(store.base());
    let entries = store.entries(from, tip).await?;
    Chain::resume(store.params(), &entries).ok_or(StoreError::Corrupt {
        what: "stored headers do not form a chain",
    })
}

/// Give a resumed syncer's locator hashes from below its validation window (a few period
/// starts, read from the store), so that a gateway on a deeper fork answers from near it.
pub async fn seed_locator<S: HeaderStore>(
    store: &S,
    syncer: &mut Syncer,
) -> Result<(), StoreError> {
    let tip = syncer.tip().height;
    let mut heights = Vec::new();
    syncer.seed_heights(tip, &mut heights);
    let mut seeds = Vec::with_capacity(heights.len());
    for h in heights {
        if let Some(header) = store.header(h).await? {
            seeds.push((h, header.block_hash()));
        }
    }
    syncer.seed_locator(&seeds);
    Ok(())
}

/// An engine resumed from `store` (and the stored tip), for `gateways`, as `key`, at `now`,
/// with randomness from `seed`.
pub async fn open<S: HeaderStore>(
    store: &S,
    gateways: Vec<ConnectString>,
    key: SecretKey,
    seed: u64,
    now: Millis,
) -> Result<(Engine, Tip), StoreError> {
    let chain = resume(store).await?;
    let stored = store.tip().await?;
    let mut engine = Engine::new(chain, &stored, gateways, key, seed, now);
    let base = store.base();
    if base > 0 {
        let first = store.header(base).await?.ok_or(StoreError::Corrupt {
            what: "the store's first header is missing",
        })?;
        engine.syncer_mut().set_base(base, first.block_hash());
    }
    let filters = store.filter_tip().await?;
    engine.resume_filters(filters.map(|t| (t.height, t.header)), base);
    engine.stored_filters(filters.map(|t| t.height));
    if let Some(scan) = resume_scan(store).await? {
        engine.resume_scan(scan);
    }
    // Every wallet at once: the saved scan serves them all, or all scan again.
    let mut wallets = Vec::new();
    if let Some(wallet) = resume_wallet(store, WALLET, now).await? {
        wallets.push((WalletId::DEFAULT, wallet));
    }
    let names = match store.record(NAMES).await? {
        Some(bytes) => WalletNames::decode(&bytes).ok_or(StoreError::Corrupt {
            what: "the wallets' names do not read back (left as they are)",
        })?,
        None => WalletNames::default(),
    };
    for (id, _) in names.iter() {
        // A record missing (a store that lost it): the wallet starts empty, its name
        // kept; it is not a reason to open without the others.
        let wallet = resume_wallet(store, record_key(id), now).await?;
        let empty = || WalletSync::new(store.params().network, u32::MAX);
        wallets.push((id, wallet.unwrap_or_else(empty)));
    }
    if !wallets.is_empty() {
        engine.resume_wallets(names, wallets);
    }
    if let Some(progress) = resume_silent(store).await? {
        engine.resume_silent(progress);
    }
    seed_locator(store, engine.syncer_mut()).await?;
    Ok((engine, stored))
}

/// The records the client saves beside its headers: the rescan under way, and the
/// watch-only wallet (what it watches and what it found).
pub(crate) const SCAN: RecordKey = RecordKey::from_static("scan");
pub(crate) const WALLET: RecordKey = RecordKey::from_static("wallet");
// The named wallets' records and their names: `crate::wallet::names`.
/// The silent-payment scan's progress (no key: the receiver's id, where it stands).
pub(crate) const SILENT: RecordKey = RecordKey::from_static("silent");
/// The receiver's keys, in clear, only when the application asked (`persistScanKey`).
pub(crate) const SILENT_KEYS: RecordKey = RecordKey::from_static("silent-keys");

/// The silent-payment scan's progress saved in `store`, if its last block is still on the
/// stored chain (a reorganisation below it while the client was closed: scanned again).
pub async fn resume_silent<S: HeaderStore>(
    store: &S,
) -> Result<Option<crate::silent_scan::Progress>, StoreError> {
    let Some(bytes) = store.record(SILENT).await? else {
        return Ok(None);
    };
    let Some(p) = crate::silent_scan::Progress::read(&bytes) else {
        return Ok(None);
    };
    let Some(below) = p.next.checked_sub(1) else {
        return Ok(None);
    };
    let stored = store.header(below).await?.map(|h| h.block_hash());
    Ok((stored == Some(p.reached)).then_some(p))
}

/// The scan saved in `store`, if any, with only the matches the stored chain still bears
/// out (a reorg while the client was closed withdraws the rest).
pub async fn resume_scan<S: HeaderStore>(store: &S) -> Result<Option<Scan>, StoreError> {
    let Some(bytes) = store.record(SCAN).await? else {
        return Ok(None);
    };
    let Some(mut scan) = Scan::restore(&bytes) else {
        return Ok(None);
    };
    let mut on_chain = Vec::with_capacity(scan.matches().len());
    for (h, hash) in scan.matches() {
        let stored = store.header(*h).await?.map(|x| x.block_hash());
        on_chain.push(stored == Some(*hash));
    }
    let mut i = 0;
    scan.keep_matches_on(|_, _| {
        i += 1;
        on_chain[i - 1]
    });
    Ok(Some(scan))
}

/// How many times a wallet record is read before it is taken for one that does not read
/// back: reading it derives every watched script again, and a machine that computes a
/// wrong value now and then (WebKit's JavaScriptCore, see `lightwire_wallet::descriptor`)
/// can fail one reading and not the next.
const WALLET_READS: usize = 3;

/// The wallet saved in `store`, if any, with what it found in blocks the stored chain no
/// longer has (a reorg while the client was closed) withdrawn: its transactions of those
/// blocks unconfirmed again, as seen at `now`.
///
/// A record that does not read back fails the open ([`StoreError::Corrupt`]) and stays
/// as it is. Going on without it would lose what no chain holds (the labels, the
/// unconfirmed transactions it broadcast), and the next save would write an empty wallet
/// over it; the scan's records are left behind instead, as they are found again.
pub async fn resume_wallet<S: HeaderStore>(
    store: &S,
    key: RecordKey,
    now: Millis,
) -> Result<Option<WalletSync>, StoreError> {
    let Some(bytes) = store.record(key).await? else {
        return Ok(None);
    };
    let network = store.params().network;
    let read = (0..WALLET_READS).find_map(|_| WalletSync::decode(&bytes, network));
    let Some(mut wallet) = read else {
        return Err(StoreError::Corrupt {
            what: "the wallet's record does not read back (left as it is)",
        });
    };
    let mut heights: Vec<(u32, BlockHash)> = wallet
        .ledger
        .transactions()
        .iter()
        .map(|t| (t.height, t.block_hash))
        .collect();
    heights.dedup();
    for (h, hash) in heights {
        let stored = store.header(h).await?.map(|x| x.block_hash());
        if stored != Some(hash) {
            wallet.reorg(h.saturating_sub(1), now.0);
            break;
        }
    }
    Ok(Some(wallet))
}

/// For a batch whose parent `parent` is below the window: how many of its first headers
/// the store holds on the best chain right after the parent, and stored entries ending at
/// the last of those, enough to validate what follows; `None` if the parent is not stored.
///
/// One index lookup (the parent) and one range of chunk records: the headers that follow
/// are compared with the stored ones by hash, not looked up in the index one by one (an
/// answer of 819 stored headers would otherwise read most of the index's shards, and a
/// gateway could make the tab do nothing else).
pub async fn ancestors<S: HeaderStore>(
    store: &S,
    parent: &BlockHash,
    batch: &[u8],
) -> Result<Option<(Vec<Entry>, usize)>, StoreError> {
    let Some(height) = store.height_of(parent).await? else {
        return Ok(None);
    };
    let count = (batch.len() / lightwire_chain::HEADER_LEN) as u32;
    let last = height.saturating_add(count).min(store.tip().await?.height);
    let from = height
        .saturating_sub(WINDOW_LEN as u32 - 1)
        .max(store.base());
    let mut all = store.entries(from, last).await?;
    let after = (height - from + 1) as usize;
    let known = all[after.min(all.len())..]
        .iter()
        .zip(decode_headers(batch))
        .take_while(|(e, h)| e.hash == h.block_hash())
        .count();
    let end = height + known as u32;
    all.truncate((end - from + 1) as usize);
    let keep = all.len().saturating_sub(WINDOW_LEN);
    all.drain(..keep);
    Ok(Some((all, known)))
}

/// A commit that completed: the new stored tip and its header's time.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Committed {
    /// The stored tip.
    pub tip: Tip,
    /// Its header's time.
    pub time: u32,
}

/// What is being committed (its buffer is reused from commit to commit).
pub struct Pipeline {
    spare: Pending,
    durability: Option<Durability>,
    /// The stored tip's block time: a commit of filter headers only leaves it as it was.
    tip_time: u32,
    /// A scan window read from the store (buffers reused).
    headers: Vec<lightwire_chain::Header>,
    hashes: Vec<lightwire_chain::BlockHash>,
    filter_headers: Vec<FilterHeader>,
}

/// Whether the headers are synced and the filter headers (when on) have reached them.
fn caught_up(engine: &Engine) -> bool {
    let syncer = engine.syncer();
    syncer.is_synced()
        && (!engine.filters_on()
            || engine
                .filters()
                .height()
                .is_some_and(|h| h >= syncer.tip().height))
}

impl Pipeline {
    /// Entries the buffer being committed has room for (the gathering one's is
    /// [`Syncer::gathering_room`]).
    pub fn commit_room(&self) -> usize {
        self.spare.capacity()
    }
}

impl Default for Pipeline {
    fn default() -> Self {
        Pipeline {
            spare: Pending::new(0),
            durability: None,
            tip_time: 0,
            headers: Vec::new(),
            hashes: Vec::new(),
            filter_headers: Vec::new(),
        }
    }
}

impl Pipeline {
    /// A pipeline for a store whose tip's block time is `tip_time` (reported by commits
    /// that leave the tip where it is).
    pub fn resumed(tip_time: u32) -> Pipeline {
        Pipeline {
            tip_time,
            ..Pipeline::default()
        }
    }

    /// If the engine waits for ancestors from the store, read them and hand them over;
    /// returns whether it did.
    pub async fn read_ancestors<S: HeaderStore>(
        &mut self,
        engine: &mut Engine,
        store: &S,
        now: Millis,
    ) -> Result<bool, StoreError> {
        let Some((parent, batch)) = engine.need_ancestors() else {
            return Ok(false);
        };
        let found = ancestors(store, &parent, batch).await?;
        let found = found.as_ref().map(|(e, known)| (&e[..], *known));
        engine.on_ancestors(found, now);
        Ok(true)
    }

    /// If a dispute over filter headers, or the scan, needs a read from the store (block
    /// hashes and filter headers), read it and hand it over; returns whether it did.
    pub async fn read_filter_data<S: HeaderStore>(
        &mut self,
        engine: &mut Engine,
        store: &S,
    ) -> Result<bool, StoreError> {
        if let Some((from, to)) = engine.need_dispute_data() {
            self.headers.clear();
            store.headers(from, to, &mut self.headers).await?;
            self.hashes.clear();
            lightwire_chain::hash_header_list(&self.headers, &mut self.hashes);
            self.filter_headers.clear();
            store
                .filter_headers(from, to, &mut self.filter_headers)
                .await?;
            engine.on_dispute_data(from, &self.hashes, &self.filter_headers);
            return Ok(true);
        }
        if let Some((first, last)) = engine.need_silent_data() {
            // A window the store cannot give whole is made again from what it holds.
            if !self.read_window(store, first, last).await? {
                self.hashes.clear();
            }
            engine.on_silent_data(first, &self.hashes, &self.filter_headers);
            return Ok(true);
        }
        let Some((start, end)) = engine.need_scan_data() else {
            return Ok(false);
        };
        if !self.read_window(store, start, end).await? {
            return Ok(false);
        }
        engine.on_scan_data(start, &self.hashes, &self.filter_headers);
        Ok(true)
    }

    /// Read the block hashes of `start..=end` and the filter headers of `start - 1..=end`
    /// (a scan's window); false when the filter header before `start` is not stored.
    async fn read_window<S: HeaderStore>(
        &mut self,
        store: &S,
        start: u32,
        end: u32,
    ) -> Result<bool, StoreError> {
        self.headers.clear();
        store.headers(start, end, &mut self.headers).await?;
        self.hashes.clear();
        lightwire_chain::hash_header_list(&self.headers, &mut self.hashes);
        self.filter_headers.clear();
        match start.checked_sub(1) {
            Some(before) if before >= store.base() => {
                store
                    .filter_headers(before, end, &mut self.filter_headers)
                    .await?;
            }
            // Before genesis: 32 zero bytes. Before a checkpoint start the filter header is
            // not stored: the scan cannot check the first filter, and starts after it.
            _ if start == 0 => {
                self.filter_headers.push(FilterHeader::ZERO);
                store
                    .filter_headers(start, end, &mut self.filter_headers)
                    .await?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// After a commit: tell the engine where the stored filter headers end.
    pub async fn after_commit<S: HeaderStore>(
        &mut self,
        engine: &mut Engine,
        store: &S,
    ) -> Result<(), StoreError> {
        let tip = store.filter_tip().await?;
        engine.stored_filters(tip.map(|t| t.height));
        Ok(())
    }

    /// Save the scan's state if it moved enough since it was last saved, and the wallet's
    /// if it changed; returns whether the wallet was saved (calls waiting for it to be,
    /// `watch` and `unwatch`, can then be answered: [`Engine::wallet_settled`]).
    pub async fn save_scan<S: HeaderStore>(
        &mut self,
        engine: &mut Engine,
        store: &mut S,
    ) -> Result<bool, StoreError> {
        if engine.take_scan_dropped() {
            store.put_record(SCAN, None).await?;
        }
        if let Some(state) = engine.scan_to_save() {
            store.put_record(SCAN, Some(&state)).await?;
        }
        if let Some(state) = engine.silent_to_save() {
            store.put_record(SILENT, Some(&state)).await?;
        }
        if let Some(keys) = engine.silent_keys_to_save() {
            store.put_record(SILENT_KEYS, keys.as_deref()).await?;
        }
        let mut saved = false;
        if let Some(state) = engine.wallet_to_save() {
            store.put_record(WALLET, Some(&state)).await?;
            saved = true;
        }
        // A named wallet's record before the names that point to it; a removed one's
        // deleted after the names without it (crate::wallet::names).
        let named = engine.named_to_save();
        for (id, state) in &named.wallets {
            store.put_record(record_key(*id), Some(state)).await?;
        }
        if let Some(names) = &named.names {
            store.put_record(NAMES, Some(names)).await?;
        }
        for id in &named.removed {
            store.put_record(record_key(*id), None).await?;
        }
        Ok(saved || !named.wallets.is_empty() || named.names.is_some())
    }

    /// A commit to start, if one is due; the engine validates on meanwhile. Commit the
    /// batch, then call [`Self::finish`].
    pub fn take_commit(&mut self, engine: &mut Engine) -> Option<Batch<'_>> {
        let durability = engine.take_commit(&mut self.spare)?;
        self.durability = Some(durability);
        Some(self.spare.batch(durability))
    }

    /// The commit from [`Self::take_commit`] ended with `result`. A failed commit stops
    /// the engine (what the store holds is the last whole commit; open again to resume).
    pub fn finish(
        &mut self,
        engine: &mut Engine,
        result: Result<Tip, StoreError>,
        now: Millis,
    ) -> Result<Committed, StoreError> {
        let durability = self.durability.take().unwrap_or(Durability::Relaxed);
        match result {
            Ok(tip) => {
                let entries = self.spare.batch(durability).entries;
                if let Some(last) = entries.last() {
                    self.tip_time = last.header.time;
                }
                let time = self.tip_time;
                engine.committed(now);
                if caught_up(engine) {
                    // Caught up, filter headers included: both buffers give back a bulk
                    // sync's room (what the committed one holds is in the store; the
                    // next swap would clear it). Not before the filter headers are: their
                    // catch-up commits would take the room again, message by message.
                    self.spare.committed(&tip);
                    self.spare.shrink(crate::sync::FOLLOW_ROOM);
                    engine.syncer_mut().shrink_gathering();
                }
                Ok(Committed { tip, time })
            }
            Err(e) => {
                engine.stop(now);
                Err(e)
            }
        }
    }
}
