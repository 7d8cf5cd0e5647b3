//! The compact block filters a gateway serves (BIP157/158, basic filters): every filter
//! header and filter hash of its chain in memory (64 bytes a block), and the filters
//! themselves produced on demand, the most recent kept in a cache bounded in bytes.
//!
//! For a generated chain the blocks are `lightwire-chain`'s synthetic ones: the filter of a
//! block is built from its items with our own BIP158 code, keyed by its hash, exactly as a
//! node builds it. For a chain followed from a node, the filter headers come from the
//! node's `cfheaders` (chained here from its filter hashes, and from the header before,
//! which must be the one held) and the filters from its `cfilter` on demand: a session
//! asking for one not cached waits (`FilterLookup::Pending`) while the upstream task
//! fetches it, and each is checked against its filter hash before it is cached.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::wake::Wake;
use crate::wants::{SessionId, Wants};

use lightwire_chain::synthetic::{
    DEFAULT_PROFILE, GENESIS_OUTPUT_SCRIPT, Pool, Profile, SyntheticBlock,
};
use lightwire_chain::{HEADER_LEN, hash_header_bytes};
use lightwire_filter::{FilterHash, FilterHeader, build_filter, filter_hash, filter_header};
use lightwire_proto::session::{FilterEntry, FilterLookup};

/// The default bound on cached filters: every heavy filter of the default generated chain
/// (10,000 of about 14 KB) fits.
pub const DEFAULT_CACHE_BYTES: usize = 256 << 20;

/// The filters a gateway serves: of a generated chain, or of a chain followed from a node.
pub struct ServedFilters {
    entries: Vec<FilterEntry>,
    cache: Mutex<Cache>,
    source: Source,
    /// Filters given by the program built on this library, served in place of the
    /// source's (see [`Self::set_filter`]); none in the gateway itself.
    set: BTreeMap<u32, Arc<[u8]>>,
    /// Heights whose filter is not served though its filter header is (see
    /// [`Self::withhold_filter`]); none in the gateway itself.
    withheld: BTreeSet<u32>,
}

enum Source {
    /// Built from the synthetic blocks.
    Generated {
        profile: Profile,
        pool: &'static Pool,
    },
    /// Fetched from the node: heights live sessions wait for, and the upstream task to
    /// wake.
    Upstream {
        wanted: Mutex<Wants<u32>>,
        notify: Arc<Wake>,
    },
}

/// Filter headers from the node that do not follow on from those held.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
#[error("the node's filter headers from height {height} do not follow on from those held")]
pub struct FilterChainError {
    /// Where they start.
    pub height: u32,
}

struct Cache {
    filters: HashMap<u32, Arc<[u8]>>,
    order: VecDeque<u32>,
    bytes: usize,
    cap: usize,
}

impl Cache {
    fn new(cap: usize) -> Cache {
        Cache {
            filters: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
            cap,
        }
    }

    fn insert(&mut self, height: u32, filter: Arc<[u8]>) {
        if filter.len() > self.cap || self.filters.contains_key(&height) {
            return;
        }
        while self.bytes + filter.len() > self.cap {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(f) = self.filters.remove(&old) {
                self.bytes -= f.len();
            }
        }
        self.bytes += filter.len();
        self.order.push_back(height);
        self.filters.insert(height, filter);
    }
}

