/**
 * Vectors for outcomes that carry when their call ended (`ended_at_ms`, the `at` of
 * `POST /outcomes`): one that ended before the circuit's last state change (less 1 s of clock
 * tolerance) or before its time window is stale: it changes nothing.
 */
import { admit, fail, ok, policy, timeWindow, vector, type Draft, type Want } from './build.js';
import type { Vector, WireState } from './format.js';

const ended = (d: Draft, ended_at_ms: number): Draft => ({
  ...d,
  event: { ...d.event, ended_at_ms } as Draft['event'],
});
const failEnded = (at: number, endedAt: number, want?: WireState | Want) => ended(fail(at, want), endedAt);
const okEnded = (at: number, endedAt: number, want?: WireState | Want) => ended(ok(at, want), endedAt);

export function staleVectors(): Vector[] {
  const p = policy({ failure_threshold: 1, timeout_seconds: 30 });
  const tags = ['ended_at', 'late_outcome'];
  return [
    vector(
      'stale/failure-from-before-close-does-not-reopen',
      tags,
      'A failure that ended before the circuit closed (a queued outcome delivered late) changes nothing: it stays closed.',
      p,
      [
        fail(0, 'open'),
        ok(30_000, { state: 'closed', reason: 'probe_succeeded' }),
        failEnded(31_000, 10_000, { state: 'closed', failure_count: 0 }),
        failEnded(31_001, 31_000, { state: 'open', reason: 'failure_threshold_reached' }),
      ],
    ),
    vector(
      'stale/tolerance-boundary',
      [...tags, 'boundary'],
      'An outcome that ended exactly 1 s before the last state change still counts; 1 ms earlier it is stale.',
      p,
      [
        fail(0, 'open'),
        ok(30_000, 'closed'),
        failEnded(31_000, 28_999, { state: 'closed', failure_count: 0 }),
        failEnded(31_001, 29_000, { state: 'open' }),
      ],
    ),
    vector(
      'stale/probe-from-before-half-open-ignored',
      [...tags, 'half_open_max_calls'],
      'A success that ended before the circuit half-opened is no probe: it stays half-open.',
      policy({ failure_threshold: 1 }),
      [
        fail(0, 'open'),
        admit(40_000, { allowed: true, state: 'half_open' }),
        okEnded(40_001, 1_000, { state: 'half_open' }),
        okEnded(40_002, 40_001, { state: 'closed', reason: 'probe_succeeded' }),
      ],
    ),
    vector(
      'stale/before-time-window-ignored',
      [...tags, 'window.time'],
      'An outcome that ended before the time window still covers is not counted in it.',
      policy({ failure_threshold: 100, window: timeWindow(10, { minimum_calls: 1 }) }),
      [
        okEnded(20_000, 5_000, { state: 'closed', window_calls: 0 }),
        failEnded(20_001, 15_000, { state: 'open', reason: 'failure_rate_exceeded' }),
      ],
      { createdAtMs: 0 },
    ),
    vector(
      'stale/current-outcome-counts',
      tags,
      'An outcome that ended after the last state change counts as usual.',
      policy({ failure_threshold: 2 }),
      [failEnded(1_000, 900, { failure_count: 1 }), failEnded(2_000, 1_999, { state: 'open' })],
    ),
  ];
}
