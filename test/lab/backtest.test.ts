import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/domain/errors.js';
import { encodeEntry, type HistoryEntry, type StoredEntry } from '../../src/domain/history.js';
import { type CircuitPolicy, resolvePolicy } from '../../src/domain/policy.js';
import { POLICY_DEFAULTS } from '../../src/domain/policy-defaults.js';
import type { BacktestInput } from '../../src/lab/backtest-types.js';
import { backtest, evaluateCandidates, grid, gridPoints, proposedPolicy, rankGrid } from '../../src/lab/backtest.js';
import { recordCalls } from './story.js';

const T = Date.UTC(2026, 11, 1);
const policy = (failureThreshold: number, timeoutSeconds = 10): CircuitPolicy =>
  resolvePolicy({ failureThreshold, timeoutSeconds, halfOpenMaxCalls: 1 });
const stored = (...entries: HistoryEntry[]): StoredEntry[] => entries.map((e) => ({ t: e.t, text: encodeEntry(e) }));
const ok = (t: number): HistoryEntry => ({ type: 'outcome', t: T + t, outcome: { success: true } });
const failed = (t: number): HistoryEntry => ({ type: 'outcome', t: T + t, outcome: { success: false } });
const moved = (t: number, from: string, to: string, reason: string, at = t): HistoryEntry =>
  ({ type: 'transition', t: T + t, transition: { from, to, reason, at: T + at } }) as HistoryEntry;
const input = (entries: StoredEntry[], current: CircuitPolicy, proposed: CircuitPolicy): BacktestInput => ({
  circuit: 'db',
  entries,
  current,
  proposed: [proposed],
  from: T,
  to: T + 20_000,
});
const short = (r: { transitions: { from: string; to: string; reason: string; at: number }[] }) =>
  r.transitions.map((t) => `${t.from}>${t.to} ${t.reason} @${t.at - T}`);

describe('a proposed replay (lab/replay.ts)', () => {
  it('counts the recorded outcomes it would have refused and does not feed them', () => {
    // Live never opens; the proposed opens on the 3rd failure: the later success does not close it.
    const history = stored(failed(0), failed(1_000), failed(2_000), ok(3_000), ok(4_000));
    const result = backtest(input(history, policy(100), policy(3)));
    expect(short(result.proposed)).toEqual([
      'closed>open failure_threshold_reached @2000',
      'open>half_open open_timeout_elapsed @12000',
    ]);
    expect(result.proposed.refused_calls).toBe(2);
    expect(result.proposed.series[0]!.refused).toBe(2);
    expect(result.current.refused_calls).toBe(0);
  });

  it('feeds an outcome it refused when the recorded circuit refused it too (a late outcome the server took)', () => {
    // Recorded with POST outcomes: the live circuit opened at 1 s and a success at 2 s closed it.
    const history = stored(
      failed(0),
      failed(1_000),
      moved(1_000, 'closed', 'open', 'failure_threshold_reached'),
      ok(2_000),
      moved(2_000, 'open', 'closed', 'success_recorded'),
    );
    const result = backtest(input(history, policy(2), policy(1)));
    expect(result.fidelity).toMatchObject({ matched: 2, recorded: 2, ratio: 1 });
    expect(short(result.proposed)).toEqual([
      'closed>open failure_threshold_reached @0',
      'open>closed success_recorded @2000',
    ]);
    expect(result.proposed.refused_calls).toBe(2); // 1 s: refused and not fed; 2 s: refused, fed
  });

  it('keeps its policy through the recorded policy changes, but takes the recorded forces', () => {
    const before = policy(5);
    const after = policy(2);
    const history = stored(
      { type: 'manual', t: T + 500, action: 'configure', before, after },
      failed(1_000),
      failed(1_100),
      moved(1_100, 'closed', 'open', 'failure_threshold_reached'),
      { type: 'manual', t: T + 3_000, action: 'configure', before: after, after: { ...after, forcedState: 'open' } },
      moved(3_000, 'open', 'open', 'forced_open'),
    );
    const result = backtest(input(history, { ...after, forcedState: 'open' }, policy(3)));
    expect(short(result.current)).toEqual([
      'closed>open failure_threshold_reached @1100',
      'open>open forced_open @3000',
      'open>half_open open_timeout_elapsed @11100',
    ]);
    expect(short(result.proposed)).toEqual(['closed>closed forced_open @3000']);
    expect(result.fidelity).toMatchObject({ ratio: 1, manual_actions: 2 });
  });

  it("says whether the range starts at the circuit's creation, and skips what it cannot decode", () => {
    const history = [...stored(failed(0), ok(1_000)), { t: T + 1_500, text: '["?"' }, ...stored(ok(2_000))];
    const whole = backtest({ ...input(history, policy(5), policy(5)), createdAt: T });
    expect(whole).toMatchObject({ start: 'created', skipped: 1, outcomes: 3 });
    const later = backtest({ ...input(history, policy(5), policy(5)), createdAt: T, from: T + 1_000 });
    expect(later).toMatchObject({ start: 'assumed_closed', skipped: 1, outcomes: 2 });
  });

  it('names the first recorded transition the live replay does not reproduce', () => {
    const history = stored(failed(0), failed(1_000), moved(1_000, 'closed', 'open', 'failure_threshold_reached', 900));
    const { fidelity } = backtest(input(history, policy(2), policy(2)));
    expect(fidelity).toMatchObject({ matched: 0, recorded: 1, ratio: 0 });
    expect(fidelity.first_mismatch).toEqual({
      recorded: { from: 'closed', to: 'open', reason: 'failure_threshold_reached', at: T + 900 },
      replayed: { from: 'closed', to: 'open', reason: 'failure_threshold_reached', at: T + 1_000 },
    });
  });

  it('counts a flap: an opening within one open time of the closing before it', () => {
    const history = stored(failed(0), ok(10_500), failed(11_000), ok(30_000));
    const result = backtest({ ...input(history, policy(100), policy(1)), to: T + 40_000 });
    // Opens at 0, half-open at 10 s, closed by the probe at 10.5 s, open again at 11 s: a flap.
    expect(result.proposed.openings).toBe(2);
    expect(result.proposed.flaps).toBe(1);
    expect(result.proposed.detection_ms).toEqual([0, 0]);
    expect(result.proposed.longest_open_ms).toBe(19_000); // 11 s until the probe at 30 s
  });
});

