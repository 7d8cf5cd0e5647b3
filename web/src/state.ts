// The page's state: the client, its gateways and what it has reported so far, and how each of
// its events updates that state. An update returns the lines it adds to the event log; putting
// anything on the page is render.ts's job.
import type {
  ClientError,
  GatewayChange,
  GatewayState,
  GatewayWarning,
  LightwireClient,
  Metrics,
  Network,
  NewTip,
  Rejected,
  Reorg,
  Role,
  SyncProgress,
  TipInfo,
} from 'lightwire';
import { count, gatewayLabel, plain, sentence } from './format';

export type PageState = 'idle' | 'opening' | 'syncing' | 'synced' | 'stopped' | 'error';

export interface Gateway {
  url: string;
  state: GatewayState;
  reason: string | null;
  /** It dropped (backing off) since it last served us. */
  down: boolean;
  /** It reached the tip on this connection (logged once). */
  reportedSynced: boolean;
}

export type LogKind = 'info' | 'synced' | 'reconnect' | 'drop' | 'reorg' | 'rejected' | 'warning' | 'error';

/** A line for the event log. */
export interface LogEntry {
  kind: LogKind;
  text: string;
}

export const NETWORKS: Network[] = ['mainnet', 'testnet3', 'testnet4', 'signet', 'regtest'];
export const storeFor = (n: Network) => `lightwire-${n}`;

export const state = {
  client: null as LightwireClient | null,
  storeName: '',
  network: 'regtest' as Network,
  gateways: [] as Gateway[],
  progress: null as SyncProgress | null,
  firstProgress: null as SyncProgress | null,
  /** Headers/s, smoothed. */
  rate: 0,
  stored: 0,
  tip: null as TipInfo | null,
  metrics: null as Metrics | null,
  previous: null as Metrics | null,
  pageState: 'idle' as PageState,
  /** Whether this tab runs the client or follows the tab that does; null when not connected. */
  role: null as Role | null,
  wasSynced: false,
  /** The status line in the 'error' state. */
  errorStatus: 'Could not connect',
};

/** A fresh start on `net` with these gateways, before the client opens. */
export function beginSession(urls: string[], net: Network): void {
  state.network = net;
  state.storeName = storeFor(net);
  state.progress = null;
  state.firstProgress = null;
  state.previous = null;
  state.metrics = null;
  state.rate = 0;
  state.stored = 0;
  state.tip = null;
  state.wasSynced = false;
  state.gateways = urls.map((url) => ({ url, state: 'connecting', reason: null, down: false, reportedSynced: false }));
}

/** The local store was deleted: nothing of it is known any more. */
export function storeDeleted(): void {
  state.tip = null;
  state.progress = null;
  state.stored = 0;
  state.metrics = null;
}

export function gatewayName(i: number): string {
  const g = state.gateways[i];
  return g ? `Gateway ${i + 1} (${gatewayLabel(g.url).address})` : `Gateway ${i + 1}`;
}

/** A gateway's connection changed; null when the page does not know the gateway. */
export function gatewayChanged(e: GatewayChange): LogEntry[] | null {
  const g = state.gateways[e.gateway];
  if (!g) return null;
  const lines: LogEntry[] = [];
  const before = g.state;
  g.state = e.state;
  g.reason = e.reason;
  const name = gatewayName(e.gateway);
  switch (e.state) {
    case 'backing-off': {
      const reason = e.reason ? sentence(plain(e.reason)) : 'The connection closed.';
      if (before === 'syncing' || before === 'synced' || before === 'handshaking') {
        lines.push({ kind: 'drop', text: `${name} dropped: ${reason} Reconnecting automatically.` });
      } else {
        lines.push({
          kind: 'drop',
          text: `Could not reach ${name.replace(/^G/, 'g')}: ${reason} Trying again with backoff.`,
        });
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
        lines.push({ kind: 'reconnect', text: `${name} reconnected.` });
      }
      if (e.state === 'synced' && !g.reportedSynced) {
        g.reportedSynced = true;
        lines.push({ kind: 'info', text: `${name} has nothing newer to send: we are at its tip.` });
      }
      break;
    default:
      break;
  }
  return lines;
}

export function progressed(e: SyncProgress): LogEntry[] {
  const lines: LogEntry[] = [];
  state.firstProgress ??= e;
  state.progress = e;
  state.rate = state.rate === 0 ? e.headersPerSecond : state.rate * 0.7 + e.headersPerSecond * 0.3;
  if (e.synced && e.headersPerSecond === 0) state.rate = 0;
  state.stored = Math.max(state.stored, e.storedHeight);
  if (e.synced !== state.wasSynced) {
    state.wasSynced = e.synced;
    if (e.synced) lines.push({ kind: 'synced', text: `In sync with the gateways at height ${count(e.height)}.` });
    else if (e.targetHeight > e.height) {
      lines.push({ kind: 'info', text: `New headers announced: syncing to height ${count(e.targetHeight)}.` });
    }
  }
  return lines;
}

export function tipStored(e: NewTip): LogEntry[] {
  const lines: LogEntry[] = [];
  // During the first sync a commit lands every few seconds; once in sync, each is news.
  if (state.wasSynced && (!state.tip || e.height > state.tip.height)) {
    lines.push({ kind: 'info', text: `New block at height ${count(e.height)}.` });
  }
  state.tip = { height: e.height, hash: e.hash, time: e.time };
  state.stored = e.height;
  return lines;
}

export function reorged(e: Reorg): LogEntry[] {
  return [
    {
      kind: 'reorg',
      text:
        `Reorg of ${count(e.depth)} block${e.depth === 1 ? '' : 's'}: the tip at height ${count(e.oldTip.height)} ` +
        `(${e.oldTip.hash.slice(0, 12)}…) was replaced by a chain with more work, tip ${count(e.newTip.height)} ` +
        `(${e.newTip.hash.slice(0, 12)}…).`,
    },
  ];
}

export function rejected(e: Rejected): LogEntry[] {
  return [
    { kind: 'rejected', text: `${gatewayName(e.gateway)} was rejected for breaking a rule: ${sentence(plain(e.reason))}` },
  ];
}

export function warned(e: GatewayWarning): LogEntry[] {
  return [
    { kind: 'warning', text: `${gatewayName(e.gateway)} sent a warning: ${e.text ? sentence(e.text) : '(no text).'}` },
  ];
}

/** The client failed; when `fatal`, it stopped and the caller stops the page too. */
export function failed(e: ClientError): LogEntry[] {
  const stopped = e.fatal ? ' The client stopped; reconnect to try again.' : '';
  if (e.fatal) state.errorStatus = 'Stopped by an error';
  return [{ kind: 'error', text: `${sentence(e.message)}${stopped}` }];
}
