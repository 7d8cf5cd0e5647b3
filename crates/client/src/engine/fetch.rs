//! The engine's side of the wallet (see [`crate::wallet`]): what to watch starts its scan,
//! the scan's matches are fetched one block at a time from a gateway that serves blocks,
//! checked and applied, and the gap limit's new scripts join the scan.

use lightwire_wire::BlockPiece;

use super::{Core, Engine, Event, REQUEST_TIMEOUT};
use crate::reason::DropReason;
use crate::scan::Scan;
use crate::wallet::{Again, Applied, WalletSync, WatchError, Watched};

impl Engine {
    /// Watch `items` (scripts, addresses, descriptors) from block `from`: the wallet scans
    /// for them, fetches the blocks that match and keeps what they did. Watching more
    /// later scans again from the wallet's start (what was found is found again).
    pub fn watch(&mut self, items: &[Watched], from: u32) -> Result<(), WatchError> {
        let c = &mut self.core;
        let network = c.params.network;
        let mut wallet = match c.wallet.take() {
            Some(w) => w,
            None => WalletSync::new(network, from),
        };
        let before = wallet.watch.len();
        if let Err(e) = wallet.watch(items) {
            c.wallet = Some(wallet);
            return Err(e);
        }
        let from = wallet.from.min(from);
        let grew = wallet.watch.len() != before || wallet.from != from || !c.wallet_scanning;
        if grew {
            // Everything from the start again, with every script: what was found is
            // withdrawn, and found again.
            wallet.from = from;
            let (withdrawn, gave_up) = wallet.restart();
            for change in withdrawn {
                c.events.push_back(Event::Wallet(change));
            }
            if let Some((g, id)) = gave_up {
                c.remember_given_up(g, id);
            }
            let scripts: Vec<Vec<u8>> = wallet.watch.scripts().map(<[u8]>::to_vec).collect();
            c.wallet = Some(wallet);
            self.start_scan(scripts, from);
            self.core.wallet_scanning = true;
        } else {
            c.wallet = Some(wallet);
        }
        self.settle();
        Ok(())
    }

    /// Stop watching `items`; what is left is scanned again from the wallet's start (every
    /// transaction found is withdrawn, then those of what is left found again). Nothing
    /// left: the wallet's scan stops.
    pub fn unwatch(&mut self, items: &[Watched]) -> Result<(), WatchError> {
        let c = &mut self.core;
        let Some(wallet) = c.wallet.as_mut() else {
            return Ok(());
        };
        let Some(changes) = wallet.unwatch(items)? else {
            return Ok(());
        };
        for change in changes {
            c.events.push_back(Event::Wallet(change));
        }
        let scripts: Vec<Vec<u8>> = wallet.watch.scripts().map(<[u8]>::to_vec).collect();
        let from = wallet.from;
        if scripts.is_empty() {
            if c.wallet_scanning
                && let Some(mut scan) = c.scan.take()
            {
                let given_up: Vec<(usize, u32)> = scan.abandon().collect();
                for (g, id) in given_up {
                    c.remember_given_up(g, id);
                }
            }
            c.wallet_scanning = false;
            c.scan_dropped = true;
        } else {
            self.start_scan(scripts, from);
            self.core.wallet_scanning = true;
        }
        self.settle();
        Ok(())
    }

    /// The wallet, if one watches anything.
    pub fn wallet(&self) -> Option<&WalletSync> {
        self.core.wallet.as_ref()
    }

    /// Go on with a wallet restored from the store: the blocks its scan matched and it
    /// had not applied are fetched again.
    pub fn resume_wallet(&mut self, mut wallet: WalletSync) {
        let c = &mut self.core;
        if let Some(scan) = c.scan.as_ref() {
            let tip = wallet.ledger.tip();
            for &(h, hash) in scan.matches() {
                if tip.is_none_or(|t| h > t) {
                    // Nothing is in flight yet: nothing to give up.
                    let _ = wallet.matched(h, hash);
                }
            }
            // The saved scan feeds the wallet if it watches all the wallet's scripts (the
            // wallet's own does; an app's scan() replaced it otherwise).
            c.wallet_scanning = wallet
                .watch
                .scripts()
                .all(|s| scan.scripts().iter().any(|x| x == s));
        }
        wallet.dirty = false;
        c.wallet = Some(wallet);
    }

    /// Whether the scan was dropped (nothing left to watch) since this was last asked: its
    /// saved state is to be removed.
    pub fn take_scan_dropped(&mut self) -> bool {
        core::mem::take(&mut self.core.scan_dropped)
    }

    /// The wallet's state to save, when it changed since it was last saved.
    pub fn wallet_to_save(&mut self) -> Option<Vec<u8>> {
        self.core.wallet.as_mut()?.to_save()
    }

    /// Whether the wallet has matched everything stored and applied every block matched.
    pub fn wallet_synced(&self) -> bool {
        self.core.wallet_scanning
            && self.scan_at_tip()
            && self
                .core
                .wallet
                .as_ref()
                .is_some_and(|w| w.pending_blocks() == 0)
    }

