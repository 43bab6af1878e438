import { afterEach, describe, expect, it } from 'vitest';
import { startNodes, type FakeNode } from './fake-node.js';
import { startProxyApp, until, type ProxyApp } from './proxy-app.js';

let app: ProxyApp | null = null;
let node: FakeNode;
let coalesced: string[] = [];
let open: () => void = () => {};

afterEach(async () => {
  open();
  await app?.close();
  await node?.stop();
  app = null;
});

/** One node behind `users` with coalescing on; it answers only once `release()` is called. */
async function setup(extra = ''): Promise<ProxyApp> {
  node = (await startNodes('dc1-1'))['dc1-1']!;
  node.gate = new Promise((resolve) => (open = resolve));
  coalesced = [];
  app = await startProxyApp(
    { 'dc1-1': node },
    `retries: 0\nhealth_check: { enabled: false }\ncoalesce: { enabled: true${extra} }`,
    undefined,
    {
      onCoalesced: (upstream) => coalesced.push(upstream),
    },
  );
  return app;
}

/** Send `count` requests at once; once the proxy has them all, let the node answer after 200 ms. */
async function burst(proxy: ProxyApp, paths: string[], init: RequestInit = {}) {
  const pending = paths.map((p) => proxy.get(p, init));
  await until(() => proxy.requests >= paths.length && node.hits >= 1);
  setTimeout(open, 200); // the node answers 200 ms after the last request reached the proxy
  return Promise.all(pending);
}

describe('request coalescing', () => {
  it('sends 100 concurrent identical GETs to the node once; all get the same 200 answer', async () => {
    const proxy = await setup();
    const answers = await burst(proxy, Array(100).fill('/proxy/users/items?page=1'));
    expect(node.hits).toBe(1);
    expect(answers.map((a) => a.res.status)).toEqual(Array(100).fill(200));
    expect(new Set(answers.map((a) => a.text))).toEqual(
      new Set([JSON.stringify({ node: 'dc1-1', method: 'GET', url: '/items?page=1' })]),
    );
    expect(answers.filter((a) => a.res.headers.get('x-coalesced') === 'true')).toHaveLength(99);
    expect(
      answers.every((a) => a.res.headers.get('x-node') === 'dc1-1' && a.res.headers.get('x-degraded') === 'false'),
    ).toBe(true);
    expect(coalesced).toEqual(Array(99).fill('users'));
    expect(await proxy.breaker.get('users/dc1-1')).toMatchObject({ state: 'closed', failureCount: 0 });
  });

  it('never merges different queries', async () => {
    const proxy = await setup();
    const answers = await burst(proxy, [
      '/proxy/users/items?page=1',
      '/proxy/users/items?page=2',
      '/proxy/users/items?page=3',
    ]);
    expect(node.hits).toBe(3);
    expect(answers.some((a) => a.res.headers.has('x-coalesced'))).toBe(false);
  });

  it('never merges requests with Authorization', async () => {
    const proxy = await setup();
    await burst(proxy, ['/proxy/users/me', '/proxy/users/me'], { headers: { authorization: 'Bearer alice' } });
    expect(node.hits).toBe(2);
  });

  it("gives every follower the failing leader's answer, with one call and one failure on the circuit", async () => {
    const proxy = await setup();
    node.mode = 'fail';
    const answers = await burst(proxy, Array(20).fill('/proxy/users/items'));
    expect(node.hits).toBe(1);
    expect(answers.map((a) => [a.res.status, a.text])).toEqual(Array(20).fill([500, 'boom from dc1-1']));
    expect(await proxy.breaker.get('users/dc1-1')).toMatchObject({ state: 'closed', failureCount: 1 });
  });

  it('lets followers make their own calls when the answer is over max_body_bytes', async () => {
    const proxy = await setup(', max_body_bytes: 10');
    const answers = await burst(proxy, Array(5).fill('/proxy/users/items'));
    expect(answers.map((a) => a.res.status)).toEqual(Array(5).fill(200));
    expect(node.hits).toBe(5);
    expect(answers.some((a) => a.res.headers.has('x-coalesced'))).toBe(false);
  });

  it("keeps the leader's call going when a follower hangs up", async () => {
    const proxy = await setup();
    const leader = proxy.get('/proxy/users/items');
    await until(() => node.hits === 1);
    const gone = new AbortController();
    const follower = fetch(`${proxy.url}/proxy/users/items`, { signal: gone.signal }).catch(() => 'aborted');
    await until(() => proxy.requests === 2);
    gone.abort();
    expect(await follower).toBe('aborted');
    open();
    expect((await leader).res.status).toBe(200);
    expect(node.abandoned).toBe(0);
  });

  it('still answers the followers when the leader hangs up', async () => {
    const proxy = await setup();
    const gone = new AbortController();
    const leader = fetch(`${proxy.url}/proxy/users/items`, { signal: gone.signal }).catch(() => 'aborted');
    await until(() => node.hits === 1);
    const followers = [proxy.get('/proxy/users/items'), proxy.get('/proxy/users/items')];
    await until(() => proxy.requests === 3);
    await new Promise((resolve) => setTimeout(resolve, 50)); // let the followers join the flight
    gone.abort();
    expect(await leader).toBe('aborted');
    open();
    const answers = await Promise.all(followers);
    expect(answers.map((a) => [a.res.status, a.res.headers.get('x-coalesced')])).toEqual([
      [200, 'true'],
      [200, 'true'],
    ]);
    expect(node.hits).toBe(1);
    expect(node.abandoned).toBe(0);
  });
});
