import http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { startNodes, type FakeNode } from './fake-node.js';
import { startProxyApp, until, type ProxyApp } from './proxy-app.js';

/**
 * Which concurrent requests may share one call (issue 15): only those a shared cache could
 * answer from one answer (RFC 9111). Each case sends a leader, waits until it reached the
 * node, sends a follower, waits until the proxy has it, then lets the node answer.
 */
let app: ProxyApp | null = null;
let node: FakeNode;
let open: () => void = () => {};

afterEach(async () => {
  open();
  await app?.close();
  await node?.stop();
  app = null;
});

async function setup(extra = ''): Promise<ProxyApp> {
  node = (await startNodes('dc1-1'))['dc1-1']!;
  node.gate = new Promise((resolve) => (open = resolve));
  app = await startProxyApp(
    { 'dc1-1': node },
    `retries: 0\nhealth_check: { enabled: false }\ncoalesce: { enabled: true }\n${extra}`,
  );
  return app;
}

interface Sent {
  readonly headers?: http.OutgoingHttpHeaders;
  readonly body?: string;
  readonly path?: string;
}

interface Got {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

function send(proxy: ProxyApp, { headers = {}, body, path = '/proxy/users/page' }: Sent): Promise<Got> {
  const { port } = new URL(proxy.url);
  return new Promise((resolve, reject) => {
    const length = body === undefined ? {} : { 'content-length': Buffer.byteLength(body) }; // node:http frames no GET body by itself
    const req = http.request(
      { host: '127.0.0.1', port, method: 'GET', path, headers: { ...length, ...headers }, agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The leader reaches the node first; the follower reaches the proxy while the node still holds the leader. */
async function leaderAndFollower(proxy: ProxyApp, leader: Sent, follower: Sent): Promise<[Got, Got]> {
  const first = send(proxy, leader);
  await until(() => node.hits === 1);
  const second = send(proxy, follower);
  await until(() => proxy.requests === 2);
  await new Promise((resolve) => setTimeout(resolve, 50)); // let the follower join the flight, if it may
  open();
  return Promise.all([first, second]);
}

/** The node's answer names the request fields it was built from. */
function echoFields(extraHeaders: (req: http.IncomingMessage) => http.OutgoingHttpHeaders = () => ({})) {
  node.respond = (req) => ({
    headers: { 'content-type': 'application/json', ...extraHeaders(req) },
    body: JSON.stringify({
      host: req.headers['x-forwarded-host'],
      lang: req.headers['accept-language'],
      key: req.headers['x-api-key'],
      tenant: req.headers['x-tenant'],
    }),
  });
}

describe('coalescing keys and rules', () => {
  it('never gives a follower the answer built for another Host', async () => {
    const proxy = await setup();
    echoFields();
    const [evil, shop] = await leaderAndFollower(
      proxy,
      { headers: { host: 'evil.example' } },
      { headers: { host: 'shop.example' } },
    );
    expect(JSON.parse(evil.body).host).toBe('evil.example');
    expect(JSON.parse(shop.body).host).toBe('shop.example');
    expect(shop.headers['x-coalesced']).toBeUndefined();
    expect(node.hits).toBe(2);
  });

  it('still merges requests for the same Host', async () => {
    const proxy = await setup();
    echoFields();
    const [, b] = await leaderAndFollower(
      proxy,
      { headers: { host: 'shop.example' } },
      { headers: { host: 'shop.example' } },
    );
    expect(b.headers['x-coalesced']).toBe('true');
    expect(node.hits).toBe(1);
  });

  it('never shares an answer with Set-Cookie: the follower makes its own call', async () => {
    const proxy = await setup();
    node.respond = () => ({ headers: { 'set-cookie': 'session=leader' }, body: 'hi' });
    const [, follower] = await leaderAndFollower(proxy, {}, {});
    expect(node.hits).toBe(2);
    expect(follower.headers['x-coalesced']).toBeUndefined();
    expect(follower.status).toBe(200);
  });

  it('never shares an answer marked Cache-Control: private, no-store', async () => {
    const proxy = await setup();
    node.respond = () => ({ headers: { 'cache-control': 'private, no-store' }, body: 'yours' });
    const [, follower] = await leaderAndFollower(proxy, {}, {});
    expect(node.hits).toBe(2);
    expect(follower.headers['x-coalesced']).toBeUndefined();
  });

  it('gives an answer with Vary: X-Api-Key only to followers with the same X-Api-Key', async () => {
    const proxy = await setup('credential_headers: []'); // X-Api-Key not a credential here: Vary alone must keep them apart
    echoFields(() => ({ vary: 'X-Api-Key' }));
    const [a, b] = await leaderAndFollower(
      proxy,
      { headers: { 'x-api-key': 'alice' } },
      { headers: { 'x-api-key': 'bob' } },
    );
    expect(JSON.parse(a.body).key).toBe('alice');
    expect(JSON.parse(b.body).key).toBe('bob');
    expect(node.hits).toBe(2);
  });

  it('shares an answer with Vary: X-Tenant with a follower of the same tenant', async () => {
    const proxy = await setup();
    echoFields(() => ({ vary: 'X-Tenant' }));
    const [, b] = await leaderAndFollower(proxy, { headers: { 'x-tenant': 't1' } }, { headers: { 'x-tenant': 't1' } });
    expect(b.headers['x-coalesced']).toBe('true');
    expect(node.hits).toBe(1);
  });

  it('never shares an answer with Vary: *', async () => {
    const proxy = await setup();
    echoFields(() => ({ vary: '*' }));
    await leaderAndFollower(proxy, {}, {});
    expect(node.hits).toBe(2);
  });

  it('never merges GETs with different bodies', async () => {
    const proxy = await setup();
    const [a, b] = await leaderAndFollower(proxy, { body: 'query-a' }, { body: 'query-b' });
    expect(a.body).toBe('query-a');
    expect(b.body).toBe('query-b');
    expect(node.hits).toBe(2);
  });

  it('never gives a 206 to a follower that sent no Range', async () => {
    const proxy = await setup();
    node.respond = (req) =>
      req.headers.range
        ? { status: 206, headers: { 'content-range': 'bytes 0-3/8' }, body: 'abcd' }
        : { body: 'abcdefgh' };
    const [ranged, whole] = await leaderAndFollower(proxy, { headers: { range: 'bytes=0-3' } }, {});
    expect([ranged.status, ranged.body]).toEqual([206, 'abcd']);
    expect([whole.status, whole.body]).toEqual([200, 'abcdefgh']);
  });

  it('never gives a 304 to a follower that sent no If-None-Match', async () => {
    const proxy = await setup();
    node.respond = (req) =>
      req.headers['if-none-match'] === '"v1"'
        ? { status: 304, headers: { etag: '"v1"' } }
        : { headers: { etag: '"v1"' }, body: 'full' };
    const [conditional, plain] = await leaderAndFollower(proxy, { headers: { 'if-none-match': '"v1"' } }, {});
    expect(conditional.status).toBe(304);
    expect([plain.status, plain.body]).toEqual([200, 'full']);
  });

  it("never gives a follower another caller's Accept-Language answer", async () => {
    const proxy = await setup();
    echoFields(() => ({ vary: 'Accept-Language' }));
    const [en, de] = await leaderAndFollower(
      proxy,
      { headers: { 'accept-language': 'en' } },
      { headers: { 'accept-language': 'de' } },
    );
    expect(JSON.parse(en.body).lang).toBe('en');
    expect(JSON.parse(de.body).lang).toBe('de');
  });

  it('never merges requests with an X-Api-Key (a default credential header)', async () => {
    const proxy = await setup();
    echoFields(); // no Vary: the credential rule alone keeps them apart
    const [a, b] = await leaderAndFollower(
      proxy,
      { headers: { 'x-api-key': 'alice' } },
      { headers: { 'x-api-key': 'bob' } },
    );
    expect(JSON.parse(a.body).key).toBe('alice');
    expect(JSON.parse(b.body).key).toBe('bob');
    expect(b.headers['x-coalesced']).toBeUndefined();
  });

  it('never merges a request with Pragma: no-cache', async () => {
    const proxy = await setup();
    const first = send(proxy, {});
    await until(() => node.hits === 1);
    const second = send(proxy, { headers: { pragma: 'no-cache' } });
    await until(() => node.hits === 2); // it made its own call while the leader's is still held
    open();
    const [, own] = await Promise.all([first, second]);
    expect(own.headers['x-coalesced']).toBeUndefined();
  });
});
