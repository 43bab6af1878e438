import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { rssBytes } from '../faults/fault-server.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const STREAMS = 40;
const BATCHES = 80; // x 500 items: 40,000 transitions of about 330 bytes, ~13 MB per stream
const ITEMS = 500;
const BUFFER_BYTES = 64 * 1024;
// 96 MiB over the same work without streams. Measured on a 2-core machine: bounded at 64 KiB,
// -7 to 35 MiB over the stream-less run in six runs (two processes' heap growth of ~100 MiB each differ by
// that much); with the bound raised to 1 GiB (effectively none), 257 MiB over it.
const EXTRA_RSS_BOUND = 96 * 1024 * 1024;

const servers: ServerProcess[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(servers.splice(0).map((s) => s.stop('SIGKILL')));
});

async function start(): Promise<ServerProcess> {
  const dir = tempDir();
  fs.writeFileSync(
    path.join(dir, 'c.yaml'),
    `circuit_defaults: { failure_threshold: 1 }\nevents: { max_stream_buffer_bytes: ${BUFFER_BYTES} }\n`,
  );
  const server = await startServer({
    CIRCUITLOG_DB: path.join(dir, 'db.sqlite'),
    CIRCUITLOG_CONFIG: path.join(dir, 'c.yaml'),
  });
  servers.push(server);
  for (let b = 0; b < 4; b++) await failBatch(server.url, -1 - b); // warm-up: JIT, heap sizing
  return server;
}

/**
 * RSS growth of the server over BATCHES batches of failures (each a transition), measured once
 * `settled` holds (the hub sends to thousands of streams a few hundred writes per turn of the
 * event loop, so its tail may run a little behind the writes; 30 s at most) and a second more.
 */
async function rssGrowth(server: ServerProcess, settled: () => boolean = () => true): Promise<number> {
  const before = rssBytes(server.child.pid!);
  for (let b = 0; b < BATCHES; b++) await failBatch(server.url, b);
  for (let waited = 0; !settled() && waited < 30_000; waited += 100) await new Promise((r) => setTimeout(r, 100));
  await new Promise((r) => setTimeout(r, 1_000)); // the hub's tail reaches the last rows
  return rssBytes(server.child.pid!) - before;
}

const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;

/** A client that asks for the event stream, takes the response head, then reads nothing more. */
function neverReading(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () =>
      socket.write('GET /events/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'),
    );
    sockets.push(socket);
    socket.on('error', () => {}); // a reset once the server destroys it
    socket.once('data', (head) => {
      if (!head.toString().startsWith('HTTP/1.1 200'))
        reject(new Error(`stream refused: ${head.toString().slice(0, 100)}`));
      socket.pause();
      resolve(socket);
    });
  });
}

/** Resume reading; resolves once the server has closed the connection. */
function closedByServer(socket: net.Socket): Promise<void> {
  return new Promise((resolve) => {
    if (socket.closed) resolve();
    socket.once('close', () => resolve());
    socket.resume();
  });
}

async function failBatch(url: string, batch: number): Promise<void> {
  const pad = 'n'.repeat(180); // long names: every event is a few hundred bytes
  const outcomes = Array.from({ length: ITEMS }, (_, i) => ({ circuit: `${pad}-${batch}-${i}`, success: false }));
  const res = await fetch(`${url}/outcomes`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ outcomes }),
  });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
}

describe('event streams with clients that never read (real server)', () => {
  it(`keeps RSS within 96 MiB of a stream-less run with ${STREAMS} never-reading streams and 40,000 transitions, destroying each past its byte bound`, async () => {
    const control = await start();
    const baseline = await rssGrowth(control);
    await control.stop('SIGKILL');
    const server = await start();
    const clients = await Promise.all(Array.from({ length: STREAMS }, () => neverReading(server.port)));
    const cutOff = () => server.logs.filter((l) => l.event === 'stream_cut_off');
    const growth = await rssGrowth(server, () => cutOff().length >= STREAMS);
    console.info(
      `server RSS growth over ${BATCHES * ITEMS} transitions: no streams ${mib(baseline)}, ${STREAMS} never-reading streams ${mib(growth)}`,
    );
    expect(growth - baseline).toBeLessThan(EXTRA_RSS_BOUND);
    expect(server.logs.filter((l) => l.event === 'stream_cut_off')).toHaveLength(STREAMS);
    await Promise.all(clients.map(closedByServer)); // destroyed, not left open
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
  }, 120_000);
});
