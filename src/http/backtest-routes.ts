/**
 * The policy lab's routes (issue 31, docs/policy-lab.md): `POST /circuits/{name}/backtest`
 * replays the circuit's recorded history with its live policy and a proposed one (or a grid of
 * candidates) off the event loop, and `GET /circuits/{name}/backtest/{id}.svg` draws a kept
 * answer. Both need `read` (auth/route-scopes.ts): a backtest changes nothing.
 */
import { randomUUID } from 'node:crypto';
import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { AppError } from '../domain/errors.js';
import { policyOf } from '../domain/policy.js';
import type { StoredEntry } from '../domain/history.js';
import type { BacktestInput, BacktestResult, GridResult } from '../lab/backtest-types.js';
import { backtestSvg } from '../lab/backtest-svg.js';
import type { BacktestRunner } from '../lab/backtest-worker.js';
import type { BreakerService } from '../service/breaker-service.js';
import type { CircuitStore } from '../store/circuit-store.js';
import { BacktestBody, type BacktestPlan } from './backtest-body.js';
import { backtestPlan } from './backtest-body.js';
import { BacktestCache, type LabResult } from './backtest-cache.js';
import { pictureId, picturePlan } from './backtest-picture.js';
import { BACKTEST_BODY_DOC, BacktestAnswerSchema } from './backtest-schemas.js';
import { circuitNameParam, circuitNotFound, common, ok, problem, readJson } from './route-kit.js';
import { NameParam } from './schemas.js';
import { z } from '@hono/zod-openapi';

/** The engine, behind a seam: the worker thread in the server (lab/backtest-worker.ts), a fake in route tests. */
export interface Backtester {
  /** Current vs `input.proposed[0]`; may reject with BACKTEST_BUSY. The route sets the answer's `id`. */
  backtest(input: BacktestInput): Promise<Omit<BacktestResult, 'id'> & { id?: string }>;
  /** Every candidate of `input.proposed`, whose grid values are `values` (same order), ranked. */
  grid(
    input: BacktestInput,
    values: readonly Readonly<Record<string, number>>[],
  ): Promise<Omit<GridResult, 'id'> & { id?: string }>;
  /** The picture of a backtest's answer. */
  svg(result: BacktestResult): string;
  /** Whether a backtest runs now (a new one would get BACKTEST_BUSY): asked before the history is read. */
  busy?(): boolean;
}

/** The server's engine: backtests in the process's worker thread, pictures drawn here. */
export function workerBacktester(runner: BacktestRunner): Backtester {
  return {
    backtest: (input) => runner.backtest(input),
    grid: (input, values) => runner.grid({ input, values }),
    svg: (result) => backtestSvg(result),
    busy: () => runner.running,
  };
}

export interface BacktestRouteDeps {
  readonly store: CircuitStore;
  readonly backtester: Backtester;
  /** The most history entries one backtest reads (`history.max_outcomes`): the read's bound in memory. */
  readonly maxEntries: number;
  readonly bodyLimitBytes: number;
  /** The kept answers (default 16 answers, 8 MiB). */
  readonly cache?: BacktestCache;
}

const SVG_FILE = /^([A-Za-z0-9_-]{1,4096})\.svg$/;
/**
 * The most entries one backtest reads, whatever `history.max_outcomes` says: a read is held in
 * the serving thread's memory while the worker replays a copy (docs/policy-lab.md measured 4.3
 * million entries at a 2,137 MiB peak resident size, about 500 bytes an entry).
 */
export const MAX_READ_ENTRIES = 5_000_000;

/** The history a plan replays, at most `maxEntries` and MAX_READ_ENTRIES (the newest beyond are left out, the range ending before them). */
export async function readPlanHistory(
  store: CircuitStore,
  name: string,
  plan: BacktestPlan,
  maxEntries: number,
): Promise<{ entries: StoredEntry[]; from: number; to: number }> {
  if (store.history === undefined) throw new AppError('NOT_FOUND', 'This store keeps no outcome history.');
  const limit = Math.min(maxEntries, MAX_READ_ENTRIES);
  const read = await store.history(name, { from: plan.from, to: plan.to, limit });
  if (read === null) throw circuitNotFound(name);
  let entries = read;
  let to = plan.to;
  if (entries.length === limit && entries.length > 0) {
    // Bounded read: the range ends at the last entry's time, whose own entries are left out whole.
    to = entries.at(-1)!.t;
    entries = entries.filter((e) => e.t < to);
  }
  return { entries, from: plan.from ?? entries[0]?.t ?? Math.min(to - 1, plan.to), to };
}

/** Run a plan with the engine: the answer without its id. */
export async function runPlan(
  backtester: Backtester,
  circuit: { readonly name: string; readonly createdAt: number; readonly current: BacktestInput['current'] },
  plan: BacktestPlan,
  history: { entries: StoredEntry[]; from: number; to: number },
): Promise<LabResult> {
  const { name, current, createdAt } = circuit;
  const input: BacktestInput = {
    circuit: name,
    createdAt,
    entries: history.entries,
    current,
    proposed: plan.grid === null ? [plan.proposed] : plan.grid.map((p) => p.policy),
    from: history.from,
    to: history.to,
    detectWithinSeconds: plan.detectWithinSeconds,
  };
  const answer =
    plan.grid === null
      ? await backtester.backtest(input)
      : await backtester.grid(
          input,
          plan.grid.map((p) => p.values),
        );
  const { id: _engines, ...figures } = answer;
  // A single backtest's id names what it replayed, so its picture can be drawn again anywhere.
  const id =
    plan.grid === null
      ? pictureId({
          circuit: name,
          proposed: plan.proposed,
          from: history.from,
          to: history.to,
          detectWithinSeconds: plan.detectWithinSeconds,
        })
      : randomUUID();
  return { id, ...figures } as LabResult;
}

