// A public gateway, with the real components an operator has: Debian's nginx
// started here on 127.0.0.1 with deploy/nginx/lightwire-gateway.conf itself (loopback
// addresses, ports and a test certificate put in place of its example ones), certificate
// authorities made here with openssl, and lightwire-gateway processes, in each browser
// engine (tests/engines.mjs) made to accept the test certificates without touching any
// system store. The page is served over https, so the package may only use wss:// (a
// ws:// connection from it is blocked as mixed content).
//
//   node tests/public/run.mjs [--no-build] [--only NAME] [--engines a,b]
//
// Scenarios:
//   fleet   two gateways sharing one key file behind nginx (--trusted-proxy 127.0.0.1);
//           the package syncs the 925,000-header chain over wss:// through nginx; the
//           gateway serving it is killed in the middle of the sync; the client reconnects
//           through nginx, finishes on the other, and its stored tip equals that gateway's
//   native  the same sync (100,000 headers) over the gateway's own wss:// (--tls-cert,
//           --tls-key); then the certificate is rotated (SIGHUP) and a new session
//           connects with the new one
//   unit    deploy/systemd/lightwire-gateway.service passes systemd-analyze verify, and
//           the gateway's command line parser takes its flags
//
// Not shown here: that the https page could not use a ws:// gateway. Browsers exempt
// loopback addresses from the mixed-content block, and every server here is on loopback.

import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, terminate } from '../browser.mjs';
import { available, openEngine } from '../engines.mjs';
import { assert, authority, bin, gateway, nginx, root, running, spkiOf } from './front.mjs';

const args = process.argv.slice(2);
const only = args.includes('--only') ? args[args.indexOf('--only') + 1] : null;
const engines = args.includes('--engines') ? args[args.indexOf('--engines') + 1].split(',') : available();

function log(msg) {
  console.log(`[public] ${msg}`);
}

const PAGE = `<!doctype html><meta charset="utf-8"><title>public</title>
<script type="module">
  import { LightwireClient } from '/pkg/dist/index.js';
  window.events = [];
  window.lw = {
    async open(options) {
      window.events = [];
      window.client = await LightwireClient.open(options);
      window.client.addEventListener('event', (e) => window.events.push(e.detail));
      return true;
    },
  };
  document.title = 'ready';
</script>`;

let work;
let browser;

async function openPage(url) {
  const page = await browser.newPage();
  page.onError((message) => log(`  ${message}`));
  await page.goto(url);
  try {
    await page.waitForFunction(() => document.title === 'ready');
  } catch (e) {
    // What the page is instead (an error page, a module that did not load): the failure
    // says so, rather than only that it waited.
    const state = await page.evaluate(() => ({
      href: location.href,
      title: document.title,
      readyState: document.readyState,
      body: (document.body?.innerText ?? '').slice(0, 300),
      modules: performance.getEntriesByType('resource').map((r) => `${r.name} ${Math.round(r.duration)} ms`),
    })).catch((err) => `unreadable: ${err}`);
    throw new Error(`${url} did not become ready: ${JSON.stringify(state)} (${e.message})`);
  }
  return page;
}

