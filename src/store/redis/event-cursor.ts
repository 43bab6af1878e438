import { SHARDS } from './shards.js';

/**
 * The event stream's cursor on Redis: for every shard, the newest transition number (`seq`)
 * delivered, written as 16 whole numbers joined by dots (`3.0.17.…`). Each shard's stream is
 * read in order, so "every transition of shard s with seq <= v[s]" is exactly what a client
 * holding `v` has seen, whichever host sent it and in whichever order that host merged the
 * shards: a resume on any host sends each shard's transitions above `v[s]`, nothing else.
 * Clients treat ids as opaque (the SSE spec's `Last-Event-ID`); see docs/many-hosts.md.
 */
export type Cursor = readonly number[];

const PART = /^\d{1,15}$/;

export const zeroCursor = (): number[] => new Array<number>(SHARDS).fill(0);

export const formatCursor = (v: Cursor): string => v.join('.');

/** The cursor a `Last-Event-ID` names, or null when it is not one. */
export function parseCursor(text: string): number[] | null {
  const parts = text.split('.');
  if (parts.length !== SHARDS || !parts.every((p) => PART.test(p))) return null;
  return parts.map(Number);
}

/** Everything either has seen (per shard the higher number: each covers a prefix of the shard). */
export const mergeCursor = (a: Cursor, b: Cursor): number[] => a.map((x, i) => Math.max(x, b[i]!));

/** Has a client at `v` seen transition `seq` of `shard`? */
export const covers = (v: Cursor, shard: number, seq: number): boolean => seq <= v[shard]!;
