import {
  ConcurrencyGate,
  type ConcurrencySettings,
  type Permit,
} from '../../../src/proxy/overload/concurrency-gate.js';

/**
 * A discrete-event simulation on an injected clock (ms): an open-loop caller sending Poisson
 * arrivals through a ConcurrencyGate (or none) to an upstream that serves at most `capacity`
 * requests at once in `latencyMs` (plus up to `jitter` of it) and queues the rest, first come
 * first served. The same shape as bench/overload/capacity-upstream.mjs, without sockets.
 */
export interface Phase {
  /** Offered load as a multiple of the upstream's capacity (capacity / latency). */
  readonly load: number;
  readonly seconds: number;
  /** Changes the upstream's latency from this phase on. */
  readonly latencyMs?: number;
}

export interface SimResult {
  /** Per 100 ms slot: time (s), limit, refused, admitted. */
  readonly slots: { t: number; limit: number; refused: number; admitted: number; inFlight: number }[];
  /** Per phase: offered, refused, admitted latencies (ms, sorted), answers within `goodMs`. */
  readonly phases: {
    offered: number;
    refused: number;
    latencies: number[];
    good: (withinMs: number) => number;
    seconds: number;
  }[];
}

export interface SimOptions {
  readonly capacity: number;
  readonly latencyMs: number;
  readonly jitter?: number;
  readonly seed?: number;
  /** Null: no limit at all (every request goes to the upstream). */
  readonly concurrency: ConcurrencySettings | null;
  /** The upstream's process stalls for `ms` every `everyMs` (from `everyMs` on): nothing is served or answered meanwhile. */
  readonly stall?: { readonly everyMs: number; readonly ms: number };
}

/** The first instant at or after `t` the upstream is not stalled. */
function thawed(t: number, stall: SimOptions['stall']): number {
  if (stall === undefined) return t;
  const k = Math.floor(t / stall.everyMs);
  return k >= 1 && t - k * stall.everyMs < stall.ms ? k * stall.everyMs + stall.ms : t;
}

export function simulate(o: SimOptions, phases: readonly Phase[]): SimResult {
  const random = mulberry32(o.seed ?? 1);
  let now = 0;
  const gate = o.concurrency === null ? null : new ConcurrencyGate(o.concurrency, () => now);
  const free = new Array<number>(o.capacity).fill(0);
  const done = new MinHeap<{ at: number; permit: Permit | null }>((a, b) => a.at - b.at);
  const slots: SimResult['slots'] = [];
  const out: SimResult['phases'] = [];
  let latencyMs = o.latencyMs;
  let slot = { t: 0, limit: gate?.limit ?? Infinity, refused: 0, admitted: 0, inFlight: 0 };
  let inFlight = 0;
  let start = 0;
  for (const phase of phases) {
    if (phase.latencyMs !== undefined) latencyMs = phase.latencyMs;
    const end = start + phase.seconds * 1000;
    const ratePerMs = (phase.load * o.capacity) / latencyMs;
    const latencies: number[] = [];
    let offered = 0;
    let refused = 0;
    for (let t = start + exp(random, ratePerMs); t < end; t += exp(random, ratePerMs)) {
      while (done.size > 0 && done.peek()!.at <= t) {
        const d = done.pop()!;
        now = d.at;
        inFlight--;
        if (d.permit !== null) {
          gate!.observe(d.permit, 'answered');
          gate!.release(d.permit);
        }
      }
      now = t;
      while (t >= slot.t * 1000 + 100) {
        slots.push(slot);
        slot = { t: slot.t + 0.1, limit: gate?.limit ?? Infinity, refused: 0, admitted: 0, inFlight };
      }
      offered++;
      const permit = gate === null ? null : gate.tryAcquire();
      if (gate !== null && permit === null) {
        refused++;
        slot.refused++;
        continue;
      }
      slot.admitted++;
      inFlight++;
      let k = 0;
      for (let i = 1; i < free.length; i++) if (free[i]! < free[k]!) k = i;
      const begin = thawed(Math.max(t, free[k]!), o.stall);
      const at = thawed(begin + latencyMs * (1 + (o.jitter ?? 0.05) * random()), o.stall);
      free[k] = at;
      latencies.push(at - t);
      done.push({ at, permit });
    }
    latencies.sort((a, b) => a - b);
    out.push({
      offered,
      refused,
      latencies,
      seconds: phase.seconds,
      good: (withinMs) => latencies.filter((l) => l <= withinMs).length,
    });
    start = end;
  }
  slots.push(slot);
  return { slots, phases: out };
}

/** The p-th percentile (0..100) of sorted values. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

export const adaptive = (over: Partial<ConcurrencySettings & { limit: 'adaptive' }> = {}): ConcurrencySettings => ({
  limit: 'adaptive',
  initial: 20,
  min: 5,
  max: 1000,
  windowMs: 100,
  probeIntervalMs: 30_000,
  queueMs: 0,
  maxQueue: 1000,
  ...over,
});

function exp(random: () => number, ratePerMs: number): number {
  return -Math.log(1 - random()) / ratePerMs;
}

/** A small seeded PRNG (mulberry32), so every run sees the same arrivals. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class MinHeap<T> {
  private readonly items: T[] = [];
  constructor(private readonly less: (a: T, b: T) => number) {}
  get size(): number {
    return this.items.length;
  }
  peek(): T | undefined {
    return this.items[0];
  }
  push(item: T): void {
    const a = this.items;
    a.push(item);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (this.less(a[i]!, a[p]!) >= 0) break;
      [a[i], a[p]] = [a[p]!, a[i]!];
      i = p;
    }
  }
  pop(): T | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop()!;
    if (a.length > 0) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && this.less(a[l]!, a[m]!) < 0) m = l;
        if (r < a.length && this.less(a[r]!, a[m]!) < 0) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m]!, a[i]!];
        i = m;
      }
    }
    return top;
  }
}
