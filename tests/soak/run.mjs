// The long session: a page in each engine (Chromium, Firefox, WebKit, side by side) follows
// one gateway for a given time while the gateway's node, btcd, mines a block every second,
// reorganizes 1-6 blocks deep every few minutes (invalidateblock on the tip's branch, then
// a longer branch mined), and the gateway is restarted every ten minutes (same port, same
// key: the pages reconnect by themselves). Every minute each page is sampled: wasm memory
// and the allocator's live bytes, the page's JS heap (Chromium, after a collection; the
// other engines do not expose theirs), the origin's IndexedDB usage, the engine's pending
// timers, its tip and reconnects.
//
// It fails when: wasm memory or the JS heap grows more than 10 % after the warm-up (the
// first five minutes, by default); the engine has more than one timer pending; a reorg is
// missed (each page must report it, with its depth and the tip it replaced); or, at the
// end, a page's stored chain (every header's hash, and the filter headers' height) differs
// from btcd's.
//
//   node tests/soak/run.mjs [--no-build] [--minutes 30] [--engines chromium,firefox,webkit]
//     [--reorg-every S (180)] [--restart-every S (600)] [--sample-every S (60)] [--warmup S (300)]
//
// `npm run soak` runs the 30-minute session; `npm test` a 1-minute one (scripts/test.sh).

import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { serve, freePort, gatewayTip, startGateway, terminate } from '../browser.mjs';
import { startBtcd } from '../btcd.mjs';
import { available, openEngine } from '../engines.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const bin = (name) => join(root, 'target', 'release', name);
const args = process.argv.slice(2);
const flag = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const minutes = flag('--minutes', 30);
const reorgEvery = flag('--reorg-every', 180) * 1000;
const restartEvery = flag('--restart-every', 600) * 1000;
const sampleEvery = flag('--sample-every', 60) * 1000;
const warmup = flag('--warmup', 300) * 1000;
const blockMs = 1000;
/// The chain's height when the pages open.
const START_HEIGHT = 4_100;
const engines = args.includes('--engines') ? args[args.indexOf('--engines') + 1].split(',') : available();

function log(msg) {
  console.log(`[soak] ${msg}`);
}

function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

// The page keeps only what the test reads: the reorgs, and a count of the other events (a
// list of every tip would itself grow the heap being watched).
const PAGE = `<!doctype html><meta charset="utf-8"><title>soak</title>
<script type="module">
  import { LightwireClient } from '/pkg/dist/index.js';
  window.soak = {
    reorgs: [],
    counts: {},
    async open(options) {
      window.client = await LightwireClient.open(options);
      window.client.addEventListener('event', (e) => {
        const ev = e.detail;
        window.soak.counts[ev.type] = (window.soak.counts[ev.type] ?? 0) + 1;
        if (ev.type === 'reorg') window.soak.reorgs.push({ depth: ev.depth, oldTip: ev.oldTip, newTip: ev.newTip });
      });
      return true;
    },
    async sample() {
      const m = await window.client.metrics();
      const estimate = (await navigator.storage?.estimate?.()) ?? {};
      return {
        wasm: m.wasmMemoryBytes, live: m.liveBytes, timers: m.timersPending, reconnects: m.reconnects,
        usage: estimate.usage ?? null, tip: await window.client.tip(), filterHeight: m.storedFilterHeight,
        reorgs: window.soak.reorgs.length, counts: window.soak.counts,
      };
    },
    // The stored hashes of heights from..to.
    async hashes(from, to) {
      const out = [];
      for (let h = from; h <= to; h++) out.push((await window.client.headerAt(h))?.hash ?? null);
      return out;
    },
  };
  document.title = 'ready';
</script>`;

/// A deterministic generator for the reorg depths (xorshift32), so that a failure can be
/// run again as it was.
function depths(seed) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return 1 + (x % 6);
  };
}

