//! The transport after the handshake: frames of `sealed length (18) || sealed body || MAC`.
//!
//! [`Sender`] and [`Receiver`] each hold one direction's key, chaining key and nonce, and
//! work in buffers the caller lends, so they can live on different tasks. [`FrameBuffer`]
//! and [`FrameReader`] each own one frame-sized buffer, allocated once.

use crate::cipher::{CipherState, Secret};
use crate::keys::PublicKey;
use crate::observe::{Observer, Silent};
use crate::{LENGTH_HEADER_LEN, MAC_LEN, MAX_FRAME_LEN, MAX_MESSAGE_LEN, frame_len};

/// Why a message could not be sealed. Nothing is consumed: the nonce is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// BOLT 8 frames carry at most 65535 bytes; split the message or refuse it.
    #[error("message of {len} bytes exceeds the BOLT 8 maximum of {MAX_MESSAGE_LEN}")]
    MessageTooLong {
        /// The length asked for.
        len: usize,
    },
    /// The buffer lent for the frame is shorter than the frame.
    #[error("frame needs {needed} bytes, buffer has {available}")]
    BufferTooSmall {
        /// Bytes the frame needs.
        needed: usize,
        /// Bytes the buffer has.
        available: usize,
    },
}

/// Why received bytes were refused. After any of these the [`Receiver`] is failed and the
/// connection must be closed (BOLT 8: a MAC failure MUST close the connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReceiveError {
    /// The sealed length prefix failed its MAC (corruption, a wrong key, or bytes that
    /// are not a frame, such as garbage after a valid frame).
    #[error("length prefix failed its MAC")]
    BadLengthMac,
    /// The body failed its MAC.
    #[error("message body failed its MAC")]
    BadBodyMac,
    /// The slice given as a length prefix was not 18 bytes.
    #[error("length prefix must be {LENGTH_HEADER_LEN} bytes, got {len}")]
    LengthHeaderSize {
        /// Bytes given.
        len: usize,
    },
    /// The slice given as a body is not the declared length plus the MAC.
    #[error("body must be {expected} bytes (with MAC), got {got}")]
    BodySize {
        /// Bytes the length prefix declared, plus the MAC.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// A body was given before its length prefix was opened.
    #[error("body given before its length prefix")]
    BodyWithoutLength,
    /// A length prefix was given while the previous one's body was still expected.
    #[error("length prefix given while a body was due")]
    LengthWithoutBody,
    /// The stream ended inside a frame.
    #[error("stream ended inside a frame: {have} of {needed} bytes")]
    Truncated {
        /// Bytes of the unfinished frame that arrived.
        have: usize,
        /// Bytes that frame needed (the length prefix alone, if it was not complete).
        needed: usize,
    },
    /// A whole frame was given with bytes after its end.
    #[error("{extra} bytes after the end of the frame")]
    TrailingBytes {
        /// Bytes after the frame.
        extra: usize,
    },
    /// An earlier error already failed this receiver.
    #[error("receiver already failed; the connection must close")]
    Failed,
}

/// Both directions of an established connection, and the peer's authenticated static key.
/// `O` is the handshake's [`Observer`]: [`Silent`] unless one was given.
// Clone only for tests (test-util): duplicating live nonce state would reuse nonces.
#[cfg_attr(feature = "test-util", derive(Clone))]
pub struct Transport<O = Silent> {
    sender: Sender<O>,
    receiver: Receiver<O>,
    remote_static: PublicKey,
}

impl<O: Observer> Transport<O> {
    /// Both directions start from the handshake's final chaining key; each half gets a
    /// clone of the handshake's observer.
    pub(crate) fn new(
        sk: Secret,
        rk: Secret,
        ck: &Secret,
        remote_static: PublicKey,
        observer: O,
    ) -> Self {
        Transport {
            sender: Sender {
                cs: CipherState::new(sk, ck.clone()),
                observer: observer.clone(),
            },
            receiver: Receiver {
                cs: CipherState::new(rk, ck.clone()),
                pending_body: None,
                failed: false,
                observer,
            },
            remote_static,
        }
    }

    /// The peer's static key: for an initiator the key it dialled, for a responder the key
    /// act three proved.
    pub fn remote_static(&self) -> &PublicKey {
        &self.remote_static
    }

