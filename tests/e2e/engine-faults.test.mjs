// The rerun policy of the end-to-end harness (engine-faults.mjs), without a browser:
//   node --test tests/e2e/engine-faults.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ENGINE_FAULTS, classify, stallWording, summary } from './engine-faults.mjs';

// What until() throws when its wait runs out (its events quoted after the metrics).
const UNTIL_TIMEOUT =
  'Error: timed out waiting for the spend withdrawn and found again; metrics {"height":2100,"synced":true}\n' +
  '    {"type":"error","kind":"EngineFailed","message":"the engine failed: Out of bounds memory access","fatal":true}\n' +
  '    at until (file:///work/main/tests/e2e/run.mjs:370:13)\n' +
  '    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)';

test('every entry names its engine, a unique name, a pattern and its evidence', () => {
  assert.ok(ENGINE_FAULTS.length > 0);
  const names = new Set();
  for (const f of ENGINE_FAULTS) {
    assert.equal(f.engine, 'webkit', f.name);
    assert.equal(typeof f.name, 'string');
    assert.ok(f.name.length > 0);
    assert.ok(!names.has(f.name), `${f.name} twice`);
    names.add(f.name);
    assert.ok(f.pattern instanceof RegExp, f.name);
    assert.equal(typeof f.evidence, 'string');
    assert.ok(f.evidence.trim().length > 0, `${f.name} has no evidence`);
    assert.match(f.evidence, /benches\/README\.md/, `${f.name}: the evidence says where it is recorded`);
  }
});

test("each entry's example is rerun in WebKit, matched by that entry", () => {
  for (const f of ENGINE_FAULTS) {
    const c = classify('webkit', f.example);
    assert.equal(c.rerun, true, `${f.name}: ${c.why}`);
    assert.equal(c.entry, f);
    assert.match(c.why, new RegExp(f.name));
  }
});

test('the same texts in Chromium and Firefox are not rerun', () => {
  for (const engine of ['chromium', 'firefox']) {
    for (const f of ENGINE_FAULTS) {
      const c = classify(engine, f.example);
      assert.equal(c.rerun, false, `${engine}: ${f.name}`);
      assert.match(c.why, new RegExp(engine));
    }
  }
});

test("a timeout of until() is not rerun, though it carries an engine fault's signature", () => {
  const c = classify('webkit', UNTIL_TIMEOUT);
  assert.equal(c.rerun, false);
  assert.equal(c.entry?.name, 'out-of-bounds-access');
  assert.match(c.why, /stall or a timeout/);
  assert.match(c.why, /timed out/);
});

test('the harness and its drivers saying a wait ran out: a stall, not rerun', () => {
  const oob = ' (the engine failed: Out of bounds memory access)';
  for (const text of [
    'Error: the new leader did not connect once',
    'Error: the new leader never had a gateway syncing' + oob,
    "Error: btcd never took 1234abcd into its mempool; its log: ..." + oob,
    'Error: no workerRestarted event in 30 s: the hung worker was not restarted' + oob,
    'Error: no tab took over in 30000 ms (the leader stopped)' + oob,
    'Error: scanFilters took over 300 s' + oob,
    'Error: waitForFunction timed out after 30000 ms' + oob,
    'Error: webdriver /session/1/execute/async: script timeout: JavaScript execution exceeded the script timeout' + oob,
    'Error: webdriver /session/1/url: timeout: page load' + oob,
    'Error: the client stalled at 2,000' + oob,
  ]) {
    const c = classify('webkit', text);
    assert.equal(c.rerun, false, text);
    assert.match(c.why, /stall or a timeout/, text);
  }
});

test('an assertion with no known fault is not rerun', () => {
  const c = classify('webkit', "Error: reorg: stored tip is not the gateway's\n    at reorg (file:///work/main/tests/e2e/run.mjs:534:5)");
  assert.equal(c.rerun, false);
  assert.equal(c.entry, null);
  assert.match(c.why, /no known webkit engine fault/);
});

