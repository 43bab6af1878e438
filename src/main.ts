/**
 * The composition root and the only file that touches `process`. It reads top to bottom:
 * env -> config -> store -> observers -> app (with its service) -> jobs -> server. Alone a
 * process serves itself; with CIRCUITLOG_WORKERS > 1 the primary (server/cluster.ts) forks
 * workers that each run `startServer` on the shared store.
 */
import cluster from 'node:cluster';
import os from 'node:os';
import type { AddressInfo } from 'node:net';
import pino, { type Logger } from 'pino';
import { createApp, type App } from './app.js';
import { createAuditLog, reloadRecorder, type AuditLog } from './audit/audit-log.js';
import { ConfigError, describeConfig, loadConfig, type Config } from './config.js';
import { describeUnknownSetting, unknownSettings, type UnknownSetting } from './config/settings.js';
import { hostRule } from './http/request-guard.js';
import type { Readiness } from './http/service-routes.js';
import { createObservability, type Observability } from './observe/observability.js';
import { policyFromWire } from './policy-schema.js';
import type { ProxyOptions } from './proxy/proxy-routes.js';
import { createUndiciClient } from './proxy/upstream-client.js';
import { RELOAD_CREDENTIALS, runPrimary, type StartFailedMessage } from './server/cluster.js';
import { singletonJobs } from './server/jobs.js';
import { listen, probeListen, urlHost } from './server/listen.js';
import { createNodeServer, drain, serveApp } from './server/node-server.js';
import { migrateDatabase, openStore, type OpenedStore } from './server/open-store.js';
import { activityStampMs } from './service/housekeeping.js';
import { databaseFileProblem } from './store/sqlite/db-file.js';
import { redactUrl } from './domain/redact-url.js';
import { type CredentialSource, credentialSource } from './auth/credential-source.js';
import { createJwtVerifier, type JwtVerifier } from './auth/jwt.js';

/**
 * One server process. Alone (`shared` false) it holds the database file exclusively and
 * checks HOST/PORT before it migrates; as one of several workers it shares the file (the
 * primary checked and migrated it) and runs the singleton jobs only while it holds the lease.
 */
async function startServer(config: Config, logger: Logger, shared: boolean): Promise<void> {
  const readiness: { draining: boolean; schemaVersion?: number } = { draining: false };
  const server = createNodeServer(config.server, logger, readiness);
  if (!shared) {
    await probeListen(config.port, config.host); // HOST/PORT checked before the migrations
    if (config.store.kind === 'sqlite') migrateDatabase(config, logger);
  }
  const opened = await openStore(config, logger, shared);
  const observe = observersFor(config, opened, shared);
  const proxy = proxyFor(config, observe);
  readiness.schemaVersion = opened.schemaVersion;
  const auditLog = createAuditLog(opened.audit, logger);
  const credentials = credentialsFor(config, logger, credentialsAudit(config, auditLog));
  if (credentials !== undefined) {
    process.on('SIGHUP', () => credentials.reload('signal'));
    process.on('message', (message: { type?: unknown } | null) => {
      if (message?.type === RELOAD_CREDENTIALS) credentials.reload('signal');
    });
  }
  const auth = { authenticate: credentials?.authenticate, jwt: jwtFor(config, logger) };
  const built = createApp({
    ...appDeps(config, logger, { opened, observe, proxy, readiness, audit: auditLog }),
    ...auth,
  });
  await declareCircuits(config, built, opened, logger);
  await built.ready;
  const owner = `${os.hostname()}:${process.pid}`;
  const { housekeeping, leases, audit } = opened;
  const jobs = singletonJobs(config, {
    breaker: built.breaker,
    logger,
    proxy,
    observe,
    housekeeping,
    leases,
    audit,
    shared,
    owner,
  });
  serveApp(
    server,
    {
      fetch: built.app.fetch,
      proxyListener: built.proxyListener,
      allowedListener: built.allowedListener,
      upgradeListener: built.upgradeListener,
    },
    logger,
  );
  // Listen only now, with every listener attached: a connection accepted is a connection answered.
  await listen(server, config.port, config.host);
  logListening(config, logger, (server.address() as AddressInfo).port);
  jobs.start();
  credentials?.watch();
  onSignals((signal) => {
    readiness.draining = true;
    const delayMs = config.shutdown_delay_ms;
    logger.info(
      { event: 'not_ready', signal, shutdown_delay_ms: delayMs },
      `not ready; serving ${delayMs} ms more before closing the port`,
    );
    const stopJobs = () => {
      credentials?.close();
      auth.jwt?.close();
      observe.hub.closeAll(); // event streams never end by themselves
      jobs.stop();
    };
    const closeResources = () => (proxy?.client.close() ?? Promise.resolve()).finally(() => opened.close());
    const options = {
      logger,
      graceMs: config.shutdown_grace_ms,
      stopJobs,
      closeResources,
      onStopped: () => process.exit(0),
    };
    setTimeout(() => drain(server, signal, options), delayMs);
  });
}

