/**
 * What a circuit with a quorum remembers per named caller: its own consecutive failures,
 * when it last failed (and was last slow), for the quorum, and its own isolation (the
 * caller's private open state, with open time, backoff and a probe). Pure functions over
 * a JSON-friendly array kept in recency order (least recently seen first), so the bound
 * `quorum.maxCallers` forgets from the front. A caller with nothing worth remembering (no
 * failure in the quorum window, not isolated) has no entry at all: a healthy caller costs
 * nothing, and its successes write nothing. Below the table, the steps the state machine
 * takes with it (`circuit.ts` calls them).
 */
import { nextOpenTimeoutSeconds, type QuorumPolicy } from './policy.js';
import { callerTableBound, quorumCallers, quorumVoterCount, quorumWindowStartMs } from './quorum.js';
import type {
  CallerCounts,
  CallerEntry,
  Circuit,
  EpochMs,
  LateOutcomeRule,
  Outcome,
  Step,
  Transition,
  TripReason,
  Verdict,
} from './types.js';
import { isSlow } from './window.js';

export type { CallerEntry } from './types.js';

const NO_ENTRIES: readonly CallerEntry[] = Object.freeze([]);

/** The circuit's caller table (empty without a quorum or before any caller failed). */
export function callerEntries(c: Pick<Circuit, 'callers'>): readonly CallerEntry[] {
  return c.callers ?? NO_ENTRIES;
}

/**
 * The entry of `caller`, or undefined. Searched from the most recently seen end: a caller
 * reporting now was most likely seen last (a batch of one client's outcomes finds it at once).
 */
export function findCaller(entries: readonly CallerEntry[], caller: string): CallerEntry | undefined {
  for (let i = entries.length - 1; i >= 0; i--) if (entries[i]![0] === caller) return entries[i];
  return undefined;
}

/** Callers isolated right now (their open time may have run out: then they wait for a probe). */
export function isolatedCallers(entries: readonly CallerEntry[]): CallerEntry[] {
  return entries.filter((e) => e[4] !== null);
}

/** How many callers are isolated right now. */
export function isolatedCallerCount(entries: readonly CallerEntry[]): number {
  let n = 0;
  for (const e of entries) if (e[4] !== null) n++;
  return n;
}

/** What the caller's own state says about a call now: null (not isolated: the circuit decides), a refusal, or a probe. */
export type CallerAdmission = { readonly refuseUntil: EpochMs } | { readonly probe: true } | null;

/**
 * An isolated caller is refused until its open time ends, then admitted one probe at a
 * time (a probe holds its slot for the probe lease or until its outcome is recorded).
 */
export function callerAdmission(entry: CallerEntry | undefined, now: EpochMs): CallerAdmission {
  if (entry === undefined || entry[4] === null) return null;
  if (now < entry[4]) return { refuseUntil: entry[4] };
  if (entry[6] !== null && entry[6] > now) return { refuseUntil: entry[6] };
  return { probe: true };
}

/** The entries with `caller`'s probe slot taken until `now + probeLeaseMs`. */
export function takeCallerProbe(
  entries: readonly CallerEntry[],
  caller: string,
  now: EpochMs,
  probeLeaseMs: number,
): readonly CallerEntry[] {
  return entries.map((e) => {
    if (e[0] !== caller) return e;
    const taken: CallerCounts = [e[0], e[1], e[2], e[3], e[4], e[5], now + probeLeaseMs];
    return e[7] === undefined ? taken : ([...taken, e[7]] as const);
  });
}

/** One outcome as the caller table sees it. */
export interface CallerOutcome {
  readonly caller: string;
  readonly failure: boolean;
  readonly slow: boolean;
  readonly late?: LateOutcomeRule;
  /** The credential that reported it (issue 30); absent: the caller is its own voter. */
  readonly voter?: string;
}

/** The caller table after an outcome, and the isolation events it made. */
export interface CallerStep {
  readonly entries: readonly CallerEntry[];
  readonly transitions: readonly Transition[];
}

