// Issue 15: `event: reset` on /events/stream (Last-Event-ID unknown or too old): the client
// re-takes every snapshot and resumes after the newest id, against a fake stream server.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, expect, it, vi } from 'vitest';
import { createClient, type StreamReset } from '../../src/client/index.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

it('takes a fresh snapshot of every circuit on event: reset, and resumes after newest_id', async () => {
  const streams: { lastEventId: string | undefined; res: http.ServerResponse }[] = [];
  const allowed: string[] = [];
  const server = http.createServer((req, res) => {
    if (req.url === '/events/stream') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': open\n\n');
      streams.push({ lastEventId: req.headers['last-event-id'] as string | undefined, res });
    } else if ((req.url ?? '').split('?')[0]?.endsWith('/allowed')) {
      allowed.push(req.url ?? '');
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end('{"allowed":true,"state":"closed","circuit":null}');
    } else {
      req.resume().on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"results":[]}'));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  const client = createClient({
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    reconnectMaxDelayMs: 200,
    closeTimeoutMs: 500,
  });
  cleanups.push(() => client.close().catch(() => undefined));
  await client.ready();

  await client.call('svc', async () => 1);
  await client.call('svc', async () => 2);
  expect(allowed).toHaveLength(1); // the second call was decided locally, on the snapshot

  const resets: StreamReset[] = [];
  client.on('reset', (r) => resets.push(r));
  const at = new Date().toISOString();
  streams[0]!.res.write(
    `event: transition\nid: 3\ndata: {"circuit":"other","from":"closed","to":"open","reason":"failure_threshold_reached","at":"${at}"}\n\n`,
  );
  streams[0]!.res.write('event: reset\ndata: {"reason":"unknown-event-id","newest_id":42}\n\n');
  await vi.waitFor(() => expect(resets).toEqual([{ reason: 'unknown-event-id', newestId: '42' }]));

  await client.call('svc', async () => 3);
  expect(allowed).toHaveLength(2); // events may have been missed: asked afresh
  await client.call('svc', async () => 4);
  expect(allowed).toHaveLength(2); // and trusted again after that

  streams[0]!.res.end(); // the next connection resumes after the reset's newest id, not 3
  await vi.waitFor(() => expect(streams).toHaveLength(2));
  expect(streams.map((s) => s.lastEventId)).toEqual([undefined, '42']);
});
