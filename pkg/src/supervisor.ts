// The engine's dedicated worker, watched. The page pings it; a worker that stops answering
// (a hung engine: WebKit's JavaScriptCore has been seen to spin for ever in JIT code, and
// Safari runs the same engine) is terminated and a new one started on the same store with
// the same options, with a `workerRestarted` event; so is one that stops answering while it
// opens the store (the page pings it from the moment it is started), up to FAILED_RESTARTS
// times in FAILED_WINDOW_MS, after which the open fails. So is one whose engine failed after it
// opened (a trap: the same JIT was seen to compute an out-of-bounds access in code that
// makes none, in the suites and in the dashboard's test), up to FAILED_RESTARTS times in
// FAILED_WINDOW_MS: a failure that keeps coming back is a bug of ours, not the engine's
// bad luck, and stops the client with its error. What the engine keeps (the headers, the
// filter headers, the watched wallet) lives in the store, so the new engine resumes it.
// The silent-payment receiver does not (its scan key is never stored): the last one the
// application started is started again in the new worker, from this page's memory, where
// the application gave it, before any call retried.
import type { Backend } from './engine.js';
import { askedAgain, named, toError, type Method, type PendingCall, type Reply, type Request, type RequestBody } from './protocol.js';
import type { ClientOptions, LightwireEvent } from './types.js';

/**
 * How long the worker may leave a ping unanswered before it is taken for hung (the default
 * of `ClientOptions.workerTimeoutMs`). The engine yields to its worker's event loop between
 * messages, store commits and batches of filters, so a ping waits only for the longest
 * synchronous stretch of work: handling one message (a block of a few MB for the wallet,
 * at most 2,000 headers), building one commit, or starting from a store. That is well
 * under a second on the machine of benches/README.md; 30 s leaves room for a device tens
 * of times slower, and for a tab the browser throttles, before a busy engine is killed.
 */
export const WORKER_TIMEOUT_MS = 30_000;

/** How often the worker is pinged, at most (a shorter timeout pings six times per timeout). */
const PING_EVERY_MS = 5_000;

/** How many failed workers are replaced in FAILED_WINDOW_MS before the client stops. */
export const FAILED_RESTARTS = 3;
const FAILED_WINDOW_MS = 10 * 60_000;

/** Why a worker is replaced. */
type Cause = { reason: 'hung'; silentMs: number } | { reason: 'failed'; message: string };

/**
 * Whether an open failed on a wallet record that did not read back. The engine reads it
 * three times, deriving every key of its descriptors each time, and leaves it as it is;
 * WebKit's JavaScriptCore was seen to compute wrong values here too (the e2e `wallets`
 * scenario, once in a fresh-clone run, where Chromium and Firefox and other WebKit runs
 * read the same record). A new worker compiles the engine afresh: the open is tried again
 * there, as for a worker that hung while it opened. A record that is damaged fails every
 * time, and the open fails after FAILED_RESTARTS.
 */
function unreadable(e: unknown): e is Error {
  return e instanceof Error && e.name === 'StoreError' && e.message.includes("the wallet's record does not read back");
}

/** The open of a worker that stopped answering while it opened: it is replaced. */
class HungWhileOpening extends Error {
  constructor(readonly silentMs: number) {
    super(`the lightwire worker did not answer for ${Math.round(silentMs / 1000)} s while it opened the store`);
  }
}


/**
 * A request posted to the current worker and not answered yet: its method is null for the
 * worker's own requests (`open`, `hang`).
 */
type Pending = PendingCall<Method | null>;