async function main() {
  if (!args.includes('--no-build')) {
    log('building the package and the gateway (release)');
    execFileSync('bash', [join(root, 'scripts', 'build-pkg.sh')], { stdio: 'inherit' });
    execFileSync('cargo', ['build', '--release', '-p', 'lightwire-gateway', '-p', 'lightwire-tests', '--bins'], { stdio: 'inherit', cwd: root });
  }
  const work = mkdtempSync(join(tmpdir(), 'lightwire-soak-'));
  const server = await serve({ '/': PAGE, '/favicon.ico': '' }, { '/pkg/': join(root, 'pkg') });
  const url = `http://127.0.0.1:${server.address().port}/`;
  const browsers = [];
  let node;
  let gw;
  try {
    const address = execFileSync(bin('lightwire-regtest-wallet'), ['address']).toString().trim();
    node = await startBtcd(join(work, 'btcd'), address);
    // Past a validation window (4,032 headers) before the pages open, as a tab following
    // a real chain is: the window's filling is growth, but not a leak.
    const start = Date.now();
    for (let n = 0; n < START_HEIGHT; n += 500) await node.call('generate', Math.min(500, START_HEIGHT - n));
    log(`btcd mined ${START_HEIGHT} blocks in ${((Date.now() - start) / 1000).toFixed(1)} s`);
    const port = await freePort();
    const keyFile = join(work, 'gateway-key');
    let restarts = 0;
    const startGw = async () => {
      const { proc, ready } = startGateway(bin('lightwire-gateway'), [
        '--listen', `127.0.0.1:${port}`, '--key-file', keyFile, '--metrics-listen', '127.0.0.1:0',
        '--upstream', node.p2p, '--network', 'regtest',
      ]);
      // Its log, for a failure's message.
      const logFile = join(work, `gateway-${restarts}.log`);
      proc.stderr.on('data', (d) => appendFileSync(logFile, d));
      return { proc, logFile, ...(await ready) };
    };
    /// The gateway's served tip and the end of its log.
    const gatewaySays = async () => {
      let tip;
      try {
        tip = await gatewayTip(gw.metrics);
      } catch (e) {
        tip = `no metrics: ${e.message}`;
      }
      let tail = '';
      try {
        tail = readFileSync(gw.logFile, 'utf8').trimEnd().split('\n').slice(-15).join('\n    ');
      } catch {}
      return `the gateway serves ${JSON.stringify(tip)}; its log ends:\n    ${tail}`;
    };
    gw = await startGw();
    const pages = [];
    for (const name of engines) {
      const b = await openEngine(name, join(work, `profile-${name}`));
      browsers.push(b);
      const page = await b.newPage();
      page.onError((m) => log(`  ${name}: ${m}`));
      await page.goto(url);
      await page.waitForFunction(() => document.title === 'ready');
      await page.evaluate((o) => window.soak.open(o), { network: 'regtest', gateways: [gw.connect], storeName: 'soak' });
      const cdp = page.cdp ? await page.cdp() : null;
      pages.push({ name, page, cdp, samples: [] });
    }
    log(`${engines.join(', ')} following btcd through one gateway for ${minutes} min: a block a second, ` +
      `a reorg every ${reorgEvery / 1000} s, a restart every ${restartEvery / 1000} s, a sample every ${sampleEvery / 1000} s`);

    const best = async () => {
      const hash = await node.call('getbestblockhash');
      const header = await node.call('getblockheader', hash, true);
      return { height: header.height, hash };
    };
    /// Until every page's stored tip (and filter headers) is btcd's best, or `ms` pass.
    const caughtUp = async (what, ms) => {
      const deadline = Date.now() + ms;
      for (;;) {
        const want = await best();
        const got = await Promise.all(pages.map((p) => p.page.evaluate(() => window.soak.sample())));
        if (got.every((s) => s.tip?.hash === want.hash && s.filterHeight === want.height)) return want;
        if (Date.now() > deadline) {
          const where = got.map((s, i) => `${pages[i].name} at ${s.tip?.height} ${s.tip?.hash?.slice(0, 12)} (filters ${s.filterHeight})`);
          throw new Error(`${what}: btcd at ${want.height} ${want.hash.slice(0, 12)}, ${where.join('; ')}; ${await gatewaySays()}`);
        }
        await sleep(250);
      }
    };

    const reorgs = [];
    const nextDepth = depths(0x50a4);
    const reorg = async () => {
      const old = await caughtUp('before a reorg', 120_000);
      const depth = nextDepth();
      const first = await node.call('getblockhash', old.height - depth + 1);
      await node.call('invalidateblock', first);
      await node.call('generate', depth + 1);
      const now = await best();
      reorgs.push({ depth, oldTip: old, newTip: now });
      log(`  reorg: ${depth} deep, ${old.height} ${old.hash.slice(0, 12)} -> ${now.height} ${now.hash.slice(0, 12)}`);
    };
    const restart = async () => {
      await terminate(gw.proc);
      restarts += 1;
      gw = await startGw();
      log('  the gateway restarted');
    };
    const sample = async (at) => {
      for (const p of pages) {
        let heap = null;
        if (p.cdp) {
          await p.cdp.send('HeapProfiler.collectGarbage');
          heap = (await p.cdp.send('Runtime.getHeapUsage')).usedSize;
        }
        const s = { at, heap, ...(await p.page.evaluate(() => window.soak.sample())) };
        p.samples.push(s);
        assert(s.timers <= 1, `${p.name}: ${s.timers} timers pending`);
        log(`  ${p.name} ${(at / 60_000).toFixed(1)} min: tip ${s.tip?.height}, wasm ${(s.wasm / 2 ** 20).toFixed(1)} MiB, ` +
          `live ${(s.live / 2 ** 20).toFixed(2)} MiB, JS heap ${heap === null ? 'not exposed' : `${(heap / 2 ** 20).toFixed(2)} MiB`}, ` +
          `IndexedDB ${s.usage === null ? 'not exposed' : `${(s.usage / 1e6).toFixed(1)} MB`}, timers ${s.timers}, ` +
          `reconnects ${s.reconnects}, reorgs ${s.reorgs}`);
      }
    };

    const t0 = Date.now();
    const end = t0 + minutes * 60_000;
    let nextBlock = t0;
    let nextSample = t0;
    let nextReorg = t0 + reorgEvery / 2;
    let nextRestart = t0 + restartEvery;
    while (Date.now() < end) {
      const now = Date.now();
      if (now >= nextSample) {
        await sample(now - t0);
        nextSample += sampleEvery;
      } else if (now >= nextRestart) {
        await restart();
        nextRestart += restartEvery;
      } else if (now >= nextReorg) {
        await reorg();
        nextReorg += reorgEvery;
      } else if (now >= nextBlock) {
        await node.call('generate', 1);
        nextBlock += blockMs;
        // Behind (a reorg or a restart took a while): no burst to catch up.
        if (nextBlock < Date.now()) nextBlock = Date.now() + blockMs;
      }
      await sleep(Math.min(nextBlock, nextSample, nextReorg, nextRestart, end) - Date.now());
    }
    await sample(Date.now() - t0);

    // The end: every page at btcd's tip, every stored hash btcd's, every reorg seen.
    const tip = await caughtUp('at the end', 120_000);
    const want = [];
    for (let h = 0; h <= tip.height; h++) want.push(await node.call('getblockhash', h));
    for (const p of pages) {
      const got = await p.page.evaluate(([a, b]) => window.soak.hashes(a, b), [0, tip.height]);
      const differ = got.findIndex((h, i) => h !== want[i]);
      assert(differ === -1, `${p.name}: stored header ${differ} is ${got[differ]}, btcd's is ${want[differ]}`);
      const seen = await p.page.evaluate(() => window.soak.reorgs);
      for (const r of reorgs) {
        assert(seen.some((s) => s.depth === r.depth && s.oldTip.hash === r.oldTip.hash),
          `${p.name} missed the reorg ${r.depth} deep from ${r.oldTip.height} ${r.oldTip.hash}: it saw ${JSON.stringify(seen)}`);
      }
      // Flat after the warm-up: nothing above the first sample after it by more than 10 %.
      const after = p.samples.filter((s) => s.at >= warmup);
      assert(after.length >= 2, `${p.name}: ${after.length} samples after the warm-up; run longer than it`);
      for (const key of ['wasm', 'heap']) {
        if (after[0][key] === null) continue;
        const peak = Math.max(...after.map((s) => s[key]));
        assert(peak <= after[0][key] * 1.1,
          `${p.name}: ${key} grew from ${after[0][key]} to ${peak} bytes after the warm-up (${after.map((s) => s[key]).join(', ')})`);
      }
      const first = after[0];
      const last = after.at(-1);
      log(`${p.name}: ${tip.height + 1} headers as btcd's, ${seen.length} reorgs (${reorgs.length} made, each seen), ` +
        `wasm ${(first.wasm / 2 ** 20).toFixed(1)} -> ${(last.wasm / 2 ** 20).toFixed(1)} MiB, ` +
        `live ${(first.live / 2 ** 20).toFixed(2)} -> ${(last.live / 2 ** 20).toFixed(2)} MiB, ` +
        `JS heap ${first.heap === null ? 'not exposed' : `${(first.heap / 2 ** 20).toFixed(2)} -> ${(last.heap / 2 ** 20).toFixed(2)} MiB`}, ` +
        `IndexedDB ${first.usage === null ? 'not exposed' : `${(first.usage / 1e6).toFixed(1)} -> ${(last.usage / 1e6).toFixed(1)} MB`}, ` +
        `reconnects ${last.reconnects}`);
      await p.page.evaluate(() => window.client.stop());
    }
    log(`passed: ${minutes} min, ${reorgs.length} reorgs, ${restarts} restarts, tip ${tip.height}`);
  } finally {
    for (const b of browsers) await b.close().catch(() => {});
    if (gw) await terminate(gw.proc);
    if (node) await node.stop();
    server.close();
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
