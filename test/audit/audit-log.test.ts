import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { tempDir } from '../server-process.js';
import { listen } from '../observe/observe-app.js';
import { openStream } from '../observe/sse-client.js';
import pino from 'pino';
import { createAuditLog, reloadRecorder } from '../../src/audit/audit-log.js';
import type { AuditStore } from '../../src/store/audit-store.js';
import { authenticateByName, buildAuditedApp, credential } from './audit-app.js';

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

function app() {
  return buildAuditedApp({ authenticate: authenticateByName('alice', 'bob', 'oncall') });
}

describe('the audit log: one entry per change, naming who made it', () => {
  it('records a circuit created through PATCH: before null, after the whole policy', async () => {
    const a = app();
    expect((await a.request('PATCH', '/circuits/pay', 'alice', { failure_threshold: 7 })).status).toBe(201);
    const entries = await a.entries('alice');
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({
      who: 'alice',
      action: 'circuit_created',
      circuit: 'pay',
      at: '2026-11-30T03:30:00.000Z',
      before: null,
      after: { state: 'closed', failure_threshold: 7, forced_state: null },
    });
  });

  it('records a policy change with only the changed values before and after', async () => {
    const a = app();
    await a.request('PATCH', '/circuits/pay', 'alice', {});
    await a.request('PATCH', '/circuits/pay', 'bob', { failure_threshold: 9, timeout_seconds: 60 });
    const [latest, ...rest] = await a.entries('alice');
    expect(rest).toHaveLength(1);
    expect(latest).toMatchObject({
      who: 'bob',
      action: 'policy_changed',
      before: { failure_threshold: 5, timeout_seconds: 30 },
      after: { failure_threshold: 9, timeout_seconds: 60 },
    });
  });

  it('records force open, force closed and clear as their own actions, each once', async () => {
    const a = app();
    await a.request('PATCH', '/circuits/pay', 'alice', {});
    await a.request('PATCH', '/circuits/pay', 'oncall', { forced_state: 'open' });
    await a.request('PATCH', '/circuits/pay', 'bob', { forced_state: 'closed' });
    await a.request('PATCH', '/circuits/pay', 'alice', { forced_state: null });
    const entries = (await a.entries('alice')).slice(0, 3).reverse();
    expect(entries.map((e) => [e.who, e.action, e.before, e.after])).toEqual([
      ['oncall', 'forced_open', { forced_state: null }, { forced_state: 'open' }],
      ['bob', 'forced_closed', { forced_state: 'open' }, { forced_state: 'closed' }],
      ['alice', 'force_cleared', { forced_state: 'closed' }, { forced_state: null }],
    ]);
    expect(await a.entries('alice')).toHaveLength(4);
  });

  it('records a reset with the state before and after', async () => {
    const a = app();
    for (let i = 0; i < 5; i++) await a.request('POST', '/circuits/pay/failure', 'alice');
    expect((await a.request('POST', '/circuits/pay/reset', 'oncall')).status).toBe(200);
    const entries = await a.entries('alice');
    expect(entries).toHaveLength(1); // outcomes are not audited: they are not a person's change
    expect(entries[0]).toMatchObject({
      who: 'oncall',
      action: 'manual_reset',
      circuit: 'pay',
      before: { state: 'open', failure_count: 5 },
      after: { state: 'closed', failure_count: 0 },
    });
  });

  it('records a DELETE with the circuit as it was, after null', async () => {
    const a = app();
    await a.request('PATCH', '/circuits/pay', 'alice', { forced_state: 'open' });
    expect((await a.request('DELETE', '/circuits/pay', 'bob')).status).toBe(204);
    const [deleted] = await a.entries('alice');
    expect(deleted).toMatchObject({
      who: 'bob',
      action: 'circuit_deleted',
      before: { state: 'closed', forced_state: 'open', failure_threshold: 5 },
      after: null,
    });
    expect(await a.entries('alice')).toHaveLength(2);
  });

  it('records a backup once it is taken, with its size', async () => {
    const workDir = path.join(tempDir(), 'backup');
    const a = buildAuditedApp({
      token: 'unused',
      authenticate: authenticateByName('ops'),
      backup: { backup: (dest) => a.db.backup(dest), workDir },
    });
    const res = await a.request('GET', '/admin/backup', 'ops');
    expect(res.status).toBe(200);
    const bytes = (await res.arrayBuffer()).byteLength;
    const entries = await a.entries('ops');
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ who: 'ops', action: 'backup', circuit: null, before: null, after: { bytes } });
  });

  it('records a credentials reload once through its hook: by system, the credential ids before and after', async () => {
    const a = app();
    await reloadRecorder(a.audit, a.clock.now)({ before: ['a', 'b'], after: ['a', 'c'] });
    // Every worker reloads the same file: their identical entries within 10 s are one.
    await reloadRecorder(a.audit, a.clock.now)({ before: ['a', 'b'], after: ['a', 'c'] });
    const entries = await a.entries('alice');
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({
      who: 'system',
      action: 'credentials_reloaded',
      circuit: null,
      before: { credentials: ['a', 'b'] },
      after: { credentials: ['a', 'c'] },
      request_id: null,
      remote: null,
    });
  });

  it('answers a change whose entry the store refuses, and logs audit_not_recorded once', async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const refusing: AuditStore = {
      cursorPattern: /^\d+$/,
      append: () => {
        throw new Error('SQLITE_BUSY');
      },
      appendOnce: () => null,
      page: () => ({ entries: [], nextCursor: null }),
      trimByAge: () => 0,
    };
    const a = buildAuditedApp({ authenticate: authenticateByName('alice'), audit: createAuditLog(refusing, logger) });
    expect((await a.request('PATCH', '/circuits/pay', 'alice', { forced_state: 'open' })).status).toBe(201);
    expect(lines.filter((l) => l.event === 'audit_not_recorded')).toMatchObject([
      { level: 50, action: 'circuit_created', who: 'alice', circuit: 'pay' },
    ]);
  });

  it('records nothing for a refused change (a 422 PATCH, a reset or DELETE of an unknown circuit)', async () => {
    const a = app();
    expect((await a.request('PATCH', '/circuits/pay', 'alice', { failure_threshold: -1 })).status).toBe(422);
    expect((await a.request('POST', '/circuits/nope/reset', 'alice')).status).toBe(404);
    expect((await a.request('DELETE', '/circuits/nope', 'alice')).status).toBe(404);
    expect(await a.entries('alice')).toEqual([]);
  });

  it('names anonymous, the request id and the remote address (served over a socket)', async () => {
    const a = buildAuditedApp();
    const server = await listen(a);
    cleanup.push(() => server.close());
    const res = await fetch(`${server.url}/circuits/pay`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json', 'x-request-id': 'req-42' },
      body: '{"forced_state":"open"}',
    });
    expect(res.status).toBe(201);
    const [entry] = await a.entries();
    expect(entry).toMatchObject({ who: 'anonymous', request_id: 'req-42', remote: '127.0.0.1' });
  });
});

