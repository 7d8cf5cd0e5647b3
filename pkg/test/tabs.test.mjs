// The routing between tabs (pkg/src/tabs.ts, built into dist/), in Node: each "tab" is a
// SharedBackend with its own BroadcastChannel (Node's delivers between instances, as a
// browser's does between tabs) and its own view of a fake Web Locks manager, over a fake
// engine that answers calls with its tab's name. A tab "closes" as a crashed one does: its
// lock is let go and it says nothing more. The browsers' own locks and channels are
// tested end to end in tests/e2e (the `tabs` scenario).
//
//   node --test pkg/test/      (after scripts/build-pkg.sh)

import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { SharedBackend } from '../dist/tabs.js';

const tick = (ms = 5) => new Promise((r) => setTimeout(r, ms));

/// A Web Locks manager shared by the tabs of a test: one holder per name, the others
/// queued in order; a tab's view of it is `as(tab)`.
class Locks {
  held = new Map(); // name -> { tab, release }
  queue = new Map(); // name -> [{ tab, grant, reject, signal }]

  as(tab) {
    return {
      request: (name, options, callback) =>
        new Promise((resolve, reject) => {
          const entry = {
            tab,
            grant: () => {
              let release;
              const done = new Promise((r) => (release = r));
              this.held.set(name, { tab, release });
              Promise.resolve(callback({ name }))
                .then(resolve, reject)
                .finally(() => release());
              done.then(() => {
                if (this.held.get(name)?.tab === tab) this.held.delete(name);
                this.#next(name);
              });
            },
            reject,
          };
          options.signal?.addEventListener('abort', () => {
            const q = this.queue.get(name) ?? [];
            const i = q.indexOf(entry);
            if (i >= 0) {
              q.splice(i, 1);
              reject(Object.assign(new Error('aborted'), { name: 'AbortError' }));
            }
          });
          this.queue.set(name, [...(this.queue.get(name) ?? []), entry]);
          if (!this.held.has(name)) queueMicrotask(() => this.#next(name));
        }),
    };
  }

  #next(name) {
    if (this.held.has(name)) return;
    const entry = (this.queue.get(name) ?? []).shift();
    entry?.grant();
  }

  /// `tab` is gone (closed, crashed): its lock is released, its queued requests dropped.
  gone(tab) {
    for (const [name, q] of this.queue) this.queue.set(name, q.filter((e) => e.tab !== tab));
    for (const [name, h] of this.held) if (h.tab === tab) h.release();
  }
}

/// A fake engine for tab `tab`: answers every call with `{ by, method, args }` (after
/// `hold` resolves, if set), records them, and lets the test send events.
function fakeEngine(tab, log) {
  let emit;
  const engine = {
    calls: [],
    hold: null,
    stopped: false,
    closed: false,
    emit: (e) => emit(e),
    async call(method, args) {
      engine.calls.push(method);
      if (engine.hold) await engine.hold;
      if (engine.stopped) throw Object.assign(new Error('stopped'), { name: 'Stopped' });
      if (method === 'stop') engine.stopped = true;
      return { by: tab, method, args };
    },
    close() {
      engine.closed = true;
    },
  };
  return {
    engine,
    open: async (onEvent) => {
      emit = onEvent;
      log.push(`${tab} opened`);
      return engine;
    },
  };
}

let stores = 0;
/// Every world made, closed at the end: a test that timed out leaves its tabs' channels
/// open, which would keep the process alive.
const worlds = [];
after(() => worlds.forEach((w) => w.close()));

