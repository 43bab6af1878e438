import type { IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import { identityOf } from '../auth/request-identity.js';
import type { AuditAction, AuditEntry, AuditEntryInput, AuditPage, AuditQuery } from '../domain/audit-entry.js';
import { contextRequestId } from '../request-id.js';
import type { AuditStore } from '../store/audit-store.js';
import type { MaybePromise } from '../store/maybe-promise.js';

/**
 * The audit log (issue 30): every change a person or service makes is one entry, stored
 * (`AuditStore`) and handed to the listeners (the `audit` event of `/events/stream`).
 * `record` resolves once the entry is stored; a store that fails is logged (`audit_not_recorded`,
 * level error) and never undoes or fails the change it records, which is already committed.
 */
export interface AuditLog {
  /** What a page cursor (`before`) looks like in this log's store. */
  readonly cursorPattern: RegExp;
  record(entry: AuditEntryInput): Promise<void>;
  /** `record`, unless an entry of the same action and `after` was stored within `withinMs` (by any process). */
  recordOnce(entry: AuditEntryInput, withinMs: number): Promise<void>;
  page(query: AuditQuery): Promise<AuditPage>;
  /** Called with every entry this process stores; answers the unsubscribe. */
  onEntry(listener: (entry: AuditEntry) => void): () => void;
}

export function createAuditLog(store: AuditStore, logger: Logger): AuditLog {
  const listeners = new Set<(entry: AuditEntry) => void>();
  return {
    cursorPattern: store.cursorPattern,
    record: (input) => write(input, () => store.append(input)),
    recordOnce: (input, withinMs) => write(input, () => store.appendOnce(input, withinMs)),
    page: async (query) => store.page(query),
    onEntry(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };

  async function write(input: AuditEntryInput, append: () => MaybePromise<AuditEntry | null>): Promise<void> {
    let entry: AuditEntry | null;
    try {
      entry = await append();
    } catch (error) {
      logger.error(
        { event: 'audit_not_recorded', action: input.action, who: input.who, circuit: input.circuit, err: error },
        `audit entry not recorded: ${input.action} by ${input.who}`,
      );
      return;
    }
    if (entry !== null) for (const listener of listeners) listener(entry);
  }
}

/**
 * The log of an app built without one (`createApp` with no `audit`: tests, embedders): records
 * nothing and pages nothing, so `GET /audit` is there and answers an empty page. The server
 * (src/main.ts) always builds a real one.
 */
export const NO_AUDIT_LOG: AuditLog = {
  cursorPattern: /^\d{1,15}$/,
  record: async () => {},
  recordOnce: async () => {},
  page: async () => ({ entries: [], nextCursor: null }),
  onEntry: () => () => {},
};

/** Who made a request and from where, as an entry names them. */
export interface RequestOrigin {
  readonly who: string;
  readonly requestId: string | null;
  readonly remote: string | null;
}

/** The identity, request id and remote address of a Hono request (`c.env.incoming` under @hono/node-server). */
export function requestOrigin(c: { env: unknown }): RequestOrigin {
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  return {
    who: identityOf(c).id,
    requestId: contextRequestId(c),
    remote: incoming?.socket?.remoteAddress ?? null,
  };
}

/** Record one change a request made (nothing when the app has no audit log). */
export function auditRequest(
  audit: AuditLog | undefined,
  c: { env: unknown },
  change: { action: AuditAction; at: number; circuit: string | null; before: unknown; after: unknown },
): Promise<void> {
  if (audit === undefined) return Promise.resolve();
  return audit.record({ ...requestOrigin(c), ...change });
}

/** What a credentials reload changed: the credential ids before and after (never a token or its hash). */
export interface CredentialsReload {
  readonly before: readonly string[];
  readonly after: readonly string[];
}

/** Workers and hosts reloading the same file record one entry (the same ids after, within this long). */
export const RELOAD_DEDUP_MS = 10_000; // 10 s

/**
 * The credentials reload's entry (the `onReload` hook of src/auth/credential-source.ts, wired in
 * src/main.ts): one `credentials_reloaded` entry per change of the set in force, by `system` (a
 * signal or a file change, not a request), before and after naming the credential ids. Every
 * worker (and host) reloads the same file: the first to store its entry records it, the others'
 * identical ones within RELOAD_DEDUP_MS are dropped (`recordOnce`).
 */
export function reloadRecorder(audit: AuditLog, clock: () => number): (reload: CredentialsReload) => Promise<void> {
  return (reload) =>
    audit.recordOnce(
      {
        at: clock(),
        who: 'system',
        action: 'credentials_reloaded',
        circuit: null,
        before: { credentials: reload.before },
        after: { credentials: reload.after },
        requestId: null,
        remote: null,
      },
      RELOAD_DEDUP_MS,
    );
}
