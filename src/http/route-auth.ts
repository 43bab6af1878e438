/**
 * The credential checks a route makes itself, where the request guard (which knows only the
 * method and the path) cannot: the scope a PATCH body needs, the circuits a batch names, and
 * `max_new_circuits` before a write that would create circuits (issue 30).
 */
import type { Context } from 'hono';
import { circuitPermitted, hasScope, type Identity, type Scope } from '../auth/identity.js';
import { circuitNotPermitted, insufficientScope, newCircuitsExhausted } from '../auth/refusal.js';
import { identityOf } from '../auth/request-identity.js';
import type { BreakerService } from '../service/breaker-service.js';

/** A 403 insufficient-scope unless the request's identity has `scope`. */
export function requireScope(c: Context, scope: Scope, route: string): void {
  if (!hasScope(identityOf(c), scope)) throw insufficientScope(scope, c.req.method, route);
}

/** A 403 circuit-not-permitted for the first name outside the identity's `circuits` patterns. */
export function requireCircuits(c: Context, names: readonly string[]): void {
  const identity = identityOf(c);
  if (identity.circuits === null) return;
  const outside = names.find((name) => !circuitPermitted(identity, name));
  if (outside !== undefined) throw circuitNotPermitted(outside);
}

/**
 * `max_new_circuits` (route-kit.ts `newCircuitQuota` asks this only of an identity with a
 * bound): a 403 if the write that may create `names` would take the identity past it. The
 * rule: the circuits counted are the stored ones its `circuits` patterns match (every circuit
 * when it has none), so a bound of 100 on `payments/*` stops the 101st `payments/` circuit
 * whoever created the others. Checked before the write: requests of one credential that
 * create circuits at the same moment may pass it by those in flight.
 */
export async function checkQuota(
  identity: Identity,
  max: number,
  breaker: BreakerService,
  names: readonly string[],
): Promise<void> {
  const created = await breaker.missing(names);
  if (created.length === 0) return;
  // Counted only as far as the bound: what is held past it does not matter.
  const held = await breaker.countMatching(identity.circuits, max + 1);
  if (held + created.length > max) throw newCircuitsExhausted(created[Math.max(0, max - held)] ?? created[0]!, max);
}
