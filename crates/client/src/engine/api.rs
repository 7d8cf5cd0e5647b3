//! The engine's calls apart from the network's: what the shell reads from the store and
//! commits to it, what the application asks (scans, the wallet, broadcasts), and what it
//! can read of the engine. Each hands over to the task it is for and settles.

use lightwire_chain::{BlockHash, Entry};
use lightwire_primitives::FilterHeader;
use lightwire_proto::Millis;
use lightwire_store::{Durability, Pending};
use lightwire_wallet::labels::{LabelError, LabelRecord};

use super::headers::Asker;
use super::{Action, Counters, Engine, Event, GatewayId, GatewayState, relay::BroadcastError};
use crate::filters::FilterSync;
use crate::scan::Scan;
use crate::sync::Syncer;
use crate::wallet::blocks::WalletId;
use crate::wallet::names::{NameError, WalletNames};
use crate::wallet::{WalletSync, WatchError, Watched};

/// The store: resume, reads, commits.
impl Engine {
    /// Resume the filter-header chain from the store's last filter header (height and
    /// header), or from its base when it holds none.
    pub fn resume_filters(&mut self, tip: Option<(u32, FilterHeader)>, base: u32) {
        self.ctx.filter_base = base;
        let t = self.tasks.headers.syncer.tip();
        let tip_of_headers = (t.height, t.hash);
        self.tasks.filter_headers.resume(tip, base, tip_of_headers);
    }

    /// The store's last filter header is now at `height` (after opening, and after each
    /// commit).
    pub fn stored_filters(&mut self, height: Option<u32>) {
        self.ctx.stored_filters = height;
        self.settle();
    }

    /// A commit to start, if one is due: moved into `into`, validation goes on meanwhile.
    pub fn take_commit(&mut self, into: &mut Pending) -> Option<Durability> {
        // A mirror's filter headers are being read, or the gateways' checkpoints they
        // wait for asked: they follow at once, into the same commit.
        let bulk = &self.tasks.filter_headers.bulk;
        let coming = bulk.is_reading() || bulk.asked_any();
        self.tasks.headers.syncer.filters_coming = coming;
        self.tasks.headers.take_commit(into)
    }

    /// The commit from [`Self::take_commit`] completed.
    pub fn committed(&mut self, now: Millis) {
        self.ctx.now = now;
        self.tasks.headers.committed();
        self.settle();
    }

    /// An answer's batch starts below the validation window: once nothing is uncommitted,
    /// the shell looks up this parent hash and the batch's headers (80 bytes each) in the
    /// store, and calls [`Self::on_ancestors`].
    pub fn need_ancestors(&self) -> Option<(BlockHash, &[u8])> {
        self.tasks.headers.need_ancestors()
    }

    /// What [`Self::need_ancestors`] asked for: `known`, how many of the batch's first
    /// headers the store holds on the best chain right after the parent, and stored
    /// entries ending at the last of those (or at the parent; up to `WINDOW_LEN`, at least
    /// 2016). `None` if the store does not hold the parent (the gateway's headers link to
    /// nothing we know: it is marked bad).
    pub fn on_ancestors(&mut self, found: Option<(&[Entry], usize)>, now: Millis) {
        self.ctx.now = now;
        match self.tasks.headers.on_ancestors(&mut self.ctx, found) {
            Ok(()) => {}
            Err((Asker::Gateway(g), why)) => {
                self.apply_effects(None);
                self.drop_gateway(g, why);
            }
            Err((Asker::Mirror(m), why)) => {
                self.apply_effects(None);
                let fault = self.tasks.headers.mirror_fault(why);
                self.drop_mirror(m, fault);
            }
        }
        self.finish_mirror();
        self.settle();
    }

    /// The heights whose block hashes and filter headers the scan needs read from the
    /// store next (then [`Self::on_scan_data`]).
    pub fn need_scan_data(&mut self) -> Option<(u32, u32)> {
        if self.ctx.stopped {
            return None;
        }
        let stored = self.ctx.stored_filters;
        self.tasks.scan.scan.as_mut()?.need_data(stored)
    }

