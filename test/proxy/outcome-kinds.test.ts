import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it, vi } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { parseConfigText } from '../../src/config.js';
import { FaultNode } from '../faults/fault-node.js';
import { type FakeNode, proxyYaml, startNodes } from './fake-node.js';
import { type ProxyApp, startProxyApp, until, useProxyFixture } from './proxy-app.js';

// Issue 29, the proxy's half (docs/proxy.md "How a node answer counts"): every node answer is
// recorded by its kind, through ProxyCall.record; a throttled node cools down for the time it
// asked while the proxy sends its traffic elsewhere, then comes back (ramping when the policy
// ramps). Real listener, loopback nodes, the fake clock.

const fixture = useProxyFixture();
const BASE = 'health_check: { enabled: false }\ntimeout_seconds: 5\nrequest_timeout_ms: 2000';
// biome-ignore lint/suspicious/noExplicitAny: the circuit JSON is read loosely, as in the HTTP suites
type Json = Record<string, any>;

/** The kinds (and asked seconds) the proxy records, per node circuit, from now on. */
function recordings(app: ProxyApp) {
  const spy = vi.spyOn(app.breaker, 'record');
  return (circuit: string) =>
    spy.mock.calls
      .filter((c) => c[0] === circuit)
      .map((c) => {
        const o = c[1] as { kind?: string; retryAfterSeconds?: number };
        return o.retryAfterSeconds === undefined ? o.kind : `${o.kind}:${o.retryAfterSeconds}`;
      });
}

/** `node` answers its next request with `answer`, then as usual. */
function answerOnce(node: FakeNode, answer: { status: number; headers: Record<string, string> }): void {
  node.respond = () => {
    node.respond = null;
    return answer;
  };
}

const circuit = async (app: ProxyApp, node: string): Promise<Json> =>
  (await app.request('GET', `/circuits/users%2F${node}`)).json() as Promise<Json>;
const iso = (app: ProxyApp, ms: number) => new Date(app.clock.now() + ms).toISOString();
const nodeOf = async (app: ProxyApp, path = '/proxy/users/x') => {
  const { res } = await app.get(path);
  return `${res.status} ${res.headers.get('x-node')} ${res.headers.get('x-degraded')}`;
};

