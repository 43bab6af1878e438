import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { OUTCOME_KINDS } from '../../src/domain/outcome-kind.js';
import { POLICY_DEFAULTS } from '../../src/domain/policy-defaults.js';
import { type CircuitPolicy, policyOf } from '../../src/domain/policy.js';
import type { Outcome } from '../../src/domain/types.js';
import { backtest, proposedPolicy } from '../../src/lab/backtest.js';
import { BreakerService } from '../../src/service/breaker-service.js';
import type { CircuitStore } from '../../src/store/circuit-store.js';
import { SqliteCircuitStore } from '../../src/store/sqlite/circuit-store.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../../src/store/sqlite/database.js';
import { FakeClock, silentLogger } from '../helper.js';
import { tempDir } from '../server-process.js';
import { everyStore } from '../store/every-store.js';

/**
 * Issue 31's fidelity proof through the real service and the real stores: random outcomes
 * with time gaps, calls, policy changes, forces, resets, reads, admissions and the due job,
 * under every policy kind (every other one with a stricter shadow policy beside it), written by `BreakerService` (group commit on) into SQLite (one
 * process, and two "workers": two services on two connections to one file, taking turns at
 * random) and Redis (one server, and a Cluster). The history the store kept, replayed with the
 * live policy, reproduces every transition the store recorded (same time, states and reason).
 * The pure engine's own proof with 20 seeds per kind is test/lab/fidelity-property.test.ts.
 */

const NAME = 'lab/fidelity';

/** Every policy kind, in wire form (validated as PATCH validates it). */
const KINDS: readonly Record<string, unknown>[] = [
  { failure_threshold: 3, timeout_seconds: 2, half_open_max_calls: 2, success_threshold: 2 },
  { failure_threshold: 50, timeout_seconds: 3, window: { type: 'count', size: 6, failure_rate_threshold: 50 } },
  {
    failure_threshold: 50,
    timeout_seconds: 2,
    window: { type: 'time', size: 5, minimum_calls: 3, failure_rate_threshold: 40 },
  },
  {
    failure_threshold: 50,
    timeout_seconds: 2,
    window: { type: 'count', size: 5, slow_call_duration_ms: 100, slow_call_rate_threshold: 60 },
  },
  { failure_threshold: 2, timeout_seconds: 1, backoff: { multiplier: 2, max_timeout_seconds: 8 } },
  {
    failure_threshold: 2,
    timeout_seconds: 2,
    window: { type: 'time', size: 10, minimum_calls: 2, failure_rate_threshold: 30 },
    quorum: { min_callers: 2, window_seconds: 10, max_callers: 10 },
  },
  {
    failure_threshold: 3,
    timeout_seconds: 2,
    count_as: { rejected: 'failure', cancelled: 'ignore', caller_deadline: 'failure' },
    min_deadline_ms: 50,
  },
  { failure_threshold: 4, timeout_seconds: 2, throttle: { k: 1.2, window_seconds: 10 } },
  { failure_threshold: 2, timeout_seconds: 1, ramp: { seconds: 10, start_percent: 20 } },
];

type Event =
  | { readonly type: 'gap'; readonly ms: number }
  | {
      readonly type: 'outcome';
      readonly call: boolean;
      readonly success: boolean;
      readonly kind: number;
      readonly caller: number;
      readonly durationMs: number;
      readonly atBackMs: number;
    }
  | { readonly type: 'configure'; readonly change: 'force_open' | 'force_closed' | 'clear' | 'tweak' }
  | { readonly type: 'reset' | 'get' | 'allowed' | 'due' };

const eventArb: fc.Arbitrary<Event> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      type: fc.constant('gap' as const),
      ms: fc.oneof(fc.integer({ min: 0, max: 400 }), fc.integer({ min: 0, max: 6_000 })),
    }),
  },
  {
    weight: 12,
    arbitrary: fc.record({
      type: fc.constant('outcome' as const),
      call: fc.boolean(),
      success: fc.boolean(),
      kind: fc.oneof({ weight: 5, arbitrary: fc.constant(-1) }, fc.integer({ min: 0, max: OUTCOME_KINDS.length - 1 })),
      caller: fc.integer({ min: -1, max: 2 }),
      durationMs: fc.integer({ min: 1, max: 200 }),
      atBackMs: fc.oneof(fc.constant(-1), fc.integer({ min: 0, max: 3_000 })),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      type: fc.constant('configure' as const),
      change: fc.constantFrom('force_open' as const, 'force_closed' as const, 'clear' as const, 'tweak' as const),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      type: fc.constantFrom('reset' as const, 'get' as const, 'allowed' as const, 'due' as const),
    }),
  },
);

