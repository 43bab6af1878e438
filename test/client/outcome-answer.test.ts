// The client asks POST /outcomes for no body (Prefer: return=minimal, RFC 7240) and takes
// both answers as delivered: circuitlog's 204, and the 200 of a server that ignores the preference.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';

const servers: http.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

/** A loopback circuitlog stand-in whose POST /outcomes answers `status`; the batches' Prefer headers. */
async function standIn(status: 200 | 204): Promise<{ url: string; prefers: unknown[]; items: number[] }> {
  const seen = { prefers: [] as unknown[], items: [] as number[] };
  const server = http.createServer((req, res) => {
    if (req.url === '/events/stream')
      return void res.writeHead(200, { 'content-type': 'text/event-stream' }).write(': open\n\n');
    if (req.url?.split('?')[0]?.endsWith('/allowed'))
      return void res
        .writeHead(200, { 'content-type': 'application/json' })
        .end('{"allowed":true,"state":"closed","circuit":null}');
    if (req.url !== '/outcomes') return void res.writeHead(404).end();
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      seen.prefers.push(req.headers.prefer);
      seen.items.push((JSON.parse(body) as { outcomes: unknown[] }).outcomes.length);
      if (status === 204) res.writeHead(204, { 'preference-applied': 'return=minimal' }).end();
      else res.writeHead(200, { 'content-type': 'application/json' }).end('{"results":[]}');
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, ...seen };
}

describe('the answer to a batch of outcomes', () => {
  for (const status of [204, 200] as const) {
    it(`sends Prefer: return=minimal and takes a ${status} as delivered`, async () => {
      const server = await standIn(status);
      const client = createClient({ url: server.url, closeTimeoutMs: 2_000 });
      await client.ready();
      for (let i = 0; i < 30; i++) await client.call('svc', async () => i);
      await client.close(); // resolves only once every outcome is acknowledged
      expect(client.stats().outcomesAcknowledged).toBe(30);
      expect(server.items.reduce((a, b) => a + b, 0)).toBe(30);
      expect(new Set(server.prefers)).toEqual(new Set(['return=minimal']));
    });
  }
});
