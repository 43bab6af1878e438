/**
 * An outcome's kind on the wire (issue 29, docs/api.md "Outcome kinds"): `kind`,
 * `retry_after_seconds` and `deadline_ms` beside `success`, on `POST /circuits/{name}/outcomes`,
 * each item of `POST /outcomes` and `POST /circuits/{name}/call`. One of `success`/`kind` is
 * required; given both, they must agree; each extra field only with its kind. Every error names
 * its field (`kind`, `outcomes.3.kind`).
 */
import { z } from '@hono/zod-openapi';
import { OUTCOME_KINDS, type OutcomeKind } from '../domain/outcome-kind.js';
import type { Outcome } from '../domain/types.js';

/** The largest whole number the two fields take (larger `retry_after_seconds` are capped by the policy anyway). */
const MAX_INT = 2_147_483_647;

/** The members, spread into each outcome body. */
export const kindFields = {
  kind: z.enum(OUTCOME_KINDS).optional().openapi({
    description:
      'Why the call ended: success, failure, rejected (the caller was at fault: 4xx), throttled (429, or 503 with Retry-After), caller_deadline (the caller gave up under its own deadline), cancelled (the caller went away). Counted by the policy (count_as; docs/api.md "Outcome kinds"). Given with success, they must agree (true: success, false: failure).',
  }),
  retry_after_seconds: z.number().int().min(0).max(MAX_INT).optional().openapi({
    description:
      "kind throttled only: the seconds the dependency asked for (its Retry-After). Capped at the policy's max_retry_after_seconds; absent: the circuit's timeout_seconds.",
  }),
  deadline_ms: z.number().int().min(1).max(MAX_INT).optional().openapi({
    description:
      "kind caller_deadline only: the caller's deadline, in ms. At least the policy's min_deadline_ms, the call counts as a failure.",
  }),
};

const onlyWith = (field: string, kind: string) => ({
  if: { required: [field] },
  // biome-ignore lint/suspicious/noThenProperty: JSON Schema's if/then keyword, not a thenable
  then: { required: ['kind'], properties: { kind: { const: kind } } },
});

/**
 * The rules across the members in JSON Schema terms (2020-12, the document's dialect), for the
 * document: `checkKindMembers` is what the server runs. `successRequired`: one of `success`
 * and `kind` must be given (not on `/call`, where `success` defaults to true).
 */
export function kindRulesDoc(successRequired = true) {
  return {
    allOf: [
      ...(successRequired ? [{ anyOf: [{ required: ['success'] }, { required: ['kind'] }] }] : []),
      {
        if: { required: ['success', 'kind'] },
        // biome-ignore lint/suspicious/noThenProperty: JSON Schema's if/then keyword, not a thenable
        then: {
          anyOf: [
            { properties: { success: { const: true }, kind: { const: 'success' } } },
            { properties: { success: { const: false }, kind: { const: 'failure' } } },
          ],
        },
      },
      onlyWith('retry_after_seconds', 'throttled'),
      onlyWith('deadline_ms', 'caller_deadline'),
    ],
  };
}

interface KindMembers {
  readonly success?: boolean;
  readonly kind?: OutcomeKind;
  readonly retry_after_seconds?: number;
  readonly deadline_ms?: number;
}

/** The rules across the members, each broken one an issue at its field (`path` before it: `['outcomes', 3]`). */
export function checkKindMembers(
  o: KindMembers,
  ctx: z.RefinementCtx,
  path: readonly (string | number)[] = [],
  successRequired = true,
): void {
  const at = (field: string, message: string) => ctx.addIssue({ code: 'custom', path: [...path, field], message });
  if (successRequired && o.success === undefined && o.kind === undefined)
    at('success', 'is required unless kind is given');
  if (o.success !== undefined && o.kind !== undefined && o.kind !== (o.success ? 'success' : 'failure'))
    at('kind', `must be ${o.success ? 'success' : 'failure'} with success ${o.success} (or leave success out)`);
  if (o.retry_after_seconds !== undefined && o.kind !== 'throttled')
    at('retry_after_seconds', 'is only for kind throttled');
  if (o.deadline_ms !== undefined && o.kind !== 'caller_deadline')
    at('deadline_ms', 'is only for kind caller_deadline');
}

/**
 * The domain's members of a checked outcome: `success` (a kind other than failure is true:
 * the service only uses it to skip a commit that changes nothing) and the kind's own.
 */
export function kindOutcome(
  o: KindMembers,
  defaultSuccess?: boolean,
): Pick<Outcome, 'success' | 'kind' | 'retryAfterSeconds' | 'deadlineMs'> {
  if (o.kind === undefined) return { success: o.success ?? defaultSuccess ?? true };
  return {
    success: o.kind !== 'failure',
    kind: o.kind,
    ...(o.retry_after_seconds === undefined ? {} : { retryAfterSeconds: o.retry_after_seconds }),
    ...(o.deadline_ms === undefined ? {} : { deadlineMs: o.deadline_ms }),
  };
}
