import fc from 'fast-check';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { RedisCommands } from '../../src/store/redis/redis-commands.js';
import { RedisKeys } from '../../src/store/redis/redis-keys.js';
import { shardOf, SHARDS } from '../../src/store/redis/shards.js';
import { TransitionFeed, type FedTransition } from '../../src/store/redis/transition-feed.js';

/**
 * The event stream's cursor (src/store/redis/event-cursor.ts) over any interleaving: writes
 * to circuits of many shards, two hosts each reading the shards' streams in its own order,
 * and a client that reads from one host, stops anywhere, resumes on the other with the last
 * id it got, stops again and resumes on the first. Whatever the order, it gets every
 * transition exactly once, and each circuit's in the order they were written.
 */
const keys = new RedisKeys('p:');
const CIRCUITS = Array.from({ length: 12 }, (_, i) => `c${i}`);

type StreamEntry = [string, string[]];

/** The shards' streams in memory, served as XRANGE / XREVRANGE answer them. */
class Streams {
  readonly byKey = new Map<string, StreamEntry[]>(keys.shards.map((k) => [k.transitions, []]));
  private readonly seq = new Array<number>(SHARDS).fill(0);
  written = 0;

  write(name: string): void {
    const shard = shardOf(name);
    const seq = ++this.seq[shard]!;
    const at = ++this.written; // identifies the transition
    this.byKey
      .get(keys.shards[shard]!.transitions)!
      .push([`${seq}-0`, ['circuit', name, 'from', 'closed', 'to', 'open', 'reason', 'manual', 'at', String(at)]]);
  }

  commands(): RedisCommands {
    const command = async (args: string[]) => {
      const entries = this.byKey.get(args[1]!)!;
      const count = Number(args[args.indexOf('COUNT') + 1]);
      if (args[0] === 'XREVRANGE') return entries.slice(-count).reverse();
      const after = Number(args[2]!.slice(1).split('-')[0]);
      return entries.filter(([id]) => Number(id.split('-')[0]) > after).slice(0, count);
    };
    return { command } as unknown as RedisCommands;
  }
}

const settle = () => new Promise((r) => setImmediate(r));

/** Operations: a write to a circuit, or a host reading one shard's stream. */
const op = fc.oneof(
  fc.record({ kind: fc.constant('write' as const), circuit: fc.integer({ min: 0, max: CIRCUITS.length - 1 }) }),
  fc.record({
    kind: fc.constant('read' as const),
    host: fc.integer({ min: 0, max: 1 }),
    shard: fc.integer({ min: 0, max: SHARDS - 1 }),
  }),
);

/** What a client got from a host since `afterId` (skipping what it saw elsewhere), and the id it would resume with. */
function take(
  feed: TransitionFeed,
  from: { afterId: number; skip: ReadonlySet<number>; base: readonly number[] | null },
  limit: number,
) {
  const got: FedTransition[] = [];
  let lastId: string | null = null;
  for (const t of feed.after(from.afterId, Number.MAX_SAFE_INTEGER)) {
    if (got.length >= limit) break;
    if (from.skip.has(t.id)) continue;
    got.push(t);
    lastId = feed.eventId(t, from.base);
  }
  return { got, lastId };
}

describe('the Redis event cursor', () => {
  it('delivers each transition exactly once, in per-circuit order, across any interleaving and any two resumes on other hosts', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(op, { minLength: 1, maxLength: 120 }),
        fc.array(op, { maxLength: 120 }),
        fc.array(op, { maxLength: 120 }),
        fc.nat(200),
        fc.nat(200),
        async (before, between, after, cut1, cut2) => {
          const streams = new Streams();
          const hosts = [0, 1].map(
            () => new TransitionFeed(streams.commands(), keys, { logger: pino({ level: 'silent' }) }),
          );
          const run = async (ops: typeof before) => {
            for (const o of ops) {
              if (o.kind === 'write') streams.write(CIRCUITS[o.circuit]!);
              else hosts[o.host]!.hint(o.shard);
              await settle();
            }
          };
          for (const h of hosts) await h.start();
          try {
            await run(before);
            // The client reads up to `cut1` events from host 0, then disconnects.
            const first = take(hosts[0]!, { afterId: 0, skip: new Set(), base: null }, cut1);
            await run(between);
            let delivered = [...first.got];
            let last = first.lastId;
            // It resumes on host 1 (from the start if it got nothing), reads up to `cut2`, disconnects again.
            const resume1 =
              last === null ? { afterId: 0, skip: new Set<number>(), base: null } : await hosts[1]!.resume(last);
            if (resume1 === null || 'reset' in resume1) throw new Error(`cannot resume: ${JSON.stringify(resume1)}`);
            const second = take(hosts[1]!, resume1, cut2);
            delivered = [...delivered, ...second.got];
            last = second.lastId ?? last;
            await run(after);
            // Finally back on host 0, once every host has read everything.
            for (const h of hosts) await h.catchUp();
            const resume2 =
              last === null ? { afterId: 0, skip: new Set<number>(), base: null } : await hosts[0]!.resume(last);
            if (resume2 === null || 'reset' in resume2) throw new Error(`cannot resume: ${JSON.stringify(resume2)}`);
            delivered = [...delivered, ...take(hosts[0]!, resume2, Number.MAX_SAFE_INTEGER).got];

            const ats = delivered.map((t) => t.at);
            expect(new Set(ats).size).toBe(ats.length); // nothing twice
            expect(ats.length).toBe(streams.written); // nothing lost
            for (const name of CIRCUITS) {
              const mine = delivered.filter((t) => t.circuit === name).map((t) => t.at);
              expect(mine).toEqual([...mine].sort((x, y) => x - y)); // in the order written
            }
          } finally {
            for (const h of hosts) h.stop();
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('refuses a cursor past what the store holds as unknown, and answers null for text that is not a cursor', async () => {
    const streams = new Streams();
    streams.write('c0');
    const feed = new TransitionFeed(streams.commands(), keys, { logger: pino({ level: 'silent' }) });
    await feed.start();
    try {
      expect(await feed.resume('12')).toBeNull();
      expect(await feed.resume(new Array(SHARDS).fill('9').join('.'))).toEqual({ reset: 'unknown-event-id' });
      const resumed = await feed.resume(new Array(SHARDS).fill('0').join('.'));
      expect(resumed).toMatchObject({ afterId: 0 });
      expect(feed.after(0, 10).map((t) => t.circuit)).toEqual(['c0']);
    } finally {
      feed.stop();
    }
  });
});
