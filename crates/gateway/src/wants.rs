//! What client sessions wait for from the node: a block or a filter a session asked for
//! and the gateway does not hold yet is fetched for it, and only while it still waits.

/// One client session, as what it waits for is counted (the server numbers its
/// connections from 1).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct SessionId(pub u64);

impl SessionId {
    /// Whoever reads the chain through its own [`lightwire_proto::Served`] implementation
    /// rather than as a numbered session (tests, programs built on this library).
    pub const ANONYMOUS: SessionId = SessionId(0);
}
