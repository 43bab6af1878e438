/**
 * Vectors for the dependency's cool-down (a `throttled` outcome; `throttle_scope` circuit or
 * caller) and the shared slow start (`ramp`), issue 29. The server's state: a client learns it from
 * snapshots and events and decides from its view, so clients run these through their view, not
 * their local breaker (clients/spec/README.md "Cool-down and ramp vectors").
 */
import { admit, by, configure, fail, kind, ok, policy, rampAdmit, reset, vector } from './build.js';
import type { Vector } from './format.js';

const base = (extra: Parameters<typeof policy>[0] = {}) =>
  policy({ failure_threshold: 3, timeout_seconds: 10, ...extra });
const RAMP = { seconds: 10, start_percent: 10 };
const throttled = (at_ms: number, seconds: number | undefined, want?: Parameters<typeof kind>[2]) =>
  kind(at_ms, 'throttled', want, seconds === undefined ? {} : { retry_after_seconds: seconds });

export function coolingVectors(): Vector[] {
  return [...circuitVectors(), ...callerVectors(), ...rampVectors()];
}

function circuitVectors(): Vector[] {
  const tags = ['cool_down', 'throttle_scope=circuit'];
  return [
    vector(
      'cool_down/circuit/refuses-everyone-until-its-end',
      tags,
      'A throttled outcome asking 5 s cools the whole circuit: every call is refused until then (state closed, failure count untouched), then the cool-down ends.',
      base(),
      [
        fail(0),
        throttled(1_000, 5, {
          reason: 'cool_down',
          state: 'closed',
          failure_count: 1,
          cool_until_ms: 6_000,
          allowed: false,
        }),
        admit(1_001, { allowed: false, cool_down: 'circuit', retry_at_ms: 6_000 }),
        by('anyone', admit(5_999, { allowed: false, cool_down: 'circuit' })),
        admit(6_000, { allowed: true, reason: 'cool_down_ended', cool_until_ms: null, failure_count: 1 }),
        fail(6_001, { failure_count: 2 }),
      ],
    ),
    vector(
      'cool_down/circuit/extends-only-when-longer',
      tags,
      'A second throttled outcome extends the cool-down only when it asks to end later; a shorter or equal one changes nothing.',
      base(),
      [
        throttled(0, 10, { cool_until_ms: 10_000 }),
        throttled(1_000, 3, { cool_until_ms: 10_000 }),
        throttled(1_000, 9, { cool_until_ms: 10_000 }),
        throttled(2_000, 20, { reason: 'cool_down', cool_until_ms: 22_000 }),
        admit(21_999, { allowed: false, retry_at_ms: 22_000 }),
        admit(22_000, { allowed: true, reason: 'cool_down_ended' }),
      ],
    ),
    vector(
      'cool_down/circuit/capped-by-max-retry-after',
      [...tags, 'max_retry_after_seconds'],
      'A dependency asking an hour cools the circuit for max_retry_after_seconds (60 here) only.',
      base({ max_retry_after_seconds: 60 }),
      [throttled(0, 3_600, { cool_until_ms: 60_000 }), admit(59_999, false), admit(60_000, true)],
    ),
    vector(
      'cool_down/circuit/capped-by-default-300',
      [...tags, 'max_retry_after_seconds'],
      'max_retry_after_seconds is 300 by default: a day asked is 5 minutes of cool-down.',
      base(),
      [throttled(0, 86_400, { cool_until_ms: 300_000 }), admit(299_999, false), admit(300_000, true)],
    ),
    vector(
      'cool_down/circuit/missing-retry-after-uses-timeout',
      [...tags, 'timeout_seconds'],
      'A throttled outcome that names no retry_after_seconds cools the circuit for its timeout_seconds (7 s).',
      base({ timeout_seconds: 7 }),
      [throttled(0, undefined, { cool_until_ms: 7_000 }), admit(6_999, false), admit(7_000, true)],
    ),
    vector(
      'cool_down/circuit/missing-retry-after-capped',
      [...tags, 'timeout_seconds', 'max_retry_after_seconds'],
      'The timeout used for a missing retry_after_seconds is capped by max_retry_after_seconds too.',
      base({ timeout_seconds: 600, max_retry_after_seconds: 30 }),
      [throttled(0, undefined, { cool_until_ms: 30_000 }), admit(30_000, true)],
    ),
    vector(
      'cool_down/circuit/zero-seconds-none',
      [...tags, 'boundary'],
      'A throttled outcome asking 0 s starts no cool-down and counts as nothing.',
      base(),
      [fail(0), throttled(1, 0, { failure_count: 1, cool_until_ms: null, allowed: true }), admit(2, true)],
    ),
    vector(
      'cool_down/circuit/reset-ends-it',
      [...tags, 'reset'],
      'An operator reset ends the cool-down at once.',
      base(),
      [
        throttled(0, 60, { cool_until_ms: 60_000 }),
        reset(1_000, { reason: 'manual_reset', state: 'closed', cool_until_ms: null, allowed: true }),
        admit(1_001, true),
      ],
    ),
    vector(
      'cool_down/circuit/forced-closed-admits',
      [...tags, 'forced_state'],
      'A circuit forced closed admits every call, in a cool-down too; clearing the force refuses again until its end.',
      base(),
      [
        throttled(0, 60),
        configure(1_000, base({ forced_state: 'closed' }), { allowed: true }),
        admit(1_001, true),
        configure(2_000, base(), { allowed: false }),
        admit(2_001, { allowed: false, cool_down: 'circuit', retry_at_ms: 60_000 }),
      ],
    ),
    vector(
      'cool_down/circuit/explicit-with-a-quorum',
      [...tags, 'quorum'],
      'throttle_scope circuit overrides the quorum default: one caller throttled cools every caller.',
      base({ quorum: { min_callers: 2, window_seconds: 60, max_callers: 1_000 }, throttle_scope: 'circuit' }),
      [
        by('a', throttled(0, 5, { cool_until_ms: 5_000, cooling: [] })),
        by('b', admit(1, { allowed: false, cool_down: 'circuit' })),
        by('a', admit(5_000, true)),
      ],
    ),
    vector(
      'cool_down/circuit/ends-into-the-ramp',
      [...tags, 'ramp'],
      'With a ramp, a circuit-wide cool-down ends into the slow start: the ramp begins at cool_until, its share growing from start_percent.',
      base({ ramp: RAMP }),
      [
        throttled(0, 5, { cool_until_ms: 5_000, ramp_until_ms: 15_000, ramp_percent: 10 }),
        rampAdmit(4_999, 0, { allowed: false, cool_down: 'circuit' }),
        rampAdmit(5_000, 0.05, { allowed: true, reason: 'cool_down_ended', ramp_percent: 10 }),
        rampAdmit(10_000, 0.55, { allowed: false, ramp_percent: 55, retry_at_ms: 11_000 }),
        rampAdmit(10_000, 0.54, { allowed: true, ramp_percent: 55 }),
        rampAdmit(15_000, 0.999, { allowed: true, ramp_percent: 100, ramp_until_ms: null }),
      ],
    ),
  ];
}

