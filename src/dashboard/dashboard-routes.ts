import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Context, Hono, MiddlewareHandler } from 'hono';
import { z } from 'zod';
import type { UpstreamConfig } from '../config.js';
import type { Circuit } from '../domain/circuit.js';
import { nodeCircuitName } from '../domain/circuit-name.js';
import { AppError } from '../domain/errors.js';
import { circuitJson } from '../http/circuit-json.js';
import { json } from '../http/json.js';
import type { BreakerService } from '../service/breaker-service.js';
import type { TransitionReader } from '../store/transition-reader.js';
import { transitionData } from '../observe/event-frames.js';
import { dashboardPage } from './page.js';
import { SCOPES, circuitPermitted, hasScope, type Identity } from '../auth/identity.js';
import { identityOf } from '../auth/request-identity.js';

export interface DashboardDeps {
  readonly breaker: BreakerService;
  readonly transitions: TransitionReader;
  readonly proxy?: { readonly localDc: string; readonly upstreams: Record<string, UpstreamConfig> };
  readonly tokenRequired: boolean;
  /** Each upstream's concurrency limit and requests in flight now (the proxy's, once its routes are up). */
  readonly concurrency?: () => readonly UpstreamLoad[];
}

/** An upstream's concurrency now, as the dashboard shows it. */
export interface UpstreamLoad {
  readonly upstream: string;
  readonly kind: 'fixed' | 'adaptive' | null;
  readonly limit: number | null;
  readonly inFlight: number;
}

const PAGE = 500; // circuits per answer by default: one short task on the event loop
const MAX_PAGE = 1_000;
const SEARCH_READ = 1_000; // circuits read per listing call while searching
const SEARCH_SCAN = 5_000; // circuits a search answer reads at most; `next_after` goes on from there
const RECENT_TRANSITIONS = 50; // the timeline's first fill
const ASSETS: Record<string, string> = {
  'dashboard.js': 'text/javascript; charset=utf-8',
  'what-if.js': 'text/javascript; charset=utf-8',
  'dashboard.css': 'text/css; charset=utf-8',
};

/**
 * Sent with the page, its assets and its data: only this origin's script, style and fetches
 * (no inline code, no other origin), never inside a frame (clickjacking of the Reset and
 * Force buttons), and no content sniffing.
 */
export const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/** The repository's `assets/dashboard` folder, next to `src/` and `dist/`. */
function assetsDir(): string {
  return path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'assets', 'dashboard');
}

/**
 * `GET /dashboard`: the page (no data, so no token), its script and style from the repo
 * (no CDN), and `GET /dashboard/api/state` (data: token rules as for /circuits). `/` redirects.
 */
export function registerDashboardRoutes<E extends object>(app: Hono<E>, deps: DashboardDeps): void {
  const assets = new Map(
    Object.keys(ASSETS).map((file) => [file, fs.readFileSync(path.join(assetsDir(), file), 'utf8')]),
  );
  const page = dashboardPage({ tokenRequired: deps.tokenRequired });

  const secure: MiddlewareHandler = async (c, next) => {
    await next();
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) c.header(name, value);
  };
  app.use('/dashboard', secure);
  app.use('/dashboard/*', secure);
  app.get('/', (c) => c.redirect('/dashboard', 302));
  app.get('/dashboard', (c) => c.html(page, 200, { 'cache-control': 'no-cache' }));
  app.get('/dashboard/assets/:file', (c) => {
    const file = c.req.param('file');
    const text = assets.get(file);
    if (text === undefined) throw new AppError('NOT_FOUND', `No dashboard asset '${file.slice(0, 100)}'.`);
    return c.body(text, 200, { 'content-type': ASSETS[file]!, 'cache-control': 'no-cache' });
  });
  app.get('/dashboard/api/state', async (c) => {
    const identity = identityOf(c);
    const permitted = identity.circuits === null ? null : (name: string) => circuitPermitted(identity, name);
    const state = await dashboardState(deps, stateQuery(c), permitted);
    return json(c, { identity: identityWire(identity), ...state }, 200, { 'cache-control': 'no-store' });
  });
}

/**
 * Who the page is signed in as (issue 30) and every scope it holds (`admin` implies the others,
 * listed too), so the page hides the buttons it may not use (Reset and Force need `operate`).
 */
function identityWire(identity: Identity): { id: string; scopes: string[] } {
  return { id: identity.id, scopes: SCOPES.filter((scope) => hasScope(identity, scope)) };
}

// Digits only: Number('') is 0 and Number(' 1e2 ') is 100, neither a circuit id.
const wholeNumber = z.string().regex(/^\d+$/, 'must be a whole number').transform(Number);
const StateQuery = z
  .object({
    limit: wholeNumber.pipe(z.number().int().min(1).max(MAX_PAGE)).default(PAGE),
    after: wholeNumber.pipe(z.number().int().min(0)).default(0),
    state: z.enum(['closed', 'open', 'half_open']).optional(),
    /** Only circuits whose name contains this, ignoring case. */
    q: z.string().min(1).max(200).optional(),
  })
  .strict();

/** `?limit=&after=&state=` of the state route, or a 400 naming each field. */
function stateQuery(c: Context): z.output<typeof StateQuery> {
  const result = StateQuery.safeParse(c.req.query());
  if (result.success) return result.data;
  const fields = result.error.issues.flatMap((issue) =>
    issue.code === 'unrecognized_keys'
      ? issue.keys.map((key) => ({ field: key, message: 'unknown query parameter; use limit, after, state or q' }))
      : [{ field: issue.path.map(String).join('.') || '(query)', message: issue.message }],
  );
  throw new AppError('INVALID_QUERY', 'The query string has invalid parameters.', { fields });
}

