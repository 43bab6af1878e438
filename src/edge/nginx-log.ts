/**
 * nginx's access log over syslog, as the edge agent reads it (issue 32; docs/gateways.md "nginx
 * outcomes over syslog"): a datagram's syslog header (RFC 3164 as nginx writes it, or RFC 5424),
 * then one line in the `circuitlog` log_format, turned into one outcome per upstream attempt.
 * Pure: no I/O, `now` as an argument. Whether the circuit exists is the caller's question.
 */
import type { OutcomeItem } from '../client/transport.js';
import { callerProblem } from '../domain/caller.js';
import { circuitNameProblem } from '../domain/circuit-name.js';
import { kindOfStatus } from '../domain/outcome-rules.js';

/** The `v` of the documented log_format; a line with another is dropped (`bad_version`). */
export const NGINX_LOG_VERSION = 1;

/** The documented `log_format` directive, for nginx's `http {}` (the tests run a real nginx with it). */
export const NGINX_LOG_FORMAT = `log_format circuitlog escape=json '{"v":1,"circuit":"$circuitlog_circuit","caller":"$circuitlog_caller","status":"$upstream_status","time":"$upstream_response_time","retry_after":"$upstream_http_retry_after","msec":"$msec"}';`;

/** Most upstream attempts one line may name (nginx's retries and internal redirects stay far below). */
export const MAX_ATTEMPTS_PER_LINE = 100;

/** How far ahead of `now` a line's `msec` may lie: the server refuses a batch with an outcome further ahead. */
export const MAX_AHEAD_MS = 60_000; // 60 s

/** The longest `duration_ms` the server takes (one day). */
const MAX_DURATION_MS = 86_400_000;
/** The largest `retry_after_seconds` the server takes; a longer wait is capped by the policy anyway. */
const MAX_RETRY_AFTER_SECONDS = 2_147_483_647;

/** Why a datagram was dropped: the keys of the intake's `dropped` counts and of `edge_dropped` log lines. */
export type DropReason =
  | 'too_long'
  | 'not_syslog'
  | 'not_json'
  | 'not_our_format'
  | 'bad_version'
  | 'bad_circuit'
  | 'bad_caller'
  | 'bad_status'
  | 'bad_time'
  | 'unknown_circuit'
  | 'queue_full'
  | 'internal_error';

/** A syslog datagram's parts the agent uses. */
export interface SyslogMessage {
  /** RFC 3164's tag, or RFC 5424's APP-NAME; null when the sender gave none (`-`). */
  readonly tag: string | null;
  readonly message: string;
}

// <PRI>: facility * 8 + severity, 0..191, no leading zeros (RFC 5424 section 6.2.1).
const PRI = /^<(?:0|[1-9]\d{0,2})>/;
// RFC 3164 as nginx writes it: `Mmm dd hh:mm:ss ` (day padded with a space), an optional
// host name (left out with `nohostname`), then `tag: ` (nginx's tag: letters, digits, `_`;
// other senders may add `[pid]`).
const RFC3164 = /^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d (?:(\S+) )?([!-9;-~]{1,48}?)(?:\[\d{1,10}\])?: ([\s\S]*)$/;
// RFC 5424: `1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID ` then the structured data.
const RFC5424 = /^1 (\S+) (\S+) (\S+) (\S+) (\S+) /;

/** The tag and message of a syslog datagram (RFC 3164 as nginx sends it, or RFC 5424); null when it is neither. */
export function syslogMessage(datagram: string): SyslogMessage | null {
  const pri = PRI.exec(datagram);
  if (pri === null || Number(datagram.slice(1, pri[0].length - 1)) > 191) return null;
  const rest = datagram.slice(pri[0].length);
  const v1 = RFC5424.exec(rest);
  if (v1 !== null) {
    const msg = afterStructuredData(rest, v1[0].length);
    if (msg === null) return null;
    return { tag: v1[3] === '-' ? null : v1[3]!, message: msg.startsWith('\uFEFF') ? msg.slice(1) : msg };
  }
  const bsd = RFC3164.exec(rest);
  if (bsd === null) return null;
  return { tag: bsd[2]!, message: bsd[3]! };
}