function callerVectors(): Vector[] {
  const tags = ['cool_down', 'throttle_scope=caller'];
  const scoped = (extra: Parameters<typeof policy>[0] = {}) => base({ throttle_scope: 'caller', ...extra });
  return [
    vector(
      'cool_down/caller/only-the-named-caller',
      tags,
      'In caller scope only the throttled caller cools down: it is refused until its end, every other caller is admitted.',
      scoped(),
      [
        by('a', throttled(0, 5, { reason: 'cool_down', cool_until_ms: null, cooling: ['a'], allowed: true })),
        by('a', admit(1, { allowed: false, cool_down: 'caller', retry_at_ms: 5_000 })),
        by('b', admit(2, true)),
        admit(3, true),
        by('a', admit(4_999, false)),
        by('a', admit(5_000, { allowed: true, reason: 'cool_down_ended', cooling: [] })),
      ],
    ),
    vector(
      'cool_down/caller/each-their-own',
      tags,
      'Each caller has its own cool-down, extended only when it asks for longer; each ends at its own time.',
      scoped(),
      [
        by('a', throttled(0, 10, { cooling: ['a'] })),
        by('b', throttled(1_000, 5, { cooling: ['b', 'a'] })),
        by('a', throttled(2_000, 3, { cooling: ['b', 'a'] })),
        by('b', throttled(3_000, 10, { cooling: ['a', 'b'] })),
        by('a', admit(9_999, false)),
        by('b', admit(10_000, { allowed: false, reason: 'cool_down_ended', cooling: ['b'] })),
        by('a', admit(10_000, true)),
        by('b', admit(13_000, { allowed: true, cooling: [] })),
      ],
    ),
    vector(
      'cool_down/caller/anonymous-cools-no-one',
      tags,
      'In caller scope an outcome that names no caller cools no one.',
      scoped(),
      [throttled(0, 5, { cool_until_ms: null, cooling: [] }), by('a', admit(1, true))],
    ),
    vector(
      'cool_down/caller/default-with-a-quorum',
      [...tags, 'quorum'],
      'Without throttle_scope a circuit with a quorum cools per caller.',
      base({ quorum: { min_callers: 2, window_seconds: 60, max_callers: 1_000 } }),
      [by('a', throttled(0, 5, { cooling: ['a'] })), by('a', admit(1, false)), by('b', admit(2, true))],
    ),
    vector(
      'cool_down/caller/ends-without-a-ramp',
      [...tags, 'ramp'],
      'A caller-scope cool-down ends without a slow start: the fleet never stopped.',
      scoped({ ramp: RAMP }),
      [
        by('a', throttled(0, 5, { ramp_until_ms: null })),
        by('a', rampAdmit(5_000, 0.99, { allowed: true, reason: 'cool_down_ended', ramp_percent: 100 })),
      ],
    ),
  ];
}

