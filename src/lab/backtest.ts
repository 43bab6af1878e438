/**
 * A backtest (the live policy against one proposed) and a grid (the live policy against up to
 * 100 candidates built from dotted PATCH paths), over a decoded history (replay.ts).
 * Signatures first; the engine follows.
 */
import type { CircuitPolicy } from '../domain/policy.js';
import type { BacktestInput, BacktestResult, GridResult } from './backtest-types.js';

/** Most candidates a grid may hold (more: VALIDATION_FAILED). */
export const GRID_MAX_COMBINATIONS = 100;

/** A grid as asked: dotted paths into the PATCH schema, each with the values to try. */
export type GridSpec = Readonly<Record<string, readonly number[]>>;

/** One candidate of a grid: the values it sets, and the policy they make. */
export interface GridPoint {
  readonly values: Readonly<Record<string, number>>;
  readonly policy: CircuitPolicy;
}

/** The proposed policy: a merge patch (wire form) over `current`, validated as PATCH validates it. */
export function proposedPolicy(
  _current: CircuitPolicy,
  _defaults: CircuitPolicy,
  _patch: Readonly<Record<string, unknown>>,
): CircuitPolicy {
  throw new Error('not implemented yet');
}

/** Every combination of a grid spec, each patched over `base` and validated (at most 100). */
export function gridPoints(_base: CircuitPolicy, _defaults: CircuitPolicy, _spec: GridSpec): GridPoint[] {
  throw new Error('not implemented yet');
}

/** The live policy against `input.proposed[0]`. */
export function backtest(_input: BacktestInput, _id?: string): BacktestResult {
  throw new Error('not implemented yet');
}

/** The live policy against every candidate of `input.proposed`, `values[i]` naming candidate i, ranked. */
export function grid(
  _input: BacktestInput,
  _values: readonly Readonly<Record<string, number>>[],
  _id?: string,
): GridResult {
  throw new Error('not implemented yet');
}
