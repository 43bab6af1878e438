import { describe, expect, it } from 'vitest';
import type { EdgeAnswer } from '../../src/edge/edge-types.js';
import { ENVOY_REFUSAL_STATUS, type GateRequest, gateAnswer } from '../../src/edge/gate.js';
import { OPEN_UNTIL, allowedAnswer, fakeDecider, gateConfig, refusedAnswer, statusAnswer } from './gate-fakes.js';

// The gateway check route (src/edge/gate.ts) with a fake decider: how the circuit and the caller
// are named, which form answers, and what each form answers. gate-contract.test.ts sends it the
// requests nginx, Envoy and Traefik send, through a real HTTP server.

const ID = 'req-1';

function request(target: string, headers: Record<string, string> = {}, method = 'GET'): GateRequest {
  return { method, target, headers: { 'x-request-id': ID, ...headers } };
}

/** The problem document of an answer, parsed. */
function problemOf(answer: EdgeAnswer): Record<string, unknown> {
  expect(answer.headers['content-type']).toBe('application/problem+json');
  return JSON.parse(answer.body) as Record<string, unknown>;
}

describe('the circuit, from the check path (circuit_from: path, the default)', () => {
  it('is the rest of /gate/<name>, query left out', async () => {
    const decider = fakeDecider();
    const answer = await gateAnswer(request('/gate/payments?x=1'), gateConfig(), decider);
    expect(answer.status).toBe(200);
    expect(decider.calls).toEqual([{ name: 'payments', caller: undefined, requestId: ID }]);
  });

  it('is percent-decoded once', async () => {
    const decider = fakeDecider();
    await gateAnswer(request('/gate/payments%2Fcharge'), gateConfig(), decider);
    expect(decider.calls.map((c) => c.name)).toEqual(['payments/charge']);
    // Decoded once only: %252F is '%2F' in the name, which the name rules refuse.
    const twice = await gateAnswer(request('/gate/payments%252Fcharge'), gateConfig(), decider);
    expect(twice.status).toBe(400);
    expect(problemOf(twice).name).toBe('payments%2Fcharge');
    expect(decider.calls).toHaveLength(1);
  });

  it('answers 400 INVALID_NAME, in the server problem shape, for a missing name and asks nothing', async () => {
    const decider = fakeDecider();
    for (const target of ['/gate', '/gate/', '/gate?circuit=payments']) {
      const answer = await gateAnswer(request(target), gateConfig(), decider);
      expect(answer.status, target).toBe(400);
      expect(answer.headers['x-request-id']).toBe(ID);
      const problem = problemOf(answer);
      expect(Object.keys(problem).slice(0, 7)).toEqual([
        'type',
        'title',
        'status',
        'detail',
        'instance',
        'request_id',
        'code',
      ]);
      expect(problem).toMatchObject({
        type: '/problems/invalid-name',
        title: 'Invalid circuit name',
        status: 400,
        request_id: ID,
        code: 'INVALID_NAME',
      });
      expect(problem.detail).toContain('is missing');
    }
    expect(decider.calls).toEqual([]);
  });

  it('answers 400 INVALID_NAME for a name that breaks the rules or bad percent-encoding, and asks nothing', async () => {
    const decider = fakeDecider();
    for (const target of ['/gate/..', '/gate/a%20b', '/gate/a//b', '/gate/%E0%A4%A', `/gate/${'a'.repeat(201)}`]) {
      const answer = await gateAnswer(request(target), gateConfig(), decider);
      expect(answer.status, target).toBe(400);
      expect(problemOf(answer).code, target).toBe('INVALID_NAME');
    }
    expect(decider.calls).toEqual([]);
  });
});

