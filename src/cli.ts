#!/usr/bin/env node
/**
 * `circuitlog`, the operator's command line (`npx circuitlog --help`); like main.ts a
 * composition root that touches `process`. `serve` is main.ts itself, loaded as is; a
 * cluster worker forked from it runs this file again and goes straight there too.
 */
import cluster from 'node:cluster';
import type { ApiTarget } from './cli/api.js';
import { parseInvocation, type Invocation } from './cli/args.js';
import { backupFromFile, backupThroughApi } from './cli/backup-command.js';
import { backtestFromFile, backtestThroughApi } from './cli/backtest-command.js';
import { clearForce, forceCircuit, getCircuit, listCircuits, resetCircuit } from './cli/circuit-commands.js';
import { databasePath } from './cli/database-file.js';
import { CliError, EXIT, type ExitCode } from './cli/exit-codes.js';
import { helpText } from './cli/help.js';
import { checkMigrations } from './cli/migrate-command.js';
import { processOutput, type Output } from './cli/output.js';
import { restoreDatabase } from './cli/restore-command.js';
import { createToken } from './cli/token-command.js';

async function run(invocation: Invocation, io: Output): Promise<ExitCode> {
  const target: ApiTarget = { url: invocation.url, token: invocation.token, timeoutMs: invocation.timeoutMs };
  const { args, json } = invocation;
  const [first = '', second = ''] = args;
  switch (invocation.command) {
    case 'help':
    case 'edge': // never here: main() loads edge.ts for `edge` before parsing anything
    case 'serve': // never here: main() loads main.ts for `serve` before parsing anything
      io.out(helpText());
      return EXIT.OK;
    case 'ls':
      await listCircuits(target, invocation.state, json, io);
      return EXIT.OK;
    case 'get':
      await getCircuit(target, first, json, io);
      return EXIT.OK;
    case 'force':
      await forceCircuit(target, first, second, json, io);
      return EXIT.OK;
    case 'clear':
      await clearForce(target, first, json, io);
      return EXIT.OK;
    case 'reset':
      await resetCircuit(target, first, json, io);
      return EXIT.OK;
    case 'backup': {
      const request = { file: first, overwrite: invocation.overwrite, waitSeconds: invocation.waitSeconds, json };
      if (invocation.offline || invocation.db !== undefined)
        await backupFromFile(databasePath(invocation.db, process.env), request, io);
      else await backupThroughApi(target, request, io);
      return EXIT.OK;
    }
    case 'backtest': {
      const { policy, grid, from, to, svg } = invocation.backtest;
      const request = { circuit: first, policyFile: policy, gridFile: grid, from, to, svgFile: svg, json };
      if (invocation.db !== undefined) await backtestFromFile(invocation.db, process.env, request, io);
      else await backtestThroughApi(target, request, io);
      return EXIT.OK;
    }
    case 'restore':
      await restoreDatabase(first, databasePath(invocation.db, process.env), json, io);
      return EXIT.OK;
    case 'migrate':
      if (!invocation.check)
        throw new CliError(EXIT.USAGE, 'migrate needs --check (the server applies migrations itself when it starts)');
      return checkMigrations(databasePath(invocation.db, process.env), json, io);
    case 'token':
      if (first !== 'create') throw new CliError(EXIT.USAGE, `unknown token command '${first}': use token create`);
      createToken(invocation.credential, json, io);
      return EXIT.OK;
  }
}

async function main(): Promise<void> {
  if (process.argv[2] === 'edge') {
    process.argv.splice(2, 1); // edge.ts reads its own flags (--server, --listen, ...) after `edge`
    await import('./edge.js');
    return;
  }
  if (cluster.isWorker || process.argv[2] === 'serve') {
    if (!cluster.isWorker) process.argv.splice(2, 1); // main.ts reads its own flags (--workers) after `serve`
    await import('./main.js');
    return;
  }
  let code: ExitCode;
  try {
    code = await run(parseInvocation(process.argv.slice(2), process.env), processOutput);
  } catch (error) {
    if (!(error instanceof CliError)) throw error;
    process.stderr.write(`circuitlog: ${error.message}\n`);
    code = error.exitCode;
  }
  process.exitCode = code;
}

main().catch((error: unknown) => {
  // Anything not a CliError is a bug: the stack, exit 1.
  process.stderr.write(`${String((error as Error).stack ?? error)}\n`);
  process.exitCode = EXIT.FAILED;
});
