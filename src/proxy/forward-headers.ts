/** Header handling at the proxy boundary, with the hop-by-hop list. */
import { util } from 'undici';
import { REQUEST_ID_HEADER } from '../request-id.js';

export type HeaderRecord = Record<string, string | string[] | undefined>;

/**
 * Hop-by-hop fields describe one connection and are never forwarded (RFC 9110 section 7.6.1,
 * https://www.rfc-editor.org/rfc/rfc9110#section-7.6.1; the same idea as hono's src/helper/proxy).
 */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'proxy-authorization',
  'proxy-authenticate',
]);

/** Hop-by-hop fields of a node's 101 answer other than the two the switch needs (and the request-only one). */
export const NOT_RELAYED_ON_SWITCH: ReadonlySet<string> = new Set(
  [...HOP_BY_HOP].filter((n) => n !== 'connection' && n !== 'upgrade' && n !== 'proxy-authorization'),
);

/** Fields we set ourselves or that undici refuses (it sends `Host` from the node origin). */
const REQUEST_DROPPED = new Set([
  'host',
  'expect',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-forwarded-dc',
]);

/** The options of the Connection values nearly every message carries, made once. */
const KEEP_ALIVE_ONLY: ReadonlySet<string> = new Set(['keep-alive']);
const CLOSE_ONLY: ReadonlySet<string> = new Set(['close']);

/** The field names a Connection header lists (RFC 9110 section 7.6.1), lower-case. */
function namedInConnection(connection: string | string[] | undefined): ReadonlySet<string> | null {
  if (connection === undefined) return null;
  if (typeof connection === 'string' && (connection.length === 10 || connection.length === 5)) {
    // One bare token, the common case: the same set as the split below, without building it.
    const token = connection.toLowerCase();
    if (token === 'keep-alive') return KEEP_ALIVE_ONLY;
    if (token === 'close') return CLOSE_ONLY;
  }
  const names = new Set<string>();
  for (const value of Array.isArray(connection) ? connection : [connection]) {
    for (const token of value.split(',')) names.add(token.trim().toLowerCase());
  }
  return names;
}

/** Copy end-to-end fields of `source` (lower-case names) into a new record. */
function endToEnd(source: HeaderRecord, alsoDrop: ReadonlySet<string> | null): Record<string, string | string[]> {
  const dropped = namedInConnection(source.connection);
  const out: Record<string, string | string[]> = {};
  for (const name in source) {
    const value = source[name];
    if (value === undefined || HOP_BY_HOP.has(name) || alsoDrop?.has(name) || dropped?.has(name)) continue;
    out[name] = value;
  }
  return out;
}

export interface ForwardedFrom {
  /** The request's id (request-id.ts): the node gets it in X-Request-Id, the caller's own replaced. */
  readonly requestId: string;
  /** The peer's address, when known. */
  readonly clientIp: string | undefined;
  readonly proto: string;
  readonly localDc: string;
}

/** Request fields for the node: end-to-end ones plus the X-Forwarded-* set. */
export function upstreamRequestHeaders(incoming: HeaderRecord, from: ForwardedFrom): Record<string, string | string[]> {
  const out = endToEnd(incoming, REQUEST_DROPPED);
  const prior = incoming['x-forwarded-for'];
  const chain = Array.isArray(prior) ? prior.join(', ') : prior;
  if (from.clientIp !== undefined) out['x-forwarded-for'] = chain ? `${chain}, ${from.clientIp}` : from.clientIp;
  else if (chain) out['x-forwarded-for'] = chain;
  out['x-forwarded-proto'] = from.proto;
  const host = incoming.host;
  if (typeof host === 'string') out['x-forwarded-host'] = host;
  out['x-forwarded-dc'] = from.localDc;
  out[REQUEST_ID_HEADER] = from.requestId;
  return out;
}

/** A flat `[name, value, name, value, …]` list, as `writeHead` takes it (names lower-case). */
export type FlatHeaders = string[];

/**
 * Response fields for the caller from undici's raw list (Buffers, names in any case), as a
 * flat list: `writeHead` stores it without building an object (issue 12). Names go through
 * undici's `headerNameToString`: a well-known name comes back lower-case from its table,
 * without a string made and lower-cased per field.
 */
export function downstreamFlatHeaders(raw: readonly Buffer[]): FlatHeaders {
  const out: FlatHeaders = [];
  let connection: string | null = null;
  for (let i = 0; i < raw.length; i += 2) {
    const name = util.headerNameToString(raw[i]!);
    const value = raw[i + 1]!.toString('latin1');
    if (HOP_BY_HOP.has(name)) {
      if (name === 'connection') connection = connection === null ? value : `${connection}, ${value}`;
      continue;
    }
    out.push(name, value);
  }
  const named = namedInConnection(connection ?? undefined);
  if (named === null || (named.size === 1 && (named.has('keep-alive') || named.has('close')))) return out;
  return out.filter((_, i) => !named.has(out[i - (i % 2)]!));
}

/** The caller's request id on an answer's flat list, in place of any the node sent (it echoes ours, or has its own). */
export function setRequestId(headers: FlatHeaders, requestId: string): FlatHeaders {
  removeFlat(headers, REQUEST_ID_HEADER).push(REQUEST_ID_HEADER, requestId);
  return headers;
}

/** Drop every field called `name` from a flat list. */
export function removeFlat(headers: FlatHeaders, name: string): FlatHeaders {
  for (let i = headers.length - 2; i >= 0; i -= 2) if (headers[i] === name) headers.splice(i, 2);
  return headers;
}

/** A record (repeated fields as arrays) from a flat list. */
export function flatToRecord(headers: FlatHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    const prior = out[name];
    out[name] =
      prior === undefined
        ? headers[i + 1]!
        : Array.isArray(prior)
          ? [...prior, headers[i + 1]!]
          : [prior, headers[i + 1]!];
  }
  return out;
}

/** True when the request carries a body (a GET with a body asks something its URL does not say). */
export function hasRequestBody(headers: HeaderRecord): boolean {
  const length = headers['content-length'];
  return (length !== undefined && length !== '0') || headers['transfer-encoding'] !== undefined;
}
