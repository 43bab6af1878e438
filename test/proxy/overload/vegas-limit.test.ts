import { describe, expect, it } from 'vitest';
import { MIN_SAMPLES, VegasLimit, type VegasSettings } from '../../../src/proxy/overload/vegas-limit.js';

const SETTINGS: VegasSettings = { initial: 20, min: 5, max: 100, windowMs: 100, probeIntervalMs: 10_000 };

/**
 * Drive `limit` through `windows` sampling windows of 100 ms, each closed by its last answer.
 * Each window sees `inFlight(limit)` requests out (default: the whole limit), answered after
 * `rttMs(limit)`; `shed` marks the limit as refusing (demand over it). Returns the limit after each.
 */
function run(
  limit: VegasLimit,
  at: { now: number },
  windows: number,
  rttMs: (l: number) => number,
  o: { inFlight?: (l: number) => number; shed?: boolean } = {},
): number[] {
  const seen: number[] = [];
  for (let w = 0; w < windows; w++) {
    const out = o.inFlight?.(limit.limit) ?? limit.limit;
    const rtt = rttMs(limit.limit);
    const n = Math.max(MIN_SAMPLES, out);
    if (o.shed) limit.refused();
    if (limit.probing) {
      // requests sent during the probe, answered one rtt later
      const probe = Array.from({ length: n }, (_, i) => limit.sent(at.now, Math.min(i + 1, out)));
      at.now += rtt;
      for (const s of probe) limit.answered(s, at.now, false);
    } else {
      const end = at.now + SETTINGS.windowMs;
      for (let i = 0; i < n; i++) {
        const answeredAt = i === n - 1 ? end : at.now + 1;
        limit.answered(limit.sent(answeredAt - rtt, Math.min(i + 1, out)), answeredAt, false);
      }
      at.now = end;
    }
    seen.push(limit.limit);
  }
  return seen;
}

/** An upstream that serves `capacity` at once in `baseMs`: latency grows with the queue. */
const queueing = (capacity: number, baseMs: number) => (l: number) =>
  l <= capacity ? baseMs : (baseMs * l) / capacity;

