/**
 * The edge section's measuring parts (bench/edge.mjs, issue 32): the count of batches per 10 ms,
 * and the pass-through proxy that notes each `POST /outcomes` batch the server receives while
 * relaying everything else as it comes (the agent's event stream runs through it).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import readline from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { batchWindows } from '../../bench/edge-windows.mjs';

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

describe('batchWindows', () => {
  it('counts the average per 10 ms, the most in any 10 ms and in a fixed 10 ms slot', () => {
    // 6 batches over 60 ms: 4 of them within 10 ms of each other (3 to 12.5), at most 2 in one slot of the clock ([0, 10), [10, 20)).
    const w = batchWindows([32, 3, 8, 11, 12.5, 55], 60);
    expect(w).toEqual({ batches: 6, avgPer10ms: 1, maxSliding: 4, maxFixed: 2 });
  });

  it('gives zeros for no batches', () => {
    expect(batchWindows([], 1000)).toEqual({ batches: 0, avgPer10ms: 0, maxSliding: 0, maxFixed: 0 });
  });
});

/** A loopback server whose handler the test sets; the requests' bodies as it received them. */
async function upstream(handler: (req: http.IncomingMessage, body: string, res: http.ServerResponse) => void) {
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => handler(req, body, res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup.push(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function startCounter(target: string): Promise<string> {
  const child: ChildProcess = spawn(process.execPath, [path.join('bench', 'edge-batch-counter.mjs')], {
    env: { ...process.env, HOST: '127.0.0.1', PORT: '0', TARGET: target },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  cleanup.push(() => {
    child.kill('SIGKILL');
  });
  const lines = readline.createInterface({ input: child.stdout! });
  for await (const line of lines) {
    const entry = JSON.parse(line) as { event?: string; port?: number };
    if (entry.event === 'listening') return `http://127.0.0.1:${entry.port}`;
  }
  throw new Error('the batch counter exited before it listened');
}

describe('bench/edge-batch-counter.mjs', () => {
  it('forwards POST /outcomes as sent and notes its arrival and item count; other routes are not noted', async () => {
    const seen: string[] = [];
    const target = await upstream((req, body, res) => {
      seen.push(`${req.method} ${req.url} ${body}`);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"recorded":3}');
    });
    const counter = await startCounter(target);
    const batch = JSON.stringify({
      outcomes: [
        { circuit: 'a', success: false },
        { circuit: 'a', success: true },
        { circuit: 'b', success: false },
      ],
    });
    const before = Date.now();
    const res = await fetch(`${counter}/outcomes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: batch,
    });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('{"recorded":3}');
    const other = await fetch(`${counter}/circuits/a/outcomes`, { method: 'POST', body: '{"success":true}' });
    expect(other.status).toBe(200);
    await other.text();
    expect(seen).toEqual([`POST /outcomes ${batch}`, 'POST /circuits/a/outcomes {"success":true}']);

    const noted = (await (await fetch(`${counter}/__bench/batches`)).json()) as { batches: [number, number][] };
    expect(noted.batches).toHaveLength(1);
    expect(noted.batches[0]![1]).toBe(3);
    expect(noted.batches[0]![0]).toBeGreaterThanOrEqual(before - 1);
    // Read once, forgotten.
    expect(((await (await fetch(`${counter}/__bench/batches`)).json()) as { batches: unknown[] }).batches).toEqual([]);
  });

  it('relays a streamed answer chunk by chunk, before it ends (the agent follows the event stream through it)', async () => {
    let finish: () => void = () => undefined;
    const target = await upstream((_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('event: transition\ndata: {"to":"open"}\n\n');
      finish = () => res.end('event: transition\ndata: {"to":"closed"}\n\n');
    });
    const counter = await startCounter(target);
    const res = await fetch(`${counter}/events/stream`);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toBe('event: transition\ndata: {"to":"open"}\n\n');
    finish();
    let rest = '';
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
    expect(rest).toBe('event: transition\ndata: {"to":"closed"}\n\n');
  });
});
