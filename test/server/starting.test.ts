import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { answerStarting } from '../../src/server/starting.js';

const servers: net.Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A server whose every connection gets the start-up answer; resolves with its port. */
async function startingServer(): Promise<number> {
  const server = net.createServer((socket) => void answerStarting(socket, () => 0));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as net.AddressInfo).port;
}

/** Send `request` raw and read everything until the server closes. */
function exchange(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(request));
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
  });
}

describe('a connection accepted while starting (the HOST/PORT probe)', () => {
  it('gets 503 NOT_READY problem+json with Retry-After: 1 and Connection: close, then the server closes', async () => {
    const port = await startingServer();
    const text = await exchange(port, 'GET /health/ready?x=1 HTTP/1.1\r\nHost: localhost\r\n\r\n');
    const [head, body] = text.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n/);
    expect(head).toContain('\r\nretry-after: 1');
    expect(head).toContain('\r\nconnection: close');
    expect(head).toContain('\r\ncontent-type: application/problem+json');
    expect(head).toContain(`\r\ncontent-length: ${Buffer.byteLength(body!)}`);
    expect(body!.endsWith('}\n')).toBe(true); // as every JSON answer
    expect(JSON.parse(body!)).toMatchObject({
      status: 503,
      code: 'NOT_READY',
      type: '/problems/not-ready',
      instance: '/health/ready',
    });
  });

  it('answers a client that sends a partial head once it stops sending (half-close)', async () => {
    const port = await startingServer();
    const text = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.end('GET / HT'));
      let out = '';
      socket.on('data', (chunk: Buffer) => (out += chunk.toString()));
      socket.on('end', () => resolve(out));
      socket.on('error', reject);
    });
    expect(text).toMatch(/^HTTP\/1\.1 503 /);
  });
});