    /// The sending half.
    pub fn sender(&mut self) -> &mut Sender<O> {
        &mut self.sender
    }

    /// The receiving half.
    pub fn receiver(&mut self) -> &mut Receiver<O> {
        &mut self.receiver
    }

    #[cfg(test)]
    pub(crate) fn sender_ref(&self) -> &Sender<O> {
        &self.sender
    }

    #[cfg(test)]
    pub(crate) fn receiver_ref(&self) -> &Receiver<O> {
        &self.receiver
    }

    /// Separate the halves, to send and receive from different places.
    pub fn split(self) -> (Sender<O>, Receiver<O>) {
        (self.sender, self.receiver)
    }
}

/// The sending half of a transport. `O` is the handshake's [`Observer`]: [`Silent`]
/// unless one was given.
// Clone only for tests (test-util): duplicating live nonce state would reuse nonces.
#[cfg_attr(feature = "test-util", derive(Clone))]
pub struct Sender<O = Silent> {
    cs: CipherState,
    observer: O,
}

impl<O: Observer> Sender<O> {
    /// Seal the `len`-byte message already written at `frame[18..18 + len]`, in place,
    /// into a whole frame at `frame[..frame_len(len)]`; returns that length. This is the
    /// zero-copy path: encode the message straight into the body region, then seal.
    pub fn seal_in_place(&mut self, frame: &mut [u8], len: usize) -> Result<usize, SendError> {
        if len > MAX_MESSAGE_LEN {
            return Err(SendError::MessageTooLong { len });
        }
        let total = frame_len(len);
        if frame.len() < total {
            return Err(SendError::BufferTooSmall {
                needed: total,
                available: frame.len(),
            });
        }
        let (header, rest) = frame.split_at_mut(LENGTH_HEADER_LEN);
        // `len <= 65535` was checked above.
        header[..2].copy_from_slice(&(len as u16).to_be_bytes());
        self.observer.section("length");
        self.observer.note("", "part", b"length");
        self.cs.seal(header, &self.observer);
        self.observer.section("body");
        self.observer.note("", "part", b"body");
        self.cs.seal(&mut rest[..len + MAC_LEN], &self.observer);
        Ok(total)
    }

    /// Copy `message` into `out` and seal it there; returns the frame length.
    pub fn encrypt(&mut self, message: &[u8], out: &mut [u8]) -> Result<usize, SendError> {
        if message.len() > MAX_MESSAGE_LEN {
            return Err(SendError::MessageTooLong { len: message.len() });
        }
        let total = frame_len(message.len());
        if out.len() < total {
            return Err(SendError::BufferTooSmall {
                needed: total,
                available: out.len(),
            });
        }
        out[LENGTH_HEADER_LEN..LENGTH_HEADER_LEN + message.len()].copy_from_slice(message);
        self.seal_in_place(out, message.len())
    }

    #[cfg(test)]
    pub(crate) fn cipher(&self) -> &CipherState {
        &self.cs
    }
}

/// The receiving half of a transport: open a length prefix, then its body, in place.
/// `O` is the handshake's [`Observer`]: [`Silent`] unless one was given.
// Clone only for tests (test-util): duplicating live nonce state would reuse nonces.
#[cfg_attr(feature = "test-util", derive(Clone))]
pub struct Receiver<O = Silent> {
    cs: CipherState,
    /// Body length (without MAC) declared by the last opened prefix.
    pending_body: Option<usize>,
    failed: bool,
    observer: O,
}

impl<O: Observer> Receiver<O> {
    /// Open an 18-byte sealed length prefix; returns the body length that follows it
    /// (the body is that many bytes plus a 16-byte MAC).
    pub fn open_length(&mut self, header: &[u8]) -> Result<usize, ReceiveError> {
        self.guard(|rx| {
            if rx.pending_body.is_some() {
                return Err(ReceiveError::LengthWithoutBody);
            }
            let header: &[u8; LENGTH_HEADER_LEN] = header
                .try_into()
                .map_err(|_| ReceiveError::LengthHeaderSize { len: header.len() })?;
            let mut prefix = [header[0], header[1]];
            let mut mac = [0u8; MAC_LEN];
            mac.copy_from_slice(&header[2..]);
            rx.cs
                .open(&mut prefix, &mac, &rx.observer)
                .map_err(|_| ReceiveError::BadLengthMac)?;
            let len = usize::from(u16::from_be_bytes(prefix));
            rx.pending_body = Some(len);
            Ok(len)
        })
    }

