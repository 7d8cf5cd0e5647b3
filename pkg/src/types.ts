// The types of the lightwire package's options, events and answers. The engine (Rust,
// crates/client/src/web) builds these objects; keep both sides in step. The events
// (`LightwireEvent`) are checked: tests/event-contract compares them with the engine's
// table of events (crates/client/src/events.rs), from which it builds every event.

/** A Bitcoin network the client can follow. */
export type Network = 'mainnet' | 'testnet3' | 'testnet4' | 'signet' | 'regtest';

/** A block the app knows is on the real chain. */
export interface Checkpoint {
  height: number;
  /** Block hash, display hex (as explorers show it). */
  hash: string;
}

/**
 * A header the app trusts to start a new store from, instead of genesis: at the first
 * height of a difficulty period (a multiple of 2016), with the chain's cumulative work up
 * to and including it. Everything after it is validated; nothing below it is fetched.
 */
export interface StartHeader {
  height: number;
  /** The header's 80-byte consensus encoding, hex (`getblockheader <hash> false`). */
  header: string;
  /** Cumulative chain work up to it, hex (`getblockheader`'s `chainwork`). */
  chainwork: string;
  /** Its block hash, display hex: checked against the header when given. */
  hash?: string;
}

/** Options for {@link LightwireClient.open}. */
export interface ClientOptions {
  /** The network to follow. Gateways serving another network are refused. */
  network: Network;
  /** Gateway connect strings, `ws[s]://host:port#<node id hex>` (the id pins the gateway's key). */
  gateways: string[];
  /**
   * Checkpoints the app trusts, added to the network's own (Bitcoin Core's): the header at
   * each height must have that hash (display hex), and once the chain reaches one, no fork
   * below it is taken. Give the same list every time a store is opened.
   */
  checkpoints?: Checkpoint[];
  /**
   * Where a new store starts: `'genesis'` (default), `'checkpoint'` (the package's recent
   * header for the network: mainnet only so far) or a {@link StartHeader}. It trusts that
   * header and its chainwork; an existing store keeps the start it was created with.
   */
  start?: 'genesis' | 'checkpoint' | StartHeader;
  /** IndexedDB database name (default `lightwire-<network>`). */
  storeName?: string;
  /** Run the engine in a dedicated Web Worker (default true); false runs it on this thread. */
  worker?: boolean;
  /**
   * Ask the browser to keep the store when space runs low (`navigator.storage.persist()`,
   * default true). Asked without waiting; the answer comes as a `persistence` event.
   */
  persist?: boolean;
  /** Headers gathered per IndexedDB commit during bulk sync (default 50,000). */
  commitEvery?: number;
  /** Headers asked per request (default 20,000). */
  requestSize?: number;
  /** Least time between progress events in milliseconds (default 250). */
  progressIntervalMs?: number;
  /**
   * Sync the compact block filter headers (BIP157) beside the block headers, from gateways
   * that serve them (default true): 32 bytes a block on the wire and in IndexedDB.
   */
  filters?: boolean;
  /**
   * Mirrors of the chain's history: base URLs (`https://host/path/`, or a path on this
   * origin starting with `/`) where a `lightwire-gateway export` is served as static files
   * (docs/PROTOCOL.md, "Bulk files"; deploy/nginx/bulk.conf). A new or behind store reads
   * the headers the mirrors' files hold from them, validated exactly as a gateway's, and
   * asks the gateways only for the rest. A mirror that fails or lies in any way is dropped
   * for the session (a `mirror` event says why); it can make the sync slower, never wrong.
   * At most 8. Not given: the mirrors the gateways advertise (their `init`), if any;
   * `[]`: none at all. (Filters for scans still come from the gateways.)
   */
  bulk?: string[];
  /**
   * How long an unconfirmed transaction of the wallet's that no gateway is known to hold
   * is kept unmined before it is dropped as `expired`, in milliseconds (default two weeks,
   * Bitcoin Core's mempool expiry).
   */
  unconfirmedExpiryMs?: number;
  /**
   * Load the engine's module with silent payments (default false): the scanner for
   * {@link LightwireClient.watchSilentPayments} (its curve arithmetic, the tweak chain's
   * cross-check and disputes) is a second wasm module, fetched only by a client opened
   * with this; without it, `watchSilentPayments` rejects with `NotEnabled`.
   */
  silentPayments?: boolean;
  /**
   * With `silentPayments`: how many extra workers check the receiver's blocks beside the
   * engine's (default `navigator.hardwareConcurrency`, at most 16, but 0 in Firefox, which
   * was seen to block the engine's worker while it made them; 0: the engine's worker
   * checks them itself). Each gets the receiver's keys, the scan key among them, and no
   * other context does. Used where the engine runs in a worker (the default).
   */
  scanWorkers?: number;
  /**
   * How long the engine's worker may leave the page's ping unanswered (pinged every 5 s)
   * before it is taken for hung, terminated and started again on the same store with the
   * same options (a `workerRestarted` event). Default 30,000 ms: the engine's longest
   * synchronous stretch (one message, one commit) is well under a second.
   */
  workerTimeoutMs?: number;
  /**
   * Share one engine between every tab (and worker) of this origin that opens the same
   * store (default true, where the browser has Web Locks and BroadcastChannel): one of them,
   * the leader, runs the engine and the gateways' connections; the others follow it with the
   * same API (see pkg/README, "Several tabs"). With false, this client runs its own engine:
   * a second client on the same store then takes it over and the first stops with a
   * `StoreError`, as where sharing is not available.
   */
  shareTabs?: boolean;
  /**
   * For the package's own tests only, never in an app: lets
   * {@link LightwireClient.testHangWorker} make the worker spin for ever.
   */
  testHooks?: boolean;
  /**
   * For the package's own tests only, with `testHooks`: the first N workers this client
   * starts spin for ever while they open the store, as a hung engine would.
   */
  testHangOpens?: number;
}