/**
 * Count one named outcome. A failure adds to the caller's own consecutive failures and
 * isolates it at `failureThreshold`; a failed probe isolates it again, for the open time
 * grown by the backoff. A success ends an isolation, except a late (`count_only`) success
 * before the open time ended: that call was admitted before the isolation.
 */
export function recordCaller(c: Circuit, quorum: QuorumPolicy, o: CallerOutcome, now: EpochMs): CallerStep {
  const entries = callerEntries(c);
  const found = findCaller(entries, o.caller);
  if (found === undefined && !o.failure && !o.slow) return { entries, transitions: [] };
  const [, failures, failedAt, slowAt, isolatedUntil, isolatedSeconds, probeUntil] = found ?? [
    o.caller,
    0,
    null,
    null,
    null,
    0,
    null,
  ];
  const slow = o.slow ? now : slowAt;
  const event = (reason: 'caller_isolated' | 'caller_released', until?: EpochMs): Transition => ({
    from: c.state,
    to: c.state,
    reason,
    at: now,
    callers: [o.caller],
    ...(until === undefined ? {} : { until }),
  });
  let next: CallerCounts;
  const transitions: Transition[] = [];
  if (o.failure) {
    const count = failures + 1;
    if (isolatedUntil !== null && now >= isolatedUntil) {
      const seconds = nextOpenTimeoutSeconds(c, isolatedSeconds);
      next = [o.caller, count, now, slow, now + seconds * 1000, seconds, null];
      transitions.push(event('caller_isolated', now + seconds * 1000));
    } else if (isolatedUntil === null && count >= c.failureThreshold) {
      next = [o.caller, count, now, slow, now + c.timeoutSeconds * 1000, c.timeoutSeconds, null];
      transitions.push(event('caller_isolated', now + c.timeoutSeconds * 1000));
    } else {
      next = [o.caller, count, now, slow, isolatedUntil, isolatedSeconds, probeUntil];
    }
  } else if (isolatedUntil !== null && (now >= isolatedUntil || (o.late ?? 'circuitlog') === 'circuitlog')) {
    next = [o.caller, 0, failedAt, slow, null, 0, null];
    transitions.push(event('caller_released'));
  } else {
    next = [o.caller, 0, failedAt, slow, isolatedUntil, isolatedSeconds, probeUntil];
  }
  // The voter of this report (absent: none, the caller is its own voter); a report without one keeps none.
  const entry: CallerEntry = o.voter === undefined ? next : [...next, o.voter];
  return { entries: tidy(entries, found, entry, quorum, now), transitions };
}

/**
 * The table with `next` as the most recently seen entry, without entries that hold nothing
 * any more (no failure or slow call in the window, not isolated), and at most
 * `maxCallers` long: the least recently seen go first.
 */
function tidy(
  entries: readonly CallerEntry[],
  found: CallerEntry | undefined,
  next: CallerEntry,
  quorum: QuorumPolicy,
  now: EpochMs,
): readonly CallerEntry[] {
  const from = quorumWindowStartMs(quorum, now);
  // `found` by reference: no caller id compared again (up to 1,000 ids of 128 characters a step).
  const kept: CallerEntry[] = [];
  for (const e of entries) if (e !== found && !isIdle(e, from)) kept.push(e);
  if (!isIdle(next, from)) kept.push(next);
  const bound = callerTableBound(quorum);
  return kept.length > bound ? kept.slice(kept.length - bound) : kept;
}

function isIdle(e: CallerEntry, windowStart: EpochMs): boolean {
  return e[1] === 0 && e[4] === null && (e[2] === null || e[2] < windowStart) && (e[3] === null || e[3] < windowStart);
}

/** The table under a new quorum: none without one; cut to the new bound (least recently seen first). */
export function callersUnder(
  entries: readonly CallerEntry[],
  quorum: QuorumPolicy | null | undefined,
): readonly CallerEntry[] {
  if (quorum == null) return NO_ENTRIES;
  const bound = callerTableBound(quorum);
  return entries.length > bound ? entries.slice(entries.length - bound) : entries;
}

