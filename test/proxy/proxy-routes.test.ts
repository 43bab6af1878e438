import { afterEach, describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config.js';
import { createUndiciClient } from '../../src/proxy/upstream-client.js';
import { useServedApp } from '../http/served-app.js';
import { proxyYaml, startNodes, type FakeNode } from './fake-node.js';

let nodes: Record<string, FakeNode> = {};
const client = createUndiciClient();
const serveApp = useServedApp();

afterEach(async () => {
  await Promise.all(Object.values(nodes).map((n) => n.stop()));
});

async function setup() {
  nodes = await startNodes('dc1-1', 'dc2-1');
  const cfg = parseConfigText(proxyYaml(nodes), 'test');
  const app = await serveApp({
    token: 'a-very-long-secret-token',
    proxy: { localDc: 'dc1', upstreams: cfg.upstreams, client },
  });
  const request = (method: string, path: string, body?: string) => fetch(`${app.url}${path}`, { method, body });
  return { ...app, request };
}

describe('the proxy as createApp mounts it, served as the server serves it', () => {
  it('forwards a GET and marks the answer', async () => {
    const { request } = await setup();
    const res = await request('GET', '/proxy/users/a/b?c=1');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-node')).toBe('dc1-1');
    expect(await res.json()).toEqual({ node: 'dc1-1', method: 'GET', url: '/a/b?c=1' });
  });

  it('creates every node circuit up front with the upstream settings', async () => {
    const { breaker } = await setup();
    const circuit = await breaker.get('users/dc2-1');
    expect(circuit).toMatchObject({ state: 'closed', failureThreshold: 3, timeoutSeconds: 30 });
  });

  it('needs no bearer token and ignores the 16 KiB /circuits body limit', async () => {
    const { request } = await setup();
    const body = 'x'.repeat(64 * 1024);
    const res = await request('POST', '/proxy/users/x', body);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-body-bytes')).toBe(String(body.length));
    await res.arrayBuffer();
    expect((await request('GET', '/circuits')).status).toBe(401);
  });
});
