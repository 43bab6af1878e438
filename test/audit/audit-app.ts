import { createApp, type AppDeps } from '../../src/app.js';
import { createAuditLog } from '../../src/audit/audit-log.js';
import { ANONYMOUS, defaultCallers, type Identity, type Scope } from '../../src/auth/identity.js';
import { createObservability } from '../../src/observe/observability.js';
import { SqliteAuditTable } from '../../src/store/sqlite/audit-table.js';
import { sqliteReaders } from '../../src/store/sqlite/readers.js';
import { FakeClock, memoryStore, silentLogger } from '../helper.js';

/** A named credential as the credentials file will make one (src/auth/identity.ts). */
export function credential(id: string, scopes: Scope[]): Identity {
  return { ...ANONYMOUS, id, kind: 'credential', scopes: new Set(scopes), callers: defaultCallers(id) };
}

/** `Bearer <id>` signs in as that credential (every scope); anything else is refused (401). */
export function authenticateByName(...ids: string[]): NonNullable<AppDeps['authenticate']> {
  const known = new Map(ids.map((id) => [`Bearer ${id}`, credential(id, ['admin'])]));
  return (header) => known.get(header ?? '') ?? null;
}

/** The app with an audit log on an in-memory SQLite database, the event stream on, and a fake clock. */
export function buildAuditedApp(deps: Partial<AppDeps> = {}) {
  const clock = new FakeClock();
  const { db, store } = memoryStore();
  const auditTable = new SqliteAuditTable(db);
  const audit = createAuditLog(auditTable, silentLogger);
  const observe = createObservability({
    readers: sqliteReaders(db),
    clock: clock.now,
    metricsEnabled: false,
    maxCircuits: 10_000,
    maxStreams: 100,
  });
  const built = createApp({
    store,
    clock: clock.now,
    logger: silentLogger,
    circuitDefaults: { failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1 },
    policy: { probeLeaseMs: 10_000 },
    observe,
    audit,
    ...deps,
  });
  const request = (method: string, path: string, as?: string, body?: unknown, headers: Record<string, string> = {}) =>
    built.app.request(path, {
      method,
      headers: {
        ...(as === undefined ? {} : { authorization: `Bearer ${as}` }),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  /** Every entry of `GET /audit` (as `as`), newest first. */
  const entries = async (as?: string, query = '') => {
    const res = await request('GET', `/audit?limit=1000${query}`, as);
    if (res.status !== 200) throw new Error(`GET /audit: ${res.status} ${await res.text()}`);
    return ((await res.json()) as { entries: Record<string, any>[] }).entries;
  };
  return { ...built, clock, db, store, audit, auditTable, request, entries };
}
