// The dashboard as a user meets it: `npm start` (scripts/start.sh, on free ports, its key in
// a temporary folder, a smaller chain) and the page it prints, opened in each browser
// engine (tests/engines.mjs: Chromium, Firefox, WebKit), one after another.
//
//   node tests/dashboard/run.mjs [--engines a,b]
//
// Checks that the progress reaches 100%, the history read from the demo's mirror (the bytes
// by source shown); that the tip shown is the gateway's (its /metrics);
// that the charts have data; that a reload resumes from the store instead of starting
// over; that stopping the demo (Ctrl-C: every process gone, the ports free) and starting it
// again shows the gateway backing off, reconnecting and synced again; that the scan panel
// finds the blocks paying two of the demo chain's scripts, and the wallet panel their two
// transactions and balance; that the silent-payment panel shows a receiver's addresses
// (and a sentence for a bad key); that "Clear local
// store" asks first and deletes the store; and that a bad connect string gets a sentence.
// Screenshots (desktop 1280x800, phone 375x812) go to tests/dashboard/screenshots/<engine>/
// (WebKit's are of the viewport only: classic WebDriver takes no full-page shots).
//
// Needs pkg/ built, target/release/lightwire-gateway and web/node_modules (start.sh builds
// or installs whichever is missing, as `npm start` does). LIGHTWIRE_DEMO_GENERATE sets the
// chain length (default here 200,000; `npm start` serves 925,000).

import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, gatewayTip } from '../browser.mjs';
import { available, openEngine } from '../engines.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const shots = join(root, 'tests', 'dashboard', 'screenshots');
const GENERATE = Number(process.env.LIGHTWIRE_DEMO_GENERATE || 200_000);
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 375, height: 812 };
const argv = process.argv.slice(2);
const engines = argv.includes('--engines') ? argv[argv.indexOf('--engines') + 1].split(',') : available();

function log(msg) {
  console.log(`[dashboard] ${msg}`);
}

function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}

/// Whether something accepts connections on 127.0.0.1:port.
function listening(port) {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/// Whether any process of the group `pgid` is left.
function groupAlive(pgid) {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------- the demo (npm start)

/// `bash scripts/start.sh` (what `npm start` runs) in its own process group, as a terminal
/// would run it; resolves once it prints the page's URL.
async function startDemo(env) {
  const proc = spawn('bash', [join(root, 'scripts', 'start.sh')], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  proc.stdout.on('data', (d) => (out += d));
  proc.stderr.on('data', (d) => (out += d));
  const url = await new Promise((resolve, reject) => {
    // The first start may build the page (and, on a fresh clone, much more).
    const timer = setTimeout(() => reject(new Error(`npm start printed no URL in 10 min:\n${out}`)), 600_000);
    const check = () => {
      const m = /^Open (http:\/\/\S+)$/m.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    proc.stdout.on('data', check);
    proc.stderr.on('data', check);
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`npm start exited (${code}) before printing a URL:\n${out}`));
    });
  });
  return { proc, url, output: () => out };
}

/// Ctrl-C: SIGINT to the demo's process group, as a terminal sends it. Resolves with the
/// exit code once the script has exited; SIGKILLs the group if it takes over 15 s.
function interrupt(demo) {
  const { proc } = demo;
  return new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return resolve(proc.exitCode);
    const timer = setTimeout(() => {
      log(`  npm start did not stop in 15 s after Ctrl-C; killing it:\n${demo.output()}`);
      try {
        process.kill(-proc.pid, 'SIGKILL');
      } catch {
        // gone
      }
    }, 15_000);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
    try {
      process.kill(-proc.pid, 'SIGINT');
    } catch {
      // gone
    }
  });
}

// ---------------------------------------------------------------- the page

