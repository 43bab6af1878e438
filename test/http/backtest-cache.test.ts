import { describe, expect, it } from 'vitest';
import { BacktestCache, type LabResult } from '../../src/http/backtest-cache.js';

const result = (id: string, circuit = 'db') => ({ id, circuit }) as unknown as LabResult;

describe('the kept backtest answers', () => {
  it('evicts the oldest answers once their bytes pass the bound', () => {
    const cache = new BacktestCache(16, 1_000);
    cache.put(result('a'), 400);
    cache.put(result('b'), 400);
    cache.put(result('c'), 400); // 1,200 bytes: 'a' goes
    expect(cache.get('a', 'db')).toBeNull();
    expect(cache.get('b', 'db')).not.toBeNull();
    expect(cache.size()).toEqual({ results: 2, bytes: 800 });
  });

  it('keeps no answer larger than the whole bound, and evicts nothing for it', () => {
    const cache = new BacktestCache(16, 1_000);
    cache.put(result('a'), 400);
    cache.put(result('big'), 1_001);
    expect(cache.get('big', 'db')).toBeNull();
    expect(cache.size()).toEqual({ results: 1, bytes: 400 });
  });

  it('answers a kept id only for its own circuit', () => {
    const cache = new BacktestCache();
    cache.put(result('a', 'db'), 10);
    expect(cache.get('a', 'other')).toBeNull();
    expect(cache.get('a', 'db')).not.toBeNull();
  });
});