describe('manual transitions name who made them ("by")', () => {
  it('forced_open, force_cleared and manual_reset carry by in /circuits/{name}/events; automatic ones do not', async () => {
    const a = app();
    await a.request('PATCH', '/circuits/pay', 'oncall', { forced_state: 'open' });
    await a.request('PATCH', '/circuits/pay', 'alice', { forced_state: null });
    for (let i = 0; i < 5; i++) await a.request('POST', '/circuits/pay/failure', 'alice');
    await a.request('POST', '/circuits/pay/reset', 'bob');
    const res = await a.request('GET', '/circuits/pay/events', 'alice');
    const { events } = (await res.json()) as { events: Record<string, unknown>[] };
    expect(events.map((e) => [e.reason, e.by])).toEqual([
      ['manual_reset', 'bob'],
      ['failure_threshold_reached', undefined],
      ['force_cleared', 'alice'],
      ['forced_open', 'oncall'],
    ]);
  });

  it('sends by on the event stream, and the audit entry as an audit event', async () => {
    const a = app();
    const server = await listen(a);
    cleanup.push(() => server.close());
    const stream = await openStream(`${server.url}/events/stream?audit=true`, { authorization: 'Bearer alice' });
    cleanup.push(() => stream.close());
    await a.request('PATCH', '/circuits/pay', 'oncall', { forced_state: 'open' });
    const first = await stream.next();
    const second = await stream.next();
    const byKind = Object.fromEntries([first, second].map((e) => [e.event, e.data]));
    expect(byKind.audit).toMatchObject({ who: 'oncall', action: 'circuit_created', circuit: 'pay' });
    expect(byKind.transition).toMatchObject({ reason: 'forced_open', by: 'oncall' });
  });

  it('sends audit events only to streams that ask, of credentials that may read the audit log (admin)', async () => {
    const a = buildAuditedApp({
      authenticate: (h) =>
        h === 'Bearer reader'
          ? credential('reader', ['read'])
          : h === 'Bearer ops'
            ? credential('ops', ['admin'])
            : null,
    });
    const server = await listen(a);
    cleanup.push(() => server.close());
    const refused = await fetch(`${server.url}/events/stream?audit=true`, {
      headers: { authorization: 'Bearer reader' },
    });
    expect(refused.status).toBe(403);
    const reader = await openStream(`${server.url}/events/stream`, { authorization: 'Bearer reader' });
    const quiet = await openStream(`${server.url}/events/stream`, { authorization: 'Bearer ops' }); // did not ask
    const admin = await openStream(`${server.url}/events/stream?audit=true`, { authorization: 'Bearer ops' });
    cleanup.push(() => quiet.close());
    cleanup.push(
      () => reader.close(),
      () => admin.close(),
    );
    await a.request('PATCH', '/circuits/pay', 'ops', { forced_state: 'open' });
    const seen = [await admin.next(), await admin.next()].map((e) => e.event).sort();
    expect(seen).toEqual(['audit', 'transition']);
    const first = await reader.next();
    expect(first.event).toBe('transition');
    await a.request('PATCH', '/circuits/pay', 'ops', { forced_state: null }); // one more of each
    expect((await reader.next()).data).toMatchObject({ reason: 'force_cleared', by: 'ops' });
    expect(reader.queued.filter((e) => e.event === 'audit')).toEqual([]);
    expect((await quiet.next()).event).toBe('transition');
    expect((await quiet.next()).data).toMatchObject({ reason: 'force_cleared' });
    expect(quiet.queued.filter((e) => e.event === 'audit')).toEqual([]);
  });

  it('sends an audit event only to streams whose filter takes its circuit', async () => {
    const a = app();
    const server = await listen(a);
    cleanup.push(() => server.close());
    const other = await openStream(`${server.url}/events/stream?circuit=other&audit=true`, {
      authorization: 'Bearer alice',
    });
    const mine = await openStream(`${server.url}/events/stream?prefix=pay&audit=true`, {
      authorization: 'Bearer alice',
    });
    cleanup.push(
      () => other.close(),
      () => mine.close(),
    );
    await a.request('PATCH', '/circuits/pay', 'alice', { failure_threshold: 3 });
    await a.request('PATCH', '/circuits/other', 'alice', { failure_threshold: 3 });
    expect((await mine.next()).data).toMatchObject({ action: 'circuit_created', circuit: 'pay' });
    expect((await other.next()).data).toMatchObject({ action: 'circuit_created', circuit: 'other' });
    expect(mine.queued).toEqual([]);
  });
});

