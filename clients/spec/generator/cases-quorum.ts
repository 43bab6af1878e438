/**
 * Vectors for the quorum and caller isolation (policy `quorum`, outcomes and admissions
 * naming their `caller`). The server's rule only: a client's local breaker sees one caller,
 * itself, so the `quorum` vectors are left out of local-breaker runs (clients/spec/README.md).
 */
import { admit, configure, countWindow, fail, ok, policy, vector, type Draft } from './build.js';
import type { Vector } from './format.js';

/** The draft with the caller named on its event. */
const by = (caller: string, d: Draft): Draft => ({ ...d, event: { ...d.event, caller } as Draft['event'] });

export function quorumVectors(): Vector[] {
  const quorum = { min_callers: 3, window_seconds: 60, max_callers: 1_000 };
  const p = policy({ failure_threshold: 3, timeout_seconds: 30, quorum });
  const tags = ['quorum'];
  return [
    vector(
      'quorum/opens-on-min-callers',
      tags,
      'Three distinct callers failing open the circuit for everyone when the rule fires.',
      p,
      [
        by('a', fail(0, 'closed')),
        by('b', fail(1, 'closed')),
        by('c', fail(2, { state: 'open', reason: 'failure_threshold_reached' })),
        by('d', admit(3, false)),
      ],
    ),
    vector(
      'quorum/withheld-below-min-callers',
      tags,
      'A trip fewer than min_callers callers reported is withheld: closed, the count starts again.',
      p,
      [
        by('a', fail(0)),
        by('b', fail(1)),
        by('a', fail(2, { state: 'closed', reason: 'trip_withheld', failure_count: 0 })),
        by('c', admit(3, true)),
      ],
    ),
    vector('quorum/anonymous-never-counts', tags, 'Anonymous failures fire the rule but never make a quorum.', p, [
      fail(0),
      fail(1),
      fail(2, { state: 'closed', reason: 'trip_withheld' }),
    ]),
    vector(
      'quorum/window-restarts-when-withheld',
      tags,
      'A failure-rate trip withheld starts the window again.',
      policy({ failure_threshold: 100, window: countWindow(4), quorum }),
      [
        by('x', ok(0)),
        by('a', fail(1)),
        by('y', ok(2)),
        by('a', fail(3, { state: 'closed', reason: 'trip_withheld', window_calls: 0 })),
      ],
    ),
    vector(
      'quorum/caller-isolated-then-released',
      tags,
      'A caller with failure_threshold failures of its own is refused alone (scope caller) until its probe succeeds.',
      p,
      [
        by('bad', fail(0)),
        by('ok', ok(1)),
        by('bad', fail(2)),
        by('ok', ok(3)),
        by('bad', fail(4, { state: 'closed', reason: 'caller_isolated' })),
        by('bad', admit(5, { allowed: false, retry_at_ms: 30_004 })),
        by('ok', admit(6, true)),
        by('bad', admit(30_004, true)),
        by('bad', admit(30_005, { allowed: false, retry_at_ms: 40_004 })),
        by('bad', ok(30_006, { reason: 'caller_released' })),
        by('bad', admit(30_007, true)),
      ],
    ),
    vector(
      'quorum/removed-forgets-callers',
      tags,
      'Removing the quorum forgets every caller: the isolated one is admitted.',
      p,
      [
        by('bad', fail(0)),
        by('bad', fail(1)),
        by('bad', fail(2, { reason: 'caller_isolated' })),
        configure(3, policy({ failure_threshold: 3, timeout_seconds: 30 })),
        by('bad', admit(4, true)),
      ],
    ),
  ];
}
