import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';
import { requestJson } from '../fresh-request.js';

const running: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
});

describe('throttle in the config file (real server, SQLite file)', () => {
  it('applies throttle from circuit_defaults, declared circuits and upstream blocks, and throttles a failing circuit', async () => {
    const dir = tempDir();
    const config = path.join(dir, 'c.yaml');
    fs.writeFileSync(
      config,
      [
        'circuit_defaults:',
        '  failure_threshold: 1000',
        '  throttle: { window_seconds: 30 }',
        'circuits:',
        '  declared:',
        '    throttle: { k: 1.5, window_seconds: 20 }',
        '  unthrottled:',
        '    throttle: null',
        'local_dc: dc1',
        'upstreams:',
        '  users:',
        '    throttle: { k: 3 }',
        '    nodes: [{ id: a, dc: dc1, url: "http://127.0.0.1:9" }]',
        '    health_check: { enabled: false }',
        '',
      ].join('\n'),
    );
    const server = await startServer(
      { CIRCUITLOG_DB: path.join(dir, 'db.sqlite'), CIRCUITLOG_CONFIG: config },
      { detached: true },
    );
    running.push(server);
    const get = async (name: string) => (await requestJson(`${server.url}/circuits/${encodeURIComponent(name)}`)).json;
    expect((await get('declared')).throttle).toEqual({ k: 1.5, window_seconds: 20 });
    expect((await get('unthrottled')).throttle).toBeNull();
    expect((await get('users/a')).throttle).toEqual({ k: 3, window_seconds: 60 });

    // A circuit created by its first outcome takes circuit_defaults' throttle.
    for (let i = 0; i < 50; i++) await requestJson(`${server.url}/circuits/fresh/outcomes`, 'POST', { success: false });
    const fresh = await get('fresh');
    expect(fresh).toMatchObject({
      state: 'closed',
      throttle: { k: 2, window_seconds: 30 },
      throttle_window: { requests: 50, accepts: 0 },
    });
    expect(fresh.throttle_probability).toBeCloseTo(50 / 51, 12);
    // p is at least 50/51 from here on: of 20 asks, the real random source refuses nearly all.
    const answers = [];
    for (let i = 0; i < 20; i++) answers.push(await requestJson(`${server.url}/circuits/fresh/allowed`));
    const refused = answers.filter((a) => a.status === 503);
    expect(refused.length).toBeGreaterThanOrEqual(15);
    expect(refused[0]!.json).toMatchObject({ code: 'CIRCUIT_THROTTLED', state: 'closed' });
    expect((await get('fresh')).throttle_window).toEqual({ requests: 50 + refused.length, accepts: 0 });
  });
});