/**
 * The credentials file's set, reloaded on SIGHUP and when the file changes (each worker
 * watches it; the primary passes SIGHUP on), with CIRCUITLOG_TOKEN as the credential `token`
 * beside it. Undefined without a file: CIRCUITLOG_TOKEN alone, or no credential at all.
 * `onReload` is where the audit log records `credentials_reloaded`.
 */
function credentialsFor(
  config: Config,
  logger: Logger,
  onReload?: (ids: readonly string[]) => void,
): CredentialSource | undefined {
  if (config.credentials === undefined) return undefined;
  return credentialSource({ ...config.credentials, token: config.token, logger, onReload });
}

/** `auth.jwt`'s verifier (src/auth/jwt.ts): one per worker, each with its own JWKS copy and token cache. */
function jwtFor(config: Config, logger: Logger): JwtVerifier | undefined {
  return config.auth.jwt === undefined ? undefined : createJwtVerifier(config.auth.jwt, { now: Date.now, logger });
}

/** The credentials reload's audit hook: the ids in force before (first, those read at start) and after. */
function credentialsAudit(config: Config, audit: AuditLog): ((ids: readonly string[]) => void) | undefined {
  if (config.credentials === undefined) return undefined;
  const record = reloadRecorder(audit, Date.now);
  let inForce = config.credentials.entries.map((e) => e.id);
  return (ids) => {
    const before = inForce;
    inForce = [...ids];
    void record({ before, after: inForce });
  };
}

/** Metrics, the event hub and the dashboard's reader, fed by the store's readers. */
function observersFor(config: Config, opened: OpenedStore, shared: boolean): Observability {
  const { metrics, events } = config;
  const observe = createObservability({
    readers: opened.readers,
    clock: Date.now,
    metricsEnabled: metrics.enabled,
    maxCircuits: metrics.max_circuits,
    maxStreams: events.max_streams,
    maxStreamBufferBytes: events.max_stream_buffer_bytes,
    pollMs: events.poll_ms,
    clustered: shared,
    onTransition: opened.announceTransitions,
  });
  opened.onForeignTransitions?.(() => observe.hub.nudge());
  return observe;
}

/** The proxy, when a local DC and at least one upstream are configured. */
function proxyFor(config: Config, observe: Observability): ProxyOptions | undefined {
  if (config.local_dc === undefined || Object.keys(config.upstreams).length === 0) return undefined;
  return {
    localDc: config.local_dc,
    upstreams: config.upstreams,
    client: createUndiciClient(),
    onCoalesced: observe.metrics?.proxyCoalesced,
    instanceId: config.instanceId,
  };
}

interface Wired {
  readonly opened: OpenedStore;
  readonly observe: Observability;
  readonly proxy: ProxyOptions | undefined;
  readonly readiness: Readiness;
  /** The audit log; AUTH's credentials reload records through `reloadRecorder(audit, ...)` (audit/audit-log.ts). */
  readonly audit: AuditLog;
}

/** createApp's dependencies from the config and what is already open. */
function appDeps(
  config: Config,
  logger: Logger,
  { opened, observe, proxy, readiness, audit }: Wired,
): Parameters<typeof createApp>[0] {
  const { probe_lease_seconds: probeLeaseSeconds, ...defaults } = config.circuit_defaults;
  const { limits } = config;
  return {
    readiness,
    backup: opened.backup,
    audit,
    store: opened.store,
    health: opened.health,
    clock: Date.now,
    logger,
    circuitDefaults: policyFromWire(defaults),
    policy: { probeLeaseMs: probeLeaseSeconds * 1000 },
    token: config.token,
    apiBodyLimitBytes: config.api_body_limit_bytes,
    groupCommit: config.groupCommit,
    history: config.history.enabled,
    historyMaxEntries: config.history.max_outcomes,
    proxy,
    proxyOnStorageOutage: config.proxyOnStorageOutage,
    observe,
    hosts: hostRule(config.host, config.server.allowed_hosts),
    limits: {
      maxCircuits: limits.max_circuits,
      activityStampMs: limits.idle_circuit_days === null ? undefined : activityStampMs(limits.idle_circuit_days),
    },
  };
}

