/** Vectors for the sliding windows: count and time, failure rate and slow-call rate. */
import { admit, countWindow, fail, ok, policy, timeWindow, took, vector, type Draft } from './build.js';
import type { Vector } from './format.js';

/** A policy whose consecutive threshold never trips first. */
const NO_THRESHOLD = 1_000_000;

/** Outcomes from a pattern: F failure, S success, at 1 ms apart from `at`. */
function pattern(p: string, at = 0, gap = 1): Draft[] {
  return [...p].map((ch, i) => (ch === 'F' ? fail(at + i * gap) : ok(at + i * gap)));
}

function countRateVectors(): Vector[] {
  const out: Vector[] = [];
  for (const size of [1, 4, 10, 20]) {
    const p = policy({ failure_threshold: NO_THRESHOLD, window: countWindow(size) });
    const half = Math.ceil(size / 2);
    const rest = size - half;
    // Failures and successes interleaved, failures last so that the size-th outcome decides.
    const seq = 'S'.repeat(rest) + 'F'.repeat(half);
    out.push(
      vector(
        `count-window/${size}/opens-at-rate-with-minimum-calls`,
        ['window.count', 'window.failure_rate_threshold', 'window.minimum_calls'],
        `A count window of ${size} (minimum_calls defaults to size, rate 50 %): no rate is judged before ${size} outcomes; at ${size} outcomes with ${half} failures it opens.`,
        p,
        [
          pattern(seq.slice(0, -1)),
          fail(size - 1, { state: 'open', reason: 'failure_rate_exceeded' }),
          admit(size, false),
        ],
      ),
    );
    if (size >= 4) {
      const below = 'F'.repeat(half - 1) + 'S'.repeat(rest + 1);
      out.push(
        vector(
          `count-window/${size}/below-rate-stays-closed`,
          ['window.count', 'window.failure_rate_threshold'],
          `${half - 1} failures in ${size} outcomes are under 50 %: closed.`,
          p,
          [pattern(below), admit(size, { allowed: true, state: 'closed', window_calls: size })],
        ),
      );
    }
  }
  const slide = policy({ failure_threshold: NO_THRESHOLD, window: countWindow(4, { failure_rate_threshold: 75 }) });
  out.push(
    vector(
      'count-window/slides-oldest-out',
      ['window.count'],
      'A window of 4 keeps the last 4 outcomes: old failures slide out, and 3 of the last 4 failed (75 %) opens it.',
      slide,
      [
        pattern('FSSS'),
        fail(4, { state: 'closed', window_calls: 4 }),
        fail(5, 'closed'),
        fail(6, { state: 'open', reason: 'failure_rate_exceeded' }),
      ],
    ),
  );
  for (const [threshold, failuresIn3, state] of [
    [33.3, 1, 'open'],
    [33.4, 1, 'closed'],
    [100, 2, 'closed'],
    [100, 3, 'open'],
    [1, 1, 'open'],
    [66.67, 2, 'closed'],
    [66.66, 2, 'open'],
  ] as const) {
    const p = policy({
      failure_threshold: NO_THRESHOLD,
      window: countWindow(3, { failure_rate_threshold: threshold }),
    });
    const seq = 'S'.repeat(3 - failuresIn3) + 'F'.repeat(failuresIn3);
    out.push(
      vector(
        `count-window/rate-${threshold}/${failuresIn3}-of-3-${state}`,
        ['window.failure_rate_threshold', 'boundary'],
        `failure_rate_threshold ${threshold} %: ${failuresIn3} failures of 3 is ${state} (compared as failures * 100 >= threshold * calls).`,
        p,
        [pattern(seq.slice(0, -1)), fail(2, state)],
      ),
    );
  }
  for (const min of [1, 2, 5]) {
    const p = policy({ failure_threshold: NO_THRESHOLD, window: countWindow(10, { minimum_calls: min }) });
    out.push(
      vector(
        `count-window/minimum-calls-${min}`,
        ['window.minimum_calls', 'boundary'],
        `minimum_calls ${min}: ${min - 1} failures judge nothing, failure ${min} (100 %) opens.`,
        p,
        [
          pattern('F'.repeat(min - 1)),
          admit(50, { allowed: true, window_calls: min - 1 }),
          fail(60, { state: 'open', reason: 'failure_rate_exceeded' }),
        ],
      ),
    );
  }
  out.push(
    vector(
      'count-window/threshold-beside-window',
      ['window.count', 'failure_threshold'],
      'The consecutive threshold keeps working beside the window and is checked first.',
      policy({ failure_threshold: 3, window: countWindow(10) }),
      [pattern('FF'), fail(2, { state: 'open', reason: 'failure_threshold_reached' })],
    ),
    vector(
      'count-window/emptied-on-open-and-close',
      ['window.count'],
      'The window is emptied on every state change: after open, half-open and close it holds no outcome.',
      policy({ failure_threshold: 2, window: countWindow(5) }),
      [
        pattern('SFF'),
        admit(30_002, { allowed: true, state: 'half_open', window_calls: 0 }),
        ok(30_003, { state: 'closed', window_calls: 0 }),
        fail(30_004, { window_calls: 1 }),
      ],
    ),
  );
  return out;
}

