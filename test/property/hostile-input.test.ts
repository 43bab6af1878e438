import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildApp } from '../helper.js';
import { rawRequest, useServedApp } from '../http/served-app.js';

const TOKEN = 'property-token-0123456789';

const routes: [string, (name: string) => string][] = [
  ['GET', (n) => `/circuits/${n}`],
  ['GET', (n) => `/circuits/${n}/allowed`],
  ['GET', (n) => `/circuits/${n}/events`],
  ['POST', (n) => `/circuits/${n}/call`],
  ['POST', (n) => `/circuits/${n}/success`],
  ['POST', (n) => `/circuits/${n}/failure`],
  ['POST', (n) => `/circuits/${n}/outcomes`],
  ['POST', (n) => `/circuits/${n}/reset`],
  ['GET', () => '/circuits'],
  ['DELETE', (n) => `/circuits/${n}`],
  ['PATCH', (n) => `/circuits/${n}`],
  ['POST', () => '/outcomes'],
  ['PUT', (n) => `/circuits/${n}/outcomes`],
  ['GET', () => '/health'],
  ['GET', () => '/openapi.json'],
  ['GET', (n) => `/problems/${n}`],
  ['POST', () => '/health'],
];

const name = fc.oneof(
  fc.constantFrom('svc', 'payment-gateway%2Fcharge', 'a%2F..%2Fb', '%2F', '..', '%00', '%ZZ', '%2525'),
  fc.string({ maxLength: 40 }).map(encodeURIComponent),
  fc.string({ unit: 'binary', maxLength: 30 }).map(encodeURIComponent),
  fc.string({ maxLength: 250 }).map((s) => s.replace(/[^A-Za-z0-9/_.-]/g, '')),
);

const jsonValue = fc.jsonValue({ maxDepth: 3 });
const body = fc.oneof(
  fc.constant(undefined),
  fc
    .record(
      {
        success: fc.oneof(fc.boolean(), jsonValue),
        threshold: fc.oneof(fc.integer(), jsonValue),
        timeout_seconds: jsonValue,
        duration_ms: jsonValue,
      },
      { requiredKeys: [] },
    )
    .map((v) => JSON.stringify(v)),
  jsonValue.map((v) => JSON.stringify(v)),
  fc
    .record(
      {
        failure_threshold: jsonValue,
        success_threshold: fc.oneof(fc.integer(), jsonValue),
        window: fc.oneof(
          fc.record(
            { type: fc.constantFrom('count', 'time', 'x'), size: fc.integer(), minimum_calls: jsonValue },
            { requiredKeys: [] },
          ),
          jsonValue,
        ),
        backoff: jsonValue,
        forced_state: fc.oneof(fc.constantFrom('open', 'closed', null), jsonValue),
      },
      { requiredKeys: [] },
    )
    .map((v) => JSON.stringify(v)),
  fc
    .array(
      fc.record(
        {
          circuit: fc.oneof(fc.constantFrom('svc', 'a/b', '..', ''), fc.string({ maxLength: 5 })),
          success: fc.oneof(fc.boolean(), jsonValue),
          duration_ms: jsonValue,
        },
        { requiredKeys: [] },
      ),
      { maxLength: 4 },
    )
    .map((outcomes) => JSON.stringify({ outcomes })),
  fc.string({ maxLength: 60 }),
  fc.string({ maxLength: 20 }).map((s) => `{"success":${s}`),
);
const headerValue = fc.string({ maxLength: 40 }).map((s) => s.replace(/[^\x20-\x7e]/g, '').trim());
const headers = fc.record(
  {
    'content-type': fc.oneof(
      fc.constantFrom(
        'application/json',
        'application/problem+json',
        'text/plain',
        'application/json; charset=utf-8',
        '',
      ),
      headerValue,
    ),
    authorization: fc.oneof(fc.constant(`Bearer ${TOKEN}`), fc.constant('Bearer '), headerValue),
    accept: headerValue,
  },
  { requiredKeys: [] },
);
const query = fc.oneof(
  fc.constant(''),
  fc
    .dictionary(fc.constantFrom('state', 'limit', 'cursor', 'x'), fc.string({ maxLength: 12 }), { maxKeys: 3 })
    .map((q) => `?${new URLSearchParams(q)}`),
  fc.string({ maxLength: 20 }).map((s) => `?${encodeURI(s)}`),
);