    /// Open a sealed body (the length [`Self::open_length`] returned, plus 16 MAC bytes)
    /// in place; returns the plaintext, a prefix of `body`.
    pub fn open_body<'a>(&mut self, body: &'a mut [u8]) -> Result<&'a mut [u8], ReceiveError> {
        let len = self.guard(|rx| {
            let len = rx.pending_body.ok_or(ReceiveError::BodyWithoutLength)?;
            if body.len() != len + MAC_LEN {
                return Err(ReceiveError::BodySize {
                    expected: len + MAC_LEN,
                    got: body.len(),
                });
            }
            let (plain, mac) = body.split_at_mut(len);
            let mut tag = [0u8; MAC_LEN];
            tag.copy_from_slice(mac);
            rx.cs
                .open(plain, &tag, &rx.observer)
                .map_err(|_| ReceiveError::BadBodyMac)?;
            rx.pending_body = None;
            Ok(len)
        })?;
        Ok(&mut body[..len])
    }

    /// Open exactly one whole frame held in `frame`, in place; returns the message.
    /// A short slice is [`ReceiveError::Truncated`], a long one [`ReceiveError::TrailingBytes`].
    pub fn open_frame<'a>(&mut self, frame: &'a mut [u8]) -> Result<&'a mut [u8], ReceiveError> {
        if self.failed {
            return Err(ReceiveError::Failed);
        }
        if frame.len() < LENGTH_HEADER_LEN {
            self.failed = true;
            return Err(ReceiveError::Truncated {
                have: frame.len(),
                needed: LENGTH_HEADER_LEN,
            });
        }
        let (header, rest) = frame.split_at_mut(LENGTH_HEADER_LEN);
        let len = self.open_length(header)?;
        let needed = len + MAC_LEN;
        if rest.len() != needed {
            self.failed = true;
            return Err(if rest.len() < needed {
                ReceiveError::Truncated {
                    have: LENGTH_HEADER_LEN + rest.len(),
                    needed: frame_len(len),
                }
            } else {
                ReceiveError::TrailingBytes {
                    extra: rest.len() - needed,
                }
            });
        }
        self.open_body(rest)
    }

    /// Whether an error has failed this receiver.
    pub fn is_failed(&self) -> bool {
        self.failed
    }

    /// Run `f` unless already failed; any error fails the receiver for good, so that a
    /// caller that ignores one cannot go on reading with a desynchronised nonce.
    fn guard<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, ReceiveError>,
    ) -> Result<T, ReceiveError> {
        if self.failed {
            return Err(ReceiveError::Failed);
        }
        let r = f(self);
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    #[cfg(test)]
    pub(crate) fn cipher(&self) -> &CipherState {
        &self.cs
    }
}

/// One frame-sized send buffer, allocated once: encode a message into [`Self::body_mut`],
/// then [`Self::seal`] it and send the returned frame.
pub struct FrameBuffer {
    buf: Box<[u8]>,
}

impl Default for FrameBuffer {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameBuffer {
    /// A buffer for the largest frame (65,569 bytes).
    pub fn new() -> Self {
        FrameBuffer {
            buf: vec![0u8; MAX_FRAME_LEN].into_boxed_slice(),
        }
    }

    /// A frame buffer in `buf`, which must be [`MAX_FRAME_LEN`] bytes (else it is handed
    /// back): lets a server lend buffers from a pool to connections only while they write.
    pub fn with_buffer(buf: Box<[u8]>) -> Result<Self, Box<[u8]>> {
        if buf.len() == MAX_FRAME_LEN {
            Ok(FrameBuffer { buf })
        } else {
            Err(buf)
        }
    }

    /// The buffer back (it still holds the last frame, sealed, and its plaintext body
    /// bytes are overwritten by the ciphertext).
    pub fn into_buffer(self) -> Box<[u8]> {
        self.buf
    }

    /// Where the next message's plaintext goes: 65,535 bytes.
    pub fn body_mut(&mut self) -> &mut [u8] {
        &mut self.buf[LENGTH_HEADER_LEN..LENGTH_HEADER_LEN + MAX_MESSAGE_LEN]
    }

