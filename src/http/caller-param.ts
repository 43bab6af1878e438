/**
 * The `caller` of an outcome or an admission (issue 17): `?caller=` on `GET /allowed` and
 * `POST /call`, a `caller` member on outcome bodies. One rule, from domain/caller.ts.
 */
import { z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { CALLER_MAX_LENGTH, CALLER_PATTERN, callerProblem } from '../domain/caller.js';
import { AppError } from '../domain/errors.js';
import { callerPermitted, type Identity } from '../auth/identity.js';

const DESCRIPTION =
  "Who made the call: 1-128 letters, digits, _ . : ~ - and '/' (the client libraries send the host name by default, `<id>/<hostname>/<pid>` with a credential). With a quorum policy it counts toward the quorum and toward the caller's own isolation; absent: anonymous (counted by the rules, never toward a quorum), or with a named credential its id. With credentials on it must be the credential's id or match its callers patterns (else 403 caller-not-permitted).";

/** The caller rule in JSON Schema terms, for the document. */
const CALLER_RULE = { minLength: 1, maxLength: CALLER_MAX_LENGTH, pattern: CALLER_PATTERN } as const;

/** The `caller` body member. */
export const callerField = z
  .string()
  .superRefine((caller, ctx) => {
    const problem = callerProblem(caller);
    if (problem !== null) ctx.addIssue({ code: 'custom', message: `caller ${problem}` });
  })
  .optional()
  .openapi({ ...CALLER_RULE, description: DESCRIPTION, example: 'web-7/4242' });

/** The `caller` query parameter, for the OpenAPI document (the handlers read it with `callerQuery`). */
export const CallerQuery = z.object({
  caller: z
    .string()
    .optional()
    .openapi({
      ...CALLER_RULE,
      param: { name: 'caller', in: 'query' },
      description: DESCRIPTION,
      example: 'web-7/4242',
    }),
});

/** `?caller=`, checked; undefined when absent. A bad one is a 400 naming the parameter. */
export function callerQuery(c: Context): string | undefined {
  if (!c.req.url.includes('?')) return undefined; // the hot path without a query string parses nothing
  const caller = c.req.query('caller');
  if (caller === undefined) return undefined;
  const problem = callerProblem(caller);
  if (problem !== null)
    throw new AppError('INVALID_QUERY', 'The query string has invalid parameters.', {
      fields: [{ field: 'caller', message: `caller ${problem}` }],
    });
  return caller;
}

/** Who an outcome or admission counts as (issue 30): its caller and the credential that votes for it. */
export interface Reporter {
  readonly caller?: string;
  readonly voter?: string;
}

const NOBODY: Reporter = Object.freeze({});

/**
 * The caller a request reports as, and its voter. A credential with `callers` patterns (a named
 * credential or a JWT) may report only as its id or a name under its patterns (else `403`
 * CALLER_NOT_PERMITTED, before anything is recorded), and votes as its id; without a caller it
 * reports as its id (when that is a valid caller id). ANONYMOUS and CIRCUITLOG_TOKEN (`callers`
 * null) keep the rules before credentials: the caller as given, no voter.
 */
export function reporterOf(identity: Identity, given: string | undefined): Reporter {
  if (identity.callers === null) return given === undefined ? NOBODY : { caller: given };
  if (given === undefined)
    return callerProblem(identity.id) === null ? { caller: identity.id, voter: identity.id } : NOBODY;
  if (!callerPermitted(identity, given)) throw callerNotPermitted(identity, given);
  return { caller: given, voter: identity.id };
}

/** The `?caller=` of an admission, checked against the credential (no default: absent stays anonymous). */
export function admissionCaller(identity: Identity, given: string | undefined): string | undefined {
  if (given !== undefined && !callerPermitted(identity, given)) throw callerNotPermitted(identity, given);
  return given;
}

function callerNotPermitted(identity: Identity, caller: string): AppError {
  return new AppError(
    'CALLER_NOT_PERMITTED',
    `The credential ${JSON.stringify(identity.id)} may report only as callers matching ${(identity.callers ?? []).join(', ')}; not ${JSON.stringify(caller)}.`,
    { extensions: { caller, credential: identity.id } },
  );
}
