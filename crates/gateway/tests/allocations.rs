//! Serving allocates nothing per message once warm: gateway and client in this process,
//! every allocation counted while a warm connection receives 100,000 headers twice (123
//! `headers` messages each, or 60 `headers_compact`), with pooled and with fixed buffers.

use std::time::Duration;

use lightwire_alloc::{CountingAllocator, snapshot};
use lightwire_gateway::client::{Client, Framing};
use lightwire_gateway::served::ServedChain;
use lightwire_gateway::server::{Buffers, Limits};
use lightwire_wire::{GetHeaders, Message};

mod common;

#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator::system();

/// Ask for `count` headers from height 1 and read the answer; returns the messages.
async fn fetch(client: &mut Client, id: u32, count: u32) -> u32 {
    let req = GetHeaders {
        id,
        max_count: count,
        stop_hash: [0; 32],
        locator: &[],
    };
    client.send(&Message::GetHeaders(req)).await.unwrap();
    let mut messages = 0;
    loop {
        let last = client
            .recv(|m| match Message::decode(m) {
                Ok(Message::Headers(h)) => Some(h.last),
                Ok(Message::HeadersCompact(h)) => Some(h.last),
                _ => None,
            })
            .await
            .unwrap();
        if let Some(last) = last {
            messages += 1;
            if last {
                return messages;
            }
        }
    }
}

// One thread: the counts must not include another test's work.
#[tokio::test(flavor = "current_thread")]
async fn serving_allocates_nothing_per_message_once_warm() {
    let cases = [
        (Buffers::pooled(2), false),
        (Buffers::Fixed, false),
        (Buffers::pooled(2), true),
        (Buffers::Fixed, true),
    ];
    for (buffers, compact) in cases {
        let chain = ServedChain::generate(100_000, 2_000_000_000).unwrap();
        let gw = common::start(chain, Limits::default(), buffers).await;
        let mut client = if compact {
            common::compact_client(&gw, Framing::OnePerFrame).await
        } else {
            common::client(&gw, Framing::OnePerFrame).await
        };
        // Warm up: init, tip, and whole answers (pools filled, buffers grown; the runtime's
        // own bookkeeping grows once on the first long answer, measured at 64 bytes).
        for id in 1..=3 {
            fetch(&mut client, id, 100_000).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;

        let before = snapshot();
        let messages = fetch(&mut client, 4, 100_000).await + fetch(&mut client, 5, 100_000).await;
        let used = snapshot().since(&before);
        assert_eq!(messages, if compact { 2 * 60 } else { 2 * 123 });
        assert_eq!(
            used.allocations, 0,
            "{} allocations ({} bytes) for {messages} messages",
            used.allocations, used.bytes_allocated
        );
    }
}
