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
  /** The outcome history (issue 31, config `history`); absent members take their defaults (`history-stream.ts`). */
  readonly history?: HistoryOptions;
}

/** Config `history`: whether circuits keep one, and its bounds per circuit. */
export interface HistoryOptions {
  /** Default true; a circuit whose policy says `history: false` keeps none either way. */
  readonly enabled?: boolean;
  /** Entries kept per circuit, approximately (`XADD MAXLEN ~`); default 200,000. */
  readonly maxOutcomes?: number;
  /** Entries older than this (behind the circuit's newest) are dropped (`XTRIM MINID ~`); default 168 h. */
  readonly maxAgeHours?: number;
}