/** A seeded draw for the services' throttle and ramp (mulberry32): the run is repeatable. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Drive the events through the services (one per "worker"), a random one per event. */
async function drive(
  stores: readonly CircuitStore[],
  start: CircuitPolicy,
  events: readonly Event[],
  seed: number,
): Promise<{ clock: FakeClock; live: CircuitPolicy }> {
  const clock = new FakeClock(Date.UTC(2026, 11, 1));
  const random = seeded(seed);
  const services = stores.map(
    (store) =>
      new BreakerService({
        store,
        clock: clock.now,
        logger: silentLogger,
        circuitDefaults: start,
        policy: { probeLeaseMs: 10_000 },
        random,
      }),
  );
  let live = start;
  // Every other history runs a stricter shadow policy beside the live one: its transitions are
  // not the live circuit's and must stay out of the history (issue 31).
  const shadow = seed % 2 === 0 ? { ...start, failureThreshold: 1, window: null } : null;
  await services[0]!.configure(NAME, () => ({ policy: live, shadow }));
  for (const e of events) {
    clock.advance(1);
    const breaker = services[Math.floor(random() * services.length)]!;
    switch (e.type) {
      case 'gap':
        clock.advance(e.ms);
        break;
      case 'outcome': {
        const kind = e.kind < 0 ? undefined : OUTCOME_KINDS[e.kind]!;
        const outcome: Outcome = {
          success: e.success,
          ...(kind === undefined ? {} : { kind }),
          ...(e.caller < 0 ? {} : { caller: `caller-${e.caller}` }),
          durationMs: e.durationMs,
          ...(e.atBackMs < 0 ? {} : { at: clock.now() - e.atBackMs }),
          ...(kind === 'throttled' ? { retryAfterSeconds: 1 + (e.durationMs % 8) } : {}),
          ...(kind === 'caller_deadline' ? { deadlineMs: e.durationMs } : {}),
        };
        await (e.call
          ? breaker.record(NAME, outcome, { grouped: true, admit: true })
          : breaker.record(NAME, outcome, { grouped: true }));
        break;
      }
      case 'configure': {
        const forced = e.change === 'clear' ? null : e.change === 'force_open' ? 'open' : 'closed';
        live =
          e.change === 'tweak'
            ? { ...live, timeoutSeconds: live.timeoutSeconds === 2 ? 3 : 2 }
            : { ...live, forcedState: forced };
        const next = live;
        await breaker.configure(NAME, () => next);
        break;
      }
      case 'reset':
        await breaker.reset(NAME);
        break;
      case 'get':
        await breaker.get(NAME);
        break;
      case 'allowed':
        await breaker.allowed(NAME, `caller-${Math.floor(random() * 3)}`);
        break;
      case 'due':
        await breaker.publishDue();
        break;
    }
  }
  return { clock, live };
}

const { stores } = everyStore();

/** SQLite with two "workers": two stores on two connections to one file. */
async function twoSqliteWorkers(): Promise<CircuitStore[]> {
  const file = path.join(tempDir(), 'db.sqlite');
  const first = openDatabase(file);
  migrate(first, readMigrations(defaultMigrationsDir()));
  return [new SqliteCircuitStore(first), new SqliteCircuitStore(openDatabase(file))];
}

const variants: [string, () => Promise<CircuitStore[]>][] = [
  ...stores.map(([kind, make]): [string, () => Promise<CircuitStore[]>] => [kind, async () => [await make()]]),
  ['sqlite, 2 workers', twoSqliteWorkers],
];

describe.each(variants)('the history kept by the store replays exactly (%s)', (_variant, makeStores) => {
  it('reproduces every recorded transition for 20 random histories across every policy kind', async () => {
    let recorded = 0;
    let seed = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(eventArb, { minLength: 60, maxLength: 160 }), async (events) => {
        const wire = KINDS[seed % KINDS.length]!;
        seed++;
        const start = proposedPolicy(POLICY_DEFAULTS.circuit, POLICY_DEFAULTS.circuit, wire);
        const circuits = await makeStores();
        const { clock } = await drive(circuits, start, events, seed);
        const store = circuits[0]!;
        const circuit = (await store.find(NAME))!;
        const entries = (await store.history(NAME, { limit: 1_000_000 }))!;
        const result = backtest({
          circuit: NAME,
          entries,
          current: policyOf(circuit),
          proposed: [policyOf(circuit)],
          from: circuit.createdAt,
          to: clock.now() + 1,
          createdAt: circuit.createdAt,
        });
        expect(result.fidelity.first_mismatch).toBeNull();
        expect(result.fidelity.matched).toBe(result.fidelity.recorded);
        recorded += result.fidelity.recorded;
      }),
      { numRuns: 20, seed: 2031 },
    );
    expect(recorded).toBeGreaterThan(100); // the histories were not trivially empty
  }, 120_000);
});