    /// What [`Self::need_scan_data`] asked for: the block hashes of `start..=end` and the
    /// filter headers of `start - 1..=end`.
    pub fn on_scan_data(&mut self, start: u32, hashes: &[BlockHash], headers: &[FilterHeader]) {
        if let Some(scan) = self.tasks.scan.scan.as_mut() {
            scan.on_data(start, hashes, headers);
        }
    }

    /// The heights whose block hashes and stored filter headers a dispute needs read from
    /// the store next (then [`Self::on_dispute_data`]).
    pub fn need_dispute_data(&mut self) -> Option<(u32, u32)> {
        if self.ctx.stopped {
            return None;
        }
        let stored = self.ctx.stored_filters;
        self.tasks.check.dispute_mut()?.need_read(stored)
    }

    /// What [`Self::need_dispute_data`] asked for: the block hashes and stored filter
    /// headers of `from..=to`.
    pub fn on_dispute_data(&mut self, from: u32, hashes: &[BlockHash], headers: &[FilterHeader]) {
        self.tasks
            .check
            .on_read(&mut self.ctx, from, hashes, headers);
        self.settle();
    }

    /// The heights whose block hashes and filter headers the silent-payment scan needs
    /// read from the store next (then [`Self::on_silent_data`]).
    pub fn need_silent_data(&mut self) -> Option<(u32, u32)> {
        if self.ctx.stopped {
            return None;
        }
        self.tasks.silent.need_data(&self.ctx)
    }

    /// What [`Self::need_silent_data`] asked for: the block hashes of `first..=last` and
    /// the filter headers of `first - 1..=last`.
    pub fn on_silent_data(&mut self, first: u32, hashes: &[BlockHash], headers: &[FilterHeader]) {
        self.tasks.silent.on_data(first, hashes, headers);
    }

    /// The silent-payment scan's progress saved by an earlier session (its last block
    /// checked by the caller to be on our best chain): a receiver started for the same keys
    /// and labels, from no earlier, goes on from it.
    pub fn resume_silent(&mut self, saved: crate::silent_scan::Progress) {
        self.tasks.silent.saved = Some(saved);
    }

    /// Keep `keys` in the store (the receiver's, as the application gave them, when it asked
    /// for that: `persistScanKey`), or delete those kept (`None`); written with the next
    /// save ([`Self::silent_keys_to_save`]).
    pub fn keep_silent_keys(&mut self, keys: Option<Vec<u8>>) {
        self.tasks.silent.keys_to_save = Some(keys);
    }

    /// The receiver's keys to write to the store (`Some(None)`: delete them), once.
    pub fn silent_keys_to_save(&mut self) -> Option<Option<Vec<u8>>> {
        self.tasks.silent.keys_to_save.take()
    }

    /// The silent-payment scan's progress to save, when it moved since it was last saved.
    pub fn silent_to_save(&mut self) -> Option<Vec<u8>> {
        self.tasks.silent.progress_to_save()
    }

    /// Go on with a scan restored from the store (the shared one if it holds the
    /// application's scripts: wallets join it).
    pub fn resume_scan(&mut self, scan: Scan) {
        self.tasks.scan.for_wallet = scan.all_owners() & super::scan::APP != 0;
        self.tasks.scan.scan = Some(scan);
        self.ctx
            .timers
            .touch(crate::ids::TaskId::Scan, self.ctx.now);
    }

    /// The scan's state to save, when it moved enough since it was last saved.
    pub fn scan_to_save(&mut self) -> Option<Vec<u8>> {
        self.tasks.scan.scan.as_mut()?.save()
    }

    /// Whether the scan was dropped (nothing left to watch) since this was last asked: its
    /// saved state is to be removed.
    pub fn take_scan_dropped(&mut self) -> bool {
        core::mem::take(&mut self.tasks.scan.dropped)
    }

    /// Go on with the wallets restored from the store, each by id, and the names of all
    /// but the default one: the blocks their scan matched and they had not applied are
    /// fetched again (see [`super::wallet::WalletTask::resume`]).
    pub fn resume_wallets(&mut self, names: WalletNames, wallets: Vec<(WalletId, WalletSync)>) {
        let base = self.tasks.headers.syncer.base_height();
        let t = &mut self.tasks;
        t.wallet.names = names;
        t.wallet.resume(&mut self.ctx, &mut t.scan, wallets, base);
    }

