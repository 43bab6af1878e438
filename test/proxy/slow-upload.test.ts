import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { until, useProxyFixture, type ProxyApp } from './proxy-app.js';

/**
 * A caller slow to send its body is the caller's fault (issue 15): the node is timed from the
 * end of the request body, the upload has its own bound (`client_body_timeout_ms`: 408), and
 * neither counts against a node.
 */
const fixture = useProxyFixture();

interface RawAnswer {
  readonly status: number;
  readonly head: string;
  readonly body: string;
}

/** A PUT on a raw socket that declares `declared` body bytes and sends `sent` of them, then waits for `more` (if given). */
function stalledPut(app: ProxyApp, declared: number, sent: number, more?: Promise<void>): Promise<RawAnswer> {
  const { port } = new URL(app.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1');
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (data += chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const [head = '', body = ''] = data.split('\r\n\r\n');
      resolve({ status: Number(head.split(' ')[1]), head: head.toLowerCase(), body });
    });
    socket.write(
      `PUT /proxy/users/files/a HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\nContent-Length: ${declared}\r\nConnection: close\r\n\r\n`,
    );
    socket.write(Buffer.alloc(sent, 0x61));
    void more?.then(() => socket.write(Buffer.alloc(declared - sent, 0x62))); // no FIN: node:http would abort the request
  });
}

function circuits(app: ProxyApp) {
  return Promise.all(
    Object.keys(fixture.nodes).map(
      async (id) => (await app.breaker.get(`users/${id}`)) as { state: string; failureCount: number },
    ),
  );
}

describe('slow uploads', () => {
  it('six PUTs that stop after 10 of 1,000 body bytes get 408s, leave both nodes closed, and other callers are served', async () => {
    const app = await fixture.start(
      ['dc1-1', 'dc2-1'],
      'request_timeout_ms: 150\nclient_body_timeout_ms: 800\nhealth_check: { enabled: false }',
    );
    const stalled = Array.from({ length: 6 }, () => stalledPut(app, 1000, 10));
    await new Promise((resolve) => setTimeout(resolve, 400)); // well past request_timeout_ms, still inside the upload bound
    const meanwhile = await app.get('/proxy/users/list');
    expect(meanwhile.res.status).toBe(200);
    const answers = await Promise.all(stalled);
    expect(await circuits(app)).toEqual([
      expect.objectContaining({ state: 'closed', failureCount: 0 }),
      expect.objectContaining({ state: 'closed', failureCount: 0 }),
    ]);
    expect((await app.get('/proxy/users/after')).res.status).toBe(200);
    for (const a of answers) {
      expect(a.status).toBe(408);
      expect(a.head).toContain('content-type: application/problem+json');
      expect(JSON.parse(a.body).code).toBe('REQUEST_BODY_TIMEOUT');
    }
  });

  it('times the node from the end of the body: an upload slower than request_timeout_ms still succeeds', async () => {
    const app = await fixture.start(
      ['dc1-1', 'dc2-1'],
      'request_timeout_ms: 150\nclient_body_timeout_ms: 5000\nhealth_check: { enabled: false }',
    );
    let finish = () => {};
    const rest = new Promise<void>((resolve) => (finish = resolve));
    const answer = stalledPut(app, 1000, 10, rest);
    await until(() => fixture.nodes['dc1-1']!.hits === 1);
    await new Promise((resolve) => setTimeout(resolve, 400)); // the caller pauses longer than the node's timeout
    app.clock.advance(60_000); // and a minute passes on the breaker's clock: not the node's time either
    finish();
    const got = await answer;
    expect(got.status).toBe(200);
    expect(got.head).toContain('x-body-bytes: 1000');
    expect((await circuits(app))[0]).toMatchObject({ state: 'closed', failureCount: 0 });
  });

  it('does not judge a slow upload a slow call: the duration runs from the end of the body', async () => {
    const app = await fixture.start(
      ['dc1-1', 'dc2-1'],
      'client_body_timeout_ms: 5000\nhealth_check: { enabled: false }\nwindow: { type: count, size: 2, slow_call_duration_ms: 100 }',
    );
    for (let i = 0; i < 2; i++) {
      let finish = () => {};
      const answer = stalledPut(app, 100, 10, new Promise<void>((resolve) => (finish = resolve)));
      await until(() => fixture.nodes['dc1-1']!.hits === i + 1);
      app.clock.advance(10_000); // ten seconds of upload on the breaker's clock
      finish();
      expect((await answer).status).toBe(200);
    }
    expect((await circuits(app))[0]).toMatchObject({ state: 'closed' });
  });

  it('still times a node that stops reading the body', async () => {
    const app = await fixture.start(
      ['dc1-1', 'dc2-1'],
      'request_timeout_ms: 200\nretries: 0\nhealth_check: { enabled: false }',
    );
    fixture.nodes['dc1-1']!.mode = 'hang'; // it never reads the request: the upload backs up on the node's side
    const body = Buffer.alloc(64 * 1024 * 1024, 0x61);
    const res = await fetch(`${app.url}/proxy/users/files/big`, { method: 'PUT', body }).catch(
      (error: unknown) => error as Error,
    );
    if (res instanceof Response) expect(res.status).toBe(504);
    expect((await circuits(app))[0]).toMatchObject({ failureCount: 1 });
  });
});
