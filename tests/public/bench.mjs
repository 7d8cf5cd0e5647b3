// Benchmarks of a public gateway (its targets: benches/README.md, "A public gateway"),
// with the pieces tests/public runs: Debian's nginx with deploy/nginx/lightwire-gateway.conf
// in front of two gateways, a test certificate authority, and lightwire-load.
//
//   node tests/public/bench.mjs [--no-build] [--only idle|throughput|handshakes]
//                               [--full-headers]
//
//   idle        10,000 idle wss:// connections through nginx to two gateways: each
//               gateway's resident memory and heap per connection it holds, and nginx's
//   throughput  headers/s to 100 clients syncing the 925,000-header chain with compact
//               headers, as browsers do, through nginx with TLS, and direct over ws:// to
//               the same two gateways (50 each), three times each, alternated: the ratio,
//               and the CPU each party used
//   handshakes  one gateway serving wss:// itself: handshakes/s (TLS, the upgrade, BOLT 8,
//               init) from 4 tasks for 10 s, and its CPU share; the same over ws://
//
// nginx's caps per address are lifted for this (every load client is 127.0.0.1), as are
// the gateways'. Run it on an idle machine.

import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, terminate } from '../browser.mjs';
import { assert, authority, bin, gateway, nginx, root, running } from './front.mjs';

const args = process.argv.slice(2);
const only = args.includes('--only') ? args[args.indexOf('--only') + 1] : null;
const LIFTED = ['--max-per-address', '20000', '--max-new-per-second', '1000000'];
const log = (msg) => console.log(`[bench] ${msg}`);