describe("a run's answer has a bound (lab/run-figures.ts)", () => {
  it('lists the first 10,000 transitions and detection times, and counts them all', () => {
    // 10,500 openings: a failure opens (threshold 1), the probe 1 s later closes.
    const entries = Array.from({ length: 10_500 }, (_, i) => [failed(i * 2_000), ok(i * 2_000 + 1_000)]).flat();
    const result = backtest({ ...input(stored(...entries), policy(1, 1), policy(1, 1)), to: T + 21_000_000 });
    expect(result.current.openings).toBe(10_500);
    expect(result.current.transitions_total).toBe(31_500);
    expect(result.current.transitions).toHaveLength(10_000);
    expect(result.current.detection_ms).toHaveLength(10_000);
  });
});

describe('grid candidates from dotted PATCH paths (lab/backtest.ts)', () => {
  const base = resolvePolicy({
    failureThreshold: 5,
    timeoutSeconds: 30,
    halfOpenMaxCalls: 1,
    window: {
      type: 'time',
      size: 10,
      minimumCalls: null,
      failureRateThreshold: 50,
      slowCallDurationMs: null,
      slowCallRateThreshold: 100,
    },
  });
  const defaults = POLICY_DEFAULTS.circuit;

  it('builds every combination, each patched over the policy', () => {
    const points = gridPoints(base, defaults, { failure_threshold: [5, 8, 10], 'window.size': [10, 15, 30] });
    expect(points).toHaveLength(9);
    expect(points[4]!.values).toEqual({ failure_threshold: 8, 'window.size': 15 });
    expect(points[4]!.policy.failureThreshold).toBe(8);
    expect(points[4]!.policy.window).toEqual({ ...base.window, size: 15 });
  });

  it('refuses more than 100 combinations', () => {
    const values = Array.from({ length: 11 }, (_, i) => i + 1);
    const error = (() => {
      try {
        gridPoints(base, defaults, { failure_threshold: values, timeout_seconds: values });
      } catch (e) {
        return e as AppError;
      }
    })();
    expect(error).toBeInstanceOf(AppError);
    expect(error!.code).toBe('BAD_REQUEST');
    expect(error!.message).toContain('121 combinations');
  });

  it('names a candidate the policy does not take, and the field', () => {
    try {
      gridPoints(base, defaults, { 'window.size': [10, 4000] });
      expect.unreachable();
    } catch (e) {
      expect((e as AppError).code).toBe('VALIDATION_FAILED');
      expect((e as AppError).message).toContain('window.size=4000');
      expect((e as AppError).options.fields).toEqual([
        { field: 'window.size', message: 'must be at most 3600 for a time window' },
      ]);
    }
  });

  it('refuses a path that is no policy field', () => {
    try {
      proposedPolicy(base, defaults, { failure_treshold: 3 });
      expect.unreachable();
    } catch (e) {
      expect((e as AppError).options.fields).toEqual([{ field: 'failure_treshold', message: 'is not a policy field' }]);
    }
    expect(() => gridPoints(base, defaults, { 'window..size': [1] })).toThrow(/not a policy field path/);
    expect(() => gridPoints(base, defaults, { failure_threshold: [] })).toThrow(/one or more numbers/);
  });
});

