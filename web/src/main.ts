// The lightwire sync dashboard: the `lightwire` npm package used as any app would use it.
// This module reads the page's address and saved options, opens the client, wires its events
// to the state and the page, and handles the buttons. Events update the text as they come;
// charts sample `client.metrics()` once a second.
import { LightwireClient, type Network, type SyncProgress } from 'lightwire';
import { count, explain } from './format';
import { chartPoints, drawCharts, sample } from './metrics';
import { attach as attachScan, drawScanCharts } from './scan';
import { attach as attachSilent } from './silent';
import { attach as attachWallet } from './wallet';
import {
  log,
  logAll,
  refreshStorage,
  renderGateways,
  renderProgress,
  renderRole,
  renderStatus,
  renderTip,
  setPageState,
  ui,
} from './render';
import {
  NETWORKS,
  beginSession,
  failed,
  gatewayChanged,
  progressed,
  rejected,
  reorged,
  state,
  storeDeleted,
  storeFor,
  tipStored,
  warned,
  type PageState,
} from './state';

let unsubscribe: (() => void)[] = [];

// ---------------------------------------------------------------- events from the client

function subscribe(c: LightwireClient): void {
  attachScan(c);
  attachWallet(c);
  attachSilent(c);
  unsubscribe = [
    () => attachScan(null),
    () => attachWallet(null),
    () => attachSilent(null),
    c.on('gateway', (e) => {
      const lines = gatewayChanged(e);
      if (!lines) return;
      logAll(lines);
      renderGateways();
      renderStatus();
    }),
    c.on('progress', (e) => {
      logAll(progressed(e));
      if (state.pageState === 'syncing' || state.pageState === 'synced') setPageState(e.synced ? 'synced' : 'syncing');
      renderProgress();
    }),
    c.on('tip', (e) => {
      logAll(tipStored(e));
      renderTip();
      renderProgress();
    }),
    c.on('role', (e) => {
      if (state.role === e.role) return;
      state.role = e.role;
      renderRole();
      log('info', e.role === 'leader'
        ? 'This tab now runs the client (the tab that ran it went): it resumes from the local store.'
        : 'Another tab runs the client on this store: this one follows it.');
    }),
    c.on('mirror', (e) =>
      log(e.state === 'ready' ? 'info' : 'warning', e.state === 'ready'
        ? `Mirror ${e.url}: its files hold headers to ${count(e.height ?? 0)}; they are read from it.`
        : `Mirror ${e.url} dropped (${e.code}): ${e.reason}. The gateways serve the rest.`)),
    c.on('reorg', (e) => logAll(reorged(e))),
    c.on('rejected', (e) => logAll(rejected(e))),
    c.on('warning', (e) => logAll(warned(e))),
    c.on('error', (e) => {
      logAll(failed(e));
      if (e.fatal) void stop('error');
    }),
  ];
}

// ---------------------------------------------------------------- timers

setInterval(() => {
  void sample().then(() => {
    drawCharts();
    drawScanCharts();
  });
}, 1000);

setInterval(() => {
  if (state.client && document.visibilityState === 'visible') void refreshStorage();
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
  const c = state.client;
  state.client = null;
  unsubscribe.forEach((off) => off());
  unsubscribe = [];
  if (c) {
    try {
      await c.stop();
    } catch {
      // Already stopped (a fatal error); nothing more to release.
    }
  }
  state.gateways.forEach((g) => (g.state = 'stopped'));
  state.role = null;
  renderRole();
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
  if (state.client) await stop();
  setBusy(true);
  setPageState('opening');
  beginSession(urls, net);
  renderGateways();
  renderProgress();
  renderTip();
  let c: LightwireClient;
  try {
    // With silent payments (their scanner is a second wasm module): the panel below the
    // wallet's receives them.
    c = await LightwireClient.open({ network: net, gateways: urls, storeName: state.storeName, bulk: mirrors, silentPayments: true });
  } catch (e) {
    state.gateways = [];
    renderGateways();
    setBusy(false);
    state.errorStatus = 'Could not connect';
    ui.connect.textContent = 'Connect';
    setPageState('error');
    const text = explain(e);
    showError(text);
    log('error', text);
    ui.gateways.focus();
    return;
  }
  state.client = c;
  subscribe(c);
  state.role = c.role;
  renderRole();
  void sample(); // the baseline for the first rates a second from now
  ui.disconnect.disabled = false;
  ui.connect.disabled = false;
  ui.connect.textContent = 'Reconnect';
  setPageState(state.wasSynced ? 'synced' : 'syncing');
  try {
    localStorage.setItem('lightwire-dashboard', JSON.stringify({ gateways: urls, network: net }));
  } catch {
    // Storage refused (private mode): only the prefill is lost.
  }
  try {
    const found = await c.tip();
    if (c !== state.client) return;
    // An empty store holds the genesis block only.
    const t = found && found.height > 0 ? found : null;
    if (t && !state.tip) {
      state.tip = t;
      state.stored = Math.max(state.stored, t.height);
      renderTip();
      renderProgress();
    }
    log(
      'info',
      t
        ? `Opened the local store ${state.storeName}: headers up to height ${count(t.height)} are already here; syncing the rest.`
        : `Opened an empty local store ${state.storeName}: syncing ${net} from the genesis block.`,
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
  const tip = state.tip;
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
  const net = state.client ? state.network : (ui.network.value as Network);
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
  const name = ui.clearName.textContent ?? storeFor(state.network);
  ui.clear.disabled = true;
  ui.storageMessage.textContent = 'Stopping the client and deleting the stored headers…';
  try {
    await stop();
    await LightwireClient.deleteStore(name);
    storeDeleted();
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
    return state.client;
  },
  get firstProgress() {
    return state.firstProgress;
  },
  get progress() {
    return state.progress;
  },
  chartPoints,
};

const params = new URLSearchParams(location.search);
const fromUrl = params.getAll('gw').flatMap(parseGateways);
// Mirrors of the chain's history (`bulk=/bulk/regtest/`, repeatable): npm start serves one.
const mirrors = params.getAll('bulk');
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
