/** Stable error codes; the HTTP layer maps each to a status and a problem type. */
export type ErrorCode =
  | 'CIRCUIT_OPEN'
  | 'CIRCUIT_FORCED_OPEN'
  | 'CIRCUIT_THROTTLED'
  | 'DEPENDENCY_THROTTLED'
  | 'CIRCUIT_RAMPING'
  | 'CIRCUIT_DEFINED_BY_CONFIG'
  | 'NOT_FOUND'
  | 'CIRCUIT_NOT_FOUND'
  | 'INVALID_NAME'
  | 'INVALID_PATH'
  | 'BAD_REQUEST'
  | 'INVALID_JSON'
  | 'VALIDATION_FAILED'
  | 'INVALID_QUERY'
  | 'PAYLOAD_TOO_LARGE'
  | 'UNSUPPORTED_MEDIA_TYPE'
  | 'METHOD_NOT_ALLOWED'
  | 'UNAUTHORIZED'
  | 'CALLER_NOT_PERMITTED'
  | 'INSUFFICIENT_SCOPE'
  | 'CIRCUIT_NOT_PERMITTED'
  | 'STORAGE_BUSY'
  | 'STORAGE_FULL'
  | 'STORAGE_UNAVAILABLE'
  | 'UPSTREAM_NOT_FOUND'
  | 'NO_NODE_AVAILABLE'
  | 'BULKHEAD_FULL'
  | 'CONCURRENCY_LIMITED'
  | 'UPSTREAM_TIMEOUT'
  | 'UPSTREAM_UNREACHABLE'
  | 'REQUEST_BODY_TIMEOUT'
  | 'INVALID_HEADER'
  | 'TOO_MANY_STREAMS'
  | 'TOO_MANY_CIRCUITS'
  | 'UPGRADE_NOT_SUPPORTED'
  | 'CROSS_SITE_REQUEST'
  | 'MISDIRECTED_REQUEST'
  | 'NOT_READY'
  | 'ADMIN_DISABLED'
  | 'BACKUP_RUNNING'
  | 'TOO_MANY_COMBINATIONS'
  | 'BACKTEST_NOT_FOUND'
  | 'BACKTEST_BUSY'
  | 'BACKTEST_TIMEOUT'
  | 'BACKTEST_TOO_LARGE'
  | 'CIRCUITLOG_UNAVAILABLE'
  | 'EDGE_QUEUE_FULL'
  | 'GATE_NO_CIRCUIT'
  | 'INTERNAL';

export interface FieldError {
  readonly field: string;
  readonly message: string;
}

export interface AppErrorOptions {
  /** Per-field validation messages (VALIDATION_FAILED). */
  readonly fields?: readonly FieldError[];
  /** When the caller may try again (epoch ms); becomes `Retry-After`. */
  readonly retryAt?: number;
  /** Alternative to `retryAt`: a fixed `Retry-After` in seconds. */
  readonly retryAfterSeconds?: number;
  /** Extra members of the problem document. */
  readonly extensions?: Readonly<Record<string, unknown>>;
  readonly headers?: Readonly<Record<string, string>>;
  readonly cause?: unknown;
}

/**
 * An error with a stable `code`; only the HTTP error handler renders it. Every code but INTERNAL
 * is an answer, not a bug (a refusal, a bad request): it is made without a stack trace, which
 * no one reads (the logs carry a stack for INTERNAL only, and a `cause` keeps its own) and which
 * cost about 4 µs of a refused `/allowed`'s 9.5 µs (docs/performance.md, "Refusals").
 */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly options: AppErrorOptions;

  constructor(code: ErrorCode, detail: string, options: AppErrorOptions = {}) {
    const limit = Error.stackTraceLimit;
    if (code !== 'INTERNAL') Error.stackTraceLimit = 0;
    try {
      super(detail, options.cause === undefined ? undefined : { cause: options.cause });
    } finally {
      Error.stackTraceLimit = limit;
    }
    this.name = 'AppError';
    this.code = code;
    this.options = options;
  }
}
