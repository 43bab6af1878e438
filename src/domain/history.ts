/**
 * A circuit's outcome history (issue 31, docs/policy-lab.md): what the policy lab replays.
 * Every outcome the circuit received (as the step got it, with the step's `now`), every
 * manual action (a policy change, a force, a reset) and every stored transition, in the order
 * the store applied them. Both stores keep an entry as `t` (the step's `now`, epoch ms) and one
 * short text (`encodeEntry`): SQLite in a row of `history`, Redis in a capped stream per
 * circuit. This file is the only mapping between an entry and its text; what storage gives
 * back is untrusted (`decodeEntry` answers null for text it cannot read, and the reader skips it).
 *
 * Text, a JSON array, first member the type:
 * - outcome: `[code, durationMs, caller, t - at, timeoutSeconds, retryAfterSeconds, deadlineMs,
 *   voter]`, nulls for absent members and trailing nulls left out; `code` is `1` or `0`
 *   (success), then the kind's letter if it has one (`"0f"`: failure, kind failure), then its
 *   late-outcome rule if it has one (`k` count_only, as every HTTP outcome; `l` circuitlog):
 *   `[0]` is a bare failure, `["1k",12.5]` a success the HTTP routes took in 12.5 ms.
 * - manual: `["m", action, by, before, after]`: `configure` with the policy before (null: the
 *   circuit was created by it) and after, in wire form resolved; `reset`.
 * - transition: `["x", from, to, reason, at, detail]` (detail: transition-detail.ts's text, or null).
 */
import { OUTCOME_KINDS, type OutcomeKind } from './outcome-kind.js';
import type { CircuitPolicy } from './policy.js';
import { policyFromWire, policyToWire, type PolicyWire } from './policy-wire.js';
import { detailText, parseTransitionDetail } from './transition-detail.js';
import type {
  Circuit,
  CircuitState,
  EpochMs,
  LateOutcomeRule,
  Outcome,
  Step,
  Transition,
  TransitionReason,
} from './types.js';

/** An outcome as the step that recorded it got it. */
export interface HistoryOutcome {
  readonly type: 'outcome';
  /** The step's `now`. */
  readonly t: EpochMs;
  readonly outcome: Outcome;
}

/** A person stepped in: a policy change (a force is one) or a reset. */
export interface HistoryManual {
  readonly type: 'manual';
  readonly t: EpochMs;
  readonly action: 'configure' | 'reset';
  /** Who asked (a credential id), when known. */
  readonly by?: string;
  /** `configure`: the policy before (null: this write created the circuit) and after. */
  readonly before?: CircuitPolicy | null;
  readonly after?: CircuitPolicy;
}

/** A transition the store wrote (any step's: outcomes, manual actions, the lazy refresh, the due job). */
export interface HistoryTransition {
  readonly type: 'transition';
  readonly t: EpochMs;
  readonly transition: Transition;
}

export type HistoryEntry = HistoryOutcome | HistoryManual | HistoryTransition;

/** An entry as stored: its time and its text. */
export interface StoredEntry {
  readonly t: EpochMs;
  readonly text: string;
}

/**
 * What the history keeps of one write besides its transitions, known once the step's result
 * is final (a store may run a step more than once): the store calls it with the circuit as
 * the write read it and the step's result, and stores what it answers (null: nothing).
 */
export type HistoryHook = (before: Circuit | null, result: Step) => HistoryEntry | null;

const KIND_LETTER: Readonly<Record<OutcomeKind, string>> = {
  success: 's',
  failure: 'f',
  rejected: 'r',
  throttled: 't',
  caller_deadline: 'd',
  cancelled: 'c',
};
const LETTER_KIND: ReadonlyMap<string, OutcomeKind> = new Map(OUTCOME_KINDS.map((k) => [KIND_LETTER[k], k] as const));
const LATE_LETTER: Readonly<Record<LateOutcomeRule, string>> = { count_only: 'k', circuitlog: 'l' };
const CODE = /^([01])([sfrtdc])?([kl])?$/;
const STATES: ReadonlySet<string> = new Set(['closed', 'open', 'half_open']);

/** An entry's text (see the file's comment). */
export function encodeEntry(e: HistoryEntry): string {
  switch (e.type) {
    case 'outcome': {
      const o = e.outcome;
      const kind = o.kind === undefined ? '' : KIND_LETTER[o.kind];
      const code = `${o.success ? 1 : 0}${kind}${o.late === undefined ? '' : LATE_LETTER[o.late]}`;
      const members: unknown[] = [
        code.length === 1 ? Number(code) : code,
        o.durationMs ?? null,
        o.caller ?? null,
        o.at === undefined ? null : e.t - o.at,
        o.timeoutSeconds ?? null,
        o.retryAfterSeconds ?? null,
        o.deadlineMs ?? null,
        o.voter ?? null,
      ];
      while (members.length > 1 && members.at(-1) === null) members.pop();
      return JSON.stringify(members);
    }
    case 'manual':
      return JSON.stringify([
        'm',
        e.action,
        e.by ?? null,
        e.before == null ? null : policyToWire(e.before, true),
        e.after === undefined ? null : policyToWire(e.after, true),
      ]);
    case 'transition': {
      const t = e.transition;
      return JSON.stringify(['x', t.from, t.to, t.reason, t.at, detailText(t)]);
    }
  }
}

