/**
 * Caller id rules, shared by the server (a 422 naming the field) and the client library
 * (which checks its own `caller` option once, at construction). See docs/api.md "Callers".
 */

/** Longest caller id, in characters. */
export const CALLER_MAX_LENGTH = 128;

/**
 * Letters, digits, _ . : ~ - and '/' (a client's default is the host name), 1-128 of them.
 * An ECMA-262 pattern, as JSON Schema's `pattern` (the OpenAPI document gives it verbatim).
 */
export const CALLER_PATTERN = `^[A-Za-z0-9_.:~\\-/]{1,${CALLER_MAX_LENGTH}}$`;
const CALLER = new RegExp(CALLER_PATTERN);

/** `null` when valid, else why not (one regex test on the hot path). */
export function callerProblem(caller: string): string | null {
  if (CALLER.test(caller)) return null;
  if (caller.length === 0) return 'must not be empty';
  if (caller.length > CALLER_MAX_LENGTH) return `must be at most ${CALLER_MAX_LENGTH} characters`;
  return "may hold only letters, digits, _ . : ~ - and '/'";
}
