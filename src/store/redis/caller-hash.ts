import type { CallerEntry } from '../../domain/caller-state.js';
import type { Circuit } from '../../domain/circuit.js';
import type { CallerCounts } from '../../domain/types.js';
import { planCallerWrites } from '../caller-writes.js';
import type { Versioned } from './redis-cache.js';
import type { Malformed } from './stored-circuit.js';

/**
 * A circuit's caller table on Redis (issue 27 item 9): not inside the circuit's JSON but in a hash
 * of its own in the circuit's shard, `{<tag>}:k:<name>`, one field per caller whose value is
 * `<order>:<the entry's other members as a JSON array>` (6, or 7 with the voter, issue 30); `order` comes from the circuit hash's
 * field `o` and gives the table's recency order back (ascending: least recently seen first). A
 * write sends, stores and publishes only what changed: a delta (`callerDelta`), which CAS_SCRIPT
 * applies to the hash and every host applies to the table it holds at the version read.
 */

const NONE: readonly CallerEntry[] = Object.freeze([]);

/**
 * The change of a caller table as CAS_SCRIPT and the `changes` message carry it, JSON:
 * `[replace, [caller gone, ...], [[caller, members], ...changed in place], [[caller, members], ...appended]]`,
 * `members` the JSON text of the entry without its caller (a string: Lua keeps it as is, never
 * re-encodes its numbers). `replace` 1: the hash is emptied first (a new, corrupt or legacy
 * circuit: the table is written whole). `''`: nothing changed.
 */
export function callerDelta(
  before: readonly CallerEntry[] | undefined,
  after: readonly CallerEntry[] | undefined,
  replace: boolean,
): string {
  if (replace) {
    if (after === undefined || after.length === 0) return '[1,[],[],[]]';
    return JSON.stringify([1, [], [], after.map(encodeEntry)]);
  }
  if (before === after) return '';
  const { deleted, changed, appended } = planCallerWrites(before ?? NONE, after ?? NONE);
  if (deleted.length === 0 && changed.length === 0 && appended.length === 0) return '';
  return JSON.stringify([0, deleted, changed.map(encodeEntry), appended.map(encodeEntry)]);
}

/** `[caller, members]`: the voter (issue 30) is a 7th member only when the entry has one (older hosts read 6). */
function encodeEntry(e: CallerEntry): [string, string] {
  const members = [e[1], e[2], e[3], e[4], e[5], e[6]];
  return [e[0], JSON.stringify(e[7] === undefined ? members : [...members, e[7]])];
}

/** The circuit with `entries` as its table (none: no `callers` member, as a read of an empty hash gives). */
export function withCallers(c: Circuit, entries: readonly CallerEntry[] | undefined): Circuit {
  if (entries === undefined || entries.length === 0) {
    if (c.callers === undefined) return c;
    const { callers: _callers, ...rest } = c;
    return rest;
  }
  return { ...c, callers: entries };
}

const isTimeOrNull = (v: unknown) => v === null || (typeof v === 'number' && Number.isFinite(v));
const isCount = (v: unknown) => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/** An entry's members after the caller, checked (Redis' answers are untrusted), or null. */
function decodeMembers(caller: unknown, text: unknown): CallerEntry | null {
  if (typeof caller !== 'string' || caller === '' || typeof text !== 'string') return null;
  let m: unknown;
  try {
    m = JSON.parse(text);
  } catch {
    return null;
  }
  if (!Array.isArray(m) || (m.length !== 6 && m.length !== 7)) return null;
  const [failures, failedAt, slowAt, isolatedUntil, isolatedSeconds, probeUntil, voter] = m as unknown[];
  if (!isCount(failures) || !isTimeOrNull(failedAt) || !isTimeOrNull(slowAt) || !isTimeOrNull(isolatedUntil))
    return null;
  if (typeof isolatedSeconds !== 'number' || !(isolatedSeconds >= 0) || !isTimeOrNull(probeUntil)) return null;
  const entry = [caller, failures, failedAt, slowAt, isolatedUntil, isolatedSeconds, probeUntil] as CallerCounts;
  if (m.length === 6) return entry;
  return typeof voter === 'string' && voter !== '' ? [...entry, voter] : null;
}

