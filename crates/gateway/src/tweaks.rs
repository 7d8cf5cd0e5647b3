//! The silent-payment tweaks a gateway serves (BIP352; docs/PROTOCOL.md, "Silent-payment
//! tweaks"): for every block of its chain, the sorted list of the tweaks of its eligible
//! transactions, and the tweak-header chain over those lists, computed from its node and
//! kept on disk.
//!
//! **Where the data comes from.** A tweak needs the scripts of the outputs a
//! transaction's inputs spend, which neither a block nor P2P carries. The gateway asks
//! its node's RPC (`--node-rpc`), one of two ways, found out on the first block:
//! - Bitcoin Core: `getblock <hash> 3`, every transaction with each input's `prevout`
//!   (from Core's undo data: no transaction index needed, one call a block);
//! - otherwise (btcd has no verbosity 3; a pruned Core has no undo data for old blocks):
//!   `getblock <hash> 0`, then, in JSON-RPC batches, `getrawtransaction <txid> 0` for each
//!   transaction outside the block that an eligible transaction spends from (each checked
//!   to hash to the txid asked). That needs a transaction index: btcd's `--txindex`, Bitcoin
//!   Core's `-txindex=1`.
//!
//! Either way the block is checked against the header the gateway validated (hash, Merkle
//! root, no mutation). Only transactions with a taproot output need their inputs' scripts;
//! the others have no tweak whatever they spend.
//!
//! **On disk.** One file (`--tweaks-dir DIR`: `DIR/<network>/tweaks`), a record a block,
//! appended as the chain grows and cut back at a reorganisation:
//! `height (4) | block hash (32) | tweak hash (32) | tweak header (32) | list length (4) |
//! list`, big-endian. At start the records are read back (their heads only) and checked to
//! chain; each is served again only once the block at its height is the one it was
//! computed for, and a list read to be served is checked against its hash first, so a
//! damaged file is recomputed or refused, never served. Mainnet's history is about 6 GB
//! (715 tweaks a block of 33 bytes since taproot) plus 104 bytes a block of heads; the
//! heads of every block are also in memory (the entries served as tweak headers, 64 bytes,
//! and where each list is: about 110 bytes a block, 100 MB for mainnet).
//!
//! Written here rather than taken from a crate: no published crate computes BIP352 tweaks
//! from a node's blocks and serves them as a checkable chain; the tweak itself is
//! lightwire-wallet's (`silent::tweak`), the list's encoding lightwire-primitives'.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lightwire_chain::{BlockHash, Network};
use lightwire_primitives::{
    FilterHash, FilterHeader, Tx, UncheckedBlock, tweak_list_hash, write_tweak_list,
};
use lightwire_proto::session::{FilterEntry, FilterLookup};
use lightwire_wallet::silent::{is_p2tr, tweak};
use tokio::sync::watch;

use crate::fees::{RpcEndpoint, RpcError, call_batch};
use crate::server::Shared;

/// Bytes of a record before its list.
const HEAD_LEN: usize = 4 + 32 + 32 + 32 + 4;

/// The longest list a record may hold: [`lightwire_wire::filters::MAX_FILTER_LEN`], what a
/// client takes (a block holds at most about 9,000 eligible transactions: 300 KB).
const MAX_LIST_LEN: u32 = lightwire_wire::filters::MAX_FILTER_LEN;

/// Transactions asked of the node in one batch.
const BATCH: usize = 200;

/// The most of one RPC answer read: a block's hex (4 MB of block, 8 MB of hex), or a batch
/// of transactions.
const MAX_ANSWER: usize = 64 << 20;

/// How long one RPC answer may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// How long to wait after the node failed before asking again.
const RETRY: Duration = Duration::from_secs(5);

/// One block's record: what is served of it, and where its list is.
#[derive(Clone, Copy, Debug)]
struct Record {
    block: BlockHash,
    entry: FilterEntry,
    /// Where the record starts in the file.
    offset: u64,
    len: u32,
}

/// The tweaks served: the records of the file, the first `verified` of them checked to be
/// of the chain served.
pub struct ServedTweaks {
    network: Network,
    path: PathBuf,
    file: File,
    records: Vec<Record>,
    verified: usize,
    /// Where the next record goes.
    end: u64,
    /// The buffer a list is read into to be served (one at a time: a list is read, checked
    /// and written into a message in one go).
    scratch: Mutex<Vec<u8>>,
}

