import type { AuditEntry } from '../domain/audit-entry.js';

/** An entry as `GET /audit` and the `audit` event send it: snake_case, `at` in ISO 8601, `before`/`after` as JSON values. */
export function auditEntryWire(e: AuditEntry) {
  return {
    id: e.id,
    at: new Date(e.at).toISOString(),
    who: e.who,
    action: e.action,
    circuit: e.circuit,
    before: parsed(e.before),
    after: parsed(e.after),
    request_id: e.requestId,
    remote: e.remote,
  };
}

/** Stored JSON text back to a value; text that is not JSON (a hand edit) is sent as the string it is. */
function parsed(text: string | null): unknown {
  if (text === null) return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
