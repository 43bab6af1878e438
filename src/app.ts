import { OpenAPIHono } from '@hono/zod-openapi';
import type { Logger } from 'pino';
import type { BreakerPolicy, CircuitSettings } from './domain/circuit.js';
import { nodeCircuitName } from './domain/circuit-name.js';
import { registerDashboardRoutes } from './dashboard/dashboard-routes.js';
import { registerBackup, type BackupSource } from './http/backup-routes.js';
import { type Backtester, registerBacktestRoutes, workerBacktester } from './http/backtest-routes.js';
import { BacktestRunner } from './lab/backtest-worker.js';
import { registerCircuitRoutes } from './http/circuit-routes.js';
import { registerDocsPage } from './http/docs-page.js';
import { problemAnswer, registerFallbacks } from './http/fallbacks.js';
import { registerDocument } from './http/openapi.js';
import { registerOutcomeRoutes } from './http/outcome-routes.js';
import { registerPolicyRoutes } from './http/policy-routes.js';
import {
  rawProxyListener,
  rawUpgradeListener,
  type RequestListener,
  type UpgradeListener,
} from './http/raw-listeners.js';
import { rawAllowedListener, type FastListener } from './http/raw-allowed.js';
import { type Authenticator, tokenAuthenticator } from './auth/bearer.js';
import type { JwtVerifier } from './auth/jwt.js';
import { withJwt } from './auth/jwt-bearer.js';
import { guardFetch, type HostRule, rawRequestPath, requestGuard } from './http/request-guard.js';
import { registerServiceRoutes, type Readiness } from './http/service-routes.js';
import { registerWhoami } from './http/whoami-route.js';
import type { Observability } from './observe/observability.js';
import { registerObserveRoutes } from './observe/observe-routes.js';
import { documentObserveRoutes } from './observe/observe-openapi.js';
import { isCursorReader } from './observe/stream-resume.js';
import {
  registerProxyRoutes,
  registerUnconfiguredProxy,
  type ProxyOptions,
  type ProxyRoutes,
} from './proxy/proxy-routes.js';
import { BreakerService, type Clock, type ServiceLimits } from './service/breaker-service.js';
import type { RandomSource } from './domain/throttle.js';
import type { CircuitStore } from './store/circuit-store.js';
import type { HealthReport } from './store/circuit-store.js';
import { NO_AUDIT_LOG, type AuditLog } from './audit/audit-log.js';
import { registerAuditRoutes } from './http/audit-routes.js';
import { auditFrame } from './observe/event-frames.js';

const DEFAULT_API_BODY_LIMIT_BYTES = 16 * 1024; // 16 KiB

export interface AppDeps {
  readonly store: CircuitStore;
  readonly clock: Clock;
  /** Uniform numbers in [0, 1) for soft throttling's draws (default `Math.random`); tests pass a fake. */
  readonly random?: RandomSource;
  readonly logger: Logger;
  readonly circuitDefaults: CircuitSettings;
  readonly policy: BreakerPolicy;
  /** When set, the TOKEN_PATHS (http/request-guard.ts) need `Authorization: Bearer <token>`. */
  readonly token?: string;
  /**
   * Who a bearer credential is (src/auth): wins over `token` when both are given. Absent with no
   * token: no credential is asked for, every request is `ANONYMOUS` (every scope).
   */
  readonly authenticate?: Authenticator;
  /** `auth.jwt` (src/auth/jwt.ts): a bearer JWT that no credential above claims is checked by it. */
  readonly jwt?: JwtVerifier;
  readonly apiBodyLimitBytes?: number;
  /** Group-commit the outcomes of the HTTP routes (default on). */
  readonly groupCommit?: boolean;
  /** Config `history.enabled` (issue 31; default on): the store keeps an outcome history (`BreakerDeps.history`). */
  readonly history?: boolean;
  /** The proxy when the store cannot be reached: the local DC's nodes unguarded (default), or 503. */
  readonly proxyOnStorageOutage?: 'fail_open' | 'refuse';
  /** Upstreams served under /proxy/:upstream, and the client that reaches their nodes. */
  readonly proxy?: ProxyOptions;
  /** /metrics, /events/stream and /dashboard (src/observe, src/dashboard). */
  readonly observe?: Observability;
  /**
   * Which `Host` names are answered (`hostRule(HOST, server.allowed_hosts)`); others get 421.
   * Absent or null: no check (tests; a server on a public address without a list).
   */
  readonly hosts?: HostRule;
  /** The store's health for `/health` (full disk, deleted file); default: `store.ping()`. */
  readonly health?: () => Promise<HealthReport>;
  /** `limits.max_circuits` and the activity stamp idle deletion needs (default: none). */
  readonly limits?: ServiceLimits;
  /** For `GET /health/ready` (draining after SIGTERM); ready throughout when absent. */
  readonly readiness?: Readiness;
  /** The SQLite store's online backup for `GET /admin/backup`; absent on Redis. */
  readonly backup?: BackupSource;
  /**
   * The audit log (issue 30, src/audit): every PATCH, DELETE, force, reset and backup is one
   * entry, `GET /audit` pages it and `/events/stream` sends its `audit` events. Absent:
   * `NO_AUDIT_LOG` (nothing recorded, `/audit` answers an empty page).
   */
  readonly audit?: AuditLog;
  /** The policy lab's engine (issue 31): default the worker thread (lab/backtest-worker.ts); tests pass a fake. */
  readonly backtester?: Backtester;
  /** `history.max_outcomes`: the most history entries one backtest reads (default 200,000). */
  readonly historyMaxEntries?: number;
}

