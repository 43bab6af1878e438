import type { IncomingMessage } from 'node:http';
import { AppError } from '../domain/errors.js';

/**
 * The path the caller sent, still percent-encoded, without the query: the request target
 * from Node (before WHATWG URL parsing resolves `.`/`..` segments, also encoded ones), or,
 * under `app.request()`, the URL's path. Hono routes on this (its `getPath` option), so a
 * gateway that checks path prefixes on the raw URI sees what the router sees.
 */
export function rawRequestPath(request: Request, options?: { env?: unknown }): string {
  const incoming = (options?.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  return targetPath(incoming?.url ?? request.url);
}

/** The path of a request target: origin-form (`/a?b`) or absolute-form (`http://h/a?b`). */
function targetPath(target: string): string {
  let start = 0;
  if (target[0] !== '/') {
    const authority = target.indexOf('//');
    start = authority === -1 ? -1 : target.indexOf('/', authority + 2);
    if (start === -1) return '/';
  }
  let end = target.length;
  for (let i = start; i < target.length; i++) {
    const ch = target.charCodeAt(i);
    if (ch === 63 /* ? */ || ch === 35 /* # */) {
      end = i;
      break;
    }
  }
  return target.slice(start, end);
}

/** True if a raw segment is `.` or `..` once decoded (`%2e`, `%2E`, `.%2e`, ...). */
function isDotSegment(segment: string): boolean {
  if (segment === '.' || segment === '..') return true;
  if (!segment.includes('%') || segment.length > 6) return false;
  const decoded = segment.replace(/%2e/gi, '.');
  return decoded === '.' || decoded === '..';
}

/**
 * A `.`/`..` segment under /circuits, encoded or not: a 400 INVALID_NAME, as the README
 * promises and the proxy does. The router never resolves them (it routes on the raw path):
 * in a name's place the name check refuses them; anywhere else no route matches, and the
 * not-found handler asks this before answering 404 or 405.
 */
export function dotSegmentProblem(path: string): AppError | null {
  if (path !== '/circuits' && !path.startsWith('/circuits/')) return null;
  if (!path.split('/').some(isDotSegment)) return null;
  return new AppError('INVALID_NAME', "Circuit names have no '.' or '..' segments, and paths are not resolved.");
}