/// Why the tweaks could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum TweaksError {
    /// The file could not be read or written.
    #[error("the tweak file {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// The node's answers were not what was asked (see the message).
    #[error("the node's RPC: {0}")]
    Rpc(#[from] RpcError),
    /// The node gave a block that is not the one validated at that height, or a
    /// transaction that does not hash to the txid asked.
    #[error("the node gave {0}")]
    Node(String),
}

impl ServedTweaks {
    /// Opens (or starts) the tweaks of `network` in `dir` (`dir/<network>/tweaks`), reading
    /// back the records already there; from the first that does not chain on the one
    /// before (a write cut short), the file is cut.
    pub fn open(dir: &Path, network: Network) -> Result<ServedTweaks, TweaksError> {
        let dir = dir.join(network.name());
        let path = dir.join("tweaks");
        let io = |source| TweaksError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let mut records = Vec::new();
        let mut reader = BufReader::new(&file);
        let mut offset = 0u64;
        let mut before = FilterHeader::ZERO;
        let mut head = [0u8; HEAD_LEN];
        while offset + HEAD_LEN as u64 <= len {
            if reader.read_exact(&mut head).is_err() {
                break;
            }
            let field = |at: usize| -> [u8; 32] { head[at..at + 32].try_into().unwrap_or([0; 32]) };
            let height = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
            let list_len = u32::from_be_bytes([head[100], head[101], head[102], head[103]]);
            let entry = FilterEntry {
                hash: FilterHash(field(36)),
                header: FilterHeader(field(68)),
            };
            let whole = offset + (HEAD_LEN as u64) + u64::from(list_len);
            if height as usize != records.len()
                || list_len > MAX_LIST_LEN
                || whole > len
                || before.next(&entry.hash) != entry.header
            {
                break;
            }
            records.push(Record {
                block: BlockHash(field(4)),
                entry,
                offset,
                len: list_len,
            });
            before = entry.header;
            offset = whole;
            if reader.seek(SeekFrom::Start(offset)).is_err() {
                break;
            }
        }
        drop(reader);
        if offset != len {
            tracing::warn!(
                path = %path.display(),
                kept = records.len(),
                "the tweak file does not end with a whole record that chains: cut after the last that does"
            );
            file.set_len(offset).map_err(io)?;
        }
        Ok(ServedTweaks {
            network,
            path,
            file,
            records,
            verified: 0,
            end: offset,
            scratch: Mutex::new(Vec::new()),
        })
    }

    /// The highest height whose tweak header is served.
    pub fn tip(&self) -> Option<u32> {
        (self.verified as u32).checked_sub(1)
    }

    /// The next height to compute (or to take from the file).
    pub fn next(&self) -> u32 {
        self.verified as u32
    }

    /// Records in the file (served or still to be checked against the chain).
    pub fn stored(&self) -> usize {
        self.records.len()
    }

    /// The tweak header and tweak hash of `height`, if served.
    pub fn entry(&self, height: u32) -> Option<FilterEntry> {
        self.records[..self.verified]
            .get(height as usize)
            .map(|r| r.entry)
    }

    /// The list of `height`, read from the file and checked against its hash, lent to
    /// `read`; `Missing` when it is not served or the file no longer holds it whole.
    pub fn with_list<R>(&self, height: u32, read: impl FnOnce(&[u8]) -> R) -> FilterLookup<R> {
        let Some(r) = self.records[..self.verified].get(height as usize) else {
            return FilterLookup::Missing;
        };
        let Ok(mut buf) = self.scratch.lock() else {
            return FilterLookup::Missing;
        };
        buf.resize(r.len as usize, 0);
        let at = r.offset + HEAD_LEN as u64;
        if let Err(e) = self.file.read_exact_at(&mut buf, at) {
            tracing::error!(height, path = %self.path.display(), "reading a tweak list: {e}");
            return FilterLookup::Missing;
        }
        if tweak_list_hash(&buf) != r.entry.hash {
            tracing::error!(height, path = %self.path.display(), "a tweak list on disk does not match its hash: not served");
            return FilterLookup::Missing;
        }
        FilterLookup::Ready(read(&buf))
    }