/**
 * One page of what the dashboard shows: up to `limit` circuits after the id `after` (all, or
 * those in `state`), each with its last transition, and `next_after` for the next page (null
 * on the last). Every page also carries the recent transitions and the upstreams; the page's
 * stream resumes from the `last_event_id` of the first page it read.
 */
async function dashboardState(
  deps: DashboardDeps,
  query: z.output<typeof StateQuery>,
  permitted: ((name: string) => boolean) | null,
) {
  // Read before the circuits: whatever changes after this is replayed on the stream.
  const lastEventId = deps.transitions.maxId();
  const now = deps.breaker.now();
  const { circuits, nextAfter } =
    query.q === undefined && permitted === null
      ? await listPage(deps, query)
      : await searchPage(deps, { ...query, q: query.q ?? '', now, permitted: permitted ?? (() => true) });
  const last = deps.transitions.lastPerCircuit(circuits.map((c) => c.name));
  const nodeLast = deps.transitions.lastPerCircuit(nodeNames(deps));
  const event = (t: Parameters<typeof transitionData>[0]) => ({
    id: t.id,
    ...(JSON.parse(transitionData(t)) as object),
  });
  const loads = new Map(upstreamLoads(deps).map((l) => [l.name, l]));
  return {
    now: new Date(now).toISOString(),
    last_event_id: lastEventId,
    circuits: circuits.map((circuit) => {
      const t = last.get(circuit.name);
      return { ...circuitJson(circuit, now), last_transition: t === undefined ? null : event(t) };
    }),
    next_after: nextAfter,
    recent: deps.transitions
      .latest(RECENT_TRANSITIONS)
      .filter((t) => permitted === null || permitted(t.circuit))
      .map(event),
    // The proxy's node circuits wherever they are in the list: the page groups them by upstream.
    nodes: (await Promise.all(nodeNames(deps).map(async (name) => deps.breaker.get(name))))
      .filter((c): c is Circuit => c !== null && (permitted === null || permitted(c.name)))
      .map((c) => {
        const t = nodeLast.get(c.name);
        return { ...circuitJson(c, now), last_transition: t === undefined ? null : event(t) };
      }),
    upstreams: Object.entries(deps.proxy?.upstreams ?? {}).map(([name, u]) => ({
      name,
      nodes: u.nodes.map((n) => ({
        id: n.id,
        dc: n.dc,
        circuit: nodeCircuitName(name, n.id),
        local: n.dc === deps.proxy?.localDc,
      })),
      concurrency: loads.get(name) ?? null,
    })),
    local_dc: deps.proxy?.localDc ?? null,
  };
}

const nodeNames = (deps: DashboardDeps) =>
  Object.entries(deps.proxy?.upstreams ?? {}).flatMap(([name, u]) => u.nodes.map((n) => nodeCircuitName(name, n.id)));

type Page = { readonly circuits: Circuit[]; readonly nextAfter: number | null };

/** Up to `limit` circuits after `after`; one row past the page only tells whether another follows. */
async function listPage(deps: DashboardDeps, query: z.output<typeof StateQuery>): Promise<Page> {
  const rows = await deps.breaker.list(
    { afterId: query.after, limit: query.limit + 1, state: query.state },
    query.limit,
  );
  const circuits = rows.slice(0, query.limit);
  return { circuits, nextAfter: rows.length > query.limit ? circuits.at(-1)!.id : null };
}

/**
 * The circuits after `after` whose name contains `q` (ignoring case), in id order. One answer
 * reads at most SEARCH_SCAN circuits, so a search of a million costs each request the same;
 * `next_after` is where the next answer goes on (null once the table is read to its end),
 * and an answer may hold fewer than `limit` matches, or none, with more to come.
 */
async function searchPage(
  deps: DashboardDeps,
  query: z.output<typeof StateQuery> & { q: string; now: number; permitted: (name: string) => boolean },
): Promise<Page> {
  const found = await searchScan(deps, query);
  // As a listing's page: an open circuit whose time has passed is read (half-opened) first.
  const due = (c: Circuit) => c.state === 'open' && c.openUntil !== null && c.openUntil <= query.now;
  const circuits = await Promise.all(
    found.circuits.map(async (c) => (due(c) ? ((await deps.breaker.get(c.name)) ?? c) : c)),
  );
  return { circuits, nextAfter: found.nextAfter };
}

async function searchScan(
  deps: DashboardDeps,
  query: z.output<typeof StateQuery> & { q: string; permitted: (name: string) => boolean },
): Promise<Page> {
  const needle = query.q.toLowerCase();
  const circuits: Circuit[] = [];
  let after = query.after;
  for (let read = 0; read < SEARCH_SCAN; read += SEARCH_READ) {
    const rows = await deps.breaker.list({ afterId: after, limit: SEARCH_READ, state: query.state }, 0);
    for (const c of rows) {
      after = c.id;
      // A credential limited to `circuits` patterns sees only those (issue 30).
      if (!c.name.toLowerCase().includes(needle) || !query.permitted(c.name)) continue;
      circuits.push(c);
      if (circuits.length === query.limit) return { circuits, nextAfter: c.id };
    }
    if (rows.length < SEARCH_READ) return { circuits, nextAfter: null };
  }
  return { circuits, nextAfter: after };
}

/** Per upstream: `{ name, limit: { kind, value } | null, in_flight }` (the wire names of the dashboard API; the page polls them). */
function upstreamLoads(deps: DashboardDeps) {
  return (deps.concurrency?.() ?? []).map((u) => ({
    name: u.upstream,
    limit: u.kind === null ? null : { kind: u.kind, value: u.limit },
    in_flight: u.inFlight,
  }));
}
