// The engine on the current thread: the wasm module's Client, behind the same call
// interface the worker offers. Two builds of the module: the default one, and one with
// silent payments (`silentPayments: true`: its wasm is fetched only then, since the scanner
// would weigh on every app's first download). Both glue modules are imported statically:
// a dynamic import() makes the worker's bundle a code-splitting one, which Vite's default
// worker format (iife) refuses; the glue is small (11 KB gzipped), the wasm is not.
import init, { Client } from '../wasm/lightwire.js';
import initWithSilent, { Client as ClientWithSilent } from '../wasm-sp/lightwire.js';
import { named, type Method } from './protocol.js';
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

/** Open an engine on this thread. */
export async function openHere(
  options: ClientOptions,
  onEvent: (e: LightwireEvent) => void,
): Promise<Backend> {
  const Module = await clientClass(options.silentPayments === true);
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
    },
    (e: LightwireEvent) => onEvent(e),
  );
  return {
    async call(method, args) {
      const f = (client as unknown as Record<string, unknown>)[method];
      if (typeof f !== 'function') {
        throw named('NotEnabled', `${method} needs the client opened with silentPayments: true`);
      }
      return await (f as (...a: unknown[]) => unknown).apply(client, args);
    },
    close() {
      client.free();
    },
  };
}
