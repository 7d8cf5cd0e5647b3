//! Checkpoint starts: a new store that begins at a trusted header at the first height of a
//! difficulty period instead of at genesis, so that a new wallet does not wait for 2009.
//!
//! What such a start trusts: that its header is on the chain with the most work, and its
//! chainwork. Everything after it is validated by the same rules as from genesis, the
//! first retarget included (exactly: the period starts at the checkpoint, so its first
//! header's time is known), with one exception: the median-time-past rule needs the 11
//! headers before each header, so the first 10 after the checkpoint are not checked
//! against it. Headers below the checkpoint are never fetched, stored or checked, and a
//! gateway whose chain does not contain it is dropped (`off-checkpoint`).

use lightwire_chain::{BlockHash, Header, Network, Params, U256, Work};
use lightwire_store::{Start, StoreError};

/// A built-in start: height, the header (consensus hex) and the chainwork (big-endian hex)
/// up to and including it.
struct Builtin {
    network: Network,
    height: u32,
    header: &'static str,
    chainwork: &'static str,
}

/// The built-in starts. Mainnet's is the last retarget-boundary header of
/// `../shared/data/checkpoints/mainnet_checkpoints_from_bitcoinj.csv` (block
/// 00000000000000000002819359a9af460f342404bec23e7478512a619584083b). The shared data holds
/// no testnet4 or signet header past their first period, so those networks have none yet
/// (`start: 'checkpoint'` is refused for them).
const BUILTIN: &[Builtin] = &[Builtin {
    network: Network::Mainnet,
    height: 878_976,
    header: "0080cb2a84fa5fcdb3c448a0dc7f38c6a7e55f1261fcec2f0b6d00000000000000000000a2282f81592e007e389fa35ed4a9f5559c2ebf12fa76b54f0316668dcba6d961af1f8467618c02178c74d981",
    chainwork: "0000000000000000000000000000000000000000a6e78db05939f5b7a956f47b",
}];

/// Why a start was refused.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum StartError {
    /// The network has no built-in start.
    #[error("there is no built-in checkpoint for {0}")]
    NoBuiltin(Network),
    /// `header` is not 160 hex digits.
    #[error("the header must be 160 hex digits (its 80-byte encoding)")]
    Header,
    /// `chainwork` is not up to 64 hex digits.
    #[error("the chainwork must be hex, at most 64 digits (big-endian, as Bitcoin Core prints it)")]
    Chainwork,
    /// The header's hash is not the `hash` given with it.
    #[error("the header's hash is {got}, not the {expected} given")]
    HashMismatch {
        /// The hash given.
        expected: BlockHash,
        /// The header's.
        got: BlockHash,
    },
    /// The header does not meet its own target.
    #[error("the header does not meet the proof of work of its own nBits")]
    ProofOfWork,
    /// The store cannot start there.
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// The built-in start of `network`.
pub fn builtin(network: Network) -> Result<Start, StartError> {
    let b = BUILTIN
        .iter()
        .find(|b| b.network == network)
        .ok_or(StartError::NoBuiltin(network))?;
    parse(network.params(), b.height, b.header, b.chainwork, None)
}

/// A start the application gives: `height`, the header's consensus encoding in hex, the
/// chainwork up to it (hex, big-endian, as Bitcoin Core's `getblockheader` prints it), and
/// optionally the block hash (display hex) to check the header against. Checked: the
/// height is a period's first, the header meets its own target, the chainwork exceeds the
/// header's own work.
pub fn parse(
    params: &Params,
    height: u32,
    header_hex: &str,
    chainwork_hex: &str,
    hash: Option<BlockHash>,
) -> Result<Start, StartError> {
    let mut raw = [0u8; 80];
    hex::decode_to_slice(header_hex, &mut raw).map_err(|_| StartError::Header)?;
    let header = Header::decode(&raw);
    if chainwork_hex.is_empty() || chainwork_hex.len() > 64 {
        return Err(StartError::Chainwork);
    }
    let padded = format!("{chainwork_hex:0>64}");
    let mut work = [0u8; 32];
    hex::decode_to_slice(&padded, &mut work).map_err(|_| StartError::Chainwork)?;
    let got = header.block_hash();
    if let Some(expected) = hash
        && expected != got
    {
        return Err(StartError::HashMismatch { expected, got });
    }
    let meets = header
        .bits
        .to_target()
        .is_ok_and(|t| t <= params.pow_limit() && t.is_met_by(&got));
    if !meets {
        return Err(StartError::ProofOfWork);
    }
    let start = Start {
        height,
        header,
        chainwork: Work(U256::from_be_bytes(&work)),
    };
    start.check(params)?;
    Ok(start)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use lightwire_chain::{MAINNET, REGTEST};

    use super::*;

    #[test]
    fn the_mainnet_start_is_the_csv_line_and_holds_together() {
        let s = builtin(Network::Mainnet).unwrap();
        assert_eq!(s.height, 878_976);
        assert_eq!(
            s.header.block_hash().to_string(),
            "00000000000000000002819359a9af460f342404bec23e7478512a619584083b"
        );
        assert!(
            s.chainwork > MAINNET.min_chain_work(),
            "past Core's minimum chain work"
        );
        assert_eq!(
            builtin(Network::Signet),
            Err(StartError::NoBuiltin(Network::Signet))
        );
    }

    #[test]
    fn an_app_start_is_checked() {
        let g = lightwire_chain::generate::headers_after(&REGTEST, &REGTEST.genesis, 0, 4032, 0);
        let h = hex::encode(g[2015].encode()); // height 2016
        let ok = parse(&REGTEST, 2016, &h, "fc2", Some(g[2015].block_hash())).unwrap();
        assert_eq!(ok.height, 2016);
        assert_eq!(ok.chainwork, Work(U256::from_u64(0xfc2)));
        assert_eq!(
            parse(&REGTEST, 2017, &h, "fc2", None),
            Err(StartError::Store(StoreError::BadStart {
                what: "not the first height of a difficulty period"
            }))
        );
        assert_eq!(
            parse(&REGTEST, 2016, &h[2..], "fc2", None),
            Err(StartError::Header)
        );
        assert_eq!(
            parse(&REGTEST, 2016, &h, "xyz", None),
            Err(StartError::Chainwork)
        );
        assert_eq!(
            parse(&REGTEST, 2016, &h, &"1".repeat(65), None),
            Err(StartError::Chainwork)
        );
        assert!(matches!(
            parse(&REGTEST, 2016, &h, "fc2", Some(g[0].block_hash())),
            Err(StartError::HashMismatch { .. })
        ));
        // The chainwork must exceed the header's own work (2 on regtest).
        assert!(matches!(
            parse(&REGTEST, 2016, &h, "2", None),
            Err(StartError::Store(StoreError::BadStart { .. }))
        ));
        // A header that does not meet its target: the mainnet start's with another nonce
        // (regtest's targets are met by half of all hashes).
        let main = builtin(Network::Mainnet).unwrap();
        let mut bad = main.header;
        bad.nonce ^= 1;
        let bad_hex = hex::encode(bad.encode());
        assert_eq!(
            parse(
                &MAINNET,
                878_976,
                &bad_hex,
                "a6e78db05939f5b7a956f47b",
                None
            ),
            Err(StartError::ProofOfWork)
        );
    }
}
