import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/app.js';
import { createAuditLog } from '../../src/audit/audit-log.js';
import type { AuditEntryInput } from '../../src/domain/audit-entry.js';
import { Housekeeping } from '../../src/service/housekeeping.js';
import type { AuditStore } from '../../src/store/audit-store.js';
import type { CircuitStore } from '../../src/store/circuit-store.js';
import type { HousekeepingStore } from '../../src/store/housekeeping-store.js';
import { openRedisStore, type OpenedRedis } from '../../src/store/redis/open.js';
import { RedisAuditStream } from '../../src/store/redis/redis-audit.js';
import { RedisHousekeeping } from '../../src/store/redis/redis-housekeeping.js';
import { SqliteAuditTable } from '../../src/store/sqlite/audit-table.js';
import { SqliteCircuitStore } from '../../src/store/sqlite/circuit-store.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../../src/store/sqlite/database.js';
import { SqliteHousekeeping } from '../../src/store/sqlite/housekeeping.js';
import { FakeClock, silentLogger } from '../helper.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { tempDir } from '../server-process.js';

const DAY_MS = 86_400_000;
let redis: RedisServer | undefined;
const opened: OpenedRedis[] = [];
beforeAll(async () => {
  redis = await startRedis();
}, 60_000);
afterAll(async () => {
  await Promise.all(opened.map((o) => o.close()));
  await redis?.stop('SIGKILL');
});

interface Stores {
  readonly circuits: CircuitStore;
  readonly audit: AuditStore;
  readonly housekeeping: HousekeepingStore;
}

const stores: [string, () => Promise<Stores>][] = [
  [
    'sqlite',
    async () => {
      const db = openDatabase(path.join(tempDir(), 'db.sqlite'));
      migrate(db, readMigrations(defaultMigrationsDir()));
      const circuits = new SqliteCircuitStore(db);
      return {
        circuits,
        audit: new SqliteAuditTable(db),
        housekeeping: new SqliteHousekeeping(db, (n) => circuits.forget(n)),
      };
    },
  ],
  [
    'redis',
    async () => {
      // 10 s per command, not the service's 1 s: 500 XADDs in flight on a busy machine (test/redis/test-store.ts).
      const o = await openRedisStore({
        url: redis!.url(),
        logger: silentLogger,
        prefix: `t-${randomUUID()}:`,
        timeoutMs: 10_000,
      });
      opened.push(o);
      return {
        circuits: o.store,
        audit: new RedisAuditStream(o.store.redis, o.store.keys.prefix),
        housekeeping: new RedisHousekeeping(o.store),
      };
    },
  ],
];

function entry(n: number, at: number): AuditEntryInput {
  const who = n % 100 === 0 ? 'bob' : 'alice';
  return {
    at,
    who,
    action: 'policy_changed',
    circuit: `c${n % 7}`,
    before: { n },
    after: { n },
    requestId: null,
    remote: null,
  };
}

/** `count` entries stored as fast as the store takes them (Redis: 500 XADDs in flight at a time), one ms apart. */
async function fill(audit: AuditStore, count: number, firstAt: number): Promise<void> {
  for (let start = 0; start < count; start += 500) {
    const chunk = [];
    for (let n = start; n < Math.min(count, start + 500); n++) chunk.push(audit.append(entry(n, firstAt + n)));
    // One at a time in order on SQLite (synchronous); on Redis a pipeline keeps their order too.
    await Promise.all(chunk);
  }
}

describe.each(stores)('the audit log on %s', (_name, open) => {
  it('GET /audit pages through 10,000 entries with limit 1000: newest first, no gaps, no duplicates', async () => {
    const s = await open();
    const clock = new FakeClock();
    await fill(s.audit, 10_000, clock.now() - 20_000);
    const app = createApp({
      store: s.circuits,
      clock: clock.now,
      logger: silentLogger,
      circuitDefaults: { failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1 },
      policy: { probeLeaseMs: 10_000 },
      audit: createAuditLog(s.audit, silentLogger),
    }).app;
    const seen: number[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res = await app.request(`/audit?limit=1000${cursor === null ? '' : `&before=${cursor}`}`);
      expect(res.status).toBe(200);
      const page = (await res.json()) as { entries: { after: { n: number } }[]; next_cursor: string | null };
      pages++;
      expect(page.entries.length).toBe(1000);
      seen.push(...page.entries.map((e) => e.after.n));
      cursor = page.next_cursor;
    } while (cursor !== null && pages < 20);
    expect(pages).toBe(10);
    expect(seen).toEqual(Array.from({ length: 10_000 }, (_, i) => 9_999 - i));
  });

  it('pages a sparse filter (who=bob: 1 in 100) to the end, newest first', async () => {
    const s = await open();
    await fill(s.audit, 10_000, 1_000_000);
    const log = createAuditLog(s.audit, silentLogger);
    const seen: number[] = [];
    let before: string | undefined;
    for (let pages = 0; pages < 100; pages++) {
      const page = await log.page({ limit: 30, who: 'bob', before });
      seen.push(...page.entries.map((e) => (JSON.parse(e.after!) as { n: number }).n));
      if (page.nextCursor === null) break;
      before = page.nextCursor;
    }
    expect(seen).toEqual(Array.from({ length: 100 }, (_, i) => 9_900 - i * 100));
  });

  it('appendOnce stores one of the same entries appended at once (a reload seen by every worker)', async () => {
    const s = await open();
    const reload = { ...entry(1, 5_000), action: 'credentials_reloaded' as const, after: { credentials: ['a'] } };
    const stored = await Promise.all([s.audit.appendOnce(reload, 10_000), s.audit.appendOnce(reload, 10_000)]);
    expect(stored.filter((e) => e !== null)).toHaveLength(1);
    const other = { ...reload, after: { credentials: ['a', 'b'] } };
    expect(await s.audit.appendOnce(other, 10_000)).not.toBeNull();
    expect((await s.audit.page({ limit: 10 })).entries).toHaveLength(2);
  });

  it('keeps entries audit.retention_days, trimmed by the housekeeping job and never by the transitions retention', async () => {
    const s = await open();
    const clock = new FakeClock();
    await fill(s.audit, 50, clock.now() - 400 * DAY_MS); // past 365 days
    await fill(s.audit, 20, clock.now() - 30 * DAY_MS); // past the transitions' 1 day, within 365
    const job = (audit?: { store: AuditStore; retentionDays: number }) =>
      new Housekeeping(s.housekeeping, clock.now, silentLogger, {
        maxAgeDays: 1,
        maxPerCircuit: 10,
        idleCircuitDays: null,
        isDeclared: () => false,
        batch: 7,
        yieldBetween: async () => {},
        audit,
      });
    await job().sweep(); // the transitions' retention alone: no audit entry goes
    const log = createAuditLog(s.audit, silentLogger);
    expect((await log.page({ limit: 1000 })).entries).toHaveLength(70);
    const report = await job({ store: s.audit, retentionDays: 365 }).sweep();
    expect(report.auditTrimmed).toBe(50);
    const kept = (await log.page({ limit: 1000 })).entries;
    expect(kept).toHaveLength(20);
    expect(kept.every((e) => e.at >= clock.now() - 30 * DAY_MS)).toBe(true);
  });
});
