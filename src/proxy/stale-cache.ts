/** A body being copied into the cache: every chunk, then `end` once the body is complete. */
export interface StaleCapture {
  chunk(chunk: Buffer): void;
  end(): void;
}

/** A successful GET answer kept for the stale fallback. */
export interface StaleEntry {
  readonly status: number;
  readonly headers: Record<string, string | string[]>;
  readonly body: Buffer;
  readonly storedAt: number;
}

export interface StaleCacheLimits {
  readonly maxAgeMs: number;
  /** Answers larger than this are not kept. */
  readonly maxEntryBytes: number;
  /** All kept bodies together; the least recently stored go first. */
  readonly maxTotalBytes: number;
}

/**
 * A `Vary` on anything but Accept-Encoding means the answer depends on request fields the
 * key (path and query) does not hold, so a kept copy could reach the wrong caller
 * (RFC 9111 section 4.1). `Vary: *` never matches.
 */
function varyForbids(value: string | string[] | undefined): boolean {
  if (value === undefined) return false;
  const names = (Array.isArray(value) ? value.join(',') : value).split(',').map((n) => n.trim().toLowerCase());
  return names.some((n) => n !== '' && n !== 'accept-encoding');
}

function cacheControlForbids(value: string | string[] | undefined): boolean {
  const text = Array.isArray(value) ? value.join(',') : value;
  return text !== undefined && /\b(no-store|private)\b/i.test(text);
}

/**
 * Last good GET answer per path of one upstream, bounded by entry size, total bytes and
 * age. Per-user answers (request with Authorization or Cookie, response with Set-Cookie,
 * `Cache-Control: private|no-store`, or a `Vary` beyond Accept-Encoding) are never kept,
 * so one caller never sees another's data.
 */
export class StaleCache {
  private readonly entries = new Map<string, StaleEntry>();
  private totalBytes = 0;

  constructor(private readonly limits: StaleCacheLimits) {}

  /** Whether an answer to this request may be kept at all. */
  static mayStore(requestHeaders: Record<string, string | string[] | undefined>, status: number, responseHeaders: Record<string, string | string[] | undefined>): boolean {
    if (status !== 200) return false;
    if (requestHeaders.authorization !== undefined || requestHeaders.cookie !== undefined) return false;
    if (responseHeaders['set-cookie'] !== undefined || varyForbids(responseHeaders.vary)) return false;
    return !cacheControlForbids(responseHeaders['cache-control']) && !cacheControlForbids(requestHeaders['cache-control']);
  }

  /** Keep a copy of a body as it streams past (fed by the caller), if it ends within the size limit. */
  capture(key: string, status: number, headers: Record<string, string | string[]>, now: () => number): StaleCapture | null {
    const declared = Number(headers['content-length'] ?? 0);
    if (declared > this.limits.maxEntryBytes) return null;
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
        if (chunks !== null) this.store(key, { status, headers, body: Buffer.concat(chunks, size), storedAt: now() });
      },
    };
  }

  /** The kept answer if younger than the limit. */
  get(key: string, now: number): StaleEntry | null {
    const entry = this.entries.get(key);
    if (entry === undefined) return null;
    if (now - entry.storedAt > this.limits.maxAgeMs) {
      this.remove(key, entry);
      return null;
    }
    return entry;
  }

  get size(): number {
    return this.entries.size;
  }

  get bytes(): number {
    return this.totalBytes;
  }

  private store(key: string, entry: StaleEntry): void {
    const old = this.entries.get(key);
    if (old !== undefined) this.remove(key, old);
    this.entries.set(key, entry);
    this.totalBytes += entry.body.length;
    // Map iteration is insertion order, so the first keys are the oldest.
    for (const [k, e] of this.entries) {
      if (this.totalBytes <= this.limits.maxTotalBytes) break;
      this.remove(k, e);
    }
  }

  private remove(key: string, entry: StaleEntry): void {
    this.entries.delete(key);
    this.totalBytes -= entry.body.length;
  }
}
