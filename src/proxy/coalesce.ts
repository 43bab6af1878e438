import type { AppError } from '../domain/errors.js';
import type { FlatHeaders, HeaderRecord } from './forward-headers.js';

/** What the followers of a flight get: the leader's answer, its problem, or "call yourself". */
export type FlightResult =
  | { readonly kind: 'answer'; readonly status: number; readonly headers: FlatHeaders; readonly body: Buffer }
  | { readonly kind: 'problem'; readonly error: AppError }
  | { readonly kind: 'alone' };

export interface CoalesceLimits {
  /** Followers one flight takes; later identical requests make their own calls. */
  readonly maxWaiters: number;
  /** A leader's body over this is streamed to the leader only; the followers call themselves. */
  readonly maxBodyBytes: number;
}

/**
 * One upstream call that identical concurrent requests wait on. The leader feeds it (`head`,
 * `chunk`, `end`, or `fail`/`release`); it settles once, and leaves the table as it settles,
 * so a request that comes later starts a call of its own.
 */
export class Flight {
  private readonly waiters: ((result: FlightResult) => void)[] = [];
  private status = 0;
  private headers: FlatHeaders = [];
  private chunks: Buffer[] = [];
  private bytes = 0;
  settled = false;

  constructor(
    private readonly table: Coalescer,
    readonly key: string,
  ) {}

  get followers(): number {
    return this.waiters.length;
  }

  /** A follower's place: resolves with the leader's result, or null when the flight is full. */
  join(): Promise<FlightResult> | null {
    if (this.waiters.length >= this.table.limits.maxWaiters) return null;
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** The leader's head; false when its declared length is already over the limit (followers released). */
  head(status: number, headers: FlatHeaders, contentLength: number): boolean {
    if (contentLength > this.table.limits.maxBodyBytes) {
      this.release();
      return false;
    }
    this.status = status;
    this.headers = headers;
    return true;
  }

  chunk(chunk: Buffer): void {
    if (this.settled) return;
    this.bytes += chunk.length;
    if (this.bytes > this.table.limits.maxBodyBytes) this.release();
    else this.chunks.push(chunk);
  }

  end(): void {
    this.settle({ kind: 'answer', status: this.status, headers: this.headers, body: Buffer.concat(this.chunks, this.bytes) });
  }

  /** The leader's request ended in a problem document: every follower gets the same. */
  fail(error: AppError): void {
    this.settle({ kind: 'problem', error });
  }

  /** The followers make their own calls (body too large, or the leader's body broke). */
  release(): void {
    this.settle({ kind: 'alone' });
  }

  /** Settle with a complete answer known at once (a fallback). */
  answer(status: number, headers: FlatHeaders, body: Buffer): void {
    this.settle({ kind: 'answer', status, headers, body });
  }

  private settle(result: FlightResult): void {
    if (this.settled) return;
    this.settled = true;
    this.chunks = [];
    this.table.forget(this);
    for (const resolve of this.waiters) resolve(result);
    this.waiters.length = 0;
  }
}

/**
 * Request coalescing for one upstream (issue 12): concurrent identical reads share one call.
 * Only GET and HEAD without credentials or `Cache-Control: no-cache` may share, keyed on
 * method, path and query, `Accept` and `Accept-Encoding`: the fields an answer may vary on
 * that an anonymous cacheable read carries.
 */
export class Coalescer {
  private readonly flights = new Map<string, Flight>();

  constructor(readonly limits: CoalesceLimits) {}

  /** The key for a request that may share a call, or null when it must call alone. */
  static keyOf(method: string, path: string, headers: HeaderRecord): string | null {
    if (method !== 'GET' && method !== 'HEAD') return null;
    if (headers.authorization !== undefined || headers.cookie !== undefined) return null;
    const cacheControl = headers['cache-control'];
    if (cacheControl !== undefined && /no-cache/i.test(String(cacheControl))) return null;
    return `${method} ${path}\n${String(headers.accept ?? '')}\n${String(headers['accept-encoding'] ?? '')}`;
  }

  /** The flight in progress for `key`, if any. */
  find(key: string): Flight | undefined {
    return this.flights.get(key);
  }

  /** Start a flight; the caller is its leader. */
  start(key: string): Flight {
    const flight = new Flight(this, key);
    this.flights.set(key, flight);
    return flight;
  }

  forget(flight: Flight): void {
    if (this.flights.get(flight.key) === flight) this.flights.delete(flight.key);
  }

  get size(): number {
    return this.flights.size;
  }
}
