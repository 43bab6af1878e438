import type { ServerResponse } from 'node:http';
import type { AppError } from '../domain/errors.js';
import type { HeaderRecord } from './forward-headers.js';
import type { Ending, Permit, ShedReason } from './overload/concurrency-gate.js';
import { bulkheadFull, concurrencyLimited, unknownUpstream } from './proxy-errors.js';
import { parseProxyTarget, type ProxyTarget } from './target-path.js';
import type { Upstream } from './upstreams.js';

/**
 * Admission, before anything is forwarded: which upstream the raw target names, a slot under
 * its concurrency limit (`max_concurrent`, or `concurrency`: fixed or adaptive), and the key
 * identical concurrent reads share a call on.
 */
export interface Admitted {
  readonly target: ProxyTarget;
  readonly upstream: Upstream;
}

/** The upstream a raw request target (before URL normalisation) names; 404 UPSTREAM_NOT_FOUND else. */
export function admitTarget(upstreams: ReadonlyMap<string, Upstream>, rawTarget: string): Admitted {
  const target = parseProxyTarget(rawTarget);
  const upstream = upstreams.get(target.upstream);
  if (upstream === undefined) throw unknownUpstream(target.upstream, upstreams);
  return { target, upstream };
}

/**
 * One of an upstream's concurrency places, held from admission until the call is over;
 * released once. Its `permit` is the limit's (null when the upstream has no limit).
 */
export class Slot {
  private held = true;

  constructor(
    private readonly upstream: Upstream,
    private readonly permit: Permit | null,
  ) {
    upstream.inFlight++;
  }

  /** The call's answer head came, or it ended without one: a latency sample for an adaptive limit. */
  observe(ending: Ending): void {
    this.upstream.overload.observe(this.permit, ending);
  }

  release(): void {
    if (!this.held) return;
    this.held = false;
    this.upstream.inFlight--;
    this.upstream.overload.release(this.permit);
  }
}

/**
 * A slot now; null when the limit is full and the request may wait for one (`queue_ms`,
 * `waitForSlot`); else the 503 (BULKHEAD_FULL for `max_concurrent`, CONCURRENCY_LIMITED).
 */
export function takeSlot(upstream: Upstream): Slot | null {
  const permit = upstream.overload.tryAdmit();
  if (permit !== 'limit') return new Slot(upstream, permit);
  if (upstream.overload.mayWait) return null;
  throw refusal(upstream, 'limit');
}

/**
 * Wait up to `queue_ms` for a slot, oldest first; the 503 when none came (or the queue is full).
 * Null when the caller hung up meanwhile (it left the queue; nothing was sent).
 */
export async function waitForSlot(upstream: Upstream, outgoing: ServerResponse | undefined): Promise<Slot | null> {
  const waiting = upstream.overload.gate!.wait();
  const leave = () => waiting.cancel();
  outgoing?.once('close', leave);
  const result = await waiting.result;
  outgoing?.removeListener('close', leave);
  if (result === 'cancelled') return null;
  if (typeof result === 'string') throw refusal(upstream, result);
  const slot = new Slot(upstream, result);
  if (outgoing?.destroyed) {
    slot.release(); // granted as the caller left
    return null;
  }
  return slot;
}

function refusal(upstream: Upstream, reason: ShedReason): AppError {
  upstream.overload.refused(reason);
  const max = upstream.config.max_concurrent;
  return max !== undefined ? bulkheadFull(upstream, max) : concurrencyLimited(upstream, reason);
}

/** The coalescing key of a read that may share a call, or null (coalescing off, or the request must call alone). */
export function coalescingKey(upstream: Upstream, method: string, path: string, headers: HeaderRecord): string | null {
  return upstream.coalescer === null ? null : upstream.coalescer.keyOf(method, path, headers);
}
