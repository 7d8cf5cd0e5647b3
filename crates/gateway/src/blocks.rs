//! The blocks a gateway serves (`get_block`). For a generated chain they are
//! `lightwire-chain`'s synthetic blocks, produced on demand from the height (the genesis
//! block is the real one), so a client can fetch a block its filter matched, or that
//! settles which gateway's filter is wrong, and check it against the header's Merkle root
//! exactly as on a real chain. Following a node, a block is fetched from it when a session
//! asks (`getdata` for the witness block; the session waits, `FilterLookup::Pending`),
//! checked against the header (hash, Merkle root, not mutated) and kept. The last few are
//! kept either way: a session reads the block it sends once per piece.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::wake::Wake;
use crate::wants::{SessionId, Wants};

use lightwire_chain::synthetic::{Pool, Profile, SyntheticBlock};
use lightwire_chain::{BlockHash, HEADER_LEN, hash_header_bytes};
use lightwire_primitives::{Block, BlockError};
use lightwire_proto::session::FilterLookup;

/// Blocks kept after they were produced: one per session sending a block at the same time
/// is enough to produce each once.
const KEPT: usize = 8;

/// Blocks the node said it does not have, remembered at most: a node is believed only
/// for the block it was asked for, one at a time, so this is many answers' worth, and a
/// flood pushes the oldest out (asked for again) rather than growing memory.
pub const MISSING_KEPT: usize = 64;

/// The blocks a gateway serves.
pub struct ServedBlocks {
    source: Source,
    kept: Mutex<VecDeque<(u32, Arc<[u8]>)>>,
    /// Answers given by the program built on this library, in place of the source's (see
    /// [`ServedBlocks::set_answer`]); none in the gateway itself.
    set: BTreeMap<u32, BlockAnswer>,
}

/// What is answered for one block, as set with [`ServedBlocks::set_answer`].
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum BlockAnswer {
    /// These bytes, sent as the block (nothing checks them against its header).
    Bytes(Arc<[u8]>),
    /// `not_found`.
    NotFound,
}

enum Source {
    /// Synthetic, made on demand.
    Generated {
        profile: Profile,
        pool: &'static Pool,
    },
    /// From the node: blocks live sessions wait for (by height, then hash), those the
    /// node leading said it does not have (the newest [`MISSING_KEPT`], until another
    /// node leads), and the task to wake.
    Upstream {
        wanted: Mutex<Wants<(u32, BlockHash)>>,
        missing: Mutex<VecDeque<BlockHash>>,
        notify: Arc<Wake>,
    },
}

/// A block from the node that is not the block asked for.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum BlockFetchError {
    /// It does not parse, its hash is not the one asked for, or its transactions are not
    /// its header's (Merkle root, or a mutated tree).
    #[error("the node's block {hash} is not the block of that hash: {error}")]
    Mismatch {
        /// The hash asked for.
        hash: BlockHash,
        /// The rule it breaks.
        #[source]
        error: BlockError,
    },
}

impl ServedBlocks {
    /// The synthetic blocks of `profile` (with its payload pool).
    pub fn generated(profile: Profile, pool: &'static Pool) -> ServedBlocks {
        ServedBlocks {
            source: Source::Generated { profile, pool },
            kept: Mutex::new(VecDeque::with_capacity(KEPT)),
            set: BTreeMap::new(),
        }
    }

    /// Blocks fetched from the node when asked for; `notify` wakes the task that does.
    pub fn upstream(notify: Arc<Wake>) -> ServedBlocks {
        ServedBlocks {
            source: Source::Upstream {
                wanted: Mutex::new(Wants::new()),
                missing: Mutex::new(VecDeque::new()),
                notify,
            },
            kept: Mutex::new(VecDeque::with_capacity(KEPT)),
            set: BTreeMap::new(),
        }
    }

    /// Answer `answer` when the block at `height` is asked for, from now on, in place of
    /// the source's block (whatever the chain at `height` later becomes).
    ///
    /// An extension point for programs built on this library that serve blocks of their
    /// own making (test gateways: a block that is not its header's, or one withheld); the
    /// gateway itself never calls it.
    pub fn set_answer(&mut self, height: u32, answer: BlockAnswer) {
        self.set.insert(height, answer);
    }

    /// A block to fetch from the node, if a live session waits for one (the lowest first).
    pub fn wanted(&self) -> Option<BlockHash> {
        self.wanted_within(|_, _| true)
    }

