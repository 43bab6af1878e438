import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { requestJson } from '../fresh-request.js';
import { openStream } from '../observe/sse-client.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

// Issue 29 end to end: the real server (dist/main.js) on a temp SQLite file, a loopback
// dependency, one test per capability: outcome kinds (the gateway incident replayed),
// cool-downs (the dependency's Retry-After) and the shared slow start.

const running: ServerProcess[] = [];
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
  await Promise.all(closers.splice(0).map((close) => close()));
});

async function start(configLines: readonly string[] = []): Promise<ServerProcess> {
  const dir = tempDir();
  const env: Record<string, string> = { CIRCUITLOG_DB: path.join(dir, 'db.sqlite') };
  if (configLines.length > 0) {
    env.CIRCUITLOG_CONFIG = path.join(dir, 'c.yaml');
    fs.writeFileSync(env.CIRCUITLOG_CONFIG, `${configLines.join('\n')}\n`);
  }
  const server = await startServer(env, { detached: true });
  running.push(server);
  return server;
}

/** A loopback dependency that answers every request after `delayMs`. */
async function slowDependency(delayMs: number): Promise<string> {
  const server = http.createServer((_req, res) => {
    setTimeout(() => res.end('ok'), delayMs);
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

/**
 * One guarded call as a client makes it: ask /allowed, call the dependency under the caller's
 * deadline, report the outcome by kind. Answers whether circuitlog refused it.
 */
async function guardedCall(url: string, dependency: string, caller: string, deadlineMs: number): Promise<boolean> {
  if ((await requestJson(`${url}/circuits/llm/allowed?caller=${caller}`)).status === 503) return true;
  const started = Date.now();
  let outcome: Record<string, unknown>;
  try {
    await fetch(dependency, { signal: AbortSignal.timeout(deadlineMs) }).then((r) => r.text());
    outcome = { kind: 'success' };
  } catch {
    outcome = { kind: 'caller_deadline', deadline_ms: deadlineMs };
  }
  const body = { ...outcome, caller, duration_ms: Date.now() - started };
  expect((await requestJson(`${url}/circuits/llm/outcomes`, 'POST', body)).status).toBe(200);
  return false;
}

describe('issue 29 on the real server', () => {
  it('the gateway incident replayed: 5 calls under a 50 ms deadline open nothing; with min_deadline_ms 40 they do', async () => {
    const dependency = await slowDependency(150);
    const server = await start();
    const replay = async () => {
      for (let i = 0; i < 5; i++) expect(await guardedCall(server.url, dependency, `short-${i}`, 50)).toBe(false);
      let refused = 0;
      for (let round = 0; round < 10; round++) {
        const calls = Array.from({ length: 40 }, (_, i) => guardedCall(server.url, dependency, `web-${i}`, 2_000));
        refused += (await Promise.all(calls)).filter(Boolean).length;
      }
      return refused;
    };
    expect(await replay()).toBe(0);
    const after = (await requestJson(`${server.url}/circuits/llm`)).json;
    expect(after).toMatchObject({ state: 'closed', failure_count: 0 });
    const { events } = (await requestJson(`${server.url}/circuits/llm/events`)).json;
    expect(events).toEqual([]);
    // The same five calls, where the policy says 40 ms was a fair chance: they are the dependency's failures.
    await requestJson(`${server.url}/circuits/fair`, 'PATCH', { min_deadline_ms: 40 });
    for (let i = 0; i < 5; i++) {
      await requestJson(`${server.url}/circuits/fair/outcomes`, 'POST', {
        kind: 'caller_deadline',
        deadline_ms: 50,
        caller: `short-${i}`,
      });
    }
    expect((await requestJson(`${server.url}/circuits/fair`)).json.state).toBe('open');
  });

  it('a throttled outcome cools the circuit: 503 dependency-throttled with Retry-After, ended by the due timer (event on the stream)', async () => {
    const server = await start();
    const stream = await openStream(`${server.url}/events/stream`);
    try {
      const recorded = await requestJson(`${server.url}/circuits/api/outcomes`, 'POST', {
        kind: 'throttled',
        retry_after_seconds: 2,
      });
      expect(recorded.json).toMatchObject({ state: 'closed', failure_count: 0 });
      const coolUntil = recorded.json.cool_until as string;
      const refused = await fetch(`${server.url}/circuits/api/allowed`);
      expect(refused.status).toBe(503);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(Number(refused.headers.get('retry-after'))).toBeLessThanOrEqual(2);
      expect(await refused.json()).toMatchObject({
        code: 'DEPENDENCY_THROTTLED',
        scope: 'circuit',
        cool_until: coolUntil,
      });
      const call = await requestJson(`${server.url}/circuits/api/call`, 'POST', {});
      expect(call.json).toMatchObject({ code: 'DEPENDENCY_THROTTLED' });
      let event = await stream.next(5_000);
      while (event.data.reason !== 'cool_down') event = await stream.next(5_000);
      expect(event.data).toMatchObject({
        circuit: 'api',
        from: 'closed',
        to: 'closed',
        scope: 'circuit',
        until: coolUntil,
      });
      // No traffic: the due-transition timer ends it, stamped at cool_until.
      event = await stream.next(10_000);
      expect(event.data).toMatchObject({ circuit: 'api', reason: 'cool_down_ended', at: coolUntil, scope: 'circuit' });
      expect((await fetch(`${server.url}/circuits/api/allowed`)).status).toBe(200);
    } finally {
      stream.close();
    }
  });

  it('a circuit declared with a ramp (config as code) ramps after its cool-down: about start_percent admitted, the rest 503 circuit-ramping', async () => {
    const server = await start(['circuits:', '  shared:', '    ramp: { seconds: 3600, start_percent: 10 }']);
    expect((await requestJson(`${server.url}/circuits/shared`)).json.ramp).toEqual({
      seconds: 3600,
      start_percent: 10,
    });
    const stream = await openStream(`${server.url}/events/stream`);
    let rampUntil: string;
    try {
      await requestJson(`${server.url}/circuits/shared/outcomes`, 'POST', {
        kind: 'throttled',
        retry_after_seconds: 1,
      });
      let event = await stream.next(5_000);
      while (event.data.reason !== 'cool_down_ended') event = await stream.next(10_000);
      rampUntil = event.data.ramp_until;
      expect(rampUntil).toEqual(expect.any(String));
    } finally {
      stream.close();
    }
    // The real random source decides: of 300 asks, about 10 % (10.0 to 10.1 % in this minute) are admitted.
    const answers = [];
    for (let i = 0; i < 300; i++) answers.push(await fetch(`${server.url}/circuits/shared/allowed`));
    const admitted = answers.filter((a) => a.status === 200).length;
    expect(admitted).toBeGreaterThanOrEqual(10); // mean 30, sd 5.2: 10 is nearly 4 sd below
    expect(admitted).toBeLessThanOrEqual(55);
    const refused = answers.find((a) => a.status === 503)!;
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(await refused.json()).toMatchObject({ code: 'CIRCUIT_RAMPING', circuit: 'shared', state: 'closed' });
    const shown = (await requestJson(`${server.url}/circuits/shared`)).json;
    expect(shown.ramp_percent).toBeGreaterThanOrEqual(10);
    expect(shown.ramp_percent).toBeLessThan(20); // 0.025 points a second: 400 s from the start
    expect(shown.ramp_until).toBe(rampUntil);
  });
});
