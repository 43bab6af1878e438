import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNodes, type FakeNode } from '../proxy/fake-node.js';
import { rawRequest, startProxyApp } from '../proxy/proxy-app.js';

let nodes: Record<string, FakeNode>;
let proxy: Awaited<ReturnType<typeof startProxyApp>>;

beforeAll(async () => {
  nodes = await startNodes('dc1-a', 'dc2-a');
  proxy = await startProxyApp(nodes, 'health_check: { enabled: false }');
});
afterAll(async () => {
  await proxy.close();
  await Promise.all(Object.values(nodes).map((n) => n.stop()));
});

const segment = fc.oneof(
  fc.constantFrom(
    '..',
    '.',
    '%2e%2e',
    '%2E.',
    '%252e%252e',
    '%2F',
    '%5C..',
    '',
    'a',
    'users',
    '%00',
    '%ZZ',
    '@evil.example',
    'http:',
  ),
  fc.string({ maxLength: 12 }).map(encodeURIComponent),
  fc.stringMatching(/^[A-Za-z0-9._~!$&'()*+,;=:@%-]{0,12}$/),
);
const target = fc
  .tuple(
    fc.constantFrom('users', 'nope', 'Users', '..', '%75sers', ''),
    fc.array(segment, { maxLength: 6 }),
    fc.option(fc.stringMatching(/^[A-Za-z0-9=&%._~-]{0,20}$/), { nil: undefined }),
  )
  .map(([upstream, rest, query]) => `/proxy/${upstream}/${rest.join('/')}${query === undefined ? '' : `?${query}`}`);
const method = fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE');
const headers = fc
  .tuple(
    fc.record(
      {
        host: fc.constantFrom('evil.example', '127.0.0.1', 'x'),
        'x-forwarded-for': fc.constantFrom('1.2.3.4', 'garbage'),
        'content-type': fc.constantFrom('application/json', 'text/plain'),
      },
      { requiredKeys: [] },
    ),
    // x-secret is only ever sent named by Connection, which makes it hop-by-hop (RFC 9110 7.6.1).
    fc.constantFrom(
      {},
      { connection: 'close' },
      { connection: 'upgrade' },
      { connection: 'keep-alive, x-secret', 'x-secret': 'drop-me' },
    ),
  )
  .map(([a, b]) => ({ ...a, ...b }));

describe('hostile input on /proxy', () => {
  it('never answers 5xx while nodes are healthy, errors are problem+json, and the path never leaves the node', async () => {
    const changes = proxy.db.prepare('SELECT total_changes()').pluck();
    await fc.assert(
      fc.asyncProperty(method, target, headers, async (m, path, h) => {
        const before = changes.get();
        const res = await rawRequest(proxy.url, m, path, h);
        expect(res.status, `${m} ${path} -> ${res.status} ${res.body}`).toBeLessThan(500);
        if (res.headers['x-node'] === undefined && res.status >= 400) {
          expect(res.headers['content-type']).toBe('application/problem+json');
          if (m !== 'HEAD') expect(JSON.parse(res.body)).toMatchObject({ status: res.status });
          expect(changes.get()).toBe(before);
        }
      }),
      { numRuns: 400 },
    );
    for (const node of Object.values(nodes)) {
      for (const seen of node.seen) {
        expect(seen.url.startsWith('/')).toBe(true);
        expect(seen.url.startsWith('//')).toBe(false);
        const decoded = seen.url
          .split('?')[0]!
          .split('/')
          .map((s) => decodeURIComponent(decodeURIComponent(s.replace(/%(?![0-9A-Fa-f]{2})/g, '%25'))));
        expect(decoded).not.toContain('..');
        expect(seen.headers['x-secret']).toBeUndefined();
      }
    }
    expect(
      Object.values(nodes).reduce((n, node) => n + node.hits, 0),
      'some requests were forwarded',
    ).toBeGreaterThan(20);
  });
});

describe('hostile upgrade requests on the server', () => {
  it("answers every one with the node's non-101 answer or a problem, never 5xx but 501, and never walks out of the node", async () => {
    const upgrade = fc.constantFrom('websocket', 'WebSocket', 'h2c', 'tls/1.2', 'websocket, h2c', '');
    const where = fc.oneof(target, fc.constantFrom('/circuits', '/health', '/', '/proxy'));
    await fc.assert(
      fc.asyncProperty(where, upgrade, fc.constantFrom('GET', 'POST'), async (path, up, m) => {
        const res = await rawRequest(proxy.url, m, path, {
          connection: 'Upgrade',
          upgrade: up,
          'sec-websocket-version': '13',
          'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
        });
        expect(res.status === 501 || res.status < 500, `${m} ${path} (${up}) -> ${res.status} ${res.body}`).toBe(true);
        if (res.status >= 400 && res.headers['x-node'] === undefined)
          expect(res.headers['content-type']).toBe('application/problem+json');
      }),
      { numRuns: 150 },
    );
    for (const node of Object.values(nodes))
      for (const seen of node.seen) expect(seen.url.split('?')[0]!.split('/')).not.toContain('..');
  });
});
