import { describe, expect, it } from 'vitest';
import { RetryBudget } from '../../../src/proxy/overload/upstream-overload.js';

describe('RetryBudget', () => {
  it('allows the floor (min_per_second x 10 s) with no requests at all', () => {
    const budget = new RetryBudget({ percent: 20, minPerSecond: 3 });
    let sent = 0;
    for (let i = 0; i < 100; i++) if (budget.tryRetry(0)) sent++;
    expect(sent).toBe(30);
  });

  it('allows percent of the requests of the last 10 s on top of the floor', () => {
    const budget = new RetryBudget({ percent: 20, minPerSecond: 0 });
    for (let i = 0; i < 1000; i++) budget.request(i * 5); // 1,000 requests over 5 s
    let sent = 0;
    for (let i = 0; i < 1000; i++) if (budget.tryRetry(5_000)) sent++;
    expect(sent).toBe(200);
  });

  it('forgets requests and retries older than 10 s', () => {
    const budget = new RetryBudget({ percent: 20, minPerSecond: 0 });
    for (let i = 0; i < 100; i++) budget.request(0);
    for (let i = 0; i < 20; i++) expect(budget.tryRetry(0)).toBe(true);
    expect(budget.tryRetry(9_999)).toBe(false);
    expect(budget.tryRetry(10_000)).toBe(false); // the requests went with the retries
    for (let i = 0; i < 10; i++) budget.request(10_000);
    expect(budget.tryRetry(10_000)).toBe(true);
    expect(budget.tryRetry(10_000)).toBe(true);
    expect(budget.tryRetry(10_000)).toBe(false);
  });

  it('keeps retries within percent plus the floor of the traffic when every attempt fails', () => {
    // Every request fails and asks for a retry: over 60 s of 100 requests per second, the
    // retries sent may add at most 20% plus 3 per second.
    const budget = new RetryBudget({ percent: 20, minPerSecond: 3 });
    let requests = 0;
    let retries = 0;
    for (let t = 0; t < 60_000; t += 10) {
      budget.request(t);
      requests++;
      if (budget.tryRetry(t)) retries++;
    }
    expect(retries).toBeGreaterThan(0.2 * requests); // the budget is used
    expect(retries).toBeLessThanOrEqual(0.2 * requests + 3 * 60);
  });

  it('allows nothing with percent 0 and no floor', () => {
    const budget = new RetryBudget({ percent: 0, minPerSecond: 0 });
    budget.request(0);
    expect(budget.tryRetry(0)).toBe(false);
  });
});
