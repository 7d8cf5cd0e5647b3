//! Transactions clients hand to the gateway for its node (`send_tx`): checked by the
//! session (one transaction, standard weight and size), queued here, and written to the
//! node as P2P `tx` messages by the task following it. Only while that task is connected;
//! a bounded queue, so a client cannot make the gateway hold much, in which each client
//! (an IP address, an IPv6 /64, as the connection caps count them) has a share of
//! [`RELAY_PER_CLIENT`], so one client cannot make it `busy` for the others.
//!
//! The session checks only a transaction's structure, not its scripts: a well-formed
//! transaction with a bad signature reaches the node, and Bitcoin Core disconnects and
//! discourages a peer that relays one, unless the peer has the `noban` permission (the
//! README's "The node" says how to give it). The gateway then dials again after a second
//! (the pause starts over after a connection that served for a while).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::admission::Source;
use crate::wake::Wake;

use lightwire_proto::session::RelayStatus;

/// Transactions queued for the node at most (each at most 65,529 bytes).
pub const RELAY_QUEUE: usize = 64;

/// Transactions one client may have queued at once: an eighth of the queue, so that it
/// takes eight clients (addresses, or /64s) working together to fill it.
pub const RELAY_PER_CLIENT: usize = RELAY_QUEUE / 8;

/// The queue of transactions to relay, each with the client that sent it.
pub struct TxRelay {
    queue: Mutex<VecDeque<(Option<Source>, Vec<u8>)>>,
    connected: AtomicBool,
    notify: Arc<Wake>,
}

impl TxRelay {
    /// A queue whose task is woken by `notify`.
    pub fn new(notify: Arc<Wake>) -> TxRelay {
        TxRelay {
            queue: Mutex::new(VecDeque::new()),
            connected: AtomicBool::new(false),
            notify,
        }
    }

    /// The task following the node is connected (or not).
    pub fn set_connected(&self, on: bool) {
        self.connected.store(on, Ordering::Relaxed);
    }

    /// Queue `tx` for the node, from nobody in particular (a program built on this
    /// library; the server's sessions use [`Self::push_from`]): `Busy` when the node is
    /// not connected or the queue is full.
    pub fn push(&self, tx: &[u8]) -> RelayStatus {
        self.push_from(None, tx)
    }

    /// Queue `tx` from the client `from` for the node: `Busy` when the node is not
    /// connected, the queue is full, or the client has its share queued
    /// ([`RELAY_PER_CLIENT`]; `None` has no share of its own).
    pub fn push_from(&self, from: Option<Source>, tx: &[u8]) -> RelayStatus {
        if !self.connected.load(Ordering::Relaxed) {
            return RelayStatus::Busy;
        }
        let Ok(mut q) = self.queue.lock() else {
            return RelayStatus::Busy;
        };
        let queued = || q.iter().filter(|(c, _)| *c == from).count();
        if q.len() >= RELAY_QUEUE || (from.is_some() && queued() >= RELAY_PER_CLIENT) {
            return RelayStatus::Busy;
        }
        q.push_back((from, tx.to_vec()));
        drop(q);
        self.notify.wake();
        RelayStatus::Relayed
    }

    /// The transactions to write to the node now.
    pub fn take(&self) -> Vec<Vec<u8>> {
        self.queue
            .lock()
            .map(|mut q| q.drain(..).map(|(_, tx)| tx).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_while_connected_and_bounded() {
        let r = TxRelay::new(Arc::new(Wake::new()));
        assert_eq!(r.push(&[1]), RelayStatus::Busy, "no node yet");
        r.set_connected(true);
        for _ in 0..RELAY_QUEUE {
            assert_eq!(r.push(&[1]), RelayStatus::Relayed);
        }
        assert_eq!(r.push(&[1]), RelayStatus::Busy, "full");
        assert_eq!(r.take().len(), RELAY_QUEUE);
        assert_eq!(r.push(&[2]), RelayStatus::Relayed);
        assert_eq!(r.take(), [vec![2u8]]);
    }

    fn client(ip: &str) -> Option<Source> {
        Some(Source::from(ip.parse::<std::net::IpAddr>().unwrap()))
    }

    /// One client cannot make the queue busy for the others: it gets its share, and the
    /// rest stays open to other clients (an IPv6 client counts by its /64, as under the
    /// connection caps).
    #[test]
    fn one_client_cannot_fill_the_queue_for_everyone() {
        let r = TxRelay::new(Arc::new(Wake::new()));
        r.set_connected(true);
        let greedy = client("2001:db8:1:2::1");
        let mut taken = 0;
        while r.push_from(greedy, &[1]) == RelayStatus::Relayed {
            taken += 1;
            assert!(taken <= RELAY_QUEUE);
        }
        assert!(
            taken < RELAY_QUEUE,
            "its share ({taken}), not the whole queue"
        );
        assert_eq!(
            r.push_from(client("2001:db8:1:2::99"), &[1]),
            RelayStatus::Busy,
            "the same /64"
        );
        for other in ["192.0.2.7", "198.51.100.1", "2001:db8:1:3::1"] {
            assert_eq!(
                r.push_from(client(other), &[2]),
                RelayStatus::Relayed,
                "{other}"
            );
        }
        // Once written to the node, its share is free again.
        assert_eq!(r.take().len(), taken + 3);
        assert_eq!(r.push_from(greedy, &[1]), RelayStatus::Relayed);
    }
}
