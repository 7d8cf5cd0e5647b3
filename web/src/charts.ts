// Live charts: each series is a fixed-size ring of samples, drawn with uPlot once a second
// (by the caller's timer), never per event. Drawing reuses the same arrays every time.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

/** Samples kept per series: two minutes at one a second. */
export const POINTS = 120;
/** The time shown, in seconds: from the first sample, growing to this, then scrolling. */
const WINDOW_SECONDS = 120;
const MIN_WINDOW_SECONDS = 10;
/** Candidate distances between time labels, in seconds. */
const STEPS = [2, 5, 10, 15, 30, 60];

/** A fixed-size ring of numbers (NaN for "no value"); the oldest falls out. */
export class Ring {
  readonly #values: Float64Array;
  #start = 0;
  #length = 0;

  constructor(capacity: number) {
    this.#values = new Float64Array(capacity);
  }

  get length(): number {
    return this.#length;
  }

  push(v: number): void {
    const cap = this.#values.length;
    if (this.#length < cap) {
      this.#values[(this.#start + this.#length) % cap] = v;
      this.#length += 1;
    } else {
      this.#values[this.#start] = v;
      this.#start = (this.#start + 1) % cap;
    }
  }

  /** The newest value, or NaN. */
  last(): number {
    if (this.#length === 0) return NaN;
    return this.#values[(this.#start + this.#length - 1) % this.#values.length];
  }

  /** Oldest first into `out` (resized to the ring's length; NaN becomes null, a gap). */
  fill(out: (number | null)[]): void {
    const cap = this.#values.length;
    out.length = this.#length;
    for (let i = 0; i < this.#length; i++) {
      const v = this.#values[(this.#start + i) % cap];
      out[i] = Number.isNaN(v) ? null : v;
    }
  }
}

export interface SeriesSpec {
  label: string;
  color: string;
  /** 0: the left axis; 1: the right axis. */
  axis: 0 | 1;
  /** A value on the axis ("5.0 MB/s"). */
  format: (v: number) => string;
  /** The newest value in the caption (default: `format`). */
  caption?: (v: number) => string;
  /** The least top of the axis, so an idle chart still has sensible labels (default 1). */
  floor?: number;
}

const AXIS = {
  stroke: '#5b6470',
  font: '11px system-ui, sans-serif',
  grid: { stroke: '#eceef2', width: 1 },
  ticks: { stroke: '#dfe3e8', width: 1, size: 4 },
};

/** One chart: its rings, its uPlot, and the caption showing the newest values. */
export class LiveChart {
  readonly #x = new Ring(POINTS);
  readonly #ys: Ring[];
  readonly #data: (number | null)[][];
  readonly #plot: uPlot;
  readonly #now: HTMLElement | null;
  readonly #series: SeriesSpec[];
  readonly #figure: HTMLElement;
  #dirty = false;

  constructor(figure: HTMLElement, series: SeriesSpec[], height = 140) {
    this.#series = series;
    this.#figure = figure;
    figure.dataset.empty = 'true';
    this.#ys = series.map(() => new Ring(POINTS));
    this.#data = [[], ...series.map(() => [])];
    this.#now = figure.querySelector('.chart-now');
    const target = figure.querySelector<HTMLElement>('.plot') ?? figure;
    const right = series.some((s) => s.axis === 1);
    const axisFormat = (axis: 0 | 1) => {
      const spec = series.find((s) => s.axis === axis) ?? series[0];
      return (_u: uPlot, splits: number[]) => splits.map((v) => (v == null ? '' : spec.format(v)));
    };
    // Wide enough for the longest label ("10.0 MB/s"), at about 6.5 px a character.
    const axisSize = (_u: uPlot, values: string[] | null) =>
      Math.max(40, Math.ceil(Math.max(0, ...(values ?? []).map((v) => v.length)) * 6.5) + 16);
    const yRange =
      (axis: 0 | 1) =>
      (_u: uPlot, _min: number | null, max: number | null): uPlot.Range.MinMax => {
        const floor = series.find((s) => s.axis === axis)?.floor ?? 1;
        return [0, Math.max(floor, (max ?? 0) * 1.15)];
      };
    const opts: uPlot.Options = {
      width: Math.max(target.clientWidth, 200),
      height,
      legend: { show: false },
      cursor: { show: false },
      scales: {
        x: {
          time: false,
          range: (_u, min, max) => {
            const end = max ?? 0;
            const start = Math.min(min ?? end, end - MIN_WINDOW_SECONDS);
            return [Math.max(start, end - WINDOW_SECONDS), end];
          },
        },
        y: { range: yRange(0) },
        ...(right ? { y2: { range: yRange(1) } } : {}),
      },
      series: [
        {},
        ...series.map((s) => ({
          label: s.label,
          stroke: s.color,
          width: 2,
          fill: `${s.color}1f`,
          scale: s.axis === 1 ? 'y2' : 'y',
          points: { show: false },
          // A second without a value (no commit in it) joins its neighbours.
          spanGaps: true,
        })),
      ],
      axes: [
        {
          ...AXIS,
          // Labels counted back from the newest sample, at most five of them: once the
          // window is full they stay put while the data scrolls under them.
          splits: (_u, _axis, min, max) => {
            const step = STEPS.find((s) => (max - min) / s <= 4) ?? STEPS[STEPS.length - 1];
            const at: number[] = [];
            for (let v = max; v >= min - 1e-6; v -= step) at.unshift(v);
            return at;
          },
          values: (u, splits) =>
            splits.map((v) => {
              const back = Math.round((u.scales.x.max ?? v) - v);
              return back === 0 ? 'now' : back % 60 === 0 ? `−${back / 60} min` : `−${back} s`;
            }),
        },
        { ...AXIS, scale: 'y', size: axisSize, values: axisFormat(0), stroke: right ? series[0].color : AXIS.stroke },
        ...(right
          ? [
              {
                ...AXIS,
                scale: 'y2',
                side: 1 as const,
                size: axisSize,
                grid: { show: false },
                values: axisFormat(1),
                stroke: series.find((s) => s.axis === 1)?.color ?? AXIS.stroke,
              },
            ]
          : []),
      ],
    };
    this.#plot = new uPlot(opts, this.#data as uPlot.AlignedData, target);
    new ResizeObserver(() => {
      const width = target.clientWidth;
      if (width > 0 && width !== this.#plot.width) this.#plot.setSize({ width, height });
    }).observe(target);
  }

  /** Add a sample: a time in seconds, one value per series (NaN: none). */
  push(t: number, values: number[]): void {
    this.#x.push(t);
    this.#ys.forEach((r, i) => r.push(values[i] ?? NaN));
    this.#dirty = true;
  }

  /** Redraw if anything was added since the last draw. */
  draw(): void {
    if (!this.#dirty) return;
    this.#dirty = false;
    this.#x.fill(this.#data[0]);
    this.#ys.forEach((r, i) => r.fill(this.#data[i + 1]));
    this.#plot.setData(this.#data as uPlot.AlignedData);
    this.#figure.dataset.empty = String(this.#x.length < 2);
    if (this.#now) {
      const parts = this.#series.map((s, i) => {
        const v = this.#ys[i].last();
        const text = Number.isNaN(v) ? '–' : (s.caption ?? s.format)(v);
        return this.#series.length > 1 ? `<span class="swatch" style="--c:${s.color}"></span>${text}` : text;
      });
      this.#now.innerHTML = parts.join(' <span class="sep">·</span> ');
    }
  }

  /** Samples held (for tests). */
  points(): number {
    return this.#x.length;
  }
}
