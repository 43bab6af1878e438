import { describe, expect, it } from 'vitest';
import { hostRule, misdirected } from '../../src/http/request-guard.js';
import { buildObservedApp } from '../observe/observe-app.js';
import { buildApp } from '../helper.js';

const ATTACKER = 'https://attacker.example';

async function problem(res: Response, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toBe('application/problem+json');
  const body = await res.json();
  expect(body.code).toBe(code);
  return body;
}

/** A raw request through the app, headers exactly as given. */
const send = (
  t: ReturnType<typeof buildApp>,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
) => t.app.request(path, { method, headers, body });

describe('cross-site requests that change state (no token set)', () => {
  it("refuses fetch(..., {mode: 'no-cors', method: 'POST'}) from another site, and records nothing", async () => {
    const t = buildApp();
    const headers = {
      origin: ATTACKER,
      'sec-fetch-site': 'cross-site',
      'sec-fetch-mode': 'no-cors',
      'content-type': 'text/plain;charset=UTF-8',
    };
    for (let i = 0; i < 5; i++)
      await problem(await send(t, 'POST', '/circuits/svc/failure', headers, 'x'), 403, 'CROSS_SITE_REQUEST');
    expect((await t.request('GET', '/circuits/svc')).status).toBe(404);
  });

  it('refuses a plain <form method=POST> to /reset from another site, with or without Sec-Fetch-Site', async () => {
    const t = buildApp();
    for (let i = 0; i < 5; i++) await t.request('POST', '/circuits/svc/failure');
    const form = { origin: ATTACKER, 'content-type': 'application/x-www-form-urlencoded' };
    await problem(
      await send(t, 'POST', '/circuits/svc/reset', { ...form, 'sec-fetch-site': 'cross-site' }, ''),
      403,
      'CROSS_SITE_REQUEST',
    );
    await problem(await send(t, 'POST', '/circuits/svc/reset', form, ''), 403, 'CROSS_SITE_REQUEST'); // a browser without Fetch Metadata
    expect((await (await t.request('GET', '/circuits/svc')).json()).state).toBe('open');
  });

  it('refuses same-site (another port or subdomain) and Origin: null, as Go’s CrossOriginProtection does', async () => {
    const t = buildApp();
    await problem(
      await send(t, 'POST', '/circuits/svc/failure', { 'sec-fetch-site': 'same-site' }),
      403,
      'CROSS_SITE_REQUEST',
    );
    await problem(await send(t, 'POST', '/circuits/svc/failure', { origin: 'null' }), 403, 'CROSS_SITE_REQUEST');
    await problem(
      await send(
        t,
        'PATCH',
        '/circuits/svc',
        { origin: 'http://localhost:3000', host: 'localhost:8080', 'content-type': 'application/json' },
        '{}',
      ),
      403,
      'CROSS_SITE_REQUEST',
    );
    await problem(
      await send(t, 'DELETE', '/circuits/svc', { 'sec-fetch-site': 'cross-site' }),
      403,
      'CROSS_SITE_REQUEST',
    );
  });

  it('accepts the same origin, a typed URL (Sec-Fetch-Site: none) and clients that send neither header', async () => {
    const t = buildApp();
    expect(
      (await send(t, 'POST', '/circuits/a/failure', { 'sec-fetch-site': 'same-origin', origin: 'http://localhost' }))
        .status,
    ).toBe(200);
    expect((await send(t, 'POST', '/circuits/b/failure', { 'sec-fetch-site': 'none' })).status).toBe(200);
    expect(
      (await send(t, 'POST', '/circuits/c/failure', { origin: 'http://localhost:8080', host: 'localhost:8080' }))
        .status,
    ).toBe(200);
    expect((await send(t, 'POST', '/circuits/d/failure', {})).status).toBe(200); // curl -X POST: no type, no body
    expect((await send(t, 'GET', '/circuits/a', { 'sec-fetch-site': 'cross-site', origin: ATTACKER })).status).toBe(
      200,
    ); // reads are safe
  });

  it('answers 415 to a form, multipart or text Content-Type even with an empty body', async () => {
    const t = buildApp();
    for (const type of ['application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'text/plain']) {
      await problem(
        await send(t, 'POST', '/circuits/svc/failure', { 'content-type': type }, ''),
        415,
        'UNSUPPORTED_MEDIA_TYPE',
      );
    }
    expect((await t.request('GET', '/circuits/svc')).status).toBe(404);
    expect((await send(t, 'POST', '/circuits/svc/failure', { 'content-type': 'application/json' })).status).toBe(200);
  });
});

describe('Host check (DNS rebinding)', () => {
  const loopback = hostRule('127.0.0.1', undefined);

  it('answers 421 to a Host that is not this server when bound to loopback, on every route', async () => {
    const t = buildApp({ hosts: loopback });
    for (const [method, path] of [
      ['GET', '/circuits'],
      ['GET', '/health'],
      ['POST', '/circuits/svc/failure'],
    ]) {
      const body = await problem(
        await send(t, method!, path!, { host: 'attacker.example:8080' }),
        421,
        'MISDIRECTED_REQUEST',
      );
      expect(body.detail).toContain("'attacker.example'");
    }
    expect((await t.request('GET', '/circuits/svc')).status).toBe(404);
  });

  it('answers IP literals and localhost, and the names of server.allowed_hosts', async () => {
    const t = buildApp({ hosts: hostRule('127.0.0.1', ['circuitlog.internal', '.corp.example']) });
    for (const host of [
      '127.0.0.1:8080',
      '[::1]:8080',
      'localhost:8080',
      'app.localhost',
      '10.1.2.3',
      'circuitlog.internal',
      'CIRCUITLOG.internal:80',
      'corp.example',
      'a.b.corp.example',
    ]) {
      expect((await send(t, 'GET', '/health', { host })).status, host).toBe(200);
    }
    for (const host of ['circuitlog.internal.attacker.example', 'evilcorp.example', 'attacker.example']) {
      expect((await send(t, 'GET', '/health', { host })).status, host).toBe(421);
    }
  });

  it('checks nothing on a public address without a list, and the list when there is one', () => {
    expect(hostRule('0.0.0.0', undefined)).toBeNull();
    expect(hostRule('0.0.0.0', [])).toBeNull();
    const listed = hostRule('0.0.0.0', ['shop.example'])!;
    expect([listed('shop.example'), listed('attacker.example'), listed('192.0.2.7')]).toEqual([true, false, true]);
    expect(hostRule('::1', undefined)!('attacker.example')).toBe(false);
    expect(hostRule('localhost', undefined)!('localhost')).toBe(true);
  });
});

describe('dashboard security headers', () => {
  it('sends CSP (frame-ancestors none), X-Frame-Options DENY and nosniff with the page, its assets and its data', async () => {
    const app = buildObservedApp();
    for (const path of [
      '/dashboard',
      '/dashboard/assets/dashboard.js',
      '/dashboard/assets/dashboard.css',
      '/dashboard/api/state',
    ]) {
      const res = await app.request('GET', path);
      expect(res.status, path).toBe(200);
      const csp = res.headers.get('content-security-policy') ?? '';
      expect(csp, path).toContain("frame-ancestors 'none'");
      expect(csp, path).toContain("script-src 'self'");
      expect(csp, path).not.toContain('unsafe-inline');
      expect(res.headers.get('x-frame-options'), path).toBe('DENY');
      expect(res.headers.get('x-content-type-options'), path).toBe('nosniff');
    }
  });
});

describe('misdirected remembers its judgements without changing them', () => {
  it('answers every Host as the rule does, again and again, past the memo bound', () => {
    const rule = hostRule('127.0.0.1', ['api.example.com']);
    const hosts = ['api.example.com:8080', 'evil.example:80', 'localhost', '127.0.0.1:1'];
    for (let i = 0; i < 300; i++) hosts.push(`h${i}.example:${i}`, `[::${i.toString(16)}]:1`);
    for (let round = 0; round < 3; round++) {
      for (const host of hosts) {
        const refused = misdirected(rule, host) !== null;
        const expected = !/^(api\.example\.com|localhost|127\.0\.0\.1|\[::[0-9a-f]+\])(:\d+)?$/.test(host);
        expect(refused, `${host} in round ${round}`).toBe(expected);
      }
    }
  });
});
