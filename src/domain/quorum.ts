/**
 * The quorum a shared circuit needs before it opens for everyone: a trip rule that fires
 * opens the circuit only when enough distinct named callers saw the trouble themselves
 * (one host with a broken network path must not open the circuit for the fleet).
 * Pure data and functions; the caller table it reads is `caller-state.ts`.
 */
import type { CallerEntry } from './caller-state.js';
import type { EpochMs } from './types.js';

/** Policy field `quorum`; null (or absent) on a circuit: today's rules, no per-caller state. */
export interface QuorumPolicy {
  /** Distinct named callers (2-1,000) that must have failed in the window for a trip to open the circuit. */
  readonly minCallers: number;
  /** How far back a caller's last failure (or slow call) counts, in seconds. */
  readonly windowSeconds: number;
  /** Callers remembered per circuit (at most QUORUM_LIMITS' 1,000); past it the least recently seen is forgotten. */
  readonly maxCallers: number;
}

/** Bounds of each member (the wire schema and the docs use these). */
export const QUORUM_LIMITS = Object.freeze({
  minCallers: [2, 1_000],
  windowSeconds: [1, 86_400], // 1 s to 24 h
  // Every write to the circuit stores its table (about 190 bytes a caller at 128 characters, so
  // at most about 190 KB), and a batch's steps each walk it: see docs/api.md "Storage cost".
  maxCallers: [2, 1_000],
} as const);

/** Which evidence a trip rule needs: failures, or slow calls (the slow-call-rate rule). */
export type QuorumEvidence = 'failure' | 'slow';

/** Field-by-field equality (null and undefined are no quorum). */
export function sameQuorum(a: QuorumPolicy | null | undefined, b: QuorumPolicy | null | undefined): boolean {
  if (a == null || b == null) return (a ?? null) === (b ?? null);
  return a.minCallers === b.minCallers && a.windowSeconds === b.windowSeconds && a.maxCallers === b.maxCallers;
}

/** The oldest moment, in epoch ms, a failure still counts toward the quorum at `now`. */
export function quorumWindowStartMs(quorum: QuorumPolicy, now: EpochMs): EpochMs {
  return now - quorum.windowSeconds * 1000;
}

/**
 * The named callers whose last failure (or slow call) lies within the quorum's window,
 * sorted. Anonymous outcomes never have an entry, so they never count.
 */
export function quorumCallers(
  entries: readonly CallerEntry[],
  evidence: QuorumEvidence,
  quorum: QuorumPolicy,
  now: EpochMs,
): string[] {
  const from = quorumWindowStartMs(quorum, now);
  const at = evidence === 'failure' ? 2 : 3; // CallerEntry: failedAt, slowAt
  const callers: string[] = [];
  for (const e of entries) {
    const t = e[at];
    if (t !== null && t >= from) callers.push(e[0]);
  }
  return callers.sort();
}

/** The bound a caller table is held to: `maxCallers`, and never past the ceiling (a policy stored before it was lowered). */
export function callerTableBound(quorum: QuorumPolicy): number {
  return Math.min(quorum.maxCallers, QUORUM_LIMITS.maxCallers[1]);
}
