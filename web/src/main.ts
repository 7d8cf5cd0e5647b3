// The lightwire sync dashboard: the `lightwire` npm package used as any app would use it.
// Events update the text as they come; charts sample `client.metrics()` once a second.
import {
  LightwireClient,
  type GatewayChange,
  type GatewayState,
  type Metrics,
  type Network,
  type SyncProgress,
  type TipInfo,
} from 'lightwire';
import { LiveChart } from './charts';
import { ago, bytes, clock, count, duration, explain, gatewayLabel, short } from './format';

// ---------------------------------------------------------------- the page's elements

function $<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`the page lacks #${id}`);
  return el as T;
}

const ui = {
  status: $('status'),
  announce: $('announce'),
  form: $<HTMLFormElement>('connect-form'),
  gateways: $<HTMLTextAreaElement>('gateways'),
  network: $<HTMLSelectElement>('network'),
  connect: $<HTMLButtonElement>('connect'),
  disconnect: $<HTMLButtonElement>('disconnect'),
  formError: $('form-error'),
  percent: $('progress-percent'),
  bar: $('progress-bar'),
  fill: $('progress-fill'),
  height: $('progress-height'),
  target: $('progress-target'),
  rate: $('progress-rate'),
  eta: $('progress-eta'),
  stored: $('stored-height'),
  validated: $('session-validated'),
  totals: $('totals'),
  tipHeight: $('tip-height'),
  tipHash: $('tip-hash'),
  tipTime: $('tip-time'),
  copyHash: $<HTMLButtonElement>('copy-hash'),
  gatewayList: $('gateway-list'),
  log: $('event-log'),
  storageText: $('storage-text'),
  storageFill: $('storage-fill'),
  storagePersisted: $('storage-persisted'),
  storageMessage: $('storage-message'),
  clear: $<HTMLButtonElement>('clear-store'),
  dialog: $<HTMLDialogElement>('clear-dialog'),
  clearNetwork: $('clear-network'),
  clearName: $('clear-name'),
};

// ---------------------------------------------------------------- charts

const ORANGE = '#f7931a';
const BLUE = '#2563eb';
const perSecond = (f: (v: number) => string) => (v: number) => `${f(v)}/s`;

const ms = (v: number) => `${v < 10 ? v.toFixed(1) : count(v)} ms`;

const charts = {
  headers: new LiveChart($('chart-headers'), [
    { label: 'headers', color: ORANGE, axis: 0, format: perSecond(short) },
  ]),
  bytes: new LiveChart($('chart-bytes'), [
    { label: 'in', color: ORANGE, axis: 0, format: perSecond(bytes), caption: (v) => `${bytes(v)}/s in`, floor: 1000 },
    { label: 'out', color: BLUE, axis: 1, format: perSecond(bytes), caption: (v) => `${bytes(v)}/s out`, floor: 1000 },
  ]),
  allocs: new LiveChart($('chart-allocs'), [
    { label: 'allocations', color: ORANGE, axis: 0, format: perSecond(short) },
  ]),
  live: new LiveChart($('chart-live'), [{ label: 'live', color: BLUE, axis: 0, format: bytes, floor: 1e6 }]),
  memory: new LiveChart($('chart-memory'), [{ label: 'memory', color: BLUE, axis: 0, format: bytes, floor: 1e6 }]),
  idb: new LiveChart($('chart-idb'), [
    { label: 'commits', color: ORANGE, axis: 0, format: perSecond(short) },
    { label: 'time per commit', color: BLUE, axis: 1, format: ms, caption: (v) => `${ms(v)} each` },
  ]),
};

// ---------------------------------------------------------------- state

type PageState = 'idle' | 'opening' | 'syncing' | 'synced' | 'stopped' | 'error';

interface Gateway {
  url: string;
  state: GatewayState;
  reason: string | null;
  /** It dropped (backing off) since it last served us. */
  down: boolean;
  /** It reached the tip on this connection (logged once). */
  reportedSynced: boolean;
}

let client: LightwireClient | null = null;
let storeName = '';
let network: Network = 'regtest';
let gateways: Gateway[] = [];
let progress: SyncProgress | null = null;
let firstProgress: SyncProgress | null = null;
let rate = 0; // headers/s, smoothed
let stored = 0;
let tip: TipInfo | null = null;
let metrics: Metrics | null = null;
let previous: Metrics | null = null;
let pageState: PageState = 'idle';
let wasSynced = false;
let unsubscribe: (() => void)[] = [];
/** The status line in the 'error' state. */
let errorStatus = 'Could not connect';

