/**
 * A circuit as both stores persist it, once: each persisted member with its SQLite column and
 * what a stored value must be. SQLite writes the members as the columns of `circuits`
 * (objects and arrays as JSON text; the caller table is not part of it: `caller_entries`);
 * Redis writes the circuit as one JSON object with the members' own names, and checks what it
 * reads back here (another host's write or a hand edit is outside input). A new persisted
 * field is three lines of this file (`RECORD_FIELDS`, the check `misfit`, the row reading
 * `circuitFromColumns`; a test fails for one left out) and, for SQLite, a migration adding its
 * column.
 */
import type { Circuit } from './types.js';

type Raw = Record<string, unknown>;

/** A persisted member of a circuit (the caller table is not one: `caller_entries`, `caller-state.ts`). */
export type RecordKey = Exclude<keyof Circuit, 'callers'>;

/** What a stored value must be: a test, and the words a problem report uses for it. */
interface ValueRule {
  readonly test: (v: unknown) => boolean;
  readonly expected: string;
  /** A value that passed, as the circuit keeps it (only members the domain reads). */
  readonly tidy?: (v: Raw) => Raw;
}

/** One persisted member of a circuit. */
interface RecordField {
  /** The circuit's member, and its key in the stored JSON. */
  readonly key: RecordKey;
  /** Its column of SQLite's `circuits` table. */
  readonly column: string;
  readonly rule: ValueRule;
  /** null is a value it may hold. */
  readonly nullable?: true;
  /** Held as JSON text in its column (an object or an array). */
  readonly json?: true;
  /** Written when the row is inserted and never again (an update leaves its column alone). */
  readonly once?: true;
  /**
   * A member added after circuits were first stored: how a stored circuit without it reads.
   * `null`: as null; `absent`: left out (as it was), and a null column is left out too.
   */
  readonly since?: 'null' | 'absent';
}

const isObject = (v: unknown): v is Raw => typeof v === 'object' && v !== null && !Array.isArray(v);
const isTime = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const isSeconds = (v: unknown): boolean => isTime(v) && v >= 0;
const isCount = (v: unknown): boolean => Number.isSafeInteger(v) && (v as number) >= 0;
const isPositive = (v: unknown): boolean => Number.isSafeInteger(v) && (v as number) > 0;
const isAtLeastTwo = (v: unknown): boolean => Number.isSafeInteger(v) && (v as number) >= 2;

const rule = (test: (v: unknown) => boolean, expected: string): ValueRule => ({ test, expected });

const ANY = rule(() => true, 'anything');
const TIME = rule(isTime, 'epoch ms');
const SECONDS = rule(isSeconds, 'seconds >= 0');
const COUNT = rule(isCount, 'a whole number >= 0');
const POSITIVE = rule(isPositive, 'a whole number > 0');
const STATE = rule((v) => v === 'closed' || v === 'open' || v === 'half_open', 'closed, open or half_open');

// Nested objects: their key members only; the rest of them is the domain's (it wrote them).
const WINDOW = rule(
  (v) => isObject(v) && (v.type === 'count' || v.type === 'time') && isPositive(v.size),
  '{type: count or time, size > 0}',
);
const BACKOFF = rule(
  (v) => isObject(v) && isTime(v.multiplier) && isSeconds(v.maxTimeoutSeconds),
  '{multiplier, maxTimeoutSeconds >= 0}',
);
const WINDOW_STATE = rule(
  (v) =>
    isObject(v) &&
    ((v.type === 'count' && typeof v.outcomes === 'string' && isCount(v.failures) && isCount(v.slowCalls)) ||
      (v.type === 'time' && Array.isArray(v.buckets))),
  '{type: count, outcomes, failures, slowCalls} or {type: time, buckets}',
);
const THROTTLE = rule(
  (v) => isObject(v) && isTime(v.k) && v.k >= 1 && isPositive(v.windowSeconds),
  '{k >= 1, windowSeconds > 0}',
);
const THROTTLE_STATE = rule(
  (v) => isObject(v) && v.type === 'time' && Array.isArray(v.buckets),
  '{type: time, buckets}',
);
const QUORUM: ValueRule = {
  test: (v) => isObject(v) && isAtLeastTwo(v.minCallers) && isPositive(v.windowSeconds) && isAtLeastTwo(v.maxCallers),
  expected: '{minCallers >= 2, windowSeconds > 0, maxCallers >= 2}',
  // Exactly its three members: the domain compares quorums member by member.
  tidy: (q) =>
    Object.keys(q).length === 3
      ? q
      : { minCallers: q.minCallers, windowSeconds: q.windowSeconds, maxCallers: q.maxCallers },
};