/// A world of tabs on one store.
function world() {
  const locks = new Locks();
  const storeName = `store-${stores++}`;
  const log = [];
  const tabs = {};
  const w = {
    locks,
    log,
    tabs,
    /// Open tab `name`: resolves to { backend, events, engine } (or rejects as open does).
    async open(name, { network = 'regtest', openEngine, workerTimeoutMs } = {}) {
      // Read once, by SharedBackend.open: each tab its own view of the locks.
      Object.defineProperty(globalThis, 'navigator', { value: { locks: locks.as(name) }, configurable: true, writable: true });
      const fake = fakeEngine(name, log);
      const events = [];
      const tab = { events, engine: fake.engine, backend: null };
      tabs[name] = tab;
      // The tab's channel, kept for freeze().
      const Real = globalThis.BroadcastChannel;
      globalThis.BroadcastChannel = class extends Real {
        constructor(n) {
          super(n);
          tab.channel = this;
        }
      };
      try {
        tab.backend = await SharedBackend.open({ network, gateways: [], storeName, workerTimeoutMs }, (e) => events.push(e), openEngine ?? fake.open);
      } finally {
        globalThis.BroadcastChannel = Real;
      }
      return tab;
    },
    /// Tab `name` crashes: no goodbye, its lock released by the browser.
    crash(name) {
      tabs[name].backend.close();
      locks.gone(name);
    },
    /// Tab `name` is frozen: it hears and says nothing more, and keeps its lock.
    freeze(name) {
      tabs[name].channel.onmessage = null;
      tabs[name].channel.postMessage = () => {};
    },
    channel: () => new BroadcastChannel(`lightwire:${storeName}`),
    close() {
      for (const t of Object.values(tabs)) t.backend?.close();
    },
  };
  worlds.push(w);
  return w;
}

const roles = (tab) => tab.events.filter((e) => e.type === 'role').map((e) => e.role);

test('the first tab leads; the others follow, their calls answered by its engine', { timeout: 10_000 }, async () => {
  const w = world();
  try {
    const a = await w.open('a');
    const b = await w.open('b');
    const c = await w.open('c');
    assert.deepEqual([a, b, c].map((t) => t.backend.role), ['leader', 'follower', 'follower']);
    assert.deepEqual(roles(a), ['leader']);
    assert.deepEqual(roles(b), ['follower']);
    assert.deepEqual(await b.backend.call('tip', []), { by: 'a', method: 'tip', args: [] });
    assert.deepEqual(await c.backend.call('headerAt', [5]), { by: 'a', method: 'headerAt', args: [5] });
    assert.deepEqual(w.log, ['a opened']);
  } finally {
    w.close();
  }
});

test("the leader's events reach every tab; a tab joining late gets the last state first", { timeout: 10_000 }, async () => {
  const w = world();
  try {
    const a = await w.open('a');
    a.engine.emit({ type: 'tip', height: 10 });
    a.engine.emit({ type: 'gateway', gateway: 0, state: 'syncing' });
    const b = await w.open('b');
    assert.deepEqual(b.events.map((e) => e.type), ['role', 'tip', 'gateway']);
    a.engine.emit({ type: 'tip', height: 11 });
    a.engine.emit({ type: 'reorg', depth: 1 });
    await tick();
    assert.deepEqual(b.events.slice(3), [{ type: 'tip', height: 11 }, { type: 'reorg', depth: 1 }]);
    assert.deepEqual(a.events.filter((e) => e.type === 'tip').map((e) => e.height), [10, 11]);
  } finally {
    w.close();
  }
});

test('the leader crashes with a call in flight: the next tab leads and answers it', { timeout: 10_000 }, async () => {
  const w = world();
  try {
    const a = await w.open('a');
    const b = await w.open('b');
    const c = await w.open('c');
    a.engine.hold = new Promise(() => {}); // a's engine never answers
    const asked = c.backend.call('watch', [{ scripts: ['51'] }]);
    await tick();
    assert.deepEqual(a.engine.calls, ['watch']);
    w.crash('a');
    assert.deepEqual(await asked, { by: 'b', method: 'watch', args: [{ scripts: ['51'] }] });
    assert.equal(b.backend.role, 'leader');
    assert.deepEqual(roles(b), ['follower', 'leader']);
    assert.deepEqual(roles(c), ['follower']);
    assert.deepEqual(await c.backend.call('tip', []), { by: 'b', method: 'tip', args: [] });
  } finally {
    w.close();
  }
});

