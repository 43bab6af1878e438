/**
 * The auth refusals (issue 30) as AppErrors, each with the reason the
 * `circuitlog_auth_refusals_total{reason}` metric counts it under. A 401 never says which part
 * was wrong (RFC 6750 section 3: one text, `WWW-Authenticate: Bearer realm="circuitlog"`); its
 * reason lives beside the error, never in the answer. No refusal carries the token.
 */
import { AppError } from '../domain/errors.js';
import type { Scope } from './identity.js';

export type RefusalReason =
  | 'missing'
  | 'invalid'
  | 'insufficient_scope'
  | 'circuit_not_permitted'
  | 'max_new_circuits'
  | 'caller_not_permitted';

const reasons = new WeakMap<AppError, RefusalReason>();

function withReason(error: AppError, reason: RefusalReason): AppError {
  reasons.set(error, reason);
  return error;
}

/** Why an error is an auth refusal, or null when it is none. */
export function refusalReason(error: AppError): RefusalReason | null {
  return reasons.get(error) ?? null;
}

/** The 401 for a missing (no `Authorization`) or refused credential: the same text for both. */
export function unauthorizedFor(reason: 'missing' | 'invalid'): AppError {
  return withReason(
    new AppError('UNAUTHORIZED', 'This route needs Authorization: Bearer <token> with a valid token.', {
      headers: { 'www-authenticate': 'Bearer realm="circuitlog"' },
    }),
    reason,
  );
}

/** The 403 for a credential without the scope a route needs (`operate or configure` for PATCH before its body is read). */
export function insufficientScope(scope: Scope | 'operate-or-configure', method: string, route: string): AppError {
  const needed = scope === 'operate-or-configure' ? 'operate or configure' : scope;
  return withReason(
    new AppError('INSUFFICIENT_SCOPE', `${method} ${route} needs the scope '${needed}', which this credential lacks.`, {
      extensions: { scope: needed },
    }),
    'insufficient_scope',
  );
}

/** The 403 for a circuit outside the credential's `circuits` patterns. */
export function circuitNotPermitted(name: string): AppError {
  return withReason(
    new AppError(
      'CIRCUIT_NOT_PERMITTED',
      `This credential may not use the circuit '${name.slice(0, 200)}': it is outside its circuits patterns.`,
      { extensions: { circuit: name.slice(0, 200), rule: 'circuits' } },
    ),
    'circuit_not_permitted',
  );
}

/** The 403 for a circuit the credential would create past its `max_new_circuits`. */
export function newCircuitsExhausted(name: string, max: number): AppError {
  return withReason(
    new AppError(
      'CIRCUIT_NOT_PERMITTED',
      `This credential may not create the circuit '${name.slice(0, 200)}': it may create at most ${max} circuits (max_new_circuits), and that many matching its patterns exist. Nothing was written.`,
      { extensions: { circuit: name.slice(0, 200), rule: 'max_new_circuits', max_new_circuits: max } },
    ),
    'max_new_circuits',
  );
}
