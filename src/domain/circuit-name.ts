/**
 * Circuit name rules, shared by the server (400 INVALID_NAME) and the client library
 * (which checks a name before queueing its outcomes: one bad name would reject a whole batch).
 * See docs/api.md "Circuit names".
 */

/** Longest circuit name, in characters. */
export const CIRCUIT_NAME_MAX_LENGTH = 200;

// Segments of [A-Za-z0-9_.:~-] joined by single '/', none of them '.' or '..'.
const CIRCUIT_NAME = /^(?!\.\.?(?:\/|$))(?!.*\/\.\.?(?:\/|$))[A-Za-z0-9_.:~-]+(?:\/[A-Za-z0-9_.:~-]+)*$/;

/** `null` when valid, else why not (one regex test on the hot path). */
export function circuitNameProblem(name: string): string | null {
  if (name.length > CIRCUIT_NAME_MAX_LENGTH) return `must be at most ${CIRCUIT_NAME_MAX_LENGTH} characters`;
  if (CIRCUIT_NAME.test(name)) return null;
  if (name.length === 0) return 'must not be empty';
  if (/(?:^|\/)\.\.?(?:\/|$)/.test(name)) return "must not have '.' or '..' segments";
  return "may hold only letters, digits and _ . : ~ -, in segments separated by single '/'";
}

/** The circuit of one proxy node: `<upstream>/<node-id>`. */
export function nodeCircuitName(upstream: string, node: string): string {
  return `${upstream}/${node}`;
}
