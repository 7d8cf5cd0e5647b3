// One of several wallets on one client: the wallet calls of LightwireClient, for the
// wallet of a name. Every wallet shares the client's header chain, one pass over each
// block's filter, one fetch of each block that matches and one mempool subscription;
// each keeps what it watches, found and labelled apart, and is saved on its own.
import type { Method } from './protocol.js';
import type {
  Balance,
  BumpFeeOptions,
  BumpedPsbt,
  CreatePsbtOptions,
  CreatedPsbt,
  ImportedLabels,
  LabelRecord,
  TransactionEntry,
  Utxo,
  WalletSummary,
  WatchOptions,
} from './types.js';

/** How a wallet reaches its client's engine. */
export type WalletCall = <T>(method: Method, ...args: unknown[]) => Promise<T>;

/**
 * A named wallet ({@link LightwireClient.wallet}): each method is the client's method of
 * the same name, for this wallet alone. It is made (and saved) by the first call that
 * changes it (`watch`, `importLabels`, `setLabel`), and kept by later sessions until
 * {@link LightwireClient.removeWallet}; before that, its queries answer as for a wallet
 * watching nothing. Its events (`transaction`, `balance`) carry its name as `wallet`.
 * A spend ({@link createPsbt}, {@link bumpFee}) takes only this wallet's coins.
 */
export class Wallet {
  readonly #call: WalletCall;

  /** @internal Made by {@link LightwireClient.wallet}. */
  constructor(
    /** Its name: 1 to 64 bytes of UTF-8, no control characters. */
    readonly name: string,
    call: WalletCall,
  ) {
    this.#call = call;
  }

  /** As {@link LightwireClient.watch}: watching more scans this wallet again, alone. */
  watch(options: WatchOptions): Promise<WalletSummary> {
    return this.#call('watch', options, this.name);
  }

  /** As {@link LightwireClient.unwatch}; resolves `null` if there is no such wallet. */
  unwatch(options: Omit<WatchOptions, 'fromHeight'>): Promise<WalletSummary | null> {
    return this.#call('unwatch', options, this.name);
  }

  /** As {@link LightwireClient.rescan}: the other wallets keep what they found. */
  rescan(options?: { fromHeight?: number }): Promise<WalletSummary> {
    return this.#call('rescan', options ?? {}, this.name);
  }

  /** As {@link LightwireClient.transactions}. */
  transactions(): Promise<TransactionEntry[]> {
    return this.#call('transactions', this.name);
  }

  /** As {@link LightwireClient.utxos}. */
  utxos(): Promise<Utxo[]> {
    return this.#call('utxos', this.name);
  }

  /** As {@link LightwireClient.balance}. */
  balance(minConfirmations?: number): Promise<Balance> {
    return this.#call('balance', minConfirmations, this.name);
  }

  /** As {@link LightwireClient.createPsbt}, from this wallet's coins only. */
  createPsbt(options: CreatePsbtOptions): Promise<CreatedPsbt> {
    return this.#call('createPsbt', options, this.name);
  }

  /** As {@link LightwireClient.bumpFee}, for this wallet's transaction. */
  bumpFee(txid: string, options: BumpFeeOptions): Promise<BumpedPsbt> {
    return this.#call('bumpFee', txid, options, this.name);
  }

  /** As {@link LightwireClient.labels}: this wallet's labels. */
  labels(): Promise<string> {
    return this.#call('labels', this.name);
  }

  /** As {@link LightwireClient.importLabels}, into this wallet. */
  importLabels(jsonLines: string): Promise<ImportedLabels> {
    return this.#call('importLabels', jsonLines, this.name);
  }

  /** As {@link LightwireClient.setLabel}, in this wallet. */
  setLabel(record: LabelRecord): Promise<void> {
    return this.#call('setLabel', record, this.name);
  }
}
