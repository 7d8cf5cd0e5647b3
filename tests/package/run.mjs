// The npm package as an application gets it: `npm pack` of pkg/, installed (offline, from
// the npm cache) into a fresh Vite + TypeScript app written here, type-checked with tsc
// (the .d.ts), built with `vite build` (the worker and the wasm bundled from
// node_modules), then served and opened in each browser engine (tests/engines.mjs:
// Chromium, Firefox, WebKit) against a real lightwire-gateway, the chain's history from a
// mirror (`lightwire-gateway export` of the same chain, served beside the app): the app's
// stored tip must be the gateway's, and the mirror must have sent the bytes of its files.
// Then the same app under `vite` (the dev server), with the vite.config.ts pkg/README.md
// asks for, from the gateway alone.
//
//   node tests/package/run.mjs [--engines a,b]
//
// Needs pkg/ built (scripts/build-pkg.sh), target/release/lightwire-gateway, and vite and
// typescript installed in the repository's node_modules (their versions are used, and are
// in the npm cache because of that install).

import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { kill, serve, freePort, gatewayTip, startGateway, terminate } from '../browser.mjs';
import { available, openEngine } from '../engines.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const HEIGHT = 3000;
const GATEWAY = join(root, 'target', 'release', 'lightwire-gateway');
const argv = process.argv.slice(2);
const engines = argv.includes('--engines') ? argv[argv.indexOf('--engines') + 1].split(',') : available();

function log(msg) {
  console.log(`[package] ${msg}`);
}

function fail(msg) {
  throw new Error(msg);
}

/// Run a command; its stdout, or an Error carrying its output.
function run(cmd, args, cwd) {
  try {
    return execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    const out = `${e.stdout || ''}${e.stderr || ''}`.trim();
    throw new Error(`\`${cmd} ${args.join(' ')}\` failed (in ${cwd}):\n${out}`);
  }
}

const version = (name) => JSON.parse(readFileSync(join(root, 'node_modules', name, 'package.json'), 'utf8')).version;

// ---------------------------------------------------------------- the app's files

const MAIN_TS = `import { LightwireClient, type NewTip } from 'lightwire';

const params = new URLSearchParams(location.search);
const gateway = params.get('gw') ?? 'ws://127.0.0.1:8335#<node id hex>';
const client = await LightwireClient.open({ network: 'regtest', gateways: [gateway], storeName: 'app', bulk: params.getAll('bulk') });
let tip: NewTip | null = null;
let synced = false;
const show = () => {
  document.title = synced && tip ? \`synced \${tip.height}\` : 'syncing';
  document.body.textContent = tip ? \`\${tip.height} \${tip.hash}\` : 'nothing stored yet';
};
client.on('progress', async (e) => {
  synced = e.synced;
  // The bytes each mirror sent, for the test to read.
  const m = await client.metrics();
  document.documentElement.dataset.mirrorBytes = String(m.sources.filter((s) => s.kind === 'mirror').reduce((a, s) => a + s.bytes, 0));
  show();
});
client.on('tip', (e) => { tip = e; show(); });
`;

