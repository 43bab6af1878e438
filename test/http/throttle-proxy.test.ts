import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config.js';
import { throttleCounts } from '../../src/domain/throttle.js';
import { createUndiciClient } from '../../src/proxy/upstream-client.js';
import { buildApp } from '../helper.js';
import { listenAsMain } from './served-app.js';
import { proxyYaml, startNodes, type FakeNode } from '../proxy/fake-node.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

/** A proxy over a dc1 node and a dc2 node whose circuits throttle ({k 2, 60 s}); `random` injected. */
async function throttledProxy(random: () => number) {
  const nodes: Record<string, FakeNode> = await startNodes('dc1-1', 'dc2-1');
  const yaml = proxyYaml(
    nodes,
    'failure_threshold: 1000000\nthrottle: { k: 2, window_seconds: 60 }\nhealth_check: { enabled: false }',
  );
  const config = parseConfigText(yaml, 'test');
  const client = createUndiciClient();
  const built = buildApp({ proxy: { localDc: config.local_dc!, upstreams: config.upstreams, client }, random });
  await built.ready;
  const server = await listenAsMain(built);
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await client.close();
    await Promise.all(Object.values(nodes).map((n) => n.stop()));
  });
  const get = async (path: string) => {
    const res = await fetch(`${url}${path}`);
    return { res, text: await res.text() };
  };
  return { ...built, nodes, get };
}

describe('soft throttling in the proxy admission', () => {
  it('gives every node circuit its upstream block’s throttle', async () => {
    const t = await throttledProxy(() => 0.5);
    expect((await t.breaker.get('users/dc1-1'))?.throttle).toEqual({ k: 2, windowSeconds: 60 });
  });

  it('skips a throttled node like an open one: the call goes to the next node, the throttled one is not contacted', async () => {
    const t = await throttledProxy(() => 0); // refused whenever p > 0
    for (let i = 0; i < 10; i++) await t.breaker.record('users/dc1-1', { success: false }); // p = 10/11 on the local node
    const { res } = await t.get('/proxy/users/api/items');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-dc')).toBe('dc2');
    expect(t.nodes['dc1-1']!.hits).toBe(0);
    const local = (await t.breaker.get('users/dc1-1'))!;
    expect(local.state).toBe('closed');
    // The refusal counted as a request on the local node's circuit: 11 requests, no accept.
    expect(throttleCounts(local.throttle!, local.throttleState, t.breaker.now())).toEqual({ requests: 11, accepts: 0 });
  });

  it('answers 503 no-node-available, contacting no node, when every node is throttled', async () => {
    const t = await throttledProxy(() => 0);
    for (const id of ['dc1-1', 'dc2-1'])
      for (let i = 0; i < 10; i++) await t.breaker.record(`users/${id}`, { success: false });
    const { res, text } = await t.get('/proxy/users/api/items');
    expect(res.status).toBe(503);
    expect(JSON.parse(text).code).toBe('NO_NODE_AVAILABLE');
    expect(res.headers.get('retry-after')).toBe('1');
    expect(t.nodes['dc1-1']!.hits + t.nodes['dc2-1']!.hits).toBe(0);
  });

  it('sends to a node whose dependency is healthy, whatever the draw', async () => {
    const t = await throttledProxy(() => 0);
    for (let i = 0; i < 20; i++) expect((await t.get(`/proxy/users/api/items?i=${i}`)).res.status).toBe(200);
    expect(t.nodes['dc1-1']!.hits).toBe(20);
  });
});
