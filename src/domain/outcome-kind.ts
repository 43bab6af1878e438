/**
 * Why a call ended (issue 29, docs/api.md "Outcome kinds"): the kinds an outcome may carry and
 * the share a ramping circuit admits, the vocabulary below every other file; the rules over them
 * (how an HTTP answer is classified, what each kind counts as, the cool-down, the ramp) are
 * `outcome-rules.ts`. The Python client mirrors both (`_domain.py`), proved by the same vectors.
 */

/** The kinds an outcome may carry; `success: true|false` alone means `success` / `failure`. */
export const OUTCOME_KINDS = ['success', 'failure', 'rejected', 'throttled', 'caller_deadline', 'cancelled'] as const;
export type OutcomeKind = (typeof OUTCOME_KINDS)[number];

const KIND_SET: ReadonlySet<string> = new Set(OUTCOME_KINDS);

export function isOutcomeKind(v: unknown): v is OutcomeKind {
  return typeof v === 'string' && KIND_SET.has(v);
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
