import { SHARD_TAGS, shardOf } from './shards.js';

/** One shard's keys: all in one Cluster slot (the shard's hash tag comes first after the prefix). */
export class ShardKeys {
  readonly ids: string;
  readonly version: string;
  readonly index: string;
  readonly seq: string;
  readonly transitions: string;
  readonly epoch: string;
  readonly due: string;
  /** The shard's `changes` channel on a Cluster (SPUBLISH; a Cluster has database 0 only), in the shard's slot. */
  readonly changes: string;
  private readonly base: string;

  constructor(
    prefix: string,
    readonly shard: number,
  ) {
    this.base = `${prefix}{${SHARD_TAGS[shard]}}:`;
    this.ids = `${this.base}ids`;
    this.version = `${this.base}version`;
    this.index = `${this.base}index`;
    this.seq = `${this.base}seq`;
    this.transitions = `${this.base}transitions`;
    this.epoch = `${this.base}epoch`;
    this.due = `${this.base}due`;
    this.changes = `${this.base}changes:0`;
  }

  /** The circuit's hash (`v` version, `id`, `c` the circuit as JSON). */
  circuit(name: string): string {
    return `${this.base}c:${name}`;
  }

  /** The circuit's newest transitions. */
  events(name: string): string {
    return `${this.base}e:${name}`;
  }

  /** The circuit's caller table (`caller-hash.ts`): caller -> `<order>:<entry>`. */
  callers(name: string): string {
    return `${this.base}k:${name}`;
  }

  /** The circuit's outcome history (issue 31): a capped stream, entries `t` and `e` (`history-stream.ts`). */
  history(name: string): string {
    return `${this.base}h:${name}`;
  }
}

/** The store's key names under its prefix (the layout is described in `scripts.ts` and `shards.ts`). */
export class RedisKeys {
  readonly shards: readonly ShardKeys[];

  constructor(readonly prefix: string) {
    if (/[{}]/.test(prefix))
      throw new Error(`the Redis key prefix '${prefix}' must not contain { or } (hash tags name the shards)`);
    this.shards = SHARD_TAGS.map((_, i) => new ShardKeys(prefix, i));
  }

  /** The keys of the shard a circuit belongs to. */
  of(name: string): ShardKeys {
    return this.shards[shardOf(name)]!;
  }

  circuit(name: string): string {
    return this.of(name).circuit(name);
  }

  events(name: string): string {
    return this.of(name).events(name);
  }

  callers(name: string): string {
    return this.of(name).callers(name);
  }

  history(name: string): string {
    return this.of(name).history(name);
  }
}