function slowCallVectors(): Vector[] {
  const out: Vector[] = [];
  const win = (w: Parameters<typeof countWindow>[1]) =>
    policy({ failure_threshold: NO_THRESHOLD, window: countWindow(4, { slow_call_duration_ms: 100, ...w }) });
  out.push(
    vector(
      'slow-calls/duration-at-limit-is-slow',
      ['window.slow_call_duration_ms', 'boundary'],
      'A call of exactly slow_call_duration_ms is slow; 4 slow successes (100 %) open the circuit.',
      win({}),
      [
        took(0, true, 100),
        took(1, true, 100),
        took(2, true, 250),
        took(3, true, 100, { state: 'open', reason: 'slow_call_rate_exceeded' }),
      ],
    ),
    vector(
      'slow-calls/just-under-limit-is-not-slow',
      ['window.slow_call_duration_ms', 'boundary'],
      'A call 0.001 ms under the limit is not slow.',
      win({}),
      [took(0, true, 100), took(1, true, 100), took(2, true, 100), took(3, true, 99.999, 'closed')],
    ),
    vector(
      'slow-calls/no-duration-never-slow',
      ['window.slow_call_duration_ms'],
      'An outcome without duration_ms is never slow.',
      win({}),
      [took(0, true, 500), took(1, true, 500), took(2, true, 500), ok(3, 'closed')],
    ),
    vector(
      'slow-calls/rate-threshold-50',
      ['window.slow_call_rate_threshold'],
      'slow_call_rate_threshold 50: 2 slow calls of 4 open the circuit.',
      win({ slow_call_rate_threshold: 50 }),
      [
        took(0, true, 10),
        took(1, true, 10),
        took(2, true, 200),
        took(3, true, 200, { state: 'open', reason: 'slow_call_rate_exceeded' }),
      ],
    ),
    vector(
      'slow-calls/failure-rate-checked-first',
      ['window.slow_call_rate_threshold', 'window.failure_rate_threshold'],
      'When both rates trip at once the reason is failure_rate_exceeded.',
      win({ slow_call_rate_threshold: 50 }),
      [
        took(0, false, 200),
        took(1, true, 10),
        took(2, true, 10),
        took(3, false, 200, { state: 'open', reason: 'failure_rate_exceeded' }),
      ],
    ),
    vector(
      'slow-calls/not-judged-without-duration-limit',
      ['window.slow_call_duration_ms'],
      'Without slow_call_duration_ms, slow calls are not judged at all.',
      policy({ failure_threshold: NO_THRESHOLD, window: countWindow(2, { slow_call_rate_threshold: 1 }) }),
      [took(0, true, 1_000_000), took(1, true, 1_000_000, { state: 'closed', window_calls: 2 })],
    ),
    vector(
      'slow-calls/slow-failure-counts-both',
      ['window.slow_call_duration_ms'],
      'A slow failure counts as a failure and as a slow call.',
      win({ failure_rate_threshold: 100, slow_call_rate_threshold: 100 }),
      [
        took(0, false, 150),
        took(1, true, 150),
        took(2, true, 150),
        took(3, true, 150, { state: 'open', reason: 'slow_call_rate_exceeded' }),
      ],
    ),
  );
  for (const rate of [25, 75, 100]) {
    const slow = Math.ceil((4 * rate) / 100);
    const pattern = Array.from({ length: 4 }, (_, i) => took(i, true, i >= 4 - slow ? 300 : 1));
    out.push(
      vector(
        `slow-calls/rate-${rate}/${slow}-of-4-opens`,
        ['window.slow_call_rate_threshold', 'boundary'],
        `slow_call_rate_threshold ${rate}: ${slow} slow calls of 4 open it; one fewer does not.`,
        win({ slow_call_rate_threshold: rate }),
        [pattern.slice(0, 3), { ...pattern[3]!, want: { state: 'open', reason: 'slow_call_rate_exceeded' } }],
      ),
    );
    if (slow > 1) {
      out.push(
        vector(
          `slow-calls/rate-${rate}/${slow - 1}-of-4-stays-closed`,
          ['window.slow_call_rate_threshold', 'boundary'],
          `slow_call_rate_threshold ${rate}: ${slow - 1} slow calls of 4 keep it closed.`,
          win({ slow_call_rate_threshold: rate }),
          [
            Array.from({ length: 4 }, (_, i) => took(i, true, i >= 5 - slow ? 300 : 1)),
            admit(10, { allowed: true, state: 'closed' }),
          ],
        ),
      );
    }
  }
  return out;
}

