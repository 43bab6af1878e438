/** Vectors for backoff, forced states, reset, configure, late outcomes and the clock. */
import { admit, configure, countWindow, fail, failures, ok, policy, reset, vector } from './build.js';
import type { Vector } from './format.js';

const H = 30_000;

function backoffVectors(): Vector[] {
  const out: Vector[] = [];
  const cases = [
    { timeout: 10, multiplier: 2, max: 60, opens: [10, 20, 40, 60, 60] },
    { timeout: 3, multiplier: 1.5, max: 300, opens: [3, 5, 8, 12, 18] },
    { timeout: 10, multiplier: 2, max: 10, opens: [10, 10, 10] },
    { timeout: 200, multiplier: 2, max: null, opens: [200, 300, 300] },
    { timeout: 1, multiplier: 100, max: 2_592_000, opens: [1, 100, 10_000, 1_000_000, 2_592_000] },
  ];
  for (const c of cases) {
    const p = policy({
      failure_threshold: 1,
      timeout_seconds: c.timeout,
      backoff: { multiplier: c.multiplier, max_timeout_seconds: c.max },
    });
    const steps = [fail(0, { state: 'open', effective_timeout_seconds: c.opens[0] })];
    let at = 0;
    c.opens.forEach((seconds, i) => {
      if (i === 0) return;
      at += c.opens[i - 1]! * 1000;
      steps.push(
        fail(at, {
          state: 'open',
          reason: 'probe_failed',
          effective_timeout_seconds: seconds,
          open_until_ms: at + seconds * 1000,
        }),
      );
    });
    const id = `backoff/x${c.multiplier}-from-${c.timeout}s-max-${c.max ?? 'default'}`;
    out.push(
      vector(
        id,
        ['backoff.multiplier', 'backoff.max_timeout_seconds'],
        `Each failed probe multiplies the open time by ${c.multiplier}, rounded up to a whole second and capped: ${c.opens.join(', ')} s.`,
        p,
        [steps],
      ),
    );
  }
  const p = policy({ failure_threshold: 1, timeout_seconds: 10, backoff: { multiplier: 2, max_timeout_seconds: 100 } });
  out.push(
    vector(
      'backoff/closing-resets-open-time',
      ['backoff.multiplier'],
      'A probe that succeeds closes the circuit and the next opening uses timeout_seconds again, reopen_count back to 0.',
      p,
      [
        fail(0, 'open'),
        fail(10_000, { effective_timeout_seconds: 20 }),
        ok(30_000, 'closed'),
        fail(30_001, { state: 'open', effective_timeout_seconds: 10 }),
      ],
    ),
    vector(
      'backoff/none-keeps-timeout',
      ['backoff'],
      'Without backoff a failed probe re-opens for timeout_seconds, and reopen_count still counts.',
      policy({ failure_threshold: 1, timeout_seconds: 10 }),
      [
        fail(0, 'open'),
        fail(10_000, { effective_timeout_seconds: 10 }),
        fail(20_000, { effective_timeout_seconds: 10, open_until_ms: 30_000 }),
      ],
    ),
  );
  return out;
}