const COUNT_AS_TARGETS: ReadonlySet<unknown> = new Set(['success', 'failure', 'ignore']);
const KINDS = rule(
  (v) =>
    isObject(v) &&
    isObject(v.countAs) &&
    Object.values(v.countAs).every((t) => COUNT_AS_TARGETS.has(t)) &&
    (v.minDeadlineMs === null || isPositive(v.minDeadlineMs)) &&
    isPositive(v.maxRetryAfterSeconds) &&
    (v.throttleScope === null || v.throttleScope === 'circuit' || v.throttleScope === 'caller'),
  '{countAs, minDeadlineMs > 0 or null, maxRetryAfterSeconds > 0, throttleScope}',
);
const RAMP = rule(
  (v) => isObject(v) && isPositive(v.seconds) && isPositive(v.startPercent) && (v.startPercent as number) <= 100,
  '{seconds > 0, startPercent 1-100}',
);
const HISTORY = rule((v) => v === false || v === true, 'true or false');
// Issue 31: the shadow's own circuit is checked as the live one is (its caller table, kept inside it, as an array).
const SHADOW = rule(
  (v) =>
    isObject(v) &&
    isObject(v.circuit) &&
    misfit(v.circuit) === null &&
    (v.circuit.callers === undefined || Array.isArray(v.circuit.callers)) &&
    isCount(v.outcomes) &&
    isCount(v.refused) &&
    isCount(v.openings) &&
    isTime(v.since),
  '{circuit, outcomes, refused, openings, since}',
);
const COOL_CALLERS = rule(
  (v) =>
    Array.isArray(v) && v.every((e) => Array.isArray(e) && e.length === 2 && typeof e[0] === 'string' && isTime(e[1])),
  '[[caller, epoch ms]]',
);

const SOURCES = rule(
  (v) =>
    Array.isArray(v) &&
    v.every((e) => Array.isArray(e) && e.length === 3 && typeof e[0] === 'string' && isCount(e[1]) && isTime(e[2])),
  '[[source, seq, epoch ms]]',
);

