import net from 'node:net';
import { AppError } from '../domain/errors.js';

/**
 * Guards against a browser being used as the attacker's client while no token is set (the
 * default): DNS rebinding (a hostile name resolved to this server's loopback address) and
 * cross-site requests that change state (CSRF). See docs/api.md, "Browsers".
 */

/** Which `Host` names the server answers; null: no check (bound to a public address, no list). */
export type HostRule = ((hostname: string) => boolean) | null;

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
const JSON_TYPE = /^application\/([\w.+-]+\+)?json\s*(;|$)/i;

function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  if (net.isIPv4(h)) return h.startsWith('127.');
  return h === '::1';
}

/**
 * The Host rule for a listen address and `server.allowed_hosts`. An IP literal and
 * `localhost` (RFC 6761: never resolved elsewhere) are always allowed: rebinding needs a
 * name the attacker controls. With a list, its names are allowed too (`.example.com`
 * allows the domain and every subdomain), whatever the listen address; without one, a
 * server on loopback allows nothing else and one on another address checks nothing.
 */
export function hostRule(listenHost: string, allowedHosts: readonly string[] | undefined): HostRule {
  const listed = (allowedHosts ?? []).map((h) => h.toLowerCase());
  if (listed.length === 0 && !isLoopback(listenHost)) return null;
  const names = new Set([...listed.filter((h) => !h.startsWith('.')), listenHost.toLowerCase()]);
  const domains = listed.filter((h) => h.startsWith('.'));
  return (hostname) => {
    const h = hostname.toLowerCase().replace(/\.$/, '');
    if (net.isIP(h.replace(/^\[|\]$/g, '')) !== 0 || h === 'localhost' || h.endsWith('.localhost')) return true;
    return names.has(h) || domains.some((d) => h === d.slice(1) || h.endsWith(d));
  };
}

/** The host name of a `Host` header value (no port; IPv6 keeps its brackets). */
export function hostnameOf(host: string): string {
  return host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.replace(/:\d*$/, '');
}

/**
 * The Host values a rule last judged, per rule: callers send the same few Host headers again and
 * again, and the judgement (a port stripped, case folded, an IP literal parsed) runs per request.
 * Bounded: at most HOST_MEMO_ENTRIES values of at most HOST_MEMO_MAX_LENGTH characters each
 * (under 70 KB per rule), emptied when full.
 */
const hostMemos = new WeakMap<(hostname: string) => boolean, Map<string, boolean>>();
const HOST_MEMO_ENTRIES = 256;
const HOST_MEMO_MAX_LENGTH = 260; // a DNS name (253) with a port

function hostAllowed(rule: (hostname: string) => boolean, host: string): boolean {
  if (host.length > HOST_MEMO_MAX_LENGTH) return rule(hostnameOf(host));
  let memo = hostMemos.get(rule);
  if (memo === undefined) hostMemos.set(rule, (memo = new Map()));
  let allowed = memo.get(host);
  if (allowed === undefined) {
    allowed = rule(hostnameOf(host));
    if (memo.size >= HOST_MEMO_ENTRIES) memo.clear();
    memo.set(host, allowed);
  }
  return allowed;
}

/** The 421 for a Host the rule refuses, or null. A request without Host (HTTP/1.0) passes. */
export function misdirected(rule: HostRule, host: string | undefined): AppError | null {
  if (rule === null || host === undefined || host === '' || hostAllowed(rule, host)) return null;
  return new AppError(
    'MISDIRECTED_REQUEST',
    `This server does not answer for the host '${hostnameOf(host).slice(0, 100)}'; add it to server.allowed_hosts if it is yours.`,
  );
}

/** A request header by its lower-case name, `undefined` when absent. */
export type HeaderReader = (name: string) => string | undefined;

/**
 * State-changing requests (every method but GET, HEAD, OPTIONS): refuse one a browser
 * marks as cross-origin, as Go's `http.CrossOriginProtection` does: `Sec-Fetch-Site` other
 * than `same-origin` or `none` (typed URL, bookmark), else an `Origin` whose host is not
 * the `Host` (`null` included): 403. Then a `Content-Type`, when sent, must be JSON (415,
 * even with an empty body): a form or `text/plain` is what a cross-site page can send
 * without a preflight. No header at all (curl, the clients) passes. Null when it passes.
 */
export function crossSiteProblem(method: string, header: HeaderReader): AppError | null {
  if (SAFE_METHODS.has(method)) return null;
  const site = header('sec-fetch-site');
  const origin = header('origin');
  if (
    site !== undefined
      ? site !== 'same-origin' && site !== 'none'
      : origin !== undefined && !sameOrigin(origin, header('host'))
  ) {
    return new AppError(
      'CROSS_SITE_REQUEST',
      `A ${method} from another site (${site !== undefined ? `Sec-Fetch-Site: ${site}` : `Origin: ${origin!.slice(0, 100)}`}) is refused: it could be a forged request.`,
    );
  }
  const type = header('content-type');
  if (type !== undefined && !JSON_TYPE.test(type)) {
    return new AppError(
      'UNSUPPORTED_MEDIA_TYPE',
      `Content-Type '${type.slice(0, 100)}' is refused on ${method}: send JSON (application/json), or no body and no Content-Type.`,
    );
  }
  return null;
}

/** Does the Origin name this server as the Host does (host name, and port when Host has one)? */
function sameOrigin(origin: string, host: string | undefined): boolean {
  if (host === undefined || !URL.canParse(origin)) return false;
  const url = new URL(origin);
  const hostname = hostnameOf(host).toLowerCase();
  const port = host.slice(hostnameOf(host).length + 1);
  const originPort = url.port || (url.protocol === 'https:' ? '443' : '80');
  return url.hostname === hostname && (port === '' || port === originPort);
}
