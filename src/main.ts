import cluster from 'node:cluster';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { getRequestListener } from '@hono/node-server';
import { adapterErrorHandler } from './server/request-error.js';
import pino, { type Logger } from 'pino';
import { createApp } from './app.js';
import { hostRule } from './http/browser-guard.js';
import { runPrimary, type StartFailedMessage } from './cluster.js';
import { ConfigError, configDefinedCircuit, describeConfig, loadConfig, type Config } from './config.js';
import { LeaderElection } from './leader.js';
import { activityStampMs, Housekeeping } from './service/housekeeping.js';
import type { HousekeepingStore } from './store/housekeeping-store.js';
import { SqliteHousekeeping } from './store/sqlite-housekeeping.js';
import { DueTransitions } from './service/due-transitions.js';
import { createObservability } from './observe/observability.js';
import { policyFromWire } from './policy-schema.js';
import { createHealthChecker } from './proxy/health-checker.js';
import { createUndiciClient } from './proxy/upstream-client.js';
import { rejectConnect } from './server/connect.js';
import { listen, probeListen, urlHost } from './server/listen.js';
import { serverTimeoutOptions } from './server/timeouts.js';
import type { BackupSource } from './server/backup-route.js';
import { SqliteCircuitStore, type CircuitStore } from './store/circuit-store.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from './store/database.js';
import { databaseFileProblem } from './store/db-file.js';
import { SqliteLeaseStore, type LeaseStore } from './store/lease-store.js';
import type { MaybePromise } from './store/maybe-promise.js';
import { redactUrl } from './store/store-choice.js';
import { CircuitSnapshot, type SnapshotReader } from './store/circuit-snapshot.js';
import { TransitionLog, type TransitionReader } from './store/transition-log.js';
import { StorageHealth, type HealthReport } from './store/storage-health.js';

const LEASE_RENEW_MS = 1_000; // 1 s
const LEASE_TTL_MS = 3_000; // 3 s: a dead leader's job moves to another worker within this

/** Run `fn` on the database; an SQLite error becomes a ConfigError naming CIRCUITLOG_DB. */
function withDatabase<T>(config: Config, fn: () => T): T {
  try {
    return fn();
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 'SQLITE_BUSY') {
      // A single-worker server holds its file exclusively; a second one on it lands here.
      throw new ConfigError(
        'CIRCUITLOG_DB: the database is locked by another process (another circuitlog on the same file? use CIRCUITLOG_WORKERS to run several)',
      );
    }
    if (typeof code === 'string' && code.startsWith('SQLITE_')) {
      throw new ConfigError(`CIRCUITLOG_DB: '${config.dbPath}' cannot be used by SQLite: ${(error as Error).message} (${code})`);
    }
    throw error;
  }
}

