import { hash } from 'node:crypto';
import { errors, type JWTPayload, type JWTVerifyOptions, jwtVerify } from 'jose';
import type { Logger } from 'pino';
import type { JwtConfig } from '../config/auth-schema.js';
import { callerProblem } from '../domain/caller.js';
import { defaultCallers, type Identity, matchesPattern, SCOPES, type Scope } from './identity.js';
import { createJwksSource, type JwksSource, type KeySet } from './jwks-source.js';

/**
 * Service identities from JWTs (issue 30, `auth.jwt`): a bearer token that is a JWT signed by a
 * key of the configured JWKS, with the right `iss` and `aud`, within its `nbf`..`exp` (60 s of
 * skew allowed), names an identity by its `identity_claim`. Checked with jose; verified tokens
 * are kept by their SHA-256 until they expire, so a request with a known token costs one hash
 * and one map lookup (`cached`), never a signature check. See docs/operations.md, "Service
 * identities from JWTs (Kubernetes)".
 */

export interface JwtVerifier {
  /** From memory: the token's identity, null when it is known to be bad, undefined when not known (ask `verify`). */
  cached(token: string): Identity | null | undefined;
  /** Check the token (signature, `iss`, `aud`, times, identity claim) and remember the answer. */
  verify(token: string): Promise<Identity | null>;
  /** Forget every token. */
  close(): void;
}

export interface JwtVerifierDeps {
  /** Milliseconds since the epoch: token times and the JWKS cooldown are read on this clock. */
  readonly now: () => number;
  readonly fetch?: typeof fetch;
  readonly logger: Logger;
  /** Entries of each token cache (tests make it small); default VERIFIED_ENTRIES and REFUSED_ENTRIES. */
  readonly cacheEntries?: number;
}

/** Clock skew allowed on `exp` and `nbf`, in seconds. */
export const CLOCK_TOLERANCE_S = 60;
/** Verified tokens kept (the oldest goes first): about 300 bytes each (60-character ids), under 1 KB, so under 10 MB. */
export const VERIFIED_ENTRIES = 10_000;
/** Refused tokens kept, each for REFUSED_TTL_MS: about 100 bytes each, so about 1 MB at most. */
export const REFUSED_ENTRIES = 10_000;
/** How long a refused token is answered from memory: 10 s (long enough to stop a flood, short enough for a rotation). */
export const REFUSED_TTL_MS = 10_000;
/** A longer bearer value is refused unread (a Kubernetes token is about 1 KB). */
export const MAX_TOKEN_CHARS = 8 * 1024;

interface Entry {
  readonly identity: Identity | null;
  /** Epoch ms after which the entry no longer answers. */
  readonly until: number;
}

export function createJwtVerifier(config: JwtConfig, deps: JwtVerifierDeps): JwtVerifier {
  const location = config.jwks_file !== undefined ? { file: config.jwks_file } : { url: config.jwks_url! };
  const jwks = createJwksSource(location, deps);
  const verified = new BoundedMap<Entry>(deps.cacheEntries ?? VERIFIED_ENTRIES);
  const refused = new BoundedMap<Entry>(deps.cacheEntries ?? REFUSED_ENTRIES);
  const inFlight = new Map<string, Promise<Identity | null>>();

  const lookup = (key: string): Identity | null | undefined => {
    const entry = verified.get(key) ?? refused.get(key);
    if (entry === undefined) return undefined;
    if (entry.until > deps.now()) return entry.identity;
    (entry.identity === null ? refused : verified).delete(key);
    return undefined;
  };

  const check = async (key: string, token: string): Promise<Identity | null> => {
    const found = await verifyToken(token, config, jwks, deps);
    if (found === null) {
      refused.set(key, { identity: null, until: deps.now() + REFUSED_TTL_MS });
      return null;
    }
    verified.set(key, { identity: found.identity, until: found.expiresAt + CLOCK_TOLERANCE_S * 1000 });
    return found.identity;
  };

  return {
    cached(token) {
      return token.length > MAX_TOKEN_CHARS ? null : lookup(tokenKey(token));
    },
    async verify(token) {
      if (token.length > MAX_TOKEN_CHARS) return null;
      const key = tokenKey(token);
      const known = lookup(key);
      if (known !== undefined) return known;
      // Many requests with one new token at once: one check.
      let pending = inFlight.get(key);
      if (pending === undefined) {
        pending = check(key, token).finally(() => inFlight.delete(key));
        inFlight.set(key, pending);
      }
      return pending;
    },
    close() {
      verified.clear();
      refused.clear();
    },
  };
}