describe('the circuit, from the host (circuit_from: host)', () => {
  const config = gateConfig({ circuit_from: 'host' });

  it("is Traefik's X-Forwarded-Host when present, lower-cased, port dropped", async () => {
    const decider = fakeDecider();
    await gateAnswer(
      request('/gate', { host: '127.0.0.1:8090', 'x-forwarded-host': 'Shop.Example.COM:8443' }),
      config,
      decider,
    );
    expect(decider.calls.map((c) => c.name)).toEqual(['shop.example.com']);
  });

  it('is the first of a list of X-Forwarded-Host values', async () => {
    const decider = fakeDecider();
    await gateAnswer(request('/gate', { 'x-forwarded-host': 'a.example, b.example' }), config, decider);
    expect(decider.calls.map((c) => c.name)).toEqual(['a.example']);
  });

  it('is the Host otherwise (Envoy sends the original authority as Host)', async () => {
    const decider = fakeDecider();
    await gateAnswer(request('/gate/anything', { host: 'API.example.com:443' }), config, decider);
    expect(decider.calls.map((c) => c.name)).toEqual(['api.example.com']);
  });

  it('answers 400 INVALID_NAME for a host that is no circuit name (an IPv6 literal) or none', async () => {
    const decider = fakeDecider();
    for (const headers of [{ host: '[::1]:8090' }, {}] as Record<string, string>[]) {
      const answer = await gateAnswer(request('/gate', headers), config, decider);
      expect(answer.status).toBe(400);
      expect(problemOf(answer).code).toBe('INVALID_NAME');
    }
    expect(decider.calls).toEqual([]);
  });
});

describe('the circuit, from a header (circuit_from: {header})', () => {
  const config = gateConfig({ circuit_from: { header: 'X-Circuitlog-Circuit' } });

  it('is the header given, its name matched without regard to case', async () => {
    const decider = fakeDecider();
    await gateAnswer(request('/gate', { 'x-circuitlog-circuit': 'payments/eu' }), config, decider);
    expect(decider.calls.map((c) => c.name)).toEqual(['payments/eu']);
  });

  it('answers 400 INVALID_NAME when the header is missing or no circuit name (two values joined)', async () => {
    const decider = fakeDecider();
    for (const headers of [{}, { 'x-circuitlog-circuit': 'a, b' }] as Record<string, string>[]) {
      const answer = await gateAnswer(request('/gate', headers), config, decider);
      expect(answer.status).toBe(400);
      expect(problemOf(answer).source).toBe('header x-circuitlog-circuit');
    }
    expect(decider.calls).toEqual([]);
  });
});

describe('the circuit, from the original path (circuit_from: {path_prefix})', () => {
  const config = gateConfig({
    circuit_from: { path_prefix: { '/api/': 'api', '/api/users/': 'users-api', '/': 'site' } },
  });
  const named = async (headers: Record<string, string>, target = '/gate') => {
    const decider = fakeDecider();
    await gateAnswer(request(target, headers), config, decider);
    return decider.calls.map((c) => c.name);
  };

  it("takes Traefik's X-Forwarded-Uri first, the longest prefix winning, the query left out", async () => {
    expect(await named({ 'x-forwarded-uri': '/api/users/7?x=/api/', 'x-original-uri': '/other' })).toEqual([
      'users-api',
    ]);
    expect(await named({ 'x-forwarded-uri': '/api/orders?x=/api/users/' })).toEqual(['api']);
  });

  it("takes nginx's X-Original-URI next", async () => {
    expect(await named({ 'x-original-uri': '/api/users/7' })).toEqual(['users-api']);
    expect(await named({ 'x-original-uri': '/index.html' })).toEqual(['site']);
  });

  it("takes the check path after /gate last (Envoy's path_prefix: /gate)", async () => {
    expect(await named({}, '/gate/api/users/7?q=1')).toEqual(['users-api']);
    expect(await named({}, '/gate')).toEqual(['site']);
  });

  it('answers 404 GATE_NO_CIRCUIT naming the path when no prefix matches, and asks nothing', async () => {
    const decider = fakeDecider();
    const narrow = gateConfig({ circuit_from: { path_prefix: { '/api/': 'api' } } });
    const answer = await gateAnswer(request('/gate', { 'x-original-uri': '/static/a.css?v=1' }), narrow, decider);
    expect(answer.status).toBe(404);
    const problem = problemOf(answer);
    expect(problem).toMatchObject({ status: 404, code: 'GATE_NO_CIRCUIT', path: '/static/a.css', prefixes: ['/api/'] });
    expect(problem.detail).toContain("'/static/a.css'");
    expect(decider.calls).toEqual([]);
  });
});

