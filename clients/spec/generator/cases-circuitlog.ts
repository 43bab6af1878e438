/**
 * Vectors under circuitlog's own rules for outcomes (`POST /circuits/{name}/success`,
 * `/failure`, `/call`): a success while open closes, a failure while open starts the open
 * time again, and a failure may carry its own open time. Clients never send these.
 */
import { admit, countWindow, fail, failures, ok, policy, vector } from './build.js';
import type { Vector } from './format.js';

const rule = { rule: 'circuitlog' } as const;
const tags = ['outcome_rule.circuitlog'];

export function circuitlogVectors(): Vector[] {
  const p = policy({ failure_threshold: 2, timeout_seconds: 30 });
  const backoff = policy({
    failure_threshold: 1,
    timeout_seconds: 10,
    backoff: { multiplier: 2, max_timeout_seconds: 100 },
  });
  return [
    vector(
      'circuitlog/threshold-opens',
      [...tags, 'failure_threshold'],
      'Below the open state the rule makes no difference: 2 failures open.',
      p,
      [fail(0), fail(1, { state: 'open', reason: 'failure_threshold_reached' })],
      rule,
    ),
    vector(
      'circuitlog/success-while-open-closes',
      tags,
      'A success reported while open closes the circuit (success_recorded).',
      p,
      [failures(2, 0), ok(10, { state: 'closed', reason: 'success_recorded', failure_count: 0 }), admit(11, true)],
      rule,
    ),
    vector(
      'circuitlog/failure-while-open-restarts-open-time',
      tags,
      'A failure reported while open starts the open time again from that failure.',
      p,
      [
        failures(2, 0),
        fail(20_000, { state: 'open', open_until_ms: 50_000, failure_count: 3 }),
        admit(49_999, { allowed: false, retry_at_ms: 50_000 }),
      ],
      rule,
    ),
    vector(
      'circuitlog/failure-timeout-opens-for-its-time',
      [...tags, 'timeout_seconds'],
      "A failure carrying timeout_seconds opens for that time; the circuit's timeout_seconds is unchanged (circuitlog's recordFailure).",
      p,
      [fail(0), fail(1, { state: 'open', open_until_ms: 5_001, effective_timeout_seconds: 5 }, { timeout_seconds: 5 })],
      rule,
    ),
    vector(
      'circuitlog/failure-timeout-while-open',
      [...tags, 'timeout_seconds'],
      'A failure with timeout_seconds while open sets the open time to it, from now.',
      p,
      [failures(2, 0), fail(1_000, { open_until_ms: 61_000, effective_timeout_seconds: 60 }, { timeout_seconds: 60 })],
      rule,
    ),
    vector(
      'circuitlog/failure-timeout-below-threshold-forgotten',
      [...tags, 'timeout_seconds'],
      'A failure below the threshold with timeout_seconds opens nothing and leaves no timeout behind: the next opening uses the policy.',
      p,
      [fail(0, 'closed', { timeout_seconds: 7 }), fail(1, { state: 'open', open_until_ms: 30_001 })],
      rule,
    ),
    vector(
      'circuitlog/probe-failure-timeout',
      [...tags, 'timeout_seconds', 'backoff'],
      'A failed probe with timeout_seconds re-opens for that time, whatever the backoff says.',
      backoff,
      [
        fail(0, 'open'),
        fail(10_000, { state: 'open', reason: 'probe_failed', effective_timeout_seconds: 3 }, { timeout_seconds: 3 }),
      ],
      rule,
    ),
    vector(
      'circuitlog/failure-while-open-keeps-grown-time',
      [...tags, 'backoff'],
      'A failure while open starts the open time in force (grown by backoff) again.',
      backoff,
      [fail(0, 'open'), fail(10_000, { effective_timeout_seconds: 20 }), fail(15_000, { open_until_ms: 35_000 })],
      rule,
    ),
    vector(
      'circuitlog/success-while-open-empties-window',
      [...tags, 'window.count'],
      'Closing by a success while open empties the window.',
      policy({ failure_threshold: 1, window: countWindow(4) }),
      [fail(0, 'open'), ok(1, { state: 'closed', window_calls: 0 })],
      rule,
    ),
    vector(
      'circuitlog/half-open-success-closes',
      tags,
      'Half-open behaves as under count_only: a success closes (probe_succeeded).',
      p,
      [failures(2, 0), ok(30_001, { state: 'closed', reason: 'probe_succeeded' })],
      rule,
    ),
  ];
}
