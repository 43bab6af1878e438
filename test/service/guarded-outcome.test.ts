import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { createClient } from '@redis/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newCircuit, type Circuit, type Step } from '../../src/domain/circuit.js';
import { capEjection, isEjected } from '../../src/proxy/guard-rails.js';
import { BreakerService } from '../../src/service/breaker-service.js';
import type { CircuitStore } from '../../src/store/circuit-store.js';
import { SqliteCircuitStore } from '../../src/store/sqlite/circuit-store.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../../src/store/sqlite/database.js';
import type { RedisConnection } from '../../src/store/redis/connect.js';
import type { Subscriber } from '../../src/store/redis/change-subscription.js';
import { connectionLink } from '../../src/store/redis/redis-commands.js';
import { RedisCircuitStore } from '../../src/store/redis/redis-store.js';
import { FakeClock, silentLogger } from '../helper.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { tempDir } from '../server-process.js';

const NODES = ['u/a', 'u/b', 'u/c'];
const settings = { failureThreshold: 2, timeoutSeconds: 60, halfOpenMaxCalls: 1 };
/** At most one of the three nodes out. */
const capOne = (step: Step, before: Circuit | null, peers: readonly (Circuit | null)[]) =>
  capEjection(step, before, peers.filter(isEjected).length, 1);
const peersOf = (name: string) => NODES.filter((n) => n !== name);

let redis: RedisServer;
const connections: RedisConnection[] = [];
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  for (const c of connections.splice(0)) c.destroy();
  await redis.stop('SIGKILL');
});

function redisStore(prefix: string): RedisCircuitStore {
  const connect = () => {
    const client = createClient({ url: redis.url(), RESP: 2 }) as unknown as RedisConnection;
    client.on('error', () => {});
    client.connect().catch(() => {});
    connections.push(client);
    return client;
  };
  return new RedisCircuitStore(connectionLink(connect()), connect() as unknown as Subscriber, {
    prefix,
    logger: silentLogger,
  });
}

/** Two hosts sharing one store: two SQLite connections on one file, or two Redis stores on one prefix. */
const backends: [string, () => Promise<[CircuitStore, CircuitStore]>][] = [
  [
    'SQLite',
    async () => {
      const file = path.join(tempDir(), 'db.sqlite');
      const open = () => {
        const db = openDatabase(file);
        migrate(db, readMigrations(defaultMigrationsDir()));
        return new SqliteCircuitStore(db);
      };
      return [open(), open()];
    },
  ],
  [
    'Redis',
    async () => {
      const prefix = `g-${randomUUID()}:`;
      const stores = [redisStore(prefix), redisStore(prefix)] as const;
      await Promise.all(stores.map((s) => s.ready()));
      return [...stores];
    },
  ],
];

const service = (store: CircuitStore, clock: FakeClock) =>
  new BreakerService({
    store,
    clock: clock.now,
    logger: silentLogger,
    circuitDefaults: settings,
    policy: { probeLeaseMs: 10_000 },
    groupCommit: false,
  });

async function seed(breaker: BreakerService, clock: FakeClock): Promise<void> {
  for (const name of NODES) await breaker.configure(name, () => newCircuit(name, settings, clock.now()));
}

const fail = (breaker: BreakerService, name: string) =>
  breaker.record(name, { success: false }, { among: { peers: peersOf(name), guard: capOne } }).then((s) => s.circuit);

describe.each(backends)('record among peers on %s', (_name, open) => {
  it('opens a node while its peers leave room under the guard', async () => {
    const clock = new FakeClock();
    const [store] = await open();
    const breaker = service(store, clock);
    await seed(breaker, clock);
    await fail(breaker, 'u/a');
    expect((await fail(breaker, 'u/a')).state).toBe('open');
  });

  it('withholds the trip of a second node and stores an ejection_capped event, peers unchanged', async () => {
    const clock = new FakeClock();
    const [store] = await open();
    const breaker = service(store, clock);
    await seed(breaker, clock);
    for (let i = 0; i < 2; i++) await fail(breaker, 'u/a');
    await fail(breaker, 'u/b');
    const b = await fail(breaker, 'u/b');
    expect(b).toMatchObject({ state: 'closed', failureCount: 0 });
    expect((await breaker.events('u/b', 10))!.map((t) => t.reason)).toEqual(['ejection_capped']);
    expect((await breaker.get('u/a'))!.state).toBe('open');
    expect((await breaker.get('u/c'))!.state).toBe('closed');
  });

  it('lets only one of two hosts tripping two nodes at once open its node', async () => {
    for (let round = 0; round < 10; round++) {
      const clock = new FakeClock();
      const [one, two] = await open();
      const [hostA, hostB] = [service(one, clock), service(two, clock)];
      await seed(hostA, clock);
      await fail(hostA, 'u/a');
      await fail(hostB, 'u/b');
      await Promise.all([hostB.get('u/a'), hostA.get('u/b')]); // each host has read the other's node as closed
      await Promise.all([fail(hostA, 'u/a'), fail(hostB, 'u/b')]);
      const states = await Promise.all(NODES.map(async (n) => (await hostA.get(n))!.state));
      expect(states.filter((s) => s === 'open')).toHaveLength(1);
    }
  });
});
