/**
 * The caller id the client names on every outcome and admission (issue 17): option `caller`,
 * default `<hostname>/<pid>`, checked by the server's own rule (domain/caller.ts).
 */
import { hostname as osHostname } from 'node:os';
import { CALLER_MAX_LENGTH, callerProblem } from '../domain/caller.js';

/** `<hostname>/<pid>`, with any character a caller id may not hold replaced by '-' and cut to the longest id. */
export function defaultCaller(hostname = osHostname(), pid = process.pid): string {
  const tail = `/${pid}`;
  const host = (hostname.replace(/[^A-Za-z0-9_.:~-]/g, '-') || 'host').slice(0, CALLER_MAX_LENGTH - tail.length);
  return `${host}${tail}`;
}

/** The option checked: a TypeError naming the rule when it is no valid caller id. */
export function checkedCaller(caller: unknown): string {
  if (caller === undefined) return defaultCaller();
  const problem = typeof caller === 'string' ? callerProblem(caller) : 'must be a string';
  if (problem !== null) throw new TypeError(`Invalid caller '${String(caller)}': ${problem}`);
  return caller as string;
}
