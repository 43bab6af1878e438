/**
 * Why a call ended (issue 29, docs/api.md "Outcome kinds"): the kinds an outcome may carry,
 * how an HTTP answer is classified into one, a dependency's `Retry-After` read, and the share
 * a ramping circuit admits. Pure and shared: the server, the proxy and the Node client import
 * it; the Python client mirrors it (`_domain.py`), proved by the same vectors.
 */

/** The kinds an outcome may carry; `success: true|false` alone means `success` / `failure`. */
export const OUTCOME_KINDS = ['success', 'failure', 'rejected', 'throttled', 'caller_deadline', 'cancelled'] as const;
export type OutcomeKind = (typeof OUTCOME_KINDS)[number];

const KIND_SET: ReadonlySet<string> = new Set(OUTCOME_KINDS);

export function isOutcomeKind(v: unknown): v is OutcomeKind {
  return typeof v === 'string' && KIND_SET.has(v);
}

/** An HTTP answer's kind and, when throttled, the seconds it asked for (null: it named none). */
export interface Classified {
  readonly kind: OutcomeKind;
  readonly retryAfterSeconds?: number | null;
}

/**
 * The kind of a dependency's HTTP answer (issue 29's table, as the proxy and the clients use it):
 * 429, and 503 with a `Retry-After`, are `throttled` with the seconds asked; other 5xx except
 * 501 and 505 are `failure` (those two say the request cannot be served, not that the
 * dependency is unwell: `rejected`); 408 is a `failure` (the dependency gave up waiting);
 * other 4xx are `rejected`; everything else is `success`.
 */
export function kindOfStatus(status: number, retryAfter: string | null | undefined, now: number): Classified {
  if (status === 429 || (status === 503 && retryAfter != null && retryAfter !== '')) {
    return { kind: 'throttled', retryAfterSeconds: retryAfterSeconds(retryAfter, now) };
  }
  if (status === 501 || status === 505) return { kind: 'rejected' };
  if (status >= 500 || status === 408) return { kind: 'failure' };
  if (status >= 400) return { kind: 'rejected' };
  return { kind: 'success' };
}

const DELAY_SECONDS = /^\d{1,10}$/;

/**
 * A `Retry-After` value in seconds from now (RFC 9110 section 10.2.3: delay-seconds or an
 * HTTP-date), rounded up, never below 0; null when absent or not one of the two forms.
 */
export function retryAfterSeconds(value: string | null | undefined, now: number): number | null {
  if (value == null) return null;
  const v = value.trim();
  if (DELAY_SECONDS.test(v)) return Number(v);
  // An HTTP-date (IMF-fixdate, or the two obsolete forms Date.parse also reads); a bare number
  // or any other text Date.parse might guess at is not one.
  if (!/^[A-Za-z]{3,9}, /.test(v)) return null;
  const at = Date.parse(v);
  if (!Number.isFinite(at)) return null;
  return Math.max(0, Math.ceil((at - now) / 1000));
}

/**
 * The percent of calls a ramping circuit admits at `now` (issue 29, "a slow start the whole
 * fleet shares"): linear from `startPercent` when the ramp began to 100 at `rampUntil`, a pure
 * function of the persisted end of the ramp, the policy's seconds and start, and now, so every
 * worker, host and client computes the same share. 100 when not ramping (`rampUntil` null or past).
 */
export function rampPercent(rampUntil: number | null, seconds: number, startPercent: number, now: number): number {
  if (rampUntil === null || now >= rampUntil || seconds <= 0) return 100;
  const began = rampUntil - seconds * 1000;
  if (now <= began) return startPercent;
  return startPercent + ((100 - startPercent) * (now - began)) / (seconds * 1000);
}

/**
 * Whether one call is admitted while ramping: a draw `random` in [0, 1) (injected, so tests
 * decide) under the share. Every decider draws on its own, so the fleet's admitted share follows
 * the line without any coordination.
 */
export function rampAdmits(percent: number, random: number): boolean {
  return percent >= 100 || random * 100 < percent;
}
