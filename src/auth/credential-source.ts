/**
 * The credentials in force, reloaded without a restart (issue 30): on `reload()` (SIGHUP) and
 * when the file changes on disk (a watch on its folder, so an editor's write, a replace by
 * rename and a Kubernetes ConfigMap's symlink swap are all seen; debounced). A reload swaps
 * the whole table at once: a request sees the old set or the new one, never a mix. A bad file
 * keeps the set in force and logs one error line naming the problem.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Authenticator } from './bearer.js';
import {
  type CredentialEntry,
  CredentialsError,
  type CredentialTable,
  credentialTable,
  parseCredentials,
  tableAuthenticator,
} from './credentials.js';

export interface CredentialSourceOptions {
  readonly path: string;
  /** The entries read at start (config.ts already checked the file). */
  readonly entries: readonly CredentialEntry[];
  /** CIRCUITLOG_TOKEN, kept as the credential `token` (every scope) beside the file. */
  readonly token?: string;
  readonly logger: Logger;
  /** After each reload that changed the set in force, with the ids now listed (the audit log's hook). */
  readonly onReload?: (ids: readonly string[]) => void;
  /** Quiet time after the last change on disk before the file is read (default 100 ms). */
  readonly debounceMs?: number;
}

export interface CredentialSource {
  readonly authenticate: Authenticator;
  /** Read the file again now (SIGHUP); true when the file's set is in force (changed or not). */
  reload(trigger: 'signal' | 'file'): boolean;
  /** Watch the file's folder for changes (until `close`). */
  watch(): void;
  close(): void;
}

const DEBOUNCE_MS = 100; // an editor's or a deployer's burst of events, read once

/**
 * A reload that left the set as it was: a signal is an operator's request, answered in the log
 * (nothing to audit); a folder event is noise.
 */
function logUnchanged(logger: Logger, trigger: 'signal' | 'file', file: string, count: number): void {
  if (trigger === 'signal')
    logger.info(
      { event: 'credentials_reloaded', trigger, file, credentials: count, changed: false },
      `credentials reloaded, unchanged: ${count} from ${file}`,
    );
  else logger.debug({ event: 'credentials_unchanged', trigger, file }, 'credentials file unchanged');
}

export function credentialSource(options: CredentialSourceOptions): CredentialSource {
  const { logger } = options;
  let table: CredentialTable = credentialTable(options.entries, options.token);
  // The set in force, compared by content: a folder event from a sibling (the database beside
  // the file, an editor's swap file) or a SIGHUP over an unchanged file reloads nothing.
  let inForce = JSON.stringify(options.entries);
  let lastText: string | undefined;
  let watcher: fs.FSWatcher | undefined;
  let timer: NodeJS.Timeout | undefined;

  const reload = (trigger: 'signal' | 'file'): boolean => {
    let text: string;
    let entries: readonly CredentialEntry[];
    try {
      text = fs.readFileSync(options.path, 'utf8');
      // A change on disk that left the text as it was (a touch, a sibling file) changes nothing.
      if (trigger === 'file' && text === lastText) return false;
      entries = parseCredentials(text, options.path);
    } catch (error) {
      const problem =
        error instanceof CredentialsError
          ? error.message
          : `cannot read '${options.path}': ${(error as Error).message}`;
      logger.error(
        { event: 'credentials_reload_failed', trigger, file: options.path },
        `credentials not reloaded, the previous set stays in force: ${problem}`,
      );
      return false;
    }
    lastText = text;
    const key = JSON.stringify(entries);
    if (key === inForce) {
      logUnchanged(logger, trigger, options.path, entries.length);
      return true;
    }
    inForce = key;
    table = credentialTable(entries, options.token);
    const ids = entries.map((e) => e.id);
    logger.info(
      { event: 'credentials_reloaded', trigger, file: options.path, credentials: ids.length },
      `credentials reloaded: ${ids.length} from ${options.path}`,
    );
    options.onReload?.(ids);
    return true;
  };

  const base = path.basename(options.path);
  const onChange = (_event: string, filename: string | Buffer | null) => {
    // Only the file itself, or a Kubernetes ConfigMap's `..data` swap; not the database or its
    // WAL in the same folder, whose writes would otherwise keep the timer from ever firing.
    const name = filename?.toString();
    if (name !== undefined && name !== base && !name.startsWith('..')) return;
    // The first event of a burst starts the timer; later ones do not push it back, so a change
    // is read within the quiet time even while the folder keeps changing.
    if (timer !== undefined) return;
    timer = setTimeout(() => {
      timer = undefined;
      reload('file');
    }, options.debounceMs ?? DEBOUNCE_MS);
    timer.unref();
  };

  return {
    authenticate: tableAuthenticator(() => table),
    reload,
    watch() {
      if (watcher !== undefined) return;
      watcher = fs.watch(path.dirname(path.resolve(options.path)), { persistent: false }, onChange);
      watcher.on('error', (error) =>
        logger.error(
          { event: 'credentials_watch_failed', file: options.path },
          `watching the credentials file failed (SIGHUP still reloads it): ${error.message}`,
        ),
      );
    },
    close() {
      clearTimeout(timer);
      watcher?.close();
      watcher = undefined;
    },
  };
}