/** The engine in a watched dedicated worker: see the module's comment. */
export class WorkerBackend implements Backend {
  readonly #options: ClientOptions;
  readonly #onEvent: (e: LightwireEvent) => void;
  readonly #timeoutMs: number;
  readonly #pingEveryMs: number;
  #worker: Worker | undefined;
  /** Requests posted to the current worker, by id. */
  readonly #pending = new Map<number, Pending>();
  #next = 0;
  /** The ping not answered yet: its id, and how long this page has run since it was sent. */
  #ping: { id: number; waitedMs: number } | null = null;
  #lastTick = 0;
  #timer: ReturnType<typeof setInterval> | undefined;
  /** While a new worker opens, calls wait for it (rejects if it could not open). */
  #opening: Promise<void> = Promise.resolve();
  #restarting = false;
  #restarts = 0;
  /** When each failed worker was replaced (the last FAILED_WINDOW_MS). */
  #failures: number[] = [];
  /** Whether the current worker opened the engine (a failure before that fails `open`). */
  #opened = false;
  /** The current worker's `open` request, while it is not answered. */
  #openId: number | null = null;
  /** Workers started so far (a test's `testHangOpens` makes the first ones hang). */
  #started = 0;
  /**
   * The arguments of the last `watchSilentPayments` that resolved: the receiver a new
   * worker starts again (its scan key is in no store).
   */
  #receiver: unknown[] | null = null;
  #closed = false;

  private constructor(options: ClientOptions, onEvent: (e: LightwireEvent) => void) {
    this.#options = options;
    this.#onEvent = onEvent;
    this.#timeoutMs = Math.max(100, options.workerTimeoutMs ?? WORKER_TIMEOUT_MS);
    this.#pingEveryMs = Math.min(PING_EVERY_MS, this.#timeoutMs / 6);
  }

  /** Open the engine in a worker and start watching it. Rejects as `open` does. */
  static async open(options: ClientOptions, onEvent: (e: LightwireEvent) => void): Promise<WorkerBackend> {
    const backend = new WorkerBackend(options, onEvent);
    // Watched from the start: a worker that hangs while it opens the store is replaced too.
    backend.#lastTick = performance.now();
    backend.#timer = setInterval(() => backend.#tick(), backend.#pingEveryMs);
    try {
      await backend.#start();
    } catch (e) {
      backend.close();
      throw e;
    }
    return backend;
  }

