//! The `init` message (type 16): the first message on every connection, carrying the
//! sender's features and the chains it is interested in.
//!
//! Payload: `u16 gflen, gflen*byte globalfeatures, u16 flen, flen*byte features,
//! init_tlvs`, where `init_tlvs` knows type 1 `networks` (a list of 32-byte chain hashes),
//! type 3 `remote_addr` (an address descriptor, kept as opaque bytes) and lightwire's own
//! odd type 65537 `bulk_mirrors` (a gateway's mirrors of the chain's history: URLs, each
//! a big-endian u16 length and its UTF-8 bytes).

use crate::cursor::{Reader, Writer};
use crate::error::{DecodeError, EncodeError, TlvError};
use crate::features::{CombinedFeatures, Features};
use crate::message::{encode_message, msg_type};
use crate::tlv::{TlvStream, TlvWriter, record_len};

/// A 32-byte chain hash: the chain's genesis block hash in internal byte order (as it
/// appears in a serialized block header, not reversed for display).
pub type ChainHash = [u8; 32];

/// Length of a [`ChainHash`].
pub const CHAIN_HASH_LEN: usize = 32;

/// `init_tlvs` type of `networks`.
pub const NETWORKS_TLV: u64 = 1;
/// `init_tlvs` type of `remote_addr`.
pub const REMOTE_ADDR_TLV: u64 = 3;
/// `init_tlvs` type of `bulk_mirrors` (lightwire's; odd, in BOLT 1's range for
/// experiments, so that any peer that does not know it skips it).
pub const BULK_MIRRORS_TLV: u64 = 65_537;

/// The chains listed in an `init`'s `networks` record, borrowed.
///
/// Always a whole number of 32-byte chain hashes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Networks<'a> {
    bytes: &'a [u8],
}

impl<'a> Networks<'a> {
    /// A list of no chains.
    pub const fn empty() -> Self {
        Self { bytes: &[] }
    }

    /// A view of `bytes` as chain hashes, or `None` if its length is not a multiple of 32.
    pub const fn from_bytes(bytes: &'a [u8]) -> Option<Self> {
        if bytes.len() % CHAIN_HASH_LEN == 0 {
            Some(Self { bytes })
        } else {
            None
        }
    }

    /// A view of `chains`.
    pub fn from_chains(chains: &'a [ChainHash]) -> Self {
        Self {
            bytes: chains.as_flattened(),
        }
    }

    /// The chain hashes back to back, as on the wire.
    pub const fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Number of chains.
    pub const fn len(&self) -> usize {
        self.bytes.len() / CHAIN_HASH_LEN
    }

    /// Whether the list is empty.
    pub const fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The chain hashes in order.
    pub const fn iter(&self) -> ChainHashes<'a> {
        ChainHashes { rest: self.bytes }
    }

    /// Whether `chain` is listed.
    pub fn contains(&self, chain: &ChainHash) -> bool {
        self.iter().any(|c| c == chain)
    }
}

impl<'a> IntoIterator for Networks<'a> {
    type Item = &'a ChainHash;
    type IntoIter = ChainHashes<'a>;

    fn into_iter(self) -> ChainHashes<'a> {
        self.iter()
    }
}

/// Iterator over borrowed chain hashes.
#[derive(Clone, Debug)]
pub struct ChainHashes<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for ChainHashes<'a> {
    type Item = &'a ChainHash;

    fn next(&mut self) -> Option<&'a ChainHash> {
        let (chain, rest) = self.rest.split_first_chunk::<CHAIN_HASH_LEN>()?;
        self.rest = rest;
        Some(chain)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.rest.len() / CHAIN_HASH_LEN;
        (n, Some(n))
    }
}

impl ExactSizeIterator for ChainHashes<'_> {}
impl core::iter::FusedIterator for ChainHashes<'_> {}

/// Why [`Init::require_chain`] refused a peer's `init`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitRefusal {
    /// It requires a feature bit we do not know.
    UnknownRequiredFeature(usize),
    /// It has no `networks` record.
    MissingNetworks,
    /// Its `networks` record does not hold our chain.
    WrongNetwork,
}

