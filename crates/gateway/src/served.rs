//! The chain a gateway serves: every header of its best chain in memory, validated with
//! `lightwire-chain` before it is served, and a hash -> height index for locators.

use core::fmt;
use std::collections::HashMap;

use lightwire_chain::generate::next_header;
use lightwire_chain::{
    BlockHash, Chain, ConnectError, Entry, HEADER_LEN, Header, MAX_BATCH, Network, Outcome, Params,
    REGTEST,
};

/// Why a header source was refused.
#[derive(Debug)]
pub enum SourceError {
    /// The file could not be read.
    Io(String),
    /// The file is not whole 80-byte headers, or is empty.
    NotHeaders {
        /// Its length.
        len: usize,
    },
    /// The first header is not the network's genesis (and no `--from-height` was given).
    NotGenesis {
        /// The network.
        network: Network,
    },
    /// A header failed validation (the height and rule are in the error).
    Invalid(ConnectError),
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceError::Io(e) => write!(f, "reading headers: {e}"),
            SourceError::NotHeaders { len } => {
                write!(
                    f,
                    "{len} bytes is not a whole, non-zero number of 80-byte headers"
                )
            }
            SourceError::NotGenesis { network } => write!(
                f,
                "the first header is not {network}'s genesis (use --from-height for a file that starts later)"
            ),
            SourceError::Invalid(e) => write!(f, "invalid header: {e}"),
        }
    }
}

impl std::error::Error for SourceError {}

/// The tip as announced in `tip` messages.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TipInfo {
    /// Height.
    pub height: u32,
    /// The header, encoded.
    pub header: [u8; HEADER_LEN],
    /// Cumulative work, big-endian (from the first header served, for a chain that starts
    /// at a trusted height).
    pub chainwork: [u8; 32],
}

/// A validated chain held in memory. Shared by every connection (it is `Sync`); the
/// validation state that built it is not kept here.
pub struct ServedChain {
    params: &'static Params,
    /// Height of `headers[0]`.
    base: u32,
    headers: Vec<[u8; HEADER_LEN]>,
    index: HashMap<BlockHash, u32>,
    tip: TipInfo,
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
            Outcome::Extended { .. } => {
                for e in self.chain.staged() {
                    self.served.headers.push(e.header.encode());
                    self.served.index.insert(e.hash, e.height);
                }
                self.served.tip = tip_info(self.chain.tip());
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
    /// The deterministic regtest chain of `count` headers (`lightwire-chain generate`).
    pub fn generate(count: u32, now: u64) -> Result<ServedChain, SourceError> {
        let mut served = Builder::starting_at(&REGTEST, genesis_entry(&REGTEST));
        served.served.headers.reserve(count as usize);
        served.served.index.reserve(count as usize);
        let mut batch = Vec::with_capacity(MAX_BATCH);
        let (mut prev, mut prev_hash) = (REGTEST.genesis, REGTEST.genesis.block_hash());
        let mut height = 0;
        while height < count {
            batch.clear();
            while height < count && batch.len() < MAX_BATCH {
                height += 1;
                let h = next_header(&REGTEST, &prev, prev_hash, height, 0);
                prev_hash = h.block_hash();
                prev = h;
                batch.push(h);
            }
            served.extend(&batch, now)?;
        }
        Ok(served.served)
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

    /// Where an answer to `locator` starts: after the first hash on this chain, else
    /// after the first header held.
    pub fn start_after<'a>(&self, locator: impl Iterator<Item = &'a [u8; 32]>) -> u32 {
        for hash in locator {
            if let Some(h) = self.height_of(&BlockHash(*hash)) {
                return h + 1;
            }
        }
        self.base + 1
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
}
