import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const running: ServerProcess[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await Promise.all(running.splice(0).map((s) => s.stop('SIGKILL')));
});

async function start(configYaml?: string): Promise<ServerProcess> {
  const dir = tempDir();
  const env: Record<string, string> = { CIRCUITLOG_DB: path.join(dir, 'db.sqlite') };
  if (configYaml !== undefined) {
    env.CIRCUITLOG_CONFIG = path.join(dir, 'c.yaml');
    fs.writeFileSync(env.CIRCUITLOG_CONFIG, configYaml);
  }
  const server = await startServer(env);
  running.push(server);
  return server;
}

/** A raw loopback connection that records everything the server sends until it closes. */
function connect(port: number): Promise<{ socket: net.Socket; received: () => string; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    sockets.push(socket);
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (text += chunk));
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    socket.once('error', () => {}); // a reset by the server shows as 'close'
    socket.once('connect', () => resolve({ socket, received: () => text, closed }));
    socket.once('error', reject);
  });
}

/** Write `lines` one per `everyMs` until the server closes the connection, at most `max` of them. */
async function trickle(
  socket: net.Socket,
  closed: Promise<void>,
  line: string,
  everyMs: number,
  max: number,
): Promise<number> {
  let isClosed = false;
  void closed.then(() => (isClosed = true));
  for (let sent = 0; sent < max; sent++) {
    if (isClosed) return sent;
    socket.write(line);
    await new Promise((r) => setTimeout(r, everyMs));
  }
  await closed;
  return max;
}

describe('CONNECT', () => {
  it('answers 405 problem+json instead of dropping the connection', async () => {
    const server = await start();
    const { socket, received, closed } = await connect(server.port);
    socket.write('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    await closed;
    const [head, body] = received().split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 405 Method Not Allowed\r\n/);
    expect(head).toMatch(/\r\ncontent-type: application\/problem\+json\r\n/i);
    expect(head).toMatch(/\r\nallow: \r\n/i);
    expect(body!.endsWith('}\n')).toBe(true); // as every JSON answer
    expect(JSON.parse(body!)).toMatchObject({
      status: 405,
      code: 'METHOD_NOT_ALLOWED',
      type: '/problems/method-not-allowed',
      instance: 'example.com:443',
    });
    // The log line and the socket's close race each other: wait for the line, don't assume it came first.
    await vi.waitFor(
      () => {
        expect(server.logs.find((l) => l.event === 'request_failed' && l.method === 'CONNECT')).toMatchObject({
          status: 405,
        });
      },
      { timeout: 5_000 },
    );
  });
});

describe('server timeouts', () => {
  it('closes a slowloris connection once server.headers_timeout_ms has passed', async () => {
    const server = await start('server:\n  headers_timeout_ms: 500\n  request_timeout_ms: 5000\n');
    const { socket, received, closed } = await connect(server.port);
    socket.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    // One header line every 100 ms never finishes the head; Node's 60 s default would let this run for the whole test.
    const sent = await trickle(socket, closed, 'X-Slow: 1\r\n', 100, 250);
    expect(sent).toBeLessThan(250);
    expect(received()).toMatch(/^HTTP\/1\.1 408 Request Timeout/);
  });

  it('closes a connection whose body is slower than server.request_timeout_ms', async () => {
    const server = await start('server:\n  headers_timeout_ms: 500\n  request_timeout_ms: 1000\n');
    const { socket, received, closed } = await connect(server.port);
    socket.write(
      'POST /circuits/svc/outcomes HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n',
    );
    const sent = await trickle(socket, closed, ' ', 100, 250);
    expect(sent).toBeLessThan(250);
    expect(received()).toMatch(/^HTTP\/1\.1 408 Request Timeout/);
  });

  it('announces and applies server.keep_alive_timeout_ms to idle connections', async () => {
    const server = await start('server:\n  keep_alive_timeout_ms: 2000\n');
    const { socket, received, closed } = await connect(server.port);
    socket.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    await closed; // idle after one answer: the server closes it
    expect(received()).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(received()).toMatch(/\r\nKeep-Alive: timeout=2\r\n/i);
  });

  it('announces the 5 s keep-alive default', async () => {
    const server = await start();
    const { socket, received } = await connect(server.port);
    socket.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    await new Promise<void>((resolve) => socket.once('data', () => resolve()));
    expect(received()).toMatch(/\r\nKeep-Alive: timeout=5\r\n/i);
  });
});

describe('requests the HTTP adapter cannot route', () => {
  it.each([
    ['a backslash in the path', 'GET /circuits\\x/allowed HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'],
    ['no Host header', 'GET /health HTTP/1.0\r\nConnection: close\r\n\r\n'],
  ])('answer %s with a 400 problem+json, not a bare 400', async (_case, request) => {
    const server = await start();
    const { socket, received, closed } = await connect(server.port);
    socket.write(request);
    await closed;
    const [head = '', body = ''] = received().split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.[01] 400/);
    expect(head.toLowerCase()).toContain('content-type: application/problem+json');
    expect(body.endsWith('}\n')).toBe(true); // as every JSON answer
    const problem = JSON.parse(body) as Record<string, unknown>;
    expect(problem).toMatchObject({ status: 400, code: 'BAD_REQUEST', type: '/problems/bad-request' });
  });
});
