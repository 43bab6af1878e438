import type { z } from '@hono/zod-openapi';
import type { Circuit, Verdict } from '../domain/circuit.js';
import { activeLeases, effectiveTimeoutSeconds, refresh, windowStats, type Shadow } from '../domain/circuit.js';
import { kindsDisplay, policyToWire } from '../domain/policy-wire.js';
import { rampPercentOf } from '../domain/outcome-rules.js';
import { kindCounts } from '../domain/window.js';
import { throttleCounts, throttleProbability } from '../domain/throttle.js';
import { callerEntries, isolatedCallers } from '../domain/caller-state.js';
import type { CircuitSchema } from './schemas.js';

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** The wire form of a circuit: snake_case, ISO 8601 UTC times with milliseconds. */
export function circuitJson(c: Circuit, now: number): z.infer<typeof CircuitSchema> {
  const stats = windowStats(c, now);
  const counts = c.throttle === null ? null : throttleCounts(c.throttle, c.throttleState, now);
  const { history: _history, ...policy } = policyToWire(c, true);
  return {
    id: c.id,
    name: c.name,
    state: c.state,
    failure_count: c.failureCount,
    ...policy, // failure_threshold to throttle (and quorum when set), in this order
    throttle: policy.throttle ?? null,
    throttle_probability:
      counts === null || c.state !== 'closed' || c.forcedState !== null
        ? 0
        : throttleProbability(c.throttle!.k, counts),
    throttle_window: counts,
    quorum: policy.quorum ?? null,
    ...kindsDisplay(c), // count_as to ramp (issue 29): every one, resolved
    history: c.history !== false,
    isolated_callers: isolatedCallers(callerEntries(c)).map((e) => ({
      caller: e[0],
      failures: e[1],
      open_until: new Date(e[4]!).toISOString(),
      probe_until: iso(e[6]),
    })),
    cool_until: iso(c.coolUntil != null && c.coolUntil > now ? c.coolUntil : null),
    cooling_callers: (c.coolCallers ?? [])
      .filter((e) => e[1] > now)
      .map((e) => ({ caller: e[0], cool_until: new Date(e[1]).toISOString() })),
    ramp_until: iso(ramping(c, now) ? c.rampUntil! : null),
    ramp_percent: roundedRampPercent(c, now),
    effective_timeout_seconds: effectiveTimeoutSeconds(c),
    reopen_count: c.reopenCount,
    window_stats: windowStatsJson(stats),
    window_kinds: c.window === null ? null : kindCounts(c.window, c.windowState, now),
    probes_in_flight: c.state === 'half_open' ? activeLeases(c, now).length : 0,
    open_until: iso(c.openUntil),
    half_open_at: iso(c.halfOpenAt),
    last_failure_at: iso(c.lastFailureAt),
    created_at: new Date(c.createdAt).toISOString(),
    updated_at: new Date(c.updatedAt).toISOString(),
    ...(c.shadow == null ? {} : { shadow: shadowJson(c.shadow, now) }), // issue 31: only when set
  };
}

/** A shadow policy's wire form (issue 31): its policy, its state as of now and its counts. */
function shadowJson(shadow: Shadow, now: number): NonNullable<z.infer<typeof CircuitSchema>['shadow']> {
  const c = refresh(shadow.circuit, now).circuit;
  const stats = windowStats(c, now);
  const wire = policyToWire(c, true);
  return {
    // As the circuit shows its own policy: every field, resolved.
    policy: { ...wire, throttle: wire.throttle ?? null, quorum: wire.quorum ?? null, ...kindsDisplay(c) },
    state: c.state,
    open_until: iso(c.openUntil),
    since: new Date(shadow.since).toISOString(),
    counts: { outcomes: shadow.outcomes, refused: shadow.refused, openings: shadow.openings },
    window_stats: windowStatsJson(stats),
  };
}

/** A window's live figures in wire form (the circuit's and its shadow's); null without a window. */
function windowStatsJson(stats: ReturnType<typeof windowStats>) {
  return stats === null
    ? null
    : {
        calls: stats.calls,
        failures: stats.failures,
        slow_calls: stats.slowCalls,
        failure_rate: stats.failureRate,
        slow_call_rate: stats.slowCallRate,
      };
}

/** Whether the circuit is in its slow start at `now` (closed, a ramp policy, before `rampUntil`). */
function ramping(c: Circuit, now: number): boolean {
  return c.ramp != null && c.rampUntil != null && now < c.rampUntil && c.state === 'closed';
}