impl ServedFilters {
    /// The filters of the generated chain `headers` (from genesis, the default profile,
    /// with the payments of `payments` if given), built on every core: each block's filter
    /// hash, then the header chain. The newest filters are kept, up to `cache_bytes`.
    pub fn generated(
        headers: &[[u8; HEADER_LEN]],
        cache_bytes: usize,
        payments: Option<&'static Pool>,
    ) -> ServedFilters {
        let pool = if let Some(pool) = payments {
            pool
        } else if headers.len() as u64 > u64::from(DEFAULT_PROFILE.heavy_from) {
            Pool::default_pool()
        } else {
            static NONE: std::sync::OnceLock<Pool> = std::sync::OnceLock::new();
            NONE.get_or_init(|| {
                Pool::build(&Profile {
                    heavy_from: u32::MAX,
                    ..DEFAULT_PROFILE
                })
            })
        };
        let mut served = ServedFilters {
            entries: Vec::new(),
            cache: Mutex::new(Cache::new(cache_bytes)),
            set: BTreeMap::new(),
            withheld: BTreeSet::new(),
            source: Source::Generated {
                profile: DEFAULT_PROFILE,
                pool,
            },
        };
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        // Interleaved chunks so that every thread gets its share of the heavy blocks.
        const CHUNK: usize = 4096;
        let chunks: Vec<(usize, &[[u8; HEADER_LEN]])> = headers
            .chunks(CHUNK)
            .enumerate()
            .map(|(i, c)| (i * CHUNK, c))
            .collect();
        let mut hashes = vec![FilterHash::ZERO; headers.len()];
        let keep_from = headers.len().saturating_sub(cache_bytes / 14_000);
        let kept = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            let (served, kept) = (&served, &kept);
            let mut outs: Vec<Vec<(usize, FilterHash)>> = Vec::new();
            let workers: Vec<_> = (0..threads)
                .map(|t| {
                    let mine: Vec<(usize, &[[u8; HEADER_LEN]])> =
                        chunks.iter().skip(t).step_by(threads).copied().collect();
                    scope.spawn(move || {
                        let mut out = Vec::new();
                        let mut filter = Vec::new();
                        for (start, chunk) in mine {
                            for (i, h) in chunk.iter().enumerate() {
                                let height = (start + i) as u32;
                                served.build(height, h, &mut filter);
                                out.push((start + i, filter_hash(&filter)));
                                if start + i >= keep_from {
                                    if let Ok(mut k) = kept.lock() {
                                        k.push((height, Arc::<[u8]>::from(&filter[..])));
                                    }
                                }
                            }
                        }
                        out
                    })
                })
                .collect();
            for w in workers {
                if let Ok(out) = w.join() {
                    outs.push(out);
                }
            }
            for (i, hash) in outs.into_iter().flatten() {
                hashes[i] = hash;
            }
        });
        let mut prev = FilterHeader::ZERO;
        served.entries = hashes
            .into_iter()
            .map(|hash| {
                prev = filter_header(&hash, &prev);
                FilterEntry { header: prev, hash }
            })
            .collect();
        let mut kept = kept.into_inner().unwrap_or_default();
        kept.sort_unstable_by_key(|(h, _)| *h);
        if let Ok(cache) = served.cache.get_mut() {
            for (height, filter) in kept {
                cache.insert(height, filter);
            }
        }
        served
    }

    /// Filters of a chain followed from a node: none yet; `notify` wakes the task that
    /// fetches them.
    pub fn upstream(cache_bytes: usize, notify: Arc<Wake>) -> ServedFilters {
        ServedFilters {
            entries: Vec::new(),
            cache: Mutex::new(Cache::new(cache_bytes)),
            set: BTreeMap::new(),
            withheld: BTreeSet::new(),
            source: Source::Upstream {
                wanted: Mutex::new(Wants::new()),
                notify,
            },
        }
    }

    /// Filter hashes from the node for heights `first..`, with the filter header before
    /// `first`: they must follow on from what is held.
    pub fn extend(
        &mut self,
        first: u32,
        prev: FilterHeader,
        hashes: &[FilterHash],
    ) -> Result<(), FilterChainError> {
        let held = match first.checked_sub(1) {
            Some(h) => self.entries.get(h as usize).map(|e| e.header),
            None => Some(FilterHeader::ZERO),
        };
        if first as usize != self.entries.len() || held != Some(prev) {
            return Err(FilterChainError { height: first });
        }
        let mut prev = prev;
        for hash in hashes {
            prev = filter_header(hash, &prev);
            self.entries.push(FilterEntry {
                header: prev,
                hash: *hash,
            });
        }
        Ok(())
    }

    /// Drop what is held from `height` on (a reorganisation of the chain).
    pub fn truncate(&mut self, height: u32) {
        self.entries.truncate(height as usize);
        self.set.retain(|h, _| *h < height);
        if let Ok(cache) = self.cache.get_mut() {
            let drop: Vec<u32> = cache
                .filters
                .keys()
                .copied()
                .filter(|h| *h >= height)
                .collect();
            for h in drop {
                if let Some(f) = cache.filters.remove(&h) {
                    cache.bytes -= f.len();
                }
            }
            cache.order.retain(|h| *h < height);
        }
        if let Source::Upstream { wanted, .. } = &mut self.source
            && let Ok(w) = wanted.get_mut()
        {
            w.retain(|h| *h < height);
        }
    }

    /// A filter from the node for the block at `height`: cached if its hash is the one
    /// held (returns whether it was).
    pub fn insert(&self, height: u32, filter: &[u8]) -> bool {
        let ok = self
            .entry(height)
            .is_some_and(|e| e.hash == filter_hash(filter));
        if let Source::Upstream { wanted, .. } = &self.source
            && let Ok(mut w) = wanted.lock()
        {
            w.answered(&height);
        }
        if ok && let Ok(mut c) = self.cache.lock() {
            c.insert(height, Arc::from(filter));
        }
        ok
    }

    /// The next filters to fetch from the node: from the lowest height a live session
    /// waits for, up to `max` (fetched ahead, as a scan asks for them in order).
    pub fn wanted(&self, max: u32) -> Option<(u32, u32)> {
        let Source::Upstream { wanted, .. } = &self.source else {
            return None;
        };
        let first = *wanted.lock().ok()?.items().next()?;
        let tip = self.tip()?;
        Some((first, tip.min(first.saturating_add(max - 1))))
    }

    /// Build the filter of the block at `height` whose header is `header` into `out`
    /// (a generated chain's; false for one followed from a node).
    fn build(&self, height: u32, header: &[u8; HEADER_LEN], out: &mut Vec<u8>) -> bool {
        let Source::Generated { profile, pool } = &self.source else {
            return false;
        };
        let hash = hash_header_bytes(header);
        if height == 0 {
            build_filter(&hash.0, [GENESIS_OUTPUT_SCRIPT], out);
        } else {
            let block = SyntheticBlock::new(profile, pool, height, 0);
            build_filter(&hash.0, block.filter_items(), out);
        }
        true
    }

    /// The profile and payload pool of a generated chain's filters (`None` for a chain
    /// followed from a node).
    pub fn generated_source(&self) -> Option<(Profile, &'static Pool)> {
        match &self.source {
            Source::Generated { profile, pool } => Some((*profile, pool)),
            Source::Upstream { .. } => None,
        }
    }

    /// Answer requests for the filter of block `height` without it (as for a block off
    /// the chain), while its filter header is still served: a gateway withholding the
    /// filter it vouched for. False when there is no filter header at `height`.
    ///
    /// An extension point for test gateways built on this library: the gateway itself
    /// never calls it.
    pub fn withhold_filter(&mut self, height: u32) -> bool {
        let held = (height as usize) < self.entries.len();
        if held {
            self.withheld.insert(height);
        }
        held
    }

    /// Serve `filter` as the filter of block `height` from now on, and commit to it: its
    /// filter hash and every filter header from `height` up are recomputed, so that the
    /// filter headers served chain through it. False when there is no filter header at
    /// `height`, or for genesis (whose filter header has nothing before it to chain from).
    ///
    /// An extension point for programs built on this library that serve filters of their
    /// own making: the gateway itself never calls it. Nothing checks `filter` against the
    /// block; a client can (by fetching the block), which is what test gateways built on
    /// this check.
    pub fn set_filter(&mut self, height: u32, filter: Vec<u8>) -> bool {
        let h = height as usize;
        if height == 0 || h >= self.entries.len() {
            return false;
        }
        let filter = Arc::<[u8]>::from(filter);
        let mut prev = self.entries[h - 1].header;
        for (at, e) in self.entries[h..].iter_mut().enumerate() {
            let hash = if at == 0 {
                filter_hash(&filter)
            } else {
                e.hash
            };
            prev = filter_header(&hash, &prev);
            *e = FilterEntry { header: prev, hash };
        }
        self.set.insert(height, filter);
        true
    }

    /// The highest height with a filter header.
    pub fn tip(&self) -> Option<u32> {
        self.entries.len().checked_sub(1).map(|h| h as u32)
    }

    /// The filter header and hash at `height`.
    pub fn entry(&self, height: u32) -> Option<FilterEntry> {
        self.entries.get(height as usize).copied()
    }

    /// The filter of the block at `height` (whose header is `header`), lent to `read`:
    /// from the cache, or built now and cached.
    pub fn with_filter<R>(
        &self,
        height: u32,
        header: Option<[u8; HEADER_LEN]>,
        read: impl FnOnce(&[u8]) -> R,
    ) -> FilterLookup<R> {
        self.with_filter_for(SessionId::ANONYMOUS, height, header, read)
    }

    /// Session `session` has ended: the filter it waited for is no longer fetched for it.
    pub fn session_ended(&self, session: SessionId) {
        if let Source::Upstream { wanted, .. } = &self.source
            && let Ok(mut w) = wanted.lock()
        {
            w.session_ended(session);
        }
    }

    /// [`Self::with_filter`] for session `session`: a filter to fetch is fetched while it
    /// (or another session) waits for it.
    pub fn with_filter_for<R>(
        &self,
        session: SessionId,
        height: u32,
        header: Option<[u8; HEADER_LEN]>,
        read: impl FnOnce(&[u8]) -> R,
    ) -> FilterLookup<R> {
        let Some(header) = header.filter(|_| (height as usize) < self.entries.len()) else {
            return FilterLookup::Missing;
        };
        if self.withheld.contains(&height) {
            return FilterLookup::Missing;
        }
        let cached = self.set.get(&height).cloned().or_else(|| {
            self.cache
                .lock()
                .ok()
                .and_then(|c| c.filters.get(&height).cloned())
        });
        let filter = match cached {
            Some(f) => f,
            None => {
                let mut out = Vec::new();
                if !self.build(height, &header, &mut out) {
                    // From the node: asked for, and the session waits.
                    if let Source::Upstream { wanted, notify } = &self.source {
                        if let Ok(mut w) = wanted.lock() {
                            w.want(session, height);
                        }
                        notify.wake();
                    }
                    return FilterLookup::Pending;
                }
                let f = Arc::<[u8]>::from(out);
                if let Ok(mut c) = self.cache.lock() {
                    c.insert(height, f.clone());
                }
                f
            }
        };
        FilterLookup::Ready(read(&filter))
    }

    /// Bytes of filters cached.
    pub fn cached_bytes(&self) -> usize {
        self.cache.lock().map_or(0, |c| c.bytes)
    }
}

