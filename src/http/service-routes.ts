import { z, type OpenAPIHono } from '@hono/zod-openapi';
import { AppError } from '../domain/errors.js';
import type { CircuitStore } from '../store/circuit-store.js';
import type { HealthReport } from '../store/circuit-store.js';
import { json } from './json.js';
import { PROBLEMS } from '../domain/problem-codes.js';
import { ProblemSchema } from './schemas.js';

/** Where the process is in its life, for `GET /health/ready`; the server flips it on SIGTERM. */
export interface Readiness {
  readonly draining: boolean;
  /** The store's schema version, read at start (readiness reads no store). */
  readonly schemaVersion?: number;
}

export const READY_PATH = '/health/ready';

const ReadySchema = z
  .object({
    status: z.literal('ready'),
    schema_version: z
      .number()
      .int()
      .optional()
      .openapi({ description: "the store's schema version (SQLite: its highest migration; Redis: its schema key)" }),
  })
  .openapi('Ready');

/**
 * `GET /health/ready`, readiness apart from liveness (`/health`), as Kubernetes' readiness
 * probe and kube-apiserver's `/readyz` mean it: 200 while the process takes new work; 503
 * `NOT_READY` once it drains after SIGTERM, so a load balancer stops sending before the port
 * closes. A process still starting has no port open (docs/operations.md#readiness). It needs
 * no token and reads no store: a shared store's outage must not take every instance out at once.
 */
function registerReadiness(app: OpenAPIHono, readiness: Readiness | undefined): void {
  app.get(READY_PATH, (c) => {
    if (readiness?.draining)
      throw new AppError(
        'NOT_READY',
        'circuitlog is draining after SIGTERM and takes no new work; send requests to another instance.',
      );
    return json(c, { status: 'ready' as const, schema_version: readiness?.schemaVersion }, 200);
  });
  app.openAPIRegistry.registerPath({
    method: 'get',
    path: READY_PATH,
    tags: ['service'],
    summary: 'Readiness: 200 while taking new work, 503 while draining after SIGTERM; never needs the token',
    responses: {
      200: { description: 'Ready', content: { 'application/json': { schema: ReadySchema } } },
      405: {
        description: 'Another method than GET or HEAD',
        content: { 'application/problem+json': { schema: ProblemSchema } },
      },
      503: {
        description: 'not-ready: draining after SIGTERM (or still starting)',
        content: { 'application/problem+json': { schema: ProblemSchema } },
      },
    },
  });
}

export interface ServiceRouteDeps {
  readonly store: CircuitStore;
  /** The store's health (full disk, deleted file); default: `store.ping()`. */
  readonly health?: () => Promise<HealthReport>;
  readonly readiness?: Readiness;
}

/**
 * The service's own routes, never behind the token: `GET /health` (liveness and the store's
 * health), `GET /health/ready` and `GET /problems/{kind}` (what a problem `type` means).
 * /health and /problems are documented in openapi.ts.
 */
export function registerServiceRoutes(app: OpenAPIHono, deps: ServiceRouteDeps): void {
  app.get('/health', async (c) => {
    const report = await (deps.health?.() ??
      Promise.resolve(deps.store.ping()).then((ok): HealthReport => ({ status: ok ? 'ok' : 'unavailable' })));
    return json(c, report, report.status === 'ok' ? 200 : 503);
  });
  registerReadiness(app, deps.readiness);
  app.get('/problems/:kind', (c) => {
    const entry = Object.values(PROBLEMS).find((p) => p.type === `/problems/${c.req.param('kind')}`);
    if (!entry) throw new AppError('NOT_FOUND', `No problem type '${c.req.param('kind')}'.`);
    return json(c, entry);
  });
}
