/** Vectors for soft throttling (`throttle`): the SRE book's formula, its window, and where it applies. */
import { admit, configure, fail, failures, ok, policy, reset, successes, vector } from './build.js';
import type { Vector } from './format.js';

const throttle = (k = 2, window_seconds = 10) => ({ k, window_seconds });
/** A circuit that opens only on its own throttle's terms: threshold 10^9 unless given. */
const p = (extra: Parameters<typeof policy>[0] = {}) =>
  policy({ failure_threshold: 1_000_000_000, throttle: throttle(), ...extra });

export function throttleVectors(): Vector[] {
  const tags = ['throttle'];
  return [
    vector(
      'throttle/healthy/never-throttles',
      [...tags, 'throttle.k'],
      'Every outcome a success: p stays 0 and no call is refused, whatever the draw.',
      p(),
      [successes(20, 0, 10), admit(500, { allowed: true, probability: 0 }, 0)],
    ),
    vector(
      'throttle/formula/refuses-below-p',
      [...tags, 'throttle.k'],
      '10 outcomes, 3 successes: p = (10 - 2*3) / 11; a draw below p is refused, the refusal counted as a request (p = 5/12).',
      p(),
      [
        ok(0),
        ok(1),
        ok(2),
        failures(7, 3),
        admit(100, { allowed: false, throttled: true, retry_at_ms: 1_100, state: 'closed', failure_count: 7 }, 0.3),
        admit(101, { allowed: true, probability: 5 / 12 }, 0.9),
      ],
    ),
    vector(
      'throttle/formula/draw-at-p-admits',
      [...tags],
      'A draw equal to p is admitted (refused only when strictly below).',
      p(),
      [ok(0), ok(1), ok(2), failures(7, 3), admit(100, { allowed: true, probability: 4 / 11 }, 4 / 11)],
    ),
    vector(
      'throttle/k/larger-k-throttles-less',
      [...tags, 'throttle.k'],
      'With k 2.5 the same 10 outcomes with 4 successes give p = 0; with k 2 they would give 2/11.',
      p({ throttle: throttle(2.5) }),
      [successes(4, 0), failures(6, 4), admit(100, { allowed: true, probability: 0 }, 0)],
    ),
    vector(
      'throttle/window/failures-leave-the-window',
      [...tags, 'throttle.window_seconds', 'window.time'],
      'The counts cover the current second and the window_seconds - 1 before it: the failures (second 0) still count at 9.999 s and are gone at 10 s; the refusals (seconds 9 and 10) are gone at 20 s.',
      p(),
      [
        failures(5, 0),
        admit(9_999, { allowed: false, throttled: true }, 0),
        admit(10_000, { allowed: false, throttled: true, probability: 2 / 3 }, 0),
        admit(20_000, { allowed: true, probability: 0 }, 0),
      ],
    ),
    vector(
      'throttle/state/opening-empties-counts',
      [...tags, 'failure_threshold'],
      'The counts start empty when the circuit opens and again when it closes; half-open probes are not throttled.',
      p({ failure_threshold: 5, timeout_seconds: 10 }),
      [
        failures(4, 0),
        fail(4, { state: 'open' }),
        admit(10_004, { allowed: true, state: 'half_open', probes_in_flight: 1 }, 0),
        ok(10_005, { state: 'closed', probability: 0 }),
        admit(10_006, { allowed: true }, 0),
      ],
    ),
    vector(
      'throttle/forced/closed-never-throttles',
      [...tags, 'forced_state'],
      'Forced closed admits every call: no throttle decision, however the outcomes went.',
      p({ forced_state: 'closed' }),
      [failures(10, 0), admit(100, { allowed: true }, 0)],
    ),
    vector(
      'throttle/reset/empties-counts',
      [...tags, 'reset'],
      'An operator reset empties the counts: p is 0 again.',
      p(),
      [failures(10, 0), reset(100, { state: 'closed', probability: 0 }), admit(101, { allowed: true }, 0)],
    ),
    vector(
      'throttle/configure/k-keeps-window-empties',
      [...tags, 'configure'],
      'A new k applies to the counts kept; a new window_seconds starts them empty.',
      p(),
      [
        ok(0),
        failures(4, 1),
        configure(100, p({ throttle: throttle(1.5) }), { probability: (5 - 1.5) / 6 }),
        configure(200, p({ throttle: throttle(1.5, 20) }), { probability: 0 }),
      ],
    ),
  ];
}
