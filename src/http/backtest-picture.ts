/**
 * A backtest's id names what it replayed (issue 31): the proposed policy, the range and the
 * grid objective, as base64url JSON. So `GET /circuits/{name}/backtest/{id}.svg` can draw the
 * picture on any worker, or after a restart, by replaying the circuit's history again when the
 * answer is not kept in this process (`BacktestCache`); the same range of the same history gives
 * the same answer. What a request's path says is outside input: the policy is checked as a
 * PATCH is (`mergedPolicy`), the times as whole numbers, and anything else is no id at all.
 */
import type { CircuitPolicy } from '../domain/policy.js';
import { policyToWire } from '../domain/policy-wire.js';
import { mergedPolicy } from './policy-routes.js';

/** What a picture's id carries: enough to run the backtest again. */
export interface PicturePlan {
  readonly circuit: string;
  readonly proposed: CircuitPolicy;
  readonly from: number;
  readonly to: number;
  readonly detectWithinSeconds: number;
}

/** Longest id written (a policy in wire form is far shorter); a longer one is never read. */
export const MAX_PICTURE_ID_LENGTH = 4_096;

export function pictureId(plan: PicturePlan): string {
  const json = JSON.stringify({
    c: plan.circuit,
    p: policyToWire(plan.proposed, true),
    f: plan.from,
    t: plan.to,
    d: plan.detectWithinSeconds,
  });
  return Buffer.from(json).toString('base64url');
}

const isWhole = (v: unknown): v is number => Number.isSafeInteger(v);

/** The plan an id of `circuit`'s carries, or null when the text is not one of ours (or another circuit's). */
export function picturePlan(id: string, circuit: string, defaults: CircuitPolicy): PicturePlan | null {
  if (id.length > MAX_PICTURE_ID_LENGTH || !/^[A-Za-z0-9_-]+$/.test(id)) return null;
  let raw: unknown;
  try {
    raw = JSON.parse(Buffer.from(id, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return null;
  const { c, p, f, t, d } = raw as Record<string, unknown>;
  if (c !== circuit) return null;
  if (!isWhole(f) || !isWhole(t) || f >= t || typeof d !== 'number' || !(d > 0)) return null;
  if (typeof p !== 'object' || p === null || Array.isArray(p)) return null;
  try {
    return {
      circuit,
      proposed: mergedPolicy(defaults, defaults, p as Record<string, unknown>),
      from: f,
      to: t,
      detectWithinSeconds: d,
    };
  } catch {
    return null; // a policy PATCH would refuse
  }
}
