import { describe, expect, it } from 'vitest';
import { StaleCache } from '../../src/proxy/stale-cache.js';

async function keep(cache: StaleCache, key: string, body: string, now = 0) {
  const capture = cache.capture(key, 200, {}, () => now);
  capture?.chunk(Buffer.from(body));
  capture?.end();
}

describe('stale cache', () => {
  it('drops the oldest answers once the total byte bound is passed', async () => {
    const cache = new StaleCache({ maxAgeMs: 60_000, maxEntryBytes: 10, maxTotalBytes: 20 });
    await keep(cache, '/a', 'aaaaaaaaaa');
    await keep(cache, '/b', 'bbbbbbbbbb');
    await keep(cache, '/c', 'cccccccccc');
    expect(cache.get('/a', 0)).toBeNull();
    expect(cache.get('/c', 0)?.body.toString()).toBe('cccccccccc');
    expect(cache.bytes).toBe(20);
  });

  it('does not keep an answer larger than the entry bound', async () => {
    const cache = new StaleCache({ maxAgeMs: 60_000, maxEntryBytes: 4, maxTotalBytes: 100 });
    await keep(cache, '/big', 'too large');
    expect(cache.size).toBe(0);
  });

  it('forgets answers older than the age bound', async () => {
    const cache = new StaleCache({ maxAgeMs: 1_000, maxEntryBytes: 10, maxTotalBytes: 100 });
    await keep(cache, '/a', 'a', 0);
    expect(cache.get('/a', 1_001)).toBeNull();
    expect(cache.bytes).toBe(0);
  });

  it('refuses per-user answers', () => {
    expect(StaleCache.mayStore({ cookie: 's=1' }, 200, {})).toBe(false);
    expect(StaleCache.mayStore({}, 200, { 'cache-control': 'private, max-age=0' })).toBe(false);
    expect(StaleCache.mayStore({}, 200, { 'set-cookie': ['x=1'] })).toBe(false);
    expect(StaleCache.mayStore({}, 404, {})).toBe(false);
    expect(StaleCache.mayStore({}, 200, { 'cache-control': 'max-age=60' })).toBe(true);
  });

  it('never keeps answers that vary on request fields other than Accept-Encoding', () => {
    expect(StaleCache.mayStore({}, 200, { vary: 'Accept-Language' })).toBe(false);
    expect(StaleCache.mayStore({}, 200, { vary: 'accept-encoding, Cookie' })).toBe(false);
    expect(StaleCache.mayStore({}, 200, { vary: '*' })).toBe(false);
    expect(StaleCache.mayStore({}, 200, { vary: 'Accept-Encoding' })).toBe(true);
  });
});
