import { afterEach, describe, expect, it } from 'vitest';
import { FaultNode, type FaultKind } from '../faults/fault-node.js';
import { rawRequest, startProxyApp, type ProxyApp } from './proxy-app.js';

let app: ProxyApp | null = null;
let node: FaultNode | null = null;

afterEach(async () => {
  await app?.close();
  await node?.stop();
  app = node = null;
});

/** One node of `kind` behind upstream `users` (failure_threshold 3, retries 0). */
async function start(kind: FaultKind): Promise<ProxyApp> {
  node = await new FaultNode('dc1-1', kind).start();
  app = await startProxyApp(
    { 'dc1-1': node },
    'retries: 0\nrequest_timeout_ms: 2000\nhealth_check: { enabled: false }',
  );
  return app;
}

describe('interim (1xx) answers from a node', () => {
  it('forwards the final answer after an unsolicited 100 Continue and 103 Early Hints', async () => {
    const proxy = await start('continue');
    const { res, text } = await proxy.get('/proxy/users/x');
    expect(res.status).toBe(200);
    expect(text).toBe('ok');
    expect(res.headers.get('x-node')).toBe('dc1-1');
  });

  it('never opens the circuit of a node that always sends 100 Continue', async () => {
    const proxy = await start('continue');
    for (let i = 0; i < 5; i++) expect((await proxy.get(`/proxy/users/x?i=${i}`)).res.status).toBe(200);
    expect(await proxy.breaker.get('users/dc1-1')).toMatchObject({ state: 'closed', failureCount: 0 });
    expect(node!.hits).toBe(5);
  });
});

describe('answers without content', () => {
  it('passes a 204 on without Content-Length', async () => {
    const proxy = await start('no-content');
    const res = await rawRequest(proxy.url, 'GET', '/proxy/users/x');
    expect(res.status).toBe(204);
    expect(res.headers['content-length']).toBeUndefined();
    expect(res.headers['x-from']).toBe('fault');
  });

  it('passes a 304 on without Content-Length', async () => {
    const proxy = await start('not-modified');
    const res = await rawRequest(proxy.url, 'GET', '/proxy/users/x', { 'if-none-match': '"v1"' });
    expect(res.status).toBe(304);
    expect(res.headers['content-length']).toBeUndefined();
    expect(res.headers.etag).toBe('"v1"');
  });
});

describe('static fallback', () => {
  async function startRefused(): Promise<ProxyApp> {
    node = await new FaultNode('dc1-1', 'refuse').start();
    app = await startProxyApp(
      { 'dc1-1': node },
      'retries: 0\nhealth_check: { enabled: false }\nfallback: { static: { status: 200, body: "cached" } }',
    );
    return app;
  }

  it('serves GET and HEAD', async () => {
    const proxy = await startRefused();
    const get = await proxy.get('/proxy/users/x');
    expect([get.res.status, get.text, get.res.headers.get('x-fallback')]).toEqual([200, 'cached', 'static']);
    const head = await rawRequest(proxy.url, 'HEAD', '/proxy/users/x');
    expect([head.status, head.body, head.headers['x-fallback']]).toEqual([200, '', 'static']);
  });

  it('is never served to a POST, which gets the problem instead', async () => {
    const proxy = await startRefused();
    const { res, text } = await proxy.get('/proxy/users/x', { method: 'POST', body: 'order' });
    expect(res.status).toBe(502);
    expect(res.headers.get('content-type')).toBe('application/problem+json');
    expect(JSON.parse(text).code).toBe('UPSTREAM_UNREACHABLE');
  });
});
