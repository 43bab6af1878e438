/**
 * clients/spec/state-machine.json is true of the server: it is exactly what the generator
 * makes from src/domain today, every vector replays through the domain, and every vector a
 * client's local breaker must pass runs through the Node client's (src/client/local-breaker.ts).
 */
import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { runOnDomain, wireVerdict } from '../../clients/spec/generator/domain-runner.js';
import type { StateMachineSpec, Vector } from '../../clients/spec/generator/format.js';
import { SPEC_PATH, stateMachineText } from '../../clients/spec/generator/vectors.js';
import { LocalBreakers, type KnownCircuit } from '../../src/client/local-breaker.js';
import type { CircuitJson } from '../../src/client/transport.js';
import type { TransitionReason } from '../../src/domain/circuit.js';

const text = readFileSync(SPEC_PATH, 'utf8');
const spec = JSON.parse(text) as StateMachineSpec;
/**
 * A local breaker records each outcome as its call ends, so the server-side `ended_at` (stale outcome) vectors are not its
 * rule; nor are the `quorum` ones: a local breaker sees one caller, itself.
 */
const forLocalBreakers = spec.vectors.filter(
  (v) => v.outcome_rule === 'count_only' && !v.tags.includes('ended_at') && !v.tags.includes('quorum'),
);

/**
 * Every reason the domain's state machine makes; a new one fails to compile here until a vector
 * covers it. `ejection_capped` is made by the proxy's guard rails (test/proxy/guard-rails.test.ts);
 * `cool_down` and `cool_down_ended` (issue 29) by test/domain/outcome-rules.test.ts until the kinds' vectors come.
 */
const REASONS = {
  failure_threshold_reached: true,
  failure_rate_exceeded: true,
  slow_call_rate_exceeded: true,
  probe_failed: true,
  open_timeout_elapsed: true,
  probe_succeeded: true,
  success_recorded: true,
  manual_reset: true,
  forced_open: true,
  forced_closed: true,
  force_cleared: true,
  trip_withheld: true,
  caller_isolated: true,
  caller_released: true,
} satisfies Record<Exclude<TransitionReason, 'ejection_capped' | 'cool_down' | 'cool_down_ended'>, true>;

/** Policy members and a predicate that says a vector sets them away from the default. */
const POLICY_FIELDS: Record<string, (p: Vector['policy']) => boolean> = {
  failure_threshold: (p) => p.failure_threshold !== 5,
  timeout_seconds: (p) => p.timeout_seconds !== 30,
  half_open_max_calls: (p) => p.half_open_max_calls > 1,
  success_threshold: (p) => p.success_threshold > 1,
  'window.type=count': (p) => p.window?.type === 'count',
  'window.type=time': (p) => p.window?.type === 'time',
  'window.minimum_calls': (p) =>
    p.window != null && p.window.minimum_calls !== (p.window.type === 'count' ? p.window.size : 10),
  'window.failure_rate_threshold': (p) => p.window != null && p.window.failure_rate_threshold !== 50,
  'window.slow_call_duration_ms': (p) => p.window?.slow_call_duration_ms != null,
  'window.slow_call_rate_threshold': (p) => p.window != null && p.window.slow_call_rate_threshold !== 100,
  'backoff.multiplier': (p) => p.backoff != null && p.backoff.multiplier !== 2,
  'backoff.max_timeout_seconds': (p) => p.backoff != null && p.backoff.max_timeout_seconds !== 300,
  'forced_state=open': (p) => p.forced_state === 'open',
  'forced_state=closed': (p) => p.forced_state === 'closed',
  throttle: (p) => p.throttle != null,
  'throttle.k': (p) => p.throttle != null && p.throttle.k !== 2,
  'throttle.window_seconds': (p) => p.throttle != null && p.throttle.window_seconds !== 60,
};

const policiesOf = (v: Vector) => [
  v.policy,
  ...v.steps.flatMap((s) => (s.event.type === 'configure' ? [s.event.policy] : [])),
];