/** Every persisted member, in the order of the SQLite columns. */
export const RECORD_FIELDS: readonly RecordField[] = [
  // Redis keeps the id in its hash's own `id` field: the JSON's copy is never read.
  { key: 'id', column: 'id', rule: ANY, once: true },
  { key: 'name', column: 'name', rule: rule((v) => typeof v === 'string' && v.length > 0, 'a name'), once: true },
  { key: 'state', column: 'state', rule: STATE },
  { key: 'failureCount', column: 'failure_count', rule: COUNT },
  { key: 'failureThreshold', column: 'failure_threshold', rule: POSITIVE },
  { key: 'timeoutSeconds', column: 'timeout_seconds', rule: SECONDS },
  { key: 'halfOpenMaxCalls', column: 'half_open_max_calls', rule: POSITIVE },
  {
    key: 'probeLeases',
    column: 'probe_leases',
    rule: rule((v) => Array.isArray(v) && v.every(isTime), '[epoch ms]'),
    json: true,
  },
  { key: 'openUntil', column: 'open_until', rule: TIME, nullable: true },
  { key: 'halfOpenAt', column: 'half_open_at', rule: TIME, nullable: true },
  { key: 'lastFailureAt', column: 'last_failure_at', rule: TIME, nullable: true },
  { key: 'createdAt', column: 'created_at', rule: TIME, once: true },
  { key: 'updatedAt', column: 'updated_at', rule: TIME },
  { key: 'successThreshold', column: 'success_threshold', rule: POSITIVE },
  { key: 'window', column: 'window_policy', rule: WINDOW, nullable: true, json: true },
  { key: 'backoff', column: 'backoff_policy', rule: BACKOFF, nullable: true, json: true },
  {
    key: 'forcedState',
    column: 'forced_state',
    rule: rule((v) => v === 'open' || v === 'closed', 'open or closed'),
    nullable: true,
  },
  { key: 'probeSuccesses', column: 'probe_successes', rule: COUNT },
  { key: 'openTimeoutSeconds', column: 'open_timeout_seconds', rule: SECONDS, nullable: true },
  { key: 'reopenCount', column: 'reopen_count', rule: COUNT },
  { key: 'windowState', column: 'window_state', rule: WINDOW_STATE, nullable: true, json: true },
  { key: 'stateChangedAt', column: 'state_changed_at', rule: TIME, nullable: true, since: 'absent' }, // issue 15
  { key: 'throttle', column: 'throttle_policy', rule: THROTTLE, nullable: true, json: true, since: 'null' }, // issue 21
  { key: 'throttleState', column: 'throttle_state', rule: THROTTLE_STATE, nullable: true, json: true, since: 'null' },
  { key: 'quorum', column: 'quorum_policy', rule: QUORUM, nullable: true, json: true, since: 'absent' }, // issue 17
  { key: 'kinds', column: 'kind_policy', rule: KINDS, nullable: true, json: true, since: 'absent' }, // issue 29
  { key: 'ramp', column: 'ramp_policy', rule: RAMP, nullable: true, json: true, since: 'absent' },
  { key: 'coolUntil', column: 'cool_until', rule: TIME, nullable: true, since: 'absent' },
  { key: 'coolCallers', column: 'cool_callers', rule: COOL_CALLERS, nullable: true, json: true, since: 'absent' },
  { key: 'coolDueAt', column: 'cool_due_at', rule: TIME, nullable: true, since: 'absent' },
  { key: 'rampUntil', column: 'ramp_until', rule: TIME, nullable: true, since: 'absent' },
  // Issue 31: only `false` is ever stored (absent: the history is on); JSON text `false` in SQLite.
  { key: 'history', column: 'history_policy', rule: HISTORY, nullable: true, json: true, since: 'absent' },
  { key: 'shadow', column: 'shadow', rule: SHADOW, nullable: true, json: true, since: 'absent' }, // issue 31
  { key: 'sources', column: 'outcome_sources', rule: SOURCES, nullable: true, json: true, since: 'absent' }, // issue 32
];

/** A field in the one shape the loops below read. */
interface Field {
  readonly key: RecordKey;
  readonly column: string;
  readonly test: (v: unknown) => boolean;
  readonly expected: string;
  readonly tidy: ((v: Raw) => Raw) | null;
  readonly nullable: boolean;
  readonly json: boolean;
  readonly since: 'null' | 'absent' | null;
}

/**
 * The fields in one shape (every member set), for the loops below: every circuit read or
 * written walks them, and one shape keeps each member read a single-shape property load.
 */
const FIELDS: readonly Field[] = RECORD_FIELDS.map((f) => ({
  key: f.key,
  column: f.column,
  test: f.rule.test,
  expected: f.nullable === undefined ? f.rule.expected : `${f.rule.expected} or null`,
  tidy: f.rule.tidy ?? null,
  nullable: f.nullable === true,
  json: f.json === true,
  since: f.since ?? null,
}));

/** The fields by member name. */
const F = Object.fromEntries(FIELDS.map((f) => [f.key, f])) as Readonly<Record<RecordKey, Field>>;

/** The columns of `circuits` that hold a circuit, in `RECORD_FIELDS` order. */
export const RECORD_COLUMNS: readonly string[] = RECORD_FIELDS.map((f) => f.column);

/** The columns an update writes (all but those written once). */
export const UPDATED_COLUMNS: readonly string[] = RECORD_FIELDS.filter((f) => !f.once).map((f) => f.column);

/** A column's value: a number, text (JSON for objects and arrays) or null. */
export type ColumnValue = string | number | null;

const NO_LEASES: readonly number[] = Object.freeze([]);

/** Each member's position in a row (`RECORD_COLUMNS` order). */
const AT = Object.fromEntries(FIELDS.map((f, i) => [f.key, i])) as Readonly<Record<RecordKey, number>>;

/** A JSON column's value: null, the shared empty lease list (never parsed), or the parsed text. */
const parsed = (v: ColumnValue | undefined): unknown =>
  v == null ? null : v === '[]' ? NO_LEASES : JSON.parse(v as string);

