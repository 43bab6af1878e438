// Issue 31's proof of the shadow policy, on the real server (dist/main.js) and a SQLite file.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { requestJson } from '../fresh-request.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const running: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
});

async function start(db: string, env: Record<string, string> = {}): Promise<ServerProcess> {
  const server = await startServer({ CIRCUITLOG_DB: db, ...env }, { detached: true });
  running.push(server);
  return server;
}

describe('a shadow policy on the running server', () => {
  it('opens in shadow while the live circuit refuses nothing; survives a restart; promoting it takes effect at once', async () => {
    const db = path.join(tempDir(), 'db.sqlite');
    let server = await start(db);
    const at = (p: string, method = 'GET', body?: unknown) => requestJson(`${server.url}${p}`, method, body);

    const set = await at('/circuits/svc', 'PATCH', { failure_threshold: 5, shadow: { failure_threshold: 2 } });
    expect(set.status).toBe(201);
    for (let i = 0; i < 3; i++) {
      expect((await at('/circuits/svc/outcomes', 'POST', { success: false })).status).toBe(200);
      // The plain GET /allowed is answered by the raw fast path (src/http/raw-allowed.ts).
      const allowed = await at('/circuits/svc/allowed');
      expect(allowed.status).toBe(200);
      expect(allowed.json.allowed).toBe(true);
      expect(allowed.json.shadow_would_refuse).toBe(i >= 1 ? true : undefined);
    }
    const shadowed = (await at('/circuits/svc')).json;
    expect(shadowed).toMatchObject({ state: 'closed', failure_count: 3 });
    expect(shadowed.shadow).toMatchObject({ state: 'open', counts: { outcomes: 2, refused: 1, openings: 1 } });
    expect((await at('/circuits/svc/events')).json.events).toEqual([
      expect.objectContaining({ from: 'closed', to: 'open', reason: 'failure_threshold_reached', shadow: true }),
    ]);

    // Bad shadow input: a problem, nothing changed.
    const bad = await at('/circuits/svc', 'PATCH', { shadow: { failure_threshold: -1 } });
    expect(bad.status).toBe(422);
    expect(bad.json).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ field: 'shadow.failure_threshold' }] });
    expect((await at('/circuits/svc')).json).toEqual(shadowed);

    // The shadow and its state are stored with the circuit.
    await server.stop();
    running.splice(running.indexOf(server), 1);
    server = await start(db);
    expect((await at('/circuits/svc')).json.shadow).toEqual(shadowed.shadow);

    // Promote: one PATCH, and the very next outcome follows the promoted policy.
    const promoted = await at('/circuits/svc', 'PATCH', { shadow: 'promote' });
    expect(promoted.status).toBe(200);
    expect(promoted.json).toMatchObject({ failure_threshold: 2, state: 'closed' });
    expect(promoted.json).not.toHaveProperty('shadow');
    expect((await at('/circuits/svc/outcomes', 'POST', { success: false })).json).toMatchObject({ state: 'open' });
    expect((await at('/circuits/svc/allowed')).status).toBe(503);

    // Clearing forgets it.
    await at('/circuits/svc', 'PATCH', { shadow: { timeout_seconds: 5 } });
    expect((await at('/circuits/svc')).json.shadow.policy.timeout_seconds).toBe(5);
    expect((await at('/circuits/svc', 'PATCH', { shadow: null })).status).toBe(200);
    expect((await at('/circuits/svc')).json).not.toHaveProperty('shadow');

    const audit = (await at('/audit?limit=50')).json.entries as { action: string; after: unknown }[];
    expect(audit.map((e) => e.action).reverse()).toEqual([
      'circuit_created',
      'shadow_promoted',
      'shadow_set',
      'shadow_cleared',
    ]);
    expect(audit.find((e) => e.action === 'shadow_promoted')!.after).toEqual({ failure_threshold: 2, shadow: null });
  });

  it('sets a shadow declared in the config at start, keeps its state across restarts, and clears it on null', async () => {
    const dir = tempDir();
    const db = path.join(dir, 'db.sqlite');
    const config = path.join(dir, 'c.yaml');
    fs.writeFileSync(config, 'circuits:\n  svc:\n    failure_threshold: 5\n    shadow:\n      failure_threshold: 2\n');
    let server = await start(db, { CIRCUITLOG_CONFIG: config });
    const at = (p: string, method = 'GET', body?: unknown) => requestJson(`${server.url}${p}`, method, body);
    expect((await at('/circuits/svc')).json.shadow).toMatchObject({
      policy: { failure_threshold: 2 },
      state: 'closed',
    });
    for (let i = 0; i < 2; i++) await at('/circuits/svc/outcomes', 'POST', { success: false });
    await server.stop();
    running.splice(running.indexOf(server), 1);
    server = await start(db, { CIRCUITLOG_CONFIG: config });
    expect((await at('/circuits/svc')).json.shadow).toMatchObject({ state: 'open', counts: { outcomes: 2 } });
    await server.stop();
    running.splice(running.indexOf(server), 1);
    fs.writeFileSync(config, 'circuits:\n  svc:\n    failure_threshold: 5\n    shadow: null\n');
    server = await start(db, { CIRCUITLOG_CONFIG: config });
    expect((await at('/circuits/svc')).json).not.toHaveProperty('shadow');
  });
});
