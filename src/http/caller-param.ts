/**
 * The `caller` of an outcome or an admission (issue 17): `?caller=` on `GET /allowed` and
 * `POST /call`, a `caller` member on outcome bodies. One rule, from domain/caller.ts.
 */
import { z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { CALLER_MAX_LENGTH, CALLER_PATTERN, callerProblem } from '../domain/caller.js';
import { AppError } from '../domain/errors.js';

const DESCRIPTION =
  "Who made the call: 1-128 letters, digits, _ . : ~ - and '/' (the client libraries send the host name by default). With a quorum policy it counts toward the quorum and toward the caller's own isolation; absent: anonymous (counted by the rules, never toward a quorum).";

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
