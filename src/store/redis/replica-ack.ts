import { AppError } from '../../domain/errors.js';
import type { RedisCommands } from './redis-commands.js';

/**
 * `store.redis.replicas_ack`: after a write, `WAIT <n> <timeout>` on the same connection (it
 * waits for every write that connection sent before it, so one WAIT covers a whole group
 * commit). Fewer replicas within the timeout: 503, since the write is on the primary only and
 * a failover may lose it. With 0 (the default) nothing is sent: Redis's asynchronous
 * replication, as before. In a Cluster the WAIT goes to the primary of `routeKey`'s slot, on
 * the connection the write went on.
 */
export class ReplicaAck {
  constructor(
    private readonly redis: RedisCommands,
    private readonly replicas: number,
    private readonly timeoutMs: number,
  ) {}

  async confirm(routeKey: string): Promise<void> {
    if (this.replicas === 0) return;
    const got = await this.redis.command<number>(
      ['WAIT', String(this.replicas), String(this.timeoutMs)],
      'write',
      this.timeoutMs + 1_000,
      routeKey,
    );
    if (got >= this.replicas) return;
    throw new AppError(
      'STORAGE_UNAVAILABLE',
      `The shared store (Redis) confirmed the change on ${got} of the ${this.replicas} replicas required (store.redis.replicas_ack) within ${this.timeoutMs} ms; the change may or may not have been applied.`,
      { retryAfterSeconds: 1 },
    );
  }
}
