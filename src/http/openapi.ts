import { z, type OpenAPIHono } from '@hono/zod-openapi';
import { needsToken } from '../auth/bearer.js';
import { OPERATION_IDS, SERVERS } from './operation-ids.js';
import { PROBLEMS } from '../domain/problem-codes.js';
import { ProblemSchema } from './schemas.js';

export interface DocumentOptions {
  /** CIRCUITLOG_TOKEN is set: /circuits operations need the bearer scheme. */
  readonly token: boolean;
  /** The configured upstreams, served under /proxy/{upstream}/...; null: no proxy. */
  readonly upstreams: readonly string[] | null;
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
function registerPlainRoutes(app: OpenAPIHono, upstreams: readonly string[] | null): void {
  registerHealthRoute(app);
  registerProblemRoute(app);
  if (upstreams !== null && upstreams.length > 0) registerProxyRoutes(app, upstreams as [string, ...string[]]);
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
      params: z.object({
        kind: z
          .enum(kinds as [string, ...string[]])
          .openapi({ param: { name: 'kind', in: 'path' }, example: kinds[0] }),
      }),
    },
    responses: {
      200: { description: 'The problem type', content: { 'application/json': { schema: ProblemTypeSchema } } },
      404: problem('No such problem type'),
      405: notAllowed,
    },
  });
}

/** No '.' or '..' segment before the query: a URL path would resolve it away (RFC 3986 section 5.2.4). */
const NO_DOT_SEGMENT = '^(?!(?:[^?]*/)?\\.\\.?(?:[/?]|$))';

/** Whatever a node answered passes through: any status, any media type. */
const NODE_ANSWER = { '*/*': { schema: {} } };
/** A status the proxy answers itself with a problem, and a node may answer too. */
const proxyProblem = (description: string) => ({
  description: `${description}; or the node's own answer with this status, passed through`,
  content: { 'application/problem+json': { schema: ProblemSchema }, ...NODE_ANSWER },
});

/** `/proxy/{upstream}/{path}` under every method, for the document only; `upstream` lists the configured names. */
function registerProxyRoutes(app: OpenAPIHono, upstreams: [string, ...string[]]): void {
  for (const method of ['get', 'head', 'post', 'put', 'patch', 'delete', 'options'] as const) {
    app.openAPIRegistry.registerPath({
      method,
      path: '/proxy/{upstream}/{path}',
      tags: ['proxy'],
      summary: 'Forward to a healthy node of the upstream (local data centre first); `path` may span segments',
      request: {
        params: z.object({
          upstream: z
            .enum(upstreams)
            .openapi({ param: { name: 'upstream', in: 'path' }, description: 'A configured upstream' }),
          path: z.string().openapi({
            param: { name: 'path', in: 'path' },
            description: "The node's path and query; its '/' sent as is; a '.' or '..' segment is refused (400)",
            pattern: NO_DOT_SEGMENT,
          }),
        }),
      },
      responses: {
        default: { description: "The node's answer, as the node sent it (any status)", content: NODE_ANSWER },
        400: proxyProblem('invalid-path: a dot segment, or bad percent-encoding'),
        404: proxyProblem('upstream-not-found: the configured names in `upstreams`'),
        408: proxyProblem('request-body-timeout: the request body fell silent for client_body_timeout_ms'),
        502: proxyProblem('upstream-unreachable'),
        503: proxyProblem('no-node-available or bulkhead-full; see Retry-After'),
        504: proxyProblem('upstream-timeout'),
      },
    });
  }
}

/**
 * Serve the OpenAPI 3.1 document at /openapi.json: the zod-described /circuits routes, the
 * hand-served ones, and a bearer scheme that /circuits operations require when a token is set.
 */
export function registerDocument(app: OpenAPIHono, options: DocumentOptions): void {
  registerPlainRoutes(app, options.upstreams);
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
