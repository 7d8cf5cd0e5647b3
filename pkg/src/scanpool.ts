// The silent-payment receiver's filter checks, run in extra workers beside the engine's.
// A block's check (the receiver's first keys for each tweak of the block: a curve
// multiplication a tweak) is the one cost of the scan that grows with the chain's use, and
// needs nothing but the block's tweak list and filter, which the engine checked. So the
// engine hands each check out (`scanPool` in the module's open options) and this pool runs
// it on a `ScanHelper` in one of its workers, in parallel, and gives the answer back
// (`Client.silentScanned`). The workers get the receiver's keys (the scan key goes to them
// and to no other context); the engine keeps every rule on the gateways' data and fetches
// and searches the blocks that match.
//
// Checks go to a worker once its module loaded; until one has (and with none left), they
// run on this thread, one per task, so that the scan never waits on workers starting, or
// on workers gone. A worker that fails (it cannot start, errors, or keeps a check past
// CHECK_TIMEOUT_MS) is terminated and its checks are run again elsewhere.

/** What the engine hands out: a block's checked tweak list and filter, and its hash. */
interface Check {
  tag: number;
  height: number;
  list: Uint8Array;
  filter: Uint8Array;
  hash: Uint8Array;
  /** The answers it had (two are wanted when the pool checks twice). */
  codes: number[];
}

/** One run of a check (the first or second of a check run twice). */
interface Run {
  check: Check;
}

/** What a check run twice says: where the runs differ, "may hold a key" (the block is fetched and searched), never "no" or "not a point" on one run's word. */
export function combined(codes: number[]): number {
  return codes.every((c) => c === codes[0]) ? codes[0] : MATCH;
}

/** ScanHelper.scan's "may hold a key". */
const MATCH = 1;

/** A receiver's check, wherever it runs (the module's `ScanHelper`). */
export interface Helper {
  scan(list: Uint8Array, filter: Uint8Array, hash: Uint8Array): number;
  free(): void;
}

/** The pool's workers' messages: as worker.ts answers the page. */
type Answer = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: { message: string } };

/** How long a worker may keep one check (a mainnet block's takes about 0.3 s). */
export const CHECK_TIMEOUT_MS = 60_000;
/** Checks posted to one worker at a time (one running, one waiting: no idle gap). */
const PER_WORKER = 2;

interface Member {
  worker: Worker;
  type: WorkerType;
  /** Its helper answered `scanHelper` (checks go only to a ready worker). */
  ready: boolean;
  /** When it was started. */
  started: number;
  /** Its runs in flight, by request id, with when each was posted. */
  busy: Map<number, { run: Run; at: number }>;
}

/** How the pool makes what it needs (engine.ts gives these). */
export interface PoolParts {
  /** Workers to run, at most. */
  size: number;
  /** The client's network (the keys' address is checked against it). */
  network: string;
  /**
   * A new worker running worker.ts, of this type, or undefined where none can be made.
   * Which type runs it depends on how the app bundled it (a module as the package ships
   * it; a bundler may make it a classic script): a module first, the other if a module
   * never starts (a classic script mostly runs as a module too; a module cannot run as a
   * classic script). A thread cannot reliably tell what it was started as: a module worker
   * of Firefox's has an `importScripts` that does not throw.
   */
  spawn(type: WorkerType): Worker | undefined;
  /** A helper on this thread. */
  local(network: string, keys: unknown): Promise<Helper>;
  /** The engine's `silentScanned`. */
  answer(tag: number, height: number, code: number): void;
  /**
   * Run every check twice, in two workers where there are two, and take "no" only where
   * both say it: for an engine seen to compute wrong values now and then (JavaScriptCore:
   * benches/README.md, "WebKit computes wrong values"), where one wrong "no" hides a
   * payment. Half the speed.
   */
  twice: boolean;
}

/** See the module's comment. */
export class ScanPool {
  #parts: PoolParts;
  #keys: unknown = undefined;
  #queue: Run[] = [];
  #members: Member[] = [];
  #nextId = 1;
  #local: Promise<Helper> | undefined;
  #localBusy = false;
  #watchdog: ReturnType<typeof setInterval> | undefined;
  #failures: string[] = [];
  #starting: ReturnType<typeof setTimeout> | undefined;
  /** The types of worker seen fail before they started. */
  #neverStarted = new Set<WorkerType>();

  constructor(parts: PoolParts) {
    this.#parts = parts;
  }

