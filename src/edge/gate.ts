/**
 * The gateway check route, `/gate` and `/gate/*` on the agent (issue 32; docs/gateways.md): nginx
 * `auth_request`, Envoy `ext_authz` (HTTP service) and Traefik `ForwardAuth` ask it whether the
 * request they hold may go to its upstream. It names the circuit (`edge.gate.circuit_from`), asks
 * the agent's admission (`EdgeDecider`, the server's own `/allowed` answer) and answers in the form
 * the gateway understands.
 */
import type { EdgeGateConfig } from '../config/edge-schema.js';
import { PROBLEMS } from '../domain/problem-codes.js';
import { PROBLEM_CONTENT_TYPE, uriReference } from '../http/problem.js';
import { REQUEST_ID_FIELD, REQUEST_ID_HEADER, requestIdFrom } from '../request-id.js';
import type { EdgeAnswer, EdgeDecider } from './edge-types.js';
import { circuitOf, FORWARDED_URI, type GateProblem, type GateRequest, ORIGINAL_URI, pathOf } from './gate-circuit.js';

export type { GateProblem, GateRequest } from './gate-circuit.js';

/** How an answer is shaped: what the gateway that asked understands. */
export type GateStyle = 'nginx' | 'envoy' | 'traefik';

/** Picks the form when `edge.gate.form` is `auto` (a gateway's config sets it: docs/gateways.md). */
export const GATE_FORM_HEADER = 'x-circuitlog-gate';
/** The circuit's state on every answer the decider gave (`closed`, `open`, `half-open`). */
export const CIRCUIT_STATE_HEADER = 'x-circuit-state';
/** Until when an open circuit refuses (RFC 3339), on a refusal that names it. */
export const CIRCUIT_OPEN_UNTIL_HEADER = 'x-circuit-open-until';

/**
 * What the Envoy form answers for the decider's 5xx refusal. Envoy's HTTP ext_authz client takes
 * any 5xx from the authorization server as the server failing, not as a denial: the request is
 * then refused with a bare 403 (no headers, no body), or let through with `failure_mode_allow`
 * (envoyproxy/envoy source/extensions/filters/common/ext_authz/ext_authz_http_impl.cc, "Set an
 * error status if the call to the authorization server returns any of the 5xx HTTP error codes").
 * Any other status but 200 is a denial whose status, headers and body reach the client; 429 is the
 * 4xx that says "come back later" and carries `Retry-After` (RFC 6585 section 4).
 */
export const ENVOY_REFUSAL_STATUS = 429;
/** `Retry-After` when the decider itself failed (seconds). */
const UNAVAILABLE_RETRY_AFTER_SECONDS = 1;

/** The decider's headers a refusal passes on (the rest are the agent's own). */
const REFUSAL_HEADERS = ['content-type', 'retry-after', REQUEST_ID_HEADER] as const;

/** A header value we may write: visible ASCII and spaces only (node:http throws on anything else). */
const SAFE_HEADER_VALUE = /^[\x20-\x7e]{1,200}$/;

/** Answer one gateway check request. Never rejects: a decider that fails answers 503 `CIRCUITLOG_UNAVAILABLE`. */
export async function gateAnswer(
  request: GateRequest,
  config: EdgeGateConfig,
  decider: EdgeDecider,
): Promise<EdgeAnswer> {
  const { headers } = request;
  const requestId = requestIdFrom(headers[REQUEST_ID_HEADER]);
  const instance = pathOf(request.target);
  const style = gateStyle(headers, config);
  if (typeof style !== 'string') return problem(style, instance, requestId);
  const circuit = circuitOf(request, config);
  if (typeof circuit !== 'string') return problem(circuit, instance, requestId);
  const caller = headers[config.caller_header];
  let answer: EdgeAnswer;
  try {
    answer = await decider.allowed(circuit, caller === '' ? undefined : caller, requestId);
    if (!Number.isInteger(answer.status) || answer.status < 200 || answer.status > 599)
      throw new Error(`the decider answered status ${answer.status}`);
  } catch {
    // Envoy and Traefik get the 503 as it is (Envoy: its `failure_mode_allow` decides); nginx a 403.
    const failed = unavailable(circuit, instance, requestId);
    return style === 'nginx' ? { ...failed, status: 403 } : failed;
  }
  if (answer.status < 300) return allowed(style, answer, requestId);
  // A bad caller (or any 400): the gateway's configuration is wrong, whatever the form (nginx: 500).
  if (answer.status === 400) return answer;
  return refusal(style, answer);
}

/** The form to answer in: `edge.gate.form`, else the `X-Circuitlog-Gate` header, else by the headers each gateway sends. */
export function gateStyle(headers: GateRequest['headers'], config: EdgeGateConfig): GateStyle | GateProblem {
  if (config.form !== 'auto') return config.form;
  const named = headers[GATE_FORM_HEADER];
  if (named !== undefined) {
    const style = named.trim().toLowerCase();
    if (style === 'nginx' || style === 'envoy' || style === 'traefik') return style;
    return {
      code: 'INVALID_HEADER',
      detail: `Header X-Circuitlog-Gate must be nginx, envoy or traefik, not '${named.slice(0, 100)}'.`,
      extensions: { header: GATE_FORM_HEADER },
    };
  }
  if (headers[FORWARDED_URI] !== undefined) return 'traefik';
  if (headers[ORIGINAL_URI] !== undefined) return 'nginx';
  return 'envoy';
}

