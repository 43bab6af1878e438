import { afterEach, describe, expect, it, vi } from 'vitest';
import { StreamKeeper, backoffDelay } from '../../src/client/sse.js';
import { FakeTransport } from './fake-transport.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('reconnecting the event stream', () => {
  it('backs off exponentially with jitter, capped at the maximum', () => {
    expect([0, 1, 2, 3].map((a) => backoffDelay(a, 5_000, () => 1))).toEqual([100, 200, 400, 800]);
    expect(backoffDelay(10, 5_000, () => 1)).toBe(5_000);
    expect(backoffDelay(10, 5_000, () => 0)).toBe(2_500);
    expect(backoffDelay(1_000, 5_000, () => 1)).toBe(5_000);
  });

  it('retries an unreachable circuitlog at least every 5 s, then resumes with the last event id', async () => {
    vi.useFakeTimers();
    const transport = new FakeTransport();
    const attempts: number[] = [];
    const open = transport.openStream.bind(transport);
    transport.openStream = (lastId, onEvent) => {
      attempts.push(Date.now());
      return open(lastId, onEvent);
    };
    const downs = vi.fn();
    const keeper = new StreamKeeper(
      transport,
      { onOpen: () => undefined, onEvent: () => undefined, onReset: () => undefined, onDown: downs },
      5_000,
    );
    keeper.start();
    await vi.advanceTimersByTimeAsync(0);
    transport.stream!.emit({ circuit: 'a', from: 'closed', to: 'open', reason: 'failure_threshold_reached', at: 'x' });
    await vi.advanceTimersByTimeAsync(1_000); // a healthy stream, then circuitlog goes away
    transport.goDown();
    await vi.advanceTimersByTimeAsync(60_000);
    const gaps = attempts.slice(2).map((t, i) => t - attempts[i + 1]!);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(5_000);
    expect(gaps.filter((g) => g >= 2_500).length).toBeGreaterThan(5); // it did back off
    transport.up();
    await vi.advanceTimersByTimeAsync(5_000);
    expect(transport.stream?.lastEventId).toBe('1');
    keeper.stop();
  });
});
