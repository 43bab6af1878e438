import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config.js';
import { createUndiciClient } from '../../src/proxy/upstream-client.js';
import { buildApp } from '../helper.js';

type Operation = {
  parameters?: { name: string; in: string; schema: Record<string, unknown>; example?: unknown }[];
  responses: Record<string, unknown>;
  security?: unknown;
};

async function documentOf(overrides: Parameters<typeof buildApp>[0] = {}) {
  const t = buildApp(overrides);
  const res = await t.request('GET', '/openapi.json');
  expect(res.status).toBe(200);
  return (await res.json()) as {
    paths: Record<string, Record<string, Operation>>;
    components: { securitySchemes?: Record<string, unknown> };
  };
}

describe('the OpenAPI document', () => {
  it('bounds limit to 1-500', async () => {
    const doc = await documentOf();
    for (const path of ['/circuits', '/circuits/{name}/events']) {
      const limit = doc.paths[path]!.get!.parameters!.find((p) => p.name === 'limit')!;
      expect(limit.schema).toMatchObject({ type: 'integer', minimum: 1, maximum: 500 });
    }
  });

  it('gives the name example unencoded, since Swagger UI encodes path parameters itself', async () => {
    const doc = await documentOf();
    const name = doc.paths['/circuits/{name}']!.get!.parameters!.find((p) => p.name === 'name')!;
    const example = name.example ?? name.schema.example;
    expect(example).toBe('payment-gateway/charge');
  });

  it('documents /health and /problems/{kind}, and /proxy only when a proxy is configured', async () => {
    const doc = await documentOf();
    expect(doc.paths['/health']?.get).toBeDefined();
    expect(doc.paths['/problems/{kind}']?.get).toBeDefined();
    expect(Object.keys(doc.paths).filter((p) => p.startsWith('/proxy'))).toEqual([]);
    const cfg = parseConfigText(
      'local_dc: dc1\nupstreams:\n  users:\n    nodes:\n      - { id: a, dc: dc1, url: "http://127.0.0.1:9" }\n',
      'test',
    );
    const client = createUndiciClient();
    const withProxy = await documentOf({ proxy: { localDc: 'dc1', upstreams: cfg.upstreams, client } });
    await client.close();
    expect(Object.keys(withProxy.paths['/proxy/{upstream}/{path}']!).sort()).toEqual([
      'delete',
      'get',
      'head',
      'options',
      'patch',
      'post',
      'put',
    ]);
  });

  it('documents 405, 415 and storage-busy 503 answers', async () => {
    const doc = await documentOf();
    for (const [path, item] of Object.entries(doc.paths).filter(([p]) => p.startsWith('/circuits'))) {
      for (const [method, op] of Object.entries(item)) {
        expect(Object.keys(op.responses), `${method} ${path}`).toEqual(expect.arrayContaining(['405', '503']));
        if (method === 'post')
          expect(Object.keys(op.responses), `${method} ${path}`).toEqual(expect.arrayContaining(['413', '415']));
      }
    }
  });

  it('declares the bearer scheme, and requires it on /circuits only when a token is set', async () => {
    const open = await documentOf();
    expect(open.components.securitySchemes?.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(open.paths['/circuits']!.get!.security).toBeUndefined();
    expect(open.paths['/circuits']!.get!.responses['401']).toBeUndefined();
    const guarded = await documentOf({ token: 'a-very-secret-token-123' });
    expect(guarded.paths['/circuits']!.get!.security).toEqual([{ bearer: [] }]);
    expect(guarded.paths['/circuits']!.get!.responses['401']).toBeDefined();
    expect(guarded.paths['/health']!.get!.security).toBeUndefined();
  });
});
