// Numbers, sizes, durations, errors and the engine's reasons as a reader wants them.

const integer = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
const compact = new Intl.NumberFormat(undefined, { notation: 'compact', maximumFractionDigits: 1 });

/** 925000 -> "925,000" (in the reader's locale). */
export function count(n: number): string {
  return integer.format(n);
}

/** 281000 -> "281K". */
export function short(n: number): string {
  return compact.format(n);
}

const UNITS = ['B', 'KB', 'MB', 'GB', 'TB'];

/** Bytes in powers of 1,000 (as browsers report storage): 33554432 -> "33.6 MB". */
export function bytes(n: number): string {
  let v = n;
  let u = 0;
  while (Math.abs(v) >= 1000 && u < UNITS.length - 1) {
    v /= 1000;
    u += 1;
  }
  const digits = u === 0 || v >= 100 ? 0 : 1;
  return `${v.toFixed(digits)} ${UNITS[u]}`;
}

/** Seconds -> "4 s", "2 min 5 s", "1 h 3 min". */
export function duration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '–';
  if (seconds < 1) return 'under a second';
  const s = Math.round(seconds);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** "3 min ago", "in 2 h" for a time in seconds since the epoch. */
export function ago(epochSeconds: number, nowMs = Date.now()): string {
  const d = nowMs / 1000 - epochSeconds;
  const a = Math.abs(d);
  let text: string;
  if (a < 90) text = `${Math.round(a)} s`;
  else if (a < 5400) text = `${Math.round(a / 60)} min`;
  else if (a < 172800) text = `${Math.round(a / 3600)} h`;
  else if (a < 2 * 365.25 * 86400) text = `${Math.round(a / 86400)} days`;
  else text = `${(a / (365.25 * 86400)).toFixed(1)} years`;
  return d >= 0 ? `${text} ago` : `in ${text}`;
}

/** Local wall-clock time of day, "14:07:31". */
export function clock(ms: number): string {
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** "ws://127.0.0.1:8335#03be4e…b7202" -> host and a shortened node id. */
export function gatewayLabel(url: string): { address: string; node: string } {
  const hash = url.indexOf('#');
  const address = hash < 0 ? url : url.slice(0, hash);
  const id = hash < 0 ? '' : url.slice(hash + 1);
  const node = id.length > 16 ? `${id.slice(0, 8)}…${id.slice(-6)}` : id;
  return { address: address.replace(/^wss?:\/\//, ''), node };
}

/**
 * A reason from the engine made easier to read: block hashes shortened, and WebSocket close
 * code 1006 (which says only "closed without a reason") left out.
 */
export function plain(reason: string): string {
  return reason.replace(/\s*\(code 1006\)/, '').replace(/\b([0-9a-f]{12})[0-9a-f]{52}\b/g, '$1…');
}

/** A reason from the engine as a sentence: capital first letter, final period. */
export function sentence(text: string): string {
  const t = text.trim();
  if (!t) return t;
  const s = t[0].toUpperCase() + t.slice(1);
  return /[.!?]$/.test(s) ? s : `${s}.`;
}

/** A message as the end of a sentence: no trailing period, first letter as is. */
function clause(message: string): string {
  return message.trim().replace(/[.\s]+$/, '');
}

/**
 * An error from the lightwire package (its `name` says what failed) as a sentence a user
 * understands, with the package's own message kept for detail.
 */
export function explain(e: unknown): string {
  const name = e instanceof Error ? e.name : 'Error';
  const detail = clause(e instanceof Error ? e.message : String(e));
  switch (name) {
    case 'InvalidGateway':
      return (
        `A gateway connect string is not valid (${detail}). ` +
        'It looks like ws://host:port#node-id, where the node id is the 66 hex digits the gateway prints when it starts.'
      );
    case 'InvalidOptions':
      return `The client could not start with these settings (${detail}). Check the gateways and the network.`;
    case 'UnsupportedBrowser':
      return `This browser cannot run the client (${detail}). A current Chrome, Firefox, Edge or Safari can.`;
    case 'StoreUnavailable':
      return (
        `This browser does not let this page use its local database, IndexedDB (${detail}). ` +
        'Private windows and blocked site data are the usual causes.'
      );
    case 'QuotaExceeded':
      return `The browser will not store more for this page (${detail}). Free some space, or clear the store.`;
    case 'StoreError':
      return (
        `This browser would not let the client use its local database, IndexedDB (${detail}). ` +
        'Private windows, blocked site data or a full disk are the usual causes.'
      );
    case 'KeyError':
      return `The client could not create or load its own key in this browser's storage (${detail}).`;
    case 'StoreBusy':
      return 'The local store is still open, probably in another tab. Close other lightwire tabs, then try again.';
    case 'InsufficientFunds':
      return /spent only when named/.test(detail)
        ? `The wallet cannot pay that (${detail}). Watch the descriptor those addresses come from to spend their coins.`
        : `The wallet cannot pay that (${detail}). Lower the amount or the fee rate, or wait for coins to confirm.`;
    case 'InvalidArgument':
      return `That cannot be done as entered: ${detail}.`;
    case 'WorkerError':
      return `The background worker that runs the client failed (${detail}). Reloading the page usually helps.`;
    default:
      return `Something went wrong: ${detail}.`;
  }
}
