/**
 * Outcomes numbered by their source (issue 32): a relay (the edge agent) names itself once per
 * batch (`source`) and numbers each outcome it sends (`seq`, rising), and each circuit keeps the
 * highest number it applied per source, in the same write as the outcome. An outcome sent again
 * (its batch's answer was lost to a crash, a reset, a timeout, and the relay retried it) is then
 * recognised and changes nothing: an outcome through any agent counts exactly once. The idea is
 * Kafka's idempotent producer (a producer id and a sequence number per partition).
 *
 * Bounded: a circuit remembers the `MAX_SOURCES` sources heard from most recently, each for
 * `SOURCE_MEMORY_MS` after its last outcome; a retry later than that counts again.
 */
import type { Circuit, EpochMs, SourceMark } from './types.js';

/** Sources a circuit remembers (the most recent first to stay). */
export const MAX_SOURCES = 64;
/** How long a circuit remembers a source after its last outcome. */
export const SOURCE_MEMORY_MS = 10 * 60_000; // 10 min
/** A source id: what the agent makes (a random id per process) or any token of 8 to 64 of these characters. */
export const SOURCE_ID = /^[A-Za-z0-9_.:-]{8,64}$/;

/** Whether the circuit applied outcome `seq` of `source` already (or a later one of it). */
export function seenBefore(c: Circuit, source: string, seq: number): boolean {
  const marks = c.sources;
  if (marks == null) return false;
  for (const mark of marks) if (mark[0] === source) return seq <= mark[1];
  return false;
}

/** The circuit with `source`'s mark raised to `seq`; marks past the memory or the bound are dropped. */
export function withSourceMark(c: Circuit, source: string, seq: number, now: EpochMs): Circuit {
  const kept: SourceMark[] = [[source, seq, now]];
  for (const mark of c.sources ?? []) {
    if (kept.length === MAX_SOURCES) break;
    if (mark[0] !== source && now - mark[2] < SOURCE_MEMORY_MS) kept.push(mark);
  }
  return { ...c, sources: kept };
}