    /// Whether the file holds the record of `height` computed for `block` (read back at
    /// start, not yet served).
    fn stored_for(&self, height: u32, block: &BlockHash) -> bool {
        height as usize == self.verified
            && self
                .records
                .get(height as usize)
                .is_some_and(|r| r.block == *block)
    }

    /// Serves the record of `height` read back from the file, if it is for `block` and its
    /// list still matches its hash (a list damaged on disk is computed again instead:
    /// the record and those after it are cut).
    fn adopt(&mut self, height: u32, block: &BlockHash) -> bool {
        if !self.stored_for(height, block) {
            return false;
        }
        let r = self.records[height as usize];
        let mut list = vec![0u8; r.len as usize];
        let whole = self
            .file
            .read_exact_at(&mut list, r.offset + HEAD_LEN as u64)
            .is_ok();
        if !whole || tweak_list_hash(&list) != r.entry.hash {
            tracing::warn!(height, path = %self.path.display(), "a tweak list on disk does not match its hash: computed again");
            self.cut(height as usize);
            return false;
        }
        self.verified += 1;
        true
    }

    /// Appends the list of `height` (the next), computed for `block`, and serves it.
    pub fn append(
        &mut self,
        height: u32,
        block: &BlockHash,
        list: &[u8],
    ) -> Result<(), TweaksError> {
        if height as usize != self.verified || list.len() > MAX_LIST_LEN as usize {
            return Err(TweaksError::Node(format!(
                "a tweak list of {} bytes for height {height}, the next being {}",
                list.len(),
                self.verified
            )));
        }
        // Records read back above this one were for another chain.
        self.cut(self.verified);
        let before = self
            .verified
            .checked_sub(1)
            .map_or(FilterHeader::ZERO, |i| self.records[i].entry.header);
        let hash = tweak_list_hash(list);
        let entry = FilterEntry {
            hash,
            header: before.next(&hash),
        };
        let mut record = Vec::with_capacity(HEAD_LEN + list.len());
        record.extend_from_slice(&height.to_be_bytes());
        record.extend_from_slice(&block.0);
        record.extend_from_slice(&entry.hash.0);
        record.extend_from_slice(&entry.header.0);
        record.extend_from_slice(&(list.len() as u32).to_be_bytes());
        record.extend_from_slice(list);
        self.file
            .write_all_at(&record, self.end)
            .map_err(|source| TweaksError::Io {
                path: self.path.clone(),
                source,
            })?;
        self.records.push(Record {
            block: *block,
            entry,
            offset: self.end,
            len: list.len() as u32,
        });
        self.end += record.len() as u64;
        self.verified += 1;
        Ok(())
    }

    /// Drops the records from `height` on (a reorganisation: their blocks left the chain).
    pub fn truncate(&mut self, height: u32) {
        self.verified = self.verified.min(height as usize);
        self.cut(height as usize);
    }

    fn cut(&mut self, keep: usize) {
        if keep >= self.records.len() {
            return;
        }
        self.end = self.records[keep].offset;
        self.records.truncate(keep);
        if let Err(e) = self.file.set_len(self.end) {
            // The records are gone from memory: the file's tail is read back and checked
            // at the next start, and overwritten before.
            tracing::error!(path = %self.path.display(), "cutting the tweak file: {e}");
        }
    }
}

/// How the node gives the scripts a block's inputs spend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SpentSource {
    /// Not known yet: `getblock <hash> 3` is tried first.
    #[default]
    Unknown,
    /// Bitcoin Core's `getblock <hash> 3`: each input's `prevout`, from the node's undo
    /// data, in one call a block (no transaction index needed).
    VerboseBlock,
    /// `getblock <hash> 0`, then `getrawtransaction` for each transaction spent from
    /// (btcd, which has no verbosity 3, or a node that gave no `prevout`): needs the
    /// node's transaction index.
    TxIndex,
}

/// The tweak list of a block (its bytes as served), computed from what the node gives: the
/// block, checked against `header` (the one validated at that height: its hash `block`,
/// the Merkle root, no mutation), and the scripts its eligible transactions' inputs spend,
/// from whichever of the node's calls `source` says (found out on the first block).
pub async fn compute_list(
    rpc: &RpcEndpoint,
    header: &[u8; lightwire_chain::HEADER_LEN],
    block: &BlockHash,
    source: &mut SpentSource,
) -> Result<Vec<u8>, TweaksError> {
    if *source != SpentSource::TxIndex {
        match from_verbose_block(rpc, header, block).await? {
            Some(list) => {
                *source = SpentSource::VerboseBlock;
                return Ok(list);
            }
            None => {
                if *source == SpentSource::Unknown {
                    tracing::info!(
                        "the node gives no prevout with getblock at verbosity 3 (btcd; or \
                         Bitcoin Core without the block's undo data): its transaction index \
                         is asked instead"
                    );
                }
                *source = SpentSource::TxIndex;
            }
        }
    }
    from_tx_index(rpc, block).await
}

