import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

// GET /health/ready: 200 while serving; 503 NOT_READY from SIGTERM on, while the process keeps
// serving for `shutdown_delay_ms` (so a load balancer stops sending before the port closes).
const running: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
});

interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

/** One request on a fresh connection (node:cluster spreads those over the workers). */
function send(url: string, method = 'GET'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.setTimeout(5_000, () => req.destroy(new Error(`no answer to ${method} ${url}`)));
    req.on('error', reject);
    req.end();
  });
}

async function until(check: () => Promise<boolean> | boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const readyStatuses = async (url: string) =>
  Promise.all(Array.from({ length: 4 }, () => send(`${url}/health/ready`).then((a) => a.status)));

describe('GET /health/ready', () => {
  for (const workers of [1, 2]) {
    it(`is 200 while serving, then 503 NOT_READY after SIGTERM while requests are still served for shutdown_delay_ms; exit 0 (${workers} worker(s))`, async () => {
      const dir = tempDir();
      fs.writeFileSync(path.join(dir, 'c.yaml'), 'shutdown_delay_ms: 4000\n');
      const env = {
        CIRCUITLOG_DB: path.join(dir, 'db.sqlite'),
        CIRCUITLOG_CONFIG: path.join(dir, 'c.yaml'),
        CIRCUITLOG_WORKERS: String(workers),
      };
      const server = await startServer(env, { detached: true });
      running.push(server);
      await until(
        () =>
          server.logs.filter((l) => l.event === (workers === 1 ? 'listening' : 'worker_listening')).length === workers,
        'every worker to listen',
      );

      const ready = await send(`${server.url}/health/ready`);
      expect([ready.status, ready.headers['content-type'], JSON.parse(ready.body)]).toEqual([
        200,
        'application/json',
        { status: 'ready', schema_version: expect.any(Number) },
      ]);
      expect(await readyStatuses(server.url)).toEqual([200, 200, 200, 200]);

      const exited = server.stop('SIGTERM');
      await until(
        async () => (await readyStatuses(server.url)).every((s) => s === 503),
        'every worker to report not ready',
        3_000,
      );
      const notReady = await send(`${server.url}/health/ready`);
      expect(notReady.headers['content-type']).toBe('application/problem+json');
      expect(JSON.parse(notReady.body)).toMatchObject({
        status: 503,
        code: 'NOT_READY',
        type: '/problems/not-ready',
        instance: '/health/ready',
      });
      // Not ready is not dead: liveness and the API keep answering, each answer closing its connection.
      const live = await send(`${server.url}/health`);
      expect(live.status).toBe(200);
      const failure = await send(`${server.url}/circuits/pay/failure`, 'POST');
      expect(failure.status).toBe(200);
      expect(failure.headers.connection).toBe('close');

      expect(await exited).toBe(0);
      const events = server.logs.map((l) => l.event);
      expect(events.indexOf('not_ready')).toBeGreaterThan(-1);
      expect(events.indexOf('not_ready')).toBeLessThan(events.lastIndexOf('stopped'));
    });
  }
});