/// What the page shows, read from its elements (and its test hook).
function readPage(page) {
  return page.evaluate(() => {
    const text = (id) => document.getElementById(id)?.textContent ?? null;
    // An element's text with its parts apart: "14:15:26 drop Gateway 1 ...".
    const words = (el) => [...el.children].map((c) => c.textContent.trim()).filter(Boolean).join(' ');
    const gw = document.querySelector('[data-testid="gateway-0"]');
    return {
      state: document.body.dataset.state,
      role: document.getElementById('role')?.dataset.role || null,
      percent: Number(document.getElementById('progress-percent')?.dataset.value),
      percentText: text('progress-percent'),
      tipHeight: Number(document.getElementById('tip-height')?.dataset.value || NaN),
      tipHash: text('tip-hash'),
      gateway: gw?.getAttribute('data-state') ?? null,
      gatewayText: gw ? words(gw) : null,
      log: [...document.querySelectorAll('#event-log li')].map(words),
      first: window.lightwireDashboard?.firstProgress ?? null,
      charts: window.lightwireDashboard?.chartPoints() ?? {},
      scanMatches: [...document.querySelectorAll('#scan-matches li')].map((li) => Number(li.dataset.height)),
      scanHeight: text('scan-height'),
      walletTxs: [...document.querySelectorAll('#wallet-txs tr')].map((tr) => Number(tr.dataset.height)),
      walletImmature: text('wallet-immature'),
      walletConfirmed: text('wallet-confirmed'),
      sources: [...document.querySelectorAll('#sources li')].map((li) => ({ kind: li.className, text: li.textContent })),
    };
  });
}

