// The wallet panel: addresses, descriptors or scripts in, `client.watch()` started, then
// the balance, the transactions (with confirmations) and the coins drawn as the
// `transaction` and `balance` events come; a send form that builds a PSBT for the user's
// signer (`client.createPsbt()`), a bump of an unconfirmed own payment (`client.bumpFee()`);
// and a signed transaction or finalized PSBT to broadcast. Labels (BIP329) on transactions
// and coins are edited in place, coins frozen and thawed, and the labels exported and
// imported as a file. The panel shows one wallet at a time: the default one (the client's
// own calls) or a named one (`client.wallet(name)`), picked in the switcher; a new name
// adds one, made by its first watch.
import type { Balance, LabelRecord, LightwireClient, TransactionEntry, Utxo, Wallet } from 'lightwire';
import { count, explain } from './format';
import { readForm } from './forms';
import { $, log } from './render';

const ui = {
  switcher: $<HTMLFormElement>('wallet-switch'),
  name: $<HTMLSelectElement>('wallet-name'),
  newName: $<HTMLInputElement>('wallet-new'),
  add: $<HTMLButtonElement>('wallet-add'),
  form: $<HTMLFormElement>('wallet-form'),
  items: $<HTMLTextAreaElement>('wallet-items'),
  from: $<HTMLInputElement>('wallet-from'),
  watch: $<HTMLButtonElement>('wallet-watch'),
  rescan: $<HTMLButtonElement>('wallet-rescan'),
  error: $('wallet-error'),
  confirmed: $('wallet-confirmed'),
  pending: $('wallet-pending'),
  immature: $('wallet-immature'),
  coins: $('wallet-coins'),
  unconfirmed: $('wallet-unconfirmed'),
  txs: $<HTMLTableSectionElement>('wallet-txs'),
  unconfirmedBox: $('wallet-unconfirmed-box'),
  unconfirmedTxs: $<HTMLTableSectionElement>('wallet-unconfirmed-txs'),
  psbtForm: $<HTMLFormElement>('psbt-form'),
  psbtAddress: $<HTMLInputElement>('psbt-address'),
  psbtAmount: $<HTMLInputElement>('psbt-amount'),
  psbtRate: $<HTMLInputElement>('psbt-rate'),
  psbtCreate: $<HTMLButtonElement>('psbt-create'),
  psbtEstimate: $<HTMLButtonElement>('psbt-estimate'),
  psbtRates: $('psbt-rates'),
  psbtError: $('psbt-error'),
  psbtBox: $('psbt-box'),
  psbtSummary: $('psbt-summary'),
  psbtOut: $<HTMLTextAreaElement>('psbt-out'),
  psbtCopy: $<HTMLButtonElement>('psbt-copy'),
  psbtCopied: $('psbt-copied'),
  coinBox: $('wallet-coin-box'),
  coinList: $<HTMLTableSectionElement>('wallet-coin-list'),
  labelsExport: $<HTMLButtonElement>('labels-export'),
  labelsImport: $<HTMLInputElement>('labels-import'),
  labelsResult: $('labels-result'),
  sendForm: $<HTMLFormElement>('broadcast-form'),
  raw: $<HTMLTextAreaElement>('broadcast-raw'),
  send: $<HTMLButtonElement>('broadcast-send'),
  result: $('broadcast-result'),
};

let client: LightwireClient | null = null;
let off: (() => void)[] = [];
/** The wallet shown: its name, or '' for the default one. */
let current = '';

/** The wallet calls of the wallet shown: the client's own for the default one. */
type WalletCalls = Pick<Wallet, 'watch' | 'rescan' | 'transactions' | 'utxos' | 'balance' | 'createPsbt' | 'bumpFee' | 'labels' | 'importLabels' | 'setLabel'>;

/** The wallet shown, on the client (null when stopped). */
function wallet(): WalletCalls | null {
  const c = client;
  if (!c) return null;
  return current === '' ? c : c.wallet(current);
}

/** Whether an event's `wallet` is the wallet shown. */
function shown(e: { wallet: string | null }): boolean {
  return (e.wallet ?? '') === current;
}

/** The switcher's choices: the default wallet, those the client has, and `extra`. */
async function listWallets(extra?: string): Promise<void> {
  const c = client;
  if (!c) return;
  const names = await c.wallets().catch(() => [] as string[]);
  if (extra && !names.includes(extra)) names.push(extra);
  ui.name.replaceChildren(new Option('Default', ''), ...names.map((n) => new Option(n, n)));
  ui.name.value = current;
}

