//! What the application gives to receive silent payments (BIP352), checked into a
//! [`Receiver`]: the scan private key, and the spend public key or the receiver's own
//! address, with the labels it hands out. Each mistake is a typed error naming it.
//!
//! The scan key stays in the engine's context (the Web Worker): it is held by the
//! [`Receiver`], which never returns it, and is not stored, unless the application asks
//! for that (`persistScanKey`: [`ReceiverKeys::encode`], kept in the store in clear, so
//! that a later session's engine starts the receiver itself). Otherwise a later session
//! receives again only when the application gives the key again.

use lightwire_chain::Network;
use lightwire_wallet::silent::{Receiver, SilentError, SpAddress, SpNetwork};

/// Labels at most (each costs the scan one more key a tweak).
pub const MAX_LABELS: usize = 100;

/// What the application gives, as it gave it (hex and text).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReceiverKeys {
    /// The scan private key, 64 hex characters.
    pub scan_key: String,
    /// The spend public key, 66 hex characters (compressed); or `address`.
    pub spend_key: Option<String>,
    /// The receiver's own (unlabelled) `sp1`/`tsp1`/`sprt1` address; or `spend_key`.
    pub address: Option<String>,
    /// The labels it hands out (from 1: 0 is the change label, always looked for).
    pub labels: Vec<u32>,
    /// Where the spend key derives from, as descriptors write a key origin
    /// (`[d34db33f/352h/0h/0h/0h/0]`), if the application says: given to the signer
    /// (BIP376's `PSBT_IN_SP_SPEND_BIP32_DERIVATION`).
    pub spend_origin: Option<String>,
}

impl ReceiverKeys {
    /// The keys as the store keeps them when the application asks (`persistScanKey`), with
    /// the receiver's first block: layout 1, the first block, then each text (scan key,
    /// spend key or address, with a byte saying which) and the labels.
    pub fn encode(&self, from: u32) -> Vec<u8> {
        let mut out = vec![1u8];
        out.extend_from_slice(&from.to_le_bytes());
        let text = |out: &mut Vec<u8>, t: &str| {
            out.extend_from_slice(&(t.len() as u32).to_le_bytes());
            out.extend_from_slice(t.as_bytes());
        };
        text(&mut out, &self.scan_key);
        match (&self.spend_key, &self.address) {
            (Some(k), _) => {
                out.push(0);
                text(&mut out, k);
            }
            (None, Some(a)) => {
                out.push(1);
                text(&mut out, a);
            }
            (None, None) => out.push(2),
        }
        out.extend_from_slice(&(self.labels.len() as u32).to_le_bytes());
        for l in &self.labels {
            out.extend_from_slice(&l.to_le_bytes());
        }
        match &self.spend_origin {
            Some(o) => {
                out.push(1);
                text(&mut out, o);
            }
            None => out.push(0),
        }
        out
    }

    /// [`Self::encode`]'s bytes read back: the keys and the first block; `None` if they
    /// are not that (the keys are checked again when the receiver is made from them).
    pub fn decode(bytes: &[u8]) -> Option<(ReceiverKeys, u32)> {
        fn take<'b>(r: &mut &'b [u8], n: usize) -> Option<&'b [u8]> {
            let (h, t) = r.split_at_checked(n)?;
            *r = t;
            Some(h)
        }
        fn u32_of(r: &mut &[u8]) -> Option<u32> {
            Some(u32::from_le_bytes(take(r, 4)?.try_into().ok()?))
        }
        fn text(r: &mut &[u8]) -> Option<String> {
            let n = u32_of(r)? as usize;
            String::from_utf8(take(r, n)?.to_vec()).ok()
        }
        let mut r = bytes;
        if take(&mut r, 1)? != [1] {
            return None;
        }
        let from = u32_of(&mut r)?;
        let scan_key = text(&mut r)?;
        let (spend_key, address) = match take(&mut r, 1)?[0] {
            0 => (Some(text(&mut r)?), None),
            1 => (None, Some(text(&mut r)?)),
            2 => (None, None),
            _ => return None,
        };
        let n = u32_of(&mut r)? as usize;
        if n > MAX_LABELS {
            return None;
        }
        let mut labels = Vec::with_capacity(n);
        for _ in 0..n {
            labels.push(u32_of(&mut r)?);
        }
        let spend_origin = match take(&mut r, 1)?[0] {
            0 => None,
            1 => Some(text(&mut r)?),
            _ => return None,
        };
        if !r.is_empty() {
            return None;
        }
        Some((
            ReceiverKeys {
                scan_key,
                spend_key,
                address,
                labels,
                spend_origin,
            },
            from,
        ))
    }
}