describe('the caller and the request id', () => {
  it('passes the caller header through, or none', async () => {
    const decider = fakeDecider();
    await gateAnswer(request('/gate/p', { 'x-circuitlog-caller': 'checkout' }), gateConfig(), decider);
    await gateAnswer(request('/gate/p'), gateConfig(), decider);
    await gateAnswer(request('/gate/p', { 'x-circuitlog-caller': '' }), gateConfig(), decider);
    await gateAnswer(
      request('/gate/p', { 'x-team': 'cart', 'x-circuitlog-caller': 'no' }),
      gateConfig({ caller_header: 'X-Team' }),
      decider,
    );
    expect(decider.calls.map((c) => c.caller)).toEqual(['checkout', undefined, undefined, 'cart']);
  });

  it("passes a bad caller on unchecked: the server's 400 is the answer, in every form", async () => {
    for (const form of ['nginx', 'envoy', 'traefik']) {
      const bad = statusAnswer(400, 'INVALID_QUERY', ID);
      const decider = fakeDecider(() => bad);
      const answer = await gateAnswer(
        request('/gate/p', { 'x-circuitlog-caller': 'a b' }),
        gateConfig({ form }),
        decider,
      );
      expect(decider.calls[0]!.caller).toBe('a b');
      expect(answer, form).toEqual(bad);
    }
  });

  it('keeps a well-formed X-Request-Id and makes one for a missing or malformed one', async () => {
    const decider = fakeDecider();
    const kept = await gateAnswer(request('/gate/p'), gateConfig(), decider);
    const made = await gateAnswer(
      { method: 'GET', target: '/gate/p', headers: { 'x-request-id': 'a b' } },
      gateConfig(),
      decider,
    );
    expect(kept.headers['x-request-id']).toBe(ID);
    expect(decider.calls[1]!.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(made.headers['x-request-id']).toBe(decider.calls[1]!.requestId);
  });
});

describe('the form', () => {
  /** The form an answer was given in, told apart by how each answers an allowed and a refused call. */
  async function formOf(headers: Record<string, string>, form = 'auto'): Promise<string> {
    const allowed = await gateAnswer(request('/gate/p', headers), gateConfig({ form }), fakeDecider());
    if (allowed.status === 204) return 'nginx';
    const refused = await gateAnswer(
      request('/gate/p', headers),
      gateConfig({ form }),
      fakeDecider((name, id) => refusedAnswer(name, id)),
    );
    return refused.status === 503 ? 'traefik' : 'envoy';
  }

  it('is told by the headers under auto: X-Forwarded-Uri Traefik, X-Original-URI nginx, else Envoy', async () => {
    expect(await formOf({ 'x-forwarded-uri': '/a', 'x-original-uri': '/a' })).toBe('traefik');
    expect(await formOf({ 'x-original-uri': '/a' })).toBe('nginx');
    expect(await formOf({})).toBe('envoy');
  });

  it('is picked by X-Circuitlog-Gate under auto, over the headers', async () => {
    expect(await formOf({ 'x-circuitlog-gate': 'nginx', 'x-forwarded-uri': '/a' })).toBe('nginx');
    expect(await formOf({ 'x-circuitlog-gate': ' Traefik ' })).toBe('traefik');
    expect(await formOf({ 'x-circuitlog-gate': 'envoy', 'x-original-uri': '/a' })).toBe('envoy');
  });

  it('answers 400 INVALID_HEADER for an X-Circuitlog-Gate it does not know, and asks nothing', async () => {
    const decider = fakeDecider();
    const answer = await gateAnswer(request('/gate/p', { 'x-circuitlog-gate': 'haproxy' }), gateConfig(), decider);
    expect(answer.status).toBe(400);
    expect(problemOf(answer)).toMatchObject({ code: 'INVALID_HEADER', header: 'x-circuitlog-gate' });
    expect(decider.calls).toEqual([]);
  });

  it('is edge.gate.form when not auto, whatever the headers say', async () => {
    expect(await formOf({ 'x-circuitlog-gate': 'envoy', 'x-forwarded-uri': '/a' }, 'nginx')).toBe('nginx');
    expect(await formOf({ 'x-original-uri': '/a' }, 'traefik')).toBe('traefik');
    expect(await formOf({ 'x-circuitlog-gate': 'haproxy' }, 'envoy')).toBe('envoy');
  });
});

describe('an allowed call', () => {
  it('answers nginx an empty 204 with X-Circuit-State and X-Request-Id', async () => {
    const decider = fakeDecider((name, id) => allowedAnswer(name, id, 'half-open'));
    const answer = await gateAnswer(request('/gate/p'), gateConfig({ form: 'nginx' }), decider);
    expect(answer).toEqual({ status: 204, headers: { 'x-request-id': ID, 'x-circuit-state': 'half-open' }, body: '' });
  });

  it('answers Envoy and Traefik an empty 200 with X-Circuit-State and X-Request-Id', async () => {
    for (const form of ['envoy', 'traefik']) {
      const answer = await gateAnswer(request('/gate/p'), gateConfig({ form }), fakeDecider());
      expect(answer, form).toEqual({
        status: 200,
        headers: { 'x-request-id': ID, 'x-circuit-state': 'closed' },
        body: '',
      });
    }
  });

  it('leaves X-Circuit-State out when the body names no state fit for a header', async () => {
    for (const body of ['not json', '{"allowed":true,"state":"clo\\nsed"}', '[1]', '{"allowed":true}']) {
      const decider = fakeDecider(() => ({ status: 200, headers: {}, body }));
      const answer = await gateAnswer(request('/gate/p'), gateConfig(), decider);
      expect(answer, body).toEqual({ status: 200, headers: { 'x-request-id': ID }, body: '' });
    }
  });
});

describe('a refused call', () => {
  it('answers nginx 403 with Retry-After, X-Circuit-State, X-Circuit-Open-Until and the problem as is', async () => {
    const refused = refusedAnswer('p', ID, { state: 'half-open' });
    const answer = await gateAnswer(
      request('/gate/p'),
      gateConfig({ form: 'nginx' }),
      fakeDecider(() => refused),
    );
    expect(answer.status).toBe(403);
    expect(answer.headers).toEqual({
      'content-type': 'application/problem+json',
      'retry-after': '7',
      'x-request-id': ID,
      'x-circuit-state': 'half-open',
      'x-circuit-open-until': OPEN_UNTIL,
    });
    expect(answer.body).toBe(refused.body);
  });

  it('says open when the problem names no state, and leaves X-Circuit-Open-Until out when it names no time', async () => {
    const refused = refusedAnswer('p', ID, { state: null, openUntil: null });
    const answer = await gateAnswer(
      request('/gate/p'),
      gateConfig({ form: 'nginx' }),
      fakeDecider(() => refused),
    );
    expect(answer.headers['x-circuit-state']).toBe('open');
    expect(answer.headers).not.toHaveProperty('x-circuit-open-until');
  });

  it('names no state for a refusal other than 503 or 429 that names none (a 401: a wrong token)', async () => {
    for (const [status, state] of [
      [401, undefined],
      [404, undefined],
      [429, 'open'],
      [503, 'open'],
    ] as const) {
      const decider = fakeDecider(() => statusAnswer(status, 'X', ID));
      const answer = await gateAnswer(request('/gate/p'), gateConfig({ form: 'traefik' }), decider);
      expect(answer.headers['x-circuit-state'], String(status)).toBe(state);
    }
  });

  it("turns any other 4xx/5xx into nginx's 403 (auth_request knows only 2xx, 401 and 403)", async () => {
    for (const status of [401, 404, 429, 500, 503]) {
      const decider = fakeDecider(() => statusAnswer(status, 'X', ID, '3'));
      const answer = await gateAnswer(request('/gate/p'), gateConfig({ form: 'nginx' }), decider);
      expect(answer.status, String(status)).toBe(403);
      expect(answer.headers['retry-after']).toBe('3');
    }
  });

  it("answers Traefik the decider's own status, headers and body, plus X-Circuit-State", async () => {
    const refused = refusedAnswer('p', ID, { code: 'CIRCUIT_THROTTLED', state: 'closed' });
    const answer = await gateAnswer(
      request('/gate/p'),
      gateConfig({ form: 'traefik' }),
      fakeDecider(() => refused),
    );
    expect(answer).toEqual({
      status: 503,
      headers: { ...refused.headers, 'x-circuit-state': 'closed', 'x-circuit-open-until': OPEN_UNTIL },
      body: refused.body,
    });
  });

  it(`answers Envoy a 5xx refusal as ${ENVOY_REFUSAL_STATUS} (Envoy takes a 5xx for its authz server failing), the problem's status member with it`, async () => {
    const refused = refusedAnswer('p', ID);
    const answer = await gateAnswer(
      request('/gate/p'),
      gateConfig({ form: 'envoy' }),
      fakeDecider(() => refused),
    );
    expect(answer.status).toBe(429);
    expect(answer.headers).toEqual({
      ...refused.headers,
      'x-circuit-state': 'open',
      'x-circuit-open-until': OPEN_UNTIL,
    });
    expect(JSON.parse(answer.body)).toEqual({ ...JSON.parse(refused.body), status: 429 });
  });

  it('answers Envoy a 4xx refusal as it is (a 429, a 401)', async () => {
    for (const status of [429, 401]) {
      const given = statusAnswer(status, 'X', ID, '2');
      const answer = await gateAnswer(
        request('/gate/p'),
        gateConfig({ form: 'envoy' }),
        fakeDecider(() => given),
      );
      const state: Record<string, string> = status === 429 ? { 'x-circuit-state': 'open' } : {};
      expect(answer).toEqual({ ...given, headers: { ...given.headers, ...state } });
    }
  });

  it("passes on only content-type, retry-after and x-request-id of the decider's headers", async () => {
    const given = statusAnswer(503, 'X', ID, '2');
    const decider = fakeDecider(() => ({ ...given, headers: { ...given.headers, 'set-cookie': 'a=b', server: 'x' } }));
    const answer = await gateAnswer(request('/gate/p'), gateConfig({ form: 'traefik' }), decider);
    expect(Object.keys(answer.headers).sort()).toEqual([
      'content-type',
      'retry-after',
      'x-circuit-state',
      'x-request-id',
    ]);
  });
});

describe('a decider that fails', () => {
  const failures: [string, () => never | Promise<never> | EdgeAnswer][] = [
    ['rejects', () => Promise.reject(new Error('socket hang up'))],
    [
      'throws',
      () => {
        throw new TypeError('bug');
      },
    ],
    ['answers no HTTP status', () => ({ status: 0, headers: {}, body: '' })],
    ['answers a 1xx', () => ({ status: 101, headers: {}, body: '' })],
  ];

  it('answers 503 CIRCUITLOG_UNAVAILABLE with Retry-After: 1 (Envoy, Traefik), never rejecting', async () => {
    for (const [what, fail] of failures) {
      for (const form of ['envoy', 'traefik']) {
        const decider = { allowed: fail } as unknown as Parameters<typeof gateAnswer>[2];
        const answer = await gateAnswer(request('/gate/payments'), gateConfig({ form }), decider);
        expect(answer.status, `${what} ${form}`).toBe(503);
        expect(answer.headers).toEqual({
          'x-request-id': ID,
          'content-type': 'application/problem+json',
          'retry-after': '1',
        });
        expect(problemOf(answer)).toMatchObject({
          type: '/problems/circuitlog-unavailable',
          status: 503,
          code: 'CIRCUITLOG_UNAVAILABLE',
          circuit: 'payments',
          instance: '/gate/payments',
        });
      }
    }
  });

  it('answers nginx 403 with the same headers and problem', async () => {
    for (const [what, fail] of failures) {
      const decider = { allowed: fail } as unknown as Parameters<typeof gateAnswer>[2];
      const answer = await gateAnswer(request('/gate/payments'), gateConfig({ form: 'nginx' }), decider);
      expect(answer.status, what).toBe(403);
      expect(answer.headers['retry-after']).toBe('1');
      expect(problemOf(answer).code).toBe('CIRCUITLOG_UNAVAILABLE');
    }
  });
});