describe('the proxy records each node answer by its kind', () => {
  it('records 404 and 422 as rejected: the node never opens, the answer goes back, no other node is tried', async () => {
    const app = await fixture.start(['dc1-1', 'dc2-1'], BASE);
    const kinds = recordings(app);
    let n = 0;
    fixture.nodes['dc1-1']!.respond = () => ({ status: n++ % 2 === 0 ? 404 : 422 });
    const answers = [];
    for (let i = 0; i < 6; i++) answers.push(await nodeOf(app));
    expect(answers).toEqual(['404', '422', '404', '422', '404', '422'].map((s) => `${s} dc1-1 false`));
    expect(kinds('users/dc1-1')).toEqual(Array(6).fill('rejected'));
    expect(await circuit(app, 'dc1-1')).toMatchObject({ state: 'closed', failure_count: 0 });
    expect(fixture.nodes['dc2-1']!.hits).toBe(0);
  });

  it('records 500, 502, 504, 507 and 408 as failures that open the node', async () => {
    const app = await fixture.start(['dc1-1', 'dc2-1'], `${BASE}\nfailure_threshold: 5\nretries: 0`);
    const kinds = recordings(app);
    const statuses = [500, 502, 504, 507, 408];
    let n = 0;
    fixture.nodes['dc1-1']!.respond = () => ({ status: statuses[n++]! });
    for (const status of statuses) expect(await nodeOf(app)).toBe(`${status} dc1-1 false`);
    expect(kinds('users/dc1-1')).toEqual(Array(5).fill('failure'));
    expect((await circuit(app, 'dc1-1')).state).toBe('open');
    expect(await nodeOf(app)).toBe('200 dc2-1 true');
  });

  it('records a reset and a timeout as failures that open the node', async () => {
    const reset = await new FaultNode('dc1-1', 'reset', { bodyBytes: 1000 }).start();
    const hang = await new FaultNode('dc1-2', 'hang').start();
    const app = await startProxyApp(
      { 'dc1-1': reset, 'dc1-2': hang },
      'health_check: { enabled: false }\nfailure_threshold: 1\nrequest_timeout_ms: 200\nretries: 0',
    );
    try {
      const kinds = recordings(app);
      await fetch(`${app.url}/proxy/users/a`)
        .then((r) => r.text())
        .catch(() => 'reset'); // the body breaks after the head
      expect((await app.get('/proxy/users/b')).res.status).toBe(504);
      await until(() => kinds('users/dc1-1').length === 1);
      expect([kinds('users/dc1-1'), kinds('users/dc1-2')]).toEqual([['failure'], ['failure']]);
      expect([(await circuit(app, 'dc1-1')).state, (await circuit(app, 'dc1-2')).state]).toEqual(['open', 'open']);
    } finally {
      await app.close();
      await reset.stop();
      await hang.stop();
    }
  });

  it('records the caller closing first as cancelled: the node circuit is unchanged, no other node is tried', async () => {
    const app = await fixture.start(['dc1-1', 'dc2-1'], `${BASE}\nfailure_threshold: 1`);
    const kinds = recordings(app);
    const node = fixture.nodes['dc1-1']!;
    node.mode = 'hang';
    const { port } = new URL(app.url);
    const req = http.request({ host: '127.0.0.1', port, path: '/proxy/users/slow', agent: false });
    req.on('error', () => {});
    req.end();
    await until(() => node.hits === 1);
    req.destroy();
    await until(() => node.abandoned === 1); // the proxy gave the node's request up
    expect(kinds('users/dc1-1')).toEqual(['cancelled']);
    expect(await circuit(app, 'dc1-1')).toMatchObject({ state: 'closed', failure_count: 0, cool_until: null });
    expect(fixture.nodes['dc2-1']!.hits).toBe(0);
  });

  it('keeps a status listed in failure_statuses a failure (429 too), and an unlisted 5xx a success', async () => {
    const app = await fixture.start(['dc1-1', 'dc2-1'], `${BASE}\nfailure_statuses: [429]`);
    const kinds = recordings(app);
    const statuses = [429, 502];
    let n = 0;
    fixture.nodes['dc1-1']!.respond = () => ({ status: statuses[n++]!, headers: { 'retry-after': '3' } });
    expect(await nodeOf(app)).toBe('200 dc2-1 true'); // a failure: retried on the next node
    expect(await nodeOf(app)).toBe('502 dc1-1 false'); // not listed: passed back, not retried
    expect(kinds('users/dc1-1')).toEqual(['failure', 'success']);
    expect(await circuit(app, 'dc1-1')).toMatchObject({ failure_count: 0, cool_until: null });
  });
});

