/** The command line's exit codes; docs/operations.md "Command line" lists them. */
export const EXIT = {
  /** Done. */
  OK: 0,
  /** The server answered with an error (a 404 included), or a local step failed (a file, a lock). */
  FAILED: 1,
  /** The command line itself is wrong: unknown command or option, a missing or bad argument. */
  USAGE: 2,
  /** No server answered at the URL (refused, timed out, no such host). */
  UNREACHABLE: 3,
  /** `migrate --check`: the database has migrations this build would apply. */
  MIGRATIONS_PENDING: 4,
  /** `migrate --check`: the database was migrated by a newer build than this one. */
  DATABASE_NEWER: 5,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** A failure the command line reports in one line and exits with `exitCode`. */
export class CliError extends Error {
  constructor(
    readonly exitCode: ExitCode,
    message: string,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** A wrong command line: exit 2. */
export const usageError = (message: string): CliError => new CliError(EXIT.USAGE, message);
