//! Zero heap allocations per message once warm, in both directions, across key
//! rotations: natively (`cargo test`) and in headless Chromium (wasm-bindgen-test).
//!
//! Counted on the test's own thread ([`lightwire_alloc::thread_snapshot`]): the test
//! harness's main thread allocates for its bookkeeping while a test runs, and on a loaded
//! machine that could land inside the counted window (4 allocations, 900 bytes, seen
//! once in CI with the process-wide counters).

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;
#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

use lightwire_alloc::{CountingAllocator, thread_snapshot};
use lightwire_noise::test_util::connected_pair;
use lightwire_noise::{FrameBuffer, FrameReader, Receiver, Sender};

#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator::system();

/// Encode `message` into the frame buffer's body, seal it, and feed the frame through
/// the reader in two chunks (as a WebSocket might deliver it); check what comes out.
fn send(
    tx: &mut Sender,
    buf: &mut FrameBuffer,
    reader: &mut FrameReader,
    rx: &mut Receiver,
    message: &[u8],
) {
    buf.body_mut()[..message.len()].copy_from_slice(message);
    let frame = buf.seal(tx, message.len()).expect("seal");
    let (first, second) = frame.split_at(frame.len() / 2);
    let (taken, received) = reader.read(rx, first).expect("first half");
    assert!(taken == first.len() && received.is_none());
    let (taken, received) = reader.read(rx, second).expect("second half");
    assert_eq!(taken, second.len());
    // Slice equality is a memcmp: cheap even in an unoptimised test build.
    assert!(
        received.expect("a whole message") == message,
        "message differs"
    );
}

#[test]
fn zero_allocations_per_message_both_directions() {
    let (initiator, responder) = connected_pair();
    let (mut a_tx, mut a_rx) = initiator.split();
    let (mut b_tx, mut b_rx) = responder.split();
    let (mut a_buf, mut b_buf) = (FrameBuffer::new(), FrameBuffer::new());
    let (mut a_reader, mut b_reader) = (FrameReader::new(), FrameReader::new());
    // Messages of 0, 1, 100 and 65,535 bytes, made before counting starts.
    let pattern: Vec<u8> = (0..65535u32).map(|i| (i * 7 + 3) as u8).collect();
    let lengths = [0usize, 100, 65535, 1];

    // Warm up: every buffer exists, every code path has run once.
    for &len in &lengths {
        send(
            &mut a_tx,
            &mut a_buf,
            &mut b_reader,
            &mut b_rx,
            &pattern[..len],
        );
        send(
            &mut b_tx,
            &mut b_buf,
            &mut a_reader,
            &mut a_rx,
            &pattern[..len],
        );
    }

    let before = thread_snapshot();
    // 1,200 messages each way: 2,400 nonces per direction, so two key rotations each.
    for i in 0..1200usize {
        let message = &pattern[i % 3..][..lengths[i % 4].min(65535 - i % 3)];
        send(&mut a_tx, &mut a_buf, &mut b_reader, &mut b_rx, message);
        send(&mut b_tx, &mut b_buf, &mut a_reader, &mut a_rx, message);
    }
    let during = thread_snapshot().since(&before);
    assert_eq!(
        during.allocations, 0,
        "allocations during 2,400 messages: {during:?}"
    );
    assert_eq!(during.bytes_allocated, 0);
}