describe('a throttled node', () => {
  it('is cooled for the Retry-After seconds it sent: the next requests go to the other node, then it comes back', async () => {
    const app = await fixture.start(['dc1-1', 'dc2-1'], BASE);
    const kinds = recordings(app);
    const node = fixture.nodes['dc1-1']!;
    answerOnce(node, { status: 429, headers: { 'retry-after': '3' } });
    const { res } = await app.get('/proxy/users/x');
    expect([res.status, res.headers.get('retry-after'), res.headers.get('x-node')]).toEqual([429, '3', 'dc1-1']);
    expect(kinds('users/dc1-1')).toEqual(['throttled:3']);
    expect(fixture.nodes['dc2-1']!.hits).toBe(0); // not retried: Envoy's default for a 429
    expect(await circuit(app, 'dc1-1')).toMatchObject({
      state: 'closed',
      failure_count: 0,
      cool_until: iso(app, 3000),
    });
    for (let i = 0; i < 3; i++) expect(await nodeOf(app)).toBe('200 dc2-1 true');
    app.clock.advance(2_999);
    expect(await nodeOf(app)).toBe('200 dc2-1 true');
    app.clock.advance(1);
    expect(await nodeOf(app)).toBe('200 dc1-1 false');
    expect(node.hits).toBe(2);
    expect((await circuit(app, 'dc1-1')).cool_until).toBeNull();
  });

  it('answers 503 no-node-available with the seconds left when every node is cooling', async () => {
    const app = await fixture.start(['dc1-1', 'dc2-1'], `${BASE}\nretry_throttled: true`);
    for (const id of ['dc1-1', 'dc2-1'])
      fixture.nodes[id]!.respond = () => ({ status: 429, headers: { 'retry-after': '4' } });
    expect((await app.get('/proxy/users/x')).res.status).toBe(429); // both tried; the last answer goes back
    app.clock.advance(1_500);
    const { res, text } = await app.get('/proxy/users/x');
    expect([res.status, res.headers.get('retry-after'), JSON.parse(text).code]).toEqual([
      503,
      '3',
      'NO_NODE_AVAILABLE',
    ]);
  });

  it('reads a Retry-After HTTP-date on a 503 (RFC 9110 section 10.2.3)', async () => {
    const app = await fixture.start(['dc1-1', 'dc2-1'], BASE);
    const kinds = recordings(app);
    const node = fixture.nodes['dc1-1']!;
    const date = new Date(app.clock.now() + 5_000).toUTCString();
    answerOnce(node, { status: 503, headers: { 'Retry-After': date } }); // the name in any case
    expect(await nodeOf(app)).toBe('503 dc1-1 false');
    expect(kinds('users/dc1-1')).toEqual(['throttled:5']);
    expect((await circuit(app, 'dc1-1')).cool_until).toBe(iso(app, 5000));
    expect(await nodeOf(app)).toBe('200 dc2-1 true');
  });

  it('counts a 503 without Retry-After as a failure, as before', async () => {
    const app = await fixture.start(['dc1-1', 'dc2-1'], `${BASE}\nretries: 0`);
    const kinds = recordings(app);
    fixture.nodes['dc1-1']!.respond = () => ({ status: 503 });
    expect(await nodeOf(app)).toBe('503 dc1-1 false');
    expect(kinds('users/dc1-1')).toEqual(['failure']);
    expect(await circuit(app, 'dc1-1')).toMatchObject({ failure_count: 1, cool_until: null });
  });

  it('without Retry-After is cooled for the upstream timeout_seconds', async () => {
    const app = await fixture.start(['dc1-1', 'dc2-1'], BASE); // timeout_seconds: 5
    const kinds = recordings(app);
    answerOnce(fixture.nodes['dc1-1']!, { status: 429, headers: {} });
    expect(await nodeOf(app)).toBe('429 dc1-1 false');
    expect(kinds('users/dc1-1')).toEqual(['throttled']);
    expect((await circuit(app, 'dc1-1')).cool_until).toBe(iso(app, 5000));
    expect(await nodeOf(app)).toBe('200 dc2-1 true');
  });

  it('with a quorum, is cooled for this proxy (its instance_id) only', async () => {
    const nodes = await startNodes('dc1-1', 'dc2-1');
    const quorum = 'quorum: { min_callers: 2 }';
    const app = await startProxyApp(nodes, `${BASE}\n${quorum}`, undefined, { instanceId: 'edge-1' });
    try {
      answerOnce(nodes['dc1-1']!, { status: 429, headers: { 'retry-after': '3' } });
      expect(await nodeOf(app)).toBe('429 dc1-1 false');
      expect(await circuit(app, 'dc1-1')).toMatchObject({
        cool_until: null,
        throttle_scope: 'caller',
        cooling_callers: [{ caller: 'edge-1', cool_until: iso(app, 3000) }],
      });
      expect(await nodeOf(app)).toBe('200 dc2-1 true');
      const asked = async (caller: string) =>
        (await app.request('GET', `/circuits/users%2Fdc1-1/allowed?caller=${caller}`)).status;
      expect([await asked('edge-1'), await asked('edge-2')]).toEqual([503, 200]);
    } finally {
      await app.close();
      await Promise.all(Object.values(nodes).map((n) => n.stop()));
    }
  });

  it('ramps back in after its cool-down when the policy has a ramp', async () => {
    let draw = 0.5;
    const nodes = await startNodes('dc1-1', 'dc2-1');
    const app = await startProxyApp(
      nodes,
      `${BASE}\nramp: { seconds: 10, start_percent: 10 }`,
      undefined,
      {},
      { random: () => draw },
    );
    try {
      const node = nodes['dc1-1']!;
      answerOnce(node, { status: 429, headers: { 'retry-after': '3' } });
      expect(await nodeOf(app)).toBe('429 dc1-1 false');
      app.clock.advance(3_000); // the cool-down is over: 10% now, 100% in 10 s
      expect(await nodeOf(app)).toBe('200 dc2-1 true'); // a draw of 0.5 is over 10%
      expect(await circuit(app, 'dc1-1')).toMatchObject({ ramp_percent: 10, ramp_until: iso(app, 10_000) });
      draw = 0.09;
      expect(await nodeOf(app)).toBe('200 dc1-1 false');
      app.clock.advance(5_000); // 55%
      draw = 0.54;
      expect(await nodeOf(app)).toBe('200 dc1-1 false');
      draw = 0.56;
      expect(await nodeOf(app)).toBe('200 dc2-1 true');
      app.clock.advance(5_000); // the ramp is over
      draw = 0.99;
      expect(await nodeOf(app)).toBe('200 dc1-1 false');
    } finally {
      await app.close();
      await Promise.all(Object.values(nodes).map((n) => n.stop()));
    }
  });

  it('with retry_throttled, is retried on another node for an idempotent method, never for a POST', async () => {
    const app = await fixture.start(['dc1-1', 'dc2-1'], `${BASE}\nretry_throttled: true`);
    const kinds = recordings(app);
    fixture.nodes['dc1-1']!.respond = () => ({ status: 429, headers: { 'retry-after': '2' } });
    const post = await fetch(`${app.url}/proxy/users/orders`, { method: 'POST', body: 'x' });
    expect([post.status, post.headers.get('x-node'), await post.text()]).toEqual([429, 'dc1-1', '']);
    expect(fixture.nodes['dc2-1']!.hits).toBe(0);
    app.clock.advance(2_000); // cooled no more
    expect(await nodeOf(app)).toBe('200 dc2-1 true'); // dc1-1 answered 429 again; the GET went on
    expect(fixture.nodes['dc1-1']!.hits).toBe(2);
    expect(kinds('users/dc1-1')).toEqual(['throttled:2', 'throttled:2']);
  });
});

