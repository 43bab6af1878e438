/**
 * The policy lab's replay (issue 31, docs/policy-lab.md): a circuit's recorded history run
 * again through the domain's own pure state machine (`admit`, `recordOutcome`, `configure`,
 * `reset`, `refresh`, `newCircuit`; never a copy of the rules), with the policy that was live
 * or a proposed one, and what each did.
 *
 * - An outcome at `t`: the replay admits the call (`admit`, with draws that always admit:
 *   throttle and ramp draws are not modelled) and, admitted, records it at the same `t`
 *   (`/call`'s semantics). Refused, it is counted in `refused_calls` and not fed, unless the
 *   recorded circuit refused at that moment too (the live replay refused it: the server then
 *   took it as a late outcome), when it is fed as the server fed it.
 * - A `configure`: the live replay applies its `after`; a proposed replay keeps its policy and
 *   applies only the force (a person stepped in). A `reset` is applied by both.
 * - A recorded transition: both replays refresh to its entry's time (a read, the due job).
 * - At the end, a refresh to `to` (the due job's open -> half_open stamped at `openUntil`).
 */
import {
  admit,
  configure,
  newCircuit,
  recordOutcome,
  refresh,
  reset,
  type Circuit,
  type Transition,
} from '../domain/circuit.js';
import type { HistoryManual } from '../domain/history.js';
import type { CircuitPolicy } from '../domain/policy.js';
import { POLICY_DEFAULTS } from '../domain/policy-defaults.js';
import type { BreakerPolicy, Outcome } from '../domain/types.js';
import type { LabTransition, RunFigures } from './backtest-types.js';
import { MANUAL_REASONS } from './fidelity.js';
import { type DecodedHistory, MANUAL, OUTCOME, startPolicy } from './history-decode.js';
import { type Episode, Figures, labTransition } from './run-figures.js';

export { fidelity } from './fidelity.js';
export { type DecodedHistory, decodeHistory } from './history-decode.js';
export type { Episode } from './run-figures.js';

/** How one replay runs: with the live policy (and its recorded changes), or one proposed policy throughout. */
export type ReplayPlan =
  | { readonly kind: 'live'; readonly current: CircuitPolicy }
  | { readonly kind: 'proposed'; readonly policy: CircuitPolicy; readonly live: ReplayRun };

/** One replay's figures, and per outcome (in order) whether it refused the call. */
export interface ReplayRun {
  readonly figures: RunFigures;
  /** Per outcome entry (the n-th outcome at index n): 1 when this replay refused the call. */
  readonly refused: Uint8Array;
  /** The replay's transitions made while replaying entries (not the final refresh to `to`), outside manual ones: what fidelity compares. */
  readonly judged: readonly LabTransition[];
  /** Each opening (closed -> open) until the closing after it: its start, end and time in state open, ms. */
  readonly episodes: readonly Episode[];
}

const BREAKER: BreakerPolicy = { probeLeaseMs: POLICY_DEFAULTS.probeLeaseSeconds * 1000 };
/** The throttle refuses when a draw is below its probability: 1 never is. */
const ALWAYS_UNTHROTTLED = () => 1;
/** The ramp admits when a draw (times 100) is below its share: 0 always is, but at a 0 % share. */
const ALWAYS_RAMPED = () => 0;
/**
 * The circuit copied into an object literal of the same keys, in the same order, with the same
 * values: the same circuit to every rule. Why: V8 keeps the properties of an object made by a
 * spread (`{...c, x}`, as every domain step makes the next circuit) out of the object, and
 * spreading such an object is about 10x slower than spreading a literal's in-object
 * properties; the domain spreads the circuit on every outcome, so the replay hands it a
 * literal each time. One copier per key list (a circuit's keys change only with its policy's
 * optional parts).
 */
class InObject {
  private keys: readonly string[] = [];
  private copy: (c: Circuit) => Circuit = (c) => c;

