import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';
import { requestJson } from '../fresh-request.js';

const running: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
});

async function start(env: Record<string, string>) {
  const server = await startServer(env, { detached: true });
  running.push(server);
  return server;
}

const request = (url: string, method = 'GET', body?: unknown) => requestJson(url, method, body);

describe('group commit across two workers', () => {
  it('keeps counts exact with concurrent single and batched outcomes, one transition at the threshold', async () => {
    const dir = tempDir();
    const config = path.join(dir, 'c.yaml');
    fs.writeFileSync(
      config,
      'circuit_defaults:\n  failure_threshold: 1000\n  window: { type: count, size: 100, failure_rate_threshold: 100 }\n',
    );
    const server = await start({
      CIRCUITLOG_DB: path.join(dir, 'db.sqlite'),
      CIRCUITLOG_CONFIG: config,
      CIRCUITLOG_WORKERS: '2',
    });
    const singles = Array.from({ length: 200 }, () =>
      request(`${server.url}/circuits/hot/outcomes`, 'POST', { success: false }),
    );
    const batches = Array.from({ length: 20 }, () =>
      request(`${server.url}/outcomes`, 'POST', { outcomes: Array(50).fill({ circuit: 'hot', success: false }) }),
    );
    const answers = await Promise.all([...singles, ...batches]);
    expect(answers.map((a) => a.status).filter((s) => s !== 200)).toEqual([]);
    const circuit = (await request(`${server.url}/circuits/hot`)).json;
    // 1,200 failures: the window (100 outcomes, minimum 100) opens it at the 100th; the rest are late.
    expect(circuit).toMatchObject({ state: 'open', failure_count: 1_200 });
    const events = (await request(`${server.url}/circuits/hot/events`)).json.events;
    expect(events).toEqual([expect.objectContaining({ from: 'closed', to: 'open', reason: 'failure_rate_exceeded' })]);
  });
});

describe('circuits declared in the config', () => {
  it('are created at start, updated to the config at the next start with their state kept, and declared again after a DELETE', async () => {
    const dir = tempDir();
    const db = path.join(dir, 'db.sqlite');
    const config = path.join(dir, 'c.yaml');
    fs.writeFileSync(config, 'circuits:\n  payments/charge:\n    failure_threshold: 3\n    success_threshold: 2\n');
    let server = await start({ CIRCUITLOG_DB: db, CIRCUITLOG_CONFIG: config });
    expect((await request(`${server.url}/circuits/payments%2Fcharge`)).json).toMatchObject({
      failure_threshold: 3,
      success_threshold: 2,
      state: 'closed',
    });
    for (let i = 0; i < 3; i++)
      await request(`${server.url}/circuits/payments%2Fcharge/outcomes`, 'POST', { success: false });
    await server.killGroup();

    fs.writeFileSync(
      config,
      'circuits:\n  payments/charge:\n    failure_threshold: 4\n    backoff: { multiplier: 3 }\n',
    );
    server = await start({ CIRCUITLOG_DB: db, CIRCUITLOG_CONFIG: config });
    const updated = (await request(`${server.url}/circuits/payments%2Fcharge`)).json;
    expect(updated).toMatchObject({
      failure_threshold: 4,
      success_threshold: 1,
      backoff: { multiplier: 3 },
      state: 'open',
      failure_count: 3,
    });
    expect((await request(`${server.url}/circuits/payments%2Fcharge`, 'DELETE')).status).toBe(204);
    await server.killGroup();

    server = await start({ CIRCUITLOG_DB: db, CIRCUITLOG_CONFIG: config });
    expect((await request(`${server.url}/circuits/payments%2Fcharge`)).json).toMatchObject({
      failure_threshold: 4,
      state: 'closed',
      failure_count: 0,
    });
  });

  it('stops the process with exit code 2 naming a bad declared field', async () => {
    const dir = tempDir();
    const config = path.join(dir, 'c.yaml');
    fs.writeFileSync(config, 'circuits:\n  svc:\n    window: { type: time, size: 7200 }\n');
    await expect(start({ CIRCUITLOG_DB: path.join(dir, 'db.sqlite'), CIRCUITLOG_CONFIG: config })).rejects.toThrow(
      /exited with 2.*circuits\.svc\.window\.size/s,
    );
  });
});
