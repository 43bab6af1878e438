/**
 * Issue 29 as steps of the breaker: how a dependency's HTTP answer is classified into a kind (the
 * proxy and the Node client use it), what an outcome of each kind counts as (`count_as`, the
 * caller-deadline rule), the cool-down a throttled outcome starts (circuit or caller scope) and
 * its end, and the shared slow start (`ramp`) after a circuit closes from half-open or a
 * circuit-wide cool-down ends. Pure, as `circuit.ts`, which calls these.
 */
import { rampAdmits, rampPercent, type OutcomeKind } from './outcome-kind.js';
import { POLICY_DEFAULTS } from './policy-defaults.js';
import type { CircuitPolicy, CountAs, KindPolicy } from './policy.js';
import type { RandomSource } from './throttle.js';
import type { Circuit, CoolCaller, EpochMs, Outcome, Step, Transition, Verdict } from './types.js';
import { isSlow } from './window.js';

/** An HTTP answer's kind and, when throttled, the seconds it asked for (null: it named none). */
export interface Classified {
  readonly kind: OutcomeKind;
  readonly retryAfterSeconds?: number | null;
}

/**
 * The kind of a dependency's HTTP answer (issue 29's table, as the proxy and the clients use it):
 * 429, and 503 with a `Retry-After`, are `throttled` with the seconds asked; other 5xx except
 * 501 and 505 are `failure` (those two say the request cannot be served, not that the
 * dependency is unwell: `rejected`); 408 is a `failure` (the dependency gave up waiting);
 * other 4xx are `rejected`; everything else is `success`.
 */
export function kindOfStatus(status: number, retryAfter: string | null | undefined, now: number): Classified {
  if (status === 429 || (status === 503 && retryAfter != null && retryAfter !== '')) {
    return { kind: 'throttled', retryAfterSeconds: retryAfterSeconds(retryAfter, now) };
  }
  if (status === 501 || status === 505) return { kind: 'rejected' };
  if (status >= 500 || status === 408) return { kind: 'failure' };
  if (status >= 400) return { kind: 'rejected' };
  return { kind: 'success' };
}

const DELAY_SECONDS = /^\d{1,10}$/;

/**
 * A `Retry-After` value in seconds from now (RFC 9110 section 10.2.3: delay-seconds or an
 * HTTP-date), rounded up, never below 0; null when absent or not one of the two forms.
 */
export function retryAfterSeconds(value: string | null | undefined, now: number): number | null {
  if (value == null) return null;
  const v = value.trim();
  if (DELAY_SECONDS.test(v)) return Number(v);
  // An HTTP-date (IMF-fixdate, or the two obsolete forms Date.parse also reads); a bare number
  // or any other text Date.parse might guess at is not one.
  if (!/^[A-Za-z]{3,9}, /.test(v)) return null;
  const at = Date.parse(v);
  if (!Number.isFinite(at)) return null;
  return Math.max(0, Math.ceil((at - now) / 1000));
}

/** Caller-scope cool-downs one circuit keeps at most; past it the one ending soonest is dropped. */
export const MAX_COOL_CALLERS = 1_000;

/** A refused ramping call may try again this soon (`Retry-After: 1`). */
export const RAMP_RETRY_AFTER_MS = 1_000; // 1 s

const NO_TRANSITIONS: readonly Transition[] = Object.freeze([]);

/** A circuit's kind rules, its own or the defaults. */
export function kindPolicy(p: Pick<CircuitPolicy, 'kinds'>): KindPolicy {
  return p.kinds ?? POLICY_DEFAULTS.kinds;
}

/** The throttle scope in force: the policy's, else `caller` with a quorum and `circuit` without. */
export function throttleScope(p: Pick<CircuitPolicy, 'kinds' | 'quorum'>): 'circuit' | 'caller' {
  return p.kinds?.throttleScope ?? (p.quorum == null ? 'circuit' : 'caller');
}

/** What an outcome counts as: a success, a failure, nothing, or a cool-down (`throttled` by default). */
export type Counted = CountAs | 'cool';

/** The outcome's kind: its own, else `success` / `failure` by `success`. */
export function kindOf(o: Pick<Outcome, 'kind' | 'success'>): OutcomeKind {
  return o.kind ?? (o.success ? 'success' : 'failure');
}

