// The edge section's count of batches per 10 ms (bench/edge.mjs; test/bench/edge-measures.test.ts).

/** Batches per 10 ms: the average over `ms`, the most in any 10 ms (sliding) and in one of the fixed 10 ms slots of the clock (times in ms). */
export function batchWindows(times, ms) {
  const t = [...times].sort((a, b) => a - b);
  let sliding = 0;
  for (let i = 0, j = 0; i < t.length; i++) {
    while (t[i] - t[j] >= 10) j++;
    sliding = Math.max(sliding, i - j + 1);
  }
  const slots = new Map();
  for (const x of t) {
    const k = Math.floor(x / 10);
    slots.set(k, (slots.get(k) ?? 0) + 1);
  }
  return {
    batches: t.length,
    avgPer10ms: t.length / (ms / 10),
    maxSliding: sliding,
    maxFixed: Math.max(0, ...slots.values()),
  };
}
