import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { AppError } from '../domain/errors.js';
import { CIRCUIT_NAME_MAX_LENGTH, circuitNameProblem } from '../domain/circuit-name.js';
import type { BreakerService } from '../service/breaker-service.js';
import { refusalError } from '../service/open-error.js';
import { problemParts } from './problem.js';
import { rawHeaderReader, type RequestGuard } from './request-guard.js';
import { logFailure } from './request-failure.js';
import { REQUEST_ID_HEADER, requestIdFrom } from '../request-id.js';
import { admittedText } from './circuit-json.js';

/** A listener that answers a request itself (true) or leaves it untouched for the next one (false). */
export type FastListener = (incoming: IncomingMessage, outgoing: ServerResponse) => boolean;

export interface RawAllowedDeps {
  readonly breaker: BreakerService;
  readonly guard: RequestGuard;
  readonly logger: Logger;
  readonly clock: () => number;
}

const PREFIX = '/circuits/';
const SUFFIX = '/allowed';
const UNKNOWN_CIRCUIT = '{"allowed":true,"state":"closed","circuit":null}\n';

/**
 * `GET /circuits/{name}/allowed` answered from memory straight on Node's request and response,
 * skipping @hono/node-server's Request, Hono's Context and the Response object (as the /proxy
 * listener does): what circuit-routes.ts `registerAllowed` answers, byte for byte, when the
 * store can answer without a write. It takes only the plain case, after the same guards
 * (Host, token): a target of exactly that shape, no query, a name with no percent-encoding
 * that passes the name rules. Anything else (a guard's refusal, a bad name, `?caller=`, a
 * circuit whose answer needs a write: a probe slot, a throttle draw) it leaves to Hono's route.
 */
export function rawAllowedListener(deps: RawAllowedDeps): FastListener {
  const answer = answerAllowed(deps);
  return (incoming, outgoing) => {
    try {
      return answer(incoming, outgoing);
    } catch {
      // Nothing was written (a store that cannot answer throws in `peek`): the route answers
      // it again and renders the error as always.
      if (!outgoing.headersSent) return false;
      outgoing.destroy();
      return true;
    }
  };
}

function answerAllowed(deps: RawAllowedDeps): FastListener {
  const { breaker, guard } = deps;
  return (incoming, outgoing) => {
    const target = incoming.url;
    if (incoming.method !== 'GET' || target === undefined) return false;
    const name = plainAllowedName(target);
    if (name === null) return false;
    const header = rawHeaderReader(incoming);
    const guarded = guard('GET', target, header);
    // A refusal, or a JWT not seen before (its check is under way; the route awaits it).
    if (guarded instanceof AppError || guarded instanceof Promise) return false;
    const decision = breaker.peekAllowed(name);
    if (decision === undefined) return false; // a write is needed: the route's `allowed`
    const requestId = requestIdFrom(header(REQUEST_ID_HEADER));
    if (decision === null) return send(outgoing, requestId, UNKNOWN_CIRCUIT);
    const { circuit, verdict } = decision;
    if (!verdict.allowed) {
      // peekAllowed has reported the refusal to the observer: answer it here, as onError would.
      const error = refusalError(circuit, verdict, undefined);
      logFailure(deps.logger, 'GET', target, error, requestId);
      const { status, headers, body } = problemParts(error, target, requestId, deps.clock());
      return send(outgoing, requestId, body, status, headers);
    }
    const now = breaker.now();
    // A circuit without a shadow policy (issue 31) answers as always: one member read.
    const shadowRefuses = circuit.shadow != null && breaker.shadowWouldRefuse(circuit);
    return send(outgoing, requestId, admittedText(circuit, verdict, now, shadowRefuses));
  };
}

/**
 * The circuit of a plain `/circuits/{name}/allowed` target (no query, no percent-encoding, a
 * valid name), else null. Remembered per target: callers ask about the same few circuits again
 * and again, and one map lookup costs less than the two checks of the name. Bounded: at most
 * TARGET_MEMO_ENTRIES targets of at most TARGET_MEMO_MAX_LENGTH characters (under 150 KB),
 * emptied when full.
 */
function plainAllowedName(target: string): string | null {
  if (target.length > TARGET_MEMO_MAX_LENGTH) return allowedNameOf(target);
  let name = targetMemo.get(target);
  if (name === undefined) {
    name = allowedNameOf(target);
    if (targetMemo.size >= TARGET_MEMO_ENTRIES) targetMemo.clear();
    targetMemo.set(target, name);
  }
  return name;
}

const targetMemo = new Map<string, string | null>();
const TARGET_MEMO_ENTRIES = 256;
const TARGET_MEMO_MAX_LENGTH = PREFIX.length + CIRCUIT_NAME_MAX_LENGTH + SUFFIX.length; // 218

function allowedNameOf(target: string): string | null {
  if (!target.startsWith(PREFIX) || !target.endsWith(SUFFIX)) return null;
  const name = target.slice(PREFIX.length, -SUFFIX.length);
  if (name === '' || /[/?#%]/.test(name) || circuitNameProblem(name) !== null) return null;
  return name;
}

/**
 * An answer with the headers @hono/node-server writes for the route's Response (JSON by
 * default), in its order: `X-Request-Id` first, as `guardFetch` sets it on Node's response
 * before the route runs (request-id.ts `bindRequestId`). Written as a flat [name, value, ...]
 * list: node:http writes it as given, without building its header map.
 */
function send(
  outgoing: ServerResponse,
  requestId: string,
  text: string,
  status = 200,
  headers?: Record<string, string>,
): true {
  const length = String(Buffer.byteLength(text));
  if (headers === undefined) {
    outgoing
      .writeHead(status, [REQUEST_ID_HEADER, requestId, 'content-type', 'application/json', 'Content-Length', length])
      .end(text);
    return true;
  }
  const list: string[] = [REQUEST_ID_HEADER, requestId];
  for (const name in headers) if (name !== REQUEST_ID_HEADER) list.push(name, headers[name]!); // a problem's headers name the id too
  list.push('Content-Length', length);
  outgoing.writeHead(status, list).end(text);
  return true;
}
