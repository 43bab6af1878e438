import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { hostRule } from '../../src/http/request-guard.js';
import { serveApp } from '../../src/server/node-server.js';
import { buildApp, silentLogger } from '../helper.js';
import { rawRequest } from './served-app.js';

// The closed-circuit `GET /allowed` answered on Node's request and response (http/raw-allowed.ts)
// must be the route's answer byte for byte; everything it does not take goes to the route.

const TOKEN = 'raw-allowed-token';
const t = buildApp({ hosts: hostRule('127.0.0.1', ['circuitlog.internal']), token: TOKEN });
const taken: { path: string; taken: boolean }[] = [];
const servers: http.Server[] = [];

/** The same app on two listeners: as main.ts serves it (with the raw listener), and Hono alone. */
async function listen(withRaw: boolean): Promise<string> {
  const server = http.createServer();
  const allowedListener: typeof t.allowedListener = (incoming, outgoing) => {
    const answered = t.allowedListener(incoming, outgoing);
    taken.push({ path: incoming.url ?? '', taken: answered });
    return answered;
  };
  serveApp(server, { fetch: t.app.fetch, ...(withRaw ? { allowedListener } : {}) }, silentLogger);
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
afterAll(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

// A kept request id (src/request-id.ts), so the two answers can be equal byte for byte.
const auth = { host: 'circuitlog.internal:8080', authorization: `Bearer ${TOKEN}`, 'x-request-id': 'raw-allowed-1' };
const send = async (method: string, path: string, body?: unknown) =>
  expect((await t.request(method, path, body, auth)).status, `${method} ${path}`).toBeLessThan(300);

/** Status, headers but Date, body. */
async function answer(url: string, method: string, path: string, headers: Record<string, string>) {
  const res = await rawRequest(url, method, path, headers);
  const { date: _date, ...rest } = res.headers;
  return { status: res.status, headers: rest, body: res.body };
}

describe('GET /allowed on the raw listener', () => {
  it('answers exactly as the route does, and takes only what it can answer from memory without a write', async () => {
    const [raw, hono] = [await listen(true), await listen(false)];
    await send('POST', '/circuits/closed/success');
    await send('PATCH', '/circuits/tripped', { failure_threshold: 1, timeout_seconds: 60 });
    await send('POST', '/circuits/tripped/failure');
    await send('PATCH', '/circuits/detect-only', { failure_threshold: 1, forced_state: 'closed' });
    await send('POST', '/circuits/detect-only/failure');
    await send('PATCH', '/circuits/probing', { failure_threshold: 1, timeout_seconds: 1, half_open_max_calls: 5 });
    await send('POST', '/circuits/probing/failure');
    t.clock.advance(2_000); // past probing's open time: its next /allowed takes a probe slot (a write)
    const cases: [string, Record<string, string>, boolean][] = [
      ['/circuits/closed/allowed', auth, true],
      ['/circuits/never-recorded/allowed', auth, true],
      ['/circuits/tripped/allowed', auth, true], // 503 circuit-open with Retry-After
      ['/circuits/detect-only/allowed', auth, true],
      ['/circuits/probing/allowed', auth, false],
      ['/circuits/closed/allowed', { ...auth, authorization: 'Bearer wrong' }, false],
      ['/circuits/closed/allowed', { ...auth, host: 'attacker.example' }, false],
      ['/circuits/closed/allowed?caller=web-1', auth, false],
      ['/circuits/clo%73ed/allowed', auth, false],
      ['/circuits/../allowed', auth, false],
      ['/circuits/a%2Fb/allowed', auth, false],
    ];
    for (const [path, headers, expectTaken] of cases) {
      taken.length = 0;
      const viaRaw = await answer(raw, 'GET', path, headers);
      expect(taken, path).toEqual([{ path, taken: expectTaken }]);
      const viaHono = await answer(hono, 'GET', path, headers);
      // Each half-open answer took a probe slot of its own: the first says 1 in flight, the next 2.
      const slots = (body: string) => body.replace(/"probes_in_flight":\d+/, '"probes_in_flight":n');
      expect({ ...viaRaw, body: slots(viaRaw.body) }, path).toEqual({ ...viaHono, body: slots(viaHono.body) });
    }
    taken.length = 0;
    expect((await answer(raw, 'HEAD', '/circuits/closed/allowed', auth)).status).toBe(200);
    expect(taken).toEqual([{ path: '/circuits/closed/allowed', taken: false }]);
  });

  it('makes an id for a request without a well-formed one, in the header and the problem document, as the route does', async () => {
    const [raw, hono] = [await listen(true), await listen(false)];
    await send('PATCH', '/circuits/id-tripped', { failure_threshold: 1, timeout_seconds: 60 });
    await send('POST', '/circuits/id-tripped/failure');
    const { 'x-request-id': _kept, ...noId } = auth;
    for (const headers of [noId, { ...noId, 'x-request-id': 'has spaces' }]) {
      for (const path of ['/circuits/closed/allowed', '/circuits/id-tripped/allowed']) {
        taken.length = 0;
        const viaRaw = await answer(raw, 'GET', path, headers);
        expect(taken, path).toEqual([{ path, taken: true }]);
        const viaHono = await answer(hono, 'GET', path, headers);
        const rawId = String(viaRaw.headers['x-request-id']);
        const honoId = String(viaHono.headers['x-request-id']);
        expect(rawId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
        expect(honoId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
        expect(rawId).not.toBe(honoId);
        if (viaRaw.status === 503) expect(JSON.parse(viaRaw.body).request_id).toBe(rawId);
        // Apart from the id, the same bytes: put the one id in both.
        const same = (a: typeof viaRaw, id: string) => ({
          ...a,
          headers: { ...a.headers, 'x-request-id': 'ID' },
          body: a.body.replace(id, 'ID'),
        });
        expect(same(viaRaw, rawId), path).toEqual(same(viaHono, honoId));
      }
    }
  });
});
