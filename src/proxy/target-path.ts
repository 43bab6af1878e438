import { AppError } from '../domain/errors.js';

/** Where a proxied request goes: the upstream's name and the path (with query) below it. */
export interface ProxyTarget {
  readonly upstream: string;
  /** Starts with '/', repeated slashes collapsed, percent-encoding kept as sent. */
  readonly path: string;
}

const PREFIX = '/proxy/';
/** What only the careful segment-by-segment path below handles: dots, escapes, empty segments. */
const UNUSUAL = /[.%]|\/\//;

function decodeFully(segment: string): string {
  // Decode until stable so double-encoded dots (%252e) cannot reach an upstream that decodes twice.
  let current = segment;
  for (let i = 0; i < 3 && current.includes('%'); i++) {
    let next: string;
    try {
      next = decodeURIComponent(current);
    } catch {
      throw invalidPath('has invalid percent-encoding');
    }
    if (next === current) break;
    current = next;
  }
  return current;
}

function invalidPath(reason: string): AppError {
  return new AppError('INVALID_PATH', `The proxied path ${reason}.`);
}

/**
 * Split the raw request target (`/proxy/<upstream>/<rest>?<query>`, before any URL
 * normalisation) into upstream and path. Dot segments, also encoded ones or hidden behind
 * encoded slashes and backslashes, are refused: the target must not walk out of the node's path.
 */
export function parseProxyTarget(rawTarget: string): ProxyTarget {
  const queryAt = rawTarget.indexOf('?');
  const rawPath = queryAt === -1 ? rawTarget : rawTarget.slice(0, queryAt);
  const query = queryAt === -1 ? '' : rawTarget.slice(queryAt);
  if (!rawPath.startsWith(PREFIX)) return { upstream: '', path: '/' }; // bare /proxy: no upstream named
  const after = rawPath.slice(PREFIX.length);
  if (!UNUSUAL.test(after)) {
    // The common case, one regex test: nothing to decode, no dot segment possible, no '//'.
    const slash = after.indexOf('/');
    const rest = slash === -1 ? '' : after.slice(slash);
    return { upstream: slash === -1 ? after : after.slice(0, slash), path: `${rest.length > 1 ? rest : '/'}${query}` };
  }
  const segments = rawPath.slice(PREFIX.length).split('/');
  const upstream = decodeFully(segments[0] ?? '');
  const rest: string[] = [];
  for (let i = 1; i < segments.length; i++) {
    const segment = segments[i]!;
    if (segment === '') continue; // '//other-host' becomes '/other-host': never an authority
    if (segment.includes('.') || segment.includes('%')) {
      for (const piece of decodeFully(segment).split(/[/\\]/)) {
        if (piece === '.' || piece === '..') throw invalidPath("must not contain '.' or '..' segments");
      }
    }
    rest.push(segment);
  }
  const trailing = rest.length > 0 && rawPath.endsWith('/') ? '/' : '';
  return { upstream, path: `/${rest.join('/')}${trailing}${query}` };
}
