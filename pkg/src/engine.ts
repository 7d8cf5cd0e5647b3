// The engine on the current thread: the wasm module's Client, behind the same call
// interface the worker offers. Two builds of the module: the default one, and one with
// silent payments (`silentPayments: true`: its wasm is fetched only then, since the scanner
// would weigh on every app's first download). Both glue modules are imported statically:
// a dynamic import() makes the worker's bundle a code-splitting one, which Vite's default
// worker format (iife) refuses; the glue is small (11 KB gzipped), the wasm is not.
import init, { Client } from '../wasm/lightwire.js';
import initWithSilent, { Client as ClientWithSilent, ScanHelper } from '../wasm-sp/lightwire.js';
import { named, type Method } from './protocol.js';
import { ScanPool, type Helper } from './scanpool.js';
import type { ClientOptions, LightwireEvent } from './types.js';

/** Calls into an engine, wherever it runs. */
export interface Backend {
  call(method: Method, args: unknown[]): Promise<unknown>;
  /** Release it (after `stop`). */
  close(): void;
}

let ready: Promise<typeof Client> | undefined;
let readyWithSilent: Promise<typeof Client> | undefined;

/** The module's `Client` class: the default build, or the one with silent payments. */
function clientClass(silentPayments: boolean): Promise<typeof Client> {
  if (!silentPayments) {
    ready ??= init().then(() => Client);
    return ready;
  }
  // The same class, with `watchSilentPayments` besides.
  readyWithSilent ??= initWithSilent().then(() => ClientWithSilent as unknown as typeof Client);
  return readyWithSilent;
}

/** A silent-payment receiver's filter checks on this thread (a scan pool's worker). */
export async function openScanHelper(network: string, keys: unknown): Promise<Helper> {
  await clientClass(true);
  return new ScanHelper(network, keys);
}

/**
 * The pool of workers for a receiver's filter checks (see scanpool.ts), where this engine
 * runs in a worker: each is another instance of this worker's own script.
 */
function scanPool(options: ClientOptions, answer: PoolAnswer): ScanPool | undefined {
  const scope = globalThis as unknown as { WorkerGlobalScope?: unknown; location?: { href: string } };
  const inWorker = typeof scope.WorkerGlobalScope === 'function' && globalThis instanceof (scope.WorkerGlobalScope as typeof Object);
  const cores = typeof navigator !== 'undefined' ? navigator.hardwareConcurrency || 1 : 1;
  // Not in Firefox by default: it makes a worker's worker through its main thread, and the
  // engine's worker was seen blocked there for 20-30 s (once long enough to be restarted
  // as hung). There the engine's worker checks, unless the app asks for workers.
  const gecko = typeof navigator !== 'undefined' && /\bFirefox\//.test(navigator.userAgent);
  const size = Math.max(0, Math.min(options.scanWorkers ?? (gecko ? 0 : cores), 16));
  if (options.silentPayments !== true || !inWorker || size === 0 || typeof Worker !== 'function') return undefined;
  const url = scope.location?.href;
  if (!url) return undefined;
  return new ScanPool({
    size,
    network: options.network ?? 'mainnet',
    spawn: (type) => new Worker(url, { type, name: 'lightwire-scan' }),
    local: openScanHelper,
    twice: javaScriptCore(),
    answer: (tag, height, code) => answer.client?.silentScanned(tag, height, code),
  });
}

/**
 * Whether this is WebKit's JavaScriptCore (Safari, any browser on iOS, WebKitGTK), which has
 * been seen to compute wrong values now and then: its pool checks each block twice.
 */
function javaScriptCore(): boolean {
  const ua = typeof navigator !== 'undefined' ? navigator.userAgent : '';
  return /AppleWebKit/.test(ua) && (!/Chrome|Chromium|Edg|OPR/.test(ua) || /iPhone|iPad|iPod/.test(ua));
}

/** The client a pool answers, once open. */
interface PoolAnswer {
  client?: { silentScanned(tag: number, height: number, code: number): void };
}

/** Open an engine on this thread. */
export async function openHere(
  options: ClientOptions,
  onEvent: (e: LightwireEvent) => void,
): Promise<Backend> {
  const Module = await clientClass(options.silentPayments === true);
  const answer: PoolAnswer = {};
  const pool = scanPool(options, answer);
  const client = await Module.open(
    {
      network: options.network,
      gateways: options.gateways,
      storeName: options.storeName,
      checkpoints: options.checkpoints,
      start: options.start,
      commitEvery: options.commitEvery,
      requestSize: options.requestSize,
      filters: options.filters,
      bulk: options.bulk,
      progressIntervalMs: options.progressIntervalMs,
      unconfirmedExpiryMs: options.unconfirmedExpiryMs,
      scanPool: pool && {
        start: (keys: unknown) => pool.start(keys),
        post: (tag: number, height: number, list: Uint8Array, filter: Uint8Array, hash: Uint8Array) =>
          pool.post(tag, height, list, filter, hash),
      },
    },
    (e: LightwireEvent) => onEvent(e),
  );
  answer.client = client as unknown as PoolAnswer['client'];
  return {
    async call(method, args) {
      const f = (client as unknown as Record<string, unknown>)[method];
      if (typeof f !== 'function') {
        throw named('NotEnabled', `${method} needs the client opened with silentPayments: true`);
      }
      const value = await (f as (...a: unknown[]) => unknown).apply(client, args);
      // The scan's workers are this file's, not the module's: counted here.
      const scan = method === 'metrics' ? (value as { silentScan?: { workers?: number; workerFailures?: string[] } }).silentScan : undefined;
      if (scan) {
        scan.workers = pool?.workers ?? 0;
        scan.workerFailures = pool?.failures ?? [];
      }
      return value;
    },
    close() {
      pool?.close();
      client.free();
    },
  };
}