const rssKb = (pid) => Number(/^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
const cpuTicks = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return Number(f[11]) + Number(f[12]);
};
const children = (pid) => {
  try {
    return execFileSync('pgrep', ['-P', String(pid)]).toString().trim().split('\n').map(Number);
  } catch {
    return [];
  }
};
async function metric(gw, name) {
  const text = await (await fetch(gw.metrics)).text();
  return Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1]);
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/// lightwire-load with `argv`, with the descriptors 10,000 connections need; resolves to
/// `{ proc, out() }` once a line matching `ready` is printed (or it exits).
function load(argv, ready) {
  const cmd = `ulimit -n $(ulimit -Hn); exec ${bin('lightwire-load')} ${argv.join(' ')}`;
  const proc = spawn('bash', ['-c', cmd], { stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(proc);
  let out = '';
  let err = '';
  proc.stdout.on('data', (d) => { out += d; });
  proc.stderr.on('data', (d) => { err += d; });
  return new Promise((resolve, reject) => {
    let used = 0;
    const sample = setInterval(() => {
      try {
        used = cpuTicks(proc.pid) / 100;
      } catch {
        // exited
      }
    }, 50);
    const done = { proc, out: () => out, err: () => err, cpu: () => used };
    const check = () => ready.test(out) && resolve(done);
    proc.stdout.on('data', check);
    proc.on('exit', (code) => {
      clearInterval(sample);
      running.delete(proc);
      if (code === 0 && ready.test(out)) resolve(done);
      else reject(new Error(`lightwire-load exited (${code}): ${out}${err}`));
    });
  });
}

async function fleet(work, cert) {
  const keyFile = join(work, 'fleet.key');
  // nginx connects to the gateways from 127.0.0.3, the only address they trust as a proxy,
  // so that the direct runs (from 127.0.0.1) are clients of their own.
  const source = ['--generate', '925000', '--trusted-proxy', '127.0.0.3', ...LIFTED];
  const a = await gateway(source, { keyFile, log: 'warn' });
  const b = await gateway(source, { keyFile, log: 'warn' });
  const [pagePort, port] = [await freePort(), await freePort()];
  const front = await nginx(join(work, 'nginx'), {
    pagePort,
    cert,
    // Each proxied client holds two descriptors in nginx; two workers, each under the hard
    // limit (20,000 on the machine measured), the kernel spreading clients between them.
    connections: 16384,
    workers: 2,
    fleet: {
      port,
      upstreams: [a.port, b.port],
      swaps: [
        ['limit_conn lightwire_conn 64;', 'limit_conn lightwire_conn 60000;'],
        ['rate=20r/s', 'rate=100000r/s'],
        ['burst=20 nodelay', 'burst=100000 nodelay'],
        [`listen 127.0.0.1:${port} ssl;`, `listen 127.0.0.1:${port} ssl reuseport;`],
        ['proxy_pass http://lightwire_gateways;', 'proxy_pass http://lightwire_gateways;\n        proxy_bind 127.0.0.3;'],
      ],
    },
  });
  const id = a.connect.split('#')[1];
  const tls = ['--tls-ca', cert.ca, '--tls-name', 'localhost'];
  return { a, b, front, id, wss: [`wss://127.0.0.1:${port}/#${id}`, ...tls] };
}

async function idle(work, cert) {
  const { a, b, front, wss } = await fleet(work, cert);
  try {
    const nginxPids = () => [front.proc.pid, ...children(front.proc.pid)];
    const base = {
      a: rssKb(a.proc.pid), b: rssKb(b.proc.pid),
      ha: await metric(a, 'lightwire_allocated_bytes_live'), hb: await metric(b, 'lightwire_allocated_bytes_live'),
      nginx: nginxPids().reduce((s, p) => s + rssKb(p), 0),
    };
    const n = 10_000;
    const t0 = Date.now();
    const l = await load(['--connect', ...wss, '--network', 'regtest', '--clients', String(n), '--idle', '600'], /^idle$/m);
    log(`  ${l.out().trim().split('\n')[0]} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    for (const line of l.err().trim().split('\n').filter(Boolean).slice(0, 5)) log(`    ${line}`);
    for (const line of front.errors().trim().split('\n').filter(Boolean).slice(0, 5)) log(`    nginx: ${line}`);
    const connected = Number(/connected (\d+) of/.exec(l.out())[1]);
    await new Promise((r) => setTimeout(r, 2000));
    const rows = [];
    for (const [name, gw, rss0, heap0] of [['a', a, base.a, base.ha], ['b', b, base.b, base.hb]]) {
      const open = await metric(gw, 'lightwire_connections_open');
      const rss = rssKb(gw.proc.pid) - rss0;
      const heap = (await metric(gw, 'lightwire_allocated_bytes_live')) - heap0;
      rows.push({ gateway: name, open, rssKbPerConn: (rss / open).toFixed(2), heapKbPerConn: (heap / 1024 / open).toFixed(2) });
    }
    const nginxRss = nginxPids().reduce((s, p) => s + rssKb(p), 0) - base.nginx;
    const figures = { connections: connected, asked: n, gateways: rows, nginxKbPerConn: (nginxRss / connected).toFixed(2) };
    log(`  ${JSON.stringify(figures)}`);
    await terminate(l.proc);
    return figures;
  } finally {
    await front.stop();
    await a.stop();
    await b.stop();
  }
}

const rate = (out) => Number(/= (\d+) headers\/s aggregate/.exec(out)[1]);

async function throughput(work, cert) {
  const { a, b, front, id, wss } = await fleet(work, cert);
  try {
    // As browsers sync: offering headers_compact (39 bytes a header); with --full-headers,
    // 80-byte headers (twice the bytes through TLS, and far less work for the client).
    const sync = ['--network', 'regtest', ...(args.includes('--full-headers') ? [] : ['--compact'])];
    const through = [];
    const direct = [];
    // CPU seconds of each party during the runs through nginx: the gateways, nginx, and
    // the load client (which decrypts TLS here, as a browser would on its own machine).
    const cpu = { gateways: 0, nginx: 0, client: 0, wall: 0 };
    const directCpu = { gateways: 0, client: 0, wall: 0 };
    const nginxPids = () => [front.proc.pid, ...children(front.proc.pid)];
    const ticks = (pids) => pids.reduce((sum, p) => sum + cpuTicks(p), 0);
    for (let run = 1; run <= 3; run += 1) {
      const before = { g: ticks([a.proc.pid, b.proc.pid]), n: ticks(nginxPids()), t: Date.now() };
      const t = await load(['--connect', ...wss, ...sync, '--clients', '100'], /^synced.*aggregate$/m);
      through.push(rate(t.out()));
      cpu.gateways += (ticks([a.proc.pid, b.proc.pid]) - before.g) / 100;
      cpu.nginx += (ticks(nginxPids()) - before.n) / 100;
      cpu.client += t.cpu();
      cpu.wall += (Date.now() - before.t) / 1000;
      // Both gateways at once, 50 clients each, as nginx spreads them.
      const g0 = ticks([a.proc.pid, b.proc.pid]);
      const t0 = Date.now();
      const [da, db] = await Promise.all([a, b].map((gw) =>
        load(['--connect', `ws://127.0.0.1:${gw.port}#${id}`, ...sync, '--clients', '50'], /^synced.*aggregate$/m)));
      direct.push(rate(da.out()) + rate(db.out()));
      directCpu.gateways += (ticks([a.proc.pid, b.proc.pid]) - g0) / 100;
      directCpu.client += da.cpu() + db.cpu();
      directCpu.wall += (Date.now() - t0) / 1000;
      log(`  run ${run}: through nginx with TLS ${through.at(-1)} headers/s, direct ws:// ${direct.at(-1)}`);
    }
    const figures = {
      through: { min: Math.min(...through), median: median(through) },
      direct: { min: Math.min(...direct), median: median(direct) },
      ratioOfMedians: (median(through) / median(direct)).toFixed(2),
      throughCpuCores: Object.fromEntries(['gateways', 'nginx', 'client'].map((k) => [k, (cpu[k] / cpu.wall).toFixed(2)])),
      directCpuCores: Object.fromEntries(['gateways', 'client'].map((k) => [k, (directCpu[k] / directCpu.wall).toFixed(2)])),
    };
    // Serving cost: CPU seconds of the serving side (gateways, and nginx) per million
    // headers, which is what a separate client machine would leave to compare.
    const perMillion = (cores, rate) => ((cores * 1e6) / rate).toFixed(3);
    figures.servingCpuSecondsPerMillion = {
      through: perMillion((cpu.gateways + cpu.nginx) / cpu.wall, median(through)),
      direct: perMillion(directCpu.gateways / directCpu.wall, median(direct)),
    };
    log(`  ${JSON.stringify(figures)}`);
    return figures;
  } finally {
    await front.stop();
    await a.stop();
    await b.stop();
  }
}

async function handshakes(work, cert) {
  const results = {};
  for (const kind of ['wss', 'ws']) {
    const tlsFlags = kind === 'wss' ? ['--tls-cert', cert.fullchain, '--tls-key', cert.key] : [];
    const gw = await gateway(['--generate', '1000', ...LIFTED, ...tlsFlags], { keyFile: join(work, `hs-${kind}.key`), log: 'warn' });
    try {
      const clientTls = kind === 'wss' ? ['--tls-ca', cert.ca, '--tls-name', 'localhost'] : [];
      const rows = [];
      for (let run = 1; run <= 3; run += 1) {
        const ticks0 = cpuTicks(gw.proc.pid);
        const t0 = Date.now();
        const l = await load(['--connect', gw.connect, ...clientTls, '--network', 'regtest', '--clients', '4', '--handshakes', '10'], /^handshakes.*\/s$/m);
        const wall = (Date.now() - t0) / 1000;
        const cpu = (cpuTicks(gw.proc.pid) - ticks0) / 100 / wall;
        const m = /handshakes (\d+) in ([\d.]+) s \((\d+) failed\) = (\d+)/.exec(l.out());
        assert(m && m[3] === '0', `failed handshakes: ${l.out()}`);
        rows.push({ perSecond: Number(m[4]), gatewayCpuCores: Number(cpu.toFixed(2)) });
        log(`  ${kind} run ${run}: ${m[4]} handshakes/s, gateway CPU ${(cpu * 100).toFixed(0)} % of one core`);
      }
      const per = rows.map((r) => r.perSecond);
      results[kind] = { min: Math.min(...per), median: median(per), runs: rows };
    } finally {
      await gw.stop();
    }
  }
  log(`  ${JSON.stringify(results)}`);
  return results;
}

async function main() {
  if (!args.includes('--no-build')) {
    execFileSync('cargo', ['build', '--release', '-p', 'lightwire-gateway', '-p', 'lightwire-load', '--bins'], { stdio: 'inherit', cwd: root });
  }
  log(`load: ${readFileSync('/proc/loadavg', 'utf8').trim()}`);
  const work = mkdtempSync(join(tmpdir(), 'lightwire-public-bench-'));
  const cert = authority(join(work, 'ca'), 'bench');
  const all = {};
  try {
    for (const [name, f] of Object.entries({ idle, throughput, handshakes })) {
      if (only && only !== name) continue;
      log(name);
      all[name] = await f(work, cert);
    }
  } finally {
    for (const p of [...running]) await terminate(p);
    rmSync(work, { recursive: true, force: true });
  }
  console.log(JSON.stringify(all));
}

await main();