function forcedVectors(): Vector[] {
  const out: Vector[] = [];
  const base = { failure_threshold: 2, timeout_seconds: 30 };
  out.push(
    vector(
      'forced/open/refuses-with-open-time-hint',
      ['forced_state'],
      'Forced open refuses every call, marked forced, with now + the open time in force as the hint.',
      policy({ ...base, forced_state: 'open' }),
      [
        admit(0, { allowed: false, retry_at_ms: 30_000 }),
        admit(5_000, { allowed: false, retry_at_ms: 35_000, state: 'closed' }),
      ],
    ),
    vector(
      'forced/open/counts-keep-running',
      ['forced_state'],
      'Under a force outcomes are counted and move the state underneath.',
      policy({ ...base, forced_state: 'open' }),
      [
        failures(2, 0),
        admit(10, { allowed: false, state: 'open', retry_at_ms: 30_010 }),
        admit(40_000, { allowed: false, state: 'half_open', probes_in_flight: 0 }),
      ],
    ),
    vector(
      'forced/closed/admits-while-open-underneath',
      ['forced_state'],
      'Forced closed admits every call, even with the state underneath open.',
      policy({ ...base, forced_state: 'closed' }),
      [failures(2, 0), admit(10, { allowed: true, state: 'open' }), admit(11, { allowed: true, state: 'open' })],
    ),
    vector(
      'forced/closed/takes-no-probe-slot',
      ['forced_state', 'half_open_max_calls'],
      'Forced closed over a half-open circuit whose one slot is taken admits every call without taking a slot.',
      policy(base),
      [
        failures(2, 0),
        admit(H + 1, { allowed: true, state: 'half_open', probes_in_flight: 1 }),
        admit(H + 2, false),
        configure(H + 3, policy({ ...base, forced_state: 'closed' }), { reason: 'forced_closed', allowed: true }),
        admit(H + 4, { allowed: true, probes_in_flight: 1 }),
        admit(H + 5, { allowed: true, probes_in_flight: 1 }),
      ],
    ),
  );
  const free = policy(base);
  const open = policy({ ...base, forced_state: 'open' });
  const closed = policy({ ...base, forced_state: 'closed' });
  out.push(
    vector(
      'forced/set-open-is-an-event',
      ['forced_state', 'configure'],
      'Setting a force is a transition with reason forced_open and from = to.',
      free,
      [
        configure(0, open, { reason: 'forced_open', allowed: false }),
        admit(1, { allowed: false, retry_at_ms: 30_001 }),
      ],
    ),
    vector(
      'forced/set-closed-is-an-event',
      ['forced_state', 'configure'],
      'Forcing closed an open circuit is a forced_closed event; calls are admitted.',
      free,
      [failures(2, 0), configure(10, closed, { reason: 'forced_closed', state: 'open', allowed: true })],
    ),
    vector(
      'forced/clear-returns-to-rules',
      ['forced_state', 'configure'],
      'Clearing the force (force_cleared) returns to the rules from the state and counts underneath.',
      open,
      [
        failures(2, 0),
        configure(10, free, { reason: 'force_cleared', state: 'open', allowed: false, retry_at_ms: 30_001 }),
        admit(30_001, { allowed: true, state: 'half_open' }),
      ],
    ),
    vector(
      'forced/open-to-closed',
      ['forced_state', 'configure'],
      'Changing the force from open to closed is a forced_closed event.',
      open,
      [configure(0, closed, { reason: 'forced_closed', allowed: true })],
    ),
    vector(
      'forced/same-force-no-event',
      ['forced_state', 'configure'],
      'Configuring the force it already has changes nothing.',
      open,
      [configure(0, open, { allowed: false })],
    ),
    vector(
      'forced/open-hint-follows-backoff',
      ['forced_state', 'backoff'],
      'The forced-open hint is the open time in force, grown by backoff.',
      policy({ failure_threshold: 1, timeout_seconds: 10, backoff: { multiplier: 3, max_timeout_seconds: 100 } }),
      [
        fail(0, 'open'),
        fail(10_000, { effective_timeout_seconds: 30 }),
        configure(
          10_001,
          policy({
            failure_threshold: 1,
            timeout_seconds: 10,
            backoff: { multiplier: 3, max_timeout_seconds: 100 },
            forced_state: 'open',
          }),
          { allowed: false, retry_at_ms: 40_001 },
        ),
      ],
    ),
  );
  return out;
}

