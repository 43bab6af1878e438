/**
 * Idle deletion's rule (limits.idle_circuit_days), once for every store: a circuit may be
 * deleted only when it is unused and holds nothing a later call would miss. A circuit is
 * recreated from the policy on its next call, so what it holds beyond that must be gone.
 */
import { isolatedCallerCount } from './caller-state.js';
import { activeLeases } from './state-change.js';
import { currentThrottleProbability } from './throttle.js';
import type { Circuit, EpochMs } from './types.js';

/**
 * Whether `c` is idle at `now`: closed by its rules, not forced, unchanged since before
 * `before` (epoch ms), with no isolated caller (it waits for its own probe, however long
 * that takes), no probe lease in force and no throttle refusing calls.
 */
export function isIdleCircuit(c: Circuit, before: EpochMs, now: EpochMs): boolean {
  if (c.state !== 'closed' || c.forcedState !== null || c.updatedAt >= before) return false;
  if (c.callers !== undefined && isolatedCallerCount(c.callers) > 0) return false;
  if (activeLeases(c, now).length > 0) return false;
  return c.throttle === null || currentThrottleProbability(c.throttle, c.throttleState, now) === 0;
}