const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const optNum = (v: unknown): number | undefined => (isNum(v) ? v : undefined);
const optStr = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** The entry a stored text holds, or null when the text is not one (storage is outside input). */
export function decodeEntry(t: EpochMs, text: string): HistoryEntry | null {
  let a: unknown;
  try {
    a = JSON.parse(text);
  } catch {
    return null;
  }
  if (!Array.isArray(a) || a.length === 0) return null;
  const head = a[0];
  if (head === 'm') return decodeManual(t, a);
  if (head === 'x') return decodeTransition(t, a);
  const code = typeof head === 'number' ? String(head) : head;
  const parts = typeof code === 'string' ? CODE.exec(code) : null;
  if (parts === null) return null;
  const kind = parts[2] === undefined ? undefined : LETTER_KIND.get(parts[2]);
  const late: LateOutcomeRule | undefined =
    parts[3] === undefined ? undefined : parts[3] === 'k' ? 'count_only' : 'circuitlog';
  const at = optNum(a[3]);
  const outcome: Outcome = {
    success: parts[1] === '1',
    ...(kind === undefined ? {} : { kind }),
    ...(isNum(a[1]) ? { durationMs: a[1] } : {}),
    ...(typeof a[2] === 'string' ? { caller: a[2] } : {}),
    ...(at === undefined ? {} : { at: t - at }),
    ...(isNum(a[4]) ? { timeoutSeconds: a[4] } : {}),
    ...(late === undefined ? {} : { late }),
    ...(isNum(a[5]) ? { retryAfterSeconds: a[5] } : {}),
    ...(isNum(a[6]) ? { deadlineMs: a[6] } : {}),
    ...(typeof a[7] === 'string' ? { voter: a[7] } : {}),
  };
  return { type: 'outcome', t, outcome };
}

function decodeManual(t: EpochMs, a: unknown[]): HistoryManual | null {
  const action = a[1];
  if (action !== 'configure' && action !== 'reset') return null;
  const by = optStr(a[2]);
  const policy = (w: unknown): CircuitPolicy | null => {
    if (w === null || typeof w !== 'object') return null;
    try {
      return policyFromWire(w as PolicyWire);
    } catch {
      return null;
    }
  };
  if (action === 'reset') return { type: 'manual', t, action, ...(by === undefined ? {} : { by }) };
  const after = policy(a[4]);
  if (after === null) return null;
  return { type: 'manual', t, action, ...(by === undefined ? {} : { by }), before: policy(a[3]), after };
}

function decodeTransition(t: EpochMs, a: unknown[]): HistoryTransition | null {
  const [, from, to, reason, at, detail] = a;
  if (typeof from !== 'string' || !STATES.has(from) || typeof to !== 'string' || !STATES.has(to)) return null;
  if (typeof reason !== 'string' || !isNum(at)) return null;
  const transition: Transition = {
    from: from as CircuitState,
    to: to as CircuitState,
    reason: reason as TransitionReason,
    at,
    ...parseTransitionDetail(typeof detail === 'string' ? detail : null),
  };
  return { type: 'transition', t, transition };
}

/** The stored form of an entry. */
export function storedEntry(e: HistoryEntry): StoredEntry {
  return { t: e.t, text: encodeEntry(e) };
}

/**
 * The text of a history's stored transitions of one step, in order (what a store writes beside
 * the entry). A shadow policy's transitions (issue 31) are left out: the history is the live
 * circuit's, and a replay derives the shadow's from its outcomes.
 */
export function transitionEntries(t: EpochMs, transitions: readonly Transition[]): HistoryTransition[] {
  const live = transitions.some((x) => x.shadow === true) ? transitions.filter((x) => x.shadow !== true) : transitions;
  return live.map((transition) => ({ type: 'transition', t, transition }));
}

/**
 * What one stored step leaves in its circuit's history, as both stores write it: the hook's
 * entry (if any), then one entry per transition of the live circuit, each at the entry's time
 * or, without an entry (a read's lazy refresh, the due job), at the transition's own `at`.
 * A shadow policy's transitions are left out (see `transitionEntries`).
 */
export function stepEntries(entry: HistoryEntry | null, transitions: readonly Transition[]): StoredEntry[] {
  const out: StoredEntry[] = entry === null ? [] : [storedEntry(entry)];
  for (const transition of transitions)
    if (transition.shadow !== true)
      out.push(storedEntry({ type: 'transition', t: entry?.t ?? transition.at, transition }));
  return out;
}
