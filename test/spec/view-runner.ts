/**
 * Runs a `cool_down` or `ramp` vector of clients/spec/state-machine.json through the Node client's
 * local view (src/client/view.ts, admission.ts): one view per caller the vector names, each told
 * every step's transitions as `/events/stream` would (after the step: the stream lags the change),
 * and the circuit's JSON after every `configure` (as the client's policy refresh would fetch it). An admission the view
 * decides (a circuit closed in the view) is compared with the vector's verdict; the others are the
 * server's to answer.
 */
import { Admission } from '../../src/client/admission.js';
import { CircuitRampingError, DependencyThrottledError } from '../../src/client/errors.js';
import { LocalBreakers } from '../../src/client/local-breaker.js';
import { LocalThrottles } from '../../src/client/local-throttle.js';
import type { CircuitJson, TransitionEvent, Transport } from '../../src/client/transport.js';
import { coolAndRampFrom } from '../../src/client/cool-down.js';
import { CircuitView, Link } from '../../src/client/view.js';
import type { Expect, PolicyWire, Vector, WireTransition, WireVerdict } from '../../clients/spec/generator/format.js';

/** What a view decided for one admission, in the verdict's terms (or that it asks the server). */
export type ViewDecision =
  | { readonly step: number; readonly asks: true }
  | { readonly step: number; readonly allowed: true }
  | {
      readonly step: number;
      readonly allowed: false;
      readonly cool_down: 'circuit' | 'caller';
      readonly retry_at_ms: number;
    }
  | { readonly step: number; readonly allowed: false; readonly ramp_percent: number };

/** The caller of a view for an admission that names none (a client always has one). */
export const ANONYMOUS = 'spec-anonymous-client';

/** The decision a view must make for `verdict` (a refusal other than a cool-down's or the ramp's is not the view's). */
export function wantedDecision(step: number, verdict: WireVerdict): ViewDecision {
  if (verdict.allowed) return { step, allowed: true };
  if (verdict.cool_down !== undefined)
    return { step, allowed: false, cool_down: verdict.cool_down, retry_at_ms: verdict.retry_at_ms };
  if (verdict.ramp_percent !== undefined) return { step, allowed: false, ramp_percent: verdict.ramp_percent };
  throw new Error(`step ${step}: a closed circuit refused without a cool-down or a ramp: ${JSON.stringify(verdict)}`);
}

const iso = (ms: number) => new Date(ms).toISOString();

/** The circuit's JSON as `GET /circuits/{name}` shows it after a step (undefined: just created). */
function circuitJson(policy: PolicyWire, e: Partial<Expect> = {}): CircuitJson {
  return {
    ...policy,
    state: e.state ?? 'closed',
    cool_until: e.cool_until_ms == null ? null : iso(e.cool_until_ms),
    cooling_callers: (e.cooling_callers ?? []).map((c) => ({ caller: c.caller, cool_until: iso(c.cool_until_ms) })),
    ramp_until: e.ramp_until_ms == null ? null : iso(e.ramp_until_ms),
  } as CircuitJson;
}

/** The transition as `/events/stream` sends it (times in ISO 8601), as the client's stream parser hands it on. */
function streamEvent(t: WireTransition, id: number): TransitionEvent {
  return {
    id: String(id),
    circuit: 'spec',
    from: t.from,
    to: t.to,
    reason: t.reason,
    at: iso(t.at_ms),
    ...(t.callers === undefined ? {} : { callers: t.callers }),
    ...(t.until_ms === undefined ? {} : { until: iso(t.until_ms) }),
    ...(t.scope === undefined ? {} : { scope: t.scope }),
    ...(t.ramp_until_ms === undefined ? {} : { rampUntil: iso(t.ramp_until_ms) }),
    ...(t.retry_after_seconds === undefined ? {} : { retryAfterSeconds: t.retry_after_seconds }),
  };
}

export function runOnView(vector: Vector): ViewDecision[] {
  let now = vector.created_at_ms;
  let random: number | undefined;
  const draw = () => {
    if (random === undefined) throw new Error(`${vector.id}: the view drew a random number, but the event gives none`);
    return random;
  };
  const callers = new Set([ANONYMOUS]);
  for (const s of vector.steps) if ('caller' in s.event && s.event.caller !== undefined) callers.add(s.event.caller);
  const clients = new Map(
    [...callers].map((caller) => {
      const view = new CircuitView(10, caller);
      const link = new Link(() => {});
      link.set(true, true);
      const clock = () => now;
      const admission = new Admission({
        view,
        local: new LocalBreakers(clock, { failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1 }, 10_000),
        throttles: new LocalThrottles(clock, draw),
        transport: {} as Transport, // never asked: only local decisions are made here
        link,
        clock,
        failOpen: true,
        caller,
        random: draw,
      });
      // The snapshot of a circuit just created: closed, the vector's policy.
      const entry = view.getOrCreate('spec');
      entry.json = circuitJson(vector.policy);
      coolAndRampFrom(entry, entry.json, caller);
      entry.generation = link.generation;
      entry.policyDueAt = Number.POSITIVE_INFINITY;
      return [caller, { view, admission }] as const;
    }),
  );
  const decisions: ViewDecision[] = [];
  let ids = 0;
  vector.steps.forEach(({ at_ms, event, expect }, step) => {
    now = at_ms;
    if (event.type === 'admit') {
      random = event.random;
      const { admission } = clients.get(event.caller ?? ANONYMOUS)!;
      if (!admission.admitsHere('spec', false)) decisions.push({ step, asks: true });
      else decisions.push(decision(step, admission.refusalHere('spec')));
    }
    for (const [caller, { view }] of clients) {
      if (event.type === 'configure') {
        // The client's policy refresh (`GET /circuits/{name}`), as admission.ts applies it.
        const entry = view.get('spec')!;
        entry.json = circuitJson(event.policy, expect);
        coolAndRampFrom(entry, entry.json, caller);
      }
      for (const t of expect.transitions) view.apply(streamEvent(t, ++ids));
    }
  });
  return decisions;
}

function decision(step: number, refusal: Error | null): ViewDecision {
  if (refusal === null) return { step, allowed: true };
  if (refusal instanceof DependencyThrottledError)
    return { step, allowed: false, cool_down: refusal.scope, retry_at_ms: refusal.coolUntil.getTime() };
  if (refusal instanceof CircuitRampingError) return { step, allowed: false, ramp_percent: refusal.rampPercent };
  throw refusal;
}