describe('clients/spec/state-machine.json', () => {
  it('is exactly what the generator makes from src/domain today (run npm run spec:generate after a domain change)', () => {
    expect(text).toBe(stateMachineText());
  });

  it('matches its JSON Schema (clients/spec/state-machine.schema.json)', () => {
    const validate = new Ajv2020({ allErrors: true }).compile(
      JSON.parse(readFileSync('clients/spec/state-machine.schema.json', 'utf8')) as object,
    );
    expect(validate(spec) ? [] : validate.errors?.slice(0, 5)).toEqual([]);
  });

  it('has at least 150 vectors, all of them for every client local breaker but the circuitlog-route ones', () => {
    expect(spec.format).toBe('circuitlog-state-machine');
    expect(spec.version).toBe(1);
    expect(forLocalBreakers.length).toBeGreaterThanOrEqual(150);
    expect(new Set(spec.vectors.map((v) => v.id)).size).toBe(spec.vectors.length);
  });

  it('sets every policy field away from its default in some vector a local breaker runs', () => {
    const missing = Object.entries(POLICY_FIELDS)
      .filter(([, differs]) => !forLocalBreakers.some((v) => policiesOf(v).some(differs)))
      .map(([field]) => field);
    expect(missing).toEqual([]);
  });

  it('makes every transition reason and uses every event type', () => {
    const reasons = new Set(
      spec.vectors.flatMap((v) => v.steps.flatMap((s) => s.expect.transitions.map((t) => t.reason))),
    );
    expect([...reasons].sort()).toEqual(Object.keys(REASONS).sort());
    const events = new Set(forLocalBreakers.flatMap((v) => v.steps.map((s) => s.event.type)));
    expect([...events].sort()).toEqual(['admit', 'configure', 'outcome', 'reset']);
  });

  it('refuses and admits in some step of every kind: open, half-open full, forced open, caller, throttled', () => {
    const kind = (v: Vector['steps'][number]['expect']['verdict']) =>
      v.allowed ? '' : `${v.forced}${v.scope === undefined ? '' : `/${v.scope}`}${v.throttled ? '/throttled' : ''}`;
    const refusals = spec.vectors.flatMap((v) =>
      v.steps.filter((s) => !s.expect.verdict.allowed).map((s) => `${s.expect.state}/${kind(s.expect.verdict)}`),
    );
    expect(new Set(refusals)).toEqual(
      new Set([
        'open/false',
        'half_open/false',
        'closed/true',
        'open/true',
        'half_open/true',
        'closed/false/caller',
        'closed/false/throttled',
      ]),
    );
  });
});

describe('every vector through the server domain (src/domain)', () => {
  it.each(spec.vectors)('$id', (vector) => {
    expect(runOnDomain(vector)).toEqual(vector.steps.map((s) => s.expect));
  });
});

/** One vector through the Node client's local breaker: state after every step, verdict of every admission. */
function runOnLocalBreaker(vector: Vector): { state: string | undefined; verdict?: unknown }[] {
  let now = vector.created_at_ms;
  let draw: number | undefined; // the admission's random number, for a throttled circuit
  const random = () => {
    if (draw === undefined)
      throw new Error(`${vector.id}: an admission drew a random number, but its event gives no draw`);
    return draw;
  };
  const breakers = new LocalBreakers(
    () => now,
    { failureThreshold: 99, timeoutSeconds: 99, halfOpenMaxCalls: 99 },
    vector.probe_lease_ms,
    10_000,
    random,
  );
  const name = 'spec';
  const known: KnownCircuit = { state: undefined, json: vector.policy as CircuitJson };
  breakers.configure(name, vector.policy as CircuitJson); // created at created_at_ms, with the vector's policy
  return vector.steps.map(({ at_ms, event }) => {
    now = at_ms;
    switch (event.type) {
      case 'admit': {
        draw = event.draw;
        const verdict = wireVerdict(breakers.admit(name, known));
        return { state: breakers.state(name), verdict };
      }
      case 'outcome':
        breakers.record(name, event.success, event.duration_ms, known);
        break;
      case 'reset':
        breakers.reset(name, known);
        break;
      case 'configure':
        breakers.configure(name, event.policy as CircuitJson);
        break;
    }
    return { state: breakers.state(name) };
  });
}

describe('every count_only vector through the Node client local breaker (src/client/local-breaker.ts)', () => {
  it.each(forLocalBreakers)('$id', (vector) => {
    const wanted = vector.steps.map((s) =>
      s.event.type === 'admit' ? { state: s.expect.state, verdict: s.expect.verdict } : { state: s.expect.state },
    );
    expect(runOnLocalBreaker(vector)).toEqual(wanted);
  });
});