test("Node's stack frames and the package's own timeout codes do not make a stall", () => {
  const f = ENGINE_FAULTS.find((x) => x.name === 'corrupt-frame');
  const text =
    'Error: a follower saw [{"type":"gateway","state":"backing-off","reason":"the handshake did not finish in time","code":"handshake-timeout"},' +
    '{"type":"gateway","state":"backing-off","reason":"a message from the gateway was corrupted: message body failed its MAC","code":"corrupt-frame"}]\n' +
    '    at listOnTimeout (node:internal/timers:581:17)\n' +
    '    at process.processTimers (node:internal/timers:519:7)';
  assert.equal(stallWording(text), null);
  const c = classify('webkit', text);
  assert.equal(c.rerun, true, c.why);
  assert.equal(c.entry, f);
});

test('an overflow outside the Poly1305 file is not excused', () => {
  const c = classify('webkit', 'Error: panicked at crates/wallet/src/psbt.rs:88:9:\nattempt to multiply with overflow');
  assert.equal(c.rerun, false);
  assert.equal(c.entry, null);
});

const ok = (engine, name, run = 1) => ({ engine, name, run, error: null, why: null, rerun: null });

test('summary: reruns listed whole, one that passed only on a rerun does not fail the run', () => {
  const first = 'Error: tab 1: [{"message":"the engine failed: Out of bounds memory access"}]\n    at tabs (run.mjs:1696:7)';
  const { failed, text } = summary([
    ok('chromium', 'reorg'),
    { engine: 'webkit', name: 'tabs', run: 1, error: first, why: null, rerun: { entry: 'out-of-bounds-access', error: null } },
    ok('webkit', 'reorg'),
  ]);
  assert.equal(failed, 0);
  assert.match(text, /3 scenario runs, 2 passed, 1 passed only on a rerun, 0 failed/);
  assert.match(text, /RERUN webkit: tabs, matched out-of-bounds-access: passed only on a rerun/);
  // The first failure in full, every line of it.
  for (const line of first.split('\n')) assert.ok(text.includes(line), line);
});

test('summary: a rerun that failed again, and a failure not rerun, fail the run', () => {
  const { failed, text } = summary([
    { engine: 'webkit', name: 'tabs', run: 1, error: 'Error: first\nline two', why: null, rerun: { entry: 'corrupt-frame', error: 'Error: second' } },
    { engine: 'firefox', name: 'wallet', run: 1, error: 'Error: timed out waiting for x\nmore', why: 'a stall or a timeout ("timed out") is never rerun', rerun: null },
    ok('webkit', 'reorg'),
  ]);
  assert.equal(failed, 2);
  assert.match(text, /0 passed only on a rerun, 2 failed/);
  assert.match(text, /RERUN webkit: tabs, matched corrupt-frame: FAILED again on its rerun/);
  assert.match(text, /line two/);
  assert.match(text, /Error: second/);
  assert.match(text, /FAILED firefox: wallet, not rerun: a stall or a timeout/);
});

test('summary of a stress run: a table of runs and failures, each failure by run, its first 40 lines', () => {
  const long = Array.from({ length: 50 }, (_, i) => `line ${i + 1}`).join('\n');
  const results = [];
  for (const engine of ['chromium', 'webkit']) {
    for (let run = 1; run <= 3; run++) {
      for (const name of ['reorg', 'tabs']) {
        const r = ok(engine, name, run);
        if (engine === 'webkit' && name === 'tabs' && run !== 1) r.error = `Error: run ${run}\n${long}`;
        results.push(r);
      }
    }
  }
  const { failed, text } = summary(results, { repeat: 3 });
  assert.equal(failed, 2);
  assert.match(text, /each scenario 3 times: 12 runs, 2 failed/);
  assert.match(text, /engine\s+scenario\s+runs\s+failures/);
  assert.match(text, /chromium\s+reorg\s+3\s+0/);
  assert.match(text, /webkit\s+tabs\s+3\s+2/);
  assert.match(text, /webkit: tabs, run 2\/3 failed:/);
  assert.match(text, /webkit: tabs, run 3\/3 failed:/);
  assert.doesNotMatch(text, /run 1\/3 failed/);
  // 40 lines: the error's own and the first 39 of the rest; then how many were left out.
  assert.match(text, /line 39\n/);
  assert.doesNotMatch(text, /line 40\b/);
  assert.match(text, /\(11 more lines\)/);
  assert.doesNotMatch(text, /RERUN|passed only on a rerun/);
});

test('summary of a run with no failure', () => {
  const { failed, text } = summary([ok('webkit', 'reorg')]);
  assert.equal(failed, 0);
  assert.match(text, /1 scenario runs, 1 passed, 0 passed only on a rerun, 0 failed/);
});
