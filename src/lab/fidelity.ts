/**
 * The fidelity check (issue 31): the live policy's replay against the transitions the store
 * recorded, compared by (from, to, reason, at) in order; manual ones are a person's, not judged.
 */
import type { Transition } from '../domain/types.js';
import type { Fidelity, LabTransition } from './backtest-types.js';
import { type DecodedHistory, MANUAL, TRANSITION } from './history-decode.js';
import { labTransition } from './run-figures.js';

/** Transitions a person's action makes: manual actions, not judged by fidelity. */
export const MANUAL_REASONS: ReadonlySet<string> = new Set([
  'forced_open',
  'forced_closed',
  'force_cleared',
  'manual_reset',
]);

/** The recorded transitions of the range, outside manual ones (what the live replay must reproduce). */
export function recordedTransitions(history: DecodedHistory): LabTransition[] {
  const out: LabTransition[] = [];
  for (let i = 0; i < history.types.length; i++) {
    if (history.types[i] !== TRANSITION) continue;
    const tr = history.items[i] as Transition;
    if (!MANUAL_REASONS.has(tr.reason)) out.push(labTransition(tr));
  }
  return out;
}

/**
 * The live replay's transitions against the recorded ones, in order by (from, to, reason, at):
 * equal ones match; at a difference the earlier one is passed over (missing from the other
 * side) and the comparison goes on, so one difference is not counted twice.
 */
export function fidelity(history: DecodedHistory, live: { readonly judged: readonly LabTransition[] }): Fidelity {
  const recorded = recordedTransitions(history);
  const replayed = live.judged;
  let matched = 0;
  let firstMismatch: Fidelity['first_mismatch'] = null;
  let i = 0;
  let j = 0;
  while (i < recorded.length || j < replayed.length) {
    const a = recorded[i];
    const b = replayed[j];
    if (a !== undefined && b !== undefined && sameTransition(a, b)) {
      matched++;
      i++;
      j++;
      continue;
    }
    firstMismatch ??= { recorded: a ?? null, replayed: b ?? null };
    if (a === undefined) j++;
    else if (b === undefined) i++;
    else if (a.at < b.at) i++;
    else if (b.at < a.at) j++;
    else {
      i++;
      j++;
    }
  }
  let manual = 0;
  for (const type of history.types) if (type === MANUAL) manual++;
  return {
    matched,
    recorded: recorded.length,
    ratio: recorded.length === 0 ? 1 : matched / recorded.length,
    first_mismatch: firstMismatch,
    manual_actions: manual,
  };
}

const sameTransition = (a: LabTransition, b: LabTransition): boolean =>
  a.at === b.at && a.from === b.from && a.to === b.to && a.reason === b.reason;
