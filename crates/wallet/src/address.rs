//! Addresses to output scripts and back: base58check P2PKH and P2SH, and segwit
//! addresses (bech32 for version 0, bech32m for 1 to 16; BIP173, BIP350), each checked
//! for the network it names.

use alloc::string::String;
use alloc::vec::Vec;

use bech32::{Fe32, Hrp};
use lightwire_chain::Network;

use crate::hash;

/// An address that cannot be watched.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum AddressError {
    /// Not an address: not base58check nor bech32/bech32m, or its checksum is wrong (a typo).
    #[error("not an address (or a mistyped one: its checksum does not match)")]
    NotAnAddress,
    /// A segwit address that breaks BIP173/BIP350: the wrong checksum kind for its version
    /// (bech32 for 0, bech32m above), a program of the wrong length, mixed case.
    #[error("a malformed segwit address: {0}")]
    BadSegwit(&'static str),
    /// A base58check address of an unknown version byte or length.
    #[error("a base58check address of version {version} and {len} bytes is not P2PKH or P2SH")]
    UnknownBase58 {
        /// Its version byte.
        version: u8,
        /// Its payload's length.
        len: usize,
    },
    /// An address of another network.
    #[error("an address of another network, not {0}")]
    WrongNetwork(&'static str),
}

/// The human-readable part of segwit addresses on `network`.
fn hrp(network: Network) -> &'static str {
    match network {
        Network::Mainnet => "bc",
        Network::Testnet3 | Network::Testnet4 | Network::Signet => "tb",
        Network::Regtest => "bcrt",
    }
}

/// The base58check version bytes of P2PKH and P2SH addresses on `network`.
fn base58_versions(network: Network) -> (u8, u8) {
    match network {
        Network::Mainnet => (0x00, 0x05),
        _ => (0x6f, 0xc4),
    }
}

/// The output script an address pays, if it is an address of `network`.
pub fn script_of_address(address: &str, network: Network) -> Result<Vec<u8>, AddressError> {
    let lower = address.to_ascii_lowercase();
    let segwit = ["bc1", "tb1", "bcrt1"].iter().any(|p| lower.starts_with(p));
    if segwit {
        let (found, version, program) =
            bech32::segwit::decode(address).map_err(|_| segwit_error(address))?;
        if found != Hrp::parse_unchecked(hrp(network)) {
            return Err(AddressError::WrongNetwork(network.name()));
        }
        return Ok(hash::witness(version.to_u8(), &program));
    }
    let payload = base58check(address).ok_or(AddressError::NotAnAddress)?;
    let (version, body) = payload.split_first().ok_or(AddressError::NotAnAddress)?;
    let hash: &[u8; 20] = body.try_into().map_err(|_| AddressError::UnknownBase58 {
        version: *version,
        len: body.len(),
    })?;
    let (p2pkh, p2sh) = base58_versions(network);
    match *version {
        v if v == p2pkh => Ok(hash::p2pkh(hash)),
        v if v == p2sh => Ok(hash::p2sh(hash)),
        0x00 | 0x05 | 0x6f | 0xc4 => Err(AddressError::WrongNetwork(network.name())),
        v => Err(AddressError::UnknownBase58 {
            version: v,
            len: body.len(),
        }),
    }
}

/// Why a segwit address did not decode: a checksum that holds under bech32 or bech32m
/// means a segwit rule was broken (the wrong kind for its version, a program of the wrong
/// length); otherwise it is not an address, or a mistyped one.
fn segwit_error(address: &str) -> AddressError {
    use bech32::primitives::decode::CheckedHrpstring;
    let checksum_holds = CheckedHrpstring::new::<bech32::Bech32>(address).is_ok()
        || CheckedHrpstring::new::<bech32::Bech32m>(address).is_ok();
    if checksum_holds {
        AddressError::BadSegwit("the wrong checksum kind for its version, or a bad program")
    } else {
        AddressError::NotAnAddress
    }
}

