import { createHash, timingSafeEqual } from 'node:crypto';
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { OpenAPIHono } from '@hono/zod-openapi';
import type { Context, MiddlewareHandler } from 'hono';
import type { Logger } from 'pino';
import type { BreakerPolicy, CircuitSettings } from './domain/circuit.js';
import { nodeCircuitName } from './domain/circuit-name.js';
import { AppError } from './domain/errors.js';
import { checkHost, misdirected, refuseCrossSite, type HostRule } from './http/browser-guard.js';
import { registerCircuitRoutes } from './http/circuit-routes.js';
import { registerPolicyRoutes } from './http/policy-routes.js';
import { registerDocsPage } from './http/docs-page.js';
import { registerDocument } from './http/openapi.js';
import { dotSegmentProblem, rawRequestPath } from './http/raw-path.js';
import { ClientClosedError } from './http/request.js';
import { PROBLEMS, problemParts, problemResponse } from './http/problem.js';
import { json } from './http/json.js';
import { registerProxyRoutes, registerUnconfiguredProxy, type ProxyOptions } from './proxy/proxy-routes.js';
import { BreakerService, type Clock, type ServiceLimits } from './service/breaker-service.js';
import type { CircuitStore } from './store/circuit-store.js';
import type { Observability } from './observe/observability.js';
import { registerObserveRoutes } from './observe/observe-routes.js';
import { documentObserveRoutes } from './observe/observe-openapi.js';
import { registerDashboardRoutes } from './dashboard/dashboard-routes.js';
import type { HealthReport } from './store/storage-health.js';
import { chain, type MaybePromise } from './store/maybe-promise.js';
import { registerReadiness, type Readiness } from './server/readiness.js';
import { registerBackup, type BackupSource } from './server/backup-route.js';

export interface AppDeps {
  readonly store: CircuitStore;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly circuitDefaults: CircuitSettings;
  readonly policy: BreakerPolicy;
  /** When set, /circuits routes need `Authorization: Bearer <token>`. */
  readonly token?: string;
  readonly apiBodyLimitBytes?: number;
  /** Group-commit the outcomes of the HTTP routes (default on). */
  readonly groupCommit?: boolean;
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
  readonly health?: () => MaybePromise<HealthReport>;
  /** `limits.max_circuits` and the activity stamp idle deletion needs (default: none). */
  readonly limits?: ServiceLimits;
  /** For `GET /health/ready` (draining after SIGTERM); ready throughout when absent. */
  readonly readiness?: Readiness;
  /** The SQLite store's online backup for `GET /admin/backup`; absent on Redis. */
  readonly backup?: BackupSource;
}

export interface App {
  readonly app: OpenAPIHono;
  readonly breaker: BreakerService;
  /**
   * With a proxy configured: serves `/proxy/*` straight from Node's request and response,
   * skipping @hono/node-server's Request and Context (about a sixth of a proxied request's
   * cost). main.ts routes `/proxy/` to it; the same handler also sits behind Hono's route.
   */
  readonly proxyListener?: (incoming: IncomingMessage, outgoing: ServerResponse) => void;
  /** Resolves once start-up writes (proxy node circuits) are stored; at once on SQLite. */
  readonly ready: Promise<void>;
  /** With a proxy configured: node:http's 'upgrade' listener (WebSocket pass-through under /proxy). */
  readonly upgradeListener?: (incoming: IncomingMessage, socket: Duplex, head: Buffer) => void;
}

/** Bearer-token check with a constant-time compare (hashing first makes the lengths equal). */
function requireToken(token: string): MiddlewareHandler {
  const expected = createHash('sha256').update(token).digest();
  return async (c, next) => {
    const header = c.req.header('authorization') ?? '';
    const match = /^Bearer (.+)$/i.exec(header);
    const given = createHash('sha256').update(match?.[1] ?? '').digest();
    if (!match || !timingSafeEqual(given, expected)) {
      throw new AppError('UNAUTHORIZED', 'This route needs Authorization: Bearer <CIRCUITLOG_TOKEN>.', {
        headers: { 'www-authenticate': 'Bearer realm="circuitlog"' },
      });
    }
    await next();
  };
}

