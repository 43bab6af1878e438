import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { SCOPES } from '../auth/identity.js';
import { identityOf } from '../auth/request-identity.js';
import { json } from './json.js';
import { ok, problem, serveRoute } from './route-kit.js';

const Patterns = z.array(z.string()).nullable();

const WhoamiSchema = z
  .object({
    id: z.string().openapi({
      description: "The credential's id; `token` for CIRCUITLOG_TOKEN; `anonymous` with no credentials configured.",
    }),
    kind: z.enum(['anonymous', 'token', 'credential', 'jwt']),
    scopes: z
      .array(z.enum(SCOPES as [string, ...string[]]))
      .openapi({ description: 'What it may do, in the order read, report, operate, configure, admin.' }),
    circuits: Patterns.openapi({ description: 'Circuit name patterns it may see and touch; null: every circuit.' }),
    callers: Patterns.openapi({
      description:
        'Caller name patterns it may report as (default `<id>` and `<id>/*`); null: any caller (anonymous, CIRCUITLOG_TOKEN). Clients use `<id>/<hostname>/<pid>` as their default caller.',
    }),
  })
  .openapi('Whoami');

/**
 * `GET /whoami` (issue 30): the request's identity, so a client learns its credential's id (its
 * default caller prefix) and a person what a token may do. Needs a valid credential, no scope.
 */
export function registerWhoami(app: OpenAPIHono): void {
  const route = createRoute({
    method: 'get',
    path: '/whoami',
    tags: ['service'],
    summary: "Who the request's credential is: id, kind, scopes, circuit and caller patterns (any valid credential)",
    responses: {
      200: ok('The identity', WhoamiSchema),
      401: problem('A credential is configured and this one is missing or refused'),
      405: problem('Another method than GET or HEAD'),
    },
  });
  serveRoute(app, route, (c) => {
    const identity = identityOf(c);
    return json(
      c,
      {
        id: identity.id,
        kind: identity.kind,
        scopes: SCOPES.filter((s) => identity.scopes.has(s)),
        circuits: identity.circuits === null ? null : [...identity.circuits],
        callers: identity.callers === null ? null : [...identity.callers],
      },
      200,
    );
  });
}