#[cfg(test)]
mod tests {
    use lightwire_chain::generate::headers_after;
    use lightwire_chain::synthetic::PoolTx;
    use lightwire_chain::{Header, REGTEST};
    use lightwire_filter::{Filter, basic_filter, output_scripts};

    use super::*;

    #[test]
    fn the_genesis_filter_is_the_bip158_one() {
        // BIP158's vector for testnet's genesis block (the same coinbase as every network's).
        let genesis = [lightwire_chain::TESTNET3.genesis.encode()];
        let f = ServedFilters::generated(&genesis, 1 << 20, None);
        let got = f.with_filter(0, Some(genesis[0]), <[u8]>::to_vec);
        assert_eq!(got, FilterLookup::Ready(hex::decode("019dfca8").unwrap()));
        assert_eq!(f.tip(), Some(0));
    }

    #[test]
    fn generated_filters_chain_and_match_their_blocks() {
        let mut headers = vec![REGTEST.genesis];
        headers.extend(headers_after(&REGTEST, &REGTEST.genesis, 0, 300, 0));
        let encoded: Vec<[u8; 80]> = headers.iter().map(Header::encode).collect();
        let f = ServedFilters::generated(&encoded, 1 << 20, None);
        let mut prev = FilterHeader::ZERO;
        let mut block = Vec::new();
        let mut rebuilt = Vec::new();
        for (height, h) in encoded.iter().enumerate().skip(1) {
            let e = f.entry(height as u32).unwrap();
            let FilterLookup::Ready(filter) =
                f.with_filter(height as u32, Some(*h), <[u8]>::to_vec)
            else {
                panic!("no filter at {height}");
            };
            assert_eq!(e.hash, filter_hash(&filter));
            let prev_header = if height == 1 {
                f.entry(0).unwrap().header
            } else {
                prev
            };
            assert_eq!(e.header, filter_header(&e.hash, &prev_header));
            prev = e.header;
            // The same filter from the block itself, as a node builds it.
            let b = SyntheticBlock::new(&DEFAULT_PROFILE, Pool::default_pool(), height as u32, 0);
            b.write(h, &mut block);
            basic_filter(
                &hash_header_bytes(h).0,
                &block,
                b.spent_scripts(),
                &mut rebuilt,
            )
            .unwrap();
            assert_eq!(rebuilt, filter);
            assert_eq!(Filter::decode(&filter).unwrap().n, 1);
            // The header commits to the block.
            assert_eq!(headers[height].merkle_root, b.merkle_root());
        }
        assert_eq!(
            f.with_filter(301, Some(encoded[0]), |_| ()),
            FilterLookup::Missing
        );
    }