/** Build the HTTP app from its dependencies; main.ts serves it, tests call `app.request()`. */
export function createApp(deps: AppDeps): App {
  const breaker = new BreakerService(deps.store, deps.clock, deps.logger, deps.circuitDefaults, deps.policy, deps.groupCommit, deps.observe?.observer, deps.limits);
  // Routing on the raw path: see raw-path.ts.
  const app = new OpenAPIHono({ getPath: rawRequestPath });
  const hosts = deps.hosts ?? null;
  app.use('*', checkHost(hosts));
  // Proxied requests are the upstream's business: its own CSRF rules apply, not these.
  const crossSite = refuseCrossSite();
  app.use('*', (c, next) => (c.req.path === '/proxy' || c.req.path.startsWith('/proxy/') ? next() : crossSite(c, next)));
  if (deps.token) {
    app.use('/circuits', requireToken(deps.token));
    app.use('/circuits/*', requireToken(deps.token));
    app.use('/outcomes', requireToken(deps.token));
    for (const path of ['/metrics', '/events/*', '/dashboard/api/*', '/admin/*']) app.use(path, requireToken(deps.token));
  }

  registerCircuitRoutes(app, breaker, deps.apiBodyLimitBytes ?? 16 * 1024); // 16 KiB
  registerPolicyRoutes(app, breaker, { bodyLimitBytes: deps.apiBodyLimitBytes ?? 16 * 1024, isConfigCircuit: nodeCircuitNames(deps.proxy) });
  const pending: Promise<unknown>[] = [];
  const proxyRoutes = deps.proxy ? registerProxyRoutes(app, { ...deps, proxy: deps.proxy, breaker, pending, hooks: deps.observe?.proxyHooks }) : undefined;
  const proxyHandler = proxyRoutes?.handler;
  if (!deps.proxy) registerUnconfiguredProxy(app);

  if (deps.observe) {
    registerObserveRoutes(app, { ...deps.observe, logger: deps.logger });
    documentObserveRoutes(app, deps.observe.metrics !== undefined);
    registerDashboardRoutes(app, { breaker, transitions: deps.observe.transitions, proxy: deps.proxy, tokenRequired: deps.token !== undefined, concurrency: proxyRoutes?.concurrency });
  }
  app.get('/health', async (c) => {
    const report = await (deps.health?.() ?? chain(deps.store.ping(), (ok): HealthReport => ({ status: ok ? 'ok' : 'unavailable' })));
    return json(c, report, report.status === 'ok' ? 200 : 503);
  });
  registerReadiness(app, deps.readiness);
  registerBackup(app, deps.backup, deps.token !== undefined && deps.token !== '');
  app.get('/problems/:kind', (c) => {
    const entry = Object.values(PROBLEMS).find((p) => p.type === `/problems/${c.req.param('kind')}`);
    if (!entry) throw new AppError('NOT_FOUND', `No problem type '${c.req.param('kind')}'.`);
    return json(c, entry);
  });
  registerDocument(app, { token: deps.token !== undefined && deps.token !== '', proxy: deps.proxy !== undefined });
  registerDocsPage(app, '/openapi.json');

  const allowedMethods = methodIndex(app);
  app.notFound((c) => {
    const dots = dotSegmentProblem(c.req.path);
    if (dots) return render(c, dots);
    const allow = allowedMethods(c.req.path);
    if (allow.length > 0 && !allow.includes(c.req.method)) {
      return render(c, new AppError('METHOD_NOT_ALLOWED', `${c.req.method} is not allowed here.`, { headers: { allow: allow.join(', ') } }));
    }
    return render(c, new AppError('NOT_FOUND', `No route for ${c.req.method} ${c.req.path}.${slashHint(c.req.path)}`));
  });
  app.onError((error, c) => {
    if (error instanceof ClientClosedError) {
      // nginx's 499: the caller went away; nobody reads this answer and nothing failed here.
      deps.logger.debug({ event: 'client_closed', method: c.req.method, path: c.req.path, status: 499 }, 'caller closed the connection');
      return new Response(null, { status: 499 });
    }
    return render(c, toAppError(error));
  });

  function logFailure(method: string, path: string, error: AppError): void {
    const status = PROBLEMS[error.code].status;
    const fields = { event: 'request_failed', method, path, status, code: error.code };
    if (error.code === 'INTERNAL') deps.logger.error({ ...fields, err: error.options.cause ?? error }, error.message);
    // A refusal is the breaker working: its transitions are logged, not each refused call.
    else if (error.code === 'CIRCUIT_OPEN') deps.logger.debug(fields, error.message);
    else if (error.code.startsWith('STORAGE_')) deps.logger.warn(fields, error.message);
    else deps.logger.info(fields, error.message);
  }

  function render(c: Context, error: AppError): Response {
    logFailure(c.req.method, c.req.path, error);
    return problemResponse(c, error, deps.clock());
  }

  const proxyListener =
    proxyHandler &&
    ((incoming: IncomingMessage, outgoing: ServerResponse) => {
      const method = incoming.method ?? 'GET';
      const target = incoming.url ?? '/';
      const wrongHost = misdirected(hosts, incoming.headers.host);
      const handled = wrongHost ? Promise.reject(wrongHost) : proxyHandler({ method, url: target, incoming, outgoing });
      handled.catch((thrown: unknown) => {
        const error = toAppError(thrown);
        const path = target.split('?')[0] ?? '/';
        logFailure(method, path, error);
        if (outgoing.headersSent) {
          outgoing.destroy();
          return;
        }
        const problem = problemParts(error, path, deps.clock());
        outgoing.writeHead(problem.status, problem.headers).end(problem.body);
      });
    });

  const upgradeListener =
    proxyRoutes &&
    ((incoming: IncomingMessage, socket: Duplex, head: Buffer) => {
      socket.on('error', () => {}); // a caller resetting its tunnel is no error of ours
      const wrongHost = misdirected(hosts, incoming.headers.host);
      (wrongHost ? Promise.reject(wrongHost) : proxyRoutes.upgrade(incoming, socket, head)).catch((thrown: unknown) => {
        const error = toAppError(thrown);
        const path = (incoming.url ?? '/').split('?')[0] ?? '/';
        logFailure(incoming.method ?? 'GET', path, error);
        const problem = problemParts(error, path, deps.clock());
        const head = Object.entries({ ...problem.headers, 'content-length': String(Buffer.byteLength(problem.body)), connection: 'close' });
        const lines = head.map(([name, value]) => `${name}: ${value}\r\n`).join('');
        socket.end(`HTTP/1.1 ${problem.status} ${STATUS_CODES[problem.status] ?? ''}\r\n${lines}\r\n${problem.body}`);
      });
    });

  return { app, breaker, proxyListener, upgradeListener, ready: Promise.all(pending).then(() => {}) };
}