function rampVectors(): Vector[] {
  const tags = ['ramp'];
  const ramped = (ramp: { seconds: number; start_percent: number } = RAMP) =>
    base({ failure_threshold: 1, timeout_seconds: 5, ramp });
  /** Open at 0, probe at 5 s, closed at 5 s: the ramp runs 5 s to 5 s + seconds. */
  const reopened = [fail(0, 'open'), admit(5_000, { state: 'half_open', allowed: true })];
  return [
    vector(
      'ramp/after-half-open/share-grows-linearly',
      tags,
      'A circuit that closes from half-open admits a share growing from start_percent to 100 over ramp.seconds; a draw below the share is admitted.',
      ramped(),
      [
        reopened,
        ok(5_000, { state: 'closed', reason: 'probe_succeeded', ramp_until_ms: 15_000, ramp_percent: 10 }),
        rampAdmit(5_000, 0.0999, { allowed: true, ramp_percent: 10 }),
        rampAdmit(5_000, 0.1, { allowed: false, ramp_percent: 10, retry_at_ms: 6_000 }),
        rampAdmit(7_500, 0.32, { allowed: true, ramp_percent: 32.5 }),
        rampAdmit(10_000, 0.55, { allowed: false, ramp_percent: 55 }),
        rampAdmit(14_999, 0.99995, { allowed: false }),
        rampAdmit(15_000, 0.999, { allowed: true, ramp_percent: 100, ramp_until_ms: null }),
      ],
    ),
    vector(
      'ramp/start-percent-50',
      [...tags, 'ramp.start_percent'],
      'start_percent 50 over 20 s: half the calls at first, 75 % halfway.',
      ramped({ seconds: 20, start_percent: 50 }),
      [
        reopened,
        ok(5_000, { ramp_until_ms: 25_000, ramp_percent: 50 }),
        rampAdmit(5_000, 0.5, false),
        rampAdmit(15_000, 0.74, { allowed: true, ramp_percent: 75 }),
      ],
    ),
    vector(
      'ramp/outcomes-count-while-ramping',
      tags,
      'Outcomes count while ramping: a failure opens the circuit again (no ramp while open), and the next close ramps anew.',
      ramped(),
      [
        reopened,
        ok(5_000, { ramp_until_ms: 15_000 }),
        fail(6_000, { state: 'open', ramp_until_ms: null, ramp_percent: 100 }),
        admit(11_000, { state: 'half_open', allowed: true }),
        ok(11_000, { state: 'closed', ramp_until_ms: 21_000 }),
        rampAdmit(11_000, 0.2, false),
      ],
    ),
    vector(
      'ramp/reset-ends-it',
      [...tags, 'reset'],
      'An operator reset ends the slow start: every call is admitted.',
      ramped(),
      [
        reopened,
        ok(5_000),
        reset(6_000, { reason: 'manual_reset', ramp_until_ms: null, ramp_percent: 100 }),
        admit(6_001, true),
      ],
    ),
    vector(
      'ramp/configure-off-ends-it',
      [...tags, 'configure'],
      'Turning the ramp off (ramp null) ends the slow start from the next call.',
      ramped(),
      [
        reopened,
        ok(5_000),
        configure(6_000, base({ failure_threshold: 1, timeout_seconds: 5 }), { ramp_percent: 100 }),
        admit(6_001, true),
      ],
    ),
    vector(
      'ramp/success-recorded-does-not-ramp',
      [...tags, 'reset'],
      'Only a close from half-open ramps: a reset of an open circuit does not.',
      ramped(),
      [fail(0, 'open'), reset(1_000, { state: 'closed', ramp_until_ms: null }), admit(1_001, true)],
    ),
  ];
}
