import type { CircuitState } from '../domain/circuit.js';
import type { TransitionDetail } from '../domain/transition-detail.js';

/** One stored transition with its circuit's name (and its detail members, issue 17). */
export interface LoggedTransition extends TransitionDetail {
  readonly id: number;
  readonly circuit: string;
  readonly from: CircuitState;
  readonly to: CircuitState;
  readonly reason: string;
  readonly at: number;
}

/** Which circuits a reader wants: one by name, or all whose names start with a prefix. */
export interface TransitionFilter {
  readonly circuit?: string;
  readonly prefix?: string;
}

/** Transitions in id order, as the event stream and the dashboard read them (SQLite table or Redis stream). */
export interface TransitionReader {
  maxId(): number;
  after(afterId: number, limit: number, filter?: TransitionFilter): LoggedTransition[];
  latest(limit: number): LoggedTransition[];
  /** Each circuit's newest transition; with `names`, of those circuits only (a page of them). */
  lastPerCircuit(names?: readonly string[]): Map<string, LoggedTransition>;
}

/** Does a transition's circuit pass the filter? (The same rule as the SQLite log's SQL.) */
export function matchesFilter(circuit: string, filter: TransitionFilter): boolean {
  if (filter.circuit !== undefined) return circuit === filter.circuit;
  if (filter.prefix !== undefined) return circuit.startsWith(filter.prefix);
  return true;
}
