/** Vectors for the consecutive failure threshold, the open time and the half-open probes. */
import { admit, configure, fail, failures, ok, policy, successes, vector } from './build.js';
import type { Vector } from './format.js';

function thresholdVectors(): Vector[] {
  const out: Vector[] = [];
  for (const n of [1, 2, 3, 5, 10]) {
    const p = policy({ failure_threshold: n });
    out.push(
      vector(
        `threshold/${n}/opens-on-failure-${n}`,
        ['failure_threshold'],
        `${n - 1} consecutive failures keep the circuit closed; failure ${n} opens it for timeout_seconds.`,
        p,
        [
          failures(n - 1, 0, 10),
          fail((n - 1) * 10, {
            state: 'open',
            reason: 'failure_threshold_reached',
            open_until_ms: (n - 1) * 10 + 30_000,
          }),
          admit((n - 1) * 10 + 1, { allowed: false, retry_at_ms: (n - 1) * 10 + 30_000 }),
        ],
      ),
    );
    if (n > 1) {
      out.push(
        vector(
          `threshold/${n}/success-resets-count`,
          ['failure_threshold'],
          `A success between failures starts the count again: twice ${n - 1} failures with a success between keep it closed.`,
          p,
          [
            failures(n - 1, 0),
            ok(100, { failure_count: 0 }),
            failures(n - 1, 200),
            admit(300, { allowed: true, state: 'closed', failure_count: n - 1 }),
          ],
        ),
      );
    }
    if (n > 1)
      out.push(
        vector(
          `threshold/${n}/admits-change-nothing-while-closed`,
          ['failure_threshold', 'admit'],
          'Admitting calls on a closed circuit takes no slot and changes no count.',
          p,
          [
            admit(0, true),
            fail(1),
            admit(2, { allowed: true, failure_count: 1 }),
            admit(3, { allowed: true, failure_count: 1 }),
          ],
        ),
      );
  }
  out.push(
    vector(
      'threshold/max/one-billion',
      ['failure_threshold'],
      'The largest threshold (10^9): 50 failures in a row stay closed.',
      policy({ failure_threshold: 1_000_000_000 }),
      [failures(50, 0), admit(100, { allowed: true, failure_count: 50 })],
    ),
  );
  return out;
}

function timeoutVectors(): Vector[] {
  const out: Vector[] = [];
  for (const t of [1, 30, 2_592_000]) {
    const p = policy({ failure_threshold: 1, timeout_seconds: t });
    const until = 1_000 + t * 1000;
    out.push(
      vector(
        `timeout/${t}s/refuses-until-open-until`,
        ['timeout_seconds', 'admit'],
        `Open for ${t} s: refused 1 ms before open_until (retry at open_until), half-open and admitted at open_until exactly.`,
        p,
        [
          fail(1_000, { state: 'open', open_until_ms: until }),
          admit(until - 1, { allowed: false, retry_at_ms: until, state: 'open' }),
          admit(until, { allowed: true, state: 'half_open', reason: 'open_timeout_elapsed', probes_in_flight: 1 }),
        ],
      ),
      vector(
        `timeout/${t}s/peek-shows-half-open-without-slot`,
        ['timeout_seconds', 'verdict'],
        'Past open_until the verdict of a step that is not an admission says allowed while the stored state is still open; the next outcome half-opens first.',
        p,
        [
          fail(1_000, 'open'),
          configure(until, p, { state: 'open', allowed: true, probes_in_flight: 0 }),
          ok(until + 5, { state: 'closed', reason: 'probe_succeeded' }),
        ],
      ),
    );
  }
  return out;
}

