// Messages between the page and the engine's worker.
import type { ClientOptions, LightwireEvent } from './types.js';

/** The engine's methods reachable from the page. */
export const METHODS = [
  'tip',
  'gateways',
  'metrics',
  'headerAt',
  'headerByHash',
  'verifyInclusion',
  'scan',
  'watch',
  'unwatch',
  'rescan',
  'watchSilentPayments',
  'transactions',
  'utxos',
  'balance',
  'broadcast',
  'createPsbt',
  'bumpFee',
  'feeRates',
  'labels',
  'importLabels',
  'setLabel',
  'wallets',
  'removeWallet',
  'stop',
] as const;

/** One of {@link METHODS}. */
export type Method = (typeof METHODS)[number];


/** A call sent on and not answered yet. */
export interface PendingCall<M> {
  method: M;
  args: unknown[];
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
  /** How many times the engine moved while it was in flight (see {@link askedAgain}). */
  moves?: number;
}

/**
 * The one rule for a call in flight when the engine moves (its worker restarted, or the
 * tab that ran it gone), the same in tabs.ts and supervisor.ts: it is asked again of the
 * next engine, once. Every call of the API is safe to repeat: reads; `watch` and `unwatch`
 * of the same items and `scan` of the same scripts end where one call would; a
 * transaction relayed twice is one transaction; `createPsbt` and `bumpFee` build anew.
 * One in flight across a second move is rejected (it may be what the engine cannot carry
 * out), as is `stop` (nothing is left to stop: it resolves instead).
 */
export function askedAgain<M>(p: PendingCall<M>): boolean {
  return p.method !== 'stop' && p.method !== null && (p.moves ?? 0) < 1;
}

/**
 * What the page asks of the worker: open the engine, call it, answer a ping (the page's
 * watchdog: see supervisor.ts), or, for the package's own tests and only in a worker opened
 * with `testHooks: true`, spin for ever as a hung engine does, or fail as a trapped one does
 * (`throw`: an exception out of a callback, the worker's `error` event; `reject`: a failure
 * in the engine's loop, an `EngineFailed` error event).
 */
export type RequestBody =
  | { op: 'open'; options: ClientOptions; attempt: number }
  | { op: 'call'; method: Method; args: unknown[] }
  | { op: 'ping' }
  | { op: 'hang' }
  | { op: 'fail'; how: 'throw' | 'reject' }
  // From the engine's worker to a worker of its scan pool (scanpool.ts).
  | { op: 'scanHelper'; network: string; keys: unknown }
  | { op: 'scan'; list: Uint8Array; filter: Uint8Array; hash: Uint8Array };

/** Page to worker. */
export type Request = RequestBody & { id: number };

/** Worker to page. */
export type Reply =
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; error: PlainError }
  | { event: LightwireEvent };

/** An error's name and message, which survive postMessage. */
/**
 * An error as it crosses a worker or a tab: its name, its message and, for a label file
 * refused by `importLabels`, the file's `line`.
 */
export interface PlainError {
  name: string;
  message: string;
  line?: number;
}

export function plainError(e: unknown): PlainError {
  if (e instanceof Error) {
    const line = (e as { line?: unknown }).line;
    return typeof line === 'number' ? { name: e.name, message: e.message, line } : { name: e.name, message: e.message };
  }
  return { name: 'Error', message: String(e) };
}

/** An Error with this name (what callers tell errors apart by) and message. */
export function named(name: string, message: string): Error {
  const err = new Error(message);
  err.name = name;
  return err;
}

/** Rebuild an Error from {@link plainError}. */
export function toError(e: PlainError): Error {
  const err = new Error(e.message);
  err.name = e.name;
  if (typeof e.line === 'number') (err as Error & { line?: number }).line = e.line;
  return err;
}
