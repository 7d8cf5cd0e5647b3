//! Consensus parameters of each network that matter to headers.

use core::fmt;
use core::str::FromStr;

use crate::header::{BlockHash, Header};
use crate::target::{CompactTarget, Target, Work};
use crate::uint::U256;

/// A Bitcoin network.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum Network {
    /// Bitcoin mainnet.
    Mainnet,
    /// The old test network (testnet3), with the 20-minute minimum-difficulty rule.
    Testnet3,
    /// testnet4 (BIP94): minimum-difficulty rule and the timewarp fix.
    Testnet4,
    /// The default signet (blocks signed by a federation; headers validate like mainnet).
    Signet,
    /// Regression test: trivial proof of work, no retargeting.
    Regtest,
}

impl Network {
    /// All networks.
    pub const ALL: [Network; 5] = [
        Network::Mainnet,
        Network::Testnet3,
        Network::Testnet4,
        Network::Signet,
        Network::Regtest,
    ];

    /// The first height whose silent-payment tweaks (BIP352) the tweak-header chain holds
    /// (docs/PROTOCOL.md, "Silent-payment tweaks"): on mainnet taproot's activation
    /// (BIP341's deployment, block 709,632), before which no wallet could send one; every
    /// block below it has, by definition, no tweaks. Elsewhere 0: every block is computed.
    pub const fn tweaks_from(self) -> u32 {
        match self {
            Network::Mainnet => 709_632,
            Network::Testnet3 | Network::Testnet4 | Network::Signet | Network::Regtest => 0,
        }
    }

    /// The name used on command lines and in the client's options.
    pub fn name(&self) -> &'static str {
        match self {
            Network::Mainnet => "mainnet",
            Network::Testnet3 => "testnet3",
            Network::Testnet4 => "testnet4",
            Network::Signet => "signet",
            Network::Regtest => "regtest",
        }
    }

    /// This network's parameters.
    pub fn params(&self) -> &'static Params {
        match self {
            Network::Mainnet => &MAINNET,
            Network::Testnet3 => &TESTNET3,
            Network::Testnet4 => &TESTNET4,
            Network::Signet => &SIGNET,
            Network::Regtest => &REGTEST,
        }
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The name is not a network this crate knows.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown network {0:?} (expected mainnet, testnet3, testnet4, signet or regtest)")]
pub struct UnknownNetwork(pub String);

impl FromStr for Network {
    type Err = UnknownNetwork;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "mainnet" | "main" | "bitcoin" => Ok(Network::Mainnet),
            "testnet3" | "testnet" | "test" => Ok(Network::Testnet3),
            "testnet4" => Ok(Network::Testnet4),
            "signet" => Ok(Network::Signet),
            "regtest" => Ok(Network::Regtest),
            other => Err(UnknownNetwork(other.to_string())),
        }
    }
}

/// Parameters of one network.
#[derive(Debug, Clone)]
pub struct Params {
    /// Which network.
    pub network: Network,
    /// The genesis header.
    pub genesis: Header,
    /// The easiest target allowed, as bytes big-endian.
    pub pow_limit: [u8; 32],
    /// Blocks per difficulty period (2016).
    pub retarget_interval: u32,
    /// Intended duration of a period, seconds (two weeks).
    pub target_timespan: u32,
    /// Intended block interval, seconds (ten minutes).
    pub target_spacing: u32,
    /// Testnet rule: a block more than twice the spacing after its parent may use the
    /// minimum difficulty, and later blocks of the period inherit the last real target.
    pub allow_min_difficulty_blocks: bool,
    /// Regtest rule: the target never changes.
    pub no_retargeting: bool,
    /// BIP94 (testnet4): retarget from the period's first target, and the first block of a
    /// period may not be more than 600 s before its parent (the timewarp fix).
    pub enforce_bip94: bool,
    /// Height from which versions below 2 are invalid (BIP34).
    pub bip34_height: u32,
    /// Height from which versions below 3 are invalid (BIP66).
    pub bip66_height: u32,
    /// Height from which versions below 4 are invalid (BIP65).
    pub bip65_height: u32,
    /// Blocks whose hash is fixed: (height, hash shown byte-reversed).
    pub checkpoints: &'static [(u32, &'static str)],
    /// Bitcoin Core's `nMinimumChainWork` (big-endian hex, 64 digits): below it a chain is
    /// never reported as synced, whatever the gateways claim (a chain made by someone who
    /// controls every gateway can be valid and still far lighter than the real one).
    pub min_chain_work: &'static str,
}

