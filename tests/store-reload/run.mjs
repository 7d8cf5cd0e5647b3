// Reload and crash in the middle of a sync, in a real Chromium with a real profile on disk:
// the IndexedDB store must come back at a whole commit, consistent, and the sync must resume.
//
//   node tests/store-reload/run.mjs          (builds the page's wasm with wasm-pack first)
//
// Chromium is started here (not by Playwright, which would want to download its own) with a
// user-data directory, and driven over CDP with playwright-core. Two scenarios:
//   reload: the page is reloaded right after a commit has started;
//   kill:   the browser process gets SIGKILL right after a commit has started, and is
//           started again on the same profile.
// (A quota scenario is not here: CDP's Storage.overrideQuotaForOrigin is accepted but has
// no effect in Chromium 156, and this machine cannot give a profile a small filesystem.)
// After each, the page's `inspect` checks the store (see src/lib.rs), then `sync` resumes
// from the stored tip to the end and `inspect` checks again.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { serve as serveFiles, launch, kill as stop } from '../browser.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const pkg = join(tmpdir(), 'lightwire-store-reload-pkg');
const COUNT = 200_000;
const BATCH = 20_000;
/// Interrupt once this many commits have started (the earlier ones have completed).
const INTERRUPT_AT = 4;

function log(msg) {
  console.log(`[store-reload] ${msg}`);
}

function build() {
  log('wasm-pack build --target web --release');
  execFileSync(
    'wasm-pack',
    ['build', '--target', 'web', '--release', '--no-pack', '--out-dir', pkg, here],
    { stdio: 'inherit' },
  );
}

const PAGE = `<!doctype html><meta charset="utf-8"><title>store reload</title>
<script type="module">
  import init, { sync, inspect } from './pkg/lightwire_store_reload.js';
  await init();
  window.lw = { sync, inspect };
  document.title = 'ready';
</script>`;

function serve() {
  return serveFiles({ '/': PAGE }, { '/pkg/': pkg });
}

async function open(page, url) {
  await page.goto(url);
  await page.waitForFunction(() => document.title === 'ready');
}

/// Start a sync in the page, and resolve once the `n`-th commit has started. The page holds
/// after that commit (see `sync` in src/lib.rs), so the store can only be at the commit
/// before it or at it when the interruption lands.
function syncUntilCommitStarts(page, name, n) {
  return new Promise((resolve, reject) => {
    let started = 0;
    const onConsole = (msg) => {
      const text = msg.text();
      if (text.startsWith('commit-start ')) {
        started += 1;
        if (started === n) {
          page.off('console', onConsole);
          resolve(Number(text.split(' ')[1]));
        }
      }
    };
    page.on('console', onConsole);
    page
      .evaluate(
        ([name, count, batch, hold]) => window.lw.sync(name, count, batch, hold),
        [name, COUNT, BATCH, n * BATCH],
      )
      .then(() => reject(new Error('sync finished before it could be interrupted')))
      .catch(() => {}); // the page goes away under it
  });
}

async function inspect(page, name) {
  return page.evaluate(
    ([name, count, batch]) => window.lw.inspect(name, count, batch),
    [name, COUNT, BATCH],
  );
}

async function resumeAndCheck(page, name, interruptedAt) {
  const tip = await inspect(page, name);
  const committedBefore = (INTERRUPT_AT - 1) * BATCH;
  if (tip % BATCH !== 0 || tip < committedBefore || tip > interruptedAt) {
    throw new Error(`store at ${tip} after an interruption at the commit to ${interruptedAt}`);
  }
  const landed = tip === interruptedAt ? 'after it completed' : 'while it was in flight';
  log(`  after the interruption: the store is at ${tip} (a whole commit; ` +
    `${committedBefore} had completed, the one to ${interruptedAt} was interrupted ${landed}), consistent`);
  await finish(page, name, tip);
}

async function finish(page, name, tip) {
  const end = await page.evaluate(
    ([name, count, batch]) => window.lw.sync(name, count, batch, 0),
    [name, COUNT, BATCH],
  );
  const checked = await inspect(page, name);
  if (end !== COUNT || checked !== COUNT) {
    throw new Error(`resumed sync ended at ${end}, inspect says ${checked}`);
  }
  log(`  resumed from ${tip} to ${COUNT}, consistent`);
}

async function main() {
  if (!process.argv.includes('--no-build')) build();
  const server = await serve();
  const url = `http://127.0.0.1:${server.address().port}/`;
  const profile = mkdtempSync(join(tmpdir(), 'lightwire-store-reload-'));
  let chrome;
  try {
    chrome = await launch(profile);

    log(`reload: sync ${COUNT} headers in commits of ${BATCH}, reload during commit ${INTERRUPT_AT}`);
    await open(chrome.page, url);
    let at = await syncUntilCommitStarts(chrome.page, 'reload', INTERRUPT_AT);
    await open(chrome.page, url);
    await resumeAndCheck(chrome.page, 'reload', at);

    log(`kill: the same, with SIGKILL to the browser during commit ${INTERRUPT_AT}`);
    await open(chrome.page, url);
    at = await syncUntilCommitStarts(chrome.page, 'kill', INTERRUPT_AT);
    await stop(chrome.proc);
    chrome = await launch(profile);
    await open(chrome.page, url);
    await resumeAndCheck(chrome.page, 'kill', at);

    log('passed');
  } finally {
    if (chrome) {
      await chrome.browser.close().catch(() => {});
      await stop(chrome.proc);
    }
    server.close();
    // Children that outlive the main process can still be closing files for a moment.
    rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  }
}

main().catch((e) => {
  console.error(`[store-reload] FAILED: ${e.stack || e}`);
  process.exit(1);
});