const NETWORKS: Network[] = ['mainnet', 'testnet3', 'testnet4', 'signet', 'regtest'];
const storeFor = (n: Network) => `lightwire-${n}`;

const ANNOUNCE: Record<PageState, string> = {
  idle: 'Not connected.',
  opening: 'Opening the local store.',
  syncing: 'Syncing.',
  synced: 'Synced.',
  stopped: 'Stopped.',
  error: 'Something went wrong: see the message on the page.',
};

function setPageState(s: PageState): void {
  if (s !== pageState) ui.announce.textContent = ANNOUNCE[s];
  pageState = s;
  document.body.dataset.state = s;
  renderStatus();
}

// ---------------------------------------------------------------- the event log

const LOG_LIMIT = 200;

type LogKind = 'info' | 'synced' | 'reconnect' | 'drop' | 'reorg' | 'rejected' | 'warning' | 'error';

function log(kind: LogKind, text: string): void {
  const first = ui.log.firstElementChild as HTMLElement | null;
  // The same line again (a gateway refusing every retry): count it instead.
  if (first && first.dataset.kind === kind && first.dataset.text === text) {
    const n = Number(first.dataset.repeat ?? '1') + 1;
    first.dataset.repeat = String(n);
    const time = first.querySelector('time');
    if (time) {
      time.dateTime = new Date().toISOString();
      time.textContent = clock(Date.now());
    }
    const times = first.querySelector('.times');
    if (times) times.textContent = `×${n}`;
    return;
  }
  const li = document.createElement('li');
  li.dataset.kind = kind;
  li.dataset.text = text;
  const time = document.createElement('time');
  time.dateTime = new Date().toISOString();
  time.textContent = clock(Date.now());
  const tag = document.createElement('span');
  tag.className = 'tag';
  tag.textContent = kind;
  const body = document.createElement('span');
  body.className = 'text';
  body.textContent = text;
  const times = document.createElement('span');
  times.className = 'times';
  li.append(time, tag, body, times);
  ui.log.prepend(li);
  while (ui.log.childElementCount > LOG_LIMIT) ui.log.lastElementChild?.remove();
}

// ---------------------------------------------------------------- rendering

const STATE_LABEL: Record<GatewayState, string> = {
  connecting: 'Connecting',
  handshaking: 'Handshaking',
  syncing: 'Syncing',
  synced: 'Synced',
  'backing-off': 'Backing off',
  bad: 'Bad',
  stopped: 'Stopped',
};

function gatewayName(i: number): string {
  const g = gateways[i];
  return g ? `Gateway ${i + 1} (${gatewayLabel(g.url).address})` : `Gateway ${i + 1}`;
}

function renderGateways(): void {
  ui.gatewayList.replaceChildren();
  if (gateways.length === 0) {
    const li = document.createElement('li');
    li.className = 'empty';
    li.textContent = 'No gateway yet: connect below.';
    ui.gatewayList.append(li);
    return;
  }
  gateways.forEach((g, i) => {
    const { address, node } = gatewayLabel(g.url);
    const li = document.createElement('li');
    li.className = 'gateway';
    li.dataset.testid = `gateway-${i}`;
    li.dataset.state = g.state;
    const head = document.createElement('div');
    head.className = 'gateway-head';
    const badge = document.createElement('span');
    badge.className = 'badge';
    badge.dataset.state = g.state;
    badge.textContent = STATE_LABEL[g.state];
    const addr = document.createElement('span');
    addr.className = 'gateway-address';
    addr.textContent = address;
    addr.title = g.url;
    head.append(badge, ' ', addr);
    const id = document.createElement('div');
    id.className = 'gateway-node';
    id.textContent = node ? `node ${node}` : '';
    li.append(head, id);
    const why = describe(g);
    if (why) {
      const p = document.createElement('p');
      p.className = 'gateway-reason';
      p.textContent = why;
      li.append(p);
    }
    ui.gatewayList.append(li);
  });
}

function describe(g: Gateway): string {
  switch (g.state) {
    case 'backing-off':
      return `${g.reason ? sentence(plain(g.reason)) : 'The connection dropped.'} Retrying automatically.`;
    case 'bad':
      return `Not used again this session: ${g.reason ? sentence(plain(g.reason)) : 'it broke a rule.'}`;
    case 'connecting':
      return g.down ? 'Reconnecting…' : '';
    default:
      return '';
  }
}