/// Bitcoin Core's `getblock <hash> 3`: every transaction's bytes and every input's
/// `prevout.scriptPubKey`; `None` when the node gave no such answer (it refused the
/// verbosity, or an input has no `prevout`).
async fn from_verbose_block(
    rpc: &RpcEndpoint,
    header: &[u8; lightwire_chain::HEADER_LEN],
    block: &BlockHash,
) -> Result<Option<Vec<u8>>, TweaksError> {
    let Ok(verbose) = get_block(rpc, block, 3).await? else {
        return Ok(None);
    };
    let Some(txs) = verbose["tx"].as_array() else {
        return Ok(None);
    };
    let mut raw = header.to_vec();
    lightwire_primitives::write_compact_size(&mut raw, txs.len() as u64);
    let mut spent: Vec<Vec<Vec<u8>>> = Vec::with_capacity(txs.len());
    for (i, tx) in txs.iter().enumerate() {
        raw.extend_from_slice(&hex_bytes(&tx["hex"])?);
        let mut scripts = Vec::new();
        if i > 0 {
            for input in tx["vin"].as_array().map(Vec::as_slice).unwrap_or_default() {
                let Some(script) = input["prevout"]["scriptPubKey"]["hex"].as_str() else {
                    return Ok(None);
                };
                scripts.push(hex::decode(script).map_err(|_| {
                    TweaksError::from(RpcError::Malformed("a prevout script that is not hex"))
                })?);
            }
        }
        spent.push(scripts);
    }
    let block = check_block(&raw, block)?;
    let txs: Vec<Tx<'_>> = block.transactions().collect();
    let list = list_of(&txs, |t, i| spent.get(t)?.get(i).map(Vec::as_slice))?;
    Ok(Some(list))
}

/// The node's block `raw`, checked to be block `block` (its hash, its Merkle root, no
/// mutation).
pub(crate) fn check_block<'a>(
    raw: &'a [u8],
    block: &BlockHash,
) -> Result<lightwire_primitives::CheckedBlock<'a>, TweaksError> {
    UncheckedBlock::parse(raw)
        .map_err(|e| TweaksError::Node(format!("a block that does not parse: {e}")))?
        .validate(block)
        .map_err(|e| TweaksError::Node(format!("a block that is not {block}: {e}")))
}

/// `getblock <hash> <verbosity>`: the node's answer, or its refusal.
pub(crate) async fn get_block(
    rpc: &RpcEndpoint,
    block: &BlockHash,
    verbosity: u8,
) -> Result<Result<serde_json::Value, RpcError>, RpcError> {
    let call = [(
        "getblock",
        serde_json::json!([block.to_string(), verbosity]),
    )];
    let answer = call_batch(rpc, &call, MAX_ANSWER, CALL_TIMEOUT).await?;
    answer
        .into_iter()
        .next()
        .ok_or(RpcError::Malformed("no answer to getblock"))
}

/// `getblock <hash> 0`, then `getrawtransaction` for each transaction outside the block
/// that an eligible candidate spends from (each checked to hash to its txid).
async fn from_tx_index(rpc: &RpcEndpoint, block: &BlockHash) -> Result<Vec<u8>, TweaksError> {
    let hex_block = get_block(rpc, block, 0).await??;
    let bytes = hex_bytes(&hex_block)?;
    let block = check_block(&bytes, block)?;
    // The transactions an eligible one spends from: in this block, or asked of the node.
    let txs: Vec<Tx<'_>> = block.transactions().collect();
    let (in_block, wanted) = spent_outside(&txs);
    let fetched = fetch_transactions(rpc, wanted.iter().map(|t| (*t, None))).await?;
    let parsed: std::collections::HashMap<[u8; 32], Tx<'_>> = fetched
        .iter()
        .filter_map(|(t, raw)| Some((*t, Tx::parse(raw).ok()?)))
        .collect();
    list_of(&txs, |t, i| {
        let input = txs.get(t)?.inputs().nth(i)?;
        let from = match in_block.get(input.prev_txid) {
            Some(&j) => txs.get(j),
            None => parsed.get(input.prev_txid),
        };
        from?
            .outputs()
            .nth(input.prev_vout as usize)
            .map(|o| o.script)
    })
}

