import { expect, it } from 'vitest';
import { loopLagReader } from '../../../src/proxy/overload/loop-lag.js';
import { MIN_SAMPLES, VegasLimit } from '../../../src/proxy/overload/vegas-limit.js';

it('reads a pause of the event loop as the delay a caller would have felt', async () => {
  const read = loopLagReader();
  await new Promise((r) => setTimeout(r, 30));
  read(); // from here
  const until = performance.now() + 200;
  while (performance.now() < until); // a 200 ms pause
  await new Promise((r) => setTimeout(r, 30));
  // A caller arriving during the ~230 ms felt about 200 * 200 / 2 / 230 = 87 ms on average;
  // a loaded machine only adds pauses.
  expect(read()).toBeGreaterThan(50);
});

it("excuses latency that was this process's own delay, but measures the no-load latency raw", () => {
  const at = { now: 0 };
  let lag = 0;
  const limit = new VegasLimit({ initial: 20, min: 5, max: 100, windowMs: 100, probeIntervalMs: 30_000 }, 0, () => lag);
  const window = (rttMs: number) => {
    const samples = Array.from({ length: 20 }, (_, i) => limit.sent(at.now, i + 1));
    at.now += 100;
    for (const s of samples) limit.answered(s, s.startedAt + Math.max(rttMs, 100), false);
  };
  window(100); // the no-load latency: 100 ms
  const before = limit.limit;
  lag = 40;
  window(140); // 40 ms of it ours: no queueing, so the limit grows
  expect(limit.noLoad).toBe(100);
  expect(limit.limit).toBeGreaterThan(before);
});

it('skips a window that was mostly its own pause', () => {
  const limit = new VegasLimit({ initial: 20, min: 5, max: 100, windowMs: 100, probeIntervalMs: 30_000 }, 0, () => 60);
  const samples = Array.from({ length: MIN_SAMPLES }, (_, i) => limit.sent(0, i + 1));
  for (const s of samples) limit.answered(s, 100, false);
  expect(limit.noLoad).toBeNull();
  expect(limit.limit).toBe(20);
});