describe('a grid ranked by its objective (lab/backtest.ts)', () => {
  it('puts the candidates that catch every outage first, then by fewest refused calls', () => {
    // 50 calls/s for 3 minutes; every call fails from 60 s to 120 s: the live circuit (5 in a row, 1 s open) re-opens through it.
    const live = policy(5, 1);
    const h = recordCalls(live, T, T + 180_000, (t) => t >= T + 60_000 && t < T + 120_000);
    const candidates = [policy(1_000, 1), policy(5, 1), policy(5, 30), policy(20, 1)];
    const result = grid(
      { circuit: 'db', entries: h.entries, current: live, proposed: candidates, from: T, to: T + 180_000 },
      [{ failure_threshold: 1_000 }, { failure_threshold: 5 }, { timeout_seconds: 30 }, { failure_threshold: 20 }],
    );
    expect(result.outages).toBe(1);
    expect(result.candidates.map((c) => [c.values, c.meets_objective, c.outages_caught])).toEqual([
      [{ failure_threshold: 5 }, true, 1],
      [{ failure_threshold: 20 }, true, 1],
      [{ timeout_seconds: 30 }, true, 1],
      [{ failure_threshold: 1_000 }, false, 0],
    ]);
    const refused = result.candidates.slice(0, 3).map((c) => c.figures.refused_calls);
    expect(refused).toEqual([...refused].sort((a, b) => a - b));
    expect(result.objective).toContain('within 60 s');
  });

  it('ranks shares evaluated apart (as threads do) exactly as the grid evaluated at once', () => {
    const live = policy(5, 1);
    const h = recordCalls(live, T, T + 180_000, (t) => t >= T + 60_000 && t < T + 120_000);
    const candidates = [policy(1_000, 1), policy(5, 1), policy(5, 30), policy(20, 1), policy(3, 2)];
    const values = candidates.map((c) => ({
      failure_threshold: c.failureThreshold,
      timeout_seconds: c.timeoutSeconds,
    }));
    const whole = { circuit: 'db', entries: h.entries, current: live, proposed: candidates, from: T, to: T + 180_000 };
    const once = grid(whole, values, 'g');
    const shares = [evaluateCandidates(whole, 3, 5), evaluateCandidates(whole, 0, 1), evaluateCandidates(whole, 1, 3)];
    expect(shares.map((s) => s.scored.map((c) => c.index))).toEqual([[3, 4], [0], [1, 2]]);
    const { entries: _entries, ...rest } = whole;
    expect(rankGrid(rest, values, shares, 'g')).toEqual(once);
    expect(once.candidates).toHaveLength(5);
    // A share missing, or one candidate scored twice, is a bug, not a shorter answer.
    expect(() => rankGrid(rest, values, shares.slice(1), 'g')).toThrow(/every candidate/);
    expect(() => rankGrid(rest, values, [...shares, shares[1]!], 'g')).toThrow(/every candidate/);
  });
});
