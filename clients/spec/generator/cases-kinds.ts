/**
 * Vectors for outcome kinds (issue 29, docs/api.md "Outcome kinds"): what each kind counts as by
 * default, the caller-deadline rule (`min_deadline_ms`, `slow_call_duration_ms`), `count_as`
 * overrides. None starts a cool-down, so a local breaker runs them all (tag `kinds`), counting
 * each kind as the client's own accounting does (clients/spec/README.md).
 */
import { admit, configure, countWindow, fail, failures, kind, ok, policy, vector, type Draft } from './build.js';
import type { Vector } from './format.js';

/** Threshold 3, and a count window that never trips (it shows what each outcome counted as). */
const base = (extra: Parameters<typeof policy>[0] = {}) =>
  policy({
    failure_threshold: 3,
    timeout_seconds: 10,
    window: countWindow(100, { failure_rate_threshold: 100 }),
    ...extra,
  });

/** `n` outcomes of one kind, 1 ms apart. */
const many = (n: number, at_ms: number, k: Parameters<typeof kind>[1], detail: Parameters<typeof kind>[3] = {}) =>
  Array.from({ length: n }, (_, i): Draft => kind(at_ms + i, k, undefined, detail));

export function kindVectors(): Vector[] {
  return [...defaultVectors(), ...deadlineVectors(), ...overrideVectors()];
}

function defaultVectors(): Vector[] {
  const tags = ['kinds'];
  return [
    vector('kinds/success/counts-as-success', tags, 'kind success is a success: it ends a run of failures.', base(), [
      failures(2, 0),
      kind(2, 'success', { failure_count: 0, window_calls: 3, window_failures: 2 }),
    ]),
    vector('kinds/failure/counts-as-failure', tags, 'kind failure is a failure: three open the circuit.', base(), [
      kind(0, 'failure'),
      kind(1, 'failure'),
      kind(2, 'failure', { state: 'open', reason: 'failure_threshold_reached' }),
    ]),
    vector(
      'kinds/rejected/counts-as-success',
      tags,
      'A rejected call (the caller was at fault) is a success of the dependency: it ends a run of failures and counts as a call.',
      base(),
      [
        failures(2, 0),
        kind(2, 'rejected', { failure_count: 0, window_calls: 3, window_failures: 2 }),
        many(10, 3, 'rejected'),
        fail(13, { state: 'closed', failure_count: 1 }),
      ],
    ),
    vector(
      'kinds/cancelled/ignored',
      tags,
      'A cancelled call (the caller went away) counts as nothing: not a call, and the run of failures goes on.',
      base(),
      [
        failures(2, 0),
        many(5, 2, 'cancelled'),
        kind(7, 'cancelled', { failure_count: 2, window_calls: 2 }),
        fail(8, { state: 'open' }),
      ],
    ),
    vector(
      'kinds/half-open/rejected-probe-closes',
      [...tags, 'cycle'],
      'A probe answered as rejected shows a healthy dependency: it closes the circuit.',
      base({ failure_threshold: 1 }),
      [fail(0, 'open'), admit(10_000, true), kind(10_001, 'rejected', { state: 'closed', reason: 'probe_succeeded' })],
    ),
    vector(
      'kinds/half-open/cancelled-probe-keeps-its-slot',
      [...tags, 'cycle'],
      'A cancelled probe counts as nothing: still half-open, its slot held until the lease ends.',
      base({ failure_threshold: 1 }),
      [
        fail(0, 'open'),
        admit(10_000, true),
        kind(10_001, 'cancelled', { state: 'half_open', probes_in_flight: 1, allowed: false }),
        admit(20_000, { allowed: true, state: 'half_open' }),
      ],
    ),
    vector(
      'kinds/throttled/while-open-nothing',
      tags,
      'A throttled outcome while open (a call admitted before it opened) counts as nothing and starts no cool-down.',
      base({ failure_threshold: 1 }),
      [
        fail(0, 'open'),
        kind(1, 'throttled', { state: 'open', failure_count: 1, cool_until_ms: null }, { retry_after_seconds: 5 }),
      ],
    ),
  ];
}

