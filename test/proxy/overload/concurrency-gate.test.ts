import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ConcurrencyGate, type ConcurrencySettings } from '../../../src/proxy/overload/concurrency-gate.js';
import { MIN_SAMPLES } from '../../../src/proxy/overload/vegas-limit.js';

const fixed = (max: number, queueMs = 0, maxQueue = 10): ConcurrencySettings => ({
  limit: 'fixed',
  max,
  queueMs,
  maxQueue,
});

describe('ConcurrencyGate', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('admits up to a fixed limit, refuses the next, and admits again after a release', () => {
    const gate = new ConcurrencyGate(fixed(2), () => 0);
    const a = gate.tryAcquire()!;
    expect(gate.tryAcquire()).not.toBeNull();
    expect(gate.tryAcquire()).toBeNull();
    expect(gate.inFlight).toBe(2);
    gate.release(a);
    expect(gate.inFlight).toBe(1);
    expect(gate.tryAcquire()).not.toBeNull();
  });

  it('counts a permit released twice once', () => {
    const gate = new ConcurrencyGate(fixed(2), () => 0);
    const a = gate.tryAcquire()!;
    gate.tryAcquire();
    gate.release(a);
    gate.release(a);
    expect(gate.inFlight).toBe(1);
  });

  it('refuses at once with reason limit when queue_ms is 0', async () => {
    const gate = new ConcurrencyGate(fixed(1), () => 0);
    gate.tryAcquire();
    expect(await gate.wait().result).toBe('limit');
  });

  it('hands freed slots to waiters oldest first', async () => {
    const gate = new ConcurrencyGate(fixed(1, 1_000), () => 0);
    const first = gate.tryAcquire()!;
    const order: string[] = [];
    const a = gate.wait().result.then((p) => order.push(typeof p === 'string' ? p : 'a'));
    const b = gate.wait().result.then((p) => order.push(typeof p === 'string' ? p : 'b'));
    expect(gate.tryAcquire()).toBeNull(); // waiters come first
    gate.release(first);
    await a;
    expect(order).toEqual(['a']);
    expect(gate.queued).toBe(1);
    vi.advanceTimersByTime(1_000);
    await b;
    expect(order).toEqual(['a', 'queue_timeout']);
  });

  it('refuses with queue_full past max_queue waiters', async () => {
    const gate = new ConcurrencyGate(fixed(1, 1_000, 2), () => 0);
    gate.tryAcquire();
    gate.wait();
    gate.wait();
    expect(await gate.wait().result).toBe('queue_full');
    expect(gate.queued).toBe(2);
  });

  it('lets a cancelled waiter leave the queue', async () => {
    const gate = new ConcurrencyGate(fixed(1, 1_000), () => 0);
    const first = gate.tryAcquire()!;
    const w = gate.wait();
    w.cancel();
    expect(gate.queued).toBe(0);
    gate.release(first);
    expect(gate.inFlight).toBe(0);
    expect(await w.result).toBe('cancelled');
  });

  it('feeds the adaptive limit and reports its changes', () => {
    let now = 0;
    const limits: number[] = [];
    const gate = new ConcurrencyGate(
      {
        limit: 'adaptive',
        initial: 20,
        min: 5,
        max: 100,
        windowMs: 100,
        probeIntervalMs: 30_000,
        queueMs: 0,
        maxQueue: 0,
      },
      () => now,
      (l) => limits.push(l),
    );
    for (let w = 0; w < 3; w++) {
      const permits = Array.from({ length: Math.max(MIN_SAMPLES, gate.limit) }, () => gate.tryAcquire()).filter(
        (p) => p !== null,
      );
      now += 100;
      for (const p of permits) {
        gate.observe(p, 'answered');
        gate.release(p);
      }
    }
    expect(limits.length).toBeGreaterThan(0);
    expect(gate.limit).toBeGreaterThan(20);
    expect(gate.noLoadMs).toBe(100);
  });

  it('does not feed the adaptive limit with unjudged endings', () => {
    let now = 0;
    const gate = new ConcurrencyGate(
      {
        limit: 'adaptive',
        initial: 20,
        min: 5,
        max: 100,
        windowMs: 100,
        probeIntervalMs: 30_000,
        queueMs: 0,
        maxQueue: 0,
      },
      () => now,
    );
    const permits = Array.from({ length: 20 }, () => gate.tryAcquire()!);
    now += 100;
    for (const p of permits) {
      gate.observe(p, 'unjudged');
      gate.observe(p, 'answered'); // only the first observation counts
      gate.release(p);
    }
    expect(gate.noLoadMs).toBeNull();
    expect(gate.limit).toBe(20);
  });
});