export function registerBacktestRoutes(app: OpenAPIHono, breaker: BreakerService, deps: BacktestRouteDeps): void {
  const cache = deps.cache ?? new BacktestCache();
  documentRoutes(app);
  app.post('/circuits/:name/backtest', async (c) => {
    const name = circuitNameParam(c);
    const body = await readJson(c, BacktestBody, deps.bodyLimitBytes);
    const circuit = await breaker.get(name);
    if (circuit === null) throw circuitNotFound(name);
    const current = policyOf(circuit);
    const plan = backtestPlan(body, current, breaker.defaults, breaker.now());
    if (deps.backtester.busy?.()) throw busyError();
    const history = await readPlanHistory(deps.store, name, plan, deps.maxEntries);
    const result = await runPlan(deps.backtester, { name, current, createdAt: circuit.createdAt }, plan, history);
    const text = `${JSON.stringify(result)}\n`;
    cache.put(result, Buffer.byteLength(text));
    return c.body(text, 200, { 'content-type': 'application/json' });
  });
  app.get('/circuits/:name/backtest/:file', async (c) => {
    const name = circuitNameParam(c);
    const circuit = await breaker.get(name);
    if (circuit === null) throw circuitNotFound(name);
    const id = SVG_FILE.exec(c.req.param('file') ?? '')?.[1];
    let result = id === undefined ? null : cache.get(id, name);
    // Not kept here (another worker ran it, or this process restarted): replay it again.
    const again = result === null && id !== undefined ? picturePlan(id, name, breaker.defaults) : null;
    if (again !== null) {
      if (deps.backtester.busy?.()) throw busyError();
      const { circuit: _named, ...kept } = again;
      const plan: BacktestPlan = { ...kept, grid: null };
      const history = await readPlanHistory(deps.store, name, plan, deps.maxEntries);
      result = await runPlan(
        deps.backtester,
        { name, current: policyOf(circuit), createdAt: circuit.createdAt },
        plan,
        history,
      );
      cache.put(result, Buffer.byteLength(JSON.stringify(result)));
    }
    if (result === null || !('proposed' in result)) {
      throw new AppError(
        'BACKTEST_NOT_FOUND',
        `No backtest picture '${c.req.param('file')}' of circuit '${name}': grid answers have no picture, and this id names no backtest.`,
      );
    }
    return c.body(deps.backtester.svg(result), 200, {
      'content-type': 'image/svg+xml; charset=utf-8',
      'cache-control': 'private, max-age=3600',
    });
  });
}

/** The runner's own refusal, before the history is read for nothing. */
function busyError(): AppError {
  return new AppError('BACKTEST_BUSY', 'Another backtest is running in this process; try again when it is done.', {
    retryAfterSeconds: 1,
  });
}

function documentRoutes(app: OpenAPIHono): void {
  app.openAPIRegistry.registerComponent('schemas', 'BacktestRequest', BACKTEST_BODY_DOC);
  app.openAPIRegistry.registerPath(
    createRoute({
      method: 'post',
      path: '/circuits/{name}/backtest',
      tags: ['circuits'],
      summary:
        "Backtest a proposed policy (or a grid of them) on the circuit's recorded history, beside the live policy; changes nothing",
      description:
        'Replays the recorded outcomes through the state machine with the live policy and the proposed one (docs/policy-lab.md). The answer is kept in memory (the last 16, at most 8 MiB) for its picture.',
      request: {
        params: NameParam,
        body: {
          required: false,
          content: { 'application/json': { schema: { $ref: '#/components/schemas/BacktestRequest' } } },
        },
      },
      responses: {
        200: ok('Both replays, their figures and the fidelity of the live one; or a ranked grid', BacktestAnswerSchema),
        ...common,
        400: problem(
          'Invalid circuit name or JSON; too-many-combinations: a grid of more than 100 combinations (nothing run)',
        ),
        404: problem('circuit-not-found: no circuit by that name'),
        413: problem('Body over the size limit'),
        415: problem('A body that is not application/json'),
        422: problem(
          'Invalid fields (each named in errors): the proposed policy or a grid value breaks a rule PATCH enforces, a bad range; nothing run',
        ),
        507: problem(
          'backtest-too-large: the backtest needed more memory than its worker thread may use; nothing changed',
        ),
        503: problem(
          'backtest-busy: another backtest is running in this process (Retry-After); backtest-timeout: it ran past its time limit; or a storage problem',
          undefined,
          { 'Retry-After': { description: 'Whole seconds to wait', schema: { type: 'integer', minimum: 1 } } },
        ),
      },
    }),
  );
  app.openAPIRegistry.registerPath(
    createRoute({
      method: 'get',
      path: '/circuits/{name}/backtest/{id}.svg',
      tags: ['circuits'],
      summary: "A backtest's picture: the failure rate per minute under both policies' state bands",
      description:
        'Drawn from the answer when this process keeps it, else by replaying again what the id names (the proposed policy and the range: any worker, after a restart too).',
      request: {
        params: NameParam.extend({
          id: z
            .string()
            .max(4096)
            .regex(/^[A-Za-z0-9_-]+$/)
            .describe('The backtest answer’s id (base64url: it names the proposed policy and the range replayed)'),
        }),
      },
      responses: {
        200: { description: 'The picture', content: { 'image/svg+xml': { schema: { type: 'string' } } } },
        400: common[400],
        401: common[401],
        404: problem(
          'circuit-not-found; or backtest-not-found: the id names no backtest of this circuit (a grid answer, made up, another circuit’s)',
        ),
        405: common[405],
        503: common[503],
      },
    }),
  );
}