/** The decider allowed the call: an empty 204 (nginx) or 200 (Envoy, Traefik), with the circuit's state. */
function allowed(style: GateStyle, answer: EdgeAnswer, requestId: string): EdgeAnswer {
  const headers: Record<string, string> = { [REQUEST_ID_HEADER]: answer.headers[REQUEST_ID_HEADER] ?? requestId };
  const state = stringMember(parseObject(answer.body), 'state');
  if (state !== undefined) headers[CIRCUIT_STATE_HEADER] = state;
  return { status: style === 'nginx' ? 204 : 200, headers, body: '' };
}

/**
 * A refusal in the gateway's form. nginx: 403 (what `auth_request` turns into a refusal) with
 * `Retry-After`, the state and `open_until` as headers for `auth_request_set`. Traefik: the
 * decider's own answer. Envoy: the same, but a 5xx becomes 429 (see ENVOY_REFUSAL_STATUS).
 */
function refusal(style: GateStyle, answer: EdgeAnswer): EdgeAnswer {
  const problemBody = parseObject(answer.body);
  const headers: Record<string, string> = {};
  for (const name of REFUSAL_HEADERS) {
    const value = answer.headers[name];
    if (value !== undefined) headers[name] = value;
  }
  // A 503 or 429 that names no state is still a refusal of the circuit's; a 401 or 404 (a wrong
  // token, a credential not allowed the circuit) says nothing about the circuit's state.
  const state =
    stringMember(problemBody, 'state') ?? (answer.status === 503 || answer.status === 429 ? 'open' : undefined);
  if (state !== undefined) headers[CIRCUIT_STATE_HEADER] = state;
  const openUntil = stringMember(problemBody, 'open_until');
  if (openUntil !== undefined) headers[CIRCUIT_OPEN_UNTIL_HEADER] = openUntil;
  if (style === 'nginx') return { status: 403, headers, body: answer.body };
  if (style === 'envoy' && answer.status >= 500) {
    // RFC 9457 section 3.1.2: the `status` member, if present, is the answer's status.
    const body =
      problemBody !== undefined && typeof problemBody.status === 'number'
        ? `${JSON.stringify({ ...problemBody, status: ENVOY_REFUSAL_STATUS })}\n`
        : answer.body;
    return { status: ENVOY_REFUSAL_STATUS, headers, body };
  }
  return { status: answer.status, headers, body: answer.body };
}

/** The decider failed (it threw, or answered no HTTP status): 503 `CIRCUITLOG_UNAVAILABLE`, `Retry-After: 1`. */
function unavailable(circuit: string, instance: string, requestId: string): EdgeAnswer {
  const answer = render(
    'CIRCUITLOG_UNAVAILABLE',
    PROBLEMS.CIRCUITLOG_UNAVAILABLE,
    `The edge agent could not decide whether circuit '${circuit}' allows the call.`,
    instance,
    requestId,
    { circuit },
  );
  return { ...answer, headers: { ...answer.headers, 'retry-after': String(UNAVAILABLE_RETRY_AFTER_SECONDS) } };
}

/** A problem the gate answers itself, for every form: 400 (a bad name or header) or 404 (no circuit matched). */
function problem(p: GateProblem, instance: string, requestId: string): EdgeAnswer {
  return render(p.code, PROBLEMS[p.code], p.detail, instance, requestId, p.extensions);
}

/** The server's problem document shape (src/http/problem.ts `problemParts`): the same members, in the same order. */
function render(
  code: string,
  entry: { status: number; type: string; title: string },
  detail: string,
  instance: string,
  requestId: string,
  extensions: Record<string, unknown>,
): EdgeAnswer {
  const body: Record<string, unknown> = { type: entry.type, title: entry.title, status: entry.status, detail };
  body.instance = uriReference(instance);
  body[REQUEST_ID_FIELD] = requestId;
  body.code = code;
  Object.assign(body, extensions);
  return {
    status: entry.status,
    headers: { [REQUEST_ID_HEADER]: requestId, 'content-type': PROBLEM_CONTENT_TYPE },
    body: `${JSON.stringify(body)}\n`,
  };
}

/** The body as a JSON object, or undefined (not JSON, or not an object). */
function parseObject(body: string): Record<string, unknown> | undefined {
  if (!body.startsWith('{')) return undefined;
  try {
    const value: unknown = JSON.parse(body);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** A string member fit for a header value, else undefined. */
function stringMember(object: Record<string, unknown> | undefined, member: string): string | undefined {
  const value = object?.[member];
  return typeof value === 'string' && SAFE_HEADER_VALUE.test(value) ? value : undefined;
}