/// A receiver ready to scan, and its addresses.
#[derive(Debug)]
pub struct Receiving {
    /// The keys.
    pub receiver: Receiver,
    /// Its address on the client's network.
    pub address: String,
    /// Each label's address, in the order given.
    pub labelled: Vec<(u32, String)>,
    /// Where the spend key derives from, if given.
    pub spend_origin: Option<lightwire_wallet::descriptor::KeyOrigin>,
}

/// Why the keys given cannot receive.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReceiverError {
    /// The scan key is not 32 bytes of hex, or not a private key.
    #[error("scanKey must be a private key: 64 hex characters, not zero, below the curve's order")]
    ScanKey,
    /// The spend key is not 33 bytes of hex, or not a compressed point.
    #[error("spendKey must be a compressed public key: 66 hex characters")]
    SpendKey,
    /// Neither a spend key nor an address was given, or both.
    #[error("give the spend key (spendKey) or the receiver's address (address), one of them")]
    SpendOrAddress,
    /// The address is not a silent payment address.
    #[error("address: {0}")]
    Address(SilentError),
    /// The address is for another network than the client's.
    #[error("address is for another network than the client's")]
    WrongNetwork,
    /// The address's scan key is not the scan key's.
    #[error("address does not hold the public key of scanKey")]
    NotOfScanKey,
    /// Label 0 is the change label (looked for always, never handed out), or a label was
    /// given twice.
    #[error("label {0}: labels are handed out from 1 (0 is change), each once")]
    Label(u32),
    /// The spend key's origin is not a key origin (`[fingerprint/path]`).
    #[error(
        "spendKeyOrigin must be a key origin: [8 hex digits/steps], steps hardened with h or '"
    )]
    SpendOrigin,
    /// More labels than [`MAX_LABELS`].
    #[error("at most {MAX_LABELS} labels")]
    TooManyLabels,
    /// The receiver's keys, worked out three times from the same input, came out different
    /// each time: the machine computes wrong values (WebKitGTK's JavaScriptCore has been
    /// seen to). No address is handed out that may not be the keys'.
    #[error(
        "the receiver's keys worked out differently each time (this machine computes wrong values): try again"
    )]
    Unstable,
}

/// The silent-payment network (address prefix) of `network`.
pub fn sp_network(network: Network) -> SpNetwork {
    match network {
        Network::Mainnet => SpNetwork::Mainnet,
        Network::Testnet3 | Network::Testnet4 | Network::Signet => SpNetwork::Testnet,
        Network::Regtest => SpNetwork::Regtest,
    }
}

fn bytes<const N: usize>(hex_text: &str) -> Option<[u8; N]> {
    hex::decode(hex_text.trim()).ok()?.try_into().ok()
}

/// The receiver of `keys` on `network`, checked. Its keys are worked out twice (three times
/// when the two differ) and taken only where two agree: an address handed out is paid for
/// good, and a JavaScript engine has been seen to compute wrong curve values now and then
/// (JavaScriptCore's concurrent JIT: benches/README.md, "WebKit computes wrong values"),
/// which once gave an address of a key that is not the scan key's.
pub fn receiving(keys: &ReceiverKeys, network: Network) -> Result<Receiving, ReceiverError> {
    two_agree(
        || receiving_once(keys, network),
        |a, b| a.address == b.address && a.labelled == b.labelled,
    )
}

/// What `once` gives where two of its first answers agree (two, or three when the first
/// two differ).
fn two_agree<T>(
    mut once: impl FnMut() -> Result<T, ReceiverError>,
    same: impl Fn(&T, &T) -> bool,
) -> Result<T, ReceiverError> {
    let first = once()?;
    let second = once()?;
    if same(&first, &second) {
        return Ok(first);
    }
    let third = once()?;
    match (same(&first, &third), same(&second, &third)) {
        (true, _) => Ok(first),
        (_, true) => Ok(second),
        _ => Err(ReceiverError::Unstable),
    }
}