  async call(method: Method, args: unknown[], moves = 0): Promise<unknown> {
    await this.#opening;
    if (this.#closed || !this.#worker) throw named('Stopped', 'the client has stopped');
    const answer = this.#post(this.#worker, { op: 'call', method, args }, method, args, moves);
    if (method !== 'watchSilentPayments') return answer;
    const value = await answer;
    this.#receiver = args;
    return value;
  }

  close(): void {
    this.#closed = true;
    clearInterval(this.#timer);
    this.#worker?.terminate();
  }

  /**
   * For the package's own tests: make the worker spin for ever. The worker refuses unless
   * it was opened with `testHooks: true`.
   */
  async hang(): Promise<unknown> {
    await this.#opening;
    if (this.#closed || !this.#worker) throw named('Stopped', 'the client has stopped');
    return this.#post(this.#worker, { op: 'hang' }, null, []);
  }

  /**
   * For the package's own tests: make the worker fail as a trapped one does. The worker
   * refuses unless it was opened with `testHooks: true`.
   */
  async fail(how: 'throw' | 'reject'): Promise<unknown> {
    await this.#opening;
    if (this.#closed || !this.#worker) throw named('Stopped', 'the client has stopped');
    return this.#post(this.#worker, { op: 'fail', how }, null, []);
  }

  /**
   * A new worker, opened on the store. One that stops answering while it opens is replaced
   * (a `workerRestarted` event, `hung`), FAILED_RESTARTS times in FAILED_WINDOW_MS at most.
   * Rejects (the worker terminated) if it cannot open.
   */
  async #start(): Promise<void> {
    for (;;) {
      const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module', name: 'lightwire' });
      this.#worker = worker;
      this.#opened = false;
      this.#ping = null;
      worker.addEventListener('message', (e: MessageEvent<Reply>) => this.#message(worker, e.data));
      worker.addEventListener('error', (e) => this.#failed(worker, e.message));
      const attempt = this.#started++;
      const opened = this.#post(worker, { op: 'open', options: this.#options, attempt }, null, []);
      this.#openId = this.#next - 1;
      try {
        await opened;
      } catch (e) {
        worker.terminate();
        const hung = e instanceof HungWhileOpening;
        if (!(hung || unreadable(e)) || this.#closed) throw e;
        const now = performance.now();
        this.#failures = this.#failures.filter((t) => now - t < FAILED_WINDOW_MS);
        if (this.#failures.length >= FAILED_RESTARTS) {
          const after = `after ${this.#failures.length} restarts in ${FAILED_WINDOW_MS / 60_000} minutes`;
          throw hung ? named('WorkerError', `${e.message} (${after})`) : named(e.name, `${e.message} (${after})`);
        }
        this.#failures.push(now);
        this.#restarts += 1;
        this.#onEvent({
          type: 'workerRestarted',
          reason: hung ? 'hung' : 'failed',
          message: hung ? null : e.message,
          silentMs: hung ? Math.round(e.silentMs) : 0,
          restarts: this.#restarts,
          retried: 0,
          rejected: 0,
        });
        continue;
      } finally {
        this.#openId = null;
      }
      if (worker === this.#worker) this.#opened = true;
      return;
    }
  }

  /** The worker opening the store stopped answering: its open fails, to be tried again. */
  #hungWhileOpening(silentMs: number): void {
    const id = this.#openId;
    this.#ping = null;
    if (id === null) return;
    const p = this.#pending.get(id);
    this.#pending.delete(id);
    p?.reject(new HungWhileOpening(silentMs));
  }

  #post(worker: Worker, req: RequestBody, method: Method | null, args: unknown[], moves = 0): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const id = this.#next++;
      this.#pending.set(id, { method, args, resolve, reject, moves });
      const message: Request = { ...req, id };
      worker.postMessage(message);
    });
  }

  #message(worker: Worker, msg: Reply): void {
    // A terminated worker's last messages are not the engine's any more.
    if (worker !== this.#worker) return;
    if ('event' in msg) {
      const e = msg.event;
      // The engine's loop failed (worker.ts): replaced like a worker that threw.
      if (e.type === 'error' && e.kind === 'EngineFailed' && this.#opened) {
        this.#failed(worker, e.message);
        return;
      }
      this.#onEvent(e);
      return;
    }
    if (this.#ping?.id === msg.id) {
      this.#ping = null;
      return;
    }
    const p = this.#pending.get(msg.id);
    this.#pending.delete(msg.id);
    if (msg.ok) p?.resolve(msg.value);
    else p?.reject(toError(msg.error));
  }

  /**
   * The worker failed to load or threw, or its engine failed. Once it had opened, it is
   * replaced (see the module's comment) unless FAILED_RESTARTS were in the last
   * FAILED_WINDOW_MS; else the client stops (a fatal error event).
   */
  #failed(worker: Worker, message: string): void {
    if (worker !== this.#worker) return;
    const now = performance.now();
    this.#failures = this.#failures.filter((t) => now - t < FAILED_WINDOW_MS);
    if (this.#opened && !this.#closed && !this.#restarting && this.#failures.length < FAILED_RESTARTS) {
      this.#failures.push(now);
      void this.#restart({ reason: 'failed', message });
      return;
    }
    const again = this.#failures.length >= FAILED_RESTARTS
      ? ` (after ${this.#failures.length} restarts for failures in ${FAILED_WINDOW_MS / 60_000} minutes)`
      : '';
    const err = named('WorkerError', `the lightwire worker failed: ${message}${again}`);
    this.#pending.forEach((p) => p.reject(err));
    this.#pending.clear();
    this.#onEvent({ type: 'error', kind: 'WorkerError', message: err.message, fatal: true });
  }

  /** Ping the worker, or restart it when the last ping went unanswered too long. */
  #tick(): void {
    const now = performance.now();
    // Only the time this page itself ran counts: a frozen or throttled tab's timers fire
    // late, and its worker may have been frozen with it.
    const ran = Math.min(now - this.#lastTick, 2 * this.#pingEveryMs);
    this.#lastTick = now;
    if (this.#closed || !this.#worker) return;
    if (this.#ping) {
      this.#ping.waitedMs += ran;
      if (this.#ping.waitedMs < this.#timeoutMs) return;
      // Opening (the first worker, or one replacing a hung or failed one): tried again by
      // #start. Opened: replaced, unless a replacement is already under way.
      if (!this.#opened) this.#hungWhileOpening(this.#ping.waitedMs);
      else if (!this.#restarting) void this.#restart({ reason: 'hung', silentMs: this.#ping.waitedMs });
      return;
    }
    const id = this.#next++;
    this.#ping = { id, waitedMs: 0 };
    const message: Request = { op: 'ping', id };
    this.#worker.postMessage(message);
  }

  /** Terminate the hung or failed worker and open a new one on the same store. */
  async #restart(cause: Cause): Promise<void> {
    const silentMs = cause.reason === 'hung' ? cause.silentMs : 0;
    this.#worker?.terminate();
    this.#worker = undefined;
    this.#ping = null;
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    if (pending.some((p) => p.method === 'stop')) {
      // It hung while stopping: nothing is left to stop.
      this.close();
      pending.forEach((p) => (p.method === 'stop' ? p.resolve(null) : p.reject(named('Stopped', 'the client has stopped'))));
      return;
    }
    // The one rule (protocol.ts, askedAgain): asked again of the new worker, once; the
    // worker's own requests (`hang`) and a call in flight across a second restart are not.
    const retried = pending.filter(askedAgain);
    const rejected = pending.filter((p) => !retried.includes(p));
    const what = cause.reason === 'hung'
      ? `did not answer for ${Math.round(silentMs / 1000)} s`
      : `failed (${cause.message})`;
    const err = named('WorkerRestarted', `the engine's worker ${what} and was restarted; this call did not complete (it was in flight across two restarts, or the package's own)`);
    rejected.forEach((p) => p.reject(err));
    // The new worker is pinged while it opens (loading the module and the store): one that
    // hangs there is replaced by #start.
    this.#restarting = true;
    const restarts = (this.#restarts += 1);
    this.#opening = this.#start();
    try {
      await this.#opening;
    } catch (e) {
      // The new worker could not open the store: the client stops, as for a failed worker.
      this.close();
      this.#opening = Promise.resolve();
      const failed = named('WorkerError', `the lightwire worker could not be restarted: ${(e as Error).message}`);
      retried.forEach((p) => p.reject(failed));
      this.#onEvent({ type: 'error', kind: 'WorkerError', message: failed.message, fatal: true });
      return;
    } finally {
      this.#restarting = false;
    }
    this.#onEvent({
      type: 'workerRestarted',
      reason: cause.reason,
      message: cause.reason === 'failed' ? cause.message : null,
      silentMs: Math.round(silentMs),
      restarts,
      retried: retried.length,
      rejected: rejected.length,
    });
    // The receiver the application started, started again (unless the call retried is a
    // new one): the new engine would scan for nobody otherwise.
    const receiver = this.#receiver;
    if (receiver && !retried.some((p) => p.method === 'watchSilentPayments')) {
      await this.call('watchSilentPayments', receiver).catch((e: Error) => this.#onEvent({
        type: 'error',
        kind: 'WorkerError',
        message: `the silent-payment receiver could not be started again in the restarted worker: ${e.message}`,
        fatal: false,
      }));
    }
    for (const p of retried) {
      this.call(p.method as Method, p.args, (p.moves ?? 0) + 1).then(p.resolve, p.reject);
    }
  }
}
