import type { Circuit } from '../../domain/circuit.js';

/** A circuit as some version of the store held it; `circuit` null: absent at that version. */
export interface Versioned {
  readonly version: number;
  readonly circuit: Circuit | null;
  /** The stored `v` as read, when the hash is there but unusable (corrupt): a write replaces it. */
  readonly corruptVersion?: string;
}

const MAX_ENTRIES = 10_000; // bounds memory against lookups of many distinct names

/**
 * This host's copy of the circuits it uses, kept current by the `changes` messages every
 * write publishes. Versions come from one counter in Redis, so "newer" is well defined: a
 * read that raced a published change can never put an older copy back. The copy is
 * trusted only while the subscription runs: a subscriber that lost its connection may
 * have missed messages, so `distrust` empties it until the subscription is back.
 */
export class CircuitCache {
  private readonly entries = new Map<string, Versioned>();
  /** Names being read from Redis: a message for them is kept even though no entry exists yet. */
  private readonly reading = new Map<string, number>();
  private trustedSince = -1;
  private epoch = 0;
  private highest = 0;

  /** The highest version seen (reads, writes, messages): the floor after a store reset. */
  get highestVersion(): number {
    return this.highest;
  }

  /** Whether entries may answer reads (the subscription is live). */
  get trusted(): boolean {
    return this.trustedSince === this.epoch;
  }

  /** The current epoch; a read started in one epoch may fill the cache only in the same one. */
  get currentEpoch(): number {
    return this.epoch;
  }

  /** The subscription is (again) live: start over from an empty, trusted cache. */
  trust(): void {
    this.entries.clear();
    this.epoch++;
    this.trustedSince = this.epoch;
  }

  /** The subscription is down: messages may be missed from now on. */
  distrust(): void {
    this.entries.clear();
    this.epoch++;
  }

  /** The store was emptied: drop every entry (reads in flight are void), trusted or not as before. */
  reset(): void {
    const trusted = this.trusted;
    this.entries.clear();
    this.epoch++;
    if (trusted) this.trustedSince = this.epoch;
  }

  get(name: string): Versioned | undefined {
    return this.trusted ? this.entries.get(name) : undefined;
  }

  /** Keep `value` unless a newer version is held; returns what is held afterwards. */
  offer(name: string, value: Versioned, epoch = this.epoch): Versioned {
    if (value.version > this.highest) this.highest = value.version;
    if (epoch !== this.epoch || !this.trusted) return value;
    const held = this.entries.get(name);
    if (held !== undefined && held.version >= value.version) return held;
    if (held === undefined && this.entries.size >= MAX_ENTRIES) this.entries.clear();
    this.entries.set(name, value);
    return value;
  }

  /** A published change: applied to names this host holds or is reading. */
  onMessage(name: string, value: Versioned): void {
    if (value.version > this.highest) this.highest = value.version;
    if (this.entries.has(name) || this.reading.has(name)) this.offer(name, value);
  }

  startRead(name: string): void {
    this.reading.set(name, (this.reading.get(name) ?? 0) + 1);
  }

  endRead(name: string): void {
    const left = this.reading.get(name)! - 1;
    if (left === 0) this.reading.delete(name);
    else this.reading.set(name, left);
  }
}
