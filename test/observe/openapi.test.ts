import { describe, expect, it } from 'vitest';
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
    expect(Object.keys(doc.paths['/events/stream']!.get!.responses).sort()).toEqual(['200', '400', '503']);
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
});
