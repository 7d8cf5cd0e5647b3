//! For tests (this crate's, and others' with the `test-util` feature): a served chain held
//! in memory, generated on regtest, that can be reorganised on demand.

use std::collections::HashMap;

use lightwire_chain::generate::headers_after;
use lightwire_chain::{BlockHash, HEADER_LEN, Header, REGTEST, U256};

use crate::session::{Served, ServedTip};

/// Headers from regtest's genesis, indexed by hash.
pub struct TestChain {
    headers: Vec<Header>,
    index: HashMap<BlockHash, u32>,
    reorgs: u64,
}

impl TestChain {
    /// Genesis and `count` generated headers after it (tip at height `count`).
    pub fn generate(count: u32) -> TestChain {
        let mut chain = TestChain {
            headers: vec![REGTEST.genesis],
            index: HashMap::new(),
            reorgs: 0,
        };
        chain.index.insert(REGTEST.genesis.block_hash(), 0);
        chain.extend(headers_after(&REGTEST, &REGTEST.genesis, 0, count, 0));
        chain
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
        let parent = self.header(fork);
        self.extend(headers_after(&REGTEST, &parent, fork, len, branch));
        self.reorgs += 1;
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

    fn extend(&mut self, headers: Vec<Header>) {
        for h in headers {
            self.index.insert(h.block_hash(), self.headers.len() as u32);
            self.headers.push(h);
        }
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
}
