/**
 * How late this process runs its callbacks: a 10 ms timer's overshoot, weighted as a caller
 * arriving at a random instant would feel it (a pause of `p` ms delays such a caller by `p/2`
 * on average, over `p` of every interval: `sum(p^2 / 2) / elapsed`). An adaptive limit takes it
 * off its latency samples, so that a busy or paused proxy (its own CPU, a GC pause, a starved
 * machine) is not read as the upstream queueing. prom-client and Node's monitorEventLoopDelay
 * count pauses per sample, not per elapsed time, which underweights long ones.
 */

const TICK_MS = 10;

let sampler: { weighted: number; elapsed: number } | null = null;

function start(): { weighted: number; elapsed: number } {
  const totals = { weighted: 0, elapsed: 0 };
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    const gap = now - last;
    last = now;
    const pause = Math.max(0, gap - TICK_MS);
    totals.weighted += (pause * pause) / 2;
    totals.elapsed += gap;
  }, TICK_MS);
  timer.unref();
  return totals;
}

/** A reader of this process's mean callback delay (ms) since its previous call; one sampler per process. */
export function loopLagReader(): () => number {
  sampler ??= start();
  const totals = sampler;
  let weighted = totals.weighted;
  let elapsed = totals.elapsed;
  return () => {
    const dw = totals.weighted - weighted;
    const de = totals.elapsed - elapsed;
    weighted = totals.weighted;
    elapsed = totals.elapsed;
    return de > 0 ? dw / de : 0;
  };
}