function timeWindowVectors(): Vector[] {
  const out: Vector[] = [];
  const tw = (size: number, w: Parameters<typeof timeWindow>[1] = {}) =>
    policy({ failure_threshold: NO_THRESHOLD, window: timeWindow(size, w) });
  out.push(
    vector(
      'time-window/minimum-calls-defaults-to-10',
      ['window.time', 'window.minimum_calls'],
      'A time window judges nothing under 10 outcomes (its default minimum_calls); the 10th failure opens it.',
      tw(10),
      [
        pattern('FFFFFFFFF', 0, 100),
        admit(950, { allowed: true, window_calls: 9 }),
        fail(990, { state: 'open', reason: 'failure_rate_exceeded' }),
      ],
    ),
  );
  for (const size of [1, 10, 60]) {
    const expiry = size * 1000;
    out.push(
      vector(
        `time-window/${size}s/outcomes-expire-at-second-boundary`,
        ['window.time', 'boundary'],
        `A ${size} s window holds the current second and the ${size - 1} before: outcomes of second 0 count until ${expiry - 1} ms and are gone at ${expiry} ms.`,
        tw(size, { minimum_calls: 3 }),
        [
          pattern('FF', 0, 1),
          admit(expiry - 1, { allowed: true, window_calls: 2 }),
          fail(expiry, { state: 'closed', window_calls: 1 }),
        ],
      ),
      vector(
        `time-window/${size}s/opens-within-window`,
        ['window.time'],
        `Three failures inside ${size} s with minimum_calls 3 open the circuit.`,
        tw(size, { minimum_calls: 3 }),
        [fail(0), fail(Math.floor(expiry / 2)), fail(expiry - 1, { state: 'open', reason: 'failure_rate_exceeded' })],
      ),
      vector(
        `time-window/${size}s/just-too-late-stays-closed`,
        ['window.time', 'boundary'],
        `Three failures, the last ${size} s after the first, stay closed: the first has expired.`,
        tw(size, { minimum_calls: 3 }),
        [
          fail(0),
          fail(size === 1 ? 1_000 : Math.floor(expiry / 2)),
          fail(expiry, { state: 'closed', window_calls: 2 }),
        ],
      ),
    );
  }
  out.push(
    vector(
      'time-window/buckets-are-whole-seconds',
      ['window.time', 'boundary'],
      'Buckets are whole epoch seconds: with a 2 s window an outcome at 999 ms (second 0) still counts at 1,999 ms and is gone at 2,000 ms.',
      tw(2, { minimum_calls: 2 }),
      [fail(999), admit(1_999, { allowed: true, window_calls: 1 }), admit(2_000, { allowed: true, window_calls: 0 })],
    ),
    vector(
      'time-window/clock-step-back-lands-in-newest-bucket',
      ['window.time', 'clock'],
      'An outcome whose time is before the newest bucket (a wall clock that stepped back) is counted in the newest bucket.',
      tw(5, { minimum_calls: 3 }),
      [fail(4_500), fail(2_500, { window_calls: 2 }), fail(4_600, { state: 'open', reason: 'failure_rate_exceeded' })],
    ),
    vector(
      'time-window/slow-calls',
      ['window.time', 'window.slow_call_duration_ms'],
      'Slow calls are judged in a time window too.',
      tw(10, { minimum_calls: 2, slow_call_duration_ms: 1_000, slow_call_rate_threshold: 100 }),
      [took(0, true, 1_000), took(500, true, 5_000, { state: 'open', reason: 'slow_call_rate_exceeded' })],
    ),
    vector(
      'time-window/rate-threshold-30',
      ['window.time', 'window.failure_rate_threshold'],
      'failure_rate_threshold 30 in a time window: 3 failures in 10 outcomes open it.',
      tw(60, { failure_rate_threshold: 30 }),
      [pattern('SSSSSSSFF', 0, 1_000), fail(9_000, { state: 'open', reason: 'failure_rate_exceeded' })],
    ),
    vector(
      'time-window/late-outcomes-count-while-open',
      ['window.time', 'late_outcome'],
      'Outcomes reported while open (late) still count in the window; the window empties when the circuit half-opens.',
      tw(60, { minimum_calls: 1 }),
      [
        fail(0, 'open'),
        ok(1, { state: 'open', window_calls: 1 }),
        fail(2, { state: 'open', window_calls: 2, failure_count: 2 }),
        admit(30_000, { allowed: true, state: 'half_open', window_calls: 0 }),
      ],
    ),
  );
  return out;
}

export function windowVectors(): Vector[] {
  return [...countRateVectors(), ...slowCallVectors(), ...timeWindowVectors()];
}
