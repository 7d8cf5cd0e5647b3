//! Observation of the handshake's and transport's intermediate values, in the manner of
//! rustls's `KeyLog`.
//!
//! Why this exists: the BOLT 8 test vectors print every value the handshake and the
//! transport compute (hashes, chaining keys, ECDH results, cipher keys, nonces), and the
//! vector tests check each one by name. Most of those values are secrets, so they must not
//! reach logs or trace calls inside the crypto code. Instead the code hands each value to
//! an [`Observer`], a type parameter of the handshake and transport states. The default,
//! [`Silent`], is a zero-sized type whose methods are empty and inlined: with it every
//! hand-off compiles to nothing, so a normal build carries no observation code and no copy
//! of a secret. The vector tests install a recording observer instead.

use crate::SecretKey;

/// Receives every intermediate value of a handshake and of the transport that follows it,
/// under the names the BOLT 8 test vectors print them with.
///
/// **An observer sees secrets** (chaining keys, cipher keys, ECDH results, the responder's
/// ephemeral key): install one only in tests or deliberate debugging, never on a
/// connection whose keys must stay private. Connections started with
/// [`Initiator::start`](crate::Initiator::start) and
/// [`Responder::start`](crate::Responder::start) use [`Silent`], which sees nothing.
///
/// An observer is cloned when a [`Transport`](crate::Transport) is made, so that its
/// [`Sender`](crate::Sender) and [`Receiver`](crate::Receiver) each hold one; a recording
/// observer's clones should share one record (an `Rc` or `Arc` inside).
pub trait Observer: Clone {
    /// A value was computed: `value` under `prefix.name`, or `name` alone when `prefix`
    /// is empty (e.g. `("hkdf", "salt")`, `("", "temp_k1")`, `("rotation", "new_k")`).
    fn note(&self, prefix: &str, name: &str, value: &[u8]);

    /// A secret key was used (the responder's ephemeral key, which the vectors print as
    /// `e.priv`). Separate from [`Self::note`] so that nothing serialises the key unless
    /// the observer asks for its bytes; the default does, and calls [`Self::note`].
    fn note_secret_key(&self, prefix: &str, name: &str, key: &SecretKey) {
        self.note(prefix, name, key.to_bytes().as_slice());
    }

    /// The values that follow belong to a new part of the trace: the next act computed in
    /// the same call (`act_two`, `act_three`), or one part of a frame (`length`, `body`).
    fn section(&self, name: &str);
}

/// The default [`Observer`]: sees nothing. It has no size and its methods are empty and
/// inlined, so the handshake and transport compile as if they had no observer at all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Silent;

impl Observer for Silent {
    #[inline(always)]
    fn note(&self, _prefix: &str, _name: &str, _value: &[u8]) {}

    #[inline(always)]
    fn note_secret_key(&self, _prefix: &str, _name: &str, _key: &SecretKey) {}

    #[inline(always)]
    fn section(&self, _name: &str) {}
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::Sender;
    use crate::cipher::CipherState;

    #[test]
    fn the_default_observer_takes_no_space() {
        assert_eq!(size_of::<Silent>(), 0);
        // A sender is its cipher state and nothing more.
        assert_eq!(size_of::<Sender>(), size_of::<CipherState>());
    }
}
