// The dedicated worker the engine runs in by default: it opens the engine, answers the
// page's calls and posts the engine's events back. The same script runs the workers of an
// engine's scan pool (scanpool.ts): asked `scanHelper`, then `scan`.
import { openHere, openScanHelper, type Backend } from './engine.js';
import type { Helper } from './scanpool.js';
import { plainError, type Reply, type Request } from './protocol.js';

interface WorkerScope {
  postMessage(message: Reply): void;
  addEventListener(type: 'message', listener: (e: MessageEvent<Request>) => void): void;
}

const scope = self as unknown as WorkerScope;

// The engine's loop runs as promise jobs: a failure there is an unhandled rejection in this
// worker, which the page would not hear of. Say it, as a fatal error event.
(self as unknown as { addEventListener(type: 'unhandledrejection', l: (e: PromiseRejectionEvent) => void): void }).addEventListener(
  'unhandledrejection',
  (e) => {
    const error = plainError(e.reason);
    scope.postMessage({ event: { type: 'error', kind: 'EngineFailed', message: `the engine failed: ${error.message}`, fatal: true } });
  },
);
let engine: Backend | undefined;
/** In a worker of an engine's scan pool (scanpool.ts): the receiver's checks. */
let helper: Promise<Helper> | undefined;
/** Whether the page opened the engine with `testHooks: true` (the package's own tests). */
let testHooks = false;

scope.addEventListener('message', async (e) => {
  const msg = e.data;
  try {
    let value: unknown = null;
    if (msg.op === 'ping') {
      // Answered at once, engine or not: the page only learns that this event loop turns.
    } else if (msg.op === 'hang') {
      if (!testHooks) throw new Error('this worker was not opened with testHooks: it does not hang on request');
      // A hung engine, as WebKit's JIT has been seen to leave one: this thread never
      // returns to its event loop, so pings go unanswered until the page terminates it.
      for (;;) {
        // spin
      }
    } else if (msg.op === 'fail') {
      if (!testHooks) throw new Error('this worker was not opened with testHooks: it does not fail on request');
      // A trap, as WebKit's JIT has been seen to cause (an out-of-bounds access in code
      // that has none): out of a callback, or in the engine's loop.
      const trap = new Error('a trap the package\'s test asked for');
      if (msg.how === 'throw') {
        setTimeout(() => {
          throw trap;
        });
      } else {
        void Promise.reject(trap);
      }
    } else if (msg.op === 'open') {
      testHooks = msg.options.testHooks === true;
      if (testHooks && msg.attempt < (msg.options.testHangOpens ?? 0)) {
        // A worker that hangs while it opens the store: the page replaces it.
        for (;;) {
          // spin
        }
      }
      engine = await openHere(msg.options, (event) => scope.postMessage({ event }));
    } else if (msg.op === 'scanHelper') {
      helper = openScanHelper(msg.network, msg.keys);
      await helper;
    } else if (msg.op === 'scan') {
      // In order: a check posted while the helper loads waits for it.
      if (!helper) throw new Error('this worker has no receiver');
      value = (await helper).scan(msg.list, msg.filter, msg.hash);
    } else if (engine) {
      value = await engine.call(msg.method, msg.args);
    } else {
      throw new Error('the client is not open');
    }
    scope.postMessage({ id: msg.id, ok: true, value });
  } catch (err) {
    scope.postMessage({ id: msg.id, ok: false, error: plainError(err) });
  }
});
