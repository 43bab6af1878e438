// Issue 30: GET /whoami answers the request's identity (any valid credential, no scope needed).
import { describe, expect, it } from 'vitest';
import { ANONYMOUS, type Identity } from '../../src/auth/identity.js';
import { buildApp } from '../helper.js';

const checkout: Identity = {
  ...ANONYMOUS,
  id: 'checkout',
  kind: 'credential',
  scopes: new Set(['report', 'read']),
  circuits: ['payments/*'],
  callers: ['checkout', 'checkout/*'],
  maxNewCircuits: 10,
};

describe('GET /whoami', () => {
  it('answers anonymous with every scope when no credential is configured', async () => {
    const res = await buildApp().request('GET', '/whoami');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      id: 'anonymous',
      kind: 'anonymous',
      scopes: ['read', 'report', 'operate', 'configure', 'admin'],
      circuits: null,
      callers: null,
    });
  });

  it("answers a named credential's id, kind, scopes and patterns, and 401 without a valid one", async () => {
    const t = buildApp({ authenticate: (h) => (h === 'Bearer c' ? checkout : null) });
    expect(await (await t.request('GET', '/whoami', undefined, { authorization: 'Bearer c' })).json()).toEqual({
      id: 'checkout',
      kind: 'credential',
      scopes: ['read', 'report'],
      circuits: ['payments/*'],
      callers: ['checkout', 'checkout/*'],
    });
    const refused = await t.request('GET', '/whoami', undefined, { authorization: 'Bearer nope' });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toBe('Bearer realm="circuitlog"');
  });

  it('answers CIRCUITLOG_TOKEN as the credential `token`, and is in the OpenAPI document behind the bearer scheme', async () => {
    const t = buildApp({ token: 'secret-token-123' });
    expect((await t.request('GET', '/whoami')).status).toBe(401);
    const res = await t.request('GET', '/whoami', undefined, { authorization: 'Bearer secret-token-123' });
    expect(await res.json()).toMatchObject({ id: 'token', kind: 'token', callers: null });
    const doc = (await (await t.request('GET', '/openapi.json')).json()) as {
      paths: Record<string, Record<string, { security?: unknown; responses: Record<string, unknown> }>>;
    };
    expect(doc.paths['/whoami']?.get?.security).toEqual([{ bearer: [] }]);
    expect(Object.keys(doc.paths['/whoami']!.get!.responses)).toEqual(expect.arrayContaining(['200', '401']));
  });
});
