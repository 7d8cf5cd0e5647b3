// One engine per store for every tab of an origin. Each client asks for the store's Web
// Lock (`navigator.locks`); the one that holds it is the leader: it runs the engine, holds
// the gateways' connections and is the store's only writer. The others are followers: the
// same client API, their calls carried to the leader over a BroadcastChannel and answered
// from there, and the leader's events passed on to every tab. When the leader goes (its tab
// closed, reloaded, crashed, or its client stopped) the browser releases its lock, the next
// tab waiting for it opens the engine on the store (which resumes from the last commit), and
// the followers' calls in flight are asked again of it, once (protocol.ts, askedAgain: the
// same rule as for a restarted worker).
//
// Written here rather than taken from a library (`broadcast-channel`'s leader election, for
// one): the election is the browser's own Web Locks, which release a lock when its holder's
// page or worker goes, so no heartbeat or timeout is needed; what is left is routing this
// package's calls and events, which no library knows.
//
// The channel is not a trust boundary: the tabs of an origin run the app's own code and
// share its store, which any of them could write directly. What is guarded against is a
// tab of another version of the package (an old tab left open across an app update: its
// leader is refused by version) and a tab in a bad state: a message that is not one of
// these shapes is dropped, a reply is taken only from the leader this tab follows, and a
// leader never takes `stop` from a follower.
import type { Backend } from './engine.js';
import { METHODS, askedAgain, named, plainError, toError, type Method, type PendingCall, type PlainError } from './protocol.js';
import type { ClientOptions, LightwireEvent, Role } from './types.js';

/** The version of the messages below; a leader of another version is refused. (2: the
 * follower's `ping` and the leader's `pong`.) */
const VERSION = 2;

/** How long a follower's calls wait for a leader that answers nothing (not a reply, an
 * event or a pong), counting only the time this tab ran: `workerTimeoutMs`, as for a
 * hung worker. */
const LEADER_TIMEOUT_MS = 30_000;

/**
 * Methods that stay in their tab: `stop`, and `watchSilentPayments`, whose scan key is
 * passed to no other context (a follower's call is refused with `NotLeader`).
 */
const LOCAL: ReadonlySet<string> = new Set<Method>(['stop', 'watchSilentPayments']);

/** Methods a follower may ask of the leader. */
const FORWARDED: ReadonlySet<string> = new Set<Method>(METHODS.filter((m) => !LOCAL.has(m)));

/** What tabs say to each other on the store's channel. */
type TabMessage =
  /** A follower asks who leads (the leader answers with `leader`, to it alone). */
  | { v: number; kind: 'hello'; from: string }
  /**
   * The leader: its network and the last state events (progress, tip, each gateway,
   * balance, scan), so that a tab joining late shows what the others show. Sent to all
   * when a tab becomes leader, and to one tab (`to`) in answer to its `hello`.
   */
  | { v: number; kind: 'leader'; from: string; to: string | null; network: string; state: LightwireEvent[] }
  /** A follower's call, to the leader it knows. */
  | { v: number; kind: 'call'; from: string; to: string; id: number; method: Method; args: unknown[] }
  /** The leader's answer to a call. */
  | ({ v: number; kind: 'reply'; from: string; to: string; id: number } & (
      | { ok: true; value: unknown }
      | { ok: false; error: PlainError }
    ))
  /** One of the leader's engine's events. */
  | { v: number; kind: 'event'; from: string; event: LightwireEvent }
  /** The leader is stopping: its lock is about to be released. */
  | { v: number; kind: 'leaving'; from: string }
  /** A follower with calls in flight asks whether the leader still runs. */
  | { v: number; kind: 'ping'; from: string; to: string }
  /** The leader answers a ping. */
  | { v: number; kind: 'pong'; from: string; to: string };

/** Whether this browser has what sharing one engine between tabs takes. */
export function canShare(): boolean {
  return typeof globalThis.BroadcastChannel === 'function' && typeof globalThis.navigator?.locks?.request === 'function';
}

