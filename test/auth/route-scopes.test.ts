import { describe, expect, it } from 'vitest';
import { type Identity, SCOPES, type Scope } from '../../src/auth/identity.js';
import { identityOfEntry } from '../../src/auth/credentials.js';
import { allowsRoute, ROUTE_SCOPES, routeScope } from '../../src/auth/route-scopes.js';
import { bearer, buildCredentialsApp, entry, scopeToken } from './credentials-app.js';

const ENTRIES = SCOPES.map((scope) => entry(`only-${scope}`, scopeToken(scope), [scope]));
const METHODS = ['get', 'post', 'patch', 'delete'] as const;

/** A request body each route takes (a wrong one is a 4xx, still not a 403: the scope decides before it is read). */
function bodyFor(method: string, path: string): unknown {
  if (method === 'patch') return { failure_threshold: 3 };
  if (path === '/outcomes') return { outcomes: [{ circuit: 'walk', success: true }] };
  if (path.endsWith('/outcomes')) return { success: true };
  return undefined;
}

async function operations(app: ReturnType<typeof buildCredentialsApp>) {
  const doc = (await (await app.request('GET', '/openapi.json')).json()) as { paths: Record<string, object> };
  return Object.entries(doc.paths).flatMap(([path, ops]) =>
    METHODS.filter((m) => m in ops).map((method) => ({ method, path })),
  );
}

