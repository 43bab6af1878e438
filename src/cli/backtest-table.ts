/** `circuitlog backtest`'s output: the comparison (current vs proposed) or the ranked grid, as tables. */
import type { LabResult } from '../http/backtest-cache.js';
import type { BacktestResult, GridResult, RunFigures } from '../lab/backtest-types.js';
import { type Output, tableLine, tableWidths } from './output.js';

const iso = (ms: number) => new Date(ms).toISOString();

/** `1h 2m 3s`, `4.2s`, `850ms`. */
export function durationText(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)}s`;
  const s = Math.round(ms / 1_000);
  const parts = [
    Math.floor(s / 3_600) && `${Math.floor(s / 3_600)}h`,
    `${Math.floor((s % 3_600) / 60)}m`,
    `${s % 60}s`,
  ];
  return parts.filter(Boolean).join(' ');
}

function median(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

type Figures = Omit<RunFigures, 'series' | 'transitions'>;

/** The comparison's rows: one per figure, a column per policy. */
export function figureRows(columns: readonly Figures[]): string[][] {
  const row = (label: string, cell: (f: Figures) => string) => [label, ...columns.map(cell)];
  return [
    row('openings', (f) => String(f.openings)),
    row('time open', (f) => durationText(f.time_open_ms)),
    row('longest open', (f) => durationText(f.longest_open_ms)),
    row('refused calls', (f) => String(f.refused_calls)),
    row('flaps', (f) => String(f.flaps)),
    row('median detection', (f) => {
      const m = median(f.detection_ms);
      return m === null ? '-' : durationText(m);
    }),
  ];
}

/** The answer as tables (or its JSON with `--json`). */
export function printResult(result: LabResult, json: boolean, io: Output): void {
  if (json) {
    io.out(`${JSON.stringify(result)}\n`);
    return;
  }
  const range = `${iso(result.from)} .. ${iso(result.to)}`;
  const start = result.start === 'created' ? 'from its creation' : 'mid-history: closed and empty assumed';
  io.out(`${result.circuit}: ${result.outcomes} outcomes, ${range} (${start})\n`);
  if (result.skipped > 0) io.out(`${result.skipped} stored entries could not be read: skipped\n`);
  if ('proposed' in result) printComparison(result, io);
  else printGrid(result, io);
  io.out(`answer id ${result.id}\n`);
}

function printComparison(result: BacktestResult, io: Output): void {
  const header = ['', 'CURRENT', 'PROPOSED'];
  const rows = figureRows([result.current, result.proposed]);
  const f = result.fidelity;
  rows.push(['fidelity', `${f.matched}/${f.recorded} (${f.ratio.toFixed(3)})`, '']);
  const widths = tableWidths(header, rows);
  io.out(tableLine(header, widths));
  for (const cells of rows) io.out(tableLine(cells, widths));
  if (f.manual_actions > 0) io.out(`${f.manual_actions} manual actions in the range (not counted in fidelity)\n`);
  if (f.first_mismatch !== null) {
    const t = (x: { from: string; to: string; reason: string; at: number } | null) =>
      x === null ? 'nothing' : `${x.from} -> ${x.to} (${x.reason}) at ${iso(x.at)}`;
    io.out(`first mismatch: recorded ${t(f.first_mismatch.recorded)}, replayed ${t(f.first_mismatch.replayed)}\n`);
  }
}

function printGrid(result: GridResult, io: Output): void {
  io.out(`objective: ${result.objective}\n${result.outages} outages\n`);
  const header = ['RANK', 'VALUES', 'OPENINGS', 'REFUSED', 'FLAPS', 'MEDIAN DETECTION', 'CAUGHT', 'MEETS'];
  const rows = [...result.candidates]
    .sort((a, b) => a.rank - b.rank)
    .map((c) => {
      const m = median(c.figures.detection_ms);
      return [
        String(c.rank),
        Object.entries(c.values)
          .map(([k, v]) => `${k}=${v}`)
          .join(' '),
        String(c.figures.openings),
        String(c.figures.refused_calls),
        String(c.figures.flaps),
        m === null ? '-' : durationText(m),
        `${c.outages_caught}/${result.outages}`,
        c.meets_objective ? 'yes' : 'no',
      ];
    });
  const widths = tableWidths(header, rows);
  io.out(tableLine(header, widths));
  for (const cells of rows) io.out(tableLine(cells, widths));
}
