/** Vectors that combine policy fields: full open/half-open/close cycles over a grid of values. */
import {
  admit,
  configure,
  countWindow,
  fail,
  failures,
  ok,
  policy,
  reset,
  timeWindow,
  took,
  vector,
  type Draft,
} from './build.js';
import type { Vector } from './format.js';

function cycleVectors(): Vector[] {
  const out: Vector[] = [];
  for (const n of [2, 3, 5]) {
    for (const t of [1, 30]) {
      const p = policy({ failure_threshold: n, timeout_seconds: t });
      const opened = n - 1;
      const half = opened + t * 1000;
      out.push(
        vector(
          `cycle/threshold-${n}-timeout-${t}s`,
          ['failure_threshold', 'timeout_seconds', 'cycle'],
          `${n} failures open for ${t} s; the circuit half-opens at open_until, a probe closes it and the count starts from 0.`,
          p,
          [
            failures(n, 0),
            admit(half - 1, { allowed: false, retry_at_ms: half }),
            admit(half, { allowed: true, state: 'half_open', reason: 'open_timeout_elapsed' }),
            ok(half + 1, { state: 'closed', failure_count: 0 }),
            failures(n - 1, half + 2),
            admit(half + 100, { allowed: true, state: 'closed', failure_count: n - 1 }),
          ],
        ),
      );
    }
  }
  return out;
}

/** Probes admitted as slots allow, each reporting success, until `s` successes close the circuit. */
function probeGridVectors(): Vector[] {
  const out: Vector[] = [];
  const H = 30_000;
  for (const m of [1, 2, 3]) {
    for (const s of [1, 2, 3]) {
      const p = policy({ failure_threshold: 1, half_open_max_calls: m, success_threshold: s });
      const steps: Draft[] = [fail(0, 'open')];
      let at = H;
      let reported = 0;
      while (reported < s) {
        const batch = Math.min(m, s - reported);
        for (let i = 0; i < batch; i++) steps.push(admit(at++, true));
        if (batch === m) steps.push(admit(at++, { allowed: false, state: 'half_open' }));
        for (let i = 0; i < batch; i++) {
          reported++;
          steps.push(ok(at++, reported === s ? { state: 'closed', reason: 'probe_succeeded' } : 'half_open'));
        }
      }
      out.push(
        vector(
          `probes/max-${m}-success-${s}`,
          ['half_open_max_calls', 'success_threshold', 'cycle'],
          `half_open_max_calls ${m}, success_threshold ${s}: at most ${m} probes at once, each success frees its slot, the ${s}th success closes.`,
          p,
          [steps],
        ),
      );
    }
  }
  return out;
}