/**
 * A reason from the engine made easier to read: block hashes shortened, and WebSocket close
 * code 1006 (which says only "closed without a reason") left out.
 */
function plain(reason: string): string {
  return reason.replace(/\s*\(code 1006\)/, '').replace(/\b([0-9a-f]{12})[0-9a-f]{52}\b/g, '$1…');
}

/** A reason from the engine as a sentence: capital first letter, final period. */
function sentence(text: string): string {
  const t = text.trim();
  if (!t) return t;
  const s = t[0].toUpperCase() + t.slice(1);
  return /[.!?]$/.test(s) ? s : `${s}.`;
}

function percentOf(p: SyncProgress | null): number {
  if (!p) return 0;
  if (p.synced) return 100;
  if (p.targetHeight <= 0) return 0;
  return Math.min(100, (p.height / p.targetHeight) * 100);
}

function renderProgress(): void {
  const p = progress;
  const pct = percentOf(p);
  // Never show 100% before it is: 99.96% reads as "99.9%".
  const text = !p ? '–' : pct >= 100 ? '100%' : `${(Math.floor(pct * 10) / 10).toFixed(1)}%`;
  ui.percent.textContent = text;
  ui.percent.dataset.value = String(pct);
  ui.fill.style.width = `${pct}%`;
  ui.bar.setAttribute('aria-valuenow', String(Math.round(pct)));
  ui.bar.setAttribute('aria-valuetext', p ? `${text}: height ${count(p.height)} of ${count(p.targetHeight)}` : 'not started');
  ui.bar.dataset.synced = String(!!p?.synced);
  ui.height.textContent = p ? count(p.height) : '–';
  ui.target.textContent = p ? count(p.targetHeight) : '–';
  if (!p) {
    ui.rate.textContent = '–';
    ui.eta.textContent = '–';
  } else if (p.synced) {
    ui.rate.textContent = rate >= 1 ? `${short(rate)} headers/s` : 'idle: in sync';
    ui.eta.textContent = 'none: in sync';
  } else if (!gateways.some((g) => g.state === 'syncing' || g.state === 'synced')) {
    ui.rate.textContent = '–';
    ui.eta.textContent = 'waiting for a gateway';
  } else {
    ui.rate.textContent = `${short(rate)} headers/s`;
    const left = p.targetHeight - p.height;
    ui.eta.textContent = rate >= 1 ? duration(left / rate) : 'waiting for headers';
  }
  ui.stored.textContent = stored > 0 || tip ? `up to height ${count(stored)}` : 'nothing yet';
  ui.validated.textContent = metrics ? `${count(metrics.headersValidated)} headers` : '–';
  const m = metrics;
  ui.totals.textContent = m
    ? `Received ${bytes(m.bytesIn)} in ${count(m.messagesIn)} messages, sent ${bytes(m.bytesOut)}; ` +
      `${count(m.idbCommits)} IndexedDB commit${m.idbCommits === 1 ? '' : 's'}` +
      `${m.idbCommits > 0 ? ` (${duration(m.idbCommitMs / 1000)} in all)` : ''}; ` +
      `${count(m.reconnects)} reconnect${m.reconnects === 1 ? '' : 's'}.`
    : '';
  renderStatus();
}

function renderTip(): void {
  if (!tip) {
    ui.tipHeight.textContent = '–';
    ui.tipHeight.dataset.value = '';
    ui.tipHash.textContent = '–';
    ui.tipTime.textContent = '–';
    ui.copyHash.disabled = true;
    return;
  }
  ui.tipHeight.textContent = count(tip.height);
  ui.tipHeight.dataset.value = String(tip.height);
  ui.tipHash.textContent = tip.hash;
  const when = new Date(tip.time * 1000);
  ui.tipTime.textContent = `${when.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' })} (${ago(tip.time)})`;
  ui.tipTime.title = when.toISOString();
  ui.copyHash.disabled = false;
}

function renderStatus(): void {
  let text: string;
  switch (pageState) {
    case 'idle':
      text = 'Not connected';
      break;
    case 'opening':
      text = 'Opening the local store…';
      break;
    case 'syncing': {
      const up = gateways.some((g) => g.state === 'syncing' || g.state === 'synced');
      text = !progress || !up ? 'Waiting for a gateway…' : `Syncing · ${ui.percent.textContent}`;
      break;
    }
    case 'synced':
      text = `Synced · height ${count(progress?.height ?? stored)}`;
      break;
    case 'stopped':
      text = 'Stopped';
      break;
    case 'error':
      text = errorStatus;
      break;
  }
  if (ui.status.textContent !== text) ui.status.textContent = text;
  ui.status.dataset.state = pageState;
}

