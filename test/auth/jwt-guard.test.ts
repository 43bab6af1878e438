import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenAuthenticator } from '../../src/auth/bearer.js';
import { TOKEN_IDENTITY } from '../../src/auth/identity.js';
import { createJwtVerifier, type JwtVerifier } from '../../src/auth/jwt.js';
import { withJwt } from '../../src/auth/jwt-bearer.js';
import { jwtSchema } from '../../src/config/auth-schema.js';
import { requestGuard } from '../../src/http/request-guard.js';
import { serveApp } from '../../src/server/node-server.js';
import { rawRequest } from '../http/served-app.js';
import { buildApp, FakeClock, silentLogger } from '../helper.js';
import { AUDIENCE, ISSUER, SUBJECT, type SigningKey, signingKey, signToken } from './jwks-host.js';

// auth.jwt in the request guard (src/auth/jwt-bearer.ts, src/http/request-guard.ts): a JWT not
// seen before is awaited, a known one is answered synchronously, /allowed's raw listener included.

let key: SigningKey;
let verifier: JwtVerifier;
const clock = new FakeClock();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-jwt-guard-'));
const servers: http.Server[] = [];

beforeAll(async () => {
  key = await signingKey('guard-key');
  const file = path.join(dir, 'jwks.json');
  fs.writeFileSync(file, JSON.stringify({ keys: [key.jwk] }));
  const config = jwtSchema.parse({ jwks_file: file, issuer: ISSUER, audience: AUDIENCE });
  verifier = createJwtVerifier(config, { now: clock.now, logger: silentLogger });
});

afterAll(async () => {
  verifier.close();
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describe('auth.jwt in the request guard', () => {
  it("binds a JWT's identity for the routes: its scopes decide (403 insufficient-scope without report)", async () => {
    const t = buildApp({ jwt: verifier });
    const reader = await signToken(key, clock.nowMs, { scope: 'read', sub: 'reader' });
    const reporter = await signToken(key, clock.nowMs, { scope: 'read report', sub: 'reporter' });
    expect((await t.request('GET', '/circuits', undefined, bearer(reader))).status).toBe(200);
    const refused = await t.request('POST', '/circuits/x/failure', undefined, bearer(reader));
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ type: '/problems/insufficient-scope', scope: 'report' });
    expect((await t.request('POST', '/circuits/x/failure', undefined, bearer(reporter))).status).toBe(200);
  });

  it('answers a refused JWT, and no credential at all, 401 with WWW-Authenticate: Bearer', async () => {
    const t = buildApp({ jwt: verifier });
    const expired = await signToken(key, clock.nowMs, { exp: Math.floor(clock.nowMs / 1000) - 3600 });
    for (const headers of [bearer(expired), {}]) {
      const response = await t.request('GET', '/circuits', undefined, headers);
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toMatch(/^Bearer /);
    }
  });

  it('keeps CIRCUITLOG_TOKEN working beside auth.jwt', async () => {
    const t = buildApp({ jwt: verifier, token: 'a-token-of-sixteen-chars' });
    expect((await t.request('GET', '/circuits', undefined, bearer('a-token-of-sixteen-chars'))).status).toBe(200);
  });

  it("asks the verifier's cache about a bearer value no credential claims, and verifies only a JWT's shape", async () => {
    const asked: string[] = [];
    const double: JwtVerifier = {
      cached: (token) => {
        asked.push(`cached ${token}`);
        return undefined;
      },
      verify: async (token) => {
        asked.push(`verify ${token}`);
        return null;
      },
      close: () => {},
    };
    const authenticate = withJwt(tokenAuthenticator('a-token-of-sixteen-chars'), double);
    expect(authenticate('Bearer a-token-of-sixteen-chars')).toBe(TOKEN_IDENTITY);
    expect(authenticate('Basic a.b.c')).toBeNull();
    expect(authenticate('Bearer')).toBeNull();
    expect(authenticate(undefined)).toBeNull();
    expect(asked).toEqual([]);
    expect(authenticate('Bearer not-a-jwt')).toBeNull();
    expect(asked).toEqual(['cached not-a-jwt']);
    expect(await authenticate('bearer a.b.c')).toBeNull();
    expect(asked).toEqual(['cached not-a-jwt', 'cached a.b.c', 'verify a.b.c']);
  });

  it('is synchronous for a JWT it has verified: a promise only the first time', async () => {
    const guard = requestGuard(null, withJwt(null, verifier));
    const token = await signToken(key, clock.nowMs, { sub: 'sync-check' });
    const header = (name: string) => (name === 'authorization' ? `Bearer ${token}` : undefined);
    const first = guard('GET', '/circuits/a/allowed', header);
    expect(first).toBeInstanceOf(Promise);
    expect(await first).toMatchObject({ id: 'sync-check', kind: 'jwt' });
    const again = guard('GET', '/circuits/a/allowed', header);
    expect(again).not.toBeInstanceOf(Promise);
    expect(again).toMatchObject({ id: 'sync-check', kind: 'jwt' });
  });

  it("answers /allowed on the raw listener for a verified JWT, and leaves a new one to the route's await", async () => {
    const t = buildApp({ jwt: verifier });
    const taken: boolean[] = [];
    const server = http.createServer();
    const allowedListener: typeof t.allowedListener = (incoming, outgoing) => {
      const answered = t.allowedListener(incoming, outgoing);
      taken.push(answered);
      return answered;
    };
    serveApp(server, { fetch: t.app.fetch, allowedListener }, silentLogger);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const headers = bearer(await signToken(key, clock.nowMs, { sub: SUBJECT }));
    const answers = [];
    for (let i = 0; i < 2; i++) answers.push(await rawRequest(url, 'GET', '/circuits/payments/allowed', headers));
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    expect(answers[0]!.body).toBe(answers[1]!.body);
    expect(taken).toEqual([false, true]);
  });
});