describe('the route x scope table', () => {
  it('has a row for every route of the OpenAPI document', async () => {
    const app = buildCredentialsApp(ENTRIES);
    const missing = (await operations(app)).filter(
      ({ method, path }) => !ROUTE_SCOPES.some((r) => r.method === method.toUpperCase() && r.path === path),
    );
    expect(missing).toEqual([]);
  });

  it('answers every route with a credential of each scope as the table says: 403 insufficient-scope, or not a 403', async () => {
    const app = buildCredentialsApp(ENTRIES);
    const ops = await operations(app);
    // DELETE last: the circuit the others use stays until then.
    ops.sort((a, b) => Number(a.method === 'delete') - Number(b.method === 'delete'));
    const seen: string[] = [];
    for (const { method, path } of ops) {
      for (const scope of SCOPES) {
        await app.request('PATCH', '/circuits/walk', { failure_threshold: 5 }, bearer(scopeToken('admin')));
        const target = path.replace('{name}', 'walk').replace('{kind}', 'not-found');
        const identity: Identity = identityOfEntry(ENTRIES.find((e) => e.scopes[0] === scope)!);
        const row = routeScope(method.toUpperCase(), target)!;
        // PATCH with a policy field needs `configure` (only `forced_state` is `operate`).
        const permitted =
          method === 'patch' ? identity.scopes.has('configure') || scope === 'admin' : allowsRoute(identity, row.scope);
        const res = await app.request(method.toUpperCase(), target, bodyFor(method, path), bearer(scopeToken(scope)));
        await res.body?.cancel(); // the event stream never ends by itself
        const got = res.status === 403 ? 'refused' : 'answered';
        seen.push(`${method.toUpperCase()} ${path} ${scope}: ${got} (${res.status})`);
        expect(`${method.toUpperCase()} ${path} ${scope}: ${got}`).toBe(
          `${method.toUpperCase()} ${path} ${scope}: ${permitted ? 'answered' : 'refused'}`,
        );
        if (!permitted) {
          const problem = (await (
            await app.request(method.toUpperCase(), target, bodyFor(method, path), bearer(scopeToken(scope)))
          ).json()) as Record<string, unknown>;
          expect(problem).toMatchObject({ code: 'INSUFFICIENT_SCOPE', type: '/problems/insufficient-scope' });
        }
      }
    }
    // The walk covered the routes of each scope.
    for (const scope of SCOPES)
      expect(seen.filter((s) => s.endsWith(`${scope}: answered (200)`)).length).toBeGreaterThan(0);
  });

  it('lets a PATCH of only forced_state through with operate, and refuses it any other field', async () => {
    const app = buildCredentialsApp(ENTRIES);
    const operate = bearer(scopeToken('operate'));
    await app.request('PATCH', '/circuits/pay', { failure_threshold: 5 }, bearer(scopeToken('admin')));
    expect((await app.request('PATCH', '/circuits/pay', { forced_state: 'open' }, operate)).status).toBe(200);
    expect((await app.request('PATCH', '/circuits/pay', { forced_state: null }, operate)).status).toBe(200);
    const mixed = await app.request('PATCH', '/circuits/pay', { forced_state: 'open', failure_threshold: 2 }, operate);
    expect(mixed.status).toBe(403);
    expect(await mixed.json()).toMatchObject({ code: 'INSUFFICIENT_SCOPE', scope: 'configure' });
    expect(
      (await app.request('PATCH', '/circuits/pay', { forced_state: 'open' }, bearer(scopeToken('read')))).status,
    ).toBe(403);
  });

  it('refuses a report credential every force, PATCH, DELETE, reset and backup', async () => {
    const app = buildCredentialsApp(ENTRIES);
    const report = bearer(scopeToken('report'));
    expect((await app.request('POST', '/circuits/pay/success', undefined, report)).status).toBe(200);
    const refused = [
      await app.request('PATCH', '/circuits/pay', { forced_state: 'open' }, report),
      await app.request('PATCH', '/circuits/pay', { failure_threshold: 2 }, report),
      await app.request('DELETE', '/circuits/pay', undefined, report),
      await app.request('POST', '/circuits/pay/reset', undefined, report),
      await app.request('GET', '/admin/backup', undefined, report),
    ];
    expect(refused.map((r) => r.status)).toEqual([403, 403, 403, 403, 403]);
    const scopes = await Promise.all(refused.map(async (r) => ((await r.json()) as { scope: Scope }).scope));
    expect(scopes).toEqual(['operate or configure', 'operate or configure', 'configure', 'operate', 'admin']);
  });

  it('answers a missing and a wrong token alike: 401 with WWW-Authenticate, counted by reason', async () => {
    const app = buildCredentialsApp(ENTRIES);
    const missing = await app.request('GET', '/circuits');
    const wrong = await app.request('GET', '/circuits', undefined, bearer('not-a-listed-token-at-all'));
    expect([missing.status, wrong.status]).toEqual([401, 401]);
    expect(missing.headers.get('www-authenticate')).toBe('Bearer realm="circuitlog"');
    expect(wrong.headers.get('www-authenticate')).toBe('Bearer realm="circuitlog"');
    const strip = (p: Record<string, unknown>) => ({
      ...p,
      instance: undefined,
      request_id: undefined,
      timestamp: undefined,
    });
    expect(strip((await missing.json()) as Record<string, unknown>)).toEqual(
      strip((await wrong.json()) as Record<string, unknown>),
    );
    await app.request('GET', '/admin/backup', undefined, bearer(scopeToken('read')));
    const metrics = await app.scrape(bearer(scopeToken('read')));
    expect(metrics.get('circuitlog_auth_refusals_total{reason="missing"}')).toBe(1);
    expect(metrics.get('circuitlog_auth_refusals_total{reason="invalid"}')).toBe(1);
    expect(metrics.get('circuitlog_auth_refusals_total{reason="insufficient_scope"}')).toBe(1);
  });

  it('keeps CIRCUITLOG_TOKEN as the credential token, with every scope, beside the file', async () => {
    const token = 'the-circuitlog-token-0123456789';
    const app = buildCredentialsApp(ENTRIES, { token });
    expect((await app.request('PATCH', '/circuits/pay', { failure_threshold: 2 }, bearer(token))).status).toBe(201);
    expect((await app.request('GET', '/admin/backup', undefined, bearer(token))).status).toBe(200);
    expect((await app.request('GET', '/circuits', undefined, bearer(scopeToken('read')))).status).toBe(200);
  });
});
