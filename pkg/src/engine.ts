// The engine on the current thread: the wasm module's Client, behind the same call
// interface the worker offers.
import init, { Client } from '../wasm/lightwire.js';
import type { Method } from './protocol.js';
import type { ClientOptions, LightwireEvent } from './types.js';

/** Calls into an engine, wherever it runs. */
export interface Backend {
  call(method: Method, args: unknown[]): Promise<unknown>;
  /** Release it (after `stop`). */
  close(): void;
}

let ready: Promise<unknown> | undefined;

/** Open an engine on this thread. */
export async function openHere(
  options: ClientOptions,
  onEvent: (e: LightwireEvent) => void,
): Promise<Backend> {
  ready ??= init();
  await ready;
  const client = await Client.open(
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
      const f = client[method] as (...a: unknown[]) => unknown;
      return await f.apply(client, args);
    },
    close() {
      client.free();
    },
  };
}
