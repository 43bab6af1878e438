/**
 * Circuit name rules, shared by the server (400 INVALID_NAME), the config file (upstream
 * names, node ids, data centres) and the client library (which checks a name before
 * queueing its outcomes: one bad name would reject a whole batch). See docs/api.md
 * "Circuit names".
 */

/** Longest circuit name, in characters. */
export const CIRCUIT_NAME_MAX_LENGTH = 200;

const SEGMENT_CHARS = '[A-Za-z0-9_.:~-]';

/** One segment of a circuit name: what an upstream name, a node id or a data centre may hold. */
export const CIRCUIT_NAME_SEGMENT = new RegExp(`^${SEGMENT_CHARS}+$`);
export const SEGMENT_CHARS_MESSAGE = 'letters, digits and _ . : ~ - only';
export const DOT_SEGMENT_MESSAGE = "must not be '.' or '..'";
/** Longest upstream name, node id or data centre, in characters: a node circuit's name (129) stays within the 200. */
export const SEGMENT_MAX_LENGTH = 64;

/** Whether a segment is '.' or '..', which no circuit name may hold (a URL path would resolve it away). */
export function isDotSegment(segment: string): boolean {
  return segment === '.' || segment === '..';
}

/**
 * A whole name (length apart): segments joined by single '/', none of them '.' or '..'. An
 * ECMA-262 pattern, as JSON Schema's `pattern` (the OpenAPI document gives it verbatim).
 */
export const CIRCUIT_NAME_PATTERN = `^(?!\\.\\.?(?:/|$))(?!.*/\\.\\.?(?:/|$))${SEGMENT_CHARS}+(?:/${SEGMENT_CHARS}+)*$`;
const CIRCUIT_NAME = new RegExp(CIRCUIT_NAME_PATTERN);

/** `null` when valid, else why not (one regex test on the hot path). */
export function circuitNameProblem(name: string): string | null {
  if (name.length > CIRCUIT_NAME_MAX_LENGTH) return `must be at most ${CIRCUIT_NAME_MAX_LENGTH} characters`;
  if (CIRCUIT_NAME.test(name)) return null;
  if (name.length === 0) return 'must not be empty';
  if (/(?:^|\/)\.\.?(?:\/|$)/.test(name)) return "must not have '.' or '..' segments";
  return "may hold only letters, digits and _ . : ~ -, in segments separated by single '/'";
}

/** The circuit that guards one proxy node: `<upstream>/<node id>`. */
export function nodeCircuitName(upstream: string, node: string): string {
  return `${upstream}/${node}`;
}

/**
 * The names a set of patterns (exact, or `*` as the last character: a prefix) matches, as
 * ranges of names in the store's byte order, `[from, to)`, none inside another: a pattern a
 * prefix already covers is dropped, so a count over the ranges counts each name once. What a
 * store counts with an index (`max_new_circuits`, issue 30) instead of reading every circuit.
 */
export function nameRanges(patterns: readonly string[]): [from: string, to: string][] {
  const prefixes = patterns.filter((p) => p.endsWith('*')).map((p) => p.slice(0, -1));
  const covered = (name: string, self?: string) => prefixes.some((q) => q !== self && name.startsWith(q));
  const ranges: [string, string][] = [];
  const seen = new Set<string>();
  for (const p of patterns) {
    const prefix = p.endsWith('*') ? p.slice(0, -1) : null;
    const key = prefix === null ? `=${p}` : `*${prefix}`;
    if (seen.has(key)) continue;
    seen.add(key);
    if (prefix === null) {
      if (!covered(p)) ranges.push([p, `${p}\u0000`]);
    } else if (!covered(prefix, prefix)) ranges.push([prefix, `${prefix}\u{10FFFF}`]);
  }
  return ranges;
}