/** Where a gateway connection stands. */
export type GatewayState =
  | 'connecting'
  | 'handshaking'
  | 'syncing'
  | 'synced'
  | 'backing-off'
  | 'bad'
  | 'stopped';

/** A block by height and hash (display hex). */
export interface BlockRef {
  height: number;
  hash: string;
}

/**
 * Why a gateway was dropped, for a program to branch on (the `reason` beside it is the
 * sentence for a person). Rule breaks mark the gateway bad for the session; the others
 * (timeouts, lost connections, the gateway's own error) reconnect after a backoff.
 */
export type DropCode =
  // The gateway broke a rule.
  | 'invalid-header'
  | 'unexpected-answer'
  | 'too-many-headers'
  | 'orphan-headers'
  | 'off-checkpoint'
  | 'undelivered-tips'
  | 'undecodable-message'
  | 'wrong-network'
  | 'unknown-required-feature'
  | 'no-init-first'
  | 'ping-flood'
  | 'filter-headers-disjoint'
  | 'filter-headers-out-of-order'
  | 'too-many-filter-headers'
  | 'filter-mismatch'
  | 'undecodable-filter'
  | 'filter-pieces-out-of-order'
  | 'filter-lacks-output'
  | 'filter-withheld'
  | 'filter-checkpoints-missing'
  | 'block-mismatch'
  | 'filter-headers-contradicted'
  | 'cross-check-out-of-order'
  | 'block-withheld'
  | 'block-pieces-out-of-order'
  | 'digest-mismatch'
  | 'invalid-signature'
  | 'withheld-transaction'
  | 'digest-flooding'
  | 'wrong-transaction'
  | 'undecodable-digest'
  // Silent-payment tweaks (with a receiver's scan): a list its block proves wrong, a word
  // broken, a list not its agreed hash, headers or pieces out of order, a tweak that is not
  // a point, a dispute's evidence that is not the block's.
  | 'tweaks-disproven'
  | 'tweak-word-broken'
  | 'tweak-list-mismatch'
  | 'tweak-headers-out-of-order'
  | 'tweak-pieces-out-of-order'
  | 'tweak-list-too-long'
  | 'tweak-not-a-point'
  | 'tweak-evidence-wrong'
  // An answer ended short (a reorganisation, as for filters): reconnects.
  | 'tweaks-cut-short'
  // A header more than two hours ahead of our clock: not a drop. The headers before it are
  // kept, the gateway's tip is set aside until it announces another, its state unchanged.
  | 'future-header'
  // A failed handshake or a frame whose MAC does not check: the client's own engine
  // computing a wrong value (WebKit has been seen to) fails them too, so they reconnect.
  | 'handshake-failed'
  | 'corrupt-frame'
  | 'gateway-error'
  | 'handshake-timeout'
  | 'keepalive-timeout'
  | 'request-timeout'
  | 'open-failed'
  | 'closed'
  | 'connection-lost'
  | 'no-randomness'
  | 'connection-failed'
  | 'filters-cut-short'
  | 'internal-error';

/** A gateway's connection changed state. */
export interface GatewayChange {
  type: 'gateway';
  gateway: number;
  url: string;
  state: GatewayState;
  /**
   * Why it dropped or was marked bad, as a sentence (or, with the state unchanged and
   * code `future-header`, why its tip is set aside: a header not yet valid); null
   * otherwise.
   */
  reason: string | null;
  /** The same, as a code; null otherwise. */
  code: DropCode | null;
}

/** Why a mirror was dropped, as a code (the sentence is in `reason`). */
export type MirrorCode =
  | 'not-found'
  | 'http-error'
  | 'fetch-failed'
  | 'manifest-invalid'
  | 'wrong-hash'
  | 'truncated'
  | 'too-long'
  | 'corrupt-file'
  | 'invalid-header'
  | 'future-header'
  | 'not-our-chain'
  | 'filter-headers-contradicted'
  | 'filter-mismatch'
  | 'wrong-range'
  | 'slow'
  | 'stalled';

