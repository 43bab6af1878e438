/**
 * The service's configuration: the environment and command line (`config/env.ts`) and the
 * optional config file (`config/file-schema.ts`, sections in `config/`), read once at start.
 * Policy defaults come from `domain/policy-defaults.ts`; every other default is written
 * once, beside its field, with its unit.
 */
import fs from 'node:fs';
import os from 'node:os';
import { CIRCUIT_NAME_MAX_LENGTH, circuitNameProblem, nodeCircuitName } from './domain/circuit-name.js';
import { ConfigError } from './config/config-error.js';
import { readEnv, type EnvConfig } from './config/env.js';
import { parseConfigText, type FileConfig } from './config/file-schema.js';
import { redactUrl } from './domain/redact-url.js';
import { type CredentialEntry, CredentialsError, readCredentials } from './auth/credentials.js';

export { CIRCUIT_NAME_MAX_LENGTH, circuitNameProblem };
export { ConfigError } from './config/config-error.js';
export { parseConfigText, type FileConfig } from './config/file-schema.js';
export { upstreamPolicy, type NodeConfig, type UpstreamConfig } from './config/upstream-schema.js';
export type { ServerConfig } from './config/service-schema.js';

export interface Config extends Omit<FileConfig, 'store'>, EnvConfig {
  /** The config file's `store:` section (the store itself comes from `CIRCUITLOG_STORE`). */
  readonly storeOptions: FileConfig['store'];
  /** `instance_id`, or `<hostname>:<port>`: every worker is this one caller (they share a host's network path). */
  readonly instanceId: string;
  /**
   * The credentials file (`CIRCUITLOG_CREDENTIALS`, else `auth.credentials_file`) and its
   * entries as read at start (src/auth/credentials.ts); undefined without one.
   */
  readonly credentials: { readonly path: string; readonly entries: readonly CredentialEntry[] } | undefined;
}

/** The credentials file's entries; a file that cannot be read or parsed stops the start (ConfigError, exit 2). */
function readCredentialsFile(path: string | undefined, variable: string): Config['credentials'] {
  if (path === undefined) return undefined;
  try {
    return { path, entries: readCredentials(path) };
  } catch (error) {
    const message =
      error instanceof CredentialsError ? error.message : `cannot read '${path}': ${(error as Error).message}`;
    throw new ConfigError(`${variable}: ${message}`);
  }
}

/** The config file at `CIRCUITLOG_CONFIG`, or every default without one. */
function readConfigFile(configPath: string | undefined): FileConfig {
  if (configPath === undefined) return parseConfigText('{}', 'defaults');
  let text: string;
  try {
    text = fs.readFileSync(configPath, 'utf8');
  } catch (error) {
    throw new ConfigError(`CIRCUITLOG_CONFIG: cannot read '${configPath}': ${(error as Error).message}`);
  }
  return parseConfigText(text, `CIRCUITLOG_CONFIG ${configPath}`);
}

/** Read the environment, the command line (`--workers`) and the optional config file once. */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  argv: readonly string[] = process.argv.slice(2),
): Config {
  const fromEnv = readEnv(env, argv);
  const { store: storeOptions, ...rest } = readConfigFile(fromEnv.configPath);
  const credentials = readCredentialsFile(
    fromEnv.credentialsPath ?? rest.auth.credentials_file,
    fromEnv.credentialsPath === undefined ? 'auth.credentials_file' : 'CIRCUITLOG_CREDENTIALS',
  );
  return {
    ...rest,
    storeOptions,
    ...fromEnv,
    instanceId: rest.instance_id ?? defaultInstanceId(fromEnv.port),
    credentials,
  };
}

/** `<hostname>:<port>`, cut to a valid caller id (a host name may hold no other characters but '-' and '.'). */
function defaultInstanceId(port: number): string {
  const host =
    os
      .hostname()
      .replace(/[^A-Za-z0-9_.:~\-/]/g, '_')
      .slice(0, 120) || 'localhost';
  return `${host}:${port}`;
}

/** Whether the config defines a circuit (declared under `circuits:`, or a proxy node's): never deleted as idle. */
export function configDefinedCircuit(config: Pick<FileConfig, 'circuits' | 'upstreams'>): (name: string) => boolean {
  const names = new Set(Object.keys(config.circuits));
  for (const [upstream, { nodes }] of Object.entries(config.upstreams))
    for (const node of nodes) names.add(nodeCircuitName(upstream, node.id));
  return (name) => names.has(name);
}

/** What the service runs with, for the one start-up log line: never the token itself. */
export function describeConfig(config: Config): Record<string, unknown> {
  return {
    config_file: config.configPath ?? null,
    upstreams: Object.keys(config.upstreams),
    local_dc: config.local_dc ?? null,
    instance_id: config.instanceId,
    token: config.token === undefined ? 'off' : 'on',
    credentials:
      config.credentials === undefined ? 'off' : `${config.credentials.entries.length} from ${config.credentials.path}`,
    workers: config.workers,
    synchronous: config.synchronous,
    group_commit: config.groupCommit ? 'on' : 'off',
    declared_circuits: Object.keys(config.circuits).length,
    db: config.store.kind === 'sqlite' ? config.dbPath : null,
    store: config.store.kind === 'sqlite' ? `sqlite:${config.dbPath}` : redactUrl(config.store.url),
    host: config.host,
    port: config.port,
    log_level: config.logLevel,
  };
}