    /// The lowest block a live session waits for that `fetchable` takes (given its height
    /// and hash: the node leading has it on the served chain).
    pub fn wanted_within(&self, fetchable: impl Fn(u32, &BlockHash) -> bool) -> Option<BlockHash> {
        let Source::Upstream { wanted, .. } = &self.source else {
            return None;
        };
        let wanted = wanted.lock().ok()?;
        let found = wanted.items().find(|(h, hash)| fetchable(*h, hash));
        found.map(|(_, hash)| *hash)
    }

    /// Session `session` has ended: the block it waited for is no longer fetched for it
    /// (one already asked of the node arrives all the same, and is dropped unchecked if
    /// no other session waits for it).
    pub fn session_ended(&self, session: SessionId) {
        if let Source::Upstream { wanted, .. } = &self.source
            && let Ok(mut w) = wanted.lock()
        {
            w.session_ended(session);
        }
    }

    /// Nobody waits for block `hash` any more; its height, if somebody did.
    fn answered(&self, hash: &BlockHash) -> Option<u32> {
        let Source::Upstream { wanted, .. } = &self.source else {
            return None;
        };
        let mut w = wanted.lock().ok()?;
        let item = w.items().find(|(_, h)| h == hash).copied()?;
        w.answered(&item);
        Some(item.0)
    }

    /// The node's answer for block `hash`: checked (it must parse, hash to `hash`, and its
    /// transactions must make its header's Merkle root without a repeated pair) and kept,
    /// if a live session waits for it.
    pub fn insert(&self, hash: &BlockHash, block: &[u8]) -> Result<(), BlockFetchError> {
        let Some(height) = self.answered(hash) else {
            // Not asked for, answered already, or the sessions that asked have ended:
            // nobody to check it for.
            return Ok(());
        };
        if let Err(error) = Block::check(block, hash) {
            self.missing_block(hash);
            return Err(BlockFetchError::Mismatch { hash: *hash, error });
        }
        self.keep(height, Arc::from(block));
        Ok(())
    }

    /// The node does not have block `hash` (`notfound` from the node leading, for the
    /// block it was asked for): sessions asking for it get `not_found`, until another node
    /// leads ([`Self::forget_missing`]) or [`MISSING_KEPT`] newer ones push it out.
    pub fn missing_block(&self, hash: &BlockHash) {
        let _ = self.answered(hash);
        if let Source::Upstream { missing, .. } = &self.source
            && let Ok(mut m) = missing.lock()
            && !m.contains(hash)
        {
            if m.len() == MISSING_KEPT {
                m.pop_front();
            }
            m.push_back(*hash);
        }
    }

    /// Another node leads: what the one before said it lacks is asked of it.
    pub fn forget_missing(&self) {
        if let Source::Upstream { missing, .. } = &self.source
            && let Ok(mut m) = missing.lock()
        {
            m.clear();
        }
    }

    fn keep(&self, height: u32, block: Arc<[u8]>) {
        if let Ok(mut k) = self.kept.lock() {
            if k.len() == KEPT {
                k.pop_front();
            }
            k.push_back((height, block));
        }
    }

    /// The block at `height` whose header is `header`, lent to `read`.
    pub fn with_block<R>(
        &self,
        height: u32,
        header: Option<[u8; HEADER_LEN]>,
        read: impl FnOnce(&[u8]) -> R,
    ) -> FilterLookup<R> {
        self.with_block_for(SessionId::ANONYMOUS, height, header, read)
    }