/// Bitcoin's base58 alphabet.
const BASE58: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/// Base58 `text` as bytes (each leading `1` a zero byte), or `None` for a character
/// outside the alphabet. Written here rather than taken from `bs58`: its decoder carries
/// its checked variant, and with it a second SHA-256, into the package; addresses and
/// extended keys are short (under 112 characters), so the schoolbook conversion is enough.
fn base58_decode(text: &str) -> Option<Vec<u8>> {
    let zeros = text.bytes().take_while(|&c| c == b'1').count();
    // Big-endian, without the leading zeros.
    let mut n: Vec<u8> = Vec::with_capacity(text.len());
    for c in text.bytes().skip(zeros) {
        let mut carry = BASE58.iter().position(|&a| a == c)? as u32;
        for byte in n.iter_mut().rev() {
            carry += u32::from(*byte) * 58;
            *byte = carry as u8;
            carry >>= 8;
        }
        while carry > 0 {
            n.insert(0, carry as u8);
            carry >>= 8;
        }
    }
    let mut out = alloc::vec![0u8; zeros];
    out.extend_from_slice(&n);
    Some(out)
}

/// `bytes` in base58 (each leading zero byte a `1`).
fn base58_encode(bytes: &[u8]) -> String {
    let zeros = bytes.iter().take_while(|&&b| b == 0).count();
    // Base-58 digits, least significant first.
    let mut digits: Vec<u8> = Vec::with_capacity(bytes.len() * 138 / 100 + 1);
    for &b in &bytes[zeros..] {
        let mut carry = u32::from(b);
        for d in digits.iter_mut() {
            carry += u32::from(*d) << 8;
            *d = (carry % 58) as u8;
            carry /= 58;
        }
        while carry > 0 {
            digits.push((carry % 58) as u8);
            carry /= 58;
        }
    }
    let ones = core::iter::repeat_n('1', zeros);
    ones.chain(
        digits
            .iter()
            .rev()
            .map(|&d| char::from(BASE58[usize::from(d)])),
    )
    .collect()
}

/// The payload of base58check `text` (its four-byte checksum, the first of SHA-256d of the
/// rest, checked), or `None`. The checksum is computed here with the SHA-256 the rest of
/// lightwire uses: `bs58`'s own would bring a second implementation into the package.
pub(crate) fn base58check(text: &str) -> Option<Vec<u8>> {
    let mut bytes = base58_decode(text)?;
    let at = bytes.len().checked_sub(4)?;
    let check = lightwire_primitives::sha256d(&bytes[..at]);
    (bytes[at..] == check[..4]).then(|| {
        bytes.truncate(at);
        bytes
    })
}

