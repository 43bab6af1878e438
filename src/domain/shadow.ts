/**
 * The shadow policy (issue 31): a second policy run beside the live one on every outcome,
 * without acting on it. The shadow is a circuit of its own (`Shadow.circuit`), never forced,
 * kept on the live circuit and run by the same pure functions (`admit`, `recordOutcome`,
 * `refresh`, `reset`): never a copy of the rules. It is a replay of the live traffic, as the
 * policy lab's (docs/policy-lab.md "How a replay works"): an outcome that arrives while the
 * shadow refuses calls is counted as refused and not fed (that call would not have been made),
 * unless the live circuit was refusing too (then it is a late outcome, fed as the live one was).
 * Its transitions carry `shadow: true`; the live circuit's state never depends on it.
 */
import { admit, newCircuit, recordOutcome, refresh, reset } from './circuit.js';
import { policyOf, samePolicy, type CircuitPolicy } from './policy.js';
import type { RandomSource } from './throttle.js';
import type { BreakerPolicy, Circuit, EpochMs, Outcome, Shadow, Step, Transition } from './types.js';

/** The shadow's draws always admit: throttle and ramp draws are not modelled (as the lab's replay). */
const ALWAYS_ADMITS: RandomSource = () => 1;

/** A shadow's policy as it runs: a shadow is never forced (a force is a person's act, not a policy to measure). */
export function shadowPolicy(policy: CircuitPolicy): CircuitPolicy {
  return { ...policyOf(policy), forcedState: null };
}

/** A fresh shadow with this policy: closed, empty, counts 0. */
export function newShadow(name: string, policy: CircuitPolicy, now: EpochMs): Shadow {
  return { circuit: newCircuit(name, shadowPolicy(policy), now), outcomes: 0, refused: 0, openings: 0, since: now };
}

/**
 * The live circuit with its shadow set to `policy` (null: cleared, forgotten). The same policy
 * as the shadow's keeps it as it is (state and counts); another starts a fresh one. Unchanged: the same object.
 */
export function withShadowPolicy(live: Circuit, policy: CircuitPolicy | null, now: EpochMs): Circuit {
  if (policy === null) {
    if (live.shadow == null) return live;
    const { shadow: _shadow, ...rest } = live;
    return { ...rest, updatedAt: now };
  }
  const next = shadowPolicy(policy);
  if (live.shadow != null && samePolicy(policyOf(live.shadow.circuit), next)) return live;
  return { ...live, shadow: newShadow(live.name, next, now), updatedAt: now };
}

/** The live policy a promotion sets: the shadow's, the live circuit's force kept; null without a shadow. */
export function promotedPolicy(live: Circuit): CircuitPolicy | null {
  if (live.shadow == null) return null;
  return { ...policyOf(live.shadow.circuit), forcedState: live.forcedState };
}

/** The transitions marked as the shadow's. */
function marked(transitions: readonly Transition[]): Transition[] {
  return transitions.map((t) => ({ ...t, shadow: true }));
}

const openings = (transitions: readonly Transition[]): number =>
  transitions.reduce((n, t) => (t.to === 'open' && t.from !== 'open' ? n + 1 : n), 0);

/** Was the live circuit refusing every call at `now` (open by its rules, or forced open)? */
function liveRefusing(before: Circuit | null, now: EpochMs): boolean {
  if (before === null || before.forcedState === 'closed') return false;
  return before.forcedState === 'open' || refresh(before, now).circuit.state === 'open';
}

/**
 * The step of the live circuit with its shadow advanced by the same outcome (`before`: the
 * live circuit the step read). Admitted by the shadow (its `admit`, draws that always admit),
 * the outcome is fed to it at the same time (`recordOutcome`, as circuitlog's `call`); refused
 * by it, counted as refused and not fed, unless the live circuit was refusing too (a late
 * outcome: fed). Without a shadow: the step as given.
 */
export function advanceShadow<S extends Step>(
  before: Circuit | null,
  result: S,
  outcome: Outcome,
  now: EpochMs,
  policy: BreakerPolicy,
): S {
  const shadow = result.circuit.shadow;
  if (shadow == null) return result;
  let c = shadow.circuit;
  let own: readonly Transition[] = [];
  if (!liveRefusing(before, now)) {
    const admission = admit(c, now, policy, outcome.caller, ALWAYS_ADMITS, ALWAYS_ADMITS);
    if (!admission.verdict.allowed) {
      const next: Shadow = { ...shadow, circuit: admission.circuit, refused: shadow.refused + 1 };
      return withShadow(result, next, admission.transitions);
    }
    c = admission.circuit;
    own = admission.transitions;
  }
  const fed = recordOutcome(c, outcome, now);
  const transitions = own.length === 0 ? fed.transitions : [...own, ...fed.transitions];
  const next: Shadow = {
    ...shadow,
    circuit: fed.circuit,
    outcomes: shadow.outcomes + 1,
    openings: shadow.openings + openings(transitions),
  };
  return withShadow(result, next, transitions);
}

/** The step with the live circuit's shadow refreshed to `now` (its due open -> half-open); unchanged without one. */
export function refreshShadow<S extends Step>(result: S, now: EpochMs): S {
  const shadow = result.circuit.shadow;
  if (shadow == null) return result;
  const refreshed = refresh(shadow.circuit, now);
  if (refreshed.circuit === shadow.circuit) return result;
  return withShadow(result, { ...shadow, circuit: refreshed.circuit }, refreshed.transitions);
}

/** The step with the live circuit's shadow reset too (an operator reset: a person said the dependency is fine). */
export function resetShadow<S extends Step>(result: S, now: EpochMs): S {
  const shadow = result.circuit.shadow;
  if (shadow == null) return result;
  const done = reset(shadow.circuit, now);
  if (done.circuit === shadow.circuit) return result;
  return withShadow(result, { ...shadow, circuit: done.circuit }, done.transitions);
}

function withShadow<S extends Step>(result: S, shadow: Shadow, transitions: readonly Transition[]): S {
  return {
    ...result,
    circuit: { ...result.circuit, shadow },
    transitions: transitions.length === 0 ? result.transitions : [...result.transitions, ...marked(transitions)],
  };
}

/** The shadow's circuit as of `now` (refreshed, nothing written), or null without a shadow. */
export function shadowAt(live: Circuit, now: EpochMs): Circuit | null {
  return live.shadow == null ? null : refresh(live.shadow.circuit, now).circuit;
}

/** Would the shadow refuse this call now (read-only: nothing is written)? False without a shadow. */
export function shadowWouldRefuse(live: Circuit, now: EpochMs, policy: BreakerPolicy, caller?: string): boolean {
  if (live.shadow == null) return false;
  return !admit(live.shadow.circuit, now, policy, caller, ALWAYS_ADMITS, ALWAYS_ADMITS).verdict.allowed;
}
