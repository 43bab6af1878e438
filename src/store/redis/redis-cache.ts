import type { Circuit } from '../../domain/circuit.js';
import { ALL_SHARDS, shardOf } from './shards.js';

/** A circuit as some version of the store held it; `circuit` null: absent at that version. */
export interface Versioned {
  readonly version: number;
  readonly circuit: Circuit | null;
  /** The stored `v` as read, when the hash is there but unusable (corrupt): a write replaces it. */
  readonly corruptVersion?: string;
  /**
   * The caller table must be written whole at the next write (`caller-hash.ts`): it was read from
   * the circuit's JSON (stored before the table had a hash of its own), or the hash held a bad entry.
   */
  readonly rewriteCallers?: true;
}

const MAX_ENTRIES = 10_000; // bounds memory against lookups of many distinct names

/**
 * This host's copy of the circuits it uses, kept current by the `changes` messages every
 * write publishes. Versions come from each shard's counter in Redis (a circuit never changes
 * shard), so "newer" is well defined: a read that raced a published change can never put an
 * older copy back. The copy of a shard's circuits is trusted only while that shard's
 * subscription runs: a subscriber that lost its connection (or, on a Cluster, the shard's
 * subscription alone) may have missed messages, so `distrust` empties the shard's part until
 * its subscription is back. Entries are only ever held for trusted shards, so `get` needs no
 * check (and no hash of the name) on the hot path.
 */
export class CircuitCache {
  private readonly entries = new Map<string, Versioned>();
  /** Names being read from Redis: a message for them is kept even though no entry exists yet. */
  private readonly reading = new Map<string, number>();
  /** Names forgotten while being read: the version a read must reach to be kept (`forget`). */
  private readonly floors = new Map<string, number>();
  /** Shards whose subscription is not (yet, or no longer) confirmed; all of them until the first. */
  private readonly untrusted = new Set<number>(ALL_SHARDS);
  private epoch = 0;
  private highest = 0;

  /** The highest version seen (reads, writes, messages): the floor after a store reset. */
  get highestVersion(): number {
    return this.highest;
  }

  /** Whether entries may answer reads for every shard (every subscription is live). */
  get trusted(): boolean {
    return this.untrusted.size === 0;
  }

  /** The current epoch; a read started in one epoch may fill the cache only in the same one (any shard's change of trust ends it). */
  get currentEpoch(): number {
    return this.epoch;
  }

  /** The subscription of these shards (default: all) is (again) live: start them over, empty and trusted. */
  trust(shards: readonly number[] = ALL_SHARDS): void {
    this.drop(shards);
    for (const shard of shards) this.untrusted.delete(shard);
    this.epoch++;
  }

  /** The subscription of these shards (default: all) is down: messages may be missed from now on. */
  distrust(shards: readonly number[] = ALL_SHARDS): void {
    this.drop(shards);
    for (const shard of shards) this.untrusted.add(shard);
    this.epoch++;
  }

  private drop(shards: readonly number[]): void {
    if (shards.length === ALL_SHARDS.length) {
      this.entries.clear();
      return;
    }
    const set = new Set(shards);
    for (const name of this.entries.keys()) if (set.has(shardOf(name))) this.entries.delete(name);
  }

  /** The store was emptied: drop every entry (reads in flight are void), trusted or not as before. */
  reset(): void {
    this.entries.clear();
    this.epoch++;
  }

  get(name: string): Versioned | undefined {
    return this.entries.get(name);
  }

  /** Keep `value` unless a newer version is held; returns what is held afterwards. */
  offer(name: string, value: Versioned, epoch = this.epoch): Versioned {
    if (value.version > this.highest) this.highest = value.version;
    if (epoch !== this.epoch || (this.untrusted.size > 0 && this.untrusted.has(shardOf(name)))) return value;
    const floor = this.floors.get(name);
    if (floor !== undefined && value.version < floor) return value;
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

  /**
   * A change at `version` this host cannot follow (a caller delta made from a state it does not
   * hold): the entry goes, and a read under way keeps its answer only if it is that new.
   */
  forget(name: string, version: number): void {
    if (version > this.highest) this.highest = version;
    this.entries.delete(name);
    if (this.reading.has(name)) this.floors.set(name, Math.max(version, this.floors.get(name) ?? 0));
  }

  startRead(name: string): void {
    this.reading.set(name, (this.reading.get(name) ?? 0) + 1);
  }

  endRead(name: string): void {
    const left = this.reading.get(name)! - 1;
    if (left === 0) {
      this.reading.delete(name);
      this.floors.delete(name);
    } else this.reading.set(name, left);
  }
}