/** The store a client opens, as the engine names it by default. */
export function storeNameOf(options: ClientOptions): string {
  return options.storeName ?? `lightwire-${options.network}`;
}

/** A call a follower made and the leader has not answered yet. */
type Pending = PendingCall<Method>;

/** A new tab id: unique among the tabs of a profile (not a secret). */
function tabId(): string {
  return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 12)}`;
}

/**
 * The client's engine as one of several tabs sees it: see the module's comment. Opens the
 * engine itself (with `openEngine`) when this tab becomes the leader.
 */
export class SharedBackend implements Backend {
  readonly #options: ClientOptions;
  readonly #onEvent: (e: LightwireEvent) => void;
  readonly #openEngine: (onEvent: (e: LightwireEvent) => void) => Promise<Backend>;
  readonly #me = tabId();
  readonly #channel: BroadcastChannel;
  /** Aborts this tab's wait for the lock when it stops as a follower. */
  readonly #abort = new AbortController();
  #role: Role | null = null;
  /** The engine, while this tab leads. */
  #engine: Backend | undefined;
  /** Whether the leader's announcement went out (events before it go with it, as state). */
  #announced = false;
  /** The last state events of the engine this tab leads (see `TabMessage` `leader`). */
  readonly #state = new Map<string, LightwireEvent>();
  /** Releases the lock (after the engine stopped). */
  #release: () => void = () => {};
  /** The leader this follower knows, or null while there is none. */
  #leader: string | null = null;
  readonly #pending = new Map<number, Pending>();
  /** The pending calls posted to a leader (the others were never in flight). */
  readonly #sent = new WeakSet<Pending>();
  #next = 0;
  /** While calls are in flight to the leader: how long this tab ran since the leader last
   * said anything, and the timer that pings it. */
  #silentMs = 0;
  #lastTick = 0;
  #watch: ReturnType<typeof setInterval> | undefined;
  #stopping = false;
  #stopped = false;
  /** Settles `open`: once this tab leads (its engine open) or a leader answered. */
  #opened!: { resolve: () => void; reject: (e: Error) => void };

  private constructor(
    options: ClientOptions,
    onEvent: (e: LightwireEvent) => void,
    openEngine: (onEvent: (e: LightwireEvent) => void) => Promise<Backend>,
  ) {
    this.#options = options;
    this.#onEvent = onEvent;
    this.#openEngine = openEngine;
    this.#channel = new BroadcastChannel(`lightwire:${storeNameOf(options)}`);
  }

  /**
   * Join the store's tabs: resolves once this tab leads (its engine opened: rejects as the
   * engine's open does) or follows a leader that answered. Call only where {@link canShare}.
   */
  static async open(
    options: ClientOptions,
    onEvent: (e: LightwireEvent) => void,
    openEngine: (onEvent: (e: LightwireEvent) => void) => Promise<Backend>,
  ): Promise<SharedBackend> {
    const backend = new SharedBackend(options, onEvent, openEngine);
    const opened = new Promise<void>((resolve, reject) => {
      backend.#opened = { resolve, reject };
    });
    backend.#channel.onmessage = (e: MessageEvent) => backend.#message(e.data);
    // Queued behind the leader, if there is one: granted when it goes.
    navigator.locks
      .request(`lightwire:${storeNameOf(options)}`, { signal: backend.#abort.signal }, () => backend.#lead())
      .catch(() => {
        // Aborted: this tab stopped before its turn came.
      });
    backend.#post({ v: VERSION, kind: 'hello', from: backend.#me });
    try {
      await opened;
    } catch (e) {
      backend.#shut();
      throw e;
    }
    return backend;
  }

  /** Whether this tab runs the engine. */
  get role(): Role {
    return this.#role ?? 'follower';
  }

  /** The engine, when this tab leads; for the package's own test hooks. */
  get engine(): Backend | undefined {
    return this.#engine;
  }

  async call(method: Method, args: unknown[]): Promise<unknown> {
    if (this.#stopped) throw named('Stopped', 'the client has stopped');
    if (method === 'stop') return this.#stop();
    if (this.#engine) return this.#engine.call(method, args);
    if (!FORWARDED.has(method)) {
      throw named('NotLeader', `${method} runs only in the tab that runs the engine (its keys go to no other tab)`);
    }
    return new Promise((resolve, reject) => {
      const id = this.#next++;
      this.#pending.set(id, { method, args, resolve, reject });
      if (this.#leader) this.#ask(this.#leader, id);
    });
  }

  close(): void {
    this.#shut();
  }

  /** The lock is this tab's: open the engine, say so, and hold the lock until stopped. */
  async #lead(): Promise<void> {
    if (this.#stopped) return;
    let engine: Backend;
    try {
      engine = await this.#openEngine((e) => this.#engineEvent(e));
    } catch (e) {
      const err = e instanceof Error ? e : named('Error', String(e));
      if (this.#role === null) {
        this.#opened.reject(err);
      } else {
        // A follower that could not take over: it stops, and the next tab tries.
        this.#onEvent({
          type: 'error',
          kind: err.name,
          message: `this tab could not take over the engine: ${err.message}`,
          fatal: true,
        });
        this.#fail(named('Stopped', 'the client has stopped'));
      }
      return;
    }
    if (this.#stopped) {
      await engine.call('stop', []).catch(() => {});
      engine.close();
      return;
    }
    this.#engine = engine;
    this.#leader = this.#me;
    this.#setRole('leader');
    this.#announced = true;
    this.#announce(null);
    // What this tab asked while it followed, it now answers itself: by the one rule for
    // calls in flight when the engine moves (protocol.ts, askedAgain).
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of pending) {
      if (this.#moved(p)) engine.call(p.method, p.args).then(p.resolve, p.reject);
    }
    this.#opened.resolve();
    await new Promise<void>((resolve) => {
      this.#release = resolve;
    });
  }

  /** An event of the engine this tab leads: here, and to every other tab. */
  #engineEvent(e: LightwireEvent): void {
    const key = stateKey(e);
    if (key) this.#state.set(key, e);
    this.#onEvent(e);
    if (this.#announced && !this.#stopping) this.#post({ v: VERSION, kind: 'event', from: this.#me, event: e });
  }

  /** Say that this tab leads, to every tab (`to` null) or to the one that asked. */
  #announce(to: string | null): void {
    const state = [...this.#state.values()];
    this.#post({ v: VERSION, kind: 'leader', from: this.#me, to, network: this.#options.network, state });
  }

  #setRole(role: Role): void {
    if (this.#role === role) return;
    this.#role = role;
    this.#onEvent({ type: 'role', role });
  }

  #message(data: unknown): void {
    if (this.#stopped || typeof data !== 'object' || data === null) return;
    const msg = data as TabMessage;
    if (msg.kind === 'leader' && msg.v !== VERSION) {
      // Only a tab holding the lock announces itself: with no leader of this version to
      // follow, this tab cannot go on (a leader it follows already, or this tab's own
      // engine, holds the lock; that announcement is then stale or not a leader's).
      if (this.#leader === null && !this.#engine) {
        this.#refuse(named('VersionMismatch',
          'another tab runs another version of lightwire on this store; reload it, or close it'));
      }
      return;
    }
    if (msg.v !== VERSION || typeof msg.from !== 'string' || msg.from === this.#me) return;
    // Whatever the leader says, it runs.
    if (msg.from === this.#leader) this.#silentMs = 0;
    switch (msg.kind) {
      case 'ping':
        if (msg.to === this.#me && this.#engine && !this.#stopping) {
          this.#post({ v: VERSION, kind: 'pong', from: this.#me, to: msg.from });
        }
        return;
      case 'pong':
        return;
      case 'hello':
        if (this.#engine && this.#announced && !this.#stopping) this.#announce(msg.from);
        return;
      case 'leader':
        if (msg.to !== null && msg.to !== this.#me) return;
        this.#follow(msg.from, msg.network, Array.isArray(msg.state) ? msg.state : []);
        return;
      case 'call':
        if (msg.to === this.#me) this.#answer(msg.from, msg.id, msg.method, msg.args);
        return;
      case 'reply': {
        if (msg.to !== this.#me || msg.from !== this.#leader) return;
        const p = this.#pending.get(msg.id);
        if (!p) return;
        this.#pending.delete(msg.id);
        if (msg.ok) p.resolve(msg.value);
        else p.reject(toError(answerError(msg.error)));
        return;
      }
      case 'event':
        if (msg.from === this.#leader && !this.#engine && msg.event && typeof msg.event === 'object') {
          this.#onEvent(msg.event);
        }
        return;
      case 'leaving':
        if (msg.from === this.#leader) this.#leader = null;
        return;
    }
  }

  /** `leader` leads (announced, or answering this tab's hello). */
  #follow(leader: string, network: unknown, state: LightwireEvent[]): void {
    if (this.#engine) return; // Two leaders cannot both hold the lock; this one does.
    if (network !== this.#options.network) {
      this.#refuse(named('InvalidOptions',
        `another tab follows ${String(network)} on this store, not ${this.#options.network}`));
      return;
    }
    const changed = this.#leader !== leader;
    this.#leader = leader;
    this.#setRole('follower');
    if (changed) {
      state.forEach((e) => e && typeof e === 'object' && this.#onEvent(e));
      // Calls the last leader did not answer (it may have gone while carrying them out):
      // asked again, by the one rule for calls in flight when the engine moves
      // (protocol.ts, askedAgain).
      for (const [id, p] of [...this.#pending]) {
        if (this.#moved(p)) this.#ask(leader, id);
        else this.#pending.delete(id);
      }
    }
    this.#opened.resolve();
  }

  /** Carry out a follower's call on this tab's engine and answer it. */
  #answer(from: string, id: unknown, method: unknown, args: unknown): void {
    const engine = this.#engine;
    if (!engine || this.#stopping || typeof id !== 'number') return;
    const reply = (r: { ok: true; value: unknown } | { ok: false; error: PlainError }) => {
      // A call cut short by this tab's own stop is the next leader's to answer.
      if (!this.#stopping) this.#post({ v: VERSION, kind: 'reply', from: this.#me, to: from, id, ...r });
    };
    if (typeof method !== 'string' || !FORWARDED.has(method) || !Array.isArray(args)) {
      reply({ ok: false, error: { name: 'InvalidArgument', message: `no such call: ${String(method)}` } });
      return;
    }
    engine.call(method as Method, args).then(
      (value) => reply({ ok: true, value }),
      (e) => reply({ ok: false, error: plainError(e) }),
    );
  }

  #ask(leader: string, id: number): void {
    const p = this.#pending.get(id);
    if (!p) return;
    this.#sent.add(p);
    this.#post({ v: VERSION, kind: 'call', from: this.#me, to: leader, id, method: p.method, args: p.args });
    this.#watchLeader();
  }

  /**
   * While calls are in flight, the leader is pinged; one that says nothing for
   * `workerTimeoutMs` of this tab's running time (a frozen tab: it holds the lock, so no
   * other tab can take over) fails them with `LeaderUnresponsive` rather than leave them
   * waiting for ever.
   */
  #watchLeader(): void {
    if (this.#watch !== undefined) return;
    const timeout = Math.max(100, this.#options.workerTimeoutMs ?? LEADER_TIMEOUT_MS);
    const every = Math.min(5_000, timeout / 6);
    this.#silentMs = 0;
    this.#lastTick = performance.now();
    this.#watch = setInterval(() => {
      const now = performance.now();
      // Only the time this tab ran counts: a throttled or frozen follower's timers fire late.
      this.#silentMs += Math.min(now - this.#lastTick, 2 * every);
      this.#lastTick = now;
      const leader = this.#leader;
      if (this.#stopped || this.#engine || this.#pending.size === 0 || leader === null) {
        this.#unwatchLeader();
        return;
      }
      if (this.#silentMs < timeout) {
        this.#post({ v: VERSION, kind: 'ping', from: this.#me, to: leader });
        return;
      }
      const err = named('LeaderUnresponsive',
        `the tab running the engine answered nothing for ${Math.round(this.#silentMs / 1000)} s (frozen or hung); this call did not complete`);
      for (const [id, p] of [...this.#pending]) {
        if (!this.#sent.has(p)) continue;
        this.#pending.delete(id);
        p.reject(err);
      }
      this.#unwatchLeader();
    }, every);
  }

  #unwatchLeader(): void {
    clearInterval(this.#watch);
    this.#watch = undefined;
  }

  /**
   * Call `p`'s engine is gone: whether it is asked again (one never sent was not in
   * flight); if not, it is rejected with `LeaderGone`.
   */
  #moved(p: Pending): boolean {
    if (!this.#sent.has(p)) return true;
    if (askedAgain(p)) {
      p.moves = (p.moves ?? 0) + 1;
      return true;
    }
    p.reject(named('LeaderGone', 'the tab running the engine went twice while this call was in flight; it did not complete'));
    return false;
  }

  #post(msg: TabMessage): void {
    try {
      this.#channel.postMessage(msg);
    } catch (e) {
      // An argument or answer that cannot be cloned fails that call alone.
      if (msg.kind === 'call') {
        const p = this.#pending.get(msg.id);
        this.#pending.delete(msg.id);
        p?.reject(named('InvalidArgument', `this call cannot be carried to the leading tab: ${plainError(e).message}`));
      } else if (msg.kind === 'reply') {
        this.#post({ v: VERSION, kind: 'reply', from: this.#me, to: msg.to, id: msg.id, ok: false, error: plainError(e) });
      }
    }
  }

  /** This tab cannot follow the leader there is: it stops, saying why. */
  #refuse(err: Error): void {
    if (this.#role === null) {
      this.#opened.reject(err);
      return;
    }
    this.#onEvent({ type: 'error', kind: err.name, message: err.message, fatal: true });
    this.#fail(named('Stopped', 'the client has stopped'));
  }

  /** Stop: the engine if this tab leads (then the lock goes to the next tab), else only this tab. */
  async #stop(): Promise<null> {
    const engine = this.#engine;
    if (engine) {
      this.#stopping = true;
      this.#post({ v: VERSION, kind: 'leaving', from: this.#me });
      try {
        await engine.call('stop', []);
      } finally {
        engine.close();
        this.#engine = undefined;
      }
    }
    this.#fail(named('Stopped', 'the client has stopped'));
    return null;
  }

  /** Stopped: every call waiting rejects with `err`; the channel and the lock are let go. */
  #fail(err: Error): void {
    this.#pending.forEach((p) => p.reject(err));
    this.#pending.clear();
    this.#shut();
  }

  #shut(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#unwatchLeader();
    this.#engine?.close();
    this.#engine = undefined;
    this.#abort.abort();
    this.#release();
    this.#channel.close();
  }
}

/** A reply's error as sent, or one saying it came malformed (the call must still settle). */
function answerError(e: unknown): PlainError {
  const { name, message, line } = (typeof e === 'object' && e !== null ? e : {}) as { name?: unknown; message?: unknown; line?: unknown };
  if (typeof name !== 'string' || typeof message !== 'string') {
    return { name: 'InvalidState', message: 'the leading tab answered this call with a malformed error' };
  }
  return typeof line === 'number' && Number.isSafeInteger(line) && line > 0 ? { name, message, line } : { name, message };
}

/** The key under which the leader keeps an event's last value, for tabs joining later. */
function stateKey(e: LightwireEvent): string | null {
  switch (e.type) {
    case 'progress':
    case 'tip':
    case 'scan':
      return e.type;
    case 'balance':
      // One for each wallet.
      return e.wallet === null ? 'balance' : `balance ${e.wallet}`;
    case 'gateway':
      return `gateway ${e.gateway}`;
    default:
      return null;
  }
}