function migrateDatabase(config: Config, logger: Logger): void {
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

interface OpenedStore {
  readonly store: CircuitStore;
  /** What /events/stream, the dashboard and the state gauges read. */
  readonly readers: { readonly transitions: TransitionReader; readonly snapshot: () => SnapshotReader };
  /** Wakes the event streams when transitions arrive from other hosts (Redis). */
  readonly onForeignTransitions?: (listener: () => void) => void;
  readonly health: () => MaybePromise<HealthReport>;
  readonly leases: LeaseStore;
  /** Retention and idle deletion, run by the lease holder. */
  readonly housekeeping: HousekeepingStore;
  readonly close: () => void;
  /** SQLite only: the online backup behind GET /admin/backup. */
  readonly backup?: BackupSource;
  /** Redis: the store was emptied under us (FLUSHALL, a restart without data); listeners re-declare. */
  readonly onReset?: (listener: () => void) => void;
}

/** The store `CIRCUITLOG_STORE` names; an unreachable Redis is a ConfigError naming the variable. */
async function openStore(config: Config, logger: Logger, shared: boolean): Promise<OpenedStore> {
  if (config.store.kind === 'redis') {
    const { url, timeoutMs } = config.store;
    const { openRedisStore, describeStartFailure } = await import('./store/redis/open.js'); // SQLite users never load the Redis client
    const { RedisHousekeeping } = await import('./store/redis/redis-housekeeping.js');
    const { replicas_ack: replicasAck, replicas_ack_timeout_ms: replicasAckTimeoutMs } = config.storeOptions.redis;
    const redis = await openRedisStore({ url, timeoutMs, logger, replicasAck, replicasAckTimeoutMs }).catch((error: unknown) => {
      throw new ConfigError(`CIRCUITLOG_STORE: ${describeStartFailure(redactUrl(url), error)}`);
    });
    const health = () => redis.store.ping().then((ok): HealthReport => (ok ? { status: 'ok' } : { status: 'unavailable', detail: 'Redis does not answer' }));
    // The state gauges count every circuit of every host: a mirror of them, loading in the background.
    const mirror = config.metrics.enabled ? await redis.mirror(config.metrics.max_circuits) : null;
    const readers = { transitions: redis.feed, snapshot: () => mirror! };
    const onForeignTransitions = (listener: () => void) => redis.feed.onAppend(listener);
    const onReset = (listener: () => void) => redis.store.epoch.onReset(listener);
    const housekeeping = new RedisHousekeeping(redis.store);
    return { store: redis.store, readers, onForeignTransitions, health, leases: redis.leases, housekeeping, close: () => void redis.close(), onReset };
  }
  const db = withDatabase(config, () => openDatabase(config.dbPath, { synchronous: config.synchronous, exclusive: !shared }));
  const storage = new StorageHealth(config.dbPath, logger);
  const sqlite = new SqliteCircuitStore(db, !shared);
  const store = storage.wrap(sqlite);
  const readers = { transitions: new TransitionLog(db), snapshot: () => new CircuitSnapshot(db) };
  // Alone, this connection makes every write, and SQLite carries them into a running backup:
  // copy 16 MiB per step and let requests run between steps. With several workers another
  // process's write would restart a stepped backup, so copy the rest in one step (one read snapshot).
  const progress = ({ totalPages }: { totalPages: number }) => (shared ? totalPages : 4096);
  const backup = { backup: (destination: string) => db.backup(destination, { progress }), folder: path.dirname(path.resolve(config.dbPath)) };
  const housekeeping = new SqliteHousekeeping(db, (name) => sqlite.forget(name));
  return { store, readers, health: () => store.health(), leases: new SqliteLeaseStore(db), housekeeping, close: () => db.close(), backup };
}

/** Which variable named the SQLite file, for messages. */
const dbVariable = (_config: Config) => (process.env.CIRCUITLOG_STORE ? 'CIRCUITLOG_STORE' : 'CIRCUITLOG_DB');

/**
 * One server process. Alone (`workers = 1`) it holds the database file exclusively and checks
 * HOST/PORT before it migrates; as one of several workers it shares the file (the primary
 * checked and migrated it) and runs health checks only while it holds the lease.
 */
async function startServer(config: Config, logger: Logger, shared: boolean): Promise<void> {
  const server = http.createServer(serverTimeoutOptions(config.server));
  server.on('connect', rejectConnect(logger, Date.now));
  if (!shared) {
    await probeListen(config.port, config.host); // HOST/PORT checked before the migrations
    if (config.store.kind === 'sqlite') migrateDatabase(config, logger);
  }
  const { store, readers, onForeignTransitions, health: storeHealth, leases, housekeeping: housekeepingStore, close, backup, onReset } = await openStore(config, logger, shared);
  const { limits } = config;
  const { probe_lease_seconds: probeLeaseSeconds, ...defaults } = config.circuit_defaults;
  const { metrics, events } = config;
  const observe = createObservability({ readers, clock: Date.now, metricsEnabled: metrics.enabled, maxCircuits: metrics.max_circuits, maxStreams: events.max_streams, maxStreamBufferBytes: events.max_stream_buffer_bytes, clustered: shared });
  onForeignTransitions?.(() => observe.hub.nudge());
  const proxy =
    config.local_dc !== undefined && Object.keys(config.upstreams).length > 0
      ? { localDc: config.local_dc, upstreams: config.upstreams, client: createUndiciClient(), onCoalesced: observe.metrics?.proxyCoalesced }
      : undefined;
  const readiness = { draining: false };
  const { app, breaker, proxyListener, upgradeListener, ready } = createApp({
    readiness,
    backup,
    store,
    health: storeHealth,
    clock: Date.now,
    logger,
    circuitDefaults: policyFromWire(defaults),
    policy: { probeLeaseMs: probeLeaseSeconds * 1000 },
    token: config.token,
    apiBodyLimitBytes: config.api_body_limit_bytes,
    groupCommit: config.groupCommit,
    proxy,
    proxyOnStorageOutage: config.proxyOnStorageOutage,
    observe,
    hosts: hostRule(config.host, config.server.allowed_hosts),
    limits: {
      maxCircuits: limits.max_circuits,
      activityStampMs: limits.idle_circuit_days === null ? undefined : activityStampMs(limits.idle_circuit_days),
    },
  });
  const declare = async () => {
    for (const [name, fields] of Object.entries(config.circuits)) {
      await breaker.configure(name, () => policyFromWire({ ...defaults, ...fields })); // declared again at every start
    }
  };
  await declare();
  // An emptied Redis lost the declared policies too: declare them again (every host does; the same values).
  onReset?.(() => {
    declare().catch((error: unknown) => logger.warn({ event: 'redeclare_failed', err: (error as Error).message }, 'declaring circuits again after a store reset failed'));
  });
  await ready;
  const health = proxy ? createHealthChecker({ ...proxy, breaker, logger, hooks: observe.proxyHooks }) : null;
  const housekeeping = new Housekeeping(housekeepingStore, Date.now, logger, {
    maxAgeDays: events.retention.max_age_days,
    maxPerCircuit: events.retention.max_per_circuit,
    idleCircuitDays: limits.idle_circuit_days,
    isDeclared: configDefinedCircuit(config),
  });
  // The singleton jobs: health checks, publishing due open -> half-open transitions, housekeeping.
  const due = new DueTransitions(breaker, logger);
  const jobs = {
    start: () => (health?.start(), due.start(), housekeeping.start()),
    stop: () => (health?.stop(), due.stop(), housekeeping.stop()),
  };
  const leader =
    shared || config.store.kind === 'redis' // on Redis: one process across all hosts
      ? new LeaderElection(leases, Date.now, logger, {
          lease: 'health-checks', // the name predates housekeeping, which the same holder runs
          owner: `${os.hostname()}:${process.pid}`,
          renewMs: LEASE_RENEW_MS,
          ttlMs: LEASE_TTL_MS,
          onAcquire: jobs.start,
          onLose: jobs.stop,
        })
      : null;

  const honoListener = getRequestListener(app.fetch, { errorHandler: adapterErrorHandler(logger, Date.now) });
  server.on('request', (incoming, outgoing) => {
    if (readiness.draining) outgoing.shouldKeepAlive = false; // `Connection: close`: move callers off, as Envoy drains
    if (proxyListener !== undefined && incoming.url?.startsWith('/proxy/')) proxyListener(incoming, outgoing);
    else void honoListener(incoming, outgoing);
  });
  if (upgradeListener !== undefined) server.on('upgrade', upgradeListener);
  // Listen only now, with every listener attached: a connection accepted is a connection answered.
  await listen(server, config.port, config.host);
  const { port } = server.address() as AddressInfo;
  const event = cluster.isWorker ? 'worker_listening' : 'listening';
  const where = config.store.kind === 'sqlite' ? { db: config.dbPath } : { store: redactUrl(config.store.url) };
  logger.info({ event, host: config.host, port, ...where }, `circuitlog listening on http://${urlHost(config.host)}:${port}`);
  if (leader) leader.start();
  else jobs.start();
  const stopJobs = () => {
    observe.hub.closeAll(); // event streams never end by themselves
    if (leader) leader.stop();
    else jobs.stop();
  };
  onSignals((signal) => {
    readiness.draining = true;
    const delayMs = config.shutdown_delay_ms;
    logger.info({ event: 'not_ready', signal, shutdown_delay_ms: delayMs }, `not ready; serving ${delayMs} ms more before closing the port`);
    setTimeout(() => drain(signal, { server, close, logger, config, stopJobs, proxy }), delayMs);
  });
}

interface Running {
  readonly server: http.Server;
  readonly close: () => void;
  readonly logger: Logger;
  readonly config: Config;
  readonly stopJobs: () => void;
  readonly proxy: { client: { close(): Promise<void> } } | undefined;
}

/** After SIGTERM and the delay: stop taking connections, let in-flight requests finish (up to the grace), exit 0. */
function drain(signal: string, { server, close, logger, config, stopJobs, proxy }: Running): void {
  logger.info({ event: 'shutdown', signal }, 'draining in-flight requests');
  stopJobs();
  const timer = setTimeout(() => {
    logger.warn({ event: 'shutdown_timeout' }, 'grace period over; closing connections');
    server.closeAllConnections();
  }, config.shutdown_grace_ms);
  timer.unref();
  server.close(() => {
    void (proxy?.client.close() ?? Promise.resolve()).finally(() => {
      close();
      logger.info({ event: 'stopped' }, 'stopped');
      process.exit(0);
    });
  });
  server.closeIdleConnections();
}

/** SIGTERM and SIGINT, once. */
function onSignals(handler: (signal: NodeJS.Signals) => void): void {
  let stopping = false;
  const once = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    handler(signal);
  };
  process.on('SIGTERM', once);
  process.on('SIGINT', once);
}

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = pino({ level: config.logLevel, base: { pid: process.pid } });
  if (cluster.isWorker) return startServer(config, logger, true);
  logger.info({ event: 'starting', ...describeConfig(config) }, 'starting circuitlog');
  const dbProblem = config.store.kind === 'sqlite' ? databaseFileProblem(config.dbPath) : null;
  if (dbProblem) throw new ConfigError(`${dbVariable(config)}: '${config.dbPath}' ${dbProblem}`);
  if (config.workers === 1) return startServer(config, logger, false);
  await probeListen(config.port, config.host);
  if (config.store.kind === 'sqlite') migrateDatabase(config, logger);
  const primary = runPrimary({ workers: config.workers, port: config.port, host: config.host, shutdownGraceMs: config.shutdown_delay_ms + config.shutdown_grace_ms, logger });
  onSignals((signal) => primary.shutdown(signal));
}

main().catch((error: unknown) => {
  // A bad setting is exit code 2 with one line naming it; anything else is a bug: exit 1, with the stack.
  const known = error instanceof ConfigError;
  const message = known ? error.message : String((error as Error).stack ?? error);
  if (cluster.isWorker) {
    const failed: StartFailedMessage = { type: 'circuitlog:start_failed', message };
    process.send!(failed, () => process.exit(known ? 2 : 1));
    return;
  }
  process.stderr.write(known ? `circuitlog: cannot start: ${message}\n` : `${message}\n`);
  process.exit(known ? 2 : 1);
});