test('a call in flight across two leaders gone is rejected (LeaderGone); across one it is answered, as after a worker restart', { timeout: 10_000 }, async () => {
  const w = world();
  try {
    const a = await w.open('a');
    const b = await w.open('b');
    const c = await w.open('c');
    const d = await w.open('d');
    a.engine.hold = new Promise(() => {});
    b.engine.hold = new Promise(() => {});
    const asked = d.backend.call('broadcast', ['00']);
    await tick();
    assert.deepEqual(a.engine.calls, ['broadcast']);
    w.crash('a');
    await tick();
    await tick();
    assert.deepEqual(b.engine.calls, ['broadcast'], 'asked again of the next leader');
    w.crash('b');
    await assert.rejects(asked, { name: 'LeaderGone' });
    assert.deepEqual(c.engine.calls, [], 'not a third time');
    assert.deepEqual(await d.backend.call('tip', []), { by: 'c', method: 'tip', args: [] });
  } finally {
    w.close();
  }
});

test('a frozen leader (it keeps the lock, says nothing) fails the followers\' calls with LeaderUnresponsive; a slow one does not', { timeout: 10_000 }, async () => {
  const w = world();
  try {
    const a = await w.open('a');
    const b = await w.open('b', { workerTimeoutMs: 300 });
    // Slow: it answers after 600 ms, pinged meanwhile: it answers pings, so it waits.
    a.engine.hold = new Promise((r) => setTimeout(r, 600));
    assert.deepEqual(await b.backend.call('tip', []), { by: 'a', method: 'tip', args: [] });
    a.engine.hold = new Promise(() => {});
    const asked = b.backend.call('balance', []);
    await tick();
    w.freeze('a');
    const started = Date.now();
    await assert.rejects(asked, { name: 'LeaderUnresponsive' });
    assert.ok(Date.now() - started >= 250, 'not before the timeout');
    assert.equal(b.backend.role, 'follower', 'the lock is still the frozen tab\'s');
  } finally {
    w.close();
  }
});

test('a follower that stops leaves the others; a leader that stops hands over, and its calls in flight are answered by the next', { timeout: 10_000 }, async () => {
  const w = world();
  try {
    const a = await w.open('a');
    const b = await w.open('b');
    const c = await w.open('c');
    await c.backend.call('stop', []);
    await assert.rejects(c.backend.call('tip', []), { name: 'Stopped' });
    assert.deepEqual(await b.backend.call('tip', []), { by: 'a', method: 'tip', args: [] });
    let release;
    a.engine.hold = new Promise((r) => (release = r));
    const asked = b.backend.call('balance', []);
    await tick();
    const stopping = a.backend.call('stop', []);
    release();
    await stopping;
    assert.equal(a.engine.closed, true);
    // Cut short by a's stop, the call is b's own engine's to answer.
    assert.deepEqual(await asked, { by: 'b', method: 'balance', args: [] });
    assert.equal(b.backend.role, 'leader');
    assert.deepEqual(w.log, ['a opened', 'b opened']);
  } finally {
    w.close();
  }
});

test("an engine that cannot open: the first tab's open rejects; a follower taking over stops with an error event, and the next tab leads", { timeout: 10_000 }, async () => {
  const w = world();
  try {
    const failing = async () => {
      throw Object.assign(new Error('no store'), { name: 'StoreError' });
    };
    await assert.rejects(w.open('a', { openEngine: failing }), { name: 'StoreError' });
    const b = await w.open('b');
    const c = await w.open('c', { openEngine: failing });
    const d = await w.open('d');
    assert.equal(b.backend.role, 'leader');
    const asked = c.backend.call('tip', []);
    w.crash('b');
    await assert.rejects(asked, { name: 'Stopped' });
    const error = c.events.find((e) => e.type === 'error');
    assert.equal(error?.fatal, true);
    assert.equal(error?.kind, 'StoreError');
    assert.deepEqual(await d.backend.call('tip', []), { by: 'd', method: 'tip', args: [] });
  } finally {
    w.close();
  }
});