/**
 * What `o` counts as on `c` (docs/api.md "Outcome kinds"): the policy's `count_as` override,
 * else the table. `caller_deadline`: a failure when the caller gave the dependency a fair chance
 * (`deadlineMs >= min_deadline_ms`), else a (slow) success when the call already ran past the
 * window's slow-call duration, else nothing.
 */
export function countedAs(
  c: Pick<CircuitPolicy, 'kinds' | 'window'>,
  o: Pick<Outcome, 'kind' | 'success' | 'deadlineMs' | 'durationMs'>,
): Counted {
  const kind = kindOf(o);
  const rules = kindPolicy(c);
  const override = rules.countAs[kind];
  if (override !== undefined) return override;
  switch (kind) {
    case 'success':
    case 'rejected':
      return 'success';
    case 'failure':
      return 'failure';
    case 'cancelled':
      return 'ignore';
    case 'throttled':
      return 'cool';
    case 'caller_deadline':
      if (rules.minDeadlineMs !== null && o.deadlineMs !== undefined && o.deadlineMs >= rules.minDeadlineMs)
        return 'failure';
      return c.window !== null && isSlow(c.window, o.durationMs) ? 'success' : 'ignore';
  }
}

/** The circuit with its cool-downs set (members left out when none) and `coolDueAt` their soonest end. */
function withCooling(c: Circuit, coolUntil: EpochMs | null, coolCallers: readonly CoolCaller[]): Circuit {
  const { coolUntil: _u, coolCallers: _c, coolDueAt: _d, ...rest } = c;
  let due = coolUntil ?? Number.POSITIVE_INFINITY;
  for (const e of coolCallers) if (e[1] < due) due = e[1];
  if (due === Number.POSITIVE_INFINITY) return rest;
  return {
    ...rest,
    ...(coolUntil === null ? {} : { coolUntil }),
    ...(coolCallers.length === 0 ? {} : { coolCallers }),
    coolDueAt: due,
  };
}

/**
 * A throttled outcome on a closed circuit: a cool-down of the seconds asked (the circuit's
 * `timeoutSeconds` when none; at most `max_retry_after_seconds`; 0: none), for the circuit or
 * the named caller (`throttle_scope`; an anonymous outcome in caller scope cools no one).
 * An existing cool-down is only ever extended. Never moves `failureCount` or the state.
 */
export function coolDown(c: Circuit, o: Outcome, now: EpochMs): Step {
  const rules = kindPolicy(c);
  const seconds = Math.min(o.retryAfterSeconds ?? c.timeoutSeconds, rules.maxRetryAfterSeconds);
  if (seconds <= 0) return { circuit: c, transitions: NO_TRANSITIONS };
  const until = now + seconds * 1000;
  const event = {
    from: c.state,
    to: c.state,
    reason: 'cool_down' as const,
    at: now,
    until,
    retryAfterSeconds: seconds,
  };
  const callers = c.coolCallers ?? [];
  if (throttleScope(c) === 'circuit') {
    if ((c.coolUntil ?? 0) >= until) return { circuit: c, transitions: NO_TRANSITIONS };
    const ramp = c.ramp ?? null;
    const cooled = withCooling(c, until, callers);
    return {
      circuit: { ...cooled, ...(ramp === null ? {} : { rampUntil: until + ramp.seconds * 1000 }), updatedAt: now },
      transitions: [{ ...event, scope: 'circuit' }],
    };
  }
  if (o.caller === undefined) return { circuit: c, transitions: NO_TRANSITIONS };
  const found = callers.find((e) => e[0] === o.caller);
  if (found !== undefined && found[1] >= until) return { circuit: c, transitions: NO_TRANSITIONS };
  const others = callers.filter((e) => e !== found);
  const kept = others.length >= MAX_COOL_CALLERS ? dropSoonest(others) : others;
  const next = [...kept, [o.caller, until] as const].sort((a, b) => a[1] - b[1]);
  return {
    circuit: { ...withCooling(c, c.coolUntil ?? null, next), updatedAt: now },
    transitions: [{ ...event, scope: 'caller', callers: [o.caller] }],
  };
}

