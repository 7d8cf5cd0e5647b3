// lightwire: a Bitcoin light client for web apps. See README.md for the ten-line example.
import { openHere, type Backend } from './engine.js';
import type { Method } from './protocol.js';
import { WorkerBackend } from './supervisor.js';
import { canShare, SharedBackend } from './tabs.js';
import { Wallet } from './wallet.js';
import type {
  ClientOptions,
  GatewayInfo,
  HeaderInfo,
  Inclusion,
  LightwireEvent,
  Metrics,
  Role,
  Balance,
  BroadcastResult,
  CreatedPsbt,
  BumpFeeOptions,
  BumpedPsbt,
  ImportedLabels,
  LabelRecord,
  CreatePsbtOptions,
  FeeRatesResult,
  ScanOptions,
  ScanResult,
  SilentPaymentOptions,
  SilentPaymentReceiver,
  Utxo,
  WalletSummary,
  TransactionEntry,
  WatchOptions,
  StorageInfo,
  TipInfo,
} from './types.js';

export type * from './types.js';
export { Wallet } from './wallet.js';

type Handler<K extends LightwireEvent['type']> = (event: Extract<LightwireEvent, { type: K }>) => void;

/**
 * A light client syncing block headers from its gateways into IndexedDB. Events are
 * dispatched as `CustomEvent`s named after their `type` (the event object in `detail`), and
 * every one also as `'event'`; {@link LightwireClient.on} is the typed shortcut.
 */
export class LightwireClient extends EventTarget {
  readonly #backend: Backend;

  private constructor(backend: Backend) {
    super();
    this.#backend = backend;
  }

