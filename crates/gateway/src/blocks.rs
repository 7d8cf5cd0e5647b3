//! The blocks a gateway serves (`get_block`). For a generated chain they are
//! `lightwire-chain`'s synthetic blocks, produced on demand from the height (the genesis
//! block is the real one), so a client can fetch a block its filter matched, or that
//! settles which gateway's filter is wrong, and check it against the header's Merkle root
//! exactly as on a real chain. The last few are kept: a session reads the block it sends
//! once per piece.
//!
//! Not built yet: blocks of a chain followed from a node (`getdata` for the witness block
//! over P2P). Such a gateway does not offer the `blocks` feature bit.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use lightwire_chain::HEADER_LEN;
use lightwire_chain::synthetic::{Pool, Profile, SyntheticBlock};
use lightwire_proto::session::FilterLookup;

/// Blocks kept after they were produced: one per session sending a block at the same time
/// is enough to produce each once.
const KEPT: usize = 8;

/// The blocks of a generated chain.
pub struct ServedBlocks {
    profile: Profile,
    pool: &'static Pool,
    kept: Mutex<VecDeque<(u32, Arc<[u8]>)>>,
}

impl ServedBlocks {
    /// The synthetic blocks of `profile` (with its payload pool).
    pub fn generated(profile: Profile, pool: &'static Pool) -> ServedBlocks {
        ServedBlocks {
            profile,
            pool,
            kept: Mutex::new(VecDeque::with_capacity(KEPT)),
        }
    }

    /// The block at `height` whose header is `header`, lent to `read`.
    pub fn with_block<R>(
        &self,
        height: u32,
        header: Option<[u8; HEADER_LEN]>,
        read: impl FnOnce(&[u8]) -> R,
    ) -> FilterLookup<R> {
        let Some(header) = header else {
            return FilterLookup::Missing;
        };
        let kept = self.kept.lock().ok().and_then(|k| {
            k.iter()
                .find(|(h, b)| *h == height && b.get(..HEADER_LEN) == Some(&header[..]))
                .map(|(_, b)| b.clone())
        });
        let block = match kept {
            Some(b) => b,
            None => {
                let mut out = Vec::new();
                // Generated chains are served on branch 0 (a reorg replaces the chain).
                SyntheticBlock::write_at(&self.profile, self.pool, height, 0, &header, &mut out);
                let b = Arc::<[u8]>::from(out);
                if let Ok(mut k) = self.kept.lock() {
                    if k.len() == KEPT {
                        k.pop_front();
                    }
                    k.push_back((height, b.clone()));
                }
                b
            }
        };
        FilterLookup::Ready(read(&block))
    }
}

#[cfg(test)]
mod tests {
    use lightwire_chain::synthetic::DEFAULT_PROFILE;
    use lightwire_filter::Block;

    use super::*;
    use crate::served::ServedChain;

    /// Every block served has its header's Merkle root, so a client can check it.
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
        // The payload pool is only built for heavy chains; the profile is the default's.
        let _ = DEFAULT_PROFILE;
    }
}