/**
 * The circuit a row holds, its values in `RECORD_COLUMNS` order (a `.raw()` statement: no
 * object per row to build), without its caller table. One member per field of `RECORD_FIELDS`
 * in one object literal: a page of 100 circuits deep in a big table costs about a sixth less
 * than filling an empty object member by member. test/domain/circuit-record.test.ts fails
 * for a field left out here.
 */
export function circuitFromColumns(v: readonly ColumnValue[]): Circuit {
  const quorum = v[AT.quorum];
  const c: Record<string, unknown> = {
    id: v[AT.id],
    name: v[AT.name],
    state: v[AT.state],
    failureCount: v[AT.failureCount],
    failureThreshold: v[AT.failureThreshold],
    timeoutSeconds: v[AT.timeoutSeconds],
    halfOpenMaxCalls: v[AT.halfOpenMaxCalls],
    probeLeases: parsed(v[AT.probeLeases]),
    openUntil: v[AT.openUntil],
    halfOpenAt: v[AT.halfOpenAt],
    lastFailureAt: v[AT.lastFailureAt],
    createdAt: v[AT.createdAt],
    updatedAt: v[AT.updatedAt],
    successThreshold: v[AT.successThreshold],
    window: parsed(v[AT.window]),
    backoff: parsed(v[AT.backoff]),
    forcedState: v[AT.forcedState],
    probeSuccesses: v[AT.probeSuccesses],
    openTimeoutSeconds: v[AT.openTimeoutSeconds],
    reopenCount: v[AT.reopenCount],
    windowState: parsed(v[AT.windowState]),
    stateChangedAt: v[AT.stateChangedAt],
    throttle: parsed(v[AT.throttle]),
    throttleState: parsed(v[AT.throttleState]),
    // Only when set: circuits without a quorum keep the shape they always had (`since: 'absent'`).
    ...(quorum == null ? {} : { quorum: parsed(quorum) }),
  };
  // Issue 29's members, only when set (`since: 'absent'`); one test for the usual circuit that has none.
  if (v[AT.kinds] != null || v[AT.ramp] != null || v[AT.coolDueAt] != null || v[AT.rampUntil] != null) {
    if (v[AT.kinds] != null) c.kinds = parsed(v[AT.kinds]);
    if (v[AT.ramp] != null) c.ramp = parsed(v[AT.ramp]);
    if (v[AT.coolUntil] != null) c.coolUntil = v[AT.coolUntil];
    if (v[AT.coolCallers] != null) c.coolCallers = parsed(v[AT.coolCallers]);
    if (v[AT.coolDueAt] != null) c.coolDueAt = v[AT.coolDueAt];
    if (v[AT.rampUntil] != null) c.rampUntil = v[AT.rampUntil];
  }
  if (v[AT.history] === 'false') c.history = false; // issue 31: only an opt-out is stored
  if (v[AT.shadow] != null) c.shadow = parsed(v[AT.shadow]); // issue 31, only when set
  if (v[AT.sources] != null) c.sources = parsed(v[AT.sources]); // issue 32, only when set
  return c as unknown as Circuit;
}

/** A circuit as its row, keyed by column (the statements' named parameters), without its caller table. */
export function circuitToColumns(circuit: Circuit): Record<string, ColumnValue> {
  const c = circuit as unknown as Raw;
  const row: Record<string, ColumnValue> = {};
  for (let i = 0; i < FIELDS.length; i++) {
    const f = FIELDS[i]!;
    const v = c[f.key] ?? null;
    row[f.column] = !f.json || v === null ? (v as ColumnValue) : JSON.stringify(v);
  }
  return row;
}

/** A circuit as Redis stores it: one JSON object, its members by their own names, without its caller table. */
export function circuitToJson(circuit: Circuit): string {
  if (circuit.callers === undefined) return JSON.stringify(circuit);
  // The caller table is not part of the record: each store keeps it apart (SQLite rows, a Redis hash).
  const { callers: _callers, ...record } = circuit;
  return JSON.stringify(record);
}

/** Why a stored circuit cannot be used: the member and what it should have been. */
export class BadRecord {
  constructor(
    readonly field: string,
    readonly expected: string,
  ) {}

  get message(): string {
    return `${this.field}: expected ${this.expected}`;
  }
}

/** Whether `v`, a stored circuit's value of `f`, fits it (a member added since may be absent). */
function fits(f: Field, v: unknown): boolean {
  if (v === null) return f.nullable;
  if (v === undefined) return f.since !== null;
  return f.test(v);
}