/// Wait until `pred(metrics, events)` holds in the page (polled), or fail after `ms`.
async function until(page, what, ms, pred) {
  const deadline = Date.now() + ms;
  for (;;) {
    const state = await page.evaluate(async () => ({ m: await window.client.metrics(), events: window.events }));
    if (pred(state.m, state.events)) return state;
    if (Date.now() > deadline) {
      const last = state.events.slice(-8).map((e) => JSON.stringify(e)).join('\n    ');
      throw new Error(`timed out waiting for ${what}; metrics ${JSON.stringify(state.m)}\n    ${last}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

const syncedTo = (h) => (m) => m.synced && m.storedHeight === h && m.storedFilterHeight === h;

// ---------------------------------------------------------------- scenarios

async function fleet(cert) {
  const keyFile = join(work, 'fleet.key');
  const HEIGHT = 925_000;
  const source = ['--generate', String(HEIGHT), '--trusted-proxy', '127.0.0.1'];
  // The first creates the key file; the second loads the same one.
  const a = await gateway(source, { keyFile });
  const b = await gateway(source, { keyFile });
  const id = (c) => c.split('#')[1];
  assert(id(a.connect) === id(b.connect), 'the fleet does not share one node id');
  const [pagePort, gwPort] = [await freePort(), await freePort()];
  const front = await nginx(join(work, 'nginx-fleet'), { pagePort, cert, page: PAGE, fleet: { port: gwPort, upstreams: [a.port, b.port] } });
  const page = await openPage(`https://localhost:${pagePort}/`);
  try {
    // One connect string for the fleet: nginx's address, the fleet's key.
    const connect = `wss://localhost:${gwPort}/#${id(a.connect)}`;
    await page.evaluate((o) => window.lw.open(o), { network: 'regtest', gateways: [connect], storeName: 'fleet' });
    await until(page, 'the sync under way', 120_000, (m) => m.storedHeight >= 100_000);
    const [openA, openB] = [await a.open(), await b.open()];
    assert(openA + openB === 1, `expected the client on one gateway, found ${openA} and ${openB}`);
    const [killed, other] = openA === 1 ? [a, b] : [b, a];
    const at = (await page.evaluate(() => window.client.metrics())).storedHeight;
    killed.proc.kill('SIGKILL');
    log(`  killed the gateway serving the client at ${at.toLocaleString()} stored headers`);
    const { m, events } = await until(page, 'the sync finished on the other gateway', 180_000, syncedTo(HEIGHT));
    const tip = await page.evaluate(() => window.client.tip());
    const gwTip = await other.tip();
    assert(tip.height === gwTip.height && tip.hash === gwTip.hash,
      `stored tip ${JSON.stringify(tip)} is not the gateway's ${JSON.stringify(gwTip)}`);
    assert(m.reconnects >= 1, 'no reconnect counted');
    assert(await other.open() === 1, 'the client is not on the other gateway');
    const states = events.filter((e) => e.type === 'gateway').map((e) => e.state);
    log(`  finished on the other gateway through nginx: states ${states.join(' > ')}; tip ${tip.hash.slice(0, 16)}... = the gateway's`);
    await page.evaluate(() => window.client.stop());
  } finally {
    await page.close();
    await front.stop();
    await a.stop();
    await b.stop();
  }
}

async function native(cert, next) {
  const dir = join(work, 'native');
  mkdirSync(dir, { recursive: true });
  // The files the gateway reads, rotated in place below.
  const [certFile, keyFile] = [join(dir, 'cert.pem'), join(dir, 'key.pem')];
  writeFileSync(certFile, readFileSync(cert.fullchain));
  writeFileSync(keyFile, readFileSync(cert.key));
  const gw = await gateway(['--generate', '100000', '--tls-cert', certFile, '--tls-key', keyFile],
    { keyFile: join(dir, 'gateway.key') });
  assert(gw.connect.startsWith('wss://127.0.0.1:'), `connect string ${gw.connect}`);
  const pagePort = await freePort();
  const front = await nginx(join(work, 'nginx-native'), { pagePort, cert, page: PAGE });
  const connect = gw.connect.replace('wss://127.0.0.1:', 'wss://localhost:');
  let page = await openPage(`https://localhost:${pagePort}/`);
  try {
    await page.evaluate((o) => window.lw.open(o), { network: 'regtest', gateways: [connect], storeName: 'native' });
    await until(page, 'the sync over native TLS', 120_000, syncedTo(100_000));
    const tip = await page.evaluate(() => window.client.tip());
    const gwTip = await gw.tip();
    assert(tip.hash === gwTip.hash, `stored tip ${JSON.stringify(tip)} is not the gateway's ${JSON.stringify(gwTip)}`);
    await page.evaluate(() => window.client.stop());
    await page.close();
    log('  synced 100,000 headers over the gateway\'s own wss://');
    // Rotate: another certificate (the browser trusts both), loaded on SIGHUP.
    writeFileSync(certFile, readFileSync(next.fullchain));
    writeFileSync(keyFile, readFileSync(next.key));
    gw.proc.kill('SIGHUP');
    const deadline = Date.now() + 10_000;
    while (!gw.stderr().includes('reloaded the TLS certificate and key')) {
      assert(Date.now() < deadline, `no reload logged: ${gw.stderr()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const served = execFileSync('openssl', ['s_client', '-connect', `127.0.0.1:${gw.port}`, '-servername', 'localhost'],
      { input: '', stdio: ['pipe', 'pipe', 'ignore'] }).toString();
    const pem = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(served)?.[0];
    const spki = pem && spkiOf(pem);
    assert(spki === next.spki, 'the gateway does not serve the rotated certificate');
    page = await openPage(`https://localhost:${pagePort}/`);
    await page.evaluate((o) => window.lw.open(o), { network: 'regtest', gateways: [connect], storeName: 'native' });
    await until(page, 'a session over the rotated certificate', 60_000, (m) => m.synced && m.storedHeight === 100_000);
    await page.evaluate(() => window.client.stop());
    log('  rotated the certificate (SIGHUP): a new session connects with it');
  } finally {
    await page.close();
    await front.stop();
    await gw.stop();
  }
}

/// deploy/systemd/lightwire-gateway.service passes systemd's own check (with this
/// build's binary in place of /usr/local/bin's), and its command line is one the gateway
/// takes.
async function unit() {
  const file = join(root, 'deploy', 'systemd', 'lightwire-gateway.service');
  const text = readFileSync(file, 'utf8');
  assert(text.includes('/usr/local/bin/lightwire-gateway'), 'the unit no longer runs /usr/local/bin/lightwire-gateway');
  const dir = join(work, 'unit');
  mkdirSync(dir, { recursive: true });
  const copy = join(dir, 'lightwire-gateway.service');
  writeFileSync(copy, text.replaceAll('/usr/local/bin/lightwire-gateway', bin('lightwire-gateway')));
  execFileSync('systemd-analyze', ['verify', copy], { stdio: ['ignore', 'inherit', 'inherit'] });
  // Its flags, through the gateway's own parser (--help exits 0 only if they parse).
  const execStart = /ExecStart=\S+((?:.|\\\n)*?)\n(?!\s)/.exec(text)[1].replaceAll('\\\n', ' ');
  const flags = execStart.split(/\s+/).filter(Boolean);
  execFileSync(bin('lightwire-gateway'), [...flags, '--help'], { stdio: 'ignore' });
  log(`  systemd-analyze verify: clean; flags ${flags.filter((f) => f.startsWith('--')).join(' ')}`);
}

async function main() {
  if (!args.includes('--no-build')) {
    log('building the package and the gateway (release)');
    execFileSync('bash', [join(root, 'scripts', 'build-pkg.sh')], { stdio: 'inherit' });
    execFileSync('cargo', ['build', '--release', '-p', 'lightwire-gateway'], { stdio: 'inherit', cwd: root });
  }
  work = mkdtempSync(join(tmpdir(), 'lightwire-public-'));
  const cert = authority(join(work, 'ca-1'), 1);
  const next = authority(join(work, 'ca-2'), 2);
  const scenarios = { fleet: () => fleet(cert), native: () => native(cert, next), unit };
  const trust = {
    host: 'localhost',
    cas: [cert.ca, next.ca],
    leaves: [cert.leaf, next.leaf],
    spki: [cert.spki, next.spki],
  };
  let failed = 0;
  try {
    for (const engine of engines) {
      browser = await openEngine(engine, join(work, `profile-${engine}`), { trust });
      try {
        for (const [name, f] of Object.entries(scenarios)) {
          if (only && only !== name) continue;
          log(`${engine}: ${name}`);
          const t = Date.now();
          try {
            await f();
            log(`  ok (${((Date.now() - t) / 1000).toFixed(1)} s)`);
          } catch (e) {
            failed += 1;
            log(`  FAILED: ${e.stack || e}`);
          }
        }
      } finally {
        await browser.close();
        browser = undefined;
      }
    }
  } finally {
    if (browser) await browser.close();
    // SIGTERM: nginx's master stops its workers on it (a SIGKILL would leave them serving).
    for (const p of [...running]) await terminate(p);
    rmSync(work, { recursive: true, force: true });
  }
  if (failed) {
    log(`${failed} scenario(s) failed`);
    process.exit(1);
  }
  log(`all scenarios passed (${engines.join(', ')})`);
}

await main();