// RFC 3986 path characters: unreserved, pct-encoded, sub-delims, ':', '@' and '/'.
const URI_PATH = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-Fa-f]{2})*$/;

describe('hostile input', () => {
  it.each([
    ['without a token', undefined],
    ['with a token', TOKEN],
  ])(
    'never answers 5xx (bar an open circuit), always problem+json, and a rejected request changes nothing (%s)',
    async (_label, token) => {
      const t = buildApp({ token });
      const auth = { authorization: `Bearer ${TOKEN}` };
      // Some state to disturb: one open circuit, one with failures counted.
      for (let i = 0; i < 5; i++) await t.request('POST', '/circuits/svc/outcomes', { success: false }, auth);
      await t.request('POST', '/circuits/payment-gateway%2Fcharge/failure', undefined, auth);
      const changes = t.db.prepare('SELECT total_changes()').pluck();

      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...routes), name, body, headers, query, async ([method, path], n, b, h, q) => {
          const before = changes.get();
          const res = await t.app.request(`${path(n)}${q}`, {
            method,
            headers: h,
            body: method === 'GET' ? undefined : b,
          });
          const text = await res.text();
          const isOpenCircuit = res.status === 503 && /"CIRCUIT_(FORCED_)?OPEN"/.test(text);
          expect(res.status < 500 || isOpenCircuit, `${method} ${path(n)}${q} -> ${res.status} ${text}`).toBe(true);
          if (res.status >= 400) {
            expect(res.headers.get('content-type')).toBe('application/problem+json');
            const problem = JSON.parse(text);
            expect(problem).toMatchObject({ status: res.status, type: expect.any(String), title: expect.any(String) });
            expect(problem.instance, 'instance is a valid URI path').toMatch(URI_PATH);
            expect(changes.get(), `${method} ${path(n)} changed state`).toBe(before);
          }
        }),
        { numRuns: 1500 },
      );
    },
  );
});

describe('hostile raw paths', () => {
  const serveApp = useServedApp();
  const dot = fc.constantFrom('.', '..', '%2e', '%2E', '%2e%2e', '%2E%2e', '.%2E', '%2e.', '..%2F', 'a%2F..%2Fvictim');
  const other = fc.constantFrom('circuits', 'x', 'docs', 'health', '', '%63ircuits');
  // `/circuits/<x, dots...>/victim/reset` and relatives: what a path-resolving router would send to victim.
  const hostilePath = fc
    .tuple(
      fc.array(fc.oneof(other, dot), { maxLength: 2 }),
      fc.array(fc.oneof(dot, other), { minLength: 1, maxLength: 4 }),
    )
    .map(([head, middle]) => `/${[...head, ...middle, 'victim', 'reset'].join('/')}`)
    .filter((path) => path !== '/circuits/victim/reset');

  it('never resets circuit victim except as /circuits/victim/reset, however dot segments are spelled', async () => {
    const t = await serveApp();
    for (let i = 0; i < 5; i++) await t.request('POST', '/circuits/victim/outcomes', { success: false });
    await fc.assert(
      fc.asyncProperty(fc.oneof(hostilePath, fc.constant('/circuits/x/%2e%2e/victim/reset')), async (path) => {
        const res = await rawRequest(t.url, 'POST', path);
        expect(res.status, `${path} -> ${res.status} ${res.body}`).toBeLessThan(500);
        expect((await t.breaker.get('victim'))!.state, path).toBe('open');
        if (res.status >= 400) expect(JSON.parse(res.body).instance).toMatch(URI_PATH);
      }),
      { numRuns: 300 },
    );
  });
});