function mixedVectors(): Vector[] {
  const H = 30_000;
  return [
    vector(
      'mixed/success-frees-oldest-slot',
      ['half_open_max_calls', 'success_threshold'],
      'A successful probe that does not close yet frees a slot at once, before any lease expires.',
      policy({ failure_threshold: 1, half_open_max_calls: 2, success_threshold: 3 }),
      [
        fail(0),
        admit(H, true),
        admit(H + 1, true),
        admit(H + 2, { allowed: false, retry_at_ms: H + 10_000 }),
        ok(H + 3, { state: 'half_open', probes_in_flight: 1 }),
        admit(H + 4, { allowed: true, probes_in_flight: 2 }),
      ],
    ),
    vector(
      'mixed/reopen-count-grows-and-resets',
      ['backoff', 'cycle'],
      'reopen_count counts failed probes in a row and is 0 again once a probe closes the circuit.',
      policy({ failure_threshold: 1, timeout_seconds: 1 }),
      [fail(0), fail(1_000), fail(2_000), fail(3_000, { state: 'open', reason: 'probe_failed' }), ok(4_000, 'closed')],
    ),
    vector(
      'mixed/refusals-change-nothing',
      ['admit'],
      'Refused admissions while open change nothing, however many.',
      policy({ failure_threshold: 1 }),
      [fail(0), admit(1, false), admit(2, false), admit(3, { allowed: false, retry_at_ms: 30_000, failure_count: 1 })],
    ),
    vector(
      'mixed/duration-without-window-ignored',
      ['window'],
      'Without a window, duration_ms changes nothing.',
      policy({ failure_threshold: 2 }),
      [took(0, true, 1_000_000), took(1, false, 5, { failure_count: 1 }), admit(2, { allowed: true, state: 'closed' })],
    ),
    vector(
      'mixed/forced-open-rate-opens-underneath',
      ['forced_state', 'window.count'],
      'Forced open: the window still judges outcomes and opens the state underneath.',
      policy({ failure_threshold: 100, window: countWindow(2), forced_state: 'open' }),
      [fail(0), fail(1, { state: 'open', reason: 'failure_rate_exceeded', allowed: false })],
    ),
    vector(
      'mixed/force-cleared-over-half-open-keeps-leases',
      ['forced_state', 'half_open_max_calls'],
      'Clearing a force over a half-open circuit: the probe leases taken before the force still hold.',
      policy({ failure_threshold: 1 }),
      [
        fail(0),
        admit(H, true),
        configure(H + 1, policy({ failure_threshold: 1, forced_state: 'closed' }), { reason: 'forced_closed' }),
        configure(H + 2, policy({ failure_threshold: 1 }), {
          reason: 'force_cleared',
          allowed: false,
          retry_at_ms: H + 10_000,
        }),
      ],
    ),
    vector(
      'mixed/reset-while-forced-closed',
      ['reset', 'forced_state'],
      'A reset under a forced-closed circuit closes the state underneath; the force stays.',
      policy({ failure_threshold: 1, forced_state: 'closed' }),
      [fail(0, 'open'), reset(1, { state: 'closed', reason: 'manual_reset', allowed: true })],
    ),
    vector(
      'mixed/configure-force-and-window-at-once',
      ['configure', 'forced_state', 'window.count'],
      'One configure that sets a force and changes the window: a forced_open event, the window empty.',
      policy({ failure_threshold: 100, window: countWindow(3) }),
      [
        fail(0),
        configure(1, policy({ failure_threshold: 100, window: countWindow(4), forced_state: 'open' }), {
          reason: 'forced_open',
          window_calls: 0,
          allowed: false,
        }),
      ],
    ),
    vector(
      'mixed/count-window-max-size',
      ['window.count', 'window.minimum_calls', 'boundary'],
      'The largest count window (10,000) with minimum_calls 3: three failures open it.',
      policy({ failure_threshold: 100, window: countWindow(10_000, { minimum_calls: 3 }) }),
      [failures(2, 0), fail(2, { state: 'open', reason: 'failure_rate_exceeded' })],
    ),
    vector(
      'mixed/time-window-max-size',
      ['window.time', 'boundary'],
      'The largest time window (3,600 s): a failure from 3,599 s ago still counts.',
      policy({ failure_threshold: 100, window: timeWindow(3_600, { minimum_calls: 2 }) }),
      [fail(0), fail(3_599_999, { state: 'open', reason: 'failure_rate_exceeded' })],
    ),
    vector(
      'mixed/success-threshold-max',
      ['success_threshold', 'boundary'],
      'The largest success_threshold (1,000): 999 successful probes keep it half-open.',
      policy({ failure_threshold: 1, success_threshold: 1_000 }),
      [
        fail(0),
        Array.from({ length: 999 }, (_, i) => ok(H + i)),
        admit(H + 999, { allowed: true, state: 'half_open' }),
        ok(H + 1_000, { state: 'closed', reason: 'probe_succeeded' }),
      ],
    ),
  ];
}

function timeRateVectors(): Vector[] {
  return [25, 50, 75].map((rate) => {
    const failuresNeeded = Math.ceil((4 * rate) / 100);
    const steps: Draft[] = Array.from({ length: 4 }, (_, i) =>
      i < 4 - failuresNeeded ? ok(i * 1_000) : fail(i * 1_000),
    );
    steps[3] = { ...steps[3]!, want: { state: 'open', reason: 'failure_rate_exceeded' } };
    return vector(
      `time-window/rate-${rate}/opens-at-${failuresNeeded}-of-4`,
      ['window.time', 'window.failure_rate_threshold'],
      `A 10 s window, minimum_calls 4, failure_rate_threshold ${rate}: ${failuresNeeded} failures of 4 open it.`,
      policy({ failure_threshold: 100, window: timeWindow(10, { minimum_calls: 4, failure_rate_threshold: rate }) }),
      [steps],
    );
  });
}

export function gridVectors(): Vector[] {
  return [...cycleVectors(), ...probeGridVectors(), ...mixedVectors(), ...timeRateVectors()];
}
