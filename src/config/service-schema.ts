/** The config file's sections about the service itself: server, metrics, events, limits, store. */
import { z } from 'zod';
import { positiveInt } from './fields.js';

/** Timeouts of the HTTP server itself (node:http), so slow or idle clients cannot hold connections. */
/** Host names a listener answers besides IP literals and localhost (`.example.com`: the domain and its subdomains). */
export const allowedHostsSchema = z
  .array(
    z
      .string()
      .regex(
        /^\.?(?!-)[A-Za-z0-9-]{1,63}(?<!-)(?:\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*$/,
        'must be a host name (letters, digits, - and .), or .domain for a domain and its subdomains',
      ),
  )
  .max(1_000);

export const serverSchema = z
  .object({
    /** Time to receive a request's headers (slowloris). */
    headers_timeout_ms: positiveInt(600_000).default(10_000), // 10 s
    /** Time to receive a whole request, body included. */
    request_timeout_ms: positiveInt(3_600_000).default(60_000), // 60 s
    /** How long an idle keep-alive connection stays open between requests. */
    keep_alive_timeout_ms: positiveInt(600_000).default(5_000), // 5 s
    /**
     * Host names answered besides IP literals and localhost (`.example.com`: the domain and
     * its subdomains); others get 421. Unset: only those on loopback, no check elsewhere.
     */
    allowed_hosts: allowedHostsSchema.optional(),
  })
  .strict()
  .refine((s) => s.headers_timeout_ms <= s.request_timeout_ms, {
    path: ['headers_timeout_ms'],
    message: 'must not exceed server.request_timeout_ms',
  });

export const metricsSchema = z
  .object({
    /** Serve /metrics and count; off takes the counters off the hot path too. */
    enabled: z.boolean().default(true),
    /** Circuits with their own series (the first by creation); the rest only in circuitlog_circuits. */
    max_circuits: z.number().int().min(0).max(1_000_000).default(10_000),
  })
  .strict();

/** How long the transition log keeps its rows (docs/operations.md#retention); 0 turns a bound off. */
const retentionSchema = z
  .object({
    /** Transitions older than this are deleted. */
    max_age_days: z.number().int().min(0).max(36_500).default(30), // 30 days
    /** Only each circuit's newest this many transitions are kept. */
    max_per_circuit: z.number().int().min(0).max(1_000_000).default(1_000),
  })
  .strict();

export const eventsSchema = z
  .object({
    /** Open /events/stream connections per worker; one more gets a 503. */
    max_streams: positiveInt(1_000_000).default(1_000),
    /** Unsent bytes one stream may hold; past it the stream is destroyed (the client resumes with Last-Event-ID). */
    max_stream_buffer_bytes: z
      .number()
      .int()
      .min(16 * 1024)
      .max(1024 * 1024 * 1024)
      .default(1024 * 1024), // 1 MiB, as Envoy's per-connection buffer limit
    /**
     * How often a worker reads the transitions table for its streams (SQLite). A transition made
     * here, or by a sibling worker (which says so at once), is read at once anyway; this bounds
     * the delay when a word is lost, and is what another process on the file waits (the CLI).
     */
    poll_ms: z.number().int().min(10).max(60_000).default(200),
    retention: retentionSchema.prefault({}),
  })
  .strict();

/** Bounds on what callers can make the service hold (docs/operations.md#limits). */
export const limitsSchema = z
  .object({
    /** Closed, unforced, undeclared circuits with no outcome for this long are deleted; null: never. */
    idle_circuit_days: positiveInt(36_500).nullable().default(null),
    /** Circuits the store may hold; a new name past it gets 507 too-many-circuits. */
    max_circuits: positiveInt(1_000_000_000).default(1_000_000),
  })
  .strict();

export const storeSchema = z
  .object({
    redis: z
      .object({
        /**
         * Replicas that must confirm a write (Redis `WAIT`) before it is acknowledged; 0: Redis's
         * asynchronous replication (an acknowledged write can be lost in a failover).
         */
        replicas_ack: z.number().int().min(0).max(16).default(0),
        /** How long `WAIT` waits for them; past it the write answers 503 storage-unavailable. */
        replicas_ack_timeout_ms: positiveInt(60_000).default(1_000), // 1 s
      })
      .strict()
      .prefault({}),
  })
  .strict();

export type ServerConfig = z.infer<typeof serverSchema>;