    /// Ask for the next matched block, from a gateway that serves blocks (the one the
    /// scan asks first: its filter matched).
    pub(super) fn schedule_wallet(&mut self) {
        let c = &mut self.core;
        if c.stopped {
            return;
        }
        let scan_gateway = c.scan.as_ref().and_then(Scan::asked).map(|(g, _)| g);
        let Some(wallet) = c.wallet.as_mut() else {
            return;
        };
        let conns = &self.conns;
        let gateways = &c.gateways;
        let usable = |g: usize, tried: &[usize]| {
            gateways[g].ready
                && !tried.contains(&g)
                && conns[g]
                    .as_ref()
                    .is_some_and(|p| p.is_ready() && p.serves_blocks())
        };
        let Some((g, id, hash)) = wallet.next_fetch(|tried| {
            scan_gateway
                .filter(|&g| usable(g, tried))
                .or_else(|| (0..gateways.len()).find(|&g| usable(g, tried)))
        }) else {
            return;
        };
        c.wallet_heard = c.now;
        let Some(conn) = self.conns[g].as_mut() else {
            return;
        };
        if let Err(e) = conn.request_block(id, hash) {
            if let Some(w) = self.core.wallet.as_mut() {
                w.gateway_gone(g);
            }
            self.drop_gateway(g, DropReason::Connection(e));
        }
    }
}

impl Core {
    /// A `block` message for the wallet.
    pub(super) fn on_wallet_block(
        &mut self,
        g: usize,
        p: &BlockPiece<'_>,
    ) -> Result<(), DropReason> {
        let Some(wallet) = self
            .wallet
            .as_mut()
            .filter(|w| w.asked() == Some((g, p.id)))
        else {
            return self.given_up_answer(g, p.id, p.last);
        };
        self.wallet_heard = self.now;
        match wallet.on_piece(p) {
            Ok(None) => Ok(()),
            Ok(Some(done)) => {
                self.wallet_applied(done);
                Ok(())
            }
            Err(e) => Err(DropReason::Wallet(e)),
        }
    }

    /// What a block applied to the wallet did: events, the scan told of the scripts the
    /// gap limit derived, and what must be done again (see [`crate::wallet`]).
    fn wallet_applied(&mut self, done: Applied) {
        for change in done.changes {
            self.events.push_back(Event::Wallet(change));
        }
        if !self.wallet_scanning {
            return;
        }
        if done.again == Some(Again::Restart) {
            self.restart_wallet_scan();
            return;
        }
        if let Some(scan) = self.scan.as_mut()
            && !done.derived.is_empty()
        {
            // Matched from the scan's next filter on, not from this block: the scan may be
            // far ahead, and going back for each block applied would fetch its filters
            // again and again. Nothing is lost: a script derived after the scan started is
            // not covered, and if it becomes the wallet's, the wallet scans again from its
            // start (Again::Restart).
            scan.add_scripts(done.derived);
        }
        let (Some(Again::From(first)), Some(wallet), Some(scan)) =
            (done.again, self.wallet.as_mut(), self.scan.as_ref())
        else {
            return;
        };
        // A block applied paid a script that has just become the wallet's: the ledger goes
        // back below it and the blocks the scan matched from there are applied again.
        let (withdrawn, gave_up) = wallet.withdraw_from(first);
        let mut given_up: Vec<(usize, u32)> = gave_up.into_iter().collect();
        for &(h, hash) in scan.matches().iter().filter(|(h, _)| *h >= first) {
            given_up.extend(wallet.matched(h, hash));
        }
        for change in withdrawn {
            self.events.push_back(Event::Wallet(change));
        }
        for (g, id) in given_up {
            self.remember_given_up(g, id);
        }
    }

    /// The wallet is scanned again from its start, with every script it derived.
    fn restart_wallet_scan(&mut self) {
        let Some(wallet) = self.wallet.as_mut() else {
            return;
        };
        let (withdrawn, gave_up) = wallet.restart();
        let scripts: Vec<Vec<u8>> = wallet.watch.scripts().map(<[u8]>::to_vec).collect();
        let from = wallet.from;
        for change in withdrawn {
            self.events.push_back(Event::Wallet(change));
        }
        if let Some((g, id)) = gave_up {
            self.remember_given_up(g, id);
        }
        self.start_scan(scripts, from);
        self.wallet_scanning = true;
    }

    /// A scan match: the wallet fetches its block.
    pub(super) fn wallet_matched(&mut self, height: u32, hash: lightwire_chain::BlockHash) {
        if self.wallet_scanning
            && let Some(w) = self.wallet.as_mut()
            && let Some((g, id)) = w.matched(height, hash)
        {
            self.remember_given_up(g, id);
        }
    }

    /// A reorganisation at `fork`: what the wallet found above it is withdrawn.
    pub(super) fn wallet_reorg(&mut self, fork: u32) {
        let Some(w) = self.wallet.as_mut() else {
            return;
        };
        let (changes, gave_up) = w.reorg(fork);
        for change in changes {
            self.events.push_back(Event::Wallet(change));
        }
        if let Some((g, id)) = gave_up {
            self.remember_given_up(g, id);
        }
    }

    /// When the block in flight times out without a piece.
    pub(super) fn wallet_deadline(&self) -> Option<lightwire_proto::Millis> {
        self.wallet
            .as_ref()
            .and_then(WalletSync::asked)
            .map(|_| self.wallet_heard + REQUEST_TIMEOUT)
    }

    /// The app replaced the wallet's scan with its own.
    pub(super) fn wallet_scan_replaced(&mut self) {
        self.wallet_scanning = false;
    }
}
