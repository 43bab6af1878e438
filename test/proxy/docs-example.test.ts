import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config.js';
import { createUndiciClient } from '../../src/proxy/upstream-client.js';
import { useServedApp } from '../http/served-app.js';

const example = fs.readFileSync('examples/proxy.yaml', 'utf8');
const doc = fs.readFileSync('docs/proxy.md', 'utf8');
const serveApp = useServedApp();

describe('docs/proxy.md example', () => {
  it('shows examples/proxy.yaml exactly', () => {
    const block = /```yaml\n([\s\S]*?)```/.exec(doc)?.[1];
    expect(block).toBe(example);
  });

  it('is a valid config', () => {
    expect(() => parseConfigText(example, 'examples/proxy.yaml')).not.toThrow();
  });

  it('answers as documented with every node of the example open', async () => {
    const config = parseConfigText(example, 'examples/proxy.yaml');
    const client = createUndiciClient();
    const app = await serveApp({ proxy: { localDc: config.local_dc!, upstreams: config.upstreams, client } });
    const users = config.upstreams.users!;
    for (const node of users.nodes)
      await app.request('PATCH', `/circuits/users%2F${node.id}`, JSON.stringify({ forced_state: 'open' }), {
        'content-type': 'application/merge-patch+json',
      });
    const get = await fetch(`${app.url}/proxy/users/api/users/42`);
    const body = await get.text();
    expect([
      get.status,
      get.headers.get('content-type'),
      get.headers.get('x-fallback'),
      get.headers.get('x-degraded'),
    ]).toEqual([503, 'application/json', 'static', 'true']);
    expect(body).toBe(users.fallback!.static!.body);
    expect(doc).toContain(`x-fallback: static\n\n${body}\n`); // the answer the docs show for a GET
    const put = await fetch(`${app.url}/proxy/users/api/users/42`, {
      method: 'PUT',
      body: '{}',
      headers: { 'content-type': 'application/json' },
    });
    expect(put.status).toBe(503);
    expect(put.headers.get('content-type')).toBe('application/problem+json');
    expect(((await put.json()) as { code: string }).code).toBe('NO_NODE_AVAILABLE');
    await client.close();
  });
});
