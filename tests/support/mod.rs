//! Helpers shared by the interop tests: the LDK node ([`ldk`]), our peer ([`ours`]), and
//! the steps both sides take together (handshakes, `init`).

pub mod ldk;
pub mod ours;

use lightning::bitcoin::secp256k1;
use lightning::ln::msgs::SocketAddress;
use lightning::types::features::InitFeatures;
use lightwire_noise::{
    ACT_ONE_LEN, ACT_THREE_LEN, ACT_TWO_LEN, Initiator, PublicKey, Responder, SecretKey,
};
use lightwire_wire::{ChainHash, Features, Init, Message, Networks};

use ldk::{LdkNode, MemSocket};
use ours::OurPeer;

/// Regtest's genesis block hash in internal byte order (as `networks` carries it), written
/// out here rather than taken from LDK so that a byte-order slip on either side shows.
pub const REGTEST: ChainHash =
    hex32("06226e46111a0b59caaf126043eb5bbf28c34f3a5e332a1fc7b2b73cf188910f");
/// Mainnet's genesis block hash, internal byte order.
pub const MAINNET: ChainHash =
    hex32("6fe28c0ab6f1b372c1a6a246ae63f74f931e8365e15a089c68d6190000000000");
/// Testnet3's genesis block hash, internal byte order.
pub const TESTNET3: ChainHash =
    hex32("43497fd7f826957108f4a30fd9cec3aeba79972084e90ead01ea330900000000");

const fn hex32(s: &str) -> [u8; 32] {
    const fn nibble(c: u8) -> u8 {
        match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => panic!("not lowercase hex"),
        }
    }
    let s = s.as_bytes();
    assert!(s.len() == 64);
    let mut out = [0u8; 32];
    let mut i = 0;
    while i < 32 {
        out[i] = (nibble(s[2 * i]) << 4) | nibble(s[2 * i + 1]);
        i += 1;
    }
    out
}

/// A fixed secret key: 32 copies of `b`. Each role in a test uses its own `b`.
pub fn key(b: u8) -> SecretKey {
    SecretKey::from_bytes(&[b; 32]).expect("32 equal non-zero bytes below the order")
}

/// Our key as LDK's type.
pub fn to_ldk(key: &PublicKey) -> secp256k1::PublicKey {
    secp256k1::PublicKey::from_slice(key.as_bytes()).expect("a valid compressed key")
}

/// LDK's key as our type.
pub fn from_ldk(key: &secp256k1::PublicKey) -> PublicKey {
    PublicKey::from_slice(&key.serialize()).expect("a valid compressed key")
}

/// The set bits of an LDK feature field, lowest first, read from LDK's own little-endian
/// bytes (independently of lightwire-wire's big-endian parser).
pub fn ldk_bits(features: &InitFeatures) -> Vec<usize> {
    let flags = features.le_flags();
    (0..flags.len() * 8)
        .filter(|bit| flags[bit / 8] & (1 << (bit % 8)) != 0)
        .collect()
}

/// Our initiator dials LDK (which accepts with `new_inbound_connection`) and completes
/// the three acts. LDK's `init` is then waiting in the socket.
pub fn dial_ldk(
    ldk: &LdkNode,
    our_static: SecretKey,
    ephemeral: SecretKey,
) -> (OurPeer, MemSocket) {
    let (initiator, act_one) = Initiator::start(our_static, from_ldk(&ldk.node_id()), ephemeral);
    let mut socket = ldk.accept();
    ldk.deliver(&mut socket, &act_one, 4096)
        .expect("LDK accepts act one");
    let act_two = socket.take_sent();
    assert_eq!(
        act_two.len(),
        ACT_TWO_LEN,
        "LDK answers act one with act two alone"
    );
    let (act_three, transport) = initiator
        .read_act_two(&act_two)
        .expect("LDK's act two verifies");
    ldk.deliver(&mut socket, &act_three, 4096)
        .expect("LDK accepts act three");
    (OurPeer::new(transport), socket)
}

/// LDK dials us (`new_outbound_connection`) and our responder completes the three acts.
/// Returns our peer, the socket, and the bytes LDK sent after act three (its `init`).
pub fn accept_ldk(
    ldk: &LdkNode,
    our_static: SecretKey,
    ephemeral: SecretKey,
    remote_address: Option<SocketAddress>,
) -> (OurPeer, MemSocket, Vec<u8>) {
    let our_id = to_ldk(&our_static.public_key());
    let (mut socket, act_one) = ldk.dial(our_id, remote_address);
    assert_eq!(act_one.len(), ACT_ONE_LEN);
    let (responder, act_two) = Responder::start(our_static, ephemeral)
        .read_act_one(&act_one)
        .expect("LDK's act one verifies");
    ldk.deliver(&mut socket, &act_two, 4096)
        .expect("LDK accepts act two");
    let sent = socket.take_sent();
    assert!(
        sent.len() > ACT_THREE_LEN,
        "LDK sends its init right behind act three"
    );
    let (act_three, after) = sent.split_at(ACT_THREE_LEN);
    let transport = responder
        .read_act_three(act_three)
        .expect("LDK's act three verifies");
    (OurPeer::new(transport), socket, after.to_vec())
}

/// Append our `init` to `wire`: a minimal feature field with exactly `feature_bits` set,
/// and `networks` if given.
pub fn send_init(
    us: &mut OurPeer,
    wire: &mut Vec<u8>,
    feature_bits: &[usize],
    networks: Option<&[ChainHash]>,
) {
    let mut field = [0u8; 64];
    let features = Features::write_bits(feature_bits, &mut field).expect("bits fit 64 bytes");
    let init = Init::new(features, networks.map(Networks::from_chains));
    us.send(wire, Message::Init(init));
}

/// Our side of a session past `init`, with LDK connected to us: dial LDK, read and
/// check its `init`, send ours (`feature_bits`, `networks`) and see LDK accept it.
pub fn established_session(
    ldk: &LdkNode,
    our_static: SecretKey,
    ephemeral: SecretKey,
    feature_bits: &[usize],
    networks: Option<&[ChainHash]>,
) -> (OurPeer, MemSocket) {
    let our_id = to_ldk(&our_static.public_key());
    let (mut us, mut socket) = dial_ldk(ldk, our_static, ephemeral);
    let mut inits = 0;
    us.receive_all(&socket.take_sent(), &[4096], |m| match m {
        Message::Init(_) => inits += 1,
        other => panic!("LDK's first message must be init, got {other:?}"),
    });
    assert_eq!(inits, 1);
    let mut wire = Vec::new();
    send_init(&mut us, &mut wire, feature_bits, networks);
    ldk.deliver(&mut socket, &wire, 4096)
        .expect("LDK accepts our init");
    assert!(ldk.peer(&our_id).is_some(), "LDK counts us as connected");
    (us, socket)
}
