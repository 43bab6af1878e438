import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { hostRule } from '../../src/http/browser-guard.js';
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

const auth = { host: 'circuitlog.internal:8080', authorization: `Bearer ${TOKEN}` };
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
});
