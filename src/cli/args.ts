import { parseArgs } from 'node:util';
import { parseBaseUrl } from './api.js';
import { usageError } from './exit-codes.js';

/** Every command, with the options it takes beyond the common ones and its arguments. */
export const COMMANDS = {
  serve: { options: [], args: [] },
  edge: { options: [], args: [] },
  ls: { options: ['state'], args: [] },
  get: { options: [], args: ['name'] },
  force: { options: [], args: ['name', 'open|closed|none'] },
  clear: { options: [], args: ['name'] },
  reset: { options: [], args: ['name'] },
  backup: { options: ['db', 'offline', 'overwrite', 'wait'], args: ['file'] },
  restore: { options: ['db'], args: ['file'] },
  migrate: { options: ['db', 'check'], args: [] },
  backtest: { options: ['db', 'policy', 'grid', 'from', 'to', 'svg'], args: ['circuit'] },
  token: { options: ['id', 'scopes', 'circuits', 'callers', 'max-new-circuits'], args: ['create'] },
  help: { options: [], args: [] },
} as const satisfies Record<string, { options: readonly string[]; args: readonly string[] }>;

export type CommandName = keyof typeof COMMANDS;

/** What the command line asked for, checked. */
export interface Invocation {
  readonly command: CommandName;
  readonly args: readonly string[];
  readonly url: string;
  readonly token: string | undefined;
  readonly json: boolean;
  readonly timeoutMs: number;
  readonly state: string | undefined;
  /** `--db`, when given (else the server's own setting decides, see db-path.ts). */
  readonly db: string | undefined;
  readonly offline: boolean;
  readonly overwrite: boolean;
  readonly check: boolean;
  /** How long `backup` keeps retrying while another backup runs. */
  readonly waitSeconds: number;
  /** `token create`'s options, as given (checked by the command). */
  readonly credential: {
    readonly id: string | undefined;
    readonly scopes: string | undefined;
    readonly circuits: string | undefined;
    readonly callers: string | undefined;
    readonly maxNewCircuits: string | undefined;
  };
  /** `backtest`'s options, as given (checked by the command). */
  readonly backtest: {
    readonly policy: string | undefined;
    readonly grid: string | undefined;
    readonly from: string | undefined;
    readonly to: string | undefined;
    readonly svg: string | undefined;
  };
}

export const DEFAULT_URL = 'http://127.0.0.1:8080';
const DEFAULT_TIMEOUT_MS = 10_000; // 10 s per request, until the answer's headers
const DEFAULT_WAIT_SECONDS = 60; // 1 min of retries while another backup runs
const COMMON = ['url', 'token', 'json', 'timeout', 'help'];

const OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
  json: { type: 'boolean' },
  timeout: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  state: { type: 'string' },
  db: { type: 'string' },
  offline: { type: 'boolean' },
  overwrite: { type: 'boolean' },
  wait: { type: 'string' },
  check: { type: 'boolean' },
  id: { type: 'string' },
  scopes: { type: 'string' },
  circuits: { type: 'string' },
  callers: { type: 'string' },
  'max-new-circuits': { type: 'string' },
  policy: { type: 'string' },
  grid: { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  svg: { type: 'string' },
} as const;

/** Parse `argv` (without node and the script) against `env`; a CliError with exit 2 when wrong. */
export function parseInvocation(argv: readonly string[], env: NodeJS.ProcessEnv): Invocation {
  let parsed: ReturnType<typeof parseArgs<{ args: string[]; options: typeof OPTIONS; allowPositionals: true }>>;
  try {
    parsed = parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    throw usageError((error as Error).message);
  }
  const { values, positionals } = parsed;
  const [first, ...args] = positionals;
  const command = values.help && first === undefined ? 'help' : (first ?? 'help');
  if (!Object.hasOwn(COMMANDS, command)) throw usageError(`unknown command '${command}' (circuitlog --help)`);
  const spec = COMMANDS[command as CommandName];
  const allowed = new Set<string>([...COMMON, ...spec.options]);
  for (const [key, value] of Object.entries(values))
    if (value !== undefined && !allowed.has(key)) throw usageError(`${command} takes no --${key}`);
  if (values.help) return invocationOf('help', [command], values, env);
  if (args.length !== spec.args.length) {
    const wanted = spec.args.map((a) => `<${a}>`).join(' ');
    throw usageError(`usage: circuitlog ${command}${wanted ? ` ${wanted}` : ''}`);
  }
  return invocationOf(command as CommandName, args, values, env);
}

function invocationOf(
  command: CommandName,
  args: readonly string[],
  values: Record<string, string | boolean | undefined>,
  env: NodeJS.ProcessEnv,
): Invocation {
  const str = (key: string) => values[key] as string | undefined;
  const flag = (key: string) => values[key] === true;
  return {
    command,
    args,
    url: parseBaseUrl(str('url') ?? (env.CIRCUITLOG_URL || DEFAULT_URL)),
    token: str('token') ?? (env.CIRCUITLOG_TOKEN || undefined),
    json: flag('json'),
    timeoutMs: wholeNumber('--timeout', str('timeout'), DEFAULT_TIMEOUT_MS, 1, 3_600_000),
    state: str('state'),
    db: str('db'),
    offline: flag('offline'),
    overwrite: flag('overwrite'),
    check: flag('check'),
    waitSeconds: wholeNumber('--wait', str('wait'), DEFAULT_WAIT_SECONDS, 0, 86_400),
    credential: {
      id: str('id'),
      scopes: str('scopes'),
      circuits: str('circuits'),
      callers: str('callers'),
      maxNewCircuits: str('max-new-circuits'),
    },
    backtest: { policy: str('policy'), grid: str('grid'), from: str('from'), to: str('to'), svg: str('svg') },
  };
}

function wholeNumber(name: string, raw: string | undefined, fallback: number, min: number, max: number): number {
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max)
    throw usageError(`${name}: must be a whole number from ${min} to ${max}, got '${raw}'`);
  return Number(raw);
}