/** A mirror's manifest was read (`ready`), or the mirror was dropped for the session. */
export interface MirrorChange {
  type: 'mirror';
  /** Index in `bulk`. */
  mirror: number;
  url: string;
  state: 'ready' | 'dropped';
  /** With `ready`: the height its files claim to reach; null otherwise. */
  height: number | null;
  /** With `dropped`: why, as a sentence; null otherwise. */
  reason: string | null;
  /** The same, as a code; null otherwise. */
  code: MirrorCode | null;
}

/** Sync progress, at most every `progressIntervalMs` and whenever `synced` flips. */
export interface SyncProgress {
  type: 'progress';
  /** Height of the validated best chain. */
  height: number;
  /** Height stored in IndexedDB. */
  storedHeight: number;
  /** The best tip announced by a gateway (or the height, when nothing is missing). */
  targetHeight: number;
  headersPerSecond: number;
  bytesPerSecond: number;
  synced: boolean;
  /** Height of the last filter header held (BIP157), or null when none is. */
  filterHeight: number | null;
}

/** A commit reached IndexedDB: the stored tip. */
export interface NewTip extends BlockRef {
  type: 'tip';
  /** Block time, seconds since the epoch. */
  time: number;
  /** Height of the last stored filter header (BIP157), or null when none is. */
  filterHeight: number | null;
}

/** The best chain switched branches. */
export interface Reorg {
  type: 'reorg';
  oldTip: BlockRef;
  newTip: BlockRef;
  /** Blocks of the old chain replaced. */
  depth: number;
}

/** A gateway broke a rule (an invalid header, an undecodable message...) and was dropped for the session. */
export interface Rejected {
  type: 'rejected';
  gateway: number;
  url: string;
  /** The rule, as a sentence. */
  reason: string;
  /** The rule, as a code. */
  code: DropCode;
  /** For an invalid header: its height; null otherwise. */
  height: number | null;
  /**
   * For an invalid header: the rule it broke (Bitcoin Core's reject reason where it has
   * one, e.g. 'high-hash', 'bad-diffbits', 'time-too-new'); null otherwise.
   */
  rule: string | null;
}

/** A gateway sent a warning. */
export interface GatewayWarning {
  type: 'warning';
  gateway: number;
  url: string;
  text: string | null;
}

/** The client itself failed (storage, or the engine); `fatal` when it stopped. */
export interface ClientError {
  type: 'error';
  /**
   * `QuotaExceeded` (the browser will store no more), `StoreError`, `WorkerError` (the
   * worker failed to load or threw, or could not be restarted after it hung), or `EngineFailed` (the engine's loop failed in the
   * worker: a bug, reported rather than silent).
   */
  kind: string;
  message: string;
  fatal: boolean;
}

/**
 * The engine's worker left a ping unanswered for `silentMs` (`reason` `hung`: see
 * `ClientOptions.workerTimeoutMs`; also while it opened the store, where a worker replaced
 * three times in ten minutes fails the open with a `WorkerError`), or its engine failed
 * after it opened (`failed`, with the
 * failure's `message`: a trap; at most three times in ten minutes, then the client stops
 * with a fatal `error` event): it was terminated and a new one opened on the same store with
 * the same options; the sync and the watched wallet resume from the store. Calls in flight
 * were asked again of the new worker (`retried`), once: the one rule for a moved engine,
 * the same after a hand-over between tabs; one in flight across a second restart, and the
 * package's own test requests, rejected with `WorkerRestarted` (`rejected`).
 */
export interface WorkerRestarted {
  type: 'workerRestarted';
  reason: 'hung' | 'failed';
  /** What the failed worker said (null when it hung). */
  message: string | null;
  /** How long the hung worker was silent (0 when it failed). */
  silentMs: number;
  /** Restarts in this client's life, this one included. */
  restarts: number;
  retried: number;
  rejected: number;
}

/**
 * Whether this tab runs the engine (`leader`: the gateways' connections, the store's only
 * writer) or has its calls carried to the tab that does (`follower`). See
 * `ClientOptions.shareTabs`.
 */
export type Role = 'leader' | 'follower';

/**
 * This tab's role, once it is known (with the first events after `open`) and whenever it
 * changes: a follower becomes the leader when the leading tab goes.
 */
export interface RoleChange {
  type: 'role';
  role: Role;
}

/** Every event the client dispatches. */
export type LightwireEvent =
  | Persistence
  | RoleChange
  | WorkerRestarted
  | GatewayChange
  | MirrorChange
  | SyncProgress
  | NewTip
  | Reorg
  | Rejected
  | FilterConflict
  | FilterDispute
  | TransactionEvent
  | WalletWaiting
  | BalanceEvent
  | BroadcastEvent
  | ScanProgress
  | ScanMatch
  | ScanWithdrawn
  | ScanReached
  | SilentPaymentFound
  | SilentStalled
  | GatewayWarning
  | ClientError;