/** RFC 5424's MSG after the STRUCTURED-DATA at `from` (`-` or `[id param="value" ...]...`); null when malformed. */
function afterStructuredData(s: string, from: number): string | null {
  let i = from;
  if (s[i] === '-') i++;
  else {
    if (s[i] !== '[') return null;
    while (s[i] === '[') {
      let quoted = false;
      for (i++; i < s.length; i++) {
        const c = s[i];
        if (quoted && c === '\\') i++;
        else if (c === '"') quoted = !quoted;
        else if (!quoted && c === ']') break;
      }
      if (i >= s.length) return null;
      i++;
    }
  }
  if (i === s.length) return '';
  return s[i] === ' ' ? s.slice(i + 1) : null;
}

/** One line of the `circuitlog` log_format, its fields as nginx wrote them (strings; `""` or `-`: empty). */
export interface NginxLogLine {
  readonly circuit: string;
  readonly caller: string;
  readonly status: string;
  readonly time: string;
  readonly retryAfter: string;
  readonly msec: string;
}

/** What one line comes to: outcomes, none (no circuit named, or no upstream contacted), or a drop. */
export type LineVerdict =
  | { readonly kind: 'outcomes'; readonly circuit: string; readonly items: readonly OutcomeItem[] }
  | { readonly kind: 'none'; readonly reason: 'no_circuit' | 'no_upstream' }
  | { readonly kind: 'drop'; readonly reason: DropReason; readonly detail: string };

const FIELDS = ['circuit', 'caller', 'status', 'time', 'retry_after', 'msec'] as const;
const REQUIRED = ['circuit', 'status', 'msec'] as const;

const drop = (reason: DropReason, detail: string): LineVerdict => ({ kind: 'drop', reason, detail });

