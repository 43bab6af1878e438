/**
 * The backtest's picture (`GET /circuits/{name}/backtest/{id}.svg`, docs/policy-lab.md): time
 * across; above, the recorded failure rate per minute; below, one band per policy (current,
 * proposed) coloured by its state in each minute (closed green, half-open orange, open red),
 * with a mark at each opening so a one-second opening shows at a day's scale. House style of
 * docs/images: white ground, sans-serif, grey grid, the tab10 colours.
 */
import type { BacktestResult, MinuteFigures, RunFigures } from './backtest-types.js';

export interface BacktestSvgOptions {
  readonly width?: number;
  readonly height?: number;
}

const COLOURS = Object.freeze({
  rate: '#1f77b4',
  closed: '#dff0d8',
  halfOpen: '#ff7f0e',
  open: '#d62728',
  grid: '#ddd',
  text: '#333',
});
const HOUR_MS = 3_600_000;
const TICK_STEPS_MS = [
  60_000,
  5 * 60_000,
  10 * 60_000,
  30 * 60_000,
  HOUR_MS,
  2 * HOUR_MS,
  3 * HOUR_MS,
  6 * HOUR_MS,
  12 * HOUR_MS,
  24 * HOUR_MS,
];

/** `&`, `<`, `>`, `"` and `'` as XML entities (a circuit name is outside input). */
function xml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const fixed = (n: number) => (Math.round(n * 10) / 10).toString();

/** A round upper bound of the rate axis, in percent. */
function rateCeiling(max: number): number {
  for (const c of [1, 2, 5, 10, 20, 25, 50, 100]) if (max <= c) return c;
  return 100;
}

function timeLabel(t: number, stepMs: number): string {
  const iso = new Date(t).toISOString();
  if (stepMs >= 24 * HOUR_MS) return iso.slice(5, 10);
  return iso.slice(11, 16);
}

/** The picture as an SVG document. */
export function backtestSvg(result: BacktestResult, options: BacktestSvgOptions = {}): string {
  const W = options.width ?? 960;
  const H = options.height ?? 360;
  const pad = { l: 150, r: 24, t: 56, b: 44 };
  const bandH = 22;
  const bandGap = 10;
  const chartBottom = H - pad.b - 2 * (bandH + bandGap) - 8;
  const series = result.current.series;
  const bucketMs = result.current.series_bucket_ms;
  const from = series[0]?.t ?? result.from;
  const to = series.length === 0 ? result.to : series.at(-1)!.t + bucketMs;
  const span = Math.max(1, to - from);
  const x = (t: number) => pad.l + ((t - from) / span) * (W - pad.l - pad.r);
  const rates = series.map((m) => (m.outcomes === 0 ? 0 : (100 * m.failures) / m.outcomes));
  const top = rateCeiling(Math.max(0, ...rates));
  const y = (r: number) => chartBottom - (r / top) * (chartBottom - pad.t);
  const parts: string[] = [];
  parts.push(
    `<text x="${pad.l}" y="18" font-size="13">${xml(result.circuit)}: recorded failure rate per minute, and each policy's state</text>`,
    `<text x="${pad.l}" y="34" font-size="10" fill="#777">${new Date(from).toISOString().slice(0, 16)}Z to ${new Date(to).toISOString().slice(0, 16)}Z · ${result.outcomes.toLocaleString('en-US')} outcomes · fidelity ${result.fidelity.matched}/${result.fidelity.recorded}</text>`,
  );
  for (let i = 0; i <= 4; i++) {
    const r = (top * i) / 4;
    parts.push(
      `<line x1="${pad.l}" x2="${W - pad.r}" y1="${fixed(y(r))}" y2="${fixed(y(r))}" stroke="${COLOURS.grid}"/>`,
      `<text x="${pad.l - 4}" y="${fixed(y(r) + 4)}" text-anchor="end" font-size="10">${r}%</text>`,
    );
  }
  parts.push(
    `<text transform="translate(${pad.l - 40},${fixed((pad.t + chartBottom) / 2)}) rotate(-90)" text-anchor="middle" font-size="11">failure rate</text>`,
  );
  if (series.length > 0) {
    const pts = series.map((m, i) => `${fixed(x(m.t + bucketMs / 2))},${fixed(y(rates[i]!))}`);
    parts.push(
      `<polygon points="${fixed(x(from + bucketMs / 2))},${chartBottom} ${pts.join(' ')} ${fixed(x(series.at(-1)!.t + bucketMs / 2))},${chartBottom}" fill="${COLOURS.rate}" fill-opacity="0.15"/>`,
      `<polyline points="${pts.join(' ')}" fill="none" stroke="${COLOURS.rate}" stroke-width="1.5"/>`,
    );
  }
  const bands: [string, RunFigures][] = [
    ['current', result.current],
    ['proposed', result.proposed],
  ];
  bands.forEach(([label, run], i) => {
    const by = chartBottom + 8 + bandGap + i * (bandH + bandGap);
    parts.push(...band(run, label, by, bandH, x, bucketMs, pad.l, W - pad.r));
  });
  const step = TICK_STEPS_MS.find((s) => span / s <= 12) ?? 24 * HOUR_MS;
  const axisY = H - pad.b + 4;
  for (let t = Math.ceil(from / step) * step; t <= to; t += step) {
    parts.push(
      `<line x1="${fixed(x(t))}" x2="${fixed(x(t))}" y1="${pad.t}" y2="${axisY}" stroke="${COLOURS.grid}" stroke-dasharray="2 3"/>`,
      `<text x="${fixed(x(t))}" y="${axisY + 12}" text-anchor="middle" font-size="10">${timeLabel(t, step)}</text>`,
    );
  }
  parts.push(
    `<text x="${(pad.l + W - pad.r) / 2}" y="${H - 8}" text-anchor="middle" font-size="11">time (UTC)</text>`,
    ...legend(W - pad.r, 46),
  );
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12" fill="${COLOURS.text}"><rect width="100%" height="100%" fill="white"/>${parts.join('')}</svg>\n`;
}

