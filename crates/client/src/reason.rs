//! Why a gateway was dropped, typed up to the JavaScript edge: each reason has a stable
//! machine-readable [`DropReason::code`] and a sentence (its `Display`), and says whether
//! the gateway broke a rule (marked bad) or the connection merely failed (reconnect).

use lightwire_chain::ConnectError;
use lightwire_proto::PeerError;

use crate::dispute::DisputeError;
use crate::engine::MempoolError;
use crate::filters::FilterSyncError;
use crate::scan::ScanError;
use crate::silent_scan::SilentFault;
use crate::sync::SyncError;
use crate::tweaks::TweakError;
use crate::wallet::WalletError;

/// What the browser (or a native shell) reports about a socket.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum TransportError {
    /// The WebSocket could not be created (a malformed URL, a blocked port, mixed content).
    #[error("the connection to the gateway could not be opened")]
    OpenFailed,
    /// The WebSocket closed cleanly (by the gateway, or a proxy).
    #[error("the gateway closed the connection")]
    Closed,
    /// The WebSocket was lost (its close code).
    #[error("the connection to the gateway was lost (code {0})")]
    Lost(u16),
    /// No randomness for a handshake key.
    #[error("no randomness for a handshake key")]
    NoRandomness,
}

/// Why a gateway was dropped.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum DropReason {
    /// The connection failed or broke a protocol rule (handshake, `init`, a frame, a
    /// timeout, the gateway's own `error`); a failed handshake or a frame that does not
    /// decrypt is a failure, not a rule broken (see [`PeerError::is_violation`]).
    #[error(transparent)]
    Connection(PeerError),
    /// Its headers or answers broke a sync rule (an invalid header names its height and
    /// rule).
    #[error(transparent)]
    Sync(SyncError),
    /// Its headers link to no block on our chain.
    #[error("the gateway sent headers that link to no block on our chain")]
    Orphan,
    /// Its headers link to no block on our chain, which starts from a checkpoint at this
    /// height: the gateway's chain does not contain the checkpoint (another chain), or it
    /// sent headers of no chain.
    #[error("the gateway's chain does not contain the checkpoint at {0} our store starts from")]
    OffCheckpoint(u32),
    /// It announced tips it did not deliver, this many times.
    #[error("the gateway announced {0} chain tips it did not deliver")]
    Undelivered(u32),
    /// Its answer to a filter request broke a rule.
    #[error(transparent)]
    Filters(FilterSyncError),
    /// Its filters broke a rule (one that does not match its filter header, pieces out of
    /// order), or its answer ended short of what was asked.
    #[error(transparent)]
    Scan(ScanError),
    /// It was found wrong, or broke a rule, in a dispute over filter headers.
    #[error(transparent)]
    Dispute(DisputeError),
    /// It sent a block that is not the stored header's, or withheld one its filter matched.
    #[error(transparent)]
    Wallet(WalletError),
    /// Its mempool digest does not describe the transaction it names, or came unasked.
    #[error(transparent)]
    Mempool(MempoolError),
    /// Its silent-payment tweaks, or what it sent the receiver's scan, broke a rule (a
    /// list the block proves wrong, a word broken, a filter or block not ours).
    #[error(transparent)]
    Silent(SilentFault),
    /// Its answer to our request made no progress in time.
    #[error("the gateway stopped answering our request")]
    RequestTimeout,
    /// The socket closed or failed.
    #[error(transparent)]
    Transport(TransportError),
}

impl DropReason {
    /// Whether the gateway broke a rule: it is marked bad for the session (otherwise it is
    /// reconnected after a backoff).
    pub fn is_violation(&self) -> bool {
        match self {
            DropReason::Connection(e) => e.is_violation(),
            // A header too far in the future is "not yet", not invalid (Bitcoin Core does
            // not punish it either): our clock may be slow. Reconnect and ask again later.
            DropReason::Sync(_) if self.is_future_header() => false,
            DropReason::Sync(_)
            | DropReason::Orphan
            | DropReason::OffCheckpoint(_)
            | DropReason::Undelivered(_)
            | DropReason::Filters(_)
            | DropReason::Dispute(_)
            | DropReason::Wallet(_)
            | DropReason::Mempool(_) => true,
            // An answer cut short may be a reorganisation: asked again after a backoff.
            DropReason::Scan(ScanError::Short { .. }) => false,
            DropReason::Silent(SilentFault::Short { .. }) => false,
            DropReason::Silent(_) => true,
            DropReason::Scan(_) => true,
            DropReason::RequestTimeout | DropReason::Transport(_) => false,
        }
    }

