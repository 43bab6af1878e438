import type { IncomingMessage } from 'node:http';
import { z, type OpenAPIHono, type RouteConfig } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { circuitNameProblem } from '../config.js';
import { AppError, type FieldError } from '../domain/errors.js';
import { OpenProblemSchema, ProblemSchema, TooManyCircuitsSchema } from './schemas.js';
import type { IdentityEnv } from '../auth/request-identity.js';
import type { BreakerService } from '../service/breaker-service.js';
import { checkQuota } from './route-auth.js';

// What the /circuits and /outcomes routes share: OpenAPI response pieces, the way a route is
// served and answers, the not-found error; then reading a request (its name parameter, query
// and JSON body).

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

// Reading a request.

type Issue = {
  readonly code?: string;
  readonly path: readonly PropertyKey[];
  readonly message: string;
  readonly keys?: readonly string[];
};

/**
 * Zod issues as `{field, message}` pairs; the root is named `(body)`. An unknown key is named
 * itself (`sucess`, `outcomes.3.duraton_ms`), one error per key: zod reports them together.
 */
export function fieldErrors(issues: readonly Issue[], unknownKeyMessage = 'is not a known field'): FieldError[] {
  return issues.flatMap((issue): FieldError[] => {
    const at = issue.path.map(String);
    if (issue.code === 'unrecognized_keys' && issue.keys !== undefined) {
      return issue.keys.map((key) => ({ field: [...at, key].join('.'), message: unknownKeyMessage }));
    }
    return [{ field: at.join('.') || '(body)', message: issue.message }];
  });
}

/** The decoded `:name` path parameter, or a 400 INVALID_NAME. */
export function circuitNameParam(c: Context): string {
  const raw = c.req.param('name') ?? '';
  const reason = circuitNameProblem(raw);
  if (reason !== null)
    throw new AppError('INVALID_NAME', `Circuit name ${reason}.`, { extensions: { name: raw.slice(0, 300) } });
  return raw;
}

/** The query string validated by `schema`, or a 400 INVALID_QUERY naming each field. */
export function parseQuery<S extends z.ZodTypeAny>(c: Context, schema: S): z.output<S> {
  const result = schema.safeParse(c.req.query());
  if (!result.success) {
    throw new AppError('INVALID_QUERY', 'The query string has invalid parameters.', {
      fields: fieldErrors(result.error.issues),
    });
  }
  return result.data;
}

const JSON_TYPE = /^application\/([\w.+-]+\+)?json\s*(;|$)/i;

/**
 * The JSON body validated by `schema`. No body counts as `{}`. A body must be
 * `application/json` (415), at most `limitBytes` (413), valid JSON (400) and match the
 * schema (422, naming each field).
 */
export async function readJson<S extends z.ZodTypeAny>(
  c: Context,
  schema: S,
  limitBytes: number,
): Promise<z.output<S>> {
  const length = c.req.header('content-length');
  const incoming = nodeRequest(c);
  const hasBody =
    incoming === undefined
      ? c.req.raw.body !== null // app.request() in tests: a web Request
      : (length !== undefined && length !== '0') || c.req.header('transfer-encoding') !== undefined;
  if (!hasBody) return bodyOf(null, undefined, schema);
  checkJsonType(c.req.header('content-type'));
  if (length !== undefined && Number(length) > limitBytes) throw tooLarge(limitBytes);
  return bodyOf(await readBody(c, incoming, limitBytes), c.req.header('content-type'), schema);
}

function checkJsonType(type: string | undefined): void {
  if (!JSON_TYPE.test(type ?? ''))
    throw new AppError('UNSUPPORTED_MEDIA_TYPE', 'Send the body as JSON with Content-Type: application/json.');
}

/**
 * A body's text as the routes take it (also the edge agent's, which reads its own bodies): no
 * body (null) counts as `{}`; else `application/json` (415), valid JSON (400) and matching
 * `schema` (422, naming each field).
 */