function deadlineVectors(): Vector[] {
  const tags = ['kinds', 'caller_deadline'];
  const slow = (extra: Parameters<typeof policy>[0] = {}) =>
    base({
      window: countWindow(100, {
        minimum_calls: 2,
        failure_rate_threshold: 100,
        slow_call_duration_ms: 100,
        slow_call_rate_threshold: 100,
      }),
      ...extra,
    });
  return [
    vector(
      'kinds/caller_deadline/below-min-ignored',
      tags,
      'Five callers that gave the dependency 50 ms (below min_deadline_ms, 1000 by default) count as nothing: the circuit stays closed.',
      base(),
      [
        many(4, 0, 'caller_deadline', { deadline_ms: 50 }),
        kind(4, 'caller_deadline', { state: 'closed', failure_count: 0, window_calls: 0 }, { deadline_ms: 50 }),
      ],
    ),
    vector(
      'kinds/caller_deadline/at-min-is-failure',
      [...tags, 'boundary'],
      'A deadline of exactly min_deadline_ms was a fair chance: a failure (999 ms is not).',
      base(),
      [
        kind(0, 'caller_deadline', { failure_count: 0 }, { deadline_ms: 999 }),
        kind(1, 'caller_deadline', { failure_count: 1 }, { deadline_ms: 1_000 }),
        kind(2, 'caller_deadline', { failure_count: 2 }, { deadline_ms: 1_000 }),
        kind(3, 'caller_deadline', { state: 'open', reason: 'failure_threshold_reached' }, { deadline_ms: 1_000 }),
      ],
    ),
    vector(
      'kinds/caller_deadline/above-min-is-failure',
      tags,
      'Callers that waited 2 s for a hanging dependency open the circuit.',
      base(),
      [
        many(2, 0, 'caller_deadline', { deadline_ms: 2_000 }),
        kind(2, 'caller_deadline', 'open', { deadline_ms: 2_000 }),
      ],
    ),
    vector(
      'kinds/caller_deadline/without-deadline-ignored',
      tags,
      'A caller deadline that names no deadline_ms never counts as a failure.',
      base(),
      [many(4, 0, 'caller_deadline'), kind(4, 'caller_deadline', { state: 'closed', window_calls: 0 })],
    ),
    vector(
      'kinds/caller_deadline/past-slow-call-is-slow',
      [...tags, 'window.slow_call_duration_ms', 'boundary'],
      'A short deadline after the call already ran slow_call_duration_ms counts as a slow call (a success that is slow); one that ended sooner counts as nothing.',
      slow(),
      [
        kind(0, 'caller_deadline', { window_calls: 0 }, { deadline_ms: 50, duration_ms: 99 }),
        kind(
          1,
          'caller_deadline',
          { window_calls: 1, window_slow_calls: 1, failure_count: 0 },
          { deadline_ms: 50, duration_ms: 100 },
        ),
        kind(
          2,
          'caller_deadline',
          { state: 'open', reason: 'slow_call_rate_exceeded' },
          { deadline_ms: 50, duration_ms: 150 },
        ),
      ],
    ),
    vector(
      'kinds/caller_deadline/past-slow-call-without-window-ignored',
      tags,
      'Without a window there are no slow calls: a short deadline counts as nothing however long the call ran.',
      policy({ failure_threshold: 1 }),
      [kind(0, 'caller_deadline', { state: 'closed', failure_count: 0 }, { deadline_ms: 50, duration_ms: 60_000 })],
    ),
    vector(
      'kinds/min_deadline_ms/null-never-fails',
      [...tags, 'min_deadline_ms'],
      'min_deadline_ms null: a caller deadline never counts as the dependency failing, however long.',
      base({ min_deadline_ms: null }),
      [
        many(4, 0, 'caller_deadline', { deadline_ms: 60_000 }),
        kind(4, 'caller_deadline', { state: 'closed', window_calls: 0 }, { deadline_ms: 86_400_000 }),
      ],
    ),
    vector(
      'kinds/min_deadline_ms/null-slow-still-slow',
      [...tags, 'min_deadline_ms', 'window.slow_call_duration_ms'],
      'min_deadline_ms null still counts a call that ran past slow_call_duration_ms as slow.',
      slow({ min_deadline_ms: null }),
      [
        kind(0, 'caller_deadline', undefined, { deadline_ms: 5_000, duration_ms: 200 }),
        kind(
          1,
          'caller_deadline',
          { state: 'open', reason: 'slow_call_rate_exceeded' },
          { deadline_ms: 5_000, duration_ms: 200 },
        ),
      ],
    ),
    vector(
      'kinds/min_deadline_ms/40-opens-on-50',
      [...tags, 'min_deadline_ms'],
      'min_deadline_ms 40: callers that gave 50 ms gave a fair chance, so three open the circuit.',
      base({ min_deadline_ms: 40 }),
      [many(2, 0, 'caller_deadline', { deadline_ms: 50 }), kind(2, 'caller_deadline', 'open', { deadline_ms: 50 })],
    ),
  ];
}

