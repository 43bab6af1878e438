/**
 * Which circuit a gateway's check request names (`edge.gate.circuit_from`, src/config/edge-schema.ts;
 * docs/gateways.md "Naming the circuit"), validated as any circuit name. Used by gate.ts.
 */
import type { EdgeGateConfig } from '../config/edge-schema.js';
import { circuitNameProblem } from '../domain/circuit-name.js';

/** A check request as the agent's HTTP server received it. */
export interface GateRequest {
  readonly method: string;
  /** Path and query, as received. */
  readonly target: string;
  /** Lower-case names; a repeated field joined with ', ' (as node:http joins most of them). */
  readonly headers: Readonly<Record<string, string | undefined>>;
}

/** Traefik's ForwardAuth: the original request's URI and host (doc.traefik.io, "Forward-Request Headers"). */
export const FORWARDED_URI = 'x-forwarded-uri';
const FORWARDED_HOST = 'x-forwarded-host';
/** nginx's convention for the original URI (`proxy_set_header X-Original-URI $request_uri`). */
export const ORIGINAL_URI = 'x-original-uri';

const GATE_PREFIX = '/gate';

/** Why the check request names no valid circuit: a problem the gate renders itself. */
export interface GateProblem {
  readonly code: 'INVALID_NAME' | 'INVALID_HEADER' | 'GATE_NO_CIRCUIT';
  readonly detail: string;
  readonly extensions: Record<string, unknown>;
}

/** The circuit a check request names by `edge.gate.circuit_from`, validated as any circuit name. */
export function circuitOf(request: GateRequest, config: EdgeGateConfig): string | GateProblem {
  const from = config.circuit_from;
  if (from === 'path') {
    const path = pathOf(request.target);
    const rest = path.startsWith(`${GATE_PREFIX}/`) ? path.slice(GATE_PREFIX.length + 1) : '';
    let name: string;
    try {
      name = decodeURIComponent(rest);
    } catch {
      return badName(rest, 'the path /gate/<name>', 'is not valid percent-encoding');
    }
    return checked(name, 'the path /gate/<name>');
  }
  if (from === 'host') {
    const host = request.headers[FORWARDED_HOST] ?? request.headers.host ?? '';
    return checked(hostName(host), request.headers[FORWARDED_HOST] === undefined ? 'Host' : 'X-Forwarded-Host');
  }
  if ('header' in from) return checked(request.headers[from.header] ?? '', `header ${from.header}`);
  const original = originalPath(request);
  let best: string | undefined;
  for (const prefix in from.path_prefix)
    if (original.startsWith(prefix) && prefix.length > (best?.length ?? -1)) best = prefix;
  if (best === undefined)
    return {
      code: 'GATE_NO_CIRCUIT',
      detail: `No prefix of edge.gate.circuit_from.path_prefix matches the original path '${original.slice(0, 300)}'.`,
      extensions: { path: original.slice(0, 300), prefixes: Object.keys(from.path_prefix).slice(0, 50) },
    };
  return checked(from.path_prefix[best]!, `path prefix ${best}`);
}

/**
 * The original request's path, query left out: Traefik's `X-Forwarded-Uri`, nginx's
 * `X-Original-URI`, else the check path after `/gate` (Envoy's `path_prefix: /gate`).
 */
function originalPath(request: GateRequest): string {
  const given = request.headers[FORWARDED_URI] ?? request.headers[ORIGINAL_URI];
  if (given !== undefined) return pathOf(given);
  const path = pathOf(request.target);
  const rest = path.startsWith(GATE_PREFIX) ? path.slice(GATE_PREFIX.length) : path;
  return rest.startsWith('/') ? rest : `/${rest}`;
}

/** A Host field's host: the first of a list, lower-case, its port left out. */
function hostName(field: string): string {
  const first = field.split(',', 1)[0]!.trim().toLowerCase();
  if (first.startsWith('[')) return first.slice(0, first.indexOf(']') + 1) || first; // an IPv6 literal: fails the name rules
  return first.replace(/:\d*$/, '');
}

export function pathOf(target: string): string {
  const query = target.indexOf('?');
  return query === -1 ? target : target.slice(0, query);
}

function checked(name: string, source: string): string | GateProblem {
  const reason = circuitNameProblem(name);
  return reason === null ? name : badName(name, source, reason);
}

function badName(name: string, source: string, reason: string): GateProblem {
  return {
    code: 'INVALID_NAME',
    detail: `Circuit name from ${source} ${name === '' ? 'is missing' : reason}.`,
    extensions: { name: name.slice(0, 300), source },
  };
}
