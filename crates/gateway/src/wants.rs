//! What client sessions wait for from the node: a block or a filter a session asked for
//! and the gateway does not hold yet is fetched for it, and only while it still waits.
//!
//! Each session waits for one item of a kind at a time (a session answers one request at
//! a time, and asks for the next piece only once the one before is sent), so asking for
//! another replaces the first, and a session that ends takes its wait with it: a client
//! that connects, asks for a block and disconnects, again and again, leaves nothing for
//! the node to be asked for. What is waited for is bounded by the sessions open.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One client session, as what it waits for is counted (the server numbers its
/// connections from 1).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct SessionId(pub u64);

impl SessionId {
    /// Whoever reads the chain through its own [`lightwire_proto::Served`] implementation
    /// rather than as a numbered session (tests, programs built on this library).
    pub const ANONYMOUS: SessionId = SessionId(0);
}

/// The items of one kind sessions wait for (see the module's documentation), lowest
/// first.
pub(crate) struct Wants<K> {
    by_item: BTreeMap<K, BTreeSet<SessionId>>,
    by_session: HashMap<SessionId, K>,
}

impl<K: Ord + Copy> Wants<K> {
    /// Nobody waits.
    pub(crate) fn new() -> Wants<K> {
        Wants {
            by_item: BTreeMap::new(),
            by_session: HashMap::new(),
        }
    }

    /// Session `session` waits for `item`, and no longer for what it waited for before.
    pub(crate) fn want(&mut self, session: SessionId, item: K) {
        if let Some(before) = self.by_session.insert(session, item)
            && before != item
        {
            self.unwant(before, session);
        }
        self.by_item.entry(item).or_default().insert(session);
    }

    fn unwant(&mut self, item: K, session: SessionId) {
        if let Some(sessions) = self.by_item.get_mut(&item) {
            sessions.remove(&session);
            if sessions.is_empty() {
                self.by_item.remove(&item);
            }
        }
    }

    /// `item` is here, or not to be had: nobody waits for it any more. Whether anyone did.
    pub(crate) fn answered(&mut self, item: &K) -> bool {
        let Some(sessions) = self.by_item.remove(item) else {
            return false;
        };
        for s in sessions {
            self.by_session.remove(&s);
        }
        true
    }

    /// Session `session` ended: what it waited for is wanted only if another waits too.
    pub(crate) fn session_ended(&mut self, session: SessionId) {
        if let Some(item) = self.by_session.remove(&session) {
            self.unwant(item, session);
        }
    }

    /// What session `session` waits for, if anything.
    pub(crate) fn wanted_by(&self, session: SessionId) -> Option<&K> {
        self.by_session.get(&session)
    }

    /// The items waited for, lowest first.
    pub(crate) fn items(&self) -> impl Iterator<Item = &K> {
        self.by_item.keys()
    }

    /// Nobody waits any more for the items `keep` refuses.
    pub(crate) fn retain(&mut self, keep: impl Fn(&K) -> bool) {
        let gone: Vec<K> = self.items().filter(|k| !keep(k)).copied().collect();
        for item in gone {
            self.answered(&item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_is_wanted_while_a_session_waits_for_it() {
        let mut w = Wants::new();
        w.want(SessionId(1), 5u32);
        w.want(SessionId(2), 5);
        w.want(SessionId(3), 9);
        w.want(SessionId(3), 7);
        assert_eq!(
            w.items().copied().collect::<Vec<_>>(),
            [5, 7],
            "one at a time"
        );
        w.session_ended(SessionId(1));
        assert_eq!(w.items().next(), Some(&5), "another still waits");
        w.session_ended(SessionId(2));
        assert_eq!(w.items().copied().collect::<Vec<_>>(), [7]);
        assert!(w.answered(&7));
        assert!(!w.answered(&7));
        assert!(w.by_session.is_empty() && w.by_item.is_empty());
        w.want(SessionId(4), 1);
        w.want(SessionId(5), 2);
        w.retain(|k| *k < 2);
        assert_eq!(w.items().copied().collect::<Vec<_>>(), [1]);
        assert_eq!(w.by_session.len(), 1);
    }
}