function overrideVectors(): Vector[] {
  const tags = ['kinds', 'count_as'];
  return [
    vector(
      'kinds/count_as/rejected-as-failure',
      tags,
      'count_as {rejected: failure}: a dependency whose 4xx mean breakage opens on three.',
      base({ count_as: { rejected: 'failure' } }),
      [many(2, 0, 'rejected'), kind(2, 'rejected', { state: 'open', reason: 'failure_threshold_reached' })],
    ),
    vector(
      'kinds/count_as/failure-ignored',
      tags,
      'count_as {failure: ignore}: failures count as nothing (a plain success: false is a failure kind too).',
      base({ count_as: { failure: 'ignore' } }),
      [many(3, 0, 'failure'), failures(3, 3), ok(6, { state: 'closed', failure_count: 0, window_calls: 1 })],
    ),
    vector(
      'kinds/count_as/cancelled-as-failure',
      tags,
      'count_as {cancelled: failure}: cancelled calls open the circuit.',
      base({ count_as: { cancelled: 'failure' } }),
      [many(2, 0, 'cancelled'), kind(2, 'cancelled', 'open')],
    ),
    vector(
      'kinds/count_as/throttled-as-failure',
      [...tags, 'throttled'],
      'count_as {throttled: failure} replaces the cool-down: throttled calls are failures, and no cool-down starts.',
      base({ count_as: { throttled: 'failure' } }),
      [
        kind(0, 'throttled', { failure_count: 1, cool_until_ms: null, allowed: true }, { retry_after_seconds: 5 }),
        admit(1, true),
        kind(2, 'throttled', undefined, { retry_after_seconds: 5 }),
        kind(3, 'throttled', { state: 'open' }),
      ],
    ),
    vector(
      'kinds/count_as/throttled-ignored',
      [...tags, 'throttled'],
      'count_as {throttled: ignore}: throttled calls count as nothing, and no cool-down starts.',
      base({ count_as: { throttled: 'ignore' } }),
      [
        fail(0),
        kind(1, 'throttled', { failure_count: 1, window_calls: 1, cool_until_ms: null }, { retry_after_seconds: 60 }),
        admit(2, true),
      ],
    ),
    vector(
      'kinds/count_as/throttled-as-success',
      [...tags, 'throttled'],
      'count_as {throttled: success}: a throttled call is a success (it ends a run of failures), and no cool-down starts.',
      base({ count_as: { throttled: 'success' } }),
      [
        failures(2, 0),
        kind(2, 'throttled', { failure_count: 0, window_calls: 3 }, { retry_after_seconds: 60 }),
        admit(3, true),
      ],
    ),
    vector(
      'kinds/count_as/caller_deadline-as-failure',
      [...tags, 'caller_deadline'],
      'count_as {caller_deadline: failure} replaces the deadline rule: even a 10 ms deadline is a failure.',
      base({ count_as: { caller_deadline: 'failure' } }),
      [many(2, 0, 'caller_deadline', { deadline_ms: 10 }), kind(2, 'caller_deadline', 'open', { deadline_ms: 10 })],
    ),
    vector(
      'kinds/count_as/caller_deadline-ignored',
      [...tags, 'caller_deadline'],
      'count_as {caller_deadline: ignore} replaces the deadline rule: even a 5 s deadline counts as nothing.',
      base({ count_as: { caller_deadline: 'ignore' } }),
      [
        many(4, 0, 'caller_deadline', { deadline_ms: 5_000, duration_ms: 5_000 }),
        kind(4, 'caller_deadline', { state: 'closed', window_calls: 0 }, { deadline_ms: 5_000 }),
      ],
    ),
    vector(
      'kinds/count_as/success-as-failure',
      tags,
      'count_as {success: failure} is taken as written: successes open the circuit.',
      base({ count_as: { success: 'failure' } }),
      [many(2, 0, 'success'), ok(2, { state: 'open' })],
    ),
    vector(
      'kinds/count_as/configure-applies-next',
      [...tags, 'configure'],
      'A count_as set by configure applies from the next outcome: rejected was a success before, a failure after.',
      base(),
      [
        fail(0),
        kind(1, 'rejected', { failure_count: 0 }),
        configure(2, base({ count_as: { rejected: 'failure' } }), { failure_count: 0 }),
        kind(3, 'rejected', { failure_count: 1 }),
        configure(4, base(), { failure_count: 1 }),
        kind(5, 'rejected', { failure_count: 0 }),
      ],
    ),
  ];
}
