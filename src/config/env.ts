/** The settings that come from the environment and the command line, each checked with a message naming it. */
import net from 'node:net';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { DEFAULT_DB_PATH, parseStoreChoice, type StoreChoice } from './store-choice.js';
import { ConfigError } from './config-error.js';
import type { Setting, SettingsEnv } from './settings.js';

export interface EnvConfig {
  readonly port: number;
  readonly host: string;
  readonly dbPath: string;
  readonly configPath: string | undefined;
  readonly token: string | undefined;
  /** `CIRCUITLOG_CREDENTIALS`: the credentials file, winning over the config file's `auth.credentials_file`. */
  readonly credentialsPath: string | undefined;
  readonly logLevel: string;
  readonly synchronous: 'NORMAL' | 'FULL';
  readonly workers: number;
  readonly groupCommit: boolean;
  /** `CIRCUITLOG_STORE`; SQLite at `dbPath` unless it names a Redis. */
  readonly store: StoreChoice;
  /** What the proxy does when the store cannot be reached: the local DC's nodes unguarded, or 503. */
  readonly proxyOnStorageOutage: 'fail_open' | 'refuse';
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function intFromEnv(env: SettingsEnv, name: Setting, fallback: number, min: number, max: number): number {
  const value = env[name];
  if (value === undefined || value === '') return fallback;
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new ConfigError(`${name}: must be an integer from ${min} to ${max}, got '${value}'`);
  }
  return Number(value);
}

/** An IP literal, or a host name of RFC 1123 labels; anything else cannot be listened on. */
function isHost(host: string): boolean {
  if (net.isIP(host) !== 0) return true;
  return host.length <= 253 && /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)(?:\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*\.?$/.test(host);
}

/** `auto` (any case) is the CPU count; else an integer from 1 to 256. */
function parseWorkers(name: string, raw: string): number {
  if (raw.toLowerCase() === 'auto') return os.availableParallelism();
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 256) {
    throw new ConfigError(`${name}: must be an integer from 1 to 256 or 'auto' (the CPU count), got '${raw}'`);
  }
  return Number(raw);
}

/** Command-line flags; each overrides its environment variable. */
function parseFlags(argv: readonly string[]): { workers?: string } {
  try {
    return parseArgs({
      args: [...argv],
      options: { workers: { type: 'string' } },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (error) {
    throw new ConfigError(`command line: ${(error as Error).message}; the only flag is --workers <N|auto>`);
  }
}

/** One of `choices` (after `normalise`), or a ConfigError naming the variable and what it got. */
function choiceFromEnv<T extends string>(
  env: SettingsEnv,
  name: Setting,
  fallback: T,
  choices: readonly T[],
  normalise: (s: string) => string,
): T {
  const value = normalise(env[name] || fallback);
  if (!(choices as readonly string[]).includes(value))
    throw new ConfigError(`${name}: must be ${choices.join(' or ')}, got '${env[name]}'`);
  return value as T;
}

/** `CIRCUITLOG_TOKEN`: unset or empty for none; else at least 16 characters, no surrounding whitespace. */
function tokenFromEnv(env: SettingsEnv): string | undefined {
  const token = env.CIRCUITLOG_TOKEN;
  if (token !== undefined && token.trim() !== token) {
    // HTTP strips the spaces around a header value, so such a token could never match.
    throw new ConfigError('CIRCUITLOG_TOKEN: must not begin or end with whitespace');
  }
  if (token !== undefined && token.length > 0 && token.length < 16) {
    throw new ConfigError('CIRCUITLOG_TOKEN: must be at least 16 characters');
  }
  return token || undefined;
}

function logLevelFromEnv(env: SettingsEnv): string {
  const logLevel = (env.CIRCUITLOG_LOG_LEVEL || 'info').toLowerCase();
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`CIRCUITLOG_LOG_LEVEL: must be one of ${LOG_LEVELS.join(', ')}, got '${logLevel}'`);
  }
  return logLevel;
}

/** Read the environment and the command line (`--workers`); every default of theirs lives here. */
export function readEnv(env: SettingsEnv, argv: readonly string[]): EnvConfig {
  const flags = parseFlags(argv);
  const port = intFromEnv(env, 'PORT', 8080, 0, 65_535);
  const host = env.HOST || '127.0.0.1';
  if (!isHost(host))
    throw new ConfigError(`HOST: must be an IP address or a host name (letters, digits, '-' and '.'), got '${host}'`);
  const store = parseStoreChoice(env, (message) => new ConfigError(message));
  const lower = (s: string) => s.toLowerCase();
  const proxyOnStorageOutage = choiceFromEnv(
    env,
    'CIRCUITLOG_PROXY_ON_STORAGE_OUTAGE',
    'fail_open',
    ['fail_open', 'refuse'],
    lower,
  );
  const token = tokenFromEnv(env);
  const logLevel = logLevelFromEnv(env);
  const synchronous = choiceFromEnv(env, 'CIRCUITLOG_SYNCHRONOUS', 'NORMAL', ['NORMAL', 'FULL'], (s) =>
    s.toUpperCase(),
  );
  const workersName = flags.workers === undefined ? 'CIRCUITLOG_WORKERS' : '--workers';
  const workers = parseWorkers(workersName, flags.workers ?? (env.CIRCUITLOG_WORKERS || '1'));
  const groupCommit = choiceFromEnv(env, 'CIRCUITLOG_GROUP_COMMIT', 'on', ['on', 'off'], lower);
  return {
    port,
    host,
    dbPath: store.kind === 'sqlite' ? store.path : env.CIRCUITLOG_DB || DEFAULT_DB_PATH,
    store,
    proxyOnStorageOutage,
    configPath: env.CIRCUITLOG_CONFIG || undefined,
    token,
    credentialsPath: env.CIRCUITLOG_CREDENTIALS || undefined,
    logLevel,
    synchronous,
    workers,
    groupCommit: groupCommit === 'on',
  };
}