/// [`receiving`], worked out once.
fn receiving_once(keys: &ReceiverKeys, network: Network) -> Result<Receiving, ReceiverError> {
    let net = sp_network(network);
    let scan: [u8; 32] = bytes(&keys.scan_key).ok_or(ReceiverError::ScanKey)?;
    let spend = match (&keys.spend_key, &keys.address) {
        (Some(hex_key), None) => bytes::<33>(hex_key).ok_or(ReceiverError::SpendKey)?,
        (None, Some(text)) => {
            let a = SpAddress::parse(text.trim()).map_err(ReceiverError::Address)?;
            if a.network != net {
                return Err(ReceiverError::WrongNetwork);
            }
            let r = Receiver::new(&scan, &a.spend).map_err(|_| ReceiverError::ScanKey)?;
            if r.scan_public() != a.scan {
                return Err(ReceiverError::NotOfScanKey);
            }
            a.spend
        }
        _ => return Err(ReceiverError::SpendOrAddress),
    };
    let mut receiver = Receiver::new(&scan, &spend).map_err(|e| match e {
        SilentError::SpendKey => ReceiverError::SpendKey,
        _ => ReceiverError::ScanKey,
    })?;
    if keys.labels.len() > MAX_LABELS {
        return Err(ReceiverError::TooManyLabels);
    }
    let mut labelled: Vec<(u32, String)> = Vec::with_capacity(keys.labels.len());
    for &m in &keys.labels {
        if m == 0 || labelled.iter().any(|(l, _)| *l == m) {
            return Err(ReceiverError::Label(m));
        }
        let a = receiver
            .address(net, Some(m))
            .map_err(|_| ReceiverError::Label(m))?;
        labelled.push((m, a.encode()));
    }
    let address = receiver
        .address(net, None)
        .map_err(|_| ReceiverError::ScanKey)?
        .encode();
    let spend_origin = match &keys.spend_origin {
        Some(t) => Some(
            lightwire_wallet::descriptor::KeyOrigin::parse(t)
                .map_err(|_| ReceiverError::SpendOrigin)?,
        ),
        None => None,
    };
    Ok(Receiving {
        receiver,
        address,
        labelled,
        spend_origin,
    })
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::tweaks::tests::G;

    fn keys() -> ReceiverKeys {
        ReceiverKeys {
            scan_key: hex::encode([0x11; 32]),
            spend_key: Some(hex::encode(G)),
            address: None,
            labels: vec![1, 7],
            spend_origin: Some("[d34db33f/352h/0h/0h/0h/0]".into()),
        }
    }

    /// The keys give a receiver and its addresses; the address, given back instead of the
    /// spend key, gives the same receiver.
    #[test]
    fn the_keys_or_the_address_give_the_receiver() {
        let r = receiving(&keys(), Network::Regtest).unwrap();
        assert!(r.address.starts_with("sprt1q"), "{}", r.address);
        assert_eq!(r.labelled.len(), 2);
        assert_ne!(r.labelled[0].1, r.address);
        let main = receiving(&keys(), Network::Mainnet).unwrap();
        assert!(main.address.starts_with("sp1q"));
        let test = receiving(&keys(), Network::Signet).unwrap();
        assert!(test.address.starts_with("tsp1q"));

        let by_address = ReceiverKeys {
            spend_key: None,
            address: Some(r.address.clone()),
            ..keys()
        };
        let again = receiving(&by_address, Network::Regtest).unwrap();
        assert_eq!(again.address, r.address);
        assert_eq!(again.labelled, r.labelled);
    }

    /// The keys as the store keeps them (`persistScanKey`) read back whole, with the first
    /// block, for a spend key or an address; bytes cut short, longer, of another layout
    /// or with too many labels are refused.
    #[test]
    fn kept_keys_read_back_and_damaged_ones_are_refused() {
        let by_address = ReceiverKeys {
            spend_key: None,
            address: Some("sprt1qexample".into()),
            labels: vec![],
            ..keys()
        };
        for k in [keys(), by_address] {
            let bytes = k.encode(1_234);
            assert_eq!(ReceiverKeys::decode(&bytes), Some((k.clone(), 1_234)));
            for cut in 0..bytes.len() {
                assert_eq!(ReceiverKeys::decode(&bytes[..cut]), None, "cut at {cut}");
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert_eq!(ReceiverKeys::decode(&longer), None);
            let mut other = bytes;
            other[0] = 2;
            assert_eq!(ReceiverKeys::decode(&other), None);
        }
        let many = ReceiverKeys {
            labels: (1..=MAX_LABELS as u32 + 1).collect(),
            ..keys()
        };
        assert_eq!(ReceiverKeys::decode(&many.encode(0)), None);
    }

    /// Each mistake is its own error.
    #[test]
    fn each_mistake_is_named() {
        let err = |k: ReceiverKeys, n| receiving(&k, n).map(|_| ()).unwrap_err();
        let regtest = Network::Regtest;
        let address = receiving(&keys(), regtest).unwrap().address;
        for bad in ["", "11", &"00".repeat(32), &"ff".repeat(32), "zz"] {
            let k = ReceiverKeys {
                scan_key: bad.to_string(),
                ..keys()
            };
            assert_eq!(err(k, regtest), ReceiverError::ScanKey, "{bad:?}");
        }
        for bad in [hex::encode([2u8; 32]), hex::encode([9u8; 33]), "xyz".into()] {
            let k = ReceiverKeys {
                spend_key: Some(bad.clone()),
                ..keys()
            };
            assert_eq!(err(k, regtest), ReceiverError::SpendKey, "{bad:?}");
        }
        let both = ReceiverKeys {
            address: Some(address.clone()),
            ..keys()
        };
        assert_eq!(err(both, regtest), ReceiverError::SpendOrAddress);
        let neither = ReceiverKeys {
            spend_key: None,
            ..keys()
        };
        assert_eq!(err(neither, regtest), ReceiverError::SpendOrAddress);
        let by_address = |a: &str| ReceiverKeys {
            spend_key: None,
            address: Some(a.to_string()),
            ..keys()
        };
        assert_eq!(
            err(by_address(&address), Network::Mainnet),
            ReceiverError::WrongNetwork
        );
        assert!(matches!(
            err(by_address("sprt1qnotanaddress"), regtest),
            ReceiverError::Address(_)
        ));
        let other_scan = ReceiverKeys {
            scan_key: hex::encode([0x22; 32]),
            ..by_address(&address)
        };
        assert_eq!(err(other_scan, regtest), ReceiverError::NotOfScanKey);
        for bad in ["[d34db33/352h]", "[d34db33f/352x]", "[d34db33f/2147483648]"] {
            let k = ReceiverKeys {
                spend_origin: Some(bad.into()),
                ..keys()
            };
            assert_eq!(err(k, regtest), ReceiverError::SpendOrigin, "{bad}");
        }
        for labels in [vec![0], vec![3, 3]] {
            let k = ReceiverKeys {
                labels: labels.clone(),
                ..keys()
            };
            assert!(
                matches!(err(k, regtest), ReceiverError::Label(_)),
                "{labels:?}"
            );
        }
        let k = ReceiverKeys {
            labels: (1..=101).collect(),
            ..keys()
        };
        assert_eq!(err(k, regtest), ReceiverError::TooManyLabels);
    }

    /// Keys worked out wrong once are taken where two answers agree; three different
    /// answers hand out no address.
    #[test]
    fn only_keys_worked_out_alike_twice_are_taken() {
        let run = |answers: &[u8]| {
            let mut it = answers.iter().copied();
            two_agree(|| Ok(it.next().unwrap()), |a, b| a == b)
        };
        assert_eq!(run(&[1, 1]), Ok(1));
        assert_eq!(run(&[1, 2, 1]), Ok(1));
        assert_eq!(run(&[2, 1, 1]), Ok(1));
        assert_eq!(run(&[1, 2, 3]), Err(ReceiverError::Unstable));
    }
}
