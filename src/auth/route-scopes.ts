/**
 * The scope each route needs (issue 30): one table, by method and OpenAPI path, read by the
 * request guard (http/request-guard.ts) and documented in docs/api.md ("Credentials and
 * scopes"). A request under TOKEN_PATHS that no row matches (an unknown path, another method)
 * needs `admin`: the table fails closed. One outside TOKEN_PATHS (/health, /proxy, the docs)
 * needs nothing.
 */
import { hasScope, type Identity, type Scope } from './identity.js';

/**
 * `operate-or-configure`: `PATCH /circuits/{name}`, whose scope depends on its body (a body
 * of only `forced_state` is `operate`, anything else `configure`): the guard lets through an
 * identity with either, and the route checks the one its body needs (`patchScope`).
 * `credential`: any valid credential, whatever its scopes (`GET /whoami`). `open`: none asked.
 */
export type RouteScope = Scope | 'operate-or-configure' | 'credential' | 'open';

export interface RouteScopeRow {
  readonly method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** The OpenAPI path template. */
  readonly path: string;
  readonly scope: RouteScope;
}

export const ROUTE_SCOPES: readonly RouteScopeRow[] = [
  { method: 'GET', path: '/circuits', scope: 'read' },
  { method: 'GET', path: '/circuits/{name}', scope: 'read' },
  { method: 'GET', path: '/circuits/{name}/allowed', scope: 'read' },
  { method: 'GET', path: '/circuits/{name}/events', scope: 'read' },
  { method: 'POST', path: '/circuits/{name}/backtest', scope: 'read' },
  { method: 'GET', path: '/circuits/{name}/backtest/{id}.svg', scope: 'read' },
  { method: 'GET', path: '/events/stream', scope: 'read' },
  { method: 'GET', path: '/metrics', scope: 'read' },
  { method: 'GET', path: '/dashboard/api/state', scope: 'read' },
  { method: 'POST', path: '/circuits/{name}/call', scope: 'report' },
  { method: 'POST', path: '/circuits/{name}/success', scope: 'report' },
  { method: 'POST', path: '/circuits/{name}/failure', scope: 'report' },
  { method: 'POST', path: '/circuits/{name}/outcomes', scope: 'report' },
  { method: 'POST', path: '/outcomes', scope: 'report' },
  { method: 'POST', path: '/circuits/{name}/reset', scope: 'operate' },
  { method: 'PATCH', path: '/circuits/{name}', scope: 'operate-or-configure' },
  { method: 'DELETE', path: '/circuits/{name}', scope: 'configure' },
  { method: 'GET', path: '/admin/backup', scope: 'admin' },
  { method: 'GET', path: '/audit', scope: 'admin' },
  { method: 'GET', path: '/whoami', scope: 'credential' },
  { method: 'GET', path: '/health', scope: 'open' },
  { method: 'GET', path: '/health/ready', scope: 'open' },
  { method: 'GET', path: '/problems/{kind}', scope: 'open' },
  { method: 'GET', path: '/dashboard', scope: 'open' },
  { method: 'GET', path: '/proxy/{upstream}/{path}', scope: 'open' },
];

/** A matched route: its scope, and the circuit its path names (decoded), if any. */
export interface RouteMatch {
  readonly scope: RouteScope;
  /** The raw `{name}` segment of a circuit route, or null. */
  readonly rawName: string | null;
}

interface CompiledRow {
  readonly segments: readonly string[];
  readonly nameAt: number;
  readonly scope: RouteScope;
}

const compiled = new Map<string, CompiledRow[]>();
for (const row of ROUTE_SCOPES) {
  const segments = row.path.split('/');
  const list = compiled.get(row.method) ?? [];
  list.push({ segments, nameAt: segments.indexOf('{name}'), scope: row.scope });
  compiled.set(row.method, list);
}

/** The table's row for a method (HEAD as GET) and a raw request path (segments compared as sent; `{x}` any one segment). */
export function routeScope(method: string, path: string): RouteMatch | null {
  const rows = compiled.get(method === 'HEAD' ? 'GET' : method);
  if (rows === undefined) return null;
  const segments = path.split('/');
  for (const row of rows) {
    if (row.segments.length !== segments.length) continue;
    let matched = true;
    for (let i = 1; i < segments.length && matched; i++) {
      const want = row.segments[i]!;
      matched = want.startsWith('{') ? segments[i] !== '' : want === segments[i];
    }
    if (matched) return { scope: row.scope, rawName: row.nameAt === -1 ? null : segments[row.nameAt]! };
  }
  return null;
}

/** Whether an identity has what a route's scope asks for (`operate-or-configure`: either one). */
export function allowsRoute(identity: Identity, scope: RouteScope): boolean {
  if (scope === 'open' || scope === 'credential') return true;
  if (scope === 'operate-or-configure') return hasScope(identity, 'operate') || hasScope(identity, 'configure');
  return hasScope(identity, scope);
}

/** The scope a PATCH body needs: only `forced_state` (force or clear) is `operate`; any other field `configure`. */
export function patchScope(patch: Readonly<Record<string, unknown>>): Scope {
  const keys = Object.keys(patch);
  return keys.length === 1 && keys[0] === 'forced_state' ? 'operate' : 'configure';
}
