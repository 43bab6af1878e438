import { describe, expect, it } from 'vitest';
import { UpstreamOverload } from '../../../src/proxy/overload/upstream-overload.js';
import { concurrencySettings } from '../../../src/proxy/overload/overload-settings.js';

function withHooks(o: UpstreamOverload) {
  const seen = { shed: [] as string[], retry: [] as string[] };
  o.hooks = { shed: (_u, reason) => seen.shed.push(reason), retry: (_u, result) => seen.retry.push(result) };
  return seen;
}

describe('UpstreamOverload', () => {
  it('has no gate without max_concurrent or concurrency', () => {
    const o = new UpstreamOverload('users', concurrencySettings({}), { percent: 20, minPerSecond: 3 }, () => 0);
    expect(o.gate).toBeNull();
    expect(o.tryAdmit()).toBeNull();
  });

  it('reads max_concurrent as a fixed limit that never waits', () => {
    const o = new UpstreamOverload(
      'users',
      concurrencySettings({ max_concurrent: 1 }),
      { percent: 20, minPerSecond: 3 },
      () => 0,
    );
    expect(o.tryAdmit()).not.toBe('limit');
    expect(o.tryAdmit()).toBe('limit');
    expect(o.mayWait).toBe(false);
  });

  it('starts an adaptive limit at 20 clamped into min..max', () => {
    const settings = concurrencySettings({
      concurrency: {
        limit: 'adaptive',
        min: 2,
        max: 8,
        window_ms: 100,
        probe_interval_ms: 30_000,
        queue_ms: 0,
        max_queue: 10,
      },
    });
    expect(new UpstreamOverload('users', settings, { percent: 20, minPerSecond: 3 }, () => 0).gate!.limit).toBe(8);
  });

  it('counts retries sent and refused by the budget', () => {
    const o = new UpstreamOverload('users', null, { percent: 50, minPerSecond: 0 }, () => 0);
    const seen = withHooks(o);
    o.requestSent();
    o.requestSent();
    expect(o.retryAllowed()).toBe(true);
    expect(o.retryAllowed()).toBe(false);
    expect(seen.retry).toEqual(['sent', 'budget_exhausted']);
  });

  it('reports a refusal with its reason', () => {
    const o = new UpstreamOverload('users', null, { percent: 20, minPerSecond: 3 }, () => 0);
    const seen = withHooks(o);
    o.refused('queue_timeout');
    expect(seen.shed).toEqual(['queue_timeout']);
  });
});