/** What {@link LightwireClient.scan} watches. */
export interface ScanOptions {
  /** Output scripts, hex (e.g. `0014<20-byte key hash>` for P2WPKH). */
  scripts: string[];
  /** The first block to match (default 0). */
  fromHeight?: number;
}

/** What {@link LightwireClient.watch} watches (at least one list). */
export interface WatchOptions {
  /** Addresses of the client's network: P2PKH, P2SH (base58check), P2WPKH, P2WSH, P2TR. */
  addresses?: string[];
  /** Output scripts, hex. */
  scripts?: string[];
  /**
   * Descriptors over an extended public key: `pkh(...)`, `sh(wpkh(...))`, `wpkh(...)`,
   * `tr(...)` (key path), with `xpub` (mainnet) or `tpub` and `/<0;1>/*` (receive and change,
   * the default for a bare key), `/0/*` or `/1/*`; a `#checksum` is checked when given.
   * Derived with a gap limit of 20 that grows as addresses are used.
   */
  descriptors?: string[];
  /** The first block to look at (default 0): the wallet's birthday. */
  fromHeight?: number;
}

/** What {@link LightwireClient.watchSilentPayments} receives with. */
export interface SilentPaymentOptions {
  /** The scan private key, 64 hex characters (it stays in the engine's worker). */
  scanKey: string;
  /** The spend public key, 66 hex characters (compressed); or `address`. */
  spendKey?: string;
  /** The receiver's own (unlabelled) address, `sp1...` (`tsp1...` on test networks); or `spendKey`. */
  address?: string;
  /** The labels the app hands out (from 1; the change label 0 is always looked for). */
  labels?: number[];
  /** The first block to look at (default 0): the receiver's birthday. */
  fromHeight?: number;
  /**
   * Where the spend key derives from, as a descriptor writes a key origin
   * (`[d34db33f/352h/0h/0h/0h/0]`: the master key's fingerprint, then the path). Given to
   * the signer with each silent coin `createPsbt` spends (BIP376's
   * `PSBT_IN_SP_SPEND_BIP32_DERIVATION`), so that a signer holding the master key finds
   * the spend key; without it, a zero fingerprint and no path.
   */
  spendKeyOrigin?: string;
  /**
   * Keep these keys in the client's store (default false), so that the next session's
   * engine starts the receiver itself, without this call. The store is this origin's
   * IndexedDB, unencrypted: whoever can read it (another script of the origin, someone
   * with the device's browser profile) can then see every payment to the address and its
   * labels, and follow each one spent; not spend them (the spend key's secret is never
   * given). A call without it deletes keys kept by an earlier one.
   */
  persistScanKey?: boolean;
}

/** What {@link LightwireClient.watchSilentPayments} resolves to. */
export interface SilentPaymentReceiver {
  /** Its address on the client's network. */
  address: string;
  /** Each label's address. */
  labels: { label: number; address: string }[];
}

/** Satoshis, as a number: every amount of bitcoin is below 2^53, so exact. */
export type Satoshis = number;

/** A transaction of the wallet's, found in a block. */
export interface WalletTransaction {
  /** Display hex. */
  txid: string;
  height: number;
  /** Display hex. */
  blockHash: string;
  /** Its position in the block. */
  position: number;
  /** What its outputs pay the wallet. */
  received: Satoshis;
  /** The value of the wallet's coins it spends. */
  sent: Satoshis;
  /** Its fee, known when every input was the wallet's; null otherwise. */
  fee: Satoshis | null;
}

/**
 * A transaction of the wallet's not in a block: one it broadcast that a gateway passed to
 * its node, or one a gateway's mempool digest announced that pays the wallet or spends
 * its coins. Nothing proves it (no proof of work): it may never be mined, and is never
 * counted as confirmed.
 */
export interface UnconfirmedTransaction {
  /** Display hex. */
  txid: string;
  height: null;
  blockHash: null;
  /** What its outputs pay the wallet. */
  received: Satoshis;
  /** The value of the wallet's coins it spends (confirmed or unconfirmed). */
  sent: Satoshis;
  /** Its fee, known when every input was the wallet's; null otherwise. */
  fee: Satoshis | null;
  /** How many gateways are known to hold it now (0 after a restart until one says so). */
  gateways: number;
  /** When it was first seen, in milliseconds since the Unix epoch. */
  firstSeen: number;
  /**
   * Its outputs that pay the silent-payment receiver (BIP352), found in the mempool with
   * the tweak a gateway gave (an output found is at the receiver's key whatever the
   * tweak; the transaction is trusted for nothing until mined, as any unconfirmed one):
   * the output, the private-key tweak that spends it (hex), its label (0: change; null
   * for the plain address) and the spend public key (hex). Empty for most.
   */
  silentPayments: Array<{ vout: number; tweak: string; label: number | null; spendKey: string }>;
}

/**
 * An entry of {@link LightwireClient.transactions}: in a block, or not yet, with its
 * BIP329 label (null with none).
 */