/** The log line in a syslog message: its fields, or why it is not one (`not_json`, `not_our_format`, `bad_version`). */
export function parseNginxLine(message: string): NginxLogLine | Extract<LineVerdict, { kind: 'drop' }> {
  let value: unknown;
  try {
    value = JSON.parse(message);
  } catch {
    return { kind: 'drop', reason: 'not_json', detail: message };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return { kind: 'drop', reason: 'not_our_format', detail: message };
  const o = value as Record<string, unknown>;
  if (o.v !== NGINX_LOG_VERSION)
    return { kind: 'drop', reason: 'bad_version', detail: `v ${JSON.stringify(o.v) ?? 'missing'}` };
  for (const f of REQUIRED) if (!(f in o)) return { kind: 'drop', reason: 'not_our_format', detail: `no ${f}` };
  for (const f of FIELDS)
    if (f in o && typeof o[f] !== 'string')
      return { kind: 'drop', reason: 'not_our_format', detail: `${f} not a string` };
  const text = (f: (typeof FIELDS)[number]) => {
    const s = ((o[f] as string | undefined) ?? '').trim();
    return s === '-' ? '' : s;
  };
  return {
    circuit: text('circuit'),
    caller: text('caller'),
    status: text('status'),
    time: text('time'),
    retryAfter: text('retry_after'),
    msec: text('msec'),
  };
}

// `$upstream_status` and `$upstream_response_time`: attempts separated by `, `, internal
// redirects (another server group) by ` : `; an attempt nginx has no value for is `-`.
const ATTEMPTS = /\s*[,:]\s*/;
const STATUS = /^[1-5]\d\d$/;
const SECONDS = /^\d{1,9}(?:\.\d{1,9})?$/;
const MSEC = /^\d{1,12}(?:\.\d{1,9})?$/;

/**
 * The outcomes one log line reports (docs/gateways.md "nginx outcomes over syslog"): one per
 * upstream attempt in `$upstream_status`, each classified by `kindOfStatus` (the last attempt
 * with `$upstream_http_retry_after`, the only response nginx keeps headers of), with its
 * `$upstream_response_time` in ms, at `$msec`, for the line's caller. No upstream contacted
 * (`""` or `-`: the gate refused, nginx answered itself): none. An attempt nginx has no status
 * for (`-`): none for it.
 */
export function nginxOutcomes(message: string, now: number): LineVerdict {
  const line = parseNginxLine(message);
  if ('kind' in line) return line;
  if (line.circuit === '') return { kind: 'none', reason: 'no_circuit' };
  const nameProblem = circuitNameProblem(line.circuit);
  if (nameProblem !== null) return drop('bad_circuit', `circuit ${JSON.stringify(line.circuit)} ${nameProblem}`);
  if (line.caller !== '') {
    const problem = callerProblem(line.caller);
    if (problem !== null) return drop('bad_caller', `caller ${JSON.stringify(line.caller)} ${problem}`);
  }
  if (line.status === '') return { kind: 'none', reason: 'no_upstream' };
  const statuses = line.status.split(ATTEMPTS);
  if (statuses.length > MAX_ATTEMPTS_PER_LINE)
    return drop('bad_status', `${statuses.length} attempts, more than ${MAX_ATTEMPTS_PER_LINE}`);
  const times = line.time === '' ? [] : line.time.split(ATTEMPTS);
  if (times.length !== 0 && times.length !== statuses.length)
    return drop('bad_time', `time ${JSON.stringify(line.time)} does not match status ${JSON.stringify(line.status)}`);
  const at = atOf(line.msec, now);
  if (typeof at !== 'string') return at;
  const items: OutcomeItem[] = [];
  for (const [i, s] of statuses.entries()) {
    if (s === '-') continue;
    if (!STATUS.test(s)) return drop('bad_status', `status ${JSON.stringify(line.status)}`);
    const duration = durationMs(times[i]);
    if (duration === false) return drop('bad_time', `time ${JSON.stringify(line.time)}`);
    const last = i === statuses.length - 1;
    items.push(
      outcome(line, Number(s), last ? line.retryAfter : '', now, {
        ...(duration === null ? {} : { duration_ms: duration }),
        at,
        ...(line.caller === '' ? {} : { caller: line.caller }),
      }),
    );
  }
  if (items.length === 0) return { kind: 'none', reason: 'no_upstream' };
  return { kind: 'outcomes', circuit: line.circuit, items };
}

/** `$msec` (epoch seconds with ms) as RFC 3339; now when empty; a drop when malformed or too far ahead. */
function atOf(msec: string, now: number): string | Extract<LineVerdict, { kind: 'drop' }> {
  if (msec === '') return new Date(now).toISOString();
  if (!MSEC.test(msec)) return { kind: 'drop', reason: 'bad_time', detail: `msec ${JSON.stringify(msec)}` };
  const ms = Math.round(Number(msec) * 1000);
  if (ms - now > MAX_AHEAD_MS)
    return { kind: 'drop', reason: 'bad_time', detail: `msec ${msec} is more than ${MAX_AHEAD_MS / 1000} s ahead` };
  return new Date(ms).toISOString();
}

/** One attempt's `$upstream_response_time` in ms; null when nginx has none (`-`, absent); false when malformed. */
function durationMs(seconds: string | undefined): number | null | false {
  if (seconds === undefined || seconds === '-') return null;
  if (!SECONDS.test(seconds)) return false;
  const ms = Math.round(Number(seconds) * 1000);
  return ms > MAX_DURATION_MS ? false : ms;
}

type Detail = Pick<OutcomeItem, 'duration_ms' | 'at' | 'caller'>;

/** The wire form `POST /outcomes` takes: `success` for a plain success or failure, else the `kind`. */
function outcome(line: NginxLogLine, status: number, retryAfter: string, now: number, detail: Detail): OutcomeItem {
  const c = kindOfStatus(status, retryAfter === '' ? null : retryAfter, now);
  if (c.kind === 'success' || c.kind === 'failure')
    return { circuit: line.circuit, success: c.kind === 'success', ...detail };
  return {
    circuit: line.circuit,
    kind: c.kind,
    ...(c.retryAfterSeconds == null
      ? {}
      : { retry_after_seconds: Math.min(c.retryAfterSeconds, MAX_RETRY_AFTER_SECONDS) }),
    ...detail,
  };
}
