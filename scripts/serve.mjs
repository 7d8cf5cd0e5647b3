// A static file server for the built dashboard (web/dist), used by scripts/start.sh:
//
//   node scripts/serve.mjs DIR [--host 127.0.0.1] [--port 8080] [--bulk BULKDIR]
//
// With --bulk, /bulk/... is served from BULKDIR (a `lightwire-gateway export --out`): the
// demo's mirror, on the page's own origin, with the caching deploy/nginx/bulk.conf gives
// (sealed files immutable, the manifest revalidated).
//
// Prints "serving http://HOST:PORT/" once it listens; exits 1 with a sentence if it cannot.

import { createReadStream, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { extname, join, normalize, resolve, sep } from 'node:path';

const args = process.argv.slice(2);
const option = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const dir = resolve(args.find((a, i) => !a.startsWith('--') && !args[i - 1]?.startsWith('--')) ?? 'web/dist');
const host = option('--host', '127.0.0.1');
const port = Number(option('--port', '8080'));
const bulk = args.includes('--bulk') ? resolve(option('--bulk')) : null;

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.wasm': 'application/wasm',
  '.json': 'application/json',
  '.bin': 'application/octet-stream',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
};

const server = createServer((req, res) => {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { allow: 'GET, HEAD' }).end();
    return;
  }
  let path;
  try {
    path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
  } catch {
    res.writeHead(400).end();
    return;
  }
  if (path.endsWith('/')) path += 'index.html';
  const mirror = bulk !== null && path.startsWith('/bulk/');
  const base = mirror ? bulk : dir;
  const file = normalize(join(base, mirror ? path.slice('/bulk'.length) : path));
  if (file !== base && !file.startsWith(base + sep)) {
    res.writeHead(403).end();
    return;
  }
  let size;
  try {
    const st = statSync(file);
    if (!st.isFile()) throw new Error('not a file');
    size = st.size;
  } catch {
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
    return;
  }
  res.writeHead(200, {
    'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
    'content-length': size,
    // Vite names assets by their hash; the page itself must be fetched again each time.
    'cache-control': path.startsWith('/assets/') || (mirror && file.endsWith('.bin'))
      ? 'public, max-age=31536000, immutable'
      : 'no-cache',
  });
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  createReadStream(file).pipe(res);
});

server.on('error', (e) => {
  const why = e.code === 'EADDRINUSE' ? `port ${port} on ${host} is already in use` : e.message;
  console.error(`serve: cannot serve ${dir}: ${why}`);
  process.exit(1);
});

server.listen(port, host, () => {
  const { port: bound } = server.address();
  console.log(`serving http://${host}:${bound}/ from ${dir}`);
});

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    server.close();
    server.closeAllConnections();
    process.exit(0);
  });
}
