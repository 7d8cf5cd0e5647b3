// A public gateway (issue 17), with the real components an operator has: Debian's nginx
// started here on 127.0.0.1 with deploy/nginx/lightwire-gateway.conf itself (loopback
// addresses, ports and a test certificate put in place of its example ones), a
// certificate authority made here with openssl, Chromium trusting that authority's
// certificate (by its key, --ignore-certificate-errors-spki-list: no system store is
// touched), and lightwire-gateway processes. The page is served over https, so the package
// may only use wss:// (a ws:// connection from it is blocked as mixed content).
//
//   node tests/public/run.mjs [--no-build] [--only NAME]
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
//
// Chromium only: Firefox and WebKit would need the test authority in their own stores
// (not done yet; see the issue's note).

import { execFileSync, spawn } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, gatewayTip, startGateway, terminate } from '../browser.mjs';
import { openEngine } from '../engines.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const bin = (name) => join(root, 'target', 'release', name);
const args = process.argv.slice(2);
const only = args.includes('--only') ? args[args.indexOf('--only') + 1] : null;
const NGINX = process.env.NGINX || '/usr/sbin/nginx';

function log(msg) {
  console.log(`[public] ${msg}`);
}

function assert(cond, msg) {
  if (!cond) throw new Error(msg);
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
const running = new Set();

/// A certificate authority and a certificate for localhost and 127.0.0.1 signed by it,
/// made with openssl: `{ ca, cert, fullchain, key, spki }` (spki: the base64 SHA-256 of
/// the certificate's public key, what Chromium is told to trust).
function authority(dir, name) {
  mkdirSync(dir, { recursive: true });
  const f = (x) => join(dir, x);
  const ssl = (...a) => execFileSync('openssl', a, { stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  ssl('req', '-x509', ...ec, '-keyout', f('ca.key'), '-out', f('ca.crt'), '-days', '2',
    '-subj', `/CN=lightwire test authority ${name}`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign');
  ssl('req', ...ec, '-keyout', f('key.pem'), '-out', f('req.csr'), '-subj', '/CN=localhost');
  writeFileSync(f('ext.cnf'), [
    'subjectAltName=DNS:localhost,IP:127.0.0.1',
    'basicConstraints=CA:FALSE',
    'keyUsage=critical,digitalSignature',
    'extendedKeyUsage=serverAuth',
  ].join('\n'));
  ssl('x509', '-req', '-in', f('req.csr'), '-CA', f('ca.crt'), '-CAkey', f('ca.key'),
    '-CAcreateserial', '-days', '2', '-extfile', f('ext.cnf'), '-out', f('cert.pem'));
  const cert = readFileSync(f('cert.pem'), 'utf8');
  writeFileSync(f('fullchain.pem'), cert + readFileSync(f('ca.crt'), 'utf8'));
  const spki = new X509Certificate(cert).publicKey.export({ type: 'spki', format: 'der' });
  return {
    fullchain: f('fullchain.pem'),
    key: f('key.pem'),
    spki: createHash('sha256').update(spki).digest('base64'),
  };
}

/// Start lightwire-gateway with `argv` on 127.0.0.1; resolves once it listens.
async function gateway(argv, { keyFile, log: level = 'info' } = {}) {
  const port = await freePort();
  const full = ['--listen', `127.0.0.1:${port}`, '--key-file', keyFile,
    '--metrics-listen', '127.0.0.1:0', '--log', level, ...argv];
  const { proc, ready } = startGateway(bin('lightwire-gateway'), full);
  running.add(proc);
  proc.on('exit', () => running.delete(proc));
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const { connect, metrics } = await ready;
  return {
    connect,
    port,
    proc,
    metrics,
    stderr: () => stderr,
    tip: () => gatewayTip(metrics),
    open: async () => Number(/^lightwire_connections_open (\d+)$/m.exec(await (await fetch(metrics)).text())?.[1]),
    stop: () => terminate(proc),
  };
}

/// deploy/nginx/lightwire-gateway.conf with the loopback fleet, port and certificate in
/// place of the example ones (each replacement must happen: a change to the file that
/// this test no longer follows fails here rather than testing something else).
function deployedConf({ port, upstreams, cert }) {
  let conf = readFileSync(join(root, 'deploy', 'nginx', 'lightwire-gateway.conf'), 'utf8');
  const swap = (from, to) => {
    assert(conf.includes(from), `deploy/nginx/lightwire-gateway.conf no longer has ${JSON.stringify(from)}`);
    conf = conf.replaceAll(from, to);
  };
  swap('listen 443 ssl;', `listen 127.0.0.1:${port} ssl;`);
  swap('listen [::]:443 ssl;', '');
  swap('server_name gateway.example.com;', 'server_name localhost;');
  swap('/etc/letsencrypt/live/gateway.example.com/fullchain.pem', cert.fullchain);
  swap('/etc/letsencrypt/live/gateway.example.com/privkey.pem', cert.key);
  swap('server 10.0.0.11:8335', `server 127.0.0.1:${upstreams[0]}`);
  swap('server 10.0.0.12:8335', `server 127.0.0.1:${upstreams[1]}`);
  return conf;
}

/// Start nginx with its prefix in `dir`: the page and the package over https on
/// `pagePort`, and, given `fleet`, the deployed gateway configuration. Resolves once it
/// answers; `stop()` stops it.
async function nginx(dir, { pagePort, cert, fleet }) {
  mkdirSync(join(dir, 'site'), { recursive: true });
  mkdirSync(join(dir, 'temp'), { recursive: true });
  writeFileSync(join(dir, 'site', 'index.html'), PAGE);
  writeFileSync(join(dir, 'site', 'favicon.ico'), '');
  if (fleet) writeFileSync(join(dir, 'lightwire-gateway.conf'), deployedConf({ ...fleet, cert }));
  const temp = (name) => `${name}_temp_path ${join(dir, 'temp', name)};`;
  const conf = `
${userInfo().uid === 0 ? 'user root;' : ''}
daemon off;
worker_processes 1;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'error.log')} warn;
events { worker_connections 1024; }
http {
  include /etc/nginx/mime.types;
  access_log ${join(dir, 'access.log')};
  ${['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map(temp).join('\n  ')}
  server {
    listen 127.0.0.1:${pagePort} ssl;
    server_name localhost;
    ssl_certificate ${cert.fullchain};
    ssl_certificate_key ${cert.key};
    root ${join(dir, 'site')};
    location /pkg/ { alias ${join(root, 'pkg')}/; }
  }
  ${fleet ? `include ${join(dir, 'lightwire-gateway.conf')};` : ''}
}`;
  writeFileSync(join(dir, 'nginx.conf'), conf);
  execFileSync(NGINX, ['-t', '-q', '-p', dir, '-e', join(dir, 'error.log'), '-c', join(dir, 'nginx.conf')], { stdio: 'inherit' });
  const proc = spawn(NGINX, ['-p', dir, '-e', join(dir, 'error.log'), '-c', join(dir, 'nginx.conf')], { stdio: 'inherit' });
  running.add(proc);
  proc.on('exit', () => running.delete(proc));
  for (let i = 0; ; i += 1) {
    try {
      execFileSync('openssl', ['s_client', '-connect', `127.0.0.1:${pagePort}`, '-brief'], { input: '', stdio: ['pipe', 'ignore', 'ignore'] });
      break;
    } catch {
      assert(i < 100, `nginx did not start: ${readFileSync(join(dir, 'error.log'), 'utf8')}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return { stop: () => terminate(proc), errors: () => readFileSync(join(dir, 'error.log'), 'utf8') };
}

async function openPage(url) {
  const page = await browser.newPage();
  page.onError((message) => log(`  ${message}`));
  await page.goto(url);
  await page.waitForFunction(() => document.title === 'ready');
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
  const front = await nginx(join(work, 'nginx-fleet'), { pagePort, cert, fleet: { port: gwPort, upstreams: [a.port, b.port] } });
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
  const front = await nginx(join(work, 'nginx-native'), { pagePort, cert });
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
    const spki = pem && createHash('sha256').update(new X509Certificate(pem).publicKey.export({ type: 'spki', format: 'der' })).digest('base64');
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
  let failed = 0;
  try {
    browser = await openEngine('chromium', join(work, 'profile'), {
      chromiumFlags: [`--ignore-certificate-errors-spki-list=${cert.spki},${next.spki}`],
    });
    for (const [name, f] of Object.entries(scenarios)) {
      if (only && only !== name) continue;
      log(`chromium: ${name}`);
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
    if (browser) await browser.close();
    // SIGTERM: nginx's master stops its workers on it (a SIGKILL would leave them serving).
    for (const p of [...running]) await terminate(p);
    rmSync(work, { recursive: true, force: true });
  }
  if (failed) {
    log(`${failed} scenario(s) failed`);
    process.exit(1);
  }
  log('all scenarios passed (chromium)');
}

await main();
