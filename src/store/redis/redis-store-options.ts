import type { Logger } from 'pino';

/** Options of `RedisCircuitStore` (`redis-store.ts`). */
export interface RedisStoreOptions {
  /** Key prefix; several services (or tests) can share one database with different ones. */
  readonly prefix?: string;
  /** The database number of the URL: Redis pub/sub channels are shared by all databases. */
  readonly db?: number;
  /** A command with no answer within this long fails with 503 STORAGE_UNAVAILABLE. */
  readonly timeoutMs?: number;
  readonly logger: Logger;
  /** Replicas that must confirm each write (`WAIT`) before it is acknowledged; default 0. */
  readonly replicasAck?: number;
  readonly replicasAckTimeoutMs?: number;
}