/** Satoshis as bitcoin, 8 decimals. */
export function btc(sats: number): string {
  return `${(sats / 1e8).toFixed(8)} BTC`;
}

/** What `text` lists (one per line, or apart by spaces or commas): descriptors (they have
 * parentheses), output scripts (even-length hex) and addresses (the rest). */
export function parseWatch(text: string): { descriptors: string[]; scripts: string[]; addresses: string[] } | string {
  const items = text
    .split(/\n+/)
    .flatMap((l) => (l.includes('(') ? [l.trim()] : l.split(/[\s,]+/)))
    .map((l) => l.trim())
    .filter(Boolean);
  if (items.length === 0) return 'Enter at least one address, descriptor or script.';
  const out = { descriptors: [] as string[], scripts: [] as string[], addresses: [] as string[] };
  for (const i of items) {
    if (i.includes('(')) out.descriptors.push(i);
    else if (/^([0-9a-fA-F]{2})+$/.test(i) && !/^(bc|tb|bcrt)1/i.test(i)) out.scripts.push(i.toLowerCase());
    else out.addresses.push(i);
  }
  return out;
}

function showError(text: string | null): void {
  ui.error.hidden = !text;
  ui.error.textContent = text ?? '';
}

function showBalance(b: Balance): void {
  ui.confirmed.textContent = btc(b.confirmed);
  ui.pending.textContent = btc(b.pending);
  ui.immature.textContent = btc(b.immature);
  ui.coins.textContent = count(b.coins);
  ui.unconfirmed.textContent = b.unconfirmed === 0 ? '–' : `${b.unconfirmed > 0 ? '+' : ''}${btc(b.unconfirmed)}`;
}

function cellsRow(txid: string, cells: string[]): HTMLTableRowElement {
  const tr = document.createElement('tr');
  tr.dataset.txid = txid;
  for (const text of cells) {
    const td = document.createElement('td');
    td.textContent = text;
    tr.append(td);
  }
  tr.title = txid;
  return tr;
}

/**
 * A cell editing the label of `record` (BIP329: a transaction's or an output's), saved
 * when the field changes; an empty field removes it.
 */
function labelCell(record: Omit<LabelRecord, 'label'>, label: string | null): HTMLTableCellElement {
  const td = document.createElement('td');
  const input = document.createElement('input');
  input.className = 'label';
  input.maxLength = 255;
  input.value = label ?? '';
  input.placeholder = 'label';
  input.setAttribute('aria-label', `The label of ${record.type === 'tx' ? 'transaction' : 'coin'} ${record.ref}`);
  input.dataset.testid = `label-${record.type}`;
  // Enter saves, as leaving the field does.
  input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter') input.blur();
  });
  input.addEventListener('change', async () => {
    const c = wallet();
    if (!c) return;
    const text = input.value.trim();
    try {
      await c.setLabel({ ...record, label: text === '' ? null : text });
      ui.labelsResult.textContent = `Label saved for ${record.ref.slice(0, 16)}…`;
    } catch (e) {
      ui.labelsResult.textContent = explain(e);
    }
  });
  td.append(input);
  return td;
}

function row(t: TransactionEntry & { status: 'confirmed' }, tip: number): HTMLTableRowElement {
  const tr = cellsRow(t.txid, [
    `${t.txid.slice(0, 16)}…`,
    count(t.height),
    count(Math.max(0, tip - t.height + 1)),
    btc(t.received - t.sent),
    t.fee === null ? '–' : btc(t.fee),
  ]);
  tr.append(labelCell({ type: 'tx', ref: t.txid }, t.label));
  tr.dataset.height = String(t.height);
  return tr;
}

/** A coin: its value and confirmations, its label, and a box freezing it. */
function coinRow(u: Utxo): HTMLTableRowElement {
  const ref = `${u.txid}:${u.vout}`;
  const tr = cellsRow(u.txid, [`${u.txid.slice(0, 16)}…:${u.vout}`, btc(u.value), count(u.confirmations)]);
  tr.dataset.coin = ref;
  tr.classList.toggle('frozen', u.frozen);
  tr.append(labelCell({ type: 'output', ref }, u.label));
  const td = document.createElement('td');
  const box = document.createElement('input');
  box.type = 'checkbox';
  box.checked = u.frozen;
  box.dataset.testid = 'freeze';
  box.setAttribute('aria-label', `Freeze coin ${ref}`);
  box.addEventListener('change', async () => {
    const c = client;
    if (!c) return;
    try {
      await c.setLabel({ type: 'output', ref, spendable: !box.checked });
      tr.classList.toggle('frozen', box.checked);
      ui.labelsResult.textContent = `${box.checked ? 'Frozen' : 'Thawed'}: ${ref.slice(0, 16)}…`;
    } catch (e) {
      box.checked = !box.checked;
      ui.labelsResult.textContent = explain(e);
    }
  });
  td.append(box);
  tr.append(td);
  return tr;
}