// The quorum and caller isolation as steps of the state machine (`circuit.ts` calls these):
// counting a named outcome, deciding whether a trip opens the circuit or is withheld, an
// isolated caller's admission, and the detect-only marking of events made under a
// forced-closed circuit.

const NONE: readonly Transition[] = Object.freeze([]);

/**
 * The circuit with a named outcome counted in its caller table, and the isolation events;
 * the same circuit (same reference) when it has no quorum, the outcome is anonymous, or
 * the caller has nothing to remember.
 */
export function countCaller(c: Circuit, outcome: Outcome, now: EpochMs): Step {
  const quorum = c.quorum ?? null;
  if (quorum === null || outcome.caller === undefined) return { circuit: c, transitions: NONE };
  const slow = c.window !== null && isSlow(c.window, outcome.durationMs);
  const step = recordCaller(
    c,
    quorum,
    { caller: outcome.caller, failure: !outcome.success, slow, late: outcome.late, voter: outcome.voter },
    now,
  );
  if (step.entries === callerEntries(c)) return { circuit: c, transitions: NONE };
  return { circuit: { ...c, callers: step.entries, updatedAt: now }, transitions: step.transitions };
}

/**
 * A trip rule fired on a closed circuit: without a quorum it opens (null). With one, it
 * opens only if at least `minCallers` named callers of distinct voters (credentials) failed (or, for the slow-call rule,
 * were slow) within the window: then the callers that did (for the `open` event). Else
 * the trip is withheld: the circuit stays closed, its counts and window start again, and
 * a `trip_withheld` event names the callers that failed.
 */
export function judgeTrip(
  c: Circuit,
  reason: TripReason,
  now: EpochMs,
): { open: readonly string[] | null } | { withheld: Step } {
  const quorum = c.quorum ?? null;
  if (quorum === null) return { open: null };
  const evidence = reason === 'slow_call_rate_exceeded' ? 'slow' : 'failure';
  const callers = quorumCallers(callerEntries(c), evidence, quorum, now);
  // Distinct voters, not names (issue 30): without credentials, every caller is its own voter.
  if (quorumVoterCount(callerEntries(c), evidence, quorum, now) >= quorum.minCallers) return { open: callers };
  const withheld: Transition = {
    from: 'closed',
    to: 'closed',
    reason: 'trip_withheld',
    at: now,
    rule: reason,
    callers,
  };
  return {
    withheld: { circuit: { ...c, failureCount: 0, windowState: null, updatedAt: now }, transitions: [withheld] },
  };
}

/**
 * An isolated caller's own say on a call the circuit allows: null when it has none (not
 * isolated, no quorum), else a refusal scoped to the caller, or the circuit with the
 * caller's probe slot taken.
 */
export function admitCaller(
  c: Circuit,
  caller: string | undefined,
  now: EpochMs,
  probeLeaseMs: number,
): { verdict: Verdict; circuit: Circuit } | null {
  if (caller === undefined || (c.quorum ?? null) === null) return null;
  const entries = callerEntries(c);
  const said = callerAdmission(findCaller(entries, caller), now);
  if (said === null) return null;
  if ('refuseUntil' in said)
    return { verdict: { allowed: false, retryAt: said.refuseUntil, scope: 'caller' }, circuit: c };
  return {
    verdict: { allowed: true },
    circuit: { ...c, callers: takeCallerProbe(entries, caller, now, probeLeaseMs), updatedAt: now },
  };
}

/** When the caller's own isolation would refuse it now (detect-only), or null. */
export function callerWouldRefuse(c: Circuit, caller: string | undefined, now: EpochMs): EpochMs | null {
  if (caller === undefined || (c.quorum ?? null) === null) return null;
  const said = callerAdmission(findCaller(callerEntries(c), caller), now);
  return said !== null && 'refuseUntil' in said ? said.refuseUntil : null;
}

/** The circuit without its quorum and caller table (a policy without a quorum is being applied). */
export function withoutQuorum(c: Circuit): Circuit {
  if (c.quorum === undefined && c.callers === undefined) return c;
  const { quorum: _quorum, callers: _callers, ...rest } = c;
  return rest;
}