export type TransactionEntry =
  | ({ status: 'confirmed'; label: string | null } & WalletTransaction)
  | ({ status: 'unconfirmed'; label: string | null } & UnconfirmedTransaction);

/**
 * A coin of the wallet's that no known transaction spends (as Bitcoin Core's
 * `listunspent`): a confirmed one, or an output of an unconfirmed transaction.
 */
export interface Utxo {
  /** Display hex. */
  txid: string;
  vout: number;
  value: Satoshis;
  /** The output script, hex. */
  script: string;
  /** Its block's height; null while unconfirmed. */
  height: number | null;
  /** 0 while unconfirmed. */
  confirmations: number;
  /** A coinbase output: spendable after 100 confirmations. */
  coinbase: boolean;
  status: 'confirmed' | 'unconfirmed';
  /** Its output's BIP329 label; null with none. */
  label: string | null;
  /** The address its script pays (null for a script no address stands for). */
  address: string | null;
  /** That address's BIP329 label; null with none. */
  addressLabel: string | null;
  /**
   * Frozen (BIP329 `spendable: false`): {@link LightwireClient.createPsbt} leaves it out
   * unless named in `coins`.
   */
  frozen: boolean;
  /** For a coin of a watched descriptor: the descriptor (with its checksum); else null. */
  descriptor: string | null;
  /** `'change'` on a descriptor's change branch (`/1` of `<0;1>`), else `'receive'`; null
   * for a coin of a script or address watched as such. */
  keychain: 'receive' | 'change' | null;
  /** The index on its branch; null as above. */
  index: number | null;
  /** The full BIP32 path from the master key (`m/84'/0'/0'/0/5`: the descriptor's key
   * origin, its steps, the branch, the index); null as above. */
  derivationPath: string | null;
  /** The master key's fingerprint (hex, 8 digits) from the descriptor's key origin, or the
   * extended key's own when it gives none; null as above. */
  masterFingerprint: string | null;
  /**
   * For a silent payment the receiver's scan found: the private-key tweak that spends it
   * (hex; the key that signs is the spend key plus it, modulo the curve's order, negated
   * if its point's y is odd, as BIP340 keys are) and the label it was paid to (0: change;
   * null for the plain address), and the spend public key (hex). `createPsbt` gives such a
   * coin's input BIP376's fields (the tweak, the spend key), which make the PSBT version 2
   * (BIP370). Null for any other coin.
   */
  silentPayment: { tweak: string; label: number | null; spendKey: string } | null;
}

/** The wallet's balance. */
export interface Balance {
  /** Coins with at least the confirmations asked for (1 by default), mature. */
  confirmed: Satoshis;
  /** Coins with fewer confirmations than asked for. */
  pending: Satoshis;
  /** Coinbase outputs with fewer than 100 confirmations. */
  immature: Satoshis;
  /** Unspent coins in all. */
  coins: number;
  /**
   * The net of the unconfirmed transactions (incoming positive, outgoing negative): what
   * they will do to the balance if they are mined. Never part of the others: a coin an
   * unconfirmed transaction spends is still in `confirmed` until a block spends it.
   */
  unconfirmed: Satoshis;
}

/** What {@link LightwireClient.watch} resolves to. */
export interface WalletSummary {
  transactions: number;
  balance: Balance;
}

/**
 * Why an unconfirmed transaction was dropped: `replaced` (a later one spending the same
 * coin replaced it or its ancestor, BIP125), `conflicted` (a mined transaction spent a
 * coin it, or its ancestor, spends), `expired` (not mined within `unconfirmedExpiryMs`
 * and no gateway holds it), `evicted` (every gateway that held it let it go),
 * `unwatched` (it touches nothing still watched).
 */
export type DroppedReason = 'replaced' | 'conflicted' | 'expired' | 'evicted' | 'unwatched';

/**
 * Which wallet an event is about: the name given to {@link LightwireClient.wallet}, or
 * `null` for the default wallet (the client's own wallet calls).
 */
export interface OfWallet {
  wallet: string | null;
}

/**
 * A wallet transaction found in a block (`found`), withdrawn because a reorganisation
 * disconnected its block (`withdrawn`: only `txid` and `height` are given; it comes back
 * as `found` if the new branch has it), seen unconfirmed (`unconfirmed`: again when the
 * number of gateways holding it changes), or dropped unmined (`dropped`; `by` names the
 * replacing or conflicting transaction when one did). A mined unconfirmed transaction
 * comes as `found`. `wallet` says whose: a transaction two wallets share comes once for
 * each.
 */
export type TransactionEvent =
  | ({ type: 'transaction'; status: 'found' } & WalletTransaction & OfWallet)
  | ({ type: 'transaction'; status: 'withdrawn'; txid: string; height: number } & OfWallet)
  | ({ type: 'transaction'; status: 'unconfirmed' } & UnconfirmedTransaction & OfWallet)
  | ({ type: 'transaction'; status: 'dropped'; txid: string; reason: DroppedReason; by: string | null } & OfWallet);

