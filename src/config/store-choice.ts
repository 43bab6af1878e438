import { isClusterUrl, parseClusterUrl } from '../store/redis/cluster-url.js';
import { redactUrl } from '../domain/redact-url.js';
import { isSentinelUrl, parseSentinelUrl } from '../store/redis/sentinel-url.js';
import { parseTlsOptions, TLS_OPTION_NAMES } from '../store/redis/tls-url.js';

/** Where state lives: one SQLite file (one host), or a Redis shared by many hosts. */
export type StoreChoice =
  | { readonly kind: 'sqlite'; readonly path: string }
  | { readonly kind: 'redis'; readonly url: string; readonly timeoutMs: number };

export const DEFAULT_DB_PATH = './data/circuitlog.db';

/** The environment variables that choose the store: part of the one list of settings (`config/settings.ts`). */
export const STORE_SETTINGS = ['CIRCUITLOG_STORE', 'CIRCUITLOG_DB', 'CIRCUITLOG_STORE_TIMEOUT_MS'] as const;
type StoreEnv = Readonly<Partial<Record<(typeof STORE_SETTINGS)[number], string>>>;
const DEFAULT_TIMEOUT_MS = 1_000; // 1 s: a write to an unreachable Redis answers 503 within this

/**
 * `CIRCUITLOG_STORE`: `sqlite:<path>` or `redis://[user:pass@]host[:port][/db]` (also
 * `rediss://`); unset means SQLite at `CIRCUITLOG_DB`. When both are set, STORE wins.
 * Returns the choice, or throws a message naming the variable (via `fail`).
 */
export function parseStoreChoice(env: StoreEnv, fail: (message: string) => Error): StoreChoice {
  // Checked whichever store is chosen: a bad value stops the start even where it is not used yet.
  const timeoutRaw = env.CIRCUITLOG_STORE_TIMEOUT_MS || String(DEFAULT_TIMEOUT_MS);
  const timeoutMs = Number(timeoutRaw);
  if (!/^\d+$/.test(timeoutRaw) || timeoutMs < 50 || timeoutMs > 10_000) {
    throw fail(
      `CIRCUITLOG_STORE_TIMEOUT_MS: must be a whole number of milliseconds from 50 to 10000, got '${timeoutRaw}'`,
    );
  }
  const raw = env.CIRCUITLOG_STORE;
  if (raw === undefined || raw === '') return { kind: 'sqlite', path: env.CIRCUITLOG_DB || DEFAULT_DB_PATH };
  if (raw.startsWith('sqlite:')) {
    const path = raw.slice('sqlite:'.length);
    if (path === '') throw fail("CIRCUITLOG_STORE: 'sqlite:' needs a file path (sqlite:./data/circuitlog.db)");
    return { kind: 'sqlite', path };
  }
  const problem = isSentinelUrl(raw)
    ? sentinelProblem(raw)
    : isClusterUrl(raw)
      ? clusterProblem(raw)
      : redisUrlProblem(raw);
  if (problem !== null) throw fail(`CIRCUITLOG_STORE: '${redactUrl(raw)}' ${problem}`);
  return { kind: 'redis', url: raw, timeoutMs };
}

/**
 * Check a `redis://` or `rediss://` URL as `redis://[user:pass@]host[:port][/db]` (port
 * 6379 by default; `rediss://` may have the `tls_*` options: `redis/tls-url.ts`); returns why
 * it is refused, or null.
 */
export function redisUrlProblem(raw: string): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'is not a URL (sqlite:<path>, redis://host[:port][/db] or rediss://...)';
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:')
    return 'has an unknown scheme; use sqlite:<path>, redis://, rediss://, redis+sentinel:// or redis+cluster://';
  if (url.hostname === '') return 'has no host (redis://host[:port][/db])';
  const db = url.pathname.replace(/^\//, '');
  if (db !== '' && !/^\d{1,5}$/.test(db))
    return `has database '${db}'; the path must be a database number (redis://host:6379/0)`;
  if (url.hash !== '') return 'must not have a fragment';
  for (const key of url.searchParams.keys())
    if (!(TLS_OPTION_NAMES as readonly string[]).includes(key))
      return `has the unknown option '${key}'; the options are (with rediss://) ${TLS_OPTION_NAMES.join(', ')}`;
  const tls = parseTlsOptions(url.searchParams, url.protocol === 'rediss:');
  return 'problem' in tls ? tls.problem : null;
}

const sentinelProblem = (raw: string): string | null => {
  const parsed = parseSentinelUrl(raw);
  return 'problem' in parsed ? parsed.problem : null;
};

const clusterProblem = (raw: string): string | null => {
  const parsed = parseClusterUrl(raw);
  return 'problem' in parsed ? parsed.problem : null;
};
