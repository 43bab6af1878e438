/**
 * The proxy's guard rails per upstream, as pure functions over its node circuits (Envoy's
 * outlier detection guards, api/envoy/config/cluster/v3/outlier_detection.proto):
 * - the ejection cap (`max_ejection_percent`): request outcomes may open at most this share
 *   of the nodes; a trip past it is withheld and the node stays in rotation;
 * - the panic threshold (`panic_threshold_percent`): with fewer nodes available than this
 *   share, the detector is the likelier fault, so node breakers are not honoured;
 * - detect-only: what a forced-closed node's rules would have done.
 * Nothing here reads a clock or a store: callers pass `now` and the circuits they read.
 */
import { activeLeases, isCallAllowed, refresh, type Circuit, type Step, type Transition } from '../domain/circuit.js';
import { closedCircuit } from '../domain/state-change.js';

/**
 * How many of `nodes` request outcomes may hold open at once: `percent` of them rounded
 * down (Envoy: `(ejected + 1) / hosts <= max_ejection_percent`), but at least one when the
 * upstream has two or more nodes, so that one dead node can always be taken out.
 */
export function ejectionLimit(nodes: number, percent: number): number {
  const share = Math.floor((nodes * percent) / 100);
  return nodes >= 2 ? Math.max(1, share) : share;
}

/**
 * Is the node out of rotation by its rules (open or half-open), or forced open? A node
 * forced closed counts by its rules: the cap applies to what the rules would enforce.
 */
export function isEjected(c: Circuit | null): boolean {
  if (c === null) return false;
  return c.forcedState === 'open' || c.state !== 'closed';
}

/**
 * The transitions of a step that open a closed circuit (a trip; a failed probe re-opens, it does
 * not eject). A shadow policy's (issue 31) ejects nothing.
 */
function isTrip(t: Transition): boolean {
  return t.from === 'closed' && t.to === 'open' && t.shadow !== true;
}

/** Does this step open a circuit that was closed? */
export function trips(step: Step): boolean {
  return step.transitions.some(isTrip);
}

/**
 * The step with its trip withheld: the node stays closed with what a closed circuit resets
 * (`closedCircuit` in domain/state-change.ts: its failure count and window start again, as
 * Envoy resets its consecutive counters after an ejection attempt), and an `ejection_capped`
 * event (closed -> closed) stands where the opening would have been. `stateChangedAt` stays:
 * the node's state did not change.
 */
export function withholdTrip(step: Step, stateChangedAt: number | null | undefined): Step {
  const c = step.circuit;
  const circuit: Circuit = { ...closedCircuit(c, c.updatedAt), stateChangedAt: stateChangedAt ?? null };
  const transitions = step.transitions.map(
    (t): Transition => (isTrip(t) ? { ...t, to: 'closed', reason: 'ejection_capped' } : t), // any detail the trip carried stays
  );
  return { circuit, transitions };
}

/**
 * Apply the ejection cap to `step`, the outcome just computed for one node: when it trips
 * the node while `othersEjected` of its siblings are already out and `limit` allows no
 * more, the trip is withheld. Any other step passes unchanged.
 */
export function capEjection(step: Step, before: Circuit | null, othersEjected: number, limit: number): Step {
  if (othersEjected < limit || !trips(step)) return step;
  return withholdTrip(step, before?.stateChangedAt);
}

/**
 * Can the node take a request now, as the proxy would pick it: closed (or forced closed),
 * or half-open with a free probe slot (an open node whose open time has passed counts as
 * the half-open node it is about to be). Forced open never is.
 */
export function isAvailable(c: Circuit | null, now: number): boolean {
  if (c === null) return true; // not created yet: closed
  if (c.forcedState !== null) return c.forcedState === 'closed';
  if (c.state === 'closed') return true;
  const current = refresh(c, now).circuit;
  return current.state === 'half_open' && activeLeases(current, now).length < current.halfOpenMaxCalls;
}

/** Does panic hold: fewer than `thresholdPercent` of `total` nodes available (0 = never)? */
export function panicHolds(available: number, total: number, thresholdPercent: number): boolean {
  return thresholdPercent > 0 && available * 100 < thresholdPercent * total;
}

/**
 * Detect-only: is the circuit forced closed while its rules, unforced, would refuse a call
 * now (open inside its open time, or half-open with every probe slot taken)?
 */
export function wouldRefuse(c: Circuit | null, now: number): boolean {
  if (c === null || c.forcedState !== 'closed' || c.state === 'closed') return false;
  const unforced = refresh({ ...c, forcedState: null }, now).circuit;
  return !isCallAllowed(unforced, now).allowed;
}