    /// Seal the `len` bytes written into [`Self::body_mut`]; returns the frame to send.
    pub fn seal<O: Observer>(
        &mut self,
        sender: &mut Sender<O>,
        len: usize,
    ) -> Result<&[u8], SendError> {
        let total = sender.seal_in_place(&mut self.buf, len)?;
        Ok(&self.buf[..total])
    }

    /// Copy `message` in and seal it; returns the frame to send.
    pub fn encrypt<O: Observer>(
        &mut self,
        sender: &mut Sender<O>,
        message: &[u8],
    ) -> Result<&[u8], SendError> {
        let total = sender.encrypt(message, &mut self.buf)?;
        Ok(&self.buf[..total])
    }
}

/// Reassembles frames from a byte stream whose chunks (TCP reads, WebSocket messages) need
/// not line up with frames: each byte is copied once into a fixed frame-sized buffer and
/// decrypted there in place.
pub struct FrameReader {
    buf: Box<[u8]>,
    filled: usize,
    /// Body length once the current frame's length prefix is open.
    body_len: Option<usize>,
    /// An error ended the stream: every later call says so (found by the `frame` fuzzer:
    /// without this, `finish` reported a dead stream as fine).
    failed: bool,
}

impl Default for FrameReader {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameReader {
    /// A reader with a buffer for the largest frame (65,569 bytes).
    pub fn new() -> Self {
        FrameReader {
            buf: vec![0u8; MAX_FRAME_LEN].into_boxed_slice(),
            filled: 0,
            body_len: None,
            failed: false,
        }
    }

    /// A reader in `buf`, which must be [`MAX_FRAME_LEN`] bytes (else it is handed back).
    /// With [`Self::release`], a server lends readers' buffers from a pool to connections
    /// only while a frame is arriving.
    pub fn with_buffer(buf: Box<[u8]>) -> Result<Self, Box<[u8]>> {
        if buf.len() != MAX_FRAME_LEN {
            return Err(buf);
        }
        Ok(FrameReader {
            buf,
            filled: 0,
            body_len: None,
            failed: false,
        })
    }

    /// The buffer back, when no frame is partly read and no error has ended the stream;
    /// otherwise the reader itself, unchanged. The buffer still holds the last message's
    /// plaintext: clear it if that matters to whoever uses it next.
    pub fn release(self) -> Result<Box<[u8]>, Self> {
        if self.filled == 0 && !self.failed {
            Ok(self.buf)
        } else {
            Err(self)
        }
    }

    /// Take bytes from `input` until a message completes or `input` runs out. Returns how
    /// many bytes were taken and the message if one completed; call again with the rest
    /// of `input` (a chunk can hold several frames).
    ///
    /// ```
    /// # fn demo(reader: &mut lightwire_noise::FrameReader, rx: &mut lightwire_noise::Receiver,
    /// #         mut chunk: &[u8]) -> Result<(), lightwire_noise::ReceiveError> {
    /// while !chunk.is_empty() {
    ///     let (taken, message) = reader.read(rx, chunk)?;
    ///     chunk = &chunk[taken..];
    ///     if let Some(message) = message {
    ///         // handle `message` (borrowed from the reader's buffer)
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn read<'a, O: Observer>(
        &'a mut self,
        rx: &mut Receiver<O>,
        input: &[u8],
    ) -> Result<(usize, Option<&'a mut [u8]>), ReceiveError> {
        if self.failed || rx.is_failed() {
            self.failed = true;
            return Err(ReceiveError::Failed);
        }
        let mut taken = 0;
        loop {
            let needed = self.needed();
            let n = (needed - self.filled).min(input.len() - taken);
            self.buf[self.filled..self.filled + n].copy_from_slice(&input[taken..taken + n]);
            self.filled += n;
            taken += n;
            if self.filled < needed {
                return Ok((taken, None));
            }
            match self.body_len {
                None => match rx.open_length(&self.buf[..LENGTH_HEADER_LEN]) {
                    // A zero-length body still has its MAC, so loop for it.
                    Ok(len) => self.body_len = Some(len),
                    Err(e) => return Err(self.fail(e)),
                },
                Some(len) => {
                    self.filled = 0;
                    self.body_len = None;
                    let body = &mut self.buf[LENGTH_HEADER_LEN..LENGTH_HEADER_LEN + len + MAC_LEN];
                    // The plaintext is the body's first `len` bytes: take only the length
                    // here, so that the error arm can mark the reader failed.
                    if let Err(e) = rx.open_body(body).map(|plain| plain.len()) {
                        return Err(self.fail(e));
                    }
                    return Ok((
                        taken,
                        Some(&mut self.buf[LENGTH_HEADER_LEN..LENGTH_HEADER_LEN + len]),
                    ));
                }
            }
        }
    }

