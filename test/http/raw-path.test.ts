import { describe, expect, it } from 'vitest';
import { uriReference } from '../../src/http/problem.js';
import { rawRequest, useServedApp } from './served-app.js';

const serveApp = useServedApp();

/** An app with circuit `victim` open (5 failures), served on loopback. */
async function withOpenVictim() {
  const t = await serveApp();
  for (let i = 0; i < 5; i++) await t.request('POST', '/circuits/victim/outcomes', { success: false });
  return t;
}

const victimState = async (t: Awaited<ReturnType<typeof withOpenVictim>>) => (await t.breaker.get('victim'))!.state;

describe('routing on the raw path', () => {
  it('refuses POST /circuits/x/%2e%2e/victim/reset with 400 invalid-name and leaves victim open', async () => {
    const t = await withOpenVictim();
    const res = await rawRequest(t.url, 'POST', '/circuits/x/%2e%2e/victim/reset');
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toBe('application/problem+json');
    expect(JSON.parse(res.body)).toMatchObject({
      code: 'INVALID_NAME',
      type: '/problems/invalid-name',
      instance: '/circuits/x/%2e%2e/victim/reset',
    });
    expect(await victimState(t)).toBe('open');
  });

  it.each([
    ['GET', '/circuits/%2e%2e/outcomes'],
    ['POST', '/circuits/%2E/outcomes'],
    ['POST', '/circuits/.%2E/outcomes'],
    ['POST', '/circuits/%2e./victim/reset'],
    ['POST', '/circuits/x/../victim/reset'],
    ['POST', '/circuits/./victim/reset'],
    ['GET', '/circuits/victim/..'],
    ['GET', '/circuits/..'],
    ['GET', '/circuits/%2e%2e'],
    ['POST', '/circuits/a/%2E%2e/%2e%2E/circuits/victim/reset'],
  ])('answers %s %s with 400 invalid-name, changing nothing', async (method, path) => {
    const t = await withOpenVictim();
    const res = await rawRequest(t.url, method, path);
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toMatchObject({ code: 'INVALID_NAME', instance: path });
    expect(await victimState(t)).toBe('open');
  });

  it.each([
    ['POST', '/docs/../circuits/victim/reset'],
    ['POST', '/health/%2e%2e/circuits/victim/reset'],
    ['POST', '/%63ircuits/victim/reset'],
    ['POST', '/circuits/victim/%72eset'],
  ])('does not route %s %s to what URL normalisation or decoding makes of it (404)', async (method, path) => {
    const t = await withOpenVictim();
    const res = await rawRequest(t.url, method, path);
    expect(res.status).toBe(404);
    expect(JSON.parse(res.body)).toMatchObject({ code: 'NOT_FOUND', instance: path });
    expect(await victimState(t)).toBe('open');
  });

  it('keeps the bearer-token check on a raw path that decodes to /circuits', async () => {
    const t = await serveApp({ token: 'a-very-secret-token-123' });
    const res = await rawRequest(t.url, 'GET', '/%63ircuits');
    expect(res.status).toBe(404);
    expect((await rawRequest(t.url, 'GET', '/circuits')).status).toBe(401);
  });

  it('still decodes %2F in a name', async () => {
    const t = await serveApp();
    await t.request('POST', '/circuits/a%2Fb/failure');
    const res = await rawRequest(t.url, 'GET', '/circuits/a%2Fb');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toMatchObject({ name: 'a/b', failure_count: 1 });
  });
});

describe('problem instance', () => {
  // RFC 3986 path characters: unreserved, pct-encoded, sub-delims, ':', '@' and '/'.
  const uriPath = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-Fa-f]{2})*$/;

  it.each(['/circuits/bad%20name/allowed', '/circuits/a%00b', '/circuits/%C3%A9t%C3%A9/allowed', '/circuits/%2e%2e/x'])(
    'is the path as sent for %s',
    async (path) => {
      const t = await serveApp();
      const res = await rawRequest(t.url, 'GET', path);
      expect(res.status).toBe(400);
      const { instance } = JSON.parse(res.body);
      expect(instance).toBe(path);
      expect(instance).toMatch(uriPath);
    },
  );

  it.each([
    ['/circuits/%ZZ/allowed', '/circuits/%25ZZ/allowed'],
    ['/circuits/a%/allowed', '/circuits/a%25/allowed'],
    ['/circuits/{x}"/allowed', '/circuits/%7Bx%7D%22/allowed'],
  ])('encodes what is not valid in a URI path in %s', async (path, instance) => {
    const t = await serveApp();
    const res = await rawRequest(t.url, 'GET', path);
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body).instance).toBe(instance);
  });

  it('is the encoded path under app.request() too', async () => {
    const t = await serveApp();
    const res = await t.request('GET', '/circuits/bad name/allowed');
    expect((await res.json()).instance).toBe('/circuits/bad%20name/allowed');
  });

  it('leaves out the query', async () => {
    const t = await serveApp();
    const res = await rawRequest(t.url, 'GET', '/circuits?limit=0');
    expect(JSON.parse(res.body).instance).toBe('/circuits');
  });
});

describe('a name with a raw slash', () => {
  it("says in the 404 that a '/' in a name is sent as %2F", async () => {
    const t = await serveApp();
    const res = await rawRequest(t.url, 'GET', '/circuits/a/b/allowed');
    expect(res.status).toBe(404);
    expect(JSON.parse(res.body).detail).toContain('%2F');
  });
});

describe('uriReference', () => {
  it.each([
    ['/circuits/\ud800', '/circuits/%EF%BF%BD'],
    ['/circuits/é', '/circuits/%C3%A9'],
    ['/circuits/a b%', '/circuits/a%20b%25'],
    ['/circuits/a%2Fb', '/circuits/a%2Fb'],
  ])('makes %j a valid URI path', (path, expected) => {
    expect(uriReference(path)).toBe(expected);
  });
});