/**
 * The first member of a stored circuit that does not fit, or null. One line per field of
 * `RECORD_FIELDS` (the id excepted: Redis keeps it in the hash), each a read by name: this
 * runs on every change message a host receives, and a read by a computed key costs about ten
 * times one by name. Two functions (run-time state, policy) so that V8 inlines every test of
 * each. test/store/stored-circuit.test.ts fails for a field left out here.
 */
function misfit(c: Raw): Field | null {
  return stateMisfit(c) ?? policyMisfit(c);
}

function stateMisfit(c: Raw): Field | null {
  if (!fits(F.name, c.name)) return F.name;
  if (!fits(F.state, c.state)) return F.state;
  if (!fits(F.failureCount, c.failureCount)) return F.failureCount;
  if (!fits(F.probeLeases, c.probeLeases)) return F.probeLeases;
  if (!fits(F.openUntil, c.openUntil)) return F.openUntil;
  if (!fits(F.halfOpenAt, c.halfOpenAt)) return F.halfOpenAt;
  if (!fits(F.lastFailureAt, c.lastFailureAt)) return F.lastFailureAt;
  if (!fits(F.createdAt, c.createdAt)) return F.createdAt;
  if (!fits(F.updatedAt, c.updatedAt)) return F.updatedAt;
  if (!fits(F.probeSuccesses, c.probeSuccesses)) return F.probeSuccesses;
  if (!fits(F.openTimeoutSeconds, c.openTimeoutSeconds)) return F.openTimeoutSeconds;
  if (!fits(F.reopenCount, c.reopenCount)) return F.reopenCount;
  if (!fits(F.windowState, c.windowState)) return F.windowState;
  if (!fits(F.stateChangedAt, c.stateChangedAt)) return F.stateChangedAt;
  if (!fits(F.throttleState, c.throttleState)) return F.throttleState;
  if (!fits(F.coolUntil, c.coolUntil)) return F.coolUntil;
  if (!fits(F.coolCallers, c.coolCallers)) return F.coolCallers;
  if (!fits(F.coolDueAt, c.coolDueAt)) return F.coolDueAt;
  if (!fits(F.rampUntil, c.rampUntil)) return F.rampUntil;
  if (!fits(F.shadow, c.shadow)) return F.shadow;
  if (!fits(F.sources, c.sources)) return F.sources;
  return null;
}

function policyMisfit(c: Raw): Field | null {
  if (!fits(F.failureThreshold, c.failureThreshold)) return F.failureThreshold;
  if (!fits(F.timeoutSeconds, c.timeoutSeconds)) return F.timeoutSeconds;
  if (!fits(F.halfOpenMaxCalls, c.halfOpenMaxCalls)) return F.halfOpenMaxCalls;
  if (!fits(F.successThreshold, c.successThreshold)) return F.successThreshold;
  if (!fits(F.window, c.window)) return F.window;
  if (!fits(F.backoff, c.backoff)) return F.backoff;
  if (!fits(F.forcedState, c.forcedState)) return F.forcedState;
  if (!fits(F.throttle, c.throttle)) return F.throttle;
  if (!fits(F.quorum, c.quorum)) return F.quorum;
  if (!fits(F.kinds, c.kinds)) return F.kinds;
  if (!fits(F.ramp, c.ramp)) return F.ramp;
  if (!fits(F.history, c.history)) return F.history;
  return null;
}

/** The fields whose stored value may need completing: a default for an absent member, or tidying. */
const COMPLETED = FIELDS.filter((f) => f.since === 'null' || f.tidy !== null);

/**
 * A stored circuit read back as JSON (Redis), checked member by member: the circuit (`raw`
 * itself, completed in place with the members added since it was stored), or why not.
 * Members other than the record's are left as they are.
 */
export function checkStoredCircuit(raw: unknown): Circuit | BadRecord {
  if (!isObject(raw)) return new BadRecord('circuit', 'an object');
  const bad = misfit(raw);
  if (bad !== null) return new BadRecord(bad.key, bad.expected);
  for (const f of COMPLETED) {
    const v = raw[f.key];
    if (v === undefined) {
      if (f.since === 'null') raw[f.key] = null;
    } else if (v !== null && f.tidy !== null) raw[f.key] = f.tidy(v as Raw);
  }
  return raw as unknown as Circuit;
}
