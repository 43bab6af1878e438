/**
 * What a shared cache may do with a request and its answer (RFC 9111), for the two places
 * the proxy serves one caller's answer to another: coalescing (concurrent identical reads
 * share one call) and the stale fallback. Both use the same key (`primaryKey` plus the
 * fields the answer's `Vary` names) and the same rules of who may share what.
 */
import { hasRequestBody, type FlatHeaders, type HeaderRecord } from './upstream-client.js';

/** Request fields that carry a caller's identity; never configurable away (RFC 9111 section 3.5). */
const ALWAYS_CREDENTIALS = ['authorization', 'cookie'];

/** Conditional and range requests want an answer for themselves: 304, 206 or 412 (RFC 9110 sections 13, 14). */
const CONDITIONAL = ['if-match', 'if-none-match', 'if-modified-since', 'if-unmodified-since', 'if-range', 'range'];

/** Statuses a follower without a condition or a range never asked for. */
const NOT_SHARED_STATUSES = new Set([206, 304, 412, 416]);

/** The credential fields of an upstream: Authorization, Cookie and the configured API-key fields (lower-case). */
export function credentialFields(configured: readonly string[]): readonly string[] {
  return [...new Set([...ALWAYS_CREDENTIALS, ...configured.map((n) => n.toLowerCase())])];
}

function text(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

/** Cache-Control directives, lower-case, each with its argument (or '' without one). */
export function directives(value: string | string[] | undefined): Map<string, string> {
  const out = new Map<string, string>();
  const all = text(value);
  if (all === undefined) return out;
  for (const part of all.split(',')) {
    const eq = part.indexOf('=');
    const name = (eq === -1 ? part : part.slice(0, eq)).trim().toLowerCase();
    if (name !== '')
      out.set(
        name,
        eq === -1
          ? ''
          : part
              .slice(eq + 1)
              .trim()
              .replace(/^"|"$/g, ''),
      );
  }
  return out;
}

/** True when a request asks not to be answered from a stored or shared answer (RFC 9111 sections 5.2.1, 5.4). */
export function requestWantsOwnAnswer(headers: HeaderRecord): boolean {
  const cc = headers['cache-control'];
  if (cc !== undefined) {
    const d = directives(cc);
    if (d.has('no-cache') || d.has('no-store') || d.get('max-age') === '0') return true;
  }
  const pragma = text(headers.pragma);
  return pragma !== undefined && /no-cache/i.test(pragma);
}

/** True when any of the credential fields is present. */
export function hasCredentials(headers: HeaderRecord, credentials: readonly string[]): boolean {
  for (const name of credentials) if (headers[name] !== undefined) return true;
  return false;
}

/**
 * Whether a shared cache could answer this request from another caller's answer: a GET or
 * HEAD without body, credentials, conditions, a range or `no-cache`. Property lookups only:
 * this runs on every coalescable request.
 */
export function mayShareRequest(method: string, headers: HeaderRecord, credentials: readonly string[]): boolean {
  if (method !== 'GET' && method !== 'HEAD') return false;
  if (hasRequestBody(headers) || hasCredentials(headers, credentials)) return false;
  for (const name of CONDITIONAL) if (headers[name] !== undefined) return false;
  return !requestWantsOwnAnswer(headers);
}

/**
 * The key two requests must share to get one answer: host (it reaches the node as
 * X-Forwarded-Host, so the answer may depend on it) and target (path and query).
 */
export function primaryKey(headers: HeaderRecord, path: string): string {
  return `${text(headers.host) ?? ''}\n${path}`;
}

/** The field names an answer's `Vary` lists (lower-case); `'*'` when it varies on anything (RFC 9110 section 12.5.5). */
export function varyNames(value: string | string[] | undefined): readonly string[] | '*' {
  const all = text(value);
  if (all === undefined) return [];
  const names: string[] = [];
  for (const part of all.split(',')) {
    const name = part.trim().toLowerCase();
    if (name === '*') return '*';
    if (name !== '' && !names.includes(name)) names.push(name);
  }
  return names;
}

/** A request's values of the Vary'd fields, normalised as RFC 9111 section 4.1 allows (lists joined, spaces trimmed). */
export function varyValues(headers: HeaderRecord, names: readonly string[]): string[] {
  return names.map((name) => (text(headers[name]) ?? '\u0000absent').replace(/\s*,\s*/g, ',').trim());
}

/** Whether a request selects the stored variant: the same value of every Vary'd field. */
export function varyMatches(headers: HeaderRecord, names: readonly string[], values: readonly string[]): boolean {
  const mine = varyValues(headers, names);
  for (let i = 0; i < names.length; i++) if (mine[i] !== values[i]) return false;
  return true;
}

/** One field of a flat header list, repeated lines joined. */
export function flatGet(headers: FlatHeaders, name: string): string | undefined {
  let out: string | undefined;
  for (let i = 0; i < headers.length; i += 2)
    if (headers[i] === name) out = out === undefined ? headers[i + 1] : `${out}, ${headers[i + 1]}`;
  return out;
}

/**
 * Whether an answer may go to anyone but the caller it was made for: no Set-Cookie, not
 * `private`, `no-store` or `no-cache` (which asks for validation before any reuse), no
 * `Vary: *`, and not a status only a conditional or range request gets.
 */
export function mayShareAnswer(status: number, get: (name: string) => string | string[] | undefined): boolean {
  if (NOT_SHARED_STATUSES.has(status) || get('set-cookie') !== undefined) return false;
  const d = directives(get('cache-control'));
  if (d.has('private') || d.has('no-store') || d.has('no-cache')) return false;
  return varyNames(get('vary')) !== '*';
}

/** Whether a request accepts a content coding (RFC 9110 section 12.5.3; no Accept-Encoding accepts any). */
export function acceptsCoding(acceptEncoding: string | string[] | undefined, coding: string): boolean {
  const all = text(acceptEncoding);
  if (all === undefined) return true;
  const wanted = coding.trim().toLowerCase();
  if (wanted === '' || wanted === 'identity') return true;
  let star: boolean | null = null;
  for (const part of all.split(',')) {
    const [name = '', ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    const q = params.find((p) => p.startsWith('q='));
    const ok = q === undefined || Number(q.slice(2)) > 0;
    if (name === wanted || (wanted === 'gzip' && name === 'x-gzip')) return ok;
    if (name === '*') star = ok;
  }
  return star === true;
}