    /// A stable kebab-case code for applications to match on.
    pub fn code(&self) -> &'static str {
        match self {
            DropReason::Connection(e) => match e {
                PeerError::Handshake(_) => "handshake-failed",
                PeerError::Receive(_) => "corrupt-frame",
                PeerError::Decode(_) => "undecodable-message",
                PeerError::MissingNetworks | PeerError::WrongNetwork => "wrong-network",
                PeerError::UnknownRequiredFeature(_) => "unknown-required-feature",
                PeerError::GatewayError(_) => "gateway-error",
                PeerError::NoInitFirst => "no-init-first",
                PeerError::HandshakeTimeout => "handshake-timeout",
                PeerError::KeepaliveTimeout => "keepalive-timeout",
                PeerError::PingFlood => "ping-flood",
                PeerError::NotReady | PeerError::Send(_) | PeerError::Encode(_) => "internal-error",
                PeerError::Failed => "connection-failed",
                PeerError::FilterHeadersDisjoint => "filter-headers-disjoint",
            },
            DropReason::Sync(_) if self.is_future_header() => "future-header",
            DropReason::Sync(SyncError::NotYet(_)) => "future-header",
            DropReason::Sync(SyncError::Invalid(_)) => "invalid-header",
            DropReason::Sync(SyncError::UnexpectedAnswer { .. }) => "unexpected-answer",
            DropReason::Sync(SyncError::TooManyHeaders { .. }) => "too-many-headers",
            DropReason::Orphan => "orphan-headers",
            DropReason::OffCheckpoint(_) => "off-checkpoint",
            DropReason::Undelivered(_) => "undelivered-tips",
            DropReason::Filters(FilterSyncError::Unexpected { .. }) => "unexpected-answer",
            DropReason::Filters(FilterSyncError::OutOfOrder { .. }) => {
                "filter-headers-out-of-order"
            }
            DropReason::Filters(FilterSyncError::PastStop { .. }) => "too-many-filter-headers",
            DropReason::Scan(ScanError::Mismatch { .. }) => "filter-mismatch",
            DropReason::Scan(ScanError::Undecodable { .. }) => "undecodable-filter",
            DropReason::Scan(ScanError::OutOfOrder { .. }) => "filter-pieces-out-of-order",
            DropReason::Scan(ScanError::Short { .. }) => "filters-cut-short",
            DropReason::Dispute(e) => match e {
                DisputeError::FilterLacksOutput { .. } => "filter-lacks-output",
                DisputeError::FilterMismatch { .. } => "filter-mismatch",
                DisputeError::UndecodableFilter { .. } => "undecodable-filter",
                DisputeError::BlockMismatch { .. } => "block-mismatch",
                DisputeError::Contradiction { .. } => "filter-headers-contradicted",
                DisputeError::OutOfOrder { .. } => "cross-check-out-of-order",
                DisputeError::WithheldFilter { .. } => "filter-withheld",
                DisputeError::MissingCheckpoint { .. } => "filter-checkpoints-missing",
            },
            DropReason::Wallet(e) => match e {
                WalletError::BlockMismatch { .. } => "block-mismatch",
                WalletError::Withheld { .. } => "block-withheld",
                WalletError::OutOfOrder { .. } => "block-pieces-out-of-order",
            },
            DropReason::Mempool(e) => match e {
                MempoolError::Unasked => "unexpected-answer",
                MempoolError::UndecodableSet(_) => "undecodable-digest",
                MempoolError::WrongTransaction(_) => "wrong-transaction",
                MempoolError::DigestMismatch(_) => "digest-mismatch",
                MempoolError::InvalidSignature { .. } => "invalid-signature",
                MempoolError::Withheld(_) => "withheld-transaction",
                MempoolError::Flooding(_) => "digest-flooding",
                MempoolError::TweakNotAPoint(_) => "tweak-not-a-point",
            },
            DropReason::Silent(e) => match e {
                SilentFault::Tweaks(TweakError::TwoWords { .. }) => "tweak-word-broken",
                SilentFault::Tweaks(
                    TweakError::ListMismatch { .. } | TweakError::ListOutsideSpan { .. },
                ) => "tweak-list-mismatch",
                SilentFault::Tweaks(_) => "tweak-headers-out-of-order",
                SilentFault::ListsOutOfOrder { .. } => "tweak-pieces-out-of-order",
                SilentFault::ListTooLong { .. } => "tweak-list-too-long",
                SilentFault::NotAPoint { .. } => "tweak-not-a-point",
                SilentFault::FiltersOutOfOrder { .. } => "filter-pieces-out-of-order",
                SilentFault::FilterMismatch { .. } => "filter-mismatch",
                SilentFault::BlockOutOfOrder { .. } => "block-pieces-out-of-order",
                SilentFault::Block { .. } => "block-mismatch",
                SilentFault::Dispute(_) => "tweak-evidence-wrong",
                SilentFault::Disproven { .. } => "tweaks-disproven",
                SilentFault::Short { .. } => "tweaks-cut-short",
            },
            DropReason::RequestTimeout => "request-timeout",
            DropReason::Transport(TransportError::OpenFailed) => "open-failed",
            DropReason::Transport(TransportError::Closed) => "closed",
            DropReason::Transport(TransportError::Lost(_)) => "connection-lost",
            DropReason::Transport(TransportError::NoRandomness) => "no-randomness",
        }
    }

    /// Whether a header was refused only for being more than two hours ahead of our clock.
    fn is_future_header(&self) -> bool {
        match self {
            DropReason::Sync(SyncError::NotYet(_)) => true,
            DropReason::Sync(SyncError::Invalid(ConnectError::Invalid(e))) => e.rule.is_not_yet(),
            _ => false,
        }
    }

    /// For an invalid header: its height and the rule's code (Bitcoin Core's reject
    /// reason where it has one).
    pub fn invalid_header(&self) -> Option<(u32, &'static str)> {
        match self {
            DropReason::Sync(SyncError::Invalid(ConnectError::Invalid(e))) => {
                Some((e.height, e.rule.code()))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use std::error::Error;

    use lightwire_chain::{BlockHash, ConnectError, Rule, ValidationError};
    use lightwire_noise::{HandshakeError, ReceiveError};
    use lightwire_wire::DecodeError;

    use super::*;

    #[test]
    fn reasons_keep_their_type_code_and_cause() {
        let invalid =
            DropReason::Sync(SyncError::Invalid(ConnectError::Invalid(ValidationError {
                height: 7,
                rule: Rule::HighHash {
                    hash: BlockHash([0xee; 32]),
                },
            })));
        assert!(invalid.is_violation());
        assert_eq!(invalid.code(), "invalid-header");
        assert_eq!(invalid.invalid_header(), Some((7, "high-hash")));
        assert!(invalid.to_string().contains("height 7"), "{invalid}");
        // The cause is there for a program to walk: the chain's own error.
        let cause = invalid.source().expect("a source");
        assert!(cause.to_string().contains("height 7"));

        let timeout = DropReason::Connection(PeerError::KeepaliveTimeout);
        assert!(!timeout.is_violation());
        assert_eq!(timeout.code(), "keepalive-timeout");
        assert_eq!(timeout.invalid_header(), None);
        let lost = DropReason::Transport(TransportError::Lost(1006));
        assert!(!lost.is_violation());
        assert_eq!(lost.code(), "connection-lost");
        assert_eq!(
            lost.to_string(),
            "the connection to the gateway was lost (code 1006)"
        );
        assert!(DropReason::Connection(PeerError::WrongNetwork).is_violation());
        assert!(!DropReason::Connection(PeerError::GatewayError(None)).is_violation());
        // A BOLT 8 check that failed may be our engine's wrong computation: a reconnect.
        let handshake = DropReason::Connection(PeerError::Handshake(HandshakeError::Act2BadTag));
        assert!(!handshake.is_violation());
        assert_eq!(handshake.code(), "handshake-failed");
        let frame = DropReason::Connection(PeerError::Receive(ReceiveError::BadBodyMac));
        assert!(!frame.is_violation());
        assert_eq!(frame.code(), "corrupt-frame");
        // A message that decrypted and does not decode is the gateway's.
        let decode =
            DropReason::Connection(PeerError::Decode(DecodeError::UnknownEvenType { ty: 2 }));
        assert!(decode.is_violation());
    }
}
