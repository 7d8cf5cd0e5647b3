//! The wake-up for the tasks following nodes: a session that waits for something only a
//! node can give (a filter, a block) or a transaction to relay bumps it, and every task
//! following a node sees each bump, whenever it next waits. It is a `watch` rather than a
//! `Notify`: with several nodes followed, `notify_one` could wake a task that is not the
//! lead (which does nothing with it) and leave the lead asleep; a `watch` loses no
//! wake-up, and the lead acts on it.

use tokio::sync::watch;

/// See the module's documentation.
pub struct Wake(watch::Sender<u64>);

impl Wake {
    /// A wake-up nobody has subscribed to yet.
    pub fn new() -> Wake {
        Wake(watch::channel(0).0)
    }

    /// Wake every task following a node.
    pub fn wake(&self) {
        self.0.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// For a task following a node: `changed()` returns after the next [`Self::wake`].
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.0.subscribe()
    }
}

impl Default for Wake {
    fn default() -> Self {
        Wake::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every subscriber sees a wake-up, also one that was not waiting when it came.
    #[tokio::test]
    async fn no_wake_up_is_lost() {
        let wake = Wake::new();
        let (mut a, mut b) = (wake.subscribe(), wake.subscribe());
        wake.wake();
        for r in [&mut a, &mut b] {
            tokio::time::timeout(std::time::Duration::from_secs(1), r.changed())
                .await
                .expect("woken")
                .unwrap();
        }
        assert!(!a.has_changed().unwrap(), "seen once");
    }
}
