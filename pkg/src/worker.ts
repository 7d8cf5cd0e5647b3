// The dedicated worker the engine runs in by default: it opens the engine, answers the
// page's calls and posts the engine's events back.
import { openHere, type Backend } from './engine.js';
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

scope.addEventListener('message', async (e) => {
  const msg = e.data;
  try {
    let value: unknown = null;
    if (msg.op === 'open') {
      engine = await openHere(msg.options, (event) => scope.postMessage({ event }));
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
