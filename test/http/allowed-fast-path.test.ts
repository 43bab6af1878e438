import { once } from 'node:events';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { afterEach, describe, expect, it } from 'vitest';
import { hostRule } from '../../src/http/request-guard.js';
import { buildApp } from '../helper.js';
import { rawRequest } from './served-app.js';

// The closed-circuit `GET /allowed` is answered without a microtask (docs/design.md, "The fast
// path"): the app-wide guards (Host, cross-site, token) check synchronously in front of the
// router, so `app.fetch` hands back a Response, not a promise, and read Node's raw headers
// rather than building a WHATWG Headers object per request.

const TOKEN = 'fast-path-token';
const guarded = () => buildApp({ hosts: hostRule('127.0.0.1', ['circuitlog.internal']), token: TOKEN });
const headers = { host: 'circuitlog.internal:8080', authorization: `Bearer ${TOKEN}` };

describe('GET /allowed on a closed circuit, with every guard on', () => {
  it('is answered synchronously: app.fetch returns a Response, not a promise', async () => {
    const t = guarded();
    expect((await t.request('POST', '/circuits/svc/success', undefined, headers)).status).toBe(200);
    for (const name of ['svc', 'never-recorded']) {
      const answer = t.app.fetch(new Request(`http://127.0.0.1/circuits/${name}/allowed`, { headers }));
      expect(answer, name).toBeInstanceOf(Response);
      const res = answer as Response;
      expect(res.status, name).toBe(200);
      expect((await res.json()).allowed, name).toBe(true);
    }
  });

  it('still refuses synchronously what a guard refuses, as problem+json', async () => {
    const t = guarded();
    const cases: [Record<string, string>, number, string][] = [
      [{ ...headers, host: 'attacker.example' }, 421, 'MISDIRECTED_REQUEST'],
      [{ host: headers.host }, 401, 'UNAUTHORIZED'],
    ];
    for (const [given, status, code] of cases) {
      const answer = t.app.fetch(new Request('http://127.0.0.1/circuits/svc/allowed', { headers: given }));
      expect(answer, code).toBeInstanceOf(Response);
      const res = answer as Response;
      expect(res.status, code).toBe(status);
      expect(res.headers.get('content-type')).toBe('application/problem+json');
      expect((await res.json()).code).toBe(code);
    }
  });
});

describe('the guards served by @hono/node-server', () => {
  const servers: http.Server[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  /** The guarded app on a real listener; `seen` records, per request, whether `request.headers` was read. */
  async function served() {
    const t = guarded();
    const seen: { path: string; headersRead: boolean; promise: boolean }[] = [];
    const server = serve({
      port: 0,
      hostname: '127.0.0.1',
      fetch: (request: Request, env: object) => {
        const entry = { path: new URL(request.url).pathname, headersRead: false, promise: false };
        const proto = Object.getPrototypeOf(request) as object;
        const getter = Object.getOwnPropertyDescriptor(proto, 'headers')?.get;
        Object.defineProperty(request, 'headers', {
          configurable: true,
          get() {
            entry.headersRead = true;
            return getter?.call(request);
          },
        });
        const answer = t.app.fetch(request, env);
        entry.promise = answer instanceof Promise;
        seen.push(entry);
        return answer;
      },
    }) as http.Server;
    servers.push(server);
    await once(server, 'listening');
    return { t, seen, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
  }

  it('answer GET /allowed without building a Headers object or a promise', async () => {
    const { seen, url } = await served();
    const res = await rawRequest(url, 'GET', '/circuits/svc/allowed', headers);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body).allowed).toBe(true);
    expect(seen).toEqual([{ path: '/circuits/svc/allowed', headersRead: false, promise: false }]);
  });

  it('read repeated headers as Headers.get does: two Content-Types, one not JSON, are refused (415)', async () => {
    const { url, t } = await served();
    const repeated = { ...headers, 'content-type': ['application/json', 'text/plain'] };
    const res = await rawRequest(url, 'POST', '/circuits/svc/failure', repeated, '{}');
    expect(res.status).toBe(415);
    expect(JSON.parse(res.body).code).toBe('UNSUPPORTED_MEDIA_TYPE');
    expect((await t.request('GET', '/circuits/svc', undefined, headers)).status).toBe(404);
  });

  it('refuse a wrong token and a cross-site POST read from raw headers, and let the right ones through', async () => {
    const { url } = await served();
    const wrong = await rawRequest(url, 'GET', '/circuits/svc/allowed', { ...headers, authorization: 'Bearer x' });
    expect([wrong.status, JSON.parse(wrong.body).code]).toEqual([401, 'UNAUTHORIZED']);
    const cross = { ...headers, origin: 'https://attacker.example', 'content-type': 'application/json' };
    const refused = await rawRequest(url, 'POST', '/circuits/svc/failure', cross, '{}');
    expect([refused.status, JSON.parse(refused.body).code]).toEqual([403, 'CROSS_SITE_REQUEST']);
    const ok = await rawRequest(
      url,
      'POST',
      '/circuits/svc/failure',
      { ...headers, 'content-type': 'application/json' },
      '{}',
    );
    expect(ok.status).toBe(200);
  });
});