// ---------------------------------------------------------------- events from the client

function onGateway(e: GatewayChange): void {
  const g = gateways[e.gateway];
  if (!g) return;
  const before = g.state;
  g.state = e.state;
  g.reason = e.reason;
  const name = gatewayName(e.gateway);
  switch (e.state) {
    case 'backing-off': {
      const reason = e.reason ? sentence(plain(e.reason)) : 'The connection closed.';
      if (before === 'syncing' || before === 'synced' || before === 'handshaking') {
        log('drop', `${name} dropped: ${reason} Reconnecting automatically.`);
      } else {
        log('drop', `Could not reach ${name.replace(/^G/, 'g')}: ${reason} Trying again with backoff.`);
      }
      g.down = true;
      g.reportedSynced = false;
      break;
    }
    case 'bad':
      // The 'rejected' event that comes with it says why, in the log.
      break;
    case 'syncing':
    case 'synced':
      if (g.down) {
        g.down = false;
        log('reconnect', `${name} reconnected.`);
      }
      if (e.state === 'synced' && !g.reportedSynced) {
        g.reportedSynced = true;
        log('info', `${name} has nothing newer to send: we are at its tip.`);
      }
      break;
    default:
      break;
  }
  renderGateways();
  renderStatus();
}

function onProgress(e: SyncProgress): void {
  firstProgress ??= e;
  progress = e;
  rate = rate === 0 ? e.headersPerSecond : rate * 0.7 + e.headersPerSecond * 0.3;
  if (e.synced && e.headersPerSecond === 0) rate = 0;
  stored = Math.max(stored, e.storedHeight);
  if (e.synced !== wasSynced) {
    wasSynced = e.synced;
    if (e.synced) log('synced', `In sync with the gateways at height ${count(e.height)}.`);
    else if (e.targetHeight > e.height) log('info', `New headers announced: syncing to height ${count(e.targetHeight)}.`);
  }
  if (pageState === 'syncing' || pageState === 'synced') setPageState(e.synced ? 'synced' : 'syncing');
  renderProgress();
}

function subscribe(c: LightwireClient): void {
  unsubscribe = [
    c.on('gateway', onGateway),
    c.on('progress', onProgress),
    c.on('tip', (e) => {
      // During the first sync a commit lands every few seconds; once in sync, each is news.
      if (wasSynced && (!tip || e.height > tip.height)) log('info', `New block at height ${count(e.height)}.`);
      tip = { height: e.height, hash: e.hash, time: e.time };
      stored = e.height;
      renderTip();
      renderProgress();
    }),
    c.on('reorg', (e) =>
      log(
        'reorg',
        `Reorg of ${count(e.depth)} block${e.depth === 1 ? '' : 's'}: the tip at height ${count(e.oldTip.height)} ` +
          `(${e.oldTip.hash.slice(0, 12)}…) was replaced by a chain with more work, tip ${count(e.newTip.height)} ` +
          `(${e.newTip.hash.slice(0, 12)}…).`,
      ),
    ),
    c.on('rejected', (e) =>
      log('rejected', `${gatewayName(e.gateway)} was rejected for breaking a rule: ${sentence(plain(e.reason))}`),
    ),
    c.on('warning', (e) =>
      log('warning', `${gatewayName(e.gateway)} sent a warning: ${e.text ? sentence(e.text) : '(no text).'}`),
    ),
    c.on('error', (e) => {
      log('error', `${sentence(e.message)}${e.fatal ? ' The client stopped; reconnect to try again.' : ''}`);
      if (e.fatal) {
        errorStatus = 'Stopped by an error';
        void stop('error');
      }
    }),
  ];
}

// ---------------------------------------------------------------- metrics, once a second

let sampling = false;