  /**
   * Open the store and start syncing. Rejects with an Error named `UnsupportedBrowser`
   * (no WebAssembly, as in iOS Lockdown Mode, or no SIMD128: Safari before 16.4),
   * `InvalidOptions`,
   * `InvalidGateway`, `StoreUnavailable` (this page may not use IndexedDB: some private
   * windows, storage blocked), `QuotaExceeded`, `StoreError` or `KeyError` when it cannot
   * start. Where another tab already runs the engine on this store, resolves once that tab
   * answered, as a follower (see `ClientOptions.shareTabs`); rejects with `InvalidOptions`
   * if that tab follows another network, or `VersionMismatch` if it runs another version
   * of the package.
   */
  static async open(options: ClientOptions): Promise<LightwireClient> {
    const missing = unsupported();
    if (missing) {
      const err = new Error(`this browser cannot run the client: ${missing}`);
      err.name = 'UnsupportedBrowser';
      throw err;
    }
    // Ask, never wait: Firefox asks the user, and the answer may never come. Only a window
    // may ask; a refusal is not an error, and a browser without the API (WebKitGTK) has
    // answered no.
    const asked =
      options.persist !== false
        ? (globalThis.navigator?.storage?.persist?.().catch(() => false) ?? Promise.resolve(false))
        : undefined;
    let client: LightwireClient | undefined;
    const early: LightwireEvent[] = [];
    const onEvent = (e: LightwireEvent) => (client ? client.#dispatch(e) : early.push(e));
    const engine = (events: (e: LightwireEvent) => void): Promise<Backend> =>
      options.worker === false ? openHere(options, events) : WorkerBackend.open(options, events);
    const backend =
      options.shareTabs !== false && canShare() ? await SharedBackend.open(options, onEvent, engine) : await engine(onEvent);
    client = new LightwireClient(backend);
    // Events sent while opening arrive once the caller can listen (next task).
    const c = client;
    setTimeout(() => early.splice(0).forEach((e) => c.#dispatch(e)), 0);
    void asked?.then((persisted) => setTimeout(() => c.#dispatch({ type: 'persistence', persisted }), 0));
    return client;
  }

  /** Delete a store and its client key (stop every client using it first). */
  static async deleteStore(storeName: string): Promise<void> {
    await Promise.all([deleteDatabase(storeName), deleteDatabase(`${storeName}-identity`)]);
  }

  /** Storage used and quota for this origin, and whether the browser will keep it. */
  static async storage(): Promise<StorageInfo> {
    const storage = globalThis.navigator?.storage;
    const estimate = (await storage?.estimate?.()) ?? {};
    return {
      usage: estimate.usage ?? null,
      quota: estimate.quota ?? null,
      persisted: (await storage?.persisted?.()) ?? false,
    };
  }

  /**
   * Whether this tab runs the engine (`'leader'`) or follows the tab that does
   * (`'follower'`); a `role` event says when it changes. A client that does not share its
   * engine (`shareTabs: false`, or a browser without Web Locks or BroadcastChannel) leads.
   */
  get role(): Role {
    return this.#backend instanceof SharedBackend ? this.#backend.role : 'leader';
  }

  /** Whether this tab runs the engine: {@link LightwireClient.role} is `'leader'`. */
  get isLeader(): boolean {
    return this.role === 'leader';
  }

  /** Listen to one kind of event; returns a function that stops listening. */
  on<K extends LightwireEvent['type']>(type: K, handler: Handler<K>): () => void {
    const listener = (e: Event) => handler((e as CustomEvent).detail);
    this.addEventListener(type, listener);
    return () => this.removeEventListener(type, listener);
  }

  #dispatch(e: LightwireEvent): void {
    this.dispatchEvent(new CustomEvent(e.type, { detail: e }));
    this.dispatchEvent(new CustomEvent('event', { detail: e }));
  }

  #closed = false;

  #call<T>(method: Method, ...args: unknown[]): Promise<T> {
    if (this.#closed) {
      const err = new Error('the client has stopped');
      err.name = 'Stopped';
      return Promise.reject(err);
    }
    return this.#backend.call(method, args) as Promise<T>;
  }

  /**
   * Rescan with compact block filters (BIP157/158): from `fromHeight` (default 0), each
   * block's filter is fetched from a gateway, checked against its stored filter header and
   * matched against `scripts` (output scripts, hex) here in the tab; the gateway never
   * learns the scripts. Resolves once every block whose filter header is stored has been
   * matched, with the blocks that matched. The scan goes on as blocks arrive (`scanMatch`,
   * `scanWithdrawn` on a reorg, `scan` progress events) until another scan replaces it
   * (the pending promise then rejects with `ScanReplaced`). It runs beside the wallets:
   * one pass over each filter serves both, and its events and result tell of its own
   * matches only. Filters are not kept.
   */
  scan(options: ScanOptions): Promise<ScanResult> {
    return this.#call('scan', options.scripts, options.fromHeight);
  }

  /**
   * Watch a wallet: addresses, output scripts and xpub descriptors ({@link WatchOptions}),
   * from `fromHeight`. Its scan matches each block's filter here in the tab (the gateways
   * never learn the scripts); the blocks that match are fetched, checked against their
   * stored headers (hash and Merkle root) and kept as transactions and coins, saved in the
   * store and resumed after a reload. Resolves once everything stored is matched and
   * applied, and the wallet saved; `transaction` and `balance` events follow as blocks
   * arrive, and on reorgs. Watching more scans again from the wallet's start. Rejects
   * with `InvalidArgument` naming what cannot be watched (a malformed address, another
   * network's, an xprv, ...).
   * The wallets and {@link LightwireClient.scan} share one scan: one pass over each filter
   * serves all of them, and none pauses another.
   */
  watch(options: WatchOptions): Promise<WalletSummary> {
    return this.#call('watch', options);
  }

  /**
   * The wallet named `name`, beside the default one (the wallet these calls are for) and
   * any others: its own descriptors, coins, labels and history on the client's one
   * header chain. Every wallet's scripts are matched in one pass over each block's filter,
   * a block matched for several is fetched once, and one mempool subscription serves them
   * all; a wallet watching more, rescanning or unwatching scans again alone. Nothing is
   * made until a call changes the wallet ({@link Wallet}); {@link wallets} lists those
   * made, {@link removeWallet} removes one. A name is 1 to 64 bytes of UTF-8 without
   * control characters (its calls reject with `InvalidArgument` otherwise); at most 62
   * named wallets.
   */
  wallet(name: string): Wallet {
    return new Wallet(name, (method, ...args) => this.#call(method, ...args));
  }

  /** The names of the wallets made ({@link wallet}), in the order they were made. */
  wallets(): Promise<string[]> {
    return this.#call('wallets');
  }

  /**
   * Remove the wallet named `name`: what it watched, found and labelled, and its records
   * in the store; the other wallets go on as they were. Resolves `true` once its records
   * are gone, `false` if no wallet has that name.
   */
  removeWallet(name: string): Promise<boolean> {
    return this.#call('removeWallet', name);
  }

  /**
   * Receive silent payments (BIP352) with the scan private key and the spend public key
   * (or the receiver's own address), from `fromHeight` ({@link SilentPaymentOptions}).
   * For each block, the tweaks of its transactions are taken from the gateways that serve
   * them, compared across them (a disagreement is settled by the block and what it spends
   * from, and the gateway proven wrong is dropped: with one honest gateway present, none
   * can hide a payment); the block's verified filter is asked about the receiver's keys,
   * and a block that matches is fetched, checked and searched. Each output found is a
   * `silentPayment` event and a coin of the wallet (its script watched from that block).
   * The scan key stays in the engine's worker in this tab and is not stored (call again in
   * each session), unless `persistScanKey` asks for it (then the next session's engine
   * starts the receiver itself; see the option). Transactions in the gateways' mempools
   * are looked at too, where the gateways give their tweaks: a payment found there is a
   * `silentPayment` event without a block and an unconfirmed transaction of the wallet
   * (trusted for nothing until mined). Only the tab that runs the engine receives
   * (elsewhere: `NotLeader`).
   * Resolves at once with the receiver's addresses; rejects with `InvalidArgument` naming
   * a key, address or label that cannot be.
   */
  watchSilentPayments(options: SilentPaymentOptions): Promise<SilentPaymentReceiver> {
    return this.#call('watchSilentPayments', options);
  }

  /**
   * Stop watching some of what {@link LightwireClient.watch} was given (the same shape; an
   * item is the same however it is written). What is left is scanned again from the
   * wallet's start: `transaction` events withdraw what was found, then find again what is
   * left. Resolves once that is synced (at once when nothing is left). Rejects with
   * `InvalidArgument` for an item that is not an address, script or descriptor.
   */
  unwatch(options: Omit<WatchOptions, 'fromHeight'>): Promise<WalletSummary> {
    return this.#call('unwatch', options);
  }

  /**
   * Scan the wallet again. With `fromHeight`, its start is widened to that block (a
   * birthday set too late: payments below it are found); without, from its start (a full
   * rescan). What it found is withdrawn (`transaction` events) and found again as the scan
   * passes; `scan` events show the progress, and a reload goes on from where it stood.
   * Resolves once synced and saved, as {@link watch} does. Rejects with `InvalidArgument`
   * when nothing is watched or for a `fromHeight` above the wallet's start (a rescan only
   * widens what the wallet covers).
   */
  rescan(options?: { fromHeight?: number }): Promise<WalletSummary> {
    return this.#call('rescan', options ?? {});
  }

  /**
   * The wallet's transactions: those in blocks oldest first, then the unconfirmed ones in
   * the order they were first seen.
   */
  transactions(): Promise<TransactionEntry[]> {
    return this.#call('transactions');
  }

  /**
   * The wallet's coins that no known transaction spends: confirmed ones and outputs of
   * unconfirmed transactions (`status`), as Bitcoin Core's `listunspent`.
   */
  utxos(): Promise<Utxo[]> {
    return this.#call('utxos');
  }

  /** The wallet's balance, counting coins with at least `minConfirmations` (default 1). */
  balance(minConfirmations?: number): Promise<Balance> {
    return this.#call('balance', minConfirmations);
  }

  /**
   * Send a signed transaction (raw hex, or a finalized PSBT in base64 as a signer hands
   * back what {@link createPsbt} built: its transaction is extracted) to every connected
   * gateway that relays; each
   * checks it (one transaction, Bitcoin Core's standard weight and size) and passes it to
   * its node over P2P. Resolves with how many did. Rejects with `InvalidArgument` (checked
   * here first, the reason named) or `NoGateway`. A transaction of the wallet's that at
   * least one gateway relayed is in the wallet as unconfirmed before this resolves (a
   * `transaction` event, `status: 'unconfirmed'`), confirmed when mined, dropped (with its
   * reason) if a mined transaction conflicts with it or it expires.
   */
  broadcast(rawTxHexOrPsbt: string): Promise<BroadcastResult> {
    return this.#call('broadcast', rawTxHexOrPsbt);
  }

  /**
   * A spend of the wallet's coins, as a BIP174 PSBT (base64) that a standard signer
   * (@scure/btc-signer, bitcoinjs-lib, a hardware wallet) signs and finalizes without
   * asking anything more: each input carries the output it spends, the funding transaction
   * for all but taproot inputs, its key's origin (BIP32, or BIP371 for `tr`), and the change
   * output its own. Coins are picked (Bitcoin Core's branch and bound, then largest first)
   * among the wallet's descriptor coins, confirmed ones only unless `includeUnconfirmed`;
   * `coins` names the ones to spend instead (all of them). The fee is at least `feeRate`
   * for the signed size (72-byte signatures budgeted); change goes to the next unused change
   * address, or to the fee when it would be dust. Broadcast the signed transaction with
   * {@link broadcast}. Rejects with `InsufficientFunds` or `InvalidArgument`.
   */
  createPsbt(options: CreatePsbtOptions): Promise<CreatedPsbt> {
    return this.#call('createPsbt', options);
  }

  /**
   * A PSBT replacing an unconfirmed transaction of the wallet's (a payment stuck at a low
   * fee rate) at `feeRate`, by Bitcoin Core's `psbtbumpfee` rules: only the wallet's own
   * (every input its coin, nothing of the wallet's spending its outputs), the same inputs
   * and outputs and lock time, the change paying the difference, at least the old fee
   * plus 1 sat/vB of the replacement's size. Sign it and {@link broadcast} it: the nodes
   * take it as the old one's replacement (BIP125), and the wallet drops the old one as
   * `replaced`. Rejects with `UnknownTransaction` (not an unconfirmed transaction of the
   * wallet's), `InsufficientFunds` (the change cannot pay it: more inputs are not added)
   * or `InvalidArgument` naming the rule (a rate too low says the least that would do).
   */
  bumpFee(txid: string, options: BumpFeeOptions): Promise<BumpedPsbt> {
    return this.#call('bumpFee', txid, options);
  }

  /**
   * The wallet's labels as a BIP329 file: JSON Lines, one record a line, each ended by a
   * newline (`''` with none), transactions first, then addresses, public keys, inputs,
   * outputs, extended keys and scan keys, each in order of its reference. Any wallet that
   * reads BIP329 (Sparrow, Bitcoin Core's GUI through HWI, BDK apps) imports it.
   */
  labels(): Promise<string> {
    return this.#call('labels');
  }

  /**
   * Import a BIP329 file into the wallet's labels, whole or not at all: every line is
   * checked first (a txid that is 64 hex digits, an address of this network, `txid:index`
   * for an input or output, `spendable` on an output only, ...), and the first line that
   * fails rejects the call with `InvalidArgument`, its `line` property the file's line
   * number, and nothing imported. A type BIP329 does not define is skipped (`unknown`), a
   * label over 255 characters is cut (`cut`), a field a line leaves out keeps the wallet's
   * value, blank lines are skipped. `spendable: false` freezes an output: {@link
   * createPsbt} leaves it out unless named in `coins`. Resolves once the wallet holding
   * them is saved.
   */
  importLabels(jsonLines: string): Promise<ImportedLabels> {
    return this.#call('importLabels', jsonLines);
  }

  /**
   * Set one label, a BIP329 record: `label: null` removes the label, `spendable: false`
   * freezes an output and `true` thaws it; a field left out keeps the wallet's value.
   * Resolves once saved; rejects with `InvalidArgument` naming the rule the record breaks.
   */
  setLabel(record: LabelRecord): Promise<void> {
    return this.#call('setLabel', record);
  }

  /**
   * Fee rates (sat/vB) to be mined within 1, 6 and 144 blocks, from the connected
   * gateways' nodes: each figure is the lower median of the gateways' answers, each
   * bounded to 0.1-10,000 sat/vB, a longer target never above a shorter one; `sources` holds
   * every answer as the gateway said it. Nothing here is checked against the chain: a
   * gateway may say anything (see pkg/README, "Fee rates"). Rejects with `NoGateway` when no
   * connected gateway serves them.
   */
  feeRates(): Promise<FeeRatesResult> {
    return this.#call('feeRates');
  }

  /** The stored tip. */
  tip(): Promise<TipInfo | null> {
    return this.#call('tip');
  }

  /** Each gateway's URL and state. */
  gateways(): Promise<GatewayInfo[]> {
    return this.#call('gateways');
  }

  /** A snapshot of the counters. */
  metrics(): Promise<Metrics> {
    return this.#call('metrics');
  }

  /** The stored header at a height, or null. */
  headerAt(height: number): Promise<HeaderInfo | null> {
    return this.#call('headerAt', height);
  }

  /** The stored header with this hash (display hex), or null. */
  headerByHash(hash: string): Promise<HeaderInfo | null> {
    return this.#call('headerByHash', hash);
  }

  /**
   * Check that a transaction is in a stored block: its txid, Merkle branch (sibling hashes,
   * lowest level first), position in the block, and the block's hash (all display hex).
   * Rejects with an Error named `UnknownBlock`, `MerkleError` or `InvalidArgument`.
   */
  verifyInclusion(txid: string, merkleBranch: string[], index: number, blockHash: string): Promise<Inclusion> {
    return this.#call('verifyInclusion', txid, merkleBranch, index, blockHash);
  }

  /**
   * For the package's own tests only: make the engine's worker spin for ever, as a hung
   * engine does, to see the watchdog terminate and restart it (a `workerRestarted` event;
   * this promise then rejects with `WorkerRestarted`). Rejects at once unless this tab
   * runs the engine (it leads), in a worker opened with the `testHooks` option.
   */
  testHangWorker(): Promise<void> {
    const engine = this.#backend instanceof SharedBackend ? this.#backend.engine : this.#backend;
    if (!(engine instanceof WorkerBackend) || this.#closed) {
      const err = new Error('the engine does not run in a worker here');
      err.name = 'InvalidState';
      return Promise.reject(err);
    }
    return engine.hang() as Promise<void>;
  }

  /**
   * For the package's own tests only: make the engine's worker fail as a trapped one does
   * (`throw`: an exception out of a callback; `reject`: a failure in the engine's loop), to
   * see it replaced (a `workerRestarted` event, reason `failed`). Rejects at once unless
   * this tab runs the engine, in a worker opened with the `testHooks` option.
   */
  testFailWorker(how: 'throw' | 'reject'): Promise<void> {
    const engine = this.#backend instanceof SharedBackend ? this.#backend.engine : this.#backend;
    if (!(engine instanceof WorkerBackend) || this.#closed) {
      const err = new Error('the engine does not run in a worker here');
      err.name = 'InvalidState';
      return Promise.reject(err);
    }
    return engine.fail(how) as Promise<void>;
  }

  /** Stop syncing and close the store (and the worker). */
  async stop(): Promise<void> {
    if (this.#closed) return;
    await this.#call('stop');
    this.#closed = true;
    this.#backend.close();
  }
}

/** Open a client: {@link LightwireClient.open}. */
export function createClient(options: ClientOptions): Promise<LightwireClient> {
  return LightwireClient.open(options);
}

function deleteDatabase(name: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = indexedDB.deleteDatabase(name);
    req.onsuccess = () => resolve();
    req.onerror = () => reject(req.error);
    req.onblocked = () => {
      const err = new Error(`the store ${name} is still open elsewhere; stop its client first`);
      err.name = 'StoreBusy';
      reject(err);
    };
  });
}

/**
 * The smallest module that uses SIMD128: one function returning `i8x16.splat(0)`. The
 * engine's wasm is built with SIMD128 (it seals and opens frames on 128-bit vectors), so a
 * browser that cannot validate this one cannot load it either.
 */
const SIMD_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // "\0asm", version 1
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // types: () -> v128
  0x03, 0x02, 0x01, 0x00, // functions: one, of type 0
  0x0a, 0x08, 0x01, 0x06, 0x00, 0x41, 0x00, 0xfd, 0x0f, 0x0b, // code: i32.const 0, i8x16.splat, end
]);

/** What this browser lacks to run the engine, as a phrase; null when it has everything. */
function unsupported(): string | null {
  if (typeof WebAssembly !== 'object' || typeof WebAssembly.validate !== 'function') {
    return 'WebAssembly is not available (it is off in iOS Lockdown Mode, for one)';
  }
  if (!WebAssembly.validate(SIMD_PROBE)) return 'WebAssembly SIMD128 is not supported (Safari before 16.4, for one)';
  return null;
}