/** What {@link LightwireClient.broadcast} resolves to (and the `broadcast` event). */
export interface BroadcastResult {
  /** Display hex. */
  txid: string;
  /** How many gateways passed it to their nodes. */
  relayed: number;
  /**
   * The gateways that did not, and why: `malformed`, `oversized`, `not-standard`,
   * `invalid` (an input spent twice, outputs above 21 million bitcoin, a null previous
   * output: Bitcoin Core's `CheckTransaction`), `no-node` (it serves a chain of its own),
   * `busy` (its node is not connected, or it did not answer in 30 s).
   */
  refused: { gateway: number; url: string; reason: 'malformed' | 'oversized' | 'not-standard' | 'invalid' | 'no-node' | 'busy' }[];
}

/** What {@link LightwireClient.createPsbt} takes. */
export interface CreatePsbtOptions {
  /** What to pay, in order: an address of the client's network and whole satoshis (not
   * dust for its script: 294 for P2WPKH, 330 for P2TR, 546 for P2PKH); or, for one output
   * at most, `'max'` (send-max, as Bitcoin Core's `sendall`): it takes everything the
   * coins spent hold less the other outputs and the fee, and no change is made. With
   * `coins`, exactly those are spent; else every coin the wallet would pick (one
   * signer's: `MixedSigners` when several hold coins, unless `changeDescriptor` is named,
   * then all). */
  outputs: { address: string; value: Satoshis | 'max' }[];
  /** Satoshis per virtual byte, from 0.1 (the minimum Bitcoin Core relays since 29.1;
   * btcd, Knots and older Core relay from 1) to 10,000. */
  feeRate: number;
  /** Coins to spend (`txid:vout`), all of them and no others; by default the wallet picks. */
  coins?: string[];
  /** Let the wallet pick the outputs of unconfirmed transactions it broadcast itself too
   * (default false); someone else's unconfirmed payment is spent only when named. */
  includeUnconfirmed?: boolean;
  /** The descriptor change goes to (one the wallet watches; its checksum optional). By
   * default the wallet spends one signer's coins (the master key of a descriptor's key
   * origin) and sends change to that signer's change branch, so that change never goes
   * to a key another signer holds; coins of several signers are spent together only when
   * this is named. */
  changeDescriptor?: string;
}

/** What {@link LightwireClient.createPsbt} resolves to. */
export interface CreatedPsbt {
  /** The PSBT, base64: BIP174's version 0, or BIP370's version 2 when it spends a silent
   * payment (BIP376's fields, which version 0 may not carry). */
  psbt: string;
  /** The fee it pays. */
  fee: Satoshis;
  /** The part of `fee` paying for unconfirmed parents below `feeRate` (child pays for
   * parent, as Bitcoin Core's wallet since v26); 0 for confirmed coins. A stranger's
   * payment's own fee is not known to a light client: it counts as nothing. */
  ancestorFee: Satoshis;
  /** Its virtual size once signed, as budgeted (72-byte ECDSA, 65-byte Schnorr signatures). */
  vsize: number;
  /** The rate asked, sat/vB. */
  feeRate: number;
  /** The change output, or null when there is none (the rest, below a change output's
   * worth, went to the fee). */
  change: { address: string; value: Satoshis; vout: number } | null;
  /** The coins it spends, `txid:vout`, in input order. */
  inputs: string[];
}

/**
 * A BIP329 record, one line of a label file: what it labels (`type`: `tx`, `addr`,
 * `pubkey`, `input`, `output`, `xpub`, `spscan`; `ref`: a txid, an address, a public key,
 * `txid:index`, an extended key, a scan key expression), the label, the key origin of
 * the wallet it belongs to, and for an output whether it may be spent.
 */
export interface LabelRecord {
  type: 'tx' | 'addr' | 'pubkey' | 'input' | 'output' | 'xpub' | 'spscan';
  ref: string;
  /** At most 255 characters kept; `null` (for {@link LightwireClient.setLabel}) removes it. */
  label?: string | null;
  origin?: string;
  /** Outputs only: `false` freezes the coin. */
  spendable?: boolean;
}

/** What {@link LightwireClient.importLabels} resolves to. */
export interface ImportedLabels {
  /** Records taken. */
  imported: number;
  /** Records of a type BIP329 does not define, skipped. */
  unknown: number;
  /** Labels cut to 255 characters. */
  cut: number;
}

/** What {@link LightwireClient.bumpFee} takes. */
export interface BumpFeeOptions {
  /** Satoshis per virtual byte of the replacement: at least the old rate plus 1 (Bitcoin
   * Core's incremental relay fee), at most 10,000. */
  feeRate: number;
}

/** What {@link LightwireClient.bumpFee} resolves to: the replacement's PSBT. */
export interface BumpedPsbt extends CreatedPsbt {
  /** The transaction it replaces. */
  replaces: string;
}

