import {
  acceptsCoding,
  directives,
  hasCredentials,
  mayShareAnswer,
  varyMatches,
  varyNames,
  varyValues,
} from './cache-rules.js';
import type { HeaderRecord } from './upstream-client.js';

/** A body being copied into the cache: every chunk, then `end` once the body is complete. */
export interface StaleCapture {
  chunk(chunk: Buffer): void;
  end(): void;
}

/** A successful GET answer kept for the stale fallback. */
export interface StaleEntry {
  readonly key: string;
  readonly status: number;
  readonly headers: Record<string, string | string[]>;
  readonly body: Buffer;
  readonly storedAt: number;
  /** The fields the answer's Vary names, and the storing request's values of them. */
  readonly vary: readonly string[];
  readonly varyValues: readonly string[];
  /** Until when (ms, exclusive) the answer is fresh; until when (inclusive) it may be served stale (RFC 9111 section 4.2.4). */
  readonly freshUntil: number;
  readonly staleUntil: number;
  /** What the entry holds in memory: body plus key and header text. */
  readonly bytes: number;
}

export interface StaleCacheLimits {
  readonly maxAgeMs: number;
  /** Answers larger than this are not kept. */
  readonly maxEntryBytes: number;
  /** All kept entries together; the least recently stored go first. */
  readonly maxTotalBytes: number;
  /** Request fields that carry credentials (Authorization, Cookie, the configured API-key fields). */
  readonly credentials: readonly string[];
}

/** Seconds of a delta-seconds directive argument, or null (RFC 9111 section 1.2.2). */
function seconds(value: string | undefined): number | null {
  return value !== undefined && /^\d+$/.test(value) ? Number(value) : null;
}

/**
 * How long a kept answer may be served: fresh for its `s-maxage`/`max-age` (less its `Age`
 * on arrival); stale after that only if nothing forbids it: `must-revalidate`,
 * `proxy-revalidate` and `s-maxage` do (RFC 9111 sections 4.2.4, 5.2.2), `stale-if-error=N`
 * allows N more seconds (RFC 5861 section 4); otherwise our own `stale_seconds` is the
 * out-of-band permission RFC 9111 section 4.2.4 names.
 */
function lifetime(
  headers: Record<string, string | string[]>,
  storedAt: number,
): { freshUntil: number; staleUntil: number } {
  const d = directives(headers['cache-control']);
  const age = seconds(String(headers.age ?? '')) ?? 0;
  const fresh = Math.max(0, (seconds(d.get('s-maxage')) ?? seconds(d.get('max-age')) ?? 0) - age);
  const freshUntil = storedAt + fresh * 1000;
  if (d.has('must-revalidate') || d.has('proxy-revalidate') || d.has('s-maxage'))
    return { freshUntil, staleUntil: -Infinity };
  const ifError = seconds(d.get('stale-if-error'));
  return { freshUntil, staleUntil: ifError === null ? Infinity : freshUntil + ifError * 1000 };
}

function headerBytes(headers: Record<string, string | string[]>): number {
  let n = 0;
  for (const name in headers) n += name.length + String(headers[name]).length;
  return n;
}

/**
 * Last good GET answers of one upstream, bounded by entry size, total bytes and age, under
 * the same key as coalescing (Host, path and query, then the fields the answer's `Vary`
 * names, one entry per variant) and the same sharing rules: answers to requests with
 * credentials and answers with Set-Cookie, `private`, `no-store`, `no-cache` or `Vary: *`
 * are never kept, so one caller never sees another's data (RFC 9111 sections 3, 4.1).
 */
export class StaleCache {
  private readonly entries = new Map<string, StaleEntry[]>();
  /** Every entry, oldest first (a Set keeps insertion order). */
  private readonly order = new Set<StaleEntry>();
  private totalBytes = 0;

  constructor(private readonly limits: StaleCacheLimits) {}

  /** Whether an answer to this request may be kept at all. */
  mayStore(requestHeaders: HeaderRecord, status: number, responseHeaders: HeaderRecord): boolean {
    if (status !== 200 || hasCredentials(requestHeaders, this.limits.credentials)) return false;
    const asked = directives(requestHeaders['cache-control']);
    if (asked.has('no-store')) return false; // RFC 9111 section 5.2.1.5
    return mayShareAnswer(status, (name) => responseHeaders[name]);
  }

  /** Keep a copy of a body as it streams past (fed by the caller), if it ends within the size limit. */
  capture(
    key: string,
    requestHeaders: HeaderRecord,
    status: number,
    headers: Record<string, string | string[]>,
    now: () => number,
  ): StaleCapture | null {
    const declared = Number(headers['content-length'] ?? 0);
    if (declared > this.limits.maxEntryBytes) return null;
    const names = varyNames(headers.vary);
    if (names === '*') return null;
    const values = varyValues(requestHeaders, names);
    let chunks: Buffer[] | null = [];
    let size = 0;
    return {
      chunk: (chunk) => {
        if (chunks === null) return;
        size += chunk.length;
        if (size > this.limits.maxEntryBytes) chunks = null;
        else chunks.push(chunk);
      },
      end: () => {
        if (chunks === null) return;
        const storedAt = now();
        const body = Buffer.concat(chunks, size);
        const bytes = body.length + key.length + headerBytes(headers) + values.join('').length;
        this.store({
          key,
          status,
          headers,
          body,
          storedAt,
          vary: names,
          varyValues: values,
          ...lifetime(headers, storedAt),
          bytes,
        });
      },
    };
  }

  /** The kept answer for this request if it may still be served: its variant, within every age limit, in a coding it accepts. */
  get(key: string, requestHeaders: HeaderRecord, now: number): StaleEntry | null {
    const variants = this.entries.get(key);
    if (variants === undefined) return null;
    for (const entry of [...variants]) {
      if (now - entry.storedAt > this.limits.maxAgeMs || (now >= entry.freshUntil && now > entry.staleUntil)) {
        this.remove(entry); // it can never be served again
        continue;
      }
      if (!varyMatches(requestHeaders, entry.vary, entry.varyValues)) continue;
      const coding = entry.headers['content-encoding'];
      if (coding !== undefined && !acceptsCoding(requestHeaders['accept-encoding'], String(coding))) continue;
      return entry;
    }
    return null;
  }

  get size(): number {
    return this.order.size;
  }

  get bytes(): number {
    return this.totalBytes;
  }

  private store(entry: StaleEntry): void {
    const variants = this.entries.get(entry.key) ?? [];
    const same = variants.find(
      (v) => v.vary.join() === entry.vary.join() && v.varyValues.join('\n') === entry.varyValues.join('\n'),
    );
    if (same !== undefined) this.remove(same);
    if (entry.bytes > this.limits.maxTotalBytes) return;
    const list = this.entries.get(entry.key) ?? [];
    list.push(entry);
    this.entries.set(entry.key, list);
    this.order.add(entry);
    this.totalBytes += entry.bytes;
    for (const oldest of this.order) {
      if (this.totalBytes <= this.limits.maxTotalBytes) break;
      this.remove(oldest);
    }
  }

  private remove(entry: StaleEntry): void {
    if (!this.order.delete(entry)) return;
    this.totalBytes -= entry.bytes;
    const list = this.entries.get(entry.key);
    if (list === undefined) return;
    const i = list.indexOf(entry);
    if (i !== -1) list.splice(i, 1);
    if (list.length === 0) this.entries.delete(entry.key);
  }
}
