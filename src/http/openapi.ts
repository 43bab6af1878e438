import { z, type OpenAPIHono } from '@hono/zod-openapi';
import { needsToken } from './auth.js';
import { OPERATION_IDS, SERVERS } from './operation-ids.js';
import { PROBLEMS } from '../domain/problem-codes.js';
import { ProblemSchema } from './schemas.js';

export interface DocumentOptions {
  /** CIRCUITLOG_TOKEN is set: /circuits operations need the bearer scheme. */
  readonly token: boolean;
  /** /proxy/{upstream}/... is served. */
  readonly proxy: boolean;
}

const problem = (description: string) => ({
  description,
  content: { 'application/problem+json': { schema: ProblemSchema } },
});
const notAllowed = problem('Another method than the ones this path answers; Allow lists them');

const HealthSchema = z
  .object({
    status: z.string().openapi({ description: "'ok'; else 'degraded', 'failed' or 'unavailable'" }),
    storage: z.string().optional().openapi({ description: "what is wrong: 'full', 'deleted' or 'replaced'" }),
    schema_version: z
      .number()
      .int()
      .optional()
      .openapi({ description: "the store's schema version (SQLite: its highest migration; Redis: its schema key)" }),
  })
  .passthrough()
  .openapi('Health');
const ProblemTypeSchema = z
  .object({ status: z.number().int(), type: z.string(), title: z.string() })
  .openapi('ProblemType');
const kinds = Object.values(PROBLEMS).map((p) => p.type.slice('/problems/'.length));

/** The routes app.ts serves by hand (health, problem types, proxy), for the document only. */
function registerPlainRoutes(app: OpenAPIHono, proxy: boolean): void {
  registerHealthRoute(app);
  registerProblemRoute(app);
  if (proxy) registerProxyRoutes(app);
}

/** `GET /health`, for the document only. */
function registerHealthRoute(app: OpenAPIHono): void {
  app.openAPIRegistry.registerPath({
    method: 'get',
    path: '/health',
    tags: ['service'],
    summary: 'Liveness and store health; never needs the token',
    responses: {
      200: { description: 'Healthy', content: { 'application/json': { schema: HealthSchema } } },
      405: notAllowed,
      503: {
        description:
          "A storage fault: status 'degraded' (disk full) or 'failed' (file deleted), or a storage-busy problem",
        content: {
          'application/json': { schema: HealthSchema },
          'application/problem+json': { schema: ProblemSchema },
        },
      },
    },
  });
}

/** `GET /problems/{kind}`, for the document only. */
function registerProblemRoute(app: OpenAPIHono): void {
  app.openAPIRegistry.registerPath({
    method: 'get',
    path: '/problems/{kind}',
    tags: ['service'],
    summary: 'What a problem type means (the `type` of every error answer)',
    request: {
      params: z.object({ kind: z.string().openapi({ param: { name: 'kind', in: 'path' }, example: kinds[0] }) }),
    },
    responses: {
      200: { description: 'The problem type', content: { 'application/json': { schema: ProblemTypeSchema } } },
      404: problem('No such problem type'),
      405: notAllowed,
    },
  });
}

/** `/proxy/{upstream}/{path}` under every method, for the document only. */
function registerProxyRoutes(app: OpenAPIHono): void {
  for (const method of ['get', 'head', 'post', 'put', 'patch', 'delete', 'options'] as const) {
    app.openAPIRegistry.registerPath({
      method,
      path: '/proxy/{upstream}/{path}',
      tags: ['proxy'],
      summary: 'Forward to a healthy node of the upstream (local data centre first); `path` may span segments',
      request: {
        params: z.object({
          upstream: z.string().openapi({ param: { name: 'upstream', in: 'path' }, example: 'users' }),
          path: z.string().openapi({
            param: { name: 'path', in: 'path' },
            description: "The node's path and query, '.'/'..' segments refused",
          }),
        }),
      },
      responses: {
        default: { description: "The node's answer, as the node sent it" },
        400: problem('invalid-path: a dot segment, or bad percent-encoding'),
        404: problem('upstream-not-found: the configured names in `upstreams`'),
        408: problem('request-body-timeout: the request body fell silent for client_body_timeout_ms'),
        502: problem('upstream-unreachable'),
        503: problem('no-node-available or bulkhead-full; see Retry-After'),
        504: problem('upstream-timeout'),
      },
    });
  }
}

/**
 * Serve the OpenAPI 3.1 document at /openapi.json: the zod-described /circuits routes, the
 * hand-served ones, and a bearer scheme that /circuits operations require when a token is set.
 */
export function registerDocument(app: OpenAPIHono, options: DocumentOptions): void {
  registerPlainRoutes(app, options.proxy);
  app.openAPIRegistry.registerComponent('securitySchemes', 'bearer', {
    type: 'http',
    scheme: 'bearer',
    description: 'CIRCUITLOG_TOKEN. Needed by /circuits routes only when the service runs with a token.',
  });
  let text: string | undefined; // the routes are all registered by the first request
  app.get('/openapi.json', (c) => {
    text ??= `${JSON.stringify(buildDocument(app, options))}\n`;
    return c.body(text, 200, { 'content-type': 'application/json' });
  });
}

function buildDocument(app: OpenAPIHono, options: DocumentOptions): ReturnType<OpenAPIHono['getOpenAPI31Document']> {
  const doc = app.getOpenAPI31Document({
    openapi: '3.1.0',
    info: { title: 'circuitlog', version: '0.1.0', description: 'Circuit breakers as a service, and a guarded proxy.' },
    servers: SERVERS,
  });
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const [method, operation] of Object.entries(item)) {
      const id = OPERATION_IDS[`${method} ${path}`];
      if (id !== undefined && typeof operation === 'object' && operation !== null && 'responses' in operation)
        operation.operationId = id;
    }
    if (!needsToken(path)) continue;
    for (const operation of Object.values(item)) {
      if (typeof operation !== 'object' || operation === null || !('responses' in operation)) continue;
      if (operation.security !== undefined) continue; // declared by its route (/admin/backup: the token always)
      if (options.token) operation.security = [{ bearer: [] }];
      else delete operation.responses['401'];
    }
  }
  return doc;
}