/// The `init` message, borrowing its fields from the decoded bytes.
///
/// Unknown odd `init_tlvs` records (for example type 5, `option_will_fund`) are skipped
/// on decoding and so are not written back by [`Init::encode`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Init<'a> {
    /// `globalfeatures`: the historical first field. Senders should not set bits above 13.
    pub global_features: Features<'a>,
    /// `features`.
    pub features: Features<'a>,
    /// The `networks` record: `None` if absent, which means "no restriction".
    pub networks: Option<Networks<'a>>,
    /// The `remote_addr` record: the address descriptor (1 type byte, then data) the
    /// sender saw us connect from. Not validated.
    pub remote_addr: Option<&'a [u8]>,
    /// The `bulk_mirrors` record's value, as sent (see [`Init::mirror_urls`]).
    pub mirrors: Option<&'a [u8]>,
}

impl<'a> Init<'a> {
    /// The message type.
    pub const TYPE: u16 = msg_type::INIT;

    /// An `init` with our `features` (and an empty `globalfeatures`) and, if given, the
    /// chains we serve.
    pub const fn new(features: Features<'a>, networks: Option<Networks<'a>>) -> Self {
        Self {
            global_features: Features::empty(),
            features,
            networks,
            remote_addr: None,
            mirrors: None,
        }
    }

