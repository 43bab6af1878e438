/**
 * The dependency's cool-down and the shared ramp in the client's view (issue 29, docs/client.md
 * "Why a call failed"): read from a circuit's JSON, and the ramp's share now, by the rule of
 * `domain/outcome-kind.ts` every decider uses.
 */

import { rampPercent } from '../domain/outcome-kind.js';
import type { CircuitJson } from './transport.js';
import type { ViewEntry } from './view.js';

/**
 * The cool-down and the ramp a circuit's JSON shows (`cool_until`, this caller's entry of
 * `cooling_callers`, `ramp_until`; issue 29), into the entry: a snapshot replaces what was known.
 */
export function coolAndRampFrom(entry: ViewEntry, json: CircuitJson, caller: string | undefined): void {
  const circuitWide = isoMs(json.cool_until);
  let mine: number | null = null;
  if (caller !== undefined && Array.isArray(json.cooling_callers))
    for (const item of json.cooling_callers as unknown[]) {
      const c = item as { caller?: unknown; cool_until?: unknown } | null;
      if (c?.caller === caller) mine = isoMs(c.cool_until);
    }
  entry.coolUntil = Math.max(circuitWide ?? 0, mine ?? 0);
  entry.coolScope = mine !== null && (circuitWide === null || mine > circuitWide) ? 'caller' : 'circuit';
  if ('ramp_until' in json) entry.rampUntil = isoMs(json.ramp_until);
}

function isoMs(value: unknown): number | null {
  const ms = typeof value === 'string' ? Date.parse(value) : Number.NaN;
  return Number.isFinite(ms) ? ms : null;
}

/** The ramp's share now on a circuit whose policy ramps (issue 29), or null at 100 %. */
export function rampShare(entry: ViewEntry, now: number): { percent: number; until: number | null } | null {
  const ramp = rampPolicy(entry.json?.ramp);
  if (ramp === null) return null;
  let until = entry.rampUntil;
  // A circuit-wide cool-down ends into the ramp: known before the event that names its end arrives
  // (a caller's own cool-down ends without one: the fleet never stopped).
  if (entry.coolScope === 'circuit' && entry.coolUntil > 0 && entry.coolUntil <= now)
    until = Math.max(until ?? 0, entry.coolUntil + ramp.seconds * 1000);
  const percent = rampPercent(until, ramp.seconds, ramp.startPercent, now);
  return percent >= 100 ? null : { percent, until };
}

/** A circuit JSON's `ramp` (`{seconds, start_percent}`), read leniently: anything unusable is no ramp. */
function rampPolicy(value: unknown): { seconds: number; startPercent: number } | null {
  const r = value as { seconds?: unknown; start_percent?: unknown } | null | undefined;
  if (typeof r !== 'object' || r === null) return null;
  const { seconds, start_percent: start = 10 } = r;
  if (typeof seconds !== 'number' || !(seconds >= 1 && seconds <= 3600)) return null;
  if (typeof start !== 'number' || !(start >= 1 && start <= 100)) return null;
  return { seconds, startPercent: start };
}
