import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Hono } from 'hono';
import type { UpstreamConfig } from '../config.js';
import { AppError } from '../domain/errors.js';
import { circuitJson } from '../http/schemas.js';
import { json } from '../http/json.js';
import type { BreakerService } from '../service/breaker-service.js';
import type { TransitionReader } from '../store/transition-log.js';
import { transitionData } from '../observe/observe-routes.js';
import { dashboardPage } from './page.js';

export interface DashboardDeps {
  readonly breaker: BreakerService;
  readonly transitions: TransitionReader;
  readonly proxy?: { readonly localDc: string; readonly upstreams: Record<string, UpstreamConfig> };
  readonly tokenRequired: boolean;
}

const MAX_CIRCUITS = 10_000; // circuits the page lists; a wall screen shows no more
const RECENT_TRANSITIONS = 50; // the timeline's first fill
const ASSETS: Record<string, string> = { 'dashboard.js': 'text/javascript; charset=utf-8', 'dashboard.css': 'text/css; charset=utf-8' };

/** The repository's `assets/dashboard` folder, next to `src/` and `dist/`. */
function assetsDir(): string {
  return path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'assets', 'dashboard');
}

/**
 * `GET /dashboard`: the page (no data, so no token), its script and style from the repo
 * (no CDN), and `GET /dashboard/api/state` (data: token rules as for /circuits). `/` redirects.
 */
export function registerDashboardRoutes<E extends object>(app: Hono<E>, deps: DashboardDeps): void {
  const assets = new Map(Object.keys(ASSETS).map((file) => [file, fs.readFileSync(path.join(assetsDir(), file), 'utf8')]));
  const page = dashboardPage({ tokenRequired: deps.tokenRequired });

  app.get('/', (c) => c.redirect('/dashboard', 302));
  app.get('/dashboard', (c) => c.html(page, 200, { 'cache-control': 'no-cache' }));
  app.get('/dashboard/assets/:file', (c) => {
    const file = c.req.param('file');
    const text = assets.get(file);
    if (text === undefined) throw new AppError('NOT_FOUND', `No dashboard asset '${file.slice(0, 100)}'.`);
    return c.body(text, 200, { 'content-type': ASSETS[file]!, 'cache-control': 'no-cache' });
  });
  app.get('/dashboard/api/state', async (c) => json(c, await dashboardState(deps), 200, { 'cache-control': 'no-store' }));
}

/** Everything the page shows, in one answer; `last_event_id` is where its stream resumes. */
async function dashboardState(deps: DashboardDeps) {
  // Read before the circuits: whatever changes after this is replayed on the stream.
  const lastEventId = deps.transitions.maxId();
  const now = deps.breaker.now();
  const circuits = [];
  let afterId = 0;
  while (circuits.length < MAX_CIRCUITS) {
    const page = await deps.breaker.list({ afterId, limit: 500 });
    circuits.push(...page);
    if (page.length < 500) break;
    afterId = page.at(-1)!.id;
  }
  const last = deps.transitions.lastPerCircuit();
  const event = (t: Parameters<typeof transitionData>[0]) => ({ id: t.id, ...(JSON.parse(transitionData(t)) as object) });
  return {
    now: new Date(now).toISOString(),
    last_event_id: lastEventId,
    circuits: circuits.map((circuit) => {
      const t = last.get(circuit.name);
      return { ...circuitJson(circuit, now), last_transition: t === undefined ? null : event(t) };
    }),
    recent: deps.transitions.latest(RECENT_TRANSITIONS).map(event),
    upstreams: Object.entries(deps.proxy?.upstreams ?? {}).map(([name, u]) => ({
      name,
      nodes: u.nodes.map((n) => ({ id: n.id, dc: n.dc, circuit: `${name}/${n.id}`, local: n.dc === deps.proxy?.localDc })),
    })),
    local_dc: deps.proxy?.localDc ?? null,
  };
}
