/**
 * `circuitlog backtest <circuit> --policy proposed.yaml`: the policy lab from the command line
 * (docs/policy-lab.md). Against a running server (`POST /circuits/{name}/backtest`), or straight
 * from a SQLite file (`--db`: opened read-only, the engine run in this process).
 */
import fs from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { circuitNameProblem } from '../domain/circuit-name.js';
import { AppError } from '../domain/errors.js';
import { policyOf } from '../domain/policy.js';
import { policyFromWire } from '../domain/policy-wire.js';
import { parseConfigText } from '../config/file-schema.js';
import { BacktestBody, backtestPlan } from '../http/backtest-body.js';
import { type Backtester, readPlanHistory, runPlan } from '../http/backtest-routes.js';
import type { LabResult } from '../http/backtest-cache.js';
import { backtest, grid } from '../lab/backtest.js';
import { backtestSvg } from '../lab/backtest-svg.js';
import { SqliteCircuitStore } from '../store/sqlite/circuit-store.js';
import { type ApiTarget, cappedText, circuitPath, jsonOf, send } from './api.js';
import { openExisting, sqliteError } from './database-file.js';
import { CliError, EXIT, usageError } from './exit-codes.js';
import { printResult } from './backtest-table.js';
import type { Output } from './output.js';

export interface BacktestRequest {
  readonly circuit: string;
  /** A YAML (or JSON) file holding a policy patch: the PATCH body. */
  readonly policyFile: string | undefined;
  /** A YAML (or JSON) file holding a grid: `{failure_threshold: [5, 8], window.size: [10, 15]}`. */
  readonly gridFile: string | undefined;
  readonly from: string | undefined;
  readonly to: string | undefined;
  readonly svgFile: string | undefined;
  readonly json: boolean;
}

const MAX_FILE_BYTES = 1024 * 1024; // 1 MiB: a policy or grid file is a few hundred bytes
const MAX_SVG_BYTES = 16 * 1024 * 1024; // 16 MiB