/** What {@link LightwireClient.feeRates} resolves to: sat/vB, null where none is known. */
export interface FeeRatesResult {
  blocks1: number | null;
  blocks6: number | null;
  blocks144: number | null;
  /** Each gateway's answer, as it said it (not bounded). */
  sources: {
    gateway: number;
    url: string;
    /** Its node's `estimatesmartfee` (Bitcoin Core), `estimatefee` (btcd), or none yet. */
    source: 'estimatesmartfee' | 'estimatefee' | 'none' | 'other';
    blocks1: number | null;
    blocks6: number | null;
    blocks144: number | null;
  }[];
}

/** Every gateway a transaction was sent to answered. */
export interface BroadcastEvent extends BroadcastResult {
  type: 'broadcast';
}

/** A wallet's balance after transactions were found or withdrawn (`wallet` says whose). */
export interface BalanceEvent extends Balance, OfWallet {
  type: 'balance';
}

/** A block whose filter matched a watched script. */
export interface ScanMatchRef {
  height: number;
  /** Display hex. */
  blockHash: string;
}

/** What {@link LightwireClient.scan} resolves to. */
export interface ScanResult {
  /** Every block that matched, ascending. */
  matches: ScanMatchRef[];
}

/** Scan progress, with the sync's progress events. */
export interface ScanProgress {
  type: 'scan';
  /** The last block matched. */
  height: number;
  fromHeight: number;
  /** The last stored filter header (where the scan is going), or null. */
  targetHeight: number | null;
  filtersPerSecond: number;
  bytesPerSecond: number;
  /** Filters matched since the scan started. */
  filters: number;
  /** Blocks that matched so far. */
  matches: number;
}

/**
 * An output paying the silent-payment receiver (BIP352): found in a block checked against
 * its header (the wallet watches its script from that block on), or, with `height` and
 * `blockHash` null, in a transaction of a gateway's mempool (unconfirmed: nothing proves
 * it until a block holds it, when it is told again with its block).
 */
export interface SilentPaymentFound {
  type: 'silentPayment';
  /** Its block's height; null for one found in the mempool. */
  height: number | null;
  /** Display hex; null for one found in the mempool. */
  blockHash: string | null;
  /** Display hex. */
  txid: string;
  vout: number;
  /** The output's x-only key, hex. */
  outputKey: string;
  /**
   * The private-key tweak that spends it, hex: the key that signs is the spend key plus
   * this (modulo the curve's order).
   */
  tweak: string;
  /** The label it was paid to (0: the change label), null for the plain address. */
  label: number | null;
}

/**
 * The gateways' silent-payment tweak lists of a block differ and none present gave the
 * block or what it spends from: the receiver's scan waits below it, and asks again when
 * the chain moves or a gateway comes back.
 */
export interface SilentStalled {
  type: 'silentStalled';
  height: number;
}

/** A block's filter matched a watched script. */
export interface ScanMatch extends ScanMatchRef {
  type: 'scanMatch';
}

/** A matched block was disconnected by a reorg: the match is withdrawn. */
export interface ScanWithdrawn extends ScanMatchRef {
  type: 'scanWithdrawn';
}

/**
 * A block the wallet's filters matched has waited 10 s with no gateway asked for it, and
 * why (once for each block; it is asked as soon as it can be): `no-gateway`, no connected
 * gateway serves blocks; `not-found`, every one that does said it lacks the block (they are
 * all asked again every 10 s; a gateway whose own filter matched the block and whose tip
 * still holds it is marked bad for withholding it).
 */
export interface WalletWaiting {
  type: 'walletWaiting';
  height: number;
  reason: 'no-gateway' | 'not-found';
}

/** The scan matched every block whose filter header is stored. */
export interface ScanReached {
  type: 'scanReached';
  height: number;
  /** How many blocks matched in all. */
  matches: number;
}

/**
 * A gateway's filter header differs from the one held at `height`: it is not asked for
 * filters while a dispute settles which is wrong (a `filterDispute` follows).
 */
export interface FilterConflict {
  type: 'filterConflict';
  gateway: number;
  url: string;
  /** A height where its filter-header chain and ours differ. */
  height: number;
}

/**
 * A dispute over filter headers is over, settled from the block at `height`:
 * `theirs-wrong`: the gateway's filter lacks an output script of the block (it is marked
 * bad, `filter-lacks-output`); `ours-wrong`: the filter headers held were, and are synced
 * again from this gateway (the gateways that vouched for them are marked bad);
 * `ours-undefended`: no gateway present would defend the filter headers held (by handing
 * over their filter of the block) and this gateway's filter holds every output script:
 * they are synced again from it, nobody marked bad; `undecided`: both filters hold every output script (the scripts inputs spend are not in
 * the block), or the block could not be had: ours are kept, the gateway is not used for
 * filters.
 */
export interface FilterDispute {
  type: 'filterDispute';
  gateway: number;
  url: string;
  verdict: 'theirs-wrong' | 'ours-wrong' | 'ours-undefended' | 'undecided';
  /** Where the two filter-header chains part. */
  height: number;
}

