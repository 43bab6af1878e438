import { describe, expect, it } from 'vitest';
import { credentialFields } from '../../src/proxy/cache-rules.js';
import { StaleCache, type StaleCacheLimits } from '../../src/proxy/stale-cache.js';

const credentials = credentialFields(['x-api-key']);

function cacheOf(limits: Partial<StaleCacheLimits> = {}): StaleCache {
  return new StaleCache({ maxAgeMs: 60_000, maxEntryBytes: 1000, maxTotalBytes: 100_000, credentials, ...limits });
}

function keep(
  cache: StaleCache,
  key: string,
  body: string,
  now = 0,
  headers: Record<string, string> = {},
  request: Record<string, string> = {},
) {
  const capture = cache.capture(key, request, 200, headers, () => now);
  capture?.chunk(Buffer.from(body));
  capture?.end();
}

describe('stale cache', () => {
  it('drops the oldest answers once the total byte bound (bodies, keys and fields) is passed', () => {
    const cache = cacheOf({ maxEntryBytes: 10, maxTotalBytes: 24 });
    keep(cache, '/a', 'aaaaaaaaaa');
    keep(cache, '/b', 'bbbbbbbbbb');
    keep(cache, '/c', 'cccccccccc');
    expect(cache.get('/a', {}, 0)).toBeNull();
    expect(cache.get('/b', {}, 0)?.body.toString()).toBe('bbbbbbbbbb');
    expect(cache.get('/c', {}, 0)?.body.toString()).toBe('cccccccccc');
    expect(cache.bytes).toBe(24);
  });

  it('does not keep an answer larger than the entry bound', () => {
    const cache = cacheOf({ maxEntryBytes: 4 });
    keep(cache, '/big', 'too large');
    expect(cache.size).toBe(0);
  });

  it('forgets answers older than the age bound', () => {
    const cache = cacheOf({ maxAgeMs: 1_000 });
    keep(cache, '/a', 'a', 0);
    expect(cache.get('/a', {}, 1_001)).toBeNull();
    expect(cache.bytes).toBe(0);
  });

  it('refuses per-user answers', () => {
    const cache = cacheOf();
    expect(cache.mayStore({ cookie: 's=1' }, 200, {})).toBe(false);
    expect(cache.mayStore({ authorization: 'Bearer a' }, 200, {})).toBe(false);
    expect(cache.mayStore({ 'x-api-key': 'k1' }, 200, {})).toBe(false);
    expect(cache.mayStore({}, 200, { 'cache-control': 'private, max-age=0' })).toBe(false);
    expect(cache.mayStore({}, 200, { 'cache-control': 'no-store' })).toBe(false);
    expect(cache.mayStore({ 'cache-control': 'no-store' }, 200, {})).toBe(false);
    expect(cache.mayStore({}, 200, { 'set-cookie': ['x=1'] })).toBe(false);
    expect(cache.mayStore({}, 404, {})).toBe(false);
    expect(cache.mayStore({}, 200, { 'cache-control': 'max-age=60' })).toBe(true);
  });

  it('never keeps an answer marked no-cache or Vary: *', () => {
    const cache = cacheOf();
    expect(cache.mayStore({}, 200, { 'cache-control': 'no-cache' })).toBe(false);
    expect(cache.mayStore({}, 200, { vary: '*' })).toBe(false);
    expect(cache.mayStore({}, 200, { vary: 'Accept-Language' })).toBe(true);
  });

  it('serves a Vary: Accept-Encoding answer only to a request with the same Accept-Encoding', () => {
    const cache = cacheOf();
    keep(
      cache,
      'h\n/a',
      'gzipped',
      0,
      { vary: 'Accept-Encoding', 'content-encoding': 'gzip' },
      { 'accept-encoding': 'gzip' },
    );
    expect(cache.get('h\n/a', { 'accept-encoding': 'gzip' }, 0)?.body.toString()).toBe('gzipped');
    expect(cache.get('h\n/a', {}, 0)).toBeNull();
    expect(cache.get('h\n/a', { 'accept-encoding': 'identity' }, 0)).toBeNull();
  });

  it("keeps one variant per value of the Vary'd field", () => {
    const cache = cacheOf();
    keep(cache, '/a', 'english', 0, { vary: 'Accept-Language' }, { 'accept-language': 'en' });
    keep(cache, '/a', 'deutsch', 0, { vary: 'Accept-Language' }, { 'accept-language': 'de' });
    expect(cache.get('/a', { 'accept-language': 'en' }, 0)?.body.toString()).toBe('english');
    expect(cache.get('/a', { 'accept-language': 'de' }, 0)?.body.toString()).toBe('deutsch');
    expect(cache.get('/a', { 'accept-language': 'fr' }, 0)).toBeNull();
    expect(cache.get('/a', {}, 0)).toBeNull();
  });

  it('never serves a gzip body to a request that refuses gzip, even without Vary', () => {
    const cache = cacheOf();
    keep(cache, '/a', 'gzipped', 0, { 'content-encoding': 'gzip' });
    expect(cache.get('/a', { 'accept-encoding': 'br, gzip;q=0' }, 0)).toBeNull();
    expect(cache.get('/a', { 'accept-encoding': 'br, gzip' }, 0)?.body.toString()).toBe('gzipped');
  });

  it.each(['must-revalidate', 'proxy-revalidate', 's-maxage=0', 'stale-if-error=0'])(
    'never serves an answer marked %s once it is stale',
    (directive) => {
      const cache = cacheOf();
      keep(cache, '/a', 'body', 0, { 'cache-control': directive });
      expect(cache.get('/a', {}, 1_000)).toBeNull();
    },
  );

  it('serves a must-revalidate answer while it is fresh', () => {
    const cache = cacheOf();
    keep(cache, '/a', 'body', 0, { 'cache-control': 'max-age=10, must-revalidate' });
    expect(cache.get('/a', {}, 9_000)?.body.toString()).toBe('body');
    expect(cache.get('/a', {}, 10_000)).toBeNull();
  });

  it('serves a stale-if-error=N answer for N seconds after it went stale', () => {
    const cache = cacheOf();
    keep(cache, '/a', 'body', 0, { 'cache-control': 'max-age=5, stale-if-error=10' });
    expect(cache.get('/a', {}, 15_000)?.body.toString()).toBe('body');
    expect(cache.get('/a', {}, 15_001)).toBeNull();
  });
});
