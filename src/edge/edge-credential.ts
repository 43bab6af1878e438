/**
 * The edge agent's own credential, as the server sees it (`GET /whoami`, issue 30), so the agent
 * refuses at once, with the server's own 403, what the server would refuse of it: an outcome
 * for a circuit outside its `circuits` patterns, as a caller outside its `callers` patterns, or
 * any outcome when it lacks the `report` scope. Acknowledged instead, such an outcome would
 * reach the server in one batch with other clients' outcomes, and the server refuses a batch
 * whole: theirs would be lost with it (test/e2e/edge-credentials.test.ts).
 */
import { circuitPermitted, hasScope, type Identity, type Scope, SCOPES } from '../auth/identity.js';
import { circuitNotPermitted, insufficientScope } from '../auth/refusal.js';
import type { OutcomeItem } from '../client/transport.js';
import { AppError } from '../domain/errors.js';
import { admissionCaller } from '../http/caller-param.js';
import type { EdgeAnswer } from './edge-types.js';

const patterns = (value: unknown): readonly string[] | null =>
  Array.isArray(value) ? value.filter((p): p is string => typeof p === 'string') : null;

/** The identity in a `GET /whoami` answer, or null when it is not one. */
export function identityOfWhoami(answer: EdgeAnswer): Identity | null {
  if (answer.status !== 200) return null;
  let body: { id?: unknown; kind?: unknown; scopes?: unknown; circuits?: unknown; callers?: unknown };
  try {
    body = JSON.parse(answer.body) as typeof body;
  } catch {
    return null;
  }
  if (typeof body.id !== 'string' || !Array.isArray(body.scopes)) return null;
  const scopes = new Set(body.scopes.filter((s): s is Scope => SCOPES.includes(s as Scope)));
  const kind = ['anonymous', 'token', 'credential', 'jwt'].includes(body.kind as string) ? body.kind : 'credential';
  return {
    id: body.id,
    kind: kind as Identity['kind'],
    scopes,
    circuits: patterns(body.circuits),
    callers: patterns(body.callers),
    maxNewCircuits: null, // counted on the server: not knowable here
  };
}

export class EdgeCredential {
  /** Null until the server has answered `GET /whoami` (then nothing is refused here). */
  private identity: Identity | null = null;

  /** The credential's id as the server answered it (`/edge/stats` credential), or null until known. */
  get id(): string | null {
    return this.identity?.id ?? null;
  }

  /** Ask the server who the agent is (each time it follows the stream again); keeps the last answer on failure. */
  async learn(ask: () => Promise<EdgeAnswer>): Promise<void> {
    try {
      this.identity = identityOfWhoami(await ask()) ?? this.identity;
    } catch {
      // unreachable: the last answer stands
    }
  }

  /** The server's 403 for these outcomes (`POST path`), or null when it would take them. */
  outcomesRefusal(items: readonly OutcomeItem[], path: string): AppError | null {
    const who = this.identity;
    if (who === null) return null;
    if (!hasScope(who, 'report')) return insufficientScope('report', 'POST', path);
    const outside = items.find((item) => !circuitPermitted(who, item.circuit));
    if (outside !== undefined) return circuitNotPermitted(outside.circuit);
    return refusedAs(() => {
      for (const item of items) admissionCaller(who, item.caller);
    });
  }

  /** The server's 403 for `?caller=` on an admission, or null. */
  callerRefusal(caller: string | undefined): AppError | null {
    const who = this.identity;
    if (who === null || caller === undefined) return null;
    return refusedAs(() => admissionCaller(who, caller));
  }
}

function refusedAs(check: () => void): AppError | null {
  try {
    check();
    return null;
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
}
