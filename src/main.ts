import cluster from 'node:cluster';
import os from 'node:os';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { getRequestListener } from '@hono/node-server';
import pino, { type Logger } from 'pino';
import { createApp } from './app.js';
import { runPrimary } from './cluster.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { LeaderElection } from './leader.js';
import { createObservability } from './observe/observability.js';
import { createHealthChecker } from './proxy/health-checker.js';
import { createUndiciClient } from './proxy/upstream-client.js';
import { SqliteCircuitStore } from './store/circuit-store.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from './store/database.js';
import { SqliteLeaseStore } from './store/lease-store.js';

const LEASE_RENEW_MS = 1_000; // 1 s
const LEASE_TTL_MS = 3_000; // 3 s: a dead leader's job moves to another worker within this

function migrateDatabase(config: Config, logger: Logger): void {
  const db = openDatabase(config.dbPath, { synchronous: config.synchronous });
  const applied = migrate(db, readMigrations(defaultMigrationsDir()));
  db.close();
  if (applied.length > 0) logger.info({ event: 'migrated', applied }, `applied ${applied.length} migration(s)`);
}

/**
 * One server process. Alone (`workers = 1`) it holds the database file exclusively; as one
 * of several workers it shares the file and runs health checks only while it holds the lease.
 */
function startServer(config: Config, logger: Logger, shared: boolean): void {
  const db = openDatabase(config.dbPath, { synchronous: config.synchronous, exclusive: !shared });
  const store = new SqliteCircuitStore(db, !shared);
  const d = config.circuit_defaults;
  const proxy =
    config.local_dc !== undefined && Object.keys(config.upstreams).length > 0
      ? { localDc: config.local_dc, upstreams: config.upstreams, client: createUndiciClient() }
      : undefined;
  const { metrics, events } = config;
  const observe = createObservability({ db, clock: Date.now, metricsEnabled: metrics.enabled, maxCircuits: metrics.max_circuits, maxStreams: events.max_streams, clustered: shared });
  const { app, breaker, proxyListener } = createApp({
    store,
    clock: Date.now,
    logger,
    circuitDefaults: {
      failureThreshold: d.failure_threshold,
      timeoutSeconds: d.timeout_seconds,
      halfOpenMaxCalls: d.half_open_max_calls,
    },
    policy: { probeLeaseMs: d.probe_lease_seconds * 1000 },
    token: config.token,
    apiBodyLimitBytes: config.api_body_limit_bytes,
    proxy,
    observe,
  });
  const health = proxy ? createHealthChecker({ ...proxy, breaker, logger, hooks: observe.proxyHooks }) : null;
  const leader =
    health && shared
      ? new LeaderElection(new SqliteLeaseStore(db), Date.now, logger, {
          lease: 'health-checks',
          owner: `${os.hostname()}:${process.pid}`,
          renewMs: LEASE_RENEW_MS,
          ttlMs: LEASE_TTL_MS,
          onAcquire: () => health.start(),
          onLose: () => health.stop(),
        })
      : null;

  const honoListener = getRequestListener(app.fetch);
  const server = http.createServer((incoming, outgoing) => {
    if (proxyListener !== undefined && incoming.url?.startsWith('/proxy/')) proxyListener(incoming, outgoing);
    else void honoListener(incoming, outgoing);
  });
  server.listen(config.port, config.host, () => {
    const { port } = server.address() as AddressInfo;
    const event = cluster.isWorker ? 'worker_listening' : 'listening';
    logger.info({ event, host: config.host, port, db: config.dbPath }, `circuitlog listening on http://${config.host}:${port}`);
    if (leader) leader.start();
    else health?.start();
  });

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ event: 'shutdown', signal }, 'draining in-flight requests');
    observe.hub.closeAll(); // event streams never end by themselves
    if (leader) leader.stop();
    else health?.stop();
    const timer = setTimeout(() => {
      logger.warn({ event: 'shutdown_timeout' }, 'grace period over; closing connections');
      server.closeAllConnections();
    }, config.shutdown_grace_ms);
    timer.unref();
    server.close(() => {
      void (proxy?.client.close() ?? Promise.resolve()).finally(() => {
        db.close();
        logger.info({ event: 'stopped' }, 'stopped');
        process.exit(0);
      });
    });
    server.closeIdleConnections();
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

function main(): void {
  const config = loadConfig();
  const logger = pino({ level: config.logLevel, base: { pid: process.pid } });
  if (cluster.isWorker) {
    startServer(config, logger, true);
    return;
  }
  migrateDatabase(config, logger);
  if (config.workers === 1) {
    startServer(config, logger, false);
    return;
  }
  runPrimary({ workers: config.workers, port: config.port, host: config.host, shutdownGraceMs: config.shutdown_grace_ms, logger });
}

try {
  main();
} catch (error) {
  if (error instanceof ConfigError) {
    process.stderr.write(`circuitlog: configuration error: ${error.message}\n`);
    process.exit(2);
  }
  if ((error as { code?: unknown }).code === 'SQLITE_BUSY') {
    // A single-worker server holds its file exclusively; a second one on it lands here.
    process.stderr.write(
      `circuitlog: CIRCUITLOG_DB: the database is locked by another process (another circuitlog on the same file? use CIRCUITLOG_WORKERS to run several)\n`,
    );
    process.exit(2);
  }
  throw error;
}