impl Params {
    /// `pow_limit` as a target.
    pub fn pow_limit(&self) -> Target {
        Target(U256::from_be_bytes(&self.pow_limit))
    }

    /// `pow_limit` in compact form, as headers carry it.
    pub fn pow_limit_compact(&self) -> CompactTarget {
        self.pow_limit().to_compact()
    }

    /// [`Self::min_chain_work`] as work (zero if it does not parse).
    pub fn min_chain_work(&self) -> Work {
        let mut bytes = [0u8; 32];
        match hex::decode_to_slice(self.min_chain_work, &mut bytes) {
            Ok(()) => Work(U256::from_be_bytes(&bytes)),
            Err(_) => Work::ZERO,
        }
    }

    /// The checkpoint at `height`, if any.
    pub fn checkpoint_at(&self, height: u32) -> Option<BlockHash> {
        self.checkpoints
            .iter()
            .find(|(h, _)| *h == height)
            .and_then(|(_, hash)| BlockHash::from_display_hex(hash))
    }

    /// Height of the last checkpoint (0, the genesis, when there are none).
    pub fn last_checkpoint_height(&self) -> u32 {
        self.checkpoints.iter().map(|(h, _)| *h).max().unwrap_or(0)
    }

    /// The height of the last checkpoint a chain whose tip is at `tip` has reached (0 if
    /// none). A chain that reached a checkpoint's height holds that checkpoint: headers
    /// are checked against it on arrival.
    pub fn last_checkpoint_reached(&self, tip: u32) -> u32 {
        self.checkpoints
            .iter()
            .map(|(h, _)| *h)
            .filter(|h| *h <= tip)
            .max()
            .unwrap_or(0)
    }
}

/// The merkle root of the genesis coinbase shared by mainnet, testnet3, testnet4's
/// predecessors, signet and regtest (internal byte order).
const SATOSHI_MERKLE_ROOT: [u8; 32] = [
    0x3b, 0xa3, 0xed, 0xfd, 0x7a, 0x7b, 0x12, 0xb2, 0x7a, 0xc7, 0x2c, 0x3e, 0x67, 0x76, 0x8f, 0x61,
    0x7f, 0xc8, 0x1b, 0xc3, 0x88, 0x8a, 0x51, 0x32, 0x3a, 0x9f, 0xb8, 0xaa, 0x4b, 0x1e, 0x5e, 0x4a,
];

/// testnet4's genesis coinbase has its own message, hence its own merkle root.
const TESTNET4_MERKLE_ROOT: [u8; 32] = [
    0x4e, 0x7b, 0x2b, 0x91, 0x28, 0xfe, 0x02, 0x91, 0xdb, 0x06, 0x93, 0xaf, 0x2a, 0xe4, 0x18, 0xb7,
    0x67, 0xe6, 0x57, 0xcd, 0x40, 0x7e, 0x80, 0xcb, 0x14, 0x34, 0x22, 0x1e, 0xae, 0xa7, 0xa0, 0x7a,
];

const fn genesis(merkle_root: [u8; 32], time: u32, bits: u32, nonce: u32) -> Header {
    Header {
        version: 1,
        prev_blockhash: BlockHash::ZERO,
        merkle_root,
        time,
        bits: CompactTarget(bits),
        nonce,
    }
}

/// 0x00000000ffff...ff: the easiest target of mainnet, testnet3 and testnet4.
const POW_LIMIT_MAINNET: [u8; 32] = {
    let mut b = [0xff; 32];
    b[0] = 0;
    b[1] = 0;
    b[2] = 0;
    b[3] = 0;
    b
};

const TWO_WEEKS: u32 = 14 * 24 * 60 * 60;

