//! The one place handshake acts are collected. Acts arrive inside WebSocket messages cut
//! any way the network or a hostile peer likes; each side gathers exactly the act's length
//! before the handshake state machine (lightwire-noise) reads it.

use lightwire_noise::ACT_THREE_LEN;

/// Bytes of the act being received (acts one and two are 50 bytes, act three 66).
pub(crate) struct ActBuffer {
    buf: [u8; ACT_THREE_LEN],
    len: usize,
}

impl ActBuffer {
    pub(crate) fn new() -> ActBuffer {
        ActBuffer {
            buf: [0; ACT_THREE_LEN],
            len: 0,
        }
    }

    /// Take bytes from the front of `data` toward an act of `need` bytes (at most
    /// `ACT_THREE_LEN`); the whole act once it is complete (and the buffer starts over).
    pub(crate) fn fill(&mut self, need: usize, data: &mut &[u8]) -> Option<&[u8]> {
        let take = need.saturating_sub(self.len).min(data.len());
        self.buf[self.len..self.len + take].copy_from_slice(&data[..take]);
        self.len += take;
        *data = &data[take..];
        if self.len < need {
            return None;
        }
        self.len = 0;
        Some(&self.buf[..need])
    }

    /// The act [`Self::fill`] last completed, of `len` bytes.
    pub(crate) fn last(&self, len: usize) -> &[u8] {
        &self.buf[..len]
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn an_act_is_whole_however_it_is_cut_and_what_follows_is_left() {
        let act: Vec<u8> = (0..50u8).collect();
        let mut wire = act.clone();
        wire.extend_from_slice(b"next");
        for step in [1, 7, 49, 50, 54] {
            let mut acts = ActBuffer::new();
            let mut got = None;
            let mut rest = Vec::new();
            for piece in wire.chunks(step) {
                let mut data = piece;
                if got.is_none() {
                    got = acts.fill(50, &mut data).map(<[u8]>::to_vec);
                }
                rest.extend_from_slice(data);
            }
            assert_eq!(got.as_deref(), Some(&act[..]), "step {step}");
            assert_eq!(rest, b"next", "step {step}");
        }
    }
}
