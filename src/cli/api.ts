import { CliError, EXIT, usageError } from './exit-codes.js';

/** Where the server is and how to reach it. */
export interface ApiTarget {
  /** Base URL, no trailing slash: `http://127.0.0.1:8080`. */
  readonly url: string;
  readonly token: string | undefined;
  /** Per request, until the answer's headers (a backup's body may take longer). */
  readonly timeoutMs: number;
}

/** An answer the command goes on with (2xx, or a status the caller asked to see). */
export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly response: Response;
}

/** A checked base URL: http or https, no query or fragment. */
export function parseBaseUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw usageError(`--url: '${raw}' is not a URL (http://127.0.0.1:8080)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw usageError(`--url: '${raw}' must start with http:// or https://`);
  if (url.search !== '' || url.hash !== '') throw usageError(`--url: '${raw}' must have no query or fragment`);
  return url.href.replace(/\/+$/, '');
}

/** `/circuits/<name>` with the name percent-encoded (a `/` in it becomes `%2F`, docs/api.md). */
export const circuitPath = (name: string, suffix = ''): string => `/circuits/${encodeURIComponent(name)}${suffix}`;

/**
 * Send one request. A 2xx (or a status in `pass`) resolves; any other status throws a
 * CliError with the problem's detail (exit 1); no answer at all throws exit 3.
 */
export async function send(
  target: ApiTarget,
  method: string,
  path: string,
  options: { body?: unknown; contentType?: string; pass?: readonly number[] } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { accept: 'application/json, application/problem+json' };
  if (target.token) headers.authorization = `Bearer ${target.token}`;
  let body: string | undefined;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] = options.contentType ?? 'application/json';
  }
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), target.timeoutMs);
  let response: Response;
  try {
    response = await fetch(`${target.url}${path}`, { method, headers, body, signal: abort.signal });
  } catch (error) {
    throw unreachable(target, error, abort.signal.aborted);
  } finally {
    clearTimeout(timer);
  }
  if ((response.status >= 200 && response.status < 300) || options.pass?.includes(response.status))
    return { status: response.status, headers: response.headers, response };
  throw await answerError(response, method, path);
}

const MAX_JSON_BYTES = 16 * 1024 * 1024; // 16 MiB: a page of 500 circuits is well under 1 MiB

/** The answer's JSON body; a body that is not JSON (or over 16 MiB) is the server's fault, said so. */
export async function jsonOf<T>(answer: Answer): Promise<T> {
  const text = await cappedText(answer.response, MAX_JSON_BYTES);
  if (text === null) throw new CliError(EXIT.FAILED, `the server's answer is over ${MAX_JSON_BYTES} bytes`);
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new CliError(EXIT.FAILED, `the server's answer is not JSON (status ${answer.status})`);
  }
}

function unreachable(target: ApiTarget, error: unknown, timedOut: boolean): CliError {
  if (timedOut)
    return new CliError(EXIT.UNREACHABLE, `no answer from ${target.url} within ${target.timeoutMs} ms (--timeout)`);
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  const why = cause?.code ?? cause?.message ?? (error as Error).message;
  return new CliError(
    EXIT.UNREACHABLE,
    `cannot reach circuitlog at ${target.url} (${why}); is it running? (--url or CIRCUITLOG_URL)`,
  );
}

const MAX_PROBLEM_BYTES = 64 * 1024; // 64 KiB: a problem body is a few hundred bytes

/** One line from an error answer: `404 circuit-not-found: Circuit 'x' ...`, plus a hint for 401/403. */
async function answerError(response: Response, method: string, path: string): Promise<CliError> {
  const text = (await cappedText(response, MAX_PROBLEM_BYTES)) ?? '';
  let problem: { type?: unknown; detail?: unknown; title?: unknown; errors?: unknown } = {};
  try {
    problem = JSON.parse(text) as typeof problem;
  } catch {
    // not a problem body (a proxy in front, an old server): status alone
  }
  const kind = typeof problem.type === 'string' ? ` ${problem.type.replace(/^.*\//, '')}` : '';
  const detail =
    typeof problem.detail === 'string' ? problem.detail : typeof problem.title === 'string' ? problem.title : '';
  const hint = response.status === 401 ? ' (pass --token or set CIRCUITLOG_TOKEN)' : '';
  const fields = Array.isArray(problem.errors)
    ? problem.errors
        .filter((e): e is { field: string; message: string } => typeof e?.field === 'string')
        .map((e) => `${e.field}: ${e.message}`)
    : [];
  const said = `${detail ? `: ${detail}` : ''}${fields.length > 0 ? ` (${fields.join('; ')})` : ''}`;
  return new CliError(EXIT.FAILED, `${method} ${path} answered ${response.status}${kind}${said}${hint}`);
}

/** The body as text, or null once it passes `maxBytes` (the rest is not read). */
export async function cappedText(response: Response, maxBytes: number): Promise<string | null> {
  if (response.body === null) return '';
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  for await (const chunk of response.body) {
    bytes += chunk.byteLength;
    if (bytes > maxBytes) {
      await response.body.cancel().catch(() => {});
      return null;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