describe('a WebSocket handshake', () => {
  it('answered 429 is throttled: passed back, the node cooled, the next handshake on the other node', async () => {
    const servers = await Promise.all([wsNode('dc1-1', 429), wsNode('dc2-1', null)]);
    const app = await startProxyApp({ 'dc1-1': servers[0]!.node, 'dc2-1': servers[1]!.node }, BASE);
    try {
      const kinds = recordings(app);
      expect(await handshake(app)).toBe('429 dc1-1');
      expect(kinds('users/dc1-1')).toEqual(['throttled:7']);
      expect((await circuit(app, 'dc1-1')).cool_until).toBe(iso(app, 7000));
      expect(await handshake(app)).toBe('101 dc2-1');
      expect(kinds('users/dc2-1')).toEqual(['success']);
    } finally {
      await app.close();
      for (const s of servers) await s.close();
    }
  });
});

/** A WebSocket node on 127.0.0.1: it refuses every handshake with `status` (and Retry-After: 7), or accepts it. */
async function wsNode(id: string, status: number | null) {
  const wss = new WebSocketServer({
    host: '127.0.0.1',
    port: 0,
    verifyClient: status === null ? undefined : (_info, done) => done(false, status, 'No', { 'Retry-After': '7' }),
  });
  await once(wss, 'listening');
  const url = `http://127.0.0.1:${(wss.address() as AddressInfo).port}`;
  const close = () => {
    for (const c of wss.clients) c.terminate();
    return new Promise((resolve) => wss.close(resolve));
  };
  return { node: { id, url }, close };
}

/** One handshake through the proxy: the status the caller got and the node that answered. */
async function handshake(app: ProxyApp): Promise<string> {
  const ws = new WebSocket(`${app.url.replace('http', 'ws')}/proxy/users/chat`);
  ws.on('error', () => {}); // ended by the test after a refused handshake
  const answer = await new Promise<string>((resolve) => {
    ws.once('upgrade', (res) => resolve(`101 ${res.headers['x-node']}`));
    ws.once('unexpected-response', (_req, res) => resolve(`${res.statusCode} ${res.headers['x-node']}`));
  });
  ws.terminate();
  return answer;
}

describe('retry_throttled', () => {
  it('defaults to false and must be a boolean', () => {
    const yaml = (extra: string) => proxyYaml({ 'dc1-1': { id: 'dc1-1', url: 'http://127.0.0.1:1' } }, extra);
    expect(parseConfigText(yaml(''), 'test').upstreams.users!.retry_throttled).toBe(false);
    expect(() => parseConfigText(yaml('retry_throttled: 1'), 'test')).toThrow(/upstreams\.users\.retry_throttled/);
  });
});
