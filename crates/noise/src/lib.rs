//! The Lightning BOLT 8 encrypted transport: `Noise_XK_secp256k1_ChaChaPoly_SHA256`.
//!
//! Sans-IO: nothing here owns a socket, a timer or a random number generator. The caller
//! feeds bytes in and sends the bytes that come out, and supplies the ephemeral key (so
//! that the same code serves a browser, a tokio server and the specification's test
//! vectors).
//!
//! * Handshake: [`Initiator`] (knows the responder's static key) and [`Responder`]
//!   (learns the initiator's static key from act three). Acts are 50, 50 and 66 bytes;
//!   every failure the specification names is its own [`HandshakeError`] variant.
//! * Transport: [`Transport`] splits into a [`Sender`] and a [`Receiver`] that work
//!   independently. A message of 0..=65535 bytes becomes a frame of an 18-byte sealed
//!   length, the sealed body and its 16-byte MAC; keys rotate every 1000 nonces in each
//!   direction.
//! * Buffers: [`Sender::seal_in_place`] and [`Receiver`]'s `open_*` work in slices the
//!   caller lends; [`FrameBuffer`] and [`FrameReader`] own one fixed buffer each, so a
//!   steady stream of messages allocates nothing.
//!
//! * Observation: every intermediate value, secrets included, goes to an [`Observer`]
//!   rather than to trace calls. The default, [`Silent`], compiles to nothing; the BOLT 8
//!   vector tests install a recording one through [`Initiator::start_observed`] and
//!   [`Responder::start_observed`].
//!
//! Secrets (static and ephemeral keys, chaining keys, cipher keys) are zeroized on drop.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod cipher;
mod handshake;
mod keys;
mod observe;
// ChaCha20-Poly1305 on wasm SIMD128 (RustCrypto has no wasm SIMD backend); see cipher.rs.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128;
mod transport;

#[cfg(test)]
mod vectors;

/// Test support, behind the `test-util` feature: never for real connections.
#[cfg(any(test, feature = "test-util"))]
pub mod test_util {
    use crate::{Initiator, Responder, SecretKey, Transport};

    /// An initiator/responder pair connected by a real handshake, with fixed public test
    /// keys (so anyone can decrypt their traffic): (initiator, responder).
    pub fn connected_pair() -> (Transport, Transport) {
        let key = |b: u8| SecretKey::from_bytes(&[b; 32]).expect("valid test key");
        let responder_static = key(0x21);
        let (initiator, act1) =
            Initiator::start(key(0x11), responder_static.public_key(), key(0x12));
        let (responder, act2) = Responder::start(responder_static, key(0x22))
            .read_act_one(&act1)
            .expect("act one");
        let (act3, initiator) = initiator.read_act_two(&act2).expect("act two");
        let responder = responder.read_act_three(&act3).expect("act three");
        (initiator, responder)
    }
}

pub use handshake::{
    AwaitingActOne, AwaitingActThree, AwaitingActTwo, HandshakeError, Initiator, Responder,
};
pub use keys::{KeyError, PublicKey, SecretKey};
pub use observe::{Observer, Silent};
pub use transport::{
    FrameBuffer, FrameReader, ReceiveError, Receiver, SendError, Sender, Transport,
};

/// Length of act one (initiator to responder): version, ephemeral key, MAC.
pub const ACT_ONE_LEN: usize = 50;
/// Length of act two (responder to initiator): version, ephemeral key, MAC.
pub const ACT_TWO_LEN: usize = 50;
/// Length of act three (initiator to responder): version, sealed static key, MAC.
pub const ACT_THREE_LEN: usize = 66;
/// The only handshake version this specification defines.
pub const HANDSHAKE_VERSION: u8 = 0;
/// Length of a Poly1305 tag.
pub const MAC_LEN: usize = 16;
/// Length of the sealed length prefix at the start of every frame: 2 bytes plus a MAC.
pub const LENGTH_HEADER_LEN: usize = 2 + MAC_LEN;
/// Largest message a frame can carry (the length prefix is a u16).
pub const MAX_MESSAGE_LEN: usize = 65535;
/// Largest frame on the wire: sealed length, largest body, body MAC.
pub const MAX_FRAME_LEN: usize = LENGTH_HEADER_LEN + MAX_MESSAGE_LEN + MAC_LEN;
/// Nonces used with one key before it rotates (two per message: length and body).
pub const KEY_ROTATION_INTERVAL: u64 = 1000;

/// Length of a whole frame for a message of `message_len` bytes.
pub const fn frame_len(message_len: usize) -> usize {
    LENGTH_HEADER_LEN + message_len + MAC_LEN
}
