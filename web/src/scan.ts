// The scan panel: scripts and a start height in, `client.scan()` started, its progress
// (height, filters/s and bytes/s charted from the `scan` events) and the blocks that
// matched (withdrawn again on a reorg) drawn as the events come.
import type { LightwireClient, ScanMatch, ScanProgress, ScanWithdrawn } from 'lightwire';
import { LiveChart } from './charts';
import { bytes, count, explain, short } from './format';
import { readForm } from './forms';
import { $, log } from './render';

const ORANGE = '#f7931a';

const ui = {
  form: $<HTMLFormElement>('scan-form'),
  scripts: $<HTMLTextAreaElement>('scan-scripts'),
  from: $<HTMLInputElement>('scan-from'),
  start: $<HTMLButtonElement>('scan-start'),
  error: $('scan-error'),
  height: $('scan-height'),
  target: $('scan-target'),
  filters: $('scan-filters'),
  count: $('scan-count'),
  matches: $('scan-matches'),
};

const charts = {
  filters: new LiveChart($('chart-filters'), [
    { label: 'filters', color: ORANGE, axis: 0, format: (v) => `${short(v)}/s` },
  ]),
  bytes: new LiveChart($('chart-filter-bytes'), [
    { label: 'bytes', color: ORANGE, axis: 0, format: (v) => `${bytes(v)}/s`, floor: 1000 },
  ]),
};

let client: LightwireClient | null = null;
let off: (() => void)[] = [];

/** The output scripts `text` lists: hex, apart by lines, spaces or commas. */
export function parseScripts(text: string): string[] | string {
  const lines = text
    .split(/[\s,]+/)
    .map((l) => l.trim().toLowerCase())
    .filter(Boolean);
  if (lines.length === 0) return 'Enter at least one output script, in hex.';
  const bad = lines.find((l) => !/^([0-9a-f]{2})+$/.test(l));
  return bad ? `"${bad.slice(0, 20)}" is not a script in hex.` : lines;
}

function showError(text: string | null): void {
  ui.error.hidden = !text;
  ui.error.textContent = text ?? '';
}

function matchItem(height: number, hash: string): HTMLLIElement {
  const li = document.createElement('li');
  li.dataset.height = String(height);
  li.textContent = `${count(height)}  ${hash}`;
  return li;
}

function progressed(e: ScanProgress): void {
  ui.height.textContent = count(e.height);
  ui.target.textContent = e.targetHeight === null ? '–' : count(e.targetHeight);
  ui.filters.textContent = count(e.filters);
  ui.count.textContent = count(e.matches);
  const t = Date.now() / 1000;
  charts.filters.push(t, [e.filtersPerSecond]);
  charts.bytes.push(t, [e.bytesPerSecond]);
}

function matched(e: ScanMatch): void {
  // Once per block: the wallet's scan (the client runs one scan at a time) may match a
  // block this list shows already.
  if (ui.matches.querySelector(`li[data-height="${e.height}"]`)) return;
  ui.matches.append(matchItem(e.height, e.blockHash));
  ui.count.textContent = count(ui.matches.children.length);
  log('info', `Block ${count(e.height)} matches a watched script.`);
}

function withdrawn(e: ScanWithdrawn): void {
  ui.matches.querySelector(`li[data-height="${e.height}"]`)?.remove();
  ui.count.textContent = count(ui.matches.children.length);
  log('reorg', `Block ${count(e.height)} was replaced by a reorg: its match is withdrawn.`);
}

/** The client the panel scans with (null when stopped). */
export function attach(c: LightwireClient | null): void {
  off.forEach((f) => f());
  off = [];
  client = c;
  ui.start.disabled = !c;
  if (!c) return;
  off = [c.on('scan', progressed), c.on('scanMatch', matched), c.on('scanWithdrawn', withdrawn)];
}

export function drawScanCharts(): void {
  charts.filters.draw();
  charts.bytes.draw();
}

ui.form.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  showError(null);
  const c = client;
  if (!c) return;
  const form = readForm(ui.scripts, parseScripts, ui.from, showError);
  if (!form) return;
  const { items: scripts, from } = form;
  ui.matches.replaceChildren();
  ui.count.textContent = '0';
  ui.filters.textContent = '0';
  log('info', `Scanning from block ${count(from)} for ${count(scripts.length)} script(s).`);
  try {
    const result = await c.scan({ scripts, fromHeight: from });
    ui.matches.replaceChildren(...result.matches.map((m) => matchItem(m.height, m.blockHash)));
    ui.count.textContent = count(result.matches.length);
    log('info', `The scan reached the tip: ${count(result.matches.length)} block(s) matched.`);
  } catch (e) {
    const err = e as Error;
    if (err.name !== 'ScanReplaced' && err.name !== 'Stopped') showError(explain(e));
  }
});

/**
 * The output script the demo's generated chain pays block `height`'s coinbase to (P2WPKH of
 * the first 20 bytes of SHA-256("lightwire-synthetic" || height || branch 0), both 32-bit
 * little-endian): something to scan for.
 */
export async function demoScript(height: number): Promise<string> {
  const tag = new TextEncoder().encode('lightwire-synthetic');
  const data = new Uint8Array(tag.length + 8);
  data.set(tag);
  new DataView(data.buffer).setUint32(tag.length, height, true);
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', data));
  const hex = Array.from(digest.subarray(0, 20), (b) => b.toString(16).padStart(2, '0')).join('');
  return `0014${hex}`;
}

declare global {
  interface Window {
    /** The demo chain's coinbase script at a height (see {@link demoScript}). */
    demoScript(height: number): Promise<string>;
  }
}

window.demoScript = demoScript;
