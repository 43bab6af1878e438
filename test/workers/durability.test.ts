import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const CIRCUITS = 16;
const CONCURRENCY = 32;
const LOAD_MS = 400; // load runs at least this long before the SIGKILL
const ACKED_BEFORE_KILL = 51; // and until this many outcomes are acknowledged (a busy machine starts slower)
const ROUNDS = 3;

const running: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
});

const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });

const BATCH = 10; // outcomes per batch request in batch mode

/** POST a body; resolves with the status, or 0 when the connection died first. */
function postJson(url: string, body: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', () => resolve(0));
    });
    req.on('error', () => resolve(0));
    req.end(body);
  });
}

/**
 * Bounded write load from CONCURRENCY loops until `stop()`; counts per circuit the
 * failures the server acknowledged (200) and the ones sent at all.
 */
function writeLoad(baseUrl: string, batch: boolean) {
  const acked = new Array<number>(CIRCUITS).fill(0);
  const sent = new Array<number>(CIRCUITS).fill(0);
  const statuses = new Map<number, number>();
  let ackedInAll = 0;
  let onAcked = () => {};
  let stopped = false;
  let next = 0;
  const loops = Array.from({ length: CONCURRENCY }, async () => {
    for (let i = 0; i < 5_000 && !stopped; i++) {
      const k = next++ % CIRCUITS;
      const n = batch ? BATCH : 1;
      sent[k]! += n;
      const status = batch
        ? await postJson(
            `${baseUrl}/outcomes`,
            JSON.stringify({ outcomes: Array(BATCH).fill({ circuit: `durable-${k}`, success: false }) }),
          )
        : await postJson(`${baseUrl}/circuits/durable-${k}/outcomes`, '{"success":false}');
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
      if (status === 200) {
        acked[k]! += n;
        ackedInAll += n;
        onAcked();
      }
      if (status === 0) return; // server gone
    }
  });
  return {
    acked,
    sent,
    statuses,
    /** Resolves once `n` outcomes in all are acknowledged (never, if the server acknowledges none). */
    ackedAtLeast: (n: number) =>
      new Promise<void>((resolve) => {
        onAcked = () => {
          if (ackedInAll >= n) resolve();
        };
        onAcked();
      }),
    stop: async () => {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

async function crashRounds(workers: string, batch = false): Promise<void> {
  const dir = tempDir();
  const db = path.join(dir, 'db.sqlite');
  const config = path.join(dir, 'c.yaml');
  fs.writeFileSync(config, 'circuit_defaults:\n  failure_threshold: 1000000000\n');
  const env = {
    CIRCUITLOG_DB: db,
    CIRCUITLOG_CONFIG: config,
    CIRCUITLOG_WORKERS: workers,
    CIRCUITLOG_LOG_LEVEL: 'info',
  };
  const totalAcked = new Array<number>(CIRCUITS).fill(0);
  const totalSent = new Array<number>(CIRCUITS).fill(0);

  for (let round = 0; round < ROUNDS; round++) {
    const server = await startServer(env, { detached: true });
    running.push(server);
    const load = writeLoad(server.url, batch);
    await Promise.all([new Promise((r) => setTimeout(r, LOAD_MS)), load.ackedAtLeast(ACKED_BEFORE_KILL)]);
    await server.killGroup(); // kill -9 primary and workers in the middle of the load
    running.splice(running.indexOf(server), 1);
    await load.stop();
    load.acked.forEach((n, k) => {
      totalAcked[k]! += n;
    });
    load.sent.forEach((n, k) => {
      totalSent[k]! += n;
    });
    expect(
      load.acked.reduce((a, b) => a + b, 0),
      'the load got going before the kill',
    ).toBeGreaterThanOrEqual(ACKED_BEFORE_KILL);
    expect(
      [...load.statuses.keys()].filter((s) => s !== 200 && s !== 0),
      'no status but 200 or a dropped connection',
    ).toEqual([]);

    const check = new Database(db, { readonly: true });
    expect(check.pragma('integrity_check', { simple: true })).toBe('ok');
    const counts = check.prepare("SELECT name, failure_count FROM circuits WHERE name LIKE 'durable-%'").all() as {
      name: string;
      failure_count: number;
    }[];
    check.close();
    const byName = new Map(counts.map((c) => [c.name, c.failure_count]));
    for (let k = 0; k < CIRCUITS; k++) {
      const stored = byName.get(`durable-${k}`) ?? 0;
      expect(stored, `durable-${k} keeps every acknowledged failure`).toBeGreaterThanOrEqual(totalAcked[k]!);
      expect(stored, `durable-${k} has no failure nobody sent`).toBeLessThanOrEqual(totalSent[k]!);
    }
  }

  // And the restarted server serves what is on disk.
  const server = await startServer(env, { detached: true });
  running.push(server);
  const circuit = (await (await fetch(`${server.url}/circuits/durable-0`)).json()) as { failure_count: number };
  expect(circuit.failure_count).toBeGreaterThanOrEqual(totalAcked[0]!);
}

describe('crash safety under write load', () => {
  it('keeps every acknowledged outcome across SIGKILLs, one worker', async () => {
    await crashRounds('1');
  });

  it('keeps every acknowledged outcome across SIGKILLs, two workers', async () => {
    await crashRounds('2');
  });

  it('keeps every acknowledged outcome of batched writes (POST /outcomes) across SIGKILLs, one worker', async () => {
    await crashRounds('1', true);
  }, 60_000);

  it('keeps every acknowledged outcome of batched writes (POST /outcomes) across SIGKILLs, two workers', async () => {
    await crashRounds('2', true);
  }, 60_000);
});