    /// A filter set by the program (here: the block's without its coinbase output, a
    /// gateway hiding a payment) is served with filter headers rebuilt to match it, so
    /// that only the block shows it wrong; a reorg below it drops it.
    #[test]
    fn a_set_filter_is_committed_to_and_only_its_block_shows_it_wrong() {
        let mut headers = vec![REGTEST.genesis];
        headers.extend(headers_after(&REGTEST, &REGTEST.genesis, 0, 50, 0));
        let encoded: Vec<[u8; 80]> = headers.iter().map(Header::encode).collect();
        let mut f = ServedFilters::generated(&encoded, 1 << 20, None);
        let honest: Vec<FilterEntry> = (0..=50).map(|h| f.entry(h).unwrap()).collect();
        let (profile, pool) = f.generated_source().unwrap();
        let hash = hash_header_bytes(&encoded[30]).0;
        let mut lie = Vec::new();
        let block = SyntheticBlock::new(&profile, pool, 30, 0);
        build_filter(&hash, block.filter_items().skip(1), &mut lie);
        assert!(f.set_filter(30, lie.clone()));
        assert!(!f.set_filter(51, lie.clone()), "above the tip");
        assert!(!f.set_filter(0, lie.clone()), "genesis");
        assert_eq!(f.entry(29), Some(honest[29]));
        assert_eq!(f.entry(30).unwrap().hash, filter_hash(&lie));
        assert_eq!(
            f.with_filter(30, Some(encoded[30]), <[u8]>::to_vec),
            FilterLookup::Ready(lie.clone())
        );
        assert_eq!(
            f.entry(30).unwrap().header,
            filter_header(&filter_hash(&lie), &honest[29].header)
        );
        for h in 31..=50 {
            let e = f.entry(h).unwrap();
            assert_eq!(e.hash, honest[h as usize].hash);
            assert_eq!(
                e.header,
                filter_header(&e.hash, &f.entry(h - 1).unwrap().header)
            );
        }
        let mut bytes = Vec::new();
        block.write(&encoded[30], &mut bytes);
        let parsed = lightwire_filter::Block::parse(&bytes).unwrap();
        assert_eq!(
            lightwire_filter::first_absent(&lie, &hash, lightwire_filter::known_items(&parsed)),
            Ok(Some(0))
        );
        f.truncate(30);
        assert!(f.set.is_empty(), "dropped with the heights it was set at");
    }

