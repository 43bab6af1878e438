import {
  admit,
  newCircuit,
  recordOutcome,
  type Admission,
  type BreakerPolicy,
  type Circuit,
  type Outcome,
  type Step,
} from '../domain/circuit.js';
import type { CircuitPolicy } from '../domain/policy.js';
import type { RandomSource } from '../domain/throttle.js';
import type { BatchItem } from '../store/circuit-store.js';

/** What an outcome step needs besides the outcome: the circuit a missing one is created with, and when. */
export interface StepContext {
  readonly name: string;
  readonly settings: CircuitPolicy;
  readonly now: number;
  /** With idle deletion on: refresh `updatedAt` of an unchanged circuit at most this often. */
  readonly activityStampMs?: number;
}

/**
 * The step recording one outcome, creating the circuit if missing. Every outcome, on
 * every route and the proxy, is turned into its step here.
 */
export function outcomeStep(ctx: StepContext, outcome: Outcome): (current: Circuit | null) => Step {
  const { name, settings, now, activityStampMs: stampMs } = ctx;
  // A new circuit is written even when the outcome changes nothing: the store writes
  // whenever the step's circuit is not the one it read, and it read none.
  return (current) => {
    const step = recordOutcome(current ?? newCircuit(name, settings, now), outcome, now);
    // Idle deletion reads `updatedAt` as "last used": refresh it, at most once per stampMs.
    if (stampMs !== undefined && current !== null && step.circuit === current && now - current.updatedAt >= stampMs) {
      return { ...step, circuit: { ...current, updatedAt: now } };
    }
    return step;
  };
}

/**
 * The circuitlog `call`: admit, and when admitted record the outcome, in one step. `random`
 * is the call's one draw for soft throttling (`drawOnce`: the same however often the store runs the step).
 */
export function callStep(
  ctx: StepContext,
  outcome: Outcome,
  policy: BreakerPolicy,
  random: RandomSource,
): (current: Circuit | null) => Admission {
  const record = outcomeStep(ctx, outcome);
  return (current) => {
    const c = current ?? newCircuit(ctx.name, ctx.settings, ctx.now);
    const admission = admit(c, ctx.now, policy, outcome.caller, random);
    if (!admission.verdict.allowed) return admission;
    const next = record(admission.circuit);
    return {
      circuit: next.circuit,
      transitions: [...admission.transitions, ...next.transitions],
      verdict: admission.verdict,
    };
  };
}

/**
 * Decides the step an outcome stores, knowing its peers' circuits as the same write reads
 * them (null: not stored). Pure, like every step: it may run more than once.
 */
export type OutcomeGuard = (step: Step, before: Circuit | null, peers: readonly (Circuit | null)[]) => Step;

/**
 * The batch recording one outcome under a guard, in one atomic write (`applyBatch`):
 * 1. each peer is read; its step writes nothing;
 * 2. the outcome's step runs on the circuit and `guard` may change it, seeing the peers;
 * 3. when the outcome changes the circuit's state (the only steps a guard over its peers
 *    decides), each peer is written back unchanged. A store that checks only the versions
 *    of what it writes (Redis' compare-and-set) then refuses the write if a peer changed
 *    meanwhile, and runs the steps again on the peers as they are now; SQLite holds its
 *    write lock across the whole batch anyway.
 * `index` is the outcome's item, whose result is the one to answer.
 */
export function guardedItems(
  name: string,
  step: (current: Circuit | null) => Step,
  peers: readonly string[],
  guard: OutcomeGuard,
): { items: BatchItem[]; index: number } {
  const seen: (Circuit | null)[] = peers.map(() => null);
  let decided = false;
  const read = peers.map(
    (peer, i): BatchItem => ({
      name: peer,
      step: (c) => {
        seen[i] = c;
        return null;
      },
    }),
  );
  const outcome: BatchItem = {
    name,
    step: (c) => {
      const unguarded = step(c);
      decided = unguarded.transitions.length > 0;
      return guard(unguarded, c, seen);
    },
  };
  const confirm = peers.map(
    (peer): BatchItem => ({
      name: peer,
      step: (c) => (decided && c !== null ? { circuit: { ...c }, transitions: [] } : null),
    }),
  );
  return { items: [...read, outcome, ...confirm], index: read.length };
}