// Type-checked only (not imported by main.ts, so not bundled): the package's types are
// precise, not \`any\` - each @ts-expect-error fails tsc if its line type-checks.
const TYPES_TS = `import { LightwireClient, createClient, type ClientOptions, type LightwireEvent } from 'lightwire';

export async function typesOnly(client: LightwireClient): Promise<void> {
  const off: () => void = client.on('reorg', (e) => console.log(e.depth, e.oldTip.hash, e.newTip.height));
  off();
  client.on('gateway', (e) => console.log(e.state === 'backing-off', e.reason?.length));
  client.on('rejected', (e) => console.log(e.gateway, e.url, e.reason));
  client.on('warning', (e) => console.log(e.text));
  client.on('mirror', (e) => console.log(e.state === 'dropped', e.code, e.height, e.url));
  // @ts-expect-error: not a mirror's code
  client.on('mirror', (e) => e.code === 'gone');
  client.on('error', (e) => console.log(e.kind, e.message, e.fatal));
  // @ts-expect-error: a progress event has no hash
  client.on('progress', (e) => e.hash);
  // @ts-expect-error: no such event
  client.on('block', () => {});
  const tip = await client.tip();
  const height: number | undefined = tip?.height;
  const header = await client.headerAt(height ?? 0);
  const root: string | undefined = header?.merkleRoot;
  const proof = await client.verifyInclusion(root ?? '', [], 0, header?.hash ?? '');
  const confirmations: number = proof.confirmations;
  const m = await client.metrics();
  const synced: boolean = m.synced;
  const states: string[] = (await client.gateways()).map((g) => g.state);
  const storage = await LightwireClient.storage();
  console.log(confirmations, synced, states, storage.persisted);
  const options: ClientOptions = { network: 'signet', gateways: [], worker: false, persist: false, commitEvery: 1, requestSize: 1, progressIntervalMs: 1, bulk: ['/bulk/signet/'] };
  const bytes: number[] = (await client.metrics()).sources.map((s) => s.bytes);
  console.log(bytes);
  // @ts-expect-error: not a network
  const bad: ClientOptions = { network: 'moonnet', gateways: [] };
  console.log(bad);
  const other = await createClient(options);
  const kinds: LightwireEvent['type'][] = ['gateway', 'progress', 'tip', 'reorg', 'rejected', 'warning', 'error'];
  console.log(kinds);
  await other.stop();
  await LightwireClient.deleteStore('app');
}
`;

const INDEX_HTML = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <title>lightwire app</title>
  </head>
  <body>
    <script type="module" src="/src/main.ts"></script>
  </body>
</html>
`;

// The dev server's dependency pre-bundling moves the package's modules into
// node_modules/.vite/deps, where \`new URL('./worker.js', import.meta.url)\` no longer points
// at the worker (vitejs/vite#8427): pkg/README.md tells apps to exclude it.
const VITE_CONFIG = `import { defineConfig } from 'vite';

export default defineConfig({
  optimizeDeps: { exclude: ['lightwire'] },
});
`;

const TSCONFIG = {
  compilerOptions: {
    target: 'ES2022',
    module: 'ESNext',
    moduleResolution: 'bundler',
    lib: ['ES2022', 'DOM', 'DOM.Iterable'],
    types: [],
    strict: true,
    noEmit: true,
    isolatedModules: true,
    skipLibCheck: false,
  },
  include: ['src'],
};

function writeApp(app, viteVersion, tsVersion) {
  mkdirSync(join(app, 'src'), { recursive: true });
  const pkg = {
    name: 'lightwire-package-test-app',
    private: true,
    version: '0.0.0',
    type: 'module',
    devDependencies: { typescript: tsVersion, vite: viteVersion },
  };
  writeFileSync(join(app, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
  writeFileSync(join(app, 'tsconfig.json'), `${JSON.stringify(TSCONFIG, null, 2)}\n`);
  writeFileSync(join(app, 'index.html'), INDEX_HTML);
  writeFileSync(join(app, 'vite.config.ts'), VITE_CONFIG);
  writeFileSync(join(app, 'src', 'main.ts'), MAIN_TS);
  writeFileSync(join(app, 'src', 'types-check.ts'), TYPES_TS);
}

// ---------------------------------------------------------------- the gateway

/// Start lightwire-gateway on a free port; `ready` resolves once it listens.
function gateway(work, source) {
  return startGateway(GATEWAY, [
    '--listen', '127.0.0.1:0', '--key-file', join(work, 'key'),
    '--metrics-listen', '127.0.0.1:0', ...source,
  ]);
}

// ---------------------------------------------------------------- the browser

/// Open the app at `url` in a new page of `browser`; wait for \`synced HEIGHT\` and check the
/// tip it shows against the gateway's /metrics, and that its engine runs in the worker.
async function openApp(browser, url, metrics, workerPath, mirror = false) {
  const page = await browser.newPage();
  const errors = [];
  page.onError((message) => errors.push(`page error: ${message}`));
  try {
    await page.goto(url);
    try {
      await page.waitForFunction((t) => document.title === t, `synced ${HEIGHT}`, { timeout: 60_000 });
    } catch {
      const [title, body] = await page.evaluate(() => [document.title, document.body.textContent]).catch(() => ['?', '?']);
      fail(`the app did not reach "synced ${HEIGHT}" in 60 s in ${browser.name}: title "${title}", body "${body}"` +
        `${errors.length ? `\n  ${errors.join('\n  ')}` : ''}`);
    }
    const [height, hash] = (await page.evaluate(() => document.body.textContent)).split(' ');
    const { height: gwHeight, hash: gwHash } = await gatewayTip(metrics);
    if (Number(height) !== gwHeight || hash !== gwHash) {
      fail(`the app's stored tip ${height} ${hash} is not the gateway's ${gwHeight} ${gwHash}`);
    }
    const mirrorBytes = Number(await page.evaluate(() => document.documentElement.dataset.mirrorBytes));
    if (mirror && !(mirrorBytes > 0)) fail(`the app read nothing from the mirror (${mirrorBytes} bytes)`);
    // The engine runs in its Web Worker: the page loaded the worker's script (resource
    // timing lists it in every engine).
    const loaded = await page.evaluate(() => performance.getEntriesByType('resource').map((e) => e.name));
    if (!loaded.some((u) => u.includes(workerPath))) {
      fail(`the engine's worker (${workerPath}) was not loaded by the page; loaded: ${loaded.join(', ') || 'nothing'}`);
    }
    return { height, hash, mirrorBytes };
  } finally {
    await page.close();
  }
}