function unconfirmedRow(t: TransactionEntry & { status: 'unconfirmed' }): HTMLTableRowElement {
  const tr = cellsRow(t.txid, [
    `${t.txid.slice(0, 16)}…`,
    count(t.gateways),
    new Date(t.firstSeen).toLocaleTimeString(),
    btc(t.received - t.sent),
    t.fee === null ? '–' : btc(t.fee),
  ]);
  tr.append(labelCell({ type: 'tx', ref: t.txid }, t.label));
  const td = document.createElement('td');
  // A bump for the wallet's own payments (every input its coin: its fee is known); the
  // client says why when one cannot be made (a child spends it, the change is too small).
  if (t.fee !== null && t.sent > 0) {
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = 'Bump';
    b.dataset.testid = 'bump';
    b.title = 'A replacement (BIP125) at the fee rate of the send form, as a PSBT to sign';
    b.addEventListener('click', () => void bump(t.txid));
    td.append(b);
  }
  tr.append(td);
  return tr;
}

/** A PSBT replacing `txid` at the send form's fee rate, shown as a spend's is. */
async function bump(txid: string): Promise<void> {
  const c = wallet();
  if (!c) return;
  showPsbtError(null);
  const feeRate = Number(ui.psbtRate.value);
  if (!(feeRate >= 0.1 && feeRate <= 10_000)) {
    return showPsbtError('Enter the new fee rate (0.1 to 10,000 sat/vB) in the send form, then bump.', ui.psbtRate);
  }
  try {
    const r = await c.bumpFee(txid, { feeRate });
    ui.psbtSummary.textContent = `Replaces ${txid.slice(0, 16)}… at ${r.feeRate} sat/vB: fee ${count(r.fee)} sat for ` +
      `${count(r.vsize)} vB. Sign it with your wallet, then paste the signed transaction or PSBT below.`;
    ui.psbtOut.value = r.psbt;
    ui.psbtCopied.textContent = '';
    ui.psbtBox.hidden = false;
    log('info', `Wallet: a PSBT replacing ${txid.slice(0, 16)}… (fee ${count(r.fee)} sat) is ready to sign.`);
  } catch (e) {
    showPsbtError(explain(e));
  }
}

/** Redraw the wallet shown's transactions and balance from the client. */
async function refresh(): Promise<void> {
  const [c, w] = [client, wallet()];
  if (!c || !w) return;
  const [txs, coins, balance, tip] = await Promise.all([w.transactions(), w.utxos(), w.balance(), c.tip()]);
  const height = tip?.height ?? 0;
  const confirmed: (TransactionEntry & { status: 'confirmed' })[] = [];
  const unconfirmed: (TransactionEntry & { status: 'unconfirmed' })[] = [];
  for (const t of txs) {
    if (t.status === 'confirmed') confirmed.push(t);
    else unconfirmed.push(t);
  }
  // A label being typed is not redrawn away.
  if (ui.txs.contains(document.activeElement) || ui.unconfirmedTxs.contains(document.activeElement)
    || ui.coinList.contains(document.activeElement)) {
    showBalance(balance);
    return;
  }
  ui.txs.replaceChildren(...confirmed.reverse().map((t) => row(t, height)));
  ui.unconfirmedTxs.replaceChildren(...unconfirmed.reverse().map(unconfirmedRow));
  ui.unconfirmedBox.hidden = unconfirmed.length === 0;
  ui.coinList.replaceChildren(...coins.map(coinRow));
  ui.coinBox.hidden = coins.length === 0;
  showBalance(balance);
}