function resetVectors(): Vector[] {
  const p = policy({ failure_threshold: 2 });
  return [
    vector(
      'reset/from-open',
      ['reset'],
      'A reset closes an open circuit (manual_reset) and calls are admitted at once.',
      p,
      [failures(2, 0), reset(10, { state: 'closed', reason: 'manual_reset', failure_count: 0 }), admit(11, true)],
    ),
    vector(
      'reset/from-half-open-drops-leases',
      ['reset'],
      'A reset of a half-open circuit drops its probe leases.',
      p,
      [
        failures(2, 0),
        admit(H + 1, true),
        reset(H + 2, { state: 'closed', reason: 'manual_reset', probes_in_flight: 0 }),
      ],
    ),
    vector(
      'reset/closed-with-failures-zeroes-count',
      ['reset'],
      'A reset of a closed circuit with failures zeroes the count, without a transition.',
      p,
      [fail(0), reset(1, { state: 'closed', failure_count: 0 }), fail(2, 'closed')],
    ),
    vector('reset/clean-changes-nothing', ['reset'], 'A reset of a clean closed circuit changes nothing.', p, [
      reset(0, 'closed'),
    ]),
    vector(
      'reset/empties-window',
      ['reset', 'window.count'],
      'A reset empties the window.',
      policy({ failure_threshold: 100, window: countWindow(4) }),
      [ok(0), fail(1), reset(2, { window_calls: 0 })],
    ),
    vector(
      'reset/keeps-force',
      ['reset', 'forced_state'],
      'A reset does not clear a force: a forced-open circuit still refuses.',
      policy({ failure_threshold: 2, forced_state: 'open' }),
      [failures(2, 0), reset(5, { state: 'closed', allowed: false })],
    ),
    vector(
      'reset/backoff-starts-over',
      ['reset', 'backoff.multiplier'],
      'After a reset the next opening uses timeout_seconds again.',
      policy({ failure_threshold: 1, timeout_seconds: 10, backoff: { multiplier: 2, max_timeout_seconds: 80 } }),
      [
        fail(0),
        fail(10_000, { effective_timeout_seconds: 20 }),
        reset(10_001, 'closed'),
        fail(10_002, { effective_timeout_seconds: 10 }),
      ],
    ),
  ];
}

function configureVectors(): Vector[] {
  const p5 = policy({ failure_threshold: 5 });
  const w4 = policy({ failure_threshold: 100, window: countWindow(4) });
  return [
    vector(
      'configure/lower-threshold-applies-from-next-call',
      ['configure', 'failure_threshold'],
      'Lowering failure_threshold keeps the count and does not open by itself; the next failure opens.',
      p5,
      [
        failures(3, 0),
        configure(10, policy({ failure_threshold: 2 }), { state: 'closed', failure_count: 3 }),
        fail(11, { state: 'open', reason: 'failure_threshold_reached' }),
      ],
    ),
    vector(
      'configure/raise-threshold',
      ['configure', 'failure_threshold'],
      'Raising failure_threshold lets more failures through.',
      policy({ failure_threshold: 2 }),
      [
        fail(0),
        configure(1, policy({ failure_threshold: 4 })),
        failures(2, 2),
        fail(10, { state: 'open', failure_count: 4 }),
      ],
    ),
    vector(
      'configure/changed-window-starts-empty',
      ['configure', 'window.count'],
      'A changed window starts empty.',
      w4,
      [
        fail(0),
        fail(1, { window_calls: 2 }),
        configure(2, policy({ failure_threshold: 100, window: countWindow(5) }), { window_calls: 0 }),
      ],
    ),
    vector(
      'configure/same-window-kept',
      ['configure', 'window.count'],
      'An unchanged window keeps its outcomes when another field changes.',
      w4,
      [
        fail(0),
        fail(1),
        configure(2, policy({ failure_threshold: 99, window: countWindow(4) }), { window_calls: 2 }),
        ok(3),
        fail(4, { state: 'open', reason: 'failure_rate_exceeded' }),
      ],
    ),
    vector(
      'configure/window-added',
      ['configure', 'window.count'],
      'Adding a window to a circuit that had none starts it empty, counts from the next outcome.',
      policy({ failure_threshold: 100 }),
      [
        fail(0),
        configure(1, policy({ failure_threshold: 100, window: countWindow(2) }), { window_calls: 0 }),
        fail(2),
        fail(3, { state: 'open', reason: 'failure_rate_exceeded' }),
      ],
    ),
    vector(
      'configure/window-removed',
      ['configure', 'window.count'],
      'Removing the window: rates are no longer judged.',
      w4,
      [configure(0, policy({ failure_threshold: 100 })), failures(4, 1), admit(10, { allowed: true, state: 'closed' })],
    ),
    vector(
      'configure/timeout-while-open-keeps-open-until',
      ['configure', 'timeout_seconds'],
      'A new timeout_seconds applies from the next opening; the open time in force is kept.',
      policy({ failure_threshold: 1, timeout_seconds: 30 }),
      [
        fail(0, 'open'),
        configure(1, policy({ failure_threshold: 1, timeout_seconds: 5 }), {
          open_until_ms: 30_000,
          effective_timeout_seconds: 30,
        }),
        admit(29_999, false),
        fail(30_000, { state: 'open', reason: 'probe_failed', open_until_ms: 35_000 }),
      ],
    ),
    vector(
      'configure/fewer-probes-while-half-open',
      ['configure', 'half_open_max_calls'],
      'Lowering half_open_max_calls while probes are out refuses new ones until enough leases end.',
      policy({ failure_threshold: 1, half_open_max_calls: 3 }),
      [
        fail(0, 'open'),
        admit(H, true),
        admit(H + 1, true),
        configure(H + 2, policy({ failure_threshold: 1, half_open_max_calls: 1 })),
        admit(H + 3, { allowed: false, retry_at_ms: H + 10_000 }),
      ],
    ),
    vector(
      'configure/more-probes-while-half-open',
      ['configure', 'half_open_max_calls'],
      'Raising half_open_max_calls while half-open admits more probes at once.',
      policy({ failure_threshold: 1 }),
      [
        fail(0, 'open'),
        admit(H, true),
        admit(H + 1, false),
        configure(H + 2, policy({ failure_threshold: 1, half_open_max_calls: 2 })),
        admit(H + 3, { allowed: true, probes_in_flight: 2 }),
      ],
    ),
    vector(
      'configure/lower-success-threshold-applies-at-next-probe',
      ['configure', 'success_threshold'],
      'Lowering success_threshold while half-open: the next successful probe closes.',
      policy({ failure_threshold: 1, success_threshold: 3 }),
      [
        fail(0, 'open'),
        ok(H, 'half_open'),
        configure(H + 1, policy({ failure_threshold: 1, success_threshold: 1 }), 'half_open'),
        ok(H + 2, { state: 'closed', reason: 'probe_succeeded' }),
      ],
    ),
    vector('configure/same-policy-changes-nothing', ['configure'], 'Configuring the same policy changes nothing.', p5, [
      fail(0),
      configure(1, p5, { failure_count: 1 }),
    ]),
  ];
}