    /// The default wallet's state to save, when it changed since it was last saved.
    pub fn wallet_to_save(&mut self) -> Option<Vec<u8>> {
        self.tasks.wallet.one_mut()?.to_save()
    }

    /// What is to save of the named wallets: each one's state that changed since it was
    /// last saved, then the names if they changed, then the ids whose records are to
    /// delete (in that order: see [`crate::wallet::names`]).
    pub fn named_to_save(&mut self) -> NamedToSave {
        let t = &mut self.tasks.wallet;
        let ids: Vec<WalletId> = t.names.iter().map(|(id, _)| id).collect();
        let wallets = ids
            .into_iter()
            .filter_map(|id| Some((id, t.get_mut(id)?.to_save()?)))
            .collect();
        NamedToSave {
            wallets,
            names: t.names.to_save(),
            removed: t.names.take_removed(),
        }
    }
}

/// The application's commands.
impl Engine {
    /// Start a rescan of the application's `scripts` from block `from`, beside the
    /// wallets' (one pass over each filter serves both; the application's scan under way
    /// is replaced). [`Event::ScanMatch`] and [`Event::ScanReached`] then tell of its
    /// matches only.
    pub fn start_scan(&mut self, scripts: Vec<Vec<u8>>, from: u32) {
        let base = self.tasks.headers.syncer.base_height();
        self.tasks
            .scan
            .start_app(&mut self.ctx, scripts, from, base);
    }

    /// Scan `scripts` from `from`: the application's scan under way goes on if it is that
    /// one (returns true), else a new one starts.
    pub fn scan_or_continue(&mut self, scripts: Vec<Vec<u8>>, from: u32) -> bool {
        let base = self.tasks.headers.syncer.base_height();
        if self.tasks.scan.is_for_app(&scripts, from, base) {
            return true;
        }
        self.start_scan(scripts, from);
        false
    }

    /// Whether the application's scan has matched everything stored.
    pub fn app_scan_at_tip(&self) -> bool {
        let stored = self.ctx.stored_filters;
        let scan = self.tasks.scan.scan.as_ref();
        scan.is_some_and(|s| s.at_tip_for(super::scan::APP, stored))
    }

    /// The application's matches so far, ascending (every match when it does not scan
    /// beside the wallets).
    pub fn app_matches(&self) -> Vec<(u32, BlockHash)> {
        let Some(s) = self.tasks.scan.scan.as_ref() else {
            return Vec::new();
        };
        match s.all_owners() & super::scan::APP {
            0 => s.matches().to_vec(),
            app => s.matches_of(app),
        }
    }

    /// Watch `items` (scripts, addresses, descriptors) from block `from`: the wallet scans
    /// for them, fetches the blocks that match and keeps what they did. Watching more
    /// later scans again from the wallet's start (what was found is found again).
    pub fn watch(&mut self, items: &[Watched], from: u32) -> Result<(), WatchError> {
        self.watch_in(WalletId::DEFAULT, items, from)
    }

    /// Watch `items` in wallet `id` (made if there is none), as [`Self::watch`] does for
    /// the default wallet: every wallet's scripts are matched in one scan, and a wallet
    /// watching more goes back to its start alone (the others keep what they found).
    pub fn watch_in(
        &mut self,
        id: WalletId,
        items: &[Watched],
        from: u32,
    ) -> Result<(), WatchError> {
        let base = self.tasks.headers.syncer.base_height();
        let result =
            self.tasks
                .wallet
                .watch(&mut self.ctx, &mut self.tasks.scan, (id, items), from, base);
        self.settle();
        result
    }

    /// The wallet named `name`, made if there is none (watching nothing until it is told
    /// to); it is saved, and resumed by the next session, until removed.
    pub fn add_wallet(&mut self, name: &str) -> Result<WalletId, NameError> {
        self.tasks.wallet.named(&self.ctx, name)
    }

    /// The wallet named `name`, if there is one.
    pub fn wallet_id(&self, name: &str) -> Option<WalletId> {
        self.tasks.wallet.names.id(name)
    }

    /// The named wallets (the default one has no name), in the order they were made.
    pub fn wallet_names(&self) -> impl Iterator<Item = (WalletId, &str)> {
        self.tasks.wallet.names.iter()
    }

