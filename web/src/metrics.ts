// The six live charts and the sample of `client.metrics()` that feeds them: rates from the
// difference between two samples a second apart.
import { LiveChart } from './charts';
import { bytes, count, short } from './format';
import { $, renderProgress } from './render';
import { state } from './state';
import type { Metrics } from 'lightwire';

const ORANGE = '#f7931a';
const BLUE = '#2563eb';
const GREEN = '#16a34a';
const perSecond = (f: (v: number) => string) => (v: number) => `${f(v)}/s`;

const ms = (v: number) => `${v < 10 ? v.toFixed(1) : count(v)} ms`;

const charts = {
  headers: new LiveChart($('chart-headers'), [
    { label: 'headers', color: ORANGE, axis: 0, format: perSecond(short) },
  ]),
  bytes: new LiveChart($('chart-bytes'), [
    { label: 'from gateways', color: ORANGE, axis: 0, format: perSecond(bytes), caption: (v) => `${bytes(v)}/s from gateways`, floor: 1000 },
    { label: 'from mirrors', color: GREEN, axis: 0, format: perSecond(bytes), caption: (v) => `${bytes(v)}/s from mirrors`, floor: 1000 },
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

let sampling = false;

/** One sample: the metrics into the state, the rates since the last sample into the charts. */
export async function sample(): Promise<void> {
  const c = state.client;
  if (!c || sampling) return;
  sampling = true;
  try {
    const m = await c.metrics();
    if (c !== state.client) return;
    state.metrics = m;
    state.stored = Math.max(state.stored, m.storedHeight);
    const p = state.previous;
    state.previous = m;
    if (p) {
      const dt = (m.elapsedMs - p.elapsedMs) / 1000;
      if (dt > 0) {
        const per = (a: number, b: number) => Math.max(0, a - b) / dt;
        const t = Date.now() / 1000;
        const commits = m.idbCommits - p.idbCommits;
        charts.headers.push(t, [per(m.headersValidated, p.headersValidated)]);
        charts.bytes.push(t, [per(m.bytesIn, p.bytesIn), per(mirrorBytes(m), mirrorBytes(p)), per(m.bytesOut, p.bytesOut)]);
        renderSources(m, p, dt);
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

/** Bytes taken from every mirror. */
function mirrorBytes(m: Metrics): number {
  return (m.sources ?? []).filter((s) => s.kind === 'mirror').reduce((a, s) => a + s.bytes, 0);
}

/** Where the bytes came from: each gateway and mirror, its total and its rate now. */
function renderSources(m: Metrics, p: Metrics, dt: number): void {
  const list = $('sources');
  const before = new Map((p.sources ?? []).map((s) => [`${s.kind} ${s.url}`, s.bytes]));
  list.replaceChildren(
    ...(m.sources ?? []).map((s) => {
      const li = document.createElement('li');
      const rate = Math.max(0, s.bytes - (before.get(`${s.kind} ${s.url}`) ?? s.bytes)) / dt;
      li.textContent = `${s.kind} ${s.url}: ${bytes(s.bytes)} (${bytes(rate)}/s)`;
      li.className = s.kind;
      return li;
    }),
  );
}

export function drawCharts(): void {
  Object.values(charts).forEach((c) => c.draw());
}

/** Samples held per chart, by name. */
export function chartPoints(): Record<string, number> {
  return Object.fromEntries(Object.entries(charts).map(([k, c]) => [k, c.points()]));
}
