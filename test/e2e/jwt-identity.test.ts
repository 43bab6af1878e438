import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AUDIENCE,
  ISSUER,
  type JwksHost,
  type SigningKey,
  serveJwks,
  signingKey,
  signToken,
} from '../auth/jwks-host.js';
import { type ServerProcess, startServer, tempDir } from '../server-process.js';

// Issue 30: the real server with `auth.jwt.jwks_url` on a JWKS this test serves on loopback.

describe('JWT identities, end to end', () => {
  let host: JwksHost;
  let key: SigningKey;
  let server: ServerProcess;
  let dir: string;

  beforeAll(async () => {
    key = await signingKey('cluster-key-1');
    host = await serveJwks([key.jwk]);
    dir = tempDir();
    const config = path.join(dir, 'circuitlog.yaml');
    fs.writeFileSync(
      config,
      [
        'auth:',
        '  jwt:',
        `    jwks_url: ${host.url}`,
        `    issuer: ${ISSUER}`,
        `    audience: ${AUDIENCE}`,
        '    scopes:',
        '      "system:serviceaccount:shop:*": [read]',
        '',
      ].join('\n'),
    );
    server = await startServer({ CIRCUITLOG_DB: path.join(dir, 'circuitlog.db'), CIRCUITLOG_CONFIG: config });
  });

  afterAll(async () => {
    await server?.stop();
    await host?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const get = (p: string, token: string) =>
    fetch(`${server.url}${p}`, { headers: { authorization: `Bearer ${token}` } });

  it('lets a valid token read: GET /circuits and /allowed, first checked, then from memory', async () => {
    const token = await signToken(key, Date.now(), { scope: undefined }); // read from auth.jwt.scopes
    expect((await fetch(`${server.url}/circuits`)).status).toBe(401); // a credential is asked for
    expect((await get('/circuits', token)).status).toBe(200);
    for (let i = 0; i < 2; i++) {
      const allowed = await get('/circuits/payments/allowed', token);
      expect(allowed.status).toBe(200);
      expect(await allowed.json()).toMatchObject({ allowed: true });
    }
  });

  it('answers an expired token 401 with WWW-Authenticate: Bearer', async () => {
    const token = await signToken(key, Date.now() - 2 * 3600_000); // expired an hour ago
    for (const p of ['/circuits', '/circuits/payments/allowed']) {
      const response = await get(p, token);
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toMatch(/^Bearer /);
    }
  });

  it('answers a token without the report scope posting an outcome 403 insufficient-scope', async () => {
    const token = await signToken(key, Date.now(), { scope: 'read' });
    const response = await fetch(`${server.url}/circuits/payments/outcomes`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{"success":false}',
    });
    expect(response.status).toBe(403);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await response.json()).toMatchObject({ type: '/problems/insufficient-scope', scope: 'report' });
  });
});