    /// Wallet `id` goes, with what it watched and found and its name (the others go on as
    /// they were); its record is deleted.
    pub fn remove_wallet(&mut self, id: WalletId) {
        self.tasks
            .wallet
            .remove(&mut self.ctx, &mut self.tasks.scan, id);
        self.settle();
    }

    /// Import BIP329 label `records` (a file's lines, in order) into the wallet, whole or
    /// not at all (see [`lightwire_wallet::labels`]); with no wallet, one watching nothing
    /// is made for them. The wallet is saved with them.
    pub fn import_labels(
        &mut self,
        records: &[LabelRecord],
    ) -> Result<lightwire_wallet::labels::Imported, LabelError> {
        self.import_labels_in(WalletId::DEFAULT, records)
    }

    /// Import label `records` into wallet `id`, as [`Self::import_labels`] does.
    pub fn import_labels_in(
        &mut self,
        id: WalletId,
        records: &[LabelRecord],
    ) -> Result<lightwire_wallet::labels::Imported, LabelError> {
        self.tasks
            .wallet
            .with_wallet(&self.ctx, id, |w| w.import_labels(records))
    }

    /// Set one label record's fields (`clear`: remove its label), as
    /// [`WalletSync::set_label`] does.
    pub fn set_label(&mut self, record: &LabelRecord, clear: bool) -> Result<(), LabelError> {
        self.set_label_in(WalletId::DEFAULT, record, clear)
    }

    /// Set one label record of wallet `id`, as [`Self::set_label`] does.
    pub fn set_label_in(
        &mut self,
        id: WalletId,
        record: &LabelRecord,
        clear: bool,
    ) -> Result<(), LabelError> {
        self.tasks
            .wallet
            .with_wallet(&self.ctx, id, |w| w.set_label(record, clear))
    }

    /// Scan the wallet again, from `from` (its start widened to it: a birthday set too
    /// late) or, with `None`, from its start (a full rescan): what it found is withdrawn
    /// ([`Event::Wallet`]) and found again as the scan passes it, with whatever the wider
    /// range adds. The scan's progress is saved as any scan's, so a reload goes on with
    /// it. Refused when nothing is watched, or for a start after the wallet's.
    pub fn rescan(&mut self, from: Option<u32>) -> Result<(), super::wallet::RescanError> {
        self.rescan_in(WalletId::DEFAULT, from)
    }

    /// Scan wallet `id` again, as [`Self::rescan`] does for the default wallet.
    pub fn rescan_in(
        &mut self,
        id: WalletId,
        from: Option<u32>,
    ) -> Result<(), super::wallet::RescanError> {
        let base = self.tasks.headers.syncer.base_height();
        let result =
            self.tasks
                .wallet
                .rescan(&mut self.ctx, &mut self.tasks.scan, (id, from), base);
        self.settle();
        result
    }

    /// Receive silent payments (BIP352) for `receiver` from block `from`: its scan takes the
    /// tweaks the gateways agree on (or a block proves), matches each block's verified
    /// filter and searches the blocks that match; each output found is an
    /// [`Event::SilentPayment`] and a script the wallet watches from its block. Replaces
    /// a receiver scanned for before.
    pub fn watch_silent_payments(
        &mut self,
        receiver: lightwire_wallet::silent::Receiver,
        from: u32,
    ) {
        self.watch_silent_payments_from(receiver, from, None)
    }

    /// [`Self::watch_silent_payments`], with where the spend key derives from (`origin`,
    /// kept with each output found: a signer finds the key by it; also set on the wallet
    /// now, for coins found already or unconfirmed).
    pub fn watch_silent_payments_from(
        &mut self,
        receiver: lightwire_wallet::silent::Receiver,
        from: u32,
        origin: Option<lightwire_wallet::descriptor::KeyOrigin>,
    ) {
        if let (Some(o), Some(w)) = (&origin, self.tasks.wallet.one_mut()) {
            w.watch.set_spend_origin(receiver.spend_public(), o.clone());
        }
        self.tasks.silent.spend_origin = origin;
        let base = self.tasks.headers.syncer.base_height();
        self.tasks.silent.start(&mut self.ctx, receiver, from, base);
    }