/** Whether a name is a proxy node's circuit (`<upstream>/<node id>`), defined by the config. */
function nodeCircuitNames(proxy: ProxyOptions | undefined): (name: string) => boolean {
  const names = new Set(Object.entries(proxy?.upstreams ?? {}).flatMap(([u, cfg]) => cfg.nodes.map((n) => nodeCircuitName(u, n.id))));
  return (name) => names.has(name);
}

/** Under /circuits, the likely cause of a 404: a name whose '/' was sent as is. */
function slashHint(path: string): string {
  if (!path.startsWith('/circuits/')) return '';
  return " A '/' in a circuit name is sent as %2F: the circuit a/b is /circuits/a%2Fb.";
}

function toAppError(error: unknown): AppError {
  if (error instanceof AppError) return error;
  return new AppError('INTERNAL', 'An internal error occurred.', { cause: error });
}

/** For a path, the methods that some registered route answers (for 405 and `Allow`). */
function methodIndex(app: OpenAPIHono): (path: string) => string[] {
  let routes: { pattern: RegExp; method: string }[] | undefined;
  return (path) => {
    routes ??= app.routes
      .filter((r) => r.method !== 'ALL')
      .map((r) => ({
        method: r.method,
        pattern: new RegExp(`^${r.path.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\/:[^/]+/g, '/[^/]+').replace(/\/\*$/, '(/.*)?')}$`),
      }));
    const methods = new Set(routes.filter((r) => r.pattern.test(path)).map((r) => r.method));
    if (methods.has('GET')) methods.add('HEAD');
    return [...methods].sort();
  };
}
