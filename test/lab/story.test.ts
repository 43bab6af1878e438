import { writeFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import type { BacktestResult, RunFigures } from '../../src/lab/backtest-types.js';
import { backtest } from '../../src/lab/backtest.js';
import { backtestSvg } from '../../src/lab/backtest-svg.js';
import {
  BATCH_FAILURES_MS,
  BATCH_STARTS,
  CALL_EVERY_MS,
  DAY_START,
  EIGHT_IN_FIFTEEN,
  FIVE_IN_TEN,
  HOUR_MS,
  OUTAGE_END,
  OUTAGE_START,
  type RecordedStory,
  recordStory,
} from './story.js';

/**
 * The seed's story (issue 31, docs/policy-lab.md's worked example), on the pure engine: a day
 * recorded under "5 in 10 s" (test/lab/story.ts), backtested against "8 in a 15 s window".
 * A day at 50 calls/s is 4.3 million calls: recording and replaying it takes a while.
 */
describe('the seed story: a recorded day backtested', () => {
  let story: RecordedStory;
  let result: BacktestResult;
  beforeAll(() => {
    story = recordStory();
    result = backtest(
      {
        circuit: 'orders-db',
        entries: story.entries,
        current: FIVE_IN_TEN,
        proposed: [EIGHT_IN_FIFTEEN],
        from: DAY_START,
        to: DAY_START + 24 * HOUR_MS,
        createdAt: DAY_START,
      },
      'story',
    );
  }, 300_000);

  const openings = (r: RunFigures) =>
    r.transitions.filter((t) => t.from === 'closed' && t.to === 'open').map((t) => t.at);
  const inOutage = (at: number) => at >= OUTAGE_START && at < OUTAGE_END;
  /** The batch job's 5th failing call: where 5 failures are in a 10 s window. */
  const fifthBatchFailure = BATCH_STARTS.map((b) => b + BATCH_FAILURES_MS[4]!);

  it('records every admitted call of the day and none of the refused ones', () => {
    const outcomes = story.entries.filter((e) => !e.text.startsWith('["x"')).length;
    expect(story.calls).toBe((24 * HOUR_MS) / CALL_EVERY_MS);
    expect(outcomes + story.refused).toBe(story.calls);
    expect(result.outcomes).toBe(outcomes);
    expect(result.start).toBe('created');
  });

  it('replays the live policy faithfully: every recorded transition, same time and reason', () => {
    const recorded = story.entries.filter((e) => e.text.startsWith('["x"')).length;
    expect(result.fidelity).toEqual({ matched: recorded, recorded, ratio: 1, first_mismatch: null, manual_actions: 0 });
  });

  it('"5 in 10 s" opens 24 times falsely, at each batch job\'s 5th failure, and on the outage\'s 5th failing call', () => {
    const opened = openings(result.current);
    expect(opened.filter((at) => !inOutage(at))).toEqual(fifthBatchFailure);
    expect(opened.filter(inOutage)).toEqual([OUTAGE_START + 4 * CALL_EVERY_MS]);
    expect(result.current.openings).toBe(25);
    // Every recorded outcome is a call the live circuit admitted.
    expect(result.current.refused_calls).toBe(0);
  });

  it('"8 in a 15 s window" never opens on the batch job and catches the outage within 15 s', () => {
    // The live circuit opens on the outage's 5th failure and lets one probe through a second
    // (probes at +1.08 s, +2.08 s, ...): at +2.08 s the proposed 15 s window holds the 600
    // successes of the 12 s before the outage and 7 failures, 1.15 % >= 1.07 % (at +1.08 s:
    // 6 of 656, 0.91 %).
    expect(openings(result.proposed)).toEqual([OUTAGE_START + 2_080]);
    expect(result.proposed.openings).toBe(1);
    expect(result.proposed.detection_ms).toEqual([2_080]);
    expect(result.proposed.flaps).toBe(0);
  });

  it('keeps the outage open under both policies until the first probe after it ends', () => {
    const closings = (r: RunFigures) => r.transitions.filter((t) => t.to === 'closed').map((t) => t.at);
    const lastOutageClosing = (r: RunFigures) => closings(r).find((at) => at >= OUTAGE_END)!;
    expect(lastOutageClosing(result.current) - OUTAGE_END).toBeLessThan(1_000 + CALL_EVERY_MS);
    expect(lastOutageClosing(result.proposed) - OUTAGE_END).toBeLessThan(1_000 + CALL_EVERY_MS);
    expect(result.proposed.longest_open_ms).toBeGreaterThan(OUTAGE_END - OUTAGE_START - 3_000);
  });

  it("gives a per-minute series of the day: 1,440 minutes, the outage's failures in its minutes", () => {
    expect(result.current.series).toHaveLength(1_440);
    expect(result.current.series_bucket_ms).toBe(60_000);
    const sum = (k: 'outcomes' | 'failures') => result.current.series.reduce((a, m) => a + m[k], 0);
    expect(sum('outcomes')).toBe(result.outcomes);
    const minute = result.current.series.find((m) => m.t === OUTAGE_START)!;
    expect(minute.open_ms + minute.half_open_ms).toBeGreaterThan(59_000);
  });

  it('draws the day: 25 openings marked on the current band, 1 on the proposed', () => {
    const svg = backtestSvg(result);
    // docs/images/policy-lab-story.svg is this picture: CIRCUITLOG_STORY_SVG=<file> writes it.
    if (process.env.CIRCUITLOG_STORY_SVG) writeFileSync(process.env.CIRCUITLOG_STORY_SVG, svg);
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    const marks = [...svg.matchAll(/<path d="M([\d.]+) ([\d.]+) l-3\.5 -6 h7 z"/g)].map((m) => Number(m[2]));
    const bands = [...new Set(marks)].sort((a, b) => a - b);
    expect(bands).toHaveLength(3); // the legend's mark, then the two bands
    expect(marks.filter((y) => y === bands[1])).toHaveLength(25);
    expect(marks.filter((y) => y === bands[2])).toHaveLength(1);
    expect(svg).toContain('25 openings');
  });
});