export function bodyOf<S extends z.ZodTypeAny>(
  text: string | null,
  contentType: string | undefined,
  schema: S,
): z.output<S> {
  let value: unknown = {};
  if (text !== null) {
    checkJsonType(contentType);
    try {
      value = JSON.parse(text);
    } catch {
      throw new AppError('INVALID_JSON', 'The request body is not valid JSON.');
    }
  }
  const result = schema.safeParse(value);
  if (!result.success) {
    throw new AppError('VALIDATION_FAILED', 'The request body has invalid fields.', {
      fields: fieldErrors(result.error.issues),
    });
  }
  return result.data;
}

/** The Node request under @hono/node-server; undefined under `app.request()`. */
function nodeRequest(c: Context): IncomingMessage | undefined {
  return (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
}

/** The caller closed the connection before its body arrived: nobody is left to answer. */
export class ClientClosedError extends Error {
  constructor(cause?: unknown) {
    super('The caller closed the connection before sending the whole body.', { cause });
    this.name = 'ClientClosedError';
  }
}

function tooLarge(limitBytes: number): AppError {
  return new AppError('PAYLOAD_TOO_LARGE', `Request bodies are limited to ${limitBytes} bytes.`);
}

/**
 * Read the body as text, stopping past the limit. Under @hono/node-server this reads the
 * Node request directly: building a web Request and stream per call costs more than the
 * whole breaker step on the hot path.
 */
async function readBody(c: Context, incoming: IncomingMessage | undefined, limitBytes: number): Promise<string> {
  if (incoming === undefined || incoming.readableEnded) {
    const text = await c.req.text();
    if (Buffer.byteLength(text) > limitBytes) throw tooLarge(limitBytes);
    return text;
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limitBytes) {
        cleanup();
        reject(tooLarge(limitBytes));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8'));
    };
    // A reset mid-body surfaces as 'error' (ECONNRESET, "aborted") or as 'close' before 'end'.
    const onError = (error: Error) => {
      cleanup();
      reject(new ClientClosedError(error));
    };
    const onClose = () => {
      cleanup();
      reject(new ClientClosedError());
    };
    const cleanup = () => {
      incoming.off('data', onData);
      incoming.off('end', onEnd);
      incoming.off('error', onError);
      incoming.off('close', onClose);
    };
    incoming.on('data', onData);
    incoming.on('end', onEnd);
    incoming.on('error', onError);
    incoming.on('close', onClose);
  });
}

/**
 * Whether the request's `Prefer` header (RFC 7240) asks for `return=minimal`: the caller wants
 * no representation back. Preference names are case-insensitive; a value may be quoted; any
 * other preference in the list is ignored. Only the first `return` preference counts: "if any
 * preference is specified more than once, only the first instance is to be considered"
 * (RFC 7240 section 2), so `return=representation, return=minimal` asks for a body.
 */
export function prefersMinimal(c: Context): boolean {
  const header = c.req.header('prefer');
  if (header === undefined) return false;
  for (const preference of header.split(',')) {
    const [name, value = ''] = (preference.split(';')[0] ?? '').split('=');
    if (name?.trim().toLowerCase() !== 'return') continue;
    return (
      value
        .trim()
        .replace(/^"(.*)"$/, '$1')
        .toLowerCase() === 'minimal'
    );
  }
  return false;
}

/**
 * `max_new_circuits` before a write that may create `names` (http/route-auth.ts `checkQuota`):
 * undefined (no promise, no microtask, no call elsewhere) for a request without a bound, as
 * every request is without credentials; the identity is read off the env here for that reason.
 */
export function newCircuitQuota(
  c: Context,
  breaker: BreakerService,
  names: readonly string[],
): Promise<void> | undefined {
  const identity = (c.env as IdentityEnv | undefined)?.identity;
  if (identity === undefined || identity.maxNewCircuits === null) return undefined;
  return checkQuota(identity, identity.maxNewCircuits, breaker, names);
}