/**
 * Whether a bearer value has a JWS's compact form: three base64url parts, the last (the
 * signature) possibly empty, as an unsigned `alg: none` token has it (refused, but a JWT).
 */
export function looksLikeJwt(value: string): boolean {
  return JWT_SHAPE.test(value);
}

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

function tokenKey(token: string): string {
  return hash('sha256', token, 'binary'); // 32 one-byte characters (latin1); one-shot, about half createHash's time
}

/** The identity of a good token and when it expires (epoch ms), or null (why is logged at debug). */
async function verifyToken(
  token: string,
  config: JwtConfig,
  jwks: JwksSource,
  deps: JwtVerifierDeps,
): Promise<{ identity: Identity; expiresAt: number } | null> {
  try {
    const set = await jwks.current();
    if (set === null) return refuse(deps, 'no JWKS');
    let payload: JWTPayload;
    try {
      payload = await verifyWith(set, token, config, deps.now());
    } catch (error) {
      if (!(error instanceof errors.JWKSNoMatchingKey)) throw error;
      // A kid we do not know: perhaps the issuer rotated its keys. Read the JWKS again, once.
      const fresh = await jwks.refresh();
      if (fresh === null) throw error;
      payload = await verifyWith(fresh, token, config, deps.now());
    }
    const identity = identityFromClaims(payload, config);
    if (identity === null) return refuse(deps, `no valid '${config.identity_claim}' claim`);
    return { identity, expiresAt: payload.exp! * 1000 };
  } catch (error) {
    return refuse(deps, error instanceof errors.JOSEError ? error.code : String(error));
  }
}

function refuse(deps: JwtVerifierDeps, reason: string): null {
  deps.logger.debug({ reason }, 'auth.jwt: token refused');
  return null;
}

/** jose's check against one key set; a token without a `kid` that several keys could sign is tried with each. */
async function verifyWith(set: KeySet, token: string, config: JwtConfig, nowMs: number): Promise<JWTPayload> {
  const options: JWTVerifyOptions = {
    issuer: config.issuer,
    audience: config.audience,
    algorithms: [...set.algorithms],
    clockTolerance: CLOCK_TOLERANCE_S,
    currentDate: new Date(nowMs),
    requiredClaims: ['exp'],
  };
  try {
    return (await jwtVerify(token, set.keys, options)).payload;
  } catch (error) {
    if (!(error instanceof errors.JWKSMultipleMatchingKeys)) throw error;
    for await (const key of error as unknown as AsyncIterable<CryptoKey>) {
      try {
        return (await jwtVerify(token, key, options)).payload;
      } catch (inner) {
        if (!(inner instanceof errors.JWSSignatureVerificationFailed)) throw inner;
      }
    }
    throw new errors.JWSSignatureVerificationFailed();
  }
}

/**
 * Who a verified token names: its identity claim, which must pass the caller-name rule
 * (src/domain/caller.ts; `system:serviceaccount:<ns>:<name>` does), with the scopes its scopes
 * claim lists (a space-separated string or an array; other words ignored) and those
 * `auth.jwt.scopes` gives the identity.
 */
export function identityFromClaims(payload: JWTPayload, config: JwtConfig): Identity | null {
  const id = payload[config.identity_claim];
  if (typeof id !== 'string' || callerProblem(id) !== null) return null;
  const claimed = payload[config.scopes_claim];
  const words = typeof claimed === 'string' ? claimed.split(' ') : Array.isArray(claimed) ? claimed : [];
  const scopes = new Set<Scope>(words.filter(isScope));
  for (const [pattern, granted] of Object.entries(config.scopes ?? {})) {
    if (matchesPattern(pattern, id)) for (const scope of granted) scopes.add(scope);
  }
  return { id, kind: 'jwt', scopes, circuits: null, callers: defaultCallers(id), maxNewCircuits: null };
}

const isScope = (word: unknown): word is Scope =>
  typeof word === 'string' && (SCOPES as readonly string[]).includes(word);

/** A Map that forgets its oldest entry when full. */
class BoundedMap<V> extends Map<string, V> {
  constructor(private readonly maxEntries: number) {
    super();
  }

  override set(key: string, value: V): this {
    if (!this.has(key) && this.size >= this.maxEntries) this.delete(this.keys().next().value!);
    return super.set(key, value);
  }
}