/** Open a policy's circuit at 0 (failure_threshold 1 expected) so that it is half-open from `30_000`. */
function halfOpenVectors(): Vector[] {
  const out: Vector[] = [];
  const H = 30_000;
  for (const m of [1, 2, 3, 5]) {
    const p = policy({ failure_threshold: 1, half_open_max_calls: m });
    const admits = Array.from({ length: m }, (_, i) => admit(H + i, { allowed: true, probes_in_flight: i + 1 }));
    out.push(
      vector(
        `half-open/${m}/admits-exactly-${m}`,
        ['half_open_max_calls', 'admit'],
        `Half-open admits ${m} probes at once; the next is refused until the oldest lease runs out.`,
        p,
        [fail(0, 'open'), admits, admit(H + m, { allowed: false, retry_at_ms: H + 10_000, state: 'half_open' })],
      ),
      vector(
        `half-open/${m}/lease-expiry-frees-slot`,
        ['half_open_max_calls', 'probe_lease'],
        'A probe that never reports holds its slot until its lease expires (exactly at expiry it is free).',
        p,
        [
          fail(0, 'open'),
          admits,
          admit(H + 9_999, { allowed: false, retry_at_ms: H + 10_000 }),
          admit(H + 10_000, { allowed: true, probes_in_flight: m }),
        ],
      ),
      vector(
        `half-open/${m}/probe-success-closes`,
        ['half_open_max_calls', 'success_threshold'],
        'With success_threshold 1 the first successful probe closes the circuit.',
        p,
        [
          fail(0, 'open'),
          admits,
          ok(H + 50, { state: 'closed', reason: 'probe_succeeded', failure_count: 0 }),
          admit(H + 51, true),
        ],
      ),
      vector(
        `half-open/${m}/probe-failure-reopens`,
        ['half_open_max_calls'],
        'A failed probe re-opens the circuit for timeout_seconds from the failure, other probes in flight or not.',
        p,
        [
          fail(0, 'open'),
          admits,
          fail(H + 50, { state: 'open', reason: 'probe_failed', open_until_ms: H + 50 + 30_000 }),
          admit(H + 51, { allowed: false, retry_at_ms: H + 50 + 30_000 }),
        ],
      ),
    );
  }
  for (const lease of [1, 1_000, 60_000]) {
    const p = policy({ failure_threshold: 1 });
    out.push(
      vector(
        `half-open/lease-${lease}ms/expires-exactly`,
        ['probe_lease'],
        `A probe lease of ${lease} ms: the slot is held until ${lease - 1} ms after admission and free at ${lease} ms.`,
        p,
        [
          fail(0, 'open'),
          admit(H, true),
          admit(H + lease - 1, { allowed: false, retry_at_ms: H + lease }),
          admit(H + lease, { allowed: true, probes_in_flight: 1 }),
        ],
        { probeLeaseMs: lease },
      ),
    );
  }
  out.push(
    vector(
      'half-open/outcome-without-admit-counts',
      ['half_open_max_calls', 'success_threshold'],
      'An outcome reported while half-open without an admission still counts as a probe.',
      policy({ failure_threshold: 1, success_threshold: 2 }),
      [
        fail(0, 'open'),
        ok(H, { state: 'half_open', reason: 'open_timeout_elapsed' }),
        ok(H + 1, { state: 'closed', reason: 'probe_succeeded' }),
      ],
    ),
    vector(
      'half-open/late-failure-on-expired-lease-reopens',
      ['probe_lease'],
      'A probe reporting a failure after its lease expired still re-opens the circuit.',
      policy({ failure_threshold: 1 }),
      [fail(0, 'open'), admit(H, true), fail(H + 20_000, { state: 'open', reason: 'probe_failed' })],
    ),
  );
  return out;
}

function successThresholdVectors(): Vector[] {
  const out: Vector[] = [];
  const H = 30_000;
  for (const s of [1, 2, 3, 5]) {
    const serial = policy({ failure_threshold: 1, success_threshold: s });
    const probes = Array.from({ length: s }, (_, i) => [
      admit(H + i * 10, true),
      ok(H + i * 10 + 5, i === s - 1 ? 'closed' : 'half_open'),
    ]).flat();
    out.push(
      vector(
        `success-threshold/${s}/closes-after-${s}-serial-probes`,
        ['success_threshold'],
        `With one probe at a time, ${s} successful probes in a row close the circuit; each report frees the slot for the next.`,
        serial,
        [fail(0, 'open'), probes],
      ),
    );
    if (s > 1) {
      out.push(
        vector(
          `success-threshold/${s}/failure-after-${s - 1}-reopens`,
          ['success_threshold'],
          `${s - 1} successful probes then a failed one re-open the circuit; the next half-open starts counting again.`,
          serial,
          [
            fail(0, 'open'),
            probes.slice(0, 2 * (s - 1)),
            admit(H + 500, true),
            fail(H + 501, { state: 'open', reason: 'probe_failed' }),
            admit(H + 501 + 30_000, { allowed: true, state: 'half_open' }),
            ok(H + 501 + 30_001, 'half_open'),
          ],
        ),
      );
      const parallel = policy({ failure_threshold: 1, success_threshold: s, half_open_max_calls: s });
      out.push(
        vector(
          `success-threshold/${s}/closes-after-${s}-parallel-probes`,
          ['success_threshold', 'half_open_max_calls'],
          `${s} probes admitted at once (half_open_max_calls ${s}); the circuit closes on the ${s}th success.`,
          parallel,
          [
            fail(0, 'open'),
            Array.from({ length: s }, (_, i) => admit(H + i, true)),
            admit(H + s, false),
            successes(s - 1, H + 100),
            ok(H + 200, { state: 'closed', reason: 'probe_succeeded' }),
          ],
        ),
      );
    }
  }
  return out;
}

export function basicVectors(): Vector[] {
  return [...thresholdVectors(), ...timeoutVectors(), ...halfOpenVectors(), ...successThresholdVectors()];
}