/// Bitcoin mainnet. Checkpoints are Bitcoin Core's classic list.
pub static MAINNET: Params = Params {
    network: Network::Mainnet,
    genesis: genesis(SATOSHI_MERKLE_ROOT, 1231006505, 0x1d00ffff, 2083236893),
    pow_limit: POW_LIMIT_MAINNET,
    retarget_interval: 2016,
    target_timespan: TWO_WEEKS,
    target_spacing: 600,
    allow_min_difficulty_blocks: false,
    no_retargeting: false,
    enforce_bip94: false,
    bip34_height: 227931,
    bip66_height: 363725,
    bip65_height: 388381,
    checkpoints: &[
        (
            11111,
            "0000000069e244f73d78e8fd29ba2fd2ed618bd6fa2ee92559f542fdb26e7c1d",
        ),
        (
            33333,
            "000000002dd5588a74784eaa7ab0507a18ad16a236e7b1ce69f00d7ddfb5d0a6",
        ),
        (
            74000,
            "0000000000573993a3c9e41ce34471c079dcf5f52a0e824a81e7f953b8661a20",
        ),
        (
            105000,
            "00000000000291ce28027faea320c8d2b054b2e0fe44a773f3eefb151d6bdc97",
        ),
        (
            134444,
            "00000000000005b12ffd4cd315cd34ffd4a594f430ac814c91184a0d42d2b0fe",
        ),
        (
            168000,
            "000000000000099e61ea72015e79632f216fe6cb33d7899acb35b75c8303b763",
        ),
        (
            193000,
            "000000000000059f452a5f7340de6682a977387c17010ff6e6c3bd83ca8b1317",
        ),
        (
            210000,
            "000000000000048b95347e83192f69cf0366076336c639f9b7228e9ba171342e",
        ),
        (
            216116,
            "00000000000001b4f4b433e81ee46494af945cf96014816a4e2370f11b23df4e",
        ),
        (
            225430,
            "00000000000001c108384350f74090433e7fcf79a606b8e797f065b130575932",
        ),
        (
            250000,
            "000000000000003887df1f29024b06fc2200b55f8af8f35453d7be294df2d214",
        ),
        (
            279000,
            "0000000000000001ae8c72a0b0c301f67e3afca10e819efa9041e458e9bd7e40",
        ),
        (
            295000,
            "00000000000000004d9b4ef50f0f9d686fd69db2e03af35a100370c64632a983",
        ),
    ],
    // Core v27 (src/kernel/chainparams.cpp; the chain at height 824,000).
    min_chain_work: "000000000000000000000000000000000000000063c4ebd298db40af57541800",
};

/// testnet3.
pub static TESTNET3: Params = Params {
    network: Network::Testnet3,
    genesis: genesis(SATOSHI_MERKLE_ROOT, 1296688602, 0x1d00ffff, 414098458),
    pow_limit: POW_LIMIT_MAINNET,
    retarget_interval: 2016,
    target_timespan: TWO_WEEKS,
    target_spacing: 600,
    allow_min_difficulty_blocks: true,
    no_retargeting: false,
    enforce_bip94: false,
    bip34_height: 21111,
    bip66_height: 330776,
    bip65_height: 581885,
    checkpoints: &[(
        546,
        "000000002a936ca763904c3c35fce2f3556c559c0214345d31b1bcebf76acb70",
    )],
    // Core v27 (src/kernel/chainparams.cpp).
    min_chain_work: "000000000000000000000000000000000000000000000c59b14e264ba6c15db9",
};

/// testnet4 (BIP94).
pub static TESTNET4: Params = Params {
    network: Network::Testnet4,
    genesis: genesis(TESTNET4_MERKLE_ROOT, 1714777860, 0x1d00ffff, 393743547),
    pow_limit: POW_LIMIT_MAINNET,
    retarget_interval: 2016,
    target_timespan: TWO_WEEKS,
    target_spacing: 600,
    allow_min_difficulty_blocks: true,
    no_retargeting: false,
    enforce_bip94: true,
    bip34_height: 1,
    bip66_height: 1,
    bip65_height: 1,
    checkpoints: &[],
    // Not in the Core release our other values come from (testnet4 came later), and we
    // have no other source for it here: no minimum until one is added from Core.
    min_chain_work: "0000000000000000000000000000000000000000000000000000000000000000",
};

