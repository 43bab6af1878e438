import type { ErrorCode } from './errors.js';

/** What an error code answers: its HTTP status and its RFC 9457 problem `type` and `title`. */
export interface ProblemCode {
  readonly status: number;
  readonly type: string;
  readonly title: string;
}

/** One row per error code: HTTP status, stable problem type and title (RFC 9457 section 3.1). */
export const PROBLEMS: Readonly<Record<ErrorCode, ProblemCode>> = {
  CIRCUIT_OPEN: { status: 503, type: '/problems/circuit-open', title: 'Circuit is open' },
  CIRCUIT_FORCED_OPEN: { status: 503, type: '/problems/circuit-forced-open', title: 'Circuit is forced open' },
  CIRCUIT_THROTTLED: { status: 503, type: '/problems/circuit-throttled', title: 'Circuit is throttled' },
  DEPENDENCY_THROTTLED: {
    status: 503,
    type: '/problems/dependency-throttled',
    title: 'The dependency asked for less load (cool-down)',
  },
  CIRCUIT_RAMPING: { status: 503, type: '/problems/circuit-ramping', title: 'Circuit is ramping up (slow start)' },
  CIRCUIT_DEFINED_BY_CONFIG: {
    status: 409,
    type: '/problems/circuit-defined-by-config',
    title: 'Circuit is defined by the config',
  },
  NOT_FOUND: { status: 404, type: '/problems/not-found', title: 'Not found' },
  CIRCUIT_NOT_FOUND: { status: 404, type: '/problems/circuit-not-found', title: 'Circuit not found' },
  INVALID_NAME: { status: 400, type: '/problems/invalid-name', title: 'Invalid circuit name' },
  INVALID_PATH: { status: 400, type: '/problems/invalid-path', title: 'Invalid proxied path' },
  BAD_REQUEST: { status: 400, type: '/problems/bad-request', title: 'Malformed request' },
  INVALID_JSON: { status: 400, type: '/problems/invalid-json', title: 'Request body is not valid JSON' },
  INVALID_QUERY: { status: 400, type: '/problems/invalid-query', title: 'Invalid query parameters' },
  VALIDATION_FAILED: { status: 422, type: '/problems/validation-failed', title: 'Request body failed validation' },
  PAYLOAD_TOO_LARGE: { status: 413, type: '/problems/payload-too-large', title: 'Request body too large' },
  UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    type: '/problems/unsupported-media-type',
    title: 'Body must be application/json',
  },
  METHOD_NOT_ALLOWED: { status: 405, type: '/problems/method-not-allowed', title: 'Method not allowed' },
  UNAUTHORIZED: { status: 401, type: '/problems/unauthorized', title: 'Missing or invalid bearer token' },
  INSUFFICIENT_SCOPE: { status: 403, type: '/problems/insufficient-scope', title: 'The credential lacks the scope' },
  CIRCUIT_NOT_PERMITTED: {
    status: 403,
    type: '/problems/circuit-not-permitted',
    title: 'The credential may not use this circuit',
  },
  STORAGE_BUSY: { status: 503, type: '/problems/storage-busy', title: 'Storage busy' },
  STORAGE_FULL: { status: 503, type: '/problems/storage-full', title: 'Storage full' },
  STORAGE_UNAVAILABLE: { status: 503, type: '/problems/storage-unavailable', title: 'Storage unavailable' },
  UPSTREAM_NOT_FOUND: { status: 404, type: '/problems/upstream-not-found', title: 'Unknown upstream' },
  NO_NODE_AVAILABLE: { status: 503, type: '/problems/no-node-available', title: 'No upstream node available' },
  BULKHEAD_FULL: { status: 503, type: '/problems/bulkhead-full', title: 'Too many concurrent requests' },
  CONCURRENCY_LIMITED: {
    status: 503,
    type: '/problems/concurrency-limited',
    title: "Over the upstream's concurrency limit",
  },
  UPSTREAM_TIMEOUT: { status: 504, type: '/problems/upstream-timeout', title: 'Upstream timed out' },
  UPSTREAM_UNREACHABLE: { status: 502, type: '/problems/upstream-unreachable', title: 'Upstream unreachable' },
  REQUEST_BODY_TIMEOUT: { status: 408, type: '/problems/request-body-timeout', title: 'Request body timed out' },
  INVALID_HEADER: { status: 400, type: '/problems/invalid-header', title: 'Invalid request header' },
  TOO_MANY_STREAMS: { status: 503, type: '/problems/too-many-streams', title: 'Too many open event streams' },
  // RFC 4918 section 11.5: the server cannot store what the request needs (limits.max_circuits).
  TOO_MANY_CIRCUITS: { status: 507, type: '/problems/too-many-circuits', title: 'Too many circuits' },
  UPGRADE_NOT_SUPPORTED: { status: 501, type: '/problems/upgrade-not-supported', title: 'Upgrade not supported' },
  CALLER_NOT_PERMITTED: {
    status: 403,
    type: '/problems/caller-not-permitted',
    title: "Caller outside the credential's callers",
  },
  CROSS_SITE_REQUEST: { status: 403, type: '/problems/cross-site-request', title: 'Cross-site request refused' },
  MISDIRECTED_REQUEST: { status: 421, type: '/problems/misdirected-request', title: 'Host not served here' },
  ADMIN_DISABLED: { status: 403, type: '/problems/admin-disabled', title: 'Admin route disabled' },
  BACKUP_RUNNING: { status: 409, type: '/problems/backup-running', title: 'A backup is already running' },
  TOO_MANY_COMBINATIONS: {
    status: 400,
    type: '/problems/too-many-combinations',
    title: 'A backtest grid of more than 100 combinations',
  },
  BACKTEST_NOT_FOUND: { status: 404, type: '/problems/backtest-not-found', title: 'Backtest answer not kept' },
  // The policy lab (issue 31): one backtest at a time per process, within a time and a memory limit.
  BACKTEST_BUSY: { status: 503, type: '/problems/backtest-busy', title: 'A backtest is already running' },
  BACKTEST_TIMEOUT: { status: 503, type: '/problems/backtest-timeout', title: 'The backtest ran out of time' },
  BACKTEST_TOO_LARGE: {
    status: 507,
    type: '/problems/backtest-too-large',
    title: 'The backtest needs too much memory',
  },
  NOT_READY: { status: 503, type: '/problems/not-ready', title: 'Not ready' },
  // The edge agent (issue 32): the server it follows cannot be reached, and `fail_open` is false.
  CIRCUITLOG_UNAVAILABLE: { status: 503, type: '/problems/circuitlog-unavailable', title: 'circuitlog is unreachable' },
  // The edge agent's outcome queue is full while the server is reachable (backpressure): retry after Retry-After.
  EDGE_QUEUE_FULL: { status: 503, type: '/problems/edge-queue-full', title: 'The edge agent is sending outcomes' },
  // A gateway's check request whose path no `edge.gate.circuit_from.path_prefix` matches.
  GATE_NO_CIRCUIT: { status: 404, type: '/problems/gate-no-circuit', title: 'No circuit for this request' },
  INTERNAL: { status: 500, type: '/problems/internal', title: 'Internal server error' },
};
