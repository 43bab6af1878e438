import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { RedisKeys } from '../../src/store/redis/redis-keys.js';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, request } from '../redis/http.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const keys = new RedisKeys('circuitlog:');

const exec = promisify(execFile);
const running: ServerProcess[] = [];
const redises: RedisServer[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
  await Promise.all(redises.splice(0).map((r) => r.stop('SIGKILL'))); // SIGKILL also ends a stopped (SIGSTOP) one
});

const cli = async (port: number, ...args: string[]) =>
  (await exec('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args])).stdout.trim();

/** A primary with one replica in sync, and a host on the primary with `store.redis` set as given. */
async function replicated(
  storeRedis: string,
): Promise<{ primary: RedisServer; replica: RedisServer; host: ServerProcess }> {
  const primary = await startRedis();
  const replica = await startRedis({ replicaOf: primary.port });
  redises.push(primary, replica);
  expect(
    await eventually(
      async () => (await cli(replica.port, 'INFO', 'replication')).includes('master_link_status:up'),
      10_000,
    ),
  ).toBe(true);
  const config = path.join(tempDir(), 'c.yaml');
  fs.writeFileSync(config, `store:\n  redis: ${storeRedis}\n`);
  const host = await startServer({ CIRCUITLOG_STORE: primary.url(), CIRCUITLOG_CONFIG: config }, { detached: true });
  running.push(host);
  return { primary, replica, host };
}

describe('store.redis.replicas_ack: a write is acknowledged once that many replicas have it (WAIT)', () => {
  it('with 1: acknowledged writes are on the replica; a replica that does not confirm within the timeout gives 503, and writes resume after', async () => {
    const { replica, host } = await replicated('{ replicas_ack: 1, replicas_ack_timeout_ms: 300 }');
    for (let i = 1; i <= 20; i++) {
      const write = await request(`${host.url}/circuits/acked/failure`, 'POST');
      expect(write.status).toBe(200);
    }
    expect(JSON.parse(await cli(replica.port, 'HGET', keys.circuit('acked'), 'c')).failureCount).toBe(20); // every acknowledged failure is on the replica
    replica.child.kill('SIGSTOP');
    try {
      const write = await request(`${host.url}/circuits/other/failure`, 'POST', 5_000);
      expect(write.status).toBe(503);
      expect(write.json).toMatchObject({ code: 'STORAGE_UNAVAILABLE' });
      expect(write.json.detail).toBe(
        'The shared store (Redis) confirmed the change on 0 of the 1 replicas required (store.redis.replicas_ack) within 300 ms; the change may or may not have been applied.',
      );
      expect(write.headers['retry-after']).toBe('1');
      expect((await request(`${host.url}/circuits/other/allowed`)).status).toBe(200); // reads need no replica
    } finally {
      replica.child.kill('SIGCONT');
    }
    expect(
      await eventually(async () => (await request(`${host.url}/circuits/other/failure`, 'POST')).status === 200, 5_000),
    ).toBe(true);
  });

  it('with 0 (the default): writes are acknowledged without the replica, the trade the docs describe', async () => {
    const { replica, host } = await replicated('{ replicas_ack: 0 }');
    replica.child.kill('SIGSTOP');
    try {
      expect((await request(`${host.url}/circuits/async/failure`, 'POST', 5_000)).status).toBe(200);
    } finally {
      replica.child.kill('SIGCONT');
    }
  });
});
