// The scan pool (pkg/src/scanpool.ts, built into dist/), in Node, over fake workers: each
// answers `scanHelper` (or not) and each `scan` with a code of the test's choosing. What
// is checked: every check answered once; checked twice, two different workers run it and a
// "no" needs both; a worker that fails or never starts costs no check (its runs go to
// another worker or to this thread); a module worker that does not start is tried as a
// classic one. The browsers' own workers are tested end to end (tests/e2e, `silent`).
//
//   node --test pkg/test/      (after scripts/build-pkg.sh)

import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { ScanPool, combined } from '../dist/scanpool.js';

const tick = (ms = 5) => new Promise((r) => setTimeout(r, ms));

/// Every pool made, closed at the end whatever failed (a pool's watchdog timer would keep
/// the process running).
const pools = [];
after(() => pools.forEach((p) => p.close()));

/// A worker that answers as `behave(op, worker)` says: a code, `'error'` (an error event),
/// or `'silent'` (never answers).
class FakeWorker {
  listeners = { message: [], error: [], messageerror: [] };
  terminated = false;
  scans = [];
  constructor(index, type, behave) {
    Object.assign(this, { index, type, behave });
  }
  addEventListener(type, f) {
    this.listeners[type].push(f);
  }
  postMessage(msg) {
    if (msg.op === 'scan') this.scans.push(msg);
    const what = this.behave(msg, this);
    setTimeout(() => {
      if (this.terminated || what === 'silent') return;
      if (what === 'error') {
        for (const f of this.listeners.error) f({ message: 'boom', preventDefault() {} });
        return;
      }
      const data = msg.op === 'scanHelper' ? { id: 0, ok: true, value: null } : { id: msg.id, ok: true, value: what };
      for (const f of this.listeners.message) f({ data });
    }, 1);
  }
  terminate() {
    this.terminated = true;
  }
}

/// A pool of `size` fake workers behaving as `behave`, its answers collected.
function pool({ size = 2, twice = false, behave, local = () => 1 }) {
  const answers = [];
  const workers = [];
  const p = new ScanPool({
    size,
    network: 'regtest',
    twice,
    spawn: (type) => {
      const w = new FakeWorker(workers.length, type, behave);
      workers.push(w);
      return w;
    },
    local: async () => ({ scan: (list) => local(list[0]), free() {} }),
    answer: (tag, height, code) => answers.push([tag, height, code]),
  });
  pools.push(p);
  p.start({ scanKey: 'k' });
  const check = (height) => p.post(7, height, new Uint8Array([height]), new Uint8Array(9), new Uint8Array(32));
  return { p, answers, workers, check };
}

test('every check is answered once, with its tag and height', async () => {
  const { p, answers, check } = pool({ behave: (m) => (m.op === 'scan' ? m.list[0] % 2 : null) });
  await tick(20); // the workers started (made in a later task) and ready
  for (let h = 100; h < 110; h++) check(h);
  await tick(50);
  assert.deepEqual(answers.sort((a, b) => a[1] - b[1]), [...Array(10)].map((_, i) => [7, 100 + i, (100 + i) % 2]));
  assert.equal(p.workers, 2);
  p.close();
});

test('checked twice, two workers run each check, and "no" needs both', async () => {
  // Worker 0 says what the check's list says; worker 1 says "no" always.
  const { p, answers, workers, check } = pool({ twice: true, behave: (m, w) => (m.op !== 'scan' ? null : w.index === 0 ? m.list[0] : 0) });
  await tick(20);
  check(0); // both say no: no
  check(1); // one says it may: it may
  check(2); // one says not a point, the other no: it may (neither word alone)
  await tick(50);
  assert.deepEqual(answers.sort((a, b) => a[1] - b[1]), [[7, 0, 0], [7, 1, 1], [7, 2, 1]]);
  for (const h of [0, 1, 2]) {
    assert.deepEqual(workers.map((w) => w.scans.filter((s) => s.list[0] === h).length), [1, 1], `check ${h} ran once in each`);
  }
  assert.deepEqual([combined([2, 2]), combined([0, 0]), combined([0, 2]), combined([1, 0])], [2, 0, 1, 1]);
  p.close();
});

test('a worker that fails mid-check costs no check: another runs it', async () => {
  let failed = false;
  const { p, answers, check } = pool({
    behave: (m, w) => {
      if (m.op !== 'scan') return null;
      if (w.index === 0 && !failed) {
        failed = true;
        return 'error';
      }
      return 0;
    },
  });
  await tick(20);
  for (let h = 0; h < 6; h++) check(h);
  await tick(50);
  assert.deepEqual(answers.map((a) => a[1]).sort((a, b) => a - b), [0, 1, 2, 3, 4, 5]);
  assert.equal(p.workers, 1);
  assert.match(p.failures[0], /^module worker: an error: boom$/);
  p.close();
});

test('until a worker starts, and with none started, this thread checks', async () => {
  const { p, answers, check } = pool({ behave: () => 'silent', local: (h) => (h === 3 ? 1 : 0) });
  for (let h = 0; h < 5; h++) check(h);
  await tick(50);
  assert.deepEqual(answers.map((a) => [a[1], a[2]]), [[0, 0], [1, 0], [2, 0], [3, 1], [4, 0]]);
  p.close();
});

test('a module worker that does not start is tried as a classic one, once', async () => {
  const { p, workers, answers, check } = pool({
    size: 1,
    behave: (m, w) => (w.type === 'module' ? 'error' : m.op === 'scan' ? 0 : null),
  });
  await tick(20);
  assert.deepEqual(workers.map((w) => w.type), ['module', 'classic']);
  check(5);
  await tick(20);
  assert.deepEqual(answers, [[7, 5, 0]]);
  assert.equal(workers[1].scans.length, 1, 'the classic worker ran it');
  p.close();
});

test('a new receiver while this thread checks: the new checks go on', async () => {
  let slow = true;
  const answers = [];
  const p = new ScanPool({
    size: 0,
    network: 'regtest',
    twice: false,
    spawn: () => undefined,
    // The first receiver's helper loads slowly; the second's at once.
    local: () => (slow ? ((slow = false), new Promise((r) => setTimeout(() => r({ scan: () => 7, free() {} }), 30))) : Promise.resolve({ scan: () => 0, free() {} })),
    answer: (tag, height, code) => answers.push([tag, height, code]),
  });
  pools.push(p);
  p.start({ scanKey: 'a' });
  p.post(1, 10, new Uint8Array(1), new Uint8Array(1), new Uint8Array(32));
  await tick(5);
  p.start({ scanKey: 'b' });
  p.post(2, 20, new Uint8Array(1), new Uint8Array(1), new Uint8Array(32));
  await tick(80);
  assert.deepEqual(answers, [[2, 20, 0]], 'the old check dropped, the new one answered with the new keys');
  p.close();
});