    /// Call when the stream ends: an error if it ended inside a frame.
    pub fn finish(&self) -> Result<(), ReceiveError> {
        if self.failed {
            Err(ReceiveError::Failed)
        } else if self.filled == 0 {
            Ok(())
        } else {
            Err(ReceiveError::Truncated {
                have: self.filled,
                needed: self.needed(),
            })
        }
    }

    /// Remember that the stream failed, and pass the error on.
    fn fail(&mut self, e: ReceiveError) -> ReceiveError {
        self.failed = true;
        e
    }

    /// Bytes of an unfinished frame held.
    pub fn buffered(&self) -> usize {
        self.filled
    }

    fn needed(&self) -> usize {
        match self.body_len {
            None => LENGTH_HEADER_LEN,
            Some(len) => frame_len(len),
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::test_util::connected_pair;

    fn frame_of(sender: &mut Sender, message: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; frame_len(message.len())];
        let n = sender.encrypt(message, &mut out).expect("seal");
        assert_eq!(n, out.len());
        out
    }

    #[test]
    fn error_text_is_pinned_and_has_no_source() {
        use std::error::Error;
        let send = [
            (
                SendError::MessageTooLong { len: 65536 },
                "message of 65536 bytes exceeds the BOLT 8 maximum of 65535",
            ),
            (
                SendError::BufferTooSmall {
                    needed: 40,
                    available: 39,
                },
                "frame needs 40 bytes, buffer has 39",
            ),
        ];
        for (e, text) in send {
            assert_eq!(e.to_string(), text);
            assert!(e.source().is_none(), "{e:?}");
        }
        let receive = [
            (ReceiveError::BadLengthMac, "length prefix failed its MAC"),
            (ReceiveError::BadBodyMac, "message body failed its MAC"),
            (
                ReceiveError::LengthHeaderSize { len: 17 },
                "length prefix must be 18 bytes, got 17",
            ),
            (
                ReceiveError::BodySize {
                    expected: 21,
                    got: 20,
                },
                "body must be 21 bytes (with MAC), got 20",
            ),
            (
                ReceiveError::BodyWithoutLength,
                "body given before its length prefix",
            ),
            (
                ReceiveError::LengthWithoutBody,
                "length prefix given while a body was due",
            ),
            (
                ReceiveError::Truncated {
                    have: 5,
                    needed: 18,
                },
                "stream ended inside a frame: 5 of 18 bytes",
            ),
            (
                ReceiveError::TrailingBytes { extra: 2 },
                "2 bytes after the end of the frame",
            ),
            (
                ReceiveError::Failed,
                "receiver already failed; the connection must close",
            ),
        ];
        for (e, text) in receive {
            assert_eq!(e.to_string(), text);
            assert!(e.source().is_none(), "{e:?}");
        }
    }

    #[test]
    fn both_directions_every_size_class() {
        let (mut a, mut b) = connected_pair();
        for len in [0usize, 1, 2, 100, 1000, 65534, MAX_MESSAGE_LEN] {
            let message: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut frame = frame_of(a.sender(), &message);
            assert_eq!(
                b.receiver().open_frame(&mut frame).expect("a to b"),
                message.as_slice()
            );
            let mut frame = frame_of(b.sender(), &message);
            assert_eq!(
                a.receiver().open_frame(&mut frame).expect("b to a"),
                message.as_slice()
            );
        }
    }

    #[test]
    fn message_over_65535_is_refused_without_using_a_nonce() {
        let (mut a, mut b) = connected_pair();
        let mut buf = vec![0u8; MAX_FRAME_LEN + 1];
        let long = vec![0u8; MAX_MESSAGE_LEN + 1];
        assert_eq!(
            a.sender().encrypt(&long, &mut buf),
            Err(SendError::MessageTooLong { len: 65536 })
        );
        assert_eq!(
            a.sender().seal_in_place(&mut buf, MAX_MESSAGE_LEN + 1),
            Err(SendError::MessageTooLong { len: 65536 })
        );
        assert_eq!(
            a.sender().encrypt(b"hello", &mut buf[..20]),
            Err(SendError::BufferTooSmall {
                needed: 39,
                available: 20
            })
        );
        // The refusals consumed no nonce: the next frame still opens.
        let mut frame = frame_of(a.sender(), b"after");
        assert_eq!(
            b.receiver().open_frame(&mut frame).expect("opens"),
            b"after"
        );
    }

    #[test]
    fn bad_length_mac_fails_the_receiver_for_good() {
        let (mut a, mut b) = connected_pair();
        let mut frame = frame_of(a.sender(), b"hello");
        frame[3] ^= 0x01;
        assert_eq!(
            b.receiver().open_frame(&mut frame),
            Err(ReceiveError::BadLengthMac)
        );
        assert!(b.receiver().is_failed());
        let mut good = frame_of(a.sender(), b"hello");
        assert_eq!(
            b.receiver().open_frame(&mut good),
            Err(ReceiveError::Failed)
        );
    }

    #[test]
    fn bad_body_mac() {
        let (mut a, mut b) = connected_pair();
        for flip in [
            LENGTH_HEADER_LEN,
            LENGTH_HEADER_LEN + 4,
            LENGTH_HEADER_LEN + 5 + 15,
        ] {
            let (mut a2, mut b2) = connected_pair();
            let mut frame = frame_of(a2.sender(), b"hello");
            frame[flip] ^= 0x80;
            assert_eq!(
                b2.receiver().open_frame(&mut frame),
                Err(ReceiveError::BadBodyMac),
                "byte {flip}"
            );
        }
        // A frame from the wrong direction (sealed with the other key) fails too.
        let mut frame = frame_of(b.sender(), b"hello");
        assert_eq!(
            b.receiver().open_frame(&mut frame),
            Err(ReceiveError::BadLengthMac)
        );
        let _ = a.sender();
    }

    #[test]
    fn truncated_and_trailing_frames() {
        let (mut a, mut b) = connected_pair();
        let frame = frame_of(a.sender(), b"hello");
        let mut short = frame[..frame.len() - 1].to_vec();
        assert_eq!(
            b.receiver().open_frame(&mut short),
            Err(ReceiveError::Truncated {
                have: 38,
                needed: 39
            })
        );

        let (mut a, mut b) = connected_pair();
        let mut header_only = frame_of(a.sender(), b"hello")[..10].to_vec();
        assert_eq!(
            b.receiver().open_frame(&mut header_only),
            Err(ReceiveError::Truncated {
                have: 10,
                needed: 18
            })
        );
        // Once failed, every later call says so, whatever it is given.
        assert_eq!(
            b.receiver().open_frame(&mut header_only),
            Err(ReceiveError::Failed)
        );

        let (mut a, mut b) = connected_pair();
        let mut long = frame_of(a.sender(), b"hello");
        long.extend_from_slice(b"garbage");
        assert_eq!(
            b.receiver().open_frame(&mut long),
            Err(ReceiveError::TrailingBytes { extra: 7 })
        );
    }

    #[test]
    fn open_body_and_length_out_of_order() {
        let (mut a, mut b) = connected_pair();
        let mut frame = frame_of(a.sender(), b"hello");
        assert_eq!(
            b.receiver().open_body(&mut frame[18..]),
            Err(ReceiveError::BodyWithoutLength)
        );

        let (mut a, mut b) = connected_pair();
        let frame = frame_of(a.sender(), b"hello");
        assert_eq!(b.receiver().open_length(&frame[..18]), Ok(5));
        assert_eq!(
            b.receiver().open_length(&frame[..18]),
            Err(ReceiveError::LengthWithoutBody)
        );

        let (mut a, mut b) = connected_pair();
        let mut frame = frame_of(a.sender(), b"hello");
        assert_eq!(
            b.receiver().open_length(&frame[..17]),
            Err(ReceiveError::LengthHeaderSize { len: 17 })
        );
        let (mut a2, mut b2) = connected_pair();
        let _ = a.sender();
        frame = frame_of(a2.sender(), b"hello");
        assert_eq!(b2.receiver().open_length(&frame[..18]), Ok(5));
        assert_eq!(
            b2.receiver().open_body(&mut frame[18..30]),
            Err(ReceiveError::BodySize {
                expected: 21,
                got: 12
            })
        );
        let _ = b.receiver();
    }

    #[test]
    fn reader_reassembles_split_and_packed_frames() {
        let (mut a, mut b) = connected_pair();
        let messages: Vec<Vec<u8>> = [0usize, 5, 300, 65535, 1, 0, 70]
            .iter()
            .map(|&n| vec![n as u8; n])
            .collect();
        let mut stream = Vec::new();
        for m in &messages {
            stream.extend_from_slice(&frame_of(a.sender(), m));
        }
        // One byte at a time, then everything in one chunk, then uneven chunks.
        for chunking in [1usize, stream.len(), 7, 18, 34, 4096] {
            let (mut a2, mut b2) = connected_pair();
            let mut stream2 = Vec::new();
            for m in &messages {
                stream2.extend_from_slice(&frame_of(a2.sender(), m));
            }
            let mut reader = FrameReader::new();
            let mut got = Vec::new();
            for chunk in stream2.chunks(chunking) {
                let mut chunk = chunk;
                while !chunk.is_empty() {
                    let (taken, message) = reader.read(b2.receiver(), chunk).expect("valid stream");
                    assert!(taken > 0 || message.is_some(), "progress");
                    chunk = &chunk[taken..];
                    if let Some(m) = message {
                        got.push(m.to_vec());
                    }
                }
            }
            reader.finish().expect("ends on a frame boundary");
            assert_eq!(got, messages, "chunks of {chunking}");
        }
        let _ = (a.sender(), b.receiver(), stream);
    }

    #[test]
    fn buffers_can_be_lent_between_frames_only() {
        let (mut a, mut b) = connected_pair();
        assert!(FrameReader::with_buffer(vec![0; 10].into_boxed_slice()).is_err());
        assert!(FrameBuffer::with_buffer(vec![0; MAX_FRAME_LEN + 1].into_boxed_slice()).is_err());
        let mut out =
            FrameBuffer::with_buffer(vec![0; MAX_FRAME_LEN].into_boxed_slice()).unwrap_or_default();
        let frame = out.encrypt(a.sender(), b"pooled").unwrap().to_vec();
        let _ = out.into_buffer();

        let mut reader =
            FrameReader::with_buffer(vec![0; MAX_FRAME_LEN].into_boxed_slice()).unwrap_or_default();
        // Half a frame: the buffer holds it, so it cannot be given back.
        let (taken, m) = reader.read(b.receiver(), &frame[..20]).unwrap();
        assert!(m.is_none());
        let Err(mut reader) = reader.release() else {
            panic!("a frame is half read: the buffer cannot be given back");
        };
        let (_, m) = reader.read(b.receiver(), &frame[taken..]).unwrap();
        assert_eq!(m.as_deref(), Some(&b"pooled"[..]));
        // Between frames it can; the next reader goes on with the same receiver.
        let Ok(buf) = reader.release() else {
            panic!("between frames the buffer can be given back");
        };
        let mut reader = FrameReader::with_buffer(buf).unwrap_or_default();
        let frame = frame_of(a.sender(), b"again");
        let (_, m) = reader.read(b.receiver(), &frame).unwrap();
        assert_eq!(m.as_deref(), Some(&b"again"[..]));
        // A failed reader keeps its buffer: the stream is over.
        let mut bad = frame_of(a.sender(), b"x");
        bad[0] ^= 1;
        assert!(reader.read(b.receiver(), &bad).is_err());
        assert!(reader.release().is_err());
    }

    #[test]
    fn reader_rejects_garbage_after_a_valid_frame() {
        let (mut a, mut b) = connected_pair();
        let mut stream = frame_of(a.sender(), b"hello");
        stream.extend_from_slice(&[0xAB; 40]);
        let mut reader = FrameReader::new();
        let (taken, message) = reader.read(b.receiver(), &stream).expect("first frame");
        assert_eq!(message.as_deref(), Some(&b"hello"[..]));
        assert_eq!(
            reader
                .read(b.receiver(), &stream[taken..])
                .map(|(n, m)| (n, m.is_some())),
            Err(ReceiveError::BadLengthMac)
        );
    }

    /// Found by the `frame` fuzzer: after an error the reader must not look healthy.
    #[test]
    fn reader_stays_failed_after_an_error() {
        // A bad body MAC, then: empty input, a short input, and finish().
        let (mut a, mut b) = connected_pair();
        let mut frame = frame_of(a.sender(), b"hello");
        frame[LENGTH_HEADER_LEN] ^= 1;
        let mut reader = FrameReader::new();
        assert_eq!(
            reader.read(b.receiver(), &frame).map(|(n, _)| n),
            Err(ReceiveError::BadBodyMac)
        );
        assert_eq!(
            reader.read(b.receiver(), &[]).map(|(n, _)| n),
            Err(ReceiveError::Failed)
        );
        assert_eq!(
            reader.read(b.receiver(), &[0; 5]).map(|(n, _)| n),
            Err(ReceiveError::Failed)
        );
        assert_eq!(reader.finish(), Err(ReceiveError::Failed));

        // A bad length MAC, then finish() with the header still in the buffer.
        let (mut a, mut b) = connected_pair();
        let mut frame = frame_of(a.sender(), b"hello");
        frame[0] ^= 1;
        let mut reader = FrameReader::new();
        assert_eq!(
            reader.read(b.receiver(), &frame[..18]).map(|(n, _)| n),
            Err(ReceiveError::BadLengthMac)
        );
        assert_eq!(reader.finish(), Err(ReceiveError::Failed));

        // A receiver that failed elsewhere fails the reader too.
        let (mut a, mut b) = connected_pair();
        let mut bad = frame_of(a.sender(), b"x");
        bad[2] ^= 1;
        assert!(b.receiver().open_frame(&mut bad).is_err());
        let mut reader = FrameReader::new();
        let good = frame_of(a.sender(), b"y");
        assert_eq!(
            reader.read(b.receiver(), &good).map(|(n, _)| n),
            Err(ReceiveError::Failed)
        );
        assert_eq!(reader.finish(), Err(ReceiveError::Failed));
    }

    #[test]
    fn reader_reports_a_stream_that_ends_mid_frame() {
        let (mut a, mut b) = connected_pair();
        let frame = frame_of(a.sender(), b"hello");
        let mut reader = FrameReader::new();
        let (taken, message) = reader.read(b.receiver(), &frame[..25]).expect("partial");
        assert_eq!((taken, message.is_none()), (25, true));
        assert_eq!(reader.buffered(), 25);
        assert_eq!(
            reader.finish(),
            Err(ReceiveError::Truncated {
                have: 25,
                needed: 39
            })
        );
        let mut reader = FrameReader::new();
        reader.read(b.receiver(), &[]).expect("empty input");
        assert_eq!(reader.finish(), Ok(()));
    }

    #[test]
    fn frame_buffer_seals_what_was_encoded_into_its_body() {
        let (mut a, mut b) = connected_pair();
        let mut buf = FrameBuffer::new();
        buf.body_mut()[..3].copy_from_slice(b"abc");
        let mut frame = buf.seal(a.sender(), 3).expect("seal").to_vec();
        assert_eq!(b.receiver().open_frame(&mut frame).expect("open"), b"abc");
        let mut frame = buf.encrypt(a.sender(), b"defg").expect("seal").to_vec();
        assert_eq!(b.receiver().open_frame(&mut frame).expect("open"), b"defg");
    }

    #[test]
    fn halves_work_apart_across_rotations() {
        let (a, b) = connected_pair();
        let (mut a_tx, mut a_rx) = a.split();
        let (mut b_tx, mut b_rx) = b.split();
        let mut buf = FrameBuffer::new();
        for i in 0..1300u32 {
            let mut f = buf
                .encrypt(&mut a_tx, &i.to_be_bytes())
                .expect("seal")
                .to_vec();
            assert_eq!(b_rx.open_frame(&mut f).expect("a to b"), i.to_be_bytes());
            let mut f = buf
                .encrypt(&mut b_tx, &(!i).to_be_bytes())
                .expect("seal")
                .to_vec();
            assert_eq!(a_rx.open_frame(&mut f).expect("b to a"), (!i).to_be_bytes());
        }
    }
}
