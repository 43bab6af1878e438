/**
 * The store's shards. Every circuit belongs to one of `SHARDS` shards (by a hash of its name);
 * each shard is one Redis Cluster hash tag holding its circuits and its own counters, index,
 * `due` set, epoch and transition stream, so every write is one script on one slot. The same
 * layout serves plain Redis and Sentinel (one code path). See docs/many-hosts.md ("Key layout").
 */
export const SHARDS = 16;

/** The number of shards is part of the layout: changing it needs a migration (docs/many-hosts.md). */
const CLUSTER_SLOTS = 16_384;

/** CRC16/XMODEM, Redis Cluster's key-slot hash (https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/). */
export function crc16(text: string): number {
  let crc = 0;
  for (const byte of Buffer.from(text, 'utf8')) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

export const slotOf = (tag: string): number => crc16(tag) % CLUSTER_SLOTS;

/**
 * The hash tag of each shard, chosen so shard k's slot falls in the k-th sixteenth of the
 * slot range: a cluster whose primaries hold equal slot ranges (as `redis-cli --cluster create`
 * makes them) holds equal numbers of shards. Deterministic, so every host computes the same.
 */
export const SHARD_TAGS: readonly string[] = Array.from({ length: SHARDS }, (_, k) => {
  const [lo, hi] = [Math.ceil((k * CLUSTER_SLOTS) / SHARDS), Math.ceil(((k + 1) * CLUSTER_SLOTS) / SHARDS)];
  for (let j = 0; ; j++) {
    const tag = `s${k}.${j}`;
    const slot = slotOf(tag);
    if (slot >= lo && slot < hi) return tag;
  }
});

/**
 * The shard of a circuit: FNV-1a of the UTF-8 bytes of its name up to its last `/` (the whole
 * name when it has none). Siblings share a shard, as Redis Cluster's hash tags let keys share a
 * slot: an upstream's node circuits (`<upstream>/<node>`) are written in one atomic script, which
 * the proxy's ejection cap needs (a trip reads its peers in the same write).
 */
export function shardOf(name: string): number {
  const slash = name.lastIndexOf('/');
  const key = slash === -1 ? name : name.slice(0, slash);
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    const code = key.charCodeAt(i);
    if (code >= 0x80) return fnvBytes(key) % SHARDS; // not ASCII: hash its UTF-8 bytes
    hash = Math.imul(hash ^ code, 0x01000193) >>> 0; // an ASCII character is its own UTF-8 byte
  }
  return hash % SHARDS;
}

function fnvBytes(key: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(key, 'utf8')) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash;
}
/** Circuit ids are `n * SHARDS + shard` (n from the shard's counter): unique, and they name their shard. */
export const shardOfId = (id: number): number => id % SHARDS;

export const ALL_SHARDS: readonly number[] = Array.from({ length: SHARDS }, (_, i) => i);

/** Group items by their circuit's shard, keeping their order within each shard. */
export function byShard<T>(items: readonly T[], name: (item: T) => string): Map<number, T[]> {
  const out = new Map<number, T[]>();
  for (const item of items) {
    const shard = shardOf(name(item));
    const group = out.get(shard);
    if (group) group.push(item);
    else out.set(shard, [item]);
  }
  return out;
}
