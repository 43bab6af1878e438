import type { AppError } from '../domain/errors.js';
import {
  flatGet,
  mayShareAnswer,
  mayShareRequest,
  primaryKey,
  varyMatches,
  varyNames,
  varyValues,
} from './cache-rules.js';
import type { FlatHeaders, HeaderRecord } from './upstream-client.js';

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
  /** Request fields that carry credentials (Authorization, Cookie, the configured API-key fields). */
  readonly credentials: readonly string[];
}

interface Waiter {
  readonly resolve: (result: FlightResult) => void;
  readonly headers: HeaderRecord;
}

/**
 * One upstream call that identical concurrent requests wait on. The leader feeds it (`head`,
 * `chunk`, `end`, or `fail`/`release`); it settles once, and leaves the table as it settles,
 * so a request that comes later starts a call of its own. An answer goes only to followers
 * whose values of the fields its `Vary` names equal the leader's (RFC 9111 section 4.1);
 * the others make their own calls.
 */
export class Flight {
  private readonly waiters: Waiter[] = [];
  private status = 0;
  private headers: FlatHeaders = [];
  private chunks: Buffer[] = [];
  private bytes = 0;
  settled = false;

  constructor(
    private readonly table: Coalescer,
    readonly key: string,
    /** The leader's request fields: the Vary'd values a follower must match. */
    private readonly leaderHeaders: HeaderRecord,
  ) {}

  get followers(): number {
    return this.waiters.length;
  }

  /** A follower's place: resolves with the leader's result, or null when the flight is full. */
  join(headers: HeaderRecord): Promise<FlightResult> | null {
    if (this.waiters.length >= this.table.limits.maxWaiters) return null;
    return new Promise((resolve) => this.waiters.push({ resolve, headers }));
  }

  /**
   * The leader's head; false (followers released) when the answer may not be shared (Set-Cookie,
   * `private`, `no-store`, `no-cache`, `Vary: *`, a 206 or 304) or its declared length is over the limit.
   */
  head(status: number, headers: FlatHeaders, contentLength: number): boolean {
    if (contentLength > this.table.limits.maxBodyBytes || !mayShareAnswer(status, (name) => flatGet(headers, name))) {
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
    this.settle({
      kind: 'answer',
      status: this.status,
      headers: this.headers,
      body: Buffer.concat(this.chunks, this.bytes),
    });
  }

  /** The leader's request ended in a problem document: every follower gets the same. */
  fail(error: AppError): void {
    this.settle({ kind: 'problem', error });
  }

  /** The followers make their own calls (body too large, the leader's body broke, not shareable). */
  release(): void {
    this.settle({ kind: 'alone' });
  }

  /** Settle with a complete answer known at once (a fallback). */
  answer(status: number, headers: FlatHeaders, body: Buffer): void {
    if (!mayShareAnswer(status, (name) => flatGet(headers, name))) {
      this.release();
      return;
    }
    this.settle({ kind: 'answer', status, headers, body });
  }

  private settle(result: FlightResult): void {
    if (this.settled) return;
    this.settled = true;
    this.chunks = [];
    this.table.forget(this);
    const vary = result.kind === 'answer' ? varyNames(flatGet(result.headers, 'vary')) : [];
    const leader = vary === '*' || vary.length === 0 ? [] : varyValues(this.leaderHeaders, vary);
    for (const { resolve, headers } of this.waiters) {
      resolve(vary !== '*' && (vary.length === 0 || varyMatches(headers, vary, leader)) ? result : ALONE);
    }
    this.waiters.length = 0;
  }
}

const ALONE: FlightResult = { kind: 'alone' };

/**
 * Request coalescing for one upstream (issue 12, rules of issue 15): concurrent reads that a
 * shared cache could answer from one answer share one call (`mayShareRequest`), keyed on
 * method, Host, path and query, `Accept` and `Accept-Encoding` (the fields answers most
 * often vary on, so such requests need not wait only to be sent away), then on every field
 * the answer's `Vary` names.
 */
export class Coalescer {
  private readonly flights = new Map<string, Flight>();

  constructor(readonly limits: CoalesceLimits) {}

  /** The key for a request that may share a call, or null when it must call alone. */
  keyOf(method: string, path: string, headers: HeaderRecord): string | null {
    if (!mayShareRequest(method, headers, this.limits.credentials)) return null;
    return `${method} ${primaryKey(headers, path)}\n${String(headers.accept ?? '')}\n${String(headers['accept-encoding'] ?? '')}`;
  }

  /** The flight in progress for `key`, if any. */
  find(key: string): Flight | undefined {
    return this.flights.get(key);
  }

  /** Start a flight; the caller (with these request fields) is its leader. */
  start(key: string, headers: HeaderRecord): Flight {
    const flight = new Flight(this, key, headers);
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