const DEFAULT_HISTORY_MAX_ENTRIES = 200_000; // history.max_outcomes' default

export interface App {
  readonly app: OpenAPIHono;
  readonly breaker: BreakerService;
  /**
   * With a proxy configured: serves `/proxy/*` straight from Node's request and response,
   * skipping @hono/node-server's Request and Context (about a sixth of a proxied request's
   * cost). The server routes `/proxy/` to it; the same handler also sits behind Hono's route.
   */
  readonly proxyListener?: RequestListener;
  /**
   * `GET /circuits/{name}/allowed` answered from memory on Node's request and response, after
   * the same guards (http/raw-allowed.ts); it returns false for anything it leaves to `app.fetch`.
   */
  readonly allowedListener: FastListener;
  /** Resolves once start-up writes (proxy node circuits) are stored; at once on SQLite. */
  readonly ready: Promise<void>;
  /** With a proxy configured: node:http's 'upgrade' listener (WebSocket pass-through under /proxy). */
  readonly upgradeListener?: UpgradeListener;
}

/**
 * Build the HTTP app from its dependencies; src/main.ts serves it, tests call `app.request()`.
 * Order matters: the routes, then the fallbacks (notFound, onError); the guards (Host, cross-site,
 * token) wrap `app.fetch` in front of the router (http/request-guard.ts).
 */
export function createApp(deps: AppDeps): App {
  const breaker = new BreakerService({ ...deps, observer: deps.observe?.observer });
  const app = new OpenAPIHono({ getPath: rawRequestPath }); // routing on the raw path: see http/request-guard.ts
  const hosts = deps.hosts ?? null;
  const bodyLimitBytes = deps.apiBodyLimitBytes ?? DEFAULT_API_BODY_LIMIT_BYTES;
  const audit = deps.audit ?? NO_AUDIT_LOG;
  registerCircuitRoutes(app, breaker, { bodyLimitBytes, isConfigCircuit: nodeCircuitNames(deps.proxy), audit });
  registerOutcomeRoutes(app, breaker, bodyLimitBytes);
  registerPolicyRoutes(app, breaker, bodyLimitBytes, audit);
  registerBacktestRoutes(app, breaker, {
    store: deps.store,
    backtester: deps.backtester ?? workerBacktester(new BacktestRunner()),
    maxEntries: deps.historyMaxEntries ?? DEFAULT_HISTORY_MAX_ENTRIES,
    bodyLimitBytes,
  });
  const proxy = registerProxy(app, deps, breaker);
  if (deps.observe) {
    const { hub } = deps.observe;
    audit.onEntry((entry) => hub.broadcast(entry.circuit, auditFrame(entry)));
    registerObserveRoutes(app, { ...deps.observe, logger: deps.logger });
    documentObserveRoutes(app, deps.observe.metrics !== undefined, isCursorReader(deps.observe.transitions));
    registerDashboardRoutes(app, {
      breaker,
      transitions: deps.observe.transitions,
      proxy: deps.proxy,
      tokenRequired: deps.token !== undefined || deps.authenticate !== undefined || deps.jwt !== undefined,
      concurrency: proxy?.concurrency,
    });
  }
  registerServiceRoutes(app, deps);
  registerWhoami(app);
  // A credential is asked for: CIRCUITLOG_TOKEN, or the credentials file (issue 30).
  const tokenSet =
    (deps.token !== undefined && deps.token !== '') || deps.authenticate !== undefined || deps.jwt !== undefined;
  registerBackup(app, deps.backup, tokenSet, { log: audit, now: deps.clock });
  registerAuditRoutes(app, audit);
  registerDocument(app, { token: tokenSet, upstreams: deps.proxy ? Object.keys(deps.proxy.upstreams) : null });
  registerDocsPage(app, '/openapi.json');
  const onRefusal = deps.observe?.metrics?.authRefused;
  registerFallbacks(app, deps.logger, deps.clock, onRefusal);
  const credentials = deps.authenticate ?? (deps.token ? tokenAuthenticator(deps.token) : null);
  const guard = requestGuard(hosts, deps.jwt ? withJwt(credentials, deps.jwt) : credentials);
  guardFetch(app, guard, problemAnswer(deps.logger, deps.clock, onRefusal));
  const allowedListener = rawAllowedListener({ breaker, guard, logger: deps.logger, clock: deps.clock });
  if (proxy === undefined) return { app, breaker, allowedListener, ready: Promise.resolve() };
  const raw = { proxy, hosts, logger: deps.logger, clock: deps.clock };
  return {
    app,
    breaker,
    allowedListener,
    proxyListener: rawProxyListener(raw),
    upgradeListener: rawUpgradeListener(raw),
    ready: proxy.ready,
  };
}

/** `/proxy/:upstream/*` when upstreams are configured; else the same paths answer "unknown upstream". */
function registerProxy(app: OpenAPIHono, deps: AppDeps, breaker: BreakerService): ProxyRoutes | undefined {
  if (!deps.proxy) {
    registerUnconfiguredProxy(app);
    return undefined;
  }
  return registerProxyRoutes(app, { ...deps, proxy: deps.proxy, breaker, hooks: deps.observe?.proxyHooks });
}

/** Whether a name is a proxy node's circuit (`<upstream>/<node id>`), defined by the config. */
function nodeCircuitNames(proxy: ProxyOptions | undefined): (name: string) => boolean {
  const names = new Set(
    Object.entries(proxy?.upstreams ?? {}).flatMap(([u, cfg]) => cfg.nodes.map((n) => nodeCircuitName(u, n.id))),
  );
  return (name) => names.has(name);
}
