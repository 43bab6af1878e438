import type { Logger } from 'pino';
import { configDefinedCircuit, type Config } from '../config.js';
import { LeaderElection } from './leader.js';
import type { Observability } from '../observe/observability.js';
import { createHealthChecker } from '../proxy/health-checker.js';
import type { ProxyOptions } from '../proxy/proxy-routes.js';
import type { BreakerService } from '../service/breaker-service.js';
import { DueTransitions } from '../service/due-transitions.js';
import { Housekeeping } from '../service/housekeeping.js';
import type { HousekeepingStore } from '../store/housekeeping-store.js';
import type { LeaseStore } from '../store/lease-store.js';
import type { AuditStore } from '../store/audit-store.js';

const LEASE_RENEW_MS = 1_000; // 1 s
const LEASE_TTL_MS = 3_000; // 3 s: a dead leader's job moves to another worker within this

export interface JobDeps {
  readonly breaker: BreakerService;
  readonly logger: Logger;
  readonly proxy: ProxyOptions | undefined;
  readonly observe: Observability;
  readonly housekeeping: HousekeepingStore;
  readonly leases: LeaseStore;
  /** The audit log's store, trimmed to `audit.retention_days` by the housekeeping job. */
  readonly audit?: AuditStore;
  /** One of several workers on one SQLite file. */
  readonly shared: boolean;
  /** This process in the lease (`host:pid`). */
  readonly owner: string;
}

export interface Jobs {
  start(): void;
  stop(): void;
}

/**
 * The singleton jobs: active health checks, publishing due open -> half-open transitions and
 * housekeeping (retention, idle deletion). Alone on SQLite this process runs them; with
 * several workers, or on Redis (one process across all hosts), the holder of a lease does.
 */
export function singletonJobs(config: Config, deps: JobDeps): Jobs {
  const { breaker, logger, proxy } = deps;
  const health = proxy ? createHealthChecker({ ...proxy, breaker, logger, hooks: deps.observe.proxyHooks }) : null;
  const housekeeping = new Housekeeping(deps.housekeeping, Date.now, logger, {
    maxAgeDays: config.events.retention.max_age_days,
    maxPerCircuit: config.events.retention.max_per_circuit,
    idleCircuitDays: config.limits.idle_circuit_days,
    isDeclared: configDefinedCircuit(config),
    audit: deps.audit && { store: deps.audit, retentionDays: config.audit.retention_days },
    historyMaxAgeHours: config.history.max_age_hours, // entries kept from before history.enabled was turned off too
  });
  const due = new DueTransitions(breaker, logger);
  const jobs: Jobs = {
    start: () => {
      health?.start();
      due.start();
      housekeeping.start();
    },
    stop: () => {
      health?.stop();
      due.stop();
      housekeeping.stop();
    },
  };
  if (!deps.shared && config.store.kind !== 'redis') return jobs;
  const leader = new LeaderElection(deps.leases, Date.now, logger, {
    lease: 'health-checks', // the name predates housekeeping, which the same holder runs
    owner: deps.owner,
    renewMs: LEASE_RENEW_MS,
    ttlMs: LEASE_TTL_MS,
    onAcquire: jobs.start,
    onLose: jobs.stop,
  });
  return { start: () => leader.start(), stop: () => leader.stop() };
}
