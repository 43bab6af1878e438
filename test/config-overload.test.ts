import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfigText } from '../src/config.js';
import { concurrencySettings, retryBudgetSettings } from '../src/proxy/overload/overload-settings.js';

const upstream = (extra: string) =>
  `local_dc: d\nupstreams:\n  users:\n    nodes: [{ id: a, dc: d, url: "http://127.0.0.1:1" }]\n${extra
    .split('\n')
    .map((l) => `    ${l}`)
    .join('\n')}\n`;
const parse = (extra: string) => parseConfigText(upstream(extra), 'f').upstreams.users!;

describe('config: concurrency and retry_budget', () => {
  it('defaults: no limit, a retry budget of 20% plus 3 per second', () => {
    const u = parse('');
    expect(concurrencySettings(u)).toBeNull();
    expect(retryBudgetSettings(u.retry_budget)).toEqual({ percent: 20, minPerSecond: 3 });
  });

  it('reads an adaptive limit with its defaults', () => {
    expect(concurrencySettings(parse('concurrency: { limit: adaptive }'))).toEqual({
      limit: 'adaptive',
      initial: 20,
      min: 5,
      max: 1000,
      windowMs: 100,
      probeIntervalMs: 30_000,
      queueMs: 0,
      maxQueue: 1000,
    });
  });

  it('starts an adaptive limit within min..max when initial is left out', () => {
    expect(concurrencySettings(parse('concurrency: { limit: adaptive, max: 8, min: 2 }'))).toMatchObject({
      initial: 8,
    });
    expect(concurrencySettings(parse('concurrency: { limit: adaptive, min: 50 }'))).toMatchObject({ initial: 50 });
  });

  it('reads a fixed limit with a queue, and max_concurrent as a fixed limit that never waits', () => {
    expect(concurrencySettings(parse('concurrency: { limit: fixed, max: 10, queue_ms: 250, max_queue: 20 }'))).toEqual({
      limit: 'fixed',
      max: 10,
      queueMs: 250,
      maxQueue: 20,
    });
    expect(concurrencySettings(parse('max_concurrent: 7'))).toMatchObject({ limit: 'fixed', max: 7, queueMs: 0 });
  });

  it('refuses a bad block with a message naming the key', () => {
    const bad = (extra: string, message: RegExp) => {
      expect(() => parse(extra)).toThrow(ConfigError);
      expect(() => parse(extra)).toThrow(message);
    };
    bad(
      'concurrency: { limit: clever }',
      /f upstreams\.users\.concurrency\.limit: limit must be 'fixed' \(with max\) or 'adaptive'/,
    );
    bad('concurrency: { max: 5 }', /upstreams\.users\.concurrency\.limit: /);
    bad('concurrency: { limit: fixed }', /upstreams\.users\.concurrency\.max: required with limit: fixed/);
    bad(
      'concurrency: { limit: adaptive, min: 50, max: 10 }',
      /upstreams\.users\.concurrency\.min: must not exceed max \(10\)/,
    );
    bad(
      'concurrency: { limit: adaptive, initial: 2 }',
      /upstreams\.users\.concurrency\.initial: must be within min\.\.max \(5\.\.1000\)/,
    );
    bad('concurrency: { limit: adaptive, window: 5 }', /upstreams\.users\.concurrency: Unrecognized key: "window"/);
    bad('concurrency: { limit: fixed, max: 5, queue_ms: -1 }', /upstreams\.users\.concurrency\.queue_ms: /);
    bad('concurrency: { limit: fixed, max: 0 }', /upstreams\.users\.concurrency\.max: /);
    bad(
      'max_concurrent: 5\nconcurrency: { limit: fixed, max: 5 }',
      /upstreams\.users\.max_concurrent: set either max_concurrent or concurrency, not both/,
    );
    bad('retry_budget: { percent: 120 }', /upstreams\.users\.retry_budget\.percent: /);
    bad('retry_budget: { min_per_second: -1 }', /upstreams\.users\.retry_budget\.min_per_second: /);
    bad('retry_budget: { ratio: 0.2 }', /upstreams\.users\.retry_budget: Unrecognized key: "ratio"/);
  });
});