  /**
   * A new receiver's keys: the workers of the one before are let go (its scan is gone,
   * and its checks with it), new ones start with these.
   */
  start(keys: unknown): void {
    this.close();
    this.#keys = keys;
    this.#neverStarted.clear();
    // In a later task: this runs inside the engine's handling of `watchSilentPayments`,
    // which must not wait on workers being made (Firefox makes a worker's worker through
    // its main thread, and was seen to take 20 s there now and then).
    this.#starting = setTimeout(() => {
      this.#starting = undefined;
      for (let i = 0; i < this.#parts.size; i++) {
        if (!this.#spawn('module')) break;
      }
      this.#pump();
    }, 0);
    this.#watchdog = setInterval(() => this.#watch(), CHECK_TIMEOUT_MS / 4);
  }

  /** One more worker of `type`; false if none could be made. */
  #spawn(type: WorkerType): boolean {
    let worker: Worker | undefined;
    try {
      worker = this.#parts.spawn(type);
    } catch {
      worker = undefined;
    }
    if (!worker) return false;
    const member: Member = { worker, type, ready: false, started: performance.now(), busy: new Map() };
    worker.addEventListener('message', (e: MessageEvent<Answer>) => this.#answered(member, e.data));
    worker.addEventListener('error', (e) => {
      e.preventDefault();
      this.#failed(member, `an error: ${e.message ?? 'the script did not load'}`);
    });
    worker.addEventListener('messageerror', () => this.#failed(member, 'a message it could not read'));
    worker.postMessage({ op: 'scanHelper', id: 0, network: this.#parts.network, keys: this.#keys });
    this.#members.push(member);
    return true;
  }

  /** A check from the engine. */
  post(tag: number, height: number, list: Uint8Array, filter: Uint8Array, hash: Uint8Array): void {
    const check: Check = { tag, height, list, filter, hash, codes: [] };
    this.#queue.push({ check });
    if (this.#parts.twice) this.#queue.push({ check });
    this.#pump();
  }

  /** A run's answer: the check's, once it has all it wants. */
  #ran(run: Run, code: number): void {
    const check = run.check;
    check.codes.push(code);
    if (check.codes.length === (this.#parts.twice ? 2 : 1)) {
      this.#parts.answer(check.tag, check.height, combined(check.codes));
    }
  }

  /** How many workers run (for the metrics). */
  get workers(): number {
    return this.#members.length;
  }

  /** Why workers were let go, the last few (for the metrics). */
  get failures(): string[] {
    return this.#failures;
  }

  /** Let every worker go. */
  close(): void {
    if (this.#starting !== undefined) clearTimeout(this.#starting);
    this.#starting = undefined;
    for (const m of this.#members) m.worker.terminate();
    this.#members = [];
    this.#queue = [];
    if (this.#watchdog !== undefined) clearInterval(this.#watchdog);
    this.#watchdog = undefined;
    const local = this.#local;
    this.#local = undefined;
    void local?.then((h) => h.free(), () => undefined);
  }

  #pump(): void {
    // Until a worker is ready (its module loaded), this thread checks: the scan never
    // waits on workers starting, or on workers that never do.
    if (!this.#members.some((m) => m.ready)) {
      this.#runHere();
      return;
    }
    for (;;) {
      const run = this.#queue[0];
      if (!run) return;
      // The least busy ready worker, one not running the check's other run if there is one.
      const holds = (m: Member) => [...m.busy.values()].some((b) => b.run.check === run.check);
      let best: Member | undefined;
      for (const m of this.#members) {
        if (!m.ready || m.busy.size >= PER_WORKER) continue;
        const better = !best || holds(best) > holds(m) || (holds(best) === holds(m) && m.busy.size < best.busy.size);
        if (better) best = m;
      }
      if (!best) return;
      this.#queue.shift();
      const id = this.#nextId++;
      best.busy.set(id, { run, at: performance.now() });
      const { list, filter, hash } = run.check;
      best.worker.postMessage({ op: 'scan', id, list, filter, hash });
    }
  }

  #answered(m: Member, a: Answer): void {
    if (!this.#members.includes(m) || !('id' in a)) return;
    if (a.id === 0) {
      // Its helper started, or did not (a module that did not load).
      if (!a.ok) {
        this.#failed(m, `no helper: ${a.error.message}`);
        return;
      }
      m.ready = true;
      this.#pump();
      return;
    }
    const job = m.busy.get(a.id);
    if (!job) return;
    m.busy.delete(a.id);
    if (!a.ok || typeof a.value !== 'number') {
      this.#failed(m, `a check failed: ${a.ok ? 'no code' : a.error.message}`, job.run);
      return;
    }
    this.#ran(job.run, a.value);
    this.#pump();
  }

  /** `m` is let go; its runs (and `also`) go first to the others, or to this thread. */
  #failed(m: Member, why: string, also?: Run): void {
    const i = this.#members.indexOf(m);
    if (i < 0) return;
    this.#members.splice(i, 1);
    this.#failures = [...this.#failures.slice(-3), `${m.type} worker: ${why}`];
    if (!m.ready) {
      // Perhaps the script runs only as the other type: a worker of that type instead,
      // until one of those fails to start too.
      this.#neverStarted.add(m.type);
      const other: WorkerType = m.type === 'module' ? 'classic' : 'module';
      if (!this.#neverStarted.has(other)) this.#spawn(other);
    }
    m.worker.terminate();
    const again = [...m.busy.values()].map((b) => b.run);
    if (also) again.push(also);
    this.#queue.unshift(...again);
    this.#pump();
  }

  #watch(): void {
    // Nothing queued is left waiting for an answer that would have pumped it.
    this.#pump();
    const now = performance.now();
    for (const m of [...this.#members]) {
      if (!m.ready && now - m.started > CHECK_TIMEOUT_MS) {
        this.#failed(m, `not started in ${CHECK_TIMEOUT_MS / 1000} s`);
        continue;
      }
      for (const b of m.busy.values()) {
        if (now - b.at > CHECK_TIMEOUT_MS) {
          this.#failed(m, `a check not answered in ${CHECK_TIMEOUT_MS / 1000} s`);
          break;
        }
      }
    }
  }

  /** One check on this thread, then the next in a later task (the engine's loop runs between). */
  #runHere(): void {
    if (this.#localBusy || this.#queue.length === 0) return;
    this.#localBusy = true;
    this.#local ??= this.#parts.local(this.#parts.network, this.#keys);
    const local = this.#local;
    setTimeout(() => {
      void local.then(
        (h) => {
          this.#localBusy = false;
          // A new receiver's keys came meanwhile: its checks (queued while this ran) go on.
          if (local !== this.#local) return this.#pump();
          const run = this.#queue.shift();
          if (run) this.#ran(run, h.scan(run.check.list, run.check.filter, run.check.hash));
          this.#pump();
        },
        (e: unknown) => {
          // The engine took these keys, so only a broken module fails here: said as the
          // engine's failure (the worker's unhandled rejection), never a silent wait.
          this.#localBusy = false;
          throw e;
        },
      );
    }, 0);
  }
}
