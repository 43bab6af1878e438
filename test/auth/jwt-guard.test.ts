import { describe, expect, it } from 'vitest';
import type { JwtLookup } from '../../src/auth/bearer.js';
import { defaultCallers, type Identity } from '../../src/auth/identity.js';
import { buildObservedApp, listen } from '../observe/observe-app.js';
import { bearer, buildCredentialsApp, entry } from './credentials-app.js';

// The guard's side of JWT identities (issue 30): a bearer token no credential lists that looks
// like a JWT goes to the verifier (h-jwt's), synchronously when cached, else awaited once.
const JWT = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJjaGVja291dCJ9.c2lnbmF0dXJl';
const BAD_JWT = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJldmUifQ.YmFk';
const PLAIN = 'plain-token-0123456789abcdef';

const jwtIdentity: Identity = {
  id: 'checkout',
  kind: 'jwt',
  scopes: new Set(['read', 'report']),
  circuits: null,
  callers: defaultCallers('checkout'),
  maxNewCircuits: null,
};

/** A verifier double: JWT verifies (then is cached), BAD_JWT does not; counts the verifications. */
function fakeVerifier() {
  const cache = new Map<string, Identity | null>();
  const verified: string[] = [];
  const lookup: JwtLookup = {
    cached: (token) => cache.get(token),
    verify: async (token) => {
      verified.push(token);
      const identity = token === JWT ? jwtIdentity : null;
      cache.set(token, identity);
      return identity;
    },
  };
  return { lookup, verified };
}

describe('JWT identities at the request guard', () => {
  it('verifies a JWT once, then answers from the cache, with its scopes', async () => {
    const jwt = fakeVerifier();
    const app = buildCredentialsApp([entry('ops', PLAIN, ['admin'])], { deps: { jwt: jwt.lookup } });
    expect((await app.request('POST', '/circuits/pay/success', undefined, bearer(JWT))).status).toBe(200);
    expect((await app.request('GET', '/circuits/pay', undefined, bearer(JWT))).status).toBe(200);
    const denied = await app.request('DELETE', '/circuits/pay', undefined, bearer(JWT));
    expect([denied.status, ((await denied.json()) as { code: string }).code]).toEqual([403, 'INSUFFICIENT_SCOPE']);
    expect(jwt.verified).toEqual([JWT]);
    expect((await app.request('DELETE', '/circuits/pay', undefined, bearer(PLAIN))).status).toBe(204);
  });

  it('refuses a JWT the verifier refuses, and a token that is no JWT without asking it: 401', async () => {
    const jwt = fakeVerifier();
    const app = buildCredentialsApp([], { deps: { jwt: jwt.lookup } });
    for (const token of [BAD_JWT, BAD_JWT, PLAIN]) {
      const res = await app.request('GET', '/circuits', undefined, bearer(token));
      expect([res.status, res.headers.get('www-authenticate')]).toEqual([401, 'Bearer realm="circuitlog"']);
    }
    expect(jwt.verified).toEqual([BAD_JWT]);
  });

  it('asks for a credential with JWTs alone configured (no token, no file)', async () => {
    const jwt = fakeVerifier();
    const app = buildObservedApp({ deps: { jwt: jwt.lookup } });
    expect((await app.request('GET', '/circuits')).status).toBe(401);
    expect((await app.request('GET', '/circuits', undefined, bearer(JWT))).status).toBe(200);
  });

  it('answers GET /allowed for a JWT not yet verified (the fast path leaves it to the route), and again once cached', async () => {
    const jwt = fakeVerifier();
    const app = buildCredentialsApp([], { deps: { jwt: jwt.lookup } });
    const served = await listen(app);
    try {
      for (let i = 0; i < 2; i++) {
        const res = await fetch(`${served.url}/circuits/pay/allowed`, { headers: bearer(JWT) });
        expect([res.status, await res.json()]).toEqual([200, { allowed: true, state: 'closed', circuit: null }]);
      }
      expect(jwt.verified).toEqual([JWT]);
    } finally {
      await served.close();
    }
  });
});