    /// The URLs of the `bulk_mirrors` record, in order: each a big-endian u16 length and
    /// its bytes; one that is not UTF-8 is skipped, and a length past the record's end
    /// ends the list (the record is a hint: the client checks what it takes).
    pub fn mirror_urls(&self) -> impl Iterator<Item = &'a str> {
        let mut rest = self.mirrors.unwrap_or_default();
        core::iter::from_fn(move || {
            loop {
                let (len, tail) = rest.split_first_chunk::<2>()?;
                let len = usize::from(u16::from_be_bytes(*len));
                let url = tail.get(..len)?;
                rest = &tail[len..];
                if let Ok(url) = core::str::from_utf8(url) {
                    return Some(url);
                }
            }
        })
    }

    /// Write `urls` as a `bulk_mirrors` value at the start of `out`: its length, or
    /// `None` if `out` is too short or a URL longer than 65,535 bytes.
    pub fn encode_mirrors(urls: &[&str], out: &mut [u8]) -> Option<usize> {
        let mut at = 0;
        for url in urls {
            let len = u16::try_from(url.len()).ok()?;
            let end = at + 2 + url.len();
            let dst = out.get_mut(at..end)?;
            dst[..2].copy_from_slice(&len.to_be_bytes());
            dst[2..].copy_from_slice(url.as_bytes());
            at = end;
        }
        Some(at)
    }

    /// The union of `globalfeatures` and `features`, which the receiver must treat as
    /// one field.
    pub const fn combined_features(&self) -> CombinedFeatures<'a> {
        CombinedFeatures {
            global: self.global_features,
            local: self.features,
        }
    }

    /// The lowest required (even) feature bit set in either field that is not among
    /// `known` (knowing one bit of a pair counts for both), or `None`. BOLT 1: a receiver
    /// must fail the connection if this is `Some`.
    pub fn first_unknown_required_feature(&self, known: &[usize]) -> Option<usize> {
        self.combined_features().first_unknown_required(known)
    }

    /// The chain hashes of the `networks` record (none if it is absent).
    pub fn networks(&self) -> ChainHashes<'a> {
        self.networks.unwrap_or_default().iter()
    }

    /// Whether the sender is interested in `our_chain`: it is among the `networks`, or
    /// the sender sent no `networks` record. A present but empty record accepts no chain.
    pub fn accepts_chain(&self, our_chain: &ChainHash) -> bool {
        self.networks.is_none_or(|n| n.contains(our_chain))
    }

    /// lightwire's rule for a peer's `init` (docs/PROTOCOL.md): no unknown required feature,
    /// and a `networks` record that holds `our_chain` (absent is refused, unlike
    /// [`Self::accepts_chain`]: a light client must never sync another network's headers).
    pub fn require_chain(&self, our_chain: &ChainHash) -> Result<(), InitRefusal> {
        if let Some(bit) = self.first_unknown_required_feature(&[]) {
            return Err(InitRefusal::UnknownRequiredFeature(bit));
        }
        match self.networks {
            None => Err(InitRefusal::MissingNetworks),
            Some(n) if !n.contains(our_chain) => Err(InitRefusal::WrongNetwork),
            Some(_) => Ok(()),
        }
    }

    /// Decodes an `init` payload (the bytes after the message type).
    pub fn decode_payload(payload: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let global_features = Features::new(r.read_u16_prefixed("gflen", "globalfeatures")?);
        let features = Features::new(r.read_u16_prefixed("flen", "features")?);
        let mut init = Init {
            global_features,
            features,
            networks: None,
            remote_addr: None,
            mirrors: None,
        };
        init.decode_tlvs(r.take_rest())
            .map_err(|error| DecodeError::InvalidTlvStream {
                msg_type: Self::TYPE,
                error,
            })?;
        Ok(init)
    }

    fn decode_tlvs(&mut self, stream: &'a [u8]) -> Result<(), TlvError> {
        for record in TlvStream::new(stream) {
            let record = record?;
            match record.ty {
                NETWORKS_TLV => {
                    let networks =
                        Networks::from_bytes(record.value).ok_or(TlvError::InvalidLength {
                            ty: record.ty,
                            len: record.value.len(),
                            expected: "a multiple of 32",
                        })?;
                    self.networks = Some(networks);
                }
                REMOTE_ADDR_TLV => self.remote_addr = Some(record.value),
                BULK_MIRRORS_TLV => self.mirrors = Some(record.value),
                _ => record.skip_unknown()?,
            }
        }
        Ok(())
    }

    /// Length of the payload (without the message type).
    pub fn payload_len(&self) -> usize {
        let networks = self
            .networks
            .map_or(0, |n| record_len(NETWORKS_TLV, n.as_bytes().len()));
        let remote_addr = self
            .remote_addr
            .map_or(0, |a| record_len(REMOTE_ADDR_TLV, a.len()));
        let mirrors = self
            .mirrors
            .map_or(0, |m| record_len(BULK_MIRRORS_TLV, m.len()));
        2 + self.global_features.as_bytes().len()
            + 2
            + self.features.as_bytes().len()
            + networks
            + remote_addr
            + mirrors
    }

    /// Writes the payload (without the message type).
    pub fn write_payload(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.write_u16_prefixed("globalfeatures", self.global_features.as_bytes())?;
        w.write_u16_prefixed("features", self.features.as_bytes())?;
        let mut tlv = TlvWriter::new(w);
        if let Some(networks) = self.networks {
            tlv.write(NETWORKS_TLV, networks.as_bytes())?;
        }
        if let Some(addr) = self.remote_addr {
            tlv.write(REMOTE_ADDR_TLV, addr)?;
        }
        if let Some(mirrors) = self.mirrors {
            tlv.write(BULK_MIRRORS_TLV, mirrors)?;
        }
        Ok(())
    }

    /// Length of the whole message, type included.
    pub fn encoded_len(&self) -> usize {
        2 + self.payload_len()
    }

    /// Encodes the whole message (type and payload) at the start of `out`, returning the
    /// bytes written.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        encode_message(out, Self::TYPE, self.payload_len(), |w| {
            self.write_payload(w)
        })
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::message::Message;
    use crate::test_util::hex;

    fn chain(s: &str) -> ChainHash {
        hex(s).try_into().unwrap()
    }

    /// Bitcoin mainnet genesis hash, internal byte order.
    fn mainnet() -> ChainHash {
        chain("6fe28c0ab6f1b372c1a6a246ae63f74f931e8365e15a089c68d6190000000000")
    }

    /// Bitcoin testnet3 genesis hash, internal byte order.
    fn testnet() -> ChainHash {
        chain("43497fd7f826957108f4a30fd9cec3aeba79972084e90ead01ea330900000000")
    }

    fn decode(bytes: &[u8]) -> Result<Init<'_>, DecodeError> {
        match Message::decode(bytes)? {
            Message::Init(init) => Ok(init),
            other => panic!("not an init: {other:?}"),
        }
    }

    #[test]
    fn mirrors_round_trip_and_a_peer_that_knows_them_not_skips_them() {
        let chains = [mainnet()];
        let mut value = [0u8; 64];
        let urls = ["https://cdn.example.com/bulk/mainnet/", "/b/"];
        let len = Init::encode_mirrors(&urls, &mut value).unwrap();
        assert_eq!(Init::encode_mirrors(&urls, &mut value[..10]), None);
        let init = Init {
            mirrors: Some(&value[..len]),
            ..Init::new(Features::empty(), Some(Networks::from_chains(&chains)))
        };
        let mut buf = [0u8; 200];
        let n = init.encode(&mut buf).unwrap();
        assert_eq!(n, init.encoded_len());
        let back = decode(&buf[..n]).unwrap();
        let urls: Vec<&str> = back.mirror_urls().collect();
        assert_eq!(urls, ["https://cdn.example.com/bulk/mainnet/", "/b/"]);
        assert_eq!(back.networks().count(), 1);
        // A value cut short ends the list; bytes that are not UTF-8 are skipped.
        let cut: &[u8] = &[0, 5, b'a', b'b'];
        let odd: &[u8] = &[0, 1, 0xff, 0, 1, b'x'];
        let with = |v| Init {
            mirrors: Some(v),
            ..Init::default()
        };
        assert_eq!(with(cut).mirror_urls().count(), 0);
        assert_eq!(with(odd).mirror_urls().collect::<Vec<_>>(), ["x"]);
    }

    #[test]
    fn exact_bytes_with_features_and_networks() {
        let chains = [mainnet()];
        let mut fbuf = [0u8; 2];
        // Bits 9 and 15 (var_onion_optin and payment_secret, both optional).
        let features = Features::write_bits(&[9, 15], &mut fbuf).unwrap();
        let init = Init::new(features, Some(Networks::from_chains(&chains)));

        let mut expected = Vec::new();
        expected.extend_from_slice(&[0x00, 0x10]); // type 16
        expected.extend_from_slice(&[0x00, 0x00]); // gflen 0
        expected.extend_from_slice(&[0x00, 0x02]); // flen 2
        expected.extend_from_slice(&[0x82, 0x00]); // bits 15 and 9
        expected.push(0x01); // TLV type 1: networks
        expected.push(0x20); // length 32
        expected.extend_from_slice(&[
            0x6f, 0xe2, 0x8c, 0x0a, 0xb6, 0xf1, 0xb3, 0x72, 0xc1, 0xa6, 0xa2, 0x46, 0xae, 0x63,
            0xf7, 0x4f, 0x93, 0x1e, 0x83, 0x65, 0xe1, 0x5a, 0x08, 0x9c, 0x68, 0xd6, 0x19, 0x00,
            0x00, 0x00, 0x00, 0x00,
        ]);

        let mut out = [0u8; 100];
        let n = init.encode(&mut out).unwrap();
        assert_eq!(&out[..n], &expected[..]);
        assert_eq!(init.encoded_len(), expected.len());
        assert_eq!(Message::Init(init).encoded_len(), expected.len());

        let back = decode(&expected).unwrap();
        assert_eq!(back, init);
        assert!(back.features.is_set(9) && back.features.is_set(15));
        assert_eq!(back.networks().collect::<Vec<_>>(), [&mainnet()]);
    }

    #[test]
    fn round_trip_every_field() {
        let chains = [mainnet(), testnet()];
        let addr = [0x01, 127, 0, 0, 1, 0x26, 0x07]; // IPv4 127.0.0.1:9735
        let init = Init {
            global_features: Features::new(&[0x02]),
            features: Features::new(&[0x01, 0x00, 0x80]),
            networks: Some(Networks::from_chains(&chains)),
            remote_addr: Some(&addr),
            mirrors: None,
        };
        let mut out = [0u8; 200];
        let n = init.encode(&mut out).unwrap();
        assert_eq!(n, init.encoded_len());
        assert_eq!(decode(&out[..n]), Ok(init));

        let empty = Init::default();
        let n = empty.encode(&mut out).unwrap();
        assert_eq!(&out[..n], &[0x00, 0x10, 0, 0, 0, 0]);
        assert_eq!(decode(&out[..n]), Ok(empty));
    }

    #[test]
    fn require_chain_refuses_a_missing_or_other_network() {
        let chains = [testnet(), mainnet()];
        let both = Init::new(Features::empty(), Some(Networks::from_chains(&chains)));
        assert_eq!(both.require_chain(&mainnet()), Ok(()));
        let only_testnet = Init::new(Features::empty(), Some(Networks::from_chains(&chains[..1])));
        assert_eq!(
            only_testnet.require_chain(&mainnet()),
            Err(InitRefusal::WrongNetwork)
        );
        assert_eq!(
            Init::default().require_chain(&mainnet()),
            Err(InitRefusal::MissingNetworks)
        );
        let required = Init::new(Features::new(&[0x01]), Some(Networks::from_chains(&chains)));
        assert_eq!(
            required.require_chain(&mainnet()),
            Err(InitRefusal::UnknownRequiredFeature(0))
        );
    }

    #[test]
    fn networks_helpers() {
        let chains = [testnet(), mainnet()];
        let both = Init::new(Features::empty(), Some(Networks::from_chains(&chains)));
        assert!(both.accepts_chain(&mainnet()));
        assert_eq!(both.networks().len(), 2);

        let only_testnet = Init::new(Features::empty(), Some(Networks::from_chains(&chains[..1])));
        assert!(!only_testnet.accepts_chain(&mainnet()));

        let none_sent = Init::default();
        assert!(none_sent.accepts_chain(&mainnet()));
        assert_eq!(none_sent.networks().next(), None);

        let empty_list = Init::new(Features::empty(), Some(Networks::empty()));
        assert!(!empty_list.accepts_chain(&mainnet()));

        assert_eq!(Networks::from_bytes(&[0; 33]), None);
        assert_eq!(Networks::from_bytes(&[0; 64]).map(|n| n.len()), Some(2));
    }

    #[test]
    fn features_are_the_union_and_unknown_even_bits_fail() {
        // Bit 0 (required) in globalfeatures, bit 3 (optional) and 16 (required) in features.
        let init = Init {
            global_features: Features::new(&[0x01]),
            features: Features::new(&[0x01, 0x00, 0x08]),
            ..Init::default()
        };
        let combined = init.combined_features();
        assert_eq!(combined.iter().collect::<Vec<_>>(), [0, 3, 16]);
        assert_eq!(init.first_unknown_required_feature(&[]), Some(0));
        assert_eq!(init.first_unknown_required_feature(&[0]), Some(16));
        assert_eq!(init.first_unknown_required_feature(&[1, 17]), None);
    }

    #[test]
    fn appendix_c_extensions() {
        let base = hex("001000000000");
        let init = decode(&base).unwrap();
        assert_eq!(init, Init::default());

        // Two unknown odd records are skipped.
        assert_eq!(
            decode(&hex("001000000000c9012acb0104")),
            Ok(Init::default())
        );

        let tlv_err = |error| {
            Err(DecodeError::InvalidTlvStream {
                msg_type: 16,
                error,
            })
        };
        assert_eq!(
            decode(&hex("00100000000001")),
            tlv_err(TlvError::Truncated {
                field: "length",
                needed: 1,
                available: 0
            })
        );
        assert_eq!(
            decode(&hex("001000000000ca012a")),
            tlv_err(TlvError::UnknownEvenType { ty: 0xca })
        );
        assert_eq!(
            decode(&hex("001000000000c90101c90102")),
            tlv_err(TlvError::NotStrictlyIncreasing {
                prev: 0xc9,
                ty: 0xc9
            })
        );
    }

    #[test]
    fn tlv_rule_violations_in_init() {
        let tlv_err = |error| {
            Err(DecodeError::InvalidTlvStream {
                msg_type: 16,
                error,
            })
        };
        // networks of 33 bytes.
        let mut bad = hex("0010 0000 0000 01 21");
        bad.extend_from_slice(&[0; 33]);
        assert_eq!(
            decode(&bad),
            tlv_err(TlvError::InvalidLength {
                ty: 1,
                len: 33,
                expected: "a multiple of 32"
            })
        );
        // remote_addr (3) before networks (1).
        assert_eq!(
            decode(&hex("0010 0000 0000 03 01 aa 01 00")),
            tlv_err(TlvError::NotStrictlyIncreasing { prev: 3, ty: 1 })
        );
        // Non-minimal BigSize type (1 written on 3 bytes).
        assert_eq!(
            decode(&hex("0010 0000 0000 fd0001 00")),
            tlv_err(TlvError::NonMinimalBigSize { field: "type" })
        );
        // Non-minimal BigSize length (0 written on 3 bytes).
        assert_eq!(
            decode(&hex("0010 0000 0000 01 fd0000")),
            tlv_err(TlvError::NonMinimalBigSize { field: "length" })
        );
        // Unknown even record.
        assert_eq!(
            decode(&hex("0010 0000 0000 02 00")),
            tlv_err(TlvError::UnknownEvenType { ty: 2 })
        );
        // Length overrunning the stream.
        assert_eq!(
            decode(&hex("0010 0000 0000 03 05 aabb")),
            tlv_err(TlvError::LengthExceedsStream {
                ty: 3,
                len: 5,
                remaining: 2
            })
        );
        // An empty networks record is valid and means "no chains".
        let bytes = hex("0010 0000 0000 01 00");
        let init = decode(&bytes).unwrap();
        assert_eq!(init.networks, Some(Networks::empty()));
    }

    #[test]
    fn truncated_at_every_byte() {
        let chains = [mainnet()];
        let addr = [0x01, 10, 0, 0, 1, 0x26, 0x07];
        let init = Init {
            global_features: Features::new(&[0x02]),
            features: Features::new(&[0x80, 0x01]),
            networks: Some(Networks::from_chains(&chains)),
            remote_addr: Some(&addr),
            mirrors: None,
        };
        let mut out = [0u8; 100];
        let n = init.encode(&mut out).unwrap();
        let full = &out[..n];
        // 2 type + 2 gflen + 1 + 2 flen + 2 = 9 bytes before the TLV stream.
        let fixed_end = 9;
        let networks_end = fixed_end + 2 + 32;
        for len in 0..n {
            let got = decode_any(&full[..len]);
            if len < fixed_end {
                assert!(
                    matches!(got, Err(DecodeError::Truncated { .. })),
                    "prefix {len}: {got:?}"
                );
            } else if len == fixed_end {
                // Ends cleanly before the first record.
                assert!(got.is_ok(), "prefix {len}: {got:?}");
            } else if len == networks_end {
                // Ends cleanly between records: a valid init without remote_addr.
                let Ok(Message::Init(short)) = got else {
                    panic!("prefix {len}: {got:?}")
                };
                assert_eq!(short.remote_addr, None);
                assert_eq!(short.networks, init.networks);
            } else {
                assert!(
                    matches!(
                        got,
                        Err(DecodeError::InvalidTlvStream {
                            msg_type: 16,
                            error: TlvError::Truncated { .. }
                                | TlvError::LengthExceedsStream { .. }
                        })
                    ),
                    "prefix {len}: {got:?}"
                );
            }
        }
        // The field names along the way.
        assert_eq!(
            decode_any(&full[..3]),
            Err(DecodeError::Truncated {
                field: "gflen",
                needed: 2,
                available: 1
            })
        );
        assert_eq!(
            decode_any(&full[..4]),
            Err(DecodeError::Truncated {
                field: "globalfeatures",
                needed: 1,
                available: 0
            })
        );
        assert_eq!(
            decode_any(&full[..6]),
            Err(DecodeError::Truncated {
                field: "flen",
                needed: 2,
                available: 1
            })
        );
        assert_eq!(
            decode_any(&full[..8]),
            Err(DecodeError::Truncated {
                field: "features",
                needed: 2,
                available: 1
            })
        );
    }

    fn decode_any(bytes: &[u8]) -> Result<Message<'_>, DecodeError> {
        Message::decode(bytes)
    }

    #[test]
    fn encode_errors() {
        let chains = [mainnet()];
        let init = Init::new(Features::new(&[0x01]), Some(Networks::from_chains(&chains)));
        let needed = init.encoded_len();
        for size in 0..needed {
            let mut out = vec![0u8; size];
            assert_eq!(
                init.encode(&mut out),
                Err(EncodeError::BufferTooSmall {
                    needed,
                    available: size
                })
            );
        }
        let huge = vec![0u8; 70_000];
        let too_long = Init::new(Features::new(&huge), None);
        let mut out = vec![0u8; 80_000];
        assert!(matches!(
            too_long.encode(&mut out),
            Err(EncodeError::MessageTooLong { .. })
        ));
        let mut w = Writer::new(&mut out);
        assert_eq!(
            too_long.write_payload(&mut w),
            Err(EncodeError::FieldTooLong {
                field: "features",
                len: 70_000,
                max: 65535
            })
        );
    }
}