async function sample(): Promise<void> {
  const c = client;
  if (!c || sampling) return;
  sampling = true;
  try {
    const m = await c.metrics();
    if (c !== client) return;
    metrics = m;
    stored = Math.max(stored, m.storedHeight);
    const p = previous;
    previous = m;
    if (p) {
      const dt = (m.elapsedMs - p.elapsedMs) / 1000;
      if (dt > 0) {
        const per = (a: number, b: number) => Math.max(0, a - b) / dt;
        const t = Date.now() / 1000;
        const commits = m.idbCommits - p.idbCommits;
        charts.headers.push(t, [per(m.headersValidated, p.headersValidated)]);
        charts.bytes.push(t, [per(m.bytesIn, p.bytesIn), per(m.bytesOut, p.bytesOut)]);
        charts.allocs.push(t, [per(m.allocations, p.allocations)]);
        charts.live.push(t, [m.liveBytes]);
        charts.memory.push(t, [m.wasmMemoryBytes]);
        charts.idb.push(t, [per(m.idbCommits, p.idbCommits), commits > 0 ? (m.idbCommitMs - p.idbCommitMs) / commits : NaN]);
      }
    }
    renderProgress();
  } catch {
    // The client stopped between the timer and the answer.
  } finally {
    sampling = false;
  }
}

setInterval(() => {
  void sample().then(() => Object.values(charts).forEach((c) => c.draw()));
}, 1000);

// ---------------------------------------------------------------- storage

async function refreshStorage(): Promise<void> {
  try {
    const s = await LightwireClient.storage();
    if (s.usage == null || s.quota == null) {
      ui.storageText.textContent = 'This browser does not say how much it stores.';
      ui.storageFill.style.width = '0';
    } else {
      const share = s.quota > 0 ? s.usage / s.quota : 0;
      const pct = share * 100;
      ui.storageText.textContent = `${bytes(s.usage)} used of ${bytes(s.quota)} available (${pct < 0.1 && pct > 0 ? 'under 0.1' : pct.toFixed(1)}%).`;
      ui.storageFill.style.width = `${Math.max(pct, s.usage > 0 ? 1 : 0)}%`;
    }
    ui.storagePersisted.textContent = s.persisted
      ? 'The browser has promised to keep this data.'
      : 'The browser may delete this data if the disk runs low.';
  } catch (e) {
    ui.storageText.textContent = explain(e);
  }
}

setInterval(() => {
  if (client && document.visibilityState === 'visible') void refreshStorage();
}, 5000);

// ---------------------------------------------------------------- connect and stop

function showError(text: string | null): void {
  ui.formError.hidden = !text;
  ui.formError.textContent = text ?? '';
}

function setBusy(busy: boolean): void {
  ui.connect.disabled = busy;
  ui.gateways.readOnly = busy;
  ui.network.disabled = busy;
}

async function stop(next: PageState = 'stopped'): Promise<void> {
  const c = client;
  client = null;
  unsubscribe.forEach((off) => off());
  unsubscribe = [];
  if (c) {
    try {
      await c.stop();
    } catch {
      // Already stopped (a fatal error); nothing more to release.
    }
  }
  gateways.forEach((g) => (g.state = 'stopped'));
  ui.disconnect.disabled = true;
  ui.connect.textContent = 'Connect';
  setBusy(false);
  renderGateways();
  setPageState(next);
}

async function connect(urls: string[], net: Network): Promise<void> {
  showError(null);
  if (urls.length === 0) {
    showError('Enter at least one gateway connect string, like ws://127.0.0.1:8335#02ab…, one per line.');
    ui.gateways.focus();
    return;
  }
  if (client) await stop();
  setBusy(true);
  setPageState('opening');
  network = net;
  storeName = storeFor(net);
  progress = null;
  firstProgress = null;
  previous = null;
  metrics = null;
  rate = 0;
  stored = 0;
  tip = null;
  wasSynced = false;
  gateways = urls.map((url) => ({ url, state: 'connecting', reason: null, down: false, reportedSynced: false }));
  renderGateways();
  renderProgress();
  renderTip();
  let c: LightwireClient;
  try {
    c = await LightwireClient.open({ network: net, gateways: urls, storeName });
  } catch (e) {
    gateways = [];
    renderGateways();
    setBusy(false);
    errorStatus = 'Could not connect';
    ui.connect.textContent = 'Connect';
    setPageState('error');
    const text = explain(e);
    showError(text);
    log('error', text);
    ui.gateways.focus();
    return;
  }
  client = c;
  subscribe(c);
  void sample(); // the baseline for the first rates a second from now
  ui.disconnect.disabled = false;
  ui.connect.disabled = false;
  ui.connect.textContent = 'Reconnect';
  setPageState(wasSynced ? 'synced' : 'syncing');
  try {
    localStorage.setItem('lightwire-dashboard', JSON.stringify({ gateways: urls, network: net }));
  } catch {
    // Storage refused (private mode): only the prefill is lost.
  }
  try {
    const found = await c.tip();
    if (c !== client) return;
    // An empty store holds the genesis block only.
    const t = found && found.height > 0 ? found : null;
    if (t && !tip) {
      tip = t;
      stored = Math.max(stored, t.height);
      renderTip();
      renderProgress();
    }
    log(
      'info',
      t
        ? `Opened the local store ${storeName}: headers up to height ${count(t.height)} are already here; syncing the rest.`
        : `Opened an empty local store ${storeName}: syncing ${net} from the genesis block.`,
    );
  } catch (e) {
    log('error', explain(e));
  }
  void refreshStorage();
}

