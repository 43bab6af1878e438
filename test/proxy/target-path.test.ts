import { describe, expect, it } from 'vitest';
import { upstreamRequestHeaders } from '../../src/proxy/upstream-client.js';
import { parseProxyTarget } from '../../src/proxy/proxy-call.js';

describe('parseProxyTarget', () => {
  it('splits upstream and path, keeping encoding and query as sent', () => {
    expect(parseProxyTarget('/proxy/users/a%20b/c/?q=%2e%2e&x=..')).toEqual({
      upstream: 'users',
      path: '/a%20b/c/?q=%2e%2e&x=..',
    });
  });

  it('collapses repeated slashes so the path never reads as an authority', () => {
    expect(parseProxyTarget('/proxy/users//evil.example//x').path).toBe('/evil.example/x');
  });

  it.each([
    ['/proxy/users', '/'],
    ['/proxy/users/', '/'],
    ['/proxy/users?q=1', '/?q=1'],
    ['/proxy/users/a/', '/a/'],
    ['/proxy/users/a/b?x=1', '/a/b?x=1'],
    ['/proxy/users/a.b/', '/a.b/'], // the careful path, same shape
    ['/proxy/users//a/', '/a/'],
  ])('maps %s to %s (plain targets take a fast path with the same result)', (raw, path) => {
    expect(parseProxyTarget(raw)).toEqual({ upstream: 'users', path });
  });

  it('allows dots inside names', () => {
    expect(parseProxyTarget('/proxy/users/v1.2/file.tar.gz').path).toBe('/v1.2/file.tar.gz');
  });

  it.each(['/proxy/users/..', '/proxy/users/a/%2e', '/proxy/users/%2e%2e%2fx', '/proxy/users/a/..%5c'])(
    'refuses %s',
    (raw) => {
      expect(() => parseProxyTarget(raw)).toThrow(/'\.' or '\.\.'/);
    },
  );
});

describe('upstreamRequestHeaders', () => {
  it('drops fields named in Connection and the fixed hop-by-hop set', () => {
    const out = upstreamRequestHeaders(
      {
        connection: 'close, X-Drop',
        'x-drop': '1',
        'transfer-encoding': 'chunked',
        trailer: 'x',
        'x-keep': '2',
        host: 'h',
      },
      { requestId: 'req-1', clientIp: '10.0.0.1', proto: 'https', localDc: 'dc1' },
    );
    expect(out).toEqual({
      'x-keep': '2',
      'x-forwarded-for': '10.0.0.1',
      'x-forwarded-proto': 'https',
      'x-forwarded-host': 'h',
      'x-forwarded-dc': 'dc1',
      'x-request-id': 'req-1',
    });
  });
});
