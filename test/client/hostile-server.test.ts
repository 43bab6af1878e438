// Issue 15: the client against hostile loopback servers: every request has a deadline, and
// every answer and stream is bounded in size (dropped, then reopened, past the bounds).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CircuitOpenError, createClient, type CircuitlogClient, type ClientOptions } from '../../src/client/index.js';

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

/** A loopback server answering `/events/stream` and `/circuits/.../allowed` with the given handlers. */
async function hostile(handlers: { stream?: Handler; allowed?: Handler }) {
  const server = http.createServer((req, res) => {
    if (req.url?.startsWith('/events/stream')) return (handlers.stream ?? quietStream)(req, res);
    if ((req.url ?? '').split('?')[0]?.endsWith('/allowed')) return (handlers.allowed ?? allowedClosed)(req, res);
    if (req.url === '/outcomes')
      return void req
        .resume()
        .on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"results":[]}'));
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function quietStream(_req: http.IncomingMessage, res: http.ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.write(': open\n\n');
}

function allowedClosed(_req: http.IncomingMessage, res: http.ServerResponse): void {
  res.writeHead(200, { 'content-type': 'application/json' }).end('{"allowed":true,"state":"closed","circuit":null}');
}

/** Write `chunk` as fast as the reader takes it, up to `maxBytes`; resolves with the bytes written when the reader goes. */
function flood(res: http.ServerResponse, chunk: string, maxBytes: number): Promise<number> {
  let written = 0;
  return new Promise((resolve) => {
    res.on('close', () => resolve(written));
    const pump = () => {
      while (written < maxBytes && !res.destroyed) {
        written += Buffer.byteLength(chunk);
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  });
}

function client(url: string, options: Partial<ClientOptions> = {}): CircuitlogClient {
  const c = createClient({ url, reconnectMaxDelayMs: 200, closeTimeoutMs: 500, ...options });
  cleanups.push(() => c.close().catch(() => undefined));
  return c;
}

describe('deadlines', () => {
  it('settles a call whose /allowed answer trickles in, at the deadline rather than when the trickle ends', async () => {
    let trickling: NodeJS.Timeout | undefined;
    const gone = { before: false };
    const url = await hostile({
      allowed: (_req, res) => {
        const body = '{"allowed":true,"state":"closed","circuit":null}'.padEnd(600, ' ');
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(body.length) });
        let i = 0;
        trickling = setInterval(() => res.write(body[i++]!), 100); // one byte every 100 ms: 60 s in all
        res.on('close', () => {
          clearInterval(trickling);
          gone.before = i < body.length;
        });
      },
    });
    const c = client(url, { requestTimeoutMs: 300 });
    await c.ready();
    // undici's body timeout (300 ms) restarts with every byte: only a deadline ends this.
    expect(await c.call('svc', async () => 'ran')).toBe('ran');
    expect(c.connection).toBe('offline'); // no whole answer: decided by the local breaker
    await vi.waitFor(() => expect(gone.before).toBe(true));
  });
});

describe('first lookups', () => {
  /** A server answering every /allowed with `answer` once `release` is called; counts the /allowed requests. */
  async function counting(answer: object) {
    const held: (() => void)[] = [];
    let released = false;
    const seen = { allowed: 0 };
    const url = await hostile({
      allowed: (_req, res) => {
        seen.allowed++;
        const send = () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
        if (released) send();
        else held.push(send);
      },
    });
    const release = () => {
      released = true;
      for (const send of held.splice(0)) send();
    };
    return { url, seen, release, held };
  }

  it('sends one GET /allowed for 200 concurrent first calls on a circuit, and runs them all', async () => {
    const server = await counting({ allowed: true, state: 'closed', circuit: null });
    const c = client(server.url);
    await c.ready();
    const calls = Array.from({ length: 200 }, (_, i) => c.call('new-circuit', async () => i));
    await vi.waitFor(() => expect(server.held.length).toBe(1));
    server.release();
    expect(await Promise.all(calls)).toEqual(Array.from({ length: 200 }, (_, i) => i));
    expect(server.seen.allowed).toBe(1);
  });

  it('still asks once per call in half-open: a probe lease is never shared', async () => {
    const server = await counting({ allowed: true, state: 'half_open', circuit: null });
    server.release();
    const c = client(server.url);
    await c.ready();
    await Promise.all(Array.from({ length: 5 }, () => c.call('probing', async () => 'ran')));
    expect(server.seen.allowed).toBe(5);
  });
});

describe('retry times', () => {
  it.each([
    ['CIRCUIT_FORCED_OPEN', 'open', '1e20', '+275760-09-13T00:00:00.000Z'],
    ['CIRCUIT_OPEN', 'open', '99999999999999999999', '275760-09-13T00:00:00.000Z'],
    ['CIRCUIT_OPEN', 'half_open', String(Number.MAX_SAFE_INTEGER), null],
  ])(
    'clamps a huge Retry-After and open_until (%s, %s) to one day: the fallback runs',
    async (code, state, retryAfter, openUntil) => {
      const url = await hostile({
        allowed: (_req, res) => {
          const body = JSON.stringify({ code, state, open_until: openUntil, circuit: 'svc' });
          res.writeHead(503, { 'content-type': 'application/problem+json', 'retry-after': retryAfter }).end(body);
        },
      });
      const c = client(url, { requestTimeoutMs: 2_000 });
      await c.ready();
      const before = Date.now();
      const refusal = await c.call('svc', async () => 'ran', { fallback: (error) => error });
      expect(refusal).toBeInstanceOf(CircuitOpenError);
      const retryAt = (refusal as CircuitOpenError).retryAt.getTime();
      expect(retryAt).toBeGreaterThan(before);
      expect(retryAt).toBeLessThanOrEqual(Date.now() + 24 * 60 * 60 * 1000);
    },
  );
});

describe('size bounds', () => {
  it('fails an /allowed answer over maxResponseBytes without reading it all (256 MiB offered)', async () => {
    let sent: Promise<number> | undefined;
    const url = await hostile({
      allowed: (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(256 * 1024 * 1024) });
        sent = flood(res, 'x'.repeat(64 * 1024), 256 * 1024 * 1024);
      },
    });
    const c = client(url);
    await c.ready();
    expect(await c.call('svc', async () => 'ran')).toBe('ran');
    expect(c.connection).toBe('offline');
    // 1 MiB read, plus what the sockets' buffers held when it was dropped.
    expect(await sent).toBeLessThan(16 * 1024 * 1024);
  });

  it.each([
    ['a line that never ends', 'x'.repeat(64 * 1024), 'data: '],
    ['data lines without a blank line', `data: ${'y'.repeat(1_000)}\n`.repeat(64), ''],
  ])('drops and reopens a stream that sends %s, having read a bounded amount', async (_what, chunk, head) => {
    const sent: Promise<number>[] = [];
    const url = await hostile({
      stream: (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(head);
        sent.push(flood(res, chunk, 256 * 1024 * 1024));
      },
    });
    const c = client(url);
    await vi.waitFor(() => expect(sent.length).toBeGreaterThanOrEqual(2), { timeout: 10_000 }); // reopened
    const first = await sent[0]!;
    expect(first).toBeLessThan(16 * 1024 * 1024); // the limit (64 Ki / 1 Mi characters) plus socket buffers
    await c.close();
  });
});