describe('VegasLimit', () => {
  it('starts at initial', () => {
    expect(new VegasLimit(SETTINGS, 0).limit).toBe(20);
  });

  it('grows while the latency stays at the no-load latency', () => {
    const limit = new VegasLimit(SETTINGS, 0);
    const seen = run(limit, { now: 0 }, 5, () => 20);
    expect(seen[4]).toBeGreaterThan(28); // 20 * 1.1^4
    for (let i = 1; i < seen.length; i++) expect(seen[i]!).toBeGreaterThanOrEqual(seen[i - 1]!);
  });

  it('settles within 20% above the capacity when queueing shows', () => {
    const limit = new VegasLimit(SETTINGS, 0);
    const seen = run(limit, { now: 0 }, 40, queueing(32, 20));
    for (const l of seen.slice(20)) {
      expect(l).toBeGreaterThanOrEqual(32);
      expect(l).toBeLessThanOrEqual(38);
    }
  });

  it('shrinks from a limit far over the capacity', () => {
    const at = { now: 0 };
    const limit = new VegasLimit({ ...SETTINGS, initial: 32 }, 0);
    run(limit, at, 1, () => 20); // the no-load latency, measured at the start
    const seen = run(limit, at, 30, (l) => (20 * Math.max(l, 90)) / 32, { shed: true }); // 90 queued
    expect(seen[0]).toBeLessThan(32);
  });

  it('settles within 20% of the capacity from a limit far over it', () => {
    const at = { now: 0 };
    const limit = new VegasLimit({ ...SETTINGS, initial: 90 }, 0);
    const seen: number[] = [];
    for (let i = 0; i < 100; i++) {
      const [l] = run(limit, at, 1, queueing(32, 20), { shed: true }); // the first window is measured under load
      if (!limit.probing) seen.push(l!); // a probe holds half the limit for one window
    }
    expect(seen.length).toBeGreaterThan(90);
    for (const l of seen.slice(50)) {
      expect(l).toBeGreaterThanOrEqual(32 * 0.8);
      expect(l).toBeLessThanOrEqual(32 * 1.2);
    }
  });

  it('never goes below min nor above max', () => {
    const at = { now: 0 };
    const low = new VegasLimit({ ...SETTINGS, min: 8, probeIntervalMs: 600_000 }, 0);
    run(low, at, 1, () => 20);
    const slow = run(low, at, 30, () => 200, { shed: true }); // ten times the no-load latency
    expect(Math.min(...slow)).toBe(8);
    const high = new VegasLimit({ ...SETTINGS, max: 40 }, 0);
    expect(Math.max(...run(high, { now: 0 }, 30, () => 20))).toBe(40);
  });

  it('does not shrink below twice the peak in flight while it refuses nothing', () => {
    const at = { now: 0 };
    const limit = new VegasLimit({ ...SETTINGS, initial: 60 }, 0);
    run(limit, at, 1, () => 20, { inFlight: () => 20 });
    const seen = run(limit, at, 30, () => 60, { inFlight: () => 50 }); // latency tripled: a pause, not the upstream
    expect(Math.min(...seen)).toBe(60);
    const refusing = run(limit, at, 30, () => 60, { inFlight: () => 50, shed: true });
    expect(refusing[29]).toBeLessThan(30);
  });

  it('holds when fewer than three quarters of the limit are in flight (the caller sets the pace)', () => {
    const limit = new VegasLimit(SETTINGS, 0);
    expect(run(limit, { now: 0 }, 10, () => 20, { inFlight: () => 14 })).toEqual(new Array(10).fill(20));
  });

  it('shrinks by a tenth when a window had a timeout', () => {
    const limit = new VegasLimit(SETTINGS, 0);
    limit.refused();
    const samples = Array.from({ length: MIN_SAMPLES }, (_, i) => limit.sent(0, i + 1));
    for (const [i, s] of samples.entries()) limit.answered(s, 150, i === 0);
    expect(limit.limit).toBe(18);
  });

  it('re-measures the no-load latency from a quiet window, without a probe', () => {
    const at = { now: 0 };
    const limit = new VegasLimit(SETTINGS, 0);
    run(limit, at, 3, () => 20);
    at.now += 10_000;
    run(limit, at, 1, () => 50, { inFlight: () => 5 }); // quiet, and the upstream got slower
    expect(limit.noLoad).toBe(50);
    expect(limit.probing).toBe(false);
  });

  it('probes at half the limit after a saturated probe interval, then re-measures', () => {
    const at = { now: 0 };
    const limit = new VegasLimit(SETTINGS, 0);
    run(limit, at, 30, queueing(32, 20), { shed: true });
    run(limit, at, 300, queueing(32, 40), { shed: true }); // twice as slow while saturated: looks like queueing
    expect(limit.noLoad).toBeGreaterThan(38);
    expect(limit.limit).toBeGreaterThanOrEqual(32 * 0.8);
    expect(limit.limit).toBeLessThanOrEqual(32 * 1.2);
  });

  it('never probes while the limit refuses nothing', () => {
    const at = { now: 0 };
    const limit = new VegasLimit(SETTINGS, 0);
    let probed = false;
    for (let i = 0; i < 300; i++) {
      run(limit, at, 1, queueing(32, 20));
      probed ||= limit.probing;
    }
    expect(probed).toBe(false);
  });

  it('grows at once for demand over the limit while nothing queues, a quarter per window at most', () => {
    const at = { now: 0 };
    const limit = new VegasLimit(SETTINGS, 0);
    run(limit, at, 2, () => 20, { inFlight: () => 5 }); // quiet, at the no-load latency
    let grown = 0;
    while (limit.grow()) grown++;
    expect(grown).toBe(5); // 20 -> 25
    expect(limit.limit).toBe(25);
  });

  it('does not grow on demand when the last window queued', () => {
    const at = { now: 0 };
    const limit = new VegasLimit(SETTINGS, 0);
    run(limit, at, 1, () => 20);
    run(limit, at, 1, () => 30);
    expect(limit.grow()).toBe(false);
  });

  it('holds half the limit, never min, while probing', () => {
    const at = { now: 0 };
    const limit = new VegasLimit({ ...SETTINGS, probeIntervalMs: 1_000 }, 0);
    const seen: number[] = [];
    for (let i = 0; i < 40 && !limit.probing; i++) seen.push(...run(limit, at, 1, queueing(32, 20), { shed: true }));
    expect(limit.probing).toBe(true);
    const before = seen[seen.length - 2]!;
    expect(limit.limit).toBe(Math.floor(before / 2));
    expect(limit.limit).toBeGreaterThan(SETTINGS.min);
    const probe = Array.from({ length: MIN_SAMPLES }, (_, i) => limit.sent(at.now, i + 1));
    for (const s of probe) limit.answered(s, at.now + 20, false);
    expect(limit.probing).toBe(false);
    expect(limit.noLoad).toBe(20);
    expect(limit.limit).toBe(before);
  });

  it('does not shrink for one window of latency at a limit that held (a stall), but for queueing that lasts', () => {
    const at = { now: 0 };
    const limit = new VegasLimit({ ...SETTINGS, initial: 32, max: 33 }, 0);
    run(limit, at, 4, () => 20, { shed: true }); // the no-load latency; the limit at max, held
    expect(limit.limit).toBe(33);
    const stalled = run(limit, at, 1, () => 80, { shed: true }); // one window four times as slow
    expect(stalled).toEqual([33]);
    run(limit, at, 2, () => 20, { shed: true });
    const lasting = run(limit, at, 2, () => 80, { shed: true }); // two of the last three windows
    expect(lasting[0]).toBe(33);
    expect(lasting[1]).toBeLessThan(33);
  });

  it('grows on demand only after a quiet window, not after a busy one', () => {
    const at = { now: 0 };
    const limit = new VegasLimit(SETTINGS, 0);
    run(limit, at, 2, () => 20); // busy windows at the no-load latency: the limit grew by itself
    expect(limit.grow()).toBe(false);
    run(limit, at, 1, () => 20, { inFlight: () => 5 });
    expect(limit.grow()).toBe(true);
  });
});