/** A YAML or JSON object from a file, or a usage error naming the option. */
function readObjectFile(option: string, file: string): Record<string, unknown> {
  let text: string;
  try {
    if (fs.statSync(file).size > MAX_FILE_BYTES) throw new Error(`over ${MAX_FILE_BYTES} bytes`);
    text = fs.readFileSync(file, 'utf8');
  } catch (error) {
    throw usageError(`${option}: cannot read '${file}': ${(error as Error).message}`);
  }
  let value: unknown;
  try {
    value = parseYaml(text);
  } catch (error) {
    throw usageError(`${option}: '${file}' is not YAML or JSON: ${(error as Error).message.split('\n')[0]}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw usageError(`${option}: '${file}' must hold a mapping (policy fields), got ${JSON.stringify(value)}`);
  return value as Record<string, unknown>;
}

/** `--from`/`--to`: epoch ms (digits) or an ISO date-time as given (the server checks it). */
const instant = (raw: string | undefined): number | string | undefined =>
  raw === undefined ? undefined : /^\d+$/.test(raw) ? Number(raw) : raw;

/** The request body both modes send or check. */
function requestBody(request: BacktestRequest): Record<string, unknown> {
  if (request.policyFile === undefined && request.gridFile === undefined)
    throw usageError('backtest needs --policy <file> (a policy patch, YAML or JSON) or --grid <file>');
  const body: Record<string, unknown> = {};
  if (request.policyFile !== undefined) body.policy = readObjectFile('--policy', request.policyFile);
  if (request.gridFile !== undefined) body.grid = readObjectFile('--grid', request.gridFile);
  if (request.from !== undefined) body.from = instant(request.from);
  if (request.to !== undefined) body.to = instant(request.to);
  return body;
}

function checkedName(name: string): string {
  const problem = circuitNameProblem(name);
  if (problem) throw usageError(`'${name}' is not a circuit name: ${problem}`);
  return name;
}

/** `backtest` through a running server: POST the request, then GET the picture when `--svg` asks. */
export async function backtestThroughApi(target: ApiTarget, request: BacktestRequest, io: Output): Promise<void> {
  const name = checkedName(request.circuit);
  const result = await jsonOf<LabResult>(
    await send(target, 'POST', circuitPath(name, '/backtest'), { body: requestBody(request) }),
  );
  if (request.svgFile !== undefined) {
    if (!('proposed' in result)) throw usageError('--svg: a grid answer has no picture; leave out --grid');
    const answer = await send(target, 'GET', circuitPath(name, `/backtest/${result.id}.svg`));
    const svg = await cappedText(answer.response, MAX_SVG_BYTES);
    if (svg === null) throw new CliError(EXIT.FAILED, `the picture is over ${MAX_SVG_BYTES} bytes`);
    writeSvg(request.svgFile, svg);
  }
  printResult(result, request.json, io);
}

/** The engine in this process (the worker thread is the server's, to keep serving). */
const inProcess: Backtester = {
  backtest: async (input) => backtest(input),
  grid: async (input, values) => grid(input, values),
  svg: (result) => backtestSvg(result),
};

/**
 * `backtest --db <file>`: the circuit and its history read from the SQLite file (read-only),
 * the defaults from `CIRCUITLOG_CONFIG` when set (for a patch's `null`), the engine run here.
 */
export async function backtestFromFile(
  file: string,
  env: NodeJS.ProcessEnv,
  request: BacktestRequest,
  io: Output,
): Promise<void> {
  const name = checkedName(request.circuit);
  const parsed = BacktestBody.safeParse(requestBody(request));
  if (!parsed.success) {
    const fields = parsed.error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`);
    throw usageError(`the backtest request is invalid: ${fields.join('; ')}`);
  }
  const config = serverConfig(env);
  const { probe_lease_seconds: _lease, ...defaults } = config.circuit_defaults;
  const db = openExisting(file, { readonly: true });
  let result: LabResult;
  try {
    const store = new SqliteCircuitStore(db);
    const circuit = store.find(name);
    if (circuit === null) throw new CliError(EXIT.FAILED, `no circuit named '${name}' in '${file}'`);
    const current = policyOf(circuit);
    const plan = backtestPlan(parsed.data, current, policyFromWire(defaults), Date.now());
    const history = await readPlanHistory(store, name, plan, config.history.max_outcomes);
    result = await runPlan(inProcess, { name, current, createdAt: circuit.createdAt }, plan, history);
  } catch (error) {
    if (error instanceof AppError) throw new CliError(EXIT.FAILED, appErrorText(error));
    if (error instanceof CliError) throw error;
    if ((error as { code?: unknown }).code === 'SQLITE_BUSY')
      throw new CliError(EXIT.FAILED, `'${file}' is held by a running circuitlog: backtest through it (--url)`);
    throw sqliteError(file, error);
  } finally {
    db.close();
  }
  if (request.svgFile !== undefined) {
    if (!('proposed' in result)) throw usageError('--svg: a grid answer has no picture; leave out --grid');
    writeSvg(request.svgFile, backtestSvg(result));
  }
  printResult(result, request.json, io);
}

function serverConfig(env: NodeJS.ProcessEnv) {
  const file = env.CIRCUITLOG_CONFIG;
  if (file === undefined || file === '') return parseConfigText('{}', 'defaults');
  try {
    return parseConfigText(fs.readFileSync(file, 'utf8'), `CIRCUITLOG_CONFIG ${file}`);
  } catch (error) {
    throw new CliError(EXIT.FAILED, `CIRCUITLOG_CONFIG: ${(error as Error).message}`);
  }
}

function appErrorText(error: AppError): string {
  const fields = (error.options.fields ?? []).map((f) => `${f.field}: ${f.message}`);
  return fields.length === 0 ? error.message : `${error.message} ${fields.join('; ')}`;
}

function writeSvg(file: string, svg: string): void {
  try {
    fs.writeFileSync(file, svg);
  } catch (error) {
    throw new CliError(EXIT.FAILED, `--svg: cannot write '${file}': ${(error as Error).message}`);
  }
}
