import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { HEARTBEAT_MS } from '../../src/observe/observe-routes.js';
import { startServer, tempDir } from '../server-process.js';
import { buildObservedApp, listen, type ObservedOptions } from './observe-app.js';
import { openStream, type SseStream } from './sse-client.js';

const TOKEN = 'stream-token-0123456789';
const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

async function start(options: ObservedOptions = {}) {
  const app = buildObservedApp(options);
  const server = await listen(app);
  cleanup.push(() => server.close());
  const open = async (query = '', headers: Record<string, string> = {}) => {
    const stream = await openStream(`${server.url}/events/stream${query}`, headers);
    cleanup.push(() => stream.close());
    return stream;
  };
  const trip = async (name: string) => {
    for (let i = 0; i < 5; i++) await app.request('POST', `/circuits/${encodeURIComponent(name)}/failure`);
  };
  return { app, url: server.url, open, trip };
}

const drain = async (stream: SseStream, n: number) => {
  const out = [];
  for (let i = 0; i < n; i++) out.push(await stream.next());
  return out;
};

describe('GET /events/stream', () => {
  it('sends one transition event per state change with the row id and {circuit, from, to, reason, at}', async () => {
    const { app, open, trip } = await start();
    const stream = await open();
    expect(stream.status).toBe(200);
    expect(stream.headers['content-type']).toMatch(/^text\/event-stream/);
    await trip('a');
    app.clock.advance(30_000);
    await app.request('POST', '/circuits/a/success');
    const events = await drain(stream, 3);
    const ids = app.db.prepare('SELECT id FROM transitions ORDER BY id').pluck().all();
    expect(events.map((e) => e.id)).toEqual(ids);
    expect(events.every((e) => e.event === 'transition')).toBe(true);
    expect(events[0]!.data).toEqual({
      circuit: 'a',
      from: 'closed',
      to: 'open',
      reason: 'failure_threshold_reached',
      at: '2026-11-30T03:30:00.000Z',
    });
    expect(events.map((e) => `${e.data.from}>${e.data.to}`)).toEqual([
      'closed>open',
      'open>half_open',
      'half_open>closed',
    ]);
  });

  it('sends only what happens after it opened when no Last-Event-ID is given', async () => {
    const { open, trip } = await start();
    await trip('before');
    const stream = await open();
    await trip('after');
    expect((await stream.next()).data.circuit).toBe('after');
  });

  it('filters by ?circuit= (exact name) and ?prefix= (name prefix)', async () => {
    const { open, trip } = await start();
    const one = await open('?circuit=pay/charge');
    const some = await open('?prefix=pay/');
    for (const name of ['pay', 'pay/charge', 'pay/charge2', 'other', 'pay/refund']) await trip(name);
    const all = await open('?circuit=last');
    await trip('last');
    expect((await all.next()).data.circuit).toBe('last');
    expect(one.queued.map((e) => e.data.circuit)).toEqual(['pay/charge']);
    expect(some.queued.map((e) => e.data.circuit)).toEqual(['pay/charge', 'pay/charge2', 'pay/refund']);
  });

  it('replays every missed transition after Last-Event-ID, with the same filter, then goes on live', async () => {
    const { open, trip } = await start();
    for (const name of ['x/1', 'y/1', 'x/2', 'x/3']) await trip(name);
    const stream = await open('?prefix=x/', { 'last-event-id': '1' });
    const replayed = await drain(stream, 2);
    expect(replayed.map((e) => [e.id, e.data.circuit])).toEqual([
      [3, 'x/2'],
      [4, 'x/3'],
    ]);
    await trip('x/4');
    expect((await stream.next()).id).toBe(5);
  });

  it('sends a comment heartbeat at the configured interval (15 s by default)', async () => {
    expect(HEARTBEAT_MS).toBe(15_000);
    const { open } = await start({ heartbeatMs: 30 });
    const stream = await open();
    while (!stream.comments.includes('heartbeat')) await new Promise((r) => setTimeout(r, 10));
    expect(stream.comments[0]).toBe('circuitlog event stream');
  });

  it('answers 503 past events.max_streams and takes a new stream once one closes', async () => {
    const { app, open } = await start({ maxStreams: 1 });
    const first = await open();
    const refused = await open();
    expect(refused.status).toBe(503);
    expect(refused.headers['content-type']).toBe('application/problem+json');
    expect(JSON.parse(refused.body)).toMatchObject({ code: 'TOO_MANY_STREAMS', status: 503 });
    expect(refused.headers['retry-after']).toBe('5');
    first.close();
    while (app.observe.hub.size > 0) await new Promise((r) => setTimeout(r, 10));
    expect((await open()).status).toBe(200);
  });

  it('destroys a stream whose unsent bytes pass events.max_stream_buffer_bytes, and lets it go', async () => {
    const app = buildObservedApp({ maxStreamBufferBytes: 16 * 1024 });
    // app.request: nothing reads the body, so every event stays unsent.
    const res = await app.request('GET', '/events/stream');
    expect(res.status).toBe(200);
    expect(app.observe.hub.size).toBe(1);
    for (let i = 0; i < 120; i++)
      for (let k = 0; k < 5; k++) await app.request('POST', `/circuits/${'c'.repeat(100)}${i}/failure`);
    app.observe.hub.poll();
    expect(app.observe.hub.size).toBe(0);
    await expect(res.text()).rejects.toThrow();
  });

  it('replays past the buffer bound by waiting for the reader, not by cutting it off', async () => {
    const { app, open } = await start({ maxStreamBufferBytes: 16 * 1024 });
    const outcomes = Array.from({ length: 300 }, (_, i) => ({
      circuit: `replay-${'x'.repeat(60)}-${i}`,
      success: false,
    }));
    for (let k = 0; k < 5; k++) expect((await app.request('POST', '/outcomes', { outcomes })).status).toBe(200);
    const stream = await open('', { 'last-event-id': '0' });
    const events = await drain(stream, 300); // about 60 KiB: four times the bound
    expect(events.map((e) => e.id)).toEqual(Array.from({ length: 300 }, (_, i) => i + 1));
  });

  it('answers a Last-Event-ID above the newest id with a reset event, then goes on live from the newest', async () => {
    const { app, open, trip } = await start();
    await trip('a');
    const stream = await open('', { 'last-event-id': '999' });
    const reset = await stream.next();
    expect(reset).toEqual({ id: 1, event: 'reset', data: { reason: 'unknown-event-id', newest_id: 1 } });
    await trip('b');
    expect(await stream.next()).toMatchObject({ id: 2, event: 'transition', data: { circuit: 'b' } });
    expect(app.db.prepare('SELECT count(*) FROM transitions').pluck().get()).toBe(2);
  });

  it('answers a Last-Event-ID older than the oldest kept transition with reset "expired"', async () => {
    const { app, open, trip } = await start();
    for (const name of ['a', 'b', 'c', 'd']) await trip(name);
    app.db.prepare('DELETE FROM transitions WHERE id <= 2').run(); // as retention would
    const expired = await open('', { 'last-event-id': '1' });
    expect(await expired.next()).toEqual({ id: 4, event: 'reset', data: { reason: 'expired', newest_id: 4 } });
    const resumable = await open('', { 'last-event-id': '2' }); // 3 is the next id, and it is kept
    expect((await drain(resumable, 2)).map((e) => [e.event, e.id])).toEqual([
      ['transition', 3],
      ['transition', 4],
    ]);
  });

  it('names an unknown query parameter in its 400', async () => {
    const { open } = await start();
    const res = await open('?foo=1');
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body).errors).toEqual([{ field: 'foo', message: expect.stringContaining('unknown') }]);
  });

  it('refuses a bad Last-Event-ID, both filters at once, and unknown parameters with 400', async () => {
    const { open } = await start();
    const badId = await open('', { 'last-event-id': 'abc' });
    expect([badId.status, JSON.parse(badId.body).code]).toEqual([400, 'INVALID_HEADER']);
    const both = await open('?circuit=a&prefix=b');
    expect([both.status, JSON.parse(both.body).code]).toEqual([400, 'INVALID_QUERY']);
    expect((await open('?circuits=a')).status).toBe(400);
  });

  it('needs the bearer token when CIRCUITLOG_TOKEN is set', async () => {
    const { open } = await start({ deps: { token: TOKEN } });
    expect((await open()).status).toBe(401);
    expect((await open('', { authorization: `Bearer ${TOKEN}` })).status).toBe(200);
  });

  it('ends open streams on SIGTERM, so shutdown does not wait out the grace period', async () => {
    const dir = tempDir();
    fs.writeFileSync(path.join(dir, 'c.yaml'), 'shutdown_grace_ms: 600000\n'); // 10 min: the test would time out
    const server = await startServer({
      CIRCUITLOG_DB: path.join(dir, 'db.sqlite'),
      CIRCUITLOG_CONFIG: path.join(dir, 'c.yaml'),
    });
    cleanup.push(() => server.stop('SIGKILL'));
    const stream = await openStream(`${server.url}/events/stream`);
    cleanup.push(() => stream.close());
    const exited = server.stop('SIGTERM');
    await stream.ended;
    expect(await exited).toBe(0);
  });

  it('stays open past the server request, headers and keep-alive timeouts', async () => {
    const dir = tempDir();
    const config = 'server: { headers_timeout_ms: 1000, request_timeout_ms: 1000, keep_alive_timeout_ms: 1000 }\n';
    fs.writeFileSync(path.join(dir, 'c.yaml'), config);
    const server = await startServer({
      CIRCUITLOG_DB: path.join(dir, 'db.sqlite'),
      CIRCUITLOG_CONFIG: path.join(dir, 'c.yaml'),
    });
    cleanup.push(() => server.stop());
    const stream = await openStream(`${server.url}/events/stream`);
    cleanup.push(() => stream.close());
    await new Promise((r) => setTimeout(r, 2_500)); // every server timeout (checked each second) has passed
    for (let i = 0; i < 5; i++) await fetch(`${server.url}/circuits/late/failure`, { method: 'POST' });
    expect((await stream.next()).data.circuit).toBe('late');
  });

  it('replays transitions made before a server restart from the transitions table', async () => {
    const db = path.join(tempDir(), 'db.sqlite');
    const first = await startServer({ CIRCUITLOG_DB: db });
    for (let i = 0; i < 5; i++) await fetch(`${first.url}/circuits/r/failure`, { method: 'POST' });
    await fetch(`${first.url}/circuits/r/reset`, { method: 'POST' });
    await first.stop();
    const second = await startServer({ CIRCUITLOG_DB: db });
    cleanup.push(() => second.stop());
    const stream = await openStream(`${second.url}/events/stream`, { 'last-event-id': '0' });
    cleanup.push(() => stream.close());
    const events = await drain(stream, 2);
    expect(events.map((e) => [e.id, e.data.reason])).toEqual([
      [1, 'failure_threshold_reached'],
      [2, 'manual_reset'],
    ]);
  });
});
