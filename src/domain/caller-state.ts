/**
 * What a circuit with a quorum remembers per named caller: its own consecutive failures,
 * when it last failed (and was last slow), for the quorum, and its own isolation (the
 * caller's private open state, with open time, backoff and a probe). Pure functions over
 * a JSON-friendly array kept in recency order (least recently seen first), so the bound
 * `quorum.maxCallers` forgets from the front. A caller with nothing worth remembering (no
 * failure in the quorum window, not isolated) has no entry at all: a healthy caller costs
 * nothing, and its successes write nothing.
 */
import { nextOpenTimeoutSeconds, type QuorumPolicy } from './policy.js';
import { callerTableBound, quorumWindowStartMs } from './quorum.js';
import type { CallerEntry, Circuit, EpochMs, LateOutcomeRule, Transition } from './types.js';

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
  return entries.map((e) => (e[0] === caller ? [e[0], e[1], e[2], e[3], e[4], e[5], now + probeLeaseMs] : e));
}

/** One outcome as the caller table sees it. */
export interface CallerOutcome {
  readonly caller: string;
  readonly failure: boolean;
  readonly slow: boolean;
  readonly late?: LateOutcomeRule;
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
  let next: CallerEntry;
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
  return { entries: tidy(entries, found, next, quorum, now), transitions };
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
