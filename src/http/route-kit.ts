import { z, type OpenAPIHono, type RouteConfig } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { AppError } from '../domain/errors.js';
import { OpenProblemSchema, ProblemSchema, TooManyCircuitsSchema } from './schemas.js';

// What the /circuits and /outcomes routes share: OpenAPI response pieces, the way a route is
// served, and the not-found error.

export const retryAfter = {
  'Retry-After': { description: 'Whole seconds to wait, at least 1', schema: { type: 'integer' as const, minimum: 1 } },
};
export const problem = (description: string, schema: z.ZodTypeAny = ProblemSchema, headers?: typeof retryAfter) => ({
  description,
  content: { 'application/problem+json': { schema } },
  ...(headers && { headers }),
});
export const ok = (description: string, schema: z.ZodTypeAny) => ({
  description,
  content: { 'application/json': { schema } },
});
export const jsonBody = <T extends z.ZodTypeAny>(schema: T, required: boolean) => ({
  required,
  content: { 'application/json': { schema } },
});

export const common = {
  400: problem('Invalid circuit name, JSON or query'),
  401: problem('Missing or wrong bearer token (when CIRCUITLOG_TOKEN is set)'),
  405: problem('Another method than the ones this path answers; Allow lists them'),
  503: problem(
    'storage-busy (the database stayed locked past the busy timeout), or on a write storage-full or storage-unavailable',
    ProblemSchema,
    retryAfter,
  ),
};
/** A body is optional and ignored, but if sent it must be JSON (415) and within the limit (413). */
const anyBody = {
  ...common,
  413: problem('Body over the size limit'),
  415: problem('A body that is not application/json'),
};
const tooManyCircuits = {
  507: problem(
    'A new circuit name past limits.max_circuits (too-many-circuits); nothing was written. refused_circuits names the new circuits that do not fit: the request without their items may be sent again at once',
    TooManyCircuitsSchema,
  ),
};
export const withBody = { ...anyBody, 422: problem('Body fields failed validation'), ...tooManyCircuits };
export const open503 = problem(
  'circuit-open: the circuit is open, or half-open with every probe slot taken; circuit-forced-open: forced open by an operator; or a storage problem (storage-busy, storage-unavailable, ...)',
  z.union([OpenProblemSchema, ProblemSchema]),
  retryAfter,
);

type Handler = (c: Context) => Response | Promise<Response>;

/** A 200 answer with an already-serialised JSON body (ending in a newline, as every JSON answer). */
export function jsonText(c: Context, text: string): Response {
  return c.body(text, 200, { 'content-type': 'application/json' });
}

/**
 * Document `route` in the OpenAPI registry and serve it with a plain Hono handler. The
 * handler validates with the same zod schemas, synchronously: zod-openapi's async
 * validator chain costs more than the breaker step itself on the hot routes.
 */
export function serveRoute(app: OpenAPIHono, route: RouteConfig, handler: Handler): void {
  app.openAPIRegistry.registerPath(route);
  app.on(route.method.toUpperCase(), route.path.replace(/\{(\w+)\}/g, ':$1'), handler);
}

export function circuitNotFound(name: string): AppError {
  return new AppError('CIRCUIT_NOT_FOUND', `No circuit named '${name}'.`);
}