    /// Hand the receiver's filter checks to the shell ([`Self::next_silent_job`]) instead
    /// of running them here: for a shell with other threads (the tab's workers).
    pub fn offload_silent(&mut self, on: bool) {
        self.tasks.silent.offload = on;
        if let Some(scan) = self.tasks.silent.scan.as_mut() {
            scan.offload(on);
        }
    }

    /// The next filter check to run, once [`Self::offload_silent`] is on: its answer goes
    /// to [`Self::silent_scanned`].
    pub fn next_silent_job(&mut self) -> Option<crate::silent_scan::ScanJob<'_>> {
        self.tasks.silent.scan.as_mut()?.next_job()
    }

    /// The answer to the filter check `tag`, `height` (of [`Self::next_silent_job`]).
    pub fn silent_scanned(&mut self, tag: u32, height: u32, result: crate::silent_scan::Scanned) {
        self.tasks
            .silent
            .on_scanned(&mut self.ctx, tag, height, result);
        self.settle();
    }

    /// The network the engine follows.
    pub fn network(&self) -> lightwire_chain::Network {
        self.ctx.params.network
    }

    /// The silent-payment scan, once started.
    pub fn silent_scan(&self) -> Option<&dyn crate::silent_scan::Scanning> {
        self.tasks.silent.scan.as_deref()
    }

    /// Stop watching `items`; what is left is scanned again from the wallet's start (every
    /// transaction found is withdrawn, then those of what is left found again). Nothing
    /// left: the wallet's scan stops.
    pub fn unwatch(&mut self, items: &[Watched]) -> Result<(), WatchError> {
        self.unwatch_in(WalletId::DEFAULT, items)
    }

    /// Stop watching `items` in wallet `id`, as [`Self::unwatch`] does for the default
    /// wallet: only that wallet is scanned again.
    pub fn unwatch_in(&mut self, id: WalletId, items: &[Watched]) -> Result<(), WatchError> {
        let base = self.tasks.headers.syncer.base_height();
        let result =
            self.tasks
                .wallet
                .unwatch(&mut self.ctx, &mut self.tasks.scan, (id, items), base);
        self.settle();
        result
    }

    /// Send signed transaction `tx` to every connected gateway that relays; returns the
    /// request's id and the txid. [`Event::Broadcast`] follows with what they did.
    pub fn broadcast(
        &mut self,
        tx: &[u8],
    ) -> Result<(u32, lightwire_primitives::Txid), BroadcastError> {
        self.tasks
            .relay
            .broadcast(&mut self.ctx, &mut self.conns, tx)
    }

    /// Ask every connected gateway that serves fee rates for its node's estimates; the
    /// request's id ([`Event::FeeRates`] follows), or `None` when no gateway serves them.
    pub fn fee_rates(&mut self) -> Option<u32> {
        self.tasks.fees.ask(&mut self.ctx, &mut self.conns)
    }

    /// Whether to sync filter headers (on by default).
    pub fn set_filters(&mut self, on: bool) {
        self.ctx.filters_on = on;
    }

    /// Whether filter headers are fetched and checked.
    pub fn filters_on(&self) -> bool {
        self.ctx.filters_on
    }

    /// How long an unconfirmed transaction no gateway is known to hold is kept unmined
    /// (default [`super::UNCONFIRMED_EXPIRY`]).
    pub fn set_unconfirmed_expiry(&mut self, expiry: core::time::Duration) {
        self.tasks.wallet.expiry = expiry;
    }

    /// The application stops: every connection is closed, nothing reconnects.
    pub fn stop(&mut self, now: Millis) {
        let c = &mut self.ctx;
        c.now = now;
        c.stopped = true;
        for g in c.gateways.ids() {
            if self.conns[g].take().is_some() || c.gateways[g].state == GatewayState::Connecting {
                c.actions.push_back(Action::Close { gateway: g });
            }
            c.gateways[g].reconnect_at = None;
            c.set_state(g, GatewayState::Stopped, None);
        }
        c.actions.retain(|a| matches!(a, Action::Close { .. }));
    }
}

