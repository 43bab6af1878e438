import { describe, expect, it } from 'vitest';
import { buildApp } from '../helper.js';

const TOKEN = 'a-very-secret-token-123';

async function expectProblem(res: Response, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toBe('application/problem+json');
  const body = await res.json();
  expect(body).toMatchObject({ status, code, type: expect.stringMatching(/^\/problems\//), title: expect.any(String) });
  expect(typeof body.detail).toBe('string');
  expect(typeof body.instance).toBe('string');
  return body;
}

describe('bad input', () => {
  it('answers 400 for a body that is not JSON, and records nothing', async () => {
    const t = buildApp();
    await expectProblem(await t.request('POST', '/circuits/svc/outcomes', '{"success":'), 400, 'INVALID_JSON');
    await expectProblem(await t.request('POST', '/circuits/svc/call', 'nope'), 400, 'INVALID_JSON');
    expect((await t.request('GET', '/circuits/svc')).status).toBe(404);
  });

  it.each([
    ['/circuits/svc/call', { success: 'false' }, 'success'],
    ['/circuits/svc/call', { threshold: 0 }, 'threshold'],
    ['/circuits/svc/call', { threshold: 2.5 }, 'threshold'],
    ['/circuits/svc/call', { timeout_seconds: -3 }, 'timeout_seconds'],
    ['/circuits/svc/failure', { timeout_seconds: '30' }, 'timeout_seconds'],
    ['/circuits/svc/outcomes', { success: 1 }, 'success'],
    ['/circuits/svc/outcomes', [true], '(body)'],
  ])('answers 422 naming the field for POST %s %j', async (path, body, field) => {
    const t = buildApp();
    const problem = await expectProblem(await t.request('POST', path, body), 422, 'VALIDATION_FAILED');
    expect(problem.errors.map((e: { field: string }) => e.field)).toContain(field);
    expect((await t.request('GET', '/circuits/svc')).status).toBe(404);
  });

  it('answers 415 for a body sent without a JSON content type', async () => {
    const t = buildApp();
    const res = await t.app.request('/circuits/svc/call', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': '17' },
      body: '{"success":false}',
    });
    await expectProblem(res, 415, 'UNSUPPORTED_MEDIA_TYPE');
    expect((await t.request('GET', '/circuits/svc')).status).toBe(404);
  });

  it('answers 413 for a body over the limit', async () => {
    const t = buildApp({ apiBodyLimitBytes: 100 });
    const body = JSON.stringify({ success: true, pad: 'x'.repeat(200) });
    const res = await t.app.request('/circuits/svc/outcomes', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': String(body.length) },
      body,
    });
    await expectProblem(res, 413, 'PAYLOAD_TOO_LARGE');
  });

  it('answers 400 for a bad query', async () => {
    const t = buildApp();
    await expectProblem(await t.request('GET', '/circuits?state=broken'), 400, 'INVALID_QUERY');
    await expectProblem(await t.request('GET', '/circuits?limit=0'), 400, 'INVALID_QUERY');
    await expectProblem(await t.request('GET', '/circuits/svc/events?limit=x'), 400, 'INVALID_QUERY');
  });

  it('answers 404 for an unknown route and 405 with Allow for a wrong method', async () => {
    const t = buildApp();
    await expectProblem(await t.request('GET', '/nowhere'), 404, 'NOT_FOUND');
    const res = await t.request('PUT', '/circuits/svc');
    await expectProblem(res, 405, 'METHOD_NOT_ALLOWED');
    expect(res.headers.get('allow')).toBe('DELETE, GET, HEAD, PATCH');
    const post = await t.request('GET', '/circuits/svc/outcomes');
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('POST');
  });
});

describe('bearer token', () => {
  it('is not needed when CIRCUITLOG_TOKEN is unset', async () => {
    const t = buildApp();
    expect((await t.request('GET', '/circuits')).status).toBe(200);
  });

  it('guards every /circuits route when set', async () => {
    const t = buildApp({ token: TOKEN });
    for (const [method, path] of [
      ['GET', '/circuits'],
      ['GET', '/circuits/svc'],
      ['POST', '/circuits/svc/failure'],
      ['GET', '/circuits/svc/allowed'],
    ]) {
      const res = await t.request(method!, path!);
      await expectProblem(res, 401, 'UNAUTHORIZED');
      expect(res.headers.get('www-authenticate')).toContain('Bearer');
    }
    await expectProblem(
      await t.request('GET', '/circuits', undefined, { authorization: `Bearer ${TOKEN}x` }),
      401,
      'UNAUTHORIZED',
    );
    await expectProblem(await t.request('GET', '/circuits', undefined, { authorization: TOKEN }), 401, 'UNAUTHORIZED');
    expect(
      (await t.request('POST', '/circuits/svc/failure', undefined, { authorization: `Bearer ${TOKEN}` })).status,
    ).toBe(200);
    // The rejected failure above recorded nothing: only the authorised one counts.
    const circuit = await (
      await t.request('GET', '/circuits/svc', undefined, { authorization: `Bearer ${TOKEN}` })
    ).json();
    expect(circuit.failure_count).toBe(1);
  });

  it('leaves /health open', async () => {
    const t = buildApp({ token: TOKEN });
    const res = await t.request('GET', '/health');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok' });
  });
});

describe('described API', () => {
  it('serves an OpenAPI 3.1 document covering every route', async () => {
    const t = buildApp();
    const doc = await (await t.request('GET', '/openapi.json')).json();
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths).sort()).toEqual([
      '/audit',
      '/circuits',
      '/circuits/{name}',
      '/circuits/{name}/allowed',
      '/circuits/{name}/backtest',
      '/circuits/{name}/backtest/{id}.svg',
      '/circuits/{name}/call',
      '/circuits/{name}/events',
      '/circuits/{name}/failure',
      '/circuits/{name}/outcomes',
      '/circuits/{name}/reset',
      '/circuits/{name}/success',
      '/health',
      '/health/ready',
      '/outcomes',
      '/problems/{kind}',
      '/whoami',
    ]);
    expect(Object.keys(doc.paths['/circuits/{name}']).sort()).toEqual(['delete', 'get', 'patch']);
    expect(doc.paths['/circuits/{name}/allowed'].get.responses['503']).toBeDefined();
  });

  it('serves a Swagger UI page', async () => {
    const t = buildApp();
    const res = await t.request('GET', '/docs');
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('/openapi.json');
  });

  it('documents each problem type at its URI', async () => {
    const t = buildApp();
    expect(await (await t.request('GET', '/problems/circuit-open')).json()).toMatchObject({
      status: 503,
      title: 'Circuit is open',
    });
  });
});
