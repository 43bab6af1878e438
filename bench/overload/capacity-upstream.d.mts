export interface CapacityStats {
  readonly received: number;
  readonly served: number;
  readonly maxInService: number;
  readonly maxQueued: number;
  readonly refused: number;
  readonly inService: number;
  readonly queued: number;
}

export interface CapacityUpstream {
  readonly url: string;
  readonly port: number;
  stats(): CapacityStats;
  setLatency(ms: number): void;
  setStatus(code: number): void;
  close(): Promise<void>;
}

/** A loopback upstream serving at most `capacity` requests at once in `latencyMs`, queueing the rest. */
export function startCapacityUpstream(o: {
  capacity: number;
  latencyMs: number;
  maxQueue?: number;
  status?: number;
  port?: number;
}): Promise<CapacityUpstream>;