  of(c: Circuit): Circuit {
    const keys = Object.keys(c);
    if (!sameKeys(keys, this.keys)) {
      this.keys = keys;
      // Keys quoted as JSON: the literal names exactly the keys read, whatever they are.
      const body = keys.map((k) => `${JSON.stringify(k)}: c[${JSON.stringify(k)}]`).join(',\n');
      this.copy = new Function('c', `return {\n${body}\n};`) as (c: Circuit) => Circuit;
    }
    return this.copy(c);
  }
}

function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

const shaped = new InObject();

/** Replay the history under `plan` (see the file's comment). */
export function replay(history: DecodedHistory, plan: ReplayPlan): ReplayRun {
  const { types, times, items } = history;
  const live = plan.kind === 'live';
  const initial = startPolicy(history, live ? plan.current : plan.policy);
  const liveRefused = live ? null : plan.live.refused;
  // A proposed replay keeps its policy; the forces are the recorded ones.
  let policy: CircuitPolicy = live ? initial : { ...plan.policy, forcedState: initial.forcedState };
  const figures = new Figures(history);
  const refused = new Uint8Array(history.outcomes);
  const judged: LabTransition[] = [];
  const note = (transitions: readonly Transition[]): void => {
    for (const tr of transitions) {
      figures.transition(tr, policy);
      if (!MANUAL_REASONS.has(tr.reason)) judged.push(labTransition(tr));
    }
  };
  if (types.length === 0) return { figures: figures.done(history.to), refused, judged, episodes: figures.episodes };
  const first = items[0] as HistoryManual;
  const createdByConfigure = types[0] === MANUAL && first.action === 'configure' && first.before === null;
  // A circuit a PATCH created starts unforced, so the force it was created with is an event.
  let c: Circuit = newCircuit(
    history.circuit,
    createdByConfigure ? { ...policy, forcedState: null } : policy,
    times[0]!,
  );
  let n = 0;
  for (let i = 0; i < types.length; i++) {
    const t = times[i]!;
    const type = types[i];
    if (type === OUTCOME) {
      const outcome = items[i] as Outcome;
      figures.outcome(t, outcome.success);
      c = shaped.of(c);
      const admission = admit(c, t, BREAKER, outcome.caller, ALWAYS_UNTHROTTLED, ALWAYS_RAMPED);
      if (admission.transitions.length > 0) note(admission.transitions);
      if (admission.verdict.allowed) {
        const step = recordOutcome(admission.circuit, outcome, t);
        if (step.transitions.length > 0) note(step.transitions);
        c = step.circuit;
      } else {
        refused[n] = 1;
        figures.refusedCall(t);
        c = admission.circuit;
        // The recorded circuit refused it too, and took it as the server takes a late outcome.
        if (live || liveRefused![n] === 1) {
          const step = recordOutcome(c, outcome, t);
          if (step.transitions.length > 0) note(step.transitions);
          c = step.circuit;
        }
      }
      n++;
    } else if (type === MANUAL) {
      const m = items[i] as HistoryManual;
      if (m.action === 'reset') {
        // The service resets the circuit as stored, without the lazy refresh first.
        const step = reset(c, t);
        if (step.transitions.length > 0) note(step.transitions);
        c = step.circuit;
      } else if (m.after !== undefined) {
        // The service refreshes, then configures.
        const refreshed = refresh(c, t);
        if (refreshed.transitions.length > 0) note(refreshed.transitions);
        c = refreshed.circuit;
        policy = live ? m.after : { ...policy, forcedState: m.after.forcedState };
        const step = configure(c, policy, t);
        if (step.transitions.length > 0) note(step.transitions);
        c = step.circuit;
      }
    } else {
      const refreshed = refresh(c, t);
      if (refreshed.transitions.length > 0) note(refreshed.transitions);
      c = refreshed.circuit;
    }
  }
  const end = refresh(c, history.to);
  for (const tr of end.transitions) figures.transition(tr, policy);
  return { figures: figures.done(history.to), refused, judged, episodes: figures.episodes };
}
