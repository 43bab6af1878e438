import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config.js';
import { circuitNameProblem } from '../../src/domain/circuit-name.js';
import { callerProblem } from '../../src/domain/caller.js';
import { policyFields } from '../../src/policy-schema.js';
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
    servers: { url: string }[];
    components: { securitySchemes?: Record<string, unknown>; schemas: Record<string, Record<string, unknown>> };
  };
}

async function proxiedDocument(names: string[]) {
  const nodes = names
    .map((n) => `  ${n}:\n    nodes:\n      - { id: a, dc: dc1, url: "http://127.0.0.1:9" }\n`)
    .join('');
  const cfg = parseConfigText(`local_dc: dc1\nupstreams:\n${nodes}`, 'test');
  const client = createUndiciClient();
  try {
    return await documentOf({ proxy: { localDc: 'dc1', upstreams: cfg.upstreams, client } });
  } finally {
    await client.close();
  }
}

/** The properties of an item of `OutcomeBatch`'s outcomes. */
function batchItem(doc: Awaited<ReturnType<typeof documentOf>>): Record<string, object> {
  const batch = doc.components.schemas.OutcomeBatch as {
    properties: { outcomes: { items: { properties: Record<string, object> } } };
  };
  return batch.properties.outcomes.items.properties;
}

const ajv = new Ajv2020({ strict: false });
const NAMES = ['a', 'payment-gateway/charge', 'x.y:z~_-1', 'a/.b', '..a', 'n'.repeat(200)];
const BAD_NAMES = ['', '.', '..', 'a/..', './a', 'a//b', '/a', 'a/', 'a b', 'é', 'n'.repeat(201), 'a%2Fb'];

describe('the OpenAPI document', () => {
  it('names a relative server, so Try it out reaches the origin that served the page, on any port', async () => {
    const doc = await documentOf();
    expect(doc.servers.map((s) => s.url)).toEqual(['/']);
  });

  it('gives the circuit name rule the server enforces: its pattern and 1-200 characters', async () => {
    const doc = await documentOf();
    const schemas = [
      doc.paths['/circuits/{name}']!.get!.parameters!.find((p) => p.name === 'name')!.schema,
      batchItem(doc).circuit!,
    ];
    for (const schema of schemas) {
      expect(schema).toMatchObject({ type: 'string', minLength: 1, maxLength: 200 });
      const valid = ajv.compile(schema);
      for (const name of [...NAMES, ...BAD_NAMES]) expect(valid(name), name).toBe(circuitNameProblem(name) === null);
    }
  });

  it('gives the caller rule the server enforces, in the query and in outcome bodies', async () => {
    const doc = await documentOf();
    const schemas = [
      doc.paths['/circuits/{name}/allowed']!.get!.parameters!.find((p) => p.name === 'caller')!.schema,
      (doc.components.schemas.OutcomeRequest!.properties as Record<string, object>).caller!,
      batchItem(doc).caller!,
    ];
    for (const schema of schemas) {
      const valid = ajv.compile(schema);
      for (const caller of ['web-7/4242', 'a', 'x'.repeat(128), '', 'x'.repeat(129), 'a b', 'a?b', 'ü'])
        expect(valid(caller), caller).toBe(callerProblem(caller) === null);
    }
  });

  it('closes PolicyPatch to the policy fields, each nullable, and the shadow policy', async () => {
    const patch = (await documentOf()).components.schemas.PolicyPatch!;
    expect(patch.additionalProperties).toBe(false);
    expect(Object.keys(patch.properties as object).sort()).toEqual([...Object.keys(policyFields), 'shadow'].sort());
    const valid = ajv.compile(patch);
    expect(valid({ colour: 'red' })).toBe(false);
    expect(valid({ window: { type: 'count', pad: 1 } })).toBe(false);
    expect(valid({ failure_threshold: null, window: { size: 10 }, quorum: null })).toBe(true);
    expect(valid({ shadow: { failure_threshold: 2, window: { size: 10 } } })).toBe(true);
    expect(valid({ shadow: null })).toBe(true);
    expect(valid({ shadow: 'promote' })).toBe(true);
    expect(valid({ shadow: 'demote' })).toBe(false);
    expect(valid({ shadow: { forced_state: 'open' } })).toBe(false);
  });

  it('lists every problem kind, and only those, for /problems/{kind}', async () => {
    const doc = await documentOf();
    const kind = doc.paths['/problems/{kind}']!.get!.parameters!.find((p) => p.name === 'kind')!;
    expect(kind.schema.enum).toEqual(expect.arrayContaining(['circuit-open', 'invalid-name']));
  });

  it("lists the configured upstreams for /proxy, and lets the node's own answer through", async () => {
    const doc = await proxiedDocument(['users', 'billing']);
    for (const op of Object.values(doc.paths['/proxy/{upstream}/{path}']!)) {
      const upstream = op.parameters!.find((p) => p.name === 'upstream')!;
      expect(upstream.schema.enum).toEqual(['users', 'billing']);
      expect(upstream.example ?? upstream.schema.example).toBeUndefined();
      for (const status of ['default', '404', '502', '503'])
        expect(Object.keys((op.responses[status] as { content: object }).content), status).toContain('*/*');
    }
  });

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
