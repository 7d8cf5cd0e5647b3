// btcd on regtest on 127.0.0.1, for the browser tests (tests/e2e, tests/soak): started with
// its own data directory, driven through btcctl or its JSON-RPC.

import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, terminate } from './browser.mjs';

/// A tool from `go install` (scripts/setup.sh): on PATH or in $(go env GOPATH)/bin.
export function goTool(name) {
  const dirs = (process.env.PATH ?? '').split(':');
  try {
    dirs.push(join(execFileSync('go', ['env', 'GOPATH']).toString().trim(), 'bin'));
  } catch {}
  const found = dirs.map((d) => join(d, name)).find((p) => existsSync(p));
  if (!found) throw new Error(`${name} not found: run scripts/setup.sh`);
  return found;
}

/// Start btcd (regtest, no TLS, RPC user `u` password `p`) under `dir`, mining to
/// `miningAddress`, with `extra` flags; resolves once its RPC answers, to
/// `{ proc, p2p, rpc, ctl(...args), call(method, ...params), logAbout(what), stop() }`.
export async function startBtcd(dir, miningAddress, extra = []) {
  const [p2p, rpc] = [await freePort(), await freePort()];
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'btcd.conf'), '');
  writeFileSync(join(dir, 'btcctl.conf'), '');
  const proc = spawn(goTool('btcd'), [
    `--configfile=${join(dir, 'btcd.conf')}`, '--regtest', '--notls', '--rpcuser=u', '--rpcpass=p',
    `--datadir=${join(dir, 'data')}`, `--logdir=${join(dir, 'log')}`,
    `--listen=127.0.0.1:${p2p}`, `--rpclisten=127.0.0.1:${rpc}`, `--miningaddr=${miningAddress}`,
    ...extra,
  ], { stdio: 'ignore' });
  const ctl = (...args) => execFileSync(goTool('btcctl'), [
    `--configfile=${join(dir, 'btcctl.conf')}`, '--regtest', '--notls', '--rpcuser=u', '--rpcpass=p',
    `--rpcserver=127.0.0.1:${rpc}`, ...args,
  ], { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
  const auth = `Basic ${Buffer.from('u:p').toString('base64')}`;
  /// One JSON-RPC call (no process per call, for loops); rejects with btcd's error.
  const call = async (method, ...params) => {
    const res = await fetch(`http://127.0.0.1:${rpc}/`, {
      method: 'POST',
      headers: { authorization: auth, 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '1.0', id: 1, method, params }),
    });
    const body = await res.json();
    if (body.error) throw new Error(`btcd ${method}: ${JSON.stringify(body.error)}`);
    return body.result;
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      ctl('getblockcount');
      break;
    } catch (e) {
      if (Date.now() > deadline) {
        proc.kill('SIGKILL');
        throw new Error('btcd\'s RPC did not come up');
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  return {
    proc,
    p2p: `127.0.0.1:${p2p}`,
    rpc: `127.0.0.1:${rpc}`,
    ctl,
    call,
    /// The last lines of its log that mention `what` (for a failure's message).
    logAbout: (what) => {
      try {
        const text = readFileSync(join(dir, 'log', 'regtest', 'btcd.log'), 'utf8');
        return text.split('\n').filter((l) => l.includes(what)).slice(-5).join('\n');
      } catch (e) {
        return `(no log: ${e.message})`;
      }
    },
    stop: () => terminate(proc),
  };
}
