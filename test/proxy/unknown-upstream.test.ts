import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config.js';
import { createUndiciClient } from '../../src/proxy/upstream-client.js';
import { buildApp } from '../helper.js';
import { useServedApp } from '../http/served-app.js';

const serveApp = useServedApp();

/** An app over upstreams with these names (one node each; none is ever contacted here), served on loopback. */
async function appWith(names: string[]) {
  const yaml = `local_dc: dc1\nupstreams:\n${names.map((n) => `  ${n}:\n    nodes: [{ id: n1, dc: dc1, url: "http://127.0.0.1:9" }]\n    health_check: { enabled: false }`).join('\n')}\n`;
  const config = parseConfigText(yaml, 'test');
  const app = await serveApp({ proxy: { localDc: 'dc1', upstreams: config.upstreams, client: createUndiciClient() } });
  return { request: (method: string, path: string) => fetch(`${app.url}${path}`, { method }) };
}

async function problemOf(res: Response) {
  expect(res.status).toBe(404);
  expect(res.headers.get('content-type')).toBe('application/problem+json');
  return (await res.json()) as { code: string; detail: string; upstreams: string[] };
}

describe('unknown upstream', () => {
  it('lists the configured upstreams in the 404 detail and its upstreams member', async () => {
    const app = await appWith(['users', 'orders']);
    const problem = await problemOf(await app.request('GET', '/proxy/user/42'));
    expect(problem.code).toBe('UPSTREAM_NOT_FOUND');
    expect(problem.detail).toBe("No upstream named 'user'. Configured: users, orders.");
    expect(problem.upstreams).toEqual(['users', 'orders']);
  });

  it('lists at most 20 names, and says how many more there are', async () => {
    const names = Array.from({ length: 30 }, (_, i) => `u${String(i).padStart(2, '0')}`);
    const problem = await problemOf(await (await appWith(names)).request('GET', '/proxy/nope/x'));
    expect(problem.upstreams).toEqual(names.slice(0, 20));
    expect(problem.detail).toContain('u19 and 10 more.');
  });

  it('with no upstream configured, tells the caller to set CIRCUITLOG_CONFIG', async () => {
    const app = buildApp();
    const problem = await problemOf(await app.request('GET', '/proxy/users/42'));
    expect(problem.code).toBe('UPSTREAM_NOT_FOUND');
    expect(problem.detail).toContain('CIRCUITLOG_CONFIG');
    expect(problem.upstreams).toEqual([]);
  });
});
