// The silent-payment panel: a receiver's keys in (`client.watchSilentPayments()`), its
// address and labels' addresses out; then the scan's progress and throughput (tweaks a
// second, from `metrics().silentScan` sampled once a second), the workers checking its
// blocks, and each output found (`silentPayment` events). The scan key stays in this tab:
// it goes to the engine's worker and its scan workers, and is not saved by the page.
import type { LightwireClient, SilentPaymentFound } from 'lightwire';
import { count, explain } from './format';
import { $, log } from './render';

const ui = {
  form: $<HTMLFormElement>('silent-form'),
  scanKey: $<HTMLInputElement>('silent-scan-key'),
  spend: $<HTMLInputElement>('silent-spend'),
  labels: $<HTMLInputElement>('silent-labels'),
  from: $<HTMLInputElement>('silent-from'),
  start: $<HTMLButtonElement>('silent-start'),
  error: $('silent-error'),
  address: $('silent-address'),
  scanned: $('silent-scanned'),
  rate: $('silent-rate'),
  workers: $('silent-workers'),
  found: $<HTMLTableSectionElement>('silent-found'),
};

let client: LightwireClient | null = null;
let off: (() => void)[] = [];
let timer: ReturnType<typeof setInterval> | undefined;
/** The last sample of the scan's tweaks, for the rate. */
let last: { at: number; tweaks: number } | null = null;

/** The form's keys and options, or a sentence saying what is wrong. */
export function parseReceiver(scanKey: string, spend: string, labels: string, from: string):
  | { scanKey: string; spendKey?: string; address?: string; labels: number[]; fromHeight: number }
  | string {
  const key = scanKey.trim();
  if (!/^[0-9a-fA-F]{64}$/.test(key)) return 'The scan key is 64 hex characters (a private key).';
  const s = spend.trim();
  const keys = /^(sp|tsp|sprt)1/i.test(s)
    ? { address: s }
    : /^0[23][0-9a-fA-F]{64}$/.test(s)
      ? { spendKey: s }
      : null;
  if (!keys) return 'Give the spend public key (66 hex characters) or the receiver\'s sp1… address.';
  const list = labels.split(/[\s,]+/).filter(Boolean).map(Number);
  if (list.some((l) => !Number.isInteger(l) || l < 1)) return 'Labels are whole numbers from 1 (0 is the change label, always looked for).';
  const height = Number(from || 0);
  if (!Number.isInteger(height) || height < 0) return 'The start height is a whole number, 0 or more.';
  return { scanKey: key, ...keys, labels: list, fromHeight: height };
}

function showError(text: string | null): void {
  ui.error.hidden = !text;
  ui.error.textContent = text ?? '';
}

function foundRow(e: SilentPaymentFound): HTMLTableRowElement {
  const tr = document.createElement('tr');
  const where = e.height === null ? 'unconfirmed' : count(e.height);
  for (const text of [where, `${e.txid.slice(0, 16)}…:${e.vout}`, e.label === null ? '–' : String(e.label)]) {
    const td = document.createElement('td');
    td.textContent = text;
    tr.append(td);
  }
  tr.title = `${e.txid}:${e.vout}, output key ${e.outputKey}`;
  tr.dataset.height = e.height === null ? 'unconfirmed' : String(e.height);
  return tr;
}

/** The scan's figures from the client's metrics (once a second while it scans). */
async function sampleScan(): Promise<void> {
  const c = client;
  if (!c) return;
  let s;
  try {
    s = (await c.metrics()).silentScan;
  } catch {
    return;
  }
  if (!s) return;
  const tip = (await c.tip().catch(() => null))?.height ?? null;
  ui.scanned.textContent = s.height === null
    ? `from ${count(s.fromHeight)}: not yet`
    : `${count(s.height)}${tip === null ? '' : ` of ${count(tip)}`} (from ${count(s.fromHeight)}), ${count(s.tweaks)} tweaks`;
  const now = performance.now();
  if (last && now > last.at) ui.rate.textContent = `${count(Math.round(((s.tweaks - last.tweaks) * 1000) / (now - last.at)))} tweaks/s`;
  last = { at: now, tweaks: s.tweaks };
  ui.workers.textContent = s.workers === 0 ? 'the engine\'s worker' : count(s.workers);
  if (s.workerFailures.length) ui.workers.title = s.workerFailures.join('\n');
}

/** Follow `c` (null: none). */
export function attach(c: LightwireClient | null): void {
  off.forEach((f) => f());
  off = [];
  if (timer !== undefined) clearInterval(timer);
  timer = undefined;
  client = c;
  ui.start.disabled = !c;
  if (!c) return;
  off = [
    c.on('silentPayment', (e) => {
      const where = e.height === null ? 'unconfirmed, in a gateway\'s mempool' : `in block ${count(e.height)}`;
      log('info', `Silent payment: ${e.txid.slice(0, 16)}…:${e.vout} ${where}${e.label === null ? '' : ` (label ${e.label})`}.`);
      ui.found.prepend(foundRow(e));
    }),
    c.on('silentStalled', (e) =>
      log('warning', `Silent payments: the gateways' tweaks of block ${count(e.height)} differ and none proved its list; the scan waits below it.`)),
  ];
}

ui.form.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  showError(null);
  const c = client;
  if (!c) return;
  const r = parseReceiver(ui.scanKey.value, ui.spend.value, ui.labels.value, ui.from.value);
  if (typeof r === 'string') return showError(r);
  try {
    const receiver = await c.watchSilentPayments(r);
    ui.address.textContent = [receiver.address, ...receiver.labels.map((l) => `label ${l.label}: ${l.address}`)].join('\n');
    ui.found.replaceChildren();
    log('info', `Receiving silent payments at ${receiver.address.slice(0, 20)}… from block ${count(r.fromHeight)}.`);
    last = null;
    if (timer === undefined) timer = setInterval(() => void sampleScan(), 1000);
    void sampleScan();
  } catch (e) {
    const err = e as Error;
    if (err.name !== 'Stopped') showError(explain(e));
  }
});