/// Poll the page until `pred(view)` holds; fail with what it showed after `ms`.
async function until(page, what, ms, pred) {
  const deadline = Date.now() + ms;
  for (;;) {
    const view = await readPage(page);
    if (pred(view)) return view;
    if (Date.now() > deadline) {
      const { log: lines, ...rest } = view;
      throw new Error(`timed out (${ms / 1000} s) waiting for ${what}; the page shows ${JSON.stringify(rest)}\n` +
        `  its event log:\n    ${lines.slice(0, 10).join('\n    ')}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

let engineShots = shots;

async function screenshot(page, name, viewport, fullPage = true) {
  await page.setViewport(viewport);
  await sleep(400); // layout and the charts' resize
  const path = join(engineShots, `${name}.png`);
  await page.screenshot(path, { fullPage });
  return path;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/// Pixels drawn on each chart's canvas (uPlot draws on one canvas per chart).
function chartPixels(page) {
  return page.evaluate(() =>
    Object.fromEntries(
      [...document.querySelectorAll('.charts figure.chart')].map((fig) => {
        const canvas = fig.querySelector('canvas');
        if (!canvas || canvas.width === 0) return [fig.id, 0];
        const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
        let drawn = 0;
        for (let i = 3; i < data.length; i += 4) if (data[i] !== 0) drawn += 1;
        return [fig.id, drawn];
      }),
    ),
  );
}

// ---------------------------------------------------------------- main

async function main() {
  for (const engine of engines) {
    log(`${engine}:`);
    engineShots = join(shots, engine);
    await inEngine(engine);
  }
}

async function inEngine(engine) {
  mkdirSync(engineShots, { recursive: true });
  const work = mkdtempSync(join(tmpdir(), 'lightwire-dashboard-'));
  const ports = { gateway: await freePort(), metrics: await freePort(), web: await freePort() };
  const env = {
    LIGHTWIRE_GATEWAY_PORT: String(ports.gateway),
    LIGHTWIRE_METRICS_PORT: String(ports.metrics),
    LIGHTWIRE_WEB_PORT: String(ports.web),
    LIGHTWIRE_DEMO_GENERATE: String(GENERATE),
    LIGHTWIRE_DEMO_DIR: join(work, 'demo'),
  };
  let demo;
  let browser;
  const errors = [];
  try {
    // 1. npm start, and the page it prints.
    let t = Date.now();
    demo = await startDemo(env);
    log(`npm start is up in ${((Date.now() - t) / 1000).toFixed(1)} s: ${demo.url}`);
    assert(demo.url.includes(`127.0.0.1:${ports.web}/?gw=ws://127.0.0.1:${ports.gateway}%23`) &&
      demo.url.endsWith('&bulk=/bulk/regtest/&network=regtest'), `unexpected URL ${demo.url}`);
    browser = await openEngine(engine, join(work, 'profile'));
    const page = await browser.newPage();
    page.onError((message) => errors.push(message));
    await page.setViewport(DESKTOP);
    t = Date.now();
    await page.goto(demo.url);

    // 2. The progress reaches 100%.
    const seen = [];
    const synced = await until(page, 'the sync to 100%', 300_000, (v) => {
      if (Number.isFinite(v.percent) && seen.at(-1) !== v.percent) seen.push(v.percent);
      return v.state === 'synced' && v.percent === 100 && v.gateway === 'synced';
    });
    const steps = seen.map((p) => `${Math.floor(p)}%`).join(' ');
    log(`synced ${GENERATE.toLocaleString('en-US')} headers in ${((Date.now() - t) / 1000).toFixed(1)} s ` +
      `(the page showed ${synced.percentText}; on the way: ${steps})`);
    assert(synced.first && synced.first.storedHeight === 0, `a fresh profile started at ${JSON.stringify(synced.first)}`);
    // The history came from the demo's mirror (npm start exports the chain and serves it
    // beside the page): the page lists it with the bytes it sent, beside the gateway's.
    const sourced = await until(page, 'the bytes by source', 10_000, (v) =>
      v.sources.some((x) => x.kind === 'mirror' && !/: 0 B /.test(x.text)) && v.sources.some((x) => x.kind === 'gateway'));
    log(`bytes by source: ${sourced.sources.map((x) => x.text).join('; ')}`);
    for (let i = 1; i < seen.length; i++) assert(seen[i] >= seen[i - 1], `the progress went back: ${steps}`);

    // 3. The tip shown is the gateway's.
    const gw = await gatewayTip(`http://127.0.0.1:${ports.metrics}/metrics`);
    assert(gw.height === GENERATE && /^[0-9a-f]{64}$/.test(gw.hash), `gateway /metrics: ${JSON.stringify(gw)}`);
    const shown = await until(page, "the gateway's tip on the page", 30_000, (v) => v.tipHeight === gw.height);
    assert(shown.tipHash === gw.hash, `the page shows tip hash ${shown.tipHash}, the gateway ${gw.hash}`);
    log(`the page shows tip ${shown.tipHeight} ${shown.tipHash.slice(0, 16)}... = the gateway's /metrics`);

    // 3b. The dashboard open in a second tab follows the first: it shows its role and the
    // same tip, through the first tab's connection.
    assert(shown.role === 'leader', `the first tab shows role ${shown.role}`);
    const second = await browser.newPage();
    second.onError((message) => errors.push(message));
    await second.goto(demo.url);
    const follows = await until(second, 'the second tab following', 60_000, (v) =>
      v.role === 'follower' && v.state === 'synced' && v.tipHeight === gw.height);
    assert(follows.tipHash === gw.hash, `the second tab shows tip hash ${follows.tipHash}`);
    await second.close();
    log(`a second tab shows role "follower" and the same tip; the first, "leader"`);

    // 4. The charts have data, drawn.
    const charted = await until(page, 'two samples in every chart', 15_000, (v) =>
      Object.keys(v.charts).length === 6 && Object.values(v.charts).every((n) => n > 1));
    const pixels = await chartPixels(page);
    assert(Object.keys(pixels).length === 6 && Object.values(pixels).every((n) => n > 500),
      `a chart canvas is blank: ${JSON.stringify(pixels)}`);
    log(`charts: samples ${JSON.stringify(charted.charts)}; pixels drawn ${JSON.stringify(pixels)}`);

    // 4b. A scan with compact filters, from the panel: the blocks paying two of the demo
    // chain's coinbase scripts are found (BIP158 may add a false positive, rarely).
    const heights = [Math.floor(GENERATE * 0.6), Math.floor(GENERATE * 0.9)];
    const scripts = await page.evaluate((hs) => Promise.all(hs.map((h) => window.demoScript(h))), heights);
    // Comma-separated: WebKit's WebDriver drops the newlines it is asked to type.
    await page.fill('#scan-scripts', scripts.join(', '));
    await page.fill('#scan-from', String(Math.floor(GENERATE / 2)));
    await page.click('#scan-start');
    t = Date.now();
    const scanned = await until(page, 'the scan to find both blocks', 180_000, (v) =>
      heights.every((h) => v.scanMatches.includes(h)));
    log(`scan from ${Math.floor(GENERATE / 2)}: the page lists blocks ${scanned.scanMatches.join(', ')} ` +
      `(paying the scripts of ${heights.join(' and ')}) after ${((Date.now() - t) / 1000).toFixed(1)} s`);

    // 4c. The wallet panel watches the same two scripts: their blocks are fetched and
    // checked, and the page lists the two coinbase transactions with the balance (50 BTC
    // each; immature for their first 100 blocks).
    await page.fill('#wallet-items', scripts.join(', '));
    await page.fill('#wallet-from', String(Math.floor(GENERATE / 2)));
    await page.click('#wallet-watch');
    t = Date.now();
    const watched = await until(page, 'the wallet to list both transactions', 180_000, (v) =>
      heights.every((h) => v.walletTxs.includes(h)) && v.walletConfirmed !== '–');
    // (Both blocks are more than 100 below the tip: mature.)
    assert(watched.walletConfirmed === '100.00000000 BTC', `the balance: ${watched.walletConfirmed} / ${watched.walletImmature}`);
    log(`wallet: the page lists transactions in blocks ${watched.walletTxs.join(', ')}; confirmed ` +
      `${watched.walletConfirmed}, immature ${watched.walletImmature} after ${((Date.now() - t) / 1000).toFixed(1)} s`);

    // The rescan button: from above the wallet's start it says why not; from below, the
    // wallet is scanned again and lists the same two.
    await page.fill('#wallet-from', String(Math.floor(GENERATE / 2) + 1));
    await page.click('#wallet-rescan');
    let rescanError = '';
    for (const asked = Date.now(); !rescanError && Date.now() - asked < 10_000;) {
      await sleep(100);
      rescanError = await page.evaluate(() => document.getElementById('wallet-error').textContent);
    }
    assert(/at or below the wallet's start/.test(rescanError), `a rescan above the start: ${rescanError}`);
    await page.fill('#wallet-from', String(Math.floor(GENERATE / 2) - 1_000));
    await page.click('#wallet-rescan');
    let rescanned = [];
    for (const asked = Date.now(); !rescanned.length && Date.now() - asked < 120_000;) {
      await sleep(200);
      rescanned = await page.evaluate(() => [...document.querySelectorAll('#event-log li')]
        .map((l) => l.textContent).filter((t) => t.includes('The wallet is rescanned')));
    }
    assert(rescanned.length === 1 && /2 transaction\(s\), 100\.00000000 BTC/.test(rescanned[0]), `the rescan: ${rescanned}`);
    log(`rescan: a start above the wallet's refused (${rescanError.slice(0, 60)}...); from 1,000 below it: ${rescanned[0]}`);

    // The wallet switcher: a wallet named "savings" watching one of the two scripts lists
    // that one alone; the default wallet, picked again, still lists both.
    await page.fill('#wallet-new', 'savings');
    await page.click('#wallet-add');
    await page.fill('#wallet-items', scripts[0]);
    await page.fill('#wallet-from', String(Math.floor(GENERATE / 2)));
    await page.click('#wallet-watch');
    const savings = await until(page, 'the savings wallet to list its one transaction', 120_000, (v) =>
      v.walletTxs.length === 1 && v.walletTxs[0] === heights[0] && v.walletConfirmed === '50.00000000 BTC');
    const listed = await page.evaluate(() => [...document.querySelectorAll('#wallet-name option')].map((o) => o.value));
    assert(JSON.stringify(listed) === JSON.stringify(['', 'savings']), `the switcher lists ${JSON.stringify(listed)}`);
    await page.evaluate(() => {
      const select = document.getElementById('wallet-name');
      select.value = '';
      select.dispatchEvent(new Event('change'));
    });
    const again = await until(page, 'the default wallet shown again', 30_000, (v) =>
      heights.every((h) => v.walletTxs.includes(h)) && v.walletConfirmed === '100.00000000 BTC');
    log(`wallets: "savings" lists block ${savings.walletTxs.join(', ')} (${savings.walletConfirmed}); the default, picked again, ${again.walletTxs.join(', ')} (${again.walletConfirmed})`);

    // 4d. The send form: the two coins are of scripts watched as such, which the wallet
    // spends only when named, so a PSBT from the form is refused with what is spendable
    // and why; a bad amount is refused before asking.
    // (The P2WPKH address of the generator point's key, on regtest.)
    await page.fill('#psbt-address', 'bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080');
    await page.fill('#psbt-amount', '0.000000001');
    await page.click('#psbt-create');
    let psbtError = await page.evaluate(() => document.getElementById('psbt-error').textContent);
    assert(/at most 8 decimals/.test(psbtError), `a ninth decimal: ${psbtError}`);
    await page.fill('#psbt-amount', '1');
    await page.click('#psbt-create');
    const asked = Date.now();
    do {
      await sleep(100);
      psbtError = await page.evaluate(() => document.getElementById('psbt-error').textContent);
    } while (/at most 8 decimals/.test(psbtError) && Date.now() - asked < 30_000);
    assert(/spent only when named/.test(psbtError), `the send form: ${psbtError}`);
    log(`send form: ${psbtError}`);
    // The demo gateway has no node to ask: the page says so.
    await page.click('#psbt-estimate');
    let rates = '';
    for (const asked = Date.now(); !rates && Date.now() - asked < 10_000;) {
      await sleep(100);
      rates = await page.evaluate(() => document.getElementById('psbt-rates').textContent);
    }
    assert(/No connected gateway serves fee estimates/.test(rates), `fee estimates: ${rates}`);

    // 4e. Labels: one typed on the first transaction's row and a coin frozen in the coin
    // list are the client's (a BIP329 export holds both); a file with a bad line says which
    // and imports nothing.
    await page.waitForFunction(() => document.querySelector('#wallet-coin-list tr') !== null, null, { timeout: 30_000 });
    const firstTx = await page.evaluate(() => document.querySelector('#wallet-txs tr').dataset.txid);
    await page.fill('#wallet-txs tr input.label', 'demo payment');
    await page.press('Enter');
    const coin = await page.evaluate(() => document.querySelector('#wallet-coin-list tr').dataset.coin);
    await page.click('#wallet-coin-list tr input[type=checkbox]');
    let exported = '';
    for (const asked = Date.now(); !(exported.includes('demo payment') && exported.includes('"spendable":false')) && Date.now() - asked < 10_000;) {
      await sleep(100);
      exported = await page.evaluate(() => window.lightwireDashboard.client.labels());
    }
    const lines = exported.split('\n').filter(Boolean).map((l) => JSON.parse(l));
    assert(lines.some((l) => l.type === 'tx' && l.ref === firstTx && l.label === 'demo payment')
      && lines.some((l) => l.type === 'output' && l.ref === coin && l.spendable === false), `the labels: ${exported}`);
    const frozenRow = await page.evaluate(async () => (await window.lightwireDashboard.client.utxos()).filter((u) => u.frozen).length);
    assert(frozenRow === 1, `frozen coins: ${frozenRow}`);
    // The file as a user's pick would hand it over (no engine's driver here picks files).
    await page.evaluate((txid) => {
      const input = document.getElementById('labels-import');
      const picked = new DataTransfer();
      const text = `{"type":"tx","ref":"${txid}","label":"replaced?"}\n{"type":"addr","ref":"not an address","label":"x"}\n`;
      picked.items.add(new File([text], 'bad.jsonl', { type: 'application/jsonl' }));
      input.files = picked.files;
      input.dispatchEvent(new Event('change'));
    }, firstTx);
    let importSays = '';
    for (const asked = Date.now(); !/Nothing imported/.test(importSays) && Date.now() - asked < 10_000;) {
      await sleep(100);
      importSays = await page.evaluate(() => document.getElementById('labels-result').textContent);
    }
    assert(/Nothing imported .*line 2/.test(importSays), `a bad label file: ${importSays}`);
    const still = await page.evaluate(() => window.lightwireDashboard.client.labels());
    assert(still === exported, `the labels after a refused file: ${still}`);
    log(`labels: a transaction labelled and a coin frozen in the page; a bad file refused: ${importSays}`);

    // 4f. The silent-payment panel: a scan key that is not one gets a sentence; keys
    // that are show the receiver's regtest address and its label's, and the scan's workers
    // once it samples (the demo's gateway serves no tweaks: nothing is scanned).
    await page.fill('#silent-scan-key', '00');
    await page.fill('#silent-spend', `02${'79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798'}`);
    await page.click('#silent-start');
    const silentError = await page.evaluate(() => document.getElementById('silent-error').textContent);
    assert(/scan key is 64 hex/.test(silentError), `a bad scan key: ${silentError}`);
    await page.fill('#silent-scan-key', '11'.repeat(32));
    await page.fill('#silent-labels', '1');
    const clicked = Date.now();
    await page.click('#silent-start');
    let silent = { address: '', workers: '–' };
    for (const asked = Date.now(); (!silent.address || silent.workers === '–') && Date.now() - asked < 60_000;) {
      await sleep(100);
      silent = await page.evaluate(async () => ({
        address: document.getElementById('silent-address').textContent,
        workers: document.getElementById('silent-workers').textContent,
        error: document.getElementById('silent-error').textContent,
        scan: (await window.lightwireDashboard.client.metrics()).silentScan,
        role: window.lightwireDashboard.client.role,
        log: [...document.querySelectorAll('#event-log li')].slice(0, 4).map((l) => l.textContent),
      }));
    }
    assert(/^sprt1q\S+\nlabel 1: sprt1q\S+$/.test(silent.address) && silent.workers !== '–',
      `the silent-payment panel: ${JSON.stringify(silent)}`);
    log(`silent payments: the page shows ${silent.address.split('\n')[0].slice(0, 20)}… and its label's address ` +
      `${((Date.now() - clicked) / 1000).toFixed(1)} s after the click; workers ${silent.workers}`);

    // Screenshots, once the charts hold a few seconds.
    await sleep(3000);
    const saved = [
      await screenshot(page, 'desktop-synced', DESKTOP, false),
      await screenshot(page, 'desktop-synced-full', DESKTOP),
      await screenshot(page, 'phone-synced', PHONE, false),
      await screenshot(page, 'phone-synced-full', PHONE),
    ];
    await page.setViewport(DESKTOP);
    log(`screenshots: ${saved.map((p) => p.slice(root.length + 1)).join(', ')}`);

    // 5. A reload resumes from the store.
    await page.reload();
    const resumed = await until(page, 'the sync after the reload', 60_000, (v) =>
      v.first !== null && v.state === 'synced' && v.tipHeight === gw.height);
    assert(resumed.first.storedHeight > 0,
      `after the reload the first progress says storedHeight ${resumed.first.storedHeight}: it started over`);
    const after = await page.evaluate(() => window.lightwireDashboard.client.metrics());
    assert(after.headersValidated < GENERATE / 10,
      `after the reload the client validated ${after.headersValidated} headers of ${GENERATE}: it started over`);
    assert(resumed.log.some((l) => /already here/.test(l)), `the log does not say the store was reopened: ${resumed.log}`);
    log(`reloaded: the first progress showed storedHeight ${resumed.first.storedHeight}; ` +
      `${after.headersValidated} headers validated after it`);

    // 6. Ctrl-C stops everything; npm start again; the page reconnects by itself.
    const pgid = demo.proc.pid;
    const code = await interrupt(demo);
    const left = await Promise.all([listening(ports.gateway), listening(ports.metrics), listening(ports.web)]);
    assert(!left.some(Boolean), `after Ctrl-C something still listens (gateway, metrics, web): ${left}`);
    assert(!groupAlive(pgid), 'after Ctrl-C a process of npm start is still running');
    assert(/stopped the gateway and the page server/.test(demo.output()), `npm start said:\n${demo.output()}`);
    log(`Ctrl-C: npm start exited (${code}); nothing left running or listening`);
    const dropped = await until(page, 'the gateway backing off', 60_000, (v) => v.gateway === 'backing-off');
    await screenshot(page, 'desktop-backing-off', DESKTOP, false);
    log(`the page shows the gateway backing off: "${dropped.gatewayText}"`);
    t = Date.now();
    demo = await startDemo(env);
    const back = await until(page, 'the reconnect', 120_000, (v) =>
      v.gateway === 'synced' && v.state === 'synced' && v.log.some((l) => /reconnected/.test(l)));
    const m = await page.evaluate(() => window.lightwireDashboard.client.metrics());
    assert(m.reconnects >= 1, `metrics count ${m.reconnects} reconnects`);
    assert(back.tipHeight === gw.height, `after the restart the tip is ${back.tipHeight}`);
    const story = back.log.filter((l) => /dropped|Could not reach|reconnected/.test(l)).reverse();
    log(`restarted (same port and key): synced again ${((Date.now() - t) / 1000).toFixed(1)} s after ` +
      `npm start began; ${m.reconnects} reconnect(s); the log says:\n    ${story.join('\n    ')}`);

    // 7. Clear local store: asks first, then stops the client and deletes the store.
    await page.click('#clear-store');
    assert(await page.evaluate(() => document.getElementById('clear-dialog').open), 'no confirmation dialog');
    await screenshot(page, 'desktop-clear-dialog', DESKTOP, false);
    await page.press('Escape');
    await page.waitForFunction(() => !document.getElementById('clear-dialog').open);
    assert((await readPage(page)).state === 'synced', 'cancelling the dialog changed the state');
    await page.click('#clear-store');
    await page.click('#clear-confirm');
    await page.waitForFunction(() => /Deleted/.test(document.getElementById('storage-message').textContent),
      null, { timeout: 30_000 });
    const dbs = await page.evaluate(async () => (await indexedDB.databases()).map((d) => d.name));
    assert(!dbs.includes('lightwire-regtest'), `the store is still there: ${dbs}`);
    const cleared = await readPage(page);
    assert(cleared.state === 'stopped', `after clearing the page is ${cleared.state}`);
    log(`cleared after a confirmation dialog (Escape cancels): databases left ${JSON.stringify(dbs)}`);

    // 8. A bad connect string gets a sentence.
    await page.fill('#gateways', 'http://127.0.0.1:1');
    await page.click('#connect');
    await page.waitForFunction(() => !document.getElementById('form-error').hidden, null, { timeout: 30_000 });
    const sentence = await page.evaluate(() => document.getElementById('form-error').textContent);
    assert(/connect string is not valid/.test(sentence), `the error reads: ${sentence}`);
    await screenshot(page, 'phone-error', PHONE, false);
    log(`a bad connect string: "${sentence}"`);

    assert(errors.length === 0, `the page logged errors:\n  ${errors.join('\n  ')}`);
  } finally {
    if (browser) await browser.close();
    if (demo) {
      const pgid = demo.proc.pid;
      await interrupt(demo);
      if (groupAlive(pgid)) process.kill(-pgid, 'SIGKILL');
    }
    rmSync(work, { recursive: true, force: true });
  }
}

try {
  await main();
  log('passed');
} catch (e) {
  log(`FAILED: ${e.stack || e}`);
  process.exit(1);
}
