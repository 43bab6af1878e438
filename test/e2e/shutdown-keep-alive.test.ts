import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

// SIGTERM with shutdown_delay_ms 0 under keep-alive load: every request sent on an open
// connection is answered (the last one with `Connection: close`); none is met by a reset.
const running: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
});

const CLIENTS = 32;
const ROUNDS = 3;

/** What one keep-alive client saw until the port was closed to it. */
interface Lane {
  answered: number;
  /** Connection header of each answer, in order. */
  readonly connection: (string | undefined)[];
  /** Errors of requests sent on a kept-alive connection (resets, hang-ups, anything), and any but a refusal on a new one. */
  readonly errors: string[];
}

type Answer = { connection: string | undefined } | { error: string; reused: boolean };

/** One GET on the lane's keep-alive agent; an error says whether the request went on a kept-alive connection. */
function get(url: string, agent: http.Agent): Promise<Answer> {
  return new Promise((resolve) => {
    const req = http.get(url, { agent }, (res) => {
      res.resume();
      res.on('end', () => resolve({ connection: res.headers.connection }));
      res.on('error', (error: NodeJS.ErrnoException) =>
        resolve({ error: `${error.code} ${error.message}`, reused: req.reusedSocket }),
      );
    });
    req.setTimeout(10_000, () => req.destroy(new Error('no answer in 10 s')));
    req.on('error', (error: NodeJS.ErrnoException) =>
      resolve({ error: error.code ?? error.message, reused: req.reusedSocket }),
    );
  });
}

/**
 * A client sending GET /health back to back on one keep-alive connection until the port is
 * closed to it: a new connection refused, or reset by the kernel as the listening socket
 * closes with it still in the accept queue (the app never saw it: as good as refused).
 */
function lane(url: string): { state: Lane; done: Promise<void> } {
  const state: Lane = { answered: 0, connection: [], errors: [] };
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const done = (async () => {
    for (;;) {
      const answer = await get(`${url}/health`, agent);
      if ('connection' in answer) {
        state.answered++;
        state.connection.push(answer.connection);
        continue;
      }
      if (!answer.reused && (answer.error === 'ECONNREFUSED' || answer.error === 'ECONNRESET')) break;
      state.errors.push(`${answer.error}${answer.reused ? ' on a kept-alive connection' : ''}`);
    }
    agent.destroy();
  })();
  return { state, done };
}

async function until(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('graceful shutdown under keep-alive load', () => {
  it(`answers every request of ${CLIENTS} keep-alive clients through SIGTERM (shutdown_delay_ms 0): 0 resets, each connection told to close`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const dir = tempDir();
      fs.writeFileSync(path.join(dir, 'c.yaml'), 'shutdown_delay_ms: 0\n');
      const server = await startServer(
        { CIRCUITLOG_DB: path.join(dir, 'db.sqlite'), CIRCUITLOG_CONFIG: path.join(dir, 'c.yaml') },
        { detached: true },
      );
      running.push(server);
      const lanes = Array.from({ length: CLIENTS }, () => lane(server.url));
      await until(() => lanes.every((l) => l.state.answered >= 10), 'every client to be answered 10 times');

      const exited = server.stop('SIGTERM');
      await Promise.all(lanes.map((l) => l.done));

      expect(await exited).toBe(0);
      expect(lanes.flatMap((l) => l.state.errors)).toEqual([]); // no ECONNRESET, no socket hang up
      // Each connection was closed by an answer that said so, not under a request.
      expect(lanes.map((l) => l.state.connection.at(-1))).toEqual(Array(CLIENTS).fill('close'));
    }
  }, 120_000);
});