/// Start `vite` (the dev server) in `app` on `port`: `{proc, url, log, ready}`, `ready`
/// resolving once it serves.
function viteDev(app, port) {
  const args = ['--no-install', 'vite', '--host', '127.0.0.1', '--port', String(port), '--strictPort'];
  // Its own process group: npx, node and esbuild go together.
  const proc = spawn('npx', args, { cwd: app, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  proc.stdout.on('data', (d) => (out += d));
  proc.stderr.on('data', (d) => (out += d));
  const url = `http://127.0.0.1:${port}/`;
  const ready = (async () => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (proc.exitCode !== null) fail(`vite (dev) exited (${proc.exitCode}):\n${out}`);
      try {
        if ((await fetch(url)).ok) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) fail(`vite (dev) did not serve ${url} in 30 s:\n${out}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  })();
  return { proc, url, log: () => out, ready };
}

// ---------------------------------------------------------------- main

async function main() {
  const work = mkdtempSync(join(tmpdir(), 'lightwire-package-'));
  const app = join(work, 'app');
  let gw;
  let browser;
  let server;
  let dev;
  try {
    for (const f of [GATEWAY, join(root, 'pkg', 'dist', 'index.js'), join(root, 'pkg', 'wasm', 'lightwire_bg.wasm')]) {
      if (!existsSync(f)) fail(`${f} is missing: build the gateway (cargo build --release -p lightwire-gateway) and the package (scripts/build-pkg.sh) first`);
    }
    // 1. The tarball.
    const packed = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', work], join(root, 'pkg')));
    const tarball = join(work, packed[0].filename);
    const listed = run('tar', ['tzf', tarball], work).split('\n').filter(Boolean);
    const needed = [
      'dist/index.js', 'dist/index.d.ts', 'dist/worker.js',
      'wasm/lightwire_bg.wasm', 'wasm/lightwire.js', 'README.md',
      'LICENSE-MIT', 'LICENSE-APACHE', 'CHANGELOG.md',
    ];
    const missing = needed.filter((f) => !listed.includes(`package/${f}`));
    if (missing.length) fail(`the tarball lacks ${missing.join(', ')}; it holds ${listed.join(', ')}`);
    const size = statSync(tarball).size;
    log(`packed ${packed[0].filename}: ${(size / 1024).toFixed(1)} KiB (${size} bytes), ` +
      `${listed.length} files, unpacked ${(packed[0].unpackedSize / 1024).toFixed(1)} KiB; has ${needed.join(', ')}`);

    // 2. A fresh app, and the install from the tarball and the npm cache.
    const viteVersion = version('vite');
    const tsVersion = version('typescript');
    writeApp(app, viteVersion, tsVersion);
    const install = (mode) =>
      run('npm', ['install', mode, '--no-audit', '--no-fund', tarball, `vite@${viteVersion}`, `typescript@${tsVersion}`], app);
    try {
      install('--offline');
      log(`installed the tarball, vite@${viteVersion} and typescript@${tsVersion} with --offline (npm cache only)`);
    } catch (e) {
      if (!/ENOTCACHED/.test(e.message)) throw e;
      log(`NOTE: --offline failed (something is not in the npm cache); retrying with --prefer-offline, ` +
        `which may use the registry:\n${e.message.split('\n').slice(-6).join('\n')}`);
      install('--prefer-offline');
      log(`installed with --prefer-offline (NOT offline)`);
    }
    const installed = JSON.parse(readFileSync(join(app, 'node_modules', 'lightwire', 'package.json'), 'utf8'));
    log(`node_modules/lightwire is ${installed.name}@${installed.version} from the tarball`);

    // 3. Type-check and build.
    run('npx', ['--no-install', 'tsc', '--noEmit', '-p', '.'], app);
    log('tsc --noEmit passed (strict; the package\'s .d.ts and typed events)');
    const buildLog = run('npx', ['--no-install', 'vite', 'build'], app);
    const dist = join(app, 'dist');
    const assets = readdirSync(join(dist, 'assets'));
    const wasm = assets.filter((f) => f.endsWith('.wasm'));
    const workerChunk = assets.filter((f) => /^worker.*\.js$/.test(f));
    if (!wasm.length || !workerChunk.length) {
      fail(`vite build did not emit ${wasm.length ? '' : 'a .wasm asset '}${workerChunk.length ? '' : 'a worker chunk'}; ` +
        `dist/assets: ${assets.join(', ')}\n${buildLog}`);
    }
    // The worker must load the wasm it was bundled with.
    const workerCode = readFileSync(join(dist, 'assets', workerChunk[0]), 'utf8');
    if (!wasm.some((w) => workerCode.includes(w))) fail(`the worker chunk ${workerChunk[0]} does not refer to ${wasm.join(', ')}`);
    const mainChunk = assets.filter((f) => /^index.*\.js$/.test(f));
    if (!mainChunk.some((f) => readFileSync(join(dist, 'assets', f), 'utf8').includes(workerChunk[0]))) {
      fail(`no entry chunk refers to the worker chunk ${workerChunk[0]}`);
    }
    const sizes = assets.map((f) => `${f} ${(statSync(join(dist, 'assets', f)).size / 1024).toFixed(1)} KiB`);
    log(`vite build passed: dist/assets ${sizes.join(', ')}`);

    // 4. The app against a real gateway.
    gw = gateway(work, ['--generate', String(HEIGHT)]);
    const { connect, metrics } = await gw.ready;
    log(`gateway up: ${connect}`);
    // The mirror: the same chain exported, served beside the app (its own origin).
    run(GATEWAY, ['export', '--out', join(work, 'bulk'), '--generate', String(HEIGHT)], work);
    server = await serve({ '/': readFileSync(join(dist, 'index.html'), 'utf8') }, { '/bulk/': join(work, 'bulk'), '/': dist });
    const gwParam = `?gw=${encodeURIComponent(connect)}`;
    dev = viteDev(app, await freePort());
    await dev.ready;
    for (const engine of engines) {
      browser = await openEngine(engine, join(work, `profile-${engine}`));
      const built = await openApp(browser, `http://127.0.0.1:${server.address().port}/${gwParam}&bulk=/bulk/regtest/`,
        metrics, `/assets/${workerChunk[0]}`, true);
      log(`${engine}: the built app (engine in its Web Worker) stored tip ${built.height} ` +
        `${built.hash.slice(0, 16)}... = the gateway's /metrics; ${built.mirrorBytes} bytes from the mirror`);

      // 5. The same app under the dev server.
      try {
        const served = await openApp(browser, `${dev.url}${gwParam}`, metrics,
          '/node_modules/lightwire/dist/worker.js');
        log(`${engine}: vite (dev server, optimizeDeps.exclude ['lightwire']): stored tip ${served.height} = the gateway's`);
      } catch (e) {
        e.message += `\n  vite said:\n${dev.log()}`;
        throw e;
      }
      await browser.close();
      browser = undefined;
    }
  } finally {
    if (browser) await browser.close();
    if (dev) await kill(dev.proc);
    if (gw) await terminate(gw.proc);
    if (server) server.close();
    rmSync(work, { recursive: true, force: true });
  }
}

try {
  await main();
  log('passed');
} catch (e) {
  log(`FAILED: ${e.message}`);
  process.exit(1);
}
