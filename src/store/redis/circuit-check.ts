/**
 * A fast check of a stored circuit (`c` of a `c:{name}` hash, or the JSON of a `changes`
 * message) that accepts only what the zod schema in `stored-circuit.ts` accepts, and answers
 * what it would: the parsed object with the two defaulted fields filled in. Anything it is not
 * sure of answers null and goes to the schema, which then accepts it or says why not, so the
 * results (and the messages about malformed data) are the schema's; only the common case,
 * a circuit as the domain writes it, skips the schema's copying of every nested object.
 * Every host checks every other host's change message, so this runs once per write per host.
 * `test/store/circuit-check.test.ts` holds it to the schema.
 */

type Raw = Record<string, unknown>;

const isObject = (v: unknown): v is Raw => typeof v === 'object' && v !== null && !Array.isArray(v);
const isTime = (v: unknown): boolean => typeof v === 'number' && Number.isFinite(v);
const isSeconds = (v: unknown): boolean => isTime(v) && (v as number) >= 0;
const isCount = (v: unknown): boolean => Number.isSafeInteger(v) && (v as number) >= 0;
const isPositive = (v: unknown): boolean => Number.isSafeInteger(v) && (v as number) > 0;
const isAtLeastTwo = (v: unknown): boolean => Number.isSafeInteger(v) && (v as number) >= 2;
const isTimeOrNull = (v: unknown): boolean => v === null || isTime(v);
const isState = (v: unknown): boolean => v === 'closed' || v === 'open' || v === 'half_open';

function isWindowState(v: unknown): boolean {
  if (v === null) return true;
  if (!isObject(v)) return false;
  if (v.type === 'count') return typeof v.outcomes === 'string' && isCount(v.failures) && isCount(v.slowCalls);
  return v.type === 'time' && Array.isArray(v.buckets);
}

function isPolicy(c: Raw): boolean {
  const { window, backoff, throttle } = c;
  return (
    isPositive(c.failureThreshold) &&
    isSeconds(c.timeoutSeconds) &&
    isPositive(c.halfOpenMaxCalls) &&
    isPositive(c.successThreshold) &&
    (window === null ||
      (isObject(window) && (window.type === 'count' || window.type === 'time') && isPositive(window.size))) &&
    (backoff === null || (isObject(backoff) && isTime(backoff.multiplier) && isSeconds(backoff.maxTimeoutSeconds))) &&
    (c.forcedState === null || c.forcedState === 'open' || c.forcedState === 'closed') &&
    (throttle === undefined ||
      throttle === null ||
      (isObject(throttle) && isTime(throttle.k) && (throttle.k as number) >= 1 && isPositive(throttle.windowSeconds)))
  );
}

/** Exactly the three keys (the schema's `quorum` is a strict shape: it would drop any other). */
function isQuorum(q: unknown): boolean {
  if (q === undefined || q === null) return true;
  if (!isObject(q) || Object.keys(q).length !== 3) return false;
  return isAtLeastTwo(q.minCallers) && isPositive(q.windowSeconds) && isAtLeastTwo(q.maxCallers);
}

function isCallers(v: unknown): boolean {
  if (v === undefined) return true;
  if (!Array.isArray(v)) return false;
  for (const e of v) {
    if (!Array.isArray(e) || e.length !== 7) return false;
    if (typeof e[0] !== 'string' || e[0].length === 0 || !isCount(e[1]) || !isSeconds(e[5])) return false;
    if (!isTimeOrNull(e[2]) || !isTimeOrNull(e[3]) || !isTimeOrNull(e[4]) || !isTimeOrNull(e[6])) return false;
  }
  return true;
}

function isRuntime(c: Raw): boolean {
  return (
    typeof c.name === 'string' &&
    c.name.length > 0 &&
    isState(c.state) &&
    isCount(c.failureCount) &&
    Array.isArray(c.probeLeases) &&
    c.probeLeases.every(isTime) &&
    isCount(c.probeSuccesses) &&
    isTimeOrNull(c.openUntil) &&
    (c.openTimeoutSeconds === null || isSeconds(c.openTimeoutSeconds)) &&
    isCount(c.reopenCount) &&
    isWindowState(c.windowState) &&
    isTimeOrNull(c.halfOpenAt) &&
    isTimeOrNull(c.lastFailureAt) &&
    (c.stateChangedAt === undefined || isTimeOrNull(c.stateChangedAt)) &&
    isTime(c.createdAt) &&
    isTime(c.updatedAt)
  );
}

function isThrottleState(v: unknown): boolean {
  return v === undefined || v === null || (isObject(v) && v.type === 'time' && Array.isArray(v.buckets));
}

/** The parsed circuit as the schema would answer it, or null: not sure (ask the schema). */
export function quickCircuit(raw: unknown): Raw | null {
  if (!isObject(raw)) return null;
  if (!isRuntime(raw) || !isPolicy(raw) || !isThrottleState(raw.throttleState)) return null;
  if (!isQuorum(raw.quorum) || !isCallers(raw.callers)) return null;
  if (raw.throttle === undefined) raw.throttle = null;
  if (raw.throttleState === undefined) raw.throttleState = null;
  return raw;
}
