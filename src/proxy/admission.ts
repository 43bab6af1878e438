import type { HeaderRecord } from './forward-headers.js';
import { bulkheadFull, unknownUpstream } from './proxy-errors.js';
import { parseProxyTarget, type ProxyTarget } from './target-path.js';
import type { Upstream } from './upstreams.js';

/**
 * Admission, before anything is forwarded: which upstream the raw target names, a bulkhead
 * slot under its `max_concurrent`, and the key identical concurrent reads share a call on.
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

/** One of an upstream's `max_concurrent` places, held from admission until the call is over; released once. */
export class Slot {
  private held = true;

  constructor(private readonly upstream: Upstream) {
    upstream.inFlight++;
  }

  release(): void {
    if (!this.held) return;
    this.held = false;
    this.upstream.inFlight--;
  }
}

/** 503 BULKHEAD_FULL when the upstream already has `max_concurrent` calls in flight. */
export function checkRoom(upstream: Upstream): void {
  const max = upstream.config.max_concurrent;
  if (max !== undefined && upstream.inFlight >= max) throw bulkheadFull(upstream, max);
}

/** A bulkhead slot, or 503 BULKHEAD_FULL. */
export function takeSlot(upstream: Upstream): Slot {
  checkRoom(upstream);
  return new Slot(upstream);
}

/** The coalescing key of a read that may share a call, or null (coalescing off, or the request must call alone). */
export function coalescingKey(upstream: Upstream, method: string, path: string, headers: HeaderRecord): string | null {
  return upstream.coalescer === null ? null : upstream.coalescer.keyOf(method, path, headers);
}
