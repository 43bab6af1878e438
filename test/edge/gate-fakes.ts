import { edgeGateSchema, type EdgeGateConfig } from '../../src/config/edge-schema.js';
import { AppError } from '../../src/domain/errors.js';
import type { EdgeAnswer, EdgeDecider } from '../../src/edge/edge-types.js';
import { problemParts } from '../../src/http/problem.js';

/** The gate's config as the agent parses it (defaults applied). */
export function gateConfig(given: Record<string, unknown> = {}): EdgeGateConfig {
  return edgeGateSchema.parse(given);
}

export const NOW = Date.parse('2026-12-05T03:00:00.000Z');
export const OPEN_UNTIL = '2026-12-05T03:00:07.000Z';

/** The server's 200 to `GET /circuits/:name/allowed` (circuit-json.ts `allowedText`, cut down). */
export function allowedAnswer(name: string, requestId: string, state = 'closed'): EdgeAnswer {
  return {
    status: 200,
    headers: { 'x-request-id': requestId, 'content-type': 'application/json' },
    body: `${JSON.stringify({ allowed: true, state, circuit: { name, state } })}\n`,
  };
}

/** A refusal as the server renders it (http/problem.ts `problemParts`, the same code as the server's). */
export function refusedAnswer(
  name: string,
  requestId: string,
  options: { code?: 'CIRCUIT_OPEN' | 'CIRCUIT_THROTTLED'; state?: string | null; openUntil?: string | null } = {},
): EdgeAnswer {
  const extensions: Record<string, unknown> = { circuit: name };
  if (options.state !== null) extensions.state = options.state ?? 'open';
  if (options.openUntil !== null) extensions.open_until = options.openUntil ?? OPEN_UNTIL;
  const error = new AppError(options.code ?? 'CIRCUIT_OPEN', `Circuit '${name}' is open.`, {
    retryAt: Date.parse(OPEN_UNTIL),
    extensions,
  });
  return problemParts(error, `/circuits/${name}/allowed`, requestId, NOW);
}

/** A problem of another status (a 429 from a cool-down proxy, a 400 for a bad caller, a 401). */
export function statusAnswer(status: number, code: string, requestId: string, retryAfter?: string): EdgeAnswer {
  const headers: Record<string, string> = { 'x-request-id': requestId, 'content-type': 'application/problem+json' };
  if (retryAfter !== undefined) headers['retry-after'] = retryAfter;
  const body = { type: `/problems/${code.toLowerCase()}`, title: code, status, detail: code, code };
  return { status, headers, body: `${JSON.stringify(body)}\n` };
}

export interface DeciderCall {
  readonly name: string;
  readonly caller: string | undefined;
  readonly requestId: string | undefined;
}

/** A decider that records what it is asked and answers by `answer` (which may throw or reject). */
export function fakeDecider(
  answer: (name: string, requestId: string) => EdgeAnswer | Promise<EdgeAnswer> = (name, id) => allowedAnswer(name, id),
): EdgeDecider & { calls: DeciderCall[] } {
  const calls: DeciderCall[] = [];
  return {
    calls,
    allowed(name, caller, requestId) {
      calls.push({ name, caller, requestId });
      return Promise.resolve().then(() => answer(name, requestId ?? 'none'));
    },
  };
}