/** The client the panel watches with (null when stopped). */
export function attach(c: LightwireClient | null): void {
  off.forEach((f) => f());
  off = [];
  client = c;
  ui.watch.disabled = !c;
  ui.rescan.disabled = !c;
  ui.send.disabled = !c;
  ui.psbtCreate.disabled = !c;
  ui.psbtEstimate.disabled = !c;
  ui.labelsExport.disabled = !c;
  ui.labelsImport.disabled = !c;
  ui.name.disabled = !c;
  ui.newName.disabled = !c;
  ui.add.disabled = !c;
  if (!c) return;
  off = [
    c.on('transaction', (e) => {
      const id = `${e.txid.slice(0, 16)}…`;
      const who = e.wallet === null ? 'Wallet' : `Wallet ${e.wallet}`;
      if (e.status === 'found') log('info', `${who}: transaction ${id} in block ${count(e.height)}.`);
      else if (e.status === 'withdrawn') log('reorg', `${who}: transaction ${id} withdrawn (block ${count(e.height)} replaced).`);
      else if (e.status === 'unconfirmed') log('info', `${who}: transaction ${id} unconfirmed, held by ${count(e.gateways)} gateway(s).`);
      else log('reorg', `${who}: unconfirmed transaction ${id} dropped (${e.reason}${e.by ? ` by ${e.by.slice(0, 16)}…` : ''}).`);
      if (shown(e)) void refresh();
    }),
    c.on('balance', (e) => {
      if (shown(e)) showBalance(e);
    }),
    c.on('tip', () => void refresh()),
  ];
  void listWallets();
  void refresh();
}

// Another wallet shown: its own transactions, coins and balance.
ui.name.addEventListener('change', () => {
  current = ui.name.value;
  showError(null);
  ui.labelsResult.textContent = '';
  void refresh();
});

// A new wallet's name: shown at once (empty), made by its first watch.
ui.switcher.addEventListener('submit', (ev) => {
  ev.preventDefault();
  const name = ui.newName.value.trim();
  if (!name) return;
  current = name;
  ui.newName.value = '';
  showError(null);
  void listWallets(name);
  void refresh();
});

ui.form.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  showError(null);
  const c = wallet();
  if (!c) return;
  const form = readForm(ui.items, parseWatch, ui.from, showError);
  if (!form) return;
  const { items: parsed, from } = form;
  log('info', `Watching ${parsed.descriptors.length + parsed.scripts.length + parsed.addresses.length} item(s) from block ${count(from)}.`);
  try {
    const summary = await c.watch({ ...parsed, fromHeight: from });
    log('info', `The wallet is synced: ${count(summary.transactions)} transaction(s), ${btc(summary.balance.confirmed)}.`);
    await listWallets();
    await refresh();
  } catch (e) {
    const err = e as Error;
    if (err.name !== 'Stopped') showError(explain(e));
  }
});

// The wallet scanned again from the height in the form: a birthday widened, or a full
// rescan from the wallet's start when the height is its start.
ui.rescan.addEventListener('click', async () => {
  showError(null);
  const c = wallet();
  if (!c) return;
  const from = Number(ui.from.value || 0);
  if (!Number.isInteger(from) || from < 0) {
    showError('The start height is a whole number, 0 or more.');
    ui.from.focus();
    return;
  }
  log('info', `Rescanning the wallet from block ${count(from)}.`);
  try {
    const summary = await c.rescan({ fromHeight: from });
    log('info', `The wallet is rescanned: ${count(summary.transactions)} transaction(s), ${btc(summary.balance.confirmed)}.`);
    await refresh();
  } catch (e) {
    const err = e as Error;
    if (err.name !== 'Stopped') showError(explain(e));
  }
});

/** A BTC amount typed in, as whole satoshis; null when it is not one. */
export function satoshis(text: string): number | null {
  if (!/^\d+(\.\d{1,8})?$/.test(text.trim())) return null;
  const [whole, frac = ''] = text.trim().split('.');
  const sats = Number(whole) * 1e8 + Number(frac.padEnd(8, '0'));
  return Number.isSafeInteger(sats) && sats > 0 ? sats : null;
}

function showPsbtError(text: string | null, field?: HTMLInputElement): void {
  ui.psbtError.hidden = !text;
  ui.psbtError.textContent = text ?? '';
  if (text) {
    ui.psbtBox.hidden = true;
    field?.focus();
  }
}

