//! Our side: a `lightwire_noise` transport with one `FrameBuffer` to send from and one
//! `FrameReader` to reassemble what arrives, and `lightwire_wire` to encode and decode.

use lightwire_noise::{
    FrameBuffer, FrameReader, PublicKey, ReceiveError, Receiver, Sender, Transport,
};
use lightwire_wire::{EncodeError, Message};

/// One established connection, as the lightwire client or gateway would hold it.
pub struct OurPeer {
    tx: Sender,
    rx: Receiver,
    reader: FrameReader,
    out: FrameBuffer,
    remote: PublicKey,
    frames_sent: usize,
    frames_received: usize,
}

impl OurPeer {
    /// Take over a transport fresh from the handshake.
    pub fn new(transport: Transport) -> Self {
        let remote = *transport.remote_static();
        let (tx, rx) = transport.split();
        OurPeer {
            tx,
            rx,
            reader: FrameReader::new(),
            out: FrameBuffer::new(),
            remote,
            frames_sent: 0,
            frames_received: 0,
        }
    }

    /// The peer's static key as the handshake established it.
    pub fn remote_static(&self) -> PublicKey {
        self.remote
    }

    /// Encode a message straight into the frame buffer's body with `encode` (which returns
    /// the length written, as every `lightwire_wire` encoder does), seal it in place, and
    /// append the frame to `wire`.
    pub fn send_with(
        &mut self,
        wire: &mut Vec<u8>,
        encode: impl FnOnce(&mut [u8]) -> Result<usize, EncodeError>,
    ) {
        let len = encode(self.out.body_mut()).expect("message fits a frame");
        let frame = self.out.seal(&mut self.tx, len).expect("seal");
        wire.extend_from_slice(frame);
        self.frames_sent += 1;
    }

    /// [`Self::send_with`] for a decoded-form message.
    pub fn send(&mut self, wire: &mut Vec<u8>, message: Message<'_>) {
        self.send_with(wire, |body| message.encode(body));
    }

    /// Feed `stream` to the frame reader in chunks whose sizes cycle through `chunks`
    /// (chunk boundaries need not match frames), decoding every completed message with
    /// `lightwire_wire` and handing it to `on_message`. Returns how many messages
    /// completed, or the transport's error. A message that decrypts but does not decode
    /// fails the test.
    pub fn receive(
        &mut self,
        stream: &[u8],
        chunks: &[usize],
        mut on_message: impl FnMut(Message<'_>),
    ) -> Result<usize, ReceiveError> {
        assert!(!chunks.is_empty(), "at least one chunk size");
        let mut messages = 0;
        let mut rest = stream;
        for &size in chunks.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (mut chunk, tail) = rest.split_at(size.clamp(1, rest.len()));
            rest = tail;
            while !chunk.is_empty() {
                let (taken, message) = self.reader.read(&mut self.rx, chunk)?;
                chunk = &chunk[taken..];
                if let Some(bytes) = message {
                    let decoded = Message::decode(bytes).unwrap_or_else(|e| {
                        panic!("lightwire-wire cannot decode what LDK sent: {e:?}: {bytes:02x?}")
                    });
                    on_message(decoded);
                    messages += 1;
                }
            }
        }
        self.frames_received += messages;
        Ok(messages)
    }

    /// [`Self::receive`] that also requires the stream to end on a frame boundary.
    pub fn receive_all(
        &mut self,
        stream: &[u8],
        chunks: &[usize],
        on_message: impl FnMut(Message<'_>),
    ) -> usize {
        let n = self
            .receive(stream, chunks, on_message)
            .expect("LDK's frames open");
        assert_eq!(
            self.reader.buffered(),
            0,
            "LDK's output ended inside a frame"
        );
        n
    }

    /// Frames sealed so far (each used two nonces of the sending key).
    pub fn frames_sent(&self) -> usize {
        self.frames_sent
    }

    /// Frames opened so far (each used two nonces of the receiving key).
    pub fn frames_received(&self) -> usize {
        self.frames_received
    }

    /// Whether the receiving half refused something and is now closed for good.
    pub fn receiver_failed(&self) -> bool {
        self.rx.is_failed()
    }
}