/// The address of an output script on `network`, if it has one (P2PKH, P2SH, or a witness
/// program of version 0 to 16).
pub fn address_of(script: &[u8], network: Network) -> Option<String> {
    let (p2pkh, p2sh) = base58_versions(network);
    let base58 = |version: u8, hash: &[u8]| {
        let mut payload = Vec::with_capacity(21);
        payload.push(version);
        payload.extend_from_slice(hash);
        let check = lightwire_primitives::sha256d(&payload);
        payload.extend_from_slice(&check[..4]);
        base58_encode(&payload)
    };
    match script {
        [0x76, 0xa9, 0x14, hash @ .., 0x88, 0xac] if hash.len() == 20 => Some(base58(p2pkh, hash)),
        [0xa9, 0x14, hash @ .., 0x87] if hash.len() == 20 => Some(base58(p2sh, hash)),
        [op, len, program @ ..]
            if (*op == 0 || (0x51..=0x60).contains(op))
                && usize::from(*len) == program.len()
                && (2..=40).contains(&program.len()) =>
        {
            let version = if *op == 0 { 0 } else { op - 0x50 };
            let version = Fe32::try_from(version).ok()?;
            let hrp = Hrp::parse(hrp(network)).ok()?;
            bech32::segwit::encode(hrp, version, program).ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn script(address: &str, network: Network) -> Result<String, AddressError> {
        script_of_address(address, network).map(hex::encode)
    }

    /// BIP173's and BIP350's valid addresses, and the classic base58 ones: each to its
    /// script and back.
    #[test]
    fn addresses_of_every_kind_decode_to_their_scripts_and_back() {
        let cases = [
            (
                "BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4",
                Network::Mainnet,
                "0014751e76e8199196d454941c45d1b3a323f1433bd6",
            ),
            (
                "tb1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q0sl5k7",
                Network::Testnet3,
                "00201863143c14c5166804bd19203356da136c985678cd4d27a1b8c6329604903262",
            ),
            (
                "bc1pw508d6qejxtdg4y5r3zarvary0c5xw7kw508d6qejxtdg4y5r3zarvary0c5xw7kt5nd6y",
                Network::Mainnet,
                "5128751e76e8199196d454941c45d1b3a323f1433bd6751e76e8199196d454941c45d1b3a323f1433bd6",
            ),
            (
                "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2",
                Network::Mainnet,
                "76a91477bff20c60e522dfaa3350c39b030a5d004e839a88ac",
            ),
            (
                "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy",
                Network::Mainnet,
                "a914b472a266d0bd89c13706a4132ccfb16f7c3b9fcb87",
            ),
        ];
        for (address, network, want) in cases {
            assert_eq!(script(address, network).as_deref(), Ok(want), "{address}");
            // Back: base58 keeps its case, bech32 comes back lowercase.
            let back = address_of(&hex::decode(want).unwrap(), network).unwrap();
            let segwit =
                address.to_ascii_lowercase().starts_with("bc1") || address.starts_with("tb1");
            let expected = if segwit {
                address.to_ascii_lowercase()
            } else {
                address.into()
            };
            assert_eq!(back, expected);
        }
        // Regtest's segwit prefix, and the test networks' base58 versions.
        let s = hex::decode("0014751e76e8199196d454941c45d1b3a323f1433bd6").unwrap();
        let a = address_of(&s, Network::Regtest).unwrap();
        assert!(a.starts_with("bcrt1q"), "{a}");
        assert_eq!(script_of_address(&a, Network::Regtest), Ok(s));
        let p2pkh = hex::decode("76a91477bff20c60e522dfaa3350c39b030a5d004e839a88ac").unwrap();
        let a = address_of(&p2pkh, Network::Signet).unwrap();
        assert!(a.starts_with('m') || a.starts_with('n'), "{a}");
        assert_eq!(script_of_address(&a, Network::Testnet4), Ok(p2pkh));
        // A pay-to-public-key script has no address.
        assert_eq!(address_of(&[0x21; 35], Network::Mainnet), None);
    }

    #[test]
    fn malformed_or_foreign_addresses_are_typed_errors() {
        // BIP350: a version 0 program with a bech32m checksum, and version 1 with bech32.
        assert!(matches!(
            script(
                "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kemeawh",
                Network::Mainnet
            ),
            Err(AddressError::BadSegwit(_))
        ));
        assert!(matches!(
            script(
                "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqh2y7hd",
                Network::Mainnet
            ),
            Err(AddressError::BadSegwit(_))
        ));
        // A typo (one character changed): the checksum does not hold.
        assert_eq!(
            script(
                "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5",
                Network::Mainnet
            ),
            Err(AddressError::NotAnAddress)
        );
        assert_eq!(
            script("1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN3", Network::Mainnet),
            Err(AddressError::NotAnAddress)
        );
        assert_eq!(
            script("", Network::Mainnet),
            Err(AddressError::NotAnAddress)
        );
        assert_eq!(
            script("hello world", Network::Mainnet),
            Err(AddressError::NotAnAddress)
        );
        // Another network's.
        assert_eq!(
            script(
                "BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4",
                Network::Regtest
            ),
            Err(AddressError::WrongNetwork("regtest"))
        );
        assert_eq!(
            script("1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2", Network::Testnet4),
            Err(AddressError::WrongNetwork("testnet4"))
        );
        // A base58check payload of another kind (a WIF private key's version 0x80).
        let wif = bs58::encode([0x80u8; 33]).with_check().into_string();
        assert_eq!(
            script(&wif, Network::Mainnet),
            Err(AddressError::UnknownBase58 {
                version: 0x80,
                len: 32
            })
        );
    }

    #[test]
    fn base58_agrees_with_the_bs58_crate() {
        let cases: [&[u8]; 6] = [
            &[],
            &[0],
            &[0, 0, 1],
            &[0xff; 25],
            &[1, 2, 3, 4, 5],
            &[0, 0x61, 0x62],
        ];
        for bytes in cases {
            let ours = base58_encode(bytes);
            assert_eq!(ours, bs58::encode(bytes).into_string(), "{bytes:?}");
            assert_eq!(base58_decode(&ours).as_deref(), Some(bytes));
        }
        assert_eq!(base58_decode("0OIl"), None, "not in the alphabet");
        assert_eq!(base58check("1111"), None, "too short for a checksum");
    }
}
