import { readFile } from 'node:fs/promises';
import { createLocalJWKSet, type JSONWebKeySet, type JWK } from 'jose';
import type { Logger } from 'pino';

/**
 * The keys JWTs are checked against (issue 30, `auth.jwt`): a JWKS read from `jwks_file` or
 * fetched from `jwks_url`, kept in memory, and read again when a token names a `kid` the set
 * does not have (a key rotation), at most once per JWKS_COOLDOWN_MS. A read that fails (host
 * unreachable, timeout, not 200, not a JWKS) keeps the last good set. Our own small fetcher
 * rather than jose's `createRemoteJWKSet`: that one times its cooldown and cache age with
 * `Date.now()` (no injected clock), and once its `cacheMaxAge` (default 10 min) has passed it
 * awaits a refetch and fails the verification when the host is gone, where we keep the keys.
 */

export const JWKS_TIMEOUT_MS = 5_000; // 5 s per fetch
/** Between two reads of the JWKS (an unknown `kid` asks for one): 30 s. */
export const JWKS_COOLDOWN_MS = 30_000;
/** A set older than this is read again in the background (its keys serve meanwhile): 10 min. */
export const JWKS_MAX_AGE_MS = 10 * 60_000;
/** Largest JWKS accepted, in bytes (a Kubernetes JWKS is about 1 KB per key). */
export const JWKS_MAX_BYTES = 256 * 1024;

/** One JWKS as jose uses it, with the signing algorithms its keys have. */
export interface KeySet {
  readonly keys: ReturnType<typeof createLocalJWKSet>;
  /** The `algorithms` a token may use: each key's `alg`, or its key type's usual one (keyAlgorithms). */
  readonly algorithms: readonly string[];
}

export interface JwksSource {
  /** The current set: loaded first when there is none yet (null: none could be read). */
  current(): Promise<KeySet | null>;
  /** After an unknown `kid`: the set read again, or null when a read is not due (cooldown) or failed. */
  refresh(): Promise<KeySet | null>;
}

export interface JwksSourceDeps {
  readonly now: () => number;
  readonly fetch?: typeof fetch;
  readonly logger: Logger;
}

export type JwksLocation = { readonly file: string } | { readonly url: string };

/** A source that reads the set at once (in the background) and then as described above. */
export function createJwksSource(location: JwksLocation, deps: JwksSourceDeps): JwksSource {
  const read =
    'file' in location ? () => readJwksFile(location.file) : () => fetchJwks(location.url, deps.fetch ?? fetch);
  const where = 'file' in location ? location.file : location.url;
  let set: KeySet | null = null;
  let loadedAt = Number.NEGATIVE_INFINITY;
  let attemptedAt = Number.NEGATIVE_INFINITY;
  let pending: Promise<KeySet | null> | null = null;
  let failing = false;

  const load = (): Promise<KeySet | null> => {
    if (pending !== null) return pending;
    attemptedAt = deps.now();
    pending = read()
      .then((jwks) => {
        set = keySet(jwks);
        loadedAt = deps.now();
        if (failing) deps.logger.info({ jwks: where }, 'auth.jwt: JWKS read again');
        failing = false;
        return set;
      })
      .catch((error: unknown) => {
        // One line per run of failures; the last good set (if any) stays in use.
        if (!failing)
          deps.logger.error({ jwks: where, err: String(error) }, 'auth.jwt: JWKS not read; keeping the last good set');
        failing = true;
        return null;
      })
      .finally(() => {
        pending = null;
      });
    return pending;
  };
  const due = () => deps.now() - attemptedAt >= JWKS_COOLDOWN_MS;

  void load();
  return {
    async current() {
      if (pending !== null && set === null) return pending;
      if (set === null) return due() ? load() : null;
      if (deps.now() - loadedAt >= JWKS_MAX_AGE_MS && due()) void load();
      return set;
    },
    async refresh() {
      if (pending !== null) return pending;
      return due() ? load() : null;
    },
  };
}

/** A parsed JWKS as jose's local key set (throws on one that is not a JWKS). */
function keySet(jwks: unknown): KeySet {
  const keys = createLocalJWKSet(jwks as JSONWebKeySet);
  return { keys, algorithms: [...new Set((jwks as JSONWebKeySet).keys.flatMap(keyAlgorithms))] };
}

/**
 * The algorithms a key signs with: its `alg` when it says (Kubernetes' keys do: `RS256`), else
 * the one its type is used with (RSA: RS256 only; EC: by curve; OKP Ed25519: EdDSA). A key for
 * encryption (`use: enc`) or a shared secret (`oct`) signs nothing here; `none` is never one.
 */
export function keyAlgorithms(key: JWK): string[] {
  if (key.use !== undefined && key.use !== 'sig') return [];
  if (key.kty === 'oct') return [];
  if (typeof key.alg === 'string') return key.alg === 'none' ? [] : [key.alg];
  if (key.kty === 'RSA') return ['RS256'];
  if (key.kty === 'EC') return EC_ALGORITHMS[key.crv ?? ''] ?? [];
  if (key.kty === 'OKP' && key.crv === 'Ed25519') return ['EdDSA', 'Ed25519'];
  return [];
}

const EC_ALGORITHMS: Record<string, string[]> = { 'P-256': ['ES256'], 'P-384': ['ES384'], 'P-521': ['ES512'] };

async function readJwksFile(file: string): Promise<unknown> {
  const text = await readFile(file, 'utf8');
  if (Buffer.byteLength(text) > JWKS_MAX_BYTES) throw new Error(`larger than ${JWKS_MAX_BYTES} bytes`);
  return JSON.parse(text);
}

/** GET the JWKS: 200 and JSON within JWKS_TIMEOUT_MS and JWKS_MAX_BYTES, no redirects. */
async function fetchJwks(url: string, fetchImpl: typeof fetch): Promise<unknown> {
  const signal = AbortSignal.timeout(JWKS_TIMEOUT_MS);
  const response = await fetchImpl(url, {
    signal,
    redirect: 'manual',
    headers: { accept: 'application/json, application/jwk-set+json' },
  });
  if (response.status !== 200) {
    await response.body?.cancel();
    throw new Error(`HTTP ${response.status}`);
  }
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  if (response.body === null) throw new Error('no body');
  const reader = response.body.getReader();
  for (let part = await reader.read(); !part.done; part = await reader.read()) {
    bytes += part.value.byteLength;
    if (bytes > JWKS_MAX_BYTES) {
      await reader.cancel();
      throw new Error(`larger than ${JWKS_MAX_BYTES} bytes`);
    }
    chunks.push(part.value);
  }
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}
