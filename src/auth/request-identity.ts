import type { Identity } from './identity.js';
import { ANONYMOUS } from './identity.js';

/**
 * The identity of one request, bound by the request guard (http/request-guard.ts) on the env
 * @hono/node-server passes as `c.env` (as the request id is, src/request-id.ts), and read by
 * the routes with `identityOf(c)`. Unbound (no credentials configured): `ANONYMOUS`.
 */
export interface IdentityEnv {
  identity?: Identity;
}

export function bindIdentity(env: unknown, identity: Identity): void {
  if (typeof env === 'object' && env !== null) (env as IdentityEnv).identity = identity;
}

export function identityOf(c: { env: unknown }): Identity {
  return (c.env as IdentityEnv | undefined)?.identity ?? ANONYMOUS;
}