describe('GET /audit', () => {
  async function seeded() {
    const a = app();
    await a.request('PATCH', '/circuits/pay', 'alice', {}); // 03:30:00
    a.clock.advance(60_000);
    await a.request('PATCH', '/circuits/pay', 'oncall', { forced_state: 'open' }); // 03:31:00
    a.clock.advance(60_000);
    await a.request('PATCH', '/circuits/orders', 'bob', {}); // 03:32:00
    a.clock.advance(60_000);
    await a.request('POST', '/circuits/pay/reset', 'oncall'); // 03:33:00
    return a;
  }
  const actions = (entries: Record<string, any>[]) => entries.map((e) => `${e.action}:${e.circuit}`);

  it('answers newest first, filtered by circuit, who, action, since and until (ISO or ms)', async () => {
    const a = await seeded();
    expect(actions(await a.entries('alice'))).toEqual([
      'manual_reset:pay',
      'circuit_created:orders',
      'forced_open:pay',
      'circuit_created:pay',
    ]);
    expect(actions(await a.entries('alice', '&circuit=orders'))).toEqual(['circuit_created:orders']);
    expect(actions(await a.entries('alice', '&who=oncall'))).toEqual(['manual_reset:pay', 'forced_open:pay']);
    expect(actions(await a.entries('alice', '&action=circuit_created&circuit=pay'))).toEqual(['circuit_created:pay']);
    const since = Date.parse('2026-11-30T03:31:00.000Z');
    expect(actions(await a.entries('alice', `&since=${since}&until=2026-11-30T03:33:00Z`))).toEqual([
      'circuit_created:orders',
      'forced_open:pay',
    ]);
  });

  it('pages with limit and the before cursor, next_cursor null on the last page', async () => {
    const a = await seeded();
    const one = (await (await a.request('GET', '/audit?limit=3', 'alice')).json()) as any;
    expect(actions(one.entries)).toEqual(['manual_reset:pay', 'circuit_created:orders', 'forced_open:pay']);
    const two = (await (await a.request('GET', `/audit?limit=3&before=${one.next_cursor}`, 'alice')).json()) as any;
    expect(actions(two.entries)).toEqual(['circuit_created:pay']);
    expect(two.next_cursor).toBeNull();
  });

  it.each([
    ['limit=0', 'limit'],
    ['limit=1001', 'limit'],
    ['limit=ten', 'limit'],
    ['before=abc', 'before'],
    ['action=exploded', 'action'],
    ['since=yesterday', 'since'],
    ['until=2026-13-45Tnope', 'until'],
    ['colour=red', 'colour'],
  ])('answers 400 invalid-query naming the field for ?%s', async (query, field) => {
    const a = app();
    const res = await a.request('GET', `/audit?${query}`, 'alice');
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const problem = (await res.json()) as { type: string; errors: { field: string }[] };
    expect(problem.type).toBe('/problems/invalid-query');
    expect(problem.errors.map((e) => e.field)).toContain(field);
  });

  it('needs a credential when credentials are configured (401 without one)', async () => {
    const a = app();
    const res = await a.request('GET', '/audit');
    expect(res.status).toBe(401);
  });

  it('is in the OpenAPI document', async () => {
    const a = app();
    const doc = (await (await a.request('GET', '/openapi.json')).json()) as { paths: Record<string, any> };
    expect(Object.keys(doc.paths['/audit'] ?? {})).toEqual(['get']);
    const params = doc.paths['/audit'].get.parameters.map((p: { name: string }) => p.name);
    expect(params).toEqual(['limit', 'before', 'circuit', 'who', 'action', 'since', 'until']);
  });
});
