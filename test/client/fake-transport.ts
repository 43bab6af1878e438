/** A scriptable Transport for the client's unit tests: no sockets, every request recorded. */

import {
  TransportError,
  type AllowedAnswer,
  type OpenStream,
  type OutcomeItem,
  type Transport,
  type TransitionEvent,
} from '../../src/client/transport.js';

interface LiveStream {
  readonly lastEventId: string | undefined;
  emit(event: Omit<TransitionEvent, 'id'> & { id?: string }): void;
  drop(): void;
}

export class FakeTransport implements Transport {
  /** Answer of `GET /allowed` per circuit (default: allowed, closed, unknown circuit). */
  answers = new Map<string, AllowedAnswer | (() => AllowedAnswer)>();
  allowedCalls: string[] = [];
  batches: OutcomeItem[][] = [];
  streamOpens: (string | undefined)[] = [];
  /** When true, every request fails as if circuitlog were down. */
  down = false;
  /** When set, `postOutcomes` waits for it before answering. */
  holdPosts: Promise<void> | null = null;
  /** When set, `postOutcomes` fails with it. */
  postError: TransportError | null = null;
  stream: LiveStream | null = null;
  private nextId = 1;
  closed = false;

  get outcomes(): OutcomeItem[] {
    return this.batches.flat();
  }

  async allowed(name: string): Promise<AllowedAnswer> {
    this.allowedCalls.push(name);
    if (this.down) throw new TransportError('unreachable', 'down');
    const answer = this.answers.get(name);
    if (answer === undefined) return { allowed: true, state: 'closed', circuit: null };
    return typeof answer === 'function' ? answer() : answer;
  }

  /** Circuits `GET /circuits/:name` knows. */
  circuits = new Map<string, Record<string, unknown>>();
  circuitCalls: string[] = [];

  async circuit(name: string): Promise<Record<string, unknown> | null> {
    this.circuitCalls.push(name);
    if (this.down) throw new TransportError('unreachable', 'down');
    return this.circuits.get(name) ?? null;
  }

  async postOutcomes(outcomes: readonly OutcomeItem[]): Promise<void> {
    if (this.holdPosts) await this.holdPosts;
    if (this.down) throw new TransportError('unreachable', 'down');
    if (this.postError) throw this.postError;
    this.batches.push([...outcomes]);
  }

  async openStream(lastEventId: string | undefined, onEvent: (event: TransitionEvent) => void): Promise<OpenStream> {
    this.streamOpens.push(lastEventId);
    if (this.down) throw new TransportError('unreachable', 'down');
    let end!: () => void;
    const ended = new Promise<void>((resolve) => (end = resolve));
    const live: LiveStream = {
      lastEventId,
      emit: (event) => onEvent({ id: String(this.nextId++), ...event } as TransitionEvent),
      drop: () => end(),
    };
    this.stream = live;
    void ended.then(() => {
      if (this.stream === live) this.stream = null;
    });
    return { ended, close: end };
  }

  /** Take circuitlog down: the stream drops and every request fails until `up()`. */
  goDown(): void {
    this.down = true;
    this.stream?.drop();
  }

  up(): void {
    this.down = false;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stream?.drop();
  }
}

export const open = (retryAt: number, forced = false): AllowedAnswer => ({
  allowed: false,
  state: 'open',
  retryAt,
  retryAfterMs: Math.max(1_000, retryAt - Date.now()),
  forced,
});
