import type { ShardedChanges, Subscriber } from './change-subscription.js';
import type { RedisCommands } from './redis-commands.js';
import type { RedisKeys } from './redis-keys.js';
import { isSharded, type ShardChannels } from './shard-watch.js';

/** The command and channel a shard's writes publish with: the scripts' first two ARGV (scripts.ts). */
export type PublishTarget = (shard: number) => readonly [string, string];

/**
 * Where writes publish and what the subscription listens to. On one Redis and on Sentinel:
 * `PUBLISH` on the one channel `changes:<db>` (what hosts of every version before listen to, so
 * a rolling upgrade keeps working, and Redis 6 has no SPUBLISH). On a Cluster: `SPUBLISH` on
 * each shard's own channel `{<tag>}:changes:0`, in the shard's slot, so only the shard's primary
 * (and its replicas) handle its writes' messages, where a plain PUBLISH goes over the cluster
 * bus to every node (docs/many-hosts.md, "The changes channel").
 */
export function publishTargets(
  keys: RedisKeys,
  channel: string,
  redis: RedisCommands,
  subscriber: Subscriber | ShardChannels,
): { publish: PublishTarget; listen: Subscriber | ShardedChanges } {
  if (!isSharded(subscriber)) {
    const target = ['PUBLISH', channel] as const;
    return { publish: () => target, listen: subscriber };
  }
  const names = keys.shards.map((k) => k.changes);
  const targets = names.map((name) => ['SPUBLISH', name] as const);
  const counter = (shard: number) =>
    redis.command<string | null>(['GET', keys.shards[shard]!.version], 'read').then((v) => Number(v ?? 0));
  return { publish: (shard) => targets[shard]!, listen: { channels: subscriber, names, counter } };
}
