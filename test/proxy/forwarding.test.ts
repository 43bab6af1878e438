import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { rawRequest, useProxyFixture } from './proxy-app.js';

const fixture = useProxyFixture();

function setup() {
  return fixture.start(['dc1-1', 'dc2-1'], 'request_timeout_ms: 2000');
}

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

describe('forwarding', () => {
  it('forwards method, path and query to the node and marks the answer', async () => {
    const app = await setup();
    const res = await fetch(`${app.url}/proxy/users/api/v1/cookies/%41b?x=1&y=%20`, { method: 'DELETE' });
    expect(res.status).toBe(200);
    expect(fixture.nodes['dc1-1']!.seen[0]).toMatchObject({ method: 'DELETE', url: '/api/v1/cookies/%41b?x=1&y=%20' });
    expect(res.headers.get('x-node')).toBe('dc1-1');
    expect(res.headers.get('x-dc')).toBe('dc1');
    expect(res.headers.get('x-degraded')).toBe('false');
    expect(res.headers.getSetCookie()).toEqual(['a=1', 'b=2']);
    await res.text();
  });

  it('forwards /proxy/<upstream> alone to the node root', async () => {
    const app = await setup();
    await app.get('/proxy/users');
    expect(fixture.nodes['dc1-1']!.seen[0]?.url).toBe('/');
  });

  it('drops hop-by-hop request headers and adds X-Forwarded-*', async () => {
    const app = await setup();
    await rawRequest(app.url, 'GET', '/proxy/users/h', {
      connection: 'keep-alive, x-secret-hop',
      'x-secret-hop': 'no',
      'keep-alive': 'timeout=5',
      'proxy-connection': 'keep-alive',
      te: 'trailers',
      upgrade: 'websocket',
      'x-forwarded-for': '203.0.113.9',
      'x-forwarded-dc': 'spoofed',
      authorization: 'Bearer for-the-upstream',
      host: 'api.example.test',
    });
    const h = fixture.nodes['dc1-1']!.seen[0]!.headers;
    for (const name of ['x-secret-hop', 'keep-alive', 'proxy-connection', 'te', 'upgrade'])
      expect(h[name]).toBeUndefined();
    expect(h['x-forwarded-for']).toBe('203.0.113.9, 127.0.0.1');
    expect(h['x-forwarded-proto']).toBe('http');
    expect(h['x-forwarded-host']).toBe('api.example.test');
    expect(h['x-forwarded-dc']).toBe('dc1');
    expect(h.authorization).toBe('Bearer for-the-upstream');
    expect(h.host).toBe(`127.0.0.1:${fixture.nodes['dc1-1']!.port}`);
  });

  it('drops hop-by-hop response headers', async () => {
    const app = await setup();
    const res = await rawRequest(app.url, 'GET', '/proxy/users/h');
    expect(res.headers['x-from']).toBe('dc1-1');
    expect(res.headers['keep-alive']).not.toBe('timeout=5');
  });

  it.each([
    '/proxy/users/a/../../circuits',
    '/proxy/users/..',
    '/proxy/users/a/%2e%2e/b',
    '/proxy/users/a/%2E./b',
    '/proxy/users/a/.%2e%2Fb',
    '/proxy/users/a%2F..%2Fb',
    '/proxy/users/a/..%5Cb',
    '/proxy/users/a/%252e%252e/b',
    '/proxy/users/./a',
    '/proxy/users/a/%zz',
  ])('refuses %s with a 400 problem and contacts no node', async (path) => {
    const app = await setup();
    const res = await rawRequest(app.url, 'GET', path);
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toBe('application/problem+json');
    expect(fixture.nodes['dc1-1']!.hits + fixture.nodes['dc2-1']!.hits).toBe(0);
  });

  it.each(['//other-host/x', '///127.0.0.2:1/x', '/%2F%2Fother-host/x'])('keeps %s on the node host', async (rest) => {
    const app = await setup();
    const res = await rawRequest(app.url, 'GET', `/proxy/users${rest}`);
    expect(res.status).toBe(200);
    expect(res.headers['x-node']).toBe('dc1-1');
    expect(fixture.nodes['dc1-1']!.seen[0]?.url).toBe(rest.replace(/^\/+/, '/'));
    expect(fixture.nodes['dc1-1']!.seen[0]?.headers.host).toBe(`127.0.0.1:${fixture.nodes['dc1-1']!.port}`);
  });

  it('answers an unknown upstream with a 404 problem', async () => {
    const app = await setup();
    const { res, text } = await app.get('/proxy/orders/x');
    expect(res.status).toBe(404);
    expect(JSON.parse(text).code).toBe('UPSTREAM_NOT_FOUND');
  });

  it('refuses TRACE with 405 and an Allow header', async () => {
    const app = await setup();
    const res = await rawRequest(app.url, 'TRACE', '/proxy/users/x');
    expect(res.status).toBe(405);
    expect(res.headers.allow).toContain('GET');
  });

  it('streams a 5 MB body both ways intact', async () => {
    const app = await setup();
    const body = randomBytes(5 * 1024 * 1024);
    const res = await fetch(`${app.url}/proxy/users/upload`, {
      method: 'PUT',
      body,
      headers: { 'content-type': 'application/octet-stream' },
    });
    const echoed = Buffer.from(await res.arrayBuffer());
    expect(res.status).toBe(200);
    expect(res.headers.get('x-body-sha256')).toBe(sha256(body));
    expect(echoed.length).toBe(body.length);
    expect(sha256(echoed)).toBe(sha256(body));
  });

  it('streams a chunked 5 MB POST body intact', async () => {
    const app = await setup();
    const body = randomBytes(5 * 1024 * 1024);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < body.length; i += 64 * 1024) controller.enqueue(body.subarray(i, i + 64 * 1024));
        controller.close();
      },
    });
    const res = await fetch(`${app.url}/proxy/users/upload`, {
      method: 'POST',
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(res.headers.get('x-body-sha256')).toBe(sha256(body));
    expect(sha256(Buffer.from(await res.arrayBuffer()))).toBe(sha256(body));
  });
});
