/**
 * The caller id the client names on every outcome and admission (issue 17): option `caller`,
 * default the host name (so a quorum counts hosts, however many processes each runs), checked
 * by the server's own rule (domain/caller.ts).
 */
import { hostname as osHostname } from 'node:os';
import { CALLER_MAX_LENGTH, callerProblem } from '../domain/caller.js';

/**
 * The host name, with any character a caller id may not hold replaced by '-' and cut to the
 * longest id: every process on one host is one caller, so a quorum of 3 needs 3 hosts.
 */
export function defaultCaller(hostname = osHostname()): string {
  return (hostname.replace(/[^A-Za-z0-9_.:~-]/g, '-') || 'host').slice(0, CALLER_MAX_LENGTH);
}

/** The option checked: a TypeError naming the rule when it is no valid caller id. */
export function checkedCaller(caller: unknown): string {
  if (caller === undefined) return defaultCaller();
  const problem = typeof caller === 'string' ? callerProblem(caller) : 'must be a string';
  if (problem !== null) throw new TypeError(`Invalid caller '${String(caller)}': ${problem}`);
  return caller as string;
}
