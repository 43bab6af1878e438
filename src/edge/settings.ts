/** The edge agent's settings (issue 32): its flags over the config file's `edge:` section. */
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { ConfigError } from '../config/config-error.js';
import { edgeSchema, type EdgeConfig } from '../config/edge-schema.js';
import { parseConfigText } from '../config/file-schema.js';

export const EDGE_USAGE = `usage: circuitlog edge --server URL [--listen HOST:PORT] [--syslog HOST:PORT] [--config FILE] [--fail-open true|false]

Runs the edge agent (docs/gateways.md): a local view of circuitlog's circuits for the services
and gateways of this host. Env: CIRCUITLOG_TOKEN (sent to the server), CIRCUITLOG_CONFIG (the
config file; its edge: section), CIRCUITLOG_LOG_LEVEL.`;

/** The `edge:` settings: the config file's section, then the flags over it. */
/** The `edge:` section with the server named, and the server's body limit from the same file. */
export type EdgeSettings = EdgeConfig & {
  readonly server: string;
  /** The config file's `api_body_limit_bytes` (the server's limit for one outcome's body; 16 KiB without a file). */
  readonly bodyLimitBytes: number;
};

export function edgeSettings(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): EdgeSettings | 'help' {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      server: { type: 'string' },
      listen: { type: 'string' },
      syslog: { type: 'string' },
      config: { type: 'string' },
      'fail-open': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return 'help';
  const configPath = values.config ?? (env.CIRCUITLOG_CONFIG || undefined);
  let section: unknown = {};
  let bodyLimitBytes = 16 * 1024; // the server's default api_body_limit_bytes
  if (configPath !== undefined) {
    let text: string;
    try {
      text = fs.readFileSync(configPath, 'utf8');
    } catch (error) {
      throw new ConfigError(`--config: cannot read '${configPath}': ${(error as Error).message}`);
    }
    const file = parseConfigText(text, configPath);
    section = file.edge;
    bodyLimitBytes = file.api_body_limit_bytes;
  }
  const flags: Record<string, unknown> = {};
  if (values.server !== undefined) flags.server = values.server;
  if (values.listen !== undefined) flags.listen = values.listen;
  if (values['fail-open'] !== undefined) {
    if (values['fail-open'] !== 'true' && values['fail-open'] !== 'false')
      throw new ConfigError('--fail-open: true or false');
    flags.fail_open = values['fail-open'] === 'true';
  }
  const base = section as Record<string, unknown>;
  const merged: Record<string, unknown> = { ...base, ...flags };
  if (values.syslog !== undefined)
    merged.syslog = { ...((base.syslog as Record<string, unknown> | undefined) ?? {}), listen: values.syslog };
  const parsed = edgeSchema.safeParse(merged);
  if (!parsed.success)
    throw new ConfigError(
      `edge settings: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`,
    );
  if (parsed.data.server === undefined)
    throw new ConfigError('edge: name the server with --server URL (or edge.server)');
  return { ...(parsed.data as EdgeConfig & { server: string }), bodyLimitBytes };
}