/// Where each of a block's transactions `txs` is among them (by txid), and the txids,
/// sorted and each once, of the transactions outside the block that its candidates (the
/// transactions with a taproot output, the only ones BIP352 scans) spend from: what their
/// tweaks need, and what proves them in a dispute.
pub(crate) fn spent_outside(
    txs: &[Tx<'_>],
) -> (std::collections::HashMap<[u8; 32], usize>, Vec<[u8; 32]>) {
    let in_block: std::collections::HashMap<[u8; 32], usize> = txs
        .iter()
        .enumerate()
        .map(|(i, tx)| (tx.txid().0, i))
        .collect();
    let mut wanted: Vec<[u8; 32]> = txs
        .iter()
        .skip(1)
        .filter(|tx| tx.outputs().any(|o| is_p2tr(o.script)))
        .flat_map(|tx| tx.inputs().map(|i| *i.prev_txid))
        .filter(|t| !in_block.contains_key(t))
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    (in_block, wanted)
}

/// The transactions `wanted` (txid, and the block holding it where known), asked of the
/// node in JSON-RPC batches: `getrawtransaction <txid> 0`, through the node's transaction
/// index, or with the block's hash `getrawtransaction <txid> false <block>`, which Bitcoin
/// Core answers from that block without an index. Each answer is checked to hash to the
/// txid asked.
pub(crate) async fn fetch_transactions(
    rpc: &RpcEndpoint,
    wanted: impl Iterator<Item = ([u8; 32], Option<BlockHash>)>,
) -> Result<std::collections::HashMap<[u8; 32], Vec<u8>>, TweaksError> {
    let wanted: Vec<([u8; 32], Option<BlockHash>)> = wanted.collect();
    let mut fetched = std::collections::HashMap::with_capacity(wanted.len());
    for chunk in wanted.chunks(BATCH) {
        let calls: Vec<(&str, serde_json::Value)> = chunk
            .iter()
            .map(|(t, block)| {
                let txid = lightwire_primitives::Txid(*t).to_string();
                let params = match block {
                    Some(b) => serde_json::json!([txid, false, b.to_string()]),
                    None => serde_json::json!([txid, 0]),
                };
                ("getrawtransaction", params)
            })
            .collect();
        let answers = call_batch(rpc, &calls, MAX_ANSWER, CALL_TIMEOUT).await?;
        for ((txid, _), answer) in chunk.iter().zip(answers) {
            let answer = answer.map_err(|e| {
                TweaksError::Node(format!(
                    "no transaction {}: {e} (the node needs its transaction index: btcd \
                     --txindex, Bitcoin Core -txindex=1)",
                    lightwire_primitives::Txid(*txid)
                ))
            })?;
            let raw = hex_bytes(&answer)?;
            let tx = Tx::parse(&raw).map_err(|e| {
                TweaksError::Node(format!("a transaction that does not parse: {e}"))
            })?;
            if tx.txid().0 != *txid {
                return Err(TweaksError::Node(format!(
                    "transaction {} for {}",
                    tx.txid(),
                    lightwire_primitives::Txid(*txid)
                )));
            }
            fetched.insert(*txid, raw);
        }
    }
    Ok(fetched)
}

/// The tweak list of a block's transactions `txs` (the coinbase first), given the script
/// input `i` of transaction `t` spends (`spent(t, i)`): every transaction with a taproot
/// output needs each of its inputs'.
fn list_of<'s>(
    txs: &[Tx<'_>],
    spent: impl Fn(usize, usize) -> Option<&'s [u8]>,
) -> Result<Vec<u8>, TweaksError> {
    let mut tweaks = Vec::new();
    let mut scripts: Vec<&[u8]> = Vec::new();
    for (t, tx) in txs.iter().enumerate().skip(1) {
        if !tx.outputs().any(|o| is_p2tr(o.script)) {
            continue;
        }
        scripts.clear();
        for (i, input) in tx.inputs().enumerate() {
            scripts.push(spent(t, i).ok_or_else(|| {
                TweaksError::Node(format!(
                    "no script for output {} of transaction {}",
                    input.prev_vout,
                    input.prev_txid()
                ))
            })?);
        }
        if let Ok(t) = tweak(tx, &scripts) {
            tweaks.push(t);
        }
    }
    let mut list = Vec::new();
    write_tweak_list(&mut tweaks, &mut list);
    Ok(list)
}

pub(crate) fn hex_bytes(value: &serde_json::Value) -> Result<Vec<u8>, TweaksError> {
    let text = value
        .as_str()
        .ok_or(RpcError::Malformed("an answer that is not a hex string"))?;
    hex::decode(text)
        .map_err(|_| TweaksError::from(RpcError::Malformed("an answer that is not hex")))
}

/// Keeps the served chain's tweaks up to its tip for as long as the gateway runs: takes
/// each block's record from the file when it is the one computed for the block at that
/// height, else computes it from the node (from the network's first height with tweaks;
/// below it, every list is empty by definition and nothing is asked).
pub async fn keep(shared: Arc<Shared>, rpc: RpcEndpoint, stopped: watch::Receiver<bool>) {
    keep_with(shared, rpc, stopped, |_, _| {}).await
}

/// [`keep`], with `edit` applied to each list computed from the node (its height and its
/// bytes) before it is kept: the extension point a test's lying gateway tells its lies
/// through (the gateway itself edits nothing).
pub async fn keep_with(
    shared: Arc<Shared>,
    rpc: RpcEndpoint,
    mut stopped: watch::Receiver<bool>,
    mut edit: impl FnMut(u32, &mut Vec<u8>) + Send,
) {
    let mut tips = shared.tip_version.subscribe();
    let mut since_yield = 0u32;
    let mut source = SpentSource::Unknown;
    loop {
        if *stopped.borrow() {
            return;
        }
        let job = match shared.chain.read() {
            Ok(c) => c.tweaks().and_then(|t| {
                let height = t.next();
                let block = c.block_hash(height)?;
                let header = lightwire_proto::Served::header(&*c, height)?;
                Some((
                    height,
                    block,
                    header,
                    t.stored_for(height, &block),
                    t.network,
                ))
            }),
            Err(_) => return,
        };
        let Some((height, block, header, stored, network)) = job else {
            // Up to the tip: wait for the next one.
            tokio::select! {
                _ = tips.changed() => {}
                _ = stopped.changed() => {}
                _ = tokio::time::sleep(Duration::from_secs(30)) => {}
            }
            continue;
        };
        if stored {
            if let Ok(mut c) = shared.chain.write()
                && let Some(t) = c.tweaks_mut()
            {
                t.adopt(height, &block);
            }
            since_yield += 1;
            if since_yield >= 1000 {
                since_yield = 0;
                tokio::task::yield_now().await;
            }
            continue;
        }
        let list = if height < network.tweaks_from() {
            Ok(vec![0])
        } else {
            compute_list(&rpc, &header, &block, &mut source).await
        };
        match list {
            Ok(mut list) => {
                edit(height, &mut list);
                // The chain may have moved while the node was asked: keep the list only if
                // its block is still the one at that height, and the height the next.
                let written = match shared.chain.write() {
                    Ok(mut c) if c.block_hash(height) == Some(block) => match c.tweaks_mut() {
                        Some(t) if t.next() == height => t.append(height, &block, &list),
                        _ => Ok(()),
                    },
                    Ok(_) => Ok(()),
                    Err(_) => return,
                };
                if let Err(e) = written {
                    tracing::error!("{e}");
                    pause(&mut stopped).await;
                }
            }
            Err(e) => {
                tracing::warn!(height, %block, "no tweaks yet: {e}");
                pause(&mut stopped).await;
            }
        }
    }
}

async fn pause(stopped: &mut watch::Receiver<bool>) {
    tokio::select! {
        _ = stopped.changed() => {}
        _ = tokio::time::sleep(RETRY) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "lightwire-tweaks-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn list(n: u8) -> Vec<u8> {
        let mut tweaks: Vec<[u8; 33]> = (0..n)
            .map(|i| {
                let mut t = [i; 33];
                t[0] = 2;
                t
            })
            .collect();
        let mut out = Vec::new();
        write_tweak_list(&mut tweaks, &mut out);
        out
    }

    fn read(t: &ServedTweaks, h: u32) -> Option<Vec<u8>> {
        match t.with_list(h, |l| l.to_vec()) {
            FilterLookup::Ready(l) => Some(l),
            _ => None,
        }
    }

    #[test]
    fn records_chain_survive_a_restart_and_are_served_again_only_for_their_blocks() {
        let d = dir();
        let blocks: Vec<BlockHash> = (0..5u8).map(|i| BlockHash([i; 32])).collect();
        let mut t = ServedTweaks::open(&d, Network::Regtest).unwrap();
        for (h, b) in blocks.iter().enumerate() {
            t.append(h as u32, b, &list(h as u8)).unwrap();
        }
        assert_eq!(t.tip(), Some(4));
        assert_eq!(read(&t, 3), Some(list(3)));
        let e = |t: &ServedTweaks, h| t.entry(h).unwrap();
        assert_eq!(
            e(&t, 0).header,
            FilterHeader::ZERO.next(&tweak_list_hash(&list(0)))
        );
        assert_eq!(
            e(&t, 4).header,
            e(&t, 3).header.next(&tweak_list_hash(&list(4)))
        );
        let served: Vec<_> = (0..5).map(|h| e(&t, h)).collect();
        // Out of order, or the next twice: refused.
        assert!(t.append(7, &blocks[0], &list(1)).is_err());
        drop(t);

        // Read back: nothing served until each block is seen to be the one it was for.
        let mut t = ServedTweaks::open(&d, Network::Regtest).unwrap();
        assert_eq!((t.stored(), t.tip()), (5, None));
        assert!(t.adopt(0, &blocks[0]));
        assert!(t.adopt(1, &blocks[1]));
        // Height 2 is now another block (a reorg while the gateway was down): the record
        // is not taken, and the one computed for the new block replaces it and those above.
        assert!(!t.adopt(2, &BlockHash([9; 32])));
        t.append(2, &BlockHash([9; 32]), &list(7)).unwrap();
        assert_eq!((t.stored(), t.tip()), (3, Some(2)));
        assert_eq!(e(&t, 1), served[1]);
        assert_ne!(e(&t, 2), served[2]);
        assert_eq!(read(&t, 2), Some(list(7)));
        // A reorg cuts the served records and the file.
        t.truncate(1);
        assert_eq!((t.stored(), t.tip()), (1, Some(0)));
        drop(t);
        let t = ServedTweaks::open(&d, Network::Regtest).unwrap();
        assert_eq!(t.stored(), 1);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_damaged_file_is_cut_where_it_stops_chaining_and_a_bad_list_is_not_served() {
        let d = dir();
        let mut t = ServedTweaks::open(&d, Network::Regtest).unwrap();
        for h in 0..4u8 {
            t.append(u32::from(h), &BlockHash([h; 32]), &list(h + 1))
                .unwrap();
        }
        let path = t.path.clone();
        let third = t.records[2].offset;
        let second_list = t.records[1].offset + HEAD_LEN as u64;
        drop(t);
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        // The third record's tweak hash changed: it no longer chains; the second's list
        // changed: its head still chains, but its bytes do not match their hash.
        file.write_all_at(&[0xff], third + 40).unwrap();
        file.write_all_at(&[0x03], second_list + 1).unwrap();
        // And half a record at the end (a write cut short).
        let len = file.metadata().unwrap().len();
        file.set_len(len + 50).unwrap();
        drop(file);
        let mut t = ServedTweaks::open(&d, Network::Regtest).unwrap();
        assert_eq!(t.stored(), 2);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), third);
        assert!(t.adopt(0, &BlockHash([0; 32])));
        assert_eq!(read(&t, 0), Some(list(1)));
        // The damaged list is not taken: the record is cut, to be computed again.
        assert!(!t.adopt(1, &BlockHash([1; 32])));
        assert_eq!((t.stored(), t.tip()), (1, Some(0)));
        assert_eq!(read(&t, 1), None);
        t.append(1, &BlockHash([1; 32]), &list(2)).unwrap();
        assert_eq!(read(&t, 1), Some(list(2)));
        // Damaged after it was taken: not served.
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all_at(&[0x03], t.records[1].offset + HEAD_LEN as u64 + 1)
            .unwrap();
        assert_eq!(
            read(&t, 1),
            None,
            "a list that does not match its hash is not served"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
