import { describe, expect, it } from 'vitest';
import { encodeEntry, type HistoryEntry } from '../../src/domain/history.js';
import { resolvePolicy } from '../../src/domain/policy.js';
import { backtest } from '../../src/lab/backtest.js';
import { backtestSvg } from '../../src/lab/backtest-svg.js';

const T = Date.UTC(2026, 11, 1);
const policy = resolvePolicy({ failureThreshold: 2, timeoutSeconds: 5, halfOpenMaxCalls: 1 });
const run = (circuit: string, entries: HistoryEntry[]) =>
  backtest({
    circuit,
    entries: entries.map((e) => ({ t: e.t, text: encodeEntry(e) })),
    current: policy,
    proposed: [policy],
    from: T,
    to: T + 600_000,
  });

describe('the backtest picture (lab/backtest-svg.ts)', () => {
  it("writes the circuit's name as text, never as markup", () => {
    const svg = backtestSvg(run('a<b>&"c\'', []));
    expect(svg).toContain('a&#60;b&#62;&#38;&#34;c&#39;');
    expect(svg).not.toContain('a<b>');
  });

  it('draws an empty history with numbers only (no NaN or Infinity in the markup)', () => {
    const svg = backtestSvg(run('db', []));
    expect(svg).not.toMatch(/NaN|Infinity/);
    expect(svg).toContain('0 openings');
  });

  it('colours a minute by the state it spent most of, and marks each opening', () => {
    const failed = (t: number): HistoryEntry => ({ type: 'outcome', t: T + t, outcome: { success: false } });
    const probe: HistoryEntry = { type: 'outcome', t: T + 128_000, outcome: { success: true } };
    const svg = backtestSvg(run('db', [failed(120_000), failed(120_500), probe]));
    // Open from 2:00.5 for 5 s, half-open 2.5 s, closed by the probe: that minute is red in both bands.
    expect(svg.match(/fill="#d62728" fill-opacity/g)).toHaveLength(2);
    expect(svg.match(/l-3\.5 -6 h7 z" fill="#d62728"/g)).toHaveLength(3); // 2 bands and the legend
    expect(svg).toContain('1 opening ·');
  });
});
