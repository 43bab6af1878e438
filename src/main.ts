import { serve } from '@hono/node-server';
import pino from 'pino';
import { createApp } from './app.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from './store/database.js';
import { SqliteCircuitStore } from './store/circuit-store.js';

function start(config: Config): void {
  const logger = pino({ level: config.logLevel, base: { pid: process.pid } });
  const db = openDatabase(config.dbPath, { synchronous: config.synchronous });
  const applied = migrate(db, readMigrations(defaultMigrationsDir()));
  if (applied.length > 0) logger.info({ event: 'migrated', applied }, `applied ${applied.length} migration(s)`);

  const d = config.circuit_defaults;
  const { app } = createApp({
    store: new SqliteCircuitStore(db),
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
  });

  const server = serve({ fetch: app.fetch, port: config.port, hostname: config.host }, (info) => {
    logger.info({ event: 'listening', host: config.host, port: info.port, db: config.dbPath }, `circuitlog listening on http://${config.host}:${info.port}`);
  });

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ event: 'shutdown', signal }, 'draining in-flight requests');
    const timer = setTimeout(() => {
      logger.warn({ event: 'shutdown_timeout' }, 'grace period over; closing connections');
      (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
    }, config.shutdown_grace_ms);
    timer.unref();
    server.close(() => {
      db.close();
      logger.info({ event: 'stopped' }, 'stopped');
      process.exit(0);
    });
    (server as unknown as { closeIdleConnections?: () => void }).closeIdleConnections?.();
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

try {
  start(loadConfig());
} catch (error) {
  if (error instanceof ConfigError) {
    process.stderr.write(`circuitlog: configuration error: ${error.message}\n`);
    process.exit(2);
  }
  throw error;
}