/**
 * The browser's answer to the `persist` request, once it gives one. `open` never waits
 * for it: Firefox asks the user first, and the answer may take as long as the user does
 * (or never come).
 */
export interface Persistence {
  type: 'persistence';
  /** Whether the browser will keep the store when space runs low. */
  persisted: boolean;
}

/**
 * Where the wallet's block fetching stands (`metrics().wallet`): what to read when a
 * payment its filter matched is not found.
 */
export interface WalletTrace {
  /** Whether the scan under way is the wallet's (its matches are fetched). */
  scanForWallet: boolean;
  /** Scripts the wallet watches, and scripts its scan matches (it needs every one). */
  walletScripts: number;
  scanScripts: number;
  /** The highest block applied, or null. */
  applied: number | null;
  /** Blocks matched and not applied yet, and the next of them (null: none). */
  pendingBlocks: number;
  front: number | null;
  /** The gateway its block request is in flight to and the request's id (null: none). */
  askedGateway: number | null;
  askedId: number | null;
  /** Gateways that failed the next block (said they lack it, or sent another). */
  tried: number;
  /** Milliseconds until a block every gateway lacked is asked again (null: not waiting). */
  retryInMs: number | null;
  /** Milliseconds until the wallet's next deadline (null: none). */
  deadlineInMs: number | null;
}

/** A snapshot of the client's counters. */
export interface Metrics {
  /** Allocations in wasm since start (count, bytes), and bytes live now. */
  allocations: number;
  allocatedBytes: number;
  liveBytes: number;
  /** Size of the wasm linear memory. */
  wasmMemoryBytes: number;
  messagesIn: number;
  bytesIn: number;
  messagesOut: number;
  bytesOut: number;
  reconnects: number;
  /** The engine's timers set and neither fired nor cleared (at most one when all is well). */
  timersPending: number;
  /** IndexedDB commits, their total and last duration, and headers they wrote. */
  idbCommits: number;
  idbCommitMs: number;
  idbLastCommitMs: number;
  idbHeadersWritten: number;
  headersValidated: number;
  validatedHeight: number;
  storedHeight: number;
  targetHeight: number | null;
  synced: boolean;
  /** The last filter header validated and the last stored (BIP157), or null. */
  filterHeight: number | null;
  storedFilterHeight: number | null;
  /** Filter headers written to IndexedDB since the client opened. */
  idbFilterHeadersWritten: number;
  /**
   * Milliseconds until the engine's next deadline (negative: overdue), and until the timer
   * the loop armed for it fires; null when none. A stall report reads these.
   */
  nextDeadlineInMs: number | null;
  timerInMs: number | null;
  /** Where the wallet's block fetching stands, while something is watched (else null). */
  wallet: WalletTrace | null;
  /** The silent-payment receiver's scan, once started (else null). */
  silentScan: SilentScanProgress | null;
  elapsedMs: number;
  /** Time the engine spent taking socket messages (decrypting, validating), ms. */
  receiveMs: number;
  /**
   * Time the engine's loop waited for input with no IndexedDB commit in flight, ms: a sync
   * held back by its delivery (sockets, mirror fetches) shows here.
   */
  idleMs: number;
  /** Time the loop waited on an IndexedDB commit with no input to take, ms. */
  commitWaitMs: number;
  /** Where the bytes came from: each gateway, then each mirror (`bulk`), in list order. */
  sources: ByteSource[];
}

/** Where the silent-payment receiver's scan stands. */
export interface SilentScanProgress {
  /** The first block scanned. */
  fromHeight: number;
  /** The last block scanned (every one from `fromHeight` to it); null before the first. */
  height: number | null;
  /** Tweaks tested against blocks' filters so far (the scan's work: one point multiplication each). */
  tweaks: number;
  /**
   * The workers checking its blocks beside the engine's (see `scanWorkers`): 0 when the
   * engine's worker checks them itself (or every pool worker failed).
   */
  workers: number;
  /** Why workers of the scan's were let go (their checks run elsewhere), the last four. */
  workerFailures: string[];
}

/** Bytes received from one gateway or mirror since the client opened. */
export interface ByteSource {
  kind: 'gateway' | 'mirror';
  url: string;
  bytes: number;
}

/** A stored block header. Hashes are display hex. */
export interface HeaderInfo {
  height: number;
  hash: string;
  prevHash: string;
  merkleRoot: string;
  time: number;
  bits: number;
  nonce: number;
  version: number;
}

/** The stored tip. */
export interface TipInfo extends BlockRef {
  time: number;
}

/** A transaction proven to be in a stored block. */
export interface Inclusion {
  height: number;
  confirmations: number;
  blockHash: string;
}

/** Storage use (bytes) and whether the browser promised to keep it. */
export interface StorageInfo {
  usage: number | null;
  quota: number | null;
  persisted: boolean;
}

/** A gateway's URL and state. */
export interface GatewayInfo {
  url: string;
  state: GatewayState;
}