/// The default signet.
pub static SIGNET: Params = Params {
    network: Network::Signet,
    genesis: genesis(SATOSHI_MERKLE_ROOT, 1598918400, 0x1e0377ae, 52613770),
    pow_limit: [
        0x00, 0x00, 0x03, 0x77, 0xae, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0,
    ],
    retarget_interval: 2016,
    target_timespan: TWO_WEEKS,
    target_spacing: 600,
    allow_min_difficulty_blocks: false,
    no_retargeting: false,
    enforce_bip94: false,
    bip34_height: 1,
    bip66_height: 1,
    bip65_height: 1,
    checkpoints: &[],
    // Core v27 (src/kernel/chainparams.cpp).
    min_chain_work: "00000000000000000000000000000000000000000000000000000206e86f08e8",
};

/// Regtest, with Bitcoin Core's current activation heights (all from block 1).
pub static REGTEST: Params = Params {
    network: Network::Regtest,
    genesis: genesis(SATOSHI_MERKLE_ROOT, 1296688602, 0x207fffff, 2),
    pow_limit: {
        let mut b = [0xff; 32];
        b[0] = 0x7f;
        b
    },
    retarget_interval: 2016,
    target_timespan: TWO_WEEKS,
    target_spacing: 600,
    allow_min_difficulty_blocks: true,
    no_retargeting: true,
    enforce_bip94: false,
    bip34_height: 1,
    bip66_height: 1,
    bip65_height: 1,
    checkpoints: &[],
    min_chain_work: "0000000000000000000000000000000000000000000000000000000000000000",
};

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn minimum_chain_work_is_cores() {
        // Core's value equals the mainnet chainwork at height 824,000 (cross-checked in
        // ../shared/data against the headers themselves).
        assert_eq!(
            MAINNET.min_chain_work().0.to_be_bytes()[20..],
            [
                0x63, 0xc4, 0xeb, 0xd2, 0x98, 0xdb, 0x40, 0xaf, 0x57, 0x54, 0x18, 0x00
            ]
        );
        assert!(SIGNET.min_chain_work() > Work::ZERO);
        assert!(TESTNET3.min_chain_work() > SIGNET.min_chain_work());
        assert_eq!(REGTEST.min_chain_work(), Work::ZERO);
        assert_eq!(TESTNET4.min_chain_work(), Work::ZERO);
    }

    #[test]
    fn genesis_hashes() {
        // Hashes from the shared data's chainparams facts (testnet4's from its header file).
        let expected = [
            (
                Network::Mainnet,
                "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f",
            ),
            (
                Network::Testnet3,
                "000000000933ea01ad0ee984209779baaec3ced90fa3f408719526f8d77f4943",
            ),
            (
                Network::Testnet4,
                "00000000da84f2bafbbc53dee25a72ae507ff4914b867c565be350b0da8bf043",
            ),
            (
                Network::Signet,
                "00000008819873e925422c1ff0f99f7cc9bbb232af63a077a480a3633bee1ef6",
            ),
            (
                Network::Regtest,
                "0f9188f13cb7b2c71f2a335e3a4fc328bf5beb436012afca590b1a11466e2206",
            ),
        ];
        for (network, hash) in expected {
            let params = network.params();
            assert_eq!(params.network, network);
            assert_eq!(params.genesis.block_hash().to_string(), hash, "{network}");
            assert!(
                params.pow_limit().is_met_by(&params.genesis.block_hash()),
                "{network} genesis meets the limit"
            );
            assert_eq!(network.name().parse::<Network>(), Ok(network));
        }
        assert!("bitcoin-cash".parse::<Network>().is_err());
    }

    #[test]
    fn pow_limits_in_compact_form() {
        assert_eq!(MAINNET.pow_limit_compact(), CompactTarget(0x1d00ffff));
        assert_eq!(SIGNET.pow_limit_compact(), CompactTarget(0x1e0377ae));
        assert_eq!(REGTEST.pow_limit_compact(), CompactTarget(0x207fffff));
        assert_eq!(MAINNET.last_checkpoint_height(), 295000);
        assert!(
            MAINNET
                .checkpoints
                .iter()
                .all(|(h, _)| MAINNET.checkpoint_at(*h).is_some())
        );
    }
}
