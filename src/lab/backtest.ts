/**
 * A backtest (the live policy against one proposed) and a grid (the live policy against up to
 * 100 candidates built from dotted PATCH paths; evaluated and ranked in grid-rank.ts), over a
 * decoded history (replay.ts). Pure: worker threads (backtest-worker.ts) run these off the event loop.
 */
import { randomUUID } from 'node:crypto';
import { AppError, type FieldError } from '../domain/errors.js';
import type { CircuitPolicy } from '../domain/policy.js';
import { patchedPolicy, policyFromWire, policySchema } from '../policy-schema.js';
import type { BacktestInput, BacktestResult, GridResult } from './backtest-types.js';
import { evaluateCandidates, GRID_MAX_COMBINATIONS, rankGrid } from './grid-rank.js';
import { type DecodedHistory, decodeHistory, fidelity, replay } from './replay.js';

export {
  DEFAULT_DETECT_WITHIN_SECONDS,
  GRID_MAX_COMBINATIONS,
  evaluateCandidates,
  type GridShare,
  gridObjective,
  rankGrid,
  type ScoredCandidate,
} from './grid-rank.js';

/** A grid as asked: dotted paths into the PATCH schema, each with the values to try. */
export type GridSpec = Readonly<Record<string, readonly number[]>>;

/** One candidate of a grid: the values it sets, and the policy they make. */
export interface GridPoint {
  readonly values: Readonly<Record<string, number>>;
  readonly policy: CircuitPolicy;
}

/** The proposed policy: a merge patch (wire form) over `current`, validated as PATCH validates it (else VALIDATION_FAILED). */
export function proposedPolicy(
  current: CircuitPolicy,
  defaults: CircuitPolicy,
  patch: Readonly<Record<string, unknown>>,
): CircuitPolicy {
  const merged = policySchema.safeParse(patchedPolicy(current, defaults, patch as Record<string, unknown>));
  if (!merged.success) {
    // As PATCH names them (http/route-kit.ts's fieldErrors): an unknown key is named itself.
    const fields: FieldError[] = merged.error.issues.flatMap((issue): FieldError[] => {
      const at = issue.path.map(String);
      if (issue.code === 'unrecognized_keys')
        return issue.keys.map((key) => ({ field: [...at, key].join('.'), message: 'is not a policy field' }));
      return [{ field: at.join('.') || '(body)', message: issue.message }];
    });
    throw new AppError('VALIDATION_FAILED', 'The proposed policy has invalid fields.', { fields });
  }
  return policyFromWire(merged.data);
}

/** `{"window.size": 15}` as a merge patch: `{"window": {"size": 15}}`. */
export function dottedPatch(values: Readonly<Record<string, number>>): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  for (const [path, value] of Object.entries(values)) {
    const keys = path.split('.');
    let into = patch;
    for (const key of keys.slice(0, -1)) {
      const next = into[key];
      into = (into[key] = typeof next === 'object' && next !== null ? next : {}) as Record<string, unknown>;
    }
    into[keys.at(-1)!] = value;
  }
  return patch;
}

const PATH = /^[a-z_]+(\.[a-z_]+)?$/;

/**
 * Every combination of a grid spec, each patched over `base` and validated as PATCH validates
 * it: a malformed spec or more than 100 combinations is BAD_REQUEST, a value the policy does
 * not take is VALIDATION_FAILED naming the candidate.
 */
export function gridPoints(base: CircuitPolicy, defaults: CircuitPolicy, spec: GridSpec): GridPoint[] {
  const paths = Object.keys(spec);
  if (paths.length === 0) throw new AppError('BAD_REQUEST', 'The grid names no field.');
  let combinations = 1;
  for (const path of paths) {
    const values = spec[path];
    if (!PATH.test(path))
      throw new AppError('BAD_REQUEST', `The grid's field "${path}" is not a policy field path (like window.size).`);
    if (
      !Array.isArray(values) ||
      values.length === 0 ||
      !values.every((v) => typeof v === 'number' && Number.isFinite(v))
    )
      throw new AppError('BAD_REQUEST', `The grid's field "${path}" must list one or more numbers.`);
    combinations *= values.length;
  }
  if (combinations > GRID_MAX_COMBINATIONS)
    throw new AppError(
      'BAD_REQUEST',
      `The grid has ${combinations} combinations; at most ${GRID_MAX_COMBINATIONS} are backtested at once.`,
    );
  let rows: Record<string, number>[] = [{}];
  for (const path of paths) rows = rows.flatMap((row) => spec[path]!.map((v) => ({ ...row, [path]: v })));
  return rows.map((values) => {
    try {
      return { values, policy: proposedPolicy(base, defaults, dottedPatch(values)) };
    } catch (error) {
      if (!(error instanceof AppError)) throw error;
      const named = Object.entries(values)
        .map(([k, v]) => `${k}=${v}`)
        .join(', ');
      throw new AppError('VALIDATION_FAILED', `The grid's candidate ${named} is not a valid policy.`, error.options);
    }
  });
}

/** The live policy against `input.proposed[0]`. */
export function backtest(input: BacktestInput, id: string = randomUUID()): BacktestResult {
  const proposed = input.proposed[0];
  if (proposed === undefined) throw new AppError('BAD_REQUEST', 'A backtest needs a proposed policy.');
  const history = decoded(input);
  const live = replay(history, { kind: 'live', current: input.current });
  const other = replay(history, { kind: 'proposed', policy: proposed, live });
  return {
    id,
    circuit: input.circuit,
    from: input.from,
    to: input.to,
    outcomes: history.outcomes,
    start: history.start,
    skipped: history.skipped,
    current: live.figures,
    proposed: other.figures,
    fidelity: fidelity(history, live),
  };
}

/** The live policy against every candidate of `input.proposed`, `values[i]` naming candidate i, ranked (see `gridObjective`). */
export function grid(
  input: BacktestInput,
  values: readonly Readonly<Record<string, number>>[],
  id: string = randomUUID(),
): GridResult {
  return rankGrid(input, values, [evaluateCandidates(input)], id);
}

function decoded(input: BacktestInput): DecodedHistory {
  return decodeHistory(input.circuit, input.entries, input.from, input.to, input.createdAt);
}
