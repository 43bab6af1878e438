import { OpenAPIHono } from '@hono/zod-openapi';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { documentObserveRoutes } from '../../src/observe/observe-openapi.js';
import { formatCursor, zeroCursor } from '../../src/store/redis/event-cursor.js';
import { buildObservedApp } from './observe-app.js';

const TOKEN = 'openapi-token-0123456789';

async function documentOf(options: Parameters<typeof buildObservedApp>[0] = {}) {
  return (await (await buildObservedApp(options).request('GET', '/openapi.json')).json()) as {
    paths: Record<string, { get?: { security?: unknown; responses: Record<string, unknown> } }>;
  };
}

describe('OpenAPI document with observability', () => {
  it('describes /metrics, /events/stream and the dashboard', async () => {
    const doc = await documentOf();
    for (const path of ['/metrics', '/events/stream', '/dashboard', '/dashboard/api/state'])
      expect(doc.paths[path]?.get, path).toBeDefined();
    expect(Object.keys(doc.paths['/events/stream']!.get!.responses).sort()).toEqual(['200', '400', '405', '503']);
  });

  it('documents the 405 its paths answer to another method, and the 400 of a bad dashboard query', async () => {
    const app = buildObservedApp();
    const doc = (await (await app.request('GET', '/openapi.json')).json()) as {
      paths: Record<string, { get: { responses: Record<string, unknown> } }>;
    };
    for (const path of ['/metrics', '/events/stream', '/dashboard', '/dashboard/api/state']) {
      const res = await app.request('POST', path);
      expect(res.status, path).toBe(405);
      expect(doc.paths[path]!.get.responses['405'], path).toBeDefined();
    }
    const bad = await app.request('GET', '/dashboard/api/state?after=x');
    expect(bad.status).toBe(400);
    expect(doc.paths['/dashboard/api/state']!.get.responses['400']).toBeDefined();
  });

  it("types the dashboard's after and limit as integers, and refuses what is not one", async () => {
    const app = buildObservedApp();
    const doc = (await (await app.request('GET', '/openapi.json')).json()) as {
      paths: Record<string, { get: { parameters: { name: string; schema: Record<string, unknown> }[] } }>;
    };
    const params = doc.paths['/dashboard/api/state']!.get.parameters;
    expect(params.find((p) => p.name === 'after')!.schema).toMatchObject({ type: 'integer', minimum: 0 });
    expect(params.find((p) => p.name === 'limit')!.schema).toMatchObject({ type: 'integer', minimum: 1 });
    for (const query of ['after=', 'after=1e2', 'limit=%205', 'limit='])
      expect((await app.request('GET', `/dashboard/api/state?${query}`)).status, query).toBe(400);
    expect((await app.request('GET', '/dashboard/api/state?after=0&limit=7')).status).toBe(200);
  });

  it('requires the bearer scheme on the data routes only when a token is set', async () => {
    const guarded = await documentOf({ deps: { token: TOKEN } });
    for (const path of ['/metrics', '/events/stream', '/dashboard/api/state']) {
      expect(guarded.paths[path]!.get!.security, path).toEqual([{ bearer: [] }]);
      expect(guarded.paths[path]!.get!.responses['401'], path).toBeDefined();
    }
    expect(guarded.paths['/dashboard']!.get!.security).toBeUndefined();
    expect((await documentOf()).paths['/metrics']!.get!.security).toBeUndefined();
  });

  it('leaves /metrics out with metrics.enabled false', async () => {
    expect((await documentOf({ metricsEnabled: false })).paths['/metrics']).toBeUndefined();
  });

  it('gives Last-Event-ID the ids the store resumes from: a number, and on Redis a cursor of every shard', () => {
    const pattern = (cursorEventIds: boolean) => {
      const app = new OpenAPIHono();
      documentObserveRoutes(app, false, cursorEventIds);
      const doc = app.getOpenAPI31Document({ openapi: '3.1.0', info: { title: 't', version: '1' } });
      const params = doc.paths!['/events/stream']!.get!.parameters as { name: string; schema: object }[];
      return new Ajv2020().compile(params.find((p) => p.name === 'last-event-id')!.schema);
    };
    const sqlite = pattern(false);
    expect([sqlite('42'), sqlite('1.2'), sqlite('1'.repeat(16))]).toEqual([true, false, false]);
    const redis = pattern(true);
    const cursor = formatCursor(zeroCursor());
    expect([redis('42'), redis(cursor), redis('1.2.3'), redis(`${cursor}.0`)]).toEqual([true, true, false, false]);
  });
});