function dropSoonest(entries: readonly CoolCaller[]): CoolCaller[] {
  const sorted = [...entries].sort((a, b) => a[1] - b[1]);
  return sorted.slice(sorted.length - MAX_COOL_CALLERS + 1);
}

/**
 * The cool-downs whose time ran out by `now` ended, each a `cool_down_ended` event stamped at
 * its end (as open -> half-open is stamped at `openUntil`); the circuit as given when none is
 * due. A circuit-wide one's event names the ramp it ends into.
 */
export function endCoolDowns(c: Circuit, now: EpochMs): Step {
  if (c.coolDueAt == null || now < c.coolDueAt) return { circuit: c, transitions: NO_TRANSITIONS };
  const transitions: Transition[] = [];
  let coolUntil = c.coolUntil ?? null;
  if (coolUntil !== null && now >= coolUntil) {
    const ramp = c.ramp != null && c.rampUntil != null ? { rampUntil: c.rampUntil } : {};
    transitions.push({
      from: c.state,
      to: c.state,
      reason: 'cool_down_ended',
      at: coolUntil,
      scope: 'circuit',
      ...ramp,
    });
    coolUntil = null;
  }
  const callers = c.coolCallers ?? [];
  for (const [caller, until] of callers) {
    if (until > now) break; // soonest end first
    transitions.push({
      from: c.state,
      to: c.state,
      reason: 'cool_down_ended',
      at: until,
      scope: 'caller',
      callers: [caller],
    });
  }
  transitions.sort((a, b) => a.at - b.at);
  const left = callers.filter((e) => e[1] > now);
  return { circuit: { ...withCooling(c, coolUntil, left), updatedAt: now }, transitions };
}

/** The circuit without any cool-down or ramp (an operator's reset). */
export function withoutCoolingOrRamp(c: Circuit): Circuit {
  const { rampUntil: _r, ...rest } = withCooling(c, null, []);
  return rest;
}

/** Whether `c` has a cool-down or a ramp to judge at `now` (the admission's hot path skips both otherwise). */
export function mayCoolOrRamp(c: Circuit, now: EpochMs): boolean {
  return c.coolDueAt != null || (c.rampUntil != null && now < c.rampUntil);
}

/** A cool-down that refuses the call now: the circuit's, or the named caller's; null when none does. */
export function coolVerdict(c: Circuit, caller: string | undefined, now: EpochMs): Verdict | null {
  const until = c.coolUntil ?? null;
  if (until !== null && now < until) return { allowed: false, retryAt: until, cooled: { scope: 'circuit' } };
  if (caller === undefined || c.coolCallers == null) return null;
  const own = c.coolCallers.find((e) => e[0] === caller);
  if (own === undefined || now >= own[1]) return null;
  return { allowed: false, retryAt: own[1], scope: 'caller', cooled: { scope: 'caller' } };
}

/** The share a ramping circuit admits at `now`, in percent; 100 when not ramping. */
export function rampPercentOf(c: Circuit, now: EpochMs): number {
  const ramp = c.ramp ?? null;
  if (ramp === null) return 100;
  return rampPercent(c.rampUntil ?? null, ramp.seconds, ramp.startPercent, now);
}

/**
 * The slow start's say on a call: null when not ramping; else admitted with the share, or
 * refused (one draw from `random` under the share: `rampAdmits`).
 */
export function rampVerdict(c: Circuit, now: EpochMs, random: RandomSource): Verdict | null {
  const percent = rampPercentOf(c, now);
  if (percent >= 100) return null;
  if (rampAdmits(percent, random())) return { allowed: true, rampPercent: percent };
  return {
    allowed: false,
    retryAt: now + RAMP_RETRY_AFTER_MS,
    ramping: { percent, until: c.rampUntil! },
  };
}

/** A close from half-open, ramping when the policy says so: `rampUntil` set and named on the event. */
export function rampAfterClose(step: Step, now: EpochMs): Step {
  const ramp = step.circuit.ramp ?? null;
  if (ramp === null || step.transitions.length === 0) return step;
  const rampUntil = now + ramp.seconds * 1000;
  return {
    circuit: { ...step.circuit, rampUntil },
    transitions: step.transitions.map((t) => (t.to === 'closed' ? { ...t, rampUntil } : t)),
  };
}
