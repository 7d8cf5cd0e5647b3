//! The blocks the wallets' scan matched, fetched one at a time whatever number of wallets
//! wants each, sans-IO: a queue in height order, each entry marked with the wallets it is
//! for ([`WalletSet`]), the request in flight, its pieces put together, and the gateways
//! that failed the block at the front.
//!
//! A block is fetched once and handed to every wallet its entry names (each applies it to
//! its own ledger, in its own height order); a wallet that withdraws from a height takes
//! its mark off the entries from there, and an entry no wallet is left on goes (its
//! request given up if in flight). The rules a gateway's answer must keep are the
//! wallet's ([`super::WalletError`]): the block is checked against the stored header's
//! hash and Merkle root before any wallet sees it.

use std::collections::VecDeque;

use lightwire_chain::BlockHash;
use lightwire_primitives::Block;
use lightwire_wire::{BlockPiece, MAX_BLOCK_LEN};

use super::{NotFound, WalletError};
use crate::ids::{GatewayId, GivenUp, Ids, TaskId};

/// The most wallets one engine keeps (a bit each in a [`WalletSet`]).
pub const MAX_WALLETS: usize = 64;

/// A wallet's number in the engine: its bit in a [`WalletSet`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct WalletId(u8);

impl WalletId {
    /// The default wallet's (the one the calls without a wallet name are for).
    pub const DEFAULT: WalletId = WalletId(0);

    /// The id of number `n`, if below [`MAX_WALLETS`].
    pub const fn new(n: usize) -> Option<WalletId> {
        if n < MAX_WALLETS {
            Some(WalletId(n as u8))
        } else {
            None
        }
    }

    /// Its number.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    /// Its owner bit in the scan (the scan's owners are the wallets' ids).
    pub fn owner(self) -> crate::scan::Owners {
        1 << self.0
    }
}

/// Some of the engine's wallets, a bit each.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
pub struct WalletSet(u64);

impl WalletSet {
    /// No wallet.
    pub const NONE: WalletSet = WalletSet(0);

    /// The wallets a scan's owners name (a scan's owner bits are the wallets' ids).
    pub fn from_owners(owners: crate::scan::Owners) -> WalletSet {
        WalletSet(owners)
    }

    /// Wallet `w` alone.
    pub fn of(w: WalletId) -> WalletSet {
        WalletSet(1 << w.0)
    }

    /// Whether it holds `w`.
    pub fn has(self, w: WalletId) -> bool {
        self.0 & (1 << w.0) != 0
    }

    /// Whether it holds none.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Both sets' wallets.
    pub fn with(self, other: WalletSet) -> WalletSet {
        WalletSet(self.0 | other.0)
    }

    /// Its wallets but `w`.
    pub fn without(self, w: WalletId) -> WalletSet {
        WalletSet(self.0 & !(1 << w.0))
    }

    /// Its wallets, lowest first.
    pub fn iter(self) -> impl Iterator<Item = WalletId> {
        (0..MAX_WALLETS as u8)
            .filter(move |i| self.0 & (1 << i) != 0)
            .map(WalletId)
    }
}

/// A block the scan matched, to fetch and apply.
#[derive(Clone, Copy, Debug)]
struct Queued {
    height: u32,
    hash: BlockHash,
    /// The gateway whose filter matched it, when known (not for a match restored from the
    /// store): it vouched for the block.
    voucher: Option<GatewayId>,
    /// The wallets it is for.
    wallets: WalletSet,
}

#[derive(Debug)]
struct Fetch {
    gateway: GatewayId,
    id: u32,
    height: u32,
    hash: BlockHash,
    len: Option<u32>,
}

/// What one piece of a block did (see [`Blocks::on_piece`]).
#[derive(Debug)]
pub enum Fetched<'a> {
    /// Taken; more is to come.
    More,
    /// The block at `height` is whole and checked against its header: each wallet of
    /// `wallets` applies it.
    Whole {
        /// Its height.
        height: u32,
        /// The block, parsed.
        block: lightwire_primitives::CheckedBlock<'a>,
        /// The wallets it is for.
        wallets: WalletSet,
    },
    /// The gateway answered `not_found`: the block is asked of another.
    NotFound(NotFound),
}

