// Shared by the browser tests (tests/store-reload, tests/e2e): Chromium started here on a
// profile on disk and driven over CDP with playwright-core (which must not download a
// browser of its own), and a static file server on 127.0.0.1.

import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { createServer as createTcpServer } from 'node:net';
import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

const TYPES = {
  '.html': 'text/html',
  '.js': 'text/javascript',
  '.mjs': 'text/javascript',
  '.wasm': 'application/wasm',
  '.css': 'text/css',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
};

/// Serve `pages` (path -> HTML) and, under each prefix of `dirs` (prefix -> directory), its
/// files; resolves to the listening server. `handle(req, res, path)`, when given, sees each
/// request first and returns true when it answered it.
export function serve(pages, dirs, handle) {
  const server = createServer((req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    if (handle?.(req, res, path)) return;
    try {
      if (pages[path] !== undefined) {
        res.writeHead(200, { 'content-type': 'text/html' }).end(pages[path]);
        return;
      }
      for (const [prefix, dir] of Object.entries(dirs)) {
        if (path.startsWith(prefix) && !path.includes('..')) {
          const body = readFileSync(`${dir}/${path.slice(prefix.length)}`);
          res.writeHead(200, { 'content-type': TYPES[extname(path)] || 'application/octet-stream' });
          res.end(body);
          return;
        }
      }
      res.writeHead(404).end();
    } catch {
      res.writeHead(404).end();
    }
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

/// Start Chromium on `profile` (with `extra` flags) and connect to it over CDP:
/// `{proc, browser, page}`.
export async function launch(profile, extra = []) {
  const args = [
    '--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    '--remote-debugging-port=0', `--user-data-dir=${profile}`, ...extra, 'about:blank',
  ];
  // Its own process group, so that a kill takes its renderer and utility processes too.
  const proc = spawn(CHROMIUM, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  const endpoint = await new Promise((resolve, reject) => {
    let err = '';
    const timer = setTimeout(() => reject(new Error(`chromium did not start: ${err}`)), 30_000);
    proc.stderr.on('data', (d) => {
      err += d;
      const m = /DevTools listening on (ws:\/\/\S+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    proc.on('exit', (code) => reject(new Error(`chromium exited (${code}): ${err}`)));
  });
  proc.stderr.resume();
  const browser = await chromium.connectOverCDP(endpoint);
  const context = browser.contexts()[0];
  const page = context.pages()[0] || (await context.newPage());
  return { proc, browser, page };
}

/// SIGKILL a process started `detached` and every process in its group; resolves when the
/// main one exited.
export function kill(proc) {
  return new Promise((resolve) => {
    const group = () => {
      try {
        process.kill(-proc.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    };
    if (proc.exitCode !== null || proc.signalCode !== null) {
      group();
      return resolve();
    }
    proc.once('exit', () => {
      group();
      resolve();
    });
    group();
  });
}

/// A free TCP port on 127.0.0.1.
export async function freePort() {
  // Below the kernel's ephemeral range: a port the kernel hands out for `listen(0)` comes
  // from that range, where any outgoing connection may take it as its local end before the
  // server it was picked for binds it (seen: a gateway started by `npm start` seconds
  // later failed with EADDRINUSE). Ports below it are only taken by servers that ask.
  const first = ephemeralStart();
  for (let tries = 0; tries < 200; tries++) {
    const port = 10_000 + Math.floor(Math.random() * (first - 10_000));
    if (await canListen(port)) return port;
  }
  throw new Error(`no free port found between 10000 and ${first}`);
}

/// The first port of the kernel's ephemeral range (32768 where it cannot be read).
function ephemeralStart() {
  try {
    const first = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(first) && first > 11_000 ? first : 32_768;
  } catch {
    return 32_768;
  }
}

/// Whether a server can listen on 127.0.0.1:`port` now.
function canListen(port) {
  return new Promise((resolve) => {
    const s = createTcpServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/// Start lightwire-gateway (the binary at `path`) with `argv`, which must include
/// `--metrics-listen` unless `metrics` is false (lightwire-hostile has none): `{proc,
/// ready}`, where `ready` resolves to `{connect, metrics}` (its connect string and /metrics
/// URL) once it listens.
export function startGateway(path, argv, { metrics = true } = {}) {
  const proc = spawn(path, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const ready = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the gateway did not start: ${err}`)), 120_000);
    const check = () => {
      const c = /connect (wss?:\/\/\S+)/.exec(out);
      const m = /metrics on (http:\/\/\S+)/.exec(err);
      if (c && (m || !metrics)) {
        clearTimeout(timer);
        resolve({ connect: c[1], metrics: m?.[1] });
      }
    };
    proc.stdout.on('data', (d) => {
      out += d;
      check();
    });
    proc.stderr.on('data', (d) => {
      err += d;
      check();
    });
    proc.on('error', (e) => reject(new Error(`the gateway did not start: ${e.message}`)));
    proc.on('exit', (code) => reject(new Error(`the gateway exited (${code}): ${err}`)));
  });
  // Its stderr so far: why it stopped, when it stops where a test did not stop it.
  return { proc, ready, stderr: () => err };
}

/// A gateway's served tip from its /metrics: `{height, hash}` (display hex). `read` fetches
/// the page's text (a caller's, to say more when it fails).
export async function gatewayTip(metricsUrl, read = async (url) => (await fetch(url)).text()) {
  const text = await read(metricsUrl);
  return {
    height: Number(/^lightwire_tip_height (\d+)$/m.exec(text)?.[1]),
    hash: /lightwire_tip_info\{hash="([0-9a-f]+)"\}/.exec(text)?.[1],
  };
}

/// SIGTERM a process (SIGKILL if it is still there after 5 s); resolves once it exited.
export function terminate(proc) {
  return new Promise((resolve) => {
    if (proc.pid === undefined || proc.exitCode !== null || proc.signalCode !== null) return resolve();
    const timer = setTimeout(() => proc.kill('SIGKILL'), 5_000);
    proc.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    proc.kill('SIGTERM');
  });
}
