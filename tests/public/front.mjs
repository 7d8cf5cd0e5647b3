// What tests/public and its benchmark share: a certificate authority made with openssl,
// lightwire-gateway processes, and Debian's nginx running deploy/nginx/lightwire-gateway.conf
// with loopback addresses, ports and the test certificate put in place of its example ones.
// Every process started here is in `running` until it exits.

import { execFileSync, spawn } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, gatewayTip, startGateway, terminate } from '../browser.mjs';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const bin = (name) => join(root, 'target', 'release', name);
const NGINX = process.env.NGINX || '/usr/sbin/nginx';

/// The hard limit on open descriptors here (a process may raise its own to it, no further).
function hardLimit() {
  const out = execFileSync('bash', ['-c', 'ulimit -Hn']).toString().trim();
  return out === 'unlimited' ? 1 << 20 : Number(out);
}

/// Processes started here and still running.
export const running = new Set();

export function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}

/// The base64 SHA-256 of a PEM certificate's public key (what Chromium's
/// --ignore-certificate-errors-spki-list takes).
export function spkiOf(pem) {
  const spki = new X509Certificate(pem).publicKey.export({ type: 'spki', format: 'der' });
  return createHash('sha256').update(spki).digest('base64');
}

/// A certificate authority and a certificate for localhost and 127.0.0.1 signed by it,
/// made with openssl: `{ ca, cert, fullchain, key, spki }` (spki: the base64 SHA-256 of
/// the certificate's public key, what Chromium is told to trust).
export function authority(dir, name) {
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
  return { ca: f('ca.crt'), leaf: f('cert.pem'), fullchain: f('fullchain.pem'), key: f('key.pem'), spki: spkiOf(cert) };
}

/// Start lightwire-gateway with `argv` on 127.0.0.1; resolves once it listens.
export async function gateway(argv, { keyFile, log: level = 'info' } = {}) {
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
export function deployedConf({ port, upstreams, cert, swaps = [] }) {
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
  for (const [from, to] of swaps) swap(from, to);
  return conf;
}

/// Start nginx with its prefix in `dir`: `page` (HTML, as /) and the package over https on
/// `pagePort`, and, given `fleet` (deployedConf's arguments but the certificate), the
/// deployed gateway configuration, with `workers` processes of `connections` each (their
/// descriptors raised as far as the hard limit allows). Resolves once it answers:
/// `{ proc, stop(), errors() }`.
export async function nginx(dir, { pagePort, cert, fleet, page = '', connections = 1024, workers = 1 }) {
  mkdirSync(join(dir, 'site'), { recursive: true });
  mkdirSync(join(dir, 'temp'), { recursive: true });
  writeFileSync(join(dir, 'site', 'index.html'), page);
  writeFileSync(join(dir, 'site', 'favicon.ico'), '');
  if (fleet) writeFileSync(join(dir, 'lightwire-gateway.conf'), deployedConf({ ...fleet, cert }));
  const temp = (name) => `${name}_temp_path ${join(dir, 'temp', name)};`;
  const conf = `
${userInfo().uid === 0 ? 'user root;' : ''}
daemon off;
worker_processes ${workers};
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'error.log')} warn;
worker_rlimit_nofile ${Math.min(connections * 2, hardLimit())};
events { worker_connections ${connections}; }
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
  return { proc, stop: () => terminate(proc), errors: () => readFileSync(join(dir, 'error.log'), 'utf8') };
}