ui.psbtForm.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const c = wallet();
  if (!c) return;
  showPsbtError(null);
  const address = ui.psbtAddress.value.trim();
  const value = satoshis(ui.psbtAmount.value);
  const feeRate = Number(ui.psbtRate.value);
  if (!address) return showPsbtError('Enter the address to pay.', ui.psbtAddress);
  if (value === null) return showPsbtError('The amount is in BTC, more than 0, at most 8 decimals.', ui.psbtAmount);
  if (!(feeRate >= 0.1 && feeRate <= 10_000)) return showPsbtError('The fee rate is from 0.1 to 10,000 sat/vB.', ui.psbtRate);
  try {
    const r = await c.createPsbt({ outputs: [{ address, value }], feeRate });
    const change = r.change ? `, change ${btc(r.change.value)} to ${r.change.address}` : ', no change';
    const parents = r.ancestorFee > 0 ? ` (${count(r.ancestorFee)} of it for unconfirmed parents below the rate)` : '';
    ui.psbtSummary.textContent = `${count(r.inputs.length)} input(s), fee ${count(r.fee)} sat${parents} for ${count(r.vsize)} vB${change}. ` +
      'Sign it with your wallet, then paste the signed transaction or PSBT below.';
    ui.psbtOut.value = r.psbt;
    ui.psbtCopied.textContent = '';
    ui.psbtBox.hidden = false;
    log('info', `Wallet: a PSBT paying ${btc(value)} (fee ${count(r.fee)} sat) is ready to sign.`);
  } catch (e) {
    showPsbtError(explain(e));
  }
});

/** A rate in sat/vB for the page, or a dash. */
function rate(r: number | null): string {
  return r === null ? '–' : `${r} sat/vB`;
}

// The gateways' nodes' estimates: the 6-block figure goes in the field; every gateway's
// answer is shown, as nothing checks them.
ui.psbtEstimate.addEventListener('click', async () => {
  const c = client;
  if (!c) return;
  try {
    const r = await c.feeRates();
    if (r.blocks6 !== null) ui.psbtRate.value = String(r.blocks6);
    const each = r.sources.map((s) => `${s.url}: ${rate(s.blocks1)} / ${rate(s.blocks6)} / ${rate(s.blocks144)} (${s.source})`);
    ui.psbtRates.textContent = `Within 1 / 6 / 144 blocks: ${rate(r.blocks1)} / ${rate(r.blocks6)} / ${rate(r.blocks144)}, ` +
      `the lower median of what the gateways' nodes estimate (unchecked): ${each.join('; ')}.`;
  } catch (e) {
    ui.psbtRates.textContent = (e as Error).name === 'NoGateway'
      ? 'No connected gateway serves fee estimates (a gateway started with --node-rpc does).'
      : explain(e);
  }
});

ui.psbtCopy.addEventListener('click', async () => {
  try {
    await navigator.clipboard.writeText(ui.psbtOut.value);
    ui.psbtCopied.textContent = 'Copied.';
  } catch {
    // Clipboard access refused (an insecure origin, a denied permission): select it instead.
    ui.psbtOut.select();
    ui.psbtCopied.textContent = 'Selected: copy it with Ctrl+C.';
  }
});

ui.sendForm.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const c = client;
  if (!c) return;
  ui.result.textContent = '';
  try {
    const r = await c.broadcast(ui.raw.value.trim());
    const refused = r.refused.map((x) => `${x.url}: ${x.reason}`).join('; ');
    ui.result.textContent = `${r.txid.slice(0, 16)}…: relayed by ${r.relayed} gateway(s)${refused ? `; not by ${refused}` : ''}.`;
  } catch (e) {
    ui.result.textContent = explain(e);
  }
});

// The labels as a BIP329 file, saved by the browser as a download.
ui.labelsExport.addEventListener('click', async () => {
  const c = wallet();
  if (!c) return;
  try {
    const text = await c.labels();
    const lines = text === '' ? 0 : text.split('\n').length - 1;
    const a = document.createElement('a');
    a.href = URL.createObjectURL(new Blob([text], { type: 'application/jsonl' }));
    a.download = current === '' ? 'labels.jsonl' : `labels-${current}.jsonl`;
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
    ui.labelsResult.textContent = `Exported ${count(lines)} label(s) as ${a.download}.`;
  } catch (e) {
    ui.labelsResult.textContent = explain(e);
  }
});

// A BIP329 file from another wallet (or an export): whole or nothing, the bad line named.
ui.labelsImport.addEventListener('change', async () => {
  const c = wallet();
  const file = ui.labelsImport.files?.[0];
  if (!c || !file) return;
  try {
    const r = await c.importLabels(await file.text());
    const skipped = r.unknown ? `, ${count(r.unknown)} of types BIP329 does not define skipped` : '';
    const cut = r.cut ? `, ${count(r.cut)} cut to 255 characters` : '';
    ui.labelsResult.textContent = `Imported ${count(r.imported)} label(s) from ${file.name}${skipped}${cut}.`;
    log('info', `Wallet: ${count(r.imported)} label(s) imported from ${file.name}.`);
    await refresh();
  } catch (e) {
    ui.labelsResult.textContent = `Nothing imported from ${file.name}: ${explain(e)}`;
  } finally {
    ui.labelsImport.value = '';
  }
});
