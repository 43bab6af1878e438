import { createClient } from '@redis/client';

/** One admin connection: raw commands only. */
interface Admin {
  sendCommand(args: string[]): Promise<unknown>;
  destroy(): void;
}

/** What one node's `INFO errorstats` / `INFO commandstats` counted: redirects answered, ASKING received. */
export async function redirectCounts(
  port: number,
): Promise<{ ask: number; moved: number; tryagain: number; asking: number }> {
  const client = createClient({ url: `redis://127.0.0.1:${port}` });
  await client.connect();
  try {
    const info = `${await client.sendCommand(['INFO', 'errorstats'])}\n${await client.sendCommand(['INFO', 'commandstats'])}`;
    const count = (pattern: RegExp) => Number(pattern.exec(info)?.[1] ?? 0);
    return {
      ask: count(/errorstat_ASK:count=(\d+)/),
      moved: count(/errorstat_MOVED:count=(\d+)/),
      tryagain: count(/errorstat_TRYAGAIN:count=(\d+)/),
      asking: count(/cmdstat_asking:calls=(\d+)/),
    };
  } finally {
    client.destroy();
  }
}

export interface ReshardTiming {
  /** Pause after each MIGRATE of `batch` keys (some of the slot's keys on each side: TRYAGAIN for scripts). */
  readonly betweenBatchesMs: number;
  /** Pause once every key is on the target, before the slot is handed over (ASK for every command). */
  readonly holdMs: number;
  /** Keys per MIGRATE (`redis-cli --cluster reshard`'s `--cluster-pipeline`, 10 by default). */
  readonly batch: number;
}

/**
 * Move one slot from `from` to `to` as `redis-cli --cluster reshard` does: SETSLOT IMPORTING on
 * the target, MIGRATING on the source, MIGRATE its keys a batch at a time until none is left,
 * then SETSLOT NODE on the target, the source and every other primary. One connection per node
 * (as redis-cli holds), so the slot's migration lasts what `timing` says, not process starts.
 * Answers how many keys moved and how long the slot was in migration.
 */
export async function moveSlot(
  slot: number,
  from: number,
  to: number,
  others: readonly number[],
  timing: ReshardTiming,
): Promise<{ keys: number; migratingMs: number }> {
  const admins = new Map<number, Admin>();
  for (const port of [from, to, ...others]) {
    const client = createClient({ url: `redis://127.0.0.1:${port}` });
    await client.connect();
    admins.set(port, client as unknown as Admin);
  }
  const send = (port: number, ...args: string[]) => admins.get(port)!.sendCommand(args);
  try {
    const [fromId, toId] = [String(await send(from, 'CLUSTER', 'MYID')), String(await send(to, 'CLUSTER', 'MYID'))];
    await send(to, 'CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', fromId);
    await send(from, 'CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', toId);
    const started = Date.now();
    let moved = 0;
    for (;;) {
      const keys = (await send(
        from,
        'CLUSTER',
        'GETKEYSINSLOT',
        String(slot),
        String(timing.batch),
      )) as unknown as string[];
      if (keys.length === 0) break;
      await send(from, 'MIGRATE', '127.0.0.1', String(to), '', '0', '5000', 'KEYS', ...keys);
      moved += keys.length;
      await new Promise((r) => setTimeout(r, timing.betweenBatchesMs));
    }
    await new Promise((r) => setTimeout(r, timing.holdMs));
    for (const port of [to, from, ...others]) await send(port, 'CLUSTER', 'SETSLOT', String(slot), 'NODE', toId);
    return { keys: moved, migratingMs: Date.now() - started };
  } finally {
    for (const client of admins.values()) client.destroy();
  }
}