/// The queue of matched blocks and the one request in flight (see the module
/// documentation).
#[derive(Debug)]
pub struct Blocks {
    queue: VecDeque<Queued>,
    fetch: Option<Fetch>,
    buf: Vec<u8>,
    /// Gateways that failed the block at the front of the queue (`tried_for`).
    tried: Vec<GatewayId>,
    tried_for: Option<BlockHash>,
    ids: Ids,
}

impl Default for Blocks {
    fn default() -> Blocks {
        Blocks {
            queue: VecDeque::new(),
            fetch: None,
            buf: Vec::new(),
            tried: Vec::new(),
            tried_for: None,
            ids: Ids::new(TaskId::Wallet),
        }
    }
}

impl Blocks {
    /// Block `hash` at `height` is to be fetched for `wallets`, by a filter `voucher`
    /// served (when known). Returns the request given up, if one was (a block below the
    /// one in flight must come first).
    pub fn matched(
        &mut self,
        height: u32,
        hash: BlockHash,
        voucher: Option<GatewayId>,
        wallets: WalletSet,
    ) -> Option<GivenUp> {
        if wallets.is_empty() {
            return None;
        }
        // In height order, once (a scan that went back for new scripts matches again).
        let at = self.queue.partition_point(|q| q.height < height);
        if let Some(q) = self.queue.get_mut(at).filter(|q| q.height == height) {
            if q.hash == hash {
                q.voucher = q.voucher.or(voucher);
                q.wallets = q.wallets.with(wallets);
            }
            return None;
        }
        self.queue.insert(
            at,
            Queued {
                height,
                hash,
                voucher,
                wallets,
            },
        );
        if at == 0 {
            // Below the block in flight: that one is applied after this, so ask again.
            return self.abandon_fetch();
        }
        None
    }

    /// Blocks matched and not applied yet.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Blocks matched for wallet `w` and not applied yet.
    pub fn pending_for(&self, w: WalletId) -> usize {
        self.queue.iter().filter(|q| q.wallets.has(w)).count()
    }

    /// The next block to ask for, if none is in flight: its request id and hash. `pick`
    /// chooses among the gateways (it is told which failed this block already).
    pub fn next_fetch(
        &mut self,
        pick: impl FnOnce(&[GatewayId]) -> Option<GatewayId>,
    ) -> Option<(GatewayId, u32, BlockHash)> {
        if self.fetch.is_some() {
            return None;
        }
        let &Queued { height, hash, .. } = self.queue.front()?;
        if self.tried_for != Some(hash) {
            // Another block at the front (one below came, or a reorganisation): every
            // gateway may be asked for it.
            self.tried.clear();
            self.tried_for = Some(hash);
        }
        let gateway = pick(&self.tried)?;
        let id = self.ids.next_id();
        self.fetch = Some(Fetch {
            gateway,
            id,
            height,
            hash,
            len: None,
        });
        self.buf.clear();
        Some((gateway, id, hash))
    }

    /// The block at the front of the queue (the next to apply): its height, if any.
    pub fn front(&self) -> Option<u32> {
        self.queue.front().map(|q| q.height)
    }

    /// How many gateways failed the block at the front (said `not_found`, or sent
    /// another block).
    pub fn tried_count(&self) -> usize {
        self.tried.len()
    }

    /// The gateway a block request is in flight to, and its id.
    pub fn asked(&self) -> Option<GivenUp> {
        self.fetch.as_ref().map(|f| (f.gateway, f.id))
    }

    /// Whether the block at the front waits for a gateway none of whose connected ones
    /// are left untried: every one asked said `not_found` (or failed it).
    pub fn all_tried(&self) -> bool {
        self.fetch.is_none() && !self.queue.is_empty() && !self.tried.is_empty()
    }

    /// Every gateway may be asked for the block at the front again.
    pub fn try_again(&mut self) {
        self.tried.clear();
    }

