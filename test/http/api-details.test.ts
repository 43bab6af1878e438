import { once } from 'node:events';
import net from 'node:net';
import { describe, expect, it, vi } from 'vitest';
import { buildApp } from '../helper.js';
import { capturingLogger, switchableBusyStore, useServedApp } from './served-app.js';

const serveApp = useServedApp();

describe('GET /circuits paging', () => {
  it('gives next_cursor null when the last page is exactly full', async () => {
    const t = buildApp();
    for (const name of ['a', 'b', 'c', 'd']) await t.request('POST', `/circuits/${name}/success`);
    const page1 = await (await t.request('GET', '/circuits?limit=2')).json();
    expect(page1.circuits.map((c: { name: string }) => c.name)).toEqual(['a', 'b']);
    expect(page1.next_cursor).not.toBeNull();
    const page2 = await (await t.request('GET', `/circuits?limit=2&cursor=${page1.next_cursor}`)).json();
    expect(page2.circuits.map((c: { name: string }) => c.name)).toEqual(['c', 'd']);
    expect(page2.next_cursor).toBeNull();
  });

  it('gives next_cursor null for a single exactly full page', async () => {
    const t = buildApp();
    await t.request('POST', '/circuits/only/success');
    expect((await (await t.request('GET', '/circuits?limit=1')).json()).next_cursor).toBeNull();
  });
});

describe('POST bodies', () => {
  const routes = ['call', 'success', 'failure', 'reset', 'outcomes'];

  it.each(routes)('answers 415 to a non-JSON body on /%s, changing nothing', async (route) => {
    const t = buildApp();
    await t.request('POST', '/circuits/svc/failure');
    const res = await t.app.request(`/circuits/svc/${route}`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'hello',
    });
    expect(res.status).toBe(415);
    expect(await res.json()).toMatchObject({ code: 'UNSUPPORTED_MEDIA_TYPE' });
    expect(await t.breaker.get('svc')).toMatchObject({ failureCount: 1 });
  });

  it.each(['success', 'reset'])('still takes /%s with no body or an empty JSON object', async (route) => {
    const t = buildApp();
    await t.request('POST', '/circuits/svc/failure');
    expect((await t.request('POST', `/circuits/svc/${route}`)).status).toBe(200);
    expect((await t.request('POST', `/circuits/svc/${route}`, {})).status).toBe(200);
  });

  it('answers 413 to an oversized body on /success', async () => {
    const t = buildApp({ apiBodyLimitBytes: 100 });
    const res = await t.request('POST', '/circuits/svc/success', { pad: 'x'.repeat(200) });
    expect(res.status).toBe(413);
    expect(await t.breaker.get('svc')).toBeNull();
  });
});

describe('request logs', () => {
  it('logs the transition but not each refused call of an open circuit', async () => {
    const { logger, lines } = capturingLogger();
    const t = buildApp({ logger });
    for (let i = 0; i < 5; i++) await t.request('POST', '/circuits/svc/outcomes', { success: false });
    for (let i = 0; i < 20; i++) expect((await t.request('GET', '/circuits/svc/allowed')).status).toBe(503);
    expect(lines.filter((l) => l.event === 'transition')).toHaveLength(1);
    expect(lines.filter((l) => (l.level as number) >= 30 && l.event === 'request_failed')).toEqual([]);
  });

  it('logs no refused call at info, whatever refused it: forced open, a cool-down, a ramp', async () => {
    const { logger, lines } = capturingLogger();
    const t = buildApp({ logger, random: () => 0.99 });
    await t.request('PATCH', '/circuits/forced', { forced_state: 'open' });
    await t.request('POST', '/circuits/cooled/outcomes', { kind: 'throttled', retry_after_seconds: 30 });
    await t.request('PATCH', '/circuits/ramped', { ramp: { seconds: 60, start_percent: 10 } });
    await t.request('POST', '/circuits/ramped/outcomes', { kind: 'throttled', retry_after_seconds: 1 });
    t.clock.advance(2_000); // the cool-down is over: the ramp admits about 10 %, and the draw is 0.99
    const codes: string[] = [];
    for (const name of ['forced', 'cooled', 'ramped']) {
      const res = await t.request('GET', `/circuits/${name}/allowed`);
      expect(res.status).toBe(503);
      codes.push(((await res.json()) as { code: string }).code);
    }
    expect(codes).toEqual(['CIRCUIT_FORCED_OPEN', 'DEPENDENCY_THROTTLED', 'CIRCUIT_RAMPING']);
    expect(lines.filter((l) => (l.level as number) >= 30 && l.event === 'request_failed')).toEqual([]);
    expect(lines.filter((l) => l.event === 'request_failed').map((l) => l.code)).toEqual(codes); // at debug
  });

  it('logs storage-busy as a warning', async () => {
    const { logger, lines } = capturingLogger();
    const busy = switchableBusyStore();
    const t = buildApp({ logger, store: busy.store });
    busy.state.busy = true;
    const res = await t.request('POST', '/circuits/svc/failure');
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(lines.filter((l) => l.event === 'request_failed')).toEqual([
      expect.objectContaining({ level: 40, code: 'STORAGE_BUSY' }),
    ]);
  });
});

describe('a caller hanging up mid-body', () => {
  it('is a debug line (like nginx 499), not an error with a stack', async () => {
    const { logger, lines } = capturingLogger();
    const t = await serveApp({ logger });
    const socket = net.connect(t.port, '127.0.0.1');
    const requested = once(t.server, 'request');
    socket.write(
      'POST /circuits/svc/outcomes HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"succ',
    );
    await requested; // the server is reading the body
    socket.destroy();
    await vi.waitFor(() => expect(lines.some((l) => l.event === 'client_closed')).toBe(true), { timeout: 10_000 });
    expect(lines.find((l) => l.event === 'client_closed')).toMatchObject({
      level: 20,
      status: 499,
      path: '/circuits/svc/outcomes',
    });
    expect(lines.filter((l) => (l.level as number) >= 40)).toEqual([]);
    expect(await t.breaker.get('svc')).toBeNull();
  });
});
