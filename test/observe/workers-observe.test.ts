import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';
import { parseMetrics } from './observe-app.js';
import { openStream } from './sse-client.js';

const running: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
});

async function startWorkers(env: Record<string, string> = {}): Promise<ServerProcess> {
  const server = await startServer(
    { CIRCUITLOG_WORKERS: '2', CIRCUITLOG_DB: path.join(tempDir(), 'db.sqlite'), ...env },
    { detached: true },
  );
  running.push(server);
  const deadline = Date.now() + 10_000;
  while (new Set(server.logs.filter((l) => l.event === 'worker_listening').map((l) => l.pid)).size < 2) {
    if (Date.now() > deadline) throw new Error('workers did not both listen');
    await new Promise((r) => setTimeout(r, 25));
  }
  return server;
}

/** One request on a fresh connection, so node:cluster hands it to the next worker. */
function request(url: string, method = 'GET'): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('observability with 2 workers', () => {
  it('sums counters exactly over both workers and reads state gauges as 1, on every scrape', async () => {
    const server = await startWorkers();
    for (let batch = 0; batch < 20; batch++) {
      const answers = await Promise.all(
        Array.from({ length: 50 }, () => request(`${server.url}/circuits/svc/failure`, 'POST')),
      );
      expect(answers.every((a) => a.status === 200)).toBe(true);
    }
    for (let scrape = 0; scrape < 4; scrape++) {
      const res = await request(`${server.url}/metrics`);
      expect(res.status).toBe(200);
      const m = parseMetrics(res.text);
      expect(m.get('circuitlog_outcomes_total{circuit="svc",kind="failure",outcome="failure"}')).toBe(1000);
      expect(
        m.get('circuitlog_transitions_total{circuit="svc",from="closed",to="open",reason="failure_threshold_reached"}'),
      ).toBe(1);
      expect(m.get('circuitlog_circuit_state{circuit="svc",state="open"}')).toBe(1);
      expect(m.get('circuitlog_circuits{state="open"}')).toBe(1);
    }
  });

  it('delivers a transition made through either worker to a stream held by the other within 1 s', async () => {
    const server = await startWorkers();
    const stream = await openStream(`${server.url}/events/stream?prefix=x/`);
    try {
      for (let i = 0; i < 4; i++) {
        const name = `x/c${i}`;
        // Fresh connections alternate between the workers, so both make transitions.
        for (let k = 0; k < 5; k++) await request(`${server.url}/circuits/${encodeURIComponent(name)}/failure`, 'POST');
        const sentAt = Date.now();
        const event = await stream.next(5_000);
        expect(Date.now() - sentAt).toBeLessThan(1_000);
        expect(event.data).toMatchObject({ circuit: name, from: 'closed', to: 'open' });
      }
    } finally {
      stream.close();
    }
  });

  it("wakes a stream held by one worker at the other worker's transition, without waiting for its read of the table", async () => {
    // The table is read once a minute here: only the sibling's word (server/cluster-transitions.ts)
    // can bring the other worker's transitions to this stream within the 10 s each is given.
    const dir = tempDir();
    const config = path.join(dir, 'circuitlog.yaml');
    fs.writeFileSync(config, 'events:\n  poll_ms: 60000\n');
    const server = await startWorkers({ CIRCUITLOG_CONFIG: config });
    const stream = await openStream(`${server.url}/events/stream?prefix=y/`);
    try {
      for (let i = 0; i < 4; i++) {
        const name = `y/c${i}`;
        for (let k = 0; k < 5; k++) await request(`${server.url}/circuits/${encodeURIComponent(name)}/failure`, 'POST');
        expect((await stream.next(10_000)).data).toMatchObject({ circuit: name, from: 'closed', to: 'open' });
      }
    } finally {
      stream.close();
    }
    // Both workers made transitions (fresh connections alternate), so one of them was the sibling's.
    const makers = new Set(server.logs.filter((l) => l.event === 'transition').map((l) => l.pid));
    expect(makers.size).toBe(2);
  });
});