    /// One piece of the block in flight. When the block is whole and checks, it leaves
    /// the queue and is handed over ([`Fetched::Whole`]).
    pub fn on_piece(&mut self, p: &BlockPiece<'_>) -> Result<Fetched<'_>, WalletError> {
        let Some(f) = self.fetch.as_mut() else {
            return Ok(Fetched::More);
        };
        let height = f.height;
        if p.not_found {
            let gateway = f.gateway;
            self.fetch = None;
            self.tried.push(gateway);
            let vouched = self
                .queue
                .front()
                .is_some_and(|q| q.height == height && q.voucher == Some(gateway));
            return Ok(Fetched::NotFound(NotFound {
                gateway,
                height,
                vouched,
            }));
        }
        if p.block_len > MAX_BLOCK_LEN
            || f.len.is_some_and(|l| l != p.block_len)
            || p.offset as usize != self.buf.len()
        {
            self.give_up_fetch();
            return Err(WalletError::OutOfOrder { height });
        }
        if f.len.is_none() {
            self.buf.reserve_exact(p.block_len as usize);
        }
        f.len = Some(p.block_len);
        self.buf.extend_from_slice(p.data);
        if !p.last {
            return Ok(Fetched::More);
        }
        let (gateway, hash) = (f.gateway, f.hash);
        self.fetch = None;
        // Parsed once: checked against the header, then applied by each wallet.
        let block = match Block::check(&self.buf, &hash) {
            Ok(block) => block,
            Err(error) => {
                self.tried.push(gateway);
                return Err(WalletError::BlockMismatch { height, error });
            }
        };
        let wallets = self
            .queue
            .pop_front()
            .map_or(WalletSet::NONE, |q| q.wallets);
        self.tried.clear();
        self.tried_for = None;
        Ok(Fetched::Whole {
            height,
            block,
            wallets,
        })
    }

    fn give_up_fetch(&mut self) {
        if let Some(f) = self.fetch.take() {
            self.tried.push(f.gateway);
        }
    }

    /// The gateway `g` is gone: a block asked of it is asked again (of another first).
    pub fn gateway_gone(&mut self, g: GatewayId) {
        if self.fetch.as_ref().is_some_and(|f| f.gateway == g) {
            self.fetch = None;
        }
        self.tried.retain(|&t| t != g);
    }

    /// A gateway that failed a block is gone for good (marked bad): others are tried.
    pub fn abandon_fetch(&mut self) -> Option<GivenUp> {
        self.fetch.take().map(|f| (f.gateway, f.id))
    }

    /// Wallet `w` no longer wants the blocks from `first` on (it withdrew from there, or
    /// is gone): an entry no other wallet wants goes. Returns the request given up, if
    /// its block went.
    pub fn withdraw(&mut self, w: WalletId, first: u32) -> Option<GivenUp> {
        for q in self.queue.iter_mut().filter(|q| q.height >= first) {
            q.wallets = q.wallets.without(w);
        }
        self.drop_unwanted()
    }

    /// No wallet wants the blocks from `first` on (a reorganisation): they go. Returns the
    /// request given up, if one was.
    pub fn withdraw_all(&mut self, first: u32) -> Option<GivenUp> {
        for q in self.queue.iter_mut().filter(|q| q.height >= first) {
            q.wallets = WalletSet::NONE;
        }
        self.drop_unwanted()
    }

    fn drop_unwanted(&mut self) -> Option<GivenUp> {
        self.queue.retain(|q| !q.wallets.is_empty());
        match &self.fetch {
            Some(f)
                if !self
                    .queue
                    .iter()
                    .any(|q| q.height == f.height && q.hash == f.hash) =>
            {
                self.abandon_fetch()
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn id(n: usize) -> WalletId {
        WalletId::new(n).unwrap()
    }

    fn hash(n: u8) -> BlockHash {
        BlockHash([n; 32])
    }

    /// Two wallets match the same block: one entry, marked with both, fetched once. A
    /// block matched below the one in flight goes first, the request in flight given up.
    #[test]
    fn a_block_two_wallets_want_is_queued_once_for_both() {
        let mut b = Blocks::default();
        assert_eq!(b.matched(150, hash(1), None, WalletSet::of(id(0))), None);
        assert_eq!(
            b.matched(150, hash(1), Some(GatewayId(2)), WalletSet::of(id(3))),
            None
        );
        assert_eq!(b.pending(), 1);
        assert_eq!(
            (
                b.pending_for(id(0)),
                b.pending_for(id(3)),
                b.pending_for(id(1))
            ),
            (1, 1, 0)
        );
        let (g, asked, _) = b.next_fetch(|_| Some(GatewayId(0))).unwrap();
        assert_eq!(b.next_fetch(|_| Some(GatewayId(0))), None, "one at a time");
        assert_eq!(
            b.matched(120, hash(2), None, WalletSet::of(id(0))),
            Some((g, asked)),
            "a block below goes first"
        );
        assert_eq!(b.front(), Some(120));
        assert_eq!(b.matched(10, hash(3), None, WalletSet::NONE), None);
        assert_eq!(b.pending(), 2, "a block no wallet wants is not queued");
    }

    /// One wallet withdrawing from a height leaves the blocks another still wants, and
    /// their request in flight; the last wallet withdrawing takes the block away, and its
    /// request is given up. A reorganisation takes every wallet's.
    #[test]
    fn a_withdrawal_keeps_what_another_wallet_wants() {
        let mut b = Blocks::default();
        let both = WalletSet::of(id(0)).with(WalletSet::of(id(1)));
        b.matched(150, hash(1), None, both);
        b.matched(160, hash(2), None, WalletSet::of(id(1)));
        let (g, asked, _) = b.next_fetch(|_| Some(GatewayId(0))).unwrap();
        assert_eq!(b.withdraw(id(1), 155), None);
        assert_eq!(b.pending(), 1, "160 was wallet 1's alone");
        assert_eq!(
            b.withdraw(id(1), 0),
            None,
            "150 is still wallet 0's, in flight"
        );
        assert_eq!(b.asked(), Some((g, asked)));
        assert_eq!(b.withdraw(id(0), 150), Some((g, asked)));
        assert_eq!((b.pending(), b.asked()), (0, None));
        b.matched(170, hash(3), None, both);
        b.matched(180, hash(4), None, both);
        assert_eq!(b.withdraw_all(175), None);
        assert_eq!((b.pending(), b.front()), (1, Some(170)));
    }

    /// A whole block is handed over with the wallets its entry names, and leaves the
    /// queue; one that is not the block of its header is a rule broken, handed to nobody.
    #[test]
    fn a_whole_block_goes_to_the_wallets_that_want_it() {
        // A block of one coinbase: its Merkle root is its txid.
        let mut tx = vec![1, 0, 0, 0, 1];
        tx.extend_from_slice(&[0; 32]);
        tx.extend_from_slice(&u32::MAX.to_le_bytes());
        tx.extend_from_slice(&[1, 0x51, 0xff, 0xff, 0xff, 0xff, 0]);
        tx.extend_from_slice(&[0; 4]);
        let mut block = vec![0u8; 80];
        block.push(1);
        block.extend_from_slice(&tx);
        let (root, _) = Block::parse(&block).unwrap().merkle_root();
        block[36..68].copy_from_slice(&root);
        let good = BlockHash::of_header(block[..80].try_into().unwrap());
        let mut b = Blocks::default();
        let two = WalletSet::of(id(2)).with(WalletSet::of(id(5)));
        b.matched(7, good, None, two);
        let piece = |id| BlockPiece {
            id,
            last: true,
            not_found: false,
            block_len: block.len() as u32,
            offset: 0,
            data: &block,
        };
        let (_, asked, _) = b.next_fetch(|_| Some(GatewayId(0))).unwrap();
        match b.on_piece(&piece(asked)).unwrap() {
            Fetched::Whole {
                height, wallets, ..
            } => {
                assert_eq!(height, 7);
                assert_eq!(wallets.iter().collect::<Vec<_>>(), [id(2), id(5)]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(b.pending(), 0);
        b.matched(8, hash(9), None, two);
        let (_, asked, _) = b.next_fetch(|_| Some(GatewayId(1))).unwrap();
        assert!(matches!(
            b.on_piece(&piece(asked)),
            Err(WalletError::BlockMismatch { height: 8, .. })
        ));
        assert_eq!(
            (b.pending(), b.tried_count()),
            (1, 1),
            "kept, asked of another"
        );
    }
}
