/**
 * What `POST /circuits/{name}/backtest` is asked (docs/policy-lab.md), checked and turned into
 * a plan: the proposed policy (the PATCH schema merged over the live one, by PATCH's own code),
 * the grid's candidates, the range. The route and `circuitlog backtest --db` both use it.
 */
import { z } from '@hono/zod-openapi';
import { AppError } from '../domain/errors.js';
import type { CircuitPolicy } from '../domain/policy.js';
import { mergedPolicy } from './policy-routes.js';

/** A grid backtests every combination of its values, at most this many (design: issue 31). */
export const MAX_GRID_COMBINATIONS = 100;
const DEFAULT_DETECT_WITHIN_SECONDS = 60; // the grid objective's "opens within N s of an outage"
const MAX_DETECT_WITHIN_SECONDS = 86_400; // 1 day

// An instant: epoch ms, or an ISO 8601 date-time with its offset (`2026-12-05T10:00:00Z`).
const Instant = z.union([
  z.number().int().min(0).max(8_640_000_000_000_000),
  z.iso.datetime({ offset: true }).describe('ISO 8601 date-time with an offset'),
]);

const GridValues = z.array(z.number().finite()).min(1).max(MAX_GRID_COMBINATIONS);

export const BacktestBody = z
  .object({
    policy: z
      .record(z.string(), z.unknown())
      .optional()
      .describe('A policy patch (the PATCH /circuits/{name} body), merged over the live policy: the proposed policy'),
    grid: z
      .record(z.string(), GridValues)
      .optional()
      .describe(
        'Dotted PATCH paths (failure_threshold, window.size, ...) to lists of values; every combination (at most 100) is backtested over the proposed policy and ranked',
      ),
    from: Instant.optional().describe('Start of the replayed range (inclusive); default: the oldest entry kept'),
    to: Instant.optional().describe('End of the replayed range (exclusive); default: now'),
    detect_within_seconds: z
      .number()
      .gt(0)
      .max(MAX_DETECT_WITHIN_SECONDS)
      .optional()
      .describe(
        "The grid objective's window: an outage is caught when a candidate opens within this many seconds of its start (default 60)",
      ),
  })
  .strict();

export type BacktestBodyValue = z.output<typeof BacktestBody>;

/** One grid candidate: the values it sets and the policy they make. */
export interface GridPoint {
  readonly values: Readonly<Record<string, number>>;
  readonly policy: CircuitPolicy;
}

/** A checked backtest request, ready to read the history and run. */
export interface BacktestPlan {
  readonly proposed: CircuitPolicy;
  /** Grid mode: the candidates, in the grid's order (last path varying fastest). */
  readonly grid: readonly GridPoint[] | null;
  /** Absent: from the oldest entry kept. */
  readonly from: number | undefined;
  readonly to: number;
  readonly detectWithinSeconds: number;
}

const instantMs = (v: number | string | undefined): number | undefined =>
  v === undefined ? undefined : typeof v === 'number' ? v : Date.parse(v);

/** A dotted path (`window.size`) set to `value` in a patch object (copied). */
function withPath(patch: Record<string, unknown>, dotted: string, value: number): Record<string, unknown> {
  const [head = '', ...rest] = dotted.split('.');
  if (rest.length === 0) return { ...patch, [head]: value };
  const inner = patch[head];
  const base = typeof inner === 'object' && inner !== null && !Array.isArray(inner) ? inner : {};
  return { ...patch, [head]: withPath(base as Record<string, unknown>, rest.join('.'), value) };
}

/** Every combination of the grid's values, last path varying fastest. */
function combinations(grid: Readonly<Record<string, readonly number[]>>): Record<string, number>[] {
  let out: Record<string, number>[] = [{}];
  for (const [path, values] of Object.entries(grid)) out = out.flatMap((c) => values.map((v) => ({ ...c, [path]: v })));
  return out;
}

/**
 * The plan for a request on a circuit whose live policy is `current`: a VALIDATION_FAILED
 * (422) for a proposed policy or grid value PATCH would refuse, naming the field; a
 * TOO_MANY_COMBINATIONS (400) past 100 combinations; an INVALID_QUERY-like 422 for a range
 * that ends before it starts. Nothing is read or run here.
 */
export function backtestPlan(
  body: BacktestBodyValue,
  current: CircuitPolicy,
  defaults: CircuitPolicy,
  now: number,
): BacktestPlan {
  const patch = body.policy ?? {};
  const proposed = mergedPolicy(current, defaults, patch, 'The proposed policy');
  const from = instantMs(body.from);
  const to = instantMs(body.to) ?? now;
  if (from !== undefined && from >= to) {
    throw new AppError('VALIDATION_FAILED', 'The range is empty: from must be before to.', {
      fields: [{ field: 'from', message: `must be before to (${new Date(to).toISOString()})` }],
    });
  }
  return {
    proposed,
    grid: body.grid === undefined ? null : gridPoints(body.grid, current, defaults, patch),
    from,
    to,
    detectWithinSeconds: body.detect_within_seconds ?? DEFAULT_DETECT_WITHIN_SECONDS,
  };
}

function gridPoints(
  grid: Readonly<Record<string, readonly number[]>>,
  current: CircuitPolicy,
  defaults: CircuitPolicy,
  patch: Record<string, unknown>,
): GridPoint[] {
  const paths = Object.keys(grid);
  if (paths.length === 0)
    throw new AppError('VALIDATION_FAILED', 'The grid names no policy field.', {
      fields: [{ field: 'grid', message: 'must name at least one dotted policy path' }],
    });
  const count = Object.values(grid).reduce((n, values) => n * values.length, 1);
  if (count > MAX_GRID_COMBINATIONS) {
    throw new AppError(
      'TOO_MANY_COMBINATIONS',
      `The grid makes ${count} combinations; at most ${MAX_GRID_COMBINATIONS} are backtested at once.`,
      { extensions: { combinations: count, max_combinations: MAX_GRID_COMBINATIONS } },
    );
  }
  return combinations(grid).map((values) => {
    const candidate = Object.entries(values).reduce((p, [path, v]) => withPath(p, path, v), patch);
    const named = Object.entries(values)
      .map(([path, v]) => `${path}=${v}`)
      .join(', ');
    return { values, policy: mergedPolicy(current, defaults, candidate, `The grid candidate ${named}`) };
  });
}