    #[test]
    fn heavy_blocks_have_mainnet_sized_filters() {
        let profile = Profile {
            heavy_from: 1,
            ..DEFAULT_PROFILE
        };
        let pool = Pool::build(&profile);
        let mut sizes = Vec::new();
        let mut filter = Vec::new();
        let mut block = Vec::new();
        for height in 1..=64u32 {
            let b = SyntheticBlock::new(&profile, &pool, height, 0);
            let p: &PoolTx = b.payload.unwrap();
            b.write(&[0; 80], &mut block);
            let mut outputs = 0;
            output_scripts(&block, |_| outputs += 1).unwrap();
            assert_eq!(outputs, 1 + p.output_scripts().count());
            build_filter(&[height as u8; 32], b.filter_items(), &mut filter);
            sizes.push(filter.len());
        }
        let mean = sizes.iter().sum::<usize>() / sizes.len();
        let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
        assert!((12_000..=16_000).contains(&mean), "mean {mean}");
        assert!(*min >= 9_500 && *max <= 19_000, "{min}..{max}");
    }

    #[test]
    fn upstream_filters_chain_from_what_is_held_and_are_checked() {
        let notify = Arc::new(Wake::new());
        let mut f = ServedFilters::upstream(1 << 20, notify);
        let filters: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 5]).collect();
        let hashes: Vec<FilterHash> = filters.iter().map(|x| filter_hash(x)).collect();
        assert_eq!(
            f.extend(1, FilterHeader::ZERO, &hashes[1..]),
            Err(FilterChainError { height: 1 })
        );
        f.extend(0, FilterHeader::ZERO, &hashes[..4]).unwrap();
        assert_eq!(
            f.extend(4, FilterHeader([9; 32]), &hashes[4..]),
            Err(FilterChainError { height: 4 })
        );
        let before = f.entry(3).unwrap().header;
        f.extend(4, before, &hashes[4..]).unwrap();
        assert_eq!(f.tip(), Some(9));
        let header = Some([0u8; 80]);
        assert_eq!(f.with_filter(6, header, |_| ()), FilterLookup::Pending);
        assert_eq!(f.with_filter(2, header, |_| ()), FilterLookup::Pending);
        assert_eq!(f.wanted(3), Some((2, 4)));
        // The node's filter is cached only if its hash is the one held.
        assert!(!f.insert(2, &filters[3]));
        assert!(f.insert(6, &filters[6]));
        assert_eq!(
            f.with_filter(6, header, <[u8]>::to_vec),
            FilterLookup::Ready(filters[6].clone())
        );
        assert_eq!(f.wanted(100), None, "both answered (one refused)");
        f.truncate(5);
        assert_eq!(
            (f.tip(), f.with_filter(6, header, |_| ())),
            (Some(4), FilterLookup::Missing)
        );
    }

    /// Filters are fetched while a live session waits for them: sessions that asked and
    /// went away leave nothing to fetch.
    #[test]
    fn filter_fetches_end_with_the_sessions_that_asked() {
        let mut f = ServedFilters::upstream(1 << 20, Arc::new(Wake::new()));
        let hashes: Vec<FilterHash> = (0..10u8).map(|i| filter_hash(&[i; 5])).collect();
        f.extend(0, FilterHeader::ZERO, &hashes).unwrap();
        let header = Some([0u8; 80]);
        for s in 1..=5u32 {
            let asked = f.with_filter_for(SessionId(s.into()), s, header, |_| ());
            assert_eq!(asked, FilterLookup::Pending);
        }
        for s in 1..=5u32 {
            f.session_ended(SessionId(s.into()));
        }
        assert_eq!(f.wanted(3), None, "nobody waits");
        let _ = f.with_filter_for(SessionId(7), 8, header, |_| ());
        assert_eq!(f.wanted(3), Some((8, 9)));
    }

    #[test]
    fn the_cache_is_bounded_in_bytes() {
        let mut c = Cache::new(100);
        for h in 0..10 {
            c.insert(h, Arc::from(vec![0u8; 30]));
        }
        assert_eq!((c.bytes, c.filters.len()), (90, 3));
        assert!(c.filters.contains_key(&9) && !c.filters.contains_key(&6));
        c.insert(99, Arc::from(vec![0u8; 101]));
        assert!(!c.filters.contains_key(&99));
    }
}
