import type { Logger } from 'pino';
import { ConfigError, type Config } from '../config.js';
import type { BackupSource } from '../http/backup-routes.js';
import type { CircuitStore, HealthReport } from '../store/circuit-store.js';
import type { SnapshotReader } from '../store/snapshot-reader.js';
import { SchemaTooNewError } from '../store/schema-version.js';
import { backupDirOf, removeBackupLeftovers } from '../store/sqlite/backup-dir.js';
import { SqliteCircuitStore, StorageHealth } from '../store/sqlite/circuit-store.js';
import {
  defaultMigrationsDir,
  migrate,
  openDatabase,
  readMigrations,
  schemaVersion,
} from '../store/sqlite/database.js';
import type { HousekeepingStore } from '../store/housekeeping-store.js';
import type { LeaseStore } from '../store/lease-store.js';
import { SqliteLeaseStore } from '../store/sqlite/lease-store.js';
import { SqliteHousekeeping } from '../store/sqlite/housekeeping.js';
import { clusterTransitionSignal } from './cluster-transitions.js';
import { sqliteReaders } from '../store/sqlite/readers.js';
import { systemErrorProblem } from '../store/sqlite/db-file.js';
import { redactUrl } from '../domain/redact-url.js';
import type { TransitionReader } from '../store/transition-reader.js';
import type { AuditStore } from '../store/audit-store.js';
import { SqliteAuditTable } from '../store/sqlite/audit-table.js';
import { historySettings } from '../config/history-schema.js';

/** Everything the rest of the process takes from the store `CIRCUITLOG_STORE` names. */
export interface OpenedStore {
  readonly store: CircuitStore;
  /** What /events/stream, the dashboard and the state gauges read. */
  readonly readers: { readonly transitions: TransitionReader; readonly snapshot: () => SnapshotReader };
  /** Wakes the event streams when transitions arrive from other hosts (Redis) or workers (SQLite). */
  readonly onForeignTransitions?: (listener: () => void) => void;
  /** Called on each transition this process records: SQLite workers tell their siblings. */
  readonly announceTransitions?: () => void;
  readonly health: () => Promise<HealthReport>;
  readonly leases: LeaseStore;
  /** Retention and idle deletion, run by the lease holder. */
  readonly housekeeping: HousekeepingStore;
  /** The audit log (issue 30): the SQLite table `audit`, or a Redis stream. */
  readonly audit: AuditStore;
  readonly close: () => void;
  /** SQLite only: the online backup behind GET /admin/backup. */
  readonly backup?: BackupSource;
  /** Redis: the store was emptied under us (FLUSHALL, a restart without data); listeners re-declare. */
  readonly onReset?: (listener: () => void) => void;
  /** The store's schema version (SQLite: the highest migration applied; Redis: its schema key). */
  readonly schemaVersion: number;
}

/** Run `fn` on the database; an SQLite error becomes a ConfigError naming CIRCUITLOG_DB. */
function withDatabase<T>(config: Config, fn: () => T): T {
  try {
    return fn();
  } catch (error) {
    if (error instanceof SchemaTooNewError) throw new ConfigError(error.message);
    const code = (error as { code?: unknown }).code;
    if (code === 'SQLITE_BUSY') {
      // A single-worker server holds its file exclusively; a second one on it lands here.
      throw new ConfigError(
        'CIRCUITLOG_DB: the database is locked by another process (another circuitlog on the same file? use CIRCUITLOG_WORKERS to run several)',
      );
    }
    if (typeof code === 'string' && code.startsWith('SQLITE_')) {
      throw new ConfigError(
        `CIRCUITLOG_DB: '${config.dbPath}' cannot be used by SQLite: ${(error as Error).message} (${code})`,
      );
    }
    // The operating system's refusal (the path changed since it was checked): named, not a stack trace.
    const refused = systemErrorProblem(error);
    if (refused !== null) throw new ConfigError(`CIRCUITLOG_DB: '${config.dbPath}' ${refused}`);
    throw error;
  }
}

/**
 * Apply the pending migrations to the SQLite file (one process does this before any serves),
 * after removing what a backup killed part-way left next to it (no backup runs yet).
 */