/** The config's `circuits`, declared at every start, and again when an emptied Redis lost them. */
async function declareCircuits(config: Config, { breaker }: App, opened: OpenedStore, logger: Logger): Promise<void> {
  const { probe_lease_seconds: _lease, ...defaults } = config.circuit_defaults;
  const declare = async () => {
    for (const [name, { shadow, ...own }] of Object.entries(config.circuits)) {
      const policy = policyFromWire({ ...defaults, ...own });
      // A declared shadow (issue 31) is set at every start (the same one keeps its state); null clears it; absent leaves it.
      const candidate =
        shadow == null ? shadow : policyFromWire({ ...defaults, ...own, ...shadow, forced_state: null });
      await breaker.configure(name, () => ({ policy, shadow: candidate }));
    }
  };
  await declare();
  // Every host declares them again after a reset; the same values.
  opened.onReset?.(() => {
    declare().catch((error: unknown) =>
      logger.warn(
        { event: 'redeclare_failed', err: (error as Error).message },
        'declaring circuits again after a store reset failed',
      ),
    );
  });
}

function logListening(config: Config, logger: Logger, port: number): void {
  const event = cluster.isWorker ? 'worker_listening' : 'listening';
  const where = config.store.kind === 'sqlite' ? { db: config.dbPath } : { store: redactUrl(config.store.url) };
  logger.info(
    { event, host: config.host, port, ...where },
    `circuitlog listening on http://${urlHost(config.host)}:${port}`,
  );
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

/**
 * One warning per `CIRCUITLOG_*` variable the server does not read (by the primary only), never
 * with its value. A misspelt token with no token set says so: that start is unprotected.
 */
function warnUnknownSettings(config: Config, logger: Logger): void {
  for (const unknown of unknownSettings(process.env)) {
    const unprotected =
      config.token === undefined &&
      config.credentials === undefined &&
      config.auth.jwt === undefined &&
      tokenLike(unknown);
    logger.warn(
      { event: 'unknown_setting', setting: unknown.name, suggestion: unknown.suggestion ?? null },
      unprotected
        ? `${describeUnknownSetting(unknown)} CIRCUITLOG_TOKEN is not set, so this start is NOT protected: every route answers without a token`
        : describeUnknownSetting(unknown),
    );
  }
}

/** A name that was probably meant to set the token (`CIRCUITLOG_TOKN`, `CIRCUITLOG_API_TOKEN`, `CIRCUITLOG_AUTH`). */
const tokenLike = ({ name, suggestion }: UnknownSetting) =>
  suggestion === 'CIRCUITLOG_TOKEN' || /TOK|AUTH|SECRET|PASS|KEY|BEARER/i.test(name.slice('CIRCUITLOG_'.length));

/** Which variable named the SQLite file, for messages. */
const dbVariable = () => (process.env.CIRCUITLOG_STORE ? 'CIRCUITLOG_STORE' : 'CIRCUITLOG_DB');

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = pino({ level: config.logLevel, base: { pid: process.pid } });
  if (cluster.isWorker) return startServer(config, logger, true);
  warnUnknownSettings(config, logger);
  logger.info({ event: 'starting', ...describeConfig(config) }, 'starting circuitlog');
  const dbProblem = config.store.kind === 'sqlite' ? databaseFileProblem(config.dbPath) : null;
  if (dbProblem) throw new ConfigError(`${dbVariable()}: '${config.dbPath}' ${dbProblem}`);
  if (config.workers === 1) return startServer(config, logger, false);
  await probeListen(config.port, config.host);
  if (config.store.kind === 'sqlite') migrateDatabase(config, logger);
  const shutdownGraceMs = config.shutdown_delay_ms + config.shutdown_grace_ms;
  const primary = runPrimary({
    workers: config.workers,
    port: config.port,
    host: config.host,
    shutdownGraceMs,
    logger,
  });
  onSignals((signal) => primary.shutdown(signal));
  if (config.credentials !== undefined) process.on('SIGHUP', () => primary.reloadCredentials());
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