/** One policy's band: its state per point, a mark at each opening, its name and figures. */
function band(
  run: RunFigures,
  label: string,
  by: number,
  h: number,
  x: (t: number) => number,
  bucketMs: number,
  left: number,
  right: number,
): string[] {
  const out = [`<rect x="${left}" y="${by}" width="${right - left}" height="${h}" fill="${COLOURS.closed}"/>`];
  for (const m of run.series) out.push(...stateRect(m, by, h, x, bucketMs));
  for (const t of run.transitions) {
    if (t.from !== 'closed' || t.to !== 'open') continue;
    const cx = fixed(x(t.at));
    out.push(`<path d="M${cx} ${by - 1} l-3.5 -6 h7 z" fill="${COLOURS.open}"/>`);
  }
  out.push(
    `<text x="${left - 6}" y="${by + 9}" text-anchor="end" font-size="11" font-weight="bold">${label}</text>`,
    `<text x="${left - 6}" y="${by + h}" text-anchor="end" font-size="9" fill="#555">${plural(run.openings, 'opening')} · ${run.refused_calls.toLocaleString('en-US')} refused</text>`,
  );
  return out;
}

/** A point's state: red when it was open more than half-open, orange when half-open more, deeper the longer. */
function stateRect(m: MinuteFigures, by: number, h: number, x: (t: number) => number, bucketMs: number): string[] {
  const notClosed = m.open_ms + m.half_open_ms;
  if (notClosed <= 0) return [];
  const colour = m.open_ms >= m.half_open_ms ? COLOURS.open : COLOURS.halfOpen;
  const opacity = 0.45 + 0.55 * Math.min(1, notClosed / bucketMs);
  const x0 = x(m.t);
  const width = Math.max(1.5, x(m.t + bucketMs) - x0);
  return [
    `<rect x="${fixed(x0)}" y="${by}" width="${fixed(width)}" height="${h}" fill="${colour}" fill-opacity="${opacity.toFixed(2)}"/>`,
  ];
}

const plural = (n: number, word: string) => `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;

function legend(right: number, y: number): string[] {
  const items: [string, string, 'line' | 'box' | 'mark'][] = [
    ['failure rate', COLOURS.rate, 'line'],
    ['closed', COLOURS.closed, 'box'],
    ['half-open', COLOURS.halfOpen, 'box'],
    ['open', COLOURS.open, 'box'],
    ['opening', COLOURS.open, 'mark'],
  ];
  const widths = items.map(([label]) => label.length * 6 + 30);
  let x = right - widths.reduce((a, b) => a + b, 0);
  const out: string[] = [];
  items.forEach(([label, colour, shape], i) => {
    if (shape === 'line')
      out.push(`<line x1="${x}" x2="${x + 14}" y1="${y - 4}" y2="${y - 4}" stroke="${colour}" stroke-width="2"/>`);
    else if (shape === 'box')
      out.push(
        `<rect x="${x}" y="${y - 9}" width="14" height="10" fill="${colour}" stroke="#999" stroke-width="0.5"/>`,
      );
    else out.push(`<path d="M${x + 7} ${y} l-3.5 -6 h7 z" fill="${colour}"/>`);
    out.push(`<text x="${x + 18}" y="${y}" font-size="10">${label}</text>`);
    x += widths[i]!;
  });
  return out;
}