test('a follower of another network, or of a leader of another version, is refused', { timeout: 10_000 }, async () => {
  const w = world();
  try {
    await w.open('a');
    await assert.rejects(w.open('b', { network: 'mainnet' }), { name: 'InvalidOptions' });
    // A tab of another version leads: a new tab cannot follow it.
    const w2 = world();
    const other = w2.channel();
    other.onmessage = (e) => {
      if (e.data?.kind === 'hello') {
        other.postMessage({ v: 3, kind: 'leader', from: 'v3', to: e.data.from, network: 'regtest', state: [] });
      }
    };
    w2.locks.as('v2').request(`lightwire:store-${stores - 1}`, {}, () => new Promise(() => {}));
    try {
      await assert.rejects(w2.open('c'), { name: 'VersionMismatch' });
    } finally {
      other.close();
      w2.close();
    }
  } finally {
    w.close();
  }
});

test('odd messages on the channel are dropped, a call to stop is refused, and an announcement of another version does not unseat a leader', { timeout: 10_000 }, async () => {
  const w = world();
  try {
    const a = await w.open('a');
    const b = await w.open('b');
    const ch = w.channel();
    const leader = await new Promise((resolve) => {
      ch.onmessage = (e) => e.data?.kind === 'leader' && e.data.to === 'odd' && resolve(e.data.from);
      ch.postMessage({ v: 2, kind: 'hello', from: 'odd' });
    });
    const replies = [];
    ch.onmessage = (e) => e.data?.kind === 'reply' && e.data.to === 'odd' && replies.push(e.data);
    for (const m of [null, 7, 'x', {}, { v: 2 }, { v: 2, kind: 'nonsense', from: 'odd' },
      { v: 2, kind: 'event', from: leader, event: null },
      { v: 2, kind: 'reply', from: 'odd', to: 'b', id: 0, ok: true, value: 'forged' },
      { v: 3, kind: 'leader', from: 'v3', to: null, network: 'regtest', state: [] },
      { v: 2, kind: 'call', from: 'odd', to: leader, id: 'x', method: 'tip', args: [] },
      { v: 2, kind: 'call', from: 'odd', to: leader, id: 1, method: 'stop', args: [] },
      { v: 2, kind: 'call', from: 'odd', to: leader, id: 2, method: 'tip', args: 'no' }]) {
      ch.postMessage(m);
    }
    await tick(20);
    ch.close();
    assert.deepEqual(replies.map((r) => [r.id, r.ok, r.error?.name]), [[1, false, 'InvalidArgument'], [2, false, 'InvalidArgument']]);
    assert.deepEqual(a.engine.calls, []);
    assert.equal(b.backend.role, 'follower');
    assert.deepEqual(b.events.filter((e) => e.type === 'error'), []);
    assert.deepEqual(await b.backend.call('tip', []), { by: 'a', method: 'tip', args: [] });
  } finally {
    w.close();
  }
});

test('a failed answer without its error still settles the call', { timeout: 10_000 }, async () => {
  const w = world();
  try {
    const a = await w.open('a');
    const b = await w.open('b');
    // The leader's answer, forged in its name before it can answer: ok false, no error.
    a.engine.hold = new Promise(() => {});
    const ch = w.channel();
    const forged = new Promise((resolve) => {
      ch.onmessage = (e) => {
        if (e.data?.kind !== 'call') return;
        ch.postMessage({ v: 2, kind: 'reply', from: e.data.to, to: e.data.from, id: e.data.id, ok: false });
        resolve();
      };
    });
    const asked = b.backend.call('tip', []);
    await forged;
    ch.close();
    await assert.rejects(asked, { name: 'InvalidState' });
  } finally {
    w.close();
  }
});

test('a call that cannot be carried to the leader fails alone', { timeout: 10_000 }, async () => {
  const w = world();
  try {
    await w.open('a');
    const b = await w.open('b');
    await assert.rejects(b.backend.call('scan', [{ scripts: [() => 1] }]), { name: 'InvalidArgument' });
    assert.deepEqual(await b.backend.call('tip', []), { by: 'a', method: 'tip', args: [] });
  } finally {
    w.close();
  }
});
