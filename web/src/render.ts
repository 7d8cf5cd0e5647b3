// The page's elements and everything that draws the state onto them: the status line, the
// gateways, the progress, the tip, the event log and the storage use.
import { LightwireClient, type GatewayState, type SyncProgress } from 'lightwire';
import { ago, bytes, clock, count, duration, explain, gatewayLabel, plain, sentence, short } from './format';
import { state, type Gateway, type LogEntry, type LogKind, type PageState } from './state';

// ---------------------------------------------------------------- the page's elements

export function $<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`the page lacks #${id}`);
  return el as T;
}

export const ui = {
  status: $('status'),
  role: $('role'),
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

// ---------------------------------------------------------------- the page's state

const ANNOUNCE: Record<PageState, string> = {
  idle: 'Not connected.',
  opening: 'Opening the local store.',
  syncing: 'Syncing.',
  synced: 'Synced.',
  stopped: 'Stopped.',
  error: 'Something went wrong: see the message on the page.',
};

export function setPageState(s: PageState): void {
  if (s !== state.pageState) ui.announce.textContent = ANNOUNCE[s];
  state.pageState = s;
  document.body.dataset.state = s;
  renderStatus();
}

// ---------------------------------------------------------------- the event log

const LOG_LIMIT = 200;

export function log(kind: LogKind, text: string): void {
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

/** The lines an update of the state returned, in order. */
export function logAll(lines: LogEntry[]): void {
  for (const { kind, text } of lines) log(kind, text);
}

// ---------------------------------------------------------------- gateways

const STATE_LABEL: Record<GatewayState, string> = {
  connecting: 'Connecting',
  handshaking: 'Handshaking',
  syncing: 'Syncing',
  synced: 'Synced',
  'backing-off': 'Backing off',
  bad: 'Bad',
  stopped: 'Stopped',
};

export function renderGateways(): void {
  ui.gatewayList.replaceChildren();
  if (state.gateways.length === 0) {
    const li = document.createElement('li');
    li.className = 'empty';
    li.textContent = 'No gateway yet: connect below.';
    ui.gatewayList.append(li);
    return;
  }
  state.gateways.forEach((g, i) => {
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

// ---------------------------------------------------------------- progress, tip and status

function percentOf(p: SyncProgress | null): number {
  if (!p) return 0;
  if (p.synced) return 100;
  if (p.targetHeight <= 0) return 0;
  return Math.min(100, (p.height / p.targetHeight) * 100);
}

export function renderProgress(): void {
  const p = state.progress;
  const rate = state.rate;
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
  } else if (!state.gateways.some((g) => g.state === 'syncing' || g.state === 'synced')) {
    ui.rate.textContent = '–';
    ui.eta.textContent = 'waiting for a gateway';
  } else {
    ui.rate.textContent = `${short(rate)} headers/s`;
    const left = p.targetHeight - p.height;
    ui.eta.textContent = rate >= 1 ? duration(left / rate) : 'waiting for headers';
  }
  ui.stored.textContent = state.stored > 0 || state.tip ? `up to height ${count(state.stored)}` : 'nothing yet';
  const m = state.metrics;
  ui.validated.textContent = m ? `${count(m.headersValidated)} headers` : '–';
  ui.totals.textContent = m
    ? `Received ${bytes(m.bytesIn)} in ${count(m.messagesIn)} messages, sent ${bytes(m.bytesOut)}; ` +
      `${count(m.idbCommits)} IndexedDB commit${m.idbCommits === 1 ? '' : 's'}` +
      `${m.idbCommits > 0 ? ` (${duration(m.idbCommitMs / 1000)} in all)` : ''}; ` +
      `${count(m.reconnects)} reconnect${m.reconnects === 1 ? '' : 's'}.`
    : '';
  renderStatus();
}

export function renderTip(): void {
  const tip = state.tip;
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

/** Which tab runs the client: this one, or another tab open on the same store. */
export function renderRole(): void {
  ui.role.hidden = state.role === null;
  ui.role.dataset.role = state.role ?? '';
  ui.role.textContent =
    state.role === 'leader'
      ? 'This tab runs the client; other tabs on this store follow it.'
      : state.role === 'follower'
        ? 'Another tab runs the client; this one follows it.'
        : '';
}

export function renderStatus(): void {
  let text: string;
  switch (state.pageState) {
    case 'idle':
      text = 'Not connected';
      break;
    case 'opening':
      text = 'Opening the local store…';
      break;
    case 'syncing': {
      const up = state.gateways.some((g) => g.state === 'syncing' || g.state === 'synced');
      text = !state.progress || !up ? 'Waiting for a gateway…' : `Syncing · ${ui.percent.textContent}`;
      break;
    }
    case 'synced':
      text = `Synced · height ${count(state.progress?.height ?? state.stored)}`;
      break;
    case 'stopped':
      text = 'Stopped';
      break;
    case 'error':
      text = state.errorStatus;
      break;
  }
  if (ui.status.textContent !== text) ui.status.textContent = text;
  ui.status.dataset.state = state.pageState;
}

// ---------------------------------------------------------------- storage

export async function refreshStorage(): Promise<void> {
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
