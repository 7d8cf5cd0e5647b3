// Messages between the page and the engine's worker.
import type { ClientOptions, LightwireEvent } from './types.js';

/** The engine's methods reachable from the page. */
export type Method =
  | 'tip'
  | 'gateways'
  | 'metrics'
  | 'headerAt'
  | 'headerByHash'
  | 'verifyInclusion'
  | 'scan'
  | 'watch'
  | 'unwatch'
  | 'transactions'
  | 'utxos'
  | 'balance'
  | 'broadcast'
  | 'stop';

/**
 * What the page asks of the worker: open the engine, call it, answer a ping (the page's
 * watchdog: see supervisor.ts), or, for the package's own tests and only in a worker opened
 * with `testHooks: true`, spin for ever as a hung engine does.
 */
export type RequestBody =
  | { op: 'open'; options: ClientOptions }
  | { op: 'call'; method: Method; args: unknown[] }
  | { op: 'ping' }
  | { op: 'hang' };

/** Page to worker. */
export type Request = RequestBody & { id: number };

/** Worker to page. */
export type Reply =
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; error: { name: string; message: string } }
  | { event: LightwireEvent };

/** An error's name and message, which survive postMessage. */
export function plainError(e: unknown): { name: string; message: string } {
  if (e instanceof Error) return { name: e.name, message: e.message };
  return { name: 'Error', message: String(e) };
}

/** Rebuild an Error from {@link plainError}. */
export function toError(e: { name: string; message: string }): Error {
  const err = new Error(e.message);
  err.name = e.name;
  return err;
}