/**
 * The table a `k:<name>` hash holds (`HGETALL`'s flat answer), in recency order. A field that is
 * not `<order>:<members>` is left out and named in `problem` (the caller logs it once).
 */
export function parseCallerHash(flat: readonly unknown[]): { entries: CallerEntry[]; problem: string | null } {
  const ordered: [number, CallerEntry][] = [];
  let problem: string | null = null;
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const value = flat[i + 1];
    const colon = typeof value === 'string' ? value.indexOf(':') : -1;
    const order = colon > 0 ? Number((value as string).slice(0, colon)) : Number.NaN;
    const entry = Number.isInteger(order) ? decodeMembers(flat[i], (value as string).slice(colon + 1)) : null;
    if (entry === null) problem ??= `the caller entry ${JSON.stringify(String(flat[i]).slice(0, 100))} is malformed`;
    else ordered.push([order, entry]);
  }
  ordered.sort((a, b) => a[0] - b[0]);
  return { entries: ordered.map(([, e]) => e), problem };
}

/**
 * The table after a published delta, from the table it was made from (`before`: the state at the
 * version the writer read), or null when the delta is malformed.
 */
export function applyCallerDelta(before: readonly CallerEntry[], delta: string): readonly CallerEntry[] | null {
  if (delta === '') return before;
  let raw: unknown;
  try {
    raw = JSON.parse(delta);
  } catch {
    return null;
  }
  if (!Array.isArray(raw) || raw.length !== 4) return null;
  const [replace, deleted, changed, appended] = raw as unknown[];
  if (!Array.isArray(deleted) || !Array.isArray(changed) || !Array.isArray(appended)) return null;
  const decode = (list: unknown[]) => {
    const out: CallerEntry[] = [];
    for (const pair of list) {
      const e = Array.isArray(pair) ? decodeMembers(pair[0], pair[1]) : null;
      if (e === null) return null;
      out.push(e);
    }
    return out;
  };
  const changes = decode(changed);
  const added = decode(appended);
  if (changes === null || added === null) return null;
  if (replace === 1) return added;
  const gone = new Set<unknown>(deleted);
  for (const e of added) gone.add(e[0]); // a caller seen again moves to the end
  const inPlace = new Map(changes.map((e) => [e[0], e]));
  const out: CallerEntry[] = [];
  for (const e of before) if (!gone.has(e[0])) out.push(inPlace.get(e[0]) ?? e);
  out.push(...added);
  return out;
}

/**
 * A versioned read of a circuit (`HMGET v id c` of `c:<name>`) with its caller table (`HGETALL` of
 * `k:<name>`). A `c` that still holds `callers` was last written before the hash (or by a host of
 * a build before it, which never writes the hash): its table is the truth, read as it is and
 * marked so the next write moves it into the hash (replacing what the hash held) and out of `c`.
 */
export function versionedWithCallers(
  malformed: Malformed,
  keys: { circuit: string; callers: string },
  name: string,
  fields: (string | null)[],
  flat: readonly unknown[],
): Versioned {
  const value = malformed.versioned(keys.circuit, name, fields);
  if (value.circuit === null) return value;
  if (value.circuit.callers !== undefined)
    return { version: value.version, circuit: value.circuit, rewriteCallers: true };
  const { entries, problem } = parseCallerHash(Array.isArray(flat) ? flat : []);
  if (entries.length === 0 && problem === null) return value;
  const circuit = withCallers(value.circuit, entries);
  if (problem === null) return { version: value.version, circuit };
  malformed.report(keys.callers, problem);
  return { version: value.version, circuit, rewriteCallers: true };
}