    /// [`Self::with_block`] for session `session`: a block to fetch is fetched while it
    /// (or another session) waits for it.
    pub fn with_block_for<R>(
        &self,
        session: SessionId,
        height: u32,
        header: Option<[u8; HEADER_LEN]>,
        read: impl FnOnce(&[u8]) -> R,
    ) -> FilterLookup<R> {
        let Some(header) = header else {
            return FilterLookup::Missing;
        };
        match self.set.get(&height) {
            Some(BlockAnswer::Bytes(b)) => return FilterLookup::Ready(read(b)),
            Some(BlockAnswer::NotFound) => return FilterLookup::Missing,
            None => {}
        }
        let kept = self.kept.lock().ok().and_then(|k| {
            k.iter()
                .find(|(h, b)| *h == height && b.get(..HEADER_LEN) == Some(&header[..]))
                .map(|(_, b)| b.clone())
        });
        if let Some(b) = kept {
            return FilterLookup::Ready(read(&b));
        }
        match &self.source {
            Source::Generated { profile, pool } => {
                let mut out = Vec::new();
                // Generated chains are served on branch 0 (a reorg replaces the chain).
                SyntheticBlock::write_at(profile, pool, height, 0, &header, &mut out);
                let b = Arc::<[u8]>::from(out);
                self.keep(height, b.clone());
                FilterLookup::Ready(read(&b))
            }
            Source::Upstream {
                wanted,
                missing,
                notify,
            } => {
                let hash = hash_header_bytes(&header);
                if missing.lock().is_ok_and(|m| m.contains(&hash)) {
                    return FilterLookup::Missing;
                }
                if let Ok(mut w) = wanted.lock() {
                    w.want(session, (height, hash));
                }
                notify.wake();
                FilterLookup::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use lightwire_chain::synthetic::DEFAULT_PROFILE;

    use super::*;
    use crate::served::ServedChain;

    /// Every block served has its header's Merkle root, so a client can check it; a block
    /// from a node is kept only if it is the block of its hash.
    #[test]
    fn generated_blocks_match_their_headers() {
        let mut chain = ServedChain::generate(300, 1_700_000_000).unwrap();
        chain.serve_generated_filters(1 << 20);
        let chain = &chain;
        use lightwire_proto::Served;
        assert!(chain.serves_blocks());
        for height in [0, 1, 150, 300] {
            let header = chain.header(height).unwrap();
            let got = chain.with_block(height, |b| {
                let block = Block::parse(b).unwrap();
                (*block.header(), block.merkle_root())
            });
            let FilterLookup::Ready((h, (root, mutated))) = got else {
                panic!("block {height}");
            };
            assert_eq!(h, header);
            assert_eq!(&root[..], &header[36..68], "{height}");
            assert!(!mutated);
        }
        assert!(matches!(
            chain.with_block(301, |_| ()),
            FilterLookup::Missing
        ));

        // A chain carrying a payment: its block is the size asked for, matches its
        // header, pays the script, and the filter served holds it.
        let script = vec![
            0x00, 0x14, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9,
        ];
        let payment = lightwire_chain::synthetic::Payment {
            height: 150,
            script: script.clone(),
            value: 42_000,
        };
        let pool = Box::leak(Box::new(Pool::with_payments(
            &DEFAULT_PROFILE,
            [payment],
            200_000,
        )));
        let mut paying = ServedChain::generate_paying(300, 1_700_000_000, Some(pool)).unwrap();
        paying.serve_generated_filters(1 << 20);
        assert_eq!(
            paying.header(149),
            chain.header(149),
            "the same below the payment"
        );
        assert_ne!(paying.header(150), chain.header(150));
        let header = paying.header(150).unwrap();
        let FilterLookup::Ready((len, root, paid)) = paying.with_block(150, |b| {
            let block = Block::parse(b).unwrap();
            let paid = block
                .transactions()
                .flat_map(|t| {
                    t.outputs()
                        .map(|o| (o.value, o.script.to_vec()))
                        .collect::<Vec<_>>()
                })
                .any(|(v, s)| v == 42_000 && s == script);
            (b.len(), block.merkle_root(), paid)
        }) else {
            panic!("the paying block");
        };
        assert!((200_000..201_000).contains(&len), "{len}");
        assert_eq!((&root.0[..], root.1), (&header[36..68], false));
        assert!(paid);
        let hash = hash_header_bytes(&header);
        let FilterLookup::Ready(matched) = paying.with_filter(150, |f| {
            lightwire_filter::Matcher::default().match_any(f, &hash.0, [&script[..]])
        }) else {
            panic!("the paying block's filter");
        };
        assert_eq!(matched, Ok(true));

        // From a node: asked for, then kept if it is the block of that hash.
        let up = ServedBlocks::upstream(Arc::new(Wake::new()));
        let header = chain.header(150).unwrap();
        let hash = hash_header_bytes(&header);
        assert!(matches!(
            up.with_block(150, Some(header), |_| ()),
            FilterLookup::Pending
        ));
        assert_eq!(up.wanted(), Some(hash));
        let mut block = Vec::new();
        SyntheticBlock::write_at(
            &DEFAULT_PROFILE,
            Pool::default_pool(),
            150,
            0,
            &header,
            &mut block,
        );
        // Another block under that hash (its transactions changed): refused, and
        // sessions are told it is not found.
        let mut other = block.clone();
        let last = other.len() - 5;
        other[last] ^= 1;
        assert_eq!(
            up.insert(&hash, &other),
            Err(BlockFetchError::Mismatch {
                hash,
                error: BlockError::MerkleRootMismatch
            })
        );
        assert!(matches!(
            up.with_block(150, Some(header), |_| ()),
            FilterLookup::Missing
        ));
        // Another block whole (the one at 151, its own header): not the block of that
        // hash, however well its transactions match its own header.
        let up = ServedBlocks::upstream(Arc::new(Wake::new()));
        let _ = up.with_block(150, Some(header), |_| ());
        let next = chain.header(151).unwrap();
        let mut wrong = Vec::new();
        SyntheticBlock::write_at(
            &DEFAULT_PROFILE,
            Pool::default_pool(),
            151,
            0,
            &next,
            &mut wrong,
        );
        assert_eq!(
            up.insert(&hash, &wrong),
            Err(BlockFetchError::Mismatch {
                hash,
                error: BlockError::HashMismatch {
                    expected: hash,
                    got: hash_header_bytes(&next)
                }
            })
        );
        let up = ServedBlocks::upstream(Arc::new(Wake::new()));
        let _ = up.with_block(150, Some(header), |_| ());
        assert_eq!(up.insert(&hash, &block), Ok(()));
        assert_eq!(up.wanted(), None);
        assert!(matches!(
            up.with_block(150, Some(header), |b| b == &block[..]),
            FilterLookup::Ready(true)
        ));
    }

    /// A block is fetched while a live session waits for it: sessions that asked and went
    /// away (connect, ask for a block, disconnect) leave nothing to fetch, and the one
    /// still waiting is the next fetched; a session waits for one block at a time.
    #[test]
    fn block_fetches_end_with_the_sessions_that_asked() {
        let chain = ServedChain::generate(100, 1_700_000_000).unwrap();
        let header = |h| lightwire_proto::Served::header(&chain, h);
        let hash = |h| hash_header_bytes(&header(h).unwrap());
        let up = ServedBlocks::upstream(Arc::new(Wake::new()));
        for s in 1..=20u32 {
            let asked = up.with_block_for(SessionId(s.into()), s, header(s), |_| ());
            assert_eq!(asked, FilterLookup::Pending);
        }
        for s in 1..=20u32 {
            up.session_ended(SessionId(s.into()));
        }
        assert_eq!(up.wanted(), None, "nobody waits");
        for s in [99, 100] {
            let _ = up.with_block_for(SessionId(s), 77, header(77), |_| ());
        }
        up.session_ended(SessionId(99));
        assert_eq!(up.wanted(), Some(hash(77)), "one still waits");
        let _ = up.with_block_for(SessionId(100), 78, header(78), |_| ());
        assert_eq!(up.wanted(), Some(hash(78)), "it moved on to another");
        up.session_ended(SessionId(100));
        assert_eq!(up.wanted(), None);
    }

    /// What nodes said they lack is remembered boundedly: a flood of hashes said missing
    /// pushes the oldest out (that block is asked for again), it does not grow memory.
    #[test]
    fn what_nodes_lack_is_remembered_boundedly() {
        let chain = ServedChain::generate(10, 1_700_000_000).unwrap();
        let header = lightwire_proto::Served::header(&chain, 5);
        let hash = hash_header_bytes(&header.unwrap());
        let up = ServedBlocks::upstream(Arc::new(Wake::new()));
        let _ = up.with_block(5, header, |_| ());
        up.missing_block(&hash);
        assert_eq!(up.with_block(5, header, |_| ()), FilterLookup::Missing);
        for i in 0..10_000u32 {
            let mut other = [0u8; 32];
            other[..4].copy_from_slice(&i.to_le_bytes());
            up.missing_block(&BlockHash(other));
        }
        assert_eq!(
            up.with_block(5, header, |_| ()),
            FilterLookup::Pending,
            "forgotten, and asked for again"
        );
    }

    /// An answer set by the program is what is served for that height, and only there.
    #[test]
    fn a_set_answer_replaces_the_block_at_its_height() {
        let mut chain = ServedChain::generate(20, 1_700_000_000).unwrap();
        chain.serve_generated_filters(1 << 20);
        let bytes: Arc<[u8]> = Arc::from(&[1u8, 2, 3][..]);
        let blocks = chain.blocks_mut().unwrap();
        blocks.set_answer(5, BlockAnswer::Bytes(bytes.clone()));
        blocks.set_answer(6, BlockAnswer::NotFound);
        use lightwire_proto::Served;
        assert_eq!(
            chain.with_block(5, <[u8]>::to_vec),
            FilterLookup::Ready(bytes.to_vec())
        );
        assert_eq!(chain.with_block(6, |_| ()), FilterLookup::Missing);
        let header = chain.header(7).unwrap();
        assert_eq!(
            chain.with_block(7, |b| b.get(..HEADER_LEN) == Some(&header[..])),
            FilterLookup::Ready(true)
        );
    }
}