/** The share admitted now, in percent with 2 decimals (100 when not ramping). */
function roundedRampPercent(c: Circuit, now: number): number {
  return ramping(c, now) ? Math.round(rampPercentOf(c, now) * 100) / 100 : 100;
}

/**
 * Memoise a circuit's serialisation per circuit object. The store hands out the same
 * object until the circuit changes, so a healthy circuit is serialised once, not per
 * request. Half-open circuits are not kept: their `probes_in_flight` depends on `now`.
 * A throttle's counts expire by the epoch second, so a circuit with one is kept for the
 * second it was serialised in (time windows are not kept, as before).
 */
function memoPerCircuit(serialize: (c: Circuit, now: number) => string): (c: Circuit, now: number) => string {
  const memo = new WeakMap<Circuit, string>();
  const perSecond = new WeakMap<Circuit, { second: number; text: string }>();
  const perShare = new WeakMap<Circuit, { percent: number; text: string }>();
  return (c, now) => {
    // A shadow's state and counts change with time and outcomes of their own (issue 31): not kept.
    if (c.state === 'half_open' || c.window?.type === 'time' || c.shadow != null) return serialize(c, now);
    // A cool-down that ran out shows as ended before its write: not kept (issue 29).
    if (c.coolDueAt != null && now >= c.coolDueAt) return serialize(c, now);
    // Ramping: the text holds the share, so it is kept while the share (2 decimals) is the same.
    if (ramping(c, now)) {
      const percent = roundedRampPercent(c, now);
      const kept = perShare.get(c);
      if (kept !== undefined && kept.percent === percent) return kept.text;
      const text = serialize(c, now);
      perShare.set(c, { percent, text });
      return text;
    }
    if (c.throttle === null) {
      let text = memo.get(c);
      if (text === undefined) memo.set(c, (text = serialize(c, now)));
      return text;
    }
    const second = Math.floor(now / 1000);
    const kept = perSecond.get(c);
    if (kept !== undefined && kept.second === second) return kept.text;
    const text = serialize(c, now);
    perSecond.set(c, { second, text });
    return text;
  };
}

/**
 * Under a forced-closed circuit (detect-only): whether the rules would have refused this
 * call, and how; `{}` on any other circuit.
 */
export function wouldRefuseJson(
  c: Circuit,
  verdict: Verdict,
): { would_refuse?: boolean; would_refuse_scope?: 'circuit' | 'caller'; would_retry_at?: string } {
  if (c.forcedState !== 'closed' || !verdict.allowed) return {};
  const w = verdict.wouldRefuse;
  if (w === undefined) return { would_refuse: false };
  return { would_refuse: true, would_refuse_scope: w.scope, would_retry_at: new Date(w.retryAt).toISOString() };
}

/** The `GET /allowed` answer under a forced-closed circuit (not memoised: it depends on the caller and `now`). */
export function detectOnlyText(c: Circuit, verdict: Verdict, now: number): string {
  return `${JSON.stringify({ allowed: true, state: c.state, ...wouldRefuseJson(c, verdict), circuit: circuitJson(c, now) })}\n`;
}

/** `JSON.stringify(circuitJson(c, now))` and a newline (as every JSON answer), memoised. */
export const circuitText = memoPerCircuit((c, now) => `${JSON.stringify(circuitJson(c, now))}\n`);

/** The `GET /allowed` answer for an admitted call, memoised. */
export const allowedText = memoPerCircuit((c, now) =>
  ramping(c, now)
    ? `{"allowed":true,"state":"${c.state}","ramp_percent":${roundedRampPercent(c, now)},"circuit":${JSON.stringify(circuitJson(c, now))}}\n`
    : `{"allowed":true,"state":"${c.state}","circuit":${JSON.stringify(circuitJson(c, now))}}\n`,
);

/**
 * The `GET /allowed` answer for an admitted call: with `shadow_would_refuse: true` when the
 * circuit's shadow policy would refuse it (issue 31; not memoised), else as always.
 */
export function admittedText(c: Circuit, verdict: Verdict, now: number, shadowRefuses: boolean): string {
  if (shadowRefuses) {
    const ramp = c.forcedState === null && ramping(c, now) ? { ramp_percent: roundedRampPercent(c, now) } : {};
    const answer = {
      allowed: true,
      state: c.state,
      ...ramp,
      ...wouldRefuseJson(c, verdict),
      shadow_would_refuse: true,
      circuit: circuitJson(c, now),
    };
    return `${JSON.stringify(answer)}\n`;
  }
  return c.forcedState === 'closed' ? detectOnlyText(c, verdict, now) : allowedText(c, now);
}