function parseGateways(text: string): string[] {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.length > 0);
}

ui.form.addEventListener('submit', (e) => {
  e.preventDefault();
  void connect(parseGateways(ui.gateways.value), ui.network.value as Network);
});

ui.disconnect.addEventListener('click', () => {
  void stop().then(() => log('info', 'Disconnected. The headers stored so far stay in this browser.'));
});

ui.copyHash.addEventListener('click', async () => {
  if (!tip) return;
  try {
    await navigator.clipboard.writeText(tip.hash);
    ui.copyHash.textContent = 'Copied';
  } catch {
    ui.copyHash.textContent = 'Copy failed';
  }
  setTimeout(() => (ui.copyHash.textContent = 'Copy'), 1500);
});

// ---------------------------------------------------------------- clearing the store

ui.clear.addEventListener('click', () => {
  const net = client ? network : (ui.network.value as Network);
  ui.clearNetwork.textContent = net;
  ui.clearName.textContent = storeFor(net);
  ui.dialog.returnValue = '';
  ui.dialog.showModal();
});

ui.dialog.addEventListener('close', async () => {
  if (ui.dialog.returnValue !== 'clear') {
    ui.clear.focus();
    return;
  }
  const name = ui.clearName.textContent ?? storeFor(network);
  ui.clear.disabled = true;
  ui.storageMessage.textContent = 'Stopping the client and deleting the stored headers…';
  try {
    await stop();
    await LightwireClient.deleteStore(name);
    tip = null;
    progress = null;
    stored = 0;
    metrics = null;
    renderTip();
    renderProgress();
    ui.storageMessage.textContent = `Deleted the local store ${name}.`;
    log('info', `Deleted the local store ${name}. Connect to sync again from the genesis block.`);
  } catch (e) {
    const text = explain(e);
    ui.storageMessage.textContent = text;
    log('error', text);
  } finally {
    ui.clear.disabled = false;
    ui.clear.focus();
    void refreshStorage();
  }
});

// ---------------------------------------------------------------- start

declare global {
  interface Window {
    /** For tests and the curious: the client and what the page has seen. */
    lightwireDashboard: {
      readonly client: LightwireClient | null;
      readonly firstProgress: SyncProgress | null;
      readonly progress: SyncProgress | null;
      chartPoints(): Record<string, number>;
    };
  }
}

window.lightwireDashboard = {
  get client() {
    return client;
  },
  get firstProgress() {
    return firstProgress;
  },
  get progress() {
    return progress;
  },
  chartPoints: () => Object.fromEntries(Object.entries(charts).map(([k, c]) => [k, c.points()])),
};

const params = new URLSearchParams(location.search);
const fromUrl = params.getAll('gw').flatMap(parseGateways);
const netParam = params.get('network');
const initialNetwork: Network = NETWORKS.includes(netParam as Network) ? (netParam as Network) : 'regtest';
renderProgress();
renderTip();
void refreshStorage();
if (netParam && !NETWORKS.includes(netParam as Network)) {
  showError(`The address asks for the network "${netParam}", which lightwire does not know. Pick one below.`);
}
if (fromUrl.length > 0) {
  ui.gateways.value = fromUrl.join('\n');
  ui.network.value = initialNetwork;
  void connect(fromUrl, initialNetwork);
} else {
  let saved: { gateways?: unknown; network?: unknown } = {};
  try {
    saved = JSON.parse(localStorage.getItem('lightwire-dashboard') ?? '{}');
  } catch {
    // nothing saved
  }
  const urls = Array.isArray(saved.gateways) ? saved.gateways.filter((g): g is string => typeof g === 'string') : [];
  ui.gateways.value = urls.join('\n');
  ui.network.value = netParam ? initialNetwork : NETWORKS.includes(saved.network as Network) ? String(saved.network) : 'regtest';
  log('info', 'Enter a gateway connect string and press Connect (npm start prints one for its demo gateway).');
}