/// What the application and the shell read.
impl Engine {
    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.ctx.events.pop_front()
    }

    /// The next thing for the shell to do.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.ctx.actions.pop_front()
    }

    /// Whether a commit taken with [`Self::take_commit`] is in flight.
    pub fn is_committing(&self) -> bool {
        self.tasks.headers.is_committing()
    }

    /// Whether [`Self::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.ctx.stopped
    }

    /// Whether nothing is missing: some gateway has been heard, and no announced tip is
    /// missing, nothing is in flight, nothing waits to be committed or is being committed,
    /// and the chain has at least the network's minimum work (Bitcoin Core's
    /// `nMinimumChainWork`: gateways that all lie cannot make a light chain look synced).
    pub fn is_synced(&self) -> bool {
        self.tasks.headers.is_synced(&self.ctx)
    }

    /// The sync state (tip, target, tuning).
    pub fn syncer(&self) -> &Syncer {
        &self.tasks.headers.syncer
    }

    /// The sync state, to tune (request size, commit size) and seed.
    pub fn syncer_mut(&mut self) -> &mut Syncer {
        &mut self.tasks.headers.syncer
    }

    /// The filter-header sync state.
    pub fn filters(&self) -> &FilterSync {
        &self.tasks.filter_headers.sync
    }

    /// The probes and the checkpoints requests the filter-header task asked this session
    /// to check mirrors' files (see `bulk_filters.rs`).
    pub fn filter_headers_asked(&self) -> (u64, u64) {
        self.tasks.filter_headers.bulk.sent()
    }

    /// The rescan, if one was started.
    pub fn scan(&self) -> Option<&Scan> {
        self.tasks.scan.scan.as_ref()
    }

    /// The default wallet, if there is one.
    pub fn wallet(&self) -> Option<&WalletSync> {
        self.tasks.wallet.one()
    }

    /// Wallet `id`, if there is one.
    pub fn wallet_of(&self, id: WalletId) -> Option<&WalletSync> {
        self.tasks.wallet.get(id)
    }

    /// Where the wallet's block fetching stands, when a wallet is watched.
    pub fn wallet_trace(&self) -> Option<super::wallet::WalletTrace> {
        self.tasks.wallet.trace(&self.ctx, &self.tasks.scan)
    }

    /// Whether the default wallet has matched everything stored and applied every block
    /// matched.
    pub fn wallet_synced(&self) -> bool {
        self.wallet_synced_of(WalletId::DEFAULT)
    }

    /// Whether wallet `id` has matched everything stored and applied every block matched
    /// for it.
    pub fn wallet_synced_of(&self, id: WalletId) -> bool {
        self.tasks.wallet.synced(&self.ctx, &self.tasks.scan, id)
    }

    /// Whether the wallet is synced and what it watches and found is saved: what a
    /// `watch` or `unwatch` call waits for, so that a tab closed right after the call
    /// resolves still has it in the store (the driver saves before it pumps again).
    pub fn wallet_settled(&self) -> bool {
        self.wallet_synced() && self.wallet_saved()
    }

    /// Whether what the wallet holds is saved (nothing changed since its last save).
    pub fn wallet_saved(&self) -> bool {
        self.wallet_saved_of(WalletId::DEFAULT)
    }

    /// Whether what every wallet holds is saved, and their names.
    pub fn wallets_saved(&self) -> bool {
        let t = &self.tasks.wallet;
        !t.names.is_dirty() && t.all_saved()
    }

    /// Whether what wallet `id` holds is saved, and the names with it.
    pub fn wallet_saved_of(&self, id: WalletId) -> bool {
        let t = &self.tasks.wallet;
        !t.get(id).is_some_and(|w| w.dirty) && !t.names.is_dirty()
    }

    /// Counters since the start.
    pub fn counters(&self) -> Counters {
        self.ctx.counters
    }

    /// Gateway `g`'s WebSocket URL.
    pub fn url(&self, g: GatewayId) -> &str {
        &self.ctx.gateways[g].connect.url
    }

    /// Gateway `g`'s state.
    pub fn state(&self, g: GatewayId) -> GatewayState {
        self.ctx.gateways[g].state
    }
}

/// What is to save of the named wallets ([`Engine::named_to_save`]).
#[derive(Debug, Default)]
pub struct NamedToSave {
    /// Each wallet's state that changed, by id.
    pub wallets: Vec<(WalletId, Vec<u8>)>,
    /// The names, if they changed.
    pub names: Option<Vec<u8>>,
    /// The wallets whose records are to delete.
    pub removed: Vec<WalletId>,
}