export function migrateDatabase(config: Config, logger: Logger): void {
  for (const leftover of removeBackupLeftovers(config.dbPath))
    logger.info(
      { event: 'backup_leftover_removed', path: leftover },
      `removed ${leftover}, left by an interrupted backup`,
    );
  const applied = withDatabase(config, () => {
    const db = openDatabase(config.dbPath, { synchronous: config.synchronous });
    try {
      return migrate(db, readMigrations(defaultMigrationsDir()));
    } finally {
      db.close();
    }
  });
  if (applied.length > 0) logger.info({ event: 'migrated', applied }, `applied ${applied.length} migration(s)`);
}

/**
 * The store `CIRCUITLOG_STORE` names; an unreachable Redis is a ConfigError naming the variable.
 * `shared`: one of several workers on one SQLite file (else this process holds it exclusively).
 */
export async function openStore(config: Config, logger: Logger, shared: boolean): Promise<OpenedStore> {
  return config.store.kind === 'redis' ? openRedis(config, config.store, logger) : openSqlite(config, logger, shared);
}

async function openRedis(
  config: Config,
  choice: Extract<Config['store'], { kind: 'redis' }>,
  logger: Logger,
): Promise<OpenedStore> {
  const { url, timeoutMs } = choice;
  const { openRedisStore, describeStartFailure } = await import('../store/redis/open.js'); // SQLite users never load the Redis client
  const { RedisHousekeeping } = await import('../store/redis/redis-housekeeping.js');
  const { RedisAuditStream } = await import('../store/redis/redis-audit.js');
  const { replicas_ack: replicasAck, replicas_ack_timeout_ms: replicasAckTimeoutMs } = config.storeOptions.redis;
  const history = historySettings(config.history);
  const redis = await openRedisStore({ url, timeoutMs, logger, replicasAck, replicasAckTimeoutMs, history }).catch(
    (error: unknown) => {
      if (error instanceof SchemaTooNewError) throw new ConfigError(error.message);
      throw new ConfigError(`CIRCUITLOG_STORE: ${describeStartFailure(redactUrl(url), error)}`);
    },
  );
  const { schemaVersion } = redis;
  const health = () =>
    redis.store
      .ping()
      .then(
        (ok): HealthReport =>
          ok
            ? { status: 'ok', schema_version: schemaVersion }
            : { status: 'unavailable', detail: 'Redis does not answer', schema_version: schemaVersion },
      );
  // The state gauges count every circuit of every host: a mirror of them, loading in the background.
  const mirror = config.metrics.enabled ? await redis.mirror(config.metrics.max_circuits) : null;
  const readers = { transitions: redis.feed, snapshot: () => mirror! };
  const onForeignTransitions = (listener: () => void) => redis.feed.onAppend(listener);
  const onReset = (listener: () => void) => redis.store.epoch.onReset(listener);
  const housekeeping = new RedisHousekeeping(redis.store);
  return {
    store: redis.store,
    readers,
    onForeignTransitions,
    health,
    leases: redis.leases,
    housekeeping,
    audit: new RedisAuditStream(redis.store.redis, redis.store.keys.prefix),
    close: () => void redis.close(),
    onReset,
    schemaVersion,
  };
}

function openSqlite(config: Config, logger: Logger, shared: boolean): OpenedStore {
  const db = withDatabase(config, () =>
    openDatabase(config.dbPath, { synchronous: config.synchronous, exclusive: !shared }),
  );
  const storage = new StorageHealth(config.dbPath, logger);
  const sqlite = new SqliteCircuitStore(db, !shared, historySettings(config.history));
  const store = storage.wrap(sqlite);
  const readers = sqliteReaders(db);
  // Alone, this connection makes every write, and SQLite carries them into a running backup:
  // copy 16 MiB per step and let requests run between steps. With several workers another
  // process's write would restart a stepped backup, so copy the rest in one step (one read snapshot).
  const progress = ({ totalPages }: { totalPages: number }) => (shared ? totalPages : 4096);
  const backup = {
    backup: (destination: string) => db.backup(destination, { progress }),
    workDir: backupDirOf(config.dbPath),
  };
  const housekeeping = new SqliteHousekeeping(db, (name) => sqlite.forget(name));
  const version = schemaVersion(db);
  const siblings = shared ? clusterTransitionSignal() : undefined; // server/cluster-transitions.ts
  return {
    store,
    readers,
    onForeignTransitions: siblings?.onSibling,
    announceTransitions: siblings?.announce,
    health: async () => ({ ...store.health(), schema_version: version }),
    schemaVersion: version,
    leases: new SqliteLeaseStore(db),
    housekeeping,
    audit: new SqliteAuditTable(db),
    close: () => db.close(),
    backup,
  };
}
