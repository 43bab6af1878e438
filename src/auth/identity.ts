/**
 * Who a request is (issue 30): the credential that signed it in, with what it may do. One
 * type for every way in: a named credential of the credentials file, `CIRCUITLOG_TOKEN` (id
 * `token`, every scope), a verified JWT, or nobody (`ANONYMOUS`, when no credential is
 * configured at all: today's open behaviour, every scope). Pure: no I/O, no clock.
 */

/** What a credential may do; `admin` implies every other scope. */
export type Scope = 'read' | 'report' | 'operate' | 'configure' | 'admin';

export const SCOPES: readonly Scope[] = ['read', 'report', 'operate', 'configure', 'admin'];

export interface Identity {
  /** The credential's id (`checkout`), `token` for CIRCUITLOG_TOKEN, the JWT's identity claim, or `anonymous`. */
  readonly id: string;
  readonly kind: 'anonymous' | 'token' | 'credential' | 'jwt';
  readonly scopes: ReadonlySet<Scope>;
  /** Circuit name patterns it may see and touch (`payments/*`); null: every circuit. */
  readonly circuits: readonly string[] | null;
  /** Caller name patterns it may report as; default `<id>` and `<id>/*`. Null: any caller (anonymous, token). */
  readonly callers: readonly string[] | null;
  /** How many circuits it may create; null: no bound of its own. */
  readonly maxNewCircuits: number | null;
}

const EVERY_SCOPE: ReadonlySet<Scope> = new Set(SCOPES);

/** No credentials configured: anyone who reaches the server may do anything (loopback by default). */
export const ANONYMOUS: Identity = {
  id: 'anonymous',
  kind: 'anonymous',
  scopes: EVERY_SCOPE,
  circuits: null,
  callers: null,
  maxNewCircuits: null,
};

/** CIRCUITLOG_TOKEN: one credential with every scope. */
export const TOKEN_IDENTITY: Identity = { ...ANONYMOUS, id: 'token', kind: 'token' };

export function hasScope(identity: Identity, scope: Scope): boolean {
  return identity.scopes.has('admin') || identity.scopes.has(scope);
}

/** A name pattern: exact, or with `*` as its last character only (`payments/*` matches `payments/charge`). */
export function matchesPattern(pattern: string, name: string): boolean {
  return pattern.endsWith('*') ? name.startsWith(pattern.slice(0, -1)) : name === pattern;
}

/** Whether a pattern is well formed: non-empty, `*` only as the final character. */
export function isValidPattern(pattern: string): boolean {
  const star = pattern.indexOf('*');
  return pattern.length > 0 && (star === -1 || star === pattern.length - 1);
}

export function circuitPermitted(identity: Identity, name: string): boolean {
  return identity.circuits === null || identity.circuits.some((p) => matchesPattern(p, name));
}

export function callerPermitted(identity: Identity, caller: string): boolean {
  return identity.callers === null || identity.callers.some((p) => matchesPattern(p, caller));
}

/** The default `callers` of a credential: its id and every name under it. */
export function defaultCallers(id: string): readonly string[] {
  return [id, `${id}/*`];
}