function lateAndClockVectors(): Vector[] {
  const p = policy({ failure_threshold: 1, timeout_seconds: 30 });
  return [
    vector(
      'late/success-while-open-changes-nothing',
      ['late_outcome'],
      'On POST /outcomes a success reported while open (a call admitted before it opened) does not close it.',
      p,
      [fail(0, 'open'), ok(10, { state: 'open', open_until_ms: 30_000 })],
    ),
    vector(
      'late/failure-while-open-counts-only',
      ['late_outcome'],
      'A late failure adds to failure_count and does not extend the open time.',
      p,
      [
        fail(0, 'open'),
        fail(10, { state: 'open', failure_count: 2, open_until_ms: 30_000 }),
        admit(30_000, { allowed: true, state: 'half_open' }),
      ],
    ),
    vector(
      'late/window-counts-while-open',
      ['late_outcome', 'window.count'],
      'Late outcomes count in the window while open.',
      policy({ failure_threshold: 2, window: countWindow(10) }),
      [failures(2, 0), ok(5, { state: 'open', window_calls: 1 })],
    ),
    vector(
      'clock/step-back-pulls-open-until-in',
      ['clock', 'timeout_seconds'],
      'A wall clock that stepped back cannot keep a circuit open longer than its open time from now.',
      p,
      [
        fail(100_000, { open_until_ms: 130_000 }),
        admit(50_000, { allowed: false, retry_at_ms: 80_000, open_until_ms: 80_000 }),
        admit(80_000, { allowed: true, state: 'half_open' }),
      ],
    ),
    vector(
      'clock/any-step-back-shortens-by-the-step',
      ['clock'],
      'Even a 1 s step back pulls open_until in to now + the open time.',
      p,
      [
        fail(100_000, { open_until_ms: 130_000 }),
        admit(99_000, { allowed: false, retry_at_ms: 129_000, open_until_ms: 129_000 }),
      ],
    ),
    vector('clock/forward-keeps-open-until', ['clock'], 'Time moving forward leaves open_until alone.', p, [
      fail(100_000, { open_until_ms: 130_000 }),
      admit(110_000, { allowed: false, retry_at_ms: 130_000, open_until_ms: 130_000 }),
    ]),
  ];
}

export function operatorVectors(): Vector[] {
  return [...backoffVectors(), ...forcedVectors(), ...resetVectors(), ...configureVectors(), ...lateAndClockVectors()];
}
