/**
 * The quorum a shared circuit needs before it opens for everyone: a trip rule that fires
 * opens the circuit only when enough distinct named callers saw the trouble themselves
 * (one host with a broken network path must not open the circuit for the fleet); with
 * credentials (issue 30) enough distinct credentials, whatever names they report as.
 * Pure data and functions; the caller table it reads is `caller-state.ts`.
 */
import type { QuorumPolicy } from './policy.js';
import type { CallerEntry, EpochMs } from './types.js';

export type { QuorumPolicy } from './policy.js';

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

/**
 * How many distinct voters (issue 30) the callers `quorumCallers` names have: one credential
 * reporting as many callers is one vote. An entry without a voter (no credentials configured)
 * counts as its own caller name, so without credentials this is `quorumCallers(...).length`.
 */
export function quorumVoterCount(
  entries: readonly CallerEntry[],
  evidence: QuorumEvidence,
  quorum: QuorumPolicy,
  now: EpochMs,
): number {
  const from = quorumWindowStartMs(quorum, now);
  const at = evidence === 'failure' ? 2 : 3; // CallerEntry: failedAt, slowAt
  const voters = new Set<string>();
  for (const e of entries) {
    const t = e[at];
    if (t !== null && t >= from) voters.add(e[7] ?? e[0]);
  }
  return voters.size;
}

/** The bound a caller table is held to: `maxCallers`, and never past the ceiling (a policy stored before it was lowered). */
export function callerTableBound(quorum: QuorumPolicy): number {
  return Math.min(quorum.maxCallers, QUORUM_LIMITS.maxCallers[1]);
}
